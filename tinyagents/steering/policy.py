"""The policy pipeline: policies folded like ASGI middleware.

A policy is ``async (cmd, ctx, call_next) -> Decision``. It passes a command on with
``await call_next(cmd)``, transforms it with ``await call_next(new_cmd)`` (the pipeline records
which policy did, and validates ``new_cmd`` like a newly built command: an invalid one is
rejected by that policy), or stops it by returning ``Decision.reject(...)`` /
``Decision.defer(...)`` (or ``Decision.accept(...)``, which skips the policies after it; an
accept of a command other than the one it was given is a transform, checked as one).
A policy that only lets commands through or rejects them can subclass ``CheckPolicy`` and
write a synchronous ``check``; the chain then runs it inline, with no coroutine of its own.
A pipeline is folded into one ``PolicyChain`` when its list changes, not for every command;
a run's own policies (``RunHandle.policies``) are folded after it into a chain kept on the run.
The built-ins, in their default order, are in ``tinyagents.steering.policies``.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, Protocol, Self, SupportsIndex

from tinyagents._record import Record, record
from tinyagents.errors import ArgumentError, ConfigurationError, InvalidCommandError
from tinyagents.protocol.commands import SteeringCommand
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.text import encodes_as_utf8, plain_text
from tinyagents.runs.info import RunInfo
from tinyagents.runs.tree import RunTree

_log = logging.getLogger(__name__)

CallNext = Callable[[SteeringCommand], Awaitable["Decision"]]


@record(slots=True, kw_only=True, eq=False, repr=False)
class Decision(Record):
    """A policy pipeline's answer for one command: accept, reject or defer it (with the
    reason and the policy that said so), and the transforms that led to ``command``."""

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


@record(slots=True, kw_only=True, eq=False, repr=False)
class PolicyContext(Record):
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
    #: Whether the command's checkpoint id (not the latest) is one of the target thread's.
    checkpoint_known: bool = True
    task_id: str | None = None
    node_id: str | None = None
    #: The router's alone (``payload_bound`` reads it): a policy that could set it could tell
    #: the payload policy a payload is smaller than it is, and have it skip counting it.
    _payload_bound: tuple[Mapping[str, Any], int] | None = field(default=None, init=False)

    @property
    def payload_bound(self) -> tuple[Mapping[str, Any], int] | None:
        """(a payload, at most how many bytes its compact JSON takes), when the router knows
        it already (from the payload's summary for the events, ``payload_summary``): the
        payload policy then need not count that payload itself. Read-only."""
        return self._payload_bound

    @classmethod
    def _trusted(
        cls,
        target: RunInfo,
        tree: RunTree,
        testing: bool,
        grants: frozenset[tuple[str, str]] | set[tuple[str, str]],
        trusted_middleware: frozenset[str],
        task_id: str | None,
        node_id: str | None,
        payload_bound: tuple[Mapping[str, Any], int] | None,
    ) -> PolicyContext:
        """The context ``cls(...)`` makes from these values (the checkpoint fields at their
        defaults), every one given by position: what the router builds for every command.
        Binding ``__init__``'s keywords cost as much again as building it.
        ``tests/steering/test_hot_path_equivalence.py`` keeps it equal to ``__init__``."""
        ctx = _new_object(cls)
        ctx.target = target
        ctx.tree = tree
        ctx.testing = testing
        ctx.grants = grants
        ctx.trusted_middleware = trusted_middleware
        ctx.latest_checkpoint_id = None
        ctx.checkpoint_known = True
        ctx.task_id = task_id
        ctx.node_id = node_id
        ctx._payload_bound = payload_bound
        return ctx


_new_object = object.__new__


@record(slots=True, kw_only=True, eq=False, repr=False)
class SenderContext(Record):
    """What a policy may look at before any run is known to take a command (one for a thread
    with no live run, deferred until a run of that thread registers): the runtime's settings,
    no run and no tree."""

    testing: bool = False
    #: Names of runtime-level middleware actors (run_id=None) that may steer any run.
    trusted_middleware: frozenset[str] = frozenset()


class Policy(Protocol):
    policy_id: str

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision: ...


class CheckPolicy(ABC):
    """A policy that lets a command through unchanged or rejects it: ``check`` says why.

    Called like any policy, but the chain runs ``check`` inline (the default pipeline is
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

    def check_sender(self, cmd: SteeringCommand, ctx: SenderContext) -> str | None:
        """Why ``cmd`` is rejected whatever run takes it, or None (the default: nothing to
        judge without a run). Asked before a command for a thread with no live run is
        deferred, so one that could never be accepted is refused at once rather than kept
        for the thread's next run (whose evaluation then calls ``check`` as for any command).
        It must not depend on the thread: a receipt for another tenant's thread has to read
        as one for a thread with no run."""
        return None

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        reason = self.check(cmd, ctx)
        if reason is not None:
            return Decision.reject(cmd, reason, self.policy_id)
        return await call_next(cmd)


def _policies(policies: Iterable[Policy], start: int = 0) -> list[Policy]:
    """``policies`` as a list, each one checked (``_policy``): text or a single policy is no
    list of them."""
    if isinstance(policies, (str, bytes)) or not isinstance(policies, Iterable):
        raise ConfigurationError(
            f"a pipeline takes a list of policies, got {type(policies).__name__} "
            f"{shown_repr(policies)}; e.g. PolicyPipeline([*default_policies(), MyPolicy()])"
        )
    return [_policy(p, i) for i, p in enumerate(policies, start)]


def _policy(policy: Policy, index: SupportsIndex) -> Policy:
    """``policy`` if it is one: a callable with a ``policy_id`` (text), by which receipts and
    events name the policy that decided. Anything else was taken, and the first command sent
    failed with an ``AttributeError``; a class (callable, and with its instances'
    ``policy_id``) was "called" with every command: a ``TypeError``, each one rejected."""
    if isinstance(policy, type):
        raise ConfigurationError(
            f"policy {index} is the class {policy.__name__}, not a policy: give {policy.__name__}()"
        )
    if not callable(policy):
        raise ConfigurationError(
            f"policy {index} is no policy: {type(policy).__name__} {shown_repr(policy)}; a policy is "
            "async (cmd, ctx, call_next) -> Decision, with a policy_id (or a CheckPolicy)"
        )
    policy_id = getattr(policy, "policy_id", None)
    if not isinstance(policy_id, str) or not policy_id:
        name = getattr(policy, "__name__", type(policy).__name__)
        raise ConfigurationError(
            f"policy {index} ({name}) has no policy_id (text), by which receipts and events "
            f"name the policy that decided; set one, e.g. {name}.policy_id = {name!r}"
        )
    if not encodes_as_utf8(plain_text(policy_id)):  # no receipt naming it could be written
        raise ConfigurationError(
            f"policy {index}'s policy_id {plain_text(policy_id)!a} holds a lone surrogate: "
            "receipts "
            "and events name the policy that decided by it; give it UTF-8 text"
        )
    return policy


class PolicyList(list[Policy]):
    """A list of policies that counts its changes, so a chain folded from it knows it is stale.

    Changed in place (``append``, ``[i] = p``, ``del`` …) or through ``PolicyPipeline.insert``/
    ``remove``, the next command sees the change.
    """

    __slots__ = ("changes",)

    def __init__(self, policies: Iterable[Policy] = (), *, changes: int = 0) -> None:
        super().__init__(_policies(policies))
        self.changes = changes

    def _changed(self) -> None:
        self.changes += 1

    def append(self, policy: Policy) -> None:
        super().append(_policy(policy, len(self)))
        self._changed()

    def extend(self, policies: Iterable[Policy]) -> None:
        super().extend(_policies(policies, len(self)))
        self._changed()

    def insert(self, index: SupportsIndex, policy: Policy) -> None:
        super().insert(index, _policy(policy, index))
        self._changed()

    def remove(self, policy: Policy) -> None:
        super().remove(policy)
        self._changed()

    def pop(self, index: SupportsIndex = -1) -> Policy:
        self._changed()
        return super().pop(index)

    def clear(self) -> None:
        super().clear()
        self._changed()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        super().sort(*args, **kwargs)
        self._changed()

    def reverse(self) -> None:
        super().reverse()
        self._changed()

    def __setitem__(self, index: Any, value: Any) -> None:
        checked = _policies(value) if isinstance(index, slice) else _policy(value, index)
        super().__setitem__(index, checked)
        self._changed()

    def __delitem__(self, index: Any) -> None:
        super().__delitem__(index)
        self._changed()

    def __iadd__(self, policies: Iterable[Policy]) -> Self:  # type: ignore[override,misc]
        self.extend(policies)
        return self

    def __imul__(self, count: SupportsIndex) -> Self:
        super().__imul__(count)
        self._changed()
        return self


#: One step of a folded chain: decides a command in a context.
Step = Callable[[SteeringCommand, "PolicyContext"], Awaitable[Decision]]


@record(slots=True, kw_only=True, eq=False, repr=False)
class PolicyChain(Record):
    """Policies folded once into one ``Step``, and what they were folded from: the chain is
    reused for every command until ``stale`` says one of its lists changed."""

    decide: Step
    pipeline: PolicyPipeline
    pipeline_changes: int
    run_policies: PolicyList | None = None
    run_changes: int = 0
    #: When every policy of the chain is an inline ``CheckPolicy`` (the default pipeline):
    #: them, in order, for a caller that runs their ``check`` itself, with no coroutine; a
    #: command none of them rejects is accepted under ``accept_id``. None otherwise.
    checks: tuple[CheckPolicy, ...] | None = None
    accept_id: str | None = None

    def stale(self, pipeline: PolicyPipeline, run_policies: PolicyList | None) -> bool:
        return (
            pipeline is not self.pipeline
            or pipeline.policies.changes != self.pipeline_changes
            or run_policies is not self.run_policies
            or (run_policies is not None and run_policies.changes != self.run_changes)
        )


class PolicyPipeline:
    """An ordered list of policies, folded once (and again when the list changes) around a
    final accept."""

    def __init__(self, policies: Sequence[Policy] = (), *, pipeline_id: str = "default") -> None:
        self._policies = PolicyList(policies)
        self.pipeline_id = pipeline_id
        self._chain: PolicyChain | None = None

    @property
    def policies(self) -> PolicyList:
        return self._policies

    @policies.setter
    def policies(self, policies: Iterable[Policy]) -> None:
        # Counted on from the old list: a chain folded from that one is stale.
        self._policies = PolicyList(policies, changes=self._policies.changes + 1)

    @property
    def ids(self) -> list[str]:
        return [p.policy_id for p in self._policies]

    def insert(
        self, policy: Policy, *, before: str | None = None, after: str | None = None
    ) -> PolicyPipeline:
        """Insert ``policy`` before/after the policy with that id (default: at the end)."""
        if before is not None and after is not None:
            raise ArgumentError("give 'before' or 'after', not both")
        anchor = before or after
        if anchor is None:
            self._policies.append(policy)
            return self
        try:
            index = self.ids.index(anchor)
        except ValueError:
            raise ArgumentError(f"no policy {anchor!r} in pipeline; have {self.ids}") from None
        self._policies.insert(index if before else index + 1, policy)
        return self

    def remove(self, policy_id: str) -> PolicyPipeline:
        self.policies = [p for p in self._policies if p.policy_id != policy_id]
        return self

    def chain(
        self, run_policies: PolicyList | None = None, cached: PolicyChain | None = None
    ) -> PolicyChain:
        """The pipeline's policies (then ``run_policies``, a run's own) folded into one chain:
        ``cached`` when it is still current, else folded anew."""
        if not run_policies:  # asked for every command: the common case first
            chain = self._chain
            if chain is None or chain.pipeline_changes != self._policies.changes:
                chain = self._chain = self._fold(None)
            return chain
        if cached is None or cached.stale(self, run_policies):
            return self._fold(run_policies)
        return cached

    def _fold(self, run_policies: PolicyList | None) -> PolicyChain:
        policies = [*self._policies, *(run_policies or ())]
        inline = all(isinstance(p, CheckPolicy) and p.inline for p in policies)
        return PolicyChain(
            decide=fold(policies, self.pipeline_id),
            pipeline=self,
            pipeline_changes=self._policies.changes,
            run_policies=run_policies,
            run_changes=run_policies.changes if run_policies is not None else 0,
            checks=tuple(policies) if inline else None,  # type: ignore[arg-type]
            accept_id=self.pipeline_id,
        )

    async def evaluate(self, cmd: SteeringCommand, ctx: PolicyContext) -> Decision:
        return await self.chain().decide(cmd, ctx)


def fold(policies: Sequence[Policy], pipeline_id: str) -> Step:
    """Compose ``policies`` around a final accept; the first policy is the outermost.

    A run of ``CheckPolicy``s (those that let ``inline`` be) becomes one step that calls their
    ``check`` in a loop, with no coroutine per policy; a run of them at the end of the chain
    accepts itself, so a chain made only of them (the default one) costs one coroutine.
    """
    handler: Step | None = None  # None: accept
    checks: list[CheckPolicy] = []
    for policy in reversed(policies):
        if isinstance(policy, CheckPolicy) and policy.inline:
            checks.append(policy)
            continue
        if checks:
            handler = _checks(tuple(reversed(checks)), handler, pipeline_id)
            checks = []
        handler = _bind(policy, handler or _accept(pipeline_id))
    if checks or handler is None:
        handler = _checks(tuple(reversed(checks)), handler, pipeline_id)
    return handler


def _accept(pipeline_id: str) -> Step:
    async def accept(cmd: SteeringCommand, ctx: PolicyContext) -> Decision:
        return Decision.accept(cmd, pipeline_id)

    return accept


def first_refusal(
    checks: Sequence[CheckPolicy], cmd: SteeringCommand, ctx: PolicyContext
) -> tuple[str, str] | None:
    """The first of ``checks`` that rejects ``cmd``: (its reason, its policy id), or None. A
    check that raises rejects it (``broken``)."""
    for check in checks:
        try:
            reason = check.check(cmd, ctx)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # called synchronously: even a CancelledError is its own
            return broken(check.policy_id, cmd, exc), check.policy_id
        if reason is not None:
            return _refusal(reason, check.policy_id)
    return None


def first_sender_refusal(
    policies: Sequence[Policy], cmd: SteeringCommand, ctx: SenderContext
) -> tuple[str, str] | None:
    """The first ``CheckPolicy`` of ``policies`` whose ``check_sender`` rejects ``cmd``: (its
    reason, its policy id), or None. One that raises rejects it (``broken``), as in
    ``first_refusal``."""
    for policy in policies:
        if not isinstance(policy, CheckPolicy):
            continue
        try:
            reason = policy.check_sender(cmd, ctx)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # as in ``first_refusal``
            return broken(policy.policy_id, cmd, exc), policy.policy_id
        if reason is not None:
            return _refusal(reason, policy.policy_id)
    return None


def broken(policy_id: str, cmd: SteeringCommand, exc: BaseException) -> str:
    """The rejection reason for a command whose policy raised instead of deciding (logged with
    its traceback). Fail closed: a policy's bug must neither let a command through nor reach
    the sender (or the parent run cancelling its subtree) as an exception; nor must what is no
    ``Exception``: a ``SystemExit`` (let out of a task, it stopped the event loop under every
    run), ``GeneratorExit``, a library's own ``BaseException``, a ``CancelledError`` that no
    cancel of the submitting task sent. Only ``KeyboardInterrupt`` goes on."""
    _log.error(
        "steering policy %r raised on command %s; the command is rejected",
        policy_id,
        cmd.correlation_id,
        exc_info=exc,
    )
    return f"policy {policy_id!r} failed ({type(exc).__name__}: {exc}); the command is refused"


def _checks(checks: tuple[CheckPolicy, ...], nxt: Step | None, pipeline_id: str) -> Step:
    async def step(cmd: SteeringCommand, ctx: PolicyContext) -> Decision:
        refused = first_refusal(checks, cmd, ctx)
        if refused is not None:
            return Decision.reject(cmd, *refused)
        if nxt is None:
            return Decision.accept(cmd, pipeline_id)
        return await nxt(cmd, ctx)

    return step


def _bind(policy: Policy, nxt: Step) -> Step:
    async def step(cmd: SteeringCommand, ctx: PolicyContext) -> Decision:
        handed_on: Decision | None = None  # what call_next answered

        async def call_next(passed: SteeringCommand) -> Decision:
            nonlocal handed_on
            if passed is not cmd:
                try:
                    passed = _transformed(passed, cmd)
                except InvalidCommandError as exc:
                    reason = f"policy {policy.policy_id!r} produced an invalid command: {exc}"
                    return Decision.reject(cmd, reason, policy.policy_id)
                decision = await nxt(passed, ctx)
                # Outer policies' transforms are inserted later, in front: pipeline order.
                decision.transforms.insert(0, (policy.policy_id, cmd))
            else:
                decision = await nxt(passed, ctx)
            handed_on = decision
            return decision

        # What escapes ``policy`` is its own error: every step after it decides, never raises.
        try:
            decision = await policy(cmd, ctx, call_next)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise  # the submit itself is being cancelled
            return Decision.reject(cmd, broken(policy.policy_id, cmd, exc), policy.policy_id)
        if not isinstance(decision, Decision):
            reason = (
                f"policy {policy.policy_id!r} returned {type(decision).__name__}, not a Decision "
                "(return await call_next(cmd), or Decision.reject/defer); the command is refused"
            )
            return Decision.reject(cmd, reason, policy.policy_id)
        if decision is not handed_on:  # its own (what it handed on was checked where made)
            problem = _unwritable(decision)
            if problem is not None:
                reason = f"policy {policy.policy_id!r} gave a {problem}; the command is refused"
                return Decision.reject(cmd, reason, policy.policy_id)
        if (
            decision.status == "accept"
            and decision.command is not cmd
            and decision is not handed_on
        ):
            # It accepted a command of its own making: a transform all the same (checked like
            # one; the policies after it were skipped, as by any accept of its own)
            try:
                accepted = _transformed(decision.command, cmd)
            except InvalidCommandError as exc:
                reason = f"policy {policy.policy_id!r} accepted an invalid command: {exc}"
                return Decision.reject(cmd, reason, policy.policy_id)
            decision = Decision(
                status="accept",
                command=accepted,
                policy_id=decision.policy_id,
                transforms=[(policy.policy_id, cmd)],
            )
        return decision

    return step


def _refusal(reason: object, policy_id: str) -> tuple[str, str]:
    """A check's refusal as (reason, policy id), its reason replaced by what was wrong with
    it where no receipt or event could carry it (as ``_unwritable`` for a policy's own
    decision: a reason a ``CheckPolicy`` returned is one too)."""
    problem = _unwritable_fields(reason, policy_id)
    if problem is None:  # text, checked just now: as the plain text it holds
        return plain_text(reason), policy_id  # type: ignore[arg-type]
    return f"policy {shown_repr(policy_id)} gave a {problem}; the command is refused", policy_id


def _unwritable(decision: Decision) -> str | None:
    """What in a policy's own decision no receipt or event can carry: a reason or policy id
    that is no text, or holds a lone surrogate (the receipt's JSON, the API's answer and the
    inbox's written receipt failed on it, after the command was settled)."""
    return _unwritable_fields(decision.reason, decision.policy_id)


def _unwritable_fields(reason: object, policy_id: object) -> str | None:
    """``_unwritable`` of a reason and a policy id."""
    for name, value in (("reason", reason), ("policy_id", policy_id)):
        if value is None:
            continue
        if not isinstance(value, str):
            return f"{name} that is no text ({type(value).__name__})"
        text = plain_text(value)  # what it holds (a subclass's own methods may hide it)
        if not encodes_as_utf8(text):
            return f"{name} holding a lone surrogate ({text[:80]!a})"
    return None


def _transformed(passed: SteeringCommand, received: SteeringCommand) -> SteeringCommand:
    """What a policy handed on instead of ``received``, validated like a newly built command
    (a policy may have made it with ``model_copy``, which validates nothing), under the
    correlation id of ``received``: a transform is the same request in a new shape, so it keeps
    the sender and the target too (authority was checked for them, and the command is filed
    under them)."""
    for name in ("actor", "target"):
        if getattr(passed, name) != getattr(received, name):
            raise InvalidCommandError(
                f"a transform keeps the command's {name} ({getattr(received, name).describe()}); "
                f"it changed it to {getattr(passed, name).describe()}"
            )
    values = passed.model_dump(warnings=False)
    values["correlation_id"] = received.correlation_id
    return SteeringCommand.model_validate(values)
