"""pydantic-ai's history processors that replace or reorder the history, what a tool's
return value reads as, tools added while a run goes on, retries and usage as a run's
functions see them, tool names under prefixes, histories whose calls do not pair up,
ported (a twenty-first batch; see test_pydantic_ai_ports.py to _20).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``,
``tests/test_tools.py``, ``tests/test_toolsets.py``, ``tests/test_history_processor.py``,
``tests/test_usage_limits.py``, ``tests/test_transcript_repair.py``,
``tests/models/test_model_function.py``); most run pydantic-ai itself beside ours (its
``FunctionModel``, or its ``ToolReturnPart``) on the same conversation or value.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import pathlib
import uuid
from typing import Any

import pytest
from pydantic import BaseModel, Field, RootModel, model_serializer
from pydantic_ai import Agent as PAgent
from pydantic_ai import ModelRetry as PModelRetry
from pydantic_ai import RunContext as PRunContext
from pydantic_ai import ToolOutput as PToolOutput
from pydantic_ai import UnexpectedModelBehavior
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import ModelRequest as PModelRequest
from pydantic_ai.messages import ModelResponse as PModelResponse
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.models.function import FunctionModel as PFunctionModel
from pydantic_ai.toolsets import FunctionToolset as PFunctionToolset
from pydantic_ai.usage import RequestUsage

from tests.harness.test_pydantic_ai_ports_19 import (
    TWO_TURNS,
    flat,
    our_history,
    ours,
    ours_run,
    their_history,
    theirs,
)
from tinyagents import Agent, FunctionToolset, ModelRetry, RunContext, RunStatus, ToolOutput
from tinyagents.errors import ConfigurationError
from tinyagents.harness import Message, ModelResponse, ToolCall, Usage
from tinyagents.testkit import FunctionModel, ScriptedModel, tool_call


def tool_results(result: Any) -> list[str]:
    return [m.content for m in result.messages if m.role == "tool"]


# --- history processors that replace or reorder (tests/test_history_processor.py) -----------


async def test_history_processor_replace_messages() -> None:
    # a processor returning messages of its own: they are sent, and they are the run's
    # transcript from then on; the run's new messages are the one sent and the answer
    history = [("user", "Original message"), ("assistant", "Original response")]
    history += [("user", "Original followup")]
    expected = await theirs(
        [lambda ms: [PModelRequest(parts=[UserPromptPart("Modified message")])]], "foobar", history
    )
    got = await ours_run(
        [lambda ms: [Message(role="user", content="Modified message")]], "foobar", history
    )
    assert got == expected
    sent, kept, new = got
    assert sent == [[("user", "Modified message")]]
    assert kept == [("user", "Modified message"), ("assistant", "Provider response")]
    assert new == kept


async def test_history_processor_reorder_old_new() -> None:
    # swapping the history's last message and the run's input: the input now comes first,
    # so every message from it on is new, the old question it moved past included
    # (pydantic-ai stamps that one with the run's id, and so counts it new too)
    def swap_last_two(messages: list[Any]) -> list[Any]:
        return messages[:-2] + messages[-2:][::-1]

    history = [("user", "Old question")]
    expected = await theirs([swap_last_two], "New question", history)
    got = await ours_run([swap_last_two], "New question", history)
    assert got == expected
    sent, kept, new = got
    assert sent == [[("user", "New question"), ("user", "Old question")]]
    assert new == kept == [*sent[0], ("assistant", "Provider response")]


async def test_history_processor_swapping_two_old_messages_keeps_the_new_ones_apart() -> None:
    # ours beside the two above: a processor that reorders only the history leaves the run's
    # own messages where they start, so its new messages are its input and the answer
    def swap_first_two(messages: list[Any]) -> list[Any]:
        return messages[:2][::-1] + messages[2:]

    expected = await theirs([swap_first_two], "New question", TWO_TURNS)
    got = await ours_run([swap_first_two], "New question", TWO_TURNS)
    assert got == expected
    sent, kept, new = got
    assert sent == [[("assistant", "Answer 1"), ("user", "Question 1"), ("user", "New question")]]
    assert new == kept[-2:]


# --- a tool added while the run goes on (tests/test_agent.py) --------------------------------


async def test_adding_tools_during_run() -> None:
    # ports ::test_adding_tools_during_run. Kept on purpose, a difference: pydantic-ai asks
    # its toolsets for their tools at each step, so a tool added to a toolset by a tool
    # (``toolset.add_function``) is offered from the next request on; ours reads what a
    # toolset has once, when the agent is made (a run's ``toolsets=``: when it starts), so
    # what a run may call changes only through steering, audited (docs/harness.md,
    # "Per-request toolsets"). The call to the added tool is an unknown-tool error result,
    # which the model reads and answers; the next run of the agent does not offer it either.
    def their_respond(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        if len(messages) == 1:
            return PModelResponse(parts=[ToolCallPart("add_foo_tool")])
        if len(messages) == 3:
            return PModelResponse(parts=[ToolCallPart("foo")])
        return PModelResponse(parts=[TextPart("Done")])

    their_toolset = PFunctionToolset()

    def foo() -> str:
        return "Hello from foo"

    @their_toolset.tool_plain
    def add_foo_tool() -> str:
        their_toolset.add_function(foo)
        return "foo tool added"

    their = await PAgent(PFunctionModel(their_respond), toolsets=[their_toolset]).run(
        "Add the foo tool and run it"
    )
    their_returns = [
        p.content for m in their.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    assert their_returns == ["foo tool added", "Hello from foo"]

    toolset = FunctionToolset()

    @toolset.tool_plain
    def add_foo() -> str:
        toolset.add_function(foo)
        return "foo tool added"

    model = ScriptedModel([tool_call("add_foo"), tool_call("foo"), "Done", "again"])
    agent = Agent("a", model, toolsets=[toolset])
    result = await agent.run("Add the foo tool and run it")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "Done")
    assert tool_results(result) == [
        "foo tool added",
        "unknown tool 'foo'; available: add_foo. Call one of those.",
    ]
    assert "foo" in toolset.get_tools()  # the toolset has it; the agent read it before
    await agent.run("again")
    assert [[spec.name for spec in r.tools] for r in model.requests] == [["add_foo"]] * 4


# --- what a tool's return value reads as (tests/test_tools.py, pydantic_ai.messages) ---------


def their_text(value: Any) -> str:
    """What pydantic-ai's model reads of a tool's return value."""
    return ToolReturnPart(tool_name="t", content=value, tool_call_id="c").model_response_str()


async def ours_text(*values: Any) -> list[str]:
    """What our model reads of each value, returned by a tool of a run."""
    returns = iter(values)
    agent = Agent("a", ScriptedModel([tool_call("t")] * len(values) + ["done"]))

    @agent.tool_plain
    def t() -> Any:
        return next(returns)

    result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    return tool_results(result)


async def test_tool_return_part_serializes_with_serialization_alias() -> None:
    # ports ::test_tool_return_part_serializes_with_serialization_alias: a model returned
    # by a tool is sent with its fields' aliases, the names its schema says
    class OutputModel(BaseModel):
        value: int = Field(serialization_alias="wireOut")

    class Aliased(BaseModel):
        value: int = Field(alias="wire")

    values = [OutputModel(value=1), Aliased(wire=2)]
    assert [their_text(v) for v in values] == ['{"wireOut":1}', '{"wire":2}']
    assert await ours_text(*values) == ['{"wireOut": 1}', '{"wire": 2}']


class Color(enum.Enum):
    RED = "red"


class Word(RootModel[str]):
    pass


class Tagged(BaseModel):
    x: int

    @model_serializer
    def tagged(self) -> str:
        return f"Tagged<{self.x}>"


STRING_VALUES = [
    datetime.datetime(2024, 1, 2, 3, 4, 5),
    datetime.date(2024, 1, 2),
    datetime.timedelta(seconds=90),
    uuid.UUID(int=1),
    decimal.Decimal("1.50"),
    Color.RED,
    Word("hello"),
    Tagged(x=1),
    pathlib.Path("/tmp/report.txt"),
]


async def test_a_tool_return_whose_json_is_a_string_is_sent_as_that_string() -> None:
    # pydantic-ai's ToolReturnPart.model_response_str (its _tool_return_text): a value whose
    # JSON form is a string (a datetime, a UUID, a Decimal, an Enum of text, a root model of
    # a str, a model serialized as a str, a path) is sent as that string, unquoted, as a str
    # return would be. Ours sent its JSON, '"2024-01-02T03:04:05"', quotes and all.
    expected = [their_text(v) for v in STRING_VALUES]
    assert expected == [
        "2024-01-02T03:04:05",
        "2024-01-02",
        "PT1M30S",
        "00000000-0000-0000-0000-000000000001",
        "1.50",
        "red",
        "hello",
        "Tagged<1>",
        "/tmp/report.txt",
    ]
    assert await ours_text(*STRING_VALUES) == expected
    # the string is not read again: one holding quotes or JSON is sent as it is
    assert await ours_text(Word('"quoted" {"a": 1}')) == ['"quoted" {"a": 1}']
    # inside a structure, a string is JSON as ever
    assert await ours_text([datetime.date(2024, 1, 2)]) == ['["2024-01-02"]']


async def test_a_tool_returning_none_or_an_empty_list_is_sent_as_its_json() -> None:
    # Kept on purpose, a difference: pydantic-ai sends a tool's None, and its empty list (read
    # as no content parts), as an empty text; ours sends their JSON, ``null`` and ``[]``
    # (docs/harness.md: the model reads that the tool returned nothing, not an empty
    # answer some providers refuse as a tool message's content)
    assert [their_text(None), their_text([])] == ["", ""]
    assert await ours_text(None, []) == ["null", "[]"]


# --- retries: an override of the agent's budgets (tests/test_agent.py) -----------------------


class Foo(BaseModel):
    a: int


async def test_wrapper_override_forwards_retries() -> None:
    # ports ::test_wrapper_override_forwards_retries (pydantic-ai's WrapperAgent forwards
    # override(retries=...) to the agent it wraps; ours has no wrapper agent, the override is
    # the agent's own): an int retries=0 over the agent's {"output": 3} leaves no output
    # retry, so the first invalid output call fails the run
    their_calls: list[int] = []

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        their_calls.append(1)
        assert info.output_tools
        return PModelResponse(parts=[ToolCallPart(info.output_tools[0].name, '{"bad_field": 1}')])

    their = PAgent(PFunctionModel(their_model), output_type=PToolOutput(Foo), retries={"output": 3})
    with their.override(retries=0):
        with pytest.raises(UnexpectedModelBehavior, match=r"Exceeded maximum output retries \(0\)"):
            await their.run("Hello")
    assert their_calls == [1]

    calls: list[int] = []

    def model(request: Any) -> ModelResponse:
        calls.append(1)
        return tool_call("final_result", {"bad_field": 1})

    agent = Agent("a", FunctionModel(model), output_type=ToolOutput(Foo), retries={"output": 3})
    with agent.override(retries=0):
        stopped = await agent.run("Hello")
    assert stopped.status is RunStatus.FAILED and calls == [1]
    assert "final_result call is not valid Foo output" in (stopped.error or "")
    calls.clear()
    result = await agent.run("Hello")  # outside the block, the agent's 3 again
    assert result.status is RunStatus.FAILED and calls == [1, 1, 1, 1]


# --- an output function that is a bound method (tests/test_agent.py) ------------------------


class Weather(BaseModel):
    temperature: float
    description: str

    def their_weather(self, ctx: PRunContext[None], city: str) -> Weather:
        assert isinstance(ctx, PRunContext)
        return self

    def get_weather(self, ctx: RunContext, city: str) -> Weather:
        assert isinstance(ctx, RunContext)
        return self


async def test_output_type_bound_instance_method_with_run_context() -> None:
    # ports ::test_output_type_bound_instance_method_with_run_context: a bound method taking
    # the run's context first is an output function; its output tool offers the arguments
    # after the context, and the run's output is what it returns
    weather = Weather(temperature=28.7, description="sunny")
    their_tools: list[Any] = []

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        their_tools.extend(info.output_tools)
        name = info.output_tools[0].name
        return PModelResponse(parts=[ToolCallPart(name, '{"city": "Mexico City"}')])

    their = await PAgent(PFunctionModel(their_model), output_type=weather.their_weather).run("go")
    assert their.output == weather

    model = ScriptedModel([tool_call("final_result", city="Mexico City")])
    result = await Agent("a", model, output_type=weather.get_weather).run("Mexico City")
    assert (result.status, result.output) == (RunStatus.COMPLETED, weather)
    (offered,) = model.requests[0].tools
    (their_tool,) = their_tools
    assert (offered.name, offered.parameters) == (
        their_tool.name,
        their_tool.parameters_json_schema,
    )
    assert offered.parameters["properties"] == {"city": {"type": "string"}}


# --- output validators sending a text or an output call back (models/test_model_function) ---


async def test_retry_str_and_retry_result_type() -> None:
    # ports ::test_retry_str and ::test_retry_result_type: a validator's ModelRetry sends the
    # model back, for a text answer and for an output tool's; the next answer is the output
    their_count = 0

    async def their_text_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        nonlocal their_count
        their_count += 1
        return PModelResponse(parts=[TextPart(str(their_count))])

    their = PAgent(PFunctionModel(their_text_model))

    @their.output_validator
    async def their_check(o: str) -> str:
        if o == "1":
            raise PModelRetry("Try again")
        return o

    assert (await their.run("")).output == "2"

    count = 0

    async def text_model(request: Any) -> str:
        nonlocal count
        count += 1
        return str(count)

    agent = Agent("a", FunctionModel(text_model))

    @agent.output_validator
    async def check(o: str) -> str:
        if o == "1":
            raise ModelRetry("Try again")
        return o

    result = await agent.run("go")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "2")

    count = 0

    async def call_model(request: Any) -> ModelResponse:
        nonlocal count
        count += 1
        return tool_call("final_result", {"a": count})

    structured = Agent("s", FunctionModel(call_model), output_type=ToolOutput(Foo))

    @structured.output_validator
    async def check_foo(o: Foo) -> Foo:
        if o.a == 1:
            raise ModelRetry("Try again")
        return o

    result = await structured.run("go")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Foo(a=2))
    # the call sent back is answered with the validator's message, as a tool result
    assert tool_results(result)[0].startswith("Try again")


# --- usage as a run's functions see it (tests/test_usage_limits.py) --------------------------


async def test_the_usage_a_tool_and_an_output_validator_see() -> None:
    # ports the usage side of ::test_usage_so_far: a tool and an output validator see the
    # run's usage so far, the response that called them included. Kept on purpose, a
    # difference: ours counts a tool call when it is sent (docs/harness.md, "Limits": each
    # call is charged before it starts, so runs sharing a budget cannot overspend it), so a
    # tool sees its own call counted; pydantic-ai counts it once the tool has run.
    their_seen: list[tuple[str, int, int, int, int]] = []

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        if len(messages) == 1:
            return PModelResponse(
                parts=[ToolCallPart("t", {})], usage=RequestUsage(input_tokens=10, output_tokens=1)
            )
        return PModelResponse(
            parts=[TextPart("done")], usage=RequestUsage(input_tokens=20, output_tokens=2)
        )

    their = PAgent(PFunctionModel(their_model))

    @their.tool
    def t(ctx: PRunContext[None]) -> str:
        u = ctx.usage
        their_seen.append(("tool", len(ctx.messages), u.requests, u.input_tokens, u.tool_calls))
        return "ok"

    @their.output_validator
    def their_check(ctx: PRunContext[None], o: str) -> str:
        u = ctx.usage
        their_seen.append(("val", len(ctx.messages), u.requests, u.input_tokens, u.tool_calls))
        return o

    await their.run("go")
    assert their_seen == [("tool", 2, 1, 10, 0), ("val", 4, 2, 30, 1)]

    seen: list[tuple[str, int, int, int, int]] = []
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[ToolCall(id="c1", name="t", args={})],
                usage=Usage(input_tokens=10, output_tokens=1),
            ),
            ModelResponse(text="done", usage=Usage(input_tokens=20, output_tokens=2)),
        ]
    )
    agent = Agent("a", model)

    def noted(where: str, ctx: RunContext) -> None:
        u = ctx.info.usage
        seen.append((where, len(ctx.run.messages), u.model_calls, u.input_tokens, u.tool_calls))

    @agent.tool(name="t")
    def our_t(ctx: RunContext) -> str:
        noted("tool", ctx)
        return "ok"

    @agent.output_validator
    def check(ctx: RunContext, o: str) -> str:
        noted("val", ctx)
        return o

    result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    # the same but for the tool's own call, counted as it started
    assert seen == [("tool", 2, 1, 10, 1), ("val", 4, 2, 30, 1)]


# --- a tool under a prefix or a new name (tests/test_toolsets.py) ----------------------------


async def test_a_tool_under_a_prefix_and_a_new_name_goes_by_the_name_it_is_offered_by() -> None:
    # the context's tool_name under pydantic-ai's PrefixedToolset and RenamedToolset (their
    # call_tool; FunctionToolset.get_tools for a prepare). Kept on purpose, a difference:
    # pydantic-ai hands the wrapped tool's call and prepare its own name ("look"), its
    # args_validator the name called; ours is one name throughout, the one the model calls
    # and the transcript holds (docs/harness.md, "Toolsets"). The spec a prepare is given
    # has that name too (test_prepare_goes_with_a_prefixed_toolset).
    their_seen: list[tuple[str, ...]] = []
    their_toolset = PFunctionToolset()

    async def their_prepare(ctx: PRunContext[None], tool_def: Any) -> Any:
        their_seen.append(("prepare", str(ctx.tool_name), tool_def.name))
        return tool_def

    def their_validator(ctx: PRunContext[None], x: int) -> None:
        their_seen.append(("validator", str(ctx.tool_name)))

    @their_toolset.tool(prepare=their_prepare, args_validator=their_validator)
    def look(ctx: PRunContext[None], x: int) -> str:
        their_seen.append(("call", str(ctx.tool_name)))
        return "ok"

    parts = iter([ToolCallPart("p_new", {"x": 1}), TextPart("done")])
    their = PAgent(
        PFunctionModel(lambda messages, info: PModelResponse(parts=[next(parts)])),
        toolsets=[their_toolset.renamed({"new": "look"}).prefixed("p")],
    )
    await their.run("go")
    assert their_seen == [
        ("prepare", "look", "look"),
        ("validator", "p_new"),
        ("call", "look"),
        ("prepare", "look", "look"),
    ]

    seen: list[tuple[str, ...]] = []
    toolset = FunctionToolset()

    async def prepare(ctx: RunContext, spec: Any) -> Any:
        seen.append(("prepare", str(ctx.tool_name), spec.name))
        return spec

    def validator(ctx: RunContext, x: int) -> None:
        seen.append(("validator", str(ctx.tool_name)))

    @toolset.tool(prepare=prepare, args_validator=validator)
    def look_around(ctx: RunContext, x: int) -> str:
        seen.append(("call", str(ctx.tool_name)))
        return "ok"

    model = ScriptedModel([tool_call("p_new", x=1), "done"])
    agent = Agent("a", model, toolsets=[toolset.renamed({"new": "look_around"}).prefixed("p")])
    result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert seen == [
        ("prepare", "p_new", "p_new"),
        ("validator", "p_new"),
        ("call", "p_new"),
        ("prepare", "p_new", "p_new"),
    ]


async def test_one_toolset_under_two_prefixes_counts_each_names_failures_apart() -> None:
    # ports ::test_tool_manager_retry_logic's counts through a run: as pydantic-ai keys its
    # retries by the name called, the failures of a_x and of b_x, one tool under two
    # prefixes, are counted apart, and the third call, a_x's second failure in a row, is
    # past its cap of 1 in both
    script = ["a_x", "b_x", "a_x", "done"]
    their_seen: list[tuple[int, int]] = []
    their_toolset = PFunctionToolset(max_retries=1)

    @their_toolset.tool
    def x(ctx: PRunContext[None]) -> str:
        their_seen.append((ctx.retry, ctx.max_retries))
        raise PModelRetry("nope")

    names = iter(script)

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        name = next(names)
        return PModelResponse(parts=[TextPart(name) if name == "done" else ToolCallPart(name)])

    their = PAgent(
        PFunctionModel(their_model),
        toolsets=[their_toolset.prefixed("a"), their_toolset.prefixed("b")],
    )
    with pytest.raises(UnexpectedModelBehavior, match="Tool 'a_x' exceeded max retries count of 1"):
        await their.run("go")
    assert their_seen == [(0, 1), (0, 1), (1, 1)]

    seen: list[tuple[int, int | None]] = []
    toolset = FunctionToolset(max_retries=1)

    @toolset.tool
    def fails(ctx: RunContext) -> str:
        seen.append((ctx.retry, ctx.max_retries))
        raise ModelRetry("nope")

    model = ScriptedModel([tool_call(n.replace("x", "fails")) for n in script[:3]] + ["done"])
    agent = Agent("a", model, toolsets=[toolset.prefixed("a"), toolset.prefixed("b")])
    result = await agent.run("go")
    assert result.status is RunStatus.FAILED
    assert "tool 'a_fails' exceeded max retries count of 1" in (result.error or "")
    assert seen == [(0, 1), (0, 1), (1, 1)]


# --- more history processors (tests/test_history_processor.py) ------------------------------


async def test_history_processor_injects_without_run_id_before_current_run() -> None:
    # a message a processor puts before the run's input is not the run's own: the new
    # messages start at the input, as ever
    def inject(messages: list[Any]) -> list[Any]:
        made = PModelRequest(parts=[UserPromptPart("Inserted")])
        if isinstance(messages[-1], Message):
            made = Message(role="user", content="Inserted")
        return [*messages[:-1], made, *messages[-1:]]

    expected = await theirs([inject], "New question", [("user", "Old")])
    got = await ours_run([inject], "New question", [("user", "Old")])
    assert got == expected
    sent, _, new = got
    assert sent == [[("user", "Old"), ("user", "Inserted"), ("user", "New question")]]
    assert new == [("user", "New question"), ("assistant", "Provider response")]


async def test_new_messages_index_during_iter_with_pruning_and_history() -> None:
    # ports the run of ::test_new_messages_index_during_iter_with_pruning_and_history (its
    # agent.iter is not offered, test_pydantic_ai_ports_20.py): a processor keeping the last
    # two messages prunes the history and then the run's own input during a tool loop; the
    # transcript is what it kept, and every message of it is the run's own
    def keep_last_2(messages: list[Any]) -> list[Any]:
        return messages[-2:] if len(messages) > 2 else messages

    their_sent: list[list[tuple[str, str]]] = []

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        their_sent.append(flat(messages))
        if len(their_sent) == 1:
            return PModelResponse(parts=[ToolCallPart("my_tool", {}, tool_call_id="c1")])
        return PModelResponse(parts=[TextPart("done")])

    their = PAgent(PFunctionModel(their_model), capabilities=[ProcessHistory(keep_last_2)])

    @their.tool_plain
    async def my_tool() -> str:
        return "tool executed"

    history = [("user", "Old message 1"), ("assistant", "Old response 1")]
    their_result = await their.run("start", message_history=their_history(history))

    model = ScriptedModel([tool_call("my_tool"), "done"])
    agent = Agent("a", model, history_processors=[keep_last_2])

    @agent.tool_plain(name="my_tool")
    async def our_tool() -> str:
        return "tool executed"

    result = await agent.run("start", history=our_history(history))
    assert result.status is RunStatus.COMPLETED, result.error
    sent = [ours(r.messages) for r in model.requests]
    assert sent == [
        [("assistant", "Old response 1"), ("user", "start")],
        [("assistant", ""), ("tool", "tool executed")],
    ]
    assert sent == their_sent
    assert ours(result.messages) == flat(their_result.all_messages())
    assert ours(result.messages) == [
        ("assistant", ""),
        ("tool", "tool executed"),
        ("assistant", "done"),
    ]
    assert result.new_messages() == result.messages
    assert flat(their_result.new_messages()) == flat(their_result.all_messages())


# --- a history whose calls and results do not pair up (tests/test_transcript_repair.py) ------


async def test_dangling_tool_call_and_orphaned_result_are_refused_not_repaired() -> None:
    # ports ::test_dangling_tool_call_gets_synthesized_return and
    # ::test_orphaned_tool_result_dropped. Kept on purpose, a difference: pydantic-ai repairs
    # such a history before each request (a call left unanswered is given a result it makes
    # up, "The tool call was interrupted before a result was produced."; a result answering
    # no call is dropped); ours refuses it before anything starts, ConfigurationError naming
    # the call (docs/harness.md, "Starting runs"), as it refused it before pydantic-ai
    # repaired it (test_a_history_with_unanswered_tool_calls_is_refused): the conversation
    # sent is the caller's, not one changed in silence.
    received: list[list[tuple[str, str]]] = []

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        received.append(flat(messages))
        return PModelResponse(parts=[TextPart("All done.")])

    their = PAgent(PFunctionModel(their_model))
    dangling = [
        PModelRequest(parts=[UserPromptPart("What is the weather?")]),
        PModelResponse(parts=[ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="c1")]),
        PModelRequest(parts=[UserPromptPart("Never mind, tell me a joke.")]),
        PModelResponse(parts=[TextPart("Here is a joke.")]),
    ]
    await their.run("Explain?", message_history=dangling)
    interrupted = "The tool call was interrupted before a result was produced."
    assert received[0][:3] == [
        ("user", "What is the weather?"),
        ("assistant", ""),
        ("tool", interrupted),
    ]
    orphaned = [
        PModelRequest(
            parts=[
                UserPromptPart("What is the weather?"),
                ToolReturnPart("get_weather", "Sunny", tool_call_id="ghost"),
            ]
        ),
        PModelResponse(parts=[TextPart("It is sunny.")]),
    ]
    await their.run("Thanks.", message_history=orphaned)
    assert received[1] == [
        ("user", "What is the weather?"),
        ("assistant", "It is sunny."),
        ("user", "Thanks."),
    ]

    model = ScriptedModel(["never"])
    agent = Agent("a", model)
    ours_dangling = [
        Message(role="user", content="What is the weather?"),
        Message(
            role="assistant",
            tool_calls=[ToolCall(id="c1", name="get_weather", args={"city": "Paris"})],
        ),
        Message(role="user", content="Never mind, tell me a joke."),
        Message(role="assistant", content="Here is a joke."),
    ]
    ours_orphaned = [
        Message(role="user", content="What is the weather?"),
        Message(role="tool", content="Sunny", tool_call_id="ghost"),
        Message(role="assistant", content="It is sunny."),
    ]
    for history, call in [(ours_dangling, "c1"), (ours_orphaned, "ghost")]:
        with pytest.raises(ConfigurationError, match=call):
            await agent.run("Explain?", history=history)
    assert model.requests == []
