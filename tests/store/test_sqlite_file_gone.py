"""A SQLite file deleted, or replaced by another file, under an open store or checkpointer:
SQLite keeps writing to the inode it opened, which nobody will open again, so every later
write was lost without a word. Each write now finds out first and fails with a ``StoreError``
naming the file."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tinyagents.errors import StoreError
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringTarget
from tinyagents.store import SqliteStore
from tinyagents.store.checkpoint import CheckpointRecord, SqliteCheckpointer


def _command(cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run("r-1"),
        actor=SteeringActor.test(),
        kind="pause",
        correlation_id=cid,
    )


def _record(seq: int) -> CheckpointRecord:
    return CheckpointRecord(
        thread_id="t",
        checkpoint_id=f"c{seq}",
        parent_id=f"c{seq - 1}" if seq else None,
        seq=seq,
        step=seq,
        snapshot=seq == 0,
        values={"n": seq},
        frontier=[],
        frontier_id=f"f{seq}",
        lineage="L",
        source="loop",
    )


def _delete(path: Path) -> None:
    path.unlink()


def _replace(path: Path) -> None:
    other = path.with_name("other.db")
    sqlite3.connect(other).close()
    os.replace(other, path)


@pytest.mark.parametrize(("change", "said"), [(_delete, "deleted"), (_replace, "replaced")])
async def test_a_store_whose_file_went_away_fails_its_writes(
    tmp_path: Path, change: object, said: str
) -> None:
    path = tmp_path / "runs.db"
    store = SqliteStore(path)
    await store.open()
    try:
        assert await store.append_command(_command("c-1"), state="accepted", run_id="r-1")
        change(path)  # type: ignore[operator]
        with pytest.raises(StoreError, match=said) as caught:
            await store.append_command(_command("c-2"), state="accepted", run_id="r-1")
        assert repr(str(path)) in str(caught.value) or str(path) in str(caught.value)
        with pytest.raises(StoreError, match=said):
            await store.save_runs(
                [{"run_id": "r-1", "root_run_id": "r-1", "tenant_id": "t", "status": "running"}]
            )
    finally:
        await store.close()


@pytest.mark.parametrize(("change", "said"), [(_delete, "deleted"), (_replace, "replaced")])
async def test_a_checkpointer_whose_file_went_away_fails_its_writes(
    tmp_path: Path, change: object, said: str
) -> None:
    path = tmp_path / "graphs.db"
    async with SqliteCheckpointer(path) as cp:
        await cp.put(_record(0))
        change(path)  # type: ignore[operator]
        with pytest.raises(StoreError, match=said) as caught:
            await cp.put(_record(1))
        assert str(path) in str(caught.value)


async def test_a_store_reopened_after_the_file_was_replaced_uses_the_new_file(
    tmp_path: Path,
) -> None:
    """The check is of the file the store opened: a store opened on the new file writes."""
    path = tmp_path / "runs.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    _replace(path)
    store = SqliteStore(path)
    await store.open()
    try:
        assert await store.append_command(_command("c-1"), state="accepted", run_id="r-1")
    finally:
        await store.close()
