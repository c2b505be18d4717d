"""A supervised agent run that ``test_supervisor_crash.py`` SIGKILLs under the supervisor's pause.

    python supervisor_crash_worker.py DB RUN_ID MODE

Runs the ``a`` agent under run id RUN_ID on a ``Runtime`` with a SQLite store at DB and a
supervisor whose ``iteration_reached`` rule pauses the run on its first model response (dwell
cap: an hour, so only a restart can time the pause out). When the supervisor's pause reaches
the point MODE names, the worker prints ``stop`` (flushed) and blocks its event loop
(``time.sleep``), so nothing more happens, no store flush either, before the parent's SIGKILL:

- ``accepted``: the pause is in the steering log (``steering.accepted``), not yet delivered;
- ``applied``: the pause was applied (the run parks), before the store writer's flush.

Lines on stdout: ``ready`` once the process runs, then ``stop``.
"""

from __future__ import annotations

import asyncio
import sys
import time

from tinyagents import Agent, Runtime, SupervisorSpec, tool
from tinyagents.events import Event, SteeringEvent
from tinyagents.protocol import SteeringKind
from tinyagents.testkit import ScriptedModel, reply, tool_call

SPEC = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], pause_max_s=3600)


#: Set once the supervisor's pause is in the steering log: the tool waits for it, so the
#: pause lands at the boundary after the tool's result (with a durable store the command is
#: written before it is queued; a quicker run would finish first).
LOGGED = asyncio.Event()


@tool
async def search(query: str = "") -> str:
    """Search for something."""
    await LOGGED.wait()
    return "nothing found"


def out(line: str) -> None:
    print(line, flush=True)


class StopAt:
    """A bus sink: freezes the process when the supervisor's pause reaches ``mode``."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __call__(self, event: Event) -> None:
        if not isinstance(event, SteeringEvent) or event.kind is not SteeringKind.PAUSE:
            return
        if event.type == "steering.accepted":
            LOGGED.set()
        if event.type == f"steering.{self.mode}":
            out("stop")
            time.sleep(60)  # blocks the event loop: no flush, no delivery, until SIGKILL


async def main(db: str, run_id: str, mode: str) -> None:
    out("ready")
    model = ScriptedModel([tool_call("search"), reply("done")])
    async with Runtime(f"sqlite:///{db}", supervisor=SPEC, sinks=[StopAt(mode)]) as rt:
        handle = await rt.start(Agent("a", model, tools=[search]), "go", run_id=run_id)
        await handle.result()
    out("finished")  # never reached: the pause holds the run until the kill


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
