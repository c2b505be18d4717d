"""The reference design's gaps, closed: supervisor frames reach the run's trace and every
subscriber; operator snapshots show live counters."""

from __future__ import annotations

from pathlib import Path

from tinyagents import Agent, RunStatus, Runtime, SupervisorSpec, tool
from tinyagents.events import SteeringEvent, SupervisorEvent
from tinyagents.testkit import EventWaiter, ScriptedModel, reply, tool_call


@tool
def search() -> str:
    """Search."""
    return "nothing"


def durable_search(waiter: EventWaiter) -> object:
    """A search that, on its second call, returns once the supervisor's command was accepted:
    with a durable store the command is written before it is queued, so it lands at the
    first boundary after that write."""
    calls: list[int] = []

    @tool(name="search")
    async def slow_search() -> str:
        """Search."""
        calls.append(1)
        if len(calls) == 2:
            await waiter.event("steering.accepted")
        return "nothing"

    return slow_search


SPEC = SupervisorSpec(rules=[{"when": "tool_repeated", "tool": "search", "count": 2}])


async def test_supervisor_frames_reach_every_subscriber_and_the_stored_trace(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    waiter = EventWaiter()
    async with Runtime(url, supervisor=SPEC, sinks=[waiter]) as rt:
        first, second = rt.subscribe(), rt.subscribe(where=lambda e: e.type.startswith("super"))
        model = ScriptedModel([tool_call("search")] * 2 + [reply("done")])
        handle = await rt.start(Agent("a", model, tools=[durable_search(waiter)]), "go")
        await waiter.event("run.paused", handle.run_id)
        await handle.resume()
        assert (await handle.result()).status is RunStatus.COMPLETED
        seen = []
        for sub in (first, second):
            events = []
            while (event := sub.get_nowait()) is not None:
                events.append(event)
            seen.append([e.type for e in events if isinstance(e, SupervisorEvent)])
        run_id = handle.run_id
    assert seen == [["supervisor.rule_fired", "supervisor.action"]] * 2
    async with Runtime(url) as again:
        stored = await again.store.load_events(run_id=run_id, type_prefix="supervisor.")
        steering = await again.store.load_events(run_id=run_id, type_prefix="steering.")
    [action] = [e for e in stored if e.type == "supervisor.action"]
    [paused] = [
        e for e in steering if e.type == "steering.applied" and e.actor.type == "middleware"
    ]
    assert isinstance(action, SupervisorEvent) and isinstance(paused, SteeringEvent)
    assert action.data == {
        "action": "pause",
        "source": "tool_repeated",
        "reason": "tool 'search' called 2 times (limit 2)",
        "iteration": 2,
        "correlation_id": paused.correlation_id,  # the trace finds the action's outcome
    }


async def test_snapshots_show_live_counters_of_a_supervised_run() -> None:
    waiter = EventWaiter()
    async with Runtime(supervisor=SPEC, sinks=[waiter]) as rt:
        model = ScriptedModel([tool_call("search")] * 2 + [reply("done")])
        handle = await rt.start(Agent("a", model, tools=[search]), "go")
        at_start = handle.info.snapshot()["usage"]
        await waiter.event("run.paused", handle.run_id)
        [listed] = [i for i in rt.runs.list() if i.run_id == handle.run_id]
        usage = listed.snapshot()["usage"]
        assert (at_start["model_calls"], at_start["tool_calls"]) == (0, 0)
        assert (usage["model_calls"], usage["tool_calls"]) == (2, 2)
        assert listed.snapshot()["status"] == "paused"
        await handle.cancel()
        await handle.result()
