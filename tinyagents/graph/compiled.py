"""``CompiledGraph``: run a validated graph, and read or change its threads."""

from __future__ import annotations

import dataclasses
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import aclosing, asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tinyagents.errors import ConfigurationError, GraphError, SyncInAsyncError
from tinyagents.graph import caching, calls, mermaid, threads
from tinyagents.graph._context import (
    enclosing_scope,
    reset_scope,
    run_blocking,
    set_scope,
)
from tinyagents.graph.batch import check_batch, run_batch
from tinyagents.graph.core import GraphCore, breakpoint_nodes, check_max_concurrency
from tinyagents.graph.driver import run_with_runtime, start_graph_run
from tinyagents.graph.executor import GraphRun
from tinyagents.graph.func_stream import sink_for
from tinyagents.graph.graph_runtime import Durability, check_durability, from_checkpoint_during
from tinyagents.graph.jsonschema import json_schema
from tinyagents.graph.session import GraphSession
from tinyagents.graph.state import root_value
from tinyagents.graph.stream import (
    GRAPHS_MODE,
    RUNTIME_MODES,
    GraphStream,
    Reader,
    follow,
    opening,
    read,
)
from tinyagents.graph.types import CheckpointInfo, GraphResult, StateSnapshot, StateUpdate
from tinyagents.runs.info import check_id

if TYPE_CHECKING:
    from tinyagents.runs.handle import RunHandle
    from tinyagents.runs.host import RunHost


#: ``run``'s breakpoints when it is given none (``_breakpoints``'s answer then; never changed)
_NO_BREAKPOINTS: dict[str, Any] = {"interrupt_before": (), "interrupt_after": ()}


