"""A checkpointer file whose directory does not exist is refused saying that, not that the
directory is read-only (the message sent users to fix permissions of a folder that is not
there); nothing is made on the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyagents.errors import StoreError
from tinyagents.store.checkpoint import SqliteCheckpointer


async def test_a_file_in_a_missing_directory_is_refused_saying_the_directory_is_missing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "missing"
    cp = SqliteCheckpointer(folder / "graphs.db")
    with pytest.raises(StoreError, match="does not exist") as caught:
        await cp.setup()
    assert "read-only" not in str(caught.value)
    assert repr(str(folder)) in str(caught.value)
    assert not folder.exists()
    assert cp._conn is None
