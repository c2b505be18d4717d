"""Steering commands of a runtime-managed graph run across a crash, at the two moments where
the checkpoints and the steering store disagree.

A process is "killed" here by a checkpointer that stops for good right after saving a chosen
checkpoint, and then by closing the runtime: the run task is cancelled before it reports
anything more, so the store is left exactly as a SIGKILL at that point would leave it (the
command accepted, never settled). ``test_graph_crash.py`` does the same with real SIGKILLs.
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from tinyagents import RunStatus, Runtime
from tinyagents.events import Event, SteeringEvent
from tinyagents.graph import END, START, Command, StateGraph, interrupt
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.store import SqliteStore, open_store
from tinyagents.store.checkpoint import CheckpointRecord, SqliteCheckpointer, WriteRecord
from tinyagents.testkit import EventWaiter


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


class DiesAfter(SqliteCheckpointer):
    """Saves checkpoints until one matches ``when``; then never returns again."""

    def __init__(self, path: Path, when: Callable[[CheckpointRecord], bool]) -> None:
        super().__init__(path)
        self.when = when
        self.dead = asyncio.Event()

    async def put(self, record: CheckpointRecord) -> None:
        await super().put(record)
        if self.when(record):
            self.dead.set()
            await asyncio.Event().wait()


def build(cp: SqliteCheckpointer, gate: asyncio.Event | None = None) -> Any:
    async def a(state: State) -> dict[str, Any]:
        if gate is not None:
            await gate.wait()
        return {"log": ["a"]}

    graph = StateGraph(State).add_node("a", a).add_node("b", lambda s: {"log": ["b"]})
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return graph.compile(checkpointer=cp)


def update(run_id: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.UPDATE_STATE,
        payload={"update": {"log": ["steered"]}},
    )


async def open_commands(url: str) -> list[str]:
    store = open_store(url)
    await store.open()
    try:
        return [c.command.correlation_id for c in await store.open_commands()]
    finally:
        await store.close()


async def restart(url: str, db: Path) -> tuple[str, dict[str, Any], list[Any]]:
    """Open the store and checkpoints again, run the thread on; (run id, state, steering)."""
    async with Runtime(store=url, testing=True) as rt, SqliteCheckpointer(db) as cp:
        handle = await rt.start_graph(build(cp), None, thread_id="t")
        result = await handle.result()
        assert result.output is not None
        return handle.run_id, result.output, rt.steering_history(handle.run_id)


async def test_command_accepted_after_the_last_checkpoint_is_applied_after_a_restart(
    tmp_path: Path,
) -> None:
    url, db = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "cp.db"
    # killed right after the run saved its final checkpoint (nothing left to run), before the
    # boundary that would have taken the command
    cp = DiesAfter(db, lambda r: r.source == "loop" and not r.frontier)
    async with Runtime(store=url, testing=True) as rt:
        handle = await rt.start_graph(build(cp), {"log": ["start"]}, thread_id="t")
        await cp.dead.wait()
        cmd = update(handle.run_id)
        assert (await rt.submit(cmd)).status == "accepted"
    await cp.aclose()
    assert await open_commands(url) == [cmd.correlation_id]

    run_id, state, steering = await restart(url, db)
    assert run_id == handle.run_id  # the same run reaches its final boundary
    assert state["log"] == ["start", "a", "b", "steered"]
    assert [e.type for e in steering if e.correlation_id == cmd.correlation_id][-1] == (
        "steering.applied"
    )
    assert await open_commands(url) == []  # every accepted command reached a terminal state


async def test_command_applied_just_before_a_crash_is_not_applied_again(tmp_path: Path) -> None:
    url, db = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "cp.db"
    gate = asyncio.Event()
    # killed right after the update's own checkpoint was saved, before steering.applied
    cp = DiesAfter(db, lambda r: r.source == "update")
    async with Runtime(store=url, testing=True) as rt:
        handle = await rt.start_graph(build(cp, gate), {"log": ["start"]}, thread_id="t")
        cmd = update(handle.run_id)
        assert (await rt.submit(cmd)).status == "accepted"
        gate.set()
        await cp.dead.wait()
    await cp.aclose()
    assert await open_commands(url) == [cmd.correlation_id]

    run_id, state, steering = await restart(url, db)
    assert run_id == handle.run_id
    assert state["log"] == ["start", "a", "steered", "b"]  # once, not twice
    [applied] = [
        e for e in steering if e.correlation_id == cmd.correlation_id and e.type.endswith("applied")
    ]
    assert applied.affected["applied_before_restart"] is True
    assert await open_commands(url) == []


async def test_a_finished_thread_started_again_is_a_new_run(tmp_path: Path) -> None:
    async with Runtime(testing=True) as rt, SqliteCheckpointer(tmp_path / "cp.db") as cp:
        first = await rt.start_graph(build(cp), {"log": ["one"]}, thread_id="t")
        await first.result()
        second = await rt.start_graph(build(cp), {"log": ["two"]}, thread_id="t")
        result = await second.result()
    assert second.run_id != first.run_id
    assert result.output is not None and result.output["log"][-3:] == ["two", "a", "b"]


async def test_answer_to_a_run_at_rest_waits_in_the_store_for_the_next_process(
    tmp_path: Path,
) -> None:
    def ask(state: State) -> dict[str, Any]:
        return {"log": [f"ask:{interrupt('which invoice?')}"]}

    def asking(cp: SqliteCheckpointer) -> Any:
        graph = StateGraph(State).add_node("ask", ask).add_edge(START, "ask")
        return graph.add_edge("ask", END).compile(checkpointer=cp)

    url, db = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "cp.db"
    async with Runtime(store=url, testing=True) as rt, SqliteCheckpointer(db) as cp:
        paused = await asking(cp).run({}, thread_id="t", runtime=rt)  # returns on the interrupt
        [run] = [i for i in rt.runs.list() if i.kind == "graph" and i.task_id is None]
        answer = SteeringCommand(
            target=SteeringTarget.graph_task(run.run_id, paused.interrupts[0].task_id),
            actor=SteeringActor.test(),
            kind=SteeringKind.PROVIDE_CONTEXT,
            payload={"value": 1042},
        )
        assert (await rt.submit(answer)).status == "accepted"  # nothing runs the thread now
    assert await open_commands(url) == [answer.correlation_id]

    async with Runtime(store=url, testing=True) as rt, SqliteCheckpointer(db) as cp:
        result = await asking(cp).run(None, thread_id="t", runtime=rt)
        assert result.status == "completed" and result.state["log"] == ["ask:1042"]
        assert rt.steering_history(run.run_id)[-1].type == "steering.applied"
    assert await open_commands(url) == []


async def test_a_task_resumed_by_the_next_process_keeps_its_run_entry(tmp_path: Path) -> None:
    """docs/postgres.md's flow: one process runs the thread until a task asks, another answers
    it and the thread goes on (the graph run keeps its id). The task's entry in the run tree
    was registered anew under another id there, and the first one stayed ``interrupted`` in
    the store for ever: a run no process would ever end, listed by every worker (after 30 s
    as "owner silent"), and a command sent to it went nowhere. Now the task resumes under
    its entry, as it does in one process."""

    def ask(state: State) -> dict[str, Any]:
        return {"log": [f"ask:{interrupt('which invoice?')}"]}

    def asking(cp: SqliteCheckpointer) -> Any:
        graph = StateGraph(State).add_node("ask", ask).add_edge(START, "ask")
        return graph.add_edge("ask", END).compile(checkpointer=cp)

    url, db = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "cp.db"
    async with Runtime(store=url) as rt, SqliteCheckpointer(db) as cp:
        paused = await asking(cp).run({}, thread_id="t", runtime=rt)
        [task] = [i for i in rt.runs.list() if i.task_id is not None]
        assert task.status is RunStatus.INTERRUPTED
    async with Runtime(store=url) as rt, SqliteCheckpointer(db) as cp:
        result = await asking(cp).run(Command(resume=1042), thread_id="t", runtime=rt)
        assert result.status == "completed" and result.state["log"] == ["ask:1042"]
        [again] = [i for i in rt.runs.list() if i.task_id is not None]
        assert (again.run_id, again.task_id) == (task.run_id, paused.interrupts[0].task_id)
    store = open_store(url)
    await store.open()
    try:
        runs = await store.list_runs(tenant_id=None, limit=100)
    finally:
        await store.close()
    assert {r["run_id"]: r["status"] for r in runs if r.get("task_id")} == {
        task.run_id: "completed"
    }

    # a thread continued by a third process and cancelled there: its task entry ends with it
    async with Runtime(store=url) as rt, SqliteCheckpointer(db) as cp:
        first = await asking(cp).run({}, thread_id="t2", runtime=rt)
        [task] = [i for i in rt.runs.list() if i.task_id == first.interrupts[0].task_id]
    async with Runtime(store=url) as rt, SqliteCheckpointer(db) as cp:
        handle = await rt.start_graph(asking(cp), None, thread_id="t2")
        await handle.cancel()
        assert (await handle.result()).status is RunStatus.CANCELLED
    store = open_store(url)
    await store.open()
    try:
        runs = await store.list_runs(tenant_id=None, root_run_id=handle.run_id, limit=100)
    finally:
        await store.close()
    assert {r["run_id"]: r["status"] for r in runs if r.get("task_id")} == {
        task.run_id: "cancelled"
    }


# -- answers (approve / reject / provide_context) across a crash --------------------------------


class DiesAfterAnswer(SqliteCheckpointer):
    """Saves until a steering command's answer to an interrupt is written; then never returns."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.dead = asyncio.Event()

    async def put_writes(
        self, thread_id: str, ns: str, frontier_id: str, writes: list[WriteRecord]
    ) -> None:
        await super().put_writes(thread_id, ns, frontier_id, writes)
        if any(w.kind == "resume" for w in writes):
            self.dead.set()
            await asyncio.Event().wait()


