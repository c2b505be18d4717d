"""A server whose every run-supplied string is an HTML/JS payload, for the console's browser
test of cross-site scripting. ``python hostile_server.py PORT`` starts, without a store and
without tokens on ``127.0.0.1:PORT``:

- an agent run (in a model call that never ends) whose run id, thread id, agent id, model name and tool name are
  payloads, with a pending steering command (its text and sender payloads) and a rejected one;
- a run whose model fails with a payload as its error;
- a run whose agent and model are named by one word of 3,000 characters, its run id 512;
- a graph run waiting on an interrupt whose node, question and answer schema are payloads;

and prints ``serving`` once it listens. Each payload, run as script, sets ``window.__pwned``
and ``document.title``."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, TypedDict

from tinyagents import (
    Agent,
    ModelError,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
    tool,
)
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.server import Control, bind, create_app, serving
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import FunctionModel, reply, tool_call


def unchecked_name(agent: Any, name: str) -> Any:
    """``agent`` under ``name``, which ``Agent(name)`` refuses (control and bidi characters):
    a run of it stores the name as a run of an earlier version, or of another writer, may.
    (Set past the ``name`` setter, which checks it as ``Agent(name)`` does.)"""
    agent._name = name
    return agent


def hostile(field: str) -> str:
    """``field`` wrapped in markup that, were it read as HTML, would run script."""
    run = f"window.__pwned='{field}';document.title='pwned'"
    return (
        f'{field}"\'><img src=x onerror="{run}"></script><script>{run}</script>'
        f'<a href="javascript:{run}">link</a>\u202e{field}-end'
    )


def hostile_id(field: str) -> str:
    """``hostile(field)`` as an id may be: without '/' (a run id fits in a URL path segment),
    ':' (a graph keeps it for itself) or the right-to-left override (the id rule refuses it:
    ``tinyagents.protocol.ids.SPOOFING``)."""
    return hostile(field).replace("/", "").replace(":", " ").replace("\u202e", "")


LONG_NAME = "W" * 3000
LONG_ID = "r" * 256  # the longest id the id rule takes (MAX_ID_LENGTH)


class Question(TypedDict, total=False):
    decision: str


def ask(state: Question) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            hostile("schema-field"): {"type": "string"},
            "value": {"type": "string", "description": hostile("schema-description")},
        },
    }
    answer = interrupt({"question": hostile("question")}, response_schema=schema)
    return {"decision": str(answer)}


async def main(port: int) -> None:
    hostile_tool = tool(name="lookup")(lambda n: hostile("tool-result"))
    thought = asyncio.Event()

    async def think(request: Any) -> Any:
        if sum(m.role == "tool" for m in request.messages) < 2:
            return tool_call("lookup", n=hostile("tool-arg"))
        thought.set()
        await asyncio.Event().wait()  # until the test kills the process
        return reply("never")

    async def fail(request: Any) -> Any:
        raise ModelError(hostile("model-error"))

    # ``Agent`` refuses a name holding control or bidi characters now; a store written before
    # (or by another writer) still holds such names, and the console shows them as text
    agent = unchecked_name(
        Agent("agent", FunctionModel(think, name=hostile("model")), tools=[hostile_tool]),
        hostile("agent"),
    )
    failing = unchecked_name(
        Agent("failing-agent", FunctionModel(fail, name="failing-model")),
        hostile("failing-agent"),
    )
    node = hostile_id("node")
    graph = StateGraph(Question)
    graph.add_node(node, ask)
    graph.add_edge(START, node).add_edge(node, END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer(), name=hostile("graph"))
    async with Runtime() as runtime:
        control = Control(runtime)
        run = await runtime.start(
            agent, hostile("input"), run_id=hostile_id("run"), thread_id=hostile_id("thread")
        )
        await thought.wait()  # (the commands below then wait for its next boundary)
        actor = SteeringActor.human(
            hostile("operator"), tenant_id="default", scopes=["agent:control"]
        )
        target = SteeringTarget.agent_run(run.run_id)
        await runtime.submit(SteeringCommand(target=target, actor=actor, kind=SteeringKind.PAUSE))
        await runtime.submit(
            SteeringCommand(
                target=target,
                actor=actor,
                kind=SteeringKind.ADD_INSTRUCTION,
                payload={"text": hostile("instruction")},
            )
        )
        await runtime.submit(
            SteeringCommand(
                target=target,
                actor=actor,
                kind=SteeringKind.CONSTRAIN_TOOLS,
                payload={"tools": [hostile("widen")]},
            )
        )
        await runtime.start(failing, "x", run_id=hostile_id("failed-run"))
        # names of one long word: 3,000 characters, and a run id as long as the API reads
        long = Agent(LONG_NAME, FunctionModel(think, name="M" * 3000), tools=[hostile_tool])
        await runtime.start(long, "x", run_id=LONG_ID)
        await runtime.start_graph(compiled, {}, thread_id=hostile_id("g-thread"))
        async with serving(create_app(control, auth=None), bind("127.0.0.1", port)):
            print("serving", flush=True)
            await asyncio.Event().wait()  # until the test kills the process


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
