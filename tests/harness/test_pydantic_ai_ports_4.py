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

from tinyagents import Agent, RunLimits, RunStatus, Runtime, SubAgent, tool
from tinyagents.errors import ConfigurationError, ModelRetry, ToolError
from tinyagents.harness import Message, ModelRequest, RunContext
from tinyagents.testkit import FunctionModel, ScriptedModel, tool_call


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
    assert ask.role == "user" and ask.content.startswith('Validation feedback:\n"a" should be 42')
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
    assert asks(model.requests[1])[0].content.startswith("Validation feedback:\nsay good")


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


# --- system prompt functions ---------------------------------------------------------------


def system_message(request: ModelRequest) -> Message:
    (first, *rest) = request.messages
    assert first.role == "system" and all(m.role != "system" for m in rest)
    return first


@pytest.mark.parametrize("kind", ["sync", "async", "ctx", "sync returning a coroutine"])
async def test_system_prompt_functions_join_the_instructions(kind: str) -> None:
    # ports tests/test_agent.py::test_dynamic_false_no_reevaluate (its first run) and
    # ::test_system_prompt_sync_function_returning_coroutine: each function's text follows
    # the instructions, in the order added. Ours is one system message (templates such as
    # llama.cpp's refuse a second), where pydantic-ai sends a SystemPromptPart each.
    model = ScriptedModel(["ok"])
    agent = Agent("a", model, instructions="Foobar")

    async def answer() -> str:
        return "A"

    if kind == "sync":
        agent.system_prompt(lambda: "A")
    elif kind == "async":
        agent.system_prompt(answer)
    elif kind == "ctx":

        @agent.system_prompt
        def with_ctx(ctx: RunContext) -> str:
            return "A" if ctx.agent.name == "a" and ctx.run_id else "?"

    else:
        agent.system_prompt(lambda: answer())
    agent.system_prompt(lambda: "B")
    result = await agent.run("Hello")
    assert result.status is RunStatus.COMPLETED
    assert system_message(model.requests[0]).content == "Foobar\n\nA\n\nB"
    assert model.requests[0].messages[1].content == "Hello"


async def test_a_system_prompt_function_alone_is_the_system_prompt() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent("a", model)
    agent.system_prompt(lambda: "be brief")
    await agent.run("Hello")
    assert system_message(model.requests[0]).content == "be brief"


async def test_a_history_keeps_its_system_prompt_unless_a_function_is_dynamic() -> None:
    # ports tests/test_agent.py::test_dynamic_false_no_reevaluate and
    # ::test_dynamic_true_reevaluate_system_prompt: a run continuing a transcript keeps the
    # static function's text as it was written ('A'); a dynamic one's is written again ('B').
    value = {"v": "A"}
    static = Agent("a", ScriptedModel(["one", "two"]), instructions="Foobar")
    static.system_prompt(lambda: value["v"])
    dynamic = Agent("a", ScriptedModel(["one", "two"]), instructions="Foobar")

    @dynamic.system_prompt(dynamic=True)
    async def func() -> str:
        return value["v"]

    for agent, second in ((static, "Foobar\n\nA"), (dynamic, "Foobar\n\nB")):
        value["v"] = "A"
        first = await agent.run("Hello")
        assert first.messages[0].content == "Foobar\n\nA"
        value["v"] = "B"
        again = await agent.run("World", history=first.messages)
        assert isinstance(agent.model, ScriptedModel)
        assert system_message(agent.model.requests[1]).content == second
        assert again.messages[0].content == second
        assert first.messages[0].content == "Foobar\n\nA"  # the history given is not changed
    parts = dynamic.model.requests[1].messages[0].metadata["system_prompt_parts"]  # type: ignore[attr-defined]
    assert parts == [[None, "Foobar"], [func.__qualname__, "B"]]


async def test_a_sessions_turns_rewrite_only_the_dynamic_system_prompt() -> None:
    # each SubAgentSession turn continues the transcript (a history with the first turn's
    # system prompt): a static function is called at the first turn only, a dynamic one at
    # every turn
    calls = {"static": 0, "dynamic": 0}
    model = ScriptedModel(["one", "two", "three"])
    agent = Agent("a", model)

    @agent.system_prompt
    def static() -> str:
        calls["static"] += 1
        return f"static {calls['static']}"

    @agent.system_prompt(dynamic=True)
    def dynamic() -> str:
        calls["dynamic"] += 1
        return f"turn {calls['dynamic']}"

    async with Runtime() as rt:
        session = SubAgent(agent).session(runtime=rt)
        for text in ("a", "b", "c"):
            await session.send(text)
    assert calls == {"static": 1, "dynamic": 3}
    sent = [system_message(r).content for r in model.requests]
    assert sent == ["static 1\n\nturn 1", "static 1\n\nturn 2", "static 1\n\nturn 3"]


