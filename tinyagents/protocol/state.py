"""The one vocabulary of a steering command's lifecycle (DESIGN.md §2, command lifecycle)."""

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
