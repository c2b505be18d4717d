"""A hostile or careless user's eleventh round: the graph long-term store given a TTL past
any calendar or a value nested past any parser, node caches given what JSON cannot hold,
``agent.override`` left out of order or across threads, a graph's run context read outside
a run.

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Agent
from tinyagents.errors import ArgumentError, ConfigurationError, GraphError, StoreError
from tinyagents.graph import (
    START,
    CachePolicy,
    Command,
    GraphRuntime,
    StateGraph,
    get_runtime,
    get_stream_writer,
    interrupt,
)
from tinyagents.harness import FunctionToolset
from tinyagents.store.cache import InMemoryCache, SqliteCache
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.store.longterm import (
    GetOp,
    GraphStore,
    MemoryGraphStore,
    PostgresGraphStore,
    PutOp,
    SqliteGraphStore,
)
from tinyagents.testkit import ScriptedModel

# -- the graph long-term store ----------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def graph_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    store: GraphStore
    if request.param == "memory":
        store = MemoryGraphStore()
    elif request.param == "sqlite":
        store = SqliteGraphStore(tmp_path / "g.db")
    else:
        store = PostgresGraphStore(postgres_dsn(), schema=pg_schema())
    async with store:
        yield store
    if request.param == "postgres":
        await drop_pg_schemas()


@pytest.mark.parametrize("ttl", [1e300, 10**12, 2e9])
async def test_a_ttl_past_any_calendar_is_refused_before_anything_is_written(
    graph_store: GraphStore, ttl: float
) -> None:
    """Found: ``aput(..., ttl=1e300)`` (minutes) passed the check (a positive finite number)
    and then broke in the backend with Python's bare ``OverflowError`` ("Python int too
    large to convert to C int"): no date is that far. In a batch, the puts before it had
    already been applied. Now an ``ArgumentError`` naming the largest TTL, raised with the
    other checks, before any op runs."""
    with pytest.raises(ArgumentError, match=r"ttl is at most 1000000000 minutes"):
        await graph_store.aput(("u",), "k", {"a": 1}, ttl=ttl)
    with pytest.raises(ArgumentError, match=r"ttl is at most"):
        await graph_store.abatch(
            [PutOp(("u",), "first", {"a": 1}), PutOp(("u",), "k", {}, ttl=ttl)]
        )
    assert await graph_store.asearch(("u",)) == []
    await graph_store.aput(("u",), "k", {"a": 1}, ttl=10**9)  # the largest is taken
    assert (await graph_store.aget(("u",), "k")) is not None


def test_a_default_ttl_past_any_calendar_is_refused_when_the_store_is_made(
    tmp_path: Path,
) -> None:
    """Found with the above: ``ttl={"default_ttl": 1e300}`` was taken, and every later put
    that named no TTL of its own failed with ``OverflowError``."""
    with pytest.raises(ArgumentError, match=r"ttl is at most"):
        MemoryGraphStore(ttl={"default_ttl": 1e300})
    with pytest.raises(ArgumentError, match=r"ttl is at most"):
        SqliteGraphStore(tmp_path / "g.db", ttl={"default_ttl": 1e300})


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_a_value_nested_past_the_recursion_limit_is_refused_and_nothing_is_stored(
    graph_store: GraphStore, default_recursion_limit: None
) -> None:
    """Found: a value nested 5000 dicts deep broke the store's check with Python's bare
    ``RecursionError``. Now the ``ArgumentError`` of every value JSON cannot hold, saying
    it is nested too deep; the batch it was in stores nothing. A value nested 200 deep is
    kept as it was put."""
    with pytest.raises(ArgumentError, match=r"store's value .*nested too deep"):
        await graph_store.aput(("u",), "k", _nested(5000))
    with pytest.raises(ArgumentError, match=r"nested too deep"):
        await graph_store.abatch(
            [PutOp(("u",), "first", {"a": 1}), PutOp(("u",), "k", _nested(5000))]
        )
    assert await graph_store.asearch(("u",)) == []
    await graph_store.aput(("u",), "k", _nested(200))
    item = await graph_store.aget(("u",), "k")
    assert item is not None and item.value == _nested(200)


async def test_a_search_filter_nested_past_the_recursion_limit_is_refused(
    graph_store: GraphStore, default_recursion_limit: None
) -> None:
    """Found: ``asearch(ns, filter=...)`` with a filter of nested fields 5000 deep broke the
    filter's check with Python's bare ``RecursionError``. Now an ``ArgumentError`` saying so;
    a nested filter a store can follow still finds its item."""
    await graph_store.aput(("u",), "k", _nested(3))
    with pytest.raises(ArgumentError, match=r"filter is nested too deep"):
        await graph_store.asearch(("u",), filter=_nested(5000))
    found = await graph_store.asearch(("u",), filter=_nested(3))
    assert [item.key for item in found] == ["k"]


@pytest.mark.parametrize("flag", ["no", 0, "false"])
async def test_a_refresh_ttl_that_is_no_bool_is_refused(graph_store: GraphStore, flag: Any) -> None:
    """Found: ``aget(..., refresh_ttl="no")`` refreshed the item's TTL (the text read as
    true), as ``GetOp(ns, key, "no")`` did: a flag is ``True`` or ``False`` (round ten's rule
    for a handle's flags), and ``ttl={"refresh_on_read": ...}`` already said so."""
    await graph_store.aput(("u",), "k", {"a": 1})
    with pytest.raises(ArgumentError, match=r"refresh_ttl is True or False"):
        await graph_store.aget(("u",), "k", refresh_ttl=flag)
    with pytest.raises(ArgumentError, match=r"refresh_ttl is True or False"):
        await graph_store.asearch(("u",), refresh_ttl=flag)
    with pytest.raises(ArgumentError, match=r"refresh_ttl is True or False"):
        await graph_store.abatch([GetOp(("u",), "k", flag)])
    assert (await graph_store.aget(("u",), "k", refresh_ttl=False)) is not None


@pytest.mark.parametrize("path", [5, None, b"g.db", ["g.db"]], ids=repr)
def test_a_sqlite_graph_store_given_no_path_says_so(path: Any) -> None:
    """Found: ``SqliteGraphStore(5)`` was ``os.fspath``'s bare ``TypeError`` ("expected str,
    bytes or os.PathLike object"), where ``SqliteCache(5)`` is a ``StoreError`` naming what it
    takes. Now the store says so too."""
    with pytest.raises(StoreError, match=r"SqliteGraphStore takes a file path, got"):
        SqliteGraphStore(path)


async def test_a_file_that_is_no_database_is_refused_by_the_graph_store_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    """Held: a graph store on a file of another program's bytes is a ``StoreError`` naming
    the file, at every call, and the file keeps every byte."""
    path = tmp_path / "notes.db"
    path.write_bytes(b"not a database" * 100)
    store = SqliteGraphStore(path)
    with pytest.raises(StoreError, match=r"cannot open graph store .*notes.db.*not a database"):
        await store.aget(("u",), "k")
    with pytest.raises(StoreError, match=r"not a database"):
        await store.aput(("u",), "k", {"a": 1})
    await store.aclose()
    assert path.read_bytes() == b"not a database" * 100


# -- node caches ------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
async def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made = InMemoryCache() if request.param == "memory" else SqliteCache(tmp_path / "c.db")
    async with made:
        yield made


@pytest.mark.parametrize(
    "value", [object(), {"a": {1, 2}}, _nested(5000)], ids=["obj", "set", "deep"]
)
async def test_a_cache_value_json_cannot_hold_is_refused_and_nothing_is_stored(
    cache: Any, value: Any, default_recursion_limit: None
) -> None:
    """Found: ``cache.set({key: (object(), None)})`` (``InMemoryCache`` and ``SqliteCache``)
    was ``json``'s bare ``TypeError`` (a value nested too deep, a bare ``RecursionError``).
    A graph's own writes were checked before the cache saw them; a cache used directly, as
    LangGraph's is, was not. Now an ``ArgumentError``, and the pairs given with it are not
    stored either."""
    ns = ("writes", "n")
    with pytest.raises(ArgumentError, match=r"a cache value is JSON"):
        await cache.set({(ns, "ok"): ({"a": 1}, None), (ns, "bad"): (value, None)})
    assert await cache.get([(ns, "ok"), (ns, "bad")]) == {}


class _Count(TypedDict):
    x: int


async def test_a_key_func_that_raises_fails_the_node_and_caches_nothing() -> None:
    """Held: a ``CachePolicy`` whose ``key_func`` raises fails the run with that error (the
    user's own, as LangGraph raises it); the state is the input, and nothing is cached, so a
    later run with a working key runs the node."""
    calls: list[int] = []

    def inc(state: _Count) -> _Count:
        calls.append(state["x"])
        return {"x": state["x"] + 1}

    def broken(state: Any) -> str:
        raise LookupError("no key for you")

    cache = InMemoryCache()
    graph = (
        StateGraph(_Count)
        .add_node("inc", inc, cache_policy=CachePolicy(key_func=broken))
        .add_edge(START, "inc")
        .compile(cache=cache)
    )
    result = await graph.run({"x": 1})
    assert result.status == "failed" and isinstance(result.error, LookupError)
    assert result.state == {"x": 1} and calls == []
    assert cache._entries == {}  # nothing was stored


# -- the run context outside a run ------------------------------------------------------------


@pytest.mark.parametrize("read", [get_runtime, get_stream_writer], ids=lambda f: f.__name__)
def test_the_run_context_read_outside_a_run_is_a_graph_error(read: Callable[[], Any]) -> None:
    """Held: ``get_runtime()`` and ``get_stream_writer()`` outside a running node (here, and
    in a thread a node did not start) are a ``GraphError`` saying where they can be called,
    never a default that would let a node's writes go nowhere unnoticed."""
    with pytest.raises(GraphError, match=r"only be called inside a running graph node"):
        read()
    seen: list[BaseException] = []

    def in_thread() -> None:
        try:
            read()
        except BaseException as exc:
            seen.append(exc)

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    assert [type(exc) for exc in seen] == [GraphError]


# -- agent.override misuse --------------------------------------------------------------------


def _instructions_seen(agent: Agent) -> str | None:
    model = ScriptedModel(["done"])
    with agent.override(model=model):
        agent.run_sync("go")
    system = [m.content for m in model.requests[0].messages if m.role == "system"]
    return system[0] if system else None


def test_overrides_left_out_of_order_leave_none_behind() -> None:
    """Found: two overrides left out of order (the outer's block ended while the inner's
    was open, as two ``ExitStack``s or hand-driven ``__enter__``/``__exit__`` do) left the
    outer's override in effect for good: each restored what was there when it began, and
    the inner began inside the outer. Each override now takes out only its own values: while
    the inner is open it alone is in effect, and when both have ended nothing is."""
    agent = Agent("a", ScriptedModel(["x"]), instructions="BASE")
    outer = agent.override(instructions="OUTER", deps="outer deps")
    inner = agent.override(instructions="INNER")
    outer.__enter__()
    inner.__enter__()
    assert _instructions_seen(agent) == "INNER"
    outer.__exit__(None, None, None)
    assert _instructions_seen(agent) == "INNER"
    assert agent.deps_for_run("run deps") == "run deps"  # the outer's deps went with it
    inner.__exit__(None, None, None)
    assert _instructions_seen(agent) == "BASE"
    assert agent.deps_for_run("run deps") == "run deps"


def test_an_override_left_in_another_thread_says_so_and_can_still_be_left_where_it_began() -> None:
    """Found: an override entered in one thread and left in another was the bare
    ``ValueError`` of ``ContextVar.reset`` ("was created in a different Context"), and the
    override could then never be left: it stayed in effect in its own thread for good. Now an
    ``ArgumentError`` saying where to leave it, and it is still open there."""
    agent = Agent("a", ScriptedModel(["x"]), instructions="BASE")
    held = agent.override(instructions="HELD")
    held.__enter__()
    seen: list[BaseException] = []

    def leave() -> None:
        try:
            held.__exit__(None, None, None)
        except BaseException as exc:
            seen.append(exc)

    worker = threading.Thread(target=leave)
    worker.start()
    worker.join()
    assert [type(exc) for exc in seen] == [ArgumentError]
    assert "entered in another thread or task" in str(seen[0])
    assert _instructions_seen(agent) == "HELD"
    held.__exit__(None, None, None)
    assert _instructions_seen(agent) == "BASE"


async def test_an_override_left_in_another_task_says_so() -> None:
    """Found with the above: an override entered in one asyncio task and left in another
    (each task runs in a copy of the context) was the same bare ``ValueError``."""
    agent = Agent("a", ScriptedModel(["x"]))
    held = agent.override(deps="task deps")
    held.__enter__()

    async def leave() -> None:
        held.__exit__(None, None, None)

    with pytest.raises(ArgumentError, match="entered in another thread or task"):
        await asyncio.create_task(leave())
    assert agent.deps_for_run(None) == "task deps"
    held.__exit__(None, None, None)
    assert agent.deps_for_run(None) is None


def test_an_override_entered_twice_or_left_twice_says_so() -> None:
    """Found: entering one ``override(...)`` twice was contextlib's bare ``AttributeError``
    ("'_GeneratorContextManager' object has no attribute 'args'"), and leaving it a second
    time was silently nothing. Each is now an ``ArgumentError``; the override in effect is
    as it was."""
    agent = Agent("a", ScriptedModel(["x"]))
    once = agent.override(deps="once")
    with once:
        with pytest.raises(ArgumentError, match=r"override\(\.\.\.\) is entered once"):
            once.__enter__()
        assert agent.deps_for_run(None) == "once"
    assert agent.deps_for_run(None) is None
    with pytest.raises(ArgumentError, match=r"has already been left"):
        once.__exit__(None, None, None)
    with pytest.raises(ArgumentError, match=r"has not been entered"):
        agent.override(deps="never").__exit__(None, None, None)


# -- toolsets ---------------------------------------------------------------------------------


def _alpha() -> str:
    """Alpha."""
    return "a"


def _beta() -> str:
    """Beta."""
    return "b"


def test_renaming_one_tool_to_two_names_is_refused() -> None:
    """Found: ``renamed({"c": "_alpha", "d": "_alpha"})`` (``{new: old}``) offered the tool as
    ``d`` alone: the name ``c`` the caller asked for was dropped without a word (pydantic-ai's
    ``RenamedToolset`` drops it too), and a model told of ``c`` in the instructions would call
    a tool no one offers. A tool has one name: now a ``ConfigurationError`` naming both, when
    the toolset is made."""
    tools = FunctionToolset([_alpha, _beta])
    with pytest.raises(ConfigurationError, match=r"renamed\(\) gives tool '_alpha' two names"):
        tools.renamed({"c": "_alpha", "d": "_alpha"})
    with pytest.raises(ConfigurationError, match=r"renamed\(\) takes a dict of \{new name"):
        tools.renamed({"c": ["_alpha"]})
    assert sorted(tools.renamed({"c": "_alpha", "d": "_beta"}).get_tools()) == ["c", "d"]
    assert sorted(tools.renamed({"_alpha": "_beta", "_beta": "_alpha"}).get_tools()) == [
        "_alpha",
        "_beta",
    ]


def test_an_empty_prefix_is_refused() -> None:
    """Found: ``prefixed("")`` offered every tool as ``_<name>`` (the prefix's ``_`` with
    nothing before it), a prefix the caller surely did not mean. Now refused as a prefix
    holding a space is."""
    with pytest.raises(ConfigurationError, match=r"a toolset's prefix is .*got ''"):
        FunctionToolset([_alpha]).prefixed("")
    assert list(FunctionToolset([_alpha]).prefixed("p").get_tools()) == ["p__alpha"]


def test_a_toolset_tool_clashing_with_an_agent_tool_names_both_and_the_fix() -> None:
    """Held: a toolset (renamed onto a name the agent's ``tools=`` has) is refused when the
    agent is made, and a run's ``toolsets=`` clashing with the agent's tools when the run
    starts, naming the tool and how to rename it; the agent's own tools are as they were."""
    agent_tools = [_alpha]
    clash = FunctionToolset([_beta]).renamed({"_alpha": "_beta"})
    with pytest.raises(ConfigurationError, match=r"conflicts with existing tool .*'_alpha'"):
        Agent("a", ScriptedModel(["x"]), tools=agent_tools, toolsets=[clash])
    agent = Agent("a", ScriptedModel(["x"]), tools=agent_tools)
    with pytest.raises(ConfigurationError, match=r"from the agent: '_alpha'.*PrefixedToolset"):
        agent.run_sync("go", toolsets=[FunctionToolset([_alpha])])
    assert list(agent.tools) == ["_alpha"]


# -- a graph's run context at a resume --------------------------------------------------------


@dataclass
class _Caller:
    user: str


class _Asked(TypedDict, total=False):
    x: int


def _ask(state: _Asked, runtime: GraphRuntime[_Caller]) -> _Asked:
    answer = interrupt("go on?")
    return {"x": len(runtime.context.user) + len(answer)}


async def test_a_resume_with_a_context_that_does_not_fit_changes_nothing() -> None:
    """Held: a resume given a ``context`` its graph's ``context_schema`` refuses is an
    ``ArgumentError`` before anything runs: the thread's checkpoint and its pending question
    are as they were, and the same resume with a fitting context answers it."""
    graph = (
        StateGraph(_Asked, context_schema=_Caller)
        .add_node("ask", _ask)
        .add_edge(START, "ask")
        .compile(checkpointer=MemoryCheckpointer())
    )
    asked = await graph.run({"x": 1}, thread_id="t", context=_Caller("ann"))
    (question,) = asked.interrupts
    before = await graph.get_state("t")
    with pytest.raises(ArgumentError, match=r"context does not fit context_schema _Caller"):
        await graph.run(Command(resume={question.id: "yes"}), thread_id="t", context={"who": 1})
    after = await graph.get_state("t")
    assert after.checkpoint_id == before.checkpoint_id
    assert [i.id for i in after.interrupts] == [question.id]
    done = await graph.run(
        Command(resume={question.id: "yes"}), thread_id="t", context=_Caller("ann")
    )
    assert (done.status, done.state) == ("completed", {"x": 6})


async def test_a_resume_whose_node_fails_keeps_its_answer() -> None:
    """Held: a resume run without its context (it is not saved with the checkpoints, as in
    LangGraph) fails in the node that reads it; the answer it carried is kept with the
    thread, so continuing with the context finishes the node with that answer, and the
    question is not asked again."""
    graph = (
        StateGraph(_Asked, context_schema=_Caller)
        .add_node("ask", _ask)
        .add_edge(START, "ask")
        .compile(checkpointer=MemoryCheckpointer())
    )
    (question,) = (await graph.run({"x": 1}, thread_id="t", context=_Caller("ann"))).interrupts
    failed = await graph.run(Command(resume={question.id: "yes"}), thread_id="t")
    assert failed.status == "failed" and isinstance(failed.error, AttributeError)
    done = await graph.run(None, thread_id="t", context=_Caller("ann"))
    assert (done.status, done.state, done.interrupts) == ("completed", {"x": 6}, [])


def _unpicklable_inputs() -> list[Any]:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    return [threading.Lock(), lambda: 1, deep]


@pytest.mark.parametrize("value", _unpicklable_inputs(), ids=["lock", "lambda", "deep"])
async def test_an_input_the_default_cache_key_cannot_pickle_says_to_give_a_key_func(
    value: Any,
) -> None:
    """Found: a cached node (``CachePolicy()``, its default key the pickled input) whose
    input held a lock, a local function, or a list nested 100,000 deep failed its run with
    pickle's bare ``TypeError`` / ``AttributeError`` / ``RecursionError`` ("cannot pickle
    '_thread.lock' object"), naming neither the node nor the cache. Now an
    ``ArgumentError`` naming the node and saying to give the policy a ``key_func`` (pickle's
    error its cause); the node did not run and nothing was cached."""
    calls: list[Any] = []

    def node(state: dict[str, Any]) -> dict[str, Any]:
        calls.append(state)
        return {"x": 1}

    class Held(TypedDict):
        x: Any

    cache = InMemoryCache()
    graph = (
        StateGraph(Held)
        .add_node("n", node, cache_policy=CachePolicy())
        .add_edge(START, "n")
        .compile(cache=cache)
    )
    result = await graph.run({"x": value})
    assert result.status == "failed"
    assert isinstance(result.error, ArgumentError), repr(result.error)
    assert "node 'n'" in str(result.error) and "key_func" in str(result.error)
    assert calls == [] and cache._entries == {}
    keyed = (
        StateGraph(Held)
        .add_node("n", node, cache_policy=CachePolicy(key_func=lambda state: "one key"))
        .add_edge(START, "n")
        .compile(cache=cache)
    )
    assert (await keyed.run({"x": value})).status == "completed"


async def test_a_sqlite_cache_used_after_aclose_says_so_and_opens_nothing(tmp_path: Path) -> None:
    """Found: a ``SqliteCache`` used after ``aclose()`` (a graph compiled with it, run after
    its ``async with`` block ended) opened a new connection that nothing would close: a
    closed cache that went on as an open one. Now a ``StoreError`` saying to open a new one,
    as a closed ``SqliteGraphStore`` says; the file keeps what was stored."""
    cache = SqliteCache(tmp_path / "c.db")
    ns = ("writes", "n")
    await cache.set({(ns, "k"): ({"a": 1}, None)})
    await cache.aclose()
    await cache.aclose()  # twice is fine
    uses: list[Callable[[], Any]] = [
        lambda: cache.get([(ns, "k")]),
        lambda: cache.set({(ns, "k"): ({"a": 2}, None)}),
        lambda: cache.clear(),
    ]
    for use in uses:
        with pytest.raises(StoreError, match=r"SQLite cache .* was closed \(aclose\)"):
            await use()
    assert cache._conn is None
    async with SqliteCache(tmp_path / "c.db") as again:
        assert await again.get([(ns, "k")]) == {(ns, "k"): {"a": 1}}
