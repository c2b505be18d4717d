"""Property tests of steering a graph run: whatever mix of commands is ready at one
superstep boundary, every command reaches exactly one terminal state, and the order they
were submitted in changes nothing (DESIGN.md, "Ordering and conflicts")."""

from __future__ import annotations

import asyncio
from typing import Any

from graphkit import LogState, logger
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyagents import Runtime
from tinyagents.graph import END, START, StateGraph
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import EventRecorder, EventWaiter

TERMINAL = ("steering.applied", "steering.failed", "steering.rejected", "steering.superseded")
PRIORITIES = st.sampled_from(list(SteeringPriority))
RUN, NODE_B = "run", "node_b"

# (kind, target, payload) templates: the run id is filled in once the run has started
menu = st.one_of(
    st.tuples(
        st.just(SteeringKind.UPDATE_STATE),
        st.just(RUN),
        st.sampled_from(["u1", "u2", "u3"]).map(lambda t: {"update": {"log": [t]}}),
    ),
    st.tuples(
        st.just(SteeringKind.REDIRECT),
        st.sampled_from([RUN, NODE_B]),
        st.sampled_from(["c", "d", ["c", "d"], END]).map(lambda g: {"goto": g}),
    ),
    st.tuples(st.just(SteeringKind.REQUEST_STATUS), st.just(RUN), st.just({})),
    st.tuples(st.just(SteeringKind.CANCEL), st.sampled_from([RUN, NODE_B]), st.just({})),
    st.tuples(st.just(SteeringKind.APPROVE), st.just(RUN), st.just({})),
    st.tuples(st.just(SteeringKind.ADD_INSTRUCTION), st.just(RUN), st.just({"text": "hi"})),
)


def gated(gate: asyncio.Event) -> Any:
    """a (held by ``gate``) → b → END; a may also go to c or d."""

    async def a(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["a"]}

    graph = StateGraph(LogState).add_node("a", a, destinations=["c", "d"])
    for name in "bcd":
        graph.add_node(name, logger(name)).add_edge(name, END)
    graph.add_edge(START, "a").add_edge("a", "b")
    return graph.compile(checkpointer=MemoryCheckpointer(), redirect_conflict="highest_priority")


def build(spec: list[tuple[Any, ...]], run_id: str) -> list[SteeringCommand]:
    cmds = []
    for (kind, where, payload), priority in spec:
        target = (
            SteeringTarget.agent_run(run_id)
            if where == RUN
            else SteeringTarget.graph_node(run_id, "b")
        )
        cmds.append(
            SteeringCommand(
                target=target,
                actor=SteeringActor.test(),
                kind=kind,
                payload=payload,
                priority=priority,
            )
        )
    return cmds


async def steer(spec: list[tuple[Any, ...]], order: list[int]) -> dict[str, Any]:
    """Run the graph with the commands of ``spec`` submitted in ``order`` while its first
    step runs; what happened, by command position (ids differ between runs)."""
    async with Runtime(testing=True) as rt:
        waiter, recorder = EventWaiter(), EventRecorder()
        rt.bus.add_sink(waiter)
        rt.bus.add_sink(recorder)
        gate = asyncio.Event()
        handle = await rt.start_graph(gated(gate), {}, thread_id="t")
        await waiter.event("graph.task_started", handle.run_id, node="a")
        cmds = build(spec, handle.run_id)
        receipts = {i: (await rt.submit(cmds[i])).status.value for i in order}
        gate.set()
        result = await handle.result()
        recorder.assert_every_command_terminal()
        outcomes = []
        for i, cmd in enumerate(cmds):
            ends = [e.type for e in recorder.steering(cmd.correlation_id) if e.type in TERMINAL]
            assert len(ends) == 1, (cmd.kind, ends)
            outcomes.append((receipts[i], ends[0]))
        return {"status": result.status, "output": result.output, "outcomes": outcomes}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
async def test_commands_at_one_boundary_end_once_whatever_the_submit_order(
    data: st.DataObject,
) -> None:
    spec = data.draw(st.lists(st.tuples(menu, PRIORITIES), min_size=1, max_size=6))
    order = data.draw(st.permutations(range(len(spec))))
    in_order = await steer(spec, list(range(len(spec))))
    shuffled = await steer(spec, list(order))
    assert shuffled == in_order


def asker(name: str) -> Any:
    def node(state: Any) -> dict[str, Any]:
        from tinyagents.graph import interrupt

        return {"log": [f"{name}:{interrupt(name)}"]}

    node.__name__ = name
    return node


