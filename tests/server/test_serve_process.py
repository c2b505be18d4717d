"""The tests' own ``serving(...)``: it reads what a server prints while it runs."""

from __future__ import annotations

import sys
from pathlib import Path

from serve_process import free_port, serving

#: a server that prints a byte that is no UTF-8, then a line, then listens on ``argv[1]``
LISTENER = """
import socket, sys, time
sys.stdout.buffer.write(b"caf\\xe9 \\xff\\n")
sys.stdout.buffer.flush()
print("listening", flush=True)
sock = socket.socket()
sock.bind(("127.0.0.1", int(sys.argv[1])))
sock.listen()
time.sleep(60)
"""


def test_output_that_is_no_utf8_does_not_stop_the_reading(tmp_path: Path) -> None:
    """Found: ``serving`` read the server's output as strict UTF-8, so a byte that is no
    UTF-8 ended its reader thread, and nothing printed after it was seen: a test waiting for
    a line then failed as if the server were not ready. Such a byte is read as U+FFFD."""
    port = free_port()
    argv = [sys.executable, "-c", LISTENER, str(port)]
    with serving(
        argv, port, env={}, cwd=tmp_path, ready=lambda out: "listening" in out, wait_s=20
    ) as printed:
        assert printed().startswith("caf\ufffd \ufffd\n"), printed()
