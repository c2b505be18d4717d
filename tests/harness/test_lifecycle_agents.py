"""A stateful test of the command lifecycle over real agent loops.

Runs and sub-runs of a ``FunctionModel`` agent step when the test says so (a tool call or a
final reply); commands of every kind, priority and delivery, from several senders (some
sharing a correlation id, a foreign tenant's human among them), go to them while they run,
after they finished and after they were forgotten; bursts are submitted concurrently; runs
are paused, resumed, cancelled, forgotten, released by the window, and their ids reused.
Invariant: every requested command ends once, with nothing after it, receipts agree with
the events, and a resend is answered ``duplicate`` with no event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tinyagents import Agent, Runtime, tool
from tinyagents.errors import TinyAgentsError
from tinyagents.protocol import (
    CommandState,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.protocol.commands import dedupe_scope
from tinyagents.runs import RunHandle
from tinyagents.testkit import EventRecorder, FunctionModel, reply, tool_call

T = TypeVar("T")
K = SteeringKind
TERMINAL = {state.value for state in CommandState if state.terminal}
PAYLOADS: dict[SteeringKind, list[dict[str, Any]]] = {
    K.ADD_INSTRUCTION: [{"text": "more"}],
    K.REPLACE_INSTRUCTION: [{"text": "new goal"}],
    K.ASK_CLARIFYING_QUESTION: [{"question": "why?"}],
    K.PROVIDE_CONTEXT: [{"text": "ctx"}, {"value": 3}],
    K.CONSTRAIN_TOOLS: [{"tools": ["noop"]}, {"tools": []}, {"tools": ["other"]}],
    K.CONSTRAIN_MODEL: [{"models": ["m1"]}],
    K.PAUSE: [{}],
    K.RESUME: [{}],
    K.CANCEL: [{}, {"reason": "x"}, {"abort": True}],
    K.APPROVE: [{}],
    K.REJECT: [{}],
    K.REDIRECT: [{"goto": "n"}, {"instruction": "go"}],
    K.REQUEST_STATUS: [{}],
    K.UPDATE_BUDGET: [{"max_model_calls": 3}, {"max_tool_calls": 100}],
    K.UPDATE_STATE: [{"update": {"a": 1}}],
}


@tool
async def noop() -> str:
    """Does nothing."""
    return "ok"


class AgentSteering(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.recorder = EventRecorder()
        self.rt = Runtime(testing=True, sinks=[self.recorder], retain_finished=2)
        self.gates: dict[str, asyncio.Queue[str]] = {}
        self.handles: list[RunHandle] = []
        self.forgotten: set[str] = set()
        self.receipts: dict[tuple[str, str], ReceiptStatus] = {}
        self.submitted: dict[tuple[str, str], SteeringCommand] = {}
        self.n = 0
        self.await_(self.rt.open())

    def await_(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def settle(self) -> None:
        async def spin() -> None:
            for _ in range(30):
                await asyncio.sleep(0)

        self.await_(spin())

    async def _model(self, request: Any) -> Any:
        gate = self.gates.setdefault(request.run_id, asyncio.Queue())
        what = await gate.get()
        if what == "tool" and request.tools:
            return tool_call(request.tools[0].name)
        return reply("done")

    def _agent(self) -> Agent:
        return Agent("a", model=FunctionModel(self._model), tools=[noop])

    @rule(child=st.booleans(), data=st.data())
    def start(self, child: bool, data: st.DataObject) -> None:
        live = [h for h in self.handles if not h.status.finished]
        parent = data.draw(st.sampled_from(live)) if child and live else None
        self.n += 1
        try:
            handle = self.await_(
                self.rt.start(self._agent(), "go", parent=parent, run_id=f"r{self.n}")
            )
        except TinyAgentsError:
            return
        self.handles.append(handle)
        self.settle()

    @precondition(lambda self: bool(self.handles))
    @rule(data=st.data(), what=st.sampled_from(["tool", "reply"]))
    def step(self, data: st.DataObject, what: str) -> None:
        handle = data.draw(st.sampled_from(self.handles))
        self.gates.setdefault(handle.run_id, asyncio.Queue()).put_nowait(what)
        self.settle()

    @precondition(lambda self: bool(self.handles))
    @rule(
        data=st.data(),
        kind=st.sampled_from(list(PAYLOADS)),
        priority=st.sampled_from(list(SteeringPriority)),
        delivery=st.sampled_from(list(SteeringDelivery)),
        actor=st.sampled_from(["test", "human", "parent", "mw", "foreign"]),
        cid=st.sampled_from([None, "c1", "c2", "c3"]),
        sub=st.booleans(),
    )
    def submit(
        self,
        data: st.DataObject,
        kind: SteeringKind,
        priority: SteeringPriority,
        delivery: SteeringDelivery,
        actor: str,
        cid: str | None,
        sub: bool,
    ) -> None:
        handle = data.draw(st.sampled_from(self.handles))
        payload = data.draw(st.sampled_from(PAYLOADS[kind]))
        if delivery is SteeringDelivery.IMMEDIATE and kind is not K.CANCEL:
            delivery = SteeringDelivery.NEXT_BOUNDARY
        info = handle.info
        if actor == "parent" and info.parent_run_id:
            a = SteeringActor.parent_agent(info.parent_run_id, "a")
        elif actor == "human":
            a = SteeringActor.human("u", tenant_id="default", scopes=["agent:control"])
        elif actor == "foreign":
            a = SteeringActor.human("v", tenant_id="other", scopes=["agent:control"])
        elif actor == "mw":
            a = SteeringActor.middleware("mw", run_id=info.run_id)
        else:
            a = SteeringActor.test()
        if sub and info.parent_run_id:
            target = SteeringTarget.subagent_run(info.parent_run_id, info.run_id)
        else:
            target = SteeringTarget.agent_run(info.run_id)
        fields: dict[str, Any] = {}
        if cid is not None:
            fields["correlation_id"] = cid
        cmd = SteeringCommand(
            target=target,
            actor=a,
            kind=kind,
            payload=payload,
            priority=priority,
            delivery=delivery,
            **fields,
        )
        key = (dedupe_scope(a), cmd.correlation_id)
        before = len(self.recorder.events)
        receipt = self.await_(self.rt.submit(cmd))
        if key in self.submitted:
            assert receipt.status is ReceiptStatus.DUPLICATE, (key, receipt)
            assert len(self.recorder.events) == before
        else:
            assert receipt.status is not ReceiptStatus.DUPLICATE, (key, receipt)
            self.submitted[key] = cmd
            self.receipts[key] = receipt.status
        self.settle()

    @precondition(lambda self: bool(self.handles))
    @rule(data=st.data(), op=st.sampled_from(["pause", "resume", "cancel", "steer"]))
    def handle_op(self, data: st.DataObject, op: str) -> None:
        handle = data.draw(st.sampled_from(self.handles))
        try:
            if op == "steer":
                self.await_(handle.steer("hi"))
            else:
                self.await_(getattr(handle, op)())
        except TinyAgentsError:
            return
        self.settle()

    @precondition(lambda self: any(h.status.finished for h in self.handles))
    @rule(data=st.data())
    def forget(self, data: st.DataObject) -> None:
        handle = data.draw(st.sampled_from([h for h in self.handles if h.status.finished]))
        try:
            self.rt.forget(handle.run_id)
        except TinyAgentsError:
            return
        for h in self.handles:
            if self.rt.runs.get(h.run_id) is None:
                self.forgotten.add(h.run_id)
        self.settle()

    @precondition(lambda self: bool(self.forgotten))
    @rule(data=st.data())
    def reuse_forgotten_id(self, data: st.DataObject) -> None:
        run_id = data.draw(st.sampled_from(sorted(self.forgotten)))
        self.forgotten.discard(run_id)
        self.gates.pop(run_id, None)
        try:
            handle = self.await_(self.rt.start(self._agent(), "go", run_id=run_id, thread_id="t"))
        except TinyAgentsError:
            return
        self.handles = [h for h in self.handles if h.run_id != run_id] + [handle]
        self.settle()

    @precondition(lambda self: bool(self.handles))
    @rule(data=st.data(), n=st.integers(2, 6), what=st.sampled_from(["tool", "reply"]))
    def burst(self, data: st.DataObject, n: int, what: str) -> None:
        handle = data.draw(st.sampled_from(self.handles))
        kinds = data.draw(st.lists(st.sampled_from(list(PAYLOADS)), min_size=n, max_size=n))
        cmds = []
        for kind in kinds:
            cmds.append(
                SteeringCommand(
                    target=SteeringTarget.thread("t")
                    if data.draw(st.booleans())
                    else SteeringTarget.agent_run(handle.run_id),
                    actor=SteeringActor.test(),
                    kind=kind,
                    payload=PAYLOADS[kind][0],
                    delivery=data.draw(st.sampled_from(list(SteeringDelivery)))
                    if kind is K.CANCEL
                    else SteeringDelivery.END_OF_TURN,
                )
            )

        async def go() -> list[Any]:
            self.gates.setdefault(handle.run_id, asyncio.Queue()).put_nowait(what)
            return await asyncio.gather(*(self.rt.submit(c) for c in cmds))

        for c, r in zip(cmds, self.await_(go()), strict=True):
            key = (dedupe_scope(c.actor), c.correlation_id)
            self.submitted[key] = c
            self.receipts[key] = r.status
        self.settle()

    @rule()
    def release(self) -> None:
        self.await_(self.rt.release_finished())

    @invariant()
    def events_agree(self) -> None:
        states: dict[str, list[str]] = {}
        for event in self.recorder.steering():
            key = f"{dedupe_scope(event.actor)}|{event.correlation_id}"
            states.setdefault(key, []).append(event.type.removeprefix("steering."))
        for key, seen in states.items():
            ends = [i for i, s in enumerate(seen) if s in TERMINAL]
            assert len(ends) <= 1, f"{key}: {seen}"
            assert not ends or ends[0] == len(seen) - 1, f"{key}: after terminal: {seen}"
            assert seen[0] == "requested", f"{key}: {seen}"
        for key, status in self.receipts.items():
            seen = states.get(f"{key[0]}|{key[1]}", [])
            if status is ReceiptStatus.ACCEPTED:
                assert "accepted" in seen, (key, seen)
            elif status is ReceiptStatus.REJECTED:
                assert seen[-1] == "rejected", (key, seen)

    def teardown(self) -> None:
        try:
            for gate in self.gates.values():
                for _ in range(50):
                    gate.put_nowait("reply")
            self.await_(self.rt.close())
            self.recorder.assert_every_command_terminal()
            assert self.rt.router.open_commands() == []
        finally:
            self.loop.close()


AgentSteering.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestAgentSteering = AgentSteering.TestCase
