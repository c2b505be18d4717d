"""pydantic-ai's count of an empty answer against its output retries, the empty response kept
in the transcript, its output schemas written without property titles, and more of its
agent tests, ported (an eleventh batch; see test_pydantic_ai_ports.py to _10).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise). Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

from pydantic import BaseModel

from tinyagents import Agent, RunContext, RunStatus
from tinyagents.harness import Message, ModelResponse
from tinyagents.testkit import FunctionModel, ScriptedModel, reply


class Foo(BaseModel):
    a: int
    b: str


def ask(alternatives: str) -> str:
    return f"Validation feedback:\nPlease {alternatives}.\n\nFix the errors and try again."


def shape(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.metadata.get("retry") or m.content) for m in messages]


# --- an empty answer spends the output retries (pydantic-ai's consume_output_retry) ---


async def test_empty_response_counts_against_output_retries() -> None:
    # ports test_empty_response_exceeds_max_retries with output_retries=3: pydantic-ai asks
    # again while its output retries last (Exceeded maximum output retries (3) on the fourth
    # empty answer). Ours asked once, whatever output_retries said.
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_retries=3).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert "output_retries=3" in (result.error or "")
    assert len(model.requests) == 4


async def test_empty_answers_are_asked_for_again_while_output_retries_last() -> None:
    # the other side of the count: two empty answers, then text, with output_retries=2.
    model = ScriptedModel([ModelResponse(text=""), ModelResponse(text=""), reply("ok")])
    result = await Agent("a", model, output_retries=2).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "ok"), result.error


async def test_no_output_retries_fails_on_the_first_empty_answer() -> None:
    # output_retries=0: pydantic-ai raises on the first empty answer (1 > 0).
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_retries=0).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 1


async def test_an_empty_answer_and_an_invalid_one_share_the_output_retries() -> None:
    # pydantic-ai counts both with one output_retries_used: an empty answer, then JSON that
    # does not validate, is past the default output_retries=1. Ours asked for both.
    model = ScriptedModel(
        [ModelResponse(text=""), reply('{"a": "x"}'), reply('{"a": 1, "b": "y"}')]
    )
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 2
    # and the other way round: an invalid answer, then an empty one
    model = ScriptedModel(
        [reply('{"a": "x"}'), ModelResponse(text=""), reply('{"a": 1, "b": "y"}')]
    )
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 2


async def test_an_output_validator_counts_an_empty_answer_in_ctx_retry() -> None:
    # pydantic-ai's output validators see ``ctx.retry`` as output_retries_used, which an
    # empty answer raised.
    seen: list[tuple[int, int]] = []
    agent = Agent("a", ScriptedModel([ModelResponse(text=""), reply("ok")]), output_retries=2)

    @agent.output_validator
    def check(ctx: RunContext, output: str) -> str:
        seen.append((ctx.retry, ctx.max_retries))
        return output

    result = await agent.run("Hello")
    assert result.output == "ok", result.error
    assert seen == [(1, 2)]


# --- the empty response stays in the transcript (pydantic-ai's ModelResponse(parts=[])) ---


async def test_empty_response_stays_in_the_messages() -> None:
    # ports test_empty_response's snapshot: the request, the empty ModelResponse, the retry
    # prompt, the answer. Ours dropped the empty response.
    model = ScriptedModel([ModelResponse(text=""), reply("ok here is text")])
    result = await Agent("a", model).run("Hello")
    assert result.output == "ok here is text", result.error
    retry = ask("return text")
    assert [(m.role, m.content) for m in model.requests[1].messages] == [
        ("user", "Hello"),
        ("assistant", ""),
        ("user", retry),
    ]
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "Hello"),
        ("assistant", ""),
        ("user", retry),
        ("assistant", "ok here is text"),
    ]


async def test_empty_response_stays_when_streamed() -> None:
    # ports tests/test_streaming.py's empty response retry, its messages.
    model = ScriptedModel([ModelResponse(text=""), reply("ok")], stream=True)
    result = await Agent("a", model).run("Hello")
    assert result.output == "ok", result.error
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


async def test_a_run_failed_on_empty_answers_keeps_the_first() -> None:
    # pydantic-ai's messages keep every empty response of a run that exceeded its retries;
    # ours keep the first and drop each ask answered with nothing (with that answer), so a
    # session's next turn sends no question that was never answered (LiteLLMModel sends no
    # empty assistant message, so the ask would reach the model again with the next prompt).
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_retries=2).run("Hello")
    assert result.status is RunStatus.FAILED
    assert shape(result.messages) == [("user", "Hello"), ("assistant", "")]
    assert shape(model.requests[2].messages) == [
        ("user", "Hello"),
        ("assistant", ""),
        ("user", "empty_answer"),
        ("assistant", ""),
        ("user", "empty_answer"),
    ]
