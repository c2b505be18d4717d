"""SQLite specifics: schema versioning, WAL, leases across processes and their recovery."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import textwrap
import time
from pathlib import Path
from typing import TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyagents.errors import (
    ArgumentError,
    ConfigurationError,
    InvalidUpdateError,
    StoreError,
    ThreadBusy,
)
from tinyagents.graph import END, START, Command, StateGraph, interrupt
from tinyagents.store.checkpoint import (
    CheckpointRecord,
    MemoryCheckpointer,
    SqliteCheckpointer,
    WriteRecord,
)
from tinyagents.store.checkpoint import sqlite as sqlite_checkpointer
from tinyagents.store.checkpoint.base import compact_json
from tinyagents.store.checkpoint.sqlite import MIGRATIONS


class XState(TypedDict, total=False):
    x: int


HOLD_LEASE = textwrap.dedent(
    """
    import asyncio, sys
    from tinyagents.store.checkpoint.sqlite import SqliteCheckpointer

    async def main():
        async with SqliteCheckpointer(sys.argv[1]) as cp:
            await cp.acquire("t", "other-process")
            print("held", flush=True)
            await asyncio.to_thread(sys.stdin.read)  # hold until the parent says so

    asyncio.run(main())
    """
)


async def test_schema_is_versioned_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    for _ in range(2):
        async with SqliteCheckpointer(path) as cp:
            await cp.setup()
    with sqlite3.connect(path) as db:
        versions = db.execute("SELECT version FROM checkpoint_migrations").fetchall()
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    assert versions == [(v,) for v, _, _ in MIGRATIONS]
    assert mode == "wal"


async def test_url_forms_and_a_second_connection_see_the_same_data(tmp_path: Path) -> None:
    def ask(state: dict[str, object]) -> dict[str, object]:
        return {"x": interrupt("?")}

    path = tmp_path / "db.sqlite"
    async with SqliteCheckpointer(f"sqlite:///{path}") as first:
        graph = StateGraph(XState).add_node("ask", ask).add_edge(START, "ask")
        compiled = graph.add_edge("ask", END).compile(checkpointer=first)
        await compiled.run({"x": 0}, thread_id="t")
    async with SqliteCheckpointer(path) as second:
        graph = StateGraph(XState).add_node("ask", ask).add_edge(START, "ask")
        compiled = graph.add_edge("ask", END).compile(checkpointer=second)
        result = await compiled.run(Command(resume=7), thread_id="t")
        assert result.state == {"x": 7}


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("sqlite:///", "names no file"),
        ("sqlite+aiosqlite:///", "names no file"),
        ("", "names no file"),
        ("sqlite:///graphs.db?mode=ro", "takes no query"),
    ],
)
def test_a_url_that_names_no_file_or_has_a_query_is_refused_when_made(
    url: str, refused: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a store URL is (docs/concepts.md, "Durability"): ``sqlite:///`` opened SQLite's
    private temporary database, every checkpoint gone at close, and a query made a new file
    named ``graphs.db?mode=ro`` beside the one meant."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=refused):
        SqliteCheckpointer(url)
    assert list(tmp_path.iterdir()) == []


async def test_lease_blocks_another_process_and_recovers_when_it_dies(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with SqliteCheckpointer(path) as cp:
        await cp.setup()
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            HOLD_LEASE,
            str(path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert child.stdout is not None
        assert await child.stdout.readline() == b"held\n"
        with pytest.raises(ThreadBusy):
            await cp.acquire("t", "me")
        child.kill()  # SIGKILL: the lease row stays behind
        await child.wait()
        await cp.acquire("t", "me")  # its pid is gone, so the lease is taken over
        await cp.release("t", "me")


async def test_two_instances_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with SqliteCheckpointer(path) as one, SqliteCheckpointer(path) as two:
        await one.acquire("t", "a")
        with pytest.raises(ThreadBusy):
            await two.acquire("t", "b")  # same pid, alive: a live holder
        await one.release("t", "a")
        await two.acquire("t", "b")


async def test_lease_of_another_host_counts_until_it_expires(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with SqliteCheckpointer(path) as cp:
        await cp.setup()
        with sqlite3.connect(path) as db:
            db.execute(
                "INSERT INTO thread_leases (thread_id, owner, host, pid, expires_at)"
                " VALUES ('t', 'remote', 'elsewhere', 1, ?)",
                (time.time() + 3600,),
            )
            db.execute(
                "INSERT INTO thread_leases (thread_id, owner, host, pid, expires_at)"
                " VALUES ('u', 'remote', 'elsewhere', 1, ?)",
                (time.time() - 1,),
            )
        with pytest.raises(ThreadBusy):
            await cp.acquire("t", "me")
        await cp.acquire("u", "me")  # expired: taken over


async def test_renew_notices_a_lost_lease(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with SqliteCheckpointer(path, lease_ttl=0.0) as cp:
        await cp.acquire("t", "me")
        with sqlite3.connect(path) as db:
            db.execute("UPDATE thread_leases SET owner = 'thief' WHERE thread_id = 't'")
        with pytest.raises(ThreadBusy):
            await cp.renew("t", "me")


def record(seq: int, *, checkpoint_id: str | None = None) -> CheckpointRecord:
    return CheckpointRecord(
        thread_id="t",
        checkpoint_id=checkpoint_id or f"c{seq}",
        parent_id=f"c{seq - 1}" if seq else None,
        seq=seq,
        step=seq,
        snapshot=seq == 0,
        values={"x": seq},
        frontier=[],
        frontier_id=f"f{seq}",
        lineage="L",
        source="loop",
    )


async def _hold_in_another_process(path: Path) -> asyncio.subprocess.Process:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HOLD_LEASE,
        str(path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    assert await child.stdout.readline() == b"held\n"
    return child


async def test_a_thread_another_process_holds_is_not_deleted(tmp_path: Path) -> None:
    """``delete_thread`` did not look at the lease: it deleted the history of a thread a
    graph in another process was running, and the lease row with it (so a third process
    could take the thread at once). It is ``ThreadBusy`` now, nothing deleted; once the
    holder is gone the thread (and the row it left) goes."""
    path = tmp_path / "db.sqlite"
    async with SqliteCheckpointer(path) as cp:
        await cp.put(record(0))
        await cp.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result")])
        child = await _hold_in_another_process(path)
        try:
            with pytest.raises(ThreadBusy):
                await cp.delete_thread("t")
            assert [r.checkpoint_id for r in await cp.list("t")] == ["c0"]
            assert await cp.get_writes("t", "", "f0") != []
            with pytest.raises(ThreadBusy):
                await cp.acquire("t", "me")  # the lease row is still there
        finally:
            child.kill()
            await child.wait()
        await cp.delete_thread("t")  # its pid is gone: nobody writes the thread
        assert await cp.list("t") == [] and await cp.get_writes("t", "", "f0") == []
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT count(*) FROM thread_leases").fetchone() == (0,)


async def test_a_writer_whose_lease_was_taken_over_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer on another host whose lease expired (its loop stalled past ``lease_ttl``)
    and was taken over went on writing: SQLite's ``put`` and ``put_writes`` checked no
    lease, so its next checkpoint landed in the new holder's history whenever it named the
    head as its parent, and its pending writes replaced the new holder's. Each write is
    fenced by the token in the lease row now: ``ThreadBusy``, nothing written."""
    path = tmp_path / "db.sqlite"
    async with (
        SqliteCheckpointer(path, lease_ttl=0.0) as old,
        SqliteCheckpointer(path) as new,
    ):
        monkeypatch.setattr(sqlite_checkpointer, "HOST", "elsewhere")
        await old.acquire("t", "old")  # as a process of another host would
        monkeypatch.undo()
        await old.put(record(0))
        await new.acquire("t", "new")  # lease_ttl=0: expired at once, taken over
        await new.put_writes("t", "", "f1", [WriteRecord(task_id="a", kind="result", value=1)])
        with pytest.raises(ThreadBusy):
            await old.put(record(1))
        with pytest.raises(ThreadBusy):
            await old.put_writes("t", "", "f1", [WriteRecord(task_id="a", kind="result")])
        assert [r.checkpoint_id for r in await new.list("t")] == ["c0"]
        assert [w.value for w in await new.get_writes("t", "", "f1")] == [1]
        await new.put(record(1, checkpoint_id="c1"))
        await new.release("t", "new")
        await old.put(record(2))  # nobody holds the thread now: a direct write lands
        assert [r.checkpoint_id for r in await new.list("t")] == ["c2", "c1", "c0"]


