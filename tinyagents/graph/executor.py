"""The superstep loop.

One superstep: plan the frontier into tasks → run the runnable ones concurrently (inline
when there is just one) → if all finished, apply their writes through the reducers in task
order, route to the next frontier and save one checkpoint holding only that step's writes.
A task that pauses on ``interrupt()`` leaves the step unfinished; the writes of its
finished siblings are saved as pending writes so they never run again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tinyagents import _clock
from tinyagents._record import Record
from tinyagents.errors import (
    GraphError,
    GraphRecursionError,
    InvalidUpdateError,
    RunCancelled,
    StepTimeoutError,
    StoreError,
)
from tinyagents.graph._context import (
    CalledCommand,
    NodeInterrupt,
    ParentCommand,
    Progress,
    UnsavedScope,
    enclosing_scope,
    progress_here,
    reset_scope,
    set_scope,
    user_failure,
)
from tinyagents.graph.agent_node import run_agent_node
from tinyagents.graph.checkpointing import (
    Head,
    Planned,
    TaskRecords,
    check_values,
    error_write,
    first_values,
    handler_failure_write,
    interrupt_write,
    load_head,
    new_frontier_id,
    result_write,
    save,
    withdrawal_write,
)
from tinyagents.graph.context import NodeContext
from tinyagents.graph.core import breakpoint_nodes, router_context
from tinyagents.graph.debug import input_checkpoint
from tinyagents.graph.interrupts import Interrupt, invalid_resume_of
from tinyagents.graph.longterm import current_store, with_store
from tinyagents.graph.parallel import StepTasks
from tinyagents.graph.reducers import MISSING, detach
from tinyagents.graph.state import ROOT, StateSchema, StateView, managed_values
from tinyagents.graph.tasks import (
    Task,
    Writes,
    call_node,
    called_output,
    plan_tasks,
    read_output,
    settle,
    started,
    stray_cancel,
)
from tinyagents.graph.types import UNSET, Command, GraphResult, GraphStatus, NodeError

if TYPE_CHECKING:
    from tinyagents.graph.caching import CachedNode
    from tinyagents.graph.core import GraphCore, NodeSpec
    from tinyagents.runs.handle import RunHandle
    from tinyagents.runs.host import RunHost
    from tinyagents.store.checkpoint.base import Checkpointer, WriteRecord

_log = logging.getLogger("tinyagents.graph")


class TaskHooks(Protocol):
    """What a runtime-managed run does around each task, inside a step: the task's entry in
    the run tree (``graph/task_entries.py``). ``None`` for a plain ``graph.run``. Steering and
    events happen between steps, in the loop that drives ``next`` (``graph/managed.py``)."""

    async def task_started(self, run: GraphRun, task: Task) -> None: ...

    async def task_finished(
        self, run: GraphRun, task: Task, error: BaseException | None
    ) -> None: ...

    def parent_for(self, task: Task) -> str | None: ...

    def agent_started(self, task: Task, handle: RunHandle) -> None: ...

    def nested_agent_started(self, holder: Task, task: Task, handle: RunHandle) -> None: ...

    async def steered(self, run: GraphRun) -> None: ...


class StreamSink(Protocol):
    """Where a streamed run reports (``graph/stream.py``): its steps, its tasks as they start
    and finish, and what its nodes emit (``NodeContext.emit``). ``live``: it wants items
    while a node runs (task starts and ends, custom values), so every task reports them;
    otherwise a plain node's step may skip those hooks (it reports ``wrote`` only)."""

    live: bool
    #: it shows the checkpoints the run saves (the ``checkpoints`` and ``debug`` modes)
    checkpoints: bool

    def step(self, run: GraphRun, step: Step) -> None: ...

    def task_started(self, run: GraphRun, task: Task) -> None: ...

    def task_finished(self, run: GraphRun, task: Task, error: BaseException | None) -> None: ...

    def wrote(self, run: GraphRun, task: Task) -> None:
        """``task``'s node returned (its writes are known, and about to be saved) or paused
        on an interrupt (``task.interrupts``)."""

    def cached(self, run: GraphRun, task: Task) -> None:
        """A task of a step that goes on (after a pause or a failure) that had finished
        before: it does not run again, and its result is shown again (LangGraph's cached
        writes)."""

    def custom(self, run: GraphRun, task_id: str, value: Any) -> None: ...

    def subgraph_started(self, run: GraphRun) -> None: ...

    def opened(self, run: GraphRun, head: Head) -> None:
        """The checkpoint of the input ``run`` took (``head``), saved before its first step's
        (``checkpoints``): a sub-graph run's, before ``subgraph_started``."""


StepKind = Literal["started", "applied", "completed", "interrupted", "failed"]


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class Step(Record):
    """What one call of ``GraphRun.next()`` (one item of ``supersteps()``) says happened.

    ``started``: ``tasks`` are about to run. ``applied``: they ran and their writes went
    through the reducers (``run.head`` is the new step, saved when there is a checkpointer).
    The last item is ``completed``, ``interrupted`` or ``failed`` and carries ``result``
    (and, when failed, the node's ``error``; ``tasks`` are the ones that ran in that step).
    """

    kind: StepKind
    tasks: list[Task] = field(default_factory=list)
    result: GraphResult | None = None
    error: BaseException | None = None


class _TaskFailed(Exception):
    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(str(error))
        self.index = index
        self.error = error


#: The supersteps beyond ``recursion_limit`` a run that continues a thread may take: LangGraph
#: counts a new input as a step of its own and checks the limit one step late, so its first
#: node sees ``remaining_steps == recursion_limit - 1`` after an input and
#: ``recursion_limit + 1`` on a continued thread.
CONTINUED_RUN_EXTRA_STEPS = 2


