"""pydantic-ai's per-step toolsets (``toolset.prepared(fn)``, ``PreparedToolset``, a
filter of ``(ctx, tool_def)``, ``WrapperToolset``), run-level retry budgets
(``run(retries=...)``, ``override(retries=...)``) and ``result.new_messages()`` /
``all_messages()`` (and their ``_json``), ported (a sixteenth batch; see
test_pydantic_ai_ports.py to _15).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai,
``tests/test_toolsets.py`` unless said otherwise); some run pydantic-ai itself beside ours
(its ``FunctionModel``), to show the same tools are offered. Where we behave differently on
purpose, the test says why: a toolset's prepare or filter is given only the tools steering's
``constrain_tools`` left the run, and can only narrow them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter
from pydantic_ai import Agent as PAgent
from pydantic_ai import ModelRetry as PModelRetry
from pydantic_ai import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, TextPart
from pydantic_ai.messages import ModelResponse as PModelResponse
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.models.function import FunctionModel as PFunctionModel
from pydantic_ai.toolsets import CombinedToolset as PCombinedToolset
from pydantic_ai.toolsets import FunctionToolset as PFunctionToolset
from pydantic_ai.toolsets import WrapperToolset as PWrapperToolset

from tinyagents import Agent, FunctionToolset, ModelRetry, RunContext, RunStatus, Runtime, tool
from tinyagents.errors import ConfigurationError
from tinyagents.harness import (
    CombinedToolset,
    FilteredToolset,
    Message,
    ModelRequest,
    PreparedToolset,
    ToolSpec,
    WrapperToolset,
)
from tinyagents.testkit import FunctionModel, ScriptedModel, tool_call


def offered(model: ScriptedModel | FunctionModel) -> list[list[str]]:
    """The tool names each request offered."""
    return [[t.name for t in r.tools] for r in model.requests]


def described(model: ScriptedModel | FunctionModel) -> list[list[tuple[str, str]]]:
    """The (name, description) of each tool each request offered."""
    return [[(t.name, t.description) for t in r.tools] for r in model.requests]


def their_described(agent: PAgent[Any, str], **kw: Any) -> list[list[tuple[str, str]]]:
    """What pydantic-ai offers on each request of a run of ``agent`` (answering "ok")."""
    seen: list[list[tuple[str, str]]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        seen.append([(t.name, t.description or "") for t in info.function_tools])
        return PModelResponse(parts=[TextPart("ok")])

    agent.run_sync("go", model=PFunctionModel(answer), **kw)
    return seen


def add(a: int, b: int) -> int:
    """Add two numbers"""
    return a + b


def subtract(a: int, b: int) -> int:
    """Subtract two numbers"""
    return a - b  # pragma: no cover


def test_prepared_toolset_sync_prepare_func() -> None:
    """test_prepared_toolset_sync_prepare_func: a sync prepare keeping the first tool, beside
    pydantic-ai's (through ``toolset.prepared``, and ``PreparedToolset`` itself)."""

    def keep_first(ctx: Any, tool_defs: list[Any]) -> list[Any]:
        return tool_defs[:1]

    theirs = PAgent(None, toolsets=[PFunctionToolset([add, subtract]).prepared(keep_first)])
    for toolset in (
        FunctionToolset([add, subtract]).prepared(keep_first),
        PreparedToolset(FunctionToolset([add, subtract]), keep_first),
    ):
        model = ScriptedModel(["ok"])
        Agent("p", model, toolsets=[toolset]).run_sync("go")
        assert described(model) == their_described(theirs) == [[("add", "Add two numbers")]]


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        # test_prepared_toolset_user_error_none_result
        (lambda specs: None, r"prepare returned None; return \[\] to expose no tools"),
        # test_prepared_toolset_user_error_add_new_tools
        (
            lambda specs: [*specs, ToolSpec(name="new_tool", description="", parameters={})],
            r"prepare cannot add or rename tools.*'new_tool' for \['add', 'subtract'\]",
        ),
        # test_prepared_toolset_user_error_change_tool_names
        (
            lambda specs: [dataclasses.replace(specs[0], name="modified_add"), specs[1]],
            "prepare cannot add or rename tools.*'modified_add'",
        ),
        (
            lambda specs: [specs[0], specs[0]],
            "prepare cannot add or rename tools, nor give one twice",
        ),
        (lambda specs: "add", "prepare must return a list of ToolSpecs, got str"),
    ],
)
def test_prepared_toolset_user_errors(returned: Any, message: str) -> None:
    """test_prepared_toolset_user_error_none_result, _add_new_tools, _change_tool_names:
    pydantic-ai raises ``UserError`` ("Prepare function cannot add or rename tools"); ours
    refuses the same, naming the toolset, and the run ends ``failed`` before its request."""
    model = ScriptedModel(["ok"])
    toolset = FunctionToolset([add, subtract]).prepared(lambda ctx, specs: returned(specs))
    result = Agent("p", model, toolsets=[toolset]).run_sync("go")
    assert result.status is RunStatus.FAILED
    assert re.search(r"PreparedToolset\(FunctionToolset\): " + message, result.error or "")
    assert model.requests == []


