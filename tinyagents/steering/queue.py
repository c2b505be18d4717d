"""The per-target steering queue: a synchronous heap core with conflict rules.

Ordering (DESIGN.md): target depth ascending → priority descending → ``created_at`` →
``correlation_id``. The key depends only on the commands, so any submission order drains the
same way. Conflict rules run at ``put_nowait`` and report what they superseded or refused; a
conflict a later cancel could still turn is left to ``settle``, at the boundary. The async
side (waiting for work) lives in ``Inbox``.
"""

from __future__ import annotations

import heapq
from dataclasses import field
from datetime import datetime
from operator import itemgetter

from tinyagents._record import Record, record
from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import (
    CONTROL_KINDS,
    GraphNodeTarget,
    GraphTaskTarget,
    ReadOnlyList,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    dedupe_scope,
)
from tinyagents.steering.conflicts import RedirectConflict

OrderKey = tuple[int, int, datetime, str]


def supersedes(cancel: SteeringCommand, cmd: SteeringCommand) -> bool:
    """Whether ``cancel`` supersedes ``cmd`` (DESIGN.md, "Conflicts"): ``cmd`` is no cancel,
    and ``cancel`` ends what it is aimed at (``_covers``). The queue applies it to what is
    queued; a graph run to what a pause holds behind it."""
    return cmd.kind is not SteeringKind.CANCEL and _covers(cancel.target, cmd)


def _final(winner: SteeringCommand, loser: SteeringCommand) -> bool:
    """Whether ``loser``'s defeat by ``winner`` stands whatever arrives later: every cancel
    that could end the winner ends the loser too. A redirect for the run beats one for node
    ``b`` for good; a redirect for node ``b`` beats one for the run only until a cancel of
    ``b`` arrives, so such a pair stays queued and is settled at the boundary (``settle``):
    the outcome is the same whatever order the three were submitted in."""
    return _covers(winner.target, loser)


def _covers(target: object, cmd: SteeringCommand) -> bool:
    """Whether a cancel aimed at ``target`` ends what ``cmd`` is aimed at: a run's cancel
    covers every command queued for the run; a graph task's (or node's) cancel only the
    commands aimed at that same task (or node) — an approval for a sibling task, or an update
    of the run's state, still stands."""
    if isinstance(target, GraphTaskTarget):
        other = cmd.target
        return isinstance(other, GraphTaskTarget) and other.task_id == target.task_id
    if isinstance(target, GraphNodeTarget):
        other = cmd.target
        return isinstance(other, GraphNodeTarget) and other.node == target.node
    return True


def order_key(cmd: SteeringCommand, depth: int) -> OrderKey:
    return (depth, -cmd.priority, cmd.created_at, cmd.correlation_id)


#: Which command an item is: its correlation id in its sender's scope (``dedupe_scope``), as
#: the router knows it. Two senders may each queue a command under one id.
_Id = tuple[str, str]

#: A queued command: its ``order_key`` written out, its sender's scope, then the command. The
#: heap compares keys and scopes only (together unique: the correlation id is in the key); an
#: item is alive while ``_by_id`` maps its id to this very item, so dropping a command is a dict
#: deletion and its item is skipped when it reaches the top of the heap. One flat tuple, not
#: the key's tuple inside the item's: every command queued is one object fewer for the cyclic
#: collector (a queue holds its commands until the run's next boundary).
_Item = tuple[int, int, datetime, str, str, SteeringCommand]


#: The fields of a command ``put_nowait`` reads, from its ``__dict__`` (where pydantic keeps
#: them) at once: each attribute read of a pydantic model goes the slow way, through the
#: ``__getattr__`` hook its class has (and every command is put).
_ITEM_FIELDS = itemgetter("kind", "priority", "created_at", "correlation_id")


def _id(cmd: SteeringCommand) -> _Id:
    return (dedupe_scope(cmd.actor), cmd.correlation_id)


@record(slots=True, eq=False, repr=False)
class PutOutcome(Record):
    """What ``put_nowait`` did: ``superseded`` pairs (old command, id of the one that won)."""

    queued: bool
    superseded: list[tuple[SteeringCommand, str]] = field(default_factory=list)
    rejected: str | None = None


#: The outcome of most puts (queued, nothing superseded), one for all of them: a put makes
#: no record and no list for it (every command is put). Never changed: its list refuses it.
_QUEUED = PutOutcome(queued=True, superseded=ReadOnlyList())


#: Kinds a newcomer can conflict with; indexed so a put never scans the whole queue.
_CONFLICT_KINDS = frozenset(
    {SteeringKind.CANCEL, SteeringKind.REPLACE_INSTRUCTION, SteeringKind.REDIRECT}
)