async def test_a_system_prompt_returning_none_adds_nothing() -> None:
    # ports tests/test_agent.py::test_system_prompt_none_return_are_omitted and
    # ::test_dynamic_system_prompt_none_return: None adds nothing; a dynamic one keeps its
    # (empty) place, so a continued run whose function now returns text has it written in.
    model = ScriptedModel(["one", "two"])
    agent = Agent("a", model, instructions="STATIC")
    agent.system_prompt(lambda: None)
    values: list[str | None] = [None, "DYNAMIC"]
    agent.system_prompt(dynamic=True)(lambda: values.pop(0))
    first = await agent.run("Hi")
    assert system_message(model.requests[0]).content == "STATIC"
    await agent.run("again", history=first.messages)
    assert system_message(model.requests[1]).content == "STATIC\n\nDYNAMIC"


async def test_a_history_whose_system_prompt_has_no_parts_is_sent_as_it_is() -> None:
    # ports tests/test_agent.py::test_dynamic_system_prompt_no_changes
    model = ScriptedModel(["ok"])
    agent = Agent("a", model)
    agent.system_prompt(dynamic=True)(lambda: "Dynamic")
    history = [Message(role="system", content="Static"), Message(role="user", content="Manual")]
    result = await agent.run("Second call", history=history)
    assert result.status is RunStatus.COMPLETED
    assert system_message(model.requests[0]).content == "Static"


@pytest.mark.parametrize(
    ("fn", "error"),
    [
        (lambda: 1 / 0, "ZeroDivisionError"),
        (lambda: 42, "must return text (or None), got int"),
    ],
)
async def test_a_system_prompt_function_that_fails_fails_the_run(fn: Any, error: str) -> None:
    model = ScriptedModel(["never"])
    agent = Agent("a", model)
    agent.system_prompt(fn)
    result = await agent.run("Hello")
    assert result.status is RunStatus.FAILED and error in (result.error or "")
    assert model.requests == []


def test_a_system_prompt_function_of_the_wrong_shape_is_refused() -> None:
    agent = Agent("a", ScriptedModel(["x"]))
    with pytest.raises(ConfigurationError, match="system_prompt"):
        agent.system_prompt(lambda a, b: "x")


# --- per-tool retry caps ---------------------------------------------------------------------


async def test_a_tool_past_its_retries_ends_the_run() -> None:
    # ports tests/test_tools.py::test_tool_retries: @agent.tool(retries=5) raising ModelRetry
    # every time is called 6 times (ctx.retry 0..5, ctx.max_retries 5), then pydantic-ai raises
    # UnexpectedModelBehavior "Tool 'infinite_retry_tool' exceeded max retries count of 5";
    # our run ends ``failed`` with a ToolError saying the same.
    seen: list[tuple[int, int | None]] = []

    @tool(retries=5)
    def infinite_retry_tool(ctx: RunContext) -> int:
        """Never works."""
        seen.append((ctx.retry, ctx.max_retries))
        raise ModelRetry("Please try again.")

    model = FunctionModel(lambda r: tool_call("infinite_retry_tool"))
    agent = Agent("a", model, tools=[infinite_retry_tool], retries=3)
    result = await agent.run("Begin infinite retry loop!")
    assert result.status is RunStatus.FAILED
    assert seen == [(n, 5) for n in range(6)]
    assert "ToolError" in (result.error or "")
    assert "tool 'infinite_retry_tool' exceeded max retries count of 5" in (result.error or "")
    assert "Please try again." in (result.error or "")
    last = result.messages[-1]
    assert last.role == "tool" and last.content == "Please try again."  # answered, as ever


async def test_the_agents_retries_cap_each_tool_and_survive_interleaved_calls() -> None:
    # ports tests/test_agent.py::test_tool_retry_budget_survives_interleaved_tool_calls: a
    # failing tool's count is not reset by another tool's call in between.
    retries: list[int] = []

    @tool
    def flaky_tool(ctx: RunContext) -> str:
        """Always fails."""
        retries.append(ctx.retry)
        raise ModelRetry("always fails")

    @tool
    def other_tool() -> str:
        """Works."""
        return "ok"

    def step(request: ModelRequest) -> Any:
        made = sum(m.role == "assistant" for m in request.messages)
        return tool_call("flaky_tool" if made % 2 == 0 else "other_tool")

    agent = Agent("a", FunctionModel(step), tools=[flaky_tool, other_tool], retries=2)
    result = await agent.run("go")
    assert result.status is RunStatus.FAILED and retries == [0, 1, 2]
    assert "exceeded max retries count of 2" in (result.error or "")


