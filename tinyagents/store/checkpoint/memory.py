"""``MemoryCheckpointer``: checkpoints in this process, for tests and short-lived threads.

Records are kept as JSON text, exactly as a database would keep them, so values that would
not survive SQLite do not survive here either and a loaded state never aliases a stored one.
"""

from __future__ import annotations

import builtins
from typing import NamedTuple

from tinyagents.errors import StaleCheckpointError
from tinyagents.protocol.ids import shown_id
from tinyagents.store.checkpoint.base import (
    Checkpointer,
    CheckpointRecord,
    WriteRecord,
    check_limit,
    check_record_keys,
    check_write_keys,
    compact_json,
    read_write,
)


class _Row(NamedTuple):
    """A checkpoint as a database row (``ROW_COLUMNS``), read by ``CheckpointRecord.from_row``."""

    checkpoint_id: str
    parent_id: str | None
    seq: int
    step: int
    snapshot: bool
    source: str
    created_at: float
    body: str


def _row(record: CheckpointRecord) -> _Row:
    return _Row(
        checkpoint_id=record.checkpoint_id,
        parent_id=record.parent_id,
        seq=record.seq,
        step=record.step,
        snapshot=record.snapshot,
        source=record.source,
        created_at=record.created_at,
        body=compact_json(record.body()),
    )


class MemoryCheckpointer(Checkpointer):
    """Keeps every thread in a dict; nothing survives the process, nor ``aclose``."""

    def __init__(self, *, snapshot_every: int = 50) -> None:
        super().__init__(snapshot_every=snapshot_every)
        self.described = "memory checkpointer"
        self._chains: dict[tuple[str, str], list[_Row]] = {}
        self._writes: dict[tuple[str, str, str], dict[tuple[str, str, str], str]] = {}

    async def put(self, record: CheckpointRecord) -> None:
        self.refuse_closed("save a checkpoint")
        check_record_keys(record)
        row = _row(record)  # first, as a database's: what JSON cannot hold is refused as such
        chain = self._chains.setdefault((record.thread_id, record.ns), [])
        head = chain[-1] if chain else None
        head_id = head.checkpoint_id if head else None
        if record.parent_id != head_id or record.seq != (head.seq + 1 if head else 0):
            raise StaleCheckpointError(
                f"checkpoint {record.checkpoint_id} of thread {record.thread_id!r} is based on "
                f"{record.parent_id!r} but the head is {head_id!r}; reload the thread"
            )
        chain.append(row)

    async def latest(self, thread_id: str, ns: str = "") -> CheckpointRecord | None:
        self.refuse_closed("read a thread")
        chain = self._chains.get((thread_id, ns))
        return CheckpointRecord.from_row(thread_id, ns, chain[-1]) if chain else None

    def _find(self, thread_id: str, ns: str, checkpoint_id: str | None) -> int | None:
        self.refuse_closed("read a thread")  # get, chain and list_before read through here
        chain = self._chains.get((thread_id, ns))
        if not chain:
            return None
        if checkpoint_id is None:
            return len(chain) - 1
        for pos in range(len(chain) - 1, -1, -1):
            if chain[pos].checkpoint_id == checkpoint_id:
                return pos
        return None

    async def get(
        self, thread_id: str, checkpoint_id: str, ns: str = ""
    ) -> CheckpointRecord | None:
        pos = self._find(thread_id, ns, checkpoint_id)
        return (
            None
            if pos is None
            else CheckpointRecord.from_row(thread_id, ns, self._chains[(thread_id, ns)][pos])
        )

    async def chain(
        self, thread_id: str, ns: str = "", checkpoint_id: str | None = None
    ) -> list[CheckpointRecord]:
        end = self._find(thread_id, ns, checkpoint_id)
        if end is None:
            return []
        rows = self._chains[(thread_id, ns)]
        start = end
        while not rows[start].snapshot:
            start -= 1
        return [CheckpointRecord.from_row(thread_id, ns, row) for row in rows[start : end + 1]]

    async def list(
        self, thread_id: str, ns: str = "", *, limit: int | None = None
    ) -> list[CheckpointRecord]:
        self.refuse_closed("read a thread")
        rows = self._chains.get((thread_id, ns), [])[::-1][: check_limit(limit)]
        return [CheckpointRecord.from_row(thread_id, ns, row, with_values=False) for row in rows]

    async def list_before(
        self, thread_id: str, ns: str, before: str, *, limit: int | None = None
    ) -> builtins.list[CheckpointRecord] | None:
        check_limit(limit, "list_before")
        at = self._find(thread_id, ns, before)
        if at is None:
            return None
        rows = self._chains[(thread_id, ns)][:at][::-1][:limit]
        return [CheckpointRecord.from_row(thread_id, ns, row, with_values=False) for row in rows]

    async def put_writes(
        self, thread_id: str, ns: str, frontier_id: str, writes: builtins.list[WriteRecord]
    ) -> None:
        check_write_keys(thread_id, ns, frontier_id, writes)
        self.refuse_closed("save pending writes")
        table = self._writes.setdefault((thread_id, ns, frontier_id), {})
        for w in writes:
            table[(w.task_id, w.kind, w.key)] = compact_json(w.value)

    async def get_writes(
        self, thread_id: str, ns: str, frontier_id: str
    ) -> builtins.list[WriteRecord]:
        self.refuse_closed("read pending writes")
        table = self._writes.get((thread_id, ns, frontier_id), {})
        return [
            read_write(thread_id, ns, frontier_id, task_id, kind, key, value)
            for (task_id, kind, key), value in table.items()
        ]

    async def delete_thread(self, thread_id: str) -> None:
        self.refuse_closed(f"delete thread {shown_id(thread_id)}")
        self.refuse_held(thread_id)
        for key in [k for k in self._chains if k[0] == thread_id]:
            del self._chains[key]
        for wkey in [k for k in self._writes if k[0] == thread_id]:
            del self._writes[wkey]

    async def aclose(self) -> None:
        """Drop every thread, for good: each call after it is ``CheckpointerClosed``, as on
        the durable backends, so a program's use of a closed checkpointer fails the same
        way in its tests (on memory) as in production."""
        await super().aclose()
        self._chains.clear()
        self._writes.clear()

    def storage_bytes(self) -> int:
        """Bytes of JSON held (checkpoints and pending writes), for benchmarks."""
        rows = sum(len(r.body) for chain in self._chains.values() for r in chain)
        return rows + sum(len(v) for t in self._writes.values() for v in t.values())
