"""Ports of LangGraph's input and output schemas (``StateGraph(State, input_schema=...,
output_schema=...)``; ``libs/langgraph/tests/test_pregel_async.py``: test_input_output_schema,
test_subgraph_with_output_schema, ...): the same program on LangGraph and on
``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend. A difference
docs/graph.md documents is asserted as ours, with a comment naming the section.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_managed, lg_memory, pair, shape, values
from pydantic import BaseModel

from tinyagents.errors import ConfigurationError, InvalidUpdateError
from tinyagents.graph import RemainingSteps
from tinyagents.store.checkpoint import Checkpointer


class Question(TypedDict):
    question: str


class Answer(TypedDict):
    answer: str
    log: Annotated[list[str], operator.add]


class QA(TypedDict, total=False):
    question: str
    answer: str
    scratch: str
    log: Annotated[list[str], operator.add]


def qa_graph(g: Any, seen: list[Any], *, ask: bool = False, **schemas: Any) -> Any:
    """START → think → answer → END over QA, read through ``Question``, answering ``Answer``
    (or the ``schemas`` given); ``think`` notes the state it sees in ``seen`` and, with
    ``ask``, asks a question first."""

    def think(state: Any) -> dict[str, Any]:
        if ask:
            g.interrupt("sure?")
        seen.append(dict(state))
        return {"scratch": f"about {state['question']}", "log": ["think"]}

    def answer(state: Any) -> dict[str, Any]:
        return {"answer": state["scratch"].upper(), "log": ["answer"]}

    io = {"input_schema": Question, "output_schema": Answer, **schemas}
    graph = g.StateGraph(QA, **io).add_node("think", think).add_node("answer", answer)
    return graph.add_edge(g.START, "think").add_edge("think", "answer").add_edge("answer", g.END)


async def test_input_keys_outside_the_input_schema_are_left_out(
    checkpointer: Checkpointer,
) -> None:
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = qa_graph(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = qa_graph(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    given = {"question": "tides", "scratch": "not read", "answer": "not read either"}
    out = await theirs.ainvoke(given, cfg())
    result = await ours.run(given, thread_id="1")
    assert result.status == "completed", result.error
    # the output schema's keys only; the nodes saw the whole state (input keys only at first)
    assert result.state == out == {"answer": "ABOUT TIDES", "log": ["think", "answer"]}
    # the unwritten reducer channel starts at [] (docs/graph.md, "State")
    assert ours_seen == theirs_seen == [{"question": "tides", "log": []}]
    # get_state().values is the whole state on both
    theirs_values = (await theirs.aget_state(cfg())).values
    assert (await ours.get_state("1")).values == theirs_values
    assert theirs_values == {
        "question": "tides",
        "scratch": "about tides",
        "answer": "ABOUT TIDES",
        "log": ["think", "answer"],
    }


async def test_a_key_of_no_schema_is_refused(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: qa_graph(g, []), checkpointer)
    out = await theirs.ainvoke({"question": "tides", "nope": 1}, cfg())
    assert out == {"answer": "ABOUT TIDES", "log": ["think", "answer"]}
    # ours: a key that is no channel of any schema is an InvalidUpdateError naming it, and
    # nothing is saved (docs/graph.md, "State": "A key that is not a field ...")
    with pytest.raises(InvalidUpdateError, match="'nope'"):
        await ours.run({"question": "tides", "nope": 1}, thread_id="1")
    assert (await ours.get_state("1")).checkpoint_id is None


@pytest.mark.parametrize("mode", ["values", "updates"])
async def test_streams_with_an_output_schema(checkpointer: Checkpointer, mode: str) -> None:
    ours, theirs = pair(lambda g: qa_graph(g, []), checkpointer)
    theirs_items = [i async for i in theirs.astream({"question": "q"}, cfg(), stream_mode=mode)]
    ours_items = [i async for i in ours.stream({"question": "q"}, thread_id="1", mode=mode)]
    # the top-level values stream is the whole state on both (LangGraph's stream channels)
    assert ours_items == theirs_items
    if mode == "values":
        assert theirs_items[-1]["scratch"] == "about q"


async def test_pydantic_input_and_output_schemas(checkpointer: Checkpointer) -> None:
    class Asked(BaseModel):
        question: str

    class Answered(BaseModel):
        answer: str

    ours, theirs = pair(
        lambda g: qa_graph(g, [], input_schema=Asked, output_schema=Answered), checkpointer
    )
    # a model instance as input, and a dict output (not an instance) on both
    out = await theirs.ainvoke(Asked(question="tides"), cfg())
    result = await ours.run(Asked(question="tides"), thread_id="1")
    assert result.state == out == {"answer": "ABOUT TIDES"}
    # the input schema does not validate (LangGraph passes 3 through; so do we, the state
    # being a TypedDict)
    out = await theirs.ainvoke({"question": 3}, cfg("2"))
    result = await ours.run({"question": 3}, thread_id="2")
    assert result.state == out == {"answer": "ABOUT 3"}


async def test_an_output_key_never_written_is_absent(checkpointer: Checkpointer) -> None:
    class Report(TypedDict, total=False):
        answer: str
        scratch: str
        missing: str  # not a state key: a channel of its own, never written

    ours, theirs = pair(lambda g: qa_graph(g, [], output_schema=Report), checkpointer)
    out = await theirs.ainvoke({"question": "q"}, cfg())
    result = await ours.run({"question": "q"}, thread_id="1")
    assert result.state == out == {"answer": "ABOUT Q", "scratch": "about q"}


async def test_interrupted_output_holds_the_output_keys(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: qa_graph(g, [], ask=True), checkpointer)
    out = await theirs.ainvoke({"question": "q"}, cfg())
    result = await ours.run({"question": "q"}, thread_id="1")
    assert result.status == "interrupted"
    # the output at an interrupt: the output keys that have a value (none written, but log
    # starts at []) and, on LangGraph's, __interrupt__
    assert result.state == values(out) == {"log": []}
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(OURS.Command(resume="yes"), thread_id="1")
    assert result.state == out == {"answer": "ABOUT Q", "log": ["think", "answer"]}


class Outer(TypedDict, total=False):
    question: str
    answer: str
    scratch: str
    log: Annotated[list[str], operator.add]
    other: str


def outer_graph(g: Any, seen: list[Any], *, ask: bool = False) -> Any:
    """START → pre → sub (a QA graph with input and output schemas) → END."""
    sub = qa_graph(g, seen, ask=ask).compile()
    graph = g.StateGraph(Outer)
    graph.add_node("pre", lambda s: {"log": ["pre"], "scratch": "the parent's"})
    graph.add_node("sub", sub).add_edge(g.START, "pre").add_edge("pre", "sub")
    return graph.add_edge("sub", g.END)


async def test_a_subgraph_node_reads_its_input_schema_and_returns_its_output_schema(
    checkpointer: Checkpointer,
) -> None:
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = outer_graph(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = outer_graph(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    given = {"question": "tides", "log": ["in"], "other": "kept"}
    out = await theirs.ainvoke(given, cfg())
    result = await ours.run(given, thread_id="1")
    assert result.status == "completed", result.error
    # the sub-graph started from its input schema's keys only (not the parent's log or
    # scratch), and gave back answer and log (not its scratch)
    assert ours_seen == theirs_seen == [{"question": "tides", "log": []}]
    assert result.state == out
    assert out == {
        "question": "tides",
        "answer": "ABOUT TIDES",
        "scratch": "the parent's",
        "log": ["in", "pre", "think", "answer"],
        "other": "kept",
    }


async def test_a_subgraph_with_an_output_schema_interrupted_and_resumed(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: outer_graph(g, [], ask=True), checkpointer)
    given = {"question": "tides", "log": ["in"], "other": "kept"}
    out = await theirs.ainvoke(given, cfg())
    result = await ours.run(given, thread_id="1")
    assert result.status == "interrupted"
    assert result.state == values(out)
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(OURS.Command(resume="yes"), thread_id="1")
    assert result.state == out
    assert out["log"] == ["in", "pre", "think", "answer"]
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


@pytest.mark.parametrize("mode", ["values", "updates"])
async def test_subgraph_stream_items_with_an_output_schema(
    checkpointer: Checkpointer, mode: str
) -> None:
    ours, theirs = pair(lambda g: outer_graph(g, []), checkpointer)
    given = {"question": "q", "log": []}
    theirs_items = [
        (shape(ns), payload)
        async for ns, payload in theirs.astream(given, cfg(), stream_mode=mode, subgraphs=True)
    ]
    ours_items = [
        (shape(ns), payload)
        async for ns, payload in ours.stream(given, thread_id="1", mode=mode, subgraphs=True)
    ]
    if mode == "updates":
        # the sub-graph node's update: LangGraph's is the sub-graph's output, ours what it
        # changed of it (docs/graph.md, "Sub-graphs"): the same here, the sub-graph having
        # started without the parent's log
        assert theirs_items[-1] == ((), {"sub": {"answer": "ABOUT Q", "log": ["think", "answer"]}})
    else:
        # the sub-graph's values items hold its output schema's keys, and only steps that
        # wrote one of them have an item (its input wrote none)
        assert [p for ns, p in theirs_items if ns] == [
            {"log": ["think"]},
            {"answer": "ABOUT Q", "log": ["think", "answer"]},
        ]
    assert ours_items == theirs_items


async def test_a_graph_called_from_a_node_returns_its_output_schema(
    checkpointer: Checkpointer,
) -> None:
    def build(g: Any) -> Any:
        sub = qa_graph(g, []).compile()

        async def caller(state: Any) -> dict[str, Any]:
            if g is THEIRS:
                out = await sub.ainvoke({"question": state["question"]})
            else:
                out = (await sub.run({"question": state["question"]})).state
            return {"other": repr(sorted(out.items()))}

        graph = g.StateGraph(Outer).add_node("caller", caller)
        return graph.add_edge(g.START, "caller").add_edge("caller", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"question": "q"}, cfg())
    result = await ours.run({"question": "q"}, thread_id="1")
    assert result.state == out
    assert out["other"] == repr([("answer", "ABOUT Q"), ("log", ["think", "answer"])])


def test_managed_values_belong_in_the_state_schema_only() -> None:
    class Input(TypedDict):
        question: str
        remaining_steps: lg_managed.RemainingSteps

    class OurInput(TypedDict):
        question: str
        remaining_steps: RemainingSteps

    with pytest.raises(ValueError, match="Managed channels are not permitted"):
        THEIRS.StateGraph(QA, input_schema=Input)
    with pytest.raises(ConfigurationError, match="remaining_steps"):
        OURS.StateGraph(QA, input_schema=OurInput)


# -- add_node(..., input_schema=...) -----------------------------------------------------------


class Wide(TypedDict, total=False):
    a: str
    b: str
    log: Annotated[list[str], operator.add]


class Narrow(TypedDict):
    a: str
    extra: str  # no state key: a channel of its own, never written


class NarrowModel(BaseModel):
    a: str
    extra: str = "default"


def kind(state: Any) -> str:
    """A node's input: "mapping" (LangGraph's dict, our read-only mapping: docs/graph.md,
    "State") or the class of the instance."""
    return "mapping" if isinstance(state, Mapping) else type(state).__name__


def narrow_graph(g: Any, node_input: Any, seen: list[Any]) -> Any:
    """first writes a and b; reader (input_schema=node_input) and a Send to sent note what
    they get."""

    def reader(state: Any) -> dict[str, Any]:
        seen.append(("reader", kind(state), dict(state)))
        return {"log": ["reader"]}

    def sent(state: Any) -> dict[str, Any]:
        seen.append(("sent", kind(state), dict(state)))
        return {"log": ["sent"]}

    graph = g.StateGraph(Wide).add_node("first", lambda s: {"a": "A", "b": "B"})
    graph.add_node("reader", reader, input_schema=node_input)
    graph.add_node("sent", sent, input_schema=node_input)
    graph.add_edge(g.START, "first").add_edge("first", "reader").add_edge("reader", g.END)
    graph.add_conditional_edges("first", lambda s: [g.Send("sent", {"a": "x"})])
    return graph.add_edge("sent", g.END)


@pytest.mark.parametrize("node_input", [Narrow, NarrowModel], ids=["TypedDict", "pydantic"])
async def test_a_node_with_an_input_schema_sees_its_keys_only(
    checkpointer: Checkpointer, node_input: Any
) -> None:
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = narrow_graph(OURS, node_input, ours_seen).compile(checkpointer=checkpointer)
    theirs = narrow_graph(THEIRS, node_input, theirs_seen).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "completed", result.error
    # reader gets a (and, from a pydantic schema, extra's default) in the schema's type; a
    # Send's argument goes to the node as it was sent
    assert sorted(ours_seen) == sorted(theirs_seen)
    if node_input is Narrow:
        assert ("reader", "mapping", {"a": "A"}) in theirs_seen
    else:
        assert ("reader", "NarrowModel", {"a": "A", "extra": "default"}) in theirs_seen
    assert ("sent", "mapping", {"a": "x"}) in theirs_seen
    assert result.state == out == {"a": "A", "b": "B", "log": ["reader", "sent"]}
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


async def test_a_node_input_schema_key_is_not_graph_input(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: narrow_graph(g, Narrow, []), checkpointer)
    # extra joined the channels, but the graph's input and output stay the state's keys
    out = await theirs.ainvoke({"extra": "E", "log": []}, cfg())
    result = await ours.run({"extra": "E", "log": []}, thread_id="1")
    assert result.state == out
    assert "extra" not in out


@pytest.mark.parametrize("node_input", [Narrow, NarrowModel], ids=["TypedDict", "pydantic"])
async def test_a_node_input_schema_is_inferred_from_its_first_parameter(
    checkpointer: Checkpointer, node_input: Any
) -> None:
    def build(g: Any, seen: list[Any]) -> Any:
        def reader(state: node_input) -> dict[str, Any]:  # type: ignore[valid-type]
            seen.append((kind(state), dict(state)))
            return {"log": ["reader"]}

        def whole(state: Wide) -> dict[str, Any]:  # the state's own class: no narrowing
            seen.append((kind(state), dict(state)))
            return {}

        graph = g.StateGraph(Wide).add_node("first", lambda s: {"a": "A", "b": "B"})
        graph.add_node("reader", reader).add_node("whole", whole)
        graph.add_edge(g.START, "first").add_edge("first", "reader").add_edge("reader", "whole")
        return graph.add_edge("whole", g.END)

    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = build(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = build(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == out
    assert ours_seen == theirs_seen
    assert theirs_seen[-1] == ("mapping", {"a": "A", "b": "B", "log": ["reader"]})


async def test_keys_of_only_the_other_schema_stay_out_of_input_and_output(
    checkpointer: Checkpointer,
) -> None:
    class State(TypedDict, total=False):
        q: str

    class Out(TypedDict, total=False):
        q: str
        extra: str  # output only: not input

    class In(TypedDict, total=False):
        q: str
        inonly: str  # input only: not output

    def build(g: Any, **io: Any) -> Any:
        graph = g.StateGraph(State, **io).add_node("n", lambda s: {"q": s["q"] + "!"})
        return graph.add_edge(g.START, "n").add_edge("n", g.END)

    for thread, io, given in (
        ("1", {"output_schema": Out}, {"q": "x", "extra": "e"}),
        ("2", {"input_schema": In}, {"q": "x", "inonly": "e"}),
    ):
        ours, theirs = pair(lambda g, io=io: build(g, **io), checkpointer)
        out = await theirs.ainvoke(given, cfg(thread))
        result = await ours.run(given, thread_id=thread)
        assert result.state == out == {"q": "x!"}
        theirs_values = (await theirs.aget_state(cfg(thread))).values
        assert (await ours.get_state(thread)).values == theirs_values


async def test_a_node_input_schema_with_a_managed_value(checkpointer: Checkpointer) -> None:
    class TheirsBudget(TypedDict):
        a: str
        remaining_steps: lg_managed.RemainingSteps

    class OursBudget(TypedDict):
        a: str
        remaining_steps: RemainingSteps

    def build(g: Any, seen: list[Any]) -> Any:
        budget = TheirsBudget if g is THEIRS else OursBudget

        def counted(state: Any) -> dict[str, Any]:
            seen.append(("counted", dict(state)))
            return {"log": ["counted"]}

        def plain(state: Any) -> dict[str, Any]:  # the state: no managed value in it
            seen.append(("plain", dict(state)))
            return {}

        graph = g.StateGraph(Wide).add_node("first", lambda s: {"a": "A"})
        graph.add_node("counted", counted, input_schema=budget).add_node("plain", plain)
        graph.add_edge(g.START, "first").add_edge("first", "counted")
        return graph.add_edge("counted", "plain").add_edge("plain", g.END)

    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = build(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = build(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"log": []}, {**cfg(), "recursion_limit": 10})
    result = await ours.run({"log": []}, thread_id="1", recursion_limit=10)
    assert result.state == out
    # the managed value is filled in for the node whose input schema declares it only
    assert theirs_seen[0] == ("counted", {"a": "A", "remaining_steps": 8})
    assert theirs_seen[1] == ("plain", {"a": "A", "log": ["counted"]})
    assert ours_seen == theirs_seen