def reviewed(cp: SqliteCheckpointer) -> Any:
    def review(state: State) -> dict[str, Any]:
        answer = interrupt("ship it?")
        return {"log": [f"review:{answer['approved']}"]}

    graph = StateGraph(State).add_node("review", review).add_node("b", lambda s: {"log": ["b"]})
    graph.add_edge(START, "review").add_edge("review", "b").add_edge("b", END)
    return graph.compile(checkpointer=cp)


class ForgetsSettling(SqliteStore):
    """A store whose event writer never gets a batch to the disk: what a SIGKILL does to the
    events (and the command states they settle, written with them) not flushed yet."""

    async def append_events(self, events: list[Event]) -> None:
        return None


async def approve_then_die(
    url: str, cp: Any, *, unflushed: bool = False
) -> tuple[str, SteeringCommand, str]:
    """Start the thread, approve its interrupt, and 'die' when ``cp`` says so: (run id,
    command, interrupt id). ``unflushed``: the report that it was applied is lost too."""
    waiter = EventWaiter()
    store = ForgetsSettling(url.removeprefix("sqlite:///")) if unflushed else url
    async with Runtime(store=store, testing=True, sinks=[waiter]) as rt:
        handle = await rt.start_graph(reviewed(cp), {"log": ["start"]}, thread_id="t")
        paused = await waiter.event("graph.interrupt", handle.run_id)
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=SteeringActor.test(),
            kind=SteeringKind.APPROVE,
        )
        assert (await rt.submit(cmd)).status == "accepted"
        async with asyncio.timeout(60):
            await cp.dead.wait()
    await cp.aclose()
    assert await open_commands(url) == [cmd.correlation_id]  # never reported applied
    return handle.run_id, cmd, paused.data["interrupt_id"]


