"""Ports of LangGraph's tests of checkpointed runs, second round
(``libs/langgraph/tests/test_pregel_async.py``: interrupts answered by id, ``Send``
fan-outs with failures and checkpoints, sub-graphs in parallel branches, time travel): the
same program on LangGraph and on ``tinyagents.graph``, compared, as in
``test_langgraph_ports.py``. Each test's comment names the LangGraph test or code it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph_kit import OURS, THEIRS, Log, cfg, pair, values

from tinyagents.graph import Command
from tinyagents.store.checkpoint import Checkpointer


class Fan(Log, total=False):
    n: int


def rounds(g: Any, calls: list[str]) -> Any:
    """Two rounds of a two-way ``Send`` fan-out, each followed by a node counting rounds."""
    graph = g.StateGraph(Fan)

    def fan(state: Any) -> Any:
        return [g.Send("w", {"n": i}) for i in range(2)] if state.get("n", 0) < 2 else g.END

    def w(state: Any) -> dict[str, Any]:
        calls.append(f"w{state['n']}")
        return {"log": [f"w{state['n']}"]}

    def count(state: Any) -> dict[str, Any]:
        calls.append("count")
        return {"n": state.get("n", 0) + 1}

    graph.add_node("w", w).add_node("count", count)
    graph.add_conditional_edges(g.START, fan, ["w", g.END]).add_edge("w", "count")
    return graph.add_conditional_edges("count", fan, ["w", g.END])


async def test_a_fork_of_a_past_fan_out_step_is_the_thread_as_it_was_there(
    checkpointer: Checkpointer,
) -> None:
    # time travel (test_langgraph_history_ports.py ports LangGraph's): a checkpoint of the
    # history, as LangGraph's get_state_history shows it, and its replay. A fork of a past
    # checkpoint whose step ran several tasks (here a Send fan-out) later copied the results
    # they wrote after it: the fork showed those writes applied with nothing next, and its
    # run did not run the fan-out again, where a fork of a one-task step (a chain) runs it
    calls: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}
    ours, theirs = pair(lambda g: rounds(g, calls[id(g)]), checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    history = await ours.history("1")
    theirs_history = [s async for s in theirs.aget_state_history(cfg())]
    assert [h.next for h in history] == [s.next for s in theirs_history]
    fan_outs = [k for k, h in enumerate(history) if h.next == ("w", "w")]
    assert len(fan_outs) == 2
    for k in fan_outs:
        fork = await ours.fork("1", history[k].checkpoint_id, new_thread_id=f"f{k}")
        copied, there = (
            await ours.get_state(fork),
            await ours.get_state("1", history[k].checkpoint_id),
        )
        assert (copied.values, copied.next) == (there.values, there.next)
        assert (copied.values, copied.next) == (theirs_history[k].values, ("w", "w"))
        calls[id(OURS)].clear()
        calls[id(THEIRS)].clear()
        result = await ours.run(None, thread_id=fork)
        out = await theirs.ainvoke(None, theirs_history[k].config)
        assert result.status == "completed" and result.state == values(out)
        assert sorted(calls[id(OURS)]) == sorted(calls[id(THEIRS)])
        assert {"w0", "w1"} <= set(calls[id(OURS)])  # the fan-out ran again on the fork


def sends_one_failing(g: Any, calls: list[str], fail: list[bool], asked: asyncio.Event) -> Any:
    """A four-way ``Send`` fan-out into a join: ``w1`` fails while ``fail[0]`` (once ``w2``'s
    question is saved, ``asked``), ``w2`` asks."""
    graph = g.StateGraph(Fan)

    def fan(state: Any) -> Any:
        return [g.Send("w", {"n": i}) for i in range(4)]

    async def w(state: Any) -> dict[str, Any]:
        i = state["n"]
        calls.append(f"w{i}")
        if i == 1 and fail[0]:
            await asked.wait()
            raise ValueError("w1 failed")
        if i == 2:
            return {"log": [f"w2:{g.interrupt('q2')}"]}
        return {"log": [f"w{i}"]}

    def join(state: Any) -> dict[str, Any]:
        calls.append("join")
        return {"log": ["join"]}

    graph.add_node("w", w).add_node("join", join)
    return graph.add_conditional_edges(g.START, fan, ["w"]).add_edge("w", "join")


def note_questions(checkpointer: Checkpointer, asked: asyncio.Event) -> None:
    """Set ``asked`` once ``checkpointer`` has saved a question (an interrupt write)."""
    put_writes = checkpointer.put_writes

    async def saving(thread_id: str, ns: str, frontier_id: str, writes: list[Any]) -> None:
        await put_writes(thread_id, ns, frontier_id, writes)
        if any(w.kind == "interrupt" for w in writes):
            asked.set()

    checkpointer.put_writes = saving  # type: ignore[method-assign]


async def test_a_send_that_fails_beside_one_that_asks_and_ones_that_finish(
    checkpointer: Checkpointer,
) -> None:
    # test_pregel_async.py, test_node_not_cancelled_on_other_node_interrupted and
    # test_checkpoint_recovery, with Sends: what finished is kept with the failure and the
    # question, run(None) runs the failed Send alone, and the answer runs the asking one
    calls: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}
    fail = {id(OURS): [True], id(THEIRS): [True]}
    asked = {id(OURS): asyncio.Event(), id(THEIRS): asyncio.Event()}
    asked[id(THEIRS)].set()  # (LangGraph's siblings are not waited for: its state is not compared)
    note_questions(checkpointer, asked[id(OURS)])
    ours, theirs = pair(
        lambda g: sends_one_failing(g, calls[id(g)], fail[id(g)], asked[id(g)]), checkpointer
    )
    try:
        await theirs.ainvoke({"log": []}, cfg())
    except ValueError as exc:
        assert str(exc) == "w1 failed"
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "failed" and str(result.error) == "w1 failed"
    state = await ours.get_state("1")
    assert state.values == {"log": ["w0", "w3"]} and state.next == ("w", "w")
    assert [i.value for i in state.interrupts] == ["q2"]
    assert [t.error is not None for t in state.tasks] == [False, True, False, False]
    failed_at = state.checkpoint_id

    fail[id(OURS)][0] = fail[id(THEIRS)][0] = False
    for c in calls.values():
        c.clear()
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.status == "interrupted" and result.state == values(out)
    assert [i.value for i in result.interrupts] == ["q2"]
    # LangGraph runs the paused Send again to ask again; ours keeps it paused (docs/graph.md,
    # "Interrupts and Command": the other tasks' writes are kept, so they never run again)
    assert calls[id(OURS)] == ["w1"] and {"w1", "w2"} <= set(calls[id(THEIRS)])

    for c in calls.values():
        c.clear()
    out = await theirs.ainvoke(THEIRS.Command(resume="ok"), cfg())
    result = await ours.run(Command(resume="ok"), thread_id="1")
    assert result.status == "completed" and result.state == values(out)
    assert result.state == {"log": ["w0", "w1", "w2:ok", "w3", "join"]}
    assert calls[id(OURS)] == calls[id(THEIRS)] == ["w2", "join"]

    # a fork of the failed step: what had finished there is kept, the failed Send runs again
    # (it finished only later, on this thread) and the paused one asks again
    fork = await ours.fork("1", failed_at)
    copied = await ours.get_state(fork)
    assert copied.values == {"log": ["w0", "w3"]} and copied.next == ("w", "w")
    calls[id(OURS)].clear()
    again = await ours.run(None, thread_id=fork)
    assert again.status == "interrupted" and calls[id(OURS)] == ["w1"]
    assert again.state == {"log": ["w0", "w1", "w3"]}


def questions_in_a_sub_graph(g: Any, calls: list[str]) -> Any:
    """A sub-graph whose two parallel nodes ask a question each beside a third that does
    not, run beside a parent node that finishes; a join after both."""
    sub = g.StateGraph(Log)
    for name in ("p", "q"):

        def ask(state: Any, name: str = name) -> dict[str, Any]:
            calls.append(name)
            return {"log": [f"{name}:{g.interrupt(f'q{name}')}"]}

        sub.add_node(name, ask).add_edge(g.START, name).add_edge(name, g.END)

    def r(state: Any) -> dict[str, Any]:
        calls.append("r")
        return {"log": ["r"]}

    sub.add_node("r", r).add_edge(g.START, "r")
    graph = g.StateGraph(Log).add_node("sub", sub.compile())

    def other(state: Any) -> dict[str, Any]:
        calls.append("other")
        return {"log": ["other"]}

    def fin(state: Any) -> dict[str, Any]:
        calls.append("fin")
        return {"log": ["fin"]}

    graph.add_node("other", other).add_node("fin", fin)
    graph.add_edge(g.START, "sub").add_edge(g.START, "other")
    return graph.add_edge(["sub", "other"], "fin")


async def test_parallel_questions_inside_a_sub_graph_answered_one_by_id(
    checkpointer: Checkpointer,
) -> None:
    # test_pregel_async.py, test_parallel_interrupts and test_dynamic_interrupt_subgraph
    # together: the sub-graph's questions surface in the parent, one answered by its id
    # reaches its node alone, and the sub-graph's state shows the rest pending
    calls: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}
    ours, theirs = pair(lambda g: questions_in_a_sub_graph(g, calls[id(g)]), checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == values(out) == {"log": ["other"]}
    asked = sorted(i.value for i in result.interrupts)
    assert asked == sorted(i.value for i in out["__interrupt__"]) == ["qp", "qq"]
    assert all(i.ns.startswith("sub:") for i in result.interrupts)

    ids = {i.value: i.id for i in result.interrupts}
    theirs_ids = {i.value: i.id for i in out["__interrupt__"]}
    out = await theirs.ainvoke(THEIRS.Command(resume={theirs_ids["qq"]: "Q"}), cfg())
    result = await ours.run(Command(resume={ids["qq"]: "Q"}), thread_id="1")
    assert result.state == values(out) == {"log": ["other"]}
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    assert [i.id for i in result.interrupts] == [ids["qp"]]

    state = await ours.get_state("1", subgraphs=True)
    theirs_state = await theirs.aget_state(cfg(), subgraphs=True)
    assert state.next == theirs_state.next == ("sub",)
    [sub_task, _] = state.tasks
    [theirs_sub, _] = theirs_state.tasks
    assert sub_task.state is not None and theirs_sub.state is not None
    assert sub_task.state.values == theirs_sub.state.values == {"log": ["q:Q", "r"]}
    assert sub_task.state.next == theirs_sub.state.next == ("p",)

    for c in calls.values():
        c.clear()
    out = await theirs.ainvoke(
        THEIRS.Command(resume={i.id: "P" for i in out["__interrupt__"]}), cfg()
    )
    result = await ours.run(Command(resume={ids["qp"]: "P"}), thread_id="1")
    assert result.status == "completed" and result.state == values(out)
    assert result.state == {"log": ["other", "p:P", "q:Q", "r", "fin"]}
    assert calls[id(OURS)] == calls[id(THEIRS)] == ["p", "fin"]


def jump_beside_a_question(g: Any, calls: list[str]) -> Any:
    """A sub-graph node that hands the parent a goto and an update, beside a parent node that
    asks a question."""
    sub = g.StateGraph(Log)

    def jump(state: Any) -> Any:
        calls.append("jump")
        return g.Command(graph=g.Command.PARENT, goto="tail", update={"log": ["jumped"]})

    sub.add_node("jump", jump).add_edge(g.START, "jump")
    graph = g.StateGraph(Log).add_node("sub", sub.compile(), destinations=("tail",))

    def ask(state: Any) -> dict[str, Any]:
        calls.append("ask")
        return {"log": [f"ask:{g.interrupt('qa')}"]}

    def tail(state: Any) -> dict[str, Any]:
        calls.append("tail")
        return {"log": ["tail"]}

    graph.add_node("ask", ask).add_node("tail", tail)
    return graph.add_edge(g.START, "sub").add_edge(g.START, "ask")


async def test_a_parent_command_from_a_sub_graph_beside_a_question(
    checkpointer: Checkpointer,
) -> None:
    # test_pregel_async.py, test_parent_command_goto_deeply_nested one level deep, beside a
    # sibling that interrupts: the
    # sub-graph's update is kept while the step waits on the question, and its goto runs
    # once the question is answered, the sub-graph not run again
    calls: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}
    ours, theirs = pair(lambda g: jump_beside_a_question(g, calls[id(g)]), checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == values(out) == {"log": ["jumped"]}
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    state, theirs_state = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert state.next == theirs_state.next == ("ask",)
    out = await theirs.ainvoke(THEIRS.Command(resume="A"), cfg())
    result = await ours.run(Command(resume="A"), thread_id="1")
    assert result.status == "completed" and result.state == values(out)
    assert result.state == {"log": ["ask:A", "jumped", "tail"]}
    assert sorted(calls[id(OURS)]) == sorted(calls[id(THEIRS)]) == ["ask", "ask", "jump", "tail"]


def twin_sends(g: Any, calls: list[str]) -> Any:
    """Two ``Send``s of the same argument to one node, which asks a question."""
    graph = g.StateGraph(Fan)

    def fan(state: Any) -> Any:
        return [g.Send("w", {"n": 7}), g.Send("w", {"n": 7})]

    def w(state: Any) -> dict[str, Any]:
        calls.append("w")
        return {"log": [f"w:{g.interrupt('q')}"]}

    return graph.add_node("w", w).add_conditional_edges(g.START, fan, ["w"])


async def test_twin_sends_ask_under_distinct_ids(checkpointer: Checkpointer) -> None:
    # test_pregel_async.py, test_multi_resume with Sends: two Send tasks of
    # equal arguments are two tasks, their questions two ids, each answered on its own
    ours, theirs = pair(lambda g: twin_sends(g, []), checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert len({i.id for i in result.interrupts}) == len({i.id for i in out["__interrupt__"]}) == 2
    first, theirs_first = result.interrupts[0].id, out["__interrupt__"][0].id
    out = await theirs.ainvoke(THEIRS.Command(resume={theirs_first: "A"}), cfg())
    result = await ours.run(Command(resume={first: "A"}), thread_id="1")
    assert result.state == values(out) == {"log": ["w:A"]}
    assert len(result.interrupts) == len(out["__interrupt__"]) == 1
    assert result.interrupts[0].id != first
    out = await theirs.ainvoke(THEIRS.Command(resume="B"), cfg())
    result = await ours.run(Command(resume="B"), thread_id="1")
    assert result.status == "completed" and result.state == values(out) == {"log": ["w:A", "w:B"]}
