"""``Runtime``: wires the run registry, the steering router, the event bus and the store.

    async with Runtime(store="sqlite:///runs.db") as rt:
        handle = await rt.start(agent, "task", tenant_id="acme")
        await rt.submit(cmd)

``Runtime()`` keeps everything in memory. With a store, accepted commands are written before
their receipt returns, events are written in batches, and on start the commands that were
accepted but never reached a terminal state are handed to their run when it comes back.

With a durable store the runtime also serves other processes (``tinyagents.steering.remote``):
it writes live snapshots of its runs (throttled, with a heartbeat: ``owner``, ``updated_at``,
pending commands and interrupts) and polls the store's inbox for commands addressed to its
``runtime_id``, which go through ``submit`` like any other and get their receipt written back.

Memory is bounded: a finished run tree is released (handle, tree node, steering history)
once it leaves the retention window (``retain_finished`` runs, ``retain_finished_s``
seconds), or at once with ``forget(run_id)``; with a store it stays readable there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
import uuid
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents import supervisor as supervision
from tinyagents._bounds import whole_number
from tinyagents.errors import (
    ConfigurationError,
    RuntimeClosed,
    StoreError,
    SyncInAsyncError,
    ThreadBusy,
    UnknownTargetError,
)
from tinyagents.events.bus import EventBus, EventFilter, Sink, Subscription
from tinyagents.events.models import SteeringEvent
from tinyagents.events.otel import OTelSink
from tinyagents.events.otel import default_sink as otel_default_sink
from tinyagents.harness.agent import Agent
from tinyagents.harness.loop import start_agent_run
from tinyagents.harness.subagent import SubAgent
from tinyagents.protocol.commands import (
    HumanActor,
    ReceiptStatus,
    SteeringCommand,
    SteeringReceipt,
    sender_tenant,
)
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.state import CommandState, RunStatus
from tinyagents.runs.handle import RunHandle, RunResult
from tinyagents.runs.host import provide_private_host
from tinyagents.runs.info import RunInfo, lookup_id
from tinyagents.runs.live import LiveRuns, pending_by_run
from tinyagents.runs.registry import RunRegistry
from tinyagents.runs.tree import RunTreeNode
from tinyagents.steering.conflicts import RedirectConflict
from tinyagents.steering.inbox import DEFAULT_MAX_QUEUED, LATE
from tinyagents.steering.policy import CheckPolicy, PolicyContext, PolicyPipeline
from tinyagents.steering.remote import (
    HEARTBEAT_S,
    OWNER_SILENT_S,
    SNAPSHOT_EVERY_S,
    logged_duplicate,
    owner_silent,
)
from tinyagents.steering.router import DEDUPE_HORIZON, MiddlewareCapability, SteeringRouter
from tinyagents.store.base import (
    Store,
    StoredCommand,
    StoreWriter,
    may_pass,
    run_key,
    written_again,
)
from tinyagents.store.checkpoint._lease import holder_gone, process_token
from tinyagents.store.open import open_store
from tinyagents.supervisor.settings import (
    SUPERVISOR,
    env_judge_timeout_s,
    env_pause_max_s,
    judge_concurrency,
)

if TYPE_CHECKING:
    from tinyagents.graph import CompiledGraph
    from tinyagents.supervisor.spec import SupervisorSpec
    from tinyagents.supervisor.supervisor import Supervisor

#: The ``runtime_id`` of every runtime of this process that is open.
_OPEN_HERE: set[str] = set()
_log = logging.getLogger("tinyagents.runtime")
#: Released runs' snapshots are saved this many at a time (and the rest on close), like the
#: snapshots of the runs still in memory, which are saved on close.
_SAVE_BATCH = 256
#: The states of a command not settled yet (in the steering log: taken over, ``_take_over``).
_OPEN_STATES = tuple(state.value for state in CommandState if not state.terminal)
#: ``applied_commands`` reads these at once: the applied ones and the open ones.
_APPLIED_OR_OPEN = (CommandState.APPLIED.value, *_OPEN_STATES)
#: Stored task entries ``resting_tasks`` reads at once.
_RESTING_PAGE = 200
#: With a durable store: how often the inbox is polled (``wake_inbox`` wakes it at once).
#: How often changed runs' snapshots are written, and every live run's (heartbeat), is
#: ``SNAPSHOT_EVERY_S`` and ``HEARTBEAT_S`` of ``steering.remote``, whose senders wait for them.
INBOX_POLL_S = 0.05
#: How long the receipt of an inbox item whose write keeps failing is tried again before it
#: is dropped: past a sender's usual wait (``Control(receipt_timeout_s=5.0)``).
RECEIPT_RETRY_S = 10.0


class Runtime:
    def __init__(
        self,
        store: str | Store | None = None,
        *,
        testing: bool = False,
        policies: PolicyPipeline | None = None,
        sinks: Iterable[Sink] = (),
        trusted_middleware: Iterable[str] = (),
        supervisor: SupervisorSpec | None = None,
        retain_finished: int = 1000,
        retain_finished_s: float | None = None,
        dedupe_horizon: int = DEDUPE_HORIZON,
        max_queued: int = DEFAULT_MAX_QUEUED,
        max_concurrent_judges: int | None = None,
    ) -> None:
        """``retain_finished``/``retain_finished_s``: how many finished runs (counted in whole
        trees), and for how long, stay in memory before they are released; ``dedupe_horizon``:
        how many of the latest command ids an in-memory runtime remembers as duplicates;
        ``max_queued``: how many accepted commands a run's queue holds while they wait for its
        next boundary (a paused run, one in a long tool call); more are rejected (policy
        ``queue``) until it takes them, except a cancel, which is taken up to twice as many;
        a thread with no live run holds as many per sender for its next run.

        ``sinks``: event sinks besides the store's writer; when the program has set an
        OpenTelemetry SDK tracer or meter provider, an ``OTelSink`` on it is added unless one
        is among them.

        ``supervisor``: a ``SupervisorSpec`` that watches every agent run (an agent's own
        ``Agent(..., supervisor=spec)`` wins for its runs). ``trusted_middleware``: names of
        runtime-level middleware actors trusted *by name* (anyone who can submit can use
        them); the runtime's own supervisor is trusted through a capability instead, so the
        name ``"supervisor"`` cannot be listed here. ``max_concurrent_judges``: how many judge
        calls the supervisor has under way at once, all runs together (default
        ``TINYAGENTS_MAX_CONCURRENT_JUDGES`` or 8); the runs past it wait their turn."""
        if not isinstance(testing, bool):  # "no" or 0 would be taken as their truth
            raise ConfigurationError(
                f"testing= must be True or False, got {type(testing).__name__} "
                f"{shown_repr(testing)}"
            )
        trusted_middleware = _names(trusted_middleware)
        if SUPERVISOR in trusted_middleware:
            raise ConfigurationError(
                f"trusted_middleware may not list {SUPERVISOR!r}: the runtime's supervisor is "
                "trusted through the capability the runtime gives it, not by its name; pass "
                "Runtime(supervisor=SupervisorSpec(...)) to supervise runs"
            )
        whole_number("dedupe_horizon", dedupe_horizon)
        whole_number("max_queued", max_queued)
        self.store: Store = open_store(store)
        self._durable = store is not None
        #: Unique per runtime instance: the ``owner`` of its runs' snapshots, and the address
        #: other processes put commands for those runs under in the store's inbox.
        # Not the id source: a test's deterministic ids would give two processes one owner id.
        # ``HOST:PID:rt-…``: another runtime can tell at once that a crashed owner is gone.
        self.runtime_id = process_token(f"rt-{uuid.uuid4().hex[:12]}")
        self._live: LiveRuns | None = None
        self._serving: asyncio.Task[None] | None = None
        self._inbox_wake: asyncio.Event | None = None
        #: The store's push notifications for the inbox (``listen_inbox``), when it has them.
        self._inbox_listener: Any = None
        self.testing = testing
        self.bus = EventBus()
        self.runs = RunRegistry(
            retain_finished=retain_finished, retain_finished_s=retain_finished_s
        )
        self.router = SteeringRouter(
            registry=self.runs,
            bus=self.bus,
            pipeline=policies,
            store=self.store if self._durable else None,
            testing=testing,
            trusted_middleware=trusted_middleware,
            dedupe_horizon=dedupe_horizon,
            max_queued=max_queued,
            owner=self.runtime_id,
        )
        sinks = _sinks(sinks)
        for sink in sinks:
            self.bus.add_sink(sink)
        # A program that set an OpenTelemetry SDK provider gets its runs traced and counted
        # without passing a sink (unless it passed one itself).
        if not any(isinstance(sink, OTelSink) for sink in sinks):
            traced = otel_default_sink()
            if traced is not None:
                self.bus.add_sink(traced)
        self._supervisor_capability = self.router.issue_capability(SUPERVISOR)
        #: Watches agent runs under ``supervisor`` (or their agent's spec); acts through
        #: steering with the capability above. Made now when the runtime has a spec (checked
        #: at once, with its files), else with the first run it has to watch, or when asked
        #: for (``supervisor``): until then ``tinyagents.supervisor`` is not loaded.
        self._supervisor: Supervisor | None = None
        #: The environment's settings for a supervisor made later, read (and refused) now,
        #: as they were when every runtime made its supervisor at once.
        self._supervision: dict[str, Any] = {}
        if supervisor is not None:
            self._supervisor = supervision.Supervisor(
                supervisor,
                host=self,
                submit=self._submit_as_supervisor,
                max_concurrent_judges=max_concurrent_judges,
            )
        else:
            self._supervision = {
                "pause_max_s": env_pause_max_s(),
                "judge_timeout_s": env_judge_timeout_s(),
                "max_concurrent_judges": judge_concurrency(max_concurrent_judges),
            }
        self._writer: StoreWriter | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._open = False
        #: The event loop that opened the runtime: its runs, queues and wake-ups live there.
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Set by ``close()``: from then on nothing new is taken (``RuntimeClosed``).
        self._closing = False
        self._closed: asyncio.Future[None] | None = None
        #: Set while an ``open`` is under way: another caller waits for it (``open``).
        self._opening: asyncio.Future[None] | None = None
        #: ``submit`` calls under way; close waits for them before closing the store.
        self._submitting = 0
        self._submits_done: asyncio.Event | None = None
        #: Tasks inside ``finish`` (a run's end hands its waiting commands over, through the
        #: policies): close waits for them. A run that an END_OF_TURN message reopened runs on
        #: in a new task while the old one is still here, where no handle names it.
        self._ending: set[asyncio.Task[Any]] = set()
        #: Snapshots of released runs not yet saved (``forget`` is synchronous).
        self._unsaved: list[dict[str, Any]] = []
        #: The claims of starts under way (``_claim``), until their run is registered: run id
        #: -> the snapshot each claim replaced in the store (None: none), which a start that
        #: fails puts back (``unclaim``).
        self._claims: dict[str, dict[str, Any] | None] = {}
        #: The runs whose hold of their thread is in the durable store (``hold_thread``):
        #: each leaves as its hold is let go of (its run's end, or a start that failed).
        self._holding: dict[str, RunInfo] = {}
        #: Run id -> whether this runtime still holds the run's stored row: True once it
        #: claimed or first saved it (its later saves are conditional on the row naming it,
        #: ``Store.save_runs(held_by=)``), False once another runtime took the run over (never
        #: saved here again). An id leaves once its run's final snapshot is saved on release.
        self._rows: dict[str, bool] = {}
        #: Held while run snapshots are taken and saved: a save taken later never lands before
        #: one taken earlier and still under way (PostgreSQL gives them two connections), so
        #: the store ends with the latest (a run's final snapshot, not the one before it).
        self._saving = asyncio.Lock()
        #: Receipts of inbox items answered here and not written yet, by request id, with
        #: when their writes began to fail: tried again at each inbox pass, each for at most
        #: ``RECEIPT_RETRY_S`` (an item pruned meanwhile is answered by a write that changes
        #: nothing, and goes).
        self._unwritten_receipts: dict[str, tuple[SteeringReceipt, float | None]] = {}

    @property
    def supervisor(self) -> Supervisor:
        """The ``Supervisor`` watching this runtime's agent runs (its counters: ``actions``,
        ``judge_failures``, ``judge_usage``, ...). A runtime without a spec of its own makes it
        with the first run that has one (its agent's, or a graph's above it), or here."""
        if self._supervisor is None:
            self._supervisor = supervision.Supervisor(
                None, host=self, submit=self._submit_as_supervisor, **self._supervision
            )
        return self._supervisor

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Runtime:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Open the store and restore what it holds (``async with`` does it). Two callers at
        once open it once: the second waits for the first (and tries again if it failed);
        each opened the store, the first connection left unclosed and a second inbox task
        serving past the close."""
        while self._opening is not None:
            await asyncio.shield(self._opening)
        if self._open:
            return
        if self._closing:
            raise RuntimeClosed("this runtime was closed; make a new Runtime to start again")
        self._opening = asyncio.get_running_loop().create_future()
        try:
            await self._open_store()
        finally:
            opening, self._opening = self._opening, None
            opening.set_result(None)

    async def _open_store(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.store.open()
        if self._durable:
            try:
                pending = await self.store.open_commands()
            except BaseException:
                await self.store.close()
                raise
            self._writer = StoreWriter(self.store)
            self.bus.add_sink(self._writer)
            self._writer.start()
            self.router.restore([(p.command, p.state, p.run_id) for p in pending])
            self.live_runs()
            self._inbox_wake = asyncio.Event()
            self._serving = asyncio.create_task(self._serve_store(), name="tinyagents-inbox")
            # A store that can push (PostgreSQL's LISTEN/NOTIFY) wakes the inbox at once; the
            # poll stays the safety net, so a listener that cannot start only costs latency.
            listen = getattr(self.store, "listen_inbox", None)
            if listen is not None:
                try:
                    self._inbox_listener = await listen(self.runtime_id, self.wake_inbox)
                except Exception as exc:
                    _log.warning("inbox notifications unavailable, polling only: %s", exc)
        self._open = True
        _OPEN_HERE.add(self.runtime_id)

    async def close(self) -> None:
        """Stop taking work, settle every run and command, then flush and close the store.

        In this order: ``submit``/``start``/``register`` raise ``RuntimeClosed`` from the first
        line on; the submits under way finish; runs still going are cancelled (their children
        too) and awaited, each with its terminal event (a run whose task has not ended
        ``CLOSE_GRACE_S`` after its cancel, its cleanup stuck, is ended ``cancelled`` without
        it, the task left behind and logged); the runtime's own tasks are awaited,
        and so are runs still ending (handing their waiting commands over);
        then every command still open fails with ``runtime closed before delivery`` — unless
        the store is durable, where accepted and deferred commands stay open in the steering
        log for the next runtime on that store to hand over, and a run left at rest (a graph
        run ``interrupted``) is released: its snapshot is written without an owner. Closing
        twice (or concurrently) waits for the first close.
        """
        if self._closed is not None:
            await asyncio.shield(self._closed)
            return
        if not self._open:
            return
        self._closing = True
        self._closed = asyncio.get_running_loop().create_future()
        try:
            await self._settle()
        finally:
            _OPEN_HERE.discard(self.runtime_id)
            self._closed.set_result(None)

    async def _settle(self) -> None:
        if self._serving is not None:  # answers what it took (closing: rejected), takes no more
            serving, self._serving = self._serving, None
            assert self._inbox_wake is not None
            self._inbox_wake.set()
            await asyncio.wait([serving])
        if self._submitting:
            self._submits_done = asyncio.Event()
            await self._submits_done.wait()
        me = asyncio.current_task()
        left: set[asyncio.Task[Any]] = set()  # run tasks whose cancellation never finished
        asked: set[asyncio.Task[Any]] = set()  # run tasks cancelled
        while True:  # a run may spawn a task while it is being cancelled: go until none is left
            runs = [
                (h, h.task)
                for h in self.runs.handles()
                if h.task is not None and not h.task.done() and h.task not in left
            ]
            pending: list[asyncio.Task[Any]] = [
                *(task for _, task in runs),
                # (a graph run's task is the runtime's own too: not waited for once left)
                *(t for t in self._tasks if not t.done() and t not in left),
                *(t for t in self._ending if not t.done() and t is not me and t not in left),
            ]
            if not pending:
                break
            for _, task in runs:
                if task not in asked:  # once: a task ending its run (slowly) is not cut short
                    asked.add(task)
                    task.cancel()
            done, _ = await asyncio.wait(pending, timeout=CLOSE_GRACE_S)
            for task in done:  # retrieved, as gather(return_exceptions=True) did
                if not task.cancelled():
                    task.exception()
            for h, task in runs:
                # (a task ending its run, in ``finish``, is waited for: it is not stuck)
                if not task.done() and task not in self._ending:
                    left.add(task)
                    if not h.done:  # (else its run ended without it already)
                        await self._end_without_task(h)
        # the holds of runs the close cut off (a graph run at rest, cancelled where it waited)
        # are let go of, not left in the store's table (where they would hold nothing: their
        # runs are released, but stay)
        for info in list(self._holding.values()):
            await self._let_go_in_store(info)
        if not self._durable:
            self.router.settle_all()
        # Every step is taken even when one fails (a dead store must not leave the bus or the
        # connection open); the first failure is raised once all of them have run.
        failures: list[BaseException] = []
        if self._writer is not None:
            for step in (self._release_runs, self._writer.aclose):
                try:
                    await step()
                except Exception as exc:
                    failures.append(exc)
            self.bus.remove_sink(self._writer)
            self._writer = None
        if self._durable:
            # Senders that read this runtime as a run's owner before its final snapshot put
            # their commands in the inbox after its last regular pass: refused (runtime
            # closed), never left to their sender's ReceiptTimeout.
            try:
                await self.answer_inbox()
            except Exception as exc:
                failures.append(exc)
        if self._inbox_listener is not None:
            listener, self._inbox_listener = self._inbox_listener, None
            try:
                await listener.aclose()
            except Exception as exc:
                failures.append(exc)
        try:
            await self.store.close()
        except Exception as exc:
            failures.append(exc)
        self.bus.close()
        self._open = False
        if failures:
            raise failures[0]

    async def _end_without_task(self, handle: RunHandle) -> None:
        """A run whose task did not end within ``CLOSE_GRACE_S`` of its cancel: ended
        ``cancelled`` without it (its driver's way, or here), the task left behind, logged."""
        why = (
            f"runtime closed; the run's task did not end within {CLOSE_GRACE_S:g} s of its "
            "cancel (a tool or node whose cancellation never finishes?) and was abandoned"
        )
        try:
            if await handle.driver.end_without_task(why):
                return
        except Exception as exc:
            _log.error("run %s: ending it without its task failed", handle.run_id, exc_info=exc)
        task = handle.task
        _log.error("run %s: %s (task %r)", handle.run_id, why, task)
        if task is not None and not task.done():
            handle.left_behind = task  # a ``finish`` from it, if it ever ends, is ignored
        if not handle.done:
            ended = RunResult(run_id=handle.run_id, status=RunStatus.CANCELLED, error=why)
            await self.finish(handle, ended)

    # ------------------------------------------------------------------ steering

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt:
        """Send a command through the policy pipeline to its target's queue.

        Raises ``StoreError`` when a durable store cannot log the command (then nothing was
        emitted or kept, and the same correlation id can be submitted again),
        ``RuntimeClosed`` once ``close()`` has begun, and ``InvalidCommandError`` for anything
        that is not a ``SteeringCommand`` (a dict: ``SteeringCommand.model_validate(data)``)
        or is one made past validation (``model_copy(update=...)``, ``model_construct``)
        that building would have refused.
        """
        # ``_submit(cmd, None)`` written out: one coroutine fewer for every command.
        if self._closing or not self._open:
            self.require_open()
        if asyncio.get_running_loop() is not self._loop:
            # Another thread's event loop: submitted on the runtime's own, where the run's
            # queue and wake-ups live (from here, a wake-up would not wake that loop).
            return await asyncio.wrap_future(self._on_runtime_loop(cmd))
        self._submitting += 1
        try:
            return await self.router.submit(cmd)
        finally:
            self._submitting -= 1
            if not self._submitting and self._submits_done is not None:
                self._submits_done.set()

    def submit_threadsafe(
        self, cmd: SteeringCommand, *, timeout: float | None = None
    ) -> SteeringReceipt:
        """``submit`` from a thread that runs no event loop (a web framework's worker thread,
        a GUI callback): blocks until the runtime's loop has the receipt, and raises what
        ``submit`` raises. From another thread's event loop, ``await rt.submit(cmd)`` does the
        same without blocking; on the runtime's own loop this would block the run it steers,
        and raises ``SyncInAsyncError``.

        ``timeout`` (seconds): ``TimeoutError`` when no receipt came in time; the submit is
        then cancelled, which leaves the command either not taken or settled as any submit
        is: send it again with the same correlation id to learn which.
        """
        self.require_open()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop in this thread: this thread may wait
        else:
            raise SyncInAsyncError(
                "rt.submit_threadsafe() was called inside a running event loop, which it "
                "would block; use 'await rt.submit(cmd)' there (from any thread's loop)"
            )
        future = self._on_runtime_loop(cmd)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _LOOP_CHECK_S if deadline is None else deadline - time.monotonic()
            try:
                return future.result(max(min(left, _LOOP_CHECK_S), 0))
            except TimeoutError:
                if not self._loop_runs():  # it ended meanwhile: nothing will answer
                    future.cancel()
                    raise RuntimeClosed(_LOOP_ENDED) from None
                if deadline is not None and time.monotonic() >= deadline:
                    future.cancel()
                    raise

    def _loop_runs(self) -> bool:
        loop = self._loop
        return loop is not None and loop.is_running() and not loop.is_closed()

    def _on_runtime_loop(self, cmd: SteeringCommand) -> concurrent.futures.Future[SteeringReceipt]:
        """``submit(cmd)`` scheduled on the runtime's loop from another thread; ``RuntimeClosed``
        if that loop no longer runs (a program whose loop ended without closing the runtime:
        the submit would be queued there and never run)."""
        if not self._loop_runs():
            raise RuntimeClosed(_LOOP_ENDED)
        assert self._loop is not None
        coro = self.submit(cmd)
        try:
            return asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # closed between the check and the call
            coro.close()
            raise RuntimeClosed(_LOOP_ENDED) from None

    def _on_own_loop(self, what: str) -> None:
        """Raise unless called on the event loop that opened the runtime: a run started from
        another would have its handle, queue and wake-ups on the wrong loop."""
        if asyncio.get_running_loop() is not self._loop:
            raise ConfigurationError(
                f"{what} was called on another event loop than the runtime's (the one that "
                "opened it, where its runs live): call it on that loop, e.g. from another "
                "thread with asyncio.run_coroutine_threadsafe(..., loop); commands may be sent "
                "from any thread: 'await rt.submit(cmd)' or rt.submit_threadsafe(cmd)"
            )

    async def _submit_as_supervisor(self, cmd: SteeringCommand) -> SteeringReceipt:
        return await self._submit(cmd, self._supervisor_capability)

    async def _submit(
        self, cmd: SteeringCommand, capability: MiddlewareCapability | None
    ) -> SteeringReceipt:
        self.require_open()
        self._submitting += 1
        try:
            return await self.router.submit(cmd, capability=capability)
        finally:
            self._submitting -= 1
            if not self._submitting and self._submits_done is not None:
                self._submits_done.set()

    def wake_inbox(self) -> None:
        """Poll the store's inbox now instead of at the next tick (for a LISTEN/NOTIFY or
        Redis listener; call it on the runtime's event loop). A no-op without a durable store."""
        if self._inbox_wake is not None:
            self._inbox_wake.set()

    async def _serve_store(self) -> None:
        """Until close: answer the inbox every ``INBOX_POLL_S`` (or when woken), and write the
        changed runs' snapshots every ``SNAPSHOT_EVERY_S``, every live run's every
        ``HEARTBEAT_S``. A failing store is logged and tried again at the next tick."""
        assert self._inbox_wake is not None
        loop = asyncio.get_running_loop()
        snapshot_due = heartbeat_due = loop.time()
        failing = False
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(INBOX_POLL_S):
                    await self._inbox_wake.wait()
            self._inbox_wake.clear()
            try:
                await self.answer_inbox()
                now = loop.time()
                if now >= snapshot_due:
                    heartbeat = now >= heartbeat_due
                    await self.write_live_snapshots(heartbeat=heartbeat)
                    await self._save_unsaved()  # released runs' final state, for other readers
                    snapshot_due = now + SNAPSHOT_EVERY_S
                    if heartbeat:
                        heartbeat_due = now + HEARTBEAT_S
                if failing:
                    failing = False
                    _log.info("runtime %s: the store answers again", self.runtime_id)
            except Exception as exc:
                if not failing:
                    failing = True
                    _log.warning("runtime %s: inbox or snapshots: %s", self.runtime_id, exc)
        try:
            await self.answer_inbox()  # closing: what is there now is answered 'rejected'
        except Exception as exc:
            _log.warning(
                "runtime %s: closing, could not answer the inbox: %s", self.runtime_id, exc
            )

    async def answer_inbox(self) -> int:
        """Take the commands other processes put in the store's inbox for this runtime, submit
        each (own policies, own deduplication) and write its receipt back; returns how many.

        A receipt that cannot be written is kept and written again at the next calls, for
        ``RECEIPT_RETRY_S`` (its command is not submitted again); the rest of the batch is
        submitted and answered all the same. Only a failed take raises. An item left
        unanswered (this pass died, its receipt was dropped, or its command could not be
        logged twice running for a failure that may pass: ``_inbox_receipt``) is taken again
        once its lease (``INBOX_LEASE_S``) runs out: its command is submitted again (answered
        ``duplicate`` when it was taken before), applied once."""
        items = await self.store.inbox_take(self.runtime_id)
        for item in items:
            receipt = await self._inbox_receipt(item.command)
            if receipt is not None:
                self._unwritten_receipts[item.request_id] = (receipt, None)
        await self._write_receipts()
        return len(items)

    async def _inbox_receipt(self, cmd: SteeringCommand) -> SteeringReceipt | None:
        """The receipt of a command taken from the inbox, or None to leave it unanswered.
        One whose log write failed in a way that may pass (the server ended the connection,
        perhaps after COMMIT: its reply was lost) is submitted again (``written_again``: the
        router takes over the row its first write left); failing still, it is left to be
        taken again when its lease (``INBOX_LEASE_S``) runs out, its sender meanwhile told
        ``ReceiptTimeout`` (it may still be applied). A ``rejected`` would be final to its
        sender, and a row a write committed would stay open, never delivered."""
        try:
            return await written_again(lambda: self._submit(cmd, None))
        except RuntimeClosed:
            # A retry of a command taken before (the same id from the same sender; it came
            # as the runtime closed) is a duplicate: "rejected" would tell its sender that
            # nothing was applied, though the first attempt was.
            assert self.store is not None
            try:
                duplicate = await logged_duplicate(self.store, cmd)
            except StoreError:  # it may have been taken: its sender's ReceiptTimeout says so
                return None
            if duplicate is not None:
                return duplicate
            return _refused(cmd, "runtime closed: the run's owner is shutting down")
        except StoreError as exc:
            if not may_pass(exc):
                return _refused(cmd, f"store error, nothing was applied: {exc}")
            _log.warning(
                "runtime %s: inbox command %s left for its lease to run out: %s",
                self.runtime_id,
                cmd.correlation_id,
                exc,
            )
            return None
        except Exception as exc:  # a bug: the submitter must still get an answer
            _log.exception("runtime %s: inbox command %s", self.runtime_id, cmd.correlation_id)
            return _refused(cmd, f"internal error: {type(exc).__name__}")

    async def _write_receipts(self) -> None:
        """Write the receipts of the inbox items answered here and not yet written. One that
        fails is logged and kept for the next call; after ``RECEIPT_RETRY_S`` of failures it
        is dropped with a warning (its sender stopped waiting long before, and a retry of its
        command is answered ``duplicate``). Never raises: a receipt the store refuses for good
        must not stop the passes, which also write the runs' snapshots (their heartbeats)."""
        unwritten = self._unwritten_receipts
        now = _clock.monotonic()
        for request_id, (receipt, failing_since) in list(unwritten.items()):
            try:
                await self.store.inbox_answer(request_id, receipt)
            except Exception as exc:
                if failing_since is None:
                    _log.warning(
                        "runtime %s: receipt of inbox request %s not written, retrying: %s",
                        self.runtime_id,
                        request_id,
                        exc,
                    )
                    unwritten[request_id] = (receipt, now)
                elif now - failing_since >= RECEIPT_RETRY_S:
                    _log.warning(
                        "runtime %s: receipt of inbox request %s dropped after %.0f s of "
                        "failures: %s",
                        self.runtime_id,
                        request_id,
                        now - failing_since,
                        exc,
                    )
                    del unwritten[request_id]
            else:
                del unwritten[request_id]

    def live_runs(self) -> LiveRuns:
        """The live-snapshot books (dirty runs, pending interrupts). Kept from ``open`` with a
        durable store; without one, from the first call on (the operator facade calls it), so
        a runtime nobody watches pays nothing for them."""
        if self._live is None:
            self._live = LiveRuns(self.runtime_id)
            self.bus.add_sink(self._live)
        return self._live

    def fenced(self, run_id: str) -> bool:
        """Whether run ``run_id``, still in memory here, was taken over by another runtime
        (``_fence``): its commands belong to the new owner (``RedisControl`` sends them
        there), and here they are refused."""
        return self._rows.get(run_id) is False

    def live_snapshots(self, run_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Live snapshots (``RunInfo.snapshot()`` plus ``owner``, ``updated_at``,
        ``pending_commands``, ``interrupts``) of the runs in memory, or of ``run_ids``."""
        live = self.live_runs()
        pending = pending_by_run(self.router.open_states())
        if run_ids is None:
            handles = self.runs.handles()
        else:
            handles = [h for h in map(self.runs.get, run_ids) if h is not None]
        rows = self._rows  # a run another runtime took over is its to list (``_fence``)
        return [
            live.snapshot(h.info, pending.get(h.run_id))
            for h in handles
            if rows.get(h.run_id) is not False
        ]

    async def write_live_snapshots(self, *, heartbeat: bool = False) -> None:
        """Write the snapshots of the runs that changed (with ``heartbeat``, of every live
        run too) in one batch; on failure they stay due."""
        async with self._saving:
            live = self.live_runs()
            asked = [c for r in live.asked for c in self.runs.tree.children(r) if c.task_id]
            due = live.take_dirty()
            due.update(c.run_id for c in asked)  # a task's entry lists its task's interrupts
            if heartbeat:
                due.update(h.run_id for h in self.runs.handles() if not h.status.finished)
            if not due:
                return
            try:
                await self._save(self.live_snapshots(due))
            except BaseException:
                live.dirty |= due
                raise

    async def _save(self, snapshots: list[dict[str, Any]]) -> None:
        """Save snapshots of this runtime's runs. One whose row it holds (claimed, or saved
        here before) is saved only while the row still names it its owner
        (``Store.save_runs(held_by=)``): a run another runtime took over meanwhile (claimed
        once this one's heartbeat was stale, or declared dead) is never taken back
        (``_taken_over``). A run saved for the first time takes its row: a fresh id, or a
        graph run continued here (its thread's lease makes it this runtime's)."""
        rows = self._rows
        held = [s for s in snapshots if rows.get(s["run_id"])]
        first = [s for s in snapshots if s["run_id"] not in rows]
        if held:
            ended = {s["run_id"] for s in held if _finished(s)}
            for run_id in await self.store.save_runs(held, held_by=self.runtime_id):
                await self._taken_over(run_id, ended=run_id in ended)
        if first:
            await self.store.save_runs(first)
            rows.update((s["run_id"], True) for s in first)

    async def _taken_over(self, run_id: str, *, ended: bool) -> None:
        """Run ``run_id``'s row names another owner (or none) now: never saved here again,
        and fenced (``_fence``): the run is stopped here, the other runtime's incarnation is
        the only one. A run that ``ended`` here had its id started again elsewhere since, as
        a finished run's id may be: nothing to warn of (it is fenced all the same: a command
        must not give it another turn here)."""
        if self._rows.get(run_id) is False:  # known already
            return
        self._rows[run_id] = False
        try:
            row = await self.store.load_run(run_id)
        except Exception:  # the fence does not wait for the store: the reason names no owner
            row = None
        owner = row.get("owner") if row is not None else None
        if owner:
            why = (
                f"run {run_id} was taken over by runtime {owner} (started again there once "
                f"this runtime's heartbeat was {OWNER_SILENT_S:.0f} s old): it runs there now; "
                "send its commands through the store"
            )
        else:
            why = (
                f"run {run_id} was taken from runtime {self.runtime_id} in the store (declared "
                "dead by an operator's cancel once its heartbeat was "
                f"{OWNER_SILENT_S:.0f} s old): it no longer runs here"
            )
        self._fence(run_id, why, stop=not ended)
        if ended:
            _log.debug(
                "runtime %s: run %s ended here, its id runs elsewhere", self.runtime_id, run_id
            )
            return
        _log.warning(
            "runtime %s: %s; stopped here, its snapshots no longer saved",
            self.runtime_id,
            why,
        )

    def _fence(self, run_id: str, why: str, *, stop: bool) -> None:
        """Make run ``run_id``, which another runtime holds in the store now, do nothing more
        here: every command for it is refused (``why``, naming its new owner), it is no longer
        listed (``live_snapshots``), and with ``stop`` an agent run's task is cancelled with
        ``why``: the run ends ``cancelled`` here (its queued commands fail; its sub-runs,
        this runtime's own, are cancelled at their next boundary, as a parent's cancel
        reaches them), and its row, the new owner's, is left alone. (A graph run is left to
        its thread's lease, which fences its checkpoints.)"""
        handle = self.runs.get(run_id)
        if handle is None:  # released already
            return
        handle.policies = [_TakenOver(why), *handle.policies]
        task = handle.task
        if (
            stop
            and handle.info.kind == "agent"
            and not handle.done
            and task is not None
            and not task.done()
        ):
            task.cancel(why)

    async def flush(self) -> None:
        """Write now what the runtime holds for its durable store: the events and command
        states its store writer batches (every 50 ms), and the snapshots of runs that changed
        or were released. Without a durable store, nothing to do."""
        if not self._durable or not self._open:
            return
        if self._writer is not None:
            await self._writer.flush()
        await self.write_live_snapshots()
        await self._save_unsaved(strict=True)

    async def flush_events(self) -> None:
        """Write now the events the store writer batches (every 50 ms): a reader of the
        store's event log sees every event published so far. Without a durable store,
        nothing to do."""
        if self._durable and self._open and self._writer is not None:
            await self._writer.flush()

    def steering_history(self, run_id: str) -> list[SteeringEvent]:
        """That run's ``steering.*`` events, in order, while it is in memory (a released run
        has none here: see ``load_steering_history``). A ``run_id`` that is no text is an
        ``ArgumentError``; one no run can have has none."""
        looked_up = lookup_id(run_id)
        return [] if looked_up is None else self.router.history(looked_up)

    async def load_steering_history(self, run_id: str) -> list[SteeringEvent]:
        """That run's ``steering.*`` events, in order, also once the run was released: read
        from the store's event log (without a store a released run's history is gone). A
        ``run_id`` that is no text is an ``ArgumentError``; one no run can have has none, on
        every store."""
        if lookup_id(run_id) is None:
            return []
        if run_id in self.runs or not self._durable:
            return self.router.history(run_id)
        if self._writer is not None:
            await self._writer.flush()
        events = await self.store.load_events(run_id=run_id, type_prefix="steering.")
        return [e for e in events if isinstance(e, SteeringEvent)]

    def grant_sibling_steering(self, from_run_id: str, to_run_id: str) -> None:
        """Let run ``from_run_id``'s agent steer run ``to_run_id`` (a sibling), one way; both
        must be runs of this runtime (``UnknownTargetError`` else: a grant to an id no run had
        yet was kept, and given to the run later started under it)."""
        unknown = [r for r in (from_run_id, to_run_id) if self.runs.get(r) is None]
        if unknown:
            raise UnknownTargetError(
                f"grant_sibling_steering({from_run_id!r}, {to_run_id!r}): no run "
                f"{', '.join(map(repr, unknown))} in this runtime (finished and released, or "
                "never started); grant once both runs are started"
            )
        self.router.grant(from_run_id, to_run_id)

    def open_commands(self) -> list[SteeringCommand]:
        """Every command that has not reached a terminal state yet."""
        return self.router.open_commands()

    async def target_changed(self, handle: RunHandle) -> None:
        """A run's state changed (paused, resumed): re-evaluate the commands waiting for it
        (execution layer)."""
        await self.router.target_changed(handle)

    async def applied_commands(self, info: RunInfo) -> list[SteeringCommand]:
        """The commands run ``info`` applied, as the store logged them (execution layer: a
        run started again under its id gets them back). Nothing when the id was another
        tenant's run: its steering (instructions, narrowed tools) is that tenant's alone; and
        never a command a human of another tenant sent.

        With a durable store the run is claimed there first (``_claim``): ``ConfigurationError``
        when it is running in another runtime on the store (its owner's heartbeat is fresh):
        started here too, it would run twice and apply what was sent to it twice."""
        run_id, tenant_id = info.run_id, info.tenant_id
        snapshot = await self._claim(info) if self._durable else None
        try:
            logged = await self.store.run_commands(run_id, states=_APPLIED_OR_OPEN)
        except BaseException:
            await self.unclaim(run_id)
            raise
        if not logged:  # a new run id (a fresh one, or a sub-agent call's): nothing more to read
            return []
        if not self._durable:
            snapshot = await self.store.load_run(run_id)
        return self._handed_back(logged, snapshot, run_id, tenant_id)

    async def take_thread(self, info: RunInfo, *, hold: bool, started: bool = False) -> None:
        """Run ``info`` takes its thread (execution layer), both halves as one step: this
        runtime's (``RunRegistry.take_thread``, before anything awaits: of two starts at once
        one gets it), then the durable store's (``hold_thread``); if the second refuses
        (``ThreadBusy``) or fails, the first is let go of before the error is raised.
        ``hold`` and ``started`` as for the registry. ``let_go_of_thread`` undoes both."""
        self.runs.take_thread(info, hold=hold, started=started)
        try:
            await self.hold_thread(info, hold=hold)
        except BaseException:
            self.runs.let_go_of_thread(info)
            raise

    async def hold_thread(self, info: RunInfo, *, hold: bool) -> None:
        """The store's half of run ``info``'s take of its thread (``take_thread`` does both;
        the agent start calls it alone, after the registry's half and once the run's id is
        claimed). With a durable store the thread's writer holds it there, in one step
        (``Store.hold_thread``), so that a runtime of another process on the store refuses a
        second writer as this one's registry does: a session's turn (``hold``) and a graph run
        (refused too while another runtime's graph run writes the thread); a plain agent run
        takes no hold, and is refused only while a turn of another runtime holds the thread.
        ``ThreadBusy`` names the holding run. A hold whose run has ended, or whose runtime is
        gone (a process killed: at once on this host, else once its heartbeat is
        ``OWNER_SILENT_S`` old; a clean close releases its runs), holds nothing: it is judged
        as a claimed run is (``_running_elsewhere``), by the hold's own owner and time while
        its run has no row yet (a graph run before its first snapshot), or a row that says it
        finished before the hold was taken (a run continued under its id); a graph run continued
        in another process after its own died takes its hold back. Without a durable store it
        does nothing: the registry's hold, in this runtime, is the only one."""
        thread_id = info.thread_id
        if not self._durable or thread_id is None:
            return
        if hold or info.kind == "graph":
            taken, held = await self.store.hold_thread(
                info.tenant_id,
                thread_id,
                info.run_id,
                lambda h: h is None or not self._running_elsewhere(h),
                owner=self.runtime_id,
            )
            if taken:
                self._holding[info.run_id] = info
                return
        else:
            held = await self.store.thread_holder(info.tenant_id, thread_id)
            if (
                held is None
                or held["run_id"] == info.run_id
                or held.get("kind") != "agent"  # only a turn's hold: it runs beside a graph run
                or not self._running_elsewhere(held)
            ):
                return
        assert held is not None
        raise ThreadBusy(thread_id, held_by=str(held["run_id"]))

    async def let_go_of_thread(self, info: RunInfo) -> None:
        """Let go of what ``take_thread`` took of its thread for run ``info`` (a start that
        failed): in this runtime's registry, and in the store (``_let_go_in_store``)."""
        self.runs.let_go_of_thread(info)
        await self._let_go_in_store(info)

    async def _let_go_in_store(self, info: RunInfo) -> None:
        """Let go of the hold ``hold_thread`` took in the store for run ``info`` (its run
        ended, or its start failed); a no-op for a run that took none. A store that fails is
        logged, not raised: the hold is judged by its run, whose final snapshot says it
        ended."""
        if self._holding.pop(info.run_id, None) is None:
            return
        try:
            await self.store.let_go_of_thread(info.tenant_id, info.thread_id or "", info.run_id)
        except StoreError as exc:
            _log.warning("run %s could not let go of its thread in the store: %s", info.run_id, exc)

    def _handed_back(
        self,
        logged: list[StoredCommand],
        snapshot: dict[str, Any] | None,
        run_id: str,
        tenant_id: str,
    ) -> list[SteeringCommand]:
        """What run ``run_id`` of ``tenant_id``, started again or continued, gets back of the
        commands ``logged`` for its id: nothing when the stored run (``snapshot``) was another
        tenant's; else the open ones wait for it (``_take_over``) and the applied ones not
        sent by a human of another tenant are returned."""
        if snapshot is not None and snapshot.get("tenant_id") != tenant_id:
            return []
        self._take_over([c for c in logged if c.state != CommandState.APPLIED], run_id)
        return [
            c.command
            for c in logged
            if c.state == CommandState.APPLIED
            and sender_tenant(c.command.actor) in (None, tenant_id)
        ]

    def _take_over(self, logged: list[StoredCommand], run_id: str) -> None:
        """Wait, for run ``run_id`` started again here, with the commands the store has open
        for it that this runtime has not seen: accepted by another runtime on the store that
        died (a worker SIGKILLed: its runs go on elsewhere). Read at open, they are restored
        then; accepted after this runtime opened, only here (they were left open, never
        delivered: the run that goes on here applied none of them)."""
        if self._durable and logged:
            self.router.taken_over([(c.command, c.state, run_id) for c in logged])

    async def _take_deferred_for_thread(self, info: RunInfo) -> None:
        """Wait, for run ``info`` of a thread, with the commands the steering log holds
        ``deferred`` for that thread that this runtime has not seen: deferred by another
        runtime sharing the log (another worker, another process on the SQLite file) when
        no run of the thread was anywhere, after this runtime opened (``restore`` at open
        took the ones logged before). The run takes each as it takes one restored at open,
        by the compare-and-set ``deferred`` -> ``accepted`` on its row
        (``SteeringRouter._hand_over``): of two runtimes taking it, one moves the row on and
        the other drops its copy with no event, so it is applied once. Only a human's
        command of the run's tenant: thread ids are each tenant's own, and the run another
        actor acted from is not here to say its tenant. A log that cannot be read leaves
        them where they are (the runtime that deferred them keeps them) and the run starts."""
        thread_id, tenant_id = info.thread_id, info.tenant_id
        try:
            logged = await self.store.open_commands(thread_id=thread_id)
        except StoreError as exc:
            _log.warning("run %s starts without its thread's logged commands: %s", info.run_id, exc)
            return
        deferred: list[tuple[SteeringCommand, str, str | None]] = [
            (c.command, c.state, None)
            for c in logged
            if c.state == CommandState.DEFERRED
            and c.run_id is None
            and getattr(c.command.target, "thread_id", None) == thread_id
            and isinstance(c.command.actor, HumanActor)
            and sender_tenant(c.command.actor) == tenant_id
        ]
        if deferred:
            self.router.taken_over(deferred)

    async def _claim(self, info: RunInfo) -> dict[str, Any] | None:
        """Save run ``info``'s snapshot, naming this runtime its owner, unless the store shows
        the run running elsewhere (``_running_elsewhere``), in one step (``Store.claim_run``):
        of two runtimes starting one run id at once, one claims it and the other is refused
        with ``ConfigurationError`` — a check of the stored snapshot alone let both through
        until the first wrote its snapshot (at its next tick). Returns the snapshot the store
        held before (None: none)."""
        run_id = info.run_id
        if run_id in self.runs:  # the registry refuses it: its live snapshot stays as it is
            return await self.store.load_run(run_id)
        if run_id in self._claims:  # the first start's claim is its own: not one of this start
            raise ConfigurationError(
                f"run {run_id!r} is being started in this runtime already; give each run its "
                "own run_id (or leave it unset for a fresh one)"
            )
        self._claims[run_id] = None  # a second start of the id meanwhile is refused above
        try:
            await self._saving.acquire()
        except BaseException:
            del self._claims[run_id]
            raise
        try:
            return await self._claim_row(info)
        finally:
            self._saving.release()

    async def _claim_row(self, info: RunInfo) -> dict[str, Any] | None:
        """``_claim``'s claim itself, made while no save of this runtime's is under way
        (``_saving`` held): a released run's final snapshot is then either in the store
        already or among the unsaved ones (a failed save puts it back), where ``earlier``
        finds it; taken out to be saved while the id was claimed, it was missed, and written
        after the claim (held: the row names this runtime) it overwrote it."""
        run_id, tenant_id = info.run_id, info.tenant_id
        snapshot = self.live_runs().snapshot(info)

        def free(held: dict[str, Any] | None) -> bool:
            # another tenant's run, finished or not, is never written over: its tenant's alone
            if held is None:
                return True
            return held.get("tenant_id") == tenant_id and not self._running_elsewhere(held)

        # A claim that failed in a way that may pass is made again (``written_again``): one
        # whose COMMIT went through and whose reply was lost (a dropped connection) finds its
        # own claim (this runtime's: free) instead of leaving it held for a start that failed,
        # which refused the id everywhere until it went stale.
        claim = asyncio.ensure_future(written_again(lambda: self.store.claim_run(snapshot, free)))
        try:
            claimed, stored = await asyncio.shield(claim)
        except asyncio.CancelledError:
            # The store may save the claim all the same (a commit under way goes on): it is
            # given back before the start is cancelled (by the runtime if cancelled again).
            await asyncio.shield(self.spawn(self._give_back(run_id, claim)))
            raise
        except BaseException:
            del self._claims[run_id]
            raise
        del self._claims[run_id]
        if stored is not None and (stored.get("owner"), stored.get("created_at")) == (
            snapshot.get("owner"),
            snapshot.get("created_at"),
        ):
            # found its own claim (made again after a lost reply): what it replaced is gone,
            # and a failed start gives the id back as free rather than as claimed here
            stored = None
        if not claimed:
            assert stored is not None
            if stored.get("tenant_id") != tenant_id:  # said as nothing of that run: not its tenant
                raise ConfigurationError(
                    f"run id {run_id!r} is taken on this store; give this run its own run_id "
                    "(or leave it unset for a fresh one)"
                )
            raise ConfigurationError(
                f"run {run_id!r} is running in another runtime on this store (owner "
                f"{stored['owner']}, heartbeat at {stored.get('updated_at')}); wait for it "
                f"to finish, or give this run its own run_id"
            )
        # An earlier incarnation's final snapshot not saved yet is what the store would hold:
        # saved later, it would overwrite the claim; a failed start puts it back instead.
        earlier = [s for s in self._unsaved if s["run_id"] == run_id]
        if earlier:
            self._unsaved = [s for s in self._unsaved if s["run_id"] != run_id]
            stored = earlier[-1]
        self._claims[run_id] = stored
        self._rows[run_id] = True
        return stored

    async def _give_back(
        self, run_id: str, claim: asyncio.Future[tuple[bool, dict[str, Any] | None]]
    ) -> None:
        """Once the claim of a start cancelled while claiming ``run_id`` is done, give it back
        if the store saved it."""
        try:
            with contextlib.suppress(Exception):  # it failed: nothing was saved
                claimed, stored = await claim
                if claimed:
                    self._claims[run_id] = stored
                    await self.unclaim(run_id)
        finally:
            self._claims.pop(run_id, None)

    async def unclaim(self, run_id: str) -> None:
        """Give back the claim of a start of ``run_id`` that failed before its run was
        registered (execution layer): the store gets back the snapshot the claim replaced
        (none: the row goes), so another runtime may start the id at once instead of being
        refused until the claim goes stale (``OWNER_SILENT_S``). A no-op for an id with no
        claim under way; a store that fails is logged, not raised (the start's own error is),
        once a failure that may pass (a dropped connection) was tried again: a give-back made
        twice leaves what the first left (the row no longer names this runtime, or names it
        with ``previous`` put back again)."""
        if run_id not in self._claims:
            return
        previous = self._claims.pop(run_id)
        self._rows.pop(run_id, None)
        try:
            await written_again(lambda: self.store.release_run(run_id, self.runtime_id, previous))
        except Exception as exc:
            _log.warning(
                "runtime %s: could not give back the claim of run %s, whose start failed: "
                "other runtimes may start it once its claim is %.0f s old: %s",
                self.runtime_id,
                run_id,
                OWNER_SILENT_S,
                exc,
            )

    def _running_elsewhere(self, snapshot: dict[str, Any]) -> bool:
        """Whether the run of ``snapshot`` is running in another runtime: it is unfinished and
        its owner is neither silent (``OWNER_SILENT_S`` without a heartbeat) nor known to be
        gone (a runtime of this process that closed, or of a process of this host that
        ended: a run killed with its process may be started again at once)."""
        owner = snapshot.get("owner")
        if not owner or owner == self.runtime_id or _finished(snapshot):
            return False
        return not owner_silent(snapshot) and not holder_gone(str(owner), _OPEN_HERE)

    async def resting_tasks(self, run_id: str, tenant_id: str) -> dict[str, tuple[str, str | None]]:
        """Task id -> (run id, node) of graph run ``run_id``'s task entries that an earlier runtime
        left ``interrupted`` in the durable store (execution layer: a graph thread continued
        by another process resumes its tasks under their entries, never leaving the old ones
        interrupted for ever); entries this runtime holds are not among them."""
        if not self._durable:
            return {}
        snapshot = await self.store.load_run(run_id)
        if snapshot is None or snapshot.get("tenant_id") != tenant_id:
            return {}
        found: dict[str, tuple[str, str | None]] = {}
        before = None
        while True:
            page = await self.store.list_runs(
                tenant_id=tenant_id,
                statuses=(RunStatus.INTERRUPTED.value,),
                root_run_id=str(snapshot.get("root_run_id") or run_id),
                before=before,
                limit=_RESTING_PAGE,
            )
            for snap in page:
                task_id = snap.get("task_id")
                if (
                    snap.get("parent_run_id") == run_id
                    and task_id
                    and snap["run_id"] not in self.runs
                ):
                    node = snap.get("node_id")
                    found.setdefault(str(task_id), (str(snap["run_id"]), node and str(node)))
            if len(page) < _RESTING_PAGE:
                return found
            before = run_key(page[-1])

    async def _fail_orphans(self, run_id: str) -> None:
        """Run ``run_id`` ended: the runs below it that are not live (started by an earlier
        incarnation of it, killed with it, and not started again under their ids by now) can
        no longer come back, so the commands restored for them, which waited for their ids,
        fail — "none stays open" (docs/guarantees.md, Crashes).

        So do those restored for a run id the store has no row of (a graph run started again
        on a finished thread, which claims no row and saves no checkpoint, killed before its
        first snapshot was saved): such a run never comes back under its id (a thread's next
        start continues the run its last checkpoint names; an agent run, started with a run
        id or a fresh one, claims its row before it takes a command, ``applied_commands``, so
        it is never among them), so once a run here has ended, they fail rather than wait for
        good. Unless the runtime that accepted one of them is alive (``_accepted_live``): a
        graph run has no row until its owner's first snapshot tick, and a runtime that opened
        meanwhile restored what it had accepted, for a run alive there, which will apply it."""
        waiting = [w for w in self.router.waiting_run_ids() if w not in self.runs]
        if not waiting:  # nearly every run: nothing restored waits
            return
        restored = set(self.router.restored_run_ids())
        gone: list[str] = []
        unknown: list[str] = []
        try:
            for w in waiting:
                if w in restored and await self._load_run(w) is None:
                    if not await self._accepted_live(w):
                        unknown.append(w)
                elif await self._started_below(w, run_id):
                    gone.append(w)
        except StoreError as exc:  # they wait on, for the next runtime on this store
            _log.warning("commands for the runs below %s wait on: %s", run_id, exc)
            return
        if gone:
            self.router.fail_waiting(
                gone,
                f"{LATE}: its run was started by an earlier incarnation of run {run_id}, which "
                "has ended since; that run is gone",
            )
        for w in unknown:
            if w not in self.runs:  # not started again while the store was read
                self.router.fail_waiting(
                    [w],
                    f"{LATE}: its run {w} ended with an earlier process before the store saved "
                    "it, and was not started again; it never comes back under its id",
                    threads_wait=True,  # the thread's next run takes those for its thread
                )

    async def _accepted_live(self, run_id: str) -> bool:
        """Whether a command the steering log holds open for run ``run_id`` (which has no row
        in the store) was accepted by a runtime that may be running the run: one not known
        to be gone (``holder_gone``: a runtime of this process that closed, a process of
        this host that ended) that logged it less than ``OWNER_SILENT_S`` ago (by then a
        live owner has saved the run's row at a snapshot tick: one that has not is silent).
        A command logged with no owner (before the log recorded owners) is judged as
        before: its run is taken for gone."""
        now = _clock.now()
        for logged in await self.store.run_commands(run_id, states=_OPEN_STATES):
            owner = logged.owner
            if owner is None or owner == self.runtime_id or holder_gone(owner, _OPEN_HERE):
                continue
            age = logged.age_s
            if age is None:
                age = (now - logged.command.created_at).total_seconds()
            if age <= OWNER_SILENT_S:
                return True
        return False

    async def _started_below(self, run_id: str, ancestor: str) -> bool:
        """Whether the stored snapshots say ``run_id`` was started below ``ancestor``."""
        seen: set[str] = set()
        while run_id not in seen and len(seen) < 64:  # a tree is never deeper (max_depth)
            seen.add(run_id)
            snapshot = await self._load_run(run_id)
            parent = snapshot.get("parent_run_id") if snapshot is not None else None
            if parent is None:
                return False
            if parent == ancestor:
                return True
            run_id = str(parent)
        return False

    # ------------------------------------------------------------------ runs

    def tree(self, root_run_id: str) -> RunTreeNode | None:
        """The run and its descendants, while in memory; None for a run it does not know (a
        ``root_run_id`` that is no text is an ``ArgumentError``)."""
        looked_up = lookup_id(root_run_id, "root_run_id")
        return None if looked_up is None else self.runs.tree.subtree(looked_up)

    def subscribe(self, *, maxsize: int = 10_000, where: EventFilter | None = None) -> Subscription:
        """``rt.bus.subscribe``: the events from now on (those ``where`` keeps), for one reader
        (another task waiting on it at once is ``SubscriptionInUse``: subscribe per reader)."""
        return self.bus.subscribe(maxsize=maxsize, where=where)

    async def register(
        self,
        handle: RunHandle,
        *,
        redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED,
        continued: bool = False,
    ) -> RunHandle:
        """Add a run to the tree and give it its steering inbox (execution layer).
        ``continued``: the run goes on from an earlier process (a graph run whose id came
        from its thread's checkpoints): the commands the store has open for it that this
        runtime has not seen wait for it too (``_take_over``), and its driver gets back what
        the earlier process applied (``RunDriver.restore``: a pause that still held it);
        nothing of either when the stored run was another tenant's (as ``applied_commands``)."""
        self.require_open()
        self._on_own_loop("registering a run (rt.register(), graph.run(runtime=rt), ...)")
        if continued and self._durable:
            run_id = handle.run_id
            logged = await self.store.run_commands(run_id, states=_APPLIED_OR_OPEN)
            snapshot = await self.store.load_run(run_id) if logged else None
            self.require_open()
            applied = self._handed_back(logged, snapshot, run_id, handle.info.tenant_id)
            if applied:  # a pause that still held it comes back
                handle.driver.restore(applied)
        if self._durable and handle.info.thread_id is not None:
            await self._take_deferred_for_thread(handle.info)
            self.require_open()
        self.runs.register(handle)
        await self.router.attach(handle, redirect_conflict=redirect_conflict)
        if self._supervisor is not None or self.runs.supervisor_spec_for(handle) is not None:
            self.supervisor.watch(handle)
        self._claims.pop(handle.run_id, None)  # the run's claim is its own now
        return handle

    async def finish(self, handle: RunHandle, result: RunResult) -> None:
        """Record how a run ended and settle the commands still waiting for it (execution layer)."""
        task = asyncio.current_task()
        if task is None:
            await self._finish(handle, result)
            return
        if task is handle.left_behind:  # its run was ended without it (close)
            return
        self._ending.add(task)
        try:
            await self._finish(handle, result)
        finally:
            self._ending.discard(task)

    async def _finish(self, handle: RunHandle, result: RunResult) -> None:
        await self._fail_orphans(handle.run_id)
        if self._holding:  # before anyone hears it ended: its thread's next turn may start
            await self._let_go_in_store(handle.info)
        handle.finish(result)
        if self._live is not None:
            # a graph task's entry ends without an event naming it (the graph's events name
            # the graph run): its final snapshot is due at the next tick all the same
            self._live.dirty.add(handle.run_id)
        await self.router.target_finished(handle)
        self.runs.finished(handle, _clock.monotonic())
        await self.release_finished()

    async def release_finished(self) -> int:
        """Release the finished run trees past the retention window (done after every run
        ends; call it to apply ``retain_finished_s`` while no run ends). Returns how many
        runs were released."""
        released = self.runs.release_due(_clock.monotonic(), self.router.busy_runs)
        if released:
            self._released(released)
        if len(self._unsaved) >= _SAVE_BATCH and self._open:
            await self._save_unsaved()
        return len(released)

    def forget(self, run_id: str) -> None:
        """Release a finished run and everything under it now: its handle, tree node and
        steering history (the store keeps them). A no-op for an unknown (or released) id;
        ``ConfigurationError`` if it or a run under it is still running, or a command for one
        of them is still open or still being submitted (in the policies). A ``run_id`` that
        is no text is an ``ArgumentError``."""
        if lookup_id(run_id) is None:
            return
        self._released(self.runs.forget(run_id, self.router.busy_runs))

    def _released(self, infos: list[RunInfo]) -> None:
        self.router.release(i.run_id for i in infos)
        live = self._live
        if live is not None:
            for info in infos:
                live.forget(info.run_id)
        if self._durable:  # snapshots are saved on close: these would miss it
            assert live is not None
            self._unsaved.extend(live.snapshot(i) for i in infos)

    def released_snapshot(self, run_id: str) -> dict[str, Any] | None:
        """The final snapshot of run ``run_id`` if this runtime released it (``forget``, the
        retention window) and its durable store does not have it yet: the store gets it at
        the runtime's next snapshot tick (``SNAPSHOT_EVERY_S``) and holds until then an older
        row of the run (an agent run's claim) or none (a graph run's), so a reader of the
        store asks here first and a released run reads at once. None for a run in memory, a
        saved one, one another runtime took over, and an unknown id."""
        if not self._unsaved or self._rows.get(run_id) is False:
            return None
        for snapshot in reversed(self._unsaved):
            if snapshot["run_id"] == run_id:
                return dict(snapshot)
        return None

    async def _load_run(self, run_id: str) -> dict[str, Any] | None:
        """The run's snapshot as the store holds it once saved: a released run's final one
        not saved yet (``released_snapshot``), else the store's."""
        released = self.released_snapshot(run_id)
        return released if released is not None else await self.store.load_run(run_id)

    async def _save_unsaved(self, *, strict: bool = False) -> None:
        """Save the released runs' snapshots; on failure they stay due, and only ``strict``
        (an explicit ``flush``) raises: a run's end must not fail for its snapshot. They
        stay in ``_unsaved`` until saved (``released_snapshot`` reads them meanwhile);
        those released during the save are after them there."""
        async with self._saving:
            if not self._unsaved:
                return
            snapshots = list(self._unsaved)
            try:
                await self._save(snapshots)
                self._unsaved = self._unsaved[len(snapshots) :]
                for s in snapshots:  # their final snapshot: this runtime saves them no more
                    if s["run_id"] not in self.runs and s["run_id"] not in self._claims:
                        self._rows.pop(s["run_id"], None)
            except Exception as exc:
                if strict:
                    raise
                _log.warning("could not save %d released run snapshot(s): %s", len(snapshots), exc)

    async def _release_runs(self) -> None:
        """The closing write of the runs' snapshots. A run still unfinished (a graph run at
        rest, ``interrupted``) is written without an ``owner``: this runtime reads its inbox
        no more, and a command sent to the run through the store is answered at once (how
        to continue its thread) instead of waiting for a receipt nobody would write."""
        if self._durable:
            async with self._saving:
                snapshots = [*self._unsaved, *self.live_snapshots()]
                released = [s if _finished(s) else {**s, "owner": None} for s in snapshots]
                await self._save(released)
                self._unsaved = []

    async def start(self, agent: Agent, input: Any, **kwargs: Any) -> RunHandle:
        """Start ``agent`` on ``input`` in the background; returns its handle at once."""
        self.require_open()
        self._on_own_loop("rt.start()")
        return await start_agent_run(self, agent, input, **kwargs)

    async def start_graph(self, graph: CompiledGraph, input: Any, **kwargs: Any) -> RunHandle:
        """Start a compiled graph on ``input`` in the background; returns its handle at once
        (``CompiledGraph.start``, which takes the keyword arguments).

        The run pauses on interrupts and continues when steering answers them.
        """
        self.require_open()
        self._on_own_loop("rt.start_graph()")
        start = getattr(graph, "start", None)
        if isinstance(graph, (Agent, SubAgent)) or not callable(start):
            # the graph layer loads with the first graph built, not with the runtime
            hint = "; call .compile() on it first" if hasattr(graph, "compile") else ""
            raise ConfigurationError(
                f"rt.start_graph takes a compiled graph, got {type(graph).__name__}{hint} (an "
                "Agent starts with rt.start)"
            )
        handle: RunHandle = await start(input, runtime=self, **kwargs)
        return handle

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        """Run a coroutine owned by the runtime: awaited (or cancelled) on close."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def durable(self) -> bool:
        """Whether the runtime writes to a durable store (given one at construction)."""
        return self._durable

    def require_open(self) -> None:
        """Raise unless the runtime takes new work: ``RuntimeClosed`` once ``close()`` has
        begun, ``ConfigurationError`` before ``open()``."""
        if self._closing:
            raise RuntimeClosed("the runtime is closing or closed: it takes no new work")
        if not self._open:
            raise ConfigurationError("the runtime is not open: use 'async with Runtime(...) as rt'")


#: How long ``close`` waits for a cancelled run's task before it ends the run without it (a
#: tool or node whose cancellation never finishes) and goes on; the task is left behind, logged.
#: Longer than ``CANCEL_GRACE_S``: a run's ordinary cleanup at close (a cancelled sub-agent
#: tree, a checkpoint written on a busy machine) is not cut short.
CLOSE_GRACE_S = 5.0

#: How often a thread waiting in ``submit_threadsafe`` checks that the runtime's loop runs.
_LOOP_CHECK_S = 0.5
_LOOP_ENDED = (
    "the runtime's event loop is not running (it ended without closing the runtime): "
    "nothing was sent; open a runtime on a running loop"
)


class _TakenOver(CheckPolicy):
    """Refuses every command for a run that another runtime took over (``Runtime._fence``)."""

    policy_id = "taken-over"

    def __init__(self, why: str) -> None:
        self.why = why

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        return self.why


def _refused(cmd: SteeringCommand, reason: str) -> SteeringReceipt:
    return SteeringReceipt(
        status=ReceiptStatus.REJECTED,
        correlation_id=cmd.correlation_id,
        reason=reason,
        policy_id="runtime",
    )


# ``Agent.run(...)`` and ``SubAgent.invoke(...)`` without a runtime run in a private one.
provide_private_host(Runtime)


def _finished(snapshot: dict[str, Any]) -> bool:
    try:
        return RunStatus(str(snapshot.get("status"))).finished
    except ValueError:
        return True  # a status this version does not know: written as it is


def _names(trusted: Iterable[str]) -> frozenset[str]:
    """``trusted_middleware`` as a set of names, read once (it may be a generator). A str is
    refused: read letter by letter, ``"auditor"`` trusted the middleware named ``"a"``..."""
    if isinstance(trusted, (str, bytes)) or not isinstance(trusted, Iterable):
        raise ConfigurationError(
            f"trusted_middleware= takes a list of names, got {type(trusted).__name__} "
            f"{shown_repr(trusted)}; e.g. trusted_middleware=[{shown_repr(trusted)}]"
        )
    names = frozenset(trusted)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(
                f"trusted_middleware= holds names (non-blank text), got {type(name).__name__} "
                f"{name!r}"
            )
    return names


def _sinks(sinks: Iterable[Sink]) -> list[Sink]:
    """``sinks`` as a list, each a callable (an event sink is called with every event)."""
    if not isinstance(sinks, Iterable) or isinstance(sinks, (str, bytes)):
        raise ConfigurationError(
            f"sinks= takes a list of sinks, got {type(sinks).__name__}; e.g. "
            "sinks=[EventRecorder()]"
        )
    listed = list(sinks)
    for sink in listed:
        if isinstance(sink, type):  # callable, and "constructed" by every event (a TypeError)
            raise ConfigurationError(
                f"sinks= holds sinks, got the class {sink.__name__}: sinks=[{sink.__name__}()]"
            )
        if not callable(sink):
            raise ConfigurationError(
                f"sinks= holds callables (event) -> None, got {type(sink).__name__} {shown_repr(sink)}"
            )
    return listed
