"""Token streaming out of the agent loop: a model that streams (``Model.streams``) has each piece
published as a ``model.delta`` event; ``Agent.run_stream`` and ``handle.stream()`` hand them out
as they arrive; steering lands at the same boundaries as without streaming."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tinyagents import Agent, Model, Runtime, SubAgent, SubAgentTool, tool
from tinyagents.errors import ConfigurationError
from tinyagents.events import Event, ModelDeltaEvent, parse_event
from tinyagents.harness import ModelRequest, ModelResponse, StreamChunk
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    Gate,
    ScriptedModel,
    reply,
    steering_messages,
    tool_call,
)


@tool
def lookup(customer: str) -> str:
    """Find a customer's invoices."""
    return f"{customer}: two charges"


def script(stream: bool) -> ScriptedModel:
    return ScriptedModel(
        [tool_call("lookup", {"customer": "acme corp"}), reply("the invoice was charged twice")],
        stream=stream,
        args_piece=5,
    )


async def test_run_stream_yields_the_deltas_of_text_and_tool_arguments_then_the_end() -> None:
    agent = Agent("billing", script(stream=True), tools=[lookup])
    events = [e async for e in agent.run_stream("why two charges?")]

    deltas = [e for e in events if isinstance(e, ModelDeltaEvent)]
    requests = [e.request_id for e in events if e.type == "model.request"]
    assert len(requests) == 2
    first = [d for d in deltas if d.request_id == requests[0]]
    second = [d for d in deltas if d.request_id == requests[1]]
    # The tool call: its name on its first piece, its JSON arguments in pieces.
    assert first[0].tool_name == "lookup" and first[0].tool_call_id is not None
    args = "".join(d.args_delta for d in first)
    assert json.loads(args) == {"customer": "acme corp"} and len(first) > 2
    # The answer, word by word, each piece before the response it makes up.
    assert "".join(d.text for d in second) == "the invoice was charged twice"
    assert all(d.agent_id == "billing" and d.run_id == events[0].run_id for d in deltas)
    order = [e.type for e in events]
    assert order.index("model.delta") > order.index("model.request")
    assert order.index("model.response") > order.index("model.delta")
    assert events[-1].type == "run.completed"
    assert events[0].type == "run.started"  # subscribed before the run started
    # A delta is an event like any other: JSON out and back.
    assert parse_event(second[0].to_json()) == second[0]


async def test_messages_only_yields_nothing_but_deltas() -> None:
    agent = Agent("billing", script(stream=True), tools=[lookup])
    events = [e async for e in agent.run_stream("go", messages_only=True)]
    assert events and {e.type for e in events} == {"model.delta"}


@pytest.mark.parametrize("messages_only", [False, True])
async def test_a_consumer_slower_than_the_run_gets_each_event_once(messages_only: bool) -> None:
    # the events still queued when the run ended were yielded twice ("quick quick brown
    # brown"), run.completed too
    async with Runtime() as rt:
        handle = await rt.start(Agent("billing", script(stream=True), tools=[lookup]), "go")
        stream = handle.stream("messages" if messages_only else "values")
        first = await anext(stream)  # subscribed; the rest queues while the run finishes
        await handle.result()
        events = [first, *[e async for e in stream]]
    offsets = [e.offset for e in events]
    assert len(offsets) == len(set(offsets))
    text = "".join(getattr(e, "text", "") or "" for e in events if e.type == "model.delta")
    assert text.endswith("the invoice was charged twice")
    if not messages_only:
        assert [e.type for e in events].count("run.completed") == 1
        assert events[-1].type == "run.completed"


async def test_a_model_that_does_not_stream_publishes_no_deltas() -> None:
    agent = Agent("billing", script(stream=False), tools=[lookup])
    events = [e async for e in agent.run_stream("go")]
    assert "model.delta" not in {e.type for e in events}
    assert events[-1].type == "run.completed"


