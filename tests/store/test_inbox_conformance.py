"""The inbox, ``load_run`` and ``read_events`` of the ``Store`` contract (issue 13 item 1):
every backend in ``conftest.BACKENDS`` must pass all of this."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tinyagents.errors import StoreError
from tinyagents.events import RunEvent
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.store import MemoryStore, PostgresStore, SqliteStore, Store
from tinyagents.store.base import INBOX_LEASE_S, INBOX_RETENTION_S
from tinyagents.testkit import EPOCH, FakeClock, use_clock

OPS = SteeringActor.human("alice", tenant_id="acme", scopes=["agent:control"])


def command(cid: str, run_id: str = "r-1") -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": f"say {cid}"},
        correlation_id=cid,
        created_at=EPOCH,
    )


def accepted(cid: str) -> SteeringReceipt:
    return SteeringReceipt(status="accepted", correlation_id=cid, run_id="r-1", policy_id="p")


async def elapse(store: Store, clock: FakeClock, seconds: float) -> None:
    """Let ``seconds`` pass for the inbox: on this machine's clock (``clock``, which the
    memory and SQLite stores stamp and judge the inbox by) and, on PostgreSQL, whose inbox
    is stamped and judged by the database's clock alone, by making its rows that much older
    (``tests/store/test_inbox_clock_skew.py``)."""
    clock.advance(seconds)
    if isinstance(store, PostgresStore):
        await store.pool.execute(
            "UPDATE inbox SET submitted_at = submitted_at - make_interval(secs => $1),"
            " taken_at = taken_at - make_interval(secs => $1),"
            " answered_at = answered_at - make_interval(secs => $1)",
            float(seconds),
        )


async def test_a_put_is_taken_once_by_its_owner_and_answered(store: Store) -> None:
    await store.inbox_put(owner="rt-a", request_id="q-1", command=command("c-1"))
    await store.inbox_put(owner="rt-a", request_id="q-2", command=command("c-2"))
    await store.inbox_put(owner="rt-b", request_id="q-3", command=command("c-3"))
    await store.inbox_put(owner="rt-a", request_id="q-1", command=command("c-other"))  # no-op
    assert await store.inbox_receipt("q-1") is None

    items = await store.inbox_take("rt-a")
    assert [(i.request_id, i.owner, i.command) for i in items] == [
        ("q-1", "rt-a", command("c-1")),
        ("q-2", "rt-a", command("c-2")),
    ]
    assert all(i.submitted_at.tzinfo is not None for i in items)
    assert await store.inbox_take("rt-a") == []  # taken: never handed out again
    assert await store.inbox_receipt("q-1") is None  # taken, not answered yet

    await store.inbox_answer("q-1", accepted("c-1"))
    assert await store.inbox_receipt("q-1") == accepted("c-1")
    assert await store.inbox_receipt("q-2") is None
    assert await store.inbox_receipt("q-unknown") is None
    assert [i.request_id for i in await store.inbox_take("rt-b")] == ["q-3"]


async def test_take_honours_its_limit_oldest_first(store: Store) -> None:
    for n in range(5):
        await store.inbox_put(owner="rt-a", request_id=f"q-{n}", command=command(f"c-{n}"))
    assert [i.request_id for i in await store.inbox_take("rt-a", limit=2)] == ["q-0", "q-1"]
    assert [i.request_id for i in await store.inbox_take("rt-a", limit=10)] == [
        "q-2",
        "q-3",
        "q-4",
    ]


async def test_a_take_limit_of_zero_or_less_takes_nothing(store: Store) -> None:
    # SQLite read LIMIT -1 as no limit: the take claimed every item of the inbox
    for n in range(3):
        await store.inbox_put(owner="rt-a", request_id=f"q-{n}", command=command(f"c-{n}"))
    assert await store.inbox_take("rt-a", limit=0) == []
    assert await store.inbox_take("rt-a", limit=-1) == []
    assert len(await store.inbox_take("rt-a")) == 3  # nothing was claimed meanwhile


async def test_concurrent_takers_never_share_an_item(store: Store) -> None:
    for n in range(40):
        await store.inbox_put(owner="rt-a", request_id=f"q-{n:02d}", command=command(f"c-{n}"))
    batches = await asyncio.gather(*(store.inbox_take("rt-a", limit=7) for _ in range(8)))
    taken = [i.request_id for batch in batches for i in batch]
    assert sorted(taken) == [f"q-{n:02d}" for n in range(40)]


async def test_items_nobody_answered_leave_after_the_retention_window(store: Store) -> None:
    # An item taken by an owner that crashed before answering (or addressed to an owner that
    # never came back) was kept forever; its submitter stopped waiting (ReceiptTimeout) long
    # before the window ends, so it goes with the answered items of its age.
    clock = FakeClock()
    with use_clock(clock):
        await store.inbox_put(owner="rt-dead", request_id="q-taken", command=command("c-1"))
        await store.inbox_take("rt-dead")  # ... and the owner dies here
        await store.inbox_put(owner="rt-gone", request_id="q-pending", command=command("c-2"))
        await store.inbox_put(owner="rt-a", request_id="q-answered", command=command("c-3"))
        await store.inbox_take("rt-a")
        await store.inbox_answer("q-answered", accepted("c-3"))
        await elapse(store, clock, INBOX_RETENTION_S / 2)
        await store.inbox_put(owner="rt-a", request_id="q-young", command=command("c-4"))
        await elapse(store, clock, INBOX_RETENTION_S / 2 + 1)
        await store.inbox_put(owner="rt-a", request_id="q-new", command=command("c-5"))
        await store.inbox_take("rt-a")
        await store.inbox_answer("q-new", accepted("c-5"))
        assert await store.inbox_take("rt-gone") == []  # the old pending item is gone too
    assert await store.inbox_receipt("q-answered") is None  # pruned, as before
    assert await store.inbox_receipt("q-new") == accepted("c-5")
    assert sorted(await inbox_rows(store)) == ["q-new", "q-young"]


async def inbox_rows(store: Store) -> list[str]:
    """The request ids the backend's inbox holds, read from its own storage."""
    if isinstance(store, MemoryStore):
        return list(store._inbox)
    if isinstance(store, SqliteStore):
        async with store.db.execute("SELECT request_id FROM inbox") as cur:
            return [row[0] for row in await cur.fetchall()]
    assert isinstance(store, PostgresStore)
    return [row[0] for row in await store.pool.fetch("SELECT request_id FROM inbox")]


