"""The per-target steering queue: a synchronous heap core with conflict rules.

Ordering (DESIGN.md): target depth ascending → priority descending → ``created_at`` →
``correlation_id``. The key depends only on the commands, so any submission order drains the
same way. Conflict rules run at ``put_nowait`` and report what they superseded or refused;
the async side (waiting for work) lives in ``Inbox``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from tinyagents.steering.commands import (
    CONTROL_KINDS,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
)
from tinyagents.steering.conflicts import RedirectConflict


class Boundary(StrEnum):
    """Safe points at which a run takes steering (harness loop, then graph supersteps)."""

    BEFORE_MODEL_CALL = "before_model_call"
    AFTER_MODEL_RESPONSE = "after_model_response"
    BEFORE_TOOL_DISPATCH = "before_tool_dispatch"
    AFTER_TOOL_RESULT = "after_tool_result"
    BEFORE_LOOP_CONTINUATION = "before_loop_continuation"
    WHILE_PAUSED = "while_paused"
    BETWEEN_SUPERSTEPS = "between_supersteps"


OrderKey = tuple[int, int, datetime, str]


def order_key(cmd: SteeringCommand, depth: int) -> OrderKey:
    return (depth, -int(cmd.priority), cmd.created_at, cmd.correlation_id)


@dataclass(slots=True)
class _Entry:
    key: OrderKey
    cmd: SteeringCommand
    alive: bool = True


@dataclass(slots=True)
class PutOutcome:
    """What ``put_nowait`` did: ``superseded`` pairs (old command, id of the one that won)."""

    queued: bool
    superseded: list[tuple[SteeringCommand, str]] = field(default_factory=list)
    rejected: str | None = None


#: Kinds a newcomer can conflict with; indexed so a put never scans the whole queue.
_CONFLICT_KINDS = (SteeringKind.CANCEL, SteeringKind.REPLACE_INSTRUCTION, SteeringKind.REDIRECT)


class SteeringQueue:
    def __init__(
        self, *, redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED
    ) -> None:
        self.redirect_conflict = RedirectConflict(redirect_conflict)
        #: (key, entry): keys are unique (the correlation id is in them), so the heap compares
        #: plain tuples in C and never reaches the entry.
        self._heap: list[tuple[OrderKey, _Entry]] = []
        self._by_id: dict[str, _Entry] = {}
        self._by_kind: dict[SteeringKind, dict[str, _Entry]] = {k: {} for k in _CONFLICT_KINDS}

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, correlation_id: object) -> bool:
        return correlation_id in self._by_id

    def pending(self) -> list[SteeringCommand]:
        return [e.cmd for e in sorted(self._by_id.values(), key=lambda e: e.key)]

    # ------------------------------------------------------------------ put

    def put_nowait(self, cmd: SteeringCommand, depth: int = 0) -> PutOutcome:
        if cmd.correlation_id in self._by_id:
            return PutOutcome(
                queued=False, rejected=f"duplicate correlation id {cmd.correlation_id}"
            )
        entry = _Entry(order_key(cmd, depth), cmd)
        outcome = self._resolve_conflicts(entry)
        if outcome.queued:
            heapq.heappush(self._heap, (entry.key, entry))
            self._by_id[cmd.correlation_id] = entry
            same_kind = self._by_kind.get(cmd.kind)
            if same_kind is not None:
                same_kind[cmd.correlation_id] = entry
        return outcome

    def _resolve_conflicts(self, new: _Entry) -> PutOutcome:
        kind = new.cmd.kind
        cid = new.cmd.correlation_id
        outcome = PutOutcome(queued=True)
        if kind is SteeringKind.CANCEL:
            for old in [e for e in self._by_id.values() if e.cmd.kind is not SteeringKind.CANCEL]:
                self._drop(old)
                outcome.superseded.append((old.cmd, cid))
            return outcome
        cancel = next(iter(self._by_kind[SteeringKind.CANCEL].values()), None)
        if cancel is not None:
            outcome.queued = False
            outcome.superseded.append((new.cmd, cancel.cmd.correlation_id))
            return outcome
        if kind is SteeringKind.REPLACE_INSTRUCTION:
            for old in self._alive(SteeringKind.REPLACE_INSTRUCTION):
                loser, winner = (old, new) if _age(old) < _age(new) else (new, old)
                self._lose(loser, winner, outcome)
        elif kind is SteeringKind.REDIRECT:
            for old in self._alive(SteeringKind.REDIRECT):
                if self.redirect_conflict is RedirectConflict.ERROR:
                    outcome.queued = False
                    outcome.rejected = (
                        f"a redirect ({old.cmd.correlation_id}) is already pending for this "
                        "target and redirect_conflict is 'error'"
                    )
                    return outcome
                if self.redirect_conflict is RedirectConflict.FIRST_ACCEPTED:
                    self._lose(new, old, outcome)
                else:
                    loser, winner = (new, old) if _rank(old) < _rank(new) else (old, new)
                    self._lose(loser, winner, outcome)
        return outcome

    def _lose(self, loser: _Entry, winner: _Entry, outcome: PutOutcome) -> None:
        if loser.cmd.correlation_id in self._by_id:
            self._drop(loser)
        else:
            outcome.queued = False
        outcome.superseded.append((loser.cmd, winner.cmd.correlation_id))

    def _alive(self, kind: SteeringKind) -> list[_Entry]:
        return list(self._by_kind[kind].values())

    def _drop(self, entry: _Entry) -> None:
        entry.alive = False
        self._forget(entry.cmd)

    def _forget(self, cmd: SteeringCommand) -> None:
        del self._by_id[cmd.correlation_id]
        same_kind = self._by_kind.get(cmd.kind)
        if same_kind is not None:
            del same_kind[cmd.correlation_id]

    # ------------------------------------------------------------------ pop

    def pop_ready(
        self, boundary: Boundary, *, final: bool = False, paused: bool = False
    ) -> list[SteeringCommand]:
        """Remove and return, in order, what may be delivered at ``boundary``.

        ``final`` marks the boundary at which the run would otherwise finish (END_OF_TURN
        commands become ready there). While ``paused`` only control kinds are ready.
        """
        if not self._by_id:
            return []
        ready: list[SteeringCommand] = []
        keep: list[tuple[OrderKey, _Entry]] = []
        heap = self._heap
        while heap:
            item = heapq.heappop(heap)
            entry = item[1]
            if not entry.alive:
                continue
            if _deliverable(entry.cmd, boundary, final, paused):
                ready.append(entry.cmd)
                self._forget(entry.cmd)
            else:
                keep.append(item)
        self._heap = keep  # popped in order, so already a valid heap
        return ready

    def has_ready(self, boundary: Boundary, *, final: bool = False, paused: bool = False) -> bool:
        return any(_deliverable(e.cmd, boundary, final, paused) for e in self._by_id.values())

    def drain(self) -> list[SteeringCommand]:
        """Remove and return everything still pending, in order."""
        out = self.pending()
        self._heap.clear()
        self._by_id.clear()
        for same_kind in self._by_kind.values():
            same_kind.clear()
        return out


def _deliverable(cmd: SteeringCommand, boundary: Boundary, final: bool, paused: bool) -> bool:
    if paused or boundary is Boundary.WHILE_PAUSED:
        return cmd.kind in CONTROL_KINDS
    delivery = cmd.delivery
    if delivery is SteeringDelivery.NEXT_BOUNDARY or delivery is SteeringDelivery.IMMEDIATE:
        return True
    if delivery is SteeringDelivery.END_OF_TURN:
        return final
    if delivery is SteeringDelivery.BEFORE_MODEL_CALL:
        return boundary is Boundary.BEFORE_MODEL_CALL
    return boundary is Boundary.AFTER_TOOL_RESULT


def _age(entry: _Entry) -> tuple[datetime, str]:
    return (entry.cmd.created_at, entry.cmd.correlation_id)


def _rank(entry: _Entry) -> tuple[int, datetime, str]:
    """Smaller is stronger: higher priority, then older, then correlation id."""
    return (-int(entry.cmd.priority), entry.cmd.created_at, entry.cmd.correlation_id)
