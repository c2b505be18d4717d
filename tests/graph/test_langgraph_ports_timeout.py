"""Ports of LangGraph 1.2's node timeout tests (``libs/langgraph/tests/test_retry.py``:
``TimeoutPolicy``'s ``run_timeout`` / ``idle_timeout`` / ``refresh_on`` and
``runtime.heartbeat()``): the same graph on LangGraph and on ``tinyagents.graph`` where
LangGraph runs it (an async node: LangGraph refuses a sync node with a timeout), the outcome
compared. Each test's comment names the LangGraph test it follows.

The timeouts are short (0.05-0.3 s) and the margins wide: a node that must time out sleeps
far longer than its timeout, one that must not makes progress far more often than its idle
timeout. Nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from datetime import timedelta
from typing import Any, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph_kit import OURS, THEIRS, lg_errors, lg_types

from tinyagents.errors import ArgumentError, GraphValidationError, NodeTimeoutError
from tinyagents.graph import (
    NodeContext,
    RetryPolicy,
    TimeoutPolicy,
    get_runtime,
    get_stream_writer,
    task,
)

lg_runtime = pytest.importorskip("langgraph.runtime")
lg_config = pytest.importorskip("langgraph.config")


class X(TypedDict):
    x: int


#: per library: its StateGraph / START / END, its TimeoutPolicy, RetryPolicy, get_runtime
#: and get_stream_writer, and the NodeTimeoutError it raises
LIBS = {
    "ours": (OURS, TimeoutPolicy, RetryPolicy, get_runtime, get_stream_writer, NodeTimeoutError),
    "theirs": (
        THEIRS,
        lg_types.TimeoutPolicy,
        lg_types.RetryPolicy,
        lg_runtime.get_runtime,
        lg_config.get_stream_writer,
        lg_errors.NodeTimeoutError,
    ),
}


def one_node(lib: Any, node: Any, **options: Any) -> Any:
    return (
        lib.StateGraph(X)
        .add_node("n", node, **options)
        .add_edge(lib.START, "n")
        .add_edge("n", lib.END)
        .compile()
    )


async def outcome(side: str, graph: Any, *, stream: bool = False) -> Any:
    """The graph's output on ``{"x": 0}``, or the ``NodeTimeoutError`` it failed with, as
    ``(kind, timeout, run_timeout, idle_timeout)``."""
    error = LIBS[side][5]
    try:
        if side == "ours" and stream:
            items = [i async for i in graph.stream({"x": 0}, mode=["custom", "values"])]
            return items[-1][1]
        if side == "ours":
            result = await graph.run({"x": 0})
            if isinstance(result.error, error):
                raise result.error
            return result.raise_for_status().state
        if stream:
            out: Any = None
            async for mode, chunk in graph.astream({"x": 0}, stream_mode=["custom", "values"]):
                if mode == "values":
                    out = chunk
            return out
        return await graph.ainvoke({"x": 0})
    except error as exc:
        assert exc.node == "n"
        return (exc.kind, exc.timeout, exc.run_timeout, exc.idle_timeout)


async def both(make: Any, *, stream: bool = False) -> Any:
    """``make(side)``'s graph run on both libraries: the outcome, checked the same."""
    theirs = await outcome("theirs", make("theirs"), stream=stream)
    ours = await outcome("ours", make("ours"), stream=stream)
    assert ours == theirs
    return ours


def test_coerce_a_scalar_is_its_run_timeout() -> None:
    # LangGraph: test_coerce_timeout_policy_scalar_is_run_timeout and
    # test_coerce_timeout_policy_returns_same_instance_for_already_coerced
    assert TimeoutPolicy.coerce(None) is None
    assert TimeoutPolicy.coerce(timedelta(milliseconds=250)) == TimeoutPolicy(run_timeout=0.25)
    assert TimeoutPolicy.coerce(2) == TimeoutPolicy(run_timeout=2.0)
    assert TimeoutPolicy.coerce(TimeoutPolicy(idle_timeout=1.5)) == TimeoutPolicy(idle_timeout=1.5)
    policy = TimeoutPolicy(run_timeout=1.0, idle_timeout=timedelta(seconds=2))
    assert policy.idle_timeout == 2.0 and TimeoutPolicy.coerce(policy) is policy
    assert TimeoutPolicy.coerce(TimeoutPolicy()) is None  # neither timeout: none
    assert lg_types.TimeoutPolicy.coerce(lg_types.TimeoutPolicy()) is None
    # LangGraph's own policy is taken as ours
    theirs = lg_types.TimeoutPolicy(idle_timeout=0.5, refresh_on="heartbeat")
    assert TimeoutPolicy.coerce(theirs) == TimeoutPolicy(idle_timeout=0.5, refresh_on="heartbeat")
    with pytest.raises(ArgumentError, match="run_timeout must be finite and > 0"):
        TimeoutPolicy.coerce(0)


