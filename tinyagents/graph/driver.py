"""Graph runs inside a ``Runtime``: a run in the tree, ``graph.*`` events, steering.

``start_graph_run`` registers a ``RunInfo(kind="graph")`` and runs the graph in the
background; ``run_with_runtime`` does the same in the foreground (``graph.run(...,
runtime=rt)``). Each task appears in the run tree as a child entry with its ``task_id`` and
``node_id``; an agent node's child agent run hangs below it.

The run keeps one run id for the life of its thread's execution (it is stored in the
checkpoints): a foreground run that stops on an interrupt leaves its handle ``interrupted``
with its steering inbox open, and the next run of the thread — in this process or after a
restart — continues under the same id and takes the commands that waited for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents.errors import ConfigurationError, RunCancelled
from tinyagents.events.models import GraphEvent
from tinyagents.graph.session import GraphSession, goto_problem
from tinyagents.graph.steering import lower_all
from tinyagents.graph.stream import GraphStream, follow
from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import (
    CONTROL_KINDS,
    MESSAGE_KINDS,
    GraphNodeTarget,
    GraphSupervisorActor,
    GraphTaskTarget,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    ThreadTarget,
)
from tinyagents.runs.handle import RunDriver, RunHandle, RunResult
from tinyagents.runs.info import RunInfo, RunStatus, run_event
from tinyagents.steering.conflicts import RedirectConflict
from tinyagents.steering.policy import CheckPolicy, PolicyContext

if TYPE_CHECKING:
    from tinyagents.graph.checkpointing import Head
    from tinyagents.graph.core import GraphCore
    from tinyagents.graph.executor import GraphRun
    from tinyagents.graph.tasks import Task
    from tinyagents.graph.types import GraphResult
    from tinyagents.runs.host import RunHost
    from tinyagents.store.checkpoint.base import Checkpointer

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

#: Kinds whose lowering saves a checkpoint tagged with the command's correlation id.
#: Kinds whose effect a checkpoint (or an answer's write) records: applied at most once.
_APPLIED_ONCE_KINDS = frozenset(
    {
        SteeringKind.UPDATE_STATE,
        SteeringKind.REDIRECT,
        SteeringKind.APPROVE,
        SteeringKind.REJECT,
        SteeringKind.PROVIDE_CONTEXT,
    }
)

_STATUS = {
    "completed": RunStatus.COMPLETED,
    "interrupted": RunStatus.INTERRUPTED,
    "failed": RunStatus.FAILED,
    "cancelled": RunStatus.CANCELLED,
}


#: Agent-loop delivery classes: a graph run never reaches these boundaries itself (an agent
#: node's child run does, and commands routed to it go there).
AGENT_BOUNDARIES = {
    SteeringDelivery.BEFORE_MODEL_CALL: Boundary.BEFORE_MODEL_CALL,
    SteeringDelivery.AFTER_TOOL_RESULT: Boundary.AFTER_TOOL_RESULT,
}


def undeliverable(cmd: SteeringCommand, run_id: str) -> str | None:
    """Why ``cmd``'s delivery class can never be met by graph run ``run_id``, or None."""
    if cmd.delivery not in AGENT_BOUNDARIES:
        return None
    return (
        f"undeliverable: graph run {run_id} takes steering between supersteps and never "
        f"reaches a {cmd.delivery.value} boundary; send it with delivery next_boundary or "
        "end_of_turn (or to an agent node while its agent runs)"
    )


class GraphCommandCheck(CheckPolicy):
    """A graph run's own policy: refuses at submit, whatever the target's form (task, node,
    run or thread), a command the run could only accept and never apply — a delivery class
    it never reaches, a redirect to no node or to an unknown one."""

    policy_id = "graph"

    def __init__(self, graph: GraphCore, run_id: str) -> None:
        self.graph = graph
        self.run_id = run_id

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        problem = undeliverable(cmd, self.run_id)
        if problem is None and cmd.kind is SteeringKind.REDIRECT:
            problem = goto_problem(self.graph, cmd.payload.get("goto"))
        return problem


