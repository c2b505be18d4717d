"""``SteeringRouter``: submit → resolve → policies → persist → queue, and the lifecycle books.

Every command that is requested ends in exactly one terminal state (rejected, applied,
superseded, failed); the router refuses to emit anything for a command after that, which
makes a bookkeeping bug loud instead of silent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents._record import Record, record
from tinyagents.errors import (
    ConfigurationError,
    InvalidCommandError,
    StoreError,
    TinyAgentsError,
)
from tinyagents.events.bus import EventBus
from tinyagents.events.models import (
    SteeringEvent,
)
from tinyagents.events.redact import payload_summary, summarize
from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import (
    AgentRunTarget,
    AnyActor,
    AnyTarget,
    GraphNodeTarget,
    GraphTaskTarget,
    HumanActor,
    MiddlewareActor,
    ParentAgentActor,
    ReadOnlyDict,
    ReceiptStatus,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringReceipt,
    SubAgentRunTarget,
    ThreadTarget,
    checked,
    sender_tenant,
)
from tinyagents.protocol.state import CommandState
from tinyagents.runs.handle import RunHandle
from tinyagents.runs.info import RunInfo, subagent_event
from tinyagents.runs.registry import RunRegistry
from tinyagents.steering.conflicts import RedirectConflict
from tinyagents.steering.inbox import DEFAULT_MAX_QUEUED, LATE, Inbox
from tinyagents.steering.policies import (
    DEFAULT_MAX_TEXT_BYTES,
    default_pipeline,
    json_bytes,
    not_found,
)
from tinyagents.steering.policy import (
    PolicyChain,
    PolicyContext,
    PolicyPipeline,
    SenderContext,
    first_refusal,
    first_sender_refusal,
)

if TYPE_CHECKING:
    from tinyagents.store.base import Store, StoredCommand

_log = logging.getLogger("tinyagents.steering")
_steering_event = SteeringEvent._trusted
_policy_context = PolicyContext._trusted
#: The states the router passes and compares, read once: ``CommandState.ACCEPTED`` looks the
#: member up on the enum class each time, five times slower than reading a module's name.
_REQUESTED, _ACCEPTED, _DEFERRED = (
    CommandState.REQUESTED,
    CommandState.ACCEPTED,
    CommandState.DEFERRED,
)
_DELIVERED, _REJECTED = CommandState.DELIVERED, CommandState.REJECTED
_SUPERSEDED, _FAILED = CommandState.SUPERSEDED, CommandState.FAILED

#: Where a correlation id is unique: (``dedupe_scope(actor)``, correlation id).
_Key = tuple[str, str]
#: The fields all of a command's events share but its payload's summary (``_events_for``):
#: run, root run, parent run and tenant ids, target, actor, kind, correlation id, task, node
#: and checkpoint ids.
_Shared = tuple[
    str | None,
    str | None,
    str | None,
    str | None,
    AnyTarget,
    AnyActor,
    SteeringKind,
    str,
    str | None,
    str | None,
    str | None,
]
#: The reason every command still open when an in-memory runtime closes fails with.
CLOSED = "runtime closed before delivery"
#: How many commands whose log write failed the router remembers (a retry takes its row over).
_UNSURE_KEPT = 10_000
#: How many of the latest command ids an in-memory router remembers to answer duplicates.
DEDUPE_HORIZON = 100_000


@record(frozen=True, slots=True, eq=False)
class MiddlewareCapability:
    """Proof that a runtime-level middleware actor is the one the runtime owns (its
    supervisor): ``issue_capability`` makes one, and only a command submitted with it
    (``submit(cmd, capability=...)``) from ``SteeringActor.middleware(name)`` acts with that
    trust. The same actor typed by anyone else is an ordinary untrusted middleware."""

    name: str


class SteeringInvariantError(TinyAgentsError):
    """A command would get a second terminal state or an event after its terminal one (a bug)."""


@record(slots=True, eq=False, repr=False)
class _Tracked(Record):
    """A command the router follows from submission to its terminal state."""

    cmd: SteeringCommand
    state: CommandState
    key: _Key
    info: RunInfo | None = None
    #: ``steering.requested`` was emitted: from then on the command is in ``_tracked`` and
    #: must reach a terminal state. Until then a failure leaves no trace.
    announced: bool = False
    #: The command has its row in the store's steering log (always False without a store).
    persisted: bool = False
    #: Events emitted before the command had a run (a thread target with no live run yet):
    #: filed in the run's history once one takes the command.
    early: list[SteeringEvent] | None = None
    #: The fields all of this command's events share (``_Shared``), made of ``events_cmd``
    #: and ``events_info``: made again when ``cmd`` (a transform) or ``info`` (the target
    #: resolved) is replaced.
    events: _Shared | None = None
    events_cmd: SteeringCommand | None = None
    #: The payload summary of ``summary_of`` (a command's payload), which all of the
    #: command's events share: made again when the command (a transform) is replaced.
    summary: dict[str, Any] | None = None
    summary_of: dict[str, Any] | None = None
    events_info: RunInfo | None = None
    #: Submitted with a capability this router issued for the command's actor.
    trusted: bool = False
    #: Its take from the shared log (deferred → accepted, for ``info``'s run) failed on a
    #: store error: it may have been written all the same (a reply lost after COMMIT).
    unsure_take: bool = False
    #: The (reason, policy id) of its rejection by ``refuse_logged`` (deferred → rejected),
    #: whose write failed on a store error: it may have been written all the same (a reply
    #: lost after COMMIT). A row the log then holds ``rejected`` is this router's own
    #: rejection, which it ends here (``_rejected_after_all``), not another runtime's.
    unsure_reject: tuple[str, str | None] | None = None


class SteeringRouter:
    def __init__(
        self,
        *,
        registry: RunRegistry,
        bus: EventBus,
        pipeline: PolicyPipeline | None = None,
        store: Store | None = None,
        testing: bool = False,
        trusted_middleware: frozenset[str] = frozenset(),
        dedupe_horizon: int = DEDUPE_HORIZON,
        max_queued: int = DEFAULT_MAX_QUEUED,
        owner: str | None = None,
    ) -> None:
        if pipeline is not None and not isinstance(pipeline, PolicyPipeline):
            raise ConfigurationError(
                f"policies= takes a PolicyPipeline, got {type(pipeline).__name__}; wrap a "
                "list of policies as PolicyPipeline([...]) (default_policies() gives the "
                "built-in ones, to extend)"
            )
        self.registry = registry
        self.bus = bus
        self.pipeline = pipeline if pipeline is not None else default_pipeline()
        self.pipeline.chain()  # folded now, and again only when its list changes
        self.store = store
        #: The steering log's ``owner`` of each command this router logs or takes from the
        #: log (its runtime's ``runtime_id``): a runtime that restores the command judges by
        #: it whether the command's run may still apply it (``Runtime._fail_orphans``).
        self.owner = owner
        self.testing = testing
        self.trusted_middleware = trusted_middleware
        #: how many commands each run's queue holds before it refuses more (``Inbox``)
        self.max_queued = max_queued
        self.grants: set[tuple[str, str]] = set()
        self._capabilities: set[MiddlewareCapability] = set()
        self._tracked: dict[_Key, _Tracked] = {}  # open commands only
        #: The queued (then delivered) commands' books by the command's ``id``, until
        #: terminal: an inbox reports a command by the very object it took, whose book is
        #: then found without making its key (``_key``: three attribute reads of a pydantic
        #: model and a string, at delivered and at applied). The book holds the command, so
        #: its ``id`` is not reused while it is here.
        self._queued: dict[int, _Tracked] = {}
        # The ids of the latest ``dedupe_horizon`` commands (and of every open one), oldest
        # first in ``_seen_order``, the terminal state of those that ended and the run each
        # was filed under (a duplicate's receipt names it): older ids are forgotten (a
        # durable store's log still answers them ``duplicate``). Two dicts, not a tuple per
        # command: every tuple kept is one more object the cyclic collector walks.
        self.dedupe_horizon = dedupe_horizon
        self._terminal: dict[_Key, CommandState] = {}
        self._ended_in: dict[_Key, str] = {}
        self._seen: set[_Key] = set()
        self._seen_order: deque[_Key] = deque()
        # Steering events by run: dropped with the run when the registry releases it.
        self._history: dict[str, list[SteeringEvent]] = {}
        # deferred + restored, by target key, then by command (its id in its sender's scope:
        # two senders' commands under one id both wait)
        self._waiting: dict[str, dict[_Key, _Tracked]] = {}
        #: Thread key -> the run ids that restored commands for that thread wait for (the run
        #: of the thread that accepted each before a restart): a run of the thread that
        #: registers under another id takes them (``_thread_takes_restored``). Empty but after
        #: a restart.
        self._restored_threads: dict[str, dict[str, None]] = {}
        #: The run ids that ``restore`` filed commands under. Empty but after a restart.
        self._restored_runs: set[str] = set()
        #: commands whose log write failed, so it may have been written (a lost reply): in
        #: insertion order, at most ``_UNSURE_KEPT``
        self._unsure: dict[_Key, None] = {}
        #: How many submits are between resolving their run and its receipt (a policy may
        #: await meanwhile), by run id: such a run is busy (not released under them). An
        #: entry goes when its count is back to 0.
        self._evaluating: dict[str, int] = {}
        #: The ids whose first submit is under way and not yet announced (a policy or the
        #: store write is awaited; it may still fail and leave no trace), each with the
        #: event a resend of that id waits on (made by the first resend): gone when the
        #: submit returns or raises.
        self._under_way: dict[_Key, asyncio.Event | None] = {}

    # ------------------------------------------------------------------ public

    def issue_capability(self, name: str) -> MiddlewareCapability:
        """A capability for the runtime-level middleware actor ``name`` (see
        ``MiddlewareCapability``); only its holder's commands are trusted."""
        capability = MiddlewareCapability(name)
        self._capabilities.add(capability)
        return capability

    async def submit(
        self, cmd: SteeringCommand, *, capability: MiddlewareCapability | None = None
    ) -> SteeringReceipt:
        """The receipt of ``cmd``; ``duplicate`` for an id already taken, once the submit that
        took it is done (a resend during that submit waits: if it fails, the id is free)."""
        if not isinstance(cmd, SteeringCommand):  # an AttributeError from in here, otherwise
            raise InvalidCommandError(
                f"submit takes a SteeringCommand, got {type(cmd).__name__}; build one with "
                "SteeringCommand(target=..., actor=..., kind=..., payload=...) or "
                "SteeringCommand.model_validate(data)"
            )
        if type(cmd.payload) is not ReadOnlyDict:  # built past validation (``checked``)
            cmd = checked(cmd)
        key = _key(cmd)
        while key in self._seen:
            if key not in self._under_way:
                return await self._duplicate(key)
            # The first submit of this id is still under way: its outcome decides (a failure
            # frees the id, and this resend is then submitted as the first).
            await self._wait_for_first(key)
        self._seen.add(key)
        self._under_way[key] = None
        self._seen_order.append(key)
        if len(self._seen_order) > self.dedupe_horizon:
            self._forget_oldest_ids(key)
        tracked = _Tracked(cmd, _REQUESTED, key)
        if capability is not None:
            tracked.trusted = self._holds(cmd, capability)
        try:
            handle, reason, info = self._resolve(cmd)
            tracked.info = info
            if handle is None:
                if reason is None:  # a thread with no live run yet: wait for one
                    # ... unless no run could ever take it, or its run would find no room
                    refused = self._refused_by_sender(tracked) or self._no_room_to_wait(tracked)
                    if refused is not None:
                        return await self._reject(tracked, *refused)
                    return await self._defer(
                        tracked, f"no live run on {cmd.target.describe()}", "router"
                    )
                return await self._reject(tracked, reason, "router")
            run_id = handle.info.run_id
            evaluating = self._evaluating
            evaluating[run_id] = evaluating.get(run_id, 0) + 1
            try:
                receipt = self._evaluate_now(tracked, handle)
                if receipt is not None:
                    return receipt
                return await self._evaluate(tracked, handle)
            finally:
                left = evaluating[run_id] - 1
                if left:
                    evaluating[run_id] = left
                else:
                    del evaluating[run_id]
        except BaseException:
            if not tracked.announced:
                # Nothing was emitted, kept or written: the id stays free for a retry, and
                # leaves the horizon's order too (a retry enters it anew: a stale entry
                # left behind would reach the front first and forget the retry's id early).
                self._seen.discard(key)
                order = self._seen_order
                if order[-1] == key:  # nearly always: no other submit began meanwhile
                    order.pop()
                else:
                    order.remove(key)
            raise
        finally:
            waiting = self._under_way.pop(key)
            if waiting is not None:
                waiting.set()

    async def _duplicate(self, key: _Key) -> SteeringReceipt:
        """The receipt for a second command under ``key``: it names the run the first was
        filed under, as the first's receipt did (None for one that had no run the sender may
        know of). This router's books say; for a command logged by another process (or
        restored with no run yet), the store's log does."""
        tracked = self._tracked.get(key)
        run_id: str | None = None
        if tracked is not None:
            run_id = tracked.info.run_id if tracked.info is not None else None
        else:
            run_id = self._ended_in.get(key)
        if run_id is None and self.store is not None:
            try:
                stored = await self.store.get_command(key[1], scope=key[0])
            except StoreError as exc:  # the answer stands; only the run it names is unknown
                _log.warning("command %s: could not read its run from the log: %s", key[1], exc)
                stored = None
            run_id = stored.run_id if stored is not None else None
        return SteeringReceipt.duplicate(key[1], run_id)

    async def _wait_for_first(self, key: _Key) -> None:
        """Wait until the submit under way for ``key`` has returned or raised."""
        waiting = self._under_way[key]
        if waiting is None:
            waiting = self._under_way[key] = asyncio.Event()
        await waiting.wait()

    def history(self, run_id: str) -> list[SteeringEvent]:
        return list(self._history.get(run_id, ()))

    def waiting_run_ids(self) -> list[str]:
        """The run ids (not threads) that commands wait for: restored after a restart, or
        deferred by a policy."""
        return [key for key in self._waiting if not key.startswith(_THREAD)]

    def restored_run_ids(self) -> list[str]:
        """Those of ``waiting_run_ids`` that commands restored after a restart wait for (a
        policy's deferral of a live run's command is no such wait)."""
        return [key for key in self.waiting_run_ids() if key in self._restored_runs]

    def fail_waiting(
        self, run_ids: Iterable[str], reason: str, *, threads_wait: bool = False
    ) -> None:
        """Fail the commands waiting for runs that will never come (with ``reason``).
        ``threads_wait``: a command for a thread is not failed but waits for the thread's
        next run, which takes it (and finds it applied already, if its checkpoint says so):
        it was the thread's, whichever of its runs accepted it."""
        for run_id in run_ids:
            for key, tracked in (self._waiting.pop(run_id, None) or {}).items():
                if tracked.state.terminal:
                    continue
                if threads_wait and isinstance(tracked.cmd.target, ThreadTarget):
                    self._waiting.setdefault(_target_key(tracked.cmd), {})[key] = tracked
                else:
                    self._finish(tracked, _FAILED, reason=reason)

    def waiting_for_threads(self) -> list[tuple[SteeringCommand, str | None]]:
        """(command, tenant among whose runs its thread resolves) of the commands deferred
        for the next run of a thread, that another runtime may take (``hand_off``): those the
        router holds in memory only (a command in a durable steering log is that log's: not
        handed off, ``logged_for_threads``)."""
        return self._waiting_on_threads(logged=False)

    def logged_for_threads(self) -> list[tuple[SteeringCommand, str | None]]:
        """(command, tenant among whose runs its thread resolves) of the commands deferred
        for the next run of a thread that the durable steering log holds: the ones
        ``waiting_for_threads`` leaves out. Another runtime cannot take one over (its log's
        copy would be applied again by that log's next runtime); when the thread's run is
        in another runtime, ``refuse_logged`` ends it instead of leaving it waiting. One
        whose take by a run here may have reached the log (``unsure_take``) is left out:
        that run settles it."""
        return self._waiting_on_threads(logged=True)

    def _waiting_on_threads(self, *, logged: bool) -> list[tuple[SteeringCommand, str | None]]:
        """``logged_for_threads`` (``logged``) or ``waiting_for_threads``."""
        return [
            (tracked.cmd, self.registry.thread_tenant(tracked.cmd.actor))
            for key, waiting in self._waiting.items()
            if key.startswith(_THREAD)
            for tracked in waiting.values()
            if _sendable(tracked, logged=logged)
        ]

    def _take_waiting(self, cmd: SteeringCommand, *, logged: bool) -> tuple[str, _Tracked] | None:
        """(thread key, its book) of ``cmd``, taken out of the commands waiting for its
        thread's next run to be sent away (``hand_off``, ``refuse_logged``; ``logged``: one
        the durable log holds); None if it is not waiting so (any more)."""
        thread = _target_key(cmd)
        waiting = self._waiting.get(thread)
        key = _key(cmd)
        tracked = waiting.get(key) if waiting is not None else None
        if tracked is None or not _sendable(tracked, logged=logged):
            return None
        del waiting[key]  # type: ignore[union-attr]
        if not waiting:
            del self._waiting[thread]
        return thread, tracked

    async def refuse_logged(self, cmd: SteeringCommand, reason: str, policy_id: str) -> bool:
        """End ``cmd`` (``logged_for_threads``) ``rejected`` with ``reason``: its thread's run
        is in another runtime, which cannot take it over, and left waiting here it would
        stay ``deferred`` while that run goes on without it. The rejection is a
        compare-and-set on its logged row (deferred -> rejected): if another runtime sharing
        the log took or settled it first, it is dropped here with no event (it is theirs).
        True once it is rejected; False when it was not waiting (any more: a run here took
        it) or the log gave it to another runtime. While the write is under way no run here
        takes it; if the write fails (``StoreError``) it waits again, or goes to a run of its
        thread that registered here meanwhile. A write that failed may have committed all
        the same (its reply lost): then the next refusal, or the take by a run of its thread
        here, finds the row ``rejected`` and ends the command ``rejected`` here, once
        (``_rejected_after_all``), not dropped as another runtime's."""
        taken = self._take_waiting(cmd, logged=True)
        if taken is None:
            return False
        thread, tracked = taken
        try:
            receipt = await self._reject(tracked, reason, policy_id)
        except BaseException:
            if tracked.key in self._tracked and tracked.state is _DEFERRED:
                tracked.unsure_reject = (reason, policy_id)  # it may have been written
                await self._wait_again(thread, tracked)
            raise
        return receipt.status == ReceiptStatus.REJECTED

    async def forget_taken(self, cmd: SteeringCommand) -> bool:
        """Drop ``cmd`` (``logged_for_threads``) with no event if another runtime sharing the
        durable log took or settled it since it was deferred here (a run of its thread
        there took it from the log: ``Runtime.register``), read from the log now
        (``_settled_elsewhere``): left here, its copy waited for a run of its thread here
        that may never come. True once dropped (or ended here: this router's own refusal,
        whose reply was lost); else it waits on, as when the log cannot be read
        (``StoreError``, raised)."""
        taken = self._take_waiting(cmd, logged=True)
        if taken is None:
            return False
        thread, tracked = taken
        gone = False
        try:
            gone = await self._settled_elsewhere(tracked)
        finally:
            if not gone and tracked.key in self._tracked:
                await self._wait_again(thread, tracked)
        return gone

    async def hand_off(
        self, cmd: SteeringCommand, send: Callable[[SteeringCommand], Awaitable[bool]]
    ) -> bool:
        """Give ``cmd``, deferred for its thread's next run (``waiting_for_threads``), to
        another runtime, where a run of its thread is: ``send`` delivers it there and says
        whether it did (the other runtime's router takes it from ``requested`` on, as a
        command of its own). A command handed off leaves this router's books with no event
        (its events are the other runtime's now); its id stays taken, so the same command
        sent here again is a duplicate. While ``send`` is under way no run here takes it; if
        it was not sent (``send`` returned False or raised), it waits again, or goes to a run
        of its thread that registered here meanwhile. False: it was not waiting (any more),
        or was not sent."""
        taken = self._take_waiting(cmd, logged=False)
        if taken is None:
            return False
        thread, tracked = taken
        sent = False
        try:
            sent = await send(tracked.cmd)
        finally:
            if sent:
                self._untrack(tracked)
            else:
                await self._wait_again(thread, tracked)
        return sent

    async def _wait_again(self, thread: str, tracked: _Tracked) -> None:
        """``tracked``, taken out of the commands waiting for ``thread`` to be sent away
        (``hand_off``, ``refuse_logged``) and not sent: it waits for the thread's next run
        again, or goes to a run of its thread that registered here meanwhile."""
        cmd = tracked.cmd
        tenant = self.registry.thread_tenant(cmd.actor)
        handle = self.registry.for_thread(cmd.target.thread_id, tenant)  # type: ignore[union-attr]
        if handle is None:
            self._waiting.setdefault(thread, {})[tracked.key] = tracked
        else:
            await self._hand_over(thread, tracked, handle)

    def busy_runs(self) -> set[str]:
        """The runs something still waits on: an open command's run, a command being
        submitted to it (in the policies), or commands waiting (deferred or restored) for that
        run id. They must not be released."""
        busy = {t.info.run_id for t in self._tracked.values() if t.info is not None}
        busy.update(self._waiting)
        busy.update(self._evaluating)
        return busy

    def release(self, run_ids: Iterable[str]) -> None:
        """Drop the steering books of released runs: their history and sibling grants.
        Command ids stay behind for deduplication, within the horizon."""
        gone = set(run_ids)
        for run_id in gone:
            self._history.pop(run_id, None)
        if self.grants:
            self.grants.difference_update([g for g in self.grants if g[0] in gone or g[1] in gone])

    def state(self, correlation_id: str, *, scope: str | None = None) -> str | None:
        """``accepted``/``deferred``/``delivered`` or the terminal state of the command with
        this id in ``scope`` (``dedupe_scope(actor)``: ``"tenant:<id>"`` for a human's, ``""``
        for in-process actors); with no scope, of the first command found with this id."""
        if scope is not None:
            key = (scope, correlation_id)
            tracked = self._tracked.get(key)
            if tracked is not None:
                return tracked.state
            return self._terminal.get(key)
        for (_, cid), tracked in self._tracked.items():
            if cid == correlation_id:
                return tracked.state
        for (_, cid), state in self._terminal.items():
            if cid == correlation_id:
                return state
        return None

    def open_commands(self) -> list[SteeringCommand]:
        return [t.cmd for t in self._tracked.values() if not t.state.terminal]

    def open_states(self) -> list[tuple[str | None, SteeringCommand, CommandState]]:
        """(run id, command, state) of every open command (run id None: no run yet)."""
        return [(t.info.run_id if t.info else None, t.cmd, t.state) for t in self._tracked.values()]

    def settle_all(self, reason: str = CLOSED) -> None:
        """Fail every command still open (an in-memory runtime closing: nothing will carry
        them on). A runtime with a durable store leaves them open in its log instead, for
        the next runtime on that store to hand over."""
        for tracked in list(self._tracked.values()):
            self._finish(tracked, _FAILED, reason=reason)

    def grant(self, from_run_id: str, to_run_id: str) -> None:
        """Allow one run's agent to steer another it has no authority over (a sibling)."""
        self.grants.add((from_run_id, to_run_id))

    async def attach(
        self,
        handle: RunHandle,
        *,
        redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED,
    ) -> None:
        """Give a newly registered run its inbox and hand it any command waiting for it."""
        handle.inbox = Inbox(
            self,
            depth=handle.info.depth,
            # no wake: ``_put`` nudges the run (no bound method kept per run)
            redirect_conflict=redirect_conflict,
            max_queued=self.max_queued,
        )
        await self.target_changed(handle)

    async def target_changed(self, handle: RunHandle) -> None:
        """Re-evaluate commands deferred for (or restored for) this run or its thread."""
        keys = [handle.run_id]
        if handle.info.thread_id is not None:
            thread = _thread_key(handle.info.thread_id)
            keys.append(thread)
            if self._restored_threads:  # after a restart only
                self._thread_takes_restored(thread, handle.run_id)
        for key in keys:
            waiting = self._waiting.pop(key, None)
            if waiting and key != handle.run_id and handle.status.finished:
                waiting = self._left_to_the_next_run(key, waiting, handle)
            if not waiting:
                continue
            queue = list(waiting.values())
            try:
                while queue:
                    await self._hand_over(key, queue[0], handle)
                    del queue[0]
            except BaseException:
                # Interrupted (the registering or finishing task cancelled, or a bug raised):
                # what it did not reach waits on, and so does the command it was on unless
                # that one moved on (settled, or handed to the run)
                current = queue[0]
                if current.key in self._tracked and (
                    current.state is _DEFERRED or current.info is not handle.info
                ):
                    if current.persisted and current.state is _DEFERRED:
                        current.unsure_take = True  # its take may have reached the log
                else:
                    del queue[0]
                for tracked in queue:
                    self._waiting.setdefault(key, {})[tracked.key] = tracked
                raise

    def _thread_takes_restored(self, thread: str, run_id: str) -> None:
        """Move the restored commands for ``thread`` that wait for the id of another run than
        ``run_id`` (the run of the thread that accepted them before a restart) to the front
        of the commands waiting for the thread's next run: run ``run_id`` holds the thread
        here, so that run is not coming back under its id (a thread's next start continues
        the run its last checkpoint names, and a run started again on a finished thread saves
        none). Left where they were, they waited for good, open in the steering log; a thread
        command is the thread's, whichever of its runs takes it."""
        taken: dict[_Key, _Tracked] = {}
        for other in self._restored_threads.pop(thread, ()):
            waiting = self._waiting.get(other)
            if other == run_id or not waiting:
                continue  # its own are taken under its id
            for key, tracked in list(waiting.items()):
                if _target_key(tracked.cmd) == thread:
                    taken[key] = waiting.pop(key)
            if not waiting:
                del self._waiting[other]
        if taken:  # accepted by a run before the restart: before those deferred for none
            self._waiting[thread] = {**taken, **self._waiting.get(thread, {})}

    def _left_to_the_next_run(
        self, key: str, waiting: dict[_Key, _Tracked], ended: RunHandle
    ) -> dict[_Key, _Tracked]:
        """Of the commands waiting for the thread of a run that ended, those it still settles
        (its own take of one, whose reply was lost); the others wait for the thread's next
        run: an ended run takes no command of its thread."""
        mine = {k: t for k, t in waiting.items() if t.unsure_take and t.info is ended.info}
        rest = {k: t for k, t in waiting.items() if k not in mine}
        if rest:
            self._waiting.setdefault(key, {}).update(rest)
        return mine

    async def _hand_over(self, key: str, tracked: _Tracked, handle: RunHandle) -> None:
        """Give ``tracked``, waiting under ``key``, to ``handle``'s run: evaluated (a deferred
        command) or queued (a restored one); back to waiting if it cannot be yet."""
        cmd = tracked.cmd
        tenant = (
            self.registry.thread_tenant(cmd.actor)
            if isinstance(cmd.target, ThreadTarget)
            else sender_tenant(cmd.actor)
        )
        if tenant is not None and tenant != handle.info.tenant_id:
            # another tenant's run on the thread: to the sender there is still no run there
            # (as ``_resolve`` answers), so the command waits on, and none of its events
            # reaches this run's history
            self._waiting.setdefault(key, {})[tracked.key] = tracked
            return
        try:
            if tracked.persisted and await self._settled_elsewhere(tracked):
                return
        except StoreError as exc:
            # the log cannot say: the command waits on for the next run (a second
            # application is worse than a late one)
            _log.warning("command %s waits: %s", tracked.cmd.correlation_id, exc)
            self._waiting.setdefault(key, {})[tracked.key] = tracked
            return
        tracked.info = handle.info
        if tracked.early:  # its requested/deferred, emitted before it had a run
            self._history.setdefault(handle.run_id, []).extend(tracked.early)
            tracked.early = None
        try:
            if tracked.state is _ACCEPTED:  # restored after a restart
                await self._enqueue(tracked, handle)
            else:
                await self._evaluate(tracked, handle)
        except StoreError as exc:
            if tracked.state is _DEFERRED and tracked.persisted:
                # its take (a compare-and-set on the shared log) failed: another runtime
                # may hold a copy, and may have applied it meanwhile. It waits on here, as
                # when the log cannot be read (a late application is better than a second
                # one, or a "failed" over an "applied")
                _log.warning("command %s waits: %s", tracked.cmd.correlation_id, exc)
                tracked.unsure_take = True
                self._waiting.setdefault(key, {})[tracked.key] = tracked
            elif not tracked.state.terminal:
                self._finish(tracked, _FAILED, reason=f"store error: {exc}")

    async def _settled_elsewhere(self, tracked: _Tracked) -> bool:
        """Whether another runtime sharing the steering log settled ``tracked`` (a command
        this one restored when it opened, or deferred and left waiting) since: then it is
        done here too, with no event (the one that settled it emitted them). Read from the
        log just before the command is handed to a run, so a copy of it is never applied
        twice (a runtime that opened while it was open, a run of its thread on each)."""
        assert self.store is not None
        cmd = tracked.cmd
        stored = await self.store.get_command(cmd.correlation_id, scope=tracked.key[0])
        state = CommandState(stored.state) if stored is not None else None
        if state is None:
            return False
        if state.terminal:
            refusal = tracked.unsure_reject
            if refusal is not None and _our_rejection(
                tracked, stored, _as_logged_rejection(cmd), None
            ):
                # this router's own refusal, whose reply was lost: it ends here
                self._finish(tracked, _REJECTED, reason=refusal[0], policy_id=refusal[1])
                return True
            self._untrack(tracked)
            self._terminal[tracked.key] = state
            if stored is not None and stored.run_id is not None:
                self._ended_in[tracked.key] = stored.run_id
            return True
        if tracked.state is _DEFERRED and state is not _DEFERRED:
            if (
                tracked.unsure_take
                and state is _ACCEPTED
                and tracked.info is not None
                and stored is not None
                and stored.run_id == tracked.info.run_id
            ):
                # our own take, whose reply was lost: it is this runtime's to hand over
                tracked.state, tracked.unsure_take = _ACCEPTED, False
                return False
            # another runtime took it from the log (it is theirs to settle) since it was
            # deferred here
            self._untrack(tracked)
            return True
        return False

    def _untrack(self, tracked: _Tracked) -> None:
        """Close ``tracked``'s book here without a terminal state of this router's own (it
        was handed over, or another runtime settles it): gone from ``_tracked`` and from
        ``_queued`` (which would keep its command alive)."""
        self._tracked.pop(tracked.key, None)
        if self._queued.get(id(tracked.cmd)) is tracked:
            del self._queued[id(tracked.cmd)]

    async def target_finished(self, handle: RunHandle) -> None:
        """The run reached its last boundary: fail what is pending, settle what waits on it."""
        handle.inbox.close(LATE)
        for tracked in list(self._tracked.values()):
            if tracked.state is _DELIVERED and tracked.info is handle.info:
                self.mark_failed(tracked.cmd, LATE)
        await self.target_changed(handle)

    def taken_over(self, pending: list[tuple[SteeringCommand, str, str | None]]) -> int:
        """``restore`` the commands of ``pending`` this router has not seen: those another
        process on the store accepted for a run that goes on here now (that process died, and
        this one was open before they were logged, so its ``restore`` at open missed them),
        or another runtime sharing the log deferred for a thread a run of which registers
        here. Not one this router logged itself with its reply lost (``_unsure``): the retry
        of that submit takes its row over. Returns how many."""
        fresh = [
            p for p in pending if _key(p[0]) not in self._seen and _key(p[0]) not in self._unsure
        ]
        if fresh:
            self.restore(fresh)
        return len(fresh)

    def restore(self, pending: list[tuple[SteeringCommand, str, str | None]]) -> None:
        """Load the commands a previous process accepted (or deferred) but never settled, as
        (cmd, state, run_id). Other ids need not be loaded: the store refuses a second
        command with a logged id, which the router answers ``duplicate``."""
        for cmd, state, run_id in pending:
            key = _key(cmd)
            self._seen.add(key)
            self._seen_order.append(key)
            tracked = _Tracked(
                cmd,
                _ACCEPTED if state == _ACCEPTED else _DEFERRED,
                key,
                announced=True,
                persisted=True,
            )
            self._tracked[key] = tracked
            waiting_key = run_id or _target_key(cmd)
            self._waiting.setdefault(waiting_key, {})[key] = tracked
            if run_id is not None:
                self._restored_runs.add(run_id)
            if run_id is not None and isinstance(cmd.target, ThreadTarget):
                self._restored_threads.setdefault(_target_key(cmd), {})[run_id] = None

    # ------------------------------------------------------------------ execution reports

    def mark_delivered(
        self,
        cmd: SteeringCommand,
        boundary: Boundary,
        where: dict[str, Any],
        at: datetime | None = None,
    ) -> None:
        """``cmd`` was delivered at ``boundary`` (``at``: when, for all the commands one
        boundary takes; now if not given)."""
        tracked = self._queued.get(id(cmd))
        if tracked is None or tracked.cmd is not cmd:  # ``_open(cmd)`` inline
            tracked = self._tracked.get(_key(cmd)) or self._open(cmd)
        tracked.state = _DELIVERED
        # ``_value_``: the member's text without the ``value`` property's descriptor call
        # by position: binding keywords costs more (this runs for every command)
        at = _clock.now() if at is None else at
        self._emit("steering.delivered", tracked, at, None, None, boundary._value_, where)

    def mark_applied(self, cmd: SteeringCommand, affected: dict[str, Any]) -> None:
        tracked = self._queued.get(id(cmd))
        if tracked is None or tracked.cmd is not cmd:  # ``_open(cmd)`` inline
            tracked = self._tracked.get(_key(cmd)) or self._open(cmd)
        self._emit("steering.applied", tracked, None, None, None, None, affected)

    def mark_failed(self, cmd: SteeringCommand, reason: str) -> None:
        self._finish(self._open(cmd), _FAILED, reason=reason)

    def mark_superseded(self, cmd: SteeringCommand, by: str) -> None:
        self._finish(self._open(cmd), _SUPERSEDED, reason=f"superseded by {by}", superseded_by=by)

    def mark_withdrawn(self, cmd: SteeringCommand, reason: str, by: str | None) -> None:
        """A queued command taken back by the run layer (``Inbox.withdraw``): what a run
        above passed down for a command of its own that has since been made moot."""
        self._finish(self._open(cmd), _SUPERSEDED, reason=reason, superseded_by=by)

    # ------------------------------------------------------------------ internals

    def _holds(self, cmd: SteeringCommand, capability: MiddlewareCapability) -> bool:
        actor = cmd.actor
        return (
            capability in self._capabilities
            and isinstance(actor, MiddlewareActor)
            and actor.run_id is None
            and actor.name == capability.name
        )

    def _resolve(self, cmd: SteeringCommand) -> tuple[RunHandle | None, str | None, RunInfo | None]:
        """(handle whose queue takes ``cmd``, None, its info); (None, reason, info) to reject;
        (None, None, None) to defer. ``info`` is the run whose history files the command: None
        when the sender may not learn that the run exists."""
        target = cmd.target
        # ``type(...) is`` first: an isinstance that fails on a pydantic class runs the ABC
        # check in Python, and nearly every command names an agent run.
        if type(target) is not AgentRunTarget and isinstance(target, ThreadTarget):
            handle = self.registry.for_thread(
                target.thread_id, self.registry.thread_tenant(cmd.actor)
            )
            if handle is None:
                return None, None, None
            return handle, None, handle.info
        handle = self.registry.get(target.run_id)
        actor = cmd.actor
        # ``_hidden`` inline (every command asks): a human never sees another tenant's runs
        if handle is None or (
            type(actor) is HumanActor and actor.tenant_id != handle.info.tenant_id
        ):
            # Same reason, policy id and (absent) run id as a missing run: a receipt must not
            # tell a human whether another tenant's run exists, and the attempt is filed in
            # the sender's audit trail only, never in that run's history.
            return None, not_found(cmd), None
        if type(target) is AgentRunTarget:  # the usual case: nothing more to check
            return handle, None, handle.info
        if (
            isinstance(target, SubAgentRunTarget)
            and handle.info.parent_run_id != target.parent_run_id
        ):
            reason = f"not found: run {target.run_id} is not a child of {target.parent_run_id}"
            return None, reason, None
        if isinstance(target, (GraphTaskTarget, GraphNodeTarget)):
            problem = handle.driver.check_target(cmd)
            if problem is not None:
                return None, problem, handle.info
            routed = handle.driver.route(cmd)
            if routed is not None:
                return routed, None, routed.info
        return handle, None, handle.info

    def _trusted_middleware(self, tracked: _Tracked) -> frozenset[str]:
        if tracked.trusted:
            return self.trusted_middleware | {tracked.cmd.actor.name}  # type: ignore[union-attr]
        return self.trusted_middleware

    def _refused_by_sender(self, tracked: _Tracked) -> tuple[str, str] | None:
        """(reason, policy id) if a policy of the pipeline refuses ``tracked``'s command before
        any run is known to take it (``CheckPolicy.check_sender``): a sender without the
        authority, a payload too large. Such a command is not kept waiting for a run."""
        ctx = SenderContext(
            testing=self.testing, trusted_middleware=self._trusted_middleware(tracked)
        )
        return first_sender_refusal(self.pipeline.policies, tracked.cmd, ctx)

    def _no_room_to_wait(self, tracked: _Tracked) -> tuple[str, str] | None:
        """(reason, ``"queue"``) if ``tracked``'s sender already has as many commands waiting
        for the next run of its thread as that run's queue takes (``max_queued``; a cancel
        up to twice as many, as ``Inbox.conflict`` counts): the run would refuse the rest the
        moment it registered, and until then they would all be kept. Counted in the sender's
        scope (``dedupe_scope``): another tenant's commands for its own thread of that name
        take no room, and tell nothing of it."""
        waiting = self._waiting.get(_target_key(tracked.cmd))
        bound = self.max_queued
        if waiting is None or len(waiting) < bound:
            return None
        scope = tracked.key[0]
        mine = sum(1 for key in waiting if key[0] == scope)
        if mine < bound or (tracked.cmd.kind is SteeringKind.CANCEL and mine < 2 * bound):
            return None
        return (
            f"{tracked.cmd.target.describe()} has no live run, and {mine} commands already "
            f"wait for its next one (max_queued={bound}); send this once a run of the thread "
            "has taken them",
            "queue",
        )

    def _context_for(self, tracked: _Tracked, handle: RunHandle) -> PolicyContext:
        """The context ``tracked``'s command is decided in, for ``handle``'s run."""
        cmd = tracked.cmd
        target = cmd.target
        # ``_task_and_node`` and ``_trusted_middleware`` asked only when they can say more
        # than the usual answer (every command passes here)
        if type(target) is AgentRunTarget:
            task_id = node_id = None
        else:
            task_id, node_id = _task_and_node(target)
        # by position (``PolicyContext(...)``'s keywords cost as much again as building it)
        return _policy_context(
            handle.info,
            self.registry.tree,
            self.testing,
            self.grants,
            self._trusted_middleware(tracked) if tracked.trusted else self.trusted_middleware,
            task_id,
            node_id,
            # the payload's one walk: its summary for the events, its size for the policies
            _summarized(tracked, cmd.payload),
        )

    def _chain(self, handle: RunHandle) -> PolicyChain:
        """The pipeline's chain for ``handle``'s run, with the run's own policies."""
        run_policies = handle.own_policies
        if run_policies:  # folded once per run (again only if either list changes)
            chain = handle.policy_chain = self.pipeline.chain(run_policies, handle.policy_chain)
            return chain
        return self.pipeline.chain()

    def _evaluate_now(self, tracked: _Tracked, handle: RunHandle) -> SteeringReceipt | None:
        """``_evaluate`` without its coroutine, for a command with nothing to await: no
        checkpoint to look up, no store to write it to, a live run, a chain of inline checks
        (most commands, with the default pipeline). Its policies' refusal, the queue's, or its
        acceptance, as ``_evaluate`` would give them. None, having done nothing, for any
        other: ``_evaluate`` takes it then. ``tests/steering/test_hot_path_equivalence.py``
        keeps the two equal."""
        cmd = tracked.cmd
        if (
            cmd.checkpoint_id is not None
            or self.store is not None
            or handle.info.status.finished
            or tracked.state in _TERMINAL
        ):
            return None
        # (most runs have no policies of their own: the pipeline's chain, with no call between)
        chain = self._chain(handle) if handle.own_policies else self.pipeline.chain()
        checks = chain.checks
        if checks is None:
            return None
        refused = first_refusal(checks, cmd, self._context_for(tracked, handle))
        if refused is not None:
            reason, policy_id = refused
            return self._rejected(tracked, reason or "rejected", policy_id)
        # from here, as ``_accept`` with no store, for a live run
        conflict = handle.inbox.conflict(cmd, tracked.key)
        if conflict is not None:
            return self._rejected(tracked, conflict, "queue")
        self._accepted(tracked, handle, cmd, chain.accept_id, None)
        self._put(tracked, handle)
        return self._receipt(tracked, ReceiptStatus.ACCEPTED, None, chain.accept_id)

    async def _evaluate(self, tracked: _Tracked, handle: RunHandle) -> SteeringReceipt:
        cmd = tracked.cmd
        ctx = self._context_for(tracked, handle)
        if cmd.checkpoint_id is not None:
            latest = ctx.latest_checkpoint_id = await handle.driver.latest_checkpoint_id()
            if latest is not None and cmd.checkpoint_id != latest:
                ctx.checkpoint_known = await handle.driver.has_checkpoint(cmd.checkpoint_id)
        chain = self._chain(handle)
        if chain.checks is not None:
            # Only inline checks (the default pipeline): what chain.decide would do, without
            # its coroutine or a Decision.
            refused = first_refusal(chain.checks, cmd, ctx)
            if refused is not None:
                reason, policy_id = refused
                return await self._reject(tracked, reason or "rejected", policy_id)
            receipt = self._accept_now(tracked, handle, cmd, chain.accept_id)
            if receipt is not None:
                return receipt
            return await self._accept(tracked, handle, cmd, chain.accept_id)
        decision = await chain.decide(cmd, ctx)
        if decision.status == "reject":
            return await self._reject(tracked, decision.reason or "rejected", decision.policy_id)
        if decision.status == "defer":
            return await self._defer(
                tracked, decision.reason or "deferred", decision.policy_id, handle
            )
        return await self._accept(
            tracked, handle, decision.command, decision.policy_id, decision.transforms
        )

    async def _reject(
        self, tracked: _Tracked, reason: str, policy_id: str | None
    ) -> SteeringReceipt:
        # Logged so that a retry with the same correlation id after a restart is still a
        # duplicate: the first outcome stands.
        run_id = tracked.info.run_id if tracked.info else None
        if not await self._persist(tracked, _REJECTED, run_id):
            return await self._duplicate(tracked.key)
        return self._rejected(tracked, reason, policy_id)

    def _rejected(self, tracked: _Tracked, reason: str, policy_id: str | None) -> SteeringReceipt:
        """Record ``tracked`` as rejected (logged already, if there is a log): its requested
        and rejected events, and its receipt."""
        at = _clock.now()  # requested and rejected: one step, one moment
        self._announce(tracked, at)
        self._finish(tracked, _REJECTED, at=at, reason=reason, policy_id=policy_id)
        return self._receipt(tracked, ReceiptStatus.REJECTED, reason, policy_id)

    async def _defer(
        self, tracked: _Tracked, reason: str, policy_id: str | None, handle: RunHandle | None = None
    ) -> SteeringReceipt:
        _still_open(tracked, "steering.deferred")
        first_time = tracked.state is not _DEFERRED
        if first_time:
            if not await self._persist(tracked, _DEFERRED, None):
                return await self._duplicate(tracked.key)
            at = _clock.now()  # requested and deferred: one step, one moment
            self._announce(tracked, at)
        late = handle is not None and handle.status.finished
        if late and isinstance(tracked.cmd.target, ThreadTarget):
            handle = None  # the thread's, not that run's: it waits for the thread's next run
            late = False
        tracked.state = _DEFERRED
        if first_time:  # the pipeline's decision, as the receipt reports it
            self._emit("steering.deferred", tracked, at=at, reason=reason, policy_id=policy_id)
        if late:  # that run will take nothing more: as an accepted command would, it fails
            self._finish(
                tracked, _FAILED, reason=f"{LATE} (deferred: {reason})", policy_id=policy_id
            )
            return self._receipt(tracked, ReceiptStatus.DEFERRED, reason, policy_id)
        key = handle.run_id if handle is not None else _target_key(tracked.cmd)
        self._waiting.setdefault(key, {})[tracked.key] = tracked
        return self._receipt(tracked, ReceiptStatus.DEFERRED, reason, policy_id)

    async def _accept(
        self,
        tracked: _Tracked,
        handle: RunHandle,
        command: SteeringCommand,
        policy_id: str | None,
        transforms: list[tuple[str, SteeringCommand]] | None = None,
    ) -> SteeringReceipt:
        if tracked.state in _TERMINAL:
            _still_open(tracked, "steering.accepted")
        # the queue's id of the command is the router's key: a transform keeps the sender and
        # the correlation id (``_transformed``)
        refused = handle.inbox.conflict(command, tracked.key)
        if refused is not None:
            # The target's queue would refuse it (a second redirect under
            # redirect_conflict='error'): a rejection, before anything says it was accepted.
            return await self._reject(tracked, refused, "queue")
        # Durable before the receipt (and before any event): an accepted command survives a
        # crash from here on, and one the store could not take leaves no trace.
        if self.store is not None and not await self._persist(
            tracked, _ACCEPTED, handle.run_id, command
        ):
            return await self._duplicate(tracked.key)
        self._accepted(tracked, handle, command, policy_id, transforms)
        if handle.info.status.finished:
            await self._enqueue(tracked, handle)
        else:  # a live run: nothing to wait for (most commands; this runs for every one)
            self._put(tracked, handle)
        return self._receipt(tracked, ReceiptStatus.ACCEPTED, None, policy_id)

    def _accept_now(
        self, tracked: _Tracked, handle: RunHandle, command: SteeringCommand, policy_id: str | None
    ) -> SteeringReceipt | None:
        """``_accept`` without its coroutine, for a command with nothing to await: no store
        to write it to, a live run whose queue takes it (most commands, with the default
        pipeline). None, having done nothing, for any other: ``_accept`` takes it then.
        ``tests/steering/test_hot_path_equivalence.py`` keeps the two equal."""
        if (
            self.store is not None
            or handle.info.status.finished
            or tracked.state in _TERMINAL
            or handle.inbox.conflict(command, tracked.key) is not None
        ):
            return None
        self._accepted(tracked, handle, command, policy_id, None)
        self._put(tracked, handle)
        return self._receipt(tracked, ReceiptStatus.ACCEPTED, None, policy_id)

    def _accepted(
        self,
        tracked: _Tracked,
        handle: RunHandle,
        command: SteeringCommand,
        policy_id: str | None,
        transforms: list[tuple[str, SteeringCommand]] | None,
    ) -> None:
        """Record ``tracked`` as accepted, as ``command`` (what the policies made of it):
        its requested and accepted events, and the parent's roll-up."""
        original = tracked.cmd
        at = _clock.now()  # requested and accepted: one step, one moment
        self._announce(tracked, at)  # requested names the command as submitted
        tracked.cmd = command
        tracked.state = _ACCEPTED
        if transforms:
            self._emit(
                "steering.accepted",
                tracked,
                at=at,
                policy_id=policy_id,
                transformed_by=",".join(p for p, _ in transforms),
                original_payload_summary=summarize(original.payload),
            )
        else:  # most commands: no dict of keywords to build and unpack
            self._emit("steering.accepted", tracked, at, policy_id)
        if handle.info.parent_run_id is not None:
            self._rollup(tracked, handle)

    async def _persist(
        self,
        tracked: _Tracked,
        state: CommandState,
        run_id: str | None,
        command: SteeringCommand | None = None,
    ) -> bool:
        """Write the command's new state to the steering log; False if the log already holds
        another command under its id (from a previous process, or another one sharing the
        store), or — for a command logged before — if another runtime sharing the log took or
        settled it since (then it is dropped here, with no event: it is theirs). Raises
        ``StoreError`` when the store fails."""
        store = self.store
        if store is None:
            return True
        command = command if command is not None else tracked.cmd
        if state is _REJECTED:
            command = _as_logged_rejection(command)
        owner, thread_id = self.owner, tracked.info.thread_id if tracked.info else None
        try:
            if tracked.persisted:
                moved = await store.update_command(
                    command,
                    state=state,
                    run_id=run_id,
                    from_state=tracked.state.value,
                    owner=owner,
                    thread_id=thread_id,
                )
                if not moved and state is _REJECTED:
                    moved = await self._rejected_after_all(tracked, command, run_id)
                if not moved:
                    self._untrack(tracked)
                return moved
            try:
                inserted = await store.append_command(
                    command, state=state, run_id=run_id, owner=owner, thread_id=thread_id
                )
            except BaseException:
                # the row may be written all the same (a reply lost after COMMIT, or the
                # submit cancelled while its write went on): a retry of this very command
                # may take it over (``_ours_after_all``)
                self._unsure[tracked.key] = None
                if len(self._unsure) > _UNSURE_KEPT:
                    self._unsure.pop(next(iter(self._unsure)))
                raise
            if not inserted:
                inserted = await self._ours_after_all(tracked, state, run_id, command)
        except StoreError:
            raise
        except Exception as exc:  # a backend that let its driver's error through
            raise StoreError(f"could not log command {command.correlation_id}: {exc}") from exc
        tracked.persisted = inserted
        return inserted

    async def _ours_after_all(
        self, tracked: _Tracked, state: str, run_id: str | None, command: SteeringCommand
    ) -> bool:
        """Whether the row the log already holds under this id is this very command, written
        by an earlier submit of it whose reply was lost (the INSERT committed, the connection
        dropped: that submit raised ``StoreError`` and freed the id, as promised). Then this
        retry takes the row over instead of being answered ``duplicate`` while the command
        sits open in the log, never applied. The retry may be built again (an HTTP client
        sends its request again, and the command gets a new ``created_at``): it is the same
        command if it differs from the logged one in nothing else. A row logged ``deferred``
        (no run on its thread then) is moved on to the retry's state. A command this router
        already knew of is a duplicate as ever."""
        assert self.store is not None
        key = tracked.key
        if key not in self._unsure or key in self._tracked or key in self._terminal:
            return False  # not a write of ours that failed: another's row (a runtime sharing it)
        stored = await self.store.get_command(command.correlation_id, scope=key[0])
        if stored is None or stored.command != command.model_copy(
            update={"created_at": stored.command.created_at}
        ):
            return False
        if stored.state == state and stored.run_id == run_id:
            ours = True
        elif stored.state == CommandState.DEFERRED and state != CommandState.DEFERRED:
            # logged deferred (a thread with no run then), and a run came since: the retry
            # moves it on, as a take from the log (a compare-and-set)
            ours = await self.store.update_command(
                command,
                state=state,
                run_id=run_id,
                from_state=CommandState.DEFERRED.value,
                owner=self.owner,
                thread_id=tracked.info.thread_id if tracked.info else None,
            )
        else:
            ours = False
        if ours:
            del self._unsure[key]
        return ours

    async def _rejected_after_all(
        self, tracked: _Tracked, command: SteeringCommand, run_id: str | None
    ) -> bool:
        """Whether the row the log holds ``rejected`` for ``tracked`` (``command``: as the log
        keeps it rejected) is this router's own rejection by ``refuse_logged``, whose reply
        was lost (the compare-and-set committed, the connection dropped: it raised
        ``StoreError`` and the command waited again). Then it is ended here, not dropped as
        another runtime's settlement with no terminal event. The log cannot tell this write
        from an identical one by another runtime sharing it (as for an append,
        ``_ours_after_all``): a row rejected with this very command is taken for ours."""
        assert self.store is not None
        if tracked.unsure_reject is None:
            return False
        stored = await self.store.get_command(tracked.cmd.correlation_id, scope=tracked.key[0])
        return _our_rejection(tracked, stored, command, run_id)

    def _announce(self, tracked: _Tracked, at: datetime) -> None:
        """Emit ``steering.requested`` (``at``: the moment of the step that decided the
        command, which its decision's event shares): from here on the command is open until
        terminal."""
        if tracked.announced:
            return
        tracked.announced = True
        self._tracked[tracked.key] = tracked
        self._emit("steering.requested", tracked, at)

    def _forget_oldest_ids(self, newest: _Key) -> None:
        """Forget the oldest ids past the horizon; an open command's id goes to the back
        instead (it stays taken until the command ends), and so do the ids of the submits
        under way (not open yet, ``newest`` among them), so at most ``dedupe_horizon`` ids
        plus those of the open commands and of the submits under way are kept."""
        order, tracked, under_way = self._seen_order, self._tracked, self._under_way
        spared = 0
        while len(order) > self.dedupe_horizon and spared <= len(tracked) + len(under_way):
            key = order.popleft()
            if key == newest:  # every older id was open: nothing more to forget
                order.append(key)
                break
            if key in tracked or key in under_way:
                order.append(key)
                spared += 1
                continue
            self._seen.discard(key)
            self._terminal.pop(key, None)
            self._ended_in.pop(key, None)

    async def _enqueue(self, tracked: _Tracked, handle: RunHandle) -> None:
        if handle.status.finished:
            taken = await handle.driver.on_late_command(tracked.cmd)
            if taken is not True:
                self._finish(tracked, _FAILED, reason=taken if isinstance(taken, str) else LATE)
                return
        self._put(tracked, handle)

    def _put(self, tracked: _Tracked, handle: RunHandle) -> None:
        cmd = tracked.cmd
        outcome = handle.inbox.put(cmd, tracked.key)
        if outcome.queued:  # as the inbox's ``wake`` would, before anything else
            handle.wake()
        for loser, winner in outcome.superseded:
            self.mark_superseded(loser, winner)
        if outcome.rejected is not None:
            # _accept checked for this; the queue changed while the store was being written.
            self._finish(tracked, _FAILED, reason=outcome.rejected, policy_id="queue")
            return
        if not outcome.queued:
            return
        self._queued[id(cmd)] = tracked
        kind = cmd.kind
        # An immediate delivery is a cancel's only (construction and ``submit`` refuse it for
        # any other kind: checked again all the same, as an interrupt by mistake costs a model
        # call); the kind is asked first, so no other command has its delivery read here.
        if kind is SteeringKind.CANCEL and cmd.delivery is SteeringDelivery.IMMEDIATE:
            handle.driver.interrupt_now(cmd)
        elif kind is SteeringKind.CONSTRAIN_TOOLS or kind is SteeringKind.CONSTRAIN_MODEL:
            handle.driver.narrowing_queued(cmd)
        elif kind is SteeringKind.PAUSE or kind is SteeringKind.RESUME:
            handle.driver.pause_queued(cmd)

    def _rollup(self, tracked: _Tracked, handle: RunHandle) -> None:
        """Tell a parent that someone steered its child (unless the parent did it itself)."""
        info = handle.info
        actor = tracked.cmd.actor
        if info.parent_run_id is None:
            return
        if isinstance(actor, ParentAgentActor) and actor.run_id == info.parent_run_id:
            return
        self.bus.publish(
            subagent_event(
                info,
                self.registry.tree.get(info.parent_run_id),
                "subagent.steered",
                correlation_id=tracked.cmd.correlation_id,
                steering_kind=tracked.cmd.kind.value,
                detail={"actor": actor.describe()},
            )
        )

    def _finish(self, tracked: _Tracked, state: CommandState, **fields: Any) -> None:
        self._emit(_EVENT_OF[state], tracked, **fields)

    def _open(self, cmd: SteeringCommand) -> _Tracked:
        key = _key(cmd)
        tracked = self._tracked.get(key)
        if tracked is None:
            state = self._terminal.get(key, "never submitted")
            raise SteeringInvariantError(
                f"command {cmd.correlation_id} is not open (state: {state})"
            )
        return tracked

    def _receipt(
        self, tracked: _Tracked, status: ReceiptStatus, reason: str | None, policy_id: str | None
    ) -> SteeringReceipt:
        info = tracked.info
        return SteeringReceipt.issue(
            status,
            tracked.key[1],  # the correlation id
            info.run_id if info is not None else None,
            reason,
            policy_id,
        )

    def _emit(
        self,
        type_: str,
        tracked: _Tracked,
        at: datetime | None = None,
        policy_id: str | None = None,
        reason: str | None = None,
        boundary: str | None = None,
        affected: dict[str, Any] | None = None,
        superseded_by: str | None = None,
        transformed_by: str | None = None,
        original_payload_summary: dict[str, Any] | None = None,
    ) -> None:
        """Emit ``tracked``'s event ``type_`` with these fields (``at``: now if not given;
        ``affected``: a new empty dict if not given), the others shared by all of its events."""
        # Four times per command: dict lookups on the event type, no enum properties.
        if tracked.state in _TERMINAL:  # ``_still_open`` inline
            raise SteeringInvariantError(
                f"{type_} for command {tracked.cmd.correlation_id} after its terminal state "
                f"{tracked.state}"
            )  # a bookkeeping bug: never let it pass silently
        events = tracked.events
        if (
            events is None
            or tracked.events_cmd is not tracked.cmd
            or tracked.events_info is not tracked.info
        ):
            events = _events_for(tracked, self.registry)
        # (read from the tuple, not from the command: an attribute of a pydantic model costs
        # more than a tuple's item, four events per command)
        (
            run_id,
            root_run_id,
            parent_run_id,
            tenant_id,
            target,
            actor,
            kind,
            correlation_id,
            task_id,
            node_id,
            checkpoint_id,
        ) = events
        # Every field by position (``SteeringEvent(...)``'s keywords cost four fifths of it)
        event = _steering_event(
            type_,  # type: ignore[arg-type]
            _clock.now() if at is None else at,
            run_id,
            root_run_id,
            parent_run_id,
            tenant_id,
            target,
            actor,
            kind,
            correlation_id,
            task_id,
            node_id,
            policy_id,
            checkpoint_id,
            tracked.summary,  # type: ignore[arg-type]  # made with events
            reason,
            boundary,
            {} if affected is None else affected,
            superseded_by,
            transformed_by,
            original_payload_summary,
        )
        self.bus.publish(event)
        if run_id is not None:
            history = self._history.get(run_id)
            if history is None and run_id in self.registry:
                # (a run released while a store write or an async policy was under way has
                # no history any more: none is started for it again)
                history = self._history[run_id] = []
            if history is not None:
                history.append(event)
        terminal = _TERMINAL_OF[type_]
        if terminal is not None:
            tracked.state = terminal
            key = tracked.key
            del self._tracked[key]
            if self._queued.get(id(tracked.cmd)) is tracked:
                del self._queued[id(tracked.cmd)]
            self._terminal[key] = terminal
            if run_id is not None:
                self._ended_in[key] = run_id
        elif run_id is None:
            if tracked.early is None:
                tracked.early = []
            tracked.early.append(event)


