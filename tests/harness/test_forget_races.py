"""Releasing a finished run (``forget``, the retention window) while a command for it is
still in the policy pipeline."""

from __future__ import annotations

import asyncio

import pytest

from tests.holds import HoldNamed
from tinyagents import Agent
from tinyagents.errors import ConfigurationError
from tinyagents.protocol import ReceiptStatus, SteeringDelivery
from tinyagents.runtime import Runtime
from tinyagents.testkit import EventRecorder, FunctionModel, reply


async def test_a_run_is_not_released_while_a_command_for_it_is_evaluated() -> None:
    """forget() released the run while an END_OF_TURN message for it waited on an async
    policy; the message was then accepted and gave the released run another turn: its model
    was called again by a run no registry, tree or close could see any more."""
    recorder, hold = EventRecorder(), HoldNamed()
    calls = 0

    async def model(_: object) -> object:
        nonlocal calls
        calls += 1
        return reply(f"answer {calls}")

    async with Runtime(testing=True, sinks=[recorder]) as rt:
        rt.router.pipeline.insert(hold, after="authority")
        handle = await rt.start(Agent("a", model=FunctionModel(model)), "go")
        await handle.result()
        sending = asyncio.create_task(
            handle.steer("more", delivery=SteeringDelivery.END_OF_TURN, correlation_id="slow")
        )
        await hold.entered.wait()
        try:
            with pytest.raises(ConfigurationError, match="still open"):
                rt.forget(handle.run_id)
        finally:
            hold.release.set()  # (else close would wait for the held submit for ever)
        assert (await sending).status is ReceiptStatus.ACCEPTED
        assert rt.runs.get(handle.run_id) is handle  # the run that takes another turn
        assert (await handle.result()).output == "answer 2"
        rt.forget(handle.run_id)  # now it can go
        assert rt.runs.get(handle.run_id) is None
    recorder.assert_every_command_terminal()
    assert recorder.lifecycle("slow") == ["requested", "accepted", "delivered", "applied"]


async def test_the_retention_window_keeps_a_run_a_command_is_evaluated_for() -> None:
    """The same through the retention window: another run ending released the first while
    a message for it waited on a policy."""
    recorder, hold = EventRecorder(), HoldNamed()

    async def model(_: object) -> object:
        return reply("done")

    async with Runtime(testing=True, sinks=[recorder], retain_finished=1) as rt:
        rt.router.pipeline.insert(hold, after="authority")
        agent = Agent("a", model=FunctionModel(model))
        first = await rt.start(agent, "go")
        await first.result()
        sending = asyncio.create_task(
            first.steer("more", delivery=SteeringDelivery.END_OF_TURN, correlation_id="slow")
        )
        await hold.entered.wait()
        try:
            second = await rt.start(agent, "go")
            await second.result()  # its end releases what is past the window
            assert rt.runs.get(first.run_id) is first
        finally:
            hold.release.set()
        assert (await sending).status is ReceiptStatus.ACCEPTED
        await first.result()
    recorder.assert_every_command_terminal()
    assert recorder.lifecycle("slow") == ["requested", "accepted", "delivered", "applied"]
