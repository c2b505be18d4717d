"""The main job: an orchestrator with two sub-agents, steered while they run.

    tinyagents demo                               # offline, scripted models, SQLite store
    tinyagents demo --model openai/gpt-4o-mini    # a real model via litellm (its own story)
    tinyagents demo --model openai/NAME --api-base http://127.0.0.1:8080/v1 --api-key-env KEY

What happens:
1. The orchestrator spawns a *critic* sub-agent in the background and steers it.
2. It calls the *research* sub-agent as a tool with a broad task. While research runs, a human
   steers that child directly ("focus only on billing evidence") without touching the parent.
3. Someone tries to widen research's tools, and the critic (a sibling) tries to steer research:
   both are rejected with a reason.
4. Research hits its model-call limit; the parent gets an error tool result that says so and
   retries with a narrower task, which completes.
5. Everything is stored in a SQLite file; the run ends with an audit table of every command.

On a terminal the story is printed line by line above a live run tree (with a spinner while a
model is thinking), so the scrollback keeps all of it. A real model does not follow the script
(a small one calls no tools at all): the demo then says so and shows what it did.

The file keeps the runs of earlier demos (``--fresh`` starts it empty); a file that is not a
tinyagents store is never touched.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import json
import os
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.text import Text

from tinyagents import (
    Agent,
    RunLimits,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
    SubAgent,
    SubAgentTool,
    orchestrator_tools,
    tool,
)
from tinyagents._clock import new_id
from tinyagents._record import Record
from tinyagents.console import (
    TERMINAL,
    RunRow,
    Story,
    TerminalConsole,
    audit_table,
    describe,
    run_tree,
)
from tinyagents.errors import StoreError
from tinyagents.events.models import Event, ModelEvent, RunEvent, SteeringEvent, SubAgentEvent
from tinyagents.harness.model import Model, ModelRequest, ModelResponse, ToolCall, Usage
from tinyagents.store.sqlite import MIGRATIONS, newer_message, newest_version

CORPUS = {
    "billing": "Invoice #1042 was charged twice on 2026-03-02 (ledger rows 88 and 91).",
    "refund": "Refund for #1042 was requested on 2026-03-05 and is still pending.",
    "shipping": "Order #77 shipped late; unrelated to billing.",
    "ledger": "Ledger: row 88 = 129.00 EUR, row 91 = 129.00 EUR, same card, same invoice.",
}


@tool
async def search(query: str) -> str:
    """Search the support archive; returns matching notes."""
    await asyncio.sleep(0.05)  # a little latency makes the live view readable
    hits = [text for key, text in CORPUS.items() if key in query.lower()]
    return "\n".join(hits) or "no notes found"


@dataclass(eq=False, repr=False)
class Cues(Record):
    """Events the scripted actors wait on, so the story plays out the same way every time."""

    research_started: asyncio.Event = field(default_factory=asyncio.Event)
    human_steered: asyncio.Event = field(default_factory=asyncio.Event)
    critic_steered: asyncio.Event = field(default_factory=asyncio.Event)
    research_run_id: str | None = None
    critic_run_id: str | None = None


# --------------------------------------------------------------------------- scripted models


def _calls(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def _call(tool_name: str, **args: Any) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(id=new_id("call"), name=tool_name, args=args)])


class ScriptModel(Model):
    """A scripted stand-in for a real model: ``step(request)`` decides each answer.

    (The testkit has the general-purpose fakes; product code does not depend on it.)
    """

    def __init__(
        self, step: Callable[[ModelRequest], Any], *, name: str, think_s: float = 0.0
    ) -> None:
        self.step = step
        self.name = name
        self.think_s = think_s  # how long each answer takes (``serve --demo`` plays slowly)

    async def request(self, request: ModelRequest) -> ModelResponse:
        if self.think_s:
            await asyncio.sleep(self.think_s)
        answer = self.step(request)
        if inspect.isawaitable(answer):
            answer = await answer
        usage = Usage(input_tokens=len(request.messages), output_tokens=1)
        if isinstance(answer, str):
            return ModelResponse(text=answer, usage=usage)
        assert isinstance(answer, ModelResponse)
        answer.usage = usage
        return answer


def _saw_steering(request: ModelRequest) -> bool:
    return any(m.metadata.get("steering") for m in request.messages)


def orchestrator_script(cues: Cues) -> Callable[[ModelRequest], Any]:
    def step(request: ModelRequest) -> ModelResponse | str:
        n = _calls(request)
        last = request.messages[-1].content
        if n == 0:
            return _call(
                "spawn_subagent",
                name="critic",
                input="Review the research findings for unsupported claims.",
            )
        if n == 1:
            try:
                cues.critic_run_id = json.loads(last)["run_id"]
            except (ValueError, KeyError, TypeError):
                # not the script's story (an operator took spawn_subagent away): say so and stop
                return f"The critic could not be started ({last}); stopping here."
            return _call(
                "steer_subagent",
                run_id=cues.critic_run_id,
                text="Check every claim against the ledger rows.",
            )
        if n == 2:
            return _call("research", input="Find all evidence about every customer complaint.")
        if n == 3:  # the limit error came back: retry narrower
            return _call("research", input="Find billing evidence for invoice #1042 only.")
        if n == 4:
            return _call("wait_subagents", run_ids=[cues.critic_run_id])
        return "Summary: invoice #1042 was double-charged (ledger rows 88 and 91); the critic confirmed it."

    return step


def research_script(cues: Cues) -> Callable[[ModelRequest], Any]:
    async def step(request: ModelRequest) -> ModelResponse | str:
        task = next(m.content for m in request.messages if m.role == "user")
        n = _calls(request)
        if "#1042 only" in task:
            return (
                _call("search", query="billing ledger")
                if n == 0
                else "Invoice #1042 was charged twice (ledger rows 88, 91)."
            )
        if n == 0:
            cues.research_started.set()
            await cues.human_steered.wait()  # the human steers while this child is running
        topic = "billing" if _saw_steering(request) else ["shipping", "refund", "billing"][n % 3]
        return _call("search", query=topic)  # never finishes on its own: it will hit its limit

    return step


def critic_script(cues: Cues) -> Callable[[ModelRequest], Any]:
    async def step(request: ModelRequest) -> ModelResponse | str:
        if _calls(request) == 0:
            await cues.critic_steered.wait()
            return _call("search", query="ledger")
        return "Checked against the ledger: both charges are real; the claim holds."

    return step


def build_agents(cues: Cues, model: str | Model | None, *, think_s: float = 0.0) -> Agent:
    def pick(script: Callable[[ModelRequest], Any], name: str) -> Model | str:
        return model if model is not None else ScriptModel(script, name=name, think_s=think_s)

    research = SubAgent(
        Agent(
            "research",
            pick(research_script(cues), "scripted-research"),
            instructions="You research support tickets with the search tool. Be brief.",
            tools=[search],
            limits=RunLimits(max_model_calls=3),
        ),
        description="finds evidence in the support archive",
    )
    critic = SubAgent(
        Agent(
            "critic",
            pick(critic_script(cues), "scripted-critic"),
            instructions="You check research findings for unsupported claims. Be brief.",
            tools=[search],
        ),
        description="checks findings for unsupported claims",
    )
    return Agent(
        "orchestrator",
        pick(orchestrator_script(cues), "scripted-orchestrator"),
        instructions="You coordinate a research and a critic sub-agent to answer billing disputes.",
        tools=[SubAgentTool(research), *orchestrator_tools([critic])],
        limits=RunLimits(max_model_calls=30),
    )


# --------------------------------------------------------------------------- the human


async def human(rt: Runtime, cues: Cues, say: Callable[[str], None]) -> None:
    """Acts as the operator at the console: steers the research child directly."""
    await cues.research_started.wait()
    run_id = cues.research_run_id
    assert run_id is not None
    alice = SteeringActor.human("alice", tenant_id="acme", scopes=["agent:control"])
    say(f"[bold]human alice[/] steers child {run_id} directly")
    await rt.submit(
        SteeringCommand(
            target=SteeringTarget.agent_run(run_id),
            actor=alice,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "focus only on billing evidence"},
        )
    )
    say("[bold]human alice[/] tries to widen the child's tools")
    await rt.submit(
        SteeringCommand(
            target=SteeringTarget.agent_run(run_id),
            actor=alice,
            kind=SteeringKind.CONSTRAIN_TOOLS,
            payload={"tools": ["search", "delete_records"]},
        )
    )
    if cues.critic_run_id:
        say("[bold]the critic[/] (a sibling) tries to steer research")
        await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(run_id),
                actor=SteeringActor.parent_agent(cues.critic_run_id, "critic"),
                kind=SteeringKind.ADD_INSTRUCTION,
                payload={"text": "stop searching"},
            )
        )
    cues.human_steered.set()


# --------------------------------------------------------------------------- the store file


def _nowhere(link: Path) -> str:
    """Why symlink ``link`` leads to no file: a loop, or a target that does not exist."""
    try:
        link.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "leads nowhere (a loop): name the store file itself"
    return "points at a file that does not exist: name the store file itself"


def open_store_file(path: Path) -> sqlite3.Connection:
    """A read-only connection to the tinyagents store at ``path``; ``StoreError`` (one line,
    naming the file) when it is missing, not a file, not SQLite or not a tinyagents store.

    Nothing is ever written: a cleanly closed store (no ``-wal`` file) is opened immutable, so
    not even ``-wal``/``-shm`` side files appear; one a runtime may be writing is read through
    its write-ahead log. The caller closes the connection.
    """
    if not path.exists():
        if path.is_symlink():  # "no such store file" sent users looking for the symlink
            raise StoreError(f"{path} is a symlink (to {os.readlink(path)}) that {_nowhere(path)}")
        raise StoreError(f"no such store file: {path}")
    if not path.is_file():
        raise StoreError(f"{path} is not a tinyagents store: it is not a file")
    if path.stat().st_size == 0:
        raise StoreError(f"{path} is not a tinyagents store: it is empty")
    live = Path(f"{path}-wal").exists()
    uri = f"{path.resolve().as_uri()}?mode=ro" + ("" if live else "&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path}: {exc}") from exc
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        found = None  # the steering log's schema version (None: no steering log)
        if "migrations" in tables:
            found = newest_version(
                (
                    r[0]
                    for r in conn.execute("SELECT version FROM migrations WHERE name = 'steering'")
                ),
                "migrations",
            )
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(f"{path} is not a tinyagents store: {exc}") from exc
    except StoreError as exc:
        conn.close()
        raise StoreError(f"cannot read {path}: {exc}") from exc
    if found is None or not {"runs", "events"} <= tables:
        conn.close()
        raise StoreError(f"{path} is not a tinyagents store: it has no steering log")
    # as an open refuses it: a newer version's tables may not read as this version's
    known = MIGRATIONS[-1][0]
    if found > known:
        conn.close()
        raise StoreError(f"cannot read {path}: {newer_message('steering', found, known)}")
    return conn


def prepare_db(db: Path, *, fresh: bool) -> None:
    """Check that the demo may write ``db`` (absent, empty or a tinyagents store) and, with
    ``fresh``, empty it; a file that is not a store raises ``StoreError`` and stays as it is."""
    if db.exists() and not (db.is_file() and db.stat().st_size == 0):
        try:
            open_store_file(db).close()
        except StoreError as exc:
            raise StoreError(f"{exc}; the demo writes only to a tinyagents store") from exc
    if fresh:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)


# --------------------------------------------------------------------------- main


async def run_demo(
    *,
    db: str | Path = "tinyagents-demo.db",
    model: str | Model | None = None,
    console: Console | None = None,
    fresh: bool = False,
) -> dict[str, Any]:
    """Run the scenario; returns a summary (used by the tests).

    ``model`` (a litellm name or a ``Model``) replaces the scripted models: a real model plays
    its own story, and the demo says what did happen. ``db`` keeps the runs of earlier demos
    unless ``fresh``; it must not exist, be empty or be a tinyagents store (anything else
    raises ``StoreError`` and is left untouched)."""
    if console is None:
        # Piped output (CI, `| tee`) gets a fixed width so the audit table stays readable.
        console = (
            TerminalConsole()
            if sys.stdout.isatty() or "COLUMNS" in os.environ
            else TerminalConsole(width=100)
        )
    db = Path(db)
    prepare_db(db, fresh=fresh)
    cues = Cues()
    orchestrator = build_agents(cues, model)
    seen: list[Event] = []

    async with Runtime(store=f"sqlite:///{db}") as rt:
        root: list[str] = []

        def tree() -> RenderableType:
            return run_tree(live_rows(rt, root[0], seen)) if root else Text("(starting)")

        story = Story(console, tree)

        def watch(event: Event) -> None:
            seen.append(event)
            if isinstance(event, SteeringEvent):
                if event.type == "steering.accepted" and event.run_id == cues.critic_run_id:
                    cues.critic_steered.set()
            elif isinstance(event, SubAgentEvent) and event.type == "subagent.started":
                if event.agent_id == "research" and cues.research_run_id is None:
                    cues.research_run_id = event.child_run_id
                    if model is not None:  # no script to say when: steer it as it starts
                        cues.research_started.set()
                if event.agent_id == "critic" and cues.critic_run_id is None:
                    cues.critic_run_id = event.child_run_id
            elif isinstance(event, ModelEvent):
                agent = rt.runs.get(event.run_id or "")
                name = agent.info.agent_id if agent is not None else event.run_id
                waiting = f"{name} is waiting for its model (request {event.request_id})"
                story.thinking(event.request_id, waiting if event.type == "model.request" else None)
            text = describe(event, models=model is not None)
            if text:
                story.say(text)

        rt.bus.add_sink(watch)
        story.start()
        try:
            handle = await rt.start(
                orchestrator,
                "Customer acme says invoice #1042 was charged twice. Investigate.",
                tenant_id="acme",
            )
            root.append(handle.run_id)
            operator = asyncio.create_task(human(rt, cues, story.say))
            result = await handle.result()
            if not operator.done():  # the story went off script (a real model chose otherwise)
                operator.cancel()
            await asyncio.gather(operator, return_exceptions=True)
        finally:
            await story.stop()
        steering = [e for e in seen if isinstance(e, SteeringEvent)]
        console.print(tree())
        ending = result.output if result.status.value == "completed" else result.error
        console.print(
            f"\n[bold]orchestrator:[/] {result.status.value} — ", escape(str(ending or "")), sep=""
        )
        answered = any(e.type == "model.response" for e in seen)
        if model is not None and cues.research_run_id is None and answered:
            console.print(off_script(seen), highlight=False)
        if steering:
            title = "Audit: every steering command and its terminal state"
            console.print(audit_table(steering, title=title))
        else:
            console.print("No steering commands were sent, so there is nothing to audit.")
        console.print(
            escape(f"Stored in {db}; inspect it with: tinyagents inspect {db} {handle.run_id}"),
            soft_wrap=True,
        )
        node = rt.tree(handle.run_id)
        assert node is not None
        return {
            "status": result.status.value,
            "output": result.output,
            "error": result.error,
            "root_run_id": handle.run_id,
            "children": [(c.info.agent_id, c.info.status.value) for c in node.children],
            "terminal": {
                e.correlation_id: e.type.split(".")[1] for e in steering if e.type in TERMINAL
            },
            "requested": sorted(
                {e.correlation_id for e in steering if e.type == "steering.requested"}
            ),
            "db": str(db),
        }


def live_rows(rt: Runtime, root_run_id: str, events: list[Event]) -> list[RunRow]:
    """The run tree under ``root_run_id`` as ``RunRow``s, with why runs did not complete."""
    node = rt.tree(root_run_id)
    if node is None:
        return []
    errors = {e.run_id: e.error for e in events if isinstance(e, RunEvent) and e.error and e.run_id}
    return [
        RunRow(
            run_id=n.info.run_id,
            parent_run_id=n.info.parent_run_id,
            name=n.info.agent_id or n.info.kind,
            kind=n.info.kind,
            status=n.info.status.value,
            model_calls=n.info.usage.model_calls,
            error=errors.get(n.info.run_id) if n.info.status.value != "completed" else None,
        )
        for n in node.walk()
    ]


def off_script(events: list[Event]) -> str:
    """What a real model did instead of the scripted story (rich markup)."""
    calls = [e for e in events if isinstance(e, ModelEvent) and e.type == "model.response"]
    tools = sorted({name for e in calls for name in e.tool_calls})
    did = (
        f"its model called {', '.join(tools)}"
        if tools
        else "its model called no tools (small models often do not)"
    )
    return (
        "[yellow]The scripted story did not play:[/] the demo's steering needs the orchestrator "
        f"to start the research sub-agent, and {escape(did)} in {len(calls)} model "
        "call(s), so there was no child to steer. The story above is what did happen."
    )
