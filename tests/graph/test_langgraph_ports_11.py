"""Ports of LangGraph's API, eleventh round: the ``checkpoints`` and ``debug`` stream modes
(``langgraph/pregel/debug.py``), ``get_input_jsonschema`` / ``get_output_jsonschema`` /
``get_context_jsonschema``, ``batch`` / ``abatch`` and ``get_graph().draw_mermaid()``. The
same program on LangGraph and on ``tinyagents.graph``, compared with each library's ids and
timestamps left out (``brief``), as in ``test_langgraph_ports.py``; then what is ours alone:
the ids of the items are the thread's (every backend, a SQLite file), the errors.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import typing_extensions
from langgraph_kit import OURS, THEIRS, abc_graph, cfg, lg_func, lg_memory
from pydantic import BaseModel

import tinyagents.graph as ours_graph
from tinyagents import Runtime
from tinyagents.errors import ArgumentError, ConfigurationError, SyncInAsyncError
from tinyagents.graph import Command
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer, SqliteCheckpointer


class X(TypedDict, total=False):
    x: int


def _ns(ns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.split(":")[0] for part in ns)


def _state(state: Any) -> Any:
    """A task's ``state`` (a sub-graph's config) with its namespace's node names only."""
    if state is None:
        return None
    return _ns(tuple(state["configurable"]["checkpoint_ns"].split("|")))


def _checkpoint(p: dict[str, Any]) -> tuple[Any, ...]:
    tasks = [
        (t["name"], [i["value"] for i in t["interrupts"]], _state(t["state"])) for t in p["tasks"]
    ]
    md = p["metadata"]
    ns = p["config"]["configurable"]["checkpoint_ns"]
    return (
        md["source"],
        md["step"],
        p["next"],
        p["values"],
        tasks,
        _ns(tuple(ns.split("|"))) if ns else (),
        p["parent_config"] is None,
    )


def brief(item: Any) -> Any:
    """A ``checkpoints`` / ``debug`` item without the ids and times each library makes."""
    ns: tuple[str, ...] = ()
    mode = None
    if isinstance(item, tuple) and len(item) == 3:
        ns, mode, item = item
    elif isinstance(item, tuple) and isinstance(item[0], tuple):
        ns, item = item
    elif isinstance(item, tuple):
        mode, item = item
    if mode not in (None, "checkpoints", "debug"):
        return (_ns(ns), mode, item)
    if "type" in item:
        p = item["payload"]
        if item["type"] == "checkpoint":
            shown: Any = _checkpoint(p)
        else:
            shown = {k: v for k, v in p.items() if k != "id"}
            if "interrupts" in shown:
                shown["interrupts"] = [i["value"] for i in shown["interrupts"]]
        return (_ns(ns), item["type"], item["step"], shown)
    return (_ns(ns), _checkpoint(item))


async def both(build: Any, inputs: list[Any], mode: Any, *, subgraphs: bool = False) -> Any:
    """``build(g)`` streamed on each library with a memory checkpointer, ``inputs`` one run
    after another on thread "1" (a ``("resume", v)`` answers the one pending interrupt)."""
    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    ours = build(OURS).compile(checkpointer=MemoryCheckpointer())
    out: tuple[list[Any], list[Any]] = ([], [])
    for value in inputs:
        if isinstance(value, tuple) and value[0] == "resume":
            their_in: Any = THEIRS.Command(resume=value[1])
            pending = (await ours.get_state("1")).interrupts
            our_in: Any = Command(resume={pending[0].id: value[1]})
        else:
            their_in = our_in = value
        async for item in theirs.astream(their_in, cfg(), stream_mode=mode, subgraphs=subgraphs):
            out[1].append(brief(item))
        async for item in ours.stream(our_in, thread_id="1", mode=mode, subgraphs=subgraphs):
            out[0].append(brief(item))
    return out


