"""The policy pipeline: policies folded like ASGI middleware.

A policy is ``async (cmd, ctx, call_next) -> Decision``. It passes a command on with
``await call_next(cmd)``, transforms it with ``await call_next(new_cmd)`` (the pipeline records
which policy did, and validates ``new_cmd`` like a newly built command: an invalid one is
rejected by that policy), or stops it by returning ``Decision.reject(...)`` /
``Decision.defer(...)``.
A policy that only lets commands through or rejects them can subclass ``CheckPolicy`` and
write a synchronous ``check``; the pipeline then runs it inline, with no coroutine of its own.
The built-ins, in their default order, are in ``tinyagents.steering.policies``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tinyagents.errors import InvalidCommandError
from tinyagents.protocol.commands import SteeringCommand
from tinyagents.runs.info import RunInfo
from tinyagents.runs.tree import RunTree

CallNext = Callable[[SteeringCommand], Awaitable["Decision"]]


@dataclass(slots=True, kw_only=True)
class Decision:
    status: Literal["accept", "reject", "defer"]
    command: SteeringCommand
    reason: str | None = None
    policy_id: str | None = None
    #: (policy_id, command before the transform), in pipeline order.
    transforms: list[tuple[str, SteeringCommand]] = field(default_factory=list)

    @classmethod
    def accept(cls, command: SteeringCommand, policy_id: str | None = None) -> Decision:
        return cls(status="accept", command=command, policy_id=policy_id)

    @classmethod
    def reject(cls, command: SteeringCommand, reason: str, policy_id: str) -> Decision:
        return cls(status="reject", command=command, reason=reason, policy_id=policy_id)

    @classmethod
    def defer(cls, command: SteeringCommand, reason: str, policy_id: str) -> Decision:
        return cls(status="defer", command=command, reason=reason, policy_id=policy_id)


@dataclass(slots=True, kw_only=True)
class PolicyContext:
    """What a policy may look at: the resolved target and the run tree around it."""

    target: RunInfo
    tree: RunTree
    testing: bool = False
    #: (from_run_id, to_run_id) pairs a graph supervisor allowed to steer each other.
    grants: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset()
    #: Names of runtime-level middleware actors (run_id=None) that may steer any run.
    trusted_middleware: frozenset[str] = frozenset()
    #: The target thread's latest checkpoint id, looked up only when the command names one.
    latest_checkpoint_id: str | None = None
    task_id: str | None = None
    node_id: str | None = None


class Policy(Protocol):
    policy_id: str

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision: ...


class CheckPolicy(ABC):
    """A policy that lets a command through unchanged or rejects it: ``check`` says why.

    Called like any policy, but the pipeline runs ``check`` inline (the default pipeline is
    made of such policies, and every command goes through it). A subclass that overrides
    ``__call__`` is run as an ordinary policy (see ``inline``).
    """

    policy_id: str
    #: Whether the pipeline may run ``check`` instead of calling the policy. False for a
    #: subclass that overrides ``__call__`` (to transform or defer), unless it says otherwise.
    inline: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__call__" in cls.__dict__ and "inline" not in cls.__dict__:
            cls.inline = False

    @abstractmethod
    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        """Why ``cmd`` is rejected, or None to pass it on."""

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        reason = self.check(cmd, ctx)
        if reason is not None:
            return Decision.reject(cmd, reason, self.policy_id)
        return await call_next(cmd)


class PolicyPipeline:
    """An ordered list of policies; ``evaluate`` folds them around a final accept."""

    def __init__(self, policies: Sequence[Policy] = (), *, pipeline_id: str = "default") -> None:
        self.policies: list[Policy] = list(policies)
        self.pipeline_id = pipeline_id
        # ``_checks()``: the policies as last seen, and which of them are check policies.
        self._seen: tuple[Policy, ...] = ()
        self._checks_of_seen: tuple[CheckPolicy | None, ...] = ()

    @property
    def ids(self) -> list[str]:
        return [p.policy_id for p in self.policies]

    def insert(
        self, policy: Policy, *, before: str | None = None, after: str | None = None
    ) -> PolicyPipeline:
        """Insert ``policy`` before/after the policy with that id (default: at the end)."""
        if before is not None and after is not None:
            raise ValueError("give 'before' or 'after', not both")
        anchor = before or after
        if anchor is None:
            self.policies.append(policy)
            return self
        try:
            index = self.ids.index(anchor)
        except ValueError:
            raise ValueError(f"no policy {anchor!r} in pipeline; have {self.ids}") from None
        self.policies.insert(index if before else index + 1, policy)
        return self

    def remove(self, policy_id: str) -> PolicyPipeline:
        self.policies = [p for p in self.policies if p.policy_id != policy_id]
        return self

    async def evaluate(self, cmd: SteeringCommand, ctx: PolicyContext) -> Decision:
        decided = self.decide(cmd, ctx)
        return decided if isinstance(decided, Decision) else await decided

    def decide(self, cmd: SteeringCommand, ctx: PolicyContext) -> Decision | Awaitable[Decision]:
        """``evaluate`` without a coroutine of its own: the decision itself when the check
        policies at the head of the pipeline settle it (always, for a pipeline made only of
        them, as the default one is), else an awaitable of it. The router calls this."""
        checks = self._checks()
        index = 0
        for policy in checks:
            if policy is None or not policy.inline:
                break
            reason = policy.check(cmd, ctx)
            if reason is not None:
                return Decision.reject(cmd, reason, policy.policy_id)
            index += 1
        else:
            return Decision.accept(cmd, self.pipeline_id)
        return self._evaluate(index, cmd, ctx, self._seen, checks)

    async def _evaluate(
        self,
        index: int,
        cmd: SteeringCommand,
        ctx: PolicyContext,
        policies: tuple[Policy, ...],
        checks: tuple[CheckPolicy | None, ...],
    ) -> Decision:
        evaluation = _Evaluation(policies, checks, ctx, self.pipeline_id)
        step = evaluation.enter(index, cmd)
        decision = step if isinstance(step, Decision) else await step
        decision.transforms = evaluation.transforms
        return decision

    def _checks(self) -> tuple[CheckPolicy | None, ...]:
        """Each policy if it is a ``CheckPolicy`` (run inline while its ``inline`` says so),
        else None; worked out again only when the list of policies changed (an isinstance
        against an ABC is run in Python, and this is asked for every command)."""
        policies = tuple(self.policies)
        if policies != self._seen:
            self._seen = policies
            self._checks_of_seen = tuple(
                p if isinstance(p, CheckPolicy) else None for p in policies
            )
        return self._checks_of_seen


@dataclass(slots=True)
class _Evaluation:
    """One command's way through the policies: what every ``call_next`` needs to go on."""

    policies: tuple[Policy, ...]
    checks: tuple[CheckPolicy | None, ...]  # see PolicyPipeline._checks
    ctx: PolicyContext
    pipeline_id: str
    transforms: list[tuple[str, SteeringCommand]] = field(default_factory=list)

    def enter(self, index: int, received: SteeringCommand) -> Decision | Awaitable[Decision]:
        """Start policy ``index`` on ``received`` (past the last one, accept).

        Check policies run here, inline: when they decide, the decision is returned as is.
        Any other policy gets a ``call_next`` that starts the next one and hands it back to be
        awaited: one closure and one coroutine per such policy, and no reference cycle.
        """
        policies, checks = self.policies, self.checks
        while index < len(policies) and (check := checks[index]) is not None and check.inline:
            reason = check.check(received, self.ctx)
            if reason is not None:
                return Decision.reject(received, reason, check.policy_id)
            index += 1
        if index == len(policies):
            return Decision.accept(received, self.pipeline_id)
        policy = policies[index]

        def call_next(passed: SteeringCommand) -> Awaitable[Decision]:
            if passed is not received:
                try:
                    passed = _transformed(passed, received)
                except InvalidCommandError as exc:
                    reason = f"policy {policy.policy_id!r} produced an invalid command: {exc}"
                    return _decided(Decision.reject(received, reason, policy.policy_id))
                self.transforms.append((policy.policy_id, received))
            step = self.enter(index + 1, passed)
            return _decided(step) if isinstance(step, Decision) else step

        return policy(received, self.ctx, call_next)


async def _decided(decision: Decision) -> Decision:
    return decision


def _transformed(passed: SteeringCommand, received: SteeringCommand) -> SteeringCommand:
    """What a policy handed on instead of ``received``, validated like a newly built command
    (a policy may have made it with ``model_copy``, which validates nothing), under the
    correlation id of ``received``: a transform is the same request in a new shape."""
    values = passed.model_dump(warnings=False)
    values["correlation_id"] = received.correlation_id
    return SteeringCommand.model_validate(values)
