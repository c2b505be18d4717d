"""``RunHandle``: the caller's grip on one run, and ``RunDriver``, the execution layer's side.

Every control method of a handle (``steer``, ``pause``, ``cancel`` …) builds a
``SteeringCommand`` and sends it through the runtime's router, so it is checked, ordered and
audited exactly like a command from anyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_json

from tinyagents.errors import (
    ArgumentError,
    BudgetArgumentError,
    ConfigurationError,
    KeywordArgumentError,
    SteeringRejected,
)
from tinyagents.protocol.commands import (
    AnyActor,
    HumanActor,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPriority,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.state import RunStatus
from tinyagents.runs.info import RunInfo
from tinyagents.runs.limits import BUDGET_FIELDS, RunLimits
from tinyagents.steering.inbox import Inbox
from tinyagents.steering.policy import Policy, PolicyChain, PolicyList


class RunResult(BaseModel):
    """How a run ended: ``status``, its ``output`` (or partial output), ``error`` and ``usage``;
    for an agent run, ``messages``: its transcript (``tinyagents.harness.Message``s, what the
    model saw and said), to continue the conversation with ``history=``, and ``new_from``:
    where in it the messages of this run start (after the ``history=`` it was given)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)

    run_id: str
    status: RunStatus
    output: Any = None
    error: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    # Any: Message belongs to the harness, a layer above this one
    messages: list[Any] = Field(default_factory=list)
    new_from: int = 0
    #: An agent run's metadata (pydantic-ai's ``result.metadata``: ``Agent(metadata=...)``,
    #: resolved as the run started and again when it completed), None when it had none.
    metadata: dict[str, Any] | None = None

    def all_messages(self) -> list[Any]:
        """The whole transcript, the history it was given first (pydantic-ai's
        ``all_messages()``): ``messages``."""
        return list(self.messages)

    def new_messages(self) -> list[Any]:
        """The messages of this run only, from its input on (pydantic-ai's
        ``new_messages()``): the transcript less the ``history=`` it was given. A run given no
        history has all its messages new, its system prompt first."""
        return self.messages[self.new_from :]

    def all_messages_json(self) -> bytes:
        """``all_messages()`` as JSON, which ``TypeAdapter(list[Message]).validate_json``
        reads back (pydantic-ai's ``all_messages_json()``)."""
        return to_json(self.messages)

    def new_messages_json(self) -> bytes:
        """``new_messages()`` as JSON (pydantic-ai's ``new_messages_json()``)."""
        return to_json(self.new_messages())


class Submitter(Protocol):
    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt: ...


