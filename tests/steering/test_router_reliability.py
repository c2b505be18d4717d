"""The router and the runtime under faults: store failures, shared stores, tenants, shutdown.

Each test names the reliability item it pins down (see docs/guarantees.md).
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from steerkit import OPERATOR, apply_ready, finish_run, make_command, start_run

from tests.holds import HoldNamed, until_resend_waits
from tinyagents.errors import InvalidCommandError, RuntimeClosed, StoreError
from tinyagents.protocol import (
    CommandState,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.protocol.commands import dedupe_scope
from tinyagents.runtime import Runtime
from tinyagents.steering.router import _thread_key
from tinyagents.store import SqliteStore
from tinyagents.testkit import EventRecorder, EventWaiter, FakeClock, use_clock

K = SteeringKind
ACME = SteeringActor.human("alice", tenant_id="acme", scopes=["agent:control"])
EVIL = SteeringActor.human("mallory", tenant_id="evil", scopes=["agent:control"])


def url(path: Path) -> str:
    return f"sqlite:///{path}"


async def fill_the_disk(store: SqliteStore) -> None:
    """Cap the database at the pages it has: SQLite then fails every write that needs a new
    page with its real SQLITE_FULL ("database or disk is full")."""
    async with store.db.execute("PRAGMA page_count") as cur:
        row = await cur.fetchone()
    assert row is not None
    await store.db.execute(f"PRAGMA max_page_count = {row[0]}")


async def free_the_disk(store: SqliteStore) -> None:
    await store.db.execute("PRAGMA max_page_count = 1073741823")


#: Long enough to need pages of its own (a row of the steering log overflows one page).
BIG = "focus on billing evidence " * 400


# --------------------------------------------------------------------------- item 3


@pytest.mark.parametrize("kind", [K.ADD_INSTRUCTION, K.CONSTRAIN_MODEL])
async def test_a_store_failure_in_submit_leaves_no_trace_and_the_id_reusable(
    tmp_path: Path, kind: SteeringKind
) -> None:
    """Item 3: a failed write raises StoreError, tracks nothing, emits nothing, and a retry
    with the same correlation id (once the disk has room) is taken, not answered duplicate.
    CONSTRAIN_MODEL to a model the run lacks is rejected: the rejection is logged too."""
    recorder = EventRecorder()
    store = SqliteStore(tmp_path / "x.db")
    async with Runtime(store=store, testing=True, sinks=[recorder]) as rt:
        handle = await start_run(rt, "r-1", models=["m-1"])
        payload = {"text": BIG} if kind is K.ADD_INSTRUCTION else {"models": ["m-2", BIG[:9000]]}
        cmd = make_command("r-1", kind, payload)
        await fill_the_disk(store)
        with pytest.raises(StoreError, match="disk is full"):
            await rt.submit(cmd)
        await free_the_disk(store)
        assert recorder.steering(cmd.correlation_id) == []
        assert rt.router.open_commands() == []
        assert rt.router.state(cmd.correlation_id) is None
        assert await store.get_command(cmd.correlation_id, scope=dedupe_scope(OPERATOR)) is None

        retry = await rt.submit(cmd)
        assert retry.status is not ReceiptStatus.DUPLICATE
        apply_ready(handle)
        await finish_run(rt, handle)
        recorder.assert_every_command_terminal()
        assert recorder.lifecycle(cmd.correlation_id)[0] == "requested"
        assert recorder.lifecycle(cmd.correlation_id).count("requested") == 1


async def test_a_store_closed_under_the_runtime_is_a_store_error_not_a_driver_error(
    tmp_path: Path,
) -> None:
    recorder = EventRecorder()
    rt = Runtime(store=url(tmp_path / "x.db"), testing=True, sinks=[recorder])
    await rt.open()
    await start_run(rt, "r-1")
    await rt.store.db.close()  # type: ignore[attr-defined]  # the connection dies under it
    cmd = make_command("r-1")
    with pytest.raises(StoreError):
        await rt.submit(cmd)
    assert recorder.steering(cmd.correlation_id) == []
    assert rt.router.open_commands() == []
    with pytest.raises(StoreError):  # what could not be saved is said, after closing all
        await rt.close()
    assert not rt._open


class LostReplyStore(SqliteStore):
    """A real SQLite store whose next ``append_command`` commits the row and then fails as a
    dropped connection does after COMMIT: the caller cannot tell it was written."""

    lose_next = False

    async def append_command(self, cmd: SteeringCommand, *, state: str, **kw: Any) -> bool:
        inserted = await super().append_command(cmd, state=state, **kw)
        if self.lose_next:
            self.lose_next = False
            raise StoreError("connection was closed in the middle of operation")
        return inserted


async def test_a_retry_after_a_lost_reply_takes_its_own_logged_row_over(tmp_path: Path) -> None:
    """Item 3: the INSERT committed but its reply was lost, so submit raised StoreError and
    freed the id. The documented retry was answered duplicate (the row was there), and the
    command sat open in the log, never applied. The retry of the same command takes the
    row over; another command under that id is still a duplicate."""
    store = LostReplyStore(tmp_path / "x.db")
    async with Runtime(store=store, testing=True) as rt:
        handle = await start_run(rt, "r-1")
        cmd = make_command("r-1", correlation_id="lost-reply")
        store.lose_next = True
        with pytest.raises(StoreError):
            await rt.submit(cmd)
        assert (await rt.submit(cmd)).status is ReceiptStatus.ACCEPTED
        assert [c.correlation_id for c in apply_ready(handle)] == ["lost-reply"]
        other = make_command("r-1", correlation_id="lost-reply", payload={"text": "other"})
        assert (await rt.submit(other)).status is ReceiptStatus.DUPLICATE
        await finish_run(rt, handle)
        await rt.flush()
        stored = await store.get_command("lost-reply", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "applied"


async def test_the_same_command_sent_to_two_runtimes_on_one_log_is_a_duplicate_there(
    tmp_path: Path,
) -> None:
    """Item 5: a client's retry through another runtime (a load balancer) is a duplicate:
    only a write of this runtime's own that failed may be taken over by its retry."""
    db = tmp_path / "shared.db"
    async with (
        Runtime(store=url(db), testing=True) as first,
        Runtime(store=url(db), testing=True) as second,
    ):
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="once")
        assert (await first.submit(cmd)).status is ReceiptStatus.DEFERRED
        assert (await second.submit(cmd)).status is ReceiptStatus.DUPLICATE
        a = await start_run(first, "r-a", thread_id="t-1")
        b = await start_run(second, "r-b", thread_id="t-1")
        assert [c.correlation_id for c in apply_ready(a)] == ["once"]
        assert apply_ready(b) == []
        await finish_run(first, a)
        await finish_run(second, b)


