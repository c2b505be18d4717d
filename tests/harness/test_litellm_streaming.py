"""``LiteLLMModel`` streams through the agent loop (issue 11 item 5), over litellm's real HTTP
path against the testkit's OpenAI-compatible server: text and tool-call argument pieces become
``model.delta`` events as the server sends them, the assembled response (tool calls, usage)
is what the run goes on with, and cancellation, token budgets, typed errors and timeouts hold
in the middle of a stream."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import asyncio
import gc
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tinyagents import (
    Agent,
    LiteLLMModel,
    RunLimits,
    RunStatus,
    Runtime,
    SubAgent,
    SubAgentTool,
    Usage,
    tool,
)
from tinyagents.errors import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelEmptyResponse,
    ModelError,
    ModelResponseError,
    ModelResponseNotJSON,
    ModelServerError,
    ModelTimeoutError,
)
from tinyagents.events import Event, ModelDeltaEvent
from tinyagents.harness import Message, ModelRequest, ToolCall, litellm_model
from tinyagents.testkit import (
    ErrorReply,
    EventWaiter,
    Fault,
    OpenAICompatServer,
    RawStream,
    ScriptedModel,
    reply,
    tool_call,
    tool_calls,
)

MODES = ["default", "llama.cpp", "vllm", "openai"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def model_for(server: OpenAICompatServer, **kw: Any) -> LiteLLMModel:
    kw.setdefault("max_retries", 0)
    kw.setdefault("retry_backoff_s", 0)
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", **kw)


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text)], tools=[add.spec()])


def deltas(events: list[Event]) -> list[ModelDeltaEvent]:
    return [e for e in events if isinstance(e, ModelDeltaEvent)]


def test_litellm_model_streams_by_default_and_can_opt_out() -> None:
    assert LiteLLMModel("openai/x").streams is True
    assert LiteLLMModel("openai/x", stream=False).streams is False


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_loop_streams_text_and_tool_argument_deltas(mode: str) -> None:
    script = [
        tool_calls(
            tool_call("add", id="call_a", a=2, b=3), tool_call("add", id="call_b", a=1, b=1)
        ),
        reply("two plus three is five"),
    ]
    async with OpenAICompatServer(script, mode=mode) as server:  # type: ignore[arg-type]
        agent = Agent("calc", model_for(server), instructions="You add.", tools=[add])
        events = [e async for e in agent.run_stream("2+3?")]

    assert server.refusals == []
    assert events[-1].type == "run.completed"
    run_id = events[0].run_id
    first, second = [e.request_id for e in events if e.type == "model.request"]
    calls = [d for d in deltas(events) if d.request_id == first]
    # Each call: its id and name on its first piece, then its JSON arguments in pieces.
    heads = [d for d in calls if d.tool_name is not None]
    assert [(d.tool_call_index, d.tool_call_id, d.tool_name) for d in heads] == [
        (0, "call_a", "add"),
        (1, "call_b", "add"),
    ]
    for index, args in ((0, {"a": 2, "b": 3}), (1, {"a": 1, "b": 1})):
        pieces = [d.args_delta for d in calls if d.tool_call_index == index and d.args_delta]
        assert len(pieces) == 2 and json.loads("".join(pieces)) == args
    text = [d.text for d in deltas(events) if d.request_id == second]
    assert text == ["two", " plus", " three", " is", " five"]
    assert all(d.run_id == run_id and d.agent_id == "calc" for d in deltas(events))
    # The assembled tool calls ran, and every delta came before its response.
    results = [e for e in events if e.type == "tool.result"]
    assert [r.content_summary for r in results] == ["5", "2"]
    order = [(e.type, getattr(e, "request_id", None)) for e in events]
    last_delta = max(i for i, key in enumerate(order) if key == ("model.delta", first))
    assert order.index(("model.response", first)) > last_delta
    assert all(body["stream"] is True for body in server.requests)


async def test_stream_false_asks_for_whole_responses_and_publishes_no_deltas() -> None:
    async with OpenAICompatServer([tool_call("add", a=1, b=2), reply("3")]) as server:
        agent = Agent("calc", model_for(server, stream=False), tools=[add])
        events = [e async for e in agent.run_stream("1+2?")]

    assert deltas(events) == [] and events[-1].type == "run.completed"
    assert all("stream" not in body for body in server.requests)


async def test_the_streamed_response_is_the_one_request_returns() -> None:
    scripted = tool_calls(
        tool_call("add", id="c1", a=20, b=22), tool_call("add", id="c2", a=1, b=2)
    )
    async with OpenAICompatServer([scripted, scripted]) as server:
        model = model_for(server)
        pieces = [chunk async for chunk in model.stream(ask())]
        whole = await model.request(ask())

    streamed = pieces[-1].response
    assert streamed is not None and all(p.response is None for p in pieces[:-1])
    expected = [
        ToolCall(id="c1", name="add", args={"a": 20, "b": 22}),
        ToolCall(id="c2", name="add", args={"a": 1, "b": 2}),
    ]
    assert streamed.tool_calls == whole.tool_calls == expected
    assert streamed.finish_reason == whole.finish_reason == "tool_calls"
    assert streamed.usage == whole.usage != Usage()


async def test_an_immediate_cancel_stops_a_stream_in_flight() -> None:
    loop = asyncio.get_running_loop()
    waiter = EventWaiter()
    stalls = Fault(stall_after=2, delay_s=60, then="alpha beta gamma")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with (
            OpenAICompatServer([stalls]) as server,
            Runtime(testing=True, sinks=[waiter]) as rt,
        ):
            handle = await rt.start(Agent("talker", model_for(server)), "talk")
            first = await waiter.event("model.delta", run_id=handle.run_id)
            await handle.cancel(immediate=True)
            result = await handle.result()
            # The server saw its client go away in the middle of the stream.
            await asyncio.wait_for(server.wait_for_disconnects(1), 60)
        await loop.shutdown_default_executor()
        gc.collect()

    assert isinstance(first, ModelDeltaEvent) and first.text == "alpha"
    assert server.disconnected == [1]
    assert result.status is RunStatus.CANCELLED
    ran = [e.type for e in waiter.events if e.run_id == handle.run_id]
    assert "model.response" not in ran and ran[-1] == "run.cancelled"
    unawaited = [w for w in caught if "never awaited" in str(w.message)]
    assert unawaited == []


async def test_an_immediate_cancel_while_waiting_for_the_first_piece_is_not_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A cancel is held only while litellm prepares a request in its worker thread; waiting
    # for a stream's first chunk is not that. Were it held, this run would not end.
    monkeypatch.setattr(litellm_model, "_HOLD_CANCEL_S", 3600.0)
    waiter = EventWaiter()
    thinks = Fault(stall_after=1, delay_s=3600, then="never sent")
    async with (
        OpenAICompatServer([thinks]) as server,
        Runtime(testing=True, sinks=[waiter]) as rt,
    ):
        handle = await rt.start(Agent("thinker", model_for(server)), "think")
        await server.wait_for_requests(1)
        await waiter.event("model.request", run_id=handle.run_id)
        await handle.cancel(immediate=True)
        async with asyncio.timeout(60):  # a hang guard, not a measurement
            result = await handle.result()
            await server.wait_for_disconnects(1)

    assert result.status is RunStatus.CANCELLED


async def test_a_stream_that_stalls_past_the_timeout_is_a_timeout_not_retried() -> None:
    stalls = Fault(stall_after=2, delay_s=60, then="alpha beta gamma")
    async with OpenAICompatServer([stalls, "never asked"]) as server:
        model = model_for(server, timeout_s=1, max_retries=3)
        base_url = server.base_url
        seen: list[str] = []
        with pytest.raises(ModelTimeoutError, match="broke off after") as caught:
            async for chunk in model.stream(ask()):
                seen.append(chunk.text_delta)

    assert seen == ["alpha"]
    assert len(server.requests) == 1  # pieces were handed out: no retry
    assert "within 1 s" in str(caught.value) and caught.value.api_base == base_url


async def test_a_stream_sent_a_byte_at_a_time_past_the_timeout_is_a_timeout() -> None:
    # httpx's timeout bounds each read: a server sending its events a byte at a time never
    # ran it out, and a chunk that took minutes to arrive was waited for, though timeout_s
    # bounds the wait for each chunk
    drips = Fault(drip_s=0.05, then="alpha beta gamma")
    async with OpenAICompatServer([drips, drips]) as server:
        model = model_for(server, timeout_s=1, max_retries=1)
        with pytest.raises(ModelTimeoutError) as caught:
            [chunk async for chunk in model.stream(ask())]

    assert "within 1 s" in str(caught.value)
    assert len(server.requests) == 2  # before its first piece: retried like a request


async def test_a_stream_whose_connection_drops_mid_answer_says_so() -> None:
    # it was "nothing answered at ...: is the server running and listening?", from a server
    # that had answered and streamed a piece
    cut = Fault(cut_after=500, then="alpha beta gamma delta")
    async with OpenAICompatServer([cut, cut]) as server:
        seen: list[str] = []
        with pytest.raises(ModelConnectionError) as caught:
            async for chunk in model_for(server, max_retries=1).stream(ask()):
                seen.append(chunk.text_delta)

    assert seen == ["alpha"] and len(server.requests) == 1  # a piece was out: no retry
    message = str(caught.value)
    assert "the connection closed mid-answer" in message and "broke off after" in message
    assert "is the server running" not in message


async def test_opening_a_stream_is_retried_like_a_request() -> None:
    replies = [ErrorReply(status=503), Fault(delay_s=60, then="late"), "finally here"]
    async with OpenAICompatServer(replies) as server:
        model = model_for(server, timeout_s=1, max_retries=2)
        pieces = [chunk async for chunk in model.stream(ask())]

    assert pieces[-1].response is not None and pieces[-1].response.text == "finally here"
    assert len(server.requests) == 3


async def test_a_stream_that_stalls_before_its_first_piece_is_retried() -> None:
    # The server answers at once (headers, the role chunk) and then thinks too long: as when a
    # local server evaluates a long prompt. Nothing was handed out yet, so it is retried.
    stalls = Fault(stall_after=1, delay_s=60, then="too late")
    async with OpenAICompatServer([stalls, "in time"]) as server:
        model = model_for(server, timeout_s=1, max_retries=1)
        pieces = [chunk async for chunk in model.stream(ask())]
        await asyncio.wait_for(server.wait_for_disconnects(1), 60)

    assert [p.text_delta for p in pieces if p.text_delta] == ["in", " time"]
    assert pieces[-1].response is not None and pieces[-1].response.text == "in time"
    assert len(server.requests) == 2 and server.disconnected == [1]


STREAM_FAULTS = {
    "an HTML page": (Fault(body="<html>Welcome to nginx!</html>"), ModelResponseNotJSON, "/v1"),
    "one JSON body": (
        {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []},
        ModelResponseError,
        "stream=False",
    ),
    "no choices": (Fault(empty_choices=True), ModelEmptyResponse, "no choices"),
    "HTTP 401": (ErrorReply(status=401), ModelAuthenticationError, "check api_key"),
}


@pytest.mark.parametrize("name", sorted(STREAM_FAULTS))
async def test_a_stream_request_that_fails_is_typed_and_not_retried(name: str) -> None:
    fault, error, advice = STREAM_FAULTS[name]
    async with OpenAICompatServer([fault, "never asked"]) as server:
        with pytest.raises(ModelError) as caught:
            [chunk async for chunk in model_for(server, max_retries=3).stream(ask())]

    assert type(caught.value) is error, caught.value
    assert advice in str(caught.value) and "openai/test-model" in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_a_streamed_response_past_the_token_budget_ends_limit_exceeded(stream: bool) -> None:
    answer = reply("one two three four five six")
    answer.usage = Usage(input_tokens=40, output_tokens=30)
    async with OpenAICompatServer([answer]) as server, Runtime() as rt:
        agent = Agent("w", model_for(server, stream=stream), limits=RunLimits(max_tokens=50))
        result = await (await rt.start(agent, "go")).result()

    assert server.requests[0]["max_tokens"] == 50
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "used 70, allowed 50" in (result.error or "")
    assert result.output == "one two three four five six"


async def test_a_childs_tokens_reach_the_parents_handle_stream_as_they_arrive() -> None:
    async with OpenAICompatServer(["found two charges"]) as server, Runtime() as rt:
        child = Agent("researcher", model_for(server))
        parent = Agent(
            "lead",
            ScriptedModel([tool_call("researcher", {"input": "look"}), reply("done")]),
            tools=[SubAgentTool(SubAgent(child))],
        )
        handle = await rt.start(parent, "go")
        pieces = [e async for e in handle.stream("messages")]
        result = await handle.result()
        (child_run,) = [i.run_id for i in rt.runs.list() if i.parent_run_id == handle.run_id]

    assert result.status is RunStatus.COMPLETED
    assert all(isinstance(e, ModelDeltaEvent) and e.run_id == child_run for e in pieces)
    assert [e.text for e in pieces] == ["found", " two", " charges"]
    assert {e.agent_id for e in pieces} == {"researcher"}


async def test_a_durable_store_keeps_the_response_not_every_token(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    async with OpenAICompatServer(["one two three"]) as server, Runtime(store=store) as rt:
        handle = await rt.start(Agent("talker", model_for(server)), "talk")
        live = [e async for e in handle.stream("messages")]
        await handle.result()
    async with Runtime(store=store) as reopened:  # closing flushed the event log
        stored = [e.type for e in await reopened.store.load_events(run_id=handle.run_id)]

    assert [e.text for e in live] == ["one", " two", " three"]
    assert "model.delta" not in stored and "model.response" in stored


async def test_a_stream_without_usage_has_its_tokens_counted() -> None:
    async with OpenAICompatServer(["one two three four"]) as server:
        model = model_for(server, stream_options={"include_usage": False})
        pieces = [chunk async for chunk in model.stream(ask("count to four"))]

    assert server.requests[0]["stream_options"] == {"include_usage": False}
    final = pieces[-1].response
    assert final is not None and final.text == "one two three four"
    # No usage chunk was sent: litellm's tokenizer counted prompt and completion.
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0


# --------------------------------------------------------------------------- found by a probe


def nameless_call_body(stream: bool, *, name: str | None = "add") -> Fault:
    """A completion whose one tool call carries no id (and, with ``name=None``, no name), as
    some servers send it: raw, so no client or test helper fills them in."""
    function = {"arguments": '{"a": 2, "b": 3}', **({"name": name} if name else {})}
    if not stream:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": function}],
        }
        body = {
            "id": "x", "object": "chat.completion", "created": 1, "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        }  # fmt: skip
        return Fault(body=json.dumps(body), content_type="application/json")
    head = {
        "index": 0,
        "type": "function",
        "function": {k: v for k, v in function.items() if k == "name"},
    }
    chunks = [
        {"role": "assistant", "content": ""},
        {"tool_calls": [{**head, "function": {**head["function"], "arguments": '{"a": 2,'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ' "b": 3}'}}]},
    ]
    events = [
        {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
         "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in chunks
    ]  # fmt: skip
    events.append(
        {**events[0], "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    )
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Fault(body=text, content_type="text/event-stream")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_a_tool_call_without_an_id_runs_streamed_or_not(stream: bool) -> None:
    """A server that sends no id for a tool call: the whole response gave it ``call_0``, the
    stream dropped the call (litellm's assembly keeps only calls with an id), so the run
    completed with an empty answer and no tool run."""
    async with OpenAICompatServer(
        [nameless_call_body(stream), reply("5")], mode="llama.cpp"
    ) as server:
        agent = Agent("calc", model_for(server, stream=stream), tools=[add])
        result = await agent.run("2+3?")
    assert result.status is RunStatus.COMPLETED and result.output == "5"
    assert server.refusals == []
    (call,) = server.requests[1]["messages"][1]["tool_calls"]
    # streamed: ``call_<index>``; whole: litellm makes one up
    assert call["id"] and call["function"]["name"] == "add"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("mode", ["llama.cpp", "vllm"])
async def test_a_tool_call_without_a_name_gets_an_error_result(stream: bool, mode: str) -> None:
    """A call naming no tool was sent back with ``"name": null``, which strict servers refuse
    (the run failed), or dropped from a stream: it is answered with an error result the model
    can correct itself from."""
    script = [nameless_call_body(stream, name=None), reply("sorry")]
    async with OpenAICompatServer(script, mode=mode) as server:  # type: ignore[arg-type]
        agent = Agent("calc", model_for(server, stream=stream), tools=[add])
        result = await agent.run("1+2?")
    assert result.status is RunStatus.COMPLETED and result.output == "sorry"
    assert server.refusals == []
    assistant, tool_result = server.requests[1]["messages"][1:3]
    assert assistant["tool_calls"][0]["function"]["name"] == litellm_model.NAMELESS
    assert f"unknown tool {litellm_model.NAMELESS!r}" in tool_result["content"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_a_lone_surrogate_in_a_tool_result_does_not_break_the_next_request(
    stream: bool,
) -> None:
    """Text UTF-8 cannot carry (a tool's output with a lone surrogate) failed every later
    request of the run before it was sent, reported as the server's HTTP 500 and retried."""

    @tool
    def odd() -> str:
        """Return odd text."""
        return "half an emoji: \ud83d."

    script = [tool_calls(tool_call("odd", id="call_1")), reply("done")]
    async with OpenAICompatServer(script, mode="llama.cpp") as server:
        agent = Agent("odd", model_for(server, stream=stream), tools=[odd])
        result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED and result.output == "done"
    assert server.requests[1]["messages"][2]["content"] == "half an emoji: \ufffd."


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("finish_reason", "why"),
    [
        ("content_filter", "the provider's content filter blocked the answer"),
        ("length", "the output token limit was reached before any output"),
    ],
)
async def test_an_answer_cut_off_before_it_began_is_a_failure(
    stream: bool, finish_reason: str, why: str
) -> None:
    """An empty answer whose finish_reason says it was blocked or cut off ended the run
    ``completed`` with output '' (pydantic-ai raises)."""
    from tinyagents.harness import ModelResponse

    script = [ModelResponse(text="", finish_reason=finish_reason)]
    async with OpenAICompatServer(script) as server:
        agent = Agent("writer", model_for(server, stream=stream))
        result = await agent.run("write")
    assert result.status is RunStatus.FAILED
    assert "ModelResponseError" in (result.error or "") and why in (result.error or "")
    assert len(server.requests) == 1  # not retried


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_the_tokens_of_an_answer_blocked_before_it_began_are_counted(stream: bool) -> None:
    """The provider spent the prompt's tokens on an answer its content filter blocked: they
    were left out of the run's usage and of its ancestors' (a run of a fake model counted
    them), so a parent could call a child that failed this way again and again without its
    token budget ever noticing. They are counted, as pydantic-ai counts a response's usage
    before it raises for the blocked answer."""
    from tinyagents.harness import ModelResponse

    blocked = ModelResponse(
        text="", finish_reason="content_filter", usage=Usage(input_tokens=120, output_tokens=0)
    )
    async with OpenAICompatServer([blocked]) as server:
        writer = Agent("writer", model_for(server, stream=stream))
        parent_model = ScriptedModel([tool_call("writer", input="write"), "done"])
        parent = Agent(
            "parent",
            parent_model,
            tools=[SubAgentTool(writer)],
            limits=RunLimits(max_input_tokens=100),
        )
        async with Runtime() as rt:
            handle = await rt.start(parent, "go")
            result = await handle.result()
            (child,) = rt.tree(handle.run_id).children
            child_result = await rt.runs.get(child.info.run_id).result()  # type: ignore[union-attr]
    assert child_result.status is RunStatus.FAILED
    assert "content filter" in (child_result.error or "")
    assert child_result.usage["input_tokens"] == 120
    # the parent's budget saw them: its next request is refused
    assert result.status is RunStatus.LIMIT_EXCEEDED and "max_input_tokens" in (result.error or "")
    assert len(parent_model.requests) == 1


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_an_answer_cut_at_the_token_limit_says_so_in_its_response_event(
    stream: bool,
) -> None:
    """Text cut off by ``finish_reason="length"`` looked like any completed answer: the
    ``model.response`` event now says why the model stopped."""
    from tinyagents.harness import ModelResponse

    script = [ModelResponse(text="the first half of", finish_reason="length")]
    async with OpenAICompatServer(script) as server:
        agent = Agent("writer", model_for(server, stream=stream))
        events = [e async for e in agent.run_stream("write")]
    (response,) = [e for e in events if e.type == "model.response"]
    assert response.finish_reason == "length"  # type: ignore[attr-defined]
    assert events[-1].type == "run.completed"


def unfinished_stream(*deltas: dict[str, Any], done: bool) -> Fault:
    """A stream that ends before any chunk gives a ``finish_reason`` (with or without its
    ``[DONE]``): the server crashed, or a proxy cut the response, mid-answer."""
    base = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "test-model"}
    events = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in [{"role": "assistant"}, *deltas]
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return Fault(body=body + ("data: [DONE]\n\n" if done else ""), content_type="text/event-stream")


