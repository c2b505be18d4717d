"""A real model under faults, through litellm's real HTTP path against the testkit's
OpenAI-compatible server: what a user of a real provider meets (an error event in the middle
of a stream, a stream without ``[DONE]``, a provider's filter, a cut answer, tool calls and
structured output the model gets wrong, the stream's usage chunk) ends the way it should."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from tinyagents import (
    Agent,
    LiteLLMModel,
    Middleware,
    RunLimits,
    RunStatus,
    Runtime,
    Usage,
    tool,
)
from tinyagents.errors import (
    ModelError,
    ModelRateLimitError,
    ModelRequestRejected,
    ModelServerError,
)
from tinyagents.harness import Message, ModelRequest, ModelResponse, ToolCall
from tinyagents.testkit import (
    ErrorReply,
    EventWaiter,
    Fault,
    OpenAICompatServer,
    RawStream,
    reply,
    tool_call,
)

STREAMS = pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class City(BaseModel):
    name: str
    population: int


def model_for(server: OpenAICompatServer, **kw: Any) -> LiteLLMModel:
    kw.setdefault("max_retries", 0)
    kw.setdefault("retry_backoff_s", 0)
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", **kw)


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text)], tools=[add.spec()])


def sse(*chunks: dict[str, Any], done: bool = True) -> Fault:
    """A 200 stream of exactly these chunks (each given the usual id, object and model)."""
    base = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "test-model"}
    body = "".join(f"data: {json.dumps({**base, **chunk})}\n\n" for chunk in chunks)
    return Fault(body=body + ("data: [DONE]\n\n" if done else ""), content_type="text/event-stream")


def choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def last_two(request: dict[str, Any]) -> list[dict[str, Any]]:
    return request["messages"][-2:]


# --- an error event in the middle of a stream -------------------------------------------


async def test_an_error_event_mid_stream_quotes_the_servers_error_not_http_500() -> None:
    # OpenAI, vLLM and OpenRouter answer 200 and report a failure while generating as an
    # event {"error": {...}}; litellm labels it HTTP 500 (MidStreamFallbackError): the error
    # said the server "failed with HTTP 500", where it had said what failed, and why
    fault = Fault(
        error_after=2,
        error=ErrorReply(status=502, message="upstream overloaded"),
        then="alpha beta gamma",
    )
    async with OpenAICompatServer([fault, "never asked"]) as server:
        seen: list[str] = []
        with pytest.raises(ModelError) as caught:
            async for chunk in model_for(server, max_retries=2).stream(ask()):
                seen.append(chunk.text_delta)
    error = caught.value
    assert type(error) is ModelServerError, error
    assert "HTTP 500" not in str(error) and error.status is None
    assert "sent an error in its stream" in str(error) and "upstream overloaded" in str(error)
    assert "code 502" in str(error)
    assert seen == ["alpha"] and len(server.requests) == 1  # a piece was out: not retried


async def test_an_error_event_before_the_first_piece_is_retried_like_opening_a_stream() -> None:
    fault = Fault(error_after=1, error=ErrorReply(status=503, message="loading model"))
    async with OpenAICompatServer([fault, "in time"]) as server:
        pieces = [chunk async for chunk in model_for(server, max_retries=1).stream(ask())]
    assert pieces[-1].response is not None and pieces[-1].response.text == "in time"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("code", "error_type", "requests"),
    [
        (400, ModelRequestRejected, 1),
        (429, ModelRateLimitError, 2),
        ("server_error", ModelServerError, 2),
    ],
    ids=["vllm-400", "rate-limit", "openrouter-text-code"],
)
async def test_an_error_events_code_types_the_error(
    code: int | str, error_type: type[ModelError], requests: int
) -> None:
    # vLLM reports a request it cannot serve as {"error": {..., "code": 400}} in the stream:
    # the same request fails the same way, so it is not retried; a 429 or a server error is
    event = ErrorReply(status=code, message="no", type="BadRequestError")  # type: ignore[arg-type]
    fault = Fault(error_after=1, error=event)
    async with OpenAICompatServer([fault, fault]) as server:
        with pytest.raises(ModelError) as caught:
            [chunk async for chunk in model_for(server, max_retries=1).stream(ask())]
    assert type(caught.value) is error_type, caught.value
    assert "HTTP 500" not in str(caught.value) and "sent an error in its stream" in str(
        caught.value
    )
    assert len(server.requests) == requests


async def test_an_error_event_fails_the_run_saying_what_the_server_said() -> None:
    fault = Fault(error_after=2, error=ErrorReply(message="GPU fell off the bus"), then="a b")
    async with OpenAICompatServer([fault]) as server:
        result = await Agent("a", model_for(server)).run("go")
    assert result.status is RunStatus.FAILED
    assert "GPU fell off the bus" in (result.error or "") and "HTTP 500" not in (result.error or "")


# --- streams that end oddly, and why an answer stopped ----------------------------------


async def test_a_stream_that_finishes_but_sends_no_done_is_a_whole_answer() -> None:
    # [DONE] is OpenAI's framing; some servers and proxies close after the finish chunk
    unterminated = sse(
        choice({"role": "assistant", "content": "hello"}),
        choice({}, "stop"),
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}},
        done=False,
    )
    async with OpenAICompatServer([unterminated]) as server:
        result = await Agent("a", model_for(server)).run("go")
    assert result.status is RunStatus.COMPLETED and result.output == "hello"
    assert result.usage["input_tokens"] == 7 and result.usage["output_tokens"] == 1


@pytest.mark.parametrize("usage_sent", [True, False], ids=["after-usage", "before-usage"])
async def test_a_connection_dropped_after_the_finish_reason_keeps_the_whole_answer(
    usage_sent: bool,
) -> None:
    # a proxy that closes the connection after the last event, before [DONE] (or before the
    # usage chunk): every piece of the answer had come, and the run failed with
    # "the connection closed mid-answer", the answer (and its tokens) thrown away
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    events = [
        choice({"role": "assistant", "content": "hello"}),
        choice({"content": " world"}),
        choice({}, "stop"),
        {"choices": [], "usage": usage},
    ]
    whole = sse(*events)
    assert isinstance(whole.body, str)
    kept = sse(*(events if usage_sent else events[:-1]), done=False)
    assert isinstance(kept.body, str)
    dropped = Fault(body=whole.body, cut_after=len(kept.body), content_type="text/event-stream")
    async with OpenAICompatServer([dropped]) as server:
        events_seen = [e async for e in Agent("a", model_for(server)).run_stream("go")]
    assert events_seen[-1].type == "run.completed", events_seen[-1]
    (response,) = [e for e in events_seen if e.type == "model.response"]
    assert response.text_summary == "hello world"  # type: ignore[attr-defined]
    assert response.finish_reason == "stop"  # type: ignore[attr-defined]
    # the usage chunk, when it came, is the server's word; else the tokens are counted
    said = (response.usage["input_tokens"], response.usage["output_tokens"])  # type: ignore[attr-defined]
    if usage_sent:
        assert said == (5, 2)
    else:
        assert said[0] > 0 and said[1] > 0 and said != (5, 2)


async def test_a_stream_that_stalls_after_its_finish_reason_keeps_the_whole_answer() -> None:
    # the finish chunk came, then nothing (no usage chunk, no [DONE]) within timeout_s
    # role, "hello", " world" | finish, usage, [DONE]
    stalls = Fault(stall_after=3, delay_s=60, then="hello world")
    stalls_after_finish = Fault(stall_after=4, delay_s=60, then="hello world")
    async with OpenAICompatServer([stalls, stalls_after_finish]) as server:
        agent = Agent("a", model_for(server, timeout_s=1))
        before = await agent.run("go")
        after = await agent.run("go")
        async with asyncio.timeout(60):  # a hang guard, not a measurement
            await server.wait_for_disconnects(2)
    assert before.status is RunStatus.FAILED and "ModelTimeoutError" in (before.error or "")
    assert after.status is RunStatus.COMPLETED and after.output == "hello world"


async def test_a_connection_dropped_before_the_finish_reason_still_fails() -> None:
    events = [choice({"role": "assistant", "content": "hello"}), choice({}, "stop")]
    whole, kept = sse(*events), sse(events[0], done=False)
    assert isinstance(whole.body, str) and isinstance(kept.body, str)
    dropped = Fault(body=whole.body, cut_after=len(kept.body), content_type="text/event-stream")
    async with OpenAICompatServer([dropped]) as server:
        result = await Agent("a", model_for(server)).run("go")
    assert result.status is RunStatus.FAILED and "mid-answer" in (result.error or "")


async def test_keep_alive_comments_and_crlf_framing_are_read_as_servers_send_them() -> None:
    # OpenRouter sends ": OPENROUTER PROCESSING" comments while a model thinks; some servers
    # frame events with CRLF, or name them ("event: message")
    chunks = [
        json.dumps({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m", **c})
        for c in (choice({"role": "assistant", "content": "hello"}), choice({}, "stop"))
    ]
    bodies = [
        f": OPENROUTER PROCESSING\n\ndata: {chunks[0]}\n\n: ping\n\ndata: {chunks[1]}\n\n",
        f"data: {chunks[0]}\r\n\r\ndata: {chunks[1]}\r\n\r\n",
        f"event: message\ndata: {chunks[0]}\n\nevent: message\ndata: {chunks[1]}\n\n",
    ]
    script = [Fault(body=b + "data: [DONE]\n\n", content_type="text/event-stream") for b in bodies]
    async with OpenAICompatServer(script) as server:
        agent = Agent("a", model_for(server))
        outputs = [(await agent.run("go")).output for _ in bodies]
    assert outputs == ["hello"] * 3


async def test_a_first_chunk_without_choices_is_skipped_as_azure_sends_it() -> None:
    # Azure OpenAI's first chunk carries prompt_filter_results and no choices
    azure = sse(
        {"choices": [], "prompt_filter_results": [{"prompt_index": 0}]},
        choice({"role": "assistant", "content": "hi"}),
        choice({}, "stop"),
    )
    async with OpenAICompatServer([azure]) as server:
        result = await Agent("a", model_for(server)).run("go")
    assert result.status is RunStatus.COMPLETED and result.output == "hi"


@STREAMS
async def test_text_the_content_filter_cut_short_completes_and_says_why(stream: bool) -> None:
    # as pydantic-ai by default: only an answer blocked before it began fails the run
    script = [ModelResponse(text="the first half", finish_reason="content_filter")]
    async with OpenAICompatServer(script) as server:
        events = [e async for e in Agent("a", model_for(server, stream=stream)).run_stream("go")]
    (response,) = [e for e in events if e.type == "model.response"]
    assert response.finish_reason == "content_filter"  # type: ignore[attr-defined]
    assert events[-1].type == "run.completed"


# --- tool calls the model gets wrong ----------------------------------------------------


@STREAMS
async def test_unreadable_arguments_go_back_as_a_retry_counted_against_the_tools_retries(
    stream: bool,
) -> None:
    bad = ModelResponse(tool_calls=[ToolCall(id="c1", name="add", args='{"a": 1, "b":')])
    good = ModelResponse(tool_calls=[ToolCall(id="c2", name="add", args='{"a": 1, "b": 2}')])
    async with OpenAICompatServer([bad, good, "3", bad, bad]) as server:
        agent = Agent("a", model_for(server, stream=stream), tools=[add], retries=1)
        corrected = await agent.run("go")
        told = last_two(server.requests[1])
        failed = await agent.run("again")
    assert corrected.status is RunStatus.COMPLETED and corrected.output == "3"
    assert told[1]["role"] == "tool" and told[1]["tool_call_id"] == "c1"
    assert "not valid JSON" in told[1]["content"] and '{"a": 1, "b":' in told[1]["content"]
    # a second failure in a row is past Agent(retries=1): the run fails, as pydantic-ai's
    assert failed.status is RunStatus.FAILED
    assert "exceeded max retries count of 1" in (failed.error or "")
    assert len(server.requests) == 5


@STREAMS
async def test_a_tool_the_run_lacks_is_answered_with_the_tools_it_has(stream: bool) -> None:
    async with OpenAICompatServer([tool_call("nope", a=1), "done"]) as server:
        result = await Agent("a", model_for(server, stream=stream), tools=[add]).run("go")
    assert result.status is RunStatus.COMPLETED and result.output == "done"
    told = last_two(server.requests[1])[1]
    assert told["role"] == "tool" and "unknown tool 'nope'; available: add" in told["content"]


async def test_interleaved_parallel_calls_with_text_beside_them_all_run_in_order() -> None:
    fragments = [
        {"content": "Adding"},
        {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "add"}}]},
        {"tool_calls": [{"index": 1, "id": "c1", "type": "function", "function": {"name": "add"}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": '{"a": 5,'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]},
        {"content": " both"},
        {"tool_calls": [{"index": 0, "function": {"arguments": ': 1, "b": 2}'}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": ' "b": 6}'}}]},
    ]
    async with OpenAICompatServer([RawStream(deltas=fragments), "3 and 11"]) as server:
        result = await Agent("a", model_for(server), tools=[add]).run("go")
    assert result.status is RunStatus.COMPLETED
    assistant, *results = server.requests[1]["messages"][-3:]
    assert assistant["content"] == "Adding both"
    assert [(c["id"], json.loads(c["function"]["arguments"])) for c in assistant["tool_calls"]] == [
        ("c0", {"a": 1, "b": 2}),
        ("c1", {"a": 5, "b": 6}),
    ]
    assert [(r["tool_call_id"], r["content"]) for r in results] == [("c0", "3"), ("c1", "11")]


# --- structured output the model gets wrong ---------------------------------------------


@STREAMS
async def test_response_format_output_that_is_no_json_or_fails_the_schema_is_retried(
    stream: bool,
) -> None:
    script = ["Sure! Here it is.", '{"name": "Oslo"}', '{"name": "Oslo", "population": 700000}']
    async with OpenAICompatServer(script) as server:
        agent = Agent("a", model_for(server, stream=stream), output_type=City, output_retries=2)
        result = await agent.run("a city")
    assert result.status is RunStatus.COMPLETED
    assert result.output == City(name="Oslo", population=700000)
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    no_json, wrong = last_two(server.requests[1])[1], last_two(server.requests[2])[1]
    assert no_json["role"] == "user" and "Invalid JSON" in no_json["content"]
    assert "population" in wrong["content"] and "Field required" in wrong["content"]


@STREAMS
async def test_response_format_output_wrong_past_output_retries_fails_the_run(
    stream: bool,
) -> None:
    async with OpenAICompatServer(['{"name": "Oslo"}'] * 2) as server:
        agent = Agent("a", model_for(server, stream=stream), output_type=City)
        result = await agent.run("a city")
    assert result.status is RunStatus.FAILED and len(server.requests) == 2  # output_retries=1
    assert "not valid City output" in (result.error or "")


@STREAMS
async def test_json_cut_at_the_token_limit_is_asked_again_shorter(stream: bool) -> None:
    cut = ModelResponse(text='{"name": "Os', finish_reason="length")
    async with OpenAICompatServer([cut, '{"name": "Oslo", "population": 1}']) as server:
        result = await Agent("a", model_for(server, stream=stream), output_type=City).run("go")
    assert result.status is RunStatus.COMPLETED and result.output == City(name="Oslo", population=1)
    assert "cut off at the output token limit" in last_two(server.requests[1])[1]["content"]


@STREAMS
async def test_an_output_tool_call_with_unreadable_arguments_is_an_output_retry(
    stream: bool,
) -> None:
    bad = ModelResponse(tool_calls=[ToolCall(id="o1", name="final_result", args='{"name": ')])
    script = [bad, tool_call("final_result", name="Oslo", population=1), bad, bad]
    async with OpenAICompatServer(script) as server:
        agent = Agent("a", model_for(server, stream=stream), output_type=City | str)
        corrected = await agent.run("go")
        told = last_two(server.requests[1])[1]
        failed = await agent.run("again")
    assert "response_format" not in server.requests[0]  # output tools, not response_format
    assert corrected.output == City(name="Oslo", population=1)
    assert told["role"] == "tool" and told["tool_call_id"] == "o1"
    assert "not valid JSON" in told["content"] and "try again" in told["content"]
    assert failed.status is RunStatus.FAILED and "final_result" in (failed.error or "")


# --- usage from the stream's usage chunk ------------------------------------------------


async def test_usage_is_read_from_the_streams_usage_chunk_and_limits_stop_on_it() -> None:
    # the scripted counts are not the server's word counts: only the usage chunk says them
    first = tool_call("add", a=1, b=2)
    first.usage = Usage(input_tokens=300, output_tokens=20)
    second = reply("3")
    second.usage = Usage(input_tokens=330, output_tokens=5)
    async with OpenAICompatServer([first, second, first, second]) as server:
        agent = Agent("a", model_for(server), tools=[add])
        whole = await agent.run("go")
        limited = await Agent(
            "b", model_for(server), tools=[add], limits=RunLimits(max_input_tokens=400)
        ).run("go")
    assert server.requests[0]["stream_options"] == {"include_usage": True}
    assert whole.status is RunStatus.COMPLETED
    assert (whole.usage["input_tokens"], whole.usage["output_tokens"]) == (630, 25)
    assert limited.status is RunStatus.LIMIT_EXCEEDED and "max_input_tokens" in (
        limited.error or ""
    )
    assert limited.usage["input_tokens"] == 630  # the call that went past it is counted


@STREAMS
async def test_a_runs_cost_is_priced_offline_from_litellms_local_cost_map(stream: bool) -> None:
    # LITELLM_LOCAL_MODEL_COST_MAP=True: the price map installed with litellm, no network.
    # A model it prices: each response's Usage.cost, and their sum in RunResult.usage["cost"]
    # (what RunUsage.cost counts up the run tree). A model it does not price: each response's
    # cost is None (unknown), and the run's sum of no prices is 0.0 (RunUsage has no
    # "unknown"; pinned, see the docs).
    import litellm  # the package the model uses, loaded by it already

    first = tool_call("add", a=1, b=2)
    first.usage = Usage(input_tokens=1000, output_tokens=200)
    second = reply("3")
    second.usage = Usage(input_tokens=1100, output_tokens=10)
    price = litellm.model_cost["gpt-4o-mini"]
    expected = 2100 * price["input_cost_per_token"] + 210 * price["output_cost_per_token"]
    costs: dict[str, list[float | None]] = {}

    class Seen(Middleware):
        def __init__(self, name: str) -> None:
            self.name = name

        async def model(self, request: Any, ctx: Any, call_next: Any) -> Any:
            response = await call_next(request)
            costs.setdefault(self.name, []).append(response.usage.cost)
            return response

    async with OpenAICompatServer([first, second, first, second]) as server:
        priced = await Agent(
            "a",
            LiteLLMModel(
                "openai/gpt-4o-mini",
                api_base=server.base_url,
                api_key="sk-test",
                max_retries=0,
                stream=stream,
            ),
            tools=[add],
            middleware=[Seen("priced")],
        ).run("go")
        unpriced = await Agent(
            "b", model_for(server, stream=stream), tools=[add], middleware=[Seen("unpriced")]
        ).run("go")
    assert priced.status is RunStatus.COMPLETED and unpriced.status is RunStatus.COMPLETED
    assert priced.usage["cost"] == pytest.approx(expected) and expected > 0
    assert sum(c or 0.0 for c in costs["priced"]) == pytest.approx(expected)
    assert costs["unpriced"] == [None, None] and unpriced.usage["cost"] == 0.0


# --- a connection that breaks, a run cancelled mid-stream -------------------------------


async def test_a_connection_reset_in_the_middle_of_a_calls_arguments_runs_no_tool() -> None:
    ran: list[int] = []

    @tool
    def record(n: int) -> str:
        """Record a number."""
        ran.append(n)
        return "ok"

    cut = Fault(cut_after=700, then=tool_call("record", n=123456789, note="x" * 400))
    async with OpenAICompatServer([cut]) as server:
        result = await Agent("a", model_for(server), tools=[record]).run("go")
    assert result.status is RunStatus.FAILED
    assert "ModelConnectionError" in (result.error or "") and "mid-answer" in (result.error or "")
    assert ran == []


async def test_a_run_cancelled_mid_stream_closes_its_request_and_leaves_no_task() -> None:
    stalls = Fault(stall_after=3, delay_s=60, then=tool_call("add", a=1, b=2))
    before = asyncio.all_tasks()
    waiter = EventWaiter()
    async with (
        OpenAICompatServer([stalls]) as server,
        Runtime(testing=True, sinks=[waiter]) as rt,
    ):
        handle = await rt.start(Agent("a", model_for(server), tools=[add]), "go")
        await waiter.event("model.delta", run_id=handle.run_id)  # a call's first fragment
        await handle.cancel(immediate=True)
        async with asyncio.timeout(60):  # a hang guard, not a measurement
            result = await handle.result()
            await server.wait_for_disconnects(1)
        types = [e.type for e in waiter.events if e.run_id == handle.run_id]
    assert result.status is RunStatus.CANCELLED and result.usage["tool_calls"] == 0
    assert "tool.started" not in types and types[-1] == "run.cancelled"
    assert server.disconnected == [1]
    left = asyncio.all_tasks() - before - {asyncio.current_task()}
    assert left == set(), left


@pytest.mark.parametrize(
    ("code", "error_type", "requests"),
    [
        (502, ModelServerError, 2),
        ("server_error", ModelServerError, 2),
        (400, ModelRequestRejected, 1),
    ],
)
async def test_a_200_whose_body_is_an_error_says_so_not_an_http_status(
    code: int | str, error_type: type[ModelError], requests: int
) -> None:
    # OpenRouter answers some failures with a 200 and {"error": {...}}: litellm labels it
    # with the error's code as an HTTP status ("failed with HTTP 502"), and a word there
    # ("server_error") was an untyped ModelError, not retried
    fault = Fault(error_after=0, error=ErrorReply(status=code, message="upstream said no"))  # type: ignore[arg-type]
    async with OpenAICompatServer([fault, fault]) as server:
        with pytest.raises(ModelError) as caught:
            await model_for(server, max_retries=1).request(ask())
    error = caught.value
    assert type(error) is error_type, error
    assert "sent an error in a 200 answer's body" in str(error) and "HTTP" not in str(error)
    assert "upstream said no" in str(error) and error.status is None
    assert len(server.requests) == requests


@pytest.mark.parametrize(
    "error",
    [
        {"message": "upstream said no", "type": "server_error"},
        {"message": "upstream said no"},
        {"message": "upstream said no", "code": None},
    ],
    ids=["no-code", "message-only", "code-null"],
)
async def test_a_200_whose_body_is_an_error_without_a_code_is_a_retried_server_error(
    error: dict[str, Any],
) -> None:
    # without a "code", litellm raised the body's error with its own status 422: it reached
    # the user as "(code 422)", a request the server refused, and was not retried; with
    # "code": null it was a retried server error. No code is no code, either way.
    body = {"error": error}
    async with OpenAICompatServer([body, "recovered"]) as server:
        response = await model_for(server, max_retries=1).request(ask())
    assert response.text == "recovered" and len(server.requests) == 2
    async with OpenAICompatServer([body, body]) as server:
        with pytest.raises(ModelServerError) as caught:
            await model_for(server, max_retries=1).request(ask())
    said = str(caught.value)
    assert "sent an error in a 200 answer's body" in said and "upstream said no" in said
    assert "422" not in said and "code" not in said.split("upstream said no", 1)[1]
    assert caught.value.status is None and caught.value.retryable
    assert len(server.requests) == 2


@STREAMS
async def test_of_parallel_calls_only_the_unreadable_one_is_sent_back(stream: bool) -> None:
    ran: list[tuple[int, int]] = []

    @tool
    def plus(a: int, b: int) -> int:
        """Add two integers."""
        ran.append((a, b))
        return a + b

    both = ModelResponse(
        tool_calls=[
            ToolCall(id="ok", name="plus", args='{"a": 1, "b": 2}'),
            ToolCall(id="bad", name="plus", args='{"a": 3, "b": }'),
        ]
    )
    async with OpenAICompatServer([both, "done"]) as server:
        result = await Agent("a", model_for(server, stream=stream), tools=[plus]).run("go")
    assert result.status is RunStatus.COMPLETED and ran == [(1, 2)]
    results = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"][-2:]}
    assert results["ok"] == "3" and "not valid JSON" in results["bad"]


async def _failure(server: OpenAICompatServer, *, stream: bool) -> ModelError:
    model = model_for(server, max_retries=1)
    with pytest.raises(ModelError) as caught:
        if stream:
            [chunk async for chunk in model.stream(ask())]
        else:
            await model.request(ask())
    return caught.value


@pytest.mark.parametrize(
    ("error", "error_type", "requests"),
    [
        ({"message": "upstream said no", "code": 502}, ModelServerError, 2),
        ({"message": "upstream said no"}, ModelServerError, 2),
        ({"message": "upstream said no", "code": None}, ModelServerError, 2),
        ({"message": "upstream said no", "code": "server_error"}, ModelServerError, 2),
        ({"message": "upstream said no", "code": 400}, ModelRequestRejected, 1),
        ({"message": "upstream said no", "code": 429}, ModelRateLimitError, 2),
    ],
    ids=["502", "no-code", "code-null", "code-word", "400", "429"],
)
async def test_a_streamed_request_answered_with_one_error_body_fails_as_a_whole_one_does(
    error: dict[str, Any], error_type: type[ModelError], requests: int
) -> None:
    """Found: a 200 whose body is ``{"error": ...}`` (OpenRouter's way) to a streamed request
    was "one JSON body, not server-sent events; the server does not stream, pass
    stream=False", not retried, the provider's message lost; asked for a whole answer, the
    same body is the provider's error, typed by its code. It is now the same error."""
    body = {"error": error}
    async with OpenAICompatServer([body] * 4) as server:
        streamed = await _failure(server, stream=True)
        assert len(server.requests) == requests
        whole = await _failure(server, stream=False)
    assert type(streamed) is type(whole) is error_type, streamed
    assert str(streamed) == str(whole)
    assert "upstream said no" in str(streamed) and "does not stream" not in str(streamed)
    assert streamed.status is None and streamed.retryable == (requests == 2)


async def test_a_stream_whose_first_answer_was_an_error_body_is_retried() -> None:
    body = {"error": {"message": "upstream busy", "code": 503}}
    async with OpenAICompatServer([body, "recovered"]) as server:
        pieces = [chunk async for chunk in model_for(server, max_retries=1).stream(ask())]
    assert pieces[-1].response is not None and pieces[-1].response.text == "recovered"
    assert len(server.requests) == 2


class _JsonBodyStream:
    """A stream as litellm hands one over whose body is one JSON document (the OpenAI SDK's
    stream, its ``httpx`` response not read yet), whose read fails with ``error``."""

    def __init__(self, error: BaseException) -> None:
        self._hidden_params = {
            "additional_headers": {"llm_provider-content-type": "application/json"}
        }
        self.error = error
        self.closed = 0

        async def aread() -> bytes:
            raise self.error

        response = type("Response", (), {"aread": staticmethod(aread)})()
        self.completion_stream = type("Stream", (), {"response": response})()

    async def aclose(self) -> None:
        self.closed += 1


@pytest.mark.parametrize(
    "error",
    [TimeoutError(), asyncio.CancelledError(), OSError("connection reset")],
    ids=["timeout", "cancelled", "read-error"],
)
async def test_a_stream_whose_error_body_cannot_be_read_is_closed(error: BaseException) -> None:
    """Found at review: the read of a one-JSON-body stream ran before the stream's reading,
    outside its ``aclose`` on failure: a read that timed out (retried: once per attempt), was
    cancelled (the console's Cancel is immediate) or broke left the connection open."""
    from tinyagents.harness.litellm_model import _open_stream

    stream = _JsonBodyStream(error)

    class _Litellm:
        @staticmethod
        async def acompletion(**kwargs: Any) -> _JsonBodyStream:
            return stream

    with pytest.raises(type(error)):
        await _open_stream(_Litellm(), {}, "openai/m", None, timeout_s=5)
    assert stream.closed == 1
