"""Ports of LangGraph 1.2's ``Send(node, arg, timeout=...)``: the timeout of that one pushed
task, overriding its node's (``libs/langgraph/langgraph/types.py``: "If omitted, the target
node's timeout policy is used"). The same graph on LangGraph and on ``tinyagents.graph``, the
outcome compared.

The timeouts are short and the margins wide: a task that must time out sleeps far longer
than its timeout, one that must not far less than its own. Nothing asserts how long anything
took.
"""

from __future__ import annotations

import asyncio
import operator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, lg_errors, lg_memory, lg_types

from tinyagents.errors import ArgumentError, NodeTimeoutError
from tinyagents.graph import Command, Send, TimeoutPolicy
from tinyagents.store.checkpoint import MemoryCheckpointer

LIBS = {
    "ours": (OURS, Send, TimeoutPolicy, NodeTimeoutError),
    "theirs": (THEIRS, lg_types.Send, lg_types.TimeoutPolicy, lg_errors.NodeTimeoutError),
}


class Fan(TypedDict, total=False):
    done: Annotated[list[int], operator.add]


def fan_out(side: str, sleep_s: float, send_timeout: Any, node_timeout: Any = None) -> Any:
    """START sends ``n`` one task with ``{"i": 1}`` and ``send_timeout``; ``n`` (whose own
    timeout is ``node_timeout``) sleeps ``sleep_s`` and writes its ``i``."""
    lib, send, _, _ = LIBS[side]

    async def n(arg: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(sleep_s)
        return {"done": [arg["i"]]}

    options = {} if node_timeout is None else {"timeout": node_timeout}
    return (
        lib.StateGraph(Fan)
        .add_node("n", n, **options)
        .add_conditional_edges(lib.START, lambda s: [send("n", {"i": 1}, timeout=send_timeout)])
        .add_edge("n", lib.END)
        .compile()
    )


async def outcome(side: str, graph: Any, *args: Any, **kwargs: Any) -> Any:
    """The graph's state on ``{"done": []}`` (or what is given), or the ``NodeTimeoutError``
    it failed with, as ``(node, kind, run_timeout, idle_timeout)``."""
    error = LIBS[side][3]
    try:
        if side == "ours":
            result = await graph.run(*(args or ({"done": []},)), **kwargs)
            if isinstance(result.error, error):
                raise result.error
            return result.raise_for_status().state
        return await graph.ainvoke(*(args or ({"done": []},)), **kwargs)
    except error as exc:
        return (exc.node, exc.kind, exc.run_timeout, exc.idle_timeout)


async def both(make: Any) -> Any:
    theirs = await outcome("theirs", make("theirs"))
    ours = await outcome("ours", make("ours"))
    assert ours == theirs
    return ours


async def test_a_sends_timeout_times_out_its_task() -> None:
    # the node has no timeout; the Send gives its task one, which it outlives
    assert await both(lambda side: fan_out(side, 30.0, 0.05)) == ("n", "run", 0.05, None)
    idle = await both(lambda side: fan_out(side, 30.0, LIBS[side][2](idle_timeout=0.05)))
    assert idle == ("n", "idle", None, 0.05)


async def test_a_sends_timeout_overrides_its_nodes() -> None:
    # the node's own timeout would time the task out; the Send's, longer, is the one kept
    longer = await both(lambda side: fan_out(side, 0.3, timedelta(seconds=60), node_timeout=0.05))
    assert longer == {"done": [1]}
    # and no timeout on the Send leaves the node's
    assert await both(lambda side: fan_out(side, 30.0, None, node_timeout=0.05)) == (
        "n",
        "run",
        0.05,
        None,
    )


async def test_a_sends_timeout_holds_after_its_task_is_resumed() -> None:
    # the pushed task asks first, and outlives the Send's timeout once answered: its timeout
    # is kept with the pending task in the checkpoint
    async def run(side: str) -> Any:
        lib, send, _, _ = LIBS[side]

        async def n(arg: dict[str, Any]) -> dict[str, Any]:
            lib.interrupt("go?")
            await asyncio.sleep(30.0)
            return {"done": [arg["i"]]}

        saver = MemoryCheckpointer() if side == "ours" else lg_memory.InMemorySaver()
        graph = (
            lib.StateGraph(Fan)
            .add_node("n", n)
            .add_conditional_edges(lib.START, lambda s: [send("n", {"i": 1}, timeout=0.05)])
            .add_edge("n", lib.END)
            .compile(checkpointer=saver)
        )
        if side == "ours":
            first = await graph.run({"done": []}, thread_id="t")
            assert first.interrupts
            return await outcome(side, graph, Command(resume=True), thread_id="t")
        config = {"configurable": {"thread_id": "t"}}
        first = await graph.ainvoke({"done": []}, config)
        assert first["__interrupt__"]
        return await outcome(side, graph, lib.Command(resume=True), config)

    theirs, ours = await run("theirs"), await run("ours")
    assert ours == theirs == ("n", "run", 0.05, None)


def test_a_sends_timeout_is_a_timeout_policy_as_langgraphs() -> None:
    for side in LIBS:
        _, send, policy, _ = LIBS[side]
        assert send("n", 1).timeout is None
        assert send("n", 1, timeout=2).timeout == policy(run_timeout=2.0)
        assert send("n", 1, timeout=timedelta(milliseconds=250)).timeout == policy(run_timeout=0.25)
        assert send("n", 1, timeout=policy()).timeout is None  # sets neither: none
        assert send("n", 1) != send("n", 1, timeout=2)
        assert send("n", 1, timeout=2) == send("n", 1, timeout=policy(run_timeout=2))
        assert hash(send("n", 1, timeout=2)) == hash(send("n", 1, timeout=2.0))
        assert repr(send("n", 1)) == "Send(node='n', arg=1)"
    ours = Send("n", 1, timeout=2)
    assert repr(ours).startswith("Send(node='n', arg=1, timeout=TimeoutPolicy(")
    # LangGraph's policy is taken as ours
    theirs = lg_types.TimeoutPolicy(idle_timeout=0.5, refresh_on="heartbeat")
    assert Send("n", 1, timeout=theirs).timeout == TimeoutPolicy(
        idle_timeout=0.5, refresh_on="heartbeat"
    )
    with pytest.raises(ArgumentError, match="run_timeout must be finite and > 0"):
        Send("n", 1, timeout=0)
    with pytest.raises(ArgumentError):
        Send("n", 1, timeout="3")