class GraphRun:
    """One invocation of a compiled graph on one thread namespace."""

    #: at most this many tasks of a step run at once (``None``: all of them); its sub-graphs'
    #: runs have the same limit, each for its own steps, as in LangGraph
    max_concurrency: int | None = None
    #: the graph's ``step_timeout`` as this run began (a sub-graph's run: its own graph's)
    step_timeout: float | None = None
    #: a replay or fork of the thread this run is (``Replay``): a persistent sub-graph's
    #: first call in it goes on from the state it had then
    replay: Replay | None = None
    #: (step's frontier id, persistent namespace -> the task of that step that runs it)
    _claims: tuple[str, dict[str, str]] | None = None
    #: the ``compile(checkpointer=False)`` sub-graph (as ``_what`` names it) that makes this
    #: run, under a checkpointed parent, save nothing: an ``interrupt()`` in it says so
    unsaved_by: str | None = None
    #: a sub-graph's run: the top-level run it runs in, and that run's task running it
    #: (set by ``child_run`` only)
    _top: tuple[GraphRun, Task] | None = None
    #: the top-level run's: the id of each task its sub-graphs' runs started in the running
    #: step, at any level -> (its top-level task, that task itself) (``running_below``,
    #: ``nested_task``); None between steps
    _below: dict[str, tuple[Task, Task]] | None = None
    #: the run's context (``run(..., context=)``, LangGraph's ``Runtime.context``; a
    #: sub-graph's run has its parent's, ``child_run``): ``GraphRuntime.context`` of its
    #: nodes. Never saved. (Set only when given, as ``max_concurrency``.)
    context: Any = None
    #: a sub-graph's (or a ``@task``'s) run called inside a node attempt with an idle
    #: timeout: that attempt's clock (``child_run``), which the run's start, each of its
    #: steps' end (``outcome``) and each task's end in a step of several (``run_tasks``), and
    #: what its nodes stream, their heartbeats and ``@task`` calls move on, as LangGraph's
    #: callbacks of a sub-graph's nodes refresh its caller. (Set only when there is one.)
    progress: Progress | None = None

    def __init__(
        self,
        graph: GraphCore,
        head: Head,
        *,
        checkpointer: Checkpointer | None,
        recursion_limit: int,
        owner: str | None = None,
        parent: GraphRun | None = None,
        nested: bool = False,
        inherited_resume: dict[str, Any] | None = None,
        runtime: RunHost | None = None,
        run_id: str | None = None,
        interrupt_before: Collection[str] | str = (),
        interrupt_after: Collection[str] | str = (),
        max_concurrency: int | None = None,
    ) -> None:
        #: static breakpoints: the graph's, and this run's own
        self.interrupt_before = graph.interrupt_before
        if interrupt_before:
            added = breakpoint_nodes(interrupt_before, graph.nodes)
            self.interrupt_before = self.interrupt_before.union(added)
        self.interrupt_after = graph.interrupt_after
        if interrupt_after:
            added = breakpoint_nodes(interrupt_after, graph.nodes)
            self.interrupt_after = self.interrupt_after.union(added)
        if (self.interrupt_before or self.interrupt_after) and checkpointer is None:
            raise GraphError(
                f"graph {graph.name!r}: interrupt_before/interrupt_after need a checkpointer "
                "to continue from: compile(checkpointer=...)"
            )
        self.graph = graph
        self.head = head
        self.checkpointer = checkpointer
        self.recursion_limit = recursion_limit
        # (set only when given: the class's None otherwise, so a run's instance dict stays
        # small enough for CPython's shared-key, inline-values layout, which every attribute
        # read of the step loop is faster with; measured in benchmarks/graph.py's chain)
        if max_concurrency is not None:
            self.max_concurrency = max_concurrency
        step_timeout = graph.step_timeout
        if step_timeout is not None:
            self.step_timeout = step_timeout
        self.owner = owner
        self.parent = parent
        #: a sub-graph's run (a node or a call inside a node): Command.PARENT goes upwards
        self.nested = nested or parent is not None
        self.inherited_resume = inherited_resume or {}
        self.runtime = runtime
        self.run_id = run_id
        self.steps = 0
        self._view: Any = None
        #: tasks ``next`` planned and announced (``started=True``) but has not run yet
        self._planned: list[Task] | None = None
        #: tasks of the step ``next`` applied last: a breakpoint after them stops the run
        self._applied: list[Task] | None = None
        #: run-tree entries of its tasks (runtime-managed runs only)
        self.task_hooks: TaskHooks | None = None
        #: asyncio tasks of the running step, by task id (so one can be cancelled alone)
        self.running: dict[str, asyncio.Task[None]] = {}
        self._step_tasks: StepTasks | None = None  # the running step's (``run_tasks``)
        #: cache entries the tasks of step ``_cached_step`` stored (``_call_cached``): no hit
        #: for a peer of that step, which LangGraph looks up before any of them runs
        self._cached_by_step: set[tuple[Any, str]] = set()
        self._cached_step = 0
        #: tasks whose asyncio task was left behind, its cancellation unfinished: what it
        #: does if it ever ends changes nothing (``_attempt``); kept until it ends
        self._left_behind: set[Task] = set()
        #: what the last step left behind, for a cancel that ends the run to name it
        self.left_behind_notes: list[str] = []
        #: tasks of the running step that ``stop`` cancelled; emptied when the step's tasks end
        self._stopping: dict[str, str | None] = {}  # task id -> the stopping cancel's ref
        #: tasks whose end the stream has had (as the node returned or paused)
        self._ended: set[str] = set()
        #: stopped tasks that ended skipped: task id -> node (a steering cancel reads them out)
        self.stopped: dict[str, str] = {}
        #: ``stop_all`` was called: the step it interrupts ends the run with ``RunCancelled``
        self.cancelling = False
        #: where a streamed run reports (``graph.stream``); sub-graph runs share their parent's
        self.stream: StreamSink | None = parent.stream if parent is not None else None
        #: the keys the input this run started from wrote (None: it continues a thread), so
        #: a stream shows that input's values only if it wrote something, as LangGraph's
        self.input_written: frozenset[str] | None = None
        #: the run continues its thread's checkpoint (``None`` or a ``Command``, no new
        #: input): the first step it plans passes ``interrupt_before``, as LangGraph's
        #: resuming run (which marks every channel seen, so ``should_interrupt`` finds no
        #: change), wherever the thread stopped; cleared once that step is planned
        self.continues = False
        #: the store failed to read or write the thread before the first step (loading it,
        #: saving the input): ``next`` reports it as the run's failure, as a failed save of
        #: a step is reported, and runs nothing
        self.failure: StoreError | None = None

    # -- the loop --------------------------------------------------------------------------

    async def execute(self) -> GraphResult:
        """Run supersteps until the frontier is empty or every unfinished task is paused; a
        failing node's error is raised (what a sub-graph's run does in its parent task)."""
        result = await self.outcome()
        if result.error is not None:
            raise result.error
        return result

    async def outcome(self) -> GraphResult:
        """``execute``, with a failing node reported as ``status="failed"`` and ``.error`` set
        (what a top-level run returns)."""
        # without a checkpointer every node shares one scope that refuses interrupt()
        # (``unsaved_scope()``, one frame less per run)
        token = (
            set_scope(UnsavedScope(self.unsaved_by, self)) if self.checkpointer is None else None
        )
        stream = self.stream
        # (``nested``, an instance attribute, read first: the class's ``progress`` is a slow
        # lookup, and a top-level run never has one)
        clock = self.progress if self.nested else None
        try:
            while True:
                step = await self.advance()
                if clock is not None:  # a step ended, the next begins: the caller's progress
                    clock.moved()
                if stream is not None:
                    stream.step(self, step)
                result = step.result
                if result is not None:
                    return result
        except Exception as exc:  # not a node's: planning
            result = self.result("failed")
            result.error = exc
            return result
        finally:
            if token is not None:
                reset_scope(token)

    def unsaved_scope(self) -> UnsavedScope:
        """The scope every node of this run shares when it saves nothing, which whatever
        drives such a run sets around its steps: it refuses ``interrupt()`` and, knowing the
        run, makes a ``@task`` that a node on the fast path calls the run's
        (``UnsavedScope.promote``), as a node's own scope does, and lets ``get_runtime()``
        in such a node read the run's context and store. (Not kept on the run: that
        would make each run a reference cycle, left to the cyclic collector.)"""
        return UnsavedScope(self.unsaved_by, self)

    async def next(self, *, started: bool = False) -> Step:
        """``advance``, its final item's ``result.state`` shown as the graph shows it
        (``shown_state``: an entrypoint's, its function's return value), as ``run`` returns
        it: the step of ``graph.iter``'s run and its ``supersteps()``."""
        step = await self.advance(started=started)
        result = step.result
        if result is not None:
            shown = self.graph.shown_state(result.state)
            if shown is not result.state:
                step.result = replace(result, state=shown)
        return step

    async def advance(self, *, started: bool = False) -> Step:
        """Run the next superstep: its ``"applied"`` item (its tasks ran and their writes
        went through the reducers; ``head`` is the new step, saved with a checkpointer), or
        the run's final item, which carries its ``GraphResult``: ``"completed"``,
        ``"interrupted"`` (every unfinished task waits on ``interrupt()``, or a breakpoint)
        or ``"failed"`` (``.error``: a node's error; nothing is raised). ``started=True``
        returns a ``"started"`` item first (the tasks about to run), and the next call runs
        them. Between two calls the driver may change the run through its public methods;
        after a final item the next call goes on from there (from the paused step, once its
        interrupts got answers: ``record_resume``). Drive it inside the interrupt scope
        ``outcome`` sets when the graph has no checkpointer."""
        if self.failure is not None:
            unsaved, self.failure = self.failure, None
            result = self.result("failed")
            result.error = unsaved
            return Step(kind="failed", result=result, error=unsaved)
        applied, self._applied = self._applied, None
        if applied is not None and self.interrupt_after and self.breaks_after(applied):
            return Step(kind="interrupted", result=self.result("interrupted"))
        tasks, self._planned = self._planned, None
        if tasks is None:
            # (the budget is at least the limit: most steps read no property)
            if self.steps >= self.recursion_limit and self.steps >= self.step_budget:
                # LangGraph's count: the limit is checked before the next step is planned, so
                # a run whose last allowed step finished the graph fails all the same
                exc = GraphRecursionError(
                    f"Recursion limit of {self.recursion_limit} reached without hitting a "
                    f"stop condition: {self._what()} ran {self.steps} supersteps; "
                    "raise recursion_limit or add an exit to the loop"
                )
                result = self.result("failed")
                result.error = exc
                return Step(kind="failed", result=result, error=exc)
            if not self.head.frontier:
                return Step(kind="completed", result=self.result("completed"))
            tasks = self.plan()
            passes, self.continues = self.continues, False
            if self.interrupt_before and not passes and self._break_before(tasks):
                return Step(kind="interrupted", result=self.result("interrupted"))
            if started and any(t.runnable for t in tasks):
                self._planned = tasks
                return Step(kind="started", tasks=[t for t in tasks if t.runnable])
        # a step nothing of which ran or paused yet (no records) runs all of its tasks
        runnable = [t for t in tasks if t.runnable] if self.head.records else tasks
        try:
            if self.graph.store is None:
                unfinished = await self._run_step(tasks, runnable)
            else:
                unfinished = await self._with_store(tasks, runnable)
        except (Exception, GeneratorExit) as exc:  # a node's
            result = self.result("failed", tasks)  # with what its finished tasks wrote
            result.error = exc
            return Step(kind="failed", tasks=runnable, result=result, error=exc)
        if unfinished:
            self.keep_records(tasks)
            result = self.result("interrupted", tasks)
            return Step(kind="interrupted", tasks=runnable, result=result)
        try:
            rest = self.finish_step(tasks)
            if rest is not None:
                await rest
        except Exception as exc:
            result = self.result("failed")
            result.error = exc
            return Step(kind="failed", tasks=runnable, result=result, error=exc)
        self._applied = tasks
        return Step(kind="applied", tasks=runnable)

    async def _with_store(self, tasks: list[Task], runnable: list[Task]) -> bool:
        """``_run_step`` with the graph's store as its nodes' (``longterm.get_store``),
        unless an outer graph's is already: a sub-graph uses the store of the graph it runs
        in."""
        store = self.graph.store
        assert store is not None
        if current_store() is not None:
            return await self._run_step(tasks, runnable)
        return await with_store(store, self._run_step(tasks, runnable))

    async def supersteps(
        self, *, started: bool = True, applied: bool = True
    ) -> AsyncIterator[Step]:
        """The run as an async iterator of ``next``'s items: for each step a ``"started"``
        and an ``"applied"`` item, then the final one (``started=False`` / ``applied=False``
        leave those items out). After an ``"interrupted"`` item whose interrupts got answers,
        iterating again goes on from the paused step."""
        while True:
            step = await self.next(started=started)
            if step.result is not None:
                yield step
                return
            if applied or step.kind == "started":
                yield step

    def _break_before(self, tasks: list[Task]) -> bool:
        """Whether the run stops before a step that would run a node of ``interrupt_before``
        (not the first step of a run that ``continues``: the run that continues from the
        stop passes it). Nothing is saved, as in LangGraph: the head, the previous step's
        checkpoint, already has that step next. A step some of whose tasks already ran or
        paused was passed already."""
        if not any(t.node in self.interrupt_before for t in tasks):
            return False
        return not any(t.writes is not None or t.interrupts for t in tasks)

    def forget_untracked(self) -> dict[str, Any]:
        """Drop the values of the ``UntrackedValue`` channels: a run woken where it rested
        (managed, at an interrupt) and moved on goes on as the thread resumed would, from its
        checkpoint, which never holds them; the same whether or not the process restarted
        meanwhile. Returns what it dropped, for ``keep_untracked``."""
        values, dropped = self.head.values, {}
        for key in self.head.untracked:
            value = values.pop(key, MISSING)
            if value is not MISSING:
                dropped[key] = value
        if dropped:
            self._view = None  # (a dict view is a snapshot of the values)
        return dropped

    def keep_untracked(self, dropped: dict[str, Any]) -> None:
        """Put back what ``forget_untracked`` dropped: the run was woken and did not go on
        (paused and let go of, asked its status, a command that failed, cancelled), so it
        read nothing back, and keeps what it had."""
        if dropped:
            self.head.values.update(dropped)
            self._view = None

    def breaks_after(self, tasks: list[Task]) -> bool:
        """Whether the run stops after the step ``tasks`` just finished: one of them is a node
        of ``interrupt_after`` and the graph goes on (its checkpoint is saved: ``run(None)``
        continues with the next step). No steering boundary comes between them. A sub-graph
        stops there even after its last step, as LangGraph's: its parent waits on it, and
        the sub-graph, continued, finishes with nothing more to run."""
        return (
            bool(self.interrupt_after)
            and (bool(self.head.frontier) or self.nested)
            and any(t.node in self.interrupt_after and not t.skipped for t in tasks)
        )

    async def _run_step(self, tasks: list[Task], runnable: list[Task]) -> bool:
        """Run the runnable tasks of one step; whether some task is left unfinished."""
        top = self._top
        if top is not None and runnable and top[0].task_hooks is not None:
            # a sub-graph's tasks, known to the steering of the (runtime-managed) top-level
            # run until its step ends (``running_below``)
            root, holder = top
            below = root._below
            if below is None:
                below = root._below = {}
            for task in runnable:
                below[task.id] = (holder, task)
        if len(tasks) != 1 or self.task_hooks is not None or self.step_timeout is not None:
            if runnable:
                self._count_step()
                await self.run_tasks(tasks)
                if self._stopping or self.cancelling:
                    await self._settle_stops(tasks)
            else:
                self._show_started(tasks)
            return any(t.writes is None for t in tasks)
        # the common case: one task, no TaskGroup, no pending write (the checkpoint follows)
        if not runnable:  # paused, or finished before (its result kept): the step can end
            self._show_started(tasks)
            return tasks[0].writes is None
        self.steps += 1  # (``_count_step``, inline on the hot path)
        if self.graph.schema.managed:
            self._view = None
        task = tasks[0]
        spec = task.spec
        stream = self.stream
        if not spec.plain or self.checkpointer is not None or (stream is not None and stream.live):
            await self._run_one(task, save_result=False)
            return task.writes is None
        # a function node without retry, timeout or context, in a run that saves nothing:
        # the least a node call can cost (the loop's hot path: called here, not in call_node)
        fn = spec.fn
        assert fn is not None
        task.attempts = 1
        scope: UnsavedScope | None = None
        found = enclosing_scope()  # this run's, set by what drives it (``unsaved_scope``)
        if found.__class__ is UnsavedScope and found.run is self:  # type: ignore[union-attr]
            scope = found  # type: ignore[assignment]
            scope.task = task  # a @task the node calls is the run's (``promote``)
        try:
            out = fn(self.view() if task.arg is UNSET else task.arg)
            if spec.is_async:
                out = await out
        except CalledCommand as called:  # Command.PARENT of a sub-graph the node called
            out = called_output(called)
        except asyncio.CancelledError as exc:
            # (an except clause costs nothing until something is raised: the hot path keeps
            # its speed) a cancel of the run's caller ends the run so; one the node let
            # through though nothing cancelled it fails the node, as in a step of several
            if scope is not None:
                await self._fast_calls_end(scope, exc)
            running = asyncio.current_task()
            if running is None or running.cancelling():
                raise
            raise stray_cancel(task.node) from exc
        except BaseException as exc:  # sys.exit, a library's own BaseException: failures
            if scope is not None:
                await self._fast_calls_end(scope, exc)
            failure = user_failure(f"node {task.node!r}", exc)
            if failure is exc:
                raise
            raise failure from exc
        if scope is not None:
            if scope.promoted is None:  # (it called no task)
                scope.task = None
            else:
                await self._fast_calls_end(scope)
        try:
            read_output(self, task, out)
        except ParentCommand:
            if not self.nested:
                raise GraphError(
                    f"node {task.node!r} returned Command(graph=Command.PARENT) but the graph "
                    "is not running as a sub-graph"
                ) from None
            raise
        if stream is not None:  # a values/updates stream read between steps: its update
            stream.wrote(self, task)
        return False

    @staticmethod
    async def _fast_calls_end(scope: UnsavedScope, failed: BaseException | None = None) -> None:
        """The node the fast path called (``scope.task``) ended (``failed``: raising): the
        ``@task`` calls it started and did not await run to their end, as ``call_node``'s
        do (``settle``: a cancelled node cancels them)."""
        promoted = scope.promoted
        scope.task = scope.promoted = None
        if promoted is not None and promoted.started:
            await settle(promoted, failed)

    def running_below(self, task_id: str) -> Task | None:
        """The task of this (top-level) run's running step that runs task
        ``task_id`` in a sub-graph, at any level (a node's, or a call's inside a node),
        started in this step and still running or ended in it; None for any other."""
        below = self._below
        found = None if below is None else below.get(task_id)
        return None if found is None else found[0]

    def nested_task(self, task_id: str) -> Task | None:
        """The task ``task_id`` of a sub-graph's run in this (top-level) run's running step,
        at any level (``running_below`` gives the top-level task running it); None for any
        other."""
        below = self._below
        found = None if below is None else below.get(task_id)
        return None if found is None else found[1]

    def stop(self, task_id: str, *, by: str | None = None) -> bool:
        """Cancel task ``task_id`` of the running step; it ends skipped (no writes, no
        successors; ``stopped`` names it) unless it finished first. Whether it was running.
        ``by``: the ``steering_ref`` of the cancel, saved with the skip."""
        running = self.running.get(task_id)
        if running is None or running.done() or self._step_tasks is None:
            return False
        self._stopping[task_id] = by
        self._step_tasks.cancel(running)
        return True

    def stop_all(self) -> None:
        """Cancel every task of the running step and end the run with ``RunCancelled`` when
        they have stopped, or been left behind (``graph/parallel.py``): between steps there
        is nothing to stop (steering ends the run)."""
        self.cancelling = True
        if self._step_tasks is not None:
            self._step_tasks.cancel_all()

    async def _settle_stops(self, tasks: list[Task]) -> None:
        if self.cancelling:
            cancelled = RunCancelled(self.run_id or "?", "cancelled by steering")
            for note in self.left_behind_notes:  # (the cancel lowered in its place keeps them)
                cancelled.add_note(note)
            raise cancelled
        for task in tasks:
            if task.id in self._stopping and task.writes is None and not task.interrupts:
                self.stopped[task.id] = task.node
                await self.skip(task, by=self._stopping[task.id])
        self._stopping.clear()

    def keep_records(self, tasks: list[Task]) -> None:
        """Remember what the tasks of an unfinished step did, for the next plan()."""
        before = self.head.records
        self.head.records = {
            t.id: TaskRecords(
                writes=t.writes,
                goto=t.goto,
                interrupts=t.interrupts,
                resume=t.resume,
                # a task holds its answers, not who gave them: the step's checkpoint names
                # those commands (``finish_step``), so a crash before the store heard they
                # were applied does not hand them over again to fail
                steered=before[t.id].steered if t.id in before else {},
                skipped=t.skipped,
                skipped_by=t.skipped_by,
            )
            for t in tasks
            if t.writes is not None or t.interrupts or t.resume
        }

    @property
    def step_budget(self) -> int:
        """The supersteps this run may take, as LangGraph counts them: ``recursion_limit``
        for a run that starts from an input, ``CONTINUED_RUN_EXTRA_STEPS`` more for one that
        continues a thread (``run(None)``, a ``Command``, a resumed sub-graph)."""
        if self.input_written is None:
            return self.recursion_limit + CONTINUED_RUN_EXTRA_STEPS
        return self.recursion_limit

    def _count_step(self) -> None:
        # ``next`` checked the limit before planning this step
        self.steps += 1
        if self.graph.schema.managed:
            self._view = None  # a new step: new managed values

    def plan(self) -> list[Task]:
        """The tasks of the next superstep (``plan_tasks``), with the answers a sub-graph's
        run inherits from the task that runs it."""
        tasks = plan_tasks(self.graph, self.head)
        inherited = self.inherited_resume
        if inherited:
            for task in tasks:
                task.resume = {**inherited, **task.resume}
        return tasks

    async def run_tasks(self, tasks: list[Task]) -> None:
        runnable = started([t for t in tasks if t.runnable])  # in LangGraph's order
        self._show_started(tasks, runnable)
        refused: list[_TaskFailed] = []  # answers interrupt()'s schema refused

        async def run_one(task: Task) -> None:
            try:
                await self._run_one(task, save_result=True, announced=True)
            except _TaskFailed as failed:
                if invalid_resume_of(failed.error) is None:
                    raise
                # as LangGraph's: a wrong answer fails its task once the others have ended,
                # so a task answered rightly in the same resume is not cut short after its
                # side effects, to run them again
                refused.append(failed)
            finally:
                clock = self.progress if self.nested else None
                if clock is not None:  # a task ended: progress of the timed node calling it
                    clock.moved()

        limit = self.max_concurrency
        if limit is not None and len(runnable) > limit:
            # as LangGraph's executor: each task waits its turn (in start order) at a gate
            gate = asyncio.Semaphore(limit)

            async def gated(task: Task) -> None:
                async with gate:
                    await run_one(task)

            start = gated
        else:
            start = run_one

        # as a TaskGroup, but a task cancelled here that never ends is left behind
        step = self._step_tasks = StepTasks(
            own_cancel_grace=self.task_hooks is None, on_left=self._left_behind.add
        )
        timeout = self.step_timeout
        try:
            for task in runnable:
                self.running[task.id] = step.start(task, start(task))
            errors = await step.join(None if timeout is None else step.now() + timeout)
        finally:
            self.running.clear()
            self._step_tasks = None
            if self._top is None:
                # (the step's questions are written by now: its tasks name them, at rest)
                self._below = None
        left = step.left
        if left:
            for task, why in left.items():  # ended, cancelled, for the stream and run tree
                if self.stream is not None or self.task_hooks is not None:
                    await self._told_end(task, asyncio.CancelledError(why), self.task_hooks)
        if step.timed_out and not errors and not refused:
            errors = self._timed_out(runnable)
        if errors or refused:
            error = _first_failure(errors, refused)
            for note in left.values():
                error.add_note(note)
            raise error
        if left or self.left_behind_notes:
            self.left_behind_notes = list(left.values())

    def _timed_out(self, runnable: list[Task]) -> list[BaseException]:
        """The error of a step its ``step_timeout`` cut short (none if every task finished or
        paused meanwhile). A question a task asked does not stop the run in its place, as in
        LangGraph: it stays asked, and the run that answers it runs the cancelled tasks again."""
        cut = [t for t in runnable if t.writes is None and not t.interrupts]
        if not cut:
            return []
        names = ", ".join(f"{t.node!r}" for t in cut)
        return [
            StepTimeoutError(
                f"step {self.steps} of {self._what()} did not finish within "
                f"step_timeout={self.step_timeout:g} s: node(s) {names} were cancelled; "
                "what the finished tasks wrote is kept (run(None) runs the others again)"
            )
        ]

    def _show_started(self, tasks: list[Task], runnable: list[Task] | None = None) -> None:
        """Tell the stream the starts of this step's tasks, as LangGraph lists every task of
        the step before any runs: those about to run (``runnable``) and those that finished
        in an earlier call, in the order LangGraph starts them; then the updates of the
        latter again (marked cached)."""
        stream = self.stream
        if stream is None:
            return
        done = [t for t in tasks if t.writes is not None and not t.skipped]
        if not done:
            for task in runnable or ():
                stream.task_started(self, task)
            return
        done = started(done)
        for task in started([*(runnable or ()), *done]):
            stream.task_started(self, task)
        for task in done:
            stream.cached(self, task)

    async def _run_one(self, task: Task, *, save_result: bool, announced: bool = False) -> None:
        """Run one task; ``announced``: the stream has its start already (``run_tasks``)."""
        hooks, stream = self.task_hooks, self.stream
        if hooks is None and stream is None:
            try:
                await self._attempt(task, save_result)
            finally:
                # a stream attached while it ran had its end (``task.id`` is computed only
                # then: a graph without checkpointer, runtime or stream never needs it)
                if self._ended:
                    self._ended.discard(task.id)
                if self._left_behind:  # (one left behind is forgotten as it ends)
                    self._gone(task)
            return
        if hooks is not None:
            await hooks.task_started(self, task)
        if stream is not None and not announced:
            stream.task_started(self, task)
        error: BaseException | None = None
        gone = False
        try:
            gone = await self._attempt(task, save_result)
        except BaseException as exc:
            error = exc
            raise
        finally:
            # (one its step left behind had its end told then, ``run_tasks``: not again,
            # whether it returned late or ended with the cancel)
            if not gone and not (self._left_behind and self._gone(task)):
                await self._told_end(task, error, hooks)

    async def _told_end(
        self, task: Task, error: BaseException | None, hooks: TaskHooks | None
    ) -> None:
        """Tell the stream and the run tree that ``task`` ended (with ``error``)."""
        if task.writes is not None:
            # finished, its result saved, when a sibling's failure cancelled the wait: the
            # result is kept (the task does not run again), so it did not fail
            error = None
        stream = self.stream  # a stream attached while the task ran (handle.stream())
        failure = error.error if isinstance(error, _TaskFailed) else error
        if self._ended and task.id in self._ended:
            self._ended.discard(task.id)
        elif stream is not None and not isinstance(failure, ParentCommand):
            # a node that hands a command to the parent graph does not end here: the parent's
            # task takes it as its result (LangGraph streams no end either)
            stream.task_finished(self, task, failure)
        if hooks is not None:
            await hooks.task_finished(self, task, error)

    def emit(self, task_id: str, value: Any) -> None:
        """A value a node sends to the stream's ``custom`` mode (``NodeContext.emit``)."""
        if self.stream is not None:
            self.stream.custom(self, task_id, value)

    def _gone(self, task: Task) -> bool:
        """Whether ``task`` was left behind by its step (``graph/parallel.py``), its node
        having ended only now: then what it did is undone, and nothing more is done."""
        if task not in self._left_behind:
            return False
        self._left_behind.discard(task)
        task.writes = [] if task.skipped else None
        task.goto, task.returned = [], None
        return True

    async def _attempt(self, task: Task, save_result: bool) -> bool:
        """Run ``task``'s node and keep what it did; True if it was left behind meanwhile."""
        cached = task.spec.cache  # (a cache_policy, in a graph with a cache)
        hit = False
        handler = task.spec.error_handler
        # its node failed in an earlier run and its handler took over: the handler runs again
        failed = None if handler is None else self._node_failed(task)
        try:
            try:
                try:
                    if failed is not None:
                        pass  # (the handler runs below)
                    elif cached is None:
                        await call_node(self, task)
                    else:
                        hit = await self._call_cached(task, cached)
                except asyncio.CancelledError as exc:
                    running = asyncio.current_task()
                    if running is None or running.cancelling():
                        raise  # cancelled (by its step, its run, its caller): it ends so
                    raise stray_cancel(task.node) from exc
            except Exception as exc:
                if handler is None:
                    raise
                if self.checkpointer is not None:
                    await _landed(self._put_write(handler_failure_write(task.id, exc)))
                await self._handle(task, handler, exc)
            else:
                if failed is not None:
                    assert handler is not None
                    saved = GraphError(f"{failed} (saved when node {task.node!r} failed)")
                    await self._handle(task, handler, saved)
        except NodeInterrupt as ni:
            if self._left_behind and self._gone(task):
                return True
            asked = None
            # the questions of the sub-graphs it runs, named by this task too (a persistent
            # sub-graph's namespace names no task: ``Interrupt.enclosing``)
            ni.interrupts = [i.held_by(task.id) for i in ni.interrupts]
            if self.checkpointer is not None:
                try:
                    asked = interrupt_write(task.id, ni.interrupts)
                except InvalidUpdateError as exc:
                    # a question no checkpoint holds could never be answered: the node
                    # failed, and nothing shows it as asked (the result, the stream, the state)
                    await self._save_error(task, exc)
                    if not save_result:
                        raise exc from None
                    raise _TaskFailed(task.index, exc) from exc
            task.interrupts = ni.interrupts
            stream = self.stream
            if stream is not None:
                stream.wrote(self, task)
                self._end(stream, task)
            if asked is not None:
                # (cut short, the run listed a question that the thread did not hold)
                await _landed(self._put_write(asked))
            return False
        except (Exception, GeneratorExit, ParentCommand) as exc:
            # GeneratorExit too (no Exception: a node closing a generator by hand, or raising
            # it to stop): let through, it ended the run's task, and left the run 'running'
            if self._left_behind and self._gone(task):
                return True
            if self.checkpointer is not None and not isinstance(exc, ParentCommand):
                await self._save_error(task, exc, self._withdrawn(task, exc))
            if not save_result:  # a step of one task: its error is the step's
                raise
            raise _TaskFailed(task.index, exc) from exc
        if self._left_behind and self._gone(task):
            return True
        record = None
        if save_result and self.checkpointer is not None:
            assert task.writes is not None
            try:
                record = result_write(
                    self.graph, task.id, task.writes, task.goto, handled=task.handled
                )
            except InvalidUpdateError as exc:  # a write no checkpoint holds: the node failed
                task.writes = None
                await self._save_error(task, exc)
                raise _TaskFailed(task.index, exc) from exc
        stream = self.stream
        if stream is not None:
            if hit:  # as LangGraph's: its update marked cached, and no end of a task that ran
                stream.cached(self, task)
                self._ended.add(task.id)
            else:  # as the node returns, as LangGraph's: not once it is saved
                stream.wrote(self, task)
                self._end(stream, task)
        if record is not None:
            # (cut short, the result could land in the store but not in this run's state, or
            # not at all and the node would run again)
            saving = self._put_write(record)
            try:
                await _landed(saving)
            except BaseException:
                if not saving.done() or saving.cancelled() or saving.exception() is not None:
                    task.writes = None  # not saved: it runs again on resume
                raise
        return False

    def _node_failed(self, task: Task) -> str | None:
        """The saved ``repr`` of the error ``task``'s node failed with in an earlier run, its
        error handler having taken over (``handler_failure_write``), or None."""
        records = self.head.records
        rec = records.get(task.id) if records else None
        return None if rec is None else rec.node_failed

    async def _handle(self, task: Task, handler: NodeSpec, exc: Exception) -> None:
        """Run the error handler of ``task``'s node in its place, its last attempt having
        failed with ``exc`` (``add_node(..., error_handler=...)``): in the task, with its
        input, its id and its answers (an ``interrupt()`` in the handler is the task's
        question), given ``NodeError(node, error)`` by its ``error_param``. What it returns
        is the task's result, and the task goes where its goto says only (``Task.handled``).
        What it raises fails the task."""
        fn = handler.fn
        assert fn is not None
        if handler.error_param is not None:
            fn = partial(fn, **{handler.error_param: NodeError(node=task.node, error=exc)})
        spec = replace(handler, fn=fn, input=task.spec.input)
        stand_in = Task(node=task.node, index=task.index, spec=spec, arg=task.arg, key=task.key)
        stand_in._id = task.id
        stand_in.resume = task.resume
        await call_node(self, stand_in)
        task.writes, task.goto, task.returned = stand_in.writes, stand_in.goto, stand_in.returned
        task.handled = True

    async def _call_cached(self, task: Task, cached: CachedNode) -> bool:
        """Give ``task`` the writes its node's cache holds for its input (True), or run the
        node and cache what it returned (False); a node that fails or pauses is not cached.
        An entry a peer of the same step stored is no hit, as in LangGraph, which looks the
        step's tasks up before any runs: two ``Send``s of one argument both run, whether or
        not the first had finished when the second began."""
        key = cached.key_of(self, task)
        stored = (cached.ns, key)
        if self._cached_step != self.steps:  # a later step: its peers' marks are gone
            self._cached_step, self._cached_by_step = self.steps, set()
        if stored not in self._cached_by_step and await cached.reuse(self.graph, task, key):
            return True
        await call_node(self, task)
        await cached.keep(self.graph, task, key)
        self._cached_by_step.add(stored)
        return False

    def _put_write(self, write: Any) -> asyncio.Future[None]:
        """Start saving ``write`` as a pending write of this step's checkpoint."""
        assert self.checkpointer is not None
        return asyncio.ensure_future(
            self.checkpointer.put_writes(
                self.head.thread_id, self.head.ns, self.head.frontier_id, [write]
            )
        )

    def _end(self, stream: StreamSink, task: Task) -> None:
        """The stream's end of ``task``, with its update, as LangGraph's: as the node returns
        or pauses, not once its result is saved (``_run_one`` then gives no other)."""
        stream.task_finished(self, task, None)
        self._ended.add(task.id)

    async def _save_error(
        self, task: Task, exc: BaseException, withdrawn: WriteRecord | None = None
    ) -> None:
        """Record why ``task`` failed (``get_state().tasks[i].error``), and the answer its
        failure ``withdrawn``; the node's own error is what the run reports, so a store that
        cannot take the record only logs it, and one out of reach is not waited for
        (``put_writes_once``: PostgreSQL would ride it out for up to ``lease_ttl`` before
        the failing run said why it failed)."""
        assert self.checkpointer is not None
        writes = [error_write(task.id, exc)]
        if withdrawn is not None:
            writes.append(withdrawn)
        try:
            await self.checkpointer.put_writes_once(
                self.head.thread_id, self.head.ns, self.head.frontier_id, writes
            )
        except Exception as store_exc:
            _log.warning("could not record the error of task %s: %s", task.id, store_exc)

    def _withdrawn(self, task: Task, exc: BaseException) -> WriteRecord | None:
        """If ``exc`` is an answer ``interrupt()``'s schema refused, take that answer back
        from ``task`` (its question asks again) and return the write that says so."""
        iid = invalid_resume_of(exc)
        if iid is None or iid not in task.resume:
            return None
        del task.resume[iid]
        records = self.head.records.get(task.id)
        if records is not None:
            records.resume.pop(iid, None)  # (the same dict, for a task planned from them)
            records.withdrawn.add(iid)
        return withdrawal_write(task.id, iid)

    async def skip(self, task: Task, *, by: str | None = None) -> None:
        """Finish ``task`` with no writes and no successors (a cancelled task, ``skip``);
        ``by``: the ``steering_ref`` of the cancel."""
        task.writes, task.goto, task.skipped, task.skipped_by = [], [], True, by
        task.interrupts, task.returned = [], None
        if self.checkpointer is not None:
            record = result_write(self.graph, task.id, [], [], skipped=True, skipped_by=by)
            await self.checkpointer.put_writes(
                self.head.thread_id, self.head.ns, self.head.frontier_id, [record]
            )

    def finish_step(self, tasks: list[Task]) -> Coroutine[Any, Any, None] | None:
        """Apply the step's writes and move the head to its next step. What needs no waiting
        is done here and ``None`` returned: a run that saves nothing, whose step's successors
        are its node's constant ones (``GraphCore.simple_next``), the common case, makes no
        coroutine for it; else the rest (routers, the checkpoint) is returned to await."""
        head, graph = self.head, self.graph
        before: dict[str, Any] | None = None
        if len(tasks) == 1:
            writes = tasks[0].writes or []
        else:
            writes = [w for t in tasks for w in t.writes or ()]
            if any(t.node in graph.branches for t in tasks):
                before = self._values_before(writes)
        try:
            delta = graph.apply_writes(head.values, writes) if writes else {}
        except Exception as exc:
            if self.checkpointer is None:  # (nothing to keep the result in)
                raise
            # a reducer refused the writes: the node ran, so its result is kept (as a
            # parallel step's are), and a run that continues applies it again without
            # running the node again, as LangGraph's does
            return self._kept_raising(tasks, exc)
        if writes or graph.schema.kind != "dict" or self.checkpointer is not None:
            # a dict view (a snapshot of its step's values) is rebuilt once they changed;
            # instances, and the copies a saving run hands out, every step
            self._view = None
        frontier = self.graph.simple_next.get(tasks[0].node) if len(tasks) == 1 else None
        if frontier is None or tasks[0].goto or self.checkpointer is not None:
            return self._route_and_save(tasks, writes, delta, frontier, before)
        head.frontier = frontier
        head.step += 1
        if head.records:  # (the answers the step consumed: a checkpoint names them)
            head.records = {}
        return None

    async def _kept_raising(self, tasks: list[Task], exc: Exception) -> None:
        await self._keep_results(tasks)
        raise exc

    async def _route_and_save(
        self,
        tasks: list[Task],
        writes: list[tuple[str, Any]],
        delta: dict[str, Any],
        frontier: list[Planned] | None,
        before: dict[str, Any] | None,
    ) -> None:
        """``finish_step``'s rest: the step's frontier (``frontier``, its node's constant
        successors, or its routers'), and its checkpoint."""
        head = self.head
        if frontier is None or tasks[0].goto:
            try:
                frontier = await self.route(tasks, before)
            except Exception:
                # the step's nodes ran: their writes are kept (as a parallel step's are), so
                # get_state shows them and a run that continues routes again without running
                # them again, as LangGraph keeps a node's writes when its router fails
                await self._keep_results(tasks)
                raise
        head.frontier = frontier
        head.step += 1
        # Steering commands whose answers this step consumed: the checkpoint names them, so a
        # command handed over again after a crash is known as applied (``applied_by_steering``).
        steered: list[str] = []
        if head.records:
            steered = [cid for rec in head.records.values() for cid in rec.steered]
            head.records = {}
        if self.checkpointer is not None:
            if len(tasks) == 1 and self._writes_lost(writes):
                # the checkpoint's delta does not say what the task wrote, which a past
                # checkpoint's tasks show (as LangGraph's): keep the result beside it
                await self._keep_results(tasks, failing=False)
            head.frontier_id = new_frontier_id()
            await save(
                self.checkpointer,
                head,
                delta=delta,
                source="loop",
                tasks=[t.id for t in tasks],
                metadata={"resumed_by": steered} if steered else None,
                ran=[t.node for t in tasks if not t.skipped],
            )
            if self.owner is not None:
                await self.checkpointer.renew(head.thread_id, self.owner)

    def _writes_lost(self, writes: list[tuple[str, Any]]) -> bool:
        """Whether the saved change of a channel does not say what ``writes`` wrote to it: a
        key written twice, or a reducer whose change is its new value (a fold)."""
        channels = self.graph.schema.channels
        return len({key for key, _ in writes}) < len(writes) or any(
            (channel := channels.get(key)) is not None and not channel.reducer.diff_gives_writes
            for key, _ in writes
        )

    async def _keep_results(self, tasks: list[Task], *, failing: bool = True) -> None:
        """Save the results of a step of one task (a parallel step saved each as it finished)
        when the step cannot end (``failing``), or beside a checkpoint that does not say what
        it wrote; a store that cannot take them only logs it. For a step that cannot end, a
        store out of reach is not waited for (``put_writes_once``, as ``_save_error``): the
        run's own error is told at once, and the node runs again on resume if its result was
        lost."""
        task = tasks[0]
        if self.checkpointer is None or len(tasks) != 1 or task.writes is None:
            return
        record = result_write(self.graph, task.id, task.writes, task.goto, handled=task.handled)
        put = self.checkpointer.put_writes_once if failing else self.checkpointer.put_writes
        try:
            await put(self.head.thread_id, self.head.ns, self.head.frontier_id, [record])
        except Exception as store_exc:
            _log.warning("could not keep the result of task %s: %s", task.id, store_exc)

    # -- routing ---------------------------------------------------------------------------

    async def route(self, tasks: list[Task], before: dict[str, Any] | None = None) -> list[Planned]:
        """The frontier after ``tasks`` (``finish_step`` takes a node's constant successors,
        ``GraphCore.simple_next``, without calling this). With ``before`` (the values the
        step started from) each router sees them with its own task's writes applied, as
        LangGraph's routers, which run in their node's task, never see a sibling's writes."""
        head, graph = self.head, self.graph
        done = [t for t in tasks if not t.skipped]
        # a task its node's error handler finished goes where the handler's goto says only
        # (no node is named "": none of the node's edges, routers or joins are taken)
        finished = [("" if t.handled else t.node, t.goto) for t in done]

        def view(i: int, schema: StateSchema | None) -> Any:
            if before is None:
                return self.view() if schema is None else self._view_in(schema, head.values)
            return self._view_in(schema, graph.preview(before, done[i].writes or []))

        def config(i: int) -> NodeContext:  # a router's, as LangGraph's: its node task's
            task = done[i]
            return router_context(
                head, task.node, task.id, run_id=self.run_id, runtime=self.runtime, _run=self
            )

        return await graph.route(finished, head.barriers, view, config=config)

    def _values_before(self, writes: list[tuple[str, Any]]) -> dict[str, Any]:
        """The step's starting values, with copies of what ``writes`` will change in place."""
        written = {key for key, _ in writes}
        return {k: detach(v) if k in written else v for k, v in self.head.values.items()}

    def view(self) -> Any:
        """The state as nodes and routers see it this step. A run that saves its steps hands
        out copies of its lists, dicts and sets: a node that changes one in place (instead of
        returning a write) changes neither the state nor the checkpoint, so the two agree."""
        view = self._view
        if view is None:
            schema = self.graph.schema
            if self.checkpointer is None and schema.kind == "dict" and not schema.managed:
                # the common case, a TypedDict state that saves nothing: no copies, no managed
                # values, so ``_view_of`` is the read-only dict of the values (two frames less
                # for every step's nodes)
                view = StateView(self.head.values)
            else:
                view = self._view_of(schema, self.head.values)
            self._view = view
        return view

    def view_for(self, spec: NodeSpec) -> Any:
        """The state as node ``spec`` sees it: ``view()``, or with ``add_node(...,
        input_schema=...)`` that schema's keys only, as an instance of it for a dataclass or
        pydantic schema (defaults filled in; a pydantic one validated), as LangGraph's node
        input."""
        if spec.input is None:
            return self.view()
        return self._view_in(spec.input, self.head.values)

    def _view_in(self, schema: StateSchema | None, values: dict[str, Any]) -> Any:
        """``values`` as a node's or router's own input ``schema`` hands them (None: the
        state's)."""
        if schema is None:
            return self._view_of(self.graph.schema, values)
        return self._view_of(schema, schema.own(values))

    def _view_of(self, schema: StateSchema, values: dict[str, Any]) -> Any:
        """``values`` as ``schema`` hands them to a node or router: copies for a run that
        saves its steps, with this step's managed values."""
        if self.checkpointer is not None:
            values = {k: detach(v) for k, v in values.items()}
        if schema.managed:
            values = {**values, **self._managed_values(schema.managed)}
        return schema.view(values)

    def _managed_values(self, managed: dict[str, str]) -> dict[str, Any]:
        """The managed fields' values this step (``state.RemainingSteps``, ``IsLastStep``),
        counted as LangGraph counts them: the steps left under the recursion limit."""
        # the current step counts (``_count_step`` ran); a view made before any step was
        # counted reads as the first step's
        return managed_values(managed, self.step_budget - max(self.steps, 1))

    def adopt(self, staged: Head) -> None:
        """Continue from ``staged``, a changed and saved copy of the head (``Head.staged``:
        a steering update or redirect); nodes see the new values from the next step on."""
        self.head.adopt(staged)
        self._view = None

    # -- results ---------------------------------------------------------------------------

    def _what(self) -> str:
        """This run's graph as an error names it: a sub-graph by the node that runs it and
        its namespace of the thread (its compile() name is ``"graph"`` unless given one)."""
        ns = self.head.ns
        if not ns:
            return f"graph {self.graph.name!r}"
        # the last "node:task_id" of the namespace (a call's number may follow it; a
        # persistent sub-graph's segments have no task id)
        parts = [part for part in ns.split("|") if not part.isdigit()] or [ns]
        node = parts[-1].split(":", 1)[0]
        return f"the sub-graph of node {node!r} (namespace {ns!r})"

    def result(self, status: GraphStatus, tasks: list[Task] = ()) -> GraphResult:  # type: ignore[assignment]
        """The run's result; ``tasks`` are those of an unfinished step (paused or failed):
        their pending interrupts, and the state with what the finished ones wrote."""
        head = self.head
        output = self.graph.schema.output
        if not tasks:  # a finished step
            return GraphResult(
                status=status,
                state=output(head.values),
                interrupts=[],
                thread_id=head.thread_id,
                checkpoint_id=head.checkpoint_id,
                steps=self.steps,
            )
        try:
            state = self.state_of(tasks)
        except Exception:
            if status != "failed":
                raise
            # a node failed and a reducer refuses what its finished siblings wrote: the run
            # reports the node's error, as LangGraph raises it, with the state the step
            # started from (a step's writes apply all or nothing; get_state raises the
            # reducer's error, as LangGraph's)
            state = head.values
        return GraphResult(
            status=status,
            state=output(state),
            # in the order the tasks ask, as LangGraph's invoke lists them
            interrupts=unanswered(started(tasks)),
            thread_id=head.thread_id,
            checkpoint_id=head.checkpoint_id,
            steps=self.steps,
        )

    def state_of(self, tasks: list[Task]) -> dict[str, Any]:
        """The whole state of an unfinished step (``tasks``, paused or failed): the values
        with what its finished tasks wrote (``result`` keeps the output schema's keys)."""
        finished = [w for t in tasks if t.writes and not t.skipped for w in t.writes]
        return self.graph.preview(self.head.values, finished)

    # -- nested runs -----------------------------------------------------------------------

    def child_ns(self, task: Task, call: int = 0) -> str:
        """The checkpoint namespace of ``task``'s sub-graph run under this run's: of its
        ``call``-th sub-graph call, as LangGraph numbers a task's calls after its first,
        ``node:task_id|1``, ``node:task_id|2``, ..."""
        segment = f"{task.node}:{task.id}" if call == 0 else f"{task.node}:{task.id}|{call}"
        return f"{self.head.ns}|{segment}" if self.head.ns else segment

    async def child_run(
        self,
        child_graph: GraphCore,
        task: Task,
        ns: str,
        data: Any,
        recursion_limit: int | None = None,
        checkpointer: Checkpointer | None = None,
    ) -> tuple[GraphRun, bool]:
        """The run of ``child_graph`` for ``task`` in namespace ``ns`` of this thread, with
        this run's checkpointer (or ``checkpointer``, on the same thread: a sub-graph call
        given a ``durability`` of its own, ``graph/calls.py``), limits (or
        ``recursion_limit``) and answers: it continues the namespace's head (a resumed task)
        or starts from ``data``. Also says whether it started from ``data`` (afresh, or a
        new call of a persistent sub-graph).

        LangGraph's ``compile(checkpointer=False)`` sub-graph runs without checkpointer; a
        ``checkpointer=True`` one keeps its state in ``persistent_ns(ns)``, the same for
        every call from this place of the graph: the head there goes on for the call that
        made it (``metadata["call"]``, its per-call ``ns``: a resumed task), and another
        call applies ``data`` to it as new input, as a thread takes a new input."""
        own = child_graph.sub_checkpointer
        cp = None if own is False else (checkpointer or self.checkpointer)
        thread_id = self.head.thread_id
        limit = self.recursion_limit if recursion_limit is None else recursion_limit
        call = ns
        persistent = own is True and cp is not None
        if persistent:
            ns = persistent_ns(call)
            self._claim(ns, task)
        head = await load_head(child_graph, cp, thread_id, ns) if cp is not None else None
        if head is None and persistent:
            # its first call in this thread: a fork goes on from its state of then
            assert cp is not None  # (persistent: a checkpointer)
            head = await _forked(child_graph, cp, thread_id, ns, self._child_metadata(None))
        if head is not None:
            check_values(child_graph, head)
        fresh = head is None
        written = None
        if head is not None and persistent and head.metadata.get("call") != call:
            # a new call of a persistent sub-graph: its input goes on from its saved state
            if data is None:
                raise GraphError(f"sub-graph {child_graph.name!r} needs an input to start")
            replay = self.replay
            if replay is not None and ns not in replay.visited:
                assert cp is not None  # (persistent: a checkpointer)
                replay.visited.add(ns)
                head = await _replayed(child_graph, cp, head, replay.bound)
            head.metadata = {**head.metadata, **self._child_metadata(call)}
            written = await child_graph.start_input(head, data, cp, limit)
            fresh = True
        elif head is not None:  # the namespace's input saved, its first step not: apply it
            written = await child_graph.take_pending_input(head, cp, limit)
        else:
            head = Head.fresh(child_graph, thread_id, ns, self.head.lineage, saved=cp is not None)
            if cp is not None:
                head.metadata = self._child_metadata(call if persistent else None)
            if data is None:
                raise GraphError(f"sub-graph {child_graph.name!r} needs an input to start")
            written = await child_graph.start_input(head, data, cp, limit)
        child = GraphRun(
            child_graph,
            head,
            checkpointer=cp,
            recursion_limit=limit,
            parent=self,
            inherited_resume=task.resume,
            runtime=self.runtime,
            run_id=self.run_id,
            max_concurrency=self.max_concurrency,
        )
        if self.context is not None:
            child.context = self.context
        clock = progress_here()  # (the calling node's attempt's, or what its run reports to)
        if clock is not None:
            child.progress = clock
            clock.moved()  # the sub-graph starts
        top = self._top
        child._top = (self, task) if top is None else top
        if own is False and self.checkpointer is not None:
            child.unsaved_by = child._what()
        elif self.unsaved_by is not None:
            child.unsaved_by = self.unsaved_by
        if self.replay is not None:
            child.replay = self.replay
        child.input_written = written
        # a sub-graph going on from its own checkpoint is continued, as LangGraph hands a
        # resumed sub-graph CONFIG_KEY_RESUMING
        child.continues = not fresh and written is None
        stream = child.stream
        if stream is not None:
            if stream.checkpoints:
                opened = await input_checkpoint(
                    child.graph, child.checkpointer, child.head, written is not None
                )
                if opened is not None:
                    stream.opened(child, opened)
            stream.subgraph_started(child)
        return child, fresh

    def _claim(self, ns: str, task: Task) -> None:
        """Refuse a second task of this step in the persistent sub-graph namespace ``ns``
        (``Send``s to one such node, or to a node that calls one): their calls would write
        one namespace at once. LangGraph's run them there in turn, each mixing the others'
        state into its own."""
        claims = self._claims
        if claims is None or claims[0] != self.head.frontier_id:
            claims = self._claims = (self.head.frontier_id, {})
        owner = claims[1].setdefault(ns, task.id)
        if owner != task.id:
            raise GraphError(
                f"tasks {owner!r} and {task.id!r} of node {task.node!r} both run the "
                f"checkpointer=True sub-graph kept in namespace {ns!r} in one step: its state "
                "is one per place it runs from, so two calls at once would share it; send to "
                "it once per step, or compile it with checkpointer=None (a state per call)"
            )

    def _child_metadata(self, call: str | None) -> dict[str, Any]:
        """A sub-graph's checkpoint metadata: LangGraph's ``parents``, the checkpoint of each
        graph above it that it runs from, and for a persistent one the call it runs for."""
        parents = self.head.metadata.get("parents", {})
        meta: dict[str, Any] = {"parents": {**parents, self.head.ns: self.head.checkpoint_id}}
        if call is not None:
            meta["call"] = call
        return meta

    async def run_subgraph(self, task: Task) -> Any:
        """Run a compiled graph node as a child run in its own checkpoint namespace."""
        child_graph = task.spec.subgraph
        assert child_graph is not None
        ns = self.child_ns(task)
        # the child starts from its Send argument or from the parent's shared channels; its
        # output is what it changed relative to that start, applied by the parent's reducers
        if task.arg is not UNSET:
            data = task.arg
        elif child_graph.schema.root:  # a one-value state's input: the node's, as LangGraph's
            data = self.view()
        elif self.graph.schema.root:
            # a state class under a one-value parent: the parent's value, read through the
            # child's input keys (LangGraph's reads its input channels from it)
            data = self.head.values.get(ROOT)
            if isinstance(data, Mapping):
                schema = child_graph.schema
                keys = schema.channels if schema.input_keys is None else schema.input_keys
                data = {k: v for k, v in data.items() if k in keys}
        else:
            schema = child_graph.schema
            keys = schema.channels if schema.input_keys is None else schema.input_keys
            node_input = task.spec.input  # add_node(..., input_schema=...)
            data = {
                k: v
                for k, v in self.head.values.items()
                if k in keys and (node_input is None or k in node_input.channels)
            }
        child, fresh = await self.child_run(child_graph, task, ns, data)
        # what the child started from: the parent's values may have changed since a resumed
        # child started (an update_state while it waited on an interrupt)
        if fresh or self.checkpointer is None:
            start = child.head.values
        else:
            start = await first_values(child_graph, self.checkpointer, child.head)
        start = {k: detach(start[k]) for k in child_graph.schema.coerce_input(data) if k in start}
        try:
            result = await child.execute()
        except ParentCommand as pc:
            cmd: Command[Any] = pc.command
            return Command(update=cmd.update, goto=cmd.goto)
        if result.status == "interrupted":
            raise NodeInterrupt(result.interrupts)
        if child_graph.schema.root != self.graph.schema.root:
            # a one-value state under a state class, or the other way round: the child's
            # output is the node's return value, read as any node's (LangGraph's: a dict the
            # parent's update, a one-value child's other value its InvalidUpdateError; a
            # class child's values the one-value parent's new value)
            return _public_output(child_graph, result.state)
        return self._subgraph_output(child_graph, start, result.state)

    def _subgraph_output(
        self, child_graph: GraphCore, start: dict[str, Any], final: dict[str, Any]
    ) -> Writes:
        channels = self.graph.schema.channels
        writes: list[tuple[str, Any]] = []
        child = child_graph.schema
        for key in child.channels if child.output_keys is None else child.output_keys:
            channel = channels.get(key)
            if channel is None:
                continue
            before = start.get(key, MISSING)
            writes += [(key, w) for w in channel.reducer.diff(before, final.get(key, MISSING))]
        return Writes(writes=writes)

    async def run_agent(self, task: Task) -> Any:
        """Run an agent node as a child run: below the task's entry in the run tree when a
        runtime manages this run, else below the run itself."""
        state = self.view_for(task.spec) if task.arg is UNSET else task.arg
        hooks = self.task_hooks
        if hooks is not None:
            return await run_agent_node(
                task,
                state,
                self.runtime,
                parent=hooks.parent_for(task),
                started=hooks.agent_started,
            )
        top = self._top
        root_hooks = None if top is None else top[0].task_hooks
        if root_hooks is not None:
            # an agent node of a sub-graph: the top-level run's steering finds its agent run
            # by the node's task id while it runs, for the instructions sent to that task
            assert top is not None
            started = partial(root_hooks.nested_agent_started, top[1])
            return await run_agent_node(
                task, state, self.runtime, parent=self.run_id, started=started
            )
        return await run_agent_node(task, state, self.runtime, parent=self.run_id)


