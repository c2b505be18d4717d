"""How ``LiteLLMModel`` puts streamed tool calls together, over litellm's real HTTP path:
fragments sent as real servers and proxies send them (the testkit's ``RawStream``), and the
calls the run goes on with, which must be the calls the model made, each with its own
arguments, and the ``model.delta`` pieces naming the same calls."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import json
from typing import Any

import pytest

from tinyagents import Agent, LiteLLMModel, RunStatus, Runtime, tool
from tinyagents.harness import Message, ModelRequest, ModelResponse, StreamChunk, ToolCall
from tinyagents.testkit import EventRecorder, OpenAICompatServer, RawStream, reply


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return text


def model_for(server: OpenAICompatServer) -> LiteLLMModel:
    return LiteLLMModel(
        "openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0
    )


def fragment(index: int | None = 0, *, id: str | None = None, name: str | None = None,
             args: str | None = None) -> dict[str, Any]:  # fmt: skip
    """One chunk's delta with one tool-call fragment; ``index=None`` leaves the key out."""
    function = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    call: dict[str, Any] = {"function": function}
    if index is not None:
        call["index"] = index
    if id is not None:
        call.update(id=id, type="function")
    return {"tool_calls": [call]}


async def streamed(raw: RawStream) -> tuple[list[StreamChunk], ModelResponse]:
    """The pieces ``LiteLLMModel.stream`` hands out for ``raw``, and the response it ends with."""
    async with OpenAICompatServer([raw]) as server:
        chunks = [c async for c in model_for(server).stream(ModelRequest(messages=[
            Message(role="user", content="hi")], tools=[add.spec(), echo.spec()]))]  # fmt: skip
    response = chunks[-1].response
    assert response is not None
    return chunks[:-1], response


def calls(response: ModelResponse) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [(c.id, c.name, c.args if c.parse_error is None else None) for c in response.tool_calls]


def pieces_by_index(chunks: list[StreamChunk]) -> dict[int, str]:
    """Each call's arguments as the deltas told them, by the index the deltas gave it."""
    joined: dict[int, str] = {}
    for chunk in chunks:
        if chunk.tool_call_index is not None:
            joined[chunk.tool_call_index] = joined.get(chunk.tool_call_index, "") + chunk.args_delta
    return joined


# ------------------------------------------------------------ several calls at one index


ONE_INDEX = {
    # Ollama (and proxies translating the Responses API) send each call whole, all at index 0
    "whole calls": [
        fragment(id="call_1", name="add", args='{"a": 1}'),
        fragment(id="call_2", name="add", args='{"a": 2}'),
    ],
    # the same with each call's arguments in pieces after a header
    "fragmented calls": [
        fragment(id="call_1", name="add", args=""),
        fragment(args='{"a":'),
        fragment(args=" 1}"),
        fragment(id="call_2", name="echo", args=""),
        fragment(args='{"text": "x"}'),
    ],
}


@pytest.mark.parametrize("name", ONE_INDEX)
async def test_a_new_id_at_the_same_index_starts_a_new_call(name: str) -> None:
    """Merged into one call before: the last id, and both arguments run together
    (``{"a": 1}{"a": 2}``), which the run answered with an unreadable-arguments error."""
    chunks, response = await streamed(RawStream(deltas=ONE_INDEX[name]))
    second = (
        ("call_2", "add", {"a": 2}) if name == "whole calls" else ("call_2", "echo", {"text": "x"})
    )
    assert calls(response) == [("call_1", "add", {"a": 1}), second]
    # the deltas name the same two calls, so a subscriber can put them together too
    assert {i: json.loads(text) for i, text in pieces_by_index(chunks).items()} == {
        0: {"a": 1},
        1: second[2],
    }
    heads = [(c.tool_call_index, c.tool_call_id) for c in chunks if c.tool_call_id]
    assert heads == [(0, "call_1"), (1, "call_2")]


