"""A session turn's hold on its thread is in the durable store: runtimes of other processes
on one SQLite file or one PostgreSQL database refuse a second writer too.

The hold was the runtime's own (``RunRegistry``): two runtimes on one store each let a
session's turn run on the same thread, and the two transcripts forked. A turn now holds its
thread in the store as well (one step: of two takers at once, one gets it), lets go as its run
ends, and a holder whose process was killed holds nothing (judged as a claimed run is: its
runtime gone, or its heartbeat old). The in-memory runtime keeps the hold to itself. Runs are
held at gates, never by sleeps.
"""

from __future__ import annotations

import asyncio
import operator
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Agent, SubAgent
from tinyagents.errors import StoreError, ThreadBusy
from tinyagents.graph import END, START, CompiledGraph, StateGraph, interrupt
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunHandle, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    reply,
)

WORKER = Path(__file__).with_name("session_thread_crash_worker.py")


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A real SQLite file, or a PostgreSQL schema of the test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    dsn = postgres_dsn()
    sep = "&" if "?" in dsn else "?"
    yield f"{dsn}{sep}schema={pg_schema()}"
    await drop_pg_schemas()


def chat(model: Any, name: str = "chat") -> SubAgent:
    return SubAgent(Agent(name, model))


def never_called() -> tuple[FunctionModel, list[object]]:
    calls: list[object] = []
    return FunctionModel(lambda r: calls.append(r) or "must not run"), calls


async def test_a_turn_in_another_runtime_on_the_store_is_thread_busy(store_url: str) -> None:
    gate = Gate("first")
    async with Runtime(store_url, testing=True) as a, Runtime(store_url, testing=True) as b:
        first = chat(gate.model("first answer")).session(runtime=a, thread_id="t-1")
        turn = asyncio.ensure_future(first.send("one"))
        await gate.entered.wait()
        model, calls = never_called()
        second = chat(model).session(runtime=b, thread_id="t-1")
        with pytest.raises(ThreadBusy) as busy:
            await second.send("two")
        assert busy.value.thread_id == "t-1"
        assert busy.value.held_by == first.runs[0]
        assert calls == []
        assert second.runs == []
        gate.open()
        assert await turn == "first answer"
        # the turn ended: it let go, and the other runtime's turn runs at once
        after = chat(ScriptedModel([reply("second answer")])).session(runtime=b, thread_id="t-1")
        assert await after.send("two") == "second answer"


async def test_a_plain_run_in_another_runtime_on_a_held_thread_is_thread_busy(
    store_url: str,
) -> None:
    gate = Gate("turn")
    async with Runtime(store_url, testing=True) as a, Runtime(store_url, testing=True) as b:
        session = chat(gate.model()).session(runtime=a, thread_id="t-2")
        turn = asyncio.ensure_future(session.send("one"))
        await gate.entered.wait()
        model, calls = never_called()
        with pytest.raises(ThreadBusy) as busy:
            await b.start(Agent("plain", model), "hi", thread_id="t-2")
        assert busy.value.held_by == (await _holder(a, "t-2"))
        assert calls == [] and b.runs.list() == []
        gate.open()
        await turn


async def test_another_tenants_thread_of_that_id_is_not_held_elsewhere(store_url: str) -> None:
    gate = Gate("turn")
    async with Runtime(store_url, testing=True) as a, Runtime(store_url, testing=True) as b:
        session = chat(gate.model()).session(runtime=a, thread_id="t-3")
        turn = asyncio.ensure_future(session.send("one"))
        await gate.entered.wait()
        other = await b.start(
            Agent("other", ScriptedModel([reply("theirs")])),
            "hi",
            thread_id="t-3",
            tenant_id="acme",
            hold_thread=True,
        )
        assert (await other.result()).output == "theirs"
        gate.open()
        await turn


async def test_of_two_runtimes_taking_one_thread_at_once_exactly_one_gets_it(
    store_url: str,
) -> None:
    gates = [Gate("a"), Gate("b")]
    async with Runtime(store_url, testing=True) as a, Runtime(store_url, testing=True) as b:
        started = await asyncio.gather(
            a.start(Agent("a", gates[0].model()), "x", thread_id="t-4", hold_thread=True),
            b.start(Agent("b", gates[1].model()), "x", thread_id="t-4", hold_thread=True),
            return_exceptions=True,
        )
        handles = [s for s in started if isinstance(s, RunHandle)]
        refused = [s for s in started if not isinstance(s, RunHandle)]
        assert len(handles) == 1, started
        (error,) = refused
        assert isinstance(error, ThreadBusy)
        assert error.held_by == handles[0].run_id
        for gate in gates:
            gate.open()
        assert (await handles[0].result()).status is RunStatus.COMPLETED


