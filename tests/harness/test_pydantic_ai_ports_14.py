"""pydantic-ai's run dependencies (``deps``), ``agent.override``, the run-level ``model=``,
``instructions=`` and ``toolsets=``, and its toolsets (``FunctionToolset``, prefixed,
filtered, renamed, combined), ported (a fourteenth batch; see test_pydantic_ai_ports.py to _13).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise). Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from typing import Any

import pytest

from tinyagents import (
    Agent,
    FunctionToolset,
    ModelRetry,
    RunContext,
    RunLimits,
    RunStatus,
    Runtime,
    SubAgent,
    SubAgentTool,
    ToolOutput,
    tool,
)
from tinyagents.errors import ConfigurationError
from tinyagents.harness import (
    CombinedToolset,
    FunctionTool,
    LiteLLMModel,
    Message,
    ModelRequest,
    ModelResponse,
    PrefixedToolset,
    ToolSpec,
)
from tinyagents.testkit import (
    FunctionModel,
    OpenAICompatServer,
    ScriptedModel,
    reply,
    tool_call,
    tool_calls,
)


def calls_every_tool(text: str | None = None, **args: dict[str, Any]) -> FunctionModel:
    """pydantic-ai's ``TestModel``: the first request calls every tool offered (with the
    arguments ``args`` gives by tool name, else none), the next answers the results as JSON
    by tool name (or ``text``)."""

    def answer(request: ModelRequest) -> ModelResponse:
        results = {m.name: m.content for m in request.messages if m.role == "tool"}
        if results or not request.tools:
            if text is not None:
                return reply(text)
            return reply(json.dumps(results) if results else "success (no tool calls)")
        return tool_calls(*(tool_call(t.name, args.get(t.name, {})) for t in request.tools))

    return FunctionModel(answer, name="test")


def offered(model: FunctionModel) -> list[str]:
    """The tools the last request offered."""
    return [t.name for t in model.requests[-1].tools]


def system_prompt(result_messages: list[Message]) -> str | None:
    first = result_messages[0]
    return first.content if first.role == "system" else None


# --- tests/test_deps.py ---


@dataclasses.dataclass
class MyDeps:
    foo: int
    bar: int


def deps_agent() -> Agent:
    async def example_tool(ctx: RunContext) -> str:
        return f"{ctx.deps}"

    return Agent("deps", calls_every_tool(), tools=[example_tool])


async def test_deps_used() -> None:
    """Ports tests/test_deps.py::test_deps_used: a tool reads the run's ``ctx.deps``."""
    result = await deps_agent().run("foobar", deps=MyDeps(foo=1, bar=2))
    assert result.output == '{"example_tool": "MyDeps(foo=1, bar=2)"}'
    assert [m.content for m in result.messages if m.role == "tool"] == ["MyDeps(foo=1, bar=2)"]


def test_deps_override() -> None:
    """Ports tests/test_deps.py::test_deps_override: ``override(deps=...)`` wins over the
    run's ``deps=``, an inner override over an outer one, and each ends with its block."""
    agent = deps_agent()
    with agent.override(deps=MyDeps(foo=3, bar=4)):
        result = agent.run_sync("foobar", deps=MyDeps(foo=1, bar=2))
        assert result.output == '{"example_tool": "MyDeps(foo=3, bar=4)"}'
        with agent.override(deps=MyDeps(foo=5, bar=6)):
            result = agent.run_sync("foobar", deps=MyDeps(foo=1, bar=2))
            assert result.output == '{"example_tool": "MyDeps(foo=5, bar=6)"}'
        result = agent.run_sync("foobar", deps=MyDeps(foo=1, bar=2))
        assert result.output == '{"example_tool": "MyDeps(foo=3, bar=4)"}'
    result = agent.run_sync("foobar", deps=MyDeps(foo=1, bar=2))
    assert result.output == '{"example_tool": "MyDeps(foo=1, bar=2)"}'


async def test_deps_reach_system_prompts_and_output_validators() -> None:
    """Ours, after pydantic-ai's ``RunContext.deps`` (``tests/test_agent.py``'s
    system prompt and output validator tests read it too): every context of the run has the
    deps, and a run given none has ``ctx.deps`` None."""
    seen: list[Any] = []
    agent = Agent("ctx", ScriptedModel(["done", "done"]))

    @agent.system_prompt
    def prompt(ctx: RunContext) -> str:
        seen.append(("prompt", ctx.deps))
        return f"user {ctx.deps}"

    @agent.output_validator
    def check(ctx: RunContext, output: str) -> str:
        seen.append(("validator", ctx.deps))
        return output

    result = await agent.run("hi", deps="ann")
    assert seen == [("prompt", "ann"), ("validator", "ann")]
    assert system_prompt(result.messages) == "user ann"
    seen.clear()
    await agent.run("hi")
    assert seen == [("prompt", None), ("validator", None)]


