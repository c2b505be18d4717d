"""PostgreSQL specifics of the store: URLs, migrations, errors, several stores (processes)
sharing one database, the inbox's NOTIFY and a runtime on PostgreSQL end to end. The shared
contract is in test_store_conformance.py, which runs on PostgreSQL through conftest.BACKENDS."""

from __future__ import annotations

import asyncio
import logging
import operator
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, TypedDict

import asyncpg
import pytest
from services import PgProxy, pg_schema, postgres_dsn

from tinyagents import Runtime
from tinyagents.errors import ConfigurationError, DamagedData, StoreError
from tinyagents.events import RunEvent
from tinyagents.graph import END, START, StateGraph
from tinyagents.protocol import (
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.protocol.commands import dedupe_scope
from tinyagents.store import PostgresStore, StoreWriter, open_store
from tinyagents.store._postgres import cause, said
from tinyagents.store.base import may_pass
from tinyagents.store.checkpoint import CheckpointRecord, PostgresCheckpointer
from tinyagents.store.postgres import MIGRATIONS


def command(cid: str, *, run_id: str = "r-1") -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=SteeringActor.middleware("ops"),
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "focus"},
        correlation_id=cid,
    )


@pytest.fixture
def schema() -> str:
    return pg_schema()  # dropped by conftest's _drop_pg_schemas


@pytest.fixture
def make(schema: str) -> Callable[[], PostgresStore]:
    """A new store on the test's schema: each one stands for another process."""
    return lambda: PostgresStore(postgres_dsn(), schema=schema)


@pytest.fixture
async def store(make: Callable[[], PostgresStore]) -> AsyncIterator[PostgresStore]:
    opened = make()
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def sql(statement: str, *args: Any) -> list[Any]:
    conn = await asyncpg.connect(postgres_dsn())
    try:
        return list(await conn.fetch(statement, *args))
    finally:
        await conn.close()


# --------------------------------------------------------------------------- set-up


async def test_another_programs_table_of_a_store_name_is_refused_untouched(
    schema: str, make: Callable[[], PostgresStore]
) -> None:
    """A schema where another program keeps a table of one of our names (``runs``,
    ``checkpoints``...) was refused with PostgreSQL's bare 'relation "runs" already exists':
    it did not say the table is not tinyagents', that nothing was changed, or what to do. The
    table and its rows are left as they were."""
    await sql(f"CREATE SCHEMA {schema}")
    await sql(f"CREATE TABLE {schema}.runs (id integer, note text)")
    await sql(f"INSERT INTO {schema}.runs VALUES (1, 'theirs')")
    await sql(f"CREATE TABLE {schema}.checkpoints (id integer)")
    with pytest.raises(StoreError) as raised:
        await make().open()
    message = str(raised.value)
    assert f"schema {schema!r}" in message and '"runs"' in message
    assert "not made by tinyagents" in message and "nothing was changed" in message
    with pytest.raises(StoreError, match=r'"checkpoints" .*not made by tinyagents'):
        await PostgresCheckpointer(postgres_dsn(), schema=schema).setup()
    assert [tuple(r) for r in await sql(f"SELECT * FROM {schema}.runs")] == [(1, "theirs")]
    tables = await sql("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
    assert sorted(r[0] for r in tables) == ["checkpoints", "runs"]


def test_open_store_reads_postgres_urls() -> None:
    store = open_store("postgresql://me:secret@db:5432/agents?schema=team&sslmode=disable")
    assert isinstance(store, PostgresStore)
    assert store.schema == "team"
    assert store.dsn == "postgresql://me:secret@db:5432/agents?sslmode=disable"
    assert "secret" not in store.url and store.url.startswith("postgresql://me:***@db")
    plain = open_store("postgres://db/agents")
    assert isinstance(plain, PostgresStore) and plain.schema is None


async def test_a_schema_in_the_url_is_taken_by_the_store_and_checkpointer_built_by_hand(
    schema: str,
) -> None:
    """docs/postgres.md: ``?schema=`` in ``Runtime(store=URL)``, and ``PostgresStore(dsn,
    ...)`` "the same, built by hand". Given that URL, ``PostgresStore`` and
    ``PostgresCheckpointer`` handed ``schema`` to the server as a setting and failed to open
    ("unrecognized configuration parameter"). They take it as ``schema=``; a URL and a
    keyword naming two schemas is refused."""
    dsn = postgres_dsn()
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    store = PostgresStore(url)
    assert store.schema == schema and "schema=" not in store.dsn
    await store.open()
    try:
        assert store.schema_name == schema
    finally:
        await store.close()
    async with PostgresCheckpointer(url) as cp:
        assert cp.schema == schema
        await cp.setup()
        assert cp.schema_name == schema
    assert PostgresStore(url, schema=schema).schema == schema
    for make in (PostgresStore, PostgresCheckpointer):
        with pytest.raises(ConfigurationError, match="two schemas"):
            make(url, schema="another")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://me@db/agents?password=secret",
        "postgresql://me@db/agents?sslmode=require&sslpassword=secret&PASSWORD=secret",
        "postgresql://me:secret@db/agents?password=secret",
    ],
)
async def test_a_password_in_the_query_never_shows_in_url_or_errors(url: str) -> None:
    # only the user part's password was masked: ?password= showed in store.url and errors
    store = open_store(url.replace("@db/", "@127.0.0.1:1/"))  # nothing listens on port 1
    assert "secret" not in store.url and "***" in store.url
    with pytest.raises(StoreError) as caught:
        await store.open()
    assert "secret" not in str(caught.value)


def test_the_serve_banner_shows_the_store_without_its_password() -> None:
    import io

    from tinyagents.server import ServeOptions
    from tinyagents.server.serve import _announce

    out = io.StringIO()
    options = ServeOptions(store="postgresql://me:secret@db/agents?password=secret")
    _announce(options, None, "http://127.0.0.1:8000", out)
    assert "secret" not in out.getvalue() and "postgresql://me:***@db/agents" in out.getvalue()
    out = io.StringIO()  # a URL with nothing to hide is shown as given
    _announce(ServeOptions(store="sqlite:////abs/serve.db"), None, "http://h", out)
    assert "store:    sqlite:////abs/serve.db" in out.getvalue()


