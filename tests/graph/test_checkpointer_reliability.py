"""A SqliteCheckpointer that cannot open, or that nobody closes, never keeps the process alive,
and a file that is not a database is refused unchanged."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tinyagents.errors import StoreError
from tinyagents.store.checkpoint import SqliteCheckpointer


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
