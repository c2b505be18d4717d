"""``runtime=`` that is no ``Runtime`` is the ``ConfigurationError`` ``Agent.run`` gives, on
every way to start a sub-agent too: ``SubAgent.invoke`` / ``start`` and a session's ``send``
raised ``AttributeError: 'int' object has no attribute 'require_open'``."""

from __future__ import annotations

from typing import Any

import pytest

from tinyagents import Agent, SubAgent
from tinyagents.errors import ConfigurationError
from tinyagents.testkit import ScriptedModel

RUNTIME = r"runtime= takes a Runtime"


def _sub() -> SubAgent:
    return SubAgent(Agent("helper", model=ScriptedModel(["ok"])), description="helps")


@pytest.mark.parametrize("runtime", [5, "sqlite:///runs.db", object()])
async def test_a_sub_agent_given_no_runtime_says_so(runtime: Any) -> None:
    with pytest.raises(ConfigurationError, match=RUNTIME):
        await _sub().invoke("task", runtime=runtime)
    with pytest.raises(ConfigurationError, match=RUNTIME):
        await _sub().start("task", runtime=runtime)
    with pytest.raises(ConfigurationError, match=RUNTIME):
        await _sub().session(runtime=runtime).send("hello")
