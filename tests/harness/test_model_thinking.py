"""A reasoning model's thinking is kept apart from its answer, through real HTTP.

Local reasoning models (DeepSeek-R1, Qwen3 via vLLM, Ollama, llama.cpp) start their content
with ``<think>…</think>``; DeepSeek's API and the servers' reasoning parsers send
``reasoning_content`` instead. Either way the answer (text or structured output) is what
follows, the thinking is in ``ModelResponse.thinking``, ``model.delta`` events' ``thinking``
and the transcript's ``Message.thinking``, and it is not sent back to the model.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from tinyagents import Agent, LiteLLMModel, RunStatus, Runtime
from tinyagents.events import ModelDeltaEvent
from tinyagents.harness import Message, ModelRequest, ModelResponse, Usage
from tinyagents.harness.thinking import ThinkTagSplitter, split_thinking
from tinyagents.testkit import (
    EventRecorder,
    FunctionModel,
    OpenAICompatServer,
    RawStream,
    ScriptedModel,
)


class City(BaseModel):
    city: str


def model_for(server: OpenAICompatServer, **kw: Any) -> LiteLLMModel:
    kw.setdefault("max_retries", 0)
    kw.setdefault("retry_backoff_s", 0)
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", **kw)


def completion(content: str | None, usage: tuple[int, int] = (10, 20), **extra: Any) -> dict:
    """A whole chat completion as a server sends it (``extra``: more fields of its message)."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **extra},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        },
    }


def streamed(*pieces: str) -> RawStream:
    """A stream sending ``pieces`` of content, one a chunk."""
    return RawStream(deltas=[{"content": piece} for piece in pieces], finish_reason="stop")


async def run(agent: Agent, task: str = "where?") -> tuple[Any, list[ModelDeltaEvent]]:
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await (await rt.start(agent, task)).result()
    return result, list(recorder.of_type("model.delta"))  # type: ignore[arg-type]


# --- <think> tags -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_think_block_is_not_the_structured_output_and_costs_no_retry(
    stream: bool,
) -> None:
    content = '<think>\nThe user wants a city.\n</think>\n\n{"city": "Paris"}'
    script = [streamed(*re.split("(?<= )", content)) if stream else completion(content)]
    async with OpenAICompatServer(script) as server:
        agent = Agent("a", model_for(server, stream=stream), output_type=City)
        result, _ = await run(agent)

    assert result.status == RunStatus.COMPLETED and result.output == City(city="Paris")
    assert len(server.requests) == 1  # parsed the first time: no retry asked for
    answer = result.messages[-1]
    assert answer.content == '{"city": "Paris"}'
    assert answer.thinking == "The user wants a city."


async def test_think_tags_cut_across_chunks_stream_as_thinking_then_text() -> None:
    # the tags arrive in pieces, as a tokenizer cuts them
    pieces = ["<th", "ink>\nLet me", " see.</th", "ink", ">\n\n", "Paris", " it is", "."]
    async with OpenAICompatServer([streamed(*pieces)]) as server:
        result, deltas = await run(Agent("a", model_for(server)))

    assert result.output == "Paris it is."
    assert "".join(d.text for d in deltas) == "Paris it is."
    assert "".join(d.thinking for d in deltas).strip() == "Let me see."
    assert not any("<" in d.text or "<" in d.thinking for d in deltas)
    # the text streams as it comes once the thinking is over: piece by piece
    assert [d.text for d in deltas if d.text] == ["Paris", " it is", "."]
    assert result.messages[-1].thinking == "Let me see."


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tag_later_in_the_answer_is_text(stream: bool) -> None:
    content = "Wrap it in <think>tags</think> like this."
    script = [streamed(*re.split("(?<= )", content)) if stream else completion(content)]
    async with OpenAICompatServer(script) as server:
        result, _ = await run(Agent("a", model_for(server, stream=stream)))

    assert result.output == content and result.messages[-1].thinking == ""


