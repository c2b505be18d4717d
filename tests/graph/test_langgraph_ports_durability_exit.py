"""``durability="exit"`` (LangGraph's: persist only when the run ends), ported: the same
program on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``
(LangGraph's ``test_large_cases.py`` runs its graphs with ``durability="exit"`` and reads the
thread's state after each run, a pause and a resume). Then what ours adds: nothing is in
the store while the run is under way (what a crash then loses: a real ``os._exit`` in a
process of its own), a failed run's saves, every backend, ``stream`` / ``iter``, and the
refusal in a ``Runtime`` (steering needs each step's checkpoint).
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import sys
import textwrap
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from graph_exit_flush_worker import dying, fan_out
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph_kit import OURS, THEIRS, cfg, lg_memory
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents.errors import ArgumentError
from tinyagents.graph import Command, StateGraph
from tinyagents.store.checkpoint import (
    Checkpointer,
    ExitBuffer,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SqliteCheckpointer,
    WriteRecord,
)


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def chain(g: Any, seen: list[Any] | None = None, fail: list[int] | None = None) -> Any:
    """START -> a -> b -> c. ``seen``: b appends what it finds saved of the thread;
    ``fail``: c fails while it is non-empty (popping it)."""

    def a(state: Log) -> Log:
        return {"log": ["a"]}

    async def b(state: Log) -> Log:
        if seen is not None:
            seen.append("b")
        return {"log": ["b"]}

    def c(state: Log) -> Log:
        if fail:
            fail.pop()
            raise ValueError("c failed")
        return {"log": ["c"]}

    return (
        g.StateGraph(Log)
        .add_node("a", a)
        .add_node("b", b)
        .add_node("c", c)
        .add_edge(g.START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
    )


async def saved(graph: Any, thread: str) -> list[Any]:
    """Our thread's checkpoints, newest first, as what each holds."""
    return [
        (c.step, c.source, c.next, c.snapshot, c.written, c.metadata.get("ran"), state.values)
        for c in await graph.history(thread)
        for state in [await graph.get_state(thread, c.checkpoint_id)]
    ]


async def their_history(graph: Any, thread: str) -> list[Any]:
    return [s async for s in graph.aget_state_history(cfg(thread))]


