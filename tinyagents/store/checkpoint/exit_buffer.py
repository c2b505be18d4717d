"""``ExitBuffer``: what a graph run with ``durability="exit"`` saves through (LangGraph's
"exit" durability: persist only when the run ends).

Every checkpoint and pending write the run makes is held in this process, on top of the
thread as its checkpointer holds it (reads see both, as if each had been saved), until
``flush`` writes them all to that checkpointer, in order, when the run ends: completed,
interrupted, failed or cancelled. A process that dies before then loses everything the run
did; the thread stays as it was before the run. Steps are not slower for it: no write waits
for the store until the end.
"""

from __future__ import annotations

import builtins

from tinyagents.errors import StaleCheckpointError
from tinyagents.store.checkpoint.base import (
    Checkpointer,
    CheckpointRecord,
    WriteRecord,
    check_limit,
    check_record_keys,
)
from tinyagents.store.checkpoint.memory import MemoryCheckpointer, _row


class ExitBuffer(MemoryCheckpointer):
    """``base``'s thread with a run's saves held in memory until ``flush``. The lease, its
    renewal and ``delete_thread`` go to ``base``; ``aclose`` leaves ``base`` open."""

    def __init__(self, base: Checkpointer) -> None:
        super().__init__(snapshot_every=base.snapshot_every)
        self.base = base
        self.described = base.described
        #: the namespaces saved to, in the order of their first checkpoint here
        self._order: list[tuple[str, str]] = []

    # -- checkpoints -----------------------------------------------------------------------

    async def put(self, record: CheckpointRecord) -> None:
        key = (record.thread_id, record.ns)
        if self._chains.get(key):
            await super().put(record)
            return
        # the first of its namespace here: on top of the base's head
        self.base.refuse_closed("save a checkpoint")
        check_record_keys(record)
        row = _row(record)  # what JSON cannot hold is refused now, as the base would
        head = await self.base.latest(*key)
        head_id = head.checkpoint_id if head else None
        if record.parent_id != head_id or record.seq != (head.seq + 1 if head else 0):
            raise StaleCheckpointError(
                f"checkpoint {record.checkpoint_id} of thread {record.thread_id!r} is based on "
                f"{record.parent_id!r} but the head is {head_id!r}; reload the thread"
            )
        self._chains[key] = [row]
        self._order.append(key)

    async def latest(self, thread_id: str, ns: str = "") -> CheckpointRecord | None:
        if self._chains.get((thread_id, ns)):
            return await super().latest(thread_id, ns)
        return await self.base.latest(thread_id, ns)

    async def get(
        self, thread_id: str, checkpoint_id: str, ns: str = ""
    ) -> CheckpointRecord | None:
        found = await super().get(thread_id, checkpoint_id, ns)
        return found or await self.base.get(thread_id, checkpoint_id, ns)

    async def chain(
        self, thread_id: str, ns: str = "", checkpoint_id: str | None = None
    ) -> builtins.list[CheckpointRecord]:
        end = self._find(thread_id, ns, checkpoint_id)
        if end is None:
            return await self.base.chain(thread_id, ns, checkpoint_id)
        rows = self._chains[(thread_id, ns)]
        if any(row.snapshot for row in rows[: end + 1]):
            return await super().chain(thread_id, ns, checkpoint_id)
        # deltas on the base's head: its chain first
        below = await self.base.chain(thread_id, ns, rows[0].parent_id)
        return [*below, *(CheckpointRecord.from_row(thread_id, ns, r) for r in rows[: end + 1])]

    async def list(
        self, thread_id: str, ns: str = "", *, limit: int | None = None
    ) -> builtins.list[CheckpointRecord]:
        mine = await super().list(thread_id, ns, limit=limit)
        if limit is not None and len(mine) >= limit:
            return mine
        rest = None if limit is None else limit - len(mine)
        return [*mine, *await self.base.list(thread_id, ns, limit=rest)]

    async def list_before(
        self, thread_id: str, ns: str, before: str, *, limit: int | None = None
    ) -> builtins.list[CheckpointRecord] | None:
        check_limit(limit, "list_before")
        if self._find(thread_id, ns, before) is None:
            return await self.base.list_before(thread_id, ns, before, limit=limit)
        mine = await super().list_before(thread_id, ns, before, limit=limit)
        assert mine is not None
        if limit is not None and len(mine) >= limit:
            return mine
        rest = None if limit is None else limit - len(mine)
        return [*mine, *await self.base.list(thread_id, ns, limit=rest)]

    # -- pending writes --------------------------------------------------------------------

    async def put_writes_once(
        self, thread_id: str, ns: str, frontier_id: str, writes: builtins.list[WriteRecord]
    ) -> None:
        await self.put_writes(thread_id, ns, frontier_id, writes)  # (memory: it cannot fail)

    async def get_writes(
        self, thread_id: str, ns: str, frontier_id: str
    ) -> builtins.list[WriteRecord]:
        saved = await self.base.get_writes(thread_id, ns, frontier_id)
        if (thread_id, ns, frontier_id) not in self._writes:
            return saved
        merged = {(w.task_id, w.kind, w.key): w for w in saved}
        for w in await super().get_writes(thread_id, ns, frontier_id):
            merged[(w.task_id, w.kind, w.key)] = w  # replaced in place, as a backend does
        return builtins.list(merged.values())

    # -- the thread, the lease and the end -------------------------------------------------

    async def delete_thread(self, thread_id: str) -> None:
        await self.base.delete_thread(thread_id)
        for key in [k for k in self._chains if k[0] == thread_id]:
            del self._chains[key]
        self._order = [k for k in self._order if k[0] != thread_id]
        for wkey in [k for k in self._writes if k[0] == thread_id]:
            del self._writes[wkey]

    def refuse_held(self, thread_id: str) -> None:
        self.base.refuse_held(thread_id)

    def refuse_closed(self, doing: str) -> None:
        self.base.refuse_closed(doing)

    async def acquire(self, thread_id: str, owner: str) -> None:
        await self.base.acquire(thread_id, owner)

    async def release(self, thread_id: str, owner: str) -> None:
        await self.base.release(thread_id, owner)

    def letting_go(self, thread_id: str, owner: str) -> None:
        self.base.letting_go(thread_id, owner)

    async def renew(self, thread_id: str, owner: str) -> None:
        await self.base.renew(thread_id, owner)

    async def setup(self) -> None:
        await self.base.setup()

    async def aclose(self) -> None:
        """Drop what is held; ``base`` stays open (it is the caller's)."""
        self._chains.clear()
        self._writes.clear()
        self._order.clear()

    @property
    def held(self) -> bool:
        """Whether anything is waiting for ``flush``."""
        return bool(self._order or self._writes)

    async def flush(self) -> None:
        """Save everything held to ``base``: the pending writes first (a write of a frontier
        no saved checkpoint has is never read), then each namespace's checkpoints in order
        (compare-and-set on their parents, as the run made them). What was saved is no
        longer held, so a ``flush`` that failed part-way can be called again."""
        for wkey in builtins.list(self._writes):
            thread_id, ns, frontier_id = wkey
            writes = await super().get_writes(thread_id, ns, frontier_id)
            await self.base.put_writes(thread_id, ns, frontier_id, writes)
            del self._writes[wkey]
        while self._order:
            thread_id, ns = key = self._order[0]
            rows = self._chains[key]
            while rows:
                await self.base.put(CheckpointRecord.from_row(thread_id, ns, rows[0]))
                rows.pop(0)
            del self._chains[key]
            self._order.pop(0)


__all__ = ["ExitBuffer"]
