"""The router's books: lifecycle events, exactly one terminal state, dedup, late commands."""

from __future__ import annotations

from typing import Any

import pytest
from steerkit import MakeRun, apply_ready, make_command

from tinyagents.protocol import (
    Boundary,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunStatus
from tinyagents.runtime import Runtime
from tinyagents.steering import CallNext, Decision, PolicyContext
from tinyagents.steering.inbox import LATE
from tinyagents.steering.router import SteeringInvariantError
from tinyagents.testkit import EventRecorder

K = SteeringKind


async def test_applied_command_walks_the_whole_lifecycle(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    handle = await make_run("r-1")
    receipt = await rt.submit(make_command("r-1"))
    assert receipt.accepted and receipt.run_id == "r-1"
    assert rt.router.state(receipt.correlation_id) == "accepted"
    (cmd,) = handle.inbox.take(Boundary.BEFORE_MODEL_CALL, model_request_id="m-1")
    assert rt.router.state(cmd.correlation_id) == "delivered"
    handle.inbox.applied(cmd, model_request_id="m-1", tool_call_id=None)
    assert rt.router.state(cmd.correlation_id) == "applied"
    recorder.assert_lifecycle(cmd.correlation_id, ["requested", "accepted", "delivered", "applied"])
    delivered, applied = recorder.steering(cmd.correlation_id)[2:]
    assert delivered.boundary == "before_model_call"
    assert delivered.affected == {"model_request_id": "m-1"}
    assert applied.affected == {"model_request_id": "m-1", "tool_call_id": None}
    assert rt.router.open_commands() == []


async def test_failed_report_is_terminal(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    handle = await make_run("r-1")
    await rt.submit(make_command("r-1", K.REDIRECT, {"goto": "nowhere"}))
    (cmd,) = handle.inbox.take(Boundary.BEFORE_MODEL_CALL)
    handle.inbox.failed(cmd, "no node 'nowhere'")
    recorder.assert_lifecycle(cmd.correlation_id, ["requested", "accepted", "delivered", "failed"])
    assert recorder.steering(cmd.correlation_id)[-1].reason == "no node 'nowhere'"


async def test_a_second_terminal_report_is_a_loud_bug(rt: Runtime, make_run: MakeRun) -> None:
    handle = await make_run("r-1")
    await rt.submit(make_command("r-1"))
    (cmd,) = apply_ready(handle)
    with pytest.raises(SteeringInvariantError, match="not open"):
        handle.inbox.applied(cmd)
    with pytest.raises(SteeringInvariantError, match="not open"):
        handle.inbox.failed(cmd, "again")


async def test_a_copy_of_a_taken_command_is_reported_as_the_command_itself(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    # The router finds the book of a command an inbox took by the very object; an equal copy
    # (a command passed on through pickling, say) is found by its id, as ever.
    handle = await make_run("r-1")
    await rt.submit(make_command("r-1"))
    await rt.submit(make_command("r-1"))
    first, second = handle.inbox.take(Boundary.BEFORE_MODEL_CALL)
    handle.inbox.applied(first.model_copy())
    handle.inbox.failed(second, "no")
    recorder.assert_lifecycle(
        first.correlation_id, ["requested", "accepted", "delivered", "applied"]
    )
    recorder.assert_lifecycle(
        second.correlation_id, ["requested", "accepted", "delivered", "failed"]
    )
    with pytest.raises(SteeringInvariantError, match="not open"):
        handle.inbox.applied(first)  # the object itself, once its copy ended it
    assert rt.router._queued == {}  # a command's book leaves with its terminal state


async def test_reporting_a_command_that_was_never_submitted_is_a_loud_bug(
    rt: Runtime, make_run: MakeRun
) -> None:
    handle = await make_run("r-1")
    with pytest.raises(SteeringInvariantError, match="never submitted"):
        handle.inbox.applied(make_command("r-1"))


async def test_unknown_run_is_rejected_as_not_found(rt: Runtime, recorder: EventRecorder) -> None:
    receipt = await rt.submit(make_command("r-missing"))
    assert receipt.status is ReceiptStatus.REJECTED
    assert (receipt.reason, receipt.policy_id) == ("not found: run r-missing", "router")
    recorder.assert_lifecycle(receipt.correlation_id, ["requested", "rejected"])


# --------------------------------------------------------------------------- dedup


@pytest.mark.parametrize("first_outcome", ["accepted", "rejected", "applied"])
async def test_same_correlation_id_is_a_duplicate_and_changes_nothing(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, first_outcome: str
) -> None:
    handle = await make_run("r-1", tools=["search"])
    payload = {"tools": ["search"]} if first_outcome != "rejected" else {"tools": ["shell"]}
    cmd = make_command("r-1", K.CONSTRAIN_TOOLS, payload)
    first = await rt.submit(cmd)
    if first_outcome == "applied":
        apply_ready(handle)
    events_before, queued_before = len(recorder.events), len(handle.inbox)
    state_before = rt.router.state(cmd.correlation_id)

    again = await rt.submit(cmd)
    retry = await rt.submit(cmd.model_copy(update={"payload": {"tools": []}}))  # same id, new body

    assert first.status is not ReceiptStatus.DUPLICATE
    assert first.run_id == "r-1"
    for receipt in (again, retry):
        assert receipt.status is ReceiptStatus.DUPLICATE
        assert receipt.correlation_id == cmd.correlation_id
        assert receipt.run_id == first.run_id  # the run the first went to, as its receipt said
        assert receipt.reason is not None and "duplicate" in receipt.reason
    assert len(recorder.events) == events_before
    assert len(handle.inbox) == queued_before
    assert rt.router.state(cmd.correlation_id) == state_before


async def test_a_duplicate_of_a_command_to_a_hidden_run_names_no_run(
    rt: Runtime, make_run: MakeRun
) -> None:
    """A human's command to another tenant's run is answered as one to no run: its duplicate
    must not name the run either."""
    await make_run("r-x", tenant_id="other")
    cmd = make_command("r-x")  # from the operator of tenant "default"
    first, again = await rt.submit(cmd), await rt.submit(cmd)
    assert first.status is ReceiptStatus.REJECTED
    assert again.status is ReceiptStatus.DUPLICATE
    assert first.run_id is again.run_id is None


# --------------------------------------------------------------------------- late commands


async def test_pending_commands_fail_when_the_run_finishes(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, finish: Any
) -> None:
    handle = await make_run("r-1")
    pending = await rt.submit(make_command("r-1", delivery="after_tool_result"))
    taken = await rt.submit(make_command("r-1", K.REQUEST_STATUS))
    assert [c.correlation_id for c in handle.inbox.take(Boundary.BEFORE_MODEL_CALL)] == [
        taken.correlation_id
    ]
    await finish(handle)
    recorder.assert_lifecycle(pending.correlation_id, ["requested", "accepted", "failed"])
    recorder.assert_lifecycle(
        taken.correlation_id, ["requested", "accepted", "delivered", "failed"]
    )
    for receipt in (pending, taken):
        assert recorder.steering(receipt.correlation_id)[-1].reason == LATE
    assert rt.router.open_commands() == []
    assert len(handle.inbox) == 0


async def test_command_after_the_last_boundary_fails_not_dropped(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, finish: Any
) -> None:
    handle = await make_run("r-1")
    await finish(handle, RunStatus.CANCELLED)
    receipt = await rt.submit(make_command("r-1"))
    recorder.assert_lifecycle(receipt.correlation_id, ["requested", "accepted", "failed"])
    assert rt.router.state(receipt.correlation_id) == "failed"


async def test_a_command_deferred_by_a_policy_after_the_last_boundary_says_so_then_fails(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, finish: Any
) -> None:
    """As an accepted one does: its trail holds the pipeline's decision the receipt reports
    (it went requested -> failed, with no ``steering.deferred`` beside a ``deferred``
    receipt), then the failure."""

    class Hold:
        policy_id = "hold"

        async def __call__(
            self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
        ) -> Decision:
            return Decision.defer(cmd, "held", self.policy_id)

    handle = await make_run("r-1")
    await finish(handle, RunStatus.CANCELLED)
    rt.router.pipeline.insert(Hold())
    receipt = await rt.submit(make_command("r-1"))
    assert (receipt.status, receipt.reason, receipt.policy_id) == ("deferred", "held", "hold")
    recorder.assert_lifecycle(receipt.correlation_id, ["requested", "deferred", "failed"])
    deferred, failed = recorder.steering(receipt.correlation_id)[1:]
    assert (deferred.reason, deferred.policy_id) == ("held", "hold")
    assert failed.reason == f"{LATE} (deferred: held)"
    assert rt.router.state(receipt.correlation_id) == "failed"
    assert [e.type for e in rt.steering_history("r-1")][-3:] == [
        "steering.requested",
        "steering.deferred",
        "steering.failed",
    ]


async def test_finishing_one_run_leaves_other_runs_commands_alone(
    rt: Runtime, make_run: MakeRun, finish: Any
) -> None:
    one, two = await make_run("r-1"), await make_run("r-2")
    await rt.submit(make_command("r-1"))
    keep = await rt.submit(make_command("r-2"))
    two.inbox.take(Boundary.BEFORE_MODEL_CALL)
    await finish(one)
    assert rt.router.state(keep.correlation_id) == "delivered"


async def test_inbox_close_fails_what_is_left_with_the_given_reason(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    handle = await make_run("r-1")
    receipt = await rt.submit(make_command("r-1"))
    handle.inbox.close("loop crashed")
    assert recorder.steering(receipt.correlation_id)[-1].reason == "loop crashed"
    assert recorder.terminal_state(receipt.correlation_id) == "failed"


# --------------------------------------------------------------------------- history


async def test_steering_history_is_that_runs_events_in_order(
    rt: Runtime, make_run: MakeRun
) -> None:
    one = await make_run("r-1")
    await make_run("r-2")
    a = await rt.submit(make_command("r-1"))
    await rt.submit(make_command("r-2"))
    b = await rt.submit(make_command("r-1", K.PAUSE))
    apply_ready(one)
    history = rt.steering_history("r-1")
    assert [(e.type, e.correlation_id) for e in history] == [
        ("steering.requested", a.correlation_id),
        ("steering.accepted", a.correlation_id),
        ("steering.requested", b.correlation_id),
        ("steering.accepted", b.correlation_id),
        ("steering.delivered", a.correlation_id),
        ("steering.delivered", b.correlation_id),
        ("steering.applied", a.correlation_id),
        ("steering.applied", b.correlation_id),
    ]
    assert [e.kind for e in history if e.type == "steering.applied"] == [K.ADD_INSTRUCTION, K.PAUSE]
    assert rt.steering_history("r-nobody") == []
    history.clear()  # a copy: the runtime's books are untouched
    assert len(rt.steering_history("r-1")) == 8


async def test_a_child_steered_by_someone_else_is_reported_to_its_parent(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    await make_run("parent")
    await make_run("child", parent="parent")
    receipt = await rt.submit(make_command("child", K.PAUSE))
    (steered,) = recorder.of_type("subagent.steered")
    assert steered.run_id == "parent"
    assert steered.child_run_id == "child"  # type: ignore[attr-defined]
    assert steered.correlation_id == receipt.correlation_id  # type: ignore[attr-defined]
    # The parent steering its own child is not news to the parent.
    await rt.submit(make_command("child", actor=SteeringActor.parent_agent("parent", "boss")))
    assert len(recorder.of_type("subagent.steered")) == 1


async def test_subagent_target_lands_in_the_childs_inbox(rt: Runtime, make_run: MakeRun) -> None:
    await make_run("parent")
    child = await make_run("child", parent="parent")
    receipt = await rt.submit(make_command(target=SteeringTarget.subagent_run("parent", "child")))
    assert receipt.run_id == "child"
    assert len(child.inbox) == 1
