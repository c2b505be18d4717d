"""Steering that lands right after the model's final answer gives the agent another turn."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel

from tinyagents import Agent, RunStatus, Runtime, SteeringRenderer
from tinyagents.harness import ModelRequest, ModelResponse
from tinyagents.testkit import EventRecorder, FunctionModel, tool_call


class Bar(BaseModel):
    bar: int


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


@pytest.mark.parametrize("role", ["user", "system"])
async def test_a_steering_message_is_a_new_prompt_for_structured_output_whatever_its_role(
    role: Literal["user", "system"],
) -> None:
    """An instruction that reaches the model between two invalid structured answers is a new
    prompt, which the model gets one more ask for, whichever role it is rendered as: rendered
    as ``system``, it was not counted as one, and the second invalid answer failed the run."""
    steered, entered = asyncio.Event(), asyncio.Event()
    answers = iter(['{"bar": "x"}', '{"bar": "y"}', '{"bar": "z"}', '{"bar": 3}'])
    model_calls = 0

    async def model(request: ModelRequest) -> str:
        nonlocal model_calls
        model_calls += 1
        if model_calls == 2:  # asked again for valid output: the instruction arrives
            entered.set()
            await steered.wait()
        return next(answers)

    agent = Agent("a", FunctionModel(model), output_type=Bar, renderer=SteeringRenderer(role=role))
    async with Runtime() as rt:
        handle = await rt.start(agent, "question")
        await entered.wait()
        await handle.steer("count in threes")
        steered.set()
        result = await handle.result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, Bar(bar=3))
    asks = [m.metadata.get("retry", m.metadata.get("kind")) for m in result.messages[1:]]
    assert asks[1::2] == ["invalid_output", "add_instruction", "invalid_output"]
    assert model_calls == 4


async def test_an_instruction_delivered_after_an_output_tool_call_gets_another_turn() -> None:
    """``output_type=Bar | str``: a final_result call is a final answer as text is, so an
    instruction that arrives while it is in flight gets the model another turn (the call is
    answered "Final result processed." first), and the run's output is the later answer."""
    steered, entered = asyncio.Event(), asyncio.Event()
    seen: list[list[str]] = []

    async def model(request: ModelRequest) -> ModelResponse:
        seen.append([m.content for m in request.messages])
        if len(seen) == 1:
            entered.set()
            await steered.wait()
            return tool_call("final_result", bar=1)
        return tool_call("final_result", bar=2)

    agent = Agent("a", FunctionModel(model), output_type=Bar | str)
    async with Runtime() as rt:
        handle = await rt.start(agent, "question")
        await entered.wait()
        await handle.steer("use two")
        steered.set()
        result = await handle.result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, Bar(bar=2)), result.error
    assert seen[1][-2] == "Final result processed." and "use two" in seen[1][-1]
