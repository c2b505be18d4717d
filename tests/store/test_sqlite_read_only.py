"""A SQLite file this process may only read (the file, or its directory, refuses writes) is
refused at open by a runtime's store and by a checkpointer, with a ``StoreError`` that says
so: opened, each later write failed with SQLite's own error, and the writes were lost one by
one. A tool that only reads a store (``create=False``) still opens it.

As root, permission bits stop no write: the file (or directory) is made immutable
(``chattr +i``) instead, which SQLite meets much as a user meets a 0444 file; the permission
bits themselves are tried in a process without root's right to ignore them (``setpriv``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from services import skip_unless_ci

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
        skip_unless_ci(f"root ignores permission bits, and chattr +i failed: {made.stderr.strip()}")
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


# Permission bits, as a user meets them: a 0444 file, a 0555 directory (SQLite answers the
# latter SQLITE_READONLY_DIRECTORY at the first read, where root's immutable one is
# SQLITE_CANTOPEN). Prints one line per refused open.
_BY_PERMISSIONS = textwrap.dedent(
    """
    import asyncio, os, sys
    from tinyagents.errors import StoreError
    from tinyagents.store import SqliteStore
    from tinyagents.store.checkpoint import SqliteCheckpointer

    async def main(folder, which):
        path = os.path.join(folder, "ro.db")
        store = SqliteStore(path)
        await store.open()
        await store.close()
        print("ready", flush=True)
        target = folder if which == "directory" else path
        os.chmod(target, 0o555 if which == "directory" else 0o444)
        try:
            for opening in (SqliteStore(path).open, SqliteCheckpointer(path).setup):
                try:
                    await opening()
                    print("opened")
                except StoreError as exc:
                    print(str(exc).replace(chr(10), " "))
        finally:
            os.chmod(target, 0o755 if which == "directory" else 0o644)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.mark.parametrize("which", ["file", "directory"])
def test_permission_bits_that_refuse_writes_are_refused_at_open(tmp_path: Path, which: str) -> None:
    command = [sys.executable, "-c", _BY_PERMISSIONS, str(tmp_path), which]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            skip_unless_ci("root ignores permission bits, and setpriv is not installed")
        drop = "--bounding-set=-dac_override,-dac_read_search,-fowner"
        command = ["setpriv", "--inh-caps=-all", drop, *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    if not lines or lines[0] != "ready":
        skip_unless_ci(f"no process without root's rights could be started: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr
    refusals = lines[1:]
    assert len(refusals) == 2 and all("read-only" in line for line in refusals), refusals
    if which == "directory":
        assert all(repr(str(tmp_path)) in line for line in refusals), refusals
