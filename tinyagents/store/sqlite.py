"""``SqliteStore``: the embedded durable default (aiosqlite, WAL, versioned schema)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents.errors import DamagedData, StoreError
from tinyagents.events.models import Event
from tinyagents.protocol.commands import SteeringCommand, SteeringReceipt, dedupe_scope
from tinyagents.protocol.ids import shown_id
from tinyagents.protocol.state import CommandState
from tinyagents.store.base import (
    INBOX_LEASE_S,
    INBOX_RETENTION_S,
    LOG_COLUMNS,
    MAX_WARNED_ROWS,
    NONCE_MARGIN_S,
    PRUNE_INBOX,
    InboxItem,
    RunKey,
    Store,
    StoredCommand,
    WarnedRows,
    check_snapshots,
    damaged_run,
    event_rows,
    judged_holder,
    log_row,
    logged_command,
    open_logged,
    read_last_page,
    read_page,
    read_receipt,
    read_snapshot,
    readable_commands,
    readable_events,
    run_key,
    seconds_before,
    sendable,
    sql_int,
    stored_reason,
    taken_items,
    target_run_id,
    terminal_updates,
)
from tinyagents.store.urls import check_file_name

if TYPE_CHECKING:
    import aiosqlite

_log = logging.getLogger("tinyagents.store")

#: The states a command still open can be in (an IN over them uses the state index).
_OPEN = tuple(state.value for state in CommandState if not state.terminal)

#: Ordered schema migrations; each runs once, recorded in the ``migrations`` table.
#: The tables of a store (beside the ``migrations`` table every schema in the file shares).
_TABLES = ("steering_log", "events", "runs", "inbox", "used_nonces", "thread_holds")

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE IF NOT EXISTS steering_log (
            correlation_id TEXT PRIMARY KEY,
            run_id TEXT,
            state TEXT NOT NULL,
            reason TEXT,
            command TEXT NOT NULL,
            created_at TEXT NOT NULL,
            seq INTEGER NOT NULL
        );
        CREATE INDEX IF NOT EXISTS steering_log_state ON steering_log(state);
        CREATE TABLE IF NOT EXISTS events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            type TEXT NOT NULL,
            run_id TEXT,
            root_run_id TEXT,
            data TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS events_run ON events(run_id);
        CREATE INDEX IF NOT EXISTS events_root ON events(root_run_id);
        CREATE TABLE IF NOT EXISTS runs (
            run_id TEXT PRIMARY KEY,
            root_run_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            status TEXT NOT NULL,
            data TEXT NOT NULL
        );
        """,
    ),
    (
        2,
        # Correlation ids are unique per scope (a human's tenant, or '' for in-process actors),
        # so one tenant can never shadow another's command; rows logged before this migration
        # get the scope their actor implies.
        """
        BEGIN;
        CREATE TABLE steering_log_v2 (
            scope TEXT NOT NULL DEFAULT '',
            correlation_id TEXT NOT NULL,
            run_id TEXT,
            state TEXT NOT NULL,
            reason TEXT,
            command TEXT NOT NULL,
            created_at TEXT NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (scope, correlation_id)
        );
        INSERT INTO steering_log_v2
            SELECT CASE
                     WHEN json_valid(command) AND json_extract(command, '$.actor.type') = 'human'
                     THEN 'tenant:' || COALESCE(json_extract(command, '$.actor.tenant_id'), 'default')
                     ELSE ''
                   END,
                   correlation_id, run_id, state, reason, command, created_at, seq
            FROM steering_log;
        DROP TABLE steering_log;
        ALTER TABLE steering_log_v2 RENAME TO steering_log;
        CREATE INDEX IF NOT EXISTS steering_log_state ON steering_log(state);
        CREATE INDEX IF NOT EXISTS steering_log_run ON steering_log(run_id);
        COMMIT;
        """,
    ),
    (
        3,
        # The inbox of commands other processes submit for the runs a runtime owns, and the
        # tenant of each logged event (the operator API filters the event log by tenant).
        """
        BEGIN;
        CREATE TABLE IF NOT EXISTS inbox (
            request_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            state TEXT NOT NULL,
            command TEXT NOT NULL,
            receipt TEXT,
            submitted_at TEXT NOT NULL,
            answered_at TEXT
        );
        CREATE INDEX IF NOT EXISTS inbox_pending ON inbox(owner, state);
        CREATE INDEX IF NOT EXISTS inbox_answered ON inbox(answered_at);
        CREATE INDEX IF NOT EXISTS inbox_unanswered ON inbox(submitted_at)
            WHERE answered_at IS NULL;
        ALTER TABLE events ADD COLUMN tenant_id TEXT;
        UPDATE events SET tenant_id = json_extract(data, '$.tenant_id') WHERE json_valid(data);
        CREATE INDEX IF NOT EXISTS events_tenant ON events(tenant_id);
        COMMIT;
        """,
    ),
    (
        4,
        # Runs are listed a page at a time, newest first: each run's created_at gets a column
        # (from its snapshot, for the rows saved before), and the listing's filters indexes
        # that end in (created_at, run_id), so a page is read in order without a sort.
        """
        BEGIN;
        ALTER TABLE runs ADD COLUMN created_at TEXT NOT NULL DEFAULT '';
        UPDATE runs SET created_at = COALESCE(CAST(json_extract(data, '$.created_at') AS TEXT), '')
            WHERE json_valid(data);
        CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at, run_id);
        CREATE INDEX IF NOT EXISTS runs_tenant_created ON runs(tenant_id, created_at, run_id);
        CREATE INDEX IF NOT EXISTS runs_tenant_status_created
            ON runs(tenant_id, status, created_at, run_id);
        CREATE INDEX IF NOT EXISTS runs_root_created ON runs(root_run_id, created_at, run_id);
        COMMIT;
        """,
    ),
    (
        5,
        # A lease on taken inbox items: an item taken and not answered within INBOX_LEASE_S
        # (its owner died in between) is taken again, by its owner or by the new owner of its
        # target run, found by the run id the row now carries (read out of the command for
        # the rows put before).
        """
        BEGIN;
        ALTER TABLE inbox ADD COLUMN taken_at TEXT;
        ALTER TABLE inbox ADD COLUMN run_id TEXT;
        UPDATE inbox SET run_id = json_extract(command, '$.target.run_id')
            WHERE json_valid(command);
        COMMIT;
        """,
    ),
    (
        6,
        # Single-use nonces (an event-stream ticket's), claimed once by whichever process
        # sharing the file sees them first; each kept until NONCE_MARGIN_S past its expiry
        # (seconds since the epoch), swept out by later claims.
        """
        CREATE TABLE IF NOT EXISTS used_nonces (
            nonce TEXT PRIMARY KEY,
            forget_at REAL NOT NULL
        );
        CREATE INDEX IF NOT EXISTS used_nonces_forget ON used_nonces(forget_at);
        """,
    ),
    (
        7,
        # Who logged each command (the runtime that accepted or deferred it: a runtime that
        # restored it fails it as an orphan only once that one is gone) and its target's
        # thread (the open commands of one thread are read by an index). Rows logged before
        # have no owner (they keep the old judgement); a thread target's thread is read out
        # of the command.
        """
        BEGIN;
        ALTER TABLE steering_log ADD COLUMN owner TEXT;
        ALTER TABLE steering_log ADD COLUMN thread_id TEXT;
        UPDATE steering_log SET thread_id = json_extract(command, '$.target.thread_id')
            WHERE json_valid(command) AND json_extract(command, '$.target.type') = 'thread';
        CREATE INDEX IF NOT EXISTS steering_log_thread ON steering_log(thread_id, state);
        COMMIT;
        """,
    ),
    (
        8,
        # The run that holds each thread (a session's turn: ``Store.hold_thread``), so that
        # runtimes of other processes on the file refuse a second writer of it.
        """
        CREATE TABLE IF NOT EXISTS thread_holds (
            tenant_id TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            PRIMARY KEY (tenant_id, thread_id)
        );
        """,
    ),
    (
        9,
        # Who took each hold, and when: a graph run holds its thread before its first
        # snapshot is saved, and its hold is judged by these until then.
        """
        ALTER TABLE thread_holds ADD COLUMN owner TEXT;
        ALTER TABLE thread_holds ADD COLUMN taken_at TEXT;
        """,
    ),
]

