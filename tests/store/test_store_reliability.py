"""The store writer keeps persisting through bad events and held locks; a store that cannot
open (or is never closed) changes nothing it should not and never keeps the process alive."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tinyagents.errors import DamagedData, StoreError
from tinyagents.events import Event, RunEvent, SteeringEvent, ToolEvent
from tinyagents.protocol import (
    Boundary,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringTarget,
)
from tinyagents.runs import RunHandle, RunInfo
from tinyagents.runtime import Runtime
from tinyagents.store import SqliteStore, StoreWriter
from tinyagents.store.base import may_pass
from tinyagents.testkit import EPOCH

#: Fast retries for tests: a held lock is noticed after 10 ms, retried every few ms.
FAST = {"flush_every_s": 0.001, "retry_first_s": 0.001, "retry_max_s": 0.005}


def _command(cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run("r-1"),
        actor=SteeringActor.test(),
        kind="pause",
        correlation_id=cid,
    )


def _applied(cid: str) -> SteeringEvent:
    cmd = _command(cid)
    return SteeringEvent(
        type="steering.applied",
        run_id="r-1",
        target=cmd.target,
        actor=cmd.actor,
        kind=cmd.kind,
        correlation_id=cid,
    )


def _run_event(n: int) -> RunEvent:
    return RunEvent(type="run.status", run_id="r-1", status=f"s{n}")


def _tool_result(text: str) -> ToolEvent:
    return ToolEvent(
        type="tool.result", run_id="r-1", tool_call_id="call-1", name="fetch", content_summary=text
    )


def _describe(event: Event) -> str:
    if isinstance(event, RunEvent):
        return event.status or ""
    if isinstance(event, ToolEvent):
        return event.content_summary or ""
    return event.type


async def _opened(path: Path, **kwargs: float) -> SqliteStore:
    store = SqliteStore(path, **kwargs)
    await store.open()
    return store


# -- the writer ---------------------------------------------------------------------------------


async def test_an_event_with_a_lone_surrogate_is_stored_as_it_is_and_the_writer_goes_on(
    tmp_path: Path,
) -> None:
    # A tool result carrying half of a UTF-16 pair could not be encoded: it used to kill the
    # writer, so nothing was persisted afterwards and the applied command stayed 'accepted';
    # then it was stored with the half spelled out. Its JSON now escapes it: stored exactly.
    store = await _opened(tmp_path / "x.db")
    await store.append_command(_command("c-1"), state="accepted", run_id="r-1")
    writer = StoreWriter(store, **FAST)
    writer.start()
    writer(_run_event(1))
    writer(_tool_result("half a pair: \ud800!"))
    writer(_applied("c-1"))
    writer(_run_event(2))
    await writer.aclose()
    events = await store.load_events()
    assert [_describe(e) for e in events] == [
        "s1",
        "half a pair: \ud800!",
        "steering.applied",
        "s2",
    ]
    stored = await store.get_command("c-1")
    assert stored is not None and stored.state == "applied"
    assert (writer.dropped, writer.errors) == (0, 0)
    await store.close()


async def test_the_one_bad_event_of_a_large_batch_is_isolated_in_place(tmp_path: Path) -> None:
    store = await _opened(tmp_path / "x.db")
    writer = StoreWriter(store, **FAST)
    for n in range(40):
        bad = RunEvent(type="run.status", run_id="r-1", detail={"handle": object()})
        writer(bad if n == 23 else _run_event(n))
    await writer.flush()
    described = [_describe(e) for e in await store.load_events()]
    assert described == [f"s{n}" for n in range(40) if n != 23]
    assert writer.dropped == 1
    await store.close()


async def test_an_event_json_cannot_hold_is_dropped_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await _opened(tmp_path / "x.db")
    writer = StoreWriter(store, **FAST)
    writer(_run_event(1))
    writer(RunEvent(type="run.status", run_id="r-1", detail={"handle": object()}))  # not JSON
    writer(_run_event(2))
    with caplog.at_level(logging.WARNING, logger="tinyagents.store"):
        await writer.flush()
        await writer.aclose()
    assert [_describe(e) for e in await store.load_events()] == ["s1", "s2"]
    assert writer.dropped == 1
    dropped_lines = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert dropped_lines, caplog.text
    await store.close()


async def test_an_event_refused_once_is_written_again_as_itself() -> None:
    """A single event refused for a reason that does not pass is tried once more alone: it
    was tried as a copy read back from its JSON (``escaped``, for text UTF-8 could not hold,
    which ``Event.to_json`` now escapes itself), so a store of objects kept the copy, a
    datetime in a dict become text and a tuple a list, and counted it "stored escaped"."""
    from tinyagents.store import MemoryStore

    class RefusesOnce(MemoryStore):
        refused = False

        async def append_events(self, events: list[Event]) -> None:
            if not self.refused:
                self.refused = True
                raise StoreError("the store: could not append: a deadlock")
            await super().append_events(events)

    store = RefusesOnce()
    writer = StoreWriter(store, **FAST)
    event = RunEvent(type="run.status", run_id="r-1", detail={"at": EPOCH, "pair": (1, 2)})
    writer(event)
    await writer.flush()
    [stored] = await store.load_events()
    assert stored is event
    assert (writer.dropped, writer.errors) == (0, 1)
    assert not hasattr(writer, "escaped")  # it counts nothing any more: gone


async def test_a_lock_held_past_the_busy_timeout_loses_nothing_once_released(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.db"
    store = await _opened(path, busy_timeout_s=0.01)
    await store.append_command(_command("c-1"), state="accepted", run_id="r-1")
    writer = StoreWriter(store, **FAST)
    writer.start()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        writer(_run_event(1))
        writer(_applied("c-1"))
        # "database is locked", again and again (polls the writer's public counter)
        while writer.errors < 3:  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        writer(_run_event(2))
        other.execute("COMMIT")
    finally:
        other.close()
    writer(_run_event(3))
    await writer.aclose()
    assert [_describe(e) for e in await store.load_events()] == [
        "s1",
        "steering.applied",
        "s2",
        "s3",
    ]
    stored = await store.get_command("c-1")
    assert stored is not None and stored.state == "applied"
    assert writer.dropped == 0
    await store.close()


async def test_a_flush_while_the_writer_retries_a_batch_writes_after_it(tmp_path: Path) -> None:
    """``flush()`` (``Runtime.flush``) while the writer's own loop waited to retry a batch
    wrote the newer events first and returned with the older ones not written yet: the log
    held them out of order, and a flush did not mean what it was flushed was stored."""
    path = tmp_path / "x.db"
    store = await _opened(path, busy_timeout_s=0.01)
    writer = StoreWriter(store, flush_every_s=0.001, retry_first_s=0.3, retry_max_s=0.3)
    writer.start()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        writer(_run_event(1))
        writer(_run_event(2))
        while writer.errors < 1:  # the loop took s1, s2 and waits to try again  # noqa: ASYNC110
            await asyncio.sleep(0.001)
    finally:
        other.execute("COMMIT")
        other.close()
    writer(_run_event(3))
    await writer.flush()
    assert [_describe(e) for e in await store.load_events()] == ["s1", "s2", "s3"]
    await writer.aclose()
    await store.close()


async def test_closing_while_the_lock_is_still_held_gives_up_without_raising(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "x.db"
    store = await _opened(path, busy_timeout_s=0.01)
    writer = StoreWriter(store, close_attempts=2, **FAST)
    writer.start()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        for n in range(3):
            writer(_run_event(n))
        with caplog.at_level(logging.WARNING, logger="tinyagents.store"):
            await writer.aclose()  # does not raise, does not wait for the lock forever
    finally:
        other.execute("COMMIT")
        other.close()
    assert writer.dropped == 3
    assert "3 event(s) dropped" in caplog.text
    assert await store.load_events() == []
    await store.close()


async def test_the_buffer_is_bounded_but_steering_events_are_always_kept(tmp_path: Path) -> None:
    store = await _opened(tmp_path / "x.db")
    await store.append_command(_command("c-1"), state="accepted", run_id="r-1")
    writer = StoreWriter(store, max_buffer=5, **FAST)  # not started: nothing drains the buffer
    for n in range(8):
        writer(_run_event(n))
    writer(_applied("c-1"))  # settles the log: kept even though the buffer is full
    writer(_run_event(8))
    assert writer.dropped == 4
    await writer.flush()
    assert [_describe(e) for e in await store.load_events()] == [
        "s0",
        "s1",
        "s2",
        "s3",
        "s4",
        "steering.applied",
    ]
    stored = await store.get_command("c-1")
    assert stored is not None and stored.state == "applied"
    writer(_run_event(9))  # room again
    await writer.aclose()
    assert _describe((await store.load_events())[-1]) == "s9"
    await store.close()


# -- opening --------------------------------------------------------------------------------------


async def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    garbage = b"these are my notes, not a database\n" * 200
    path.write_bytes(garbage)
    with pytest.raises(StoreError) as raised:
        await SqliteStore(path).open()
    message = str(raised.value)
    assert str(path) in message and "\n" not in message
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]  # no -wal, -shm, -journal


async def test_a_foreign_sqlite_database_is_accepted_and_keeps_its_tables(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE mine (x INTEGER)")
        db.execute("INSERT INTO mine VALUES (7)")
    db.close()
    store = await _opened(path)
    await store.append_events([_run_event(1)])
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT x FROM mine").fetchall() == [(7,)]
    db.close()


def _exits_by_itself(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard: each script needs well under a second
    )
    assert done.returncode == 0, done.stderr
    return done


FAILED_OPEN = """
    import asyncio, sys
    from tinyagents.errors import StoreError
    from tinyagents.store.sqlite import SqliteStore

    async def main():
        try:
            await SqliteStore(sys.argv[1]).open()
        except StoreError as exc:
            print("refused:", exc)

    asyncio.run(main())
