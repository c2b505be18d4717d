"""An agent's name is the ``agent_id`` of the steering its runs send the runs below them (the
pause passed down, the cancel of its children, narrowing): a name no such actor can carry (a
lone surrogate, text that is not UTF-8) is refused when the agent is made. It was taken, and
the first pause of a run with children raised ``InvalidCommandError`` out of ``handle.pause()``
while its cancel never reached them (an unretrieved task error): the children ran on."""

from __future__ import annotations

import pytest

from tinyagents import Agent, SteeringActor
from tinyagents.errors import ConfigurationError
from tinyagents.testkit import ScriptedModel


@pytest.mark.parametrize("name", ["\ud800", "ok\udc80"])
def test_a_name_no_parent_agent_actor_can_carry_is_refused(name: str) -> None:
    with pytest.raises(
        ConfigurationError, match=r"agent's name .* U\+D[8C]\d\d, a lone surrogate"
    ) as caught:
        Agent(name, model=ScriptedModel(["x"]))
    assert "\\ud" in str(caught.value) or "\\udc80" in str(caught.value)  # shown escaped
    assert "UTF-8" in str(caught.value)


@pytest.mark.parametrize("name", ["researcher", "ünïcode 研究", "a b"])
def test_a_name_an_actor_carries_is_taken(name: str) -> None:
    agent = Agent(name, model=ScriptedModel(["x"]))
    assert SteeringActor.parent_agent("r-1", agent.name).agent_id == name
