"""Ports of LangGraph 1.2's ``StateGraph.set_node_defaults`` (``tests/test_retry.py``'s
``test_set_node_defaults_*``) and ``@entrypoint(cache_policy=...)``: the same program on
LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``; each test's
comment names the LangGraph test it follows. Then what ours adds: its errors, a sub-graph
(not inherited), the defaults reaching nodes added after the call, and the fast path.
"""

from __future__ import annotations

import asyncio
import operator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, func_of, lg_errors, lg_types

from tinyagents.errors import GraphValidationError, NodeTimeoutError
from tinyagents.graph import CachePolicy, RetryPolicy, StateGraph
from tinyagents.store.cache import InMemoryCache

lg_cache_memory = pytest.importorskip("langgraph.cache.memory")


class Foo(TypedDict, total=False):
    foo: str


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def retry(g: Any, attempts: int) -> Any:
    policy = lg_types.RetryPolicy if g is THEIRS else RetryPolicy
    return policy(max_attempts=attempts, initial_interval=0.0, jitter=False, retry_on=ValueError)


def flaky_graph(g: Any, calls: list[int], fails: int, own: int | None) -> Any:
    """START -> flaky, which fails ``fails`` times; defaults of 3 attempts (``own``: the
    node's own policy's attempts)."""

    def flaky(state: Foo) -> Foo:
        calls.append(1)
        if len(calls) <= fails:
            raise ValueError("not yet")
        return {"foo": "ok"}

    kwargs = {} if own is None else {"retry_policy": retry(g, own)}
    return (
        g.StateGraph(Foo)
        .set_node_defaults(retry_policy=retry(g, 3))
        .add_node("flaky", flaky, **kwargs)
        .add_edge(g.START, "flaky")
        .compile()
    )


async def run_both(ours: Any, theirs: Any, input: Any) -> tuple[Any, Any]:
    """(our result's state or error type, LangGraph's)."""
    result = await ours.run(input)
    got = result.state if result.status == "completed" else type(result.error).__name__
    try:
        want = await theirs.ainvoke(input)
    except Exception as exc:
        want = type(exc).__name__
    return got, want


@pytest.mark.parametrize(
    ("fails", "own"), [(2, None), (3, None), (1, 2), (1, 1)], ids=["ok", "past", "own", "own-1"]
)
async def test_set_node_defaults_retry_policy(fails: int, own: int | None) -> None:
    # LangGraph: test_retry.py::test_set_node_defaults_retry_policy and
    # ::test_set_node_defaults_retry_policy_per_node_wins (the node's own policy wins)
    ours_calls: list[int] = []
    theirs_calls: list[int] = []
    got, want = await run_both(
        flaky_graph(OURS, ours_calls, fails, own),
        flaky_graph(THEIRS, theirs_calls, fails, own),
        {"foo": ""},
    )
    assert got == want
    assert ours_calls == theirs_calls
    assert (got, len(ours_calls)) == {
        (2, None): ({"foo": "ok"}, 3),
        (3, None): ("ValueError", 3),
        (1, 2): ({"foo": "ok"}, 2),
        (1, 1): ("ValueError", 1),
    }[fails, own]


def slow_graph(g: Any, default: Any, own: float | None = None) -> Any:
    async def slow(state: Foo) -> Foo:
        if own is None:
            await asyncio.Event().wait()  # never set: the node times out
        return {"foo": "done"}

    kwargs = {} if own is None else {"timeout": own}
    return (
        g.StateGraph(Foo)
        .set_node_defaults(timeout=default)
        .add_node("slow", slow, **kwargs)
        .add_edge(g.START, "slow")
        .compile()
    )


@pytest.mark.parametrize("default", [0.05, timedelta(milliseconds=50)], ids=["float", "timedelta"])
async def test_set_node_defaults_timeout(default: Any) -> None:
    # LangGraph: test_retry.py::test_set_node_defaults_timeout (a float or a timedelta here;
    # LangGraph's TimeoutPolicy is not offered)
    with pytest.raises(lg_errors.NodeTimeoutError):
        await slow_graph(THEIRS, default).ainvoke({"foo": ""})
    result = await slow_graph(OURS, default).run({"foo": ""})
    assert result.status == "failed"
    assert isinstance(result.error, NodeTimeoutError)
    assert result.error.node == "slow" and result.error.run_timeout == 0.05


async def test_set_node_defaults_timeout_per_node_wins() -> None:
    # LangGraph: test_retry.py::test_set_node_defaults_timeout_per_node_wins
    got, want = await run_both(slow_graph(OURS, 0.05, 30), slow_graph(THEIRS, 0.05, 30), {})
    assert got == want == {"foo": "done"}


def cached_graph(g: Any, calls: list[str], own: bool) -> Any:
    policy = CachePolicy if g is OURS else lg_types.CachePolicy

    def a(state: Log) -> Log:
        calls.append("a")
        return {"log": ["a"]}

    def b(state: Log) -> Log:
        calls.append("b")
        return {"log": ["b"]}

    # a's own key_func gives every input one key; b keys by the input (the default's)
    return (
        g.StateGraph(Log)
        .add_node("a", a, **({"cache_policy": policy(key_func=lambda s: "one")} if own else {}))
        .set_node_defaults(cache_policy=policy())
        .add_node("b", b)
        .add_edge(g.START, "a")
        .add_edge(g.START, "b")
        .compile(cache=InMemoryCache() if g is OURS else lg_cache_memory.InMemoryCache())
    )


