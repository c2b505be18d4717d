"""The superstep loop: routing, concurrency, deterministic writes, retries, limits, errors."""

from __future__ import annotations

import asyncio
import operator
import sys
import threading
from typing import Annotated, Any, TypedDict

import pytest
from graphkit import LogState, chain, logger

from tinyagents import RunStatus, Runtime
from tinyagents.errors import (
    ArgumentError,
    ConfigurationError,
    GraphError,
    GraphRecursionError,
    InvalidRouteError,
    InvalidUpdateError,
)
from tinyagents.graph import (
    END,
    START,
    Command,
    NodeContext,
    RetryPolicy,
    Send,
    StateGraph,
    default_retry_on,
    get_stream_writer,
    interrupt,
    task,
)
from tinyagents.graph.reducers import Append
from tinyagents.protocol import SteeringCommand, SteeringKind
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer


async def test_chain_runs_nodes_in_order() -> None:
    result = await chain("a", "b", "c").compile().run({"x": 1})
    assert result.status == "completed"
    assert result.state == {"x": 1, "log": ["a", "b", "c"]}
    assert result.steps == 3


async def test_sync_and_async_nodes_and_the_context_argument() -> None:
    seen: list[NodeContext] = []

    async def first(state: Any) -> dict[str, Any]:
        return {"x": state["x"] + 1}

    def second(state: Any, ctx: NodeContext) -> dict[str, Any]:
        seen.append(ctx)
        return {"x": state["x"] * 10}

    graph = StateGraph(LogState).add_node("first", first).add_node("second", second)
    graph.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    result = await graph.compile().run({"x": 1})
    assert result.state["x"] == 20
    assert seen[0].node == "second" and seen[0].step == 2 and seen[0].attempt == 1
    assert seen[0].task_id.startswith("t-")


async def test_tasks_of_a_step_run_concurrently() -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    async def a(state: Any) -> dict[str, Any]:
        a_started.set()
        await b_started.wait()  # would deadlock if the step ran its tasks one by one
        return {"log": ["a"]}

    async def b(state: Any) -> dict[str, Any]:
        b_started.set()
        await a_started.wait()
        return {"log": ["b"]}

    graph = StateGraph(LogState).add_node("a", a).add_node("b", b)
    graph.add_edge(START, "a").add_edge(START, "b").add_edge("a", END).add_edge("b", END)
    async with asyncio.timeout(60):  # a guard against the deadlock, not a timing assertion
        result = await graph.compile().run({})
    assert result.state["log"] == ["a", "b"]


async def test_writes_apply_in_task_order_whatever_order_tasks_finish() -> None:
    gates = [asyncio.Event() for _ in range(5)]

    async def work(arg: dict[str, int]) -> dict[str, Any]:
        i = arg["i"]
        if i < 4:
            await gates[i + 1].wait()  # task i finishes only after task i+1: reverse order
        gates[i].set()
        return {"log": [f"w{i}"]}

    graph = StateGraph(LogState).add_node("fan", logger("fan")).add_node("work", work)
    graph.add_edge(START, "fan").add_edge("work", END)
    graph.add_conditional_edges("fan", lambda s: [Send("work", {"i": i}) for i in range(5)])
    result = await graph.compile().run({})
    assert result.state["log"] == ["fan", "w0", "w1", "w2", "w3", "w4"]


async def test_conditional_edges_with_mapping_and_loops() -> None:
    def inc(state: Any) -> dict[str, Any]:
        return {"x": state["x"] + 1}

    graph = StateGraph(LogState).add_node("inc", inc).add_edge(START, "inc")
    graph.add_conditional_edges("inc", lambda s: s["x"] < 5, {True: "inc", False: END})
    result = await graph.compile().run({"x": 0})
    assert result.state["x"] == 5 and result.steps == 5


async def test_async_router_returning_several_nodes() -> None:
    async def both(state: Any) -> list[str]:
        return ["b", "c"]

    graph = StateGraph(LogState)
    for name in "abcd":
        graph.add_node(name, logger(name))
    graph.add_edge(START, "a").add_conditional_edges("a", both, ["b", "c"])
    graph.add_edge("b", "d").add_edge("c", "d").add_edge("d", END)
    result = await graph.compile().run({})
    # d is triggered by both b and c in the same step and runs once
    assert result.state["log"] == ["a", "b", "c", "d"]


