"""pydantic-ai's instructions given as functions (``Agent(instructions=fn)``, a list of text
and functions, ``@agent.instructions``, ``override(instructions=fn)``, a run's
``instructions=fn``), ported (a fifteenth batch; see test_pydantic_ai_ports.py to _14).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise); some run pydantic-ai itself beside ours, to show the same text is
sent. Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from pydantic_ai import Agent as PAgent
from pydantic_ai import RunContext as PRunContext
from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart
from pydantic_ai.messages import ModelRequest as PModelRequest
from pydantic_ai.messages import ModelResponse as PModelResponse
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.models.function import FunctionModel as PFunctionModel

from tinyagents import Agent, FunctionToolset, RunContext, RunStatus, Runtime, tool
from tinyagents.errors import ConfigurationError
from tinyagents.harness import Message, ModelRequest, ToolSpec
from tinyagents.testkit import FunctionModel, ScriptedModel, tool_call


def their_instructions(agent: PAgent[Any, str], prompt: str, **kw: Any) -> list[str | None]:
    """What pydantic-ai sends as instructions on each request of a run of ``agent`` (its
    ``FunctionModel`` answering "ok")."""
    seen: list[str | None] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        last = messages[-1]
        assert isinstance(last, PModelRequest)
        seen.append(last.instructions)
        return PModelResponse(parts=[TextPart("ok")])

    agent.run_sync(prompt, model=PFunctionModel(answer), **kw)
    return seen


def system_texts(model: ScriptedModel | FunctionModel) -> list[str | None]:
    """The leading system message's text of each request (None: no system message)."""
    firsts = [r.messages[0] for r in model.requests]
    return [m.content if m.role == "system" else None for m in firsts]


def test_instructions_decorator_without_and_with_parenthesis() -> None:
    """test_instructions_decorator_without_parenthesis, _with_parenthesis, side by side."""
    theirs: PAgent[None, str] = PAgent(None)
    ours = Agent("a", ScriptedModel(["ok"]))

    @theirs.instructions
    def bare() -> str:
        return "You are a helpful assistant."

    @theirs.instructions()
    async def called() -> str:
        return "Be brief."

    @ours.instructions
    def bare_ours() -> str:
        return "You are a helpful assistant."

    @ours.instructions()
    async def called_ours() -> str:
        return "Be brief."

    ours.run_sync("Hello")
    assert their_instructions(theirs, "Hello") == system_texts(ours.model)  # type: ignore[arg-type]
    assert system_texts(ours.model) == ["You are a helpful assistant.\n\nBe brief."]  # type: ignore[arg-type]
    # the decorator hands the function back, and agent.instructions is still the text
    assert bare_ours() == "You are a helpful assistant."
    assert ours.instructions == "" and isinstance(ours.instructions, str)


def test_instructions_parameter_with_sequence() -> None:
    """test_instructions_parameter_with_sequence: text and functions in one list; a function
    giving "" adds nothing; the text first, then each function's after a blank line."""

    def potato() -> str:
        return "You are a potato."

    def empty() -> str:
        return ""

    given = ("You are a helpful assistant.", empty, potato)
    theirs: PAgent[None, str] = PAgent(None, instructions=given)
    model = ScriptedModel(["ok"])
    Agent("a", model, instructions=given).run_sync("Hello")
    assert system_texts(model) == their_instructions(theirs, "Hello")
    assert system_texts(model) == ["You are a helpful assistant.\n\nYou are a potato."]


def test_instruction_functions_read_deps_and_run_context() -> None:
    """The README's ``@agent.instructions`` with ``RunContext``: sync or async, ``ctx.deps``
    is the run's ``deps=``, evaluated for each run (not once when the agent is made)."""
    theirs: PAgent[str, str] = PAgent(None, deps_type=str)
    model = ScriptedModel(["ok", "ok"])
    ours = Agent("a", model, instructions="Base.")

    @theirs.instructions
    async def their_user(ctx: PRunContext[str]) -> str:
        return f"The user's name is {ctx.deps}."

    @ours.instructions
    async def user(ctx: RunContext) -> str:
        return f"The user's name is {ctx.deps}."

    @ours.instructions
    def agent_name(ctx: RunContext) -> str:
        return f"You are {ctx.agent.name}."

    ours.run_sync("hi", deps="Ann")
    ours.run_sync("hi", deps="Bob")
    assert their_instructions(theirs, "hi", deps="Ann") == ["The user's name is Ann."]
    assert system_texts(model) == [
        "Base.\n\nThe user's name is Ann.\n\nYou are a.",
        "Base.\n\nThe user's name is Bob.\n\nYou are a.",
    ]


