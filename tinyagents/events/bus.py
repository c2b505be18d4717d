"""In-process event fan-out.

``publish`` is synchronous and never blocks: sinks are plain callables, and every subscriber has
its own bounded queue; when a subscriber's queue is full the event is dropped *for that
subscriber* and counted, so a slow reader can never stall a run.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

from tinyagents.events.models import Event

Sink = Callable[[Event], None]
EventFilter = Callable[[Event], bool]


class Subscription:
    """An async iterator of events; ``dropped`` counts what did not fit in its queue."""

    def __init__(self, bus: EventBus, maxsize: int, where: EventFilter | None) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=maxsize)
        self._where = where
        self.dropped = 0
        self.closed = False

    def offer(self, event: Event) -> None:
        if self.closed or (self._where is not None and not self._where(event)):
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    async def get(self) -> Event | None:
        """The next event, or ``None`` once the subscription is closed and drained."""
        if self.closed and self._queue.empty():
            return None
        return await self._queue.get()

    def get_nowait(self) -> Event | None:
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._bus._unsubscribe(self)
        try:
            self._queue.put_nowait(None)  # wakes a reader blocked in get()
        except asyncio.QueueFull:
            pass

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while True:
            event = await self.get()
            if event is None:
                return
            yield event

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


class EventBus:
    """Assigns offsets and fans events out to sinks and subscribers."""

    def __init__(self) -> None:
        self._offsets = itertools.count()
        self._sinks: list[Sink] = []
        self._subscribers: list[Subscription] = []
        self.published = 0

    def add_sink(self, sink: Sink) -> None:
        self._sinks.append(sink)

    def remove_sink(self, sink: Sink) -> None:
        self._sinks.remove(sink)

    def publish(self, event: Event) -> Event:
        event._set_offset(next(self._offsets))
        self.published += 1
        for sink in self._sinks:
            sink(event)
        for sub in self._subscribers:
            sub.offer(event)
        return event

    def subscribe(self, *, maxsize: int = 10_000, where: EventFilter | None = None) -> Subscription:
        sub = Subscription(self, maxsize, where)
        self._subscribers.append(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    def close(self) -> None:
        for sub in list(self._subscribers):
            sub.close()
