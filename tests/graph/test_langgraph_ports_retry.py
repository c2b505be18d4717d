"""Ports of LangGraph's retry policies given as a list (``add_node(...,
retry_policy=[RetryPolicy(...), ...])``; ``libs/langgraph/pregel/_retry.py``): the same program
on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.

For each error the first policy whose ``retry_on`` takes it decides (its ``max_attempts`` and
its waits); an error no policy takes fails the node at once. The attempts are counted across
the policies: a node's failures add up whichever policy retried them.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_memory, lg_types, shape

from tinyagents.graph import RetryPolicy
from tinyagents.store.checkpoint import Checkpointer


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def flaky_graph(g: Any, errors: list[type[Exception]], calls: list[int]) -> Any:
    """START → flaky: raises ``errors`` in turn, one per call, then writes."""
    policy = lg_types.RetryPolicy if g is THEIRS else RetryPolicy

    def flaky(state: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1](f"call {len(calls)}")
        return {"log": [f"flaky after {len(calls)} calls"]}

    policies = [
        policy(max_attempts=2, initial_interval=0.0, jitter=False, retry_on=ValueError),
        policy(max_attempts=3, initial_interval=0.0, jitter=False, retry_on=KeyError),
    ]
    graph = g.StateGraph(Log).add_node("flaky", flaky, retry_policy=policies)
    return graph.add_edge(g.START, "flaky")


@pytest.mark.parametrize(
    "errors",
    [
        [KeyError, KeyError],  # the second policy's three attempts: it succeeds
        [KeyError, KeyError, KeyError],  # past them: it fails
        [ValueError],  # the first policy's two attempts
        [ValueError, ValueError],  # past them
        [ValueError, KeyError],  # two failures of the three KeyError allows: it succeeds
        [KeyError, ValueError],  # a second failure is past ValueError's two
        [TypeError],  # no policy takes it
    ],
    ids=lambda errors: "-".join(e.__name__ for e in errors),
)
async def test_a_list_of_retry_policies(
    checkpointer: Checkpointer, errors: list[type[Exception]]
) -> None:
    theirs_calls: list[int] = []
    ours_calls: list[int] = []
    theirs = flaky_graph(THEIRS, errors, theirs_calls).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    ours = flaky_graph(OURS, errors, ours_calls).compile(checkpointer=checkpointer)
    try:
        expected: Any = await theirs.ainvoke({"log": []}, cfg())
    except Exception as exc:
        expected = type(exc)
    result = await ours.run({"log": []}, thread_id="1")
    got = result.state if result.status == "completed" else type(result.error)
    assert got == expected
    assert len(ours_calls) == len(theirs_calls)


# -- a retried node that runs a sub-graph ---------------------------------------------------


def retried_subgraph(g: Any, calls: list[str], how: str) -> Any:
    """START → p → END, p retried: a sub-graph node (``how="node"``) or a node that calls the
    sub-graph (``"call"``); the sub-graph is s1 → s2, and s2 fails once (a ConnectionError,
    which the default ``retry_on`` retries)."""
    policy = lg_types.RetryPolicy if g is THEIRS else RetryPolicy
    failed: list[int] = []

    def s1(state: Any) -> dict[str, Any]:
        calls.append("s1")
        return {"log": ["s1"]}

    def s2(state: Any) -> dict[str, Any]:
        calls.append("s2")
        if not failed:
            failed.append(1)
            raise ConnectionError("flaky")
        return {"log": ["s2"]}

    sub = g.StateGraph(Log).add_node("s1", s1).add_node("s2", s2)
    sub = sub.add_edge(g.START, "s1").add_edge("s1", "s2").add_edge("s2", g.END).compile()
    retry = policy(max_attempts=3, initial_interval=0.0, jitter=False)
    graph = g.StateGraph(Log)
    if how == "node":
        graph.add_node("p", sub, retry_policy=retry)
    else:

        async def p(state: Any) -> dict[str, Any]:
            calls.append("p")
            if g is THEIRS:
                return {"log": (await sub.ainvoke({"log": []}))["log"]}
            return {"log": (await sub.run({"log": []})).state["log"]}

        graph.add_node("p", p, retry_policy=retry)
    return graph.add_edge(g.START, "p").add_edge("p", g.END)


@pytest.mark.parametrize("how", ["node", "call"])
async def test_a_retried_node_goes_on_with_its_sub_graph(
    checkpointer: Checkpointer, how: str
) -> None:
    """docs/graph.md, "Nodes" (retry=): a retried attempt goes on with the sub-graph from
    its checkpoint in the same namespace (``p:<task id>``), so s1, which finished, does not
    run again. LangGraph's retry hands the sub-graph its "resuming" flag for that, but its
    count of the task's sub-graph calls is not reset between attempts: the retried attempt
    runs the sub-graph afresh in a namespace of its own (``p:<task id>|1``), s1 again."""
    theirs_calls: list[str] = []
    ours_calls: list[str] = []
    saver = lg_memory.InMemorySaver()
    theirs = retried_subgraph(THEIRS, theirs_calls, how).compile(checkpointer=saver)
    ours = retried_subgraph(OURS, ours_calls, how).compile(checkpointer=checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == out == {"log": ["s1", "s2"]}
    first = ["p"] if how == "call" else []
    assert theirs_calls == [*first, "s1", "s2", *first, "s1", "s2"]
    assert ours_calls == [*first, "s1", "s2", *first, "s2"]
    # LangGraph's namespaces: the root, p's first attempt's and its second's (``p:<id>|1``)
    assert sorted(map(shape, saver.storage["1"])) == [(), ("p",), ("p", "1")]
