"""The built-in policies, in their default order: authority, allowlist, budget, staleness, payload."""

from __future__ import annotations

import json
from typing import Any

from tinyagents import _clock
from tinyagents._bounds import whole_number
from tinyagents.errors import ConfigurationError
from tinyagents.protocol.commands import (
    GraphSupervisorActor,
    HumanActor,
    MiddlewareActor,
    ParentAgentActor,
    SteeringCommand,
    SteeringKind,
    TestActor,
)
from tinyagents.protocol.ids import shown_id, shown_repr
from tinyagents.protocol.text import plain_text
from tinyagents.runs.limits import BUDGET_FIELDS, past
from tinyagents.steering.policy import (
    CallNext,
    CheckPolicy,
    Decision,
    Policy,
    PolicyContext,
    PolicyPipeline,
    SenderContext,
)

CONTROL_SCOPE = "agent:control"
DEFAULT_MAX_TEXT_BYTES = 16 * 1024


def not_found(cmd: SteeringCommand) -> str:
    """The one wording for 'no such target' — also used for a foreign tenant's runs."""
    return f"not found: {cmd.target.describe()}"


class AuthorityPolicy(CheckPolicy):
    """Who may steer whom (DESIGN.md, policy pipeline)."""

    policy_id = "authority"

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        actor, target = cmd.actor, ctx.target
        if isinstance(actor, HumanActor):
            if actor.tenant_id != target.tenant_id:
                return not_found(cmd)  # never confirm that another tenant's run exists
            if CONTROL_SCOPE not in actor.scopes:
                return _lacks_scope(actor)
            return None
        if isinstance(actor, ParentAgentActor):
            if ctx.tree.is_descendant(target.run_id, of=actor.run_id):
                return None
            if (actor.run_id, target.run_id) in ctx.grants:
                return None
            relation = (
                "its sibling"
                if target.run_id in {s.run_id for s in ctx.tree.siblings(actor.run_id)}
                else "not its descendant"
            )
            return (
                f"forbidden: {actor.describe()} may steer only its own descendants; "
                f"run {target.run_id} is {relation}"
            )
        if isinstance(actor, GraphSupervisorActor):
            if target.run_id == actor.run_id or ctx.tree.is_descendant(
                target.run_id, of=actor.run_id
            ):
                return None
            return f"forbidden: {actor.describe()} may steer only its own graph run and its tasks"
        if isinstance(actor, MiddlewareActor):
            if actor.run_id is None:
                return _untrusted(actor, ctx.trusted_middleware)
            if target.run_id == actor.run_id or ctx.tree.is_descendant(
                target.run_id, of=actor.run_id
            ):
                return None
            return f"forbidden: {actor.describe()} may steer only its own run and its descendants"
        if isinstance(actor, TestActor):
            return None if ctx.testing else _NO_TEST_ACTOR
        return f"forbidden: unknown actor type {actor.type!r}"

    def check_sender(self, cmd: SteeringCommand, ctx: SenderContext) -> str | None:
        """What no run can change: a human's scope, an untrusted runtime middleware, the test
        actor outside a testing runtime. (A human's tenant is the run's to judge: refused here,
        a foreign tenant's thread would read differently from a thread with no run.)"""
        actor = cmd.actor
        if isinstance(actor, HumanActor) and CONTROL_SCOPE not in actor.scopes:
            return _lacks_scope(actor)
        if isinstance(actor, MiddlewareActor) and actor.run_id is None:
            return _untrusted(actor, ctx.trusted_middleware)
        if isinstance(actor, TestActor) and not ctx.testing:
            return _NO_TEST_ACTOR
        return None


_NO_TEST_ACTOR = "forbidden: the test actor is only allowed in a Runtime(testing=True)"


def _lacks_scope(actor: HumanActor) -> str:
    return f"forbidden: {actor.describe()} lacks the scope {CONTROL_SCOPE!r}"


def _untrusted(actor: MiddlewareActor, trusted: frozenset[str]) -> str | None:
    if actor.name in trusted:
        return None
    return f"forbidden: {actor.describe()} has no run and is not registered as runtime middleware"


class AllowlistPolicy(CheckPolicy):
    """Tools and models can only narrow: a command naming anything the run lacks is rejected."""

    policy_id = "allowlist"

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        kind = cmd.kind
        if kind is not SteeringKind.CONSTRAIN_TOOLS and kind is not SteeringKind.CONSTRAIN_MODEL:
            return None
        target = ctx.target
        extra: list[str] = []
        what = ""
        if kind is SteeringKind.CONSTRAIN_TOOLS and target.tools is not None:
            extra = sorted(set(cmd.payload["tools"]) - target.tools)
            what = "tools"
        elif kind is SteeringKind.CONSTRAIN_MODEL and target.models is not None:
            extra = [m for m in cmd.payload["models"] if m not in target.models]
            what = "models"
        if extra:
            return (
                f"{kind.value} would widen the {what} of run {target.run_id} with "
                f"{_some(extra)}; allowed now: "
                f"{sorted(target.tools or ()) if what == 'tools' else list(target.models or ())}"
                " — steering can only narrow"
            )
        return None


