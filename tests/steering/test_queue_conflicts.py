"""Conflict rules, pause and delivery classes: on the bare queue and through the router."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import reduce
from typing import Any

import pytest
from steerkit import MakeRun, apply_ready, make_command, start_run

from tinyagents.errors import ConfigurationError, InvalidCommandError
from tinyagents.protocol import (
    CONTROL_KINDS,
    Boundary,
    ReceiptStatus,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.runs import RunDriver, RunHandle
from tinyagents.runtime import Runtime
from tinyagents.steering import (
    RedirectConflict,
    SteeringQueue,
    narrow_models,
    narrow_tools,
    order_key,
)
from tinyagents.store import MemoryStore
from tinyagents.testkit import EPOCH, EventRecorder

K = SteeringKind
P = SteeringPriority
D = SteeringDelivery


def cmd(
    kind: SteeringKind = K.ADD_INSTRUCTION,
    *,
    at: int = 0,
    cid: str | None = None,
    priority: SteeringPriority = P.NORMAL,
    delivery: SteeringDelivery = D.NEXT_BOUNDARY,
    payload: dict[str, object] | None = None,
) -> SteeringCommand:
    """A command created ``at`` seconds after the epoch (so arrival order is up to the test)."""
    if payload is None:
        payload = {
            K.ADD_INSTRUCTION: {"text": "a"},
            K.REPLACE_INSTRUCTION: {"text": "goal"},
            K.REDIRECT: {"goto": "b"},
            K.CONSTRAIN_TOOLS: {"tools": ["a"]},
        }.get(kind, {})
    extra = {"correlation_id": cid} if cid else {}
    return make_command(
        "r-1",
        kind,
        payload,
        priority=priority,
        delivery=delivery,
        created_at=EPOCH + timedelta(seconds=at),
        **extra,
    )


def ids(cmds: list[SteeringCommand]) -> list[str]:
    return [c.correlation_id for c in cmds]


# --------------------------------------------------------------------------- ordering


def test_order_key_is_depth_then_priority_desc_then_created_at_then_correlation_id() -> None:
    q = SteeringQueue()
    entries = [
        (cmd(cid="e", at=0, priority=P.CRITICAL), 1),
        (cmd(cid="b", at=5, priority=P.LOW), 0),
        (cmd(cid="a", at=5, priority=P.HIGH), 0),
        (cmd(cid="d", at=1, priority=P.LOW), 0),
        (cmd(cid="c", at=5, priority=P.LOW), 0),
    ]
    for c, depth in entries:
        q.put_nowait(c, depth)
    assert ids(q.pop_ready(Boundary.BEFORE_MODEL_CALL)) == ["a", "d", "b", "c", "e"]
    assert order_key(entries[0][0], 1) == (1, -200, EPOCH, "e")


def test_pending_lists_in_order_without_removing() -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(cid="late", at=9))
    q.put_nowait(cmd(cid="early", at=1))
    assert ids(q.pending()) == ["early", "late"]
    assert len(q) == 2 and "late" in q


def test_plain_puts_share_one_outcome_that_nothing_can_change() -> None:
    # Most puts report the one shared outcome (queued, nothing superseded): a caller that
    # appended to its list would report a supersession for every later put.
    q = SteeringQueue()
    first, second = q.put_nowait(cmd(cid="one")), q.put_nowait(cmd(cid="two"))
    assert first is second and first.queued and not first.superseded
    with pytest.raises(TypeError):
        first.superseded.append((cmd(cid="x"), "y"))
    outcome = q.put_nowait(cmd(K.CANCEL, cid="stop"))  # a conflict makes an outcome of its own
    assert outcome is not first and len(outcome.superseded) == 2
    assert not first.superseded and first.queued


# --------------------------------------------------------------------------- cancel


def test_cancel_supersedes_every_pending_non_cancel() -> None:
    q = SteeringQueue()
    for c in [cmd(cid="add"), cmd(K.PAUSE, cid="pause"), cmd(K.REDIRECT, cid="go")]:
        assert q.put_nowait(c).queued
    outcome = q.put_nowait(cmd(K.CANCEL, cid="stop"))
    assert outcome.queued
    assert sorted((old.correlation_id, winner) for old, winner in outcome.superseded) == [
        ("add", "stop"),
        ("go", "stop"),
        ("pause", "stop"),
    ]
    assert ids(q.pending()) == ["stop"]


def test_non_cancel_arriving_while_a_cancel_is_pending_is_superseded() -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(K.CANCEL, cid="stop"))
    outcome = q.put_nowait(cmd(K.RESUME, cid="resume", priority=P.CRITICAL))
    assert not outcome.queued
    assert [(c.correlation_id, w) for c, w in outcome.superseded] == [("resume", "stop")]
    assert q.put_nowait(cmd(K.CANCEL, cid="stop-again")).queued  # cancels do not conflict
    assert ids(q.pending()) == ["stop", "stop-again"]


def test_after_the_cancel_is_delivered_new_commands_queue_again() -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(K.CANCEL, cid="stop"))
    assert ids(q.pop_ready(Boundary.BEFORE_MODEL_CALL)) == ["stop"]
    assert q.put_nowait(cmd(cid="add")).queued


async def test_cancel_through_the_router_records_superseded_by(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    handle = await make_run("r-1")
    first = await rt.submit(make_command("r-1"))
    stop = await rt.submit(make_command("r-1", K.CANCEL))
    late = await rt.submit(make_command("r-1", K.REPLACE_INSTRUCTION, {"text": "x"}))
    assert first.accepted and stop.accepted and late.accepted
    for loser in (first, late):
        recorder.assert_lifecycle(loser.correlation_id, ["requested", "accepted", "superseded"])
        assert recorder.steering(loser.correlation_id)[-1].superseded_by == stop.correlation_id
    assert ids(apply_ready(handle)) == [stop.correlation_id]
    recorder.assert_every_command_terminal()


# --------------------------------------------------------------------------- replace_instruction


@pytest.mark.parametrize("newer_arrives_first", [False, True])
def test_newer_replace_instruction_wins_whatever_the_arrival_order(
    newer_arrives_first: bool,
) -> None:
    q = SteeringQueue()
    older, newer = (
        cmd(K.REPLACE_INSTRUCTION, cid="old", at=1),
        cmd(K.REPLACE_INSTRUCTION, cid="new", at=2),
    )
    first, second = (newer, older) if newer_arrives_first else (older, newer)
    q.put_nowait(first)
    outcome = q.put_nowait(second)
    assert [(c.correlation_id, w) for c, w in outcome.superseded] == [("old", "new")]
    assert outcome.queued is (second is newer)
    assert ids(q.pending()) == ["new"]


def test_replace_instruction_tie_on_created_at_breaks_on_correlation_id() -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(K.REPLACE_INSTRUCTION, cid="c-2", at=3))
    q.put_nowait(cmd(K.REPLACE_INSTRUCTION, cid="c-1", at=3))
    assert ids(q.pending()) == ["c-2"]


def test_replace_instruction_does_not_touch_add_instruction() -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(cid="add", at=1))
    q.put_nowait(cmd(K.REPLACE_INSTRUCTION, cid="rep", at=2))
    assert ids(q.pending()) == ["add", "rep"]


# --------------------------------------------------------------------------- constrain_*


def test_narrow_tools_is_an_intersection() -> None:
    assert narrow_tools(None, ["a", "b"]) == {"a", "b"}
    assert narrow_tools(frozenset({"a", "b"}), ["b", "c"]) == {"b"}
    assert narrow_tools(frozenset({"a"}), []) == frozenset()


def test_narrow_models_keeps_the_current_preference_order() -> None:
    assert narrow_models(None, ["m2", "m1", "m2"]) == ("m2", "m1")
    assert narrow_models(("m1", "m2", "m3"), ["m3", "m1", "m9"]) == ("m1", "m3")


def test_constrain_commands_all_deliver_and_fold_to_the_intersection() -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(K.CONSTRAIN_TOOLS, cid="t1", at=1, payload={"tools": ["a", "b", "c"]}))
    q.put_nowait(cmd(K.CONSTRAIN_TOOLS, cid="t2", at=2, payload={"tools": ["b", "c", "d"]}))
    q.put_nowait(cmd(K.CONSTRAIN_MODEL, cid="m1", at=3, payload={"models": ["x", "y"]}))
    q.put_nowait(cmd(K.CONSTRAIN_MODEL, cid="m2", at=4, payload={"models": ["y", "z"]}))
    ready = q.pop_ready(Boundary.BEFORE_MODEL_CALL)
    assert ids(ready) == ["t1", "t2", "m1", "m2"]
    tools = reduce(
        narrow_tools,
        [c.payload["tools"] for c in ready if c.kind is K.CONSTRAIN_TOOLS],
        frozenset({"a", "b", "c", "d", "e"}),
    )
    models = reduce(
        narrow_models,
        [c.payload["models"] for c in ready if c.kind is K.CONSTRAIN_MODEL],
        ("x", "y", "z"),
    )
    assert tools == {"b", "c"}
    assert models == ("y",)


# --------------------------------------------------------------------------- redirect


def test_redirect_first_accepted_keeps_the_pending_one() -> None:
    q = SteeringQueue(redirect_conflict=RedirectConflict.FIRST_ACCEPTED)
    q.put_nowait(cmd(K.REDIRECT, cid="first", at=5, priority=P.LOW))
    outcome = q.put_nowait(cmd(K.REDIRECT, cid="second", at=1, priority=P.CRITICAL))
    assert not outcome.queued
    assert [(c.correlation_id, w) for c, w in outcome.superseded] == [("second", "first")]
    assert ids(q.pending()) == ["first"]


@pytest.mark.parametrize(
    ("pending", "arriving", "winner"),
    [
        ((P.LOW, 1, "p"), (P.HIGH, 2, "a"), "a"),  # higher priority wins
        ((P.HIGH, 2, "p"), (P.LOW, 1, "a"), "p"),
        ((P.NORMAL, 2, "p"), (P.NORMAL, 1, "a"), "a"),  # same priority: the older wins
        ((P.NORMAL, 1, "p"), (P.NORMAL, 2, "a"), "p"),
        ((P.NORMAL, 1, "z"), (P.NORMAL, 1, "a"), "a"),  # then the correlation id
    ],
)
def test_redirect_highest_priority(
    pending: tuple[SteeringPriority, int, str],
    arriving: tuple[SteeringPriority, int, str],
    winner: str,
) -> None:
    q = SteeringQueue(redirect_conflict="highest_priority")
    for priority, at, cid in (pending, arriving):
        q.put_nowait(cmd(K.REDIRECT, cid=cid, at=at, priority=priority))
    assert ids(q.pending()) == [winner]


def test_redirect_error_refuses_the_newcomer() -> None:
    q = SteeringQueue(redirect_conflict=RedirectConflict.ERROR)
    q.put_nowait(cmd(K.REDIRECT, cid="first"))
    outcome = q.put_nowait(cmd(K.REDIRECT, cid="second", priority=P.CRITICAL))
    assert not outcome.queued and outcome.superseded == []
    assert outcome.rejected is not None and "first" in outcome.rejected
    assert ids(q.pending()) == ["first"]


def test_conflict_says_what_put_would_refuse_and_changes_nothing() -> None:
    q = SteeringQueue(redirect_conflict=RedirectConflict.ERROR)
    assert q.conflict(cmd(K.REDIRECT, cid="first")) is None
    q.put_nowait(cmd(K.REDIRECT, cid="first"))
    reason = q.conflict(cmd(K.REDIRECT, cid="second"))
    assert reason is not None and "first" in reason
    assert q.conflict(cmd(K.REDIRECT, cid="first")) == "duplicate correlation id first"
    assert q.conflict(cmd(cid="other")) is None  # only redirects conflict this way
    assert ids(q.pending()) == ["first"]
    q.put_nowait(cmd(K.CANCEL, cid="stop"))  # supersedes the first redirect …
    q.put_nowait(cmd(K.REDIRECT, cid="again"))  # … and the next (superseded, not refused)
    assert q.conflict(cmd(K.REDIRECT, cid="again-2")) is None
    assert not SteeringQueue(redirect_conflict="first_accepted").conflict(cmd(K.REDIRECT))


@pytest.mark.parametrize(
    ("policy", "loser_state"),
    [("first_accepted", "superseded"), ("highest_priority", "superseded"), ("error", "rejected")],
)
async def test_redirect_conflict_through_the_router(
    rt: Runtime,
    make_run: MakeRun,
    recorder: EventRecorder,
    policy: str,
    loser_state: str,
) -> None:
    handle = await make_run("r-1", redirect_conflict=RedirectConflict(policy))
    first = await rt.submit(make_command("r-1", K.REDIRECT, {"goto": "a"}, priority=P.HIGH))
    second = await rt.submit(make_command("r-1", K.REDIRECT, {"goto": "b"}))
    assert recorder.terminal_state(second.correlation_id) == loser_state
    last = recorder.steering(second.correlation_id)[-1]
    if loser_state == "rejected":
        assert last.policy_id == "queue"
        assert last.reason is not None and "redirect_conflict is 'error'" in last.reason
    else:
        assert last.superseded_by == first.correlation_id
    assert ids(apply_ready(handle)) == [first.correlation_id]
    recorder.assert_every_command_terminal()


class _CommandLog(MemoryStore):
    """A store that remembers every state a command was written in; with ``hold`` set, each
    write of an accepted command waits at that barrier."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, str]] = []
        self.hold: asyncio.Barrier | None = None

    async def append_command(self, cmd: SteeringCommand, *, state: str, **kw: Any) -> bool:
        self.writes.append((cmd.correlation_id, state))
        if state == "accepted" and self.hold is not None:
            await self.hold.wait()
        return await super().append_command(cmd, state=state, **kw)