async def test_join_waits_for_all_its_sources() -> None:
    graph = StateGraph(LogState)
    for name in ("a", "b", "b2", "c"):
        graph.add_node(name, logger(name))
    graph.add_edge(START, "a").add_edge(START, "b").add_edge("b", "b2")
    graph.add_edge(["a", "b2"], "c").add_edge("c", END)
    result = await graph.compile().run({})
    assert result.state["log"] == ["a", "b", "b2", "c"]


async def test_command_from_a_node_updates_and_jumps() -> None:
    def decide(state: Any) -> Command:
        return Command(update={"x": 42}, goto="finish")

    graph = StateGraph(LogState).add_node("decide", decide, destinations=["finish"])
    graph.add_node("skipped", logger("skipped")).add_node("finish", logger("finish"))
    graph.add_edge(START, "decide").add_edge("finish", END).add_edge("skipped", END)
    graph.add_conditional_edges("decide", lambda s: [], ["skipped"])
    result = await graph.compile().run({})
    assert result.state == {"x": 42, "log": ["finish"]}


async def test_two_writes_to_an_overwrite_channel_fail_the_step_cleanly() -> None:
    def set_x(value: int) -> Any:
        return lambda state: {"x": value}

    graph = StateGraph(LogState).add_node("one", set_x(1)).add_node("two", set_x(2))
    graph.add_edge(START, "one").add_edge(START, "two").add_edge("one", END).add_edge("two", END)
    result = await graph.compile().run({"x": 0})
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "'x' received 2 writes" in str(result.error)
    # nothing of the failed step was applied (log starts at [], its reducer channel's start)
    assert result.state == {"x": 0, "log": []}
    with pytest.raises(InvalidUpdateError):
        result.raise_for_status()


class Counted(TypedDict, total=False):
    hits: Annotated[int, operator.add]


async def test_several_writers_are_fine_with_a_reducer() -> None:
    graph = StateGraph(Counted)
    for name in ("a", "b", "c"):
        graph.add_node(name, lambda s: {"hits": 1}).add_edge(START, name).add_edge(name, END)
    result = await graph.compile().run({"hits": 0})
    assert result.state == {"hits": 3}


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({"nope": 1}, "unknown state key"),
        ("text", "returned a str"),
        (Command(goto="ghost"), "unknown node 'ghost'"),
        (Command(resume=1), "cannot return Command\\(resume"),
        (Command(graph=Command.PARENT, goto="x"), "not running as a sub-graph"),
    ],
)
async def test_bad_node_output_fails_the_run_with_a_clear_error(output: Any, message: str) -> None:
    graph = StateGraph(LogState).add_node("n", lambda s: output).add_edge(START, "n")
    result = await graph.add_edge("n", END).compile().run({})
    assert result.status == "failed"
    assert isinstance(result.error, GraphError | InvalidUpdateError)
    assert result.error is not None
    with pytest.raises(type(result.error), match=message):
        result.raise_for_status()