class RunDriver:
    """Hooks the execution layer (agent loop, graph executor) gives the router. All optional."""

    def wake(self) -> None:
        """A command was queued for this run."""

    def interrupt_now(self, cmd: SteeringCommand) -> None:
        """An IMMEDIATE cancel arrived: cancel the in-flight model request, never a tool."""

    def narrowing_queued(self, cmd: SteeringCommand) -> None:
        """A ``constrain_tools`` or ``constrain_model`` was queued for this run: the runs
        already running below it are to be narrowed too, at their own next boundaries."""

    def pause_queued(self, cmd: SteeringCommand) -> None:
        """A ``pause`` or ``resume`` was queued for this run: the runs running below it are
        to be paused (or let go of) too, at their own next boundaries."""

    def adopt_pause(self, cmd: SteeringCommand, origin: str | None) -> bool:
        """Mark ``cmd``, a pause or resume run ``origin`` passes down to this run, as that
        run's hold, not as this run's own operator's (``origin`` None: forget ``cmd``, it
        was withdrawn). False: this run takes no pause passed down (a graph task's entry)."""
        return False

    def restore(self, applied: list[SteeringCommand]) -> None:
        """The run goes on from an earlier process (``register(continued=True)``), whose
        log says it applied ``applied`` (in order): bring back what still held the run when
        that process stopped (an operator's pause). Called before any command is handed to
        the run."""

    async def hold_new_run(self, handle: RunHandle) -> None:
        """Run ``handle`` was registered below this one and has not started yet: if this
        run holds the runs below it paused, hold that one too."""

    async def end_without_task(self, why: str) -> bool:
        """The run's task did not end within a grace after it was cancelled (its cleanup
        never finishes): give the run its terminal state (``why``) now, the task left behind.
        False if the execution layer cannot; the runtime then ends the run itself."""
        return False

    async def on_late_command(self, cmd: SteeringCommand) -> bool | str:
        """A command arrived after the run's last boundary. Return True if it was taken
        (e.g. an END_OF_TURN instruction starting another turn); False fails it as late; a
        text fails it with that reason (why it could not be taken)."""
        return False

    async def latest_checkpoint_id(self) -> str | None:
        return None

    async def has_checkpoint(self, checkpoint_id: str) -> bool:
        """Whether ``checkpoint_id`` is a checkpoint of this run's thread (one a command
        names that is not the latest: stale, or the point to fork at). A driver that cannot
        tell says True: the command is then judged as stale (or forked)."""
        return True

    def check_target(self, cmd: SteeringCommand) -> str | None:
        """A reason the command's task/node does not exist in this run, or None."""
        return None

    def route(self, cmd: SteeringCommand) -> RunHandle | None:
        """The run whose queue should take ``cmd`` (e.g. an agent node's child run), or None."""
        return None

    def supervisor_spec(self) -> Any:
        """The supervisor spec this run's execution layer gives the agent runs started inside
        it (a graph compiled with ``supervisor=...``), or None. The supervisor checks its type.
        """
        return None

    def watched_by(self) -> tuple[bool, Any]:
        """Whether a supervisor watches this run (an agent run: the runtime's spec covers
        it), and the spec it was given of its own (an agent's ``supervisor=``), or None
        (``RunRegistry.supervisor_spec_for`` adds the one given from above)."""
        return False, None

    def stream(self, mode: str | Iterable[str] = "values", *, subgraphs: bool = False) -> Any:
        """The run's stream (``RunHandle.stream``); a run whose execution layer does not
        stream raises ``ConfigurationError``."""
        raise ConfigurationError("this run does not stream (graph runs do: rt.start_graph)")


#: The driver of a run whose execution layer has no hooks: stateless, so every such run shares it.
_IDLE_DRIVER = RunDriver()


@functools.lru_cache(maxsize=1024)
def _local_operator(tenant_id: str) -> HumanActor:
    """The actor of a handle's own control methods, one per tenant (actors are frozen): a
    runtime with thousands of idle runs does not hold thousands of copies."""
    return SteeringActor.human("local-operator", tenant_id=tenant_id, scopes=["agent:control"])


