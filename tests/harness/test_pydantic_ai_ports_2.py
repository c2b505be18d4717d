"""pydantic-ai's agent tests, ported (a second batch; the first is test_pydantic_ai_ports.py),
and races around starting a child run.

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/...``). Where we
behave differently on purpose, the test asserts our documented behaviour and says why.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from pydantic import BaseModel

from tinyagents import Agent, Runtime, tool
from tinyagents.errors import ConfigurationError
from tinyagents.harness import Message, ModelRequest, ToolCall
from tinyagents.harness.litellm_model import _message_to_openai
from tinyagents.store import MemoryStore, StoredCommand
from tinyagents.testkit import EventWaiter, Gate, ScriptedModel, reply, tool_call, tool_calls


class HeldStore(MemoryStore):
    """A store whose read of one run's logged commands waits at a gate: the await between a
    child's parent check and its registering, held open for as long as the test needs."""

    def __init__(self, held_run_id: str) -> None:
        super().__init__()
        self.held_run_id = held_run_id
        self.gate = Gate("run_commands")

    async def run_commands(self, run_id: str, **kwargs: Any) -> list[StoredCommand]:
        if run_id == self.held_run_id:
            await self.gate.wait()
        return await super().run_commands(run_id, **kwargs)


async def test_a_parent_ending_while_a_child_with_a_run_id_starts_refuses_it() -> None:
    # A child given its own run id reads the commands logged for that id (a restart) between
    # the check that its parent has not ended and its registering: a parent that ended in
    # between must still refuse it, as one that had ended before (docs/harness.md,
    # "Sub-agents"), and nothing is registered under it.
    store = HeldStore("child-1")
    parent_gate = Gate("parent")
    async with Runtime(store=store) as rt:
        parent = await rt.start(Agent("lead", parent_gate.model("done")), "go")
        await parent_gate.entered.wait()
        helper = Agent("helper", ScriptedModel(["late"]))
        start = asyncio.ensure_future(rt.start(helper, "x", parent=parent, run_id="child-1"))
        await store.gate.entered.wait()  # past the parent check, not yet registered
        parent_gate.open()
        assert (await parent.result()).output == "done"
        store.gate.open()
        with pytest.raises(
            ConfigurationError, match=rf"parent run {parent.run_id} has ended \(completed\)"
        ):
            await start
        assert rt.runs.get("child-1") is None
        assert rt.runs.tree.children(parent.run_id) == []


def tool_messages(request: ModelRequest) -> list[Message]:
    return [m for m in request.messages if m.role == "tool"]


class Score(BaseModel):
    value: float


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (math.nan, None),
        (math.inf, None),
        ({"score": -math.inf, "scores": [1.5, math.nan]}, {"score": None, "scores": [1.5, None]}),
        (Score(value=math.nan), {"value": None}),
    ],
)
async def test_a_tool_result_with_nan_or_infinity_is_json(value: Any, expected: Any) -> None:
    # ports tests/test_tools.py's tool return serialization (ToolReturnPart.model_response_str,
    # pydantic's dump_json): a float JSON cannot hold (NaN, an infinity) is sent as null, so
    # what the model reads of a structured result is JSON, as docs/harness.md says; it was
    # Python's NaN / Infinity, which no JSON reader takes.
    @tool(name="measure")
    def measure() -> Any:
        """Measure."""
        return value

    model = ScriptedModel([tool_call("measure"), reply("measured")])
    result = await Agent("a", model, tools=[measure]).run("go")
    assert result.output == "measured"
    (message,) = tool_messages(model.requests[1])
    assert (
        message.metadata == {} and json.loads(message.content, parse_constant=_refuse) == expected
    )


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


@pytest.mark.parametrize("instructions", ["be brief", None])
async def test_a_history_ending_on_the_models_answer_is_sent_as_it_is(
    instructions: str | None,
) -> None:
    # ports tests/test_agent.py::test_message_history_ending_on_model_response_with_instructions
    # and ::test_run_with_history_ending_on_model_response_without_tool_calls_or_user_prompt:
    # continued with input=[], a history ending on the model's answer is sent ending on it,
    # nothing added, and the new answer follows the old one (docs/harness.md, "Starting
    # runs"). Kept on purpose: without instructions pydantic-ai sends no request and its
    # output is the history's last answer; ours asks all the same.
    history = [Message(role="user", content="Hi"), Message(role="assistant", content="Hello!")]
    model = ScriptedModel([reply("Anything else?")])
    agent = Agent("a", model, instructions=instructions)
    result = await agent.run([], history=history)  # type: ignore[arg-type]
    assert result.output == "Anything else?"
    sent = [(m.role, m.content) for m in model.requests[0].messages]
    lead = [("system", instructions)] if instructions else []
    assert sent == [*lead, ("user", "Hi"), ("assistant", "Hello!")]
    assert [(m.role, m.content) for m in result.messages] == [
        *sent,
        ("assistant", "Anything else?"),
    ]


class Payload(BaseModel):
    argument: dict[str, int]


