"""pydantic-ai's retry prompts for answers that are no tool call, dataclass / TypedDict /
``None`` output types, tool results of NaN and infinity, and a response's tool calls sharing
an id, ported (a ninth batch; see test_pydantic_ai_ports.py to _8).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise). Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

from pydantic import BaseModel

from tinyagents import Agent, ModelRetry, PromptedOutput, TextOutput, ToolOutput
from tinyagents.testkit import ScriptedModel, tool_call


class Foo(BaseModel):
    a: int
    b: str


# --- the retry prompt of an answer that is no tool call: pydantic-ai's words ---


async def test_retry_prompt_without_tool_name() -> None:
    # ports tests/models/test_huggingface.py::test_retry_prompt_without_tool_name: an output
    # validator's ModelRetry on a text answer reaches the model as RetryPromptPart's
    # model_response() writes one without a tool name.
    model = ScriptedModel(["invalid-response", "final-response"])
    agent = Agent("a", model)

    @agent.output_validator
    def response_validator(value: str) -> str:
        if value == "invalid-response":
            raise ModelRetry("Response is invalid")
        return value

    result = await agent.run("Hello")
    assert result.output == "final-response", result.error
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nResponse is invalid\n\nFix the errors and try again."
    )


async def test_a_structured_answers_validator_retry_has_the_same_words() -> None:
    # pydantic-ai: any retry without a tool name (native, prompted output) is worded so
    for output_type in (Foo, PromptedOutput(Foo)):
        model = ScriptedModel(['{"a": 1, "b": "x"}', '{"a": 2, "b": "x"}'])
        agent = Agent("a", model, output_type=output_type)

        @agent.output_validator
        def two(value: Foo) -> Foo:
            if value.a != 2:
                raise ModelRetry("a must be 2")
            return value

        result = await agent.run("go")
        assert result.output == Foo(a=2, b="x"), result.error
        assert model.requests[1].messages[-1].content == (
            "Validation feedback:\na must be 2\n\nFix the errors and try again."
        )


async def test_a_text_output_functions_retry_has_the_same_words() -> None:
    def shout(text: str) -> str:
        if text == "quiet":
            raise ModelRetry("say it louder")
        return text.upper()

    model = ScriptedModel(["quiet", "loud"])
    result = await Agent("a", model, output_type=TextOutput(shout)).run("go")
    assert result.output == "LOUD", result.error
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nsay it louder\n\nFix the errors and try again."
    )


async def test_text_where_an_output_tool_is_the_only_way_to_answer_is_validation_feedback() -> None:
    # tests/models/test_openai.py pins the words a RetryPromptPart of no tool sends
    model = ScriptedModel(["just text", tool_call("final_result", a=1, b="x")])
    result = await Agent("a", model, output_type=ToolOutput(Foo)).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nPlease include your response in a tool call.\n\n"
        "Fix the errors and try again."
    )


async def test_a_native_answer_that_does_not_validate_is_sent_back_as_its_errors() -> None:
    # pydantic-ai's NativeOutput retry: RetryPromptPart(content=<errors>) with no tool name,
    # the errors as JSON in a fence (a top-level error's input left out: the answer is in the
    # conversation), as a prompted answer's (test_pydantic_ai_ports_8.py)
    model = ScriptedModel(['{"a": "one", "b": "x"}', '{"a": 1, "b": "x"}'])
    result = await Agent("a", model, output_type=Foo).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    assert model.requests[1].messages[-1].content == (
        "1 validation error:\n"
        "```json\n"
        "[\n"
        "  {\n"
        '    "type": "int_parsing",\n'
        '    "loc": [\n'
        '      "a"\n'
        "    ],\n"
        '    "msg": "Input should be a valid integer, unable to parse string as an integer"\n'
        "  }\n"
        "]\n"
        "```\n\n"
        "Fix the errors and try again."
    )
