"""pydantic-ai's tool preparation (``PrepareTools``, a tool class's own prepare), a single
model argument's shapes and aliases, tool and output-tool retry and timeout settings, a
run's own output budget and a prompted output function's retry, ported (an eighteenth
batch; see test_pydantic_ai_ports.py to _17).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_tools.py``
unless said otherwise); several run pydantic-ai itself beside ours (its ``FunctionModel``) on
the same responses, to show the same calls run and the same answers come out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import AliasChoices, BaseModel, Field
from pydantic_ai import Agent as PAgent
from pydantic_ai import ModelRetry as PModelRetry
from pydantic_ai import PromptedOutput as PPromptedOutput
from pydantic_ai import RunContext as PRunContext
from pydantic_ai import Tool as PTool
from pydantic_ai import ToolOutput as PToolOutput
from pydantic_ai import UnexpectedModelBehavior
from pydantic_ai.capabilities import PrepareTools as PPrepareTools
from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart
from pydantic_ai.messages import ModelResponse as PModelResponse
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.models.function import FunctionModel as PFunctionModel
from pydantic_ai.models.test import TestModel as PTestModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset as PFunctionToolset
from pydantic_ai.usage import UsageLimits as PUsageLimits

from tinyagents import (
    Agent,
    FunctionToolset,
    ModelRetry,
    PromptedOutput,
    RunContext,
    RunLimits,
    RunStatus,
    ToolOutput,
    tool,
)
from tinyagents.errors import ConfigurationError, UnsupportedOutputError
from tinyagents.harness import FunctionTool, ToolSpec
from tinyagents.testkit import FunctionModel, ScriptedModel, reply, tool_call, tool_calls


def tool_messages(messages: list[Any]) -> list[Any]:
    return [m for m in messages if m.role == "tool"]


# --- PrepareTools: the agent's prepare_tools ------------------------------------------------


async def their_offers(deps: int) -> list[tuple[str, bool | None]]:
    """The (name, strict) of each tool pydantic-ai's ``PrepareTools`` leaves for ``deps``."""
    seen: list[tuple[str, bool | None]] = []

    async def prepare(ctx: PRunContext[int], defs: list[ToolDefinition]) -> list[ToolDefinition]:
        if ctx.deps in (42, 43):
            return []
        if ctx.deps == 21:
            return [dataclasses.replace(d, strict=True) for d in defs]
        return defs

    def model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        seen.extend((t.name, t.strict) for t in info.function_tools)
        return PModelResponse(parts=[TextPart("done")])

    agent = PAgent(PFunctionModel(model), deps_type=int, capabilities=[PPrepareTools(prepare)])

    @agent.tool
    def foobar(ctx: PRunContext[int], x: int, y: str) -> str:
        return f"{ctx.deps} {x} {y}"  # pragma: no cover

    await agent.run("", deps=deps)
    return seen