async def test_deps_through_a_runtime_start() -> None:
    """Ours: ``rt.start(agent, input, deps=...)`` gives the run its deps as ``agent.run``
    does (they are the run's, in memory: a run started again after a crash under its id is
    given the deps its new start passes)."""

    def whose(ctx: RunContext) -> str:
        return str(ctx.deps["user"])

    agent = Agent("rt", calls_every_tool(), tools=[whose])
    async with Runtime() as rt:
        handle = await rt.start(agent, "go", deps={"user": "bo"})
        assert (await handle.result()).output == '{"whose": "bo"}'


# --- agent.override(model=...), agent.run(model=...) ---


def test_override_model() -> None:
    """Ports test_override_model: the overriding model answers; the agent's is not called."""
    own = ScriptedModel(["from the agent's model"])
    agent = Agent("m", own)
    with agent.override(model=ScriptedModel(["from the test model"])):
        assert agent.run_sync("Hello").output == "from the test model"
    assert own.requests == []
    assert agent.run_sync("Hello").output == "from the agent's model"


async def test_run_model_and_override_model_precedence() -> None:
    """Ports the ``model`` argument of ``agent.run`` (``test_override_instructions_basic``
    and most of pydantic-ai's tests pass ``model=TestModel(...)``), and
    ``override(model=...)``'s docstring: the run's model replaces the agent's, and an
    override's replaces the run's."""
    agent = Agent("m", ScriptedModel(["agent"]))
    assert (await agent.run("hi", model=ScriptedModel(["run"]))).output == "run"
    with agent.override(model=ScriptedModel(["override"])):
        assert (await agent.run("hi", model=ScriptedModel(["run"]))).output == "override"


async def test_a_run_model_comes_first_among_the_agents_models() -> None:
    """Ours: an agent with ``models=[...]`` sends each request under the first allowed name;
    a run given its own model is sent under that model's name (the agent's names stay
    allowed after it, for ``constrain_model``)."""
    agent = Agent("m", ScriptedModel(["a"], name="small"), models=["small", "large"])
    result_model = ScriptedModel(["b"], name="other")
    async with Runtime() as rt:
        handle = await rt.start(agent, "hi", model=result_model)
        await handle.result()
        assert handle.info.models == ("other", "small", "large")
    assert result_model.requests[0].model == "other"


def test_override_refuses_what_the_agent_refuses() -> None:
    """Ours: what ``override`` is given is checked when the block starts, as ``Agent(...)``
    checks it (pydantic-ai's ``UserError`` cases), not at each run."""
    agent = Agent("m", ScriptedModel([]))
    with (
        pytest.raises(ConfigurationError, match="instructions must be text"),
        agent.override(
            instructions=42  # type: ignore[arg-type]
        ),
    ):
        pass
    with (
        pytest.raises(ConfigurationError, match="tools must be a list"),
        agent.override(
            tools=lambda: 1  # type: ignore[arg-type]
        ),
    ):
        pass
    with (
        pytest.raises(ConfigurationError, match=r"toolsets\[0\] must be a Toolset"),
        (
            agent.override(toolsets=[object()])  # type: ignore[list-item]
        ),
    ):
        pass


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"instructions": 5}, "instructions must be text"),
        ({"instructions": b"x"}, "instructions must be text"),
        ({"toolsets": FunctionToolset()}, "toolsets must be a list of toolsets"),
        ({"toolsets": ["x"]}, r"toolsets\[0\] must be a Toolset"),
        ({"model": 5}, "expected a Model or a model name"),
    ],
)
async def test_run_level_arguments_of_the_wrong_kind_start_nothing(
    kwargs: dict[str, Any], message: str
) -> None:
    """Ours (pydantic-ai's ``UserError``s for a run's arguments): a run's ``instructions=``,
    ``toolsets=`` or ``model=`` of the wrong kind is a ``ConfigurationError`` before any run
    is registered."""
    model = ScriptedModel(["never"])
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match=message):
            await rt.start(Agent("a", model), "hi", **kwargs)
        assert len(rt.runs.tree) == 0
    assert model.requests == []


# --- instructions ---


