"""The ``graph.*`` events of one runtime-managed graph run, published on the runtime's bus.

The managed loop (``graph/managed.py``) emits what each superstep did; lowering
(``graph/lowering.py``) what a command changed; the run-tree entries
(``graph/task_entries.py``) each task's start and end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from tinyagents.errors import RunCancelled
from tinyagents.events.models import GraphEvent, RunEvent
from tinyagents.events.redact import mask
from tinyagents.harness.pausing import restored_pause_detail
from tinyagents.runs.info import event_error, run_event

if TYPE_CHECKING:
    from tinyagents.graph.executor import GraphRun
    from tinyagents.graph.tasks import Task
    from tinyagents.graph.types import GraphResult
    from tinyagents.protocol.commands import SteeringCommand
    from tinyagents.runs.host import RunHost
    from tinyagents.runs.info import RunInfo


class GraphEvents:
    """``emit(type, **fields)`` for one run, and the events the managed loop sends."""

    __slots__ = ("info", "runtime")

    def __init__(self, runtime: RunHost, info: RunInfo) -> None:
        self.runtime = runtime
        self.info = info

    def emit(self, type_: str, **fields: Any) -> None:
        info = self.info
        event = run_event(info, GraphEvent, type=type_, thread_id=info.thread_id, **fields)
        self.runtime.bus.publish(event)

    def started(self, run: GraphRun) -> None:
        self.emit("graph.started", step=run.head.step, checkpoint_id=run.head.checkpoint_id)

    def stepped(self, run: GraphRun, tasks: list[Task]) -> None:
        head = run.head
        self.emit(
            "graph.step",
            step=head.step,
            checkpoint_id=head.checkpoint_id,
            data={"tasks": [t.id for t in tasks], "next": [p.node for p in head.frontier]},
        )

    def interrupted(self, run: GraphRun, result: GraphResult) -> None:
        """Every pause reports what it waits for, so a watcher can tell "paused again"."""
        for i in result.interrupts:
            data = {"interrupt_id": i.id, "ns": i.ns, "value": _shown(i.value)}
            if i.response_schema is not None:  # the answer's shape, for a client's form
                data["response_schema"] = i.response_schema
            if i.enclosing:  # the tasks above it that its ns names not (each may answer it)
                data["enclosing"] = list(i.enclosing)
            self.emit(
                "graph.interrupt",
                step=run.head.step + 1,
                task_id=i.task_id,
                node=i.node,
                checkpoint_id=run.head.checkpoint_id,
                data=data,
            )

    def restored_pause(self, pause: SteeringCommand) -> None:
        """The run, continued from an earlier process, is held again by ``pause``: the
        ``run.paused`` an agent run started again paused says (``restored``)."""
        info = self.info
        event = run_event(
            info,
            RunEvent,
            type="run.paused",
            status="paused",
            agent_id=info.agent_id,
            thread_id=info.thread_id,
            kind="graph",
            detail=restored_pause_detail(pause),
        )
        self.runtime.bus.publish(event)

    def resumed(self, run: GraphRun) -> None:
        self.emit("graph.resumed", step=run.head.step + 1, checkpoint_id=run.head.checkpoint_id)

    def completed(self, run: GraphRun, result: GraphResult) -> None:
        """The run's end: ``data`` has its status, the interrupts it waits on, and for a
        failed or cancelled run the error (``"Type: message"``, as the run's result); for a
        run a steering cancel ended, ``by``, who sent it (an agent run's end says it in
        ``detail.by``)."""
        data: dict[str, Any] = {
            "status": result.status,
            "interrupts": [i.id for i in result.interrupts],
        }
        error = result.error
        if error is not None:
            data["error"] = event_error(f"{type(error).__name__}: {error}")
        if isinstance(error, RunCancelled) and error.by is not None:
            data["by"] = error.by
        self.emit(
            "graph.completed", step=run.head.step, checkpoint_id=result.checkpoint_id, data=data
        )


def _shown(value: Any) -> Any:
    """An interrupt's value as its event carries it: as JSON has it (a model's fields
    reachable), secret-named keys masked as in every other event. Not shortened: a human
    reads the whole question to answer it (the run listing's pending interrupts are these)."""
    return mask(to_jsonable_python(value, fallback=repr))


__all__ = ["GraphEvents"]
