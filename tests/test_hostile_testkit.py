"""The testkit's builders refuse what they cannot use with a ``ConfigurationError`` that says
what they take: a ``FakeClock`` start that is no datetime was an ``AttributeError`` ('str'
object has no attribute 'tzinfo'), a tick that is no number a ``TypeError`` from ``math``, and
``tool_call`` arguments that are no mapping "'str' object is not a mapping"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tinyagents.errors import ConfigurationError
from tinyagents.testkit import FakeClock, tool_call


@pytest.mark.parametrize("start", ["2025-01-01", 0, float("nan"), None])
def test_a_fake_clock_start_that_is_no_datetime_is_refused(start: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"FakeClock's start is a timezone-aware dat"):
        FakeClock(start)


@pytest.mark.parametrize("tick", ["1", None, [1]])
def test_a_fake_clock_tick_that_is_no_number_is_refused(tick: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"tick must be a number of seconds"):
        FakeClock(tick=tick)


def test_a_fake_clock_takes_what_it_did() -> None:
    start = datetime(2030, 5, 1, tzinfo=UTC)
    clock = FakeClock(start, tick=1)
    assert (clock.now(), clock.now()) == (start, start.replace(second=1))
    with pytest.raises(ValueError, match="timezone-aware"):  # a naive datetime, as before
        FakeClock(datetime(2030, 5, 1))


@pytest.mark.parametrize("args", ["q=1", ["q"], 5])
def test_tool_call_arguments_that_are_no_mapping_are_refused(args: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"tool_call\('search', \.\.\.\): args is a dict"):
        tool_call("search", args)