def test_instructions_during_run() -> None:
    """Ports test_instructions_during_run: a run's ``instructions=`` follow the agent's on a
    line of their own, for that run only."""
    agent = Agent("i", ScriptedModel(["a", "b"]), instructions="You are a helpful assistant.")
    result = agent.run_sync("Hello", instructions="Your task is to greet people.")
    assert system_prompt(result.messages) == (
        "You are a helpful assistant.\nYour task is to greet people."
    )
    result2 = agent.run_sync("Hello again!")
    assert system_prompt(result2.messages) == "You are a helpful assistant."


def test_override_instructions_basic_and_reset_after_context() -> None:
    """Ports test_override_instructions_basic, test_override_reset_after_context and
    test_override_replaces_instructions."""
    agent = Agent("i", ScriptedModel(["a", "b", "c"]), instructions="ORIG")
    with agent.override(instructions="NEW"):
        new = agent.run_sync("Hi")
        # the run's own instructions= are replaced too, as pydantic-ai's override replaces them
        also = agent.run_sync("Hi", instructions="EXTRA")
    orig = agent.run_sync("Hi")
    assert system_prompt(new.messages) == "NEW"
    assert system_prompt(also.messages) == "NEW"
    assert system_prompt(orig.messages) == "ORIG"


def test_override_none_clears_instructions() -> None:
    """Ports test_override_none_clears_instructions: no system prompt at all."""
    agent = Agent("i", ScriptedModel(["ok"]), instructions="BASE")
    with agent.override(instructions=None):
        result = agent.run_sync("Hello")
    assert system_prompt(result.messages) is None
    assert [m.role for m in result.messages] == ["user", "assistant"]


def test_override_nested_contexts() -> None:
    """Ports test_override_nested_contexts (and test_override_async_run, through run_sync's
    event loop): an inner override wins, the outer one is back after it."""
    agent = Agent("i", ScriptedModel(["a", "b", "c"]), instructions="ORIG")
    with agent.override(instructions="OUTER"):
        outer = agent.run_sync("Hi")
        with agent.override(instructions="INNER"):
            inner = agent.run_sync("Hi")
        outer_again = agent.run_sync("Hi")
    assert [system_prompt(r.messages) for r in (outer, inner, outer_again)] == [
        "OUTER",
        "INNER",
        "OUTER",
    ]


async def test_override_concurrent_isolation() -> None:
    """Ports test_override_concurrent_isolation: two tasks' overrides do not see each other
    (the override is the context's, as pydantic-ai's ContextVar)."""
    agent = Agent("i", FunctionModel(lambda r: "ok"), instructions="ORIG")

    async def run_with(instr: str) -> str | None:
        with agent.override(instructions=instr):
            await asyncio.sleep(0)
            return system_prompt((await agent.run("Hi")).messages)

    assert await asyncio.gather(run_with("A"), run_with("B")) == ["A", "B"]
    assert system_prompt((await agent.run("Hi")).messages) == "ORIG"


def test_override_with_dynamic_prompts() -> None:
    """Ports test_override_with_dynamic_prompts: overriding the instructions leaves the
    ``@agent.system_prompt`` functions' parts in place."""
    agent = Agent("i", ScriptedModel(["a"]), instructions="BASE")

    @agent.system_prompt
    def dynamic_sys() -> str:
        return "DYNAMIC"

    with agent.override(instructions="OVERRIDE_INSTR"):
        result = agent.run_sync("Hi")
    prompt = system_prompt(result.messages)
    assert prompt is not None and "OVERRIDE_INSTR" in prompt and "DYNAMIC" in prompt
    assert "BASE" not in prompt


# --- tools and toolsets on the agent, the run and the override ---


def test_override_tools() -> None:
    """Ports test_override_tools: ``override(tools=...)`` replaces the agent's tools."""

    def foo() -> str:
        return "Hello from foo"

    def bar() -> str:
        return "Hello from bar"

    model = calls_every_tool()
    agent = Agent("t", model, tools=[foo])
    assert agent.run_sync("Hello").output == '{"foo": "Hello from foo"}'
    assert offered(model) == ["foo"]
    with agent.override(tools=[bar]):
        assert agent.run_sync("Hello").output == '{"bar": "Hello from bar"}'
    assert offered(model) == ["bar"]
    with agent.override(tools=[]):
        assert agent.run_sync("Hello").output == "success (no tool calls)"
    assert offered(model) == []
    assert list(agent.tools) == ["foo"]


