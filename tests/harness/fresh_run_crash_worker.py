"""An agent run started without a run id, killed (SIGKILL) the moment a command it was sent
is accepted, before the store's first snapshot tick could save it, for
``test_agent_crash.py``.

    python fresh_run_crash_worker.py DB

Starts the ``clerk`` agent (no ``run_id=``: a fresh one) on a ``Runtime`` with a SQLite store
at DB; its model call waits for ever. It prints ``ready <run id>``, sends the run an
instruction (correlation id ``c-fresh``) and kills itself from a bus sink as the command's
``steering.accepted`` is published: logged ``accepted`` for the run, never delivered.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from tinyagents import Agent, Runtime
from tinyagents.events import Event
from tinyagents.testkit import Gate

CID = "c-fresh"


def kill(event: Event) -> None:
    if event.type == "steering.accepted":
        os.kill(os.getpid(), signal.SIGKILL)


async def main(db: str) -> None:
    async with Runtime(f"sqlite:///{db}", sinks=[kill]) as rt:
        handle = await rt.start(Agent("clerk", Gate("model").model("never")), "work")
        print("ready", handle.run_id, flush=True)
        await handle.steer("cite the contract", correlation_id=CID)
        await asyncio.sleep(3600)  # killed long before


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
