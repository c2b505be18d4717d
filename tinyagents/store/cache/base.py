"""``BaseCache``: the contract of a node cache (LangGraph's ``BaseCache``, async only).

An entry is found by its namespace (a tuple of text: the graph keeps one per node) and its
key (text: a digest of the node's input). Values are JSON-able; a backend stores them as
JSON text, so what comes back is a copy, never the object that was stored.
"""

from __future__ import annotations

import json
import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from tinyagents import _clock
from tinyagents.errors import ArgumentError
from tinyagents.protocol.ids import shown_repr

Namespace = tuple[str, ...]
FullKey = tuple[Namespace, str]


class BaseCache(ABC):
    """Where a compiled graph keeps the results of its cached nodes (``compile(cache=...)``)."""

    @abstractmethod
    async def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        """The values stored under ``keys`` that have not expired (a key with none is left
        out of the result)."""

    @abstractmethod
    async def set(self, pairs: Mapping[FullKey, tuple[Any, float | None]]) -> None:
        """Store each value under its key, for ``ttl`` seconds (``None``: until cleared)."""

    @abstractmethod
    async def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Drop every entry of ``namespaces`` (``None``: of all of them)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what the cache holds open (a file's connection); the memory cache has none."""

    async def __aenter__(self) -> BaseCache:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def check_ttl(ttl: Any, what: str = "ttl") -> float | None:
    """A time to live in seconds: ``None`` (never expires) or a finite number above 0."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise ArgumentError(
            f"{what} is a number of seconds or None (never expires), got {type(ttl).__name__} "
            f"{shown_repr(ttl)}"
        )
    if ttl <= 0 or ttl > sys.float_info.max or not math.isfinite(ttl):  # (an int past any
        # float was a bare OverflowError from isfinite)
        raise ArgumentError(
            f"{what} must be a finite number of seconds above 0 (None: never expires), got "
            f"{shown_repr(ttl)}"
        )
    return float(ttl)


def expiry(ttl: float | None) -> float | None:
    """When an entry stored now for ``ttl`` seconds expires (a POSIX timestamp of the
    injectable clock, so a file's entries read the same in another process)."""
    return None if ttl is None else _clock.now().timestamp() + ttl


def expired(at: float | None) -> bool:
    return at is not None and _clock.now().timestamp() >= at


def dumps(value: Any) -> str:
    """``value`` as the JSON text a cache keeps; ``ArgumentError`` for one JSON cannot hold."""
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        why = "it is nested too deep" if isinstance(exc, RecursionError) else str(exc)
        raise ArgumentError(
            f"a cache value is JSON (dicts of text keys, lists, ...): {why}"
        ) from None


def check_keys(keys: Sequence[FullKey]) -> None:
    for key in keys:
        if not (
            isinstance(key, tuple)
            and len(key) == 2
            and isinstance(key[0], tuple)
            and all(isinstance(part, str) for part in key[0])
            and isinstance(key[1], str)
        ):
            raise ArgumentError(
                "a cache key is (namespace, key): a tuple of text and a text, got "
                f"{shown_repr(key)}"
            )


def check_namespaces(namespaces: Sequence[Namespace] | None) -> None:
    if namespaces is None:
        return
    for ns in namespaces:
        if not (isinstance(ns, tuple) and all(isinstance(part, str) for part in ns)):
            raise ArgumentError(f"a cache namespace is a tuple of text, got {shown_repr(ns)}")


__all__ = ["BaseCache", "FullKey", "Namespace", "check_ttl", "expired", "expiry"]
