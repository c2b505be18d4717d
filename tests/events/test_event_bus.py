"""``EventBus``: offsets, sinks, bounded per-subscriber queues that drop and count."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tinyagents.errors import SubscriptionInUse
from tinyagents.events import Event, EventBus, MemorySink, RunEvent, Subscription


def run_event(run_id: str = "r-1", type_: str = "run.status") -> RunEvent:
    return RunEvent(type=type_, run_id=run_id)  # type: ignore[arg-type]


def test_publish_assigns_increasing_offsets_and_feeds_sinks_in_order() -> None:
    bus = EventBus()
    first, second = MemorySink(), MemorySink()
    bus.add_sink(first)
    bus.add_sink(second)
    published = [bus.publish(run_event()) for _ in range(4)]
    assert [e.offset for e in published] == [0, 1, 2, 3]
    assert first.events == second.events == published
    assert bus.published == 4
    bus.remove_sink(second)
    bus.publish(run_event())
    assert (len(first.events), len(second.events)) == (5, 4)


async def test_slow_subscriber_drops_and_counts_without_blocking_the_publisher() -> None:
    bus = EventBus()
    slow = bus.subscribe(maxsize=2)
    fast = bus.subscribe(maxsize=100)
    for _ in range(5):
        bus.publish(run_event())  # synchronous: returns although nobody reads `slow`
    assert slow.dropped == 3
    assert fast.dropped == 0
    assert [(await slow.get()).offset for _ in range(2)] == [0, 1]  # type: ignore[union-attr]
    assert slow.get_nowait() is None
    assert [fast.get_nowait().offset for _ in range(5)] == [0, 1, 2, 3, 4]  # type: ignore[union-attr]
    bus.publish(run_event())  # room again: delivered, not dropped
    assert slow.get_nowait().offset == 5  # type: ignore[union-attr]
    assert slow.dropped == 3


async def test_subscriber_filter() -> None:
    bus = EventBus()
    mine = bus.subscribe(where=lambda e: e.run_id == "mine")
    bus.publish(run_event("other"))
    bus.publish(run_event("mine"))
    event = mine.get_nowait()
    assert event is not None and event.run_id == "mine"
    assert mine.get_nowait() is None
    assert mine.dropped == 0


async def test_closed_subscription_drains_then_ends() -> None:
    bus = EventBus()
    async with bus.subscribe() as sub:
        bus.publish(run_event(type_="run.started"))
        bus.publish(run_event(type_="run.completed"))
    bus.publish(run_event(type_="run.failed"))  # after close: not received
    seen: list[Event] = [event async for event in sub]
    assert [e.type for e in seen] == ["run.started", "run.completed"]
    assert await sub.get() is None
    sub.close()  # idempotent


async def test_closing_the_bus_ends_every_subscription_even_a_full_one() -> None:
    bus = EventBus()
    full = bus.subscribe(maxsize=1)
    empty = bus.subscribe(where=lambda e: False)
    bus.publish(run_event())
    bus.close()
    assert full.closed and empty.closed
    assert [e.offset async for e in full] == [0]
    assert [e async for e in empty] == []
    bus.publish(run_event())  # nobody left to receive: fine


def test_an_event_a_sink_publishes_reaches_everyone_after_the_one_it_handles() -> None:
    bus = EventBus()
    seen: list[tuple[str, int | None]] = []

    def echo(event: Event) -> None:
        seen.append(("echo", event.offset))
        if event.type == "run.started":
            bus.publish(run_event(type_="run.status"))

    def later(event: Event) -> None:
        seen.append(("later", event.offset))

    bus.add_sink(echo)
    bus.add_sink(later)
    sub = bus.subscribe()
    bus.publish(run_event(type_="run.started"))
    assert seen == [("echo", 0), ("later", 0), ("echo", 1), ("later", 1)]
    assert [sub.get_nowait().offset for _ in range(2)] == [0, 1]  # type: ignore[union-attr]
    assert bus.published == 2


def test_sinks_added_or_removed_during_delivery_do_not_change_that_delivery() -> None:
    bus = EventBus()
    seen: list[tuple[str, int | None]] = []

    def record(name: str) -> Callable[[Event], None]:
        def sink(event: Event) -> None:
            seen.append((name, event.offset))

        sink.__qualname__ = name
        return sink

    second, third, added = record("second"), record("third"), record("added")

    def first(event: Event) -> None:
        seen.append(("first", event.offset))
        if event.offset == 0:
            bus.remove_sink(second)  # removed while the bus iterates its sinks
            bus.add_sink(added)

    bus.add_sink(first)
    bus.add_sink(second)
    bus.add_sink(third)
    bus.publish(run_event())
    assert seen == [("first", 0), ("second", 0), ("third", 0)]
    seen.clear()
    bus.publish(run_event())
    assert seen == [("first", 1), ("third", 1), ("added", 1)]


async def test_a_subscription_made_after_the_bus_closed_ends_at_once() -> None:
    bus = EventBus()
    bus.close()
    late = bus.subscribe()
    assert late.closed
    assert [e async for e in late] == []
    bus.publish(run_event())
    assert late.get_nowait() is None


async def test_a_second_task_reading_one_subscription_is_refused_not_given_half_the_events() -> (
    None
):
    """Two tasks reading one ``rt.subscribe()`` split its events (each went to whichever task
    waited first), and neither knew: one subscription is one reader's queue. The second task
    that waits while another waits is refused; the first still gets every event."""
    bus = EventBus()
    sub = bus.subscribe()
    seen: list[int] = []

    async def read(n: int) -> None:
        async for event in sub:
            seen.append(event.offset)
            if len(seen) == n:
                return

    first = asyncio.create_task(read(4))
    await asyncio.sleep(0)  # the first reader waits for an event
    with pytest.raises(SubscriptionInUse, match="subscribe once per reader"):
        await read(4)
    for _ in range(4):
        bus.publish(run_event())
    await first
    assert seen == [0, 1, 2, 3]


async def test_a_subscription_passes_to_another_task_once_its_reader_stopped_waiting() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    waiting = asyncio.create_task(sub.get())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    bus.publish(run_event())
    got = await asyncio.create_task(sub.get())  # another task: the first is gone
    assert got is not None and got.offset == 0
    # and one task may wait again and again (each async for step is one wait)
    later = asyncio.create_task(sub.get())
    await asyncio.sleep(0)
    bus.publish(run_event())
    assert (await later).offset == 1  # type: ignore[union-attr]


async def test_a_subscription_passes_on_as_soon_as_its_reader_is_cancelled() -> None:
    """Found by review: the task taking over from a cancelled reader (``t.cancel()``, then
    read at once, before the cancelled task ran again) was refused, the cancelled reader
    still counted as waiting; the docs say a cancelled reader no longer holds it."""
    bus = EventBus()
    sub = bus.subscribe()
    waiting = asyncio.create_task(sub.get())
    await asyncio.sleep(0)
    waiting.cancel()  # not yet run again: its ``finally`` has not run
    asyncio.get_running_loop().call_soon(bus.publish, run_event())
    got = await sub.get()  # this task takes over at once
    assert got is not None and got.offset == 0
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_reader_that_goes_on_after_its_cancel_still_holds_its_subscription() -> None:
    """Found by the second review: a reader cancelled while waiting that catches the cancel
    and waits again (or one that swallowed a cancel earlier, anywhere) stays ``cancelling``
    for good, and another task was let in beside it: the two split the events. Only a cancel
    that came while the reader waited lets another task take over, and only until the
    reader waits again."""
    bus = EventBus()
    sub = bus.subscribe()
    seen: list[int] = []

    async def stubborn() -> None:
        while len(seen) < 3:
            try:
                event = await sub.get()
            except asyncio.CancelledError:
                continue  # caught: it goes on reading (and is ``cancelling`` from now on)
            assert event is not None
            seen.append(event.offset)

    reader = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    reader.cancel()
    await asyncio.sleep(0)  # it caught the cancel and waits again
    with pytest.raises(SubscriptionInUse):
        async with asyncio.timeout(5):  # (let in, it would wait for the events: a bound)
            await sub.get()
    for _ in range(3):
        bus.publish(run_event())
    await reader
    assert seen == [0, 1, 2]


async def test_a_subscription_per_reader_gives_each_every_event() -> None:
    bus = EventBus()
    subs = [bus.subscribe(), bus.subscribe()]
    tasks = [asyncio.create_task(_take(s, 3)) for s in subs]
    await asyncio.sleep(0)
    for _ in range(3):
        bus.publish(run_event())
    assert [await t for t in tasks] == [[0, 1, 2], [0, 1, 2]]


async def _take(sub: Subscription, n: int) -> list[int]:
    got = []
    async for event in sub:
        got.append(event.offset)
        if len(got) == n:
            break
    return got
