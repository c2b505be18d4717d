"""A SqliteCheckpointer that cannot open, or that nobody closes, never keeps the process alive,
and a file that is not a database is refused unchanged."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tinyagents.errors import StoreError
from tinyagents.store.checkpoint import CheckpointRecord, SqliteCheckpointer, WriteRecord


def _exits_by_itself(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard: each script needs well under a second
    )
    assert done.returncode == 0, done.stderr
    return done


def test_a_checkpointer_that_is_never_closed_does_not_keep_the_process_alive(
    tmp_path: Path,
) -> None:
    # The usual shape of a script: the graph and its checkpointer live at module level, and
    # nothing closes them. The checkpointer's connection used to block interpreter exit.
    done = _exits_by_itself(
        """
        import asyncio, sys
        from typing import TypedDict
        from tinyagents.graph import END, START, StateGraph
        from tinyagents.store.checkpoint.sqlite import SqliteCheckpointer

        class S(TypedDict, total=False):
            x: int

        checkpointer = SqliteCheckpointer(sys.argv[1])
        graph = (
            StateGraph(S).add_node("inc", lambda s: {"x": s["x"] + 1})
            .add_edge(START, "inc").add_edge("inc", END).compile(checkpointer=checkpointer)
        )
        print(asyncio.run(graph.run({"x": 1}, thread_id="t")).state["x"])
        print(asyncio.run(graph.run({"x": 5}, thread_id="u")).state["x"])  # a second loop
        """,
        str(tmp_path / "cp.db"),
    )
    assert done.stdout.split() == ["2", "6"]


def test_a_checkpointer_that_fails_to_open_does_not_keep_the_process_alive(
    tmp_path: Path,
) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x00garbage" * 1000)
    done = _exits_by_itself(
        """
        import asyncio, sys
        from tinyagents.errors import StoreError
        from tinyagents.store.checkpoint.sqlite import SqliteCheckpointer

        async def main():
            try:
                await SqliteCheckpointer(sys.argv[1]).setup()
            except StoreError as exc:
                print("refused:", exc)

        asyncio.run(main())
        """,
        str(garbage),
    )
    assert done.stdout.startswith("refused: ")


async def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    garbage = b"these are my notes, not a database\n" * 200
    path.write_bytes(garbage)
    checkpointer = SqliteCheckpointer(path)
    with pytest.raises(StoreError) as raised:
        await checkpointer.setup()
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]
    await checkpointer.aclose()  # nothing to close: harmless


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


#: Checkpoint bodies that are not what a checkpointer wrote: not JSON, JSON of another
#: shape (no object, a part missing, a part of the wrong type).
DAMAGED_BODIES = [
    "{broken",
    "[1, 2]",
    '{"values": {}}',
    '{"values": 1, "frontier": [], "frontier_id": "f", "lineage": "L"}',
]


@pytest.mark.parametrize("body", DAMAGED_BODIES)
async def test_a_damaged_checkpoint_is_a_store_error_naming_it(tmp_path: Path, body: str) -> None:
    # json's JSONDecodeError, a KeyError ('frontier') or a TypeError came out of latest(),
    # get(), chain() and list() (and so out of a graph's resume or get_state), naming nothing
    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        await cp.put(_checkpoint(0))
        await cp.put(_checkpoint(1))
        await cp.put_writes("t", "", "f1", [WriteRecord(task_id="k", kind="result", value=1)])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE checkpoints SET body = ? WHERE checkpoint_id = 'c1'", (body,))
        db.execute("UPDATE checkpoint_writes SET value = '{broken'")
    db.close()
    async with SqliteCheckpointer(path) as cp:
        for read in (
            lambda: cp.latest("t"),
            lambda: cp.get("t", "c1"),
            lambda: cp.chain("t"),
            lambda: cp.list("t"),
        ):
            with pytest.raises(StoreError, match="checkpoint 'c1' of thread 't'"):
                await read()
        with pytest.raises(StoreError, match="pending write of task 'k'"):
            await cp.get_writes("t", "", "f1")
        assert (await cp.get("t", "c0") or _checkpoint(9)).values == {"n": 0}  # others read
