"""Enforcing ``RunLimits``: budget reserved up the run tree before each model and tool call.

The limit and usage types live in ``tinyagents.runs.limits`` (the steering policies need them
too); this module is where a running agent loop spends against them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tinyagents import _clock
from tinyagents.errors import ConfigurationError, RunLimitExceeded
from tinyagents.harness.model import Usage, known_cost
from tinyagents.runs.info import RunInfo
from tinyagents.runs.limits import RunLimits, RunUsage, past, reached
from tinyagents.runs.tree import RunTree

_log = logging.getLogger(__name__)
_bad_cost_logged = False  # a model's cost that is no price was logged


def check_limits(limits: object) -> None:
    """Refuse ``limits`` that are not a ``RunLimits`` (or None): a dict was taken, and every
    run given it failed with an AttributeError at its first boundary."""
    if limits is not None and not isinstance(limits, RunLimits):
        raise ConfigurationError(
            f"limits must be a RunLimits, got {type(limits).__name__}; e.g. "
            "limits=RunLimits(max_model_calls=10) (RunLimits(**d) for a dict d)"
        )


def check_deadline(info: RunInfo) -> None:
    limits, usage = info.limits, info.usage
    if limits.deadline_s is None or usage.started_at is None:
        return
    elapsed = _clock.monotonic() - usage.started_at
    if elapsed >= limits.deadline_s:
        raise RunLimitExceeded(
            "deadline_s", round(elapsed, 3), limits.deadline_s, run_id=info.run_id
        )


def deadline_left(info: RunInfo) -> float | None:
    """Seconds left before the run's ``deadline_s`` (None: it has none): what a model or
    tool call in flight may still take."""
    limits, usage = info.limits, info.usage
    if limits.deadline_s is None or usage.started_at is None:
        return None
    return max(0.0, limits.deadline_s - (_clock.monotonic() - usage.started_at))


def reserve_model_call(info: RunInfo, tree: RunTree) -> int | None:
    """Charge one model call to the run and every ancestor, or raise if any has none left.
    Returns the tokens the call may use: the smallest ``max_tokens`` or ``max_output_tokens``
    budget left up the chain (None when no run in it has either), which the loop sends as the
    request's ``max_tokens``.

    Check and charge happen together, with no await between them, so runs of one tree going
    concurrently can never make more calls than any ancestor's limit between them. Tokens are
    known only after the call: ``record_model_usage`` counts them and ``check_token_budget``
    ends the run if the call went past a budget anyway (its prompt counts too, and a provider
    may not honour ``max_tokens``).
    """
    chain = _root_first(info, tree)
    tokens_left: int | None = None
    for target in chain:
        _check_model_budget(target)
        for name, used in _token_counts(target.usage).items():
            limit = getattr(target.limits, name)
            if limit is not None and name in _OUTPUT_BOUNDS:  # the output is what it bounds
                left = limit - used
                tokens_left = left if tokens_left is None else min(tokens_left, left)
    for target in chain:
        target.usage.model_calls += 1
    return tokens_left


def model_call_left(info: RunInfo, tree: RunTree) -> bool:
    """Whether ``reserve_model_call`` would let the run (and every ancestor) make one more
    model call now: no call, token or time budget up the chain is spent. Charges nothing."""
    try:
        for target in _root_first(info, tree):
            _check_model_budget(target)
    except RunLimitExceeded:
        return False
    return True


def check_token_budget(
    info: RunInfo,
    tree: RunTree,
    *,
    streaming: Usage | None = None,
    response: Usage | None = None,
) -> None:
    """After a call was counted: raise if the run or an ancestor has used more tokens than
    its ``max_tokens``, ``max_input_tokens`` or ``max_output_tokens``, or more than its
    ``max_cost`` (using all of one exactly is allowed; the next call is then refused).

    ``streaming``: what the response being streamed has used so far (not counted yet), added
    to what each run has used; on the chunk that takes one past a budget, it is counted (the
    provider spent it) and the stream is stopped by the raise. ``response``: the usage of
    the response just counted. Either is also held to each run's
    ``max_input_tokens_per_request``: that request's input alone."""
    extra = _token_counts(streaming) if streaming is not None else None
    this = streaming if streaming is not None else response
    chain = _root_first(info, tree)
    for target in chain:
        for name, used in _token_counts(target.usage).items():
            limit = getattr(target.limits, name)
            if extra is not None:
                used += extra[name]
            if limit is not None and past(name, used, limit):
                if streaming is not None:
                    record_model_usage(info, tree, streaming)
                raise RunLimitExceeded(name, used, limit, run_id=target.run_id)
    if this is None:
        return
    for target in chain:
        cap = target.limits.max_input_tokens_per_request
        if cap is not None and this.input_tokens > cap:
            if streaming is not None:
                record_model_usage(info, tree, streaming)
            raise RunLimitExceeded(
                "max_input_tokens_per_request", this.input_tokens, cap, run_id=target.run_id
            )


def _root_first(info: RunInfo, tree: RunTree) -> tuple[RunInfo, ...]:
    """The run and its ancestors, checked from the root down: a child's limits are what its
    ancestors had left when it started, so when one of theirs is spent as well, that budget
    is the one to name (the child's own limit, equal to it, is no limit it was configured
    with, and a larger one for the child would not help)."""
    return (*reversed(tree.ancestors(info.run_id)), info)


