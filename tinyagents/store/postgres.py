"""``PostgresStore``: the durable store several processes and machines share (asyncpg).

    async with Runtime(store="postgresql://user@db.example/agents") as rt: ...

The same contract as ``SqliteStore`` (``tests/store/test_store_conformance.py`` runs on
both): an accepted command is committed before its receipt is returned, correlation ids are
unique per dedupe scope, a batch of events and the command states it settles are one
transaction, a command that no longer reads back is marked ``failed``. The schema is
versioned in ``tinyagents_migrations``; ``schema=`` keeps everything in a PostgreSQL schema of
its own (created if missing). Event ids are handed out in commit order (appends take a
transaction-level advisory lock), so a reader resuming after id N never misses a later commit
with a smaller id.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from tinyagents import _clock
from tinyagents.errors import DamagedData, StoreError
from tinyagents.events.models import Event
from tinyagents.protocol.commands import SteeringCommand, SteeringReceipt, dedupe_scope
from tinyagents.protocol.ids import shown_id
from tinyagents.protocol.state import CommandState
from tinyagents.store._postgres import (
    check_settings,
    close_pool,
    db_errors,
    fetch_again,
    fetch_unsent_again,
    first_line,
    lock_key,
    mapped_errors,
    migrate,
    open_pool,
    quote_ident,
    split_schema,
    transaction,
)
from tinyagents.store.base import (
    INBOX_LEASE_S,
    INBOX_RETENTION_S,
    LOG_COLUMNS,
    MAX_WARNED_ROWS,
    NONCE_MARGIN_S,
    SILENCE_S,
    InboxItem,
    RunKey,
    Store,
    StoredCommand,
    WarnedRows,
    check_snapshots,
    damaged_run,
    event_rows,
    heartbeat_age,
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
    sendable,
    sql_int,
    stored_reason,
    taken_items,
    target_run_id,
    terminal_updates,
    unsaved_holder,
)
from tinyagents.store.urls import redacted

_log = logging.getLogger("tinyagents.store")

#: The states a command still open can be in.
_OPEN = [state.value for state in CommandState if not state.terminal]

#: Ordered schema migrations of the store, recorded in ``tinyagents_migrations``.
MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE steering_log (
            scope TEXT NOT NULL DEFAULT '',
            correlation_id TEXT NOT NULL,
            run_id TEXT,
            state TEXT NOT NULL,
            reason TEXT,
            command TEXT NOT NULL,
            created_at TEXT NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            PRIMARY KEY (scope, correlation_id)
        );
        CREATE INDEX steering_log_state ON steering_log (state);
        CREATE INDEX steering_log_run ON steering_log (run_id);
        CREATE TABLE events (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            type TEXT NOT NULL,
            run_id TEXT,
            root_run_id TEXT,
            tenant_id TEXT,
            data TEXT NOT NULL
        );
        CREATE INDEX events_run ON events (run_id, id);
        CREATE INDEX events_root ON events (root_run_id, id);
        CREATE INDEX events_tenant ON events (tenant_id, id);
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            root_run_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            status TEXT NOT NULL,
            data TEXT NOT NULL,
            pos BIGINT GENERATED ALWAYS AS IDENTITY
        );
        CREATE INDEX runs_tenant ON runs (tenant_id, pos);
        CREATE TABLE inbox (
            request_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            state TEXT NOT NULL,
            command TEXT NOT NULL,
            receipt TEXT,
            submitted_at TIMESTAMPTZ NOT NULL,
            answered_at TIMESTAMPTZ,
            seq BIGINT GENERATED ALWAYS AS IDENTITY
        );
        CREATE INDEX inbox_pending ON inbox (owner, seq) WHERE state = 'pending';
        CREATE INDEX inbox_answered ON inbox (answered_at);
        """,
    ),
    (
        2,
        # Items nobody answered (their owner died after taking them, or never came back)
        # leave with the answered ones of their age: found by when they were submitted.
        """
        CREATE INDEX inbox_unanswered ON inbox (submitted_at) WHERE answered_at IS NULL;
        """,
    ),
    (
        3,
        # Runs are listed a page at a time, newest first by (created_at, run_id): created_at
        # gets a column (read out of the snapshot text for the rows saved before: a regular
        # expression, as a cast to JSON fails on an escaped lone surrogate), and the two
        # columns compare as code points ("C"), as Python and SQLite compare them, whatever
        # the database's collation: a listing merged with live snapshots and a cursor handed
        # back must sort the same way everywhere. The indexes end in (created_at, run_id) so
        # a page is read in order without a sort.
        """
        ALTER TABLE runs ADD COLUMN created_at TEXT COLLATE "C" NOT NULL DEFAULT '';
        UPDATE runs SET created_at = COALESCE(substring(data from '"created_at": "([^"]*)"'), '');
        ALTER TABLE runs ALTER COLUMN run_id TYPE TEXT COLLATE "C";
        CREATE INDEX runs_created ON runs (created_at, run_id);
        CREATE INDEX runs_tenant_created ON runs (tenant_id, created_at, run_id);
        CREATE INDEX runs_tenant_status_created ON runs (tenant_id, status, created_at, run_id);
        CREATE INDEX runs_root_created ON runs (root_run_id, created_at, run_id);
        """,
    ),
    (
        4,
        # The batches of events written lately, by digest: a batch whose COMMIT went through
        # but whose reply was lost (a dropped connection) is retried by the store writer, and
        # is then found here instead of being written twice.
        """
        CREATE TABLE event_batches (
            digest TEXT PRIMARY KEY,
            written_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE INDEX event_batches_written ON event_batches (written_at);
        """,
    ),
    (
        5,
        # A lease on taken inbox items: an item taken and not answered within INBOX_LEASE_S
        # (its owner died in between) is taken again, by its owner or by the new owner of its
        # target run, found by the run id the row now carries (read out of the command text
        # for the rows put before: a regular expression, as for runs.created_at).
        """
        ALTER TABLE inbox ADD COLUMN taken_at TIMESTAMPTZ;
        ALTER TABLE inbox ADD COLUMN run_id TEXT COLLATE "C";
        UPDATE inbox SET run_id = substring(command from '"target":[{][^}]*"run_id":"([^"]*)"');
        """,
    ),
    (
        6,
        # When the database heard each snapshot, by its own clock: owner silence is judged
        # by that one clock (``SILENCE_S``), not by the owner's clock against the reader's.
        # Rows written before have none: they are judged by their updated_at, as they were.
        """
        ALTER TABLE runs ADD COLUMN heard_at TIMESTAMPTZ;
        """,
    ),
    (
        7,
        # When the database logged each command, by its own clock: a dead run's claim is
        # judged stale by that one clock (``StoredCommand.age_s``). Rows logged before have
        # none (the default is set after the column is added, not written into them).
        """
        ALTER TABLE steering_log ADD COLUMN logged_at TIMESTAMPTZ;
        ALTER TABLE steering_log ALTER COLUMN logged_at SET DEFAULT clock_timestamp();
        """,
    ),
    (
        8,
        # The inbox's times are the database's from now on (a lease and the retention are
        # judged by that one clock, not by a taker's or an answerer's against the sender's),
        # so a take can no longer be named by its time: it is named by an id of its own, and
        # a take tried again after its reply was lost gets the rows its first attempt took.
        """
        ALTER TABLE inbox ADD COLUMN take_id TEXT;
        """,
    ),
    (
        9,
        # Single-use nonces (an event-stream ticket's), claimed once by whichever process
        # sharing the database sees them first; each kept until NONCE_MARGIN_S past its
        # expiry, swept out by later claims (by the database's clock).
        """
        CREATE TABLE used_nonces (
            nonce TEXT PRIMARY KEY,
            forget_at TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX used_nonces_forget ON used_nonces (forget_at);
        """,
    ),
    (
        10,
        # Who logged each command (the runtime that accepted or deferred it: a runtime that
        # restored it fails it as an orphan only once that one is gone) and its target's
        # thread (the open commands of one thread are read by an index). Rows logged before
        # have no owner (they keep the old judgement); a thread target's thread is read out
        # of the command text (a regular expression, as for inbox.run_id; a quote or a
        # backslash in it is unescaped: an id holds no other character JSON escapes).
        r"""
        ALTER TABLE steering_log ADD COLUMN owner TEXT;
        ALTER TABLE steering_log ADD COLUMN thread_id TEXT COLLATE "C";
        UPDATE steering_log SET thread_id = regexp_replace(substring(
            command from '"target":[{]"type":"thread","thread_id":"((?:[^"\\]|\\.)*)"'),
            '\\(.)', '\1', 'g');
        CREATE INDEX steering_log_thread ON steering_log (thread_id, state);
        """,
    ),
    (
        11,
        # The run that holds each thread (a session's turn: ``Store.hold_thread``), so that
        # runtimes of other processes on the database refuse a second writer of it.
        """
        CREATE TABLE thread_holds (
            tenant_id TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            PRIMARY KEY (tenant_id, thread_id)
        );
        """,
    ),
    (
        12,
        # Who took each hold, and when (the database's clock): a graph run holds its thread
        # before its first snapshot is saved, and its hold is judged by these until then.
        """
        ALTER TABLE thread_holds ADD COLUMN owner TEXT;
        ALTER TABLE thread_holds ADD COLUMN taken_at TIMESTAMPTZ;
        """,
    ),
]

