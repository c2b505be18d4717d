"""``get_state_history`` after a stop (``interrupt_before``, ``interrupt_after``,
``interrupt()``) and after a ``Command`` given as run input: the same program on LangGraph and
on ``tinyagents.graph``, compared entry by entry (step, source, next, values), as in
``test_langgraph_ports.py``.

A stop before a step saves nothing, as LangGraph's: the previous step's checkpoint already
has that step next, and the run that continues passes its breakpoint (``GraphRun.continues``).
A ``Command(update=..., goto=...)`` given as input is still saved as a checkpoint of its own
(``source="input"``, at the head's step), where LangGraph keeps its writes as pending writes of
the head's checkpoint (shown by ``get_state``, folded into the next step's checkpoint): the
tests of that case say so, and compare everything else."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_kit import OURS, THEIRS, Log, abc_graph, cfg, pair

from tinyagents.store.checkpoint import Checkpointer

Entry = tuple[int, str, tuple[str, ...], list[str]]


def ask_graph(g: Any) -> Any:
    """START → a → b (asks) → c → END."""
    graph = g.StateGraph(Log).add_node("a", lambda s: {"log": ["a"]})
    graph.add_node("b", lambda s: {"log": [f"b:{g.interrupt('b?')}"]})
    graph.add_node("c", lambda s: {"log": ["c"]})
    return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", g.END)


def goto_graph(g: Any) -> Any:
    """START → a → b → c → END; ``x`` reached only by a goto."""
    graph = g.StateGraph(Log).add_node("a", lambda s: {"log": ["a"]}, destinations=("x",))
    for name in ("b", "c", "x"):
        graph.add_node(name, lambda s, name=name: {"log": [name]})
    graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", g.END)
    return graph.add_edge("x", g.END)


async def theirs_history(app: Any) -> list[Entry]:
    """LangGraph's history, oldest first."""
    entries = [
        (h.metadata["step"], h.metadata["source"], h.next, h.values.get("log", []))
        async for h in app.aget_state_history(cfg())
    ]
    return entries[::-1]


async def ours_history(app: Any) -> list[Entry]:
    """Ours, oldest first, in the same shape (the values read at each checkpoint)."""
    entries: list[Entry] = []
    for h in await app.history("1"):
        state = await app.get_state("1", checkpoint_id=h.checkpoint_id)
        assert (h.metadata["step"], h.metadata["source"]) == (h.step, h.source)
        entries.append((h.step, h.source, h.next, state.values.get("log", [])))
    return entries[::-1]


async def run_both(build: Any, checkpointer: Checkpointer, inputs: list[Any], **kw: Any) -> Any:
    """Each of ``inputs`` (a function of the library's namespace) run on both, in turn:
    (our graph, LangGraph's)."""
    ours, theirs = pair(build, checkpointer, **kw)
    for make in inputs:
        await theirs.ainvoke(make(THEIRS), cfg())
        result = await ours.run(make(OURS), thread_id="1")
        assert result.error is None, result.error
    return ours, theirs


def start(g: Any) -> Any:
    return {"log": []}


CHAIN = [
    (-1, "input", ("__start__",), []),
    (0, "loop", ("a",), []),
    (1, "loop", ("b",), ["a"]),
    (2, "loop", ("c",), ["a", "b"]),
    (3, "loop", (), ["a", "b", "c"]),
]


@pytest.mark.parametrize("breakpoint", ["interrupt_before", "interrupt_after"])
async def test_a_breakpoint_stop_and_its_continuation(
    checkpointer: Checkpointer, breakpoint: str
) -> None:
    # (a) before b, (b) after a: the same stop (b next), and no checkpoint of its own
    node = "b" if breakpoint == "interrupt_before" else "a"
    ours, theirs = pair(abc_graph, checkpointer, **{breakpoint: [node]})
    await theirs.ainvoke(start(THEIRS), cfg())
    stopped = await ours.run(start(OURS), thread_id="1")
    assert (stopped.status, stopped.interrupts) == ("interrupted", [])
    assert await ours_history(ours) == await theirs_history(theirs) == CHAIN[:3]
    head = await ours.get_state("1")
    assert (head.step, head.source, head.next) == (1, "loop", ("b",))
    assert stopped.checkpoint_id == head.checkpoint_id
    await theirs.ainvoke(None, cfg())
    done = await ours.run(None, thread_id="1")
    assert done.status == "completed"
    assert await ours_history(ours) == await theirs_history(theirs) == CHAIN


