"""What ``tinyagents serve --demo`` runs: the demo's agents, slowly, over and over.

Two loops share one task:

- **the research tree** — the orchestrator of ``tinyagents demo`` with its *critic* and
  *research* sub-agents on the same scripted models, each model answer taking a few seconds,
  so a tree lives long enough to pause, steer and resume a child from the console. When a tree
  ends (however it ends: completed, cancelled from the console, ...) a new one starts.
- **a refund approval** — a one-question graph whose task waits on an interrupt until someone
  approves or rejects it (from the console); then the next one is asked.

Nobody steers these runs but the operator: unlike ``tinyagents demo`` there is no scripted
human, so every command in the console's timeline is one somebody clicked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any, TypedDict

from tinyagents.demo import Cues, build_agents
from tinyagents.errors import ConfigurationError
from tinyagents.events.models import Event, SteeringEvent, SubAgentEvent
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.runs.handle import RunHandle
from tinyagents.runtime import Runtime
from tinyagents.store.checkpoint import MemoryCheckpointer

#: Seconds each scripted model answer takes (``TINYAGENTS_DEMO_THINK_S`` overrides it).
THINK_S = 5.0
#: Seconds between the end of one demo tree and the start of the next.
BETWEEN_S = 3.0
#: Seconds after which a tree that has not ended (paused and forgotten) gets a sibling tree.
STUCK_S = 120.0
#: Seconds the demo's stop waits for each of its runs to end on its cancel.
STOP_S = 10.0
#: At most this many demo trees run at once.
MAX_LIVE = 3
TASK = "Customer says invoice #1042 was charged twice. Investigate."


#: The longest ``TINYAGENTS_DEMO_THINK_S``: an hour per answer is a demo that shows nothing.
MAX_THINK_S = 3600.0


def env_think_s() -> float:
    """``TINYAGENTS_DEMO_THINK_S`` (default ``THINK_S``); ``ConfigurationError`` for one that
    is no number of seconds from 0 to ``MAX_THINK_S``: "abc" was a traceback once the server
    had started, "nan" failed the demo's task unseen, "inf" left an answer thinking for ever."""
    raw = os.environ.get("TINYAGENTS_DEMO_THINK_S")
    if raw is None:
        return THINK_S
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(
            f"TINYAGENTS_DEMO_THINK_S={raw!r} is not a number of seconds"
        ) from None
    if not 0 <= value <= MAX_THINK_S:  # nan and inf too
        raise ConfigurationError(
            f"TINYAGENTS_DEMO_THINK_S={raw!r} must be a number of seconds from 0 to "
            f"{MAX_THINK_S:,g}"
        )
    return value


def start_demo(
    runtime: Runtime, *, tenant_id: str = "default", think_s: float | None = None
) -> asyncio.Task[None]:
    """Start the demo's runs in ``runtime`` for ``tenant_id``; cancel the task to stop them.

    ``think_s`` (default ``THINK_S``, or ``TINYAGENTS_DEMO_THINK_S`` from the environment) is how
    long each scripted model answer takes: a tree lives about fifteen answers.
    """
    if think_s is None:
        think_s = env_think_s()
    return asyncio.create_task(_demo(runtime, tenant_id, think_s), name="tinyagents-serve-demo")


async def _demo(runtime: Runtime, tenant_id: str, think_s: float) -> None:
    async with asyncio.TaskGroup() as group:
        group.create_task(research_trees(runtime, tenant_id, think_s))
        group.create_task(refund_approvals(runtime, tenant_id))


async def research_trees(runtime: Runtime, tenant_id: str, think_s: float) -> None:
    """One demo tree after another. A tree someone left paused does not stop the show: after
    ``STUCK_S`` the next one starts beside it (at most ``MAX_LIVE`` trees at once)."""
    async with asyncio.TaskGroup() as group:
        live: set[asyncio.Task[None]] = set()
        while True:
            if len(live) >= MAX_LIVE:
                await asyncio.wait(live, return_when=asyncio.FIRST_COMPLETED)
            tree = group.create_task(research_tree(runtime, tenant_id, think_s))
            live.add(tree)
            tree.add_done_callback(live.discard)
            await asyncio.wait({tree}, timeout=STUCK_S)
            await asyncio.sleep(BETWEEN_S)


