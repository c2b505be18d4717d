"""A runtime-managed graph run killed while a steering command waits for its boundary.

    python graph_steer_worker.py STORE_DB CHECKPOINT_DB first|restart

``first``: start the graph; while its ``slow`` node runs, submit an ``update_state``
command (accepted, so durable in the store) and print ``accepted <correlation id>``; the
test then SIGKILLs the process before the command reaches a boundary.
``restart``: open the same store and checkpoints, continue the thread and print the outcome
as JSON.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sys
from typing import Annotated, Any, TypedDict

from tinyagents import Runtime
from tinyagents.graph import END, START, StateGraph
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.store.checkpoint import SqliteCheckpointer


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def build(cp: SqliteCheckpointer, hang: bool) -> Any:
    started = asyncio.Event()

    async def slow(state: State) -> dict[str, Any]:
        started.set()
        if hang:
            await asyncio.Event().wait()  # killed here
        return {"log": ["slow"]}

    graph = StateGraph(State).add_node("slow", slow).add_node("done", lambda s: {"log": ["done"]})
    graph.add_edge(START, "slow").add_edge("slow", "done").add_edge("done", END)
    return graph.compile(checkpointer=cp), started


async def main(store_db: str, cp_db: str, mode: str) -> None:
    async with (
        Runtime(store=f"sqlite:///{store_db}", testing=True) as rt,
        SqliteCheckpointer(cp_db) as cp,
    ):
        graph, started = build(cp, hang=mode == "first")
        if mode == "first":
            handle = await rt.start_graph(graph, {"log": ["start"]}, thread_id="t")
            await started.wait()
            cmd = SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=SteeringActor.test(),
                kind=SteeringKind.UPDATE_STATE,
                payload={"update": {"log": ["steered"]}},
            )
            receipt = await rt.submit(cmd)
            print(receipt.status.value, cmd.correlation_id, handle.run_id, flush=True)
            await asyncio.Event().wait()
        handle = await rt.start_graph(graph, None, thread_id="t")
        result = await handle.result()
        events = {
            e.correlation_id: e.type for run in (handle.run_id,) for e in rt.steering_history(run)
        }
        print(
            json.dumps(
                {
                    "run_id": handle.run_id,
                    "status": result.status.value,
                    "log": result.output["log"],
                    "steering": events,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