def _key(cmd: SteeringCommand) -> _Key:
    """``cmd``'s correlation id in its sender's scope: its key in the router's books and in
    its run's queue. (``dedupe_scope(cmd.actor)`` written out: a key is made for every
    command at submit; at delivered and applied its book is found by identity, ``_queued``.)"""
    actor = cmd.actor
    return (f"tenant:{actor.tenant_id}" if type(actor) is HumanActor else "", cmd.correlation_id)


def _sendable(tracked: _Tracked, *, logged: bool) -> bool:
    """Whether ``tracked``, waiting for its thread's next run, may be sent away: deferred,
    and held in the durable log (``logged``: refused, ``refuse_logged``; not one whose take
    by a run here may have reached the log, which that run settles) or in memory only
    (handed to another runtime, ``hand_off``)."""
    if tracked.state is not _DEFERRED:
        return False
    return tracked.persisted and not tracked.unsure_take if logged else not tracked.persisted


def _still_open(tracked: _Tracked, type_: str) -> None:
    """Raise unless ``tracked`` is still open: checked before its state is moved on (an
    evaluation that awaited a policy while something settled the command), not only when an
    event is emitted, or the move would hide the terminal state."""
    if tracked.state in _TERMINAL:
        raise SteeringInvariantError(
            f"{type_} for command {tracked.cmd.correlation_id} after its terminal state "
            f"{tracked.state}"
        )  # a bookkeeping bug: never let it pass silently


