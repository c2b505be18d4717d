"""Ports of LangGraph's API, thirteenth round: ``timeout=`` on ``@task`` and ``@entrypoint``
(LangGraph 1.2's, ``libs/langgraph/tests/test_retry.py``), a sub-graph's progress holding
off its calling node's idle timeout, and ``Runtime.execution_info``. Each program is written
once and run on both libraries (``OURS`` / ``THEIRS``) where LangGraph runs it, the outcomes
compared; then the differences we keep, pinned.

The timeouts are short (0.05-0.3 s) and the margins wide: what must time out sleeps far
longer than its timeout, what must not makes progress far more often than its idle timeout.
Nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, func_of, lg_errors, lg_memory, lg_types

from tinyagents import Runtime
from tinyagents.errors import GraphError, GraphValidationError, NodeTimeoutError
from tinyagents.graph import (
    ExecutionInfo,
    GraphRuntime,
    RetryPolicy,
    TimeoutPolicy,
    entrypoint,
    get_runtime,
    get_stream_writer,
    task,
)
from tinyagents.store.checkpoint import MemoryCheckpointer

lg_runtime = pytest.importorskip("langgraph.runtime")
lg_config = pytest.importorskip("langgraph.config")

SIDES = (OURS, THEIRS)


def policy_of(g: Any, **kw: Any) -> Any:
    return (TimeoutPolicy if g is OURS else lg_types.TimeoutPolicy)(**kw)


def retry_of(g: Any, **kw: Any) -> Any:
    return (RetryPolicy if g is OURS else lg_types.RetryPolicy)(**kw)


def runtime_of(g: Any) -> Any:
    return (get_runtime if g is OURS else lg_runtime.get_runtime)()


def writer_of(g: Any) -> Any:
    return (get_stream_writer if g is OURS else lg_config.get_stream_writer)()


def timeout_error(g: Any) -> type[BaseException]:
    return NodeTimeoutError if g is OURS else lg_errors.NodeTimeoutError


async def outcome(g: Any, flow: Any, inp: Any) -> Any:
    """The entrypoint's result, or its ``NodeTimeoutError`` as ``(node, kind, timeout)``."""
    try:
        return await flow.ainvoke(inp)
    except timeout_error(g) as exc:
        return (exc.node, exc.kind, exc.timeout)  # type: ignore[attr-defined]


async def both(program: Any) -> Any:
    """``program(g)`` on each library; the one outcome they share."""
    ours, theirs = [await program(g) for g in SIDES]
    assert ours == theirs
    return ours


# -- timeout= on @task and @entrypoint ---------------------------------------------------------


async def test_a_task_without_progress_times_out() -> None:
    # LangGraph: test_retry.py::test_task_decorator_timeout_e2e
    async def program(g: Any) -> Any:
        func = func_of(g)

        @func.task(timeout=policy_of(g, idle_timeout=0.05))
        async def slow_task(x: int) -> int:
            await asyncio.sleep(2)
            return x + 1

        @func.entrypoint()
        async def workflow(x: int) -> int:
            return await slow_task(x)

        return await outcome(g, workflow, 1)

    assert await both(program) == ("slow_task", "idle", 0.05)


async def test_a_number_is_a_tasks_run_timeout() -> None:
    async def program(g: Any) -> Any:
        func = func_of(g)

        @func.task(timeout=0.05)
        async def slow_task(x: int) -> int:
            await asyncio.sleep(2)
            return x + 1

        @func.entrypoint()
        async def workflow(x: int) -> int:
            return await slow_task(x)

        return await outcome(g, workflow, 1)

    assert await both(program) == ("slow_task", "run", 0.05)


@pytest.mark.parametrize("param", ["timeout", "idle_timeout"])
async def test_a_tasks_own_timeout_parameter_is_its_callers(param: str) -> None:
    # LangGraph: test_retry.py::test_task_decorator_preserves_user_timeout_kwarg and
    # test_task_decorator_preserves_user_idle_timeout_kwarg
    async def program(g: Any) -> Any:
        func = func_of(g)

        async def echo(**kw: int) -> int:
            await asyncio.sleep(0)
            return kw[param]

        echo.__name__ = "echo"
        timed = func.task(timeout=policy_of(g, idle_timeout=1.0, run_timeout=1.0))(echo)

        @func.entrypoint()
        async def workflow(x: int) -> int:
            return await timed(**{param: x})

        return await workflow.ainvoke(5)

    assert await both(program) == 5


