"""``EventRecorder``'s invariant check counts commands as the router does: by (sender scope,
correlation id). Two senders may legally use one id; neither may hide the other's fate."""

from __future__ import annotations

import pytest
from steerkit import OPERATOR, finish_run, make_command, start_run

from tinyagents.protocol import ReceiptStatus, SteeringActor
from tinyagents.runtime import Runtime
from tinyagents.testkit import EventRecorder


async def test_two_senders_one_id_each_end_once() -> None:
    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder]) as rt:
        handle = await start_run(rt, "r-1")
        first = make_command("r-1", actor=SteeringActor.test(), correlation_id="c-1")
        second = make_command("r-1", actor=OPERATOR, correlation_id="c-1")
        assert (await rt.submit(first)).status is ReceiptStatus.ACCEPTED
        assert (await rt.submit(second)).status is ReceiptStatus.ACCEPTED
        await finish_run(rt, handle)
    recorder.assert_every_command_terminal()  # two commands, each failed once


async def test_an_open_command_is_not_hidden_by_another_senders_id() -> None:
    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder]) as rt:
        handle = await start_run(rt, "r-1")
        await rt.submit(make_command("r-1", actor=SteeringActor.test(), correlation_id="c-1"))
        await rt.submit(make_command("r-1", actor=OPERATOR, correlation_id="c-1"))
        # end one of the two only, as a lost command would leave the other
        (cmd,) = [c for c in handle.inbox.queue.pending() if c.actor == OPERATOR]
        handle.inbox.queue.drain()
        handle.inbox.failed(cmd, "x")
        with pytest.raises(AssertionError, match="c-1"):
            recorder.assert_every_command_terminal()
        assert recorder.terminal_state("c-1", actor=OPERATOR) == "failed"
        assert recorder.terminal_state("c-1", actor=SteeringActor.test()) is None
