"""A human approves one branch of a parallel graph by steering, then redirects the rest.

    python examples/graph_approval.py

A draft goes to two reviews that run in parallel, each pausing on ``interrupt()`` for a
human decision. The human approves the legal review through a ``graph_task`` command; the
marketing review stays pending. Then the human redirects the graph (``graph_node`` +
``redirect``): the next superstep publishes instead of waiting for marketing, and the
legal review's result is kept.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from tinyagents import Runtime
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import EventWaiter


class Review(TypedDict, total=False):
    draft: str
    log: Annotated[list[str], operator.add]


def write(state: Review) -> dict[str, Any]:
    return {"draft": "Our product is great.", "log": ["drafted"]}


def reviewer(team: str) -> Any:
    def review(state: Review) -> dict[str, Any]:
        decision = interrupt({"team": team, "draft": state["draft"]})
        verdict = "approved" if decision["approved"] else "rejected"
        return {"log": [f"{team} {verdict}: {decision.get('reason', '')}".strip()]}

    return review


def publish(state: Review) -> dict[str, Any]:
    return {"log": ["published"]}


def build() -> Any:
    graph = StateGraph(Review).add_node("write", write)
    graph.add_node("legal", reviewer("legal")).add_node("marketing", reviewer("marketing"))
    graph.add_node("publish", publish)
    graph.add_edge(START, "write").add_edge("write", "legal").add_edge("write", "marketing")
    graph.add_edge(["legal", "marketing"], "publish").add_edge("publish", END)
    return graph.compile(checkpointer=MemoryCheckpointer(), name="review")


async def main() -> list[str]:
    human = SteeringActor.human("dana", tenant_id="acme", scopes=["agent:control"])
    async with Runtime() as rt:
        waiter = EventWaiter()
        rt.bus.add_sink(waiter)
        run = await rt.start_graph(build(), {}, thread_id="doc-1", tenant_id="acme")

        legal = await waiter.event("graph.interrupt", run.run_id, node="legal")
        await waiter.event("graph.interrupt", run.run_id, node="marketing")
        print(f"run {run.run_id} paused on legal and marketing reviews")

        approve = SteeringCommand(
            target=SteeringTarget.graph_task(run.run_id, legal.task_id),
            actor=human,
            kind=SteeringKind.APPROVE,
            payload={"reason": "claims are fine"},
        )
        receipt = await rt.submit(approve)
        print(f"approve legal task {legal.task_id}: {receipt.status.value}")
        applied = await waiter.event(
            "steering.applied", run.run_id, correlation_id=approve.correlation_id
        )
        # paused again: marketing is still waiting for a human
        await waiter.until(
            lambda e: (
                e.type == "graph.interrupt" and e.offset > applied.offset and e.node == "marketing"
            )
        )
        print("marketing review still pending")

        redirect = SteeringCommand(
            target=SteeringTarget.graph_node(run.run_id, "marketing"),
            actor=human,
            kind=SteeringKind.REDIRECT,
            payload={"goto": "publish"},
        )
        print(f"redirect to publish: {(await rt.submit(redirect)).status.value}")

        result = await run.result()
        print(f"run {result.status.value}: {result.output['log']}")
        for event in rt.steering_history(run.run_id):
            print(f"  {event.type:20} {event.kind.value:9} {event.correlation_id}")
        log: list[str] = result.output["log"]
        return log


if __name__ == "__main__":
    asyncio.run(main())