async def test_two_connections_never_share_an_item(durable_backend: Any, tmp_path: Path) -> None:
    first, second = durable_backend.make(tmp_path), durable_backend.make(tmp_path)
    await first.open()
    await second.open()
    try:
        for n in range(30):
            await first.inbox_put(owner="rt-a", request_id=f"q-{n:02d}", command=command(f"c{n}"))
        batches = await asyncio.gather(
            *(s.inbox_take("rt-a", limit=4) for _ in range(5) for s in (first, second))
        )
        taken = [i.request_id for batch in batches for i in batch]
        assert sorted(taken) == [f"q-{n:02d}" for n in range(30)]
        await second.inbox_answer("q-00", accepted("c0"))
        assert await first.inbox_receipt("q-00") == accepted("c0")
    finally:
        await first.close()
        await second.close()


async def test_an_unreadable_sqlite_row_is_answered_rejected_not_returned(tmp_path: Path) -> None:
    """Shown on a SQLite file, where a row can be damaged by hand (PostgreSQL's own test is in
    test_postgres_store.py)."""
    store = SqliteStore(tmp_path / "store.db")
    await store.open()
    try:
        await _unreadable_row_is_rejected(store, tmp_path / "store.db")
    finally:
        await store.close()


async def _unreadable_row_is_rejected(store: Store, path: Path) -> None:
    await store.inbox_put(owner="rt-a", request_id="q-bad", command=command("c-bad"))
    await store.inbox_put(owner="rt-a", request_id="q-good", command=command("c-good"))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE inbox SET command = '{\"kind\": 1}' WHERE request_id = 'q-bad'")
    assert [i.request_id for i in await store.inbox_take("rt-a")] == ["q-good"]
    receipt = await store.inbox_receipt("q-bad")
    assert receipt is not None and receipt.status == "rejected"
    assert receipt.reason is not None and receipt.reason.startswith("unreadable in the inbox")


