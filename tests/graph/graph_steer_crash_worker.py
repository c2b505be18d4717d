"""A runtime-managed graph run, steered while it runs, that ``test_graph_crash.py`` SIGKILLs
at random points.

    python graph_steer_crash_worker.py STORE_DB CHECKPOINT_DB THREAD RUN_NO [quiet]

Runs (or continues) the rounds graph of ``graph_crash_worker`` on THREAD in a ``Runtime``
with a SQLite store. Unless ``quiet``, it keeps submitting ``update_state`` commands for the
thread while the run goes on, each appending ``steer:<correlation id>`` to the log, and prints
``<receipt status> <correlation id>`` once each receipt is back. Prints ``completed`` at the
end.
"""

from __future__ import annotations

import asyncio
import random
import sys

from graph_crash_worker import build

from tinyagents import Runtime
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.store.checkpoint import SqliteCheckpointer


async def steer(rt: Runtime, thread: str, run_no: int, done: asyncio.Event) -> None:
    k = 0
    while not done.is_set():
        await asyncio.sleep(random.random() * 0.004)
        cid = f"c-{run_no}-{k}"
        cmd = SteeringCommand(
            target=SteeringTarget.thread(thread),
            actor=SteeringActor.test(),
            kind=SteeringKind.UPDATE_STATE,
            payload={"update": {"log": [f"steer:{cid}"]}},
            correlation_id=cid,
        )
        receipt = await rt.submit(cmd)
        print(receipt.status.value, cid, flush=True)
        k += 1


async def main(store_db: str, cp_db: str, thread: str, run_no: int, quiet: bool) -> None:
    async with (
        Runtime(store=f"sqlite:///{store_db}", testing=True) as rt,
        SqliteCheckpointer(cp_db, snapshot_every=4) as cp,
    ):
        graph = build(cp)
        started = await cp.latest(thread) is not None
        print("ready", flush=True)
        handle = await rt.start_graph(graph, None if started else {"round": 0}, thread_id=thread)
        done = asyncio.Event()
        steering = None if quiet else asyncio.create_task(steer(rt, thread, run_no, done))
        result = await handle.result()
        done.set()
        if steering is not None:
            await steering
        print(result.status.value, flush=True)


if __name__ == "__main__":
    quiet = sys.argv[5:] == ["quiet"]
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), quiet))
