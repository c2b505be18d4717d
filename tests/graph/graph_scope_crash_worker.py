"""Two senders' ``update_state`` commands under one correlation id, for
``test_graph_crash.py``; the process is SIGKILLed once the first is applied.

    python graph_scope_crash_worker.py STORE_DB CHECKPOINT_DB first|restart

``first`` starts the graph on thread ``t``; while its ``slow`` node runs, a human of tenant
``acme`` (high priority, so lowered first) and the test actor each submit an update under
the id ``c-same``; the worker kills itself from a bus sink the moment the human's
``steering.applied`` is published (its checkpoint is saved, the store has not heard, the test
actor's command is still to be lowered). ``restart`` continues the thread and prints the
outcome as JSON: the run's log and, per sender, the command's state in the steering log and
whether it was reported applied before the restart.
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
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.store.checkpoint import SqliteCheckpointer
from tinyagents.testkit import EventWaiter

HUMAN = SteeringActor.human("dana", tenant_id="acme", scopes=["agent:control"])
TEST = SteeringActor.test()


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def build(cp: SqliteCheckpointer, gate: asyncio.Event) -> Any:
    async def slow(state: State) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["slow"]}

    graph = StateGraph(State).add_node("slow", slow).add_node("done", lambda s: {"log": ["done"]})
    graph.add_edge(START, "slow").add_edge("slow", "done").add_edge("done", END)
    return graph.compile(checkpointer=cp)


async def main(store: str, db: str, mode: str) -> None:
    async with (
        Runtime(store=f"sqlite:///{store}", testing=True) as rt,
        SqliteCheckpointer(db) as cp,
    ):
        gate = asyncio.Event()
        graph = build(cp, gate)
        if mode == "first":

            def kill(event: Event) -> None:
                if event.type == "steering.applied" and getattr(event, "actor", None) == HUMAN:
                    os.kill(os.getpid(), signal.SIGKILL)

            rt.bus.add_sink(kill)
            waiter = EventWaiter()
            rt.bus.add_sink(waiter)
            handle = await rt.start_graph(graph, {}, thread_id="t", tenant_id="acme")
            await waiter.event("graph.task_started", handle.run_id, node="slow")
            for actor, text, priority in (
                (HUMAN, "human", SteeringPriority.HIGH),
                (TEST, "test", SteeringPriority.NORMAL),
            ):
                cmd = SteeringCommand(
                    target=SteeringTarget.agent_run(handle.run_id),
                    actor=actor,
                    kind=SteeringKind.UPDATE_STATE,
                    payload={"update": {"log": [text]}},
                    priority=priority,
                    correlation_id="c-same",
                )
                assert (await rt.submit(cmd)).accepted
            gate.set()
            await asyncio.sleep(30)  # killed long before
            return
        gate.set()
        handle = await rt.start_graph(graph, None, thread_id="t", tenant_id="acme")
        result = await handle.result()
        await rt.flush()
        outcome: dict[str, Any] = {"log": result.output["log"]}
        for name, actor, scope in (("human", HUMAN, "tenant:acme"), ("test", TEST, "")):
            logged = await rt.store.get_command("c-same", scope=scope)
            assert logged is not None
            applied = [
                e
                for e in rt.steering_history(handle.run_id)
                if e.type == "steering.applied" and e.actor == actor
            ]
            outcome[name] = [
                logged.state,
                [bool(e.affected.get("applied_before_restart")) for e in applied],
            ]
        print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