async def test_a_receipt_that_does_not_read_is_a_store_error_naming_the_request(
    tmp_path: Path,
) -> None:
    """A receipt written by another version of the owner (a status this one does not know,
    during a rolling upgrade) made ``inbox_receipt`` raise pydantic's ``ValidationError``:
    the sender's API answered 500. It is a ``StoreError`` now, saying how to learn the
    outcome. (PostgreSQL's own test is in test_postgres_store.py.)"""
    store = SqliteStore(tmp_path / "store.db")
    await store.open()
    try:
        await store.inbox_put(owner="rt-a", request_id="q-new", command=command("c-new"))
        await store.inbox_answer("q-new", accepted("c-new"))
        with sqlite3.connect(tmp_path / "store.db") as db:
            db.execute(
                "UPDATE inbox SET receipt = '{\"status\": \"queued\"}' WHERE request_id = 'q-new'"
            )
        with pytest.raises(StoreError, match=r"q-new.*same correlation id"):
            await store.inbox_receipt("q-new")
    finally:
        await store.close()


async def test_load_run_reads_one_snapshot(store: Store) -> None:
    snap = {
        "run_id": "r-1",
        "root_run_id": "r-1",
        "tenant_id": "acme",
        "status": "running",
        "owner": "rt-a",
        "pending_commands": [{"correlation_id": "c-1", "kind": "pause", "state": "accepted"}],
        "interrupts": [{"id": "i-1", "task_id": "t", "node": "ask", "value": {"q": 1}}],
    }
    await store.save_runs([snap])
    assert await store.load_run("r-1") == snap
    assert await store.load_run("r-2") is None
    await store.save_runs([{**snap, "status": "completed"}])
    assert (await store.load_run("r-1"))["status"] == "completed"  # type: ignore[index]


async def test_read_events_pages_by_id_with_filters(store: Store) -> None:
    def event(run_id: str, root: str, tenant: str | None) -> RunEvent:
        return RunEvent(
            type="run.started", run_id=run_id, root_run_id=root, tenant_id=tenant, at=EPOCH
        )

    await store.append_events(
        [
            event("r-1", "r-1", "acme"),
            event("r-2", "r-1", "acme"),
            event("g-1", "g-1", "globex"),
            event("r-1", "r-1", "acme"),
        ]
    )
    rows = await store.read_events()
    ids = [i for i, _ in rows]
    assert len(ids) == 4 and ids == sorted(set(ids))
    assert [e.run_id for _, e in rows] == ["r-1", "r-2", "g-1", "r-1"]
    assert [e.run_id for _, e in await store.read_events(after_id=ids[1])] == ["g-1", "r-1"]
    assert [i for i, _ in await store.read_events(tenant_id="acme")] == [ids[0], ids[1], ids[3]]
    assert [i for i, _ in await store.read_events(run_id="r-1")] == [ids[0], ids[3]]
    assert [i for i, _ in await store.read_events(root_run_id="r-1", limit=2)] == ids[:2]
    assert await store.read_events(tenant_id="nobody") == []
    assert await store.read_events(after_id=ids[-1]) == []
    await store.append_events([event("r-3", "r-3", "acme")])
    (newer,) = await store.read_events(after_id=ids[-1])
    assert newer[0] > ids[-1] and newer[1].run_id == "r-3"


async def test_read_events_with_a_limit_of_zero_or_less_reads_nothing(store: Store) -> None:
    # the memory store checked the limit only after taking a row: limit=0 read one
    await store.append_events(
        [RunEvent(type="run.started", run_id="r-1", root_run_id="r-1", at=EPOCH)] * 2
    )
    assert await store.read_events(limit=0) == []
    assert await store.read_events(limit=-1) == []