CUT_CALL = {
    "index": 0,
    "id": "c1",
    "type": "function",
    "function": {"name": "add", "arguments": "{"},
}


@pytest.mark.parametrize("done", [True, False], ids=["with-done", "no-done"])
@pytest.mark.parametrize(
    "delta", [{"content": "hello"}, {"tool_calls": [CUT_CALL]}], ids=["text", "tool-call"]
)
async def test_a_stream_cut_before_its_finish_reason_says_so_not_http_500(
    delta: dict[str, Any], done: bool
) -> None:
    # litellm labels it HTTP 500 (MidStreamFallbackError): the error said the server "failed
    # with HTTP 500" and to raise max_retries, where the server had answered 200 and its
    # stream stopped mid-answer, and no retry of a stream under way is made
    async with OpenAICompatServer([unfinished_stream(delta, done=done)]) as server:
        with pytest.raises(ModelError) as caught:
            [chunk async for chunk in model_for(server, max_retries=2).stream(ask())]
    error = caught.value
    assert type(error) is ModelServerError, error
    assert "HTTP 500" not in str(error) and error.status is None
    assert "ended its stream before it said it was finished (no finish_reason" in str(error)
    assert "broke off after 2 chunk(s)" in str(error)
    assert len(server.requests) == 1


def stream_with(event: bytes, *, first: bool) -> Fault:
    """A stream of "hello" with ``event`` (a server-sent event that is no JSON chunk) before
    its first piece or after it."""
    base = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "test-model"}
    events = [
        f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': d, 'finish_reason': r}]})}\n\n"
        for d, r in [({"role": "assistant", "content": "hello"}, None), ({}, "stop")]
    ]
    body = b"".join(e.encode() for e in events) + b"data: [DONE]\n\n"
    cut = 0 if first else len(events[0].encode())
    return Fault(body=body[:cut] + event + body[cut:], content_type="text/event-stream")


