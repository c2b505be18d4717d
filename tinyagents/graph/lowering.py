"""Lowering steering commands into graph operations (DESIGN.md, "Graph lowering").

Commands reach a graph run at the boundary between supersteps, in queue order:

| command (target)                               | becomes                                             |
|------------------------------------------------|-----------------------------------------------------|
| approve / reject / provide_context (task, node)| resume of that task's pending interrupt only        |
| redirect with ``goto`` (node, run)             | the next superstep runs the ``goto`` nodes instead  |
| update_state                                   | a reducer update recorded as its own checkpoint     |
| cancel (task, node)                            | those tasks only: ``skip`` them or ``fail_run``     |
| cancel (run, thread)                           | the run ends ``cancelled``                          |
| pause / resume / request_status (run)          | wait at the boundary / continue / report            |
| instructions for an agent node                 | routed to its child run (``task_entries.route``)    |
| any of these with ``checkpoint_id`` + ``fork`` | applied on a new thread forked at that checkpoint   |

The value an approved interrupt returns is ``{"approved": True}`` (``False`` for reject),
plus ``"value"`` and ``"reason"`` when the command has them; ``provide_context`` returns its
``value`` (or its ``text``). A stale ``checkpoint_id`` without ``fork`` never gets here: the
staleness policy rejects it.

One APPROVE, end to end: the managed loop (``graph/managed.py``) calls
``GraphSteering.boundary`` between supersteps (after ``at_rest``, when every unfinished task
waits on an interrupt and a command is due); ``boundary`` takes the due commands from the
run's inbox and calls ``lower_all``; ``lower`` → ``_resume`` picks the one pending interrupt
the target names (``answers``), ``map_resume`` turns the answer into a resume write and
``record_resume`` saves it; the inbox reports the command applied, and the loop calls the
run's ``next`` again, so the answered task runs and its ``interrupt()`` returns it.

Everything here changes the run through its public methods and properties (``head``,
``plan``, ``adopt``, ``skip``, ``keep_records``, ``stop``, ``stopped``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from tinyagents.errors import GraphError, RunCancelled, TinyAgentsError
from tinyagents.graph import threads
from tinyagents.graph.checkpointing import save
from tinyagents.graph.interrupts import Interrupt
from tinyagents.graph.recovery import command_ref, steered_by
from tinyagents.graph.session import goto_problem, jump, record_resume, update_state
from tinyagents.graph.task_entries import AGENT_KINDS
from tinyagents.graph.types import Command
from tinyagents.harness.pausing import HoldBelow, Pauses, holding_pause, reconcile_below
from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import (
    GraphNodeTarget,
    GraphTaskTarget,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    ThreadTarget,
    dedupe_scope,
    mutable_copy,
    problems_line,
)
from tinyagents.protocol.ids import MAX_ID_LENGTH
from tinyagents.protocol.state import RunStatus
from tinyagents.steering.queue import supersedes

if TYPE_CHECKING:
    from tinyagents.graph.core import GraphCore, NodeSpec
    from tinyagents.graph.executor import GraphRun
    from tinyagents.graph.recovery import EarlierApplied
    from tinyagents.graph.run_events import GraphEvents
    from tinyagents.graph.tasks import Task
    from tinyagents.runs.handle import RunHandle
    from tinyagents.store.checkpoint.base import Checkpointer

_log = logging.getLogger("tinyagents.graph")

RESUME_KINDS = frozenset({SteeringKind.APPROVE, SteeringKind.REJECT, SteeringKind.PROVIDE_CONTEXT})

#: Agent-loop delivery classes: a graph run never reaches these boundaries itself (an agent
#: node's child run does, and commands routed to it go there).
AGENT_BOUNDARIES = {
    SteeringDelivery.BEFORE_MODEL_CALL: Boundary.BEFORE_MODEL_CALL,
    SteeringDelivery.AFTER_TOOL_RESULT: Boundary.AFTER_TOOL_RESULT,
}


#: What a graph run lowers itself, whatever the target (and the whole run's pause and resume:
#: ``_PAUSE_KINDS``); any other kind is for an agent node's child run, to which it is routed
#: while that node runs (``TaskEntries.route``). A resume of a task or node is one of those:
#: only an agent node's run is paused, and a resume answers no interrupt (it carries no
#: answer), so it never wakes a run resting on its interrupts.
GRAPH_KINDS = RESUME_KINDS | {
    SteeringKind.REDIRECT,
    SteeringKind.UPDATE_STATE,
    SteeringKind.CANCEL,
    SteeringKind.REQUEST_STATUS,
}
#: A run's pause and resume (whose pauses hold it: ``GraphSteering.pauses``).
_PAUSE_KINDS = frozenset({SteeringKind.PAUSE, SteeringKind.RESUME})
#: What reaches a task of a sub-graph (at any level) while it runs (``GraphRun.running_below``),
#: as it reaches a running top-level task: an answer (it lands on the question the task asks
#: at the step's end), a cancel (of the top-level task running the sub-graph, as for a nested
#: task paused on a question) and what an agent node's run takes (to the nested agent node's
#: run; refused at submit for a function or sub-graph node, as a top-level one's). A redirect
#: or an update does not: both act on the top-level graph, whose state and next nodes are not
#: the sub-graph's (``nested_unreachable``).
NESTED_KINDS = RESUME_KINDS | {SteeringKind.CANCEL} | AGENT_KINDS
#: What can be applied on a fork of the thread (``fork=True``).
FORK_KINDS = RESUME_KINDS | {SteeringKind.REDIRECT, SteeringKind.UPDATE_STATE}
_INSTEAD = (
    "to steer the graph itself send update_state or redirect, or approve / reject / "
    "provide_context to answer an interrupt"
)


def node_takes(spec: NodeSpec | None, kind: SteeringKind) -> bool:
    """Whether a command of ``kind`` sent to a task or node of the node ``spec`` (None: no
    node of the graph) can ever be applied: what the graph run lowers itself
    (``GRAPH_KINDS``) reaches any node; the rest, only an agent node's run."""
    return kind in GRAPH_KINDS or spec is None or spec.agent is not None


