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
from langgraph_kit import OURS, THEIRS, cfg, lg_memory, lg_types

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