def test_override_toolsets() -> None:
    """Ports test_override_toolsets: the agent's own tools stay; ``override(toolsets=...)``
    replaces its toolsets and a run's; a run's ``toolsets=`` join the agent's."""
    foo_toolset = FunctionToolset()

    @foo_toolset.tool_plain
    def foo() -> str:
        return "Hello from foo"

    model = calls_every_tool()

    @tool
    def baz() -> str:
        return "Hello from baz"

    agent = Agent("t", model, tools=[baz], toolsets=[foo_toolset])
    result = agent.run_sync("Hello")
    assert offered(model) == ["baz", "foo"]
    assert result.output == '{"baz": "Hello from baz", "foo": "Hello from foo"}'

    bar_toolset = FunctionToolset()

    @bar_toolset.tool_plain
    def bar() -> str:
        return "Hello from bar"

    with agent.override(toolsets=[bar_toolset]):
        result = agent.run_sync("Hello")
    assert offered(model) == ["baz", "bar"]
    assert result.output == '{"baz": "Hello from baz", "bar": "Hello from bar"}'

    with agent.override(toolsets=[]):
        assert agent.run_sync("Hello").output == '{"baz": "Hello from baz"}'
    assert offered(model) == ["baz"]

    result = agent.run_sync("Hello", toolsets=[bar_toolset])
    assert offered(model) == ["baz", "foo", "bar"]
    assert result.output == (
        '{"baz": "Hello from baz", "foo": "Hello from foo", "bar": "Hello from bar"}'
    )

    with agent.override(toolsets=[]):
        assert agent.run_sync("Hello", toolsets=[bar_toolset]).output == (
            '{"baz": "Hello from baz"}'
        )
    assert offered(model) == ["baz"]


def test_toolset_tool_named_like_an_agent_tool_is_refused() -> None:
    """Ports the ``UserError`` pydantic-ai's ``CombinedToolset`` raises for a tool name two
    toolsets define (``test_tool_name_conflict_hint`` and the like): when the agent is made,
    or when the run's toolsets meet the agent's, before anything starts."""

    def foo() -> str:
        return "mine"

    toolset = FunctionToolset([foo])
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "FunctionToolset defines a tool whose name conflicts with existing tool from the "
            "agent: 'foo'. Rename the tool or wrap the toolset in a `PrefixedToolset`"
        ),
    ):
        Agent("t", ScriptedModel([]), tools=[foo], toolsets=[toolset])
    agent = Agent("t", ScriptedModel(["never"]), tools=[foo])
    with pytest.raises(ConfigurationError, match=r"conflicts with existing tool.*'foo'"):
        agent.run_sync("Hi", toolsets=[toolset])
    # prefixed, it is another name
    assert agent.run_sync("Hi", toolsets=[toolset.prefixed("other")]).output == "never"


def test_run_toolsets_do_not_change_the_agent() -> None:
    """Ours: a run's toolsets are that run's; the agent keeps its tools."""
    ts = FunctionToolset()

    @ts.tool_plain
    def extra() -> str:
        return "x"

    model = calls_every_tool()
    agent = Agent("t", model)
    agent.run_sync("Hi", toolsets=[ts])
    assert offered(model) == ["extra"]
    agent.run_sync("Hi")
    assert offered(model) == []
    assert agent.tools == {}


# --- tests/test_toolsets.py ---


def test_function_toolset() -> None:
    """Ports tests/test_toolsets.py::test_function_toolset (without its ``prepare``, which
    is not offered): a toolset's tools, their schemas and calls; a second tool of a name is
    refused (pydantic-ai: "Tool name conflicts with existing tool")."""
    toolset = FunctionToolset()

    @toolset.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers"""
        return a + b

    assert list(toolset.get_tools()) == ["add"]
    spec = toolset.get_tools()["add"].spec()
    assert spec.description == "Add two numbers"
    assert spec.parameters["required"] == ["a", "b"]
    assert asyncio.run(toolset.tools["add"].call({"a": 1, "b": 2})) == 3

    @toolset.tool_plain
    def subtract(a: int, b: int) -> int:
        """Subtract two numbers"""
        return a - b

    assert list(toolset.get_tools()) == ["add", "subtract"]
    with pytest.raises(ConfigurationError, match="Tool name conflicts with existing tool: 'add'"):
        toolset.add_function(add.fn)


async def test_comprehensive_toolset_composition() -> None:
    """Ports tests/test_toolsets.py::test_comprehensive_toolset_composition: prefixed
    toolsets combined, filtered (by the tool alone: see the filter test below) and renamed,
    then run by an agent under their final names."""
    math_toolset = FunctionToolset()

    @math_toolset.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers"""
        return a + b

    @math_toolset.tool_plain
    def multiply(a: int, b: int) -> int:
        """Multiply two numbers"""
        return a * b

    string_toolset = FunctionToolset()

    @string_toolset.tool_plain
    def concat(s1: str, s2: str) -> str:
        """Concatenate two strings"""
        return s1 + s2

    advanced_toolset = FunctionToolset()

    @advanced_toolset.tool_plain
    def power(base: int, exponent: int) -> int:
        """Calculate base raised to the power of exponent"""
        return base**exponent

    combined = CombinedToolset(
        [
            PrefixedToolset(math_toolset, "math"),
            string_toolset.prefixed("str"),
            advanced_toolset.prefixed("adv"),
        ]
    )
    assert list(combined.get_tools()) == ["math_add", "math_multiply", "str_concat", "adv_power"]
    no_advanced = combined.filtered(lambda spec: not spec.name.startswith("adv_"))
    final = no_advanced.renamed({"sum": "math_add"})
    assert list(final.get_tools()) == ["sum", "math_multiply", "str_concat"]

    model = calls_every_tool(
        sum={"a": 5, "b": 3}, math_multiply={"a": 4, "b": 2}, str_concat={"s1": "a", "s2": "b"}
    )
    result = await Agent("calc", model, toolsets=[final]).run("go")
    assert json.loads(result.output) == {"sum": "8", "math_multiply": "8", "str_concat": "ab"}


