"""A runtime-managed graph run's tasks in the run tree.

Each task appears as a child entry of the graph run with its ``task_id`` and ``node_id``
while it runs; an agent node's child agent run hangs below that entry, and the instructions
sent to the task (or its node) go to that agent run. This is the run's ``TaskHooks``: the
only part of a managed run that acts inside a superstep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from tinyagents import _clock
from tinyagents.protocol.commands import (
    CONTROL_KINDS,
    MESSAGE_KINDS,
    GraphNodeTarget,
    GraphTaskTarget,
    SteeringCommand,
    SteeringKind,
)
from tinyagents.protocol.state import RunStatus
from tinyagents.runs.handle import RunHandle, RunResult
from tinyagents.runs.info import RunInfo, event_error, withheld_below

if TYPE_CHECKING:
    from tinyagents.graph.executor import GraphRun
    from tinyagents.graph.run_events import GraphEvents
    from tinyagents.graph.tasks import Task
    from tinyagents.runs.host import RunHost

#: Kinds that go to an agent node's child run when one is running.
AGENT_KINDS = (
    MESSAGE_KINDS
    | {
        SteeringKind.CONSTRAIN_TOOLS,
        SteeringKind.CONSTRAIN_MODEL,
        SteeringKind.UPDATE_BUDGET,
    }
    | (CONTROL_KINDS - {SteeringKind.CANCEL})
)


class TaskEntries:
    """The run-tree entries of one graph run's running tasks, and of its agent nodes' runs.
    Both maps hold running tasks only: an entry leaves when its task ends. A task that
    paused on ``interrupt()`` keeps its entry, ``interrupted``, in ``paused``: the same
    entry runs again when the task resumes, and ``close`` ends those left when the graph
    run ends (a task that never resumed was skipped)."""

    def __init__(
        self,
        runtime: RunHost,
        handle: RunHandle,
        events: GraphEvents,
        graph_name: str,
        *,
        continued: bool = False,
        accepts: Callable[[str | None], tuple[str, ...] | None] | None = None,
    ) -> None:
        """``continued``: the run is one an earlier runtime ran (its id came from the
        thread's checkpoints): the task entries it left resting on interrupts in the store
        are taken back by the tasks that resume here. ``accepts``: the steering kinds the
        graph run takes for a task of a node (``RunInfo.accepts`` of its entry)."""
        self.runtime = runtime
        self.handle = handle
        self.events = events
        self.graph_name = graph_name
        self.accepts = accepts
        #: task id -> (run id, node) of the entries an earlier runtime left (read at the
        #: first task)
        self._resting: dict[str, tuple[str, str | None]] | None = None if continued else {}
        self.task_runs: dict[str, RunHandle] = {}
        self.agent_runs: dict[str, RunHandle] = {}
        #: the agent runs of sub-graphs' agent nodes (at any level), by their task's id:
        #: (the top-level task running the sub-graph, the agent run); an instruction sent to
        #: that task id finds it, one to a node does not (a node target names a top-level node)
        self.nested_agent_runs: dict[str, tuple[str, RunHandle]] = {}
        #: entries of paused tasks, by task id; a continued run takes over its own
        self.paused: dict[str, RunHandle] = {}
        for child in runtime.runs.tree.children(handle.run_id):
            entry = runtime.runs.get(child.run_id)
            if child.task_id and child.status is RunStatus.INTERRUPTED and entry is not None:
                self.paused[child.task_id] = entry

    async def task_started(self, run: GraphRun, task: Task) -> None:
        entry = self.paused.pop(task.id, None)
        if entry is not None:  # a paused task resumes: the same entry runs again
            entry.reopen()
        else:
            if self._resting is None:
                info = self.handle.info
                self._resting = await self.runtime.resting_tasks(info.run_id, info.tenant_id)
            run_id, _ = self._resting.pop(task.id, (None, None))
            entry = await self._register(task, run_id)
        self.task_runs[task.id] = entry
        self.events.emit(
            "graph.task_started", step=run.head.step + 1, task_id=task.id, node=task.node
        )

    async def _register(self, task: Task, run_id: str | None = None) -> RunHandle:
        """A new entry for ``task``, under ``run_id`` when an earlier runtime left it one."""
        return await self._register_entry(run_id or _clock.new_id("gt"), task.id, task.node)

    async def _register_entry(self, run_id: str, task_id: str, node: str | None) -> RunHandle:
        parent = self.handle.info
        info = RunInfo(
            run_id=run_id,
            parent_run_id=parent.run_id,
            task_id=task_id,
            node_id=node,
            tenant_id=parent.tenant_id,
            kind="graph",
            agent_id=self.graph_name,
            accepts=None if self.accepts is None else self.accepts(node),
            **withheld_below(parent),
        )
        entry = RunHandle(info, submitter=self.runtime)
        await self.runtime.register(entry)
        return entry

    async def task_finished(self, run: GraphRun, task: Task, error: BaseException | None) -> None:
        entry = self.task_runs.pop(task.id, None)
        self.agent_runs.pop(task.id, None)
        if self.nested_agent_runs:
            for nested in [k for k, (h, _) in self.nested_agent_runs.items() if h == task.id]:
                del self.nested_agent_runs[nested]
        if isinstance(error, asyncio.CancelledError):
            status, kind = RunStatus.CANCELLED, "graph.task_cancelled"
        elif error is not None:
            status, kind = RunStatus.FAILED, "graph.task_failed"
        elif task.writes is None:
            status, kind = RunStatus.INTERRUPTED, ""
        else:
            status, kind = RunStatus.COMPLETED, "graph.task_completed"
        if entry is not None and status is RunStatus.INTERRUPTED:
            # not finished: the task resumes under this entry (or ``close`` ends it)
            entry.finish(RunResult(run_id=entry.run_id, status=status))
            self.paused[task.id] = entry
        elif entry is not None:
            err = None if error is None else f"{type(error).__name__}: {error}"
            await self.runtime.finish(
                entry, RunResult(run_id=entry.run_id, status=status, error=err)
            )
        if kind:
            data = {"error": event_error(repr(error))} if error is not None else {}
            self.events.emit(
                kind, step=run.head.step + 1, task_id=task.id, node=task.node, data=data
            )

    async def steered(self, run: GraphRun) -> None:
        """Commands were lowered at a boundary: a paused task the run no longer waits on (a
        redirect dropped it, a cancel skipped it) never resumes, so its entry ends
        ``cancelled`` now, with a ``graph.task_cancelled`` event, rather than staying
        ``interrupted`` beside the tasks still waiting until the run ends."""
        if not self.paused:
            return
        waiting = {task.id for task in run.plan() if task.writes is None}
        for task_id in [t for t in self.paused if t not in waiting]:
            entry = self.paused.pop(task_id)
            result = RunResult(run_id=entry.run_id, status=RunStatus.CANCELLED)
            await self.runtime.finish(entry, result)
            self.events.emit(
                "graph.task_cancelled",
                step=run.head.step,
                task_id=task_id,
                node=entry.info.node_id,
                data={"reason": "dropped by steering"},
            )

    async def close(self, status: RunStatus) -> None:
        """The graph run ended with ``status``: unless it rests on interrupts (its paused
        tasks resume when it continues), a paused task that never resumed was skipped."""
        if status is RunStatus.INTERRUPTED:
            return
        paused, self.paused = self.paused, {}
        if self._resting is None:
            info = self.handle.info
            self._resting = await self.runtime.resting_tasks(info.run_id, info.tenant_id)
        resting, self._resting = self._resting, {}
        for task_id, (run_id, node) in resting.items():  # an earlier runtime's, not resumed
            paused[task_id] = await self._register_entry(run_id, task_id, node)
        for entry in paused.values():
            result = RunResult(run_id=entry.run_id, status=RunStatus.CANCELLED)
            await self.runtime.finish(entry, result)

    def parent_for(self, task: Task) -> str | None:
        entry = self.task_runs.get(task.id)
        return entry.run_id if entry is not None else self.handle.run_id

    def agent_started(self, task: Task, handle: RunHandle) -> None:
        self.agent_runs[task.id] = handle

    def nested_agent_started(self, holder: Task, task: Task, handle: RunHandle) -> None:
        """An agent node of a sub-graph, run in top-level task ``holder``, started ``handle``."""
        self.nested_agent_runs[task.id] = (holder.id, handle)

    def route(self, cmd: SteeringCommand) -> RunHandle | None:
        """The running agent run of the task or node ``cmd`` names, for an instruction: an
        agent node's of this graph, or, by its task id, one of a sub-graph's at any level."""
        if cmd.kind not in AGENT_KINDS:
            return None
        target = cmd.target
        if isinstance(target, GraphTaskTarget) and target.task_id in self.nested_agent_runs:
            _, nested = self.nested_agent_runs[target.task_id]
            return None if nested.done else nested
        for task_id, handle in self.agent_runs.items():
            if handle.done:
                continue
            if isinstance(target, GraphTaskTarget) and target.task_id == task_id:
                return handle
            if isinstance(target, GraphNodeTarget) and handle.info.node_id == target.node:
                return handle
        return None


__all__ = ["AGENT_KINDS", "TaskEntries"]