def chain(g: Any) -> Any:
    return (
        g.StateGraph(X)
        .add_node("a", lambda s: {"x": s["x"] + 1})
        .add_node("b", lambda s: {"x": s["x"] * 2})
        .add_edge(g.START, "a")
        .add_edge("a", "b")
    )


def with_subgraph(g: Any) -> Any:
    sub = g.StateGraph(X).add_node("inner", lambda s: {"x": s["x"] * 10})
    sub = sub.add_edge(g.START, "inner").compile()
    outer = g.StateGraph(X).add_node("first", lambda s: {"x": s["x"] + 1}).add_node("sub", sub)
    return outer.add_edge(g.START, "first").add_edge("first", "sub")


def asking_subgraph(g: Any) -> Any:
    def ask(state: X) -> dict[str, Any]:
        return {"x": g.interrupt("how many?")}

    sub = g.StateGraph(X).add_node("ask", ask).add_edge(g.START, "ask").compile()
    outer = g.StateGraph(X).add_node("first", lambda s: {"x": s["x"] + 1}).add_node("sub", sub)
    return outer.add_edge(g.START, "first").add_edge("first", "sub")


# -- checkpoints and debug, side by side ------------------------------------------------------


async def test_checkpoints_mode_of_a_chain() -> None:
    # LangGraph: test_pregel.py::test_checkpoint_recovery (stream_mode="checkpoints" shape)
    ours, theirs = await both(chain, [{"x": 1}, None, {"x": 5}], "checkpoints")
    assert ours == theirs
    assert ours[0] == ((), ("input", -1, ["__start__"], {}, [("__start__", [], None)], (), True))
    assert ours[-1] == ((), ("loop", 6, [], {"x": 12}, [], (), False))


async def test_debug_mode_of_a_chain() -> None:
    # LangGraph: test_pregel.py::test_debug_retry / test_debug_subgraphs (the debug items)
    ours, theirs = await both(chain, [{"x": 1}], "debug")
    assert ours == theirs
    assert [(kind, step) for _, kind, step, _ in ours] == [
        ("checkpoint", -1),
        ("checkpoint", 0),
        ("task", 1),
        ("task_result", 1),
        ("checkpoint", 1),
        ("task", 2),
        ("task_result", 2),
        ("checkpoint", 2),
    ]
    assert ours[2][3] == {"name": "a", "input": {"x": 1}, "triggers": ("branch:to:a",)}
    assert ours[3][3] == {"name": "a", "result": {"x": 2}, "error": None, "interrupts": []}


async def test_checkpoints_with_other_modes_are_pairs() -> None:
    ours, theirs = await both(chain, [{"x": 1}], ["updates", "checkpoints"])
    assert ours == theirs
    modes = [i[1] if i[1] == "updates" else "checkpoints" for i in ours]
    assert modes == ["checkpoints"] * 2 + ["updates", "checkpoints"] * 2


async def test_without_checkpointer_no_checkpoints_and_debug_has_tasks() -> None:
    # LangGraph: a graph without checkpointer saves nothing, so it shows no checkpoint
    theirs = chain(THEIRS).compile()
    ours = chain(OURS).compile()
    seen_theirs = [brief(i) async for i in theirs.astream({"x": 1}, stream_mode="debug")]
    seen_ours = [brief(i) async for i in ours.stream({"x": 1}, mode="debug")]
    assert seen_ours == seen_theirs
    assert [kind for _, kind, _, _ in seen_ours] == ["task", "task_result"] * 2
    assert [i async for i in ours.stream({"x": 1}, mode="checkpoints")] == []
    assert (await ours.run({"x": 1})).state == {"x": 4}