#: A runs row's snapshot and its ``SILENCE_S``: seconds since the database heard it.
_RUN = "data, EXTRACT(EPOCH FROM clock_timestamp() - heard_at), run_id"

#: The time ``{}`` seconds ago by the database's clock: the inbox's times are all stamped by
#: it (``clock_timestamp()``), so its lease and retention never compare two machines' clocks.
#: ``statement_timestamp()`` is stable within a statement: the inbox's indexes serve it.
_AGO = "(statement_timestamp() - make_interval(secs => {}::float8))"

#: The inbox rows ``$1`` may take (``Store.inbox_take``), ``$2`` being INBOX_LEASE_S: its own
#: never taken, and those unanswered past their lease that are its own or target a run it now
#: owns (its snapshot's top-level owner, read as text: a cast to JSON fails on an escaped
#: lone surrogate).
_LEASED = _AGO.format("$2")
_TAKEABLE = (
    f"(owner = $1 AND state = 'pending') OR (answered_at IS NULL AND submitted_at < {_LEASED}"
    f" AND (state = 'pending' OR taken_at IS NULL OR taken_at < {_LEASED}) AND (owner = $1"
    " OR EXISTS (SELECT 1 FROM runs WHERE runs.run_id = inbox.run_id"
    """ AND substring(runs.data from '"owner": "([^"]*)"') = $1)))"""
)

#: What an answer deletes besides: rows answered, or put and never answered, more than
#: ``$1`` (INBOX_RETENTION_S) ago by the database's clock (SQLite's ``PRUNE_INBOX``, whose
#: times are one machine's, compares them with the answerer's).
_RETAINED = _AGO.format("$1")
_PRUNE_INBOX = (
    f"DELETE FROM inbox WHERE answered_at < {_RETAINED}"
    f" OR (answered_at IS NULL AND submitted_at < {_RETAINED})"
)