"""


def test_a_failed_open_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x00garbage" * 1000)
    blocker = tmp_path / "a-file"
    blocker.write_text("a directory cannot be made under a file")
    corrupt = tmp_path / "corrupt.db"
    with sqlite3.connect(corrupt) as db:
        db.execute("CREATE TABLE t (x TEXT)")
        db.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 50)
    db.close()
    data = bytearray(corrupt.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page, after the file header
    corrupt.write_bytes(bytes(data))
    # a dir is no file (tried again: what it left behind raced the end of the program)
    for path in (garbage, corrupt, blocker / "sub" / "x.db", *[tmp_path] * 5):
        done = _exits_by_itself(FAILED_OPEN, str(path))
        assert done.stdout.startswith("refused: ") and str(path) in done.stdout
        # a connect that failed left aiosqlite's thread to report its stop to a loop closed
        # by then: "RuntimeError: Event loop is closed" tracebacks under the one-line error
        assert done.stderr == "", done.stderr


def test_a_runtime_that_is_never_closed_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    done = _exits_by_itself(
        """
        import asyncio, sys
        from tinyagents import Runtime

        async def main():
            rt = Runtime(store="sqlite:///" + sys.argv[1])
            await rt.open()
            print("open")

        asyncio.run(main())
        """,
        str(tmp_path / "runs.db"),
    )
    assert done.stdout == "open\n"


async def test_two_processes_on_one_file_read_and_write_at_once_without_lock_errors(
    tmp_path: Path,
) -> None:
    # a write that began while a read of the same connection was part-way through ran on the
    # read's snapshot; after the other connection's commit SQLite refused it at once
    # ("database is locked", HTTP 503 from serve) instead of waiting out the busy timeout
    db = tmp_path / "shared.db"
    mine, other = SqliteStore(db), SqliteStore(db)
    await mine.open()
    await other.open()

    def snapshot(run_id: str) -> dict[str, object]:
        info = RunInfo(run_id=run_id, tenant_id="acme")
        return {**info.snapshot(), "updated_at": "1970-01-01T00:00:00+00:00"}

    async def reads() -> None:
        for _ in range(60):
            await mine.load_runs(tenant_id="acme")
            await mine.open_commands()

    async def writes(store: SqliteStore, name: str) -> None:
        for i in range(60):
            await store.save_runs([snapshot(f"{name}-{i}")])
            await store.inbox_put(
                owner=name, request_id=f"{name}-{i}", command=_command(f"{name}-{i}")
            )

    try:
        await asyncio.gather(reads(), writes(mine, "mine"), writes(other, "other"), reads())
        assert len(await mine.load_runs()) == 120
    finally:
        await mine.close()
        await other.close()


@pytest.mark.parametrize(
    ("asked", "index"),
    [({"root_run_id": "root-1"}, "events_root"), ({"run_id": "r-1"}, "events_run")],
)
async def test_a_stream_of_one_tree_reads_that_trees_index_not_the_tenants(
    tmp_path: Path, asked: dict[str, str], index: str
) -> None:
    # SQLite chose the tenant's index for tenant_id = ? AND root_run_id = ?: a console
    # following a quiet tree read every later event of its tenant at each 50 ms poll
    from tinyagents.store.sqlite import events_query

    store = SqliteStore(tmp_path / "x.db")
    await store.open()
    try:
        events = [
            RunEvent(
                type="run.status", run_id=f"r-{i}", root_run_id=f"root-{i % 50}", tenant_id="acme"
            )
            for i in range(500)
        ]
        await store.append_events(events)
        sql, args = events_query(0, "acme", asked.get("run_id"), asked.get("root_run_id"), 100)
        async with store.db.execute(f"EXPLAIN QUERY PLAN {sql}", args) as cur:
            plan = " ".join(str(row[-1]) for row in await cur.fetchall())
        assert f"INDEX {index}" in plan, plan
        read = await store.read_events(tenant_id="acme", limit=100, **asked)  # type: ignore[arg-type]
        assert read and all(e.tenant_id == "acme" for _, e in read)
    finally:
        await store.close()


async def test_a_write_cancelled_mid_statement_is_not_committed_by_the_next_write(
    tmp_path: Path,
) -> None:
    """A write whose caller was cancelled while SQLite ran its statement (on the connection's
    thread, which goes on) was neither committed nor rolled back: the connection stayed in
    its transaction, and the next write's COMMIT carried the cancelled row along, so a write
    nobody waited for (or half of a batch) became durable behind another one's back. It is
    rolled back now; the next write commits only itself."""
    store = SqliteStore(tmp_path / "x.db")
    await store.open()
    try:
        cancelled = asyncio.create_task(
            store.append_command(_command("c-cancelled"), state="accepted", run_id="r-1")
        )
        await asyncio.sleep(0)  # its INSERT is on the connection's thread now
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert await store.append_command(_command("c-next"), state="accepted", run_id="r-1")
        reader = SqliteStore(tmp_path / "x.db")
        await reader.open()
        try:
            assert await reader.get_command("c-next") is not None
            assert await reader.get_command("c-cancelled") is None
        finally:
            await reader.close()
    finally:
        await store.close()


async def test_a_receipt_that_cannot_be_written_neither_strands_its_batch_nor_is_lost(
    tmp_path: Path,
) -> None:
    """The owner of a run answers its inbox in batches. A receipt write that failed (a full
    disk, a dropped connection) ended the pass: the rest of the batch, already taken, was
    never submitted nor answered (nothing takes a taken item again), so those commands were
    lost while their senders timed out on "may still be applied later"; the failed receipt
    was never written either. The batch goes on now, and an unwritten receipt is written
    again at the next pass."""

    class AnswerFailsOnce(SqliteStore):
        fail_next = False

        async def inbox_answer(self, request_id: str, receipt: Any) -> None:
            if self.fail_next:
                self.fail_next = False
                raise StoreError("database or disk is full")
            await super().inbox_answer(request_id, receipt)

    store = AnswerFailsOnce(tmp_path / "x.db")
    async with Runtime(store=store, testing=True) as rt:
        handle = await rt.register(RunHandle(RunInfo(run_id="r-1"), submitter=rt))
        store.fail_next = True
        for n in range(3):
            cmd = SteeringCommand(
                target=SteeringTarget.agent_run("r-1"),
                actor=SteeringActor.test(),
                kind="add_instruction",
                payload={"text": f"say {n}"},
                correlation_id=f"c-{n}",
            )
            await store.inbox_put(owner=rt.runtime_id, request_id=f"q-{n}", command=cmd)
        rt.wake_inbox()
        receipts: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60  # a hang guard, not a timing assertion
        while loop.time() < deadline:
            receipts = [await store.inbox_receipt(f"q-{n}") for n in range(3)]
            if None not in receipts:
                break
            await asyncio.sleep(0.01)
        assert [r and r.status for r in receipts] == [ReceiptStatus.ACCEPTED] * 3
        queued = handle.inbox.take(Boundary.BEFORE_MODEL_CALL)
        assert sorted(c.correlation_id for c in queued) == ["c-0", "c-1", "c-2"]


async def test_a_receipt_that_can_never_be_written_stops_neither_snapshots_nor_the_inbox(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A receipt the store refuses for good (text one backend cannot hold) is tried again for
    ``RECEIPT_RETRY_S`` and then dropped with a warning; meanwhile the runtime's passes go
    on: the other items are answered and the run snapshots (the heartbeats other processes
    read to tell a live owner from a dead one) are still written."""

    class RefusesOne(SqliteStore):
        async def inbox_answer(self, request_id: str, receipt: Any) -> None:
            if request_id == "q-bad":
                raise StoreError("text the store cannot hold")
            await super().inbox_answer(request_id, receipt)

    store = RefusesOne(tmp_path / "x.db")
    caplog.set_level(logging.WARNING, logger="tinyagents")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("tinyagents.runtime.RECEIPT_RETRY_S", 0.3)
        async with Runtime(store=store, testing=True) as rt:
            await rt.register(RunHandle(RunInfo(run_id="r-1"), submitter=rt))
            for n in ("bad", "good"):
                cmd = SteeringCommand(
                    target=SteeringTarget.agent_run("r-1"),
                    actor=SteeringActor.test(),
                    kind="pause",
                    correlation_id=f"c-{n}",
                )
                await store.inbox_put(owner=rt.runtime_id, request_id=f"q-{n}", command=cmd)
            rt.wake_inbox()
            await rt.register(RunHandle(RunInfo(run_id="r-2"), submitter=rt))
            answered = snapshot = None
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60  # a hang guard, not a timing assertion
            while loop.time() < deadline:
                answered = await store.inbox_receipt("q-good")
                snapshot = await store.load_run("r-2")
                if answered and snapshot and "dropped" in caplog.text:
                    break
                await asyncio.sleep(0.01)
            assert answered is not None and answered.status is ReceiptStatus.ACCEPTED
            assert snapshot is not None
            assert "receipt of inbox request q-bad dropped" in caplog.text
            assert await store.inbox_receipt("q-bad") is None