async def test_an_entrypoint_without_progress_times_out() -> None:
    # LangGraph: test_retry.py::test_entrypoint_timeout_e2e
    async def program(g: Any) -> Any:
        func = func_of(g)

        @func.entrypoint(timeout=policy_of(g, idle_timeout=0.05))
        async def slow_workflow(x: int) -> int:
            await asyncio.sleep(2)
            return x

        return await outcome(g, slow_workflow, 1)

    assert await both(program) == ("slow_workflow", "idle", 0.05)


async def test_a_task_started_before_its_entrypoint_timed_out_runs() -> None:
    # LangGraph: test_retry.py::test_entrypoint_timeout_allows_pre_timeout_child_task_to_run
    async def program(g: Any) -> Any:
        func = func_of(g)
        child_started = threading.Event()

        @func.task()
        def child(value: int) -> int:
            child_started.set()
            return value + 1

        @func.entrypoint(timeout=policy_of(g, idle_timeout=0.05))
        async def parent(value: int) -> int:
            child(value)
            await asyncio.sleep(2)
            return value

        out = await outcome(g, parent, 1)
        return out, await asyncio.to_thread(child_started.wait, 5.0)

    assert await both(program) == (("parent", "idle", 0.05), True)


async def test_a_timed_out_task_attempt_is_retried() -> None:
    # LangGraph: test_retry.py::test_arun_with_retry_idle_timeout_retries (on a @task)
    async def program(g: Any) -> Any:
        func = func_of(g)
        attempts: list[int] = []

        @func.task(
            timeout=policy_of(g, idle_timeout=0.05),
            retry_policy=retry_of(g, max_attempts=2, initial_interval=0.01, jitter=False),
        )
        async def flaky(x: int) -> int:
            attempts.append(x)
            if len(attempts) == 1:
                await asyncio.sleep(2)
            return x + 1

        @func.entrypoint()
        async def workflow(x: int) -> int:
            return await flaky(x)

        return await outcome(g, workflow, 1), len(attempts)

    assert await both(program) == (2, 2)


@pytest.mark.parametrize("refresh_on", ["auto", "heartbeat"])
async def test_a_tasks_heartbeats_hold_off_its_idle_timeout(refresh_on: str) -> None:
    # LangGraph: test_retry.py::test_arun_with_retry_idle_timeout_resets_on_runtime_heartbeat,
    # on a @task: beats every 0.02 s against an idle timeout of 0.2 s, longer than 0.2 s
    async def program(g: Any) -> Any:
        func = func_of(g)

        @func.task(timeout=policy_of(g, idle_timeout=0.2, refresh_on=refresh_on))
        async def beating(x: int) -> int:
            for _ in range(15):
                await asyncio.sleep(0.02)
                runtime_of(g).heartbeat()
            return x + 1

        @func.entrypoint()
        async def workflow(x: int) -> int:
            return await beating(x)

        return await outcome(g, workflow, 1)

    assert await both(program) == 2


async def test_an_entrypoints_task_calls_hold_off_its_idle_timeout() -> None:
    # LangGraph's "auto" counts the child tasks a timed attempt schedules as its progress
    async def program(g: Any) -> Any:
        func = func_of(g)

        @func.task()
        async def step(x: int) -> int:
            return x + 1

        @func.entrypoint(timeout=policy_of(g, idle_timeout=0.2))
        async def workflow(x: int) -> int:
            for _ in range(12):
                await asyncio.sleep(0.03)
                x = await step(x)
            return x

        return await outcome(g, workflow, 0)

    assert await both(program) == 12


def test_a_bad_timeout_is_refused_before_the_function_is_given() -> None:
    # LangGraph: test_retry.py::test_timeout_validation_is_eager_across_apis (a ValueError
    # there; ours is a GraphValidationError, also one)
    for bad in (0, -1, float("nan"), float("inf"), True, "3"):
        with pytest.raises(GraphValidationError, match="timeout"):
            task(timeout=bad)
        with pytest.raises(GraphValidationError, match="timeout"):
            entrypoint(timeout=bad)
    with pytest.raises(ValueError):
        lg_func_task_zero()


def lg_func_task_zero() -> None:
    func_of(THEIRS).task(timeout=0)


