"""Seed scenarios that need no agent loop: a small run tree, deterministic ids and clock,
commands from several actors, and the whole event stream checked."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from steerkit import apply_ready, make_command, start_run

from tinyagents.protocol import ReceiptStatus, SteeringActor, SteeringKind, SteeringPriority
from tinyagents.runtime import Runtime
from tinyagents.testkit import EventRecorder, FakeClock, SequentialIds, use_clock, use_ids

K = SteeringKind


@pytest.fixture
async def tree() -> AsyncIterator[tuple[Runtime, EventRecorder]]:
    """orchestrator (acme) ─┬─ researcher ── fetcher
    └─ writer"""
    recorder = EventRecorder()
    with use_ids(SequentialIds()), use_clock(FakeClock(tick=0.001)):
        async with Runtime(testing=True, sinks=[recorder]) as rt:
            await start_run(rt, "orchestrator", tenant_id="acme", tools=["search", "fetch"])
            await start_run(
                rt, "researcher", parent="orchestrator", tenant_id="acme", tools=["search"]
            )
            await start_run(rt, "writer", parent="orchestrator", tenant_id="acme", tools=["draft"])
            await start_run(rt, "fetcher", parent="researcher", tenant_id="acme", tools=["fetch"])
            yield rt, recorder


async def test_missing_authority_is_rejected_with_a_reason(
    tree: tuple[Runtime, EventRecorder],
) -> None:
    rt, recorder = tree
    researcher = SteeringActor.parent_agent("researcher", "researcher")
    viewer = SteeringActor.human("vic", tenant_id="acme", scopes=["agent:read"])
    outsider = SteeringActor.human("eve", tenant_id="globex", scopes=["agent:control"])

    sibling = await rt.submit(make_command("writer", actor=researcher))
    no_scope = await rt.submit(make_command("writer", K.PAUSE, actor=viewer))
    foreign = await rt.submit(make_command("writer", K.CANCEL, actor=outsider))
    missing = await rt.submit(make_command("ghost", K.CANCEL, actor=outsider))
    own_child = await rt.submit(make_command("fetcher", actor=researcher))

    assert [r.status for r in (sibling, no_scope, foreign, missing, own_child)] == [
        ReceiptStatus.REJECTED,
        ReceiptStatus.REJECTED,
        ReceiptStatus.REJECTED,
        ReceiptStatus.REJECTED,
        ReceiptStatus.ACCEPTED,
    ]
    assert sibling.reason == (
        'forbidden: parent agent "researcher" (run researcher) may steer only its own '
        "descendants; run writer is its sibling"
    )
    assert no_scope.reason == "forbidden: human \"vic\" lacks the scope 'agent:control'"
    assert foreign.reason == "not found: run writer"
    assert missing.reason == "not found: run ghost"
    assert (foreign.policy_id, foreign.run_id) == (missing.policy_id, missing.run_id)

    assert recorder.types("steering.") == [
        *["steering.requested", "steering.rejected"] * 4,
        "steering.requested",
        "steering.accepted",
    ]
    assert [e.correlation_id for e in recorder.steering()][:2] == ["c-0001", "c-0001"]
    assert len(rt.runs.get("writer").inbox) == 0  # type: ignore[union-attr]


async def test_tool_allowlist_expansion_is_rejected(tree: tuple[Runtime, EventRecorder]) -> None:
    rt, recorder = tree
    orchestrator = SteeringActor.parent_agent("orchestrator", "orchestrator")
    widen = await rt.submit(
        make_command(
            "researcher", K.CONSTRAIN_TOOLS, {"tools": ["search", "shell"]}, actor=orchestrator
        )
    )
    narrow = await rt.submit(
        make_command("fetcher", K.CONSTRAIN_TOOLS, {"tools": []}, actor=orchestrator)
    )
    assert widen.status is ReceiptStatus.REJECTED
    assert widen.policy_id == "allowlist"
    assert widen.reason == (
        "constrain_tools would widen the tools of run researcher with ['shell']; "
        "allowed now: ['search'] — steering can only narrow"
    )
    assert narrow.accepted
    recorder.assert_lifecycle(widen.correlation_id, ["requested", "rejected"])
    assert rt.runs.get("researcher").info.tools == {"search"}  # type: ignore[union-attr]


async def _simultaneous(reverse: bool) -> list[tuple[str, str]]:
    """Five commands created at the same instant by five actors, submitted in some order."""
    with use_ids(SequentialIds()), use_clock(FakeClock()):  # no tick: one timestamp for all
        cmds = [
            make_command("fetcher", payload={"text": "from ops"}),
            make_command(
                "fetcher",
                K.PROVIDE_CONTEXT,
                {"text": "from the orchestrator"},
                actor=SteeringActor.parent_agent("orchestrator", "orchestrator"),
                priority=SteeringPriority.HIGH,
            ),
            make_command(
                "fetcher",
                K.REQUEST_STATUS,
                actor=SteeringActor.middleware("guard"),
                priority=SteeringPriority.CRITICAL,
            ),
            make_command(
                "fetcher",
                payload={"text": "from a test"},
                actor=SteeringActor.test(),
                priority=SteeringPriority.LOW,
            ),
            make_command(
                "fetcher",
                payload={"text": "from the researcher"},
                actor=SteeringActor.parent_agent("researcher", "researcher"),
            ),
        ]
        # A runtime-level middleware trusted by name ("supervisor" is trusted only through
        # the capability of the runtime's own supervisor).
        async with Runtime(testing=True, trusted_middleware=["guard"]) as rt:
            await start_run(rt, "orchestrator")
            await start_run(rt, "researcher", parent="orchestrator")
            fetcher = await start_run(rt, "fetcher", parent="researcher")
            for cmd in reversed(cmds) if reverse else cmds:
                assert (await rt.submit(cmd)).accepted
            return [(c.correlation_id, c.actor.type) for c in apply_ready(fetcher)]


async def test_simultaneous_commands_are_ordered_deterministically() -> None:
    forward = await _simultaneous(reverse=False)
    assert forward == [
        ("c-0003", "middleware"),  # CRITICAL
        ("c-0002", "parent_agent"),  # HIGH
        ("c-0001", "human"),  # NORMAL, then by correlation id
        ("c-0005", "parent_agent"),
        ("c-0004", "test"),  # LOW
    ]
    assert await _simultaneous(reverse=True) == forward
