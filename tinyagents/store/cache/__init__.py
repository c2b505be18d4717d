"""Node caches: where a graph keeps the results of nodes that have a ``CachePolicy``
(LangGraph's ``langgraph.cache``), behind one ``BaseCache`` ABC.

    from tinyagents.store.cache import InMemoryCache, SqliteCache

    graph = builder.compile(cache=InMemoryCache())         # this process only
    graph = builder.compile(cache=SqliteCache("cache.db"))  # a file other processes reopen

The values are JSON-able (a node's writes as a checkpoint holds them); each entry may expire
(``ttl``). ``SqliteCache`` is imported on first use (aiosqlite).
"""

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names
from tinyagents.store.cache.base import BaseCache, FullKey, Namespace
from tinyagents.store.cache.memory import InMemoryCache

if TYPE_CHECKING:  # imported on first use
    from tinyagents.store.cache.sqlite import SqliteCache

__all__ = ["BaseCache", "FullKey", "InMemoryCache", "Namespace", "SqliteCache"]

__getattr__, __dir__ = lazy_names(__name__, {"SqliteCache": "tinyagents.store.cache.sqlite"})