#: The inbox rows ``?1`` may take (``Store.inbox_take``), ``?2`` being now - INBOX_LEASE_S:
#: its own never taken, and those unanswered past their lease that are its own or target a
#: run it now owns (a CASE, as json_extract raises on a damaged snapshot).
_TAKEABLE = (
    "(owner = ?1 AND state = 'pending') OR (answered_at IS NULL AND submitted_at < ?2"
    " AND (state = 'pending' OR taken_at IS NULL OR taken_at < ?2) AND (owner = ?1"
    " OR EXISTS (SELECT 1 FROM runs WHERE runs.run_id = inbox.run_id AND CASE"
    " WHEN json_valid(runs.data) THEN json_extract(runs.data, '$.owner') END = ?1)))"
)


def events_query(
    after_id: int,
    tenant_id: str | None,
    run_id: str | None,
    root_run_id: str | None,
    limit: int,
    *,
    newest_first: bool = False,
    before_id: int | None = None,
    type_prefix: str | None = None,
) -> tuple[str, list[str | int]]:
    """``read_events``' statement; ``newest_first`` (``last_events``), the rows from the
    newest back, those before ``before_id`` if given. With a run or a tree asked for, the tenant is checked on each row
    (``+tenant_id``: no index), so SQLite reads the run's (or tree's) index from ``after_id``
    on: left to choose, it took the tenant's, and a stream following a quiet tree read every
    later event of the tenant at each poll. (Both indexes end in the rowid, ``id``, so either
    is read in order from ``after_id``, or back from ``before_id``.)"""
    where: list[str] = ["id > ?"]
    args: list[str | int] = [after_id]
    if before_id is not None:
        where.append("id < ?")
        args.append(before_id)
    narrowed = run_id is not None or root_run_id is not None
    for column, value in (
        ("+tenant_id" if narrowed else "tenant_id", tenant_id),
        ("run_id", run_id),
        ("root_run_id", root_run_id),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if type_prefix is not None:  # not LIKE, as in load_events
        where.append("substr(type, 1, ?) = ?")
        args.extend([len(type_prefix), type_prefix])
    order = "id DESC" if newest_first else "id"
    sql = f"SELECT id, data FROM events WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
    return sql, [*args, max(limit, 0)]


class SqliteStore(Store):
    def __init__(
        self, path: str | Path, *, busy_timeout_s: float = 5.0, create: bool = True
    ) -> None:
        self.path = check_file_name(str(path))
        #: The file's own name (symlinks and ``.`` resolved against the current directory):
        #: ``runs.db``, ``./runs.db`` and its absolute path are one store, and ``runs.db`` of
        #: two directories two; the operator API names its event log after it.
        self.url = f"sqlite:///{self.path if self.path == ':memory:' else os.path.realpath(path)}"
        #: ``False`` (tools that read or steer a store a runtime made): a file that holds no
        #: store is refused at open, untouched, never made into one.
        self.create = create
        #: How long a write waits for a lock another connection holds before it fails.
        self.busy_timeout_s = busy_timeout_s
        self._db: aiosqlite.Connection | None = None
        #: One statement at a time on the shared connection: a rollback after one write
        #: failed must never undo another's uncommitted row, and no read may be part-way
        #: through when a write begins (its open snapshot would make the write's transaction
        #: a stale one: SQLite then refuses it at once, "database is locked", without waiting
        #: out the busy timeout, whenever another process wrote since).
        self._lock = asyncio.Lock()
        #: Held by an ``open`` under way: a second one waits for it.
        self._opening = asyncio.Lock()
        #: The file opened (None in memory): each write first checks it is still there.
        self._file: OpenedFile | None = None
        #: The damaged rows its listings already warned of (``_listed``).
        self._warned = WarnedRows(limit=MAX_WARNED_ROWS)

    async def open(self) -> None:
        """Connect, then create or migrate the schema. A file that is not a SQLite database is
        refused with ``StoreError`` and left as it was; a SQLite database with tables of its
        own is fine (ours join them, as the checkpointer's do), unless ``create=False``: then
        a file without our tables is refused as well, untouched, and so is a file a newer
        tinyagents migrated, and (unless ``create=False``) one this process can only read.
        A failed open leaves no connection (and so no thread) behind. Two opens at once open
        it once (each connected, and the first connection was left unclosed)."""
        if self._db is not None:
            return
        async with self._opening:
            if self._db is None:  # (else another open made it meanwhile)
                await self._connect()

    async def _connect(self) -> None:
        db: aiosqlite.Connection | None = None
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            db = await connect(self.path)
            await db.execute(f"PRAGMA busy_timeout={round(self.busy_timeout_s * 1000)}")
            # Read before anything writes: a file that is not a database fails here untouched.
            await db.execute_fetchall("SELECT count(*) FROM sqlite_master")
            if not self.create:
                await self._exists(db)
            await refuse_foreign_tables(
                db,
                _TABLES,
                record="migrations",
                record_columns=frozenset({"name", "version"}),
                ours="SELECT 1 FROM migrations WHERE name = 'steering'",
            )
            await refuse_newer(db, "migrations", MIGRATIONS[-1][0], schema="steering")
            if self.create:  # a tool that reads a store may read one on a read-only disk
                await refuse_read_only(db)
            await use_wal(db, self.busy_timeout_s)
            await db.execute("PRAGMA synchronous=NORMAL")
            await migrate(db, MIGRATIONS, name="steering")
            self._file = None if self.path in ("", ":memory:") else OpenedFile(self.path)
        except BaseException as exc:
            if db is not None:
                with contextlib.suppress(Exception):
                    await db.close()
            if isinstance(exc, Exception):
                raise StoreError(
                    f"cannot open SQLite store {self.path!r}: {why_not_opened(self.path, exc)}"
                ) from exc
            raise
        self._db = db

    async def _exists(self, db: aiosqlite.Connection) -> None:
        """Refuse a file without this store's tables (``create=False``), before any write."""
        made = await db.execute_fetchall(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
        )
        if not made or not await db.execute_fetchall(
            "SELECT 1 FROM migrations WHERE name = 'steering'"
        ):
            raise StoreError(
                f"no tinyagents store in {self.path!r} (nothing was written; is the runtime's "
                "store URL the same?)"
            )

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError(
                "the SQLite store is not open; use 'async with Runtime(...)' or await open()"
            )
        return self._db

    async def append_command(
        self,
        cmd: SteeringCommand,
        *,
        state: str,
        run_id: str | None,
        owner: str | None = None,
        thread_id: str | None = None,
    ) -> bool:
        # DO NOTHING, never DO UPDATE: a second process sharing the file (or a retry) must not
        # overwrite the first command logged under this id; the caller answers it 'duplicate'.
        # seq is taken inside the statement, under the write lock, so writers never collide.
        cursor = await self._write(
            "INSERT INTO steering_log (scope, correlation_id, run_id, state, reason, command,"
            " created_at, owner, thread_id, seq) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?,"
            " (SELECT COALESCE(MAX(seq), 0) + 1 FROM steering_log))"
            " ON CONFLICT(scope, correlation_id) DO NOTHING",
            log_row(cmd, state=state, run_id=run_id, owner=owner, thread_id=thread_id),
            what=f"log command {cmd.correlation_id}",
        )
        return cursor.rowcount == 1

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
        cursor = await self._write(
            "UPDATE steering_log SET state = ?, run_id = ?, command = ?,"
            " owner = COALESCE(?, owner), thread_id = COALESCE(?, thread_id)"
            " WHERE scope = ? AND correlation_id = ? AND state = ?",
            (
                state,
                run_id,
                cmd.model_dump_json(),
                owner,
                thread_id,
                dedupe_scope(cmd.actor),
                cmd.correlation_id,
                from_state,
            ),
            what=f"update command {cmd.correlation_id}",
        )
        return cursor.rowcount == 1

    async def set_command_states(self, updates: list[tuple[str, str, str, str | None]]) -> None:
        if not updates:
            return
        await self._write(*_settling(updates), what=f"settle {len(updates)} command(s)", many=True)

    async def get_command(self, correlation_id: str, *, scope: str = "") -> StoredCommand | None:
        async with self._reading(
            f"SELECT {LOG_COLUMNS} FROM steering_log WHERE scope = ? AND correlation_id = ?",
            (scope, correlation_id),
        ) as cur:
            row = await cur.fetchone()
        return logged_command(correlation_id, row) if row is not None else None

    async def open_commands(self, *, thread_id: str | None = None) -> list[StoredCommand]:
        marks = ",".join("?" for _ in _OPEN)
        thread = "" if thread_id is None else " AND thread_id = ?"
        async with self._reading(
            f"SELECT {LOG_COLUMNS}, scope, correlation_id FROM steering_log"
            f" WHERE state IN ({marks}){thread} ORDER BY seq",
            _OPEN if thread_id is None else (*_OPEN, thread_id),
        ) as cur:
            rows = await cur.fetchall()
        return await open_logged(self, rows, self.path)

    async def command_ids(self) -> set[str]:
        async with self._reading("SELECT DISTINCT correlation_id FROM steering_log") as cur:
            return {r[0] for r in await cur.fetchall()}

    @contextlib.asynccontextmanager
    async def _reading(self, sql: str, args: Sequence[Any] = ()) -> AsyncIterator[aiosqlite.Cursor]:
        """A read's cursor, under the connection's lock (see ``_lock``). A read that fails
        (a closed database, a lock held past the busy timeout) raises ``StoreError``, as a
        write does: never the driver's own error."""
        async with self._lock:
            try:
                async with self.db.execute(sql, args) as cursor:
                    yield cursor
            except (sqlite3.Error, ValueError) as exc:
                said = f"SQLite store {self.path!r}: could not read: {exc}"
                if isinstance(exc, DamagedData):  # a record read back (``read_snapshot``)
                    raise DamagedData(said, record=exc.record, tenant_id=exc.tenant_id) from exc
                if isinstance(exc, StoreError):
                    raise
                raise StoreError(said) from exc

    async def _write(
        self, sql: str, args: Sequence[Any], *, what: str, many: bool = False
    ) -> aiosqlite.Cursor:
        """Run one write and commit it, or roll it back and raise ``StoreError``: a failed
        write (disk full, text SQLite cannot encode, a closed database) leaves nothing behind,
        not even an uncommitted row that a later commit would carry along."""
        return await self._transaction([(sql, args, many)], what=what)

    async def _write_returning(self, sql: str, args: Sequence[Any], *, what: str) -> list[Any]:
        """``_write`` for one statement with RETURNING: its rows, read before the commit."""
        async with self._writing(what) as db, db.execute(sql, args) as cursor:
            return list(await cursor.fetchall())

    async def _transaction(
        self, statements: list[tuple[str, Sequence[Any], bool]], *, what: str
    ) -> aiosqlite.Cursor:
        """``_write`` for several statements (sql, args, executemany?) committed as one; returns
        the last statement's cursor."""
        async with self._writing(what) as db:
            for sql, args, many in statements:
                if many:
                    cursor = await db.executemany(sql, args)
                else:
                    cursor = await db.execute(sql, args)
            return cursor

    @contextlib.asynccontextmanager
    async def _writing(self, what: str) -> AsyncIterator[aiosqlite.Connection]:
        """The connection, under its lock, for writes committed together when the block ends
        (a block that only read ends its transaction so); anything raised rolls them back,
        and a driver's error is raised as ``StoreError`` saying what could not be done."""
        db = self.db
        async with self._lock:
            how = self._file.gone() if self._file is not None else None
            if how is not None:
                raise gone_error("SQLite store", self.path, how)
            try:
                yield db
                await db.commit()
            except BaseException as exc:
                await _roll_back(db)
                if isinstance(exc, DamagedData):  # a record read back (``read_snapshot``)
                    said = f"SQLite store {self.path!r}: could not {what}: {exc}"
                    raise DamagedData(said, record=exc.record, tenant_id=exc.tenant_id) from exc
                if isinstance(exc, (sqlite3.Error, ValueError)):  # UnicodeEncodeError is one
                    raise StoreError(
                        f"SQLite store {self.path!r}: could not {what}: {exc}"
                    ) from exc
                raise

    async def append_events(self, events: list[Event]) -> None:
        # Through _write: a batch that fails half-way (an event SQLite cannot encode, a lock
        # held too long) is rolled back whole, so the writer can retry or split it safely.
        statements: list[tuple[str, Sequence[Any], bool]] = [
            (
                "INSERT INTO events (type, run_id, root_run_id, tenant_id, data)"
                " VALUES (?, ?, ?, ?, ?)",
                event_rows(events, f"SQLite store {self.path!r}"),
                True,
            )
        ]
        updates = terminal_updates(events)
        if updates:
            statements.append((*_settling(updates), True))
        await self._transaction(statements, what=f"append {len(events)} event(s)")

    async def load_events(
        self,
        *,
        run_id: str | None = None,
        root_run_id: str | None = None,
        type_prefix: str | None = None,
    ) -> list[Event]:
        where: list[str] = []
        args: list[str | int] = []
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        if root_run_id is not None:
            where.append("root_run_id = ?")
            args.append(root_run_id)
        if type_prefix is not None:
            # Not LIKE: it is case-insensitive and treats "_" and "%" as wildcards.
            where.append("substr(type, 1, ?) = ?")
            args.extend([len(type_prefix), type_prefix])
        sql = (
            "SELECT id, data FROM events"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY id"
        )
        async with self._reading(sql, args) as cur:
            rows = [(r[0], r[1]) for r in await cur.fetchall()]
        return [event for _, event in readable_events(rows)]

    async def save_runs(
        self, snapshots: list[dict[str, Any]], *, held_by: str | None = None
    ) -> list[str]:
        check_snapshots(snapshots)
        if not snapshots:
            return []
        refused: list[str] = []
        async with self._writing(f"save {len(snapshots)} run snapshot(s)") as db:
            if held_by is not None:
                # IMMEDIATE: the file's write lock before the read, as claim_run takes it
                await db.execute("BEGIN IMMEDIATE")
                async with db.execute(
                    _RUN_OWNERS, (json.dumps([s["run_id"] for s in snapshots]),)
                ) as cur:
                    owners: dict[str, Any] = {r[0]: r[1] for r in await cur.fetchall()}
                refused = [
                    s["run_id"] for s in snapshots if owners.get(s["run_id"], held_by) != held_by
                ]
                snapshots = [s for s in snapshots if owners.get(s["run_id"], held_by) == held_by]
            await db.executemany(_SAVE_RUN, [_run_row(s) for s in snapshots])
        return refused

    async def claim_run(
        self, snapshot: dict[str, Any], free: Callable[[dict[str, Any] | None], bool]
    ) -> tuple[bool, dict[str, Any] | None]:
        check_snapshots([snapshot])
        run_id = snapshot["run_id"]
        async with self._writing(f"claim run {shown_id(run_id)}") as db:
            # IMMEDIATE: the file's write lock before the read, so no other connection (of
            # any process) saves the run between the read and the write
            await db.execute("BEGIN IMMEDIATE")
            async with db.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)) as cur:
                row = await cur.fetchone()
            # read as every other read of a snapshot: a damaged one is DamagedData, never
            # json's error (or a list's AttributeError), nor a free id to write over
            stored = read_snapshot(row[0], run_id) if row is not None else None
            if not free(stored):
                return False, stored
            await db.execute(_SAVE_RUN, _run_row(snapshot))
        return True, stored

    async def release_run(self, run_id: str, owner: str, previous: dict[str, Any] | None) -> bool:
        check_snapshots([previous])
        async with self._writing(f"give back the claim of run {shown_id(run_id)}") as db:
            await db.execute("BEGIN IMMEDIATE")
            async with db.execute(_RUN_OWNERS, (json.dumps([run_id]),)) as cur:
                row = await cur.fetchone()
            if row is None or row[1] != owner:
                return False
            if previous is None:
                await db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            else:
                await db.execute(_SAVE_RUN, _run_row(previous))
        return True

    async def hold_thread(
        self,
        tenant_id: str,
        thread_id: str,
        run_id: str,
        free: Callable[[dict[str, Any] | None], bool],
        *,
        owner: str | None = None,
    ) -> tuple[bool, dict[str, Any] | None]:
        async with self._writing(f"take thread {shown_id(thread_id)}") as db:
            # IMMEDIATE: the file's write lock before the read, so no other connection (of
            # any process) takes the thread between the read and the write
            await db.execute("BEGIN IMMEDIATE")
            async with db.execute(_HOLDER, (tenant_id, thread_id)) as cur:
                held = _held(await cur.fetchone(), tenant_id)
            if held is not None and held["run_id"] == run_id:
                held = None
            if held is not None and not free(held):
                return False, held
            await db.execute(
                "INSERT INTO thread_holds (tenant_id, thread_id, run_id, owner, taken_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, thread_id) DO UPDATE SET"
                " run_id = excluded.run_id, owner = excluded.owner, taken_at = excluded.taken_at",
                (tenant_id, thread_id, run_id, owner, _clock.now().isoformat()),
            )
        return True, held

    async def thread_holder(self, tenant_id: str, thread_id: str) -> dict[str, Any] | None:
        async with self._reading(_HOLDER, (tenant_id, thread_id)) as cur:
            return _held(await cur.fetchone(), tenant_id)

    async def let_go_of_thread(self, tenant_id: str, thread_id: str, run_id: str) -> bool:
        async with self._writing(f"let go of thread {shown_id(thread_id)}") as db:
            cursor = await db.execute(
                "DELETE FROM thread_holds WHERE tenant_id = ? AND thread_id = ? AND run_id = ?",
                (tenant_id, thread_id, run_id),
            )
            return bool(cursor.rowcount)

    async def load_runs(self, *, tenant_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT data, run_id FROM runs"
        args: tuple[str, ...] = ()
        if tenant_id is not None:
            sql, args = sql + " WHERE tenant_id = ?", (tenant_id,)
        async with self._reading(sql + " ORDER BY rowid", args) as cur:
            return [read_snapshot(r[0], r[1]) for r in await cur.fetchall()]

    async def list_runs(
        self,
        *,
        tenant_id: str | None = None,
        statuses: Sequence[str] = (),
        root_run_id: str | None = None,
        before: RunKey | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        where, args = _run_filters(tenant_id, statuses, root_run_id, before)
        sql = (
            # the data as bytes: text that is no UTF-8 is then one damaged row (the driver
            # would raise on it, failing the whole listing)
            "SELECT CAST(data AS BLOB), run_id, root_run_id, tenant_id, status, created_at"
            " FROM runs" + where + " ORDER BY created_at DESC, run_id DESC"
        )
        if limit is not None:
            # max: SQLite reads LIMIT -1 as no limit
            sql, args = sql + " LIMIT ?", [*args, sql_int(max(limit, 0))]
        async with self._reading(sql, args) as cur:
            return [self._listed(row) for row in await cur.fetchall()]

    def _listed(self, row: Any) -> dict[str, Any]:
        """A listed row's snapshot; a damaged one (``read_snapshot``) is marked, with a
        warning in the log naming the row to repair (``damaged_run``), once a row
        (``WarnedRows``: a console polling the listing logged it every second)."""
        try:
            snapshot = read_snapshot(row[0], row[1])
        except ValueError as exc:
            if self._warned.first(row[1]):
                _log.warning("SQLite store %r: %s (listed as damaged)", self.path, exc)
            return damaged_run(
                run_id=row[1],
                root_run_id=row[2],
                tenant_id=row[3],
                status=row[4],
                created_at=row[5],
                problem=str(exc),
            )
        if len(self._warned):  # (a row that reads: one warned of was repaired)
            self._warned.forget(row[1])
        return snapshot

    async def run_commands(
        self, run_id: str, *, states: tuple[str, ...] = ("applied",)
    ) -> list[StoredCommand]:
        if not states:
            return []
        marks = ",".join("?" for _ in states)
        async with self._reading(
            f"SELECT {LOG_COLUMNS} FROM steering_log"
            f" WHERE run_id = ? AND state IN ({marks}) ORDER BY seq",
            (run_id, *states),
        ) as cur:
            rows = await cur.fetchall()
        return readable_commands(rows)

    async def load_run(self, run_id: str) -> dict[str, Any] | None:
        async with self._reading(
            # (bytes: text that is no UTF-8 is read_snapshot's to name, with the run)
            # (its tenant column: a damaged snapshot's error says whose it is)
            "SELECT CAST(data AS BLOB), run_id, tenant_id FROM runs WHERE run_id = ?",
            (run_id,),
        ) as cur:
            row = await cur.fetchone()
            # read in here, as load_runs does: a damaged snapshot is a StoreError
            return read_snapshot(row[0], row[1], row[2]) if row is not None else None

    async def read_events(
        self,
        *,
        after_id: int = 0,
        tenant_id: str | None = None,
        run_id: str | None = None,
        root_run_id: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[int, Event]]:

        async def fetch(after: int, want: int) -> list[tuple[int, str | bytes]]:
            sql, args = events_query(after, tenant_id, run_id, root_run_id, want)
            async with self._reading(sql, args) as cur:
                return [(r[0], r[1]) for r in await cur.fetchall()]

        return await read_page(fetch, after_id, limit)

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

        async def fetch(before: int | None, want: int) -> list[tuple[int, str | bytes]]:
            sql, args = events_query(
                0,
                tenant_id,
                run_id,
                root_run_id,
                want,
                newest_first=True,
                before_id=before,
                type_prefix=type_prefix,
            )
            async with self._reading(sql, args) as cur:
                return [(r[0], r[1]) for r in await cur.fetchall()]

        return await read_last_page(fetch, before_id, limit)

    async def claim_nonce(self, nonce: str, *, expires_at: datetime) -> bool:
        # One transaction: the sweep, then DO NOTHING on a nonce any process claimed first
        # (SQLite's write lock orders the claims of every connection to the file).
        forget_at = expires_at.timestamp() + NONCE_MARGIN_S
        cursor = await self._transaction(
            [
                ("DELETE FROM used_nonces WHERE forget_at < ?", (_clock.now().timestamp(),), False),
                (
                    "INSERT INTO used_nonces (nonce, forget_at) VALUES (?, ?)"
                    " ON CONFLICT(nonce) DO NOTHING",
                    (nonce, forget_at),
                    False,
                ),
            ],
            what=f"claim nonce {shown_id(nonce)}",
        )
        return cursor.rowcount == 1

    async def inbox_put(self, *, owner: str, request_id: str, command: SteeringCommand) -> None:
        await self._write(
            "INSERT INTO inbox (request_id, owner, state, command, submitted_at, run_id)"
            " VALUES (?, ?, 'pending', ?, ?, ?) ON CONFLICT(request_id) DO NOTHING",
            (
                request_id,
                owner,
                sendable(command),
                _clock.now().isoformat(),
                target_run_id(command),
            ),
            what=f"put inbox request {shown_id(request_id)}",
        )

    async def inbox_take(self, owner: str, *, limit: int = 100) -> list[InboxItem]:
        now = _clock.now()
        expired = seconds_before(now, INBOX_LEASE_S).isoformat()
        # A read first: an empty inbox (the usual answer to a poll) costs no write lock.
        async with self._reading(
            f"SELECT 1 FROM inbox WHERE {_TAKEABLE} LIMIT 1", (owner, expired)
        ) as cur:
            if await cur.fetchone() is None:
                return []
        # One UPDATE ... RETURNING: SQLite runs it under the write lock of the file, so two
        # pollers (in any processes) never claim the same row.
        rows = await self._write_returning(
            "UPDATE inbox SET state = 'taken', owner = ?1, taken_at = ?3"
            f" WHERE request_id IN (SELECT request_id FROM inbox WHERE {_TAKEABLE}"
            " ORDER BY rowid LIMIT ?4) RETURNING rowid, request_id, command, submitted_at",
            (owner, expired, now.isoformat(), sql_int(max(limit, 0))),  # LIMIT -1: no limit
            what=f"take the inbox of {shown_id(owner)}",
        )
        return await taken_items(self, owner, rows)

    async def inbox_answer(self, request_id: str, receipt: SteeringReceipt) -> None:
        now = _clock.now()
        await self._transaction(
            [
                (
                    "UPDATE inbox SET state = 'answered', receipt = ?, answered_at = ?"
                    " WHERE request_id = ?",
                    (receipt.model_dump_json(), now.isoformat(), request_id),
                    False,
                ),
                (
                    PRUNE_INBOX,
                    (seconds_before(now, INBOX_RETENTION_S).isoformat(),),
                    False,
                ),
            ],
            what=f"answer inbox request {shown_id(request_id)}",
        )

    async def inbox_receipt(self, request_id: str) -> SteeringReceipt | None:
        async with self._reading(
            "SELECT receipt FROM inbox WHERE request_id = ?", (request_id,)
        ) as cur:
            row = await cur.fetchone()
        if row is None or row[0] is None:
            return None
        return read_receipt(request_id, row[0])


async def _roll_back(db: aiosqlite.Connection) -> None:
    """Roll back a write that failed, or whose caller was cancelled (or interrupted) while its
    statements ran on the connection's thread, which finishes them all the same: left in its
    transaction, the next write's COMMIT would carry them along. A COMMIT already under way
    wins (the write is then durable, as a write whose reply was lost). The ROLLBACK is queued
    on the thread as this is awaited, ahead of any later write, even if the wait is cancelled
    again."""
    with contextlib.suppress(sqlite3.Error, ValueError):
        await db.rollback()


#: Saves a run's snapshot (``_run_row``). The listing's key follows the snapshot (a continued
#: run is newer): a column the cursor does not read would repeat or skip pages.
_SAVE_RUN = (
    "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT(run_id) DO UPDATE SET status=excluded.status, data=excluded.data,"
    " created_at=excluded.created_at"
)


#: The ``owner`` of each run of ``?1`` (a JSON list of run ids) that has a row: (run id,
#: owner or None; None too for a damaged snapshot, as json_extract raises on one).
_RUN_OWNERS = (
    "SELECT run_id, CASE WHEN json_valid(data) THEN json_extract(data, '$.owner') END"
    " FROM runs WHERE run_id IN (SELECT value FROM json_each(?1))"
)


def _run_row(snapshot: dict[str, Any]) -> tuple[Any, ...]:
    return (
        snapshot["run_id"],
        snapshot["root_run_id"],
        snapshot["tenant_id"],
        snapshot["status"],
        json.dumps(snapshot),
        run_key(snapshot)[0],
    )


def _run_filters(
    tenant_id: str | None,
    statuses: Sequence[str],
    root_run_id: str | None,
    before: RunKey | None,
) -> tuple[str, list[Any]]:
    """The WHERE clause of a run listing and its arguments."""
    clauses: list[str] = []
    args: list[Any] = []
    if tenant_id is not None:
        clauses.append("tenant_id = ?")
        args.append(tenant_id)
    if statuses:
        clauses.append(f"status IN ({','.join('?' for _ in statuses)})")
        args.extend(statuses)
    if root_run_id is not None:
        clauses.append("root_run_id = ?")
        args.append(root_run_id)
    if before is not None:
        clauses.append("(created_at, run_id) < (?, ?)")
        args.extend(before)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def _settling(updates: list[tuple[str, str, str, str | None]]) -> tuple[str, list[Any]]:
    """The statement (for executemany) that sets (scope, id, state, reason) in the log."""
    return (
        "UPDATE steering_log SET state = ?1, reason = ?2 WHERE scope = ?3 AND correlation_id = ?4"
        # a terminal state stands (another runtime's later "failed" for its copy changes
        # nothing); the same state again only gives its reason (a rejection logged first)
        " AND (state = ?1 OR state NOT IN ('applied', 'rejected', 'superseded', 'failed'))",
        [(state, stored_reason(reason), scope, cid) for scope, cid, state, reason in updates],
    )


async def connect(path: str, **kwargs: Any) -> aiosqlite.Connection:
    """``aiosqlite.connect``, for a connection that cannot keep the process alive.

    aiosqlite runs each connection on a non-daemon thread that ends only when the connection
    is closed, and Python waits for such threads *before* it runs ``atexit`` handlers: a store
    or checkpointer that a script never closed (or one whose open failed half-way) hung the
    process at exit. ``_EXIT_GUARD`` stops those connections once their program is over.

    The file is opened (``sqlite3.connect``) in a worker thread before aiosqlite's thread
    starts: when aiosqlite's own connect fails, its thread stops after the error was raised
    and reports that to the event loop, closed by then in a CLI that printed the error and
    ended ("RuntimeError: Event loop is closed" tracebacks after the one-line error).
    """
    import aiosqlite  # lazy, like every driver

    raw = await asyncio.to_thread(functools.partial(_sqlite_connect, path, **kwargs))
    conn = await aiosqlite.Connection(lambda: raw, _ITER_CHUNK_SIZE)
    _EXIT_GUARD.watch(conn)
    return conn


def _sqlite_connect(path: str, **kwargs: Any) -> sqlite3.Connection:
    # check_same_thread: made here, used only on aiosqlite's thread, one call at a time
    conn: sqlite3.Connection = sqlite3.connect(path, check_same_thread=False, **kwargs)
    return conn


#: Rows aiosqlite fetches at a time when a cursor is iterated (``aiosqlite.connect``'s).
_ITER_CHUNK_SIZE = 64


class _ExitGuard:
    """A daemon thread that waits for the main thread to end, then stops every connection
    still open with aiosqlite's public ``Connection.stop()`` — a connection opened by another
    thread only after that thread has ended too, so one still in use is never cut off. Work
    already queued on a connection finishes first; a closed connection ignores the stop."""

    def __init__(self) -> None:
        # Weak: a connection garbage-collected before exit is stopped by aiosqlite itself.
        self._opened: weakref.WeakKeyDictionary[Any, threading.Thread] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, conn: Any) -> None:
        with self._lock:
            self._opened[conn] = threading.current_thread()
            if self._thread is None or not self._thread.is_alive():  # not started, or forked
                self._thread = threading.Thread(
                    target=self._stop_at_exit, name="tinyagents-sqlite-exit", daemon=True
                )
                self._thread.start()

    def _stop_at_exit(self) -> None:
        threading.main_thread().join()  # returns when the interpreter starts shutting down
        while True:
            with self._lock:
                try:
                    conn, opener = self._opened.popitem()
                except KeyError:
                    return
            if opener is not threading.main_thread() and not opener.daemon:
                opener.join()
            stop = getattr(conn, "stop", None)  # aiosqlite < 0.22 used daemon threads, no stop
            if stop is not None:
                stop()


_EXIT_GUARD = _ExitGuard()


async def refuse_foreign_tables(
    db: aiosqlite.Connection,
    tables: tuple[str, ...],
    *,
    record: str,
    record_columns: frozenset[str],
    ours: str | None,
) -> None:
    """Raise ``StoreError``, before anything writes, when a table of one of our names
    (``tables``, or the ``record`` of our migrations) is another program's: migrating around
    it would change that table, write into it, or fail half-way with tables of ours beside
    it. The file is ours when ``record`` has our columns and the query ``ours`` finds our
    migrations in it (the migrations then bring it up to date), or, with ``ours=None``, when
    ``record`` has our columns alone: for a schema whose record is made before its tables and
    its rows after them (another process migrating the file at this moment shows tables but
    no row yet). Other tables are no matter."""
    present = {
        row[0]
        for row in await db.execute_fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    foreign = None
    if record in present:
        columns = {row[1] for row in await db.execute_fetchall(f"PRAGMA table_info({record})")}
        if not record_columns <= columns:
            foreign = record
        elif ours is None or await db.execute_fetchall(ours):
            return
    foreign = foreign or next((table for table in tables if table in present), None)
    if foreign is not None:
        raise StoreError(
            f"it holds a table '{foreign}' of another program, and tinyagents keeps its own "
            f"tables ({', '.join((*tables, record))}) under these names: give it a file of its "
            "own (nothing was written)"
        )


async def refuse_newer(
    db: aiosqlite.Connection, record: str, known: int, *, schema: str | None = None
) -> None:
    """Raise ``StoreError``, before anything writes, when the ``record`` of migrations holds a
    version past ``known`` (of ``schema``, for a record several schemas share): a newer
    tinyagents made the file, and this code would misread its tables or migrate around them."""
    if not await db.execute_fetchall(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (record,)
    ):
        return
    where, args = (" WHERE name = ?", (schema,)) if schema is not None else ("", ())
    rows = await db.execute_fetchall(f"SELECT version FROM {record}{where}", args)
    found = newest_version((r[0] for r in rows), record)
    if found is not None and found > known:
        raise StoreError(newer_message(schema or record, found, known))


def newest_version(versions: Iterable[Any], record: str) -> int | None:
    """The newest of the schema versions read from the ``record`` of migrations (None for
    none); ``StoreError`` for one that is no whole number: SQLite keeps text that does not read
    as a number in an INTEGER column (a hand edit, another program's row), and comparing it
    with the known versions raised ``TypeError`` out of an open and out of ``inspect``."""
    found: int | None = None
    for version in versions:
        if not isinstance(version, int) or isinstance(version, bool):
            raise StoreError(
                f"its {record} record holds a schema version that is no whole number "
                f"({version!r}): the file is damaged, or not tinyagents' own (nothing was "
                "written)"
            )
        found = version if found is None else max(found, version)
    return found


def newer_message(schema: str, found: int, known: int) -> str:
    """Why a file a newer tinyagents migrated is refused (by an open, and by ``inspect``)."""
    return (
        f"it was made by a newer version of tinyagents ({schema} version {found}; this "
        f"version knows up to {known}): use that version or a later one (nothing was written)"
    )


class OpenedFile:
    """The file a connection opened, by device and inode: SQLite goes on writing to the inode
    it opened after its name is deleted or renamed over (another file moved into its place),
    and what it writes there is lost with the inode. ``gone`` says so before a write, at the
    cost of one ``stat`` of the path (a microsecond or so beside the write's own hundreds)."""

    __slots__ = ("_id", "_path")

    def __init__(self, path: str) -> None:
        #: resolved once: a relative name would mean another file after a chdir
        self._path = os.path.realpath(path)
        self._id = _identity(self._path)

    def gone(self) -> str | None:
        """How the path stopped naming the file opened ("deleted or moved", "replaced"), or
        None."""
        try:
            now = _identity(self._path)
        except FileNotFoundError:
            return "deleted or moved"
        except OSError:  # unreadable for a moment (a permission, a stale mount): SQLite says
            return None
        return "replaced" if now != self._id else None


def _identity(path: str) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_dev, info.st_ino


def gone_error(what: str, path: str, how: str) -> StoreError:
    """The ``StoreError`` of a write to a file ``how`` (``OpenedFile.gone``) under ``what``."""
    return StoreError(
        f"{what} {path!r}: the file was {how} while it was open, and SQLite would write on "
        "to the file it opened, which the path no longer names: reopen it (nothing was "
        "written)"
    )


async def refuse_read_only(db: aiosqlite.Connection) -> None:
    """Raise ``StoreError`` when SQLite could open the file only to read it (its permissions,
    an immutable file, a read-only file system): each write would fail, one by one. Asked of
    SQLite itself, in a write transaction that changes nothing and is rolled back."""
    rows = await db.execute_fetchall("PRAGMA user_version")
    try:
        await db.execute("BEGIN IMMEDIATE")
        await db.execute(f"PRAGMA user_version = {int(next(iter(rows))[0])}")
    except sqlite3.OperationalError as exc:
        if not exc.sqlite_errorname.startswith("SQLITE_READONLY"):
            raise
        raise StoreError(
            "the file (or its -shm file beside it) is read-only for this process (its "
            "permissions, an immutable file or a read-only file system), and every write to it "
            "would fail: make it writable, or give a file that is (nothing was written)"
        ) from exc
    finally:
        await db.rollback()


def why_not_opened(path: str, exc: BaseException) -> str:
    """What a failed open says: ``exc``, and, when SQLite could not open the file because its
    directory takes no new file (SQLite makes the file's journal there), that."""
    # a read-only directory: CANTOPEN as root (an immutable one), READONLY_DIRECTORY else
    named = getattr(exc, "sqlite_errorname", "")
    if named not in ("SQLITE_CANTOPEN", "SQLITE_READONLY_DIRECTORY"):
        return str(exc)
    if os.path.islink(path) and not os.path.exists(path):  # a loop: it sent users to chmod
        try:
            os.stat(path)
        except OSError as gone:
            if gone.errno == errno.ELOOP:
                return (
                    f"{exc}: {path!r} is a symlink (to {os.readlink(path)!r}) that leads "
                    "nowhere (a loop): name the store file itself (nothing was written)"
                )
    if os.path.isdir(path):  # "unable to open database file" alone sent users to its folder
        return (
            f"{exc}: {path!r} is a directory, not a store file: name a file, e.g. "
            f"{os.path.join(path, 'runs.db')!r} (nothing was written)"
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):  # it was reported read-only: users fixed the wrong thing
        return (
            f"{exc}: its directory {folder!r} does not exist: create it, or name a file in a "
            "directory that does (nothing was written)"
        )
    if _takes_new_files(folder):
        return str(exc)
    return (
        f"{exc}: its directory {folder!r} is read-only for this process, and SQLite makes "
        "the file's journal (its -wal and -shm files) beside it: make the directory "
        "writable, or move the file (nothing was written)"
    )


def _takes_new_files(folder: str) -> bool:
    """Whether this process can make a file in ``folder`` (made and removed again; asked of
    the file system, as root's permission bits alone would say yes to an immutable folder)."""
    probe = os.path.join(folder, f".tinyagents-probe-{os.getpid()}-{time.monotonic_ns()}")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return True  # (another's probe of that name: the folder took it)
    except OSError:
        return False
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return True


async def use_wal(db: aiosqlite.Connection, timeout_s: float) -> None:
    """``PRAGMA journal_mode=WAL``, tried again for up to ``timeout_s`` while the file is
    locked: SQLite answers a journal-mode change "database is locked" at once, without its
    busy handler, while another connection opens the same new file (``serve --workers``
    opening one SQLite store failed on it now and then)."""
    deadline = _clock.monotonic() + timeout_s
    while True:
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or _clock.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.01)


async def migrate(
    db: aiosqlite.Connection, migrations: list[tuple[int, str]], *, name: str
) -> None:
    """Apply the migrations of schema ``name`` not yet recorded in the shared ``migrations``
    table (idempotent; several schemas, e.g. steering and checkpoints, can share one file).

    The migrations missing and their records are one transaction (``BEGIN IMMEDIATE``: one
    writer at a time), so a crash leaves all or none, and the versions are read, and a file a
    newer tinyagents migrated refused (``StoreError``), inside it: an open's first look
    (``refuse_newer``) comes before the lock, and a newer version migrating the file in
    between was not seen. Processes opening an older file at once wait for the lock in turn,
    and each after the first finds the work done; a failure (the file locked past the busy
    timeout) is rolled back and tried again, as many times as there are migrations, plus two
    (three were not enough for eight ``serve`` workers opening a new file)."""
    attempts = len(migrations) + 2
    for attempt in range(attempts):
        try:
            await _migrate_once(db, migrations, name=name)
            return
        except (sqlite3.IntegrityError, sqlite3.OperationalError):
            await db.rollback()
            if attempt == attempts - 1:
                raise
        except BaseException:
            await db.rollback()
            raise


async def _migrate_once(
    db: aiosqlite.Connection, migrations: list[tuple[int, str]], *, name: str
) -> None:
    await db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name TEXT NOT NULL, version INTEGER NOT NULL,"
        " applied_at TEXT NOT NULL, PRIMARY KEY (name, version))"
    )
    await db.execute("BEGIN IMMEDIATE")
    async with db.execute("SELECT version FROM migrations WHERE name = ?", (name,)) as cur:
        done = {r[0] for r in await cur.fetchall()}
    known = migrations[-1][0]
    newest = newest_version(done, "migrations")
    if newest is not None and newest > known:
        raise StoreError(newer_message(name, newest, known))
    for version, script in migrations:
        if version in done:
            continue
        body = script.strip().removeprefix("BEGIN;").removesuffix("COMMIT;")
        for statement in sql_statements(body):
            await db.execute(statement)
        await db.execute(
            "INSERT INTO migrations (name, version, applied_at) VALUES (?, ?, ?)",
            (name, int(version), _clock.now().isoformat()),
        )
    await db.commit()


def sql_statements(script: str) -> list[str]:
    """The SQL statements of ``script``, one by one (``execute`` takes one at a time, and
    ``executescript`` would commit the transaction the migration runs in), cut where SQLite
    says a statement is complete (never at a semicolon inside a string or a trigger)."""
    out: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                out.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):
        out.append(pending.strip())
    return out


#: The run holding a thread (``thread_holds``) and its snapshot (NULL: the run has no row).
_HOLDER = (
    "SELECT h.run_id, CAST(r.data AS BLOB), h.owner, h.taken_at FROM thread_holds h"
    " LEFT JOIN runs r ON r.run_id = h.run_id WHERE h.tenant_id = ? AND h.thread_id = ?"
)


def _held(row: Any, tenant_id: str) -> dict[str, Any] | None:
    """A thread's holder as ``_HOLDER`` read it: its run's snapshot (``unsaved_holder`` when
    the run has no row), or None."""
    if row is None:
        return None
    snapshot = None if row[1] is None else read_snapshot(row[1], row[0], tenant_id)
    return judged_holder(snapshot, row[0], row[2], row[3])
