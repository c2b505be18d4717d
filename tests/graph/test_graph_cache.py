"""Node caching (``graph/caching.py``, ``tinyagents.store.cache``): what LangGraph's ports
(``test_langgraph_ports_cache.py``) do not show: bad input, ttl expiry on the injectable
clock, a hit in a checkpointed thread, retries, and a SQLite cache file reopened by a second
graph and by a second process."""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyagents import Runtime, _clock
from tinyagents.errors import (
    ArgumentError,
    GraphValidationError,
    InvalidUpdateError,
    StoreError,
    SyncInAsyncError,
)
from tinyagents.graph import (
    START,
    CachePolicy,
    Command,
    RetryPolicy,
    Send,
    StateGraph,
    entrypoint,
    task,
)
from tinyagents.graph.caching import default_cache_key
from tinyagents.store.cache import BaseCache, InMemoryCache, SqliteCache
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import FakeClock


class S(TypedDict, total=False):
    x: int
    log: Annotated[list[str], operator.add]
    obj: Any


def counted(calls: list[int], **policy: Any) -> StateGraph:
    """START → a (cached): logs ``a<x>``, and notes each call in ``calls``."""

    def a(state: Any) -> dict[str, Any]:
        calls.append(state["x"])
        return {"log": [f"a{state['x']}"]}

    return StateGraph(S).add_node("a", a, cache_policy=CachePolicy(**policy)).add_edge(START, "a")


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("ttl", [-1, 0, float("nan"), float("inf"), "10", True])
def test_a_bad_ttl_is_an_argument_error(ttl: Any) -> None:
    with pytest.raises(ArgumentError, match="ttl"):
        CachePolicy(ttl=ttl)


def test_a_key_func_that_is_no_function_is_an_argument_error() -> None:
    with pytest.raises(ArgumentError, match="key_func"):
        CachePolicy(key_func="state")  # type: ignore[arg-type]


def test_a_cache_policy_that_is_none_and_a_cache_of_the_wrong_type_are_refused() -> None:
    with pytest.raises(GraphValidationError, match="CachePolicy"):
        StateGraph(S).add_node("a", lambda s: None, cache_policy={"ttl": 3})  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match="BaseCache"):
        counted([]).compile(cache={})  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match="BaseCache"):
        entrypoint(cache="memory")  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match="CachePolicy"):
        task(cache_policy=60)(lambda x: x)


async def test_clear_cache_without_a_cache_or_of_an_unknown_node_clears_nothing() -> None:
    calls: list[int] = []
    with pytest.raises(GraphValidationError, match="no cache"):
        await counted(calls).compile().aclear_cache()
    graph = counted(calls).compile(cache=InMemoryCache())
    await graph.run({"x": 1})
    with pytest.raises(GraphValidationError, match="no node") as caught:
        await graph.aclear_cache(["a", "nope"])
    assert caught.value.nodes == ["nope"]
    await graph.run({"x": 1})
    assert calls == [1]  # "a" was not cleared either


async def test_sync_clear_cache_inside_an_event_loop_is_refused() -> None:
    graph = counted([]).compile(cache=InMemoryCache())
    with pytest.raises(SyncInAsyncError):
        graph.clear_cache()


async def test_a_key_func_returning_no_text_fails_the_node() -> None:
    calls: list[int] = []
    graph = counted(calls, key_func=lambda state: state["x"]).compile(cache=InMemoryCache())
    result = await graph.run({"x": 1})
    assert result.status == "failed"
    assert isinstance(result.error, ArgumentError)
    assert "key_func returned int" in str(result.error)
    assert calls == []


async def test_a_result_no_cache_can_hold_fails_the_node_and_stores_nothing() -> None:
    cache = InMemoryCache()

    def a(state: Any) -> dict[str, Any]:
        return {"obj": object()}

    graph = StateGraph(S).add_node("a", a, cache_policy=CachePolicy()).add_edge(START, "a")
    result = await graph.compile(cache=cache).run({"x": 1})
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "cannot be cached" in str(result.error)
    assert cache._entries == {}


async def test_cache_keys_and_namespaces_are_checked() -> None:
    cache = InMemoryCache()
    with pytest.raises(ArgumentError):
        await cache.get([("ns", "k")])  # type: ignore[list-item]
    with pytest.raises(ArgumentError):
        await cache.set({(("ns",), "k"): (1, -5)})
    with pytest.raises(ArgumentError):
        await cache.clear(["ns"])  # type: ignore[list-item]
    with pytest.raises(StoreError):
        SqliteCache(42)  # type: ignore[arg-type]


# -- semantics ---------------------------------------------------------------------------


