"""``graph.run`` / ``start`` / ``stream`` given a ``runtime=`` that is no ``Runtime`` raise the
``ConfigurationError`` an agent's ``run`` gives, not ``AttributeError: 'int' object has no
attribute 'require_open'``; nothing is written to the thread."""

from __future__ import annotations

from typing import Any

import pytest
from graphkit import LogState, chain

from tinyagents.errors import ConfigurationError
from tinyagents.store.checkpoint import MemoryCheckpointer

RUNTIME = r"runtime= takes a Runtime"


@pytest.mark.parametrize("runtime", [5, "sqlite:///runs.db"])
async def test_a_graph_given_no_runtime_says_so(runtime: Any) -> None:
    graph = chain("a").compile(checkpointer=MemoryCheckpointer())
    with pytest.raises(ConfigurationError, match=RUNTIME):
        await graph.run(LogState(x=1), thread_id="t", runtime=runtime)
    with pytest.raises(ConfigurationError, match=RUNTIME):
        await graph.start(LogState(x=1), thread_id="t", runtime=runtime)
    with pytest.raises(ConfigurationError, match=RUNTIME):
        async for _ in graph.stream(LogState(x=1), thread_id="t", runtime=runtime):
            pass
    assert await graph.history("t") == []
