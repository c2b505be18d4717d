"""Blocking user code (a sync tool, a sync graph node with a timeout) on a thread of its own.

``asyncio.to_thread`` runs on the event loop's default executor, which has a few workers
(``min(32, cpus + 4)``: 6 on a 2-core machine) shared with everything else on the loop,
litellm's request preparation included. A call abandoned at its timeout keeps its worker until
it returns, which may be never: a handful of stuck tools then starved every later sync tool
and every model request of the process. ``in_own_thread`` gives each call a daemon thread of
its own instead, so a stuck call holds that thread only, and a program does not wait for it at
exit (the executor's threads are joined there).

Written here rather than taken from a library: the standard library has the pieces
(``threading``, ``contextvars``, ``loop.call_soon_threadsafe``), and a pool of any size would
be exhausted the same way.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


def settle(
    future: asyncio.Future[Any], *, result: Any = None, error: BaseException | None = None
) -> None:
    """Give ``future`` its outcome, unless its caller stopped waiting for it (a timeout, a
    cancel: it is done already)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def in_own_thread(fn: Callable[..., _T], /, *args: Any, name: str = "tinyagents-call") -> _T:
    """``await asyncio.to_thread(fn, *args)`` on a new daemon thread (``name``): the caller's
    context variables are seen by ``fn``, its result or exception comes back here. Cancelling
    the await abandons the call; the thread runs on to its end and its outcome is dropped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()
    context = contextvars.copy_context()

    def answer(result: Any, error: BaseException | None) -> None:
        settle(future, result=result, error=error)

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (context.run(fn, *args), None)
        except StopIteration as exc:  # a future refuses it (the await would last for ever)
            error = RuntimeError(f"{getattr(fn, '__name__', fn)!r} raised StopIteration")
            error.__cause__ = exc
            outcome = (None, error)
        except GeneratorExit as exc:
            # through the future, asyncio would throw it into the awaiting task, closing
            # every frame of it at once, past the caller's handlers: carried, and raised in
            # the caller's frame as ``fn`` raised it
            outcome = (None, _Exited(exc))
        except BaseException as exc:  # handed to the caller, as to_thread hands it
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(answer, *outcome)
        except RuntimeError:  # the loop has closed: nobody waits for it any more
            pass

    threading.Thread(target=work, name=name, daemon=True).start()
    try:
        return await future
    except _Exited as exited:
        raise exited.exc from None


class _Exited(Exception):
    """The ``GeneratorExit`` a call raised on its thread (``exc``), on its way to the caller."""

    def __init__(self, exc: GeneratorExit) -> None:
        super().__init__(exc)
        self.exc = exc