async def test_a_redirect_refused_by_the_queue_is_rejected_not_accepted(
    recorder: EventRecorder,
) -> None:
    log = _CommandLog()
    async with Runtime(store=log, testing=True, sinks=[recorder]) as rt:
        handle = await start_run(rt, "r-1", redirect_conflict=RedirectConflict.ERROR)
        first = await rt.submit(make_command("r-1", K.REDIRECT, {"goto": "a"}))
        second = await rt.submit(make_command("r-1", K.REDIRECT, {"goto": "b"}))
        assert first.accepted
        assert (second.status, second.policy_id, second.run_id) == (
            ReceiptStatus.REJECTED,
            "queue",
            "r-1",
        )
        assert second.reason is not None and first.correlation_id in second.reason
        assert [e.type for e in recorder.steering(second.correlation_id)] == [
            "steering.requested",
            "steering.rejected",
        ]
        assert [s for c, s in log.writes if c == second.correlation_id] == ["rejected"]
        assert ids(apply_ready(handle)) == [first.correlation_id]
    recorder.assert_every_command_terminal()


async def test_a_redirect_that_conflicts_only_after_the_store_write_fails_at_the_queue(
    recorder: EventRecorder,
) -> None:
    # Both pass the check while neither is queued yet; whichever reaches the queue second is
    # refused there with its accepted state already durable, so it fails (the rare fallback).
    log = _CommandLog()
    async with Runtime(store=log, testing=True, sinks=[recorder]) as rt:
        handle = await start_run(rt, "r-1", redirect_conflict=RedirectConflict.ERROR)
        log.hold = asyncio.Barrier(2)  # both are past the check before either is queued
        receipts = await asyncio.gather(
            *(rt.submit(make_command("r-1", K.REDIRECT, {"goto": g})) for g in ("a", "b"))
        )
        assert all(r.accepted for r in receipts)
        (lost,) = [r for r in receipts if recorder.terminal_state(r.correlation_id) == "failed"]
        assert recorder.steering(lost.correlation_id)[-1].policy_id == "queue"
        assert ids(apply_ready(handle)) == [r.correlation_id for r in receipts if r is not lost]
    recorder.assert_every_command_terminal()


