"""One task of a superstep: call the node (retry, timeout, interrupt scope) and read what it
returned into channel writes and gotos."""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future as ConcurrentFuture
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tinyagents._record import Record
from tinyagents._threads import in_own_thread
from tinyagents.errors import (
    GraphError,
    InvalidUpdateError,
    NodeCancelledError,
    NodeTimeoutError,
    TinyAgentsError,
)
from tinyagents.graph._context import (
    CalledCommand,
    NodeInterrupt,
    ParentCommand,
    Progress,
    TaskScope,
    ThreadAttempt,
    caller_loop,
    enclosing_scope,
    reset_scope,
    set_scope,
    stable_id,
    thread_attempt,
    user_failure,
)
from tinyagents.graph.checkpointing import Planned
from tinyagents.graph.context import NodeContext
from tinyagents.graph.graph_runtime import context_kwargs
from tinyagents.graph.interrupts import Interrupt
from tinyagents.graph.state import ROOT
from tinyagents.graph.types import START, UNSET, Command, Send

if TYPE_CHECKING:
    from tinyagents.graph.checkpointing import Head
    from tinyagents.graph.core import GraphCore, NodeSpec
    from tinyagents.runs.host import RunHost
    from tinyagents.store.checkpoint.base import Checkpointer


class Task:
    """A node scheduled in a superstep; ``writes`` is set once it finished.

    The id is a hash of (lineage, namespace, step, node, index): the same task gets the same
    id when a step is resumed or replayed after a crash. It is computed on first use, since
    a graph without checkpointer or runtime never needs it.
    """

    __slots__ = (
        "_id",
        "arg",
        "attempts",
        "goto",
        "handled",
        "index",
        "interrupts",
        "key",
        "node",
        "resume",
        "returned",
        "skipped",
        "skipped_by",
        "spec",
        "writes",
    )

    def __init__(
        self, *, node: str, index: int, spec: NodeSpec, arg: Any, key: tuple[str, str, int]
    ) -> None:
        self._id: str | None = None
        self.key = key
        self.node = node
        self.index = index
        self.spec = spec
        self.arg = arg
        self.writes: list[tuple[str, Any]] | None = None
        #: the writes as the node returned them, where the state keeps them changed (role
        #: dicts made LangChain messages): the ``updates`` and ``tasks`` streams show these,
        #: as LangGraph's do; None when they are ``writes``
        self.returned: list[tuple[str, Any]] | None = None
        self.goto: list[str | Send] = _EMPTY
        self.interrupts: list[Interrupt] = _EMPTY
        self.resume: dict[str, Any] = {}
        self.attempts = 0
        self.skipped = False
        #: the ``steering_ref`` of the cancel that skipped it, when known
        self.skipped_by: str | None = None
        #: finished by its node's error handler (``add_node(..., error_handler=...)``): it
        #: goes where the handler's goto says only
        self.handled = False

    @property
    def id(self) -> str:
        if self._id is None:
            self._id = task_id(self.key, self.node, self.index)
        return self._id

    @property
    def runnable(self) -> bool:
        """Not finished, and either never paused or holding an answer to a pending interrupt."""
        if self.writes is not None:
            return False
        if not self.interrupts:
            return True
        return any(i.id in self.resume for i in self.interrupts)

    def __repr__(self) -> str:
        return f"<Task {self.node}#{self.index}>"


_EMPTY: list[Any] = []  # shared, never mutated: tasks replace it


def task_id(key: tuple[str, str, int], node: str, index: int) -> str:
    """The id of task ``index`` of ``node`` in the step ``key`` (lineage, namespace, step)."""
    lineage, ns, step = key
    return stable_id("t-", lineage, ns, step, node, index)


_Shown = TypeVar("_Shown", Task, Planned)


def shown_writes(task: Task) -> list[tuple[str, Any]] | None:
    """``task``'s writes as its node returned them: what the ``updates`` and ``tasks`` streams
    show (LangGraph's show a node's return before its reducers read it)."""
    return task.writes if task.returned is None else task.returned