@pytest.mark.parametrize("prepare", [lambda specs: specs, None, 3])
def test_a_prepare_of_the_wrong_shape_is_refused_when_made(prepare: Any) -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"PreparedToolset\(FunctionToolset\): prepare must be a function \(ctx, specs\)",
    ):
        FunctionToolset([add]).prepared(prepare)


@dataclasses.dataclass
class Role:
    user_role: str = "user"
    enable_advanced: bool = True


def test_comprehensive_toolset_composition() -> None:
    """test_comprehensive_toolset_composition, run by agents side by side: prefixed toolsets
    combined, filtered by the run's deps (``(ctx, tool_def)``) and prepared (each description
    annotated with the user's role), for three users; the same tools, described the same,
    are offered."""

    def concat(s1: str, s2: str) -> str:
        """Concatenate two strings"""
        return s1 + s2  # pragma: no cover

    def power(base: int, exponent: int) -> int:
        """Calculate base raised to the power of exponent"""
        return base**exponent  # pragma: no cover

    def filter_tools(ctx: Any, tool_def: Any) -> bool:
        if tool_def.name.startswith("adv_") and not ctx.deps.enable_advanced:
            return False
        return not (tool_def.name.startswith("str_") and ctx.deps.user_role != "admin")

    async def prepare_add_context(ctx: Any, tool_defs: list[Any]) -> list[Any]:
        role = ctx.deps.user_role
        return [
            dataclasses.replace(td, description=f"{td.description} (role: {role})")
            for td in tool_defs
        ]

    theirs = PAgent(
        None,
        toolsets=[
            PCombinedToolset(
                [
                    PFunctionToolset([add, subtract]).prefixed("math"),
                    PFunctionToolset([concat]).prefixed("str"),
                    PFunctionToolset([power]).prefixed("adv"),
                ]
            )
            .filtered(filter_tools)
            .prepared(prepare_add_context)
        ],
    )
    ours = CombinedToolset(
        [
            FunctionToolset([add, subtract]).prefixed("math"),
            FunctionToolset([concat]).prefixed("str"),
            FunctionToolset([power]).prefixed("adv"),
        ]
    )
    toolset = ours.filtered(filter_tools).prepared(prepare_add_context)
    for deps in (Role(), Role(user_role="admin"), Role(enable_advanced=False)):
        model = ScriptedModel(["ok"])
        Agent("c", model, toolsets=[toolset]).run_sync("go", deps=deps)
        assert described(model) == their_described(theirs, deps=deps)
    assert described(model) == [
        [
            ("math_add", "Add two numbers (role: user)"),
            ("math_subtract", "Subtract two numbers (role: user)"),
        ]
    ]


