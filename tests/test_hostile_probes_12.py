"""A hostile or careless user's twelfth round: what sits in the Redis keys a deployment's
workers share (a snapshot nested past any parser, a heartbeat no clock gives, a seat key
holding what no worker wrote), and stored JSON nested past the parser (a store's run, event,
checkpoint and graph-store rows, an event read back, a listing's cursor), a fake clock's
tick past the calendar, an event summary's megabyte keys.

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from services import drop_pg_schemas, pg_schema, postgres_dsn, redis_url

from tinyagents import Agent, Runtime
from tinyagents.distributed import RedisControl
from tinyagents.errors import ArgumentError, ConfigurationError, DamagedData, StoreError
from tinyagents.events import MASK, mask, parse_event, summarize
from tinyagents.events.redact import _is_secret
from tinyagents.server.control import decode_cursor
from tinyagents.store import PostgresStore, SqliteStore
from tinyagents.store.cache import SqliteCache
from tinyagents.store.checkpoint import CheckpointRecord, SqliteCheckpointer, WriteRecord
from tinyagents.store.longterm import SqliteGraphStore
from tinyagents.testkit import EPOCH, FakeClock, ScriptedModel
from tinyagents.testkit.clock import MAX_SECONDS

pytestmark = pytest.mark.usefixtures("default_recursion_limit")


# -- what sits in a deployment's Redis keys ---------------------------------------------------


def _snapshot(run_id: str) -> str:
    return json.dumps(
        {
            "run_id": run_id,
            "root_run_id": run_id,
            "tenant_id": "acme",
            "status": "running",
            "worker": "ghost",
        }
    )


@pytest.fixture
async def shared() -> AsyncIterator[tuple[RedisControl, Any]]:
    """A worker's control and a client of the Redis it shares, under a prefix of its own."""
    import redis.asyncio as aioredis

    url, prefix = redis_url(), f"hp12-{uuid.uuid4().hex[:12]}"
    client = aioredis.from_url(url)
    try:
        async with Runtime() as rt, RedisControl(rt, url, worker_id="w", prefix=prefix) as c:
            yield c, client
    finally:
        keys = [k async for k in client.scan_iter(f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def _now(client: Any) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1_000_000


async def test_a_snapshot_nested_past_the_json_parser_is_skipped_not_a_failed_listing(
    shared: tuple[RedisControl, Any],
) -> None:
    """Found: a worker's hash holding an entry nested 100,000 deep (``[[[...]]]``, written
    straight into Redis) made ``list_runs`` raise ``RecursionError`` (the JSON parser's, which
    is no ``ValueError``): the operator API's listing was a 500 for every worker's runs. It is
    skipped and counted ``malformed`` as any entry of another shape is."""
    control, client = shared
    await client.zadd(control.keys.workers, {"ghost": await _now(client)})
    deep = {"list": "[" * 100_000 + "]" * 100_000, "dict": '{"a":' * 100_000 + "1" + "}" * 100_000}
    await client.hset(
        control.keys.runs("ghost"), mapping={**deep, "run-good": _snapshot("run-good")}
    )
    runs = await control.list_runs(None)
    assert [r["run_id"] for r in runs] == ["run-good"]
    assert control.counters.malformed == 2
    for run_id in deep:
        assert await control.get_run(run_id) is None
    assert control.connected


@pytest.mark.parametrize("beat", [math.inf, 1e300, 1e13], ids=["inf", "1e300", "year-318857"])
async def test_a_heartbeat_no_clock_gives_is_skipped_not_a_failed_listing(
    shared: tuple[RedisControl, Any], beat: float
) -> None:
    """Found: a member of the worker set scored ``+inf`` or 1e300 (a heartbeat no clock
    gives: a hand edit, another program under the prefix) made ``list_runs`` and ``get_run``
    raise ``OverflowError`` (its runs' ``updated_at`` is the time of that beat): a 500 for
    every worker's runs. Such a worker is skipped and counted ``malformed``; the others are
    listed."""
    control, client = shared
    await client.zadd(control.keys.workers, {"ghost": beat, "live": await _now(client)})
    await client.hset(control.keys.runs("ghost"), "run-odd", _snapshot("run-odd"))
    await client.hset(control.keys.runs("live"), "run-good", _snapshot("run-good"))
    runs = await control.list_runs(None)
    assert [r["run_id"] for r in runs] == ["run-good"]
    assert await control.get_run("run-odd") is None
    assert (await control.get_run("run-good") or {}).get("run_id") == "run-good"
    assert control.counters.malformed >= 1 and control.connected


async def _seat_taken_by(hold: Callable[[Any, str], Awaitable[Any]]) -> None:
    """Start a worker whose seat key ``hold(client, key)`` filled first."""
    import redis.asyncio as aioredis

    url, prefix = redis_url(), f"hp12-{uuid.uuid4().hex[:12]}"
    client = aioredis.from_url(url)
    try:
        async with Runtime() as rt:
            control = RedisControl(
                rt, url, worker_id="w", prefix=prefix, heartbeat_s=0.1, ttl_s=0.3
            )
            await hold(client, control.keys.seat("w"))
            try:
                await control.start()
            finally:
                await control.aclose()
    finally:
        keys = [k async for k in client.scan_iter(f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def test_a_seat_key_holding_no_text_is_a_configuration_error() -> None:
    """Found: a worker's seat key holding bytes that are no UTF-8 text (no process's token:
    a hand edit, another program under the prefix) made ``RedisControl.start`` raise
    ``UnicodeDecodeError``. It is held by no process this worker can tell gone, as a holder
    on another host: waited for, then a ``ConfigurationError`` saying the id is in use."""
    with pytest.raises(ConfigurationError, match=r"worker id 'w' is in use"):
        await _seat_taken_by(lambda client, key: client.set(key, b"\xff\xfe"))


async def test_a_seat_key_of_another_type_is_a_configuration_error() -> None:
    """Found: a worker's seat key holding a hash (a key of another program under the prefix)
    made ``RedisControl.start`` (and ``tinyagents serve --redis``) raise Redis's own
    ``ResponseError`` (``WRONGTYPE``). It is a ``ConfigurationError`` naming the key and what
    to do, as every other refusal at start is."""
    with pytest.raises(ConfigurationError, match=r"seat:w.*another prefix"):
        await _seat_taken_by(lambda client, key: client.hset(key, "a", "b"))


# -- stored JSON nested past the parser ------------------------------------------------------

#: JSON nested deeper than Python's reader goes: ``json.loads`` raises ``RecursionError``
#: for it, which is no ``ValueError`` (every reader of damaged rows caught only that).
DEEP = "[" * 5_000 + "]" * 5_000
#: What every reader already took for damage, side by side with ``DEEP``.
DAMAGED = {"not-json": "{", "deep": DEEP}


def test_an_event_nested_past_the_parser_is_a_validation_error() -> None:
    """Found: ``parse_event`` of JSON nested 5,000 deep raised ``RecursionError`` (pydantic's
    reader refused it, and the standard library's, tried for a lone surrogate's escape, ran
    out of stack); it raises ``pydantic.ValidationError`` for anything that is no event."""
    for text in (DEEP, DEEP.encode(), '{"a":' * 5_000 + "1" + "}" * 5_000):
        with pytest.raises(ValidationError):
            parse_event(text)


@pytest.mark.parametrize("damage", DAMAGED)
async def test_a_store_row_nested_past_the_parser_is_damage_as_any_unreadable_row(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: a run row whose snapshot is JSON nested 5,000 deep made ``load_run``,
    ``load_runs`` and ``list_runs`` raise ``RecursionError`` (``tinyagents runs list
    --store`` a traceback, the operator API's listing a 500), where a row of any other
    damage is ``DamagedData`` naming it (and listed as damaged); such an event row stopped every reader of the
    log instead of being left out with a warning."""
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data) "
            "VALUES ('r1', 'r1', 'acme', 'running', ?)",
            (DAMAGED[damage],),
        )
        db.execute(
            "INSERT INTO events (type, run_id, root_run_id, data) "
            "VALUES ('run.started', 'r1', 'r1', ?)",
            (DAMAGED[damage],),
        )
    db.close()
    caplog.set_level(logging.WARNING)
    store = SqliteStore(path)
    await store.open()
    try:
        reads: list[Callable[[], Awaitable[Any]]] = [
            lambda: store.load_run("r1"),
            lambda: store.load_runs(),
        ]
        for read in reads:
            with pytest.raises(DamagedData, match="run snapshot of 'r1'"):
                await read()
        (listed,) = await store.list_runs()  # an operator's listing shows it, as damaged
        assert listed["run_id"] == "r1" and listed["error"]["type"] == "damaged_snapshot"
        assert await store.load_events() == []
    finally:
        await store.close()
    assert "does not read as an event" in caplog.text


@pytest.mark.parametrize("damage", DAMAGED)
async def test_a_checkpoint_row_nested_past_the_parser_is_a_store_error(
    tmp_path: Path, damage: str
) -> None:
    """Found: a checkpoint body or a pending write nested 5,000 deep was ``RecursionError``
    out of ``latest``/``get_writes`` (and of every run of the thread), where one that is not
    JSON is a ``StoreError`` naming it."""
    path = tmp_path / "cp.db"
    record = CheckpointRecord(
        thread_id="t",
        checkpoint_id="c0",
        parent_id=None,
        seq=0,
        step=0,
        snapshot=True,
        values={"n": 0},
        frontier=[{"node": "a"}],
        frontier_id="f0",
        lineage="L",
        source="loop",
    )
    write = WriteRecord(task_id="k", kind="result", key="n", value=1)
    async with SqliteCheckpointer(path) as cp:
        await cp.put(record)
        await cp.put_writes("t", "", "f0", [write])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE checkpoints SET body = ?", (DAMAGED[damage],))
        db.execute("UPDATE checkpoint_writes SET value = ?", (DAMAGED[damage],))
    db.close()
    async with SqliteCheckpointer(path) as cp:
        with pytest.raises(StoreError, match="checkpoint 'c0' of thread 't'"):
            await cp.latest("t")
        with pytest.raises(StoreError, match="pending write of task 'k'"):
            await cp.get_writes("t", "", "f0")


@pytest.mark.parametrize("damage", DAMAGED)
async def test_a_graph_store_item_nested_past_the_parser_is_a_store_error(
    tmp_path: Path, damage: str
) -> None:
    """Found: an item of the SQLite graph store nested 5,000 deep was ``RecursionError`` out
    of ``aget`` and ``asearch``, where one that is not JSON is a ``StoreError`` naming it."""
    path = tmp_path / "g.db"
    async with SqliteGraphStore(path) as store:
        await store.aput(("u",), "k", {"a": 1})
    with sqlite3.connect(path) as db:
        db.execute("UPDATE graph_store_items SET value = ?", (DAMAGED[damage],))
    db.close()
    async with SqliteGraphStore(path) as store:
        with pytest.raises(StoreError, match="'k' no longer reads"):
            await store.aget(("u",), "k")
        with pytest.raises(StoreError, match="'k' no longer reads"):
            await store.asearch(("u",))


@pytest.mark.parametrize("damage", DAMAGED)
async def test_a_node_cache_row_nested_past_the_parser_is_no_entry(
    tmp_path: Path, damage: str
) -> None:
    """Found: a ``SqliteCache`` row nested 5,000 deep was ``RecursionError`` out of ``get``
    (and of the graph run reading it), where one that is not JSON is read as no entry and
    dropped."""
    path, key = tmp_path / "c.db", (("writes", "n"), "k")
    async with SqliteCache(path) as cache:
        await cache.set({key: ({"a": 1}, None)})
    with sqlite3.connect(path) as db:
        db.execute("UPDATE node_cache SET value = ?", (DAMAGED[damage],))
    db.close()
    async with SqliteCache(path) as cache:
        assert await cache.get([key]) == {}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM node_cache").fetchone() == (0,)
    db.close()


def test_a_cursor_nested_past_the_parser_is_no_cursor() -> None:
    """Found: a listing's ``cursor`` (base64 of JSON, under ``MAX_CURSOR`` characters) that
    decodes to ``[`` 1,200 times raised ``RecursionError`` from ``decode_cursor``: ``GET
    /runs?cursor=...`` was a 500 for anyone who can list runs. It is no cursor this server
    handed out, as any other (the API's 422, ``tests/server/test_hostile_api_12.py``)."""
    for depth in (1_200, 1_500):
        cursor = base64.urlsafe_b64encode(b"[" * depth).rstrip(b"=").decode()
        with pytest.raises(ValueError, match="not a cursor this server handed out"):
            decode_cursor(cursor)


# -- a fake clock ticking off the calendar ----------------------------------------------------


@pytest.mark.parametrize(
    ("start", "tick"),
    [(datetime.max.replace(tzinfo=UTC), 1.0), (EPOCH, 1e11), (EPOCH, MAX_SECONDS)],
    ids=["at-the-end", "1e11-s", "largest-tick"],
)
def test_a_fake_clock_ticking_past_the_calendar_says_so_at_the_reading(
    start: datetime, tick: float
) -> None:
    """Found: ``advance`` refuses to take a ``FakeClock`` past 9999 AD, but its ``tick`` took
    it there unchecked: the reading after raised a bare ``OverflowError`` ("date value out
    of range") from deep in whatever read the time (a run failed naming no clock). It is an
    ``ArgumentError`` naming the clock's start and tick, and the clock does not move on."""
    clock = FakeClock(start, tick=tick)
    readings = []
    with pytest.raises(ArgumentError, match=r"FakeClock ran past 9999 AD.*tick"):
        for _ in range(10):
            readings.append(clock.now())
    assert readings and readings[0] == start
    elapsed = clock.elapsed
    with pytest.raises(ArgumentError):
        clock.now()
    assert clock.elapsed == elapsed


# -- a summary's keys -------------------------------------------------------------------------


def test_a_summary_cuts_a_long_key_as_it_cuts_a_long_value() -> None:
    """Found: ``summarize`` cut values to ``max_chars`` but kept keys whole: a tool call
    whose arguments held a key of a megabyte (a model looping on one word) put the megabyte
    into its ``tool.call`` event, the store's event log, and every subscriber's copy."""
    summary = summarize({"k" * 1_000_000: 1, "short": "kept"})
    assert summary == {f"{'k' * 200}… (1000000 chars)": 1, "short": "kept"}


def test_a_long_key_naming_a_secret_past_the_cut_is_still_masked() -> None:
    summary = summarize({"x" * 1_000 + "_password": "hunter2", "y" * 1_000: "open"})
    assert list(summary.values()) == [MASK, "open"]
    assert mask({"x" * 1_000 + "_api_key": "sk-1"}) == {"x" * 1_000 + "_api_key": MASK}


def test_long_keys_are_not_kept_by_the_secret_name_cache() -> None:
    """Found: whether a key names a secret was cached for 4,096 keys of any length: 50
    summaries of distinct megabyte keys kept 50 MB for the life of the process (4 GB at
    the cache's size). Only keys a summary keeps whole are cached."""
    before = _is_secret.cache_info().currsize
    for i in range(20):
        summarize({f"{i}" + "k" * 100_000: 1})
        mask({f"{i}" + "m" * 100_000: 1})
    assert _is_secret.cache_info().currsize == before


# -- a run started under the id of a damaged row ----------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize(
    "damage", ["{", DEEP, "[]", '{"run_id": 5}'], ids=["not-json", "deep", "list", "no-ids"]
)
async def test_a_run_started_over_a_damaged_row_is_refused_and_the_row_kept(
    tmp_path: Path, backend: str, damage: str
) -> None:
    """Found: ``rt.start(..., run_id=...)`` on a SQLite store whose row for that id is
    damaged raised ``RecursionError`` (JSON nested too deep), ``AttributeError`` (a JSON
    list) or a plain ``StoreError``, and JSON of another shape was taken for a free id and
    overwritten: the claim read the row with ``json.loads`` where every other read uses
    ``read_snapshot``. Now ``DamagedData`` naming the run, on SQLite as on PostgreSQL, and
    the row is left for repair."""
    if backend == "sqlite":
        path = tmp_path / "s.db"
        store: Any = SqliteStore(path)
    else:
        store = PostgresStore(postgres_dsn(), schema=pg_schema(tmp_path))
    await store.open()
    try:
        if backend == "sqlite":
            with sqlite3.connect(path) as db:
                db.execute(
                    "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data) "
                    "VALUES ('r1', 'r1', 'acme', 'running', ?)",
                    (damage,),
                )
            db.close()
        else:
            async with store._pool.acquire() as conn:
                await conn.execute(
                    "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data) "
                    "VALUES ('r1', 'r1', 'acme', 'running', $1)",
                    damage,
                )
        async with Runtime(store=store) as rt:
            with pytest.raises(DamagedData, match="run snapshot of 'r1'"):
                await rt.start(Agent("a", ScriptedModel(["hi"])), "go", run_id="r1")
            assert rt.runs.get("r1") is None
            with pytest.raises(DamagedData):  # still there, as it was, for repair
                await store.load_run("r1")
    finally:
        await store.close()
        if backend == "postgres":
            await drop_pg_schemas()
