"""Declaring a run dead: an operator's cancel of a run whose owner went silent.

A run whose process was killed and is never started again under its id stays unfinished in
the store, and the commands it had accepted stay open in the steering log: no runtime will
ever deliver them (every runtime opened on the store restores them and waits for the run).
Its owner cannot take a cancel (``remote.refuse``: silent owner), so the submitting side
settles the run itself, in the store the runtimes share:

- the cancel is logged (its correlation id: a retry is ``duplicate``) and ends ``applied``
  (its events ``requested``, ``accepted``, ``applied``);
- every command still open for the run, and for the unfinished runs below it of the same
  owner (they died with it), ends ``failed``, ``target finished before delivery``, with the
  owner's last heartbeat in the reason; events and states are one write (``append_events``);
- their snapshots become ``cancelled``, without an owner, each only while its row still
  names the dead owner (``Store.save_runs(held_by=)``): a run another runtime started again
  under its id meanwhile keeps that runtime's row. A run found changed before the cancel is
  logged (started again elsewhere, or its owner heard from) refuses it, naming the new owner
  (sent again, it reaches the run there).

One declaration settles a run: it first logs a claim on the run's dead incarnation (a row
keyed by the run and the owner's last heartbeat, state ``applied``, no run id), and a cancel
taken at the same moment by another process that finds the claim there is refused and logs
nothing. A declaration that fails midway (a store error, its sender killed) leaves its claim
behind: a cancel sent ``CLAIM_STALE_S`` later takes the run over under a claim of its own,
and fails the open commands the first one left, its own cancel among them — unless it is
that very cancel sent again (the same correlation id, as a client retrying a request whose
answer it lost does): it finishes its own declaration then, and ends ``applied``. So does a
cancel the owner had accepted before it died, sent again; sent again while its claim is
young (its first declaration may be under way), it is answered ``duplicate``.

Only a human with ``agent:control`` in the run's tenant may do it, and only once the owner
has been silent for ``OWNER_SILENT_S``. An owner that was merely cut off that long and then
goes on runs the run until its next snapshot save, which the cancelled row refuses
(``Store.save_runs(held_by=)``): it stops the run then (``Runtime._fence``). A command it
applied meanwhile gets a second terminal event (the steering log keeps the first state:
``Store.set_command_states``).
"""

from __future__ import annotations

from typing import Any

from tinyagents import _clock
from tinyagents.errors import StoreError
from tinyagents.events.models import Event, SteeringEvent
from tinyagents.events.redact import summarize
from tinyagents.protocol.commands import (
    AgentRunTarget,
    HumanActor,
    ReceiptStatus,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    SubAgentRunTarget,
    dedupe_scope,
)
from tinyagents.protocol.state import UNFINISHED_RUN_STATUSES, CommandState, RunStatus
from tinyagents.steering.inbox import LATE
from tinyagents.steering.policies import CONTROL_SCOPE
from tinyagents.store.base import Store, StoredCommand, run_key

#: The ``policy_id`` of a declaration's receipt and events.
POLICY = "dead-owner"
#: How long a declaration has to settle the run once it holds its claim (``_claim``).
CLAIM_STALE_S = 30.0
#: How many runs of the dead run's tree are read at once.
_PAGE = 500
_OPEN = (CommandState.ACCEPTED.value, CommandState.DEFERRED.value)


def declares_dead(cmd: SteeringCommand) -> bool:
    """Whether ``cmd`` is a cancel of a run itself (not of a graph task or node, not of a
    thread): the one command a run whose owner is gone can still be given."""
    return cmd.kind is SteeringKind.CANCEL and type(cmd.target) in (
        AgentRunTarget,
        SubAgentRunTarget,
    )


def forbidden(cmd: SteeringCommand) -> str | None:
    """Why ``cmd``'s sender may not declare a run dead, or None."""
    actor = cmd.actor
    if not isinstance(actor, HumanActor):
        return "only an operator (a human actor) may cancel a run whose owner is gone"
    if CONTROL_SCOPE not in actor.scopes:
        return f"forbidden: {actor.describe()} lacks the scope {CONTROL_SCOPE!r}"
    return None


