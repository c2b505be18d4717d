"""``testkit.EventWaiter``: a wait given up (a timeout, a cancelled test task) leaves nothing
behind, and a later event still reaches the waits that are still on."""

from __future__ import annotations

import asyncio

import pytest

from tinyagents.events import Event, EventBus, RunEvent
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


async def test_a_predicate_that_raises_fails_its_wait_with_that_error() -> None:
    bus, waiter = EventBus(), EventWaiter()
    bus.add_sink(waiter)

    def broken(event: Event) -> bool:
        raise KeyError("no such field")

    failing = asyncio.ensure_future(waiter.until(broken))
    fine = asyncio.ensure_future(waiter.event("run.started"))
    await asyncio.sleep(0)
    bus.publish(RunEvent(type="run.started", run_id="r-1", root_run_id="r-1"))
    await asyncio.sleep(0)
    assert failing.done(), "the wait hangs on, though its predicate raised"
    with pytest.raises(KeyError, match="no such field"):
        await failing
    assert (await fine).run_id == "r-1"  # the other waits still get the event
    assert waiter._waiting == []
    assert bus.sink_errors == {}  # the error went to the wait, not to the bus


async def test_a_predicate_that_raises_on_a_seen_event_fails_the_wait() -> None:
    waiter = EventWaiter()
    waiter(RunEvent(type="run.started", run_id="r-1", root_run_id="r-1"))
    with pytest.raises(ZeroDivisionError):
        await waiter.until(lambda e: 1 / 0 > 0)
    assert waiter._waiting == []
