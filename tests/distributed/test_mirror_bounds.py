"""The Redis mirror (``{prefix}:runs:{worker}``) holds what its worker's runtime holds: its
live runs and the finished runs of the retention window (``retain_finished``), no more. A
finished run leaves it when the runtime releases it (past the window, or ``rt.forget``), at the
worker's next write, not its next heartbeat; the hash always carries an expiry, so a dead worker's entries go too.
Against the real Redis, each test under its own key prefix."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from test_redis_control import eventually
from worker import slow_agent

from tinyagents import Runtime
from tinyagents.distributed import RedisControl
from tinyagents.distributed.wire import Keys

KW: dict[str, Any] = {"heartbeat_s": 0.2, "block_s": 0.2, "backoff_s": (0.05, 0.2)}


@pytest.fixture
async def client(redis_url: str, prefix: str) -> AsyncIterator[Any]:
    import redis.asyncio as aioredis

    redis = aioredis.Redis.from_url(redis_url)
    try:
        yield redis
    finally:
        async for key in redis.scan_iter(match=f"{prefix}:*"):
            await redis.delete(key)
        await redis.aclose()


async def finish(rt: Runtime, n: int) -> list[str]:
    """Start ``n`` runs one after the other, each to its end; their ids in order."""
    ids = []
    for _ in range(n):
        handle = await rt.start(slow_agent(0, 0.0), "go", tenant_id="acme")
        await handle.result()
        ids.append(handle.run_id)
    return ids


def held(rt: Runtime) -> set[bytes]:
    return {i.run_id.encode() for i in rt.runs.list()}


async def test_the_mirror_holds_no_more_finished_runs_than_the_runtime_retains(
    redis_url: str, prefix: str, client: Any
) -> None:
    """A server that ran 217 runs showed 215 entries in its worker's hash: the finished runs
    of the retention window (1,000 by default), not a leak. With ``retain_finished=3``, ten
    finished runs leave the three latest in the hash, the ones the runtime still holds."""
    keys = Keys(prefix)
    async with (
        Runtime(retain_finished=3) as rt,
        RedisControl(rt, redis_url, worker_id="a", prefix=prefix, **KW),
    ):
        ids = await finish(rt, 10)
        assert held(rt) == {i.encode() for i in ids[-3:]}
        listed = await eventually(
            lambda: client.hkeys(keys.runs("a")), lambda ks: set(ks) == held(rt)
        )
        assert len(listed) == 3
        # and it stays so: more runs move the window, the hash follows it
        more = await finish(rt, 4)
        await eventually(
            lambda: client.hkeys(keys.runs("a")),
            lambda ks: set(ks) == {i.encode() for i in more[-3:]},
        )


async def test_forget_takes_a_finished_run_off_the_mirror_and_off_other_workers(
    redis_url: str, prefix: str, client: Any
) -> None:
    """A just-finished run stays readable from another worker (its final snapshot, as its own
    worker lists it) while its runtime keeps it; ``rt.forget`` takes it off the hash at the
    worker's next write, and another worker no longer finds it there (the durable store,
    where there is one, still has it)."""
    keys = Keys(prefix)
    async with (
        Runtime() as rt_a,
        Runtime() as rt_b,
        RedisControl(rt_a, redis_url, worker_id="a", prefix=prefix, **KW),
        RedisControl(rt_b, redis_url, worker_id="b", prefix=prefix, **KW) as rc_b,
    ):
        first, second = await finish(rt_a, 2)
        seen = await eventually(
            lambda: rc_b.get_run(first), lambda s: s is not None and s["status"] == "completed"
        )
        assert seen["worker"] == "a"
        rt_a.forget(first)
        await eventually(
            lambda: client.hkeys(keys.runs("a")), lambda ks: set(ks) == {second.encode()}
        )
        assert await rc_b.get_run(first) is None
        assert {s["run_id"] for s in await rc_b.list_runs(None)} == {second}


async def test_forget_takes_the_run_off_the_mirror_at_once_not_at_the_next_heartbeat(
    redis_url: str, prefix: str, client: Any
) -> None:
    """Another worker could read a forgotten run's entry until the next heartbeat (here an
    hour away): the mirror is told of the release and takes it off at its next write."""
    keys = Keys(prefix)
    kw = {**KW, "heartbeat_s": 3600.0, "ttl_s": 7200.0}
    async with (
        Runtime() as rt_a,
        Runtime() as rt_b,
        RedisControl(rt_a, redis_url, worker_id="a", prefix=prefix, **kw),
        RedisControl(rt_b, redis_url, worker_id="b", prefix=prefix, **kw) as rc_b,
    ):
        first, second = await finish(rt_a, 2)
        await eventually(
            lambda: client.hkeys(keys.runs("a")),
            lambda ks: set(ks) == {first.encode(), second.encode()},
        )
        rt_a.forget(first)
        # (a deadline against a hang, far below the heartbeat)
        await eventually(
            lambda: client.hkeys(keys.runs("a")), lambda ks: set(ks) == {second.encode()}, within=20
        )
        assert await rc_b.get_run(first) is None


async def test_a_window_in_seconds_empties_the_mirror_of_finished_runs(
    redis_url: str, prefix: str, client: Any
) -> None:
    """``retain_finished_s=0``: a finished run is released as soon as the next run ends (or
    ``release_finished`` is called), and leaves the hash with it."""
    keys = Keys(prefix)
    async with (
        Runtime(retain_finished_s=0) as rt,
        RedisControl(rt, redis_url, worker_id="a", prefix=prefix, **KW),
    ):
        await finish(rt, 3)
        await rt.release_finished()
        assert held(rt) == set()
        await eventually(lambda: client.hkeys(keys.runs("a")), lambda ks: ks == [])


async def test_the_mirror_hash_always_expires_so_a_dead_worker_leaves_nothing_forever(
    redis_url: str, prefix: str, client: Any
) -> None:
    """Whenever it holds entries (finished runs included) the hash carries an expiry of at
    most ``ttl_s``, renewed at each heartbeat: a worker that dies without its ``aclose``
    leaves entries that go by themselves. A worker that stops deletes the hash."""
    keys = Keys(prefix)
    async with Runtime() as rt:
        control = RedisControl(rt, redis_url, worker_id="a", prefix=prefix, ttl_s=5.0, **KW)
        await control.start()
        try:
            await finish(rt, 3)
            await eventually(lambda: client.hlen(keys.runs("a")), lambda n: n == 3)
            for _ in range(5):  # across heartbeats
                ttl = await client.pttl(keys.runs("a"))
                assert 0 < ttl <= 5_000
                await eventually(lambda: client.hlen(keys.runs("a")), lambda n: n == 3)
        finally:
            await control.aclose()
        assert await client.exists(keys.runs("a")) == 0