async def test_checkpoints_of_a_subgraph() -> None:
    # LangGraph: test_pregel.py::test_checkpoint_metadata / subgraphs=True with checkpoints
    ours, theirs = await both(with_subgraph, [{"x": 1}], "checkpoints", subgraphs=True)
    assert ours == theirs
    assert [item[0] for item in ours] == [(), (), (), ("sub",), ("sub",), ("sub",), ()]
    # the sub-graph's checkpoints are in the namespace its task's state names
    graph = with_subgraph(OURS).compile(checkpointer=MemoryCheckpointer())
    items = [
        i async for i in graph.stream({"x": 1}, thread_id="t", mode="checkpoints", subgraphs=True)
    ]
    state = items[2][1]["tasks"][0]["state"]["configurable"]
    assert state["thread_id"] == "t"
    assert {i[1]["config"]["configurable"]["checkpoint_ns"] for i in items if i[0]} == {
        state["checkpoint_ns"]
    }
    assert [i[0] for i in items if i[0]] == [(state["checkpoint_ns"],)] * 3
    ours_flat, theirs_flat = await both(with_subgraph, [{"x": 1}], "debug")
    assert ours_flat == theirs_flat
    assert all(item[0] == () for item in ours_flat)  # no sub-graph item without subgraphs=True


@pytest.mark.parametrize("mode", ["checkpoints", "debug"])
async def test_an_interrupt_in_a_subgraph_and_its_resume(mode: str) -> None:
    ours, theirs = await both(asking_subgraph, [{"x": 1}, ("resume", 5)], mode, subgraphs=True)
    assert ours == theirs
    # the resumed run starts from the paused checkpoint, its question on the sub-graph's task
    resumed = [i for i in ours if "how many?" in repr(i)]
    assert resumed


async def test_debug_of_an_entrypoint_and_its_task_calls() -> None:
    # LangGraph's functional API: the entrypoint's node reads the input itself, its task
    # calls are pushed tasks. Ours counts the step that applies the input (one more)
    def build(f: Any, cp: Any) -> Any:
        @f.task
        def double(v: int) -> int:
            return v * 2

        @f.entrypoint(checkpointer=cp)
        def main(x: int) -> int:
            return double(x).result() + 1

        return main

    theirs = build(lg_func, lg_memory.InMemorySaver())
    ours = build(ours_graph, MemoryCheckpointer())
    seen_theirs = [brief(i) async for i in theirs.astream(3, cfg(), stream_mode="debug")]
    seen_ours = [brief(i) async for i in ours.stream(3, thread_id="1", mode="debug")]

    def unstepped(items: list[Any]) -> list[Any]:
        shown = []
        for ns, kind, _, payload in items:
            if kind == "checkpoint":
                payload = payload[:1] + payload[2:]
            shown.append((ns, kind, payload))
        return shown

    assert unstepped(seen_ours) == unstepped(seen_theirs)
    assert [s for _, _, s, _ in seen_ours] == [s + 1 if s >= 0 else s for _, _, s, _ in seen_theirs]
    assert seen_ours[0][3][2] == ["main"]  # the input's checkpoint: the entrypoint is next


class Fan(TypedDict, total=False):
    items: list[int]
    out: Annotated[list[int], operator.add]


def fan_out(g: Any) -> Any:
    def fan(state: Fan) -> list[Any]:
        return [g.Send("work", {"items": [i]}) for i in state["items"]]

    graph = g.StateGraph(Fan).add_node("start", lambda s: {})
    graph.add_node("work", lambda s: {"out": [s["items"][0] * 2]})
    return graph.add_edge(g.START, "start").add_conditional_edges("start", fan, ["work"])


async def test_debug_of_sends() -> None:
    # LangGraph: a Send's task is triggered by a push; both are in their checkpoint's tasks
    ours, theirs = await both(fan_out, [{"items": [1, 2]}], "debug")
    assert ours == theirs
    pushed = [i[3] for i in ours if i[1] == "task" and i[3]["name"] == "work"]
    assert [p["triggers"] for p in pushed] == [("__pregel_push",)] * 2
    assert ours[4][3][2] == ["work", "work"]


