"""A SQLite file name no file can have (a NUL, a lone surrogate) is a ``ConfigurationError``
naming it when the store or checkpointer is made, from a path or a ``sqlite:///`` URL alike:
the store raised a bare ``ValueError`` / ``UnicodeEncodeError`` at open, and the checkpointer
a ``StoreError`` as if a file had failed to open."""

from __future__ import annotations

import pytest

from tinyagents import Runtime
from tinyagents.errors import ConfigurationError
from tinyagents.store import SqliteStore
from tinyagents.store.checkpoint import SqliteCheckpointer

NAMES = ["runs\x00.db", "\ud800.db", "sub/\udbff/runs.db"]


@pytest.mark.parametrize("name", NAMES)
def test_a_store_file_name_no_file_can_have_is_refused_when_made(name: str) -> None:
    with pytest.raises(ConfigurationError, match=r"store file name .* no file can have"):
        SqliteStore(name)
    with pytest.raises(ConfigurationError, match=r"store file name .* no file can have"):
        Runtime(store=f"sqlite:///{name}")


@pytest.mark.parametrize("name", NAMES)
def test_a_checkpointer_file_name_no_file_can_have_is_refused_when_made(name: str) -> None:
    for given in (name, f"sqlite:///{name}"):
        with pytest.raises(ConfigurationError, match=r"checkpointer file name .* no file can"):
            SqliteCheckpointer(given)


def test_an_undecodable_byte_of_a_file_name_is_still_a_name(tmp_path: object) -> None:
    # os.fsdecode writes a byte that is no UTF-8 as a surrogate in U+DC80-U+DCFF: such a name
    # is a real file's, and is taken
    name = f"{tmp_path}/runs-\udcff.db"
    assert SqliteStore(name).path == name
    assert SqliteCheckpointer(name).path == name