def node_steering(spec: NodeSpec | None) -> tuple[str, ...] | None:
    """The kinds a task of the node ``spec`` takes (``node_takes``), as its entry in the run
    tree says them (``RunInfo.accepts``); None when it takes every kind (an agent node's)."""
    kinds = tuple(kind.value for kind in SteeringKind if node_takes(spec, kind))
    return None if len(kinds) == len(SteeringKind) else kinds


def run_takes(kind: SteeringKind) -> bool:
    """Whether a command of ``kind`` sent to a graph run itself (or its thread) can ever be
    applied: what it lowers itself (``GRAPH_KINDS``) and its pause and resume; the rest only
    an agent node's run takes."""
    return kind in GRAPH_KINDS or kind in _PAUSE_KINDS


def run_steering() -> tuple[str, ...]:
    """The kinds a graph run itself takes (``run_takes``), as its entry in the run tree says
    them (``RunInfo.accepts``)."""
    return tuple(kind.value for kind in SteeringKind if run_takes(kind))


def never_applied(
    graph: GraphCore,
    cmd: SteeringCommand,
    run_id: str,
    node: str | None,
    nested: NodeSpec | None = None,
) -> str | None:
    """Why graph run ``run_id`` could only accept ``cmd`` and never apply it, whatever the
    timing, or None. ``node``: the node a task or node target names (None for the run or
    its thread); ``nested``: its spec, when the task is a sub-graph's (``node`` is then that
    sub-graph's node). Only an agent node's child run takes instructions, tool, model and budget
    changes (or a pause of one node); a function or sub-graph node has none, nor has the
    graph run itself. (An agent node's run exists only while the node runs: a command for an
    agent node that is not running is accepted, and fails when it lands.)"""
    kind = cmd.kind
    if cmd.fork and kind not in FORK_KINDS:
        names = ", ".join(sorted(k.value for k in FORK_KINDS))
        return f"{kind.value} cannot be applied on a fork: fork=True takes {names}"
    if kind in GRAPH_KINDS:
        return None
    if node is None:
        if run_takes(kind):
            return None
        agents = [name for name, spec in graph.nodes.items() if spec.agent is not None]
        which = f"its agent nodes: {', '.join(agents)}" if agents else "it has no agent nodes"
        return (
            f"{kind.value} cannot be applied to graph run {run_id} itself: only an agent "
            f"node's run takes it, while the node runs (send it to "
            f"SteeringTarget.graph_node(run_id, node); {which}); {_INSTEAD}"
        )
    spec = graph.nodes.get(node) if nested is None else nested
    if spec is None or node_takes(spec, kind):
        return None
    what = "a sub-graph" if spec.subgraph is not None else "a function"
    if nested is not None:
        what += ", in a sub-graph"
    instead = _INSTEAD
    if kind is SteeringKind.RESUME:
        instead = (
            "a task waiting on interrupt() goes on when its interrupt is answered, and a "
            "resume carries no answer: send approve / reject / provide_context (payload "
            "interrupt_id names one), or resume the whole run"
        )
    return (
        f"{kind.value} cannot reach node {node!r} of graph run {run_id}: it is not an agent "
        f"node ({what}), and only an agent node's run takes {kind.value}; {instead}"
    )


def undeliverable(cmd: SteeringCommand, run_id: str) -> str | None:
    """Why ``cmd``'s delivery class can never be met by graph run ``run_id``, or None."""
    if cmd.delivery not in AGENT_BOUNDARIES:
        return None
    return (
        f"undeliverable: graph run {run_id} takes steering between supersteps and never "
        f"reaches a {cmd.delivery.value} boundary; send it with delivery next_boundary or "
        "end_of_turn (or to an agent node while its agent runs)"
    )


class CannotApply(Exception):
    """The command is valid but does not fit the run's state: it fails with this reason."""


class TaskCancelled(GraphError):
    """A task was cancelled by steering under ``task_cancel_policy="fail_run"``; ``affected``
    names the tasks, as the ``steering.applied`` of a ``skip`` cancel does."""

    def __init__(self, message: str, affected: dict[str, Any] | None = None) -> None:
        super().__init__(message)  # (rebuilt from its message alone when copied or pickled)
        self.affected = affected or {}


