"""A command sent over the operator API (and the ``runs --store`` CLI) for a run another
runtime has just started.

The owner's ``start_graph`` returns before the run's snapshot is in the store (an agent run's
start claims its row first, so it is listed by then); a client that learnt the run id (from
the worker that started it, from the event log) and steered it at once was answered 404 "not
found", as for a run that does not exist. The API now looks for a run it is
sent a command for again, for ``Control.listing_wait_s``, before it answers 404; an unknown
run and another tenant's run are answered after the same wait. The owner's snapshot writes
are held with SQLite's real write lock, taken by another connection, so the window is as wide
as the test needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_server import BASE

from tests.holds import started_with_snapshot_writes_held
from tinyagents import RunStatus, Runtime, SteeringKind
from tinyagents.cli import main
from tinyagents.server import Auth, Control, bind, create_app, runs_cli, serving
from tinyagents.server.demo import refund_graph
from tinyagents.server.runs_cli import StoreClient
from tinyagents.steering.remote import LISTING_WAIT_S
from tinyagents.store import SqliteStore

#: How long a command for a run not listed yet looks for it: the owner's held snapshot write
#: has to land inside it, which a loaded machine delayed past 3 s. The wait ends as soon as the
#: run is listed, so this is a hang guard; only a run that is never listed waits it out.
WAIT_S = 60.0
REFUND = {"invoice": "#7", "amount": "5 EUR"}
#: The listing wait for a run that is never listed: the test waits it out, so it is short.
NOT_FOUND_WAIT_S = 1.0


async def until(check: Any, *, timeout_s: float = 60.0) -> Any:
    async with asyncio.timeout(timeout_s):
        while True:
            value = check()
            if value:
                return value
            await asyncio.sleep(0.01)


def bearer(auth: Auth, user: str, tenant: str) -> dict[str, str]:
    token = auth.mint(user=user, tenant=tenant, rights=["agent:observe", "agent:control"])
    return {"Authorization": f"Bearer {token}"}


@contextlib.asynccontextmanager
async def serve(control: Control, auth: Auth) -> AsyncIterator[httpx.AsyncClient]:
    sock = bind("127.0.0.1", 0)
    async with serving(create_app(control, auth=auth, console=False), sock):
        host, port = sock.getsockname()[:2]
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=60) as client:
            yield client


async def test_a_command_posted_as_soon_as_another_runtime_starts_the_run_reaches_it(
    tmp_path: Path,
) -> None:
    """The run's start is answered, its snapshot not in the store: the POST waits for the
    owner's snapshot write and is accepted. An unknown run and another tenant's run are 404
    with the same body, neither before the listing wait is over."""
    owner = Runtime(store=SqliteStore(tmp_path / "runs.db"))
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    auth = Auth(Auth.generate_key())
    control = Control(store=store, receipt_timeout_s=60, listing_wait_s=WAIT_S)
    alice, bob = bearer(auth, "alice", "acme"), bearer(auth, "bob", "globex")
    try:
        async with owner:
            async with serve(control, auth) as client:
                start = functools.partial(
                    owner.start_graph,
                    refund_graph(),
                    REFUND,
                    thread_id="refund-7",
                    tenant_id="acme",
                )
                async with started_with_snapshot_writes_held(owner.store, start) as handle:
                    assert await store.load_run(handle.run_id) is None  # not listed yet
                    sent = asyncio.create_task(
                        client.post(f"{BASE}/runs/{handle.run_id}/pause", headers=alice)
                    )
                    done, _ = await asyncio.wait([sent], timeout=0.3)
                    assert not done, sent.result().text  # it looked, found nothing, waits
                response = await sent
                assert response.status_code == 200, response.text
                assert response.json()["status"] == "accepted"
                await until(lambda: handle.status is RunStatus.PAUSED)

                control.listing_wait_s = NOT_FOUND_WAIT_S
                timed: dict[str, tuple[httpx.Response, float]] = {}
                for name, path, headers in (
                    ("missing", f"{BASE}/runs/r-nowhere/pause", alice),
                    ("foreign", f"{BASE}/runs/{handle.run_id}/pause", bob),
                ):
                    began = time.monotonic()
                    answer = await client.post(path, headers=headers)
                    timed[name] = answer, time.monotonic() - began
                missing, foreign = timed["missing"][0], timed["foreign"][0]
                assert missing.status_code == foreign.status_code == 404
                assert missing.json()["detail"] == foreign.json()["detail"]
                # neither is answered before the wait is over: the time tells them apart by
                # nothing (a lower bound, which a slow machine only makes longer)
                assert all(spent >= NOT_FOUND_WAIT_S for _, spent in timed.values())
                # a read answers what is there, at once: no wait for an unknown run's GET
                assert (
                    await client.get(f"{BASE}/runs/r-nowhere", headers=alice)
                ).status_code == 404
                await handle.cancel()
                await handle.result()
    finally:
        await store.close()


async def test_the_store_cli_steers_a_run_as_soon_as_another_runtime_starts_it(
    tmp_path: Path,
) -> None:
    """``tinyagents runs pause RUN --store URL`` as the store's administrator acts in the
    run's own tenant, which it read from the run's snapshot: a run not in the store yet was
    taken for a run of tenant ``default`` and answered "not found". It now waits for the
    snapshot, then steers the run in its tenant."""
    owner = Runtime(store=SqliteStore(tmp_path / "runs.db"))
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    client = StoreClient(
        Control(store=store, receipt_timeout_s=60, listing_wait_s=WAIT_S),
        tenant_id=None,
        user="ops",
    )
    try:
        async with owner:
            start = functools.partial(
                owner.start_graph, refund_graph(), REFUND, thread_id="refund-7", tenant_id="acme"
            )
            async with started_with_snapshot_writes_held(owner.store, start) as handle:
                assert await store.load_run(handle.run_id) is None
                sent = asyncio.create_task(client.command(handle.run_id, SteeringKind.PAUSE, {}))
                done, _ = await asyncio.wait([sent], timeout=0.3)
                assert not done, sent.result()
            receipt = await sent
            assert receipt["status"] == "accepted", receipt
            await until(lambda: handle.status is RunStatus.PAUSED)
            await handle.cancel()
            await handle.result()
    finally:
        await store.close()


async def test_the_store_cli_approves_a_graph_run_as_soon_as_another_runtime_starts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tinyagents runs approve RUN --store URL`` reads the run's pending interrupts before
    it answers one: it read them once, so a run not in the store yet was "not found" (exit 1)
    while ``pause`` waited for it. It now waits the same listing wait; an unknown run is
    still refused after it, as before."""
    db = tmp_path / "runs.db"
    owner = Runtime(store=SqliteStore(db))
    where = ["--store", f"sqlite:///{db}", "--json", "--timeout", "60"]
    # The CLI's listing wait (LISTING_WAIT_S, 1.1 s) is raised to WAIT_S while the run is not
    # listed yet: the held write has to land inside it, and a loaded machine took longer.
    monkeypatch.setattr(runs_cli, "Control", functools.partial(Control, listing_wait_s=WAIT_S))
    async with owner:
        start = functools.partial(
            owner.start_graph,
            refund_graph(),
            {"invoice": "#7", "amount": "5 EUR"},
            thread_id="refund-7",
        )
        async with started_with_snapshot_writes_held(owner.store, start) as handle:
            await until(lambda: owner.live_snapshots([handle.run_id])[0]["interrupts"])
            capsys.readouterr()
            sent = asyncio.create_task(
                asyncio.to_thread(main, ["runs", "approve", handle.run_id, *where])
            )
            done, _ = await asyncio.wait([sent], timeout=0.3)
            assert not done, capsys.readouterr()  # it looked, found nothing, waits
        assert await sent == 0, capsys.readouterr()
        assert json.loads(capsys.readouterr().out)["status"] == "accepted"
        assert (await handle.result()).output["decision"] == "refunded"
        monkeypatch.undo()  # the CLI's own listing wait again

        began = time.monotonic()
        code = await asyncio.to_thread(main, ["runs", "approve", "r-nowhere", *where])
        assert code == 1 and json.loads(capsys.readouterr().out)["error"] == "not found"
        assert time.monotonic() - began >= LISTING_WAIT_S
