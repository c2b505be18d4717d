"""Graph runs inside a ``Runtime``: a run in the tree, ``graph.*`` events, steering.

``start_graph_run`` registers a ``RunInfo(kind="graph")`` and runs the graph in the
background under the managed loop (``managed.drive``); ``run_with_runtime`` does the same in
the foreground (``graph.run(..., runtime=rt)``). A managed run is made of small pieces:

| piece              | module       | job                                              |
|--------------------|--------------|--------------------------------------------------|
| ``drive``          | managed      | the loop: boundary, step, emit                   |
| ``GraphSteering``  | lowering     | take the due commands and lower them; stop tasks |
| ``TaskEntries``    | task_entries | tasks in the run tree (the run's ``TaskHooks``)  |
| ``GraphEvents``    | run_events   | ``graph.*`` events                               |
| ``EarlierApplied`` | recovery     | commands an earlier process applied              |
| ``GraphRunDriver`` | here         | the router's hooks (``RunDriver``)               |

The run keeps one run id for the life of its thread's execution (it is stored in the
checkpoints): a foreground run that stops on an interrupt leaves its handle ``interrupted``
with its steering inbox open, and the next run of the thread — in this process or after a
restart — continues under the same id and takes the commands that waited for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents.errors import ConfigurationError, RunCancelled, StoreError, UnknownTargetError
from tinyagents.graph.core import GraphCore
from tinyagents.graph.executor import GraphRun, running_graph_run
from tinyagents.graph.func_stream import sink_for
from tinyagents.graph.graph_runtime import Durability, check_durability
from tinyagents.graph.lowering import (
    RESUME_KINDS,
    GraphSteering,
    fork_id_problem,
    fork_thread_id,
    nested_spec,
    nested_unreachable,
    never_applied,
    node_of_answered_task,
    node_steering,
    pending_interrupts,
    run_steering,
    unanswerable_at_rest,
    undeliverable,
)
from tinyagents.graph.managed import drive
from tinyagents.graph.recovery import EarlierApplied, continued_run_id
from tinyagents.graph.run_events import GraphEvents
from tinyagents.graph.session import GraphSession, goto_problem, update_problem
from tinyagents.graph.stream import follow
from tinyagents.graph.task_entries import TaskEntries
from tinyagents.harness.pausing import HoldBelow, join_holds_above, runs_above
from tinyagents.protocol.commands import (
    GraphNodeTarget,
    GraphSupervisorActor,
    GraphTaskTarget,
    SteeringCommand,
    SteeringKind,
    mutable_copy,
)
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.state import RunStatus
from tinyagents.runs.handle import RunDriver, RunHandle, RunResult
from tinyagents.runs.host import require_open
from tinyagents.runs.info import RunInfo, withheld_below
from tinyagents.runs.registry import check_parent_open, check_parent_tenant, parent_run_id
from tinyagents.steering.conflicts import RedirectConflict
from tinyagents.steering.policy import CheckPolicy, PolicyContext

if TYPE_CHECKING:
    from tinyagents.graph.types import GraphResult
    from tinyagents.runs.host import RunHost

_STATUS = {
    "completed": RunStatus.COMPLETED,
    "interrupted": RunStatus.INTERRUPTED,
    "failed": RunStatus.FAILED,
    "cancelled": RunStatus.CANCELLED,
}


class GraphCommandCheck(CheckPolicy):
    """A graph run's own policy: refuses at submit, whatever the target's form (task, node,
    run or thread), a command the run could only accept and never apply — a delivery class
    it never reaches, a redirect to no node or to an unknown one, a fork of a run that saves
    no checkpoints or of a kind no fork takes, an update with a key the state does not have
    (or a value its schema refuses, or an unknown ``as_node``), an instruction (or tool,
    model, budget change, node pause or resume) for a node that is not an agent node or for
    the graph run itself; and, while the run rests on its interrupts (nothing runs, and
    nothing new is asked, before a command lands), an answer whose target asks nothing or
    another question than the one it names (``interrupt_id``), or several questions while it
    names none and no command waits to land before it: the task's, the node's, the run's or
    its thread's."""

    policy_id = "graph"

    def __init__(
        self,
        graph: GraphCore,
        run_id: str,
        *,
        saves: bool = True,
        run: GraphRun | None = None,
        handle: RunHandle | None = None,
    ) -> None:
        self.graph = graph
        self.run_id = run_id
        self.saves = saves
        #: the run, to find the node of a task target
        self.run = run
        #: the run's handle, whose inbox says whether commands wait to land before this one
        #: (an answer to one of several questions leaves one that a vague answer then takes)
        self.handle = handle

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        if cmd.fork and not self.saves:
            return (
                f"graph run {self.run_id} has no checkpointer: there is no checkpoint to fork "
                "from (fork=True needs compile(checkpointer=...))"
            )
        problem = undeliverable(cmd, self.run_id)
        if problem is None and cmd.fork and cmd.checkpoint_id is not None:
            thread = self.run.head.thread_id if self.run is not None else ctx.target.thread_id
            if thread is not None:  # accepted, it failed as it landed, naming no argument sent
                problem = fork_id_problem(fork_thread_id(thread, cmd))
        if problem is None and cmd.kind is SteeringKind.REDIRECT:
            problem = goto_problem(self.graph, cmd.payload.get("goto"))
            if problem is None and "instruction" in cmd.payload:
                # applied, the run would go to the goto nodes and the instruction reach no one
                problem = (
                    "a graph redirect acts on its 'goto' only; its 'instruction' would reach "
                    "no agent: send 'goto' alone, and the instruction as add_instruction to "
                    "an agent node's run"
                )
        if problem is None and cmd.kind is SteeringKind.UPDATE_STATE:
            payload = cmd.payload
            update = mutable_copy(payload["update"])  # validated as it will be applied
            problem = update_problem(self.graph, update, payload.get("as_node"))
        if (
            problem is None
            and cmd.kind in RESUME_KINDS
            and self.run is not None
            and ctx.target.status is RunStatus.INTERRUPTED  # every task of the step stopped
            and not (cmd.fork and cmd.checkpoint_id is not None)  # answers an older step
        ):
            # a paused task asks nothing else until it is answered, and a run resting on
            # its interrupts asks nothing new before this command lands
            waiting = self.handle is not None and bool(len(self.handle.inbox))
            problem = unanswerable_at_rest(cmd, pending_interrupts(self.run), waiting=waiting)
        if problem is not None:
            return problem
        target, node, nested = cmd.target, None, None
        if isinstance(target, GraphNodeTarget):
            node = target.node
        elif isinstance(target, GraphTaskTarget):
            run = self.run
            node = None if run is None else node_of_answered_task(run, target.task_id, cmd.kind)
            if node is None:  # not pending (the router says so): nothing to judge here
                return None
            assert run is not None
            nested = nested_spec(run, target.task_id)  # a sub-graph's task: its own node
            if nested is not None:
                node = nested.name
        return never_applied(self.graph, cmd, self.run_id, node, nested)