#: How long a written batch's digest is kept (a retry comes within seconds), and how many
#: batches are written between two sweeps of the old ones.
_BATCH_MEMORY = "1 hour"
_SWEEP_EVERY = 1000

#: The most expired nonces one claim sweeps out (``claim_nonce``): a claim stays one short
#: step however many expired since the last.
_SWEEP_NONCES = 1000

#: A terminal state is never overwritten: a runtime sharing the log that settled a command
#: first (applied it) stands against a later one's "failed" for its own copy.
_SETTLE = (
    "UPDATE steering_log SET state = $1, reason = $2 WHERE scope = $3 AND correlation_id = $4"
    " AND (state = $1 OR state NOT IN ('applied', 'rejected', 'superseded', 'failed'))"
)


def _events_query(
    start: str,
    tenant_id: str | None,
    run_id: str | None,
    root_run_id: str | None,
    order: str,
    type_prefix: str | None = None,
) -> tuple[str, list[str]]:
    """A read of the event log: ``start`` (a condition on ``$1``), the filters given (their
    values, ``$2``... in order, returned) and ``order``; the limit is the last argument."""
    where: list[str] = [start]
    filters: list[str] = []
    for column, value in (
        ("tenant_id", tenant_id),
        ("run_id", run_id),
        ("root_run_id", root_run_id),
    ):
        if value is not None:
            filters.append(value)
            where.append(f"{column} = ${len(filters) + 1}")
    if type_prefix is not None:  # not LIKE: "_" and "%" are no wildcards here
        filters.append(type_prefix)
        where.append(f"starts_with(type, ${len(filters) + 1})")
    sql = (
        f"SELECT id, data FROM events WHERE {' AND '.join(where)} ORDER BY {order}"
        f" LIMIT ${len(filters) + 2}"
    )
    return sql, filters


async def _log_name(conn: Any, schema: str) -> str:
    """The name of the store's event log: its database's, its schema's and when its tables
    were made (the store's first migration), hashed. Not its URL's text, which names one
    store many ways (``postgresql://127.0.0.1:5432/db``, ``postgres://localhost/db?...``):
    the workers of one store, their URLs spelled apart, name one log, and a store made anew
    in that schema (its ids count from 1 again) another."""
    database, made = await conn.fetchrow(
        "SELECT current_database(), min(applied_at) FROM tinyagents_migrations"
        " WHERE component = 'store'"
    )
    said = json.dumps(["postgresql", database, schema, made.isoformat() if made else None])
    return hashlib.sha256(said.encode()).hexdigest()[:16]


