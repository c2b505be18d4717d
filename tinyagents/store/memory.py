"""``MemoryStore``: the in-process default (nothing survives the process)."""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Sequence
from dataclasses import field, replace
from datetime import datetime, timedelta
from typing import Any

from tinyagents import _clock
from tinyagents._record import Record, record
from tinyagents.errors import StoreError
from tinyagents.events.models import Event
from tinyagents.protocol.commands import (
    SteeringCommand,
    SteeringReceipt,
    ThreadTarget,
    dedupe_scope,
)
from tinyagents.protocol.state import CommandState
from tinyagents.store.base import (
    INBOX_LEASE_S,
    INBOX_RETENTION_S,
    NONCE_MARGIN_S,
    InboxItem,
    RunKey,
    Store,
    StoredCommand,
    check_snapshots,
    judged_holder,
    newest_runs,
    seconds_before,
    sendable,
    stored_reason,
    target_run_id,
    terminal_updates,
)


@record(slots=True, eq=False, repr=False)
class _Request(Record):
    """A command in the memory inbox: taken (when) and answered (with what, when)."""

    item: InboxItem
    #: When it was last taken (its lease runs ``INBOX_LEASE_S`` from then); None: never.
    taken_at: datetime | None = None
    receipt: SteeringReceipt | None = None
    answered_at: datetime | None = None


@record(slots=True, kw_only=True, eq=False, repr=False)
class UsedNonces(Record):
    """The nonces claimed in this process (``Store.claim_nonce``), each until
    ``NONCE_MARGIN_S`` past its expiry; at most ``limit`` at once (None: no bound), past
    which a claim is a ``StoreError`` (claimed nonces cannot be let go before they expire)."""

    limit: int | None = None
    _held: set[str] = field(default_factory=set, init=False, repr=False)
    #: (forgotten at, nonce), the soonest first: a claim sweeps out those past.
    _ends: list[tuple[datetime, str]] = field(default_factory=list, init=False, repr=False)

    def claim(self, nonce: str, *, expires_at: datetime) -> bool:
        now = _clock.now()
        while self._ends and self._ends[0][0] < now:
            _, gone = heapq.heappop(self._ends)
            self._held.discard(gone)
        if nonce in self._held:
            return False
        if self.limit is not None and len(self._held) >= self.limit:
            raise StoreError(
                f"{len(self._held)} single-use nonces are held, the most this process keeps "
                "(each until it expires): retry in a few seconds"
            )
        self._held.add(nonce)
        heapq.heappush(self._ends, (expires_at + timedelta(seconds=NONCE_MARGIN_S), nonce))
        return True