class GraphRunDriver(RunDriver):
    """The router's and the executor's view of one runtime-managed graph run."""

    def __init__(self, runtime: RunHost, graph: GraphCore, *, wait_on_interrupt: bool) -> None:
        self.runtime = runtime
        self.graph = graph
        self.wait_on_interrupt = wait_on_interrupt
        self.handle: RunHandle | None = None
        self.run: GraphRun | None = None
        self.task_runs: dict[str, RunHandle] = {}
        self.agent_runs: dict[str, RunHandle] = {}
        #: tasks cancelled by steering: task id -> the command, settled at the next boundary
        self.cancelled: dict[str, SteeringCommand] = {}
        self.cancelled_nodes: dict[str, str] = {}
        self.cancel_run: SteeringCommand | None = None
        #: the run id came from the thread's checkpoints, not from this runtime: an earlier
        #: process ran it, and may have applied commands it never got to report
        self.continued = False
        self._applied_earlier: dict[str, str] | None = None
        #: the run stopped on interrupts and steering arrived: its next boundary is final
        self.resting = False

    # -- events ----------------------------------------------------------------------------

    def emit(self, type_: str, **fields: Any) -> None:
        assert self.handle is not None
        info = self.handle.info
        event = run_event(info, GraphEvent, type=type_, thread_id=info.thread_id, **fields)
        self.runtime.bus.publish(event)

    # -- RunDriver: what the router asks -------------------------------------------------------

    def interrupt_now(self, cmd: SteeringCommand) -> None:
        """An IMMEDIATE cancel: stop that task (or every task) now, settle at the boundary."""
        run = self.run
        if run is None:
            return
        target = cmd.target
        # a task that already finished in the running step keeps its result: it is not
        # recorded as stopped, so the command is lowered (and fails) like a late cancel
        if isinstance(target, GraphTaskTarget):
            running = run.running.get(target.task_id)
            if running is not None and not running.done():
                self.cancelled[target.task_id] = cmd
                running.cancel()
            return
        if isinstance(target, GraphNodeTarget):
            for task in run.plan():
                running = run.running.get(task.id) if task.node == target.node else None
                if running is not None and not running.done():
                    self.cancelled[task.id] = cmd
                    running.cancel()
            return
        self.cancel_run = cmd
        for running in run.running.values():
            running.cancel()

    async def latest_checkpoint_id(self) -> str | None:
        if self.run is not None:
            return self.run.head.checkpoint_id
        cp = self.graph.checkpointer
        if cp is None or self.handle is None or self.handle.info.thread_id is None:
            return None
        head = await cp.latest(self.handle.info.thread_id)
        return head.checkpoint_id if head is not None else None

    async def applied_earlier(self, cmd: SteeringCommand) -> dict[str, Any] | None:
        """What an earlier process already did with ``cmd``, if it applied it: the checkpoint
        (and, for an answer, the interrupt) to report it applied with.

        A process killed after saving a steering checkpoint or an interrupt's answer, but
        before the store learnt that the command was applied, hands the command over again
        after the restart; applying it a second time would, e.g., append an update twice, or
        fail an approve because its interrupt is answered already.
        """
        if not self.continued or cmd.fork or cmd.kind not in _APPLIED_ONCE_KINDS:
            return None
        run, cid = self.run, cmd.correlation_id
        if run is not None:  # answered, and its task has not run again yet
            for records in run.head.records.values():
                if cid in records.steered:
                    return {
                        "checkpoint_id": run.head.checkpoint_id,
                        "interrupt_id": records.steered[cid],
                    }
        if self._applied_earlier is None:
            cp, handle = self.graph.checkpointer, self.handle
            assert cp is not None and handle is not None and handle.info.thread_id is not None
            self._applied_earlier = await applied_by_steering(
                cp, handle.info.thread_id, handle.run_id
            )
        checkpoint_id = self._applied_earlier.get(cid)
        return None if checkpoint_id is None else {"checkpoint_id": checkpoint_id}

    def node_of_task(self, task_id: str) -> str | None:
        """The (top-level) node of a task of the current step, or of a pending interrupt."""
        if self.run is None:
            return None
        for task in self.run.plan():
            if task.id == task_id or any(
                i.task_id == task_id or f":{task_id}" in i.ns for i in task.interrupts
            ):
                return task.node
        return None

    def check_target(self, cmd: SteeringCommand) -> str | None:
        target = cmd.target
        run_id = self.handle.run_id if self.handle else "?"
        if isinstance(target, GraphNodeTarget):
            if target.node not in self.graph.nodes:
                return (
                    f"not found: graph run {run_id} has no node {target.node!r} "
                    f"(nodes: {', '.join(self.graph.nodes)})"
                )
            node: str | None = target.node
        elif isinstance(target, GraphTaskTarget):
            node = self.node_of_task(target.task_id)
            if node is None:
                return f"not found: task {target.task_id} is not pending in graph run {run_id}"
        else:
            return None
        actor = cmd.actor
        if isinstance(actor, GraphSupervisorActor) and actor.run_id == run_id:
            spec = self.graph.nodes.get(actor.node)
            if spec is None or node not in spec.supervises:
                return (
                    f"forbidden: node {actor.node!r} does not supervise {node!r} "
                    f"(it supervises {list(spec.supervises) if spec else []})"
                )
        return None

    def route(self, cmd: SteeringCommand) -> RunHandle | None:
        """Instructions for an agent node go to its running child agent run."""
        if cmd.kind not in AGENT_KINDS:
            return None
        target = cmd.target
        for task_id, handle in self.agent_runs.items():
            if handle.done:
                continue
            if isinstance(target, GraphTaskTarget) and target.task_id == task_id:
                return handle
            if isinstance(target, GraphNodeTarget) and handle.info.node_id == target.node:
                return handle
        return None

    # -- RunObserver: what the executor tells us ---------------------------------------------

    async def boundary(self, run: GraphRun) -> None:
        assert self.handle is not None
        inbox = self.handle.inbox
        # END_OF_TURN lands where the graph would otherwise stop: waiting on interrupts (it
        # rested, see ``paused``) or about to complete (a redirect then gives it another turn)
        final, self.resting = self.resting or not run.head.frontier, False
        if len(inbox):
            cmds = inbox.take(Boundary.BETWEEN_SUPERSTEPS, final=final)
            self._fail_undeliverable()
            if cmds:
                await lower_all(self, run, cmds)

    def _fail_undeliverable(self) -> None:
        """Fail what waits for an agent-loop boundary: a graph run never reaches one. (Refused
        at submit by ``GraphCommandCheck``; this catches commands accepted before, e.g. ones
        handed over after a restart.) Runs right after ``take``, so nothing else is ready."""
        assert self.handle is not None
        inbox = self.handle.inbox
        for boundary in AGENT_BOUNDARIES.values():
            for cmd in inbox.queue.pop_ready(boundary, paused=inbox.paused):
                inbox.failed(cmd, undeliverable(cmd, self.handle.run_id) or "undeliverable")

    async def after_tasks(self, run: GraphRun, tasks: list[Task]) -> None:
        if self.cancel_run is not None:
            # an immediate cancel stopped the step: settle it here (lowering it ends the run),
            # or it would be failed as "target finished before delivery" by the run's end
            await self.boundary(run)
            raise RunCancelled(self.handle.run_id if self.handle else "?", "cancelled by steering")
        for task in tasks:
            if task.id in self.cancelled and task.writes is None and not task.interrupts:
                self.cancelled_nodes[task.id] = task.node
                await run.skip(task)  # settled by its policy when the command is lowered

    async def paused(self, run: GraphRun, tasks: list[Task]) -> bool:
        assert self.handle is not None
        # every pause reports what it waits for, so a watcher can tell "paused again"
        for task in tasks:
            for i in task.interrupts:
                if task.writes is None and i.id not in task.resume:
                    self.emit(
                        "graph.interrupt",
                        step=run.head.step + 1,
                        task_id=i.task_id,
                        node=i.node,
                        checkpoint_id=run.head.checkpoint_id,
                        data={"interrupt_id": i.id, "ns": i.ns, "value": i.value},
                    )
        inbox = self.handle.inbox
        if self._due_at_rest():
            self.resting = True
            return True
        if not self.wait_on_interrupt:
            return False
        self.handle.info.status = RunStatus.INTERRUPTED
        while not self._due_at_rest():
            await inbox.wait()
        self.handle.info.status = RunStatus.RUNNING
        self.resting = True
        self.emit("graph.resumed", step=run.head.step + 1, checkpoint_id=run.head.checkpoint_id)
        return True

    def _due_at_rest(self) -> bool:
        """Whether a queued command is due while the run rests on interrupts: every delivery
        class is, to be applied at the next boundary (END_OF_TURN too: the run would
        otherwise stop here) or failed there (agent-loop boundaries)."""
        assert self.handle is not None
        inbox = self.handle.inbox
        return bool(len(inbox)) and (
            inbox.has_ready(Boundary.BETWEEN_SUPERSTEPS, final=True)
            or any(inbox.has_ready(b) for b in AGENT_BOUNDARIES.values())
        )

    async def task_started(self, run: GraphRun, task: Task) -> None:
        assert self.handle is not None
        parent = self.handle.info
        info = RunInfo(
            run_id=_clock.new_id("gt"),
            parent_run_id=parent.run_id,
            task_id=task.id,
            node_id=task.node,
            tenant_id=parent.tenant_id,
            kind="graph",
            agent_id=self.graph.name,
        )
        entry = RunHandle(info, submitter=self.runtime)
        await self.runtime.register(entry)
        self.task_runs[task.id] = entry
        self.emit("graph.task_started", step=run.head.step + 1, task_id=task.id, node=task.node)

    async def task_finished(self, run: GraphRun, task: Task, error: BaseException | None) -> None:
        entry = self.task_runs.pop(task.id, None)
        self.agent_runs.pop(task.id, None)
        if isinstance(error, asyncio.CancelledError):
            status, kind = RunStatus.CANCELLED, "graph.task_cancelled"
        elif error is not None:
            status, kind = RunStatus.FAILED, "graph.task_failed"
        elif task.writes is None:
            status, kind = RunStatus.INTERRUPTED, ""
        else:
            status, kind = RunStatus.COMPLETED, "graph.task_completed"
        if entry is not None:
            err = None if error is None else f"{type(error).__name__}: {error}"
            await self.runtime.finish(
                entry, RunResult(run_id=entry.run_id, status=status, error=err)
            )
        if kind:
            data = {"error": repr(error)} if error is not None else {}
            self.emit(kind, step=run.head.step + 1, task_id=task.id, node=task.node, data=data)

    def stepped(self, run: GraphRun, tasks: list[Task]) -> None:
        self.emit(
            "graph.step",
            step=run.head.step,
            checkpoint_id=run.head.checkpoint_id,
            data={"tasks": [t.id for t in tasks], "next": [p.node for p in run.head.frontier]},
        )

    def parent_for(self, task: Task) -> str | None:
        entry = self.task_runs.get(task.id)
        return entry.run_id if entry is not None else (self.handle.run_id if self.handle else None)

    def agent_started(self, task: Task, handle: RunHandle) -> None:
        self.agent_runs[task.id] = handle

    def stream(self, mode: str | Iterable[str] = "values", *, subgraphs: bool = False) -> Any:
        """``handle.stream(...)``: the run's stream from now on (``CompiledGraph.stream``'s
        modes), until the run ends; leaving it early leaves the run running."""
        sink = GraphStream(mode, subgraphs=subgraphs)
        run, handle = self.run, self.handle
        assert run is not None and handle is not None
        if run.stream is not None:
            raise ConfigurationError(f"graph run {handle.run_id} is streamed already")
        run.stream = sink
        sink.begin(run)
        return follow(self.runtime, handle, sink, owned=False)

    # -- SteeredRun: what lowering asks beyond the handle ------------------------------------

    async def start_fork_run(self, input: Any, thread_id: str) -> RunHandle:
        """Start a run like this one (same tenant, same waiting on interrupts) on a fork of
        its thread: where a command made against an older checkpoint is applied."""
        assert self.handle is not None
        return await start_graph_run(
            self.runtime,
            self.graph,
            input,
            thread_id=thread_id,
            tenant_id=self.handle.info.tenant_id,
            wait_on_interrupt=self.wait_on_interrupt,
        )


