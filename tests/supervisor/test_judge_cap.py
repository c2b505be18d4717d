"""A supervisor's judge calls, all runs together, are bounded: a supervisor watching 500 runs
fired 500 judge calls at once at its provider. The runs past the cap wait their turn, first
come first served."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import re
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from fake_host import FakeHost

from tinyagents import Agent, RunStatus, Runtime, Supervisor, SupervisorSpec, tool
from tinyagents.errors import ConfigurationError
from tinyagents.events import Event, ModelEvent
from tinyagents.harness import ModelRequest
from tinyagents.runs import RunHandle
from tinyagents.supervisor.settings import DEFAULT_MAX_CONCURRENT_JUDGES
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


class _SupervisedHost(FakeHost):
    """A host of its own (no ``Runtime``, which refuses a second event loop) whose runs a
    ``Supervisor`` watches, as the runtime's are."""

    supervisor: Supervisor
    judge_ended: Callable[[asyncio.Task[Any]], None]

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        task = super().spawn(coro, name=name)
        if name is not None and name.startswith("supervisor-r-"):  # a run's judge call
            task.add_done_callback(self.judge_ended)
        return task

    async def register(self, handle: RunHandle, **kwargs: Any) -> RunHandle:
        await super().register(handle, **kwargs)
        self.supervisor.watch(handle)
        return handle


def test_the_cap_holds_on_each_event_loop_that_uses_the_supervisor_in_turn() -> None:
    # The cap's semaphore was bound to the first loop on which a call waited for a slot: on
    # the next loop (asyncio.run again, a test's own loop) a call that waited raised
    # "bound to a different event loop" in its task, and no verdict nor judge error came.
    host = _SupervisedHost()
    asked, answer = asyncio.Event(), asyncio.Event()  # made again on each loop
    judged = asyncio.Event()  # every run's judge call ended, however it ended
    ended = 0

    def judge_ended(task: asyncio.Task[Any]) -> None:
        nonlocal ended
        ended += 1
        if ended == 3:
            judged.set()

    host.judge_ended = judge_ended
    recorder = EventRecorder()
    host.bus.add_sink(recorder)

    async def judge(request: ModelRequest) -> str:
        asked.set()
        await answer.wait()
        return '{"passed": true, "reason": "fine"}'

    async def work() -> str:
        await judged.wait()  # the runs go on until each was judged (or failed to be)
        return "worked"

    async def first_call_answered_when_asked() -> None:
        await asked.wait()  # by then the other runs' calls wait for the one slot
        answer.set()

    spec = SupervisorSpec(model=FunctionModel(judge))
    host.supervisor = Supervisor(spec, host=host, submit=host.submit, max_concurrent_judges=1)

    async def runs() -> list[RunStatus]:
        nonlocal asked, answer, judged, ended
        asked, answer, judged, ended = asyncio.Event(), asyncio.Event(), asyncio.Event(), 0
        agents = [
            Agent(
                f"a{i}",
                ScriptedModel([tool_call("work"), reply("done")]),
                tools=[tool(work, name="work", description="Work.")],
            )
            for i in range(3)
        ]
        *results, _ = await asyncio.gather(
            *(agent.run("go", runtime=host) for agent in agents),
            first_call_answered_when_asked(),
        )
        await asyncio.gather(*host.tasks)  # the judge calls (each run's, in its own task)
        host.tasks.clear()
        return [r.status for r in results]

    for loop_number in (1, 2):
        assert asyncio.run(runs()) == [RunStatus.COMPLETED] * 3
        verdicts = recorder.of_type("supervisor.judge_verdict")
        assert len(verdicts) == 3 * loop_number, f"event loop {loop_number}"
    assert host.supervisor.judge_failures == 0


async def test_a_judge_that_will_not_stop_at_its_timeout_gives_its_slot_back() -> None:
    # a judge whose code swallowed every cancellation kept its call, and its slot, past its
    # timeout for good: with the cap reached no other run was ever judged again, nor told
    # of a judge error (on_judge_error never acted)
    release = asyncio.Event()  # ends the stuck call at the end of the test
    calls: list[str] = []

    async def judge(request: ModelRequest) -> str:
        calls.append("call")
        if len(calls) == 1:
            swallowed = 0
            while not release.is_set():
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    swallowed += 1
                    if swallowed > 2:  # its timeout's and its run's end are swallowed
                        raise
            return '{"passed": true, "reason": "too late"}'
        return '{"passed": false, "reason": "off task"}'

    second_judged = asyncio.Event()

    def on_verdict(event: Event) -> None:
        if event.type == "supervisor.judge_verdict":
            second_judged.set()

    async def first_work() -> str:
        return "worked"

    async def second_work() -> str:
        await second_judged.wait()  # the run goes on until it was judged
        return "worked"

    recorder = EventRecorder()
    spec = SupervisorSpec(model=FunctionModel(judge), judge_timeout_s=0.01, on_violation="steer")
    async with Runtime(
        supervisor=spec, sinks=[recorder, on_verdict], max_concurrent_judges=1
    ) as rt:
        first = Agent(
            "first",
            ScriptedModel([tool_call("first_work"), reply("done")]),
            tools=[tool(first_work, name="first_work", description="Work.")],
        )
        assert (await (await rt.start(first, "go")).result()).status is RunStatus.COMPLETED
        second = Agent(
            "second",
            ScriptedModel([tool_call("second_work"), reply("done"), reply("steered")]),
            tools=[tool(second_work, name="second_work", description="Work.")],
        )
        handle = await rt.start(second, "go")
        assert (await handle.result()).status is RunStatus.COMPLETED
        release.set()
    [verdict] = recorder.of_type("supervisor.judge_verdict")
    assert verdict.run_id == handle.run_id and verdict.data["reason"] == "off task"
    assert calls == ["call", "call"]
