"""Processes opening an older SQLite store at once (``serve --workers N`` after an upgrade) all
open it: a migration and its record are one transaction, and the one that finds the work done
under the lock moves on (two opens failed with ``duplicate column name`` 17 times in 20)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinyagents.errors import StoreError
from tinyagents.store import SqliteStore
from tinyagents.store import sqlite as sqlite_store
from tinyagents.store.checkpoint import SqliteCheckpointer
from tinyagents.store.checkpoint import sqlite as checkpoint_sqlite


async def _at_version_3(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:
        m.setattr(sqlite_store, "MIGRATIONS", sqlite_store.MIGRATIONS[:3])
        old = SqliteStore(path)
        await old.open()
        await old.close()


@pytest.mark.parametrize("attempt", range(8))
async def test_two_opens_of_an_older_store_both_migrate_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    path = tmp_path / "old.db"
    await _at_version_3(path, monkeypatch)
    stores = [SqliteStore(path) for _ in range(3)]
    try:
        await asyncio.gather(*(s.open() for s in stores))
    finally:
        for s in stores:
            await s.close()
    with sqlite3.connect(path) as db:
        versions = [
            r[0]
            for r in db.execute(
                "SELECT version FROM migrations WHERE name = 'steering' ORDER BY version"
            )
        ]
        columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    every = [version for version, _ in sqlite_store.MIGRATIONS]
    assert versions == every and columns.count("created_at") == 1


async def test_a_migration_and_its_record_are_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing script leaves neither its changes nor its record (it is tried again)."""
    path = tmp_path / "old.db"
    await _at_version_3(path, monkeypatch)
    broken = [
        *sqlite_store.MIGRATIONS[:3],
        (4, "BEGIN;\nCREATE TABLE half_done (x INTEGER);\nTHIS IS NOT SQL;\nCOMMIT;\n"),
    ]
    monkeypatch.setattr(sqlite_store, "MIGRATIONS", broken)
    with pytest.raises(Exception, match="syntax error"):
        await SqliteStore(path).open()
    with sqlite3.connect(path) as db:
        assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'half_done'").fetchall()
        assert not db.execute("SELECT 1 FROM migrations WHERE version = 4").fetchall()


# Several processes opening one *new* file at once (``serve --workers N`` with a SQLite store,
# workers sharing a checkpointer file): every one of them opens it. The race is real, so the
# test runs it a few rounds; before the fix about one round in twenty of four processes failed
# ("database is locked" from the switch to WAL, which SQLite answers without its busy handler,
# or "duplicate column name" once three migration attempts were not enough for eight).

_OPEN = """
import asyncio, sys, time
from tinyagents.errors import StoreError
from tinyagents.store import SqliteStore
from tinyagents.store.checkpoint import SqliteCheckpointer

async def main(kind, path):
    opened = SqliteStore(path) if kind == "store" else SqliteCheckpointer(path)
    if kind == "store":
        await opened.open()
        await opened.close()
    else:
        await opened.setup()
        await opened.aclose()

start = float(sys.argv[3])
while time.time() < start:
    pass
asyncio.run(main(sys.argv[1], sys.argv[2]))
print("opened")
"""


@pytest.mark.timeout(300)  # 36 interpreters start: 32 s at load 12, near the default 120 s
@pytest.mark.parametrize("kind", ["store", "checkpointer"])
def test_processes_opening_one_new_file_at_once_all_open_it(kind: str, tmp_path: Path) -> None:
    for round_ in range(6):
        path = tmp_path / f"{round_}.db"
        start = time.time() + 1.5  # every process is up and waiting by then
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN, kind, str(path), str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(6)
        ]
        outcomes = [p.communicate(timeout=120) for p in procs]
        failed = [err.strip().splitlines()[-1] for out, err in outcomes if "opened" not in out]
        assert not failed, f"round {round_}: {failed}"


async def test_a_newer_version_migrating_the_file_during_the_open_is_refused_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newer-version check is made again inside the migration's transaction: a newer
    tinyagents that migrates the file after the open's first look (before its migrations
    take the lock) is seen, and this version's migrations are not applied around its tables."""
    path = tmp_path / "old.db"
    await _at_version_3(path, monkeypatch)
    use_wal = sqlite_store.use_wal

    async def a_newer_version_migrates_meanwhile(db: object, timeout_s: float) -> None:
        other = sqlite3.connect(path)
        with other:
            other.execute("INSERT INTO migrations VALUES ('steering', 99, '')")
        other.close()
        await use_wal(db, timeout_s)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_store, "use_wal", a_newer_version_migrates_meanwhile)
    with pytest.raises(StoreError, match=r"newer version of tinyagents \(steering version 99"):
        await SqliteStore(path).open()
    with sqlite3.connect(path) as db:
        versions = [
            r[0]
            for r in db.execute(
                "SELECT version FROM migrations WHERE name = 'steering' ORDER BY version"
            )
        ]
        columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    assert versions == [1, 2, 3, 99] and "created_at" not in columns


async def test_a_newer_version_migrating_a_checkpointer_file_during_setup_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpointer reads its versions, and refuses a newer one, inside the transaction
    that migrates, as the store does: a newer tinyagents migrating the file after setup's
    first look was not seen, and the file was opened as one this version knows."""
    path = tmp_path / "graphs.db"
    first = SqliteCheckpointer(path)
    await first.setup()
    await first.aclose()
    use_wal = checkpoint_sqlite.use_wal

    async def a_newer_version_migrates_meanwhile(db: object, timeout_s: float) -> None:
        other = sqlite3.connect(path)
        with other:
            other.execute("INSERT INTO checkpoint_migrations VALUES (99, 'newer', 0)")
        other.close()
        await use_wal(db, timeout_s)  # type: ignore[arg-type]

    monkeypatch.setattr(checkpoint_sqlite, "use_wal", a_newer_version_migrates_meanwhile)
    cp = SqliteCheckpointer(path)
    try:
        with pytest.raises(
            StoreError, match=r"newer version of tinyagents \(checkpoint_migrations version 99"
        ):
            await cp.setup()
    finally:
        await cp.aclose()
    with sqlite3.connect(path) as db:
        versions = [r[0] for r in db.execute("SELECT version FROM checkpoint_migrations")]
    assert sorted(versions) == [*(v for v, _, _ in checkpoint_sqlite.MIGRATIONS), 99]