async def test_an_entry_expires_after_its_ttl() -> None:
    clock = FakeClock()
    calls: list[int] = []
    graph = counted(calls, ttl=10).compile(cache=InMemoryCache())
    with _clock.use_clock(clock):
        await graph.run({"x": 1})
        clock.advance(9)
        await graph.run({"x": 1})
        assert calls == [1]
        clock.advance(1)
        await graph.run({"x": 1})
        assert calls == [1, 1]


async def test_a_hit_in_a_checkpointed_thread_is_saved_as_the_node_result() -> None:
    calls: list[int] = []
    graph = counted(calls).compile(checkpointer=MemoryCheckpointer(), cache=InMemoryCache())
    await graph.run({"x": 1}, thread_id="t1")
    await graph.run({"x": 1}, thread_id="t2")
    assert calls == [1]
    state = await graph.get_state("t2")
    assert state.values == {"x": 1, "log": ["a1"]}
    # the thread goes on from there: a new input adds to its log, a new key runs the node
    await graph.run({"x": 2}, thread_id="t2")
    assert (await graph.get_state("t2")).values["log"] == ["a1", "a2"]
    assert calls == [1, 2]


async def test_a_retried_node_is_cached_once_it_succeeds() -> None:
    attempts: list[int] = []

    def flaky(state: Any) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("once")
        return {"log": ["ok"]}

    graph = (
        StateGraph(S)
        .add_node(
            "flaky",
            flaky,
            retry=RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False),
            cache_policy=CachePolicy(),
        )
        .add_edge(START, "flaky")
        .compile(cache=InMemoryCache())
    )
    assert (await graph.run({"x": 1})).state["log"] == ["ok"]
    assert (await graph.run({"x": 1})).state["log"] == ["ok"]
    assert len(attempts) == 2


async def test_a_task_in_a_graph_node_uses_that_graph_cache() -> None:
    calls: list[int] = []

    @task(cache_policy=CachePolicy())
    async def double(v: int) -> int:
        calls.append(v)
        return v * 2

    async def node(state: Any) -> dict[str, Any]:
        return {"log": [str(await double(state["x"]))]}

    cache = InMemoryCache()
    graph = StateGraph(S).add_node("n", node).add_edge(START, "n").compile(cache=cache)
    for _ in range(2):
        assert (await graph.run({"x": 3})).state["log"] == ["6"]
    assert calls == [3]
    await double.aclear_cache(cache)
    await graph.run({"x": 3})
    assert calls == [3, 3]


async def test_a_graph_run_in_a_runtime_reuses_the_cache(rt: Runtime) -> None:
    """A runtime-managed run (its tasks in the run tree) takes a hit as a plain run does."""
    calls: list[int] = []
    graph = counted(calls).compile(checkpointer=MemoryCheckpointer(), cache=InMemoryCache())
    for thread in ("t1", "t2"):
        handle = await rt.start_graph(graph, {"x": 5}, thread_id=thread)
        result = await handle.result()
        assert result.status == "completed"
        assert result.output == {"x": 5, "log": ["a5"]}
    assert calls == [5]


def test_a_task_cache_is_cleared_without_an_event_loop() -> None:
    """``Task.clear_cache(cache)``, LangGraph's sync form, with ``invoke``."""
    calls: list[int] = []
    cache = InMemoryCache()

    @task(cache_policy=CachePolicy())
    def double(v: int) -> int:
        calls.append(v)
        return v * 2

    @entrypoint(checkpointer=MemoryCheckpointer(), cache=cache)
    def flow(v: int) -> int:
        return double(v).result()

    for thread in ("1", "2"):
        assert flow.invoke(2, {"configurable": {"thread_id": thread}}) == 4
    assert calls == [2]
    double.clear_cache(cache)
    assert flow.invoke(2, {"configurable": {"thread_id": "3"}}) == 4
    assert calls == [2, 2]
    with pytest.raises(GraphValidationError, match="takes the cache"):
        double.clear_cache(None)  # type: ignore[arg-type]


# -- the SQLite file ---------------------------------------------------------------------