async def test_exit_saves_the_finished_run_once_at_its_end(checkpointer: Checkpointer) -> None:
    # LangGraph: test_large_cases.py's runs with durability="exit" (the state read after)
    theirs = chain(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    ours = chain(OURS).compile(checkpointer=checkpointer)
    for _ in range(2):  # a second run continues the thread saved by the first
        want = await theirs.ainvoke({"log": ["in"]}, cfg("t"), durability="exit")
        got = await ours.run({"log": ["in"]}, thread_id="t", durability="exit")
        assert got.state == want
    theirs_state = await theirs.aget_state(cfg("t"))
    ours_state = await ours.get_state("t")
    assert ours_state.values == theirs_state.values
    assert ours_state.next == theirs_state.next == ()
    # LangGraph keeps the last checkpoint of each run; ours keeps each step's, as a "sync"
    # run would, all saved when the run ended (see docs/graph.md, "Run context")
    assert len(await their_history(theirs, "t")) == 2
    sync = chain(OURS).compile(checkpointer=MemoryCheckpointer())
    for _ in range(2):
        await sync.run({"log": ["in"]}, thread_id="t")
    assert await saved(ours, "t") == await saved(sync, "t")


async def test_exit_saves_an_interrupted_run_and_its_resume(checkpointer: Checkpointer) -> None:
    # LangGraph: test_large_cases.py::test_nested_graph_state (invoke, then invoke(None),
    # both durability="exit"), with an interrupt() and its Command(resume=...)
    def build(g: Any) -> Any:
        def ask(state: Log) -> Log:
            return {"log": [g.interrupt("name?")]}

        graph = chain(g).add_node("ask", ask).add_edge("c", "ask")
        return graph

    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    ours = build(OURS).compile(checkpointer=checkpointer)
    await theirs.ainvoke({"log": []}, cfg("t"), durability="exit")
    paused = await ours.run({"log": []}, thread_id="t", durability="exit")
    assert paused.status == "interrupted"
    theirs_state = await theirs.aget_state(cfg("t"))
    ours_state = await ours.get_state("t")
    assert ours_state.values == theirs_state.values == {"log": ["a", "b", "c"]}
    assert ours_state.next == theirs_state.next == ("ask",)
    assert [i.value for i in ours_state.interrupts] == [i.value for i in theirs_state.interrupts]
    want = await theirs.ainvoke(THEIRS.Command(resume="ada"), cfg("t"), durability="exit")
    got = await ours.run(Command(resume="ada"), thread_id="t", durability="exit")
    assert got.state == want == {"log": ["a", "b", "c", "ada"]}
    assert (await ours.get_state("t")).values == (await theirs.aget_state(cfg("t"))).values


async def test_a_failed_exit_run_saves_its_last_state_and_a_resume_goes_on_from_it(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: _loop.py's _suppress_interrupt saves at exit on an error too: invoke(None)
    # then goes on from the failed step, the steps before it not run again
    theirs_seen: list[Any] = []
    ours_seen: list[Any] = []
    theirs = chain(THEIRS, theirs_seen, [1]).compile(checkpointer=lg_memory.InMemorySaver())
    ours = chain(OURS, ours_seen, [1]).compile(checkpointer=checkpointer)
    with pytest.raises(ValueError, match="c failed"):
        await theirs.ainvoke({"log": []}, cfg("t"), durability="exit")
    failed = await ours.run({"log": []}, thread_id="t", durability="exit")
    assert failed.status == "failed" and isinstance(failed.error, ValueError)
    theirs_state = await theirs.aget_state(cfg("t"))
    ours_state = await ours.get_state("t")
    assert ours_state.values == theirs_state.values == {"log": ["a", "b"]}
    assert ours_state.next == theirs_state.next == ("c",)
    want = await theirs.ainvoke(None, cfg("t"), durability="exit")
    got = await ours.run(None, thread_id="t", durability="exit")
    assert got.state == want == {"log": ["a", "b", "c"]}
    assert ours_seen == theirs_seen == ["b"]  # b ran once


CRASH = """
import asyncio, operator, os, sys
from typing import Annotated, TypedDict
from tinyagents.graph import START, StateGraph
from tinyagents.store.checkpoint import SqliteCheckpointer

class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]

def crash(state):
    os._exit(3)  # the process dies in the third step, as a SIGKILL would end it

async def main():
    cp = SqliteCheckpointer(sys.argv[1])
    await cp.setup()
    graph = (
        StateGraph(Log)
        .add_node("a", lambda s: {"log": ["a"]})
        .add_node("b", lambda s: {"log": ["b"]})
        .add_node("crash", crash)
        .add_edge(START, "a").add_edge("a", "b").add_edge("b", "crash")
        .compile(checkpointer=cp)
    )
    await graph.run({"log": ["in"]}, thread_id="t", durability=sys.argv[2])

asyncio.run(main())
"""


@pytest.mark.parametrize("durability", ["exit", "sync"])
async def test_what_a_crash_mid_run_loses(tmp_path: Path, durability: str) -> None:
    # a process that dies during an "exit" run leaves the thread as it was before the run
    # (nothing of the run is in the file); a "sync" run leaves each finished step
    path = tmp_path / "crash.db"
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(CRASH))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(path), durability, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 3, err.decode()
    cp = SqliteCheckpointer(path)
    await cp.setup()
    try:
        graph = (  # the crashed graph, whose last node does not crash here
            StateGraph(Log)
            .add_node("a", lambda s: {"log": ["a"]})
            .add_node("b", lambda s: {"log": ["b"]})
            .add_node("crash", lambda s: {"log": ["crash"]})
            .add_edge("__start__", "a")
            .add_edge("a", "b")
            .add_edge("b", "crash")
            .compile(checkpointer=cp)
        )
        history = await graph.history("t")
        if durability == "exit":
            assert history == []
            assert await cp.latest("t") is None
        else:
            assert (await graph.get_state("t")).values == {"log": ["in", "a", "b"]}
            assert (await graph.get_state("t")).next == ("crash",) and len(history) == 4
            # run(None) goes on from the last saved step
            assert (await graph.run(None, thread_id="t")).state["log"] == ["in", "a", "b", "crash"]
    finally:
        await cp.aclose()


async def test_nothing_is_saved_while_an_exit_run_is_under_way(
    checkpointer: Checkpointer,
) -> None:
    seen: list[Any] = []

    async def look(state: Log) -> Log:
        seen.append(await checkpointer.latest("t"))  # the store itself, mid-run
        return {"log": ["look"]}

    graph = (
        chain(OURS).add_node("look", look).add_edge("c", "look").compile(checkpointer=checkpointer)
    )
    await graph.run({"log": []}, thread_id="t")  # a "sync" run first: its head stays put
    head = await checkpointer.latest("t")
    assert head is not None and seen[-1].checkpoint_id != head.checkpoint_id
    seen.clear()
    result = await graph.run({"log": []}, thread_id="t", durability="exit")
    assert seen[0].checkpoint_id == head.checkpoint_id  # the thread as the last run left it
    assert result.state["log"][-4:] == ["a", "b", "c", "look"]
    assert (await checkpointer.latest("t")).checkpoint_id != head.checkpoint_id  # saved now
    assert (await graph.get_state("t")).values == result.state


async def test_stream_and_iter_with_exit_save_at_the_end(checkpointer: Checkpointer) -> None:
    graph = chain(OURS).compile(checkpointer=checkpointer)
    items = [
        item
        async for item in graph.stream(
            {"log": []}, thread_id="s", mode="updates", durability="exit"
        )
    ]
    assert items == [{"a": {"log": ["a"]}}, {"b": {"log": ["b"]}}, {"c": {"log": ["c"]}}]
    assert (await graph.get_state("s")).values == {"log": ["a", "b", "c"]}
    async with graph.iter({"log": []}, thread_id="i", durability="exit") as run:
        async for _ in run.supersteps():
            assert await checkpointer.latest("i") is None
    assert (await graph.get_state("i")).values == {"log": ["a", "b", "c"]}


class Count(TypedDict, total=False):
    n: Annotated[int, operator.add]
    log: Annotated[list[int], operator.add]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(runs=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=4))