async def test_a_models_fields_wrapped_in_an_argument_named_as_one_of_them_are_read() -> None:
    # ports tests/test_tools.py::test_single_base_model_arg_validator_keeps_same_named_model_field
    # and ::test_single_base_model_arg_validator_unwraps_round_tripped_same_named_field: a tool
    # whose one argument is a model with a field of the argument's name takes that field as
    # it is, and the fields wrapped in the argument's name too (docs/harness.md: "the fields
    # wrapped in the argument's name are read too"); the wrapped shape was refused.
    received: list[Payload] = []

    @tool
    def count(argument: Payload) -> str:
        """Count."""
        received.append(argument)
        return "ok"

    model = ScriptedModel(
        [
            tool_call("count", argument={"n": 1}),
            tool_call("count", argument={"argument": {"n": 2}}),
            tool_call("count", argument={"argument": {"n": "x"}}),
            reply("done"),
        ]
    )
    result = await Agent("a", model, tools=[count]).run("go")
    assert result.output == "done"
    assert received == [Payload(argument={"n": 1}), Payload(argument={"n": 2})]
    (first,) = tool_messages(model.requests[1])
    (_, second) = tool_messages(model.requests[2])
    assert first.content == second.content == "ok"
    # neither shape fits: the problems told are those of the call as it was sent
    (*_, third) = tool_messages(model.requests[3])
    assert third.metadata == {"error": True}
    assert "invalid arguments for tool 'count': argument.argument:" in third.content


async def test_the_calls_of_one_response_run_one_at_a_time_with_a_boundary_between() -> None:
    # ports tests/test_agent.py::test_parallel_tool_outer_cancellation_only_cancels_pending_tool_tasks
    # (the calls of one response). Kept on purpose: pydantic-ai runs them concurrently (the
    # second starts while the first runs); ours run one after another, each between
    # its own before_tool_dispatch and after_tool_result (docs/harness.md, "Sub-agents"), so
    # the second does not start while the first runs, and a pause sent meanwhile holds the
    # run before the second starts.
    gate = Gate("hold")
    started: list[str] = []

    @tool
    def mark() -> str:
        """Mark."""
        started.append("mark")
        return "marked"

    model = ScriptedModel([tool_calls(tool_call("hold"), tool_call("mark")), reply("done")])
    waiter = EventWaiter()
    async with Runtime(sinks=[waiter]) as rt:
        handle = await rt.start(Agent("a", model, tools=[gate.tool(), mark]), "go")
        await gate.entered.wait()
        assert started == []  # the first call is under way: the second has not started
        await handle.pause("look first")
        gate.open()
        await waiter.event("run.paused", handle.run_id)
        assert started == []  # held at the boundary after the first call
        await handle.resume()
        result = await handle.result()
    assert result.output == "done" and started == ["mark"]
    assert [(m.name, m.content) for m in tool_messages(model.requests[1])] == [
        ("hold", "held and released"),
        ("mark", "marked"),
    ]


@pytest.mark.parametrize(("args", "expected"), [('{"a": 1, "b": 2}', {"a": 1, "b": 2}), (None, {})])
async def test_a_historys_call_arguments_given_as_json_text_are_read(
    args: str | None, expected: dict[str, Any]
) -> None:
    # ports tests/test_agent.py's message history with ToolCallPart(args='{...}') (its args
    # are a dict, JSON text or None): a history's call whose arguments are the provider's
    # JSON text is read as a response's is (docs/harness.md, "Writing a custom model"). It
    # was sent on as text, which LiteLLMModel sent to the provider as {}: the call lost its
    # arguments in every later request.
    history = [
        Message(role="user", content="add 1 and 2"),
        Message(
            role="assistant", content="", tool_calls=[ToolCall(id="c1", name="add", args=args)]
        ),  # type: ignore[arg-type]
        Message(role="tool", content="3", tool_call_id="c1", name="add"),
    ]
    model = ScriptedModel([reply("it is 3")])
    result = await Agent("a", model).run("and again?", history=history)
    assert result.output == "it is 3"
    (call,) = model.requests[0].messages[1].tool_calls
    assert (call.id, call.name, call.args) == ("c1", "add", expected)
    assert result.messages[1].tool_calls == [call]
    sent = _message_to_openai(model.requests[0].messages[1])["tool_calls"][0]["function"]
    assert json.loads(sent["arguments"]) == expected
    assert history[1].tool_calls[0].args == args  # the caller's history is left as it was


@pytest.mark.parametrize("tool_calls", [[{"id": "c1", "name": "add", "args": {}}], None, "c1"])
async def test_a_history_whose_tool_calls_are_no_tool_calls_is_refused(tool_calls: Any) -> None:
    # a history is checked before anything starts (docs/harness.md, "Starting runs"): an
    # assistant message whose tool_calls are not a list of ToolCalls (dicts, as OpenAI's
    # messages hold them, or None) failed with an AttributeError or a TypeError from inside
    history = [
        Message(role="user", content="add"),
        Message(role="assistant", content="", tool_calls=tool_calls),
    ]
    model = ScriptedModel([reply("never")])
    with pytest.raises(ConfigurationError, match=r"history\[1\] has tool_calls of"):
        await Agent("a", model).run("again?", history=history)
    assert model.requests == []


class Opaque:
    def __str__(self) -> str:
        return "opaque!"


async def test_a_tool_result_pydantic_cannot_serialize_is_its_str_or_an_error_result() -> None:
    # ports tests/test_tools.py::test_return_unknown. Kept on purpose: pydantic-ai fails the
    # run on a return value it cannot serialize; ours sends its str (docs/harness.md), and a
    # value that cannot be made text at all is an error result the model reads.
    looped: dict[str, Any] = {}
    looped["self"] = looped

    @tool
    def give(which: str) -> Any:
        """Give an object."""
        return {"thing": Opaque()} if which == "opaque" else looped

    model = ScriptedModel(
        [tool_call("give", which="opaque"), tool_call("give", which="looped"), reply("done")]
    )
    result = await Agent("a", model, tools=[give]).run("go")
    assert result.output == "done"
    (opaque,) = tool_messages(model.requests[1])
    assert (opaque.content, opaque.metadata) == ('{"thing": "opaque!"}', {})
    (*_, loop) = tool_messages(model.requests[2])
    assert loop.metadata == {"error": True}
    assert loop.content.startswith("tool 'give' returned a dict that cannot be made text")