async def test_debug_of_a_failing_node() -> None:
    def build(g: Any) -> Any:
        def boom(state: X) -> dict[str, Any]:
            raise ValueError("boom")

        return g.StateGraph(X).add_node("boom", boom).add_edge(g.START, "boom")

    seen: tuple[list[Any], list[Any]] = ([], [])
    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    ours = build(OURS).compile(checkpointer=MemoryCheckpointer())
    with pytest.raises(ValueError, match="boom"):
        async for item in theirs.astream({"x": 1}, cfg(), stream_mode="debug"):
            seen[1].append(item)
    with pytest.raises(ValueError, match="boom"):
        async for item in ours.stream({"x": 1}, thread_id="1", mode="debug"):
            seen[0].append(item)

    def shown(items: list[Any]) -> list[Any]:
        return [
            (i["type"], repr(i["payload"].get("error"))) for i in items if i["type"] != "checkpoint"
        ]

    assert (
        shown(seen[0])
        == shown(seen[1])
        == [
            ("task", "None"),
            ("task_result", "ValueError('boom')"),
        ]
    )
    # a step that fails saves no checkpoint, so shows none
    assert [i["type"] for i in seen[0]] == [i["type"] for i in seen[1]]


# -- checkpoints: ours ------------------------------------------------------------------------


async def test_checkpoint_items_are_the_threads_checkpoints(checkpointer: Checkpointer) -> None:
    graph = abc_graph(OURS).compile(checkpointer=checkpointer)
    items = [i async for i in graph.stream({}, thread_id="t", mode="debug")]
    saved = [i["payload"] for i in items if i["type"] == "checkpoint"]
    ids = [p["config"]["configurable"]["checkpoint_id"] for p in saved]
    history = [h.checkpoint_id for h in reversed(await graph.history("t"))]
    assert ids == history
    assert [p["parent_config"] for p in saved][1:] == [p["config"] for p in saved][:-1]
    for p in saved:  # each one's values are the thread's at that checkpoint
        snap = await graph.get_state("t", p["config"]["configurable"]["checkpoint_id"])
        assert p["values"] == snap.values and p["metadata"]["step"] == snap.step
        assert p["config"]["configurable"]["thread_id"] == "t"
    # a task item is the task its checkpoint said comes next
    for before, task in itertools.pairwise(items):
        if task["type"] == "task" and before["type"] == "checkpoint":
            assert task["payload"]["id"] == before["payload"]["tasks"][0]["id"]
            assert task["step"] == before["step"] + 1
    for item in items:
        datetime.fromisoformat(item["timestamp"])


async def test_checkpoints_from_a_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    cp = SqliteCheckpointer(path)
    await cp.setup()
    graph = chain(OURS).compile(checkpointer=cp)
    first = [i async for i in graph.stream({"x": 1}, thread_id="t", mode="checkpoints")]
    await cp.aclose()
    again = SqliteCheckpointer(path)  # the same file, read anew
    await again.setup()
    try:
        graph = chain(OURS).compile(checkpointer=again)
        head = [i async for i in graph.stream(None, thread_id="t", mode="checkpoints")]
        assert head[0]["config"] == first[-1]["config"]
        assert head[0]["values"] == {"x": 4} and head[0]["next"] == []
    finally:
        await again.aclose()


async def test_checkpoints_of_a_run_under_a_runtime() -> None:
    graph = chain(OURS).compile(checkpointer=MemoryCheckpointer())
    async with Runtime(testing=True) as rt:
        items = [
            i async for i in graph.stream({"x": 1}, thread_id="t", mode="checkpoints", runtime=rt)
        ]
    assert [(i["metadata"]["source"], i["next"]) for i in items] == [
        ("input", ["__start__"]),
        ("loop", ["a"]),
        ("loop", ["b"]),
        ("loop", []),
    ]


def _id(config: Any) -> Any:
    return config and config["configurable"]["checkpoint_id"]