async def test_an_event_row_that_no_longer_reads_as_one_blocks_no_reader(tmp_path: Path) -> None:
    """A damaged event row, or one of a type this version does not know (written by a newer
    one), made ``load_events`` and ``read_events`` raise pydantic's ``ValidationError`` at
    every call: a history or an event stream could never read past it. It is left out."""
    store = SqliteStore(tmp_path / "x.db")
    await store.open()
    try:
        events = [
            RunEvent(type="run.started", run_id=f"r-{i}", root_run_id="r-0") for i in range(4)
        ]
        await store.append_events(events)
        await store.db.execute("UPDATE events SET data = '{broken' WHERE run_id = 'r-1'")
        await store.db.execute(
            "UPDATE events SET data = json_set(data, '$.type', 'run.hibernated')"
            " WHERE run_id = 'r-2'"
        )
        await store.db.commit()
        assert [e.run_id for e in await store.load_events()] == ["r-0", "r-3"]
        assert [e.run_id for _, e in await store.read_events()] == ["r-0", "r-3"]
        # a page is filled past the rows left out: a reader paging by id never stalls
        page = await store.read_events(root_run_id="r-0", limit=2)
        assert [e.run_id for _, e in page] == ["r-0", "r-3"]
        assert await store.read_events(after_id=page[0][0], limit=1) == [page[1]]
        # read back from the end too (a trace's page)
        assert [e.run_id for _, e in await store.last_events(limit=2)] == ["r-0", "r-3"]
        assert [e.run_id for _, e in await store.last_events(limit=1)] == ["r-3"]
    finally:
        await store.close()