async def test_exit_runs_leave_the_thread_as_sync_runs_do(runs: list[tuple[int, bool]]) -> None:
    # any mix of exit and sync runs (loops of 0-5 steps, snapshots every 3 checkpoints, so
    # an exit run's deltas sit on a saved head that is a delta) leaves the same thread
    def build(cp: Checkpointer) -> Any:
        def step(state: Count) -> Count:
            return {"n": 1, "log": [state.get("n", 0)]}

        return (
            StateGraph(Count)
            .add_node("step", step)
            .add_edge("__start__", "step")
            .add_conditional_edges("step", lambda s: "step" if s["n"] % 6 else "__end__")
            .compile(checkpointer=cp)
        )

    mixed_cp = MemoryCheckpointer(snapshot_every=3)
    sync_cp = MemoryCheckpointer(snapshot_every=3)
    mixed, sync = build(mixed_cp), build(sync_cp)
    for steps, exit in runs:
        start = {"n": 6 - steps if steps else 0}
        a = await mixed.run(start, thread_id="t", durability="exit" if exit else None)
        b = await sync.run(start, thread_id="t")
        assert a.state == b.state
    assert await saved(mixed, "t") == await saved(sync, "t")


async def test_the_buffer_reads_the_store_below_it_and_flushes_in_order() -> None:
    base = MemoryCheckpointer()
    graph = chain(OURS).compile(checkpointer=base)
    await graph.run({"log": []}, thread_id="t")
    head = await base.latest("t")
    assert head is not None
    await base.put_writes("t", "", head.frontier_id, [WriteRecord(task_id="x", kind="result")])
    buffer = ExitBuffer(base)
    assert await buffer.latest("t") is not None and not buffer.held
    await buffer.put_writes(
        "t", "", head.frontier_id, [WriteRecord(task_id="x", kind="result", value=1)]
    )
    got = await buffer.get_writes("t", "", head.frontier_id)
    assert [(w.task_id, w.value) for w in got] == [("x", 1)]  # replaced in place
    assert (await base.get_writes("t", "", head.frontier_id))[0].value is None  # not yet
    await buffer.flush()
    assert (await base.get_writes("t", "", head.frontier_id))[0].value == 1
    assert not buffer.held
    await buffer.aclose()
    assert await base.latest("t") is not None  # the base stays open