class PostgresStore(Store):
    """The steering log, event log and run snapshots in PostgreSQL.

    ``dsn`` is a libpq URL (``postgresql://user:password@host:5432/db``); ``schema`` a
    PostgreSQL schema to keep the tables in (created on open; default: the DSN's search path,
    usually ``public``). With ``create=False`` a store that is not there yet (no such schema,
    or no store's tables in it) is refused with ``StoreError`` on open, and nothing is
    created: for tools that only read or steer an existing store. The pool holds ``min_size`` to ``max_size`` connections; a statement
    that takes longer than ``command_timeout`` seconds fails with ``StoreError``, and so does
    a call that waits as long for a free connection (the pool is exhausted).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        command_timeout: float | None = 60.0,
        create: bool = True,
    ) -> None:
        check_settings(min_size=min_size, max_size=max_size, command_timeout=command_timeout)
        self.url = redacted(dsn)
        self.dsn, self.schema = split_schema(dsn, schema)
        self.create = create
        self.min_size = min_size
        self.max_size = max_size
        self.command_timeout = command_timeout
        #: The schema the tables are in, once open.
        self.schema_name = ""
        self._pool: Any = None
        self._open_lock = asyncio.Lock()
        self._events_key = 0
        self._batches = 0  # appended by this store: every _SWEEP_EVERY-th sweeps old digests
        #: The damaged rows its listings already warned of (``_listed``).
        self._warned = WarnedRows(limit=MAX_WARNED_ROWS)

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and create or migrate the schema (idempotent). A database that cannot be
        reached or migrated is refused with ``StoreError``, and no connection is left open."""
        async with self._open_lock:
            if self._pool is not None:
                return
            pool = None
            try:
                async with mapped_errors(f"open the store at {self.url}"):
                    pool, schema = await open_pool(
                        self.dsn,
                        schema=self.schema,
                        min_size=self.min_size,
                        max_size=self.max_size,
                        command_timeout=self.command_timeout,
                        create_schema=self.create,
                    )
                    async with pool.acquire() as conn:
                        if not self.create:
                            await self._exists(conn, schema)
                        await migrate(conn, schema, "store", MIGRATIONS, url=self.url)
                        log_name = await _log_name(conn, schema)
            except BaseException:
                if pool is not None:
                    with contextlib.suppress(Exception):
                        await pool.close()
                raise
            self.schema_name = schema
            self.log_name = log_name
            self._events_key = lock_key(schema, "events")
            self._pool = pool

    async def _exists(self, conn: Any, schema: str) -> None:
        """Refuse a schema without this store's tables (``create=False``)."""
        made = await conn.fetchval("SELECT to_regclass('tinyagents_migrations') IS NOT NULL")
        if not made or not await conn.fetchval(
            "SELECT 1 FROM tinyagents_migrations WHERE component = 'store'"
        ):
            raise StoreError(
                f"no tinyagents store in schema {schema!r} of the database at {self.url} "
                "(nothing was created; is the runtime's store URL the same?)"
            )

    async def close(self) -> None:
        """Close the pool; on a stalled server, ``command_timeout`` seconds at most."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await close_pool(pool, self.command_timeout)

    @property
    def pool(self) -> Any:
        """The asyncpg pool (for the inbox listener and tests)."""
        if self._pool is None:
            raise StoreError(
                "the PostgreSQL store is not open; use 'async with Runtime(...)' or await open()"
            )
        return self._pool

    @contextlib.asynccontextmanager
    async def _transaction(self, what: str) -> AsyncIterator[Any]:
        """A connection inside a transaction: committed when the block ends, rolled back (and
        raised as ``StoreError``) when anything in it fails."""
        pool = self.pool
        async with (
            mapped_errors(what, command_timeout=self.command_timeout),
            transaction(pool, self.command_timeout) as conn,
        ):
            yield conn

    async def _fetch(self, what: str, sql: str, *args: Any) -> list[Any]:
        """One statement; sent again on another connection only when the first try was
        never sent (``fetch_unsent_again``): a write whose reply was lost may have committed."""
        async with mapped_errors(what, command_timeout=self.command_timeout):
            return await fetch_unsent_again(self.pool, sql, *args, wait_s=self.command_timeout)

    async def _fetch_again(self, what: str, sql: str, *args: Any) -> list[Any]:
        """``_fetch`` for a statement that only reads, or a write that changes nothing when
        it is run again: tried again on another connection when the server ended the first
        one under it (``fetch_again``)."""
        async with mapped_errors(what, command_timeout=self.command_timeout):
            return (await fetch_again(self.pool, sql, *args, wait_s=self.command_timeout))[0]

    # -- steering log ----------------------------------------------------------------------

    async def append_command(
        self,
        cmd: SteeringCommand,
        *,
        state: str,
        run_id: str | None,
        owner: str | None = None,
        thread_id: str | None = None,
    ) -> bool:
        # DO NOTHING, never DO UPDATE: a command in the log is never overwritten; the caller
        # answers the second one 'duplicate'.
        rows = await self._fetch(
            f"log command {cmd.correlation_id}",
            "INSERT INTO steering_log (scope, correlation_id, run_id, state, reason, command,"
            " created_at, owner, thread_id) VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8)"
            " ON CONFLICT (scope, correlation_id) DO NOTHING RETURNING 1",
            *log_row(cmd, state=state, run_id=run_id, owner=owner, thread_id=thread_id),
        )
        return len(rows) == 1

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
        rows = await self._fetch(
            f"update command {cmd.correlation_id}",
            "UPDATE steering_log SET state = $1, run_id = $2, command = $3,"
            " owner = COALESCE($7, owner), thread_id = COALESCE($8, thread_id)"
            " WHERE scope = $4 AND correlation_id = $5 AND state = $6 RETURNING 1",
            state,
            run_id,
            cmd.model_dump_json(),
            dedupe_scope(cmd.actor),
            cmd.correlation_id,
            from_state,
            owner,
            thread_id,
        )
        return len(rows) == 1

    async def set_command_states(self, updates: list[tuple[str, str, str, str | None]]) -> None:
        if not updates:
            return
        async with self._transaction(f"settle {len(updates)} command(s)") as conn:
            await conn.executemany(_SETTLE, _settling(updates))

    async def get_command(self, correlation_id: str, *, scope: str = "") -> StoredCommand | None:
        rows = await self._fetch_again(
            f"read command {shown_id(correlation_id)}",
            f"SELECT {LOG_COLUMNS},"
            " EXTRACT(EPOCH FROM clock_timestamp() - logged_at) FROM steering_log"
            " WHERE scope = $1 AND correlation_id = $2",
            scope,
            correlation_id,
        )
        return logged_command(correlation_id, rows[0], rows[0][6]) if rows else None

    async def open_commands(self, *, thread_id: str | None = None) -> list[StoredCommand]:
        thread = "" if thread_id is None else " AND thread_id = $2"
        rows = await self._fetch_again(
            "read the open commands",
            f"SELECT {LOG_COLUMNS}, scope, correlation_id FROM steering_log"
            f" WHERE state = ANY($1::text[]){thread} ORDER BY seq",
            _OPEN,
            *(() if thread_id is None else (thread_id,)),
        )
        return await open_logged(self, rows, self.url)

    async def command_ids(self) -> set[str]:
        rows = await self._fetch_again(
            "read the command ids", "SELECT DISTINCT correlation_id FROM steering_log"
        )
        return {r[0] for r in rows}

    async def run_commands(
        self, run_id: str, *, states: tuple[str, ...] = ("applied",)
    ) -> list[StoredCommand]:
        if not states:
            return []
        rows = await self._fetch_again(
            f"read the commands of run {shown_id(run_id)}",
            f"SELECT {LOG_COLUMNS}, EXTRACT(EPOCH FROM clock_timestamp() - logged_at)"
            " FROM steering_log WHERE run_id = $1 AND state = ANY($2::text[]) ORDER BY seq",
            run_id,
            list(states),
        )
        return readable_commands(rows)

    # -- event log -------------------------------------------------------------------------

    async def append_events(self, events: list[Event]) -> None:
        if not events:
            return
        rows = event_rows(events, "PostgreSQL")
        updates = terminal_updates(events)
        # the batch's own text names it: a retry of it has the same digest (its events carry
        # their times and offsets, so two batches never do)
        digest = hashlib.sha256(
            "\n".join(row[4] for row in rows).encode("utf-8", "surrogatepass")
        ).hexdigest()
        self._batches += 1
        async with self._transaction(f"append {len(events)} event(s)") as conn:
            # Appends commit one at a time, so ids become visible in order (see the module).
            await conn.execute("SELECT pg_advisory_xact_lock($1)", self._events_key)
            claimed = await conn.fetchval(
                "INSERT INTO event_batches (digest) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 1",
                digest,
            )
            if claimed is None:
                return  # written already: this is the retry of a batch whose reply was lost
            if self._batches % _SWEEP_EVERY == 0:
                await conn.execute(
                    "DELETE FROM event_batches"
                    f" WHERE written_at < now() - interval '{_BATCH_MEMORY}'"
                )
            await conn.executemany(
                "INSERT INTO events (type, run_id, root_run_id, tenant_id, data)"
                " VALUES ($1, $2, $3, $4, $5)",
                rows,
            )
            if updates:
                await conn.executemany(_SETTLE, _settling(updates))

    async def load_events(
        self,
        *,
        run_id: str | None = None,
        root_run_id: str | None = None,
        type_prefix: str | None = None,
    ) -> list[Event]:
        where: list[str] = []
        args: list[str] = []
        for column, value in (("run_id", run_id), ("root_run_id", root_run_id)):
            if value is not None:
                args.append(value)
                where.append(f"{column} = ${len(args)}")
        if type_prefix is not None:
            args.append(type_prefix)  # not LIKE: "_" and "%" are no wildcards here
            where.append(f"starts_with(type, ${len(args)})")
        sql = "SELECT id, data FROM events" + (" WHERE " + " AND ".join(where) if where else "")
        rows = await self._fetch_again("read events", sql + " ORDER BY id", *args)
        return [event for _, event in readable_events((r[0], r[1]) for r in rows)]

    # -- runs ------------------------------------------------------------------------------

    async def save_runs(
        self, snapshots: list[dict[str, Any]], *, held_by: str | None = None
    ) -> list[str]:
        check_snapshots(snapshots)
        if not snapshots:
            return []
        # In the order of their rows (run id; stable: one run's snapshots keep theirs), as
        # ``_settling`` settles commands: two runtimes saving the same runs lock their rows
        # in one order, never each holding one the other waits for (a deadlock, 40P01).
        snapshots = sorted(snapshots, key=lambda s: str(s["run_id"]))
        refused: list[str] = []
        async with self._transaction(f"save {len(snapshots)} run snapshot(s)") as conn:
            if held_by is not None:
                # FOR UPDATE: no claim of these runs comes between this read and the write
                rows = await conn.fetch(
                    "SELECT run_id, data FROM runs WHERE run_id = ANY($1::text[])"
                    " ORDER BY run_id FOR UPDATE",
                    [s["run_id"] for s in snapshots],
                )
                owners = {r[0]: _owner(r[1]) for r in rows}
                for s in snapshots:
                    run_id = s["run_id"]
                    if run_id not in owners:  # no row: saved unless a claim just made one
                        if not await conn.fetchval(_CLAIM_NEW, *_run_row(s)):
                            refused.append(run_id)
                    elif owners[run_id] != held_by:
                        refused.append(run_id)
                snapshots = [s for s in snapshots if owners.get(s["run_id"]) == held_by]
            await conn.executemany(_SAVE_RUN, [_run_row(s) for s in snapshots])
        return refused

    async def claim_run(
        self, snapshot: dict[str, Any], free: Callable[[dict[str, Any] | None], bool]
    ) -> tuple[bool, dict[str, Any] | None]:
        check_snapshots([snapshot])
        run_id = snapshot["run_id"]
        async with self._transaction(f"claim run {shown_id(run_id)}") as conn:
            # a run with no row: the insert waits for another claim's uncommitted one
            if free(None) and await conn.fetchval(_CLAIM_NEW, *_run_row(snapshot)):
                return True, None
            # FOR UPDATE: no save of the run comes between this read and the write
            row = await conn.fetchrow(
                f"SELECT {_RUN} FROM runs WHERE run_id = $1 FOR UPDATE", run_id
            )
            stored = _snapshot(row) if row is not None else None
            if stored is None or not free(stored):
                return False, stored
            await conn.execute(_SAVE_RUN, *_run_row(snapshot))
            return True, stored

    async def release_run(self, run_id: str, owner: str, previous: dict[str, Any] | None) -> bool:
        check_snapshots([previous])
        async with self._transaction(f"give back the claim of run {shown_id(run_id)}") as conn:
            data = await conn.fetchval("SELECT data FROM runs WHERE run_id = $1 FOR UPDATE", run_id)
            if data is None or _owner(data) != owner:
                return False
            if previous is None:
                await conn.execute("DELETE FROM runs WHERE run_id = $1", run_id)
                return True
            row = list(_run_row(previous))
            if previous.get(SILENCE_S) is not None:  # heard as long ago as the claim read it
                row[-1] = float(previous[SILENCE_S])
            await conn.execute(_SAVE_RUN, *row)
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
        async with self._transaction(f"take thread {shown_id(thread_id)}") as conn:
            while True:
                # a thread no run holds: the insert waits for another taker's uncommitted one
                if await conn.fetchval(_HOLD_NEW, tenant_id, thread_id, run_id, owner):
                    return True, None
                # FOR UPDATE: no other taker changes the hold between this read and the write
                row = await conn.fetchrow(f"{_HOLDER} FOR UPDATE OF h", tenant_id, thread_id)
                if row is not None:
                    break
                # its holder let go between the two statements: insert again
            held: dict[str, Any] | None = None
            if row[2] != run_id:  # its own run again: taken anew (owner, time), as on SQLite
                held = _holder(row, tenant_id)
                if not free(held):
                    return False, held
            await conn.execute(
                "UPDATE thread_holds SET run_id = $3, owner = $4, taken_at = clock_timestamp()"
                " WHERE tenant_id = $1 AND thread_id = $2",
                tenant_id,
                thread_id,
                run_id,
                owner,
            )
            return True, held

    async def thread_holder(self, tenant_id: str, thread_id: str) -> dict[str, Any] | None:
        rows = await self._fetch_again(
            f"read the hold of thread {shown_id(thread_id)}", _HOLDER, tenant_id, thread_id
        )
        return _holder(rows[0], tenant_id) if rows else None

    async def let_go_of_thread(self, tenant_id: str, thread_id: str, run_id: str) -> bool:
        rows = await self._fetch_again(
            f"let go of thread {shown_id(thread_id)}",
            "DELETE FROM thread_holds WHERE tenant_id = $1 AND thread_id = $2 AND run_id = $3"
            " RETURNING 1",
            tenant_id,
            thread_id,
            run_id,
        )
        return bool(rows)

    async def load_runs(self, *, tenant_id: str | None = None) -> list[dict[str, Any]]:
        if tenant_id is None:
            rows = await self._fetch_again("read runs", f"SELECT {_RUN} FROM runs ORDER BY pos")
        else:
            rows = await self._fetch_again(
                "read runs",
                f"SELECT {_RUN} FROM runs WHERE tenant_id = $1 ORDER BY pos",
                tenant_id,
            )
        return [_snapshot(r) for r in rows]

    async def list_runs(
        self,
        *,
        tenant_id: str | None = None,
        statuses: Sequence[str] = (),
        root_run_id: str | None = None,
        before: RunKey | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        clauses: list[str] = []
        args: list[Any] = []

        def arg(value: Any) -> str:
            args.append(value)
            return f"${len(args)}"

        if tenant_id is not None:
            clauses.append(f"tenant_id = {arg(tenant_id)}")
        if statuses:
            clauses.append(f"status = ANY({arg(list(statuses))}::text[])")
        if root_run_id is not None:
            clauses.append(f"root_run_id = {arg(root_run_id)}")
        if before is not None:
            clauses.append(f"(created_at, run_id) < ({arg(before[0])}, {arg(before[1])})")
        sql = f"SELECT {_RUN}, root_run_id, tenant_id, status, created_at FROM runs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY created_at DESC, run_id DESC"
        if limit is not None:
            sql += f" LIMIT {arg(sql_int(max(limit, 0)))}"  # PostgreSQL refuses a negative LIMIT
        rows = await self._fetch_again("list runs", sql, *args)
        return [_listed(r, self._warned) for r in rows]

    async def load_run(self, run_id: str) -> dict[str, Any] | None:
        rows = await self._fetch_again(
            f"read run {shown_id(run_id)}",
            f"SELECT {_RUN}, tenant_id FROM runs WHERE run_id = $1",
            run_id,
        )
        return _snapshot(rows[0], rows[0][3]) if rows else None

    async def read_events(
        self,
        *,
        after_id: int = 0,
        tenant_id: str | None = None,
        run_id: str | None = None,
        root_run_id: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[int, Event]]:
        sql, filters = _events_query("id > $1", tenant_id, run_id, root_run_id, "id")

        async def fetch(after: int, want: int) -> list[tuple[int, str | bytes]]:
            rows = await self._fetch_again("read events", sql, after, *filters, want)
            return [(r[0], r[1]) for r in rows]

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
        # each index on the events ends in ``id``: read back from ``before_id``
        where = (tenant_id, run_id, root_run_id, "id DESC", type_prefix)
        from_end, _ = _events_query("$1::bigint IS NULL", *where)
        before, filters = _events_query("id < $1", *where)

        async def fetch(start: int | None, want: int) -> list[tuple[int, str | bytes]]:
            sql = from_end if start is None else before
            rows = await self._fetch_again("read events", sql, start, *filters, want)
            return [(r[0], r[1]) for r in rows]

        return await read_last_page(fetch, before_id, limit)

    # -- inbox -----------------------------------------------------------------------------

    async def claim_nonce(self, nonce: str, *, expires_at: datetime) -> bool:
        # A claim after another's commit finds its row (DO NOTHING); one at the same time
        # waits for it on the key. The sweep skips rows another claim's sweep holds: no
        # claim waits for another's sweep, and at most _SWEEP_NONCES go per claim.
        forget_at = expires_at + timedelta(seconds=NONCE_MARGIN_S)
        async with self._transaction(f"claim nonce {shown_id(nonce)}") as conn:
            await conn.execute(
                "DELETE FROM used_nonces WHERE nonce IN (SELECT nonce FROM used_nonces"
                " WHERE forget_at < statement_timestamp() ORDER BY forget_at"
                " LIMIT $1 FOR UPDATE SKIP LOCKED)",
                _SWEEP_NONCES,
            )
            rows = await conn.fetch(
                "INSERT INTO used_nonces (nonce, forget_at) VALUES ($1, $2)"
                " ON CONFLICT (nonce) DO NOTHING RETURNING 1",
                nonce,
                forget_at,
            )
        return len(rows) == 1

    @property
    def inbox_channel(self) -> str:
        """The NOTIFY channel on which ``inbox_put`` announces a command (payload: the owner)."""
        return "tinyagents_inbox_" + format(lock_key(self.schema_name, "inbox") & (2**48 - 1), "x")

    async def inbox_put(self, *, owner: str, request_id: str, command: SteeringCommand) -> None:
        # One statement: the row and its NOTIFY commit together (a NOTIFY is sent at commit),
        # and a request id seen before neither changes the row nor wakes anyone. That makes it
        # safe to try again when its connection was lost (``fetch_again``): the first attempt
        # may have committed, and the sender, told it failed, would not wait for the receipt
        # of a command its owner applies.
        await self._fetch_again(
            f"put inbox request {shown_id(request_id)}",
            "WITH put AS (INSERT INTO inbox"
            " (request_id, owner, state, command, submitted_at, run_id)"
            " VALUES ($1, $2, 'pending', $3, clock_timestamp(), $5)"
            " ON CONFLICT (request_id) DO NOTHING"
            " RETURNING owner) SELECT pg_notify($4, owner) FROM put",
            request_id,
            owner,
            sendable(command),
            self.inbox_channel,
            target_run_id(command),
        )

    async def inbox_take(self, owner: str, *, limit: int = 100) -> list[InboxItem]:
        # SKIP LOCKED: two pollers (in any processes) never claim the same row, nor wait.
        # A take's id names its rows: tried again when its connection was lost (it may have
        # committed, and its reply was lost), it gets what its first attempt took, instead
        # of leaving those rows to wait out their lease while their senders time out. The
        # lease is the database's clock's (``taken_at``), never this machine's.
        take_id = _clock.new_id("take")  # unique among this owner's takes
        rows = await self._fetch_again(
            f"take the inbox of {shown_id(owner)}",
            "UPDATE inbox SET state = 'taken', owner = $1, taken_at = clock_timestamp(),"
            " take_id = $3"
            f" WHERE request_id IN (SELECT request_id FROM inbox WHERE {_TAKEABLE}"
            " OR (state = 'taken' AND owner = $1 AND take_id = $3)"
            " ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED)"
            " RETURNING seq, request_id, command, submitted_at",
            owner,
            INBOX_LEASE_S,
            take_id,
            sql_int(max(limit, 0)),
        )
        return await taken_items(self, owner, rows)

    async def inbox_answer(self, request_id: str, receipt: SteeringReceipt) -> None:
        async with self._transaction(f"answer inbox request {shown_id(request_id)}") as conn:
            await conn.execute(
                "UPDATE inbox SET state = 'answered', receipt = $1,"
                " answered_at = clock_timestamp() WHERE request_id = $2",
                receipt.model_dump_json(),
                request_id,
            )
            await conn.execute(_PRUNE_INBOX, INBOX_RETENTION_S)

    async def inbox_receipt(self, request_id: str) -> SteeringReceipt | None:
        rows = await self._fetch_again(
            f"read the receipt of inbox request {shown_id(request_id)}",
            "SELECT receipt FROM inbox WHERE request_id = $1",
            request_id,
        )
        if not rows or rows[0][0] is None:
            return None
        return read_receipt(request_id, rows[0][0])

    async def listen_inbox(self, owner: str, wake: Callable[[], None]) -> InboxListener:
        """Call ``wake()`` whenever a command for ``owner`` is put in the inbox, by any
        process; returns once listening (``aclose()`` the listener to stop). A lost
        connection is re-established with backoff (0.5 s doubling to 30 s), and ``wake()`` is
        called after each (re)connection, since commands may have arrived meanwhile."""
        self.pool  # noqa: B018 - raises StoreError unless open (the channel names its schema)
        listener = InboxListener(self, owner, wake)
        await listener.start()
        return listener


#: Saves a run's snapshot (``_run_row``), heard now less its heartbeat's age.
_INSERT_RUN = (
    "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data, created_at, heard_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp() - make_interval(secs => $7::float8))"
)
#: ... or updates it: the listing's key follows the snapshot (a continued run is newer), a
#: column the cursor does not read would repeat or skip pages.
_SAVE_RUN = (
    f"{_INSERT_RUN} ON CONFLICT (run_id) DO UPDATE SET status = excluded.status,"
    " data = excluded.data, created_at = excluded.created_at, heard_at = excluded.heard_at"
)
#: Saves the snapshot of a run that has no row yet; RETURNING 1 only when it did.
_CLAIM_NEW = f"{_INSERT_RUN} ON CONFLICT (run_id) DO NOTHING RETURNING 1"


def _run_row(snapshot: dict[str, Any]) -> tuple[Any, ...]:
    return (
        snapshot["run_id"],
        snapshot["root_run_id"],
        snapshot["tenant_id"],
        snapshot["status"],
        json.dumps(snapshot if SILENCE_S not in snapshot else _unread(snapshot)),
        run_key(snapshot)[0],
        heartbeat_age(snapshot),
    )


def _owner(data: str) -> str | None:
    """The ``owner`` a runs row's snapshot names (None: none, or it does not read)."""
    try:
        owner = json.loads(data).get("owner")
    except (ValueError, AttributeError, RecursionError):
        return None
    return owner if isinstance(owner, str) else None


