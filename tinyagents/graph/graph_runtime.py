"""``GraphRuntime``: LangGraph's ``Runtime``, what a run hands its nodes besides the state.

A node, router, ``@entrypoint`` or ``@task`` function with a parameter named ``runtime``
gets one, and ``get_runtime()`` / ``get_stream_writer()`` read it inside a node or task:

    def greet(state: State, runtime: GraphRuntime[Ctx]) -> dict:
        return {"text": f"hello {runtime.context.user}"}

    graph = StateGraph(State, context_schema=Ctx).add_node("greet", greet)...compile()
    await graph.run({}, context=Ctx(user="ada"))

The context is the run's (``run(..., context=...)``), the same object for every node and
sub-graph of the run; it is not saved with the checkpoints, so a run that continues a thread
(a resume) is given it again, as in LangGraph. Named ``GraphRuntime`` because ``Runtime`` is
tinyagents' composition root (``tinyagents.Runtime``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import warnings
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, get_args, is_typeddict

from pydantic import BaseModel, ValidationError

from tinyagents._record import FrozenRecord
from tinyagents.errors import ArgumentError, GraphError
from tinyagents.graph._context import (
    Progress,
    TaskScope,
    caller_loop,
    emit_unless_ended,
    enclosing_scope,
    progress_here,
    routing,
    thread_attempt,
)
from tinyagents.graph.longterm import node_store
from tinyagents.protocol.ids import shown_repr

if TYPE_CHECKING:
    from tinyagents.graph.context import NodeContext
    from tinyagents.store.longterm.base import GraphStore

ContextT = TypeVar("ContextT")

#: LangGraph's ``durability`` values; ours saves each step's checkpoint before the next step
#: starts (its "sync"), and takes "async" as that (it is stronger); "exit" holds the run's
#: saves until it ends (``store.checkpoint.exit_buffer``; refused in a ``Runtime``)
Durability = Literal["sync", "async", "exit"]
DURABILITY: tuple[str, ...] = get_args(Durability)


def _no_writer(value: Any) -> None:
    """The stream writer of a run that is not streamed: what it is given goes nowhere."""


def _no_heartbeat() -> None:
    """``heartbeat()`` outside a node attempt with an ``idle_timeout``: nothing to refresh."""


def _heartbeat_here() -> Callable[[], None]:
    """The ``heartbeat`` of the node attempt running here: its idle clock's, if it has one."""
    clock = progress_here()
    return _no_heartbeat if clock is None else clock.beat


def _moving(writer: Callable[[Any], None], clock: Progress) -> Callable[[Any], None]:
    """``writer``, which under ``refresh_on="auto"`` also counts as progress of ``clock``,
    the attempt's idle clock (streamed or not, as LangGraph's guarded writer)."""

    def write(value: Any) -> None:
        clock.moved()
        writer(value)

    return write


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ExecutionInfo(FrozenRecord):
    """Where the node (or task) reading it runs, LangGraph 1.2's ``Runtime.execution_info``:
    ``checkpoint_id``, the checkpoint its step runs from (None in a run without
    checkpointer, which saves none); ``checkpoint_ns``, its task's namespace
    (``"node:task_id"``, under its sub-graph's); ``task_id``; ``thread_id`` (None without
    checkpointer, as LangGraph's); ``run_id``, the ``Runtime``'s run (None outside one);
    ``node_attempt``, counted from 1 across retries; ``node_first_attempt_time``, when its
    first attempt began (``time.time()``; None for a plain node of a run that saves nothing,
    which the executor calls inline, untimed)."""

    checkpoint_id: str | None
    checkpoint_ns: str
    task_id: str
    thread_id: str | None = None
    run_id: str | None = None
    node_attempt: int = 1
    node_first_attempt_time: float | None = None

    def patch(self, **overrides: Any) -> ExecutionInfo:
        """A copy with ``overrides`` (LangGraph's ``ExecutionInfo.patch``)."""
        return replace(self, **overrides)