class VersionOne:
    """A process of the version before fencing tokens (checkpoint migration 1) with the file
    open: its statements, as released, on a connection of its own. It read the migrations
    once, at its setup, so a newer process migrating the file later goes unnoticed."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS checkpoint_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        self.db.executescript(MIGRATIONS[0][2])
        self.db.execute("INSERT INTO checkpoint_migrations VALUES (1, ?, 0)", (MIGRATIONS[0][1],))

    def acquire(self, thread_id: str, owner: str, *, expires_at: float) -> None:
        # (from another host, so that only its expiry frees it)
        self.db.execute(
            "INSERT INTO thread_leases VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id",
            (thread_id, owner, "elsewhere", 1, expires_at),
        ).fetchall()

    def put(self, r: CheckpointRecord) -> int:
        """Rows inserted; its caller read an IntegrityError as a stale checkpoint."""
        rows = self.db.execute(
            "INSERT INTO checkpoints (thread_id, ns, seq, checkpoint_id, parent_id, step, "
            "snapshot, source, created_at, body) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? "
            "WHERE EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = ? AND ns = ? "
            "AND seq = ? AND checkpoint_id = ?) RETURNING seq",
            (
                *(r.thread_id, r.ns, r.seq, r.checkpoint_id, r.parent_id, r.step),
                *(int(r.snapshot), r.source, r.created_at, compact_json(r.body())),
                *(r.thread_id, r.ns, r.seq - 1, r.parent_id),
            ),
        ).fetchall()
        return len(rows)

    def put_writes(self, frontier_id: str, task_id: str, value: object) -> None:
        self.db.execute(
            "INSERT INTO checkpoint_writes (thread_id, ns, frontier_id, task_id, kind, key, "
            "value) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, ns, frontier_id, "
            "task_id, kind, key) DO UPDATE SET value = excluded.value",
            ("t", "", frontier_id, task_id, "result", "", compact_json(value)),
        )


async def test_a_process_from_before_fencing_tokens_writes_nothing_once_a_newer_one_took_over(
    tmp_path: Path,
) -> None:
    """Migration 2 fences every write of this version by its lease's token, but a process
    of the version before it that had the file open since before the migration kept writing
    without any: once its lease expired and a newer process took the thread, its next
    checkpoint landed in the new holder's history and its pending writes replaced the new
    holder's. The file refuses such a write now (a trigger: a write that cannot show it was
    fenced, while the lease row holds a token); while it still holds its own lease (a row
    with no token) it writes on, as it did."""
    path = tmp_path / "db.sqlite"
    v1 = VersionOne(path)
    try:
        v1.acquire("t", "v1", expires_at=time.time() + 3600)
        c0 = record(0)
        v1.db.execute(
            "INSERT INTO checkpoints (thread_id, ns, seq, checkpoint_id, parent_id, step, "
            "snapshot, source, created_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("t", "", 0, "c0", None, 0, 1, "loop", c0.created_at, compact_json(c0.body())),
        )
        async with SqliteCheckpointer(path) as new:  # migrates the file under v1
            assert v1.put(record(1)) == 1  # its own lease still: it goes on
            v1.put_writes("f1", "a", "old")
            v1.db.execute("UPDATE thread_leases SET expires_at = 0")  # its lease expired
            await new.acquire("t", "new")
            await new.put_writes("t", "", "f1", [WriteRecord(task_id="a", kind="result")])
            with pytest.raises(sqlite3.IntegrityError, match="fencing token"):
                v1.put(record(2))
            with pytest.raises(sqlite3.IntegrityError, match="fencing token"):
                v1.put_writes("f1", "a", "old again")
            with pytest.raises(sqlite3.IntegrityError, match="fencing token"):
                v1.put_writes("f2", "b", "new task")
            assert [r.checkpoint_id for r in await new.list("t")] == ["c1", "c0"]
            assert [w.value for w in await new.get_writes("t", "", "f1")] == [None]
            assert await new.get_writes("t", "", "f2") == []
            await new.put(record(2))  # the new holder writes on
            await new.put_writes("t", "", "f2", [WriteRecord(task_id="b", kind="result")])
            assert [r.checkpoint_id for r in await new.list("t")] == ["c2", "c1", "c0"]
    finally:
        v1.db.close()


async def test_a_checkpointer_not_holding_the_thread_cannot_write_it_while_held(
    tmp_path: Path,
) -> None:
    """A direct ``put`` or ``put_writes`` of a checkpointer that never took the thread (or
    was refused it) while another process holds it: ``ThreadBusy``, nothing written; once
    the holder is gone, it lands."""
    path = tmp_path / "db.sqlite"
    async with SqliteCheckpointer(path) as cp:
        child = await _hold_in_another_process(path)
        try:
            with pytest.raises(ThreadBusy):
                await cp.acquire("t", "me")
            with pytest.raises(ThreadBusy):
                await cp.put(record(0))
            with pytest.raises(ThreadBusy):
                await cp.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result")])
            assert await cp.list("t") == [] and await cp.get_writes("t", "", "f0") == []
        finally:
            child.kill()
            await child.wait()
        await cp.put(record(0))
        await cp.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result")])
        assert [r.checkpoint_id for r in await cp.list("t")] == ["c0"]


async def test_storage_bytes_reports_the_file_size(tmp_path: Path) -> None:
    async with SqliteCheckpointer(tmp_path / "db.sqlite") as cp:
        assert await cp.storage_bytes() > 0


def test_settings_of_the_wrong_kind_are_refused_when_made(tmp_path: Path) -> None:
    # lease_ttl=-1 or NaN was taken (every lease counted as expired, or never), synchronous
    # "BOGUS" was handed to a PRAGMA that ignores what it does not know (and "OFF; ..." to
    # SQLite as a second statement), snapshot_every="x" was a TypeError, 2.5 taken
    # refused with ArgumentError: a ConfigurationError (PostgreSQL's synchronous_commit's), and
    # the bare ValueError these were before (except ValueError still catches them)
    assert issubclass(ArgumentError, ConfigurationError) and issubclass(ArgumentError, ValueError)
    path = tmp_path / "cp.db"
    for ttl in (-1, float("nan"), float("inf"), "60", True):
        with pytest.raises(ArgumentError, match=r"lease_ttl must be a finite number of seconds"):
            SqliteCheckpointer(path, lease_ttl=ttl)  # type: ignore[arg-type]
    for sync in ("BOGUS", "OFF; DROP TABLE checkpoints", 1):
        with pytest.raises(ArgumentError, match=r"synchronous must be one of OFF, NORMAL, FULL"):
            SqliteCheckpointer(path, synchronous=sync)  # type: ignore[arg-type]
    for every in ("x", 2.5, 0, True):
        with pytest.raises(ArgumentError, match=r"snapshot_every must be a whole number"):
            MemoryCheckpointer(snapshot_every=every)  # type: ignore[arg-type]
    assert SqliteCheckpointer(path, synchronous="full", lease_ttl=5).synchronous == "FULL"
    assert not path.exists()


@pytest.mark.parametrize(
    ("table", "ddl"),
    [
        # LangGraph's SqliteSaver keeps its checkpoints under this name
        (
            "checkpoints",
            "CREATE TABLE checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL"
            " DEFAULT '', checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT,"
            " checkpoint BLOB, metadata BLOB,"
            " PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))",
        ),
        ("thread_leases", "CREATE TABLE thread_leases (id INTEGER PRIMARY KEY, who TEXT)"),
        ("checkpoint_migrations", "CREATE TABLE checkpoint_migrations (id INTEGER, what TEXT)"),
    ],
)
async def test_another_programs_table_of_a_checkpointer_name_is_refused_untouched(
    tmp_path: Path, table: str, ddl: str
) -> None:
    """A file with another program's ``checkpoints`` table (LangGraph's, from a project being
    ported) was taken: setup created the other tables beside it and said nothing, and the
    graph's first checkpoint failed ("table checkpoints has no column named ns")."""
    path = tmp_path / "graphs.db"
    with sqlite3.connect(path) as conn:
        conn.execute(ddl)
    with sqlite3.connect(path) as conn:
        before = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    saver = SqliteCheckpointer(path)
    with pytest.raises(StoreError, match=f"table '{table}' of another program"):
        await saver.setup()
    with sqlite3.connect(path) as conn:
        after = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    assert (after, mode) == (before, "delete")