class RunHandle:
    """A running (or finished) run. Created by the runtime; ``await handle.result()`` waits."""

    def __init__(
        self, info: RunInfo, *, submitter: Submitter, driver: RunDriver | None = None
    ) -> None:
        self.info = info
        self.driver = driver or _IDLE_DRIVER
        self._submitter = submitter
        self._result: RunResult | None = None  # set when the run ends: it is done
        # The waiters' list and the run's own policy list are made on first use: most runs
        # have neither, and a runtime may hold thousands of runs (each list one more object
        # the cyclic collector walks at every full collection).
        #: ``result()`` callers waiting for the run's end, each with the loop it waits on
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] | None = None
        self.task: asyncio.Task[Any] | None = None
        self.inbox: Inbox  # attached by the router when the run is registered
        self._policies: PolicyList | None = None
        #: The runtime's pipeline and ``policies`` folded once, by the router (stale when
        #: either list changes).
        self.policy_chain: PolicyChain | None = None
        self.default_actor: AnyActor = _local_operator(info.tenant_id)
        #: An ancestor's cancel has been sent to this run (a subtree is cancelled once per run).
        self.cancelling = False
        #: The task the run was ended without (its cancellation never finished: see
        #: ``Runtime.close``): a ``finish`` from it, if it ever ends, is ignored.
        self.left_behind: asyncio.Task[Any] | None = None

    @property
    def run_id(self) -> str:
        return self.info.run_id

    def wake(self) -> None:
        """A command arrived for this run: nudge its execution layer (see ``RunDriver``)."""
        self.driver.wake()

    @property
    def policies(self) -> PolicyList:
        """Policies that apply to commands for this run only (after the runtime's pipeline),
        e.g. the steering hooks of the agent's middleware."""
        if self._policies is None:
            self._policies = PolicyList()
        return self._policies

    @policies.setter
    def policies(self, policies: Iterable[Policy]) -> None:
        # Counted on from the old list: a chain folded from that one is stale.
        changes = self._policies.changes if self._policies is not None else 0
        self._policies = PolicyList(policies, changes=changes + 1)

    @property
    def own_policies(self) -> PolicyList | None:
        """``policies`` if this run has (or had) any, else None: read without making the
        list (the router asks for every command)."""
        return self._policies

    @property
    def status(self) -> RunStatus:
        return self.info.status

    @property
    def done(self) -> bool:
        return self._result is not None

    def __repr__(self) -> str:
        return f"<RunHandle {self.run_id} {self.info.kind} {self.status.value}>"

    # ------------------------------------------------------------------ control

    async def submit(
        self,
        kind: SteeringKind,
        payload: dict[str, Any] | None = None,
        *,
        actor: AnyActor | None = None,
        priority: SteeringPriority = SteeringPriority.NORMAL,
        delivery: SteeringDelivery = SteeringDelivery.NEXT_BOUNDARY,
        check: bool = True,
        **fields: Any,
    ) -> SteeringReceipt:
        """Send one command to this run; with ``check`` a rejection raises ``SteeringRejected``."""
        _own_fields("submit", ("target",), fields)
        _flag("check", check)
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(self.run_id),
            actor=actor or self.default_actor,
            kind=kind,
            payload=payload or {},
            priority=priority,
            delivery=delivery,
            **fields,
        )
        receipt = await self._submitter.submit(cmd)
        if check and receipt.status == ReceiptStatus.REJECTED:
            raise SteeringRejected(receipt)
        return receipt

    async def steer(self, text: str, **kw: Any) -> SteeringReceipt:
        """Add an instruction, delivered at the run's next safe boundary."""
        return await self._send("steer", SteeringKind.ADD_INSTRUCTION, {"text": text}, kw)

    async def pause(self, reason: str | None = None, **kw: Any) -> SteeringReceipt:
        return await self._send("pause", SteeringKind.PAUSE, _reason(reason), kw)

    async def resume(self, reason: str | None = None, **kw: Any) -> SteeringReceipt:
        return await self._send("resume", SteeringKind.RESUME, _reason(reason), kw)

    async def cancel(
        self, reason: str | None = None, *, immediate: bool = False, **kw: Any
    ) -> SteeringReceipt:
        if _flag("immediate", immediate):
            kw["delivery"] = SteeringDelivery.IMMEDIATE
        return await self._send("cancel", SteeringKind.CANCEL, _reason(reason), kw)

    async def request_status(self, **kw: Any) -> SteeringReceipt:
        return await self._send("request_status", SteeringKind.REQUEST_STATUS, {}, kw)

    async def constrain_tools(self, tools: list[str], **kw: Any) -> SteeringReceipt:
        return await self._send(
            "constrain_tools", SteeringKind.CONSTRAIN_TOOLS, {"tools": tools}, kw
        )

    async def _send(
        self, method: str, kind: SteeringKind, payload: dict[str, Any], kw: dict[str, Any]
    ) -> SteeringReceipt:
        """``submit`` for a control method, which sets the command's target, kind and
        payload: given as keywords too, they were Python's "got multiple values"."""
        _own_fields(method, ("target", "kind", "payload"), kw)
        return await self.submit(kind, payload, **kw)

    async def update_budget(self, **limits_and_fields: Any) -> SteeringReceipt:
        """Change this run's limits: ``update_budget(max_model_calls=5, actor=..., ...)``.

        The keywords named like ``RunLimits`` fields are the new limits; the others are the
        command fields every control method takes (``actor``, ``priority``, ...). Any other
        keyword, or a limit it cannot change, is an ``ArgumentError`` (and a ``TypeError``)
        naming the limits it can change, before anything is sent."""
        limits = {k: limits_and_fields.pop(k) for k in _LIMIT_NAMES & limits_and_fields.keys()}
        fixed = limits.keys() - set(BUDGET_FIELDS)
        unknown = limits_and_fields.keys() - _SUBMIT_KEYWORDS - SteeringCommand.model_fields.keys()
        if fixed or unknown:
            what = (
                f"cannot change {', '.join(sorted(fixed))}"
                if fixed
                else f"got unexpected keyword(s) {', '.join(sorted(unknown))}"
            )
            raise BudgetArgumentError(
                f"update_budget() {what}: the limits it can change are "
                f"{', '.join(sorted(BUDGET_FIELDS))}"
            )
        return await self._send(
            "update_budget", SteeringKind.UPDATE_BUDGET, limits, limits_and_fields
        )

    def stream(
        self, mode: str | Iterable[str] = "values", *, subgraphs: bool = False
    ) -> AsyncIterator[Any]:
        """What the run does from now on, as ``graph.stream(...)`` yields it (graph runs):
        ``async for item in handle.stream(["updates", "steering"]): ...``. Leaving the loop
        early leaves the run running."""
        stream: AsyncIterator[Any] = self.driver.stream(mode, subgraphs=subgraphs)
        return stream

    # ------------------------------------------------------------------ result

    async def result(self) -> RunResult:
        """Wait for the run to end and return how it ended (never raises for the run's error).

        May be awaited on any thread's event loop: the run ends on its runtime's loop, and a
        waiter on another is woken on its own."""
        while self._result is None:  # again if it was reopened before this waiter woke
            loop = asyncio.get_running_loop()
            ended: asyncio.Future[None] = loop.create_future()
            if self._waiters is None:
                self._waiters = []
            self._waiters.append((loop, ended))
            try:
                if self._result is None:  # ended meanwhile, on another thread: no wait
                    await ended
            finally:
                # woken: finish took it already (and the list with it)
                if self._waiters is not None:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove((loop, ended))
        return self._result

    def finish(self, result: RunResult) -> None:
        """Called once by the execution layer when the run ends."""
        if self.left_behind is not None and _current_task() is self.left_behind:
            return  # the run ended without this task already: it keeps that end
        self.info.status = result.status
        self._result = result
        waiters, self._waiters = self._waiters, None
        if not waiters:
            return
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for loop, waiter in waiters:
            if loop is here:
                _wake(waiter)
            else:  # a waiter on another thread's loop: woken there, or it sleeps on
                with contextlib.suppress(RuntimeError):  # that loop has closed
                    loop.call_soon_threadsafe(_wake, waiter)

    def reopen(self) -> None:
        """The run takes another turn after it had finished (END_OF_TURN steering). A
        registered run is reopened through ``RunRegistry.reopen``, which finds it again."""
        self._result = None
        self.info.status = RunStatus.RUNNING


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # (cancelled: its result() was)
        waiter.set_result(None)


_LIMIT_NAMES = frozenset(RunLimits.model_fields)


#: Keywords of ``RunHandle.submit`` that are not fields of the command.
_SUBMIT_KEYWORDS = frozenset({"check"})


def _own_fields(method: str, own: tuple[str, ...], kw: dict[str, Any]) -> None:
    """Refuse keywords naming a part of the command ``method`` sets itself."""
    given = [name for name in own if name in kw]
    if given:
        raise KeywordArgumentError(
            f"RunHandle.{method}() sets the command's {', '.join(own)} itself (its target "
            "is this run), got "
            f"{', '.join(f'{name}=' for name in given)}; to send another command (to another "
            "target, of another kind) build a SteeringCommand and send it with Runtime.submit"
        )


def _flag(name: str, value: object) -> bool:
    """``value``, a flag: ``True`` or ``False`` (``"no"`` was read as true)."""
    if not isinstance(value, bool):
        raise ArgumentError(f"{name}= must be True or False, got {shown_repr(value)}")
    return value


def _reason(reason: str | None) -> dict[str, Any]:
    return {"reason": reason} if reason else {}