#: How many of the names a command would widen a run with its rejection quotes: the
#: allowlist comes before the payload bound, and quoted a payload of any size whole.
_QUOTED_NAMES = 10


def _some(names: list[str]) -> str:
    """The first ``_QUOTED_NAMES`` of ``names``, each cut as an id is, and how many more."""
    shown = str([shown_id(name) for name in names[:_QUOTED_NAMES]])
    more = len(names) - _QUOTED_NAMES
    return f"{shown} (and {more:,} more)" if more > 0 else shown


class BudgetPolicy(CheckPolicy):
    """A child's limits never exceed what its parent (and every ancestor above it) has left.

    By default an over-large ``update_budget`` is rejected (a check); with ``clamp=True`` it is
    transformed down to the parent's remaining budget instead (the event records both).
    """

    policy_id = "budget"

    def __init__(self, *, clamp: bool = False) -> None:
        if not isinstance(clamp, bool):  # "no" clamped, being true
            raise ConfigurationError(
                f"BudgetPolicy(clamp=...): clamp= is True or False, got "
                f"{type(clamp).__name__} {shown_repr(clamp)}"
            )
        self.clamp = clamp
        self.inline = not clamp  # a clamp transforms the command: it needs call_next

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        if cmd.kind is not SteeringKind.UPDATE_BUDGET:
            return None
        for name, wanted, _, who, left, used in _excess(cmd, ctx):
            return (
                f"update_budget {name}={wanted} exceeds what {who} has left ({left}; the "
                f"child already used {used})"
            )
        return None

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        if not self.clamp:
            return await super().__call__(cmd, ctx, call_next)
        clamped = {}
        for name, wanted, ceiling, who, left, used in _excess(cmd, ctx):
            if ceiling <= 0:  # a limit of 0 is no limit a command can carry: nothing to clamp to
                return Decision.reject(
                    cmd,
                    f"update_budget {name}={wanted} exceeds what {who} has left ({left}; the "
                    f"child already used {used}): nothing is left to clamp it to",
                    self.policy_id,
                )
            clamped[name] = ceiling
        if clamped:
            # the pipeline validates a transformed command like a newly built one
            payload = {**cmd.payload, **clamped}
            return await call_next(cmd.model_copy(update={"payload": payload}))
        return await call_next(cmd)


def _excess(
    cmd: SteeringCommand, ctx: PolicyContext
) -> list[tuple[str, float, float, str, float | int, float]]:
    """The limits an ``update_budget`` for a child sets above what an ancestor has left, as
    (name, wanted, ceiling, who, that ancestor's remaining, child's usage); ``who`` is
    ``"parent run <id>"`` or ``"ancestor run <id>"``. Each of the child's calls counts against
    every ancestor, so the tightest of them bounds each limit: a parent's own limit may have
    been set when the root had more left, or be absent."""
    if cmd.kind is not SteeringKind.UPDATE_BUDGET or ctx.target.parent_run_id is None:
        return []
    # per limit: (the least any ancestor has left, who has it), nearest ancestor first on ties
    tightest: dict[str, tuple[float | int, str]] = {}
    for nth, ancestor in enumerate(ctx.tree.ancestors(ctx.target.run_id)):
        relation = "ancestor" if nth else "parent"
        for name, left in ancestor.remaining().items():
            if left is not None and (name not in tightest or left < tightest[name][0]):
                tightest[name] = (left, f"{relation} run {ancestor.run_id}")
    if not tightest:
        return []
    used = _used(ctx)
    excess = []
    for name in BUDGET_FIELDS:
        wanted = cmd.payload.get(name)
        if wanted is None or name not in tightest:
            continue
        left, who = tightest[name]
        ceiling = used[name] + left
        if past(name, wanted, ceiling):  # the exact amount left, in floats, fits
            excess.append((name, wanted, ceiling, who, left, used[name]))
    return excess


def _used(ctx: PolicyContext) -> dict[str, float]:
    usage = ctx.target.usage
    # a deadline runs from the run's start, whether or not it had one until now
    started = usage.started_at
    elapsed = max(_clock.monotonic() - started, 0.0) if started is not None else 0.0
    return {
        "max_model_calls": usage.model_calls,
        "max_tool_calls": usage.tool_calls,
        "max_tokens": usage.total_tokens,
        "max_input_tokens": usage.input_tokens,
        "max_output_tokens": usage.output_tokens,
        "max_input_tokens_per_request": 0,  # each request alone: the cap is the ceiling
        "max_cost": usage.cost,
        "deadline_s": elapsed,
    }


