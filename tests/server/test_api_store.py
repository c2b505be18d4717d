"""The API over a store alone (``Control(store=...)``): runs another process owns are listed,
read and steered through the store's inbox, with the same tenant rules; an owner that never
answers is a 504 that says the command may still apply, and a finished run's command is
rejected with the reason."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from operator_server import BASE, Served, eventually

from tinyagents import Runtime
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.server import Auth, Control, bind, create_app, serving
from tinyagents.server.app import ErrorBody
from tinyagents.store import SqliteStore
from tinyagents.store.checkpoint import MemoryCheckpointer


@dataclass(slots=True)
class StoreServed:
    client: httpx.AsyncClient
    store: SqliteStore
    alice: dict[str, str]
    bob: dict[str, str]
    control: Control


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
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=60) as client:
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
                    control,
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
    assert r.json()["message"].count("may still be applied") == 1  # said once
    # the body is the declared ErrorBody, correlation_id included
    assert ErrorBody.model_validate(r.json()).correlation_id == "ops-7"
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


class Refund(TypedDict, total=False):
    amount: str
    answer: Any


def ask(state: Refund) -> Refund:
    return {"answer": interrupt(f"refund {state['amount']}?")}


async def test_a_graph_tasks_entry_is_written_when_it_ends(
    over_store: StoreServed, tmp_path: Path
) -> None:
    """A task entry ends without an event of its own (the graph's events name the graph run):
    its final snapshot must still reach the store at the next tick, not only at close, or
    another process sees the graph completed and its task still ``interrupted``."""
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    c, alice = over_store.client, over_store.alice
    # the owner answers here: 0.3 s (the fixture's, for owners that never answer) was too
    # short for its receipt on a loaded machine, and the approval was a 504
    over_store.control.receipt_timeout_s = 60
    async with Runtime(store=f"sqlite:///{tmp_path / 'runs.db'}") as rt:
        run = await rt.start_graph(compiled, {"amount": "9 EUR"}, thread_id="t", tenant_id="acme")

        async def tree() -> dict[str, str]:
            r = await c.get(f"{BASE}/runs", params={"root_run_id": run.run_id}, headers=alice)
            return {s["run_id"]: s["status"] for s in r.json()}

        async def asked() -> Any:
            r = await c.get(f"{BASE}/runs/{run.run_id}", headers=alice)
            return r.status_code == 200 and r.json().get("interrupts")

        (pending,) = await eventually(asked)
        body = {"kind": "approve", "payload": {"interrupt_id": pending["id"], "value": "yes"}}
        path = f"{BASE}/runs/{run.run_id}/tasks/{pending['task_id']}/commands"
        r = await c.post(path, json=body, headers=alice)
        assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
        assert (await run.result()).status.value == "completed"

        async def all_completed() -> bool:
            statuses = await tree()
            return len(statuses) == 2 and set(statuses.values()) == {"completed"}

        await eventually(all_completed)


async def test_a_store_that_fails_makes_every_read_a_json_503(over_store: StoreServed) -> None:
    # with the database gone from under the server, every read was a text/plain 500
    # "Internal Server Error" (the StoreError went up to uvicorn), where a command got the
    # 503 the docs promise
    await over_store.store.save_runs([snapshot("r-1")])
    c = over_store.client
    await over_store.store.close()
    for path in ("/runs", "/runs/r-1", "/runs/r-1/tree", "/runs/r-1/trace", "/runs/r-1/steering"):
        r = await c.get(f"{BASE}{path}", headers=over_store.alice)
        assert r.status_code == 503, (path, r.status_code, r.text)
        body = ErrorBody.model_validate(r.json())
        assert body.message == body.detail and "store" in body.message, body
    r = await c.post(f"{BASE}/runs/r-1/pause", headers=over_store.alice)
    assert r.status_code == 503 and ErrorBody.model_validate(r.json()).message, r.text
    # the event stream has begun its answer: it ends saying why (it was cut off mid-body)
    r = await c.get(f"{BASE}/events?follow=false", headers=over_store.alice)
    assert r.status_code == 200 and "event: unavailable\n" in r.text, r.text
    assert "the store cannot be read now" in r.text, r.text


async def test_a_run_that_ended_while_asking_lists_no_question(
    over_store: StoreServed, tmp_path: Path
) -> None:
    """A graph run that waited on an interrupt and was cancelled when its runtime closed (its
    checkpointer was in memory: nothing to continue) was listed ``cancelled`` with its
    question still in ``interrupts``: the console and ``runs list`` showed a finished run
    waiting for an answer, and ``runs approve`` picked the question only to be refused."""
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    c, alice = over_store.client, over_store.alice
    async with Runtime(store=f"sqlite:///{tmp_path / 'runs.db'}") as rt:
        run = await rt.start_graph(compiled, {"amount": "9 EUR"}, thread_id="t", tenant_id="acme")

        async def asked() -> Any:
            r = await c.get(f"{BASE}/runs/{run.run_id}", headers=alice)
            return r.status_code == 200 and r.json().get("interrupts")

        await eventually(asked)
    r = await c.get(f"{BASE}/runs", params={"root_run_id": run.run_id}, headers=alice)
    listed = {s["run_id"]: (s["status"], s["interrupts"]) for s in r.json()}
    assert len(listed) == 2, listed  # the graph run and its task's entry
    assert list(listed.values()) == [("cancelled", [])] * 2, listed


@pytest.mark.parametrize(
    "damage",
    ["'{not json'", "'[1, 2]'", "json_set(data, '$.tools', 'x')", "CAST(x'ff' AS TEXT)"],
)
async def test_a_damaged_run_row_is_marked_and_the_others_listed(
    over_store: StoreServed, damage: str
) -> None:
    runs = [snapshot(f"r-{n}", status="completed") for n in range(3)]
    for n, snap in enumerate(runs):
        snap["created_at"] = f"2026-01-0{n + 1}T00:00:00+00:00"
    await over_store.store.save_runs(runs)
    with sqlite3.connect(over_store.store.path) as db:  # a row damaged by hand, or a bad disk
        db.execute(f"UPDATE runs SET data = {damage} WHERE run_id = 'r-1'")

    r = await over_store.client.get(f"{BASE}/runs", headers=over_store.alice)
    assert r.status_code == 200, r.text
    listed = r.json()
    assert [s["run_id"] for s in listed] == ["r-2", "r-1", "r-0"]
    damaged = listed[1]
    assert damaged["status"] == "completed" and damaged["tenant_id"] == "acme"
    assert damaged["error"]["type"] == "damaged_snapshot"
    assert "r-1" in damaged["error"]["message"]
    assert all("error" not in s for s in (listed[0], listed[2]))
    assert r.headers["X-Damaged-Runs"] == "1"
    # the run itself is a 500 whose type says its data is damaged (a retry cannot help: no
    # 503 "unavailable"), naming the row to repair and never quoting what it holds
    r = await over_store.client.get(f"{BASE}/runs/r-1", headers=over_store.alice)
    assert r.status_code == 500 and r.json()["type"] == "damaged_data", r.text
    assert "r-1" in r.json()["message"] and "'x'" not in r.text, r.text
    # so is a command for it (the run is read to judge who may steer it)
    r = await over_store.client.post(f"{BASE}/runs/r-1/pause", headers=over_store.alice)
    assert r.status_code == 500 and r.json()["type"] == "damaged_data", r.text


#: Every route that reads one run, as (method, path with ``{id}``, JSON body).
_RUN_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/runs/{id}", None),
    ("GET", "/runs/{id}/tree", None),
    ("GET", "/runs/{id}/trace", None),
    ("GET", "/runs/{id}/steering", None),
    ("GET", "/events?run_id={id}", None),
    ("GET", "/events?root_run_id={id}", None),
    ("POST", "/events/tickets", {"run_id": "{id}"}),
    ("POST", "/runs/{id}/steer", {"message": "look again"}),
    ("POST", "/runs/{id}/pause", {}),
    ("POST", "/runs/{id}/resume", {}),
    ("POST", "/runs/{id}/abort", {}),
    ("POST", "/runs/{id}/commands", {"kind": "pause", "payload": {}}),
]


async def _answers(
    served: StoreServed, headers: dict[str, str], run_id: str
) -> list[tuple[int, Any]]:
    got = []
    for method, path, body in _RUN_ROUTES:
        json_body = (
            {k: v.replace("{id}", run_id) if isinstance(v, str) else v for k, v in body.items()}
            if body is not None
            else None
        )
        r = await served.client.request(
            method, BASE + path.replace("{id}", run_id), json=json_body, headers=headers
        )
        got.append((r.status_code, r.json()))
    return got


@pytest.mark.parametrize(
    "damage", ["'{not json'", "json_set(data, '$.tools', 'x')", "CAST(x'ff' AS TEXT)"]
)
async def test_another_tenants_damaged_run_is_not_found_as_an_unknown_one(
    over_store: StoreServed, damage: str
) -> None:
    """A run whose stored snapshot is damaged was a 500 ``damaged_data`` to every tenant,
    read before its tenant was known: a foreign tenant learnt that the run exists. Its row's
    own tenant column says whose it is: to another tenant it is what an unknown run is, on
    every route that reads a run; its own tenant still learns that it needs repairing."""
    over_store.control.listing_wait_s = 0.0  # (a command for an unknown run waits for it)
    await over_store.store.save_runs([snapshot("r-1", status="completed")])
    with sqlite3.connect(over_store.store.path) as db:
        db.execute(f"UPDATE runs SET data = {damage} WHERE run_id = 'r-1'")

    unknown = await _answers(over_store, over_store.bob, "r-none")
    assert {status for status, _ in unknown} == {404}, unknown
    assert await _answers(over_store, over_store.bob, "r-1") == unknown
    for status, body in await _answers(over_store, over_store.alice, "r-1"):
        assert status == 500 and body["type"] == "damaged_data", body


async def test_a_damaged_run_whose_tenant_does_not_read_is_not_found_and_logged(
    over_store: StoreServed, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged row whose tenant cannot be read either (its column blank, the snapshot no
    JSON): whose it is is not known, so it is an unknown run to every tenant (the log says
    so, naming the row to repair)."""
    over_store.control.listing_wait_s = 0.0
    await over_store.store.save_runs([snapshot("r-1", status="completed")])
    with sqlite3.connect(over_store.store.path) as db:
        db.execute("UPDATE runs SET data = '{not json', tenant_id = '' WHERE run_id = 'r-1'")

    caplog.set_level(logging.WARNING)
    unknown = await _answers(over_store, over_store.bob, "r-none")
    for who in (over_store.alice, over_store.bob):
        assert await _answers(over_store, who, "r-1") == unknown
    assert any(
        "r-1" in rec.getMessage() and "tenant" in rec.getMessage() for rec in caplog.records
    ), caplog.text


async def test_a_damaged_run_with_no_tenant_column_is_its_snapshots_tenants(
    over_store: StoreServed,
) -> None:
    """Where the row's tenant column is blank, a damaged snapshot whose own ``tenant_id``
    still reads (another field is of the wrong type) says whose the run is: its tenant
    learns it is damaged, another tenant gets the unknown run's 404."""
    over_store.control.listing_wait_s = 0.0
    await over_store.store.save_runs([snapshot("r-1", status="completed")])
    with sqlite3.connect(over_store.store.path) as db:
        db.execute(
            "UPDATE runs SET data = json_set(data, '$.tools', 'x'), tenant_id = ''"
            " WHERE run_id = 'r-1'"
        )

    assert await _answers(over_store, over_store.bob, "r-1") == await _answers(
        over_store, over_store.bob, "r-none"
    )
    for status, body in await _answers(over_store, over_store.alice, "r-1"):
        assert status == 500 and body["type"] == "damaged_data", body


async def test_a_command_for_a_run_stored_with_no_run_status_is_damaged_data(
    over_store: StoreServed,
) -> None:
    """A snapshot that reads, but with a status no run has, was taken for a live run: the
    command went into its owner's inbox and the answer was the 504 of an owner that did not
    answer. It is the 500 ``damaged_data`` its tenant can act on, and to another tenant the
    404 of an unknown run."""
    over_store.control.listing_wait_s = 0.0
    await over_store.store.save_runs([snapshot("r-1", owner="rt-1")])
    with sqlite3.connect(over_store.store.path) as db:
        db.execute("UPDATE runs SET data = json_set(data, '$.status', 'zombie')")

    r = await over_store.client.post(f"{BASE}/runs/r-1/pause", headers=over_store.alice)
    assert r.status_code == 500 and r.json()["type"] == "damaged_data", r.text
    assert "zombie" not in r.text, r.text
    foreign = await over_store.client.post(f"{BASE}/runs/r-1/pause", headers=over_store.bob)
    unknown = await over_store.client.post(f"{BASE}/runs/r-none/pause", headers=over_store.bob)
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json() == unknown.json()
    with sqlite3.connect(over_store.store.path) as db:  # nothing was sent
        assert db.execute("SELECT COUNT(*) FROM inbox").fetchone() == (0,)


async def test_a_damaged_run_whose_tenant_does_not_read_is_logged_once_not_at_every_read(
    over_store: StoreServed, caplog: pytest.LogCaptureFixture
) -> None:
    """Its warning was logged at every read of it: a console or a script polling the run
    filled the log with one line a second. It is logged once a row (a bounded memory of the
    rows warned of), and again for a row repaired, then damaged again."""
    over_store.control.listing_wait_s = 0.0
    await over_store.store.save_runs([snapshot("r-1"), snapshot("r-2")])
    with sqlite3.connect(over_store.store.path) as db:
        db.execute("UPDATE runs SET data = '{not json', tenant_id = ''")

    def warned(run_id: str) -> int:
        return sum(
            f"'{run_id}'" in rec.getMessage() and "tenant" in rec.getMessage()
            for rec in caplog.records
        )

    caplog.set_level(logging.WARNING)
    for _ in range(3):
        await _answers(over_store, over_store.alice, "r-1")
    assert warned("r-1") == 1, caplog.text
    r = await over_store.client.get(f"{BASE}/runs/r-2", headers=over_store.alice)
    assert r.status_code == 404
    assert warned("r-2") == 1 and warned("r-1") == 1, caplog.text
    # repaired, it reads; damaged again, it is warned of again
    await over_store.store.save_runs([snapshot("r-1")])
    r = await over_store.client.get(f"{BASE}/runs/r-1", headers=over_store.alice)
    assert r.status_code == 200, r.text
    with sqlite3.connect(over_store.store.path) as db:
        db.execute("UPDATE runs SET data = '{not json', tenant_id = '' WHERE run_id = 'r-1'")
    for _ in range(2):
        await over_store.client.get(f"{BASE}/runs/r-1", headers=over_store.alice)
    assert warned("r-1") == 2, caplog.text


def test_the_rows_warned_of_are_bounded() -> None:
    from tinyagents.store.base import MAX_WARNED_ROWS, WarnedRows

    rows = WarnedRows(limit=MAX_WARNED_ROWS)
    assert rows.first("r-0") and not rows.first("r-0")
    for n in range(1, MAX_WARNED_ROWS + 10):
        assert rows.first(f"r-{n}")
    assert len(rows) == MAX_WARNED_ROWS
    assert rows.first("r-0")  # forgotten, the oldest: warned of again (memory stays bounded)


@pytest.mark.parametrize(
    "damage", ["'soon'", "''", "42", "json('[1]')", "json('{\"at\": 1}')", "'2026-13-45T99:00'"]
)
async def test_a_run_row_whose_updated_at_is_no_time_is_damaged_data(
    over_store: StoreServed, damage: str
) -> None:
    """A snapshot's ``updated_at`` (its owner's heartbeat) was not checked: one that was no
    time was read as "no time", so a run whose owner was gone was never ``owner_silent``
    (shown live, and its command went into a dead owner's inbox: a 504 after the whole
    receipt timeout). It is damage like any other: the run's tenant gets the 500
    ``damaged_data`` naming the row on every route that reads it, never quoting the value,
    another tenant the 404 of an unknown run, and a listing marks it."""
    over_store.control.listing_wait_s = 0.0
    await over_store.store.save_runs([snapshot("r-1", owner="rt-gone")])
    with sqlite3.connect(over_store.store.path) as db:
        db.execute(f"UPDATE runs SET data = json_set(data, '$.updated_at', {damage})")

    for status, body in await _answers(over_store, over_store.alice, "r-1"):
        assert status == 500 and body["type"] == "damaged_data", body
        assert "r-1" in body["message"] and "soon" not in body["message"], body
    assert await _answers(over_store, over_store.bob, "r-1") == await _answers(
        over_store, over_store.bob, "r-none"
    )
    r = await over_store.client.get(f"{BASE}/runs", headers=over_store.alice)
    (listed,) = r.json()
    assert (
        listed["error"]["type"] == "damaged_snapshot" and "updated_at" in listed["error"]["message"]
    ), listed
    with sqlite3.connect(over_store.store.path) as db:  # nothing was sent
        assert db.execute("SELECT COUNT(*) FROM inbox").fetchone() == (0,)


@pytest.mark.parametrize("at", [None, "2026-12-01T00:00:00", "2026-12-01T00:00:00+02:00"])
async def test_a_run_row_whose_updated_at_is_a_time_or_none_reads(
    over_store: StoreServed, at: str | None
) -> None:
    # no time (null), a time without a zone (read as UTC) and one with a zone are times
    await over_store.store.save_runs([{**snapshot("r-1", status="completed"), "updated_at": at}])
    r = await over_store.client.get(f"{BASE}/runs/r-1", headers=over_store.alice)
    assert r.status_code == 200 and r.json()["updated_at"] == at, r.text


@pytest.mark.parametrize("damage", ["'soon'", "''", "42", "json('[1]')", "'2026-13-45T99:00'"])
async def test_a_run_row_whose_created_at_is_no_time_is_damaged_data(
    over_store: StoreServed, damage: str
) -> None:
    """A snapshot's ``created_at`` was not checked either, yet it is read: it places the run
    in a listing and makes the cursor of the page it ends (a cursor whose time is no time is
    refused, so the next page was a 422 for good). It is damage as ``updated_at``'s is: the
    run's tenant gets the 500 ``damaged_data``, another tenant the unknown run's 404, and a
    listing marks it (keeping the row's own ``created_at`` column, so the walk goes on)."""
    over_store.control.listing_wait_s = 0.0
    await over_store.store.save_runs([snapshot("r-1", owner="rt-gone"), snapshot("r-0")])
    with sqlite3.connect(over_store.store.path) as db:
        db.execute(
            f"UPDATE runs SET data = json_set(data, '$.created_at', {damage}) WHERE run_id = 'r-1'"
        )

    for status, body in await _answers(over_store, over_store.alice, "r-1"):
        assert status == 500 and body["type"] == "damaged_data", body
        assert "r-1" in body["message"] and "soon" not in body["message"], body
    assert await _answers(over_store, over_store.bob, "r-1") == await _answers(
        over_store, over_store.bob, "r-none"
    )
    seen: list[dict[str, Any]] = []  # a page ending at r-1, then the page after it
    url = f"{BASE}/runs?limit=1"
    for _ in range(4):  # (a bad cursor could repeat a page for ever)
        if not url:
            break
        r = await over_store.client.get(url, headers=over_store.alice)
        assert r.status_code == 200, r.text
        seen += r.json()
        url = r.links.get("next", {}).get("url", "")
    (listed,) = [s for s in seen if s["run_id"] == "r-1"]
    assert (
        listed["error"]["type"] == "damaged_snapshot" and "created_at" in listed["error"]["message"]
    ), listed
    assert [s["run_id"] for s in seen] == ["r-1", "r-0"]
    with sqlite3.connect(over_store.store.path) as db:  # nothing was sent
        assert db.execute("SELECT COUNT(*) FROM inbox").fetchone() == (0,)


@pytest.mark.parametrize("at", [None, "2026-12-01T00:00:00", "2026-12-01T00:00:00+02:00"])
async def test_a_run_row_whose_created_at_is_a_time_or_none_reads(
    over_store: StoreServed, at: str | None
) -> None:
    await over_store.store.save_runs([{**snapshot("r-1", status="completed"), "created_at": at}])
    r = await over_store.client.get(f"{BASE}/runs/r-1", headers=over_store.alice)
    assert r.status_code == 200 and r.json()["created_at"] == at, r.text