async def test_register_sets_the_redirect_conflict_policy(rt: Runtime, make_run: MakeRun) -> None:
    default = await make_run("r-1")
    assert default.inbox.queue.redirect_conflict is RedirectConflict.FIRST_ACCEPTED
    strict = await make_run("r-2", redirect_conflict=RedirectConflict.ERROR)
    assert strict.inbox.queue.redirect_conflict is RedirectConflict.ERROR


# --------------------------------------------------------------------------- pause


def test_while_paused_only_control_kinds_are_delivered() -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(cid="add", at=1))
    q.put_nowait(cmd(K.CONSTRAIN_TOOLS, cid="tools", at=2))
    q.put_nowait(cmd(K.REQUEST_STATUS, cid="status", at=3))
    q.put_nowait(cmd(K.RESUME, cid="resume", at=4))
    assert ids(q.pop_ready(Boundary.BEFORE_MODEL_CALL, paused=True)) == ["status", "resume"]
    assert ids(q.pending()) == ["add", "tools"]
    assert ids(q.pop_ready(Boundary.BEFORE_MODEL_CALL)) == ["add", "tools"]


def test_while_paused_boundary_delivers_control_kinds_whatever_their_delivery_class() -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(cid="add", at=1))
    q.put_nowait(cmd(K.RESUME, cid="resume", at=2, delivery=D.BEFORE_MODEL_CALL))
    assert q.has_ready(Boundary.WHILE_PAUSED)
    assert ids(q.pop_ready(Boundary.WHILE_PAUSED)) == ["resume"]
    assert ids(q.pending()) == ["add"]
    q.put_nowait(cmd(K.CANCEL, cid="stop", delivery=D.END_OF_TURN))
    assert ids(q.pop_ready(Boundary.WHILE_PAUSED)) == ["stop"]