async def test_parallel_calls_at_one_index_all_run() -> None:
    replies = [RawStream(deltas=ONE_INDEX["whole calls"]), reply("3")]
    async with OpenAICompatServer(replies, mode="vllm") as server:
        result = await Agent("calc", model_for(server), tools=[add]).run("1 and 2")
    assert result.status is RunStatus.COMPLETED and result.output == "3"
    assert server.refusals == []
    assistant, *results = server.requests[1]["messages"][1:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    assert [(m["tool_call_id"], m["content"]) for m in results] == [
        ("call_1", "1"),
        ("call_2", "2"),
    ]


async def test_an_id_repeated_on_every_fragment_is_one_call() -> None:
    _, response = await streamed(RawStream(deltas=[
        fragment(id="call_1", name="add", args='{"a":'),
        fragment(id="call_1", name="add", args=" 1}"),
    ]))  # fmt: skip
    assert calls(response) == [("call_1", "add", {"a": 1})]


async def test_interleaved_calls_at_their_own_indices_are_unchanged() -> None:
    """OpenAI's own shape for parallel calls: headers, then pieces of each, by index."""
    chunks, response = await streamed(RawStream(deltas=[
        fragment(0, id="call_1", name="add", args=""),
        fragment(1, id="call_2", name="echo", args=""),
        fragment(1, args='{"text":'),
        fragment(0, args='{"a": 5}'),
        fragment(1, args=' "y"}'),
    ]))  # fmt: skip
    assert calls(response) == [("call_1", "add", {"a": 5}), ("call_2", "echo", {"text": "y"})]
    assert pieces_by_index(chunks) == {0: '{"a": 5}', 1: '{"text": "y"}'}


# ------------------------------------------------------------ fragments without an index


@pytest.mark.parametrize("null", [False, True], ids=["left out", "null"])
async def test_fragments_without_an_index_continue_the_latest_call(null: bool) -> None:
    """No ``index`` (older Ollama): litellm numbers a chunk's fragments by their position,
    so every fragment here is at 0, and a new id starts a new call there, which is what
    pydantic-ai does with an index-less fragment (the latest call, or a new one). (The
    OpenAI SDK's own stream helper raises a ``TypeError`` on such a fragment.)"""
    deltas = [
        fragment(None, id="call_1", name="add", args='{"a":'),
        fragment(None, args=" 1}"),
        fragment(None, id="call_2", name="add", args=""),
        fragment(None, args='{"a": 2}'),
    ]
    if null:
        for delta in deltas:
            delta["tool_calls"][0]["index"] = None
    _, response = await streamed(RawStream(deltas=deltas))
    assert calls(response) == [("call_1", "add", {"a": 1}), ("call_2", "add", {"a": 2})]


async def test_fragments_in_one_chunk_without_an_index_are_told_apart_by_position() -> None:
    """As litellm's own chunk builder (and its ``Delta``) does."""
    both = {"tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
        {"id": "call_2", "type": "function", "function": {"name": "echo", "arguments": '{"text": "z"}'}},
    ]}  # fmt: skip
    _, response = await streamed(RawStream(deltas=[both]))
    assert calls(response) == [("call_1", "add", {"a": 1}), ("call_2", "echo", {"text": "z"})]


async def test_calls_without_ids_are_told_apart_by_a_name_after_whole_arguments() -> None:
    """A server that sends neither ids nor distinct indices: a name arriving once the call
    before it has whole JSON arguments starts a new call. A name repeated while the arguments
    are still coming is the same call (pydantic-ai's parts manager, given a repeated name
    without an index, would split there; its own test says not to send one)."""
    _, response = await streamed(RawStream(deltas=[
        fragment(None, name="add", args='{"a":'),
        fragment(None, name="add", args=" 1}"),
        fragment(None, name="echo", args='{"text":'),
        fragment(None, args=' "w"}'),
    ]))  # fmt: skip
    assert calls(response) == [("call_0", "add", {"a": 1}), ("call_1", "echo", {"text": "w"})]


# ------------------------------------------------------------ one call, sent oddly


async def test_an_id_in_the_first_fragment_and_the_name_in_a_later_one_is_one_call() -> None:
    _, response = await streamed(RawStream(deltas=[
        fragment(id="call_1", args=""),
        fragment(name="add"),
        fragment(args='{"a": 4}'),
    ]))  # fmt: skip
    assert calls(response) == [("call_1", "add", {"a": 4})]


async def test_a_name_first_and_the_id_later_is_one_call() -> None:
    _, response = await streamed(RawStream(deltas=[
        fragment(name="add", args='{"a":'),
        fragment(id="call_9", args=" 4}"),
    ]))  # fmt: skip
    assert calls(response) == [("call_9", "add", {"a": 4})]


@pytest.mark.parametrize("args", ["", None], ids=["empty", "missing"])
async def test_a_call_without_arguments_gets_an_empty_object(args: str | None) -> None:
    _, response = await streamed(RawStream(deltas=[fragment(id="call_1", name="echo", args=args)]))
    assert calls(response) == [("call_1", "echo", {})]


async def test_arguments_split_inside_a_character_and_inside_json_are_joined() -> None:
    """Pieces cut inside a JSON string, inside an escape, and (one byte at a time on the
    wire, so the 4-byte 😀 is cut) inside a UTF-8 character."""
    deltas = [
        fragment(id="call_1", name="echo", args='{"te'),
        fragment(args='xt": "h\\u00'),
        fragment(args="e9 €"),
        fragment(args=' 😀"}'),
    ]
    chunks, response = await streamed(RawStream(deltas=deltas, piece_bytes=3))
    assert calls(response) == [("call_1", "echo", {"text": "hé € 😀"})]
    assert pieces_by_index(chunks) == {0: '{"text": "h\\u00e9 € 😀"}'}


async def test_unreadable_streamed_arguments_are_an_error_result_the_model_can_correct() -> None:
    """Arguments that are not JSON once the stream ends: the tool is not run, the model is
    told why (quoting what it sent) and the run goes on."""
    replies = [RawStream(deltas=[fragment(id="call_1", name="add", args='{"a": 1')]), reply("oops")]
    async with OpenAICompatServer(replies, mode="llama.cpp") as server:
        result = await Agent("calc", model_for(server), tools=[add]).run("1?")
    assert result.status is RunStatus.COMPLETED and result.output == "oops"
    assert server.refusals == []
    assistant, answer = server.requests[1]["messages"][1:3]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    assert answer["tool_call_id"] == "call_1"
    assert "could not read the arguments for tool 'add'" in answer["content"]
    assert "'{\"a\": 1'" in answer["content"]