def test_filtered_toolset_async_filter() -> None:
    """test_filtered_toolset_async_filter: an async filter of ``(ctx, tool_def)``."""

    def tool_a(x: int) -> int:
        return x

    def tool_b(x: str) -> str:
        return x  # pragma: no cover

    async def async_filter(ctx: Any, td: Any) -> bool:
        return bool(td.name == "tool_a")

    theirs = PAgent(None, toolsets=[PFunctionToolset([tool_a, tool_b]).filtered(async_filter)])
    model = ScriptedModel(["ok"])
    toolset = FunctionToolset([tool_a, tool_b]).filtered(async_filter)
    assert isinstance(toolset, FilteredToolset)
    Agent("f", model, toolsets=[toolset]).run_sync("test")
    assert offered(model) == [["tool_a"]]
    assert [[n for n, _ in r] for r in their_described(theirs)] == offered(model)


def test_a_filter_of_the_run_is_asked_before_each_request() -> None:
    """pydantic-ai asks its toolsets at each step (its docs' "filtering tools" example reads
    the run's state); ours too: a filter hides ``lookup`` once the run has called it, and a
    call to it then is answered as an unknown tool's, not run."""
    ran: list[str] = []

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        ran.append(q)
        return f"found {q}"

    def once(ctx: RunContext, spec: ToolSpec) -> bool:
        return not any(m.role == "tool" for m in ctx.run.messages)

    model = ScriptedModel([tool_call("lookup", q="a"), tool_call("lookup", q="b"), "done"])
    result = Agent("o", model, toolsets=[FunctionToolset([lookup]).filtered(once)]).run_sync("go")
    assert result.status is RunStatus.COMPLETED
    assert offered(model) == [["lookup"], [], []]
    assert ran == ["a"]
    answers = [m.content for m in result.messages if m.role == "tool"]
    assert answers[1] is not None and answers[1].startswith("unknown tool 'lookup'")


def test_a_prepared_toolset_sees_its_own_names_under_a_prefix_or_rename() -> None:
    """As pydantic-ai's ``PrefixedToolset`` and ``RenamedToolset`` wrap a prepared toolset:
    its prepare is given the tools under the names it has, and what it returns is offered
    under the wrapper's names."""
    seen: list[list[str]] = []

    def record(ctx: Any, tool_defs: list[Any]) -> list[Any]:
        seen.append([td.name for td in tool_defs])
        return [td for td in tool_defs if td.name != "subtract"]

    theirs = PAgent(
        None,
        toolsets=[
            PFunctionToolset([add, subtract])
            .prepared(record)
            .prefixed("m")
            .renamed({"plus": "m_add"})
        ],
    )
    expected = their_described(theirs)
    their_seen, seen[:] = list(seen), []
    model = ScriptedModel(["ok"])
    toolset = (
        FunctionToolset([add, subtract]).prepared(record).prefixed("m").renamed({"plus": "m_add"})
    )
    Agent("r", model, toolsets=[toolset]).run_sync("go")
    assert described(model) == expected == [[("plus", "Add two numbers")]]
    assert seen == their_seen == [["add", "subtract"]]


def test_wrapper_toolset_offers_what_it_wraps() -> None:
    """pydantic-ai's ``WrapperToolset(toolset)`` delegates to what it wraps (a base to
    subclass); ours too, per request as well."""
    theirs = PAgent(None, toolsets=[PWrapperToolset(PFunctionToolset([add, subtract]))])
    model = ScriptedModel(["ok"])
    inner = FunctionToolset([add, subtract]).filtered(lambda ctx, spec: spec.name == "add")
    Agent("w", model, toolsets=[WrapperToolset(FunctionToolset([add, subtract]))]).run_sync("go")
    assert offered(model) == [[n for n, _ in r] for r in their_described(theirs)]
    model = ScriptedModel(["ok"])
    Agent("w", model, toolsets=[WrapperToolset(inner)]).run_sync("go")
    assert offered(model) == [["add"]]


