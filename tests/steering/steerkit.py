"""Helpers to drive steering by hand: runs are registered and finished by the test, boundaries simulated.

There is no agent loop in these tests: ``make_run`` registers a ``RunHandle`` with the runtime,
the test plays the execution layer with ``handle.inbox.take(Boundary.X)`` +
``handle.inbox.applied(cmd)``, and ``finish_run`` ends the run the way a loop would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Any, Protocol

from tinyagents.protocol import (
    AnyActor,
    AnyTarget,
    Boundary,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunDriver, RunHandle, RunInfo, RunLimits, RunResult, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.steering import RedirectConflict

OPERATOR = SteeringActor.human("ops", tenant_id="default", scopes=["agent:control"])


class MakeRun(Protocol):
    def __call__(
        self,
        run_id: str,
        *,
        parent: str | None = None,
        tools: Iterable[str] | None = None,
        models: Iterable[str] | None = None,
        tenant_id: str = "default",
        thread_id: str | None = None,
        limits: RunLimits | None = None,
        driver: RunDriver | None = None,
        redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED,
        runtime: Runtime | None = None,
        **info: Any,
    ) -> Awaitable[RunHandle]: ...


async def start_run(
    rt: Runtime,
    run_id: str,
    *,
    parent: str | None = None,
    tools: Iterable[str] | None = None,
    models: Iterable[str] | None = None,
    tenant_id: str = "default",
    thread_id: str | None = None,
    limits: RunLimits | None = None,
    driver: RunDriver | None = None,
    redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED,
    **info: Any,
) -> RunHandle:
    """Register a hand-driven run with ``rt`` (the registry fills in root and depth)."""
    run_info = RunInfo(
        run_id=run_id,
        parent_run_id=parent,
        tools=frozenset(tools) if tools is not None else None,
        models=tuple(models) if models is not None else None,
        tenant_id=tenant_id,
        thread_id=thread_id,
        limits=limits or RunLimits(),
        **info,
    )
    handle = RunHandle(run_info, submitter=rt, driver=driver)
    return await rt.register(handle, redirect_conflict=redirect_conflict)


async def finish_run(
    rt: Runtime, handle: RunHandle, status: RunStatus = RunStatus.COMPLETED
) -> None:
    await rt.finish(handle, RunResult(run_id=handle.run_id, status=status))


def apply_ready(
    handle: RunHandle, boundary: Boundary = Boundary.BEFORE_MODEL_CALL, *, final: bool = False
) -> list[SteeringCommand]:
    """Take what is deliverable at ``boundary`` and report each command applied, in order."""
    taken = handle.inbox.take(boundary, final=final)
    for cmd in taken:
        handle.inbox.applied(cmd)
    return taken


def make_command(
    run_id: str | None = None,
    kind: SteeringKind | str = SteeringKind.ADD_INSTRUCTION,
    payload: dict[str, Any] | None = None,
    *,
    actor: AnyActor | None = None,
    target: AnyTarget | None = None,
    **fields: Any,
) -> SteeringCommand:
    """A command to ``run_id`` from the operator; ``add_instruction`` gets a default text."""
    kind = SteeringKind(kind)
    if payload is None:
        payload = {"text": "focus"} if kind is SteeringKind.ADD_INSTRUCTION else {}
    if target is None:
        assert run_id is not None, "give a run_id or a target"
        target = SteeringTarget.agent_run(run_id)
    return SteeringCommand(
        target=target, actor=actor or OPERATOR, kind=kind, payload=payload, **fields
    )
