"""Graph runtime vs LangGraph, side by side in one process, on identical graphs.

    python -m benchmarks.graph            # full run (~20 s)
    python -m benchmarks.graph --quick    # fewer iterations

(a) a 3-node chain, no checkpointer; (b) a 5-way fan-out plus join; (c) a 100-step loop
with the SQLite checkpointer (LangGraph: ``AsyncSqliteSaver``); (d) a bare-asyncio baseline
doing the same node work, the floor; the checkpoint bytes on disk after a 500-turn
message-appending thread; and (a) and (b) streamed with ``values`` and with ``updates``
next to a plain run (ours: ``graph.stream``; LangGraph: ``astream``).

Node work: every node ``await asyncio.sleep(0)`` once (one event-loop round trip, the least
any node that does I/O costs) and returns a small update. The same scenarios with nodes
that never await are printed too ("trivial nodes"), so the fixed per-node overhead is
visible; there the bare floor is a plain function call and no graph runtime is near it.

``figures()`` returns everything as a dict for ``benchmarks/run_all.py``.
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

LOOP_STEPS = 100
TURNS = 500
FAN = 5


class ChainState(TypedDict, total=False):
    x: int


class FanState(TypedDict, total=False):
    results: Annotated[list[int], operator.add]
    total: int


class ChatState(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], operator.add]


def make_nodes(awaits: bool) -> dict[str, Callable[..., Awaitable[dict[str, Any]]]]:
    async def pause() -> None:
        if awaits:
            await asyncio.sleep(0)

    async def inc(state: Any) -> dict[str, Any]:
        await pause()
        return {"x": state["x"] + 1}

    def branch(i: int) -> Callable[..., Awaitable[dict[str, Any]]]:
        async def node(state: Any) -> dict[str, Any]:
            await pause()
            return {"results": [i]}

        return node

    async def join(state: Any) -> dict[str, Any]:
        await pause()
        return {"total": sum(state["results"])}

    async def reply(state: Any) -> dict[str, Any]:
        await pause()
        return {"messages": [{"role": "ai", "content": f"reply {len(state['messages'])}"}]}

    nodes = {"inc": inc, "join": join, "reply": reply}
    nodes.update({f"b{i}": branch(i) for i in range(FAN)})
    return nodes


def build(
    StateGraph: Any, START: str, END: str, nodes: dict[str, Any], compile_kw: dict[str, Any]
) -> dict[str, Any]:
    """The same graphs for both libraries (their builder APIs agree on these calls)."""

    def compiled(g: Any, **kw: Any) -> Any:
        return g.compile(**{**compile_kw, **kw})

    chain = StateGraph(ChainState)
    for name in ("a", "b", "c"):
        chain.add_node(name, nodes["inc"])
    chain.add_edge(START, "a")
    chain.add_edge("a", "b")
    chain.add_edge("b", "c")
    chain.add_edge("c", END)

    fan = StateGraph(FanState)
    fan.add_node("join", nodes["join"])
    for i in range(FAN):
        fan.add_node(f"b{i}", nodes[f"b{i}"])
        fan.add_edge(START, f"b{i}")
        fan.add_edge(f"b{i}", "join")
    fan.add_edge("join", END)

    loop = StateGraph(ChainState)
    loop.add_node("inc", nodes["inc"])
    loop.add_edge(START, "inc")
    loop.add_conditional_edges("inc", lambda s: "inc" if s["x"] < LOOP_STEPS else END)

    chat = StateGraph(ChatState)
    chat.add_node("reply", nodes["reply"])
    chat.add_edge(START, "reply")
    chat.add_edge("reply", END)
    return {"chain": compiled(chain), "fan": compiled(fan), "loop": loop, "chat": chat}


async def bare_chain(nodes: dict[str, Any]) -> dict[str, Any]:
    state = {"x": 0}
    for _ in range(3):
        state = {**state, **await nodes["inc"](state)}
    return state


async def bare_fan(nodes: dict[str, Any]) -> dict[str, Any]:
    outs = await asyncio.gather(*(nodes[f"b{i}"]({}) for i in range(FAN)))
    state: dict[str, Any] = {"results": [r for out in outs for r in out["results"]]}
    return {**state, **await nodes["join"](state)}


async def check_same_results(ours: dict[str, Any], theirs: dict[str, Any], nodes: Any) -> None:
    """Before timing anything: every variant computes the same state (a failing run is fast)."""
    mine = await ours["chain"].run({"x": 0})
    assert mine.status == "completed" and mine.state == {"x": 3}, mine.error
    assert await theirs["chain"].ainvoke({"x": 0}) == {"x": 3}
    assert await bare_chain(nodes) == {"x": 3}
    expected = {"results": list(range(FAN)), "total": sum(range(FAN))}
    mine = await ours["fan"].run({})
    assert mine.status == "completed" and mine.state == expected, mine.error
    assert await theirs["fan"].ainvoke({}) == expected
    assert await bare_fan(nodes) == expected
    mine = await ours["loop"].compile(recursion_limit=LOOP_STEPS + 5).run({"x": 0})
    assert mine.status == "completed" and mine.state == {"x": LOOP_STEPS}, mine.error
    lg = theirs["loop"].compile()
    assert await lg.ainvoke({"x": 0}, {"recursion_limit": LOOP_STEPS + 5}) == {"x": LOOP_STEPS}


async def per_call(fn: Callable[[], Awaitable[Any]], n: int, repeats: int = 5) -> float:
    """Median seconds per call over ``repeats`` batches of ``n`` calls (after a warm-up)."""
    for _ in range(max(3, n // 10)):
        await fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            await fn()
        samples.append((time.perf_counter() - start) / n)
    return statistics.median(samples)


async def paired(
    a: Callable[[], Awaitable[Any]], b: Callable[[], Awaitable[Any]], n: int, repeats: int = 7
) -> tuple[float, float]:
    """Median seconds per call of ``a`` and of ``b``, timed in alternating batches so that a
    load spike on a shared machine hits both (their ratio is the figure that matters)."""
    for fn in (a, b):
        for _ in range(max(3, n // 10)):
            await fn()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, out in zip((a, b), samples, strict=True):
            start = time.perf_counter()
            for _ in range(n):
                await fn()
            out.append((time.perf_counter() - start) / n)
    return statistics.median(samples[0]), statistics.median(samples[1])


def db_bytes(path: Path) -> int:
    """Size of a SQLite database once its WAL is folded in."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, size = (
            db.execute("PRAGMA page_count").fetchone()[0],
            db.execute("PRAGMA page_size").fetchone()[0],
        )
    return int(pages * size)


