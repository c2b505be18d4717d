"""``Agent.run_sync``: ``Agent.run`` for scripts and notebooks without an event loop."""

from __future__ import annotations

import pytest

from tinyagents import Agent, RunLimits, RunStatus
from tinyagents.errors import SyncInAsyncError, TinyAgentsError
from tinyagents.testkit import ScriptedModel, reply, tool_call
from tinyagents.testkit.fake_agent import step


def test_run_sync_runs_the_agent_to_its_end_without_a_loop() -> None:
    model = ScriptedModel([tool_call("step", n=1), reply("all done")])
    result = Agent("worker", model, tools=[step]).run_sync("go")

    assert (result.status, result.output) == (RunStatus.COMPLETED, "all done")
    assert model.requests[1].messages[-1].content == "step 1 done"


def test_run_sync_takes_the_arguments_of_run() -> None:
    model = ScriptedModel([tool_call("step", n=1), reply("never")])
    agent = Agent("worker", model, tools=[step], instructions="Be brief.")
    result = agent.run_sync(
        "go", tenant_id="acme", limits=RunLimits(max_model_calls=1), run_id="r-sync"
    )

    assert result.run_id == "r-sync"
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert [m.role for m in model.requests[0].messages] == ["system", "user"]


def test_run_sync_can_be_called_again_after_it_returned() -> None:
    agent = Agent("worker", ScriptedModel([reply("one"), reply("two")]))
    assert [agent.run_sync("a").output, agent.run_sync("b").output] == ["one", "two"]


async def test_run_sync_inside_a_running_loop_says_to_await_run_and_runs_nothing() -> None:
    model = ScriptedModel([reply("never")])
    with pytest.raises(SyncInAsyncError, match=r"await agent\.run\(\.\.\.\)") as raised:
        Agent("worker", model).run_sync("go")

    assert isinstance(raised.value, TinyAgentsError) and isinstance(raised.value, RuntimeError)
    assert "'worker'" in str(raised.value) and "running event loop" in str(raised.value)
    assert model.requests == []
