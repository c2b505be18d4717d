"""Store URLs, the SQLite specifics (WAL, migrations, errors) and the batching ``StoreWriter``."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from tinyagents.errors import ConfigurationError, StoreError
from tinyagents.events import Event, RunEvent, SteeringEvent
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringTarget
from tinyagents.protocol.commands import dedupe_scope
from tinyagents.runtime import Runtime
from tinyagents.store import MemoryStore, SqliteStore, StoreWriter, open_store
from tinyagents.store.base import terminal_updates
from tinyagents.store.checkpoint import PostgresCheckpointer
from tinyagents.store.sqlite import MIGRATIONS


def test_open_store_urls(tmp_path: Path) -> None:
    assert isinstance(open_store(None), MemoryStore)
    assert isinstance(open_store("memory://"), MemoryStore)
    absolute = open_store(f"sqlite:///{tmp_path}/x.db")
    assert isinstance(absolute, SqliteStore) and absolute.path == f"{tmp_path}/x.db"
    relative = open_store("sqlite:///runs.db")
    assert isinstance(relative, SqliteStore) and relative.path == "runs.db"
    mine = MemoryStore()
    assert open_store(mine) is mine
    with pytest.raises(ConfigurationError, match="unknown store 'redis://x'"):
        open_store("redis://x")


async def test_a_sqlalchemy_style_sqlite_url_opens_the_same_file_everywhere(tmp_path: Path) -> None:
    # the checkpointers and graph stores took 'sqlite+aiosqlite:///x.db' (SQLAlchemy's way to
    # name the driver); the runtime's store refused the same URL as an unknown store
    url = f"sqlite+aiosqlite:///{tmp_path}/runs.db"
    store = open_store(url)
    assert isinstance(store, SqliteStore) and store.path == f"{tmp_path}/runs.db"
    async with Runtime(store=url) as rt:
        assert isinstance(rt.store, SqliteStore) and rt.store.path == f"{tmp_path}/runs.db"
    assert (tmp_path / "runs.db").is_file()
    with pytest.raises(ConfigurationError, match="names no file"):
        open_store("sqlite+aiosqlite:///")
    # and so do the command line's store arguments and the server's key file beside the store
    from tinyagents.cli import sqlite_file
    from tinyagents.server.auth import default_key_file

    assert sqlite_file(url) == f"{tmp_path}/runs.db"
    assert default_key_file(url) == Path(f"{tmp_path}/runs.db.server-key")


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("sqlite:///", r"names no file"),
        ("sqlite://", r"names no file"),
        (Path("runs.db"), r"a store is a URL or a Store, got PosixPath: 'sqlite:///runs.db'"),
        (5, r"a store is a URL or a Store, got int"),
        # SQLite's URI options were no options: a new file named 'runs.db?mode=ro' was made
        ("sqlite:///runs.db?mode=ro", r"takes no query \('\?mode=ro'\).*'sqlite:///runs.db'"),
        ("sqlite:////tmp/x.db?cache=shared&mode=rwc", r"takes no query"),
    ],
)
def test_a_store_that_names_no_file_or_is_no_url_is_refused(spec: object, words: str) -> None:
    # "sqlite:///" opened SQLite's private temporary database (gone at close: nothing was
    # durable); a Path or a number raised AttributeError: no attribute 'startswith'
    with pytest.raises(ConfigurationError, match=words):
        open_store(spec)  # type: ignore[arg-type]


async def test_sqlite_uses_wal_and_records_its_migrations_once(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "x.db"  # parent directories are created
    for _ in range(2):
        store = SqliteStore(path)
        await store.open()
        await store.close()
    async with aiosqlite.connect(path) as db:
        async with db.execute("PRAGMA journal_mode") as cur:
            assert (await cur.fetchone())[0] == "wal"  # type: ignore[index]
        async with db.execute("SELECT name, version FROM migrations ORDER BY version") as cur:
            rows = await cur.fetchall()
    assert rows == [("steering", version) for version, _ in MIGRATIONS]


async def test_sqlite_store_that_is_not_open_says_so(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "x.db")
    with pytest.raises(StoreError, match="not open"):
        await store.command_ids()


async def test_sqlite_store_that_cannot_open_raises_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot open SQLite store"):
        await SqliteStore(blocker / "x.db").open()


def _command(cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run("r-1"),
        actor=SteeringActor.test(),
        kind="pause",
        correlation_id=cid,
    )


def _steering(type_: str, cid: str, reason: str | None = None) -> SteeringEvent:
    cmd = _command(cid)
    return SteeringEvent(
        type=type_,  # type: ignore[arg-type]
        run_id="r-1",
        target=cmd.target,
        actor=cmd.actor,
        kind=cmd.kind,
        correlation_id=cid,
        reason=reason,
    )


def test_terminal_updates_come_from_terminal_steering_events_only() -> None:
    events = [
        RunEvent(type="run.started", run_id="r-1"),
        _steering("steering.accepted", "c-1"),
        _steering("steering.delivered", "c-1"),
        _steering("steering.applied", "c-1"),
        _steering("steering.failed", "c-2", "late"),
        _steering("steering.superseded", "c-3"),
        _steering("steering.rejected", "c-4", "no"),
    ]
    scope = dedupe_scope(events[1].actor)  # type: ignore[attr-defined]
    assert terminal_updates(events) == [
        (scope, "c-1", "applied", None),
        (scope, "c-2", "failed", "late"),
        (scope, "c-3", "superseded", None),
        (scope, "c-4", "rejected", "no"),
    ]


async def test_writer_batches_events_and_settles_command_states() -> None:
    store = MemoryStore()
    await store.append_command(_command("c-1"), state="accepted", run_id="r-1")
    writer = StoreWriter(store, flush_every_s=3600)
    writer(_steering("steering.delivered", "c-1"))
    writer(_steering("steering.applied", "c-1"))
    assert await store.load_events() == []  # buffered, not written on the publisher's path
    await writer.flush()
    assert [e.type for e in await store.load_events()] == ["steering.delivered", "steering.applied"]
    stored = await store.get_command("c-1")
    assert stored is not None and stored.state == "applied"
    await writer.flush()  # nothing buffered: nothing written twice
    assert len(await store.load_events()) == 2


async def test_writer_flushes_what_is_left_when_closed() -> None:
    store = MemoryStore()
    writer = StoreWriter(store, flush_every_s=3600)
    writer.start()
    writer(RunEvent(type="run.started", run_id="r-1"))
    await writer.aclose()
    assert [e.type for e in await store.load_events()] == ["run.started"]
    await writer.aclose()  # closing twice is harmless


class SlowEventLog(MemoryStore):
    """Appending events takes a while: a flush can be caught between its two writes."""

    def __init__(self) -> None:
        super().__init__()
        self.appending = asyncio.Event()

    async def append_events(self, events: list[Event]) -> None:
        self.appending.set()
        await asyncio.sleep(0.05)
        await super().append_events(events)


async def test_closing_while_a_flush_runs_loses_neither_events_nor_settled_states() -> None:
    # The writer's own loop flushes on time; closing the runtime then must let that flush end.
    # (Cancelling it between the event log and the state update lost the update for good: the
    # command stayed 'accepted' in the store, and was handed over again after every restart.)
    store = SlowEventLog()
    await store.append_command(_command("c-1"), state="accepted", run_id="r-1")
    writer = StoreWriter(store, flush_every_s=0.001)
    writer.start()
    writer(_steering("steering.delivered", "c-1"))
    writer(_steering("steering.applied", "c-1"))
    await store.appending.wait()  # the loop has taken the batch and is writing it
    writer(RunEvent(type="run.completed", run_id="r-1"))  # and one more comes in meanwhile
    await writer.aclose()
    stored = await store.get_command("c-1")
    assert stored is not None and stored.state == "applied"
    assert [e.type for e in await store.load_events()] == [
        "steering.delivered",
        "steering.applied",
        "run.completed",
    ]


@pytest.mark.parametrize("port", ["99999", "65536"])
async def test_a_postgres_url_with_a_port_out_of_range_is_a_store_error(port: str) -> None:
    """asyncpg's connect raised the socket's ``OverflowError`` ("port must be 0-65535") through
    the store and the checkpointer: no ``StoreError``, so ``Runtime(store=...)`` and the CLI
    showed a traceback for a mistyped port."""
    url = f"postgresql://127.0.0.1:{port}/test"
    with pytest.raises(StoreError, match="port must be 0-65535"):
        async with Runtime(store=url):
            pass
    with pytest.raises(StoreError, match="port must be 0-65535"):
        await PostgresCheckpointer(url).setup()


@pytest.mark.parametrize(
    ("url", "schema", "part"),
    [
        ("postgresql://127.0.0.1:5432/te%00st", None, "database"),
        ("postgresql://u%00x@127.0.0.1:5432/test", None, "user"),
        ("postgresql://u:p%00w@127.0.0.1:5432/test", None, "password"),
        ("postgresql://127.0.0.1:5432/test?schema=a%00b", None, "schema"),
        ("postgresql://127.0.0.1:5432/test", "a\x00b", "schema"),
    ],
)
async def test_a_postgres_url_with_a_nul_is_refused_before_connecting(
    url: str, schema: str | None, part: str
) -> None:
    """PostgreSQL names hold no NUL: the server answered "invalid startup packet layout" (or
    "invalid byte sequence for encoding") and the store said it "could not open"; the URL is
    refused where it is given, naming the part, and no password is shown."""
    from tinyagents.store import PostgresStore
    from tinyagents.store.checkpoint import PostgresCheckpointer
    from tinyagents.store.longterm import PostgresGraphStore

    for make in (PostgresStore, PostgresCheckpointer, PostgresGraphStore):
        with pytest.raises(ConfigurationError, match=f"its {part} holds a NUL") as caught:
            make(url, schema=schema)
        assert "p%00w" not in str(caught.value)


def _schema_and_rows(path: Path) -> tuple[object, ...]:
    with sqlite3.connect(path) as conn:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        tables = [name for kind, name, _ in schema if kind == "table"]
        rows = [conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables]
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    return schema, rows, mode


@pytest.mark.parametrize(
    ("table", "ddl"),
    [
        ("events", "CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT, payload BLOB)"),
        # the same columns as ours: the open went through and wrote into the other program's
        # table (an index, a tenant_id column filled by an UPDATE, then tinyagents' events)
        (
            "events",
            "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL,"
            " run_id TEXT, root_run_id TEXT, data TEXT NOT NULL)",
        ),
        ("runs", "CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)"),
        (
            "migrations",
            "CREATE TABLE migrations (id INTEGER PRIMARY KEY, migration TEXT, batch INT)",
        ),
        ("inbox", "CREATE TABLE inbox (id INTEGER PRIMARY KEY, subject TEXT)"),
    ],
)
async def test_a_sqlite_file_whose_tables_of_our_names_are_another_programs_is_refused_untouched(
    tmp_path: Path, table: str, ddl: str
) -> None:
    """A SQLite file of another program with a table named as one of ours (``events``,
    ``runs``: common names) was migrated around it: the open failed half-way with "no such
    column: run_id" after creating tables, an index and a ``migrations`` table in that file
    and switching it to WAL, or, when the columns matched, went through and wrote into the
    other program's table. It is refused before anything is written, naming the table."""
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute(ddl)
        if table != "events":  # (its NOT NULL columns take no default row)
            conn.execute(f"INSERT INTO {table} DEFAULT VALUES")
    before = _schema_and_rows(path)
    with pytest.raises(StoreError, match=f"table '{table}'.*another program") as caught:
        async with Runtime(store=f"sqlite:///{path}"):
            pass
    assert "a file of its own" in str(caught.value)
    assert _schema_and_rows(path) == before


async def test_a_sqlite_file_with_other_tables_of_its_own_takes_the_store(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    for _ in range(2):  # and opens it again, as its own
        async with Runtime(store=f"sqlite:///{path}"):
            pass
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"users", "events", "runs", "steering_log", "migrations"} <= tables