async def scenario_times(awaits: bool, n: int, tmp: Path) -> dict[str, dict[str, float]]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END as L_END
    from langgraph.graph import START as L_START
    from langgraph.graph import StateGraph as LStateGraph

    from tinyagents.graph import END, START, StateGraph
    from tinyagents.store.checkpoint import SqliteCheckpointer

    nodes = make_nodes(awaits)
    ours = build(StateGraph, START, END, nodes, {})
    theirs = build(LStateGraph, L_START, L_END, nodes, {})
    out: dict[str, dict[str, float]] = {}
    await check_same_results(ours, theirs, nodes)

    out["a_chain"] = {
        "tinyagents": await per_call(lambda: ours["chain"].run({"x": 0}), n),
        "langgraph": await per_call(lambda: theirs["chain"].ainvoke({"x": 0}), max(n // 20, 20)),
        "bare": await per_call(lambda: bare_chain(nodes), n),
    }
    out["b_fanout"] = {
        "tinyagents": await per_call(lambda: ours["fan"].run({}), n // 2),
        "langgraph": await per_call(lambda: theirs["fan"].ainvoke({}), max(n // 40, 20)),
        "bare": await per_call(lambda: bare_fan(nodes), n),
    }

    counter = iter(range(10**9))
    loop_n = max(n // 500, 4)
    async with SqliteCheckpointer(tmp / f"ours-{awaits}.db") as cp:
        graph = ours["loop"].compile(checkpointer=cp, recursion_limit=LOOP_STEPS + 5)
        t_ours = await per_call(
            lambda: graph.run({"x": 0}, thread_id=f"loop-{next(counter)}"), loop_n, repeats=3
        )
    async with AsyncSqliteSaver.from_conn_string(str(tmp / f"lg-{awaits}.db")) as saver:
        graph = theirs["loop"].compile(checkpointer=saver)
        config = {"recursion_limit": LOOP_STEPS + 5}

        def lg_loop() -> Awaitable[Any]:
            cfg = {**config, "configurable": {"thread_id": f"loop-{next(counter)}"}}
            return graph.ainvoke({"x": 0}, cfg)

        t_lg = await per_call(lg_loop, max(loop_n // 4, 2), repeats=3)
    out["c_loop_sqlite"] = {"tinyagents": t_ours, "langgraph": t_lg}
    return out


async def drain(stream: Any) -> None:
    async for _ in stream:
        pass


async def stream_times(awaits: bool, n: int) -> dict[str, dict[str, float]]:
    """Streaming the chain and the fan-out with ``values`` and with ``updates``, next to a
    plain run of the same graph (ours: ``graph.stream``; LangGraph: ``astream``)."""
    from langgraph.graph import END as L_END
    from langgraph.graph import START as L_START
    from langgraph.graph import StateGraph as LStateGraph

    from tinyagents.graph import END, START, StateGraph

    nodes = make_nodes(awaits)
    ours = build(StateGraph, START, END, nodes, {})
    theirs = build(LStateGraph, L_START, L_END, nodes, {})
    out: dict[str, dict[str, float]] = {}
    for graph, input, m in (("chain", {"x": 0}, n), ("fan", {}, n // 2)):
        mine, lg = ours[graph], theirs[graph]
        lg_n = max(m // 20, 20)
        for mode in ("values", "updates"):
            run, stream = await paired(
                lambda: mine.run(input),  # noqa: B023
                lambda: drain(mine.stream(input, mode=mode)),  # noqa: B023
                m,
            )
            lg_run, lg_stream = await paired(
                lambda: lg.ainvoke(input),  # noqa: B023
                lambda: drain(lg.astream(input, stream_mode=mode)),  # noqa: B023
                lg_n,
                repeats=3,
            )
            out[f"{graph}_{mode}"] = {
                "run": run,
                "stream": stream,
                "lg_invoke": lg_run,
                "lg_astream": lg_stream,
            }
    return out


async def chat_storage(tmp: Path) -> dict[str, float]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END as L_END
    from langgraph.graph import START as L_START
    from langgraph.graph import StateGraph as LStateGraph

    from tinyagents.graph import END, START, StateGraph
    from tinyagents.store.checkpoint import SqliteCheckpointer

    nodes = make_nodes(False)
    ours_db, lg_db = tmp / "chat-ours.db", tmp / "chat-lg.db"
    async with SqliteCheckpointer(ours_db) as cp:
        graph = build(StateGraph, START, END, nodes, {})["chat"].compile(checkpointer=cp)
        for turn in range(TURNS):
            msg = {"role": "user", "content": f"message {turn}"}
            await graph.run({"messages": [msg]}, thread_id="chat")
        assert len((await graph.get_state("chat")).values["messages"]) == 2 * TURNS
    async with AsyncSqliteSaver.from_conn_string(str(lg_db)) as saver:
        graph = build(LStateGraph, L_START, L_END, nodes, {})["chat"].compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "chat"}}
        for turn in range(TURNS):
            msg = {"role": "user", "content": f"message {turn}"}
            await graph.ainvoke({"messages": [msg]}, config)
    ours, theirs = db_bytes(ours_db), db_bytes(lg_db)
    return {"tinyagents": ours, "langgraph": theirs, "ratio": theirs / ours}


async def _figures(quick: bool) -> dict[str, Any]:
    n = 400 if quick else 4000
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        work = await scenario_times(True, n, tmp)
        trivial = await scenario_times(False, n, tmp)
        storage = await chat_storage(tmp)
        streaming = await stream_times(True, n)
    for row in streaming.values():
        row["stream_over_run"] = row["stream"] / row["run"]
        row["lg_stream_over_run"] = row["lg_astream"] / row["lg_invoke"]
        row["lg_over_ours"] = row["lg_astream"] / row["stream"]
    for table in (work, trivial):
        for row in table.values():
            row["lg_over_ours"] = row["langgraph"] / row["tinyagents"]
            if "bare" in row:
                row["ours_over_bare"] = row["tinyagents"] / row["bare"]
    targets = {
        "a >= 10x faster than langgraph": work["a_chain"]["lg_over_ours"] >= 10,
        "b >= 10x faster than langgraph": work["b_fanout"]["lg_over_ours"] >= 10,
        "c >= 5x faster than langgraph": work["c_loop_sqlite"]["lg_over_ours"] >= 5,
        "a within 3x of bare asyncio": work["a_chain"]["ours_over_bare"] <= 3,
        "500-turn storage >= 10x smaller": storage["ratio"] >= 10,
        "streaming values/updates <= 1.2x run": all(
            row["stream_over_run"] <= 1.2 for row in streaming.values()
        ),
    }
    return {
        "node_work": work,
        "trivial_nodes": trivial,
        "storage": storage,
        "streaming": streaming,
        "targets": targets,
    }


def figures(quick: bool = False) -> dict[str, Any]:
    """All numbers: seconds per invocation, ratios, bytes, and which targets are met."""
    return asyncio.run(_figures(quick))


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:10.1f} us"


def report(data: dict[str, Any]) -> str:
    lines = []
    for title, key in (
        ("node work = one await asyncio.sleep(0) per node", "node_work"),
        ("trivial nodes (never await)", "trivial_nodes"),
    ):
        lines.append(f"\n{title}")
        lines.append(
            f"  {'scenario':16} {'tinyagents':>13} {'langgraph':>13} {'bare':>13} "
            f"{'lg/ours':>8} {'ours/bare':>9}"
        )
        for name, row in data[key].items():
            bare = _us(row["bare"]) if "bare" in row else " " * 13
            vs_bare = f"{row['ours_over_bare']:9.2f}" if "ours_over_bare" in row else ""
            lines.append(
                f"  {name:16} {_us(row['tinyagents'])} {_us(row['langgraph'])} {bare} "
                f"{row['lg_over_ours']:8.1f} {vs_bare}"
            )
    lines.append("\nstreaming (node work as above): ours graph.stream, langgraph astream")
    lines.append(
        f"  {'scenario':16} {'run':>13} {'stream':>13} {'lg invoke':>13} {'lg astream':>13} "
        f"{'stream/run':>10} {'lg s/run':>8} {'lg/ours':>8}"
    )
    for name, row in data["streaming"].items():
        lines.append(
            f"  {name:16} {_us(row['run'])} {_us(row['stream'])} {_us(row['lg_invoke'])} "
            f"{_us(row['lg_astream'])} {row['stream_over_run']:10.2f} "
            f"{row['lg_stream_over_run']:8.2f} {row['lg_over_ours']:8.1f}"
        )
    s = data["storage"]
    lines.append(
        f"\ncheckpoint bytes after a {TURNS}-turn chat thread (SQLite): "
        f"tinyagents {s['tinyagents']:,}  langgraph {s['langgraph']:,}  "
        f"langgraph/ours {s['ratio']:.1f}x"
    )
    lines.append("\ntargets:")
    lines += [f"  [{'x' if ok else ' '}] {name}" for name, ok in data["targets"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    try:
        import langgraph  # noqa: F401  # every figure here is a ratio against it
    except ImportError:
        print("graph: skipped, LangGraph is not installed; pip install -e '.[bench]' (make bench)")
        return
    print(report(figures(quick="--quick" in args)))


if __name__ == "__main__":
    main()