async def test_a_failed_start_lets_go_of_the_stored_hold(store_url: str) -> None:
    """A turn refused at its start (its run id runs in the other runtime) leaves its thread
    free in the store: a turn of the other runtime takes it at once."""
    gate = Gate("other")
    async with Runtime(store_url, testing=True) as a, Runtime(store_url, testing=True) as b:
        other = await a.start(Agent("clerk", gate.model()), "x", run_id="job-1")
        await gate.entered.wait()
        with pytest.raises(Exception, match="running in another runtime"):
            await b.start(
                Agent("clerk", ScriptedModel([reply("no")])),
                "x",
                run_id="job-1",
                thread_id="t-5",
                hold_thread=True,
            )
        turn = await a.start(
            Agent("t", ScriptedModel([reply("free")])), "x", thread_id="t-5", hold_thread=True
        )
        assert (await turn.result()).output == "free"
        gate.open()
        await other.result()


async def test_a_reopened_turn_is_not_reopened_beside_a_turn_of_another_runtime(
    store_url: str,
) -> None:
    """An END_OF_TURN message reopens a finished turn only if no turn of another runtime on
    the store holds the thread meanwhile: it fails saying the thread is busy."""
    gate = Gate("b")
    async with Runtime(store_url, testing=True) as a, Runtime(store_url, testing=True) as b:
        first = await a.start(
            Agent("a", ScriptedModel([reply("one"), reply("two")])),
            "x",
            thread_id="t-6",
            hold_thread=True,
        )
        assert (await first.result()).output == "one"
        held = await b.start(Agent("b", gate.model()), "x", thread_id="t-6", hold_thread=True)
        await gate.entered.wait()
        recorder = EventRecorder()
        a.bus.add_sink(recorder)
        receipt = await a.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(first.run_id),
                actor=SteeringActor.test(),
                kind=SteeringKind.ADD_INSTRUCTION,
                payload={"text": "and then?"},
                delivery=SteeringDelivery.END_OF_TURN,
            )
        )
        (failed,) = [
            e
            for e in recorder.events
            if e.type == "steering.failed" and e.correlation_id == receipt.correlation_id
        ]
        assert f"thread 't-6' is busy, run {held.run_id} is writing it" in (failed.reason or "")
        assert first.status is RunStatus.COMPLETED
        gate.open()
        await held.result()


async def test_the_in_memory_runtime_keeps_its_hold_to_itself() -> None:
    gate = Gate("turn")
    async with Runtime(testing=True) as a, Runtime(testing=True) as b:
        session = chat(gate.model()).session(runtime=a, thread_id="t-7")
        turn = asyncio.ensure_future(session.send("one"))
        await gate.entered.wait()
        other = chat(ScriptedModel([reply("own thread")])).session(runtime=b, thread_id="t-7")
        assert await other.send("two") == "own thread"
        gate.open()
        await turn


@pytest.mark.parametrize("kind", ["turn", "graph"])
async def test_a_hold_whose_process_was_killed_holds_nothing(tmp_path: Path, kind: str) -> None:
    """A worker process holding thread ``t-crash`` in a turn (or a graph run) refuses this
    process's turn; killed with SIGKILL (its run never ends, nothing lets go), its hold in
    the file holds nothing: the next turn runs at once (its runtime is known gone on this
    host)."""
    db = tmp_path / "runs.db"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        str(db),
        kind,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        if not line.startswith(b"ready"):
            pytest.fail(f"worker: {line!r} {(await proc.stderr.read()).decode()}")
        async with Runtime(f"sqlite:///{db}", testing=True) as rt:
            model, calls = never_called()
            with pytest.raises(ThreadBusy) as busy:
                await chat(model).session(runtime=rt, thread_id="t-crash").send("hello")
            assert busy.value.held_by is not None and calls == []
            proc.kill()
            await proc.wait()
            session = chat(ScriptedModel([reply("after the crash")])).session(
                runtime=rt, thread_id="t-crash"
            )
            assert await session.send("hello") == "after the crash"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _holder(rt: Runtime, thread_id: str) -> str:
    (handle,) = [h for h in rt.runs.handles() if h.info.thread_id == thread_id]
    return handle.run_id


