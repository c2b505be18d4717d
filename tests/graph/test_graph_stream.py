"""``graph.stream(...)`` and ``handle.stream(...)``: one test per mode, several modes at once,
sub-graphs, interrupts and steering in the stream, and the stream agreeing with the state.

Every test that takes ``checkpointer`` runs on the memory and the SQLite backends.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypedDict

import pytest
from graphkit import LogState, chain, logger

from tinyagents import Agent, Runtime
from tinyagents.errors import ConfigurationError, GraphValidationError
from tinyagents.graph import END, START, Command, NodeContext, Send, StateGraph, interrupt
from tinyagents.graph.stream import INTERRUPT_KEY
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.runs import RunHandle, RunInfo, RunStatus
from tinyagents.store.checkpoint import Checkpointer
from tinyagents.testkit import ScriptedModel


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in stream]


def asker(state: Any) -> dict[str, Any]:
    return {"log": [f"answer:{interrupt('ok?')}"]}


def with_question(cp: Checkpointer | None) -> Any:
    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("ask", asker)
    graph.add_node("b", logger("b")).add_edge(START, "a").add_edge("a", "ask")
    return graph.add_edge("ask", "b").add_edge("b", END).compile(checkpointer=cp)


# -- one test per mode ---------------------------------------------------------------------


async def test_values_yields_the_state_before_the_first_step_and_after_each(
    checkpointer: Checkpointer,
) -> None:
    graph = chain("a", "b", "c").compile(checkpointer=checkpointer)
    items = await collect(graph.stream({"log": ["in"]}, thread_id="t"))
    assert items == [
        {"log": ["in"]},
        {"log": ["in", "a"]},
        {"log": ["in", "a", "b"]},
        {"log": ["in", "a", "b", "c"]},
    ]
    # each item is the state of its moment, not a view that later steps changed
    assert (await graph.get_state("t")).values == items[-1]


async def test_updates_yields_each_tasks_writes_in_task_order(checkpointer: Checkpointer) -> None:
    graph = StateGraph(LogState).add_node("left", logger("left")).add_node("right", logger("r"))
    graph.add_node("join", lambda s: {"x": len(s["log"])})
    graph.add_edge(START, "left").add_edge(START, "right")
    graph.add_edge(["left", "right"], "join").add_edge("join", END)
    items = await collect(
        graph.compile(checkpointer=checkpointer).stream({}, thread_id="t", mode="updates")
    )
    assert items == [{"left": {"log": ["left"]}}, {"right": {"log": ["r"]}}, {"join": {"x": 2}}]


async def test_updates_show_the_interrupt_and_the_resumed_run_goes_on(
    checkpointer: Checkpointer,
) -> None:
    graph = with_question(checkpointer)
    first = await collect(graph.stream({}, thread_id="t", mode="updates"))
    assert first[0] == {"a": {"log": ["a"]}}
    (pending,) = first[1][INTERRUPT_KEY]
    assert len(first) == 2 and pending.value == "ok?" and pending.node == "ask"
    second = await collect(
        graph.stream(Command(resume={pending.id: "yes"}), thread_id="t", mode="updates")
    )
    assert second == [{"ask": {"log": ["answer:yes"]}}, {"b": {"log": ["b"]}}]


async def test_tasks_yields_each_start_and_its_result_or_error(checkpointer: Checkpointer) -> None:
    def boom(state: Any) -> dict[str, Any]:
        raise ValueError("no")

    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("boom", boom)
    graph.add_edge(START, "a").add_edge("a", "boom").add_edge("boom", END)
    stream = graph.compile(checkpointer=checkpointer).stream({}, thread_id="t", mode="tasks")
    items: list[Any] = []
    with pytest.raises(ValueError, match="no"):  # after the items before the failure
        async for item in stream:
            items.append(item)
    assert [(i["name"], "input" in i) for i in items] == [
        ("a", True),
        ("a", False),
        ("boom", True),
        ("boom", False),
    ]
    assert items[0]["input"] == {"log": []} and items[1]["result"] == {"log": ["a"]}
    assert items[1]["error"] is None and items[0]["id"] == items[1]["id"]
    assert isinstance(items[3]["error"], ValueError) and items[3]["result"] == {}


async def test_tasks_shows_a_task_that_paused_on_its_interrupt(checkpointer: Checkpointer) -> None:
    items = await collect(with_question(checkpointer).stream({}, thread_id="t", mode="tasks"))
    finished = [i for i in items if "result" in i]
    assert [i["name"] for i in finished] == ["a", "ask"]
    # as LangGraph's: no writes is {}, and an interrupt is a dict of its value and id
    assert finished[1]["result"] == {} and finished[1]["error"] is None
    (question,) = finished[1]["interrupts"]
    (pending,) = (await with_question(checkpointer).get_state("t")).interrupts
    assert question == {"value": "ok?", "id": pending.id}


async def test_tasks_ends_a_resumed_task_without_its_answered_questions(
    checkpointer: Checkpointer,
) -> None:
    # the task's end lists only the questions it still asks, as LangGraph's: after the
    # first answer the second question, after the last none (ours listed the answered ones)
    def two_questions(state: Any) -> dict[str, Any]:
        return {"log": [f"{interrupt('q1')}+{interrupt('q2')}"]}

    graph = StateGraph(LogState).add_node("a", two_questions).add_edge(START, "a")
    compiled = graph.add_edge("a", END).compile(checkpointer=checkpointer)

    def ends(items: list[Any]) -> list[Any]:
        return [
            (i["result"], [q["value"] for q in i["interrupts"]]) for i in items if "result" in i
        ]

    assert ends(await collect(compiled.stream({}, thread_id="t", mode="tasks"))) == [({}, ["q1"])]
    second = await collect(compiled.stream(Command(resume="1"), thread_id="t", mode="tasks"))
    assert ends(second) == [({}, ["q2"])]
    last = await collect(compiled.stream(Command(resume="2"), thread_id="t", mode="tasks"))
    assert ends(last) == [({"log": ["1+2"]}, [])]


async def test_tasks_shows_a_task_that_finished_before_a_sibling_failed_as_finished(
    checkpointer: Checkpointer,
) -> None:
    # w0 finishes (its result saved and kept) before w2 fails the step: its end has no
    # error, as get_state shows it (ours said CancelledError: the step's failure cancelled
    # it while its result was being saved)
    done = asyncio.Event()

    async def work(arg: int) -> dict[str, Any]:
        if arg == 0:
            done.set()  # and returns at once: w0 is saving its result when w2 fails
            return {"log": ["w0"]}
        await done.wait()
        raise ValueError("w2 broke")

    graph = StateGraph(LogState).add_node("w", work)
    graph.add_conditional_edges(START, lambda s: [Send("w", 0), Send("w", 2)])
    compiled = graph.add_edge("w", END).compile(checkpointer=checkpointer)
    items: list[Any] = []
    with pytest.raises(ValueError, match="w2 broke"):
        async for item in compiled.stream({}, thread_id="t", mode="tasks"):
            items.append(item)
    ends = {i["result"].get("log", ["w2"])[0]: i for i in items if "result" in i}
    assert ends["w0"]["error"] is None and ends["w0"]["result"] == {"log": ["w0"]}
    assert isinstance(ends["w2"]["error"], ValueError)
    snapshot = await compiled.get_state("t")
    assert [(t.result, t.error) for t in snapshot.tasks] == [
        ({"log": ["w0"]}, None),
        (None, "ValueError('w2 broke')"),
    ]


async def test_custom_yields_what_nodes_emit_through_their_context() -> None:
    def work(state: Any, ctx: NodeContext) -> dict[str, Any]:
        for part in ("searching", "reading"):
            ctx.emit({"node": ctx.node, "progress": part})
        return {"x": 1}

    graph = StateGraph(LogState).add_node("work", work).add_edge(START, "work")
    graph = graph.add_edge("work", END).compile()
    assert await collect(graph.stream({}, mode="custom")) == [
        {"node": "work", "progress": "searching"},
        {"node": "work", "progress": "reading"},
    ]
    # a run that is not streamed ignores emit()
    assert (await graph.run({})).state == {"x": 1, "log": []}


async def test_steering_and_interrupts_in_the_stream_of_a_started_run(
    rt: Runtime, checkpointer: Checkpointer
) -> None:
    handle = await rt.start_graph(with_question(checkpointer), {}, thread_id="t")
    seen: list[Any] = []
    async for mode, payload in handle.stream(["updates", "steering"]):
        seen.append((mode, payload))
        if mode == "updates" and INTERRUPT_KEY in payload:
            (pending,) = payload[INTERRUPT_KEY]
            receipt = await rt.submit(
                SteeringCommand(
                    target=SteeringTarget.graph_task(handle.run_id, pending.task_id),
                    actor=SteeringActor.test(),
                    kind=SteeringKind.APPROVE,
                )
            )
            assert receipt.status == "accepted"
    steering = [p.type for m, p in seen if m == "steering"]
    assert steering[0] == "steering.requested" and steering[-1] == "steering.applied"
    updates = [p for m, p in seen if m == "updates"]
    assert updates[0] == {"a": {"log": ["a"]}} and INTERRUPT_KEY in updates[1]
    answered = updates[2]["ask"]["log"][0]
    assert answered.startswith("answer:") and updates[3] == {"b": {"log": ["b"]}}
    # the answer lands after the command was applied, and the run ends there
    assert seen.index(("updates", updates[2])) > seen.index(
        next(i for i in seen if i[0] == "steering" and i[1].type == "steering.applied")
    )
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"][-1] == "b"


async def test_a_stream_under_a_runtime_is_a_registered_run(
    rt: Runtime, checkpointer: Checkpointer
) -> None:
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    items = await collect(graph.stream({}, thread_id="t", mode="updates", runtime=rt))
    assert items == [{"a": {"log": ["a"]}}, {"b": {"log": ["b"]}}]
    (info,) = [i for i in rt.runs.list() if i.kind == "graph" and i.parent_run_id is None]
    assert info.status is RunStatus.COMPLETED and info.thread_id == "t"


async def test_messages_yields_the_model_deltas_of_agent_nodes(rt: Runtime) -> None:
    writer = Agent("writer", model=ScriptedModel(["a short draft"], stream=True))
    graph = StateGraph(LogState).add_node("writer", writer).add_edge(START, "writer")
    graph = graph.add_edge("writer", END)

    class Prompt(TypedDict, total=False):
        input: str
        output: str

    graph = StateGraph(Prompt).add_node("writer", writer).add_edge(START, "writer")
    compiled = graph.add_edge("writer", END).compile()
    items = await collect(compiled.stream({"input": "go"}, mode="messages", runtime=rt))
    assert items, "no model deltas in the stream"
    assert all(item.type == "model.delta" for item in items)
    assert "".join(item.text for item in items) == "a short draft"


# -- several modes, sub-graphs -------------------------------------------------------------


async def test_several_modes_give_mode_payload_pairs_in_the_order_they_happen() -> None:
    graph = chain("a", "b").compile()
    items = await collect(graph.stream({}, mode=["values", "updates"]))
    # no values item for the input: it wrote nothing (as LangGraph's)
    assert items == [
        ("updates", {"a": {"log": ["a"]}}),
        ("values", {"log": ["a"]}),
        ("updates", {"b": {"log": ["b"]}}),
        ("values", {"log": ["a", "b"]}),
    ]


async def test_subgraphs_add_the_sub_graph_items_with_their_namespace(
    checkpointer: Checkpointer,
) -> None:
    inner = chain("i1", "i2").compile()
    graph = StateGraph(LogState).add_node("sub", inner).add_node("after", logger("after"))
    graph = graph.add_edge(START, "sub").add_edge("sub", "after").add_edge("after", END)
    compiled = graph.compile(checkpointer=checkpointer)
    plain = await collect(compiled.stream({}, thread_id="t", mode="updates"))
    assert plain == [{"sub": {"log": ["i1", "i2"]}}, {"after": {"log": ["after"]}}]

    items = await collect(compiled.stream({}, thread_id="u", mode="updates", subgraphs=True))
    inner_items = [(ns, p) for ns, p in items if ns]
    assert [p for _, p in inner_items] == [{"i1": {"log": ["i1"]}}, {"i2": {"log": ["i2"]}}]
    (ns,) = {ns for ns, _ in inner_items}
    assert len(ns) == 1 and ns[0].startswith("sub:t-")
    assert [p for ns, p in items if not ns] == plain  # the parent's items are unchanged
    # the sub-graph's items come before the parent's update of the sub-graph node
    assert items.index(((), plain[0])) == 2

    both = await collect(compiled.stream({}, thread_id="v", mode=["updates"], subgraphs=True))
    sub_ns, mode, payload = both[0]  # several modes: (namespace, mode, payload)
    assert sub_ns[0].startswith("sub:") and (mode, payload) == ("updates", {"i1": {"log": ["i1"]}})


async def test_an_interrupt_in_a_sub_graph_reaches_the_stream(checkpointer: Checkpointer) -> None:
    inner = StateGraph(LogState).add_node("ask", asker).add_edge(START, "ask")
    inner_graph = inner.add_edge("ask", END).compile()
    graph = StateGraph(LogState).add_node("sub", inner_graph).add_edge(START, "sub")
    compiled = graph.add_edge("sub", END).compile(checkpointer=checkpointer)
    items = await collect(compiled.stream({}, thread_id="t", mode="updates", subgraphs=True))
    assert [ns for ns, _ in items] == [items[0][0], ()]
    assert items[0][0][0].startswith("sub:") and INTERRUPT_KEY in items[0][1]
    (pending,) = items[1][1][INTERRUPT_KEY]
    resumed = await collect(
        compiled.stream(Command(resume={pending.id: "y"}), thread_id="t", mode="updates")
    )
    assert resumed == [{"sub": {"log": ["answer:y"]}}]


# -- the stream and the run agree ----------------------------------------------------------


class Fan(TypedDict, total=False):
    results: Annotated[list[int], operator.add]
    total: int


def tens(i: int) -> Any:
    def node(state: Any) -> dict[str, Any]:
        return {"results": [i * 10]}

    return node


def fan_graph(cp: Checkpointer) -> Any:
    graph = StateGraph(Fan).add_node("join", lambda s: {"total": sum(s["results"])})
    for i in range(3):
        graph.add_node(f"b{i}", tens(i))
        graph.add_edge(START, f"b{i}").add_edge(f"b{i}", "join")
    return graph.add_edge("join", END).compile(checkpointer=cp)


@pytest.mark.parametrize("mode", ["values", ["values", "tasks", "updates"]])
async def test_the_last_values_item_is_the_state_the_run_returns_and_saves(
    checkpointer: Checkpointer, mode: Any
) -> None:
    graph = fan_graph(checkpointer)
    items = await collect(graph.stream({"results": [1]}, thread_id="s", mode=mode))
    values = [p for m, p in items if m == "values"] if isinstance(mode, list) else items
    result = await graph.run({"results": [1]}, thread_id="r")
    assert values[-1] == result.state == (await graph.get_state("s")).values
    assert values[-1] == {"results": [1, 0, 10, 20], "total": 31}
    if isinstance(mode, list):  # the updates hold what the state got, as the tasks finished
        updates = [p for m, p in items if m == "updates"]
        got = sum((u[n].get("results", []) for u in updates for n in u), [1])
        assert sorted(got) == sorted([1, 0, 10, 20])  # finishing order, not the state's


async def test_a_bad_mode_is_refused_before_anything_runs(checkpointer: Checkpointer) -> None:
    graph = chain("a").compile(checkpointer=checkpointer)
    with pytest.raises(ConfigurationError, match="stream mode"):
        await collect(graph.stream({}, thread_id="t", mode=["values", "everything"]))
    assert await graph.history("t") == []


@pytest.mark.parametrize("mode", ["messages", "steering", ["values", "messages"]])
async def test_a_mode_that_reads_the_runtime_needs_one(
    checkpointer: Checkpointer, mode: str | list[str]
) -> None:
    """Without a runtime a graph run has no steering and no agent nodes: a stream of their
    events would end empty, as if nothing happened. It is refused before anything runs."""
    graph = chain("a").compile(checkpointer=checkpointer)
    with pytest.raises(ConfigurationError, match=r"reads the runtime's events.*runtime="):
        await collect(graph.stream({}, thread_id="t", mode=mode))
    assert await graph.history("t") == []


async def test_leaving_a_live_stream_early_stops_its_run(checkpointer: Checkpointer) -> None:
    graph = chain("a", "b", "c").compile(checkpointer=checkpointer)
    stream = graph.stream({}, thread_id="t", mode="tasks")
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    # the thread's lease is free again: another run can write it
    assert (await graph.run(None, thread_id="t")).status in {"completed", "interrupted"}


@pytest.mark.parametrize("mode", ["values", "updates", "tasks"])
async def test_leaving_a_stream_with_break_frees_its_thread(
    checkpointer: Checkpointer, mode: str
) -> None:
    """A reader that leaves the loop with ``break`` (no ``aclose``, as most readers do)
    leaves a generator that Python closes later, from the event loop: the next run of the
    thread must not be refused meanwhile (``ThreadBusy``)."""
    graph = chain("a", "b", "c").compile(checkpointer=checkpointer)
    async for _ in graph.stream({}, thread_id="t", mode=mode):
        break
    result = await graph.run(None, thread_id="t")
    assert result.status == "completed" and result.state["log"] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("managed", "mode"), [(False, "tasks"), (True, "values"), (True, "updates"), (True, "tasks")]
)
async def test_leaving_a_running_stream_with_break_stops_its_run_and_frees_its_thread(
    rt: Runtime, checkpointer: Checkpointer, managed: bool, mode: str
) -> None:
    """The run goes on in a task of its own (a live mode, or a run in a runtime): leaving
    the loop stops it, then frees the thread, though the node it runs would wait for ever."""
    entered = asyncio.Event()
    calls: list[int] = []

    async def hold(state: Any) -> dict[str, Any]:
        calls.append(1)
        entered.set()
        if len(calls) == 1:
            await asyncio.Event().wait()  # only a stop ends the first run
        return {"log": ["hold"]}

    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("hold", hold)
    graph.add_edge(START, "a").add_edge("a", "hold").add_edge("hold", END)
    compiled = graph.compile(checkpointer=checkpointer)
    runtime = rt if managed else None
    async for _ in compiled.stream({}, thread_id="t", mode=mode, runtime=runtime):
        await entered.wait()
        break
    result = await compiled.run(None, thread_id="t", runtime=runtime)
    assert result.status == "completed" and result.state["log"] == ["a", "hold"]
    if managed:
        runs = [i for i in rt.runs.list() if i.kind == "graph" and i.parent_run_id is None]
        assert sorted(i.status for i in runs) == [RunStatus.CANCELLED, RunStatus.COMPLETED]


async def test_a_run_that_does_not_stream_says_so(rt: Runtime) -> None:
    # A run registered without an execution layer that streams (agent and graph runs do).
    handle = await rt.register(RunHandle(RunInfo(run_id="bare", tenant_id="t"), submitter=rt))
    with pytest.raises(ConfigurationError, match="does not stream"):
        handle.stream()


# -- the public step -------------------------------------------------------------------------


async def test_supersteps_say_what_each_step_did(checkpointer: Checkpointer) -> None:
    graph = with_question(checkpointer)
    async with graph.iter({}, thread_id="t") as run:
        seen = [(s.kind, [t.node for t in s.tasks]) async for s in run.supersteps()]
    assert seen == [
        ("started", ["a"]),
        ("applied", ["a"]),
        ("started", ["ask"]),
        ("interrupted", ["ask"]),
    ]
    state = await graph.get_state("t")
    (pending,) = state.interrupts
    async with graph.iter(Command(resume={pending.id: "y"}), thread_id="t") as run:
        steps = [s async for s in run.supersteps()]
    assert [s.kind for s in steps] == ["started", "applied", "started", "applied", "completed"]
    final = steps[-1].result
    assert final is not None and final.state == (await graph.get_state("t")).values
    assert final.state["log"] == ["a", "answer:y", "b"]


async def test_next_runs_one_superstep_per_call(checkpointer: Checkpointer) -> None:
    graph = with_question(checkpointer)
    async with graph.iter({}, thread_id="t") as run:
        started = await run.next(started=True)
        assert started.kind == "started" and [t.node for t in started.tasks] == ["a"]
        assert run.head.values["log"] == []  # announced, not run yet
        applied = await run.next()
        assert applied.kind == "applied" and [t.node for t in applied.tasks] == ["a"]
        assert applied.result is None and run.head.values["log"] == ["a"]
        final = await run.next()
        assert final.kind == "interrupted" and [t.node for t in final.tasks] == ["ask"]
        assert final.result is not None and len(final.result.interrupts) == 1
        again = await run.next()  # no answer yet: the step pauses again, nothing new ran
        assert again.kind == "interrupted" and again.result is not None
        assert again.result.interrupts == final.result.interrupts


async def test_next_stops_after_a_breakpoint_node_once_it_is_applied(
    checkpointer: Checkpointer,
) -> None:
    graph = chain("a", "b").compile(checkpointer=checkpointer, interrupt_after=["a"])
    async with graph.iter({}, thread_id="t") as run:
        applied = await run.next()
        assert applied.kind == "applied" and run.head.values["log"] == ["a"]
        stop = await run.next()
        assert stop.kind == "interrupted" and stop.result is not None
        assert stop.result.interrupts == [] and stop.tasks == []
    result = await graph.run(None, thread_id="t")
    assert result.status == "completed" and result.state["log"] == ["a", "b"]


async def test_iter_takes_the_breakpoints_run_takes(checkpointer: Checkpointer) -> None:
    # "the run that run would make": interrupt_before= was a TypeError from iter
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    async with graph.iter({}, thread_id="t", interrupt_before=["b"]) as run:
        steps = [s async for s in run.supersteps()]
    assert [s.kind for s in steps] == ["started", "applied", "interrupted"]
    assert (await graph.get_state("t")).next == ("b",)
    with pytest.raises(GraphValidationError, match="nope"):  # a misspelt node: nothing runs
        async with graph.iter(None, thread_id="t", interrupt_after=["nope"]):
            pass
    async with graph.iter({}, thread_id="u", interrupt_after="a") as run:
        steps = [s async for s in run.supersteps()]
    assert steps[-1].kind == "interrupted" and run.head.values["log"] == ["a"]


async def test_a_failed_step_ends_the_steps_without_raising(checkpointer: Checkpointer) -> None:
    def boom(state: Any) -> dict[str, Any]:
        raise ValueError("no")

    graph = StateGraph(LogState).add_node("boom", boom).add_edge(START, "boom")
    compiled = graph.add_edge("boom", END).compile(checkpointer=checkpointer)
    async with compiled.iter({}, thread_id="t") as run:
        steps = [s async for s in run.supersteps()]
    assert [s.kind for s in steps] == ["started", "failed"]
    assert isinstance(steps[-1].error, ValueError) and steps[-1].result is not None
    assert steps[-1].result.status == "failed"