#: The terminal state each ``steering.*`` event type records, None for the others (a dict
#: lookup: an enum call, or its ``terminal`` property, costs more).
_TERMINAL_OF = {f"steering.{state}": state if state.terminal else None for state in CommandState}
_TERMINAL = frozenset(state for state in CommandState if state.terminal)
#: The event type of each state (an f-string of an enum member formats it the slow way).
_EVENT_OF = {state: f"steering.{state.value}" for state in CommandState}


#: The fields of a command ``_events_for`` reads, from its ``__dict__`` (where pydantic keeps
#: them) at once: each attribute read of a pydantic model goes the slow way, through the
#: ``__getattr__`` hook its class has.
_EVENT_FIELDS = itemgetter("target", "actor", "kind", "correlation_id", "checkpoint_id", "payload")


def _events_for(tracked: _Tracked, registry: RunRegistry) -> _Shared:
    """Make the fields all of ``tracked``'s events share, and keep them there."""
    cmd, info = tracked.cmd, tracked.info
    target, actor, kind, correlation_id, checkpoint_id, payload = _EVENT_FIELDS(cmd.__dict__)
    if type(target) is AgentRunTarget:  # ``_task_and_node`` inline: the usual target
        task_id = node_id = None
    else:
        task_id, node_id = _task_and_node(target)
    if info is None:
        # No run the sender may know of (a thread with no live run yet, or a run that is
        # unknown or another tenant's): the events name no run, so no run's history files
        # them, and they belong to the sender's tenant: a human's, or the tenant of the run
        # a parent agent, graph supervisor or run middleware acts from (the tenant whose
        # runs its thread command waits among), else its operator would never see them.
        run_id = root_run_id = parent_run_id = None
        tenant_id = registry.thread_tenant(actor)
    else:
        run_id, root_run_id = info.run_id, info.root_run_id
        parent_run_id, tenant_id = info.parent_run_id, info.tenant_id
        task_id, node_id = task_id or info.task_id, node_id or info.node_id
    # Not the payload's summary (``summary``): in the order ``_emit`` passes them on.
    events = (
        run_id,
        root_run_id,
        parent_run_id,
        tenant_id,
        target,
        actor,
        kind,
        correlation_id,
        task_id,
        node_id,
        checkpoint_id,
    )
    tracked.events = events
    if tracked.summary_of is not payload:  # not summarised before the policies
        _summarized(tracked, payload)
    tracked.events_cmd, tracked.events_info = cmd, info
    return events


