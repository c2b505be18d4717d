"""The worker processes of ``tinyagents serve --workers N``.

Each worker is a fresh interpreter (the ``spawn`` start method, as uvicorn's own workers) that
is handed the listening socket, so the kernel spreads connections over them. A worker that
dies is started again under its index (so under the same worker id on Redis, where its
unanswered commands wait for it); one that dies within ``STARTUP_S`` of starting stops the
server instead, since it would only die again. Ctrl+C or SIGTERM stops every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from typing import Any

_log = logging.getLogger("tinyagents.server")
#: A worker that exits sooner than this after its start is not restarted: the server stops.
STARTUP_S = 5.0
#: Seconds a stopping worker gets before it is killed.
STOP_S = 30.0


async def run_workers(
    target: Callable[..., Any],
    args: Sequence[tuple[Any, ...]],
    *,
    started: Callable[[], None],
) -> int:
    """Run ``target(*args[i])`` in one process per entry until a signal; 0 when stopped by
    one, 1 when a worker could not start."""
    spawn = multiprocessing.get_context("spawn")
    born: dict[int, float] = {}

    def start(index: int) -> BaseProcess:
        process = spawn.Process(target=target, args=args[index], name=f"tinyagents-worker-{index}")
        process.start()
        born[index] = time.monotonic()
        return process

    processes = {i: start(i) for i in range(len(args))}
    started()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    code = 0
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await stop.wait()
            for index, process in list(processes.items()):
                if process.is_alive() or stop.is_set():
                    continue
                if time.monotonic() - born[index] < STARTUP_S:
                    _log.error(
                        "worker %d exited (%s) while starting: stopping", index, process.exitcode
                    )
                    code = 1
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
    return code
