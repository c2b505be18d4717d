"""A graph run its operator paused, in a process that then dies (``os._exit``), and the
thread continued by a next process on the same store and checkpointer
(``test_graph_crash.py::test_a_graph_run_paused_before_its_process_died_comes_back_paused``).

    python graph_pause_crash_worker.py DIR first   # start, pause, print "paused", die
    python graph_pause_crash_worker.py DIR second  # continue the thread, print its status
                                                   # (and again once resumed)
    python graph_pause_crash_worker.py DIR cancel  # continue it, print its status, cancel
                                                   # it, print how it ended
"""

from __future__ import annotations

import asyncio
import operator
import os
import sys
from typing import Annotated, Any, TypedDict

from tinyagents import Runtime, SteeringActor
from tinyagents.graph import END, START, StateGraph
from tinyagents.store.checkpoint import SqliteCheckpointer

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])


class Rounds(TypedDict, total=False):
    round: int
    log: Annotated[list[str], operator.add]


def build(cp: SqliteCheckpointer) -> Any:
    async def step(state: Rounds) -> dict[str, Any]:
        r = state.get("round", 0)
        await asyncio.sleep(0.1)
        return {"log": [f"s{r}"], "round": r + 1}

    graph = StateGraph(Rounds).add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: s["round"] < 50, {True: "step", False: END})
    return graph.compile(checkpointer=cp, recursion_limit=1000)


async def main(d: str, mode: str) -> None:
    async with (
        Runtime(f"sqlite:///{d}/store.db", testing=True) as rt,
        SqliteCheckpointer(f"{d}/checkpoints.db") as cp,
    ):
        if mode == "first":
            handle = await rt.start_graph(build(cp), {"round": 0}, thread_id="t")
            await handle.pause(actor=OPERATOR)
            for _ in range(600):
                if handle.status.value == "paused":
                    break
                await asyncio.sleep(0.05)
            await rt.flush()
            print(handle.status.value, flush=True)
            os._exit(0)  # dies: nothing closed
        sub = rt.subscribe(where=lambda e: e.type in ("run.paused", "graph.step"))
        handle = await rt.start_graph(build(cp), None, thread_id="t")
        await asyncio.sleep(0.5)  # several steps, were it running
        paused = sub.get_nowait()  # the first of them: no step was taken before it
        assert paused is not None and paused.type == "run.paused", paused
        assert paused.detail["restored"] is True, paused.detail
        assert sub.get_nowait() is None  # no step while it is held
        print(handle.status.value, flush=True)
        if mode == "cancel":  # ends it where it is held: cancelled, as any paused run
            await handle.cancel(actor=OPERATOR)
            result = await asyncio.wait_for(handle.result(), 30)
            print(result.status.value, flush=True)
            return
        await handle.resume(actor=OPERATOR)  # lets go of it: it steps again
        stepped = await asyncio.wait_for(sub.get(), 30)
        assert stepped is not None and stepped.type == "graph.step", stepped
        print(handle.status.value, flush=True)
        await handle.cancel(actor=OPERATOR)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