def test_instruction_functions_are_called_before_each_request() -> None:
    """pydantic-ai calls instruction functions before each model request of a run
    (``_get_instructions`` in ``ModelRequestNode``), so one reading the run's state writes
    new text at each step; ours do too, side by side. The transcript keeps what the last
    request was sent."""
    their_steps: list[str | None] = []

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        last = messages[-1]
        assert isinstance(last, PModelRequest)
        their_steps.append(last.instructions)
        if len(messages) == 1:
            from pydantic_ai.messages import ToolCallPart

            return PModelResponse(parts=[ToolCallPart("ping", {})])
        return PModelResponse(parts=[TextPart("done")])

    calls = {"n": 0}

    def step() -> str:
        calls["n"] += 1
        return f"Step {calls['n']}."

    theirs: PAgent[None, str] = PAgent(PFunctionModel(their_model), instructions=step)

    @theirs.tool_plain
    def ping() -> str:
        return "pong"

    theirs.run_sync("go")
    assert their_steps == ["Step 1.", "Step 2."]

    calls["n"] = 0
    model = ScriptedModel([tool_call("ping"), "done"])

    def ping_ours() -> str:
        """Ping."""
        return "pong"

    result = Agent("a", model, instructions=step, tools=[ping_ours]).run_sync("go")
    assert system_texts(model) == their_steps == ["Step 1.", "Step 2."]
    assert result.messages[0].content == "Step 2."
    assert result.messages[0].metadata["system_prompt_parts"] == [["<instructions>", "Step 2."]]


def test_instructions_during_run_with_a_function() -> None:
    """test_instructions_during_run, with functions: a run's ``instructions=`` text follows
    the agent's on a line of its own (the join of pydantic-ai's tests; its 2.78 release
    joins text with a blank line, as its functions), its functions follow the agent's; for
    that run only."""

    def extra() -> str:
        return "Greet in French."

    theirs: PAgent[None, str] = PAgent(None, instructions="You are a helpful assistant.")
    model = ScriptedModel(["ok", "ok", "ok"])
    agent = Agent("a", model, instructions="You are a helpful assistant.")
    agent.run_sync("Hello", instructions=["Your task is to greet people.", extra])
    agent.run_sync("Hello again!")
    agent.run_sync("Hello", instructions=extra)
    assert system_texts(model) == [
        "You are a helpful assistant.\nYour task is to greet people.\n\nGreet in French.",
        *their_instructions(theirs, "Hello again!"),
        *their_instructions(theirs, "Hello", instructions=extra),
    ]
    assert system_texts(model)[1:] == [
        "You are a helpful assistant.",
        "You are a helpful assistant.\n\nGreet in French.",
    ]


def test_override_instructions_sequence_mixed_types() -> None:
    """test_override_instructions_sequence_mixed_types, _callable_replaces_functions,
    _none_clears_instructions: an override's instructions replace the agent's text and its
    functions (None: none at all); they are back after the block."""

    def base() -> str:
        return "BASE_FN"

    def f1() -> str:
        return "FUNC_PART"

    async def f2() -> str:
        await asyncio.sleep(0)
        return "FUNC_PART_2"

    model = ScriptedModel(["ok"] * 4)
    agent = Agent("a", model, instructions=["BASE", base])
    with agent.override(instructions=["OVERRIDE1", f1, "OVERRIDE2", f2]):
        agent.run_sync("Hello")
    with agent.override(instructions=f1):
        agent.run_sync("Hello")
    with agent.override(instructions=None):
        agent.run_sync("Hello")
    agent.run_sync("Hello")
    assert system_texts(model) == [
        # the snapshot of pydantic-ai's test (its 2.78 release joins the text by a blank line)
        "OVERRIDE1\nOVERRIDE2\n\nFUNC_PART\n\nFUNC_PART_2",
        "FUNC_PART",
        None,
        "BASE\n\nBASE_FN",
    ]


