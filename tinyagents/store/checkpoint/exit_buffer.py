"""``ExitBuffer``: what a graph run with ``durability="exit"`` saves through (LangGraph's
"exit" durability: persist only when the run ends).

Every checkpoint and pending write the run makes is held in this process, on top of the
thread as its checkpointer holds it (reads see both, as if each had been saved), until
``flush`` writes them all to that checkpointer when the run ends: completed, interrupted,
failed or cancelled. A process that dies before then loses everything the run did; the
thread stays as it was before the run. Steps are not slower for it: no write waits for the
store until the end.

``flush`` saves in the order the run made its saves, one save per call as a ``"sync"`` run
makes them, in one transaction on SQLite and PostgreSQL (``Checkpointer.saving_together``):
a process that dies during the flush, or a save of it that fails, leaves the thread as it
was before the run, and a flush that ended has saved the whole run. On a backend without
transactions (the memory checkpointer) they are saved one by one: a flush stopped half way
leaves the thread as a ``"sync"`` run stopped at that point would have (its oldest
checkpoints, each before the head with its pending writes).
"""

from __future__ import annotations

import builtins
from collections import deque

from tinyagents.errors import StaleCheckpointError
from tinyagents.store.checkpoint.base import (
    Checkpointer,
    CheckpointRecord,
    WriteRecord,
    check_limit,
    check_record_keys,
    read_write,
)
from tinyagents.store.checkpoint.memory import MemoryCheckpointer, _row


class ExitBuffer(MemoryCheckpointer):
    """``base``'s thread with a run's saves held in memory until ``flush``. The lease, its
    renewal and ``delete_thread`` go to ``base``; ``aclose`` leaves ``base`` open."""

    def __init__(self, base: Checkpointer) -> None:
        super().__init__(snapshot_every=base.snapshot_every)
        self.base = base
        self.described = base.described
        #: every save held, in the order made: a checkpoint's (thread, ns) and None (its
        #: row is the first of ``_chains``' held for it), or pending writes' (thread, ns,
        #: frontier) and (task, kind, key, JSON) each; emptied by ``flush``
        self._log: deque[tuple[tuple[str, ...], builtins.list[tuple[str, str, str, str]] | None]]
        self._log = deque()

    # -- checkpoints -----------------------------------------------------------------------

    async def put(self, record: CheckpointRecord) -> None:
        key = (record.thread_id, record.ns)
        if self._chains.get(key):
            await super().put(record)
            self._log.append((key, None))
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
        self._log.append((key, None))

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

    async def put_writes(
        self, thread_id: str, ns: str, frontier_id: str, writes: builtins.list[WriteRecord]
    ) -> None:
        await super().put_writes(thread_id, ns, frontier_id, writes)
        if writes:  # as encoded now: a value changed later is not what was written
            wkey = (thread_id, ns, frontier_id)
            table = self._writes[wkey]
            rows = [(w.task_id, w.kind, w.key, table[(w.task_id, w.kind, w.key)]) for w in writes]
            self._log.append((wkey, rows))

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
        self._log = deque(entry for entry in self._log if entry[0][0] != thread_id)
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
        self._log.clear()

    @property
    def held(self) -> bool:
        """Whether anything is waiting for ``flush``."""
        return bool(self._log)

    async def flush(self) -> None:
        """Save everything held to ``base``, together (module docstring), in the order the
        run saved it: each checkpoint compare-and-set on its parent, as the run made it, each
        ``put_writes`` as it was called. Held until the flush ended: one that failed saved
        nothing (on a backend without transactions, what it saved before the failure)."""
        placed = dict.fromkeys(self._chains, 0)  # (thread, ns) -> its rows saved so far
        async with self.base.saving_together():
            for key, rows in self._log:
                if rows is None:
                    thread_id, ns = saved = (key[0], key[1])
                    row = self._chains[saved][placed[saved]]
                    await self.base.put(CheckpointRecord.from_row(thread_id, ns, row))
                    placed[saved] += 1
                else:
                    thread_id, ns, frontier_id = key
                    writes = [read_write(thread_id, ns, frontier_id, *row) for row in rows]
                    await self.base.put_writes(thread_id, ns, frontier_id, writes)
        self._log.clear()
        self._chains.clear()
        self._writes.clear()  # all in base now, as each was last written


__all__ = ["ExitBuffer"]