class GraphSteering:
    """The steering of one runtime-managed graph run: at each boundary it takes the due
    commands from the run's inbox and lowers them; at rest on interrupts it waits (or not)
    for a command; an immediate cancel stops tasks of the running step."""

    def __init__(
        self,
        handle: RunHandle,
        events: GraphEvents,
        recovery: EarlierApplied,
        *,
        start_fork: Callable[[Any, str], Awaitable[RunHandle]],
        wait_on_interrupt: bool,
        hold_below: Callable[[], HoldBelow],
    ) -> None:
        self.handle = handle
        self.events = events
        self.recovery = recovery
        #: starts a run like this one (its tenant, ``recursion_limit``, ``max_concurrency``
        #: and ``wait_on_interrupt``) on a fork of its thread (a command with ``fork``)
        self.start_fork = start_fork
        self.wait_on_interrupt = wait_on_interrupt
        #: the run stopped on interrupts and steering arrived: its next boundary is final
        self.resting = False
        #: the commands being lowered woke the run where it rested on interrupts: until one
        #: moves it on (``stirred``) it is still waiting on them (a status report says so)
        self.woken = False
        #: tasks an immediate cancel stopped: task id -> the command (read out when lowered)
        self.cancelled: dict[str, SteeringCommand] = {}
        #: a pause held the run at the boundary being lowered
        self.held = False
        #: since the run came to rest on interrupts (``at_rest``), a command that may move
        #: it on was applied: an answer, a redirect, an update, a cancel of a task. Woken
        #: only to be paused and let go of, to report its status, or by a command that
        #: failed, it did not go on (the managed loop lets it rest again, and says no
        #: ``graph.resumed``)
        self.stirred = False
        #: The run's hold on the runs below it (made by its first pause of its own, by
        #: ``hold_below``), held while such a pause pauses it.
        self.below: HoldBelow | None = None
        self._hold_below = hold_below
        #: Whose pauses hold the run (its own, runs above it) and the pauses and resumes
        #: passed down to it not applied yet: the one book of agent and graph runs.
        self.pauses = Pauses()
        #: continued from an earlier process that this pause still held (``restore``): the
        #: run waits for a resume before its first boundary
        self.restored: SteeringCommand | None = None

    def restore(self, applied: list[SteeringCommand], above: set[str]) -> None:
        """``RunDriver.restore``: the run goes on from an earlier process that applied
        ``applied``; a pause that still held it (``holding_pause``) holds it again, as an
        agent run started again under its id comes back paused, and holds the runs below it.
        ``above``: the runs above it now. (Called as it is registered, before its inbox is
        attached: ``hold_again`` once it is.)"""
        pause = holding_pause(applied, above)
        if pause is None:
            return
        self.restored = pause
        self.pauses.restored(pause, holding=True)
        self.handle.info.status = RunStatus.PAUSED

    def hold_again(self) -> None:
        """Registered, the run ``restore`` brought back paused is held: its inbox, and the
        runs below it (those it starts while so held start paused)."""
        assert self.restored is not None
        self.handle.inbox.paused = True
        self.holding_below().hold(self.restored)

    async def hold_restored(self, run: GraphRun) -> None:
        """Before its first boundary, the run ``restore`` brought back paused waits for the
        resume that lets go of it; a cancel meanwhile ends the run as it ends one paused
        at a boundary (``RunCancelled``: ``cancelled``)."""
        self.restored = None
        try:
            await wait_while_paused(self, run, behind=[])
        except _Stopped as stop:  # that command reported itself
            raise stop.error from None

    def adopt_pause(self, cmd: SteeringCommand, origin: str | None) -> bool:
        """``RunDriver.adopt_pause``: ``cmd`` is ``origin``'s hold (None: forget it)."""
        self.pauses.adopt(cmd, origin)
        return True

    def holding_below(self) -> HoldBelow:
        below = self.below
        if below is None:
            below = self.below = self._hold_below()
        return below

    def pause_queued(self, cmd: SteeringCommand) -> None:
        """A run-level pause or resume of the run's own was queued: a ``next_boundary``
        pause (its boundary between supersteps is sure to come) holds the runs below at
        once, a resume lets go of them at once (a node waiting on a sub-agent ends only
        when that agent is done); what was passed down to the run is not passed on.
        Applying either sets the hold right again (``_reconcile``)."""
        if not _run_level(cmd) or self.pauses.passed_down(cmd):
            return
        if cmd.kind is SteeringKind.PAUSE:
            if cmd.delivery is SteeringDelivery.NEXT_BOUNDARY:
                self.holding_below().hold(cmd)
        elif self.below is not None and self.below.cause is not None:
            self.below.resumed_by(cmd)

    def took_pause(self, cmd: SteeringCommand) -> dict[str, Any]:
        """Run-level pause ``cmd`` is applied: the run's own, or a hold of a run above.
        Returns what its ``steering.applied`` says of whose it is, as an agent run's:
        ``from_above`` (the run above whose hold it is) and, on a run paused already,
        ``paused_by`` (``own`` or ``above``)."""
        pauses, said = self.pauses, {}
        if pauses.paused:
            said["paused_by"] = pauses.by()
        origin = pauses.pause(cmd)
        if origin is not None:
            said["from_above"] = origin
        self._reconcile(cmd)
        return said

    def took_resume(self, cmd: SteeringCommand) -> bool | None:
        """Run-level resume ``cmd`` is applied, and reported: whether the run goes on (no
        pause holds it any more), None if it was superseded (said before every pause it
        would end: ``Pauses.resume``). One passed down ends its run's hold only; the run's
        own ends its own pause and every hold, and lets go of the runs below."""
        pauses, inbox = self.pauses, self.handle.inbox
        resumed = pauses.resume(cmd)
        said: dict[str, Any] = {}
        if resumed.origin is not None:
            said["from_above"] = resumed.origin
        if resumed.superseded_by is not None:
            inbox.superseded(cmd, resumed.superseded_by.correlation_id)
        else:
            if pauses.paused:
                said["paused_by"] = pauses.by()
            inbox.applied(cmd, paused=pauses.paused, **said)
        self._reconcile(cmd)
        return None if resumed.superseded_by is not None else not pauses.paused

    def _reconcile(self, cause: SteeringCommand) -> None:
        """After a pause or resume applied: the runs below are held while this run is paused
        by a pause of its own, and let go of otherwise (as an agent run's)."""
        reconcile_below(self.pauses, self.below, self.holding_below, cause)

    def ended(self, status: RunStatus) -> None:
        """The run ended: let go of the runs it held (a run started below may outlive it)."""
        if self.below is not None and self.below.cause is not None:
            self.below.release(f"ended {status.value}")

    async def boundary(self, run: GraphRun) -> None:
        """Lower the commands due between supersteps. END_OF_TURN lands where the graph
        would otherwise stop: resting on interrupts, or about to complete (a redirect then
        gives it another turn)."""
        inbox = self.handle.inbox
        self.woken = self.resting
        final, self.resting = self.resting or not run.head.frontier, False
        while len(inbox):
            cmds = inbox.take(Boundary.BETWEEN_SUPERSTEPS, final=final)
            self._fail_undeliverable()
            if not cmds:
                return
            self.held = False
            await lower_all(self, run, cmds)
            if run.task_hooks is not None:  # paused tasks a redirect or cancel dropped
                await run.task_hooks.steered(run)
            if not self.held:
                return
            # a pause held the run at this boundary: what was sent meanwhile lands here too

    def _fail_undeliverable(self) -> None:
        """Fail what waits for an agent-loop boundary: a graph run never reaches one. (Refused
        at submit by ``GraphCommandCheck``; this catches commands accepted before, e.g. ones
        handed over after a restart.) Runs right after ``take``, so nothing else is ready."""
        inbox = self.handle.inbox
        for boundary in AGENT_BOUNDARIES.values():
            for cmd in inbox.queue.pop_ready(boundary, paused=inbox.paused):
                inbox.failed(cmd, undeliverable(cmd, self.handle.run_id) or "undeliverable")

    async def at_rest(self, run: GraphRun) -> bool:
        """The run stopped with every unfinished task on an interrupt: whether it goes on
        (a command is due, perhaps after waiting for one when it waits on interrupts)."""
        self.stirred = False
        if self._due_at_rest():
            self.resting = True
            return True
        if not self.wait_on_interrupt:
            return False
        async with holding(self.handle, RunStatus.INTERRUPTED):
            while not self._due_at_rest():
                await self.handle.inbox.wait()
        self.resting = True
        return True

    def _due_at_rest(self) -> bool:
        """Whether a queued command is due while the run rests on interrupts: every delivery
        class is, to be applied at the next boundary (END_OF_TURN too: the run would
        otherwise stop here) or failed there (agent-loop boundaries)."""
        inbox = self.handle.inbox
        return bool(len(inbox)) and (
            inbox.has_ready(Boundary.BETWEEN_SUPERSTEPS, final=True)
            or any(inbox.has_ready(b) for b in AGENT_BOUNDARIES.values())
        )

    async def settle_cancel(self, run: GraphRun, error: Exception) -> Exception:
        """An immediate run cancel stopped the step (``error``): lower it now (it ends the
        run, with its reason), or it would be failed as "target finished before delivery"."""
        try:
            await self.boundary(run)
        except Exception as exc:
            return exc
        return error

    def interrupt_now(self, run: GraphRun, cmd: SteeringCommand) -> None:
        """An IMMEDIATE cancel: stop that task (or every task) now, settle at the boundary.
        A task that already finished in the running step keeps its result: it is not
        recorded as stopped, so the command is lowered (and fails) like a late cancel."""
        target = cmd.target
        if isinstance(target, GraphTaskTarget):
            task_id = target.task_id
            holder = None if task_id in run.running else run.running_below(task_id)
            if holder is not None:  # a sub-graph's task: the top-level task running it
                task_id = holder.id
            if run.stop(task_id, by=command_ref(cmd)):
                self.cancelled[task_id] = cmd
        elif isinstance(target, GraphNodeTarget):
            for task in run.plan():
                if task.node == target.node and run.stop(task.id, by=command_ref(cmd)):
                    self.cancelled[task.id] = cmd
        else:
            run.stop_all()