async def settle_dead_run(
    store: Store, cmd: SteeringCommand, snapshot: dict[str, Any]
) -> SteeringReceipt:
    """Cancel the run of ``snapshot`` (its owner silent) in ``store``: see the module."""
    run_id = str(snapshot["run_id"])
    scope = dedupe_scope(cmd.actor)
    try:
        logged = await store.get_command(cmd.correlation_id, scope=scope)
    except StoreError as exc:
        if isinstance(exc.__cause__, ValueError):  # logged, though it no longer reads
            return SteeringReceipt.duplicate(cmd.correlation_id)
        raise
    if logged is not None and not _resumes(logged, cmd, run_id):
        return SteeringReceipt.duplicate(cmd.correlation_id, logged.run_id)
    refused = await _claim(store, cmd, snapshot) or await _taken_since(store, cmd, snapshot)
    if refused is not None:
        return refused
    if logged is None and not await store.append_command(
        cmd, state=CommandState.ACCEPTED.value, run_id=run_id
    ):
        return SteeringReceipt.duplicate(cmd.correlation_id)
    owner = snapshot.get("owner")
    reason = (
        f"{LATE}: run {run_id}'s owner (runtime {owner}) is gone (no heartbeat since "
        f"{snapshot.get('updated_at')}); {cmd.actor.describe()} cancelled it"
    )
    runs = [snapshot, *await _dead_below(store, snapshot)]
    events: list[Event] = []
    for run in runs:
        for stored in await store.run_commands(str(run["run_id"]), states=_OPEN):
            if stored.command.correlation_id != cmd.correlation_id:
                events.append(_event("steering.failed", stored.command, run, reason=reason))
    told: set[str] = set()
    if logged is not None:  # its owner, before it died, may have told part of its story
        told = {
            e.type
            for e in await store.load_events(run_id=run_id, type_prefix="steering.")
            if getattr(e, "correlation_id", None) == cmd.correlation_id
        }
    events += [
        e
        for e in (
            _event("steering.requested", cmd, snapshot),
            _event("steering.accepted", cmd, snapshot),
            _event(
                "steering.applied",
                cmd,
                snapshot,
                affected={"declared_dead": True, "runs": [str(r["run_id"]) for r in runs]},
            ),
        )
        if e.type not in told
    ]
    await store.append_events(events)  # the commands' states with their events
    now = _clock.now().isoformat()
    # Only where the row still names the dead owner (a compare-and-set, as the owner's own
    # saves): a run another runtime started again meanwhile keeps its new owner's row.
    taken = await store.save_runs(
        [
            {
                **r,
                "status": RunStatus.CANCELLED.value,
                "owner": None,
                "updated_at": now,
                "error": reason,
                "pending_commands": [],
                "interrupts": [],
            }
            for r in runs
        ],
        held_by=str(owner),
    )
    note = None
    if run_id in taken:
        note = (
            f"run {run_id} was started again by another runtime while its dead incarnation "
            "was being cancelled: that incarnation's commands are settled, the run goes on "
            "there (send the cancel again, with a new correlation id, to stop it)"
        )
    return SteeringReceipt.issue(ReceiptStatus.ACCEPTED, cmd.correlation_id, run_id, note, POLICY)


async def _taken_since(
    store: Store, cmd: SteeringCommand, snapshot: dict[str, Any]
) -> SteeringReceipt | None:
    """The refusal of ``cmd`` when the run's row is no longer the one read as ``snapshot``
    (another runtime started the run again since, or its owner wrote again: it is not gone),
    else None. Asked before the cancel is logged: sent again, it reaches the run where it is."""
    run_id = str(snapshot["run_id"])
    row = await store.load_run(run_id)
    owner = snapshot.get("owner")
    if row is not None and (row.get("owner"), row.get("updated_at")) == (
        owner,
        snapshot.get("updated_at"),
    ):
        return None
    if row is None:
        why = "its row is gone"
    elif not row.get("owner"):
        why = "it was released or cancelled meanwhile"
    elif row["owner"] != owner:
        why = f"it was started again in runtime {row['owner']}; send the cancel again to reach it"
    else:
        why = (
            f"its owner wrote it again since (at {row.get('updated_at')}): it is not gone; "
            "send the cancel again to reach it"
        )
    return SteeringReceipt.issue(
        ReceiptStatus.REJECTED,
        cmd.correlation_id,
        run_id,
        f"run {run_id} changed since its owner (runtime {owner}) was found silent: {why}",
        POLICY,
    )


