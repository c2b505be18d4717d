"""The provider-neutral model types and the ``Model`` base class."""

from __future__ import annotations

import pytest

from tinyagents._clock import SequentialIds, use_ids
from tinyagents.errors import ConfigurationError
from tinyagents.harness import (
    LiteLLMModel,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    ToolCall,
    Usage,
)
from tinyagents.harness.litellm_model import as_model


class EchoModel(Model):
    name = "echo"

    async def request(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=request.messages[-1].content, usage=Usage(input_tokens=1))


def test_usage_adds_tokens_and_keeps_cost_unknown_only_when_all_parts_are():
    a = Usage(input_tokens=3, output_tokens=4)
    b = Usage(input_tokens=1, output_tokens=2, cost=0.5)

    assert (a + a).cost is None
    total = a + b
    assert (total.input_tokens, total.output_tokens, total.total_tokens) == (4, 6, 10)
    assert total.cost == 0.5
    assert a.total_tokens == 7  # operands are not changed


def test_usage_refuses_to_add_other_types():
    with pytest.raises(TypeError):
        Usage() + 1  # type: ignore[operator]


def test_defaults_are_fresh_per_instance():
    first, second = Message(role="user"), Message(role="user")
    first.tool_calls.append(ToolCall(id="c", name="t", args={}))
    first.metadata["k"] = 1

    assert second.tool_calls == [] and second.metadata == {}
    assert ModelResponse().usage is not ModelResponse().usage


def test_request_ids_come_from_the_injectable_id_source():
    with use_ids(SequentialIds()):
        ids = [ModelRequest(messages=[]).request_id for _ in range(2)]

    assert ids == ["m-0001", "m-0002"]


def test_response_becomes_the_assistant_message_with_its_tool_calls():
    call = ToolCall(id="c1", name="search", args={"q": "x"})
    message = ModelResponse(text="looking", tool_calls=[call]).to_message()

    assert message == Message(role="assistant", content="looking", tool_calls=[call])


async def test_default_stream_yields_one_chunk_carrying_the_full_response():
    request = ModelRequest(messages=[Message(role="user", content="hello")])

    chunks = [chunk async for chunk in EchoModel().stream(request)]

    assert len(chunks) == 1
    assert chunks[0].text_delta == "hello"
    assert chunks[0].response == ModelResponse(text="hello", usage=Usage(input_tokens=1))
    assert isinstance(chunks[0], StreamChunk)


def test_as_model_passes_models_through_and_turns_strings_into_litellm_models():
    model = EchoModel()

    assert as_model(model) is model
    converted = as_model("openai/gpt-4o-mini")
    assert isinstance(converted, LiteLLMModel)
    assert converted.name == "openai/gpt-4o-mini"


def test_as_model_rejects_anything_else_with_a_hint():
    with pytest.raises(ConfigurationError, match="openai/gpt-4o-mini"):
        as_model(42)  # type: ignore[arg-type]


def test_model_requires_request():
    class Incomplete(Model):
        pass

    with pytest.raises(TypeError):
        Incomplete()  # type: ignore[abstract]