def _public_output(graph: GraphCore, final: dict[str, Any]) -> Any:
    """A sub-graph's output as LangGraph hands it to its parent node: a one-value state's
    value (None if nothing wrote it), a state class's output channels that hold a value."""
    schema = graph.schema
    if schema.root:
        return final.get(ROOT)
    keys = schema.channels if schema.output_keys is None else schema.output_keys
    return {k: final[k] for k in keys if k in final}


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class Replay(Record):
    """A run that goes on from the thread's past (a replay, ``run(None, checkpoint_id=)``,
    or an ``update_state(..., checkpoint_id=)`` fork): ``bound`` is the root checkpoint it
    went back to. As LangGraph's ``ReplayState``, each persistent sub-graph's first call in
    the run goes on from its state as it was then, its last checkpoint made before
    ``bound`` (none: afresh); a later call of it, from the state the first left."""

    bound: str
    #: the persistent namespaces called so far in the run
    visited: set[str] = field(default_factory=set)


async def _replayed(graph: GraphCore, cp: Checkpointer, head: Head, bound: str) -> Head:
    """The persistent sub-graph namespace of ``head`` as it was before the root checkpoint
    ``bound``: its newest checkpoint made from a root checkpoint older than ``bound``,
    saved again on top of its history (a ``rewind``, as the root's replay saves one), or
    a fresh state if it had none then; ``head`` itself when that is its head."""
    thread_id, ns = head.thread_id, head.ns
    order = {r.checkpoint_id: r.seq for r in await cp.list(thread_id, "")}
    limit = order.get(bound, -1)
    records = await cp.list(thread_id, ns)
    past = next(
        (r for r in records if order.get(r.metadata.get("parents", {}).get(""), limit) < limit),
        None,
    )
    if past is not None and past.checkpoint_id == head.checkpoint_id:
        return head
    then = None if past is None else await load_head(graph, cp, thread_id, ns, past.checkpoint_id)
    if then is None:
        then = Head.fresh(graph, thread_id, ns, None, saved=True)
        then.metadata = dict(head.metadata)
    # on top of the namespace's history (a new lineage: new task ids, as a replay's)
    then.records, then.frontier = {}, []
    then.lineage = _clock.new_id("ln")
    then.seq, then.checkpoint_id = head.seq, head.checkpoint_id
    then.frontier_id = new_frontier_id()
    metadata = {} if past is None else {"rewound_to": past.checkpoint_id}
    await save(cp, then, delta=None, source="rewind", metadata=metadata)
    return then


