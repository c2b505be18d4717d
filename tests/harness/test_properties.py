"""Property: whatever steering is thrown at a scripted run, and whenever, every command ends in
exactly one terminal state and the run ends in a valid final status.

The schedule is drawn by hypothesis: each command has a kind (payload), a delivery class, a
priority, an actor and a submit point — inside model call ``i``, inside tool call ``i``,
while the run is paused, or after it ended. Commands are submitted from inside the scripted
model and tool themselves, so a schedule replays identically (fake clock, sequential ids).
Commands whose point never comes (the run stopped first) are submitted after it ended.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyagents import Agent, RunLimits, RunStatus, Runtime, tool
from tinyagents.harness import ModelRequest, ModelResponse
from tinyagents.protocol import (
    MESSAGE_KINDS,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FakeClock,
    FunctionModel,
    SequentialIds,
    reply,
    tool_call,
    use_clock,
    use_ids,
)

TURNS = 3
ACTORS = {
    "operator": SteeringActor.human("alice", scopes=["agent:control"]),
    "test": SteeringActor.test(),
    "foreign": SteeringActor.human("mallory", tenant_id="other", scopes=["agent:control"]),
    "unscoped": SteeringActor.human("bob"),
}
POINTS = (
    [("model", i) for i in range(TURNS + 2)]
    + [("tool", i) for i in range(TURNS)]
    + [("paused", 0), ("after", 0)]
)
VALID_ENDINGS = {RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.LIMIT_EXCEEDED}


@dataclass(frozen=True)
class Planned:
    kind: SteeringKind
    payload: dict[str, Any]
    delivery: SteeringDelivery
    priority: SteeringPriority
    actor: str
    point: tuple[str, int]
    resend: bool  # submit it a second time with the same correlation id


def payloads(kind: SteeringKind) -> st.SearchStrategy[dict[str, Any]]:
    text = st.sampled_from(["focus on billing", "be brief", "check refunds </steering>"])
    return {
        SteeringKind.ADD_INSTRUCTION: st.builds(lambda t: {"text": t}, text),
        SteeringKind.REPLACE_INSTRUCTION: st.builds(lambda t: {"text": t}, text),
        SteeringKind.ASK_CLARIFYING_QUESTION: st.builds(lambda t: {"question": t}, text),
        SteeringKind.PROVIDE_CONTEXT: st.one_of(
            st.builds(lambda t: {"text": t, "source": "wiki"}, text),
            st.just({"value": 42}),  # rendered as its repr
        ),
        SteeringKind.CONSTRAIN_TOOLS: st.builds(
            lambda ts: {"tools": ts},
            st.lists(st.sampled_from(["step", "aux", "shell"]), max_size=3, unique=True),
        ),
        SteeringKind.CONSTRAIN_MODEL: st.builds(
            lambda ms: {"models": ms},
            st.lists(st.sampled_from(["m-large", "m-small", "m-other"]), min_size=1, unique=True),
        ),
        SteeringKind.PAUSE: st.just({}),
        SteeringKind.RESUME: st.just({}),
        SteeringKind.CANCEL: st.just({"reason": "drawn"}),
        SteeringKind.APPROVE: st.just({}),
        SteeringKind.REJECT: st.just({"reason": "no"}),
        SteeringKind.REDIRECT: st.one_of(
            st.builds(lambda t: {"instruction": t}, text), st.just({"goto": "review"})
        ),
        SteeringKind.REQUEST_STATUS: st.just({}),
        SteeringKind.UPDATE_BUDGET: st.one_of(
            st.builds(lambda n: {"max_model_calls": n}, st.integers(1, 12)),
            st.builds(lambda n: {"max_tool_calls": n}, st.integers(1, 6)),
        ),
        SteeringKind.UPDATE_STATE: st.just({"update": {"x": 1}}),
    }[kind]


@st.composite
def planned(draw: st.DrawFn) -> Planned:
    kind = draw(st.sampled_from(list(SteeringKind)))
    deliveries = [d for d in SteeringDelivery if d is not SteeringDelivery.IMMEDIATE]
    if kind is SteeringKind.CANCEL:
        deliveries.append(SteeringDelivery.IMMEDIATE)
    return Planned(
        kind=kind,
        payload=draw(payloads(kind)),
        delivery=draw(st.sampled_from(deliveries)),
        priority=draw(st.sampled_from(list(SteeringPriority))),
        actor=draw(st.sampled_from(["operator"] * 5 + ["test", "foreign", "unscoped"])),
        point=draw(st.sampled_from(POINTS)),
        resend=draw(st.booleans()),
    )


class Scenario:
    """One scripted run and the schedule of commands thrown at it."""

    def __init__(self, rt: Runtime, schedule: list[Planned]) -> None:
        self.rt = rt
        self.schedule = schedule
        self.pending = list(range(len(schedule)))
        self.sent: dict[str, SteeringCommand] = {}
        self.receipts: dict[str, list[str]] = {}
        self.tool_calls = 0
        self.run_id = ""

    async def submit_at(self, point: tuple[str, int]) -> None:
        for index in [i for i in self.pending if self.schedule[i].point == point]:
            self.pending.remove(index)
            await self.send(self.schedule[index])

    async def submit_rest(self) -> None:
        while self.pending:
            await self.send(self.schedule[self.pending.pop(0)])

    async def send(self, plan: Planned) -> None:
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(self.run_id),
            actor=ACTORS[plan.actor],
            kind=plan.kind,
            payload=plan.payload,
            delivery=plan.delivery,
            priority=plan.priority,
        )
        self.sent[cmd.correlation_id] = cmd
        for _ in range(2 if plan.resend else 1):
            receipt = await self.rt.submit(cmd)
            self.receipts.setdefault(cmd.correlation_id, []).append(receipt.status.value)

    def agent(self) -> Agent:
        scenario = self

        async def respond(request: ModelRequest) -> ModelResponse:
            turn = len(model.requests) - 1
            await scenario.submit_at(("model", turn))
            if turn < TURNS:
                return tool_call("step", n=turn)
            return reply(f"answer {turn}")

        @tool
        async def step(n: int) -> str:
            """One step of the scripted task."""
            index = scenario.tool_calls
            scenario.tool_calls += 1
            await scenario.submit_at(("tool", index))
            return f"step {n} done"

        @tool
        def aux() -> str:
            """Never called."""
            return "aux"

        model = FunctionModel(respond)
        return Agent(
            "worker",
            model,
            tools=[step, aux],
            models=["m-large", "m-small"],
            limits=RunLimits(max_model_calls=20),
        )

    async def drive(self) -> tuple[RunStatus, FunctionModel]:
        agent = self.agent()
        waiter = EventWaiter()
        self.rt.bus.add_sink(waiter)
        handle = await self.rt.start(agent, "go")
        self.run_id = handle.run_id
        seen = -1
        while True:
            paused = asyncio.ensure_future(
                waiter.until(
                    lambda e, after=seen: (
                        e.type == "run.paused" and e.run_id == handle.run_id and e.offset > after
                    )
                )
            )
            done = asyncio.ensure_future(handle.result())
            await asyncio.wait({paused, done}, return_when=asyncio.FIRST_COMPLETED)
            if paused.done():
                done.cancel()
                seen = paused.result().offset
                await self.submit_at(("paused", 0))
                await handle.resume()
                continue
            paused.cancel()
            if not self.pending:
                break
            await self.submit_at(("after", 0))
            await self.submit_rest()  # the points the run never reached
            # An END_OF_TURN instruction may have reopened the run: drive it to its end again.
        return (await handle.result()).status, agent.model  # type: ignore[return-value]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(schedule=st.lists(planned(), max_size=12))
def test_every_command_ends_in_one_terminal_state(schedule: list[Planned]) -> None:
    asyncio.run(_check(schedule))


async def _check(schedule: list[Planned]) -> None:
    recorder = EventRecorder()
    with use_clock(FakeClock(tick=0.001)), use_ids(SequentialIds()):
        async with Runtime(testing=True, sinks=[recorder]) as rt:
            scenario = Scenario(rt, schedule)
            status, model = await scenario.drive()
            open_commands = rt.router.open_commands()

    assert status in VALID_ENDINGS, status
    assert open_commands == []
    recorder.assert_every_command_terminal()
    assert len(scenario.sent) == len(schedule)
    for cid, receipts in scenario.receipts.items():
        assert recorder.terminal_state(cid) is not None, recorder.lifecycle(cid)
        assert recorder.lifecycle(cid).count("requested") == 1
        assert receipts[1:] == ["duplicate"] * (len(receipts) - 1)

    # An applied message kind first reached the model in the very request its event names;
    # no other steering ever reached the model.
    shown: dict[str, list[str]] = {}
    for request in model.requests:
        for message in request.messages:
            if "steering" in message.metadata:
                shown.setdefault(message.metadata["steering"], []).append(request.request_id)
    for cid, cmd in scenario.sent.items():
        applied = [e for e in recorder.steering(cid) if e.type == "steering.applied"]
        is_message = cmd.kind in MESSAGE_KINDS or (
            cmd.kind is SteeringKind.REDIRECT and "instruction" in cmd.payload
        )
        if applied and is_message:
            first = applied[0].affected["model_request_id"]
            assert shown.get(cid, [None])[0] == first, (cid, shown.get(cid))
        else:
            assert cid not in shown, cid

    endings = [
        e for e in recorder.events if e.type.startswith("run.") and e.status in VALID_ENDINGS
    ]
    assert endings and endings[-1].status == status.value
