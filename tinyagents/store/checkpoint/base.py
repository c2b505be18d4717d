"""The ``Checkpointer`` extension point: where graph threads keep their history.

A thread's history is a linear chain of checkpoints per namespace (``""`` for the graph,
``"node:task_id"`` for a sub-graph run), numbered by ``seq``. Each checkpoint holds either a
full snapshot of the channel values or the *delta* its superstep wrote; every
``snapshot_every``-th one is a snapshot, so loading replays a bounded number of deltas and
storage grows with what was written, not with steps times state size.

Besides checkpoints a backend stores *pending writes*: the result, interrupt and resume
records of tasks of a superstep that has not finished yet, keyed by the frontier they
belong to. They are what lets a resumed or restarted run skip the tasks that already
finished.

Two rules keep a thread's history from forking:

- ``put`` is compare-and-set: the record's ``parent_id`` must be the current head
  (``StaleCheckpointError`` otherwise);
- ``acquire`` gives a thread a single writer: a second owner gets ``ThreadBusy``, in this
  process (a lock table) and, for shared backends, in others (a lease); the shared backends
  fence every write by that lease, and ``delete_thread`` refuses a thread someone holds.

Values are JSON-able (see ``tinyagents.graph.state``); a backend must return what it was
given, as new objects.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Self

from tinyagents._record import Record
from tinyagents.errors import (
    ArgumentError,
    CheckpointerClosed,
    InvalidIdError,
    InvalidUpdateError,
    StoreError,
    ThreadBusy,
)
from tinyagents.protocol.ids import shown_id, shown_repr


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class CheckpointRecord(Record):
    """One checkpoint of one thread namespace, with JSON-able ``values``."""

    thread_id: str
    ns: str = ""
    checkpoint_id: str
    parent_id: str | None
    seq: int
    step: int
    snapshot: bool
    values: dict[str, Any]
    frontier: list[dict[str, Any]]
    frontier_id: str
    lineage: str
    source: str
    barriers: dict[str, list[str]] = field(default_factory=dict)
    tasks: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0

    def body(self) -> dict[str, Any]:
        """Everything but the key columns, as one JSON-able dict."""
        return {
            "values": self.values,
            "frontier": self.frontier,
            "frontier_id": self.frontier_id,
            "lineage": self.lineage,
            "barriers": self.barriers,
            "tasks": self.tasks,
            "written": self.written,
            "metadata": self.metadata,
        }

    @classmethod
    def from_row(
        cls, thread_id: str, ns: str, row: Any, *, with_values: bool = True
    ) -> CheckpointRecord:
        """A record from a database row of the columns ``ROW_COLUMNS`` (``body`` as JSON
        text, the shape ``body()`` gives); ``with_values=False`` leaves the values out."""
        checkpoint_id, parent_id, seq, step, snapshot, source, created_at, body = row
        data = _read_body(body, thread_id, ns, checkpoint_id)
        _check_columns(
            thread_id, ns, checkpoint_id, seq=seq, step=step, source=source, at=created_at
        )
        return cls(
            thread_id=thread_id,
            ns=ns,
            checkpoint_id=checkpoint_id,
            parent_id=parent_id,
            seq=seq,
            step=step,
            snapshot=bool(snapshot),
            source=source,
            created_at=created_at,
            values=data["values"] if with_values else {},
            frontier=data["frontier"],
            frontier_id=data["frontier_id"],
            lineage=data["lineage"],
            barriers=data.get("barriers", {}),
            tasks=data.get("tasks", []),
            written=data.get("written", []),
            metadata=data.get("metadata", {}),
        )


#: The parts of a checkpoint's body and the type each must be read back as (``body()``);
#: the first four are always written, the others by newer versions.
_BODY: dict[str, type] = {
    "values": dict,
    "frontier": list,
    "frontier_id": str,
    "lineage": str,
    "barriers": dict,
    "tasks": list,
    "written": list,
    "metadata": dict,
}
_BODY_REQUIRED = ("values", "frontier", "frontier_id", "lineage")


def _where(thread_id: str, ns: str) -> str:
    return f"thread {thread_id!r}" + (f" (namespace {ns!r})" if ns else "")


def _check_columns(
    thread_id: str, ns: str, checkpoint_id: str, *, seq: Any, step: Any, source: Any, at: Any
) -> None:
    """A ``StoreError`` naming the checkpoint for a key column no checkpointer wrote (SQLite
    keeps text in an INTEGER column): a step of 'abc' was a bare TypeError out of get_state."""
    for name, value, kinds in (
        ("seq", seq, int),
        ("step", step, int),
        ("source", source, str),
        ("created_at", at, (int, float)),
    ):
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise StoreError(
                f"checkpoint {checkpoint_id!r} of {_where(thread_id, ns)} no longer reads: its "
                f"{name} column holds {type(value).__name__} {value!r}"
            )


def _read_body(body: str | bytes, thread_id: str, ns: str, checkpoint_id: str) -> dict[str, Any]:
    """A checkpoint's body read back; one that is not what a checkpointer wrote (not JSON,
    JSON of another shape) is a ``StoreError`` naming the checkpoint: json's error, a
    ``KeyError`` or a ``TypeError`` came out of every read of the thread, naming nothing."""
    what = f"checkpoint {checkpoint_id!r} of {_where(thread_id, ns)}"
    try:
        data = json.loads(body)
    except ValueError as exc:  # UnicodeDecodeError too
        raise StoreError(f"{what} no longer reads: it is not JSON ({exc})") from None
    except RecursionError:  # no ValueError: nested deeper than the reader goes
        raise StoreError(f"{what} no longer reads: it is JSON nested too deep") from None
    if not isinstance(data, dict):
        raise StoreError(f"{what} no longer reads: a JSON {type(data).__name__}, not an object")
    for key, kind in _BODY.items():
        if key not in data and key in _BODY_REQUIRED:
            raise StoreError(f"{what} no longer reads: it has no {key!r}")
        if key in data and not isinstance(data[key], kind):
            raise StoreError(
                f"{what} no longer reads: its {key!r} is {type(data[key]).__name__}, "
                f"not {kind.__name__}"
            )
    return data


def read_write(
    thread_id: str, ns: str, frontier_id: str, task_id: str, kind: Any, key: str, value: Any
) -> WriteRecord:
    """A pending write read back from its row (every backend's reader); a value that is not
    JSON is a ``StoreError`` naming the write (json's error came out of ``get_writes``, naming
    nothing), and so is a kind not in ``WRITE_KINDS`` (the graph skipped it: a lost answer
    was asked for again)."""
    if kind not in WRITE_KINDS:  # bytes too (SQLite keeps a BLOB in a TEXT column)
        raise StoreError(
            f"pending write of task {task_id!r} of {_where(thread_id, ns)}, frontier "
            f"{frontier_id!r}, no longer reads: its kind column holds {kind!r}, which no "
            f"checkpointer writes ({', '.join(sorted(WRITE_KINDS))})"
        )
    try:
        loaded = json.loads(value)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the reader
        raise StoreError(
            f"pending write of task {task_id!r} ({kind}) of {_where(thread_id, ns)}, frontier "
            f"{frontier_id!r}, no longer reads: it is not JSON ({exc})"
        ) from None
    return WriteRecord(task_id=task_id, kind=kind, key=key, value=loaded)


#: The columns of a checkpoint row in a database, in ``CheckpointRecord.from_row`` order.
ROW_COLUMNS = "checkpoint_id, parent_id, seq, step, snapshot, source, created_at, body"


#: ``json.dumps(value, separators=(",", ":"))`` without making an encoder per call (``dumps``
#: makes one whenever an argument is not its default): every saved step writes its body so
_COMPACT_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def compact_json(value: Any) -> str:
    """JSON text as the checkpointers store it: no spaces. An integer Python writes as no
    JSON (more digits than ``sys.get_int_max_str_digits()``, 4300 by default) is an
    ``InvalidUpdateError``, as any other value no checkpoint can hold."""
    try:
        return _COMPACT_ENCODE(value)
    except ValueError as exc:
        raise InvalidUpdateError(
            f"cannot checkpoint an integer of more than {sys.get_int_max_str_digits()} "
            "digits (Python writes none as JSON); keep such a number as text"
        ) from exc


def unheld_key(*keys: str | None, nul: bool) -> bool:
    """Whether a key a read is given (a thread id, namespace, checkpoint or frontier id) holds
    what the backend's text cannot (a lone surrogate; with ``nul``, NUL too), so that no row can
    have it: the read finds nothing, as the memory checkpointer's does, where the database
    failed it with a ``StoreError``. A key that is no text is an ``ArgumentError`` (it was
    an ``AttributeError`` from here)."""
    for key in keys:
        if key is None:
            continue
        if not isinstance(key, str):
            raise ArgumentError(
                "a checkpoint key (thread id, namespace, checkpoint or frontier id) is text, "
                f"got {type(key).__name__}"
            )
        if nul and "\x00" in key:
            return True
        if not key.isascii():
            try:
                key.encode()
            except UnicodeEncodeError:
                return True
    return False


def _check_key(field: str, value: str | None) -> None:
    if value is not None and unheld_key(value, nul=True):
        raise InvalidIdError(
            f"{field} {shown_id(ascii(value))} holds NUL or a lone surrogate, which no "
            "checkpointer can store as a key",
            field=field,
        )


def check_record_keys(record: CheckpointRecord) -> None:
    """Refuse (``InvalidIdError``) a record whose thread id, namespace, checkpoint or parent
    id holds NUL or a lone surrogate: the memory checkpointer (and, for NUL, SQLite) saved
    it, PostgreSQL failed with a ``StoreError``; now every backend refuses it, first."""
    _check_key("thread_id", record.thread_id)
    _check_key("ns", record.ns)
    _check_key("checkpoint_id", record.checkpoint_id)
    _check_key("parent_id", record.parent_id)


def check_write_keys(
    thread_id: str, ns: str, frontier_id: str, writes: builtins.list[WriteRecord]
) -> None:
    """``check_record_keys`` for pending writes: their thread, namespace, frontier, and each
    write's task id, kind and key; a kind not in ``WRITE_KINDS`` is an ``ArgumentError`` too
    (saved, it made every read of its frontier fail, ``read_write``)."""
    _check_key("thread_id", thread_id)
    _check_key("ns", ns)
    _check_key("frontier_id", frontier_id)
    for w in writes:
        _check_key("task_id", w.task_id)
        _check_key("kind", w.kind)
        _check_key("key", w.key)
        if w.kind not in WRITE_KINDS:
            raise ArgumentError(
                f"pending write of task {shown_id(w.task_id)!r} of thread {shown_id(thread_id)!r}: "
                f"kind {w.kind!r} is none a checkpointer writes "
                f"({', '.join(sorted(WRITE_KINDS))})"
            )


def stale_message(record: CheckpointRecord) -> str:
    """Why ``record`` cannot be saved: its parent is no longer its thread's head."""
    return (
        f"checkpoint {record.checkpoint_id} of thread {record.thread_id!r} is based on "
        f"{record.parent_id!r}, which is no longer the head; reload the thread"
    )


#: The kinds of pending write (``WriteRecord.kind``), the one list of them: a graph saves
#: no other, and a row of any other kind is damaged (``read_write`` refuses it).
WRITE_KINDS: Final = frozenset({"result", "interrupt", "resume", "steered", "error", "withdrawn"})


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class WriteRecord(Record):
    """A pending write of a task; ``kind`` is one of ``WRITE_KINDS``: ``result`` (the task's
    writes and gotos), ``interrupt`` (its questions), ``resume`` (key: the interrupt id; value:
    the answer), ``steered`` (key: the correlation id of the steering command that gave a
    resume answer; value: the interrupt id), ``error`` (its attempt's failure) or
    ``withdrawn`` (key: the interrupt id whose answer no longer stands)."""

    task_id: str
    kind: str
    key: str = ""
    value: Any = None


def check_limit(limit: object, what: str = "list") -> int | None:
    """``limit``, a count of checkpoints to read (None: all of them); anything else (a negative
    number, a bool, a float) is an ``ArgumentError`` (a ``ValueError``): a negative one meant all but the last few in
    memory, no limit in SQLite and a ``StoreError`` in PostgreSQL."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ArgumentError(
            f"{what}(limit=...) must be None or a whole number >= 0 (how many checkpoints), got "
            f"{shown_repr(limit)}"
        )
    return limit


def check_lease_ttl(lease_ttl: object) -> float:
    """A backend's ``lease_ttl``: a finite number of seconds >= 0 (0: a lease of another host
    is taken over at once; a negative one was that by accident, NaN or infinity a lease that
    never expired, a whole number past any float an ``OverflowError`` when made one).
    ``ArgumentError``: a ``ConfigurationError``, and the ``ValueError`` it was before."""
    if (
        isinstance(lease_ttl, bool)
        or not isinstance(lease_ttl, (int, float))
        or not (0 <= lease_ttl <= sys.float_info.max)
    ):
        raise ArgumentError(
            f"lease_ttl must be a finite number of seconds >= 0, got {shown_repr(lease_ttl)}"
        )
    return float(lease_ttl)


class Checkpointer(ABC):
    """Stores graph checkpoints and pending writes; one writer per thread."""

    def __init__(self, *, snapshot_every: int = 50) -> None:
        if (
            isinstance(snapshot_every, bool)
            or not isinstance(snapshot_every, int)
            or (snapshot_every < 1)
        ):
            raise ArgumentError(  # a ConfigurationError, and the ValueError it was
                f"snapshot_every must be a whole number >= 1, got {shown_repr(snapshot_every)}"
            )
        self.snapshot_every = snapshot_every
        self._owners: dict[str, str] = {}
        #: owner -> set when it releases, for holders that are closing (``letting_go``);
        #: an entry goes with its owner's release
        self._letting_go: dict[str, asyncio.Event] = {}
        #: Set by ``aclose``, for good, on every backend here: each call after it is
        #: ``CheckpointerClosed`` (``refuse_closed``), and nothing opens the storage again.
        self._closed = False

    # -- checkpoints -----------------------------------------------------------------------

    @abstractmethod
    async def put(self, record: CheckpointRecord) -> None:
        """Append ``record`` if its parent is the head (``StaleCheckpointError`` otherwise); a
        key no backend can store is an ``InvalidIdError`` first (``check_record_keys``)."""

    @abstractmethod
    async def latest(self, thread_id: str, ns: str = "") -> CheckpointRecord | None:
        """The head checkpoint of a thread namespace, or ``None`` for a new thread."""

    @abstractmethod
    async def get(
        self, thread_id: str, checkpoint_id: str, ns: str = ""
    ) -> CheckpointRecord | None:
        """One checkpoint by id."""

    @abstractmethod
    async def chain(
        self, thread_id: str, ns: str = "", checkpoint_id: str | None = None
    ) -> list[CheckpointRecord]:
        """The last snapshot at or before ``checkpoint_id`` (default: head) and the deltas
        after it, oldest first; empty if the thread (or checkpoint) does not exist."""

    @abstractmethod
    async def list(
        self, thread_id: str, ns: str = "", *, limit: int | None = None
    ) -> list[CheckpointRecord]:
        """Checkpoints newest first, at most ``limit`` (None: all; a negative one is a
        ``ValueError``, ``check_limit``); ``values`` may be left empty (history needs no
        values)."""

    async def list_before(
        self, thread_id: str, ns: str, before: str, *, limit: int | None = None
    ) -> builtins.list[CheckpointRecord] | None:
        """The checkpoints older than ``before`` (a checkpoint id of this thread and
        namespace), newest first, at most ``limit``; None when ``before`` is not one of them.
        As ``list``, ``values`` may be left empty. This default reads the whole chain through
        ``list``; the backends here read the page alone (``history(before=...)`` pages back
        through a long thread)."""
        check_limit(limit, "list_before")
        records = await self.list(thread_id, ns)
        at = next((i for i, r in enumerate(records) if r.checkpoint_id == before), None)
        if at is None:
            return None
        return records[at + 1 :][:limit]

    # -- pending writes --------------------------------------------------------------------

    @abstractmethod
    async def put_writes(
        self, thread_id: str, ns: str, frontier_id: str, writes: builtins.list[WriteRecord]
    ) -> None:
        """Save (or replace, by task, kind and key) pending writes of a frontier; a key no
        backend can store is an ``InvalidIdError`` first (``check_write_keys``)."""

    def saving_together(self) -> contextlib.AbstractAsyncContextManager[None]:
        """``async with cp.saving_together():`` the saves (``put``, ``put_writes``) the
        current task makes in the block land together: all of them when it ends, none if it
        raises or the process dies in it (a ``durability="exit"`` run's flush). SQLite and
        PostgreSQL make them one transaction; this default, for a backend without one (the
        memory checkpointer), saves each as it is made."""
        return contextlib.nullcontext()

    async def put_writes_once(
        self, thread_id: str, ns: str, frontier_id: str, writes: builtins.list[WriteRecord]
    ) -> None:
        """``put_writes`` of writes a run can do without: a failed task's error, the result
        of a step that cannot end (the graph logs their failure and ends with the run's own
        error). A backend that rides out an unreachable store for a held thread (PostgreSQL,
        up to ``lease_ttl``) tries these once instead, so a run that is failing anyway says
        why at once; this default is ``put_writes``."""
        await self.put_writes(thread_id, ns, frontier_id, writes)

    @abstractmethod
    async def get_writes(
        self, thread_id: str, ns: str, frontier_id: str
    ) -> builtins.list[WriteRecord]:
        """Pending writes of a frontier, in the order they were first saved."""

    # -- threads ---------------------------------------------------------------------------

    @abstractmethod
    async def delete_thread(self, thread_id: str) -> None:
        """Forget a thread: every namespace, checkpoint and pending write. A thread a writer
        holds (a run, in this process or, on a shared backend, in another) is not deleted
        under it: ``ThreadBusy``, nothing deleted (``refuse_held`` checks this process)."""

    def refuse_held(self, thread_id: str) -> None:
        """``ThreadBusy`` if a writer of this checkpointer holds ``thread_id`` (``acquire``):
        what ``delete_thread`` checks first, on every backend."""
        if thread_id in self._owners:
            raise ThreadBusy(thread_id)

    async def acquire(self, thread_id: str, owner: str) -> None:
        """Become the single writer of ``thread_id`` or raise ``ThreadBusy``; a holder that
        is letting go (``letting_go``) is waited for instead."""
        self.refuse_closed(f"take thread {shown_id(thread_id)}")
        holder = self._owners.get(thread_id)
        while holder is not None and holder != owner:
            released = self._letting_go.get(holder)
            if released is None:
                raise ThreadBusy(thread_id)
            await released.wait()
            holder = self._owners.get(thread_id)
        self._owners[thread_id] = owner
        try:
            await self._acquire_lease(thread_id, owner)
        except BaseException:
            self._owners.pop(thread_id, None)
            raise

    async def release(self, thread_id: str, owner: str) -> None:
        """Give up the thread if ``owner`` holds it."""
        if self._owners.get(thread_id) != owner:
            return
        try:
            await self._release_lease(thread_id, owner)
        finally:
            del self._owners[thread_id]
            released = self._letting_go.pop(owner, None)
            if released is not None:
                released.set()

    def letting_go(self, thread_id: str, owner: str) -> None:
        """Say that ``owner`` no longer writes ``thread_id`` and releases it as soon as its
        closing code runs (a stream its reader left with ``break``, which Python closes later
        from the event loop): a writer that comes meanwhile waits for that release instead of
        getting ``ThreadBusy``."""
        if self._owners.get(thread_id) == owner:
            self._letting_go.setdefault(owner, asyncio.Event())

    async def _acquire_lease(self, thread_id: str, owner: str) -> None:
        """Cross-process exclusion; in-process backends need none."""
        return None

    async def _release_lease(self, thread_id: str, owner: str) -> None:
        """Undo ``_acquire_lease``."""
        return None

    async def renew(self, thread_id: str, owner: str) -> None:
        """Called at every checkpoint a writer saves: keep a lease from expiring."""
        return None

    # -- lifecycle -------------------------------------------------------------------------

    async def setup(self) -> None:
        """Create tables, open connections; idempotent. Called on first use; a checkpointer
        closed (``aclose``) is not opened again: ``CheckpointerClosed``."""
        self.refuse_closed("open it")

    async def aclose(self) -> None:
        """Release resources, for good: every call after it is ``CheckpointerClosed``
        (``refuse_closed``); a backend's own ``aclose`` sets ``_closed`` first, so a save
        under way stops instead of opening the storage again."""
        self._closed = True

    #: How ``CheckpointerClosed`` names the checkpointer (a backend names its file or URL).
    described = "checkpointer"

    def refuse_closed(self, doing: str) -> None:
        """``CheckpointerClosed`` once ``aclose`` was called, the one error every backend
        gives then, saying what could not be done. Raise it outside any ``except``: being
        closed does not pass (``may_pass``), whatever failure it was found after."""
        if self._closed:
            raise CheckpointerClosed(
                f"{self.described} is closed (aclose): could not {doing}; open a new checkpointer"
            )

    async def __aenter__(self) -> Self:
        await self.setup()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
