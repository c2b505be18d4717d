"""The owner of a run, for ``test_inbox_lease.py``: it takes commands from the store's inbox
and, in MODE ``die``, never answers them and freezes (for the parent's SIGKILL) once the
store writer has written a command's ``steering.applied``.

    python tests/inbox_lease_owner.py DB RUN_ID MODE

Runs (or runs again, under the same run id) the slow agent of ``slow_agent.py`` for tenant
``acme`` on a SQLite store at DB. ``INBOX_LEASE_S`` from the environment, if set, replaces the
store's lease time (so the parent need not wait 30 s). Lines on stdout (each flushed):
``owner <runtime id>`` once the run's snapshot is in the store, ``stop`` when frozen, and at
the end the run's result as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from tinyagents import Runtime
from tinyagents.events import SteeringEvent
from tinyagents.protocol import SteeringReceipt
from tinyagents.store import sqlite as sqlite_store

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.slow_agent import slow_agent


def out(*parts: str) -> None:
    print(*parts, flush=True)


def freeze() -> None:
    out("stop")
    time.sleep(60)  # blocks the event loop: nothing more happens before the SIGKILL


def die_before_answering(rt: Runtime) -> None:
    """The owner applies what it takes and answers nothing: its receipts never reach the
    store, and the process freezes once a command's ``steering.applied`` is written."""
    store = rt.store

    async def never_answer(request_id: str, receipt: SteeringReceipt) -> None:
        await asyncio.Event().wait()

    append = store.append_events

    async def append_events(events: list[Any]) -> None:
        await append(events)
        if any(isinstance(e, SteeringEvent) and e.type == "steering.applied" for e in events):
            freeze()

    store.inbox_answer = never_answer  # type: ignore[method-assign]
    store.append_events = append_events  # type: ignore[method-assign]


async def main(db: str, run_id: str, mode: str) -> None:
    if "INBOX_LEASE_S" in os.environ:
        sqlite_store.INBOX_LEASE_S = float(os.environ["INBOX_LEASE_S"])
    async with Runtime(f"sqlite:///{db}") as rt:
        if mode == "die":
            die_before_answering(rt)
        handle = await rt.start(slow_agent(), "work slowly", tenant_id="acme", run_id=run_id)
        while True:
            snap = await rt.store.load_run(run_id)
            if snap is not None and snap["owner"] == rt.runtime_id:
                break
            await asyncio.sleep(0.02)
        out("owner", rt.runtime_id)
        result = await handle.result()
    out(json.dumps({"status": result.status.value, "output": result.output}))


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    asyncio.run(main(*sys.argv[1:4]))