def test_renamed_toolset_name_collision() -> None:
    """Ports tests/test_toolsets.py::test_renamed_toolset_name_collision, in pydantic-ai's
    words; a swap is no collision."""

    def a(x: int) -> int:
        return x

    def b(x: int) -> int:
        return x

    toolset = FunctionToolset(tools=[FunctionTool(a), FunctionTool(b)])
    with pytest.raises(
        ConfigurationError, match="Tool name conflicts with previously renamed tool: 'b'"
    ):
        toolset.renamed({"b": "a"}).get_tools()
    with pytest.raises(ConfigurationError, match="Renaming tool 'b' to 'a' conflicts"):
        toolset.renamed({"a": "b"}).get_tools()
    assert sorted(toolset.renamed({"b": "a", "a": "b"}).get_tools()) == ["a", "b"]


def test_renaming_a_tool_the_toolset_lacks_is_refused() -> None:
    """Ours: pydantic-ai's ``RenamedToolset`` skips a name its toolset does not have, so a
    misspelt one renames nothing without a word; it is refused here, naming the tools."""

    def a() -> int:
        return 1

    with pytest.raises(ConfigurationError, match=r"does not have: \['typo'\]; it has \['a'\]"):
        FunctionToolset([a]).renamed({"new": "typo"}).get_tools()


async def test_filtered_toolset_filters_by_the_tool() -> None:
    """Ports tests/test_toolsets.py::test_filtered_toolset_async_filter with a filter of the
    tool alone, read once when the agent is made (pydantic-ai's filter is ``(ctx, tool_def)``,
    asked at each step: ours too, test_pydantic_ai_ports_16.py); a filter of any other shape
    is refused, saying what it may be."""

    def tool_a(x: int) -> int:
        return x

    def tool_b(x: str) -> str:
        return x

    toolset = FunctionToolset(tools=[tool_a, tool_b])
    model = calls_every_tool(tool_a={"x": 1})
    await Agent("f", model, toolsets=[toolset.filtered(lambda td: td.name == "tool_a")]).run("t")
    assert offered(model) == ["tool_a"]

    def three(ctx: RunContext, td: ToolSpec, extra: int) -> bool:  # pragma: no cover
        return True

    with pytest.raises(ConfigurationError, match=r"\(ctx, tool_spec\) -> bool.*got 3 param"):
        toolset.filtered(three)
    with pytest.raises(ConfigurationError, match=r"\(ctx, tool_spec\) -> bool.*got str"):
        toolset.filtered("tool_a")  # type: ignore[arg-type]


async def test_toolset_max_retries_inherits_from_agent() -> None:
    """Ports tests/test_toolsets.py::test_toolset_max_retries_inherits_from_agent: a toolset
    without ``max_retries`` takes the agent's ``retries``; ``retries=0`` fails the run at the
    first failed call (pydantic-ai's ``UnexpectedModelBehavior``, our ``ToolError``)."""
    toolset = FunctionToolset()
    attempts: list[int] = []

    @toolset.tool_plain
    def always_fails(x: int) -> int:
        """A tool that always fails."""
        attempts.append(x)
        raise ModelRetry("Always fails")

    model = FunctionModel(lambda request: tool_call("always_fails", x=len(attempts)))
    agent = Agent("r", model, toolsets=[toolset], retries={"tools": 0, "output": 0})
    result = await agent.run("call always_fails")
    assert result.status is RunStatus.FAILED
    assert "exceeded max retries count of 0" in (result.error or "")
    assert len(attempts) == 1


