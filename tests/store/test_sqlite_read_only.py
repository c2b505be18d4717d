"""A SQLite file this process may only read (the file, or its directory, refuses writes) is
refused at open by a runtime's store and by a checkpointer, with a ``StoreError`` that says
so: opened, each later write failed with SQLite's own error, and the writes were lost one by
one. A tool that only reads a store (``create=False``) still opens it.

As root, permission bits stop no write: the file (or directory) is made immutable
(``chattr +i``) instead, which SQLite meets as a read-only file, as a user meets a 0444 one."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinyagents.errors import StoreError
from tinyagents.store import SqliteStore
from tinyagents.store.checkpoint import SqliteCheckpointer

SNAPSHOT = {
    "run_id": "r-1",
    "root_run_id": "r-1",
    "tenant_id": "acme",
    "status": "running",
    "created_at": "2026-01-01T00:00:00+00:00",
}


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (a file or a directory) refusing writes, for this process, inside the block."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"root ignores permission bits, and chattr +i failed: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


async def _made(path: Path) -> None:
    store = SqliteStore(path)
    await store.open()
    await store.save_runs([SNAPSHOT])
    await store.close()
    async with SqliteCheckpointer(path):
        pass


async def test_a_read_only_file_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    await _made(path)
    with read_only(path):
        store = SqliteStore(path)
        with pytest.raises(StoreError, match="read-only") as caught:
            await store.open()
        assert repr(str(path)) in str(caught.value)
        assert store._db is None
        cp = SqliteCheckpointer(path)
        with pytest.raises(StoreError, match="read-only") as caught:
            await cp.setup()
        assert repr(str(path)) in str(caught.value)
        assert cp._conn is None


async def test_a_file_in_a_read_only_directory_is_refused_saying_so(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "ro.db"
    await _made(path)
    assert sorted(p.name for p in folder.iterdir()) == ["ro.db"]  # no -wal nor -shm left
    with read_only(folder):
        with pytest.raises(StoreError, match="read-only") as caught:
            await SqliteStore(path).open()
        assert repr(str(folder)) in str(caught.value)
        with pytest.raises(StoreError, match="read-only") as caught:
            await SqliteCheckpointer(path).setup()
        assert repr(str(folder)) in str(caught.value)


async def test_a_tool_that_only_reads_opens_a_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    await _made(path)
    with read_only(path):
        store = SqliteStore(path, create=False)
        await store.open()
        try:
            assert [r["run_id"] for r in await store.load_runs()] == ["r-1"]
            with pytest.raises(StoreError, match="readonly"):  # never lost silently
                await store.save_runs([{**SNAPSHOT, "status": "completed"}])
        finally:
            await store.close()