class GraphRunDriver(RunDriver):
    """The router's view of one runtime-managed graph run: which task or node a command may
    name, where an instruction for an agent node goes, an immediate cancel, the stream."""

    def __init__(
        self,
        runtime: RunHost,
        graph: GraphCore,
        run: GraphRun,
        steering: GraphSteering,
        entries: TaskEntries,
    ) -> None:
        self.runtime = runtime
        self.graph = graph
        #: kept after the run ends: an interrupted run at rest answers check_target from it
        self.run = run
        self.steering = steering
        self.entries = entries

    @property
    def handle(self) -> RunHandle:
        return self.steering.handle

    def interrupt_now(self, cmd: SteeringCommand) -> None:
        self.steering.interrupt_now(self.run, cmd)

    def pause_queued(self, cmd: SteeringCommand) -> None:
        self.steering.pause_queued(cmd)

    def adopt_pause(self, cmd: SteeringCommand, origin: str | None) -> bool:
        return self.steering.adopt_pause(cmd, origin)

    def restore(self, applied: list[SteeringCommand]) -> None:
        self.steering.restore(applied, runs_above(self.runtime, self.handle.info.parent_run_id))

    async def hold_new_run(self, handle: RunHandle) -> None:
        if self.steering.below is not None:
            await self.steering.below.take_in()

    def supervisor_spec(self) -> Any:
        """The spec of the innermost graph with one (``compile(supervisor=...)``) that the run
        being registered runs in, or None.

        A sub-graph runs inside its parent's graph run (one run in the tree), so the run tree
        cannot tell it: the graph node running here (``running_graph_run``, which the task of
        an agent node, and so its agent run and that run's sub-agents, inherit) can.
        Registered from anywhere else (another run's turn), the run gets the top graph's."""
        graph_run = running_graph_run()
        if graph_run is None or graph_run.run_id != self.run.run_id:
            graph_run = self.run
        while graph_run is not None:
            spec = getattr(graph_run.graph, "supervisor", None)
            if spec is not None:
                return spec
            graph_run = graph_run.parent
        return None

    async def latest_checkpoint_id(self) -> str | None:
        return self.run.head.checkpoint_id

    async def has_checkpoint(self, checkpoint_id: str) -> bool:
        cp = self.run.checkpointer
        return cp is not None and await cp.get(self.run.head.thread_id, checkpoint_id) is not None

    def check_target(self, cmd: SteeringCommand) -> str | None:
        target = cmd.target
        run_id = self.handle.run_id
        if isinstance(target, GraphNodeTarget):
            if target.node not in self.graph.nodes:
                return (
                    f"not found: graph run {run_id} has no node {target.node!r} "
                    f"(nodes: {', '.join(self.graph.nodes)})"
                )
            node: str | None = target.node
        elif isinstance(target, GraphTaskTarget):
            # (an answer, a cancel or an instruction may name a task a sub-graph runs, at any
            # level, while it runs; a redirect or an update may not, and is told why)
            node = node_of_answered_task(self.run, target.task_id, cmd.kind)
            if node is None:
                unreachable = nested_unreachable(self.run, cmd)
                if unreachable is not None:
                    return unreachable
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
        return self.entries.route(cmd)

    def stream(self, mode: str | Iterable[str] = "values", *, subgraphs: bool = False) -> Any:
        """``handle.stream(...)``: the run's stream from now on (``CompiledGraph.stream``'s
        modes), until the run ends; leaving it early leaves the run running."""
        run, handle = self.run, self.handle
        sink = sink_for(run.graph, mode, subgraphs)
        if run.stream is not None:
            raise ConfigurationError(f"graph run {handle.run_id} is streamed already")
        run.stream = sink
        sink.begin(run)
        return follow(self.runtime, handle, sink, owned=False)