def test_control_kinds_are_exactly_pause_resume_cancel_and_status() -> None:
    assert {K.PAUSE, K.RESUME, K.CANCEL, K.REQUEST_STATUS} == CONTROL_KINDS


async def test_commands_keep_queueing_while_paused(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    handle = await make_run("r-1")
    pause = await rt.submit(make_command("r-1", K.PAUSE))
    assert ids(apply_ready(handle)) == [pause.correlation_id]
    handle.inbox.paused = True  # what the loop does when it applies a pause
    work = await rt.submit(make_command("r-1"))
    assert work.accepted
    assert handle.inbox.take(Boundary.WHILE_PAUSED) == []
    assert handle.inbox.take(Boundary.BEFORE_MODEL_CALL) == []
    resume = await rt.submit(make_command("r-1", K.RESUME))
    assert ids(apply_ready(handle, Boundary.WHILE_PAUSED)) == [resume.correlation_id]
    handle.inbox.paused = False
    assert ids(apply_ready(handle)) == [work.correlation_id]
    recorder.assert_every_command_terminal()


# --------------------------------------------------------------------------- delivery classes

NON_PAUSED = [b for b in Boundary if b is not Boundary.WHILE_PAUSED]


@pytest.mark.parametrize("boundary", NON_PAUSED)
@pytest.mark.parametrize(
    ("delivery", "ready_at"),
    [
        (D.NEXT_BOUNDARY, set(NON_PAUSED)),
        (D.BEFORE_MODEL_CALL, {Boundary.BEFORE_MODEL_CALL}),
        (D.AFTER_TOOL_RESULT, {Boundary.AFTER_TOOL_RESULT}),
        (D.END_OF_TURN, set()),
    ],
)
def test_delivery_class_decides_the_boundary(
    boundary: Boundary, delivery: SteeringDelivery, ready_at: set[Boundary]
) -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(cid="x", delivery=delivery))
    expected = ["x"] if boundary in ready_at else []
    assert q.has_ready(boundary) is bool(expected)
    assert ids(q.pop_ready(boundary)) == expected
    assert len(q) == 1 - len(expected)


