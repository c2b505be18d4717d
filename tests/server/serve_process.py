"""A ``tinyagents serve`` (or any server script) in a subprocess, for the tests that drive it
as a user would: from a shell, a browser, curl."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def serving(
    argv: Sequence[str],
    port: int,
    *,
    env: dict[str, str],
    cwd: Path,
    ready: Callable[[str], bool] = lambda printed: True,
    wait_s: float = 60.0,
    stop_s: float = 15.0,
) -> Iterator[Callable[[], str]]:
    """Run ``argv`` (a server that listens on ``port``) until the block ends: yields
    ``printed()``, what it has printed so far (stdout and stderr), once it listens and
    ``ready(printed())`` holds. Fails saying what it printed when it exits first or is not
    ready within ``wait_s`` (a bound on a hang, not a timing); at the end it is terminated,
    killed after ``stop_s``."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",  # (a byte that is no UTF-8 would end the reader thread)
        env=env,
        cwd=cwd,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    reader.daemon = True
    reader.start()

    def printed() -> str:
        return "".join(lines)

    name = " ".join(Path(arg).name for arg in argv[:2])
    try:
        deadline = time.monotonic() + wait_s
        while not (ready(printed()) and _listening(port)):
            assert proc.poll() is None, f"{name} exited:\n{printed()}"
            assert time.monotonic() < deadline, f"{name} was not ready:\n{printed()}"
            time.sleep(0.2)
        yield printed
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=stop_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