def two_questions(policy: str) -> Any:
    graph = StateGraph(LogState).add_node("left", asker("left")).add_node("right", asker("right"))
    graph.add_node("after", logger("after")).add_edge("left", "after").add_edge("after", END)
    graph.add_edge(START, "left").add_edge(START, "right").add_edge("right", END)
    return graph.compile(checkpointer=MemoryCheckpointer(), task_cancel_policy=policy)


answers = st.tuples(
    st.sampled_from(
        [
            SteeringKind.APPROVE,
            SteeringKind.REJECT,
            SteeringKind.PROVIDE_CONTEXT,
            SteeringKind.CANCEL,
            SteeringKind.UPDATE_STATE,
            SteeringKind.REDIRECT,
            SteeringKind.REQUEST_STATUS,
            SteeringKind.PAUSE,
            SteeringKind.RESUME,
        ]
    ),
    st.sampled_from(["task:left", "task:right", "node:left", "node:right", "run"]),
    st.booleans(),  # name the left interrupt's id in the payload
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(["skip", "fail_run"]),
    spec=st.lists(answers, min_size=1, max_size=6),
)
async def test_commands_to_a_run_resting_on_interrupts_each_end_once(
    policy: str, spec: list[tuple[SteeringKind, str, bool]]
) -> None:
    async with Runtime(testing=True) as rt:
        waiter, recorder = EventWaiter(), EventRecorder()
        rt.bus.add_sink(waiter)
        rt.bus.add_sink(recorder)
        handle = await rt.start_graph(two_questions(policy), {}, thread_id="t")
        asked = {
            node: await waiter.event("graph.interrupt", handle.run_id, node=node)
            for node in ("left", "right")
        }
        for kind, where, named in spec:
            if where == "run":
                target = SteeringTarget.agent_run(handle.run_id)
            elif where.startswith("task:"):
                target = SteeringTarget.graph_task(handle.run_id, asked[where[5:]].task_id)
            else:
                target = SteeringTarget.graph_node(handle.run_id, where[5:])
            payload: dict[str, Any] = {}
            if kind is SteeringKind.PROVIDE_CONTEXT:
                payload["text"] = "ctx"
            if kind is SteeringKind.UPDATE_STATE:
                payload["update"] = {"log": ["u"]}
            if kind is SteeringKind.REDIRECT:
                payload["goto"] = "after"
            if named and kind in (SteeringKind.APPROVE, SteeringKind.REJECT):
                payload["interrupt_id"] = asked["left"].data["interrupt_id"]
            cmd = SteeringCommand(
                target=target, actor=SteeringActor.test(), kind=kind, payload=payload
            )
            await rt.submit(cmd)
        # whatever is left pending ends the run
        await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=SteeringActor.test(),
                kind=SteeringKind.CANCEL,
            )
        )
        await handle.result()
        recorder.assert_every_command_terminal()
        for cid in {e.correlation_id for e in recorder.events if e.type.startswith("steering.")}:
            ends = [e.type for e in recorder.steering(cid) if e.type in TERMINAL]
            assert len(ends) == 1, ends


async def steer_with_pause(
    spec: list[tuple[Any, ...]], pause_priority: SteeringPriority, order: list[int]
) -> dict[str, Any]:
    """As ``steer``, with a run pause among the commands: the commands ordered after it wait
    behind it at the boundary; once it holds the run, a run cancel ends the run."""
    async with Runtime(testing=True) as rt:
        waiter, recorder = EventWaiter(), EventRecorder()
        rt.bus.add_sink(waiter)
        rt.bus.add_sink(recorder)
        gate = asyncio.Event()
        handle = await rt.start_graph(gated(gate), {}, thread_id="t")
        await waiter.event("graph.task_started", handle.run_id, node="a")
        run = SteeringTarget.agent_run(handle.run_id)
        pause = SteeringCommand(
            target=run, actor=SteeringActor.test(), kind=SteeringKind.PAUSE, priority=pause_priority
        )
        cmds = [*build(spec, handle.run_id), pause]
        receipts = {i: (await rt.submit(cmds[i])).status.value for i in order}
        gate.set()
        paused = await waiter.until(
            lambda e: (
                e.type in TERMINAL and getattr(e, "correlation_id", None) == pause.correlation_id
            )
        )
        if paused.type == "steering.applied" and not handle.done:
            cancel = SteeringCommand(
                target=run, actor=SteeringActor.test(), kind=SteeringKind.CANCEL
            )
            await rt.submit(cancel)
        result = await handle.result()
        recorder.assert_every_command_terminal()
        outcomes = []
        for i, cmd in enumerate(cmds):
            ends = [e for e in recorder.steering(cmd.correlation_id) if e.type in TERMINAL]
            assert len(ends) == 1, (cmd.kind, [e.type for e in ends])
            if cmd.kind is not SteeringKind.CANCEL:
                # a run cancel supersedes what waits behind the pause; nothing "ran out"
                assert "ended before" not in (ends[0].reason or ""), (cmd.kind, ends[0].reason)
            outcomes.append((receipts[i], ends[0].type))
        return {"status": result.status, "output": result.output, "outcomes": outcomes}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
