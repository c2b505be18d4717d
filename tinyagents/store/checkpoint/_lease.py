"""Who holds a thread lease, and whether that holder can still be alive."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from tinyagents import _clock
from tinyagents._record import Record

HOST = socket.gethostname()


def new_owner() -> str:
    """An owner token unique to one run: host, pid and an id."""
    return f"{HOST}:{os.getpid()}:{_clock.new_id('lease')}"


def pid_alive(pid: int) -> bool:
    """True if ``pid`` names a running (not zombie) process on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            # "pid (comm) state ...": a killed child that was not reaped yet is "Z"
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): trust kill(0)


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class Lease(Record):
    owner: str
    host: str
    pid: int
    expires_at: float

    def is_dead(self, now: float) -> bool:
        """On this host the pid decides (exactly); elsewhere only expiry can tell."""
        if self.host == HOST:
            return not pid_alive(self.pid)
        return self.expires_at < now
