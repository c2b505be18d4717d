"""Ports of LangGraph's tests, seventeenth round: ``test_subgraph_persistence.py``'s
persistent and unsaved sub-graphs called from a node (``test_stateful_state_accumulates``,
``..._with_interrupt``, ``test_stateful_interrupt_resume``, ``test_checkpointer_false_no_
persistence``); ``test_time_travel.py``'s questions in persistent sub-graphs two and three
levels down (``test_3_levels_deep_middle_has_interrupts``, ``..._time_travel_to_first_
interrupt`` / ``..._to_second_interrupt`` up to their time travel into a sub-graph), a resume
naming the head checkpoint (``test_subgraph_interrupt_resume_with_explicit_head_checkpoint_
id``) and the history a replay leaves (``test_subgraph_time_travel_checkpoint_pattern``);
``test_pregel.py::test_checkpoint_errors`` and ``::test_no_redundant_put_writes_for_cached_
task``; ``test_retry.py::test_graph_error_handler_error_context_survives_checkpoint_resume``;
``test_large_cases_async.py::test_conditional_graph_state``. Each program is written once and
run on both libraries (``OURS`` / ``THEIRS``), the outcomes compared; where ours differs on
purpose (a checkpointer's own error in a step ends the run "failed", a replay is a "rewind"
on top of the head, a node's state is read-only, a sub-graph hands back what it changed)
the difference is pinned and docs/graph.md says so. Beside the ports, the places where those
meet: two persistent sub-graphs asking at once, answered one at a time; a resume that also
updates the parent while its sub-graph waits; a persistent sub-graph's second call streamed
and inspected while it waits; a checkpointer failing in a ``durability="exit"`` flush.
Found here and fixed: a persistent sub-graph whose second call (or later) went on from its
own checkpoint (resumed, retried, ``run(None)`` after a failure) handed back its change
since its first call's start (``test_a_persistent_sub_graph_resumed_in_a_later_call_hands_
back_that_calls_change``, ``..._going_on_after_a_failure_...``).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import (
    OURS,
    THEIRS,
    cfg,
    func_of,
    lg_errors,
    lg_memory,
    lg_message,
    shape,
    values,
)

import tinyagents.graph as ours_graph
from tinyagents.errors import GraphError, StoreError
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer

lc_messages = pytest.importorskip("langchain_core.messages")


def saver(g: Any) -> Any:
    return MemoryCheckpointer() if g is OURS else lg_memory.InMemorySaver()


async def call(g: Any, graph: Any, given: Any) -> Any:
    """``graph`` run from inside a node: its final state."""
    if g is OURS:
        return (await graph.run(given)).state
    return await graph.ainvoke(given)


async def run(g: Any, graph: Any, given: Any, thread: str = "1", **kw: Any) -> dict[str, Any]:
    """A run's state and its interrupts' values, as ``{"state": ..., "asked": [...]}``."""
    if g is OURS:
        result = await graph.run(given, thread_id=thread, **kw)
        assert result.status != "failed", result.error
        return {"state": result.state, "asked": [i.value for i in result.interrupts]}
    out = await graph.ainvoke(given, cfg(thread), **kw)
    return {"state": values(out), "asked": [i.value for i in out.get("__interrupt__", [])]}


# -- persistent and unsaved sub-graphs called from a node (test_subgraph_persistence.py) ------


class Result(TypedDict):
    result: str


def texts(state: dict[str, Any]) -> list[str]:
    return [m.text for m in state["messages"]]


class OursMsgs(TypedDict):
    messages: Annotated[list[Any], ours_graph.add_messages]


class TheirsMsgs(TypedDict):
    messages: Annotated[list[Any], lg_message.add_messages]


def messages_graph(g: Any) -> Any:
    return g.StateGraph(OursMsgs if g is OURS else TheirsMsgs)


def asking_wrapper(g: Any, asks: bool = True) -> Any:
    """A graph whose one node is a per-call graph that asks "continue?" (when ``asks``)
    before it answers "Processing: ..." and then "Done"."""

    def process(state: Any) -> dict[str, Any]:
        if asks:
            g.interrupt("continue?")
        return {"messages": [lc_messages.AIMessage(f"Processing: {state['messages'][-1].text}")]}

    inner = (
        messages_graph(g)
        .add_node("process", process)
        .add_node("respond", lambda s: {"messages": [lc_messages.AIMessage("Done")]})
        .add_edge(g.START, "process")
        .add_edge("process", "respond")
        .compile()
    )
    return messages_graph(g).add_node("agent", inner).add_edge(g.START, "agent")


def calling_parent(g: Any, sub: Any, seen: list[list[str]], cp: Any) -> Any:
    topics = ["apples", "bananas"]

    async def call_inner(state: Result) -> dict[str, Any]:
        topic = topics[len(seen)]
        out = await call(g, sub, {"messages": [lc_messages.HumanMessage(f"tell me about {topic}")]})
        seen.append(texts(out))
        return {"result": out["messages"][-1].text}

    graph = g.StateGraph(Result).add_node("call_inner", call_inner)
    return graph.add_edge(g.START, "call_inner").compile(checkpointer=cp)


@pytest.mark.parametrize("asks", [True, False])
async def test_a_persistent_sub_graph_called_from_a_node_keeps_its_messages(
    checkpointer: Checkpointer, asks: bool
) -> None:
    # LangGraph: test_subgraph_persistence.py::test_stateful_state_accumulates (asks=False),
    # ::test_stateful_state_accumulates_with_interrupt and ::test_stateful_interrupt_resume
    outcomes: dict[str, list[Any]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        seen: list[list[str]] = []
        parent = calling_parent(g, asking_wrapper(g, asks).compile(checkpointer=True), seen, cp)
        steps = []
        inputs = ({"result": ""}, g.Command(resume=True)) if asks else ({"result": ""},)
        for given in inputs * 2:
            steps.append(await run(g, parent, given))
        outcomes["ours" if g is OURS else "theirs"] = [steps, seen]
    assert outcomes["ours"] == outcomes["theirs"]
    steps, seen = outcomes["ours"]
    asked = {"state": {"result": ""}, "asked": ["continue?"]}
    done = {"state": {"result": "Done"}, "asked": []}
    assert steps == ([asked, done, asked, done] if asks else [done, done])
    first = ["tell me about apples", "Processing: tell me about apples", "Done"]
    assert seen == [
        first,
        [*first, "tell me about bananas", "Processing: tell me about bananas", "Done"],
    ]


async def test_an_unsaved_sub_graph_called_from_a_node_starts_afresh_each_run(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_subgraph_persistence.py::test_checkpointer_false_no_persistence
    def echo(state: Any) -> dict[str, Any]:
        return {"messages": [lc_messages.AIMessage(f"Processed: {state['messages'][-1].text}")]}

    outcomes: dict[str, list[Any]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        inner = messages_graph(g).add_node("echo", echo).add_edge(g.START, "echo")
        seen: list[list[str]] = []
        parent = calling_parent(g, inner.compile(checkpointer=False), seen, cp)
        results = [await run(g, parent, {"result": ""}) for _ in range(2)]
        outcomes["ours" if g is OURS else "theirs"] = [results, seen]
    assert outcomes["ours"] == outcomes["theirs"]
    results, seen = outcomes["ours"]
    assert [r["state"]["result"] for r in results] == [
        "Processed: tell me about apples",
        "Processed: tell me about bananas",
    ]
    assert seen == [
        ["tell me about apples", "Processed: tell me about apples"],
        ["tell me about bananas", "Processed: tell me about bananas"],
    ]


# -- questions at two levels of persistent sub-graphs (test_time_travel.py) --------------------


class Value(TypedDict):
    value: Annotated[list[str], operator.add]


def middle_asks(g: Any, cp: Any, called: list[str]) -> Any:
    """parent: outer (persistent) ▸ pre (asks) → inner (persistent) ▸ step_a → ask_1 (asks)."""

    def pre(state: Value) -> dict[str, Any]:
        called.append("pre")
        return {"value": [f"pre:{g.interrupt('Pre-question?')}"]}

    def step_a(state: Value) -> dict[str, Any]:
        called.append("step_a")
        return {"value": ["step_a_done"]}

    def ask_1(state: Value) -> dict[str, Any]:
        called.append("ask_1")
        return {"value": [f"ask_1:{g.interrupt('Question 1?')}"]}

    inner = (
        g.StateGraph(Value)
        .add_node("step_a", step_a)
        .add_node("ask_1", ask_1)
        .add_edge(g.START, "step_a")
        .add_edge("step_a", "ask_1")
        .add_edge("ask_1", g.END)
        .compile(checkpointer=True)
    )
    middle = (
        g.StateGraph(Value)
        .add_node("pre", pre)
        .add_node("inner", inner)
        .add_edge(g.START, "pre")
        .add_edge("pre", "inner")
        .add_edge("inner", g.END)
        .compile(checkpointer=True)
    )
    graph = g.StateGraph(Value).add_node("outer", middle).add_edge(g.START, "outer")
    return graph.compile(checkpointer=cp)


async def sub_state(g: Any, graph: Any) -> tuple[Any, Any]:
    """The top task's sub-graph state: (its next, its values)."""
    if g is OURS:
        snap = await graph.get_state("1", subgraphs=True)
    else:
        snap = await graph.aget_state(cfg(), subgraphs=True)
    state = snap.tasks[0].state
    return tuple(state.next), state.values


