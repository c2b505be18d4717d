"""Ports of LangGraph's tests, tenth round: a run's context and ``Runtime``
(``libs/langgraph/tests/test_runtime.py``), ``get_stream_writer`` (``test_pregel.py``) and
``durability``. The same program on LangGraph and on ``tinyagents.graph``, compared, as in
``test_langgraph_ports.py``; each test's comment names the LangGraph test it follows. Then
what ours adds: the context across checkpoints (every backend), its errors, and the
``runtime`` parameter of routers, entrypoints and tasks.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_memory
from pydantic import BaseModel, ValidationError

import tinyagents.graph as ours_graph
from tinyagents.errors import ArgumentError, ConfigurationError, GraphError
from tinyagents.graph import (
    END,
    START,
    CachePolicy,
    Command,
    GraphRuntime,
    StateGraph,
    get_runtime,
    get_stream_writer,
    interrupt,
)
from tinyagents.store.cache import InMemoryCache
from tinyagents.store.checkpoint import Checkpointer
from tinyagents.store.longterm import MemoryGraphStore

lg_runtime = pytest.importorskip("langgraph.runtime")
lg_config = pytest.importorskip("langgraph.config")
lg_func = pytest.importorskip("langgraph.func")


@dataclass
class Ctx:
    api_key: str
    timeout: int = 30


class Msg(TypedDict, total=False):
    message: str


class Seen(TypedDict, total=False):
    seen: Annotated[list[str], operator.add]


def one_node(g: Any, node: Any, context_schema: Any = Ctx) -> Any:
    return (
        g.StateGraph(Msg, context_schema=context_schema)
        .add_node("node", node)
        .add_edge(g.START, "node")
        .add_edge("node", g.END)
    )


async def both(node: Any, context: Any, schema: Any = Ctx) -> tuple[Any, Any]:
    """``node`` in a one-node graph run with ``context`` on each library: (ours, theirs)."""
    ours = await one_node(OURS, node, schema).compile().run({"message": "m"}, context=context)
    theirs = (
        await one_node(THEIRS, node, schema).compile().ainvoke({"message": "m"}, context=context)
    )
    return ours.state, theirs


def with_key(state: Msg, runtime: Any) -> dict[str, Any]:
    c = runtime.context
    return {"message": f"{c.api_key}/{c.timeout}"}


async def test_injected_runtime() -> None:
    # LangGraph: test_runtime.py::test_injected_runtime
    assert await both(with_key, Ctx(api_key="sk")) == ({"message": "sk/30"},) * 2


async def test_context_runtime_through_get_runtime() -> None:
    # LangGraph: test_runtime.py::test_context_runtime (get_runtime(Context) in the node)
    def ours_node(state: Msg) -> dict[str, Any]:
        return {"message": get_runtime(Ctx).context.api_key}

    def their_node(state: Msg) -> dict[str, Any]:
        return {"message": lg_runtime.get_runtime(Ctx).context.api_key}

    ours = await one_node(OURS, ours_node).compile().run({}, context=Ctx(api_key="k"))
    theirs = await one_node(THEIRS, their_node).compile().ainvoke({}, context=Ctx(api_key="k"))
    assert ours.state == theirs == {"message": "k"}


async def test_runtime_propagated_to_subgraph() -> None:
    # LangGraph: test_runtime.py::test_runtime_propogated_to_subgraph
    class S(TypedDict, total=False):
        subgraph: str
        main: str

    def build(g: Any) -> Any:
        def sub_node(state: S, runtime: Any) -> dict[str, Any]:
            return {"subgraph": f"{runtime.context.api_key}!"}

        def main_node(state: S, runtime: Any) -> dict[str, Any]:
            return {"main": f"{runtime.context.api_key}!"}

        sub = g.StateGraph(S, context_schema=Ctx).add_node("sub_node", sub_node)
        sub = sub.add_edge(g.START, "sub_node").compile()
        outer = g.StateGraph(S, context_schema=Ctx).add_node("main_node", main_node)
        outer = outer.add_node("node_1", sub).add_edge(g.START, "main_node")
        return outer.add_edge("main_node", "node_1")

    ours = await build(OURS).compile().run({}, context=Ctx(api_key="Alice"))
    theirs = await build(THEIRS).compile().ainvoke({}, context=Ctx(api_key="Alice"))
    assert ours.state == theirs == {"subgraph": "Alice!", "main": "Alice!"}


async def test_context_coercion_dataclass() -> None:
    # LangGraph: test_runtime.py::test_context_coercion_dataclass
    for context in ({"api_key": "a", "timeout": 60}, {"api_key": "b"}, Ctx("c", 90)):
        ours, theirs = await both(with_key, context)
        assert ours == theirs


async def test_context_coercion_pydantic() -> None:
    # LangGraph: test_runtime.py::test_context_coercion_pydantic
    class PCtx(BaseModel):
        api_key: str
        timeout: int = 30
        tags: list[str] = []

    def node(state: Msg, runtime: Any) -> dict[str, Any]:
        c = runtime.context
        return {"message": f"{c.api_key}/{c.timeout}/{c.tags}"}

    for context in ({"api_key": "a", "timeout": 60, "tags": ["p"]}, {"api_key": "b"}):
        ours, theirs = await both(node, context, PCtx)
        assert ours == theirs
    ours, theirs = await both(node, PCtx(api_key="c", tags=["t"]), PCtx)
    assert ours == theirs == {"message": "c/30/['t']"}


async def test_context_coercion_typeddict_and_none() -> None:
    # LangGraph: test_runtime.py::test_context_coercion_typeddict, test_context_coercion_none
    class TCtx(TypedDict):
        api_key: str

    def node(state: Msg, runtime: Any) -> dict[str, Any]:
        c = runtime.context
        return {"message": "none" if c is None else c["api_key"]}

    assert await both(node, {"api_key": "k"}, TCtx) == ({"message": "k"},) * 2
    assert await both(node, None, TCtx) == ({"message": "none"},) * 2


async def test_context_coercion_errors() -> None:
    # LangGraph: test_runtime.py::test_context_coercion_errors and
    # test_context_coercion_pydantic_validation_errors: theirs raises the TypeError /
    # ValidationError, ours an ArgumentError caused by it, before anything runs
    class PCtx(BaseModel):
        api_key: str
        timeout: int

    ran: list[str] = []

    def node(state: Msg, runtime: Any) -> dict[str, Any]:
        ran.append("node")
        return {}

    graph = one_node(OURS, node).compile()
    for bad in ({"timeout": 60}, {"api_key": "x", "invalid_field": 1}):
        with pytest.raises(TypeError):
            await one_node(THEIRS, node).compile().ainvoke({}, context=bad)
        with pytest.raises(ArgumentError) as raised:
            await graph.run({}, context=bad)
        assert isinstance(raised.value.__cause__, TypeError)
    bad_model = {"api_key": "x", "timeout": "not an int"}
    with pytest.raises(ValidationError):
        await one_node(THEIRS, node, PCtx).compile().ainvoke({}, context=bad_model)
    with pytest.raises(ArgumentError) as raised:
        await one_node(OURS, node, PCtx).compile().run({}, context=bad_model)
    assert isinstance(raised.value.__cause__, ValidationError)
    assert ran == []


async def test_context_coercion_stream() -> None:
    # LangGraph: test_runtime.py::test_context_coercion_async (astream) and
    # test_context_coercion_stream
    ours = [
        i
        async for i in one_node(OURS, with_key)
        .compile()
        .stream({}, context={"api_key": "s"}, mode="updates")
    ]
    theirs = [
        i
        async for i in one_node(THEIRS, with_key)
        .compile()
        .astream({}, context={"api_key": "s"}, stream_mode="updates")
    ]
    assert ours == theirs == [{"node": {"message": "s/30"}}]


async def test_get_stream_writer() -> None:
    # LangGraph: test_pregel.py::test_get_stream_writer
    class F(TypedDict):
        foo: str

    def build(g: Any, get_writer: Any) -> Any:
        def my_node(state: F) -> F:
            get_writer()("custom!")
            return state

        return g.StateGraph(F).add_node("my_node", my_node).add_edge(g.START, "my_node")

    ours = build(OURS, get_stream_writer).compile()
    theirs = build(THEIRS, lg_config.get_stream_writer).compile()
    for mode in ("custom", "values", ["custom", "updates"]):
        got = [i async for i in ours.stream({"foo": "bar"}, mode=mode)]
        want = [i async for i in theirs.astream({"foo": "bar"}, stream_mode=mode)]
        assert got == want


async def test_runtime_stream_writer_and_router_runtime() -> None:
    # LangGraph: test_runtime.py::test_injected_runtime, with runtime.stream_writer and a
    # router taking runtime (LangGraph injects it into a branch's path function too)
    def build(g: Any) -> Any:
        def a(state: Seen, runtime: Any) -> dict[str, Any]:
            runtime.stream_writer(f"a:{runtime.context.api_key}")
            return {"seen": ["a"]}

        def route(state: Seen, runtime: Any) -> str:
            return "b" if runtime.context.api_key == "go" else g.END

        def b(state: Seen) -> dict[str, Any]:
            return {"seen": ["b"]}

        sg = g.StateGraph(Seen, context_schema=Ctx).add_node("a", a).add_node("b", b)
        return sg.add_edge(g.START, "a").add_conditional_edges("a", route, ["b", g.END])

    for key in ("go", "stop"):
        ours = [
            i
            async for i in build(OURS)
            .compile()
            .stream({}, context=Ctx(key), mode=["custom", "values"])
        ]
        theirs = [
            i
            async for i in build(THEIRS)
            .compile()
            .astream({}, context=Ctx(key), stream_mode=["custom", "values"])
        ]
        assert ours == theirs


async def test_router_on_start_takes_runtime() -> None:
    # a router on START (it runs as the input is applied) sees the run's context, as
    # LangGraph's does
    def build(g: Any) -> Any:
        def pick(state: Msg, runtime: Any) -> str:
            return runtime.context.api_key

        sg = g.StateGraph(Msg, context_schema=Ctx)
        for name in ("x", "y"):
            sg.add_node(name, lambda s, name=name: {"message": name})
        return sg.add_conditional_edges(g.START, pick, ["x", "y"])

    ours = await build(OURS).compile().run({}, context=Ctx("y"))
    theirs = await build(THEIRS).compile().ainvoke({}, context=Ctx("y"))
    assert ours.state == theirs == {"message": "y"}


async def test_context_is_not_saved_a_resume_is_given_it_again(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph keeps the context out of the checkpoint: a resume without it reads None.
    # Ours the same, on every checkpointer (memory, SQLite file, PostgreSQL)
    def build(g: Any) -> Any:
        def ask(state: Msg, runtime: Any) -> dict[str, Any]:
            answer = g.interrupt("ok?")
            key = None if runtime.context is None else runtime.context.api_key
            return {"message": f"{answer}:{key}"}

        return one_node(g, ask)

    ours = build(OURS).compile(checkpointer=checkpointer)
    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    for thread, resume_context in (("1", None), ("2", Ctx("zq-again"))):
        paused = await ours.run({}, thread_id=thread, context=Ctx("zq-first"))
        assert paused.status == "interrupted"
        await theirs.ainvoke({}, cfg(thread), context=Ctx("zq-first"))
        done = await ours.run(Command(resume="yes"), thread_id=thread, context=resume_context)
        want = await theirs.ainvoke(
            THEIRS.Command(resume="yes"), cfg(thread), context=resume_context
        )
        assert done.state == want
    saved = repr(await ours.get_state("2")) + repr(await ours.history("2"))
    assert "zq-first" not in saved
    assert (await ours.get_state("2")).values == {"message": "yes:zq-again"}


async def test_entrypoint_and_task_runtime(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_imp_task (entrypoint(context_schema=...)); its
    # entrypoint takes runtime (with previous) and its tasks call get_runtime()
    @ours_graph.task
    def ours_tag(x: int) -> str:
        return f"{get_runtime().context.api_key}{x}"

    @lg_func.task
    def their_tag(x: int) -> str:
        return f"{lg_runtime.get_runtime().context.api_key}{x}"

    def build(func: Any, tag: Any, cp: Any) -> Any:
        @func.entrypoint(checkpointer=cp, context_schema=Ctx)
        def flow(n: int, runtime: Any) -> list[Any]:
            return [tag(n).result(), runtime.previous]

        return flow

    ours = build(ours_graph, ours_tag, checkpointer)
    theirs = build(lg_func, their_tag, lg_memory.InMemorySaver())
    for n in (1, 2):
        got = await ours.ainvoke(n, thread_id="t", context=Ctx("k"))
        want = await theirs.ainvoke(n, cfg("t"), context=Ctx("k"))
        assert got == want


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_durability_sync_and_async_save_every_step(
    checkpointer: Checkpointer, durability: str
) -> None:
    # LangGraph: test_pregel.py::test_subgraph_durability_inherited (its sync/async cases:
    # every step saved; ours saves each step before the next starts for both)
    class S(TypedDict, total=False):
        n: Annotated[int, operator.add]

    def build(g: Any) -> Any:
        sg = g.StateGraph(S).add_node("a", lambda s: {"n": 1}).add_node("b", lambda s: {"n": 1})
        return sg.add_edge(g.START, "a").add_edge("a", "b")

    ours = build(OURS).compile(checkpointer=checkpointer)
    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    res = await ours.run({"n": 0}, thread_id="d", durability=durability)
    await theirs.ainvoke({"n": 0}, cfg("d"), durability=durability)
    assert res.state == {"n": 2}
    lg_history = [c async for c in theirs.aget_state_history(cfg("d"))]
    assert len(await ours.history("d")) == len(lg_history) == 4


# -- ours: errors and edges --------------------------------------------------------------


async def test_bad_durability_values_are_refused_before_anything_runs(
    checkpointer: Checkpointer,
) -> None:
    # ("exit" is taken: test_langgraph_ports_durability_exit.py)
    ran: list[int] = []
    graph = one_node(OURS, lambda s: ran.append(1) or {}).compile(checkpointer=checkpointer)
    for bad in ("later", "EXIT", 1):
        with pytest.raises(ArgumentError, match="durability"):
            await graph.run({}, thread_id="x", durability=bad)  # type: ignore[arg-type]
        with pytest.raises(ArgumentError, match="durability"):
            graph.stream({}, thread_id="x", durability=bad)  # type: ignore[arg-type]
    assert ran == []
    assert await graph.history("x") == []  # nothing saved either
    assert isinstance(ArgumentError("x"), ConfigurationError)


async def test_wrong_context_type_is_refused() -> None:
    class TCtx(TypedDict):
        api_key: str

    graph = one_node(OURS, with_key).compile()
    with pytest.raises(ArgumentError, match="Ctx"):
        await graph.run({}, context="sk")
    with pytest.raises(ArgumentError, match="TypedDict"):
        await one_node(OURS, with_key, TCtx).compile().run({}, context=["sk"])
    with pytest.raises(ArgumentError, match="context_schema is a class"):
        StateGraph(Msg, context_schema="Ctx")


async def test_context_without_schema_is_taken_as_it_is_and_a_sync_node_runtime() -> None:
    # a sync node (inline) and a sync node with a timeout (on a worker thread) both take
    # runtime; a graph without context_schema passes any context on
    seen: list[Any] = []

    def node(state: Msg, runtime: GraphRuntime[object]) -> dict[str, Any]:
        seen.append(runtime.context)
        runtime.stream_writer("w")
        return {}

    for timeout in (None, 5.0):
        graph = (
            StateGraph(Msg)
            .add_node("node", node, timeout=timeout)
            .add_edge(START, "node")
            .add_edge("node", END)
            .compile()
        )
        items = [i async for i in graph.stream({}, context=42, mode="custom")]
        assert items == ["w"]
    assert seen == [42, 42]


async def test_get_runtime_outside_a_node_is_a_graph_error() -> None:
    with pytest.raises(GraphError, match="inside a running graph node"):
        get_runtime()
    with pytest.raises(GraphError):
        get_stream_writer()


async def test_plain_node_reads_context_on_the_fast_path_and_in_a_called_graph() -> None:
    # a node with no context parameter in a run that saves nothing runs on the executor's
    # fast path: get_runtime() finds the run's context all the same, and so does a graph
    # the node calls
    def inner(state: Msg) -> dict[str, Any]:
        return {"message": get_runtime().context.api_key + "-inner"}

    called = one_node(OURS, inner).compile()

    async def outer(state: Msg) -> dict[str, Any]:
        return (await called.run({})).state

    def plain(state: Msg) -> dict[str, Any]:
        return {"message": get_runtime().context.api_key}

    assert (await one_node(OURS, plain).compile().run({}, context=Ctx("p"))).state == {
        "message": "p"
    }
    assert (await one_node(OURS, outer).compile().run({}, context=Ctx("q"))).state == {
        "message": "q-inner"
    }
    no_context = one_node(OURS, lambda s: {"message": str(get_runtime().context)})
    assert (await no_context.compile().run({})).state == {"message": "None"}


async def test_runtime_run_takes_context(rt: Any) -> None:
    # in a Runtime (rt.start_graph / run(runtime=rt)) the context reaches the nodes too
    graph = one_node(OURS, with_key).compile()
    res = await graph.run({}, runtime=rt, context={"api_key": "rt"})
    assert res.state == {"message": "rt/30"}
    handle = await rt.start_graph(graph, {}, context=Ctx("bg", 1))
    assert (await handle.result()).output == {"message": "bg/1"}
    with pytest.raises(ArgumentError):
        await rt.start_graph(graph, {}, durability="exit")


def test_run_sync_takes_context() -> None:
    graph = one_node(OURS, with_key).compile()
    assert graph.run_sync({}, context=Ctx("s")).state == {"message": "s/30"}


def test_override_keeps_the_rest() -> None:
    # LangGraph: test_runtime.py::test_override_runtime
    first = GraphRuntime(context=Ctx("abc"))
    assert first.override(context=Ctx("def")).context == Ctx("def")
    assert first.override(previous=1).context == Ctx("abc")
    assert first.store is None


_ = interrupt  # (imported for readers of the ported programs: g.interrupt is it)


async def test_iter_stream_with_runtime_and_a_task_of_a_node_take_context(
    rt: Any, checkpointer: Checkpointer
) -> None:
    # every other entry takes the context too: iter(), stream(runtime=rt), and a @task a
    # graph node calls reads it with get_runtime()
    @ours_graph.task
    async def shout() -> str:
        return get_runtime().context.api_key.upper()

    async def node(state: Msg, config: Any, runtime: GraphRuntime[Ctx]) -> dict[str, Any]:
        assert config["configurable"]["thread_id"] in ("", "i", "s")
        return {"message": f"{runtime.context.api_key}:{await shout()}"}

    graph = one_node(OURS, node).compile(checkpointer=checkpointer)
    async with graph.iter({}, thread_id="i", context=Ctx("it")) as run:
        steps = [step async for step in run.supersteps()]
    assert steps[-1].result is not None
    assert steps[-1].result.state == {"message": "it:IT"}
    items = [
        i async for i in graph.stream({}, thread_id="s", runtime=rt, context={"api_key": "rs"})
    ]
    assert items[-1] == {"message": "rs:RS"}


async def test_get_stream_writer_from_a_worker_thread() -> None:
    # a sync node with a timeout runs on a thread of its own: what get_stream_writer()
    # writes there is handed to the run's loop, and get_runtime() reads the context there
    def node(state: Msg) -> dict[str, Any]:
        get_stream_writer()(get_runtime().context.api_key)
        return {}

    graph = (
        StateGraph(Msg, context_schema=Ctx)
        .add_node("node", node, timeout=5.0)
        .add_edge(START, "node")
        .compile()
    )
    assert [i async for i in graph.stream({}, context=Ctx("t"), mode="custom")] == ["t"]


async def test_task_takes_runtime_by_name() -> None:
    # LangGraph wraps a task's function as it wraps a node's (RunnableCallable), so a task
    # parameter named runtime is filled in there too
    def build(func: Any) -> Any:
        @func.task
        def tag(x: int, runtime: Any) -> str:
            return f"{runtime.context.api_key}{x}"

        @func.entrypoint(context_schema=Ctx)
        async def flow(n: int) -> str:
            return await tag(n)

        return flow

    got = await build(ours_graph).ainvoke(3, context=Ctx("k"))
    want = await build(lg_func).ainvoke(3, context=Ctx("k"))
    assert got == want == "k3"


# The run context meets the long-term store and node caching (compile(store=...),
# compile(cache=...)): GraphRuntime.store is the graph's store, as LangGraph's Runtime.store.


async def test_runtime_store_is_the_compiled_store_in_every_kind_of_node(
    checkpointer: Checkpointer,
) -> None:
    store = MemoryGraphStore()
    seen: list[tuple[str, bool]] = []

    def plain(state: Seen) -> dict[str, Any]:  # the executor's fast path (no checkpointer)
        seen.append(("plain", get_runtime().store is store))
        return {"seen": ["plain"]}

    async def injected(state: Seen, runtime: GraphRuntime[Ctx]) -> dict[str, Any]:
        seen.append(("injected", runtime.store is store and get_runtime().store is store))
        await runtime.store.aput(("users",), runtime.context.api_key, {"n": 1})
        return {"seen": ["injected"]}

    def route(state: Seen, runtime: GraphRuntime[Ctx]) -> str:
        seen.append(("router", runtime.store is store))
        return "sub"

    def inner(state: Seen) -> dict[str, Any]:  # a sub-graph sees the store of its parent
        seen.append(("sub", get_runtime().store is store))
        return {"seen": ["sub"]}

    sub = StateGraph(Seen).add_node("inner", inner).add_edge(START, "inner").compile()
    for cp in (None, checkpointer):
        seen.clear()
        graph = (
            StateGraph(Seen, context_schema=Ctx)
            .add_node("plain", plain)
            .add_node("injected", injected)
            .add_node("sub", sub)
            .add_edge(START, "plain")
            .add_edge("plain", "injected")
            .add_conditional_edges("injected", route, ["sub"])
            .compile(checkpointer=cp, store=store)
        )
        assert graph.store is store
        result = await graph.run({}, context=Ctx("ada"), thread_id="t" if cp else None)
        assert result.state == {"seen": ["plain", "injected", "sub"]}
        assert seen == [("plain", True), ("injected", True), ("router", True), ("sub", True)]
        item = await store.aget(("users",), "ada")
        assert item is not None and item.value == {"n": 1}
    # a plain node of a graph without a store, and a GraphRuntime made by hand: no store
    bare = StateGraph(Seen).add_node("plain", plain).add_edge(START, "plain").compile()
    seen.clear()
    await bare.run({})
    assert seen == [("plain", False)]


async def test_runtime_store_of_entrypoint_and_task() -> None:
    store = MemoryGraphStore()

    @ours_graph.task
    async def lookup(key: str, runtime: GraphRuntime[Ctx]) -> bool:
        return runtime.store is store and get_runtime().store is store

    @ours_graph.entrypoint(store=store, context_schema=Ctx)
    async def flow(key: str, runtime: GraphRuntime[Ctx]) -> list[bool]:
        return [runtime.store is store, await lookup(key)]

    assert (await flow.run("k", context=Ctx("x"))).state == [True, True]


async def test_context_cache_and_store_in_one_graph(tmp_path: Any) -> None:
    # a cached node reads the run's context and writes the store; a second run with the same
    # input takes the cached writes (the node does not run again) under another context
    store = MemoryGraphStore()
    runs: list[str] = []

    async def remember(state: Msg, runtime: GraphRuntime[Ctx]) -> dict[str, Any]:
        runs.append(runtime.context.api_key)
        await runtime.store.aput(("seen",), runtime.context.api_key, {"m": state["message"]})
        return {"message": f"{state['message']}/{runtime.context.api_key}"}

    def after(state: Msg) -> dict[str, Any]:  # a plain node after it, on the fast path
        assert get_runtime().store is store
        return {"message": state["message"] + f"/{get_runtime().context.timeout}"}

    graph = (
        StateGraph(Msg, context_schema=Ctx)
        .add_node("remember", remember, cache_policy=CachePolicy())
        .add_node("after", after)
        .add_edge(START, "remember")
        .add_edge("remember", "after")
        .compile(cache=InMemoryCache(), store=store)
    )
    first = await graph.run({"message": "hi"}, context=Ctx("a", 1))
    second = await graph.run({"message": "hi"}, context={"api_key": "b", "timeout": 2})
    assert first.state == {"message": "hi/a/1"}
    assert second.state == {"message": "hi/a/2"}  # the cached write, this run's context
    assert runs == ["a"]
    assert [i.key for i in await store.asearch(("seen",))] == ["a"]
    third = await graph.run({"message": "ho"}, context=Ctx("c", 3))
    assert third.state == {"message": "ho/c/3"} and runs == ["a", "c"]
    updates = [
        item async for item in graph.stream({"message": "ho"}, context=Ctx("d"), mode="updates")
    ]
    assert updates[0] == {"remember": {"message": "ho/c"}, "__metadata__": {"cached": True}}
    assert updates[1] == {"after": {"message": "ho/c/30"}}