class CompiledGraph(GraphCore):
    """A runnable graph. ``await graph.run(input, thread_id=...)`` → ``GraphResult``."""

    #: The ``SupervisorSpec`` of ``compile(supervisor=...)``: watches the graph's agent runs.
    supervisor: Any = None

    # -- running ---------------------------------------------------------------------------

    async def run(
        self,
        input: Any = None,
        *,
        thread_id: str | None = None,
        runtime: RunHost | None = None,
        checkpoint_id: str | None = None,
        recursion_limit: int | None = None,
        max_concurrency: int | None = None,
        interrupt_before: Collection[str] | str = (),
        interrupt_after: Collection[str] | str = (),
        context: Any = None,
        durability: Durability | None = None,
        checkpoint_during: bool | None = None,
    ) -> GraphResult:
        """Run (or continue) a thread until it finishes, pauses on interrupts or fails.

        ``input`` is a state update (starts again from START), ``None`` (continue the
        thread) or a ``Command`` (resume interrupts, update, goto). ``checkpoint_id``
        rewinds the thread to that checkpoint first (as a new head; history stays linear).
        ``interrupt_before`` / ``interrupt_after`` add static breakpoints for this run (see
        ``StateGraph.compile``). ``max_concurrency``: at most that many tasks of a step run
        at once (its sub-graphs' steps too); ``None`` runs them all. ``context``: the run's
        context (LangGraph's), checked against the graph's ``context_schema``; nodes read it
        as ``runtime.context`` (a parameter named ``runtime``, or ``get_runtime()``), its
        sub-graphs too; it is not saved, so a resume is given it again. ``durability``:
        LangGraph's ``"sync"`` (what every run does: each step saved before the next starts)
        or ``"async"`` (taken as ``"sync"``); ``"exit"`` saves only when the run ends
        (``store.checkpoint.exit_buffer``; an ``ArgumentError`` with ``runtime=``). Bad input
        raises and changes nothing; a failing node gives ``status="failed"``.

        Called from inside a node of a running graph (without ``thread_id``, ``runtime``
        and ``checkpoint_id``), it is a sub-graph call of that node: see ``graph/calls.py``
        (its ``durability``, when given, wins over the caller's, as in LangGraph).
        Its interrupts pause the calling node, and a failing node of it raises its error.

        ``result.state`` is the graph's ``shown_state``: the state; an entrypoint's, what its
        function returned (its last return value when the run paused, None before the first).
        """
        if checkpoint_during is not None:  # LangGraph's older spelling (deprecated)
            durability = from_checkpoint_during(durability, checkpoint_during)
        caller = enclosing_scope()
        is_call = thread_id is None and runtime is None and checkpoint_id is None
        if max_concurrency is not None:  # (two frames less for a plain run)
            max_concurrency = check_max_concurrency(max_concurrency)
        breakpoints = _NO_BREAKPOINTS
        if interrupt_before or interrupt_after:
            breakpoints = self._breakpoints(
                interrupt_before, interrupt_after, runtime, is_call and caller is not None
            )
        if caller is not None and is_call:
            check_durability(durability)
            return self._shown(
                await calls.run(
                    self, caller, input, recursion_limit, max_concurrency, context, durability
                )
            )
        if runtime is not None:
            return await run_with_runtime(
                self,
                input,
                runtime=runtime,
                thread_id=thread_id,
                checkpoint_id=checkpoint_id,
                recursion_limit=recursion_limit,
                max_concurrency=max_concurrency,
                context=context,
                durability=durability,
            )
        if self.checkpointer is None:
            # a run that saves nothing takes no lease (the session's enter and exit do
            # nothing) and has no breakpoints (``_breakpoints`` refused them)
            session = GraphSession(self, thread_id)
            run = await session.prepare(
                input,
                checkpoint_id,
                recursion_limit,
                max_concurrency=max_concurrency,
                context=context,
                durability=durability,
            )
            return self._shown(await run.outcome())
        async with GraphSession(self, thread_id) as session:
            run = await session.prepare(
                input,
                checkpoint_id,
                recursion_limit,
                max_concurrency=max_concurrency,
                context=context,
                durability=durability,
                **breakpoints,
            )
            return self._shown(await run.outcome())

    def _shown(self, result: GraphResult) -> GraphResult:
        """``result`` with the state as ``shown_state`` shows it (an entrypoint's: what its
        function returned); a started run's driver does the same for ``runtime=``."""
        shown = self.shown_state(result.state)
        return result if shown is result.state else replace(result, state=shown)

    async def start(
        self,
        input: Any = None,
        *,
        runtime: RunHost,
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
        """Start (or continue) a thread on ``runtime`` in the background and return the run's
        handle at once: ``rt.start_graph(graph, input, ...)`` (docs/graph.md, "Steering a
        graph run"). The run pauses on interrupts and continues when steering answers them;
        ``wait_on_interrupt=False`` ends it ``interrupted`` instead."""
        return await start_graph_run(
            runtime,
            self,
            input,
            thread_id=thread_id,
            tenant_id=tenant_id,
            parent=parent,
            checkpoint_id=checkpoint_id,
            recursion_limit=recursion_limit,
            max_concurrency=check_max_concurrency(max_concurrency),
            wait_on_interrupt=wait_on_interrupt,
            context=context,
            durability=durability,
        )

    def _breakpoints(
        self,
        interrupt_before: Collection[str] | str,
        interrupt_after: Collection[str] | str,
        runtime: RunHost | None,
        is_call: bool,
    ) -> dict[str, Any]:
        """A run's own breakpoints, checked before anything runs or is saved."""
        breakpoints = {"interrupt_before": interrupt_before, "interrupt_after": interrupt_after}
        if not (interrupt_before or interrupt_after):
            return breakpoints
        if is_call:
            raise GraphError(
                "a sub-graph called from a node takes its breakpoints from its compile()"
            )
        for value in (interrupt_before, interrupt_after):
            breakpoint_nodes(value, self.nodes)  # a misspelt node: before anything is saved
        if runtime is not None:
            raise GraphError(
                "per-run interrupt_before/interrupt_after are not supported with runtime= "
                "yet; set them at compile(...)"
            )
        if self.checkpointer is None:
            raise GraphError(
                "interrupt_before/interrupt_after need a checkpointer to continue from: "
                "compile(checkpointer=...)"
            )
        return breakpoints

    def stream(
        self,
        input: Any = None,
        *,
        thread_id: str | None = None,
        mode: str | Iterable[str] = GRAPHS_MODE,
        subgraphs: bool = False,
        runtime: RunHost | None = None,
        checkpoint_id: str | None = None,
        recursion_limit: int | None = None,
        max_concurrency: int | None = None,
        interrupt_before: Collection[str] | str = (),
        interrupt_after: Collection[str] | str = (),
        context: Any = None,
        durability: Durability | None = None,
        checkpoint_during: bool | None = None,
    ) -> AsyncIterator[Any]:
        """``run``, yielding what happens as it happens (LangGraph's ``astream``):
        ``async for item in graph.stream(input, thread_id=..., mode="updates"): ...``.

        ``mode`` (by default the graph's ``stream_mode``: ``"values"``, an entrypoint's
        ``"updates"``, as LangGraph's): ``"values"`` (the state before the first step and
        after each one), ``"updates"`` (``{node: writes}`` per finished task,
        ``{"__interrupt__": (...)}`` when the run stops on interrupts), ``"tasks"`` (each
        task's start and its result, error or interrupts), ``"custom"`` (what nodes send with
        ``ctx.emit``), ``"steering"`` and ``"messages"`` (the runtime's ``steering.*`` and
        ``model.delta`` events of this run and its agent nodes; with ``runtime=`` only, else
        ``ConfigurationError``), ``"checkpoints"`` (each checkpoint saved, LangGraph's
        payload) and ``"debug"`` (those and each task's start and end, wrapped as
        ``{"step", "timestamp", "type", "payload"}``; ``graph/debug.py``). A list of modes
        yields ``(mode, payload)`` pairs;
        ``subgraphs=True`` adds sub-graph items, each led by its namespace.
        A failing node's error is raised after the items before it; leaving the loop early
        stops the run. A bad mode raises ``ConfigurationError`` here, before anything runs.
        ``interrupt_before`` / ``interrupt_after`` add breakpoints for this run, as for ``run``.
        Inside a node of a running graph it is a sub-graph call, as for ``run``.
        """
        if checkpoint_during is not None:  # LangGraph's older spelling (deprecated)
            durability = from_checkpoint_during(durability, checkpoint_during)
        sink = sink_for(self, mode, subgraphs)
        caller = enclosing_scope()
        is_call = thread_id is None and runtime is None and checkpoint_id is None
        max_concurrency = check_max_concurrency(max_concurrency)
        breakpoints = self._breakpoints(
            interrupt_before, interrupt_after, runtime, is_call and caller is not None
        )
        # here, not when the stream is first read
        check_durability(durability, steered=runtime is not None)
        if caller is not None and is_call:
            return calls.stream(
                self, caller, input, sink, recursion_limit, max_concurrency, context, durability
            )
        if runtime is not None:
            if thread_id is not None:  # here, not when the stream is first read
                check_id(thread_id, "thread_id")
            return Reader(
                self._stream_managed(
                    sink,
                    input,
                    runtime,
                    thread_id,
                    checkpoint_id,
                    recursion_limit,
                    max_concurrency,
                    context,
                ),
                sink,
            )
        if not sink.modes.isdisjoint(RUNTIME_MODES):
            needs = [m for m in RUNTIME_MODES if m in sink.modes]
            raise ConfigurationError(
                f"stream mode {needs[0]!r} reads the runtime's events, and a graph run without "
                "one has no steering and no agent nodes: pass runtime=rt"
            )
        session = GraphSession(self, thread_id)
        items = read(
            lambda: session.prepare(
                input,
                checkpoint_id,
                recursion_limit,
                max_concurrency=max_concurrency,
                context=context,
                durability=durability,
                **breakpoints,
            ),
            sink,
            # a graph without checkpointer takes no lease: nothing to hold, nor to let go of
            # when the reader is dropped (``Reader``), so its items are the stream itself
            hold=session if session.cp is not None else None,
        )
        return Reader(items, sink) if session.cp is not None else items

    async def _stream_managed(
        self,
        sink: GraphStream,
        input: Any,
        runtime: RunHost,
        thread_id: str | None,
        checkpoint_id: str | None,
        recursion_limit: int | None,
        max_concurrency: int | None,
        context: Any,
    ) -> AsyncGenerator[Any, None]:
        handle = await start_graph_run(
            runtime,
            self,
            input,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            recursion_limit=recursion_limit,
            max_concurrency=max_concurrency,
            wait_on_interrupt=False,
            context=context,
        )
        driven = getattr(handle.driver, "run", None)
        assert isinstance(driven, GraphRun)
        driven.stream = sink  # its task has not started yet: no step is missed
        sink.begin(driven, await opening(driven) if sink.checkpoints else None)
        async with aclosing(follow(runtime, handle, sink, owned=True)) as following:
            async for item in following:
                yield item

    @asynccontextmanager
    async def iter(
        self,
        input: Any = None,
        *,
        thread_id: str | None = None,
        checkpoint_id: str | None = None,
        recursion_limit: int | None = None,
        max_concurrency: int | None = None,
        interrupt_before: Collection[str] | str = (),
        interrupt_after: Collection[str] | str = (),
        context: Any = None,
        durability: Durability | None = None,
        checkpoint_during: bool | None = None,
    ) -> AsyncIterator[GraphRun]:
        """The run ``run`` would make, to drive step by step (pydantic-graph's ``Graph.iter``):
        ``async with graph.iter(input, thread_id=...) as run: async for step in
        run.supersteps(): ...``. The thread is held (its lease) inside the block; a failing
        node ends the steps with a ``"failed"`` item instead of raising. Input and
        breakpoints are handled as by ``run`` (bad input raises here and changes nothing).
        """
        if checkpoint_during is not None:  # LangGraph's older spelling (deprecated)
            durability = from_checkpoint_during(durability, checkpoint_during)
        max_concurrency = check_max_concurrency(max_concurrency)
        breakpoints = self._breakpoints(interrupt_before, interrupt_after, None, False)
        async with GraphSession(self, thread_id) as session:
            run = await session.prepare(
                input,
                checkpoint_id,
                recursion_limit,
                max_concurrency=max_concurrency,
                context=context,
                durability=durability,
                **breakpoints,
            )
            if run.checkpointer is not None:
                yield run
                return
            token = set_scope(run.unsaved_scope())  # interrupt() is an error here
            try:
                yield run
            finally:
                reset_scope(token)

    def run_sync(
        self,
        input: Any = None,
        *,
        thread_id: str | None = None,
        runtime: RunHost | None = None,
        checkpoint_id: str | None = None,
        recursion_limit: int | None = None,
        max_concurrency: int | None = None,
        interrupt_before: Collection[str] | str = (),
        interrupt_after: Collection[str] | str = (),
        context: Any = None,
        durability: Durability | None = None,
        checkpoint_during: bool | None = None,
    ) -> GraphResult:
        """``run`` for code without an event loop (a script, a REPL): runs it to its end with
        ``asyncio.run`` and returns its ``GraphResult``.

        Inside a running event loop (async code, a notebook cell) it raises
        ``SyncInAsyncError`` and runs nothing: ``await graph.run(...)`` there.
        """
        if checkpoint_during is not None:  # LangGraph's older spelling (deprecated)
            durability = from_checkpoint_during(durability, checkpoint_during)
        SyncInAsyncError.refuse_inside_a_loop(f"graph {self.name!r}", "await graph.run(...)")
        # from a sync task or entrypoint: on its run's loop, a sub-graph call of the task
        return run_blocking(
            self.run(
                input,
                thread_id=thread_id,
                runtime=runtime,
                checkpoint_id=checkpoint_id,
                recursion_limit=recursion_limit,
                max_concurrency=max_concurrency,
                interrupt_before=interrupt_before,
                interrupt_after=interrupt_after,
                context=context,
                durability=durability,
            )
        )

    async def abatch(
        self,
        inputs: Sequence[Any],
        *,
        thread_ids: Sequence[str | None] | None = None,
        concurrency: int | None = None,
        return_exceptions: bool = False,
        recursion_limit: int | None = None,
        context: Any = None,
        durability: Durability | None = None,
    ) -> list[Any]:
        """Each input its own ``run`` (LangGraph's ``abatch``), all at once or at most
        ``concurrency`` at a time; their ``GraphResult``s in the order of the inputs.
        ``thread_ids``: one thread per input (None, or a None in it: a new thread), each
        named once. A run that fails (a node's error, refused input): with
        ``return_exceptions`` its error takes its place; without, the first failed input's
        error is raised once every run has ended. A bad list is an ``ArgumentError`` and
        runs nothing."""
        threads = check_batch(inputs, thread_ids, concurrency)

        def one(input: Any, thread_id: str | None) -> Awaitable[GraphResult]:
            return self.run(
                input,
                thread_id=thread_id,
                recursion_limit=recursion_limit,
                context=context,
                durability=durability,
            )

        return await run_batch(one, inputs, threads, concurrency, return_exceptions)

    def batch(
        self,
        inputs: Sequence[Any],
        *,
        thread_ids: Sequence[str | None] | None = None,
        concurrency: int | None = None,
        return_exceptions: bool = False,
        recursion_limit: int | None = None,
        context: Any = None,
        durability: Durability | None = None,
    ) -> list[Any]:
        """``abatch`` for code without an event loop (as ``run_sync`` is ``run``'s); inside
        one, ``SyncInAsyncError``: ``await graph.abatch(...)`` there."""
        check_batch(inputs, thread_ids, concurrency)  # (a bad call fails before the loop check)
        SyncInAsyncError.refuse_inside_a_loop(f"graph {self.name!r}", "await graph.abatch(...)")
        return run_blocking(
            self.abatch(
                inputs,
                thread_ids=thread_ids,
                concurrency=concurrency,
                return_exceptions=return_exceptions,
                recursion_limit=recursion_limit,
                context=context,
                durability=durability,
            )
        )

    # -- cache -----------------------------------------------------------------------------

    async def aclear_cache(self, nodes: Sequence[str] | None = None) -> None:
        """Drop what the cache (``compile(cache=...)``) holds for ``nodes`` (None: every
        node), as LangGraph's ``aclear_cache``: their next tasks run again. A graph without
        a cache, or a name that is no node, is a ``GraphValidationError``, clearing nothing."""
        found = caching.namespaces(self, nodes)
        assert self.cache is not None
        await self.cache.clear(found)

    def clear_cache(self, nodes: Sequence[str] | None = None) -> None:
        """``aclear_cache`` for code without an event loop (LangGraph's sync ``clear_cache``);
        inside one, ``SyncInAsyncError``: ``await graph.aclear_cache()`` there."""
        found = caching.namespaces(self, nodes)  # (a bad call fails before any loop check)
        SyncInAsyncError.refuse_inside_a_loop(f"graph {self.name!r}", "await graph.aclear_cache()")
        assert self.cache is not None
        run_blocking(self.cache.clear(found))

    # -- threads ---------------------------------------------------------------------------

    async def get_state(
        self, thread_id: str, checkpoint_id: str | None = None, *, subgraphs: bool = False
    ) -> StateSnapshot:
        """The thread's values, next nodes, tasks and pending interrupts (at the head by
        default). ``subgraphs=True``: each task's ``state`` is the state of the sub-graph it
        ran (a sub-graph node or a graph its function called), nested the same way. A
        one-value state's ``values`` is the value (``StateGraph(int)``), as LangGraph's."""
        snap = await threads.get_state(self, thread_id, checkpoint_id, subgraphs=subgraphs)
        if self.schema.root:
            tasks = tuple(replace(t, result=root_value(t.result)) for t in snap.tasks)
            snap = replace(snap, values=self.shown_state(snap.values), tasks=tasks)
        return snap

    async def history(
        self,
        thread_id: str,
        *,
        limit: int | None = None,
        ns: str = "",
        before: str | None = None,
        filter: Mapping[str, Any] | None = None,  # LangGraph's name for it
    ) -> list[CheckpointInfo]:
        """The thread's checkpoints, newest first (values via ``get_state(checkpoint_id=)``);
        with ``ns`` (an ``Interrupt.ns``, a ``StateSnapshot.ns``) a sub-graph's. As
        LangGraph's ``get_state_history``: ``before`` (a checkpoint id of the thread) keeps
        the older ones only, ``filter`` those whose ``metadata`` holds each of its items,
        and ``limit`` counts what is left."""
        return await threads.history(
            self, thread_id, limit=limit, ns=ns, before=before, filter=filter
        )

    async def update_state(
        self,
        thread_id: str,
        update: dict[str, Any] | None,
        *,
        as_node: str | None = None,
        checkpoint_id: str | None = None,
        ns: str = "",
    ) -> str:
        """Apply ``update`` (a dict, or an instance of a dataclass / pydantic state) through
        the reducers as its own checkpoint; return its id. ``None`` writes nothing: with ``as_node``, that node counts as run with no output
        (LangGraph's way to pass a breakpoint without running the node).

        With ``as_node`` the update counts as that node's output and the next superstep
        follows that node's edges; without it the pending tasks stay as they are. With
        ``checkpoint_id`` (an older checkpoint of the thread) it forks the thread's past, as
        LangGraph's ``update_state`` at a checkpoint: the update applies to the state there
        and becomes the new head, and ``run(None)`` runs on from it, its steps (sub-graphs
        too, in fresh namespaces) again, their interrupts asking again.

        ``as_node="__copy__"`` with ``update=None`` copies the checkpoint (``checkpoint_id``,
        else the head) as it is, as LangGraph's: a ``rewind`` head one step past it, whose
        pending step runs again on ``run(None)``.

        With ``ns`` (a sub-graph's ``StateSnapshot.ns``, from ``get_state(thread_id,
        subgraphs=True)``) the update applies to that sub-graph's state at its head, as
        LangGraph's ``update_state`` with a sub-graph's config: through its reducers, routed
        by its nodes (``as_node`` names one of them); the paused task that runs it continues
        from the changed state when the thread goes on.
        """
        return await threads.update_state(
            self,
            thread_id,
            # (a one-value state's update is the value, None nothing: ``update_of``)
            {} if update is None and not self.schema.root else update,  # type: ignore[arg-type]
            as_node=as_node,
            checkpoint_id=checkpoint_id,
            ns=ns,
        )

    async def bulk_update_state(
        self, thread_id: str, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> str:
        """Several ``update_state`` calls at once, as LangGraph's ``bulk_update_state``: each
        superstep (a list of ``StateUpdate(values, as_node)``) becomes one checkpoint, in
        order, under one hold of the thread; returns the last one's id. A superstep of one
        update is exactly an ``update_state``; one of several is the output of nodes that
        ran together in one step: reduced together (two plain values of one key conflict)
        and routed from each of them, so each names its node (``as_node``, not ``None``,
        ``START``, ``END`` or ``"__copy__"``). Every superstep's nodes, keys and values are
        checked before any is saved (``InvalidUpdateError``); a reducer or router that
        refuses a later superstep leaves the earlier ones saved, as in LangGraph.
        """
        return await threads.bulk_update_state(self, thread_id, supersteps)

    async def fork(
        self, thread_id: str, checkpoint_id: str, *, new_thread_id: str | None = None
    ) -> str:
        """Copy the thread as it was at ``checkpoint_id`` into a new thread; return its id.

        The fork keeps the step that was part-way there (its finished tasks' writes, its
        pending interrupts, which ask again); a step of the past that neither paused nor
        failed there runs again on the fork, all its tasks; sub-graph namespaces are not
        copied (a sub-graph task on the fork runs again). Its id is ``new_thread_id`` when
        given (a thread that has no checkpoints yet, else ``GraphError``), else
        ``<thread_id>~fork-<12 random hex digits>``.
        """
        return await threads.fork(self, thread_id, checkpoint_id, new_thread_id=new_thread_id)

    def _as_node(self) -> Any:
        """What ``add_node(name, self)`` runs: the graph itself, as a sub-graph node."""
        return self

    def to_mermaid(self) -> str:
        return mermaid.to_mermaid(self.builder)

    def get_graph(self) -> mermaid.DrawnGraph:
        """The graph's nodes (START and END too) and edges, as LangGraph's ``get_graph()``;
        its ``draw_mermaid()`` is ``to_mermaid()``'s text."""
        return mermaid.drawn(self.builder)

    # -- schemas ---------------------------------------------------------------------------

    def io_types(self) -> tuple[Any, Any]:
        """The types of a run's input and of its result: ``StateGraph``'s ``input_schema``
        and ``output_schema`` (the state class when not given)."""
        schema = self.schema
        given_in, given_out = schema.input_cls, schema.output_cls
        return (
            schema.cls if given_in is None else given_in,
            schema.cls if given_out is None else given_out,
        )

    def get_input_jsonschema(self) -> dict[str, Any]:
        """The JSON Schema of the graph's input (LangGraph's), by pydantic's ``TypeAdapter``."""
        return self._io_schema(self.io_types()[0], "LangGraphInput")

    def get_output_jsonschema(self) -> dict[str, Any]:
        """The JSON Schema of the graph's result (LangGraph's), by pydantic's ``TypeAdapter``."""
        return self._io_schema(self.io_types()[1], "LangGraphOutput")

    def _io_schema(self, typ: Any, title: str) -> dict[str, Any]:
        schema = json_schema(typ, title=title)
        if dataclasses.is_dataclass(typ):  # LangGraph's model of the fields, named so
            schema["title"] = title
        # a one-value state (``StateGraph(int)``) starts as None, as LangGraph's root model
        return {**schema, "default": None} if self.schema.root else schema

    def get_context_jsonschema(self) -> dict[str, Any] | None:
        """The JSON Schema of the graph's ``context_schema``; None when it has none."""
        schema = self.context_schema
        return None if schema is None else json_schema(schema)

    def __repr__(self) -> str:
        return f"<CompiledGraph {self.name!r} nodes={list(self.nodes)}>"


__all__ = ["CompiledGraph"]
