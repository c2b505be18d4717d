"""Ports of LangGraph's time-travel tests (``libs/langgraph/tests/test_time_travel_async.py``)
and of other ``test_pregel_async.py`` cases not ported elsewhere, on ``tinyagents.graph``.

Each test names the LangGraph test it ports. LangGraph's ``ainvoke(None, config)`` at a
checkpoint is our ``run(None, thread_id=..., checkpoint_id=...)`` (a replay); its
``aupdate_state(config_at_a_checkpoint, update)`` is our ``update_state(thread_id, update,
checkpoint_id=...)`` (a fork of the past, which becomes the thread's head: our history stays
one line, where LangGraph's branches). Every test runs on every checkpointer backend.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from typing import Annotated, Any, Literal, TypedDict

import pytest
from pydantic import BaseModel

from tinyagents.graph import START, Command, NodeContext, Send, StateGraph, add_messages, interrupt
from tinyagents.store.checkpoint import Checkpointer


class State(TypedDict):
    value: Annotated[list[str], operator.add]


def chain(*nodes: tuple[str, Any]) -> StateGraph:
    """START → the nodes in order (the last one ends the run)."""
    graph = StateGraph(State)
    for name, fn in nodes:
        graph.add_node(name, fn)
    graph.add_edge(START, nodes[0][0])
    for (a, _), (b, _) in itertools.pairwise(nodes):
        graph.add_edge(a, b)
    return graph


def logging_node(name: str, called: list[str]) -> Any:
    def node(state: State) -> dict[str, Any]:
        called.append(name)
        return {"value": [name]}

    return node


def asking_node(name: str, question: str, prefix: str, called: list[str]) -> Any:
    def node(state: State) -> dict[str, Any]:
        called.append(name)
        return {"value": [f"{prefix}:{interrupt(question)}"]}

    return node


async def last_with_next(graph: Any, thread: str, nxt: tuple[str, ...]) -> str:
    """The oldest checkpoint whose ``next`` is ``nxt`` (LangGraph's ``[... ][-1]``)."""
    return [h for h in await graph.history(thread) if h.next == nxt][-1].checkpoint_id


def a_b(called: list[str]) -> StateGraph:
    return chain(("a", logging_node("a", called)), ("b", logging_node("b", called)))


def a_ask_b(called: list[str]) -> StateGraph:
    return chain(
        ("a", logging_node("a", called)),
        ("ask", asking_node("ask", "What is your input?", "human", called)),
        ("b", logging_node("b", called)),
    )


# test_time_travel_async.py::test_replay_reruns_nodes_after_checkpoint
async def test_replay_reruns_nodes_after_checkpoint(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = a_b(called).compile(checkpointer=checkpointer)
    assert (await graph.run({"value": []}, thread_id="1")).state == {"value": ["a", "b"]}
    before_b = await last_with_next(graph, "1", ("b",))
    called.clear()
    replay = await graph.run(None, thread_id="1", checkpoint_id=before_b)
    assert replay.state == {"value": ["a", "b"]}
    assert called == ["b"]


# test_time_travel_async.py::test_replay_from_final_checkpoint_is_noop
async def test_replay_from_final_checkpoint_is_noop(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = chain(("a", logging_node("a", called))).compile(checkpointer=checkpointer)
    await graph.run({"value": []}, thread_id="1")
    state = await graph.get_state("1")
    assert state.next == ()
    called.clear()
    replay = await graph.run(None, thread_id="1", checkpoint_id=state.checkpoint_id)
    assert replay.status == "completed"
    assert replay.state == {"value": ["a"]}
    assert called == []


# test_time_travel_async.py::test_fork_reruns_with_modified_state
async def test_fork_reruns_with_modified_state(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = a_b(called).compile(checkpointer=checkpointer)
    await graph.run({"value": []}, thread_id="1")
    before_b = await last_with_next(graph, "1", ("b",))
    called.clear()
    fork = await graph.update_state("1", {"value": ["x"]}, checkpoint_id=before_b)
    result = await graph.run(None, thread_id="1", checkpoint_id=fork)
    assert called == ["b"]
    assert result.state == {"value": ["a", "x", "b"]}


# test_time_travel_async.py::test_multiple_forks_from_same_checkpoint
async def test_multiple_forks_from_same_checkpoint(checkpointer: Checkpointer) -> None:
    graph = a_b([]).compile(checkpointer=checkpointer)
    await graph.run({"value": []}, thread_id="1")
    before_b = await last_with_next(graph, "1", ("b",))
    fork1 = await graph.update_state("1", {"value": ["fork1"]}, checkpoint_id=before_b)
    result1 = await graph.run(None, thread_id="1", checkpoint_id=fork1)
    fork2 = await graph.update_state("1", {"value": ["fork2"]}, checkpoint_id=before_b)
    result2 = await graph.run(None, thread_id="1", checkpoint_id=fork2)
    assert result1.state == {"value": ["a", "fork1", "b"]}
    assert result2.state == {"value": ["a", "fork2", "b"]}


# test_time_travel_async.py::test_replay_from_before_interrupt_refires
async def test_replay_from_before_interrupt_refires(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = a_ask_b(called).compile(checkpointer=checkpointer)
    assert (await graph.run({"value": []}, thread_id="1")).status == "interrupted"
    done = await graph.run(Command(resume="hello"), thread_id="1")
    assert done.state == {"value": ["a", "human:hello", "b"]}
    assert called == ["a", "ask", "ask", "b"]
    before_ask = await last_with_next(graph, "1", ("ask",))
    replay = await graph.run(None, thread_id="1", checkpoint_id=before_ask)
    assert replay.status == "interrupted"
    assert [i.value for i in replay.interrupts] == ["What is your input?"]
    assert replay.state == {"value": ["a"]}
    assert called == ["a", "ask", "ask", "b", "ask"]


# test_time_travel_async.py::test_replay_interrupt_stable_across_replays
async def test_replay_interrupt_stable_across_replays(checkpointer: Checkpointer) -> None:
    graph = a_ask_b([]).compile(checkpointer=checkpointer)
    await graph.run({"value": []}, thread_id="1")
    await graph.run(Command(resume="cached_answer"), thread_id="1")
    before_ask = await last_with_next(graph, "1", ("ask",))
    results = [await graph.run(None, thread_id="1", checkpoint_id=before_ask) for _ in range(3)]
    assert [[i.value for i in r.interrupts] for r in results] == [["What is your input?"]] * 3
    assert [r.state for r in results] == [{"value": ["a"]}] * 3


# test_time_travel_async.py::test_fork_from_before_interrupt_refires
async def test_fork_from_before_interrupt_refires(checkpointer: Checkpointer) -> None:
    graph = a_ask_b([]).compile(checkpointer=checkpointer)
    await graph.run({"value": []}, thread_id="1")
    await graph.run(Command(resume="hello"), thread_id="1")
    before_ask = await last_with_next(graph, "1", ("ask",))
    fork = await graph.update_state("1", {"value": ["forked"]}, checkpoint_id=before_ask)
    result = await graph.run(None, thread_id="1", checkpoint_id=fork)
    assert [i.value for i in result.interrupts] == ["What is your input?"]
    final = await graph.run(Command(resume="world"), thread_id="1", checkpoint_id=fork)
    assert final.state == {"value": ["a", "forked", "human:world", "b"]}


# test_time_travel_async.py::test_fork_from_interrupt_checkpoint_refires
async def test_fork_from_interrupt_checkpoint_refires(checkpointer: Checkpointer) -> None:
    graph = a_ask_b([]).compile(checkpointer=checkpointer)
    await graph.run({"value": []}, thread_id="1")
    await graph.run(Command(resume="hello"), thread_id="1")
    asked = []
    for h in await graph.history("1"):
        snapshot = await graph.get_state("1", h.checkpoint_id)
        if snapshot.next == ("ask",) and any(t.interrupts for t in snapshot.tasks):
            asked.append(h.checkpoint_id)
    at_interrupt = asked[0]
    fork = await graph.update_state("1", {"value": ["forked"]}, checkpoint_id=at_interrupt)
    result = await graph.run(None, thread_id="1", checkpoint_id=fork)
    assert result.status == "interrupted"
    final = await graph.run(Command(resume="different"), thread_id="1")
    assert "human:different" in final.state["value"]


# test_time_travel_async.py::test_sequential_interrupts_fork_from_middle
async def test_sequential_interrupts_fork_from_middle(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = chain(
        ("a", logging_node("a", called)),
        ("i1", asking_node("i1", "First question?", "i1", called)),
        ("i2", asking_node("i2", "Second question?", "i2", called)),
        ("b", logging_node("b", called)),
    ).compile(checkpointer=checkpointer)
    r1 = await graph.run({"value": []}, thread_id="1")
    assert [i.value for i in r1.interrupts] == ["First question?"]
    r2 = await graph.run(Command(resume="ans1"), thread_id="1")
    assert [i.value for i in r2.interrupts] == ["Second question?"]
    r3 = await graph.run(Command(resume="ans2"), thread_id="1")
    assert r3.state == {"value": ["a", "i1:ans1", "i2:ans2", "b"]}

    between = await last_with_next(graph, "1", ("i2",))
    before_i1 = await last_with_next(graph, "1", ("i1",))
    fork = await graph.update_state("1", {"value": ["mid_fork"]}, checkpoint_id=between)
    forked = await graph.run(None, thread_id="1", checkpoint_id=fork)
    assert [i.value for i in forked.interrupts] == ["Second question?"]
    final = await graph.run(Command(resume="new_b"), thread_id="1", checkpoint_id=fork)
    assert final.state == {"value": ["a", "i1:ans1", "mid_fork", "i2:new_b", "b"]}

    called.clear()
    replay = await graph.run(None, thread_id="1", checkpoint_id=before_i1)
    assert [i.value for i in replay.interrupts] == ["First question?"]
    assert called == ["i1"]


# test_time_travel_async.py::test_multiple_interrupts_in_one_node
async def test_multiple_interrupts_in_one_node(checkpointer: Checkpointer) -> None:
    def ask(state: State) -> dict[str, Any]:
        first = interrupt("First question?")
        second = interrupt("Second question?")
        return {"value": [f"a1:{first}", f"a2:{second}"]}

    graph = chain(("ask", ask), ("after", lambda s: {"value": ["done"]}))
    compiled = graph.compile(checkpointer=checkpointer)
    result = await compiled.run({"value": []}, thread_id="1")
    assert [i.value for i in result.interrupts] == ["First question?"]
    head = (await compiled.get_state("1")).checkpoint_id
    result = await compiled.run(Command(resume="ans1"), thread_id="1", checkpoint_id=head)
    assert [i.value for i in result.interrupts] == ["Second question?"]
    head = (await compiled.get_state("1")).checkpoint_id
    result = await compiled.run(Command(resume="ans2"), thread_id="1", checkpoint_id=head)
    assert result.state == {"value": ["a1:ans1", "a2:ans2", "done"]}
    before_ask = await last_with_next(compiled, "1", ("ask",))
    replay = await compiled.run(None, thread_id="1", checkpoint_id=before_ask)
    assert [i.value for i in replay.interrupts] == ["First question?"]


def sub_with(called: list[str], *, ask: bool) -> Any:
    """The sub-graph of LangGraph's section 4/5: step_a (→ ask_human) → step_b."""
    nodes = [("step_a", logging_node("step_a", called))]
    if ask:
        nodes.append(("ask_human", asking_node("ask_human", "Provide input:", "human", called)))
    nodes.append(("step_b", logging_node("step_b", called)))
    return chain(*nodes).compile()


def parent_of(sub: Any, called: list[str], checkpointer: Checkpointer) -> Any:
    return chain(
        ("router", logging_node("router", called)),
        ("subgraph_node", sub),
        ("post", logging_node("post", called)),
    ).compile(checkpointer=checkpointer)


# test_time_travel_async.py::test_subgraph_replay_from_before. The sub-graph gives back what
# it appended (LangGraph's gives back its whole list, which the parent's reducer appends
# again): our values are exact, theirs only checked with `in`.
async def test_subgraph_replay_from_before(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = parent_of(sub_with(called, ask=False), called, checkpointer)
    result = await graph.run({"value": []}, thread_id="1")
    assert result.state == {"value": ["router", "step_a", "step_b", "post"]}
    before_sub = await last_with_next(graph, "1", ("subgraph_node",))
    called.clear()
    replay = await graph.run(None, thread_id="1", checkpoint_id=before_sub)
    assert replay.state == {"value": ["router", "step_a", "step_b", "post"]}
    assert called == ["step_a", "step_b", "post"]


# test_time_travel_async.py::test_subgraph_fork_from_before
async def test_subgraph_fork_from_before(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = parent_of(sub_with(called, ask=False), called, checkpointer)
    await graph.run({"value": []}, thread_id="1")
    before_sub = await last_with_next(graph, "1", ("subgraph_node",))
    called.clear()
    fork = await graph.update_state("1", {"value": ["forked"]}, checkpoint_id=before_sub)
    result = await graph.run(None, thread_id="1", checkpoint_id=fork)
    assert called == ["step_a", "step_b", "post"]
    assert result.state == {"value": ["router", "forked", "step_a", "step_b", "post"]}


# test_time_travel_async.py::test_subgraph_interrupt_replay_from_parent (and
# ::test_subgraph_interrupt_replay_from_interrupt_checkpoint: ours has one checkpoint there)
async def test_subgraph_interrupt_replay_from_parent(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = parent_of(sub_with(called, ask=True), called, checkpointer)
    assert (await graph.run({"value": []}, thread_id="1")).status == "interrupted"
    state = await graph.get_state("1", subgraphs=True)
    assert state.tasks[0].state is not None
    assert state.tasks[0].state.next == ("ask_human",)
    done = await graph.run(Command(resume="answer"), thread_id="1")
    assert done.state == {"value": ["router", "step_a", "human:answer", "step_b", "post"]}
    before_sub = await last_with_next(graph, "1", ("subgraph_node",))
    called.clear()
    replay = await graph.run(None, thread_id="1", checkpoint_id=before_sub)
    assert [i.value for i in replay.interrupts] == ["Provide input:"]
    assert called == ["step_a", "ask_human"]
    final = await graph.run(Command(resume="again"), thread_id="1")
    assert final.state == {"value": ["router", "step_a", "human:again", "step_b", "post"]}


# test_time_travel_async.py::test_subgraph_interrupt_full_flow: LangGraph's update at the
# sub-graph's checkpoint is our update_state with the sub-graph's ``ns`` (at its head).
async def test_subgraph_interrupt_full_flow(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = parent_of(sub_with(called, ask=True), called, checkpointer)
    result = await graph.run({"value": []}, thread_id="1")
    assert result.status == "interrupted"
    assert called == ["router", "step_a", "ask_human"]
    sub_state = (await graph.get_state("1", subgraphs=True)).tasks[0].state
    assert sub_state is not None
    called.clear()
    await graph.update_state("1", {"value": ["sub_forked"]}, ns=sub_state.ns)
    forked = await graph.run(None, thread_id="1")
    assert [i.value for i in forked.interrupts] == ["Provide input:"]
    called.clear()
    final = await graph.run(Command(resume="new_answer"), thread_id="1")
    assert called == ["ask_human", "step_b", "post"]
    assert final.state == {
        "value": ["router", "step_a", "sub_forked", "human:new_answer", "step_b", "post"]
    }


# test_time_travel_async.py::test_subgraph_time_travel_after_completion_async
async def test_subgraph_time_travel_after_completion(checkpointer: Checkpointer) -> None:
    called: list[str] = []

    async def ask(state: State, name: str, question: str) -> dict[str, Any]:
        called.append(name)
        return {"value": [f"{name}:{interrupt(question)}"]}

    executor = chain(
        ("step_a", logging_node("step_a", called)),
        ("ask_1", lambda s: ask(s, "ask_1", "Question 1?")),
        ("ask_2", lambda s: ask(s, "ask_2", "Question 2?")),
    ).compile()
    graph = chain(("executor", executor)).compile(checkpointer=checkpointer)
    first = await graph.run({"value": []}, thread_id="1")
    assert [i.value for i in first.interrupts] == ["Question 1?"]
    second = await graph.run(Command(resume="answer_1"), thread_id="1")
    assert [i.value for i in second.interrupts] == ["Question 2?"]
    await graph.run(Command(resume="answer_2"), thread_id="1")
    final = await graph.get_state("1")
    assert final.tasks == ()
    called.clear()
    replay = await graph.run(None, thread_id="1", checkpoint_id=final.checkpoint_id)
    assert replay.status == "completed"
    assert called == []
    assert replay.state == {"value": ["step_a", "ask_1:answer_1", "ask_2:answer_2"]}


# test_time_travel_async.py::test_replay_from_before_interrupt_then_resume_async. Our replay
# saves a ``rewind`` where LangGraph saves a ``fork``, and keeps one line of history: the
# replayed branch follows the original instead of hanging beside it.
async def test_replay_from_before_interrupt_then_resume(checkpointer: Checkpointer) -> None:
    called: list[str] = []
    graph = a_ask_b(called).compile(checkpointer=checkpointer)
    await graph.run({"value": []}, thread_id="1")
    await graph.run(Command(resume="old_answer"), thread_id="1")

    async def summary() -> list[tuple[str, tuple[str, ...], list[str]]]:
        out = []
        for h in await graph.history("1"):
            values = (await graph.get_state("1", h.checkpoint_id)).values
            out.append((h.source, h.next, values["value"]))
        return out

    original = [
        ("loop", (), ["a", "human:old_answer", "b"]),
        ("loop", ("b",), ["a", "human:old_answer"]),
        ("loop", ("ask",), ["a"]),
        ("loop", ("a",), []),
        ("input", ("__start__",), []),
    ]
    assert await summary() == original
    before_ask = await last_with_next(graph, "1", ("ask",))
    called.clear()
    replay = await graph.run(None, thread_id="1", checkpoint_id=before_ask)
    assert [i.value for i in replay.interrupts] == ["What is your input?"]
    assert called == ["ask"]
    assert await summary() == [("rewind", ("ask",), ["a"]), *original]
    called.clear()
    final = await graph.run(Command(resume="new_answer"), thread_id="1")
    assert final.state == {"value": ["a", "human:new_answer", "b"]}
    assert called == ["ask", "b"]
    assert await summary() == [
        ("loop", (), ["a", "human:new_answer", "b"]),
        ("loop", ("b",), ["a", "human:new_answer"]),
        ("rewind", ("ask",), ["a"]),
        *original,
    ]


class Named(TypedDict):
    name: Annotated[str, lambda a, b: " > ".join([a, b]) if a else b]


def one_two_three() -> StateGraph:
    def one(state: Named) -> Command:
        return Command(goto=[Send("two", {})], update={"name": "one"})

    graph = StateGraph(Named).add_node("one", one)
    graph.add_node("two", lambda s: {"name": "two"}).add_node("three", lambda s: {"name": "three"})
    return graph.add_edge(START, "one").add_edge("one", "two").add_edge("two", "three")


# test_pregel_async.py::test_fork_and_update_task_results (its first history tree; its
# ``__copy__`` and bulk updates are not ours): each past checkpoint's tasks hold what each
# task wrote, not what the channel's reducer made of it.
async def test_history_tasks_hold_each_tasks_write(checkpointer: Checkpointer) -> None:
    graph = one_two_three().compile(checkpointer=checkpointer)
    result = await graph.run({"name": "start"}, thread_id="1")
    assert result.state == {"name": "start > one > two > two > three"}
    tree = []
    for h in reversed(await graph.history("1")):
        snapshot = await graph.get_state("1", h.checkpoint_id)
        tree.append(("checkpoint", snapshot.values))
        tree.extend(("task", t.name, t.result) for t in snapshot.tasks)
    assert tree == [
        ("checkpoint", {"name": ""}),
        ("task", "__start__", {"name": "start"}),
        ("checkpoint", {"name": "start"}),
        ("task", "one", {"name": "one"}),
        ("checkpoint", {"name": "start > one"}),
        ("task", "two", {"name": "two"}),
        ("task", "two", {"name": "two"}),
        ("checkpoint", {"name": "start > one > two > two"}),
        ("task", "three", {"name": "three"}),
        ("checkpoint", {"name": "start > one > two > two > three"}),
    ]
    # the kept results do not stop a replay or a fork of the past from running the step again
    before_three = await last_with_next(graph, "1", ("three",))
    fork = await graph.fork("1", before_three)
    assert (await graph.run(None, thread_id=fork)).state == {
        "name": "start > one > two > two > three"
    }
    replay = await graph.run(None, thread_id="1", checkpoint_id=before_three)
    assert replay.state == {"name": "start > one > two > two > three"}


# test_messages_state.py::test_duplicate_remove_message, ::test_duplicates_in_input_with_remove
def test_add_messages_removes_at_the_end_of_a_write() -> None:
    messages = pytest.importorskip("langchain_core.messages")
    hello = messages.HumanMessage(content="Hello", id="1")
    hi = messages.AIMessage(content="Hi there!", id="2")
    twice = [messages.RemoveMessage(id="2"), messages.RemoveMessage(id="2")]
    assert add_messages([hello, hi], twice) == [hello]
    # a message removed and written again in one write keeps its place, as LangGraph's
    again = messages.HumanMessage(content="Hello again", id="1")
    assert add_messages([hello, hi], [messages.RemoveMessage(id="1"), again]) == [again, hi]
    with pytest.raises(ValueError, match="Attempting to delete a message with an ID"):
        add_messages([hello], messages.RemoveMessage(id="2"))


class Chat(TypedDict):
    messages: Annotated[list[Any], add_messages]


# the same in a graph: each node's write is merged as one add_messages call (LangGraph folds
# a step's writes one by one), and the state a run returns is the state it saved
async def test_add_messages_writes_of_a_step_merge_one_by_one(checkpointer: Checkpointer) -> None:
    messages = pytest.importorskip("langchain_core.messages")
    remove = messages.RemoveMessage
    graph = StateGraph(Chat)
    graph.add_node("twice", lambda s: {"messages": [remove(id="2"), remove(id="2")]})
    graph.add_node("edit", lambda s: {"messages": [remove(id="1"), ("user", "edited")]})
    graph.add_node("drop", lambda s: {"messages": [remove(id="3")]})
    graph.add_node("readd", lambda s: {"messages": [messages.AIMessage(content="back", id="3")]})
    graph.add_edge(START, "twice").add_edge("twice", "edit")
    graph.add_edge("edit", "drop").add_edge("edit", "readd")
    compiled = graph.compile(checkpointer=checkpointer)
    start = [
        messages.HumanMessage(content="a", id="1"),
        messages.AIMessage(content="b", id="2"),
        messages.AIMessage(content="c", id="3"),
        messages.HumanMessage(content="d", id="4"),
    ]
    result = await compiled.run({"messages": start}, thread_id="1")
    assert result.status == "completed", result.error
    contents = [m.content for m in result.state["messages"]]
    assert contents == ["d", "edited", "back"]  # LangGraph's result
    saved = (await compiled.get_state("1")).values["messages"]
    assert [m.content for m in saved] == contents


class Result(TypedDict):
    result: str


# test_subgraph_persistence_async.py::test_stateless_state_resets_with_interrupt_async (and
# ::test_stateless_interrupt_resume_async): a graph run from a node without a thread id is
# that node's sub-graph call; it pauses and resumes with its caller (a resumed call goes on
# from its checkpoint, whatever input it is given) and starts afresh on the next input.
async def test_a_called_sub_graph_resets_between_inputs(checkpointer: Checkpointer) -> None:
    messages = pytest.importorskip("langchain_core.messages")

    def process(state: Chat) -> dict[str, Any]:
        interrupt("continue?")
        said = state["messages"][-1].content
        return {"messages": [messages.AIMessage(content=f"Processing: {said}")]}

    inner_graph = (
        StateGraph(Chat)
        .add_node("process", process)
        .add_node("respond", lambda s: {"messages": [messages.AIMessage(content="Done")]})
        .add_edge(START, "process")
        .add_edge("process", "respond")
        .compile()
    )
    seen: list[list[str]] = []
    calls = 0

    async def call_inner(state: Result) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        topic = "apples" if calls == 1 else "bananas"
        asked = messages.HumanMessage(content=f"tell me about {topic}")
        out = await inner_graph.run({"messages": [asked]})
        seen.append([m.content for m in out.state["messages"]])
        return {"result": out.state["messages"][-1].content}

    parent = StateGraph(Result).add_node("call_inner", call_inner).add_edge(START, "call_inner")
    graph = parent.compile(checkpointer=checkpointer)
    for _ in range(2):
        paused = await graph.run({"result": ""}, thread_id="1")
        assert paused.state == {"result": ""}
        assert [i.value for i in paused.interrupts] == ["continue?"]
        done = await graph.run(Command(resume=True), thread_id="1")
        assert done.state == {"result": "Done"}
    assert seen == [
        ["tell me about apples", "Processing: tell me about apples", "Done"],
        ["tell me about bananas", "Processing: tell me about bananas", "Done"],
    ]


class Joined(TypedDict):
    foo: Annotated[str, lambda a, b: ", ".join([x for x in [a, b] if x])]


def one_writes_twice() -> Any:
    def one(state: Joined) -> Command:
        return Command(update=[("foo", "one.0"), ("foo", "one.1")])

    graph = StateGraph(Joined).add_node("one", one).add_node("two", lambda s: {"foo": "two"})
    return graph.add_edge(START, "one").add_edge("one", "two")


# test_pregel.py::test_multiple_writes_same_channel_from_same_node (its history)
async def test_history_shows_each_write_of_a_key_written_twice(
    checkpointer: Checkpointer,
) -> None:
    graph = one_writes_twice().compile(checkpointer=checkpointer)
    await graph.run({"foo": "input"}, thread_id="1")
    history = []
    for h in await graph.history("1"):
        snapshot = await graph.get_state("1", h.checkpoint_id)
        history.append(([(t.name, t.result) for t in snapshot.tasks], snapshot.values))
    assert history == [
        ([], {"foo": "input, one.0, one.1, two"}),
        ([("two", {"foo": "two"})], {"foo": "input, one.0, one.1"}),
        ([("one", {"foo": {"$writes": ["one.0", "one.1"]}})], {"foo": "input"}),
        ([("__start__", {"foo": "input"})], {"foo": ""}),
    ]


# test_pregel.py::test_multiple_writes_same_channel_from_same_node (its stream; our ``tasks``
# start items have no ``triggers``), and LangGraph's map_output_updates for a node's list of
# Commands: one dict per write once a key is written twice, else the writes in one dict
async def test_updates_stream_shows_each_write_of_a_key_written_twice() -> None:
    events = [
        (mode, {k: v for k, v in item.items() if k != "id"})
        async for mode, item in one_writes_twice()
        .compile()
        .stream({"foo": "input"}, mode=["updates", "tasks"])
    ]
    assert events == [
        ("tasks", {"name": "one", "input": {"foo": "input"}}),
        ("updates", {"one": [{"foo": "one.0"}, {"foo": "one.1"}]}),
        (
            "tasks",
            {
                "name": "one",
                "error": None,
                "result": {"foo": {"$writes": ["one.0", "one.1"]}},
                "interrupts": [],
            },
        ),
        ("tasks", {"name": "two", "input": {"foo": "input, one.0, one.1"}}),
        ("updates", {"two": {"foo": "two"}}),
        ("tasks", {"name": "two", "error": None, "result": {"foo": "two"}, "interrupts": []}),
    ]


class FooBar(TypedDict, total=False):
    foo: Annotated[str, operator.add]
    bar: int


async def test_updates_stream_of_a_list_of_commands_as_langgraphs() -> None:
    returns = [
        [Command(update={"foo": "a"}), Command(update={"bar": 1})],
        [Command(update={"foo": "a", "bar": 1}), Command(update={"foo": "b"})],
        Command(update=[("foo", "a"), ("bar", 1), ("foo", "b")]),
        [{"foo": "a"}, Command(update={"foo": "b"})],
    ]
    seen = []
    for returned in returns:
        graph = StateGraph(FooBar).add_node("n", lambda s, r=returned: r).add_edge(START, "n")
        seen.append([u async for u in graph.compile().stream({"foo": ""}, mode="updates")])
    assert seen == [  # what LangGraph's astream gives
        [{"n": {"foo": "a", "bar": 1}}],
        [{"n": [{"foo": "a"}, {"bar": 1}, {"foo": "b"}]}],
        [{"n": [{"foo": "a"}, {"bar": 1}, {"foo": "b"}]}],
        [{"n": [{"foo": "a"}, {"foo": "b"}]}],
    ]


# test_time_travel_async.py::test_update_state_with_none_values
async def test_update_state_with_none_at_a_past_checkpoint(checkpointer: Checkpointer) -> None:
    graph = a_ask_b([]).compile(checkpointer=checkpointer)
    await graph.run({"value": []}, thread_id="1")
    await graph.run(Command(resume="hello"), thread_id="1")
    before_ask = await last_with_next(graph, "1", ("ask",))
    fork = await graph.update_state("1", None, checkpoint_id=before_ask)
    result = await graph.run(None, thread_id="1", checkpoint_id=fork)
    assert [i.value for i in result.interrupts] == ["What is your input?"]
    assert result.state == {"value": ["a"]}
    assert (await graph.get_state("1", fork)).metadata["source"] == "update"


class Data(TypedDict):
    data: str


# test_time_travel_async.py::test_get_state_with_subgraphs_returns_subgraph_state and
# ::test_checkpoint_ns_accessible_in_subgraph (our NodeContext holds what LangGraph's config
# does)
async def test_a_sub_graphs_state_and_namespace(checkpointer: Checkpointer) -> None:
    seen: dict[str, Any] = {}

    def process(state: Data, ctx: NodeContext) -> dict[str, Any]:
        seen.update(ns=ctx.ns, thread_id=ctx.thread_id)
        interrupt("Continue?")
        return {"data": "processed"}

    sub = StateGraph(Data).add_node("process", process).add_edge(START, "process").compile()
    graph = StateGraph(Data).add_node("sub", sub).add_edge(START, "sub")
    compiled = graph.compile(checkpointer=checkpointer)
    await compiled.run({"data": "input"}, thread_id="1")
    assert seen["thread_id"] == "1"
    assert seen["ns"].startswith("sub:")
    state = await compiled.get_state("1", subgraphs=True)
    sub_state = state.tasks[0].state
    assert sub_state is not None
    assert sub_state.ns == seen["ns"]
    assert sub_state.values == {"data": "input"}
    assert sub_state.next == ("process",)
    assert [i.value for i in sub_state.interrupts] == ["Continue?"]
    done = await compiled.run(Command(resume=True), thread_id="1")
    assert done.state == {"data": "processed"}


class ChildState(TypedDict, total=False):
    prompt: str
    human_input: str
    human_inputs: list[str]


class ParentState(TypedDict, total=False):
    prompts: list[str]
    human_inputs: Annotated[list[str], operator.add]


# test_pregel.py::test_multi_resume: five sub-graph tasks paused at once, resumed by one map
async def test_multi_resume(checkpointer: Checkpointer) -> None:
    def get_human_input(state: ChildState) -> dict[str, Any]:
        human_input = interrupt(state["prompt"])
        return {"human_input": human_input, "human_inputs": [human_input]}

    child = StateGraph(ChildState).add_node("get_human_input", get_human_input)
    child.add_edge(START, "get_human_input")

    def cleanup(state: ParentState) -> None:
        assert len(state["human_inputs"]) == len(state["prompts"])

    parent = StateGraph(ParentState).add_node("child_graph", child.compile())
    parent.add_node("cleanup", cleanup)
    parent.add_conditional_edges(
        START, lambda s: [Send("child_graph", {"prompt": p}) for p in s["prompts"]], ["child_graph"]
    )
    graph = parent.add_edge("child_graph", "cleanup").compile(checkpointer=checkpointer)
    prompts = ["a", "b", "c", "d", "e"]
    paused = await graph.run({"prompts": prompts}, thread_id="1")
    assert {i.value for i in paused.interrupts} == set(prompts)
    answers = {
        i.id: f"human input for prompt {i.value}" for i in (await graph.get_state("1")).interrupts
    }
    result = await graph.run(Command(resume=answers), thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == {
        "prompts": prompts,
        "human_inputs": [f"human input for prompt {p}" for p in prompts],
    }


def sorted_add(x: list[str], y: list[str]) -> list[str]:
    return sorted(operator.add(x, y))


class Rag(TypedDict, total=False):
    query: str
    answer: str
    docs: Annotated[list[str], sorted_add]


# test_pregel_async.py::test_in_one_fan_out_state_graph_waiting_edge_plus_regular (the
# sleeps that order its updates are left out: a parallel step's updates come as its tasks
# finish, so only each step's set of updates is compared)
async def test_in_one_fan_out_state_graph_waiting_edge_plus_regular(
    checkpointer: Checkpointer,
) -> None:
    workflow = StateGraph(Rag)
    workflow.add_node("rewrite_query", lambda d: {"query": f"query: {d['query']}"})
    workflow.add_node("analyzer_one", lambda d: {"query": f"analyzed: {d['query']}"})
    workflow.add_node("retriever_one", lambda d: {"docs": ["doc1", "doc2"]})
    workflow.add_node("retriever_two", lambda d: {"docs": ["doc3", "doc4"]})
    workflow.add_node("qa", lambda d: {"answer": ",".join(d["docs"])})
    workflow.set_entry_point("rewrite_query")
    workflow.add_edge("rewrite_query", "analyzer_one")
    workflow.add_edge("analyzer_one", "retriever_one")
    workflow.add_edge("rewrite_query", "retriever_two")
    workflow.add_edge(["retriever_one", "retriever_two"], "qa")
    workflow.set_finish_point("qa")
    workflow.add_edge("rewrite_query", "qa")  # a silly edge: the join still waits for both

    app = workflow.compile()
    assert (await app.run({"query": "what is weather in sf"})).state == {
        "query": "analyzed: query: what is weather in sf",
        "docs": ["doc1", "doc2", "doc3", "doc4"],
        "answer": "doc1,doc2,doc3,doc4",
    }
    paused = workflow.compile(checkpointer=checkpointer, interrupt_after=["retriever_one"])
    items = [u async for u in paused.stream({"query": "q"}, thread_id="1", mode="updates")]
    assert items[0] == {"rewrite_query": {"query": "query: q"}}
    assert sorted(map(str, items[1:3])) == sorted(
        map(str, [{"qa": {"answer": ""}}, {"analyzer_one": {"query": "analyzed: query: q"}}])
    )
    assert sorted(map(str, items[3:5])) == sorted(
        map(
            str,
            [
                {"retriever_two": {"docs": ["doc3", "doc4"]}},
                {"retriever_one": {"docs": ["doc1", "doc2"]}},
            ],
        )
    )
    assert items[5:] == [{"__interrupt__": ()}]
    assert [u async for u in paused.stream(None, thread_id="1", mode="updates")] == [
        {"qa": {"answer": "doc1,doc2,doc3,doc4"}}
    ]


class Inner(BaseModel):
    a: int = 0


class Outer(BaseModel):
    inner: Inner = Inner()
    outer: int = 0


# test_pregel.py::test_pydantic_state_mutation_command (and ::test_pydantic_state_mutation)
@pytest.mark.parametrize("as_command", [False, True])
async def test_pydantic_state_mutation(checkpointer: Checkpointer, as_command: bool) -> None:
    def my_node(state: Outer) -> Any:
        state.inner.a = 5
        state.outer = 10
        return Command(update=state) if as_command else state

    graph = StateGraph(Outer).add_node("my_node", my_node).add_edge(START, "my_node")
    result = await graph.compile(checkpointer=checkpointer).run({"outer": 1}, thread_id="1")
    assert result.state == {"outer": 10, "inner": Inner(a=5)}


class Foo(BaseModel):
    foo: str


@dataclasses.dataclass
class FooDataclass:
    foo: str


# test_pregel.py::test_command_pydantic_dataclass
@pytest.mark.parametrize("state_cls", [Foo, FooDataclass])
async def test_command_pydantic_dataclass(state_cls: Any) -> None:
    def node_a(state: Any) -> Command[Literal["node_b"]]:
        return Command(update=state_cls(foo="foo"), goto="node_b")

    builder = StateGraph(state_cls).add_edge(START, "node_a")
    builder.add_node("node_a", node_a).add_node("node_b", lambda s: {"foo": s.foo + "bar"})
    assert (await builder.compile().run(state_cls(foo=""))).state == {"foo": "foobar"}


class MyKey(TypedDict):
    my_key: Annotated[str, operator.add]


# test_pregel.py::test_simple_multi_edge
async def test_simple_multi_edge() -> None:
    graph = StateGraph(MyKey)
    graph.add_node("up", lambda s: None).add_node("side", lambda s: None)
    graph.add_node("other", lambda s: {"my_key": "_more"}).add_node("down", lambda s: None)
    graph.set_entry_point("up")
    graph.add_edge("up", "side").add_edge("up", "other").add_edge(["up", "side"], "down")
    app = graph.set_finish_point("down").compile()
    assert (await app.run({"my_key": "my_value"})).state == {"my_key": "my_value_more"}
    assert [u async for u in app.stream({"my_key": "my_value"}, mode="updates")] in (
        [{"up": None}, {"side": None}, {"other": {"my_key": "_more"}}, {"down": None}],
        [{"up": None}, {"other": {"my_key": "_more"}}, {"side": None}, {"down": None}],
    )


class FooAdd(TypedDict):
    foo: Annotated[str, operator.add]


# test_pregel_async.py::test_command_goto_with_static_breakpoints: the goto runs beside the
# step the breakpoint held, so node2 runs twice (once from the goto, once after node1).
async def test_command_goto_with_static_breakpoints(checkpointer: Checkpointer) -> None:
    builder = StateGraph(FooAdd)
    builder.add_node("node1", lambda s: {"foo": "|node-1"})
    builder.add_node("node2", lambda s: {"foo": "|node-2"})
    builder.add_edge(START, "node1").add_edge("node1", "node2")
    graph = builder.compile(checkpointer=checkpointer, interrupt_before=["node1"])
    paused = await graph.run({"foo": "abc"}, thread_id="1")
    assert paused.status == "interrupted"
    assert (await graph.get_state("1")).next == ("node1",)
    result = await graph.run(Command(goto=["node2"]), thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == {"foo": "abc|node-1|node-2|node-2"}
