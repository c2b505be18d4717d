"""One check of configured bounds (``tinyagents._bounds``), used by every component that
takes a count or a number of seconds: the same refusals, said the same way."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tinyagents import Runtime
from tinyagents._bounds import seconds, whole_number
from tinyagents.distributed import RedisControl
from tinyagents.errors import ConfigurationError
from tinyagents.server import Control
from tinyagents.store._postgres import check_settings
from tinyagents.supervisor.settings import judge_concurrency

#: A whole number of seconds past any float: ``math.isfinite`` raised ``OverflowError``.
HUGE = 10**400


@pytest.mark.parametrize("bad", [True, False, 0, -1, 2.5, "3", None], ids=repr)
def test_a_whole_number_is_no_bool_float_text_or_below_its_least(bad: Any) -> None:
    with pytest.raises(
        ConfigurationError, match=re.escape(f"n must be a whole number >= 1, got {bad!r}")
    ):
        whole_number("n", bad)


def test_a_whole_number_is_given_back_and_its_reason_said() -> None:
    assert whole_number("n", 0, least=0) == 0
    assert whole_number("n", HUGE) == HUGE
    with pytest.raises(
        ConfigurationError, match=re.escape("n must be a whole number >= 3 (why), got 2")
    ):
        whole_number("n", 2, least=3, why="why")


@pytest.mark.parametrize(
    "bad", [True, 0, -0.5, float("nan"), float("inf"), -float("inf"), HUGE, "1", None], ids=repr
)
def test_seconds_are_a_finite_number_above_zero(bad: Any) -> None:
    with pytest.raises(
        ConfigurationError, match=re.escape("s must be a finite number of seconds > 0")
    ):
        seconds("s", bad)


def test_seconds_may_be_zero_when_allowed_and_come_back_as_a_float() -> None:
    assert seconds("s", 0, zero=True) == 0.0
    assert isinstance(seconds("s", 2), float)
    with pytest.raises(
        ConfigurationError, match=re.escape("s must be a finite number of seconds >= 0, got -1")
    ):
        seconds("s", -1, zero=True)


async def test_a_wait_too_long_for_a_float_is_a_configuration_error_everywhere() -> None:
    """Found: ``Control(receipt_timeout_s=10**400)``, ``RedisControl(ttl_s=10**400)`` and a
    PostgreSQL ``command_timeout`` of 10**400 raised a bare ``OverflowError`` from
    ``math.isfinite``; each is now the ``ConfigurationError`` a NaN is."""
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match="receipt_timeout_s must be a finite"):
            Control(rt, receipt_timeout_s=HUGE)
        with pytest.raises(ConfigurationError, match="ttl_s must be a finite"):
            RedisControl(rt, None, ttl_s=HUGE)
    with pytest.raises(ConfigurationError, match="command_timeout must be a finite"):
        check_settings(min_size=1, max_size=2, command_timeout=HUGE)


def test_the_judges_concurrency_is_a_whole_number() -> None:
    for bad in (True, 0, 1.5):
        with pytest.raises(
            ConfigurationError, match="max_concurrent_judges must be a whole number >= 1"
        ):
            judge_concurrency(bad)  # type: ignore[arg-type]
    assert judge_concurrency(3) == 3
