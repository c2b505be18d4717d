"""The supervisor while its runtime closes: a rule that fires after ``close()`` began sends
nothing (close cancels the run anyway) and raises nothing into the event bus or a task."""

from __future__ import annotations

import asyncio
import gc

from tests.holds import HoldNamed
from tinyagents import Agent, RunStatus, Runtime, SupervisorSpec
from tinyagents.testkit import EventRecorder, FunctionModel, reply


async def test_a_rule_fired_during_close_sends_nothing_and_raises_nothing() -> None:
    """The run reaches its first iteration after close began: the rule fires, the supervisor's
    abort met ``RuntimeClosed`` and escaped into the event bus ("the event sink ... failed",
    counted in ``sink_errors``). It is now dropped quietly; close cancels the run."""
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: unhandled.append(context))
    try:
        spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1, "then": "abort"}])
        recorder = EventRecorder()
        rt = Runtime(testing=True, supervisor=spec, sinks=[recorder])
        hold = HoldNamed()
        rt.router.pipeline.insert(hold, after="authority")
        await rt.open()
        gate = asyncio.Event()

        async def answer(_: object) -> object:
            await gate.wait()
            return reply("the answer")

        handle = await rt.start(Agent("a", model=FunctionModel(answer)), "go")
        slow = asyncio.create_task(handle.steer("later", correlation_id="slow"))
        await hold.entered.wait()  # a submit under way: close waits for it
        closing = asyncio.create_task(rt.close())
        for _ in range(10):  # close begins and waits for the held submit
            await asyncio.sleep(0)
        assert not closing.done()
        gate.set()  # the run's first iteration: the rule fires now
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60  # a hang guard, not a timing assertion
        while loop.time() < deadline:
            if recorder.of_type("supervisor.rule_fired"):
                break
            await asyncio.sleep(0)
        assert recorder.of_type("supervisor.rule_fired"), "the rule never fired"
        hold.release.set()
        await closing
        await slow
        gc.collect()
        assert rt.bus.sink_errors == {}
        assert unhandled == []
        assert (await handle.result()).status in (RunStatus.CANCELLED, RunStatus.COMPLETED)
    finally:
        loop.set_exception_handler(previous)
