"""``Command(goto=...)`` and ``Command(resume=..., goto=...)`` as run input, on a thread that
paused (in ``interrupt()``, at a breakpoint) or finished: the same program on LangGraph and on
``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``. LangGraph adds the goto
targets beside the pending tasks, in the same step: a paused task runs again (and asks again
when nothing answers it), a finished one keeps its writes; ``resume`` answers in that step.

Each node notes ``(how many log entries it saw, its name)``: the nodes of one step see the
same state, so the sorted notes say which nodes ran in which step, whatever the order of
tasks inside a step."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_kit import OURS, THEIRS, Log, cfg, pair, values

from tinyagents.errors import InterruptError
from tinyagents.store.checkpoint import Checkpointer

Calls = list[tuple[int, str]]


def logger(name: str, calls: Calls) -> Any:
    def node(state: Any) -> dict[str, Any]:
        calls.append((len(state["log"]), name))
        return {"log": [name]}

    return node


def asker(g: Any, name: str, calls: Calls) -> Any:
    def node(state: Any) -> dict[str, Any]:
        calls.append((len(state["log"]), name))
        return {"log": [f"{name}:{g.interrupt(f'{name}?')}"]}

    return node


def ask_graph(g: Any, calls: Calls) -> Any:
    """START → ask (asks) → after → END; ``other`` and ``x`` reached only by a goto."""
    graph = g.StateGraph(Log).add_node("ask", asker(g, "ask", calls), destinations=("other", "x"))
    for name in ("other", "x", "after"):
        graph.add_node(name, logger(name, calls))
    graph.add_edge(g.START, "ask").add_edge("ask", "after").add_edge("after", g.END)
    return graph.add_edge("other", g.END).add_edge("x", g.END)


def chain_graph(g: Any, calls: Calls) -> Any:
    """START → a → b → c → END; ``x`` reached only by a goto."""
    graph = g.StateGraph(Log).add_node("a", logger("a", calls), destinations=("x",))
    for name in ("b", "c", "x"):
        graph.add_node(name, logger(name, calls))
    graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", g.END)
    return graph.add_edge("x", g.END)


def two_askers_graph(g: Any, calls: Calls) -> Any:
    """START → p → (q1, q2: each asks) → j → END; ``x`` reached only by a goto."""
    graph = g.StateGraph(Log).add_node("p", logger("p", calls), destinations=("x",))
    graph.add_node("q1", asker(g, "q1", calls)).add_node("q2", asker(g, "q2", calls))
    graph.add_node("j", logger("j", calls)).add_node("x", logger("x", calls))
    graph.add_edge(g.START, "p").add_edge("p", "q1").add_edge("p", "q2")
    return graph.add_edge(["q1", "q2"], "j").add_edge("j", g.END).add_edge("x", g.END)


class Side:
    """One program on both libraries, each with its own notes of the nodes that ran."""

    def __init__(self, build: Any, checkpointer: Checkpointer, **compile_kw: Any) -> None:
        self.ours_calls: Calls = []
        self.theirs_calls: Calls = []
        self.ours = build(OURS, self.ours_calls).compile(checkpointer=checkpointer, **compile_kw)
        _, self.theirs = pair(lambda g: build(g, self.theirs_calls), checkpointer, **compile_kw)

    async def both(self, make_input: Any) -> dict[str, Any]:
        """``make_input(g, pending interrupt ids)`` run on both; asserts they agree on the
        final state, the nodes that ran (by step), ``get_state().next`` and the questions
        pending, and returns the state."""
        self.ours_calls.clear()
        self.theirs_calls.clear()
        theirs_before = await self.theirs.aget_state(cfg())
        theirs_ids = [i.id for i in theirs_before.interrupts]
        out = await self.theirs.ainvoke(make_input(THEIRS, theirs_ids), cfg())
        theirs_state = await self.theirs.aget_state(cfg())
        ours_ids = [i.id for i in (await self.ours.get_state("1")).interrupts]
        result = await self.ours.run(make_input(OURS, ours_ids), thread_id="1")
        assert result.error is None, result.error
        ours_state = await self.ours.get_state("1")
        # LangGraph's get_state leaves out the write of a goto's task that finished in a
        # step still paused (it does not see that task); its run's output, as ours, has it
        assert result.state == ours_state.values == values(out)
        # a paused task nothing answered: LangGraph runs it again (it asks again), ours
        # leaves it paused (the same question, as a run(None) there does)
        paused = {t.name for t in theirs_before.tasks if t.interrupts}
        paused &= {t.name for t in theirs_state.tasks if t.interrupts}
        ran = sorted(c for c in self.theirs_calls if c[1] not in paused)
        assert sorted(self.ours_calls) == ran
        assert ours_state.next == theirs_state.next
        asked = [i.value for i in theirs_state.interrupts]
        assert [i.value for i in ours_state.interrupts] == asked
        assert [i.value for i in result.interrupts] == asked
        assert result.status == ("interrupted" if theirs_state.next else "completed")
        # the steps, as numbered, and what each left next (ours also saves the input's own
        # checkpoint, which LangGraph does not)
        theirs_steps = [
            (h.metadata["step"], h.next)
            async for h in self.theirs.aget_state_history(cfg())
            if h.metadata["source"] == "loop"
        ]
        ours_steps = [(h.step, h.next) for h in await self.ours.history("1") if h.source == "loop"]
        assert ours_steps == theirs_steps
        return values(out)


def start(g: Any, ids: list[str]) -> Any:
    return {"log": []}


def answer(g: Any, ids: list[str]) -> Any:
    return g.Command(resume="yes")


async def test_goto_beside_a_pending_interrupt(checkpointer: Checkpointer) -> None:
    # (a) "other" runs beside the paused "ask", which, unanswered, stays paused (LangGraph
    # runs it again, and it asks again); "other" finished, so it does not run again
    side = Side(ask_graph, checkpointer)
    await side.both(start)
    await side.both(lambda g, ids: g.Command(goto="other"))
    assert side.ours_calls == [(0, "other")]
    assert await side.both(answer) == {"log": ["ask:yes", "other", "after"]}
    assert sorted(side.ours_calls) == [(0, "ask"), (2, "after")]


async def test_goto_at_a_static_breakpoint(checkpointer: Checkpointer) -> None:
    # (b) the goto runs beside the step the breakpoint held, which does not stop again
    side = Side(chain_graph, checkpointer, interrupt_before=["b"])
    await side.both(start)
    assert await side.both(lambda g, ids: g.Command(goto="c")) == {"log": ["a", "b", "c", "c"]}
    assert sorted(side.ours_calls) == [(1, "b"), (1, "c"), (3, "c")]


async def test_goto_and_update_at_a_static_breakpoint(checkpointer: Checkpointer) -> None:
    side = Side(chain_graph, checkpointer, interrupt_before=["b"])
    await side.both(start)
    out = await side.both(lambda g, ids: g.Command(goto="c", update={"log": ["jump"]}))
    assert out == {"log": ["a", "jump", "b", "c", "c"]}


async def test_goto_on_a_finished_thread(checkpointer: Checkpointer) -> None:
    # (c) nothing is pending: the goto is the next step
    side = Side(chain_graph, checkpointer)
    await side.both(start)
    assert await side.both(lambda g, ids: g.Command(goto="x")) == {"log": ["a", "b", "c", "x"]}
    assert side.ours_calls == [(3, "x")]


async def test_resume_and_goto_together(checkpointer: Checkpointer) -> None:
    # (d) "ask" gets the answer and "x" runs in the same step
    side = Side(ask_graph, checkpointer)
    await side.both(start)
    out = await side.both(lambda g, ids: g.Command(resume="yes", goto="x"))
    assert out == {"log": ["ask:yes", "x", "after"]}
    assert sorted(side.ours_calls) == [(0, "ask"), (0, "x"), (2, "after")]


async def test_resume_map_and_goto_with_two_questions(checkpointer: Checkpointer) -> None:
    # (e) both answered by id, "x" beside them
    side = Side(two_askers_graph, checkpointer)
    await side.both(start)
    out = await side.both(
        lambda g, ids: g.Command(resume={i: f"ans{n}" for n, i in enumerate(ids)}, goto="x")
    )
    assert out == {"log": ["p", "q1:ans0", "q2:ans1", "x", "j"]}
    assert sorted(side.ours_calls) == [(1, "q1"), (1, "q2"), (1, "x"), (4, "j")]


async def test_resume_map_answering_one_of_two_and_goto(checkpointer: Checkpointer) -> None:
    # the unanswered question is asked again; "x" ran, its write waits with q1's
    side = Side(two_askers_graph, checkpointer)
    await side.both(start)
    await side.both(lambda g, ids: g.Command(resume={ids[0]: "only"}, goto="x"))
    out = await side.both(answer)
    assert out == {"log": ["p", "q1:only", "q2:yes", "x", "j"]}
    assert sorted(side.ours_calls) == [(1, "q2"), (4, "j")]


async def test_one_resume_value_and_goto_with_two_questions_is_refused(
    checkpointer: Checkpointer,
) -> None:
    # one value cannot say which question it answers, goto or not; nothing changes
    side = Side(two_askers_graph, checkpointer)
    await side.both(start)
    with pytest.raises(RuntimeError, match="multiple pending interrupts"):
        await side.theirs.ainvoke(THEIRS.Command(resume="v", goto="x"), cfg())
    side.ours_calls.clear()
    before = await side.ours.history("1")
    with pytest.raises(InterruptError, match="2 interrupts are pending"):
        await side.ours.run(OURS.Command(resume="v", goto="x"), thread_id="1")
    assert await side.ours.history("1") == before
    assert not side.ours_calls


async def test_goto_to_a_node_already_pending_runs_it_once(checkpointer: Checkpointer) -> None:
    side = Side(chain_graph, checkpointer, interrupt_before=["b"])
    await side.both(start)
    assert await side.both(lambda g, ids: g.Command(goto="b")) == {"log": ["a", "b", "c"]}
    assert sorted(side.ours_calls) == [(1, "b"), (2, "c")]


async def test_goto_to_a_paused_node_leaves_it_paused(checkpointer: Checkpointer) -> None:
    side = Side(ask_graph, checkpointer)
    await side.both(start)
    assert await side.both(lambda g, ids: g.Command(goto="ask")) == {"log": []}
    assert not side.ours_calls


async def test_resume_with_a_goto_to_a_node_and_a_send(checkpointer: Checkpointer) -> None:
    side = Side(ask_graph, checkpointer)
    await side.both(start)
    out = await side.both(
        lambda g, ids: g.Command(resume="yes", goto=["x", g.Send("other", {"log": []})])
    )
    assert out == {"log": ["ask:yes", "x", "other", "after"]}
    assert sorted(side.ours_calls) == [(0, "ask"), (0, "other"), (0, "x"), (3, "after")]


async def test_a_gotos_nodes_write_in_name_order_beside_the_pending_ones(
    checkpointer: Checkpointer,
) -> None:
    # a goto's nodes are triggered like any other, so LangGraph applies the step's writes
    # with the nodes by name (then the Sends), whatever the goto's order or what was
    # pending before it
    side = Side(chain_graph, checkpointer, interrupt_before=["b"])
    await side.both(start)
    assert await side.both(lambda g, ids: g.Command(goto="a")) == {"log": ["a", "a", "b"]}


async def test_a_gotos_nodes_write_in_name_order_then_its_sends(
    checkpointer: Checkpointer,
) -> None:
    side = Side(chain_graph, checkpointer)
    await side.both(start)
    out = await side.both(lambda g, ids: g.Command(goto=["x", g.Send("b", {"log": []}), "c"]))
    assert out == {"log": ["a", "b", "c", "c", "x", "b", "c"]}


async def test_goto_as_a_new_threads_first_input(checkpointer: Checkpointer) -> None:
    # (e) a thread with no checkpoint: LangGraph's START runs (its input the command's
    # update, or nothing) and the goto joins its first step, beside the nodes START's edges
    # start; ours ran the goto's node alone, as if the thread had finished
    side = Side(chain_graph, checkpointer)
    assert await side.both(lambda g, ids: g.Command(goto="x")) == {"log": ["a", "x", "b", "c"]}
    assert sorted(side.ours_calls) == [(0, "a"), (0, "x"), (2, "b"), (3, "c")]


async def test_goto_and_send_as_a_new_threads_first_input(checkpointer: Checkpointer) -> None:
    side = Side(chain_graph, checkpointer)
    out = await side.both(lambda g, ids: g.Command(goto=["a", g.Send("x", {"log": ["sent"]})]))
    # "a" is START's already: it runs once
    assert out == {"log": ["a", "x", "b", "c"]}
    assert sorted(side.ours_calls) == [(0, "a"), (1, "x"), (2, "b"), (3, "c")]
