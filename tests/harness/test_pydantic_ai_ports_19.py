"""pydantic-ai's history processors (``Agent(history_processors=[...])``, its
``ProcessHistory`` capability), ported (a nineteenth batch; see test_pydantic_ai_ports.py to
_18).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai,
``tests/test_history_processor.py``); most run pydantic-ai itself beside ours (its
``FunctionModel``) on the same conversation, to show the same messages are sent and kept.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic_ai import Agent as PAgent
from pydantic_ai import ModelRetry as PModelRetry
from pydantic_ai import RunContext as PRunContext
from pydantic_ai import ToolFailed as PToolFailed
from pydantic_ai import UnexpectedModelBehavior
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import ModelRequest as PModelRequest
from pydantic_ai.messages import ModelResponse as PModelResponse
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.models.function import FunctionModel as PFunctionModel

from tinyagents import (
    Agent,
    Middleware,
    ModelRetry,
    RunContext,
    RunStatus,
    Runtime,
    SteeringKind,
    ToolFailed,
    tool,
)
from tinyagents.errors import ConfigurationError
from tinyagents.harness import Message, ModelRequest
from tinyagents.testkit import FunctionModel, ScriptedModel, tool_call

Pair = tuple[str, str]


def flat(messages: list[ModelMessage]) -> list[Pair]:
    """pydantic-ai's messages as (role, text), one per part: as ours hold them."""
    out: list[Pair] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                out.append(("system", part.content))
            elif isinstance(part, UserPromptPart):
                out.append(("user", str(part.content)))
            elif isinstance(part, ToolReturnPart):
                out.append(("tool", str(part.content)))
            elif isinstance(part, TextPart):
                out.append(("assistant", part.content))
            elif isinstance(part, ToolCallPart):
                out.append(("assistant", ""))
    return out


def ours(messages: list[Message]) -> list[Pair]:
    return [(m.role, m.content) for m in messages]


def their_history(pairs: list[Pair]) -> list[ModelMessage]:
    return [
        PModelResponse(parts=[TextPart(text)])
        if role == "assistant"
        else PModelRequest(parts=[UserPromptPart(text)])
        for role, text in pairs
    ]


def our_history(pairs: list[Pair]) -> list[Message]:
    return [Message(role=role, content=text) for role, text in pairs]  # type: ignore[arg-type]


