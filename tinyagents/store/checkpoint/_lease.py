"""Who holds a thread lease, and whether that holder can still be alive."""

from __future__ import annotations

import os
import socket
from collections.abc import Container

from tinyagents import _clock
from tinyagents._record import Record, record

HOST = socket.gethostname()


def new_owner() -> str:
    """An owner token unique to one run: host, pid and an id."""
    return process_token(_clock.new_id("lease"))


def process_token(name: str) -> str:
    """``HOST:PID:name``: a holder (a runtime, a worker's seat) named with its process, so that
    another process of this host can tell at once when it is gone (``holder_gone``)."""
    return f"{HOST}:{os.getpid()}:{name}"


def token_process(token: str) -> tuple[str, int] | None:
    """(host, pid) of a ``process_token``, or None for a token not in that form."""
    host, _, rest = token.partition(":")
    pid, _, _ = rest.partition(":")
    return (host, int(pid)) if pid.isdigit() else None


def holder_gone(token: str, held_here: Container[str]) -> bool:
    """Whether ``token`` names a holder known to be gone: a process of this host that is no
    longer running, or a holder of this very process that is not in ``held_here`` any more.
    A holder on another host (or a token not in ``process_token`` form) is never known gone
    here: only its expiry can tell."""
    parsed = token_process(token)
    if parsed is None or parsed[0] != HOST:
        return False
    pid = parsed[1]
    return token not in held_here if pid == os.getpid() else not pid_alive(pid)


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


@record(slots=True, kw_only=True, eq=False, repr=False)
class Lease(Record):
    """Who holds a thread (owner, host, pid) and until when."""

    owner: str
    host: str
    pid: int
    expires_at: float

    def is_dead(self, now: float) -> bool:
        """On this host the pid decides (exactly); elsewhere only expiry can tell."""
        if self.host == HOST:
            return not pid_alive(self.pid)
        return self.expires_at < now