def test_the_prepares_run_tool_then_toolset_then_agent() -> None:
    """pydantic-ai's order: a tool's prepare (inside its ``FunctionToolset``), then the
    toolsets wrapping it, then the agent's ``prepare_tools`` (a capability around them all);
    each is given what the one before left."""
    calls: list[tuple[str, list[str]]] = []

    async def own(ctx: Any, td: Any) -> Any:
        calls.append(("tool", [td.name]))
        return dataclasses.replace(td, description=td.description + " [tool]")

    def of_set(ctx: Any, tool_defs: list[Any]) -> list[Any]:
        calls.append(("toolset", [td.name for td in tool_defs]))
        return [dataclasses.replace(td, description=td.description + " [set]") for td in tool_defs]

    def of_agent(ctx: Any, tool_defs: list[Any]) -> list[Any]:
        calls.append(("agent", [td.name for td in tool_defs]))
        return [td for td in tool_defs if td.name != "subtract"]

    toolset = FunctionToolset()
    toolset.add_function(add, prepare=own)
    toolset.add_function(subtract)
    model = ScriptedModel(["ok"])
    Agent("o", model, toolsets=[toolset.prepared(of_set)], prepare_tools=of_agent).run_sync("go")
    assert calls == [
        ("tool", ["add"]),
        ("toolset", ["add", "subtract"]),
        ("agent", ["add", "subtract"]),
    ]
    assert described(model) == [[("add", "Add two numbers [tool] [set]")]]


