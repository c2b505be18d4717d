"""A graph run whose task cancel is saved (the task skipped) and then SIGKILLed before the store
learnt the cancel was applied, for ``test_graph_crash.py``.

    python graph_cancel_crash_worker.py STORE_DB CHECKPOINT_DB first|restart task|node

``first`` starts two parallel questions (``left``, ``right``) on thread ``t``, cancels
``right`` (by its task id or its node), and kills itself from a bus sink the moment the
cancel's ``steering.applied`` is published (its skip is saved; the store has not heard yet).
``restart`` continues the thread, cancels ``right`` again (``again``), approves what is still
pending and prints the outcome as JSON: the run's log and both cancels' states in the
steering log.
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


def build(cp: SqliteCheckpointer) -> Any:
    graph = StateGraph(State).add_node("left", asker("left")).add_node("right", asker("right"))
    graph.add_edge(START, "left").add_edge(START, "right")
    return graph.add_edge("left", END).add_edge("right", END).compile(checkpointer=cp)


async def main(store: str, db: str, mode: str, by: str) -> None:
    async with (
        Runtime(store=f"sqlite:///{store}", testing=True) as rt,
        SqliteCheckpointer(db) as cp,
    ):
        graph = build(cp)
        if mode == "first":

            def kill(event: Event) -> None:
                if (
                    event.type == "steering.applied"
                    and getattr(event, "correlation_id", "") == "victim"
                ):
                    os.kill(os.getpid(), signal.SIGKILL)

            rt.bus.add_sink(kill)
            waiter = EventWaiter()
            rt.bus.add_sink(waiter)
            handle = await rt.start_graph(graph, {}, thread_id="t")
            right = await waiter.event("graph.interrupt", handle.run_id, node="right")
            await waiter.event("graph.interrupt", handle.run_id, node="left")
            target = (
                SteeringTarget.graph_task(handle.run_id, right.task_id)
                if by == "task"
                else SteeringTarget.graph_node(handle.run_id, "right")
            )
            cancel = SteeringCommand(
                target=target, actor=TEST, kind=SteeringKind.CANCEL, correlation_id="victim"
            )
            await rt.submit(cancel)
            await asyncio.sleep(30)  # killed long before
            return
        handle = await rt.start_graph(graph, None, thread_id="t")
        state = await graph.get_state("t")
        pending = state.interrupts
        [right] = [t.id for t in state.tasks if t.name == "right"]
        target = (
            SteeringTarget.graph_task(handle.run_id, right)
            if by == "task"
            else SteeringTarget.graph_node(handle.run_id, "right")
        )
        again = SteeringCommand(
            target=target, actor=TEST, kind=SteeringKind.CANCEL, correlation_id="again"
        )
        await rt.submit(again)
        for question in pending:
            approve = SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=TEST,
                kind=SteeringKind.APPROVE,
                payload={"interrupt_id": question.id},
            )
            await rt.submit(approve)
        result = await handle.result()
        await rt.flush()
        logged = await rt.store.get_command("victim")
        again_logged = await rt.store.get_command("again")
        assert logged is not None and again_logged is not None
        print(
            json.dumps(
                {
                    "pending": [q.node for q in pending],
                    "log": result.output["log"],
                    "victim": [logged.state, logged.reason],
                    "again": [again_logged.state, again_logged.reason],
                    "target": target.describe(),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
