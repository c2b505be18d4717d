"""The API over a store alone (``Control(store=...)``): runs another process owns are listed,
read and steered through the store's inbox, with the same tenant rules; an owner that never
answers is a 504 that says the command may still apply, and a finished run's command is
rejected with the reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_server import BASE, Served, eventually

from tinyagents.server import Auth, Control, bind, create_app, serving
from tinyagents.store import SqliteStore


@dataclass(slots=True)
class StoreServed:
    client: httpx.AsyncClient
    store: SqliteStore
    alice: dict[str, str]
    bob: dict[str, str]


@pytest.fixture
async def over_store(tmp_path: Path) -> AsyncIterator[StoreServed]:
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    auth = Auth(Auth.generate_key())
    control = Control(store=store, receipt_timeout_s=0.3)
    sock = bind("127.0.0.1", 0)
    try:
        async with serving(create_app(control, auth=auth, console=False), sock):
            host, port = sock.getsockname()[:2]
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
                yield StoreServed(
                    client,
                    store,
                    {
                        "Authorization": "Bearer "
                        + auth.mint(
                            user="alice", tenant="acme", rights=["agent:observe", "agent:control"]
                        )
                    },
                    {
                        "Authorization": "Bearer "
                        + auth.mint(
                            user="bob", tenant="globex", rights=["agent:observe", "agent:control"]
                        )
                    },
                )
    finally:
        await store.close()


def snapshot(run_id: str, *, status: str = "running", owner: str = "rt-gone") -> dict[str, Any]:
    return {
        "run_id": run_id,
        "root_run_id": run_id,
        "parent_run_id": None,
        "tenant_id": "acme",
        "kind": "agent",
        "status": status,
        "owner": owner,
        "created_at": "2026-12-01T00:00:00+00:00",
    }


async def test_a_run_whose_owner_does_not_answer_is_a_504(over_store: StoreServed) -> None:
    await over_store.store.save_runs([snapshot("r-ghost")])
    c = over_store.client
    listed = (await c.get(f"{BASE}/runs", headers=over_store.alice)).json()
    assert [r["run_id"] for r in listed] == ["r-ghost"]
    assert (await c.get(f"{BASE}/runs/r-ghost", headers=over_store.bob)).status_code == 404
    r = await c.post(
        f"{BASE}/runs/r-ghost/steer",
        json={"message": "hello", "correlation_id": "ops-7"},
        headers=over_store.alice,
    )
    assert r.status_code == 504 and r.json()["correlation_id"] == "ops-7"
    assert "may still be applied" in r.json()["detail"]
    # Another tenant's command never reaches the inbox.
    r = await c.post(f"{BASE}/runs/r-ghost/pause", headers=over_store.bob)
    assert r.status_code == 404
    taken = await over_store.store.inbox_take("rt-gone")
    assert [item.command.correlation_id for item in taken] == ["ops-7"]


async def test_a_finished_runs_command_is_rejected_with_the_reason(
    over_store: StoreServed,
) -> None:
    await over_store.store.save_runs([snapshot("r-done", status="completed")])
    r = await over_store.client.post(f"{BASE}/runs/r-done/pause", headers=over_store.alice)
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    assert "finished" in r.json()["reason"]


async def test_an_attenuation_on_command_kinds_is_honoured(served: Served) -> None:
    """A hand-written check on the ``command`` fact: this token may pause and nothing else."""
    from biscuit_auth import Biscuit, BlockBuilder

    run = await served.start_run("acme")
    parsed = Biscuit.from_base64(served.tokens["alice"], served.auth._keypair.public_key)
    pause_only = parsed.append(
        BlockBuilder('check if operation("observe") or command("pause")')
    ).to_base64()
    headers = served.as_(pause_only)
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json={"message": "x"}, headers=headers
    )
    assert r.status_code == 403
    r = await served.client.post(f"{BASE}/runs/{run.run_id}/pause", headers=headers)
    assert r.json()["status"] == "accepted"
    await eventually(lambda: run.info.status.value == "paused")
