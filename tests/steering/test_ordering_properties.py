"""hypothesis: ordering does not depend on arrival order; constraints never widen."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from functools import reduce
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from steerkit import make_command, start_run

from tinyagents.protocol import (
    Boundary,
    ReceiptStatus,
    SteeringCommand,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.runs import RunHandle
from tinyagents.runtime import Runtime
from tinyagents.steering import (
    RedirectConflict,
    SteeringQueue,
    narrow_models,
    narrow_tools,
    order_key,
)
from tinyagents.testkit import EPOCH

K = SteeringKind
PAYLOADS: dict[SteeringKind, dict[str, Any]] = {
    K.ADD_INSTRUCTION: {"text": "more"},
    K.REPLACE_INSTRUCTION: {"text": "new goal"},
    K.PROVIDE_CONTEXT: {"text": "fyi"},
    K.CONSTRAIN_TOOLS: {"tools": ["a"]},
    K.PAUSE: {},
    K.RESUME: {},
    K.CANCEL: {},
    K.REQUEST_STATUS: {},
    K.REDIRECT: {"goto": "n"},
    K.UPDATE_STATE: {"update": {"x": 1}},
}


#: The run itself, two of its graph tasks and a node: a cancel of a task (or node) ends only
#: what is aimed at that task (or node), so whether a redirect or a replace_instruction wins
#: may stay open until the boundary (``SteeringQueue.settle``); the order must not matter.
TARGETS = [
    SteeringTarget.agent_run("r-1"),
    SteeringTarget.graph_task("r-1", "t-1"),
    SteeringTarget.graph_task("r-1", "t-2"),
    SteeringTarget.graph_node("r-1", "n-1"),
]


@st.composite
def command_sets(draw: st.DrawFn, *, max_size: int = 12) -> list[tuple[SteeringCommand, int]]:
    """Distinct commands (unique ids, colliding timestamps and priorities) with a depth each,
    each aimed at the run or at one of its tasks or nodes."""
    n = draw(st.integers(1, max_size))
    out: list[tuple[SteeringCommand, int]] = []
    for i in range(n):
        kind = draw(st.sampled_from(list(PAYLOADS)))
        cmd = make_command(
            None,
            kind,
            PAYLOADS[kind],
            target=draw(st.sampled_from(TARGETS)),
            correlation_id=f"c-{draw(st.integers(0, 10**6)):07d}-{i}",
            created_at=EPOCH + timedelta(seconds=draw(st.integers(0, 3))),
            priority=draw(st.sampled_from(list(SteeringPriority))),
        )
        out.append((cmd, draw(st.integers(0, 2))))
    return out


def drain(
    entries: list[tuple[SteeringCommand, int]], order: list[int]
) -> tuple[list[str], set[str]]:
    q = SteeringQueue(redirect_conflict=RedirectConflict.HIGHEST_PRIORITY)
    superseded: set[str] = set()
    for i in order:
        cmd, depth = entries[i]
        outcome = q.put_nowait(cmd, depth)
        superseded |= {loser.correlation_id for loser, _ in outcome.superseded}
    # what the inbox does at a boundary: settle the conflicts left open, then take
    superseded |= {loser.correlation_id for loser, _ in q.settle()}
    ready = q.pop_ready(Boundary.BEFORE_MODEL_CALL)
    return [c.correlation_id for c in ready], superseded


@settings(max_examples=100, deadline=None)
@given(data=st.data(), entries=command_sets())
def test_any_arrival_order_drains_the_same_way(
    data: st.DataObject, entries: list[tuple[SteeringCommand, int]]
) -> None:
    order = list(range(len(entries)))
    shuffled = data.draw(st.permutations(order))
    drained, superseded = drain(entries, order)
    assert drain(entries, shuffled) == (drained, superseded)

    keys = {cmd.correlation_id: order_key(cmd, depth) for cmd, depth in entries}
    assert [keys[cid] for cid in drained] == sorted(keys[cid] for cid in drained)
    assert set(drained) | superseded == set(keys)  # nothing lost, nothing twice
    assert not set(drained) & superseded


async def _submit_and_apply(cmds: list[SteeringCommand]) -> list[str]:
    async with Runtime(testing=True) as rt:
        handle = await start_run(rt, "r-1", redirect_conflict=RedirectConflict.HIGHEST_PRIORITY)
        for cmd in cmds:
            await rt.submit(cmd)
        applied = []
        for cmd in handle.inbox.take(Boundary.BEFORE_MODEL_CALL):
            handle.inbox.applied(cmd)
            applied.append(cmd.correlation_id)
        assert rt.router.open_commands() == []
        return applied


@settings(max_examples=50, deadline=None)
@given(data=st.data(), entries=command_sets(max_size=8))
def test_any_submission_order_applies_the_same_way_through_the_router(
    data: st.DataObject, entries: list[tuple[SteeringCommand, int]]
) -> None:
    cmds = [cmd for cmd, _ in entries]
    shuffled = data.draw(st.permutations(cmds))
    assert asyncio.run(_submit_and_apply(shuffled)) == asyncio.run(_submit_and_apply(cmds))


# --------------------------------------------------------------------------- narrowing

TOOL_UNIVERSE = ["search", "fetch", "shell", "mail", "calc", "sql"]
MODEL_UNIVERSE = ["m-a", "m-b", "m-c", "m-d", "m-e"]
tool_lists = st.lists(st.sampled_from(TOOL_UNIVERSE), max_size=6)
model_lists = st.lists(st.sampled_from(MODEL_UNIVERSE), min_size=1, max_size=5)


@settings(max_examples=100, deadline=None)
@given(
    initial=st.none() | st.frozensets(st.sampled_from(TOOL_UNIVERSE)),
    requests=st.lists(tool_lists, max_size=8),
)
def test_narrow_tools_never_widens(
    initial: frozenset[str] | None, requests: list[list[str]]
) -> None:
    current = initial
    for requested in requests:
        narrowed = narrow_tools(current, requested)
        assert narrowed <= set(requested)
        if current is not None:
            assert narrowed <= current
        current = narrowed
    if requests:
        assert current is not None
        assert current <= reduce(frozenset.intersection, map(frozenset, requests))


@settings(max_examples=100, deadline=None)
@given(
    initial=st.none() | st.lists(st.sampled_from(MODEL_UNIVERSE), unique=True).map(tuple),
    requests=st.lists(model_lists, max_size=8),
)
def test_narrow_models_never_widens_nor_reorders(
    initial: tuple[str, ...] | None, requests: list[list[str]]
) -> None:
    current = initial
    for requested in requests:
        narrowed = narrow_models(current, requested)
        assert set(narrowed) <= set(requested)
        assert len(set(narrowed)) == len(narrowed)
        if current is not None:
            assert [m for m in current if m in narrowed] == list(narrowed)  # a subsequence
        current = narrowed


constrain_steps = st.lists(
    st.one_of(
        st.tuples(st.just("tools"), tool_lists),
        st.tuples(st.just("models"), model_lists),
        st.tuples(st.just("apply"), st.just([])),
    ),
    max_size=12,
)


async def _constrain_through_router(
    initial_tools: frozenset[str],
    initial_models: tuple[str, ...],
    steps: list[tuple[str, list[str]]],
) -> None:
    async with Runtime(testing=True) as rt:
        handle = await start_run(rt, "r-1", tools=initial_tools, models=initial_models)
        info = handle.info
        for what, names in steps:
            if what == "apply":
                _apply_constraints(handle)
            else:
                kind = K.CONSTRAIN_TOOLS if what == "tools" else K.CONSTRAIN_MODEL
                allowed = set(info.tools or ()) if what == "tools" else set(info.models or ())
                receipt = await rt.submit(make_command("r-1", kind, {what: names}))
                widens = not set(names) <= allowed
                assert receipt.status is (
                    ReceiptStatus.REJECTED if widens else ReceiptStatus.ACCEPTED
                )
                if widens:
                    assert receipt.policy_id == "allowlist"
            assert info.tools is not None and info.tools <= initial_tools
            assert info.models is not None and set(info.models) <= set(initial_models)
        _apply_constraints(handle)
        assert rt.router.open_commands() == []


def _apply_constraints(handle: RunHandle) -> None:
    """What the execution layer does with a delivered constrain_* command."""
    info = handle.info
    for cmd in handle.inbox.take(Boundary.BEFORE_MODEL_CALL):
        if cmd.kind is K.CONSTRAIN_TOOLS:
            info.tools = narrow_tools(info.tools, cmd.payload["tools"])
        else:
            info.models = narrow_models(info.models, cmd.payload["models"])
        handle.inbox.applied(cmd)


@settings(max_examples=75, deadline=None)
@given(
    initial_tools=st.frozensets(st.sampled_from(TOOL_UNIVERSE), min_size=1),
    initial_models=st.lists(st.sampled_from(MODEL_UNIVERSE), min_size=1, unique=True).map(tuple),
    steps=constrain_steps,
)
def test_constraints_through_the_router_never_widen(
    initial_tools: frozenset[str],
    initial_models: tuple[str, ...],
    steps: list[tuple[str, list[str]]],
) -> None:
    asyncio.run(_constrain_through_router(initial_tools, initial_models, steps))
