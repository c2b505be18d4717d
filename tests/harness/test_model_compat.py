"""Any OpenAI-compatible server: the agent loop over litellm's real HTTP path passes against
the testkit server in its default mode and in modes as strict as llama.cpp, vLLM and OpenAI.

The strict modes are tested too (a mode that refused nothing would make the matrix pass for
nothing), including the exact request litellm built before the fix: an assistant message
that only calls tools went out without ``content``, which llama.cpp's templates cannot render.
"""

from __future__ import annotations

import asyncio
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

from typing import Any

import pytest

from tinyagents import Agent, LiteLLMModel, RunStatus, Runtime, tool
from tinyagents.errors import ModelRequestRejected, ModelServerError
from tinyagents.harness import Message, ModelRequest, ModelResponse, ToolCall
from tinyagents.harness.litellm_model import _messages_to_openai
from tinyagents.testkit import Gate, OpenAICompatServer, reply, tool_call, tool_calls
from tinyagents.testkit.server_rules import llama_cpp_violation, vllm_violation

MODES = ["default", "llama.cpp", "vllm", "openai"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def model_for(server: OpenAICompatServer, **kw: Any) -> LiteLLMModel:
    # No retries: a refusal must show up as the first error, not be retried away.
    kw.setdefault("max_retries", 0)
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", **kw)


@pytest.mark.parametrize("mode", MODES)
async def test_a_steered_tool_loop_passes_against_every_server_mode(mode: str) -> None:
    gate = Gate("lookup")
    script = [
        tool_calls(tool_call("add", a=2, b=3), tool_call("add", a=1, b=1)),  # parallel calls
        tool_call("lookup", id="call-lookup"),
        reply("2 + 3 = 5"),
    ]
    async with (
        OpenAICompatServer(script, mode=mode) as server,  # type: ignore[arg-type]
        Runtime(testing=True) as rt,
    ):
        agent = Agent("calc", model_for(server), instructions="You add.", tools=[add, gate.tool()])
        handle = await rt.start(agent, "2+3?")
        # Lands before the first model call: the task and the steering are two user messages.
        await handle.steer("show your work")
        # A refused request ends the run before the gate: wait for whichever comes first.
        entered = asyncio.ensure_future(gate.entered.wait())
        ended = asyncio.ensure_future(handle.result())
        await asyncio.wait([entered, ended], return_when=asyncio.FIRST_COMPLETED)
        entered.cancel()
        assert server.refusals == []
        assert gate.entered.is_set(), ended.result()
        # Lands after the tool result: tool message, then a user message.
        await handle.steer("answer in one line")
        gate.open()
        result = await ended

    assert server.refusals == []
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == "2 + 3 = 5"
    first, second, third = (body["messages"] for body in server.requests)
    assert [m["role"] for m in first] == ["system", "user"]
    assert "2+3?" in first[1]["content"] and "show your work" in first[1]["content"]
    assistant = second[2]
    assert assistant["content"] == "" and len(assistant["tool_calls"]) == 2
    assert [m["role"] for m in third[-3:]] == ["assistant", "tool", "user"]
    assert "answer in one line" in third[-1]["content"]


@pytest.mark.parametrize("mode", MODES)
async def test_streaming_passes_against_every_server_mode(mode: str) -> None:
    async with OpenAICompatServer(["one two"], mode=mode) as server:  # type: ignore[arg-type]
        model = model_for(server)
        chunks = [c async for c in model.stream(_request([Message(role="user", content="hi")]))]

    assert server.refusals == []
    assert chunks[-1].response is not None and chunks[-1].response.text == "one two"


def _request(messages: list[Message]) -> ModelRequest:
    return ModelRequest(messages=messages, tools=[add.spec()])


async def test_a_missing_content_is_what_llama_cpp_refused() -> None:
    """The request litellm sent before the fix (content None is dropped) is a 500 there."""
    import litellm

    messages = [
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]
    async with OpenAICompatServer(["5"], mode="llama.cpp") as server:
        with pytest.raises(litellm.InternalServerError, match="'content' is undefined"):
            await litellm.acompletion(
                model="openai/test-model",
                messages=messages,
                api_base=server.base_url,
                api_key="sk-test",
                max_retries=0,
            )

    assert "content" not in server.requests[0]["messages"][1]  # litellm dropped the None
    assert server.refusals and "message 1 (assistant)" in server.refusals[0]


async def test_a_llama_cpp_refusal_reaches_the_caller_as_a_server_error() -> None:
    async with OpenAICompatServer(["never"], mode="llama.cpp") as server:
        model = model_for(server)
        # a system message in the middle: Mistral-style templates raise on it
        messages = [
            Message(role="user", content="hi"),
            Message(role="assistant", content="hello"),
            Message(role="system", content="late"),
        ]
        with pytest.raises(ModelServerError, match=r"\[llama.cpp-strict\].*only allowed first"):
            await model.request(_request(messages))


async def test_a_setting_vllm_does_not_know_is_refused_with_400_and_not_retried() -> None:
    async with OpenAICompatServer(["never"], mode="vllm") as server:
        model = model_for(server, max_retries=3, frobnicate=True)
        with pytest.raises(ModelRequestRejected, match="frobnicate: Extra inputs") as caught:
            await model.request(_request([Message(role="user", content="hi")]))

    assert caught.value.status == 400
    assert len(server.requests) == 1


def _call(call_id: str, name: str = "add") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


TOOL_SPEC = {
    "type": "function",
    "function": {"name": "add", "description": "Add.", "parameters": {"type": "object"}},
}
ASKED = {"role": "user", "content": "2+3?"}
CALLED = {"role": "assistant", "content": "", "tool_calls": [_call("c1")]}
ANSWERED = {"role": "tool", "tool_call_id": "c1", "content": "5"}

LLAMA_CPP_REFUSES = {
    "no content next to tool calls": [ASKED, {"role": "assistant", "tool_calls": [_call("c1")]}],
    "null content": [ASKED, {**CALLED, "content": None}, ANSWERED],
    "content parts": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "two user messages in a row": [ASKED, {"role": "user", "content": "steer"}],
    "two assistant messages in a row": [
        ASKED,
        {"role": "assistant", "content": "a"},
        {"role": "assistant", "content": "b"},
    ],
    "a system message after the first": [ASKED, {"role": "system", "content": "late"}],
    "a conversation that starts with the assistant": [{"role": "assistant", "content": "hi"}],
    "a tool message without tool_call_id": [ASKED, CALLED, {"role": "tool", "content": "5"}],
    "a tool result for another call": [ASKED, CALLED, {**ANSWERED, "tool_call_id": "c9"}],
    "a tool call left unanswered": [ASKED, CALLED, {"role": "user", "content": "and?"}],
    "a tool call without type": [
        ASKED,
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {}}]},
    ],
    "an unknown role": [{"role": "developer", "content": "hi"}],
}


