"""Steering a run another process owns, through a PostgreSQL store: real processes, the
inbox, deduplication across submitters, and LISTEN/NOTIFY waking the owning runtime."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from services import pg_schema, postgres_dsn

from tests.slow_agent import slow_agent
from tinyagents import Runtime, SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.server import Control
from tinyagents.store import PostgresStore

ROOT = Path(__file__).resolve().parents[2]
SLOW_AGENT = ROOT / "tests" / "slow_agent.py"
OPS = SteeringActor.human("alice", tenant_id="acme", scopes=["agent:control"])


def finish(run_id: str, cid: str | None = None) -> SteeringCommand:
    extra = {"correlation_id": cid} if cid else {}
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "please finish"},
        **extra,
    )


async def python(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(SLOW_AGENT),
        *args,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)},
    )


async def test_two_processes_submitting_one_command_to_a_third_apply_it_once(
    tmp_path: Path,
) -> None:
    url = f"{postgres_dsn()}?schema={pg_schema()}"
    run_file, go = tmp_path / "run.json", tmp_path / "go"
    owner = await python("own", url, str(run_file))
    submitters: list[asyncio.subprocess.Process] = []
    try:
        async with asyncio.timeout(60):  # bounds the test; no timing is asserted
            while not run_file.exists():  # noqa: ASYNC110 - the owner process writes it
                await asyncio.sleep(0.02)
        started = json.loads(run_file.read_text())
        for _ in range(2):
            submitters.append(
                await python("submit", url, started["run_id"], "c-1", "please finish", str(go))
            )
        for proc in submitters:
            assert proc.stdout is not None
            assert await proc.stdout.readline() == b"ready\n"
        go.touch()  # both submit at once
        receipts = []
        for proc in submitters:
            assert proc.stdout is not None
            receipts.append(json.loads(await proc.stdout.readline()))
        assert sorted(r["status"] for r in receipts) == ["accepted", "duplicate"]
        assert owner.stdout is not None
        result = json.loads(await owner.stdout.readline())
        assert result["status"] == "completed"
        steered = json.loads(result["output"])["steered"]
        assert len(steered) == 1 and "please finish" in steered[0]  # applied once
        assert await owner.wait() == 0
    finally:
        for proc in [owner, *submitters]:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


async def test_notify_wakes_the_owning_runtime_without_waiting_for_its_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tinyagents.runtime as runtime_module

    monkeypatch.setattr(runtime_module, "INBOX_POLL_S", 3600.0)  # only a wake-up answers
    schema = pg_schema()
    url = f"{postgres_dsn()}?schema={schema}"
    elsewhere = PostgresStore(postgres_dsn(), schema=schema)  # the submitting process
    async with Runtime(store=url) as rt:
        assert isinstance(rt.store, PostgresStore)  # the runtime listens on its own
        await elsewhere.open()
        try:
            handle = await rt.start(slow_agent(), "work", tenant_id="acme")
            await rt.write_live_snapshots(heartbeat=True)
            control = Control(store=elsewhere, receipt_timeout_s=30)
            receipt = await control.submit(finish(handle.run_id))
            assert receipt.status == "accepted" and receipt.run_id == handle.run_id
            result = await handle.result()
            assert "please finish" in json.loads(str(result.output))["steered"][0]
        finally:
            await elsewhere.close()
