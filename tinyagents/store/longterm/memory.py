"""``MemoryGraphStore``: the long-term store in the process (LangGraph's ``InMemoryStore``).

Values are kept as the JSON text a put was given, and read back from it, so a caller that
changes a dict after ``aput`` or an item's ``value`` after ``aget`` changes nothing stored,
and every backend gives back the same values. Gone when the process ends.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tinyagents._record import Record
from tinyagents.store.longterm.base import (
    GetOp,
    GraphStore,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    check_ops,
    encode_value,
    expiry,
    listed,
    now,
    searched,
)


@dataclass(slots=True, eq=False, repr=False)
class _Row(Record):
    """An item as kept: its value's JSON text, its times and TTL (minutes)."""

    text: str
    created_at: datetime
    updated_at: datetime
    ttl: float | None
    expires_at: datetime | None


class MemoryGraphStore(GraphStore):
    """A graph's long-term store in a dict: ``compile(store=MemoryGraphStore())``."""

    def __init__(self, *, index: Any = None, ttl: TTLConfig | None = None) -> None:
        super().__init__(index=index, ttl=ttl)
        # namespace -> key -> row; bounded by what the program stores (and deletes)
        self._data: dict[tuple[str, ...], dict[str, _Row]] = {}

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        checked = check_ops(ops)
        at = now()
        self._expire(at)
        return [self._run(op, at) for op in checked]

    def _run(self, op: Op, at: datetime) -> Result:
        if isinstance(op, GetOp):
            row = self._data.get(op.namespace, {}).get(op.key)
            if row is None:
                return None
            if op.refresh_ttl:
                _refresh(row, at)
            return Item(value=json.loads(row.text), key=op.key, namespace=op.namespace,
                        created_at=row.created_at, updated_at=row.updated_at)  # fmt: skip
        if isinstance(op, PutOp):
            self._put(op, at)
            return None
        if isinstance(op, SearchOp):
            return self._search(op, at)
        assert isinstance(op, ListNamespacesOp)
        return listed(self._data, op)

    def _put(self, op: PutOp, at: datetime) -> None:
        keys = self._data.get(op.namespace)
        if op.value is None:
            if keys is not None and keys.pop(op.key, None) is not None and not keys:
                del self._data[op.namespace]
            return
        keys = self._data.setdefault(op.namespace, {})
        old = keys.get(op.key)
        keys[op.key] = _Row(
            encode_value(op.value),
            old.created_at if old is not None else at,
            at,
            op.ttl,
            expiry(op.ttl, at),
        )

    def _search(self, op: SearchOp, at: datetime) -> list[SearchItem]:
        size = len(op.namespace_prefix)
        rows: dict[tuple[tuple[str, ...], str], _Row] = {}
        found: list[SearchItem] = []
        for namespace, keys in self._data.items():
            if namespace[:size] != op.namespace_prefix:
                continue
            for key, row in keys.items():
                rows[namespace, key] = row
                found.append(SearchItem(value=json.loads(row.text), key=key, namespace=namespace,
                                        created_at=row.created_at, updated_at=row.updated_at))  # fmt: skip
        page = searched(found, op)
        if op.refresh_ttl:
            for item in page:
                _refresh(rows[item.namespace, item.key], at)
        return page

    def _expire(self, at: datetime) -> None:
        """Drop the items whose time ran out (each batch first, so none is ever read)."""
        for namespace in list(self._data):
            keys = self._data[namespace]
            for key in [
                k for k, r in keys.items() if r.expires_at is not None and r.expires_at <= at
            ]:
                del keys[key]
            if not keys:
                del self._data[namespace]


def _refresh(row: _Row, at: datetime) -> None:
    if row.ttl is not None:
        row.expires_at = at + timedelta(minutes=row.ttl)