def test_override_instructions_async_callable_side_by_side() -> None:
    """test_override_instructions_async_callable."""

    async def override_fn() -> str:
        await asyncio.sleep(0)
        return "ASYNC_FN"

    theirs: PAgent[None, str] = PAgent(None, instructions="ORIG")
    model = ScriptedModel(["ok"])
    agent = Agent("a", model, instructions="ORIG")
    with theirs.override(instructions=override_fn):
        expected = their_instructions(theirs, "Hi")
    with agent.override(instructions=override_fn):
        agent.run_sync("Hi")
    assert system_texts(model) == expected == ["ASYNC_FN"]


def test_instructions_come_before_system_prompts() -> None:
    """test_instructions_both_instructions_and_system_prompt_are_set: pydantic-ai sends its
    instructions apart from its system prompt parts, and its OpenAI mapping puts them first;
    ours share the one leading system message (chat templates refuse a second), the
    instructions first, each part after a blank line."""
    model = ScriptedModel(["ok"])
    agent = Agent("a", model, instructions="An instruction.")

    @agent.system_prompt
    def prompt() -> str:
        return "A system prompt!"

    @agent.instructions
    def more() -> str:
        return "More."

    result = agent.run_sync("Hello")
    assert system_texts(model) == ["An instruction.\n\nMore.\n\nA system prompt!"]
    assert result.messages[0].metadata["system_prompt_parts"] == [
        ["<instructions>", "An instruction.\n\nMore."],
        [None, "A system prompt!"],
    ]


def test_a_history_of_the_agent_gets_the_instructions_of_the_new_run() -> None:
    """test_instructions_with_message_history (and issue #3207's point: the instructions
    sent are the running agent's, not the history's): a transcript of a run with
    instruction functions carries their part, which the next run writes again (its
    functions called with its deps); the rest of the history is kept as it was."""
    model = ScriptedModel(["ok", "ok"])
    agent = Agent("a", model, instructions="Static.")

    @agent.instructions
    def who(ctx: RunContext) -> str:
        return f"User {ctx.deps}."

    first = agent.run_sync("one", deps="Ann")
    agent.run_sync("two", deps="Bob", history=first.messages)
    assert system_texts(model) == ["Static.\n\nUser Ann.", "Static.\n\nUser Bob."]
    assert first.messages[0].content == "Static.\n\nUser Ann."  # the history given: unchanged


def test_a_foreign_system_prompt_keeps_out_the_instruction_functions() -> None:
    """Ours, kept on purpose: a conversation bringing a system prompt of its own, with no
    instructions part (written by hand, or another framework's), is kept as it is, as our
    instructions text has always been: the run's instructions, text and functions, are not
    sent (one leading system message, docs/harness.md). pydantic-ai sends its instructions
    beside any history's system prompt."""
    called: list[str] = []

    def fn() -> str:
        called.append("x")
        return "Mine."

    model = ScriptedModel(["ok"])
    history = [Message(role="system", content="Theirs.")]
    Agent("a", model, instructions=fn).run_sync("hi", history=history)
    assert system_texts(model) == ["Theirs."]
    assert called == []
    theirs: PAgent[None, str] = PAgent(None, instructions=fn)
    from pydantic_ai.messages import SystemPromptPart

    their = their_instructions(
        theirs, "hi", message_history=[PModelRequest(parts=[SystemPromptPart("Theirs.")])]
    )
    assert their == ["Mine."]


def test_instructions_that_give_no_text_send_no_system_message() -> None:
    """pydantic-ai sends ``instructions=None`` when every part is empty; ours send no system
    message (an empty one is refused by some providers), and one is sent again as soon as a
    function gives text."""
    texts = iter(["", "Now."])
    model = ScriptedModel([tool_call("noop"), "done"])

    def noop() -> str:
        """No-op."""
        return ""

    agent = Agent("a", model, instructions=lambda: next(texts), tools=[noop])
    assert agent.run_sync("go").status is RunStatus.COMPLETED
    assert [r.messages[0].role for r in model.requests] == ["user", "system"]
    assert system_texts(model)[1] == "Now."


