"""The testkit's ``ScriptedModel`` in streaming mode: a scripted response handed out in the
pieces a provider streams (text word by word, tool calls id and name first, then their JSON
arguments in pieces), then the whole response."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyagents.errors import ConfigurationError
from tinyagents.harness import Message, ModelRequest, ModelResponse, StreamChunk, ToolCall
from tinyagents.testkit import FunctionModel, ScriptedModel, reply, tool_call
from tinyagents.testkit.models import stream_text


def request() -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content="go")])


async def chunks_of(model: ScriptedModel) -> list[StreamChunk]:
    return [chunk async for chunk in model.stream(request())]


async def test_text_streams_word_by_word_then_the_whole_response():
    model = ScriptedModel([reply("the invoice was charged twice")], stream=True)
    chunks = await chunks_of(model)

    assert [c.text_delta for c in chunks[:-1]] == ["the ", "invoice ", "was ", "charged ", "twice"]
    assert all(c.response is None for c in chunks[:-1])
    last = chunks[-1]
    assert last.text_delta == "" and last.response is not None
    assert last.response.text == "the invoice was charged twice"
    assert len(model.requests) == 1  # one request, however many chunks


async def test_tool_calls_stream_their_arguments_in_pieces():
    response = ModelResponse(
        text="checking",
        tool_calls=[
            ToolCall(id="c-1", name="search", args={"query": "billing refunds", "limit": 5}),
            ToolCall(id="c-2", name="fetch", args={}),
        ],
    )
    model = ScriptedModel([response], stream=True, args_piece=4)
    chunks = await chunks_of(model)

    calls = [c for c in chunks if c.tool_call_index is not None]
    firsts = [c for c in calls if c.tool_call_id is not None]
    assert [(c.tool_call_index, c.tool_call_id, c.tool_name) for c in firsts] == [
        (0, "c-1", "search"),
        (1, "c-2", "fetch"),
    ]
    for index, call in enumerate(response.tool_calls):
        pieces = [c.args_delta for c in calls if c.tool_call_index == index]
        assert json.loads("".join(pieces)) == call.args
        assert all(len(p) <= 4 for p in pieces)
    assert chunks[-1].response is not None
    assert [c.name for c in chunks[-1].response.tool_calls] == ["search", "fetch"]


async def test_without_stream_mode_the_response_is_one_chunk():
    model = ScriptedModel([tool_call("search", query="x")])
    (chunk,) = await chunks_of(model)
    assert chunk.response is not None and chunk.response.tool_calls[0].args == {"query": "x"}


async def test_a_streamed_request_is_recorded_and_counted_like_any_other():
    model = ScriptedModel([reply("one two")], stream=True)
    chunks = await chunks_of(model)
    assert chunks[-1].response is not None
    assert chunks[-1].response.usage.output_tokens == 2  # the testkit's one token per word


@pytest.mark.parametrize("args_piece", [0, "8", 2.5, True])
def test_args_piece_must_be_a_positive_whole_number(args_piece: object):
    # "8" raised TypeError ('<' not supported), 2.5 failed the first streamed tool call
    # (slice indices must be integers), True was a piece of one character
    with pytest.raises(ConfigurationError, match="args_piece must be a whole number of at least 1"):
        ScriptedModel([], stream=True, args_piece=args_piece)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="args_piece must be a whole number of at least 1"):
        FunctionModel(lambda request: "x", stream=True, args_piece=args_piece)  # type: ignore[arg-type]


@given(st.text())
def test_stream_text_pieces_join_back_to_the_text(text: str):
    pieces = stream_text(text)
    assert "".join(pieces) == text
    assert all(pieces)