async def test_handle_stream_carries_the_childrens_deltas_with_their_run_ids() -> None:
    child = Agent("researcher", ScriptedModel([reply("found it")], stream=True))
    parent_model = ScriptedModel(
        [tool_call("researcher", {"input": "look"}), reply("done")], stream=False
    )
    parent = Agent("lead", parent_model, tools=[SubAgentTool(SubAgent(child))])
    async with Runtime() as rt:
        handle = await rt.start(parent, "go")
        events = [e async for e in handle.stream("messages")]
        await handle.result()
        (child_info,) = [i for i in rt.runs.list() if i.parent_run_id == handle.run_id]
    assert events and all(e.type == "model.delta" for e in events)
    assert {e.run_id for e in events} == {child_info.run_id}
    assert "".join(e.text for e in events) == "found it"


async def test_an_agent_run_refuses_a_graph_stream_mode() -> None:
    async with Runtime() as rt:
        handle = await rt.start(Agent("a", ScriptedModel(["ok"])), "go")
        with pytest.raises(ConfigurationError, match="'events'"):
            handle.stream("updates")
        await handle.result()


def _steering_trail(events: list[Event]) -> list[tuple[str, Any]]:
    return [
        (e.type, getattr(e, "boundary", None)) for e in events if e.type.startswith("steering.")
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_steering_lands_at_the_same_boundaries_with_and_without_streaming(
    stream: bool,
) -> None:
    trails = {}
    for streaming in (False, stream):
        model = script(stream=streaming)
        async with Runtime() as rt:
            handle = await rt.start(Agent("billing", model, tools=[lookup]), "go")
            await handle.steer("check the second charge first")
            await handle.result()
            trails[streaming] = _steering_trail(rt.steering_history(handle.run_id))
            # The instruction reached the model on the same request either way.
            texts = [str(m.content) for m in model.requests[1].messages]
            assert any("check the second charge first" in t for t in texts)
    assert trails[stream] == trails[False]
    assert ("steering.applied", None) in trails[False]


class HalfwayStream(Model):
    """Streams half of its first answer, then waits at a gate until the test opens it."""

    name = "halfway"
    streams = True

    def __init__(self) -> None:
        self.gate = Gate("mid-stream")
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("a streaming model is asked through stream()")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        if len(self.requests) == 1:
            yield StreamChunk(text_delta="the invoice ")
            await self.gate.wait()
            yield StreamChunk(text_delta="was charged twice")
            yield StreamChunk(response=ModelResponse(text="the invoice was charged twice"))
        else:
            yield StreamChunk(text_delta="sorry", response=ModelResponse(text="sorry"))


async def test_steering_sent_during_a_stream_lands_after_the_response() -> None:
    # Nothing is applied inside a provider stream: an instruction, a pause and a status
    # request sent after the first piece wait for the end of the stream, are delivered at
    # after_model_response of that request, and the instruction reaches the next request.
    model = HalfwayStream()
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        handle = await rt.start(Agent("billing", model), "why two charges?")
        await model.gate.entered.wait()  # one piece out, the stream still open
        cids = [
            (await handle.steer("apologise first")).correlation_id,
            (await handle.pause("a human looks first")).correlation_id,
            (await handle.request_status()).correlation_id,
        ]
        assert [recorder.terminal_state(c) for c in cids] == [None, None, None]
        model.gate.open()
        waiter = EventWaiter()
        rt.bus.add_sink(waiter)
        await waiter.event("run.paused", handle.run_id)
        await handle.resume()
        result = await handle.result()
    assert (result.status.value, result.output) == ("completed", "sorry")
    first = model.requests[0].request_id
    for cid in cids:
        (delivered,) = [e for e in recorder.steering(cid) if e.type == "steering.delivered"]
        assert delivered.boundary == "after_model_response"
        assert delivered.affected.get("model_request_id") == first
    types = recorder.types()
    assert types.index("model.response") < types.index("steering.delivered")
    assert "apologise first" in steering_messages(model.requests[1])[0].content
    recorder.assert_every_command_terminal()