async def continue_reviewed(url: str, db: Path) -> tuple[str, dict[str, Any], list[Any]]:
    async with Runtime(store=url, testing=True) as rt, SqliteCheckpointer(db) as cp:
        handle = await rt.start_graph(reviewed(cp), None, thread_id="t")
        result = await handle.result()
        assert result.output is not None, result.error
        return handle.run_id, result.output, rt.steering_history(handle.run_id)


def settled_once(steering: list[Any], cmd: SteeringCommand) -> SteeringEvent:
    """The one applied-or-failed event of ``cmd`` in a run's steering history."""
    [settled] = [
        e
        for e in steering
        if e.correlation_id == cmd.correlation_id
        and e.type in ("steering.applied", "steering.failed")
    ]
    assert isinstance(settled, SteeringEvent)
    return settled


async def test_an_answer_saved_just_before_a_crash_is_reported_applied_not_failed(
    tmp_path: Path,
) -> None:
    url, db = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "cp.db"
    # killed right after the answer was written, before the task ran again with it
    run_id, cmd, interrupt_id = await approve_then_die(url, DiesAfterAnswer(db))

    again, state, steering = await continue_reviewed(url, db)
    assert again == run_id
    assert state["log"] == ["start", "review:True", "b"]  # the answer reached the node once
    settled = settled_once(steering, cmd)
    assert settled.type == "steering.applied", settled.reason
    assert settled.affected["applied_before_restart"] is True
    assert settled.affected["interrupt_id"] == interrupt_id
    assert await open_commands(url) == []


