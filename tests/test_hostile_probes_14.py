"""A hostile or careless user's fourteenth round, against what was built the same day:
``@task(timeout=)`` / ``@entrypoint(timeout=)``, ``end_strategy``, ``capture_run_messages``,
``override(name=)``, run ``metadata=``, ``Checkpointer.saving_together()``, ``events.mask``.

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn, redis_url, unique_prefix

from tinyagents import Runtime
from tinyagents.distributed import RedisControl
from tinyagents.distributed.wire import Keys
from tinyagents.errors import ArgumentError, GraphValidationError
from tinyagents.graph import START, StateGraph, TimeoutPolicy, entrypoint, task
from tinyagents.store.checkpoint import (
    Checkpointer,
    CheckpointRecord,
    PostgresCheckpointer,
    SqliteCheckpointer,
)
from tinyagents.testkit import fake_agent

#: A whole number of seconds past any float: no finite timeout.
PAST_FLOATS = 10**400


# -- timeouts given as whole numbers too large for a float -----------------------------------


@pytest.mark.parametrize("decorator", [task, entrypoint])
def test_a_task_or_entrypoint_timeout_past_any_float_is_refused(decorator: Any) -> None:
    """Found: ``@task(timeout=10**400)`` (and ``@entrypoint``'s) was a bare ``OverflowError``
    (``int too large to convert to float``) out of the decorator: it passed ``0 < t < inf``
    and failed as it became a float. It is the ``GraphValidationError`` any other timeout
    no finite number of seconds is."""
    with pytest.raises(GraphValidationError, match="finite number of seconds"):
        decorator(timeout=PAST_FLOATS)


def test_a_node_or_step_timeout_past_any_float_is_refused() -> None:
    """Found with the probe above: ``add_node(timeout=10**400)`` and
    ``TimeoutPolicy(idle_timeout=10**400)`` were the same bare ``OverflowError``, and
    ``step_timeout = 10**400`` let every run fail with it at its first step."""
    graph: StateGraph[Any] = StateGraph(dict)
    with pytest.raises(GraphValidationError, match="finite number of seconds"):
        graph.add_node("n", lambda state: state, timeout=PAST_FLOATS)
    for field in ("run_timeout", "idle_timeout"):
        with pytest.raises(ArgumentError, match=f"TimeoutPolicy.{field} must be finite"):
            TimeoutPolicy(**{field: PAST_FLOATS})
    graph.add_node("n", lambda state: state)
    graph.add_edge(START, "n")
    compiled = graph.compile()
    with pytest.raises(GraphValidationError, match="step_timeout must be None or a finite"):
        compiled.step_timeout = PAST_FLOATS


def test_a_timeout_a_float_holds_is_still_taken() -> None:
    """The bound is what a float holds: a large but finite timeout (1e300 s, a timedelta of
    days) is taken, as before."""
    assert TimeoutPolicy.coerce(1e300) == TimeoutPolicy(run_timeout=1e300)
    assert task(timeout=timedelta(days=3)) is not None
    assert entrypoint(timeout=10**300) is not None


# -- the Redis mirror told of a release once its job has ended --------------------------------


async def test_a_release_after_the_mirror_job_ended_is_no_error() -> None:
    """Found: with the runtime closed before its ``RedisControl`` (its bus closed: the mirror's
    job ends, as it does when cancelled), ``rt.forget`` of a run the mirror listed raised
    ``RuntimeError: Cannot change state of finished Timeout`` half way through the release:
    the mirror's release hook (``LiveRuns.on_release``) rescheduled the job's wait, which had
    ended. The run is released; the control's ``aclose`` takes its listing off as before."""
    import redis.asyncio as aioredis

    prefix = unique_prefix("hp14")
    client = aioredis.Redis.from_url(redis_url())
    try:
        async with Runtime() as rt, RedisControl(rt, redis_url(), worker_id="w", prefix=prefix):
            handle = await rt.start(fake_agent("clerk"), "go")
            await handle.result()
            listing = Keys(prefix).runs("w")
            for _ in range(1000):  # listed at the mirror's next write
                if handle.run_id.encode() in await client.hkeys(listing):
                    break
                await asyncio.sleep(0.01)
            else:
                pytest.fail("the mirror never listed the run")
            job = next(t for t in asyncio.all_tasks() if t.get_name() == "redis-mirror-w")
            await rt.close()
            await job  # its runtime's bus closed: the mirror's job ended
            rt.forget(handle.run_id)
            assert rt.runs.get(handle.run_id) is None
    finally:
        async for key in client.scan_iter(match=f"{prefix}:*"):
            await client.delete(key)
        await client.aclose()


async def test_a_mirrored_snapshot_with_damaged_fields_is_skipped() -> None:
    """Found: a worker's listing entry whose ``accepts`` (new today: the kinds a graph task's
    entry takes) is no list of text, ``{"accepts": 5}`` or ``["pause", 3]`` (another
    version's worker, a hand edit), was answered as it was by ``get_run`` and the listing, so
    the HTTP API sent a ``RunSnapshot`` against its own OpenAPI document and the console's
    controls read a number as the kinds. The mirror's reader checked only the ids; it now
    skips an entry a store would call damaged (``read_snapshot``: ``tools``, ``models``,
    ``accepts``, ``pending_commands``, ``interrupts``, times), counted as malformed."""
    import json

    import redis.asyncio as aioredis

    prefix = unique_prefix("hp14")
    client = aioredis.Redis.from_url(redis_url())
    keys = Keys(prefix)
    base = {"tenant_id": "acme", "status": "running", "worker": "odd", "root_run_id": ""}
    odd = {
        "g-accepts-5": {"accepts": 5},
        "g-accepts-mixed": {"accepts": ["pause", 3]},
        "g-tools-text": {"tools": "search"},
        "g-fine": {"accepts": ["cancel"]},
    }
    try:
        async with (
            Runtime() as rt,
            RedisControl(rt, redis_url(), worker_id="w", prefix=prefix) as rc,
        ):
            seconds, micros = await client.time()
            await client.zadd(keys.workers, {"odd": seconds + micros / 1_000_000 + 60})
            entries = {
                run_id: json.dumps({**base, "run_id": run_id, "root_run_id": run_id, **fields})
                for run_id, fields in odd.items()
            }
            await client.hset(keys.runs("odd"), mapping=entries)
            listed = {r["run_id"] for r in await rc.list_runs(tenant_id="acme")}
            assert listed == {"g-fine"}
            for run_id in ("g-accepts-5", "g-accepts-mixed", "g-tools-text"):
                assert await rc.get_run(run_id) is None
            fine = await rc.get_run("g-fine")
            assert fine is not None and fine["accepts"] == ["cancel"]
            assert rc.counters.malformed >= 3
    finally:
        async for key in client.scan_iter(match=f"{prefix}:*"):
            await client.delete(key)
        await client.aclose()


# -- a task started inside a saving_together() block ------------------------------------------


def _record(seq: int) -> CheckpointRecord:
    return CheckpointRecord(
        thread_id="t",
        ns="",
        checkpoint_id=f"t//{seq}",
        parent_id=f"t//{seq - 1}" if seq else None,
        seq=seq,
        step=seq,
        snapshot=seq == 0,
        values={"n": seq},
        frontier=[],
        frontier_id=f"f{seq}",
        lineage="L",
        source="loop",
        created_at=1000.0 + seq,
    )


@pytest.fixture(params=["sqlite", "postgresql"])
async def saver(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Checkpointer]:
    if request.param == "sqlite":
        checkpointer: Checkpointer = SqliteCheckpointer(str(tmp_path / "cp.db"))
    else:
        checkpointer = PostgresCheckpointer(postgres_dsn(), schema=pg_schema())
    try:
        await checkpointer.setup()
        yield checkpointer
    finally:
        await checkpointer.aclose()
        if request.param == "postgresql":
            await drop_pg_schemas()


async def test_a_task_started_in_a_saving_together_block_saves_after_it(
    saver: Checkpointer,
) -> None:
    """Found: the block's connection is found through a context variable, which a task
    started in the block copies (``asyncio.create_task``, ``gather``): such a task that saved
    after the block ended used the block's connection still, closed (SQLite: ``StoreError
    ... closed database``, for every save of that task) or given back to the pool
    (PostgreSQL: another caller's). The block holds the saves of the task that opened it, as
    its docstring says; another task saves on its own, before or after the block's end."""
    await saver.put(_record(0))
    go = asyncio.Event()

    async def later() -> None:
        await go.wait()
        await saver.put(_record(2))

    async with saver.saving_together():
        await saver.put(_record(1))
        task = asyncio.create_task(later())
    go.set()
    await task
    assert [r.seq for r in await saver.list("t")] == [2, 1, 0]


# -- the 405's message ------------------------------------------------------------------------


async def test_a_405_cuts_a_long_method_it_names() -> None:
    """Found: the 405's message (new today) names the method sent, whole: a client's made-up
    method of 20,000 characters came back twice (``detail`` and ``message``), a 40 kB answer
    to a request line. The method is cut as an error quotes a long id (``shown_id``: its head
    and its length); a usual one is named as it was."""
    from tinyagents.server import Control, create_app

    async with Runtime() as rt:
        app = create_app(Control(rt), auth=None, console=False)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            long = await client.request("X" * 20_000, "/api/agents/runs")
            usual = await client.request("PATCH", "/api/agents/runs")
    assert long.status_code == usual.status_code == 405
    assert len(long.text) < 1_000, long.text[:300]
    assert "(20,000 characters)" in long.json()["message"]
    assert usual.json()["message"].startswith("PATCH is not allowed here: this path takes GET")
