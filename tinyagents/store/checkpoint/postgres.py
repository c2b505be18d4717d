"""``PostgresCheckpointer``: graph checkpoints in PostgreSQL, shared by many machines.

    async with PostgresCheckpointer("postgresql://user@db/agents") as cp:
        graph = builder.compile(checkpointer=cp)

The same contract as ``SqliteCheckpointer`` (``tests/graph/test_checkpointer_conformance.py``
runs on both): deltas with a snapshot every ``snapshot_every`` checkpoints, ``put`` is
compare-and-set on the parent (the primary key ``(thread_id, ns, seq)`` plus a check that the
parent is the row before), pending writes replaced in place.

One writer per thread, enforced by the database:

- ``acquire`` takes a session-level advisory lock on the thread, held by a connection of the
  checkpointer's own (the *lease connection*). ``pg_try_advisory_lock`` is atomic: of two
  processes racing on a thread exactly one gets it, the other gets ``ThreadBusy``. When the
  holder dies its connection closes and the lock is free at once; when its machine vanishes,
  within the TCP keepalive window (about ``lease_ttl`` seconds).
- The holder also writes a lease row with a *fencing token* (a sequence number, new at each
  acquisition). Every checkpoint and pending write it puts is conditional on the row still
  holding its token, so a writer that lost its lock (its connection dropped and someone else
  took the thread) can never append another checkpoint nor replace the new holder's pending
  writes: it gets ``ThreadBusy``. ``renew`` checks the same, and
  takes the lock again on a new connection when the old one dropped and nobody took over.
- A write of a thread this checkpointer does not hold (never taken, refused, or lost: its
  token is forgotten then) is made only while nobody holds it: it takes the thread's lock,
  shared, for its own transaction, which a holder's lock refuses (``ThreadBusy``).
- ``delete_thread`` takes the thread's lock, shared, for its transaction: a thread anyone
  holds is ``ThreadBusy``, nothing deleted.
- A save (checkpoint or pending write) of a thread held here rides out a server out of reach
  the way ``renew`` does (``_while_the_lease_lasts``, one retry loop for both): tried again
  until ``lease_ttl`` after the lease was last confirmed, every try fenced by the token, then
  ``LeaseExpired``.

The advisory lock lives in a session: behind a pooler (PgBouncer) the lease connection needs
session pooling; transaction pooling would drop it.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import itertools
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from tinyagents.errors import (
    CheckpointerClosed,
    ConfigurationError,
    LeaseExpired,
    StaleCheckpointError,
    StoreError,
    ThreadBusy,
)
from tinyagents.protocol.ids import shown_id, shown_repr
from tinyagents.store._postgres import (
    AGAIN,
    AGAIN_AFTER_S,
    READ_ONLY,
    cause,
    check_settings,
    close_pool,
    connection,
    db_errors,
    fetch_again,
    lock_key,
    mapped_errors,
    may_pass,
    migrate,
    open_pool,
    quote_ident,
    said,
    split_schema,
    transaction,
)
from tinyagents.store.base import may_pass as may_pass_error
from tinyagents.store.base import sql_int
from tinyagents.store.checkpoint._lease import HOST
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
from tinyagents.store.urls import redacted

#: The checkpointer whose ``saving_together`` block the current task is in, and that
#: block's connection, in its transaction: a list, emptied as the block ends, since a task
#: started in the block copies the variable and may save after it (on a closed connection,
#: or one given back to the pool, before).
_together: ContextVar[list[Any] | None] = ContextVar(
    "tinyagents_postgres_saving_together", default=None
)

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE checkpoints (
            thread_id TEXT NOT NULL,
            ns TEXT NOT NULL,
            seq INTEGER NOT NULL,
            checkpoint_id TEXT NOT NULL UNIQUE,
            parent_id TEXT,
            step INTEGER NOT NULL,
            snapshot BOOLEAN NOT NULL,
            source TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (thread_id, ns, seq)
        );
        CREATE TABLE checkpoint_writes (
            thread_id TEXT NOT NULL,
            ns TEXT NOT NULL,
            frontier_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            pos BIGINT GENERATED ALWAYS AS IDENTITY,
            UNIQUE (thread_id, ns, frontier_id, task_id, kind, key)
        );
        CREATE SEQUENCE thread_lease_tokens;
        CREATE TABLE thread_leases (
            thread_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            token BIGINT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            backend_pid INTEGER NOT NULL,
            acquired_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        """,
    ),
]