async def test_questions_of_a_persistent_middle_and_its_persistent_inner_graph(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_3_levels_deep_middle_has_interrupts, up to its
    # time travel to a sub-graph's checkpoint (docs/graph.md, "What it does not do": here one
    # goes back to a root checkpoint); then the replay of the root's checkpoint before
    # ``outer`` ran, which takes both persistent graphs back to nothing, in both libraries
    outcomes: dict[str, list[Any]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        called: list[str] = []
        graph = middle_asks(g, cp, called)
        seen: list[Any] = []
        for given in ({"value": []}, g.Command(resume="pre_answer"), g.Command(resume="answer_1")):
            seen.append(await run(g, graph, given))
            seen.append(list(called))
            called.clear()
            if seen[-2]["asked"]:
                seen.append(await sub_state(g, graph))
        if g is OURS:
            [before] = [h.checkpoint_id for h in await graph.history("1") if h.next == ("outer",)]
            seen.append(await run(g, graph, None, checkpoint_id=before))
        else:
            [before] = [
                s.config async for s in graph.aget_state_history(cfg()) if s.next == ("outer",)
            ]
            out = await graph.ainvoke(None, before)
            seen.append({"state": values(out), "asked": [i.value for i in out["__interrupt__"]]})
        seen.append(list(called))
        outcomes["ours" if g is OURS else "theirs"] = seen
    ours, theirs = outcomes["ours"], outcomes["theirs"]
    # docs/graph.md, "Sub-graphs": a sub-graph hands back what it changed, LangGraph's its
    # whole output, which the parent's operator.add list takes in again
    assert theirs[6]["state"]["value"] == ["pre:pre_answer", *ours[6]["state"]["value"]]
    assert ours[:6] + ours[7:] == theirs[:6] + theirs[7:]
    assert ours == [
        {"state": {"value": []}, "asked": ["Pre-question?"]},
        ["pre"],
        (("pre",), {"value": []}),
        {"state": {"value": []}, "asked": ["Question 1?"]},
        ["pre", "step_a", "ask_1"],
        (("inner",), {"value": ["pre:pre_answer"]}),
        {"state": {"value": ["pre:pre_answer", "step_a_done", "ask_1:answer_1"]}, "asked": []},
        ["ask_1"],
        {"state": {"value": []}, "asked": ["Pre-question?"]},
        ["pre"],
    ]


# -- a resume given the thread's newest checkpoint id (test_time_travel.py) --------------------


def sub_asks(
    g: Any, cp: Any, called: list[str], persistent: bool | None, from_node: bool = False
) -> Any:
    """subgraph_node: a sub-graph step_a → ask_human (asks) → step_b, as the node or called
    from it (``from_node``)."""

    def node(name: str, asks: bool = False) -> Any:
        def act(state: Value) -> dict[str, Any]:
            called.append(name)
            if asks:
                return {"value": [f"human:{g.interrupt('Provide input:')}"]}
            return {"value": [f"sub_{name[-1]}"]}

        return act

    sub = (
        g.StateGraph(Value)
        .add_node("step_a", node("step_a"))
        .add_node("ask_human", node("ask_human", asks=True))
        .add_node("step_b", node("step_b"))
        .add_edge(g.START, "step_a")
        .add_edge("step_a", "ask_human")
        .add_edge("ask_human", "step_b")
        .compile(checkpointer=persistent)
    )
    if not from_node:
        graph = g.StateGraph(Value).add_node("subgraph_node", sub)
        return graph.add_edge(g.START, "subgraph_node").compile(checkpointer=cp)

    async def subgraph_node(state: Value) -> dict[str, Any]:
        return {"value": (await call(g, sub, {"value": []}))["value"]}

    graph = g.StateGraph(Value).add_node("subgraph_node", subgraph_node)
    return graph.add_edge(g.START, "subgraph_node").compile(checkpointer=cp)


@pytest.mark.parametrize("from_node", [False, True], ids=["node", "called"])
@pytest.mark.parametrize("persistent", [True, None])
async def test_a_resume_at_the_newest_checkpoint_id_goes_on_from_the_question(
    checkpointer: Checkpointer, persistent: bool | None, from_node: bool
) -> None:
    # LangGraph: test_time_travel.py::test_subgraph_interrupt_resume_with_explicit_head_
    # checkpoint_id: naming the head is a resume, not a replay; the sub-graph's finished
    # node does not run again (also a sub-graph a node calls, per call or persistent)
    outcomes: dict[str, list[Any]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        called: list[str] = []
        graph = sub_asks(g, cp, called, persistent, from_node)
        seen: list[Any] = [await run(g, graph, {"value": []}), list(called)]
        called.clear()
        if g is OURS:
            head = (await graph.get_state("1")).checkpoint_id
            seen.append(await run(g, graph, g.Command(resume="answer"), checkpoint_id=head))
        else:
            head = (await graph.aget_state(cfg())).config["configurable"]["checkpoint_id"]
            out = await graph.ainvoke(
                g.Command(resume="answer"), cfg(checkpoint_id=head, checkpoint_ns="")
            )
            seen.append({"state": values(out), "asked": []})
        seen.append(list(called))
        outcomes["ours" if g is OURS else "theirs"] = seen
    assert outcomes["ours"] == outcomes["theirs"]
    assert outcomes["ours"] == [
        {"state": {"value": []}, "asked": ["Provide input:"]},
        ["step_a", "ask_human"],
        {"state": {"value": ["sub_a", "human:answer", "sub_b"]}, "asked": []},
        ["ask_human", "step_b"],
    ]


# -- a checkpointer that fails (test_pregel.py::test_checkpoint_errors) ------------------------


class FaultyLatest(MemoryCheckpointer):
    """Every read of a thread's newest checkpoint fails (a run reads it with ``chain``)."""

    async def latest(self, thread_id: str, ns: str = "") -> Any:
        raise ValueError("Faulty get_tuple")

    async def chain(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("Faulty get_tuple")


class FaultyPut(MemoryCheckpointer):
    async def put(self, record: Any) -> None:
        raise ValueError("Faulty put")


class FailsOnce(MemoryCheckpointer):
    failed = False

    async def put(self, record: Any) -> None:
        if not self.failed:
            self.failed = True
            raise ValueError("Faulty put")
        await super().put(record)


class FaultyPutWrites(MemoryCheckpointer):
    async def put_writes(self, *args: Any, **kwargs: Any) -> None:
        raise ValueError("Faulty put_writes")


class TheirsFaultyGet(lg_memory.InMemorySaver):
    async def aget_tuple(self, config: Any) -> Any:
        raise ValueError("Faulty get_tuple")


class TheirsFaultyPut(lg_memory.InMemorySaver):
    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("Faulty put")


class TheirsFaultyPutWrites(lg_memory.InMemorySaver):
    async def aput_writes(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("Faulty put_writes")


def one_value_graph(g: Any, cp: Any, parallel: bool = False) -> Any:
    graph = g.StateGraph(Annotated[str, operator.add]).add_node("agent", lambda s: "")
    graph.add_edge(g.START, "agent")
    if parallel:
        graph.add_node("parallel", lambda s: "").add_edge(g.START, "parallel")
    return graph.compile(checkpointer=cp)


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_a_checkpointer_that_fails_with_an_error_of_its_own(durability: str) -> None:
    # LangGraph: test_pregel.py::test_checkpoint_errors: a failing read, save of a checkpoint
    # or save of a step's writes (two nodes in a step) is raised out of the run. Ours raises
    # a read's or the input's save's out of run() and stream() too, having saved nothing and
    # left the thread free; a failing save in a step ends the run "failed" with the error,
    # as a StoreError does (docs/graph.md, "Running": the thread goes on from what was saved)
    cases = [
        (FaultyLatest, TheirsFaultyGet, "Faulty get_tuple", False),
        (FaultyPut, TheirsFaultyPut, "Faulty put", False),
        (FaultyPutWrites, TheirsFaultyPutWrites, "Faulty put_writes", True),
    ]
    for ours_cp, theirs_cp, message, parallel in cases:
        theirs = one_value_graph(THEIRS, theirs_cp(), parallel)
        with pytest.raises(ValueError, match=message):
            await theirs.ainvoke("", cfg("thread-1"), durability=durability)
        ours = one_value_graph(OURS, ours_cp(), parallel)
        if not parallel:
            with pytest.raises(ValueError, match=message):
                await ours.run("", thread_id="thread-1", durability=durability)
            with pytest.raises(ValueError, match=message):
                [i async for i in ours.stream("", thread_id="thread-2", durability=durability)]
            assert await MemoryCheckpointer.list(ours.checkpointer, "thread-1") == []
            continue
        result = await ours.run("", thread_id="thread-1", durability=durability)
        assert result.status == "failed"
        assert isinstance(result.error, ValueError) and str(result.error) == message
        with pytest.raises(ValueError, match=message):
            [i async for i in ours.stream("", thread_id="thread-2", durability=durability)]
    # a failing save lets go of the thread: its next run takes it
    flaky = FailsOnce()
    ours = one_value_graph(OURS, flaky)
    with pytest.raises(ValueError, match="Faulty put"):
        await ours.run("", thread_id="t")
    assert (await ours.run("a", thread_id="t")).state == "a"


# -- an error handler's question after a failure is saved (test_retry.py) ----------------------


class Foo(TypedDict):
    foo: str


def failing_with_handler(g: Any, cp: Any, captured: dict[str, Any], **compile_kw: Any) -> Any:
    error_type = ours_graph.NodeError if g is OURS else lg_errors.NodeError

    def always_failing(state: Foo) -> dict[str, Any]:
        captured.setdefault("node_calls", 0)
        captured["node_calls"] += 1
        raise RuntimeError("failed before handler")

    def handler(state: Foo, error: Any) -> dict[str, Any]:
        captured["from_node_name"] = error.node
        captured["from_node_error"] = error.error
        return {"foo": f"handled:{g.interrupt('retry?')}"}

    handler.__annotations__["error"] = error_type  # (this module's annotations are strings)

    graph = g.StateGraph(Foo).add_node("always_failing", always_failing, error_handler=handler)
    return graph.add_edge(g.START, "always_failing").compile(checkpointer=cp, **compile_kw)


async def test_an_error_handler_that_asks_goes_on_with_the_saved_failure(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_retry.py::test_graph_error_handler_error_context_survives_checkpoint_
    # resume, whose stop before the handler (interrupt_before="__error_handler__...") LangGraph
    # 1.2 does not make (docs/graph.md, "Error handlers"): here the handler's own question
    # makes the stop; the run that answers it runs the handler again, not the node, and the
    # handler still learns which node failed and with what
    outcomes: dict[str, list[Any]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        captured: dict[str, Any] = {}
        graph = failing_with_handler(g, cp, captured)
        seen: list[Any] = [await run(g, graph, {"foo": ""})]
        seen.append(await run(g, graph, g.Command(resume="yes")))
        assert captured.pop("from_node_name") == "always_failing"
        error = captured.pop("from_node_error")
        # the error as saved: ours a GraphError of its repr (docs/graph.md, "Error handlers"),
        # as LangGraph's test (at its HEAD) wants an exception; LangGraph 1.2.24 gives the str
        assert "RuntimeError('failed before handler')" in str(error)
        assert isinstance(error, GraphError if g is OURS else (str, BaseException))
        seen.append(captured)
        outcomes["ours" if g is OURS else "theirs"] = seen
    assert outcomes["ours"] == outcomes["theirs"]
    assert outcomes["ours"] == [
        {"state": {"foo": ""}, "asked": ["retry?"]},
        {"state": {"foo": "handled:yes"}, "asked": []},
        {"node_calls": 1},
    ]


async def test_a_stop_before_an_error_handler_is_not_made() -> None:
    # LangGraph: test_retry.py::test_graph_error_handler_error_context_survives_checkpoint_
    # resume as written: LangGraph 1.2 (installed) runs the handler in the failed node's step
    # and makes no stop before it; neither does ours (docs/graph.md, "Error handlers")
    outcomes = {}
    for g in (THEIRS, OURS):
        captured: dict[str, Any] = {}
        stop = ["__error_handler__always_failing"]
        graph = failing_with_handler(g, saver(g), captured, interrupt_before=stop)
        outcomes[g is OURS] = (await run(g, graph, {"foo": ""}), captured.get("node_calls"))
    assert outcomes[True] == outcomes[False] == ({"state": {"foo": ""}, "asked": ["retry?"]}, 1)


# -- a finished @task is not saved again on resume (test_pregel.py) ----------------------------


def setup_then_ask(g: Any, cp: Any, calls: list[str]) -> Any:
    func = func_of(g)

    @func.task
    def setup(x: int) -> int:
        calls.append("setup")
        return x

    @func.task
    def ask(question: str) -> str:
        calls.append("ask")
        return g.interrupt(question)

    @func.entrypoint(checkpointer=cp)
    async def workflow(x: int) -> dict[str, Any]:
        n = await setup(x)
        return {"answer": await ask(f"q{n}")}

    return workflow


async def test_a_finished_task_is_neither_run_nor_saved_again_on_resume(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_no_redundant_put_writes_for_cached_task: on resume,
    # only the task that asked and the entrypoint's task save writes
    calls: list[str] = []
    theirs = setup_then_ask(THEIRS, lg_memory.InMemorySaver(), calls)
    out = await theirs.ainvoke(1, cfg())
    assert [i.value for i in out["__interrupt__"]] == ["q1"]
    assert await theirs.ainvoke(THEIRS.Command(resume="ans"), cfg()) == {"answer": "ans"}
    assert calls == ["setup", "ask", "ask"]
    calls.clear()
    ours = setup_then_ask(OURS, checkpointer, calls)
    first = await ours.run(1, thread_id="1")
    assert [i.value for i in first.interrupts] == ["q1"]
    saved: list[str] = []  # the namespace of each save
    put_writes, put = checkpointer.put_writes, checkpointer.put

    async def spy_writes(thread_id: str, ns: str, frontier_id: str, writes: list[Any]) -> None:
        saved.append(ns)
        await put_writes(thread_id, ns, frontier_id, writes)

    async def spy_put(record: Any) -> None:
        saved.append(record.ns)
        await put(record)

    checkpointer.put_writes = spy_writes  # type: ignore[method-assign]
    checkpointer.put = spy_put  # type: ignore[method-assign]
    assert (await ours.run(OURS.Command(resume="ans"), thread_id="1")).state == {"answer": "ans"}
    assert calls == ["setup", "ask", "ask"]
    # each @task call checkpoints in a namespace of its own under the entrypoint's task: the
    # second call's ("|1") is ask's; the first's, setup's, is not written to again
    asked_in = first.interrupts[0].ns
    assert asked_in.endswith("|1")
    assert sorted(set(saved)) == ["", asked_in]


# -- two questions three levels down; the history a replay leaves (test_time_travel.py) --------


def innermost_asks_twice(g: Any, cp: Any, called: list[str]) -> Any:
    """parent: outer (persistent) ▸ inner (persistent) ▸ step_a → ask_1 → ask_2."""

    def node(name: str, question: str | None = None) -> Any:
        def act(state: Value) -> dict[str, Any]:
            called.append(name)
            if question is None:
                return {"value": [f"{name}_done"]}
            return {"value": [f"{name}:{g.interrupt(question)}"]}

        return act

    inner = (
        g.StateGraph(Value)
        .add_node("step_a", node("step_a"))
        .add_node("ask_1", node("ask_1", "Question 1?"))
        .add_node("ask_2", node("ask_2", "Question 2?"))
        .add_edge(g.START, "step_a")
        .add_edge("step_a", "ask_1")
        .add_edge("ask_1", "ask_2")
        .add_edge("ask_2", g.END)
        .compile(checkpointer=True)
    )
    middle = g.StateGraph(Value).add_node("inner", inner).add_edge(g.START, "inner")
    middle = middle.compile(checkpointer=True)
    graph = g.StateGraph(Value).add_node("outer", middle).add_edge(g.START, "outer")
    return graph.compile(checkpointer=cp)


async def nested_states(g: Any, graph: Any) -> list[Any]:
    """(next, values) of each level below the top, outermost first, down the first tasks."""
    if g is OURS:
        snap = await graph.get_state("1", subgraphs=True)
    else:
        snap = await graph.aget_state(cfg(), subgraphs=True)
    levels = []
    while snap.tasks and snap.tasks[0].state is not None:
        snap = snap.tasks[0].state
        levels.append((tuple(snap.next), snap.values))
    return levels


async def test_two_questions_of_a_graph_three_levels_down_and_a_replay_from_the_top(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_3_levels_deep_time_travel_to_second_interrupt and
    # ::test_3_levels_deep_time_travel_to_first_interrupt, up to their time travel to the
    # innermost graph's checkpoint (docs/graph.md, "What it does not do"): the state of each
    # level at each question, and a replay of the top's checkpoint before ``outer`` ran,
    # which takes both persistent graphs back to nothing
    outcomes: dict[str, list[Any]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        called: list[str] = []
        graph = innermost_asks_twice(g, cp, called)
        seen: list[Any] = []
        for given in ({"value": []}, g.Command(resume="answer_1"), g.Command(resume="answer_2")):
            seen.append(await run(g, graph, given))
            seen.append(called[:])
            seen.append(await nested_states(g, graph))
            called.clear()
        if g is OURS:
            [before] = [h.checkpoint_id for h in await graph.history("1") if h.next == ("outer",)]
            seen.append(await run(g, graph, None, checkpoint_id=before))
        else:
            [config] = [
                s.config async for s in graph.aget_state_history(cfg()) if s.next == ("outer",)
            ]
            out = await graph.ainvoke(None, config)
            seen.append({"state": values(out), "asked": [i.value for i in out["__interrupt__"]]})
        seen.append(called[:])
        outcomes["ours" if g is OURS else "theirs"] = seen
    ours = outcomes["ours"]
    assert ours == outcomes["theirs"]
    done = ["step_a_done", "ask_1:answer_1", "ask_2:answer_2"]
    assert ours[6] == {"state": {"value": done}, "asked": []}
    asked_1 = {"state": {"value": []}, "asked": ["Question 1?"]}
    assert ours[:6] == [
        asked_1,
        ["step_a", "ask_1"],
        [(("inner",), {"value": []}), (("ask_1",), {"value": ["step_a_done"]})],
        {"state": {"value": []}, "asked": ["Question 2?"]},
        ["ask_1", "ask_2"],
        [(("inner",), {"value": []}), (("ask_2",), {"value": done[:2]})],
    ]
    assert ours[7:] == [["ask_2"], [], asked_1, ["step_a", "ask_1"]]


def executor_asks(g: Any, cp: Any) -> Any:
    def ask(state: Value) -> dict[str, Any]:
        return {"value": [f"a:{g.interrupt('Q?')}"]}

    executor = g.StateGraph(Value).add_node("ask", ask).add_edge(g.START, "ask")
    executor = executor.compile(checkpointer=True)
    graph = g.StateGraph(Value).add_node("executor", executor).add_edge(g.START, "executor")
    return graph.compile(checkpointer=cp)


async def test_the_history_a_replay_of_a_persistent_sub_graphs_question_leaves(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_subgraph_time_travel_checkpoint_pattern, going
    # back to the top's checkpoint the sub-graph ran from (LangGraph's test goes back to the
    # sub-graph's own, which here is the way: docs/graph.md, "What it does not do"): the
    # replay branches from it and its answer ends the new branch
    theirs, ours = (
        executor_asks(THEIRS, lg_memory.InMemorySaver()),
        executor_asks(OURS, checkpointer),
    )
    await theirs.ainvoke({"value": []}, cfg())
    await theirs.ainvoke(THEIRS.Command(resume="first"), cfg())
    await ours.run({"value": []}, thread_id="1")
    await ours.run(OURS.Command(resume="first"), thread_id="1")
    theirs_history = [s async for s in theirs.aget_state_history(cfg())]
    ours_history = await ours.history("1")
    original = [((), ["a:first"]), (("executor",), []), (("__start__",), [])]
    assert [(s.next, s.values["value"]) for s in theirs_history] == original
    ours_values = [(await ours.get_state("1", h.checkpoint_id)).values for h in ours_history]
    assert [
        (h.next, v["value"]) for h, v in zip(ours_history, ours_values, strict=True)
    ] == original
    [replay_point] = [s for s in theirs_history if s.next == ("executor",)]
    [ours_point] = [h for h in ours_history if h.next == ("executor",)]
    out = await theirs.ainvoke(None, replay_point.config)
    asked = await ours.run(None, thread_id="1", checkpoint_id=ours_point.checkpoint_id)
    assert [i.value for i in out["__interrupt__"]] == [i.value for i in asked.interrupts] == ["Q?"]
    theirs_after = [s async for s in theirs.aget_state_history(cfg())]
    ours_after = await ours.history("1")
    assert [s.next for s in theirs_after] == [h.next for h in ours_after]
    assert (
        theirs_after[0].parent_config["configurable"]["checkpoint_id"]
        == (replay_point.config["configurable"]["checkpoint_id"])
    )
    # docs/graph.md, "Running": ours saves the replay as a "rewind" on top of the head (the
    # history stays one line), one step past the checkpoint it replays, where LangGraph's
    # "fork" branches from that checkpoint
    assert ours_after[0].parent_id == ours_history[0].checkpoint_id
    assert ours_after[0].metadata["rewound_to"] == ours_point.checkpoint_id
    assert ours_after[0].step == theirs_after[0].metadata["step"] == ours_point.step + 1
    out = await theirs.ainvoke(THEIRS.Command(resume="second"), cfg())
    result = await ours.run(OURS.Command(resume="second"), thread_id="1")
    assert out == result.state == {"value": ["a:second"]}
    theirs_final = [s async for s in theirs.aget_state_history(cfg())]
    ours_final = await ours.history("1")
    assert [s.next for s in theirs_final] == [h.next for h in ours_final]
    assert [s.next for s in ours_final] == [(), ("executor",), (), ("executor",), ("__start__",)]
    assert [(await ours.get_state("1", h.checkpoint_id)).values for h in ours_final] == [
        s.values for s in theirs_final
    ]
    assert [s.metadata["source"] for s in theirs_final] == ["loop", "fork", "loop", "loop", "input"]
    assert [h.source for h in ours_final] == ["loop", "rewind", "loop", "loop", "input"]


# -- an agent loop with an untracked input, stopped after each answer (test_large_cases) -------


lg_channels = pytest.importorskip("langgraph.channels")


class OursAgentState(TypedDict, total=False):
    input: Annotated[str, ours_graph.UntrackedValue]
    agent_outcome: dict[str, Any] | None
    intermediate_steps: Annotated[list[list[Any]], operator.add]


class TheirsAgentState(TypedDict, total=False):
    input: Annotated[str, lg_channels.UntrackedValue]
    agent_outcome: dict[str, Any] | None
    intermediate_steps: Annotated[list[list[Any]], operator.add]


def action(tool_input: str, log: str | None = None) -> dict[str, Any]:
    return {
        "tool": "search_api",
        "tool_input": tool_input,
        "log": log or f"tool:search_api:{tool_input}",
    }


def finish(answer: str) -> dict[str, Any]:
    return {"answer": answer, "log": f"finish:{answer}"}


def agent_loop(g: Any, cp: Any = None, in_place: bool = False, **compile_kw: Any) -> Any:
    """agent (scripted: two searches, then an answer, again for each run) ⇄ tools."""
    script = ["tool:search_api:query", "tool:search_api:another", "finish:answer"]
    said: list[str] = []

    def agent(data: Any) -> dict[str, Any]:
        line = script[len(said) % len(script)]
        said.append(line)
        if line.startswith("finish"):
            return {"agent_outcome": finish(line.split(":")[1])}
        return {"agent_outcome": action(line.split(":")[2])}

    def execute_tools(data: Any) -> dict[str, Any]:
        # LangGraph's test pops from the node's input, its own dict there; ours is read-only
        # (docs/graph.md, "State"), dict() of it a copy
        agent_action = (data if in_place else dict(data)).pop("agent_outcome")
        return {"intermediate_steps": [[agent_action, f"result for {agent_action['tool_input']}"]]}

    def should_continue(data: Any) -> str:
        return "exit" if "answer" in data["agent_outcome"] else "continue"

    workflow = g.StateGraph(OursAgentState if g is OURS else TheirsAgentState)
    workflow.add_node("agent", agent).add_node("tools", execute_tools)
    workflow.set_entry_point("agent")
    workflow.add_conditional_edges("agent", should_continue, {"continue": "tools", "exit": g.END})
    workflow.add_edge("tools", "agent")
    return workflow.compile(checkpointer=cp, **compile_kw)


async def updates(g: Any, graph: Any, given: Any, **kw: Any) -> list[Any]:
    if g is OURS:
        thread = {"thread_id": "1"} if graph.checkpointer is not None else {}
        return [i async for i in graph.stream(given, mode="updates", **thread, **kw)]
    config = cfg() if graph.checkpointer is not None else None
    return [i async for i in graph.astream(given, config, **kw)]


async def state_of(g: Any, graph: Any) -> tuple[Any, ...]:
    if g is OURS:
        snap = await graph.get_state("1")
        return snap.values, snap.next, snap.source, snap.step
    snap = await graph.aget_state(cfg())
    return snap.values, snap.next, snap.metadata["source"], snap.metadata["step"]


async def test_an_agent_loop_with_an_untracked_input_stopped_after_each_answer(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_large_cases_async.py::test_conditional_graph_state (its agent a scripted
    # function, its actions dicts): the untracked input is in no checkpoint, a node's pop
    # from its input changes no one else's, an update after a stop routes from the node
    # that stopped, an answer given by update_state ends the loop
    query = {"input": "what is weather in sf"}
    outcomes: dict[str, list[Any]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        seen: list[Any] = []
        app = agent_loop(g)
        seen.append((await run(g, app, query))["state"] if g is OURS else await app.ainvoke(query))
        seen.append(await updates(g, app, query))
        stopping = agent_loop(g, cp, interrupt_after=["agent"])
        seen.append(await updates(g, stopping, query, durability="exit"))
        seen.append(await state_of(g, stopping))
        changed = {"agent_outcome": action("query", "tool:search_api:a different query")}
        if g is OURS:
            await stopping.update_state("1", changed)
        else:
            await stopping.aupdate_state(cfg(), changed)
        seen.append(await state_of(g, stopping))
        seen.append(await updates(g, stopping, None))
        answer = {"agent_outcome": finish("a really nice answer")}
        if g is OURS:
            await stopping.update_state("1", answer)
        else:
            await stopping.aupdate_state(cfg(), answer)
        seen.append(await state_of(g, stopping))
        outcomes["ours" if g is OURS else "theirs"] = seen
    assert outcomes["ours"] == outcomes["theirs"]
    assert (await agent_loop(THEIRS, in_place=True).ainvoke(query))["agent_outcome"] == finish(
        "answer"
    )
    failed = await agent_loop(OURS, in_place=True).run(query)
    assert failed.status == "failed" and isinstance(failed.error, TypeError)
    assert "a node's state is read-only" in str(failed.error)
    steps = [[action("query"), "result for query"], [action("another"), "result for another"]]
    ours = outcomes["ours"]
    assert ours[0] == {**query, "intermediate_steps": steps, "agent_outcome": finish("answer")}
    assert ours[2] == [{"agent": {"agent_outcome": action("query")}}, {"__interrupt__": ()}]
    assert ours[3] == (
        {"agent_outcome": action("query"), "intermediate_steps": []},
        ("tools",),
        "loop",
        1,
    )
    assert ours[4][1:] == (("tools",), "update", 2)
    different = [action("query", "tool:search_api:a different query"), "result for query"]
    assert ours[5] == [
        {"tools": {"intermediate_steps": [different]}},
        {"agent": {"agent_outcome": action("another")}},
        {"__interrupt__": ()},
    ]
    assert ours[6] == (
        {"agent_outcome": finish("a really nice answer"), "intermediate_steps": [different]},
        (),
        "update",
        5,
    )


# -- two persistent sub-graphs asking at once, answered one at a time, run after run ----------


def two_asking_subs(g: Any, cp: Any, called: list[str]) -> Any:
    def sub(name: str) -> Any:
        def ask(state: Value) -> dict[str, Any]:
            called.append(name)
            return {"value": [f"{name}:{g.interrupt(f'{name}?')}"]}

        graph = g.StateGraph(Value).add_node("ask", ask).add_edge(g.START, "ask")
        return graph.compile(checkpointer=True)

    graph = g.StateGraph(Value).add_node("left", sub("left")).add_node("right", sub("right"))
    graph.add_node("join", lambda s: {"value": ["join"]})
    graph.add_edge(g.START, "left").add_edge(g.START, "right").add_edge(["left", "right"], "join")
    return graph.compile(checkpointer=cp)


async def test_two_persistent_sub_graphs_asking_at_once_answered_one_at_a_time(
    checkpointer: Checkpointer,
) -> None:
    # as test_time_travel.py's persistent sub-graphs, two of them side by side, over two runs
    # of the thread: each answer by its interrupt's id. Only the answered one runs again, where LangGraph runs every task with a
    # question (docs/graph.md, "Sub-graphs"), the other asking again
    outcomes: dict[str, list[Any]] = {}
    calls: dict[str, list[list[str]]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        called: list[str] = []
        graph = two_asking_subs(g, cp, called)
        seen: list[Any] = []
        calls[g is OURS] = []
        for rnd in range(2):
            given: Any = {"value": []}
            for name in ("left", "right", None):
                if g is OURS:
                    result = await graph.run(given, thread_id="1")
                    state, asked = result.state, list(result.interrupts)
                else:
                    out = await graph.ainvoke(given, cfg())
                    state, asked = values(out), out.get("__interrupt__", [])
                seen.append((state, sorted(i.value for i in asked)))
                calls[g is OURS].append(sorted(called))
                called.clear()
                if name is not None:
                    [ask] = [i for i in asked if i.value == f"{name}?"]
                    given = g.Command(resume={ask.id: f"{name[0].upper()}{rnd}"})
        outcomes["ours" if g is OURS else "theirs"] = seen
    ours, theirs = outcomes["ours"], outcomes["theirs"]
    first_run = ["left:L0", "right:R0", "join"]
    assert (
        ours[:4]
        == theirs[:4]
        == [
            ({"value": []}, ["left?", "right?"]),
            ({"value": ["left:L0"]}, ["right?"]),
            ({"value": first_run}, []),
            ({"value": first_run}, ["left?", "right?"]),
        ]
    )
    # the second run's calls go on from what each kept, and hand back what they changed
    # (docs/graph.md, "Sub-graphs"), where LangGraph's parent takes in all each kept again
    assert ours[4:] == [
        ({"value": [*first_run, "left:L1"]}, ["right?"]),
        ({"value": [*first_run, "left:L1", "right:R1", "join"]}, []),
    ]
    assert theirs[4] == (
        {"value": [*first_run, "left:L0", "left:L0", "right:R0", "join", "left:L1"]},
        ["right?"],
    )
    both, left, right = ["left", "right"], ["left"], ["right"]
    assert calls[True] == [both, left, right] * 2
    assert calls[False] == [both, both, right] * 2


def kept_sub(g: Any, cp: Any, asks: bool) -> Any:
    def work(state: Value) -> dict[str, Any]:
        return {"value": [f"ask:{g.interrupt('q')}" if asks else "p"]}

    sub = g.StateGraph(Value).add_node("work", work).add_edge(g.START, "work")
    graph = g.StateGraph(Value).add_node("sub", sub.compile(checkpointer=True))
    return graph.add_edge(g.START, "sub").compile(checkpointer=cp)


@pytest.mark.parametrize("durability", ["sync", "exit"])
@pytest.mark.parametrize("asks", [False, True])
async def test_a_persistent_sub_graph_resumed_in_a_later_call_hands_back_that_calls_change(
    checkpointer: Checkpointer, asks: bool, durability: str
) -> None:
    # found porting the test above: a persistent sub-graph's output is what the call changed
    # relative to its state after its input (docs/graph.md, "Persistent and unsaved
    # sub-graphs"), also when the call paused on a question and was resumed. Its second call,
    # resumed, measured the change from its FIRST call's start, handing back most of what it
    # kept again (``["in0", "ask:a0", "in1", "ask:a0", "in0", "ask:a0", "in1", "ask:a1"]``)
    graph = kept_sub(OURS, checkpointer, asks)
    seen = []
    for rnd in range(2):
        result = await graph.run({"value": [f"in{rnd}"]}, thread_id="1", durability=durability)
        if asks:
            assert [i.value for i in result.interrupts] == ["q"]
            answer = OURS.Command(resume=f"a{rnd}")
            result = await graph.run(answer, thread_id="1", durability=durability)
        seen.append(result.state["value"])
    said = ["ask:a0", "ask:a1"] if asks else ["p", "p"]
    assert seen == [["in0", said[0]], ["in0", said[0], "in1", said[1]]]
    theirs = kept_sub(THEIRS, lg_memory.InMemorySaver(), asks)
    for rnd in range(2):
        await theirs.ainvoke({"value": [f"in{rnd}"]}, cfg())
        if asks:
            await theirs.ainvoke(THEIRS.Command(resume=f"a{rnd}"), cfg())
    # LangGraph's parent takes the sub-graph's whole output in each time (docs/graph.md)
    out = (await theirs.aget_state(cfg())).values["value"]
    assert len(out) > 4 and out[-1] == said[1]


# -- a resume that also updates, while a sub-graph waits ----------------------------------------


class ABC(TypedDict, total=False):
    a: str
    b: str
    c: str


def sub_reads_c(g: Any, cp: Any, persistent: bool | None) -> Any:
    def ask(state: ABC) -> dict[str, Any]:
        return {"a": f"{state.get('a')}|{g.interrupt('q')}"}

    def after(state: ABC) -> dict[str, Any]:
        return {"b": f"after:{state.get('a')}:{state.get('c')}"}

    sub = g.StateGraph(ABC).add_node("ask", ask).add_node("after", after)
    sub = sub.add_edge(g.START, "ask").add_edge("ask", "after").compile(checkpointer=persistent)
    graph = g.StateGraph(ABC).add_node("sub", sub).add_edge(g.START, "sub")
    return graph.compile(checkpointer=cp)


@pytest.mark.parametrize("persistent", [None, True])
async def test_a_resume_that_updates_the_parent_while_its_sub_graph_waits(
    checkpointer: Checkpointer, persistent: bool | None
) -> None:
    # Command(resume=..., update=...) to a parent whose sub-graph asked: the update is the
    # parent's, the sub-graph goes on from the state it started from (both libraries), and
    # its output is what it changed: a key it did not write keeps the update, where
    # LangGraph's whole output writes back the value it started from (docs/graph.md,
    # "Sub-graphs"); a key it wrote is its own in both
    outcomes: dict[str, list[Any]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        graph = sub_reads_c(g, cp, persistent)
        seen = []
        for rnd in range(2):
            seen.append(await run(g, graph, {"a": f"in{rnd}"}))
            seen.append(await run(g, graph, g.Command(resume=f"r{rnd}", update={"c": f"u{rnd}"})))
        seen.append(await run(g, graph, {"a": "in2"}))
        seen.append(await run(g, graph, g.Command(resume="r2", update={"a": "overwritten"})))
        outcomes["ours" if g is OURS else "theirs"] = [s["state"] for s in seen]
    ours, theirs = outcomes["ours"], outcomes["theirs"]
    first = [
        {"a": "in0"},
        {"a": "in0|r0", "b": "after:in0|r0:None", "c": "u0"},
        {"a": "in1", "b": "after:in0|r0:None", "c": "u0"},
    ]
    assert ours[:3] == theirs[:3] == first
    assert ours[3:] == [
        {"a": "in1|r1", "b": "after:in1|r1:u0", "c": "u1"},
        {"a": "in2", "b": "after:in1|r1:u0", "c": "u1"},
        {"a": "in2|r2", "b": "after:in2|r2:u1", "c": "u1"},
    ]
    assert theirs[3:] == [
        {"a": "in1|r1", "b": "after:in1|r1:u0", "c": "u0"},
        {"a": "in2", "b": "after:in1|r1:u0", "c": "u0"},
        {"a": "in2|r2", "b": "after:in2|r2:u0", "c": "u0"},
    ]


# -- a persistent sub-graph's second call, streamed and inspected while it waits ----------------


def pre_then_ask(g: Any, cp: Any) -> Any:
    def ask(state: Value) -> dict[str, Any]:
        return {"value": [f"ask:{g.interrupt('q')}"]}

    sub = g.StateGraph(Value).add_node("pre", lambda s: {"value": ["pre"]}).add_node("ask", ask)
    sub = sub.add_edge(g.START, "pre").add_edge("pre", "ask").compile(checkpointer=True)
    graph = g.StateGraph(Value).add_node("sub", sub).add_edge(g.START, "sub")
    return graph.compile(checkpointer=cp)


def streamed(ns: Any, item: dict[str, Any]) -> tuple[Any, ...]:
    """An ``updates`` / ``values`` item without its interrupts' ids."""
    if "__interrupt__" in item:
        return shape(ns), "__interrupt__", [i.value for i in item["__interrupt__"]]
    return shape(ns), item


async def test_a_persistent_sub_graphs_second_call_streamed_and_inspected_while_it_waits(
    checkpointer: Checkpointer,
) -> None:
    # as test_pregel.py's subgraphs=True streams, over two runs of a thread whose persistent
    # sub-graph asks: the same items at the same places; the sub-graph's state while it
    # waits holds what it kept with its new input applied; the top's last values hold what
    # each call changed (docs/graph.md, "Sub-graphs": LangGraph's take its whole output in)
    outcomes: dict[str, list[Any]] = {}
    for g, cp in ((THEIRS, lg_memory.InMemorySaver()), (OURS, checkpointer)):
        graph = pre_then_ask(g, cp)
        seen: list[Any] = []
        for rnd in range(2):
            for given, mode in (({"value": [f"in{rnd}"]}, "updates"), (None, "values")):
                if given is None:
                    given = g.Command(resume=f"r{rnd}")
                if g is OURS:
                    items = graph.stream(given, thread_id="1", mode=mode, subgraphs=True)
                else:
                    items = graph.astream(given, cfg(), stream_mode=mode, subgraphs=True)
                seen.append([streamed(ns, item) async for ns, item in items])
                if mode == "updates":
                    seen.append(await nested_states(g, graph))
        outcomes["ours" if g is OURS else "theirs"] = seen
    ours, theirs = outcomes["ours"], outcomes["theirs"]
    asked = [
        (("sub",), {"pre": {"value": ["pre"]}}),
        (("sub",), "__interrupt__", ["q"]),
        ((), "__interrupt__", ["q"]),
    ]
    assert ours[0] == theirs[0] == ours[3] == theirs[3] == asked
    assert ours[1] == theirs[1] == [(("ask",), {"value": ["in0", "pre"]})]
    first_call = ["in0", "pre", "ask:r0"]
    assert ours[2] == [
        ((), {"value": ["in0"]}),
        (("sub",), {"value": ["in0", "pre"]}),
        (("sub",), {"value": first_call}),
        ((), {"value": first_call}),
    ]
    assert theirs[2][:3] == ours[2][:3]
    assert ours[4] == [(("ask",), {"value": [*first_call, *first_call, "in1", "pre"]})]
    assert ours[5] == [
        ((), {"value": [*first_call, "in1"]}),
        (("sub",), {"value": [*first_call, *first_call, "in1", "pre"]}),
        (("sub",), {"value": [*first_call, *first_call, "in1", "pre", "ask:r1"]}),
        ((), {"value": [*first_call, "in1", "pre", "ask:r1"]}),
    ]
    assert [shape_ for shape_, _ in theirs[5]] == [shape_ for shape_, _ in ours[5]]


class StoreFaultyPut(MemoryCheckpointer):
    async def put(self, record: Any) -> None:
        raise StoreError("the store is down")


@pytest.mark.parametrize("faulty", [FaultyPut, StoreFaultyPut, FaultyPutWrites])
async def test_a_checkpointer_failing_in_an_exit_runs_flush_raises(faulty: type) -> None:
    # test_pregel.py::test_checkpoint_errors under durability="exit": LangGraph raises the
    # save's error as the run ends; so does ours, a StoreError too (a "sync" run ends
    # "failed" with it: docs/graph.md, "Durability")
    if faulty is FaultyPutWrites:
        # LangGraph's "exit" run keeps its last checkpoint only, and no step's writes; ours
        # saves what a "sync" run would have (docs/graph.md, "Durability"), the writes too
        theirs = one_value_graph(THEIRS, TheirsFaultyPutWrites(), True)
        assert await theirs.ainvoke("", cfg(), durability="exit") == ""
    else:
        with pytest.raises(ValueError, match="Faulty put"):
            theirs = one_value_graph(THEIRS, TheirsFaultyPut(), True)
            await theirs.ainvoke("", cfg(), durability="exit")
    cp = faulty()
    ours = one_value_graph(OURS, cp, True)
    error = StoreError if faulty is StoreFaultyPut else ValueError
    with pytest.raises(error):
        await ours.run("", thread_id="1", durability="exit")
    with pytest.raises(error):
        [i async for i in ours.stream("", thread_id="2", durability="exit")]
    saved = await MemoryCheckpointer.list(cp, "1")
    # the memory checkpointer has no transactions: the flush saved one at a time, up to the
    # writes that failed (docs/graph.md, "Durability")
    assert [r.step for r in saved] == ([0, -1] if faulty is FaultyPutWrites else [])
    if faulty is StoreFaultyPut:  # the same failure in a "sync" run: a failed result
        result = await ours.run("", thread_id="1")
        assert result.status == "failed" and isinstance(result.error, StoreError)


@pytest.mark.parametrize("retried", [True, False], ids=["retried", "run_none"])
async def test_a_persistent_sub_graph_going_on_after_a_failure_hands_back_that_calls_change(
    checkpointer: Checkpointer, retried: bool
) -> None:
    # the fix above, where a call goes on from its own checkpoint after a failure: a retry of
    # the node (which goes on with the sub-graph: docs/graph.md, "What it does not do") or
    # run(None) after the run failed. Its second call handed back ["in0", "pre", "f",
    # "in1", "pre", "f"] again, measured from the first call's start
    fails = [0]

    def flaky(state: Value) -> dict[str, Any]:
        if fails[0]:
            fails[0] -= 1
            raise RuntimeError("boom")
        return {"value": ["f"]}

    sub = OURS.StateGraph(Value).add_node("pre", lambda s: {"value": ["pre"]})
    sub = sub.add_node("flaky", flaky).add_edge(OURS.START, "pre").add_edge("pre", "flaky")
    retry = ours_graph.RetryPolicy(max_attempts=2, retry_on=RuntimeError) if retried else None
    graph = OURS.StateGraph(Value).add_node("sub", sub.compile(checkpointer=True), retry=retry)
    graph = graph.add_edge(OURS.START, "sub").compile(checkpointer=checkpointer)
    assert (await graph.run({"value": ["in0"]}, thread_id="1")).state == {
        "value": ["in0", "pre", "f"]
    }
    fails[0] = 1
    result = await graph.run({"value": ["in1"]}, thread_id="1")
    if not retried:
        assert result.status == "failed" and str(result.error) == "boom"
        result = await graph.run(None, thread_id="1")
    assert result.status == "completed"
    assert result.state == {"value": ["in0", "pre", "f", "in1", "pre", "f"]}
