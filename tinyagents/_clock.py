"""Injectable clock and id source.

Every timestamp and every id (commands, runs, model requests, graph threads, checkpoints,
frontiers, forks, lease owners) comes from here, so a test can make both deterministic with
``use_clock(FakeClock())`` / ``use_ids(SequentialIds())`` from the testkit. The current source
lives in a ``ContextVar``: tasks started inside the ``with`` block inherit it.

``new_id`` gives an unordered id; ``new_ordered_id`` one that sorts after every id the same
source gave before (checkpoint ids: their order is their thread's history order).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Protocol

from tinyagents.errors import ConfigurationError


class Clock(Protocol):
    def now(self) -> datetime: ...
    def monotonic(self) -> float: ...


class IdSource(Protocol):
    def new(self, prefix: str) -> str: ...
    def new_ordered(self, prefix: str) -> str: ...


class SystemClock:
    #: ``datetime.now(UTC)`` with no Python frame of its own: every event is stamped with it.
    now: Callable[[], datetime] = staticmethod(functools.partial(datetime.now, UTC))

    def monotonic(self) -> float:
        return time.monotonic()


class RandomIds:
    """Ids ``c-3f9a0c41d2e7``: 48 random bits from the OS's CSPRNG, the bits ``uuid4().hex[:12]``
    gave at a tenth of the cost. Not guessable by another tenant (who could otherwise take a
    command's id first).

    The bits are read 256 ids at a time (one system call for each id was half the cost of an
    id) into a deque, whose ``popleft`` threads may share. A forked child empties it: it
    must not hand out the ids its parent will.

    Ordered ids ``ck-0663b1c2d3e4f-3f9a0c41d2e7`` put the microseconds since the epoch (13 hex
    digits, strictly increasing within a process even if the wall clock steps back) before
    the random part, so they sort by when they were made.
    """

    _BATCH = 256

    def __init__(self) -> None:
        self._pool: deque[str] = deque()
        self._last_us = 0
        self._lock = threading.Lock()
        _sources.add(self)

    def new(self, prefix: str) -> str:
        try:  # ``_bits()`` inline: every steering command's correlation id comes from here
            bits = self._pool.popleft()
        except IndexError:
            bits = self._bits()
        return f"{prefix}-{bits}"

    def new_ordered(self, prefix: str) -> str:
        with self._lock:
            self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
            stamp = self._last_us
        return f"{prefix}-{stamp:013x}-{self._bits()}"

    def _bits(self) -> str:
        try:
            return self._pool.popleft()
        except IndexError:
            bits = os.urandom(6 * self._BATCH).hex()
            self._pool.extend(bits[i : i + 12] for i in range(0, len(bits), 12))
            return self._pool.popleft()


#: Every ``RandomIds``: their pools are emptied in a forked child.
_sources: weakref.WeakSet[RandomIds] = weakref.WeakSet()


def _forget_ids_after_fork() -> None:
    for source in list(_sources):
        source._pool.clear()
        source._lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_forget_ids_after_fork)


class SequentialIds:
    """Ids ``c-0001``, ``c-0002`` …, one counter per prefix: stable across test runs.

    Ordered ids come from the same counters, so they sort as made (up to ``-9999``). Ids are
    unique per instance only: two instances writing one store make the same checkpoint ids.
    """

    def __init__(self) -> None:
        self._counters: dict[str, Iterator[int]] = {}

    def new(self, prefix: str) -> str:
        counter = self._counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}-{next(counter):04d}"

    def new_ordered(self, prefix: str) -> str:
        return self.new(prefix)


# The defaults are stateless, so sharing one instance across contexts is what we want.
_clock: ContextVar[Clock] = ContextVar("tinyagents_clock", default=SystemClock())  # noqa: B039
_ids: ContextVar[IdSource] = ContextVar("tinyagents_ids", default=RandomIds())  # noqa: B039


def now() -> datetime:
    return _clock.get().now()


def monotonic() -> float:
    return _clock.get().monotonic()


def new_id(prefix: str) -> str:
    """``<prefix>-<12 random hex digits>``, unique, not guessable, in no particular order."""
    return _ids.get().new(prefix)


def new_uuid() -> str:
    """A UUID string (version 4 in form), for ids whose users expect one (message ids, as
    LangGraph gives them): random from the default source; from any other source derived
    from its next id, so ``use_ids(SequentialIds())`` makes it deterministic too."""
    source = _ids.get()
    if type(source) is RandomIds:
        return str(uuid.uuid4())
    digest = hashlib.sha256(source.new("uuid").encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest, version=4))


def new_ordered_id(prefix: str) -> str:
    """An id that sorts after every ordered id of the same prefix made before it here."""
    return _ids.get().new_ordered(prefix)


def _check_source(call: str, source: object, methods: tuple[str, ...]) -> None:
    """Refuse what cannot be the clock or id source ``call`` swaps in: taken, the first
    timestamp or id asked for was a bare ``TypeError`` (a class: ``now()`` missing ``self``)
    or ``AttributeError`` (``None``), far inside whatever asked."""
    if isinstance(source, type):
        raise ConfigurationError(
            f"{call} takes an instance, got the class {source.__name__}: "
            f"{call}({source.__name__}())"
        )
    missing = [m for m in methods if not callable(getattr(source, m, None))]
    if missing:
        raise ConfigurationError(
            f"{call} takes an object with {' and '.join(f'{m}()' for m in methods)}, got "
            f"{type(source).__name__} (no {', '.join(missing)})"
        )


@contextmanager
def use_clock(clock: Clock) -> Iterator[Clock]:
    _check_source("use_clock", clock, ("now", "monotonic"))
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


@contextmanager
def use_ids(ids: IdSource) -> Iterator[IdSource]:
    _check_source("use_ids", ids, ("new", "new_ordered"))
    token = _ids.set(ids)
    try:
        yield ids
    finally:
        _ids.reset(token)
