"""The asyncio tasks of one parallel superstep, joined with a bounded wait for cancellations.

A step of several tasks (or any step of a runtime-managed run) runs each in an asyncio task
and waits for them all, as an ``asyncio.TaskGroup`` does: the first that fails cancels the
others. A TaskGroup then waits for every cancelled task to end, and a node whose cancellation
never finishes (it catches every ``CancelledError``, or awaits for ever in ``finally``) held
the step, and its run, for ever. Here a task cancelled by its step (a sibling failed, a
steering cancel stopped it, or the step's own task was cancelled) that has not ended
``CANCEL_GRACE_S`` after its cancel is left behind: cancelled once more, kept (asyncio keeps
only weak references) and logged, as the harness leaves a tool's task behind
(``harness.loop.AgentRun._watch_tool``). The step goes on without it; whatever the task
does if it ever ends changes nothing (``GraphRun`` ignores it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from tinyagents.harness import loop as harness_loop
from tinyagents.harness.loop import let_go

if TYPE_CHECKING:
    from tinyagents.graph.tasks import Task

_log = logging.getLogger("tinyagents.graph")


class StepTasks:
    """The running tasks of one step: ``start`` each, then ``join``. ``cancel`` (one) and
    ``cancel_all`` may be called meanwhile; each cancel given a grace (``CANCEL_GRACE_S``)
    ends in the task's end or in the task left behind (``on_left``). ``own_cancel_grace``:
    whether a cancel of the task that joins gives the tasks it cancels a grace too (a
    runtime-managed run's task is cancelled only by ``Runtime.close``, which has its own)."""

    __slots__ = (
        "_deadlines",
        "_errors",
        "_left",
        "_loop",
        "_waiter",
        "children",
        "left",
        "on_left",
        "own_cancel_grace",
        "timed_out",
    )

    def __init__(self, *, own_cancel_grace: bool, on_left: Callable[[Task], None]) -> None:
        self.children: dict[asyncio.Task[None], Task] = {}
        self.own_cancel_grace = own_cancel_grace
        self.on_left = on_left
        #: the tasks left behind, each with the words that say so (for the run's error)
        self.left: dict[Task, str] = {}
        #: cancelled with a grace: asyncio task -> the loop time it is left behind at
        self._deadlines: dict[asyncio.Task[None], float] = {}
        self._left = 0  # children not ended (nor left behind)
        #: what the children raised, as they ended: one raised, the others are cancelled
        self._errors: list[tuple[int, BaseException]] = []
        self._waiter: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()
        #: the step's deadline (``join``) passed with tasks unfinished: they were cancelled
        self.timed_out = False

    def now(self) -> float:
        """The event loop's clock, which ``join``'s deadline is on."""
        return self._loop.time()

    def start(self, task: Task, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        child = self._loop.create_task(coro)
        self.children[child] = task
        self._left += 1
        child.add_done_callback(self._ended)
        return child

    def _ended(self, child: asyncio.Task[None]) -> None:
        task = self.children.get(child)
        if task is None:  # left behind: it changes nothing
            return
        self._left -= 1
        error = None if child.cancelled() else child.exception()
        if error is not None:
            self._errors.append((task.index, error))
        if self._left == 0 or error is not None or child in self._deadlines:
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def cancel(self, child: asyncio.Task[None], *, grace: bool = True) -> None:
        """Cancel ``child``; with ``grace`` it is left behind if it has not ended
        ``CANCEL_GRACE_S`` from now."""
        if child.done() or child in self._deadlines:
            return
        child.cancel()
        if grace:
            self._deadlines[child] = self._loop.time() + harness_loop.CANCEL_GRACE_S
            self._wake()  # the join's wait now has a deadline

    def cancel_all(self, *, grace: bool = True) -> None:
        for child in self.children:
            self.cancel(child, grace=grace)

    async def join(self, deadline: float | None = None) -> list[BaseException]:
        """Wait for every task to end (or be left behind); the errors they raised, in their
        tasks' order. A cancel of the task that joins cancels them all, is waited through and
        raised at the end, as a TaskGroup does. At ``deadline`` (``now()``'s clock; the
        graph's ``step_timeout``) the tasks not ended are cancelled and ``timed_out`` set."""
        loop = self._loop
        cancelled: asyncio.CancelledError | None = None
        while self._left:
            if self._errors:
                self.cancel_all()
            timeout = None
            if deadline is not None and not self.timed_out:
                timeout = deadline - loop.time()
                if timeout <= 0:
                    self.timed_out = True
                    self.cancel_all()
                    continue
            if self._deadlines:
                now = loop.time()
                due = [c for c, t in self._deadlines.items() if t <= now and not c.done()]
                if due:
                    self._leave(due)
                    continue
                waiting = [t - now for c, t in self._deadlines.items() if not c.done()]
                if waiting:
                    timeout = min(waiting) if timeout is None else min(timeout, *waiting)
            waiter = self._waiter = loop.create_future()
            timer = None if timeout is None else loop.call_later(timeout, self._wake)
            try:
                await waiter
            except asyncio.CancelledError as exc:
                if cancelled is None:
                    cancelled = exc
                    self.cancel_all(grace=self.own_cancel_grace)
                # a second cancel while the tasks end: still waited for, as a TaskGroup does
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        if cancelled is not None:
            raise cancelled
        if not self._errors:
            return []
        return [error for _, error in sorted(self._errors, key=lambda e: e[0])]

    def _leave(self, children: list[asyncio.Task[None]]) -> None:
        grace = harness_loop.CANCEL_GRACE_S
        for child in children:
            task = self.children.pop(child)
            self._left -= 1
            name = f"node {task.node!r} (task {task.id})"
            self.left[task] = (
                f"{name} was being cancelled and did not finish within {grace:g} s: the step "
                "ended without it, its task abandoned"
            )
            _log.error(
                "%s was being cancelled and did not finish within %g s: the step ended "
                "without it, its task left behind (%r)",
                name,
                grace,
                child,
            )
            self.on_left(task)
            let_go(child)


__all__ = ["StepTasks"]