@pytest.mark.parametrize(
    "bad", [0, -1, float("nan"), float("inf"), True, "3", timedelta(0), timedelta(seconds=-1)]
)
@pytest.mark.parametrize("field", ["run_timeout", "idle_timeout"])
def test_a_timeout_of_the_wrong_kind_is_refused(field: str, bad: Any) -> None:
    # LangGraph: test_timeout_validation_is_eager_across_apis (its ValueError; ours is an
    # ArgumentError, a ValueError too, when the policy is made); NaN timed out every attempt
    # at once, infinity none, True was one second
    with pytest.raises(ArgumentError, match=f"TimeoutPolicy.{field} must be"):
        TimeoutPolicy(**{field: bad})
    if bad in (0, -1, timedelta(0), timedelta(seconds=-1)):  # LangGraph refuses these too
        with pytest.raises(ValueError, match=f"{field} must be greater than 0"):
            lg_types.TimeoutPolicy.coerce(lg_types.TimeoutPolicy(**{field: bad}))


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**6), 10**6))
def test_a_number_is_a_run_timeout_exactly_when_langgraph_takes_it(seconds: float) -> None:
    # LangGraph's coerce takes any number > 0 as the run timeout (infinity too, which never
    # fires, and NaN, which fires at once); ours takes the finite ones and refuses the rest
    good = 0 < seconds < float("inf")
    if good:
        assert TimeoutPolicy.coerce(seconds) == TimeoutPolicy(run_timeout=float(seconds))
        theirs = lg_types.TimeoutPolicy.coerce(seconds)
        assert theirs is not None and theirs.run_timeout == float(seconds)
    else:
        with pytest.raises(ArgumentError, match="run_timeout must be finite and > 0"):
            TimeoutPolicy.coerce(seconds)


def test_add_node_refuses_a_bad_timeout_policy() -> None:
    with pytest.raises(ArgumentError, match="refresh_on must be 'auto' or 'heartbeat'"):
        TimeoutPolicy(idle_timeout=1, refresh_on="never")  # type: ignore[arg-type]
    graph = OURS.StateGraph(X)
    # LangGraph's policy is checked when given (LangGraph checks it at coerce)
    with pytest.raises(GraphValidationError, match=r"node 'n': timeout: .*idle_timeout must be"):
        graph.add_node("n", lambda s: s, timeout=lg_types.TimeoutPolicy(idle_timeout=-1))
    with pytest.raises(GraphValidationError, match="node 'n': timeout must be a finite number"):
        graph.add_node("n", lambda s: s, timeout=object())  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match=r"set_node_defaults: timeout: .*run_timeout"):
        graph.set_node_defaults(timeout=timedelta(0))
    assert graph.nodes == {} and graph.node_defaults == {}
    # a policy with neither timeout sets none: the node stays a plain one
    graph.add_node("n", lambda s: s, timeout=TimeoutPolicy())
    assert graph.nodes["n"].timeout is None and graph.nodes["n"].plain


@pytest.mark.parametrize("policy", [{"idle_timeout": 0.05}, {"run_timeout": 0.05}])
async def test_a_node_without_progress_times_out(policy: dict[str, float]) -> None:
    # LangGraph: test_state_graph_add_node_timeout_e2e and test_arun_with_retry_timeout_fires_async
    def make(side: str) -> Any:
        lib, timeout_policy = LIBS[side][:2]

        async def slow(state: X) -> X:
            await asyncio.sleep(2)
            return {"x": 1}

        return one_node(lib, slow, timeout=timeout_policy(**policy))

    kind = next(iter(policy)).removesuffix("_timeout")
    assert await both(make) == (
        kind,
        0.05,
        policy.get("run_timeout"),
        policy.get("idle_timeout"),
    )


