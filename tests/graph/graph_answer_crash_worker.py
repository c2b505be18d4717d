"""A graph run whose two paused tasks are approved one after the other, SIGKILLed once the
step that took both answers is saved but before the store heard of either approval, for
``test_graph_crash.py``.

    python graph_answer_crash_worker.py STORE_DB CHECKPOINT_DB first|restart

``first`` starts two parallel questions (``left``, then ``after_left``; ``right``) on thread
``t``, stops the store's event writes (a store that lags behind the run), approves ``left``
(``c-left``), waits for the step to pause on ``right`` alone, approves ``right``
(``c-right``), and ``after_left`` kills the process: the step that consumed both answers is
saved, the steering log still says both are accepted. ``restart`` continues the thread and
prints the outcome as JSON: the run's log and, per approval, its state and reason in the
steering log and whether it was reported applied before the restart.
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
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.store.checkpoint import SqliteCheckpointer
from tinyagents.testkit import EventWaiter

TEST = SteeringActor.test()


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def asker(name: str) -> Any:
    def node(state: Any) -> dict[str, Any]:
        return {"log": [f"{name}:{interrupt(f'{name}?')['approved']}"]}

    return node


def build(cp: SqliteCheckpointer, *, kill: bool) -> Any:
    def after_left(state: Any) -> dict[str, Any]:
        if kill:  # the step before is saved: its checkpoint is all a restart can read
            os.kill(os.getpid(), signal.SIGKILL)
        return {"log": ["after_left"]}

    graph = StateGraph(State).add_node("left", asker("left")).add_node("right", asker("right"))
    graph.add_node("after_left", after_left).add_edge("left", "after_left")
    graph.add_edge(START, "left").add_edge(START, "right")
    graph.add_edge("after_left", END).add_edge("right", END)
    return graph.compile(checkpointer=cp)


async def never_written(events: list[Event]) -> None:
    await asyncio.Event().wait()


async def approve(rt: Runtime, waiter: EventWaiter, cid: str, paused: Any) -> Event:
    """Approve the task ``paused`` (its graph.interrupt event) asks of, under ``cid``; the
    command's steering.applied event."""
    target = SteeringTarget.graph_task(paused.run_id, paused.task_id)
    cmd = SteeringCommand(target=target, actor=TEST, kind=SteeringKind.APPROVE, correlation_id=cid)
    assert (await rt.submit(cmd)).accepted
    return await waiter.event("steering.applied", correlation_id=cid)


async def main(store: str, db: str, mode: str) -> None:
    async with (
        Runtime(store=f"sqlite:///{store}", testing=True) as rt,
        SqliteCheckpointer(db) as cp,
    ):
        graph = build(cp, kill=mode == "first")
        if mode == "first":
            waiter = EventWaiter()
            rt.bus.add_sink(waiter)
            handle = await rt.start_graph(graph, {}, thread_id="t")
            left = await waiter.event("graph.interrupt", handle.run_id, node="left")
            right = await waiter.event("graph.interrupt", handle.run_id, node="right")
            # from here the store hears no event: no command is settled in its log
            rt.store.append_events = never_written  # type: ignore[method-assign]
            applied = await approve(rt, waiter, "c-left", left)
            await waiter.until(  # LEFT ran; the step waits on RIGHT alone
                lambda e: e.type == "graph.interrupt" and e.offset > applied.offset
            )
            await approve(rt, waiter, "c-right", right)
            await asyncio.sleep(30)  # killed long before
            return
        handle = await rt.start_graph(graph, None, thread_id="t")
        result = await handle.result()
        await rt.flush()
        outcome: dict[str, Any] = {"log": result.output["log"]}
        for cid in ("c-left", "c-right"):
            logged = await rt.store.get_command(cid)
            assert logged is not None
            reported = [
                bool(e.affected.get("applied_before_restart"))
                for e in rt.steering_history(handle.run_id)
                if e.type == "steering.applied" and e.correlation_id == cid
            ]
            outcome[cid] = [logged.state, logged.reason, reported]
        print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
