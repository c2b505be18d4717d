"""``InMemoryCache``: node results kept in this process (LangGraph's ``InMemoryCache``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tinyagents.store.cache.base import (
    BaseCache,
    FullKey,
    Namespace,
    check_keys,
    check_namespaces,
    check_ttl,
    dumps,
    expired,
    expiry,
)


class InMemoryCache(BaseCache):
    """A dict per namespace of ``key -> (JSON text, expiry)``: each read is a fresh copy. An
    expired entry is dropped when it is read; ``clear`` drops the rest."""

    def __init__(self) -> None:
        self._entries: dict[Namespace, dict[str, tuple[str, float | None]]] = {}

    async def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        check_keys(keys)
        found: dict[FullKey, Any] = {}
        for ns, key in keys:
            entries = self._entries.get(ns)
            entry = None if entries is None else entries.get(key)
            if entry is None:
                continue
            text, at = entry
            if expired(at):
                del entries[key]  # type: ignore[union-attr]
                continue
            found[(ns, key)] = json.loads(text)
        return found

    async def set(self, pairs: Mapping[FullKey, tuple[Any, float | None]]) -> None:
        check_keys(list(pairs))
        # every value is encoded before any is stored: a bad one stores nothing
        encoded = [(k, dumps(v), expiry(check_ttl(ttl))) for k, (v, ttl) in pairs.items()]
        for (ns, key), text, at in encoded:
            self._entries.setdefault(ns, {})[key] = (text, at)

    async def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        check_namespaces(namespaces)
        if namespaces is None:
            self._entries.clear()
            return
        for ns in namespaces:
            self._entries.pop(ns, None)

    def __repr__(self) -> str:
        return f"InMemoryCache({sum(len(e) for e in self._entries.values())} entries)"


__all__ = ["InMemoryCache"]