async def theirs(
    processors: list[Any], prompt: str, history: list[Pair]
) -> tuple[list[list[Pair]], list[Pair], list[Pair]]:
    """What pydantic-ai's FunctionModel received at each request, its ``all_messages()``
    and its ``new_messages()``, with ``processors`` as ``ProcessHistory`` capabilities."""
    received: list[list[Pair]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        received.append(flat(messages))
        return PModelResponse(parts=[TextPart("Provider response")])

    agent = PAgent(PFunctionModel(model), capabilities=[ProcessHistory(p) for p in processors])
    result = await agent.run(prompt, message_history=their_history(history))
    return received, flat(result.all_messages()), flat(result.new_messages())


async def ours_run(
    processors: list[Any], prompt: str, history: list[Pair]
) -> tuple[list[list[Pair]], list[Pair], list[Pair]]:
    model = ScriptedModel(["Provider response"])
    agent = Agent("a", model, history_processors=processors)
    result = await agent.run(prompt, history=our_history(history))
    assert result.status is RunStatus.COMPLETED, result.error
    sent = [ours(r.messages) for r in model.requests]
    return sent, ours(result.messages), ours(result.messages[result.new_from :])


TWO_TURNS = [("user", "Question 1"), ("assistant", "Answer 1")]
FOUR_TURNS = [*TWO_TURNS, ("user", "Question 2"), ("assistant", "Answer 2")]


async def test_history_processor_no_op() -> None:
    expected = await theirs([lambda messages: messages], "New question", TWO_TURNS)
    assert await ours_run([lambda messages: messages], "New question", TWO_TURNS) == expected
    sent, kept, new = expected
    assert sent == [[*TWO_TURNS, ("user", "New question")]]
    assert new == kept[-2:]


async def test_history_processor_run_replaces_message_history() -> None:
    # the processed list is what is sent, and what the run keeps from then on (the history
    # given is gone from its transcript); every message left is the run's own
    expected = await theirs(
        [lambda ms: [*ms[-1:], PModelRequest(parts=[SystemPromptPart("Processed answer")])]],
        "Question 3",
        FOUR_TURNS,
    )
    got = await ours_run(
        [lambda ms: [*ms[-1:], Message(role="system", content="Processed answer")]],
        "Question 3",
        FOUR_TURNS,
    )
    # kept and new alike; pydantic-ai sends a system prompt that is not first as user text
    # (``<system>...</system>``), ours sends the message as it is
    assert got[1:] == expected[1:]
    assert expected[0] == [[("user", "Question 3"), ("user", "<system>Processed answer</system>")]]
    sent, kept, new = got
    assert sent == [[("user", "Question 3"), ("system", "Processed answer")]]
    assert kept == [*sent[0], ("assistant", "Provider response")]
    assert new == kept


async def test_history_processor_messages_sent_to_provider() -> None:
    expected = await theirs(
        [lambda ms: [m for m in ms if isinstance(m, PModelRequest)]], "New question", TWO_TURNS
    )
    got = await ours_run(
        [lambda ms: [m for m in ms if m.role != "assistant"]], "New question", TWO_TURNS
    )
    assert got == expected
    sent, kept, new = got
    assert sent == [[("user", "Question 1"), ("user", "New question")]]
    assert kept == [*sent[0], ("assistant", "Provider response")]
    assert new == kept[-2:]


async def test_multiple_history_processors() -> None:
    # applied in order, each given what the one before returned; messages a processor
    # made afresh are not the run's own, but for the one sent (pydantic-ai stamps it)
    def their_prefix(tag: str) -> Callable[[list[ModelMessage]], list[ModelMessage]]:
        def processor(messages: list[ModelMessage]) -> list[ModelMessage]:
            return [
                PModelRequest(parts=[UserPromptPart(f"[{tag}] {p.content}") for p in m.parts])  # type: ignore[union-attr]
                if isinstance(m, PModelRequest)
                else m
                for m in messages
            ]

        return processor

    def our_prefix(tag: str) -> Callable[[list[Message]], list[Message]]:
        def processor(messages: list[Message]) -> list[Message]:
            return [
                Message(role="user", content=f"[{tag}] {m.content}") if m.role == "user" else m
                for m in messages
            ]

        return processor

    expected = await theirs([their_prefix("FIRST"), their_prefix("SECOND")], "New", TWO_TURNS)
    got = await ours_run([our_prefix("FIRST"), our_prefix("SECOND")], "New", TWO_TURNS)
    assert got == expected
    sent, kept, new = got
    assert sent == [
        [
            ("user", "[SECOND] [FIRST] Question 1"),
            ("assistant", "Answer 1"),
            ("user", "[SECOND] [FIRST] New"),
        ]
    ]
    assert new == kept[-2:]


def _drop_answers(messages: list[Any]) -> list[Any]:
    return [m for m in messages if getattr(m, "role", None) != "assistant"]


async def _async_drop(messages: list[Any]) -> list[Any]:
    await asyncio.sleep(0)
    return _drop_answers(messages)


class DropAnswers:
    """A callable object (``test_callable_class_history_processor_*``)."""

    def __call__(self, ctx: RunContext, messages: list[Message]) -> list[Message]:
        assert isinstance(ctx, RunContext)
        return _drop_answers(messages)


SHAPES: dict[str, Callable[[list[RunContext]], Any]] = {
    # test_async_history_processor
    "async": lambda seen: _async_drop,
    # test_sync_history_processor_returning_coroutine
    "sync returning a coroutine": lambda seen: lambda messages: _async_drop(messages),
    # test_history_processor_with_context
    "sync with ctx": lambda seen: lambda ctx, messages: seen.append(ctx) or _drop_answers(messages),
    # test_history_processor_with_context_async
    "async with ctx": lambda seen: _with_ctx_async(seen),
    # test_sync_history_processor_with_context_returning_coroutine
    "sync with ctx returning a coroutine": lambda seen: (
        lambda ctx, messages: seen.append(ctx) or _async_drop(messages)
    ),
    # test_callable_class_history_processor_with_ctx_no_op
    "callable object with ctx": lambda seen: DropAnswers(),
}


def _with_ctx_async(seen: list[RunContext]) -> Callable[..., Awaitable[list[Message]]]:
    async def processor(ctx: RunContext, messages: list[Message]) -> list[Message]:
        seen.append(ctx)
        return _drop_answers(messages)

    return processor


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_history_processor_shapes(shape: str) -> None:
    """Sync or async, with the run's context first or not (test_history_processor_mixed_
    signatures): each is given the messages and what it returns is sent."""
    seen: list[RunContext] = []
    processor = SHAPES[shape](seen)
    sent, kept, _ = await ours_run([processor], "New question", TWO_TURNS)
    assert sent == [[("user", "Question 1"), ("user", "New question")]]
    assert kept == [*sent[0], ("assistant", "Provider response")]
    assert all(isinstance(ctx, RunContext) and ctx.run_id for ctx in seen)
    assert len(seen) == (1 if "with ctx" in shape and "object" not in shape else 0)


async def test_history_processor_mixed_signatures() -> None:
    seen: list[RunContext] = []
    processors = [SHAPES[shape](seen) for shape in SHAPES]
    sent, _, _ = await ours_run(processors, "New question", TWO_TURNS)
    assert sent == [[("user", "Question 1"), ("user", "New question")]]
    assert len(seen) == 3


@pytest.mark.parametrize(
    ("theirs_returns", "ours_returns", "their_error", "our_error"),
    [
        # test_history_processor_empty_history
        (
            lambda ms: [],
            lambda ms: [],
            "Processed history cannot be empty.",
            "processed history cannot be empty",
        ),
        # test_history_processor_history_ending_in_response
        (
            lambda ms: [PModelResponse(parts=[TextPart("Provider response")])],
            lambda ms: [Message(role="assistant", content="Provider response")],
            "Processed history must end with a `ModelRequest`.",
            "ending with an assistant message",
        ),
    ],
)
async def test_history_processor_results_refused(
    theirs_returns: Any, ours_returns: Any, their_error: str, our_error: str
) -> None:
    # pydantic-ai raises a UserError before the request; ours ends the run failed, no call made
    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        raise AssertionError("not called")  # pragma: no cover

    their_agent = PAgent(PFunctionModel(their_model), capabilities=[ProcessHistory(theirs_returns)])
    with pytest.raises(UserError, match=re.escape(their_error)):
        await their_agent.run("foobar")
    model = ScriptedModel(["never"])
    result = await Agent("a", model, history_processors=[ours_returns]).run("foobar")
    assert result.status is RunStatus.FAILED
    assert our_error in (result.error or "")
    assert model.requests == []


@pytest.mark.parametrize(
    ("returned", "match"),
    [
        (None, "must return a list of Messages, got NoneType"),
        ("text", "must return a list of Messages, got"),
        (["text"], r"returned messages\[0\] must be a Message"),
    ],
)
async def test_a_processor_returning_no_list_of_messages_fails_the_run(
    returned: Any, match: str
) -> None:
    model = ScriptedModel(["never"])
    result = await Agent("a", model, history_processors=[lambda ms: returned]).run("hi")
    assert result.status is RunStatus.FAILED
    assert re.search(match, result.error or ""), result.error
    assert model.requests == []


@pytest.mark.parametrize("given", [lambda: [], lambda a, b, c: [], "f", [1], {"f": 1}])
def test_history_processors_of_the_wrong_shape_are_refused(given: Any) -> None:
    processors = given if isinstance(given, (str, dict)) else [given]
    with pytest.raises(ConfigurationError, match="history"):
        Agent("a", ScriptedModel([]), history_processors=processors)


async def test_processors_run_before_every_request_of_a_tool_loop() -> None:
    """test_new_messages_index_during_iter_with_pruning: a processor keeping the last
    messages is called before each request, the second seeing the tool call and its result,
    and the run keeps what it kept."""

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        if all(role != "tool" for role, _ in flat(messages)):
            return PModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id="c1")])
        return PModelResponse(parts=[TextPart("done")])

    their_seen: list[int] = []

    def their_keep_last_two(messages: list[ModelMessage]) -> list[ModelMessage]:
        their_seen.append(len(messages))
        return messages[-2:]

    their_agent = PAgent(
        PFunctionModel(their_model), capabilities=[ProcessHistory(their_keep_last_two)]
    )

    @their_agent.tool_plain
    def noop() -> str:
        return "ok"

    theirs_result = await their_agent.run("go", message_history=their_history(TWO_TURNS))

    our_seen: list[int] = []

    def keep_last_two(messages: list[Message]) -> list[Message]:
        our_seen.append(len(messages))
        return messages[-2:]

    def answer(request: ModelRequest) -> Any:
        return "done" if any(m.role == "tool" for m in request.messages) else tool_call("noop")

    def noop_tool() -> str:
        """No-op."""
        return "ok"

    noop_tool.__name__ = "noop"
    model = FunctionModel(answer)
    result = await Agent("a", model, tools=[noop_tool], history_processors=[keep_last_two]).run(
        "go", history=our_history(TWO_TURNS)
    )
    assert result.status is RunStatus.COMPLETED, result.error
    assert our_seen == their_seen == [3, 4]
    assert [[m.role for m in r.messages] for r in model.requests] == [
        ["assistant", "user"],
        ["assistant", "tool"],
    ]
    assert [m.role for m in result.messages] == ["assistant", "tool", "assistant"]
    assert [r for r, _ in flat(theirs_result.all_messages())] == [
        "assistant",
        "tool",
        "assistant",
    ]
    assert len(result.messages) - result.new_from == len(theirs_result.new_messages())