async def test_exit_is_refused_in_a_runtime_before_anything_runs(rt: Any) -> None:
    # steering a graph run needs each step's checkpoint: a command is kept with it, a fork
    # and a restart go on from it; so a run in a Runtime refuses "exit" (typed, at once)
    ran: list[str] = []
    cp = MemoryCheckpointer()
    graph = chain(OURS, ran).compile(checkpointer=cp)
    with pytest.raises(ArgumentError, match=r'durability="exit".*Runtime'):
        await rt.start_graph(graph, {"log": []}, thread_id="r", durability="exit")
    with pytest.raises(ArgumentError, match=r'durability="exit".*Runtime'):
        await graph.run({"log": []}, thread_id="r", runtime=rt, durability="exit")
    with pytest.raises(ArgumentError, match=r'durability="exit".*Runtime'):
        graph.stream({"log": []}, thread_id="r", runtime=rt, durability="exit")
    assert ran == [] and await cp.latest("r") is None
    result = await graph.run({"log": []}, thread_id="r", runtime=rt, durability="sync")
    assert result.state == {"log": ["a", "b", "c"]}


async def test_exit_without_a_checkpointer_runs_as_any_run() -> None:
    graph = chain(OURS).compile()
    # (nothing is saved by such a run: nothing to hold either)
    assert (await graph.run({"log": []}, durability="exit")).state == {"log": ["a", "b", "c"]}


@pytest.mark.parametrize("durability", ["exit", "sync"])
async def test_a_cancelled_exit_run_saves_what_it_did_as_a_sync_run(
    checkpointer: Checkpointer, durability: str
) -> None:
    started = asyncio.Event()

    async def stuck(state: Log) -> Log:
        started.set()
        await asyncio.Event().wait()  # never set: the run is cancelled here
        return {}

    graph = (
        StateGraph(Log)
        .add_node("a", lambda s: {"log": ["a"]})
        .add_node("stuck", stuck)
        .add_edge("__start__", "a")
        .add_edge("a", "stuck")
        .compile(checkpointer=checkpointer)
    )
    task = asyncio.create_task(graph.run({"log": []}, thread_id="t", durability=durability))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    state = await graph.get_state("t")
    assert (state.values, state.next) == ({"log": ["a"]}, ("stuck",))