class MemoryStore(Store):
    url = "memory://"

    def __init__(self) -> None:
        self._commands: dict[tuple[str, str], StoredCommand] = {}  # by (scope, correlation id)
        self._events: list[Event] = []
        self._runs: dict[str, dict[str, Any]] = {}
        self._inbox: dict[str, _Request] = {}  # by request id, in the order put
        self._nonces = UsedNonces()
        #: The run holding each thread, with the hold's owner and when it was taken, by
        #: (tenant, thread) (``hold_thread``); an entry goes with its holder's
        #: ``let_go_of_thread``, or is taken over.
        self._holds: dict[tuple[str, str], tuple[str, str | None, str]] = {}

    async def append_command(
        self,
        cmd: SteeringCommand,
        *,
        state: str,
        run_id: str | None,
        owner: str | None = None,
        thread_id: str | None = None,
    ) -> bool:
        key = (dedupe_scope(cmd.actor), cmd.correlation_id)
        if key in self._commands:
            return False
        if isinstance(cmd.target, ThreadTarget):  # as ``log_row``: the target's own thread
            thread_id = cmd.target.thread_id
        self._commands[key] = StoredCommand(
            command=cmd, state=state, run_id=run_id, owner=owner, thread_id=thread_id
        )
        return True

    async def update_command(
        self,
        cmd: SteeringCommand,
        *,
        state: str,
        run_id: str | None,
        from_state: str,
        owner: str | None = None,
        thread_id: str | None = None,
    ) -> bool:
        stored = self._commands.get((dedupe_scope(cmd.actor), cmd.correlation_id))
        if stored is None or stored.state != from_state:
            return False
        stored.command, stored.state, stored.run_id = cmd, state, run_id
        if owner is not None:
            stored.owner = owner
        if thread_id is not None:
            stored.thread_id = thread_id
        return True

    async def set_command_states(self, updates: list[tuple[str, str, str, str | None]]) -> None:
        for scope, cid, state, reason in updates:
            stored = self._commands.get((scope, cid))
            if stored is not None and (
                stored.state == state or not CommandState(stored.state).terminal
            ):
                stored.state = state
                stored.reason = stored_reason(reason)

    async def get_command(self, correlation_id: str, *, scope: str = "") -> StoredCommand | None:
        stored = self._commands.get((scope, correlation_id))
        return replace(stored) if stored is not None else None  # the caller's own, as read

    async def open_commands(self, *, thread_id: str | None = None) -> list[StoredCommand]:
        return [
            replace(c)
            for c in self._commands.values()
            if not CommandState(c.state).terminal
            and (thread_id is None or c.thread_id == thread_id)
        ]

    async def command_ids(self) -> set[str]:
        return {cid for _, cid in self._commands}

    async def append_events(self, events: list[Event]) -> None:
        self._events.extend(events)
        await self.set_command_states(terminal_updates(events))

    async def load_events(
        self,
        *,
        run_id: str | None = None,
        root_run_id: str | None = None,
        type_prefix: str | None = None,
    ) -> list[Event]:
        return [
            e
            for e in self._events
            if (run_id is None or e.run_id == run_id)
            and (root_run_id is None or e.root_run_id == root_run_id)
            and (type_prefix is None or e.type.startswith(type_prefix))
        ]

    async def save_runs(
        self, snapshots: list[dict[str, Any]], *, held_by: str | None = None
    ) -> list[str]:
        check_snapshots(snapshots)
        # copies at every level, given and handed out: a durable store's are (the caller
        # may change what it gave or got, and the store must not change with it)
        refused: list[str] = []
        for snap in snapshots:
            held = self._runs.get(snap["run_id"])
            if held_by is not None and held is not None and held.get("owner") != held_by:
                refused.append(snap["run_id"])
            else:
                self._runs[snap["run_id"]] = copy.deepcopy(snap)
        return refused

    async def claim_run(
        self, snapshot: dict[str, Any], free: Callable[[dict[str, Any] | None], bool]
    ) -> tuple[bool, dict[str, Any] | None]:
        check_snapshots([snapshot])
        # read and written with no await between: one step for every task of the loop
        held = self._runs.get(snapshot["run_id"])
        stored = copy.deepcopy(held) if held is not None else None
        if not free(stored):
            return False, stored
        self._runs[snapshot["run_id"]] = copy.deepcopy(snapshot)
        return True, stored

    async def hold_thread(
        self,
        tenant_id: str,
        thread_id: str,
        run_id: str,
        free: Callable[[dict[str, Any] | None], bool],
        *,
        owner: str | None = None,
    ) -> tuple[bool, dict[str, Any] | None]:
        # read and written with no await between: one step for every task of the loop
        held = self._holder(tenant_id, thread_id)
        if held is not None and held["run_id"] == run_id:
            held = None
        if held is not None and not free(held):
            return False, held
        self._holds[(tenant_id, thread_id)] = (run_id, owner, _clock.now().isoformat())
        return True, held

    async def thread_holder(self, tenant_id: str, thread_id: str) -> dict[str, Any] | None:
        return self._holder(tenant_id, thread_id)

    def _holder(self, tenant_id: str, thread_id: str) -> dict[str, Any] | None:
        hold = self._holds.get((tenant_id, thread_id))
        if hold is None:
            return None
        snapshot = self._runs.get(hold[0])
        return judged_holder(copy.deepcopy(snapshot) if snapshot is not None else None, *hold)

    async def let_go_of_thread(self, tenant_id: str, thread_id: str, run_id: str) -> bool:
        hold = self._holds.get((tenant_id, thread_id))
        if hold is None or hold[0] != run_id:
            return False
        del self._holds[(tenant_id, thread_id)]
        return True

    async def release_run(self, run_id: str, owner: str, previous: dict[str, Any] | None) -> bool:
        check_snapshots([previous])
        held = self._runs.get(run_id)
        if held is None or held.get("owner") != owner:
            return False
        if previous is None:
            del self._runs[run_id]
        else:
            self._runs[run_id] = copy.deepcopy(previous)
        return True

    async def load_runs(self, *, tenant_id: str | None = None) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(r)
            for r in self._runs.values()
            if tenant_id is None or r["tenant_id"] == tenant_id
        ]

    async def list_runs(
        self,
        *,
        tenant_id: str | None = None,
        statuses: Sequence[str] = (),
        root_run_id: str | None = None,
        before: RunKey | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        newest = newest_runs(
            self._runs.values(),
            limit=limit,
            tenant_id=tenant_id,
            statuses=statuses,
            root_run_id=root_run_id,
            before=before,
        )
        return [copy.deepcopy(r) for r in newest]

    async def run_commands(
        self, run_id: str, *, states: tuple[str, ...] = ("applied",)
    ) -> list[StoredCommand]:
        return [
            replace(c) for c in self._commands.values() if c.run_id == run_id and c.state in states
        ]

    async def load_run(self, run_id: str) -> dict[str, Any] | None:
        snap = self._runs.get(run_id)
        return copy.deepcopy(snap) if snap is not None else None

    async def read_events(
        self,
        *,
        after_id: int = 0,
        tenant_id: str | None = None,
        run_id: str | None = None,
        root_run_id: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[int, Event]]:
        rows: list[tuple[int, Event]] = []
        if limit <= 0:  # as the SQL stores' LIMIT: nothing
            return rows
        for index in range(max(after_id, 0), len(self._events)):  # ids are positions + 1
            e = self._events[index]
            if _matches(e, tenant_id, run_id, root_run_id):
                rows.append((index + 1, e))
                if len(rows) >= limit:
                    break
        return rows

    async def last_events(
        self,
        *,
        before_id: int | None = None,
        tenant_id: str | None = None,
        run_id: str | None = None,
        root_run_id: str | None = None,
        limit: int = 1000,
        type_prefix: str | None = None,
    ) -> list[tuple[int, Event]]:
        rows: list[tuple[int, Event]] = []
        end = len(self._events) if before_id is None else min(before_id - 1, len(self._events))
        for index in range(end - 1, -1, -1):  # ids are positions + 1
            if len(rows) >= limit:
                break
            e = self._events[index]
            if _matches(e, tenant_id, run_id, root_run_id) and (
                type_prefix is None or e.type.startswith(type_prefix)
            ):
                rows.append((index + 1, e))
        rows.reverse()
        return rows

    async def claim_nonce(self, nonce: str, *, expires_at: datetime) -> bool:
        return self._nonces.claim(nonce, expires_at=expires_at)

    async def inbox_put(self, *, owner: str, request_id: str, command: SteeringCommand) -> None:
        sendable(command)  # the bound of every store's inbox, though this one keeps objects
        if request_id not in self._inbox:
            item = InboxItem(
                request_id=request_id, owner=owner, command=command, submitted_at=_clock.now()
            )
            self._inbox[request_id] = _Request(item)

    async def inbox_take(self, owner: str, *, limit: int = 100) -> list[InboxItem]:
        now = _clock.now()
        expired = seconds_before(now, INBOX_LEASE_S)
        taken: list[InboxItem] = []
        for request in self._inbox.values():
            if len(taken) >= limit:
                break
            if request.receipt is None and self._claimable(request, owner, expired):
                request.item = replace(request.item, owner=owner)
                request.taken_at = now
                taken.append(request.item)
        return taken

    def _claimable(self, request: _Request, owner: str, expired: datetime) -> bool:
        """Whether an unanswered ``request`` is ``owner``'s to take (``Store.inbox_take``)."""
        item = request.item
        if item.owner == owner and request.taken_at is None:
            return True
        if (request.taken_at or item.submitted_at) >= expired:
            return False
        if item.owner == owner:
            return True
        run = self._runs.get(target_run_id(item.command) or "")
        return run is not None and run.get("owner") == owner

    async def inbox_answer(self, request_id: str, receipt: SteeringReceipt) -> None:
        request = self._inbox.get(request_id)
        if request is None:
            return
        now = _clock.now()
        request.receipt, request.answered_at = receipt, now
        stale = [
            rid
            for rid, r in self._inbox.items()
            if (now - (r.answered_at or r.item.submitted_at)).total_seconds() > INBOX_RETENTION_S
        ]
        for rid in stale:
            del self._inbox[rid]

    async def inbox_receipt(self, request_id: str) -> SteeringReceipt | None:
        request = self._inbox.get(request_id)
        return request.receipt if request is not None else None


def _matches(e: Event, tenant_id: str | None, run_id: str | None, root_run_id: str | None) -> bool:
    """Whether event ``e`` passes an event read's filters (None: any)."""
    return (
        (tenant_id is None or e.tenant_id == tenant_id)
        and (run_id is None or e.run_id == run_id)
        and (root_run_id is None or e.root_run_id == root_run_id)
    )