@asynccontextmanager
async def holding(handle: RunHandle, status: RunStatus) -> AsyncIterator[None]:
    """The one pause shape: the run shows ``status`` while held, ``running`` after."""
    handle.info.status = status
    try:
        yield
    finally:
        handle.info.status = RunStatus.RUNNING


async def lower_all(
    steering: GraphSteering, run: GraphRun, cmds: list[SteeringCommand]
) -> list[SteeringCommand]:
    """Apply ``cmds`` in order; each ends applied or failed, or superseded by a cancel of its
    target applied while a pause held it (a run cancel ends the run). Returns the applied."""
    inbox = steering.handle.inbox
    pending, done = list(cmds), []
    while pending:
        cmd = pending.pop(0)
        try:
            if cmd.kind is SteeringKind.PAUSE and _run_level(cmd):
                said = steering.took_pause(cmd)
                inbox.applied(cmd, paused=True, step=run.head.step, **said)
                done.append(cmd)
                await wait_while_paused(steering, run, behind=pending)
                steering.held = True
                continue
            if cmd.kind is SteeringKind.RESUME and _run_level(cmd):
                # not paused: it still ends what it ends (a hold passed down), or is
                # superseded by a pause said after it
                if steering.took_resume(cmd) is not None:
                    done.append(cmd)
                continue
            earlier = await steering.recovery.find(run, cmd)
            if earlier is not None:  # re-delivered after a crash: its effect is saved
                inbox.applied(cmd, **earlier, applied_before_restart=True)
                done.append(cmd)
                steering.stirred = True
                continue
            affected = await lower(steering, run, cmd)
        except CannotApply as exc:
            inbox.failed(cmd, str(exc))
            continue
        except (RunCancelled, TaskCancelled) as exc:
            tasks = exc.affected if isinstance(exc, TaskCancelled) else {}
            inbox.applied(cmd, **tasks, run_id=steering.handle.run_id, step=run.head.step)
            _end_rest(steering, pending, cmd)
            raise
        except _Stopped as stop:  # cancelled while paused: that command reported itself
            _end_rest(steering, pending, stop.cancel)
            raise stop.error from None
        except TinyAgentsError as exc:  # bad update keys, unknown nodes: the command's fault
            inbox.failed(cmd, str(exc))
            continue
        inbox.applied(cmd, **affected)
        done.append(cmd)
        if cmd.kind is not SteeringKind.REQUEST_STATUS:  # a report moves nothing on
            steering.stirred = True
    return done


def _end_rest(
    steering: GraphSteering, cmds: list[SteeringCommand], cancel: SteeringCommand | None
) -> None:
    """The run ended before ``cmds``, delivered with the command that ended it: those that
    ``cancel`` supersedes (a run cancel: every non-cancel; a task's or node's: that task's or
    node's) end superseded, as they would have in the queue; the others fail."""
    inbox = steering.handle.inbox
    for cmd in cmds:
        if cancel is not None and supersedes(cancel, cmd):
            inbox.superseded(cmd, cancel.correlation_id)
        else:
            inbox.failed(cmd, "the graph run ended before this command")


def _supersede_behind(
    steering: GraphSteering, behind: list[SteeringCommand], cancel: SteeringCommand
) -> None:
    """A task's or node's ``cancel`` was applied while a pause held ``behind`` (delivered at
    the same boundary): it supersedes those aimed at its task or node, which are taken out."""
    kept = []
    for cmd in behind:
        if supersedes(cancel, cmd):
            steering.handle.inbox.superseded(cmd, cancel.correlation_id)
        else:
            kept.append(cmd)
    behind[:] = kept


def _run_level(cmd: SteeringCommand) -> bool:
    return not isinstance(cmd.target, (GraphTaskTarget, GraphNodeTarget))


