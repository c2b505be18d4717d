"""A stateful hypothesis test of the command lifecycle.

Interleaves submit (to the live run, a task of it, its thread, a finished run or a missing one; duplicates
too), take at any boundary, apply / fail, pause / resume / cancel, deferral by a policy, and
runs finishing and starting on one thread, with queues small enough to fill (a run's, and
what waits for the thread). Invariant: every requested command ends in exactly
one terminal state, and no event is emitted for it after that.

The async API is driven from sync rules on a dedicated event loop, closed at teardown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from steerkit import start_run

from tinyagents.protocol import (
    Boundary,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.runs import RunHandle, RunResult, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.steering import CallNext, Decision, PolicyContext
from tinyagents.testkit import EventRecorder

T = TypeVar("T")
K = SteeringKind
TERMINAL = {"rejected", "applied", "superseded", "failed"}
THREAD = "t-1"
#: Small enough that a run's queue (and what waits for its thread) fills within a few steps.
MAX_QUEUED = 2
PAYLOADS: dict[SteeringKind, dict[str, Any]] = {
    K.ADD_INSTRUCTION: {"text": "more"},
    K.REPLACE_INSTRUCTION: {"text": "new goal"},
    K.CONSTRAIN_TOOLS: {"tools": ["search"]},
    K.REDIRECT: {"goto": "n"},
    K.PAUSE: {},
    K.RESUME: {},
    K.CANCEL: {},
    K.REQUEST_STATUS: {},
}
DELIVERIES = [d for d in SteeringDelivery if d is not SteeringDelivery.IMMEDIATE]


class HoldLowPriority:
    """Defers LOW-priority commands while ``holding`` (exercises deferral and re-evaluation)."""

    policy_id = "hold-low"

    def __init__(self) -> None:
        self.holding = False

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        if self.holding and cmd.priority is SteeringPriority.LOW:
            return Decision.defer(cmd, "held", self.policy_id)
        return await call_next(cmd)


class SteeringLifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.recorder = EventRecorder()
        self.hold = HoldLowPriority()
        self.rt = Runtime(testing=True, sinks=[self.recorder], max_queued=MAX_QUEUED)
        self.rt.router.pipeline.insert(self.hold, after="authority")
        self.runs = 0
        self.live: RunHandle | None = None
        self.finished: list[RunHandle] = []
        self.delivered: list[tuple[RunHandle, SteeringCommand]] = []
        self.submitted: list[SteeringCommand] = []
        self.await_(self.rt.open())
        self.await_(self._start())

    def await_(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    async def _start(self) -> None:
        self.live = await start_run(self.rt, f"r-{self.runs}", thread_id=THREAD, tools=["search"])
        self.runs += 1

    async def _finish(self, handle: RunHandle, status: RunStatus) -> None:
        await self.rt.finish(handle, RunResult(run_id=handle.run_id, status=status))
        # The router failed whatever that run still held, delivered or not.
        self.delivered = [(h, c) for h, c in self.delivered if h is not handle]
        self.finished.append(handle)
        self.live = None

    # ------------------------------------------------------------------ rules

    @rule(
        kind=st.sampled_from(list(PAYLOADS)),
        priority=st.sampled_from(list(SteeringPriority)),
        delivery=st.sampled_from(DELIVERIES),
        immediate=st.booleans(),
        where=st.sampled_from(["live"] * 5 + ["task", "thread", "finished", "missing"]),
    )
    def submit(
        self,
        kind: SteeringKind,
        priority: SteeringPriority,
        delivery: SteeringDelivery,
        immediate: bool,
        where: str,
    ) -> None:
        if kind is K.CANCEL and immediate:
            delivery = SteeringDelivery.IMMEDIATE
        if where == "live" and self.live is not None:
            target = SteeringTarget.agent_run(self.live.run_id)
        elif where == "task" and self.live is not None:
            target = SteeringTarget.graph_task(self.live.run_id, "t-1")
        elif where == "finished" and self.finished:
            target = SteeringTarget.agent_run(self.finished[-1].run_id)
        elif where == "missing":
            target = SteeringTarget.agent_run("r-missing")
        else:  # the thread: its live run, or the next one to start
            target = SteeringTarget.thread(THREAD)
        cmd = SteeringCommand(
            target=target,
            actor=SteeringActor.test(),
            kind=kind,
            payload=PAYLOADS[kind],
            priority=priority,
            delivery=delivery,
        )
        receipt = self.await_(self.rt.submit(cmd))
        assert receipt.status is not ReceiptStatus.DUPLICATE
        self.submitted.append(cmd)

    @precondition(lambda self: bool(self.submitted))
    @rule(data=st.data())
    def resubmit_duplicate(self, data: st.DataObject) -> None:
        cmd = data.draw(st.sampled_from(self.submitted))
        before = len(self.recorder.events)
        receipt = self.await_(self.rt.submit(cmd))
        assert receipt.status is ReceiptStatus.DUPLICATE
        assert len(self.recorder.events) == before

    @precondition(lambda self: self.live is not None)
    @rule(boundary=st.sampled_from(list(Boundary)), final=st.booleans())
    def take(self, boundary: Boundary, final: bool) -> None:
        assert self.live is not None
        for cmd in self.live.inbox.take(boundary, final=final):
            self.delivered.append((self.live, cmd))

    @precondition(lambda self: bool(self.delivered))
    @rule(data=st.data(), ok=st.booleans())
    def report(self, data: st.DataObject, ok: bool) -> None:
        handle, cmd = self.delivered.pop(data.draw(st.integers(0, len(self.delivered) - 1)))
        if not ok:
            handle.inbox.failed(cmd, "could not apply")
            return
        handle.inbox.applied(cmd)
        if cmd.kind is K.PAUSE:
            handle.inbox.paused = True
        elif cmd.kind is K.RESUME:
            handle.inbox.paused = False
        elif cmd.kind is K.CANCEL:
            self.await_(self._finish(handle, RunStatus.CANCELLED))

    @rule()
    def toggle_hold(self) -> None:
        self.hold.holding = not self.hold.holding
        if self.live is not None:
            self.await_(self.rt.router.target_changed(self.live))

    @precondition(lambda self: self.live is not None)
    @rule(status=st.sampled_from([RunStatus.COMPLETED, RunStatus.FAILED]))
    def run_finished(self, status: RunStatus) -> None:
        assert self.live is not None
        self.await_(self._finish(self.live, status))

    @precondition(lambda self: self.live is None)
    @rule()
    def next_run_on_the_thread(self) -> None:
        self.await_(self._start())

    # ------------------------------------------------------------------ invariants

    @invariant()
    def books_agree_with_the_events(self) -> None:
        states: dict[str, list[str]] = {}
        for event in self.recorder.steering():
            states.setdefault(event.correlation_id, []).append(event.type.removeprefix("steering."))
        open_ids = set()
        for cid, seen in states.items():
            ends = [i for i, s in enumerate(seen) if s in TERMINAL]
            assert len(ends) <= 1, f"{cid}: {seen}"
            assert not ends or ends[0] == len(seen) - 1, f"{cid}: event after terminal: {seen}"
            assert seen[0] == "requested", f"{cid}: {seen}"
            state = self.rt.router.state(cid)
            assert state == seen[-1], f"{cid}: router says {state}, events say {seen}"
            if not ends:
                open_ids.add(cid)
        assert {c.correlation_id for c in self.rt.router.open_commands()} == open_ids
        assert open_ids | {cid for cid, s in states.items() if s[-1] in TERMINAL} == {
            c.correlation_id for c in self.submitted
        }

    @invariant()
    def queued_commands_are_accepted(self) -> None:
        if self.live is not None:
            for cmd in self.live.inbox.queue.pending():
                assert self.rt.router.state(cmd.correlation_id) == "accepted"

    # ------------------------------------------------------------------ teardown

    def teardown(self) -> None:
        try:
            self._settle()
            self.recorder.assert_every_command_terminal()
            for cmd in self.submitted:
                assert self.recorder.terminal_state(cmd.correlation_id) is not None, cmd
            assert self.rt.router.open_commands() == []
        finally:
            try:
                self.await_(self.rt.close())
            finally:
                self.loop.close()

    def _settle(self) -> None:
        """Let everything reach its end: report what was delivered, end the live run, and give
        commands still waiting for the thread one last run."""
        self.hold.holding = False
        for handle, cmd in self.delivered:
            handle.inbox.applied(cmd)
        self.delivered.clear()
        if self.live is not None:
            self.await_(self._finish(self.live, RunStatus.COMPLETED))
        if self.rt.router.open_commands():
            self.await_(self._start())
            assert self.live is not None
            self.await_(self._finish(self.live, RunStatus.COMPLETED))


SteeringLifecycle.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
TestSteeringLifecycle = SteeringLifecycle.TestCase