async def test_an_answer_consumed_just_before_a_crash_is_reported_applied_not_failed(
    tmp_path: Path,
) -> None:
    url, db = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "cp.db"
    # killed right after the step that ran the task with the answer saved its checkpoint
    # (the answer was reported applied, but that report was still in the event writer's batch)
    cp = DiesAfter(db, lambda r: r.source == "loop" and bool(r.metadata.get("resumed_by")))
    run_id, cmd, _ = await approve_then_die(url, cp, unflushed=True)

    again, state, steering = await continue_reviewed(url, db)
    assert again == run_id
    assert state["log"] == ["start", "review:True", "b"]
    settled = settled_once(steering, cmd)
    assert settled.type == "steering.applied", settled.reason
    assert settled.affected["applied_before_restart"] is True
    assert await open_commands(url) == []


# -- a fork=True command across a crash ---------------------------------------------------------


def asks_after_prep(cp: SqliteCheckpointer) -> Any:
    def ask(state: State) -> dict[str, Any]:
        return {"log": [f"ask:{interrupt('go?')['approved']}"]}

    graph = StateGraph(State).add_node("prep", lambda s: {"log": ["prep"]}).add_node("ask", ask)
    graph.add_edge(START, "prep").add_edge("prep", "ask").add_edge("ask", END)
    return graph.compile(checkpointer=cp)


async def fork_then_die(
    store: Any, cp: Any, waiter: EventWaiter, *, until: str
) -> tuple[str, SteeringCommand]:
    """Pause the thread on its interrupt, move it on with an update (the paused checkpoint is
    now stale), then approve that checkpoint with ``fork=True``; the process 'dies' when ``cp``
    does (``until="dead"``) or once the fork's run is over (``until="fork ran"``)."""
    async with Runtime(store=store, testing=True, sinks=[waiter]) as rt:
        handle = await rt.start_graph(asks_after_prep(cp), {}, thread_id="t")
        paused = await waiter.event("graph.interrupt", handle.run_id)
        moved = update(handle.run_id)
        await rt.submit(moved)
        await waiter.event("steering.applied", handle.run_id, correlation_id=moved.correlation_id)
        forked = SteeringCommand(
            target=SteeringTarget.graph_task(handle.run_id, paused.task_id),
            actor=SteeringActor.test(),
            kind=SteeringKind.APPROVE,
            checkpoint_id=paused.checkpoint_id,
            fork=True,
        )
        assert (await rt.submit(forked)).status == "accepted"
        async with asyncio.timeout(60):
            if until == "dead":
                await cp.dead.wait()
            else:
                applied = await waiter.event(
                    "steering.applied", handle.run_id, correlation_id=forked.correlation_id
                )
                fork_run = rt.runs.get(applied.affected["fork_run_id"])
                assert fork_run is not None and (await fork_run.result()).status == "completed"
    await cp.aclose()
    assert forked.correlation_id in await open_commands(
        store if isinstance(store, str) else store.url
    )
    return handle.run_id, forked


async def hand_over_again(url: str, db: Path, forked: SteeringCommand) -> SteeringEvent:
    """Continue the thread in a new process: the fork command is handed over again; its one
    terminal event (the fork's run, if one was started, is awaited)."""
    waiter = EventWaiter()
    async with Runtime(store=url, testing=True, sinks=[waiter]) as rt, SqliteCheckpointer(db) as cp:
        handle = await rt.start_graph(asks_after_prep(cp), None, thread_id="t")
        settled = await waiter.until(
            lambda e: (
                getattr(e, "correlation_id", None) == forked.correlation_id
                and e.type in ("steering.applied", "steering.failed")
            )
        )
        assert isinstance(settled, SteeringEvent)
        fork_run = rt.runs.get(settled.affected.get("fork_run_id") or "")
        if fork_run is not None and fork_run.run_id != handle.run_id:
            assert (await fork_run.result()).status == "completed"
    return settled