async def lower(steering: GraphSteering, run: GraphRun, cmd: SteeringCommand) -> dict[str, Any]:
    if cmd.fork and cmd.checkpoint_id is not None:
        return await _on_fork(steering, run, cmd)
    kind = cmd.kind
    if kind in RESUME_KINDS:
        return await _resume(run, cmd)
    if kind is SteeringKind.REDIRECT:
        affected = await _redirect(run, cmd)
        steering.events.emit(
            "graph.goto",
            step=affected["step"],
            checkpoint_id=affected["checkpoint_id"],
            data={"goto": affected["goto"], "correlation_id": cmd.correlation_id},
        )
        return affected
    if kind is SteeringKind.UPDATE_STATE:
        affected = await _update(run, cmd)
        steering.events.emit(
            "graph.state_updated",
            step=run.head.step,
            checkpoint_id=affected["checkpoint_id"],
            data={"keys": affected["keys"], "correlation_id": cmd.correlation_id},
        )
        return affected
    if kind is SteeringKind.CANCEL:
        return await _cancel(steering, run, cmd)
    if kind is SteeringKind.REQUEST_STATUS:
        return _status(steering, run)
    where = cmd.target.describe()
    raise CannotApply(
        f"{kind.value} has no meaning for {where}: it reaches an agent node's child run only "
        "while that node runs (instructions, pause and resume alike)"
    )


# -- resume -----------------------------------------------------------------------------------


def names_task(interrupt: Interrupt, task_id: str) -> bool:
    """Whether ``interrupt`` belongs to task ``task_id``: its own, or one raised inside a
    sub-graph that task runs, at any level (a task id of the interrupt's namespace, or, as a
    ``compile(checkpointer=True)`` sub-graph's namespace has none, one of the tasks it
    passed through on its way up, ``Interrupt.enclosing``)."""
    return interrupt.names_task(task_id)


#: A pending interrupt of the paused step with the top-level task that holds it (its node,
#: its id): the task a sub-graph's question pauses, whatever the namespace says. (A plain
#: tuple: made for every pending question at each answer's submit and landing.)
Pending = tuple[str, str, Interrupt]


def answers(cmd: SteeringCommand, interrupt: Interrupt, owner_node: str, owner_task: str) -> bool:
    """The one resume matcher: whether ``cmd`` (an approve, reject or provide_context) may
    answer ``interrupt``, paused in task ``owner_task`` of node ``owner_node`` (top-level)."""
    target = cmd.target
    if isinstance(target, GraphTaskTarget):
        return owner_task == target.task_id or names_task(interrupt, target.task_id)
    if isinstance(target, GraphNodeTarget):
        return target.node in (owner_node, interrupt.node)
    return True  # the whole run: any pending interrupt (disambiguated by interrupt_id)


#: How an answer sent to a thread is used (said when it found nothing to answer).
_THREAD_ANSWER = (
    ": an answer sent to a thread with no live run waits for the run that resumes it, "
    "graph.run(None, thread_id=...) or rt.start_graph(graph, None, thread_id=...); a run "
    "started with its own Command(resume=...) answers the interrupt itself, and one started "
    "with new input leaves it behind"
)


def _answered(cmd: SteeringCommand, pending: list[Pending]) -> list[Interrupt]:
    """The pending interrupts ``cmd`` answers."""
    found = [i for node, task, i in pending if answers(cmd, i, node, task)]
    wanted = cmd.payload.get("interrupt_id")
    return found if wanted is None else [i for i in found if i.id == wanted]


def ambiguous(cmd: SteeringCommand, candidates: list[Interrupt]) -> str | None:
    """Why an answer that names no ``interrupt_id`` answers none of ``candidates`` (the
    pending interrupts its target asks, several), or None. Which one it meant is not for the
    run to guess (docs/graph.md: with several, name one)."""
    if len(candidates) < 2:
        return None
    ids = ", ".join(f"{i.id} (node {i.node!r})" for i in candidates)
    return (
        f"{cmd.target.describe()} has {len(candidates)} pending interrupts ({ids}); "
        "name one with payload interrupt_id"
    )


def unasked_interrupt(cmd: SteeringCommand, pending: list[Pending]) -> str | None:
    """Why an answer naming an ``interrupt_id`` does not answer ``pending`` (the run's pending
    interrupts), or None: its target asks, but not that question. A target that asks
    nothing yet may still ask it."""
    wanted = cmd.payload.get("interrupt_id")
    if wanted is None:
        return None
    there = [i.id for node, task, i in pending if answers(cmd, i, node, task)]
    if not there or wanted in there:
        return None
    return (
        f"{cmd.target.describe()} has no pending interrupt {wanted!r} to {cmd.kind.value} "
        f"(pending: {', '.join(there)})"
    )


def unanswerable_at_rest(
    cmd: SteeringCommand, pending: list[Pending], *, waiting: bool = False
) -> str | None:
    """Why answer ``cmd`` can never apply to a run resting on ``pending`` (its pending
    interrupts), or None. At rest nothing runs and nothing new is asked before a command
    moves the run on, and every delivery class is due there: so a command lands before any
    new question, and a target that asks nothing now, or not the question the command names,
    never answers it (refused at submit rather than accepted to fail when it lands). Nor does
    one naming no ``interrupt_id`` whose target asks several questions, unless commands
    already ``waiting`` for the run may answer (or drop) some before it lands. Nothing
    pending (a run stopped at a breakpoint): not judged."""
    unasked = unasked_interrupt(cmd, pending)
    if unasked is not None or not pending:
        return unasked
    asks = [i for node, task, i in pending if answers(cmd, i, node, task)]
    if asks:  # (an interrupt_id it names is among them: unasked_interrupt)
        wanted = cmd.payload.get("interrupt_id")
        return None if waiting or wanted is not None else ambiguous(cmd, asks)
    asked = ", ".join(f"{i.id} (node {node!r})" for node, _, i in pending)
    return (
        f"{cmd.target.describe()} has no pending interrupt to {cmd.kind.value}: the run waits "
        f"on {asked}; answer one of those (send the answer to its task or node, or name it "
        "with payload interrupt_id)"
    )