async def test_checkpoints_of_a_started_run_begin_at_its_head() -> None:
    # handle.stream on a run already under way: its first item is the checkpoint the run is
    # on (the one its running step started from, with its parent), not the input's nor any
    # before it; then each checkpoint saved, as the run saves them. debug: the same, and no
    # task item for the step already running (its result comes)
    entered, release = asyncio.Event(), asyncio.Event()

    async def gate(s: X) -> X:
        entered.set()
        await release.wait()
        return {"x": s["x"] * 10}

    graph = (
        chain(OURS)
        .add_node("gate", gate)
        .add_edge("b", "gate")
        .compile(checkpointer=MemoryCheckpointer())
    )
    async with Runtime(testing=True) as rt:
        handle = await rt.start_graph(graph, {"x": 1}, thread_id="t")
        await entered.wait()
        stream = handle.stream(["checkpoints", "debug"])
        release.set()
        items = [i async for i in stream]
        await handle.result()
    saved = [p for mode, p in items if mode == "checkpoints"]
    history = await graph.history("t")  # newest first
    assert [(p["metadata"]["step"], p["next"], p["values"]) for p in saved] == [
        (2, ["gate"], {"x": 4}),
        (3, [], {"x": 40}),
    ]
    assert [_id(p["config"]) for p in saved] == [h.checkpoint_id for h in history[1::-1]]
    assert _id(saved[0]["parent_config"]) == history[2].checkpoint_id
    debug = [(p["type"], p["step"]) for mode, p in items if mode == "debug"]
    assert debug == [("checkpoint", 2), ("task_result", 3), ("checkpoint", 3)]


async def test_checkpoints_of_an_exit_run_are_the_ones_it_saves(
    checkpointer: Checkpointer,
) -> None:
    # durability="exit": the run reads its checkpoints through its ExitBuffer and saves
    # them at its end; the ids it streamed (checkpoints and debug) are the thread's after
    graph = chain(OURS).compile(checkpointer=checkpointer)
    streamed: list[Any] = []
    for value in ({"x": 1}, {"x": 2}):  # the second run on top of the first's head
        items = [
            i
            async for i in graph.stream(
                value, thread_id="t", mode=["checkpoints", "debug"], durability="exit"
            )
        ]
        saved = [p for mode, p in items if mode == "checkpoints"]
        shown = [p["payload"] for mode, p in items if mode == "debug" and p["type"] == "checkpoint"]
        assert shown == saved and len(saved) == 4
        streamed += saved
    history = [h.checkpoint_id for h in reversed(await graph.history("t"))]
    assert [_id(p["config"]) for p in streamed] == history
    assert [_id(p["parent_config"]) for p in streamed] == [None, *history[:-1]]
    for p in streamed:
        snap = await graph.get_state("t", _id(p["config"]))
        assert p["values"] == snap.values and p["next"] == list(snap.next)


def test_a_bad_mode_names_the_new_ones() -> None:
    with pytest.raises(ConfigurationError, match="checkpoints, debug"):
        chain(OURS).compile().stream({"x": 1}, mode="debugging")


# -- JSON schemas -----------------------------------------------------------------------------


class TState(typing_extensions.TypedDict):
    x: int
    log: Annotated[list[str], operator.add]


class TIn(typing_extensions.TypedDict):
    x: int


class TOut(typing_extensions.TypedDict):
    log: list[str]


@dataclass
class Ctx:
    user: str
    retries: int = 2


class Model(BaseModel):
    name: str
    tags: list[str] = []


def _node(state: Any) -> dict[str, Any]:
    return {}


def schemas_of(g: Any, *args: Any, **kw: Any) -> tuple[Any, Any, Any]:
    graph = g.StateGraph(*args, **kw).add_node("n", _node).add_edge(g.START, "n").compile()
    return (
        graph.get_input_jsonschema(),
        graph.get_output_jsonschema(),
        graph.get_context_jsonschema(),
    )


