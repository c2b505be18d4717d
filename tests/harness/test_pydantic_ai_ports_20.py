"""pydantic-ai's tool ``args_validator=``, its per-request ``UsageLimits`` and ``Agent.iter``,
ported (a twentieth batch; see test_pydantic_ai_ports.py to _19).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_tools.py``,
``tests/test_usage_limits.py``, ``tests/test_agent.py``); most run pydantic-ai itself beside
ours (its ``TestModel`` or ``FunctionModel``) on the same conversation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent as PAgent
from pydantic_ai import ModelRetry as PModelRetry
from pydantic_ai import RunContext as PRunContext
from pydantic_ai import UnexpectedModelBehavior
from pydantic_ai.exceptions import UsageLimitExceeded as PUsageLimitExceeded
from pydantic_ai.models.test import TestModel as PTestModel
from pydantic_ai.usage import UsageLimits as PUsageLimits

from tinyagents import (
    Agent,
    FunctionToolset,
    ModelRetry,
    RunContext,
    RunLimits,
    RunStatus,
    Runtime,
    ToolFailed,
    tool,
)
from tinyagents.errors import ArgumentError, ConfigurationError
from tinyagents.harness import FunctionTool, ModelResponse, Usage
from tinyagents.testkit import EventRecorder, ScriptedModel, tool_call


class MyArgs(BaseModel):
    x: int
    y: int


def tool_results(result: Any) -> list[str]:
    return [m.content for m in result.messages if m.role == "tool"]


# --- a tool's args_validator (tests/test_tools.py) -------------------------------------------


async def test_args_validator_success() -> None:
    # ports ::test_args_validator_success, ::test_args_validator_with_deps and
    # ::test_args_validator_context_tool_name: the validator is given the run's context and
    # the call's validated arguments, by name, before the tool runs
    their_seen: list[tuple[Any, ...]] = []

    def their_validator(ctx: PRunContext[int], x: int, y: int) -> None:
        their_seen.append((ctx.deps, ctx.tool_name, x, y))

    their = PAgent(PTestModel(call_tools=["add_numbers"]), deps_type=int)

    @their.tool(args_validator=their_validator)
    def add_numbers(ctx: PRunContext[int], x: int, y: int) -> int:
        return x + y

    await their.run("go", deps=42)
    assert their_seen == [(42, "add_numbers", 0, 0)]

    seen: list[tuple[Any, ...]] = []
    ran: list[int] = []

    def validator(ctx: RunContext, x: int, y: int) -> None:
        seen.append((ctx.deps, ctx.tool_name, x, y))
        ran.append(len(seen))

    agent = Agent("a", ScriptedModel([tool_call("add", {"x": "1", "y": 2}), "done"]))

    @agent.tool(args_validator=validator)
    def add(ctx: RunContext, x: int, y: int) -> int:
        ran.append(-1)
        return x + y

    result = await agent.run("go", deps=42)
    assert result.status is RunStatus.COMPLETED, result.error
    assert seen == [(42, "add", 1, 2)]  # "1" validated to 1 first
    assert ran == [1, -1]  # the validator before the tool
    assert tool_results(result) == ["3"]


async def test_args_validator_async_and_tool_plain() -> None:
    # ports ::test_args_validator_async and ::test_args_validator_tool_plain: an async
    # validator is awaited; a tool_plain's validator takes the context all the same
    seen: list[Any] = []

    async def validator(ctx: RunContext, x: int) -> None:
        seen.append((ctx.deps, x))

    agent = Agent("a", ScriptedModel([tool_call("double", {"x": 4}), "done"]))

    @agent.tool_plain(args_validator=validator)
    async def double(x: int) -> int:
        return 2 * x

    result = await agent.run("go", deps=7)
    assert result.status is RunStatus.COMPLETED and tool_results(result) == ["8"]
    assert seen == [(7, 4)]


async def test_args_validator_context_retry() -> None:
    # ports ::test_args_validator_context_retry: ModelRetry from the validator sends the
    # call back to the model, counted as the tool's failure (ctx.retry), and the tool does
    # not run for it
    async def their_run() -> list[int]:
        retries: list[int] = []

        def validator(ctx: PRunContext[None], x: int) -> None:
            retries.append(ctx.retry)
            if len(retries) == 1:
                raise PModelRetry("First attempt fails")

        agent = PAgent(PTestModel(call_tools=["f"]))

        @agent.tool(args_validator=validator, retries=2)
        def f(ctx: PRunContext[None], x: int) -> int:
            return x

        await agent.run("go")
        return retries

    assert await their_run() == [0, 1]

    retries: list[int] = []
    ran: list[int] = []

    def validator(ctx: RunContext, x: int) -> None:
        retries.append(ctx.retry)
        if len(retries) == 1:
            raise ModelRetry("First attempt fails")

    agent = Agent("a", ScriptedModel([tool_call("f", {"x": 1}), tool_call("f", {"x": 2}), "done"]))

    @agent.tool(args_validator=validator, retries=2)
    def f(ctx: RunContext, x: int) -> int:
        ran.append(x)
        return x

    result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert retries == [0, 1] and ran == [2]
    first, second = tool_results(result)
    assert "First attempt fails" in first and second == "2"


async def test_args_validator_max_retries_exceeded() -> None:
    # ports ::test_args_validator_max_retries_exceeded: a validator that always refuses
    # ends the run once the tool's retries are spent
    def always_fail(ctx: Any, x: int) -> None:
        raise PModelRetry("Always fails")

    their = PAgent(PTestModel(call_tools=["f"]))

    @their.tool(args_validator=always_fail, retries=2)
    def f(ctx: PRunContext[None], x: int) -> int:  # pragma: no cover
        return x

    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        await their.run("go")

    def refuse(ctx: Any, x: int) -> None:
        raise ModelRetry("Always fails")

    agent = Agent("a", ScriptedModel([tool_call("g", {"x": 1})] * 4))

    @agent.tool(args_validator=refuse, retries=2)
    def g(ctx: RunContext, x: int) -> int:  # pragma: no cover
        raise AssertionError("never called")

    result = await agent.run("go")
    assert result.status is RunStatus.FAILED
    assert "exceeded max retries" in (result.error or "")


async def test_args_validator_tool_failed() -> None:
    # the validator's ToolFailed (pydantic-ai's docstring): a terminal failure the model
    # adapts to, not counted against the tool's retries; the tool does not run
    retries: list[int] = []

    def validator(ctx: RunContext, path: str) -> None:
        retries.append(ctx.retry)
        raise ToolFailed(f"{path} does not exist")

    agent = Agent(
        "a",
        ScriptedModel([tool_call("read", {"path": "a"}), tool_call("read", {"path": "b"}), "ok"]),
    )

    @agent.tool(args_validator=validator, retries=0)
    def read(ctx: RunContext, path: str) -> str:  # pragma: no cover
        raise AssertionError("never called")

    result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert retries == [0, 0]
    assert ["does not exist" in r for r in tool_results(result)] == [True, True]


async def test_args_validator_single_base_model_arg() -> None:
    # ports ::test_args_validator_single_base_model_arg: a tool of one model argument (its
    # fields offered as the tool's) gives its validator the model, by the parameter's name
    calls: list[MyArgs] = []

    def validator(ctx: RunContext, argument: MyArgs) -> None:
        calls.append(argument)

    @tool(args_validator=validator)
    def add_numbers(ctx: RunContext, argument: MyArgs) -> int:
        return argument.x + argument.y

    model = ScriptedModel([tool_call("add_numbers", {"x": 1, "y": 2}), "ok"])
    agent = Agent("a", model, tools=[add_numbers])
    result = await agent.run("go")
    assert tool_results(result) == ["3"] and calls == [MyArgs(x=1, y=2)]


async def test_args_validator_toolset_and_with_prepare() -> None:
    # ports ::test_args_validator_toolset and ::test_args_validator_with_prepare: a
    # toolset's tool takes a validator too, and a prepare beside it
    seen: list[str] = []

    def validator(ctx: RunContext, x: int) -> None:
        seen.append(f"validated {x}")

    def prepare(ctx: RunContext, spec: Any) -> Any:
        seen.append("prepared")
        return spec

    toolset = FunctionToolset()

    @toolset.tool(args_validator=validator, prepare=prepare)
    def echo(ctx: RunContext, x: int) -> int:
        seen.append(f"ran {x}")
        return x

    agent = Agent("a", ScriptedModel([tool_call("echo", {"x": 5}), "ok"]), toolsets=[toolset])
    result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert seen == ["prepared", "validated 5", "ran 5", "prepared"]


async def test_args_validator_tool_direct() -> None:
    # ports ::test_args_validator_tool_direct: pydantic-ai's Tool(fn, args_validator=...) is
    # our FunctionTool(fn, args_validator=...)
    seen: list[int] = []

    def validator(ctx: RunContext, x: int, y: int) -> None:
        seen.append(x + y)

    def add_numbers(ctx: RunContext, x: int, y: int) -> int:
        return x + y

    made = FunctionTool(add_numbers, args_validator=validator)
    model = ScriptedModel([tool_call("add_numbers", {"x": 1, "y": 2}), "ok"])
    result = await Agent("a", model, tools=[made]).run("go")
    assert tool_results(result) == ["3"] and seen == [3]


def test_args_validator_refused_when_not_a_function() -> None:
    # a validator that is no function (or takes no context) is refused with the tool, not
    # at its first call
    with pytest.raises(ConfigurationError, match="args_validator"):
        tool(args_validator="check")(lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="args_validator"):

        @tool(args_validator=lambda: None)
        def f(x: int) -> int:  # pragma: no cover
            return x


# --- per-request input tokens and cost (tests/test_usage_limits.py) --------------------------


def answer(text: str, *, input_tokens: int, cost: float | None = None) -> ModelResponse:
    return ModelResponse(
        text=text, usage=Usage(input_tokens=input_tokens, output_tokens=1, cost=cost)
    )


def called(name: str, *, input_tokens: int, cost: float | None = None) -> ModelResponse:
    return dataclasses.replace(
        tool_call(name), usage=Usage(input_tokens=input_tokens, output_tokens=1, cost=cost)
    )


@tool
def ping() -> str:
    return "pong"


async def test_per_request_input_tokens_limit_post_response() -> None:
    # ports ::test_per_request_input_tokens_limit_post_response and ::..._not_exceeded: a
    # response whose request took more input than the cap ends the run, checked against
    # what the provider reported
    with pytest.raises(PUsageLimitExceeded, match="per_request_input_tokens_limit of 5"):
        await PAgent(PTestModel()).run(
            "Hello", usage_limits=PUsageLimits(per_request_input_tokens_limit=5)
        )
    assert (
        await PAgent(PTestModel()).run(
            "Hello", usage_limits=PUsageLimits(per_request_input_tokens_limit=100)
        )
    ).output == "success (no tool calls)"

    limits = RunLimits(max_input_tokens_per_request=5)
    result = await Agent("a", ScriptedModel([answer("hi", input_tokens=51)]), limits=limits).run(
        "Hello"
    )
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "'max_input_tokens_per_request'" in (result.error or "")
    assert "used 51, allowed 5" in (result.error or "")
    limits = RunLimits(max_input_tokens_per_request=100)
    result = await Agent("a", ScriptedModel([answer("hi", input_tokens=51)]), limits=limits).run(
        "Hello"
    )
    assert result.status is RunStatus.COMPLETED and result.output == "hi"


async def test_per_request_input_tokens_limit_is_not_cumulative() -> None:
    # ports ::test_per_request_input_tokens_limit_is_not_cumulative: each request is held to
    # the cap alone; the run's inputs together may pass it (a cumulative cap would not)
    def script() -> ScriptedModel:
        return ScriptedModel(
            [called("ping", input_tokens=60), called("ping", input_tokens=70), "done"]
        )

    per_request = RunLimits(max_input_tokens_per_request=100)
    result = await Agent("a", script(), tools=[ping], limits=per_request).run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.usage["input_tokens"] > 100
    cumulative = RunLimits(max_input_tokens=100)
    result = await Agent("a", script(), tools=[ping], limits=cumulative).run("go")
    assert result.status is RunStatus.LIMIT_EXCEEDED and "'max_input_tokens'" in (
        result.error or ""
    )


async def test_cost_limit() -> None:
    # ports ::test_check_cost_exceeded and ::test_check_before_request_cost_exceeded: a run
    # whose responses' cost (USD, as the provider's price gives it) passes max_cost ends
    # limit_exceeded at once, and one that spent it all makes no further request
    model = ScriptedModel([called("ping", input_tokens=1, cost=0.02), "never"])
    limits = RunLimits(max_cost=0.01)
    result = await Agent("a", model, tools=[ping], limits=limits).run("go")
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "'max_cost'" in (result.error or "") and len(model.requests) == 1
    assert not tool_results(result)[0].startswith("pong")  # its tool calls are not run

    model = ScriptedModel([called("ping", input_tokens=1, cost=0.01), "never"])
    result = await Agent("a", model, tools=[ping], limits=limits).run("go")
    assert result.status is RunStatus.LIMIT_EXCEEDED and len(model.requests) == 1

    model = ScriptedModel(
        [called("ping", input_tokens=1, cost=0.004), answer("ok", input_tokens=1)]
    )
    result = await Agent("a", model, tools=[ping], limits=limits).run("go")
    assert result.status is RunStatus.COMPLETED and result.output == "ok"


def test_new_limits_are_checked_as_the_others() -> None:
    with pytest.raises(ArgumentError, match="max_input_tokens_per_request"):
        RunLimits(max_input_tokens_per_request=0)
    with pytest.raises(ArgumentError, match="max_cost"):
        RunLimits(max_cost=float("nan"))
    assert RunLimits(max_cost=1).max_cost == 1


async def test_update_budget_narrows_the_per_request_cap_mid_run(rt: Runtime) -> None:
    # steering: an update_budget sent while the run works lands at its next boundary (after
    # the tool's result), and the next response, within the old cap, is past the new one
    model = ScriptedModel(
        [called("work", input_tokens=40), called("work", input_tokens=40), "never"]
    )
    sent: list[Any] = []

    @tool
    async def work(ctx: RunContext) -> str:
        if not sent:
            handle = rt.runs.get(ctx.info.run_id)
            sent.append(await handle.update_budget(max_input_tokens_per_request=30))
        return "worked"

    limits = RunLimits(max_input_tokens_per_request=50)
    handle = await rt.start(Agent("a", model, tools=[work], limits=limits), "go")
    result = await handle.result()
    assert sent[0].accepted
    assert result.status is RunStatus.LIMIT_EXCEEDED, result.error
    assert "used 40, allowed 30" in (result.error or "")
    assert handle.info.limits.max_input_tokens_per_request == 30
    assert len(model.requests) == 2


async def test_a_child_is_bounded_by_its_parents_per_request_cap_and_cost(rt: Runtime) -> None:
    # a child started under a run gets no larger per-request cap than the run's, and no
    # more cost than the run has left
    seen: list[RunLimits] = []

    @tool
    async def spawn(ctx: RunContext) -> str:
        child = await rt.start(
            Agent("c", ScriptedModel(["y"])),
            "go",
            parent=ctx.info.run_id,
            limits=RunLimits(max_input_tokens_per_request=500, max_cost=5.0),
        )
        seen.append(child.info.limits)
        return str((await child.result()).status)

    model = ScriptedModel([called("spawn", input_tokens=1, cost=0.25), "done"])
    limits = RunLimits(max_input_tokens_per_request=100, max_cost=1.0)
    result = await (await rt.start(Agent("p", model, tools=[spawn], limits=limits), "go")).result()
    assert result.status is RunStatus.COMPLETED, result.error
    (child_limits,) = seen
    assert child_limits.max_input_tokens_per_request == 100
    assert child_limits.max_cost == pytest.approx(0.75)


# --- Agent.iter (tests/test_agent.py) --------------------------------------------------------


async def test_agent_iter_is_not_offered_its_steps_are_the_runs_events(
    rt: Runtime, recorder: EventRecorder
) -> None:
    # tests/test_agent.py::test_agent_iter (and test_streaming.py's iter tests): pydantic-ai's
    # agent.iter(...) hands its caller the graph's nodes, to run (agent_run.next(node)) or
    # to replace one by another. Not offered, on purpose (docs/harness.md, "Not offered"):
    # a run's steps are driven by its loop, and what may change a run between two steps is
    # steering, applied at their safe boundaries in one deterministic order, with an event
    # for each command; a caller driving the nodes would be a second, unordered way in. The
    # same steps are seen as the run's events: one model.request / model.response pair per
    # ModelRequestNode / CallToolsNode, and a tool.call / tool.result for each call.
    assert not hasattr(Agent, "iter")

    their = PAgent(PTestModel(call_tools=["ping"]))

    @their.tool_plain
    def ping() -> str:
        return "pong"

    async with their.iter("go") as run:
        nodes = [type(node).__name__ async for node in run]
    assert nodes == [
        "UserPromptNode",
        "ModelRequestNode",
        "CallToolsNode",
        "ModelRequestNode",
        "CallToolsNode",
        "End",
    ]

    model = ScriptedModel([tool_call("ping"), "done"])
    result = await (await rt.start(Agent("a", model, tools=[ping]), "go")).result()
    assert result.status is RunStatus.COMPLETED
    steps = [
        t
        for t in recorder.types()
        if t in ("model.request", "model.response", "tool.call", "tool.result")
    ]
    assert steps == [
        "model.request",
        "model.response",
        "tool.call",
        "tool.result",
        "model.request",
        "model.response",
    ]
