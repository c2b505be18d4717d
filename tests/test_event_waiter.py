"""``testkit.EventWaiter``: a wait given up (a timeout, a cancelled test task) leaves nothing
behind, and a later event still reaches the waits that are still on."""

from __future__ import annotations

import asyncio

import pytest

from tinyagents.events import RunEvent
from tinyagents.testkit import EventWaiter


async def test_waits_given_up_are_forgotten_and_the_live_one_is_answered() -> None:
    waiter = EventWaiter()
    for _ in range(50):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(waiter.event("run.started", run_id="r-1"), timeout=0.001)
    still_on = asyncio.ensure_future(waiter.event("run.started", run_id="r-1"))
    await asyncio.sleep(0)
    assert len(waiter._waiting) == 1  # the wait still on, none of the 50 given up

    waiter(RunEvent(type="run.started", run_id="r-1", root_run_id="r-1"))
    assert (await still_on).run_id == "r-1"
    assert waiter._waiting == []


async def test_a_cancelled_wait_is_forgotten() -> None:
    waiter = EventWaiter()
    given_up = asyncio.ensure_future(waiter.until(lambda e: True))
    await asyncio.sleep(0)
    given_up.cancel()
    with pytest.raises(asyncio.CancelledError):
        await given_up
    assert waiter._waiting == []