async def test_the_error_carries_both_configured_timeouts() -> None:
    # LangGraph: test_node_timeout_error_carries_both_configured_timeouts
    def make(side: str) -> Any:
        lib, timeout_policy = LIBS[side][:2]

        async def slow(state: X) -> X:
            await asyncio.sleep(2)
            return {"x": 1}

        return one_node(lib, slow, timeout=timeout_policy(run_timeout=0.05, idle_timeout=1.0))

    assert await both(make) == ("run", 0.05, 0.05, 1.0)


async def test_an_idle_timeout_error_reads_as_langgraphs() -> None:
    async def slow(state: X) -> X:
        await asyncio.sleep(2)
        return {"x": 1}

    result = await one_node(OURS, slow, timeout=TimeoutPolicy(idle_timeout=0.05)).run({"x": 0})
    error = result.error
    assert isinstance(error, NodeTimeoutError) and isinstance(error, TimeoutError)
    assert str(error).startswith(
        "Node 'n' exceeded its idle timeout of 0.050s without making progress (elapsed: "
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.kind, copy.idle_timeout, copy.run_timeout) == ("idle", 0.05, None)


@pytest.mark.parametrize("refresh_on", ["auto", "heartbeat"])
async def test_heartbeats_hold_off_the_idle_timeout(refresh_on: str) -> None:
    # LangGraph: test_arun_with_retry_idle_timeout_resets_on_runtime_heartbeat and
    # test_arun_with_retry_heartbeat_refresh_mode_accepts_heartbeat: beats every 0.02 s
    # against an idle timeout of 0.2 s, for longer than 0.2 s in all
    def make(side: str) -> Any:
        lib, timeout_policy, _, runtime = LIBS[side][:4]

        async def beating(state: X) -> X:
            for _ in range(15):
                await asyncio.sleep(0.02)
                runtime().heartbeat()
            return {"x": 1}

        policy = timeout_policy(idle_timeout=0.2, refresh_on=refresh_on)
        return one_node(lib, beating, timeout=policy)

    assert await both(make) == {"x": 1}


async def test_heartbeats_do_not_extend_the_run_timeout() -> None:
    # LangGraph: test_arun_with_retry_run_timeout_is_not_refreshed_by_heartbeat
    def make(side: str) -> Any:
        lib, timeout_policy, _, runtime = LIBS[side][:4]

        async def beating(state: X) -> X:
            while True:
                runtime().heartbeat()
                await asyncio.sleep(0.01)

        return one_node(lib, beating, timeout=timeout_policy(run_timeout=0.05, idle_timeout=1))

    assert await both(make) == ("run", 0.05, 0.05, 1.0)


@pytest.mark.parametrize("stream", [False, True])
async def test_what_a_node_streams_holds_off_the_idle_timeout(stream: bool) -> None:
    # LangGraph: test_arun_with_retry_idle_timeout_resets_on_runtime_stream_writer and
    # ..._resets_on_stream_event: the stream writer counts as progress under "auto",
    # whether the run is streamed or not
    def make(side: str) -> Any:
        lib, timeout_policy, _, _, writer = LIBS[side][:5]

        async def writing(state: X) -> X:
            for i in range(15):
                await asyncio.sleep(0.02)
                writer()(i)
            return {"x": 1}

        return one_node(lib, writing, timeout=timeout_policy(idle_timeout=0.2))

    assert await both(make, stream=stream) == {"x": 1}


@pytest.mark.parametrize("stream", [False, True])
async def test_under_refresh_on_heartbeat_streaming_is_not_progress(stream: bool) -> None:
    # LangGraph: test_arun_with_retry_heartbeat_refresh_mode_ignores_stream_events
    def make(side: str) -> Any:
        lib, timeout_policy, _, _, writer = LIBS[side][:5]

        async def writing(state: X) -> X:
            while True:
                await asyncio.sleep(0.01)
                writer()("tick")

        policy = timeout_policy(idle_timeout=0.05, refresh_on="heartbeat")
        return one_node(lib, writing, timeout=policy)

    assert await both(make, stream=stream) == ("idle", 0.05, None, 0.05)