async def test_migrations_are_recorded_once_in_the_schema(
    make: Callable[[], PostgresStore], schema: str
) -> None:
    for _ in range(2):
        store = make()
        await store.open()
        await store.open()  # idempotent
        await store.close()
    rows = await sql(
        f'SELECT component, version FROM "{schema}".tinyagents_migrations ORDER BY version'
    )
    assert [tuple(r) for r in rows] == [("store", v) for v, _ in MIGRATIONS]
    tables = await sql(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
    )
    assert {"steering_log", "events", "runs", "inbox"} <= {r[0] for r in tables}


async def test_racing_opens_on_a_new_schema_migrate_once(
    make: Callable[[], PostgresStore], schema: str
) -> None:
    stores = [make() for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    for s in stores:
        await s.close()
    rows = await sql(f'SELECT count(*) FROM "{schema}".tinyagents_migrations')
    assert rows[0][0] == len(MIGRATIONS)


@pytest.mark.parametrize(
    ("cls", "setting", "named"),
    [
        (PostgresStore, {"command_timeout": float("nan")}, "command_timeout"),
        (PostgresStore, {"command_timeout": 0}, "command_timeout"),
        (PostgresStore, {"min_size": 5, "max_size": 2}, "min_size"),
        (PostgresStore, {"max_size": 0}, "max_size"),
        (PostgresStore, {"min_size": 1.5}, "min_size"),
        (PostgresCheckpointer, {"lease_ttl": float("nan")}, "lease_ttl"),
        (PostgresCheckpointer, {"lease_ttl": -1.0}, "lease_ttl"),
        (PostgresCheckpointer, {"lease_ttl": True}, "lease_ttl"),
        (PostgresCheckpointer, {"command_timeout": float("inf")}, "command_timeout"),
        (PostgresCheckpointer, {"max_size": 0}, "max_size"),
        (PostgresCheckpointer, {"synchronous_commit": "maybe"}, "synchronous_commit"),
        (PostgresCheckpointer, {"synchronous_commit": True}, "synchronous_commit"),
        (PostgresCheckpointer, {"synchronous_commit": ""}, "synchronous_commit"),
    ],
)
def test_pool_and_lease_settings_that_cannot_work_are_refused_when_made(
    cls: type[Any], setting: dict[str, Any], named: str
) -> None:
    """A NaN ``command_timeout`` or ``lease_ttl`` was taken (every lease of the checkpointer
    then failed: "cannot convert float NaN to integer"), and a pool of 0 connections, or
    ``min_size`` above ``max_size``, was found out only at ``open``, as a failing store; so
    was a ``synchronous_commit`` the server does not take (a ``StoreError`` at open, where
    docs/postgres.md promises a ``ConfigurationError`` when the checkpointer is made)."""
    with pytest.raises(ConfigurationError, match=named):
        cls(postgres_dsn(), **setting)


def test_synchronous_commit_takes_the_servers_values_in_any_case() -> None:
    for value in ("on", "OFF", "local", "remote_write", "remote_apply"):
        cp = PostgresCheckpointer(postgres_dsn(), synchronous_commit=value)
        assert cp.synchronous_commit == value.lower()


async def test_a_store_that_is_not_open_says_so(make: Callable[[], PostgresStore]) -> None:
    with pytest.raises(StoreError, match="not open"):
        await make().command_ids()


async def test_an_unreachable_database_is_a_store_error_thatmay_pass() -> None:
    store = PostgresStore("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(StoreError, match="could not open the store") as refused:
        await store.open()
    assert may_pass(refused.value)  # the store writer would retry it
    await store.close()


async def test_asyncpg_errors_that_are_not_postgres_errors_are_store_errors_too() -> None:
    """asyncpg raises some failures from outside its PostgresError and InterfaceError trees
    (InternalClientError: here the server is not the kind the URL asks for, as a primary
    mid-failover is not a standby); they escaped as raw asyncpg errors."""
    dsn = postgres_dsn() + ("&" if "?" in postgres_dsn() else "?") + "target_session_attrs=standby"
    store = PostgresStore(dsn)
    with pytest.raises(StoreError, match="could not open the store") as refused:
        await store.open()
    assert isinstance(refused.value.__cause__, ConnectionError)  # may pass: a failover ends
    assert may_pass(refused.value)
    await store.close()
    cp = PostgresCheckpointer(dsn)
    with pytest.raises(StoreError, match="could not open the checkpointer"):
        await cp.setup()
    await cp.aclose()


def test_lost_connections_and_full_disks_may_pass_bad_data_does_not() -> None:
    lost = asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed")
    full = asyncpg.exceptions.DiskFullError("no space left")
    bad = asyncpg.exceptions.CharacterNotInRepertoireError("invalid byte sequence")

    def wrapped(exc: BaseException) -> StoreError:
        err = StoreError("x")
        err.__cause__ = cause(exc)
        return err

    assert may_pass(wrapped(lost)) and may_pass(wrapped(full))
    assert not may_pass(wrapped(bad))
    # what asyncpg raises for a connection the server ended while it sat idle in the pool
    ended = [
        asyncpg.InternalClientError(
            "cannot switch to state 12; another operation (2) is in progress"
        ),
        asyncpg.InterfaceError(
            "cannot call Transaction.__aexit__(): the underlying connection is closed"
        ),
        asyncpg.InterfaceError("connection is closed"),
    ]
    assert all(may_pass(wrapped(exc)) for exc in ended)
    busy = asyncpg.InterfaceError("cannot perform operation: another operation is in progress")
    assert not may_pass(wrapped(busy))  # two calls on one connection: a bug, not an outage


# --------------------------------------------------------------------------- bad data


async def test_text_postgres_cannot_hold_is_a_store_error_and_writes_nothing(
    store: PostgresStore,
) -> None:
    # PostgreSQL text holds no NUL character; asyncpg encodes no lone surrogate. (A command
    # cannot carry either in its correlation id: it must be printable UTF-8 text.)
    with pytest.raises(StoreError, match="could not log command"):
        await store.append_command(command("c-1"), state="accepted", run_id="nul\x00inside")
    with pytest.raises(StoreError, match="could not log command"):
        await store.append_command(command("c-1"), state="accepted", run_id="lone \ud800")
    assert await store.command_ids() == set()


async def test_an_unreadable_command_is_marked_failed_and_never_blocks_the_rest(
    store: PostgresStore, schema: str
) -> None:
    await store.append_command(command("c-1"), state="accepted", run_id="r-1")
    await store.append_command(command("c-2"), state="accepted", run_id="r-1")
    await sql(
        f'UPDATE "{schema}".steering_log SET command = \'{{"kind": 1}}\''
        " WHERE correlation_id = 'c-1'"
    )
    assert [c.command.correlation_id for c in await store.open_commands()] == ["c-2"]
    rows = await sql(
        f"SELECT state, reason FROM \"{schema}\".steering_log WHERE correlation_id = 'c-1'"
    )
    assert rows[0][0] == "failed" and "unreadable in the steering log" in rows[0][1]
    with pytest.raises(StoreError, match="unreadable"):
        await store.get_command("c-1")


async def test_an_unreadable_inbox_row_is_answered_rejected(
    store: PostgresStore, schema: str
) -> None:
    await store.inbox_put(owner="me", request_id="q-1", command=command("c-1"))
    await store.inbox_put(owner="me", request_id="q-2", command=command("c-2"))
    await sql(f"UPDATE \"{schema}\".inbox SET command = 'garbage' WHERE request_id = 'q-1'")
    taken = await store.inbox_take("me")
    assert [i.request_id for i in taken] == ["q-2"]
    receipt = await store.inbox_receipt("q-1")
    assert receipt is not None and receipt.status == ReceiptStatus.REJECTED
    assert receipt.reason is not None and "unreadable in the inbox" in receipt.reason


async def test_a_receipt_that_does_not_read_is_a_store_error(
    store: PostgresStore, schema: str
) -> None:
    await store.inbox_put(owner="me", request_id="q-1", command=command("c-1"))
    await sql(
        f'UPDATE "{schema}".inbox SET state = \'answered\', receipt = \'{{"status": "queued"}}\''
        " WHERE request_id = 'q-1'"
    )
    with pytest.raises(StoreError, match=r"q-1.*same correlation id"):
        await store.inbox_receipt("q-1")


async def test_a_damaged_run_row_is_marked_in_a_listing_and_the_others_listed(
    store: PostgresStore, schema: str
) -> None:
    # one damaged row made every listing of the store (GET /runs) a StoreError
    snaps = [
        {
            "run_id": f"r-{n}",
            "root_run_id": f"r-{n}",
            "tenant_id": "acme",
            "status": "completed",
            "created_at": f"2026-01-0{n + 1}T00:00:00+00:00",
        }
        for n in range(3)
    ]
    await store.save_runs(snaps)
    await sql(f"UPDATE \"{schema}\".runs SET data = '{{broken' WHERE run_id = 'r-1'")
    listed = await store.list_runs()
    assert [s["run_id"] for s in listed] == ["r-2", "r-1", "r-0"]
    assert listed[1]["error"]["type"] == "damaged_snapshot"
    assert "'r-1'" in listed[1]["error"]["message"] and listed[1]["status"] == "completed"
    assert "error" not in listed[0] and "error" not in listed[2]
    with pytest.raises(StoreError, match="r-1"):
        await store.load_run("r-1")


async def test_a_damaged_run_row_is_warned_of_once_by_the_listings(
    store: PostgresStore, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    # every listing (GET /runs) warned of each damaged row again: once a row (WarnedRows)
    snap = {"run_id": "r-1", "root_run_id": "r-1", "tenant_id": "acme", "status": "completed"}
    await store.save_runs([snap])
    caplog.set_level(logging.WARNING, logger="tinyagents.store")
    await sql(f"UPDATE \"{schema}\".runs SET data = '{{broken'")
    for _ in range(3):
        assert "error" in (await store.list_runs())[0]
    assert sum("'r-1'" in r.getMessage() for r in caplog.records) == 1, caplog.text


# --------------------------------------------------------------------------- many processes


async def test_one_correlation_id_logged_by_two_processes_at_once_is_logged_once(
    make: Callable[[], PostgresStore],
) -> None:
    one, two = make(), make()
    await one.open()
    await two.open()
    try:
        for n in range(20):
            cid = f"c-{n}"
            results = await asyncio.gather(
                one.append_command(command(cid, run_id="a"), state="accepted", run_id="a"),
                two.append_command(command(cid, run_id="b"), state="accepted", run_id="b"),
            )
            assert sorted(results) == [False, True]
        assert len(await one.command_ids()) == 20
    finally:
        await one.close()
        await two.close()


async def test_two_pollers_never_take_the_same_inbox_item(
    make: Callable[[], PostgresStore],
) -> None:
    one, two = make(), make()
    await one.open()
    await two.open()
    try:
        for n in range(60):
            await one.inbox_put(owner="me", request_id=f"q-{n}", command=command(f"c-{n}"))

        async def drain(store: PostgresStore) -> list[str]:
            got: list[str] = []
            while items := await store.inbox_take("me", limit=7):
                got += [i.request_id for i in items]
            return got

        first, second = await asyncio.gather(drain(one), drain(two))
        assert sorted(first + second) == sorted(f"q-{n}" for n in range(60))
        assert not set(first) & set(second)
        assert first == sorted(first, key=lambda r: int(r[2:]))  # oldest first
    finally:
        await one.close()
        await two.close()


async def test_event_ids_only_grow_across_concurrent_writers(
    make: Callable[[], PostgresStore],
) -> None:
    stores = [make() for _ in range(3)]
    for s in stores:
        await s.open()
    try:

        async def write(store: PostgresStore, tag: str) -> None:
            for n in range(10):
                await store.append_events(
                    [RunEvent(type="run.status", run_id=tag, status=f"{tag}{n}")] * 3
                )

        await asyncio.gather(*(write(s, f"w{i}") for i, s in enumerate(stores)))
        rows = await stores[0].read_events(limit=1000)
        assert len(rows) == 90
        ids = [i for i, _ in rows]
        assert ids == sorted(ids) and len(set(ids)) == 90
        # Resuming after any id gives exactly the rows after it.
        middle = ids[44]
        assert [i for i, _ in await stores[1].read_events(after_id=middle)] == ids[45:]
        for tag in ("w0", "w1", "w2"):
            mine = [e.status for _, e in await stores[2].read_events(run_id=tag)]  # type: ignore[attr-defined]
            assert mine == [f"{tag}{n}" for n in range(10) for _ in range(3)]
    finally:
        for s in stores:
            await s.close()


# --------------------------------------------------------------------------- NOTIFY


async def wait_for(event: asyncio.Event) -> None:
    async with asyncio.timeout(60):  # bounds the test; no timing is asserted
        await event.wait()


async def test_a_command_put_for_an_owner_wakes_that_owner_at_once(
    make: Callable[[], PostgresStore],
) -> None:
    owner, submitter = make(), make()
    await owner.open()
    await submitter.open()
    woken = asyncio.Event()
    wakes: list[int] = []

    def wake() -> None:
        wakes.append(1)
        woken.set()

    listener = await owner.listen_inbox("me", wake)
    try:
        await submitter.inbox_put(owner="someone-else", request_id="q-0", command=command("c-0"))
        await submitter.inbox_put(owner="me", request_id="q-1", command=command("c-1"))
        await wait_for(woken)
        # Notifications arrive in commit order: had the other owner's woken us, it came first.
        assert wakes == [1]
        assert [i.request_id for i in await owner.inbox_take("me")] == ["q-1"]
        await submitter.inbox_put(owner="me", request_id="q-1", command=command("c-1"))
        await owner.inbox_answer(
            "q-1", SteeringReceipt(status=ReceiptStatus.ACCEPTED, correlation_id="c-1")
        )
        receipt = await submitter.inbox_receipt("q-1")
        assert receipt is not None and receipt.status == ReceiptStatus.ACCEPTED
    finally:
        await listener.aclose()
        await owner.close()
        await submitter.close()


async def test_the_listener_reconnects_and_wakes_after_its_connection_dropped(
    store: PostgresStore,
) -> None:
    woken = asyncio.Event()
    listener = await store.listen_inbox("me", woken.set)
    listener.retry_first_s = 0.01
    try:
        pid = listener._conn.get_server_pid()
        await sql("SELECT pg_terminate_backend($1, 10000)", pid)
        await wait_for(woken)  # woken once reconnected: commands may have come meanwhile
        assert listener.reconnects == 1
        woken.clear()
        await store.inbox_put(owner="me", request_id="q-1", command=command("c-1"))
        await wait_for(woken)
    finally:
        await listener.aclose()


# --------------------------------------------------------------------------- runtime


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def graph(cp: PostgresCheckpointer, gate: asyncio.Event | None = None) -> Any:
    async def a(state: State) -> dict[str, Any]:
        if gate is not None:
            await gate.wait()
        return {"log": ["a"]}

    built = StateGraph(State).add_node("a", a).add_node("b", lambda s: {"log": ["b"]})
    built.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return built.compile(checkpointer=cp)


def update(run_id: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.UPDATE_STATE,
        payload={"update": {"log": ["steered"]}},
    )


async def test_a_runtime_on_postgres_steers_a_graph_and_logs_everything(schema: str) -> None:
    url = f"{postgres_dsn()}?schema={schema}"
    gate = asyncio.Event()
    async with (
        Runtime(store=url, testing=True) as rt,
        PostgresCheckpointer(postgres_dsn(), schema=schema) as cp,
    ):
        handle = await rt.start_graph(graph(cp, gate), {"log": ["start"]}, thread_id="t")
        cmd = update(handle.run_id)
        assert (await rt.submit(cmd)).status == "accepted"
        gate.set()
        result = await handle.result()
        assert result.output is not None and result.output["log"] == [
            "start",
            "a",
            "steered",
            "b",
        ]
    store = open_store(url)
    await store.open()
    try:
        assert await store.open_commands() == []
        logged = await store.get_command(cmd.correlation_id)
        assert logged is not None and logged.state == "applied"
        steering = await store.load_events(run_id=handle.run_id, type_prefix="steering.")
        assert [e.type for e in steering][-1] == "steering.applied"
        run = await store.load_run(handle.run_id)
        assert run is not None and run["status"] == "completed"
    finally:
        await store.close()


class DiesAfter(PostgresCheckpointer):
    """Saves checkpoints until one matches ``when``; then never returns again (a crash)."""

    def __init__(self, schema: str, when: Callable[[CheckpointRecord], bool]) -> None:
        super().__init__(postgres_dsn(), schema=schema)
        self.when = when
        self.dead = asyncio.Event()

    async def put(self, record: CheckpointRecord) -> None:
        await super().put(record)
        if self.when(record):
            self.dead.set()
            await asyncio.Event().wait()


async def test_a_command_accepted_before_a_crash_is_applied_after_the_restart(
    schema: str,
) -> None:
    url = f"{postgres_dsn()}?schema={schema}"
    cp = DiesAfter(schema, lambda r: r.source == "loop" and not r.frontier)
    async with Runtime(store=url, testing=True) as rt:
        handle = await rt.start_graph(graph(cp), {"log": ["start"]}, thread_id="t")
        await cp.dead.wait()
        cmd = update(handle.run_id)
        assert (await rt.submit(cmd)).status == "accepted"
    await cp.aclose()  # the "dead" process's lease connection goes: the thread is free

    async with (
        Runtime(store=url, testing=True) as rt,
        PostgresCheckpointer(postgres_dsn(), schema=schema) as again,
    ):
        resumed = await rt.start_graph(graph(again), None, thread_id="t")
        result = await resumed.result()
        assert resumed.run_id == handle.run_id
        assert result.output is not None
        assert result.output["log"] == ["start", "a", "b", "steered"]
    store = open_store(url)
    await store.open()
    try:
        assert await store.open_commands() == []
    finally:
        await store.close()


async def test_the_store_writer_keeps_every_event_when_its_connection_drops(
    schema: str,
) -> None:
    store = PostgresStore(postgres_dsn(), schema=schema, max_size=1)  # one connection
    await store.open()
    writer = StoreWriter(store, flush_every_s=0.001, retry_first_s=0.001, retry_max_s=0.01)
    try:
        for n in range(5):
            writer(RunEvent(type="run.status", run_id="r-1", status=f"s{n}"))
        await writer.flush()
        pid = await store.pool.fetchval("SELECT pg_backend_pid()")
        await sql("SELECT pg_terminate_backend($1, 10000)", pid)
        for n in range(5, 10):
            writer(RunEvent(type="run.status", run_id="r-1", status=f"s{n}"))
        await writer.flush()
        await writer.aclose()
        assert writer.dropped == 0
        statuses = [e.status for e in await store.load_events()]  # type: ignore[attr-defined]
        assert statuses == [f"s{n}" for n in range(10)]
        assert await store.pool.fetchval("SELECT pg_backend_pid()") != pid
    finally:
        await store.close()


async def test_a_connection_terminated_while_idle_is_a_failure_thatmay_pass(
    schema: str,
) -> None:
    """A pooled connection the server terminated while it sat idle fails its next use with
    asyncpg's ``InternalClientError`` "cannot switch to state ...; another operation (2) is
    in progress" (2: consuming the server's error). That was taken for a failure that never
    passes: the store writer split its batch and dropped events one by one, and
    a checkpointer gave up its lease connection instead of opening another."""
    name = f"ta-{schema}"  # the pool's connections, and no other test's
    dsn = postgres_dsn() + ("&" if "?" in postgres_dsn() else "?") + f"application_name={name}"
    store = PostgresStore(dsn, schema=schema, max_size=2)
    await store.open()
    writer = StoreWriter(store, flush_every_s=0.001, retry_first_s=0.001, retry_max_s=0.01)
    seen: list[str] = []
    original = store.append_events

    async def noting(events: list[Any]) -> None:
        try:
            await original(events)
        except StoreError as exc:
            seen.append(str(exc))
            raise

    store.append_events = noting  # type: ignore[method-assign]
    killer = await asyncpg.connect(postgres_dsn())
    try:
        n = 0
        for _ in range(400):  # until the race has shown itself a few times
            pids = [r[0] for r in await killer.fetch(_POOL_PIDS, name)]
            writer(RunEvent(type="run.status", run_id="r-1", status=f"s{n}"))  # one a batch
            n += 1
            flushing = asyncio.ensure_future(writer.flush())
            for pid in pids:
                await killer.execute("SELECT pg_terminate_backend($1)", pid)
            await flushing
            if sum("middle of operation" not in e for e in seen) >= 3:
                break  # a few of the failures this is about (not the "may pass" one)
        await writer.aclose()
        assert seen  # the terminations hit writes
        assert writer.dropped == 0
        statuses = [e.status for e in await store.load_events()]  # type: ignore[attr-defined]
        assert statuses == [f"s{i}" for i in range(n)]
    finally:
        await killer.close()
        await store.close()


async def test_a_read_whose_connection_the_server_ends_is_read_again(schema: str) -> None:
    """The server ends the pooled connection in the middle of a read (a restart, a failover,
    ``pg_terminate_backend``): ``load_run`` raised ``StoreError`` (an operator's page or
    command answered 503) though the next connection would have read it. A read is tried
    again on another connection."""
    name = f"ta-{schema}"  # the store's connections, and no other test's
    dsn = postgres_dsn() + ("&" if "?" in postgres_dsn() else "?") + f"application_name={name}"
    store = PostgresStore(dsn, schema=schema, max_size=1)
    await store.open()
    admin = await asyncpg.connect(postgres_dsn())
    locker = await asyncpg.connect(postgres_dsn())
    try:
        snapshot = {"run_id": "r-1", "root_run_id": "r-1", "tenant_id": "acme"}
        await store.save_runs([{**snapshot, "status": "running"}])
        tx = locker.transaction()
        await tx.start()
        await locker.execute(f'LOCK TABLE "{schema}".runs IN ACCESS EXCLUSIVE MODE')
        reading = asyncio.ensure_future(store.load_run("r-1"))
        async with asyncio.timeout(60):  # bounds the test; no timing is asserted
            while not (pids := await admin.fetch(_WAITING_ON_A_LOCK, name)):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        await admin.execute("SELECT pg_terminate_backend($1, 10000)", pids[0][0])
        await tx.rollback()
        loaded = await reading
        assert loaded is not None and loaded["status"] == "running"
    finally:
        await locker.close()
        await admin.close()
        await store.close()


#: The backends of the connections named ``$1`` that wait on a lock.
_WAITING_ON_A_LOCK = (
    "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'"
)


#: The backends of the connections named ``$1`` (their ``application_name``).
_POOL_PIDS = "SELECT pid FROM pg_stat_activity WHERE application_name = $1"


class LostCommitStore(PostgresStore):
    """A real PostgreSQL store whose next ``append_events`` commits and then fails as a
    connection dropped after COMMIT does (an ``OSError``: a failure the writer retries)."""

    lose_next = False

    async def append_events(self, events: list[Any]) -> None:
        await super().append_events(events)
        if self.lose_next:
            self.lose_next = False
            raise ConnectionResetError("connection was closed in the middle of operation")


async def test_a_batch_retried_after_a_lost_commit_reply_is_stored_once(schema: str) -> None:
    # the writer retried the committed batch: every event was stored twice (two
    # steering.applied for one command; an SSE client got each event under two ids)
    from tinyagents.events import RunEvent
    from tinyagents.store import StoreWriter

    store = LostCommitStore(postgres_dsn(), schema=schema)
    await store.open()
    try:
        writer = StoreWriter(store, flush_every_s=0.001, retry_first_s=0.001, retry_max_s=0.005)
        writer.start()
        store.lose_next = True
        for i in range(5):
            writer(RunEvent(type="run.status", run_id=f"r-{i}", root_run_id="r-0", tenant_id="a"))
        await writer.flush()
        await writer.aclose()
        assert writer.errors == 1  # it was retried
        stored = await store.load_events(root_run_id="r-0")
        assert [e.run_id for e in stored] == [f"r-{i}" for i in range(5)]
    finally:
        await store.close()


@pytest.mark.parametrize(
    "damaged",
    [
        "not json",
        "[1, 2]",
        '{"run_id": 7, "root_run_id": "r-1", "tenant_id": "acme", "status": "completed"}',
        '{"run_id": "r-1", "root_run_id": "r-1", "tenant_id": "acme", "status": "completed",'
        ' "usage": [1]}',
    ],
)
async def test_a_run_snapshot_that_does_not_read_is_a_store_error(
    store: PostgresStore, schema: str, damaged: str
) -> None:
    """As on SQLite (``read_snapshot``): a damaged runs row is the store's ``StoreError``,
    never a ``ValueError``, ``KeyError`` or ``TypeError`` in whoever reads it."""
    snapshot = {
        "run_id": "r-1",
        "root_run_id": "r-1",
        "parent_run_id": None,
        "tenant_id": "acme",
        "status": "completed",
        "kind": "agent",
        "created_at": "2026-12-01T00:00:00+00:00",
    }
    await store.save_runs([snapshot, {**snapshot, "run_id": "r-2", "root_run_id": "r-2"}])
    await sql(f"UPDATE \"{schema}\".runs SET data = $1 WHERE run_id = 'r-1'", damaged)
    for read in (lambda: store.load_run("r-1"), lambda: store.load_runs()):
        # the error names the row's run (its key), whatever the damage: the one to repair
        with pytest.raises(StoreError, match="could not read a run snapshot") as caught:
            await read()
        assert "'r-1'" in str(caught.value)
    # whose it is, from the row's tenant column (the API tells the damage to no other tenant)
    with pytest.raises(DamagedData) as damage:
        await store.load_run("r-1")
    assert damage.value.tenant_id == "acme"
    assert (await store.load_run("r-2") or {})["run_id"] == "r-2"  # the others still read
    # a listing lists the others and marks the row (the error names its run)
    listed = {s["run_id"]: s for s in await store.list_runs(tenant_id="acme")}
    assert set(listed) == {"r-1", "r-2"} and "error" not in listed["r-2"]
    assert "'r-1'" in listed["r-1"]["error"]["message"]


async def test_a_statement_past_command_timeout_is_a_store_error_that_says_so(
    schema: str,
) -> None:
    """A stalled database (here: a table another connection holds locked): the statement
    ends after ``command_timeout`` with a ``StoreError`` that may pass, which said only
    "could not log command c-1: TimeoutError". It says what timed out, and the store works
    again once the lock is gone (nothing of the statement that timed out was kept)."""
    store = PostgresStore(postgres_dsn(), schema=schema, command_timeout=0.5)
    await store.open()
    locker = await asyncpg.connect(postgres_dsn())
    try:
        tx = locker.transaction()
        await tx.start()
        await locker.execute(f'LOCK TABLE "{schema}".steering_log IN ACCESS EXCLUSIVE MODE')
        with pytest.raises(StoreError) as caught:
            await store.append_command(command("c-1"), state="accepted", run_id="r-1")
        message = str(caught.value)
        assert message.startswith("PostgreSQL: could not log command c-1: ")
        assert "no answer from the server within command_timeout (0.5 s)" in message
        assert may_pass(caught.value)
        await tx.rollback()
        assert await store.get_command("c-1") is None
        assert await store.append_command(command("c-1"), state="accepted", run_id="r-1")
    finally:
        await locker.close()
        await store.close()


async def test_a_checkpointer_read_past_command_timeout_says_so(schema: str) -> None:
    """The checkpointer's statements say what timed out alike (read: tried again, as a
    timeout may pass, and then raised)."""
    async with PostgresCheckpointer(postgres_dsn(), schema=schema, command_timeout=0.5) as cp:
        locker = await asyncpg.connect(postgres_dsn())
        try:
            async with locker.transaction():
                await locker.execute(f'LOCK TABLE "{schema}".checkpoints IN ACCESS EXCLUSIVE MODE')
                with pytest.raises(StoreError, match=r"within command_timeout \(0\.5 s\)"):
                    await cp.latest("t-1")
            assert await cp.latest("t-1") is None
        finally:
            await locker.close()


async def test_a_write_on_a_read_only_connection_may_pass_and_the_connection_is_replaced(
    schema: str,
) -> None:
    """The pool's connection is on a server that takes no writes (a standby a stale DNS name
    or a proxy still points to after a failover; here: its session made read-only). A write
    there failed with "cannot execute INSERT in a read-only transaction", a failure taken to
    never pass: the store writer dropped every event, one by one, and the pool kept the
    connection, so every write went on failing. It may pass: the pool's connections are
    replaced (new ones go where the DSN points now) and the writer keeps its events."""
    store = PostgresStore(postgres_dsn(), schema=schema, min_size=1, max_size=1)
    await store.open()
    writer = StoreWriter(store, flush_every_s=0.001, retry_first_s=0.001, retry_max_s=0.01)
    try:
        await store.pool.execute("SET default_transaction_read_only = on")
        with pytest.raises(StoreError, match="read-only transaction") as caught:
            await store.append_command(command("c-1"), state="accepted", run_id="r-1")
        assert may_pass(caught.value)
        assert await store.append_command(command("c-1"), state="accepted", run_id="r-1")
        await store.pool.execute("SET default_transaction_read_only = on")
        for n in range(5):
            writer(RunEvent(type="run.status", run_id="r-1", status=f"s{n}"))
        await writer.flush()
        await writer.aclose()
        assert writer.errors >= 1 and writer.dropped == 0
        statuses = [e.status for e in await store.load_events()]  # type: ignore[attr-defined]
        assert statuses == [f"s{n}" for n in range(5)]
    finally:
        await store.close()


async def test_an_exhausted_pool_is_a_store_error_that_may_pass_and_says_so(schema: str) -> None:
    """Every connection of the pool is held (here: its one connection, as by a long
    transaction): a call waited for a free one with no limit, though its statements are
    bounded by ``command_timeout``. The wait is bounded by ``command_timeout`` too, and running
    out is a ``StoreError`` that may pass and says the pool is exhausted; once the connection
    is given back, calls work again."""
    store = PostgresStore(postgres_dsn(), schema=schema, max_size=1, command_timeout=0.5)
    await store.open()
    try:
        async with asyncio.timeout(60):  # a hang guard: no timing is asserted
            async with store.pool.acquire():  # the pool's one connection, held
                calls = {
                    "read command c-1": lambda: store.get_command("c-1"),  # fetch again
                    "log command c-1": lambda: store.append_command(  # a transaction
                        command("c-1"), state="accepted", run_id="r-1"
                    ),
                    "append 1 event": lambda: store.append_events(
                        [RunEvent(type="run.status", run_id="r-1", status="s0")]
                    ),
                }
                for what, call in calls.items():
                    with pytest.raises(StoreError, match="pool is exhausted") as caught:
                        await call()
                    message = str(caught.value)
                    assert f"could not {what}" in message, message
                    assert "within command_timeout (0.5 s)" in message
                    assert "1 (max_size)" in message
                    assert may_pass(caught.value)
            assert await store.append_command(command("c-1"), state="accepted", run_id="r-1")
            assert await store.get_command("c-1") is not None
    finally:
        await store.close()


async def test_a_checkpointer_with_an_exhausted_pool_says_so(schema: str) -> None:
    """The checkpointer's reads (tried again when they may pass, but not an exhausted pool's:
    it waited once) and its thread deletion say the pool is exhausted alike."""
    async with PostgresCheckpointer(
        postgres_dsn(), schema=schema, max_size=1, command_timeout=0.5
    ) as cp:
        async with asyncio.timeout(60):  # a hang guard: no timing is asserted
            async with cp._pool.acquire():
                for call in (lambda: cp.latest("t-1"), lambda: cp.delete_thread("t-1")):
                    with pytest.raises(StoreError, match="pool is exhausted") as caught:
                        await call()
                    assert may_pass(caught.value)
            assert await cp.latest("t-1") is None


def test_a_statement_on_a_connection_the_server_ended_says_so() -> None:
    """A statement begun on a pooled connection the server had just ended (its parting error
    read, the socket's end not yet) failed with asyncpg's internal words "cannot switch to
    state 11; another operation (2) is in progress", shown as is in the ``StoreError``. It
    says the server ended the connection (and still may pass)."""
    ended = asyncpg.InternalClientError(
        "cannot switch to state 11; another operation (2) is in progress"
    )
    err = StoreError(f"PostgreSQL: could not log command c-1: {said(ended)}")
    err.__cause__ = cause(ended)
    assert "another operation" not in str(err) and "state 11" not in str(err)
    assert "the server ended the connection" in str(err)
    assert may_pass(err)
    busy = asyncpg.InterfaceError("cannot perform operation: another operation is in progress")
    assert said(busy) == str(busy)  # two calls on one connection: a bug, said as is


async def test_closing_on_a_stalled_server_ends_within_command_timeout(schema: str) -> None:
    """The server stops answering (a stall, a network partition): closing the store or the
    checkpointer waited with no limit, as asyncpg's pool close waits for the server to see
    each connection end (and a runtime's close after it), and so did the inbox listener's
    and the lease connection's close. Each waits ``command_timeout`` at most, then cuts the
    connections; what was committed stays."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    try:
        store = PostgresStore(proxy.dsn, schema=schema, command_timeout=0.5)
        await store.open()
        cp = PostgresCheckpointer(proxy.dsn, schema=schema, command_timeout=0.5)
        await cp.setup()
        assert await store.append_command(command("c-1"), state="accepted", run_id="r-1")
        await cp.acquire("t-1", "me")  # the lease connection too
        listener = await store.listen_inbox("rt-1", lambda: None)  # and the inbox's
        proxy.stall()
        async with asyncio.timeout(60):  # a hang guard: no timing is asserted
            await listener.aclose()
            await store.close()
            await cp.aclose()
    finally:
        await proxy.aclose()
    again = PostgresStore(postgres_dsn(), schema=schema)
    await again.open()
    try:
        assert await again.get_command("c-1") is not None
    finally:
        await again.close()


async def test_a_missing_events_table_is_logged_once_with_a_count_not_per_event(
    schema: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator dropped (here: renamed) the ``events`` table: every batch failed with
    "relation "events" does not exist", which never passes, and the store writer split it
    down to each event, tried each one again, then dropped it with a warning of its own
    (20 lines, then counted). A store that refuses an event JSON holds twice refuses events, not
    that one: the writer says so once, drops whole batches (still counted, runs never
    blocked), sums up now and then how many it dropped, and says when it writes again."""
    import logging

    from tinyagents.store import base

    monkeypatch.setattr(base, "_REFUSED_SUMMARY_S", 0.0)  # a summary at every batch
    store = PostgresStore(postgres_dsn(), schema=schema)
    await store.open()
    writer = StoreWriter(store, flush_every_s=0.001, retry_first_s=0.001, retry_max_s=0.01)
    caplog.set_level(logging.INFO, logger="tinyagents.store")
    try:
        await sql(f'ALTER TABLE "{schema}".events RENAME TO events_away')
        for batch in range(3):
            for n in range(30):
                writer(RunEvent(type="run.status", run_id="r-1", status=f"b{batch}-{n}"))
            errors = writer.errors
            await writer.flush()
            if batch:  # once it is known that the store refuses events: one try a batch
                assert writer.errors == errors + 1
        assert writer.dropped == 90
        lines = [r.getMessage() for r in caplog.records if r.name == "tinyagents.store"]
        refused = [line for line in lines if "refuses events" in line]
        assert len(refused) == 1 and 'relation "events" does not exist' in refused[0]
        assert not [line for line in lines if "event of run" in line]  # none per event
        summaries = [line for line in lines if "still dropping" in line]
        assert summaries and summaries[-1].startswith("store writer: still dropping events: 90")
        await sql(f'ALTER TABLE "{schema}".events_away RENAME TO events')
        writer(RunEvent(type="run.status", run_id="r-1", status="back"))
        await writer.flush()
        recovered = [
            r.getMessage() for r in caplog.records if "takes events again" in r.getMessage()
        ]
        assert len(recovered) == 1 and "90 event(s) dropped" in recovered[0]
        await writer.aclose()
        statuses = [e.status for e in await store.load_events()]  # type: ignore[attr-defined]
        assert statuses == ["back"]
    finally:
        await store.close()


@pytest.mark.parametrize("call", ["statement", "transaction"])
async def test_a_write_begun_on_a_connection_the_server_ended_is_sent_on_another(
    schema: str, call: str
) -> None:
    """The server ended the pooled connection (a restart, ``pg_terminate_backend``) and the
    client read its parting error but not yet the socket's end: the next write on it failed
    with asyncpg's "cannot switch to state 11; another operation (2) is in progress" before
    anything was sent, and the store only reworded it (a ``StoreError`` that may pass), so a
    command was not logged and its sender was told it failed. Nothing was sent: the write is
    sent once more, on another connection, and done once."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    store = PostgresStore(proxy.dsn, schema=schema, min_size=1, max_size=1)
    await store.open()
    admin = await asyncpg.connect(postgres_dsn())
    try:
        proxy.hold_ends()
        pid = await store.pool.fetchval("SELECT pg_backend_pid()")
        await admin.execute("SELECT pg_terminate_backend($1, 10000)", pid)
        async with asyncio.timeout(60):  # a hang guard
            await proxy.ended(1)
        await asyncio.sleep(0.05)  # the client reads the parting error (not asserted on)
        if call == "statement":
            assert await store.append_command(command("c-1"), state="accepted", run_id="r-1")
            stored = await store.get_command("c-1")
            assert stored is not None and stored.state == "accepted"
        else:
            snapshot = {
                "run_id": "r-1",
                "root_run_id": "r-1",
                "tenant_id": "acme",
                "status": "running",
            }
            assert await store.save_runs([snapshot]) == []
            assert await store.load_run("r-1") is not None
        assert await store.pool.fetchval("SELECT pg_backend_pid()") != pid
    finally:
        await admin.close()
        await proxy.aclose()  # first: the ended connection's end is held until then
        await store.close()


async def test_two_runtimes_settling_the_same_commands_in_other_orders_never_deadlock(
    schema: str,
) -> None:
    """Two runtimes settle the same two commands at once (one's batch of events settles
    them in one order, the other's answers in the other): each updated the steering log's
    rows in the order it was given, so each could hold the row the other wanted next, and
    PostgreSQL aborted one with "deadlock detected" (40P01): a ``StoreError`` its caller had
    to retry. Rows are settled in one order (scope, correlation id) by every runtime."""
    names = [f"ta-{schema}-{n}" for n in (1, 2)]  # each store's connections, no other's
    sep = "&" if "?" in postgres_dsn() else "?"
    first, second = (
        PostgresStore(f"{postgres_dsn()}{sep}application_name={name}", schema=schema)
        for name in names
    )
    await first.open()
    await second.open()
    admin = await asyncpg.connect(postgres_dsn())
    holds = {cid: await asyncpg.connect(postgres_dsn()) for cid in ("c-a", "c-b")}
    try:
        for cid in ("c-a", "c-b"):
            assert await first.append_command(command(cid), state="accepted", run_id="r-1")
        scope = dedupe_scope(command("c-a").actor)
        held = {}
        for cid, conn in holds.items():  # each row held by a transaction of its own
            held[cid] = conn.transaction()
            await held[cid].start()
            await conn.execute(
                f'SELECT 1 FROM "{schema}".steering_log WHERE correlation_id = $1 FOR UPDATE', cid
            )
        pid_a = await holds["c-a"].fetchval("SELECT pg_backend_pid()")
        one = asyncio.ensure_future(  # c-a, then c-b
            first.set_command_states(
                [(scope, "c-a", "applied", None), (scope, "c-b", "applied", None)]
            )
        )
        other = asyncio.ensure_future(  # c-b, then c-a
            second.set_command_states(
                [(scope, "c-b", "rejected", "no"), (scope, "c-a", "rejected", "no")]
            )
        )

        async def blockers(name: str) -> list[int]:
            rows = await admin.fetch(
                "SELECT pg_blocking_pids(pid) FROM pg_stat_activity"
                " WHERE application_name = $1 AND wait_event_type = 'Lock'",
                name,
            )
            return [pid for row in rows for pid in row[0]]

        async with asyncio.timeout(60):  # bounds the test; no timing is asserted
            while not await blockers(names[1]):  # noqa: ASYNC110 (the second waits too)
                await asyncio.sleep(0.01)
            await held["c-a"].commit()  # the first takes c-a, then waits for c-b too
            while not (now := await blockers(names[0])) or pid_a in now:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            await held["c-b"].commit()  # the second (first in line) takes c-b, then c-a
            await asyncio.gather(one, other)
        states = {(await first.get_command(cid)).state for cid in ("c-a", "c-b")}  # type: ignore[union-attr]
        assert len(states) == 1  # one runtime settled both, first
    finally:
        for conn in holds.values():
            await conn.close()
        await admin.close()
        await first.close()
        await second.close()


async def test_two_runtimes_saving_the_same_runs_in_other_orders_never_deadlock(
    schema: str,
) -> None:
    """Two runtimes save snapshots of the same two runs at once, each given them in another
    order (``save_runs`` without ``held_by``: a runtime's snapshot flush, an operator's
    write): each upserted the rows in the order it was given, so each could hold the row the
    other wanted next, and PostgreSQL aborted one with "deadlock detected" (40P01), as it did
    for settled steering-log rows. Rows are saved in one order (run id) by every runtime."""
    names = [f"ta-{schema}-{n}" for n in (1, 2)]  # each store's connections, no other's
    sep = "&" if "?" in postgres_dsn() else "?"
    first, second = (
        PostgresStore(f"{postgres_dsn()}{sep}application_name={name}", schema=schema)
        for name in names
    )
    await first.open()
    await second.open()
    admin = await asyncpg.connect(postgres_dsn())
    holds = {run_id: await asyncpg.connect(postgres_dsn()) for run_id in ("r-a", "r-b")}

    def snap(run_id: str, status: str) -> dict[str, Any]:
        return {"run_id": run_id, "root_run_id": run_id, "tenant_id": "acme", "status": status}

    try:
        await first.save_runs([snap("r-a", "running"), snap("r-b", "running")])
        held = {}
        for run_id, conn in holds.items():  # each row held by a transaction of its own
            held[run_id] = conn.transaction()
            await held[run_id].start()
            await conn.execute(
                f'SELECT 1 FROM "{schema}".runs WHERE run_id = $1 FOR UPDATE', run_id
            )
        pid_a = await holds["r-a"].fetchval("SELECT pg_backend_pid()")
        one = asyncio.ensure_future(  # r-a, then r-b
            first.save_runs([snap("r-a", "completed"), snap("r-b", "completed")])
        )
        other = asyncio.ensure_future(  # r-b, then r-a
            second.save_runs([snap("r-b", "failed"), snap("r-a", "failed")])
        )

        async def blockers(name: str) -> list[int]:
            rows = await admin.fetch(
                "SELECT pg_blocking_pids(pid) FROM pg_stat_activity"
                " WHERE application_name = $1 AND wait_event_type = 'Lock'",
                name,
            )
            return [pid for row in rows for pid in row[0]]

        async with asyncio.timeout(60):  # bounds the test; no timing is asserted
            while not await blockers(names[1]):  # noqa: ASYNC110 (the second waits too)
                await asyncio.sleep(0.01)
            await held["r-a"].commit()  # the first takes r-a, then waits for r-b too
            while not (now := await blockers(names[0])) or pid_a in now:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            await held["r-b"].commit()  # the second (first in line) takes r-b, then r-a
            assert await asyncio.gather(one, other) == [[], []]
        statuses = {(await first.load_run(r))["status"] for r in ("r-a", "r-b")}  # type: ignore[index]
        assert len(statuses) == 1  # one runtime saved both, last
    finally:
        for conn in holds.values():
            await conn.close()
        await admin.close()
        await first.close()
        await second.close()