class SteeringQueue:
    def __init__(
        self, *, redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED
    ) -> None:
        self.redirect_conflict = RedirectConflict(redirect_conflict)
        #: None while nothing is queued (made by a put, dropped by the ``pop_ready`` that
        #: empties it): an idle queue holds no list for the cyclic collector to walk.
        self._heap: list[_Item] | None = None
        self._by_id: dict[_Id, _Item] = {}
        #: The queued commands of each conflict kind, by id; a kind's dict is made by its first
        #: put. Most queues never see one, and until then this stays an empty dict the garbage
        #: collector does not track (a runtime may hold thousands of queues).
        self._by_kind: dict[SteeringKind, dict[_Id, _Item]] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, correlation_id: object) -> bool:
        """Whether a command with this correlation id (from any sender) is queued."""
        return any(cid == correlation_id for _, cid in self._by_id)

    def pending(self) -> list[SteeringCommand]:
        return [item[-1] for item in sorted(self._by_id.values())]

    def cancels(self) -> list[SteeringCommand]:
        """The queued cancels, in order (from the index: no scan of the queue)."""
        cancels = self._by_kind.get(SteeringKind.CANCEL)
        return [item[-1] for item in sorted(cancels.values())] if cancels else []

    # ------------------------------------------------------------------ put

    def conflict(self, cmd: SteeringCommand, key: _Id | None = None) -> str | None:
        """Why ``put_nowait`` would refuse ``cmd`` outright, or None; changes nothing.

        Refused are a correlation id its sender already has queued and, under
        ``redirect_conflict='error'``, a redirect while another is pending (unless a pending
        cancel supersedes it first). The router asks before it accepts a command, so such a
        command is rejected, not accepted. ``key``: ``cmd``'s id (sender's scope, correlation
        id) when the caller has it already (the router does, for every command).
        """
        if (_id(cmd) if key is None else key) in self._by_id:
            return f"duplicate correlation id {cmd.correlation_id}"
        if (
            # the queue's setting first: under the default, no command's fields are read
            self.redirect_conflict is RedirectConflict.ERROR
            and cmd.kind is SteeringKind.REDIRECT
            and not cmd.fork
            and self._live_redirects()
            and self._covering_cancel(cmd) is None
        ):
            pending = self._live_redirects()[0]
            return (
                f"a redirect ({pending.correlation_id}) is already pending for this target "
                "and redirect_conflict is 'error'"
            )
        return None

    def put_nowait(
        self, cmd: SteeringCommand, depth: int = 0, key: _Id | None = None
    ) -> PutOutcome:
        """Queue ``cmd`` (``key``: its id, as ``conflict`` takes it), superseding what it ends
        or being superseded; what happened."""
        by_kind = self._by_kind
        if key is None:
            key = _id(cmd)
        # A new id in a queue that never held a conflict kind cannot be refused: most puts.
        if by_kind or key in self._by_id:
            refused = self.conflict(cmd, key)
            if refused is not None:
                return PutOutcome(queued=False, rejected=refused)
        kind, priority, created_at, correlation_id = _ITEM_FIELDS(cmd.__dict__)
        if kind in _CONFLICT_KINDS or (by_kind and by_kind.get(SteeringKind.CANCEL)):
            outcome = self._resolve_conflicts(cmd)
            if not outcome.queued:
                return outcome
        else:  # nothing it can conflict with: most commands (this runs for every one)
            outcome = _QUEUED
        # ``order_key(cmd, depth)``, the scope and the command, as one tuple (``_Item``)
        item = (depth, -priority, created_at, correlation_id, key[0], cmd)
        heap = self._heap
        if heap is None:
            heap = self._heap = []
        heapq.heappush(heap, item)
        self._by_id[key] = item
        if kind in _CONFLICT_KINDS:
            self._by_kind.setdefault(kind, {})[key] = item
        return outcome

    def _resolve_conflicts(self, new: SteeringCommand) -> PutOutcome:
        kind = new.kind
        outcome = PutOutcome(queued=True)
        if kind is SteeringKind.CANCEL:
            for old in [item[-1] for item in self._by_id.values()]:
                if supersedes(new, old):
                    self._forget(old)
                    outcome.superseded.append((old, new.correlation_id))
            return outcome
        cancel = self._covering_cancel(new)
        if cancel is not None:
            outcome.queued = False
            outcome.superseded.append((new, cancel.correlation_id))
            return outcome
        if kind is SteeringKind.REPLACE_INSTRUCTION:
            rivals = self._pending(SteeringKind.REPLACE_INSTRUCTION)
        elif kind is SteeringKind.REDIRECT and not new.fork:  # 'error': conflict() refused it
            rivals = self._live_redirects()
        else:
            return outcome
        for old in rivals:
            winner, loser = self._stronger(old, new)
            if not _final(winner, loser):
                continue  # both stay queued: ``settle`` decides at the boundary
            self._lose(loser, winner, outcome)
            if loser is new:
                break
        return outcome

    def _stronger(
        self, old: SteeringCommand, new: SteeringCommand
    ) -> tuple[SteeringCommand, SteeringCommand]:
        """(winner, loser) of a conflict between a queued command and a newer arrival."""
        if new.kind is SteeringKind.REPLACE_INSTRUCTION:  # the newer instruction stands
            return (new, old) if _age(old) < _age(new) else (old, new)
        if self.redirect_conflict is RedirectConflict.FIRST_ACCEPTED:
            return old, new
        return (old, new) if _rank(old) < _rank(new) else (new, old)

    def _lose(self, loser: SteeringCommand, winner: SteeringCommand, outcome: PutOutcome) -> None:
        if _id(loser) in self._by_id:
            self._forget(loser)
        else:
            outcome.queued = False
        outcome.superseded.append((loser, winner.correlation_id))

    def settle(self) -> list[tuple[SteeringCommand, str]]:
        """Settle the conflicts ``put_nowait`` left open (a winner a later cancel could still
        end alone): of the redirects (and of the replace_instructions) still queued, one
        stands and the others are dropped. Called before ``pop_ready`` at a boundary; returns
        the ``(loser, winner's correlation id)`` pairs to report as superseded."""
        lost: list[tuple[SteeringCommand, str]] = []
        if not self._by_kind:  # never held a conflict kind: most queues
            return lost
        for rivals in (self._live_redirects(), self._pending(SteeringKind.REPLACE_INSTRUCTION)):
            if len(rivals) < 2:
                continue
            winner = rivals[0]  # queued first: the first accepted
            for other in rivals[1:]:
                winner = self._stronger(winner, other)[0]
            for cmd in rivals:
                if cmd is not winner:
                    self._forget(cmd)
                    lost.append((cmd, winner.correlation_id))
        return lost

    def _live_redirects(self) -> list[SteeringCommand]:
        """The queued redirects of the run itself: a fork's (``fork=True``) applies on a
        thread of its own, and conflicts with no other redirect."""
        return [r for r in self._pending(SteeringKind.REDIRECT) if not r.fork]

    def _covering_cancel(self, cmd: SteeringCommand) -> SteeringCommand | None:
        """A queued cancel that ends what ``cmd`` is aimed at, if any."""
        for item in self._by_kind.get(SteeringKind.CANCEL, {}).values():
            cancel = item[-1]
            if supersedes(cancel, cmd):
                return cancel
        return None

    def _pending(self, kind: SteeringKind) -> list[SteeringCommand]:
        """The queued commands of a conflict kind (a copy: the caller may drop some)."""
        return [item[-1] for item in self._by_kind.get(kind, {}).values()]

    def _forget(self, cmd: SteeringCommand, key: _Id | None = None) -> None:
        key = _id(cmd) if key is None else key
        del self._by_id[key]
        same_kind = self._by_kind.get(cmd.kind)
        if same_kind is not None:
            del same_kind[key]

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
        keep: list[_Item] = []
        heap = self._heap
        assert heap is not None  # a command is queued: a put made it
        by_id, by_kind = self._by_id, self._by_kind
        # ``_deliverable``'s usual answer (a command for the next boundary, not paused) and
        # ``_forget`` inline: this runs for every command taken
        any_boundary = not paused and boundary is not Boundary.WHILE_PAUSED
        while heap:
            item = heapq.heappop(heap)
            cmd = item[5]
            key = (item[4], item[3])  # (scope, correlation id)
            if by_id.get(key) is not item:
                continue  # dropped (superseded) while queued
            if (any_boundary and cmd.delivery is SteeringDelivery.NEXT_BOUNDARY) or _deliverable(
                cmd, boundary, final, paused
            ):
                ready.append(cmd)
                del by_id[key]
                if by_kind:
                    same_kind = by_kind.get(cmd.kind)
                    if same_kind is not None:
                        del same_kind[key]
            else:
                keep.append(item)
        if keep:
            heap.extend(keep)  # popped in order, so already a valid heap
        else:
            self._heap = None
        return ready

    def remove(self, cmd: SteeringCommand) -> bool:
        """Take ``cmd`` out of the queue if it is queued (its heap item is skipped when
        popped, as a superseded one's is); whether it was."""
        key = _id(cmd)
        item = self._by_id.get(key)
        if item is None or item[-1] is not cmd:
            return False
        self._forget(cmd, key)
        return True

    def has_ready(self, boundary: Boundary, *, final: bool = False, paused: bool = False) -> bool:
        return any(_deliverable(item[-1], boundary, final, paused) for item in self._by_id.values())

    def drain(self) -> list[SteeringCommand]:
        """Remove and return everything still pending, in order."""
        out = self.pending()
        self._heap = None
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


def _age(cmd: SteeringCommand) -> tuple[datetime, str]:
    return (cmd.created_at, cmd.correlation_id)


def _rank(cmd: SteeringCommand) -> tuple[int, datetime, str]:
    """Smaller is stronger: higher priority, then older, then correlation id."""
    return (-int(cmd.priority), cmd.created_at, cmd.correlation_id)