@pytest.mark.parametrize("refresh_on", ["auto", "heartbeat"])
async def test_ctx_emit_is_progress_under_auto_only(refresh_on: str) -> None:
    # ours: a node's NodeContext.emit is its stream writer
    async def emitting(state: X, ctx: NodeContext) -> X:
        for i in range(15):
            await asyncio.sleep(0.02)
            ctx.emit(i)
        return {"x": 1}

    idle = 0.2 if refresh_on == "auto" else 0.05
    policy = TimeoutPolicy(idle_timeout=idle, refresh_on=refresh_on)  # type: ignore[arg-type]
    result = await one_node(OURS, emitting, timeout=policy).run({"x": 0})
    if refresh_on == "auto":
        assert result.raise_for_status().state == {"x": 1}
    else:
        assert isinstance(result.error, NodeTimeoutError) and result.error.kind == "idle"


@pytest.mark.parametrize("refresh_on", ["auto", "heartbeat"])
async def test_a_task_call_is_progress_under_auto_only(refresh_on: str) -> None:
    # LangGraph: its guarded call (a child task scheduled) is progress under "auto"
    @task
    async def step(i: int) -> int:
        return i

    async def calling(state: X) -> X:
        total = 0
        for i in range(15):
            await asyncio.sleep(0.02)
            total += await step(i)
        return {"x": total}

    idle = 0.2 if refresh_on == "auto" else 0.05
    policy = TimeoutPolicy(idle_timeout=idle, refresh_on=refresh_on)  # type: ignore[arg-type]
    result = await one_node(OURS, calling, timeout=policy).run({"x": 0})
    if refresh_on == "auto":
        assert result.raise_for_status().state == {"x": sum(range(15))}
    else:
        assert isinstance(result.error, NodeTimeoutError) and result.error.kind == "idle"


async def test_a_sync_node_heartbeats_from_its_thread() -> None:
    # ours: a sync node with a timeout runs on a thread of its own (LangGraph refuses it);
    # its heartbeats hold off the idle timeout, and one that stops beating times out
    def beating(state: X) -> X:
        for _ in range(15):
            time.sleep(0.02)
            get_runtime().heartbeat()
        return {"x": 1}

    def stuck(state: X) -> X:
        time.sleep(0.5)
        return {"x": 2}

    policy = TimeoutPolicy(idle_timeout=0.2, refresh_on="heartbeat")
    assert (await one_node(OURS, beating, timeout=policy).run({"x": 0})).state == {"x": 1}
    short = TimeoutPolicy(idle_timeout=0.05)
    result = await one_node(OURS, stuck, timeout=short).run({"x": 0})
    assert isinstance(result.error, NodeTimeoutError) and result.error.kind == "idle"


async def test_a_runtime_parameter_heartbeats_too() -> None:
    async def beating(state: X, runtime: Any) -> X:
        for _ in range(15):
            await asyncio.sleep(0.02)
            runtime.heartbeat()
        return {"x": 1}

    policy = TimeoutPolicy(idle_timeout=0.2, refresh_on="heartbeat")
    assert (await one_node(OURS, beating, timeout=policy).run({"x": 0})).state == {"x": 1}


def test_a_heartbeat_outside_an_idle_timed_attempt_does_nothing() -> None:
    # LangGraph: test_runtime_heartbeat_outside_idle_attempt_is_no_op
    def node(state: X) -> X:
        get_runtime().heartbeat()
        return {"x": 1}

    assert one_node(OURS, node).run_sync({"x": 0}).state == {"x": 1}
    assert one_node(OURS, node, timeout=1).run_sync({"x": 0}).state == {"x": 1}
    lg_runtime.DEFAULT_RUNTIME.heartbeat()


