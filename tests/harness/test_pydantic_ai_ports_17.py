"""pydantic-ai's ``Agent(end_strategy=...)`` (``'early'``, ``'graceful'``, ``'exhaustive'``),
``capture_run_messages()``, run ``metadata=`` and ``override(name=...)``, ported (a
seventeenth batch; see test_pydantic_ai_ports.py to _16).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise); several run pydantic-ai itself beside ours (its ``FunctionModel``) on
the same response, to show the same tools run and the same results are sent back. Where we
behave differently on purpose, the test says why: every tool call still runs between its
safe boundaries, so steering (``constrain_tools``, ``pause``, ``cancel``) lands on the calls
an end strategy runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent as PAgent
from pydantic_ai import ModelRetry as PModelRetry
from pydantic_ai import NativeOutput as PNativeOutput
from pydantic_ai import Tool as PTool
from pydantic_ai import ToolOutput as PToolOutput
from pydantic_ai import UnexpectedModelBehavior
from pydantic_ai import capture_run_messages as pcapture_run_messages
from pydantic_ai.messages import (
    ModelMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.messages import ModelRequest as PModelRequest
from pydantic_ai.messages import ModelResponse as PModelResponse
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.models.function import FunctionModel as PFunctionModel

from tinyagents import (
    Agent,
    ModelRetry,
    NativeOutput,
    PromptedOutput,
    RunContext,
    RunStatus,
    Runtime,
    ToolOutput,
    capture_run_messages,
    tool,
)
from tinyagents.errors import ConfigurationError
from tinyagents.harness import ModelRequest, ModelResponse
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    ScriptedModel,
    tool_call,
    tool_calls,
)

TOOL_NOT_EXECUTED = "Tool not executed - a final result was already processed."
OUTPUT_NOT_USED = "Output tool not used - a final result was already processed."
NOT_THE_FINAL = (
    "Output tool processed, but its value will not be the final result of the agent run."
)


class OutputType(BaseModel):
    value: str


class OutputTypeWithCount(BaseModel):
    value: str
    count: int


def answers(messages: list[Any]) -> list[tuple[str | None, str]]:
    """(tool name, content) of each tool message, in order."""
    return [(m.name, m.content) for m in messages if m.role == "tool"]


def their_answers(messages: list[ModelMessage]) -> list[tuple[str | None, str]]:
    """The same of pydantic-ai's transcript: a retry is marked by ``retry:``."""
    out: list[tuple[str | None, str]] = []
    for message in messages:
        if not isinstance(message, PModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.outcome == "retried":
                out.append((part.tool_name, "retry:"))
            elif isinstance(part, ToolReturnPart):
                out.append((part.tool_name, str(part.content)))
            elif isinstance(part, RetryPromptPart):
                out.append((part.tool_name, "retry:"))
    return out


def ours_marked(messages: list[Any]) -> list[tuple[str | None, str]]:
    """``answers``, an error result marked ``retry:`` as ``their_answers`` marks one."""
    return [
        (n, "retry:" if c.endswith("Fix the errors and try again.") else c)
        for n, c in answers(messages)
    ]


def side_by_side(
    strategy: str, parts: list[tuple[str, dict[str, Any]]], *, output: str = "plain"
) -> tuple[Any, list[str], Any, list[str]]:
    """Run ``parts`` (one response's tool calls, then "done") through an agent of ours and
    one of pydantic-ai's with the same two tools and end strategy; each run's result and
    the tools that ran."""
    ran_ours: list[str] = []
    ran_theirs: list[str] = []

    def make_tools(ran: list[str]) -> list[Any]:
        def regular_tool(x: int) -> int:
            """A regular tool."""
            ran.append("regular_tool")
            return x

        def another_tool(y: int) -> int:
            """Another tool."""
            ran.append("another_tool")
            return y

        return [regular_tool, another_tool]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        if len(messages) == 1:
            return PModelResponse(parts=[ToolCallPart(n, a) for n, a in parts])
        return PModelResponse(parts=[ToolCallPart("final_result", {"value": "later"})])

    theirs = PAgent(
        PFunctionModel(respond),
        output_type=OutputType,
        tools=make_tools(ran_theirs),
        end_strategy=strategy,  # type: ignore[arg-type]
    ).run_sync("go")
    script = ScriptedModel(
        [
            tool_calls(*(tool_call(n, a) for n, a in parts)),
            tool_call("final_result", value="later"),
        ]
    )
    ours = Agent(
        "a",
        script,
        output_type=ToolOutput(OutputType),
        tools=make_tools(ran_ours),
        end_strategy=strategy,  # type: ignore[arg-type]
    ).run_sync("go")
    return ours, ran_ours, theirs, ran_theirs


# -- end_strategy ---------------------------------------------------------------------------

EARLY_CASES = [
    # test_early_strategy_stops_after_first_final_result
    [("final_result", {"value": "final"}), ("regular_tool", {"x": 1}), ("another_tool", {"y": 2})],
    # test_early_strategy_with_final_result_in_middle (an unknown tool is skipped too)
    [
        ("regular_tool", {"x": 1}),
        ("final_result", {"value": "final"}),
        ("another_tool", {"y": 2}),
        ("unknown_tool", {"value": "???"}),
    ],
    # test_early_strategy_uses_first_final_result
    [("final_result", {"value": "first"}), ("final_result", {"value": "second"})],
    # test_multiple_final_result_are_validated_correctly
    [("final_result", {"bad_value": "first"}), ("final_result", {"value": "second"})],
    # test_early_runs_function_tools_when_all_outputs_fail (here: arguments that do not
    # validate), and the tools of a response without an output call
    [("regular_tool", {"x": 1}), ("final_result", {"nope": 1})],
    [("regular_tool", {"x": 1}), ("another_tool", {"y": 2})],
]


@pytest.mark.parametrize("strategy", ["early", "graceful", "exhaustive"])
@pytest.mark.parametrize("parts", EARLY_CASES)
def test_each_end_strategy_runs_a_response_as_pydantic_ais_does(
    strategy: str, parts: list[tuple[str, dict[str, Any]]]
) -> None:
    """ports TestMultipleToolCalls: the same response, side by side with pydantic-ai under
    each end strategy: the same output, the same tools run, and each call answered alike
    (in the order pydantic-ai answers them: under 'early' the output calls first)."""
    ours, ran_ours, theirs, ran_theirs = side_by_side(strategy, parts)
    assert ours.status is RunStatus.COMPLETED, ours.error
    assert ours.output == theirs.output
    assert sorted(ran_ours) == sorted(ran_theirs)
    mine = ours_marked(ours.messages)
    their = their_answers(theirs.all_messages())
    for i, (name, content) in enumerate(their):  # an unknown tool's words are our own
        if name == "unknown_tool" and content != TOOL_NOT_EXECUTED:
            assert mine[i][0] == name and "unknown tool 'unknown_tool'" in mine[i][1]
            mine[i] = (name, content)
    assert mine == their


def test_early_skips_the_tool_calls_beside_a_valid_output_call() -> None:
    """test_early_strategy_stops_after_first_final_result, ours alone: the tools beside the
    output call never run (no tool.call event, no tool budget spent) and are answered
    "Tool not executed - ..."; the output call is answered first, as pydantic-ai's."""
    ran: list[str] = []

    def regular_tool(x: int) -> int:
        """A regular tool that should not be called."""
        ran.append("regular_tool")  # pragma: no cover
        return x  # pragma: no cover

    model = ScriptedModel(
        [tool_calls(tool_call("regular_tool", x=1), tool_call("final_result", value="final"))]
    )
    agent = Agent(
        "a", model, output_type=ToolOutput(OutputType), tools=[regular_tool], end_strategy="early"
    )
    result = agent.run_sync("go")
    assert result.output == OutputType(value="final")
    assert ran == []
    assert result.usage["tool_calls"] == 0
    assert answers(result.messages) == [
        ("final_result", "Final result processed."),
        ("regular_tool", TOOL_NOT_EXECUTED),
    ]


def test_early_does_not_call_additional_output_tools() -> None:
    """test_early_strategy_does_not_call_additional_output_tools."""
    called: list[str] = []

    def process_first(output: OutputType) -> OutputType:
        """Process first output."""
        called.append("first")
        return output

    def process_second(output: OutputType) -> OutputType:
        """Process second output."""
        called.append("second")  # pragma: no cover
        return output  # pragma: no cover

    model = ScriptedModel(
        [
            tool_calls(
                tool_call("first_output", value="first"),
                tool_call("second_output", value="second"),
            )
        ]
    )
    agent = Agent(
        "a",
        model,
        output_type=[
            ToolOutput(process_first, name="first_output"),
            ToolOutput(process_second, name="second_output"),
        ],
        end_strategy="early",
    )
    result = agent.run_sync("go")
    assert result.output == OutputType(value="first")
    assert called == ["first"]
    assert answers(result.messages) == [
        ("first_output", "Final result processed."),
        ("second_output", OUTPUT_NOT_USED),
    ]


def test_early_function_tool_retry_does_not_suppress_output() -> None:
    """test_early_function_tool_retry_does_not_suppress_output and
    test_early_runs_function_tools_when_all_outputs_fail."""
    called: list[str] = []

    def flaky_tool(x: int) -> int:
        called.append("flaky_tool")
        raise ModelRetry("not yet")

    def bad_output(output: OutputType) -> OutputType:
        if output.value == "x":
            raise ModelRetry("bad")
        return output

    model = ScriptedModel(
        [
            tool_calls(tool_call("flaky_tool", x=1), tool_call("bad_output", value="x")),
            tool_calls(tool_call("flaky_tool", x=1), tool_call("bad_output", value="ok")),
        ]
    )
    agent = Agent(
        "a",
        model,
        output_type=ToolOutput(bad_output, name="bad_output"),
        tools=[flaky_tool],
        end_strategy="early",
    )
    result = agent.run_sync("go")
    assert result.output == OutputType(value="ok"), result.error
    assert called == ["flaky_tool"]  # the first round's output failed: the tool ran
    first, second = answers(result.messages)[:2], answers(result.messages)[2:]
    assert [n for n, _ in first] == ["bad_output", "flaky_tool"]
    assert second == [("bad_output", "Final result processed."), ("flaky_tool", TOOL_NOT_EXECUTED)]


def test_early_second_output_max_retries_exceeded() -> None:
    """test_early_strategy_second_output_max_retries_exceeded: the first output wins, so the
    second is never read."""
    model = ScriptedModel(
        [
            tool_calls(
                tool_call("first_output", value="valid"),
                tool_call("second_output", value="invalid", count="x"),
            )
        ]
    )
    agent = Agent(
        "a",
        model,
        output_type=[
            ToolOutput(OutputType, name="first_output"),
            ToolOutput(OutputTypeWithCount, name="second_output"),
        ],
        end_strategy="early",
        retries={"output": 0},
    )
    result = agent.run_sync("go")
    assert result.output == OutputType(value="valid"), result.error


def test_exhaustive_runs_every_tool_and_the_first_valid_output_wins() -> None:
    """test_exhaustive_strategy_executes_all_tools and
    test_exhaustive_strategy_calls_all_output_tools: every output function runs; the first
    valid output is the result, a later valid one answered "processed, but ... not the
    final result"; answered in the order of the calls."""
    called: list[str] = []

    def process_first(output: OutputType) -> OutputType:
        called.append("first")
        return output

    def process_second(output: OutputType) -> OutputType:
        called.append("second")
        return output

    def regular_tool(x: int) -> int:
        called.append("regular_tool")
        return x

    model = ScriptedModel(
        [
            tool_calls(
                tool_call("regular_tool", x=42),
                tool_call("first_output", value="first"),
                tool_call("second_output", value="second"),
            )
        ]
    )
    agent = Agent(
        "a",
        model,
        output_type=[
            ToolOutput(process_first, name="first_output"),
            ToolOutput(process_second, name="second_output"),
        ],
        tools=[regular_tool],
        end_strategy="exhaustive",
    )
    result = agent.run_sync("go")
    assert result.output == OutputType(value="first")
    assert sorted(called) == ["first", "regular_tool", "second"]
    assert answers(result.messages) == [
        ("regular_tool", "42"),
        ("first_output", "Final result processed."),
        ("second_output", NOT_THE_FINAL),
    ]


@pytest.mark.parametrize("where", ["validation", "execution"])
def test_exhaustive_skips_an_output_tool_past_its_retries_when_another_wins(where: str) -> None:
    """test_exhaustive_skips_output_tool_exceeding_retries_on_validation / _on_execution
    (and test_exhaustive_strategy_second_output_max_retries_exceeded), side by side: an
    output call past its cap does not fail the run when another output call won, before or
    after it; it is answered "Output tool not used - output ... failed"."""

    def first(output: OutputType) -> OutputType:
        return output

    def second(value: str) -> str:
        raise ModelRetry("always fails")

    bad = {"invalid": "bad"} if where == "validation" else {"value": "hello"}
    for order in (
        [("second_output", bad), ("first_output", {"value": "valid"})],
        [("first_output", {"value": "valid"}), ("second_output", bad)],
    ):

        def respond(messages: list[ModelMessage], info: AgentInfo, order: Any = order) -> Any:
            return PModelResponse(parts=[ToolCallPart(n, a) for n, a in order])

        def psecond(value: str) -> str:
            raise PModelRetry("always fails")

        theirs = PAgent(
            PFunctionModel(respond),
            output_type=[
                PToolOutput(first, name="first_output"),
                PToolOutput(psecond, name="second_output", max_retries=0),
            ],
            end_strategy="exhaustive",
        ).run_sync("go")
        model = ScriptedModel([tool_calls(*(tool_call(n, a) for n, a in order))])
        ours = Agent(
            "a",
            model,
            output_type=[
                ToolOutput(first, name="first_output"),
                ToolOutput(second, name="second_output", max_retries=0),
            ],
            end_strategy="exhaustive",
        ).run_sync("go")
        assert ours.output == theirs.output == OutputType(value="valid"), ours.error
        assert answers(ours.messages) == their_answers(theirs.all_messages())


def test_exhaustive_fails_when_no_output_call_is_valid() -> None:
    """test_exhaustive_raises_unexpected_model_behavior: past the cap with no other output,
    the run fails, as pydantic-ai's raises."""
    model = ScriptedModel([tool_call("output_tool", invalid_field="invalid")] * 3)

    def process_output(output: OutputType) -> OutputType:
        raise AssertionError  # pragma: no cover

    agent = Agent(
        "a",
        model,
        output_type=[ToolOutput(process_output, name="output_tool")],
        end_strategy="exhaustive",
    )
    result = agent.run_sync("go")
    assert result.status is RunStatus.FAILED
    assert "output_tool call is not valid" in (result.error or "")


def test_an_unknown_end_strategy_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="end_strategy must be 'early', 'graceful'"):
        Agent("a", ScriptedModel([]), end_strategy="eager")  # type: ignore[arg-type]
    assert Agent("a", ScriptedModel([])).end_strategy == "graceful"