def test_a_timeout_is_read_as_a_policy() -> None:
    assert task(timeout=2)(lambda x: x).timeout == TimeoutPolicy(run_timeout=2.0)
    policy = TimeoutPolicy(idle_timeout=0.5, refresh_on="heartbeat")
    assert entrypoint(timeout=policy).timeout is policy
    # LangGraph's own policy is taken too, as add_node takes it
    theirs = lg_types.TimeoutPolicy(idle_timeout=0.5)
    assert entrypoint(timeout=theirs).timeout == TimeoutPolicy(idle_timeout=0.5)
    assert task(lambda x: x).timeout is None and entrypoint().timeout is None


# -- a sync task or entrypoint with a timeout: ours runs it, LangGraph refuses it ---------------


def test_langgraph_refuses_a_sync_task_or_entrypoint_with_a_timeout() -> None:
    # LangGraph: test_retry.py::test_timeout_rejects_sync_functional_apis_at_declaration_time;
    # ours runs it on its thread of its own, as a sync node with a timeout= (next tests)
    lg_func = func_of(THEIRS)
    with pytest.raises(ValueError, match="only supported for async nodes"):
        lg_func.task(timeout=0.05)(lambda x: x)
    with pytest.raises(ValueError, match="only supported for async nodes"):
        lg_func.entrypoint(timeout=0.05)(lambda x: x)


async def test_a_sync_task_times_out_and_its_thread_is_cut_off() -> None:
    # its first attempt's thread, left running by the timeout, streams and calls a task while
    # the retry runs: neither reaches the run (the retry's items are the retry's alone)
    release, done = threading.Event(), threading.Event()
    refused: list[str] = []
    attempts: list[int] = []

    @task
    def other(x: int) -> int:
        return x

    @task(
        timeout=TimeoutPolicy(idle_timeout=0.1),
        retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False),
    )
    def stuck(x: int) -> int:
        attempts.append(x)
        writer = get_stream_writer()
        if len(attempts) == 1:
            release.wait(5)
            writer({"late": x})  # dropped: its attempt timed out
            try:
                other(x)
            except GraphError as exc:
                refused.append(str(exc))
            done.set()
            return x
        release.set()
        done.wait(5)
        writer({"retry": x})
        return x + 1

    @entrypoint()
    async def workflow(x: int) -> int:
        return await stuck(x)

    items = [item async for item in workflow.stream(1, mode=["custom", "updates"])]
    assert items == [
        ("custom", {"retry": 1}),
        ("updates", {"stuck": 2}),
        ("updates", {"workflow": 2}),
    ]
    assert len(refused) == 1 and "after its node's attempt timed out" in refused[0]


async def test_a_sync_entrypoint_times_out() -> None:
    release = threading.Event()

    @entrypoint(timeout=0.05)
    def stuck(x: int) -> int:
        release.wait(5)
        return x

    try:
        with pytest.raises(NodeTimeoutError) as caught:
            await stuck.ainvoke(1)
    finally:
        release.set()
    assert (caught.value.node, caught.value.kind, caught.value.timeout) == ("stuck", "run", 0.05)


# -- a sub-graph's progress is its calling node's ----------------------------------------------


class X(TypedDict):
    x: int


def calling_a_sub_graph(g: Any, inner: Any, policy: Any, nodes: str = "abcd") -> Any:
    """A graph whose one node, timed by ``policy``, calls a sub-graph of ``nodes`` in a row,
    each ``inner``."""
    sub = g.StateGraph(X)
    for name in nodes:
        sub.add_node(name, inner)
    sub.add_edge(g.START, nodes[0])
    for a, b in itertools.pairwise(nodes):
        sub.add_edge(a, b)
    compiled = sub.add_edge(nodes[-1], g.END).compile()

    async def outer(state: X) -> Any:
        if g is THEIRS:
            return await compiled.ainvoke(state)
        return (await compiled.run(state)).state

    return (
        g.StateGraph(X)
        .add_node("outer", outer, timeout=policy)
        .add_edge(g.START, "outer")
        .add_edge("outer", g.END)
        .compile()
    )


