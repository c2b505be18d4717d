"""``LiveRuns``: which runs changed since their snapshot was last written, and what a live
snapshot says beyond ``RunInfo`` (owner, heartbeat, pending commands and interrupts).

A bus sink marks a run dirty on each of its events (one set insert); the runtime writes the
dirty runs' snapshots in one batch per tick, and every live run's at least once per
heartbeat, so a reader in another process can tell a live run from one whose owner died.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic_core import to_jsonable_python

from tinyagents import _clock
from tinyagents.events.models import Event, GraphEvent
from tinyagents.protocol.commands import SteeringCommand
from tinyagents.protocol.state import CommandState
from tinyagents.runs.info import RunInfo

#: Graph events after which a run no longer waits on the interrupts it reported.
_INTERRUPTS_END = frozenset({"graph.started", "graph.task_started", "graph.resumed"})


class LiveRuns:
    """The live-snapshot books of one runtime (``owner``): dirty runs and pending interrupts.

    Bounded: a run leaves both maps when its snapshot is taken for release (``forget``).
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.dirty: set[str] = set()
        #: run id -> (step, {interrupt id: interrupt}) of the pause the run rests in
        self._interrupts: dict[str, tuple[int | None, dict[str, dict[str, Any]]]] = {}
        #: graph runs whose pending interrupts changed since ``take_dirty``: their tasks'
        #: entries list them too, so those are due as well
        self.asked: set[str] = set()
        #: Told the id of each run released (``forget``): the Redis mirror takes it off its
        #: listing at once, which other workers read it from.
        self.on_release: Callable[[str], None] | None = None

    def __call__(self, event: Event) -> None:
        """The bus sink: note that the event's run changed."""
        run_id = event.run_id
        if run_id is None:
            return
        self.dirty.add(run_id)
        if type(event) is GraphEvent:
            self._graph_event(run_id, event)

    def _graph_event(self, run_id: str, event: GraphEvent) -> None:
        if event.type == "graph.interrupt":
            step, pending = self._interrupts.get(run_id, (event.step, {}))
            if step != event.step:  # a new pause: the old one's interrupts were answered
                pending = {}
            interrupt_id = str(event.data.get("interrupt_id", ""))
            pending[interrupt_id] = {
                "id": interrupt_id,
                "task_id": event.task_id,
                "node": event.node,
                # as JSON has it (a datetime as its ISO text, ...), as the checkpoint and the
                # event log do: the snapshot is written as JSON to the store and to Redis
                "value": to_jsonable_python(event.data.get("value"), fallback=repr),
            }
            schema = event.data.get("response_schema")
            if schema is not None:  # interrupt(..., response_schema=...): the answer's shape
                pending[interrupt_id]["response_schema"] = schema
            self._interrupts[run_id] = (event.step, pending)
            self.asked.add(run_id)
        elif event.type in _INTERRUPTS_END:
            if self._interrupts.pop(run_id, None) is not None:
                self.asked.add(run_id)

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        self.asked.clear()
        return dirty

    def forget(self, run_id: str) -> None:
        self.dirty.discard(run_id)
        self.asked.discard(run_id)
        self._interrupts.pop(run_id, None)
        if self.on_release is not None:
            self.on_release(run_id)

    def interrupts(self, run_id: str) -> list[dict[str, Any]]:
        entry = self._interrupts.get(run_id)
        return list(entry[1].values()) if entry is not None else []

    def interrupts_of(self, info: RunInfo) -> list[dict[str, Any]]:
        """The run's pending interrupts; for a graph task's entry in the tree (``gt-...``),
        those of its task in its graph run: a token narrowed to the entry may not see the
        graph run, and answers the question from the entry."""
        if info.kind == "graph" and info.task_id and info.parent_run_id:
            asks = self.interrupts(info.parent_run_id)
            return [i for i in asks if i["task_id"] == info.task_id]
        return self.interrupts(info.run_id)

    def snapshot(
        self, info: RunInfo, pending: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """``info.snapshot()`` with the live keys: ``owner``, ``updated_at`` (now),
        ``pending_commands`` and ``interrupts`` (none once the run finished: a run cancelled
        while it asked, which no event of an answer reached, waits on nothing)."""
        snap = info.snapshot()
        snap["owner"] = self.owner
        snap["updated_at"] = _clock.now().isoformat()
        snap["pending_commands"] = pending or []
        snap["interrupts"] = [] if info.status.finished else self.interrupts_of(info)
        return snap


def pending_by_run(
    open_states: Iterable[tuple[str | None, SteeringCommand, CommandState]],
) -> dict[str, list[dict[str, Any]]]:
    """The open commands of each run, as snapshots list them: correlation id, kind, state,
    actor, delivery."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for run_id, cmd, state in open_states:
        if run_id is None:
            continue
        by_run.setdefault(run_id, []).append(
            {
                "correlation_id": cmd.correlation_id,
                "kind": cmd.kind.value,
                "state": state.value,
                "actor": cmd.actor.describe(),
                "delivery": cmd.delivery.value,
            }
        )
    return by_run
