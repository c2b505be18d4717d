"""The operator facade over Redis: ``Control(runtime, redis=...)`` lists every worker's runs and
sends commands for another worker's runs there (two runtimes in this process, one Redis)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from test_redis_control import OPERATOR, command, eventually
from worker import slow_agent

from tinyagents import RunStatus, Runtime, SteeringActor
from tinyagents.distributed import RedisControl
from tinyagents.server.control import Control


@pytest.fixture
async def pair(redis_url: str, prefix: str) -> AsyncIterator[tuple[Runtime, Control, RedisControl]]:
    """Worker a's runtime, and worker b's Control (with its RedisControl)."""
    async with Runtime() as rt_a, Runtime() as rt_b:
        kw = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2, "backoff_s": (0.05, 0.2)}
        async with RedisControl(rt_a, redis_url, worker_id="a", **kw):  # type: ignore[arg-type]
            async with RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b:  # type: ignore[arg-type]
                control = Control(rt_b, redis=rc_b)
                try:
                    yield rt_a, control, rc_b
                finally:
                    control.close()


async def test_control_lists_and_steers_another_workers_run_through_redis(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    rt_a, control, rc_b = pair
    handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")

    runs = await eventually(
        lambda: control.list_runs(tenant_id="acme"),
        lambda runs: any(r["run_id"] == handle.run_id for r in runs),
    )
    assert next(r for r in runs if r["run_id"] == handle.run_id)["worker"] == "a"
    assert await control.list_runs(tenant_id="globex") == []
    snap = await control.get_run(handle.run_id, tenant_id="acme")
    assert snap is not None and snap["worker"] == "a"
    assert await control.get_run(handle.run_id, tenant_id="globex") is None

    receipt = await control.submit(command(handle.run_id, "pause"))
    assert receipt.status == "accepted" and rc_b.counters.sent == 1
    await eventually(lambda: asyncio.sleep(0, handle.status), lambda s: s is RunStatus.PAUSED)
    outsider = SteeringActor.human("eve", tenant_id="globex", scopes=["agent:control"])
    refused = await control.submit(command(handle.run_id, "cancel", actor=outsider))
    assert refused.status == "rejected" and refused.reason == f"not found: run {handle.run_id}"
    cancel = await control.submit(command(handle.run_id, "cancel", actor=OPERATOR))
    assert cancel.status == "accepted"
    assert (await handle.result()).status is RunStatus.CANCELLED


async def test_a_command_for_a_thread_reaches_the_worker_running_it(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    from tinyagents import SteeringCommand, SteeringKind, SteeringTarget

    rt_a, control, rc_b = pair
    handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-9")
    await eventually(
        lambda: control.get_run(handle.run_id, tenant_id="acme"), lambda s: s is not None
    )
    cancel = SteeringCommand(
        target=SteeringTarget.thread("t-9"), actor=OPERATOR, kind=SteeringKind.CANCEL, payload={}
    )
    receipt = await control.submit(cancel)
    assert receipt.status == "accepted" and rc_b.counters.sent == 1
    assert (await handle.result()).status is RunStatus.CANCELLED
