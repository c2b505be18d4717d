"""What a live run keeps for the cyclic collector: a runtime may hold thousands of live runs,
and every object each one keeps is walked at every full collection (issue 9's steering
throughput with 10,000 runs). An idle run holds its handle, info, usage, inbox and queue;
the lists a run may need (its ``result()`` waiters, its own policies, its queue's heap) are
made on first use and the heap is dropped again once drained."""

from __future__ import annotations

import asyncio
import gc

from tinyagents.protocol import (
    Boundary,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunHandle, RunInfo, RunResult, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.steering import CheckPolicy

RUNS = 200
OPERATOR = SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"])


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


async def _register(rt: Runtime, run_id: str) -> RunHandle:
    return await rt.register(RunHandle(RunInfo(run_id=run_id, tenant_id="acme"), submitter=rt))


async def _steer_and_drain(rt: Runtime, handle: RunHandle) -> None:
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(handle.run_id),
        actor=OPERATOR,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "focus"},
    )
    assert (await rt.submit(cmd)).accepted
    for taken in handle.inbox.take(Boundary.BEFORE_MODEL_CALL):
        handle.inbox.applied(taken)


async def test_an_idle_run_keeps_five_tracked_objects() -> None:
    async with Runtime() as rt:
        await _steer_and_drain(rt, await _register(rt, "warm-up"))
        before = _tracked()
        handles = [await _register(rt, f"run-{n}") for n in range(RUNS)]
        per_run = (_tracked() - before) / RUNS
        # handle, info, usage, inbox, queue: no list, set or bound method of its own
        assert per_run < 5.5, per_run
        assert all(h.own_policies is None for h in handles)


async def test_a_drained_run_keeps_no_queue_list() -> None:
    async with Runtime() as rt:
        await _steer_and_drain(rt, await _register(rt, "warm-up"))
        before = _tracked()
        for n in range(RUNS):
            await _steer_and_drain(rt, await _register(rt, f"run-{n}"))
        per_run = (_tracked() - before) / RUNS
        # the five of an idle run, its steering history (a list), the command's four events
        # (requested, accepted, delivered, applied) kept in it, the target they name (a
        # model and its fields set) and the payload summary they share (read-only, so a
        # dict subclass, which the collector tracks where it would untrack a plain dict of
        # text): nothing of the queue
        assert per_run < 13.5, per_run


class _Refuse(CheckPolicy):
    policy_id = "refuse"

    def check(self, cmd: SteeringCommand, ctx: object) -> str | None:
        return "no"


async def test_own_policies_is_made_on_first_use() -> None:
    async with Runtime() as rt:
        handle = await _register(rt, "run-1")
        assert handle.own_policies is None
        handle.policies.append(_Refuse())  # the getter makes the list, changed in place
        assert handle.own_policies is handle.policies
        receipt = await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run("run-1"),
                actor=OPERATOR,
                kind=SteeringKind.ADD_INSTRUCTION,
                payload={"text": "focus"},
            )
        )
        assert receipt.status == "rejected" and receipt.policy_id == "refuse"


async def test_result_waiters_before_and_after_the_end() -> None:
    async with Runtime() as rt:
        handle = await _register(rt, "run-1")
        waiting = asyncio.ensure_future(handle.result())
        await asyncio.sleep(0)
        handle.finish(RunResult(run_id="run-1", status=RunStatus.COMPLETED))
        assert (await waiting).status is RunStatus.COMPLETED
        assert (await handle.result()).status is RunStatus.COMPLETED
