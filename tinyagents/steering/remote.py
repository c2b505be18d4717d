"""Steering a run that another process owns, through the store both share.

    receipt = await submit_through_store(store, cmd, timeout_s=5.0)

The command goes into the store's inbox, addressed to the runtime that owns the run (the
``owner`` of its snapshot); that runtime takes it within ~50 ms, runs it through its own
``submit`` (its policies, its deduplication by correlation id) and writes the receipt back,
which this side waits for. Only obviously hopeless commands are answered here: an unknown
run, another tenant's run (both ``not found``), a finished run, and a run whose owner has
stopped writing its heartbeat (``OWNER_SILENT_S``) — unless the steering log
already holds the command's correlation id: then a retry is answered ``duplicate``, as the
owner would have answered it.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from tinyagents import _clock
from tinyagents.errors import ReceiptTimeout, StoreError
from tinyagents.protocol.commands import (
    HumanActor,
    ReceiptStatus,
    SteeringCommand,
    SteeringReceipt,
    ThreadTarget,
    dedupe_scope,
)
from tinyagents.runs.info import RunStatus
from tinyagents.steering.policies import not_found
from tinyagents.store.base import Store, run_key

#: How often the submitter reads the store for its receipt.
RECEIPT_POLL_S = 0.02
#: A live run's owner rewrites its snapshot every second (``Runtime`` heartbeat); one silent
#: for this long is taken for gone (its inbox would never be read), with room for clock skew.
OWNER_SILENT_S = 30.0


async def submit_through_store(
    store: Store, cmd: SteeringCommand, *, timeout_s: float = 5.0
) -> SteeringReceipt:
    """The receipt the owning runtime gives ``cmd``; raises ``ReceiptTimeout`` when none
    comes within ``timeout_s`` (the command may still be applied later)."""
    snapshot = await target_snapshot(store, cmd)
    refusal = refuse(cmd, snapshot)
    if refusal is not None:
        if snapshot is not None and await _logged(store, cmd):
            # A retry of a command its owner already took: the first outcome stands.
            return duplicate(cmd)
        return refusal
    assert snapshot is not None
    owner = str(snapshot["owner"])
    request_id = _clock.new_id("req")
    await store.inbox_put(owner=owner, request_id=request_id, command=cmd)
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                receipt = await store.inbox_receipt(request_id)
                if receipt is not None:
                    return receipt
                await asyncio.sleep(RECEIPT_POLL_S)
    except TimeoutError:
        raise ReceiptTimeout(cmd.correlation_id, owner, timeout_s) from None


async def target_snapshot(store: Store, cmd: SteeringCommand) -> dict[str, Any] | None:
    """The snapshot of the run ``cmd`` targets (for a thread: its newest unfinished run whose
    owner is alive; the newest one whose owner went silent when there is no other, which
    ``refuse`` then answers)."""
    target = cmd.target
    if not isinstance(target, ThreadTarget):
        return await store.load_run(target.run_id)
    tenant = cmd.actor.tenant_id if isinstance(cmd.actor, HumanActor) else None
    # The tenant's unfinished runs, newest first, a page at a time (never every run it had).
    # A run of a process that died stays unfinished in the store for ever: it must not hide
    # an older live run of the thread (the command went nowhere).
    before = None
    silent: dict[str, Any] | None = None
    while True:
        page = await store.list_runs(
            tenant_id=tenant, statuses=_UNFINISHED, before=before, limit=_THREAD_PAGE
        )
        for snapshot in page:
            if snapshot.get("thread_id") != target.thread_id:
                continue
            if not owner_silent(snapshot):
                return snapshot
            silent = silent or snapshot
        if len(page) < _THREAD_PAGE:
            return silent
        before = run_key(page[-1])


#: The statuses of runs that may still take a command, and how many a thread lookup reads at once.
_UNFINISHED = tuple(status.value for status in RunStatus if not status.finished)
_THREAD_PAGE = 200


def refuse(cmd: SteeringCommand, snapshot: dict[str, Any] | None) -> SteeringReceipt | None:
    """The rejection the submitting side gives without asking the owner, or None."""
    actor = cmd.actor
    if snapshot is None or (
        isinstance(actor, HumanActor) and actor.tenant_id != snapshot.get("tenant_id")
    ):
        return _rejected(cmd, not_found(cmd), None)  # the same words for both
    run_id = snapshot.get("run_id")
    if _finished(snapshot):
        return _rejected(cmd, f"target finished: run {run_id} is {snapshot['status']}", run_id)
    owner = snapshot.get("owner")
    if not owner:
        return _rejected(cmd, f"run {run_id} has no owning runtime to steer it", run_id)
    if owner_silent(snapshot):
        updated_at = _time(snapshot.get("updated_at"))
        assert updated_at is not None
        return _rejected(
            cmd,
            f"run {run_id}'s owner (runtime {owner}) has written no heartbeat since "
            f"{updated_at.isoformat()}: its process is likely gone; nothing was sent",
            run_id,
        )
    return None


def owner_silent(snapshot: dict[str, Any]) -> bool:
    """Whether an unfinished run's owner has written no heartbeat for ``OWNER_SILENT_S``: its
    process is likely gone (killed, or its machine lost), and the run will not go on. A
    finished run, or a snapshot with no time, is never silent."""
    if _finished(snapshot):
        return False
    updated_at = _time(snapshot.get("updated_at"))
    return updated_at is not None and (_clock.now() - updated_at).total_seconds() > OWNER_SILENT_S


def _time(value: Any) -> datetime | None:
    try:
        at = datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
    return at if at is None or at.tzinfo is not None else at.replace(tzinfo=UTC)


async def _logged(store: Store, cmd: SteeringCommand) -> bool:
    try:
        return (
            await store.get_command(cmd.correlation_id, scope=dedupe_scope(cmd.actor)) is not None
        )
    except StoreError:  # logged, though no longer readable
        return True


def duplicate(cmd: SteeringCommand) -> SteeringReceipt:
    """The receipt of a command whose correlation id the steering log already holds."""
    return SteeringReceipt(
        status=ReceiptStatus.DUPLICATE,
        correlation_id=cmd.correlation_id,
        reason="duplicate correlation id: the first command's outcome stands",
    )


def _finished(snapshot: dict[str, Any]) -> bool:
    try:
        return RunStatus(str(snapshot.get("status"))).finished
    except ValueError:
        return False


def _rejected(cmd: SteeringCommand, reason: str, run_id: str | None) -> SteeringReceipt:
    return SteeringReceipt(
        status=ReceiptStatus.REJECTED,
        correlation_id=cmd.correlation_id,
        run_id=run_id,
        reason=reason,
        policy_id="router",
    )
