"""How runs and steering commands look on a terminal: the demo and ``tinyagents inspect``.

Both draw the same things from different sources (the demo from a live ``Runtime``, ``inspect``
from a store file), so both first turn what they have into ``RunRow``s and ``SteeringEvent``s.
Everything here fits 80 columns: long text wraps, ids are never cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.segment import Segment
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from tinyagents._record import Record
from tinyagents.events.models import Event, SteeringEvent
from tinyagents.protocol.state import CommandState, RunStatus

#: Control characters (C0 but tab and newline, DEL, C1) dropped from text before it is shown.
_UNSHOWN = dict.fromkeys([*range(0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)])


class TerminalConsole(Console):
    """A rich ``Console`` that writes text it was given without its control characters.

    What the commands show comes from elsewhere (a model server's error, an agent's, actor's
    or tenant's name, a store another process wrote): an escape sequence in it would reach the
    operator's terminal as a command (a window title, a cleared screen, a forged line). Rich
    drops only a few control codes; this drops every one, after layout (rich measures them
    as zero cells), and leaves rich's own styles and cursor controls alone.

    On a stream that cannot carry every character (``PYTHONIOENCODING=ascii``, a legacy code
    page), what it cannot carry is shown as ``?``: rich would raise UnicodeEncodeError on the
    first ``…`` of a table, leaving half of it and a traceback."""

    def render(self, renderable: Any, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        encoding = self.encoding
        lossy = not encoding.startswith("utf")
        for segment in super().render(renderable, options):
            if segment.control is None and not segment.text.isprintable():
                segment = Segment(segment.text.translate(_UNSHOWN), segment.style)
            if lossy and segment.control is None:
                text = segment.text.encode(encoding, "replace").decode(encoding)
                segment = Segment(text, segment.style)
            yield segment


#: The steering events that end a command's lifecycle.
TERMINAL = frozenset(f"steering.{state.value}" for state in CommandState if state.terminal)
#: The ``run.*`` events of a run that ended without completing (they say why, in ``error``).
ENDED_UNCOMPLETED = frozenset(
    f"run.{status.value}" for status in RunStatus if status.finished and status != "completed"
)

_COLOUR = {
    "completed": "green",
    "applied": "green",
    "limit_exceeded": "yellow",
    "superseded": "yellow",
    "interrupted": "yellow",
    "cancelled": "red",
    "failed": "red",
    "rejected": "red",
    "aborted": "red",
}


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class RunRow(Record):
    """One run as a line of a run tree."""

    run_id: str
    parent_run_id: str | None = None
    name: str = "run"
    kind: str = "agent"
    status: str = "?"
    model_calls: int | str = "?"
    #: For the entry of a graph task: its node and task id.
    node: str | None = None
    task_id: str | None = None
    #: Why it did not complete (``run.failed`` and co. in the event log), and a note such as
    #: "approved by …" for a graph task.
    error: str | None = None
    note: str | None = None
    #: Earlier entries of the same graph task (it ran again after an interrupt was answered).
    earlier: list[str] = field(default_factory=list)


def run_label(row: RunRow) -> Text:
    colour = _COLOUR.get(row.status, "cyan")
    text = Text()
    if row.kind == "graph" and row.node is not None:  # a graph task's entry
        text.append(f"node {row.node}", style="bold")
        if row.task_id:
            text.append(f" · task {row.task_id}")
    else:
        text.append(row.name, style="bold")
        if row.node is not None:  # the agent of an agent node
            text.append(f" (node {row.node})")
    text.append(f" · {row.run_id} · ")
    text.append(row.status, style=colour)
    if row.note:
        text.append(f" ({row.note})")
    if row.kind == "agent":
        text.append(f" · {row.model_calls} model calls")
    if row.earlier:
        text.append(f" · earlier entries: {', '.join(row.earlier)}", style="dim")
    if row.error:
        text.append(f"\n{row.error}", style=colour)
    return text


def run_tree(rows: list[RunRow]) -> Group:
    """A tree per top run of ``rows`` (a run whose parent is not among them); then, from a
    damaged record whose runs name each other as parents (no top among them), one per run
    of each such loop not drawn yet: they were left out, "(no runs)" of such a run alone."""
    by_id = {r.run_id: r for r in rows}
    children: dict[str | None, list[RunRow]] = {}
    for r in rows:
        children.setdefault(r.parent_run_id, []).append(r)
    trees = []
    seen: set[str] = set()
    tops = [r for r in rows if r.parent_run_id not in by_id]
    for top in [*tops, *rows]:  # every row last: the runs of a loop, once the rest are drawn
        if top.run_id in seen:
            continue
        tree = Tree(run_label(top))
        # A loop, not recursion: a tree can be thousands deep; ``seen`` survives a cycle.
        stack = [(tree, top)]
        seen.add(top.run_id)
        while stack:
            branch, r = stack.pop()
            for child in children.get(r.run_id, []):
                if child.run_id not in seen:
                    seen.add(child.run_id)
                    stack.append((branch.add(run_label(child)), child))
        trees.append(tree)
    return Group(*trees) if trees else Group(Text("(no runs)"))


def lifecycles(events: Iterable[SteeringEvent]) -> dict[str, list[SteeringEvent]]:
    """Each command's steering events, by correlation id, in the order given."""
    out: dict[str, list[SteeringEvent]] = {}
    for e in events:
        out.setdefault(e.correlation_id, []).append(e)
    return out


#: Where-details too long for a table cell, and in the record anyway (``inspect --json``).
_NOT_SHOWN = frozenset({"checkpoint_id", "task_id", "model_request_id"})


def where(event: SteeringEvent) -> str:
    """Where a command landed, in words: the boundary it was delivered at, the model request
    that carried it to the model, the node, interrupt or step of a graph it changed."""
    parts = []
    if event.type == "steering.delivered" and event.boundary:
        parts.append(f"at {event.boundary}")
    request = event.affected.get("model_request_id")
    if request:
        # Delivered at the boundary *after* a response; applied in the *next* request.
        after = "after" if event.type == "steering.delivered" else "in"
        parts.append(f"{after} model request {request}")
    for key, value in event.affected.items():
        if key not in _NOT_SHOWN and value is not None:
            parts.append(f"{key.removesuffix('_id')} {value}")
    return ", ".join(str(p) for p in parts)


def audit_table(events: Iterable[SteeringEvent], *, title: str, lifecycle: bool = False) -> Table:
    """One row per command: who sent what to which run, its terminal state (with
    ``lifecycle``, every state it went through) and the reason or where it landed."""
    table = Table(title=escape(title), show_lines=True, expand=False)
    # Widths that keep every id whole at 80 columns: command and run ids are 14 characters,
    # graph task and interrupt ids 18; text wraps between words.
    table.add_column("command", no_wrap=True, min_width=15)
    table.add_column("from → to", overflow="fold", min_width=18, ratio=2)
    table.add_column("state", overflow="fold", min_width=10)
    table.add_column("reason / where", overflow="fold", min_width=20, ratio=3)
    for cid, evs in lifecycles(events).items():
        last = evs[-1]
        final = [e for e in evs if e.type in TERMINAL]
        end = final[-1] if final else last
        state = end.type.split(".", 1)[1]
        states = "\n".join(e.type.split(".", 1)[1] for e in evs) if lifecycle else state
        reasons = [e.reason for e in evs if e.reason]
        detail = reasons[-1] if reasons else where(end)
        table.add_row(
            Text(f"{cid}\n{last.kind.value}"),
            Text(f"{last.actor.describe()}\n→ {last.target.describe()}"),
            Text(states, style=_COLOUR.get(state, "")),
            Text(detail),
        )
    return table


def describe(event: Event, *, models: bool = False) -> str | None:
    """A one-line story of ``event`` (rich markup), or None for events the story skips;
    ``models`` adds model requests and responses (worth seeing with a real model)."""
    if isinstance(event, SteeringEvent):
        step = event.type.split(".", 1)[1]
        colour = _COLOUR.get(step, "white")
        detail = f" — {event.reason}" if event.reason else ""
        landed = where(event)
        landed = f" ({landed})" if landed and not event.reason else ""
        return escape_markup(
            f"[{colour}]{event.type:<20}[/] {event.kind.value} {event.correlation_id} "
            f"→ {event.run_id} from ",
            f"{event.actor.describe()}{landed}{detail}",
        )
    data = event.to_dict(exclude_none=True)
    if event.type in ("subagent.started", "subagent.completed"):
        name = data.get("agent_id") or ""
        return (
            f"[dim]{event.type:<20} {name} {data.get('child_run_id')} {data.get('status', '')}[/]"
        )
    if event.type in ENDED_UNCOMPLETED:
        error = data.get("error") or ""
        return escape_markup(f"[red]{event.type:<20}[/] {event.run_id} ", error)
    if models and event.type == "model.request":
        return f"[dim]{'model.request':<20} {event.run_id} {data.get('request_id')} (waiting for the model)[/]"
    if models and event.type == "model.response":
        calls = ", ".join(data.get("tool_calls") or [])
        said = data.get("text_summary") or ""
        what = f"calls {calls}" if calls else f"answers {said!r}"
        return escape_markup(f"[dim]{'model.response':<20}[/] {event.run_id} ", what)
    if models and event.type == "tool.result":
        return escape_markup(f"[dim]{'tool.result':<20}[/] {event.run_id} ", str(data.get("name")))
    return None


def escape_markup(markup: str, text: str) -> str:
    """``markup`` (trusted) followed by ``text`` (from a run: never read as markup)."""
    return markup + escape(text)


class Story:
    """Prints a story line by line and keeps a live view (e.g. a run tree, and a spinner per
    model request in flight) below it on a terminal.

    Lines are printed above the live view (``console.print`` while ``Live`` runs), so a
    terminal keeps the whole story in its scrollback; the live view is transient: ``stop()``
    erases it, leaving only the story (draw the final state after it). On a console that is
    not a terminal the lines are printed and there is no live view.
    """

    def __init__(self, console: Console, view: Callable[[], RenderableType]) -> None:
        self.console = console
        self.view = view
        #: Model requests in flight: request id -> what is waiting for it.
        self.waiting: dict[str, str] = {}
        self.live: Live | None = None
        self._ticker: asyncio.Task[None] | None = None

    def start(self) -> None:
        if not self.console.is_terminal:
            return
        self.live = Live(self._render(), console=self.console, auto_refresh=False, transient=True)
        self.live.start()
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        """Redraw the live view a few times a second, so a spinner turns while a model
        thinks. From the event loop, not rich's refresh thread: the view reads runtime state."""
        while True:
            await asyncio.sleep(0.15)
            self.refresh()

    def _render(self) -> RenderableType:
        spinners = [Spinner("dots", text=Text(what, style="dim")) for what in self.waiting.values()]
        return Group(self.view(), *spinners)

    def refresh(self) -> None:
        if self.live is not None:
            self.live.update(self._render(), refresh=True)

    def say(self, markup: str) -> None:
        self.console.print(markup, highlight=False)
        self.refresh()

    def thinking(self, request_id: str, what: str | None) -> None:
        """``what`` waits for model request ``request_id``; None: the answer came."""
        if what is None:
            self.waiting.pop(request_id, None)
        else:
            self.waiting[request_id] = what
        self.refresh()

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
            self._ticker = None
        if self.live is not None:
            self.live.stop()
            self.live = None


def run_rows_from_records(
    runs: list[dict[str, Any]], errors: dict[str, str] | None = None
) -> list[RunRow]:
    """``RunRow``s from stored run snapshots (``RunInfo.snapshot()``)."""
    errors = errors or {}
    return [
        RunRow(
            run_id=r["run_id"],
            parent_run_id=r.get("parent_run_id"),
            name=str(r.get("agent_id") or r.get("kind") or "run"),
            kind=str(r.get("kind") or "agent"),
            status=str(r.get("status")),
            model_calls=(r.get("usage") or {}).get("model_calls", "?"),
            node=r.get("node_id"),
            task_id=r.get("task_id"),
            error=errors.get(r["run_id"]),
        )
        for r in runs
    ]


_PAST = {"approve": "approved", "reject": "rejected", "provide_context": "answered"}


def settle_graph_tasks(rows: list[RunRow], events: list[Event]) -> list[RunRow]:
    """One row per graph task, in its final state.

    A task that paused on an interrupt resumes under its own entry, labelled with the command
    that answered it. A store written before that (or a task resumed by another process) has
    an ``interrupted`` entry and a second one: the last stands for the task (the earlier ones
    are listed on it). A task that paused and never resumed — its entry ``cancelled`` by the
    run's end, or still ``interrupted`` in an older store — was dropped by a redirect
    (``redirected``) or left waiting when the run ended."""
    by_id = {r.run_id: r for r in rows}
    tasks: dict[tuple[str | None, str], list[RunRow]] = {}
    for r in rows:
        if r.kind == "graph" and r.task_id:
            tasks.setdefault((r.parent_run_id, r.task_id), []).append(r)
    answered: dict[str, SteeringEvent] = {}
    failed: dict[tuple[str | None, str], str] = {}
    last_pause: dict[tuple[str | None, str], int] = {}
    gotos: dict[str | None, list[tuple[int, dict[str, Any]]]] = {}
    for index, e in enumerate(events):
        if isinstance(e, SteeringEvent):
            if e.type == "steering.applied" and e.task_id:
                answered[e.task_id] = e
            continue
        data: dict[str, Any] = getattr(e, "data", None) or {}
        task_id = getattr(e, "task_id", None)
        if e.type == "graph.interrupt" and task_id:
            last_pause[(e.run_id, task_id)] = index
        elif e.type == "graph.task_failed" and task_id:
            failed[(e.run_id, task_id)] = str(data.get("error") or "")
        elif e.type == "graph.goto":
            gotos.setdefault(e.run_id, []).append((index, data))
    merged: dict[str, str] = {}  # an earlier entry's run id -> the task's last entry
    for key, entries in tasks.items():
        last = entries[-1]
        last.earlier = [e.run_id for e in entries[:-1]]
        merged.update((e.run_id, last.run_id) for e in entries[:-1])
        if key in failed and not last.error:
            last.error = failed[key]
        command = answered.get(key[1])
        if command is not None:
            verb = _PAST.get(command.kind.value, command.kind.value)
            last.note = f"{verb} by {command.actor.describe()}, {command.correlation_id}"
        graph = by_id.get(key[0] or "")
        dropped = last.status == "interrupted" or (
            last.status == "cancelled" and command is None and key in last_pause
        )
        if not dropped or graph is None or graph.status == "interrupted":
            continue
        paused_at = last_pause.get(key, -1)
        later = [data for index, data in gotos.get(key[0], []) if index > paused_at]
        if later:
            goto = later[0]
            last.status = "redirected"
            last.note = f"dropped by goto {goto.get('goto')}, {goto.get('correlation_id')}"
        else:
            if last.status == "interrupted":  # an older store: the entry never ended
                last.status = graph.status
            last.note = f"left waiting when the graph run ended {graph.status}"
    out = []
    for r in rows:
        if r.run_id in merged:
            continue
        if r.parent_run_id in merged:  # an agent node's run under an earlier entry
            r.parent_run_id = merged[r.parent_run_id]
        out.append(r)
    return out