async def _forked(
    graph: GraphCore, cp: Checkpointer, thread_id: str, ns: str, metadata: dict[str, Any]
) -> Head | None:
    """The persistent sub-graph namespace ``ns`` of a thread that has none yet, if the
    thread is a ``fork()`` of another: its state at the checkpoint forked (the newest made
    from a root checkpoint older than it, as a replay takes it back, ``_replayed``), read
    from the thread forked (or, should it have had none then and be a fork itself, from
    the one it was forked from, and so on), saved as the namespace's first checkpoint here
    (source ``fork``, for a new call: its input applies to it). None: no such state (no
    fork, or the sub-graph had not run by then, or the thread forked is gone)."""
    roots = await cp.list(thread_id, "")
    first = roots[-1] if roots else None
    while first is not None and first.source == "fork":
        forked = first.metadata.get("forked_from")
        if not isinstance(forked, dict):
            return None
        source, bound = forked.get("thread_id"), forked.get("checkpoint_id")
        if not isinstance(source, str) or not isinstance(bound, str):
            return None
        roots = await cp.list(source, "")
        order = {r.checkpoint_id: r.seq for r in roots}
        limit = order.get(bound)
        if limit is None:
            return None
        past = next(
            (
                r
                for r in await cp.list(source, ns)
                if order.get(r.metadata.get("parents", {}).get(""), limit) < limit
            ),
            None,
        )
        if past is None:  # none then: perhaps it had one from the thread it was forked from
            first = roots[-1]
            continue
        then = await load_head(graph, cp, source, ns, past.checkpoint_id)
        if then is None:
            return None
        then.thread_id, then.run_id = thread_id, None
        then.records, then.frontier, then.barriers = {}, [], {}
        then.lineage = _clock.new_id("ln")
        then.seq, then.checkpoint_id = -1, None
        then.frontier_id = new_frontier_id()
        then.metadata = metadata  # its "parents" here, and no call: the next is a new one
        origin = {"thread_id": source, "checkpoint_id": past.checkpoint_id}
        await save(cp, then, delta=None, source="fork", metadata={"forked_from": origin})
        return then
    return None