def test_a_long_call_whose_name_comes_with_every_fragment_is_read_once_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a server that repeats the name on every fragment and sends no ids: the arguments so far
    # were joined and parsed at each fragment (quadratic: 400 KB in 20-byte pieces held the
    # event loop for seconds); they are read only when they may be whole
    from types import SimpleNamespace

    from tinyagents.harness import litellm_stream

    parsed: list[str] = []
    real = litellm_stream._whole_json
    monkeypatch.setattr(
        litellm_stream, "_whole_json", lambda text: parsed.append(text) or real(text)
    )

    def chunk(arguments: str) -> Any:
        function = SimpleNamespace(name="echo", arguments=arguments)
        call = SimpleNamespace(index=None, id=None, function=function)
        return SimpleNamespace(choices=[SimpleNamespace(delta=SimpleNamespace(tool_calls=[call]))])

    text = "x" * 20_000
    body = json.dumps({"text": text, "nested": {"a": 1}})
    fragments = litellm_stream.ToolCallFragments()
    for start in range(0, len(body), 20):
        fragments.see(chunk(body[start : start + 20]))
    fragments.see(chunk('{"text": "second"}'))  # the same name once the first is whole
    assert len(fragments.calls) == 2
    assert json.loads("".join(fragments.calls[0].parts)) == {"text": text, "nested": {"a": 1}}
    assert "".join(fragments.calls[1].parts) == '{"text": "second"}'
    # read where a fragment ended on "}" only: the nested object's end and the whole
    assert len(parsed) <= 2


#: Arguments nested deeper than Python's JSON reader can go (a model looping on "[").
TOO_DEEP = '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"


async def test_arguments_nested_too_deep_to_read_are_an_error_result_the_model_can_correct() -> (
    None
):
    # json.loads raises RecursionError for them, no JSONDecodeError: it went through the
    # arguments' reader and failed the run ("RecursionError: maximum recursion depth
    # exceeded"), where arguments that cannot be read are the model's to correct
    from tinyagents.testkit import FunctionModel

    def calls_deep(request: ModelRequest) -> ModelResponse:
        if len(request.messages) > 1:
            return reply("oops")
        return ModelResponse(tool_calls=[ToolCall(id="c1", name="add", args=TOO_DEEP)])  # type: ignore[arg-type]

    model = FunctionModel(calls_deep)
    result = await Agent("calc", model, tools=[add]).run("1?")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "oops")
    [answer] = [m for m in model.requests[1].messages if m.role == "tool"]
    assert "could not read the arguments for tool 'add'" in answer.content
    assert "nested too deep" in answer.content


def test_a_streamed_call_nested_too_deep_is_not_whole_json() -> None:
    from tinyagents.harness.litellm_stream import _whole_json

    assert _whole_json(TOO_DEEP) is False  # raised RecursionError, failing the stream


@pytest.mark.parametrize("stream", [False, True])
async def test_a_legacy_function_call_is_the_models_tool_call(stream: bool) -> None:
    """A server that answers in OpenAI's older function-calling form (``message.function_call``,
    ``delta.function_call``: one call, no id) had its call dropped, whole or streamed: the run
    ended with an empty answer. It is the response's one tool call, and its streamed pieces
    are that call's ``model.delta`` pieces (the call's id on its first)."""
    legacy: Any
    if stream:
        legacy = RawStream(
            deltas=[
                {"function_call": {"name": "add", "arguments": ""}},
                {"function_call": {"arguments": '{"a": 1, '}},
                {"function_call": {"arguments": '"b": 2}'}},
            ],
            finish_reason="function_call",
        )
    else:
        legacy = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "test-model",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                    },
                    "finish_reason": "function_call",
                }
            ],
        }
    recorder = EventRecorder()
    async with OpenAICompatServer([legacy, reply("3")]) as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", stream=stream
        )
        async with Runtime(sinks=[recorder]) as rt:
            result = await (await rt.start(Agent("a", model, tools=[add]), "1+2?")).result()

    assert result.status is RunStatus.COMPLETED and result.output == "3"
    sent = server.requests[1]["messages"]
    (call,) = sent[-2]["tool_calls"]
    assert call["function"]["name"] == "add" and call["id"]
    assert json.loads(call["function"]["arguments"]) == {"a": 1, "b": 2}
    assert (sent[-1]["role"], sent[-1]["tool_call_id"], sent[-1]["content"]) == (
        "tool",
        call["id"],
        "3",
    )
    pieces = [e for e in recorder.of_type("model.delta") if e.tool_call_index is not None]
    if stream:
        assert [p.tool_name for p in pieces if p.tool_name] == ["add"]
        assert pieces[0].tool_call_id == call["id"]
        assert json.loads("".join(p.args_delta for p in pieces)) == {"a": 1, "b": 2}
    else:
        assert pieces == []
