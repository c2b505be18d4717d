"""LangGraph's functional API on tinyagents: an ``@entrypoint`` whose ``@task`` results survive
an interrupt, answered by a human through steering.

    python examples/functional_api.py

Two sections are drafted in parallel by tasks; the entrypoint then asks a human to sign off
(``interrupt()``). The run waits in a ``Runtime``; a ``provide_context`` command to the paused
task answers it, and the entrypoint runs again from its top, the drafts coming back from the
checkpoints (each drafted once). A second run of the thread reads what the first saved
(``previous``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from tinyagents import Runtime
from tinyagents.graph import Command, entrypoint, interrupt, task
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import EventWaiter

drafted: list[str] = []


@task
async def draft(section: str, topic: str) -> str:
    drafted.append(section)
    return f"{section.title()}: {topic} are great."


@entrypoint(checkpointer=MemoryCheckpointer())
async def report(topic: str, previous: Any = None) -> Any:
    intro, body = await asyncio.gather(draft("intro", topic), draft("body", topic))
    signer = interrupt({"sign off": [intro, body]})
    text = f"{intro} {body} -- signed by {signer}"
    reports = (previous or 0) + 1
    return entrypoint.final(value={"text": text, "report_no": reports}, save=reports)


async def main() -> None:
    human = SteeringActor.human("dana", tenant_id="acme", scopes=["agent:control"])
    async with Runtime() as rt:
        waiter = EventWaiter()
        rt.bus.add_sink(waiter)
        run = await rt.start_graph(report, "cats", thread_id="reports", tenant_id="acme")
        asked = await waiter.event("graph.interrupt", run.run_id)
        print("asked:", asked.data["value"])
        answer = SteeringCommand(
            target=SteeringTarget.graph_task(run.run_id, asked.task_id),
            actor=human,
            kind=SteeringKind.PROVIDE_CONTEXT,
            payload={"value": "dana"},
        )
        print("answer:", (await rt.submit(answer)).status.value)
        result = await run.result()
        print(result.status.value, result.output)
        print("drafted:", drafted)  # each section once: the resume read them back
    # without a runtime: LangGraph's ainvoke, answered with Command(resume=...)
    config = {"configurable": {"thread_id": "reports"}}
    paused = await report.ainvoke("dogs", config)
    print("asked again:", paused["__interrupt__"][0].value["sign off"][0])
    print(await report.ainvoke(Command(resume="ana"), config))  # previous: the first run's 1


asyncio.run(main())
