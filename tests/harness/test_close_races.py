"""``Runtime.close`` against work still under way in a run's last steps."""

from __future__ import annotations

import asyncio
import gc

from tests.holds import HoldNamed
from tinyagents import Agent, RunStatus, SubAgent, orchestrator_tools
from tinyagents.protocol import SteeringCommand, SteeringDelivery
from tinyagents.runtime import Runtime
from tinyagents.steering import CallNext, Decision, PolicyContext
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    reply,
    tool_call,
)


class HoldOnReturn:
    """Defers each command once; when a command named ``held`` comes back (its run ended), its
    evaluation waits for ``release``."""

    policy_id = "hold-on-return"

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.task: asyncio.Task[object] | None = None

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        if cmd.correlation_id not in self.seen:
            self.seen.add(cmd.correlation_id)
            return Decision.defer(cmd, "until the run ends", self.policy_id)
        if cmd.correlation_id == "held":
            self.task = asyncio.current_task()
            self.entered.set()
            await self.release.wait()
        return await call_next(cmd)


async def test_close_waits_for_the_end_of_a_run_that_another_turn_reopened() -> None:
    """A run's end hands its deferred commands over: the first, an END_OF_TURN message, gives
    the run another turn (a new task) while the ending task still evaluates the next one.
    ``close`` must wait for that task too: it failed the command under evaluation, which was
    then accepted and failed a second time (a KeyError in the run's task)."""
    recorder, waiter = EventRecorder(), EventWaiter()
    hold = HoldOnReturn()
    second_turn = asyncio.Event()
    calls = 0

    async def model(_: object) -> object:
        nonlocal calls
        calls += 1
        if calls > 1:
            second_turn.set()
            await asyncio.Event().wait()  # the second turn's model call never answers
        return reply("done")

    rt = Runtime(testing=True, sinks=[recorder, waiter])
    rt.router.pipeline.insert(hold, after="authority")
    await rt.open()
    gate = asyncio.Event()

    async def first_call(request: object) -> object:
        await gate.wait()
        return await model(request)

    agent = Agent("a", model=FunctionModel(first_call))
    handle = await rt.start(agent, "go")
    again = await handle.steer(
        "one more thing", delivery=SteeringDelivery.END_OF_TURN, correlation_id="again"
    )
    held = await handle.steer("and this", correlation_id="held")
    assert again.status.value == held.status.value == "deferred"
    gate.set()
    await hold.entered.wait()
    await second_turn.wait()
    closing = asyncio.create_task(rt.close())
    await waiter.event("run.cancelled", handle.run_id)
    assert handle.task is not None
    await asyncio.wait([handle.task])  # the second turn's task ended
    for _ in range(100):  # let close go as far as it will without the held evaluation
        if closing.done():
            break
        await asyncio.sleep(0)
    hold.release.set()
    await closing
    assert hold.task is not None
    (outcome,) = await asyncio.gather(hold.task, return_exceptions=True)
    assert not isinstance(outcome, BaseException), outcome
    recorder.assert_every_command_terminal()
    assert recorder.lifecycle("held") == ["requested", "deferred", "accepted", "failed"]
    assert rt.router.open_commands() == []


async def test_a_cancel_passed_down_while_the_runtime_closes_raises_nothing_unseen() -> None:
    """A parent's cancel is passed down to its child in a task of the runtime's; when close
    began before that task sent it, its submit raised ``RuntimeClosed`` and the task died
    with it, logged as "Task exception was never retrieved" (close cancels the child anyway)."""
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: unhandled.append(context))
    try:
        hold = HoldNamed()
        rt = Runtime(testing=True)
        rt.router.pipeline.insert(hold, after="authority")
        await rt.open()

        async def never(_: object) -> object:
            await asyncio.Event().wait()
            return reply("never")

        parent = await rt.start(Agent("p", model=FunctionModel(never)), "go")
        child = await rt.start(Agent("c", model=FunctionModel(never)), "go", parent=parent)
        slow = asyncio.create_task(parent.steer("later", correlation_id="slow"))
        await hold.entered.wait()  # a submit under way: close waits for it
        cancelling = asyncio.create_task(parent.cancel())
        closing = asyncio.create_task(rt.close())
        assert (await cancelling).accepted  # queued; its pass-down to the child is spawned
        for _ in range(100):  # the pass-down runs while close waits for the slow submit
            await asyncio.sleep(0)
        hold.release.set()
        await closing
        await slow
        gc.collect()
        assert unhandled == []
        assert (await child.result()).status is RunStatus.CANCELLED
        assert (await parent.result()).status is RunStatus.CANCELLED
    finally:
        loop.set_exception_handler(previous)


async def test_a_cancelled_run_waiting_for_its_children_when_the_runtime_closes_ends_cancelled() -> (
    None
):
    """A run that applied its cancel waits for its live children to end (a spawned child in
    the middle of a tool call finishes the call first). Closing the runtime then cancelled
    the run's task inside that wait: it left without its terminal event, ``status`` stayed
    ``running`` and ``await handle.result()`` never returned. It ends ``cancelled`` now, with
    its own reason, as its children do."""
    recorder, waiter = EventRecorder(), EventWaiter()
    gate = Gate("slow")
    child = Agent("child", ScriptedModel([tool_call("slow"), "child done"]), tools=[gate.tool()])
    parent_gate = Gate("parent-model")
    parent_calls = 0

    async def parent_model(_: object) -> object:
        nonlocal parent_calls
        parent_calls += 1
        if parent_calls == 1:
            return tool_call("spawn_subagent", name="child", input="look it up")
        await parent_gate.wait()
        return reply("never the answer")

    parent = Agent(
        "parent", FunctionModel(parent_model), tools=orchestrator_tools([SubAgent(child)])
    )
    rt = Runtime(testing=True, sinks=[recorder, waiter])
    await rt.open()
    handle = await rt.start(parent, "go")
    await gate.entered.wait()  # the child is inside its tool call
    await handle.cancel("stop the work")  # passed down: the child stops after its tool
    parent_gate.open()
    # the parent applies its cancel after its model call and waits for the child
    await waiter.event("steering.applied", handle.run_id)
    await rt.close()

    assert handle.status is RunStatus.CANCELLED
    result = await handle.result()
    assert (result.status, result.error) == (RunStatus.CANCELLED, "stop the work")
    ends = [
        e.type for e in recorder.events if e.run_id == handle.run_id and e.type.startswith("run.")
    ]
    assert ends == ["run.started", "run.cancelled"]