async def start_graph_run(
    runtime: RunHost,
    graph: GraphCore,
    input: Any,
    *,
    thread_id: str | None = None,
    tenant_id: str | None = None,
    parent: RunHandle | str | None = None,
    checkpoint_id: str | None = None,
    recursion_limit: int | None = None,
    max_concurrency: int | None = None,
    wait_on_interrupt: bool = True,
    context: Any = None,
    durability: Durability | None = None,
) -> RunHandle:
    """Register a graph run and start it in the background; returns its handle at once.
    Its tenant is ``tenant_id``, else its parent's, else ``"default"``. ``context`` and
    ``durability`` as ``CompiledGraph.run``'s (a fork steering makes has the run's context).

    Raises ``ThreadBusy`` (and registers nothing) if the thread already has a writer.
    """
    require_open(runtime)
    check_durability(durability, steered=True)
    if not isinstance(graph, GraphCore):  # an AttributeError from the session, otherwise
        hint = "; call .compile() on it first" if hasattr(graph, "compile") else ""
        raise ConfigurationError(
            f"rt.start_graph takes a compiled graph, got {type(graph).__name__}{hint} (an "
            "Agent starts with rt.start)"
        )
    if not isinstance(wait_on_interrupt, bool):  # "no" was taken as true
        raise ConfigurationError(
            f"rt.start_graph(wait_on_interrupt=...) is True or False, got {shown_repr(wait_on_interrupt)}"
        )
    parent_id = parent_run_id(parent)
    parent_handle = runtime.runs.get(parent_id) if parent_id is not None else None
    if parent_id is not None and parent_handle is None:  # as rt.start: never a dangling link
        raise UnknownTargetError(f"parent run {parent_id} is not registered in this runtime")
    if parent_handle is not None:
        check_parent_open(parent_handle.info)
    if tenant_id is None:
        tenant_id = parent_handle.info.tenant_id if parent_handle is not None else "default"
    elif parent_handle is not None:  # as register would, before anything is saved
        check_parent_tenant("(a graph run)", tenant_id, parent_handle.info)
    session = GraphSession(graph, thread_id)
    await session.__aenter__()
    taking: RunInfo | None = None  # the run taking the thread (``RunHost.take_thread``)
    try:
        unread: StoreError | None = None
        try:
            previous = await session.load()
        except StoreError as exc:
            previous, unread = None, exc  # the run fails with it (a new run: no id to go on)
        run_id = continued_run_id(runtime, previous) or _clock.new_id("g")
        handle = runtime.runs.get(run_id)
        if handle is not None and (
            not isinstance(handle.driver, GraphRunDriver) or handle.status.finished
        ):
            raise ConfigurationError(f"run {run_id} cannot be continued as a graph run")
        if handle is None:  # before the input is applied: a bad tenant id changes nothing
            info = RunInfo(
                run_id=run_id,
                parent_run_id=parent_id,
                thread_id=session.thread_id,
                agent_id=graph.name,
                tenant_id=tenant_id,
                kind="graph",
                accepts=run_steering(),  # what its graph run refuses for itself is left out
                # its agent nodes may not use what was taken from the runs above it
                **withheld_below(parent_handle.info if parent_handle is not None else None),
            )
            handle = RunHandle(info, submitter=runtime)
        if handle.info.thread_id:  # an agent turn holds it: ThreadBusy before anything is saved
            await runtime.take_thread(handle.info, hold=False, started=run_id in runtime.runs)
            taking = handle.info
        if parent_handle is not None:  # it may have ended while the thread was read: before
            check_parent_open(parent_handle.info)  # the input is applied, nothing is written
        run = await session.prepare(
            input,
            checkpoint_id,
            recursion_limit,
            failure=unread,
            runtime=runtime,
            run_id=run_id,
            max_concurrency=max_concurrency,
            context=context,
        )
        recovery = EarlierApplied(graph.checkpointer, handle.info.thread_id, run_id)
        # the run id came from the thread's checkpoints, not from this runtime: an earlier
        # process ran it, and may have applied commands it never got to report
        recovery.continued = run_id not in runtime.runs and run_id == getattr(
            previous, "run_id", None
        )
        events = GraphEvents(runtime, handle.info)
        tenant = handle.info.tenant_id

        async def start_fork(first: Any, fork: str) -> RunHandle:
            return await start_graph_run(
                runtime,
                graph,
                first,
                thread_id=fork,
                tenant_id=tenant,
                recursion_limit=recursion_limit,
                max_concurrency=max_concurrency,
                wait_on_interrupt=wait_on_interrupt,
                context=run.context,
            )

        steering = GraphSteering(
            handle,
            events,
            recovery,
            start_fork=start_fork,
            wait_on_interrupt=wait_on_interrupt,
            hold_below=partial(HoldBelow, runtime, handle.info, graph.name),
        )
        entries = TaskEntries(
            runtime,
            handle,
            events,
            graph.name,
            continued=recovery.continued,
            accepts=lambda node: node_steering(graph.nodes.get(node) if node else None),
        )
        run.task_hooks = entries
        earlier = handle.driver
        if isinstance(earlier, GraphRunDriver):  # continued: what runs above passed down to
            steering.pauses.from_above = earlier.steering.pauses.from_above  # not applied
        handle.driver = GraphRunDriver(runtime, graph, run, steering, entries)
        handle.policies = [
            GraphCommandCheck(
                graph, run_id, saves=run.checkpointer is not None, run=run, handle=handle
            )
        ]
        if run_id in runtime.runs:
            runtime.runs.reopen(handle)
        else:
            if parent_handle is not None:  # or while the input was applied
                check_parent_open(parent_handle.info)
            # registering hands the run any command that waited for it (deferred or restored)
            await runtime.register(
                handle,
                redirect_conflict=RedirectConflict(graph.redirect_conflict),
                continued=recovery.continued,
            )
            if steering.restored is not None:  # a pause its log applied still held it
                steering.hold_again()
        if handle.info.parent_run_id is not None:  # below a run holding its subtree: held
            await join_holds_above(runtime, handle)
    except BaseException:
        if taking is not None:
            await runtime.let_go_of_thread(taking)
        await session.__aexit__(None, None, None)
        raise
    events.started(run)
    if steering.restored is not None:  # continued: the pause that held it holds it again
        events.restored_pause(steering.restored)
    began = asyncio.Event()
    handle.task = runtime.spawn(
        _main(runtime, handle, session, run, steering, entries, began), name=f"graph {run_id}"
    )
    handle.task.add_done_callback(
        partial(_unstarted, runtime, handle, session, steering, entries, began)
    )
    return handle


