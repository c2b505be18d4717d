"""A SQLite checkpoint row whose key columns hold what no checkpointer wrote (SQLite keeps
text in an INTEGER column) is a ``StoreError`` naming the checkpoint, as a damaged body is:
a ``step`` of 'abc' was a bare ``TypeError`` out of ``get_state`` and ``run`` ("can only
concatenate str"), and ``history`` handed it on as the step."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tinyagents.errors import StoreError
from tinyagents.store.checkpoint import CheckpointRecord, SqliteCheckpointer


def _checkpoint(seq: int) -> CheckpointRecord:
    return CheckpointRecord(
        thread_id="t",
        checkpoint_id=f"c{seq}",
        parent_id=f"c{seq - 1}" if seq else None,
        seq=seq,
        step=seq,
        snapshot=seq == 0,
        values={"n": seq},
        frontier=[{"node": "a"}],
        frontier_id=f"f{seq}",
        lineage="L",
        source="loop",
    )


@pytest.mark.parametrize(
    ("column", "value"),
    [("step", "abc"), ("step", 1.5), ("seq", "x"), ("seq", 2.5), ("created_at", "soon")],
)
async def test_a_damaged_key_column_is_a_store_error_naming_the_checkpoint(
    tmp_path: Path, column: str, value: object
) -> None:
    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        await cp.put(_checkpoint(0))
        await cp.put(_checkpoint(1))
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE checkpoints SET {column} = ? WHERE checkpoint_id = 'c1'", (value,))
    db.close()
    async with SqliteCheckpointer(path) as cp:
        for read in (
            lambda: cp.latest("t"),
            lambda: cp.get("t", "c1"),
            lambda: cp.chain("t"),
            lambda: cp.list("t"),
        ):
            with pytest.raises(StoreError, match=rf"checkpoint 'c1' of thread 't'.*{column}"):
                await read()
        assert (await cp.get("t", "c0") or _checkpoint(9)).values == {"n": 0}  # others read


@pytest.mark.parametrize(("pid", "expires_at"), [(1, "never"), ("notapid", 1e20), (2.5, 1.0)])
async def test_a_damaged_lease_row_is_a_store_error_naming_the_thread(
    tmp_path: Path, pid: object, expires_at: object
) -> None:
    # a lease whose expiry is text was a bare TypeError ('<' between str and float) out of the
    # next run of the thread; nothing is written past it
    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        await cp.put(_checkpoint(0))
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO thread_leases VALUES ('t', 'someone', 'elsewhere', ?, ?)",
            (pid, expires_at),
        )
    db.close()
    async with SqliteCheckpointer(path) as cp:
        with pytest.raises(StoreError, match=r"lease of thread 't' no longer reads"):
            await cp._acquire_lease("t", "me")
        assert [c.checkpoint_id for c in await cp.list("t")] == ["c0"]