async def test_an_empty_think_block_before_a_tool_call_is_no_final_answer() -> None:
    """Port of pydantic-ai tests/models/test_openai.py::
    test_stream_text_empty_think_tag_and_text_before_tool_call: Ollama + Qwen3 send
    ``<think>\\n</think>\\n\\n`` ahead of tool calls; with ``str`` among the output types it
    must not end the run as a text answer: the output is the tool call's."""
    deltas: list[dict[str, Any]] = [
        {"content": "<think>"},
        {"content": "\n"},
        {"content": "</think>"},
        {"content": "\n\n"},
        {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "final_result"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Ro'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": 'me"}'}}]},
    ]
    async with OpenAICompatServer([RawStream(deltas=deltas)]) as server:
        agent = Agent("a", model_for(server), output_type=City | str)
        result, stream = await run(agent)

    assert result.output == City(city="Rome")
    assert all(d.text == "" for d in stream)
    assert len(server.requests) == 1


# --- reasoning_content --------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_content_is_thinking_and_usage_is_the_servers(stream: bool) -> None:
    answer = ModelResponse(
        text="Paris.",
        thinking="France's capital is Paris.",
        usage=Usage(input_tokens=7, output_tokens=42),
    )
    async with OpenAICompatServer([answer]) as server:
        model = model_for(server, stream=stream)
        ask = ModelRequest(messages=[Message(role="user", content="where?")])
        if stream:
            chunks = [chunk async for chunk in model.stream(ask)]
            response = chunks[-1].response
            assert response is not None
            assert "".join(c.thinking_delta for c in chunks) == answer.thinking
            assert "".join(c.text_delta for c in chunks) == "Paris."
        else:
            response = await model.request(ask)

    assert (response.text, response.thinking) == ("Paris.", "France's capital is Paris.")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (7, 42)


@pytest.mark.parametrize(
    "field",
    [
        {"reasoning_content": "mapped"},
        {"reasoning": "mapped"},  # OpenRouter's and newer vLLM's name for it
        {"thinking_blocks": [{"type": "thinking", "thinking": "mapped", "signature": "s"}]},
    ],
)
async def test_each_providers_reasoning_field_is_thinking(field: dict[str, Any]) -> None:
    delta = {k: v for k, v in field.items() if k != "thinking_blocks"} or {"reasoning": "mapped"}
    script = [
        completion("answer", **field),
        RawStream(deltas=[delta, {"content": "answer"}], finish_reason="stop"),
    ]
    ask = ModelRequest(messages=[Message(role="user", content="q")])
    async with OpenAICompatServer(script) as server:
        whole = await model_for(server, stream=False).request(ask)
        chunks = [chunk async for chunk in model_for(server).stream(ask)]

    streamed = chunks[-1].response
    assert streamed is not None
    for response in (whole, streamed):
        assert (response.text, response.thinking) == ("answer", "mapped")
    assert [c.thinking_delta for c in chunks if c.thinking_delta] == ["mapped"]


async def test_a_scripted_model_streams_its_thinking_before_its_text() -> None:
    answer = ModelResponse(text="Paris.", thinking="the capital of France")
    result, deltas = await run(Agent("a", ScriptedModel([answer], stream=True)))

    assert result.output == "Paris." and result.messages[-1].thinking == answer.thinking
    assert "".join(d.thinking for d in deltas) == answer.thinking
    assert "".join(d.text for d in deltas) == "Paris."
    last_thought = max(i for i, d in enumerate(deltas) if d.thinking)
    assert all(not d.text for d in deltas[: last_thought + 1])


async def test_thinking_is_kept_in_the_transcript_and_not_sent_back() -> None:
    script = [
        completion(
            "<think>add them</think>",
            reasoning_content="two numbers",
            tool_calls=[
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                }
            ],
        ),
        completion("<think>done</think>3"),
    ]

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with OpenAICompatServer(script, mode="vllm") as server:
        result, _ = await run(Agent("a", model_for(server, stream=False), tools=[add]))

    assert result.output == "3"
    first, last = (m for m in result.messages if m.role == "assistant")
    assert first.thinking == "two numbers\n\nadd them" and first.content == ""
    assert last.thinking == "done"
    sent = server.requests[1]["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert assistant["content"] == "" and "reasoning_content" not in assistant
    assert "think" not in json.dumps(sent)


async def test_a_thinking_only_answer_is_asked_again_and_not_sent_back() -> None:
    """Port of pydantic-ai tests/models/test_openai.py::
    test_thinking_only_response_skipped_in_history: an answer of thinking alone (content
    null, ``reasoning_content``) is no answer; the message sent next holds no assistant
    message for it."""
    script = [
        completion(None, reasoning_content="Let me think about this..."),
        completion("hello back"),
    ]
    async with OpenAICompatServer(script) as server:
        result, _ = await run(Agent("a", model_for(server, stream=False)), "hello")

    assert result.output == "hello back"
    assert result.messages[1].thinking == "Let me think about this..."
    second = server.requests[1]["messages"]
    assert [m for m in second if m["role"] == "assistant"] == []


# --- the splitter ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "thinking", "text"),
    [
        ("foo bar", "", "foo bar"),
        ("<think>thinking</think>baz", "thinking", "baz"),
        ("  <think>\nthinking\n</think>\n\nbaz", "thinking", "baz"),
        ("<think>cut off mid-thought", "cut off mid-thought", ""),
        ("foo bar<think>thinking</think>baz", "", "foo bar<think>thinking</think>baz"),
        ("<think></think>", "", ""),
        ("<thinking>x</thinking>", "", "<thinking>x</thinking>"),
    ],
)
def test_split_thinking(content: str, thinking: str, text: str) -> None:
    """After pydantic-ai tests/test_thinking_part.py::test_split_content, for a block at the
    start (a tag later in the content is text here, where pydantic-ai splits it out)."""
    assert split_thinking(content) == (thinking, text)
    assert split_thinking(content.replace("think>", "custom>"), ("<custom>", "</custom>")) == (
        thinking,
        text.replace("think>", "custom>"),
    )


