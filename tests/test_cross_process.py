"""Steering a run from another process through a shared SQLite store (issue 13 item 1), with
real processes: one runs a slow agent in its runtime, others submit commands through the store
and get the owning runtime's receipts back; each command is applied once."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tinyagents import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.errors import ReceiptTimeout
from tinyagents.steering.remote import submit_through_store
from tinyagents.store import SqliteStore

HELPER = Path(__file__).parent / "slow_agent.py"
OPS = SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"])


async def spawn(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(HELPER),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})},
    )


async def finished(proc: asyncio.subprocess.Process, *, timeout_s: float = 60) -> str:
    async with asyncio.timeout(timeout_s):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


class Owner:
    """A process running the slow agent in a runtime on the store ``url``."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.db = tmp_path / "runs.db"
        self.url = f"sqlite:///{self.db}"
        self.ids = tmp_path / "run.json"
        self.env = env
        self.proc: asyncio.subprocess.Process | None = None
        self.run_id = self.owner = ""

    async def __aenter__(self) -> Owner:
        self.proc = await spawn("own", self.url, str(self.ids), env=self.env)
        async with asyncio.timeout(60):
            while not self.ids.exists():
                if self.proc.returncode is not None:
                    raise AssertionError(await self.proc.stderr.read())  # type: ignore[union-attr]
                await asyncio.sleep(0.02)
        ids = json.loads(self.ids.read_text())
        self.run_id, self.owner = ids["run_id"], ids["owner"]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def result(self) -> dict[str, Any]:
        assert self.proc is not None
        return json.loads((await finished(self.proc)).strip().splitlines()[-1])


def instruction(run_id: str, text: str, cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": text},
        correlation_id=cid,
    )


async def applied(store: SqliteStore, cid: str) -> int:
    events = await store.load_events(type_prefix="steering.applied")
    return sum(1 for e in events if getattr(e, "correlation_id", None) == cid)


async def test_a_retried_command_gets_the_owners_receipt_and_applies_once(
    tmp_path: Path,
) -> None:
    async with Owner(tmp_path) as owner:
        store = SqliteStore(owner.db)
        await store.open()
        try:
            snap = await store.load_run(owner.run_id)
            assert snap is not None and snap["owner"] == owner.owner
            assert snap["status"] == "running" and snap["tenant_id"] == "acme"
            cmd = instruction(owner.run_id, "please finish now", "c-retry")
            # The first try gives up before the owner can answer (as a client whose
            # connection dropped would); the command stays in the inbox and is applied.
            with pytest.raises(ReceiptTimeout):
                await submit_through_store(store, cmd, timeout_s=0)
            retries = [await submit_through_store(store, cmd, timeout_s=60) for _ in range(2)]
            assert [r.status for r in retries] == ["duplicate", "duplicate"]
            result = await owner.result()
            assert result["status"] == "completed"
            steered = json.loads(result["output"])["steered"]
            assert sum("please finish now" in text for text in steered) == 1
            assert await applied(store, "c-retry") == 1
            done = await store.load_run(owner.run_id)
            assert done is not None and done["status"] == "completed"
            late = await submit_through_store(store, instruction(owner.run_id, "x", "c-late"))
            assert late.status == "rejected" and "target finished" in (late.reason or "")
        finally:
            await store.close()


async def test_two_submitter_processes_racing_one_correlation_id_apply_it_once(
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    async with Owner(tmp_path) as owner:
        submitters = [
            await spawn("submit", owner.url, owner.run_id, "c-race", "note the race", str(go))
            for _ in range(2)
        ]
        for proc in submitters:  # both are at the start line
            assert proc.stdout is not None
            assert (await proc.stdout.readline()).strip() == b"ready"
        go.touch()
        receipts = [json.loads(await finished(p)) for p in submitters]
        assert sorted(r["status"] for r in receipts) == ["accepted", "duplicate"]
        assert all(r["correlation_id"] == "c-race" for r in receipts)
        store = SqliteStore(owner.db)
        await store.open()
        try:
            finish = instruction(owner.run_id, "please finish", "c-finish")
            assert (await submit_through_store(store, finish, timeout_s=60)).accepted
            steered = json.loads((await owner.result())["output"])["steered"]
            assert sum("note the race" in t for t in steered) == 1
            assert await applied(store, "c-race") == 1
        finally:
            await store.close()


async def test_the_durable_steering_log_dedupes_what_the_owner_forgot(tmp_path: Path) -> None:
    # The owner remembers one command id (DEDUPE_HORIZON=1): a retry of an older command is
    # answered 'duplicate' by the steering log in the store, not by the owner's memory.
    async with Owner(tmp_path, DEDUPE_HORIZON="1") as owner:
        store = SqliteStore(owner.db)
        await store.open()
        try:
            first = instruction(owner.run_id, "note one", "c-old")
            assert (await submit_through_store(store, first, timeout_s=60)).status == "accepted"
            async with asyncio.timeout(60):
                while not await applied(store, "c-old"):  # noqa: ASYNC110 - another process
                    await asyncio.sleep(0.02)
            newer = instruction(owner.run_id, "note two", "c-new")
            assert (await submit_through_store(store, newer, timeout_s=60)).status == "accepted"
            again = await submit_through_store(store, first, timeout_s=60)
            assert again.status == "duplicate"
            finish = instruction(owner.run_id, "please finish", "c-finish")
            assert (await submit_through_store(store, finish, timeout_s=60)).status == "accepted"
            steered = json.loads((await owner.result())["output"])["steered"]
            assert sum("note one" in t for t in steered) == 1
            assert await applied(store, "c-old") == 1
        finally:
            await store.close()


async def test_a_foreign_tenant_or_an_observer_is_refused_by_the_owner(tmp_path: Path) -> None:
    async with Owner(tmp_path) as owner:
        store = SqliteStore(owner.db)
        await store.open()
        try:
            foreign = instruction(owner.run_id, "x", "c-f").model_copy(
                update={
                    "actor": SteeringActor.human("m", tenant_id="globex", scopes=["agent:control"])
                }
            )
            receipt = await submit_through_store(store, foreign, timeout_s=60)
            assert (
                receipt.status == "rejected" and receipt.reason == f"not found: run {owner.run_id}"
            )
            observer = instruction(owner.run_id, "x", "c-o").model_copy(
                update={
                    "actor": SteeringActor.human("b", tenant_id="acme", scopes=["agent:observe"])
                }
            )
            receipt = await submit_through_store(store, observer, timeout_s=60)
            assert receipt.status == "rejected" and receipt.policy_id == "authority"
            finish = instruction(owner.run_id, "please finish", "c-done")
            assert (await submit_through_store(store, finish, timeout_s=60)).accepted
            await owner.result()
        finally:
            await store.close()