@pytest.mark.parametrize("boundary", NON_PAUSED)
def test_end_of_turn_is_ready_only_at_the_final_boundary(boundary: Boundary) -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(cid="eot", delivery=D.END_OF_TURN))
    q.put_nowait(cmd(cid="before-model", delivery=D.BEFORE_MODEL_CALL))
    assert "eot" not in ids(q.pop_ready(boundary))
    ready = ids(q.pop_ready(boundary, final=True))
    assert "eot" in ready


def test_immediate_cancel_is_ready_at_any_boundary() -> None:
    for boundary in Boundary:
        q = SteeringQueue()
        q.put_nowait(cmd(K.CANCEL, cid="now", delivery=D.IMMEDIATE))
        assert ids(q.pop_ready(boundary)) == ["now"]


def test_mixed_boundaries_leave_the_rest_in_order() -> None:
    q = SteeringQueue()
    q.put_nowait(cmd(cid="tool", at=1, delivery=D.AFTER_TOOL_RESULT))
    q.put_nowait(cmd(cid="any", at=2))
    q.put_nowait(cmd(cid="model", at=3, delivery=D.BEFORE_MODEL_CALL))
    q.put_nowait(cmd(cid="tool-2", at=4, delivery=D.AFTER_TOOL_RESULT))
    assert ids(q.pop_ready(Boundary.AFTER_TOOL_RESULT)) == ["tool", "any", "tool-2"]
    q.put_nowait(cmd(cid="any-2", at=0))
    assert ids(q.pop_ready(Boundary.BEFORE_MODEL_CALL)) == ["any-2", "model"]
    assert len(q) == 0


