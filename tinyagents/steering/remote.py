"""Steering a run that another process owns, through the store both share.

    receipt = await submit_through_store(store, cmd, timeout_s=5.0)

The command goes into the store's inbox, addressed to the runtime that owns the run (the
``owner`` of its snapshot); that runtime takes it within ~50 ms, runs it through its own
``submit`` (its policies, its deduplication by correlation id) and writes the receipt back,
which this side waits for. Only obviously hopeless commands are answered here: an unknown
run, another tenant's run (both ``not found``), a finished run, a run at rest whose runtime
closed cleanly (it released the run: continue its thread first), and a run whose owner has
stopped writing its heartbeat (``OWNER_SILENT_S``) — unless the steering log
already holds the command's correlation id: then a retry is answered ``duplicate``, as the
owner would have answered it (a log that cannot be read raises ``StoreError``). An
operator's cancel of a run whose owner is silent declares the run dead and settles it here
(``tinyagents.steering.dead``): its open commands fail, and it is ``cancelled`` (that cancel
sent again, its declaration stopped midway, finishes it). A run is in the store only from its owner's next snapshot
write, a moment after its ``start`` returned: one that is not there (or not steerable yet) is
looked for again for ``LISTING_WAIT_S`` before it is answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tinyagents import _clock
from tinyagents.errors import DamagedData, ReceiptTimeout, StoreError
from tinyagents.protocol.commands import (
    HumanActor,
    ReceiptStatus,
    SteeringCommand,
    SteeringReceipt,
    ThreadTarget,
    checked,
    dedupe_scope,
)
from tinyagents.protocol.state import UNFINISHED_RUN_STATUSES, RunStatus
from tinyagents.steering.dead import declares_dead, forbidden, settle_dead_run
from tinyagents.steering.policies import not_found
from tinyagents.store.base import SILENCE_S, Store, may_pass, run_key, snapshot_time

#: How often the submitter reads the store for its receipt.
RECEIPT_POLL_S = 0.02
#: How often a runtime with a durable store writes the snapshots of its runs that changed,
#: and of every live run (its heartbeat). ``Runtime`` writes them; the senders here read them.
SNAPSHOT_EVERY_S = 0.1
HEARTBEAT_S = 1.0
#: A live run's owner rewrites its snapshot every ``HEARTBEAT_S``; one silent for this long
#: is taken for gone (its inbox would never be read), with room for clock skew.
OWNER_SILENT_S = 30.0
#: A run another process has just started (its ``start`` answered) is in the store from its
#: owner's next snapshot write, within ``SNAPSHOT_EVERY_S`` (``HEARTBEAT_S`` if that write
#: failed and is retried), and a run restarted under its id shows its dead incarnation's owner
#: until then: the sender looks again this long, every ``LISTING_POLL_S``, before it answers
#: "not found" (as the Redis path waits for a worker's mirror).
LISTING_WAIT_S = SNAPSHOT_EVERY_S + HEARTBEAT_S
LISTING_POLL_S = SNAPSHOT_EVERY_S / 2


async def submit_through_store(
    store: Store,
    cmd: SteeringCommand,
    *,
    timeout_s: float = 5.0,
    listing_wait_s: float = LISTING_WAIT_S,
    no_run: Callable[[SteeringCommand], Awaitable[SteeringReceipt]] | None = None,
    released: Callable[[str], dict[str, Any] | None] | None = None,
) -> SteeringReceipt:
    """The receipt the owning runtime gives ``cmd``; raises ``ReceiptTimeout`` when none
    comes within ``timeout_s`` (the command may still be applied later), and ``StoreError``
    when the store fails (a failure that may pass, such as a lost connection, while the
    receipt is awaited is read past: the command is in the inbox already). A target not in the store is looked for again for
    ``listing_wait_s`` (``listed_snapshot``). A command made past validation
    (``model_copy(update=...)``) that is invalid raises ``InvalidCommandError``, as building
    it would have, and is not sent.

    ``no_run``: what becomes of a thread command that finds no run of its thread (of its
    sender's tenant) in the store once the listing wait is over, instead of ``rejected``
    "not found": a sender with a runtime of its own defers it there for the thread's next
    run, as one process does (``Control``).

    ``released``: run id -> the final snapshot of a run the sender's own runtime released
    and has not saved yet (``Runtime.released_snapshot``), read before the store, whose row
    of that run is older (or missing) until that runtime's next snapshot tick."""
    cmd = checked(cmd)
    snapshot = await listed_snapshot(store, cmd, wait_s=listing_wait_s, released=released)
    if snapshot is None and no_run is not None and isinstance(cmd.target, ThreadTarget):
        return await no_run(cmd)
    refusal = refuse(cmd, snapshot)
    if refusal is not None:
        dead = snapshot is not None and owner_silent(snapshot) and declares_dead(cmd)
        if dead and forbidden(cmd) is None:
            # Its owner is gone: a cancel settles the run and its open commands here (a
            # retry of one its owner or an earlier declaration took is answered there).
            assert snapshot is not None
            return await settle_dead_run(store, cmd, snapshot)
        if snapshot is not None:
            # A retry of a command its owner already took: the first outcome stands.
            duplicate = await logged_duplicate(store, cmd)
            if duplicate is not None:
                return duplicate
        if dead:
            assert snapshot is not None
            return _rejected(cmd, forbidden(cmd) or "", str(snapshot["run_id"]))
        return refusal
    assert snapshot is not None
    owner = str(snapshot["owner"])
    request_id = _clock.new_id("req")
    # a command too large for the inbox: InvalidCommandError, nothing put (``sendable``)
    await store.inbox_put(owner=owner, request_id=request_id, command=cmd)
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    receipt = await store.inbox_receipt(request_id)
                except StoreError as exc:
                    # the command is in the inbox: a lost connection or a busy database
                    # must not tell the sender it failed; the next poll reads again
                    if not may_pass(exc):
                        raise
                    receipt = None
                if receipt is not None:
                    return receipt
                await asyncio.sleep(RECEIPT_POLL_S)
    except TimeoutError:
        raise ReceiptTimeout(cmd.correlation_id, owner, timeout_s) from None


async def listed_snapshot(
    store: Store,
    cmd: SteeringCommand,
    *,
    wait_s: float = LISTING_WAIT_S,
    released: Callable[[str], dict[str, Any] | None] | None = None,
) -> dict[str, Any] | None:
    """``target_snapshot``, looked for again until ``wait_s`` have passed while there is none
    the sender may see or its owner is silent: a run another process started a moment ago
    is not in the store until its owner's next snapshot write, and would be taken for a run
    that does not exist. Another tenant's run is ``None`` and waits as long, so the answer
    tells it apart from an unknown run by nothing; a silent owner's run, and a run its
    runtime released (the thread continued elsewhere a moment ago is listed with its new
    owner at that owner's next write), are returned at the end, for ``refuse`` to answer.
    ``released``: as for ``submit_through_store``, asked before the store."""
    deadline = time.monotonic() + wait_s
    target = cmd.target
    while True:
        snapshot = None
        if released is not None and not isinstance(target, ThreadTarget):
            snapshot = released(target.run_id)  # newer than the store's row of it
        try:
            if snapshot is None:
                snapshot = await target_snapshot(store, cmd)
        except DamagedData as exc:
            # another tenant's damaged run is no run to the sender, as its readable one is
            if isinstance(cmd.actor, HumanActor) and exc.tenant_id != cmd.actor.tenant_id:
                snapshot = None
            else:
                raise
        if snapshot is not None and not _visible(cmd, snapshot):
            snapshot = None
        if snapshot is not None:
            unsteerable(snapshot)
        if snapshot is not None and (_finished(snapshot) or _owned(snapshot)):
            return snapshot
        if time.monotonic() >= deadline:
            return snapshot
        await asyncio.sleep(LISTING_POLL_S)


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
_UNFINISHED = tuple(sorted(status.value for status in UNFINISHED_RUN_STATUSES))
_THREAD_PAGE = 200


def refuse(cmd: SteeringCommand, snapshot: dict[str, Any] | None) -> SteeringReceipt | None:
    """The rejection the submitting side gives without asking the owner, or None."""
    if snapshot is None or not _visible(cmd, snapshot):
        return _rejected(cmd, not_found(cmd), None)  # the same words for both
    run_id = snapshot.get("run_id")
    if _finished(snapshot):
        return _rejected(cmd, f"target finished: run {run_id} is {snapshot['status']}", run_id)
    owner = snapshot.get("owner")
    if not owner:  # released by its runtime's clean close (a graph run at rest)
        return _rejected(
            cmd,
            f"run {run_id} is at rest ({snapshot.get('status')}): the runtime that held it "
            f"has closed; continue its thread {snapshot.get('thread_id')!r} (start_graph("
            "graph, None, thread_id=...)) and send the command again",
            run_id,
        )
    if owner_silent(snapshot):
        updated_at = snapshot_time(snapshot.get("updated_at"))
        assert updated_at is not None
        return _rejected(
            cmd,
            f"run {run_id}'s owner (runtime {owner}) has written no heartbeat since "
            f"{updated_at.isoformat()}: its process is likely gone; nothing was sent",
            run_id,
        )
    return None


def unsteerable(snapshot: dict[str, Any]) -> None:
    """Raise ``DamagedData`` for a snapshot that reads (``read_snapshot``) but cannot be
    steered: a status no run has, or an owner that is no runtime id. Taken for a live run,
    its command went into the inbox of no runtime and its sender waited out its whole
    timeout for a receipt none would write; the record needs repairing, which waiting does
    not do. Checked here, not by the store, which knows no run statuses (a layer below)."""
    of = f"run snapshot of {snapshot.get('run_id')!r}"
    status, owner = snapshot.get("status"), snapshot.get("owner")
    if status not in _STATUSES:
        raise DamagedData(
            f"{of}: status {repr(status)[:200]} is no run status",
            record=of,
            tenant_id=snapshot.get("tenant_id"),
        )
    if not isinstance(owner, (str, type(None))):
        raise DamagedData(
            f"{of}: owner {repr(owner)[:200]} is no runtime id",
            record=of,
            tenant_id=snapshot.get("tenant_id"),
        )


#: Every status a run has (``RunStatus``'s values).
_STATUSES = frozenset(status.value for status in RunStatus)


def _visible(cmd: SteeringCommand, snapshot: dict[str, Any]) -> bool:
    """Whether ``cmd``'s sender may learn the run exists: a human only in its own tenant."""
    actor = cmd.actor
    return not isinstance(actor, HumanActor) or actor.tenant_id == snapshot.get("tenant_id")


def owner_silent(snapshot: dict[str, Any]) -> bool:
    """Whether an unfinished run's owner has written no heartbeat for ``OWNER_SILENT_S``: its
    process is likely gone (killed, or its machine lost), and the run will not go on. A
    finished run, a run its runtime released on a clean close (no ``owner``) or a snapshot
    with no time is never silent. Judged by one clock: the store's (``SILENCE_S``, how long
    ago it heard the snapshot) when it keeps one (PostgreSQL), else this machine's against
    ``updated_at`` (a store on this machine: the owner's clock is this one)."""
    if _finished(snapshot) or not snapshot.get("owner"):  # no owner: released, not silent
        return False
    silence = snapshot.get(SILENCE_S)
    if isinstance(silence, float):
        return silence > OWNER_SILENT_S
    updated_at = snapshot_time(snapshot.get("updated_at"))
    return updated_at is not None and (_clock.now() - updated_at).total_seconds() > OWNER_SILENT_S


def _owned(snapshot: dict[str, Any]) -> bool:
    """Whether an unfinished run has an owner that is not silent (its inbox is read)."""
    return bool(snapshot.get("owner")) and not owner_silent(snapshot)


async def logged_duplicate(store: Store, cmd: SteeringCommand) -> SteeringReceipt | None:
    """The ``duplicate`` receipt for ``cmd`` if the steering log holds its id (naming the run
    the logged command went to, as that one's receipt did), else None. A lookup that fails
    raises: answered ``duplicate``, the sender would take a command none of its attempts may
    have sent for one its owner took."""
    try:
        logged = await store.get_command(cmd.correlation_id, scope=dedupe_scope(cmd.actor))
    except StoreError as exc:
        if isinstance(exc.__cause__, ValueError):  # logged, though it no longer reads
            return SteeringReceipt.duplicate(cmd.correlation_id)
        raise
    if logged is None:
        return None
    return SteeringReceipt.duplicate(cmd.correlation_id, logged.run_id)


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