async def test_an_unreadable_row_whose_answer_fails_strands_no_readable_item(
    tmp_path: Path,
) -> None:
    """Taking a batch marks every row of it taken; an unreadable row is answered on the way.
    When that answer failed (a full disk, a dropped connection), the take raised and the
    readable rows of the batch, taken already, were never handed out: their commands were
    lost (nothing takes a taken row again). The readable rows are returned all the same; the
    unreadable row stays without an answer (its sender times out, as for a row nobody can
    read)."""

    class AnswerFails(SqliteStore):
        async def inbox_answer(self, request_id: str, receipt: SteeringReceipt) -> None:
            raise StoreError("database or disk is full")

    path = tmp_path / "store.db"
    store = AnswerFails(path)
    await store.open()
    try:
        await store.inbox_put(owner="rt-a", request_id="q-bad", command=command("c-bad"))
        await store.inbox_put(owner="rt-a", request_id="q-good", command=command("c-good"))
        with sqlite3.connect(path) as db:
            db.execute("UPDATE inbox SET command = '{\"kind\": 1}' WHERE request_id = 'q-bad'")
        assert [i.request_id for i in await store.inbox_take("rt-a")] == ["q-good"]
        assert await store.inbox_receipt("q-bad") is None
    finally:
        await store.close()


async def test_an_item_taken_and_not_answered_is_taken_again_after_its_lease(
    store: Store,
) -> None:
    # The owner took the item and died (or the reply to its take was lost after COMMIT): the
    # item was never handed out again and its command was lost. A lease lets it go again.
    clock = FakeClock()
    with use_clock(clock):
        await store.inbox_put(owner="rt-a", request_id="q-1", command=command("c-1"))
        assert [i.request_id for i in await store.inbox_take("rt-a")] == ["q-1"]
        await elapse(store, clock, INBOX_LEASE_S - 1)
        assert await store.inbox_take("rt-a") == []  # within the lease: still the first taker's
        await elapse(store, clock, 2)
        again = await store.inbox_take("rt-a")
        assert [(i.request_id, i.command) for i in again] == [("q-1", command("c-1"))]
        assert await store.inbox_take("rt-a") == []  # the new take holds a new lease
        await store.inbox_answer("q-1", accepted("c-1"))
        assert await store.inbox_receipt("q-1") == accepted("c-1")


async def test_answered_items_are_never_taken_again(store: Store) -> None:
    clock = FakeClock()
    with use_clock(clock):
        await store.inbox_put(owner="rt-a", request_id="q-1", command=command("c-1"))
        await store.inbox_take("rt-a")
        await store.inbox_answer("q-1", accepted("c-1"))
        await elapse(store, clock, INBOX_LEASE_S * 10)
        assert await store.inbox_take("rt-a") == []
        assert await store.inbox_receipt("q-1") == accepted("c-1")


async def test_the_new_owner_of_a_run_takes_what_its_dead_owner_left(store: Store) -> None:
    # A restarted run has a new owner (a new runtime id); the items addressed to the dead one
    # (taken and never answered, or never taken) go to the run's new owner once their lease
    # (or, never taken, their age) passes the lease time, and to nobody else.
    clock = FakeClock()
    with use_clock(clock):
        await store.save_runs([snapshot("r-1", owner="rt-dead")])
        await store.inbox_put(owner="rt-dead", request_id="q-taken", command=command("c-1"))
        await store.inbox_take("rt-dead")  # ... and dies
        await store.inbox_put(owner="rt-dead", request_id="q-pending", command=command("c-2"))
        await store.inbox_put(
            owner="rt-dead", request_id="q-other", command=command("c-3", run_id="r-2")
        )
        await store.save_runs([snapshot("r-1", owner="rt-new")])  # restarted elsewhere
        assert await store.inbox_take("rt-new") == []  # the dead owner's lease still runs
        await elapse(store, clock, INBOX_LEASE_S + 1)
        assert await store.inbox_take("rt-stranger") == []
        taken = await store.inbox_take("rt-new")
        assert [(i.request_id, i.owner) for i in taken] == [
            ("q-taken", "rt-new"),
            ("q-pending", "rt-new"),
        ]
        assert await store.inbox_take("rt-new") == []
        # the new owner holds the lease now; the dead owner's other run was not restarted
        assert [i.request_id for i in await store.inbox_take("rt-dead")] == ["q-other"]


def snapshot(run_id: str, *, owner: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "root_run_id": run_id,
        "tenant_id": "acme",
        "status": "running",
        "owner": owner,
        "created_at": EPOCH.isoformat(),
    }
