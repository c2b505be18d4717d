"""How a resume is read, and where a sub-graph a node calls checkpoints: the same program on
LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py`` (each
test's comment names the LangGraph code it follows).

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture).
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_kit import OURS, THEIRS, Log, cfg, pair, values

from tinyagents.graph import Command
from tinyagents.store.checkpoint import Checkpointer

# -- an empty resume map ------------------------------------------------------------------


def askers(g: Any, count: int, calls: list[str]) -> Any:
    """``count`` nodes from START, each asking one question and logging its answer."""
    graph = g.StateGraph(Log)
    for name in "ab"[:count]:

        def ask(state: Any, name: str = name) -> dict[str, Any]:
            calls.append(name)
            return {"log": [f"{name}:{g.interrupt(f'q{name}')}"]}

        graph.add_node(name, ask).add_edge(g.START, name)
    return graph


@pytest.mark.parametrize("count", [1, 2])
async def test_an_empty_resume_map_answers_nothing(checkpointer: Checkpointer, count: int) -> None:
    # LangGraph's loop (pregel/_loop.py, _first) reads a dict whose keys are all interrupt
    # ids as a resume map, so {} is a map naming none: whatever is pending, nothing is
    # answered, and the questions stay pending. Ours took {} as the answer to a lone
    # question, and refused it with two pending.
    calls: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}
    ours, theirs = pair(lambda g: askers(g, count, calls[id(g)]), checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    asked = [i.value for i in out["__interrupt__"]]
    assert [i.value for i in result.interrupts] == asked

    out = await theirs.ainvoke(THEIRS.Command(resume={}), cfg())
    again = await ours.run(Command(resume={}), thread_id="1")
    assert again.status == "interrupted" and again.state == values(out) == {"log": []}
    assert [i.value for i in again.interrupts] == [i.value for i in out["__interrupt__"]]
    assert [i.id for i in again.interrupts] == [i.id for i in result.interrupts]
    # LangGraph runs the paused nodes again, to ask again; ours keeps them paused on the
    # same questions (docs/graph.md, "Commands": "a paused task nothing answers")
    assert sorted(calls[id(THEIRS)]) == sorted(2 * "ab"[:count])
    assert sorted(calls[id(OURS)]) == sorted("ab"[:count])

    # the questions are still there to answer
    out = await theirs.ainvoke(
        THEIRS.Command(resume={i.id: "yes" for i in out["__interrupt__"]}), cfg()
    )
    done = await ours.run(Command(resume={i.id: "yes" for i in again.interrupts}), thread_id="1")
    assert done.status == "completed"
    assert sorted(done.state["log"]) == sorted(out["log"]) == [f"{n}:yes" for n in "ab"[:count]]

    # on the finished thread, too, it answers nothing (there is nothing it could lose)
    out = await theirs.ainvoke(THEIRS.Command(resume={}), cfg())
    after = await ours.run(Command(resume={}), thread_id="1")
    assert after.status == "completed" and after.state == done.state
    assert sorted(out["log"]) == sorted(done.state["log"])


# -- the order of a result's interrupts -----------------------------------------------------


def sends_and_nodes_asking(g: Any) -> Any:
    """``fan`` starts, in one step, ``mid`` and ``alpha`` (added in that order) by name and
    ``alpha`` by a Send; each asks a question naming how many log entries it sees."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": ["ask:" + g.interrupt(f"q{len(state['log'])}")]}

    graph = g.StateGraph(Log).add_node("fan", lambda s: {"log": ["fan"]})
    graph.add_node("mid", ask).add_node("alpha", ask).add_edge(g.START, "fan")
    return graph.add_conditional_edges(
        "fan", lambda s: ["mid", "alpha", g.Send("alpha", {"log": ["a", "b"]})]
    )