@pytest.mark.parametrize("first", [True, False], ids=["before-first-piece", "after-it"])
@pytest.mark.parametrize(
    "event", [b'data: {"id": \n\n', b'data: {"id": "\xff"}\n\n'], ids=["cut-json", "no-utf8"]
)
async def test_a_streamed_chunk_that_is_no_json_is_not_json_not_http_500(
    event: bytes, first: bool
) -> None:
    # litellm labels it HTTP 500: the error said the server "failed with HTTP 500" (its log
    # says why), and before the first piece the stream was asked for again, the same body
    # coming back each time
    reply = stream_with(event, first=first)
    async with OpenAICompatServer([reply, reply, reply]) as server:
        with pytest.raises(ModelError) as caught:
            [chunk async for chunk in model_for(server, max_retries=2).stream(ask())]
    error = caught.value
    assert type(error) is ModelResponseNotJSON, error
    assert "HTTP 500" not in str(error) and "not whole JSON" in str(error)
    assert not error.retryable and len(server.requests) == 1


def refusal_reply(refusal: str) -> Fault:
    """A whole answer that is a refusal (OpenAI's ``message.refusal``, no content)."""
    message = {"role": "assistant", "content": None, "refusal": refusal}
    body = {
        "id": "x", "object": "chat.completion", "created": 1, "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45},
    }  # fmt: skip
    return Fault(body=json.dumps(body), content_type="application/json")


