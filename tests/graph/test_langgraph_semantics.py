"""LangGraph semantics users expect (issue 10, items 4-12), each on every checkpointer.

Several are ports of programs from LangGraph's own test suite (``tests/test_pregel_async.py``):
the expected values are the ones LangGraph gives.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
from typing import Annotated, Any, TypedDict

import pytest
from graphkit import LogState, chain, logger
from pydantic import BaseModel

from tinyagents.errors import (
    ConfigurationError,
    GraphError,
    InvalidUpdateError,
    UnknownTargetError,
)
from tinyagents.graph import END, START, Command, Send, StateGraph, interrupt
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer

# -- item 4: writes of finished tasks are visible after an interrupt or a failure -----------


class Hello(TypedDict):
    hello: Annotated[str, operator.add]


def agent(state: Any) -> dict[str, Any]:
    return {"hello": " again"}


def bad(state: Any) -> dict[str, Any]:
    return {"hello": interrupt("I am bad")}


def two_from_start(cp: Checkpointer, second: Any) -> Any:
    graph = StateGraph(Hello).add_node("agent", agent).add_node("bad", second)
    for name in ("agent", "bad"):
        graph.add_edge(START, name).add_edge(name, END)
    return graph.compile(checkpointer=cp)


async def test_finished_writes_show_after_an_interrupt(checkpointer: Checkpointer) -> None:
    # LangGraph: test_interrupt_task_functional / "parallel nodes, one interrupts"
    graph = two_from_start(checkpointer, bad)
    result = await graph.run({"hello": "world"}, thread_id="1")
    assert result.status == "interrupted"
    assert result.state == {"hello": "world again"}
    snapshot = await graph.get_state("1")
    assert snapshot.values == {"hello": "world again"}
    assert snapshot.next == ("bad",)
    result = await graph.run(Command(resume=" there"), thread_id="1")
    assert result.status == "completed"
    assert result.state == {"hello": "world again there"}
    assert (await graph.get_state("1")).values == result.state


async def test_finished_writes_show_after_a_failure(checkpointer: Checkpointer) -> None:
    holder: dict[str, Any] = {}

    async def failing(state: Any) -> dict[str, Any]:
        # fail only once the sibling's write is saved, so the order is deterministic
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60  # a hang guard, not a timing assertion
        while loop.time() < deadline:
            if (await holder["graph"].get_state("1")).completed_tasks:
                break
            await asyncio.sleep(0)
        raise RuntimeError("boom")

    graph = holder["graph"] = two_from_start(checkpointer, failing)
    result = await graph.run({"hello": "world"}, thread_id="1")
    assert result.status == "failed" and isinstance(result.error, RuntimeError)
    assert result.state == {"hello": "world again"}
    snapshot = await graph.get_state("1")
    assert snapshot.values == {"hello": "world again"}
    assert snapshot.next == ("bad",)


async def test_checkpoint_recovery(checkpointer: Checkpointer) -> None:
    # LangGraph: test_checkpoint_recovery_async
    class State(TypedDict):
        steps: Annotated[list[str], operator.add]
        attempt: int

    async def failing_node(state: Any) -> dict[str, Any]:
        if state["attempt"] == 1:
            raise RuntimeError("Simulated failure")
        return {"steps": ["node1"]}

    async def second_node(state: Any) -> dict[str, Any]:
        return {"steps": ["node2"]}

    builder = StateGraph(State).add_node("node1", failing_node).add_node("node2", second_node)
    builder.add_edge(START, "node1").add_edge("node1", "node2").add_edge("node2", END)
    graph = builder.compile(checkpointer=checkpointer)

    failed = await graph.run({"steps": ["start"], "attempt": 1}, thread_id="1")
    assert failed.status == "failed" and isinstance(failed.error, RuntimeError)
    state = await graph.get_state("1")
    assert state.values == {"steps": ["start"], "attempt": 1}  # the input was saved
    assert state.next == ("node1",)  # the failed node is what runs next

    result = await graph.run({"steps": [], "attempt": 2}, thread_id="1")
    assert result.state == {"steps": ["start", "node1", "node2"], "attempt": 2}


# -- item 8: the returned state equals the saved state -------------------------------------


async def test_a_node_mutating_its_input_changes_neither_result_nor_checkpoint(
    checkpointer: Checkpointer,
) -> None:
    def mutate(state: Any) -> dict[str, Any]:
        state["log"].append("sneaky")  # a mutation, not a write
        return {"x": 1}

    graph = StateGraph(LogState).add_node("first", logger("first")).add_node("mutate", mutate)
    graph.add_node("last", logger("last"))
    graph.add_edge(START, "first").add_edge("first", "mutate").add_edge("mutate", "last")
    compiled = graph.add_edge("last", END).compile(checkpointer=checkpointer)
    result = await compiled.run({"log": ["start"]}, thread_id="t")
    saved = await compiled.get_state("t")
    assert result.state == saved.values
    assert saved.values == {"log": ["start", "first", "last"], "x": 1}


# -- item 5: Send with a TypedDict state under a checkpointer ------------------------------


class Fan(TypedDict, total=False):
    items: list[int]
    out: Annotated[list[int], operator.add]


async def test_send_of_the_state_itself_is_checkpointed(checkpointer: Checkpointer) -> None:
    def fan_out(state: Any) -> list[Send]:
        return [Send("work", state) for _ in state["items"]]

    def work(state: Any) -> dict[str, Any]:
        return {"out": [len(state["items"])]}

    graph = StateGraph(Fan).add_node("work", work).add_conditional_edges(START, fan_out)
    compiled = graph.add_edge("work", END).compile(checkpointer=checkpointer)
    result = await compiled.run({"items": [1, 2]}, thread_id="t")
    assert result.status == "completed", result.error
    assert result.state == {"items": [1, 2], "out": [2, 2]}
    assert (await compiled.get_state("t")).values == result.state


async def test_send_of_the_state_from_a_node_router_is_checkpointed(
    checkpointer: Checkpointer,
) -> None:
    def fan_out(state: Any) -> list[Send]:
        return [Send("work", state), Send("work", {"items": [9]})]

    def work(state: Any) -> dict[str, Any]:
        return {"out": list(state["items"])}

    graph = StateGraph(Fan).add_node("prep", lambda s: {"items": [1]}).add_node("work", work)
    graph.add_edge(START, "prep").add_conditional_edges("prep", fan_out)
    compiled = graph.add_edge("work", END).compile(checkpointer=checkpointer)
    result = await compiled.run({"items": []}, thread_id="t")
    assert result.status == "completed", result.error
    assert result.state == {"items": [1], "out": [1, 9]}


# -- item 6: replay re-runs the node from its first interrupt ------------------------------


def two_questions(calls: list[str]) -> Any:
    def ask(state: Any) -> dict[str, Any]:
        calls.append("ask")
        first = interrupt("first?")
        second = interrupt("second?")
        return {"log": [f"{first}/{second}"]}

    return ask


async def test_replay_reruns_the_node_from_its_first_interrupt(checkpointer: Checkpointer) -> None:
    calls: list[str] = []
    graph = StateGraph(LogState).add_node("ask", two_questions(calls)).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=checkpointer)
    result = await compiled.run({"log": []}, thread_id="t")
    [before] = [c for c in await compiled.history("t") if c.next == ("ask",)]
    assert result.interrupts[0].value == "first?"
    result = await compiled.run(Command(resume="a"), thread_id="t")
    assert result.interrupts[0].value == "second?"
    result = await compiled.run(Command(resume="b"), thread_id="t")
    assert result.status == "completed" and result.state["log"] == ["a/b"]

    replay = await compiled.run(None, thread_id="t", checkpoint_id=before.checkpoint_id)
    assert replay.status == "interrupted"
    assert [i.value for i in replay.interrupts] == ["first?"]
    assert calls == ["ask"] * 4
    replay = await compiled.run(Command(resume="c"), thread_id="t")
    assert [i.value for i in replay.interrupts] == ["second?"]
    replay = await compiled.run(Command(resume="d"), thread_id="t")
    assert replay.state["log"] == ["c/d"]
    assert (await compiled.get_state("t")).values == replay.state


# -- item 10: update_state(as_node=END) clears the pending tasks ---------------------------


async def test_update_state_as_end_clears_pending_tasks(checkpointer: Checkpointer) -> None:
    calls: list[str] = []
    graph = StateGraph(LogState).add_node("ask", two_questions(calls))
    graph.add_node("after", logger("after")).add_edge(START, "ask").add_edge("ask", "after")
    compiled = graph.add_edge("after", END).compile(checkpointer=checkpointer)
    await compiled.run({"log": []}, thread_id="t")
    assert (await compiled.get_state("t")).next == ("ask",)
    await compiled.update_state("t", {"log": ["closed"]}, as_node=END)
    snapshot = await compiled.get_state("t")
    assert snapshot.next == () and snapshot.interrupts == ()
    assert snapshot.values == {"log": ["closed"]}
    result = await compiled.run(None, thread_id="t")
    assert result.status == "completed" and result.state == {"log": ["closed"]}
    assert calls == ["ask"]


# -- item 12: Command(update=<state instance>) and a node returning a state instance --------


@dataclasses.dataclass
class DCState:
    name: str = ""
    log: Annotated[list[str], operator.add] = dataclasses.field(default_factory=list)


class PState(BaseModel):
    name: str = ""
    log: Annotated[list[str], operator.add] = []


@pytest.mark.parametrize("state_cls", [DCState, PState])
async def test_state_instances_as_node_output_and_command_update(
    checkpointer: Checkpointer, state_cls: Any
) -> None:
    def named(state: Any) -> Any:
        return state_cls(name="ada")

    def commanded(state: Any) -> Command:
        return Command(update=state_cls(log=["hi"]), goto="last")

    graph = StateGraph(state_cls).add_node("named", named)
    graph.add_node("commanded", commanded, destinations=("last",))
    graph.add_node("last", lambda s: {"log": ["last"]})
    graph.add_edge(START, "named").add_edge("named", "commanded").add_edge("last", END)
    compiled = graph.compile(checkpointer=checkpointer)
    result = await compiled.run({}, thread_id="t")
    assert result.status == "completed", result.error
    # as LangGraph reads an instance: every field of a dataclass, every pydantic field that
    # is not None, so Command(update=state_cls(log=["hi"])) writes name="" too
    # (test_langgraph_ports_state.py compares this with LangGraph)
    assert result.state == {"name": "", "log": ["hi", "last"]}
    assert (await compiled.get_state("t")).values == result.state
    result = await compiled.run(Command(update=state_cls(name="bob")), thread_id="t")
    assert result.state == {"name": "bob", "log": ["hi", "last"]}


async def test_a_node_returning_something_else_fails_with_a_typed_error(
    checkpointer: Checkpointer,
) -> None:
    graph = StateGraph(LogState).add_node("odd", lambda s: Command(update=["x"]))
    compiled = graph.add_edge(START, "odd").add_edge("odd", END).compile(checkpointer=checkpointer)
    result = await compiled.run({}, thread_id="t")
    assert isinstance(result.error, InvalidUpdateError)
    assert "a dict of state updates" in str(result.error)
    with pytest.raises(InvalidUpdateError, match=r"Command\.update"):
        await compiled.run(Command(update=3), thread_id="t")  # type: ignore[arg-type]


# -- item 9: static breakpoints --------------------------------------------------------------


async def test_breakpoints_set_at_compile_stop_each_time(checkpointer: Checkpointer) -> None:
    graph = chain("a", "b", "c").compile(
        checkpointer=checkpointer, interrupt_before=["b"], interrupt_after=["b"]
    )
    result = await graph.run({"log": []}, thread_id="t")
    assert result.status == "interrupted" and result.interrupts == []
    assert result.state == {"log": ["a"]}
    assert (await graph.get_state("t")).next == ("b",)
    await graph.update_state("t", {"x": 1})  # an edit at the breakpoint
    result = await graph.run(None, thread_id="t")  # passes the breakpoint before b
    assert result.status == "interrupted" and result.state == {"log": ["a", "b"], "x": 1}
    assert (await graph.get_state("t")).next == ("c",)
    result = await graph.run(None, thread_id="t")
    assert result.status == "completed" and result.state == {"log": ["a", "b", "c"], "x": 1}
    # a new input on the same thread stops at the same breakpoints again
    result = await graph.run({"log": []}, thread_id="t")
    assert result.status == "interrupted" and (await graph.get_state("t")).next == ("b",)


async def test_breakpoints_given_per_run(checkpointer: Checkpointer) -> None:
    graph = chain("a", "b", "c").compile(checkpointer=checkpointer)
    result = await graph.run({"log": []}, thread_id="t", interrupt_after=["a"])
    assert result.status == "interrupted" and result.state == {"log": ["a"]}
    result = await graph.run(None, thread_id="t", interrupt_before=["c"])
    assert result.status == "interrupted" and result.state == {"log": ["a", "b"]}
    assert (await graph.get_state("t")).next == ("c",)
    result = await graph.run(None, thread_id="t")
    assert result.status == "completed" and result.state == {"log": ["a", "b", "c"]}


async def test_breakpoints_need_known_nodes_and_a_checkpointer() -> None:
    with pytest.raises(ConfigurationError, match="nope"):
        chain("a").compile(checkpointer=MemoryCheckpointer(), interrupt_before=["nope"])
    with pytest.raises(GraphError, match="checkpointer"):
        await chain("a").compile(interrupt_after=["a"]).run({"log": []})
    with pytest.raises(GraphError, match="checkpointer"):
        await chain("a").compile().run({"log": []}, interrupt_before=["a"])


# -- item 7: replay gives sub-graphs a fresh namespace ---------------------------------------


def asking_subgraph() -> Any:
    def ask(state: Any) -> dict[str, Any]:
        return {"log": [f"sub:{interrupt('which?')}"]}

    return StateGraph(LogState).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)


def called_asking_subgraph() -> Any:
    """A node that calls ``asking_subgraph`` from its function, instead of being it."""
    sub = asking_subgraph().compile()

    async def call(state: Any) -> dict[str, Any]:
        return {"log": (await sub.run({"log": []})).state["log"]}

    return call


@pytest.mark.parametrize("kind", ["node", "called"])
async def test_replay_reruns_a_subgraph_in_a_fresh_namespace(
    checkpointer: Checkpointer, kind: str
) -> None:
    sub = asking_subgraph().compile() if kind == "node" else called_asking_subgraph()
    graph = StateGraph(LogState).add_node("sub", sub)
    graph.add_node("after", logger("after")).add_edge(START, "sub").add_edge("sub", "after")
    compiled = graph.add_edge("after", END).compile(checkpointer=checkpointer)
    await compiled.run({"log": []}, thread_id="t")
    [before] = [c for c in await compiled.history("t") if c.next == ("sub",)]
    result = await compiled.run(Command(resume="a"), thread_id="t")
    assert result.state == {"log": ["sub:a", "after"]}

    replay = await compiled.run(None, thread_id="t", checkpoint_id=before.checkpoint_id)
    assert replay.status == "interrupted" and [i.value for i in replay.interrupts] == ["which?"]
    result = await compiled.run(Command(resume="b"), thread_id="t")
    assert result.state == {"log": ["sub:b", "after"]}
    # replay plus an edit
    edit = Command(update={"log": ["edited"]})
    replay = await compiled.run(edit, thread_id="t", checkpoint_id=before.checkpoint_id)
    assert replay.status == "interrupted", replay.error
    result = await compiled.run(Command(resume="c"), thread_id="t")
    assert result.status == "completed", result.error
    assert result.state == {"log": ["edited", "sub:c", "after"]}
    assert (await compiled.get_state("t")).values == result.state


@pytest.mark.parametrize("kind", ["node", "called"])
async def test_fork_from_before_a_subgraph_reruns_it(checkpointer: Checkpointer, kind: str) -> None:
    # LangGraph: update_state at an older checkpoint forks there; running on from the fork
    # runs the sub-graph again, and a new answer to its interrupt is the one used
    sub = asking_subgraph().compile() if kind == "node" else called_asking_subgraph()
    graph = StateGraph(LogState).add_node("sub", sub).add_node("after", logger("after"))
    graph.add_edge(START, "sub").add_edge("sub", "after").add_edge("after", END)
    compiled = graph.compile(checkpointer=checkpointer)
    await compiled.run({"log": []}, thread_id="t")
    [before] = [c for c in await compiled.history("t") if c.next == ("sub",)]
    assert (await compiled.run(Command(resume="a"), thread_id="t")).state == {
        "log": ["sub:a", "after"]
    }

    forked = await compiled.update_state(
        "t", {"log": ["edited"]}, checkpoint_id=before.checkpoint_id
    )
    state = await compiled.get_state("t")
    assert state.checkpoint_id == forked and state.values == {"log": ["edited"]}
    assert state.next == ("sub",)
    again = await compiled.run(None, thread_id="t")
    assert again.status == "interrupted", again.error
    assert [i.value for i in again.interrupts] == ["which?"]
    result = await compiled.run(Command(resume="b"), thread_id="t")
    assert result.status == "completed", result.error
    assert result.state == {"log": ["edited", "sub:b", "after"]}
    assert (await compiled.get_state("t")).values == result.state

    # the same through fork(): a new thread from the old checkpoint, edited, run on
    other = await compiled.fork("t", before.checkpoint_id)
    await compiled.update_state(other, {"log": ["other"]})
    again = await compiled.run(None, thread_id=other)
    assert again.status == "interrupted", again.error
    result = await compiled.run(Command(resume="c"), thread_id=other)
    assert result.state == {"log": ["other", "sub:c", "after"]}


async def test_update_state_at_an_unknown_checkpoint_changes_nothing(
    checkpointer: Checkpointer,
) -> None:
    compiled = chain("a").compile(checkpointer=checkpointer)
    await compiled.run({"log": []}, thread_id="t")
    head = (await compiled.get_state("t")).checkpoint_id
    with pytest.raises(UnknownTargetError):
        await compiled.update_state("t", {"log": ["x"]}, checkpoint_id="ck-nope")
    [first] = [c for c in await compiled.history("t") if c.source == "input"]
    with pytest.raises(InvalidUpdateError):
        await compiled.update_state("t", {"nope": 1}, checkpoint_id=first.checkpoint_id)
    assert (await compiled.get_state("t")).checkpoint_id == head