_pieces = st.lists(
    st.sampled_from(["<think>", "</think>", "<", "</", "think", ">", " ", "\n", "a", "b"]),
    max_size=12,
)


@given(_pieces, st.lists(st.integers(min_value=0, max_value=40), max_size=6))
def test_the_streamed_split_is_the_whole_split(parts: list[str], cuts: list[int]) -> None:
    content = "".join(parts)
    bounds = sorted({min(c, len(content)) for c in cuts} | {0, len(content)})
    splitter = ThinkTagSplitter()
    said = [splitter.feed(content[a:b]) for a, b in itertools.pairwise(bounds)]
    said.append(splitter.flush())
    thinking, text = split_thinking(content)
    assert "".join(t for _, t in said) == text
    assert "".join(t for t, _ in said).strip() == thinking == splitter.thinking


async def test_a_custom_models_thinking_that_is_no_text_fails_the_run_naming_it() -> None:
    model = FunctionModel(lambda request: ModelResponse(text="ok", thinking=3))  # type: ignore[arg-type]
    result, _ = await run(Agent("a", model))

    assert result.status == RunStatus.FAILED
    assert "its thinking holds int 3" in str(result.error)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_think_block_the_prompt_opened_is_text(stream: bool) -> None:
    """Pinned as intended: a chat template that opens ``<think>`` in the prompt (DeepSeek-R1's,
    Qwen3's) gets an answer with only ``</think>`` in it. litellm leaves it in the content,
    and so do we: telling it apart needs the whole answer (a stream would hold back all of
    its text, in case a ``</think>`` came), and an answer that mentions the tag would lose
    what came before it. A server's reasoning parser (vLLM's ``--reasoning-parser``,
    llama.cpp's ``--reasoning-format``) sends that thinking as ``reasoning_content``."""
    content = "Let me think.\n</think>\n\nThe answer is 4."
    script = [streamed(*re.split("(?<= )", content)) if stream else completion(content)]
    async with OpenAICompatServer(script) as server:
        result, deltas = await run(Agent("a", model_for(server, stream=stream)))

    assert result.output == content and result.messages[-1].thinking == ""
    assert all(d.thinking == "" for d in deltas)