async def _claim(
    store: Store, cmd: SteeringCommand, snapshot: dict[str, Any]
) -> SteeringReceipt | None:
    """Make ``cmd`` the one declaration of this incarnation of the run (its owner's last
    heartbeat), by logging a claim row for it: None once it holds it, else the receipt to
    answer. Of two cancels taken at once, the second to log the claim is refused, so no
    command of the run gets a second terminal event. A claim older than ``CLAIM_STALE_S``
    on a run still unfinished was left by a declaration that failed midway (a store error,
    its process killed): the next cancel takes the run over under the next claim."""
    run_id = str(snapshot["run_id"])
    scope = dedupe_scope(cmd.actor)
    generation = 0
    while True:
        key = f"{POLICY}:{run_id}@{snapshot.get('updated_at')}#{generation}"
        claim = cmd.model_copy(update={"correlation_id": key, "created_at": _clock.now()})
        if await store.append_command(claim, state=CommandState.APPLIED.value, run_id=None):
            return None
        held = await store.get_command(key, scope=scope)
        age = _age(held) if held else 0.0
        if age < CLAIM_STALE_S:
            if await store.get_command(cmd.correlation_id, scope=scope) is not None:
                # this very command, sent twice at once (or again while its first
                # declaration may still be under way): a cancel of this run, as the first's
                # receipt says
                return SteeringReceipt.duplicate(cmd.correlation_id, run_id)
            return SteeringReceipt.issue(
                ReceiptStatus.REJECTED,
                cmd.correlation_id,
                run_id,
                f"target finished: run {run_id} is being cancelled (another command "
                "declared its owner gone a moment ago)",
                POLICY,
            )
        generation += 1


def _age(claim: StoredCommand) -> float:
    """How old a claim is: by the store's clock when it keeps one (PostgreSQL: two
    declarers' clocks may differ by more than ``CLAIM_STALE_S``), else by this machine's."""
    if claim.age_s is not None:
        return claim.age_s
    return (_clock.now() - claim.command.created_at).total_seconds()


def _resumes(logged: StoredCommand, cmd: SteeringCommand, run_id: str) -> bool:
    """Whether ``cmd``, found in the log already, is a cancel of the run still open there:
    sent again after its declaration stopped midway (a store error, a reply lost, its sender
    killed), or one the owner had taken before it died. It settles the run then, under a
    claim of its own, rather than being answered ``duplicate`` while nothing settles it."""
    return (
        logged.state == CommandState.ACCEPTED
        and logged.run_id == run_id
        and logged.command.kind is SteeringKind.CANCEL
        and logged.command.target == cmd.target
    )


async def _dead_below(store: Store, snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """The unfinished runs below ``snapshot``'s run that its owner started (gone with it)."""
    run_id, owner = snapshot["run_id"], snapshot.get("owner")
    tree: dict[str, dict[str, Any]] = {}
    before = None
    while True:
        page = await store.list_runs(
            root_run_id=str(snapshot.get("root_run_id") or run_id), before=before, limit=_PAGE
        )
        tree.update((str(s["run_id"]), s) for s in page)
        if len(page) < _PAGE:
            break
        before = run_key(page[-1])

    def below(child: dict[str, Any]) -> bool:
        seen: set[str] = set()
        parent = child.get("parent_run_id")
        while parent is not None and parent not in seen:
            if parent == run_id:
                return True
            seen.add(parent)
            parent = tree.get(parent, {}).get("parent_run_id")
        return False

    return [
        s
        for s in tree.values()
        if s.get("owner") == owner and s.get("status") in UNFINISHED_RUN_STATUSES and below(s)
    ]


def _event(type_: str, cmd: SteeringCommand, run: dict[str, Any], **fields: Any) -> SteeringEvent:
    return SteeringEvent(
        type=type_,  # type: ignore[arg-type]
        target=cmd.target,
        actor=cmd.actor,
        kind=cmd.kind,
        correlation_id=cmd.correlation_id,
        run_id=str(run["run_id"]),
        root_run_id=run.get("root_run_id"),
        parent_run_id=run.get("parent_run_id"),
        tenant_id=run.get("tenant_id"),
        policy_id=POLICY,
        checkpoint_id=cmd.checkpoint_id,
        payload_summary=summarize(cmd.payload),
        **fields,
    )