async def start_graph_run(
    runtime: RunHost,
    graph: GraphCore,
    input: Any,
    *,
    thread_id: str | None = None,
    tenant_id: str = "default",
    parent: RunHandle | str | None = None,
    checkpoint_id: str | None = None,
    recursion_limit: int | None = None,
    wait_on_interrupt: bool = True,
) -> RunHandle:
    """Register a graph run and start it in the background; returns its handle at once.

    Raises ``ThreadBusy`` (and registers nothing) if the thread already has a writer.
    """
    runtime.require_open()
    session = GraphSession(graph, thread_id)
    await session.__aenter__()
    try:
        previous = await session.load()
        run_id = continued_run_id(runtime, previous) or _clock.new_id("g")
        handle = runtime.runs.get(run_id)
        driver = GraphRunDriver(runtime, graph, wait_on_interrupt=wait_on_interrupt)
        driver.continued = handle is None and previous is not None and run_id == previous.run_id
        if handle is not None:
            if not isinstance(handle.driver, GraphRunDriver) or handle.status.finished:
                raise ConfigurationError(f"run {run_id} cannot be continued as a graph run")
            handle.driver = driver
            handle.reopen()
        else:
            parent_id = parent if isinstance(parent, str) or parent is None else parent.run_id
            info = RunInfo(
                run_id=run_id,
                parent_run_id=parent_id,
                thread_id=session.thread_id,
                agent_id=graph.name,
                tenant_id=tenant_id,
                kind="graph",
            )
            handle = RunHandle(info, submitter=runtime, driver=driver)
        driver.handle = handle
        handle.policies = [GraphCommandCheck(graph, run_id)]
        run = await session.prepare(
            input, checkpoint_id, recursion_limit, runtime=runtime, run_id=run_id
        )
        run.observer = driver
        driver.run = run
        if run_id not in runtime.runs:
            # registering hands the run any command that waited for it (deferred or restored)
            await runtime.register(
                handle, redirect_conflict=RedirectConflict(graph.redirect_conflict)
            )
    except BaseException:
        await session.__aexit__(None, None, None)
        raise
    driver.emit("graph.started", step=run.head.step, checkpoint_id=run.head.checkpoint_id)
    handle.task = runtime.spawn(_main(runtime, driver, session, run), name=f"graph {run_id}")
    return handle