async def graph_outcome(g: Any, graph: Any, stream: str | None = None) -> Any:
    """The graph's values on ``{"x": 0}`` (streamed in ``stream`` mode, with sub-graphs, if
    given), or its ``NodeTimeoutError`` as ``(node, kind)``."""
    try:
        if stream is not None:
            if g is THEIRS:
                items = graph.astream({"x": 0}, stream_mode=stream, subgraphs=True)
            else:
                items = graph.stream({"x": 0}, mode=stream, subgraphs=True)
            return ("streamed", len([item async for item in items]) > 0)
        if g is THEIRS:
            return await graph.ainvoke({"x": 0})
        result = await graph.run({"x": 0})
        if result.error is not None:
            raise result.error
        return result.state
    except timeout_error(g) as exc:
        return (exc.node, exc.kind)  # type: ignore[attr-defined]


@pytest.mark.parametrize("stream", [None, "updates"])
@pytest.mark.parametrize(("refresh_on", "expected"), [("auto", None), ("heartbeat", "idle")])
async def test_a_sub_graphs_steps_hold_off_its_callers_idle_timeout(
    stream: str | None, refresh_on: str, expected: str | None
) -> None:
    # LangGraph's "auto" counts the callbacks of the sub-graph's nodes (each one's start and
    # end): four nodes of 0.12 s each outlast the caller's idle timeout of 0.3 s, each alone
    # does not. Under refresh_on="heartbeat" nothing but a heartbeat counts.
    async def program(g: Any) -> Any:
        async def inner(state: X) -> X:
            await asyncio.sleep(0.12)
            return {"x": state["x"] + 1}

        policy = policy_of(g, idle_timeout=0.3, refresh_on=refresh_on)
        return await graph_outcome(g, calling_a_sub_graph(g, inner, policy), stream)

    done = {"x": 4} if stream is None else ("streamed", True)
    assert await both(program) == (done if expected is None else ("outer", expected))


async def test_a_sub_graph_node_longer_than_the_idle_timeout_times_its_caller_out() -> None:
    async def program(g: Any) -> Any:
        async def inner(state: X) -> X:
            await asyncio.sleep(2)
            return {"x": 1}

        policy = policy_of(g, idle_timeout=0.1)
        return await graph_outcome(g, calling_a_sub_graph(g, inner, policy, "a"))

    assert await both(program) == ("outer", "idle")


@pytest.mark.parametrize("refresh_on", ["auto", "heartbeat"])
async def test_a_sub_graph_nodes_heartbeat_is_its_callers(refresh_on: str) -> None:
    # a sub-graph node without a timeout of its own beats its caller's clock (LangGraph's
    # sub-graph node gets its caller's heartbeat through the runtime it inherits)
    async def program(g: Any) -> Any:
        async def inner(state: X) -> X:
            for _ in range(20):
                await asyncio.sleep(0.03)
                runtime_of(g).heartbeat()
            return {"x": 1}

        policy = policy_of(g, idle_timeout=0.2, refresh_on=refresh_on)
        return await graph_outcome(g, calling_a_sub_graph(g, inner, policy, "a"))

    assert await both(program) == {"x": 1}


async def emitting(g: Any) -> Any:
    """A sub-graph node that streams every 0.03 s for 0.6 s, called by a node with an idle
    timeout of 0.2 s."""

    async def inner(state: X) -> X:
        for i in range(20):
            await asyncio.sleep(0.03)
            writer_of(g)({"tick": i})
        return {"x": 1}

    return await graph_outcome(
        g, calling_a_sub_graph(g, inner, policy_of(g, idle_timeout=0.2), "a")
    )


async def test_what_a_sub_graph_streams_is_its_callers_progress_streamed_or_not() -> None:
    # ours: a sub-graph node's stream writer is progress of the timed node calling it,
    # streamed or not, as the timed node's own writer is in both libraries. LangGraph counts
    # it only when the stream carries it out (astream(..., subgraphs=True) with "custom",
    # through the caller's guarded stream): run plainly, its caller times out.
    assert await emitting(OURS) == {"x": 1}
    assert await emitting(THEIRS) == ("outer", "idle")


async def test_a_task_streaming_inside_a_timed_entrypoint_is_its_progress() -> None:
    # a @task's writer (and heartbeat) inside a timed entrypoint move the entrypoint's clock
    @task
    async def ticking(n: int) -> int:
        for i in range(n):
            await asyncio.sleep(0.03)
            get_stream_writer()({"tick": i})
        return n

    @entrypoint(timeout=TimeoutPolicy(idle_timeout=0.2, refresh_on="auto"))
    async def flow(n: int) -> int:
        return await ticking(n)

    assert await flow.ainvoke(20) == 20

    @entrypoint(timeout=TimeoutPolicy(idle_timeout=0.2, refresh_on="heartbeat"))
    async def strict(n: int) -> int:
        return await ticking(n)

    with pytest.raises(NodeTimeoutError) as caught:
        await strict.ainvoke(20)
    assert (caught.value.node, caught.value.kind) == ("strict", "idle")