async def test_a_tools_retry_count_resets_after_it_succeeds() -> None:
    # ports tests/test_agent.py::test_tool_retry_count_resets_after_successful_call
    seen: list[int] = []

    @tool
    def sometimes_tool(ctx: RunContext) -> str:
        """Fails on odd calls."""
        seen.append(ctx.retry)
        if len(seen) % 2 == 1:
            raise ModelRetry("fails on odd calls")
        return "ok"

    script: list[Any] = [tool_call("sometimes_tool") for _ in range(4)]
    agent = Agent("a", ScriptedModel([*script, "done"]), tools=[sometimes_tool], retries=1)
    result = await agent.run("go")
    assert (result.status, result.output, seen) == (RunStatus.COMPLETED, "done", [0, 1, 0, 1])


async def test_a_tools_own_retries_win_over_the_agents_and_none_is_no_cap() -> None:
    # ports tests/test_agent.py::test_tool_retry_budget_resolution (a tool's own budget wins
    # over the agent's). Kept on purpose: with neither set there is no cap (our default, a
    # product decision: test_pydantic_ai_ports.py::test_retries_per_tool_have_no_cap), where
    # pydantic-ai's default is 1; RunLimits bound such a run.
    calls: list[int] = []

    @tool(retries=0)
    def strict() -> str:
        """Fails."""
        calls.append(1)
        raise ToolError("no")

    agent = Agent("a", FunctionModel(lambda r: tool_call("strict")), tools=[strict], retries=4)
    result = await agent.run("go")
    assert result.status is RunStatus.FAILED and len(calls) == 1
    assert "exceeded max retries count of 0" in (result.error or "")
    assert strict.retries == 0 and Agent("a", ScriptedModel(["x"])).retries is None
    seen: list[int | None] = []

    @tool
    def lenient(ctx: RunContext) -> str:
        """Fails."""
        seen.append(ctx.max_retries)
        raise ToolError("no")

    model = FunctionModel(lambda r: tool_call("lenient"))
    bounded = await Agent("a", model, tools=[lenient], limits=RunLimits(max_model_calls=8)).run(
        "go"
    )
    assert bounded.status is RunStatus.LIMIT_EXCEEDED and seen == [None] * 8


@pytest.mark.parametrize("retries", [-1, 1.5, True, "2"])
def test_negative_or_non_integer_retries_are_refused(retries: Any) -> None:
    # ports tests/test_agent.py::test_negative_tool_retries_raises_immediately and
    # tests/test_tools.py::test_tool_rejects_negative_max_retries
    with pytest.raises(ConfigurationError, match="retries"):
        Agent("a", ScriptedModel(["x"]), retries=retries)
    with pytest.raises(ConfigurationError, match="retries"):
        tool(name="x", retries=retries)(lambda: "x")


# --- request limit ---------------------------------------------------------------------------


async def test_there_is_no_default_request_limit_and_pydantic_ais_is_one_setting_away() -> None:
    # ports tests/test_usage_limits.py::test_retry_limit with pydantic-ai's default
    # UsageLimits(request_limit=50). Kept on purpose: RunLimits() has no default cap (usage
    # rolls up the run tree, so a default would cap a whole tree at 50; docs/harness.md
    # "Limits"): a run of 60 requests completes. RunLimits(max_model_calls=50) is
    # pydantic-ai's default: the 51st request is refused before it is sent.
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    def model() -> ScriptedModel:
        return ScriptedModel([*(tool_call("ping") for _ in range(59)), "done"])

    unlimited = Agent("a", model(), tools=[ping])
    assert unlimited.limits.max_model_calls is None
    result = await unlimited.run("go")
    assert (result.status, result.usage["model_calls"]) == (RunStatus.COMPLETED, 60)
    capped = Agent("a", model(), tools=[ping], limits=RunLimits(max_model_calls=50))
    stopped = await capped.run("go")
    assert stopped.status is RunStatus.LIMIT_EXCEEDED
    assert "max_model_calls" in (stopped.error or "") and "used 50, allowed 50" in (
        stopped.error or ""
    )
    assert isinstance(capped.model, ScriptedModel) and len(capped.model.requests) == 50