def continued_run_id(runtime: RunHost, previous: Head | None) -> str | None:
    """The run a new start of the thread continues, if any: the one that wrote its last
    checkpoint, while it has tasks left, or while commands accepted for it are still open
    (it saved its last checkpoint but was stopped before its final boundary)."""
    if previous is None or previous.run_id is None:
        return None
    if previous.frontier:
        return previous.run_id
    if runtime.runs.get(previous.run_id) is not None:
        return None  # it finished in this runtime: the next start is a new run
    for cmd in runtime.open_commands():
        target = cmd.target
        if getattr(target, "run_id", None) == previous.run_id or (
            isinstance(target, ThreadTarget) and target.thread_id == previous.thread_id
        ):
            return previous.run_id
    return None


async def applied_by_steering(cp: Checkpointer, thread_id: str, run_id: str) -> dict[str, str]:
    """Correlation id -> checkpoint id of the steering checkpoints run ``run_id`` saved (and of
    the steps that consumed a steering answer), reading the thread's history newest first only
    as far back as that run goes."""
    found: dict[str, str] = {}
    limit = 64
    while True:
        records = await cp.list(thread_id, limit=limit)
        for record in records:
            if record.metadata.get("run_id") != run_id:
                return found
            correlation_id = record.metadata.get("correlation_id")
            if correlation_id is not None:
                found.setdefault(correlation_id, record.checkpoint_id)
            for answered_by in record.metadata.get("resumed_by", ()):
                found.setdefault(answered_by, record.checkpoint_id)
        if len(records) < limit:
            return found
        limit *= 4