#: The longest pause between two tries of a renewal or a save riding out a lost connection
#: (``_while_the_lease_lasts``).
_RIDE_OUT_PAUSE_MAX_S = 1.0

_T = TypeVar("_T")

#: PostgreSQL's ``synchronous_commit`` values (it reads them in any case; ``on``/``off``
#: also as ``true``/``false``, ``yes``/``no``, ``1``/``0``).

_SYNCHRONOUS_COMMIT = ("on", "off", "local", "remote_write", "remote_apply")
_SYNCHRONOUS_COMMIT_ALIASES = {
    "true": "on",
    "yes": "on",
    "1": "on",
    "false": "off",
    "no": "off",
    "0": "off",
}


def _synchronous_commit(value: object) -> str:
    """The ``synchronous_commit`` setting, checked when the checkpointer is made: one the
    server refuses (or a non-string, which asyncpg refuses) failed only at ``setup``, as a
    ``StoreError`` that hid which argument was wrong."""
    if isinstance(value, str):
        name = value.strip().lower()
        name = _SYNCHRONOUS_COMMIT_ALIASES.get(name, name)
        if name in _SYNCHRONOUS_COMMIT:
            return name
    raise ConfigurationError(
        f"synchronous_commit must be one of {', '.join(_SYNCHRONOUS_COMMIT)}, got {shown_repr(value)}"
    )