async def test_steering_reaches_the_request_it_is_sent_for_after_the_processors(
    rt: Runtime,
) -> None:
    """Ours: what a steering command delivers is added after the processors, as pydantic-ai
    adds its instructions to a request after them: a processor cannot keep it from the
    request it was sent for. From then on it is a message of the transcript, which later
    processors are given (as a system prompt in pydantic-ai's history is)."""
    gate, asked = asyncio.Event(), asyncio.Event()
    seen: list[ModelRequest] = []
    given: list[list[Pair]] = []

    async def answer(request: ModelRequest) -> Any:
        seen.append(request)
        if len(seen) == 1:
            asked.set()
            await gate.wait()
            return tool_call("noop")
        return "done"

    def noop() -> str:
        """No-op."""
        return ""

    def only_the_last(messages: list[Message]) -> list[Message]:
        given.append(ours(messages))
        return messages[-1:]

    agent = Agent("a", FunctionModel(answer), tools=[noop], history_processors=[only_the_last])
    handle = await rt.start(agent, "go")
    await asked.wait()
    receipt = await handle.steer("Only billing.")
    assert receipt.status == "accepted"
    gate.set()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED, result.error
    # the second request: the processor's one message (the tool result), then the steering
    tool_result, steering = seen[1].messages
    assert tool_result.role == "tool"
    assert "Only billing." in steering.content
    assert not any("Only billing." in text for _, text in given[1])
    assert "Only billing." in ours(result.messages)[1][1]