async def test_a_reopen_whose_store_fails_fails_its_message_and_keeps_the_thread_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reopen's hold in the store failed (a store error, not ``ThreadBusy``): the message
    fails as a late one saying why, the turn stays completed, and nothing of the thread stays
    taken in the runtime: the next turn runs."""
    async with Runtime(f"sqlite:///{tmp_path / 'runs.db'}", testing=True) as rt:
        first = await rt.start(
            Agent("a", ScriptedModel([reply("one")])), "x", thread_id="t-8", hold_thread=True
        )
        assert (await first.result()).output == "one"

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise StoreError("the disk is gone")

        monkeypatch.setattr(rt.store, "hold_thread", broken)
        recorder = EventRecorder()
        rt.bus.add_sink(recorder)
        receipt = await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(first.run_id),
                actor=SteeringActor.test(),
                kind=SteeringKind.ADD_INSTRUCTION,
                payload={"text": "and then?"},
                delivery=SteeringDelivery.END_OF_TURN,
            )
        )
        (failed,) = [
            e
            for e in recorder.events
            if e.type == "steering.failed" and e.correlation_id == receipt.correlation_id
        ]
        assert "could not be held in the store: the disk is gone" in (failed.reason or "")
        assert first.status is RunStatus.COMPLETED
        monkeypatch.undo()
        turn = await rt.start(
            Agent("b", ScriptedModel([reply("two")])), "x", thread_id="t-8", hold_thread=True
        )
        assert (await turn.result()).output == "two"


class _Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def _parked_graph(gate: Gate) -> CompiledGraph:
    """One node, parked at ``gate`` until it opens."""

    async def work(state: _Log) -> _Log:
        await gate.wait()
        return {"log": ["work"]}

    graph = StateGraph(_Log).add_node("work", work)
    return graph.add_edge(START, "work").add_edge("work", END).compile()


async def test_a_turn_in_another_runtime_on_a_thread_a_graph_run_writes_is_thread_busy(
    store_url: str,
) -> None:
    """A graph run of runtime A writes thread t-g (parked inside its node, before its first
    snapshot is saved): a session's turn of runtime B on t-g is refused naming the graph run,
    as in one runtime, and runs nothing, and so is a graph run of B on t-g (one writer); a
    plain agent run of B runs beside it, as in one runtime. Once the graph run ended (and let
    go), the turn runs."""
    gate = Gate("work")
    async with Runtime(store_url, testing=True) as a, Runtime(store_url, testing=True) as b:
        graph_run = await a.start_graph(_parked_graph(gate), {}, thread_id="t-g")
        await gate.entered.wait()
        model, calls = never_called()
        with pytest.raises(ThreadBusy) as busy:
            await chat(model).session(runtime=b, thread_id="t-g").send("hi")
        assert busy.value.thread_id == "t-g"
        assert busy.value.held_by == graph_run.run_id
        assert calls == [] and b.runs.list() == []
        with pytest.raises(ThreadBusy) as busy:
            await b.start_graph(_parked_graph(Gate("other")), {}, thread_id="t-g")
        assert busy.value.held_by == graph_run.run_id and b.runs.list() == []
        plain = await b.start(
            Agent("plain", ScriptedModel([reply("beside")])), "x", thread_id="t-g"
        )
        assert (await plain.result()).output == "beside"
        await a.flush()  # its snapshot saved: judged by its row from now on, as before
        with pytest.raises(ThreadBusy):
            await chat(model).session(runtime=b, thread_id="t-g").send("hi")
        gate.open()
        assert (await graph_run.result()).status is RunStatus.COMPLETED
        after = chat(ScriptedModel([reply("now")])).session(runtime=b, thread_id="t-g")
        assert await after.send("hi") == "now"


async def test_a_close_lets_go_of_the_holds_of_the_runs_it_leaves_at_rest(store_url: str) -> None:
    """A graph run left at rest on an interrupt when its runtime closes is ended by the close:
    its hold of the thread is let go of too, not left in the table."""

    def ask(state: _Log) -> _Log:
        return {"log": [str(interrupt("go on?"))]}

    graph = StateGraph(_Log).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    waiter = EventWaiter()
    async with Runtime(store_url, testing=True, sinks=[waiter]) as a:
        handle = await a.start_graph(
            graph.compile(checkpointer=MemoryCheckpointer()), {}, thread_id="t-rest"
        )
        async with asyncio.timeout(60):  # a guard: the event comes at once
            await waiter.event("graph.interrupt", handle.run_id, node="ask")
        assert handle.status is RunStatus.INTERRUPTED
        assert await a.store.thread_holder("default", "t-rest") is not None
    async with Runtime(store_url, testing=True) as b:
        assert await b.store.thread_holder("default", "t-rest") is None


async def test_a_second_graph_run_of_one_runtime_on_a_written_thread_is_thread_busy(
    store_url: str,
) -> None:
    """Two graph runs of one runtime on one thread (graphs of no checkpointer, or of two):
    the second is refused naming the first, as a graph run of another runtime is (one
    writer of a graph thread), and leaves the first's hold in the store as it was (it took
    the hold over, and deleted it as it ended, while the first still wrote). Once the first
    ended, a graph run on the thread runs."""
    gate = Gate("work")
    async with Runtime(store_url, testing=True) as rt:
        first = await rt.start_graph(_parked_graph(gate), {}, thread_id="t-g2")
        await gate.entered.wait()
        with pytest.raises(ThreadBusy) as busy:
            await rt.start_graph(_parked_graph(Gate("other")), {}, thread_id="t-g2")
        assert busy.value.thread_id == "t-g2" and busy.value.held_by == first.run_id
        assert [h.run_id for h in rt.runs.handles() if h.info.thread_id] == [first.run_id]
        held = await rt.store.thread_holder("default", "t-g2")
        assert held is not None and held["run_id"] == first.run_id
        gate.open()
        assert (await first.result()).status is RunStatus.COMPLETED
        assert await rt.store.thread_holder("default", "t-g2") is None
        then = Gate("then")
        then.open()
        again = await rt.start_graph(_parked_graph(then), {}, thread_id="t-g2")
        assert (await again.result()).status is RunStatus.COMPLETED


async def test_a_second_graph_run_on_a_written_thread_is_thread_busy_in_memory() -> None:
    """As with a durable store: the runtime's own registry refuses the second graph run."""
    gate = Gate("work")
    async with Runtime(testing=True) as rt:
        first = await rt.start_graph(_parked_graph(gate), {}, thread_id="t-g3")
        await gate.entered.wait()
        with pytest.raises(ThreadBusy) as busy:
            await rt.start_graph(_parked_graph(Gate("other")), {}, thread_id="t-g3")
        assert busy.value.held_by == first.run_id
        gate.open()
        assert (await first.result()).status is RunStatus.COMPLETED


