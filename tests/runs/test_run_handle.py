"""``RunHandle`` control helpers go through the runtime's router like any other command."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tinyagents.errors import SteeringRejected
from tinyagents.protocol import (
    Boundary,
    ReceiptStatus,
    SteeringActor,
    SteeringDelivery,
    SteeringKind,
)
from tinyagents.runs import RunHandle, RunInfo, RunResult, RunStatus
from tinyagents.runtime import Runtime


@pytest.fixture
async def rt() -> AsyncIterator[Runtime]:
    async with Runtime(testing=True) as runtime:
        yield runtime


async def register(rt: Runtime, run_id: str, **info: object) -> RunHandle:
    return await rt.register(RunHandle(RunInfo(run_id=run_id, **info), submitter=rt))  # type: ignore[arg-type]


async def test_helpers_build_the_matching_commands(rt: Runtime) -> None:
    handle = await register(rt, "r-1", tenant_id="acme", tools=frozenset({"search", "fetch"}))
    await handle.steer("focus on billing")
    await handle.pause("lunch")
    await handle.resume()
    await handle.request_status()
    await handle.constrain_tools(["search"])
    await handle.update_budget(max_model_calls=3)
    await handle.cancel("done", immediate=True)
    # The cancel superseded everything queued before it.
    (cancel,) = handle.inbox.take(Boundary.BEFORE_MODEL_CALL)
    assert (cancel.kind, cancel.delivery, cancel.payload) == (
        SteeringKind.CANCEL,
        SteeringDelivery.IMMEDIATE,
        {"reason": "done"},
    )
    kinds = [e.kind for e in rt.steering_history("r-1") if e.type == "steering.accepted"]
    assert kinds == [
        SteeringKind.ADD_INSTRUCTION,
        SteeringKind.PAUSE,
        SteeringKind.RESUME,
        SteeringKind.REQUEST_STATUS,
        SteeringKind.CONSTRAIN_TOOLS,
        SteeringKind.UPDATE_BUDGET,
        SteeringKind.CANCEL,
    ]
    operator = rt.steering_history("r-1")[0].actor
    assert operator == SteeringActor.human(
        "local-operator", tenant_id="acme", scopes=["agent:control"]
    )


async def test_rejection_raises_unless_asked_not_to(rt: Runtime) -> None:
    handle = await register(rt, "r-1", tools=frozenset({"search"}))
    with pytest.raises(SteeringRejected, match="only narrow") as err:
        await handle.constrain_tools(["shell"])
    assert err.value.receipt.policy_id == "allowlist"
    viewer = SteeringActor.human("vic", scopes=[])
    receipt = await handle.submit(SteeringKind.PAUSE, actor=viewer, check=False)
    assert receipt.status is ReceiptStatus.REJECTED


async def test_result_waits_for_finish_and_reopen_starts_another_turn(rt: Runtime) -> None:
    handle = await register(rt, "r-1")
    assert not handle.done and handle.status is RunStatus.RUNNING
    await rt.finish(handle, RunResult(run_id="r-1", status=RunStatus.COMPLETED, output="ok"))
    assert handle.done
    assert (await handle.result()).output == "ok"
    assert handle.status is RunStatus.COMPLETED
    handle.reopen()
    assert not handle.done and handle.status is RunStatus.RUNNING
    assert repr(handle) == "<RunHandle r-1 agent running>"


async def test_runtime_tree_and_listing(rt: Runtime) -> None:
    await register(rt, "root", tenant_id="acme")
    await register(rt, "kid", parent_run_id="root", tenant_id="acme")
    await register(rt, "other", tenant_id="globex")
    node = rt.tree("root")
    assert node is not None
    snap = json.loads(json.dumps(node.snapshot()))
    assert [c["run_id"] for c in snap["children"]] == ["kid"]
    assert snap["children"][0]["depth"] == 1
    assert rt.tree("missing") is None
    assert [i.run_id for i in rt.runs.list(tenant_id="acme")] == ["root", "kid"]


async def test_update_budget_takes_the_command_keywords_and_refuses_a_fixed_limit(
    rt: Runtime,
) -> None:
    """docs/harness.md: ``update_budget`` takes ``actor=``, ``priority=`` ... as the other
    control methods do (the page said it did not), and a limit it cannot change is a
    ``TypeError`` before anything is sent."""
    handle = await register(rt, "r-1", tenant_id="acme")
    bob = SteeringActor.human("bob", tenant_id="acme", scopes=["agent:control"])
    receipt = await handle.update_budget(max_model_calls=5, actor=bob, priority=100)
    assert receipt.status == ReceiptStatus.ACCEPTED
    (cmd,) = handle.inbox.take(Boundary.BEFORE_MODEL_CALL)
    assert (cmd.actor, cmd.priority, cmd.payload) == (bob, 100, {"max_model_calls": 5})
    with pytest.raises(TypeError, match="cannot change max_depth"):
        await handle.update_budget(max_depth=3)
    assert [e.type for e in rt.steering_history("r-1")][-1] == "steering.delivered"