@pytest.mark.parametrize("case", sorted(LLAMA_CPP_REFUSES))
def test_llama_cpp_mode_refuses_what_llama_cpp_refuses(case: str) -> None:
    body = {"model": "m", "messages": LLAMA_CPP_REFUSES[case]}
    assert llama_cpp_violation(body) is not None


def test_llama_cpp_mode_refuses_a_tool_without_description_and_accepts_a_good_request() -> None:
    spec = {"type": "function", "function": {"name": "add", "parameters": {}}}
    good = {
        "model": "m",
        "messages": [{"role": "system", "content": "s"}, ASKED, CALLED, ANSWERED],
        "tools": [TOOL_SPEC],
        "tool_choice": {"type": "function", "function": {"name": "add"}},
    }
    assert llama_cpp_violation(good) is None
    assert llama_cpp_violation({**good, "tools": [spec]}) is not None
    other_tool = {"type": "function", "function": {"name": "sub"}}
    assert llama_cpp_violation({**good, "tool_choice": other_tool}) is not None


VLLM_REFUSES = {
    "an unknown field": {"frobnicate": 1},
    "a string temperature": {"temperature": "hot"},
    "a boolean max_tokens": {"max_tokens": True},
    "stream_options without stream": {"stream_options": {"include_usage": True}},
    "top_logprobs without logprobs": {"top_logprobs": 2},
    "tool_choice without tools": {"tool_choice": "required"},
    "a named tool_choice for an unknown tool": {
        "tools": [TOOL_SPEC],
        "tool_choice": {"type": "function", "function": {"name": "sub"}},
    },
    "a tool message without tool_call_id": {
        "messages": [ASKED, CALLED, {"role": "tool", "content": "5"}]
    },
    "a user message without content": {"messages": [{"role": "user"}]},
    "an unknown message field": {"messages": [{**ASKED, "metadata": {}}]},
    "an integer content": {"messages": [{"role": "user", "content": 5}]},
    "no messages": {"messages": []},
}