def persistent_ns(ns: str) -> str:
    """The namespace a ``compile(checkpointer=True)`` sub-graph keeps its state in: its
    per-call namespace without task ids (``"outer:t1|inner:t2|1"`` -> ``"outer|inner|1"``),
    as LangGraph's, so every call from the same place finds the state the last one left (a
    task's second call of it, ``|1``, has one of its own)."""
    return "|".join(part.partition(":")[0] for part in ns.split("|"))


async def _landed(saving: asyncio.Future[None]) -> None:
    """Wait for a task's save (its result, or the question it asked). Should a sibling fail
    (or the run be cancelled) meanwhile, the save lands first, then the cancel goes on."""
    try:
        await asyncio.shield(saving)
    except asyncio.CancelledError:
        await saving
        raise


def running_graph_run() -> GraphRun | None:
    """The graph run whose node is running in this context (a sub-graph's own run inside
    its parent's), or None outside any graph node."""
    run = getattr(enclosing_scope(), "run", None)
    return run if isinstance(run, GraphRun) else None


def unanswered(tasks: list[Task]) -> list[Interrupt]:
    """The interrupts of an unfinished step's ``tasks`` that still wait for an answer."""
    return [i for t in tasks if t.writes is None for i in t.interrupts if i.id not in t.resume]


def _first_failure(errors: list[BaseException], refused: list[_TaskFailed]) -> BaseException:
    """The error of the lowest-index failed task (of ``errors``, and of the ``refused``
    answers'), so the reported error is deterministic; a ``KeyboardInterrupt`` (or another
    ``BaseException`` no node raises) first, as a TaskGroup raises it."""
    failed: list[_TaskFailed] = list(refused)
    others: list[BaseException] = []
    for exc in errors:
        if isinstance(exc, _TaskFailed):
            failed.append(exc)
        elif not isinstance(exc, Exception):
            return exc
        else:
            others.append(exc)
    if failed:
        return min(failed, key=lambda f: f.index).error
    return others[0]


__all__ = [
    "GraphRun",
    "Replay",
    "Step",
    "StepKind",
    "StreamSink",
    "TaskHooks",
    "persistent_ns",
    "running_graph_run",
    "unanswered",
]