def pending_interrupts(run: GraphRun) -> list[Pending]:
    """Every unanswered interrupt of the paused step, with its top-level task."""
    out = []
    for task in run.plan():
        if task.writes is None:
            out += [(task.node, task.id, i) for i in task.interrupts if i.id not in task.resume]
    return out


def owning_task(run: GraphRun, task_id: str) -> Task | None:
    """The top-level task of the current step that is ``task_id``, or that runs the
    sub-graph asking a pending interrupt of ``task_id``; None for neither."""
    for task in run.plan():
        if task.id == task_id or any(names_task(i, task_id) for i in task.interrupts):
            return task
    return None


def node_of_task(run: GraphRun, task_id: str) -> str | None:
    """The (top-level) node of a task of the current step, or of a pending interrupt."""
    task = owning_task(run, task_id)
    return None if task is None else task.node


def node_of_answered_task(run: GraphRun, task_id: str, kind: SteeringKind) -> str | None:
    """``node_of_task``, and for what reaches a sub-graph's running task (``NESTED_KINDS``)
    also the top-level node of a task a sub-graph runs in the running step, at any level
    (``GraphRun.running_below``): an answer lands on its question, if it asks one, pending at
    the step's end; a cancel stops the top-level task; an instruction goes to its agent run."""
    node = node_of_task(run, task_id)
    if node is None and kind in NESTED_KINDS:
        holder = run.running_below(task_id)
        node = None if holder is None else holder.node
    return node


def nested_spec(run: GraphRun, task_id: str) -> NodeSpec | None:
    """The node spec of task ``task_id`` when it is a sub-graph's, running in this step (and
    no top-level task's), else None."""
    if node_of_task(run, task_id) is not None:
        return None
    task = run.nested_task(task_id)
    return None if task is None else task.spec


def nested_unreachable(run: GraphRun, cmd: SteeringCommand) -> str | None:
    """Why ``cmd`` cannot reach the sub-graph's running task it names, or None: a redirect
    or an update acts on the top-level graph, not on the sub-graph the task runs in."""
    target = cmd.target
    if not isinstance(target, GraphTaskTarget) or cmd.kind in NESTED_KINDS:
        return None
    holder = run.running_below(target.task_id)
    if holder is None or node_of_task(run, target.task_id) is not None:
        return None
    return (
        f"{cmd.kind.value} cannot reach task {target.task_id}: it is a task of a sub-graph "
        f"(run by task {holder.id} of node {holder.node!r}), and {cmd.kind.value} acts on the "
        "top-level graph's state and next nodes, not the sub-graph's; send it to the run or "
        f"to node {holder.node!r} (or answer, cancel or instruct the task itself)"
    )


def resume_value(cmd: SteeringCommand) -> Any:
    """What the answered ``interrupt()`` returns to its node: the node's to change, so a
    mutable copy (a command's payload is read-only)."""
    payload = cmd.payload
    if cmd.kind is SteeringKind.PROVIDE_CONTEXT:
        return mutable_copy(payload["value"] if "value" in payload else payload.get("text"))
    answer: dict[str, Any] = {"approved": cmd.kind is SteeringKind.APPROVE}
    for key in ("value", "reason"):
        if key in payload:
            answer[key] = mutable_copy(payload[key])
    return answer


async def _resume(run: GraphRun, cmd: SteeringCommand) -> dict[str, Any]:
    pending = pending_interrupts(run)
    candidates = _answered(cmd, pending)
    if not candidates:
        unasked = unasked_interrupt(cmd, pending)
        if unasked is not None:
            raise CannotApply(unasked)
        reason = f"{cmd.target.describe()} has no pending interrupt to {cmd.kind.value}"
        if isinstance(cmd.target, ThreadTarget):
            reason += _THREAD_ANSWER
        raise CannotApply(reason)
    several = ambiguous(cmd, candidates)
    if several is not None:
        raise CannotApply(several)
    [chosen] = candidates
    answer = resume_value(cmd)
    if chosen.check is not None:
        # the question's response_schema (known while the process that asked holds it):
        # an answer it refuses is not recorded, and the question waits for another
        try:
            chosen.check.check(answer, chosen.id)
        except ValidationError as exc:
            problems = problems_line(((e["loc"], e["msg"]) for e in exc.errors()), "the answer")
            raise CannotApply(
                f"the answer does not match the response_schema of interrupt {chosen.id} "
                f"(node {chosen.node!r}): {problems}; nothing was recorded, the question "
                "still waits"
            ) from None
    writes = run.graph.map_resume(run.head, {chosen.id: answer})
    await record_resume(run.checkpointer, run.head, writes, steered_by=command_ref(cmd))
    return {
        "task_id": chosen.task_id,
        "node": chosen.node,
        "interrupt_id": chosen.id,
        "checkpoint_id": run.head.checkpoint_id,
    }


# -- goto, update, cancel ---------------------------------------------------------------------


def _goto(graph: GraphCore, cmd: SteeringCommand) -> list[str]:
    problem = goto_problem(graph, cmd.payload.get("goto"))
    if problem is not None:
        raise CannotApply(problem)
    goto = cmd.payload["goto"]
    return [goto] if isinstance(goto, str) else list(goto)


async def _redirect(run: GraphRun, cmd: SteeringCommand) -> dict[str, Any]:
    targets = _goto(run.graph, cmd)
    head = run.head
    kept = {key for rec in head.records.values() for key, _ in rec.writes or ()}
    staged = head.staged(kept)
    try:
        delta = jump(run.graph, staged, list(targets))
    except Exception as exc:  # the kept writes of the step a reducer now refuses
        raise CannotApply(f"redirect was not applied: {type(exc).__name__}: {exc}") from exc
    meta = {"goto": targets, **steered_by(cmd)}
    if run.checkpointer is not None:
        await save(run.checkpointer, staged, delta=delta, source="steering", metadata=meta)
    run.adopt(staged)
    return {"goto": targets, "checkpoint_id": head.checkpoint_id, "step": head.step}