async def test_a_results_interrupts_come_in_the_order_the_tasks_start(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's invoke lists "__interrupt__" in the order its tasks ask, the order it
    # starts them (pregel/_algo.py, prepare_next_tasks): the Sends first, then the nodes by
    # name. Its get_state lists them by task, nodes in add_node order, and so does ours. Our
    # result listed the Sends last
    ours, theirs = pair(sends_and_nodes_asking, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    node_of = {t.interrupts[0].id: t.name for t in (await theirs.aget_state(cfg())).tasks}
    asked = [(i.value, node_of[i.id]) for i in out["__interrupt__"]]
    assert [(i.value, i.node) for i in result.interrupts] == asked
    assert asked == [("q2", "alpha"), ("q1", "alpha"), ("q1", "mid")]
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert [(i.value, i.node) for i in mine.interrupts] == [
        (i.value, node_of[i.id]) for i in their.interrupts
    ]
    assert [i.node for i in mine.interrupts] == ["alpha", "mid", "alpha"]

    # the ones left after an answer keep that order
    answered = next(i.id for i in out["__interrupt__"] if i.value == "q1")
    out = await theirs.ainvoke(THEIRS.Command(resume={answered: "x"}), cfg())
    result = await ours.run(Command(resume={result.interrupts[1].id: "x"}), thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    assert [(i.value, i.node) for i in result.interrupts] == [("q2", "alpha"), ("q1", "mid")]


# -- a node that calls sub-graphs more than once --------------------------------------------


def calling_twice(g: Any) -> Any:
    """``outer`` calls ``sub`` (whose ``inner`` asks a question) twice, one call after the
    other."""

    def inner(state: Any) -> dict[str, Any]:
        return {"log": ["inner:" + g.interrupt("q")]}

    sub = g.StateGraph(Log).add_node("inner", inner).add_edge(g.START, "inner").compile()

    async def outer(state: Any) -> dict[str, Any]:
        if g is THEIRS:
            first, second = await sub.ainvoke({"log": ["one"]}), await sub.ainvoke({"log": ["two"]})
        else:
            first, second = (
                (await sub.run({"log": ["one"]})).state,
                (await sub.run({"log": ["two"]})).state,
            )
        return {"log": first["log"] + second["log"]}

    return g.StateGraph(Log).add_node("outer", outer).add_edge(g.START, "outer")


async def test_a_second_call_of_a_task_checkpoints_under_the_first_calls_namespace(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's loop (pregel/_loop.py, the scratchpad's subgraph_counter) gives a task's
    # first sub-graph call the task's namespace, "outer:<task id>", and its n-th one more a
    # segment "n" under it, "outer:<task id>|1"; ours named it "outer:<task id>#1"
    ours, theirs = pair(calling_twice, checkpointer)
    seen: dict[str, list[tuple[str, ...]]] = {"ours": [], "theirs": []}
    for theirs_in, ours_in in [
        ({"log": []}, {"log": []}),
        (THEIRS.Command(resume="x"), Command(resume="x")),
        (THEIRS.Command(resume="y"), Command(resume="y")),
    ]:
        async for ns, _ in theirs.astream(theirs_in, cfg(), stream_mode="updates", subgraphs=True):
            seen["theirs"].append(ns)
        async for ns, _ in ours.stream(ours_in, thread_id="1", mode="updates", subgraphs=True):
            seen["ours"].append(ns)
        if ours_in == {"log": []}:
            outer_id = (await ours.get_state("1")).tasks[0].id
            theirs_id = (await theirs.aget_state(cfg())).tasks[0].id
    first, second = (f"outer:{outer_id}",), (f"outer:{outer_id}", "1")
    theirs_first, theirs_second = (f"outer:{theirs_id}",), (f"outer:{theirs_id}", "1")
    assert seen["theirs"] == [theirs_first, (), theirs_first, theirs_second, (), theirs_second, ()]
    assert seen["ours"] == [first, (), first, second, (), second, ()]
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values

    # each call's checkpoints are read back from its namespace
    theirs_steps = [
        [
            c.metadata["step"]
            async for c in theirs.aget_state_history(cfg(checkpoint_ns="|".join(ns)))
        ]
        for ns in (theirs_first, theirs_second)
    ]
    ours_steps = [
        [c.step for c in await ours.history("1", ns="|".join(ns))] for ns in (first, second)
    ]
    assert ours_steps == theirs_steps == [[1, 0, -1], [1, 0, -1]]
