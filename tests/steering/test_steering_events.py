"""What every ``steering.*`` event carries, for all eight types, on a run deep in a tree."""

from __future__ import annotations

import json
import pickle
from datetime import datetime

import pytest
from steerkit import MakeRun, make_command

from tinyagents.events import STEERING_EVENT_TYPES, SteeringEvent, parse_event
from tinyagents.protocol import Boundary, SteeringActor, SteeringCommand, SteeringKind
from tinyagents.runtime import Runtime
from tinyagents.steering import CallNext, Decision, PolicyContext
from tinyagents.testkit import EventRecorder, FakeClock, use_clock

K = SteeringKind
ORCHESTRATOR = SteeringActor.parent_agent("root", "orchestrator")


class DeferStatus:
    policy_id = "defer-status"

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        if cmd.kind is K.REQUEST_STATUS:
            return Decision.defer(cmd, "status later", self.policy_id)
        return await call_next(cmd)


async def test_all_eight_steering_events_carry_tree_actor_kind_and_ids(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    rt.router.pipeline.insert(DeferStatus(), after="authority")
    await make_run("root", tenant_id="acme")
    await make_run("child", parent="root", tenant_id="acme")
    leaf = await make_run("leaf", parent="child", tenant_id="acme", tools=["search"])

    applied = await rt.submit(make_command("leaf", actor=ORCHESTRATOR))
    failed = await rt.submit(make_command("leaf", K.REDIRECT, {"goto": "x"}, actor=ORCHESTRATOR))
    (a, f) = leaf.inbox.take(Boundary.BEFORE_MODEL_CALL)
    leaf.inbox.applied(a, model_request_id="m-1")
    leaf.inbox.failed(f, "no such node")
    rejected = await rt.submit(
        make_command("leaf", K.CONSTRAIN_TOOLS, {"tools": ["shell"]}, actor=ORCHESTRATOR)
    )
    deferred = await rt.submit(make_command("leaf", K.REQUEST_STATUS, actor=ORCHESTRATOR))
    old = await rt.submit(
        make_command("leaf", K.REPLACE_INSTRUCTION, {"text": "a"}, actor=ORCHESTRATOR)
    )
    await rt.submit(make_command("leaf", K.REPLACE_INSTRUCTION, {"text": "b"}, actor=ORCHESTRATOR))

    events = recorder.steering()
    assert {e.type for e in events} == set(STEERING_EVENT_TYPES)
    for event in events:
        assert isinstance(event, SteeringEvent)
        assert (event.run_id, event.root_run_id, event.parent_run_id) == ("leaf", "root", "child")
        assert event.tenant_id == "acme"
        assert event.actor == ORCHESTRATOR
        assert event.target.run_id == "leaf"  # type: ignore[union-attr]
        assert event.kind is not None and event.correlation_id
        assert event.at is not None

    def last(receipt_cid: str) -> SteeringEvent:
        return recorder.steering(receipt_cid)[-1]

    assert last(rejected.correlation_id).policy_id == "allowlist"
    assert last(rejected.correlation_id).reason is not None
    deferred_event = last(deferred.correlation_id)
    assert (deferred_event.type, deferred_event.policy_id) == ("steering.deferred", "defer-status")
    assert deferred_event.reason == "status later"
    accepted = recorder.steering(applied.correlation_id)[1]
    assert (accepted.type, accepted.policy_id) == ("steering.accepted", "default")
    assert last(applied.correlation_id).affected == {"model_request_id": "m-1"}
    assert last(failed.correlation_id).reason == "no such node"
    superseded = last(old.correlation_id)
    assert superseded.type == "steering.superseded" and superseded.superseded_by


async def test_offsets_increase_across_all_events(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    handle = await make_run("r-1")
    for _ in range(5):
        await rt.submit(make_command("r-1"))
    await rt.submit(make_command("r-missing"))
    for cmd in handle.inbox.take(Boundary.BEFORE_MODEL_CALL):
        handle.inbox.applied(cmd)
    offsets = [e.offset for e in recorder.events]
    assert offsets == list(range(len(offsets)))
    assert rt.bus.published == len(offsets)


async def test_events_have_kind_and_payload_summary(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    await make_run("r-1")
    long_text = "word " * 100
    receipt = await rt.submit(make_command("r-1", payload={"text": long_text}))
    (requested, accepted) = recorder.steering(receipt.correlation_id)
    assert requested.kind is K.ADD_INSTRUCTION
    summary = requested.payload_summary["text"]
    assert summary.endswith(f"({len(long_text)} chars)") and len(summary) < len(long_text)
    assert accepted.payload_summary == requested.payload_summary


async def test_one_step_stamps_its_events_with_one_moment(make_run: MakeRun) -> None:
    """``at`` is when the step that emitted an event happened: requested and its decision
    (accepted, rejected) are one submit, the deliveries of one boundary one take; the clock
    is read once for each, and read again for the next step (``tick`` moves it every read)."""
    recorder = EventRecorder()
    with use_clock(FakeClock(tick=1.0)):
        async with Runtime(testing=True, sinks=[recorder]) as runtime:
            handle = await make_run("r-1", runtime=runtime, tools=["search"])
            first = await runtime.submit(make_command("r-1"))
            second = await runtime.submit(make_command("r-1"))
            refused = await runtime.submit(
                make_command("r-1", K.CONSTRAIN_TOOLS, {"tools": ["shell"]})
            )
            taken = handle.inbox.take(Boundary.BEFORE_MODEL_CALL)
            for cmd in taken:
                handle.inbox.applied(cmd)

    def at(cid: str) -> dict[str, datetime]:
        return {e.type.removeprefix("steering."): e.at for e in recorder.steering(cid)}

    one, two, three = (
        at(first.correlation_id),
        at(second.correlation_id),
        at(refused.correlation_id),
    )
    assert one["requested"] == one["accepted"] < two["requested"] == two["accepted"]
    assert three["requested"] == three["rejected"] > two["accepted"]
    assert len(taken) == 2 and one["delivered"] == two["delivered"] > three["rejected"]
    assert one["delivered"] < one["applied"] < two["applied"]


async def test_a_commands_shared_payload_summary_is_read_only(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    """A command's four events share one ``payload_summary`` (built once per command): a
    consumer that changed it in one event would change it in the other three and in the
    run's steering history. It is read-only at every level; ``dict(...)``/``.copy()`` give
    a plain dict to change."""
    handle = await make_run("r-1", tools=["search", "shell"])
    narrowed = await rt.submit(make_command("r-1", K.CONSTRAIN_TOOLS, {"tools": ["search"]}))
    context = await rt.submit(
        make_command("r-1", K.PROVIDE_CONTEXT, {"value": {"rows": [1, {"id": "a"}]}})
    )
    for cmd in handle.inbox.take(Boundary.BEFORE_MODEL_CALL):
        handle.inbox.applied(cmd)
    tools = recorder.steering(narrowed.correlation_id)
    values = recorder.steering(context.correlation_id)
    assert [e.type for e in tools] == [
        "steering.requested",
        "steering.accepted",
        "steering.delivered",
        "steering.applied",
    ]
    first, nested = tools[0].payload_summary, values[0].payload_summary
    changes = [
        lambda: first.__setitem__("tools", ["shell"]),
        lambda: first.__delitem__("tools"),
        lambda: first.update(tools=["shell"]),
        lambda: first.setdefault("extra", 1),
        lambda: first.pop("tools"),
        lambda: first.popitem(),
        first.clear,
        lambda: first["tools"].append("shell"),
        lambda: first["tools"].__setitem__(0, "shell"),
        lambda: first["tools"].extend(["shell"]),
        lambda: first["tools"].sort(),
        lambda: nested["value"]["rows"].pop(),
        lambda: nested["value"]["rows"][1].__setitem__("id", "b"),
        lambda: nested["value"].__setitem__("rows", []),
    ]
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change()
    with pytest.raises(TypeError, match="read-only"):
        first |= {"tools": ["shell"]}  # type: ignore[misc]
    history = rt.steering_history("r-1")
    for receipt, summary in [
        (narrowed, {"tools": ["search"]}),
        (context, {"value": {"rows": [1, {"id": "a"}]}}),
    ]:
        mine = [e.payload_summary for e in history if e.correlation_id == receipt.correlation_id]
        assert mine == 4 * [summary]
    plain = first.copy()
    plain["tools"] = ["shell"]
    other = dict(nested)
    other["value"] = None
    assert (type(plain), type(other)) == (dict, dict)
    assert tools[3].payload_summary == {"tools": ["search"]}
    assert values[3].payload_summary == {"value": {"rows": [1, {"id": "a"}]}}
    # Read-only, and otherwise what it was: a dict and lists, in JSON and through pickle.
    for event in (tools[0], values[0]):
        assert isinstance(event.payload_summary, dict)
        assert parse_event(event.to_json()).payload_summary == event.payload_summary
        assert event.to_dict(mode="json")["payload_summary"] == event.payload_summary
        copied = pickle.loads(pickle.dumps(event.payload_summary))
        assert copied == event.payload_summary
        assert type(copied) is type(event.payload_summary)
    assert json.loads(json.dumps(nested)) == {"value": {"rows": [1, {"id": "a"}]}}
