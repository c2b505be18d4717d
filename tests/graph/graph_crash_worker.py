"""A graph run that ``test_graph_crash.py`` SIGKILLs at random points.

    python graph_crash_worker.py DB THREAD SIDE_LOG RUN_NO

Each round: ``split`` → three parallel workers (random short waits, so kills land inside
parallel steps) → ``join`` → next round, ``ROUNDS`` times. Every node appends
``RUN_NO TASK_ID NODE`` to the side log when it starts, so the test can tell which tasks
ran in which process.
"""

from __future__ import annotations

import asyncio
import operator
import random
import sys
from typing import Annotated, Any, TypedDict

from tinyagents.graph import END, START, NodeContext, StateGraph
from tinyagents.store.checkpoint import Checkpointer

ROUNDS = 6
WORKERS = 3


class CrashState(TypedDict, total=False):
    round: int
    log: Annotated[list[str], operator.add]


def expected_log() -> list[str]:
    out = []
    for r in range(ROUNDS):
        out += [f"r{r}:split", *(f"r{r}:w{i}" for i in range(WORKERS)), f"r{r}:join"]
    return out


def build(cp: Checkpointer, side_log: str = "", run_no: int = -1) -> Any:
    def note(ctx: NodeContext) -> None:
        if side_log:
            with open(side_log, "a", encoding="utf-8") as fh:
                fh.write(f"{run_no} {ctx.task_id} {ctx.node}\n")

    async def split(state: CrashState, ctx: NodeContext) -> dict[str, Any]:
        note(ctx)
        return {"log": [f"r{state.get('round', 0)}:split"]}

    def worker(i: int) -> Any:
        async def work(state: CrashState, ctx: NodeContext) -> dict[str, Any]:
            note(ctx)
            # staggered finishes: most of a parallel step has some writes saved, some not
            await asyncio.sleep(0.002 * i + random.random() * 0.002)
            return {"log": [f"r{state.get('round', 0)}:w{i}"]}

        return work

    async def join(state: CrashState, ctx: NodeContext) -> dict[str, Any]:
        note(ctx)
        r = state.get("round", 0)
        return {"log": [f"r{r}:join"], "round": r + 1}

    graph = StateGraph(CrashState).add_node("split", split).add_node("join", join)
    graph.add_edge(START, "split")
    for i in range(WORKERS):
        graph.add_node(f"w{i}", worker(i)).add_edge("split", f"w{i}").add_edge(f"w{i}", "join")
    graph.add_conditional_edges("join", lambda s: s["round"] < ROUNDS, {True: "split", False: END})
    return graph.compile(checkpointer=cp, recursion_limit=10_000)


async def main(db: str, thread: str, side_log: str, run_no: int) -> None:
    from tinyagents.store.checkpoint import SqliteCheckpointer

    async with SqliteCheckpointer(db, snapshot_every=4) as cp:
        graph = build(cp, side_log, run_no)
        started = await cp.latest(thread) is not None
        print("ready", flush=True)
        result = await graph.run(None if started else {"round": 0}, thread_id=thread)
        print(result.status, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
