"""A hostile or careless user's twelfth round: what sits in the Redis keys a deployment's
workers share (a snapshot nested past any parser, a heartbeat no clock gives), ...

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from services import redis_url

from tinyagents import Runtime
from tinyagents.distributed.redis_control import RedisControl

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
    await client.hset(control.keys.runs("ghost"), mapping={**deep, "run-good": _snapshot("run-good")})
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
