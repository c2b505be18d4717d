"""Injectable clock and id source.

Commands, events and runs take their timestamps and ids from here, so a test can make both
deterministic with ``use_clock(FakeClock())`` / ``use_ids(SequentialIds())`` from the testkit.
The current source lives in a ``ContextVar``: tasks started inside the ``with`` block inherit it.
"""

from __future__ import annotations

import itertools
import os
import time
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...
    def monotonic(self) -> float: ...


class IdSource(Protocol):
    def new(self, prefix: str) -> str: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class RandomIds:
    """Ids ``c-3f9a0c41d2e7``: 48 random bits from the OS's CSPRNG, the bits ``uuid4().hex[:12]``
    gave at a tenth of the cost. Not guessable by another tenant (who could otherwise take a
    command's id first).

    The bits are read 256 ids at a time (one system call for each id was half the cost of an
    id) into a deque, whose ``popleft`` threads may share. A forked child empties it: it
    must not hand out the ids its parent will.
    """

    _BATCH = 256

    def __init__(self) -> None:
        self._pool: deque[str] = deque()
        _sources.add(self)

    def new(self, prefix: str) -> str:
        try:
            return f"{prefix}-{self._pool.popleft()}"
        except IndexError:
            bits = os.urandom(6 * self._BATCH).hex()
            self._pool.extend(bits[i : i + 12] for i in range(0, len(bits), 12))
            return f"{prefix}-{self._pool.popleft()}"


#: Every ``RandomIds``: their pools are emptied in a forked child.
_sources: weakref.WeakSet[RandomIds] = weakref.WeakSet()


def _forget_ids_after_fork() -> None:
    for source in list(_sources):
        source._pool.clear()


os.register_at_fork(after_in_child=_forget_ids_after_fork)


class SequentialIds:
    """Ids ``c-0001``, ``c-0002`` …, one counter per prefix: stable across test runs."""

    def __init__(self) -> None:
        self._counters: dict[str, Iterator[int]] = {}

    def new(self, prefix: str) -> str:
        counter = self._counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}-{next(counter):04d}"


# The defaults are stateless, so sharing one instance across contexts is what we want.
_clock: ContextVar[Clock] = ContextVar("tinyagents_clock", default=SystemClock())  # noqa: B039
_ids: ContextVar[IdSource] = ContextVar("tinyagents_ids", default=RandomIds())  # noqa: B039


def now() -> datetime:
    return _clock.get().now()


def monotonic() -> float:
    return _clock.get().monotonic()


def new_id(prefix: str) -> str:
    return _ids.get().new(prefix)


def current_clock() -> Clock:
    return _clock.get()


@contextmanager
def use_clock(clock: Clock) -> Iterator[Clock]:
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


@contextmanager
def use_ids(ids: IdSource) -> Iterator[IdSource]:
    token = _ids.set(ids)
    try:
        yield ids
    finally:
        _ids.reset(token)