async def test_retry_policy_retries_then_succeeds() -> None:
    calls = []

    def flaky(state: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("try again")
        return {"log": ["ok"]}

    policy = RetryPolicy(max_attempts=3, initial_interval=0)
    graph = StateGraph(LogState).add_node("flaky", flaky, retry=policy)
    result = await graph.add_edge(START, "flaky").add_edge("flaky", END).compile().run({})
    assert result.state["log"] == ["ok"] and len(calls) == 3


async def test_retry_gives_up_and_respects_retry_on() -> None:
    def broken(state: Any) -> dict[str, Any]:
        raise ValueError("bad")

    policy = RetryPolicy(max_attempts=5, initial_interval=0, retry_on=ConnectionError)
    graph = StateGraph(LogState).add_node("broken", broken, retry=policy)
    result = await graph.add_edge(START, "broken").add_edge("broken", END).compile().run({})
    assert result.status == "failed" and isinstance(result.error, ValueError)


async def test_timeout_cancels_a_hung_node_and_the_retry_runs_it_again() -> None:
    attempts: list[int] = []
    never = asyncio.Event()

    async def hangs_once(state: Any, ctx: NodeContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            await never.wait()
        return {"log": ["done"]}

    graph = StateGraph(LogState).add_node(
        "n", hangs_once, timeout=0.05, retry=RetryPolicy(max_attempts=2, initial_interval=0)
    )
    result = await graph.add_edge(START, "n").add_edge("n", END).compile().run({})
    assert result.state["log"] == ["done"] and attempts == [1, 2]

    graph = StateGraph(LogState).add_node("n", lambda s: never.wait(), timeout=0.05)
    result = await graph.add_edge(START, "n").add_edge("n", END).compile().run({})
    assert result.status == "failed" and isinstance(result.error, TimeoutError)


async def test_a_sync_node_with_a_timeout_is_bounded_by_it() -> None:
    # a sync node was called inline on the event loop: a blocking one held the loop, and
    # its timeout= could not fire (LangGraph runs sync nodes in a thread pool)
    release = threading.Event()

    def blocks(state: Any) -> dict[str, Any]:
        release.wait(30)
        return {"log": ["late"]}

    graph = StateGraph(LogState).add_node("n", blocks, timeout=0.05)
    try:
        result = await graph.add_edge(START, "n").add_edge("n", END).compile().run({})
    finally:
        release.set()  # the worker thread runs on to its end
    assert result.status == "failed" and isinstance(result.error, TimeoutError)


@pytest.mark.parametrize("writer", ["ctx", "get_stream_writer"])
async def test_what_a_timed_out_sync_nodes_thread_writes_later_is_dropped(writer: str) -> None:
    # Python cannot stop the thread of a sync node whose timeout= fired: it runs on. What
    # it streamed after that went into the run's stream beside the retry's, as if the
    # attempt that timed out were still running; its @task calls ran; its result is dropped.
    release, wrote = threading.Event(), threading.Event()
    called: list[str] = []

    @task
    def side(x: str) -> str:
        called.append(x)
        return x

    def node(state: Any, ctx: NodeContext) -> dict[str, Any]:
        emit = ctx.emit if writer == "ctx" else get_stream_writer()
        if ctx.attempt == 1:
            release.wait(30)
            emit("late")  # after its attempt timed out: dropped
            try:
                side("late").result()
            except GraphError as exc:
                called.append(f"refused: {exc}")
            wrote.set()
            return {"log": ["attempt 1"]}
        emit("before")
        release.set()  # the first attempt's thread goes on, and writes, while this one runs
        wrote.wait(30)
        emit("after")
        return {"log": ["attempt 2"]}

    graph = StateGraph(LogState).add_node(
        "n", node, timeout=0.05, retry=RetryPolicy(max_attempts=2, initial_interval=0)
    )
    compiled = graph.add_edge(START, "n").add_edge("n", END).compile()
    try:
        items = [item async for item in compiled.stream({}, mode=["custom", "updates"])]
    finally:
        release.set()
    assert items == [
        ("custom", "before"),
        ("custom", "after"),
        ("updates", {"n": {"log": ["attempt 2"]}}),
    ]
    (refusal,) = called
    assert refusal.startswith("refused: task 'side' was called after its node's attempt")


async def test_a_timed_out_sync_nodes_thread_cannot_steer_later(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the thread of a supervisor node whose timeout= fired runs on: its ctx.grant and
    # ctx.steer acted on the runtime after its attempt was over
    release, done = threading.Event(), threading.Event()
    late: list[str] = []
    live: list[str] = []
    submitted: list[SteeringCommand] = []
    loop = asyncio.get_running_loop()
    submit = rt.submit

    async def spy(cmd: SteeringCommand) -> Any:
        submitted.append(cmd)
        return await submit(cmd)

    monkeypatch.setattr(rt, "submit", spy)

    def steer(ctx: NodeContext, out: list[str]) -> None:
        for what, call in [
            ("grant", lambda: ctx.grant("r-a", "r-b")),
            (
                "steer",
                lambda: asyncio.run_coroutine_threadsafe(
                    ctx.steer(SteeringKind.APPROVE, node="w"), loop
                ).result(30),
            ),
        ]:
            try:
                call()
            except GraphError as exc:
                out.append(f"{what}: {exc}")
            else:
                out.append(f"{what}: done")

    def stuck(state: Any, ctx: NodeContext) -> dict[str, Any]:
        release.wait(30)
        steer(ctx, late)  # after its attempt timed out: refused
        done.set()
        return {"log": ["stuck"]}

    def lead(state: Any, ctx: NodeContext) -> dict[str, Any]:
        steer(ctx, live)  # on its thread too, its attempt still running: as before
        return {"log": ["lead"]}

    def supervising(node: Any, timeout: float) -> Any:
        graph = StateGraph(LogState).add_node("w", logger("w"))
        graph.add_node("lead", node, supervises=["w"], timeout=timeout)
        graph.add_edge(START, "lead").add_edge("lead", "w").add_edge("w", END)
        return graph.compile()

    try:
        timed_out = await supervising(stuck, 0.05).run({}, runtime=rt)
        assert timed_out.status == "failed" and isinstance(timed_out.error, TimeoutError)
    finally:
        release.set()
    assert await asyncio.to_thread(done.wait, 30)
    assert [line.split(":")[0] for line in late] == ["grant", "steer"]
    for line in late:
        assert "node 'lead' cannot steer: its attempt 1 timed out" in line, line
    assert submitted == []

    result = await supervising(lead, 30).run({}, runtime=rt)
    assert result.status == "completed", result.error
    assert live[0].startswith("grant: run r-a is not part of graph run")
    assert live[1] == "steer: done"
    [cmd] = submitted
    assert cmd.actor.node == "lead"  # type: ignore[union-attr]


async def test_a_runtime_closes_while_a_sync_nodes_thread_still_runs() -> None:
    # the run ends (its timeout, or the runtime's close cancelling it) without waiting for
    # the thread, and the runtime's close does not wait for it either: the thread is left
    # to finish on its own, and what it writes then is dropped
    release, entered = threading.Event(), threading.Event()
    finished: list[str] = []

    def blocks(state: Any, ctx: NodeContext) -> dict[str, Any]:
        if ctx.node == "held":
            entered.set()
        release.wait(60)
        ctx.emit("late")
        finished.append(ctx.node)
        return {"log": [ctx.node]}

    timed = StateGraph(LogState).add_node("timed", blocks, timeout=0.05)
    timed_graph = timed.add_edge(START, "timed").add_edge("timed", END).compile()
    held = StateGraph(LogState).add_node("held", blocks, timeout=60)
    held_graph = held.add_edge(START, "held").add_edge("held", END).compile()
    try:
        async with Runtime() as rt:
            first = await rt.start_graph(timed_graph, {}, thread_id="t1")
            assert (await first.result()).status is RunStatus.FAILED
            second = await rt.start_graph(held_graph, {}, thread_id="t2")
            assert await asyncio.to_thread(entered.wait, 30)
        assert second.done and (await second.result()).status is RunStatus.CANCELLED
        assert finished == []  # both threads still blocked: nothing waited for them
    finally:
        release.set()
    for thread in [t for t in threading.enumerate() if t.name in ("node timed", "node held")]:
        thread.join(30)
    await asyncio.sleep(0)
    assert sorted(finished) == ["held", "timed"]


@pytest.mark.parametrize("node_timeout", [None, 30])
@pytest.mark.parametrize("with_ctx", [False, True])
async def test_a_sync_node_whose_iterator_runs_out_fails_at_once(
    node_timeout: float | None, with_ctx: bool
) -> None:
    # With a timeout (a worker thread), StopIteration could not be handed from the thread
    # to the awaiting future: the node hung until its timeout and failed with TimeoutError.
    # Inline, Python made it the coroutine's RuntimeError. Both now fail at once, alike.
    def first_overdue(state: Any) -> dict[str, Any]:
        return {"log": [next(x for x in state["log"] if x.endswith("!"))]}

    def node(state: Any, *ctx: Any) -> dict[str, Any]:
        return first_overdue(state)

    fn = (lambda s, ctx: node(s, ctx)) if with_ctx else first_overdue
    graph = StateGraph(LogState).add_node("n", fn, timeout=node_timeout)
    result = await graph.add_edge(START, "n").add_edge("n", END).compile().run({"log": ["a"]})
    assert result.status == "failed" and isinstance(result.error, RuntimeError)
    assert "StopIteration" in str(result.error)
    assert isinstance(result.error.__cause__, StopIteration)


def _closes_sync(state: Any) -> dict[str, Any]:
    raise GeneratorExit("feed closed")


async def _closes_async(state: Any) -> dict[str, Any]:
    raise GeneratorExit("feed closed")


@pytest.mark.parametrize(
    ("fn", "node_timeout", "saved"),
    [
        (_closes_sync, None, False),  # inline, on the step's fast path
        (_closes_sync, None, True),
        (_closes_sync, 30, False),  # on a thread: its future threw it into the task
        (_closes_async, None, False),
        (_closes_async, None, True),
    ],
)
async def test_a_node_raising_generator_exit_fails_the_run(
    fn: Any, node_timeout: float | None, saved: bool, rt: Runtime
) -> None:
    # GeneratorExit is no Exception: it went past the handlers that make a node's error the
    # run's, out of run() (a thread's, thrown into the task, closed its frames at once);
    # under a runtime the run's task ended with it and the run stayed 'running' for ever.
    # As LangGraph's, the node failed (ainvoke raises its error).
    graph = StateGraph(LogState).add_node("n", fn, timeout=node_timeout)
    compiled = (
        graph.add_edge(START, "n")
        .add_edge("n", END)
        .compile(checkpointer=MemoryCheckpointer() if saved else None)
    )
    result = await compiled.run({"log": ["a"]}, thread_id="t" if saved else None)
    assert result.status == "failed" and isinstance(result.error, GeneratorExit)
    assert str(result.error) == "feed closed"
    if saved:
        state = await compiled.get_state("t")
        assert [t.error for t in state.tasks] == ["GeneratorExit('feed closed')"]

    handle = await compiled.start({"log": ["a"]}, runtime=rt, thread_id="t2")
    ended = await handle.result()
    assert (ended.status, ended.error) == (RunStatus.FAILED, "GeneratorExit: feed closed")


def _exits_sync(state: Any) -> dict[str, Any]:
    sys.exit(3)


async def _exits_async(state: Any) -> dict[str, Any]:
    sys.exit(3)


@pytest.mark.parametrize(
    ("fn", "node_timeout", "saved"),
    [
        (_exits_sync, None, False),  # inline, on the step's fast path
        (_exits_sync, None, True),
        (_exits_sync, 30, False),  # on a thread: its future hands it back
        (_exits_async, None, False),
        (_exits_async, 30, True),
    ],
)
async def test_a_node_calling_sys_exit_fails_its_run_not_the_process(
    fn: Any, node_timeout: float | None, saved: bool, rt: Runtime
) -> None:
    # SystemExit went out of run() and, in a runtime's task, stopped the event loop under
    # every run of the runtime ("no running event loop" from a thread's). As a tool's or a
    # model call's in the harness, a node's attempt to exit the process fails its run.
    graph = StateGraph(LogState).add_node("n", fn, timeout=node_timeout)
    compiled = (
        graph.add_edge(START, "n")
        .add_edge("n", END)
        .compile(checkpointer=MemoryCheckpointer() if saved else None)
    )
    result = await compiled.run({"log": ["a"]}, thread_id="t" if saved else None)
    assert result.status == "failed" and isinstance(result.error, RuntimeError)
    assert str(result.error) == "node 'n' tried to exit the process (SystemExit: 3)"
    assert isinstance(result.error.__cause__, SystemExit)
    if saved:
        state = await compiled.get_state("t")
        assert [t.error for t in state.tasks] == [repr(result.error)]

    other = await compiled.start({"log": ["a"]}, runtime=rt, thread_id="t2")
    ended = await other.result()
    assert ended.status is RunStatus.FAILED
    assert ended.error == "RuntimeError: node 'n' tried to exit the process (SystemExit: 3)"
    # the runtime goes on: another run of it still runs to its end
    again = (
        await StateGraph(LogState)
        .add_node("m", logger("m"))
        .add_edge(START, "m")
        .compile()
        .start({}, runtime=rt)
    )
    assert (await again.result()).status is RunStatus.COMPLETED


async def test_a_threaded_sync_node_emits_to_the_stream_and_reads_its_context() -> None:
    def talks(state: Any, ctx: NodeContext) -> dict[str, Any]:
        ctx.emit(f"working in {ctx.node}")
        return {"log": [f"attempt {ctx.attempt}"]}

    graph = StateGraph(LogState).add_node("n", talks, timeout=60)
    compiled = graph.add_edge(START, "n").add_edge("n", END).compile()
    items = [item async for item in compiled.stream({}, mode=["custom", "values"])]
    assert ("custom", "working in n") in items
    assert items[-1] == ("values", {"log": ["attempt 1"]})


async def test_step_limit_stops_an_endless_loop() -> None:
    graph = StateGraph(LogState).add_node("spin", logger("spin")).add_edge(START, "spin")
    graph.add_conditional_edges("spin", lambda s: "spin", ["spin", END])
    result = await graph.compile(recursion_limit=5).run({})
    assert result.status == "failed" and isinstance(result.error, GraphRecursionError)
    assert result.steps == 5
    result = await graph.compile().run({}, recursion_limit=7)
    assert result.steps == 7


async def test_first_failure_by_task_order_is_reported_and_siblings_cancelled() -> None:
    cancelled = asyncio.Event()

    async def slow(state: Any) -> dict[str, Any]:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {}

    def fails(name: str) -> Any:
        def node(state: Any) -> dict[str, Any]:
            raise RuntimeError(name)

        return node

    graph = StateGraph(LogState).add_node("a_slow", slow)
    graph.add_node("b_fail", fails("b")).add_node("c_fail", fails("c"))
    for name in ("a_slow", "b_fail", "c_fail"):
        graph.add_edge(START, name).add_edge(name, END)
    result = await graph.compile().run({})
    assert result.status == "failed" and str(result.error) == "b"
    assert cancelled.is_set()


async def test_bad_input_raises_before_anything_runs() -> None:
    ran = []
    graph = StateGraph(LogState).add_node("n", lambda s: ran.append(1)).add_edge(START, "n")
    compiled = graph.add_edge("n", END).compile()
    with pytest.raises(InvalidUpdateError, match="unknown state key"):
        await compiled.run({"bogus": 1})
    with pytest.raises(InvalidUpdateError, match="must be a mapping"):
        await compiled.run(["x"])
    with pytest.raises(GraphError, match="needs an input"):
        await compiled.run(None)
    assert ran == []


async def test_router_result_outside_its_mapping_fails() -> None:
    graph = chain("a").add_conditional_edges("a", lambda s: "maybe", {"yes": END})
    result = await graph.compile().run({})
    assert result.status == "failed" and "not in its mapping" in str(result.error)


class CountingAppend(Append):
    """The append reducer, remembering how many writes each call combined."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        self.batches.append(len(writes))
        return super().apply(key, current, writes)


async def test_a_step_costs_its_writes_not_tasks_times_writes_or_the_state_size() -> None:
    items, big = CountingAppend(), CountingAppend()

    wide = {"items": Annotated[list[int], items], "big": Annotated[list[int], big]}
    Wide = TypedDict("Wide", wide, total=False)  # type: ignore[misc]  # annotations built at run time

    graph = StateGraph(Wide).add_node("work", lambda arg: {"items": [arg]})
    graph.add_conditional_edges(START, lambda s: [Send("work", i) for i in range(50)])
    cp = MemoryCheckpointer()
    compiled = graph.add_edge("work", END).compile(checkpointer=cp)
    result = await compiled.run({"big": list(range(10_000))}, thread_id="t")
    assert result.state["items"] == list(range(50))
    assert items.batches == [50]  # the 50 writes of the step, combined in one pass
    assert big.batches == [1]  # the input; the step never touched the channel it did not write
    step = (await compiled.history("t"))[0]
    assert step.written == ("items",) and len(step.tasks) == 50
    record = await cp.get("t", step.checkpoint_id)
    assert record is not None and not record.snapshot
    assert record.values == {"items": list(range(50))}  # the delta, not the 10,000-item list


async def test_a_threaded_sync_node_can_ask_and_be_answered() -> None:
    # interrupt() finds its task's scope in the worker thread (the context is copied)
    def asks(state: Any) -> dict[str, Any]:
        return {"log": [f"answer {interrupt('ok?')}"]}

    graph = StateGraph(LogState).add_node("n", asks, timeout=60)
    compiled = (
        graph.add_edge(START, "n").add_edge("n", END).compile(checkpointer=MemoryCheckpointer())
    )
    first = await compiled.run({}, thread_id="t")
    assert [i.value for i in first.interrupts] == ["ok?"]
    done = await compiled.run(Command(resume="yes"), thread_id="t")
    assert done.state == {"log": ["answer yes"]}


class _Flaky(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        # LangGraph's default_retry_on: a bug in the node is not retried, a transient
        # failure is
        (ValueError("bad input"), False),
        (KeyError("missing"), False),
        (TypeError("wrong type"), False),
        (RuntimeError("broken"), False),
        (OSError("disk"), False),
        (ZeroDivisionError(), False),
        (ConnectionError("reset"), True),
        (TimeoutError("slow"), True),  # ours: a node's timeout= is worth another attempt
        (_Flaky("a user's own error"), True),
    ],
)
async def test_the_default_retry_policy_retries_what_langgraph_retries(
    error: Exception, retried: bool
) -> None:
    calls: list[int] = []

    def node(state: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return {"log": ["ok"]}

    assert default_retry_on(error) is retried
    graph = StateGraph(LogState).add_node("n", node, retry=RetryPolicy())
    result = await graph.add_edge(START, "n").add_edge("n", END).compile().run({})
    assert len(calls) == (2 if retried else 1)
    assert result.status == ("completed" if retried else "failed")


def test_default_retry_on_retries_http_errors_only_on_5xx() -> None:
    import httpx

    request = httpx.Request("GET", "http://127.0.0.1/x")

    def status_error(code: int) -> httpx.HTTPStatusError:
        response = httpx.Response(code, request=request)
        return httpx.HTTPStatusError("status", request=request, response=response)

    assert default_retry_on(status_error(503)) is True
    assert default_retry_on(status_error(404)) is False
    assert default_retry_on(httpx.ConnectError("refused")) is True  # a transport error
    assert RetryPolicy().retry_on is default_retry_on


class Loose(TypedDict, total=False):
    blob: Any
    log: Annotated[list[str], operator.add]


async def test_a_value_no_checkpoint_can_hold_fails_its_node_by_name(
    checkpointer: Checkpointer,
) -> None:
    # an object() was a TypeError that named no key, bytes that are not UTF-8 a bare
    # UnicodeDecodeError; in a step of several tasks the node that wrote it counted as
    # finished (its entry completed, no error on its TaskState) while the run failed
    def ask(state: Loose) -> dict[str, Any]:
        return {"log": [interrupt("go?")]}

    for bad, why in (
        (object(), "a object is not JSON-able"),
        (b"\xff", "bytes that are not UTF-8"),
    ):
        graph = StateGraph(Loose).add_node("w", lambda s, bad=bad: {"blob": bad, "log": ["w"]})
        graph = graph.add_node("ask", ask).add_edge(START, "w").add_edge(START, "ask")
        compiled = graph.compile(checkpointer=checkpointer)
        thread = f"t-{why[:5]}"
        finished: list[tuple[str, Any]] = []
        with pytest.raises(InvalidUpdateError):  # a stream raises the run's error
            async for item in compiled.stream({"log": ["in"]}, thread_id=thread, mode="tasks"):
                if "result" in item:
                    finished.append((item["name"], item["error"]))
        result = await compiled.run(None, thread_id=thread)
        assert result.status == "failed"
        assert isinstance(result.error, InvalidUpdateError)
        assert f"cannot checkpoint the write to 'blob': {why}" in str(result.error)
        assert result.state == {"log": ["in"]}  # what was saved: nothing of 'w'
        assert ("w", None) not in finished
        state = await compiled.get_state(thread)
        assert state.values == {"log": ["in"]} and set(state.next) == {"w", "ask"}
        failed = next(t for t in state.tasks if t.name == "w")
        assert failed.error is not None and "cannot checkpoint" in failed.error
        single = StateGraph(Loose).add_node("w", lambda s, bad=bad: {"blob": bad})
        single_run = single.add_edge(START, "w").compile(checkpointer=checkpointer)
        one = await single_run.run({"log": ["in"]}, thread_id=f"one-{thread}")
        assert isinstance(one.error, InvalidUpdateError)
        assert "cannot checkpoint 'blob'" in str(one.error)
        with pytest.raises(InvalidUpdateError, match=r"cannot checkpoint the input's 'blob'"):
            await single_run.run({"blob": bad}, thread_id=f"input-{thread}")


async def test_a_command_goto_that_names_no_node_fails_the_node_by_name() -> None:
    # Command(goto=5) failed the run with TypeError("'int' object is not iterable"), and
    # goto=[None] with an AttributeError from deep inside
    for bad in (5, [None], {"b": 1}):
        graph = StateGraph(LogState).add_node("a", lambda s, bad=bad: Command(goto=bad))
        result = await graph.add_edge(START, "a").compile().run({"x": 1})
        assert result.status == "failed"
        assert isinstance(result.error, InvalidRouteError)
        assert "Command.goto takes a node name, a Send or a list of them" in str(result.error)
    with pytest.raises(InvalidRouteError, match=r"Command.goto takes a node name"):
        await chain("a").compile().run(Command(goto=7))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "fields",
    [
        {"max_attempts": 2.5},
        {"max_attempts": True},
        {"max_attempts": "3"},
        {"max_attempts": float("inf")},
        {"initial_interval": float("nan")},
        {"initial_interval": -1.0},
        {"max_interval": float("nan")},
        {"max_interval": float("inf")},
        {"backoff_factor": -2.0},
        {"backoff_factor": "2"},
        {"retry_on": 5},
        {"retry_on": "ConnectionError"},
        {"retry_on": (ConnectionError, "x")},
    ],
    ids=repr,
)
def test_a_retry_policy_of_the_wrong_kind_is_refused_when_made(fields: dict[str, Any]) -> None:
    # each was taken: a NaN interval hung the run in its first wait, max_attempts=inf retried
    # until an OverflowError, 2.5 made three attempts and True one, and a retry_on that is not
    # an exception type or a predicate failed the node with TypeError at its first error.
    # Typed: an ArgumentError (a ConfigurationError, and the ValueError it was before)
    with pytest.raises(ArgumentError, match=r"RetryPolicy\.") as exc:
        RetryPolicy(**fields)
    assert isinstance(exc.value, ConfigurationError) and isinstance(exc.value, ValueError)


async def test_a_router_result_that_is_no_name_fails_the_run_with_an_invalid_route() -> None:
    # a router returning a dict failed the run with TypeError("unhashable type: 'dict'"),
    # with or without a mapping
    for mapping in (None, {"a": END}):
        graph = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a")
        graph.add_conditional_edges("a", lambda s: {"b": 1}, mapping)
        result = await graph.compile().run({"x": 1})
        assert result.status == "failed"
        assert isinstance(result.error, InvalidRouteError), result.error
        assert "{'b': 1}" in str(result.error)


async def test_an_integer_too_long_for_json_is_an_invalid_update_not_a_bare_value_error(
    checkpointer: Checkpointer,
) -> None:
    """An integer of more than 4300 digits (which Python writes as no JSON) in the input or a
    node's write raised a bare ``ValueError`` out of ``run`` ("Exceeds the limit (4300
    digits) for integer string conversion"), where any other value no checkpoint can hold
    is an ``InvalidUpdateError`` that fails the run and keeps what was saved."""
    huge = 10**5000
    graph = StateGraph(Loose).add_node("w", lambda s: {"blob": huge, "log": ["w"]})
    compiled = graph.add_edge(START, "w").compile(checkpointer=checkpointer)
    with pytest.raises(InvalidUpdateError, match=r"cannot checkpoint.*more than 4300 digits"):
        await compiled.run({"blob": huge}, thread_id="input")
    result = await compiled.run({"log": ["in"]}, thread_id="write")
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError), result.error
    assert "more than 4300 digits" in str(result.error)
    state = await compiled.get_state("write")  # what was saved: nothing of 'w'
    assert state.values == {"log": ["in"]} and set(state.next) == {"w"}


async def test_a_lone_surrogate_in_a_dict_key_is_checkpointed_and_read_back(
    checkpointer: Checkpointer,
) -> None:
    """A node's write may hold text from a model or a tool with half a UTF-16 pair, in a
    dict's key: the checkpoint's encoding (pydantic's JSON types) wrote such a key as U+FFFD,
    or failed the run ("cannot checkpoint ... surrogates not allowed") for one in a dict in a
    list. Values already round-tripped (JSON's ``\\ud800`` escape); keys do now too."""
    blob = {"k\ud800": ["v\udc00", {"n\udbff": ("t", 1)}], "plain": {"\udfff": None}}
    expected = {"k\ud800": ["v\udc00", {"n\udbff": ["t", 1]}], "plain": {"\udfff": None}}
    graph = StateGraph(Loose).add_node("w", lambda s: {"blob": blob, "log": ["w"]})
    compiled = graph.add_edge(START, "w").compile(checkpointer=checkpointer)
    result = await compiled.run({"log": ["in"]}, thread_id="t-1")
    assert result.status == "completed", result.error
    assert result.state == {"blob": blob, "log": ["in", "w"]}
    state = await compiled.get_state("t-1")  # as the checkpointer read it back (JSON's types)
    assert state.values == {"blob": expected, "log": ["in", "w"]}
    input_run = await compiled.run({"blob": blob}, thread_id="t-2")  # the input's encoding
    assert input_run.status == "completed", input_run.error
    assert (await compiled.get_state("t-2")).values["blob"] == expected
