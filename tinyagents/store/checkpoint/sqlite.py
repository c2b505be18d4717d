"""``SqliteCheckpointer``: durable checkpoints in one SQLite file (aiosqlite, WAL).

- The schema is created idempotently and versioned in ``checkpoint_migrations``; a newer
  process adds what is missing, several processes may race on it safely; a file an even
  newer one migrated is refused (checked again under the lock that migrates), as is a
  read-only one.
- Each statement first checks the path still names the file opened (one ``stat``): one
  deleted or renamed over would take the writes with it.
- WAL with ``synchronous=NORMAL``: a committed checkpoint survives the process being killed
  (not a power loss; use ``synchronous="FULL"`` for that).
- Needs SQLite 3.35+ (``RETURNING``). Every write is a single statement in autocommit mode, so coroutines sharing the
  connection never interleave inside a transaction (``delete_thread``, the one write of
  several statements, runs its transaction on a connection of its own). ``put`` is
  compare-and-set by the primary key ``(thread_id, ns, seq)`` plus a check that the parent
  is the row before it.
- Leases (``thread_leases``) give a thread one writer across processes: a lease of a
  process on this host that died is taken over at once (pid check); one from another host
  once it expires. Writers renew it as they checkpoint.
- Each taking writes a new fencing token into the lease row, and every ``put`` and
  ``put_writes`` is made, in its one statement, only while the row holds the writer's token
  (``_fence``): a writer whose lease expired and was taken over writes nothing
  (``ThreadBusy``). A write of a thread not held here is made only while no live holder's
  row is there. ``delete_thread`` refuses a thread a live writer holds (``ThreadBusy``).
- A process of a version before tokens that has the file open since before it was migrated
  writes with no fence: migration 3's triggers refuse its inserts (it cannot say ``fenced``)
  once the thread's lease row holds a token. Its deletes cannot be told apart, and are not.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any, NoReturn

from tinyagents.errors import (
    ArgumentError,
    ConfigurationError,
    StaleCheckpointError,
    StoreError,
    ThreadBusy,
)
from tinyagents.protocol.ids import shown_id, shown_repr
from tinyagents.store.base import sql_int
from tinyagents.store.checkpoint._lease import HOST, Lease
from tinyagents.store.checkpoint.base import (
    ROW_COLUMNS,
    Checkpointer,
    CheckpointRecord,
    WriteRecord,
    check_lease_ttl,
    check_limit,
    check_record_keys,
    check_write_keys,
    compact_json,
    read_write,
    stale_message,
    unheld_key,
)
from tinyagents.store.sqlite import (
    OpenedFile,
    connect,
    gone_error,
    newer_message,
    refuse_foreign_tables,
    refuse_newer,
    refuse_read_only,
    sql_statements,
    use_wal,
    why_not_opened,
)
from tinyagents.store.urls import check_file_name, is_sqlite_url, sqlite_path

#: The checkpointer whose ``saving_together`` block the current task is in, that block's
#: connection, in its transaction, and the threads it deleted (their failed releases are
#: forgotten once it commits): a list, emptied as the block ends, since a task started in the
#: block copies the variable and may save after it (on a closed connection, or one given back
#: to the pool, before).
_together: ContextVar[list[Any] | None] = ContextVar(
    "tinyagents_sqlite_saving_together", default=None
)

#: SQLite's ``synchronous`` levels
_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "checkpoints, pending writes, thread leases",
        """
        CREATE TABLE IF NOT EXISTS checkpoints (
            thread_id TEXT NOT NULL,
            ns TEXT NOT NULL,
            seq INTEGER NOT NULL,
            checkpoint_id TEXT NOT NULL UNIQUE,
            parent_id TEXT,
            step INTEGER NOT NULL,
            snapshot INTEGER NOT NULL,
            source TEXT NOT NULL,
            created_at REAL NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (thread_id, ns, seq)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS checkpoint_writes (
            thread_id TEXT NOT NULL,
            ns TEXT NOT NULL,
            frontier_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            UNIQUE (thread_id, ns, frontier_id, task_id, kind, key)
        );
        CREATE TABLE IF NOT EXISTS thread_leases (
            thread_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            expires_at REAL NOT NULL
        );
        """,
    ),
    (
        2,
        "fencing tokens of thread leases",
        # 0: a lease taken before tokens, by a version that fences nothing
        "ALTER TABLE thread_leases ADD COLUMN token INTEGER NOT NULL DEFAULT 0;",
    ),
    (
        3,
        "unfenced writes refused once a thread's lease has a token",
        # A process of a version before tokens that has the file open since before migration
        # 2 writes without a fence (its statements name no token, and it never reads the
        # migrations again). Every write of this version says it was fenced (``fenced`` = 1),
        # one of that version cannot (the column's default, 0): refused while the thread's
        # lease row holds a token, i.e. a writer of this version took the thread.
        """
        ALTER TABLE checkpoints ADD COLUMN fenced INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE checkpoint_writes ADD COLUMN fenced INTEGER NOT NULL DEFAULT 0;
        CREATE TRIGGER IF NOT EXISTS checkpoints_unfenced BEFORE INSERT ON checkpoints
        WHEN NEW.fenced = 0 AND EXISTS (SELECT 1 FROM thread_leases
            WHERE thread_id = NEW.thread_id AND token != 0)
        BEGIN
            SELECT RAISE(ABORT, 'a write without the fencing token of the thread: restart it');
        END;
        CREATE TRIGGER IF NOT EXISTS checkpoint_writes_unfenced BEFORE INSERT ON checkpoint_writes
        WHEN NEW.fenced = 0 AND EXISTS (SELECT 1 FROM thread_leases
            WHERE thread_id = NEW.thread_id AND token != 0)
        BEGIN
            SELECT RAISE(ABORT, 'a write without the fencing token of the thread: restart it');
        END;
        """,
    ),
]

#: The columns of a ``thread_leases`` row ``_lease`` reads, and its token.
_LEASE_COLUMNS = "owner, host, pid, expires_at, token"


def _new_token() -> int:
    """A fencing token for a lease being taken: new at each taking (not 0, the token of rows
    from before tokens), so that a writer whose lease was taken over, even by the same owner
    name, is told apart from the new holder."""
    return 1 + secrets.randbits(62)


def _path(path: str) -> str:
    """The file a checkpointer's ``path`` or ``sqlite:///`` URL names, read as a store's URL
    is: one that names no file (SQLite's private temporary database, every checkpoint gone at
    close) or a URL with a query (made a new file of that name) is a ``ConfigurationError``."""
    if is_sqlite_url(path):
        return check_file_name(sqlite_path(path, what="checkpointer"), what="checkpointer")
    if not path:
        raise ConfigurationError(
            "checkpointer path '' names no file: give one, e.g. 'graphs.db' or "
            "'sqlite:///graphs.db'; MemoryCheckpointer() keeps threads in memory"
        )
    return check_file_name(path, what="checkpointer")


def _lease(thread_id: str, row: Any) -> Lease:
    """The lease a ``thread_leases`` row (its ``_LEASE_COLUMNS``) holds; a ``StoreError``
    naming the thread for one no checkpointer wrote (SQLite keeps text in its REAL column): a
    bare TypeError otherwise."""
    owner, host, pid, expires_at, _ = row
    for name, value, kinds in (("pid", pid, int), ("expires_at", expires_at, (int, float))):
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise StoreError(
                f"the lease of thread {thread_id!r} no longer reads: its {name} column holds "
                f"{type(value).__name__} {value!r}; delete its thread_leases row once no "
                "process writes the thread"
            )
    return Lease(owner=owner, host=host, pid=pid, expires_at=expires_at)


class SqliteCheckpointer(Checkpointer):
    """Checkpoints in a SQLite file; ``async with SqliteCheckpointer("runs.db") as cp``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        snapshot_every: int = 50,
        lease_ttl: float = 60.0,
        synchronous: str = "NORMAL",
    ) -> None:
        super().__init__(snapshot_every=snapshot_every)
        self.lease_ttl = check_lease_ttl(lease_ttl)
        # it goes into a PRAGMA, which ignores a value it does not know
        if not isinstance(synchronous, str) or synchronous.upper() not in _SYNCHRONOUS:
            raise ArgumentError(  # a ConfigurationError, and the ValueError it was
                f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, got {shown_repr(synchronous)}"
            )
        self.synchronous = synchronous.upper()
        self.path = _path(os.fspath(path))
        #: ``CheckpointerClosed`` names it so (``refuse_closed``)
        self.described = f"SQLite checkpointer {self.path!r}"
        self._conn: Any = None
        #: The file opened: each statement first checks it is still there.
        self._file: OpenedFile | None = None
        self._setup_lock = asyncio.Lock()
        self._renew_after: dict[str, float] = {}
        #: thread -> the fencing token of the lease this checkpointer holds on it; gone at
        #: release, and once a write or renewal finds the lease taken over (``_lost``)
        self._tokens: dict[str, int] = {}
        #: The owner of each thread this process released but whose lease row could not be
        #: deleted (the database failed then): no longer a writer, whatever the row says.
        self._unreleased: dict[str, str] = {}
        #: Held by a ``saving_together`` block of a ``":memory:"`` database, whose one
        #: connection its transaction is on: other tasks' statements wait for its end.
        self._block = asyncio.Lock()

    # -- connection and schema -------------------------------------------------------------

    async def setup(self) -> None:
        """Connect and create the schema (idempotent). A file that is not a SQLite database,
        that a newer tinyagents migrated, or that this process can only read is refused with
        ``StoreError`` and left as it was; a failed setup leaves no connection (and so no
        thread) behind. A checkpointer closed (``aclose``) is not opened again:
        ``CheckpointerClosed``."""
        if self._conn is not None:
            return
        async with self._setup_lock:
            if self._conn is not None:
                return
            self.refuse_closed("open it")
            conn = None
            try:
                conn = await connect(self.path, isolation_level=None)
                await conn.execute("PRAGMA busy_timeout=10000")
                # Read before anything writes: a file that is not a database fails untouched.
                await conn.execute_fetchall("SELECT count(*) FROM sqlite_master")
                await refuse_foreign_tables(
                    conn,
                    ("checkpoints", "checkpoint_writes", "thread_leases"),
                    record="checkpoint_migrations",
                    record_columns=frozenset({"version", "name", "applied_at"}),
                    # its record is made first and its rows after the tables (_migrate): a
                    # process migrating beside this one shows tables with no row yet
                    ours=None,
                )
                await refuse_newer(conn, "checkpoint_migrations", MIGRATIONS[-1][0])
                await refuse_read_only(conn)
                await use_wal(conn, 10.0)
                await conn.execute(f"PRAGMA synchronous={self.synchronous}")
                await self._migrate(conn)
                self._file = None if self.path == ":memory:" else OpenedFile(self.path)
            except BaseException as exc:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
                if isinstance(exc, Exception):
                    raise StoreError(
                        f"cannot open SQLite checkpointer {self.path!r}: "
                        f"{why_not_opened(self.path, exc)}"
                    ) from exc
                raise
            if self._closed:  # closed while it opened: nothing stays open
                await conn.close()
                self.refuse_closed("open it")
            self._conn = conn

    async def _migrate(self, conn: Any) -> None:
        """Apply the missing migrations and their records in one transaction (``BEGIN
        IMMEDIATE``: one writer at a time), reading the versions, and refusing a file a newer
        tinyagents migrated (``StoreError``), inside it: setup's first look (``refuse_newer``)
        comes before the lock, and a newer version migrating the file in between was not
        seen."""
        await conn.execute("BEGIN IMMEDIATE")
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS checkpoint_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            async with conn.execute("SELECT version FROM checkpoint_migrations") as cur:
                done = {row[0] for row in await cur.fetchall()}
            known = MIGRATIONS[-1][0]
            if done and max(done) > known:
                raise StoreError(newer_message("checkpoint_migrations", max(done), known))
            for version, name, sql in MIGRATIONS:
                if version in done:
                    continue
                # one by one: executescript would commit the transaction
                for statement in sql_statements(sql):
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO checkpoint_migrations VALUES (?, ?, ?)",
                    (version, name, time.time()),
                )
            await conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.execute("ROLLBACK")
            raise

    async def _db(self) -> Any:
        if self._conn is None:
            await self.setup()
        return self._conn

    async def aclose(self) -> None:
        """Close the connection, for good, as PostgreSQL's: every call after it is
        ``CheckpointerClosed`` (the connection was opened again by the next call, so a save
        of a run its owner had closed the checkpointer under still landed), also a
        statement that was waiting for the connection when it closed. The lease rows of
        threads still held stay: another writer takes such a thread once its lease expired
        (``lease_ttl``)."""
        self._closed = True
        self._tokens.clear()
        self._renew_after.clear()
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    # -- checkpoints -----------------------------------------------------------------------

    async def put(self, record: CheckpointRecord) -> None:
        check_record_keys(record)
        params = (
            record.thread_id,
            record.ns,
            record.seq,
            record.checkpoint_id,
            record.parent_id,
            record.step,
            int(record.snapshot),
            record.source,
            record.created_at,
            compact_json(record.body()),
        )
        if record.parent_id is None:
            guard = "NOT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = ? AND ns = ?)"
            guard_params: tuple[Any, ...] = (record.thread_id, record.ns)
        else:
            guard = (
                "EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = ? AND ns = ? "
                "AND seq = ? AND checkpoint_id = ?)"
            )
            guard_params = (record.thread_id, record.ns, record.seq - 1, record.parent_id)

        async def insert(fence: str, fence_params: tuple[Any, ...]) -> bool:
            sql = (
                "INSERT INTO checkpoints (thread_id, ns, seq, checkpoint_id, parent_id, step, "
                f"snapshot, source, created_at, body, fenced) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                f"?, 1 WHERE {guard} AND {fence} RETURNING seq"
            )
            try:
                rows = await self._fetch(sql, params + guard_params + fence_params, integrity=True)
            except sqlite3.IntegrityError:
                return False
            return len(rows) == 1

        fence, fence_params = self._fence(record.thread_id)
        if await insert(fence, fence_params):
            return
        if not (await self._fetch(f"SELECT {fence}", fence_params))[0][0]:
            # held back by the lease: lost, or a holder's row (ThreadBusy); a dead one's
            fence, fence_params = await self._fence_past(record.thread_id)
            if await insert(fence, fence_params):
                return
            if not (await self._fetch(f"SELECT {fence}", fence_params))[0][0]:
                raise ThreadBusy(record.thread_id)
        raise StaleCheckpointError(stale_message(record))

    async def _fetch(
        self, sql: str, params: tuple[Any, ...] | list[Any], *, integrity: bool = False
    ) -> list[Any]:
        """The rows of one statement (autocommit: a write is committed when it returns); a
        driver's error (a lock held past the busy timeout, a damaged file, a missing table)
        is a ``StoreError`` naming the file, as docs/graph.md has a failing checkpointer's;
        ``integrity=True`` lets a constraint's ``sqlite3.IntegrityError`` out as it is."""
        db = await self._checked()
        try:
            return list(await db.execute_fetchall(sql, params))
        except (sqlite3.Error, ValueError) as exc:  # ValueError: a closed connection
            if integrity and isinstance(exc, sqlite3.IntegrityError):
                raise  # put's compare-and-set reads it as a stale checkpoint
            failed = StoreError(f"SQLite checkpointer {self.path!r}: {exc}")
            failed.__cause__, failed.__suppress_context__ = exc, True
        # closed under it: said as every call after ``aclose`` says it, with no cause (being
        # closed does not pass)
        self.refuse_closed("run a statement")
        raise failed

    async def _checked(self) -> Any:
        """The connection, once the path is known to name the file opened: in
        ``saving_together``, the block's own."""
        db = await self._db()
        how = self._file.gone() if self._file is not None else None
        if how is not None:
            raise gone_error("SQLite checkpointer", self.path, how)
        together = _together.get()
        if together and together[0] is self:
            return together[1]
        if self._file is None and self._block.locked():  # ":memory:": another task's block
            await self._wait_for_block()
        return db

    async def _wait_for_block(self) -> None:
        """Wait for the ``saving_together`` block of another task on the one connection of a
        ``":memory:"`` database to end, as long as a file's busy timeout (10 s) waits for
        another connection's write lock, and fail as it does: ``StoreError``."""
        await self._take_block()
        self._block.release()

    async def _take_block(self) -> None:
        """Take ``_block`` (``_wait_for_block``'s wait and failure)."""
        try:
            async with asyncio.timeout(10.0):
                await self._block.acquire()
        except TimeoutError:
            raise StoreError(
                f"SQLite checkpointer {self.path!r}: database is locked (a block of saves "
                "made together, of another task, held it for 10 s)"
            ) from None

    @contextlib.asynccontextmanager
    async def saving_together(self) -> AsyncIterator[None]:
        """One transaction for the block's statements (the current task's), on a connection
        of its own, as ``delete_thread``'s: the shared one runs each statement on its own,
        and other coroutines' statements would join a transaction there. ``BEGIN
        IMMEDIATE``: the file's write lock is taken first, so the block cannot fail half way
        for another writer; theirs wait for its end (``busy_timeout``). A ``":memory:"``
        database has no second connection: the block's transaction is on its one connection,
        and other tasks' statements wait for its end (as long as ``busy_timeout``)."""
        together = _together.get()
        if together and together[0] is self:
            yield
            return
        db = await self._checked()
        if self._file is None:
            async with self._alone(db):
                yield
            return
        try:
            conn = await connect(self.path, isolation_level=None)
        except (sqlite3.Error, ValueError) as exc:
            raise StoreError(f"SQLite checkpointer {self.path!r}: {exc}") from exc
        deleted: dict[str, str | None] = {}
        token = _together.set(block := [self, conn, deleted])
        try:
            await self._fetch("PRAGMA busy_timeout=10000", ())
            await self._fetch(f"PRAGMA synchronous={self.synchronous}", ())
            await self._fetch("BEGIN IMMEDIATE", ())
            try:
                yield
            except BaseException:
                with contextlib.suppress(sqlite3.Error, ValueError):
                    await conn.execute("ROLLBACK")
                raise
            await self._fetch("COMMIT", ())
            self._forget_unreleased(deleted)
        finally:
            block.clear()  # ended: a task started in it saves on its own now
            _together.reset(token)
            await conn.close()

    @contextlib.asynccontextmanager
    async def _alone(self, db: Any) -> AsyncIterator[None]:
        """``saving_together`` on a ``":memory:"`` database: one transaction on its one
        connection, which the block holds (``_block``) until it ends."""
        await self._take_block()
        deleted: dict[str, str | None] = {}
        token = _together.set(block := [self, db, deleted])
        try:
            await self._fetch("BEGIN IMMEDIATE", ())
            try:
                yield
            except BaseException:
                with contextlib.suppress(sqlite3.Error, ValueError):
                    await db.execute("ROLLBACK")
                raise
            await self._fetch("COMMIT", ())
            self._forget_unreleased(deleted)
        finally:
            block.clear()  # ended: a task started in it saves on its own now
            _together.reset(token)
            self._block.release()

    def _forget_unreleased(self, deleted: dict[str, str | None]) -> None:
        """Threads whose lease rows are deleted for good, each with the failed release
        (``_unreleased``) it had when deleted: that one has no row left to take over (a
        release failing since, of a run that took the thread again, has its own row)."""
        for thread_id, unreleased in deleted.items():
            if unreleased is not None and self._unreleased.get(thread_id) == unreleased:
                del self._unreleased[thread_id]

    async def latest(self, thread_id: str, ns: str = "") -> CheckpointRecord | None:
        if unheld_key(thread_id, ns, nul=False):
            return None
        rows = await self._fetch(
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = ? AND ns = ? "
            "ORDER BY seq DESC LIMIT 1",
            (thread_id, ns),
        )
        return CheckpointRecord.from_row(thread_id, ns, rows[0]) if rows else None

    async def get(
        self, thread_id: str, checkpoint_id: str, ns: str = ""
    ) -> CheckpointRecord | None:
        if unheld_key(thread_id, checkpoint_id, ns, nul=False):
            return None
        rows = await self._fetch(
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE checkpoint_id = ? AND thread_id = ? "
            "AND ns = ?",
            (checkpoint_id, thread_id, ns),
        )
        return CheckpointRecord.from_row(thread_id, ns, rows[0]) if rows else None

    async def chain(
        self, thread_id: str, ns: str = "", checkpoint_id: str | None = None
    ) -> list[CheckpointRecord]:
        if unheld_key(thread_id, ns, checkpoint_id, nul=False):
            return []
        if checkpoint_id is None:
            target = "(SELECT MAX(seq) FROM checkpoints WHERE thread_id = ?1 AND ns = ?2)"
        else:
            target = (
                "(SELECT seq FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                "AND checkpoint_id = ?3)"
            )
        sql = (
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
            f"AND seq <= {target} AND seq >= (SELECT MAX(seq) FROM checkpoints "
            f"WHERE thread_id = ?1 AND ns = ?2 AND snapshot = 1 AND seq <= {target}) "
            "ORDER BY seq"
        )
        params = (thread_id, ns) if checkpoint_id is None else (thread_id, ns, checkpoint_id)
        rows = await self._fetch(sql, params)
        return [CheckpointRecord.from_row(thread_id, ns, row) for row in rows]

    async def list(
        self, thread_id: str, ns: str = "", *, limit: int | None = None
    ) -> list[CheckpointRecord]:
        check_limit(limit)
        if unheld_key(thread_id, ns, nul=False):
            return []
        rows = await self._fetch(
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = ? AND ns = ? "
            "ORDER BY seq DESC LIMIT ?",
            (thread_id, ns, -1 if limit is None else sql_int(limit)),
        )
        return [CheckpointRecord.from_row(thread_id, ns, row, with_values=False) for row in rows]

    async def list_before(
        self, thread_id: str, ns: str, before: str, *, limit: int | None = None
    ) -> builtins.list[CheckpointRecord] | None:
        check_limit(limit, "list_before")
        if unheld_key(thread_id, ns, before, nul=False):
            return None
        found = await self._fetch(
            "SELECT seq FROM checkpoints WHERE checkpoint_id = ? AND thread_id = ? AND ns = ?",
            (before, thread_id, ns),
        )
        if not found:
            return None
        rows = await self._fetch(
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = ? AND ns = ? AND seq < ? "
            "ORDER BY seq DESC LIMIT ?",
            (thread_id, ns, found[0][0], -1 if limit is None else sql_int(limit)),
        )
        return [CheckpointRecord.from_row(thread_id, ns, row, with_values=False) for row in rows]

    # -- pending writes --------------------------------------------------------------------

    async def put_writes(
        self, thread_id: str, ns: str, frontier_id: str, writes: builtins.list[WriteRecord]
    ) -> None:
        check_write_keys(thread_id, ns, frontier_id, writes)
        if not writes:
            return
        values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, 1)"] * len(writes))
        params: list[Any] = []
        for w in writes:
            params += [thread_id, ns, frontier_id, w.task_id, w.kind, w.key, compact_json(w.value)]

        # one statement: the writes of a task land together or not at all, and only while
        # the lease is the writer's (``_fence``); every row is inserted or updated unless
        # the fence held them back
        async def upsert(fence: str, fence_params: tuple[Any, ...]) -> bool:
            saved = await self._fetch(
                "INSERT INTO checkpoint_writes (thread_id, ns, frontier_id, task_id, kind, "
                f"key, value, fenced) SELECT * FROM (VALUES {values}) WHERE {fence} "
                "ON CONFLICT (thread_id, ns, frontier_id, task_id, kind, key) "
                "DO UPDATE SET value = excluded.value RETURNING 1",
                [*params, *fence_params],
            )
            return bool(saved)

        if await upsert(*self._fence(thread_id)):
            return
        if not await upsert(*await self._fence_past(thread_id)):
            raise ThreadBusy(thread_id)

    async def get_writes(
        self, thread_id: str, ns: str, frontier_id: str
    ) -> builtins.list[WriteRecord]:
        if unheld_key(thread_id, ns, frontier_id, nul=False):
            return []
        rows = await self._fetch(
            "SELECT task_id, kind, key, value FROM checkpoint_writes WHERE thread_id = ? "
            "AND ns = ? AND frontier_id = ? ORDER BY rowid",
            (thread_id, ns, frontier_id),
        )
        return [read_write(thread_id, ns, frontier_id, t, k, key, v) for t, k, key, v in rows]

    async def delete_thread(self, thread_id: str) -> None:
        """Forget the thread, unless someone holds it (``ThreadBusy``, nothing deleted): a
        writer of this checkpointer, or a live one of another process. The lease is read
        and the rows deleted in one transaction, on a connection of its own (the shared one
        runs each statement on its own, and other coroutines' statements would join a
        transaction there), so nobody takes the thread half deleted. In a
        ``saving_together`` block, in the block's transaction (its connection holds the
        file's write lock: a connection of its own waited for it, the busy timeout, and
        failed), undone with the block's saves if the block raises."""
        if unheld_key(thread_id, nul=False):
            return  # no row can have it
        self.refuse_closed(f"delete thread {shown_id(thread_id)}")
        self.refuse_held(thread_id)
        await self._checked()
        together = _together.get()
        if together and together[0] is self and self._file is not None:
            rows = await self._fetch(
                f"SELECT {_LEASE_COLUMNS} FROM thread_leases WHERE thread_id = ?", (thread_id,)
            )
            unreleased = self._unreleased.get(thread_id)
            if rows:
                held = _lease(thread_id, rows[0])
                if not held.is_dead(time.time()) and held.owner != unreleased:
                    raise ThreadBusy(thread_id)
            for table in ("checkpoints", "checkpoint_writes", "thread_leases"):
                await self._fetch(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
            together[2][thread_id] = (
                unreleased  # undone if the block raises: forgotten at its commit
            )
            return
        if self._file is None:  # ":memory:": no other process can hold a thread
            for table in ("checkpoints", "checkpoint_writes", "thread_leases"):
                await self._fetch(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
            unreleased = self._unreleased.get(thread_id)
            if together and together[0] is self:
                together[2][thread_id] = unreleased  # in the block's transaction, as above
            else:
                self._forget_unreleased({thread_id: unreleased})
            return
        unreleased = self._unreleased.get(thread_id)
        try:
            await asyncio.to_thread(self._delete_thread, thread_id, unreleased)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite checkpointer {self.path!r}: {exc}") from exc
        self._forget_unreleased({thread_id: unreleased})

    def _delete_thread(self, thread_id: str, unreleased: str | None) -> None:
        """``delete_thread``'s transaction, in a worker thread: ``BEGIN IMMEDIATE`` holds the
        file's write lock, so no lease is taken between the look at it and the deletes."""
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=10000")
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    f"SELECT {_LEASE_COLUMNS} FROM thread_leases WHERE thread_id = ?",
                    (thread_id,),
                ).fetchone()
                if row is not None:
                    held = _lease(thread_id, row)
                    if not held.is_dead(time.time()) and held.owner != unreleased:
                        raise ThreadBusy(thread_id)
                for table in ("checkpoints", "checkpoint_writes", "thread_leases"):
                    conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    # -- leases ----------------------------------------------------------------------------

    async def _acquire_lease(self, thread_id: str, owner: str) -> None:
        pid = os.getpid()
        for _ in range(3):  # only a lost race loops
            now = time.time()
            expires = now + self.lease_ttl
            rows = await self._fetch(
                f"SELECT {_LEASE_COLUMNS} FROM thread_leases WHERE thread_id = ?",
                (thread_id,),
            )
            if not rows:
                token = _new_token()
                sql = (
                    "INSERT INTO thread_leases (thread_id, owner, host, pid, expires_at, token) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO NOTHING "
                    "RETURNING thread_id"
                )
                params: tuple[Any, ...] = (thread_id, owner, HOST, pid, expires, token)
            else:
                held, held_token = _lease(thread_id, rows[0]), rows[0][4]
                ours = self._unreleased.get(thread_id) == held.owner  # released, not deleted
                if held.owner != owner and not held.is_dead(now) and not ours:
                    raise ThreadBusy(thread_id)
                # the same owner taking it again here keeps its token; any other taking
                # fences the writes of the lease it replaces
                again = held.owner == owner and held_token == self._tokens.get(thread_id)
                token = held_token if again else _new_token()
                sql = (
                    "UPDATE thread_leases SET owner = ?, host = ?, pid = ?, expires_at = ?, "
                    "token = ? WHERE thread_id = ? AND owner = ? AND token = ? "
                    "RETURNING thread_id"
                )
                params = (owner, HOST, pid, expires, token, thread_id, held.owner, held_token)
            if await self._fetch(sql, params):
                self._tokens[thread_id] = token
                self._renew_after[thread_id] = now + self.lease_ttl / 2
                return
        raise ThreadBusy(thread_id)

    async def _release_lease(self, thread_id: str, owner: str) -> None:
        self._renew_after.pop(thread_id, None)
        token = self._tokens.pop(thread_id, None)
        if self._conn is None or token is None:
            return  # closed, or the lease was lost: the row is not ours to delete
        try:
            await self._fetch(
                "DELETE FROM thread_leases WHERE thread_id = ? AND owner = ? AND token = ?",
                (thread_id, owner, token),
            )
        except StoreError:
            # as PostgreSQL's: the run's own outcome (its result, its error) is what its
            # caller hears of; the row left is this process's and is taken over at once here
            # (``_acquire_lease``), by another process once it expires
            self._unreleased[thread_id] = owner
        else:
            self._unreleased.pop(thread_id, None)

    async def renew(self, thread_id: str, owner: str) -> None:
        token = self._tokens.get(thread_id)
        if token is None:
            raise ThreadBusy(thread_id)  # never taken here, or lost
        now = time.time()
        if now < self._renew_after.get(thread_id, 0.0):
            return
        kept = await self._fetch(
            "UPDATE thread_leases SET expires_at = ? WHERE thread_id = ? AND owner = ? "
            "AND token = ? RETURNING thread_id",
            (now + self.lease_ttl, thread_id, owner, token),
        )
        if not kept:
            self._lost(thread_id)
        self._renew_after[thread_id] = now + self.lease_ttl / 2

    def _fence(self, thread_id: str) -> tuple[str, tuple[Any, ...]]:
        """The condition every write of ``thread_id`` is made on, in its own statement, and
        its parameters. Held here: the lease row still holds this checkpointer's token, so a
        writer whose lease was taken over (expired, and taken by another process) changes
        nothing. Not held here (never taken, refused, or lost): there is no lease row; a
        write that finds one asks ``_fence_past`` and tries once more."""
        token = self._tokens.get(thread_id)
        if token is not None:
            return (
                "EXISTS (SELECT 1 FROM thread_leases WHERE thread_id = ? AND token = ?)",
                (thread_id, token),
            )
        return "NOT EXISTS (SELECT 1 FROM thread_leases WHERE thread_id = ?)", (thread_id,)

    async def _fence_past(self, thread_id: str) -> tuple[str, tuple[Any, ...]]:
        """The fence of a write ``_fence``'s held back: ``ThreadBusy`` when the lease held
        here was taken over (its token is forgotten, ``_lost``) or a live holder's row is
        there; for a dead holder's row, or none now, the condition that it still is so."""
        if thread_id in self._tokens:
            self._lost(thread_id)
        rows = await self._fetch(
            f"SELECT {_LEASE_COLUMNS} FROM thread_leases WHERE thread_id = ?", (thread_id,)
        )
        if not rows:
            return self._fence(thread_id)
        held = _lease(thread_id, rows[0])
        if not held.is_dead(time.time()) and self._unreleased.get(thread_id) != held.owner:
            raise ThreadBusy(thread_id)
        return (
            "NOT EXISTS (SELECT 1 FROM thread_leases WHERE thread_id = ? AND token IS NOT ?)",
            (thread_id, rows[0][4]),
        )

    def _lost(self, thread_id: str) -> NoReturn:
        """A write or renewal found the lease taken over: forget its token (a token is never
        given again) and raise ``ThreadBusy``."""
        self._tokens.pop(thread_id, None)
        self._renew_after.pop(thread_id, None)
        raise ThreadBusy(thread_id)

    # -- introspection ---------------------------------------------------------------------

    async def storage_bytes(self) -> int:
        """Bytes the database occupies once the WAL is folded in (for benchmarks)."""
        db = await self._db()
        await db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if self.path == ":memory:":
            raise StoreError("an in-memory database has no size on disk")
        rows = await self._fetch(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()", ()
        )
        return int(rows[0][0])
