"""A YAML-supervised triage agent, offline: a rule pauses it, we resume it, the judge steers
it, and the audit shows every action.

    python examples/supervised_triage/main.py
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tinyagents import Agent, RunLimits, Runtime, SupervisorSpec, tool
from tinyagents.events import SupervisorEvent
from tinyagents.harness import ModelRequest, ModelResponse
from tinyagents.testkit import EventWaiter, FunctionModel, ScriptedModel, reply, tool_call

HERE = Path(__file__).resolve().parent


@tool
def search_tickets(query: str) -> str:
    """Search earlier tickets."""
    return f"3 tickets mention {query!r}; none is conclusive"


@tool
def classify(category: str) -> str:
    """Classify the ticket."""
    return f"classified as {category}"


async def triage_model(request: ModelRequest) -> ModelResponse | str:
    """A scripted agent that loops on search until the supervisor's guidance reaches it."""
    seen = "\n".join(m.content for m in request.messages)
    if "Supervisor guidance" not in seen:
        return tool_call("search_tickets", query="refund not received")
    if "classified as" not in seen:
        return tool_call("classify", category="billing")
    return reply("Ticket triaged: billing.")


def judge_verdicts(request: ModelRequest) -> str:
    """A scripted judge: it reads the run's metadata (never its messages)."""
    metadata = json.loads(request.messages[-1].content.split("\n", 1)[1])
    searches = metadata["tool_calls"]["search_tickets"]
    if searches > 3:
        verdict = {"passed": False, "reason": "stop searching: classify the ticket now"}
    else:
        verdict = {"passed": True, "reason": "still within the policy"}
    return json.dumps(verdict)


async def main() -> None:
    spec = SupervisorSpec.from_yaml(HERE / "supervisor.yaml")
    print(f"judge in the YAML: {spec.model}; offline we use a scripted one")
    spec = spec.model_copy(update={"model": ScriptedModel([judge_verdicts] * 10)})

    waiter = EventWaiter()
    agent = Agent(
        "triage",
        FunctionModel(triage_model),
        tools=[search_tickets, classify],
        limits=RunLimits(max_model_calls=20),
        supervisor=spec,
    )
    async with Runtime(sinks=[waiter]) as rt:
        handle = await rt.start(agent, "Customer says their refund never arrived.")
        paused = await waiter.event("run.paused", handle.run_id)
        print(f"paused by the supervisor after {handle.info.usage.tool_calls} tool calls")
        assert paused.run_id == handle.run_id
        print("operator: looked at it, resuming")
        await handle.resume()
        result = await handle.result()
        print(f"result: {result.status.value}: {result.output}")

        print("\naudit (supervisor actions and their commands):")
        for event in waiter.events:
            if isinstance(event, SupervisorEvent) and event.type == "supervisor.action":
                d = event.data
                print(
                    f"  action {d['action']:<5} from {d['source']:<15} at iteration "
                    f"{d['iteration']}: {d['reason']}"
                )
        for event in rt.steering_history(handle.run_id):
            if event.type in ("steering.accepted", "steering.applied", "steering.rejected"):
                print(f"  {event.type:<18} {event.kind.value:<15} by {event.actor.describe()}")


if __name__ == "__main__":
    asyncio.run(main())
