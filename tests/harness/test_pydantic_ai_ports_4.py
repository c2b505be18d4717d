"""pydantic-ai's agent and tool tests, ported (a fourth batch; see test_pydantic_ai_ports.py,
_2 and _3): output validators, system prompt functions (static and dynamic) and per-tool
retry caps, over the testkit's fakes.

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/...``). Where we
behave differently on purpose, the test asserts our documented behaviour and says why.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from tinyagents import Agent, RunStatus
from tinyagents.errors import ConfigurationError, ModelRetry, ToolError
from tinyagents.harness import Message, ModelRequest, RunContext
from tinyagents.testkit import FunctionModel, ScriptedModel


class Foo(BaseModel):
    a: int
    b: str


def asks(request: ModelRequest) -> list[Message]:
    return [m for m in request.messages if m.metadata.get("retry") == "invalid_output"]


# --- output validators ---------------------------------------------------------------------


async def test_an_output_validator_sends_the_model_back_with_its_message() -> None:
    # ports tests/test_agent.py::test_output_validator: the validator (taking the run's
    # context) refuses a=41 with ModelRetry; the model reads the message and answers a=42.
    model = ScriptedModel(['{"a": 41, "b": "foo"}', '{"a": 42, "b": "foo"}'])
    agent = Agent("a", model, output_type=Foo)
    seen: list[tuple[str, int, int | None]] = []

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Foo) -> Foo:
        seen.append((ctx.run_id, ctx.retry, ctx.max_retries))
        if o.a == 42:
            return o
        raise ModelRetry('"a" should be 42')

    result = await agent.run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Foo(a=42, b="foo"))
    (ask,) = asks(model.requests[1])
    assert ask.role == "user" and ask.content.startswith('"a" should be 42')
    assert [(r, m) for _, r, m in seen] == [(0, 1), (1, 1)]
    assert validate_output.__name__ == "validate_output"  # the decorator gives it back


@pytest.mark.parametrize("kind", ["sync", "async", "sync returning a coroutine"])
async def test_output_validators_sync_async_with_or_without_ctx(kind: str) -> None:
    # ports tests/test_agent.py::test_output_validator_sync_function_returning_coroutine (and
    # the sync/async flavours of ::test_output_validator): what a validator returns is the
    # output; one returning an awaitable has it awaited, its ModelRetry heard.
    async def check(o: Foo) -> Foo:
        if o.a != 42:
            raise ModelRetry('"a" should be 42')
        return o.model_copy(update={"b": o.b.upper()})

    model = ScriptedModel(['{"a": 41, "b": "foo"}', '{"a": 42, "b": "foo"}'])
    agent = Agent("a", model, output_type=Foo)
    if kind == "sync":

        @agent.output_validator
        def v(o: Foo) -> Foo:
            if o.a != 42:
                raise ModelRetry('"a" should be 42')
            return o.model_copy(update={"b": o.b.upper()})

    elif kind == "async":
        agent.output_validator(check)
    else:

        @agent.output_validator
        def v2(o: Foo) -> Any:
            return check(o)

    result = await agent.run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Foo(a=42, b="FOO"))
    assert len(model.requests) == 2


async def test_output_validator_retries_are_counted_against_output_retries() -> None:
    # ports tests/test_agent.py::test_output_validator_retries: with retries={'output': 3}
    # (ours: Agent(output_retries=3)) the validator sees ctx.retry 0..3 and ctx.max_retries 3.
    log: list[tuple[int, int | None]] = []
    agent = Agent(
        "a", FunctionModel(lambda r: '{"a": 1, "b": "foo"}'), output_type=Foo, output_retries=3
    )

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Foo) -> Foo:
        log.append((ctx.retry, ctx.max_retries))
        if ctx.retry == 3:
            return o
        raise ModelRetry(f"Retry {ctx.retry}")

    result = await agent.run("Hello")
    assert result.status is RunStatus.COMPLETED
    assert log == [(0, 3), (1, 3), (2, 3), (3, 3)]


async def test_an_output_validator_that_never_accepts_fails_the_run() -> None:
    # ports tests/test_agent.py::test_output_validator_exceeds_output_retries: pydantic-ai
    # raises UnexpectedModelBehavior "Exceeded maximum output retries (2)"; our run ends
    # ``failed`` with a ModelResponseError saying so, the answer's text kept as its output.
    log: list[int] = []
    model = FunctionModel(lambda r: '{"a": 1, "b": "foo"}')
    agent = Agent("a", model, output_type=Foo, output_retries=2)

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Foo) -> Foo:
        log.append(ctx.retry)
        raise ModelRetry(f"Retry {ctx.retry}")

    result = await agent.run("Hello")
    assert result.status is RunStatus.FAILED and log == [0, 1, 2]
    assert "ModelResponseError" in (result.error or "")
    assert "output validator" in (result.error or "") and "Retry 2" in (result.error or "")
    assert result.output == '{"a": 1, "b": "foo"}' and len(model.requests) == 3


async def test_invalid_output_and_validator_retries_share_one_budget() -> None:
    # ports tests/test_agent.py::test_output_validator_retry_consistency_across_paths (the
    # budget the validator sees is the run's output retries, whatever was refused before):
    # one schema failure then one validator refusal use the default budget of 1 twice over.
    model = ScriptedModel(['{"a": "x"}', '{"a": 1, "b": "foo"}', '{"a": 2, "b": "foo"}'])
    agent = Agent("a", model, output_type=Foo, output_retries=2)
    log: list[int] = []

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Foo) -> Foo:
        log.append(ctx.retry)
        if o.a == 1:
            raise ModelRetry("a must be 2")
        return o

    result = await agent.run("Hello")
    assert result.output == Foo(a=2, b="foo") and log == [1, 2]
    default = Agent("a", ScriptedModel(['{"a": "x"}', '{"a": 1, "b": "foo"}']), output_type=Foo)
    default.output_validator(validate_output)
    failed = await default.run("Hello")
    assert failed.status is RunStatus.FAILED and "a must be 2" in (failed.error or "")


async def test_an_output_validator_checks_text_output_too() -> None:
    # ports tests/test_agent.py::test_text_path_honors_output_retry_budget: a validator on
    # text output (no output_type) is asked again the same way.
    model = ScriptedModel(["bad", "good"])
    agent = Agent("a", model)

    @agent.output_validator
    async def validate_output(text: str) -> str:
        if text != "good":
            raise ModelRetry("say good")
        return text + "!"

    result = await agent.run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "good!")
    assert asks(model.requests[1])[0].content.startswith("say good")


async def test_an_output_validator_may_return_none() -> None:
    # ports tests/test_agent.py::test_agent_allows_none_output_validator_called: what the
    # validator returns is the output, None too.
    agent = Agent("a", ScriptedModel(["x"]))
    agent.output_validator(lambda text: None)
    result = await agent.run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, None)


async def test_an_output_validator_raising_anything_else_fails_the_run() -> None:
    agent = Agent("a", ScriptedModel(["x"]))

    @agent.output_validator
    def validate_output(text: str) -> str:
        raise ValueError("broken validator")

    result = await agent.run("Hello")
    assert result.status is RunStatus.FAILED and "ValueError: broken validator" in (
        result.error or ""
    )


async def test_concurrent_runs_count_their_validator_retries_each_on_its_own() -> None:
    # ports tests/test_agent.py::test_concurrent_runs_output_retry_isolation
    retries: dict[str, list[int]] = {"fast": [], "slow": []}
    agent = Agent(
        "a", FunctionModel(lambda r: '{"a": 1, "b": "foo"}'), output_type=Foo, output_retries=3
    )

    @agent.output_validator
    async def validate_output(ctx: RunContext, o: Foo) -> Foo:
        which = "slow" if "slow" in ctx.run.messages[0].content else "fast"
        retries[which].append(ctx.retry)
        if ctx.retry < 2:
            if which == "slow":
                await asyncio.sleep(0)
            raise ModelRetry(f"{which} retry {ctx.retry}")
        return o

    fast, slow = await asyncio.gather(agent.run("fast"), agent.run("slow"))
    assert fast.output == slow.output == Foo(a=1, b="foo")
    assert retries == {"fast": [0, 1, 2], "slow": [0, 1, 2]}


def test_an_output_validator_of_the_wrong_shape_is_refused() -> None:
    agent = Agent("a", ScriptedModel(["x"]))
    with pytest.raises(ConfigurationError, match="output_validator"):
        agent.output_validator(lambda: None)
    with pytest.raises(ConfigurationError, match="output_retries"):
        Agent("a", ScriptedModel(["x"]), output_retries=-1)


def test_model_retry_is_a_tool_error() -> None:
    # a tool raising pydantic-ai's ModelRetry has its message sent to the model as is, as a
    # ToolError's is
    assert issubclass(ModelRetry, ToolError)
