"""The rules: checked on every progress event of a watched run, without a model call.

A run's ``RunCounters`` are kept from its own events (``model.response`` is one iteration,
``tool.call`` one call of a tool) and its live ``RunInfo`` (tokens used, token budget). Each
rule of a spec fires at most once per run (``RunCounters.fired``), and not again in a run
started again under its id after a restart (``Supervisor`` reads the steering log it gets back).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tinyagents._record import Record
from tinyagents.events.models import Event, ModelEvent, ToolEvent
from tinyagents.runs.info import RunInfo
from tinyagents.supervisor.spec import BudgetFraction, IterationReached, Rule, ToolRepeated


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class RunCounters(Record):
    """What the supervisor counted of one run. Tool names count only when the run was granted
    them (declared); any other name a model makes up only adds to ``undeclared_calls``, so a
    model-chosen string is never kept, shown to the judge or used as a key."""

    declared: frozenset[str]
    iteration: int = 0
    tool_calls: Counter[str] = field(default_factory=Counter)
    undeclared_calls: int = 0
    #: Indexes (in ``spec.rules``) of the rules that fired for this run; a rule given twice
    #: fires as one, both its indexes here.
    fired: set[int] = field(default_factory=set)

    def record(self, event: Event) -> bool:
        """Count a progress event; True if it is one the rules look at."""
        if isinstance(event, ModelEvent):
            if event.type != "model.response":
                return False
            self.iteration += 1
            return True
        if isinstance(event, ToolEvent) and event.type == "tool.call":
            if event.name in self.declared:
                self.tool_calls[event.name] += 1
            else:
                self.undeclared_calls += 1
            return True
        return False


def tokens_and_budget(info: RunInfo) -> tuple[int, int | None]:
    return info.usage.total_tokens, info.limits.max_tokens


def check(rule: Rule, counters: RunCounters, info: RunInfo, event: Event) -> str | None:
    """Why ``rule`` fires on ``event`` (the reason for the action), or None."""
    if isinstance(rule, ToolRepeated):
        if not isinstance(event, ToolEvent):
            return None
        name = event.name
        if name not in counters.declared or (rule.tool is not None and name != rule.tool):
            return None
        if counters.tool_calls[name] >= rule.count:
            return f"tool {name!r} called {counters.tool_calls[name]} times (limit {rule.count})"
        return None
    if not isinstance(event, ModelEvent):
        return None
    if isinstance(rule, IterationReached):
        if counters.iteration >= rule.gte:
            return f"iteration {counters.iteration} reached (limit {rule.gte})"
        return None
    if isinstance(rule, BudgetFraction):
        used, budget = tokens_and_budget(info)
        if budget is None:  # no budget, no fraction: this rule never fires
            return None
        if used / budget > rule.gt:
            return f"{used} of {budget} tokens used (more than {rule.gt:.0%} of the budget)"
    return None