def _summarized(tracked: _Tracked, payload: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
    """Keep ``payload``'s summary on ``tracked``; return (``payload``, at most how many bytes
    its compact JSON takes) where that walk tells (``payload_summary``), else None."""
    # Read-only: the command's events share it (and a consumer's change would be theirs).
    tracked.summary, bound = payload_summary(payload)
    tracked.summary_of = payload
    return None if bound is None else (payload, bound)


def _our_rejection(
    tracked: _Tracked, stored: StoredCommand | None, command: SteeringCommand, run_id: str | None
) -> bool:
    """Whether ``stored`` is ``tracked``'s rejection as its refusal (``unsure_reject``) wrote
    it: ``rejected``, for ``run_id``, with ``command`` (as the log keeps it rejected). Read
    once: the row says what happened to that write, either way, so it is forgotten."""
    tracked.unsure_reject = None
    return (
        stored is not None
        and stored.state == CommandState.REJECTED
        and stored.run_id == run_id
        and stored.command == command
    )


def _as_logged_rejection(cmd: SteeringCommand) -> SteeringCommand:
    """``cmd`` as the steering log keeps it once rejected: whole up to the payload policy's
    default bound, else with its payload's summary (long text cut, saying how long it was;
    long lists cut, saying how many items they held). A rejected command is never applied:
    the log keeps it for its id (a retry stays a duplicate), kind, target, state and reason,
    and a refused 4 MiB request must not grow the store by 4 MiB."""
    if json_bytes(cmd.payload, stop_above=DEFAULT_MAX_TEXT_BYTES) <= DEFAULT_MAX_TEXT_BYTES:
        return cmd
    values = cmd.model_dump(warnings=False)
    values["payload"] = summarize(cmd.payload)
    try:
        return SteeringCommand.model_validate(values)
    except InvalidCommandError:  # a summary its kind does not take: keep the command as sent
        return cmd


def _task_and_node(target: AnyTarget) -> tuple[str | None, str | None]:
    """The graph task and node a target names (None, None for a plain run or thread)."""
    if isinstance(target, AgentRunTarget):
        # The usual target, tested first: an isinstance that fails on a pydantic class runs
        # the ABC check in Python, and this is asked twice for every command.
        return None, None
    if isinstance(target, GraphTaskTarget):
        return target.task_id, None
    if isinstance(target, GraphNodeTarget):
        return None, target.node
    return None, None


def _hidden(cmd: SteeringCommand, handle: RunHandle) -> bool:
    """A human never sees another tenant's runs (the authority policy checks this again)."""
    tenant = sender_tenant(cmd.actor)
    return tenant is not None and tenant != handle.info.tenant_id


#: The prefix of a thread's key among the run ids commands wait for. It starts with a NUL,
#: which no run id may hold (``check_id``): a run named ``thread:x`` must not take the
#: commands waiting for thread ``x``.
_THREAD = "\x00thread:"


def _thread_key(thread_id: str) -> str:
    return _THREAD + thread_id


def _target_key(cmd: SteeringCommand) -> str:
    target = cmd.target
    if isinstance(target, ThreadTarget):
        return _thread_key(target.thread_id)
    return target.run_id
