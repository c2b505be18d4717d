"""A supervisor's judge calls, all runs together, are bounded: a supervisor watching 500 runs
fired 500 judge calls at once at its provider. The runs past the cap wait their turn, first
come first served."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import re
from typing import Any

import pytest

from tinyagents import Agent, RunStatus, Runtime, SupervisorSpec, tool
from tinyagents.errors import ConfigurationError
from tinyagents.events import ModelEvent
from tinyagents.harness import ModelRequest
from tinyagents.supervisor.supervisor import DEFAULT_MAX_CONCURRENT_JUDGES
from tinyagents.testkit import EventRecorder, FunctionModel, ScriptedModel, reply, tool_call


def _tool(name: str, done: asyncio.Event) -> Any:
    async def work() -> str:
        await done.wait()  # the run stays under way until every judge call was answered
        return "worked"

    return tool(work, name=name, description="Work.")


async def test_judge_calls_across_runs_never_exceed_the_cap_and_wait_their_turn_in_order() -> None:
    runs, cap = 12, 3
    in_flight = most = 0
    entered: list[str] = []  # the run (its tool's name) of each judge call, as it began
    release: dict[str, asyncio.Event] = {}
    changed = asyncio.Condition()
    all_judged = asyncio.Event()

    async def judge(request: ModelRequest) -> str:
        nonlocal in_flight, most
        found = re.search(r'"(work_\d+)"', str(request.messages[-1].content))
        assert found is not None
        name = found.group(1)
        async with changed:
            in_flight += 1
            most = max(most, in_flight)
            entered.append(name)
            release[name] = asyncio.Event()
            changed.notify_all()
        await release[name].wait()
        in_flight -= 1
        return '{"passed": true, "reason": "fine"}'

    recorder = EventRecorder()
    spec = SupervisorSpec(model=FunctionModel(judge))
    async with Runtime(supervisor=spec, sinks=[recorder], max_concurrent_judges=cap) as rt:
        handles = []
        for i in range(runs):
            model = ScriptedModel([tool_call(f"work_{i}"), reply("done")])
            agent = Agent(f"a{i}", model, tools=[_tool(f"work_{i}", all_judged)])
            handles.append(await rt.start(agent, "go"))
        for turn in range(runs):
            # the calls that may be in flight now have begun; the oldest is answered
            async with changed:
                await changed.wait_for(lambda t=turn: len(entered) >= min(t + cap, runs))
            release[entered[turn]].set()
        all_judged.set()
        results = [await handle.result() for handle in handles]
    assert [r.status for r in results] == [RunStatus.COMPLETED] * runs
    assert most == cap
    assert len(recorder.of_type("supervisor.judge_verdict")) == runs
    assert rt.supervisor.judge_skipped == 0
    # fair: the judge was called in the order the runs asked for it (their judged response)
    names = {handle.run_id: f"work_{i}" for i, handle in enumerate(handles)}
    judged = [e for e in recorder.of_type("model.response") if isinstance(e, ModelEvent)]
    assert entered == [names[str(e.run_id)] for e in judged if e.tool_calls]


def test_the_cap_on_concurrent_judge_calls_is_a_count_of_at_least_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Runtime().supervisor.max_concurrent_judges == DEFAULT_MAX_CONCURRENT_JUDGES
    monkeypatch.setenv("TINYAGENTS_MAX_CONCURRENT_JUDGES", "4")
    assert Runtime().supervisor.max_concurrent_judges == 4
    assert Runtime(max_concurrent_judges=2).supervisor.max_concurrent_judges == 2
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(ConfigurationError, match="max_concurrent_judges"):
            Runtime(max_concurrent_judges=bad)  # type: ignore[arg-type]
    for raw in ("0", "-2", "1.5", "many", ""):
        monkeypatch.setenv("TINYAGENTS_MAX_CONCURRENT_JUDGES", raw)
        with pytest.raises(ConfigurationError, match="TINYAGENTS_MAX_CONCURRENT_JUDGES"):
            Runtime()