async def research_tree(runtime: Runtime, tenant_id: str, think_s: float) -> None:
    """The demo's orchestrator tree on its scripted models, until it ends (however it ends)."""
    cues = Cues()
    cues.human_steered.set()  # the operator steers from the console, not a script

    def cue(event: Event) -> None:
        # The critic's script waits until a command for it was accepted (in the demo, its
        # parent's steer). Its id is learnt as it starts: a cancel that reaches it before the
        # orchestrator's script has read the id must still wake it, or the tree never ends.
        if isinstance(event, SubAgentEvent) and event.type == "subagent.started":
            if event.agent_id == "critic" and event.root_run_id == root.get("id"):
                cues.critic_run_id = cues.critic_run_id or event.child_run_id
        elif (
            isinstance(event, SteeringEvent)
            and event.type == "steering.accepted"
            and event.run_id is not None
            and event.run_id == cues.critic_run_id
        ):
            cues.critic_steered.set()

    root: dict[str, str] = {}
    runtime.bus.add_sink(cue)
    try:
        handle = await runtime.start(
            build_agents(cues, None, think_s=think_s), TASK, tenant_id=tenant_id
        )
        root["id"] = handle.run_id
        await until_ended(handle)
    finally:
        runtime.bus.remove_sink(cue)


async def until_ended(handle: RunHandle) -> None:
    """Wait until the run ends; when the demo is stopped meanwhile, the run is cancelled too,
    and ends before the demo does (for ``STOP_S`` at most)."""
    try:
        await handle.result()
    except asyncio.CancelledError:
        if not handle.status.finished:
            # Immediate, and waited for: a cancel left queued behind a model call would be
            # failed "target finished before delivery" by the runtime closing under it, the
            # last word in the run's history after the commands it superseded.
            with contextlib.suppress(Exception):
                await handle.cancel("the serve demo stopped", immediate=True)
                async with asyncio.timeout(STOP_S):
                    await handle.result()
        raise


class Refund(TypedDict, total=False):
    invoice: str
    amount: str
    decision: str


#: What the refund question takes, as a JSON Schema that goes out with it (the console shows
#: what it expects): a JSON Schema ``dict`` checks no answer, so any approve or reject answers
#: it, as before it had one.
REFUND_ANSWER = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "value": {"type": "string", "description": "the amount to refund, if not all"},
        "reason": {"type": "string"},
    },
    "required": ["approved"],
}


def ask(state: Refund) -> dict[str, Any]:
    answer = interrupt(
        {"question": f"Refund {state['amount']} for invoice {state['invoice']}?"},
        response_schema=REFUND_ANSWER,
    )
    approved = isinstance(answer, dict) and answer.get("approved")
    return {"decision": "refunded" if approved else "refused"}


def refund_graph() -> Any:
    """A graph with one question: its task waits until someone approves or rejects it."""
    graph = StateGraph(Refund)
    graph.add_node("approve_refund", ask)
    graph.add_edge(START, "approve_refund").add_edge("approve_refund", END)
    return graph.compile(checkpointer=MemoryCheckpointer(), name="refund-approval")


async def refund_approvals(runtime: Runtime, tenant_id: str) -> None:
    """One refund question after another, each waiting for an operator's answer."""
    graph = refund_graph()
    number = 0
    while True:
        number += 1
        handle = await runtime.start_graph(
            graph,
            {"invoice": "#1042", "amount": "129.00 EUR"},
            thread_id=f"refund-{os.getpid()}-{number}",
            tenant_id=tenant_id,
        )
        with contextlib.suppress(Exception):  # a failed or cancelled question: ask the next
            await until_ended(handle)
        await asyncio.sleep(BETWEEN_S)