class RecordingDriver(RunDriver):
    def __init__(self, *, take_late: bool = False) -> None:
        self.take_late = take_late
        self.interrupted: list[str] = []
        self.woken = 0
        self.late: list[str] = []

    def wake(self) -> None:
        self.woken += 1

    def interrupt_now(self, cmd: SteeringCommand) -> None:
        self.interrupted.append(cmd.correlation_id)

    async def on_late_command(self, cmd: SteeringCommand) -> bool:
        self.late.append(cmd.correlation_id)
        return self.take_late


async def test_immediate_cancel_interrupts_the_driver_and_queueing_wakes_it(
    rt: Runtime, make_run: MakeRun
) -> None:
    driver = RecordingDriver()
    handle = await make_run("r-1", driver=driver)
    await rt.submit(make_command("r-1"))
    assert driver.woken == 1 and driver.interrupted == []
    stop = await rt.submit(make_command("r-1", K.CANCEL, delivery=D.IMMEDIATE))
    assert driver.interrupted == [stop.correlation_id]
    assert ids(apply_ready(handle, Boundary.AFTER_MODEL_RESPONSE)) == [stop.correlation_id]


async def test_an_immediate_instruction_built_past_validation_interrupts_nothing(
    rt: Runtime, make_run: MakeRun
) -> None:
    """``delivery=immediate`` exists only for cancel: construction refuses it for any other
    kind, but ``model_copy(update=...)`` validates nothing. Such an instruction was queued
    and interrupted the run at once, as a cancel does (an agent run then stops its model call
    and cancels its whole subtree). ``submit`` refuses it now, as construction does."""
    driver = RecordingDriver()
    handle = await make_run("r-1", driver=driver)
    forged = make_command("r-1").model_copy(update={"delivery": D.IMMEDIATE})
    with pytest.raises(InvalidCommandError, match="'immediate' exists only for cancel"):
        await rt.submit(forged)
    assert driver.interrupted == []
    assert len(handle.inbox) == 0


async def test_end_of_turn_after_the_run_finished_can_start_another_turn(
    rt: Runtime,
    make_run: MakeRun,
    recorder: EventRecorder,
    finish: Callable[[RunHandle], Awaitable[None]],
) -> None:
    driver = RecordingDriver(take_late=True)
    handle = await make_run("r-1", driver=driver)
    await finish(handle)
    more = await rt.submit(make_command("r-1", delivery=D.END_OF_TURN))
    assert driver.late == [more.correlation_id]
    handle.reopen()  # what a loop that takes the command does
    assert ids(apply_ready(handle, Boundary.BEFORE_LOOP_CONTINUATION, final=True)) == [
        more.correlation_id
    ]
    recorder.assert_lifecycle(
        more.correlation_id, ["requested", "accepted", "delivered", "applied"]
    )


async def test_late_command_fails_when_the_driver_does_not_take_it(
    rt: Runtime,
    make_run: MakeRun,
    recorder: EventRecorder,
    finish: Callable[[RunHandle], Awaitable[None]],
) -> None:
    driver = RecordingDriver(take_late=False)
    handle = await make_run("r-1", driver=driver)
    await finish(handle)
    late = await rt.submit(make_command("r-1"))
    assert late.status is ReceiptStatus.ACCEPTED
    recorder.assert_lifecycle(late.correlation_id, ["requested", "accepted", "failed"])
    assert recorder.steering(late.correlation_id)[-1].reason == "target finished before delivery"


def _aimed(c: SteeringCommand, target: object) -> SteeringCommand:
    return c.model_copy(update={"target": target})


