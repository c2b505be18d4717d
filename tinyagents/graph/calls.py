"""A compiled graph run from inside a node of another graph run: a *sub-graph call*.

``await sub.run(...)`` (or ``sub.stream(...)``) in a node function runs ``sub`` the way a
sub-graph node runs (``GraphRun.child_run``): in a namespace of the caller's thread, with
the caller's checkpointer, limits and answers. Its interrupts pause the calling task (and
surface in the caller's result), a resume of the caller continues inside it from where it
stopped, and its ``Command(graph=Command.PARENT)`` becomes the calling task's output. Each
call of a task gets its own namespace: ``"node:task_id"``, then ``"node:task_id|1"``, ...
(LangGraph's).

A call saves as its caller does (``durability``), unless given a ``durability`` of its own,
which wins for its checkpoints, as LangGraph's does: ``"exit"`` holds them until the call
ends (then flushed, ``ExitBuffer``), ``"sync"`` / ``"async"`` in a caller run with
``"exit"`` saves them as they are made, below the caller's held ones. A caller in a
``Runtime`` refuses ``"exit"``, as its own run does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from tinyagents.errors import GraphError
from tinyagents.graph._context import CalledCommand, NodeInterrupt, ParentCommand, TaskScope
from tinyagents.graph.checkpointing import Head
from tinyagents.graph.executor import GraphRun
from tinyagents.graph.graph_runtime import Durability, check_durability, coerce_context
from tinyagents.graph.stream import GraphStream, read
from tinyagents.graph.types import Command, GraphResult
from tinyagents.store.checkpoint.base import Checkpointer
from tinyagents.store.checkpoint.exit_buffer import ExitBuffer

if TYPE_CHECKING:
    from tinyagents.graph.core import GraphCore


async def prepare(
    graph: GraphCore,
    scope: object,
    input: Any,
    recursion_limit: int | None,
    max_concurrency: int | None = None,
    context: Any = None,
    durability: Durability | None = None,
) -> GraphRun:
    """The run of ``graph`` called with ``input`` by the node whose scope is ``scope``; its
    ``max_concurrency``, ``context`` and ``durability`` are the calling run's unless
    given (the module docstring)."""
    if isinstance(input, Command):
        raise GraphError(
            f"graph {graph.name!r} is called from inside a node: give it state input; its "
            "interrupts are resumed through the calling graph (Command(resume=...) to it)"
        )
    if not isinstance(scope, TaskScope) or scope.run is None:
        # the calling run saves nothing: neither does the call (interrupt() is an error)
        if input is None:
            raise GraphError(f"sub-graph {graph.name!r} needs an input to start")
        limit = graph.limit(recursion_limit)
        head = Head.fresh(graph, "", "", None, saved=False)
        written = await graph.start_input(head, input, None, limit)
        run = GraphRun(
            graph,
            head,
            checkpointer=None,
            recursion_limit=limit,
            nested=True,
            max_concurrency=max_concurrency,
        )
        if context is not None:
            run.context = coerce_context(graph.context_schema, context)
        elif getattr(scope, "run", None) is not None:  # a node of a run with a context
            run.context = scope.run.context  # type: ignore[attr-defined]
        run.input_written = written
        return run
    caller: GraphRun = scope.run
    if recursion_limit is not None:
        graph.limit(recursion_limit)  # a bad one is refused before anything is recorded
    if context is not None:
        context = coerce_context(graph.context_schema, context)
    check_durability(durability, steered=caller.runtime is not None)
    task, index = scope.task, scope.calls
    scope.calls += 1
    caller.graph.called[(task.node, index)] = graph
    child, _ = await caller.child_run(
        graph,
        task,
        caller.child_ns(task, index),
        input,
        recursion_limit,
        checkpointer=_saved_through(caller.checkpointer, durability),
    )
    if max_concurrency is not None:
        child.max_concurrency = max_concurrency
    if context is not None:
        child.context = context
    return child


def _saved_through(cp: Checkpointer | None, durability: Durability | None) -> Checkpointer | None:
    """The checkpointer a call given ``durability`` saves through, when not its caller's
    ``cp``: a buffer of ``cp`` for "exit", the store below the caller's buffer for
    "sync" / "async" in an "exit" run."""
    if cp is None or durability is None:
        return None
    if isinstance(cp, ExitBuffer):
        return None if durability == "exit" else cp.base
    return ExitBuffer(cp) if durability == "exit" else None


async def flushed(child: GraphRun) -> None:
    """Save what a call with ``durability="exit"`` held, as it ends (however it ends)."""
    parent = child.parent
    cp = child.checkpointer
    if isinstance(cp, ExitBuffer) and parent is not None and cp is not parent.checkpointer:
        await cp.flush()


async def run(
    graph: GraphCore,
    scope: object,
    input: Any,
    recursion_limit: int | None,
    max_concurrency: int | None = None,
    context: Any = None,
    durability: Durability | None = None,
) -> GraphResult:
    """``graph.run(input)`` called by a node: the finished run's result. Raises the error of
    a failing node of ``graph``, and unwinds the calling node on an interrupt."""
    child = await prepare(
        graph, scope, input, recursion_limit, max_concurrency, context, durability
    )
    try:
        result = await child.execute()
    except ParentCommand as pc:
        raise CalledCommand(pc.command) from None
    finally:
        await flushed(child)
    if result.status == "interrupted":
        raise NodeInterrupt(result.interrupts)
    return result


async def stream(
    graph: GraphCore,
    scope: object,
    input: Any,
    sink: GraphStream,
    recursion_limit: int | None,
    max_concurrency: int | None = None,
    context: Any = None,
    durability: Durability | None = None,
) -> AsyncIterator[Any]:
    """``graph.stream(input)`` called by a node: the items of the call (namespaces relative
    to it), which the caller's own stream gets too; then, if it stopped on an interrupt,
    the calling node unwinds."""
    child = await prepare(
        graph, scope, input, recursion_limit, max_concurrency, context, durability
    )

    async def made() -> GraphRun:
        return child

    try:
        # the caller's stream (if it is streamed) sees the call as it sees a sub-graph node
        async for item in read(made, sink, also=child.stream):
            yield item
    except ParentCommand as pc:
        raise CalledCommand(pc.command) from None
    finally:
        await flushed(child)
    if child.head.frontier:  # stopped before its end: on interrupts or at a breakpoint
        raise NodeInterrupt(child.result("interrupted", child.plan()).interrupts)


__all__ = ["prepare", "run", "stream"]