async def test_a_refusal_fails_the_run_saying_what_the_model_refused() -> None:
    # a refusal has no content: it was taken for an empty answer and asked for again (a paid
    # call that the model refuses the same way), then the run failed with "gave no text and
    # no tool call", the refusal itself nowhere
    refusal = "I'm sorry, I cannot help with that request."
    async with OpenAICompatServer([refusal_reply(refusal)] * 2) as server:
        result = await Agent("writer", model_for(server, stream=False)).run("write")
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.startswith("ModelResponseError")
    assert "refused" in result.error and json.dumps(refusal) in result.error
    assert len(server.requests) == 1  # not asked again: it would be refused the same way
    assert result.usage["input_tokens"] == 40  # what it cost is counted


async def test_a_streamed_refusal_fails_the_run_as_a_whole_one_does() -> None:
    # litellm's stream drops a chunk that holds nothing but a refusal (OpenAI streams one as
    # delta.refusal pieces, content null): the run ended "completed" with an empty answer,
    # where the same refusal asked for whole raised a ModelResponseError quoting it
    refusal = "I'm sorry, I cannot help with that request."
    pieces = [{"content": None, "refusal": part} for part in ("I'm sorry, ", refusal[11:])]
    stream = RawStream(deltas=pieces, finish_reason="stop")
    async with OpenAICompatServer([stream, stream]) as server:
        result = await Agent("writer", model_for(server)).run("write")
        with pytest.raises(ModelResponseError) as caught:
            [chunk async for chunk in model_for(server).stream(ask())]
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.startswith("ModelResponseError")
    assert "refused" in result.error and json.dumps(refusal) in result.error
    assert result.usage["input_tokens"] > 0  # what it cost is counted
    assert caught.value.refusal == refusal
    assert len(server.requests) == 2  # each asked once: it would be refused the same way


async def test_a_streamed_answer_with_text_is_not_taken_for_a_refusal() -> None:
    stream = RawStream(deltas=[{"refusal": ""}, {"content": "fine"}], finish_reason="stop")
    async with OpenAICompatServer([stream]) as server:
        chunks = [chunk async for chunk in model_for(server).stream(ask())]
    assert chunks[-1].response is not None and chunks[-1].response.text == "fine"
