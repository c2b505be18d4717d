"""``Inbox``: the execution layer's side of one run's steering queue.

The agent loop (or graph executor) calls ``take(boundary)`` at each safe boundary, applies what
it got, and reports back with ``applied`` / ``failed``. Every report becomes a ``steering.*``
event through the router, which keeps the exactly-one-terminal-state bookkeeping.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import SteeringCommand
from tinyagents.steering.conflicts import RedirectConflict
from tinyagents.steering.queue import PutOutcome, SteeringQueue

if TYPE_CHECKING:
    from tinyagents.runs.handle import RunHandle
    from tinyagents.steering.router import SteeringRouter

LATE = "target finished before delivery"


class Inbox:
    def __init__(
        self,
        router: SteeringRouter,
        handle: RunHandle,
        *,
        redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED,
    ) -> None:
        self.queue = SteeringQueue(redirect_conflict=redirect_conflict)
        self.paused = False
        self._router = router
        self._handle = handle
        #: A command was queued since the signal was last cleared. The event a parked run waits
        #: on is made by its first ``wait``: most runs never park, and a runtime may hold
        #: thousands of them.
        self._signalled = False
        self._signal: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self.queue)

    def conflict(self, cmd: SteeringCommand) -> str | None:
        """Why the queue would refuse ``cmd`` outright, or None (see ``SteeringQueue.conflict``)."""
        return self.queue.conflict(cmd)

    def put(self, cmd: SteeringCommand) -> PutOutcome:
        outcome = self.queue.put_nowait(cmd, self._handle.info.depth)
        if outcome.queued:
            self._signalled = True
            if self._signal is not None:
                self._signal.set()
            self._handle.driver.wake()
        return outcome

    def take(
        self, boundary: Boundary, *, final: bool = False, **where: Any
    ) -> list[SteeringCommand]:
        """Pop what is deliverable at ``boundary`` and mark it delivered (``where`` names the
        model request / tool call the boundary is attached to, for the event)."""
        if not len(self.queue):
            return []
        cmds = self.queue.pop_ready(boundary, final=final, paused=self.paused)
        for cmd in cmds:
            self._router.mark_delivered(cmd, boundary, where)
        return cmds

    def has_ready(self, boundary: Boundary, *, final: bool = False) -> bool:
        return self.queue.has_ready(boundary, final=final, paused=self.paused)

    def applied(self, cmd: SteeringCommand, **affected: Any) -> None:
        self._router.mark_applied(cmd, affected)

    def failed(self, cmd: SteeringCommand, reason: str) -> None:
        self._router.mark_failed(cmd, reason)

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