async def test_a_stop_before_the_first_node(checkpointer: Checkpointer) -> None:
    ours, theirs = await run_both(abc_graph, checkpointer, [start], interrupt_before=["a"])
    assert await ours_history(ours) == await theirs_history(theirs) == CHAIN[:2]
    await theirs.ainvoke(None, cfg())
    assert (await ours.run(None, thread_id="1")).status == "completed"
    assert await ours_history(ours) == await theirs_history(theirs) == CHAIN


async def test_an_update_at_a_breakpoint(checkpointer: Checkpointer) -> None:
    ours, theirs = await run_both(abc_graph, checkpointer, [start], interrupt_before=["b"])
    await theirs.aupdate_state(cfg(), {"log": ["edit"]})
    await ours.update_state("1", {"log": ["edit"]})
    await theirs.ainvoke(None, cfg())
    assert (await ours.run(None, thread_id="1")).status == "completed"
    assert await ours_history(ours) == await theirs_history(theirs)
    assert [e[:2] for e in await ours_history(ours)] == [
        (-1, "input"),
        (0, "loop"),
        (1, "loop"),
        (2, "update"),
        (3, "loop"),
        (4, "loop"),
    ]


async def test_an_interrupt_and_its_answer(checkpointer: Checkpointer) -> None:
    # (c) the paused step is the head; the answer runs it and saves it once
    ours, theirs = await run_both(ask_graph, checkpointer, [start])
    assert await ours_history(ours) == await theirs_history(theirs) == CHAIN[:3]
    await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    assert (await ours.run(OURS.Command(resume="yes"), thread_id="1")).status == "completed"
    assert await ours_history(ours) == await theirs_history(theirs)
    assert (await ours_history(ours))[-1] == (3, "loop", (), ["a", "b:yes", "c"])


def without_later_inputs(entries: list[Entry]) -> list[Entry]:
    """The history without the checkpoints of a ``Command`` given as input (every input
    checkpoint after the thread's first)."""
    return [entries[0], *(e for e in entries[1:] if e[1] != "input")]


async def test_an_update_command_on_a_finished_thread(checkpointer: Checkpointer) -> None:
    # (d) LangGraph keeps the update as a pending write of its step-3 checkpoint (get_state
    # and the history show it there); ours saves it as a checkpoint of its own, at step 3
    update = [start, lambda g: g.Command(update={"log": ["u"]})]
    ours, theirs = await run_both(abc_graph, checkpointer, update)
    mine, their = await ours_history(ours), await theirs_history(theirs)
    assert their == [*CHAIN[:4], (3, "loop", (), ["a", "b", "c", "u"])]
    assert mine == [*CHAIN, (3, "input", (), ["a", "b", "c", "u"])]
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


@pytest.mark.parametrize("update", [False, True])
async def test_a_goto_command_on_a_finished_thread(
    checkpointer: Checkpointer, update: bool
) -> None:
    # (e) LangGraph runs x as step 4 from its step-3 checkpoint (the goto and the update
    # pending writes there, which its history shows in that checkpoint's values); ours
    # saves them at step 3 first, then runs the same step 4
    def goto(g: Any) -> Any:
        return g.Command(goto="x", update={"log": ["u"]} if update else None)

    ours, theirs = await run_both(goto_graph, checkpointer, [start, goto])
    mine, their = await ours_history(ours), await theirs_history(theirs)
    written = ["a", "b", "c", *(["u"] if update else [])]
    done = (4, "loop", (), [*written, "x"])
    assert their == [*CHAIN[:4], (3, "loop", (), written), done]
    assert mine == [*CHAIN, (3, "input", ("x",), written), done]
    assert [e[:3] for e in without_later_inputs(mine)] == [e[:3] for e in their]


async def test_a_goto_command_at_a_breakpoint(checkpointer: Checkpointer) -> None:
    # the goto joins the step the breakpoint held (b, x together), which does not stop again
    goto = [start, lambda g: g.Command(goto="x")]
    ours, theirs = await run_both(goto_graph, checkpointer, goto, interrupt_before=["b"])
    mine, their = await ours_history(ours), await theirs_history(theirs)
    assert mine[3] == (1, "input", ("b", "x"), ["a"])
    assert without_later_inputs(mine) == their
    assert their[-1] == (3, "loop", (), ["a", "b", "x", "c"])