@pytest.mark.parametrize("case", sorted(VLLM_REFUSES))
def test_vllm_mode_refuses_what_vllm_validation_refuses(case: str) -> None:
    body = {"model": "m", "messages": [ASKED], **VLLM_REFUSES[case]}
    assert vllm_violation(body) is not None


def test_vllm_mode_accepts_what_vllm_accepts() -> None:
    body = {
        "model": "m",
        "messages": [ASKED, {"role": "assistant", "tool_calls": [_call("c1")]}, ANSWERED],
        "tools": [{"type": "function", "function": {"name": "add"}}],
        "tool_choice": "auto",
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "max_tokens": 16,
        "top_k": 5,
    }
    assert vllm_violation(body) is None


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be"):
        OpenAICompatServer(mode="ollama")  # type: ignore[arg-type]


def test_consecutive_user_messages_are_joined_and_nothing_else_is() -> None:
    call = ToolCall(id="c1", name="add", args={"a": 1, "b": 2})
    messages = [
        Message(role="system", content="s"),
        Message(role="user", content="task"),
        Message(role="user", content="steer 1"),
        Message(role="user", content="steer 2"),
        Message(role="assistant", tool_calls=[call]),
        Message(role="tool", content="3", tool_call_id="c1"),
        Message(role="user", content="steer 3"),
        Message(role="user", content="named", name="alice"),
    ]

    out = _messages_to_openai(messages)

    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "user", "user"]
    assert out[1]["content"] == "task\n\nsteer 1\n\nsteer 2"
    assert out[2]["content"] == ""
    assert out[4]["content"] == "steer 3"
    assert out[5] == {"role": "user", "content": "named", "name": "alice"}
    assert messages[1].content == "task"  # the run's own history is untouched


def open_calls(messages: list[Message]) -> list[str]:
    """The ids of tool calls in ``messages`` that no tool message answers."""
    open_ids: list[str] = []
    for m in messages:
        open_ids += [c.id for c in m.tool_calls]
        if m.role == "tool":
            open_ids = [i for i in open_ids if i != m.tool_call_id]
    return open_ids


@pytest.mark.parametrize("stop", ["max_tool_calls", "max_tokens", "cancel"])
async def test_a_run_stopped_part_way_through_its_tool_calls_answers_every_one(stop: str) -> None:
    # a limit or a cancel between a response's tool calls left the rest unanswered in the
    # transcript: a session's next turn sent it on, and strict servers refuse such a request
    from tinyagents import SubAgent
    from tinyagents.runs import RunLimits

    gate = Gate("slow")
    batch = tool_calls(tool_call("slow"), tool_call("add", a=1, b=2))
    if stop == "max_tokens":
        batch.usage.output_tokens = 10_000  # past the budget: its tools are never run
    limits = {
        "max_tool_calls": RunLimits(max_tool_calls=1),
        "max_tokens": RunLimits(max_tokens=5_000),
    }
    async with (
        OpenAICompatServer([batch, reply("next turn")], mode="llama.cpp") as server,
        Runtime(testing=True) as rt,
    ):
        agent = Agent(
            "calc", model_for(server), tools=[gate.tool("slow done"), add], limits=limits.get(stop)
        )
        session = SubAgent(agent).session(runtime=rt)
        turn = asyncio.ensure_future(session.send("go"))
        if stop == "cancel":
            await gate.entered.wait()
            await rt.runs.get(session.runs[0]).cancel("stop")
        gate.open()
        with pytest.raises(Exception, match=r"max_tool_calls|max_tokens|stop"):
            await turn
        assert open_calls(session.messages) == []
        stand_in = session.messages[-1]
        assert stand_in.role == "tool" and stand_in.content.startswith("not run: the run ended")
        assert stand_in.metadata == {"error": True}
        assert await session.send("again") == "next turn"
    assert server.refusals == []


@pytest.mark.parametrize("mode", MODES)
async def test_an_empty_answer_asked_for_again_passes_against_every_server_mode(
    mode: str,
) -> None:
    # The loop asks a model that answered nothing for an answer: the request that asks
    # (the task, then the ask, as user messages) must pass the strict servers too.
    script = [ModelResponse(text="", finish_reason="stop"), reply("ok here is text")]
    async with OpenAICompatServer(script, mode=mode) as server:  # type: ignore[arg-type]
        agent = Agent("a", model_for(server), instructions="Answer.")
        result = await agent.run("Hello")
    assert server.refusals == []
    assert (result.status, result.output) == (RunStatus.COMPLETED, "ok here is text")
    assert [m["role"] for m in server.requests[1]["messages"]] == ["system", "user"]