async def test_checkpoint_during_is_the_older_spelling() -> None:
    # LangGraph: test_deprecation.py::test_checkpoint_during_deprecation_state_graph:
    # checkpoint_during=False is durability="exit", True "async" (ours: "sync"), with a
    # DeprecationWarning; given with durability, an error
    theirs = chain(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    cp = MemoryCheckpointer()
    ours = chain(OURS).compile(checkpointer=cp)
    match = "`checkpoint_during` is deprecated"
    for during in (True, False):
        with pytest.warns(DeprecationWarning, match=match):
            want = await theirs.ainvoke({"log": []}, cfg(str(during)), checkpoint_during=during)
        with pytest.warns(DeprecationWarning, match=match):
            got = await ours.run({"log": []}, thread_id=str(during), checkpoint_during=during)
        assert got.state == want
    with pytest.warns(DeprecationWarning, match=match):
        items = [
            i
            async for i in ours.stream(
                {"log": []}, thread_id="s", mode="updates", checkpoint_during=False
            )
        ]
    assert len(items) == 3 and (await ours.get_state("s")).values == {"log": ["a", "b", "c"]}
    with pytest.warns(DeprecationWarning, match=match):
        async with ours.iter({"log": []}, thread_id="i", checkpoint_during=False) as run:
            async for _ in run.supersteps():
                assert await cp.latest("i") is None  # "exit": nothing saved yet
    with pytest.raises(ValueError, match="Cannot use both"), pytest.warns(DeprecationWarning):
        await theirs.ainvoke({"log": []}, cfg("x"), checkpoint_during=True, durability="sync")
    with pytest.raises(ArgumentError, match="Cannot use both"):
        await ours.run({"log": []}, thread_id="x", checkpoint_during=True, durability="sync")
    with pytest.raises(ArgumentError, match="True or False"):
        await ours.run({"log": []}, thread_id="x", checkpoint_during="no")  # type: ignore[arg-type]
    assert await cp.latest("x") is None


# -- a crash while the run's saves are flushed ------------------------------------------------


async def written_frontiers(cp: Checkpointer, thread: str) -> set[str]:
    """The frontiers the thread has pending writes of, read from the storage itself."""
    sql = "SELECT DISTINCT frontier_id FROM checkpoint_writes WHERE thread_id = "
    if isinstance(cp, SqliteCheckpointer):
        with closing(sqlite3.connect(cp.path)) as db:
            return {r[0] for r in db.execute(sql + "?", (thread,))}
    import asyncpg

    assert isinstance(cp, PostgresCheckpointer)
    conn = await asyncpg.connect(postgres_dsn(), server_settings={"search_path": cp.schema})
    try:
        return {r[0] for r in await conn.fetch(sql + "$1", thread)}
    finally:
        await conn.close()


async def check_left_as_before_the_run(cp: Checkpointer, thread: str) -> None:
    """What a crash (or a failed save) in the flush of a fan-out run left on ``thread``:
    nothing, read from the storage itself; the run made again saves all of it, as a "sync"
    run does."""
    assert await cp.latest(thread) is None and await cp.list(thread) == []
    assert await written_frontiers(cp, thread) == set()
    sync = fan_out(MemoryCheckpointer(), [])
    await sync.run({"log": ["in"]}, thread_id=thread)
    graph = fan_out(cp, [])
    result = await graph.run({"log": ["in"]}, thread_id=thread, durability="exit")
    assert result.state == {"log": ["in", "a", "b", "b2", "c"]}
    assert await saved(graph, thread) == await saved(sync, thread)


class Killed(BaseException):
    """The flush stopped, in this process, as by the process ending."""


def kill() -> None:
    raise Killed


def fail() -> None:
    raise OSError("disk I/O error (a save of the flush failed)")


@pytest.mark.parametrize("stop", [kill, fail])
async def test_a_stop_at_each_item_of_the_flush_leaves_the_thread_as_before(
    tmp_path: Path, stop: Any
) -> None:
    # in this process: the flush stops after each of its items in turn (a BaseException, as
    # the process ending, or a save that fails), on a real SQLite file, one thread per
    # place: its saves, one transaction, left some on the file (those before the stop)
    for after in range(1, 8):  # 5 checkpoints and the 2 pending writes of the fan-out step
        cp = dying(SqliteCheckpointer, after, stop)(tmp_path / f"{after}.db")  # type: ignore[call-arg]
        await cp.setup()
        try:
            with pytest.raises((Killed, OSError)) as stopped:
                await fan_out(cp, []).run({"log": ["in"]}, thread_id="t", durability="exit")
            assert isinstance(stopped.value, Killed if stop is kill else OSError)
            type(cp).saved = -1_000  # (counts no more)
            await check_left_as_before_the_run(cp, "t")
        finally:
            await cp.aclose()


@pytest.mark.parametrize("after", [1, 4, 7])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_what_a_crash_during_the_flush_leaves(
    tmp_path: Path, backend: str, after: int
) -> None:
    # a real process killed (os._exit) once ``after`` items of the flush are saved: 1, the
    # run's input checkpoint; 4, then the next two and one of the fan-out step's two writes;
    # 7, all but the commit: nothing of the run is left
    script = Path(__file__).with_name("graph_exit_flush_worker.py")
    if backend == "sqlite":
        cp: Checkpointer = SqliteCheckpointer(tmp_path / "crash.db")
        where, schema = str(tmp_path / "crash.db"), ""
    else:
        where, schema = postgres_dsn(), pg_schema(tmp_path)
        cp = PostgresCheckpointer(where, schema=schema)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), backend, where, schema, str(after),
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 3, err.decode()
    await cp.setup()
    try:
        await check_left_as_before_the_run(cp, "t")
    finally:
        await cp.aclose()
        await drop_pg_schemas()


