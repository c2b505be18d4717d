"""A stream mode that is neither a mode name nor a list of them (``mode=5``, ``mode=None``) is
the ``ConfigurationError`` that names the modes, as an unknown name is: it was a bare
``TypeError: 'int' object is not iterable``. The same for ``rt.subscribe`` given a filter that
is no function, or a ``maxsize`` that is no whole number: taken, every event then logged the
filter's ``TypeError`` (or the comparison raised one)."""

from __future__ import annotations

from typing import Any

import pytest
from graphkit import LogState, chain

from tinyagents import Runtime
from tinyagents.errors import ConfigurationError


@pytest.mark.parametrize("mode", [5, None, b"values", 3.5])
async def test_a_stream_mode_of_no_mode_names_is_a_configuration_error(mode: Any) -> None:
    graph = chain("a").compile()
    with pytest.raises(ConfigurationError, match="is not one of values, updates"):
        async for _ in graph.stream(LogState(x=1), mode=mode):
            pass


@pytest.mark.parametrize("where", [5, "steering.*"])
async def test_a_subscription_filter_that_is_no_function_is_refused(where: Any) -> None:
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match=r"subscribe\(where=.*\) takes a function"):
            rt.subscribe(where=where)
        assert not rt.bus._subscribers


@pytest.mark.parametrize("maxsize", ["10", 2.5, True])
async def test_a_subscription_maxsize_that_is_no_whole_number_is_refused(maxsize: Any) -> None:
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match=r"subscribe\(maxsize=.*\) takes a whole"):
            rt.subscribe(maxsize=maxsize)
        assert not rt.bus._subscribers
