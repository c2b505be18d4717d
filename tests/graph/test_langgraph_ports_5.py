"""Ports of LangGraph's tests, fifth round (``libs/langgraph/tests/test_pregel.py``,
``test_pregel_async.py``, ``test_state.py``, ``test_retry.py``, ``test_large_cases.py``,
``test_subgraph_persistence.py`` and ``test_time_travel.py``): the same program on LangGraph
and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``. Each test's comment
names the LangGraph test it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

import asyncio
import functools
import operator
import random
import threading
from types import SimpleNamespace
from typing import Annotated, Any, NotRequired, Required, TypedDict

import pytest
from langgraph_kit import OURS as OURS_GRAPH
from langgraph_kit import THEIRS as THEIRS_GRAPH
from langgraph_kit import Log, cfg, lg_errors, lg_memory, lg_message, lg_types, pair, shape
from pydantic import BaseModel

from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import (
    NodeContext,
    RetryPolicy,
    StateUpdate,
    UntrackedValue,
    add_messages,
    entrypoint,
    task,
)
from tinyagents.graph import Overwrite as OursOverwrite
from tinyagents.store.checkpoint import Checkpointer

lg_func = pytest.importorskip("langgraph.func")
lg_untracked = pytest.importorskip("langgraph.channels.untracked_value")
lc_messages = pytest.importorskip("langchain_core.messages")

OURS = SimpleNamespace(**vars(OURS_GRAPH), entrypoint=entrypoint, task=task)
THEIRS = SimpleNamespace(**vars(THEIRS_GRAPH), entrypoint=lg_func.entrypoint, task=lg_func.task)


def saver(g: Any, checkpointer: Checkpointer) -> Any:
    """Ours on the fixture's backend, LangGraph's on its ``InMemorySaver``."""
    return checkpointer if g is OURS else lg_memory.InMemorySaver()


def questions(out: Any) -> list[Any] | None:
    """The questions of an ``ainvoke`` result that paused (None for one that did not)."""
    if isinstance(out, dict) and "__interrupt__" in out:
        return [i.value for i in out["__interrupt__"]]
    return None


# -- the functional API: tasks before and between questions (test_pregel.py) ----------------


def topics(g: Any, checkpointer: Checkpointer) -> Any:
    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def workflow(number_of_topics: int) -> dict[str, Any]:
        @g.task
        def setup() -> int:
            return number_of_topics

        @g.task
        def ask(question: str) -> Any:
            return g.interrupt(question)

        n = setup().result()
        answers = [ask(f"Whats the answer for topic {i + 1}?").result() for i in range(n)]
        return {"answers": answers}

    return workflow


async def test_a_task_before_the_questions_then_each_answer(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_task_before_interrupt_resume
    seen = []
    for g in (OURS, THEIRS):
        workflow = topics(g, checkpointer)
        outs = [
            await workflow.ainvoke(2, cfg()),
            await workflow.ainvoke(g.Command(resume="answer1"), cfg()),
            await workflow.ainvoke(g.Command(resume="answer2"), cfg()),
        ]
        assert questions(outs[0]) == ["Whats the answer for topic 1?"]
        assert questions(outs[1]) == ["Whats the answer for topic 2?"]
        assert outs[2] == {"answers": ["answer1", "answer2"]}
        seen.append([questions(o) or o for o in outs])
    assert seen[0] == seen[1]


def computed(g: Any, checkpointer: Checkpointer) -> Any:
    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def workflow(inputs: dict[str, Any]) -> dict[str, Any]:
        @g.task
        def step_a(x: int) -> int:
            return x + 1

        @g.task
        def step_b(x: int) -> int:
            return x * 2

        @g.task
        def ask(question: str) -> Any:
            return g.interrupt(question)

        a = step_a(inputs["x"]).result()
        b = step_b(a).result()
        answer = ask(f"Result so far is {b}. What next?").result()
        return {"computed": b, "answer": answer}

    return workflow


async def test_two_tasks_before_a_question(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_multiple_tasks_before_interrupt_resume
    for g in (OURS, THEIRS):
        workflow = computed(g, checkpointer)
        out = await workflow.ainvoke({"x": 5}, cfg())
        assert questions(out) == ["Result so far is 12. What next?"]
        out = await workflow.ainvoke(g.Command(resume="continue"), cfg())
        assert out == {"computed": 12, "answer": "continue"}


def falsy(g: Any, checkpointer: Checkpointer, calls: list[str]) -> Any:
    @g.task
    def falsy_task() -> bool:
        calls.append("falsy_task")
        return False

    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def graph(state: dict[str, Any]) -> Any:
        calls.append("graph")
        got = falsy_task().result()
        return {"got": got, "answer": g.interrupt("test")}

    return graph


async def test_a_task_returning_false_is_not_run_again_on_resume(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_falsy_return_from_task (its debug stream's task
    # results: the task's False is saved, and the resume does not run it again)
    seen = []
    for g in (OURS, THEIRS):
        calls: list[str] = []
        graph = falsy(g, checkpointer, calls)
        assert questions(await graph.ainvoke({"a": 5}, cfg())) == ["test"]
        assert await graph.ainvoke(g.Command(resume="123"), cfg()) == {
            "got": False,
            "answer": "123",
        }
        assert calls == ["graph", "falsy_task", "graph"]
        seen.append(calls)
    assert seen[0] == seen[1]


def foo_bar(g: Any, checkpointer: Checkpointer) -> Any:
    @g.task
    def foo(state: dict[str, Any]) -> dict[str, Any]:
        return {"a": state["a"] + "foo"}

    @g.task
    def bar(state: dict[str, Any]) -> dict[str, Any]:
        return {"a": state["a"] + "bar", "b": state["b"]}

    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def graph(inputs: dict[str, Any]) -> dict[str, Any]:
        fut_foo = foo(inputs)
        value = g.interrupt("Provide value for bar:")
        bar_input = {**fut_foo.result(), "b": value}
        return bar(bar_input).result()

    return graph


async def test_a_question_while_a_task_runs(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_interrupt_functional
    for g in (OURS, THEIRS):
        graph = foo_bar(g, checkpointer)
        assert questions(await graph.ainvoke({"a": ""}, cfg())) == ["Provide value for bar:"]
        assert await graph.ainvoke(g.Command(resume="bar"), cfg()) == {"a": "foobar", "b": "bar"}


def participants(g: Any, checkpointer: Checkpointer) -> Any:
    @g.task
    async def add_participant(name: str) -> str:
        feedback = g.interrupt(f"Hey do you want to add {name}?")
        if feedback is False:
            return f"The user changed their mind and doesn't want to add {name}!"
        if feedback is True:
            return f"Added {name}!"
        raise ValueError("Invalid feedback")

    @g.entrypoint(checkpointer=saver(g, checkpointer))
    async def program(_state: Any) -> list[str]:
        first = await add_participant("James")
        second = await add_participant("Will")
        return [first, second]

    return program


async def test_each_task_asks_in_turn(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py::test_handles_multiple_interrupts_from_tasks
    for g in (OURS, THEIRS):
        program = participants(g, checkpointer)
        out = await program.ainvoke("this is ignored", cfg())
        assert questions(out) == ["Hey do you want to add James?"]
        state = await (program.aget_state(cfg()) if g is THEIRS else program.get_state("1"))
        assert [i.value for i in state.tasks[0].interrupts] == ["Hey do you want to add James?"]
        out = await program.ainvoke(g.Command(resume=True), cfg())
        assert questions(out) == ["Hey do you want to add Will?"]
        state = await (program.aget_state(cfg()) if g is THEIRS else program.get_state("1"))
        assert [i.value for i in state.tasks[0].interrupts] == ["Hey do you want to add Will?"]
        out = await program.ainvoke(g.Command(resume=True), cfg())
        assert out == ["Added James!", "Added Will!"]


def shown_items(items: list[Any]) -> list[Any]:
    """Stream items with each pause as its questions (the interrupt ids differ)."""
    return [
        {"__interrupt__": [i.value for i in e["__interrupt__"]]}
        if isinstance(e, dict) and "__interrupt__" in e
        else e
        for e in items
    ]


async def test_a_task_question_is_streamed_once(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py::test_interrupts_in_tasks_surfaced_once; an
    # entrypoint's stream is of ``updates`` unless told (LangGraph's ``stream_mode``)
    seen = []
    for g in (OURS, THEIRS):
        program = participants(g, checkpointer)
        if g is THEIRS:
            items = [e async for e in program.astream("this is ignored", cfg())]
            again = [e async for e in program.astream(g.Command(resume=True), cfg())]
        else:
            items = [e async for e in program.stream("this is ignored", thread_id="1")]
            again = [e async for e in program.stream(g.Command(resume=True), thread_id="1")]
        assert shown_items(items) == [{"__interrupt__": ["Hey do you want to add James?"]}]
        assert shown_items(again) == [
            {"add_participant": "Added James!"},
            {"__interrupt__": ["Hey do you want to add Will?"]},
        ]
        assert await program.ainvoke(g.Command(resume=True), cfg()) == [
            "Added James!",
            "Added Will!",
        ]
        seen.append((shown_items(items), shown_items(again)))
    assert seen[0] == seen[1]


# -- Send with untracked values (test_pregel.py) ---------------------------------------------


class Resource:
    """Something that cannot be saved (it holds a lock)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.Lock()