async def test_a_deferred_command_another_runtime_took_is_not_taken_again(tmp_path: Path) -> None:
    """Item 5: taken (accepted for its run) by the other runtime but not applied yet: it is
    that runtime's to settle, not this one's to hand to its own run of the thread."""
    db = tmp_path / "shared.db"
    async with Runtime(store=url(db), testing=True) as first:
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="taken")
        assert (await first.submit(cmd)).status is ReceiptStatus.DEFERRED
        async with Runtime(store=url(db), testing=True) as second:
            taker = await start_run(second, "r-b", thread_id="t-1")  # takes it, not applied
            await second.flush()
            later = await start_run(first, "r-a", thread_id="t-1")
            assert apply_ready(later) == []
            assert first.router.open_commands() == []
            assert [c.correlation_id for c in apply_ready(taker)] == ["taken"]
            await finish_run(second, taker)
            await finish_run(first, later)


async def test_a_deferred_command_two_runtimes_claim_at_once_is_taken_by_one(
    tmp_path: Path,
) -> None:
    """Item 5: two runtimes on one log each hold the deferred command (one deferred it, the
    other restored it) and each gets a run of the thread at the same moment: both read
    "deferred" from the log before either wrote. The log's state moves deferred → accepted
    for one of them only (a compare-and-set); the other drops its copy, with no event."""
    db = tmp_path / "shared.db"
    recorder = EventRecorder()
    async with Runtime(store=url(db), testing=True, sinks=[recorder]) as first:
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="contested")
        assert (await first.submit(cmd)).status is ReceiptStatus.DEFERRED
        async with Runtime(store=url(db), testing=True, sinks=[recorder]) as second:
            a, b = await asyncio.gather(
                start_run(first, "r-a", thread_id="t-1"),
                start_run(second, "r-b", thread_id="t-1"),
            )
            taken = [c.correlation_id for c in apply_ready(a) + apply_ready(b)]
            assert taken == ["contested"]
            assert first.router.open_commands() == second.router.open_commands() == []
            await finish_run(first, a)
            await finish_run(second, b)
            await first.flush()
            await second.flush()
        accepted = [e for e in recorder.steering("contested") if e.type == "steering.accepted"]
        assert len(accepted) == 1
        stored = await first.store.get_command("contested", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "applied"


async def test_a_deferred_command_whose_take_fails_on_the_store_waits_not_fails(
    tmp_path: Path,
) -> None:
    """Item 5: runtime A read "deferred" from the shared log, then B took the command and
    applied it, then A's compare-and-set met a real SQLITE_BUSY: A failed its copy, a second
    terminal state, and its "failed" overwrote "applied" in the log. A's copy waits on."""
    import sqlite3

    db = tmp_path / "shared.db"
    recorder = EventRecorder()

    class Ordered(SqliteStore):
        """Scheduling only: after A's read of the log, B takes and applies the command, and
        a third connection holds the write lock past A's busy timeout."""

        hook: Any = None

        async def get_command(self, correlation_id: str, *, scope: str = "") -> Any:
            stored = await super().get_command(correlation_id, scope=scope)
            if self.hook is not None:
                hook, self.hook = self.hook, None
                await hook()
            return stored

    store_a = Ordered(db, busy_timeout_s=0.2)
    async with Runtime(store=store_a, testing=True, sinks=[recorder]) as first:
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="shared")
        assert (await first.submit(cmd)).status is ReceiptStatus.DEFERRED
        await first.flush()
        async with Runtime(store=url(db), testing=True, sinks=[recorder]) as second:
            locker: list[sqlite3.Connection] = []

            async def b_takes_it_first() -> None:
                taker = await start_run(second, "r-b", thread_id="t-1")
                assert [c.correlation_id for c in apply_ready(taker)] == ["shared"]
                await finish_run(second, taker)
                await second.flush()
                hold = sqlite3.connect(db, timeout=0, isolation_level=None)
                hold.execute("BEGIN IMMEDIATE")
                locker.append(hold)

            store_a.hook = b_takes_it_first
            late = await start_run(first, "r-a", thread_id="t-1")
            locker[0].execute("COMMIT")
            locker[0].close()
            assert apply_ready(late) == []
            await finish_run(first, late)
            await first.flush()
        terminal = [
            e.type
            for e in recorder.steering("shared")
            if e.type in ("steering.applied", "steering.failed")
        ]
        assert terminal == ["steering.applied"]
        stored = await store_a.get_command("shared", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "applied"


# --------------------------------------------------------------------------- item 5


async def test_two_runtimes_on_one_file_never_take_the_same_correlation_id(tmp_path: Path) -> None:
    """Item 5: deduplication holds in the store, not only in one process: the second runtime
    is answered duplicate and the first's accepted row is never overwritten."""
    db = tmp_path / "shared.db"
    async with (
        Runtime(store=url(db), testing=True) as first,
        Runtime(store=url(db), testing=True) as second,
    ):
        one = await start_run(first, "r-1")
        await start_run(second, "r-2")
        cmd = make_command("r-1", correlation_id="approve-1042", payload={"text": "first"})
        assert (await first.submit(cmd)).accepted
        clash = make_command("r-2", correlation_id="approve-1042", payload={"text": "second"})
        receipt = await second.submit(clash)
        assert receipt.status is ReceiptStatus.DUPLICATE
        assert second.router.open_commands() == []
        stored = await second.store.get_command("approve-1042", scope=dedupe_scope(OPERATOR))
        assert stored is not None
        assert (stored.state, stored.run_id) == ("accepted", "r-1")
        assert stored.command.payload == {"text": "first"}
        apply_ready(one)
        await finish_run(first, one)


async def test_a_command_another_runtime_settled_is_not_handed_to_a_run_again(
    tmp_path: Path,
) -> None:
    """Item 5: a runtime that opened on the shared log while a command was open there
    restored it; the runtime that had accepted it then applied it. When the run is started
    again under its id (crash recovery) on the second runtime, the log says the command is
    settled: it is not applied a second time (it was, from the stale copy)."""
    db = tmp_path / "shared.db"
    async with Runtime(store=url(db), testing=True) as first:
        run = await start_run(first, "r-1")
        cmd = make_command("r-1", correlation_id="once")
        assert (await first.submit(cmd)).accepted
        async with Runtime(store=url(db), testing=True) as second:  # restores "once"
            apply_ready(run)
            await finish_run(first, run)
            await first.flush()  # the log says applied
            again = await start_run(second, "r-1")
            assert apply_ready(again) == []
            assert second.router.open_commands() == []
            assert second.router.state("once") is CommandState.APPLIED
            await finish_run(second, again)
        stored = await first.store.get_command("once", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "applied"


async def test_a_deferred_thread_command_is_applied_by_one_runtime_only(tmp_path: Path) -> None:
    """Item 5: a command deferred for a thread with no live run waits in the log; a runtime
    that opened on the log since has it too. A run of the thread on either takes it, and a
    later run of the thread on the other must not take it again."""
    db = tmp_path / "shared.db"
    thread = SteeringTarget.thread("t-1")
    async with Runtime(store=url(db), testing=True) as first:
        cmd = make_command(target=thread, correlation_id="deferred-once")
        assert (await first.submit(cmd)).status is ReceiptStatus.DEFERRED
        async with Runtime(store=url(db), testing=True) as second:
            taker = await start_run(second, "r-2", thread_id="t-1")
            assert [c.correlation_id for c in apply_ready(taker)] == ["deferred-once"]
            await finish_run(second, taker)
            await second.flush()
        later = await start_run(first, "r-3", thread_id="t-1")
        assert apply_ready(later) == []
        assert first.router.open_commands() == []
        await finish_run(first, later)


# --------------------------------------------------------------------------- item 16 / 17


@pytest.mark.parametrize("durable", [False, True])
async def test_one_tenant_cannot_squat_another_tenants_correlation_id(
    tmp_path: Path, durable: bool
) -> None:
    """Item 16: tenant B sends a command with A's id first (to a run it cannot see, or to its
    own run); A's real command with that id is still taken."""
    recorder = EventRecorder()
    store = url(tmp_path / "x.db") if durable else None
    async with Runtime(store=store, sinks=[recorder]) as rt:
        victim = await start_run(rt, "r-a", tenant_id="acme")
        await start_run(rt, "r-b", tenant_id="evil")
        squat = make_command("r-unknown", actor=EVIL, correlation_id="approve-invoice-1042")
        assert (await rt.submit(squat)).status is ReceiptStatus.REJECTED
        own = make_command("r-b", actor=EVIL, correlation_id="approve-invoice-1042")
        assert (await rt.submit(own)).status is ReceiptStatus.DUPLICATE  # B's own scope
        real = make_command("r-a", actor=ACME, correlation_id="approve-invoice-1042")
        receipt = await rt.submit(real)
        assert receipt.accepted, receipt.reason
        assert [c.correlation_id for c in apply_ready(victim)] == ["approve-invoice-1042"]
        assert rt.router.state("approve-invoice-1042", scope="tenant:acme") == "applied"
        assert rt.router.state("approve-invoice-1042", scope="tenant:evil") == "rejected"
        # A retry by A is a duplicate of A's own command, as before.
        assert (await rt.submit(real)).status is ReceiptStatus.DUPLICATE


@pytest.mark.parametrize("durable", [False, True])
async def test_two_senders_may_queue_commands_with_one_id_on_one_run(
    tmp_path: Path, durable: bool
) -> None:
    """A correlation id is unique per sender scope, in the run's queue too: a parent agent's
    command and an operator's under the same id are both queued, delivered and applied,
    each with its own lifecycle (the queue refused the second as a duplicate)."""
    recorder = EventRecorder()
    store = url(tmp_path / "x.db") if durable else None
    async with Runtime(store=store, sinks=[recorder]) as rt:
        await start_run(rt, "r-parent", tenant_id="acme")
        child = await start_run(rt, "r-child", parent="r-parent", tenant_id="acme")
        parent = SteeringActor.parent_agent("r-parent", "lead")
        first = make_command("r-child", actor=parent, correlation_id="k")
        second = make_command("r-child", actor=ACME, correlation_id="k", payload={"text": "b"})
        for cmd in (first, second):
            receipt = await rt.submit(cmd)
            assert receipt.accepted, receipt.reason
        taken = apply_ready(child)
        assert [(c.correlation_id, dedupe_scope(c.actor)) for c in taken] == [
            ("k", ""),
            ("k", "tenant:acme"),
        ]
        for scope in ("", "tenant:acme"):
            assert rt.router.state("k", scope=scope) == "applied"
        assert not rt.router.open_commands()


@pytest.mark.parametrize("durable", [False, True])
async def test_two_senders_commands_with_one_id_both_wait_for_a_thread_run(
    tmp_path: Path, durable: bool
) -> None:
    """Commands waiting for a run (deferred for a thread, or restored after a restart) were
    kept by correlation id alone: the second sender's replaced the first's, which stayed
    open and was never delivered."""
    store = url(tmp_path / "x.db") if durable else None
    async with Runtime(store=store, testing=True) as rt:
        for actor in (SteeringActor.test(), ACME):
            cmd = make_command(target=SteeringTarget.thread("t"), actor=actor, correlation_id="k")
            assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
        run = await start_run(rt, "r", tenant_id="acme", thread_id="t")
        taken = apply_ready(run)
        assert sorted(dedupe_scope(c.actor) for c in taken) == ["", "tenant:acme"]
        assert not rt.router.open_commands()


async def test_a_thread_command_goes_to_the_senders_tenants_run_on_a_shared_thread_id() -> None:
    """Item 17: thread ids are each tenant's own; with another tenant's run newer on the
    same thread id, the command was deferred (it looked at the newest run only)."""
    async with Runtime() as rt:
        ours = await start_run(rt, "r-acme", tenant_id="acme", thread_id="t")
        await start_run(rt, "r-evil", tenant_id="evil", thread_id="t")
        cmd = make_command(target=SteeringTarget.thread("t"), actor=ACME)
        receipt = await rt.submit(cmd)
        assert (receipt.status, receipt.run_id) == (ReceiptStatus.ACCEPTED, "r-acme")
        assert [c.correlation_id for c in apply_ready(ours)] == [cmd.correlation_id]
        assert rt.steering_history("r-evil") == []


@pytest.mark.parametrize("durable", [False, True])
async def test_a_foreign_tenants_attempt_is_filed_with_the_sender_not_the_victim(
    tmp_path: Path, durable: bool
) -> None:
    """Item 17: the victim's history and event log never show another tenant's attempt."""
    recorder = EventRecorder()
    store = url(tmp_path / "x.db") if durable else None
    async with Runtime(store=store, sinks=[recorder]) as rt:
        victim = await start_run(rt, "r-a", tenant_id="acme")
        own = await rt.submit(make_command("r-a", actor=ACME))
        attempt = make_command("r-a", K.CANCEL, {"reason": "evil payload"}, actor=EVIL)
        receipt = await rt.submit(attempt)
        assert receipt.status is ReceiptStatus.REJECTED
        assert receipt.run_id is None and receipt.reason == "not found: run r-a"
        history = rt.steering_history("r-a")
        assert {e.correlation_id for e in history} == {own.correlation_id}
        events = recorder.steering(attempt.correlation_id)
        assert [e.type for e in events] == ["steering.requested", "steering.rejected"]
        for event in events:  # the sender's audit trail: its tenant, no run of the victim's
            assert (event.run_id, event.root_run_id, event.tenant_id) == (None, None, "evil")
        apply_ready(victim)
        await finish_run(rt, victim)
        if durable:
            logged = await rt.store.load_events(run_id="r-a")
            assert attempt.correlation_id not in {
                getattr(e, "correlation_id", None) for e in logged
            }
    if durable:
        reader = SqliteStore(tmp_path / "x.db")
        await reader.open()
        try:
            logged = await reader.load_events(run_id="r-a")
        finally:
            await reader.close()
        assert attempt.correlation_id not in {getattr(e, "correlation_id", None) for e in logged}


# --------------------------------------------------------------------------- item 24


async def test_a_thread_commands_history_starts_at_requested(
    rt: Runtime, recorder: EventRecorder
) -> None:
    """Item 24: the requested and deferred events of a command that waited for a run on its
    thread are in that run's history, before accepted."""
    cmd = make_command(target=SteeringTarget.thread("t-1"))
    assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
    handle = await start_run(rt, "r-1", thread_id="t-1")
    apply_ready(handle)
    assert [e.type for e in rt.steering_history("r-1")] == [
        "steering.requested",
        "steering.deferred",
        "steering.accepted",
        "steering.delivered",
        "steering.applied",
    ]


# --------------------------------------------------------------------------- item 2


async def test_a_stored_command_that_no_longer_validates_fails_and_blocks_nothing(
    tmp_path: Path,
) -> None:
    """Item 2: restore is robust: the unreadable command is marked failed with a reason, and
    every other pending command is still handed to its run."""
    db = tmp_path / "x.db"
    async with Runtime(store=url(db), testing=True) as first:
        await start_run(first, "r-1")
        good = await first.submit(make_command("r-1", payload={"text": "keep"}))
        bad = await first.submit(make_command("r-1", K.PROVIDE_CONTEXT, {"value": 1.5}))
        also_good = await first.submit(make_command("r-1", payload={"text": "keep too"}))
    # What a NaN written by an older version reads back as: JSON null, which no longer
    # validates (provide_context needs text or value).
    raw = sqlite3.connect(db)
    with raw:
        raw.execute(
            "UPDATE steering_log SET command = replace(command, '1.5', 'null')"
            " WHERE correlation_id = ?",
            (bad.correlation_id,),
        )
    raw.close()

    async with Runtime(store=url(db), testing=True) as second:
        handle = await start_run(second, "r-1")
        queued = [c.correlation_id for c in handle.inbox.queue.pending()]
        assert queued == [good.correlation_id, also_good.correlation_id]
        stored = await second.store.get_command(good.correlation_id, scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "accepted"
        with pytest.raises(StoreError, match="unreadable"):
            await second.store.get_command(bad.correlation_id, scope=dedupe_scope(OPERATOR))
        apply_ready(handle)
        await finish_run(second, handle)
    raw = sqlite3.connect(db)
    state, reason = raw.execute(
        "SELECT state, reason FROM steering_log WHERE correlation_id = ?", (bad.correlation_id,)
    ).fetchone()
    raw.close()
    assert state == "failed" and "unreadable" in reason


async def test_a_version_1_steering_log_is_migrated_with_tenant_scopes(tmp_path: Path) -> None:
    """The scope column added for item 16: rows logged by the first schema keep their ids,
    a human's in its tenant's scope."""
    from tinyagents.store.sqlite import MIGRATIONS

    db = tmp_path / "old.db"
    raw = sqlite3.connect(db)
    raw.executescript(MIGRATIONS[0][1])
    raw.execute(
        "CREATE TABLE migrations (name TEXT NOT NULL, version INTEGER NOT NULL,"
        " applied_at TEXT NOT NULL, PRIMARY KEY (name, version))"
    )
    raw.execute("INSERT INTO migrations VALUES ('steering', 1, '2026-01-01')")
    human = make_command("r-1", actor=ACME, correlation_id="c-h")
    local = make_command("r-1", actor=SteeringActor.test(), correlation_id="c-t")
    for seq, cmd in enumerate((human, local), 1):
        raw.execute(
            "INSERT INTO steering_log VALUES (?, 'r-1', 'accepted', NULL, ?, ?, ?)",
            (cmd.correlation_id, cmd.model_dump_json(), cmd.created_at.isoformat(), seq),
        )
    raw.commit()
    raw.close()

    store = SqliteStore(db)
    await store.open()
    try:
        assert await store.get_command("c-h", scope="tenant:acme") is not None
        assert await store.get_command("c-t") is not None
        assert [s.command.correlation_id for s in await store.open_commands()] == ["c-h", "c-t"]
        assert not await store.append_command(human, state="accepted", run_id="r-1")
    finally:
        await store.close()


# --------------------------------------------------------------------------- items 10 / 11


async def test_close_stops_intake_first_then_settles_every_run_and_command() -> None:
    """Item 10: submit and start during close raise RuntimeClosed; close returns with no run
    still running and every requested command terminal."""
    from tinyagents import Agent
    from tinyagents.testkit import FunctionModel

    started = asyncio.Event()

    async def slow(request: object) -> str:
        started.set()
        await asyncio.Event().wait()  # never answers: only a cancel ends it
        return "never"

    recorder = EventRecorder()
    rt = Runtime(testing=True, sinks=[recorder])
    await rt.open()
    agent = Agent("slow", FunctionModel(slow))
    handle = await rt.start(agent, "go")
    await started.wait()
    queued = await rt.submit(make_command(handle.run_id, delivery="before_model_call"))
    assert queued.accepted
    closing = asyncio.create_task(rt.close())
    await asyncio.sleep(0)  # close has begun
    with pytest.raises(RuntimeClosed):
        await rt.submit(make_command(handle.run_id))
    with pytest.raises(RuntimeClosed):
        await rt.start(agent, "too late")
    await closing
    assert handle.status.finished
    assert all(h.status.finished for h in rt.runs.handles())
    recorder.assert_every_command_terminal()
    await rt.close()  # closing again is a no-op
    with pytest.raises(RuntimeClosed):
        await rt.submit(make_command(handle.run_id))


async def test_a_submit_under_way_when_close_begins_is_finished_and_durable(
    tmp_path: Path,
) -> None:
    """Item 10: close waits for the submit whose store write is under way, so the command it
    accepted is both reported and logged (never accepted in the store but lost in memory)."""

    class SlowLog(SqliteStore):
        gate: asyncio.Event

        async def append_command(self, cmd: SteeringCommand, *, state: str, **kw: Any) -> bool:
            await self.gate.wait()
            return await super().append_command(cmd, state=state, **kw)

    store = SlowLog(tmp_path / "x.db")
    store.gate = asyncio.Event()
    rt = Runtime(store=store, testing=True)
    await rt.open()
    await start_run(rt, "r-1")
    submit = asyncio.create_task(rt.submit(make_command("r-1", correlation_id="c-late")))
    await asyncio.sleep(0)
    closing = asyncio.create_task(rt.close())
    await asyncio.sleep(0)
    assert not closing.done()
    store.gate.set()
    receipt = await submit
    await closing
    assert receipt.accepted
    reader = SqliteStore(tmp_path / "x.db")
    await reader.open()
    try:
        stored = await reader.get_command("c-late", scope=dedupe_scope(OPERATOR))
    finally:
        await reader.close()
    assert stored is not None and stored.state == "accepted"  # handed to the next runtime


async def test_closing_an_in_memory_runtime_fails_every_command_still_open(
    rt: Runtime, recorder: EventRecorder
) -> None:
    """Item 11: nothing carries an in-memory runtime's commands on after close: each one
    still open (queued, deferred, taken but not applied) fails with a reason."""
    await start_run(rt, "r-1")
    await start_run(rt, "r-2")
    queued = await rt.submit(make_command("r-1"))
    waiting = await rt.submit(make_command(target=SteeringTarget.thread("t-nobody")))
    handle = rt.runs.get("r-2")
    assert handle is not None
    await rt.submit(make_command("r-2"))
    taken = handle.inbox.take(__import__("tinyagents").steering.queue.Boundary.BEFORE_MODEL_CALL)
    assert len(taken) == 1
    await rt.close()
    for cid in (queued.correlation_id, waiting.correlation_id, taken[0].correlation_id):
        assert recorder.terminal_state(cid) == "failed"
        assert recorder.steering(cid)[-1].reason == "runtime closed before delivery"
    recorder.assert_every_command_terminal()


async def test_closing_with_a_graph_run_holding_an_accepted_command_settles_it() -> None:
    """Item 11, as reported: a paused graph run at rest on an interrupt holds an accepted
    redirect when an in-memory runtime closes; the redirect reaches a terminal state."""
    from typing import TypedDict

    from tinyagents.graph import END, START, StateGraph, interrupt
    from tinyagents.store.checkpoint import MemoryCheckpointer

    class State(TypedDict, total=False):
        answer: str

    def ask(state: State) -> State:
        return {"answer": interrupt("ok?")}

    graph = StateGraph(State).add_node("ask", ask)
    graph.add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    recorder = EventRecorder()
    waiter = EventWaiter()
    async with Runtime(testing=True, sinks=[recorder, waiter]) as rt:
        handle = await rt.start_graph(compiled, {}, thread_id="t-1")
        async with asyncio.timeout(60):  # a hang guard, not a timing assertion
            await waiter.event("graph.interrupt", handle.run_id)
            pause = await rt.submit(make_command(handle.run_id, K.PAUSE))
            await waiter.event("steering.applied", correlation_id=pause.correlation_id)
        redirect = await rt.submit(make_command(handle.run_id, K.REDIRECT, {"goto": "ask"}))
        assert redirect.accepted
        assert recorder.terminal_state(redirect.correlation_id) is None  # held while paused
    assert recorder.terminal_state(redirect.correlation_id) == "failed"
    recorder.assert_every_command_terminal()


async def test_a_failed_write_never_rolls_back_another_writes_row(tmp_path: Path) -> None:
    """Two command writes share one connection: the one that fails (a full disk) rolls back
    its own write only, never the row the other wrote but had not committed yet."""
    store = SqliteStore(tmp_path / "x.db")
    await store.open()
    try:
        await fill_the_disk(store)
        too_big = make_command("r-1", payload={"text": BIG}, correlation_id="c-big")
        small = make_command("r-1", K.PAUSE, correlation_id="c-small")
        big_write, small_write = await asyncio.gather(
            store.append_command(too_big, state="accepted", run_id="r-1"),
            store.append_command(small, state="accepted", run_id="r-1"),
            return_exceptions=True,
        )
        assert isinstance(big_write, StoreError)
        assert small_write is True
        assert await store.get_command("c-small", scope=dedupe_scope(OPERATOR)) is not None
    finally:
        await store.close()


async def test_a_take_whose_reply_was_lost_is_still_settled(tmp_path: Path) -> None:
    """Item 5: the compare-and-set taking a deferred command committed, but its reply was
    lost (StoreError): the copy waited, and when the run ended the log's "accepted" was read
    as another runtime's take, so the command was dropped with no terminal state."""
    recorder = EventRecorder()

    class LostReply(SqliteStore):
        fail_once = False

        async def update_command(self, cmd: SteeringCommand, **kw: Any) -> bool:
            moved = await super().update_command(cmd, **kw)
            if self.fail_once:
                self.fail_once = False
                raise StoreError("the connection dropped after COMMIT (reply lost)")
            return moved

    store = LostReply(tmp_path / "x.db")
    async with Runtime(store=store, testing=True, sinks=[recorder]) as rt:
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="lost")
        assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
        store.fail_once = True
        run = await start_run(rt, "r-a", thread_id="t-1")
        assert apply_ready(run) == []  # it waits: the take may or may not have happened
        await finish_run(rt, run)
        await rt.flush()
        assert recorder.lifecycle("lost")[-1] in ("failed", "applied")
        assert rt.router.open_commands() == []
        stored = await store.get_command("lost", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == recorder.lifecycle("lost")[-1]


async def test_refuse_logged_ends_a_logged_thread_command_rejected_once(tmp_path: Path) -> None:
    """``refuse_logged`` (its thread's run is in another runtime, which cannot take a logged
    row over) ends a thread command the durable log holds ``rejected``, in the log too, with
    its reason and policy; asked again, or for a command held in memory only (that one is
    handed over instead, ``hand_off``), it changes nothing. No run of the thread here takes
    it afterwards."""
    recorder = EventRecorder()
    store = SqliteStore(tmp_path / "x.db")
    async with Runtime(store=store, testing=True, sinks=[recorder]) as rt:
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="logged")
        assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
        assert [c.correlation_id for c, _ in rt.router.logged_for_threads()] == ["logged"]
        assert rt.router.waiting_for_threads() == []
        assert await rt.router.refuse_logged(cmd, "elsewhere", "redis") is True
        assert await rt.router.refuse_logged(cmd, "elsewhere", "redis") is False
        assert rt.router.logged_for_threads() == []
        run = await start_run(rt, "r-a", thread_id="t-1")
        assert apply_ready(run) == []
        await rt.flush()
        assert recorder.lifecycle("logged") == ["requested", "deferred", "rejected"]
        rejected = recorder.steering("logged")[-1]
        assert (rejected.reason, rejected.policy_id) == ("elsewhere", "redis")
        stored = await store.get_command("logged", scope=dedupe_scope(OPERATOR))
        assert stored is not None and (stored.state, stored.reason) == ("rejected", "elsewhere")
    async with Runtime(testing=True) as memory:
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="in-memory")
        assert (await memory.submit(cmd)).status is ReceiptStatus.DEFERRED
        assert memory.router.logged_for_threads() == []
        assert await memory.router.refuse_logged(cmd, "elsewhere", "redis") is False
        assert memory.router.state("in-memory", scope=dedupe_scope(OPERATOR)) == "deferred"


class HeldRefusal(SqliteStore):
    """A real SQLite store whose next move of a command to ``rejected`` (with ``fail_next``)
    waits for ``gate`` and then fails with nothing written, as a full disk does."""

    fail_next = False

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def update_command(
        self, cmd: SteeringCommand, *, state: str, from_state: str, **kw: Any
    ) -> bool:
        if self.fail_next and state == "rejected":
            self.fail_next = False
            self.entered.set()
            await self.gate.wait()
            raise StoreError("database or disk is full")
        return await super().update_command(cmd, state=state, from_state=from_state, **kw)


@pytest.mark.parametrize("run_meanwhile", [False, True], ids=["waits-again", "run-here"])
async def test_a_logged_thread_command_whose_refusal_fails_stays_the_logs(
    tmp_path: Path, run_meanwhile: bool
) -> None:
    """``refuse_logged`` takes the command off the waiting list while its write is under way,
    so no run here takes it meanwhile; a write that fails (nothing written) leaves it the
    log's as before: waiting again for the thread's next run, or, when a run of its thread
    registered here meanwhile, given to that run, and applied once."""
    recorder = EventRecorder()
    store = HeldRefusal(tmp_path / "x.db")
    async with Runtime(store=store, testing=True, sinks=[recorder]) as rt:
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="logged")
        assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
        store.fail_next = True
        refusal = asyncio.create_task(rt.router.refuse_logged(cmd, "elsewhere", "redis"))
        async with asyncio.timeout(60):  # a hang guard, not a timing assertion
            await store.entered.wait()
        run = None
        if run_meanwhile:
            run = await start_run(rt, "r-a", thread_id="t-1")
            assert apply_ready(run) == []  # not while the refusal's write is under way
        store.gate.set()
        with pytest.raises(StoreError):
            await refusal
        if run is None:
            assert [c.correlation_id for c, _ in rt.router.logged_for_threads()] == ["logged"]
            run = await start_run(rt, "r-a", thread_id="t-1")
        assert [c.correlation_id for c in apply_ready(run)] == ["logged"]
        await rt.flush()
        assert recorder.lifecycle("logged")[-1] == "applied"
        assert "rejected" not in recorder.lifecycle("logged")
        stored = await store.get_command("logged", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "applied"


class RefusalReplyLost(SqliteStore):
    """A real SQLite store whose next move of a command to ``rejected`` (with ``lose_next``)
    commits and then fails as a dropped connection does after COMMIT: the caller cannot tell
    it was written."""

    lose_next = False

    async def update_command(
        self, cmd: SteeringCommand, *, state: str, from_state: str, **kw: Any
    ) -> bool:
        moved = await super().update_command(cmd, state=state, from_state=from_state, **kw)
        if self.lose_next and state == "rejected":
            self.lose_next = False
            raise StoreError("connection was closed in the middle of operation")
        return moved


@pytest.mark.parametrize("then", ["retry", "run-here"])
async def test_a_refusal_whose_reply_was_lost_still_ends_rejected_here(
    tmp_path: Path, then: str
) -> None:
    """``refuse_logged``'s compare-and-set committed (the log says ``rejected``) but its reply
    was lost (StoreError): the command waited again, and its next refusal, or the take by a
    run of its thread that registered here, found the row no longer deferred and dropped it
    as another runtime's, with no terminal event. It is this router's own rejection: it ends
    ``rejected`` here, once, with the refusal's reason, and is never applied."""
    recorder = EventRecorder()
    store = RefusalReplyLost(tmp_path / "x.db")
    async with Runtime(store=store, testing=True, sinks=[recorder]) as rt:
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="logged")
        assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
        store.lose_next = True
        with pytest.raises(StoreError):
            await rt.router.refuse_logged(cmd, "elsewhere", "redis")
        stored = await store.get_command("logged", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "rejected"  # it committed
        if then == "retry":
            assert await rt.router.refuse_logged(cmd, "elsewhere again", "redis") is True
            assert await rt.router.refuse_logged(cmd, "elsewhere again", "redis") is False
        run = await start_run(rt, "r-a", thread_id="t-1")
        assert apply_ready(run) == []
        await finish_run(rt, run)
        await rt.flush()
        assert recorder.lifecycle("logged") == ["requested", "deferred", "rejected"]
        rejected = recorder.steering("logged")[-1]
        reason = "elsewhere again" if then == "retry" else "elsewhere"
        assert (rejected.reason, rejected.policy_id) == (reason, "redis")
        assert rt.router.open_commands() == []
        assert rt.router.logged_for_threads() == []
        assert rt.router.state("logged", scope=dedupe_scope(OPERATOR)) == "rejected"


class FailingLog(SqliteStore):
    """A real SQLite store whose next ``append_command`` (with ``fail_next``) waits for
    ``gate`` and then fails with nothing written, as a full disk does."""

    fail_next = False

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def append_command(self, cmd: SteeringCommand, *, state: str, **kw: Any) -> bool:
        if self.fail_next:
            self.fail_next = False
            self.entered.set()
            await self.gate.wait()
            raise StoreError("database or disk is full")
        return await super().append_command(cmd, state=state, **kw)


@pytest.mark.parametrize("held_in", ["store", "policy"])
async def test_a_resend_while_the_first_submit_fails_is_not_told_duplicate(
    tmp_path: Path, held_in: str
) -> None:
    """Item 3: a resend of a correlation id whose first submit was still under way (in an
    async policy, or in its store write) was answered ``duplicate`` at once; the first then
    failed on a StoreError and freed the id, so nothing recorded the command the resend was
    told already existed. The resend waits for the first's outcome: here a failure, so the
    resend is submitted afresh and applied once."""
    recorder = EventRecorder()
    hold = HoldNamed()
    store = FailingLog(tmp_path / "x.db")
    rt = Runtime(store=store, testing=True, sinks=[recorder])
    rt.router.pipeline.insert(hold, after="authority")
    async with rt:
        handle = await start_run(rt, "r-1")
        cmd = make_command("r-1", correlation_id="slow")
        store.fail_next = True
        if held_in == "store":
            hold.release.set()
        first = asyncio.create_task(rt.submit(cmd))
        async with asyncio.timeout(60):  # a hang guard, not a timing assertion
            await (store.entered if held_in == "store" else hold.entered).wait()
        resend = asyncio.create_task(rt.submit(cmd))
        await until_resend_waits(rt.router, cmd, resend)
        hold.release.set()
        store.gate.set()
        with pytest.raises(StoreError):
            await first
        receipt = await resend
        assert receipt.status is ReceiptStatus.ACCEPTED
        assert [c.correlation_id for c in apply_ready(handle)] == ["slow"]
        await finish_run(rt, handle)
        await rt.flush()
        assert recorder.lifecycle("slow") == ["requested", "accepted", "delivered", "applied"]
        stored = await store.get_command("slow", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "applied"


async def test_a_resend_while_the_first_submit_succeeds_is_a_duplicate(tmp_path: Path) -> None:
    """The other side of the item above: the resend waits for the first submit, which is
    accepted, and is then answered ``duplicate`` (the command is applied once)."""
    recorder = EventRecorder()
    hold = HoldNamed()
    rt = Runtime(store=url(tmp_path / "x.db"), testing=True, sinks=[recorder])
    rt.router.pipeline.insert(hold, after="authority")
    async with rt:
        handle = await start_run(rt, "r-1")
        cmd = make_command("r-1", correlation_id="slow")
        first = asyncio.create_task(rt.submit(cmd))
        async with asyncio.timeout(60):
            await hold.entered.wait()
        resend = asyncio.create_task(rt.submit(cmd))
        await until_resend_waits(rt.router, cmd, resend)
        hold.release.set()
        assert (await first).status is ReceiptStatus.ACCEPTED
        assert (await resend).status is ReceiptStatus.DUPLICATE
        assert [c.correlation_id for c in apply_ready(handle)] == ["slow"]
        await finish_run(rt, handle)
        recorder.assert_every_command_terminal()
        assert recorder.lifecycle("slow").count("requested") == 1


async def test_an_id_under_way_is_not_forgotten_past_the_dedupe_horizon(
    recorder: EventRecorder,
) -> None:
    """An in-memory router forgot the id of a submit still in the policies once newer ids
    pushed it past the horizon, so a resend of it was taken as a new command (rejected by
    the queue, for an id it already held, while the first was accepted). An id under way
    stays taken like an open one: the resend waits for the first and is a duplicate."""
    hold = HoldNamed()
    rt = Runtime(testing=True, sinks=[recorder], dedupe_horizon=1)
    rt.router.pipeline.insert(hold, after="authority")
    async with rt:
        handle = await start_run(rt, "r-1")
        cmd = make_command("r-1", correlation_id="slow")
        first = asyncio.create_task(rt.submit(cmd))
        async with asyncio.timeout(60):
            await hold.entered.wait()
        for _ in range(2):
            await rt.submit(make_command("r-1"))
        resend = asyncio.create_task(rt.submit(cmd))
        await until_resend_waits(rt.router, cmd, resend)
        hold.release.set()
        assert (await first).status is ReceiptStatus.ACCEPTED
        assert (await resend).status is ReceiptStatus.DUPLICATE
        assert [c.correlation_id for c in apply_ready(handle)].count("slow") == 1
        await finish_run(rt, handle)
        recorder.assert_every_command_terminal()


async def test_a_retried_id_is_kept_for_the_whole_dedupe_horizon(
    recorder: EventRecorder,
) -> None:
    """A submit that failed before it was announced (here: cancelled in the policies) freed
    its id but left it in the horizon's order, so the retry put it there a second time. The
    stale first entry then reached the front while the id was still among the latest
    ``dedupe_horizon`` and forgot it: a resend of the applied command was accepted and
    applied again. The failed submit's entry goes with it."""
    hold = HoldNamed()
    rt = Runtime(testing=True, sinks=[recorder], dedupe_horizon=3)
    rt.router.pipeline.insert(hold, after="authority")
    async with rt:
        handle = await start_run(rt, "r-1")
        cmd = make_command("r-1", correlation_id="slow")
        first = asyncio.create_task(rt.submit(cmd))
        async with asyncio.timeout(60):  # a hang guard, not a timing assertion
            await hold.entered.wait()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        hold.release.set()
        assert (await rt.submit(cmd)).status is ReceiptStatus.ACCEPTED
        assert [c.correlation_id for c in apply_ready(handle)] == ["slow"]
        for n in range(2):  # the latest three ids: "slow", "c-0", "c-1"
            await rt.submit(make_command("r-1", correlation_id=f"c-{n}"))
        assert [c.correlation_id for c in apply_ready(handle)] == ["c-0", "c-1"]
        assert (await rt.submit(cmd)).status is ReceiptStatus.DUPLICATE
        assert apply_ready(handle) == []
        await finish_run(rt, handle)
        recorder.assert_every_command_terminal()
        assert recorder.lifecycle("slow") == ["requested", "accepted", "delivered", "applied"]


class ReplyNeverComes(SqliteStore):
    """A real SQLite store whose next ``append_command`` (with ``hang_next``) commits the
    row and then never answers, as a reply held up on the network: the caller's task is
    cancelled (a client gone, a request timeout) while the row is already in the log."""

    hang_next = False

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.written = asyncio.Event()

    async def append_command(self, cmd: SteeringCommand, *, state: str, **kw: Any) -> bool:
        inserted = await super().append_command(cmd, state=state, **kw)
        if self.hang_next:
            self.hang_next = False
            self.written.set()
            await asyncio.Event().wait()
        return inserted


async def test_a_retry_after_a_cancelled_submit_takes_its_own_logged_row_over(
    tmp_path: Path,
) -> None:
    """Item 3: a submit cancelled while its store write was under way freed the id (nothing
    was emitted) but did not note that the write may have reached the log, as a write that
    raised does. The row was there: the retry was answered ``duplicate`` and the command sat
    open in the log, never applied. The retry takes the row over and is applied once."""
    recorder = EventRecorder()
    store = ReplyNeverComes(tmp_path / "x.db")
    async with Runtime(store=store, testing=True, sinks=[recorder]) as rt:
        handle = await start_run(rt, "r-1")
        cmd = make_command("r-1", correlation_id="cancelled")
        store.hang_next = True
        first = asyncio.create_task(rt.submit(cmd))
        async with asyncio.timeout(60):  # a hang guard, not a timing assertion
            await store.written.wait()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert recorder.steering("cancelled") == []
        assert (await rt.submit(cmd)).status is ReceiptStatus.ACCEPTED
        assert [c.correlation_id for c in apply_ready(handle)] == ["cancelled"]
        await finish_run(rt, handle)
        await rt.flush()
        assert recorder.lifecycle("cancelled") == ["requested", "accepted", "delivered", "applied"]
        stored = await store.get_command("cancelled", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "applied"


async def test_a_rebuilt_retry_after_a_lost_reply_takes_its_logged_row_over(
    tmp_path: Path,
) -> None:
    """Item 3, as an HTTP client retries: the request is sent again with the same correlation
    id, and the server builds the command again, with a new ``created_at``. Only a retry equal
    to the logged command in every field took its row over, so this one was answered
    ``duplicate`` and the command sat open in the log, never applied. A retry that differs from
    the logged command only in ``created_at`` is the same request; any other difference is
    another command under that id, a duplicate."""
    store = LostReplyStore(tmp_path / "x.db")
    clock = FakeClock()
    with use_clock(clock):
        async with Runtime(store=store, testing=True) as rt:
            handle = await start_run(rt, "r-1")
            store.lose_next = True
            with pytest.raises(StoreError):
                await rt.submit(make_command("r-1", correlation_id="lost-reply"))
            clock.advance(1.0)
            retry = make_command("r-1", correlation_id="lost-reply")
            assert (await rt.submit(retry)).status is ReceiptStatus.ACCEPTED
            assert [c.correlation_id for c in apply_ready(handle)] == ["lost-reply"]
            await finish_run(rt, handle)
            await rt.flush()
            stored = await store.get_command("lost-reply", scope=dedupe_scope(OPERATOR))
            assert stored is not None and stored.state == "applied"


async def test_a_retry_that_asks_for_something_else_is_a_duplicate_after_a_lost_reply(
    tmp_path: Path,
) -> None:
    store = LostReplyStore(tmp_path / "x.db")
    async with Runtime(store=store, testing=True) as rt:
        await start_run(rt, "r-1")
        store.lose_next = True
        with pytest.raises(StoreError):
            await rt.submit(make_command("r-1", correlation_id="lost-reply"))
        other = make_command("r-1", correlation_id="lost-reply", payload={"text": "other"})
        assert (await rt.submit(other)).status is ReceiptStatus.DUPLICATE


class ChaosLog(SqliteStore):
    """A real SQLite store whose command writes take a random moment and then, by a seeded
    draw, fail before writing (a full disk), fail after COMMIT (a lost reply) or answer."""

    def __init__(self, path: Path, rng: random.Random) -> None:
        super().__init__(path)
        self.rng = rng

    async def append_command(self, cmd: SteeringCommand, *, state: str, **kw: Any) -> bool:
        draw = self.rng.random()
        await asyncio.sleep(self.rng.random() * 0.002)
        if draw < 0.15:
            raise StoreError("database or disk is full")
        inserted = await super().append_command(cmd, state=state, **kw)
        if draw < 0.3:
            raise StoreError("connection was closed in the middle of operation")
        return inserted


@pytest.mark.parametrize("seed", range(12))
async def test_resends_under_store_faults_and_cancellations_lose_no_command(
    tmp_path: Path, seed: int
) -> None:
    """Senders resend each command (the same object or one built again) concurrently, after a
    StoreError, after cancelling their own submit, and after a ``duplicate``, while the
    store's writes fail at random before or after COMMIT. No command is told ``duplicate``
    while it sits open in the log, none is requested or applied twice, and the log ends with
    the state of its last event."""
    rng = random.Random(seed)

    class Dawdle:
        policy_id = "dawdle"

        async def __call__(self, cmd: SteeringCommand, ctx: Any, call_next: Any) -> Any:
            await asyncio.sleep(rng.random() * 0.002)
            return await call_next(cmd)

    recorder = EventRecorder()
    store = ChaosLog(tmp_path / "x.db", rng)
    rt = Runtime(store=store, testing=True, sinks=[recorder])
    rt.router.pipeline.insert(Dawdle(), after="authority")
    told: dict[str, list[ReceiptStatus]] = {}
    async with rt:
        handle = await start_run(rt, "r-1")

        async def sender(cid: str) -> None:
            cmd = make_command("r-1", correlation_id=cid)
            for _ in range(8):
                if rng.random() < 0.5:
                    cmd = make_command("r-1", correlation_id=cid)  # as an HTTP retry is
                submit = asyncio.ensure_future(rt.submit(cmd))
                if rng.random() < 0.2:
                    await asyncio.sleep(rng.random() * 0.003)
                    submit.cancel()
                try:
                    receipt = await submit
                except (StoreError, asyncio.CancelledError):
                    continue
                told.setdefault(cid, []).append(receipt.status)
                if receipt.status is not ReceiptStatus.DUPLICATE or rng.random() < 0.5:
                    return

        cids = [f"c-{n}" for n in range(6)]
        await asyncio.gather(*(sender(cid) for cid in cids for _ in range(2)))
        apply_ready(handle)
        await finish_run(rt, handle)
        await rt.flush()
        for cid in cids:
            lifecycle = recorder.lifecycle(cid)
            assert lifecycle.count("requested") <= 1 and lifecycle.count("applied") <= 1
            stored = await store.get_command(cid, scope=dedupe_scope(OPERATOR))
            if told.get(cid):  # someone was answered: the command exists and ended
                assert lifecycle[-1] in ("applied", "rejected"), (cid, lifecycle, told[cid])
                assert stored is not None and stored.state == lifecycle[-1]
            else:  # every attempt failed: no trace, or a row the log still holds open
                assert lifecycle == []


async def test_a_store_that_fails_a_read_when_a_run_registers_keeps_the_commands_waiting(
    tmp_path: Path,
) -> None:
    """A run registering on a thread reads the steering log for each command deferred there
    (another runtime may have settled it). SQLite's reads let the driver's error through (a
    write is a StoreError): the register raised ``ValueError`` at the new run, and the
    commands waiting on the thread, already taken off their list, were never evaluated again.
    The read is a StoreError, and the commands wait on (a second application is worse than a
    late one)."""
    store = SqliteStore(tmp_path / "x.db")
    rt = Runtime(store=store, testing=True)
    await rt.open()
    for cid in ("a", "b"):
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id=cid)
        assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
    await store.db.close()  # the connection dies under it
    await start_run(rt, "r-1", thread_id="t-1")
    assert sorted(cid for (_, cid) in rt.router._waiting[_thread_key("t-1")]) == ["a", "b"]
    with pytest.raises(StoreError):
        await rt.close()


async def test_commands_waiting_for_a_thread_outlive_a_cancelled_handover(
    recorder: EventRecorder,
) -> None:
    """A run registering on a thread takes the commands waiting there off their list and
    evaluates them one by one (a policy may await). When the registering task was cancelled
    meanwhile (``rt.start`` under a request timeout), the command being evaluated and those
    after it were on no list any more: never evaluated again, open until the runtime closed.
    They wait on, and the thread's next run takes them."""
    hold = HoldNamed()
    rt = Runtime(testing=True, sinks=[recorder])
    rt.router.pipeline.insert(hold, after="authority")
    async with rt:
        for cid in ("slow", "after"):
            cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id=cid)
            assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
        first = asyncio.create_task(start_run(rt, "r-1", thread_id="t-1"))
        async with asyncio.timeout(60):  # a hang guard, not a timing assertion
            await hold.entered.wait()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        hold.release.set()
        second = await start_run(rt, "r-2", thread_id="t-1")
        assert sorted(c.correlation_id for c in apply_ready(second)) == ["after", "slow"]
        await finish_run(rt, second)
        stale = rt.runs.get("r-1")  # the run the cancelled start left behind
        assert stale is not None
        await finish_run(rt, stale)
        assert recorder.terminal_state("slow") == recorder.terminal_state("after") == "applied"
        recorder.assert_every_command_terminal()


async def test_a_thread_command_retried_after_a_lost_reply_and_a_new_run_is_applied(
    tmp_path: Path,
) -> None:
    """Item 3 for a thread command: its first submit logged it ``deferred`` (no run on the
    thread yet) but the reply was lost; a run then started on the thread, and the retry,
    accepted for that run now, found the log's row ``deferred`` where it looked for
    ``accepted``: answered ``duplicate``, while the command sat in the log, never applied.
    The retry takes its own row over from ``deferred``."""
    store = LostReplyStore(tmp_path / "x.db")
    async with Runtime(store=store, testing=True) as rt:
        cmd = make_command(target=SteeringTarget.thread("t-1"), correlation_id="lost-reply")
        store.lose_next = True
        with pytest.raises(StoreError):
            await rt.submit(cmd)
        handle = await start_run(rt, "r-1", thread_id="t-1")
        assert (await rt.submit(cmd)).status is ReceiptStatus.ACCEPTED
        assert [c.correlation_id for c in apply_ready(handle)] == ["lost-reply"]
        await finish_run(rt, handle)
        await rt.flush()
        stored = await store.get_command("lost-reply", scope=dedupe_scope(OPERATOR))
        assert stored is not None and stored.state == "applied"


@pytest.mark.parametrize("bad", [None, "pause r-1", "dump"])
async def test_submitting_what_is_not_a_command_is_an_invalid_command_error(bad: Any) -> None:
    """``rt.submit(cmd.model_dump())`` (or None) raised AttributeError: 'dict' object has no
    attribute 'actor', from inside the router."""
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run("r-1"), actor=ACME, kind=K.PAUSE, payload={}
    )
    bad = cmd.model_dump() if bad == "dump" else bad
    async with Runtime() as rt:
        with pytest.raises(InvalidCommandError, match=r"submit takes a SteeringCommand, got"):
            await rt.submit(bad)
        receipt = await rt.submit(cmd)  # nothing was kept of it: the real one is new
        assert (receipt.status, receipt.reason) == (ReceiptStatus.REJECTED, "not found: run r-1")