def collected(writes: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """A task's writes as its result (a ``tasks`` stream item's, a ``TaskState``'s), as
    LangGraph's: a key written more than once holds ``{"$writes": [each value]}``."""
    result: dict[str, Any] = {}
    many: set[str] = set()
    for key, value in writes:
        if key not in result:
            result[key] = value
            continue
        if key not in many:
            many.add(key)
            result[key] = {"$writes": [result[key]]}
        result[key]["$writes"].append(value)
    return result


def shown(graph: GraphCore, tasks: list[_Shown]) -> list[_Shown]:
    """``tasks`` (or a frontier) in the order LangGraph lists them (a snapshot's tasks, the
    starts of a step's tasks in the ``tasks`` stream): the ``Send`` tasks as they were made,
    then the other nodes in ``add_node`` order."""
    order = {node: i for i, node in enumerate(graph.nodes)}
    return sorted(tasks, key=lambda t: -1 if t.arg is not UNSET else order.get(t.node, 0))


def started(tasks: list[Task]) -> list[Task]:
    """``tasks`` of one step in the order LangGraph starts them (``prepare_next_tasks``): the
    ``Send`` tasks as they were made, then the other nodes by name. Tasks that do not wait
    finish in this order, so a step's ``updates`` items and ``tasks`` ends come in it; the
    writes are applied in task order all the same."""
    # two passes and a sort by a C key, no tuple per task: this runs for every step
    sends = [t for t in tasks if t.arg is not UNSET]
    if not sends:
        return sorted(tasks, key=_NODE) if len(tasks) > 1 else tasks
    nodes = [t for t in tasks if t.arg is UNSET]
    nodes.sort(key=_NODE)
    return sends + nodes


#: a task's node name, as the sort key of LangGraph's orders (sorts are stable: tasks of one
#: node keep their index order)
_NODE = attrgetter("node")


def plan_tasks(graph: GraphCore, head: Head) -> list[Task]:
    """The one task builder: the tasks of ``head``'s next superstep (its frontier), each with
    what it already did in an unfinished step (its records: writes, interrupts, answers)."""
    nodes, records = graph.nodes, head.records
    key = (head.lineage, head.ns, head.step + 1)
    tasks = []
    for index, planned in enumerate(head.frontier):
        if planned.node == START:
            continue  # an input not applied yet: no node of the graph (``pending_input``)
        spec = nodes[planned.node]
        if planned.timeout is not None:  # a Send's own timeout, in place of its node's
            spec = replace(spec, timeout=planned.timeout, plain=False)
        task = Task(node=planned.node, index=index, spec=spec, arg=planned.arg, key=key)
        rec = records.get(task.id) if records else None
        if rec is not None:
            task.writes = rec.writes
            task.goto = rec.goto
            task.interrupts = rec.interrupts
            task.resume = rec.resume
            task.skipped = rec.skipped
            task.skipped_by = rec.skipped_by
            task.handled = rec.handled
        tasks.append(task)
    if len(tasks) > 1:
        # LangGraph's task order, which a step's writes follow: the nodes by name, then the
        # Sends as they were made. A step's own frontier is in it already; a run input's
        # goto is appended to the pending tasks (their index is their id), so is sorted here
        # (built in index order, and the sort is stable: a node's tasks keep it)
        ordered = [t for t in tasks if t.arg is UNSET]
        ordered.sort(key=_NODE)
        if len(ordered) < len(tasks):
            ordered += [t for t in tasks if t.arg is not UNSET]
        return ordered
    return tasks


class TaskRun(Protocol):
    """What a task needs of the run it belongs to (``executor.GraphRun``, which imports this
    module): where it runs, the state view, and how to run a sub-graph or an agent node."""

    @property
    def graph(self) -> GraphCore: ...

    @property
    def head(self) -> Head: ...

    @property
    def checkpointer(self) -> Checkpointer | None: ...

    @property
    def nested(self) -> bool: ...

    @property
    def unsaved_by(self) -> str | None: ...

    @property
    def run_id(self) -> str | None: ...

    @property
    def runtime(self) -> RunHost | None: ...

    @property
    def progress(self) -> Progress | None: ...

    def view(self) -> Any: ...

    def view_for(self, spec: NodeSpec) -> Any: ...

    async def run_subgraph(self, task: Task) -> Any: ...

    async def run_agent(self, task: Task) -> Any: ...


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class Writes(Record):
    """Writes already in channel form (a sub-graph's output: several per channel allowed)."""

    writes: list[tuple[str, Any]]
    goto: list[str | Send] = field(default_factory=list)


def read_output(run: TaskRun, task: Task, out: Any) -> None:
    """Node return value → ``task.writes`` / ``task.goto``."""
    schema = run.graph.schema
    task.returned = None  # (an earlier attempt's, had it returned)
    if schema.root:  # a one-value state: the output is the value
        _read_root(run, task, out)
    elif type(out) is dict:
        if not out.keys() <= schema.channels.keys():  # the hot path formats no error text
            schema.check_keys(out, f"node {task.node!r}")
        task.writes = list(out.items())
    elif out is None:
        task.writes = []
    elif isinstance(out, Mapping):
        schema.check_keys(out, f"node {task.node!r}")
        task.writes = list(out.items())
    elif isinstance(out, Command):
        if out.graph == Command.PARENT:
            raise ParentCommand(out)
        task.writes, task.goto = _read_command(run, task, out)
    elif isinstance(out, Writes):
        task.writes, task.goto = out.writes, out.goto
    elif isinstance(out, (list, tuple)) and out and any(isinstance(c, Command) for c in out):
        # several Commands, as LangGraph takes them: their updates in order, all their gotos;
        # an item that is no Command is read as a node's output (a dict, None, a state
        # instance), as LangGraph reads it
        all_writes: list[Any] = []
        all_goto: list[str | Send] = []
        for item in out:
            goto: list[str | Send] = []
            if not isinstance(item, Command):
                writes = _read_plain(run, task, item)
            elif item.graph == Command.PARENT:
                raise GraphError(
                    f"node {task.node!r}: Command(graph=Command.PARENT) in a list of Commands "
                    "is not supported; return it alone"
                )
            else:
                writes, goto = _read_command(run, task, item)
            all_writes.extend(writes)
            all_goto.extend(goto)
        # set once all are read: a bad item fails the node with nothing written
        task.writes, task.goto = all_writes, all_goto
    elif isinstance(out, Send):
        raise InvalidUpdateError(
            f"node {task.node!r} returned a Send; a node routes with Command(goto=Send(...)) "
            "or a conditional edge that returns Sends"
        )
    else:  # a state instance, or a clear InvalidUpdateError ((key, value) pairs too)
        who = f"node {task.node!r}"
        task.writes = schema.writes_of(out, who, pairs=False)
    if schema.langchain_keys and task.writes:
        # role dicts and strings for a field typed as LangChain messages: made messages now,
        # so one that is no message fails this node, named, with nothing written
        writes, task.writes = task.writes, None
        task.writes = schema.node_writes(writes, f"node {task.node!r}")
        if task.writes is not writes:
            task.returned = writes


def _read_root(run: TaskRun, task: Task, out: Any) -> None:
    """A node's return value in a one-value state, read as LangGraph's: None writes
    nothing; a ``Command`` (or a list holding Commands) its update and goto, the list's
    other items values; anything else is the value."""
    if out is None:
        task.writes = []
    elif isinstance(out, Command):
        if out.graph == Command.PARENT:
            raise ParentCommand(out)
        task.writes, task.goto = _read_command(run, task, out)
    elif isinstance(out, Writes):
        task.writes, task.goto = out.writes, out.goto
    elif isinstance(out, (list, tuple)) and out and any(isinstance(c, Command) for c in out):
        writes: list[Any] = []
        goto: list[str | Send] = []
        for item in out:
            if not isinstance(item, Command):
                writes.append((ROOT, item))
            elif item.graph != Command.PARENT:  # (LangGraph's skips it)
                more, where = _read_command(run, task, item)
                writes.extend(more)
                goto.extend(where)
        task.writes, task.goto = writes, goto
    else:
        task.writes = [(ROOT, out)]


def _read_plain(run: TaskRun, task: Task, out: Any) -> list[Any]:
    """The writes of an item of a node's list that is no ``Command``: a dict, None or a state
    instance (anything else is an ``InvalidUpdateError``)."""
    who = f"node {task.node!r}"
    if out is None:
        return []
    if isinstance(out, Mapping):
        run.graph.schema.check_keys(out, who)
        return list(out.items())
    if isinstance(out, (Send, list, tuple)):
        raise InvalidUpdateError(
            f"{who} returned a list holding a {type(out).__name__}; beside its Commands a "
            "list may hold dicts of state updates (or None)"
        )
    return run.graph.schema.writes_of(out, who, pairs=False)


def _read_command(
    run: TaskRun, task: Task, out: Command[Any]
) -> tuple[list[Any], list[str | Send]]:
    """The writes and goto of a ``Command`` a node returned (not ``Command.PARENT``)."""
    if out.graph is not None:
        raise GraphError(f"node {task.node!r}: Command(graph={out.graph!r}) is not supported")
    if out.resume is not UNSET:
        raise GraphError(f"node {task.node!r}: a node cannot return Command(resume=...)")
    update = run.graph.schema.command_writes(out.update, f"node {task.node!r}'s Command")
    goto = out.goto_list()
    run.graph.check_goto(goto, f"node {task.node!r}")
    return update, goto


async def _invoke(run: TaskRun, task: Task, attempt: int) -> Any:
    spec = task.spec
    if spec.subgraph is not None:
        return await run.run_subgraph(task)
    if spec.agent is not None:
        return await run.run_agent(task)
    try:
        arg = run.view_for(spec) if task.arg is UNSET else task.arg
        fn = spec.fn
        assert fn is not None
        threaded = spec.timeout is not None and not spec.is_async
        if spec.takes_ctx:
            ctx = NodeContext(
                task_id=task.id,
                node=task.node,
                step=run.head.step + 1,
                thread_id=run.head.thread_id,
                ns=run.head.ns,
                attempt=attempt,
                run_id=run.run_id,
                runtime=run.runtime,
                _run=run,
            )
            args: tuple[Any, ...] = (arg, ctx)
            if spec.ctx_names:  # config / writer / store / runtime, by name, as LangGraph
                fn, args = functools.partial(fn, **context_kwargs(spec.ctx_names, ctx)), (arg,)
            if threaded:
                ctx._loop, ctx._attempt = asyncio.get_running_loop(), ThreadAttempt()
                out = await in_node_thread(ctx._loop, task.node, fn, *args, attempt=ctx._attempt)
            else:
                out = fn(*args)
        elif threaded:
            out = await in_node_thread(asyncio.get_running_loop(), task.node, fn, arg)
        else:
            out = fn(arg)
        if spec.is_async or inspect.isawaitable(out):
            out = await out
    except BaseException as exc:
        scope = enclosing_scope()
        if isinstance(scope, TaskScope) and scope.started:
            await settle(scope, exc)
        failure = user_failure(f"node {task.node!r}", exc)
        if failure is exc:
            raise
        raise failure from exc
    scope = enclosing_scope()
    if isinstance(scope, TaskScope) and scope.started:
        await settle(scope)
    return out


async def settle(scope: TaskScope, failed: BaseException | None = None) -> None:
    """Wait for the ``@task`` calls the node started and did not await (``scope.started``):
    each runs to its end before the node's attempt ends, as LangGraph's task is one of the
    node's step; a node cancelled cancels them. ``failed``: how the node ended, if it raised.
    The questions of the calls that paused are the node's (with its own, if it asked)."""
    started, scope.started = scope.started or [], None
    if isinstance(failed, asyncio.CancelledError):
        for future in started:
            future.cancel()
    outcomes = await asyncio.gather(
        *(asyncio.wrap_future(f) if isinstance(f, ConcurrentFuture) else f for f in started),
        return_exceptions=True,
    )
    if failed is not None and not isinstance(failed, NodeInterrupt):
        return
    asked = list(failed.interrupts) if isinstance(failed, NodeInterrupt) else []
    seen = {i.id for i in asked}
    for outcome in outcomes:
        if isinstance(outcome, NodeInterrupt):
            asked.extend(i for i in outcome.interrupts if i.id not in seen)
            seen.update(i.id for i in outcome.interrupts)
    if asked and (failed is None or len(asked) > len(failed.interrupts)):
        raise NodeInterrupt(asked) from None


async def _output(run: TaskRun, task: Task, attempt: int) -> Any:
    """What the node returned, or the ``Command.PARENT`` of a sub-graph it called."""
    try:
        return await _invoke(run, task, attempt)
    except CalledCommand as called:
        return called_output(called)


def called_output(called: CalledCommand) -> Command[Any]:
    """The ``Command.PARENT`` of a sub-graph a node called, as that node's output (what it
    is for a sub-graph node)."""
    cmd: Command[Any] = called.command
    return Command(update=cmd.update, goto=cmd.goto)


async def call_node(run: TaskRun, task: Task) -> None:
    """Run ``task`` to a result; raises ``NodeInterrupt`` or the node's last error."""
    spec = task.spec
    scope = TaskScope(
        task=task,
        ns=run.head.ns,
        resume=task.resume,
        checkpointed=run.checkpointer is not None,
        run=run,
        began=time.time(),
    )
    if run.unsaved_by is not None:
        scope.unsaved_by = run.unsaved_by
    token = set_scope(scope)
    try:
        if not spec.retry and spec.timeout is None:
            task.attempts = 1
            try:
                out = await _invoke(run, task, 1)
            except CalledCommand as called:
                out = called_output(called)
            try:
                read_output(run, task, out)
            except ParentCommand:
                _check_parent(run, task)
                raise
            return
        attempt = 0
        while True:
            attempt += 1
            task.attempts = attempt
            scope.restart()  # every attempt counts its interrupt() calls from zero
            try:
                if spec.timeout is None:
                    out = await _output(run, task, attempt)
                else:
                    out = await _timed(run, task, attempt, scope)
                read_output(run, task, out)
                return
            except ParentCommand:
                _check_parent(run, task)
                raise
            except Exception as exc:
                # as LangGraph's: the first policy that takes the error decides, and the
                # attempts count across the policies
                retry = None
                if not isinstance(exc, TinyAgentsError) or isinstance(exc, NodeTimeoutError):
                    retry = next((p for p in spec.retry if p.should_retry(exc)), None)
                if retry is None or attempt >= retry.max_attempts:
                    raise
                await asyncio.sleep(retry.interval(attempt))
    finally:
        reset_scope(token)


async def _timed(run: TaskRun, task: Task, attempt: int, scope: TaskScope) -> Any:
    """``_output`` within the node's ``TimeoutPolicy``: its ``run_timeout`` seconds in all
    and, with an ``idle_timeout``, never that long without progress (``scope.progress``,
    the clock ``heartbeat()`` and, under ``refresh_on="auto"``, what it streams and the
    ``@task`` calls it makes move on), else a ``NodeTimeoutError`` of that ``kind`` (a
    ``TimeoutError`` the node raised itself is raised as it is, as LangGraph's is). A node
    that catches the timeout's cancel and returns timed out all the same, as LangGraph's:
    what it returned is dropped."""
    policy = task.spec.timeout
    assert policy is not None
    run_timeout, idle_timeout = policy.seconds()
    loop = asyncio.get_running_loop()
    began = loop.time()
    deadline = None if run_timeout is None else began + run_timeout
    kind = "run"
    cause: TimeoutError | None = None
    try:
        async with asyncio.timeout_at(deadline) as bound:
            if idle_timeout is None:
                out = await _output(run, task, attempt)
            else:
                idle_s = idle_timeout
                clock = scope.progress = Progress(policy.refresh_on == "auto", run.progress)
                check: asyncio.TimerHandle | None = None

                def idle() -> None:  # at the idle deadline: moved on since, or timed out?
                    nonlocal check, kind
                    left = clock.last + idle_s - time.monotonic()
                    if left > 0:
                        check = loop.call_later(left, idle)
                    elif not bound.expired():
                        kind = "idle"
                        bound.reschedule(loop.time())

                check = loop.call_later(idle_s, idle)
                try:
                    out = await _output(run, task, attempt)
                finally:
                    check.cancel()
                    scope.progress = None
        if not bound.expired():
            return out
    except TimeoutError as exc:
        if not bound.expired():
            raise
        cause = exc
    fired = idle_timeout if kind == "idle" else run_timeout
    assert fired is not None
    raise NodeTimeoutError(
        task.node,
        fired,
        loop.time() - began,
        kind=kind,
        run_timeout=run_timeout,
        idle_timeout=idle_timeout,
    ) from cause


def _check_parent(run: TaskRun, task: Task) -> None:
    if not run.nested:
        raise GraphError(
            f"node {task.node!r} returned Command(graph=Command.PARENT) but the graph is not "
            "running as a sub-graph"
        )


__all__ = [
    "Task",
    "TaskRun",
    "Writes",
    "call_node",
    "called_output",
    "in_node_thread",
    "read_output",
    "settle",
    "shown",
    "stray_cancel",
    "task_id",
]


async def in_node_thread(
    loop: asyncio.AbstractEventLoop,
    node: str,
    fn: Callable[..., Any],
    *args: Any,
    attempt: ThreadAttempt | None = None,
) -> Any:
    """A sync node with a timeout, run in a worker thread, so the timeout can end the wait
    for it (inline it would hold the event loop past it); a thread of its own, never one of
    the loop's executor's few workers, which a stuck node would hold. On a timeout (or a
    cancel) the thread runs on to its end, as Python cannot stop it: its result is dropped,
    and so is what it streams or any ``@task`` it calls from then on (``ThreadAttempt``;
    ``attempt``: its node context's, whose ``steer`` and ``grant`` it refuses then)."""
    attempt = ThreadAttempt() if attempt is None else attempt
    try:
        return await in_own_thread(_threaded, loop, attempt, fn, *args, name=f"node {node}")
    finally:
        attempt.ended = True


def _threaded(
    loop: asyncio.AbstractEventLoop, attempt: ThreadAttempt, fn: Callable[..., Any], *args: Any
) -> Any:
    """Call a sync node in its worker thread, ``loop`` (the run's) its ``caller_loop``: a
    graph it runs with ``run_sync`` (an entrypoint's ``invoke``) is a sub-graph call on the
    run's loop. A ``StopIteration`` it raises cannot be handed from the thread to the
    awaiting future (asyncio refuses it, and the wait would last until the node's timeout):
    it is raised as the ``RuntimeError`` Python makes of it in a coroutine, where the node
    runs without a timeout."""
    caller_loop.set(loop)  # this thread's own context (a copy: in_own_thread's)
    thread_attempt.set(attempt)
    try:
        return fn(*args)
    except StopIteration as exc:
        raise RuntimeError("the node raised StopIteration (next() on an empty iterator?)") from exc


def stray_cancel(node: str) -> NodeCancelledError:
    """The error of a node that raised ``CancelledError`` though nothing cancelled its task
    (a cancel of something it awaited, let through): it fails the node. Taken for a cancel,
    its parallel step took the task for one a cancel stopped, and the run ended
    ``interrupted`` with nothing to answer."""
    return NodeCancelledError(node)