class PostgresCheckpointer(Checkpointer):
    """Checkpoints in PostgreSQL; ``async with PostgresCheckpointer(dsn) as cp``.

    ``schema`` keeps the tables in a PostgreSQL schema of their own (created if missing);
    ``lease_ttl`` bounds how long a vanished machine's threads stay taken (TCP keepalive of
    the lease connection) and how often writers check their lease. ``synchronous_commit``
    is the server setting of the checkpointer's connections: ``"on"`` (the default) returns
    from ``put`` once the checkpoint is flushed to the server's disk; ``"off"`` returns
    sooner (about three times as many checkpoints per second from one writer on the
    development machine: ``benchmarks/checkpoint_backends.py``), and a crash of the *server*
    may then lose the last fraction of a second of checkpoints, never the order of a
    thread's history (a client crash loses nothing either way).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        snapshot_every: int = 50,
        lease_ttl: float = 60.0,
        synchronous_commit: str = "on",
        min_size: int = 1,
        max_size: int = 10,
        command_timeout: float | None = 60.0,
    ) -> None:
        check_settings(
            min_size=min_size,
            max_size=max_size,
            command_timeout=command_timeout,
            lease_ttl=lease_ttl,
        )
        super().__init__(snapshot_every=snapshot_every)
        self.url = redacted(dsn)
        self.dsn, self.schema = split_schema(dsn, schema)
        self.lease_ttl = check_lease_ttl(lease_ttl)
        self.synchronous_commit = _synchronous_commit(synchronous_commit)
        self.min_size = min_size
        self.max_size = max_size
        self.command_timeout = command_timeout
        #: The schema the tables are in, once set up.
        self.schema_name = ""
        self._pool: Any = None
        self._setup_lock = asyncio.Lock()
        self._lease_conn: Any = None
        self._lease_lock = asyncio.Lock()  # one statement at a time on the lease connection
        self._tokens: dict[str, tuple[str, int]] = {}  # thread -> (owner, fencing token)
        self._renew_after: dict[str, float] = {}
        #: thread -> when its lease was last confirmed (taken, or renewed): ``renew`` rides
        #: out a lost connection until ``lease_ttl`` after it.
        self._confirmed_at: dict[str, float] = {}
        #: thread -> the lease connection its lock was taken on: the lock went with that
        #: connection, so a thread whose lock is on an older one takes it again at renewal.
        self._locked_on: dict[str, Any] = {}
        #: ``CheckpointerClosed`` names it so (``refuse_closed``)
        self.described = f"PostgreSQL checkpointer {self.url}"

    # -- connection and schema -------------------------------------------------------------

    async def setup(self) -> None:
        """Connect and create or migrate the schema (idempotent); ``StoreError`` when the
        database cannot be reached, and then no connection is left open. A checkpointer
        closed (``aclose``) is not opened again: ``StoreError``."""
        if self._pool is not None:
            return
        async with self._setup_lock:
            if self._pool is not None:
                return
            self.refuse_closed("open it")
            pool = None
            try:
                async with mapped_errors(f"open the checkpointer at {self.url}"):
                    pool, schema = await open_pool(
                        self.dsn,
                        schema=self.schema,
                        min_size=self.min_size,
                        max_size=self.max_size,
                        command_timeout=self.command_timeout,
                        settings={"synchronous_commit": self.synchronous_commit},
                    )
                    async with pool.acquire() as conn:
                        await migrate(conn, schema, "checkpoints", MIGRATIONS, url=self.url)
            except BaseException:
                if pool is not None:
                    with contextlib.suppress(Exception):
                        await pool.close()
                raise
            if self._closed:  # closed while it opened: nothing stays open
                await close_pool(pool, self.command_timeout)
                self.refuse_closed("open it")
            self.schema_name = schema
            self._pool = pool

    async def _db(self) -> Any:
        if self._pool is None:
            await self.setup()
        return self._pool

    async def aclose(self) -> None:
        """Close the connections, for good: a save riding out an outage
        (``_while_the_lease_lasts``) ends with a ``StoreError`` saying the checkpointer is
        closed (``CheckpointerClosed``), and nothing opens them again (a later call is that
        error too, as is a statement of a thread not held here that was under way). Threads
        still held are free once the lease connection is closed (their rows stay until the
        next holder replaces them). On a stalled server each of the two waits
        ``command_timeout`` seconds at most, then the connections are cut."""
        self._closed = True
        async with self._lease_lock:
            await self._drop_lease_connection()
        self._tokens.clear()
        self._renew_after.clear()
        self._confirmed_at.clear()
        self._locked_on.clear()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await close_pool(pool, self.command_timeout)

    async def _fetch(self, what: str, sql: str, *args: Any) -> list[Any]:
        return (await self._fetch_again(what, sql, *args))[0]

    async def _fetch_again(self, what: str, sql: str, *args: Any) -> tuple[list[Any], bool]:
        """``fetch_again``: every statement here is a read or an idempotent write, and a graph
        run must not fail for a dropped connection. In ``saving_together``, on the block's
        connection, once."""
        together = _together.get()
        if together and together[0] is self:
            return await self._fetch_together(together[1], what, sql, *args), False
        pool = await self._db()
        try:
            async with mapped_errors(what, command_timeout=self.command_timeout):
                return await fetch_again(pool, sql, *args, wait_s=self.command_timeout)
        except StoreError as exc:
            failed = exc
        # closed under it (its try again found the pool closed): said as every call after
        # ``aclose`` says it, out here where no cause comes with it, so it does not pass
        self.refuse_closed(what)
        raise failed

    async def _fetch_together(self, conn: Any, what: str, sql: str, *args: Any) -> list[Any]:
        """A statement of a ``saving_together`` block, in its transaction: not tried again,
        as a failed statement ends the transaction; so its failure is one that does not pass
        (raised without its cause), not ridden out (``_while_the_lease_lasts``)."""
        try:
            async with mapped_errors(what, command_timeout=self.command_timeout):
                return list(await conn.fetch(sql, *args))
        except StoreError as exc:
            failed = StoreError(f"{exc} (in a transaction of saves made together: none made)")
        raise failed

    @contextlib.asynccontextmanager
    async def saving_together(self) -> AsyncIterator[None]:
        """One transaction, on a connection of the pool, for the block's statements (the
        current task's): committed when it ends, rolled back when it raises, by the server
        when the process dies in it."""
        together = _together.get()
        if together and together[0] is self:
            yield
            return
        pool = await self._db()
        raised: BaseException | None = None  # by the block: let out as it is
        try:
            async with transaction(pool, self.command_timeout) as conn:
                token = _together.set(block := [self, conn])
                try:
                    yield
                except BaseException as exc:
                    raised = exc
                    raise
                finally:
                    block.clear()  # ended: a task started in it saves on its own now
                    _together.reset(token)
        except db_errors() as exc:
            if exc is raised:
                raise
            raise StoreError(
                f"PostgreSQL: could not save together: {said(exc, self.command_timeout)}"
            ) from cause(exc)

    # -- checkpoints -----------------------------------------------------------------------

    async def put(self, record: CheckpointRecord) -> None:
        check_record_keys(record)
        await self._db()  # the lock keys name the schema
        held = self._tokens.get(record.thread_id)
        fence, fenced_by = self._fence(record.thread_id, held, 11)
        args: list[Any] = [
            record.thread_id,
            record.ns,
            record.seq,
            record.checkpoint_id,
            record.parent_id,
            record.step,
            record.snapshot,
            record.source,
            record.created_at,
            compact_json(record.body()),
            fenced_by,
        ]
        if record.parent_id is None:
            guard = "NOT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1 AND ns = $2)"
        else:
            guard = (
                "EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1 AND ns = $2 "
                "AND seq = $3 - 1 AND checkpoint_id = $5)"
            )
        guard += f" AND {fence}"
        sql = (
            "INSERT INTO checkpoints (thread_id, ns, seq, checkpoint_id, parent_id, step, "
            "snapshot, source, created_at, body) SELECT $1::text, $2::text, $3::integer, $4::text, "
            "$5::text, $6::integer, $7::boolean, $8::text, $9::float8, $10::text "
            f"WHERE {guard} ON CONFLICT DO NOTHING RETURNING seq"
        )
        tried = False

        async def save() -> None:
            nonlocal tried
            tried_before, tried = tried, True
            inserted, again = await self._fetch_again(
                f"save checkpoint {record.checkpoint_id}", sql, *args
            )
            if inserted or ((again or tried_before) and await self._saved(record)):
                return  # saved now, or by an earlier attempt (its reply lost with its connection)
            if await self._taken(record.thread_id, held):
                raise ThreadBusy(record.thread_id)
            raise StaleCheckpointError(stale_message(record))

        await self._while_the_lease_lasts(record.thread_id, held, save)

    async def _saved(self, record: CheckpointRecord) -> bool:
        """Whether the thread holds ``record`` at its place in the chain already."""
        rows = await self._fetch(
            f"read checkpoint {record.checkpoint_id}",
            "SELECT 1 FROM checkpoints WHERE thread_id = $1 AND ns = $2 AND seq = $3 "
            "AND checkpoint_id = $4",
            record.thread_id,
            record.ns,
            record.seq,
            record.checkpoint_id,
        )
        return bool(rows)

    async def latest(self, thread_id: str, ns: str = "") -> CheckpointRecord | None:
        if unheld_key(thread_id, ns, nul=True):
            return None
        rows = await self._fetch(
            f"read thread {shown_id(thread_id)}",
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = $1 AND ns = $2 "
            "ORDER BY seq DESC LIMIT 1",
            thread_id,
            ns,
        )
        return CheckpointRecord.from_row(thread_id, ns, rows[0]) if rows else None

    async def get(
        self, thread_id: str, checkpoint_id: str, ns: str = ""
    ) -> CheckpointRecord | None:
        if unheld_key(thread_id, checkpoint_id, ns, nul=True):
            return None
        rows = await self._fetch(
            f"read checkpoint {shown_id(checkpoint_id)}",
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE checkpoint_id = $1 AND thread_id = $2 "
            "AND ns = $3",
            checkpoint_id,
            thread_id,
            ns,
        )
        return CheckpointRecord.from_row(thread_id, ns, rows[0]) if rows else None

    async def chain(
        self, thread_id: str, ns: str = "", checkpoint_id: str | None = None
    ) -> list[CheckpointRecord]:
        if unheld_key(thread_id, ns, checkpoint_id, nul=True):
            return []
        if checkpoint_id is None:
            target = "(SELECT MAX(seq) FROM checkpoints WHERE thread_id = $1 AND ns = $2)"
            args: tuple[Any, ...] = (thread_id, ns)
        else:
            target = (
                "(SELECT seq FROM checkpoints WHERE thread_id = $1 AND ns = $2 "
                "AND checkpoint_id = $3)"
            )
            args = (thread_id, ns, checkpoint_id)
        sql = (
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = $1 AND ns = $2 "
            f"AND seq <= {target} AND seq >= (SELECT MAX(seq) FROM checkpoints "
            f"WHERE thread_id = $1 AND ns = $2 AND snapshot AND seq <= {target}) "
            "ORDER BY seq"
        )
        rows = await self._fetch(f"read thread {shown_id(thread_id)}", sql, *args)
        return [CheckpointRecord.from_row(thread_id, ns, row) for row in rows]

    async def list(
        self, thread_id: str, ns: str = "", *, limit: int | None = None
    ) -> list[CheckpointRecord]:
        check_limit(limit)
        if unheld_key(thread_id, ns, nul=True):
            return []
        rows = await self._fetch(
            f"list thread {shown_id(thread_id)}",
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = $1 AND ns = $2 "
            "ORDER BY seq DESC LIMIT $3",
            thread_id,
            ns,
            None if limit is None else sql_int(limit),  # NULL: no limit
        )
        return [CheckpointRecord.from_row(thread_id, ns, row, with_values=False) for row in rows]

    async def list_before(
        self, thread_id: str, ns: str, before: str, *, limit: int | None = None
    ) -> builtins.list[CheckpointRecord] | None:
        check_limit(limit, "list_before")
        if unheld_key(thread_id, ns, before, nul=True):
            return None
        seq = await self._fetch(
            f"find checkpoint {shown_id(before)} of thread {shown_id(thread_id)}",
            "SELECT seq FROM checkpoints WHERE checkpoint_id = $1 AND thread_id = $2 AND ns = $3",
            before,
            thread_id,
            ns,
        )
        if not seq:
            return None
        rows = await self._fetch(
            f"list thread {shown_id(thread_id)}",
            f"SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = $1 AND ns = $2 AND seq < $3 "
            "ORDER BY seq DESC LIMIT $4",
            thread_id,
            ns,
            seq[0][0],
            None if limit is None else sql_int(limit),  # NULL: no limit
        )
        return [CheckpointRecord.from_row(thread_id, ns, row, with_values=False) for row in rows]

    # -- pending writes --------------------------------------------------------------------

    async def put_writes(
        self, thread_id: str, ns: str, frontier_id: str, writes: builtins.list[WriteRecord]
    ) -> None:
        await self._put_writes(thread_id, ns, frontier_id, writes, ride_out=True)

    async def put_writes_once(
        self, thread_id: str, ns: str, frontier_id: str, writes: builtins.list[WriteRecord]
    ) -> None:
        """``put_writes`` without riding out an unreachable server: the statement gets the
        quick retries of a dropped connection (``fetch_again``), fenced as always."""
        await self._put_writes(thread_id, ns, frontier_id, writes, ride_out=False)

    async def _put_writes(
        self,
        thread_id: str,
        ns: str,
        frontier_id: str,
        writes: builtins.list[WriteRecord],
        *,
        ride_out: bool,
    ) -> None:
        check_write_keys(thread_id, ns, frontier_id, writes)
        if not writes:
            return
        await self._db()  # the lock keys name the schema
        latest: dict[tuple[str, str, str], WriteRecord] = {}  # a key twice: the last value
        for w in writes:
            latest[(w.task_id, w.kind, w.key)] = w
        writes = builtins.list(latest.values())
        args: list[Any] = [
            thread_id,
            ns,
            frontier_id,
            [w.task_id for w in writes],
            [w.kind for w in writes],
            [w.key for w in writes],
            [compact_json(w.value) for w in writes],
        ]
        # fenced like ``put``: a writer taken over, or not holding the thread, changes nothing
        held = self._tokens.get(thread_id)
        fence, fenced_by = self._fence(thread_id, held, 8)
        args.append(fenced_by)
        # one statement: the writes of a task land together or not at all
        save = functools.partial(
            self._fetch,
            f"save pending writes of thread {shown_id(thread_id)}",
            "INSERT INTO checkpoint_writes (thread_id, ns, frontier_id, task_id, kind, key, "
            "value) SELECT $1, $2, $3, w.task_id, w.kind, w.key, w.value "
            "FROM unnest($4::text[], $5::text[], $6::text[], $7::text[]) "
            f"WITH ORDINALITY AS w(task_id, kind, key, value, n) WHERE {fence} ORDER BY w.n "
            "ON CONFLICT (thread_id, ns, frontier_id, task_id, kind, key) "
            "DO UPDATE SET value = excluded.value RETURNING 1",
            *args,
        )
        if ride_out:
            saved, _ = await self._while_the_lease_lasts(thread_id, held, save)
        else:
            saved = await save()
        if not saved:  # every row is inserted or updated unless the fence held them back
            raise ThreadBusy(thread_id)

    async def get_writes(
        self, thread_id: str, ns: str, frontier_id: str
    ) -> builtins.list[WriteRecord]:
        if unheld_key(thread_id, ns, frontier_id, nul=True):
            return []
        rows = await self._fetch(
            f"read pending writes of thread {shown_id(thread_id)}",
            "SELECT task_id, kind, key, value FROM checkpoint_writes WHERE thread_id = $1 "
            "AND ns = $2 AND frontier_id = $3 ORDER BY pos",
            thread_id,
            ns,
            frontier_id,
        )
        return [read_write(thread_id, ns, frontier_id, t, k, key, v) for t, k, key, v in rows]

    async def delete_thread(self, thread_id: str) -> None:
        """Forget the thread, unless someone holds it (``ThreadBusy``, nothing deleted): a
        writer of this checkpointer, or of another process, whose advisory lock refuses the
        shared one the deleting transaction takes (and keeps to its end, so nobody takes the
        thread half deleted). In a ``saving_together`` block, in the block's transaction (a
        connection of its own deleted at once, whatever the block did after), undone with the
        block's saves if the block raises."""
        if unheld_key(thread_id, nul=True):
            return  # no row can have it
        self.refuse_closed(f"delete thread {shown_id(thread_id)}")
        self.refuse_held(thread_id)
        pool = await self._db()
        together = _together.get()
        if together and together[0] is self:
            what = f"delete thread {shown_id(thread_id)}"
            conn = together[1]
            free = await self._fetch_together(
                conn, what, "SELECT pg_try_advisory_xact_lock_shared($1)", self._key(thread_id)
            )
            if not free[0][0]:
                raise ThreadBusy(thread_id)
            for table in ("checkpoints", "checkpoint_writes", "thread_leases"):
                await self._fetch_together(
                    conn, what, f"DELETE FROM {table} WHERE thread_id = $1", thread_id
                )
            return
        async with (
            mapped_errors(
                f"delete thread {shown_id(thread_id)}", command_timeout=self.command_timeout
            ),
            connection(pool, self.command_timeout) as conn,
        ):
            async with conn.transaction():
                free = await conn.fetchval(
                    "SELECT pg_try_advisory_xact_lock_shared($1)", self._key(thread_id)
                )
                if not free:
                    raise ThreadBusy(thread_id)
                for table in ("checkpoints", "checkpoint_writes", "thread_leases"):
                    await conn.execute(f"DELETE FROM {table} WHERE thread_id = $1", thread_id)

    # -- leases ----------------------------------------------------------------------------

    def _key(self, thread_id: str) -> int:
        """The thread's advisory-lock key; call once set up (``_db``): it names the schema."""
        return lock_key(self.schema_name, "thread", thread_id)

    async def _connection(self) -> Any:
        """The lease connection (opened on first use, again after it dropped); call with
        ``_lease_lock`` held."""
        conn = self._lease_conn
        if conn is not None and not conn.is_closed():
            return conn
        import asyncpg

        await self._db()
        # Keepalives: a vanished client's session (and locks) ends within about lease_ttl.
        idle = max(1, round(self.lease_ttl / 3))
        interval = max(1, round(self.lease_ttl / 9))
        settings = {
            "tcp_keepalives_idle": str(idle),
            "tcp_keepalives_interval": str(interval),
            "tcp_keepalives_count": "3",
        }
        if self.schema:
            settings["search_path"] = quote_ident(self.schema)
        self._lease_conn = await asyncpg.connect(
            self.dsn, server_settings=settings, command_timeout=self.command_timeout
        )
        return self._lease_conn

    async def _drop_lease_connection(self) -> None:
        conn, self._lease_conn = self._lease_conn, None
        if conn is not None:
            with contextlib.suppress(*db_errors()):  # a stalled server: aborted after
                await conn.close(timeout=self.command_timeout)

    async def _try_lock(self, key: int) -> tuple[Any, bool]:
        """``pg_try_advisory_lock`` on the lease connection, which is replaced (once) when it
        turns out to have dropped: the connection and whether the lock is ours."""
        for attempt in range(2):
            conn = await self._connection()
            try:
                return conn, bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", key))
            except db_errors() as exc:
                if attempt or not may_pass(exc):
                    raise
                await self._drop_lease_connection()
        raise AssertionError("unreachable")

    async def _acquire_lease(self, thread_id: str, owner: str) -> None:
        held = self._tokens.get(thread_id)
        if held is not None and held[0] == owner:
            return  # re-entrant: the lock is ours already
        await self._db()  # first: the lock's key names the schema, known once set up
        key = self._key(thread_id)
        async with (
            self._lease_lock,
            mapped_errors(
                f"take the lease of thread {shown_id(thread_id)}",
                command_timeout=self.command_timeout,
            ),
        ):
            conn, locked = await self._try_lock(key)
            if not locked:
                raise ThreadBusy(thread_id)
            try:
                token = await conn.fetchval(
                    "INSERT INTO thread_leases (thread_id, owner, token, host, pid, backend_pid)"
                    " VALUES ($1, $2, nextval('thread_lease_tokens'), $3, $4, pg_backend_pid())"
                    " ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner,"
                    " token = excluded.token, host = excluded.host, pid = excluded.pid,"
                    " backend_pid = excluded.backend_pid, acquired_at = now()"
                    " RETURNING token",
                    thread_id,
                    owner,
                    HOST,
                    os.getpid(),
                )
            except BaseException as exc:
                if getattr(exc, "sqlstate", None) == READ_ONLY:
                    # on a server that takes no writes (a standby, after a failover): the
                    # next take opens a lease connection where the DSN points now (the
                    # other threads' locks go with this one; renew takes them again)
                    await self._drop_lease_connection()
                    raise
                with contextlib.suppress(*db_errors()):
                    await conn.execute("SELECT pg_advisory_unlock($1)", key)
                raise
        self._tokens[thread_id] = (owner, token)
        self._locked_on[thread_id] = conn
        confirmed = self._confirmed_at[thread_id] = time.monotonic()
        self._renew_after[thread_id] = confirmed + self.lease_ttl / 2

    async def _release_lease(self, thread_id: str, owner: str) -> None:
        self._renew_after.pop(thread_id, None)
        self._confirmed_at.pop(thread_id, None)
        locked_on = self._locked_on.pop(thread_id, None)
        held = self._tokens.pop(thread_id, None)
        if held is None:
            return
        async with self._lease_lock:
            conn = self._lease_conn
            if conn is None or conn.is_closed():
                return  # the lock went with the connection
            with contextlib.suppress(*db_errors()):
                await conn.execute(
                    "DELETE FROM thread_leases WHERE thread_id = $1 AND token = $2",
                    thread_id,
                    held[1],
                )
                if conn is locked_on:  # else the lock went with the connection it was on
                    await conn.execute("SELECT pg_advisory_unlock($1)", self._key(thread_id))

    def _fence(self, thread_id: str, held: tuple[str, int] | None, at: int) -> tuple[str, Any]:
        """The condition every write of ``thread_id`` is made on, and its parameter ``$at``.
        Held here (``held``: owner, token): the lease row still holds the token, so a writer
        another took the thread from changes nothing. Not held here (never taken, refused
        with ``ThreadBusy``, or lost at renewal): nobody holds the thread, which the write
        makes sure of by taking its lock, shared, for its own transaction: a holder's lock
        refuses it, other such writes do not, and a holder taking the thread meanwhile gets
        ``ThreadBusy``."""
        if held is not None:
            token = f"EXISTS (SELECT 1 FROM thread_leases WHERE thread_id = $1 AND token = ${at})"
            return token, held[1]
        return f"pg_try_advisory_xact_lock_shared(${at})", self._key(thread_id)

    async def _taken(self, thread_id: str, held: tuple[str, int] | None) -> bool:
        """Whether a write ``_fence`` held back was held back for another writer: the lease
        row no longer holds our token, or (not held here) someone holds the thread's lock."""
        if held is not None:
            return not await self._holds(thread_id, held[1])
        rows = await self._fetch(
            f"read the lease of thread {shown_id(thread_id)}",
            "SELECT pg_try_advisory_xact_lock_shared($1)",  # let go as it commits
            self._key(thread_id),
        )
        return not rows[0][0]

    async def _holds(self, thread_id: str, token: int) -> bool:
        rows = await self._fetch(
            f"read the lease of thread {shown_id(thread_id)}",
            "SELECT 1 FROM thread_leases WHERE thread_id = $1 AND token = $2",
            thread_id,
            token,
        )
        return bool(rows)

    async def renew(self, thread_id: str, owner: str) -> None:
        """Check, at most every ``lease_ttl / 2`` seconds, that ``owner`` still holds the
        thread: ``ThreadBusy`` when another writer took it over. A lease connection that
        dropped is replaced and the lock taken again if nobody took the thread meanwhile,
        also when another thread's acquire or renewal replaced the connection first.

        A failure that may pass (the server ends the connection again, restarts, refuses
        it) is tried again, with a growing pause, for as long as the lease may still be
        ours: until ``lease_ttl`` after it was last confirmed, its margin (at least twice).
        Past it, ``LeaseExpired`` is raised: the holder cannot tell whether another writer
        took the thread, and stops (``_while_the_lease_lasts``, which saves share).
        Retrying never lets it write a thread another took: the lock is taken again only
        with the same fencing token in the lease row."""
        held = self._tokens.get(thread_id)
        if held is None or held[0] != owner:
            raise ThreadBusy(thread_id)
        if time.monotonic() < self._renew_after.get(thread_id, 0.0):
            return
        renew = functools.partial(self._renew_once, thread_id, owner, held[1])
        _, tried_at = await self._while_the_lease_lasts(thread_id, held, renew)
        self._confirmed_at[thread_id] = tried_at
        self._renew_after[thread_id] = tried_at + self.lease_ttl / 2

    async def _while_the_lease_lasts(
        self, thread_id: str, held: tuple[str, int] | None, attempt: Callable[[], Awaitable[_T]]
    ) -> tuple[_T, float]:
        """``attempt()``'s result, and when the try that gave it began. Of a thread held here
        (``held``), a failure that may pass (the server ends the connection again, restarts,
        refuses it) is tried again, with a pause growing to 1 s, for as long as the lease may
        still be ours: until ``lease_ttl`` after it was last confirmed, its margin (at least
        ``AGAIN`` times). Past it, ``LeaseExpired``: the holder cannot tell whether another
        writer took the thread, and stops. ``ThreadBusy`` and any other failure are raised
        at once. Retrying never lets a holder write a thread another took: every write is
        fenced by its token (``_fence``), and a lock is taken again only with that token in
        the lease row (``_renew_once``). A thread not held here has no lease to bound a wait:
        ``attempt`` is tried once (its statements are tried again on a dropped connection,
        ``fetch_again``). Closed meanwhile (``aclose``), it stops at its next try or pause
        (1 s at most) with a ``StoreError`` that does not pass, reopening nothing."""
        if held is None:
            return await attempt(), time.monotonic()
        margin_ends = self._confirmed_at.get(thread_id, time.monotonic()) + self.lease_ttl
        pause = AGAIN_AFTER_S
        for tries in itertools.count(1):
            tried_at = time.monotonic()
            try:
                return await attempt(), tried_at
            except ThreadBusy:
                raise
            except StoreError as exc:
                failed = exc
            # raised out here, where no cause comes with it: the outage's may pass, being
            # closed does not (a statement closed under it says so already: ``_fetch_again``)
            if isinstance(failed, CheckpointerClosed):
                raise failed
            self.refuse_closed(f"go on ({failed})")
            if not may_pass_error(failed):
                raise failed
            left = margin_ends - time.monotonic()
            if tries >= AGAIN and left <= pause:
                raise LeaseExpired(
                    f"{failed} (tried {tries} times, until the lease's margin ran out:"
                    f" {self.lease_ttl:g} s (lease_ttl) after it was last confirmed;"
                    " another writer may have taken the thread since, so this one"
                    " stopped writing it)"
                ) from failed.__cause__
            await asyncio.sleep(min(pause, max(left, 0.0)))
            self.refuse_closed("go on riding out an outage")
            pause = min(pause * 2, _RIDE_OUT_PAUSE_MAX_S)
        raise AssertionError("unreachable")

    async def _renew_once(self, thread_id: str, owner: str, token: int) -> None:
        """One try of ``renew``: ``ThreadBusy`` when the lease is lost, ``StoreError`` when
        the server could not tell."""
        key = self._key(thread_id)
        check = "SELECT 1 FROM thread_leases WHERE thread_id = $1 AND token = $2 AND owner = $3"
        async with (
            self._lease_lock,
            mapped_errors(
                f"renew the lease of thread {shown_id(thread_id)}",
                command_timeout=self.command_timeout,
            ),
        ):
            if self._tokens.get(thread_id) != (owner, token):
                raise ThreadBusy(thread_id)  # released, or lost, meanwhile
            conn = self._lease_conn
            still = None
            if conn is not None and conn is not self._locked_on.get(thread_id):
                conn = None  # the lock went with an older connection: take it again
            elif conn is not None and not conn.is_closed():
                try:
                    still = await conn.fetchval(check, thread_id, token, owner)
                except db_errors() as exc:
                    if not may_pass(exc):
                        raise
                    await self._drop_lease_connection()
                    conn = None
            if conn is None or conn.is_closed():  # the lock went with it: take it again
                conn, locked = await self._try_lock(key)
                if not locked:
                    self._lost(thread_id)
                self._locked_on[thread_id] = conn
                still = await conn.fetchval(check, thread_id, token, owner)
            if not still:
                with contextlib.suppress(*db_errors()):
                    await conn.execute("SELECT pg_advisory_unlock($1)", key)
                self._lost(thread_id)

    def _lost(self, thread_id: str) -> None:
        self._tokens.pop(thread_id, None)
        self._confirmed_at.pop(thread_id, None)
        self._locked_on.pop(thread_id, None)
        self._renew_after.pop(thread_id, None)
        raise ThreadBusy(thread_id)