async def test_a_timed_out_idle_attempt_is_retried() -> None:
    # LangGraph: test_state_graph_add_node_timeout_composes_with_retry
    attempts: dict[str, list[int]] = {"ours": [], "theirs": []}

    def make(side: str) -> Any:
        lib, timeout_policy, retry_policy, *_, error = LIBS[side]
        seen = attempts[side]

        async def flaky(state: X) -> X:
            seen.append(len(seen))
            if len(seen) < 2:
                await asyncio.sleep(2)
            return {"x": state["x"] + 1}

        retry = retry_policy(max_attempts=3, initial_interval=0.0, jitter=False, retry_on=error)
        return one_node(lib, flaky, timeout=timeout_policy(idle_timeout=0.1), retry_policy=retry)

    assert await both(make) == {"x": 1}
    assert attempts["ours"] == attempts["theirs"] == [0, 1]


async def test_a_timeout_error_the_node_raises_is_its_own() -> None:
    # LangGraph: test_arun_with_retry_does_not_swallow_proc_asyncio_timeout: not retried as
    # a NodeTimeoutError would be
    calls: list[int] = []

    async def inner(state: X) -> X:
        calls.append(1)
        raise TimeoutError("inner")

    retry = RetryPolicy(max_attempts=2, retry_on=NodeTimeoutError)
    graph = one_node(OURS, inner, timeout=TimeoutPolicy(idle_timeout=1.0), retry_policy=retry)
    result = await graph.run({"x": 0})
    assert type(result.error) is TimeoutError and str(result.error) == "inner"
    assert calls == [1]


async def test_set_node_defaults_takes_a_timeout_policy() -> None:
    # LangGraph: test_set_node_defaults_timeout and test_set_node_defaults_timeout_per_node_wins
    def make(side: str, per_node: bool) -> Any:
        lib, timeout_policy = LIBS[side][:2]

        async def node(state: X) -> X:
            await asyncio.sleep(0.3 if per_node else 2)
            return {"x": 1}

        own = {"timeout": timeout_policy(run_timeout=5.0)} if per_node else {}
        return (
            lib.StateGraph(X)
            .set_node_defaults(timeout=timeout_policy(idle_timeout=0.05))
            .add_node("n", node, **own)
            .add_edge(lib.START, "n")
            .compile()
        )

    assert await both(lambda side: make(side, False)) == ("idle", 0.05, None, 0.05)
    assert await both(lambda side: make(side, True)) == {"x": 1}
    # a number is still the run timeout
    graph = OURS.StateGraph(X).set_node_defaults(timeout=0.5)
    assert graph.node_defaults["timeout"] == TimeoutPolicy(run_timeout=0.5)


async def test_langgraphs_policy_runs_on_our_graph() -> None:
    async def slow(state: X) -> X:
        await asyncio.sleep(2)
        return {"x": 1}

    policy = lg_types.TimeoutPolicy(idle_timeout=0.05)
    result = await one_node(OURS, slow, timeout=policy).run({"x": 0})
    assert isinstance(result.error, NodeTimeoutError)
    assert (result.error.kind, result.error.idle_timeout) == ("idle", 0.05)


async def test_get_runtime_in_a_timed_node_looks_for_its_idle_clock_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # it looked three times (whether there is one, the writer's, the heartbeat's): each a
    # context variable read and a walk of the scope
    from tinyagents.graph import graph_runtime

    looks: list[object] = []
    real = graph_runtime.progress_here

    def counted() -> Any:
        looks.append(None)
        return real()

    monkeypatch.setattr(graph_runtime, "progress_here", counted)
    beats: list[bool] = []

    class S(TypedDict, total=False):
        x: int

    def node(state: S) -> S:
        runtime = get_runtime()
        beats.append(runtime.heartbeat is not None)
        runtime.heartbeat()
        runtime.stream_writer("moved")
        return {"x": 1}

    graph = (
        OURS.StateGraph(S)
        .add_node("n", node, timeout=TimeoutPolicy(idle_timeout=30.0))
        .add_edge(OURS.START, "n")
        .add_edge("n", OURS.END)
        .compile()
    )
    assert (await graph.run({})).state == {"x": 1}
    assert len(looks) == 1 and beats == [True]
