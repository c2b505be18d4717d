"""A run a durable runtime released (``rt.forget``, the retention window) reads and answers
commands at once, before the store has saved its final snapshot: the runtime keeps released
runs' snapshots until its next snapshot tick (``SNAPSHOT_EVERY_S``), and a read in between
found the store's older row (an agent run's claim: ``running``) or none (a graph run's).

The tick is held here (the runtime's saving of released snapshots does nothing until the
test lets it), so the window is as wide as the test needs: no sleep, no timing."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from operator_server import BASE, IDLE_S, Served, eventually

from tinyagents import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.graph import END, START, StateGraph


def _held(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hold the saving of released runs' snapshots: the store never gets them (the runtime's
    close still writes them)."""

    async def not_yet(**_: Any) -> None:
        return None

    monkeypatch.setattr(served.runtime, "_save_unsaved", not_yet)


async def _cancelled_and_forgotten(served: Served, monkeypatch: pytest.MonkeyPatch) -> str:
    """A run of acme, steered once (``kept-1``), cancelled and forgotten with its final
    snapshot not saved; returns its id."""
    run = await served.start_run("acme", think_s=IDLE_S)
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer",
        json={"message": "before the end", "correlation_id": "kept-1"},
        headers=served.as_("alice"),
    )
    assert r.json()["status"] == "accepted", r.text
    _held(served, monkeypatch)
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/abort",
        json={"delivery": "immediate"},
        headers=served.as_("alice"),
    )
    assert r.json()["status"] == "accepted", r.text
    await eventually(lambda: run.done)
    await eventually(lambda: served.runtime.open_commands() == [])
    served.runtime.forget(run.run_id)
    assert run.run_id not in served.runtime.runs
    stored = await served.runtime.store.load_run(run.run_id)
    assert stored is None or stored["status"] == "running"  # the store has not the end
    return run.run_id


async def test_a_released_run_reads_at_once_before_its_snapshot_is_saved(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held: ``GET /runs/{id}`` answers the released run's final status at once (not the
    store's older row), to its tenant alone (another tenant's read is a 404)."""
    run_id = await _cancelled_and_forgotten(served, monkeypatch)
    r = await served.client.get(f"{BASE}/runs/{run_id}", headers=served.as_("alice"))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled", r.text
    foreign = await served.client.get(f"{BASE}/runs/{run_id}", headers=served.as_("bob"))
    assert foreign.status_code == 404, foreign.text
    snap = served.runtime.released_snapshot(run_id)
    assert snap is not None and snap["status"] == "cancelled"


async def test_a_released_run_answers_commands_at_once_before_its_snapshot_is_saved(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held: a retry of a command sent while the run ran is a ``duplicate``, a new one is
    ``rejected`` saying the run finished, another tenant's is a 404 — as once the snapshot
    is saved."""
    run_id = await _cancelled_and_forgotten(served, monkeypatch)
    retry = await served.client.post(
        f"{BASE}/runs/{run_id}/steer",
        json={"message": "before the end", "correlation_id": "kept-1"},
        headers=served.as_("alice"),
    )
    assert retry.json()["status"] == "duplicate", retry.text
    new = await served.client.post(
        f"{BASE}/runs/{run_id}/steer", json={"message": "after"}, headers=served.as_("alice")
    )
    assert new.json()["status"] == "rejected", new.text
    assert "finished" in new.json()["reason"], new.text
    foreign = await served.client.post(
        f"{BASE}/runs/{run_id}/steer", json={"message": "x"}, headers=served.as_("bob")
    )
    assert foreign.status_code == 404, foreign.text


async def test_the_library_answers_a_released_run_alike_before_and_after_its_save(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held: ``rt.submit`` to a released run answers the same before the store has its final
    snapshot as after (a retry ``duplicate``; a new command ``rejected``, for the same
    reason), and ``released_snapshot`` is None once it is saved."""
    run_id = await _cancelled_and_forgotten(served, monkeypatch)
    rt = served.runtime
    ops = SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"])

    def cmd(correlation_id: str) -> SteeringCommand:
        return SteeringCommand(
            target=SteeringTarget.agent_run(run_id),
            actor=ops,
            kind=SteeringKind.PAUSE,
            correlation_id=correlation_id,
        )

    before = await rt.submit(cmd("lib-1"))
    monkeypatch.undo()
    await rt.flush()
    assert rt.released_snapshot(run_id) is None
    stored = await rt.store.load_run(run_id)
    assert stored is not None and stored["status"] == "cancelled"
    assert (await rt.submit(cmd("lib-1"))).status == "duplicate"
    after = await rt.submit(cmd("lib-2"))
    assert (before.status, before.reason) == (after.status, after.reason)


class Box(TypedDict, total=False):
    n: int


async def once(state: Box) -> Box:
    return {"n": state.get("n", 0) + 1}


async def test_a_released_graph_run_the_store_never_saved_reads_and_refuses_at_once(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held: a graph run (it claims no row: the store has none of it until a snapshot tick)
    started and finished with every snapshot write held, then released, is in neither the
    runtime's memory nor the store; it reads all the same (finished, to its tenant alone) and
    a command to it is ``rejected`` (target finished), not a 404."""

    async def not_yet(**_: Any) -> None:
        return None

    monkeypatch.setattr(served.runtime, "write_live_snapshots", not_yet)
    _held(served, monkeypatch)
    graph = StateGraph(Box).add_node("once", once).add_edge(START, "once").add_edge("once", END)
    run = await served.runtime.start_graph(graph.compile(), {"n": 0}, tenant_id="acme")
    await run.result()
    served.runtime.forget(run.run_id)
    assert await served.runtime.store.load_run(run.run_id) is None
    r = await served.client.get(f"{BASE}/runs/{run.run_id}", headers=served.as_("alice"))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed", r.text
    foreign = await served.client.get(f"{BASE}/runs/{run.run_id}", headers=served.as_("bob"))
    assert foreign.status_code == 404, foreign.text
    new = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json={"message": "after"}, headers=served.as_("alice")
    )
    assert new.json()["status"] == "rejected", new.text
    assert "finished" in new.json()["reason"], new.text
