"""An agent run, steered while it runs, that ``test_agent_crash.py`` SIGKILLs.

    python agent_sigkill_worker.py DB RUN_ID INCARNATION SEED MODE [N]

Runs (or runs again, under the same run id) the ``clerk`` agent on a ``Runtime`` with a SQLite
store at DB. The model is deterministic: it calls ``step`` until the conversation holds
``STEPS`` tool results, then answers. Unless MODE is ``quiet``, a task submits a stream of
commands (seeded by SEED) while the run goes on: ``add_instruction`` with a unique text, and
``constrain_tools`` removing one of the ``x*`` tools.

Lines on stdout (each flushed):

- ``ready`` once the process runs (before the runtime opens);
- ``submit <cid>`` before each submit, ``receipt <status> <cid>`` after it;
- ``accepted <cid>`` when the ``steering.accepted`` event of a command is emitted (it is in
  the steering log by then), ``applied <cid>`` / ``failed <cid>`` for terminal events;
- ``stop`` when MODE asks to be killed at a point: ``accepted`` (the Nth ``steering.accepted``:
  between accept and apply), ``applied`` (the Nth ``steering.applied``: applied, before the
  store writer flushed it), ``settle`` (the Nth write of the store writer holding a terminal
  event: events and command states written together, as one transaction). The event loop is then blocked (``time.sleep``), so
  nothing more happens before the parent's SIGKILL;
- at the end ``done <json>``: the run's status and what its last model request carried.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from typing import Any

from tinyagents import Agent, Runtime, tool
from tinyagents.events import Event, SteeringEvent
from tinyagents.harness import ModelRequest, ModelResponse, Tool
from tinyagents.protocol import (
    CommandState,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.testkit import FunctionModel, reply, tool_call

STEPS = 8
EXTRA_TOOLS = ["x1", "x2", "x3", "x4", "x5", "x6"]
TESTER = SteeringActor.test()  # the shared scope "": get_command(cid) finds its commands


def note(cid: str) -> str:
    """The unique instruction text of command ``cid``."""
    return f"remember token {cid}-zq"


@tool
async def step(n: int) -> str:
    """One step of the job."""
    await asyncio.sleep(0.002 + random.random() * 0.006)
    return f"step {n} done"


def extra(name: str) -> Tool:
    async def run() -> str:
        return name

    return tool(name=name, description=f"Tool {name} (never called).")(run)


def all_tools() -> list[Tool]:
    return [step, *(extra(n) for n in EXTRA_TOOLS)]


def decide(request: ModelRequest) -> ModelResponse:
    results = sum(1 for m in request.messages if m.role == "tool")
    if results < STEPS:
        return tool_call("step", n=results)
    return reply("done")


def out(*parts: str) -> None:
    print(*parts, flush=True)


class Reporter:
    """A bus sink: reports steering events, and freezes the process at the chosen point."""

    def __init__(self, mode: str, nth: int) -> None:
        self.mode, self.nth, self.seen = mode, nth, 0

    def __call__(self, event: Event) -> None:
        if not isinstance(event, SteeringEvent):
            return
        state = event.type.removeprefix("steering.")
        if state in ("accepted", "applied", "failed", "rejected", "superseded"):
            out(state, event.correlation_id)
        if state == self.mode:
            self.point()

    def point(self) -> None:
        self.seen += 1
        if self.seen == self.nth:
            out("stop")
            time.sleep(60)  # blocks the event loop: no flush, no delivery, until SIGKILL


def freeze_after_settle(rt: Runtime, reporter: Reporter) -> None:
    """Make the store writer stop (for the kill) right after it wrote a batch holding a
    terminal steering event: the events and the command states they imply are one
    transaction, so the restarted run must find those commands settled."""
    store = rt.store
    append = store.append_events

    async def append_events(events: list[Any]) -> None:
        await append(events)
        if any(
            isinstance(e, SteeringEvent) and CommandState(e.type.removeprefix("steering.")).terminal
            for e in events
        ):
            reporter.point()

    store.append_events = append_events  # type: ignore[method-assign]


async def steer(rt: Runtime, run_id: str, prefix: str, rng: random.Random) -> None:
    handle = rt.runs.get(run_id)
    assert handle is not None
    k = 0
    while not handle.status.finished:
        await asyncio.sleep(rng.random() * 0.006)
        if handle.status.finished:
            return
        cid = f"{prefix}-{k}"
        k += 1
        tools = handle.info.tools or frozenset()
        removable = sorted(set(EXTRA_TOOLS) & tools)
        if rng.random() < 0.3 and removable:
            kind = SteeringKind.CONSTRAIN_TOOLS
            payload: dict[str, Any] = {"tools": sorted(tools - {rng.choice(removable)})}
        else:
            kind, payload = SteeringKind.ADD_INSTRUCTION, {"text": note(cid)}
        deliveries = [
            SteeringDelivery.NEXT_BOUNDARY,
            SteeringDelivery.BEFORE_MODEL_CALL,
            SteeringDelivery.AFTER_TOOL_RESULT,
            SteeringDelivery.END_OF_TURN,
        ]
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(run_id),
            actor=TESTER,
            kind=kind,
            payload=payload,
            delivery=rng.choice(deliveries),
            correlation_id=cid,
        )
        out("submit", cid)
        receipt = await rt.submit(cmd)
        out("receipt", receipt.status.value, cid)


async def main(db: str, run_id: str, incarnation: int, seed: int, mode: str, nth: int) -> None:
    out("ready")
    rng = random.Random(seed)
    random.seed(seed)
    reporter = Reporter(mode, nth)
    model = FunctionModel(decide)
    async with Runtime(f"sqlite:///{db}", testing=True, sinks=[reporter]) as rt:
        if mode == "settle":
            freeze_after_settle(rt, reporter)
        agent = Agent("clerk", model, tools=all_tools())
        handle = await rt.start(agent, "do the job", run_id=run_id)
        steering = None
        if mode != "quiet":
            prefix = f"c-{run_id}-{incarnation}"
            steering = asyncio.create_task(steer(rt, run_id, prefix, rng))
        result = await handle.result()
        if steering is not None:
            await steering
        # an END_OF_TURN instruction may have given the run another turn meanwhile
        result = await handle.result()
    last = model.requests[-1]
    summary = {
        "status": result.status.value,
        "error": result.error,
        "requests": len(model.requests),
        "steering": [m.metadata["steering"] for m in last.messages if "steering" in m.metadata],
        "contents": [m.content for m in last.messages],
        "tools": [t.name for t in last.tools],
        # what the run allows at its end: a command restored from the log may be applied at
        # the run's last boundary, after its last model request
        "allowed": sorted(
            t.name for t in all_tools() if handle.info.tools is None or t.name in handle.info.tools
        ),
    }
    out("done", json.dumps(summary))


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(
        main(args[0], args[1], int(args[2]), int(args[3]), args[4], int(args[5] if args[5:] else 0))
    )
