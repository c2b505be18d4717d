"""Processes opening an older SQLite store at once (``serve --workers N`` after an upgrade) all
open it: a migration and its record are one transaction, and the one that finds the work done
under the lock moves on (two opens failed with ``duplicate column name`` 17 times in 20)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tinyagents.store import SqliteStore
from tinyagents.store import sqlite as sqlite_store


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
    assert versions == [1, 2, 3, 4, 5] and columns.count("created_at") == 1


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