@pytest.mark.parametrize("own", [False, True], ids=["defaults", "own-wins"])
async def test_set_node_defaults_cache_policy(own: bool) -> None:
    # LangGraph: state.py's set_node_defaults(cache_policy=...) (applied at compile to the
    # nodes without their own, those added before the call too)
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = cached_graph(OURS, ours_calls, own)
    theirs = cached_graph(THEIRS, theirs_calls, own)
    for log in (["x"], ["x"], ["y"]):
        got, want = await run_both(ours, theirs, {"log": log})
        assert got == want
    assert sorted(ours_calls) == sorted(theirs_calls)
    assert sorted(ours_calls) == (["a", "b", "b"] if own else ["a", "a", "b", "b"])


def cached_entrypoint(g: Any, calls: list[int], key_func: Any = None) -> Any:
    func = func_of(g)
    policy = CachePolicy if g is OURS else lg_types.CachePolicy
    cache = InMemoryCache() if g is OURS else lg_cache_memory.InMemoryCache()
    kw = {} if key_func is None else {"key_func": key_func}

    @func.entrypoint(cache=cache, cache_policy=policy(**kw))
    def double(n: int) -> int:
        calls.append(n)
        return n * 2

    return double


@pytest.mark.parametrize("keyed", [False, True], ids=["default-key", "key_func"])
async def test_entrypoint_cache_policy(keyed: bool) -> None:
    # LangGraph: func/__init__.py's entrypoint(cache_policy=...): the entrypoint's result is
    # cached by its input (key_func gets the input)
    key_func = (lambda n: str(n % 2)) if keyed else None
    ours_calls: list[int] = []
    theirs_calls: list[int] = []
    ours = cached_entrypoint(OURS, ours_calls, key_func)
    theirs = cached_entrypoint(THEIRS, theirs_calls, key_func)
    for n in (1, 1, 2, 3):
        assert await ours.ainvoke(n) == await theirs.ainvoke(n)
    assert ours_calls == theirs_calls == ([1, 2] if keyed else [1, 2, 3])


async def test_entrypoint_cache_policy_is_keyed_by_the_input_not_the_saved_state() -> None:
    # with a checkpointer the thread's ``previous`` changes between runs: still a hit
    from tinyagents.store.checkpoint import MemoryCheckpointer

    calls: list[int] = []
    cache = InMemoryCache()

    @OURS_FUNC.entrypoint(
        checkpointer=MemoryCheckpointer(), cache=cache, cache_policy=CachePolicy()
    )
    def count(n: int, previous: int | None = None) -> int:
        calls.append(n)
        return n + (previous or 0)

    assert await count.ainvoke(1, thread_id="t") == 1
    assert await count.ainvoke(1, thread_id="t") == 1  # the cached result, not 1 + 1
    assert calls == [1]

    @OURS_FUNC.entrypoint(cache=cache, cache_policy=CachePolicy())
    def other(n: int) -> int:  # another function: a namespace of its own in one cache
        calls.append(-n)
        return -n

    assert await other.ainvoke(1) == -1
    assert calls == [1, -1]
    await count.aclear_cache()
    assert await count.ainvoke(1, thread_id="u") == 1
    assert calls == [1, -1, 1]


OURS_FUNC = func_of(OURS)


def test_set_node_defaults_refuses_values_of_the_wrong_kind() -> None:
    graph = StateGraph(Foo)
    for kwargs in (
        {"retry_policy": "thrice"},
        {"cache_policy": 300},
        {"timeout": 0},
        {"timeout": "5"},
        {"timeout": timedelta(0)},
    ):
        with pytest.raises(GraphValidationError, match=r"^set_node_defaults: "):
            graph.set_node_defaults(**kwargs)
    assert graph.node_defaults == {}  # nothing taken
    with pytest.raises(GraphValidationError, match="entrypoint"):
        OURS_FUNC.entrypoint(cache_policy=300)  # type: ignore[arg-type]


async def test_set_node_defaults_are_not_inherited_by_a_sub_graph() -> None:
    # LangGraph's docstring: "Policies set here are not inherited by subgraphs"
    calls: list[int] = []

    def flaky(state: Foo) -> Foo:
        calls.append(1)
        if len(calls) < 2:
            raise ValueError("once")
        return {"foo": "ok"}

    inner = StateGraph(Foo).add_node("flaky", flaky).add_edge("__start__", "flaky").compile()
    outer = (
        StateGraph(Foo)
        .set_node_defaults(retry_policy=retry(OURS, 1))
        .add_node("inner", inner)
        .add_edge("__start__", "inner")
        .compile()
    )
    result = await outer.run({"foo": ""})
    assert result.status == "failed" and calls == [1]  # the outer node's one attempt
    with_retry = (
        StateGraph(Foo)
        .set_node_defaults(retry_policy=retry(OURS, 2))
        .add_node("inner", inner)
        .add_edge("__start__", "inner")
        .compile()
    )
    calls.clear()
    assert (await with_retry.run({"foo": ""})).state == {"foo": "ok"}  # the sub-graph node retried
    assert calls == [1, 1]


def test_a_plain_node_stays_on_the_fast_path_without_retry_or_timeout_defaults() -> None:
    def node(state: Foo) -> Foo:
        return {}

    def build(**defaults: Any) -> StateGraph:
        graph = StateGraph(Foo).set_node_defaults(**defaults).add_node("n", node)
        return graph.add_edge("__start__", "n")

    plain = build().compile().nodes["n"]
    assert plain.plain is True
    assert build(cache_policy=CachePolicy()).compile().nodes["n"].plain is True  # no cache
    retried = build(retry_policy=RetryPolicy())
    compiled = retried.compile()
    assert compiled.nodes["n"].plain is False
    assert compiled.nodes["n"].retry == (retried.node_defaults["retry"][0],)
    assert retried.nodes["n"].retry == ()  # the builder's own spec is left as it was