async def test_toolset_explicit_max_retries_overrides_agent() -> None:
    """Ports tests/test_toolsets.py::test_toolset_explicit_max_retries_overrides_agent:
    ``FunctionToolset(max_retries=2)`` wins over ``Agent(retries=...)``: three attempts."""
    toolset = FunctionToolset(max_retries=2)
    attempts: list[int] = []

    @toolset.tool_plain
    def always_fails(x: int) -> int:
        """A tool that always fails."""
        attempts.append(x)
        raise ModelRetry("Always fails")

    model = FunctionModel(lambda request: tool_call("always_fails", x=len(attempts)))
    result = await Agent("r", model, toolsets=[toolset], retries={"tools": 0, "output": 0}).run(
        "call always_fails"
    )
    assert "exceeded max retries count of 2" in (result.error or "")
    assert len(attempts) == 3
    sent_back = [m.content for m in result.messages if m.role == "tool"]
    assert all("Always fails" in text for text in sent_back) and len(sent_back) == 3
    # the toolset's own tool keeps no cap: the cap is on the copy the agent was given
    assert toolset.tools["always_fails"].retries is None


async def test_tool_explicit_retries_overrides_toolset_and_agent() -> None:
    """Ports tests/test_toolsets.py::test_tool_explicit_retries_overrides_toolset_and_agent:
    a tool's own ``retries`` wins over the toolset's and the agent's: four attempts."""
    attempts: list[int] = []

    def always_fails(x: int) -> int:
        """A tool that always fails."""
        attempts.append(x)
        raise ModelRetry("Always fails")

    toolset = FunctionToolset(tools=[FunctionTool(always_fails, retries=3)], max_retries=1)
    model = FunctionModel(lambda request: tool_call("always_fails", x=len(attempts)))
    result = await Agent("r", model, toolsets=[toolset], retries={"tools": 0, "output": 0}).run(
        "call always_fails"
    )
    assert "exceeded max retries count of 3" in (result.error or "")
    assert len(attempts) == 4


async def test_a_tool_of_a_toolset_gets_the_runs_context_and_deps() -> None:
    """Ports pydantic-ai's ``@toolset.tool`` (a ``RunContext`` first parameter) with
    ``ctx.deps``; ``ctx.tool_name`` is the name the tool is offered under (prefixed)."""
    toolset = FunctionToolset()

    @toolset.tool
    def whoami(ctx: RunContext) -> str:
        return f"{ctx.tool_name} for {ctx.deps}"

    model = calls_every_tool()
    result = await Agent("c", model, toolsets=[toolset.prefixed("acct")]).run("hi", deps="ann")
    assert json.loads(result.output) == {"acct_whoami": "acct_whoami for ann"}


# --- overrides reach runs started below ---


async def test_override_reaches_a_delegate_agent_started_by_a_tool() -> None:
    """Ports the use pydantic-ai's docs make of ``override`` in tests of agent delegation
    (``docs/testing.md``, ``docs/multi-agent-applications.md``): an override of the delegate
    made around the parent's run reaches the delegate's runs its tool starts, in the same
    context."""
    delegate = Agent("joke_factory", ScriptedModel(["a real joke"]), description="writes jokes")
    parent = Agent(
        "joke_selection",
        ScriptedModel([tool_call("joke_factory", input="jokes"), "picked one"]),
        tools=[SubAgentTool(SubAgent(delegate))],
    )
    with delegate.override(model=ScriptedModel(["a test joke"])):
        result = await parent.run("Tell me a joke.")
    assert result.output == "picked one"
    assert "a test joke" in next(m.content for m in result.messages if m.role == "tool")


def test_tool_name_conflict_hint() -> None:
    """Ports tests/test_tools.py::test_tool_name_conflict_hint, in pydantic-ai's words (when
    the agent is made, where pydantic-ai raises at the run)."""

    def tool(x: int) -> int:
        return x + 1

    def foo_tool(x: str) -> str:
        return x + "foo"

    prefixed_toolset = PrefixedToolset(FunctionToolset([tool], id="tool"), "foo")
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "PrefixedToolset(FunctionToolset 'tool') defines a tool whose name conflicts with "
            "existing tool from the agent: 'foo_tool'. Change the `prefix` attribute to avoid "
            "name conflicts."
        ),
    ):
        Agent("test", ScriptedModel([]), tools=[foo_tool], toolsets=[prefixed_toolset])