class WithResource(TypedDict):
    messages: Annotated[list[str], operator.add]
    session_resource: Annotated[Resource, UntrackedValue]


class ThemWithResource(TypedDict):
    messages: Annotated[list[str], operator.add]
    session_resource: Annotated[Resource, lg_untracked.UntrackedValue]


def resource_sender(g: Any) -> Any:
    def setup_node(state: Any) -> dict[str, Any]:
        return {"messages": ["setup complete"], "session_resource": Resource("test_session")}

    def send_to_tool(state: Any) -> list[Any]:
        return [g.Send("tool_node", state)]

    def tool_node(state: Any) -> dict[str, Any]:
        resource = state["session_resource"]
        assert isinstance(resource, Resource)
        assert resource.name == "test_session"
        return {
            "messages": [f"tool used resource: {resource.name}"],
            "session_resource": Resource("new_session"),
        }

    graph = g.StateGraph(WithResource if g is OURS else ThemWithResource)
    graph.add_node("setup", setup_node)
    graph.add_node("tool_node", tool_node)
    graph.add_edge(g.START, "setup")
    graph.add_conditional_edges("setup", send_to_tool, ["tool_node"])
    return graph


async def test_a_send_carries_an_untracked_value(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_send_with_untracked_value
    ours = resource_sender(OURS).compile(checkpointer=checkpointer)
    theirs = resource_sender(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({}, cfg())
    result = (await ours.run({}, thread_id="1")).raise_for_status()
    assert result.state["messages"] == out["messages"]
    assert out["messages"] == ["setup complete", "tool used resource: test_session"]
    assert result.state["session_resource"].name == out["session_resource"].name == "new_session"
    ours_state = await ours.get_state("1")
    theirs_state = await theirs.aget_state(cfg())
    assert "session_resource" not in theirs_state.values
    assert ours_state.values == theirs_state.values


class Overlapping(TypedDict):
    dictionary: dict[str, Any]
    session_resource: Annotated[str, UntrackedValue]


class ThemOverlapping(TypedDict):
    dictionary: dict[str, Any]
    session_resource: Annotated[str, lg_untracked.UntrackedValue]


def overlapping_sender(g: Any) -> Any:
    def setup_node(state: Any) -> dict[str, Any]:
        return {}

    def send_to_tool(state: Any) -> list[Any]:
        item = {"dictionary": {"session_resource": "legal_value"}}
        return [g.Send("tool_node", {**item, "session_resource": "illegal_value"})]

    def tool_node(state: Any) -> dict[str, Any]:
        assert state["dictionary"] == {"session_resource": "legal_value"}
        assert state["session_resource"] == "illegal_value"
        return {"dictionary": state["dictionary"], "session_resource": "new_illegal_value"}

    graph = g.StateGraph(Overlapping if g is OURS else ThemOverlapping)
    graph.add_node("setup", setup_node)
    graph.add_node("tool_node", tool_node)
    graph.add_edge(g.START, "setup")
    graph.add_conditional_edges("setup", send_to_tool, ["tool_node"])
    return graph


async def test_an_untracked_key_beside_a_dict_holding_that_key(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_send_with_untracked_value_overlapping_keys
    ours = overlapping_sender(OURS).compile(checkpointer=checkpointer)
    theirs = overlapping_sender(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({}, cfg())
    result = (await ours.run({}, thread_id="1")).raise_for_status()
    assert result.state == out
    assert out["session_resource"] == "new_illegal_value"
    ours_state = await ours.get_state("1")
    theirs_state = await theirs.aget_state(cfg())
    assert (
        ours_state.values
        == theirs_state.values
        == {"dictionary": {"session_resource": "legal_value"}}
    )


# -- Overwrite (test_pregel.py) ---------------------------------------------------------------


class Messages(TypedDict):
    messages: Annotated[list[Any], operator.add]


def overwriting(g: Any, as_json: bool, parallel: bool) -> Any:
    kind = OursOverwrite if g is OURS else lg_types.Overwrite

    def node_a(state: Any) -> dict[str, Any]:
        return {"messages": ["a"]}

    def writer(value: str) -> Any:
        def node(state: Any) -> dict[str, Any]:
            over = {"__overwrite__": [value]} if as_json else kind([value])
            return {"messages": over}

        return node

    builder = g.StateGraph(Messages)
    builder.add_node("node_a", node_a)
    builder.add_node("node_b", writer("b"))
    builder.add_edge(g.START, "node_a")
    builder.add_edge("node_a", "node_b")
    if parallel:
        builder.add_node("node_c", writer("c"))
        builder.add_edge("node_a", "node_c")
    return builder


@pytest.mark.parametrize("as_json", [False, True])
async def test_an_overwrite_after_appends(checkpointer: Checkpointer, as_json: bool) -> None:
    # LangGraph: test_pregel.py::test_overwrite_sequential
    ours = overwriting(OURS, as_json, False).compile(checkpointer=checkpointer)
    theirs = overwriting(THEIRS, as_json, False).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"messages": ["START"]}, cfg())
    result = (await ours.run({"messages": ["START"]}, thread_id="1")).raise_for_status()
    assert result.state == out == {"messages": ["b"]}


@pytest.mark.parametrize("as_json", [False, True])
async def test_two_overwrites_in_one_step_fail(checkpointer: Checkpointer, as_json: bool) -> None:
    # LangGraph: test_pregel.py::test_overwrite_parallel_error
    ours = overwriting(OURS, as_json, True).compile(checkpointer=checkpointer)
    theirs = overwriting(THEIRS, as_json, True).compile(checkpointer=lg_memory.InMemorySaver())
    with pytest.raises(lg_errors.InvalidUpdateError, match="only one Overwrite value per super"):
        await theirs.ainvoke({"messages": ["START"]}, cfg())
    result = await ours.run({"messages": ["START"]}, thread_id="1")
    assert result.status == "failed"
    with pytest.raises(InvalidUpdateError, match="only one Overwrite value per super"):
        result.raise_for_status()


# -- a node returning a list of Commands, or Commands and an update (test_pregel.py) ---------


class Text(TypedDict):
    text: Annotated[str, operator.add]


def several_updates(g: Any) -> Any:
    def node_a(state: Any) -> list[Any]:
        return [g.Command(update={"text": "a1"}), g.Command(update={"text": "a2"})]

    def node_b(state: Any) -> dict[str, Any]:
        return {"text": "b"}

    return g.StateGraph(Text).add_sequence([node_a, node_b]).add_edge(g.START, "node_a")


async def test_a_node_returning_two_commands() -> None:
    # LangGraph: test_pregel.py::test_multiple_updates_root; its state is the bare value
    # (docs/graph.md, "What it does not do": a state schema is a class), here a field of one
    ours, theirs = pair(several_updates, None)
    out = await theirs.ainvoke({"text": ""})
    result = (await ours.run({"text": ""})).raise_for_status()
    assert result.state == out == {"text": "a1a2b"}
    theirs_items = [c async for c in theirs.astream({"text": ""}, stream_mode="updates")]
    ours_items = [c async for c in ours.stream({"text": ""}, mode="updates")]
    assert ours_items == theirs_items


class Items(TypedDict):
    items: Annotated[list[str], operator.add]


def mixed_return(g: Any) -> Any:
    def my_node(state: Any) -> list[Any]:
        return [g.Command(update={"items": ["a"]}), {"items": ["b"]}]

    graph = g.StateGraph(Items)
    graph.add_node(my_node)
    return graph.add_edge(g.START, "my_node")


async def test_a_node_returning_a_command_and_an_update() -> None:
    # LangGraph: test_pregel.py::test_root_mixed_return (on a field, as above)
    ours, theirs = pair(mixed_return, None)
    out = await theirs.ainvoke({"items": []})
    result = (await ours.run({"items": []})).raise_for_status()
    assert result.state == out == {"items": ["a", "b"]}


# -- bulk_update_state with __input__ and __start__ (test_pregel.py) -------------------------


class Foo(TypedDict):
    foo: str


def agent_tool(g: Any) -> Any:
    return (
        g.StateGraph(Foo)
        .add_node("agent", lambda state: {"foo": "agent"})
        .add_node("tool", lambda state: {"foo": "tool"})
        .add_edge(g.START, "agent")
        .add_edge("agent", "tool")
    )


def turns(update: Any) -> list[list[Any]]:
    one = [
        [update({"foo": "input"}, "__input__")],
        [update({"foo": "input"}, "__start__")],
        [update({"foo": "agent"}, "agent")],
        [update({"foo": "tool"}, "tool")],
    ]
    return one + one


async def test_updates_as_input_and_start_make_the_runs_history(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_update_as_input
    ours, theirs = pair(agent_tool, checkpointer)
    for _ in range(2):
        assert await theirs.ainvoke({"foo": "input"}, cfg()) == {"foo": "tool"}
        result = (await ours.run({"foo": "input"}, thread_id="1")).raise_for_status()
        assert result.state == {"foo": "tool"}

    def theirs_mapped(s: Any) -> dict[str, Any]:
        return {"values": s.values, "next": s.next, "step": s.metadata.get("step")}

    async def ours_mapped(thread: str) -> list[dict[str, Any]]:
        snaps = [await ours.get_state(thread, c.checkpoint_id) for c in await ours.history(thread)]
        return [{"values": s.values, "next": s.next, "step": s.step} for s in snaps]

    theirs_history = [theirs_mapped(s) async for s in theirs.aget_state_history(cfg())]
    ours_history = await ours_mapped("1")
    assert ours_history == theirs_history

    await theirs.abulk_update_state(cfg("2"), turns(lg_types.StateUpdate))
    await ours.bulk_update_state("2", turns(StateUpdate))
    assert (await ours.get_state("2")).values == (await theirs.aget_state(cfg("2"))).values
    theirs_new = [theirs_mapped(s) async for s in theirs.aget_state_history(cfg("2"))]
    ours_new = await ours_mapped("2")
    assert theirs_new == theirs_history
    assert ours_new == ours_history


# -- Required / NotRequired around annotated fields (test_state.py) --------------------------


class ParentState(TypedDict):
    val0a: str
    val0b: str | None


class InputState(ParentState, total=False):
    val1: str
    val2: str | None
    val3: Required[Annotated[dict[str, Any], operator.or_]]
    val4: NotRequired[dict[str, Any]]
    val5: Annotated[Required[str], "foo"]
    val6: Annotated[NotRequired[str], "bar"]


class OutputState(ParentState, total=False):
    out_val1: str
    out_val2: str | None
    out_val3: Required[str]
    out_val4: NotRequired[dict[str, Any]]
    out_val5: Annotated[Required[str], "foo"]
    out_val6: Annotated[NotRequired[str], "bar"]


class OptionalState(InputState):
    val4: dict[str, Any]


def optional_values(g: Any) -> Any:
    def n(state: Any) -> dict[str, Any]:
        return {
            "val3": {"n": 1},
            "out_val1": f"{state['val1']}!",
            "out_val5": state["val5"],
            "val0a": "from n",
        }

    builder = g.StateGraph(OptionalState, input_schema=InputState, output_schema=OutputState)
    builder.add_node("n", n)
    return builder.add_edge("__start__", "n")


async def test_required_and_not_required_keep_a_fields_reducer() -> None:
    # LangGraph: test_state.py::test_state_schema_optional_values (its channels, by a run:
    # ``val3``, ``Required[Annotated[dict, operator.or_]]``, merges; the JSON schemas are
    # not offered here, docs/graph.md "What it does not do")
    ours, theirs = pair(optional_values, None)
    given = {"val0a": "a", "val0b": None, "val1": "one", "val3": {"given": 0}, "val5": "five"}
    out = await theirs.ainvoke(dict(given))
    result = (await ours.run(dict(given))).raise_for_status()
    assert result.state == out
    assert out == {"val0a": "from n", "val0b": None, "out_val1": "one!", "out_val5": "five"}
    ours_state = (await optional_values(OURS).compile(checkpointer=None).run(dict(given))).state
    assert ours_state == out


async def test_an_update_as_input_then_a_run_from_it(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_update_as_input, the input's checkpoint continued
    ours, theirs = pair(agent_tool, checkpointer)
    await theirs.aupdate_state(cfg(), {"foo": "given"}, as_node="__input__")
    await ours.update_state("1", {"foo": "given"}, as_node="__input__")
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert (ours_state.values, ours_state.next, ours_state.step) == (
        theirs_state.values,
        theirs_state.next,
        theirs_state.metadata["step"],
    )
    assert theirs_state.next == ("__start__",)
    assert (await ours.history("1"))[0].source == theirs_state.metadata["source"] == "input"
    assert await theirs.ainvoke(None, cfg()) == {"foo": "tool"}
    assert (await ours.run(None, thread_id="1")).raise_for_status().state == {"foo": "tool"}
    theirs_steps = [s.metadata["step"] async for s in theirs.aget_state_history(cfg())]
    ours_steps = [c.step for c in await ours.history("1")]
    assert ours_steps == theirs_steps

    # an input of no key is saved as one, here and there; one of a key that is no field
    # is refused here (LangGraph's saves it: docs/graph.md, "State": a key that is not a
    # field is an InvalidUpdateError, whoever writes it)
    await theirs.aupdate_state(cfg(), {}, as_node="__input__")
    await ours.update_state("1", {}, as_node="__input__")
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert (ours_state.values, ours_state.next) == (theirs_state.values, theirs_state.next)
    assert ours_state.step == theirs_state.metadata["step"] == ours_steps[0] + 1
    with pytest.raises(InvalidUpdateError, match="no_such_key"):
        await ours.update_state("1", {"no_such_key": 1}, as_node="__input__")
    assert [c.step for c in await ours.history("1")] == [ours_steps[0] + 1, *ours_steps]
    # at an older checkpoint LangGraph's forks there; ours refuses (docs/graph.md, the
    # ``update_state`` row)
    older = (await ours.history("1"))[-1].checkpoint_id
    with pytest.raises(InvalidUpdateError, match="at the head"):
        await ours.update_state("1", {"foo": "x"}, as_node="__input__", checkpoint_id=older)
    with pytest.raises(InvalidUpdateError, match="names the node"):
        await ours.bulk_update_state(
            "1", [[StateUpdate({"foo": "x"}, "__input__"), StateUpdate({"foo": "y"}, "agent")]]
        )


# -- retry policies (test_retry.py) -----------------------------------------------------------


class FooState(TypedDict):
    foo: str


def retried(g: Any, attempts: list[int], failures: int, **policy: Any) -> Any:
    """START → failing_node (fails ``failures`` times, noting each attempt's number) →
    other_node."""
    kind = lg_types.RetryPolicy if g is THEIRS else RetryPolicy

    def outcome(attempt: int) -> dict[str, Any]:
        attempts.append(attempt)
        if len(attempts) <= failures:
            raise ValueError("Intentional failure")
        return {"foo": "success"}

    if g is THEIRS:

        def failing_node(state: Any, runtime: Any) -> dict[str, Any]:
            return outcome(runtime.execution_info.node_attempt)

    else:

        def failing_node(state: Any, ctx: NodeContext) -> dict[str, Any]:
            return outcome(ctx.attempt)

    retry = kind(retry_on=ValueError, **policy)
    return (
        g.StateGraph(FooState)
        .add_node("failing_node", failing_node, retry_policy=retry)
        .add_node("other_node", lambda state: {"foo": "other_node"})
        .add_edge(g.START, "failing_node")
        .add_edge("failing_node", "other_node")
    )


def waits_of(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits our retries take (``RetryPolicy.interval``'s answers), noted."""
    waits: list[float] = []
    interval = RetryPolicy.interval

    def noted(self: RetryPolicy, attempt: int) -> float:
        waits.append(interval(self, attempt))
        return 0.0

    monkeypatch.setattr(RetryPolicy, "interval", noted)
    return waits


async def test_a_single_retry_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    # LangGraph: test_retry.py::test_graph_with_single_retry_policy (its waits patched out
    # of ``time.sleep``; ours noted from the policy)
    policy = {"max_attempts": 3, "initial_interval": 0.01, "backoff_factor": 2.0, "jitter": False}
    theirs_attempts: list[int] = []
    ours_attempts: list[int] = []
    theirs = retried(THEIRS, theirs_attempts, 2, **policy).compile()
    ours = retried(OURS, ours_attempts, 2, **policy).compile()
    out = await theirs.ainvoke({"foo": ""})
    waits = waits_of(monkeypatch)
    result = (await ours.run({"foo": ""})).raise_for_status()
    assert result.state == out == {"foo": "other_node"}
    assert ours_attempts == theirs_attempts == [1, 2, 3]
    assert waits == [0.01, 0.02]


async def test_retries_past_max_attempts_fail_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # LangGraph: test_retry.py::test_graph_with_max_attempts_exceeded
    policy = {"max_attempts": 2, "initial_interval": 0.01, "jitter": False}
    theirs_attempts: list[int] = []
    ours_attempts: list[int] = []
    theirs = retried(THEIRS, theirs_attempts, 5, **policy).compile()
    ours = retried(OURS, ours_attempts, 5, **policy).compile()
    with pytest.raises(ValueError, match="Intentional failure"):
        await theirs.ainvoke({"foo": ""})
    waits = waits_of(monkeypatch)
    result = await ours.run({"foo": ""})
    assert result.status == "failed"
    with pytest.raises(ValueError, match="Intentional failure"):
        result.raise_for_status()
    assert ours_attempts == theirs_attempts == [1, 2]
    assert waits == [0.01]


async def test_a_retry_policy_with_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    # LangGraph: test_retry.py::test_graph_with_jitter_retry_policy: the wait is the
    # interval plus ``random.uniform(0, 1)``
    policy = {"max_attempts": 3, "initial_interval": 0.01, "jitter": True}
    theirs_attempts: list[int] = []
    ours_attempts: list[int] = []
    theirs = retried(THEIRS, theirs_attempts, 1, **policy).compile()
    ours = retried(OURS, ours_attempts, 1, **policy).compile()
    drawn: list[tuple[float, float]] = []

    def uniform(a: float, b: float) -> float:
        drawn.append((a, b))
        return 0.05

    monkeypatch.setattr(random, "uniform", uniform)
    out = await theirs.ainvoke({"foo": ""})
    assert drawn == [(0, 1)]
    waits = waits_of(monkeypatch)
    result = (await ours.run({"foo": ""})).raise_for_status()
    assert result.state == out == {"foo": "other_node"}
    assert ours_attempts == theirs_attempts == [1, 2]
    assert drawn == [(0, 1), (0, 1)]
    assert waits == [0.01 + 0.05]


# -- a breakpoint two sub-graphs down (test_large_cases.py) ----------------------------------


class MyKey(TypedDict):
    my_key: str


def doubly_nested(g: Any) -> Any:
    def grandchild_1(state: Any) -> dict[str, Any]:
        return {"my_key": state["my_key"] + " here"}

    def grandchild_2(state: Any) -> dict[str, Any]:
        return {"my_key": state["my_key"] + " and there"}

    grandchild = g.StateGraph(MyKey)
    grandchild.add_node("grandchild_1", grandchild_1)
    grandchild.add_node("grandchild_2", grandchild_2)
    grandchild.add_edge("grandchild_1", "grandchild_2")
    grandchild.set_entry_point("grandchild_1")
    grandchild.set_finish_point("grandchild_2")

    child = g.StateGraph(MyKey)
    child.add_node("child_1", grandchild.compile(interrupt_before=["grandchild_2"]))
    child.set_entry_point("child_1")
    child.set_finish_point("child_1")

    graph = g.StateGraph(MyKey)
    graph.add_node("parent_1", lambda state: {"my_key": "hi " + state["my_key"]})
    graph.add_node("child", child.compile())
    graph.add_node("parent_2", lambda state: {"my_key": state["my_key"] + " and back again"})
    graph.set_entry_point("parent_1")
    graph.add_edge("parent_1", "child")
    graph.add_edge("child", "parent_2")
    graph.set_finish_point("parent_2")
    return graph


async def test_a_breakpoint_in_a_sub_graph_of_a_sub_graph(checkpointer: Checkpointer) -> None:
    # LangGraph: test_large_cases.py::test_doubly_nested_graph_state (its default
    # durability: docs/graph.md, "What it does not do", a run saves every step)
    ours, theirs = pair(doubly_nested, checkpointer)

    async def streamed(item: Any) -> tuple[list[Any], list[Any]]:
        theirs_items = [
            (shape(ns), c)
            async for ns, c in theirs.astream(item, cfg(), subgraphs=True, stream_mode="updates")
        ]
        ours_items = [
            (shape(ns), c)
            async for ns, c in ours.stream(item, thread_id="1", subgraphs=True, mode="updates")
        ]
        return ours_items, theirs_items

    ours_items, theirs_items = await streamed({"my_key": "my value"})
    assert (
        ours_items
        == theirs_items
        == [
            ((), {"parent_1": {"my_key": "hi my value"}}),
            (("child", "child_1"), {"grandchild_1": {"my_key": "hi my value here"}}),
            ((), {"__interrupt__": ()}),
        ]
    )
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert (ours_state.values, ours_state.next) == (theirs_state.values, theirs_state.next)
    assert theirs_state.next == ("child",)
    theirs_deep = await theirs.aget_state(cfg(), subgraphs=True)
    ours_deep = await ours.get_state("1", subgraphs=True)
    theirs_child = theirs_deep.tasks[0].state
    ours_child = ours_deep.tasks[0].state
    assert (ours_child.values, ours_child.next) == (theirs_child.values, theirs_child.next)
    assert theirs_child.next == ("child_1",)
    theirs_grandchild = theirs_child.tasks[0].state
    ours_grandchild = ours_child.tasks[0].state
    assert (ours_grandchild.values, ours_grandchild.next) == (
        theirs_grandchild.values,
        theirs_grandchild.next,
    )
    assert theirs_grandchild.values == {"my_key": "hi my value here"}
    assert theirs_grandchild.next == ("grandchild_2",)

    ours_items, theirs_items = await streamed(None)
    done = "hi my value here and there"
    assert (
        ours_items
        == theirs_items
        == [
            (("child", "child_1"), {"grandchild_2": {"my_key": done}}),
            (("child",), {"child_1": {"my_key": done}}),
            ((), {"child": {"my_key": done}}),
            ((), {"parent_2": {"my_key": done + " and back again"}}),
        ]
    )
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert (ours_state.values, ours_state.next) == (theirs_state.values, theirs_state.next)
    theirs_history = [
        (s.values, s.next, s.metadata["step"], s.metadata["source"])
        async for s in theirs.aget_state_history(cfg())
    ]
    ours_history = []
    for c in await ours.history("1"):
        s = await ours.get_state("1", c.checkpoint_id)
        ours_history.append((s.values, s.next, c.step, c.source))
    assert ours_history == theirs_history


class X(TypedDict):
    x: str


def goto_end_inside(g: Any) -> Any:
    def update_x(state: Any) -> Any:
        return g.Command(goto=g.END, update={"x": state["x"] + "!"})

    sub = g.StateGraph(X).add_node("update_x", update_x)
    sub = sub.add_edge(g.START, "update_x").add_edge("update_x", g.END).compile()
    graph = g.StateGraph(X).add_node("subgraph_node", sub)
    return graph.add_edge(g.START, "subgraph_node").add_edge("subgraph_node", g.END)


async def test_a_goto_end_inside_a_sub_graph_ends_the_sub_graph(
    recwarn: pytest.WarningsRecorder,
) -> None:
    # LangGraph: test_large_cases.py::test_subgraph_to_end_does_not_warn
    ours, theirs = pair(goto_end_inside, None)
    out = await theirs.ainvoke({"x": "hello"})
    warned = len(recwarn)
    result = (await ours.run({"x": "hello"})).raise_for_status()
    assert result.state == out == {"x": "hello!"}
    assert len(recwarn) == warned  # ours warns of nothing


# -- replays of persistent sub-graphs (test_time_travel.py) ----------------------------------


class SubTrail(TypedDict):
    sub_trail: Annotated[list[str], operator.add]


class Counted(TypedDict):
    counter: int
    results: Annotated[list[str], operator.add]


def sub_in_a_loop(g: Any, observed: list[Any]) -> Any:
    def inc(state: Any) -> dict[str, Any]:
        return {"counter": state["counter"] + 1, "results": [f"inc:{state['counter']}"]}

    def sub_step(state: Any) -> dict[str, Any]:
        observed.append(("sub_step", dict(state)))
        return {"sub_trail": ["s"]}

    def should_loop(state: Any) -> str:
        return "inc" if state["counter"] < 2 else "__end__"

    sub = g.StateGraph(SubTrail).add_node("sub_step", sub_step).add_edge(g.START, "sub_step")
    return (
        g.StateGraph(Counted)
        .add_node("inc", inc)
        .add_node("sub_node", sub.compile(checkpointer=True))
        .add_edge(g.START, "inc")
        .add_edge("inc", "sub_node")
        .add_conditional_edges("sub_node", should_loop, ["inc", "__end__"])
    )


async def replayed(ours: Any, theirs: Any, pick: Any) -> None:
    """Run each library again from its newest checkpoint that ``pick(values, next)`` takes."""
    async for s in theirs.aget_state_history(cfg()):
        if pick(s.values, s.next):
            await theirs.ainvoke(None, s.config)
            break
    else:
        raise AssertionError("no such checkpoint in LangGraph's history")
    for c in await ours.history("1"):
        s = await ours.get_state("1", c.checkpoint_id)
        if pick(s.values, s.next):
            (await ours.run(None, thread_id="1", checkpoint_id=c.checkpoint_id)).raise_for_status()
            break
    else:
        raise AssertionError("no such checkpoint in our history")


async def test_a_sub_graph_called_in_a_loop_is_taken_back_by_a_replay(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_subgraph_called_in_loop_loads_state_on_replay
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = sub_in_a_loop(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = sub_in_a_loop(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    for _ in range(2):
        out = await theirs.ainvoke({"counter": 0, "results": []}, cfg())
        result = await ours.run({"counter": 0, "results": []}, thread_id="1")
        assert result.raise_for_status().state == out
    assert ours_seen == theirs_seen
    assert [seen for _, seen in ours_seen] == [
        {"sub_trail": []},
        {"sub_trail": ["s"]},
        {"sub_trail": ["s", "s"]},
        {"sub_trail": ["s", "s", "s"]},
    ]
    # from the start of the second run's loop: the sub-graph as the first run left it
    ours_seen.clear()
    theirs_seen.clear()
    await replayed(ours, theirs, lambda v, n: n == ("inc",) and v["counter"] == 0)
    assert ours_seen == theirs_seen
    assert [seen for _, seen in ours_seen] == [
        {"sub_trail": ["s", "s"]},
        {"sub_trail": ["s", "s", "s"]},
    ]
    # from mid-loop (the replay's, the newest such checkpoint now): one call left
    ours_seen.clear()
    theirs_seen.clear()
    await replayed(ours, theirs, lambda v, n: n == ("inc",) and v["counter"] == 1)
    assert ours_seen == theirs_seen == [("sub_step", {"sub_trail": ["s", "s", "s"]})]


class ATrail(TypedDict):
    a_trail: Annotated[list[str], operator.add]


class BTrail(TypedDict):
    b_trail: Annotated[list[str], operator.add]


class Results(TypedDict):
    results: Annotated[list[str], operator.add]


def two_subs(g: Any, observed: list[Any]) -> Any:
    def sub_step(name: str, key: str) -> Any:
        def step(state: Any) -> dict[str, Any]:
            observed.append((name, dict(state)))
            return {key: [name[-1]]}

        return step

    sub_a = g.StateGraph(ATrail).add_node("sub_a_step", sub_step("sub_a", "a_trail"))
    sub_b = g.StateGraph(BTrail).add_node("sub_b_step", sub_step("sub_b", "b_trail"))
    sub_a.add_edge(g.START, "sub_a_step")
    sub_b.add_edge(g.START, "sub_b_step")
    return (
        g.StateGraph(Results)
        .add_node("parent_step", lambda state: {"results": ["p"]})
        .add_node("sub_a_node", sub_a.compile(checkpointer=True))
        .add_node("sub_b_node", sub_b.compile(checkpointer=True))
        .add_edge(g.START, "parent_step")
        .add_edge("parent_step", "sub_a_node")
        .add_edge("parent_step", "sub_b_node")
    )


async def test_parallel_persistent_sub_graphs_are_each_taken_back_by_a_replay(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_parallel_subgraph_nodes_load_correct_state_on_replay
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = two_subs(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = two_subs(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())

    async def run_both() -> list[Any]:
        ours_seen.clear()
        theirs_seen.clear()
        out = await theirs.ainvoke({"results": []}, cfg())
        result = await ours.run({"results": []}, thread_id="1")
        assert result.raise_for_status().state == out
        assert sorted(ours_seen) == sorted(theirs_seen)
        return sorted(ours_seen)

    assert await run_both() == [("sub_a", {"a_trail": []}), ("sub_b", {"b_trail": []})]
    assert await run_both() == [("sub_a", {"a_trail": ["a"]}), ("sub_b", {"b_trail": ["b"]})]
    # from before parent_step in the second run: each sub-graph as the first run left it
    ours_seen.clear()
    theirs_seen.clear()
    await replayed(ours, theirs, lambda v, n: n == ("parent_step",))
    assert sorted(ours_seen) == sorted(theirs_seen)
    assert sorted(ours_seen) == [("sub_a", {"a_trail": ["a"]}), ("sub_b", {"b_trail": ["b"]})]
    # a third run goes on from the replay's
    assert await run_both() == [
        ("sub_a", {"a_trail": ["a", "a"]}),
        ("sub_b", {"b_trail": ["b", "b"]}),
    ]


# -- RemoveMessage from a node and from update_state (test_pregel.py) ------------------------


class Chat(TypedDict):
    messages: Annotated[list[Any], add_messages]


class ThemChat(TypedDict):
    messages: Annotated[list[Any], lg_message.add_messages]


def chatbot(g: Any, delete: bool) -> Any:
    def chat(state: Any) -> dict[str, Any]:
        said = ["Hello!", "How can I help you?"] if delete else ["Hello! How can I help you"]
        return {
            "messages": [lc_messages.AIMessage(content=c, id=f"ai-{i}") for i, c in enumerate(said)]
        }

    def delete_messages(state: Any) -> dict[str, Any]:
        return {"messages": [lc_messages.RemoveMessage(id=state["messages"][-2].id)]}

    workflow = g.StateGraph(ThemChat if g.Command is lg_types.Command else Chat)
    workflow.add_node("chatbot", chat)
    workflow.set_entry_point("chatbot")
    if delete:
        workflow.add_node("delete_messages", delete_messages)
        workflow.add_edge("chatbot", "delete_messages")
    return workflow


async def test_a_node_removes_a_message() -> None:
    # LangGraph: test_pregel.py::test_remove_message_from_node; its state is the bare
    # message list (docs/graph.md, "What it does not do": a state schema is a class), here a
    # field of one
    ours, theirs = pair(lambda g: chatbot(g, True), None)
    given = {"messages": [lc_messages.HumanMessage(content="Hi", id="h1")]}
    out = await theirs.ainvoke(given)
    result = (await ours.run(given)).raise_for_status()
    assert result.state == out
    assert [m.content for m in out["messages"]] == ["Hi", "How can I help you?"]


async def test_update_state_removes_a_message(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_remove_message_via_state_update (on a field, as above;
    # then the thread deleted)
    ours, theirs = pair(lambda g: chatbot(g, False), checkpointer)
    given = {"messages": [lc_messages.HumanMessage(content="Hi", id="h1")]}
    out = await theirs.ainvoke(given, cfg())
    result = (await ours.run(given, thread_id="1")).raise_for_status()
    assert result.state == out
    last = out["messages"][-1].id
    await theirs.aupdate_state(cfg(), {"messages": [lc_messages.RemoveMessage(id=last)]})
    await ours.update_state("1", {"messages": [lc_messages.RemoveMessage(id=last)]})
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.values == theirs_state.values
    assert [m.content for m in theirs_state.values["messages"]] == ["Hi"]
    await theirs.checkpointer.adelete_thread("1")
    await checkpointer.delete_thread("1")
    assert await theirs.checkpointer.aget_tuple(cfg()) is None
    assert [s async for s in theirs.aget_state_history(cfg())] == []
    assert await ours.history("1") == []
    assert (await ours.get_state("1")).checkpoint_id is None


# -- a pydantic model through the functional API (test_pydantic.py) --------------------------


class FunctionalState(BaseModel):
    a: str
    b: str | None = None


def pydantic_program(g: Any, checkpointer: Checkpointer, calls: list[str]) -> Any:
    @g.task
    def foo(state: FunctionalState) -> FunctionalState:
        calls.append("foo")
        return FunctionalState(**{"a": state.a + "foo"})

    @g.task
    def bar(state: FunctionalState) -> dict[str, Any]:
        return {"a": state.a + "bar", "b": state.b}

    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def graph(inputs: FunctionalState) -> Any:
        assert isinstance(inputs, FunctionalState)  # on resume too: read back as the model
        fut_foo = foo(inputs)
        value = g.interrupt("Provide value for bar:")
        foo_res = fut_foo.result()
        assert isinstance(foo_res, FunctionalState)
        return bar(FunctionalState(a=foo_res.a, b=value)).result()

    return graph


async def test_a_pydantic_task_result_is_read_back_as_its_model(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pydantic.py::test_interrupt_functional_pydantic
    for g in (OURS, THEIRS):
        calls: list[str] = []
        graph = pydantic_program(g, checkpointer, calls)
        out = await graph.ainvoke(FunctionalState(a=""), cfg())
        assert questions(out) == ["Provide value for bar:"]
        assert await graph.ainvoke(g.Command(resume="bar"), cfg()) == {"a": "foobar", "b": "bar"}
        assert calls == ["foo"]


# -- entrypoints: named tasks, sub-graph calls, ``previous`` (test_pregel.py) ----------------


def named_tasks(g: Any) -> Any:
    class Foo:
        def foo(self, value: str) -> Any:
            return value + "foo"

    f = Foo()
    foo = g.task(f.foo, name="custom_foo")
    other_foo = g.task(f.foo, name="other_foo")

    @g.task(name="custom_bar")
    def bar(value: str) -> Any:
        return value + "|bar"

    def baz(update: str, value: str) -> Any:
        return value + f"|{update}"

    baz_task = g.task(functools.partial(baz, "baz"))
    custom_baz_task = g.task(functools.partial(baz, "custom_baz"), name="custom_baz")

    class Qux:
        def __call__(self, value: str) -> Any:
            return value + "|qux"

    qux_task = g.task(Qux(), name="qux")

    @g.entrypoint()
    def workflow(inputs: Any) -> Any:
        foo_result = foo(inputs).result()
        other_foo(inputs).result()
        fut_bar = bar(foo_result)
        fut_baz = baz_task(fut_bar.result())
        fut_custom_baz = custom_baz_task(fut_baz.result())
        return qux_task(fut_custom_baz.result()).result()

    return workflow


async def test_tasks_named_and_of_methods_partials_and_callables() -> None:
    # LangGraph: test_pregel.py::test_named_tasks_functional
    theirs = [c async for c in named_tasks(THEIRS).astream("", stream_mode="updates")]
    ours = [c async for c in named_tasks(OURS).stream("", mode="updates")]
    assert (
        ours
        == theirs
        == [
            {"custom_foo": "foo"},
            {"other_foo": "foo"},
            {"custom_bar": "foo|bar"},
            {"baz": "foo|bar|baz"},
            {"custom_baz": "foo|bar|baz|custom_baz"},
            {"qux": "foo|bar|baz|custom_baz|qux"},
            {"workflow": "foo|bar|baz|custom_baz|qux"},
        ]
    )


def remembering(g: Any, checkpointer: Checkpointer, states: list[Any]) -> Any:
    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def foo(inputs: Any, *, previous: Any) -> Any:
        states.append(previous)
        return {"previous": previous, "current": inputs}

    return foo


async def test_an_entrypoint_gets_what_it_returned_last(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_entrypoint_stateful
    seen = []
    for g in (OURS, THEIRS):
        states: list[Any] = []
        foo = remembering(g, checkpointer, states)
        outs = [await foo.ainvoke({"a": str(i)}, cfg()) for i in (1, 2, 3)]
        assert outs[2] == {
            "current": {"a": "3"},
            "previous": {
                "current": {"a": "2"},
                "previous": {"current": {"a": "1"}, "previous": None},
            },
        }
        assert states == [None, outs[0], outs[1]]
        if g is THEIRS:
            items = [i async for i in foo.astream({"a": "1"}, cfg("2"))]
        else:
            items = [i async for i in foo.stream({"a": "1"}, thread_id="2")]
        assert items == [{"foo": {"current": {"a": "1"}, "previous": None}}]
        seen.append(outs)
    assert seen[0] == seen[1]


async def test_update_state_of_an_entrypoint_is_its_previous(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_entrypoint_stateful_update_state
    seen = []
    for g in (OURS, THEIRS):
        states: list[Any] = []
        foo = remembering(g, checkpointer, states)
        if g is THEIRS:
            await foo.aupdate_state(cfg(), {"a": "-1"})
        else:
            await foo.update_state("1", {"a": "-1"})
        outs = [await foo.ainvoke({"a": str(i)}, cfg()) for i in (1, 2, 3)]
        assert outs[0] == {"current": {"a": "1"}, "previous": {"a": "-1"}}
        if g is THEIRS:
            await foo.aupdate_state(cfg(), {"a": "3"})
            items = [i async for i in foo.astream({"a": "1"}, cfg())]
        else:
            await foo.update_state("1", {"a": "3"})
            items = [i async for i in foo.stream({"a": "1"}, thread_id="1")]
        assert items == [{"foo": {"current": {"a": "1"}, "previous": {"a": "3"}}}]
        assert states == [{"a": "-1"}, outs[0], outs[1], {"a": "3"}]
        seen.append(outs)
    assert seen[0] == seen[1]


def counted(g: Any, checkpointer: Checkpointer, previous_: list[Any]) -> Any:
    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def foo(msg: str, *, previous: Any) -> g.entrypoint.final[int, list[str]]:
        previous_.append(previous)
        previous = previous or []
        return g.entrypoint.final(value=len(previous), save=[*previous, msg])

    return foo


async def test_an_entrypoint_returns_one_value_and_saves_another(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_entrypoint_with_return_and_save (without its JSON
    # schema: docs/graph.md, "What it does not do")
    for g in (OURS, THEIRS):
        previous_: list[Any] = []
        foo = counted(g, checkpointer, previous_)
        outs = [await foo.ainvoke(m, cfg()) for m in ("hello", "goodbye", "definitely")]
        assert outs == [0, 1, 2]
        assert previous_ == [None, ["hello"], ["hello", "goodbye"]]


def sub_entrypoints(g: Any, checkpointer: Checkpointer) -> tuple[Any, Any]:
    @g.entrypoint()
    def add(inputs: Any) -> Any:
        a, b = inputs
        return a + b

    @g.task
    def multiply_task(a: int, b: int) -> int:
        return a * b

    @g.entrypoint()
    def multiply(inputs: Any) -> Any:
        return multiply_task(*inputs).result()

    @g.task
    def call_same_subgraph(a: int, b: int) -> Any:
        return add.invoke([add.invoke([a, b]), 10])

    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def parent_call_same_subgraph(inputs: Any) -> Any:
        return call_same_subgraph(*inputs).result()

    @g.task
    def call_multiple_subgraphs(a: int, b: int) -> Any:
        return [add.invoke([a, b]), multiply.invoke([a, b])]

    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def parent_call_multiple_subgraphs(inputs: Any) -> Any:
        return call_multiple_subgraphs(*inputs).result()

    return parent_call_same_subgraph, parent_call_multiple_subgraphs


async def test_a_task_invokes_entrypoints(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_multiple_subgraphs_functional
    for g in (OURS, THEIRS):
        same, multiple = sub_entrypoints(g, checkpointer)
        assert await same.ainvoke([2, 3], cfg("1")) == 15
        assert await multiple.ainvoke([2, 3], cfg("2")) == [5, 6]


class AB(TypedDict):
    a: int
    b: int


class ResultOnly(TypedDict):
    result: int


def sub_state_graphs(g: Any, checkpointer: Checkpointer) -> tuple[Any, Any]:
    def made(name: str, op: Any) -> Any:
        def node(state: Any) -> dict[str, Any]:
            return {"result": op(state["a"], state["b"])}

        graph = g.StateGraph(AB, output_schema=ResultOnly).add_node(name, node)
        return graph.add_edge(g.START, name).compile()

    add_subgraph = made("add", operator.add)
    multiply_subgraph = made("multiply", operator.mul)

    def invoke(graph: Any, item: dict[str, Any]) -> int:
        out = graph.invoke(item) if g is THEIRS else graph.run_sync(item).raise_for_status().state
        result: int = out["result"]
        return result

    @g.task
    def call_same_subgraph(a: int, b: int) -> int:
        return invoke(add_subgraph, {"a": invoke(add_subgraph, {"a": a, "b": b}), "b": 10})

    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def parent_call_same_subgraph(inputs: Any) -> Any:
        return call_same_subgraph(*inputs).result()

    @g.task
    def call_multiple_subgraphs(a: int, b: int) -> list[int]:
        item = {"a": a, "b": b}
        return [invoke(add_subgraph, item), invoke(multiply_subgraph, item)]

    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def parent_call_multiple_subgraphs(inputs: Any) -> Any:
        return call_multiple_subgraphs(*inputs).result()

    return parent_call_same_subgraph, parent_call_multiple_subgraphs


async def test_a_task_runs_state_graphs(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_multiple_subgraphs_mixed_entrypoint (``invoke`` is
    # our ``run_sync``)
    for g in (OURS, THEIRS):
        same, multiple = sub_state_graphs(g, checkpointer)
        assert await same.ainvoke([2, 3], cfg("1")) == 15
        assert await multiple.ainvoke([2, 3], cfg("2")) == [5, 6]


def ordered(g: Any, checkpointer: Checkpointer) -> Any:
    @g.task()
    def foo(state: dict[str, Any]) -> tuple[str, str]:
        return state["a"] + "foo", "bar"

    @g.task
    def bar(a: str, b: str, c: str | None = None) -> dict[str, Any]:
        return {"a": a + b, "c": (c or "") + "bark"}

    @g.task
    def baz(state: dict[str, Any]) -> dict[str, Any]:
        return {"a": state["a"] + "baz", "c": "something else"}

    @g.entrypoint(checkpointer=saver(g, checkpointer))
    def graph(state: dict[str, Any]) -> dict[str, Any]:
        fut_foo = foo(state)
        fut_bar = bar(*fut_foo.result())
        fut_baz = baz(fut_bar.result())
        return fut_baz.result()

    return graph


async def test_task_updates_stream_in_call_order(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_imp_stream_order
    theirs = ordered(THEIRS, checkpointer)
    ours = ordered(OURS, checkpointer)
    theirs_items = [c async for c in theirs.astream({"a": "0"}, cfg())]
    ours_items = [c async for c in ours.stream({"a": "0"}, thread_id="1")]
    assert (
        ours_items
        == theirs_items
        == [
            {"foo": ("0foo", "bar")},
            {"bar": {"a": "0foobar", "c": "bark"}},
            {"baz": {"a": "0foobarbaz", "c": "something else"}},
            {"graph": {"a": "0foobarbaz", "c": "something else"}},
        ]
    )
    theirs_values = (await theirs.aget_state(cfg())).values
    assert (await ours.get_state("1")).values == theirs_values
    assert theirs_values == {"a": "0foobarbaz", "c": "something else"}


class Sums(TypedDict, total=False):
    a: int
    b: int
    result: int


def entrypoints_in_nodes(g: Any, checkpointer: Checkpointer) -> Any:
    @g.entrypoint()
    def add(inputs: Any) -> Any:
        a, b = inputs
        return a + b

    @g.task
    def multiply_task(a: int, b: int) -> int:
        return a * b

    @g.entrypoint()
    def multiply(inputs: Any) -> Any:
        return multiply_task(*inputs).result()

    def call_subgraphs(state: Any) -> dict[str, Any]:
        added = add.invoke([add.invoke([state["a"], state["b"]]), 10])
        return {"result": added + multiply.invoke([state["a"], state["b"]])}

    # a sync node with a timeout runs on a thread of its own (docs/graph.md, "Nodes": one
    # without is called inline on the loop, where invoke() is a SyncInAsyncError)
    timeout = {} if g is THEIRS else {"timeout": 60}
    graph = g.StateGraph(Sums).add_node("call_subgraphs", call_subgraphs, **timeout)
    graph.add_edge(g.START, "call_subgraphs")
    return graph.compile(checkpointer=saver(g, checkpointer))


async def test_a_node_invokes_entrypoints(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_multiple_subgraphs_mixed_state_graph
    ours = entrypoints_in_nodes(OURS, checkpointer)
    theirs = entrypoints_in_nodes(THEIRS, checkpointer)
    out = await theirs.ainvoke({"a": 2, "b": 3}, cfg())
    result = (await ours.run({"a": 2, "b": 3}, thread_id="1")).raise_for_status()
    assert result.state == out == {"a": 2, "b": 3, "result": 21}


def two_slow(g: Any, first_seen: threading.Event, waited: list[bool]) -> Any:
    @g.task()
    def slow() -> dict[str, Any]:
        if waited or first_seen.is_set():  # the second call: the first's update was read
            waited.append(first_seen.wait(30))
        else:
            waited.append(False)
        return {"n": len(waited)}

    @g.entrypoint()
    def graph(inputs: dict[str, Any]) -> list[Any]:
        first = slow().result()
        second = slow().result()
        return [first, second]

    return graph


async def test_a_task_update_is_streamed_before_the_next_task_runs() -> None:
    # LangGraph: test_pregel.py::test_sync_streaming_with_functional_api, without its clock:
    # the second task waits until the reader has the first task's update
    for g in (OURS, THEIRS):
        first_seen = threading.Event()
        waited: list[bool] = []
        graph = two_slow(g, first_seen, waited)
        items = []
        stream = graph.astream({}) if g is THEIRS else graph.stream({})
        async for chunk in stream:
            items.append(chunk)
            if "slow" in chunk:
                first_seen.set()
        assert waited == [False, True]
        assert items == [{"slow": {"n": 1}}, {"slow": {"n": 2}}, {"graph": [{"n": 1}, {"n": 2}]}]


def test_entrypoint_final_takes_two_types() -> None:
    # LangGraph: test_pregel.py::test_entrypoint_output_schema_with_return_and_save (its
    # TypeError; the JSON schemas are not offered here)
    for g in (OURS, THEIRS):
        with pytest.raises(TypeError):
            g.entrypoint.final[int]
        assert g.entrypoint.final[str, int] is not None
        assert g.entrypoint.final(value="foo", save=1).save == 1


# -- a node's name from its function (test_state.py) -----------------------------------------


class Callable_:
    def __call__(self, state: Any) -> dict[str, Any]:
        return {"log": ["called"]}

    def class_method(self, state: Any) -> dict[str, Any]:
        return {"log": ["method"]}


async def test_a_nodes_name_from_its_function() -> None:
    # LangGraph: test_state.py::test__get_node_name, by add_node(fn) and a run
    def func(state: Any) -> dict[str, Any]:
        return {"log": ["func"]}

    def named(g: Any) -> Any:
        graph = g.StateGraph(Log)
        for fn in (lambda state: {"log": ["lambda"]}, func, Callable_(), Callable_().class_method):
            graph.add_node(fn)
        graph.add_edge(g.START, "<lambda>").add_edge("<lambda>", "func")
        graph.add_edge("func", "Callable_").add_edge("Callable_", "class_method")
        return graph

    ours, theirs = pair(named, None)
    assert list(named(OURS).nodes) == list(named(THEIRS).nodes)
    assert list(named(THEIRS).nodes) == ["<lambda>", "func", "Callable_", "class_method"]
    out = await theirs.ainvoke({"log": []})
    result = (await ours.run({"log": []})).raise_for_status()
    assert result.state == out == {"log": ["lambda", "func", "called", "method"]}


class NamedNode:
    """A callable object that names itself (``__name__`` on the instance)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = name

    def __call__(self, state: Any) -> dict[str, Any]:
        return {"log": [self.name]}


async def test_a_callable_objects_own_name_names_its_node(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py::test_checkpointer_null_pending_writes (on a field:
    # a bare-value state is a documented difference; its checkpointer without pending
    # writes is LangGraph's own), each run adding to the thread's log
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log)
        graph.add_node(NamedNode("1"))
        return graph.add_edge(g.START, "1")

    ours, theirs = pair(build, checkpointer)
    assert list(build(OURS).nodes) == list(build(THEIRS).nodes) == ["1"]
    for n in range(1, 5):
        out = await theirs.ainvoke({"log": []}, cfg())
        result = (await ours.run({"log": []}, thread_id="1")).raise_for_status()
        assert result.state == out == {"log": ["1"] * n}


# -- one compiled graph run by many callers at once (test_pregel.py) -------------------------


class Counter(TypedDict):
    counter: Annotated[int, operator.add]


def ten_threads(g: Any) -> list[Any]:
    """``g``'s graph of one node run from ten threads at once: their results."""
    together = threading.Barrier(10, timeout=60)

    def slow_node(state: Any) -> dict[str, Any]:
        together.wait()
        return {"counter": 1}

    # ours on a thread of its own (a timeout), as LangGraph's sync nodes run
    kw: dict[str, Any] = {} if g is THEIRS else {"timeout": 120}
    graph = g.StateGraph(Counter).add_node("node", slow_node, **kw)
    graph = graph.add_edge(g.START, "node").compile()
    results: list[Any] = []

    def run_graph() -> None:
        if g is THEIRS:
            results.append(graph.invoke({"counter": 0}))
        else:
            results.append(graph.run_sync({"counter": 0}).raise_for_status().state)

    threads = [threading.Thread(target=run_graph) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_one_graph_run_from_ten_threads_at_once() -> None:
    # LangGraph: test_pregel.py::test_concurrent_execution_thread_safety (the ten runs held
    # together by a barrier rather than a sleep)
    assert ten_threads(OURS) == ten_threads(THEIRS) == [{"counter": 1}] * 10


async def ten_at_once(g: Any) -> list[Any]:
    """``g``'s graph of one async node run ten times at once: their results."""
    started: list[int] = []
    all_in = asyncio.Event()

    async def slow_node(state: Any) -> dict[str, Any]:
        started.append(1)
        if len(started) == 10:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 60)
        return {"counter": 1}

    graph = g.StateGraph(Counter).add_node("node", slow_node)
    graph = graph.add_edge(g.START, "node").compile()

    async def run_graph() -> Any:
        if g is THEIRS:
            return await graph.ainvoke({"counter": 0})
        return (await graph.run({"counter": 0})).raise_for_status().state

    return list(await asyncio.gather(*(run_graph() for _ in range(10))))


async def test_one_graph_run_ten_times_at_once() -> None:
    # LangGraph: test_pregel_async.py::test_concurrent_execution (an event rather than a
    # sleep holds the ten runs together)
    assert await ten_at_once(OURS) == await ten_at_once(THEIRS) == [{"counter": 1}] * 10


async def no_saver(g: Any) -> list[Any]:
    """An entrypoint without checkpointer run once, one with ``previous`` twice on a thread
    id: what each saw."""
    states: list[Any] = []

    @g.entrypoint()
    def echo(inputs: Any) -> Any:
        states.append(inputs)
        return inputs

    assert await echo.ainvoke({"a": "1"}, cfg()) == {"a": "1"}

    @g.entrypoint()
    def foo(inputs: Any, *, previous: Any) -> Any:
        states.append(previous)
        return {"previous": previous, "current": inputs}

    for _ in range(2):  # a thread id, but nothing saved: no previous either time
        assert await foo.ainvoke({"a": "1"}, cfg()) == {"current": {"a": "1"}, "previous": None}
    return states


async def test_an_entrypoint_without_checkpointer_has_no_previous() -> None:
    # LangGraph: test_pregel.py::test_entrypoint_without_checkpointer
    assert await no_saver(OURS) == await no_saver(THEIRS) == [{"a": "1"}, None, None]