def test_a_task_or_node_cancel_supersedes_only_what_is_aimed_at_that_task_or_node() -> None:
    """One queue per run: a cancel for graph task RIGHT superseded the approval queued for
    task LEFT (the run then waited for ever) and an update of the run's state."""
    left, right = (
        SteeringTarget.graph_task("r-1", "left"),
        SteeringTarget.graph_task("r-1", "right"),
    )
    node_c = SteeringTarget.graph_node("r-1", "c")
    q = SteeringQueue()
    approve_left = _aimed(cmd(K.APPROVE, cid="approve-left", at=0), left)
    approve_right = _aimed(cmd(K.APPROVE, cid="approve-right", at=1), right)
    update_run = cmd(K.ADD_INSTRUCTION, cid="run-wide", at=2)
    for c in (approve_left, approve_right, update_run):
        assert q.put_nowait(c).queued
    outcome = q.put_nowait(_aimed(cmd(K.CANCEL, cid="cancel-right", at=3), right))
    assert outcome.queued and [(lost.correlation_id, w) for lost, w in outcome.superseded] == [
        ("approve-right", "cancel-right")
    ]
    # a later command for the cancelled task is superseded; others are queued
    late = q.put_nowait(_aimed(cmd(K.APPROVE, cid="late-right", at=4), right))
    assert not late.queued and late.superseded[0][1] == "cancel-right"
    assert q.put_nowait(_aimed(cmd(K.CANCEL, cid="cancel-c", at=5), node_c)).superseded == []
    assert q.put_nowait(_aimed(cmd(K.ADD_INSTRUCTION, cid="for-c", at=6), node_c)).superseded
    assert ids(q.pending()) == ["approve-left", "run-wide", "cancel-right", "cancel-c"]
    # the run's own cancel supersedes everything that is not a cancel
    whole = q.put_nowait(cmd(K.CANCEL, cid="cancel-run", at=7))
    assert sorted(lost.correlation_id for lost, _ in whole.superseded) == [
        "approve-left",
        "run-wide",
    ]


def test_a_forks_redirect_conflicts_with_no_other_redirect() -> None:
    """A ``fork=True`` redirect applies on a thread of its own: it was superseded by (or,
    under 'error', rejected for) a redirect pending for the live run."""
    for policy in RedirectConflict:
        q = SteeringQueue(redirect_conflict=policy)
        assert q.put_nowait(cmd(K.REDIRECT, cid="live", at=0)).queued
        fork = cmd(K.REDIRECT, cid="fork", at=1).model_copy(
            update={"fork": True, "checkpoint_id": "cp-1"}
        )
        assert q.conflict(fork) is None
        outcome = q.put_nowait(fork)
        assert outcome.queued and outcome.superseded == [], policy
        assert ids(q.pending()) == ["live", "fork"]
        # and the other way round: a pending fork does not hold up the run's own redirect
        q = SteeringQueue(redirect_conflict=policy)
        assert q.put_nowait(fork).queued
        live = cmd(K.REDIRECT, cid="live", at=2)
        assert q.conflict(live) is None, policy
        assert q.put_nowait(live).queued and ids(q.pending()) == ["fork", "live"]


def _node(
    kind: SteeringKind, node: str, cid: str, at: int, payload: dict[str, object]
) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.graph_node("r-1", node),
        actor=cmd().actor,
        kind=kind,
        payload=payload,
        correlation_id=cid,
        created_at=EPOCH + timedelta(seconds=at),
    )


def _settled(
    policy: RedirectConflict, order: list[SteeringCommand]
) -> tuple[list[str], dict[str, str]]:
    """What one boundary takes after ``order`` was put, and who superseded whom."""
    queue, superseded = SteeringQueue(redirect_conflict=policy), {}
    for c in order:
        for loser, by in queue.put_nowait(c).superseded:
            superseded[loser.correlation_id] = by
    for loser, by in queue.settle():
        superseded[loser.correlation_id] = by
    taken = [c.correlation_id for c in queue.pop_ready(Boundary.BEFORE_MODEL_CALL)]
    return taken, superseded


