"""Ports of LangGraph's tests, sixth round (``libs/langgraph/tests/test_time_travel.py``,
``test_subgraph_persistence.py``, ``test_retry.py``, ``test_pregel.py``,
``test_large_cases.py`` and ``test_managed_values.py``): the same
program on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.
Each test's comment names the LangGraph test it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

import operator
import threading
from typing import Annotated, Any, NotRequired, Required, TypedDict

import pytest
from langgraph_kit import (
    OURS,
    THEIRS,
    Results,
    Sightings,
    Value,
    cfg,
    lg_managed,
    lg_memory,
    lg_message,
    lg_types,
    newest_with_next,
    pair,
    shape,
)

from tinyagents.errors import ArgumentError
from tinyagents.graph import RemainingSteps as OursRemainingSteps
from tinyagents.graph import RetryPolicy as OursRetryPolicy
from tinyagents.graph import add_messages as ours_add_messages
from tinyagents.store.checkpoint import Checkpointer

lc_messages = pytest.importorskip("langchain_core.messages")


async def run_both(ours: Any, theirs: Any, value: Any, thread: str = "1") -> Any:
    """``value`` (an input, None or a ``Command``) on both; LangGraph's output returned, ours
    checked equal to it (without LangGraph's ``__interrupt__``)."""
    theirs_value = THEIRS.Command(resume=value.resume) if isinstance(value, OURS.Command) else value
    out = await theirs.ainvoke(theirs_value, cfg(thread))
    result = await ours.run(value, thread_id=thread)
    assert result.state == {k: v for k, v in out.items() if not k.startswith("__")}
    assert (result.status == "interrupted") == ("__interrupt__" in out)
    return out


# -- stateful sub-graphs (checkpointer=True) and time travel (test_time_travel.py) ----------


def sub_after_parent(g: Any, seen: Sightings) -> Any:
    def sub_step(state: Any) -> dict[str, Any]:
        seen.of(g).append(("sub_step", dict(state)))
        return {"value": ["s"]}

    sub = g.StateGraph(Value).add_node("sub_step", sub_step).add_edge(g.START, "sub_step")
    return (
        g.StateGraph(Results)
        .add_node("parent_node", lambda state: {"results": ["p"]})
        .add_node("sub_node", sub.compile(checkpointer=True))
        .add_edge(g.START, "parent_node")
        .add_edge("parent_node", "sub_node")
    )


async def test_a_replay_of_the_first_run_gives_the_sub_graph_its_state_then(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_replay_from_first_invocation_checkpoint
    seen = Sightings()
    ours, theirs = pair(lambda g: sub_after_parent(g, seen), checkpointer)
    await run_both(ours, theirs, {"results": []})
    await run_both(ours, theirs, {"results": []})
    ours_at, theirs_at = await newest_with_next(ours, theirs, ("sub_node",), oldest=True)
    seen.clear()
    await theirs.ainvoke(None, theirs_at)
    (await ours.run(None, thread_id="1", checkpoint_id=ours_at)).raise_for_status()
    assert seen.ours == seen.theirs == [("sub_step", {"value": []})]


async def test_a_run_after_a_replay_takes_the_sub_graph_state_the_replay_left(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_stateful_subgraph_loads_latest_after_replay
    seen = Sightings()
    ours, theirs = pair(lambda g: sub_after_parent(g, seen), checkpointer)
    await run_both(ours, theirs, {"results": []})
    assert seen.ours[-1] == seen.theirs[-1] == ("sub_step", {"value": []})
    await run_both(ours, theirs, {"results": []})
    assert seen.ours[-1] == seen.theirs[-1] == ("sub_step", {"value": ["s"]})
    ours_at, theirs_at = await newest_with_next(ours, theirs, ("parent_node",))
    seen.clear()
    await theirs.ainvoke(None, theirs_at)
    (await ours.run(None, thread_id="1", checkpoint_id=ours_at)).raise_for_status()
    assert seen.ours == seen.theirs == [("sub_step", {"value": ["s"]})]
    seen.clear()
    await run_both(ours, theirs, {"results": []})
    assert seen.ours == seen.theirs == [("sub_step", {"value": ["s", "s"]})]


class Inner(TypedDict):
    inner_trail: Annotated[list[str], operator.add]


class Mid(TypedDict):
    mid_trail: Annotated[list[str], operator.add]


def three_levels(g: Any, seen: Sightings) -> Any:
    def step(name: str, key: str, item: str) -> Any:
        def node(state: Any) -> dict[str, Any]:
            seen.of(g).append((name, dict(state)))
            return {key: [item]}

        return node

    inner = g.StateGraph(Inner).add_node("inner_step", step("inner_step", "inner_trail", "inner"))
    inner.add_edge(g.START, "inner_step")
    mid = (
        g.StateGraph(Mid)
        .add_node("mid_step", step("mid_step", "mid_trail", "mid"))
        .add_node("inner_node", inner.compile(checkpointer=True))
        .add_edge(g.START, "mid_step")
        .add_edge("mid_step", "inner_node")
    )
    return (
        g.StateGraph(Results)
        .add_node("parent_step", lambda state: {"results": ["p"]})
        .add_node("mid_node", mid.compile(checkpointer=True))
        .add_edge(g.START, "parent_step")
        .add_edge("parent_step", "mid_node")
    )


@pytest.mark.parametrize("how", ["replay", "fork"])
async def test_three_levels_of_stateful_sub_graphs_are_taken_back_together(
    checkpointer: Checkpointer, how: str
) -> None:
    # LangGraph: test_time_travel.py::test_three_level_nested_subgraph_loads_state_on_replay
    # and test_three_level_nested_subgraph_loads_state_on_fork
    seen = Sightings()
    ours, theirs = pair(lambda g: three_levels(g, seen), checkpointer)
    await run_both(ours, theirs, {"results": []})
    assert (
        seen.ours
        == seen.theirs
        == [
            ("mid_step", {"mid_trail": []}),
            ("inner_step", {"inner_trail": []}),
        ]
    )
    seen.clear()
    await run_both(ours, theirs, {"results": []})
    assert (
        seen.ours
        == seen.theirs
        == [
            ("mid_step", {"mid_trail": ["mid"]}),
            ("inner_step", {"inner_trail": ["inner"]}),
        ]
    )
    ours_at, theirs_at = await newest_with_next(ours, theirs, ("parent_step",))
    if how == "fork":
        theirs_at = await theirs.aupdate_state(theirs_at, {"results": ["forked"]})
        ours_at = await ours.update_state("1", {"results": ["forked"]}, checkpoint_id=ours_at)
    seen.clear()
    out = await theirs.ainvoke(None, theirs_at)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_at)
    assert result.raise_for_status().state == out
    assert (
        seen.ours
        == seen.theirs
        == [
            ("mid_step", {"mid_trail": ["mid"]}),
            ("inner_step", {"inner_trail": ["inner"]}),
        ]
    )
    if how == "replay":
        seen.clear()
        await run_both(ours, theirs, {"results": []})
        assert (
            seen.ours
            == seen.theirs
            == [
                ("mid_step", {"mid_trail": ["mid", "mid"]}),
                ("inner_step", {"inner_trail": ["inner", "inner"]}),
            ]
        )


# -- a replay or a fork keeps the checkpoints it went back past (test_time_travel.py) --------


def a_b_c(g: Any, calls: list[int]) -> Any:
    def node_b(state: Any) -> dict[str, Any]:
        calls.append(1)
        return {"value": [f"b{len(calls)}"]}

    return (
        g.StateGraph(Value)
        .add_node("node_a", lambda state: {"value": ["a"]})
        .add_node("node_b", node_b)
        .add_node("node_c", lambda state: {"value": ["c"]})
        .add_edge(g.START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", "node_c")
    )


async def both_histories(ours: Any, theirs: Any) -> list[tuple[tuple[str, ...], Any]]:
    """(next, values) of each checkpoint, newest first, the same on both libraries."""
    theirs_h = [(s.next, s.values) async for s in theirs.aget_state_history(cfg())]
    ours_h = [
        (h.next, (await ours.get_state("1", h.checkpoint_id)).values)
        for h in await ours.history("1")
    ]
    assert ours_h == theirs_h
    return ours_h


@pytest.mark.parametrize("how", ["replay", "fork"])
async def test_a_replay_or_a_fork_keeps_the_checkpoints_it_went_back_past(
    checkpointer: Checkpointer, how: str
) -> None:
    # LangGraph: test_time_travel.py::test_replay_creates_branch_preserving_old_checkpoints
    # and test_fork_creates_branch_preserving_old_checkpoints
    ours_calls: list[int] = []
    theirs_calls: list[int] = []
    ours = a_b_c(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = a_b_c(THEIRS, theirs_calls).compile(checkpointer=lg_memory.InMemorySaver())
    assert await run_both(ours, theirs, {"value": []}) == {"value": ["a", "b1", "c"]}
    assert await both_histories(ours, theirs) == [
        ((), {"value": ["a", "b1", "c"]}),
        (("node_c",), {"value": ["a", "b1"]}),
        (("node_b",), {"value": ["a"]}),
        (("node_a",), {"value": []}),
        (("__start__",), {"value": []}),
    ]
    ours_old = [h.checkpoint_id for h in await ours.history("1")]
    ours_at, theirs_at = await newest_with_next(ours, theirs, ("node_b",))
    theirs_point = theirs_at["configurable"]["checkpoint_id"]
    if how == "fork":
        theirs_at = await theirs.aupdate_state(theirs_at, {"value": ["x"]})
        ours_at = await ours.update_state("1", {"value": ["x"]}, checkpoint_id=ours_at)
    out = await theirs.ainvoke(None, theirs_at)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_at)
    assert result.raise_for_status().state == out
    x = ["x"] if how == "fork" else []
    assert out == {"value": ["a", *x, "b2", "c"]}
    # three new checkpoints: the replay's (LangGraph's "fork") or the update, then the
    # steps that ran again; the old ones are all still there, and read as they were
    assert await both_histories(ours, theirs) == [
        ((), {"value": ["a", *x, "b2", "c"]}),
        (("node_c",), {"value": ["a", *x, "b2"]}),
        (("node_b",), {"value": ["a", *x]}),
        ((), {"value": ["a", "b1", "c"]}),
        (("node_c",), {"value": ["a", "b1"]}),
        (("node_b",), {"value": ["a"]}),
        (("node_a",), {"value": []}),
        (("__start__",), {"value": []}),
    ]
    ours_new = await ours.history("1")
    assert [h.checkpoint_id for h in ours_new[3:]] == ours_old
    assert (await ours.get_state("1", ours_old[0])).values == {"value": ["a", "b1", "c"]}
    assert (await ours.get_state("1")).checkpoint_id == ours_new[0].checkpoint_id
    # where the branch hangs: LangGraph's first new checkpoint's parent is the checkpoint
    # gone back to; ours is the old head, the history one line (docs/graph.md,
    # "Checkpointers": update_state at a checkpoint "becomes the head (the history stays
    # one line)"); its source is our "rewind" for LangGraph's replay "fork"
    theirs_new = [s async for s in theirs.aget_state_history(cfg())][:3]
    assert theirs_new[2].parent_config["configurable"]["checkpoint_id"] == theirs_point
    assert ours_new[2].parent_id == ours_old[0]
    assert ours_new[2].source == ("rewind" if how == "replay" else "update")
    assert theirs_new[2].metadata["source"] == ("fork" if how == "replay" else "update")


# -- retry policies: which errors are retried (test_retry.py) --------------------------------


class Failing(TypedDict):
    foo: str
    error_type: str


def failing_until(g: Any, policy: Any, counts: dict[str, int]) -> Any:
    """``test_graph_with_multiple_retry_policies``: a ValueError on the first attempt, a
    KeyError on the first two, by the input's ``error_type``."""

    def failing_node(state: Any) -> dict[str, Any]:
        error_type = state["error_type"]
        counts[error_type] = counts.get(error_type, 0) + 1
        if error_type == "value_error" and counts[error_type] < 2:
            raise ValueError("Value error")
        if error_type == "key_error" and counts[error_type] < 3:
            raise KeyError("Key error")
        return {"foo": f"recovered_from_{error_type}"}

    graph = g.StateGraph(Failing).add_node("failing_node", failing_node, retry_policy=policy)
    return graph.add_edge(g.START, "failing_node")


def policies(g: Any, *kinds: dict[str, Any]) -> Any:
    make = OursRetryPolicy if g is OURS else lg_types.RetryPolicy
    return tuple(make(**kind) for kind in kinds)


async def test_a_node_with_several_retry_policies_is_retried_by_the_first_that_matches() -> None:
    # LangGraph: test_retry.py::test_graph_with_multiple_retry_policies
    kinds = (
        {"max_attempts": 2, "initial_interval": 0.0, "jitter": False, "retry_on": ValueError},
        {"max_attempts": 3, "initial_interval": 0.0, "jitter": False, "retry_on": KeyError},
    )
    ours_counts: dict[str, int] = {}
    theirs_counts: dict[str, int] = {}
    ours = failing_until(OURS, policies(OURS, *kinds), ours_counts).compile()
    theirs = failing_until(THEIRS, policies(THEIRS, *kinds), theirs_counts).compile()
    for error_type in ("value_error", "key_error"):
        out = await theirs.ainvoke({"foo": "", "error_type": error_type})
        result = await ours.run({"foo": "", "error_type": error_type})
        assert result.raise_for_status().state == out
        assert out["foo"] == f"recovered_from_{error_type}"
    assert ours_counts == theirs_counts == {"value_error": 2, "key_error": 3}


class CustomError(ValueError):
    pass


def retry_if_asked(exc: BaseException) -> bool:
    return isinstance(exc, ValueError) and "retry" in str(exc)


RETRY_ON_CASES = [
    # (retry_on, the error raised, retried?)
    (ValueError, ValueError("test error"), True),  # test_should_retry_on_single_exception
    (ValueError, TypeError("test error"), False),
    (ValueError, Exception("test error"), False),
    ((ValueError, KeyError), KeyError("test error"), True),  # ..._on_sequence_of_exceptions
    ((ValueError, KeyError), TypeError("test error"), False),
    ([ValueError, KeyError], ValueError("test error"), True),
    (ValueError, CustomError("test error"), True),  # ..._on_subclass_of_exception
    (retry_if_asked, ValueError("please retry this"), True),  # ..._on_callable
    (retry_if_asked, ValueError("other error"), False),
    (retry_if_asked, TypeError("please retry this"), False),
    ((), ValueError("test error"), False),  # test_should_retry_on_empty_sequence
    (None, ConnectionError("connection refused"), True),  # ..._default_retry_on
    (None, ValueError("invalid value"), False),
    (None, TypeError("invalid type"), False),
    (None, ArithmeticError("division by zero"), False),
    (None, ImportError("module not found"), False),
    (None, LookupError("key not found"), False),
    (None, NameError("name not defined"), False),
    (None, RuntimeError("runtime error"), False),
    (None, ReferenceError("weak reference"), False),
    (None, OSError("file not found"), False),
]


def raising_once(g: Any, policy: Any, error: BaseException, attempts: list[int]) -> Any:
    def node(state: Any) -> dict[str, Any]:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            raise error
        return {"foo": "done"}

    graph = g.StateGraph(Failing).add_node("node", node, retry_policy=policy)
    return graph.add_edge(g.START, "node")


@pytest.mark.parametrize(("retry_on", "error", "retried"), RETRY_ON_CASES)
async def test_which_errors_a_retry_policy_retries(
    retry_on: Any, error: BaseException, retried: bool
) -> None:
    # LangGraph: test_retry.py::test_should_retry_on_single_exception,
    # _on_sequence_of_exceptions, _on_subclass_of_exception, _on_callable,
    # _on_empty_sequence and _default_retry_on (LangGraph's tests call its private
    # ``_should_retry_on``; here a node raises the error once under the policy)
    kind: dict[str, Any] = {"max_attempts": 2, "initial_interval": 0.0, "jitter": False}
    if retry_on is not None:
        kind["retry_on"] = retry_on
    ours_attempts: list[int] = []
    theirs_attempts: list[int] = []
    [ours_policy] = policies(OURS, kind)
    [theirs_policy] = policies(THEIRS, kind)
    ours = raising_once(OURS, ours_policy, error, ours_attempts).compile()
    theirs = raising_once(THEIRS, theirs_policy, error, theirs_attempts).compile()
    result = await ours.run({"foo": "", "error_type": ""})
    if retried:
        out = await theirs.ainvoke({"foo": "", "error_type": ""})
        assert result.raise_for_status().state == out == {"foo": "done", "error_type": ""}
        assert ours_attempts == theirs_attempts == [1, 2]
    else:
        with pytest.raises(type(error)):
            await theirs.ainvoke({"foo": "", "error_type": ""})
        assert result.status == "failed"
        with pytest.raises(type(error)):
            result.raise_for_status()
        assert ours_attempts == theirs_attempts == [1]


def test_a_retry_on_of_the_wrong_kind_is_refused_when_the_policy_is_made() -> None:
    # LangGraph: test_retry.py::test_should_retry_on_invalid_type: LangGraph's policy takes
    # it and raises TypeError ("retry_on must be an Exception class, a list or tuple of
    # Exception classes, or a callable") at the node's first error; ours refuses it at once
    # (the RetryPolicy docstring)
    with pytest.raises(ArgumentError, match="retry_on"):
        OursRetryPolicy(retry_on=123)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry_on"):
        OursRetryPolicy(retry_on=(ValueError, 123))  # type: ignore[arg-type]


# -- a fan-out joined by a waiting edge, paused and updated (test_pregel.py) -----------------


def sorted_add(x: list[str], y: list[str] | list[tuple[str, str]]) -> list[str]:
    """LangGraph's test's reducer: a list of (old, new) pairs replaces old by new."""
    if isinstance(y[0], tuple):
        for rem, _ in y:
            x.remove(rem)
        y = [t[1] for t in y]
    return sorted(operator.add(x, y))


class Docs(TypedDict, total=False):
    query: str
    answer: str
    docs: Annotated[list[str], sorted_add]


def waiting_fan_out(g: Any) -> Any:
    analyzed = threading.Event()
    workflow = g.StateGraph(Docs)

    @workflow.add_node
    def rewrite_query(data: Any) -> dict[str, Any]:
        analyzed.clear()
        return {"query": f"query: {data['query']}"}

    def analyzer_one(data: Any) -> dict[str, Any]:
        analyzed.set()
        return {"query": f"analyzed: {data['query']}"}

    def retriever_one(data: Any) -> dict[str, Any]:
        return {"docs": ["doc1", "doc2"]}

    def retriever_two(data: Any) -> dict[str, Any]:
        analyzed.wait(5)  # LangGraph's test sleeps: it finishes after analyzer_one
        return {"docs": ["doc3", "doc4"]}

    def qa(data: Any) -> dict[str, Any]:
        return {"answer": ",".join(data["docs"])}

    workflow.add_node(analyzer_one)
    workflow.add_node(retriever_one)
    workflow.add_node(retriever_two)
    workflow.add_node(qa)
    workflow.set_entry_point("rewrite_query")
    workflow.add_edge("rewrite_query", "analyzer_one")
    workflow.add_edge("analyzer_one", "retriever_one")
    workflow.add_edge("rewrite_query", "retriever_two")
    workflow.add_edge(["retriever_one", "retriever_two"], "qa")
    workflow.set_finish_point("qa")
    return workflow


FAN_OUT_STEPS = [
    {"rewrite_query": {"query": "query: what is weather in sf"}},
    {"analyzer_one": {"query": "analyzed: query: what is weather in sf"}},
    {"retriever_two": {"docs": ["doc3", "doc4"]}},
    {"retriever_one": {"docs": ["doc1", "doc2"]}},
]


async def test_a_fan_out_joined_by_a_waiting_edge_paused_after_and_before(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_in_one_fan_out_state_graph_waiting_edge (without the
    # drawing)
    question = {"query": "what is weather in sf"}
    ours, theirs = pair(waiting_fan_out, None)
    out = await theirs.ainvoke(dict(question))
    result = await ours.run(dict(question))
    assert (
        result.raise_for_status().state
        == out
        == {
            "query": "analyzed: query: what is weather in sf",
            "docs": ["doc1", "doc2", "doc3", "doc4"],
            "answer": "doc1,doc2,doc3,doc4",
        }
    )
    theirs_items = [c async for c in theirs.astream(dict(question), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(dict(question), mode="updates")]
    assert ours_items == theirs_items == [*FAN_OUT_STEPS, {"qa": {"answer": "doc1,doc2,doc3,doc4"}}]

    ours, theirs = pair(waiting_fan_out, checkpointer, interrupt_after=["retriever_one"])
    theirs_items = [c async for c in theirs.astream(dict(question), cfg(), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(dict(question), thread_id="1", mode="updates")]
    assert ours_items == theirs_items == [*FAN_OUT_STEPS, {"__interrupt__": ()}]
    theirs_items = [c async for c in theirs.astream(None, cfg(), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(None, thread_id="1", mode="updates")]
    assert ours_items == theirs_items == [{"qa": {"answer": "doc1,doc2,doc3,doc4"}}]

    ours, theirs = pair(waiting_fan_out, checkpointer, interrupt_before=["qa"])
    theirs_items = [
        c async for c in theirs.astream(dict(question), cfg("2"), stream_mode="updates")
    ]
    ours_items = [c async for c in ours.stream(dict(question), thread_id="2", mode="updates")]
    assert ours_items == theirs_items == [*FAN_OUT_STEPS, {"__interrupt__": ()}]
    # an update without as_node, while qa waits: as the last node to write (retriever_one)
    theirs_parent = (await theirs.aget_state(cfg("2"))).config
    ours_parent = (await ours.get_state("2")).checkpoint_id
    await theirs.aupdate_state(cfg("2"), {"docs": ["doc5"]})
    await ours.update_state("2", {"docs": ["doc5"]})
    theirs_state = await theirs.aget_state(cfg("2"))
    ours_state = await ours.get_state("2")
    assert (
        ours_state.values
        == theirs_state.values
        == {
            "query": "analyzed: query: what is weather in sf",
            "docs": ["doc1", "doc2", "doc3", "doc4", "doc5"],
        }
    )
    assert ours_state.next == theirs_state.next == ("qa",)
    assert [t.name for t in ours_state.tasks] == [t.name for t in theirs_state.tasks] == ["qa"]
    assert theirs_state.metadata == {"parents": {}, "source": "update", "step": 4}
    assert (ours_state.source, ours_state.step) == ("update", 4)
    assert ours_state.metadata["parents"] == {}
    assert theirs_state.parent_config == theirs_parent
    assert ours_state.parent_id == ours_parent
    assert theirs_state.interrupts == ours_state.interrupts == ()
    theirs_items = [c async for c in theirs.astream(None, cfg("2"), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(None, thread_id="2", mode="updates")]
    assert ours_items == theirs_items == [{"qa": {"answer": "doc1,doc2,doc3,doc4,doc5"}}]


# -- a persistent sub-graph called again after a goto, paused each time (test_pregel.py) -----


class SubFooBar(TypedDict):
    foo: str
    bar: str


class ParentFooCounter(TypedDict):
    foo: str
    counter: int


def reentered(g: Any, called: list[str], bar_values: list[Any]) -> Any:
    def subnode_1(state: Any) -> dict[str, Any]:
        called.append("subnode_1")
        bar_values.append(state.get("bar"))
        return {"foo": "subgraph_1"}

    def subnode_2(state: Any) -> dict[str, Any]:
        called.append("subnode_2")
        value = g.interrupt("Provide value") + "baz"
        return {"foo": "subgraph_2", "bar": value}

    subgraph = (
        g.StateGraph(SubFooBar)
        .add_node(subnode_1)
        .add_node(subnode_2)
        .add_edge(g.START, "subnode_1")
        .add_edge("subnode_1", "subnode_2")
        .compile(checkpointer=True)
    )

    async def call_subgraph(state: Any) -> Any:
        # LangGraph's test gives the sub-graph the parent's state and returns the
        # sub-graph's: each library drops the other's keys there, where ours refuses a key
        # that is no field (docs/graph.md, "Running": "Bad input raises and changes
        # nothing"; "State": "A key that is not a field is an InvalidUpdateError"), so both
        # pass foo alone
        called.append("call_subgraph")
        if g is OURS:
            out = (await subgraph.run({"foo": state["foo"]})).state
        else:
            out = await subgraph.ainvoke({"foo": state["foo"]})
        return {"foo": out["foo"]}

    def node(state: Any) -> Any:
        called.append("parent")
        if state["counter"] < 1:
            return g.Command(goto="call_subgraph", update={"counter": state["counter"] + 1})
        return {"foo": state["foo"] + "|" + "parent"}

    return (
        g.StateGraph(ParentFooCounter)
        .add_node(call_subgraph)
        .add_node(node)
        .add_edge(g.START, "call_subgraph")
        .add_edge("call_subgraph", "node")
    )


async def test_a_persistent_sub_graph_called_again_after_a_goto_keeps_its_state(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_interrupt_subgraph_reenter_checkpointer_true (the
    # sub-graph called from an async node: ours is awaited with run, LangGraph's ainvoke)
    ours_called: list[str] = []
    theirs_called: list[str] = []
    ours_bars: list[Any] = []
    theirs_bars: list[Any] = []
    ours = reentered(OURS, ours_called, ours_bars).compile(checkpointer=checkpointer)
    theirs = reentered(THEIRS, theirs_called, theirs_bars).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    paused = ["Provide value"]
    out = await run_both(ours, theirs, {"foo": "", "counter": 0})
    assert [i.value for i in out["__interrupt__"]] == paused
    assert {k: v for k, v in out.items() if k != "__interrupt__"} == {"foo": "", "counter": 0}
    out = await run_both(ours, theirs, OURS.Command(resume="bar"))
    assert [i.value for i in out["__interrupt__"]] == paused
    assert out["foo"] == "subgraph_2" and out["counter"] == 1
    out = await run_both(ours, theirs, OURS.Command(resume="qux"))
    assert out == {"foo": "subgraph_2|parent", "counter": 1}
    one_turn = [
        "call_subgraph",
        "subnode_1",
        "subnode_2",
        "call_subgraph",
        "subnode_2",
        "parent",
    ]
    assert ours_called == theirs_called == one_turn * 2
    # a new turn: the sub-graph's saved state (its bar) is still there
    out = await run_both(ours, theirs, {"foo": "meow", "counter": 0})
    assert [i.value for i in out["__interrupt__"]] == paused
    assert ours_bars == theirs_bars == [None, "barbaz", "quxbaz"]


# -- tool calls fanned out by Send, paused and edited (test_large_cases.py) ------------------


class Chat(TypedDict):
    messages: Annotated[list[Any], lg_message.add_messages]


class OursChat(TypedDict):
    messages: Annotated[list[Any], ours_add_messages]


def ai(i: int, *calls: tuple[str, str, int | None]) -> Any:
    tool_calls = [
        {
            "id": call_id,
            "name": "search_api",
            "args": {"query": query} if idx is None else {"query": query, "idx": idx},
        }
        for call_id, query, idx in calls
    ]
    return lc_messages.AIMessage(id=f"ai{i}", content="", tool_calls=tool_calls)


def packets(g: Any) -> Any:
    """``test_state_graph_packets``: an agent whose model answers with tool calls, each
    call sent to ``tools`` by a ``Send``, then "answer" (the model: a list of answers)."""
    answers = [
        ai(1, ("tool_call123", "query", None)),
        ai(2, ("tool_call234", "another", 0), ("tool_call567", "a third one", 1)),
        lc_messages.AIMessage(id="ai3", content="answer"),
    ]
    given = iter(range(len(answers)))

    def agent(data: Any) -> dict[str, Any]:
        return {"messages": answers[next(given)].model_copy(deep=True)}

    def should_continue(data: Any) -> Any:
        if tool_calls := data["messages"][-1].tool_calls:
            return [g.Send("tools", tool_call) for tool_call in tool_calls]
        return g.END

    def tools_node(call: Any) -> dict[str, Any]:
        return {
            "messages": lc_messages.ToolMessage(
                content=f"result for {call['args']['query']}",
                name=call["name"],
                tool_call_id=call["id"],
            )
        }

    workflow = g.StateGraph(OursChat if g is OURS else Chat)
    workflow.add_node("agent", agent)
    workflow.add_node("tools", tools_node)
    workflow.set_entry_point("agent")
    workflow.add_conditional_edges("agent", should_continue)
    workflow.add_edge("tools", "agent")
    return workflow


def plain(value: Any) -> Any:
    """Messages as (type, content, id, tool calls, tool call id), the ids the library made
    up left out (each makes its own): what both libraries can be compared on."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, lc_messages.BaseMessage):
        kept = value.id if value.id and value.id.startswith("ai") else None
        return (
            value.type,
            value.content,
            kept,
            getattr(value, "tool_calls", None),
            getattr(value, "tool_call_id", None),
        )
    return value


async def test_tool_calls_sent_one_by_one_paused_and_edited(checkpointer: Checkpointer) -> None:
    # LangGraph: test_large_cases.py::test_state_graph_packets (and its async twin), with
    # the tools' answers made in the node, not by a LangChain tool, and without its
    # "something_extra": a key a node returns that is no field reaches LangGraph's router
    # and is dropped; ours refuses it (docs/graph.md, "State": "A key that is not a field is
    # an InvalidUpdateError that names the key, whoever writes it")
    asked = {"messages": lc_messages.HumanMessage(content="what is weather in sf")}
    ours, theirs = pair(packets, None)
    out = await theirs.ainvoke(dict(asked))
    result = await ours.run(dict(asked))
    assert plain(result.raise_for_status().state) == plain(out)
    assert [m.content for m in out["messages"]] == [
        "what is weather in sf",
        "",
        "result for query",
        "",
        "result for another",
        "result for a third one",
        "answer",
    ]
    ours, theirs = pair(packets, None)
    theirs_items = [c async for c in theirs.astream(dict(asked), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(dict(asked), mode="updates")]
    assert plain(ours_items) == plain(theirs_items)
    assert [next(iter(c)) for c in ours_items] == [
        "agent",
        "tools",
        "agent",
        "tools",
        "tools",
        "agent",
    ]

    # paused after agent: the tool call is edited (the message of the same id replaced)
    ours, theirs = pair(packets, checkpointer, interrupt_after=["agent"])
    theirs_items = [c async for c in theirs.astream(dict(asked), cfg(), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(dict(asked), thread_id="1", mode="updates")]
    assert plain(ours_items) == plain(theirs_items)
    assert ours_items[-1] == {"__interrupt__": ()}

    async def states() -> tuple[Any, Any]:
        theirs_state = await theirs.aget_state(cfg())
        ours_state = await ours.get_state("1")
        assert plain(ours_state.values) == plain(theirs_state.values)
        assert ours_state.next == theirs_state.next
        assert [t.name for t in ours_state.tasks] == [t.name for t in theirs_state.tasks]
        return ours_state, theirs_state

    ours_state, theirs_state = await states()
    assert ours_state.next == ("tools",)
    for state, lib in ((theirs_state, theirs), (ours_state, ours)):
        last = state.values["messages"][-1]
        last.tool_calls[0]["args"]["query"] = "a different query"
        if lib is theirs:
            await theirs.aupdate_state(cfg(), {"messages": last})
        else:
            await ours.update_state("1", {"messages": last})
    ours_state, theirs_state = await states()
    assert len(ours_state.values["messages"]) == 2  # replaced, not appended
    assert ours_state.values["messages"][-1].tool_calls[0]["args"]["query"] == "a different query"
    assert ours_state.next == ("tools",)

    theirs_items = [c async for c in theirs.astream(None, cfg(), stream_mode="updates")]
    ours_items = [c async for c in ours.stream(None, thread_id="1", mode="updates")]
    assert plain(ours_items) == plain(theirs_items)
    assert [next(iter(c)) for c in ours_items] == ["tools", "agent", "__interrupt__"]
    ours_state, theirs_state = await states()
    assert ours_state.next == ("tools", "tools")  # one task per Send
    assert ours_state.values["messages"][2].content == "result for a different query"

    # the last answer replaced by one without tool calls (the same id): nothing is next
    for lib in (theirs, ours):
        answer = lc_messages.AIMessage(content="answer", id="ai2")
        if lib is theirs:
            await theirs.aupdate_state(cfg(), {"messages": answer})
        else:
            await ours.update_state("1", {"messages": answer})
    ours_state, theirs_state = await states()
    assert ours_state.next == () and ours_state.tasks == ()
    assert ours_state.values["messages"][-1].content == "answer"


# -- a resume that names the head checkpoint (test_time_travel.py) ---------------------------


def asking_executor(g: Any, called: list[str]) -> Any:
    def logged(name: str, item: str) -> Any:
        def node(state: Any) -> dict[str, Any]:
            called.append(name)
            return {"value": [item]}

        return node

    def ask_human(state: Any) -> dict[str, Any]:
        called.append("ask_human")
        return {"value": [f"human:{g.interrupt('Provide input:')}"]}

    subgraph = (
        g.StateGraph(Value)
        .add_node("step_a", logged("step_a", "sub_a"))
        .add_node("ask_human", ask_human)
        .add_node("step_b", logged("step_b", "sub_b"))
        .add_edge(g.START, "step_a")
        .add_edge("step_a", "ask_human")
        .add_edge("ask_human", "step_b")
        .compile(checkpointer=True)
    )
    return (
        g.StateGraph(Value).add_node("subgraph_node", subgraph).add_edge(g.START, "subgraph_node")
    )


async def test_a_resume_naming_the_head_goes_on_in_the_sub_graph(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_subgraph_interrupt_resume_with_explicit_head_
    # checkpoint_id: the sub-graph goes on from its question, nothing replayed
    ours_called: list[str] = []
    theirs_called: list[str] = []
    ours = asking_executor(OURS, ours_called).compile(checkpointer=checkpointer)
    theirs = asking_executor(THEIRS, theirs_called).compile(checkpointer=lg_memory.InMemorySaver())
    out = await run_both(ours, theirs, {"value": []})
    assert [i.value for i in out["__interrupt__"]] == ["Provide input:"]
    assert ours_called == theirs_called == ["step_a", "ask_human"]
    theirs_head = (await theirs.aget_state(cfg())).config["configurable"]["checkpoint_id"]
    ours_head = (await ours.get_state("1")).checkpoint_id
    ours_called.clear()
    theirs_called.clear()
    out = await theirs.ainvoke(
        THEIRS.Command(resume="answer"),
        {"configurable": {"thread_id": "1", "checkpoint_id": theirs_head, "checkpoint_ns": ""}},
    )
    result = await ours.run(OURS.Command(resume="answer"), thread_id="1", checkpoint_id=ours_head)
    assert result.raise_for_status().state == out == {"value": ["sub_a", "human:answer", "sub_b"]}
    assert ours_called == theirs_called == ["ask_human", "step_b"]


def asks_once(g: Any, started: Sightings) -> Any:
    def step_a(state: Any) -> dict[str, Any]:
        started.of(g).append(dict(state))
        return {"value": [f"a:{g.interrupt('question_a')}"]}

    sub = g.StateGraph(Value).add_node("step_a", step_a).add_edge(g.START, "step_a")
    return (
        g.StateGraph(Results)
        .add_node("parent_node", lambda state: {"results": ["p"]})
        .add_node("sub_node", sub.compile(checkpointer=True))
        .add_edge(g.START, "parent_node")
        .add_edge("parent_node", "sub_node")
    )


async def next_and_sources(ours: Any, theirs: Any) -> list[tuple[tuple[str, ...], str]]:
    """(next, source) of each checkpoint, newest first, the same on both libraries but for
    the replay's: LangGraph's "fork", our "rewind" (docs/graph.md, "Checkpointers")."""
    theirs_h = [(s.next, s.metadata["source"]) async for s in theirs.aget_state_history(cfg())]
    ours_h = [(h.next, h.source) for h in await ours.history("1")]
    named = {"rewind": "fork"}
    assert [(n, named.get(s, s)) for n, s in ours_h] == theirs_h
    return theirs_h


async def test_a_replayed_persistent_sub_graph_asks_again_from_its_earlier_state(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_subgraph_replay_loads_accumulated_state_then_resume
    started = Sightings()
    ours, theirs = pair(lambda g: asks_once(g, started), checkpointer)
    for answer in ("a1", "a2"):
        await run_both(ours, theirs, {"results": []})
        await run_both(ours, theirs, OURS.Command(resume=answer))
    assert (
        started.ours == started.theirs == [{"value": []}, {"value": []}] + [{"value": ["a:a1"]}] * 2
    )
    one_run = [((), "loop"), (("sub_node",), "loop"), (("parent_node",), "loop")]
    one_run += [(("__start__",), "input")]
    assert await next_and_sources(ours, theirs) == one_run * 2
    ours_at, theirs_at = await newest_with_next(ours, theirs, ("sub_node",))
    started.clear()
    out = await theirs.ainvoke(None, theirs_at)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_at)
    assert "__interrupt__" in out and result.status == "interrupted"
    assert started.ours == started.theirs == [{"value": ["a:a1"]}]
    assert await next_and_sources(ours, theirs) == [(("sub_node",), "fork"), *one_run * 2]
    out = await run_both(ours, theirs, OURS.Command(resume="a3"))
    assert out == {"results": ["p", "p"]}
    assert await next_and_sources(ours, theirs) == [
        ((), "loop"),
        (("sub_node",), "fork"),
        *one_run * 2,
    ]


# -- a graph run from a node under its own thread id (test_subgraph_persistence.py) ----------


class Count(TypedDict, total=False):
    count: int


class Outcome(TypedDict):
    result: str


def own_thread(g: Any, saver: Any) -> tuple[Any, Any]:
    child = (
        g.StateGraph(Count)
        .add_node("n", lambda state: {"count": (state.get("count") or 0) + 1})
        .add_edge(g.START, "n")
        .compile(checkpointer=saver)
    )

    async def parent_node(state: Any) -> dict[str, Any]:
        if g is OURS:
            (await child.run({}, thread_id="child")).raise_for_status()
        else:
            await child.ainvoke({}, cfg("child"))
        return {"result": "ok"}

    parent = g.StateGraph(Outcome).add_node("p", parent_node).add_edge(g.START, "p")
    return parent.compile(checkpointer=saver), child


async def test_a_graph_run_from_a_node_with_its_own_thread_id_is_a_run_of_that_thread(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_subgraph_persistence.py::test_child_with_own_thread_id_keeps_namespace
    # (docs/graph.md, "Calling a sub-graph from a node": a run with an explicit thread_id
    # from inside a node is a separate run of its own thread)
    ours, ours_child = own_thread(OURS, checkpointer)
    theirs, theirs_child = own_thread(THEIRS, lg_memory.InMemorySaver())
    for count in (1, 2):
        await run_both(ours, theirs, {"result": ""}, thread="parent")
        theirs_state = await theirs_child.aget_state(cfg("child"))
        ours_state = await ours_child.get_state("child")
        assert ours_state.values == theirs_state.values == {"count": count}
        assert theirs_state.config["configurable"]["checkpoint_ns"] == ""
        assert ours_state.ns == ""
    # the child's thread holds its two runs, as LangGraph's
    theirs_h = [
        (s.next, s.metadata["step"]) async for s in theirs_child.aget_state_history(cfg("child"))
    ]
    ours_h = [(h.next, h.step) for h in await ours_child.history("child")]
    assert ours_h == theirs_h
    assert ours_h == [
        ((), 4),
        (("n",), 3),
        (("__start__",), 2),
        ((), 1),
        (("n",), 0),
        (("__start__",), -1),
    ]


# -- a called sub-graph paused by its breakpoint, updated by its namespace (test_large_cases) -


class TheirsWeather(TypedDict, total=False):
    messages: Annotated[list[Any], lg_message.add_messages]
    city: str


class OursWeather(TypedDict, total=False):
    messages: Annotated[list[Any], ours_add_messages]
    city: str


class TheirsRouter(TypedDict, total=False):
    messages: Annotated[list[Any], lg_message.add_messages]
    route: str


class OursRouter(TypedDict, total=False):
    messages: Annotated[list[Any], ours_add_messages]
    route: str


def weather(g: Any) -> Any:
    def model_node(state: Any) -> dict[str, Any]:
        return {"city": "San Francisco"}  # the model's tool call's argument

    def weather_node(state: Any) -> dict[str, Any]:
        said = f"I'ts sunny in {state['city']}!"
        return {"messages": [lc_messages.AIMessage(content=said, id="sunny")]}

    subgraph = (
        g.StateGraph(OursWeather if g is OURS else TheirsWeather)
        .add_node(model_node)
        .add_node(weather_node)
        .add_edge(g.START, "model_node")
        .add_edge("model_node", "weather_node")
        .add_edge("weather_node", g.END)
        .compile(interrupt_before=["weather_node"])
    )

    async def weather_graph(state: Any) -> dict[str, Any]:
        # LangGraph's test passes the parent's state and returns the sub-graph's: ours
        # refuses a key that is no field (docs/graph.md, "State"), so both pass messages
        if g is OURS:
            out = (await subgraph.run({"messages": state["messages"]})).state
        else:
            out = await subgraph.ainvoke({"messages": state["messages"]})
        return {"messages": out["messages"]}

    def route_after_prediction(state: Any) -> str:
        return "weather_graph" if state["route"] == "weather" else "normal_llm_node"

    graph = g.StateGraph(OursRouter if g is OURS else TheirsRouter)
    graph.add_node("router_node", lambda state: {"route": "weather"})  # the model's choice
    graph.add_node("normal_llm_node", lambda state: {"messages": [lc_messages.AIMessage("Hello!")]})
    graph.add_node("weather_graph", weather_graph)
    graph.add_edge(g.START, "router_node")
    graph.add_conditional_edges(
        "router_node", route_after_prediction, path_map=["weather_graph", "normal_llm_node"]
    )
    graph.add_edge("normal_llm_node", g.END)
    return graph.add_edge("weather_graph", g.END)


async def test_a_called_sub_graph_paused_by_its_breakpoint_is_updated_by_its_namespace(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_large_cases.py::test_weather_subgraph (its models answer as fixed
    # functions; without the drawing and the custom stream)
    ours, theirs = pair(weather, checkpointer)
    inputs = {"messages": [lc_messages.HumanMessage(content="what's the weather in sf", id="q")]}

    async def streamed(value: Any, thread: str) -> list[Any]:
        theirs_items = [
            (tuple(n.split(":")[0] for n in ns), c)
            async for ns, c in theirs.astream(
                value, cfg(thread), stream_mode="updates", subgraphs=True
            )
        ]
        ours_items = [
            (shape(ns), c)
            async for ns, c in ours.stream(value, thread_id=thread, mode="updates", subgraphs=True)
        ]
        assert plain(ours_items) == plain(theirs_items)
        return ours_items

    paused = [
        ((), {"router_node": {"route": "weather"}}),
        (("weather_graph",), {"model_node": {"city": "San Francisco"}}),
        ((), {"__interrupt__": ()}),
    ]
    for thread, as_node in (("1", None), ("14", "weather_node")):
        assert await streamed(dict(inputs), thread) == paused
        theirs_state = await theirs.aget_state(cfg(thread), subgraphs=True)
        ours_state = await ours.get_state(thread, subgraphs=True)
        assert plain(ours_state.values) == plain(theirs_state.values)
        assert ours_state.next == theirs_state.next == ("weather_graph",)
        theirs_sub, ours_sub = theirs_state.tasks[0].state, ours_state.tasks[0].state
        assert plain(ours_sub.values) == plain(theirs_sub.values)
        assert ours_sub.values["city"] == "San Francisco"
        assert ours_sub.next == theirs_sub.next == ("weather_node",)
        if as_node is None:
            # the city changed: weather_node, run on, reads it
            await theirs.aupdate_state(theirs_sub.config, {"city": "la"})
            await ours.update_state(thread, {"city": "la"}, ns=ours_sub.ns)
            items = await streamed(None, thread)
            assert [(ns, next(iter(c))) for ns, c in items] == [
                (("weather_graph",), "weather_node"),
                ((), "weather_graph"),
            ]
            said = (await ours.get_state(thread)).values["messages"][-1].content
            assert said == "I'ts sunny in la!"
        else:
            # written as weather_node: the sub-graph has nothing left to run
            answer = lc_messages.AIMessage(content="rainy", id="rainy")
            await theirs.aupdate_state(theirs_sub.config, {"messages": [answer]}, as_node=as_node)
            await ours.update_state(thread, {"messages": [answer]}, as_node=as_node, ns=ours_sub.ns)
            theirs_state = await theirs.aget_state(cfg(thread), subgraphs=True)
            ours_state = await ours.get_state(thread, subgraphs=True)
            theirs_sub, ours_sub = theirs_state.tasks[0].state, ours_state.tasks[0].state
            assert plain(ours_sub.values) == plain(theirs_sub.values)
            assert ours_sub.next == theirs_sub.next == ()
            items = await streamed(None, thread)
            assert [(ns, next(iter(c))) for ns, c in items] == [((), "weather_graph")]
            said = (await ours.get_state(thread)).values["messages"][-1].content
            assert said == "rainy"
        theirs_done = await theirs.aget_state(cfg(thread))
        assert plain((await ours.get_state(thread)).values) == plain(theirs_done.values)


# -- a managed value under NotRequired or Required (test_managed_values.py) ------------------


class ManagedPlain(TypedDict, total=False):
    seen: list[int]
    remaining_steps: OursRemainingSteps


class ManagedNotRequired(TypedDict, total=False):
    seen: list[int]
    remaining_steps: NotRequired[OursRemainingSteps]


class ManagedRequired(TypedDict, total=False):
    seen: list[int]
    remaining_steps: Required[OursRemainingSteps]


class TheirsManagedPlain(TypedDict, total=False):
    seen: list[int]
    remaining_steps: lg_managed.RemainingSteps


class TheirsManagedNotRequired(TypedDict, total=False):
    seen: list[int]
    remaining_steps: NotRequired[lg_managed.RemainingSteps]


class TheirsManagedRequired(TypedDict, total=False):
    seen: list[int]
    remaining_steps: Required[lg_managed.RemainingSteps]


MANAGED_STATES = {
    "plain": (ManagedPlain, TheirsManagedPlain),
    "NotRequired": (ManagedNotRequired, TheirsManagedNotRequired),
    "Required": (ManagedRequired, TheirsManagedRequired),
}


@pytest.mark.parametrize("kind", list(MANAGED_STATES))
async def test_a_managed_value_is_one_under_not_required_or_required(kind: str) -> None:
    # LangGraph: test_managed_values.py::test_managed_values_recognized (LangGraph's test
    # reads StateGraph.managed; here two nodes read the value, and it is no state key)
    def build(g: Any) -> Any:
        state = MANAGED_STATES[kind][0 if g is OURS else 1]

        def node(state: Any) -> dict[str, Any]:
            return {"seen": [*state.get("seen", []), state["remaining_steps"]]}

        graph = g.StateGraph(state).add_node("a", node).add_node("b", node)
        return graph.add_edge(g.START, "a").add_edge("a", "b")

    ours, theirs = pair(build, None)
    out = await theirs.ainvoke({"seen": []}, {"recursion_limit": 10})
    result = await ours.run({"seen": []}, recursion_limit=10)
    assert result.raise_for_status().state == out
    assert out == {"seen": [9, 8]}
