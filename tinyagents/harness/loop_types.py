"""Small types shared by the loop and the steering appliers."""

from __future__ import annotations

from tinyagents.runs.info import RunStatus


class Stop(Exception):
    """Ends the loop early with a status (a cancel applied at a boundary)."""

    def __init__(self, status: RunStatus, reason: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