def _settling(updates: list[tuple[str, str, str, str | None]]) -> list[tuple[Any, ...]]:
    """The argument rows of ``_SETTLE`` for (scope, id, state, reason) updates, in the order
    of their rows (scope, correlation id; stable: one command's updates keep theirs): two
    runtimes settling the same commands lock their rows in one order, never each holding one
    the other waits for (a deadlock, 40P01, aborted one of them)."""
    ordered = sorted(updates, key=lambda u: (u[0], u[1]))
    return [(state, stored_reason(reason), scope, cid) for scope, cid, state, reason in ordered]


#: A hold of a thread no run holds (``Store.hold_thread``): 1 when it was taken.
_HOLD_NEW = (
    "INSERT INTO thread_holds (tenant_id, thread_id, run_id, owner, taken_at)"
    " VALUES ($1, $2, $3, $4, clock_timestamp())"
    " ON CONFLICT (tenant_id, thread_id) DO NOTHING RETURNING 1"
)
#: The run holding a thread and its snapshot as ``_RUN`` reads it (NULL: the run has no row),
#: then the hold's owner, when it was taken and how many seconds ago.
_HOLDER = (
    "SELECT r.data, EXTRACT(EPOCH FROM clock_timestamp() - r.heard_at), h.run_id, h.owner,"
    " h.taken_at, EXTRACT(EPOCH FROM clock_timestamp() - h.taken_at)"
    " FROM thread_holds h LEFT JOIN runs r ON r.run_id = h.run_id"
    " WHERE h.tenant_id = $1 AND h.thread_id = $2"
)