async def _update(run: GraphRun, cmd: SteeringCommand) -> dict[str, Any]:
    # The values join the graph's state, which nodes may change: a copy (the payload is
    # read-only, and must not share lists with the state anyway).
    update: dict[str, Any] = mutable_copy(cmd.payload["update"])
    as_node = cmd.payload.get("as_node")
    # bad keys, values, reducer or router errors: InvalidUpdateError, the command's fault
    staged = await update_state(
        run.checkpointer, run.graph, run.head, update, as_node, steered_by=steered_by(cmd)
    )
    run.adopt(staged)
    return {"checkpoint_id": run.head.checkpoint_id, "keys": sorted(update)}


async def _cancel(steering: GraphSteering, run: GraphRun, cmd: SteeringCommand) -> dict[str, Any]:
    target = cmd.target
    # an immediate cancel already stopped the tasks it names while they ran (for a task of
    # a sub-graph: the top-level task running it, ``GraphSteering.interrupt_now``)
    cid = cmd.correlation_id
    stopped = [t for t, c in steering.cancelled.items() if c.correlation_id == cid]
    if isinstance(target, GraphTaskTarget):
        # a task inside a sub-graph (the id its graph.interrupt event gives) is cancelled by
        # cancelling the top-level task that runs the sub-graph
        owner = owning_task(run, target.task_id)
        task_ids = stopped[:1] or [target.task_id if owner is None else owner.id]
    elif isinstance(target, GraphNodeTarget):
        # otherwise a node's cancel takes the node's tasks of the superstep this boundary
        # precedes (paused ones included)
        task_ids = stopped or [t.id for t in run.plan() if t.node == target.node]
    else:
        raise RunCancelled(
            run.run_id or "?",
            cmd.payload.get("reason") or "cancelled by steering",
            by=cmd.actor.describe(),  # who, as an agent run's end says it (``detail.by``)
        )
    policy = run.graph.task_cancel_policy
    cancelled: dict[str, str] = {}  # task id -> node
    was_running = before_restart = False
    tasks: list[Any] | None = None
    for task_id in task_ids:
        node = run.stopped.pop(task_id, None)
        if steering.cancelled.pop(task_id, None) is not None:  # stopped while it ran
            was_running = True
            cancelled[task_id] = node or "?"
            continue
        tasks = tasks if tasks is not None else run.plan()
        task = next((t for t in tasks if t.id == task_id), None)
        if task is not None and task.writes is None:
            await run.skip(task, by=command_ref(cmd))
            cancelled[task_id] = task.node
        elif task is not None and task.skipped and task.skipped_by == command_ref(cmd):
            # skipped by this very cancel in a process killed before it reported it applied
            # (a cancel is no kind EarlierApplied finds: its effect is the task's skip record,
            # which names it; a skip by another cancel is "already finished", as before)
            cancelled[task_id] = task.node
            before_restart = True
    if tasks is not None:
        run.keep_records(tasks)
    if not cancelled:
        raise CannotApply(f"{target.describe()} already finished; nothing to cancel")
    extra = {"applied_before_restart": True} if before_restart else {}
    affected: dict[str, Any]
    if isinstance(target, GraphTaskTarget):
        [(task_id, node)] = cancelled.items()
        affected = {"task_id": task_id, "node": node}
        if task_id != target.task_id:  # the top-level task running the sub-graph's task
            affected["sub_graph_task_id"] = target.task_id
    else:
        affected = {"node": target.node, "task_ids": list(cancelled)}
    affected.update(policy=policy, was_running=was_running, **extra)
    if policy == "fail_run":
        names = ", ".join(f"{tid} ({node!r})" for tid, node in cancelled.items())
        raise TaskCancelled(
            f"task {names} was cancelled by steering and the graph's task_cancel_policy is "
            "'fail_run'",
            affected,
        )
    return affected


# -- run-level control ------------------------------------------------------------------------