def test_two_toolsets_offering_one_name_are_refused() -> None:
    """Ports the ``CombinedToolset`` conflict of tests/test_toolsets.py (its
    ``test_comprehensive_toolset_composition`` ends on it): the second toolset is named."""

    def a() -> int:
        return 1

    first, second = FunctionToolset([a], id="first"), FunctionToolset([a], id="second")
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "FunctionToolset 'second' defines a tool whose name conflicts with existing tool "
            "from FunctionToolset 'first': 'a'."
        ),
    ):
        CombinedToolset([first, second]).get_tools()


# --- @agent.tool and @agent.tool_plain (tests/test_tools.py) ---


def test_tool_no_ctx() -> None:
    """Ports tests/test_tools.py::test_tool_no_ctx: ``@agent.tool`` is for a function taking
    the run's context; one without is refused, in pydantic-ai's words (our
    ``ConfigurationError`` for its ``UserError``), naming ``tool_plain``."""
    agent = Agent("t", ScriptedModel([]))
    with pytest.raises(ConfigurationError) as exc_info:

        @agent.tool
        def invalid_tool(x: int) -> str:
            return "Hello"

    assert str(exc_info.value) == (
        "Error generating schema for test_tool_no_ctx.<locals>.invalid_tool:\n"
        "  First parameter of tools that take context must be annotated with RunContext[...] "
        "(or add it with tool_plain)"
    )
    assert agent.tools == {}


def test_tool_plain_with_ctx() -> None:
    """Ports tests/test_tools.py::test_tool_plain_with_ctx."""
    agent = Agent("t", ScriptedModel([]))
    with pytest.raises(
        ConfigurationError,
        match=re.escape("RunContext annotations can only be used with tools that take context"),
    ):

        @agent.tool_plain
        async def invalid_tool(ctx: RunContext) -> str:
            return "Hello"


async def test_agent_tool_decorators_add_tools() -> None:
    """Ports the ``@agent.tool``/``@agent.tool_plain`` use all through pydantic-ai's tests
    (tests/test_tools.py::test_plain_tool_name, test_tool_name): the tools the agent offers,
    with a name given; a second tool of a name is refused ("Tool name conflicts with existing
    tool", tests/test_tools.py::test_repeat_tool_by_rename's first case)."""
    model = calls_every_tool()
    agent = Agent("t", model)

    @agent.tool
    def who(ctx: RunContext) -> str:
        return str(ctx.deps)

    @agent.tool_plain(name="plain_name")
    def plain() -> str:
        return "plain"

    assert list(agent.tools) == ["who", "plain_name"]
    assert json.loads((await agent.run("hi", deps=7)).output) == {"who": "7", "plain_name": "plain"}
    with pytest.raises(ConfigurationError, match="Tool name conflicts with existing tool: 'who'"):

        @agent.tool_plain(name="who")
        def again() -> str:
            return "x"

    assert list(agent.tools) == ["who", "plain_name"]


def test_agent_tool_named_as_an_output_tool_is_refused() -> None:
    """Ports tests/test_tools.py::test_tool_return_conflict for ``@agent.tool``: a tool
    named as an output tool of the agent is refused, as ``tools=[...]`` is."""
    agent = Agent("t", ScriptedModel([]), output_type=ToolOutput(int, name="ctx_tool"))
    with pytest.raises(ConfigurationError, match="are the output tools"):

        @agent.tool
        def ctx_tool(ctx: RunContext, x: int) -> int:
            return x


# --- model_settings ---


def settings_echo() -> FunctionModel:
    return FunctionModel(lambda request: json.dumps(request.settings, sort_keys=True))


async def test_model_settings_override() -> None:
    """Ports test_model_settings_override: the agent's ``model_settings`` reach each request,
    a run's are merged over them."""
    my_agent = Agent("s", settings_echo())
    assert (await my_agent.run("Hello")).output == "{}"
    assert (await my_agent.run("Hello", model_settings={"temperature": 0.5})).output == (
        '{"temperature": 0.5}'
    )
    my_agent = Agent("s", settings_echo(), model_settings={"temperature": 0.1, "seed": 1})
    assert (await my_agent.run("Hello")).output == '{"seed": 1, "temperature": 0.1}'
    assert (await my_agent.run("Hello", model_settings={"temperature": 0.5})).output == (
        '{"seed": 1, "temperature": 0.5}'
    )
    # override(model_settings=...) replaces the agent's and the run's, as pydantic-ai's
    with my_agent.override(model_settings={"top_p": 0.9}):
        run = await my_agent.run("Hello", model_settings={"temperature": 0.5})
    assert run.output == '{"top_p": 0.9}'