def threads(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}


async def test_a_fork_made_just_before_a_crash_is_continued_not_made_twice(
    tmp_path: Path,
) -> None:
    url, db = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "cp.db"
    # killed right after the fork's first checkpoint, before its run started
    cp = DiesAfter(db, lambda r: r.source == "fork")
    _, forked = await fork_then_die(url, cp, EventWaiter(), until="dead")
    fork_thread = f"t~{forked.correlation_id}"
    assert threads(db) == {"t", fork_thread}

    settled = await hand_over_again(url, db, forked)
    assert settled.type == "steering.applied", settled.reason
    assert settled.affected["applied_before_restart"] is True
    assert settled.affected["fork_thread_id"] == fork_thread
    assert threads(db) == {"t", fork_thread}  # no second fork
    async with SqliteCheckpointer(db) as cp2:
        fork_state = await asks_after_prep(cp2).get_state(fork_thread)
        original = await asks_after_prep(cp2).get_state("t")
    assert fork_state.values["log"] == ["prep", "ask:True"]  # approved once, on the fork
    assert original.values["log"] == ["prep", "steered"] and len(original.interrupts) == 1
    assert forked.correlation_id not in await open_commands(url)


async def test_a_fork_that_ran_before_a_crash_is_reported_not_run_again(tmp_path: Path) -> None:
    url, db = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "cp.db"
    # the fork's run completed, but the report that the command was applied never got to disk
    store = ForgetsSettling(tmp_path / "store.db")
    _, forked = await fork_then_die(store, SqliteCheckpointer(db), EventWaiter(), until="fork ran")
    fork_thread = f"t~{forked.correlation_id}"
    async with SqliteCheckpointer(db) as cp:
        before = await cp.list(fork_thread)

    settled = await hand_over_again(url, db, forked)
    assert settled.type == "steering.applied", settled.reason
    assert settled.affected["applied_before_restart"] is True
    assert settled.affected["fork_run_id"] == before[0].metadata["run_id"]
    assert threads(db) == {"t", fork_thread}
    async with SqliteCheckpointer(db) as cp:
        assert [r.checkpoint_id for r in await cp.list(fork_thread)] == [
            r.checkpoint_id for r in before
        ]  # nothing ran on the fork again
    assert forked.correlation_id not in await open_commands(url)


async def test_a_command_applied_before_a_crash_is_reported_with_what_it_did(
    tmp_path: Path,
) -> None:
    """``steering.applied`` of a redirect or an update whose checkpoint was saved just before
    the crash names what it did (a redirect's ``goto`` and ``step``, an update's ``keys``) as
    it does when applied in one process, not only the checkpoint: a consumer reading
    ``affected["goto"]`` must not break on a re-delivered command."""
    url, db = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "cp.db"
    cases = (
        ("steering", SteeringKind.REDIRECT, {"goto": "b"}, {"goto": ["b"]}),
        ("update", SteeringKind.UPDATE_STATE, {"update": {"log": ["s"]}}, {"keys": ["log"]}),
    )
    for source, kind, payload, did in cases:
        gate = asyncio.Event()
        dies = DiesAfter(db, lambda r, source=source: r.source == source)  # type: ignore[misc]
        async with Runtime(store=url, testing=True) as rt:
            handle = await rt.start_graph(build(dies, gate), {}, thread_id=source)
            cmd = SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=SteeringActor.test(),
                kind=kind,
                payload=payload,
            )
            assert (await rt.submit(cmd)).status == "accepted"
            gate.set()
            await dies.dead.wait()
        await dies.aclose()
        async with Runtime(store=url, testing=True) as rt, SqliteCheckpointer(db) as cp:
            handle = await rt.start_graph(build(cp), None, thread_id=source)
            await handle.result()
            [applied] = [
                e
                for e in rt.steering_history(handle.run_id)
                if e.correlation_id == cmd.correlation_id and e.type == "steering.applied"
            ]
            saved = await cp.get(source, applied.affected["checkpoint_id"])
        assert saved is not None and saved.source == source
        step = {"step": saved.step} if kind is SteeringKind.REDIRECT else {}
        assert applied.affected == {
            **did,
            **step,
            "checkpoint_id": saved.checkpoint_id,
            "applied_before_restart": True,
        }
