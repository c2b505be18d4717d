"""Ports of LangGraph's tests, fourth round (``libs/langgraph/tests/test_pregel.py``,
``test_pregel_async.py``, ``test_time_travel.py`` and ``test_time_travel_async.py``): the same
program on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.
Each test's comment names the LangGraph test it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

import asyncio
import enum
import operator
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_memory, pair, values
from pydantic import BaseModel, Field, field_validator, model_validator
from typing_extensions import TypedDict as ExtTypedDict

from tinyagents.errors import InvalidUpdateError
from tinyagents.store.checkpoint import Checkpointer


class Value(TypedDict):
    value: Annotated[list[str], operator.add]


# -- time travel with a sub-graph (test_time_travel.py) --------------------------------------


def sub_flow(g: Any, called: list[str]) -> Any:
    """router → subgraph_node (step_a → ask_human → step_b) → post_process."""

    def node(name: str, value: str) -> Any:
        def _node(state: Any) -> dict[str, Any]:
            called.append(name)
            return {"value": [value]}

        return _node

    sub = _sub(g, called)
    return (
        g.StateGraph(Value)
        .add_node("router", node("router", "routed"))
        .add_node("subgraph_node", sub)
        .add_node("post_process", node("post_process", "post"))
        .add_edge(g.START, "router")
        .add_edge("router", "subgraph_node")
        .add_edge("subgraph_node", "post_process")
    )


async def test_a_fork_before_a_sub_graph_asks_its_question_again(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_subgraph_interrupt_full_flow_no_sub_checkpointer
    # (and its async twin)
    # docs/graph.md, "Sub-graphs": the sub-graph's output is what it changed, so the parent's
    # "routed" it started from is not appended a second time, as LangGraph's whole output is
    ours_called: list[str] = []
    theirs_called: list[str] = []
    ours = sub_flow(OURS, ours_called).compile(checkpointer=checkpointer)
    theirs = sub_flow(THEIRS, theirs_called).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"value": []}, cfg())
    result = await ours.run({"value": []}, thread_id="1")
    assert "__interrupt__" in out and result.status == "interrupted"
    out = await theirs.ainvoke(THEIRS.Command(resume="original"), cfg())
    result = await ours.run(OURS.Command(resume="original"), thread_id="1")
    assert out["value"] == ["routed", "routed", "sub_a", "human:original", "sub_b", "post"]
    assert result.state["value"] == ["routed", "sub_a", "human:original", "sub_b", "post"]

    theirs_history = [s async for s in theirs.aget_state_history(cfg())]
    theirs_before = [s for s in theirs_history if s.next == ("subgraph_node",)][-1]
    ours_before = [h for h in await ours.history("1") if h.next == ("subgraph_node",)][-1]
    ours_called.clear()
    theirs_called.clear()
    fork = await theirs.aupdate_state(theirs_before.config, {"value": ["forked"]})
    head = await ours.update_state(
        "1", {"value": ["forked"]}, checkpoint_id=ours_before.checkpoint_id
    )
    out = await theirs.ainvoke(None, fork)
    result = await ours.run(None, thread_id="1", checkpoint_id=head)
    assert out["__interrupt__"][0].value == result.interrupts[0].value == "Provide input:"
    assert result.state == values(out) == {"value": ["routed", "forked"]}
    assert ours_called == theirs_called == ["step_a", "ask_human"]

    ours_called.clear()
    theirs_called.clear()
    out = await theirs.ainvoke(THEIRS.Command(resume="new_answer"), fork)
    result = await ours.run(OURS.Command(resume="new_answer"), thread_id="1")
    tail = ["sub_a", "human:new_answer", "sub_b", "post"]
    assert out["value"] == ["routed", "forked", "routed", "forked", *tail]
    assert result.state["value"] == ["routed", "forked", *tail]
    assert ours_called == theirs_called == ["ask_human", "step_b", "post_process"]


def two_questions(g: Any, started: list[Any], observed: list[Any]) -> Any:
    """parent_node → sub_node (step_a asks, then step_b asks), as LangGraph's test."""

    class SubState(TypedDict):
        value: Annotated[list[str], operator.add]

    class ParentState(TypedDict):
        results: Annotated[list[str], operator.add]

    def step(name: str) -> Any:
        def _step(state: Any) -> dict[str, Any]:
            started.append((name, dict(state)))
            answer = g.interrupt(f"question_{name[-1]}")
            observed.append((name, dict(state)))
            return {"value": [f"{name[-1]}:{answer}"]}

        return _step

    sub = (
        g.StateGraph(SubState)
        .add_node("step_a", step("step_a"))
        .add_node("step_b", step("step_b"))
        .add_edge(g.START, "step_a")
        .add_edge("step_a", "step_b")
        .compile()
    )
    return (
        g.StateGraph(ParentState)
        .add_node("parent_node", lambda state: {"results": ["p"]})
        .add_node("sub_node", sub)
        .add_edge(g.START, "parent_node")
        .add_edge("parent_node", "sub_node")
    )


async def test_a_stateless_sub_graph_starts_afresh_on_a_replay(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_stateless_subgraph_starts_fresh_on_parent_replay
    # (and its async twin)
    seen: dict[str, tuple[list[Any], list[Any]]] = {"ours": ([], []), "theirs": ([], [])}
    ours = two_questions(OURS, *seen["ours"]).compile(checkpointer=checkpointer)
    theirs = two_questions(THEIRS, *seen["theirs"]).compile(checkpointer=lg_memory.InMemorySaver())
    for turn in ("1", "2"):
        for lib in seen.values():
            lib[1].clear()
        await theirs.ainvoke({"results": []}, cfg())
        await ours.run({"results": []}, thread_id="1")
        for answer in ("a", "b"):
            out = await theirs.ainvoke(THEIRS.Command(resume=answer + turn), cfg())
            result = await ours.run(OURS.Command(resume=answer + turn), thread_id="1")
            assert result.state == values(out)
        expected = [("step_a", {"value": []}), ("step_b", {"value": [f"a:a{turn}"]})]
        assert seen["ours"][1] == seen["theirs"][1] == expected

    theirs_history = [s async for s in theirs.aget_state_history(cfg())]
    theirs_before = next(s for s in theirs_history if s.next == ("sub_node",))
    ours_before = next(h for h in await ours.history("1") if h.next == ("sub_node",))
    for lib in seen.values():
        lib[0].clear()
    out = await theirs.ainvoke(None, theirs_before.config)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_before.checkpoint_id)
    assert "__interrupt__" in out and result.status == "interrupted"
    assert result.state == values(out)
    assert seen["ours"][0] == seen["theirs"][0] == [("step_a", {"value": []})]