async def test_dynamic_tools_agent_wide() -> None:
    # ports ::test_dynamic_tools_agent_wide: the agent's prepare_tools, reading the run's
    # deps, hides every tool from a run (none offered, the model answers in text) or offers
    # them strict; what it changes is a copy, so the next run offers the tool as it is.
    async def prepare(ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        if ctx.deps in (42, 43):
            return []
        if ctx.deps == 21:
            return [dataclasses.replace(s, strict=True) for s in specs]
        return specs

    @tool
    def foobar(ctx: RunContext, x: int, y: str) -> str:
        """Foobar."""
        return f"{ctx.deps} {x} {y}"  # pragma: no cover

    for deps in (42, 43, 21, 1):
        model = ScriptedModel([reply("done")])
        agent = Agent("a", model, tools=[foobar], prepare_tools=prepare)
        result = await agent.run("", deps=deps)
        assert result.status is RunStatus.COMPLETED and result.output == "done"
        ours = [(t.name, t.strict) for t in model.requests[0].tools]
        assert ours == await their_offers(deps)
    assert foobar.spec().strict is None


async def test_a_tool_class_of_its_own_prepares_itself() -> None:
    # ports ::test_dynamic_cls_tool: a Tool subclass whose own prepare (here a bound method)
    # hides it from runs whose deps say so, and is offered and called in the others.
    class MyTool(FunctionTool):
        def __init__(self, spam: int) -> None:
            self.spam = spam
            super().__init__(self.tool_function, prepare=self.prepare_spec)

        def tool_function(self, x: int, y: str) -> str:
            """Tool function."""
            return f"{self.spam} {x} {y}"

        async def prepare_spec(self, ctx: RunContext, spec: ToolSpec) -> ToolSpec | None:
            return None if ctx.deps == 42 else spec

    model = ScriptedModel([tool_call("tool_function", x=0, y="a"), reply("done")])
    result = await Agent("a", model, tools=[MyTool(spam=777)]).run("", deps=1)
    assert result.output == "done"
    assert [m.content for m in tool_messages(result.messages)] == ["777 0 a"]

    model = ScriptedModel([reply("no tools")])
    result = await Agent("a", model, tools=[MyTool(spam=777)]).run("", deps=42)
    assert result.output == "no tools" and model.requests[0].tools == []


async def test_tool_ctx_agent() -> None:
    # ports ::test_tool_ctx_agent: a tool reads the running agent through ctx.agent, its name
    # and its output type. Kept on purpose: ours is the agent as given its output type in
    # ``output_spec`` (``int``), while ``output_type`` is what each request asks for (the
    # response format; for ``int`` the object wrapping it as ``response``, docs/harness.md
    # "Types that are no model class"); pydantic-ai's ``output_type`` is ``int``.
    seen: list[tuple[str, Any, Any]] = []

    @tool
    def get_agent_info(ctx: RunContext) -> str:
        """Get agent info."""
        seen.append((ctx.agent.name, ctx.agent.output_spec, ctx.agent.output_type))
        return f"agent={ctx.agent.name}"

    model = ScriptedModel([tool_call("get_agent_info"), '{"response": 0}'])
    agent = Agent("my_agent", model, tools=[get_agent_info], output_type=int)
    result = await agent.run("Hello")
    assert result.output == 0
    assert [m.content for m in tool_messages(result.messages)] == ["agent=my_agent"]
    ((name, given, asked),) = seen
    assert (name, given) == ("my_agent", int)
    assert asked is model.requests[0].response_format
    assert asked.model_json_schema()["required"] == ["response"]

    their_seen: list[tuple[str | None, Any]] = []
    calls = iter([PModelResponse(parts=[ToolCallPart("get_agent_info", {})])])

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        return next(
            calls,
            PModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": 0})]),
        )

    their = PAgent(PFunctionModel(their_model), name="my_agent", output_type=int)

    @their.tool(name="get_agent_info")
    def their_get_agent_info(ctx: PRunContext[None]) -> str:
        assert ctx.agent is not None
        their_seen.append((ctx.agent.name, ctx.agent.output_type))
        return f"agent={ctx.agent.name}"

    assert (await their.run("Hello")).output == 0
    assert their_seen == [("my_agent", int)]


# --- a single model argument: its shapes and aliases -------------------------------------


class Defaults(BaseModel):
    name: str = "default_name"
    value: int = 0


class Inner(BaseModel):
    x: int = 0


class Aliased(BaseModel):
    data: Inner = Field(alias="argument", default_factory=Inner)


class FirstChoice(BaseModel):
    city: str = Field(validation_alias=AliasChoices("argument", "town"))


class SecondChoice(BaseModel):
    city: str = Field(validation_alias=AliasChoices("town", "argument"))


async def theirs(kind: type[BaseModel], args: dict[str, Any]) -> list[Any]:
    """What pydantic-ai's tool ``f(argument: kind)`` is called with for ``args``."""
    received: list[Any] = []

    def f(argument: Any) -> str:
        received.append(argument)
        return "ok"

    f.__annotations__ = {"argument": kind, "return": str}
    calls = iter([PModelResponse(parts=[ToolCallPart("f", args, tool_call_id="c1")])])

    def model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        return next(calls, PModelResponse(parts=[TextPart("done")]))

    await PAgent(PFunctionModel(model), tools=[PTool(f)]).run("go")
    return received


async def ours(kind: type[BaseModel], args: dict[str, Any]) -> tuple[list[Any], str]:
    """What our tool ``f(argument: kind)`` is called with for ``args``, and its answer."""
    received: list[Any] = []

    def f(argument: Any) -> str:
        """F."""
        received.append(argument)
        return "ok"

    f.__annotations__ = {"argument": kind, "return": str}
    model = ScriptedModel([tool_call("f", **args), reply("done")])
    result = await Agent("a", model, tools=[tool(f)]).run("go")
    assert result.status is RunStatus.COMPLETED
    (answer,) = tool_messages(model.requests[1].messages)
    return received, answer.content


@pytest.mark.parametrize(
    ("kind", "args", "expected"),
    [
        # ::test_single_base_model_arg_tool_call_accepts_wrapped_input_with_defaults
        (
            Defaults,
            {"argument": {"name": "actual_name", "value": 42}},
            Defaults(name="actual_name", value=42),
        ),
        (Defaults, {"argument": {"value": 42}}, Defaults(value=42)),
        (Defaults, {"value": 42}, Defaults(value=42)),
        # ::test_single_base_model_arg_validator_accepts_parameter_named_field_alias
        (Aliased, {"argument": {"x": 5}}, Aliased(argument=Inner(x=5))),
        # ::test_single_base_model_arg_validator_accepts_parameter_named_alias_choice
        (FirstChoice, {"argument": "Mexico City"}, FirstChoice(argument="Mexico City")),
        (SecondChoice, {"town": "Mexico City"}, SecondChoice(town="Mexico City")),
    ],
)
async def test_a_model_argument_named_as_its_alias_or_wrapped_is_read(
    kind: type[BaseModel], args: dict[str, Any], expected: BaseModel
) -> None:
    # the argument's name as one of the model's keys (a field alias, an alias choice) is the
    # call as it is; as no key of the model, the fields wrapped in it, defaults filled in
    received, answer = await ours(kind, args)
    assert received == await theirs(kind, args) == [expected]
    assert answer == "ok"


async def test_an_argument_name_that_is_only_a_later_alias_choice_is_refused_as_pydantic_ai() -> (
    None
):
    # the alias choice offered is the first: the argument's name as a later one is not read
    # as the model's key, and the call is sent back, as pydantic-ai does (it runs nothing)
    received, answer = await ours(SecondChoice, {"argument": "Mexico City"})
    assert received == await theirs(SecondChoice, {"argument": "Mexico City"}) == []
    assert answer.startswith("invalid arguments for tool 'f'")


# --- tool and output-tool settings ----------------------------------------------------------


def f() -> None:
    """F."""


def test_tool_accepts_none_retries_and_timeout() -> None:
    # ports ::test_tool_accepts_none_max_retries and ::test_tool_accepts_none_timeout
    assert tool(retries=None)(f).retries is None
    assert tool(timeout_s=None)(f).timeout_s is None
    assert PTool(f, max_retries=None).max_retries is None


@pytest.mark.parametrize("timeout_s", [-1, 0, float("nan")])
def test_tool_rejects_negative_timeout(timeout_s: float) -> None:
    # ports ::test_tool_rejects_negative_timeout (pydantic-ai: UserError 'timeout must be > 0')
    with pytest.raises(
        ConfigurationError, match="timeout_s must be a finite number of seconds > 0"
    ):
        tool(timeout_s=timeout_s)(f)


@pytest.mark.parametrize("max_retries", [0, None])
def test_tooloutput_accepts_valid_max_retries(max_retries: int | None) -> None:
    # ports ::test_tooloutput_accepts_valid_max_retries
    assert ToolOutput(int, max_retries=max_retries).max_retries == max_retries
    assert PToolOutput(int, max_retries=max_retries).max_retries == max_retries


# --- output budgets and output functions (tests/test_agent.py) -----------------------------


class Foo(BaseModel):
    a: int
    b: str


async def test_run_level_output_retry_override_without_validators() -> None:
    # ports tests/test_agent.py::test_run_level_output_retry_override_without_validators: a
    # run's own output budget caps its output tool's invalid calls (the first and two sent
    # back: three requests), not the agent's 10, which the next run still has
    bad = tool_call("final_result", bad_field=1)
    model = ScriptedModel([bad] * 3)
    agent = Agent("a", model, output_type=ToolOutput(Foo), retries={"output": 10})
    result = await agent.run("Hello", retries={"output": 2})
    assert result.status is RunStatus.FAILED and len(model.requests) == 3

    calls = 0

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        nonlocal calls
        calls += 1
        return PModelResponse(parts=[ToolCallPart(info.output_tools[0].name, '{"bad_field": 1}')])

    their_agent = PAgent(
        PFunctionModel(their_model), output_type=PToolOutput(Foo), retries={"output": 10}
    )
    with pytest.raises(UnexpectedModelBehavior, match=r"Exceeded maximum output retries \(2\)"):
        await their_agent.run("Hello", retries={"output": 2})
    assert calls == len(model.requests)

    again = ScriptedModel([bad] * 10 + [tool_call("final_result", a=1, b="x")])
    result = await agent.run("Hello", model=again)
    assert result.status is RunStatus.COMPLETED and result.output == Foo(a=1, b="x")
    assert len(again.requests) == 11


class Weather(BaseModel):
    temperature: float
    description: str


async def test_prompted_output_function_with_retry() -> None:
    # ports tests/test_agent.py::test_prompted_output_function_with_retry. Kept on purpose:
    # PromptedOutput of an output function is refused when the agent is made (docs/harness.md,
    # "Not supported"), naming what to offer instead; the same function as the output type
    # (an output tool) has its ModelRetry sent back and its next call's return is the output,
    # as pydantic-ai's prompted function gives it.
    def get_weather(city: str) -> Weather:
        """Get the weather."""
        if city != "Mexico City":
            raise ModelRetry("City not found, I only know Mexico City")
        return Weather(temperature=28.7, description="sunny")

    def their_get_weather(city: str) -> Weather:
        if city != "Mexico City":
            raise PModelRetry("City not found, I only know Mexico City")
        return Weather(temperature=28.7, description="sunny")

    with pytest.raises(UnsupportedOutputError, match="offer an output function as output_type=fn"):
        Agent("a", ScriptedModel([]), output_type=PromptedOutput(get_weather))

    texts = ['{"city": "New York City"}', '{"city": "Mexico City"}']

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        return PModelResponse(parts=[TextPart(texts[0] if len(messages) == 1 else texts[1])])

    their = PAgent(PFunctionModel(their_model), output_type=PPromptedOutput(their_get_weather))
    their_result = await their.run("New York City")

    model = ScriptedModel(
        [
            tool_call("final_result", city="New York City"),
            tool_call("final_result", city="Mexico City"),
        ]
    )
    result = await Agent("a", model, output_type=get_weather).run("New York City")
    assert result.output == their_result.output == Weather(temperature=28.7, description="sunny")
    (ask,) = tool_messages(model.requests[1].messages)
    assert "City not found, I only know Mexico City" in ask.content
    assert len(model.requests) == len(their_result.all_messages()) // 2 == 2


# --- a tool's retry count: failure wins within one response (tests/test_toolsets.py) -------


@pytest.mark.parametrize("fails_first", [True, False])
async def test_a_tool_that_fails_and_succeeds_in_one_response_keeps_its_failure(
    fails_first: bool,
) -> None:
    # ports tests/test_toolsets.py::
    # test_tool_manager_retry_count_increments_when_same_tool_fails_and_succeeds_in_one_step:
    # a model that pairs a failing and a succeeding call of one tool in every response
    # (pydantic-ai's #6581) is stopped by the tool's cap: the success does not wipe the
    # failure beside it, in either order. Its count was reset by the success, and such a
    # model ran on until a run limit stopped it.
    def flaky_factory(retry: type[Exception]) -> tuple[Any, list[int]]:
        args: list[int] = []

        def flaky_tool(x: int) -> int:
            """Fails on x=1."""
            args.append(x)
            if x == 1:
                raise retry("This call fails")
            return x * 2

        return flaky_tool, args

    pair = [{"x": 1}, {"x": 3}] if fails_first else [{"x": 3}, {"x": 1}]

    their_tool, their_args = flaky_factory(PModelRetry)

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        return PModelResponse(
            parts=[ToolCallPart("flaky_tool", a, tool_call_id=f"c{i}") for i, a in enumerate(pair)]
        )

    their_agent = PAgent(PFunctionModel(their_model), tools=[PTool(their_tool)], retries=2)
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries count of 2"):
        await their_agent.run("go")

    our_fn, our_args = flaky_factory(ModelRetry)
    model = FunctionModel(lambda request: tool_calls(*(tool_call("flaky_tool", **a) for a in pair)))
    agent = Agent("a", model, tools=[tool(our_fn)], retries=2, limits=RunLimits(max_model_calls=10))
    result = await agent.run("go")
    assert result.status is RunStatus.FAILED
    assert "tool 'flaky_tool' exceeded max retries count of 2" in (result.error or "")
    # three responses each, the third failure past the cap of 2 (pydantic-ai runs a
    # response's calls concurrently, in no set order, so the success beside the last failure
    # may or may not have run; our run ends at the failed call)
    assert their_args.count(1) == 3 and their_args.count(3) in (2, 3)
    ordered = [a["x"] for a in pair] * 3
    assert our_args == (ordered[:-1] if fails_first else ordered)


# --- a toolset tool's prepare and retries see the tools' budget (tests/test_toolsets.py) ---


@pytest.mark.parametrize(
    ("retries", "expected"), [({"tools": 3, "output": 3}, 3), ({"tools": 1, "output": 5}, 1)]
)
async def test_prepare_function_sees_the_tools_max_retries(
    retries: dict[str, int], expected: int
) -> None:
    # ports ::test_prepare_function_sees_agent_max_retries and
    # ::test_prepare_function_sees_tool_retries_not_output_retries: a toolset tool's prepare
    # sees the agent's tools' budget (not its output budget) on ctx.max_retries, and its
    # first call is no last attempt
    captured: list[tuple[int | None, bool]] = []

    async def capture(ctx: RunContext, spec: ToolSpec) -> ToolSpec:
        captured.append((ctx.max_retries, ctx.last_attempt))
        return spec

    toolset = FunctionToolset()

    @toolset.tool_plain(prepare=capture)
    def my_tool(x: int) -> int:
        """A tool."""
        return x

    model = ScriptedModel([tool_call("my_tool", x=0), reply("done")])
    result = await Agent("a", model, toolsets=[toolset], retries=retries).run("call my_tool")
    assert result.output == "done"
    assert captured[0] == (expected, False)

    their_captured: list[tuple[int, bool]] = []

    async def their_capture(ctx: PRunContext[None], tool_def: ToolDefinition) -> ToolDefinition:
        their_captured.append((ctx.max_retries, ctx.last_attempt))
        return tool_def

    their_toolset = PFunctionToolset()

    @their_toolset.tool_plain(prepare=their_capture)
    def their_tool(x: int) -> int:
        """A tool."""
        return x

    their = PAgent(PTestModel(), toolsets=[their_toolset], retries=retries)
    await their.run("call my_tool")
    assert their_captured[0] == captured[0]


async def test_toolset_tool_max_retries_none_uses_tool_retries_not_output_retries() -> None:
    # ports ::test_toolset_tool_max_retries_none_uses_tool_retries_not_output_retries: a
    # toolset tool with no cap of its own takes the agent's tools' budget (1: the first call
    # and one retry), not its output budget (5)
    attempts: list[int] = []
    toolset = FunctionToolset()

    @toolset.tool_plain
    def always_fails(x: int) -> int:
        """A tool that always fails."""
        attempts.append(x)
        raise ModelRetry("Always fails")

    model = FunctionModel(lambda request: tool_call("always_fails", x=0))
    agent = Agent("a", model, toolsets=[toolset], retries={"tools": 1, "output": 5})
    result = await agent.run("call always_fails")
    assert result.status is RunStatus.FAILED
    assert "exceeded max retries count of 1" in (result.error or "")
    assert len(attempts) == 2
    first, _ = tool_messages(result.messages)
    assert first.content.startswith("Always fails")


# --- the run's limits, seen from a tool (tests/test_run_context_usage_limits.py) ----------


async def test_usage_limits_visible_in_tool_run_and_stream() -> None:
    # ports ::test_usage_limits_visible_in_tool_run_sync, ::..._run_and_stream and
    # ::test_usage_limits_defaults_to_effective_limits_during_run: a tool sees the limits
    # the run was started with (pydantic-ai's ctx.usage_limits; ours ctx.info.limits), by
    # run and by run_stream, and the agent's own when the run gives none
    seen: list[RunLimits] = []

    @tool
    def record_limits(ctx: RunContext) -> str:
        """Record the limits."""
        seen.append(ctx.info.limits)
        return "done"

    limits = RunLimits(max_model_calls=10, max_tokens=5000)
    model = ScriptedModel([tool_call("record_limits"), reply("x")] * 2)
    agent = Agent("a", model, tools=[record_limits])
    assert (await agent.run("hello", limits=limits)).output == "x"
    events = [e async for e in agent.run_stream("hello", limits=limits)]
    assert events[-1].type == "run.completed"
    own = RunLimits(max_model_calls=3)
    model = ScriptedModel([tool_call("record_limits"), reply("x")])
    assert (await Agent("b", model, tools=[record_limits], limits=own).run("hi")).output == "x"
    assert seen == [limits, limits, own]

    their_seen: list[Any] = []
    their = PAgent(PTestModel(call_tools=["record_limits"]))

    @their.tool(name="record_limits")
    def their_record_limits(ctx: PRunContext[None]) -> str:
        their_seen.append(ctx.usage_limits)
        return "done"

    their_limits = PUsageLimits(request_limit=10, total_tokens_limit=5000)
    await their.run("hello", usage_limits=their_limits)
    assert their_seen == [their_limits]


async def test_two_failed_calls_of_a_tool_in_one_response_count_two() -> None:
    # beside tests/test_toolsets.py::test_tool_manager_multiple_failed_tools. Kept on purpose:
    # pydantic-ai counts a response's failures of a tool once (its calls run together and
    # all see one ctx.retry: 0, 0, 1, 1, ...); ours run one at a time, each between its own
    # boundaries, and count each failed call (docs/harness.md "Per-tool retry caps"), so a
    # model failing twice per response reaches a cap of 3 at its fourth failed call.
    def make(retry: type[Exception], seen: list[int]) -> Any:
        def flaky(ctx: Any, x: int) -> int:
            """Always fails."""
            seen.append(ctx.retry)
            raise retry("no")

        return flaky

    their_seen: list[int] = []

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        n = len(messages)
        return PModelResponse(
            parts=[
                ToolCallPart("flaky", {"x": 1}, tool_call_id=f"a{n}"),
                ToolCallPart("flaky", {"x": 2}, tool_call_id=f"b{n}"),
            ]
        )

    their_fn = make(PModelRetry, their_seen)
    their_fn.__annotations__ = {"ctx": PRunContext[None], "x": int, "return": int}
    their = PAgent(PFunctionModel(their_model), tools=[PTool(their_fn)], retries=3)
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries count of 3"):
        await their.run("go")
    # their last pair runs in two threads: the first's failure may end the run before the
    # second has noted its retry (seen once, on a loaded machine)
    assert their_seen in ([0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 1, 1, 2, 2, 3])

    seen: list[int] = []
    our_fn = make(ModelRetry, seen)
    our_fn.__annotations__ = {"ctx": RunContext, "x": int, "return": int}
    model = FunctionModel(
        lambda request: tool_calls(tool_call("flaky", x=1), tool_call("flaky", x=2))
    )
    result = await Agent("a", model, tools=[tool(our_fn)], retries=3).run("go")
    assert result.status is RunStatus.FAILED
    assert "tool 'flaky' exceeded max retries count of 3" in (result.error or "")
    assert seen == [0, 1, 2, 3]


async def test_a_toolsets_cap_survives_another_tools_response_in_between() -> None:
    # ports tests/test_toolsets.py::test_tool_manager_retry_count_survives_interleaved_successful_step
    # (through a run, not its ToolManager): a FunctionToolset(max_retries=2) tool's count is
    # kept over a response that calls only another tool, and its third failure past the cap
    # of 2 ends the run
    retry_values: list[int] = []
    toolset = FunctionToolset(max_retries=2)

    @toolset.tool
    def failing_tool(ctx: RunContext, x: int) -> int:
        """A tool that always fails."""
        retry_values.append(ctx.retry)
        raise ModelRetry("This tool always fails")

    @toolset.tool_plain
    def other_tool(x: int) -> int:
        """A tool that works."""
        return x * 2

    script: list[Any] = [
        tool_call("failing_tool", x=1),
        tool_call("other_tool", x=3),
        tool_call("failing_tool", x=1),
        tool_call("other_tool", x=3),
        tool_call("failing_tool", x=1),
    ]
    result = await Agent("a", ScriptedModel(script), toolsets=[toolset]).run("go")
    assert result.status is RunStatus.FAILED
    assert "tool 'failing_tool' exceeded max retries count of 2" in (result.error or "")
    assert retry_values == [0, 1, 2]
    assert [m.content for m in tool_messages(result.messages)][1::2] == ["6", "6"]
