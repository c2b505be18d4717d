"""``SqliteStore``: the embedded durable default (aiosqlite, WAL, versioned schema)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents.errors import StoreError
from tinyagents.events.models import EVENT_ADAPTER, Event
from tinyagents.steering.commands import SteeringCommand
from tinyagents.store.base import OPEN_STATES, Store, StoredCommand

if TYPE_CHECKING:
    import aiosqlite

#: Ordered schema migrations; each runs once, recorded in the ``migrations`` table.
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
]


class SqliteStore(Store):
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self._db: aiosqlite.Connection | None = None
        self._seq = 0

    async def open(self) -> None:
        import aiosqlite

        if self._db is not None:
            return
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = await aiosqlite.connect(self.path)
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute("PRAGMA synchronous=NORMAL")
            await self._db.execute("PRAGMA busy_timeout=5000")
            await migrate(self._db, MIGRATIONS, name="steering")
            async with self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM steering_log") as cur:
                row = await cur.fetchone()
            self._seq = int(row[0]) if row else 0
        except Exception as exc:
            raise StoreError(f"cannot open SQLite store {self.path!r}: {exc}") from exc

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError(
                "the SQLite store is not open; use 'async with Runtime(...)' or await open()"
            )
        return self._db

    async def append_command(self, cmd: SteeringCommand, *, state: str, run_id: str | None) -> None:
        self._seq += 1
        await self.db.execute(
            "INSERT INTO steering_log (correlation_id, run_id, state, reason, command, created_at, seq)"
            " VALUES (?, ?, ?, NULL, ?, ?, ?)"
            " ON CONFLICT(correlation_id) DO UPDATE SET run_id=excluded.run_id,"
            " state=excluded.state, command=excluded.command",
            (
                cmd.correlation_id,
                run_id,
                state,
                cmd.model_dump_json(),
                cmd.created_at.isoformat(),
                self._seq,
            ),
        )
        await self.db.commit()

    async def set_command_states(self, updates: list[tuple[str, str, str | None]]) -> None:
        await self.db.executemany(
            "UPDATE steering_log SET state = ?, reason = ? WHERE correlation_id = ?",
            [(state, reason, cid) for cid, state, reason in updates],
        )
        await self.db.commit()

    async def get_command(self, correlation_id: str) -> StoredCommand | None:
        async with self.db.execute(
            "SELECT command, state, run_id, reason FROM steering_log WHERE correlation_id = ?",
            (correlation_id,),
        ) as cur:
            row = await cur.fetchone()
        return _stored(row) if row else None

    async def open_commands(self) -> list[StoredCommand]:
        marks = ",".join("?" for _ in OPEN_STATES)
        async with self.db.execute(
            f"SELECT command, state, run_id, reason FROM steering_log WHERE state IN ({marks}) ORDER BY seq",
            OPEN_STATES,
        ) as cur:
            rows = await cur.fetchall()
        return [_stored(r) for r in rows]

    async def command_ids(self) -> set[str]:
        async with self.db.execute("SELECT correlation_id FROM steering_log") as cur:
            return {r[0] for r in await cur.fetchall()}

    async def append_events(self, events: list[Event]) -> None:
        await self.db.executemany(
            "INSERT INTO events (type, run_id, root_run_id, data) VALUES (?, ?, ?, ?)",
            [(e.type, e.run_id, e.root_run_id, e.model_dump_json()) for e in events],
        )
        await self.db.commit()

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
            "SELECT data FROM events"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY id"
        )
        async with self.db.execute(sql, args) as cur:
            rows = await cur.fetchall()
        return [EVENT_ADAPTER.validate_json(r[0]) for r in rows]

    async def save_runs(self, snapshots: list[dict[str, Any]]) -> None:
        await self.db.executemany(
            "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT(run_id) DO UPDATE SET status=excluded.status, data=excluded.data",
            [
                (s["run_id"], s["root_run_id"], s["tenant_id"], s["status"], json.dumps(s))
                for s in snapshots
            ],
        )
        await self.db.commit()

    async def load_runs(self, *, tenant_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT data FROM runs"
        args: tuple[str, ...] = ()
        if tenant_id is not None:
            sql, args = sql + " WHERE tenant_id = ?", (tenant_id,)
        async with self.db.execute(sql + " ORDER BY rowid", args) as cur:
            return [json.loads(r[0]) for r in await cur.fetchall()]


def _stored(row: Any) -> StoredCommand:
    return StoredCommand(
        command=SteeringCommand.model_validate_json(row[0]),
        state=row[1],
        run_id=row[2],
        reason=row[3],
    )


async def migrate(
    db: aiosqlite.Connection, migrations: list[tuple[int, str]], *, name: str
) -> None:
    """Apply the migrations of schema ``name`` not yet recorded in the shared ``migrations``
    table (idempotent; several schemas, e.g. steering and checkpoints, can share one file)."""
    await db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name TEXT NOT NULL, version INTEGER NOT NULL,"
        " applied_at TEXT NOT NULL, PRIMARY KEY (name, version))"
    )
    async with db.execute("SELECT version FROM migrations WHERE name = ?", (name,)) as cur:
        done = {r[0] for r in await cur.fetchall()}
    for version, script in migrations:
        if version in done:
            continue
        await db.executescript(script)
        await db.execute(
            "INSERT INTO migrations (name, version, applied_at) VALUES (?, ?, ?)",
            (name, version, _clock.now().isoformat()),
        )
    await db.commit()
