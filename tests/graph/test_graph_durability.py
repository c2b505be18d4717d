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
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from tinyagents import Runtime
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.steering.commands import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.store.base import open_store
from tinyagents.store.checkpoint.base import CheckpointRecord
from tinyagents.store.checkpoint.sqlite import SqliteCheckpointer


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
