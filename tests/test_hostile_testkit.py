"""The testkit's builders refuse what they cannot use with a ``ConfigurationError`` that says
what they take: a ``FakeClock`` start that is no datetime was an ``AttributeError`` ('str'
object has no attribute 'tzinfo'), a tick that is no number a ``TypeError`` from ``math``, and
``tool_call`` arguments that are no mapping "'str' object is not a mapping"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tinyagents import Agent, RunStatus, tool
from tinyagents.errors import ConfigurationError
from tinyagents.testkit import FakeClock, FunctionModel, ScriptedModel, tool_call, tool_calls


@tool
def fetch(when: Any = None) -> str:
    """Fetch."""
    return "x"


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


@pytest.mark.parametrize("value", [object(), {1, 2}, b"raw"], ids=["object", "set", "bytes"])
def test_scripted_tool_call_arguments_json_cannot_write_are_refused_naming_where(
    value: Any,
) -> None:
    # the run failed at the first model call with "Object of type object is not JSON
    # serializable", saying neither which response nor which tool
    script = [
        tool_call("search", q="billing"),
        tool_calls(tool_call("lookup", id="1"), tool_call("fetch", {"url": {"x": value}})),
        "done",
    ]
    with pytest.raises(
        ConfigurationError,
        match=r"ScriptedModel 'scripted': response 2 calls tool 'fetch' with arguments JSON "
        r"cannot write \(.*\)",
    ):
        ScriptedModel(script)


async def test_a_function_models_tool_call_arguments_json_cannot_write_are_refused() -> None:
    # a callable's or a FunctionModel's response is known only when it is made: refused then,
    # naming the request and the tool, not the token counter's TypeError
    model = FunctionModel(lambda request: tool_call("fetch", when=datetime(2030, 5, 1)))
    result = await Agent("a", model, tools=[fetch]).run("go")
    assert result.status is RunStatus.FAILED
    assert (result.error or "").startswith(
        "ConfigurationError: model 'function': request 1 calls tool 'fetch' with arguments "
        "JSON cannot write (Object of type datetime is not JSON serializable)"
    ), result.error
