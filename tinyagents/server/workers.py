"""The worker processes of ``tinyagents serve --workers N``.

Each worker is a fresh interpreter (the ``spawn`` start method, as uvicorn's own workers) that
is handed the listening socket, so the kernel spreads connections over them, and a ``Reports``
to tell the parent it serves (``ready``) or why it cannot (``failed``: one line). The server
is announced once every worker serves. A worker that dies is started again under its index
(so under the same worker id on Redis, where its unanswered commands wait for it); one that
dies before it served, or within ``STARTUP_S`` of starting, stops the server instead, since it
would only die again (its reason printed once, exit code 2 when it gave one). Ctrl+C or
SIGTERM stops every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import signal
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from typing import IO, Any

_log = logging.getLogger("tinyagents.server")
#: A worker that exits sooner than this after its start is not restarted: the server stops.
STARTUP_S = 5.0
#: Seconds a stopping worker gets before it is killed.
STOP_S = 30.0


class Reports:
    """What a worker tells its parent: ``ready()`` once it serves, ``failed(reason)`` (one line)
    when it cannot. Picklable into a spawned worker."""

    def __init__(self, queue: Any, index: int) -> None:
        self._queue, self.index = queue, index

    def ready(self) -> None:
        self._queue.put((self.index, None))

    def failed(self, reason: str) -> None:
        self._queue.put((self.index, reason))


async def run_workers(
    target: Callable[..., Any],
    args: Sequence[tuple[Any, ...]],
    *,
    started: Callable[[], None],
    err: IO[str] | None = None,
) -> int:
    """Run ``target(*args[i], reports)`` in one process per entry until a signal; ``started``
    is called once every worker reported ``ready``. 0 when stopped by a signal; when a worker
    could not start, 2 if it reported why (printed to ``err``, stderr by default), else 1."""
    spawn = multiprocessing.get_context("spawn")
    queue = spawn.SimpleQueue()
    born: dict[int, float] = {}
    ready: set[int] = set()
    announced = False

    def start(index: int) -> BaseProcess:
        process = spawn.Process(
            target=target,
            args=(*args[index], Reports(queue, index)),
            name=f"tinyagents-worker-{index}",
        )
        process.start()
        born[index] = time.monotonic()
        ready.discard(index)
        return process

    def read_reports(reason: str | None) -> str | None:
        """Note the workers that serve; the first reason a worker gave for failing."""
        while not queue.empty():
            index, failure = queue.get()
            if failure is None:
                ready.add(index)
            elif reason is None:
                reason = failure
        return reason

    processes = {i: start(i) for i in range(len(args))}
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    code = 0
    reason: str | None = None
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1 if not announced else 0.5):
                    await stop.wait()
            reason = read_reports(reason)
            if not announced and not stop.is_set() and len(ready) == len(processes):
                announced = True
                started()
            for index, process in list(processes.items()):
                if process.is_alive() or stop.is_set():
                    continue
                reason = read_reports(reason)  # what it said before it exited
                if index not in ready or time.monotonic() - born[index] < STARTUP_S:
                    if reason is not None:
                        print(f"tinyagents serve: {reason}", file=err or sys.stderr, flush=True)
                    else:
                        _log.error(
                            "worker %d exited (%s) while starting: stopping",
                            index,
                            process.exitcode,
                        )
                    code = 2 if reason is not None else 1
                    stop.set()
                    break
                _log.warning("worker %d exited (%s): starting it again", index, process.exitcode)
                processes[index] = start(index)
    finally:
        for process in processes.values():
            if process.is_alive():
                process.terminate()  # SIGTERM: the worker stops serving and closes its runtime
        for process in processes.values():
            await asyncio.to_thread(process.join, STOP_S)
            if process.is_alive():
                process.kill()
                await asyncio.to_thread(process.join)
        queue.close()
    return code
