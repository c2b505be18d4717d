"""LangGraph's functional API (``langgraph.func``): ``@entrypoint`` and ``@task``, built on the
graph runtime rather than beside it.

An ``@entrypoint`` function is a ``CompiledGraph`` of one node (LangGraph builds a Pregel of
one node too): its state holds the run's ``input``, the function's ``output`` and what it
saved for the thread's next run (``previous``). Each call of a ``@task`` is a call of a
one-node sub-graph from the running node (``graph/calls.py``), in a namespace of the thread
(``"entry:task_id"``, ``"entry:task_id|1"``, ... in call order): its result is saved with that
namespace's checkpoints, so when the entrypoint runs again from its top after an
``interrupt()`` (or a failure), the calls that had finished return their saved results
without running again (LangGraph's guarantee), and one that had paused on its own
``interrupt()`` goes on with its answer.

What a user sees is LangGraph's view, the function's: ``run``'s ``result.state``,
``get_state().values`` and ``update_state``'s value are the return value, and a stream's
items come through ``EntryStream`` (``graph/func_stream.py``), which knows a task call by its
graph (``_TaskGraph``) and shows it as a task of the entrypoint, as LangGraph's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import typing
import weakref
from collections.abc import Callable, Generator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar

from pydantic import TypeAdapter

from tinyagents.errors import GraphError, GraphValidationError, SyncInAsyncError
from tinyagents.graph import calls
from tinyagents.graph._context import (
    NodeInterrupt,
    TaskScope,
    UnsavedScope,
    caller_loop,
    enclosing_scope,
    progress_here,
    run_blocking,
    thread_attempt,
)
from tinyagents.graph.builder import CONTEXT_PARAMS, StateGraph, timeout_policy
from tinyagents.graph.caching import (
    CachePolicy,
    bind_task,
    check_cache,
    check_policy,
    task_namespace,
)
from tinyagents.graph.compiled import CompiledGraph
from tinyagents.graph.context import NodeContext
from tinyagents.graph.func_stream import TASK_ARGS, EntryStream
from tinyagents.graph.graph_runtime import Durability, check_context_schema, context_kwargs
from tinyagents.graph.interrupts import Interrupt
from tinyagents.graph.longterm import check_store
from tinyagents.graph.tasks import in_node_thread
from tinyagents.graph.types import (
    END,
    START,
    RetryPolicy,
    StateSnapshot,
    StateUpdate,
    TimeoutPolicy,
)
from tinyagents.store.cache.base import BaseCache
from tinyagents.store.checkpoint.base import Checkpointer

if TYPE_CHECKING:
    from tinyagents.store.longterm.base import GraphStore

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")


class _EntryState(TypedDict, total=False):
    input: Any  # the run's input: the function's first argument
    output: Any  # what the function returned (``final.value``)
    previous: Any  # what it saved for the thread's next run (``final.save``)


class _TaskState(TypedDict, total=False):
    output: Any  # what the task function returned


def _typed_state(base: type, name: str, types: dict[str, Any]) -> type:
    """``base`` (``_EntryState``, ``_TaskState``) with its fields typed by the function's
    annotations (``types``, those that are not ``Any``), so what a checkpoint saved of them is
    read back as that type (a pydantic model a model again, as LangGraph's serializer gives
    it back); ``base`` itself when none is."""
    types = {k: v for k, v in types.items() if v is not Any and _readable(v)}
    if not types:
        return base
    fields = {**base.__annotations__, **types}
    return TypedDict(name, fields, total=False)  # type: ignore[operator,no-any-return]


def _readable(annotation: Any) -> bool:
    """Whether pydantic can read a value as ``annotation`` (not an arbitrary class, a
    ``Generator``, a ``TypeVar``...): the others are read back as saved."""
    try:
        TypeAdapter(annotation)
    except Exception:  # PydanticSchemaGenerationError, TypeError ...
        return False
    return True


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    """``func``'s annotations resolved (``{}`` where they cannot be: a name defined in a
    function, a string that is no type)."""
    try:
        return typing.get_type_hints(func)
    except Exception:  # NameError, TypeError ...: read as untyped
        return {}


class _EntryCall:
    """The entrypoint call running in this context: its event loop (a sync entrypoint runs
    on a thread of its own and schedules its tasks there) and the task futures it made."""

    __slots__ = ("ended", "futures", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.futures: list[TaskFuture[Any]] = []
        #: the node has ended: a sync entrypoint's thread left behind by a cancel (it runs on
        #: to its end) may start no task, which would write to a run that is over
        self.ended = False

    async def settle(self) -> list[Interrupt]:
        """Wait for every task the call started (a task left un-awaited still runs to its
        end, as LangGraph's); the interrupts of those that paused."""
        found: list[Interrupt] = []
        outcomes = await asyncio.gather(
            *(f._awaitable() for f in self.futures), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, NodeInterrupt):
                found.extend(outcome.interrupts)
        return found

    def cancel(self) -> None:
        for f in self.futures:
            f._future.cancel()


_CALL: ContextVar[_EntryCall | None] = ContextVar("tinyagents_entrypoint_call", default=None)


class TaskFuture(Generic[T]):
    """The pending result of a ``@task`` call (LangGraph's ``SyncAsyncFuture``): ``await`` it
    in an async entrypoint, task or node, ``.result()`` in a sync entrypoint or task. An error
    of the task is raised there; an ``interrupt()`` in it pauses the entrypoint."""

    __slots__ = ("_future", "_name")

    def __init__(self, future: asyncio.Future[T] | concurrent.futures.Future[T], name: str) -> None:
        self._future = future
        self._name = name

    def _awaitable(self) -> asyncio.Future[T]:
        fut = self._future
        return asyncio.wrap_future(fut) if isinstance(fut, concurrent.futures.Future) else fut

    def __await__(self) -> Generator[Any, None, T]:
        return self._awaitable().__await__()

    def done(self) -> bool:
        return self._future.done()

    def cancel(self) -> bool:
        """Stop the task (LangGraph's ``future.cancel()``): it saves no result, so the
        entrypoint's next run (its resume) runs the call again."""
        return self._future.cancel()

    def cancelled(self) -> bool:
        return self._future.cancelled()

    def result(self, timeout: float | None = None) -> T:
        """The task's result, waiting for it in a sync entrypoint or task, or a sync node with
        a ``timeout=`` (each runs on a thread of its own). On the event loop's thread (async
        code, a sync node without ``timeout=``, called inline) a task that has not finished
        cannot be waited for: ``await`` it."""
        fut = self._future
        if isinstance(fut, concurrent.futures.Future):
            return fut.result(timeout)
        if not fut.done():
            raise GraphError(
                f"task {self._name!r} has not finished, and code on the event loop's thread "
                "cannot wait for it with .result(): await it in an async function; a sync "
                "node runs there unless it has a timeout= (add_node(..., timeout=...) runs "
                "it on a thread of its own, where .result() waits)"
            )
        return fut.result()

    def __repr__(self) -> str:
        return f"<TaskFuture {self._name!r} {'done' if self.done() else 'pending'}>"


class _TaskGraph(CompiledGraph):
    task_call = True
    """The one-node sub-graph of a ``@task``: a run of it is a task call (what an
    entrypoint's stream knows a task call by, whatever its node's name and writes)."""


class _TaskBuilder(StateGraph):
    _compiled_class = _TaskGraph


def _is_async(func: Callable[..., Any]) -> bool:
    """Whether calling ``func`` gives a coroutine: an ``async def`` function, or an object
    whose ``__call__`` is one (LangGraph's ``is_async_callable``)."""
    if inspect.iscoroutinefunction(func):
        return True
    call = None if inspect.isroutine(func) else getattr(func, "__call__", None)  # noqa: B004
    return call is not None and inspect.iscoroutinefunction(call)


def _context_names(func: Callable[..., Any], *, skip_first: bool) -> tuple[str, ...]:
    """The parameters of ``func`` LangGraph fills in by name, ``config``, ``writer``,
    ``store`` and ``runtime`` (its ``RunnableConfig``, ``StreamWriter``, ``BaseStore`` and
    ``Runtime``; an entrypoint's past its input), which get the ``NodeContext`` of the call
    (the store for ``store``, the ``GraphRuntime`` for ``runtime``), as a node's do
    (``builder.CONTEXT_PARAMS``, ``graph_runtime.context_kwargs``)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return ()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(
        p.name
        for p in params[1 if skip_first else 0 :]
        if p.name in CONTEXT_PARAMS and p.kind in kinds
    )


def _given_context(
    names: tuple[str, ...],
    ctx: NodeContext,
    kwargs: dict[str, Any],
    threaded: bool,
    previous: Any = None,
) -> dict[str, Any]:
    """``kwargs`` with ``ctx`` for each of ``names`` they do not give, a ``GraphRuntime``
    for ``runtime`` (its ``previous``: an entrypoint's) (an argument given wins, as
    LangGraph's). ``threaded``: the function runs on a worker thread, from which the
    context's ``emit`` hands its items to this loop."""
    missing = [name for name in names if name not in kwargs]
    if not missing:
        return kwargs
    if threaded:
        ctx._loop = asyncio.get_running_loop()
    return {**context_kwargs(tuple(missing), ctx, previous=previous), **kwargs}


class Task(Generic[T]):
    """A function decorated with ``@task``: calling it inside an ``@entrypoint`` (or a graph
    node) starts it and returns a ``TaskFuture``. Its result is saved with the thread, so a
    call that finished is not run again when the entrypoint runs again from its top."""

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        retry: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
    ) -> None:
        if not callable(func):
            raise TypeError(f"@task decorates a function, got {type(func).__name__}")
        self.func = func
        self.name: str = name or _name_of(func)
        self.cache_policy = check_policy(cache_policy, f"task {self.name!r}")
        #: each call's attempts are bounded by it, as a node's by ``add_node(timeout=...)``
        self.timeout = timeout_policy(f"task {self.name!r}", timeout)
        #: its graph bound to the cache of each graph that called it (``_graph_for``)
        self._cached: weakref.WeakKeyDictionary[BaseCache, CompiledGraph] = (
            weakref.WeakKeyDictionary()
        )
        functools.update_wrapper(self, func)
        context = _context_names(func, skip_first=False)
        if _is_async(func):

            async def node(state: Any, ctx: NodeContext) -> dict[str, Any]:
                args, kwargs = TASK_ARGS.get()
                kwargs = _given_context(context, ctx, kwargs, threaded=False)
                return {"output": await func(*args, **kwargs)}

        else:

            async def node(state: Any, ctx: NodeContext) -> dict[str, Any]:
                # on a thread of its own (LangGraph runs sync tasks on threads too): sync
                # tasks run side by side, and one may wait for a task it calls (.result())
                args, kwargs = TASK_ARGS.get()
                kwargs = _given_context(context, ctx, kwargs, threaded=True)
                # (what its thread streams or calls once a timeout= ended its attempt is
                # dropped or refused, as a sync node's: ``in_node_thread``)
                loop = asyncio.get_running_loop()
                token = None
                if _CALL.get() is None:  # called from a graph node: the loop to run on
                    token = _CALL.set(_EntryCall(loop))
                try:
                    out = await in_node_thread(
                        loop, self.name, functools.partial(func, *args, **kwargs)
                    )
                finally:
                    if token is not None:
                        _CALL.reset(token)
                return {"output": out}

        # a saved result is read back as the return annotation's type
        returns = _hints(func).get("return", Any)
        state = _typed_state(_TaskState, "_TaskState", {"output": returns})
        builder = _TaskBuilder(state).add_node(
            self.name,
            node,
            retry_policy=retry,
            cache_policy=self.cache_policy,
            timeout=self.timeout,
        )
        self._builder = builder.add_edge(START, self.name).add_edge(self.name, END)
        self.graph = self._builder.compile(name=self.name)

    def _graph_for(self, scope: Any) -> CompiledGraph:
        """Its graph, bound to the cache of the graph whose node calls it when it has a
        ``cache_policy`` and that graph a cache (``@entrypoint(cache=...)``), as LangGraph's
        task uses its caller's cache."""
        run = getattr(scope, "run", None)
        cache = None if run is None or self.cache_policy is None else run.graph.cache
        if cache is None:
            return self.graph
        graph = self._cached.get(cache)
        if graph is None:
            graph = self._builder.compile(name=self.name)
            bind_task(graph, cache, self.func, TASK_ARGS.get)
            self._cached[cache] = graph
        return graph

    async def aclear_cache(self, cache: BaseCache) -> None:
        """Drop what ``cache`` holds for this task (LangGraph's ``Task.aclear_cache``)."""
        found = check_cache(cache, f"task {self.name!r}: aclear_cache")
        if found is None:
            raise GraphValidationError(
                f"task {self.name!r}: aclear_cache takes the cache to clear "
                "(the entrypoint's cache=...), got None"
            )
        if self.cache_policy is not None:
            await found.clear([task_namespace(self.func)])

    def clear_cache(self, cache: BaseCache) -> None:
        """``aclear_cache`` for code without an event loop (LangGraph's ``clear_cache``)."""
        SyncInAsyncError.refuse_inside_a_loop(f"task {self.name!r}", "await task.aclear_cache(...)")
        run_blocking(self.aclear_cache(cache))

    def __call__(self, *args: Any, **kwargs: Any) -> TaskFuture[T]:
        scope = enclosing_scope()
        if isinstance(scope, UnsavedScope):  # a node on the fast path of a run that saves nothing
            scope = scope.promote()
        entry = _CALL.get()
        if scope is None:
            raise GraphError(
                f"task {self.name!r} was called outside a running @entrypoint or graph "
                "node: a task's result is saved with the thread of the run that calls it"
            )
        if entry is not None and entry.ended:
            raise GraphError(
                f"task {self.name!r} was called after its entrypoint's run stopped (a sync "
                "entrypoint's thread goes on after a cancel): it is not run"
            )
        attempt = thread_attempt.get()
        if attempt is not None and attempt.ended:
            raise GraphError(
                f"task {self.name!r} was called after its node's attempt timed out (a sync "
                "node's thread goes on after its timeout=): it is not run"
            )
        clock = progress_here()
        if clock is not None:
            clock.moved()  # a call is progress of a node with an idle timeout
        coro = self._call(scope, args, kwargs)
        future: asyncio.Future[T] | concurrent.futures.Future[T]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a sync entrypoint or node, on its own thread: run it on the loop
            run_on = entry.loop if entry is not None else caller_loop.get()
            if run_on is None:
                coro.close()
                raise GraphError(
                    f"task {self.name!r} was called on a thread without an event loop"
                ) from None
            future = asyncio.run_coroutine_threadsafe(coro, run_on)
        else:
            # created now, so calls start (and number their namespaces) in call order
            future = loop.create_task(coro, name=f"task {self.name}")
        made = TaskFuture(future, self.name)
        if entry is not None:
            entry.futures.append(made)
        elif isinstance(scope, TaskScope):  # a graph node's call: it waits for it at its end
            if scope.started is None:
                scope.started = []
            scope.started.append(future)
        return made

    async def _call(self, scope: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        TASK_ARGS.set((args, kwargs))  # this asyncio task's own context
        result = await calls.run(self._graph_for(scope), scope, {}, None)
        out: T = result.state["output"]
        return out

    def __repr__(self) -> str:
        return f"<Task {self.name!r}>"


def _name_of(func: Callable[..., Any]) -> str:
    """A task's default name, as LangGraph names it: the function's, a ``functools.partial``'s
    function's, else the callable's class name."""
    while isinstance(func, functools.partial):
        func = func.func
    name: str = getattr(func, "__name__", None) or type(func).__name__
    return name


def task(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
    cache_policy: CachePolicy | None = None,
    timeout: float | timedelta | TimeoutPolicy | None = None,
) -> Any:
    """Make ``func`` (sync or async) a task (LangGraph's ``@task``): ``@task`` or
    ``@task(name=..., retry_policy=RetryPolicy(...), cache_policy=CachePolicy(...),
    timeout=...)``. With a ``cache_policy``, a call inside an ``@entrypoint(cache=...)`` (or a
    node of a graph compiled with ``cache=``) whose arguments make a key the cache holds
    returns that result without running. ``timeout`` bounds each attempt of a call as
    ``add_node``'s does a node's (seconds, a ``timedelta`` or a ``TimeoutPolicy``; checked
    here, before the function is given). See ``Task``."""
    policy = timeout_policy("task", timeout)
    options: dict[str, Any] = {
        "name": name,
        "retry": retry_policy,
        "cache_policy": cache_policy,
        "timeout": policy,
    }
    if func is None:
        return lambda f: Task(f, **options)
    return Task(func, **options)


class Entrypoint(CompiledGraph):
    """What ``@entrypoint`` makes: a ``CompiledGraph`` of one node that runs the function.
    ``run(input, thread_id=...)`` passes ``input`` (any value) as the function's first
    argument. ``None`` continues the thread, and a ``Command`` resumes it, as for any graph.

    Its state (``input``, ``output``: what the function returned, ``previous``: what it
    saved) is shown as the function's, LangGraph's view: ``result.state`` of ``run`` (and a
    started run's ``RunResult.output``), ``get_state().values`` and ``values`` stream items
    are the return value (the last one, None before it first returned); ``update_state``
    takes one; the ``updates`` and ``tasks`` stream items are LangGraph's (``EntryStream``).
    ``ainvoke``/``invoke`` return the value alone, or ``{"__interrupt__": [...]}``."""

    stream_class = EntryStream
    #: ``stream(...)`` (with ``runtime=`` too, and called inside a node) is of ``updates``
    #: unless ``mode`` says otherwise, as LangGraph's entrypoint streams; a started run's
    #: ``handle.stream()`` keeps its own default, ``values``.
    stream_mode = "updates"

    #: the annotations of its function's first parameter and of what it returns
    #: (``entrypoint.__call__``): ``get_input_jsonschema`` / ``get_output_jsonschema``
    returns: tuple[Any, Any] = (Any, Any)

    def shown_state(self, values: dict[str, Any]) -> Any:
        return values.get("output")

    def io_types(self) -> tuple[Any, Any]:
        return self.returns

    def start_name(self) -> str:
        return next(iter(self.nodes))  # LangGraph's entrypoint reads its input itself

    async def start_input(
        self, head: Any, data: Any, cp: Checkpointer | None, recursion_limit: int
    ) -> frozenset[str]:
        return await super().start_input(head, {"input": data}, cp, recursion_limit)

    async def check_input(self, head: Any, data: Any, recursion_limit: int) -> None:
        await super().check_input(head, {"input": data}, recursion_limit)

    async def ainvoke(
        self,
        input: Any,
        config: dict[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        context: Any = None,
        durability: Durability | None = None,
    ) -> Any:
        """LangGraph's ``ainvoke``: the function's return value; ``{"__interrupt__": [...]}``
        when the run paused; the error of a failed run is raised. The thread is
        ``thread_id``, or ``config["configurable"]["thread_id"]``; ``context`` and
        ``durability`` as ``run``'s."""
        if thread_id is None and config is not None:
            thread_id = (config.get("configurable") or {}).get("thread_id")
        ran = await self.run(input, thread_id=thread_id, context=context, durability=durability)
        result = ran.raise_for_status()
        if result.status == "interrupted":
            return {"__interrupt__": list(result.interrupts)}
        return result.state

    def invoke(
        self,
        input: Any,
        config: dict[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        context: Any = None,
        durability: Durability | None = None,
    ) -> Any:
        """``ainvoke`` for code without an event loop (as ``run_sync`` is ``run``'s). Called
        from a sync entrypoint or task (on its own thread), it runs on that run's event loop,
        a sub-graph call of the task, as LangGraph's."""
        SyncInAsyncError.refuse_inside_a_loop(f"entrypoint {self.name!r}", "await .ainvoke()")
        # from a sync task or entrypoint: on its run's loop, whose checkpointer it uses
        return run_blocking(
            self.ainvoke(input, config, thread_id=thread_id, context=context, durability=durability)
        )

    async def get_state(
        self, thread_id: str, checkpoint_id: str | None = None, *, subgraphs: bool = False
    ) -> StateSnapshot:
        """As ``CompiledGraph.get_state``, its ``values`` LangGraph's: what the function last
        returned (``final.value``), None before it first returned. Its task has no
        ``state`` with ``subgraphs=True`` (LangGraph's task calls are no sub-graphs), and a
        finished one's ``result`` is the value it returned. The checkpoint of an input (a
        run's, ``update_state``'s as ``"__input__"``) has the entrypoint ``next``, and as its
        task (not run from there: no ``result``), as LangGraph's, whose entrypoint reads its
        input itself (``history`` still names ``__start__``)."""
        snap = await super().get_state(thread_id, checkpoint_id, subgraphs=subgraphs)
        node = next(iter(self.nodes))
        tasks = tuple(
            replace(t, states=(), result=_task_result(t.result))
            if t.name != START
            else replace(t, name=node, states=(), result=None)
            for t in snap.tasks
        )
        # LangGraph's entrypoint reads its input from __start__ itself: the checkpoint of an
        # input (a run's, update_state's as "__input__") has the entrypoint next
        next_ = tuple(node if n == START else n for n in snap.next)
        return replace(snap, values=self.shown_state(snap.values), next=next_, tasks=tasks)

    async def update_state(
        self,
        thread_id: str,
        update: Any,
        *,
        as_node: str | None = None,
        checkpoint_id: str | None = None,
        ns: str = "",
    ) -> str:
        """As LangGraph's ``update_state`` of an entrypoint: ``update`` (any value) is written
        as the function's return: the state, and what the next run's ``previous`` reads
        (``entrypoint.final(value=..., save=...)`` each); the run it paused counts as done.
        ``as_node="__copy__"`` and ``ns`` (a task call's namespace) are as for any graph;
        ``as_node="__input__"`` saves ``update`` as a run's input (the function's argument)."""
        if as_node == "__copy__" or ns:
            return await super().update_state(
                thread_id, update, as_node=as_node, checkpoint_id=checkpoint_id, ns=ns
            )
        if as_node == "__input__":  # saved as a run's input: the function's argument
            return await super().update_state(
                thread_id, {"input": update}, as_node=as_node, checkpoint_id=checkpoint_id
            )
        return await super().update_state(
            thread_id,
            _returned(update),
            as_node=as_node or next(iter(self.nodes)),
            checkpoint_id=checkpoint_id,
        )

    async def bulk_update_state(
        self, thread_id: str, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> str:
        """As ``update_state`` for each update (``CompiledGraph.bulk_update_state``)."""
        node = next(iter(self.nodes))
        mapped = [
            [
                u
                if u.as_node == "__copy__"
                else StateUpdate(values=_returned(u.values), as_node=u.as_node or node)
                for u in step
            ]
            for step in supersteps
        ]
        return await super().bulk_update_state(thread_id, mapped)

    def _as_node(self) -> Any:
        """As a node of a ``StateGraph`` (LangGraph's way): a function node that calls the
        entrypoint with the state (a sub-graph call: its tasks are saved, its questions pause
        the node) and returns what it returned, the node's update."""

        async def node(state: Any) -> Any:
            return await self.ainvoke(dict(state))

        node.__name__ = self.name
        return node

    def __repr__(self) -> str:
        return f"<Entrypoint {self.name!r}>"


def _task_result(result: dict[str, Any] | None) -> Any:
    """A finished entrypoint task's ``result`` as LangGraph's: the value it returned."""
    return result["output"] if result is not None and "output" in result else result


def _returned(value: Any) -> dict[str, Any]:
    """The state of a function that returned ``value`` (an ``entrypoint.final`` or not)."""
    if isinstance(value, entrypoint.final):
        return {"output": value.value, "previous": value.save}
    return {"output": value, "previous": value}


class _EntryBuilder(StateGraph):
    _compiled_class = Entrypoint


class entrypoint:
    """Make a function an entrypoint (LangGraph's ``@entrypoint``):
    ``@entrypoint(checkpointer=MemoryCheckpointer())`` over ``def wf(input, previous=None)``
    (sync or async) gives an ``Entrypoint``, a ``CompiledGraph`` of one node. A generator
    function (sync or async) is a ``NotImplementedError``, as LangGraph's.

    ``previous`` (a parameter of that name) is what the thread's last run saved: its return
    value, or the ``save`` of an ``entrypoint.final(value=..., save=...)`` it returned. A sync
    function runs on a thread of its own, so its tasks' ``.result()`` can wait for them.
    ``context_schema`` is the graph's (``StateGraph``'s); a parameter named ``runtime`` gets
    the ``GraphRuntime`` (its ``previous`` is that value too), of a task as of an entrypoint.
    ``cache_policy`` (with ``cache=``): a run whose input gives a key the cache holds returns
    the cached result without running the function (``key_func`` gets the input), as
    LangGraph's.
    """

    @dataclass(frozen=True, slots=True)
    class final(Generic[R, S]):
        """Return ``value`` to the caller, and save ``save`` as the thread's ``previous``."""

        value: R
        save: S

    def __init__(
        self,
        checkpointer: Checkpointer | None = None,
        *,
        name: str | None = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache: BaseCache | None = None,
        store: GraphStore | None = None,
        context_schema: Any = None,
        cache_policy: CachePolicy | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
    ) -> None:
        self.checkpointer = checkpointer
        self.name = name
        self.retry_policy = retry_policy
        #: each attempt of the function is bounded by it, as a node's by ``add_node``'s
        self.timeout = timeout_policy("entrypoint", timeout)
        #: the entrypoint's own result, cached in ``cache`` keyed by its input
        self.cache_policy = check_policy(cache_policy, "entrypoint")
        #: where its ``@task(cache_policy=...)`` calls keep their results
        self.cache = check_cache(cache, "entrypoint")
        #: the long-term store its function and tasks get (``compile(store=...)``'s)
        self.store = check_store(store, "entrypoint")
        self.context_schema = check_context_schema(context_schema)

    def __call__(self, func: Callable[..., Any]) -> Entrypoint:
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            # as LangGraph's: its run would return the generator unrun
            raise NotImplementedError("Generators are not supported in the Functional API.")
        params = list(inspect.signature(func).parameters.values())
        if not params:
            raise ValueError("an entrypoint function must have at least one parameter")
        takes_previous = any(p.name == "previous" for p in params[1:])
        context = _context_names(func, skip_first=True)
        is_async = _is_async(func)
        node_name = getattr(func, "__name__", type(func).__name__)

        async def node(state: Any, ctx: NodeContext) -> dict[str, Any]:
            call = _EntryCall(asyncio.get_running_loop())
            token = _CALL.set(call)
            try:
                previous = state.get("previous")
                kwargs = {"previous": previous} if takes_previous else {}
                kwargs = _given_context(context, ctx, kwargs, not is_async, previous)
                try:
                    if is_async:
                        out = await func(state.get("input"), **kwargs)
                    else:
                        out = await in_node_thread(
                            call.loop,
                            node_name,
                            functools.partial(func, state.get("input"), **kwargs),
                        )
                except asyncio.CancelledError:
                    call.cancel()
                    raise
                except NodeInterrupt as paused:
                    # the tasks that paused too are asked at once, as LangGraph's
                    raise _merged(paused.interrupts, await call.settle()) from None
                except BaseException:
                    await call.settle()  # nothing left running once the node has ended
                    raise
                left = await call.settle()
                if left:  # a task never awaited paused
                    raise _merged([], left)
            finally:
                call.ended = True
                _CALL.reset(token)
            return _returned(out)

        # the saved input, output and ``previous`` read back as the annotations' types
        hints = _hints(func)
        returns = hints.get("return", Any)
        saves = returns
        if typing.get_origin(returns) is entrypoint.final:
            returns, saves = typing.get_args(returns)
        elif returns is entrypoint.final:
            returns = saves = Any
        types = {"input": hints.get(params[0].name, Any), "output": returns, "previous": saves}
        state = _typed_state(_EntryState, "_EntryState", types)
        policy = self.cache_policy
        if policy is not None:  # keyed by the input alone, as LangGraph's (not the state)
            key_func = policy.key_func
            policy = CachePolicy(
                key_func=lambda state: key_func(state.get("input")), ttl=policy.ttl
            )
            # its namespace names the function, as LangGraph's (``caching.namespace``)
            node.__module__, node.__qualname__ = func.__module__, func.__qualname__
        builder = _EntryBuilder(state, context_schema=self.context_schema).add_node(
            node_name,
            node,
            retry_policy=self.retry_policy,
            cache_policy=policy,
            timeout=self.timeout,
        )
        builder.add_edge(START, node_name).add_edge(node_name, END)
        made = builder.compile(
            checkpointer=self.checkpointer,
            name=self.name or node_name,
            cache=self.cache,
            store=self.store,
        )
        assert isinstance(made, Entrypoint)
        made.returns = (types["input"], returns)
        return made


def _merged(first: list[Interrupt], more: list[Interrupt]) -> NodeInterrupt:
    seen = {i.id for i in first}
    return NodeInterrupt([*first, *(i for i in more if i.id not in seen)])


__all__ = ["Entrypoint", "Task", "TaskFuture", "entrypoint", "task"]