def _holder(row: Any, tenant_id: str) -> dict[str, Any]:
    """A thread's holder as ``_HOLDER`` read it: its run's snapshot, or ``unsaved_holder``
    when the run has no row or its row says it finished before the hold was taken, by the
    database's clock (``judged_holder``)."""
    taken_at = row[4].isoformat() if row[4] is not None else None
    if row[0] is None:
        return unsaved_holder(row[2], row[3], taken_at, row[5])
    # by the database's clock: taken after the row was last heard (both ages known)
    since = None if row[1] is None or row[5] is None else row[5] < row[1]
    return judged_holder(
        _snapshot(row, tenant_id), row[2], row[3], taken_at, row[5], taken_since=since
    )


def _snapshot(row: Any, tenant_id: str | None = None) -> dict[str, Any]:
    """A snapshot read with ``_RUN``, with its ``SILENCE_S`` when the database heard it. A
    damaged one (not JSON, or JSON of another shape: ``read_snapshot``) is ``DamagedData``,
    a ``StoreError``, as on SQLite: never a bare ``ValueError`` or ``KeyError`` in whoever
    reads it; ``tenant_id``, the row's tenant column where it was read, says whose it is."""
    try:
        snapshot = read_snapshot(row[0], row[2], tenant_id)
    except DamagedData as exc:
        raise DamagedData(
            f"PostgreSQL store: could not read a run snapshot: {exc}",
            record=exc.record,
            tenant_id=exc.tenant_id,
        ) from exc
    if row[1] is not None:
        snapshot[SILENCE_S] = float(row[1])
    return snapshot