#: The limits that bound what a response may write (sent as a request's ``max_tokens``).
_OUTPUT_BOUNDS = frozenset({"max_tokens", "max_output_tokens"})


def _token_counts(usage: RunUsage | Usage) -> dict[str, float]:
    """What each cumulative usage limit counts (of a run's usage, or of one response's)."""
    return {
        "max_tokens": usage.total_tokens,
        "max_input_tokens": usage.input_tokens,
        "max_output_tokens": usage.output_tokens,
        "max_cost": usage.cost or 0.0,  # a response of unknown price counts nothing
    }


def reserve_tool_call(info: RunInfo, tree: RunTree, *, calls_left: int = 1) -> None:
    """Charge one tool call to the run and every ancestor, or raise if any has none left.

    ``calls_left`` is how many calls of the model's response are still to run, this one
    included: they are checked together, so a batch that does not fit the budget of the run
    or of an ancestor stops before its next call, not part-way into it (a side-effecting tool
    would have done half its work on a limit known before the call). pydantic-ai checks a
    response's calls against ``tool_calls_limit`` together the same way.

    A run that a child took past a token budget (its own or an ancestor's) runs no further
    tool either: the budget is known to be spent, and the run ends at once, as it does when
    its own response goes past it.
    """
    chain = _root_first(info, tree)
    for target in chain:
        _check_tool_budget(target, calls_left)
    check_token_budget(info, tree)
    for target in chain:
        target.usage.tool_calls += 1


def release_tool_call(info: RunInfo, tree: RunTree) -> None:
    """Give back a tool call ``reserve_tool_call`` charged, to the run and every ancestor: the
    call was refused before its tool ran (``ToolResult.refused``), as pydantic-ai does not
    count a call the model must correct."""
    for target in (info, *tree.ancestors(info.run_id)):
        target.usage.tool_calls = max(target.usage.tool_calls - 1, 0)


def record_model_usage(info: RunInfo, tree: RunTree, usage: Usage) -> None:
    """Count a model call's tokens and cost on the run and every ancestor (usage rolls up).
    A count below 0 (a custom model passing on a server's bogus one) counts as 0, as
    ``LiteLLMModel`` reads it: added as it came, it refilled every token budget up the tree."""
    input_tokens, output_tokens = max(usage.input_tokens, 0), max(usage.output_tokens, 0)
    cost = usage.cost
    if cost is not None:
        cost = known_cost(cost)
        if cost is None:
            _unknown_cost(info, usage.cost)
    for target in (info, *tree.ancestors(info.run_id)):
        u = target.usage
        u.input_tokens += input_tokens
        u.output_tokens += output_tokens
        u.cost += cost or 0.0


def _unknown_cost(info: RunInfo, cost: object) -> None:
    """Log, once per process, a model's cost that is no price (it is counted as unknown)."""
    global _bad_cost_logged
    if not _bad_cost_logged:
        _bad_cost_logged = True
        _log.warning(
            "run %s: a model answered cost %r, which is no finite number >= 0; it is taken as "
            "unknown and not added (logged once)",
            info.run_id,
            cost,
        )


def _check_model_budget(info: RunInfo) -> None:
    limits, usage = info.limits, info.usage
    if limits.max_model_calls is not None and usage.model_calls >= limits.max_model_calls:
        raise RunLimitExceeded(
            "max_model_calls", usage.model_calls, limits.max_model_calls, run_id=info.run_id
        )
    for name, used in _token_counts(usage).items():
        limit = getattr(limits, name)
        if limit is not None and reached(name, used, limit):
            raise RunLimitExceeded(name, used, limit, run_id=info.run_id)
    check_deadline(info)


def _check_tool_budget(info: RunInfo, calls: int) -> None:
    limits, usage = info.limits, info.usage
    limit, made = limits.max_tool_calls, usage.tool_calls
    if limit is not None and made + calls > limit:
        if calls == 1:
            raise RunLimitExceeded("max_tool_calls", made, limit, run_id=info.run_id)
        raise RunLimitExceeded(
            "max_tool_calls",
            made + calls,
            limit,
            run_id=info.run_id,
            detail=f"{made} made; the {calls} tool calls left in the model's response would "
            f"make {made + calls}, so none of them was run",
        )
    check_deadline(info)


def child_limits(
    requested: RunLimits, parent: RunInfo, ancestors: Iterable[RunInfo] = ()
) -> RunLimits:
    """The limits a child of ``parent`` really gets: never above what the parent, or any of
    its ``ancestors`` (the runs above it: the child's calls count against each), has left."""
    if parent.depth + 1 > parent.limits.max_depth:
        # used: the depth the child would have had
        raise RunLimitExceeded(
            "max_depth",
            parent.depth + 1,
            parent.limits.max_depth,
            run_id=parent.run_id,
            detail=f"run {parent.run_id} is at depth {parent.depth} and its max_depth is "
            f"{parent.limits.max_depth}, so it cannot start a child run",
        )
    bounded = requested.bounded_by(parent.remaining())
    for ancestor in ancestors:
        bounded = bounded.bounded_by(ancestor.remaining())
    return bounded.replace(max_depth=min(bounded.max_depth, parent.limits.max_depth))