async def test_a_keep_last_processor_drops_a_replaced_instruction_later_as_theirs_a_system_prompt(
    rt: Runtime,
) -> None:
    """Pinned, not re-added: a ``replace_instruction`` is a message of the transcript once
    its request is sent, and a later "keep the last N" processor drops it as it drops any
    message, as pydantic-ai's processors drop its system prompt (pydantic-ai re-adds one
    only with its opt-in ``ReinjectSystemPrompt`` capability). The processor decides what
    the model sees: one that keeps the messages marked ``metadata["steering"]`` keeps the
    instruction (the recipe in the docs). What is no message, the tools a ``constrain_tools``
    left, holds whatever the processors keep."""

    async def run(keep: Callable[[list[Message]], list[Message]]) -> list[ModelRequest]:
        gate, asked = asyncio.Event(), asyncio.Event()
        seen: list[ModelRequest] = []

        async def answer(request: ModelRequest) -> Any:
            seen.append(request)
            if len(seen) == 1:
                asked.set()
                await gate.wait()
            return tool_call("noop") if len(seen) < 4 else "done"

        def noop() -> str:
            """No-op."""
            return ""

        def other() -> str:
            """Another tool."""
            return ""

        agent = Agent("a", FunctionModel(answer), tools=[noop, other], history_processors=[keep])
        handle = await rt.start(agent, "go")
        await asked.wait()
        await handle.submit(SteeringKind.REPLACE_INSTRUCTION, {"text": "Only billing."})
        await handle.constrain_tools(["noop"])
        gate.set()
        result = await handle.result()
        assert result.status is RunStatus.COMPLETED, result.error
        return seen

    def last_two(messages: list[Message]) -> list[Message]:
        return messages[-2:]

    def last_two_and_steering(messages: list[Message]) -> list[Message]:
        tail = messages[-2:]
        kept = [m for m in messages[:-2] if m.metadata.get("steering")]
        return [*kept, *tail]

    def has_it(request: ModelRequest) -> bool:
        return any("Only billing." in m.content for m in request.messages)

    dropped = await run(last_two)
    assert [has_it(r) for r in dropped] == [False, True, False, False]
    assert [sorted(t.name for t in r.tools) for r in dropped][1:] == [["noop"]] * 3
    kept = await run(last_two_and_steering)
    assert [has_it(r) for r in kept] == [False, True, True, True]

    # pydantic-ai: a system prompt a "keep the last two" processor drops stays dropped
    received: list[list[Pair]] = []

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        received.append(flat(messages))
        if len(received) < 3:
            return PModelResponse(parts=[ToolCallPart("noop", {})])
        return PModelResponse(parts=[TextPart("done")])

    def their_last_two(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-2:]

    theirs_agent = PAgent(
        PFunctionModel(their_model),
        system_prompt="Only billing.",
        capabilities=[ProcessHistory(their_last_two)],
    )

    @theirs_agent.tool_plain
    def noop() -> str:
        """No-op."""
        return ""

    await theirs_agent.run("go")
    assert [any(text == "Only billing." for _, text in r) for r in received] == [
        True,
        False,
        False,
    ]


