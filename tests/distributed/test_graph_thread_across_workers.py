"""A graph thread continued on another worker after its worker died (SIGKILL): two worker
processes (tests/distributed/worker.py) over Redis, sharing one store (the steering log) and
one checkpointer, SQLite files or PostgreSQL (a schema of the test's own).

Commands for the thread, sent through either worker while worker A runs it, are logged as A
takes them; A dies with some of them applied and some still waiting for a boundary. Worker
B continues the thread (its run id, from the checkpoints): each command logged before the
crash is applied once, none lost, none twice, and every step of the graph is in the state
once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn
from test_redis_control import OPERATOR, as_json, command, eventually, listed

from tinyagents import SteeringCommand, SteeringKind, SteeringTarget

ROUNDS = 8


def _shared(backend: str, tmp_path: Path) -> list[str]:
    if backend == "sqlite":
        return [
            "--store",
            f"sqlite:///{tmp_path / 'shared-store.db'}",
            "--checkpoints",
            str(tmp_path / "shared-checkpoints.db"),
        ]
    dsn = f"{postgres_dsn()}?schema={pg_schema(tmp_path)}"
    return ["--store", dsn, "--checkpoints", dsn]


def _steer(thread: str, cid: str) -> dict[str, Any]:
    cmd = SteeringCommand(
        target=SteeringTarget.thread(thread),
        actor=OPERATOR,
        kind=SteeringKind.UPDATE_STATE,
        payload={"update": {"log": [f"steer:{cid}"]}},
        correlation_id=cid,
    )
    return dict(cmd.model_dump(mode="json"))


@pytest.fixture
async def _pg_schemas() -> Any:
    """Drops the test's schema after the workers using it have stopped (set up before them)."""
    yield
    await drop_pg_schemas()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_thread_continued_on_another_worker_after_a_sigkill_applies_each_command_once(
    _pg_schemas: Any, redis_url: str, prefix: str, workers: Any, tmp_path: Path, backend: str
) -> None:
    shared = _shared(backend, tmp_path)
    a = await workers("a", redis_url, prefix, extra=shared)
    b = await workers("b", redis_url, prefix, extra=shared)
    thread = "t-1"
    run_id = await a.call("start_graph", thread=thread, tenant="acme", rounds=ROUNDS, tick_s=0.4)
    await listed(b, run_id)

    sent: list[str] = []

    async def send(k: int) -> None:  # through B (over Redis to A) and through A
        via = b if k % 2 == 0 else a
        cid = f"steer-{k}"
        receipt = await via.call("submit", command=_steer(thread, cid))
        assert receipt["status"] == "accepted", receipt
        assert receipt["run_id"] == run_id, receipt
        sent.append(cid)

    for k in range(3):
        await send(k)
    # the first three applied and saved by A (at its next boundary) ...
    await eventually(
        lambda: a.call("graph_log", thread=thread),
        lambda log: {f"steer:{cid}" for cid in sent} <= set(log),
    )
    for k in range(3, 6):
        await send(k)
    # ... the last three accepted and logged, still waiting for A's next boundary when it dies
    await a.kill()

    continued = await b.call(
        "start_graph", thread=thread, tenant="acme", rounds=ROUNDS, tick_s=0.05
    )
    assert continued == run_id  # the thread's run goes on under its id
    assert await b.call("wait", run_id=run_id, wait_s=120) == "completed"
    log = await b.call("graph_log", thread=thread)
    steps = [e for e in log if not e.startswith("steer:")]
    assert steps == [f"s{r}" for r in range(ROUNDS)], log
    steered = [e.removeprefix("steer:") for e in log if e.startswith("steer:")]
    states = {
        cid: await b.call("command_state", correlation_id=cid, scope="tenant:acme") for cid in sent
    }
    assert sorted(steered) == sorted(sent), (log, states)  # each once, none lost
    for cid in sent:
        assert (
            await b.call("command_state", correlation_id=cid, scope="tenant:acme") == "applied"
        ), cid


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_an_agent_run_started_again_on_another_open_worker_takes_the_commands_left_open(
    _pg_schemas: Any, redis_url: str, prefix: str, workers: Any, tmp_path: Path, backend: str
) -> None:
    """The same for an agent run: worker A dies with an instruction for its paused run
    accepted and logged; worker B, open since before, starts the run again under its id.
    A runtime restores the commands left open at open only, so B's run never got it (it
    stayed ``accepted`` in the log, the run completing without it)."""
    shared = _shared(backend, tmp_path)
    a = await workers("a", redis_url, prefix, extra=shared)
    b = await workers("b", redis_url, prefix, extra=shared)
    run_id = await a.call("start", run_id="r-1", tenant="acme", turns=400, tick_s=0.02)
    await listed(b, run_id)
    pause = await b.call("submit", command=as_json(command(run_id, "pause")))
    assert pause["status"] == "accepted", pause
    await eventually(lambda: a.call("status", run_id=run_id), lambda s: s == "paused")
    told = await b.call("submit", command=as_json(command(run_id, "add_instruction")))
    assert told["status"] == "accepted", told
    await a.call("flush")
    await a.kill()

    await b.call("start", run_id=run_id, tenant="acme", turns=3, tick_s=0.02)
    assert await b.call("status", run_id=run_id) == "paused"  # its pause, restored
    resume = await b.call("submit", command=as_json(command(run_id, "resume")))
    assert resume["status"] == "accepted", resume
    assert await b.call("wait", run_id=run_id, wait_s=60) == "completed"
    cid = told["correlation_id"]
    assert await b.call("command_state", correlation_id=cid, scope="tenant:acme") == "applied"