async def test_a_failed_save_in_the_flush_on_postgres_leaves_the_thread_as_before(
    tmp_path: Path,
) -> None:
    # as on SQLite: a save that fails half way through the flush undoes the ones before it
    cp = dying(PostgresCheckpointer, 4, fail)(postgres_dsn(), schema=pg_schema(tmp_path))  # type: ignore[call-arg]
    await cp.setup()
    try:
        with pytest.raises(OSError, match="disk I/O error"):
            await fan_out(cp, []).run({"log": ["in"]}, thread_id="t", durability="exit")
        type(cp).saved = -1_000
        await check_left_as_before_the_run(cp, "t")
    finally:
        await cp.aclose()
        await drop_pg_schemas()


async def test_a_crash_in_the_flush_of_a_subgraph_run_goes_on_from_where_it_left() -> None:
    # a sub-graph's checkpoints (its own namespace) are saved between its parent's, as the
    # run made them; on the memory checkpointer, which has no transactions, a stop after each
    # item of the flush, then run(None), ends as "sync"

    def build(cp: Checkpointer) -> Any:
        sub = (
            StateGraph(Log)
            .add_node("s1", lambda s: {"log": ["s1"]})
            .add_node("s2", lambda s: {"log": ["s2"]})
            .add_edge("__start__", "s1")
            .add_edge("s1", "s2")
            .compile(checkpointer=True)
        )
        return (
            StateGraph(Log)
            .add_node("a", lambda s: {"log": ["a"]})
            .add_node("sub", sub)
            .add_node("c", lambda s: {"log": ["c"]})
            .add_edge("__start__", "a")
            .add_edge("a", "sub")
            .add_edge("sub", "c")
            .compile(checkpointer=cp)
        )

    sync = build(MemoryCheckpointer())
    want = (await sync.run({"log": ["in"]}, thread_id="t")).state
    # the flush: the graph's first 3 checkpoints, its sub-graph's 4, the graph's last 2
    for after, left in enumerate([1, 2, 3, 3, 3, 3, 3, 4, 5], 1):
        cp = dying(MemoryCheckpointer, after, kill)()
        with pytest.raises(Killed):
            await build(cp).run({"log": ["in"]}, thread_id="t", durability="exit")
        type(cp).saved = -1_000  # (counts no more)
        graph = build(cp)
        assert len(await graph.history("t")) == left
        assert (await graph.run(None, thread_id="t")).state == want
        assert await saved(graph, "t") == await saved(sync, "t")


# -- a sub-graph call's own durability -------------------------------------------------------


