"""The one vocabulary of a steering command's lifecycle (DESIGN.md §2, command lifecycle) and of
a run's status (``RunStatus``), which every layer reads: the runs layer sets it, the store
and scale-out read it from saved run snapshots."""

from __future__ import annotations

from enum import StrEnum


class CommandState(StrEnum):
    """Where a command is; each state is also the suffix of its ``steering.*`` event type."""

    REQUESTED = "requested"
    ACCEPTED = "accepted"
    DEFERRED = "deferred"
    DELIVERED = "delivered"
    APPLIED = "applied"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        """True for the four states a command ends in, exactly one of them per command."""
        return self in _TERMINAL


_TERMINAL = frozenset(
    {CommandState.APPLIED, CommandState.REJECTED, CommandState.SUPERSEDED, CommandState.FAILED}
)


class RunStatus(StrEnum):
    """Where a run is (DESIGN.md §3); a saved run snapshot's ``status`` is one of these values."""

    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    ABORTED = "aborted"
    LIMIT_EXCEEDED = "limit_exceeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def finished(self) -> bool:
        """No boundary will be reached again (``interrupted`` graphs can still be resumed)."""
        return self not in UNFINISHED_RUN_STATUSES


#: The statuses of a run that has not finished (a live run, or an interrupted graph that can be
#: resumed). Members are strings, so a snapshot's ``status`` text is tested against it as is.
UNFINISHED_RUN_STATUSES = frozenset({RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.INTERRUPTED})
