"""The database stores, each imported on first use (``tinyagents._lazy``).

``SqliteStore`` and ``PostgresStore`` (with their SQL, migrations and ``sqlite3``) are a good
part of the package's bytecode, and a program that keeps its runs in memory never uses them:
``open_store`` and ``tinyagents.store`` name them through here, so ``import tinyagents`` does not
load them; they load with the first URL that asks for one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names

if TYPE_CHECKING:  # what __getattr__ imports (tinyagents._lazy)
    from tinyagents.store.postgres import PostgresStore as PostgresStore
    from tinyagents.store.sqlite import SqliteStore as SqliteStore

__getattr__, __dir__ = lazy_names(
    __name__,
    {"PostgresStore": "tinyagents.store.postgres", "SqliteStore": "tinyagents.store.sqlite"},
)