async def test_a_toolset_prepare_is_given_only_what_steering_left(rt: Runtime) -> None:
    """Ours: ``constrain_tools`` narrows the run's tools at a safe boundary (audited, narrow
    only). A toolset's prepare and filter are given only the tools the run still has, before
    each request: a tool taken away is never shown to them, and a prepare returning it (one
    that remembers it) is refused, the run failing before the request, so neither can widen
    what steering left."""
    given: list[list[str]] = []
    remembered: list[ToolSpec] = []

    def keep(ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        given.append([s.name for s in specs])
        remembered.extend(s for s in specs if s.name == "subtract")
        if len(given) == 3:  # brings back what steering took
            return [*specs, remembered[0]]
        return specs

    filtered: list[str] = []

    def see(ctx: RunContext, spec: ToolSpec) -> bool:
        filtered.append(spec.name)
        return True

    gate, first = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            first.set()
            await gate.wait()
            return tool_call("subtract", a=1, b=2)
        if len(request.messages) == 3:
            return tool_call("add", a=1, b=2)
        return "done"  # pragma: no cover

    model = FunctionModel(answer)
    toolset = FunctionToolset([add, subtract]).filtered(see).prepared(keep)
    handle = await rt.start(Agent("s", model, toolsets=[toolset]), "go")
    await first.wait()
    assert (await handle.constrain_tools(["add"])).status == "accepted"
    gate.set()
    result = await handle.result()
    assert given == [["add", "subtract"], ["add"], ["add"]]
    assert filtered == ["add", "subtract", "add", "add"]
    assert offered(model) == [["add", "subtract"], ["add"]]
    # the call the model made while subtract was offered is answered as withdrawn
    answers = [m.content or "" for m in result.messages if m.role == "tool"]
    assert "subtract" in answers[0] and "withdrawn" in answers[0]
    assert result.status is RunStatus.FAILED
    assert "cannot add or rename tools" in (result.error or "")
    assert "'subtract' for ['add']" in (result.error or "")


def test_a_filter_that_raises_fails_the_run_before_its_request() -> None:
    def broken(ctx: RunContext, spec: ToolSpec) -> bool:
        raise ValueError("no filter today")

    model = ScriptedModel(["ok"])
    toolset = FunctionToolset([add]).filtered(broken)
    result = Agent("b", model, toolsets=[toolset]).run_sync("go")
    assert result.status is RunStatus.FAILED
    assert "no filter today" in (result.error or "")
    assert model.requests == []


def test_a_run_toolset_and_an_override_toolset_are_asked_too() -> None:
    """A run's ``toolsets=`` and ``override(toolsets=...)`` decide per request as the
    agent's do (pydantic-ai's run toolsets are toolsets like its agent's)."""
    model = ScriptedModel(["ok", "ok"])
    agent = Agent("r", model)
    only_add = FunctionToolset([add, subtract]).filtered(lambda ctx, spec: spec.name == "add")
    agent.run_sync("go", toolsets=[only_add])
    with agent.override(toolsets=[FunctionToolset([add, subtract]).prepared(lambda c, s: s[1:])]):
        agent.run_sync("go")
    assert offered(model) == [["add"], ["subtract"]]


# --- tests/test_agent.py: run-level and override retries ---


@pytest.mark.parametrize(
    ("init", "override", "run", "budget"),
    [
        ({"retries": {"output": 5}}, None, {"retries": {"output": 2}}, 2),  # run-arg
        ({"retries": {"output": 5}}, {"retries": 1}, {"retries": 10}, 1),  # override-beats-run-arg
        ({"retries": 5}, None, {}, 5),  # int-retries-sets-both
        ({"retries": {"tools": 5}}, None, {}, 1),  # dict-tools-only-keeps-output-default
        ({"retries": {"output": 5}}, None, {"retries": {"tools": 0}}, 5),  # run names tools only
        ({"retries": 4}, {"retries": {"tools": 0}}, {"retries": 3}, 3),  # override of tools only
    ],
)
def test_output_retry_budget_resolution(
    init: dict[str, Any], override: dict[str, Any] | None, run: dict[str, Any], budget: int
) -> None:
    """test_output_retry_budget_resolution and test_text_path_honors_output_retry_budget:
    the output budget is the override's, else the run's ``retries=``, else the agent's; an
    int sets both budgets, a dict the ones it names. Run beside pydantic-ai's: its validator
    and ours see the same retries."""
    theirs_log: list[int] = []
    ours_log: list[int] = []
    theirs = PAgent(
        PFunctionModel(lambda messages, info: PModelResponse(parts=[TextPart("hello")])), **init
    )

    @theirs.output_validator
    def their_retry(ctx: Any, o: str) -> str:
        theirs_log.append(ctx.retry)
        raise PModelRetry(f"retry {ctx.retry}")

    ours = Agent("o", FunctionModel(lambda request: "hello"), **init)

    @ours.output_validator
    def always_retry(ctx: RunContext, o: str) -> str:
        ours_log.append(ctx.retry)
        raise ModelRetry(f"retry {ctx.retry}")

    with pytest.raises(UnexpectedModelBehavior, match=rf"output retries \({budget}\)"):
        with theirs.override(**override) if override else contextlib.nullcontext():
            theirs.run_sync("Hello", **run)
    with ours.override(**override) if override else contextlib.nullcontext():
        result = ours.run_sync("Hello", **run)
    assert result.status is RunStatus.FAILED
    assert f"output_retries={budget}" in (result.error or "")
    assert ours_log == theirs_log == list(range(budget + 1))


def test_run_level_tool_retry_override_preserves_explicit_budgets() -> None:
    """test_run_level_tool_retry_override_preserves_explicit_budgets: a run's
    ``retries={"tools": 3}`` caps each tool with no cap of its own (one of a toolset without
    ``max_retries`` too) instead of the agent's, and leaves a tool's ``retries`` and a
    toolset's ``max_retries`` as they are."""
    counts = dict.fromkeys(("default_tool", "explicit_tool", "toolset_tool", "inheriting"), 0)
    target = ""
    explicit_toolset, inheriting_toolset = FunctionToolset(max_retries=4), FunctionToolset()

    @explicit_toolset.tool_plain
    def toolset_tool() -> str:
        counts["toolset_tool"] += 1
        raise ModelRetry("again")

    @inheriting_toolset.tool_plain
    def inheriting() -> str:
        counts["inheriting"] += 1
        raise ModelRetry("again")

    model = FunctionModel(lambda request: tool_call(target))
    agent = Agent("r", model, toolsets=[explicit_toolset, inheriting_toolset], retries={"tools": 1})

    @agent.tool_plain
    def default_tool() -> str:
        counts["default_tool"] += 1
        raise ModelRetry("again")

    @agent.tool_plain(retries=5)
    def explicit_tool() -> str:
        counts["explicit_tool"] += 1
        raise ModelRetry("again")

    for target, cap in (
        ("default_tool", 3),
        ("explicit_tool", 5),
        ("toolset_tool", 4),
        ("inheriting", 3),
    ):
        result = agent.run_sync("Hello", retries={"tools": 3})
        assert result.status is RunStatus.FAILED
        assert f"tool {target!r} exceeded max retries count of {cap}" in (result.error or "")
        assert counts[target] == cap + 1
    # the agent's own budget is untouched for its next run
    target = "default_tool"
    result = agent.run_sync("Hello")
    assert "exceeded max retries count of 1" in (result.error or "")


def test_an_inner_override_of_one_budget_keeps_the_outer_ones_other() -> None:
    """As pydantic-ai keeps its overridden budgets apart: an inner ``override(retries=
    {"tools": 0})`` in a block of ``override(retries=2)`` keeps the output budget at 2; each
    block's budgets end with it."""
    log: list[int] = []
    agent = Agent("o", FunctionModel(lambda request: "hello"))

    @agent.output_validator
    def always_retry(ctx: RunContext, o: str) -> str:
        log.append(ctx.max_retries)
        raise ModelRetry("again")

    with agent.override(retries=2):
        with agent.override(retries={"tools": 0}):
            run = agent.for_run()
            assert (run.retries, run.output_retries) == (0, 2)
        assert (agent.for_run().retries, agent.for_run().output_retries) == (2, 2)
        agent.run_sync("Hello")
    assert log == [2, 2, 2]
    assert (agent.for_run().retries, agent.for_run().output_retries) == (None, 1)


@pytest.mark.parametrize(
    ("retries", "message"),
    [
        (-1, r"run\(retries=...\) must be a whole number >= 0, got -1"),
        (True, r"run\(retries=...\) must be a whole number >= 0, got True"),
        (
            {"tool": 1},
            r"takes an int or a dict of 'tools' and 'output' budgets, got keys \['tool'\]",
        ),
        ({"output": "2"}, r"run\(retries=\{'output': ...\}\) must be a whole number >= 0"),
        ("3", r"run\(retries=...\) must be a whole number >= 0, got '3'"),
    ],
)
def test_run_retries_of_the_wrong_kind_are_refused(retries: Any, message: str) -> None:
    """A run's (or an override's) ``retries=`` is checked as ``Agent(retries=...)`` is:
    ``ConfigurationError`` before anything starts."""
    model = ScriptedModel(["ok"])
    agent = Agent("a", model)
    with pytest.raises(ConfigurationError, match=message):
        agent.run_sync("go", retries=retries)
    with pytest.raises(ConfigurationError, match=message.replace("run", "override", 1)):
        agent.override(retries=retries)
    assert model.requests == []


# --- tests/test_agent.py: all_messages / new_messages ---


def ret_a(x: str) -> str:
    return f"{x}-apple"


def test_run_with_history_new() -> None:
    """test_run_with_history_new: a run given no history has all its messages new, its
    system prompt first; one continuing ``new_messages()`` (or ``all_messages()``) of it has
    only its prompt and answer new; their JSON is what ``TypeAdapter(list[Message])`` reads
    back (pydantic-ai's ``*_messages_json``)."""
    model = FunctionModel(
        lambda request: (
            tool_call("ret_a", x="a")
            if len(request.messages) == 2
            else next(m.content for m in reversed(request.messages) if m.role == "tool")
        )
    )
    agent = Agent("a", model, tools=[ret_a], instructions="Foobar")
    result1 = agent.run_sync("Hello")
    assert [m.role for m in result1.all_messages()] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert result1.new_messages() == result1.all_messages() == result1.messages
    for history in (result1.new_messages(), result1.all_messages()):
        result2 = agent.run_sync("Hello again", history=history)
        assert [m.content for m in result2.all_messages()[:5]] == [
            m.content for m in result1.messages
        ]
        assert result2.new_messages() == result2.all_messages()[-2:]
        assert [(m.role, m.content) for m in result2.new_messages()] == [
            ("user", "Hello again"),
            ("assistant", "a-apple"),
        ]
        assert result2.new_messages_json().startswith(b'[{"role":"user","content":"Hello again"')
    adapter = TypeAdapter(list[Message])
    assert adapter.validate_json(result2.all_messages_json()) == result2.messages
    assert adapter.validate_json(result2.new_messages_json()) == result2.new_messages()


def test_the_system_prompt_a_run_writes_before_a_history_is_not_new() -> None:
    """Ours: a history without a system prompt of its own is led by the agent's (as
    pydantic-ai sends its instructions); that message is the run's, but not among its new
    messages, which start after the history, as pydantic-ai's ``new_messages()`` start
    after its ``message_history``. A system prompt of functions that give nothing is left
    out, and the new messages still start after the history."""
    history = [Message(role="user", content="Hi"), Message(role="assistant", content="Hello")]
    agent = Agent("a", ScriptedModel(["fine", "fine"]), instructions="Be brief.")
    result = agent.run_sync("How are you?", history=history)
    assert [m.role for m in result.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert [m.content for m in result.new_messages()] == ["How are you?", "fine"]

    empty = Agent("e", ScriptedModel(["fine"]))

    @empty.system_prompt
    def nothing() -> str:
        return ""

    result = empty.run_sync("How are you?", history=history)
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert [m.content for m in result.new_messages()] == ["How are you?", "fine"]


NAMES = ("alpha", "beta", "gamma", "delta", "eps")


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    granted=st.sets(st.sampled_from(NAMES)),
    kept=st.sets(st.sampled_from(NAMES)),
    dropped=st.sets(st.sampled_from(NAMES)),
    prefix=st.booleans(),
)
def test_per_request_toolsets_only_narrow_what_the_run_may_call(
    granted: set[str], kept: set[str], dropped: set[str], prefix: bool
) -> None:
    """Property: whatever a toolset's filter keeps and its prepare drops, under a prefix or
    not, a request offers exactly the tools the run was granted (``rt.start(..., tools=)``,
    the allowlist ``constrain_tools`` narrows) that the filter kept and the prepare did not
    drop, in the toolset's order; and the filter and prepare are shown only granted tools."""
    seen: set[str] = set()

    def keep(ctx: RunContext, spec: ToolSpec) -> bool:
        seen.add(spec.name)
        return spec.name in kept

    def drop(ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        seen.update(s.name for s in specs)
        return [s for s in specs if s.name not in dropped]

    def make(name: str) -> Any:
        def fn() -> str:  # pragma: no cover
            return name

        fn.__name__ = name
        return fn

    toolset: Any = FunctionToolset([make(n) for n in NAMES]).filtered(keep).prepared(drop)
    full = {n: f"p_{n}" if prefix else n for n in NAMES}
    if prefix:
        toolset = toolset.prefixed("p")
    model = ScriptedModel(["ok"])
    agent = Agent("prop", model, toolsets=[toolset])
    agent.run_sync("go", tools=[full[n] for n in NAMES if n in granted])
    expected = [full[n] for n in NAMES if n in granted and n in kept and n not in dropped]
    assert offered(model) == [expected]
    assert seen <= granted