class StalenessPolicy(CheckPolicy):
    """A command naming a checkpoint that is not the thread's latest is rejected, unless it
    asks for a fork (it is then applied on a new thread forked from that checkpoint). A
    checkpoint the thread does not have (another thread's, or none) is rejected as unknown,
    fork or not. An agent run has no checkpoints: a fork of it is rejected too."""

    policy_id = "staleness"

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        if cmd.checkpoint_id is None:
            return None
        latest = ctx.latest_checkpoint_id
        if latest is not None and not ctx.checkpoint_known:
            return (
                f"unknown checkpoint {cmd.checkpoint_id}: thread {ctx.target.thread_id!r} has "
                "no such checkpoint"
            )
        if cmd.fork:
            # a graph run's own policy judges its forks (a graph without a checkpointer says
            # so); an agent run has no checkpoints at all
            if latest is None and ctx.target.kind != "graph":
                return (
                    f"unknown checkpoint {cmd.checkpoint_id}: the target has no checkpoints "
                    "to fork from"
                )
            return None
        if latest is None:
            return f"unknown checkpoint {cmd.checkpoint_id}: the target has no checkpoints"
        if cmd.checkpoint_id != latest:
            return (
                f"stale checkpoint {cmd.checkpoint_id}: the latest is {latest}; resend against "
                "the latest checkpoint, or set fork=True to apply it on a fork"
            )
        return None


class PayloadPolicy(CheckPolicy):
    """Bounds the size of a command's payload: its compact JSON (``json.dumps`` with
    ``separators=(",", ":")`` and ``ensure_ascii=False``) in UTF-8 bytes, default 16 KiB.

    Everything counts, not only text: numbers, keys, nesting. (``max_text_bytes`` keeps its
    name from when only strings were counted.)
    """

    policy_id = "payload"

    def __init__(self, *, max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> None:
        # checked now: None failed every command later (a TypeError), 0 refused every one
        self.max_text_bytes = whole_number(
            "PayloadPolicy: max_text_bytes",
            max_text_bytes,
            least=2,
            why="the JSON of the smallest payload, {}, is 2 bytes",
        )

    def check(self, cmd: SteeringCommand, ctx: PolicyContext | SenderContext) -> str | None:
        # a SenderContext has no bound: the payload is counted
        # (the slot, not the property: a call less for every command)
        known = ctx._payload_bound if isinstance(ctx, PolicyContext) else None
        if known is not None and known[0] is cmd.payload and known[1] <= self.max_text_bytes:
            return None  # the router's bound of this payload is within the limit already
        return self._too_large(cmd)

    def check_sender(self, cmd: SteeringCommand, ctx: SenderContext) -> str | None:
        """A payload's size needs no run: refused before a thread command is kept waiting."""
        return self._too_large(cmd)

    def _too_large(self, cmd: SteeringCommand) -> str | None:
        limit = self.max_text_bytes
        if json_bytes(cmd.payload, stop_above=limit) > limit:
            return (
                f"payload too large: its JSON is > {limit} bytes; send a summary or a "
                "reference instead"
            )
        return None


def json_bytes(value: Any, *, stop_above: int | None = None) -> int:
    """UTF-8 bytes of ``value`` as compact JSON, counted without writing it out.

    With ``stop_above``, counting stops as soon as the count passes it (what is returned is
    then only more than ``stop_above``): a payload far too large costs no more than one at the
    limit. A loop over a stack, not recursion, and no ``sum()`` over generators: this runs on
    every command.
    """
    limit = -1 if stop_above is None else stop_above
    size = 0
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        if isinstance(item, str):
            if type(item) is not str:  # a subclass: counted by what it holds, not its methods
                item = plain_text(item)
            # printable ASCII (nearly all text) inline: quoted, escaped only at " and \
            if item.isascii() and item.isprintable():
                size += len(item) + 2
                if '"' in item or "\\" in item:
                    size += item.count('"') + item.count("\\")
            else:
                size += _json_str_bytes(item)
        elif isinstance(item, dict):
            # braces, a colon per item and a comma between items
            size += 2 * len(item) + 1 if item else 2
            for key, inner in item.items():
                if type(key) is str and key.isascii() and key.isidentifier():
                    size += len(key) + 2  # a plain name: nothing to escape
                elif isinstance(key, str):
                    size += _json_str_bytes(plain_text(key))
                else:
                    size += len(str(key)) + 2
                push(inner)
        elif isinstance(item, (list, tuple)):
            size += len(item) + 1 if item else 2
            extend(item)
        elif item is None or item is True:
            size += 4
        elif item is False:
            size += 5
        elif isinstance(item, int):  # by its digits (a subclass's own repr may say anything)
            size += len(int.__repr__(item))
        elif isinstance(item, float):
            size += len(float.__repr__(item))
        else:  # what construction refuses, counted by its repr
            size += len(repr(item))
        if size > limit >= 0:
            break
    return size


def _json_str_bytes(text: str) -> int:
    # Printable text is escaped only at quotes and backslashes; anything else (control
    # characters, which JSON escapes as \n or \u0000) is rare: count it the slow way.
    if text.isprintable():
        raw = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        return raw + 2 + text.count('"') + text.count("\\")
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def default_policies() -> list[Policy]:
    return [
        AuthorityPolicy(),
        AllowlistPolicy(),
        BudgetPolicy(),
        StalenessPolicy(),
        PayloadPolicy(),
    ]


def default_pipeline() -> PolicyPipeline:
    return PolicyPipeline(default_policies())
