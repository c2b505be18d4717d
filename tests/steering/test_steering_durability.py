"""Durability with ``Runtime(store="sqlite:///...")``: the steering log, the event log, restarts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from steerkit import OPERATOR, apply_ready, finish_run, make_command, start_run

from tinyagents.protocol import (
    Boundary,
    ReceiptStatus,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.protocol.commands import dedupe_scope
from tinyagents.runs import RunHandle, RunInfo
from tinyagents.runtime import Runtime
from tinyagents.steering import PayloadPolicy, PolicyPipeline, default_policies
from tinyagents.store import SqliteStore
from tinyagents.testkit import EventRecorder

K = SteeringKind
SCOPE = dedupe_scope(OPERATOR)  # where the operator's correlation ids are unique


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "x.db"


def url(db: Path) -> str:
    return f"sqlite:///{db}"


async def test_accepted_command_is_in_the_steering_log_when_submit_returns(db: Path) -> None:
    async with Runtime(store=url(db), testing=True) as rt:
        await start_run(rt, "r-1")
        receipt = await rt.submit(make_command("r-1"))
        assert receipt.accepted
        # Another connection, while the runtime is still running (nothing flushed on close yet).
        reader = SqliteStore(db)
        await reader.open()
        try:
            stored = await reader.get_command(receipt.correlation_id, scope=SCOPE)
        finally:
            await reader.close()
    assert stored is not None
    assert (stored.state, stored.run_id) == ("accepted", "r-1")
    assert stored.command.correlation_id == receipt.correlation_id
    assert stored.command.payload == {"text": "focus"}


async def test_events_and_terminal_states_are_in_the_store_after_close(db: Path) -> None:
    async with Runtime(store=url(db), testing=True) as rt:
        handle = await start_run(rt, "r-1", models=["m-1"])
        applied = await rt.submit(make_command("r-1"))
        rejected = await rt.submit(make_command("r-1", K.CONSTRAIN_MODEL, {"models": ["m-2"]}))
        assert rejected.status is ReceiptStatus.REJECTED
        apply_ready(handle)
        history = [e.to_dict(mode="json") for e in rt.steering_history("r-1")]

    reader = SqliteStore(db)
    await reader.open()
    try:
        events = await reader.load_events(run_id="r-1", type_prefix="steering.")
        stored = await reader.get_command(applied.correlation_id, scope=SCOPE)
        runs = await reader.load_runs()
    finally:
        await reader.close()
    assert [e.to_dict(mode="json") for e in events] == history
    assert {e.correlation_id for e in events} == {  # type: ignore[attr-defined]
        applied.correlation_id,
        rejected.correlation_id,
    }
    assert stored is not None and stored.state == "applied"
    assert [r["run_id"] for r in runs] == ["r-1"]


async def test_restart_requeues_accepted_unfinished_commands_and_not_terminal_ones(
    db: Path,
) -> None:
    async with Runtime(store=url(db), testing=True) as first:
        handle = await start_run(first, "r-1")
        done = await first.submit(make_command("r-1", payload={"text": "done before"}))
        apply_ready(handle)
        pending = await first.submit(make_command("r-1", delivery="before_model_call"))
        status = await first.submit(make_command("r-1", K.REQUEST_STATUS))
        superseded = await first.submit(make_command("r-1", K.REPLACE_INSTRUCTION, {"text": "a"}))
        newest = await first.submit(make_command("r-1", K.REPLACE_INSTRUCTION, {"text": "b"}))
        # Taken but never applied when the process stops: these must come back too.
        taken = handle.inbox.take(Boundary.AFTER_TOOL_RESULT)
        rejected = await first.submit(make_command("r-nowhere"))
        waiting = await first.submit(make_command(target=SteeringTarget.thread("t-later")))
        assert waiting.status is ReceiptStatus.DEFERRED
        # The process stops here without the run finishing.
    assert {c.correlation_id for c in taken} == {status.correlation_id, newest.correlation_id}

    recorder = EventRecorder()
    async with Runtime(store=url(db), testing=True, sinks=[recorder]) as second:
        restored = await start_run(second, "r-1")
        queued = {c.correlation_id for c in restored.inbox.queue.pending()}
        assert queued == {pending.correlation_id, status.correlation_id, newest.correlation_id}
        assert done.correlation_id not in queued
        assert superseded.correlation_id not in queued
        assert rejected.correlation_id not in queued

        # Dedup survives the restart: none of them is taken a second time.
        for receipt in (done, pending, rejected, waiting):
            again = await second.submit(make_command("r-1", correlation_id=receipt.correlation_id))
            assert again.status is ReceiptStatus.DUPLICATE
            assert again.run_id == receipt.run_id  # the run the first went to (from the log)

        applied = apply_ready(restored)
        assert {c.correlation_id for c in applied} == queued
        recorder.assert_every_command_terminal()

        # The deferred thread command waits for a run on its thread, across the restart too.
        late = await start_run(second, "r-2", thread_id="t-later")
        assert [c.correlation_id for c in apply_ready(late)] == [waiting.correlation_id]
        await finish_run(second, restored)
        await finish_run(second, late)
        assert second.router.open_commands() == []

    async with Runtime(store=url(db), testing=True) as third:
        assert third.router.open_commands() == []
        again = await start_run(third, "r-1")
        assert len(again.inbox) == 0


async def test_memory_runtime_forgets_everything(tmp_path: Path) -> None:
    async with Runtime(testing=True) as rt:
        await start_run(rt, "r-1")
        cmd = make_command("r-1", actor=OPERATOR)
        await rt.submit(cmd)
    async with Runtime(testing=True) as rt:
        await start_run(rt, "r-1")
        assert (await rt.submit(cmd)).accepted


@pytest.mark.parametrize(
    ("run_id", "kind", "payload"),
    [
        ("r-1", K.ADD_INSTRUCTION, {"text": "x" * 3_000_000}),  # too large
        ("r-1", K.APPROVE, {"value": [0] * 900_000}),
        ("r-1", K.CONSTRAIN_TOOLS, {"tools": [f"t{i}" for i in range(300_000)]}),
        ("r-1", K.UPDATE_STATE, {"update": {f"k{i}": "v" * 100 for i in range(20_000)}}),
        ("nope", K.ADD_INSTRUCTION, {"text": "y" * 3_000_000}),  # no such run
    ],
)
async def test_a_rejected_command_is_logged_as_a_bounded_summary(
    db: Path, run_id: str, kind: SteeringKind, payload: dict[str, object]
) -> None:
    """A rejected command was written to the steering log whole: every refused 4 MiB request
    of the operator API grew the store by 4 MiB. The log keeps what it must show — the id (a
    retry is still a duplicate), the kind, the target, the state and the reason — and a
    summary of the payload that says how large it was."""
    async with Runtime(store=url(db), testing=True) as rt:
        await start_run(rt, "r-1")
        cmd = make_command(run_id, kind, payload)
        receipt = await rt.submit(cmd)
        assert receipt.status is ReceiptStatus.REJECTED, receipt
        again = await rt.submit(cmd.model_copy(update={"priority": SteeringPriority.HIGH}))
        assert again.status is ReceiptStatus.DUPLICATE
    reader = SqliteStore(db)
    await reader.open()
    try:
        stored = await reader.get_command(cmd.correlation_id, scope=SCOPE)
    finally:
        await reader.close()
    assert stored is not None and stored.state == "rejected"
    assert stored.reason == receipt.reason
    assert (stored.command.kind, stored.command.target) == (cmd.kind, cmd.target)
    assert len(stored.command.model_dump_json()) < 64_000
    assert "in all" in stored.command.model_dump_json() or "chars)" in str(stored.command.payload)
    with sqlite3.connect(db) as conn:
        ((size,),) = conn.execute("SELECT SUM(LENGTH(command)) FROM steering_log").fetchall()
    assert size < 64_000


async def test_a_small_rejected_command_is_logged_whole(db: Path) -> None:
    async with Runtime(store=url(db), testing=True) as rt:
        await start_run(rt, "r-1", models=["m-1"])
        cmd = make_command("r-1", K.CONSTRAIN_MODEL, {"models": ["m-2"]})
        assert (await rt.submit(cmd)).status is ReceiptStatus.REJECTED
        stored = await rt.store.get_command(cmd.correlation_id, scope=SCOPE)  # type: ignore[union-attr]
    assert stored is not None and stored.command == cmd


async def test_a_deferred_command_rejected_later_is_logged_as_a_bounded_summary(db: Path) -> None:
    """Deferred (no run on its thread yet), a command is logged whole: it may be applied.
    Rejected once a run comes (too large for that run's own policies), the log keeps its
    summary."""
    pipeline = PolicyPipeline([*default_policies()[:-1], PayloadPolicy(max_text_bytes=10**7)])
    async with Runtime(store=url(db), testing=True, policies=pipeline) as rt:
        cmd = make_command(target=SteeringTarget.thread("t1"), payload={"text": "x" * 3_000_000})
        assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
        handle = RunHandle(RunInfo(run_id="r-1", thread_id="t1"), submitter=rt)
        handle.policies = [PayloadPolicy()]
        await rt.register(handle)
        assert [e.type for e in rt.steering_history("r-1")][-1] == "steering.rejected"
    with sqlite3.connect(db) as conn:
        ((state, size),) = conn.execute("SELECT state, LENGTH(command) FROM steering_log")
    assert state == "rejected" and size < 64_000


async def test_a_thread_command_too_large_for_any_run_is_refused_at_once_as_a_summary(
    db: Path,
) -> None:
    """Too large for the runtime's own payload policy, a command for a thread with no run is
    rejected at once, never logged whole."""
    async with Runtime(store=url(db), testing=True) as rt:
        cmd = make_command(target=SteeringTarget.thread("t1"), payload={"text": "x" * 3_000_000})
        receipt = await rt.submit(cmd)
        assert (receipt.status, receipt.policy_id) == (ReceiptStatus.REJECTED, "payload")
    with sqlite3.connect(db) as conn:
        ((state, size),) = conn.execute("SELECT state, LENGTH(command) FROM steering_log")
    assert state == "rejected" and size < 64_000