async def their_sub_saved_while_called(parent: str, own: str | None) -> bool:
    """LangGraph: whether a sub-graph called from a node (``durability=own`` or none) had
    saved checkpoints by its second node, in a run with ``durability=parent``."""
    saver = lg_memory.InMemorySaver()
    seen: list[int] = []

    async def s2(state: Log) -> Log:
        seen.append(sum(len(c) for d in saver.storage.values() for ns, c in d.items() if ns))
        return {"log": ["s2"]}

    sub = (
        THEIRS.StateGraph(Log)
        .add_node("s1", lambda s: {"log": ["s1"]})
        .add_node("s2", s2)
        .add_edge(THEIRS.START, "s1")
        .add_edge("s1", "s2")
        .compile()
    )

    async def call(state: Log) -> Log:
        await sub.ainvoke(state, **({} if own is None else {"durability": own}))
        return {"log": ["called"]}

    graph = THEIRS.StateGraph(Log).add_node("call", call).add_edge(THEIRS.START, "call")
    await graph.compile(checkpointer=saver).ainvoke({"log": []}, cfg("t"), durability=parent)
    return seen[0] > 0


@pytest.mark.parametrize(
    ("parent", "own"), [("exit", None), ("exit", "sync"), ("sync", "exit"), ("sync", None)]
)
async def test_a_subgraph_calls_own_durability_wins_as_in_langgraph(
    tmp_path: Path, parent: str, own: str | None
) -> None:
    # a sub-graph called with durability= followed its caller's all the same: an "exit"
    # run's "sync" call held its checkpoints to the run's end, a "sync" run's "exit" call
    # saved each step; LangGraph saves the call by its own
    want = await their_sub_saved_while_called(parent, own)
    assert want is ((own or parent) != "exit")
    path = tmp_path / "t.db"
    seen: list[int] = []

    def s2(state: Log) -> Log:
        with closing(sqlite3.connect(path)) as db:
            seen.append(db.execute("SELECT count(*) FROM checkpoints WHERE ns != ''").fetchone()[0])
        return {"log": ["s2"]}

    sub = (
        StateGraph(Log)
        .add_node("s1", lambda s: {"log": ["s1"]})
        .add_node("s2", s2)
        .add_edge("__start__", "s1")
        .add_edge("s1", "s2")
        .compile()
    )

    async def call(state: Log) -> Log:
        await sub.run(state, **({} if own is None else {"durability": own}))
        return {"log": ["called"]}

    async with SqliteCheckpointer(path) as cp:
        graph = (
            StateGraph(Log)
            .add_node("call", call)
            .add_edge("__start__", "call")
            .compile(checkpointer=cp)
        )
        result = await graph.run({"log": []}, thread_id="t", durability=parent)  # type: ignore[arg-type]
        assert result.status == "completed", result.error
        assert (seen[0] > 0) is want
        # and once the run ended, the call's checkpoints are all saved, as a "sync" run's
        with closing(sqlite3.connect(path)) as db:
            saved_sub = db.execute("SELECT count(*) FROM checkpoints WHERE ns != ''").fetchone()
        assert saved_sub[0] == 4  # whichever saved them, the same four
        assert [c.step for c in await cp.list("t")] == [1, 0, -1]


async def test_a_subgraph_call_in_a_runtime_refuses_exit(rt: Any) -> None:
    # as its caller's own run does: steering needs each step's checkpoint
    sub = StateGraph(Log).add_node("s", lambda s: {"log": ["s"]}).add_edge("__start__", "s")

    async def call(state: Log) -> Log:
        await sub.compile().run(state, durability="exit")
        return {"log": ["called"]}

    graph = StateGraph(Log).add_node("call", call).add_edge("__start__", "call")
    result = await graph.compile(checkpointer=MemoryCheckpointer()).run(
        {"log": []}, thread_id="t", runtime=rt
    )
    assert result.status == "failed" and isinstance(result.error, ArgumentError)
    assert 'durability="exit" is not supported for a run in a Runtime' in str(result.error)
