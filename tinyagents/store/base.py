"""The persistence contract for steering logs, events and run snapshots.

``Store`` is the extension point (an ABC): ``MemoryStore`` and ``SqliteStore`` implement it
here, and every backend must pass ``tests/store/test_store_conformance.py``. Checkpoints of
graph threads have their own contract in ``tinyagents.store.checkpoint``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import logging
import sys
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from tinyagents import _clock
from tinyagents._record import Record, record
from tinyagents.errors import ArgumentError, DamagedData, InvalidCommandError, StoreError
from tinyagents.events.models import (
    Event,
    ModelDeltaEvent,
    SteeringEvent,
    parse_event,
    surrogates_escaped,
)
from tinyagents.protocol.commands import (
    ReceiptStatus,
    SteeringCommand,
    SteeringReceipt,
    ThreadTarget,
    dedupe_scope,
)
from tinyagents.protocol.ids import id_problem, shown_id
from tinyagents.protocol.state import UNFINISHED_RUN_STATUSES, CommandState
from tinyagents.store._lookups import checked_lookups

_log = logging.getLogger("tinyagents.store")


@record(slots=True, kw_only=True, eq=False, repr=False)
class StoredCommand(Record):
    """A command as the steering log holds it: its state there, the run it went to and why
    it ended as it did."""

    command: SteeringCommand
    state: str
    run_id: str | None
    reason: str | None = None
    #: Seconds since the store logged it, by the store's own clock (PostgreSQL, from
    #: ``get_command``), or None: then its age is judged by ``command.created_at``, stamped
    #: by its sender's clock (a store on one machine).
    age_s: float | None = None
    #: The runtime that accepted (or deferred) it, by its ``runtime_id``: whether that
    #: runtime is still alive tells a runtime that restored the command whether its run may
    #: still apply it. None for a command logged before the log recorded it, or logged by no
    #: runtime (a dead run's claim).
    owner: str | None = None
    #: The thread of its target: a thread target's, or that of the run it went to (None:
    #: a run with no thread, or logged before the log recorded it). ``open_commands`` filters
    #: by it.
    thread_id: str | None = None


@record(slots=True, kw_only=True, eq=False, repr=False)
class InboxItem(Record):
    """A command another process submitted, through the store, for a run ``owner`` holds."""

    request_id: str
    owner: str
    command: SteeringCommand
    submitted_at: datetime


#: How long an answered inbox row stays readable (``inbox_receipt``) before a backend may
#: delete it: the inbox shrinks as its submitters read their receipts. An item nobody answered
#: within this long after it was put (its owner died after taking it, or never came back)
#: goes too: its submitter stopped waiting (``ReceiptTimeout``) long before.
INBOX_RETENTION_S = 3600.0


def seconds_before(now: datetime, seconds: float) -> datetime:
    """``now`` less ``seconds``, or the calendar's first instant if that is before it (a
    clock at 0001-01-01: a bare ``OverflowError`` at every inbox poll): nothing is older."""
    try:
        return now - timedelta(seconds=seconds)
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


#: How long a taken inbox item stays its taker's: one not answered within this long (its
#: owner died between taking and answering, or the reply to the take was lost after COMMIT)
#: is handed out again, to its owner or to the new owner of its target run. Taking twice is
#: safe: the second submit finds the command in the steering log and answers ``duplicate``.
#: Far above an answer's usual ~50 ms, and above ``RECEIPT_RETRY_S`` (a receipt whose write
#: fails is retried that long by the owner that took it).
INBOX_LEASE_S = 30.0

#: The most bytes a command's JSON may take on its way to another process (the store's
#: inbox, a worker's Redis stream): 64 times ``PayloadPolicy``'s default bound. A larger one
#: is refused by its sender (``sendable``) and not sent: its owner's take reads up to 100
#: items at once and would hold them all in memory, its other commands waiting, only for its
#: payload policy to reject it.
MAX_COMMAND_BYTES = 2**20


def sendable(cmd: SteeringCommand) -> str:
    """``cmd`` as JSON; ``InvalidCommandError`` when that is over ``MAX_COMMAND_BYTES``."""
    text = cmd.model_dump_json()
    size = len(text.encode())
    if size > MAX_COMMAND_BYTES:
        raise InvalidCommandError(
            f"command {cmd.correlation_id} is too large to send to another process: its "
            f"JSON is {size} bytes, the limit is {MAX_COMMAND_BYTES}; send a summary or a "
            "reference (a URL, an id) instead of the data"
        )
    return text


#: How long past its expiry a claimed nonce (``Store.claim_nonce``) is kept: each process
#: sharing a store judges a nonce's expiry by its own clock, and one whose clock is behind
#: must still find it claimed while it would take it as unexpired.
NONCE_MARGIN_S = 300.0

#: What an answer deletes besides, in SQLite: ``?1`` is now - INBOX_RETENTION_S, by the
#: answerer's clock (the file is one machine's, whose clock stamped its times too).
#: PostgreSQL, shared by machines whose clocks differ, prunes by the database's clock.
PRUNE_INBOX = (
    "DELETE FROM inbox WHERE answered_at < ?1 OR (answered_at IS NULL AND submitted_at < ?1)"
)


class Store(ABC):
    """Durable steering log, event log, run snapshots and the inbox of commands that other
    processes submit for the runs a runtime owns.

    Every backend's lookups (and ``release_run``, ``claim_nonce``) take their arguments
    alike, checked before the backend is asked (``tinyagents.store._lookups``): an argument
    of the wrong type is an ``ArgumentError``, and text no row can hold (a NUL, a lone
    surrogate) finds nothing."""

    url: str = ""
    #: The name of its event log, the same however its URL was written (a backend whose
    #: URL's text may name one store many ways sets it when it opens); empty: the URL names it.
    log_name: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # every backend's lookups take their arguments alike (``_lookups``)
        super().__init_subclass__(**kwargs)
        checked_lookups(cls)

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and create the schema (idempotent)."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Flush and disconnect."""

    @abstractmethod
    async def append_command(
        self,
        cmd: SteeringCommand,
        *,
        state: str,
        run_id: str | None,
        owner: str | None = None,
        thread_id: str | None = None,
    ) -> bool:
        """Insert a command the log has never seen; durable when this returns. ``owner``: the
        ``runtime_id`` of the runtime logging it; ``thread_id``: its target's thread
        (``StoredCommand``).

        Returns False, and changes nothing, when the log already holds a command with the same
        correlation id in the same scope (``dedupe_scope(cmd.actor)``) — written by this
        process or by any other sharing the store: a command in the log is never overwritten.
        Raises ``StoreError`` when the write fails; then nothing was written.
        """

    @abstractmethod
    async def update_command(
        self,
        cmd: SteeringCommand,
        *,
        state: str,
        run_id: str | None,
        from_state: str,
        owner: str | None = None,
        thread_id: str | None = None,
    ) -> bool:
        """Move a logged command from ``from_state`` to ``state`` (deferred → accepted or
        rejected), keeping its place in the log; ``cmd`` may be a policy's transform of the
        original. ``owner`` and ``thread_id``, when given, replace the logged ones (the
        runtime that takes a deferred command owns it from then on).

        A compare-and-set: returns False, and changes nothing, when the log no longer holds
        the command in ``from_state`` — another runtime sharing the log took it or settled it
        first, so it is that runtime's (two runtimes that both held a deferred copy must not
        both hand it to a run). Raises ``StoreError`` when the write fails.
        """

    @abstractmethod
    async def set_command_states(self, updates: list[tuple[str, str, str, str | None]]) -> None:
        """Set (scope, correlation_id, state, reason) for commands already in the log, unless
        a command's logged state is terminal already: the first terminal state stands (a
        runtime sharing the log may settle its copy of a command another one applied)."""

    @abstractmethod
    async def get_command(self, correlation_id: str, *, scope: str = "") -> StoredCommand | None:
        """The command logged under this id and scope, or None. Raises ``StoreError`` when the
        row exists but no longer reads as a command."""

    @abstractmethod
    async def open_commands(self, *, thread_id: str | None = None) -> list[StoredCommand]:
        """Commands that never reached a terminal state (accepted or deferred), oldest first;
        with ``thread_id``, only those logged for that thread (an indexed read, made at
        every start of a run with a thread: ``Runtime.register`` takes the thread's
        ``deferred`` commands another runtime sharing the log deferred).

        A stored command that no longer validates (written by an older version, or damaged) is
        marked ``failed`` in the log with the reason and left out: it never blocks the rest.
        """

    @abstractmethod
    async def command_ids(self) -> set[str]:
        """Every correlation id in the log, in any scope."""

    @abstractmethod
    async def append_events(self, events: list[Event]) -> None:
        """Append events to the event log and, in the same transaction, settle the commands
        whose terminal ``steering.*`` events are among them (``terminal_updates``): a crash
        can never leave a command's terminal event logged while the steering log still
        holds it open (it would be delivered, and reported, a second time)."""

    @abstractmethod
    async def load_events(
        self,
        *,
        run_id: str | None = None,
        root_run_id: str | None = None,
        type_prefix: str | None = None,
    ) -> list[Event]:
        """Events in the order they were written, filtered by run, tree or type prefix. A row
        that no longer reads as an event is left out (``readable_events``)."""

    @abstractmethod
    async def save_runs(
        self, snapshots: list[dict[str, Any]], *, held_by: str | None = None
    ) -> list[str]:
        """Upsert run snapshots (``RunInfo.snapshot()``). With ``held_by`` (a runtime id),
        a snapshot is saved only where its run has no row or one naming ``held_by`` its
        ``owner``, each as one step (a compare-and-set, as ``claim_run``): a runtime whose
        run another one claimed since (its heartbeat went stale) never takes the row back.
        Returns the ids of the runs not saved for that (none without ``held_by``)."""

    @abstractmethod
    async def claim_run(
        self, snapshot: dict[str, Any], free: Callable[[dict[str, Any] | None], bool]
    ) -> tuple[bool, dict[str, Any] | None]:
        """Save ``snapshot`` if ``free`` says yes of what the store holds for its run (its
        snapshot, or None), as one step: no save of that run, by any process, comes between
        the read and the write (a compare-and-set: of two claims of one run at once, the
        second is given the first's snapshot). Returns whether it was saved, and the stored
        snapshot ``free`` was given. ``free`` only looks at the snapshot (it runs while the
        run's row is held)."""

    @abstractmethod
    async def release_run(self, run_id: str, owner: str, previous: dict[str, Any] | None) -> bool:
        """Give back ``owner``'s claim of run ``run_id`` (``claim_run``: a start that failed
        after it), as one step and only while the row still names ``owner``: put back
        ``previous``, the snapshot the claim replaced (as ``claim_run`` returned it, heard
        as long ago as it was then), or delete the row when the claim replaced none.
        Returns whether it did."""

    # ------------------------------------------------------------------ thread holds

    async def hold_thread(
        self,
        tenant_id: str,
        thread_id: str,
        run_id: str,
        free: Callable[[dict[str, Any] | None], bool],
        *,
        owner: str | None = None,
    ) -> tuple[bool, dict[str, Any] | None]:
        """Name run ``run_id`` the holder of ``thread_id`` (of ``tenant_id``: thread ids are
        each tenant's own) unless another run holds it and ``free`` says no of that holder,
        as one step across every process sharing the store (a compare-and-set, as
        ``claim_run``: of two takers at once, the second is given the first as its holder).
        ``free`` is given the holding run's snapshot (with ``SILENCE_S`` where the store
        keeps one), or, when that run has no row yet, the hold as ``unsaved_holder``
        describes it (``owner``, the runtime taking it, and when); it only looks (it runs
        while the hold is locked). Returns whether ``run_id`` holds the thread now, and
        the holder found (None: none, or ``run_id`` itself). Whether a holder is still alive is ``free``'s to
        say (the runtime judges its run's owner as it judges a claimed run's: heartbeat,
        process gone). This default holds nothing across processes (a store of one process:
        the runtime's own hold is the only one)."""
        return True, None

    async def thread_holder(self, tenant_id: str, thread_id: str) -> dict[str, Any] | None:
        """The snapshot of the run holding ``thread_id`` of ``tenant_id`` (``hold_thread``:
        ``unsaved_holder`` when that run has no row, or its row says it finished before the
        hold was taken: ``judged_holder``), or None."""
        return None

    async def let_go_of_thread(self, tenant_id: str, thread_id: str, run_id: str) -> bool:
        """Run ``run_id`` no longer holds ``thread_id`` of ``tenant_id``: its hold is deleted,
        as one step and only while it is still that run's (a holder that took over a dead
        one's hold keeps it). Returns whether it did."""
        return False

    @abstractmethod
    async def load_runs(self, *, tenant_id: str | None = None) -> list[dict[str, Any]]:
        """Every run snapshot (of ``tenant_id``, or of every tenant), in the order first
        saved. For a listing an operator pages through, use ``list_runs``."""

    async def list_runs(
        self,
        *,
        tenant_id: str | None = None,
        statuses: Sequence[str] = (),
        root_run_id: str | None = None,
        before: RunKey | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """At most ``limit`` run snapshots, newest first by ``run_key``, each older than
        ``before`` (a keyset: a walk that passes the last key of each page sees every run
        once, however many are saved meanwhile), filtered by tenant, status (any of
        ``statuses``; none: every status) and tree.

        The backends here answer it with one indexed query; this fallback, for a backend
        that predates it, reads every snapshot of the tenant."""
        return newest_runs(
            await self.load_runs(tenant_id=tenant_id),
            limit=limit,
            statuses=statuses,
            root_run_id=root_run_id,
            before=before,
        )

    @abstractmethod
    async def run_commands(
        self, run_id: str, *, states: tuple[str, ...] = ("applied",)
    ) -> list[StoredCommand]:
        """The commands logged for ``run_id`` whose state is one of ``states``, in log order
        (a restarted run re-applies what its earlier incarnation applied). Commands that no
        longer read as commands are left out."""

    @abstractmethod
    async def load_run(self, run_id: str) -> dict[str, Any] | None:
        """One run's snapshot, or None."""

    @abstractmethod
    async def read_events(
        self,
        *,
        after_id: int = 0,
        tenant_id: str | None = None,
        run_id: str | None = None,
        root_run_id: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[int, Event]]:
        """Event-log rows with id > ``after_id``, in id order, as (id, event): at most
        ``limit``, filtered by tenant, run and tree. Ids only grow (they are SSE ids). A row
        that no longer reads as an event is left out, and the page is filled from the rows
        after it: a short page means there are no more rows."""

    async def last_events(
        self,
        *,
        before_id: int | None = None,
        tenant_id: str | None = None,
        run_id: str | None = None,
        root_run_id: str | None = None,
        limit: int = 1000,
        type_prefix: str | None = None,
    ) -> list[tuple[int, Event]]:
        """The last ``limit`` event-log rows with id < ``before_id`` (None: up to the newest),
        in id order, as (id, event), filtered by tenant, run and tree (and by ``type_prefix``
        as ``load_events`` is: a run's latest ``steering.`` events): ``read_events`` read
        from the other end (a run's latest events, and the page before them). A row that no
        longer reads as an event is left out, and the page filled from the rows before it.

        The backends here answer it reading back from ``before_id``, one indexed query a
        page; this fallback, for a backend that predates it, reads the log from its start."""
        last: deque[tuple[int, Event]] = deque(maxlen=max(limit, 0))
        after = 0
        while limit > 0:
            page = await self.read_events(
                after_id=after,
                tenant_id=tenant_id,
                run_id=run_id,
                root_run_id=root_run_id,
                limit=1000,
            )
            last.extend(
                row
                for row in page
                if (before_id is None or row[0] < before_id)
                and (type_prefix is None or row[1].type.startswith(type_prefix))
            )
            if len(page) < 1000 or (before_id is not None and page[-1][0] >= before_id):
                break
            after = page[-1][0]
        return list(last)

    # ------------------------------------------------------------------ nonces

    @abstractmethod
    async def claim_nonce(self, nonce: str, *, expires_at: datetime) -> bool:
        """Record ``nonce`` as used, as one step: True for its first claim among every
        process sharing the store, False for each claim after (and nothing changed). A nonce
        is kept until ``NONCE_MARGIN_S`` past ``expires_at`` (a single-use credential's own
        expiry, which its holder checks first), then forgotten: each claim sweeps out those.
        Raises ``StoreError`` when the write fails; then it is not claimed."""

    # ------------------------------------------------------------------ inbox

    @abstractmethod
    async def inbox_put(self, *, owner: str, request_id: str, command: SteeringCommand) -> None:
        """Address ``command`` to the runtime ``owner``; durable when this returns. A second
        put under the same ``request_id`` changes nothing. ``InvalidCommandError``, and
        nothing put, for a command whose JSON is over ``MAX_COMMAND_BYTES`` (``sendable``:
        a store that writes JSON checks the size of the text it writes, made once)."""

    @abstractmethod
    async def inbox_take(self, owner: str, *, limit: int = 100) -> list[InboxItem]:
        """Claim up to ``limit`` items for ``owner``, oldest first, atomically: two pollers
        never both get one. An item is ``owner``'s when it is addressed to ``owner`` and was
        never taken, or its lease (``INBOX_LEASE_S`` since its last take, unanswered) ran
        out; or when it targets a run whose snapshot names ``owner`` and it waited (untaken,
        or since its last take) longer than ``INBOX_LEASE_S``: the run's dead owner left it.
        A claimed item is addressed to ``owner`` from then on, under a new lease. A store
        shared by machines (PostgreSQL) times leases by its own clock, never by comparing the
        taker's clock with times another machine wrote. A row that
        no longer reads as a command is answered ``rejected`` with the reason instead of being
        returned (``answer_unreadable``: an answer that fails is logged, and the batch's other
        rows are returned all the same)."""

    @abstractmethod
    async def inbox_answer(self, request_id: str, receipt: SteeringReceipt) -> None:
        """Record the receipt of a taken item (its submitter reads it with ``inbox_receipt``)."""

    @abstractmethod
    async def inbox_receipt(self, request_id: str) -> SteeringReceipt | None:
        """The receipt of an answered item; None while it waits (or for an unknown id)."""


checked_lookups(Store)

#: Where a run sits in a listing: (created_at as ISO text, run_id), compared as code points.
RunKey = tuple[str, str]


#: The keys every saved snapshot has (its row's columns are filled from them).
_SNAPSHOT_IDS = ("run_id", "root_run_id", "tenant_id", "status")
_TEXT = (str, type(None))
_LIST = (list, type(None))
#: Other keys of a snapshot (``RunInfo.snapshot``, ``LiveRuns.snapshot``) whose type a
#: reader (``tinyagents runs``, the server) relies on, and the type of a list's items; the
#: rest (timestamps, depth, kind) a reader prints as it finds them.
_SNAPSHOT_FIELDS: dict[str, tuple[tuple[type, ...], tuple[type, ...] | None]] = {
    **dict.fromkeys(
        ("parent_run_id", "thread_id", "agent_id", "task_id", "node_id"), (_TEXT, None)
    ),
    "limits": ((dict, type(None)), None),
    "usage": ((dict, type(None)), None),
    "tools": (_LIST, (str,)),
    "models": (_LIST, (str,)),
    "accepts": (_LIST, (str,)),
    "pending_commands": (_LIST, (dict,)),
    "interrupts": (_LIST, (dict,)),
}


def read_snapshot(
    text: str | bytes, run_id: str | None = None, tenant_id: str | None = None
) -> dict[str, Any]:
    """A run snapshot read back from a store; ``DamagedData`` (a ``StoreError`` and a
    ``ValueError``) for one that is not JSON (or not UTF-8), or is JSON of another shape (not an object, without the run's ids as text, a
    known field of the wrong type): a damaged row is the store's error to report, never a
    ``KeyError`` or ``TypeError`` in whoever reads it; an ``updated_at`` or ``created_at``
    that is neither null nor an ISO time (``snapshot_time``) is damage too. ``run_id`` is the row's key: the
    error names it, the one row to repair, whatever the damage (a listing reads thousands).
    ``tenant_id``, the row's tenant column: the error says whose the record is (else the
    snapshot's own ``tenant_id`` when that still reads), for a reader that must not tell
    another tenant the run exists (the operator API)."""
    of = f"run snapshot of {run_id!r}" if run_id is not None else "run snapshot"
    snapshot: Any = None

    def damaged(why: str) -> DamagedData:
        inner = snapshot.get("tenant_id") if isinstance(snapshot, dict) else None
        whose = tenant_id or (inner if isinstance(inner, str) and inner else None)
        return DamagedData(f"{of}: {why}", record=of, tenant_id=whose)

    try:
        snapshot = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except UnicodeDecodeError:
        raise damaged("it is not UTF-8 text") from None
    except ValueError as exc:
        raise damaged(f"it is not JSON ({exc})") from None
    except RecursionError:  # no ValueError: nested deeper than the reader goes
        raise damaged("it is JSON nested too deep to read") from None
    if not isinstance(snapshot, dict):
        raise damaged(f"it is JSON but no object, got {type(snapshot).__name__}")
    problem = _snapshot_problem(snapshot)
    if problem is not None:
        if isinstance(snapshot.get("run_id"), str):
            of = f"run snapshot of {run_id or snapshot['run_id']!r}"
        raise damaged(problem)
    return snapshot


def _snapshot_problem(snapshot: dict[str, Any]) -> str | None:
    """What is wrong with the shape of ``snapshot`` (``read_snapshot``), or None."""
    for key in _SNAPSHOT_IDS:
        if not isinstance(snapshot.get(key), str):
            return f"no {key!r} as text"
    for key, (types, items) in _SNAPSHOT_FIELDS.items():
        if key not in snapshot:
            continue
        value = snapshot[key]
        if not isinstance(value, types) or (
            items is not None and not all(isinstance(i, items) for i in snapshot[key] or ())
        ):
            return f"{key} is {repr(value)[:200]}"
    for key in ("updated_at", "created_at"):
        # updated_at, its owner's heartbeat: one that is no time was read as none, so a run
        # whose owner was gone never showed silent (its commands went to a dead inbox);
        # created_at places it in a listing and makes a page's cursor (refused if no time)
        at = snapshot.get(key)
        if at is not None and (not isinstance(at, str) or snapshot_time(at) is None):
            return f"{key} is {repr(at)[:200]}, no ISO time"
    return None


def check_snapshots(snapshots: Iterable[dict[str, Any] | None]) -> None:
    """Refuse (``ArgumentError``, a ``ValueError``) to save a run snapshot ``read_snapshot``
    would report as damaged: a store's ``save_runs``, ``claim_run`` and ``release_run`` check
    every snapshot first, so a batch with one wrong is saved not at all. A ``created_at`` of
    ``"yesterday"`` was stored, and every read of the run was ``DamagedData`` after."""
    for snapshot in snapshots:
        if snapshot is None:
            continue
        if not isinstance(snapshot, dict):
            raise ArgumentError(
                f"a run snapshot is a dict (RunInfo.snapshot()), got {type(snapshot).__name__}"
                "; nothing was saved"
            )
        problem = _snapshot_problem(snapshot) or _ids_problem(snapshot)
        if problem is not None:
            rid = snapshot.get("run_id")
            of = (
                f"run snapshot of {shown_id(repr(rid))}" if isinstance(rid, str) else "run snapshot"
            )
            raise ArgumentError(f"{of}: {problem}; nothing was saved")


def _ids_problem(snapshot: dict[str, Any]) -> str | None:
    """Which id of ``snapshot`` no run can have, and why, or None. Checked as a lookup
    reads an id (``id_problem(stored=True)``): a run saved before the rule refused bidi and
    zero-width characters is saved again. The backends took different ones (the memory store
    a NUL, a newline and a lone surrogate, SQLite all but the surrogate, PostgreSQL neither
    NUL nor surrogate), and the refusals were their drivers' errors."""
    for key in (*_SNAPSHOT_IDS[:3], "parent_run_id", "thread_id"):
        value = snapshot.get(key)
        if not isinstance(value, str):  # (the ids are text: ``_snapshot_problem`` said so)
            continue
        if key == "thread_id" and value == "" and snapshot.get("kind") == "graph":
            continue  # a graph run that saves nothing has no thread (``GraphSession``)
        if not value.strip():
            return f"{key} is blank"
        problem = id_problem(value, stored=True)
        if problem is None and not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:
                problem = "holds a lone surrogate, which no store can write"
        if problem is not None:
            return f"{key} {shown_id(repr(value))} breaks the id rule: {problem}"
    return None


#: How many damaged rows a reader (``Control``, a store's listings) remembers having warned
#: of (``WarnedRows``).
MAX_WARNED_ROWS = 1024


class WarnedRows:
    """The keys of the damaged rows already warned of, the ``limit`` newest (one memory of
    this kind for every reader that warns: ``Control``, the SQL stores' listings): each is
    logged once, not at every read (a console polling the run wrote a line a second), in bounded
    memory (a key forgotten, the oldest first, is warned of again when it is next read)."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self._keys: dict[str, None] = {}  # (in the order warned of: the oldest first)

    def first(self, key: str) -> bool:
        """Whether ``key`` is not remembered; it is from now on."""
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > self.limit:
            del self._keys[next(iter(self._keys))]
        return True

    def forget(self, key: str) -> None:
        """``key``'s row reads again (repaired): damaged again, it is warned of again."""
        self._keys.pop(key, None)

    def __len__(self) -> int:
        return len(self._keys)


#: The ``error.type`` of a listed run whose stored snapshot could not be read.
DAMAGED_SNAPSHOT = "damaged_snapshot"


def damaged_run(
    *, run_id: str, root_run_id: str, tenant_id: str, status: str, created_at: str, problem: str
) -> dict[str, Any]:
    """What a listing shows of a run whose stored snapshot ``read_snapshot`` refused: the
    row's own columns (it keeps its place and its filters) and an ``error`` saying what is
    wrong, so one damaged row neither hides the others nor fails the whole listing."""
    return {
        "run_id": run_id,
        "root_run_id": root_run_id,
        "parent_run_id": None,
        "tenant_id": tenant_id,
        "status": status,
        "created_at": created_at,
        "error": {"type": DAMAGED_SNAPSHOT, "message": problem},
    }


def run_key(snapshot: dict[str, Any]) -> RunKey:
    """The listing key of a snapshot (newest first is descending)."""
    return (str(snapshot.get("created_at") or ""), str(snapshot["run_id"]))


#: The key a store that keeps a clock of its own (PostgreSQL) adds to the snapshots it reads:
#: how many seconds ago, by that one clock, it was written (its heartbeat's age as written
#: subtracted). Owner silence is judged by it (``steering.remote.owner_silent``), not by
#: comparing the owner's clock with the reader's: two machines' clocks differ. Never saved.
SILENCE_S = "silence_s"


def unsaved_holder(
    run_id: str, owner: str | None, taken_at: str | None, silence_s: float | None = None
) -> dict[str, Any]:
    """A thread's holder whose run has no row yet (a graph run holds its thread before its
    first snapshot is saved), as its hold describes it: unfinished, owned by the runtime that
    took the hold, heard when it was taken (``silence_s``: that many seconds ago by the
    store's clock, where it keeps one), so it is judged as a claimed run is: live while that
    runtime is, held by nothing once it is gone or silent. A hold taken with no owner is
    ``{"run_id": ...}`` alone: it holds nothing."""
    if owner is None:
        return {"run_id": run_id}
    held: dict[str, Any] = {
        "run_id": run_id,
        "status": "running",
        "owner": owner,
        "updated_at": taken_at,
    }
    if silence_s is not None:
        held[SILENCE_S] = float(silence_s)
    return held


def judged_holder(
    snapshot: dict[str, Any] | None,
    run_id: str,
    owner: str | None,
    taken_at: str | None,
    silence_s: float | None = None,
    *,
    taken_since: bool | None = None,
) -> dict[str, Any]:
    """A thread's holder as a store reads it: its run's ``snapshot``, or ``unsaved_holder``
    when the run has no row, and also when the row says the run finished before the hold was
    taken (``taken_since``, or, when None, the hold's ``taken_at`` later than the row's
    ``updated_at``): a run continued under its id (a graph run resumed) holds its thread
    from the start, where its old row said it held nothing until its first snapshot. A hold
    taken before its run's row said finished (a let-go that failed) is read by the row."""
    if snapshot is None:
        return unsaved_holder(run_id, owner, taken_at, silence_s)
    if owner is None or snapshot.get("status") in UNFINISHED_RUN_STATUSES:
        return snapshot
    if taken_since is None:
        taken, updated = snapshot_time(taken_at), snapshot_time(snapshot.get("updated_at"))
        taken_since = taken is not None and updated is not None and taken > updated
    return unsaved_holder(run_id, owner, taken_at, silence_s) if taken_since else snapshot


def snapshot_time(value: object) -> datetime | None:
    """A time of a run snapshot (its ``updated_at``, ``created_at``): an ISO string (or a
    ``datetime``) read as UTC when it names no zone, or None for anything else, or text that
    is no time. Every reader of a snapshot's times reads them so."""
    if isinstance(value, datetime):
        at = value
    elif isinstance(value, str):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def heartbeat_age(snapshot: dict[str, Any]) -> float | None:
    """How old ``snapshot``'s ``updated_at`` is by the writer's own clock (the one that
    stamped it; 0 for a time in its future), or None without a readable one: a store
    stamping the write by its clock subtracts this, so a heartbeat written late (a retried
    write, a snapshot saved by hand with an old time) is as old in the store as it was."""
    at = snapshot_time(snapshot.get("updated_at"))
    return None if at is None else max(0.0, (_clock.now() - at).total_seconds())


def runs_match(
    snapshot: dict[str, Any],
    *,
    tenant_id: str | None = None,
    statuses: Sequence[str] = (),
    root_run_id: str | None = None,
    before: RunKey | None = None,
) -> bool:
    """Whether ``snapshot`` belongs in a ``list_runs`` answer with these filters."""
    return (
        (tenant_id is None or snapshot.get("tenant_id") == tenant_id)
        and (not statuses or snapshot.get("status") in statuses)
        and (root_run_id is None or snapshot.get("root_run_id") == root_run_id)
        and (before is None or run_key(snapshot) < before)
    )


def newest_runs(
    snapshots: Iterable[dict[str, Any]], *, limit: int | None, **filters: Any
) -> list[dict[str, Any]]:
    """The ``snapshots`` that match ``filters`` (``runs_match``), newest first, at most
    ``limit`` (a listing answered in memory)."""
    rows = (s for s in snapshots if runs_match(s, **filters))
    if limit is None:
        return sorted(rows, key=run_key, reverse=True)
    return heapq.nlargest(limit, rows, key=run_key)


def stored_reason(reason: str | None) -> str | None:
    """A command's reason as the steering log's text holds it on every store: a lone
    surrogate (half a UTF-16 pair, in an error from a model's or a tool's text), which UTF-8
    cannot encode, is its ``\\uXXXX`` escape spelled out (``surrogates_escaped``); SQLite
    and PostgreSQL refused the write settling it, events and all."""
    if reason is None or reason.isascii():
        return reason
    return surrogates_escaped(reason)


def terminal_updates(events: list[Event]) -> list[tuple[str, str, str, str | None]]:
    """The steering-log state changes a batch of events implies: (scope, id, state, reason)."""
    updates: list[tuple[str, str, str, str | None]] = []
    for e in events:
        if isinstance(e, SteeringEvent):
            state = CommandState(e.type.removeprefix("steering."))
            if state.terminal:
                updates.append((dedupe_scope(e.actor), e.correlation_id, state.value, e.reason))
    return updates


def readable_events(rows: Iterable[tuple[int, str | bytes]]) -> list[tuple[int, Event]]:
    """The (id, event) of event-log rows (id, JSON), leaving out, with a warning, a row
    that no longer reads as an event (damaged, or of a type a newer version wrote): one
    such row must not stop every reader of the log at it."""
    events: list[tuple[int, Event]] = []
    for event_id, data in rows:
        try:
            events.append((event_id, parse_event(data)))
        except ValueError as exc:  # pydantic's ValidationError (JSON or schema)
            _log.warning(
                "event log row %s does not read as an event, left out: %s",
                event_id,
                _first_line(exc),
            )
    return events


#: The largest integer SQLite's INTEGER and PostgreSQL's BIGINT hold.
_INT64_MAX = 2**63 - 1


def sql_int(n: int) -> int:
    """``n`` as a database integer holds it: a number past either end reads as that end (an
    ``after_id`` past every id, a ``limit`` of everything), as the memory store reads it;
    given as it is, SQLite raised Python's ``OverflowError`` and PostgreSQL refused it."""
    return min(max(n, -_INT64_MAX - 1), _INT64_MAX)


async def read_page(
    fetch: Callable[[int, int], Awaitable[list[tuple[int, str | bytes]]]],
    after_id: int,
    limit: int,
) -> list[tuple[int, Event]]:
    """A page of at most ``limit`` readable events after ``after_id``, from ``fetch(after_id,
    n)`` (at most ``n`` raw rows, in id order): rows left out as unreadable are made up from
    the rows after them, so a short page still means there are no more."""
    events: list[tuple[int, Event]] = []
    after_id, limit = sql_int(after_id), sql_int(limit)
    while (want := limit - len(events)) > 0:
        rows = await fetch(after_id, want)
        events += readable_events(rows)
        if len(rows) < want:
            break
        after_id = rows[-1][0]
    return events


async def read_last_page(
    fetch: Callable[[int | None, int], Awaitable[list[tuple[int, str | bytes]]]],
    before_id: int | None,
    limit: int,
) -> list[tuple[int, Event]]:
    """``read_page`` backwards, for ``last_events``: the last ``limit`` readable events
    before ``before_id``, from ``fetch(before_id, n)`` (at most ``n`` raw rows before it,
    newest first), in id order; rows left out as unreadable are made up from older ones."""
    events: list[tuple[int, Event]] = []
    while (want := limit - len(events)) > 0:
        rows = await fetch(before_id, want)
        events += readable_events(rows)
        if len(rows) < want:
            break
        before_id = rows[-1][0]
    events.reverse()
    return events


def target_run_id(cmd: SteeringCommand) -> str | None:
    """The run ``cmd`` targets (None for a thread): whose new owner may take its inbox item."""
    return None if isinstance(cmd.target, ThreadTarget) else cmd.target.run_id


def unreadable_receipt(request_id: str, exc: Exception) -> SteeringReceipt:
    """The answer to an inbox row whose command no longer reads as one."""
    return SteeringReceipt(
        status=ReceiptStatus.REJECTED,
        correlation_id=request_id,
        reason=f"unreadable in the inbox: {_first_line(exc)}",
        policy_id="store",
    )


def read_receipt(request_id: str, text: str) -> SteeringReceipt:
    """The receipt an owner wrote for inbox request ``request_id``; ``StoreError`` when it
    does not read as one (written by another version of the owner): the command may have
    been taken, so the sender is told how to learn its outcome, not that it was refused."""
    try:
        return SteeringReceipt.model_validate_json(text)
    except ValueError as exc:
        raise StoreError(
            f"the receipt of inbox request {shown_id(request_id)} does not read as one "
            f"({_first_line(exc)}): send the command again with the same correlation id to "
            "learn its outcome ('duplicate' if it was taken)"
        ) from exc


async def answer_unreadable(store: Store, request_id: str, exc: Exception) -> None:
    """Answer an inbox row that ``inbox_take`` took but cannot read (``unreadable_receipt``).
    A failed answer is logged, never raised: the readable rows of the batch are taken too,
    and a take that raised would strand them until their lease ran out."""
    try:
        await store.inbox_answer(request_id, unreadable_receipt(request_id, exc))
    except StoreError as error:
        _log.warning(
            "inbox request %s is unreadable and could not be answered: %s", request_id, error
        )


async def taken_items(store: Store, owner: str, rows: Iterable[Any]) -> list[InboxItem]:
    """``inbox_take``'s answer from the rows its claim returned, (position, request id,
    command JSON, submitted at: a ``datetime``, or ISO text), in the order put (by position:
    RETURNING has no order). A row that no longer reads as a command is answered
    (``answer_unreadable``) instead of being returned."""
    items: list[InboxItem] = []
    for _, request_id, command, submitted_at in sorted(rows):
        try:
            cmd = SteeringCommand.model_validate_json(command)
        except ValueError as exc:  # written by an older version, or damaged
            await answer_unreadable(store, request_id, exc)
            continue
        if isinstance(submitted_at, str):
            submitted_at = datetime.fromisoformat(submitted_at)
        items.append(
            InboxItem(request_id=request_id, owner=owner, command=cmd, submitted_at=submitted_at)
        )
    return items


def unreadable_reason(exc: Exception) -> str:
    """The reason a stored command that no longer validates is marked failed with."""
    return f"unreadable in the steering log, not restored: {_first_line(exc)}"


def log_row(
    cmd: SteeringCommand,
    *,
    state: str,
    run_id: str | None,
    owner: str | None = None,
    thread_id: str | None = None,
) -> tuple[Any, ...]:
    """The steering-log columns of a command ``append_command`` logs, (scope, correlation id,
    run id, state, command JSON, created at as ISO text, owner, thread id): a durable store
    keys its row by the first two (``dedupe_scope``). The thread is the target's own when it
    is a thread (``thread_id`` else)."""
    if isinstance(cmd.target, ThreadTarget):
        thread_id = cmd.target.thread_id
    return (
        dedupe_scope(cmd.actor),
        cmd.correlation_id,
        run_id,
        state,
        cmd.model_dump_json(),
        cmd.created_at.isoformat(),
        owner,
        thread_id,
    )


#: The steering-log columns ``stored_command`` reads, in its order.
LOG_COLUMNS = "command, state, run_id, reason, owner, thread_id"


def stored_command(row: Sequence[Any], age: Any = None) -> StoredCommand:
    """A steering-log row read back, (``LOG_COLUMNS``: command JSON, state, run id, reason,
    owner, thread id), with its age in seconds from a store that keeps a clock of its own
    (``StoredCommand.age_s``); ``ValueError`` (pydantic's ``ValidationError``,
    ``InvalidCommandError``) when the command no longer validates (written by an older
    version, or damaged)."""
    return StoredCommand(
        command=SteeringCommand.model_validate_json(row[0]),
        state=row[1],
        run_id=row[2],
        reason=row[3],
        owner=row[4],
        thread_id=row[5],
        age_s=None if age is None else float(age),
    )


def logged_command(correlation_id: str, row: Sequence[Any], age: Any = None) -> StoredCommand:
    """``get_command``'s answer from the row logged under ``correlation_id``
    (``stored_command``); ``StoreError`` naming the command when it no longer reads as one."""
    try:
        return stored_command(row, age)
    except ValueError as exc:
        raise StoreError(
            f"command {shown_id(repr(correlation_id))}: {unreadable_reason(exc)}"
        ) from exc


async def open_logged(store: Store, rows: Iterable[Sequence[Any]], log: str) -> list[StoredCommand]:
    """``open_commands``' answer from the rows of the open commands in log order,
    (``LOG_COLUMNS``, scope, correlation id): those that read as commands. Each
    other one is marked ``failed`` with the reason (``set_command_states``) and a warning
    naming the steering ``log``, so it never blocks the rest."""
    readable: list[StoredCommand] = []
    broken: list[tuple[str, str, str, str | None]] = []
    for row in rows:
        try:
            readable.append(stored_command(row))
        except ValueError as exc:  # pydantic's ValidationError and InvalidCommandError
            reason = unreadable_reason(exc)
            _log.warning("steering log %s: command %r %s", log, row[7], reason)
            broken.append((row[6], row[7], "failed", reason))
    if broken:
        await store.set_command_states(broken)
    return readable


def readable_commands(rows: Iterable[Sequence[Any]]) -> list[StoredCommand]:
    """``run_commands``' answer from its rows (``stored_command``; a row's seventh column,
    if any, is its age by the store's clock), leaving out those that no longer read as
    commands: an older version's, or damaged, they have nothing to re-apply."""
    commands: list[StoredCommand] = []
    for row in rows:
        try:
            commands.append(stored_command(row, row[6] if len(row) > 6 else None))
        except ValueError:
            continue
    return commands


#: SQLite result codes a later attempt may not meet: BUSY, LOCKED, IOERR, FULL.
_PASSING_SQLITE_CODES = frozenset({5, 6, 10, 13})
#: Unwritable events logged one by one before the writer only counts them.
_REPORT_LIMIT = 20
#: How often the store writer says how many events it dropped while the store refuses events
#: (``StoreWriter``), in seconds.
_REFUSED_SUMMARY_S = 60.0

_T = TypeVar("_T")


#: How many times ``written_again`` tries a write again, and its pause before the first retry
#: (doubled for each next one): the pool learns meanwhile of the other connections the
#: server ended with the first (a failover ends them all, and each fails its next use).
WRITE_AGAIN = 2
WRITE_AGAIN_AFTER_S = 0.05


async def written_again(write: Callable[[], Awaitable[_T]]) -> _T:
    """``write()``, called again (``WRITE_AGAIN`` times at most) while it raises a
    ``StoreError`` that may pass. Only for a write its caller may repeat: the steering log's
    router takes over a row whose first write committed and lost its reply."""
    for attempt in range(WRITE_AGAIN):
        try:
            return await write()
        except StoreError as exc:
            if not may_pass(exc):
                raise
        await asyncio.sleep(WRITE_AGAIN_AFTER_S * 2**attempt)
    return await write()


def events_json(events: Sequence[Event], store: str) -> list[str]:
    """Each event's JSON text for a durable store (a lone surrogate, which UTF-8 cannot
    hold, is its ``\\uXXXX`` escape: ``Event.to_json``), or ``StoreError`` ("<store>: could not
    append N event(s): ...") when one cannot be encoded (an object JSON cannot hold), before
    anything is written."""
    try:
        return [e.to_json() for e in events]
    except ValueError as exc:  # pydantic's PydanticSerializationError is one
        raise StoreError(
            f"{store}: could not append {len(events)} event(s): {_first_line(exc)}"
        ) from exc


def event_rows(events: Sequence[Event], store: str) -> list[tuple[Any, ...]]:
    """The event-log rows of ``events``, (type, run id, root run id, tenant id, JSON text),
    as a durable store writes them; ``StoreError`` from ``events_json`` when one cannot be
    encoded, before anything is written."""
    return [
        (e.type, e.run_id, e.root_run_id, e.tenant_id, data)
        for e, data in zip(events, events_json(events, store), strict=True)
    ]


def may_pass(exc: BaseException) -> bool:
    """Whether a failed write may succeed when tried again unchanged: a lock another
    connection held past the busy timeout, an I/O error, a full disk, a lost connection."""
    seen: BaseException | None = exc
    for _ in range(8):  # the error itself and what it was raised from
        if seen is None:
            break
        # Read from sys.modules: a program that never opened a SQLite file has no such error
        # (and import tinyagents does not load sqlite3 for this check).
        sqlite3 = sys.modules.get("sqlite3")
        if sqlite3 is not None and isinstance(seen, sqlite3.Error):
            code = getattr(seen, "sqlite_errorcode", None)
            return code is not None and code & 0xFF in _PASSING_SQLITE_CODES
        if isinstance(seen, OSError):  # ConnectionError and TimeoutError too
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _json_holds(event: Event) -> bool:
    """Whether JSON holds ``event`` (any text does: a lone surrogate is its ``\\uXXXX``
    escape, ``Event.to_json``), as every store can then take it; not an object in a dict.
    The writer tells by it a store that refuses every event from one event it cannot take."""
    try:
        event.to_json()
    except Exception:  # not even pydantic can serialize it (an object JSON cannot hold)
        return False
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _root_line(exc: BaseException) -> str:
    """The first line of what ``exc`` was raised from at the bottom (the driver's words, the
    same for a batch of any size)."""
    for _ in range(8):
        if exc.__cause__ is None:
            break
        exc = exc.__cause__
    return _first_line(exc)


class StoreWriter:
    """A bus sink that batches events into the store (events may be batched; accepted commands
    are written by the router before their receipt, not here).

    It never stops persisting. A write that fails for a reason that may pass (a lock another
    connection holds, I/O, a full disk) is retried with exponential backoff capped at
    ``retry_max_s``. A batch that fails for any other reason is split until the event at
    fault is found: one JSON cannot hold (an object in a dict) is skipped (``dropped``) and
    logged once; one it holds is tried once more alone, as it is, and skipped when that fails
    otherwise. A store that refuses such an event again, the same way, refuses events, not
    that one (its table gone, a permission revoked: JSON holds any text, a lone surrogate as
    its escape): the writer says so once, then drops every batch that fails the same
    way whole (counted, runs never wait for it), says every ``_REFUSED_SUMMARY_S`` how many
    it dropped, and says when the store takes events again.
    ``errors`` counts failed write attempts. The terminal steering events written settle
    their commands in the steering log.

    The buffer is bounded: once it holds ``max_buffer`` events, new events are dropped (and
    counted) — except steering events, which are always kept: their terminal ones settle the
    log, and the others tell how a command got there. Closing retries a write that keeps
    failing ``close_attempts`` more times, then drops what is left with a log line: ``aclose``
    never raises for a write error.
    """

    def __init__(
        self,
        store: Store,
        *,
        flush_every_s: float = 0.05,
        max_batch: int = 1000,
        max_buffer: int = 100_000,
        retry_first_s: float = 0.05,
        retry_max_s: float = 2.0,
        close_attempts: int = 5,
    ) -> None:
        self.store = store
        self.flush_every_s = flush_every_s
        self.max_batch = max_batch
        self.max_buffer = max_buffer
        self.retry_first_s = retry_first_s
        self.retry_max_s = retry_max_s
        self.close_attempts = close_attempts
        #: Events never written: unwritable (JSON cannot hold them, or the store refuses
        #: them), past the buffer bound, or left when
        #: closing gave up on a store that kept failing.
        self.dropped = 0
        #: Failed write attempts, retried ones included.
        self.errors = 0
        self._buffer: list[Event] = []
        self._wakeup = asyncio.Event()
        #: One flush at a time: a second one would write later events before a batch the
        #: first still retries.
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._given_up = False  # closing, and the store kept failing: drop what is left
        self._full = False  # dropping for the bound (logged once per episode)
        self._retrying = False  # in a streak of passing errors (logged once per streak)
        self._reported = 0
        #: What the store refuses every event with (the first line of its error), while it
        #: does; how many events were dropped since, and when that was last said.
        self._refusing: str | None = None
        self._refused = 0
        self._refused_said = 0.0

    def __call__(self, event: Event) -> None:
        if isinstance(event, ModelDeltaEvent):
            return  # a token for live readers: the model.response that follows holds it all
        if len(self._buffer) >= self.max_buffer and not isinstance(event, SteeringEvent):
            self.dropped += 1
            if not self._full:
                self._full = True
                _log.warning(
                    "store writer: %d events wait for the store; dropping new events other "
                    "than steering events until it catches up",
                    len(self._buffer),
                )
            return
        self._buffer.append(event)
        if len(self._buffer) >= self.max_batch:
            self._wakeup.set()

    def start(self) -> None:
        self._closing = self._given_up = False
        self._task = asyncio.create_task(self._run(), name="tinyagents-store-writer")

    async def _run(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.flush_every_s):
                    await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self.flush()
            except Exception:  # write errors are handled in flush; this is a bug: go on
                self.errors += 1
                _log.exception("store writer: unexpected error; still writing")

    async def flush(self) -> None:
        """Write the events buffered now, after a batch a flush under way (the writer's own)
        is still writing: the log keeps their order, and what was buffered before the call
        is stored when it returns. Never raises for a write error (see the counters)."""
        async with self._flushing:
            left = len(self._buffer)
            while left > 0 and self._buffer:
                batch = self._buffer[: min(left, self.max_batch)]
                del self._buffer[: len(batch)]
                left -= len(batch)
                await self._append(batch)  # settles the batch's commands in the same write
        if self._full and len(self._buffer) < self.max_buffer:
            self._full = False
            _log.warning("store writer: caught up; %d event(s) dropped so far", self.dropped)

    async def _append(self, events: list[Event]) -> None:
        """Write ``events`` in order, isolating those that can never be written (each is
        dropped, and counted)."""
        if self._given_up:
            self.dropped += len(events)
            return
        error = await self._attempt(self.store.append_events, events)
        if error is None:
            if self._refusing is not None:
                _log.warning(
                    "store writer: the store takes events again; %d event(s) dropped meanwhile",
                    self._refused,
                )
                self._refusing = None
            return
        if self._refusing is not None and _root_line(error) == self._refusing:
            self._drop_refused(len(events))  # the same refusal: not these events' fault
            return
        if may_pass(error):  # only when closing has used its attempts
            self._given_up = True
            self.dropped += len(events)
            _log.warning(
                "store writer: closing, and the store still fails (%s): dropping what is left",
                _first_line(error),
            )
            return
        if len(events) > 1:
            half = len(events) // 2
            await self._append(events[:half])
            await self._append(events[half:])
            return
        refused = False
        if _json_holds(events[0]):
            again = await self._attempt(self.store.append_events, events)
            if again is None:
                return
            refused = _root_line(again) == _root_line(error)
        if refused:
            # even an event any store can encode is refused: the store refuses events
            self._refusing, self._refused = _root_line(error), 0
            self._refused_said = time.monotonic()
            _log.warning(
                "store writer: the store refuses events (%s), not one of them: dropping "
                "them until it takes them again (counted in dropped)",
                _first_line(error),
            )
            self._drop_refused(1)
            return
        self.dropped += 1
        self._report(events[0], error, "dropped")

    def _drop_refused(self, count: int) -> None:
        self.dropped += count
        self._refused += count
        now = time.monotonic()
        if now - self._refused_said >= _REFUSED_SUMMARY_S:
            self._refused_said = now
            _log.warning(
                "store writer: still dropping events: %d since the store refused them (%s)",
                self._refused,
                self._refusing,
            )

    async def _attempt(
        self, write: Callable[[list[_T]], Awaitable[None]], items: list[_T]
    ) -> Exception | None:
        """Run one write, again and again while it fails for a reason that may pass (only
        ``close_attempts`` more times once closing); the error it finally failed with."""
        delay, attempts_closing = self.retry_first_s, 0
        while True:
            try:
                await write(items)
            except Exception as exc:
                self.errors += 1
                if not may_pass(exc):
                    return exc
                if self._closing:
                    attempts_closing += 1
                    if attempts_closing > self.close_attempts:
                        return exc
                if not self._retrying:
                    self._retrying = True
                    _log.warning("store writer: %s; retrying", _first_line(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_max_s)
            else:
                if self._retrying:
                    self._retrying = False
                    _log.info("store writer: writing again")
                return None

    def _report(self, event: Event, error: Exception, what: str) -> None:
        self._reported += 1
        if self._reported <= _REPORT_LIMIT:
            _log.warning(
                "store writer: %s event of run %s %s: %s",
                event.type,
                event.run_id,
                what,
                _first_line(error),
            )
        if self._reported == _REPORT_LIMIT:
            _log.warning("store writer: further unwritable events are only counted")

    async def aclose(self) -> None:
        """Write what is buffered, then stop; never raises for a write error (what could not
        be written is logged and counted). The loop is asked to stop, never cancelled: a
        flush cancelled between the event log and the state update would lose the batch it
        took from the buffer (its commands would stay open in the store for good)."""
        self._closing = True
        if self._task is not None:
            task, self._task = self._task, None
            self._wakeup.set()
            await asyncio.wait([task])
        await self.flush()
        if self.dropped:
            _log.warning(
                "store writer closed: %d event(s) dropped, %d failed write attempt(s)",
                self.dropped,
                self.errors,
            )