class _Stopped(Exception):
    """The run was stopped while paused, by ``error``; ``cancel``: the cancel that did it (a
    run's, or a task's or node's under ``fail_run``)."""

    def __init__(self, error: BaseException, cancel: SteeringCommand | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.cancel = cancel


async def wait_while_paused(
    steering: GraphSteering, run: GraphRun, *, behind: list[SteeringCommand]
) -> None:
    """Hold the run at this boundary until a resume that lets go of it (or a run cancel)
    arrives. ``behind``: the commands delivered with the pause, applied after it — but the
    run's pauses and resumes among them first, as if sent while it waits (a resume delivered
    with its pause ends the wait); a cancel applied meanwhile takes out (supersedes) those
    aimed at what it cancelled."""
    handle, inbox = steering.handle, steering.handle.inbox
    taken = [c for c in behind if c.kind in _PAUSE_KINDS and _run_level(c)]
    for ctl in taken:
        behind.remove(ctl)
    inbox.paused = True
    try:
        async with holding(handle, RunStatus.PAUSED):
            while inbox.paused:
                if not taken:
                    await inbox.wait()
                    taken = inbox.take(Boundary.WHILE_PAUSED)
                for pos, ctl in enumerate(taken):
                    stop: BaseException | None = None
                    cancel: SteeringCommand | None = None
                    if ctl.kind is SteeringKind.RESUME:
                        if steering.took_resume(ctl):
                            inbox.paused = False
                    elif ctl.kind is SteeringKind.PAUSE and _run_level(ctl):
                        # paused already: it holds the run too (its own, or a run above's)
                        said = steering.took_pause(ctl)
                        inbox.paused = True
                        inbox.applied(ctl, paused=True, step=run.head.step, **said)
                    elif ctl.kind is SteeringKind.CANCEL and _run_level(ctl):
                        inbox.applied(ctl, run_id=handle.run_id)
                        stop = RunCancelled(
                            handle.run_id,
                            ctl.payload.get("reason") or "cancelled while paused",
                            by=ctl.actor.describe(),
                        )
                        cancel = ctl
                    else:
                        try:
                            applied = await lower_all(steering, run, [ctl])
                        except (RunCancelled, TaskCancelled) as exc:
                            stop, cancel = exc, ctl
                        else:
                            if applied and ctl.kind is SteeringKind.CANCEL:
                                _supersede_behind(steering, behind, ctl)
                    if stop is not None:
                        _end_rest(steering, taken[pos + 1 :], cancel)
                        raise _Stopped(stop, cancel)
                taken = []
    finally:
        inbox.paused = False


def _status(steering: GraphSteering, run: GraphRun) -> dict[str, Any]:
    status = steering.handle.status
    if steering.woken and not steering.stirred:  # waiting on its interrupts still
        status = RunStatus.INTERRUPTED
    return {
        "status": status.value,
        "step": run.head.step,
        "checkpoint_id": run.head.checkpoint_id,
        "next": [p.node for p in run.head.frontier],
        "interrupts": [i.id for _, _, i in pending_interrupts(run)],
    }


# -- fork -------------------------------------------------------------------------------------


def fork_thread_id(thread_id: str, cmd: SteeringCommand) -> str:
    """The thread a command with ``fork=True`` forks ``thread_id`` into: named after the
    command (``<thread>~<correlation id>``), plus a tag of the sender's scope for a human's
    (two senders' commands under one id are two commands, and two forks)."""
    fork = f"{thread_id}~{cmd.correlation_id}"
    scope = dedupe_scope(cmd.actor)
    if scope:
        fork += "~" + hashlib.sha256(scope.encode()).hexdigest()[:8]
    return fork


def fork_id_problem(fork: str) -> str | None:
    """Why ``fork`` (``fork_thread_id``'s) cannot name a thread, or None: the id rule's bound."""
    if len(fork) <= MAX_ID_LENGTH:
        return None
    return (
        "cannot fork: the fork's thread id, <thread_id>~<correlation_id> (and, for a human "
        "sender, ~<8 hex digits> of their scope), would be "
        f"{len(fork)} characters, and a thread id is at most {MAX_ID_LENGTH}; send it with a "
        "shorter correlation_id, or fork the thread with graph.fork(..., new_thread_id=...) "
        "and send the command to a run there"
    )


async def _on_fork(steering: GraphSteering, run: GraphRun, cmd: SteeringCommand) -> dict[str, Any]:
    """Apply a command made against an older checkpoint on a fork of the thread there.

    The fork's thread is named after the command (``<thread>~<correlation id>``, plus a tag of
    the sender's scope for a human's: two senders' commands under one id are two commands, and
    two forks): a command handed over again after a crash finds the fork an earlier process
    made, and continues it (or reports it, if it ran to its end) instead of forking a second
    time. A command that fails on the fork it just made deletes that fork.
    """
    graph, checkpointer = run.graph, run.checkpointer
    assert cmd.checkpoint_id is not None
    assert checkpointer is not None  # GraphCommandCheck refuses a fork of a run saving nothing
    fork = fork_thread_id(run.head.thread_id, cmd)
    problem = fork_id_problem(fork)
    if problem is not None:  # GraphCommandCheck refuses it at submit; a thread known only now
        raise CannotApply(problem)
    affected: dict[str, Any] = {"fork_thread_id": fork, "forked_at": cmd.checkpoint_id}
    made = await checkpointer.latest(fork)
    if made is None:
        await threads.fork(graph, run.head.thread_id, cmd.checkpoint_id, new_thread_id=fork)
        try:
            first = await _first_on_fork(graph, fork, cmd)
            handle = await steering.start_fork(first, fork)
        except Exception as exc:
            # the command fails, and the fork made for it goes with it: no thread is left
            # that nobody asked for (a crash before this leaves it to the command handed
            # over again, which continues it)
            await _delete_fork(checkpointer, fork, exc)
            raise
        return {**affected, "fork_run_id": handle.run_id}
    # forked by a process that died before it reported the command applied
    affected["applied_before_restart"] = True
    snapshot = await threads.get_state(graph, fork)
    if not snapshot.next and not snapshot.interrupts:  # and its run got to the end
        return {**affected, "fork_run_id": made.metadata.get("run_id")}
    untouched = made.source == "fork"  # nothing was done on it yet (an answer, at most)
    first = await _first_on_fork(graph, fork, cmd, again=True) if untouched else None
    handle = await steering.start_fork(first, fork)
    return {**affected, "fork_run_id": handle.run_id}


async def _delete_fork(checkpointer: Checkpointer, fork: str, error: Exception) -> None:
    """Delete the fork a command that failed with ``error`` made. The command's own error is
    what its sender is told: a fork that cannot be deleted (``ThreadBusy``, another process
    took it meanwhile to continue the command handed over again; a store failure) is logged
    and noted on ``error``, never raised over it."""
    try:
        await checkpointer.delete_thread(fork)
    except Exception as cleanup:
        said = f"fork {fork!r} was left: {type(cleanup).__name__}: {cleanup}"
        error.add_note(said)
        _log.warning("a command failed on its fork, and its %s", said)


async def _first_on_fork(
    graph: GraphCore, fork: str, cmd: SteeringCommand, *, again: bool = False
) -> Any:
    """What the fork's run starts with to apply ``cmd`` (an update is applied here). With
    ``again`` (a fork made before a crash) an interrupt answered already is not answered twice."""
    kind = cmd.kind
    if kind in RESUME_KINDS:
        snapshot = await threads.get_state(graph, fork)
        # each question with the top-level task holding it, as the live run matches it
        # (``pending_interrupts``): the node of that task answers a sub-graph's question too
        holder = {i.id: (t.name, t.id) for t in snapshot.tasks for i in t.interrupts}
        pending: list[Pending] = [
            (*holder.get(i.id, (i.node, i.task_id)), i) for i in snapshot.interrupts
        ]
        candidates = _answered(cmd, pending)
        if again and not candidates:
            return None  # its answer was written before the crash: the run picks it up
        if len(candidates) != 1:
            raise CannotApply(
                f"checkpoint {cmd.checkpoint_id} has {len(candidates)} matching interrupts; "
                "name one with payload interrupt_id"
            )
        return Command(resume={candidates[0].id: resume_value(cmd)})
    if kind is SteeringKind.REDIRECT:
        return Command(goto=_goto(graph, cmd))
    if kind is SteeringKind.UPDATE_STATE:
        await threads.update_state(
            graph, fork, mutable_copy(cmd.payload["update"]), as_node=cmd.payload.get("as_node")
        )
        return None
    raise CannotApply(f"{kind.value} cannot be applied on a fork")