@pytest.mark.parametrize(
    "args",
    [
        {"state_schema": TState},
        {"state_schema": TState, "input_schema": TIn, "output_schema": TOut, "context_schema": Ctx},
        {"state_schema": Model},
        {"state_schema": Ctx},
        {"state_schema": int},
    ],
    ids=["typeddict", "io-and-context", "pydantic", "dataclass", "one-value"],
)
def test_jsonschemas_as_langgraph(args: dict[str, Any]) -> None:
    # LangGraph: test_state.py::test_state_schema_* / get_input_jsonschema
    assert schemas_of(OURS, **args) == schemas_of(THEIRS, **args)


def test_jsonschema_of_an_entrypoint() -> None:
    def build(f: Any) -> Any:
        @f.entrypoint()
        def main(x: int) -> list[str]:
            return [str(x)]

        return main

    for name in ("get_input_jsonschema", "get_output_jsonschema"):
        assert getattr(build(ours_graph), name)() == getattr(build(lg_func), name)()
    assert build(ours_graph).get_output_jsonschema()["title"] == "LangGraphOutput"


def test_jsonschema_of_a_typing_typeddict() -> None:
    # pydantic (so LangGraph) refuses a typing.TypedDict before Python 3.12; ours reads it
    # as the typing_extensions one of the same fields
    class Plain(TypedDict):
        x: int
        log: Annotated[list[str], operator.add]

    class Partial(TypedDict, total=False):
        x: int

    ours, _, context = schemas_of(OURS, Plain)
    expected = schemas_of(THEIRS, TState)[0]
    assert {**ours, "title": "TState"} == expected and ours["title"] == "Plain"
    assert context is None
    assert "required" not in schemas_of(OURS, Partial)[0]


class Thing:
    """No type pydantic describes."""


class WithThing(typing_extensions.TypedDict):
    thing: Thing


def test_a_state_json_schema_cannot_describe() -> None:
    graph = OURS.StateGraph(WithThing).add_node("n", _node).add_edge(OURS.START, "n").compile()
    with pytest.raises(ConfigurationError, match="cannot describe"):
        graph.get_input_jsonschema()


# -- batch ------------------------------------------------------------------------------------


def failing(g: Any) -> Any:
    def node(state: X) -> dict[str, Any]:
        if state["x"] < 0:
            raise ValueError(f"negative {state['x']}")
        return {"x": state["x"] + 1}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n")


async def test_abatch_as_langgraph() -> None:
    # LangGraph: test_pregel.py::test_batch_two_processes_in_out (abatch of several inputs)
    inputs = [{"x": 1}, {"x": 2}, {"x": 3}]
    theirs = await chain(THEIRS).compile().abatch(inputs)
    ours = await chain(OURS).compile().abatch(inputs)
    assert [r.state for r in ours] == theirs == [{"x": 4}, {"x": 6}, {"x": 8}]


def test_batch_without_a_loop() -> None:
    inputs = [{"x": 1}, {"x": 3}]
    assert [r.state for r in chain(OURS).compile().batch(inputs)] == [{"x": 4}, {"x": 8}]
    assert chain(THEIRS).compile().batch(inputs) == [{"x": 4}, {"x": 8}]


async def test_abatch_return_exceptions_as_langgraph() -> None:
    inputs = [{"x": 1}, {"x": -1}, {"x": -2}]
    theirs = await failing(THEIRS).compile().abatch(inputs, return_exceptions=True)
    ours = await failing(OURS).compile().abatch(inputs, return_exceptions=True)
    assert ours[0].state == theirs[0] == {"x": 2}
    assert [repr(e) for e in ours[1:]] == [repr(e) for e in theirs[1:]]
    # without: the first failed input's error (in input order), once every run ended
    with pytest.raises(ValueError, match="negative -1"):
        await failing(OURS).compile().abatch(inputs)
    # refused input is its input's error too
    refused = await failing(OURS).compile().abatch([{"x": 1}, 5], return_exceptions=True)
    assert refused[0].state == {"x": 2} and isinstance(refused[1], Exception)