async def test_resuming_a_sub_graph_naming_the_head_goes_on_from_its_question(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_subgraph_interrupt_resume_with_explicit_head_
    # checkpoint_id (its sub-graph compiled with checkpointer=True; the resume is the same
    # without it)
    called: dict[str, list[str]] = {"ours": [], "theirs": []}
    ours_calls, theirs_calls = called["ours"], called["theirs"]
    ours_sub = _sub(OURS, ours_calls)
    theirs_sub = _sub(THEIRS, theirs_calls)
    ours = (
        OURS.StateGraph(Value)
        .add_node("subgraph_node", ours_sub)
        .add_edge(OURS.START, "subgraph_node")
        .compile(checkpointer=checkpointer)
    )
    theirs = (
        THEIRS.StateGraph(Value)
        .add_node("subgraph_node", theirs_sub)
        .add_edge(THEIRS.START, "subgraph_node")
        .compile(checkpointer=lg_memory.InMemorySaver())
    )
    await theirs.ainvoke({"value": []}, cfg())
    await ours.run({"value": []}, thread_id="1")
    assert ours_calls == theirs_calls == ["step_a", "ask_human"]
    theirs_head = (await theirs.aget_state(cfg())).config["configurable"]["checkpoint_id"]
    ours_head = (await ours.get_state("1")).checkpoint_id
    ours_calls.clear()
    theirs_calls.clear()
    out = await theirs.ainvoke(
        THEIRS.Command(resume="answer"), cfg(checkpoint_id=theirs_head, checkpoint_ns="")
    )
    result = await ours.run(OURS.Command(resume="answer"), thread_id="1", checkpoint_id=ours_head)
    assert ours_calls == theirs_calls == ["ask_human", "step_b"]
    assert result.status == "completed" and "__interrupt__" not in out
    # docs/graph.md, "Sub-graphs": the sub-graph gives back what it changed (LangGraph's
    # whole output, appended to the same values it started from, is the same here: none)
    assert result.state == out == {"value": ["sub_a", "human:answer", "sub_b"]}


def _sub(g: Any, called: list[str]) -> Any:
    def node(name: str, value: str, ask: bool = False) -> Any:
        def _node(state: Any) -> dict[str, Any]:
            called.append(name)
            if ask:
                return {"value": [f"human:{g.interrupt('Provide input:')}"]}
            return {"value": [value]}

        return _node

    return (
        g.StateGraph(Value)
        .add_node("step_a", node("step_a", "sub_a"))
        .add_node("ask_human", node("ask_human", "", ask=True))
        .add_node("step_b", node("step_b", "sub_b"))
        .add_edge(g.START, "step_a")
        .add_edge("step_a", "ask_human")
        .add_edge("ask_human", "step_b")
        .compile()
    )


# -- routing ---------------------------------------------------------------------------------


class Query(TypedDict, total=False):
    query: str


def no_path_map(g: Any) -> Any:
    def choose_analyzer(data: Any) -> str:
        return "analyzer"

    workflow = g.StateGraph(Query)
    workflow.add_node("rewriter", lambda data: {"query": f"query: {data['query']}"})
    workflow.add_node("analyzer", lambda data: {"query": f"analyzed: {data['query']}"})
    workflow.add_conditional_edges("rewriter", choose_analyzer)
    workflow.set_entry_point("rewriter")
    return workflow


async def test_a_router_without_a_path_map_or_annotation() -> None:
    # LangGraph: test_pregel.py::test_function_in_conditional_edges_with_no_path_map
    ours, theirs = pair(no_path_map, None)
    out = await theirs.ainvoke({"query": "what is weather in sf"})
    result = await ours.run({"query": "what is weather in sf"})
    assert result.state == out == {"query": "analyzed: query: what is weather in sf"}


# -- update_state(None, as_node="__copy__"): a fork with nothing changed ----------------------


def ask_between(g: Any, called: list[str]) -> Any:
    def node_a(state: Any) -> dict[str, Any]:
        called.append("node_a")
        return {"value": ["a"]}

    def ask_human(state: Any) -> dict[str, Any]:
        called.append("ask_human")
        return {"value": [f"human:{g.interrupt('What is your input?')}"]}

    def node_b(state: Any) -> dict[str, Any]:
        called.append("node_b")
        return {"value": ["b"]}

    return (
        g.StateGraph(Value)
        .add_node("node_a", node_a)
        .add_node("ask_human", ask_human)
        .add_node("node_b", node_b)
        .add_edge(g.START, "node_a")
        .add_edge("node_a", "ask_human")
        .add_edge("ask_human", "node_b")
    )


async def history_of(ours: Any, theirs: Any) -> tuple[list[Any], list[Any]]:
    """Each library's history as (source, step, next), newest first; our ``rewind`` is
    LangGraph's ``fork``."""
    theirs_h = [
        (s.metadata["source"], s.metadata["step"], s.next)
        async for s in theirs.aget_state_history(cfg())
    ]
    ours_h = [
        ("fork" if h.source == "rewind" else h.source, h.step, h.next)
        for h in await ours.history("1")
    ]
    return ours_h, theirs_h


async def test_a_copy_of_a_checkpoint_before_a_question_asks_it_again(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_copy_fork_retriggers_interrupt (and its async twin)
    ours_called: list[str] = []
    theirs_called: list[str] = []
    ours = ask_between(OURS, ours_called).compile(checkpointer=checkpointer)
    theirs = ask_between(THEIRS, theirs_called).compile(checkpointer=lg_memory.InMemorySaver())
    await theirs.ainvoke({"value": []}, cfg())
    await theirs.ainvoke(THEIRS.Command(resume="hello"), cfg())
    await ours.run({"value": []}, thread_id="1")
    await ours.run(OURS.Command(resume="hello"), thread_id="1")

    theirs_before = [s async for s in theirs.aget_state_history(cfg())]
    theirs_before = [s for s in theirs_before if s.next == ("ask_human",)][-1]
    ours_before = [h for h in await ours.history("1") if h.next == ("ask_human",)][-1]
    ours_called.clear()
    theirs_called.clear()
    fork = await theirs.aupdate_state(theirs_before.config, None, as_node="__copy__")
    head = await ours.update_state(
        "1", None, as_node="__copy__", checkpoint_id=ours_before.checkpoint_id
    )
    copied = await theirs.aget_state(fork)
    state = await ours.get_state("1")
    assert state.checkpoint_id == head
    assert state.values == copied.values == {"value": ["a"]}
    assert state.next == copied.next == ("ask_human",)
    assert (state.source, copied.metadata["source"]) == ("rewind", "fork")
    assert state.step == copied.metadata["step"] == 2

    out = await theirs.ainvoke(None, fork)
    result = await ours.run(None, thread_id="1", checkpoint_id=head)
    assert out["__interrupt__"][0].value == result.interrupts[0].value == "What is your input?"
    out = await theirs.ainvoke(THEIRS.Command(resume="new_answer"), fork)
    result = await ours.run(OURS.Command(resume="new_answer"), thread_id="1")
    assert result.state == out == {"value": ["a", "human:new_answer", "b"]}
    assert ours_called == theirs_called == ["ask_human", "ask_human", "node_b"]
    ours_h, theirs_h = await history_of(ours, theirs)
    assert ours_h == theirs_h


def a_then_b(g: Any) -> Any:
    return (
        g.StateGraph(Value)
        .add_node("node_a", lambda state: {"value": ["a"]})
        .add_node("node_b", lambda state: {"value": ["b"]})
        .add_edge(g.START, "node_a")
        .add_edge("node_a", "node_b")
    )


async def test_a_copy_is_a_fork_and_an_update_an_update(checkpointer: Checkpointer) -> None:
    # LangGraph: test_time_travel.py::test_copy_fork_creates_sibling_checkpoint (and its
    # async twin). Ours keeps one line of history: the copy becomes the head (docs/graph.md,
    # "Checkpointers"), as an update at a past checkpoint does
    ours, theirs = pair(a_then_b, checkpointer)
    await theirs.ainvoke({"value": []}, cfg())
    await ours.run({"value": []}, thread_id="1")
    theirs_before = [s async for s in theirs.aget_state_history(cfg())]
    theirs_before = next(s for s in theirs_before if s.next == ("node_b",))
    ours_before = next(h for h in await ours.history("1") if h.next == ("node_b",))

    copy = await theirs.aupdate_state(theirs_before.config, None, as_node="__copy__")
    assert (await theirs.aget_state(copy)).metadata["source"] == "fork"
    head = await ours.update_state(
        "1", None, as_node="__copy__", checkpoint_id=ours_before.checkpoint_id
    )
    assert (await ours.get_state("1", head)).source == "rewind"

    update = await theirs.aupdate_state(theirs_before.config, {"value": ["x"]})
    assert (await theirs.aget_state(update)).metadata["source"] == "update"
    head = await ours.update_state("1", {"value": ["x"]}, checkpoint_id=ours_before.checkpoint_id)
    assert (await ours.get_state("1", head)).source == "update"
    assert (await ours.get_state("1")).values == {"value": ["a", "x"]}


async def test_a_copy_takes_no_update_and_needs_a_checkpoint(checkpointer: Checkpointer) -> None:
    # LangGraph: StateGraph.update_state's "__copy__" branch ("Cannot copy a non-existent
    # checkpoint"); ours also refuses an update with it, which LangGraph's drops unread
    ours = a_then_b(OURS).compile(checkpointer=checkpointer)
    with pytest.raises(InvalidUpdateError, match="non-existent checkpoint"):
        await ours.update_state("1", None, as_node="__copy__")
    await ours.run({"value": []}, thread_id="1")
    with pytest.raises(InvalidUpdateError, match="copies a checkpoint as it is"):
        await ours.update_state("1", {"value": ["x"]}, as_node="__copy__")
    head = await ours.get_state("1")
    # a copy of the head: the same values, saved as a checkpoint of its own
    copy = await ours.update_state("1", None, as_node="__copy__")
    state = await ours.get_state("1")
    assert copy != head.checkpoint_id and state.checkpoint_id == copy
    assert (state.values, state.next, state.source) == (head.values, (), "rewind")


# -- a step's writes, in task order ----------------------------------------------------------


class Results(TypedDict):
    results: Annotated[list[str], operator.add]


def slow_and_fast(g: Any, order: list[str]) -> Any:
    """Two nodes after START: ``fast`` finishes last (it waits for ``slow`` to finish)."""
    slow_done = asyncio.Event()

    async def slow_node(state: Any) -> dict[str, Any]:
        order.append("slow")
        slow_done.set()
        return {"results": ["slow"]}

    async def fast_node(state: Any) -> dict[str, Any]:
        await slow_done.wait()
        order.append("fast")
        return {"results": ["fast"]}

    builder = g.StateGraph(Results)
    builder.add_node("slow", slow_node)
    builder.add_node("fast", fast_node)
    builder.add_edge(g.START, "slow")
    builder.add_edge(g.START, "fast")
    return builder


async def test_parallel_nodes_write_in_task_order_not_as_they_finish() -> None:
    # LangGraph: test_pregel.py::test_parallel_node_execution and its async twin (without
    # their timing: "Fast node result should be available first", fast being the one that
    # sleeps longer; the step's writes go through the reducer in task order)
    ours_order: list[str] = []
    theirs_order: list[str] = []
    ours = slow_and_fast(OURS, ours_order).compile()
    theirs = slow_and_fast(THEIRS, theirs_order).compile()
    out = await asyncio.wait_for(theirs.ainvoke({"results": []}), 60)
    result = await asyncio.wait_for(ours.run({"results": []}), 60)
    assert ours_order == theirs_order == ["slow", "fast"]
    assert result.state == out == {"results": ["fast", "slow"]}


# -- pydantic state --------------------------------------------------------------------------


class NestedModel(BaseModel):
    value: int
    name: str
    something: str | None = None


class RecursiveModel(BaseModel):
    value: str
    child: RecursiveModel | None = None


class Cat(BaseModel):
    pet_type: Literal["cat"]
    meow: str


class Dog(BaseModel):
    pet_type: Literal["dog"]
    bark: str


class Person(BaseModel):
    id: str
    name: str
    friends: list[str] = Field(default_factory=list)


class MyEnum(enum.Enum):
    A = 1
    B = 2


class MyTypedDict(ExtTypedDict):
    x: int
    my_enum: MyEnum


def _append(x: Any, y: Any) -> Any:
    return (x or []) + [y]


class Nested(BaseModel):
    top_level: str
    nested: NestedModel
    optional_nested: NestedModel | None = None
    dict_nested: dict[str, NestedModel]
    my_set: set[int]
    another_set: set  # type: ignore[type-arg]
    my_enum: MyEnum
    list_nested: Annotated[dict | list[dict[str, NestedModel]], _append]  # type: ignore[type-arg]
    list_nested_reversed: Annotated[
        list[dict[str, NestedModel]] | NestedModel | dict | list,  # type: ignore[type-arg]
        _append,
    ]
    tuple_nested: tuple[str, NestedModel]
    tuple_list_nested: list[tuple[int, NestedModel]]
    complex_tuple: tuple[str, dict[str, tuple[int, NestedModel]]]
    my_typed_dict: MyTypedDict
    recursive: RecursiveModel
    pet: Cat | Dog
    people: dict[str, Person]


NESTED_INPUT: dict[str, Any] = {
    "top_level": "initial",
    "nested": {"value": 42, "name": "test"},
    "optional_nested": {"value": 10, "name": "optional"},
    "my_set": [1, 2, 7],
    "another_set": ["foo", 3],
    "my_enum": MyEnum.B,
    "my_typed_dict": {"x": 1, "my_enum": MyEnum.A},
    "dict_nested": {"a": {"value": 5, "name": "a"}},
    "list_nested": [{"a": {"value": 6, "name": "b"}}],
    "list_nested_reversed": ["foo", "bar"],
    "tuple_nested": ["tuple-key", {"value": 7, "name": "tuple-value"}],
    "tuple_list_nested": [[1, {"value": 8, "name": "tuple-in-list"}]],
    "complex_tuple": ["complex", {"nested": [9, {"value": 10, "name": "deep"}]}],
    "recursive": {"value": "parent", "child": {"value": "child", "child": None}},
    "pet": {"pet_type": "cat", "meow": "meow!"},
    "people": {
        "1": {"id": "1", "name": "Alice", "friends": ["2", "3"]},
        "2": {"id": "2", "name": "Bob", "friends": ["1"]},
        "3": {"id": "3", "name": "Charlie", "friends": ["1", "2"]},
    },
}


async def test_nested_pydantic_models_in_the_state() -> None:
    # LangGraph: test_pregel_async.py::test_nested_pydantic_models
    update = {"top_level": "updated", "nested": {"value": 100, "name": "updated"}}
    seen: list[bool] = []

    def build(g: Any) -> Any:
        async def node_fn(state: Nested) -> dict[str, Any]:
            seen.append(state == Nested(**NESTED_INPUT))
            return update

        builder = g.StateGraph(Nested)
        builder.add_node("process", node_fn)
        builder.set_entry_point("process")
        builder.set_finish_point("process")
        return builder

    ours, theirs = pair(build, None)
    out = await theirs.ainvoke(dict(NESTED_INPUT))
    result = await ours.run(dict(NESTED_INPUT))
    assert seen == [True, True]
    assert out == {**NESTED_INPUT, **update}
    # docs/graph.md, "State": input to a pydantic state is saved as its field's type reads
    # it (LangGraph's as given); a node's write is kept as written, in either library
    assert result.state.keys() == out.keys()
    assert Nested.model_validate(result.state) == Nested.model_validate(out)
    assert (result.state["my_set"], out["my_set"]) == ({1, 2, 7}, [1, 2, 7])
    assert result.state["pet"] == Cat(pet_type="cat", meow="meow!")
    assert result.state["nested"] == out["nested"] == update["nested"]


async def test_a_replay_of_the_checkpoint_a_sub_graph_asked_at_then_a_new_answer(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_subgraph_interrupt_replay_from_parent_then_resume
    # (its sub-graph compiled with checkpointer=True; the flow is the same without it). Our
    # history is one line: the replay's rewind follows the old head (LangGraph's fork
    # branches off the checkpoint replayed), so both list the same checkpoints in one order
    ours_called: list[str] = []
    theirs_called: list[str] = []
    ours = sub_flow(OURS, ours_called).compile(checkpointer=checkpointer)
    theirs = sub_flow(THEIRS, theirs_called).compile(checkpointer=lg_memory.InMemorySaver())
    await theirs.ainvoke({"value": []}, cfg())
    await theirs.ainvoke(THEIRS.Command(resume="old_answer"), cfg())
    await ours.run({"value": []}, thread_id="1")
    await ours.run(OURS.Command(resume="old_answer"), thread_id="1")

    async def sources() -> tuple[list[Any], list[Any]]:
        theirs_h = [(s.metadata["source"], s.next) async for s in theirs.aget_state_history(cfg())]
        ours_h = [
            ("fork" if h.source == "rewind" else h.source, h.next) for h in await ours.history("1")
        ]
        return ours_h, theirs_h

    ours_h, theirs_h = await sources()
    assert ours_h == theirs_h
    assert [n for _, n in theirs_h] == [
        (),
        ("post_process",),
        ("subgraph_node",),
        ("router",),
        ("__start__",),
    ]
    theirs_at = [s async for s in theirs.aget_state_history(cfg())]
    theirs_at = next(s for s in theirs_at if s.next == ("subgraph_node",))
    ours_at = next(h for h in await ours.history("1") if h.next == ("subgraph_node",))

    ours_called.clear()
    theirs_called.clear()
    out = await theirs.ainvoke(None, theirs_at.config)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_at.checkpoint_id)
    assert out["__interrupt__"][0].value == result.interrupts[0].value == "Provide input:"
    assert ours_called == theirs_called == ["step_a", "ask_human"]
    ours_h, theirs_h = await sources()
    assert ours_h == theirs_h
    assert theirs_h[0] == ("fork", ("subgraph_node",))
    fork = await theirs.aget_state(cfg())
    assert (
        fork.parent_config["configurable"]["checkpoint_id"]
        == (theirs_at.config["configurable"]["checkpoint_id"])
    )
    assert (await ours.get_state("1")).metadata["rewound_to"] == ours_at.checkpoint_id

    ours_called.clear()
    theirs_called.clear()
    out = await theirs.ainvoke(THEIRS.Command(resume="new_answer"), cfg())
    result = await ours.run(OURS.Command(resume="new_answer"), thread_id="1")
    assert result.status == "completed" and "__interrupt__" not in out
    assert ours_called == theirs_called == ["ask_human", "step_b", "post_process"]
    # docs/graph.md, "Sub-graphs": ours gives back what the sub-graph changed
    assert out["value"] == ["routed", "routed", "sub_a", "human:new_answer", "sub_b", "post"]
    assert result.state["value"] == ["routed", "sub_a", "human:new_answer", "sub_b", "post"]
    ours_h, theirs_h = await sources()
    assert ours_h == theirs_h
    assert [s for s, _ in theirs_h] == [
        "loop",
        "loop",
        "fork",
        "loop",
        "loop",
        "loop",
        "loop",
        "input",
    ]


# -- replaying a paused update head: no checkpoint of its own --------------------------------


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def done_and_asking(g: Any, calls: list[str]) -> Any:
    """START → ``done`` (writes) and ``ask`` (asks) in one step."""

    def done(state: Any) -> dict[str, Any]:
        calls.append("done")
        return {"log": ["done"]}

    def ask(state: Any) -> dict[str, Any]:
        calls.append("ask")
        return {"log": [g.interrupt("?")]}

    return (
        g.StateGraph(Log)
        .add_node("done", done)
        .add_node("ask", ask)
        .add_edge(g.START, "done")
        .add_edge(g.START, "ask")
    )


def asks_twice(g: Any, calls: list[str]) -> Any:
    """START → ``ask``, which asks two questions in turn."""

    def ask(state: Any) -> dict[str, Any]:
        calls.append("ask")
        return {"log": [g.interrupt("first?"), g.interrupt("second?")]}

    return g.StateGraph(Log).add_node("ask", ask).add_edge(g.START, "ask")


def sub_asks_twice(g: Any, calls: list[str]) -> Any:
    """START → ``sub`` (a sub-graph whose node ``ask`` asks two questions in turn)."""
    return (
        g.StateGraph(Log).add_node("sub", asks_twice(g, calls).compile()).add_edge(g.START, "sub")
    )


@pytest.mark.parametrize(
    ("build", "answers", "called"),
    [
        (done_and_asking, [], (["done"], ["done"])),
        (asks_twice, ["one"], (["ask"], [])),
    ],
    ids=["a-finished-task", "an-answer"],
)
async def test_a_replay_of_a_paused_update_head_holding_more_saves_no_checkpoint(
    checkpointer: Checkpointer,
    build: Any,
    answers: list[str],
    called: tuple[list[str], list[str]],
) -> None:
    # ``called``: the nodes ours runs on the first replay and on the second
    # LangGraph: PregelLoop._first saves no "fork" when it replays an update_state or fork
    # checkpoint ("they already have their own fork checkpoint"): it drops the answers saved
    # there (so the questions ask again, under the same ids) and, replaying, reuses no
    # finished task's write (every task of the step runs again). Ours saved a "rewind" one
    # step past the head when it held a finished task's write or an answer, so the steps
    # after it were numbered one higher than LangGraph's and the questions asked again had
    # new ids
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = build(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = build(THEIRS, theirs_calls).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"log": ["in"]}, cfg())
    result = await ours.run({"log": ["in"]}, thread_id="1")
    # the first questions asked: asked again by the replay under the same ids (ours keeps
    # a paused step's task ids through an update; LangGraph's update gives the tasks new ids,
    # its interrupt ids with them: one per task, the same for each question a task asks)
    asked = [i.id for i in result.interrupts]
    for answer in answers:
        await theirs.ainvoke(THEIRS.Command(resume=answer), cfg())
        await ours.run(OURS.Command(resume=answer), thread_id="1")
    c = await theirs.aupdate_state(cfg(), {"log": ["u"]})
    head = await ours.update_state("1", {"log": ["u"]})
    # docs/graph.md, "Checkpointers": an update while tasks are pending keeps the head's step
    # (their ids hang on it), where LangGraph's is one past it
    before = await history_of(ours, theirs)
    assert before[0][0] == ("update", 0, before[1][0][2])
    assert before[0][1:] == before[1][1:] and before[1][0][:2] == ("update", 1)
    for ours_called in called:  # the second replay replays the same head again
        ours_calls.clear()
        theirs_calls.clear()
        out = await theirs.ainvoke(None, c)
        result = await ours.run(None, thread_id="1", checkpoint_id=head)
        # a task paused on a question with no answer asks it again without running again in
        # ours (its node, or the sub-graph's); LangGraph's runs every task of the step again
        assert sorted(ours_calls) == ours_called
        assert sorted(set(theirs_calls)) == sorted({*ours_called, "ask"})
        assert result.status == "interrupted"
        assert result.state == values(out)
        assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
        assert [i.id for i in result.interrupts] == asked
        assert await history_of(ours, theirs) == before
    out = await theirs.ainvoke(THEIRS.Command(resume="r"), cfg())
    result = await ours.run(OURS.Command(resume="r"), thread_id="1")
    assert result.status == ("interrupted" if "__interrupt__" in out else "completed")
    assert result.state == values(out)


# -- a pydantic state with input and output schemas, a join and a breakpoint ------------------


def sorted_add(x: list[str], y: list[str] | list[tuple[str, str]]) -> list[str]:
    if isinstance(y[0], tuple):
        for rem, _ in y:
            x.remove(rem)
        y = [t[1] for t in y]
    return sorted(operator.add(x, y))


class InnerObject(BaseModel):
    yo: int


class FanState(BaseModel):
    query: str
    inner: Annotated[InnerObject, lambda x, y: y]
    answer: str | None = None
    docs: Annotated[list[str], sorted_add]


class FanUpdate(BaseModel):
    query: str | None = None
    answer: str | None = None
    docs: list[str] | None = None


class UpdateDocs34(BaseModel):
    docs: list[str] = Field(default_factory=lambda: ["doc3", "doc4"])


class FanInput(BaseModel):
    query: str
    inner: InnerObject


class FanOutput(BaseModel):
    answer: str
    docs: list[str]


def pydantic_fan_out(g: Any) -> Any:
    analyzed = asyncio.Event()

    async def rewrite_query(data: FanState) -> Any:
        assert isinstance(data.inner, InnerObject)
        analyzed.clear()
        return {"query": f"query: {data.query}"}

    async def analyzer_one(data: FanState) -> Any:
        assert isinstance(data.inner, InnerObject)
        analyzed.set()
        return FanUpdate(query=f"analyzed: {data.query}")

    async def retriever_one(data: FanState) -> Any:
        return {"docs": ["doc1", "doc2"]}

    async def retriever_two(data: FanState) -> Any:
        await analyzed.wait()  # LangGraph's test sleeps: it finishes after analyzer_one
        return UpdateDocs34()

    async def qa(data: FanState) -> Any:
        return {"answer": ",".join(data.docs)}

    def decider(data: FanState) -> str:
        assert isinstance(data, FanState)
        return "retriever_two"

    workflow = g.StateGraph(FanState, input_schema=FanInput, output_schema=FanOutput)
    workflow.add_node("rewrite_query", rewrite_query)
    workflow.add_node("analyzer_one", analyzer_one)
    workflow.add_node("retriever_one", retriever_one)
    workflow.add_node("retriever_two", retriever_two)
    workflow.add_node("qa", qa)
    workflow.set_entry_point("rewrite_query")
    workflow.add_edge("rewrite_query", "analyzer_one")
    workflow.add_edge("analyzer_one", "retriever_one")
    workflow.add_conditional_edges("rewrite_query", decider, {"retriever_two": "retriever_two"})
    workflow.add_edge(["retriever_one", "retriever_two"], "qa")
    workflow.set_finish_point("qa")
    return workflow


async def test_a_pydantic_fan_out_with_schemas_a_join_and_a_breakpoint(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_in_one_fan_out_state_graph_waiting_edge_custom_state_
    # class_pydantic2 (and its async twin), without the drawing and the JSON schemas
    ours, theirs = pair(pydantic_fan_out, None)
    question = {"query": "what is weather in sf", "inner": {"yo": 1}}
    done = {"docs": ["doc1", "doc2", "doc3", "doc4"], "answer": "doc1,doc2,doc3,doc4"}
    out = await asyncio.wait_for(theirs.ainvoke(dict(question)), 60)
    result = await asyncio.wait_for(ours.run(dict(question)), 60)
    assert result.state == out == done
    steps = [
        {"rewrite_query": {"query": "query: what is weather in sf"}},
        {"analyzer_one": {"query": "analyzed: query: what is weather in sf"}},
        {"retriever_two": {"docs": ["doc3", "doc4"]}},
        {"retriever_one": {"docs": ["doc1", "doc2"]}},
    ]
    theirs_items = [c async for c in theirs.astream(dict(question), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(dict(question), mode="updates")]
    assert ours_items == theirs_items == [*steps, {"qa": {"answer": "doc1,doc2,doc3,doc4"}}]

    ours = pydantic_fan_out(OURS).compile(
        checkpointer=checkpointer, interrupt_after=["retriever_one"]
    )
    theirs = pydantic_fan_out(THEIRS).compile(
        checkpointer=lg_memory.InMemorySaver(), interrupt_after=["retriever_one"]
    )
    theirs_items = [c async for c in theirs.astream(dict(question), cfg(), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(dict(question), thread_id="1", mode="updates")]
    assert ours_items == theirs_items == [*steps, {"__interrupt__": ()}]
    theirs_items = [c async for c in theirs.astream(None, cfg(), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(None, thread_id="1", mode="updates")]
    assert ours_items == theirs_items == [{"qa": {"answer": "doc1,doc2,doc3,doc4"}}]

    await theirs.aupdate_state(cfg(), {"docs": ["doc5"]}, as_node="rewrite_query")
    await ours.update_state("1", {"docs": ["doc5"]}, as_node="rewrite_query")
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.next == theirs_state.next
    # docs/graph.md, "State": input to a pydantic state is saved as its field's type reads
    # it, the inner model (LangGraph's as given, a dict)
    assert theirs_state.values["inner"] == {"yo": 1}
    assert ours_state.values == {**theirs_state.values, "inner": InnerObject(yo=1)}


# -- a failing node cancels the others of its step -------------------------------------------


class Hello(TypedDict):
    hello: str


def one_bad(g: Any, seen: list[str]) -> Any:
    started = asyncio.Event()

    async def awhile(state: Any) -> None:
        seen.append("started")
        started.set()
        try:
            await asyncio.Event().wait()  # never set: only a cancel ends it
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def iambad(state: Any) -> None:
        await started.wait()
        raise ValueError("I am bad")

    builder = g.StateGraph(Hello)
    builder.add_node("agent", awhile)
    builder.add_node("bad", iambad)
    builder.set_conditional_entry_point(lambda _: ["agent", "bad"])
    return builder


async def test_a_failing_node_cancels_the_others_of_its_step() -> None:
    # LangGraph: test_pregel_async.py::test_node_cancellation_on_other_node_exception_two
    # (a router on START without a path map, as there). docs/graph.md, "Running": a failing
    # node gives status="failed" where LangGraph's ainvoke raises
    ours_seen: list[str] = []
    theirs_seen: list[str] = []
    ours = one_bad(OURS, ours_seen).compile()
    theirs = one_bad(THEIRS, theirs_seen).compile()
    with pytest.raises(ValueError, match="I am bad"):
        await asyncio.wait_for(theirs.ainvoke({"hello": "world"}), 60)
    result = await asyncio.wait_for(ours.run({"hello": "world"}), 60)
    assert result.status == "failed"
    with pytest.raises(ValueError, match="I am bad"):
        result.raise_for_status()
    assert ours_seen == theirs_seen == ["started", "cancelled"]


def waits(g: Any, seen: list[str], started: asyncio.Event) -> Any:
    async def awhile(state: Any) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # never set: only a cancel ends it
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    builder = g.StateGraph(Hello)
    builder.add_node("agent", awhile)
    builder.set_entry_point("agent")
    builder.set_finish_point("agent")
    return builder


async def test_cancelling_the_run_cancels_its_running_node(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py::test_node_cancellation_on_external_cancel (cancelled
    # when the node is running rather than after a timeout)
    for lib, kw in ((THEIRS, {}), (OURS, {"thread_id": "1"})):
        seen: list[str] = []
        started = asyncio.Event()
        graph = waits(lib, seen, started)
        if lib is OURS:
            task = asyncio.ensure_future(
                graph.compile(checkpointer=checkpointer).run({"hello": "world"}, **kw)
            )
        else:
            task = asyncio.ensure_future(graph.compile().ainvoke({"hello": "world"}))
        await asyncio.wait_for(started.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 60)
        assert seen == ["cancelled"]


# -- a replay from any past checkpoint runs its nodes again ----------------------------------


class Count(TypedDict):
    n: Annotated[int, operator.add]


def add_one_loop(g: Any, calls: list[int]) -> Any:
    def add_one(state: Any) -> dict[str, Any]:
        calls.append(state["n"])
        return {"n": 1}

    builder = g.StateGraph(Count)
    builder.add_node("add_one", add_one)
    builder.add_edge(g.START, "add_one")
    builder.add_conditional_edges("add_one", lambda s: "add_one" if s["n"] < 6 else g.END)
    return builder


async def test_a_replay_always_runs_the_nodes_again(checkpointer: Checkpointer) -> None:
    # LangGraph: test_large_cases.py::test_fork_always_re_runs_nodes (and its async twin),
    # with a dict state for LangGraph's root int channel
    ours_calls: list[int] = []
    theirs_calls: list[int] = []
    ours = add_one_loop(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = add_one_loop(THEIRS, theirs_calls).compile(checkpointer=lg_memory.InMemorySaver())
    theirs_items = [
        c async for c in theirs.astream({"n": 1}, cfg(), stream_mode=["values", "updates"])
    ]
    ours_items = [c async for c in ours.stream({"n": 1}, thread_id="1", mode=["values", "updates"])]
    assert ours_items == theirs_items
    assert theirs_items[0] == ("values", {"n": 1})
    assert theirs_items[-1] == ("values", {"n": 6})
    assert len(theirs_items) == 11

    theirs_history = [s async for s in theirs.aget_state_history(cfg())]
    ours_history = await ours.history("1")
    assert [(h.source, h.step, h.next) for h in ours_history] == [
        (s.metadata["source"], s.metadata["step"], s.next) for s in theirs_history
    ]
    assert [(await ours.get_state("1", h.checkpoint_id)).values for h in ours_history] == [
        s.values for s in theirs_history
    ]
    for back, runs in ((0, 0), (1, 1), (2, 2)):
        ours_calls.clear()
        theirs_calls.clear()
        theirs_items = [
            c
            async for c in theirs.astream(None, theirs_history[back].config, stream_mode="updates")
        ]
        ours_items = [
            c
            async for c in ours.stream(
                None, thread_id="1", checkpoint_id=ours_history[back].checkpoint_id, mode="updates"
            )
        ]
        assert ours_items == theirs_items == [{"add_one": {"n": 1}}] * runs
        assert ours_calls == theirs_calls


# -- pydantic validators -----------------------------------------------------------------------


class Validated(BaseModel):
    name: str
    text: str = ""
    only_root: int = 13

    @field_validator("name", mode="after")
    @classmethod
    def validate_name(cls, value: str) -> str:
        if value[0].islower():
            raise ValueError("Name must start with a capital letter")
        return "Validated " + value

    @model_validator(mode="before")
    @classmethod
    def validate_amodel(cls, values: Any) -> Any:
        return values | {"only_root": 392}


async def test_a_pydantic_states_validators_run_for_its_nodes() -> None:
    # LangGraph: test_pydantic.py::test_pydantic_state_field_validator
    input_state = {"name": "John"}
    seen: list[bool] = []

    def build(g: Any) -> Any:
        def process_node(state: Validated) -> dict[str, Any]:
            seen.append(Validated.model_validate(input_state) == state)
            return {"text": "Hello, " + state.name + "!"}

        builder = g.StateGraph(state_schema=Validated)
        builder.add_node("process", process_node)
        builder.add_edge(g.START, "process")
        return builder.add_edge("process", g.END)

    ours, theirs = pair(build, None)
    out = await theirs.ainvoke(dict(input_state))
    result = await ours.run(dict(input_state))
    assert out["text"] == result.state["text"] == "Hello, Validated John!"
    assert result.state == out
    assert seen == [True, True]


async def test_a_replay_of_a_paused_update_head_restarts_its_sub_graph(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: PregelLoop._first, as above, for a head whose sub-graph was answered once
    # and asks its second question: LangGraph's update gave the sub-graph's task a new id,
    # so the replay runs the sub-graph afresh in a new namespace, asking its first question
    # again. Ours replays such a head on a "rewind" (new task ids, fresh namespaces), which
    # asks the same; it is the one checkpoint LangGraph does not save
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = sub_asks_twice(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = sub_asks_twice(THEIRS, theirs_calls).compile(checkpointer=lg_memory.InMemorySaver())
    await theirs.ainvoke({"log": ["in"]}, cfg())
    await ours.run({"log": ["in"]}, thread_id="1")
    out = await theirs.ainvoke(THEIRS.Command(resume="one"), cfg())
    result = await ours.run(OURS.Command(resume="one"), thread_id="1")
    assert out["__interrupt__"][0].value == result.interrupts[0].value == "second?"
    c = await theirs.aupdate_state(cfg(), {"log": ["u"]})
    head = await ours.update_state("1", {"log": ["u"]})
    ours_calls.clear()
    theirs_calls.clear()
    out = await theirs.ainvoke(None, c)
    result = await ours.run(None, thread_id="1", checkpoint_id=head)
    assert ours_calls == theirs_calls == ["ask"]
    assert out["__interrupt__"][0].value == result.interrupts[0].value == "first?"
    ours_h, theirs_h = await history_of(ours, theirs)
    assert theirs_h == [
        ("update", 1, ("sub",)),
        ("loop", 0, ("sub",)),
        ("input", -1, ("__start__",)),
    ]
    assert ours_h == [
        ("fork", 1, ("sub",)),
        ("update", 0, ("sub",)),
        ("loop", 0, ("sub",)),
        ("input", -1, ("__start__",)),
    ]
    for answer in ("1", "2"):
        out = await theirs.ainvoke(THEIRS.Command(resume=answer), cfg())
        result = await ours.run(OURS.Command(resume=answer), thread_id="1")
    assert result.status == "completed" and "__interrupt__" not in out
    # docs/graph.md, "Sub-graphs": ours gives back what the sub-graph changed
    assert out == {"log": ["in", "u", "in", "u", "1", "2"]}
    assert result.state == {"log": ["in", "u", "1", "2"]}


# -- one in, a fan-out, one out ----------------------------------------------------------------


class Docs(TypedDict, total=False):
    query: str
    answer: str
    docs: Annotated[list[str], sorted_add]


def fan_out_one(g: Any) -> Any:
    second_done = asyncio.Event()

    async def rewrite_query(data: Any) -> dict[str, Any]:
        second_done.clear()
        return {"query": f"query: {data['query']}"}

    async def retriever_one(data: Any) -> dict[str, Any]:
        await second_done.wait()  # LangGraph's test sleeps: it finishes after retriever_two
        return {"docs": ["doc1", "doc2"]}

    async def retriever_two(data: Any) -> dict[str, Any]:
        second_done.set()
        return {"docs": ["doc3", "doc4"]}

    async def qa(data: Any) -> dict[str, Any]:
        return {"answer": ",".join(data["docs"])}

    workflow = g.StateGraph(Docs)
    workflow.add_node("rewrite_query", rewrite_query)
    workflow.add_node("retriever_one", retriever_one)
    workflow.add_node("retriever_two", retriever_two)
    workflow.add_node("qa", qa)
    workflow.set_entry_point("rewrite_query")
    workflow.add_edge("rewrite_query", "retriever_one")
    workflow.add_edge("rewrite_query", "retriever_two")
    workflow.add_edge("retriever_one", "qa")
    workflow.add_edge("retriever_two", "qa")
    workflow.set_finish_point("qa")
    return workflow


async def test_one_in_a_fan_out_and_one_out() -> None:
    # LangGraph: test_large_cases.py::test_in_one_fan_out_out_one_graph_state (and its async
    # twin), without the debug stream mode (docs/graph.md, "What it does not do (yet)")
    ours, theirs = pair(fan_out_one, None)
    question = {"query": "what is weather in sf"}
    answered = {
        "query": "query: what is weather in sf",
        "docs": ["doc1", "doc2", "doc3", "doc4"],
        "answer": "doc1,doc2,doc3,doc4",
    }
    out = await asyncio.wait_for(theirs.ainvoke(dict(question)), 60)
    result = await asyncio.wait_for(ours.run(dict(question)), 60)
    assert result.state == out == answered
    theirs_items = [c async for c in theirs.astream(dict(question), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(dict(question), mode="updates")]
    assert (
        ours_items
        == theirs_items
        == [
            {"rewrite_query": {"query": "query: what is weather in sf"}},
            {"retriever_two": {"docs": ["doc3", "doc4"]}},
            {"retriever_one": {"docs": ["doc1", "doc2"]}},
            {"qa": {"answer": "doc1,doc2,doc3,doc4"}},
        ]
    )
    theirs_items = [c async for c in theirs.astream(dict(question), stream_mode="values")]
    ours_items = [c async for c in ours.stream(dict(question), mode="values")]
    assert ours_items == theirs_items
    assert theirs_items == [
        {"query": "what is weather in sf", "docs": []},
        {"query": "query: what is weather in sf", "docs": []},
        {"query": "query: what is weather in sf", "docs": ["doc1", "doc2", "doc3", "doc4"]},
        answered,
    ]
    theirs_items = [
        c async for c in theirs.astream(dict(question), stream_mode=["values", "updates"])
    ]
    ours_items = [c async for c in ours.stream(dict(question), mode=["values", "updates"])]
    assert ours_items == theirs_items


# -- run(None) on a step paused on a question ------------------------------------------------


def asks_once(g: Any, calls: list[str]) -> Any:
    """START → 1 → [Send("2", 3), Send("flaky", 4), "3.1"]; 2 → 3. ``flaky`` asks the first
    time it runs only (LangGraph's ``InterruptOnce``), with a dict state for LangGraph's root
    list channel."""

    ticks: list[str] = []  # flaky's calls, which the test does not clear

    def flaky(arg: Any) -> dict[str, Any]:
        calls.append("flaky")
        ticks.append("flaky")
        if len(ticks) == 1:
            g.interrupt("Bahh")
        return {"value": [f"flaky|{arg}"]}

    def node(name: str) -> Any:
        def _node(state: Any) -> dict[str, Any]:
            calls.append(name)
            return {"value": [name if isinstance(state, dict) else f"{name}|{state}"]}

        return _node

    builder = g.StateGraph(Value)
    for name in ("1", "2", "3", "3.1"):
        builder.add_node(name, node(name))
    builder.add_node("flaky", flaky)
    builder.add_edge(g.START, "1").add_edge("2", "3")
    return builder.add_conditional_edges("1", lambda s: [g.Send("2", 3), g.Send("flaky", 4), "3.1"])


async def test_run_none_leaves_a_task_paused_on_a_question_paused(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel_async.py::test_send_dedupe_on_resume (and test_pregel.py's twin):
    # its invoke(None) on the paused thread runs "flaky" again ("node 'flaky' gets called
    # again, as it was interrupted"), which this time asks nothing, and the run completes.
    # docs/graph.md, "Running": a task paused on an unanswered question asks it again
    # without running again in ours (the same question, the same id), where LangGraph's
    # runs it again; the finished tasks of the step run again in neither
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = asks_once(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = asks_once(THEIRS, theirs_calls).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"value": ["0"]}, cfg())
    result = await ours.run({"value": ["0"]}, thread_id="1")
    assert result.status == "interrupted"
    assert result.state == values(out) == {"value": ["0", "1", "3.1", "2|3"]}
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    assert ours_calls == theirs_calls == ["1", "2", "flaky", "3.1"]
    asked = [i.id for i in result.interrupts]

    ours_calls.clear()
    theirs_calls.clear()
    theirs_items = [c async for c in theirs.astream(None, cfg(), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(None, thread_id="1", mode="updates")]
    cached = [
        {"2": {"value": ["2|3"]}, "__metadata__": {"cached": True}},
        {"3.1": {"value": ["3.1"]}, "__metadata__": {"cached": True}},
    ]
    assert theirs_items == [*cached, {"flaky": {"value": ["flaky|4"]}}, {"3": {"value": ["3"]}}]
    assert theirs_calls == ["flaky", "3"]
    assert ours_calls == []
    (question,) = ours_items[len(cached)]["__interrupt__"]
    assert ours_items == [*cached, {"__interrupt__": (question,)}]
    assert (question.id, question.value) == (asked[0], "Bahh")
    snapshot = await ours.get_state("1")
    assert [i.id for i in snapshot.interrupts] == asked
    final = await theirs.aget_state(cfg())

    # answered, it runs again (and asks nothing): the run ends where LangGraph's run(None) did
    result = await ours.run(OURS.Command(resume="ok"), thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == final.values == {"value": ["0", "1", "3.1", "2|3", "flaky|4", "3"]}
    assert ours_calls == theirs_calls == ["flaky", "3"]