async def test_a_run_snapshot_that_no_longer_reads_is_a_store_error(tmp_path: Path) -> None:
    # load_runs and list_runs said so with a StoreError; load_run let json's error through
    store = SqliteStore(tmp_path / "x.db")
    await store.open()
    try:
        await store.save_runs([RunInfo(run_id="r-1").snapshot()])
        await store.db.execute("UPDATE runs SET data = '{broken'")
        await store.db.commit()
        with pytest.raises(StoreError, match="could not read"):
            await store.load_run("r-1")
    finally:
        await store.close()


@pytest.mark.parametrize(
    "damaged",
    [
        "'{broken'",
        "'[1, 2]'",
        "X'fffe00'",  # not UTF-8 (json.loads read bytes as UTF-16 and said so)
        """'{"run_id": 7, "root_run_id": "r-1", "tenant_id": "acme", "status": "completed"}'""",
    ],
)
async def test_a_damaged_run_snapshot_is_named_by_its_run(tmp_path: Path, damaged: str) -> None:
    # "could not read: Expecting value: line 1 column 1 (char 0)" out of a listing of
    # thousands of runs: which row to repair was nowhere; the row's key names it
    store = SqliteStore(tmp_path / "x.db")
    await store.open()
    try:
        await store.save_runs([RunInfo(run_id="r-1").snapshot(), RunInfo(run_id="r-2").snapshot()])
        await store.db.execute(f"UPDATE runs SET data = {damaged} WHERE run_id = 'r-1'")
        await store.db.commit()
        for read in (lambda: store.load_run("r-1"), lambda: store.load_runs()):
            with pytest.raises(StoreError, match="could not read") as caught:
                await read()
            assert "'r-1'" in str(caught.value)
            # of its own kind: reading it again cannot help (the API answers 500 damaged_data)
            assert isinstance(caught.value, DamagedData), caught.value
            assert caught.value.record == "run snapshot of 'r-1'"
            assert "utf-16" not in str(caught.value)
        with pytest.raises(DamagedData) as damage:
            await store.load_run("r-1")
        # whose it is, from the row's tenant column (the API tells no other tenant of it)
        assert damage.value.tenant_id == "default"
        assert (await store.load_run("r-2") or {})["run_id"] == "r-2"  # the others still read
        # a listing lists the others and marks the damaged row (its columns, what is wrong)
        listed = {s["run_id"]: s for s in await store.list_runs()}
        assert set(listed) == {"r-1", "r-2"} and "error" not in listed["r-2"]
        error = listed["r-1"]["error"]
        assert error["type"] == "damaged_snapshot" and "'r-1'" in error["message"]
        assert "utf-16" not in error["message"]
    finally:
        await store.close()


