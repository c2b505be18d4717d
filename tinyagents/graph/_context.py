"""The running task, found through a ``ContextVar`` so ``interrupt()`` needs no argument.

Each task of a superstep runs in its own ``asyncio`` task (or inline, for a one-task step),
so the variable is always the scope of the node that called ``interrupt()``.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Coroutine
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, TypeVar

from tinyagents._record import Record
from tinyagents.errors import GraphError
from tinyagents.graph.interrupts import Interrupt, ResponseSchema

T = TypeVar("T")


class NodeInterrupt(BaseException):
    """Raised by ``interrupt()`` to unwind the node.

    A ``BaseException`` on purpose: a node's ``except Exception`` must not swallow the pause,
    and a retry policy must not retry it.
    """

    def __init__(self, interrupts: list[Interrupt]) -> None:
        super().__init__(f"{len(interrupts)} interrupt(s)")
        self.interrupts = interrupts


class ParentCommand(BaseException):
    """Carries a ``Command(graph=Command.PARENT)`` out of a sub-graph to its parent task."""

    def __init__(self, command: Any) -> None:
        super().__init__("command for the parent graph")
        self.command = command


class CalledCommand(BaseException):
    """A ``ParentCommand`` of a sub-graph called from inside a node, on its way out of the
    node function: the task that called the sub-graph takes it as its own output.

    A ``BaseException`` so the node's ``except Exception`` lets it through.
    """

    def __init__(self, command: Any) -> None:
        super().__init__("command for the graph of the calling node")
        self.command = command


#: What a node, router or reducer may raise that is no ``Exception`` and goes on as it is: the
#: program being interrupted, a cancel, a generator's close (a node's failure as it stands)
#: and the graph's own signals.
LET_THROUGH = (
    KeyboardInterrupt,
    asyncio.CancelledError,
    GeneratorExit,
    NodeInterrupt,
    ParentCommand,
    CalledCommand,
)


def user_failure(what: str, exc: BaseException) -> BaseException:
    """The error ``what`` (``"node 'a'"``, a router, a reducer) failed with, having raised
    ``exc``: ``exc`` itself, but for a ``SystemExit`` (``sys.exit``: let out, it stopped the
    event loop under every run of a runtime) or a ``BaseException`` of a library's own (as
    gevent's ``GreenletExit``: it went past every handler, ended the run's task and left the
    run 'running'), each a ``RuntimeError`` caused by it, that fails the run as any error.
    Raise it ``from exc`` where it is not ``exc``."""
    if isinstance(exc, (Exception, *LET_THROUGH)):
        return exc
    if isinstance(exc, SystemExit):
        return RuntimeError(f"{what} tried to exit the process (SystemExit: {exc.code})")
    return RuntimeError(
        f"{what} raised {type(exc).__name__}, a BaseException that is no Exception: {exc}"
    )


def stable_id(prefix: str, *parts: object) -> str:
    """A short deterministic id: the same parts give the same id in every process."""
    raw = "\x1f".join(map(str, parts)).encode()
    return f"{prefix}{hashlib.blake2b(raw, digest_size=8).hexdigest()}"


class Progress:
    """The idle clock of one timed attempt (``TimeoutPolicy.idle_timeout``): ``last``, when
    the node last made progress (``time.monotonic()``). ``beat``: ``heartbeat()``, always;
    ``moved``: what it streams or a ``@task`` it calls, only when ``auto``
    (``refresh_on="auto"``). Set from the node's worker thread too: a float, read by the loop.

    ``outer``: the clock of the timed attempt of the node that called the sub-graph (or the
    ``@task``) this attempt runs in, if any: progress here is progress there too, as
    LangGraph's sub-graph reports its nodes' starts, ends and stream through its caller's
    timed attempt (each clock takes a ``moved`` under its own ``refresh_on`` only)."""

    __slots__ = ("auto", "last", "outer")

    def __init__(self, auto: bool, outer: Progress | None = None) -> None:
        self.auto = auto
        self.last = time.monotonic()
        self.outer = outer

    def beat(self) -> None:
        self.last = time.monotonic()
        if self.outer is not None:
            self.outer.beat()

    def moved(self) -> None:
        if self.auto:
            self.last = time.monotonic()
        if self.outer is not None:
            self.outer.moved()


def progress_here() -> Progress | None:
    """The idle clock progress made here counts on, if any: that of the timed node attempt
    running here, else the one its run reports to (``GraphRun.progress``: a sub-graph's,
    or a ``@task``'s, called inside a timed attempt)."""
    scope = _scope.get()
    if isinstance(scope, TaskScope):
        clock = scope.progress
        if clock is None and scope.run is not None:
            clock = scope.run.progress
        return clock
    if isinstance(scope, UnsavedScope) and scope.run is not None:
        return scope.run.progress  # type: ignore[no-any-return]
    return None


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class TaskScope(Record):
    """What ``interrupt()`` needs to know about the task that is running."""

    task: Any  # tasks.Task: its id is computed only if an interrupt needs it
    ns: str
    resume: dict[str, Any]
    checkpointed: bool
    #: the executor.GraphRun the task belongs to (a sub-graph called in the node runs in it)
    run: Any = None
    counter: int = 0
    #: sub-graphs the node called so far (each call gets its own namespace)
    calls: int = 0
    #: the ``compile(checkpointer=False)`` sub-graph that makes the run save nothing under
    #: a checkpointed parent (``GraphRun.unsaved_by``), for ``interrupt()``'s error
    unsaved_by: str | None = None
    #: the futures of the ``@task`` calls the node started (asyncio's, or concurrent's from a
    #: thread), until its attempt ends: each runs to its end within the node's (``settle``)
    started: list[Any] | None = None
    #: the idle clock of the node's attempt when its ``TimeoutPolicy`` has an
    #: ``idle_timeout`` (``tasks._timed``), else None
    progress: Progress | None = None
    #: when the node's first attempt began (``time.time()``, set by ``tasks.call_node``):
    #: ``GraphRuntime.execution_info.node_first_attempt_time``
    began: float | None = None

    def restart(self) -> None:
        """A new attempt of the node: it counts its interrupts and sub-graph calls anew."""
        self.counter = 0
        self.calls = 0

    def interrupt(self, value: Any, schema: ResponseSchema | None = None) -> Any:
        index = self.counter
        self.counter += 1
        task = self.task
        interrupt_id = stable_id("i-", task.id, index)
        if interrupt_id in self.resume:
            answer = self.resume[interrupt_id]
            return answer if schema is None else schema.check(answer, interrupt_id)
        if not self.checkpointed and self.unsaved_by is not None:
            raise GraphError(unsaved_interrupt(task.node, self.unsaved_by))
        if not self.checkpointed:
            raise GraphError(
                f"interrupt() in node {task.node!r} needs a checkpointer to resume from: "
                "compile(checkpointer=MemoryCheckpointer()) or a SqliteCheckpointer"
            )
        raise NodeInterrupt(
            [
                Interrupt(
                    id=interrupt_id,
                    value=value,
                    task_id=task.id,
                    node=task.node,
                    ns=self.ns,
                    index=index,
                    response_schema=None if schema is None else schema.json,
                    check=schema,
                )
            ]
        )


class UnsavedScope:
    """The scope of every node of a run without checkpointer (``run``, which makes it
    once: ``GraphRun.unsaved_scope``): nothing to resume from. ``by``: the
    ``compile(checkpointer=False)`` sub-graph that makes the run so under a checkpointed
    parent (``GraphRun.unsaved_by``), for the error to name.

    It also knows the task the run's executor calls on its fast path (``task``, set around
    the call): a ``@task`` that node calls takes a ``TaskScope`` of that task (``promote``),
    so it is the run's, streamed in it (if streamed) and ended within the node's step, as
    with a scope of its own, whether the run is streamed or not. The fast path makes no
    ``TaskScope`` for a node that calls no task."""

    __slots__ = ("by", "promoted", "run", "task")

    def __init__(self, by: str | None = None, run: Any = None) -> None:
        self.by = by
        self.run = run
        self.task: Any = None
        self.promoted: TaskScope | None = None

    def promote(self) -> TaskScope | UnsavedScope:
        """The scope of the task the fast path is calling (made at its first ``@task``
        call, then kept until the call ends), else this one."""
        task = self.task
        if task is None:
            return self
        promoted = self.promoted
        if promoted is None:
            run = self.run
            promoted = self.promoted = TaskScope(
                task=task, ns=run.head.ns, resume=task.resume, checkpointed=False, run=run
            )
            if self.by is not None:
                promoted.unsaved_by = self.by
        return promoted

    def interrupt(self, value: Any, schema: ResponseSchema | None = None) -> Any:
        if self.by is not None:
            raise GraphError(unsaved_interrupt("", self.by))
        raise GraphError(
            "interrupt() needs a checkpointer to resume from: "
            "compile(checkpointer=MemoryCheckpointer()) or a SqliteCheckpointer"
        )


def unsaved_interrupt(node: str, by: str) -> str:
    """Why ``interrupt()`` in a ``compile(checkpointer=False)`` sub-graph ``by`` cannot
    pause. LangGraph's pauses, then runs the whole sub-graph again on every resume, so a
    second ``interrupt()`` in it asks for ever."""
    where = f" in node {node!r}" if node else ""
    return (
        f"interrupt(){where} cannot pause: it runs in {by}, compiled with "
        "checkpointer=False, which saves nothing to resume from; compile it with "
        "checkpointer=None (checkpointed with its parent's, per call) or True (its own "
        "state, kept between calls)"
    )


_scope: ContextVar[TaskScope | UnsavedScope | None] = ContextVar(
    "tinyagents_graph_task", default=None
)


def current_scope() -> TaskScope | UnsavedScope:
    scope = _scope.get()
    if scope is None:
        raise GraphError(
            "interrupt() can only be called inside a running graph node (not in a router of "
            "add_conditional_edges, which runs after the step: ask in the node and route on "
            "its answer)"
        )
    return scope


#: The scope of the graph node running in this context, if any (``TaskScope``, or
#: the run's ``UnsavedScope`` in a run that saves nothing): a graph run from inside a node is a sub-graph
#: call of that node's task. The ContextVar's own ``get``: no Python frame per top-level run.
enclosing_scope: Callable[[], TaskScope | UnsavedScope | None] = _scope.get


#: Enter a node's scope (``TaskScope``, ``UnsavedScope``, or None) and leave it again with the
#: token: the ContextVar's own methods, as ``enclosing_scope``, no Python frame around them
#: (a streamed run sets its scope around every step).
set_scope: Callable[[TaskScope | UnsavedScope | None], Token[TaskScope | UnsavedScope | None]] = (
    _scope.set
)
reset_scope: Callable[[Token[TaskScope | UnsavedScope | None]], None] = _scope.reset

#: The routers being called (``GraphCore.route``): ``[scope, config, i, store]``, the scope
#: they run in, the ``RouterConfig`` of their finished tasks, the index of the one whose
#: routers run now and their graph's store, for ``get_runtime()`` in a router; a node of another run started from a router
#: has a scope of its own, so it does not read this.
routing: ContextVar[list[Any] | None] = ContextVar("tinyagents_graph_routing", default=None)

#: The event loop of the run whose sync entrypoint or task runs on this thread (set by
#: ``graph.func`` around such a function): a graph or an entrypoint run from there with
#: ``run_sync`` / ``invoke`` runs on that loop, a sub-graph call of the task, whose
#: checkpointer (a PostgreSQL pool) belongs to that loop; None elsewhere.
caller_loop: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar(
    "tinyagents_graph_caller_loop", default=None
)


@dataclass(slots=True, kw_only=True, eq=False)
class ThreadAttempt(Record):
    """One attempt of a sync node on a worker thread of its own (``timeout=``). ``ended`` once
    the run stopped waiting for it: a timeout (or a cancel) abandons the thread, which Python
    cannot stop, and what it writes from then on is dropped."""

    ended: bool = False


#: The attempt the sync node running on this worker thread belongs to (set by
#: ``graph.tasks`` in the thread's own context); None elsewhere.
thread_attempt: ContextVar[ThreadAttempt | None] = ContextVar(
    "tinyagents_graph_thread_attempt", default=None
)


def emit_unless_ended(
    emit: Callable[[str, Any], None], attempt: ThreadAttempt | None, task_id: str, value: Any
) -> None:
    """``emit(task_id, value)`` on the run's loop, handed there from a node's worker thread:
    dropped if that node's attempt ``ended`` (timed out) before the loop got to it."""
    if attempt is None or not attempt.ended:
        emit(task_id, value)


def run_blocking(running: Coroutine[Any, Any, T]) -> T:
    """Run the coroutine ``running`` to its end from a thread without a running loop and
    return its result: on ``caller_loop``'s loop when there is one (waiting here for it),
    else with ``asyncio.run``."""
    loop = caller_loop.get()
    if loop is None or loop.is_closed():
        return asyncio.run(running)
    return asyncio.run_coroutine_threadsafe(running, loop).result()