def _asking_graph() -> CompiledGraph:
    """One node that asks a question (an interrupt), checkpointed in memory."""

    def ask(state: _Log) -> _Log:
        return {"log": [str(interrupt("why?"))]}

    graph = StateGraph(_Log).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    return graph.compile(checkpointer=MemoryCheckpointer())


async def test_a_graph_run_at_rest_on_an_interrupt_does_not_refuse_another_graph_run() -> None:
    """A graph run that ended ``interrupted`` (at rest, resumable) writes nothing: a graph run
    of another graph on its thread id runs, as across runtimes (its hold went as it ended)."""

    asking = _asking_graph()
    async with Runtime(testing=True) as rt:
        resting = await rt.start_graph(asking, {}, thread_id="t-g4", wait_on_interrupt=False)
        assert (await resting.result()).status is RunStatus.INTERRUPTED
        then = Gate("then")
        then.open()
        other = await rt.start_graph(_parked_graph(then), {}, thread_id="t-g4")
        assert (await other.result()).status is RunStatus.COMPLETED


async def test_a_graph_run_waiting_on_its_interrupt_is_still_its_threads_writer() -> None:
    """A graph run waiting on an interrupt (``wait_on_interrupt=True``, the default) is
    ``interrupted`` but alive: a command may resume it and it writes again. Another graph run
    on its thread id is refused, as while it ran (it was let through, and with a durable
    store took the waiting run's hold over and deleted it as it ended)."""

    asking = _asking_graph()
    async with Runtime(testing=True) as rt:
        waiting = await rt.start_graph(asking, {}, thread_id="t-g5")
        for _ in range(200):
            if waiting.status is RunStatus.INTERRUPTED:
                break
            await asyncio.sleep(0.01)
        assert waiting.status is RunStatus.INTERRUPTED and not waiting.done
        with pytest.raises(ThreadBusy) as busy:
            await rt.start_graph(_parked_graph(Gate("other")), {}, thread_id="t-g5")
        assert busy.value.held_by == waiting.run_id
        await waiting.cancel(reason="done here")
        assert (await waiting.result()).status is RunStatus.CANCELLED
        then = Gate("then")
        then.open()
        other = await rt.start_graph(_parked_graph(then), {}, thread_id="t-g5")
        assert (await other.result()).status is RunStatus.COMPLETED