async def test_a_store_path_that_is_a_directory_says_so(tmp_path: Path) -> None:
    # it said "unable to open database file" alone, as of a path whose folder is missing
    folder = tmp_path / "runs.db"
    folder.mkdir()
    with pytest.raises(StoreError, match="is a directory") as caught:
        await SqliteStore(folder).open()
    assert str(folder) in str(caught.value)
    assert list(folder.iterdir()) == []


async def test_a_store_whose_events_table_is_gone_says_so_once_and_again_when_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite's side of a store that refuses every event ("no such table: events"): one line
    that it does, counted drops (runs never wait), one line once it writes again; no line
    per event."""
    store = await _opened(tmp_path / "x.db")
    writer = StoreWriter(store, **FAST)
    with sqlite3.connect(tmp_path / "x.db") as db:
        db.execute("ALTER TABLE events RENAME TO events_away")
    with caplog.at_level(logging.INFO, logger="tinyagents.store"):
        for n in range(25):
            writer(_run_event(n))
        await writer.flush()
        assert writer.dropped == 25
        with sqlite3.connect(tmp_path / "x.db") as db:
            db.execute("ALTER TABLE events_away RENAME TO events")
        writer(_run_event(99))
        await writer.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert len([line for line in lines if "refuses events" in line]) == 1, lines
    assert not [line for line in lines if "event of run" in line]
    assert [line for line in lines if "takes events again" in line] == [
        "store writer: the store takes events again; 25 event(s) dropped meanwhile"
    ]
    assert [_describe(e) for e in await store.load_events()] == ["s99"]
    await writer.aclose()
    await store.close()


def test_a_sqlite_error_may_pass_by_its_code_however_it_is_wrapped() -> None:
    """``may_pass`` reads ``sqlite3`` from ``sys.modules`` (``import tinyagents`` does not load
    it): a busy, locked, I/O or full-disk error passes, raised as it is or as the cause of a
    ``StoreError``; a constraint failure does not."""
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = 5  # type: ignore[attr-defined]
    constraint = sqlite3.IntegrityError("UNIQUE constraint failed")
    constraint.sqlite_errorcode = 2067  # type: ignore[attr-defined]
    wrapped = StoreError("could not write")
    wrapped.__cause__ = busy
    assert may_pass(busy) and may_pass(wrapped)
    assert not may_pass(constraint) and not may_pass(StoreError("no cause"))


async def test_a_damaged_row_is_warned_of_once_by_the_listings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # every GET /runs logged a warning for each damaged row: a console polling the
    # listing wrote one line a row a second. Once a row (WarnedRows), again once repaired
    # and damaged again.
    store = SqliteStore(tmp_path / "x.db")
    await store.open()
    try:
        await store.save_runs([RunInfo(run_id="r-1").snapshot()])

        async def damage() -> None:
            await store.db.execute("UPDATE runs SET data = '{not json'")
            await store.db.commit()

        def warned() -> int:
            return sum("'r-1'" in r.getMessage() for r in caplog.records)

        caplog.set_level(logging.WARNING, logger="tinyagents.store")
        await damage()
        for _ in range(3):
            assert "error" in (await store.list_runs())[0]
        assert warned() == 1, caplog.text
        await store.save_runs([RunInfo(run_id="r-1").snapshot()])
        assert "error" not in (await store.list_runs())[0]
        await damage()
        for _ in range(2):
            await store.list_runs()
        assert warned() == 2, caplog.text
    finally:
        await store.close()