async def test_a_timed_sub_graph_node_reports_to_its_own_clock_and_its_callers() -> None:
    # the inner node's own idle timeout (0.3 s) and its caller's (0.6 s) are held off by what
    # the inner node streams every 0.03 s for 0.9 s; a sub-graph node that stops streaming
    # times out itself first (its own, shorter, idle timeout). (Ticks ten times shorter than
    # the shorter timeout: a loaded machine's stall does not time the streaming node out.)
    async def inner(state: X) -> X:
        for i in range(30):
            await asyncio.sleep(0.03)
            get_stream_writer()({"tick": i})
        return {"x": 1}

    async def quiet(state: X) -> X:
        await asyncio.sleep(2)
        return {"x": 1}

    for node, expected in ((inner, {"x": 1}), (quiet, ("quiet", "idle"))):
        sub = (
            OURS.StateGraph(X)
            .add_node(node.__name__, node, timeout=TimeoutPolicy(idle_timeout=0.3))
            .add_edge(OURS.START, node.__name__)
            .compile()
        )

        async def outer(state: X, sub: Any = sub) -> Any:
            return (await sub.run(state)).state  # (its error raised as the run's)

        graph = (
            OURS.StateGraph(X)
            .add_node("outer", outer, timeout=TimeoutPolicy(idle_timeout=0.6))
            .add_edge(OURS.START, "outer")
            .compile()
        )
        result = await graph.run({"x": 0})
        if result.error is None:
            assert result.state == expected
        else:
            error = result.error
            assert isinstance(error, NodeTimeoutError)
            assert (error.node, error.kind) == expected


# -- Runtime.execution_info ----------------------------------------------------------------------


class Foo(TypedDict):
    foo: str


def runtime_type(g: Any) -> Any:
    return GraphRuntime if g is OURS else lg_runtime.Runtime


async def run_graph(g: Any, graph: Any, inp: Any, thread: str | None = None) -> Any:
    if g is THEIRS:
        config = {"configurable": {"thread_id": thread}} if thread else None
        return await graph.ainvoke(inp, config)
    result = await graph.run(inp, thread_id=thread)
    if result.error is not None:
        raise result.error
    return result.state


def saver(g: Any) -> Any:
    return MemoryCheckpointer() if g is OURS else lg_memory.InMemorySaver()


async def test_execution_info_counts_the_attempts_of_a_retried_node() -> None:
    # LangGraph: test_retry.py::test_graph_with_single_retry_policy (its execution_info part)
    # and test_execution_info_identity_fields_populated_on_retry
    async def program(g: Any) -> Any:
        infos: list[Any] = []

        def failing_node(state: Foo, runtime: runtime_type(g)) -> Foo:  # type: ignore[valid-type]
            infos.append(runtime.execution_info)  # type: ignore[attr-defined]
            if len(infos) < 3:
                raise ValueError("Intentional failure")
            return {"foo": "success"}

        policy = retry_of(
            g, max_attempts=3, initial_interval=0.01, jitter=False, retry_on=ValueError
        )
        graph = (
            g.StateGraph(Foo)
            .add_node("failing_node", failing_node, retry_policy=policy)
            .add_edge(g.START, "failing_node")
            .compile(checkpointer=saver(g))
        )
        result = await run_graph(g, graph, {"foo": ""}, thread="retry-thread")
        first = infos[0].node_first_attempt_time
        assert isinstance(first, float)
        assert all(i.node_first_attempt_time == first for i in infos)
        assert len({i.task_id for i in infos}) == 1 and len({i.checkpoint_id for i in infos}) == 1
        assert all(i.checkpoint_ns == f"failing_node:{i.task_id}" for i in infos)
        assert all(isinstance(i.checkpoint_id, str) for i in infos)
        return (
            result,
            [i.node_attempt for i in infos],
            [i.thread_id for i in infos],
            [i.run_id for i in infos],
        )

    assert await both(program) == (
        {"foo": "success"},
        [1, 2, 3],
        ["retry-thread"] * 3,
        [None] * 3,
    )


