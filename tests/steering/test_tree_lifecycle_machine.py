"""A stateful hypothesis test of the command lifecycle across a run tree.

``test_lifecycle_machine`` drives one run at a time on a thread; this one grows a tree
(children and grandchildren started under live runs), sends commands from the test actor,
a human and the parent agents of the tree to runs and to children through their parents
(right and wrong ones), and interleaves boundaries, reports, runs ending in any order (a
parent before its children), ``rt.forget`` and the retention window. Invariants: every
requested command ends in exactly one terminal state and nothing follows it; a command id
seen once stays a duplicate (no event) after its run is forgotten or released; every
``steering.*`` event of a command with a run names that run's place in the tree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from steerkit import OPERATOR, start_run

from tinyagents.errors import ConfigurationError
from tinyagents.protocol import (
    Boundary,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunHandle, RunResult, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.testkit import EventRecorder

T = TypeVar("T")
K = SteeringKind
TERMINAL = {"rejected", "applied", "superseded", "failed"}
PAYLOADS: dict[SteeringKind, dict[str, Any]] = {
    K.ADD_INSTRUCTION: {"text": "more"},
    K.REPLACE_INSTRUCTION: {"text": "new goal"},
    K.CONSTRAIN_TOOLS: {"tools": ["search"]},
    K.UPDATE_BUDGET: {"max_model_calls": 5},
    K.PAUSE: {},
    K.RESUME: {},
    K.CANCEL: {},
    K.REQUEST_STATUS: {},
}


class TreeLifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.recorder = EventRecorder()
        self.rt = Runtime(testing=True, sinks=[self.recorder], max_queued=3, retain_finished=2)
        self.count = 0
        #: every run registered, by id: (parent id, root id); kept after release.
        self.place: dict[str, tuple[str | None, str]] = {}
        self.live: dict[str, RunHandle] = {}
        self.finished: list[str] = []
        self.delivered: list[tuple[RunHandle, SteeringCommand]] = []
        self.submitted: list[SteeringCommand] = []
        self.await_(self.rt.open())
        self.await_(self._start(None))

    def await_(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    async def _start(self, parent: str | None) -> None:
        run_id = f"r-{self.count}"
        self.count += 1
        handle = await start_run(
            self.rt,
            run_id,
            parent=parent,
            tools=["search", "fetch"],
            models=["m-1", "m-2"],
        )
        self.place[run_id] = (parent, handle.info.root_run_id)
        self.live[run_id] = handle

    async def _finish(self, handle: RunHandle, status: RunStatus) -> None:
        await self.rt.finish(handle, RunResult(run_id=handle.run_id, status=status))
        self.delivered = [(h, c) for h, c in self.delivered if h is not handle]
        self.live.pop(handle.run_id, None)
        self.finished.append(handle.run_id)

    # ------------------------------------------------------------------ rules

    @precondition(lambda self: bool(self.live) and self.count < 12)
    @rule(data=st.data())
    def start_child(self, data: st.DataObject) -> None:
        parent = data.draw(st.sampled_from(sorted(self.live)))
        self.await_(self._start(parent))

    @precondition(lambda self: not self.live)
    @rule()
    def start_root(self) -> None:
        self.await_(self._start(None))

    @rule(
        data=st.data(),
        kind=st.sampled_from(list(PAYLOADS)),
        actor=st.sampled_from(["test", "human", "parent"]),
        via_parent=st.sampled_from([None, "right", "wrong"]),
    )
    def submit(
        self, data: st.DataObject, kind: SteeringKind, actor: str, via_parent: str | None
    ) -> None:
        run_id = data.draw(st.sampled_from([*sorted(self.place), "r-missing"]))
        if actor == "test":
            sender: Any = SteeringActor.test()
        elif actor == "human":
            sender = OPERATOR
        else:
            sender = SteeringActor.parent_agent(
                data.draw(st.sampled_from(sorted(self.place))), "orchestrator"
            )
        parent = self.place.get(run_id, (None, run_id))[0]
        if via_parent == "right" and parent is not None:
            target: Any = SteeringTarget.subagent_run(parent, run_id)
        elif via_parent == "wrong":
            other = data.draw(st.sampled_from(sorted(self.place)))
            target = SteeringTarget.subagent_run(other, run_id)
        else:
            target = SteeringTarget.agent_run(run_id)
        cmd = SteeringCommand(target=target, actor=sender, kind=kind, payload=PAYLOADS[kind])
        receipt = self.await_(self.rt.submit(cmd))
        assert receipt.status is not ReceiptStatus.DUPLICATE
        self.submitted.append(cmd)

    @precondition(lambda self: bool(self.submitted))
    @rule(data=st.data())
    def resubmit_duplicate(self, data: st.DataObject) -> None:
        cmd = data.draw(st.sampled_from(self.submitted))
        before = len(self.recorder.events)
        receipt = self.await_(self.rt.submit(cmd))
        assert receipt.status is ReceiptStatus.DUPLICATE, (cmd, receipt)
        assert len(self.recorder.events) == before

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), boundary=st.sampled_from(list(Boundary)), final=st.booleans())
    def take(self, data: st.DataObject, boundary: Boundary, final: bool) -> None:
        handle = self.live[data.draw(st.sampled_from(sorted(self.live)))]
        for cmd in handle.inbox.take(boundary, final=final):
            self.delivered.append((handle, cmd))

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

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), status=st.sampled_from([RunStatus.COMPLETED, RunStatus.FAILED]))
    def run_finished(self, data: st.DataObject, status: RunStatus) -> None:
        handle = self.live[data.draw(st.sampled_from(sorted(self.live)))]
        self.await_(self._finish(handle, status))

    @precondition(lambda self: bool(self.place))
    @rule(data=st.data())
    def forget(self, data: st.DataObject) -> None:
        run_id = data.draw(st.sampled_from(sorted(self.place)))
        try:
            self.rt.forget(run_id)
        except ConfigurationError:
            return
        assert self.rt.runs.get(run_id) is None
        assert self.rt.steering_history(run_id) == []

    @rule()
    def release_finished(self) -> None:
        self.await_(self.rt.release_finished())

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
        assert set(states) == {c.correlation_id for c in self.submitted}

    @invariant()
    def events_name_the_run_tree_path(self) -> None:
        for event in self.recorder.steering():
            if event.run_id is None:
                continue
            parent, root = self.place[event.run_id]
            assert (event.parent_run_id, event.root_run_id) == (parent, root), event

    @invariant()
    def live_runs_stay_registered(self) -> None:
        for run_id in self.live:
            assert self.rt.runs.get(run_id) is self.live[run_id]

    # ------------------------------------------------------------------ teardown

    def teardown(self) -> None:
        try:
            for handle, cmd in self.delivered:
                handle.inbox.applied(cmd)
            self.delivered.clear()
            for handle in list(self.live.values()):
                self.await_(self._finish(handle, RunStatus.COMPLETED))
            self.recorder.assert_every_command_terminal()
            assert self.rt.router.open_commands() == []
        finally:
            try:
                self.await_(self.rt.close())
            finally:
                self.loop.close()


TreeLifecycle.TestCase.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
TestTreeLifecycle = TreeLifecycle.TestCase