def _listed(row: Any, warned: WarnedRows) -> dict[str, Any]:
    """A snapshot of a listing (``_RUN`` and the row's columns); a damaged one is marked, with
    a warning in the log naming the row to repair (``damaged_run``), as on SQLite: one row
    does not fail the listing of every other. Warned of once a row (``warned``, the store's:
    a console polling the listing logged it every second)."""
    try:
        snapshot = _snapshot(row)
    except StoreError as exc:
        if warned.first(row[2]):
            _log.warning("PostgreSQL store: %s (listed as damaged)", exc.__cause__ or exc)
        return damaged_run(
            run_id=row[2],
            root_run_id=row[3],
            tenant_id=row[4],
            status=row[5],
            created_at=row[6],
            problem=str(exc.__cause__ or exc),
        )
    if len(warned):  # (a row that reads: one warned of was repaired)
        warned.forget(row[2])
    return snapshot


def _unread(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A snapshot read before and saved again, without the silence it was read with."""
    return {k: v for k, v in snapshot.items() if k != SILENCE_S}


class InboxListener:
    """A connection that LISTENs on a store's inbox channel and wakes one owner; made by
    ``PostgresStore.listen_inbox``. It reconnects on its own; ``aclose()`` stops it."""

    def __init__(
        self,
        store: PostgresStore,
        owner: str,
        wake: Callable[[], None],
        *,
        retry_first_s: float = 0.5,
        retry_max_s: float = 30.0,
    ) -> None:
        self.store = store
        self.owner = owner
        self.wake = wake
        self.retry_first_s = retry_first_s
        self.retry_max_s = retry_max_s
        #: Connections lost (and re-established) since the start.
        self.reconnects = 0
        self._task: asyncio.Task[None] | None = None
        self._conn: Any = None
        self._lost = asyncio.Event()

    async def start(self) -> None:
        """LISTEN; raises ``StoreError`` when the first connection fails."""
        async with mapped_errors(f"listen for the inbox of {self.owner}"):
            await self._connect()
        self._task = asyncio.create_task(self._run(), name=f"tinyagents-inbox-{self.owner}")

    async def _connect(self) -> None:
        import asyncpg

        settings = {"search_path": quote_ident(self.store.schema)} if self.store.schema else None
        conn = await asyncpg.connect(self.store.dsn, server_settings=settings)
        self._conn = conn
        self._lost.clear()
        conn.add_termination_listener(self._terminated)
        try:
            await conn.add_listener(self.store.inbox_channel, self._notified)
        except BaseException:
            await self._drop()
            raise

    def _terminated(self, conn: Any) -> None:
        if conn is self._conn:  # not one this listener closed itself
            self._lost.set()

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload == self.owner:
            self.wake()

    async def _run(self) -> None:
        while True:
            await self._lost.wait()
            delay = self.retry_first_s
            while True:
                await self._drop()
                try:
                    await self._connect()
                except db_errors() as exc:
                    _log.warning(
                        "inbox listener of %s: %s; again in %.1f s",
                        self.owner,
                        first_line(exc),
                        delay,
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.retry_max_s)
                    continue
                self.reconnects += 1
                self.wake()  # commands may have been put while nobody listened
                break

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(*db_errors()):  # a stalled server: aborted after
                await conn.close(timeout=self.store.command_timeout)

    async def aclose(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._drop()