async def test_history_processor_streaming_replaces_message_history() -> None:
    """A streamed model's request (and ``run_stream``'s ``model.request`` event) is sent
    what the processors returned, and the run keeps it, as a run not streamed does."""
    model = ScriptedModel(["hello there"], stream=True)
    agent = Agent(
        "a",
        model,
        history_processors=[
            lambda ms: [*ms[-1:], Message(role="system", content="Processed answer")]
        ],
    )
    events = [e async for e in agent.run_stream("Question 3", history=our_history(FOUR_TURNS))]
    assert [ours(r.messages) for r in model.requests] == [
        [("user", "Question 3"), ("system", "Processed answer")]
    ]
    assert [e.message_count for e in events if e.type == "model.request"] == [2]
    assert "".join(e.text for e in events if e.type == "model.delta") == "hello there"
    assert events[-1].type == "run.completed"


# --- ToolFailed (pydantic-ai's docs, "Report a Failed Tool Result") --------------------------


@pytest.mark.parametrize("raised", ["ToolFailed", "ModelRetry"])
async def test_tool_failed_is_not_counted_against_the_tools_retries(raised: str) -> None:
    """A tool raising ``ToolFailed`` on each of three calls, with one retry allowed: the
    model is told each time and the run goes on (its retry count stays 0), where
    ``ModelRetry`` ends the run at the second failure in a row (pydantic-ai's
    ``UnexpectedModelBehavior``)."""

    def their_model(messages: list[ModelMessage], info: AgentInfo) -> PModelResponse:
        if sum(role == "tool" for role, _ in flat(messages)) < 3:
            return PModelResponse(parts=[ToolCallPart("lookup", {"key": "a"})])
        return PModelResponse(parts=[TextPart("gave up")])

    their_agent = PAgent(PFunctionModel(their_model))
    their_retries: list[int] = []

    @their_agent.tool(retries=1)
    def lookup(ctx: PRunContext[None], key: str) -> str:
        their_retries.append(ctx.retry)
        raise (PToolFailed if raised == "ToolFailed" else PModelRetry)(f"no {key}")

    our_retries: list[int] = []

    def answer(request: ModelRequest) -> Any:
        if sum(m.role == "tool" for m in request.messages) < 3:
            return tool_call("lookup", key="a")
        return "gave up"

    @tool(retries=1)
    def lookup_ours(ctx: RunContext, key: str) -> str:
        """Look a key up."""
        our_retries.append(ctx.retry)
        raise (ToolFailed if raised == "ToolFailed" else ModelRetry)(f"no {key}")

    lookup_ours.name = "lookup"
    agent = Agent("a", FunctionModel(answer), tools=[lookup_ours])
    result = await agent.run("go")
    if raised == "ToolFailed":
        theirs_result = await their_agent.run("go")
        assert theirs_result.output == result.output == "gave up"
        assert our_retries == their_retries == [0, 0, 0]
        tool_results = [m for m in result.messages if m.role == "tool"]
        assert [(m.content, m.metadata) for m in tool_results] == [("no a", {"error": True})] * 3
        assert [
            (p.content, p.outcome)
            for m in theirs_result.all_messages()
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ] == [("no a", "failed")] * 3
    else:
        with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries count of 1"):
            await their_agent.run("go")
        assert result.status is RunStatus.FAILED
        assert "exceeded max retries count of 1" in (result.error or "")
        assert our_retries == their_retries == [0, 1]


class Unavailable(Middleware):
    """A tool hook turning every call into a ``ToolFailed`` (pydantic-ai: raised from a tool
    execution hook, with the same retry-budget behaviour as from the tool)."""

    async def tool(self, call: Any, ctx: RunContext, call_next: Any) -> Any:
        raise ToolFailed("service down")


async def test_tool_failed_from_a_middleware_is_not_counted_either() -> None:
    def answer(request: ModelRequest) -> Any:
        if sum(m.role == "tool" for m in request.messages) < 3:
            return tool_call("lookup", key="a")
        return "gave up"

    @tool(retries=0)
    def lookup(key: str) -> str:
        """Look a key up."""
        return key  # pragma: no cover

    agent = Agent("a", FunctionModel(answer), tools=[lookup], middleware=[Unavailable()])
    result = await agent.run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert [m.content for m in result.messages if m.role == "tool"] == ["service down"] * 3
