"""Crash recovery of runtime-managed graph runs.

The run id is kept in the thread's checkpoints: a new start of the thread continues the run
that wrote them (``continued_run_id``), and takes the commands that waited for it. A process
killed after saving a steering checkpoint or an interrupt's answer, but before the store
learnt that the command was applied, hands the command over again after the restart;
``EarlierApplied`` finds its effect in the checkpoints, so it is reported applied instead of
being applied twice (an update appended twice, an approve failing on an answered interrupt).
A command is known by its correlation id in its sender's scope (``command_ref``), as
everywhere: another sender's command under the same id is another command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tinyagents.graph.checkpointing import steering_ref
from tinyagents.protocol.commands import SteeringCommand, SteeringKind, ThreadTarget, dedupe_scope

if TYPE_CHECKING:
    from tinyagents.graph.checkpointing import Head
    from tinyagents.graph.executor import GraphRun
    from tinyagents.runs.host import RunHost
    from tinyagents.store.checkpoint.base import Checkpointer, CheckpointRecord

#: Kinds whose effect a checkpoint (or an answer's write) records: applied at most once.
APPLIED_ONCE_KINDS = frozenset(
    {
        SteeringKind.UPDATE_STATE,
        SteeringKind.REDIRECT,
        SteeringKind.APPROVE,
        SteeringKind.REJECT,
        SteeringKind.PROVIDE_CONTEXT,
    }
)


def command_ref(cmd: SteeringCommand) -> str:
    """How the thread's records name ``cmd`` (``checkpointing.steering_ref``)."""
    return steering_ref(cmd.correlation_id, dedupe_scope(cmd.actor))


def steered_by(cmd: SteeringCommand) -> dict[str, str]:
    """The metadata a checkpoint made by ``cmd`` names it with: its correlation id, and its
    sender's scope when it has one (``applied_by_steering`` reads them back)."""
    scope = dedupe_scope(cmd.actor)
    named = {"correlation_id": cmd.correlation_id}
    return {**named, "sender_scope": scope} if scope else named


class EarlierApplied:
    """What an earlier process of a continued run did with the commands it was handed."""

    def __init__(self, cp: Checkpointer | None, thread_id: str | None, run_id: str) -> None:
        #: set when the run id came from the thread's checkpoints, not from this runtime
        self.continued = False
        self.cp = cp
        self.thread_id = thread_id
        self.run_id = run_id
        self._found: dict[str, dict[str, Any]] | None = None  # read once, when first asked

    async def find(self, run: GraphRun, cmd: SteeringCommand) -> dict[str, Any] | None:
        """The checkpoint (and, for an answer, the interrupt) to report ``cmd`` applied
        with, if an earlier process applied it; else None."""
        if not self.continued or cmd.fork or cmd.kind not in APPLIED_ONCE_KINDS:
            return None
        ref = command_ref(cmd)
        for records in run.head.records.values():  # answered; its task has not run again yet
            if ref in records.steered:
                return {
                    "checkpoint_id": run.head.checkpoint_id,
                    "interrupt_id": records.steered[ref],
                }
        if self._found is None:
            assert self.cp is not None and self.thread_id is not None
            self._found = await applied_by_steering(self.cp, self.thread_id, self.run_id)
        found = self._found.get(ref)
        return None if found is None else dict(found)


def continued_run_id(runtime: RunHost, previous: Head | None) -> str | None:
    """The run a new start of the thread continues, if any: the one that wrote its last
    checkpoint, while it has tasks left, or while commands accepted for it are still open
    (it saved its last checkpoint but was stopped before its final boundary)."""
    if previous is None or previous.run_id is None:
        return None
    handle = runtime.runs.get(previous.run_id)
    if previous.frontier:
        # tasks left: the run that wrote them goes on, unless it ended in this runtime (it
        # failed, or was cancelled): a run ends once, so a new run takes the thread on
        return None if handle is not None and handle.status.finished else previous.run_id
    if handle is not None:
        # finished in this runtime: the next start is a new run; at rest (interrupted, its
        # thread finished since through the API), it goes on, with what waits in its queue
        return None if handle.status.finished else previous.run_id
    for cmd in runtime.open_commands():
        target = cmd.target
        if getattr(target, "run_id", None) == previous.run_id or (
            isinstance(target, ThreadTarget) and target.thread_id == previous.thread_id
        ):
            return previous.run_id
    return None


async def applied_by_steering(
    cp: Checkpointer, thread_id: str, run_id: str
) -> dict[str, dict[str, Any]]:
    """``command_ref`` -> what the steering checkpoints run ``run_id`` saved (and the steps
    that consumed a steering answer) record of the command: its ``checkpoint_id``, and, as
    ``steering.applied`` reports them when applied in one process, a redirect's ``goto`` and
    ``step`` and an update's ``keys``. Reads the thread's history newest first only as far
    back as that run goes."""
    found: dict[str, dict[str, Any]] = {}
    limit = 64
    while True:
        records = await cp.list(thread_id, limit=limit)
        for record in records:
            if record.metadata.get("run_id") != run_id:
                return found
            correlation_id = record.metadata.get("correlation_id")
            if correlation_id is not None:
                scope = record.metadata.get("sender_scope", "")
                found.setdefault(steering_ref(correlation_id, scope), _what_it_did(record))
            for answered_by in record.metadata.get("resumed_by", ()):
                found.setdefault(answered_by, {"checkpoint_id": record.checkpoint_id})
        if len(records) < limit:
            return found
        limit *= 4


def _what_it_did(record: CheckpointRecord) -> dict[str, Any]:
    """The ``affected`` of the command that saved ``record`` (``lowering._redirect`` and
    ``_update`` report the same fields)."""
    meta = record.metadata
    if record.source == "steering" and "goto" in meta:
        return {
            "goto": list(meta["goto"]),
            "checkpoint_id": record.checkpoint_id,
            "step": record.step,
        }
    if record.source == "update" and "keys" in meta:
        return {"checkpoint_id": record.checkpoint_id, "keys": list(meta["keys"])}
    return {"checkpoint_id": record.checkpoint_id}


__all__ = [
    "APPLIED_ONCE_KINDS",
    "EarlierApplied",
    "applied_by_steering",
    "command_ref",
    "continued_run_id",
    "steered_by",
]