def test_instructions_with_nothing_else_to_send_are_refused() -> None:
    """No text, no history and ``input=[]``: nothing to send, as pydantic-ai's UserError ("No
    message history, user prompt, or instructions provided") says; the run fails before any
    model request."""
    model = ScriptedModel(["ok"])
    result = Agent("a", model, instructions=lambda: None).run_sync([])  # type: ignore[arg-type]
    assert result.status is RunStatus.FAILED
    assert "nothing to send" in (result.error or "")
    assert model.requests == []


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda: 42, r"instructions '.*<lambda>' must return text \(or None\), got int"),
        (lambda: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_an_instruction_function_that_fails_ends_the_run_before_the_request(
    fn: Any, message: str
) -> None:
    """A function raising, or returning anything but text (pydantic-ai would send its str()),
    ends the run ``failed``, and no model call is made or counted."""
    model = ScriptedModel(["ok"])
    result = Agent("a", model, instructions=fn).run_sync("hi")
    assert result.status is RunStatus.FAILED
    assert result.error is not None and re.search(message, result.error)
    assert model.requests == []
    assert result.usage["model_calls"] == 0


@pytest.mark.parametrize("given", [5, b"x", [["nested"]], str, {"a": 1}])
def test_instructions_of_the_wrong_kind_are_refused(given: Any) -> None:
    """pydantic-ai's types allow text, functions and sequences of them: anything else is a
    ConfigurationError when the agent is made, when an override starts, and for a run's
    ``instructions=`` before it starts."""
    with pytest.raises(ConfigurationError, match="instructions must be text, a function"):
        Agent("a", ScriptedModel([]), instructions=given)
    agent = Agent("a", ScriptedModel([]))
    with (
        pytest.raises(ConfigurationError, match="instructions must be text, a function"),
        agent.override(instructions=given),
    ):
        pass
    with pytest.raises(ConfigurationError, match="instructions must be text, a function"):
        agent.run_sync("hi", instructions=given)
    with pytest.raises(ConfigurationError, match=r"instructions .* must be a function \(\)"):
        Agent("a", ScriptedModel([]), instructions=lambda a, b: "x")


async def test_steering_instructions_stay_beside_instruction_functions(rt: Runtime) -> None:
    """Ours: an ``add_instruction`` (or ``replace_instruction``) is a provenance message of
    the conversation, sent with every later request; an instruction function rewrites only
    the instructions' part of the leading system message, so it can neither drop nor change
    what steering added, and steering does not stop the function being called again."""
    gate, asked = asyncio.Event(), asyncio.Event()
    seen: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> Any:
        seen.append(request)
        if len(seen) == 1:
            asked.set()
            await gate.wait()
            return tool_call("noop")
        return "done"

    step = {"n": 0}

    def count() -> str:
        step["n"] += 1
        return f"Request {step['n']}."

    def noop() -> str:
        """No-op."""
        return ""

    agent = Agent("a", FunctionModel(answer), instructions=count, tools=[noop])
    handle = await rt.start(agent, "go")
    await asked.wait()
    receipt = await handle.steer("Only billing.")
    assert receipt.status == "accepted"
    gate.set()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert [r.messages[0].content for r in seen] == ["Request 1.", "Request 2."]
    steering = [m for m in seen[1].messages if "Only billing." in (m.content or "")]
    assert len(steering) == 1 and steering[0] is not seen[1].messages[0]


def test_a_started_run_keeps_its_instruction_functions() -> None:
    """Ours, as a run keeps the tools it started with: a function added with
    ``@agent.instructions`` while a run runs is for the agent's later runs."""
    agent: Agent

    async def answer(request: ModelRequest) -> Any:
        if len(request.messages) == 2:

            @agent.instructions
            def late() -> str:
                return "Late."

            return tool_call("noop")
        return "done"

    def noop() -> str:
        """No-op."""
        return ""

    model = FunctionModel(answer)
    agent = Agent("a", model, instructions="Early.", tools=[noop])
    agent.run_sync("go")
    assert system_texts(model) == ["Early.", "Early."]
    recorder = ScriptedModel(["ok"])
    agent.run_sync("again", model=recorder)
    assert system_texts(recorder) == ["Early.\n\nLate."]


# ---------------------------------------------------------------- tool prepare functions
# pydantic-ai's ``Tool(prepare=...)``, ``@agent.tool(prepare=...)`` (tests/test_tools.py)


def offered(model: ScriptedModel | FunctionModel) -> list[list[str]]:
    """The tool names each request offered."""
    return [[t.name for t in r.tools] for r in model.requests]


def their_offered(agent: PAgent[Any, str], **kw: Any) -> list[list[str]]:
    """What pydantic-ai offers on each request of a run of ``agent`` (answering "ok")."""
    seen: list[list[str]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        seen.append([t.name for t in info.function_tools])
        return PModelResponse(parts=[TextPart("ok")])

    agent.run_sync("go", model=PFunctionModel(answer), **kw)
    return seen


@pytest.mark.parametrize("is_async", [True, False])
def test_dynamic_tool_decorator(is_async: bool) -> None:
    """test_dynamic_tool_decorator, test_dynamic_plain_tool_decorator,
    test_sync_dynamic_tool_plain, side by side: a prepare returning None hides its tool
    from the request, here when the run's deps are 42."""
    from pydantic_ai.tools import ToolDefinition

    async def their_prep(ctx: PRunContext[int], tool_def: ToolDefinition) -> ToolDefinition | None:
        return tool_def if ctx.deps != 42 else None

    async def aprep(ctx: RunContext, spec: ToolSpec) -> ToolSpec | None:
        return spec if ctx.deps != 42 else None

    def sprep(ctx: RunContext, spec: ToolSpec) -> ToolSpec | None:
        return spec if ctx.deps != 42 else None

    theirs: PAgent[int, str] = PAgent(None, deps_type=int)

    @theirs.tool(prepare=their_prep)
    def foobar(ctx: PRunContext[int], x: int, y: str) -> str:  # pragma: no cover
        return f"{ctx.deps} {x} {y}"

    model = ScriptedModel(["ok", "ok"])
    ours = Agent("a", model)

    @ours.tool(prepare=aprep if is_async else sprep)
    def foobar_(ctx: RunContext, x: int, y: str) -> str:  # pragma: no cover
        return f"{ctx.deps} {x} {y}"

    ours.run_sync("go", deps=1)
    ours.run_sync("go", deps=42)
    assert offered(model) == [["foobar_"], []]
    assert their_offered(theirs, deps=1) + their_offered(theirs, deps=42) == [["foobar"], []]


def test_dynamic_tool_use_messages() -> None:
    """test_dynamic_tool_use_messages: prepare is called before each request, with the run's
    context: it hides the tool once the conversation is long enough, and the model, no
    longer offered it, answers."""

    async def answer(request: ModelRequest) -> Any:
        if request.tools:
            return tool_call(request.tools[0].name, {"x": 42, "y": "a"})
        return "done"

    def short(ctx: RunContext, spec: ToolSpec) -> ToolSpec | None:
        return spec if len(ctx.run.messages) < 5 else None

    model = FunctionModel(answer)
    agent = Agent("a", model)

    @agent.tool(prepare=short)
    def foobar(ctx: RunContext, x: int, y: str) -> str:
        return f"{ctx.deps} {x} {y}"

    result = agent.run_sync("go", deps=1)
    assert result.output == "done"
    assert [m.role for m in result.messages] == [
        "user", "assistant", "tool", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert offered(model) == [["foobar"], ["foobar"], []]


def test_prepare_rewrites_the_description_and_schema_for_a_request() -> None:
    """pydantic-ai's docs example (tools.md, "Dynamic tools"): a prepare returning the tool
    described otherwise; here the description names the deps, and the schema hides a
    parameter's description. The tool itself is unchanged: the next run without the change
    gets the tool's own spec, and the call is still checked against the function."""

    def describe(ctx: RunContext, spec: ToolSpec) -> ToolSpec:
        spec.description = f"Greet {ctx.deps}."
        spec.parameters["properties"]["name"].pop("description", None)
        return spec

    model = ScriptedModel(
        [tool_call("greet", {"name": 5}), tool_call("greet", {"name": "x"}), "ok"]
    )

    @tool(prepare=describe)
    def greet(name: str) -> str:
        """Greet someone.

        Args:
            name: who to greet.
        """
        return f"hi {name}"

    Agent("a", model, tools=[greet]).run_sync("go", deps="Ann")
    sent = model.requests[0].tools[0]
    assert sent.description == "Greet Ann."
    assert "description" not in sent.parameters["properties"]["name"]
    assert greet.spec().description == "Greet someone."
    assert greet.spec().parameters["properties"]["name"]["description"] == "who to greet."
    results = [m for m in model.requests[2].messages if m.role == "tool"]
    assert (results[0].content or "").startswith("invalid arguments for tool 'greet': name:")
    assert results[1].content == "hi x"


async def test_a_prepare_never_widens_what_steering_narrowed(rt: Runtime) -> None:
    """Ours: ``constrain_tools`` narrows the run's tools at a safe boundary (audited, narrow
    only); a prepare is only asked about the tools the run still has. A tool taken away is
    not offered whatever its prepare says (it is not even called), and no prepare can bring
    a tool back under another name (a prepare that renames is refused: pydantic-ai lets a
    prepare rename its tool)."""
    asked: list[str] = []

    def always(ctx: RunContext, spec: ToolSpec) -> ToolSpec:
        asked.append(spec.name)
        return spec

    gate, first = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            first.set()
            await gate.wait()
            return tool_call("a")
        return "done"

    @tool(prepare=always)
    def a() -> str:
        """A."""
        return "a"

    @tool(prepare=always)
    def b() -> str:
        """B."""
        return "b"

    model = FunctionModel(answer)
    handle = await rt.start(Agent("n", model, tools=[a, b]), "go")
    await first.wait()
    assert (await handle.constrain_tools(["a"])).status == "accepted"
    gate.set()
    assert (await handle.result()).status is RunStatus.COMPLETED
    assert offered(model) == [["a", "b"], ["a"]]
    assert asked == ["a", "b", "a"]


def test_a_prepare_that_renames_its_tool_is_refused() -> None:
    """pydantic-ai's test_repeat_tool_by_rename: its prepare may rename a tool (refused when
    the name is taken). Ours refuses any renaming, so a prepare can only hide or reword the
    tool steering left the run; the run fails before its request."""

    def rename(ctx: RunContext, spec: ToolSpec) -> ToolSpec:
        spec.name = "bar"
        return spec

    model = ScriptedModel(["ok"])

    @tool(prepare=rename)
    def foo() -> str:  # pragma: no cover
        """Foo."""
        return ""

    result = Agent("a", model, tools=[foo]).run_sync("go")
    assert result.status is RunStatus.FAILED
    assert "prepare renamed it to 'bar'" in (result.error or "")
    assert model.requests == []


def test_a_call_to_a_tool_hidden_for_the_request_is_not_run() -> None:
    """A model calling a tool its request did not offer (a prepare hid it) gets the unknown
    tool's error result, as pydantic-ai's model gets "Unknown tool name"; the tool does not
    run."""
    ran: list[str] = []
    model = ScriptedModel([tool_call("secret"), "ok"])

    @tool(prepare=lambda ctx, spec: None)
    def secret() -> str:
        """Secret."""
        ran.append("x")
        return "s"

    result = Agent("a", model, tools=[secret]).run_sync("go")
    assert result.status is RunStatus.COMPLETED
    assert ran == [] and offered(model) == [[], []]
    answer = next(m for m in result.messages if m.role == "tool")
    assert answer.content == "unknown tool 'secret'; available: none. Call one of those."


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("text", "prepare must return a ToolSpec or None, got str"),
        (
            ToolSpec(name="t", description="x", parameters={"type": "array"}),
            "must describe an object",
        ),
    ],
)
def test_a_prepare_returning_something_else_ends_the_run(returned: Any, message: str) -> None:
    model = ScriptedModel(["ok"])

    @tool(prepare=lambda ctx, spec: returned)
    def t() -> str:  # pragma: no cover
        """T."""
        return ""

    result = Agent("a", model, tools=[t]).run_sync("go")
    assert result.status is RunStatus.FAILED
    assert message in (result.error or "")
    assert model.requests == []


@pytest.mark.parametrize("prepare", [lambda spec: spec, "not a function", lambda a, b, c: a])
def test_a_prepare_of_the_wrong_shape_is_refused_with_the_tool(prepare: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"prepare must be a function \(ctx, spec\)"):
        tool(name="t", prepare=prepare)(lambda: "")


def test_prepare_goes_with_a_prefixed_toolset() -> None:
    """A toolset's tool keeps its prepare under the toolset's prefix, and is given its spec
    under the name it is offered by."""
    names: list[str] = []
    toolset = FunctionToolset()

    def seen(ctx: RunContext, spec: ToolSpec) -> ToolSpec:
        names.append(spec.name)
        return spec

    @toolset.tool_plain(prepare=seen)
    def look() -> str:  # pragma: no cover
        """Look."""
        return ""

    model = ScriptedModel(["ok"])
    Agent("a", model, toolsets=[toolset.prefixed("p")]).run_sync("go")
    assert names == ["p_look"] and offered(model) == [["p_look"]]


def test_tool_retries_reach_prepare() -> None:
    """tests/test_tools.py::test_tool_retries: the prepare of a tool whose calls keep
    failing sees, before each request, how many failed in a row (``ctx.retry``), the cap
    (``ctx.max_retries``, the tool's ``retries=5`` over the agent's) and whether the next
    call is the last attempt, as the calls themselves see them; one more failure than the
    cap ends the run."""
    from tinyagents import ModelRetry

    prepared: list[tuple[int, int | None, bool]] = []
    called: list[tuple[int, int | None, bool]] = []

    async def answer(request: ModelRequest) -> Any:
        return tool_call("infinite_retry_tool")

    def prepare(ctx: RunContext, spec: ToolSpec) -> ToolSpec:
        prepared.append((ctx.retry, ctx.max_retries, ctx.last_attempt))
        return spec

    agent = Agent("a", FunctionModel(answer), retries={"tools": 3, "output": 3})

    @agent.tool(retries=5, prepare=prepare)
    def infinite_retry_tool(ctx: RunContext) -> int:
        called.append((ctx.retry, ctx.max_retries, ctx.last_attempt))
        raise ModelRetry("Please try again.")

    result = agent.run_sync("Begin infinite retry loop!")
    assert result.status is RunStatus.FAILED
    assert "infinite_retry_tool" in (result.error or "")
    expected = [(n, 5, n == 5) for n in range(6)]
    assert prepared == called == expected


# ------------------------------------------------- the agent's prepare_tools (PrepareTools)


def test_sync_prepare_tools_agent_wide() -> None:
    """tests/test_tools.py::test_sync_prepare_tools_agent_wide, side by side with
    pydantic-ai's ``PrepareTools`` capability: ``Agent(prepare_tools=fn)`` is given the
    specs a request would offer and returns those it offers (here none when deps are 42)."""
    from pydantic_ai.capabilities import PrepareTools
    from pydantic_ai.tools import ToolDefinition

    def their_prep(ctx: PRunContext[int], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        return [] if ctx.deps == 42 else tool_defs

    def prep(ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        return [] if ctx.deps == 42 else specs

    theirs: PAgent[int, str] = PAgent(None, deps_type=int, capabilities=[PrepareTools(their_prep)])

    @theirs.tool_plain
    def foobar(x: int) -> str:  # pragma: no cover
        return str(x)

    model = ScriptedModel(["ok", "ok"])
    ours = Agent("a", model, prepare_tools=prep)

    @ours.tool_plain(name="foobar")
    def foobar_(x: int) -> str:  # pragma: no cover
        return str(x)

    ours.run_sync("go", deps=42)
    ours.run_sync("go", deps=1)
    assert offered(model) == their_offered(theirs, deps=42) + their_offered(theirs, deps=1)
    assert offered(model) == [[], ["foobar"]]


async def test_prepare_tools_is_given_only_what_steering_left(rt: Runtime) -> None:
    """pydantic-ai's docs example (hide ``delete_*`` tools) under steering: the agent's
    prepare_tools runs after each tool's prepare, and is given only the tools the run still
    has after ``constrain_tools``; returning a tool it was not given is refused, so it can
    only narrow further."""
    given: list[list[str]] = []

    async def hide_dangerous(ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        given.append([s.name for s in specs])
        return [s for s in specs if not s.name.startswith("delete_")]

    def delete_file(path: str) -> str:  # pragma: no cover
        """Delete a file."""
        return f"deleted {path}"

    def read_file(path: str) -> str:  # pragma: no cover
        """Read a file."""
        return f"contents of {path}"

    def list_files() -> str:  # pragma: no cover
        """List files."""
        return ""

    gate, first = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            first.set()
            await gate.wait()
            return tool_call("delete_file", {"path": "x"})
        return "done"

    model = FunctionModel(answer)
    agent = Agent(
        "a", model, tools=[delete_file, read_file, list_files], prepare_tools=hide_dangerous
    )
    handle = await rt.start(agent, "go")
    await first.wait()
    assert (await handle.constrain_tools(["delete_file", "read_file"])).status == "accepted"
    gate.set()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert given == [["delete_file", "read_file", "list_files"], ["delete_file", "read_file"]]
    assert offered(model) == [["read_file", "list_files"], ["read_file"]]
    # the model called the hidden tool: answered as an unknown tool's, not run; the tools
    # it may call are those both the request offered and steering left
    answer_msg = next(m for m in result.messages if m.role == "tool")
    assert (
        answer_msg.content == "unknown tool 'delete_file'; available: read_file. Call one of those."
    )


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (None, "prepare_tools returned None; return \\[\\] to expose no tools"),
        ("x", "prepare_tools must return a list of ToolSpecs, got str"),
        ([ToolSpec(name="other", description="", parameters={})], "cannot add or rename"),
        (["x"], "cannot add or rename tools, nor give one twice: it returned 'str'"),
    ],
)
def test_prepare_tools_cannot_add_or_rename_tools(returned: Any, message: str) -> None:
    """pydantic-ai's ``PreparedToolset`` refuses a prepare that adds or renames a tool
    ("Prepare function cannot add or rename tools"), and one returning None; ours too, and
    the run fails before its request."""
    model = ScriptedModel(["ok"])

    def t() -> str:  # pragma: no cover
        """T."""
        return ""

    agent = Agent("a", model, tools=[t], prepare_tools=lambda ctx, specs: returned)
    result = agent.run_sync("go")
    assert result.status is RunStatus.FAILED
    assert re.search(message, result.error or "")
    assert model.requests == []


def test_prepare_tools_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(
        ConfigurationError, match=r"prepare_tools must be a function \(ctx, specs\)"
    ):
        Agent("a", ScriptedModel([]), prepare_tools=lambda specs: specs)


def test_empty_instructions_send_no_system_message_as_pydantic_ai() -> None:
    """Pinned as intended: ``instructions=""`` (and functions that give "") is no
    instruction at all, as in pydantic-ai (its request's ``instructions`` is None): the
    request has no empty system message (one that some providers refuse, and that would tell
    the model nothing). A function that gives text on a later request puts the system
    message there, first."""
    for given in ("", ("", lambda: ""), lambda: None):
        theirs: PAgent[None, str] = PAgent(None, instructions=given)  # type: ignore[arg-type]
        model = ScriptedModel(["ok"])
        Agent("a", model, instructions=given).run_sync("Hello")  # type: ignore[arg-type]
        assert their_instructions(theirs, "Hello") == system_texts(model) == [None]
        assert [m.role for m in model.requests[0].messages] == ["user"]

    def later_factory() -> Any:
        calls = [0]

        def later() -> str:
            calls[0] += 1
            return "" if calls[0] == 1 else "Now answer."

        return later

    def get_time() -> str:
        return "noon"

    their_seen: list[str | None] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        last = messages[-1]
        assert isinstance(last, PModelRequest)
        their_seen.append(last.instructions)
        if len(messages) == 1:
            return PModelResponse(parts=[ToolCallPart("get_time", {})])
        return PModelResponse(parts=[TextPart("ok")])

    theirs = PAgent(PFunctionModel(answer), instructions=later_factory(), tools=[get_time])
    theirs.run_sync("Hello")
    model = ScriptedModel([tool_call("get_time"), "ok"])
    Agent("a", model, instructions=later_factory(), tools=[tool(get_time)]).run_sync("Hello")
    assert system_texts(model) == their_seen == [None, "Now answer."]