def execution_info_here() -> ExecutionInfo | None:
    """The ``ExecutionInfo`` of the node or task running here, None outside one (or in a
    router on ``START``, which runs as the input is applied, before any task)."""
    scope = enclosing_scope()
    if scope is None:
        return None
    task, run = scope.task, scope.run
    if task is None or run is None:
        return None
    began = scope.began if isinstance(scope, TaskScope) else None
    head = run.head
    ns = f"{task.node}:{task.id}"
    saved = run.checkpointer is not None
    return ExecutionInfo(
        checkpoint_id=head.checkpoint_id if saved else None,
        checkpoint_ns=f"{head.ns}|{ns}" if head.ns else ns,
        task_id=task.id,
        thread_id=head.thread_id if saved else None,
        run_id=run.run_id,
        node_attempt=task.attempts or 1,
        node_first_attempt_time=began,
    )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class GraphRuntime(FrozenRecord, Generic[ContextT]):
    """The run's ``context`` (``run(..., context=)``, None when not given), its long-term
    ``store`` (the graph's ``compile(store=...)``, a sub-graph's parent's: what a parameter
    named ``store`` gets, ``longterm.node_store``; None without one), the ``stream_writer``
    of the task (its ``custom`` stream items) and, for an ``@entrypoint``, the ``previous`` value its thread saved.
    ``heartbeat()``: the node's attempt is making progress (LangGraph 1.2's), which holds off
    its ``TimeoutPolicy(idle_timeout=...)``; nothing without one. ``execution_info``: where
    the node runs (``ExecutionInfo``; None outside a node or task). ``server_info`` is always
    None, as LangGraph's outside LangGraph Server (no server injects one here)."""

    context: ContextT = None  # type: ignore[assignment]
    store: Any = None
    stream_writer: Callable[[Any], None] = _no_writer
    previous: Any = None
    heartbeat: Callable[[], None] = _no_heartbeat
    execution_info: ExecutionInfo | None = None
    server_info: None = None

    def override(self, **changes: Any) -> GraphRuntime[ContextT]:
        """A copy with ``changes`` (LangGraph's ``Runtime.override``)."""
        return replace(self, **changes)


#: the context of the run whose input is being applied (``GraphSession.prepare``), for a
#: router on ``START``, which runs before the run is made
starting_context: ContextVar[Any] = ContextVar("tinyagents_graph_starting_context", default=None)


def run_store(run: Any) -> GraphStore | None:
    """The long-term store the nodes of ``run`` (a ``GraphRun``) see as ``runtime.store``:
    the one place a store is wired into the runtime, the store a parameter named ``store``
    gets (``longterm.node_store``). A plain node on the executor's fast path finds its run
    through the run's ``UnsavedScope`` (``GraphRun.unsaved_scope``), which always knows it."""
    return node_store(run)


def runtime_of(
    ctx: NodeContext | None, previous: Any = None, graph_store: GraphStore | None = None
) -> GraphRuntime[Any]:
    """The runtime of the task (or router) ``ctx`` is the context of (None: a router given
    no context); ``graph_store``: the router's graph's store (``longterm.node_store``)."""
    run = None if ctx is None else ctx._run
    if run is None:  # a router on START, which runs as the input is applied, before the run
        scope = enclosing_scope()  # a sub-graph's: in the task of its parent's run
        run = scope.run if isinstance(scope, TaskScope) else None
        context = starting_context.get() if run is None else run.context
        return GraphRuntime(
            context=context,
            store=node_store(run, graph_store),
            stream_writer=_no_writer if ctx is None else ctx.emit,
            previous=previous,
        )
    return GraphRuntime(
        context=run.context,
        store=node_store(run, graph_store),
        stream_writer=ctx.emit,  # type: ignore[union-attr]
        previous=previous,
        heartbeat=_heartbeat_here(),
        execution_info=execution_info_here(),
    )


def context_kwargs(
    names: tuple[str, ...],
    ctx: NodeContext | None,
    graph_store: GraphStore | None = None,
    previous: Any = None,
) -> dict[str, Any]:
    """What a function's parameters named in ``builder.CONTEXT_PARAMS`` are given, the one
    place for nodes, routers, tasks and entrypoints: the ``NodeContext`` for ``config`` and
    ``writer``; the store for ``store`` (``longterm.node_store``; ``graph_store``: a
    router's graph's); a ``GraphRuntime`` for ``runtime`` (``previous``: an entrypoint's)."""
    kwargs: dict[str, Any] = dict.fromkeys(names, ctx)
    if "store" in kwargs:
        kwargs["store"] = node_store(None if ctx is None else ctx._run, graph_store)
    if "runtime" in kwargs:
        kwargs["runtime"] = runtime_of(ctx, previous, graph_store)
    return kwargs


def _task_writer(run: Any, task_id: str) -> Callable[[Any], None]:
    """``NodeContext.emit`` for a task found through its scope: handed to the run's loop
    when called from a worker thread (a sync node with a timeout, a sync task)."""
    loop = caller_loop.get()

    def write(value: Any) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if loop is not None:  # dropped there if the node's attempt timed out meanwhile
                attempt = thread_attempt.get()
                loop.call_soon_threadsafe(emit_unless_ended, run.emit, attempt, task_id, value)
                return
        run.emit(task_id, value)

    return write


