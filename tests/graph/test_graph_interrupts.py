"""interrupt() and Command(resume=...): ids, mapping of answers, pending writes, input commands."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from graphkit import LogState, chain, logger

from tinyagents.errors import GraphError, GraphValidationError, InterruptError, InvalidUpdateError
from tinyagents.graph import END, START, Command, StateGraph, interrupt
from tinyagents.graph.stream import INTERRUPT_KEY
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer


def asker(name: str, calls: list[str] | None = None) -> Any:
    """A node that asks one question and logs the answer."""

    def node(state: Any) -> dict[str, Any]:
        if calls is not None:
            calls.append(name)
        answer = interrupt({"question": f"approve {name}?"})
        return {"log": [f"{name}:{answer}"]}

    return node


def parallel(cp: Checkpointer, calls: list[str]) -> Any:
    """START → (left, right, plain) → END, left and right ask a question each."""
    graph = StateGraph(LogState)
    graph.add_node("left", asker("left", calls)).add_node("right", asker("right", calls))
    graph.add_node("plain", lambda s: calls.append("plain") or {"log": ["plain"]})
    for name in ("left", "right", "plain"):
        graph.add_edge(START, name).add_edge(name, END)
    return graph.compile(checkpointer=cp)


async def test_interrupt_pauses_and_resume_returns_the_answer(checkpointer: Checkpointer) -> None:
    graph = StateGraph(LogState).add_node("ask", asker("ask")).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=checkpointer)
    result = await compiled.run({}, thread_id="t")
    assert result.status == "interrupted"
    [pending] = result.interrupts
    assert pending.node == "ask" and pending.value == {"question": "approve ask?"}
    assert pending.id.startswith("i-") and pending.task_id.startswith("t-") and pending.ns == ""
    result = await compiled.run(Command(resume="yes"), thread_id="t")
    assert result.status == "completed" and result.state["log"] == ["ask:yes"]


async def test_parallel_interrupts_have_distinct_ids_and_resume_one_by_one(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []
    graph = parallel(checkpointer, calls)
    result = await graph.run({}, thread_id="t")
    assert result.status == "interrupted"
    by_node = {i.node: i for i in result.interrupts}
    assert set(by_node) == {"left", "right"}
    assert by_node["left"].id != by_node["right"].id
    assert by_node["left"].task_id != by_node["right"].task_id

    with pytest.raises(InterruptError, match="2 interrupts are pending") as refused:
        await graph.run(Command(resume="yes"), thread_id="t")
    assert isinstance(refused.value, RuntimeError)  # what LangGraph raises there

    result = await graph.run(Command(resume={by_node["left"].id: "L"}), thread_id="t")
    assert result.status == "interrupted"
    assert [i.id for i in result.interrupts] == [by_node["right"].id]  # the other stays pending
    result = await graph.run(Command(resume={by_node["right"].id: "R"}), thread_id="t")
    assert result.status == "completed"
    assert result.state["log"] == ["left:L", "plain", "right:R"]  # by node name, as LangGraph
    # plain finished in the first run and its write was kept: it never ran again
    assert calls.count("plain") == 1 and calls.count("left") == 2 and calls.count("right") == 2


async def test_ids_are_stable_across_the_resume_rerun(checkpointer: Checkpointer) -> None:
    calls: list[str] = []
    graph = parallel(checkpointer, calls)
    first = await graph.run({}, thread_id="t")
    again = await graph.run(None, thread_id="t")  # nothing answered: still the same questions
    assert again.status == "interrupted"
    assert sorted(i.id for i in again.interrupts) == sorted(i.id for i in first.interrupts)
    assert calls.count("left") == 1  # a paused task without an answer is not run again


async def test_nth_interrupt_call_gets_the_nth_answer(checkpointer: Checkpointer) -> None:
    def two_questions(state: Any) -> dict[str, Any]:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"log": [f"{first}+{second}"]}

    graph = StateGraph(LogState).add_node("q", two_questions).add_edge(START, "q")
    compiled = graph.add_edge("q", END).compile(checkpointer=checkpointer)
    r1 = await compiled.run({}, thread_id="t")
    assert [i.value for i in r1.interrupts] == ["first?"] and r1.interrupts[0].index == 0
    r2 = await compiled.run(Command(resume="A"), thread_id="t")
    assert [i.value for i in r2.interrupts] == ["second?"] and r2.interrupts[0].index == 1
    assert r2.interrupts[0].id != r1.interrupts[0].id
    r3 = await compiled.run(Command(resume={r2.interrupts[0].id: "B"}), thread_id="t")
    assert r3.state["log"] == ["A+B"]


async def test_resume_errors_change_nothing(checkpointer: Checkpointer) -> None:
    graph = StateGraph(LogState).add_node("ask", asker("ask")).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=checkpointer)
    with pytest.raises(InterruptError, match="no pending interrupt"):
        await compiled.run(Command(resume="early"), thread_id="t")
    result = await compiled.run({}, thread_id="t")
    before = await compiled.history("t")
    with pytest.raises(InterruptError, match="no pending interrupt with id i-0000000000000000"):
        await compiled.run(Command(resume={"i-0000000000000000": "x"}), thread_id="t")
    with pytest.raises(InterruptError, match="no pending interrupt with id i-0000000000000000"):
        # a goto beside an answer is saved only once the answer is known to fit
        await compiled.run(Command(resume={"i-0000000000000000": "x"}, goto="ask"), thread_id="t")
    assert await compiled.history("t") == before
    assert (await compiled.get_state("t")).interrupts == tuple(result.interrupts)


async def test_a_dict_answer_that_is_not_an_id_map_is_a_plain_value(
    checkpointer: Checkpointer,
) -> None:
    graph = StateGraph(LogState).add_node("ask", asker("ask")).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=checkpointer)
    await compiled.run({}, thread_id="t")
    result = await compiled.run(Command(resume={"approved": True}), thread_id="t")
    assert result.state["log"] == ["ask:{'approved': True}"]


async def test_interrupt_without_checkpointer_fails_clearly() -> None:
    graph = StateGraph(LogState).add_node("ask", asker("ask")).add_edge(START, "ask")
    result = await graph.add_edge("ask", END).compile().run({})
    assert result.status == "failed" and isinstance(result.error, GraphError)
    assert "needs a checkpointer" in str(result.error)


def test_interrupt_outside_a_node_is_an_error() -> None:
    with pytest.raises(GraphError, match="inside a running graph node"):
        interrupt("x")


@pytest.mark.parametrize("parallel", [False, True])
async def test_an_interrupt_value_no_checkpoint_holds_fails_the_node(
    checkpointer: Checkpointer, parallel: bool
) -> None:
    """``interrupt(object())``: the question cannot be saved, so nobody could answer it. The
    node fails with a typed error that says so, and no question shows anywhere (result,
    stream, state), since none was saved; ``run(None)`` asks again."""
    graph = StateGraph(LogState).add_node("ask", lambda s: {"log": [interrupt(object())]})
    graph.add_edge(START, "ask").add_edge("ask", END)
    if parallel:  # a step of several tasks: the others finish and are kept
        graph.add_node("other", logger("other")).add_edge(START, "other")
    compiled = graph.compile(checkpointer=checkpointer)
    result = await compiled.run({"log": []}, thread_id="t")
    assert result.status == "failed" and isinstance(result.error, InvalidUpdateError)
    assert "cannot checkpoint an interrupt() value" in str(result.error)
    assert result.interrupts == []
    state = await compiled.get_state("t")
    assert state.interrupts == () and state.next == ("ask",)
    (failed,) = [t for t in state.tasks if t.name == "ask"]
    assert failed.interrupts == () and failed.error is not None
    assert "cannot checkpoint" in failed.error
    items: list[Any] = []
    with pytest.raises(InvalidUpdateError, match="cannot checkpoint an interrupt"):
        async for item in compiled.stream({"log": []}, thread_id="u", mode="updates"):
            items.append(item)
    assert not any(INTERRUPT_KEY in item for item in items)
    again = await compiled.run(None, thread_id="t")
    assert again.status == "failed" and again.interrupts == []


async def test_interrupt_is_not_swallowed_by_except_exception(checkpointer: Checkpointer) -> None:
    def careless(state: Any) -> dict[str, Any]:
        try:
            answer = interrupt("q")
        except Exception:  # must not catch the pause
            answer = "swallowed"
        return {"log": [answer]}

    graph = StateGraph(LogState).add_node("n", careless).add_edge(START, "n")
    compiled = graph.add_edge("n", END).compile(checkpointer=checkpointer)
    assert (await compiled.run({}, thread_id="t")).status == "interrupted"


async def test_command_update_and_goto_as_input(checkpointer: Checkpointer) -> None:
    compiled = chain("a", "b", "c").compile(checkpointer=checkpointer)
    await compiled.run({"x": 0}, thread_id="t")
    result = await compiled.run(Command(update={"x": 9}, goto="c"), thread_id="t")
    assert result.state == {"x": 9, "log": ["a", "b", "c", "c"]}
    # an update alone is applied as its own checkpoint and runs nothing
    result = await compiled.run(Command(update={"log": ["manual"]}), thread_id="t")
    assert result.state["log"][-1] == "manual"
    assert (await compiled.history("t"))[0].source == "input"


async def test_goto_as_input_runs_beside_pending_tasks(checkpointer: Checkpointer) -> None:
    # as LangGraph's: the goto joins the paused step; the question stays pending (same id)
    graph = StateGraph(LogState).add_node("ask", asker("ask"), destinations=["alt"])
    graph.add_node("alt", logger("alt"))
    graph.add_edge(START, "ask").add_edge("ask", END).add_edge("alt", END)
    compiled = graph.compile(checkpointer=checkpointer)
    paused = await compiled.run({}, thread_id="t")
    result = await compiled.run(Command(goto="alt"), thread_id="t")
    assert result.status == "interrupted" and result.state["log"] == ["alt"]
    assert result.interrupts == paused.interrupts
    assert (await compiled.get_state("t")).next == ("ask",)
    result = await compiled.run(Command(resume="yes", goto="alt"), thread_id="t")
    assert result.status == "completed", result.error
    # "alt" finished in that step already: named again, it does not run again; the step's
    # writes apply by node name, as LangGraph's
    assert result.state["log"] == ["alt", "ask:yes"]


async def test_new_input_on_a_paused_thread_starts_over() -> None:
    cp = MemoryCheckpointer()
    graph = StateGraph(LogState).add_node("ask", asker("ask")).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=cp)
    first = await compiled.run({"x": 1}, thread_id="t")
    second = await compiled.run({"x": 2}, thread_id="t")
    assert second.status == "interrupted" and second.state["x"] == 2
    assert second.interrupts[0].id != first.interrupts[0].id  # a new step, a new task


async def test_concurrent_parallel_interrupts_all_surface(checkpointer: Checkpointer) -> None:
    release = asyncio.Event()

    async def late(state: Any) -> dict[str, Any]:
        await release.wait()
        return {"log": [interrupt("late?")]}

    async def early(state: Any) -> dict[str, Any]:
        release.set()
        return {"log": [interrupt("early?")]}

    graph = StateGraph(LogState).add_node("late", late).add_node("early", early)
    for name in ("late", "early"):
        graph.add_edge(START, name).add_edge(name, END)
    result = await graph.compile(checkpointer=checkpointer).run({}, thread_id="t")
    assert sorted(i.value for i in result.interrupts) == ["early?", "late?"]


async def test_a_per_run_breakpoint_on_an_unknown_node_is_refused(
    checkpointer: Checkpointer,
) -> None:
    # compile(interrupt_before=["zz"]) is refused, but run(..., interrupt_before=["zz"]) (a
    # misspelt node) was taken and the run went through without stopping
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    for where in ("interrupt_before", "interrupt_after"):
        with pytest.raises(GraphValidationError, match=r"unknown node\(s\) \['zz'\]"):
            await graph.run({"x": 1}, thread_id="t", **{where: ["zz"]})
    assert await graph.history("t") == []
    stopped = await graph.run({"x": 1}, thread_id="t", interrupt_before=["b"])
    assert stopped.status == "interrupted" and (await graph.get_state("t")).next == ("b",)


async def test_a_question_being_saved_as_a_sibling_fails_is_kept(
    checkpointer: Checkpointer,
) -> None:
    """A sibling's failure cancelled a paused task while its question was being saved: the
    save was cut short, so the failed run listed the question but the thread did not have it
    (a resume naming it was refused), where a finished task's result is saved all the same.
    The question's save lands first now, as LangGraph keeps an interrupt beside a failure."""
    failed = asyncio.Event()
    put_writes = checkpointer.put_writes

    async def slow(thread_id: str, ns: str, frontier_id: str, writes: list[Any]) -> None:
        if any(w.kind == "interrupt" for w in writes):
            # the question is saved once the sibling has failed, in a few turns of the loop
            # (a database's round trip): the step's cancel comes meanwhile
            await failed.wait()
            for _ in range(3):
                await asyncio.sleep(0)
        await put_writes(thread_id, ns, frontier_id, writes)
        if any(w.kind == "error" for w in writes):
            failed.set()

    checkpointer.put_writes = slow  # type: ignore[method-assign]
    # the error's record comes this way (a write the failing run can do without)
    checkpointer.put_writes_once = slow  # type: ignore[method-assign]

    def fails(state: Any) -> dict[str, Any]:
        raise ValueError("boom")

    graph = StateGraph(LogState).add_node("ask", asker("ask")).add_node("fails", fails)
    graph.add_edge(START, "ask").add_edge(START, "fails")
    compiled = graph.compile(checkpointer=checkpointer)
    result = await compiled.run({}, thread_id="t")
    assert result.status == "failed" and str(result.error) == "boom"
    [question] = (await compiled.get_state("t")).interrupts
    assert question.value == {"question": "approve ask?"}
    assert [i.id for i in result.interrupts] == [question.id]
    done = await compiled.run(Command(resume={question.id: "yes"}), thread_id="t")
    assert done.status == "failed"  # fails runs again, and fails again: the answer was taken
    assert (await compiled.get_state("t")).values == {"log": ["ask:yes"]}