async def test_execution_info_without_retry_or_checkpointer() -> None:
    # LangGraph: test_retry.py::test_runtime_execution_info_defaults_without_retry, and
    # get_runtime() in a node: no checkpointer, so no thread (and, ours, no checkpoint id)
    async def program(g: Any) -> Any:
        captured: list[Any] = []

        def node(state: Foo, runtime: runtime_type(g)) -> Foo:  # type: ignore[valid-type]
            captured.append(runtime.execution_info)  # type: ignore[attr-defined]
            captured.append(runtime_of(g).execution_info)
            return {"foo": "ok"}

        graph = g.StateGraph(Foo).add_node("node", node).add_edge(g.START, "node").compile()
        result = await run_graph(g, graph, {"foo": ""})
        param, got = captured
        assert isinstance(param.node_first_attempt_time, float)
        assert param.task_id == got.task_id and param.checkpoint_ns == f"node:{param.task_id}"
        return result, param.node_attempt, param.thread_id, param.run_id, got.node_attempt

    assert await both(program) == ({"foo": "ok"}, 1, None, None, 1)


async def test_execution_info_of_a_sub_graph_node_names_its_namespace() -> None:
    async def program(g: Any) -> Any:
        seen: list[Any] = []

        def inner(state: Foo, runtime: runtime_type(g)) -> Foo:  # type: ignore[valid-type]
            seen.append(runtime.execution_info)  # type: ignore[attr-defined]
            return {"foo": "inner"}

        sub = g.StateGraph(Foo).add_node("inner", inner).add_edge(g.START, "inner").compile()
        graph = (
            g.StateGraph(Foo)
            .add_node("outer", sub)
            .add_edge(g.START, "outer")
            .compile(checkpointer=saver(g))
        )
        await run_graph(g, graph, {"foo": ""}, thread="t")
        (info,) = seen
        outer, inner_ns = info.checkpoint_ns.split("|")
        assert inner_ns == f"inner:{info.task_id}"
        return outer.split(":")[0], info.thread_id, info.node_attempt

    assert await both(program) == ("outer", "t", 1)


def test_execution_info_is_none_outside_a_node_and_server_info_always() -> None:
    assert GraphRuntime().execution_info is None and GraphRuntime().server_info is None
    info = ExecutionInfo(checkpoint_id=None, checkpoint_ns="n:1", task_id="1")
    assert info.patch(node_attempt=2) == ExecutionInfo(
        checkpoint_id=None, checkpoint_ns="n:1", task_id="1", node_attempt=2
    )
    assert info.node_attempt == 1  # (patch makes a copy)


async def test_a_plain_node_of_an_unsaved_run_has_no_first_attempt_time() -> None:
    # the executor calls it inline, untimed (timing every plain node would cost each call);
    # the rest of its execution_info is there
    seen: list[Any] = []

    def plain(state: Foo) -> Foo:
        seen.append(get_runtime().execution_info)
        return {"foo": "x"}

    graph = OURS.StateGraph(Foo).add_node("plain", plain).add_edge(OURS.START, "plain").compile()
    await graph.run({"foo": ""})
    (info,) = seen
    assert info.node_first_attempt_time is None
    assert (info.node_attempt, info.checkpoint_ns) == (1, f"plain:{info.task_id}")


async def test_a_runtime_run_id_is_the_execution_infos() -> None:
    async with Runtime(testing=True) as rt:
        seen: list[Any] = []

        def node(state: Foo, runtime: GraphRuntime) -> Foo:
            seen.append(runtime.execution_info)
            return {"foo": "x"}

        graph = (
            OURS.StateGraph(Foo)
            .add_node("node", node)
            .add_edge(OURS.START, "node")
            .compile(checkpointer=MemoryCheckpointer())
        )
        handle = await rt.start_graph(graph, {"foo": ""}, thread_id="rt-thread")
        await handle.result()
    (info,) = seen
    assert info.run_id == handle.run_id and info.thread_id == "rt-thread"


# -- more of LangGraph's test_retry.py -----------------------------------------------------------


def one_timed_node(g: Any, node: Any, policy: Any) -> Any:
    return (
        g.StateGraph(X)
        .add_node("n", node, timeout=policy)
        .add_edge(g.START, "n")
        .add_edge("n", g.END)
        .compile()
    )


