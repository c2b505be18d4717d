"""Start a coroutine now, in the caller's call, and hand the rest to a task only if it waits.

The supervisor reacts inside ``EventBus.publish``, which is synchronous. Its command must be
in the target's queue before the run reaches its next boundary (a final answer, say, is
accepted at the boundary right after the ``model.response`` that trips a rule). Submitting an
in-memory command never waits, so running it to its end here queues it in time; with a durable
store it waits for the write, and the rest runs in a task the host owns. (Python 3.12's eager
tasks do the same; this package supports 3.11.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")

Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]


def start_eagerly(coro: Coroutine[Any, Any, T], spawn: Spawn) -> asyncio.Task[Any] | None:
    """Run ``coro`` until it first waits; None if it finished (its result is dropped: use
    the coroutine itself to act on it), else the task that finishes it."""
    try:
        pending = coro.send(None)
    except StopIteration:
        return None
    except BaseException:
        raise
    return spawn(_Rest(coro, pending).wait())


class _Rest:
    """The remainder of a started coroutine, as an awaitable: ``yield from`` by hand."""

    def __init__(self, coro: Coroutine[Any, Any, Any], pending: Any) -> None:
        self.coro = coro
        self.pending = pending

    async def wait(self) -> Any:
        return await self

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, pending = self.coro, self.pending
        while True:
            try:
                sent = yield pending
            except BaseException as exc:  # a cancellation of the task: pass it in
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                pending = coro.send(sent)
            except StopIteration as stop:
                return stop.value