async def test_a_cancel_while_paused_ends_each_command_once_whatever_the_submit_order(
    data: st.DataObject,
) -> None:
    spec = data.draw(st.lists(st.tuples(menu, PRIORITIES), min_size=1, max_size=5))
    pause_priority = data.draw(PRIORITIES)
    order = data.draw(st.permutations(range(len(spec) + 1)))
    in_order = await steer_with_pause(spec, pause_priority, list(range(len(spec) + 1)))
    shuffled = await steer_with_pause(spec, pause_priority, list(order))
    assert shuffled == in_order


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(["skip", "fail_run"]),
    spec=st.lists(answers, min_size=1, max_size=5),
)
async def test_a_task_cancel_while_paused_supersedes_what_waits_for_that_task(
    policy: str, spec: list[tuple[SteeringKind, str, bool]]
) -> None:
    """Commands delivered behind a pause, then a cancel of the left task while paused: each
    command ends once, and none aimed at the left task is applied to it afterwards (each is
    superseded by the cancel, unless it is a cancel or a control kind taken while paused, or
    a resume of the run came with the pause: it ends the pause at once)."""
    async with Runtime(testing=True) as rt:
        waiter, recorder = EventWaiter(), EventRecorder()
        rt.bus.add_sink(waiter)
        rt.bus.add_sink(recorder)
        handle = await rt.start_graph(two_questions(policy), {}, thread_id="t")
        asked = {
            node: await waiter.event("graph.interrupt", handle.run_id, node=node)
            for node in ("left", "right")
        }
        run = SteeringTarget.agent_run(handle.run_id)
        left = SteeringTarget.graph_task(handle.run_id, asked["left"].task_id)

        def make(kind: SteeringKind, target: Any, payload: dict[str, Any], **kw: Any) -> Any:
            return SteeringCommand(
                target=target, actor=SteeringActor.test(), kind=kind, payload=payload, **kw
            )

        pause = make(SteeringKind.PAUSE, run, {}, priority=SteeringPriority.CRITICAL)
        cmds = [pause]
        for kind, where, named in spec:
            if where == "run":
                target = run
            elif where.startswith("task:"):
                target = SteeringTarget.graph_task(handle.run_id, asked[where[5:]].task_id)
            else:
                target = SteeringTarget.graph_node(handle.run_id, where[5:])
            payload: dict[str, Any] = {}
            if kind is SteeringKind.PROVIDE_CONTEXT:
                payload["text"] = "ctx"
            if kind is SteeringKind.UPDATE_STATE:
                payload["update"] = {"log": ["u"]}
            if kind is SteeringKind.REDIRECT:
                payload["goto"] = "after"
            if named and kind in (SteeringKind.APPROVE, SteeringKind.REJECT):
                payload["interrupt_id"] = asked["left"].data["interrupt_id"]
            cmds.append(make(kind, target, payload))
        for cmd in cmds:
            await rt.submit(cmd)
        held = await waiter.until(
            lambda e: (
                e.type in TERMINAL and getattr(e, "correlation_id", None) == pause.correlation_id
            )
        )
        if held.type == "steering.applied":
            cancel = make(SteeringKind.CANCEL, left, {})
            await rt.submit(cancel)
            await rt.submit(make(SteeringKind.RESUME, run, {}))
        await rt.submit(make(SteeringKind.CANCEL, run, {}))  # whatever is left ends the run
        await handle.result()
        recorder.assert_every_command_terminal()
        # a resume of the run delivered with the pause ends it there: what came with them
        # is applied at once, before the cancel is sent
        resumed = any(c.kind is SteeringKind.RESUME and c.target == run for c in cmds[1:])
        for cmd in cmds[1:]:
            ends = [e for e in recorder.steering(cmd.correlation_id) if e.type in TERMINAL]
            assert len(ends) == 1, [e.type for e in ends]
            control = (SteeringKind.REQUEST_STATUS, SteeringKind.RESUME, SteeringKind.PAUSE)
            if (
                held.type == "steering.applied"
                and not resumed
                and cmd.target == left
                and cmd.kind not in control
            ):
                # control kinds are taken while paused, before the cancel; a cancel is no
                # command a cancel supersedes
                if cmd.kind is not SteeringKind.CANCEL:
                    assert ends[0].type == "steering.superseded", (cmd.kind, ends[0].reason)
