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
