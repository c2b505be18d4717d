"""pydantic-ai's model settings merged over three levels, a tool retried once, tool retries in
concurrent runs, a stateful toolset under concurrent runs, a failing tool beside a slow one,
a response of text and a tool call, ``capture_run_messages`` around a raising block and a
sequential tool, ported (a twenty-third batch; see test_pydantic_ai_ports.py to _22); then
where features meet: steering, pausing and budget changes delivered at the boundary between
a tool's or an output validator's retries, and a sub-agent's retries spending its parent's
budget.

Each port names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``,
``tests/test_toolsets.py``, ``tests/test_usage_limits.py``,
``tests/models/test_model_settings.py``, ``tests/models/test_model_test.py``); most run
pydantic-ai itself beside ours on the same conversation.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent as PAgent
from pydantic_ai import ModelRetry as PModelRetry
from pydantic_ai import RunContext as PRunContext
from pydantic_ai import capture_run_messages as pcapture_run_messages
from pydantic_ai.messages import (
    ModelMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.messages import ModelResponse as PModelResponse
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.models.function import FunctionModel as PFunctionModel
from pydantic_ai.models.test import TestModel as PTestModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits as PUsageLimits

from tinyagents import (
    Agent,
    ModelRetry,
    RunContext,
    RunLimits,
    RunStatus,
    Runtime,
    ToolOutput,
    capture_run_messages,
    tool,
)
from tinyagents.harness import (
    LiteLLMModel,
    ModelRequest,
    ModelResponse,
    SubAgentTool,
    Tool,
    Toolset,
)
from tinyagents.testkit import FunctionModel, OpenAICompatServer, ScriptedModel, tool_call

Pair = tuple[str, str]


def ours(messages: Any) -> list[Pair]:
    return [(m.role, m.content) for m in messages]


def settings_echo() -> FunctionModel:
    return FunctionModel(lambda request: json.dumps(request.settings, sort_keys=True))


def their_settings_capture() -> tuple[list[Any], PFunctionModel]:
    captured: list[Any] = []

    def capture(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        captured.append(info.model_settings)
        return PModelResponse(parts=[TextPart("captured")])

    return captured, PFunctionModel(capture)


# --- model settings over three levels (tests/models/test_model_settings.py) -----------------


async def test_settings_merge_hierarchy() -> None:
    # ports ::test_settings_merge_hierarchy: the model's settings, then the agent's, then the
    # run's, each over the one before. Ours: a LiteLLMModel's keyword settings are the
    # model's, sent under the request's (the agent's with the run's merged over them); the
    # local OpenAI-compatible server records what was sent.
    captured: list[Any] = []

    def capture(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        captured.append(info.model_settings)
        return PModelResponse(parts=[TextPart("captured")])

    model_settings = ModelSettings(max_tokens=100, temperature=0.5, top_p=0.8, seed=123)
    agent_settings = ModelSettings(max_tokens=200, temperature=0.6, frequency_penalty=0.1)
    run_settings = ModelSettings(temperature=0.7, presence_penalty=0.2, seed=456)
    theirs = PAgent(PFunctionModel(capture, settings=model_settings), model_settings=agent_settings)
    assert (await theirs.run("test", model_settings=run_settings)).output == "captured"

    async with OpenAICompatServer(["captured"]) as server:
        model = LiteLLMModel(
            "openai/test-model",
            api_base=server.base_url,
            api_key="sk-test",
            max_tokens=100,
            temperature=0.5,
            top_p=0.8,
            seed=123,
        )
        agent = Agent("a", model, model_settings=dict(agent_settings))
        result = await agent.run("test", model_settings=dict(run_settings))
    assert result.output == "captured"
    (sent,) = server.requests
    for key in ("temperature", "top_p", "seed", "frequency_penalty", "presence_penalty"):
        assert sent[key] == captured[0][key], key
    assert (sent["temperature"], sent["seed"], sent["top_p"]) == (0.7, 456, 0.8)
    # one difference, on purpose (docs/harness.md, *Limits*): a max_tokens the model was
    # made with is a cap the request's cannot raise (the request's max_tokens is also where
    # the run's token budget goes, which is never a raise), so the smaller is sent; in
    # pydantic-ai the agent's 200 wins over the model's 100
    assert captured[0]["max_tokens"] == 200
    assert sent["max_tokens"] == 100


def test_function_model_settings() -> None:
    # ports ::test_function_model_settings: a model keeps the settings it was made with (None
    # without). Ours: the testkit's FunctionModel takes none (a request's settings are the
    # agent's and the run's, ``request.settings``); a LiteLLMModel's keyword settings are
    # kept as given, sent under each request's
    settings = ModelSettings(max_tokens=200, temperature=0.7)

    def simple_response(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        return PModelResponse(parts=[TextPart("response")])  # pragma: no cover

    assert PFunctionModel(simple_response, settings=settings).settings == settings
    assert PFunctionModel(simple_response).settings is None

    made = LiteLLMModel("openai/gpt-4o-mini", **settings)
    assert made.litellm_kwargs == {"max_tokens": 200, "temperature": 0.7}
    assert LiteLLMModel("openai/gpt-4o-mini").litellm_kwargs == {}


async def test_none_settings_in_hierarchy() -> None:
    # ports ::test_none_settings_in_hierarchy: a level with no settings (the model's, the
    # run's model_settings=None) leaves the others as they are
    captured, model = their_settings_capture()
    theirs = PAgent(model, model_settings=ModelSettings(max_tokens=150, temperature=0.5))
    await theirs.run("test", model_settings=None)
    assert captured[0] == {"max_tokens": 150, "temperature": 0.5}

    agent = Agent("a", settings_echo(), model_settings={"max_tokens": 150, "temperature": 0.5})
    result = await agent.run("test", model_settings=None)
    assert json.loads(result.output) == captured[0]


async def test_empty_settings_objects() -> None:
    # ports ::test_empty_settings_objects: empty settings at every level and one setting on
    # the run: the request carries that one setting alone
    captured, model = their_settings_capture()
    theirs = PAgent(model, model_settings=ModelSettings())
    await theirs.run("test", model_settings=ModelSettings(temperature=0.75))
    assert captured[0] == {"temperature": 0.75}

    agent = Agent("a", settings_echo(), model_settings={})
    result = await agent.run("test", model_settings={"temperature": 0.75})
    assert json.loads(result.output) == captured[0]


# --- a per-request cap not reached (tests/test_usage_limits.py) -------------------------------


async def test_per_request_input_tokens_limit_not_exceeded() -> None:
    # ports ::test_per_request_input_tokens_limit_not_exceeded: a request below the
    # per-request input cap goes through and the run completes
    theirs = PAgent(PTestModel())
    their_result = await theirs.run(
        "Hello", usage_limits=PUsageLimits(per_request_input_tokens_limit=100)
    )
    assert their_result.output == "success (no tool calls)"

    limits = RunLimits(max_input_tokens_per_request=100)
    result = await Agent("a", ScriptedModel(["success"]), limits=limits).run("Hello")
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == "success"
    assert 0 < result.usage["input_tokens"] <= 100


# --- a tool retried once (tests/models/test_model_test.py) ------------------------------------


async def test_tool_retry() -> None:
    # ports ::test_tool_retry: a tool's first call raises ModelRetry, the model calls it again
    # with the same arguments and the second call's result answers it; the transcript holds
    # the call, the retry message as its result, the call again, its result, the answer
    their_calls: list[int] = []
    theirs = PAgent(PTestModel())

    @theirs.tool_plain
    async def my_ret(x: int) -> str:
        their_calls.append(x)
        if len(their_calls) == 1:
            raise PModelRetry("First call failed")
        return str(x + 1)

    their_result = await theirs.run("Hello")
    assert their_result.output == '{"my_ret":"1"}'
    # the retry's part (a RetryPromptPart, or in the installed version a ToolReturnPart
    # marked as a retry), then the second call's result
    their_parts = [
        part.content
        for message in their_result.all_messages()
        for part in message.parts
        if isinstance(part, RetryPromptPart | ToolReturnPart)
    ]
    assert their_parts == ["First call failed", "1"]

    calls: list[tuple[int, int]] = []

    @tool
    async def my_ret_ours(ctx: RunContext, x: int) -> str:
        calls.append((x, ctx.retry))
        if len(calls) == 1:
            raise ModelRetry("First call failed")
        return str(x + 1)

    model = ScriptedModel(
        [
            tool_call("my_ret_ours", x=0),
            tool_call("my_ret_ours", x=0),
            '{"my_ret":"1"}',
        ]
    )
    result = await Agent("a", model, tools=[my_ret_ours]).run("Hello")
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == their_result.output
    assert calls == [(0, 0), (0, 1)]  # the second call knows the first failed (ctx.retry)
    assert ours(result.messages) == [
        ("user", "Hello"),
        ("assistant", ""),
        ("tool", "First call failed"),
        ("assistant", ""),
        ("tool", "1"),
        ("assistant", '{"my_ret":"1"}'),
    ]
    assert result.messages[2].metadata.get("error") is True
    assert result.usage["tool_calls"] == 2


class OutputModel(BaseModel):
    x: int
    y: str


async def test_multiple_concurrent_tool_retries() -> None:
    # ports ::test_multiple_concurrent_tool_retries: five runs of one agent at once, each
    # retrying its tool before any of them may finish: each run counts its own retries
    # (retries={"tools": 2}), none sees another's, and all complete
    run_ids = list(range(5))
    their_retried: set[int] = set()
    their_event = asyncio.Event()
    theirs = PAgent(
        "test", deps_type=int, output_type=OutputModel, retries={"tools": 2, "output": 2}
    )

    @theirs.tool
    async def tool_that_must_be_retried(ctx: PRunContext[int]) -> None:
        if ctx.deps not in their_retried:
            their_retried.add(ctx.deps)
            raise PModelRetry("Fail")
        if len(their_retried) == len(run_ids):
            their_event.set()
        await their_event.wait()

    await asyncio.gather(*[theirs.run("Hello", model=PTestModel(), deps=i) for i in run_ids])

    retried: set[int] = set()
    event = asyncio.Event()
    seen: list[tuple[int, int]] = []

    @tool(retries=2)
    async def must_be_retried(ctx: RunContext) -> str:
        seen.append((ctx.deps, ctx.retry))
        if ctx.deps not in retried:
            retried.add(ctx.deps)
            raise ModelRetry("Fail")
        if len(retried) == len(run_ids):
            event.set()
        await event.wait()
        return "ok"

    def answer(request: ModelRequest) -> Any:
        # call the tool until its call succeeded, then answer
        if request.messages[-1].role == "tool" and request.messages[-1].content == "ok":
            return json.dumps({"x": 0, "y": "a"})
        return tool_call("must_be_retried")

    agent = Agent(
        "a",
        FunctionModel(answer),
        tools=[must_be_retried],
        output_type=OutputModel,
        retries={"tools": 2, "output": 2},
    )
    results = await asyncio.gather(*[agent.run("Hello", deps=i) for i in run_ids])
    assert [r.status for r in results] == [RunStatus.COMPLETED] * 5, [r.error for r in results]
    assert all(r.output == OutputModel(x=0, y="a") for r in results)
    assert sorted(seen) == [(i, retry) for i in run_ids for retry in (0, 1)]


# --- toolsets under concurrent runs (tests/test_toolsets.py) ----------------------------------


async def test_concurrent_runs_dont_share_state() -> None:
    # ports ::test_concurrent_runs_dont_share_state: pydantic-ai asks each run's own copy of a
    # stateful toolset (for_run) for its tools at each step, so two runs at once count 1 each.
    # Ours, on purpose (docs/harness.md, *Per-request toolsets*): which tools a toolset has
    # is read once, when the agent is made, and what a run may call changes only by steering;
    # so a custom toolset's get_tools() is not called per run at all, and concurrent runs
    # have no per-run state in it to share
    counts: list[int] = []

    class CountingToolset(Toolset):
        def __init__(self) -> None:
            self.count = 0

        def get_tools(self) -> dict[str, Tool]:
            self.count += 1
            counts.append(self.count)
            return {}

    agent = Agent("a", FunctionModel(lambda request: "Done"), toolsets=[CountingToolset()])
    assert counts == [1]  # read when the agent was made
    results = await asyncio.gather(agent.run("Hello"), agent.run("World"))
    assert [r.output for r in results] == ["Done", "Done"]
    assert counts == [1]


async def test_tool_manager_sequential_tool_call() -> None:
    # ports ::test_tool_manager_sequential_tool_call: sequential=True is a per-tool barrier in
    # pydantic-ai (the calls before it have run when it runs). Ours, on purpose
    # (docs/harness.md, *Sub-agents*): every call of a response runs one after another, in
    # the model's order, so the flag is kept (tool.sequential) and a marked and an unmarked
    # tool alike see what the calls before them did
    order: list[str] = []

    @tool(sequential=True)
    async def tool_a(x: int) -> int:
        order.append(f"a{x}")
        await asyncio.sleep(0)
        order.append(f"a{x} done")
        return x

    @tool(sequential=False)
    async def tool_b(x: int) -> int:
        order.append(f"b{x}")
        await asyncio.sleep(0)
        order.append(f"b{x} done")
        return x

    assert (tool_a.sequential, tool_b.sequential) == (True, False)
    calls = [
        *tool_call("tool_b", x=1).tool_calls,
        *tool_call("tool_a", x=2).tool_calls,
        *tool_call("tool_b", x=3).tool_calls,
    ]
    model = ScriptedModel([ModelResponse(text="", tool_calls=calls), "done"])
    result = await Agent("a", model, tools=[tool_a, tool_b]).run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert order == ["b1", "b1 done", "a2", "a2 done", "b3", "b3 done"]


# --- a failing tool beside a slow one (tests/test_agent.py) -----------------------------------


async def test_parallel_tool_exception_cancels_sibling_tasks() -> None:
    # ports ::test_parallel_tool_exception_cancels_sibling_tasks: in pydantic-ai a tool's
    # exception ends the run (raised from agent.run) and cancels the sibling call running
    # beside it, leaving no task behind. Ours, on purpose: a tool that raises is an error
    # result for the model (docs/harness.md, *Starting runs*) and the calls of a response run
    # one after another, so the slow call runs after the failed one, to its end; no task is
    # left behind either
    their_started, their_cancelled = asyncio.Event(), asyncio.Event()

    async def call_two_tools(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        return PModelResponse(
            parts=[ToolCallPart(tool_name="fast_failing_tool"), ToolCallPart(tool_name="slow_tool")]
        )

    theirs = PAgent(PFunctionModel(call_two_tools))

    @theirs.tool_plain
    async def fast_failing_tool() -> str:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    @theirs.tool_plain
    async def slow_tool() -> str:
        their_started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            their_cancelled.set()
            raise
        return "done"  # pragma: no cover

    with pytest.raises(RuntimeError, match="boom"):
        await theirs.run("call tools")
    await asyncio.sleep(0)
    assert their_started.is_set() and their_cancelled.is_set()

    order: list[str] = []

    @tool(name="fast_failing_tool")
    async def fast_failing() -> str:
        await asyncio.sleep(0)
        order.append("fast failed")
        raise RuntimeError("boom")

    @tool(name="slow_tool")
    async def slow() -> str:
        order.append("slow started")
        await asyncio.sleep(0.01)
        order.append("slow done")
        return "done"

    calls = [*tool_call("fast_failing_tool").tool_calls, *tool_call("slow_tool").tool_calls]
    model = ScriptedModel([ModelResponse(text="", tool_calls=calls), "handled"])
    tasks_before = asyncio.all_tasks()
    result = await Agent("a", model, tools=[fast_failing, slow]).run("call tools")
    await asyncio.sleep(0)
    assert result.status is RunStatus.COMPLETED, result.error
    assert order == ["fast failed", "slow started", "slow done"]
    assert ours(result.messages)[2:4] == [
        ("tool", "tool 'fast_failing_tool' raised RuntimeError: boom"),
        ("tool", "done"),
    ]
    assert not asyncio.all_tasks() - tasks_before


# --- a response of text and a tool call (tests/test_agent.py) ---------------------------------


async def test_plain_tool_response() -> None:
    # ports ::test_plain_tool_response: a response of text and a tool call keeps both (the
    # text beside the call, in one assistant message), the tool's result answers the call and
    # the next answer ends the run. pydantic-ai's tool there returns a ToolReturn, whose
    # metadata is kept on the result part for the application, not sent to the model; ours
    # has no such return type (docs/harness.md, *Not offered*): a tool's result is what the
    # model is sent
    def llm(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        if len(messages) == 1:
            return PModelResponse(
                parts=[TextPart("Starting analysis"), ToolCallPart("analyze_data", {})]
            )
        return PModelResponse(parts=[TextPart("Analysis completed")])

    theirs = PAgent(PFunctionModel(llm))

    @theirs.tool_plain
    def analyze_data() -> str:
        return "Data analysis completed successfully"

    their_result = await theirs.run("Please analyze the data")
    assert their_result.output == "Analysis completed"
    their_parts = [
        (type(part).__name__, getattr(part, "content", getattr(part, "tool_name", None)))
        for message in their_result.all_messages()
        for part in message.parts
    ]

    @tool(name="analyze_data")
    def analyze() -> str:
        return "Data analysis completed successfully"

    first = ModelResponse(text="Starting analysis", tool_calls=tool_call("analyze_data").tool_calls)
    model = ScriptedModel([first, "Analysis completed"])
    result = await Agent("a", model, tools=[analyze]).run("Please analyze the data")
    assert result.output == their_result.output
    assert their_parts == [
        ("UserPromptPart", "Please analyze the data"),
        ("TextPart", "Starting analysis"),
        ("ToolCallPart", "analyze_data"),
        ("ToolReturnPart", "Data analysis completed successfully"),
        ("TextPart", "Analysis completed"),
    ]
    assert ours(result.messages) == [
        ("user", "Please analyze the data"),
        ("assistant", "Starting analysis"),
        ("tool", "Data analysis completed successfully"),
        ("assistant", "Analysis completed"),
    ]
    assert [c.name for c in result.messages[1].tool_calls] == ["analyze_data"]


# --- capture_run_messages around a raising block (tests/test_agent.py) ------------------------


def test_capture_run_messages_with_user_exception_does_not_contain_internal_errors() -> None:
    # ports ::test_capture_run_messages_with_user_exception_does_not_contain_internal_errors:
    # an exception raised in the block after a run leaves it with a clean chain: nothing of
    # the run's (an exception it handled) is its __context__
    theirs = PAgent("test")
    try:
        with pcapture_run_messages():
            theirs.run_sync("Hello")
            raise ZeroDivisionError("division by zero")
    except ZeroDivisionError as e:
        assert e.__context__ is None

    agent = Agent("a", ScriptedModel([tool_call("missing"), "hi"]))
    raised: ZeroDivisionError | None = None
    try:
        with capture_run_messages() as messages:
            result = agent.run_sync("Hello")  # its unknown-tool call is answered, not raised
            raise ZeroDivisionError("division by zero")
    except ZeroDivisionError as e:
        raised = e
    assert raised is not None and raised.__context__ is None and raised.__cause__ is None
    assert messages == result.messages and result.output == "hi"


# --- where features meet ----------------------------------------------------------------------


async def test_a_steer_between_a_tools_retries_keeps_its_retry_count() -> None:
    # ours: a steering message sent while a tool call that will fail runs lands at the
    # boundary after the call's error result, before the next request; the tool's retry count
    # goes on through it (ctx.retry is 1 at the next call, counted over the run as
    # pydantic-ai counts a tool's retries), so steering cannot lift a tool's cap
    async with Runtime(testing=True) as rt:
        gate, started = asyncio.Event(), asyncio.Event()
        retries: list[int] = []

        @tool(retries=1)
        async def flaky(ctx: RunContext) -> str:
            retries.append(ctx.retry)
            if ctx.retry == 0:
                started.set()
                await gate.wait()
                raise ModelRetry("try again")
            return f"ok at retry {ctx.retry}"

        seen: list[ModelRequest] = []

        def answer(request: ModelRequest) -> Any:
            seen.append(request)
            return tool_call("flaky") if len(seen) < 3 else "done"

        handle = await rt.start(Agent("a", FunctionModel(answer), tools=[flaky]), "go")
        await started.wait()
        receipt = await handle.steer("Only billing.")
        gate.set()
        result = await handle.result()
    assert receipt.status == "accepted"
    assert result.status is RunStatus.COMPLETED, result.error
    assert retries == [0, 1]
    last_three = seen[1].messages[-3:]
    assert [m.role for m in last_three[:2]] == ["assistant", "tool"]
    assert last_three[1].content == "try again"
    assert "Only billing." in last_three[2].content
    assert last_three[2].metadata.get("steering")
    assert result.messages[-2].content == "ok at retry 1"


async def test_a_steer_between_output_validation_retries_is_a_new_prompt() -> None:
    # ours, on purpose (docs/harness.md, *Starting runs*: "a steering message that reached
    # the model is a new prompt"): the output budget is counted per prompt, and a steering message
    # delivered between two asks starts it again, so the validator's ctx.retry is 0 at the
    # answer after it; without steering the same answers count 0, 1, 2
    async def run(steer: bool) -> tuple[Any, list[tuple[str, int]]]:
        async with Runtime(testing=True) as rt:
            answers: list[str] = []
            tries: list[tuple[str, int]] = []
            handles: list[Any] = []

            def answer(request: ModelRequest) -> str:
                answers.append(str(len(answers) + 1))
                return answers[-1]

            agent = Agent("a", FunctionModel(answer), output_retries=2)

            @agent.output_validator
            async def check(ctx: RunContext, output: str) -> str:
                tries.append((output, ctx.retry))
                if output == "1" and steer:
                    await handles[0].steer("Be brief.")
                if output != "3":
                    raise ModelRetry("again")
                return output

            handles.append(await rt.start(agent, "go"))
            return await handles[0].result(), tries

    plain, plain_tries = await run(steer=False)
    steered, steered_tries = await run(steer=True)
    assert plain.status is steered.status is RunStatus.COMPLETED
    assert plain_tries == [("1", 0), ("2", 1), ("3", 2)]
    assert steered_tries == [("1", 0), ("2", 0), ("3", 1)]
    asked, steering = steered.messages[2:4]
    assert asked.metadata.get("retry") == "invalid_output"
    assert "Be brief." in steering.content


async def test_a_pause_between_output_validation_retries_does_not_reset_the_budget() -> None:
    # ours: a pause and resume between two asks adds nothing the model sees, so it is no new
    # prompt: the second answer sent back is past output_retries=1 and the run fails as it
    # would have without the pause
    async with Runtime(testing=True) as rt:
        tries: list[tuple[str, int]] = []
        handles: list[Any] = []
        answers: list[str] = []

        def answer(request: ModelRequest) -> str:
            answers.append(str(len(answers) + 1))
            return answers[-1]

        agent = Agent("a", FunctionModel(answer), output_retries=1)

        @agent.output_validator
        async def check(ctx: RunContext, output: str) -> str:
            tries.append((output, ctx.retry))
            if output == "1":
                await handles[0].pause("hold")
                loop = asyncio.get_running_loop()
                loop.call_later(0.02, lambda: asyncio.ensure_future(handles[0].resume("go on")))
            raise ModelRetry("again")

        handles.append(await rt.start(agent, "go"))
        result = await handles[0].result()
    assert result.status is RunStatus.FAILED
    assert "sent back by an output validator, 1 time(s) before (output_retries=1)" in (
        result.error or ""
    )
    assert tries == [("1", 0), ("2", 1)]
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


async def test_a_budget_lowered_between_output_validation_retries_stops_the_next_ask() -> None:
    # ours: an update_budget sent from an output validator lands at the boundary after the
    # ask it sends back, and the ask's model call is past the new max_model_calls
    async with Runtime(testing=True) as rt:
        handles: list[Any] = []
        model = ScriptedModel(["1", "2", "never"])
        agent = Agent("a", model, output_retries=3)

        @agent.output_validator
        async def check(ctx: RunContext, output: str) -> str:
            if output == "1":
                await handles[0].update_budget(max_model_calls=2)
            raise ModelRetry("again")

        handles.append(await rt.start(agent, "go"))
        result = await handles[0].result()
    assert result.status is RunStatus.LIMIT_EXCEEDED, result.error
    assert "'max_model_calls'" in (result.error or "") and "used 2, allowed 2" in (
        result.error or ""
    )
    assert len(model.requests) == 2


async def test_tools_constrained_between_a_tools_retries() -> None:
    # ours: constrain_tools sent from a failing tool call lands after its error result; the
    # next request offers the tools left, and the model calling the withdrawn tool again is
    # answered as an unknown tool (not run, and not counted against the tool's retries)
    async with Runtime(testing=True) as rt:
        handles: list[Any] = []
        calls: list[int] = []

        @tool(retries=1)
        async def flaky(ctx: RunContext) -> str:
            calls.append(ctx.retry)
            await handles[0].constrain_tools(["other"])
            raise ModelRetry("again")

        @tool
        def other() -> str:
            return "other ok"

        offered: list[list[str]] = []

        def answer(request: ModelRequest) -> Any:
            offered.append([spec.name for spec in request.tools])
            return tool_call("flaky") if len(offered) < 3 else "done"

        agent = Agent("a", FunctionModel(answer), tools=[flaky, other])
        handles.append(await rt.start(agent, "go"))
        result = await handles[0].result()
    # one failure within its cap of 1; the withdrawn call after it, counted, would have been
    # past the cap and failed the run
    assert calls == [0]
    assert offered == [["flaky", "other"], ["other"], ["other"]]
    assert (
        result.messages[4].content == "unknown tool 'flaky'; available: other. Call one of those."
    )
    assert result.status is RunStatus.COMPLETED, result.error


async def test_a_childs_output_retries_spend_its_parents_model_calls() -> None:
    # ours: a SubAgentTool child's asks for valid output are model calls of the parent's too
    # (usage rolls up, docs/harness.md, *Limits*): a parent allowed 3 spends one, its child
    # two (an answer and the ask after it), so the child ends failed past its output budget
    # and the parent, out of model calls, ends limit_exceeded before its next request
    async with Runtime(testing=True) as rt:
        child = Agent("child", FunctionModel(lambda request: "bad"), output_retries=1)

        @child.output_validator
        def refuse(output: str) -> str:
            raise ModelRetry("nope")

        parent_model = ScriptedModel([tool_call("child", input="x"), "parent done"])
        parent = Agent(
            "parent",
            parent_model,
            tools=[SubAgentTool(child)],
            limits=RunLimits(max_model_calls=3),
        )
        result = await (await rt.start(parent, "go")).result()
    assert result.status is RunStatus.LIMIT_EXCEEDED, result.error
    assert "used 3, allowed 3" in (result.error or "")
    assert result.usage["model_calls"] == 3
    assert len(parent_model.requests) == 1
    tool_result = result.messages[-1]
    assert tool_result.role == "tool"
    assert "sub-agent 'child'" in tool_result.content and "failed: ModelResponseError" in (
        tool_result.content
    )


@pytest.mark.parametrize("through", ["text", "output tool"])
async def test_a_steer_sent_while_a_valid_answer_is_validated_gets_another_turn(
    through: str,
) -> None:
    # a steering message sent while an output validator (the run's own code, which may
    # take its time) checks an answer it will accept reaches the model: the run is still
    # going, so it is delivered at the final answer, and the agent gets another turn for it
    # (docs/harness.md, *What each steering kind does to an agent run*). It did on an output tool's answer, whose
    # final boundary follows its validation; a text answer was validated after its final
    # boundary, so the command failed "target finished before delivery" and the run ended on
    # the answer the steering was meant to change
    async with Runtime(testing=True) as rt:
        handles: list[Any] = []
        seen: list[ModelRequest] = []

        def answer(request: ModelRequest) -> Any:
            seen.append(request)
            if through == "text":
                return f"answer {len(seen)}"
            return tool_call("final_result", x=len(seen), y="a")

        output_type: Any = str if through == "text" else ToolOutput(OutputModel)
        agent = Agent("a", FunctionModel(answer), output_type=output_type)

        @agent.output_validator
        async def check(ctx: RunContext, output: Any) -> Any:
            if len(seen) == 1:
                receipt = await handles[0].steer("Also say hi.")
                assert receipt.status == "accepted"
                await asyncio.sleep(0)
            return output

        handles.append(await rt.start(agent, "go"))
        result = await handles[0].result()
    assert result.status is RunStatus.COMPLETED, result.error
    assert len(seen) == 2
    assert "Also say hi." in seen[1].messages[-1].content
    assert result.output == ("answer 2" if through == "text" else OutputModel(x=2, y="a"))


@pytest.mark.parametrize("through", ["text", "output tool"])
@pytest.mark.parametrize("kind", ["pause", "cancel"])
async def test_a_pause_or_cancel_sent_while_a_valid_answer_is_validated_takes_effect_there(
    through: str, kind: str
) -> None:
    # as a steering message does (above): a pause sent while the answer is validated parks
    # the run at that boundary (it completes on its answer once resumed), a cancel ends it
    # ``cancelled`` with the answer as its output. On a text answer the run completed and
    # the command failed "target finished before delivery" (docs/harness.md)
    async with Runtime(testing=True) as rt:
        handles: list[Any] = []
        receipts: list[Any] = []
        seen: list[ModelRequest] = []

        def answer(request: ModelRequest) -> Any:
            seen.append(request)
            if through == "text":
                return f"answer {len(seen)}"
            return tool_call("final_result", x=len(seen), y="a")

        output_type: Any = str if through == "text" else ToolOutput(OutputModel)
        agent = Agent("a", FunctionModel(answer), output_type=output_type)

        @agent.output_validator
        async def check(ctx: RunContext, output: Any) -> Any:
            if not receipts:
                send = handles[0].pause if kind == "pause" else handles[0].cancel
                receipts.append(await send(delivery="next_boundary"))
                await asyncio.sleep(0)
            return output

        handle = await rt.start(agent, "go")
        handles.append(handle)
        if kind == "pause":
            while handle.info.status is not RunStatus.PAUSED:
                assert not handle.info.status.finished, handle.info.status
                await asyncio.sleep(0.01)  # (until parked: no timing asserted)
            assert (await handle.resume()).status == "accepted"
        result = await handle.result()
    assert receipts[0].status == "accepted"
    assert len(seen) == 1
    if kind == "pause":
        assert result.status is RunStatus.COMPLETED, result.error
        assert result.output == ("answer 1" if through == "text" else OutputModel(x=1, y="a"))
    else:
        assert result.status is RunStatus.CANCELLED, result.error
        # (a cancelled run's output is what its model last said, as text: an output tool's
        # arguments unvalidated, as before this fix)
        assert result.output == ("answer 1" if through == "text" else '{"x": 1, "y": "a"}')


async def test_a_steer_sent_while_a_reopened_runs_answer_is_validated_again_gets_a_turn(
    rt: Runtime,
) -> None:
    # the same on a run reopened for another turn that brought nothing to its model: its
    # last answer is validated again, and a steering message sent meanwhile is delivered at
    # it, so the model gets the turn (it failed "target finished before delivery" as above)
    from tests.harness.test_scenarios import _reopen_for_nothing

    model = ScriptedModel(["first", "second"])
    agent = Agent("worker", model)
    validated: list[str] = []
    handles: list[Any] = []

    @agent.output_validator
    async def check(output: str) -> str:
        validated.append(output)
        if len(validated) == 2:
            await handles[0].steer("Say it again.")
            await asyncio.sleep(0)
        return output

    handles.append(await rt.start(agent, "go"))
    assert (await handles[0].result()).output == "first"
    await _reopen_for_nothing(handles[0])
    result = await handles[0].result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, "second"), result.error
    assert validated == ["first", "first", "second"]
    assert "Say it again." in model.requests[1].messages[-1].content
