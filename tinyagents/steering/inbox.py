"""``Inbox``: the execution layer's side of one run's steering queue.

The agent loop (or graph executor) calls ``take(boundary)`` at each safe boundary, applies what
it got, and reports back with ``applied`` / ``failed``. Every report becomes a ``steering.*``
event through the router, which keeps the exactly-one-terminal-state bookkeeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from tinyagents import _clock
from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import SteeringCommand, SteeringKind
from tinyagents.steering.conflicts import RedirectConflict
from tinyagents.steering.queue import PutOutcome, SteeringQueue

LATE = "target finished before delivery"
#: How many commands a run's queue holds, waiting for its next boundary, before it refuses
#: more (``Runtime(max_queued=...)``): a run that reaches no boundary (paused, or in a long
#: tool call) would otherwise keep every command sent to it in memory.
DEFAULT_MAX_QUEUED = 1000


class Reports(Protocol):
    """Where an inbox reports what became of its commands (the router, which emits the
    ``steering.*`` events and keeps the exactly-one-terminal-state bookkeeping)."""

    def mark_delivered(
        self,
        cmd: SteeringCommand,
        boundary: Boundary,
        where: dict[str, Any],
        at: datetime | None = None,
    ) -> None: ...

    def mark_applied(self, cmd: SteeringCommand, affected: dict[str, Any]) -> None: ...

    def mark_failed(self, cmd: SteeringCommand, reason: str) -> None: ...

    def mark_superseded(self, cmd: SteeringCommand, by: str) -> None: ...

    def mark_withdrawn(self, cmd: SteeringCommand, reason: str, by: str | None) -> None: ...


class Inbox:
    """One run's queue. ``depth`` is the run's depth in its tree (the queue orders commands of
    equal priority by it); ``wake`` nudges the run's execution layer when a command arrives
    (None: whoever puts commands nudges it; the router does, and so holds no bound method
    per run)."""

    def __init__(
        self,
        router: Reports,
        *,
        depth: int,
        wake: Callable[[], None] | None = None,
        redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED,
        max_queued: int = DEFAULT_MAX_QUEUED,
    ) -> None:
        self.queue = SteeringQueue(redirect_conflict=redirect_conflict)
        self.max_queued = max_queued
        self.paused = False
        self._router = router
        self._depth = depth
        self._wake = wake
        #: A command was queued since the signal was last cleared. The event a parked run waits
        #: on is made by its first ``wait``: most runs never park, and a runtime may hold
        #: thousands of them.
        self._signalled = False
        self._signal: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self.queue)

    def conflict(self, cmd: SteeringCommand, key: tuple[str, str] | None = None) -> str | None:
        """Why the queue would refuse ``cmd`` outright, or None (see ``SteeringQueue.conflict``),
        or refuses it for room: a queue holds at most ``max_queued`` commands that wait for
        the run's next boundary. A cancel is taken beyond that, up to twice as many (it
        supersedes what it ends, and a run must stay stoppable). ``key``: ``cmd``'s (sender's
        scope, correlation id), when the caller has it (``SteeringQueue.conflict``)."""
        queue = self.queue
        refused = queue.conflict(cmd, key)
        if refused is None and len(queue) >= self.max_queued:
            waiting = len(self.queue)
            if cmd.kind is not SteeringKind.CANCEL or waiting >= 2 * self.max_queued:
                return (
                    f"the run's queue is full: {waiting} commands wait for its next boundary "
                    f"(max_queued={self.max_queued}); send this once it has taken them, or "
                    "cancel the run"
                )
        return refused

    def put(self, cmd: SteeringCommand, key: tuple[str, str] | None = None) -> PutOutcome:
        outcome = self.queue.put_nowait(cmd, self._depth, key)
        if outcome.queued:
            self._signalled = True
            if self._signal is not None:
                self._signal.set()
            if self._wake is not None:
                self._wake()
        return outcome

    def take(
        self, boundary: Boundary, *, final: bool = False, **where: Any
    ) -> list[SteeringCommand]:
        """Pop what is deliverable at ``boundary`` and mark it delivered (``where`` names the
        model request / tool call the boundary is attached to, for the event)."""
        if not len(self.queue):
            return []
        for loser, winner in self.queue.settle():
            self._router.mark_superseded(loser, winner)
        cmds = self.queue.pop_ready(boundary, final=final, paused=self.paused)
        if cmds:
            # One boundary, one moment: every command taken here is delivered at the same
            # time (one clock reading, not one per command; the offsets order the events).
            at = _clock.now()
            for cmd in cmds:
                self._router.mark_delivered(cmd, boundary, where, at)
        return cmds

    def has_ready(self, boundary: Boundary, *, final: bool = False) -> bool:
        return self.queue.has_ready(boundary, final=final, paused=self.paused)

    def applied(self, cmd: SteeringCommand, **affected: Any) -> None:
        self._router.mark_applied(cmd, affected)

    def failed(self, cmd: SteeringCommand, reason: str) -> None:
        self._router.mark_failed(cmd, reason)

    def superseded(self, cmd: SteeringCommand, by: str) -> None:
        """``cmd`` was delivered, and a cancel (correlation id ``by``) ended its target
        before it was applied."""
        self._router.mark_superseded(cmd, by)

    def withdraw(self, cmd: SteeringCommand, reason: str, *, by: str | None = None) -> bool:
        """Take back ``cmd`` if it is still queued (not delivered): it ends ``superseded``
        with ``reason`` (``superseded_by`` names ``by``, the command that made it moot, when
        there is one). Whether it was still queued; one delivered or ended is left alone."""
        if not self.queue.remove(cmd):
            return False
        self._router.mark_withdrawn(cmd, reason, by)
        return True

    async def wait(self) -> None:
        """Wait until a command is queued (used while paused)."""
        if not self._signalled:
            if self._signal is None:
                self._signal = asyncio.Event()
            await self._signal.wait()
        self.clear_signal()

    def clear_signal(self) -> None:
        self._signalled = False
        if self._signal is not None:
            self._signal.clear()

    def close(self, reason: str = LATE) -> None:
        """The run will reach no more boundaries: fail whatever is still pending."""
        for cmd in self.queue.drain():
            self._router.mark_failed(cmd, reason)