async def test_exhaustive_tool_calls_still_land_on_steering(rt: Runtime) -> None:
    """Ours: under ``"exhaustive"`` every tool call still runs between its safe boundaries,
    so ``constrain_tools`` delivered while one runs takes the next one away (answered
    withdrawn, never run), and the output call read before them still ends the run."""
    running, release = asyncio.Event(), asyncio.Event()
    ran: list[str] = []

    async def slow(x: int) -> int:
        """A slow tool."""
        running.set()
        await release.wait()
        ran.append("slow")
        return x

    def other(y: int) -> int:
        """Another tool."""
        ran.append("other")  # pragma: no cover
        return y  # pragma: no cover

    model = ScriptedModel(
        [
            tool_calls(
                tool_call("slow", x=1),
                tool_call("final_result", value="done"),
                tool_call("other", y=2),
            )
        ]
    )
    agent = Agent(
        "a",
        model,
        output_type=ToolOutput(OutputType),
        tools=[slow, other],
        end_strategy="exhaustive",
    )
    handle = await rt.start(agent, "go")
    await running.wait()
    receipt = await handle.constrain_tools(["slow"])
    assert receipt.status == "accepted"
    release.set()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output == OutputType(value="done")
    assert ran == ["slow"]
    (name, withdrawn) = answers(result.messages)[2]
    assert name == "other" and "withdrawn" in withdrawn
    kinds = [e.type for e in rt.steering_history(handle.run_id)]
    assert kinds[-1] == "steering.applied"


