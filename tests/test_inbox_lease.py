"""A command sent through the store to a run whose owner process took it, applied it and was
killed before answering: the inbox item's lease runs out, the run's new owner (the run
restarted in another process) takes it again, answers ``duplicate`` from the steering log,
and the command is applied once. Before the lease, the item was never taken again and its
sender waited until it timed out."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tinyagents import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.steering.remote import submit_through_store
from tinyagents.store import SqliteStore

WORKER = Path(__file__).parent / "inbox_lease_owner.py"
OPS = SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"])


async def owner(db: Path, run_id: str, mode: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        str(db),
        run_id,
        mode,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "INBOX_LEASE_S": "0.5"},
    )
    assert (await line(proc)).startswith("owner ")
    return proc


async def line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    async with asyncio.timeout(60):
        text = (await proc.stdout.readline()).decode().strip()
    if not text:
        assert proc.stderr is not None
        raise AssertionError((await proc.stderr.read()).decode())
    return text


def instruction(run_id: str, text: str, cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": text},
        correlation_id=cid,
    )


async def test_a_command_the_killed_owner_applied_without_answering_is_applied_once(
    tmp_path: Path,
) -> None:
    db, run_id = tmp_path / "runs.db", "r-lease"
    first = await owner(db, run_id, "die")
    second = None
    store = SqliteStore(db)
    await store.open()
    try:
        cmd = instruction(run_id, "note the lease", "c-lease")
        sent = asyncio.create_task(submit_through_store(store, cmd, timeout_s=60))
        assert await line(first) == "stop"  # applied, written, and never answered
        first.kill()
        await first.wait()
        second = await owner(db, run_id, "serve")  # the run restarted, under a new owner
        receipt = await sent
        assert receipt.status == "duplicate", receipt
        finish = instruction(run_id, "please finish", "c-finish")
        assert (await submit_through_store(store, finish, timeout_s=60)).status == "accepted"
        result = json.loads(await line(second))
        assert result["status"] == "completed"
        steered = json.loads(result["output"])["steered"]
        assert sum("note the lease" in text for text in steered) == 1
        events = await store.load_events(type_prefix="steering.applied")
        assert [e.correlation_id for e in events if e.correlation_id == "c-lease"] == ["c-lease"]
    finally:
        await store.close()
        for proc in (first, second):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
