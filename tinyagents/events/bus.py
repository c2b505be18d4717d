"""In-process event fan-out.

``publish`` is synchronous and never blocks: sinks are plain callables, and every subscriber has
its own bounded queue; when a subscriber's queue is full the event is dropped *for that
subscriber* and counted, so a slow reader can never stall a run.

Nor can a broken one: an exception from a sink or from a subscription's ``where`` filter never
reaches the publisher (a run, the steering router), nor does a ``SystemExit`` (a library's
``sys.exit``) or a ``CancelledError`` one raises of itself. It is counted
(``EventBus.sink_errors``, ``Subscription.errors``) and logged on the ``tinyagents.events``
logger the first time that sink or subscription raises that type of error. A
``KeyboardInterrupt`` is the user stopping the program, and goes on to the publisher.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from tinyagents.errors import ArgumentError, ConfigurationError, SubscriptionInUse
from tinyagents.events.models import Event
from tinyagents.protocol.ids import shown_repr

Sink = Callable[[Event], None]
EventFilter = Callable[[Event], bool]

log = logging.getLogger("tinyagents.events")


# What a sink or a filter raises does not reach the publisher: it is its failure, whatever
# it is but ``KeyboardInterrupt`` (the user stopping the program). A sink is called
# synchronously, so no cancellation of the publisher's task lands inside it and a
# ``CancelledError`` is its own; ``SystemExit`` let through a run's task ends the event loop
# under every run of the runtime; and ``GeneratorExit`` or a library's own ``BaseException``
# ended the publishing run's task, the run left 'running' for ever. (Two except clauses:
# they cost nothing until something is raised.)


def _report(what: str, exc: BaseException, logged: set[type[BaseException]]) -> None:
    # Once per culprit and error type: a sink that fails on every event must not flood the log.
    if type(exc) in logged:
        return
    logged.add(type(exc))
    log.error(
        "%s raised %s; the event was skipped for it, and later %ss from it are only counted",
        what,
        type(exc).__name__,
        type(exc).__name__,
        exc_info=exc,
    )


def sink_name(sink: Callable[..., object]) -> str:
    """The key of a sink in ``EventBus.sink_errors``: its function's or its class's name."""
    name = getattr(sink, "__qualname__", None)
    return name if isinstance(name, str) else type(sink).__qualname__


class Subscription:
    """An async iterator of events; ``dropped`` counts what did not fit in its queue,
    ``errors`` the events its ``where`` filter raised on (those are skipped).

    One reader's: a task that waits for its next event while another task waits on it is
    refused (``SubscriptionInUse``), since the two would split its events; ``subscribe()``
    once per reader, and each subscription gets every event. Once its reader stops waiting
    (it ended, or was cancelled), another task may read it."""

    def __init__(self, bus: EventBus, maxsize: int, where: EventFilter | None) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=maxsize)
        self._where = where
        self._logged: set[type[BaseException]] = set()
        self.dropped = 0
        self.errors = 0
        self.closed = False
        #: the task waiting in ``get`` (at most one: two would split the events), with how
        #: many cancels it had pending when it began to wait
        self._waiting: tuple[asyncio.Task[Any], int] | None = None

    def offer(self, event: Event) -> None:
        if self.closed:
            return
        if self._where is not None:
            try:
                if not self._where(event):
                    return
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self.errors += 1
                _report(f"the filter {sink_name(self._where)} of a subscription", exc, self._logged)
                return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    async def get(self) -> Event | None:
        """The next event, or ``None`` once the subscription is closed and drained."""
        if self._waiting is not None and _held_by_another(self._waiting):
            raise SubscriptionInUse(
                "another task is waiting for this subscription's next event: two readers "
                "would each get some of its events; subscribe once per reader (each "
                "subscription gets every event)"
            )
        if not self._queue.empty():
            return self._queue.get_nowait()
        if self.closed:
            return None
        me = asyncio.current_task()
        if me is None:  # driven by hand, outside any task: no reader to tell apart
            return await self._queue.get()
        waiting = self._waiting = (me, me.cancelling())
        try:
            return await self._queue.get()
        finally:
            if self._waiting is waiting:  # not already taken over (this task was cancelled)
                self._waiting = None

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


def _held_by_another(waiting: tuple[asyncio.Task[Any], int]) -> bool:
    """Whether ``waiting`` (a subscription's reader, with the cancels it had pending when it
    began to wait) is another task still waiting: one that ended, or was cancelled since it
    began to wait (it stops waiting when it next runs), holds it no longer."""
    task, cancels = waiting
    return task is not asyncio.current_task() and not task.done() and task.cancelling() <= cancels


class EventBus:
    """Assigns offsets and fans events out to sinks and subscribers."""

    def __init__(self) -> None:
        self._offsets = itertools.count()
        # Tuples, replaced on change: delivery iterates the one it read, so a sink that adds or
        # removes a sink (or a filter that closes a subscription) makes no event skip, or
        # reach twice, another one.
        self._sinks: tuple[Sink, ...] = ()
        self._subscribers: tuple[Subscription, ...] = ()
        self._logged: dict[str, set[type[BaseException]]] = {}
        #: Events published but not yet handed to everyone; drained by the outermost publish.
        self._undelivered: deque[Event] = deque()
        self._delivering = False
        self.closed = False
        self.published = 0
        #: Events each sink raised on, by ``sink_name``; a sink that never raised is absent.
        self.sink_errors: dict[str, int] = {}

    def add_sink(self, sink: Sink) -> None:
        if isinstance(sink, type):  # callable, and "constructed" by every event (a TypeError)
            raise ConfigurationError(
                f"add_sink takes a sink, got the class {sink.__name__}: add_sink({sink.__name__}())"
            )
        if not callable(sink):  # taken, it raised at every event (as subscribe's ``where``)
            raise ConfigurationError(
                f"add_sink({shown_repr(sink)}) takes a callable (event) -> None, e.g. a MemorySink() "
                f"or a function; got {type(sink).__name__}"
            )
        self._sinks = (*self._sinks, sink)

    def remove_sink(self, sink: Sink) -> None:
        sinks = list(self._sinks)
        sinks.remove(sink)  # ValueError for a sink never added, as list.remove says
        self._sinks = tuple(sinks)

    def publish(self, event: Event) -> Event:
        event.offset = next(self._offsets)
        self.published += 1
        if self._delivering:
            # A sink publishing while it handles another event: this one waits until that
            # one has reached every sink and subscriber (delivered at once, the later sinks
            # and the subscribers would see it before the event it answers, out of order).
            self._undelivered.append(event)
            return event
        self._delivering = True
        try:
            # ``_deliver(event)`` inline (four events per steering command come through here);
            # the events sinks publish meanwhile go through ``_deliver`` below
            for sink in self._sinks:
                try:
                    sink(event)
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:
                    self._sink_failed(sink, exc)
            for sub in self._subscribers:
                sub.offer(event)
            undelivered = self._undelivered
            while undelivered:
                self._deliver(undelivered.popleft())
        finally:
            self._delivering = False
        return event

    def _deliver(self, event: Event) -> None:
        for sink in self._sinks:
            try:
                sink(event)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self._sink_failed(sink, exc)
        for sub in self._subscribers:
            sub.offer(event)

    def _sink_failed(self, sink: Sink, exc: BaseException) -> None:
        name = sink_name(sink)
        self.sink_errors[name] = self.sink_errors.get(name, 0) + 1
        _report(f"the event sink {name}", exc, self._logged.setdefault(name, set()))

    def subscribe(self, *, maxsize: int = 10_000, where: EventFilter | None = None) -> Subscription:
        """A new subscription holding at most ``maxsize`` unread events (at least 1)."""
        if isinstance(maxsize, bool) or not isinstance(maxsize, int):
            raise ConfigurationError(
                f"subscribe(maxsize={shown_repr(maxsize)}) takes a whole number of events (at "
                "least 1)"
            )
        if where is not None and not callable(where):  # taken, it raised at every event
            raise ConfigurationError(
                f"subscribe(where={shown_repr(where)}) takes a function (event) -> bool, e.g. "
                "lambda e: e.type.startswith('steering.')"
            )
        if maxsize < 1:
            # asyncio.Queue(maxsize=0) is unbounded: a forgotten subscriber would grow forever.
            raise ArgumentError(
                f"subscribe(maxsize={shown_repr(maxsize)}): a subscription holds at least 1 event; "
                "pass the largest backlog you accept (the default is 10_000)"
            )
        sub = Subscription(self, maxsize, where)
        if self.closed:
            sub.close()  # no event will ever come: a reader must end, not wait forever
        else:
            self._subscribers = (*self._subscribers, sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subscribers:
            self._subscribers = tuple(s for s in self._subscribers if s is not sub)

    def close(self) -> None:
        """End every subscription (each drains what it holds); later ones end at once."""
        self.closed = True
        for sub in self._subscribers:
            sub.close()
