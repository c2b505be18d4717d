"""A clock that only moves when the test says so.

    clock = FakeClock()
    with use_clock(clock), use_ids(SequentialIds()):
        ...
        clock.advance(30)  # a deadline of 30 s has now passed

``SequentialIds``, ``use_clock`` and ``use_ids`` live in ``tinyagents._clock`` (the one id and
time source); ``tinyagents.testkit`` exports them beside ``FakeClock``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from tinyagents.errors import ArgumentError, ConfigurationError
from tinyagents.protocol.ids import shown_repr

__all__ = ["EPOCH", "FakeClock"]

#: Where every ``FakeClock`` starts unless told otherwise: fixed, so timestamps are stable.
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
#: The most seconds a ``timedelta`` holds: a larger tick could never be added to a time.
MAX_SECONDS = timedelta.max.total_seconds()


class FakeClock:
    """Implements ``tinyagents._clock.Clock``; time moves by ``advance`` and by ``tick``.

    ``tick`` (seconds) is added after every reading, so consecutive timestamps differ
    without the test advancing the clock by hand. ``now()`` and ``monotonic()`` share one
    timeline: ``monotonic()`` is the seconds elapsed since ``start``.
    """

    def __init__(self, start: datetime = EPOCH, *, tick: float = 0.0) -> None:
        if not isinstance(start, datetime):  # its .tzinfo was an AttributeError
            raise ConfigurationError(
                f"FakeClock's start is a timezone-aware datetime, got {type(start).__name__} "
                f"{shown_repr(start)}; e.g. datetime(2025, 1, 1, tzinfo=UTC)"
            )
        if isinstance(tick, bool) or not isinstance(tick, (int, float)):
            raise ConfigurationError(
                f"tick must be a number of seconds, got {type(tick).__name__} {shown_repr(tick)}"
            )
        if start.tzinfo is None:
            raise ArgumentError("FakeClock needs a timezone-aware start, e.g. tzinfo=UTC")
        if not _finite(tick) or tick < 0 or tick > MAX_SECONDS:
            raise ArgumentError(
                f"tick must be a finite number of seconds from 0 to {MAX_SECONDS:.0f}, "
                f"got {shown_repr(tick)}"
            )
        try:
            start.astimezone(UTC)
        except OverflowError:
            # its wall time is in the calendar, its UTC time not: every command made under
            # it failed to be built ("created_at ... is out of range in UTC"), far from here
            raise ArgumentError(
                f"FakeClock's start {start.isoformat()} is out of range in UTC; give a start "
                "whose UTC time is from year 1 to 9999"
            ) from None
        self.start = start
        self.tick = tick
        self.elapsed = 0.0

    def now(self) -> datetime:
        try:
            value = self.start + timedelta(seconds=self.elapsed)
            if value.tzinfo is not UTC:
                value.astimezone(UTC)  # a time past the calendar in UTC too
        except OverflowError:
            # ``advance`` refuses this; ``tick`` got here reading by reading. Said here, and
            # the clock stays put, rather than a bare OverflowError out of whatever read it.
            raise ArgumentError(
                f"FakeClock ran past {datetime.max.year} AD: {self.elapsed:g} s after its start "
                f"{self.start.isoformat()} (tick {self.tick:g} s a reading); give it an "
                "earlier start or a smaller tick"
            ) from None
        self.elapsed += self.tick
        return value

    def monotonic(self) -> float:
        value = self.elapsed
        self.elapsed += self.tick
        return value

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, a finite number >= 0: a clock never goes
        backwards. Anything else is an ``ArgumentError`` (a ``ValueError``), and moves nothing."""
        takes = "takes a finite number of seconds >= 0"
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            # "5" and None were math.isfinite's TypeError, naming no call; True was 1 s
            raise ArgumentError(
                f"advance({shown_repr(seconds)}) {takes}, got {type(seconds).__name__}"
            )
        if not _finite(seconds):
            raise ArgumentError(f"advance({seconds}) {takes}: time moves by a finite amount")
        if seconds < 0:
            raise ArgumentError(
                f"a clock cannot go backwards: advance({shown_repr(seconds)}) {takes}"
            )
        try:
            # Refused here, not at the next now(): a clock past datetime.max cannot tell time.
            elapsed = self.elapsed + seconds  # an integer past any float overflows here
            (self.start + timedelta(seconds=elapsed)).astimezone(UTC)
        except OverflowError:
            raise ArgumentError(
                f"advance({shown_repr(seconds)}) takes the clock past {datetime.max.year} AD; "
                "advance by a finite number of seconds the calendar can hold"
            ) from None
        self.elapsed = elapsed


def _finite(seconds: float) -> bool:
    """``math.isfinite``, but an integer too large for a float (which it raises
    ``OverflowError`` for) is finite: the checks after this one refuse it by its size."""
    try:
        return math.isfinite(seconds)
    except OverflowError:
        return True
