"""StateGraph: state schemas, reducers from Annotated, compile-time validation, mermaid."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional, TypedDict

import pytest
from graphkit import LogState, chain, logger
from pydantic import BaseModel

from tinyagents.errors import ConfigurationError, GraphValidationError, InvalidUpdateError
from tinyagents.graph import (
    END,
    START,
    Command,
    RemainingSteps,
    RetryPolicy,
    StateGraph,
    TimeoutPolicy,
    add_messages,
    union,
)
from tinyagents.graph.reducers import Append, Binary, Extreme, LastValue, Messages, Union


class TDState(TypedDict, total=False):
    plain: int
    log: Annotated[list[str], operator.add]
    messages: Annotated[list[dict[str, Any]], add_messages]
    tags: Annotated[set[str], union]
    low: Annotated[int, min]
    high: Annotated[int, max]
    total: Annotated[int, operator.add]


def test_typeddict_fields_get_their_reducers() -> None:
    channels = StateGraph(TDState).schema.channels
    kinds = {name: type(ch.reducer) for name, ch in channels.items()}
    assert kinds == {
        "plain": LastValue,
        "log": Append,
        "messages": Messages,
        "tags": Union,
        "low": Extreme,
        "high": Extreme,
        "total": Binary,
    }


@dataclass
class DCState:
    count: int = 0
    items: Annotated[list[int], operator.add] = field(default_factory=list)


class PydState(BaseModel):
    name: str = "n"
    items: Annotated[list[int], operator.add] = []


async def test_dataclass_state_defaults_and_instance_view() -> None:
    seen: list[Any] = []

    def node(state: DCState) -> dict[str, Any]:
        seen.append(state)
        return {"count": state.count + 1, "items": [state.count]}

    graph = StateGraph(DCState).add_node("n", node).add_edge(START, "n").add_edge("n", END)
    result = await graph.compile().run({})
    assert result.status == "completed"
    assert result.state == {"count": 1, "items": [0]}
    assert isinstance(seen[0], DCState)


async def test_pydantic_state_validates_input_at_the_boundary() -> None:
    def node(state: PydState) -> dict[str, Any]:
        assert isinstance(state, PydState)
        return {"items": [len(state.name)]}

    graph = StateGraph(PydState).add_node("n", node).add_edge(START, "n").add_edge("n", END)
    compiled = graph.compile()
    result = await compiled.run({"name": "abc"})
    assert result.state == {"name": "abc", "items": [3]}
    from tinyagents.errors import InvalidUpdateError

    with pytest.raises(InvalidUpdateError, match="invalid graph input"):
        await compiled.run({"name": ["not", "a", "string"]})


def test_builder_methods_chain_and_reject_bad_nodes() -> None:
    graph = StateGraph(LogState)
    assert graph.add_node("a", logger("a")) is graph
    assert graph.add_edge(START, "a") is graph
    with pytest.raises(ConfigurationError, match="already defined"):
        graph.add_node("a", logger("a"))
    with pytest.raises(ConfigurationError, match="reserved"):
        graph.add_node(END, logger("x"))
    with pytest.raises(TypeError, match="must be a function"):  # as LangGraph's
        graph.add_node("b", 42)

    class Plain:  # annotations, but no TypedDict, dataclass or pydantic model
        x: int

    with pytest.raises(ConfigurationError, match="TypedDict, a dataclass or a pydantic"):
        StateGraph(Plain)


def test_add_node_takes_the_name_from_the_function() -> None:
    def research(state: Any) -> None:
        return None

    graph = StateGraph(LogState).add_node(research)
    assert "research" in graph.nodes


def _error(graph: StateGraph) -> GraphValidationError:
    with pytest.raises(GraphValidationError) as info:
        graph.compile()
    return info.value


def test_edge_to_unknown_node_is_named() -> None:
    graph = chain("a").add_edge("a", "ghost")
    err = _error(graph)
    assert err.nodes == ["ghost"]
    assert "unknown" in str(err)


def test_unreachable_node_is_named() -> None:
    graph = chain("a").add_node("island", logger("island")).add_edge("island", END)
    err = _error(graph)
    assert err.nodes == ["island"]
    assert "unreachable" in str(err)


def test_a_node_reached_by_an_undeclared_goto_is_refused_saying_how_to_declare_it() -> None:
    # LangGraph compiles it (its Command(goto="b") reaches b at run time); ours must see every
    # node reachable, and says how a ported program declares the goto
    def a(state: Any) -> Command[Any]:
        return Command(goto="b")

    graph = StateGraph(LogState).add_node("a", a).add_node("b", logger("b")).add_edge(START, "a")
    err = _error(graph)
    assert err.nodes == ["b"]
    assert "destinations=[...]" in str(err) and 'Command[Literal["..."]]' in str(err)
    declared = StateGraph(LogState).add_node("a", a, destinations=["b"]).add_node("b", logger("b"))
    declared.add_edge(START, "a").compile()


async def test_a_node_no_edge_leaves_finishes_the_run() -> None:
    # LangGraph's rule: a node with no way out ends the run when it is done (it used to be
    # refused with "no path to END")
    graph = chain("a").add_node("sink", logger("sink")).add_edge("a", "sink")
    result = await graph.compile().run({})
    assert result.status == "completed" and result.state["log"] == ["a", "sink"]


def test_a_node_that_leads_only_into_a_loop_is_refused() -> None:
    graph = chain("a").add_node("p", logger("p")).add_node("q", logger("q"))
    graph.add_node("into", logger("into")).add_edge("a", "into").add_edge("into", "p")
    graph.add_edge("p", "q").add_edge("q", "p")
    err = _error(graph)
    assert err.nodes == ["p", "q"] and "cycle" in str(err)


async def test_a_command_return_annotation_declares_the_destinations() -> None:
    # LangGraph's idiom: -> Command[Literal[...]] names where the node's gotos lead, so the
    # graph needs no edges between those nodes (and no edge to END from them)
    def route(state: Any) -> Command[Literal["yes", "no"]]:
        return Command(update={"log": ["route"]}, goto="yes" if state.get("x") else "no")

    def maybe(state: Any) -> Command[Literal["yes"]] | None:
        return None

    class Router:
        def __call__(self, state: Any) -> Optional[Command[Literal["no"]]]:  # noqa: UP045
            return None

    graph = StateGraph(LogState).add_node(route).add_node("yes", logger("yes"))
    graph.add_node("no", logger("no")).add_edge(START, "route")
    assert graph.nodes["route"].destinations == ("yes", "no")
    compiled = graph.compile()
    # drawn as LangGraph draws it: dotted gotos, and the ends of the run to END
    drawn = compiled.to_mermaid().splitlines()
    for line in ("n_route -. goto .-> n_yes", "n_yes --> __end__", "n_no --> __end__"):
        assert f"    {line}" in drawn
    assert "    n_route --> __end__" not in drawn
    assert (await compiled.run({"x": 1})).state["log"] == ["route", "yes"]
    assert (await compiled.run({})).state["log"] == ["route", "no"]

    class Inherited(Router):
        pass

    graph.add_node("maybe", maybe).add_node("router", Router()).add_node("heir", Inherited())
    assert graph.nodes["maybe"].destinations == ("yes",)
    assert graph.nodes["router"].destinations == graph.nodes["heir"].destinations == ("no",)
    # destinations= given outright win over the annotation, as LangGraph's
    graph.add_node("told", route, destinations=["no"])
    assert graph.nodes["told"].destinations == ("no",)


def test_an_unannotated_command_node_still_needs_its_destinations() -> None:
    def route(state: Any) -> Command:  # type: ignore[type-arg]
        return Command(goto="elsewhere")

    graph = StateGraph(LogState).add_node(route).add_node("elsewhere", logger("elsewhere"))
    err = _error(graph.add_edge(START, "route"))
    assert err.nodes == ["elsewhere"] and "unreachable" in str(err)


def test_conditional_mapping_to_missing_node_is_named() -> None:
    graph = chain("a").add_conditional_edges("a", lambda s: "x", {"x": "nowhere", "y": END})
    err = _error(graph)
    assert err.nodes == ["nowhere"]
    assert "mapping" in str(err)


def test_cycle_without_exit_is_named() -> None:
    graph = chain("a")
    graph.add_node("p", logger("p")).add_node("q", logger("q"))
    graph.add_conditional_edges("a", lambda s: "p", {"p": "p", "end": END})
    graph.add_edge("p", "q").add_edge("q", "p")
    err = _error(graph)
    assert err.nodes == ["p", "q"]
    assert "cycle" in str(err)


def test_missing_entry_point() -> None:
    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge("a", END)
    err = _error(graph)
    assert err.nodes == [START]


def test_loop_with_an_exit_and_goto_destinations_compile() -> None:
    graph = chain("a")
    graph.add_conditional_edges("a", lambda s: END, {"again": "a", "done": END})
    graph.compile()
    jumper = StateGraph(LogState).add_node("j", logger("j"), destinations=["k"])
    jumper.add_node("k", logger("k")).add_edge(START, "j").add_edge("k", END)
    jumper.compile()  # "j" reaches END through its declared Command destination


def test_router_without_mapping_may_lead_anywhere() -> None:
    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("b", logger("b"))
    graph.add_edge(START, "a").add_conditional_edges("a", lambda s: "b").add_edge("b", END)
    graph.compile()


def test_mermaid_shows_nodes_edges_and_branches() -> None:
    graph = chain("draft", "review")
    graph.add_conditional_edges("review", lambda s: "ok", {"ok": END, "again": "draft"})
    text = graph.compile().to_mermaid()
    assert text.startswith("flowchart TD\n")
    assert "__start__([START])" in text and "__end__([END])" in text
    assert "__start__ --> n_draft" in text
    assert "n_draft --> n_review" in text
    assert "n_review -. again .-> n_draft" in text
    assert "n_review -. ok .-> __end__" in text


async def test_add_sequence_chains_functions_and_named_pairs() -> None:
    def first(state: LogState) -> dict[str, Any]:
        return {"log": ["first"]}

    graph = StateGraph(LogState).add_sequence([first, ("second", logger("second"))])
    graph.set_entry_point("first").set_finish_point("second")
    assert (await graph.compile().run({"log": []})).state == {"log": ["first", "second"]}
    with pytest.raises(ConfigurationError, match="at least one node"):
        StateGraph(LogState).add_sequence([])
    with pytest.raises(ConfigurationError, match="already defined"):
        StateGraph(LogState).add_sequence([first, first])


async def test_a_conditional_entry_point_routes_from_start() -> None:
    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("b", logger("b"))
    graph.set_conditional_entry_point(lambda s: "b" if s["log"] else "a", ["a", "b"])
    compiled = graph.set_finish_point("a").set_finish_point("b").compile()
    assert (await compiled.run({"log": []})).state == {"log": ["a"]}
    assert (await compiled.run({"log": ["x"]})).state == {"log": ["x", "b"]}


class ManagedModel(BaseModel):
    log: Annotated[list[str], operator.add] = []
    remaining_steps: RemainingSteps = 0


async def test_managed_values_in_a_pydantic_state_are_read_not_written() -> None:
    seen: list[int] = []

    def work(state: ManagedModel) -> dict[str, Any]:
        seen.append(state.remaining_steps)
        return {"log": ["w"]}

    graph = StateGraph(ManagedModel).add_node("work", work).add_edge(START, "work")
    graph.add_conditional_edges("work", lambda s: END if s.remaining_steps <= 3 else "work")
    result = await graph.compile().run({"log": []}, recursion_limit=6)
    assert seen == [5, 4, 3] and result.state == {"log": ["w", "w", "w"]}
    with pytest.raises(InvalidUpdateError, match="remaining_steps"):
        await graph.compile().run({"remaining_steps": 99})


def test_a_node_name_that_is_not_text_is_refused_by_name() -> None:
    # add_node(5, f) was an AssertionError with no message; add_edge(None, "a") a TypeError
    # ("'NoneType' object is not iterable"); add_edge("a", 5) was taken
    graph = StateGraph(LogState).add_node("a", logger("a"))
    with pytest.raises(GraphValidationError, match=r"a node name is text, got int: 5"):
        graph.add_node(5, logger("x"))  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match=r"a node name is text, got NoneType"):
        graph.add_edge(None, "a")  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match=r"a node name is text, got int"):
        graph.add_edge("a", 5)  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match=r"a node name is text, got int"):
        graph.add_edge(["a", 7], "a")  # type: ignore[list-item]
    with pytest.raises(GraphValidationError, match=r"a node name is text, got NoneType"):
        graph.add_conditional_edges("a", lambda s: "a", {"x": None})  # type: ignore[dict-item]
    assert (graph.edges, graph.joins, graph.branches) == ([], [], [])


def test_a_router_that_cannot_be_called_is_refused_when_added() -> None:
    # taken: the graph compiled, and its run failed on "'str' object is not callable"
    graph = StateGraph(LogState).add_node("a", logger("a"))
    with pytest.raises(
        GraphValidationError, match=r"router of 'a' must be a function of the state, got str"
    ):
        graph.add_conditional_edges("a", "a")  # type: ignore[arg-type]
    assert graph.branches == []


def test_add_node_refuses_a_retry_timeout_or_metadata_of_the_wrong_kind() -> None:
    # retry=5 was taken (and a failing node then crashed on it), timeout=nan failed every run
    # at once with TimeoutError, timeout=True was one second, timeout="3" and metadata=5 were a
    # TypeError from inside add_node
    graph = StateGraph(LogState)
    with pytest.raises(GraphValidationError, match=r"node 'a': retry takes a RetryPolicy"):
        graph.add_node("a", logger("a"), retry=5)  # type: ignore[arg-type]
    for bad in (float("nan"), float("inf"), True, "3", 0, -1):
        with pytest.raises(
            GraphValidationError, match=r"node 'a': timeout must be a finite number of seconds"
        ):
            graph.add_node("a", logger("a"), timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match=r"node 'a': metadata must be a dict, got int"):
        graph.add_node("a", logger("a"), metadata=5)  # type: ignore[arg-type]
    assert graph.nodes == {}
    graph.add_node("a", logger("a"), retry=[RetryPolicy()], timeout=2, metadata={"k": 1})
    assert graph.nodes["a"].timeout == TimeoutPolicy(run_timeout=2)


def test_compile_takes_langgraphs_none_breakpoints_and_refuses_other_kinds() -> None:
    # compile(interrupt_before=None), LangGraph's default spelled out, was a TypeError
    # ("'NoneType' object is not iterable"), and so was interrupt_before=5; name=5 was taken
    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a")
    compiled = graph.compile(interrupt_before=None, interrupt_after=None)  # type: ignore[arg-type]
    assert compiled.interrupt_before == compiled.interrupt_after == frozenset()
    with pytest.raises(GraphValidationError, match=r"take node names \(a list, or '\*'\), got 5"):
        graph.compile(interrupt_before=5)  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match=r"compile\(name=...\) is text, got int"):
        graph.compile(name=5)  # type: ignore[arg-type]