def get_runtime(context_schema: type[ContextT] | None = None) -> GraphRuntime[ContextT]:
    """The runtime of the graph node, router or ``@task`` running here (LangGraph's
    ``get_runtime``; a router's is its node task's, whose stream it writes to, as a
    LangGraph branch runs in its node's task); ``context_schema`` only types the result.
    Outside a node, ``GraphError``."""
    scope = enclosing_scope()
    current = routing.get()
    if current is not None and current[0] is scope:  # a router (``GraphCore.route``)
        _, config, i, graph_store = current
        return runtime_of(config(i), graph_store=graph_store)
    if scope is None:
        raise GraphError(
            "get_runtime() can only be called inside a running graph node, router or task"
        )
    run, task = scope.run, scope.task
    if run is None:  # (every scope knows its run: ``GraphRun.unsaved_scope``, ``TaskScope``)
        return GraphRuntime()
    # (no task: a plain node on the executor's fast path, in a run that is not streamed)
    streamed = task is not None and run.stream is not None
    writer = _task_writer(run, task.id) if streamed else _no_writer
    info = execution_info_here()
    clock = progress_here()  # looked for once: the writer and the heartbeat are its
    if clock is None:
        return GraphRuntime(
            context=run.context, store=run_store(run), stream_writer=writer, execution_info=info
        )
    return GraphRuntime(
        context=run.context,
        store=run_store(run),
        stream_writer=_moving(writer, clock),
        heartbeat=clock.beat,
        execution_info=info,
    )


def get_stream_writer() -> Callable[[Any], None]:
    """The ``custom`` stream writer of the graph node or ``@task`` running here (LangGraph's
    ``get_stream_writer``): what it is given is a ``custom`` stream item, dropped when the
    run is not streamed."""
    return get_runtime().stream_writer


def coerce_context(schema: Any, context: Any) -> Any:
    """``context`` as a run takes it, checked against the graph's ``context_schema`` before
    anything runs or is saved (LangGraph's ``_coerce_context``): a dict for a dataclass or
    pydantic schema is made into an instance; a TypedDict schema takes a mapping as it is.
    A value that cannot be one is an ``ArgumentError`` (LangGraph's ``TypeError`` or
    ``ValidationError``, which is its cause); LangGraph passes a value of another type on
    as it is, ours refuses it."""
    if context is None or schema is None:
        return context
    name = getattr(schema, "__name__", repr(schema))
    is_model = isinstance(schema, type) and issubclass(schema, BaseModel)
    if is_model or dataclasses.is_dataclass(schema):
        if isinstance(context, schema):
            return context
        if not isinstance(context, Mapping):
            raise ArgumentError(
                f"context must be a {name} (the graph's context_schema) or a dict of its "
                f"fields, got {type(context).__name__}"
            )
        try:
            return schema.model_validate(dict(context)) if is_model else schema(**context)
        except (TypeError, ValidationError) as exc:
            raise ArgumentError(f"context does not fit context_schema {name}: {exc}") from exc
    if is_typeddict(schema):
        if not isinstance(context, Mapping):
            raise ArgumentError(
                f"context must be a mapping (context_schema {name} is a TypedDict), got "
                f"{type(context).__name__}"
            )
        return context
    if isinstance(schema, type) and not isinstance(context, schema):
        raise ArgumentError(
            f"context must be a {name} (the graph's context_schema), got {type(context).__name__}"
        )
    return context


def check_context_schema(schema: Any) -> Any:
    """``StateGraph(context_schema=...)``: a class (a dataclass, a pydantic model, a
    TypedDict or any other class), or None."""
    if schema is not None and not isinstance(schema, type):
        raise ArgumentError(
            f"context_schema is a class (a dataclass, TypedDict or pydantic model), got {shown_repr(schema)}"
        )
    return schema


def from_checkpoint_during(durability: Any, checkpoint_during: Any) -> Durability:
    """LangGraph's older ``checkpoint_during=`` (deprecated there too, with a warning) as the
    ``durability`` it stands for: True is "async", False "exit". Given with ``durability``
    (LangGraph's ``ValueError``) or not a bool: ``ArgumentError``."""
    if not isinstance(checkpoint_during, bool):
        raise ArgumentError(
            f"checkpoint_during is True or False, got {shown_repr(checkpoint_during)}"
        )
    if durability is not None:
        raise ArgumentError(
            "Cannot use both `checkpoint_during` and `durability` parameters. Please use "
            "`durability` instead."
        )
    warnings.warn(
        "`checkpoint_during` is deprecated and will be removed. Please use `durability` instead.",
        DeprecationWarning,
        stacklevel=3,
    )
    return "async" if checkpoint_during else "exit"


def check_durability(durability: Any, *, steered: bool = False) -> None:
    """A run's ``durability``: LangGraph's values. ``steered``: a run in a ``Runtime``,
    which refuses "exit" (steering needs each step's checkpoint)."""
    if durability is None or durability in ("sync", "async"):
        return
    if durability == "exit":
        if steered:
            raise ArgumentError(
                'durability="exit" is not supported for a run in a Runtime: steering needs '
                "each step's checkpoint (a command is kept with it, a fork or a restart "
                'goes on from it); use "sync" (the default) there, or run the graph without '
                "runtime="
            )
        return
    raise ArgumentError(
        f"durability is one of {', '.join(map(repr, DURABILITY))}, got {shown_repr(durability)}"
    )


__all__ = [
    "Durability",
    "ExecutionInfo",
    "GraphRuntime",
    "check_context_schema",
    "check_durability",
    "coerce_context",
    "context_kwargs",
    "from_checkpoint_during",
    "get_runtime",
    "get_stream_writer",
    "run_store",
    "runtime_of",
]