async def test_a_sqlite_cache_file_serves_a_second_graph_that_reopens_it(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    first_calls: list[int] = []
    async with SqliteCache(path) as cache:
        await counted(first_calls, ttl=60).compile(cache=cache).run({"x": 1})
    assert first_calls == [1]

    second_calls: list[int] = []
    async with SqliteCache(path) as cache:
        second = counted(second_calls, ttl=60).compile(cache=cache)
        assert (await second.run({"x": 1})).state == {"x": 1, "log": ["a1"]}
        assert second_calls == []  # the first graph's entry
        await second.aclear_cache(["a"])
        await second.run({"x": 1})
        assert second_calls == [1]


_PROCESS = """
import asyncio, json, sys
from tinyagents.graph import START, CachePolicy, StateGraph
from tinyagents.store.cache import SqliteCache
from typing import TypedDict

class S(TypedDict, total=False):
    x: int
    y: int

calls = []

def a(state):
    calls.append(1)
    return {"y": state["x"] * 10}

async def main():
    async with SqliteCache(sys.argv[1]) as cache:
        graph = StateGraph(S).add_node("a", a, cache_policy=CachePolicy())
        result = await graph.add_edge(START, "a").compile(cache=cache).run({"x": 4})
    print(json.dumps({"state": result.state, "calls": len(calls)}))

asyncio.run(main())
"""


def test_a_sqlite_cache_file_serves_another_process(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(_PROCESS))
    path = str(tmp_path / "shared.db")
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, str(script), path],
                check=True,
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout
        )
        for _ in range(2)
    ]
    assert runs == [
        {"state": {"x": 4, "y": 40}, "calls": 1},
        {"state": {"x": 4, "y": 40}, "calls": 0},
    ]


async def test_a_file_that_is_no_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "not.db"
    path.write_bytes(b"this is no SQLite file, not at all" * 100)
    cache = SqliteCache(path)
    with pytest.raises(StoreError, match="cannot open SQLite cache"):
        await cache.get([(("ns",), "k")])
    assert path.read_bytes().startswith(b"this is no SQLite file")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_both_caches_keep_namespaces_apart_and_hand_out_copies(
    kind: str, tmp_path: Path
) -> None:
    cache: BaseCache = InMemoryCache() if kind == "memory" else SqliteCache(tmp_path / "c.db")
    async with cache:
        value = {"writes": [["log", ["a"]]]}
        await cache.set({(("w", "f", "a"), "k"): (value, None), (("w", "f", "b"), "k"): (2, 5)})
        got = await cache.get([(("w", "f", "a"), "k"), (("w", "f", "b"), "k")])
        assert got == {(("w", "f", "a"), "k"): value, (("w", "f", "b"), "k"): 2}
        got[(("w", "f", "a"), "k")]["writes"].clear()
        assert (await cache.get([(("w", "f", "a"), "k")]))[(("w", "f", "a"), "k")] == value
        await cache.clear([("w", "f", "a")])
        assert await cache.get([(("w", "f", "a"), "k"), (("w", "f", "b"), "k")]) == {
            (("w", "f", "b"), "k"): 2
        }
        await cache.clear()
        assert await cache.get([(("w", "f", "b"), "k")]) == {}


# -- the default key ---------------------------------------------------------------------

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=4), _values, max_size=5))
def test_the_default_key_of_a_mapping_does_not_depend_on_its_order(state: dict[str, Any]) -> None:
    reordered = dict(reversed(list(state.items())))
    assert default_cache_key(state) == default_cache_key(reordered)


@given(st.dictionaries(st.text(max_size=4), _values, min_size=1, max_size=5), st.data())
def test_the_default_key_tells_a_changed_value_apart(state: dict[str, Any], data: Any) -> None:
    key = data.draw(st.sampled_from(sorted(state)))
    changed = {**state, key: ["changed", state[key]]}
    assert default_cache_key(state) != default_cache_key(changed)


def test_the_default_key_of_a_set_is_the_same_in_every_process() -> None:
    """A set's order follows the hash seed: the key of a state holding one must not, or a
    SQLite cache read by another process would miss."""
    code = (
        "from tinyagents.graph.caching import default_cache_key; "
        "print(default_cache_key({'tags': {'alpha', 'beta', 'gamma', 'delta', 'eps'}}).hex())"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(keys) == 1


async def test_a_cached_entry_whose_send_no_longer_reads_is_a_miss() -> None:
    # a cache holding an entry whose Send's timeout no longer makes a TimeoutPolicy (a
    # backend's damaged value) failed the run with the StoreError a checkpoint's damaged row
    # is, where any other entry it cannot use is a miss: the node runs again
    calls: list[int] = []

    def a(state: Any) -> Command:
        calls.append(state["x"])
        return Command(update={"log": ["a"]}, goto=[Send("b", {}, timeout=5.0)])

    class Damaging(InMemoryCache):
        async def get(self, keys: Any) -> dict[Any, Any]:
            found = await super().get(keys)
            for value in found.values():
                for g in value.get("goto", []):
                    if isinstance(g, dict) and "timeout" in g:
                        g["timeout"] = "soon"
            return found

    graph = (
        StateGraph(S)
        .add_node("a", a, cache_policy=CachePolicy(), destinations=["b"])
        .add_node("b", lambda arg: {"log": ["b"]})
        .add_edge(START, "a")
        .compile(cache=Damaging())
    )
    assert (await graph.run({"x": 1})).state["log"] == ["a", "b"]
    second = await graph.run({"x": 1})
    assert second.status == "completed" and second.state["log"] == ["a", "b"]
    assert calls == [1, 1]
