"""A rule fires once per run, not once per process: a run started again under its id on a
SQLite store is not acted on a second time for a rule that acted on it before the restart
(``test_supervisor_crash.py`` kills a real worker for a command logged but not applied)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tinyagents import Agent, RunStatus, Runtime, SteeringKind, SupervisorSpec, tool
from tinyagents.events import SupervisorEvent
from tinyagents.protocol import SteeringDelivery
from tinyagents.testkit import EventRecorder, EventWaiter, Gate, ScriptedModel, reply, tool_call

PAUSE_AT_FIRST = {"when": "iteration_reached", "gte": 1}


@tool
def search(query: str = "") -> str:
    """Search for something."""
    return "nothing found"


def actions(recorder: EventRecorder) -> list[tuple[str, str]]:
    return [
        (e.data["action"], e.data["source"])
        for e in recorder.of_type("supervisor.action")
        if isinstance(e, SupervisorEvent)
    ]


async def paused_resumed_then_stopped(store: str, run_id: str, rules: list[Any]) -> None:
    """Run ``run_id`` under ``rules`` until the supervisor's pause of its first response was
    applied and a human resumed it; the runtime stops with the run under way."""
    first, second = Gate("hold"), Gate("stop")
    spec = SupervisorSpec(rules=rules, pause_max_s=3600)
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(store, supervisor=spec, sinks=[recorder, waiter]) as rt:
        model = ScriptedModel([tool_call("hold"), tool_call("stop"), reply("never")])
        agent = Agent("a", model, tools=[first.tool(), second.tool()])
        handle = await rt.start(agent, "go", run_id=run_id)
        await waiter.event("steering.accepted", run_id, kind=SteeringKind.PAUSE)  # logged
        first.open()
        await waiter.event("run.paused", run_id)
        await handle.resume()
        await second.entered.wait()
        # The runtime stops here (a deploy, a crash), the run under way.
    assert actions(recorder) == [("pause", "iteration_reached")]


async def restarted(store: str, run_id: str, spec: SupervisorSpec) -> list[tuple[str, str]]:
    """Start run ``run_id`` again under ``spec`` (one tool call, then an answer) and let it
    complete: the supervisor's actions on it."""
    recorder = EventRecorder()
    async with Runtime(store, supervisor=spec, sinks=[recorder]) as rt:
        model = ScriptedModel([tool_call("search"), reply("done")])
        handle = await rt.start(Agent("a", model, tools=[search]), "go", run_id=run_id)
        result = await asyncio.wait_for(handle.result(), 60)  # a failsafe only
    assert result.status is RunStatus.COMPLETED
    return actions(recorder)


async def test_a_rule_that_acted_does_not_fire_again_after_a_restart(tmp_path: Path) -> None:
    # the restarted run's counters started from zero, and so did the rules that had fired:
    # its first response tripped "iteration_reached" again, a second pause for the trigger
    # the first incarnation was paused for (here timed out into an abort)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    await paused_resumed_then_stopped(store, "r-again", [PAUSE_AT_FIRST])

    # the same rule; a short dwell cap would turn a second pause into an abort
    spec = SupervisorSpec(rules=[PAUSE_AT_FIRST], pause_max_s=0.01)
    assert await restarted(store, "r-again", spec) == []


async def test_rules_are_known_by_what_they_say_not_their_place_in_the_spec(
    tmp_path: Path,
) -> None:
    # a spec changed between the two incarnations: a rule put in front of the one that
    # fired fires (it never did), and the one that fired does not, wherever it is now
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    await paused_resumed_then_stopped(store, "r-spec", [PAUSE_AT_FIRST])

    added = {"when": "iteration_reached", "gte": 1, "then": "steer"}
    spec = SupervisorSpec(rules=[added, PAUSE_AT_FIRST], pause_max_s=0.01)
    assert await restarted(store, "r-spec", spec) == [("steer", "iteration_reached")]


async def test_another_turn_of_a_restarted_run_is_watched_from_zero(tmp_path: Path) -> None:
    # what fired before the restart holds for the turn that was cut short; a later turn
    # (an END_OF_TURN message reopening the completed run) starts its rules from zero, as
    # every other turn does
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    await paused_resumed_then_stopped(store, "r-turn", [PAUSE_AT_FIRST])

    # the same rule; steer rather than pause, to see it act without a resume
    spec = SupervisorSpec(rules=[PAUSE_AT_FIRST], on_violation="steer")
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(store, supervisor=spec, sinks=[recorder, waiter]) as rt:
        model = ScriptedModel([reply("first"), tool_call("search"), reply("second")])
        handle = await rt.start(Agent("a", model, tools=[search]), "go", run_id="r-turn")
        assert (await handle.result()).status is RunStatus.COMPLETED
        assert actions(recorder) == []
        await handle.steer("look it up", delivery=SteeringDelivery.END_OF_TURN)
        await waiter.event("run.resumed", "r-turn")
        assert (await handle.result()).status is RunStatus.COMPLETED
    assert actions(recorder) == [("steer", "iteration_reached")]