async def test_early_tools_that_run_when_the_outputs_fail_can_be_cancelled(rt: Runtime) -> None:
    """Ours: under ``"early"`` the tool calls beside output calls that all failed run between
    their boundaries too: a cancel sent while one runs ends the run ``cancelled`` at the next
    boundary, and the tool after it never runs."""
    running, release = asyncio.Event(), asyncio.Event()
    ran: list[str] = []

    async def slow(x: int) -> int:
        """A slow tool."""
        running.set()
        await release.wait()
        ran.append("slow")
        return x

    def other(y: int) -> int:
        """Another tool."""
        ran.append("other")  # pragma: no cover
        return y  # pragma: no cover

    model = ScriptedModel(
        [
            tool_calls(
                tool_call("slow", x=1),
                tool_call("final_result", nope=1),
                tool_call("other", y=2),
            )
        ]
    )
    agent = Agent(
        "a", model, output_type=ToolOutput(OutputType), tools=[slow, other], end_strategy="early"
    )
    handle = await rt.start(agent, "go")
    await running.wait()
    assert (await handle.cancel()).status == "accepted"
    release.set()
    result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    assert ran == ["slow"]


async def test_early_a_pause_before_the_calls_holds_the_run_and_no_tool_runs(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    """Ours: a pause delivered after the response (before its calls are read) holds the run
    there; resumed, ``"early"`` reads the valid output call and runs none of the tools."""
    answering, release = asyncio.Event(), asyncio.Event()
    ran: list[str] = []

    def regular_tool(x: int) -> int:
        """A regular tool."""
        ran.append("regular_tool")  # pragma: no cover
        return x  # pragma: no cover

    async def respond(request: ModelRequest) -> ModelResponse:
        answering.set()
        await release.wait()
        return tool_calls(tool_call("regular_tool", x=1), tool_call("final_result", value="v"))

    agent = Agent(
        "a",
        FunctionModel(respond),
        output_type=ToolOutput(OutputType),
        tools=[regular_tool],
        end_strategy="early",
    )
    handle = await rt.start(agent, "go")
    await answering.wait()
    assert (await handle.pause()).status == "accepted"
    release.set()
    await waiter.event("run.paused", handle.run_id)
    assert recorder.of_type("tool.call") == []  # nothing read yet
    assert (await handle.resume()).status == "accepted"
    result = await handle.result()
    assert result.output == OutputType(value="v") and ran == []


def text_and_call(text: str, *calls: ModelResponse) -> ModelResponse:
    """One response: ``text`` and the tool calls of ``calls``."""
    return ModelResponse(text=text, tool_calls=[c for r in calls for c in r.tool_calls])


@pytest.mark.parametrize("mode", ["native", "prompted", "model"])
def test_early_prefers_structured_text_output_over_tool_calls(mode: str) -> None:
    """test_early_strategy_prefers_structured_text_output_over_tool_calls: under 'early',
    text that is valid structured output beside tool calls is the output; the tools are
    skipped (answered, so no call is left dangling) and the run ends."""
    ran: list[str] = []

    def regular_tool(x: int) -> int:
        """A regular tool."""
        ran.append("regular_tool")  # pragma: no cover
        return x  # pragma: no cover

    output_type: Any = {
        "native": NativeOutput(OutputType),
        "prompted": PromptedOutput(OutputType),
        "model": OutputType,
    }[mode]
    model = ScriptedModel(
        [text_and_call('{"value": "final"}', tool_call("regular_tool", x=1)), '{"value": "no"}']
    )
    agent = Agent("a", model, output_type=output_type, tools=[regular_tool], end_strategy="early")
    result = agent.run_sync("go")
    assert result.output == OutputType(value="final"), result.error
    assert ran == [] and len(model.requests) == 1
    assert answers(result.messages) == [("regular_tool", TOOL_NOT_EXECUTED)]


def test_early_skips_an_unknown_tool_call_when_structured_output_wins() -> None:
    """test_early_strategy_skips_unknown_tool_call_when_structured_output_wins (with
    ``unknown_tools="fail"`` too: the call is never read, so it fails nothing)."""
    for unknown in ("error_result", "fail"):
        model = ScriptedModel([text_and_call('{"value": "final"}', tool_call("does_not_exist"))])
        agent = Agent(
            "a",
            model,
            output_type=NativeOutput(OutputType),
            end_strategy="early",
            unknown_tools=unknown,  # type: ignore[arg-type]
        )
        result = agent.run_sync("go")
        assert result.output == OutputType(value="final"), result.error
        assert answers(result.messages) == [("does_not_exist", TOOL_NOT_EXECUTED)]


@pytest.mark.parametrize("why", ["invalid", "validator"])
def test_early_falls_back_to_tools_when_the_text_is_not_valid_output(why: str) -> None:
    """test_early_strategy_falls_back_to_tools_when_output_text_is_invalid (and, as its
    image test does, text an output validator sends back): not a final result, so the tool
    runs, and no output retry is spent on it (``output_retries=0`` still completes)."""
    ran: list[str] = []

    def regular_tool(x: int) -> int:
        """A regular tool."""
        ran.append("regular_tool")
        return x

    text = "let me look that up" if why == "invalid" else '{"value": "bad"}'
    model = ScriptedModel(
        [text_and_call(text, tool_call("regular_tool", x=1)), '{"value": "after tool"}']
    )
    agent = Agent(
        "a",
        model,
        output_type=PromptedOutput(OutputType),
        tools=[regular_tool],
        end_strategy="early",
        output_retries=0,
    )

    @agent.output_validator
    def no_bad(output: OutputType) -> OutputType:
        if output.value == "bad":
            raise ModelRetry("rejected")
        return output

    result = agent.run_sync("go")
    assert result.output == OutputType(value="after tool"), result.error
    assert ran == ["regular_tool"]
    assert not any(m.metadata.get("retry") for m in result.messages)


def test_non_early_strategies_run_tools_beside_structured_text_output() -> None:
    """test_non_early_strategy_runs_tools_alongside_structured_text_output, side by side."""
    ran: list[str] = []

    def regular_tool(x: int) -> int:
        """A regular tool."""
        ran.append("regular_tool")
        return x

    for strategy in ("graceful", "exhaustive"):
        ran.clear()

        def respond(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
            if len(messages) == 1:
                return PModelResponse(
                    parts=[TextPart('{"value": "final"}'), ToolCallPart("regular_tool", {"x": 1})]
                )
            return PModelResponse(parts=[TextPart('{"value": "after tool"}')])

        theirs = PAgent(
            PFunctionModel(respond),
            output_type=PNativeOutput(OutputType),
            tools=[regular_tool],
            end_strategy=strategy,  # type: ignore[arg-type]
        ).run_sync("go")
        model = ScriptedModel(
            [
                text_and_call('{"value": "final"}', tool_call("regular_tool", x=1)),
                '{"value": "after tool"}',
            ]
        )
        ours = Agent(
            "a",
            model,
            output_type=NativeOutput(OutputType),
            tools=[regular_tool],
            end_strategy=strategy,  # type: ignore[arg-type]
        ).run_sync("go")
        assert ours.output == theirs.output == OutputType(value="after tool")
        assert ran == ["regular_tool", "regular_tool"]


@pytest.mark.parametrize("output_type", [str, [OutputType, str]])
def test_early_does_not_preempt_tools_for_plain_text_output(output_type: Any) -> None:
    """test_early_strategy_does_not_preempt_tools_for_plain_text_output: plain text (``str``,
    or text beside output tools) is a preamble, not a final answer: the tool runs."""
    ran: list[str] = []

    def regular_tool(x: int) -> int:
        """A regular tool."""
        ran.append("regular_tool")
        return x

    model = ScriptedModel(
        [text_and_call("Let me look that up.", tool_call("regular_tool", x=1)), "the answer"]
    )
    agent = Agent("a", model, output_type=output_type, tools=[regular_tool], end_strategy="early")
    result = agent.run_sync("go")
    assert result.output == "the answer"
    assert ran == ["regular_tool"]


# -- capture_run_messages ---------------------------------------------------------------------


def test_capture_run_messages_holds_the_transcript_of_a_run_that_failed() -> None:
    """ports tests/test_agent.py's use of ``capture_run_messages`` (test_unknown_tool_fix...,
    its docs' "model errors"): the list holds the run's messages as far as it went, here a
    run that failed on a tool past its retries; the same list the run wrote to, so it is
    the result's transcript, and what pydantic-ai's holds for the same run (by role)."""

    def flaky() -> str:
        """Always fails."""
        raise ModelRetry("no")

    model = ScriptedModel([tool_call("flaky"), tool_call("flaky")])
    agent = Agent("a", model, tools=[flaky], retries=1)
    with capture_run_messages() as messages:
        result = agent.run_sync("go")
    assert result.status is RunStatus.FAILED
    assert messages == result.messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        return PModelResponse(parts=[ToolCallPart("flaky", {})])

    def pflaky() -> str:
        raise PModelRetry("no")

    their_agent = PAgent(PFunctionModel(respond), tools=[PTool(pflaky, name="flaky")], retries=1)
    with pcapture_run_messages() as theirs, pytest.raises(UnexpectedModelBehavior):
        their_agent.run_sync("go")
    # request, response, retry request, response, the retry left unsent (interrupted)
    assert len(theirs) == len(messages) == 5


def test_capture_run_messages_takes_the_first_run_only_and_nests() -> None:
    """As pydantic-ai's: a second run in one context is not captured; a context opened
    inside (as a tool around a delegate's run would) captures its own run."""
    inner: list[Any] = []
    delegate = Agent("d", ScriptedModel(["inner answer"]))

    @tool
    async def ask() -> str:
        """Ask the delegate."""
        with capture_run_messages() as got:
            answer = await delegate.run("inner question")
        inner.extend(got)
        return str(answer.output)

    outer = Agent("o", ScriptedModel([tool_call("ask"), "outer answer"]), tools=[ask])
    with capture_run_messages() as messages:
        first = outer.run_sync("outer question")
        second = Agent("b", ScriptedModel(["second"])).run_sync("second question")
    assert messages == first.messages and messages[0].content == "outer question"
    assert all(m.content != "second question" for m in messages) and second.output == "second"
    assert [m.content for m in inner] == ["inner question", "inner answer"]


def test_capture_run_messages_holds_a_history_given_to_the_run() -> None:
    """pydantic-ai's list starts with the message history the run continues."""
    first = Agent("a", ScriptedModel(["one"])).run_sync("first")
    with capture_run_messages() as messages:
        again = Agent("a", ScriptedModel(["two"])).run_sync("second", history=first.messages)
    assert [m.content for m in messages] == ["first", "one", "second", "two"]
    assert messages == again.messages


async def test_capture_run_messages_sees_steering_of_a_captured_run(rt: Runtime) -> None:
    """Ours: the captured list is the run's own transcript, so a steered run's steering
    message (with its provenance) is in it, where the model saw it."""
    entered, steered = asyncio.Event(), asyncio.Event()

    async def respond(request: ModelRequest) -> str:
        if len(request.messages) == 1:
            entered.set()
            await steered.wait()
            return "first"
        return "second"

    with capture_run_messages() as messages:
        handle = await rt.start(Agent("a", FunctionModel(respond)), "go")
    await entered.wait()
    await handle.steer("cite the ledger")
    steered.set()
    result = await handle.result()
    assert messages == result.messages
    assert any(m.metadata.get("steering") and "cite the ledger" in m.content for m in messages)


# -- override(name=...) -----------------------------------------------------------------------


def test_agent_name_override() -> None:
    """test_agent_name_override, side by side: within the block the agent's name is the
    override's, and a run started there runs under it (its ``agent_id``); after the block
    the agent has its own name again."""
    theirs = PAgent(PFunctionModel(lambda m, i: PModelResponse(parts=[TextPart("hi")])))
    theirs.name = "custom_name"
    agent = Agent("custom_name", ScriptedModel(["hi"]))
    with theirs.override(name="overridden_name"), agent.override(name="overridden_name"):
        theirs.run_sync("Hello")
        agent.run_sync("Hello")
        assert agent.name == theirs.name == "overridden_name"
    assert agent.name == theirs.name == "custom_name"


async def test_a_run_started_under_an_overridden_name_keeps_it_and_is_steered(
    rt: Runtime,
) -> None:
    """Ours: the name is the run's ``agent_id`` from its start to its end (the block left
    meanwhile), what steering's authority and the run tree read; the run is steered as
    any other, and the provenance names it."""
    entered, steered = asyncio.Event(), asyncio.Event()

    async def respond(request: ModelRequest) -> str:
        if len(request.messages) == 1:
            entered.set()
            await steered.wait()
            return "first"
        return "second"

    agent = Agent("base", FunctionModel(respond))
    with agent.override(name="renamed"):
        handle = await rt.start(agent, "go")
    assert agent.name == "base"
    await entered.wait()
    assert handle.info.agent_id == "renamed"
    assert (await handle.steer("cite the ledger")).status == "accepted"
    steered.set()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output == "second"
    assert [i.agent_id for i in rt.runs.list()] == ["renamed"]


@pytest.mark.parametrize("name", ["", "  ", 3])
def test_an_override_name_an_agent_could_not_have_is_refused(name: Any) -> None:
    agent = Agent("a", ScriptedModel([]))
    with pytest.raises(ConfigurationError):
        agent.override(name=name)
    assert agent.name == "a"


# -- metadata= --------------------------------------------------------------------------------


def calls_so_far(ctx: RunContext) -> dict[str, Any]:
    return {"requests": ctx.info.usage.model_calls}


def test_agent_run_result_metadata_available() -> None:
    """test_agent_run_result_metadata_available (ctx.deps for its ctx.prompt: ours has no
    prompt field) and test_agent_metadata_recomputed_on_successful_run: a callable is
    resolved as the run starts (``ctx.metadata`` reads it) and again when it completes."""
    seen: list[Any] = []

    @tool
    def look(ctx: RunContext) -> str:
        """Look."""
        seen.append(ctx.metadata)
        return "seen"

    agent = Agent(
        "a",
        ScriptedModel([tool_call("look"), "metadata output"]),
        tools=[look],
        metadata=lambda ctx: {"prompt": ctx.deps, **calls_so_far(ctx)},
    )
    result = agent.run_sync("metadata prompt", deps="the deps")
    assert result.output == "metadata output"
    assert seen == [{"prompt": "the deps", "requests": 0}]
    assert result.metadata == {"prompt": "the deps", "requests": 2}


def test_agent_metadata_kept_when_run_fails() -> None:
    """test_agent_metadata_persisted_when_run_fails: a failed run keeps the metadata it
    started with (not resolved again)."""

    @tool
    def explode() -> str:
        """Explode."""
        raise ModelRetry("explode")

    agent = Agent(
        "a",
        ScriptedModel([tool_call("explode")] * 3),
        tools=[explode],
        retries=0,
        metadata=calls_so_far,
    )
    result = agent.run_sync("go")
    assert result.status is RunStatus.FAILED
    assert result.metadata == {"requests": 0}


def test_agent_metadata_sources_as_pydantic_ai_merges_them() -> None:
    """test_agent_metadata_override_with_dict / _with_callable, test_agent_run_metadata_kwarg
    _dict / _callable / _merges_agent_metadata / _ignored_with_override, side by side: a
    run's metadata is merged over the agent's; an override's replaces both."""
    cases: list[tuple[Any, Any, Any]] = [
        ({"env": "base"}, None, {"env": "override"}),
        ({"env": "base"}, None, "callable"),
        (None, {"env": "run"}, None),
        (None, "callable", None),
        ({"env": "base", "shared": "agent"}, {"run": "value", "shared": "run"}, None),
        ({"env": "base"}, {"run_only": True}, {"env": "override", "override_only": True}),
        (None, None, None),
    ]
    for agent_meta, run_meta, override_meta in cases:

        def resolve(value: Any) -> Any:
            return (lambda ctx: {"computed": "yes"}) if value == "callable" else value

        theirs = PAgent(
            PFunctionModel(lambda m, i: PModelResponse(parts=[TextPart("ok")])),
            metadata=resolve(agent_meta),
        )
        ours = Agent("a", ScriptedModel(["ok"]), metadata=resolve(agent_meta))
        with contextlib.ExitStack() as stack:
            if override_meta is not None:
                stack.enter_context(theirs.override(metadata=resolve(override_meta)))
                stack.enter_context(ours.override(metadata=resolve(override_meta)))
            their = theirs.run_sync("go", metadata=resolve(run_meta))
            mine = ours.run_sync("go", metadata=resolve(run_meta))
        assert mine.metadata == their.metadata, (agent_meta, run_meta, override_meta)


@pytest.mark.parametrize("bad", [["a"], "text", {1: "x"}])
def test_metadata_that_is_no_dict_or_callable_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="metadata"):
        Agent("a", ScriptedModel([]), metadata=bad)
    agent = Agent("a", ScriptedModel(["ok"]))
    with pytest.raises(ConfigurationError, match="metadata"):
        agent.override(metadata=bad)
    with pytest.raises(ConfigurationError, match="metadata of a run"):
        agent.run_sync("go", metadata=bad)


def test_a_metadata_function_returning_no_dict_fails_the_run() -> None:
    agent = Agent("a", ScriptedModel(["ok"]), metadata=lambda ctx: ["no"])
    result = agent.run_sync("go")
    assert result.status is RunStatus.FAILED and "metadata" in (result.error or "")


async def test_a_steered_run_resolves_its_metadata_after_the_steering(rt: Runtime) -> None:
    """Ours: a run given another turn by steering delivered after its answer resolves its
    metadata when it completes, after that turn (here: two model calls)."""
    entered, steered = asyncio.Event(), asyncio.Event()

    async def respond(request: ModelRequest) -> str:
        if len(request.messages) == 1:
            entered.set()
            await steered.wait()
            return "first"
        return "second"

    agent = Agent("a", FunctionModel(respond), metadata=calls_so_far)
    handle = await rt.start(agent, "go")
    await entered.wait()
    await handle.steer("cite the ledger")
    steered.set()
    result = await handle.result()
    assert result.output == "second" and result.metadata == {"requests": 2}


@pytest.mark.parametrize("strategy", ["early", "graceful", "exhaustive"])
@pytest.mark.parametrize("values", [("ok1", "ok2"), ("bad", "ok2"), ("ok1", "bad"), ("bad", "bad")])
@pytest.mark.parametrize("retries", [0, 1])
@pytest.mark.parametrize("tool_at", [0, 1, 2])
def test_output_functions_and_a_tool_under_each_strategy_as_pydantic_ai(
    strategy: str, values: tuple[str, str], retries: int, tool_at: int
) -> None:
    """test_exhaustive_strategy_invalid_first_valid_second_output,
    _valid_first_invalid_second_output, _with_tool_retry_and_final_result,
    test_early_no_function_tools_all_outputs_fail, test_early_multiple_outputs_and_function
    _tools, test_graceful_interleaved_outputs_and_function_tools, all at once: two output
    functions (one sending back "bad") and a tool, in each order, under each strategy and
    output budget, side by side: the same output (or both fail), the same functions and
    tools called, each call answered alike."""
    called: dict[str, list[str]] = {"ours": [], "theirs": []}

    def make(side: str, retry: type[Exception]) -> tuple[Any, Any, Any]:
        def first_output(output: OutputType) -> OutputType:
            called[side].append(f"first:{output.value}")
            if output.value == "bad":
                raise retry("first failed")
            return output

        def second_output(output: OutputType) -> OutputType:
            called[side].append(f"second:{output.value}")
            if output.value == "bad":
                raise retry("second failed")
            return output

        def regular_tool(x: int) -> int:
            called[side].append("regular_tool")
            return x

        return first_output, second_output, regular_tool

    parts: list[tuple[str, dict[str, Any]]] = [
        ("first_output", {"value": values[0]}),
        ("second_output", {"value": values[1]}),
    ]
    parts.insert(tool_at, ("regular_tool", {"x": 1}))
    later = ("first_output", {"value": "later"})

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        batch = parts if len(messages) == 1 else [later]
        return PModelResponse(parts=[ToolCallPart(n, a) for n, a in batch])

    pfirst, psecond, ptool = make("theirs", PModelRetry)
    their_agent = PAgent(
        PFunctionModel(respond),
        output_type=[
            PToolOutput(pfirst, name="first_output"),
            PToolOutput(psecond, name="second_output"),
        ],
        tools=[ptool],
        end_strategy=strategy,  # type: ignore[arg-type]
        retries={"output": retries},
    )
    theirs: Any
    try:
        theirs = their_agent.run_sync("go")
    except UnexpectedModelBehavior:
        theirs = None

    first, second, regular = make("ours", ModelRetry)
    script = ScriptedModel([tool_calls(*(tool_call(n, a) for n, a in parts)), tool_call(*later)])
    ours = Agent(
        "a",
        script,
        output_type=[
            ToolOutput(first, name="first_output"),
            ToolOutput(second, name="second_output"),
        ],
        tools=[regular],
        end_strategy=strategy,  # type: ignore[arg-type]
        output_retries=retries,
    ).run_sync("go")
    assert sorted(called["ours"]) == sorted(called["theirs"])
    if theirs is None:
        assert ours.status is RunStatus.FAILED, ours.output
        return
    assert ours.output == theirs.output, ours.error
    assert ours_marked(ours.messages) == their_answers(theirs.all_messages())


async def test_capture_run_messages_around_run_stream() -> None:
    """pydantic-ai's ``capture_run_messages`` covers ``run_stream`` too: the list is the
    streamed run's transcript once the stream is read to its end."""
    agent = Agent("a", ScriptedModel([tool_call("look_tool"), "done"]), tools=[look_tool])
    with capture_run_messages() as messages:
        events = [event.type async for event in agent.run_stream("go")]
    assert events[-1] == "run.completed"
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[-1].content == "done"


@tool
def look_tool() -> str:
    """Look."""
    return "seen"


RETRY_WINS = "Output not used as the final result - addressing tool retries from this round first."


@pytest.mark.parametrize("strategy", ["early", "graceful", "exhaustive"])
@pytest.mark.parametrize("failing", ["flaky_tool", "bad_args", "hallucinated_tool"])
@pytest.mark.parametrize("tool_first", [True, False])
def test_a_tool_sent_back_holds_the_output_back_as_pydantic_ai(
    strategy: str, failing: str, tool_first: bool
) -> None:
    """test_graceful_function_tool_retry_suppresses_output,
    test_exhaustive_function_tool_retry_suppresses_output,
    test_early_function_tool_retry_does_not_suppress_output and
    test_unknown_tool_retry_does_not_suppress_output, side by side: under 'graceful' and
    'exhaustive' a tool call of the response sent back (``ModelRetry``, arguments that do not
    validate) holds the output back, its answer rewritten "Output not used ... addressing
    tool retries from this round first.", and the model answers again; an unknown tool's
    call does not; under 'early' the tool never runs."""
    rounds: dict[str, int] = {"ours": 0, "theirs": 0}

    def make(side: str, retry: type[Exception]) -> Any:
        def flaky_tool(x: int) -> int:
            """Flaky."""
            if rounds[side] == 1:
                raise retry("not yet")
            return x  # pragma: no cover

        return flaky_tool

    args = {"x": "not a number"} if failing == "bad_args" else {"x": 1}
    name = "hallucinated_tool" if failing == "hallucinated_tool" else "flaky_tool"
    batch = [(name, args), ("final_result", {"value": "premature"})]
    if not tool_first:
        batch.reverse()

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        rounds["theirs"] += 1
        if rounds["theirs"] == 1:
            return PModelResponse(parts=[ToolCallPart(n, a) for n, a in batch])
        return PModelResponse(parts=[ToolCallPart("final_result", {"value": "corrected"})])

    theirs = PAgent(
        PFunctionModel(respond),
        output_type=OutputType,
        tools=[make("theirs", PModelRetry)],
        end_strategy=strategy,  # type: ignore[arg-type]
    ).run_sync("go")

    async def answer(request: ModelRequest) -> ModelResponse:
        rounds["ours"] += 1
        if rounds["ours"] == 1:
            return tool_calls(*(tool_call(n, a) for n, a in batch))
        return tool_call("final_result", value="corrected")

    ours = Agent(
        "a",
        FunctionModel(answer),
        output_type=ToolOutput(OutputType),
        tools=[make("ours", ModelRetry)],
        end_strategy=strategy,  # type: ignore[arg-type]
    ).run_sync("go")
    assert ours.output == theirs.output, ours.error
    assert rounds["ours"] == rounds["theirs"]
    mine = [c for n, c in answers(ours.messages) if n == "final_result"]
    their = [c for n, c in their_answers(theirs.all_messages()) if n == "final_result"]
    assert mine == their


async def test_a_tool_withdrawn_by_steering_does_not_hold_the_output_back(rt: Runtime) -> None:
    """Ours: a call of a tool ``constrain_tools`` took away after the model called it is
    answered withdrawn (the model did nothing wrong): it holds no output back."""
    running, release = asyncio.Event(), asyncio.Event()

    async def slow(x: int) -> int:
        """A slow tool."""
        running.set()
        await release.wait()
        return x

    def other(y: int) -> int:
        """Another tool."""
        return y  # pragma: no cover

    model = ScriptedModel(
        [
            tool_calls(
                tool_call("slow", x=1),
                tool_call("final_result", value="done"),
                tool_call("other", y=2),
            )
        ]
    )
    agent = Agent("a", model, output_type=ToolOutput(OutputType), tools=[slow, other])
    handle = await rt.start(agent, "go")
    await running.wait()
    assert (await handle.constrain_tools(["slow"])).status == "accepted"
    release.set()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output == OutputType(value="done")
    assert len(model.requests) == 1
