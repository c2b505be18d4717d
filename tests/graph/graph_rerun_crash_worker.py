"""A thread command accepted by a run started again on a finished thread, then a SIGKILL, for
``test_graph_crash.py``.

    python graph_rerun_crash_worker.py STORE_DB CHECKPOINT_DB first|again|restart [thread|run|other]

``first`` runs the graph on thread ``t`` to its end. ``again`` starts the finished thread once
more (a new run, which saves no checkpoint: the thread's last one still names the first run),
submits an ``update_state`` for the thread (``thread``, the default) or for that new run by its
id (``run``) and kills itself from a bus sink the moment the command's ``steering.accepted`` is
published (logged ``accepted`` for the new run, never delivered). ``restart`` starts the thread
again and prints the outcome as JSON: the run's log, the command's state and reason in the
steering log, its steering events (in the run's history, or else the failure the bus
published), and the commands the log still holds open. ``other``: as ``thread``, but
``restart`` first runs the graph on another thread to its end (a run that ends is when the
commands waiting for runs that never come back are failed), then starts ``t`` again.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import signal
import sys
from typing import Annotated, Any, TypedDict

from tinyagents import Runtime
from tinyagents.events import Event
from tinyagents.graph import END, START, StateGraph
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.store.checkpoint import SqliteCheckpointer

CID = "c-late"


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def build(cp: SqliteCheckpointer) -> Any:
    graph = StateGraph(State)
    graph.add_node("work", lambda s: {"log": ["work"]}).add_node(
        "done", lambda s: {"log": ["done"]}
    )
    graph.add_edge(START, "work").add_edge("work", "done").add_edge("done", END)
    return graph.compile(checkpointer=cp)


async def main(store: str, db: str, mode: str, target: str = "thread") -> None:
    async with (
        Runtime(store=f"sqlite:///{store}", testing=True) as rt,
        SqliteCheckpointer(db) as cp,
    ):
        graph = build(cp)
        if mode == "first":
            handle = await rt.start_graph(graph, {}, thread_id="t")
            assert (await handle.result()).status.value == "completed"
            return
        if mode == "again":

            def kill(event: Event) -> None:
                if event.type == "steering.accepted":
                    os.kill(os.getpid(), signal.SIGKILL)

            rt.bus.add_sink(kill)
            again = await rt.start_graph(graph, None, thread_id="t")
            await rt.submit(
                SteeringCommand(
                    target=SteeringTarget.agent_run(again.run_id)
                    if target == "run"
                    else SteeringTarget.thread("t"),
                    actor=SteeringActor.test(),
                    kind=SteeringKind.UPDATE_STATE,
                    payload={"update": {"log": ["steered"]}},
                    correlation_id=CID,
                )
            )
            await asyncio.sleep(30)  # killed long before
            return
        failed: list[str] = []
        rt.bus.add_sink(
            lambda e: (
                failed.append(e.type)
                if e.type == "steering.failed" and getattr(e, "correlation_id", None) == CID
                else None
            )
        )
        if target == "other":
            other = await rt.start_graph(graph, {}, thread_id="u")
            assert (await other.result()).status.value == "completed"
        handle = await rt.start_graph(graph, None, thread_id="t")
        result = await handle.result()
        await rt.flush()
        logged = await rt.store.get_command(CID)
        outcome = {
            "log": result.output["log"],
            "state": logged.state if logged is not None else None,
            "reason": logged.reason if logged is not None else None,
            "events": [e.type for e in rt.steering_history(handle.run_id)] or failed,
            "open": [c.command.correlation_id for c in await rt.store.open_commands()],
        }
        print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
