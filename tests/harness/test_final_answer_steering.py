"""Steering that lands right after the model's final answer gives the agent another turn."""

from __future__ import annotations

import asyncio

from tinyagents import Agent, RunStatus, Runtime
from tinyagents.harness import ModelRequest
from tinyagents.testkit import EventRecorder, FunctionModel


async def test_instruction_delivered_after_a_final_answer_is_not_lost() -> None:
    steered = asyncio.Event()
    entered = asyncio.Event()
    seen: list[list[str]] = []

    async def model(request: ModelRequest) -> str:
        seen.append([m.content for m in request.messages])
        if len(seen) == 1:
            entered.set()
            await steered.wait()  # the instruction arrives while the final answer is in flight
            return "first answer"
        return "second answer, with the instruction"

    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        handle = await rt.start(Agent("a", FunctionModel(model)), "question")
        await entered.wait()  # the run is inside its first (and final) model call
        receipt = await handle.steer("also cite the ledger")
        steered.set()
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output == "second answer, with the instruction"
    assert len(seen) == 2 and "also cite the ledger" in seen[1][-1]
    recorder.assert_lifecycle(
        receipt.correlation_id, ["requested", "accepted", "delivered", "applied"]
    )
    (delivered,) = [
        e for e in recorder.steering(receipt.correlation_id) if e.type == "steering.delivered"
    ]
    assert delivered.boundary == "after_model_response"