async def test_model_settings_max_tokens_meets_the_token_budget() -> None:
    """Ours: a ``max_tokens`` setting and the run's token budget (``RunLimits``), which the
    loop sends as ``max_tokens``: the smaller goes."""
    agent = Agent("s", settings_echo(), model_settings={"max_tokens": 30})
    small = await agent.run("Hello", limits=RunLimits(max_output_tokens=500))
    assert json.loads(small.output) == {"max_tokens": 30}
    large = await agent.run("Hello", limits=RunLimits(max_output_tokens=20))
    assert json.loads(large.output) == {"max_tokens": 20}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("temperature=0", "model_settings is a dict of provider settings"),
        ({1: 2}, "model_settings is a dict of provider settings"),
        ({"messages": []}, r"cannot set \['messages'\]"),
        ({"model": "x", "stream": True}, r"cannot set \['model', 'stream'\]"),
    ],
)
async def test_model_settings_of_the_wrong_kind_are_refused(settings: Any, message: str) -> None:
    """Ours: model settings that are no dict of names, or that set what a request carries in
    fields of its own (its messages, tools, model) or what the model decides (streaming), are
    a ``ConfigurationError``: on the agent, the run (before it starts) and an override."""
    with pytest.raises(ConfigurationError, match=message):
        Agent("s", ScriptedModel([]), model_settings=settings)
    agent = Agent("s", ScriptedModel(["never"]))
    with pytest.raises(ConfigurationError, match=message):
        await agent.run("Hello", model_settings=settings)
    with pytest.raises(ConfigurationError, match=message), agent.override(model_settings=settings):
        pass


async def test_model_settings_reach_the_provider_through_litellm() -> None:
    """Ours: ``LiteLLMModel`` sends a request's settings with the call (the local
    OpenAI-compatible server records the body)."""
    async with OpenAICompatServer(["a", "b"]) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        agent = Agent("a", model, model_settings={"temperature": 0.25})
        await agent.run("Hello")
        await agent.run("Hello", model_settings={"temperature": 0.75, "seed": 3})
    assert [(r.get("temperature"), r.get("seed")) for r in server.requests] == [
        (0.25, None),
        (0.75, 3),
    ]


async def test_override_and_deps_reach_a_streamed_run() -> None:
    """Ports the streamed side of test_override_model and test_deps_used
    (tests/test_streaming.py runs ``agent.run_stream`` under ``override`` throughout): a run
    streamed with ``run_stream`` takes the override and its ``deps=`` as ``run`` does."""
    agent = deps_agent()
    with agent.override(model=calls_every_tool(text="streamed")):
        events = [e async for e in agent.run_stream("Hi", deps=MyDeps(foo=9, bar=9))]
    assert events[-1].type == "run.completed"
    assert events[-1].output_summary == "streamed"
    results = [e for e in events if e.type == "tool.result"]
    assert [e.content_summary for e in results] == ["MyDeps(foo=9, bar=9)"]


async def test_agent_delegation_and_dependencies() -> None:
    """Ports pydantic-ai's "Agent delegation and dependencies" (docs/multi-agent-applications.md,
    run by its tests/test_examples.py): a tool of the parent runs the delegate as its child
    with the parent's deps (``SubAgent.invoke(..., runtime=ctx.runtime, parent=ctx.handle,
    deps=ctx.deps)``), and the delegate's tools read them; its usage rolls up into the
    parent's, as pydantic-ai's ``usage=ctx.usage`` adds it."""

    @dataclasses.dataclass
    class ClientAndKey:
        api_key: str

    def get_jokes_from_api(ctx: RunContext, count: int) -> str:
        return f"{count} jokes fetched with {ctx.deps.api_key}"

    factory_model = ScriptedModel([tool_call("get_jokes_from_api", count=2), "joke A, joke B"])
    factory = Agent("joke_factory", factory_model, tools=[get_jokes_from_api])

    async def joke_factory(ctx: RunContext, count: int) -> str:
        return await SubAgent(factory).invoke(
            f"Please generate {count} jokes.",
            runtime=ctx.runtime,
            parent=ctx.handle,
            deps=ctx.deps,
        )

    selection = Agent(
        "joke_selection",
        ScriptedModel([tool_call("joke_factory", count=2), "joke B"]),
        tools=[joke_factory],
    )
    result = await selection.run("Tell me a joke.", deps=ClientAndKey(api_key="foobar"))
    assert result.output == "joke B"
    assert result.usage["model_calls"] == 4
    tool_results = [m.content for m in result.messages if m.role == "tool"]
    assert tool_results == ["joke A, joke B"]
    assert factory_model.requests[1].messages[-1].content == "2 jokes fetched with foobar"