@pytest.mark.parametrize("kind", ["idle", "run"])
async def test_a_timeout_cannot_be_swallowed(kind: str) -> None:
    # LangGraph: test_retry.py::test_arun_with_retry_timeout_cannot_be_swallowed (on a graph):
    # a node that catches the timeout's cancel and returns still timed out; what it returned
    # is not the step's
    async def program(g: Any) -> Any:
        async def stubborn(state: X) -> X:
            try:
                await asyncio.sleep(2)
            except asyncio.CancelledError:
                await asyncio.sleep(0)
                return {"x": -1}
            return {"x": 1}

        policy = policy_of(g, **{f"{kind}_timeout": 0.05})
        return await graph_outcome(g, one_timed_node(g, stubborn, policy))

    assert await both(program) == ("n", kind)


async def test_a_blocking_call_in_an_async_node_outlasts_its_timeout() -> None:
    # LangGraph: test_retry.py::test_sync_sleep_in_async_node_bypasses_timeout_and_emits_
    # finish_success: a node that blocks the event loop (time.sleep) past its idle timeout
    # and returns without awaiting is not timed out (nothing can fire meanwhile)
    async def program(g: Any) -> Any:
        async def blocking(state: X) -> X:
            time.sleep(0.1)  # noqa: ASYNC251 (the point: it blocks the loop)
            return {"x": 1}

        return await graph_outcome(g, one_timed_node(g, blocking, policy_of(g, idle_timeout=0.05)))

    assert await both(program) == {"x": 1}


# -- LangGraph's test_runtime.py ----------------------------------------------------------------


def test_execution_info_defaults_and_patch() -> None:
    # LangGraph: test_runtime.py::test_execution_info_defaults_and_patch, on both classes
    for cls in (ExecutionInfo, lg_runtime.ExecutionInfo):
        info = cls(checkpoint_id="c1", checkpoint_ns="ns1", task_id="t1")
        assert (info.checkpoint_id, info.checkpoint_ns, info.task_id) == ("c1", "ns1", "t1")
        assert (info.thread_id, info.run_id, info.node_first_attempt_time) == (None, None, None)
        assert info.node_attempt == 1
        patched = info.patch(thread_id="th1", node_attempt=3, task_id="tk1")
        assert (patched.thread_id, patched.node_attempt, patched.task_id) == ("th1", 3, "tk1")
        assert (info.node_attempt, info.task_id) == (1, "t1")
        with pytest.raises(AttributeError):
            info.thread_id = "t2"  # type: ignore[misc]


async def test_execution_info_of_a_node_and_of_a_sub_graph_node() -> None:
    # LangGraph: test_runtime.py::test_execution_info_inherited_by_subgraph and
    # test_server_info_none_without_configurable
    async def program(g: Any) -> Any:
        seen: dict[str, Any] = {}

        def sub_node(state: Foo, runtime: runtime_type(g)) -> Foo:  # type: ignore[valid-type]
            seen["sub"] = runtime.execution_info  # type: ignore[attr-defined]
            return {"foo": "from_sub"}

        def main_node(state: Foo, runtime: runtime_type(g)) -> Foo:  # type: ignore[valid-type]
            seen["main"] = runtime.execution_info  # type: ignore[attr-defined]
            seen["server"] = runtime.server_info  # type: ignore[attr-defined]
            return {"foo": "from_main"}

        sub = g.StateGraph(Foo).add_node("sub_node", sub_node).add_edge(g.START, "sub_node")
        graph = (
            g.StateGraph(Foo)
            .add_node("main_node", main_node)
            .add_node("subgraph", sub.compile())
            .add_edge(g.START, "main_node")
            .add_edge("main_node", "subgraph")
            .compile(checkpointer=saver(g))
        )
        await run_graph(g, graph, {"foo": "hi"}, thread="sub-thread")
        main, sub_info = seen["main"], seen["sub"]
        assert main.checkpoint_ns == f"main_node:{main.task_id}"
        assert sub_info.checkpoint_ns.startswith("subgraph:")
        assert sub_info.checkpoint_ns.endswith(f"|sub_node:{sub_info.task_id}")
        assert isinstance(main.node_first_attempt_time, float)
        assert isinstance(sub_info.node_first_attempt_time, float)
        return (
            main.thread_id,
            sub_info.thread_id,
            main.node_attempt,
            sub_info.node_attempt,
            seen["server"],
        )

    assert await both(program) == ("sub-thread", "sub-thread", 1, 1, None)