async def test_abatch_threads_and_concurrency(checkpointer: Checkpointer) -> None:
    running = 0
    most = 0
    all_in = asyncio.Event()
    wait_for_all = False

    async def node(state: X) -> dict[str, Any]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        if running == 3:
            all_in.set()
        if wait_for_all:  # each run waits for the others: they run at once, or never end
            await all_in.wait()
        await asyncio.sleep(0)
        running -= 1
        return {"x": state["x"] * 2}

    graph = OURS.StateGraph(X).add_node("n", node).add_edge(OURS.START, "n")
    compiled = graph.compile(checkpointer=checkpointer)
    out = await compiled.abatch(
        [{"x": 1}, {"x": 2}, {"x": 3}], thread_ids=["a", "b", "c"], concurrency=1
    )
    assert [r.state for r in out] == [{"x": 2}, {"x": 4}, {"x": 6}]
    assert most == 1
    assert (await compiled.get_state("b")).values == {"x": 4}
    most, wait_for_all = 0, True
    await compiled.abatch([{"x": 1}, {"x": 2}, {"x": 3}], thread_ids=["d", "e", "f"])
    assert most == 3  # all at once without a limit


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"thread_ids": ["a"]}, "2 inputs and 1 thread_ids"),
        ({"thread_ids": ["a", "a"]}, "named more than once"),
        ({"concurrency": 0}, "concurrency"),
    ],
)
async def test_abatch_refuses_bad_arguments(
    kw: dict[str, Any], match: str, checkpointer: Checkpointer
) -> None:
    calls: list[Any] = []
    graph = OURS.StateGraph(X).add_node("n", lambda s: calls.append(s) or {})
    compiled = graph.add_edge(OURS.START, "n").compile(checkpointer=checkpointer)
    with pytest.raises(ArgumentError, match=match):
        await compiled.abatch([{"x": 1}, {"x": 2}], **kw)
    assert calls == [] and await compiled.history("a") == []
    with pytest.raises(ArgumentError, match="a list of inputs"):
        await compiled.abatch({"x": 1})  # type: ignore[arg-type]


async def test_batch_inside_a_loop_refuses() -> None:
    with pytest.raises(SyncInAsyncError, match="abatch"):
        chain(OURS).compile().batch([{"x": 1}])


# -- get_graph --------------------------------------------------------------------------------


def routed(g: Any) -> Any:
    def route(state: X) -> str:
        return "b" if state["x"] else "c"

    graph = g.StateGraph(X)
    for name in ("a", "b", "c"):
        graph.add_node(name, _node)
    graph.add_edge(g.START, "a").add_conditional_edges("a", route, {"b": "b", "c": "c"})
    return graph.add_edge("b", g.END).add_edge("c", g.END)


@pytest.mark.parametrize("build", [chain, routed, with_subgraph], ids=["chain", "routed", "sub"])
def test_get_graph_as_langgraph(build: Any) -> None:
    ours = build(OURS).compile().get_graph()
    theirs = build(THEIRS).compile().get_graph()
    assert list(ours.nodes) == list(theirs.nodes)
    assert [(n.id, n.name) for n in ours.nodes.values()] == [
        (n.id, n.name) for n in theirs.nodes.values()
    ]

    def edges(graph: Any) -> set[tuple[str, str, bool]]:
        return {(e.source, e.target, e.conditional) for e in graph.edges}

    assert edges(ours) == edges(theirs)


def test_draw_mermaid_is_to_mermaid() -> None:
    graph = routed(OURS).compile()
    drawn = graph.get_graph()
    assert drawn.draw_mermaid() == graph.to_mermaid()
    assert "    n_a -. b .-> n_b" in drawn.draw_mermaid()
    sub = with_subgraph(OURS).compile().get_graph()
    assert sub.nodes["sub"].subgraph and not sub.nodes["first"].subgraph