async def _main(
    runtime: RunHost, driver: GraphRunDriver, session: GraphSession, run: GraphRun
) -> GraphResult:
    handle = driver.handle
    assert handle is not None
    try:
        result = await run.outcome()
    except asyncio.CancelledError:
        handle.finish(RunResult(run_id=handle.run_id, status=RunStatus.CANCELLED))
        raise
    finally:
        await session.__aexit__(None, None, None)
    if isinstance(result.error, RunCancelled):
        result.status = "cancelled"
    status = _STATUS[result.status]
    error = None if result.error is None else f"{type(result.error).__name__}: {result.error}"
    outcome = RunResult(run_id=handle.run_id, status=status, output=result.state, error=error)
    driver.emit(
        "graph.completed",
        step=run.head.step,
        checkpoint_id=result.checkpoint_id,
        data={"status": result.status, "interrupts": [i.id for i in result.interrupts]},
    )
    # driver.run stays: an interrupted run at rest still answers check_target from its head
    if status is RunStatus.INTERRUPTED:
        handle.finish(outcome)  # not finished for the router: its inbox stays open
    else:
        await runtime.finish(handle, outcome)
    return result


async def run_with_runtime(
    graph: GraphCore,
    input: Any,
    *,
    runtime: RunHost,
    thread_id: str | None = None,
    checkpoint_id: str | None = None,
    recursion_limit: int | None = None,
) -> GraphResult:
    """``graph.run(..., runtime=rt)``: a registered, steerable run, in the foreground.

    It returns on an interrupt (resume with another ``run``, or by steering the run)."""
    handle = await start_graph_run(
        runtime,
        graph,
        input,
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        recursion_limit=recursion_limit,
        wait_on_interrupt=False,
    )
    assert handle.task is not None
    result: GraphResult = await handle.task
    return result