@pytest.mark.parametrize("policy", [RedirectConflict.HIGHEST_PRIORITY])
@pytest.mark.parametrize("kind", [K.REDIRECT, K.REPLACE_INSTRUCTION])
def test_a_winner_a_later_cancel_ends_alone_does_not_decide_the_conflict_at_submit(
    policy: RedirectConflict, kind: SteeringKind
) -> None:
    """A command for node b beats one for the run, then a cancel of b ends it: the run's
    command stands, whatever order the three were submitted in (hypothesis found [0, 1, 2]
    dropping both and [0, 2, 1] keeping the run's)."""
    from itertools import permutations

    payload = {"goto": "c"} if kind is K.REDIRECT else {"text": "goal"}
    # for replace_instruction the newer stands: the node's is the newer one
    node_at, run_at = (0, 1) if kind is K.REDIRECT else (1, 0)
    for_node = _node(kind, "b", "for-node", node_at, payload)
    for_run = cmd(kind, at=run_at, cid="for-run", payload=payload)
    cancel_b = _node(K.CANCEL, "b", "cancel-b", 2, {})
    outcomes = {
        tuple(c.correlation_id for c in order): _settled(policy, list(order))
        for order in permutations([for_node, for_run, cancel_b])
    }
    taken, superseded = outcomes[("for-node", "for-run", "cancel-b")]
    assert set(taken) == {"for-run", "cancel-b"}
    assert superseded == {"for-node": "cancel-b"}
    assert all(o[0] == taken and set(o[1]) == {"for-node"} for o in outcomes.values()), outcomes


def test_a_conflict_left_open_is_settled_at_the_boundary() -> None:
    """Without the cancel, the pair left open at submit is settled when a boundary takes:
    the stronger stands and the other is reported superseded, once."""
    queue = SteeringQueue(redirect_conflict=RedirectConflict.HIGHEST_PRIORITY)
    for_node = _node(K.REDIRECT, "b", "for-node", 0, {"goto": "c"})
    for_run = cmd(K.REDIRECT, at=1, cid="for-run", payload={"goto": "d"})
    assert queue.put_nowait(for_node).superseded == []
    assert queue.put_nowait(for_run).superseded == []  # node b's could still be cancelled
    assert queue.settle() == [(for_run, "for-node")]
    assert queue.settle() == []
    assert [c.correlation_id for c in queue.pop_ready(Boundary.BEFORE_MODEL_CALL)] == ["for-node"]


# ------------------------------------------------------------ a bounded queue


async def test_a_run_queue_holds_at_most_max_queued_commands_then_refuses_more() -> None:
    # a run that reaches no boundary (paused, or in a long tool call) took every command: 500
    # steers of 15 KB each to a paused run were all accepted, held in memory until it went on
    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder], max_queued=3) as rt:
        handle = await start_run(rt, "r-1")
        receipts = [await rt.submit(make_command("r-1")) for _ in range(4)]
        assert [r.status for r in receipts[:3]] == [ReceiptStatus.ACCEPTED] * 3
        refused = receipts[3]
        assert (refused.status, refused.policy_id) == (ReceiptStatus.REJECTED, "queue")
        assert "max_queued=3" in (refused.reason or "") and "3 commands" in (refused.reason or "")
        assert len(handle.inbox) == 3
        # a cancel is still taken (it supersedes what it ends), and so are commands again
        # once the run has taken what waited
        cancel = await rt.submit(make_command("r-1", K.CANCEL, {"reason": "stop"}))
        assert cancel.status is ReceiptStatus.ACCEPTED
        assert len(handle.inbox) == 1  # the three steers superseded
        apply_ready(handle, Boundary.BEFORE_MODEL_CALL)
        again = await rt.submit(make_command("r-1"))
        assert again.status is ReceiptStatus.ACCEPTED
        assert recorder.of_type("steering.rejected")[-1].policy_id == "queue"


async def test_cancels_beyond_the_bound_stop_at_twice_it() -> None:
    async with Runtime(testing=True, max_queued=2) as rt:
        handle = await start_run(rt, "r-1")
        statuses = [
            (await rt.submit(make_command("r-1", K.CANCEL, {"reason": f"{i}"}))).status
            for i in range(5)
        ]
        assert statuses == [ReceiptStatus.ACCEPTED] * 4 + [ReceiptStatus.REJECTED]
        assert len(handle.inbox) == 4


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
async def test_max_queued_must_be_a_whole_number_of_at_least_one(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="max_queued"):
        Runtime(max_queued=bad)  # type: ignore[arg-type]


async def test_the_default_bound_is_a_thousand() -> None:
    async with Runtime(testing=True) as rt:
        handle = await start_run(rt, "r-1")
        for _ in range(1000):
            assert (await rt.submit(make_command("r-1"))).status is ReceiptStatus.ACCEPTED
        assert (await rt.submit(make_command("r-1"))).status is ReceiptStatus.REJECTED
        assert len(handle.inbox) == 1000
