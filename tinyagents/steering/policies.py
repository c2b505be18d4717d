"""The built-in policies, in their default order: authority, allowlist, budget, staleness, payload."""

from __future__ import annotations

from typing import Any

from tinyagents.runs.limits import BUDGET_FIELDS
from tinyagents.steering.commands import (
    GraphSupervisorActor,
    HumanActor,
    MiddlewareActor,
    ParentAgentActor,
    SteeringCommand,
    SteeringKind,
    TestActor,
)
from tinyagents.steering.policy import (
    CallNext,
    CheckPolicy,
    Decision,
    Policy,
    PolicyContext,
    PolicyPipeline,
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
                return f"forbidden: {actor.describe()} lacks the scope {CONTROL_SCOPE!r}"
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
                if actor.name in ctx.trusted_middleware:
                    return None
                return (
                    f"forbidden: {actor.describe()} has no run and is not registered as "
                    "runtime middleware"
                )
            if target.run_id == actor.run_id or ctx.tree.is_descendant(
                target.run_id, of=actor.run_id
            ):
                return None
            return f"forbidden: {actor.describe()} may steer only its own run and its descendants"
        if isinstance(actor, TestActor):
            return (
                None
                if ctx.testing
                else ("forbidden: the test actor is only allowed in a Runtime(testing=True)")
            )
        return f"forbidden: unknown actor type {actor.type!r}"


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
        if cmd.kind is SteeringKind.CONSTRAIN_TOOLS and target.tools is not None:
            extra = sorted(set(cmd.payload["tools"]) - target.tools)
            what = "tools"
        elif cmd.kind is SteeringKind.CONSTRAIN_MODEL and target.models is not None:
            extra = [m for m in cmd.payload["models"] if m not in target.models]
            what = "models"
        if extra:
            return (
                f"{cmd.kind.value} would widen the {what} of run {target.run_id} with {extra}; "
                f"allowed now: {sorted(target.tools or ()) if what == 'tools' else list(target.models or ())}"
                " — steering can only narrow"
            )
        return None


class BudgetPolicy(CheckPolicy):
    """A child's limits never exceed what its parent has left.

    By default an over-large ``update_budget`` is rejected (a check); with ``clamp=True`` it is
    transformed down to the parent's remaining budget instead (the event records both).
    """

    policy_id = "budget"

    def __init__(self, *, clamp: bool = False) -> None:
        self.clamp = clamp
        self.inline = not clamp  # a clamp transforms the command: it needs call_next

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        if cmd.kind is not SteeringKind.UPDATE_BUDGET:
            return None
        for name, wanted, _, parent, left, used in _excess(cmd, ctx):
            return (
                f"update_budget {name}={wanted} exceeds what parent run {parent} "
                f"has left ({left}; the child already used {used})"
            )
        return None

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        if not self.clamp:
            return await super().__call__(cmd, ctx, call_next)
        clamped = {name: ceiling for name, _, ceiling, *_ in _excess(cmd, ctx)}
        if clamped:
            payload = {**cmd.payload, **clamped}
            return await call_next(cmd.model_copy(update={"payload": payload}))
        return await call_next(cmd)


def _excess(
    cmd: SteeringCommand, ctx: PolicyContext
) -> list[tuple[str, float, float, str, float | int, float]]:
    """The limits an ``update_budget`` for a child sets above what its parent has left, as
    (name, wanted, ceiling, parent run id, parent's remaining, child's usage)."""
    if cmd.kind is not SteeringKind.UPDATE_BUDGET or ctx.target.parent_run_id is None:
        return []
    parent = ctx.tree.get(ctx.target.parent_run_id)
    if parent is None:
        return []
    parent_left = parent.remaining()
    used = _used(ctx)
    excess = []
    for name in BUDGET_FIELDS:
        wanted = cmd.payload.get(name)
        left = parent_left[name]
        if wanted is None or left is None:
            continue
        ceiling = used[name] + left
        if wanted > ceiling:
            excess.append((name, wanted, ceiling, parent.run_id, left, used[name]))
    return excess


def _used(ctx: PolicyContext) -> dict[str, float]:
    usage = ctx.target.usage
    remaining = ctx.target.remaining()
    limits = ctx.target.limits
    elapsed = 0.0
    if limits.deadline_s is not None and remaining["deadline_s"] is not None:
        elapsed = limits.deadline_s - float(remaining["deadline_s"])
    return {
        "max_model_calls": usage.model_calls,
        "max_tool_calls": usage.tool_calls,
        "max_tokens": usage.total_tokens,
        "deadline_s": elapsed,
    }


class StalenessPolicy(CheckPolicy):
    """A command naming a checkpoint that is not the thread's latest is rejected, unless it
    asks for a fork (it is then applied on a new thread forked from that checkpoint)."""

    policy_id = "staleness"

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        if cmd.checkpoint_id is None or cmd.fork:
            return None
        latest = ctx.latest_checkpoint_id
        if latest is None:
            return f"unknown checkpoint {cmd.checkpoint_id}: the target has no checkpoints"
        if cmd.checkpoint_id != latest:
            return (
                f"stale checkpoint {cmd.checkpoint_id}: the latest is {latest}; resend against "
                "the latest checkpoint, or set fork=True to apply it on a fork"
            )
        return None


class PayloadPolicy(CheckPolicy):
    """Bounds the text a command may carry (default 16 KiB, counted in UTF-8 bytes)."""

    policy_id = "payload"

    def __init__(self, *, max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> None:
        self.max_text_bytes = max_text_bytes

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        size = text_bytes(cmd.payload)
        if size > self.max_text_bytes:
            return (
                f"payload too large: {size} bytes of text > {self.max_text_bytes}; send a "
                "summary or a reference instead"
            )
        return None


def text_bytes(value: Any) -> int:
    """UTF-8 bytes of the strings in ``value`` (keys included). Loops, not ``sum()`` over a
    generator: this runs on every command."""
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode())
    total = 0
    if isinstance(value, dict):
        for k, v in value.items():
            total += text_bytes(k) + text_bytes(v)
    elif isinstance(value, list | tuple):
        for v in value:
            total += text_bytes(v)
    return total


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
