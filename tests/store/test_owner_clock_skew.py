"""Owner silence on PostgreSQL is judged by the database's clock, not by two machines' clocks.

A run's snapshot carries ``updated_at``, stamped by its owner's clock; a sender compared it
with its own clock. With the owner's clock 60 s behind the sender's, a live run (heartbeat a
second ago) looked 60 s silent: its commands were refused ("has written no heartbeat since
...") and an operator's cancel declared the live run dead. With the owner's clock an hour
ahead, a dead run looked alive for an hour. The store now records when it heard each
snapshot by its own clock and tells a reader how long ago that was."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from services import pg_schema, postgres_dsn
from slow_agent import slow_agent

from tinyagents import (
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents._clock import use_clock
from tinyagents.steering import remote
from tinyagents.steering.remote import owner_silent, refuse, submit_through_store
from tinyagents.store import PostgresStore

OPS = SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"])


class SkewedClock:
    """The system clock ``offset_s`` off: another machine's clock."""

    def __init__(self, offset_s: float) -> None:
        self.offset = timedelta(seconds=offset_s)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def monotonic(self) -> float:
        return 0.0


@pytest.fixture
async def url(tmp_path: Path) -> AsyncIterator[str]:
    dsn = postgres_dsn()
    yield f"{dsn}{'&' if '?' in dsn else '?'}schema={pg_schema(tmp_path)}"


def live_snapshot(run_id: str) -> dict[str, Any]:
    """A heartbeat, as its owner writes it (by its own clock)."""
    from tinyagents import _clock

    now = _clock.now().isoformat()
    return {
        "run_id": run_id,
        "root_run_id": run_id,
        "parent_run_id": None,
        "tenant_id": "acme",
        "status": "running",
        "owner": "rt-skewed",
        "updated_at": now,
        "created_at": now,
    }


def pause(run_id: str, cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPS,
        kind=SteeringKind.PAUSE,
        correlation_id=cid,
    )


async def test_a_live_owner_whose_clock_is_behind_is_not_silent(url: str) -> None:
    store = PostgresStore(url)
    await store.open()
    try:
        with use_clock(SkewedClock(-60.0)):  # the owner's machine
            await store.save_runs([live_snapshot("r-behind")])
        snapshot = await store.load_run("r-behind")  # read on this machine
        assert snapshot is not None and not owner_silent(snapshot)
        assert refuse(pause("r-behind", "c-1"), snapshot) is None
        listed = await store.list_runs(tenant_id="acme")
        assert [owner_silent(s) for s in listed] == [False]
    finally:
        await store.close()


async def test_a_dead_owner_whose_clock_is_ahead_goes_silent(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "OWNER_SILENT_S", 0.2)
    store = PostgresStore(url)
    await store.open()
    try:
        with use_clock(SkewedClock(3600.0)):  # its last heartbeat, an hour "in the future"
            await store.save_runs([live_snapshot("r-ahead")])
        async with asyncio.timeout(60):
            while not owner_silent(await store.load_run("r-ahead") or {}):  # noqa: ASYNC110 - time passes
                await asyncio.sleep(0.05)
    finally:
        await store.close()


async def test_a_command_reaches_a_live_run_whose_owner_clock_is_behind(url: str) -> None:
    """End to end: the owning runtime runs on a clock 60 s behind; a pause sent through the
    store from this machine's clock is taken by it, not refused as sent to a dead owner."""
    with use_clock(SkewedClock(-60.0)):
        owner = Runtime(store=url)
        await owner.__aenter__()
    try:
        with use_clock(SkewedClock(-60.0)):
            handle = await owner.start(slow_agent(), "work slowly", tenant_id="acme")
        sender = PostgresStore(url)
        await sender.open()
        try:
            receipt = await submit_through_store(sender, pause(handle.run_id, "c-pause"))
            assert receipt.status == "accepted", receipt.reason
        finally:
            await sender.close()
        await handle.cancel()
    finally:
        await owner.__aexit__(None, None, None)


async def test_a_fresh_dead_run_claim_of_a_declarer_whose_clock_is_behind_stands(url: str) -> None:
    """Two operators cancel one dead run at once through two API workers. The first holds
    the run's claim (its declaration under way); the second judged the claim's age by the
    first's clock against its own: 60 s behind, a claim a moment old looked stale, and the
    second took the run over, failing its commands a second time. A claim's age is the
    database's."""
    from tinyagents.steering import dead

    store = PostgresStore(url)
    await store.open()
    try:
        snapshot = {
            **live_snapshot("r-dead"),
            "updated_at": "2026-01-01T00:00:00+00:00",  # long silent
        }
        await store.save_runs([snapshot])
        first = SteeringCommand(
            target=SteeringTarget.agent_run("r-dead"),
            actor=OPS,
            kind=SteeringKind.CANCEL,
            correlation_id="cancel-first",
        )
        with use_clock(SkewedClock(-60.0)):  # the first declarer's machine
            assert await dead._claim(store, first, snapshot) is None  # it holds the run
        second = first.model_copy(update={"correlation_id": "cancel-second"})
        receipt = await dead.settle_dead_run(store, second, snapshot)
        assert receipt.status == "rejected", receipt
        assert "is being cancelled" in (receipt.reason or "")
    finally:
        await store.close()


async def test_a_claim_given_back_by_a_runtime_whose_clock_is_behind_leaves_the_run_silent(
    url: str,
) -> None:
    """A start that fails after claiming a silent owner's run gives the claim back: the old
    snapshot is put back as long unheard as it was. Heard again "now less its heartbeat's
    age" by the giver's clock, an hour behind, it was heard now: the dead run looked alive
    again and every other runtime was refused its id for another 30 s."""
    store = PostgresStore(url)
    await store.open()
    try:
        silent_since = (datetime.now(UTC) - timedelta(seconds=45)).isoformat()
        await store.save_runs([{**live_snapshot("r-gone"), "updated_at": silent_since}])
        with use_clock(SkewedClock(-3600.0)):  # the claiming runtime's machine
            claimed, previous = await store.claim_run(
                {**live_snapshot("r-gone"), "owner": "rt-new"},
                lambda held: held is None or owner_silent(held),
            )
            assert claimed and previous is not None
            assert await store.release_run("r-gone", "rt-new", previous)
        back = await store.load_run("r-gone")
        assert back is not None and back["owner"] == "rt-skewed"
        assert owner_silent(back)
    finally:
        await store.close()


def test_a_snapshots_times_are_read_as_utc_and_anything_else_as_none() -> None:
    """One reader of a snapshot's times for the stores, the remote control and the Redis
    mirror: an ISO time without a zone is UTC, with one it is kept, and what is no time
    (garbage text, a number, None) is None rather than an error."""
    from datetime import UTC, datetime, timedelta, timezone

    from tinyagents.store.base import snapshot_time

    assert snapshot_time("2026-12-05T10:00:00") == datetime(2026, 12, 5, 10, tzinfo=UTC)
    east = timezone(timedelta(hours=2))
    assert snapshot_time("2026-12-05T12:00:00+02:00") == datetime(2026, 12, 5, 12, tzinfo=east)
    assert snapshot_time(datetime(2026, 12, 5, 10)) == datetime(2026, 12, 5, 10, tzinfo=UTC)
    for junk in ("yesterday", "", 1733392800, None, ["2026-12-05"]):
        assert snapshot_time(junk) is None
