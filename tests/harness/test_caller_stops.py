"""A caller of ``Agent.run`` / ``Agent.run_stream`` on a shared runtime who stops (a timeout
around ``run``, a ``break`` out of ``run_stream``) no longer leaves the run working, and
spending, for nobody: the run is cancelled, as pydantic-ai's runs are, and as a
``SubAgent.invoke`` whose caller stops already was."""

from __future__ import annotations

import asyncio

from tinyagents import Agent, RunStatus, Runtime, tool
from tinyagents.testkit import Gate, ScriptedModel, reply, tool_call


async def test_a_timeout_around_agent_run_cancels_the_run() -> None:
    gate = Gate()
    model = ScriptedModel([tool_call("hold"), reply("done")])
    async with Runtime() as rt:
        agent = Agent("a", model, tools=[gate.tool()])
        waiting = asyncio.ensure_future(agent.run("go", runtime=rt, run_id="r-slow"))
        await gate.entered.wait()
        waiting.cancel()
        gate.open()
        handle = rt.runs.get("r-slow")
        assert handle is not None
        result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    assert len(model.requests) == 1  # the answer after the tool was never asked for


async def test_leaving_run_stream_early_cancels_the_run() -> None:
    sent: list[int] = []

    @tool
    def send(n: int) -> str:
        """Send message n."""
        sent.append(n)
        return "sent"

    model = ScriptedModel(
        [tool_call("send", n=1), tool_call("send", n=2), reply("done")], stream=True
    )
    async with Runtime() as rt:
        stream = Agent("a", model, tools=[send]).run_stream("go", runtime=rt, run_id="r-s")
        async for event in stream:
            if event.type == "run.started":
                break
        await stream.aclose()
        handle = rt.runs.get("r-s")
        assert handle is not None
        result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    assert sent == []


async def test_a_run_stream_read_to_its_end_is_not_cancelled() -> None:
    model = ScriptedModel([reply("done")], stream=True)
    async with Runtime() as rt:
        events = [e async for e in Agent("a", model).run_stream("go", runtime=rt, run_id="r-e")]
        handle = rt.runs.get("r-e")
    assert events[-1].type == "run.completed"
    assert handle is None or handle.status is RunStatus.COMPLETED