def _unstarted(
    runtime: RunHost,
    handle: RunHandle,
    session: GraphSession,
    steering: GraphSteering,
    entries: TaskEntries,
    began: asyncio.Event,
    task: asyncio.Future[Any],
) -> None:
    """The run's task was cancelled before its first step (a runtime closed right after the
    start, no await between): asyncio throws such a cancel in before ``_main``'s first line,
    so none of it ran, its cancelled ending included; the run stayed 'running', its result
    awaited for ever and its thread's lease held. Ended here as ``_main`` ends it."""
    if began.is_set() or not task.cancelled() or handle.done:
        return

    async def end() -> None:
        try:
            steering.ended(RunStatus.CANCELLED)
            await entries.close(RunStatus.CANCELLED)
            handle.finish(RunResult(run_id=handle.run_id, status=RunStatus.CANCELLED))
        finally:
            await session.__aexit__(None, None, None)

    runtime.spawn(end(), name=f"end-unstarted-{handle.run_id}")


async def _main(
    runtime: RunHost,
    handle: RunHandle,
    session: GraphSession,
    run: GraphRun,
    steering: GraphSteering,
    entries: TaskEntries,
    began: asyncio.Event,
) -> GraphResult:
    began.set()
    try:
        result = await drive(run, steering, steering.events)
    except asyncio.CancelledError:
        steering.ended(RunStatus.CANCELLED)
        await entries.close(RunStatus.CANCELLED)
        handle.finish(RunResult(run_id=handle.run_id, status=RunStatus.CANCELLED))
        raise
    finally:
        await session.__aexit__(None, None, None)
    if isinstance(result.error, RunCancelled):
        result.status = "cancelled"
    # the user's view of the state (an entrypoint's: its return value), for run(runtime=) too
    shown = run.graph.shown_state(result.state)
    if shown is not result.state:
        result = replace(result, state=shown)
    status = _STATUS[result.status]
    error = None if result.error is None else _described(result.error)
    outcome = RunResult(run_id=handle.run_id, status=status, output=result.state, error=error)
    # Everything of the run ends before its graph.completed (a reader stops there): its
    # paused tasks, and the commands still queued for it (an interrupted run keeps them).
    steering.ended(status)
    await entries.close(status)
    if status is not RunStatus.INTERRUPTED:
        handle.inbox.close()
    steering.events.completed(run, result)
    if status is RunStatus.INTERRUPTED:
        handle.finish(outcome)  # not finished for the router: its inbox stays open
    else:
        await runtime.finish(handle, outcome)
    return result


def _described(error: BaseException) -> str:
    """A run's error as its ``RunResult`` says it, with the notes added to it (a node task
    its step left behind, ``graph/parallel.py``)."""
    said = f"{type(error).__name__}: {error}"
    notes = getattr(error, "__notes__", None)
    return "; ".join([said, *notes]) if notes else said


async def run_with_runtime(
    graph: GraphCore,
    input: Any,
    *,
    runtime: RunHost,
    thread_id: str | None = None,
    checkpoint_id: str | None = None,
    recursion_limit: int | None = None,
    max_concurrency: int | None = None,
    context: Any = None,
    durability: Durability | None = None,
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
        max_concurrency=max_concurrency,
        wait_on_interrupt=False,
        context=context,
        durability=durability,
    )
    assert handle.task is not None
    result: GraphResult = await handle.task
    return result
