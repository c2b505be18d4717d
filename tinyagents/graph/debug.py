"""The payloads of the ``checkpoints`` and ``debug`` stream modes, LangGraph's shapes
(``langgraph/pregel/debug.py``).

``checkpoints``: each checkpoint the run saves, as a dict of ``config`` (``{"configurable":
{"thread_id", "checkpoint_ns", "checkpoint_id"}}``), ``parent_config`` (the same for the
checkpoint before it, or None), ``values``, ``metadata`` (``source``, ``step``, ``parents``),
``next`` (node names) and ``tasks`` (``{"id", "name", "interrupts", "state"}`` per task of
the next step; ``state`` is the ``config`` of a sub-graph node's namespace, else None). ``debug``: those checkpoints and each task's start and end, each wrapped as
``{"step", "timestamp", "type", "payload"}`` with ``type`` one of ``"checkpoint"``, ``"task"``
(the ``tasks`` mode's start with ``triggers``) and ``"task_result"`` (its end).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents.graph.checkpointing import load_head
from tinyagents.graph.tasks import plan_tasks, shown, task_id
from tinyagents.graph.types import START, UNSET

if TYPE_CHECKING:
    from tinyagents.graph.checkpointing import Head
    from tinyagents.graph.core import GraphCore
    from tinyagents.graph.tasks import Task
    from tinyagents.store.checkpoint.base import Checkpointer

#: LangGraph's trigger of a ``Send`` task (its others are ``"branch:to:<node>"``)
PUSH_TRIGGER = "__pregel_push"


def _config(thread_id: str, ns: str, checkpoint_id: str | None) -> dict[str, Any] | None:
    if checkpoint_id is None:
        return None
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def checkpoint_payload(graph: GraphCore, head: Head, values: dict[str, Any]) -> dict[str, Any]:
    """The ``checkpoints`` item of ``head`` (a checkpoint a run of ``graph`` saved or started
    from), showing ``values``."""
    tasks: list[dict[str, Any]] = []
    key = (head.lineage, head.ns, head.step + 1)
    for index, planned in enumerate(head.frontier):
        if planned.node == START:  # an input's checkpoint: LangGraph's __start__ task
            name = graph.start_name()
            tasks.append(_task_entry(task_id(key, START, index), name, ()))
    for task in shown(graph, plan_tasks(graph, head)):
        asking = tuple({"value": i.value, "id": i.id} for i in task.interrupts)
        entry = _task_entry(task.id, task.node, asking)
        if task.spec.subgraph is not None:
            # as LangGraph's: where the state of the sub-graph the task runs is saved
            segment = f"{task.node}:{task.id}"
            ns = f"{head.ns}|{segment}" if head.ns else segment
            entry["state"] = {"configurable": {"thread_id": head.thread_id, "checkpoint_ns": ns}}
        tasks.append(entry)
    return {
        "config": _config(head.thread_id, head.ns, head.checkpoint_id),
        "parent_config": _config(head.thread_id, head.ns, head.parent_id),
        "values": values,
        "metadata": {
            "source": head.source,
            "step": head.step,
            "parents": dict(head.metadata.get("parents") or {}),
        },
        "next": [t["name"] for t in tasks],
        "tasks": tasks,
    }


def _task_entry(task_id: str, name: str, interrupts: tuple[Any, ...]) -> dict[str, Any]:
    return {"id": task_id, "name": name, "interrupts": interrupts, "state": None}


async def input_checkpoint(
    graph: GraphCore, cp: Checkpointer | None, head: Head, took_input: bool
) -> Head | None:
    """The checkpoint of the input a run of ``graph`` started from ``head`` with took
    (LangGraph's ``source="input"`` checkpoint, before the first step's): None when the run
    took no input or saves nothing."""
    if cp is None or not took_input or head.parent_id is None:
        return None
    before = await load_head(graph, cp, head.thread_id, head.ns, head.parent_id)
    return before if before is not None and before.source == "input" else None


def triggers(task: Task) -> tuple[str, ...]:
    """What made ``task`` run, as LangGraph names it: a ``Send`` or the node's branch."""
    return (PUSH_TRIGGER,) if task.arg is not UNSET else (f"branch:to:{task.node}",)


def wrapped(
    kind: str, step: int, payload: dict[str, Any], at: float | None = None
) -> dict[str, Any]:
    """A ``debug`` item: ``payload`` of ``kind`` at ``step``, stamped ``at`` (a checkpoint's
    time) or now."""
    when = _clock.now() if at is None else datetime.fromtimestamp(at, UTC)
    return {"step": step, "timestamp": when.isoformat(), "type": kind, "payload": payload}


__all__ = ["PUSH_TRIGGER", "checkpoint_payload", "input_checkpoint", "triggers", "wrapped"]
