"""Commands a runtime restores at open may belong to a run that is alive in another runtime on
the same store (another process, another worker). A graph run claims no row when it starts
(its live snapshot is written at its owner's next tick), so a runtime opening meanwhile
restores the commands that run accepted and finds no row for it: once a run of its own
ended, it failed them ("its run ended with an earlier process before the store saved it"),
though the run was alive and then applied them: a command both failed and applied. The
steering log now records who accepted each command (``StoredCommand.owner``), and a runtime
fails such a command only when that owner is gone."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

import tinyagents.runtime as runtime_module
from tinyagents import Runtime, _clock
from tinyagents.events import Event
from tinyagents.graph import END, START, StateGraph
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.steering.remote import OWNER_SILENT_S
from tinyagents.store.checkpoint import SqliteCheckpointer
from tinyagents.store.checkpoint._lease import process_token
from tinyagents.testkit import fake_agent

CID = "c-live"


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    dsn = postgres_dsn()
    sep = "&" if "?" in dsn else "?"
    yield f"{dsn}{sep}schema={pg_schema()}"
    await drop_pg_schemas()


def held_graph(cp: SqliteCheckpointer, gate: list[asyncio.Event]) -> Any:
    """``wait`` (until the latest event of ``gate`` is set) then ``done``."""

    async def wait(state: State) -> State:
        await gate[-1].wait()
        return {"log": ["work"]}

    graph = StateGraph(State)
    graph.add_node("wait", wait).add_node("done", lambda s: {"log": ["done"]})
    graph.add_edge(START, "wait").add_edge("wait", "done").add_edge("done", END)
    return graph.compile(checkpointer=cp)


async def test_a_runtime_opened_while_another_runs_a_rerun_does_not_fail_its_command(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runtime ``first`` runs thread ``t`` to its end, starts it again (a new run, no row in
    the store until its first snapshot tick, which never comes here: no tick without a
    wake-up) and accepts an ``update_state`` for that run; runtime ``second`` opens on the
    same store, restores it, and one of its runs ends. The command was failed in the log
    (``second``'s ``steering.failed``) and then applied by ``first``'s run all the same; now
    it waits, and is applied once, and nothing says it failed."""
    monkeypatch.setattr(runtime_module, "INBOX_POLL_S", 3600.0)  # no tick without a wake-up
    gate = [asyncio.Event()]
    gate[-1].set()
    failed: list[Event] = []
    async with (
        SqliteCheckpointer(tmp_path / "cp.db") as cp,
        Runtime(store_url, testing=True) as first,
    ):
        graph = held_graph(cp, gate)
        done = await first.start_graph(graph, {}, thread_id="t")
        assert (await done.result()).status.value == "completed"
        gate.append(asyncio.Event())
        again = await first.start_graph(graph, {}, thread_id="t")  # the finished thread again
        assert again.run_id != done.run_id
        receipt = await first.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(again.run_id),
                actor=SteeringActor.test(),
                kind=SteeringKind.UPDATE_STATE,
                payload={"update": {"log": ["steered"]}},
                correlation_id=CID,
            )
        )
        assert receipt.status.value == "accepted", receipt.reason
        assert await first.store.load_run(again.run_id) is None  # the window: no row yet
        async with Runtime(store_url, testing=True) as second:
            second.bus.add_sink(lambda e: failed.append(e) if e.type == "steering.failed" else None)
            assert CID in [c.correlation_id for c in second.open_commands()]  # restored
            ended = await second.start(fake_agent("clerk", turns=0), "hello")
            await ended.result()  # a run of ``second`` ended: restored orphans are judged
            await second.flush()
            assert [e.correlation_id for e in failed] == []
            logged = await second.store.get_command(CID)
            assert logged is not None and logged.state == "accepted", logged and logged.reason
        gate[-1].set()
        result = await again.result()
        assert result.output["log"] == ["work", "done", "work", "steered", "done"]  # once
        await first.flush()
        logged = await first.store.get_command(CID)
        assert logged is not None and (logged.state, logged.reason) == ("applied", None)
    assert failed == []


async def logged_ago(store_url: str, age: float) -> None:
    """Make the PostgreSQL steering log's rows logged ``age`` seconds ago by its clock."""
    import asyncpg

    schema = store_url.rsplit("schema=", 1)[1]
    conn = await asyncpg.connect(postgres_dsn())
    try:
        await conn.execute(
            f'UPDATE "{schema}".steering_log'
            " SET logged_at = clock_timestamp() - make_interval(secs => $1)",
            age,
        )
    finally:
        await conn.close()


#: Who logged the command, for each case: no one (a row logged before the log kept owners),
#: a runtime of this process that closed, and runtimes on another host (never known gone
#: here), one of which logged it longer than ``OWNER_SILENT_S`` ago.
OWNERS = {
    "none": (None, 0.0),
    "closed here": (process_token("rt-closed"), 0.0),
    "elsewhere": ("another-host:1:rt-x", 0.0),
    "elsewhere, silent": ("another-host:1:rt-x", OWNER_SILENT_S + 60),
}


@pytest.mark.parametrize("case", OWNERS)
async def test_a_command_restored_for_a_run_with_no_row_fails_once_its_owner_is_gone(
    store_url: str, case: str
) -> None:
    """A command the log holds open for a run the store has no row of fails, once a run of
    the runtime that restored it ends, when whoever logged it is gone: a row with no owner
    (as before owners were logged), a runtime that closed, one silent for ``OWNER_SILENT_S``
    (a live owner saves its run's row at its first snapshot tick). It waits while its
    owner may be running the run."""
    owner, age = OWNERS[case]
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run("g-gone"),
        actor=SteeringActor.test(),
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "late"},
        correlation_id=CID,
        created_at=_clock.now() - timedelta(seconds=age),
    )
    async with Runtime(store_url) as setup:
        assert await setup.store.append_command(cmd, state="accepted", run_id="g-gone", owner=owner)
    if age and store_url.startswith("postgresql"):  # its age is by the database's clock
        await logged_ago(store_url, age)
    async with Runtime(store_url, testing=True) as rt:
        assert [c.correlation_id for c in rt.open_commands()] == [CID]
        await (await rt.start(fake_agent("clerk", turns=0), "hello")).result()
        await rt.flush()
        logged = await rt.store.get_command(CID)
        assert logged is not None
        if case == "elsewhere":
            assert (logged.state, [c.correlation_id for c in rt.open_commands()]) == (
                "accepted",
                [CID],
            )
        else:
            assert logged.state == "failed"
            assert "ended with an earlier process before the store saved it" in str(logged.reason)
            assert rt.open_commands() == []