async def test_a_checkpointer_shares_a_file_with_the_store_and_other_tables(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    for _ in range(2):
        saver = SqliteCheckpointer(path)
        await saver.setup()
        await saver.aclose()


async def test_a_file_another_checkpointer_is_migrating_is_opened(tmp_path: Path) -> None:
    # a checkpointer opening a new file while another process migrates it finds the
    # checkpoint tables before their migration's record (a statement later): it was refused
    # as another program's (test_sqlite_migration_race.py, round 3 of 6 under load)
    path = tmp_path / "graphs.db"
    with sqlite3.connect(path) as conn:  # the other process, between its two statements
        conn.execute(
            "CREATE TABLE checkpoint_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        conn.executescript(MIGRATIONS[0][2])
    saver = SqliteCheckpointer(path)
    await saver.setup()
    await saver.aclose()
    with sqlite3.connect(path) as conn:
        versions = conn.execute("SELECT version FROM checkpoint_migrations").fetchall()
    assert versions == [(v,) for v, _, _ in MIGRATIONS]


async def test_a_write_another_connection_locks_out_fails_the_run_with_a_store_error(
    tmp_path: Path,
) -> None:
    """docs/graph.md: a checkpointer that fails (a ``StoreError``) fails the run, its error
    as ``result.error``, and ``run(None)`` goes on from what was saved. The SQLite
    checkpointer let the driver's own ``sqlite3.OperationalError`` ("database is locked")
    out instead: it escaped ``run`` and named no file."""
    path = tmp_path / "cp.db"
    cp = SqliteCheckpointer(path)
    await cp.setup()
    await cp._conn.execute("PRAGMA busy_timeout=20")  # the lock below is noticed at once
    other = sqlite3.connect(path, isolation_level=None)
    locked: list[bool] = []

    def a(state: XState) -> XState:
        if not locked:  # the step's checkpoint is locked out, once
            other.execute("BEGIN EXCLUSIVE")
            locked.append(True)
        return {"x": state.get("x", 0) + 1}

    graph = StateGraph(XState).add_node("a", a).add_edge(START, "a").add_edge("a", END)
    compiled = graph.compile(checkpointer=cp)
    try:
        result = await compiled.run({"x": 1}, thread_id="t")
        assert result.status == "failed"
        assert isinstance(result.error, StoreError)
        assert str(path) in str(result.error) and "locked" in str(result.error)
        other.execute("ROLLBACK")
        again = await compiled.run(None, thread_id="t")
        assert again.status == "completed" and again.state == {"x": 2}
    finally:
        other.close()
        await cp.aclose()


async def test_a_read_the_database_fails_is_a_store_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        await cp.setup()
        other = sqlite3.connect(path)
        other.execute("DROP TABLE checkpoints")
        other.close()
        reads = (
            lambda: cp.latest("t"),
            lambda: cp.list("t"),
            lambda: cp.get("t", "c"),
            lambda: cp.chain("t"),
        )
        for read in reads:
            with pytest.raises(StoreError, match=r"cp\.db.*no such table: checkpoints"):
                await read()
        with pytest.raises(StoreError, match="no such table"):
            await cp.list_before("t", "", "c")


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_json_values)
def test_compact_json_writes_what_json_dumps_with_compact_separators_writes(value: object) -> None:
    """The checkpointers' one shared encoder (made once, not per saved step) writes the same
    text as ``json.dumps(value, separators=(",", ":"))``, which it replaced."""
    assert compact_json(value) == json.dumps(value, separators=(",", ":"))


def test_compact_json_refuses_an_integer_python_writes_as_no_json() -> None:
    with pytest.raises(InvalidUpdateError, match="digits"):
        compact_json({"n": 10 ** (sys.get_int_max_str_digits() + 1)})


def _release_fails_once(cp: SqliteCheckpointer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next release of a lease fails as a database failure does (``StoreError``): its row
    stays, and the checkpointer remembers it let go of it (``_unreleased``)."""
    fetch = cp._fetch
    failed: list[str] = []

    async def failing(sql: str, params: tuple[object, ...]) -> list[object]:
        if sql.startswith("DELETE FROM thread_leases WHERE thread_id = ? AND owner") and not failed:
            failed.append(sql)
            raise StoreError("disk I/O error")
        return await fetch(sql, params)

    monkeypatch.setattr(cp, "_fetch", failing)


@pytest.mark.parametrize("where", ["file", ":memory:"])
@pytest.mark.parametrize("together", [True, False], ids=["in a block", "alone"])
async def test_a_deleted_thread_whose_release_failed_is_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, together: bool
) -> None:
    """Found: ``delete_thread`` in a ``saving_together`` block (and on ``":memory:"``) deleted
    the lease row a failed release had left, but kept the checkpointer's note of it, one
    entry per such thread for the checkpointer's life; only the file's own transaction
    dropped it."""
    path = tmp_path / "db.sqlite" if where == "file" else ":memory:"
    async with SqliteCheckpointer(path) as cp:
        await cp.acquire("t", "run-1")
        _release_fails_once(cp, monkeypatch)
        await cp.release("t", "run-1")
        assert cp._unreleased == {"t": "run-1"}
        if together:
            async with cp.saving_together():
                await cp.delete_thread("t")
        else:
            await cp.delete_thread("t")
        assert cp._unreleased == {}
        await cp.acquire("t", "run-2")  # and the thread is taken as any new one


@pytest.mark.parametrize("where", ["file", ":memory:"])
async def test_a_delete_undone_with_its_block_keeps_the_failed_release_in_mind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The note goes with the block's commit, not with the delete: a block that raises puts
    the lease row back, and it is still this process's own, let go of, taken at once here
    (not ``ThreadBusy`` until it expires)."""
    path = tmp_path / "db.sqlite" if where == "file" else ":memory:"
    async with SqliteCheckpointer(path) as cp:
        await cp.acquire("t", "run-1")
        _release_fails_once(cp, monkeypatch)
        await cp.release("t", "run-1")
        with pytest.raises(RuntimeError, match="undo"):
            async with cp.saving_together():
                await cp.delete_thread("t")
                raise RuntimeError("undo")
        assert cp._unreleased == {"t": "run-1"}
        await cp.acquire("t", "run-2")
        await cp.release("t", "run-2")
        assert cp._unreleased == {}


@pytest.mark.parametrize("where", ["file", ":memory:"])
async def test_a_release_failing_after_a_delete_in_one_block_is_kept_in_mind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Found at review: the block's commit forgot every failed release of a thread it
    deleted, a failed release made after the delete (a new run's, in the same block) too,
    whose row the commit keeps: that run's own thread was then ``ThreadBusy`` to it."""
    path = tmp_path / "db.sqlite" if where == "file" else ":memory:"
    async with SqliteCheckpointer(path) as cp:
        async with cp.saving_together():
            await cp.delete_thread("t")
            await cp.acquire("t", "run-2")
            _release_fails_once(cp, monkeypatch)
            await cp.release("t", "run-2")
        assert cp._unreleased == {"t": "run-2"}
        await cp.acquire("t", "run-3")  # run-2's row, let go of here: taken at once
