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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Sequence,
)
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Generic, TypedDict, TypeVar

from tinyagents._threads import in_own_thread
from tinyagents.errors import GraphError, SyncInAsyncError
from tinyagents.graph import calls
from tinyagents.graph._context import NodeInterrupt, enclosing_scope
from tinyagents.graph.builder import StateGraph
from tinyagents.graph.compiled import CompiledGraph
from tinyagents.graph.interrupts import Interrupt
from tinyagents.graph.stream import Reader, parse_modes
from tinyagents.graph.types import END, START, Command, RetryPolicy, StateSnapshot
from tinyagents.store.checkpoint.base import Checkpointer

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")


class _EntryState(TypedDict, total=False):
    input: Any  # the run's input: the function's first argument
    output: Any  # what the function returned (``final.value``)
    previous: Any  # what it saved for the thread's next run (``final.save``)


class _TaskState(TypedDict, total=False):
    output: Any  # what the task function returned


#: The arguments of the task call running in this context: read by the node of the task's
#: sub-graph, never saved (a resumed call gets them again from the entrypoint's new run).
_ARGS: ContextVar[tuple[tuple[Any, ...], dict[str, Any]]] = ContextVar("tinyagents_task_args")


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

#: The names of the ``@task`` functions made so far: an entrypoint's stream shows a task
#: call's update (``{name: {"output": result}}`` in the call's namespace) as ``{name: result}``
_TASK_NAMES: set[str] = set()


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
        """The task's result, waiting for it in a sync entrypoint or task (each runs on a
        thread of its own). On the event loop's thread (async code) a task that has not
        finished cannot be waited for: ``await`` it."""
        fut = self._future
        if isinstance(fut, concurrent.futures.Future):
            return fut.result(timeout)
        if not fut.done():
            raise GraphError(
                f"task {self._name!r} has not finished, and an async function cannot wait "
                "for it with .result(): await it"
            )
        return fut.result()

    def __repr__(self) -> str:
        return f"<TaskFuture {self._name!r} {'done' if self.done() else 'pending'}>"


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
    ) -> None:
        if not callable(func):
            raise TypeError(f"@task decorates a function, got {type(func).__name__}")
        self.func = func
        self.name: str = name or getattr(func, "__name__", None) or type(func).__name__
        functools.update_wrapper(self, func)
        is_async = inspect.iscoroutinefunction(func)

        if is_async:

            async def node(state: Any) -> dict[str, Any]:
                args, kwargs = _ARGS.get()
                return {"output": await func(*args, **kwargs)}

        else:

            async def node(state: Any) -> dict[str, Any]:
                # on a thread of its own (LangGraph runs sync tasks on threads too): sync
                # tasks run side by side, and one may wait for a task it calls (.result())
                args, kwargs = _ARGS.get()
                token = None
                if _CALL.get() is None:  # called from a graph node: the loop to run on
                    token = _CALL.set(_EntryCall(asyncio.get_running_loop()))
                try:
                    out = await in_own_thread(
                        functools.partial(func, *args, **kwargs), name=f"task {self.name}"
                    )
                finally:
                    if token is not None:
                        _CALL.reset(token)
                return {"output": out}

        _TASK_NAMES.add(self.name)
        builder = StateGraph(_TaskState).add_node(self.name, node, retry_policy=retry)
        self.graph = (
            builder.add_edge(START, self.name).add_edge(self.name, END).compile(name=self.name)
        )

    def __call__(self, *args: Any, **kwargs: Any) -> TaskFuture[T]:
        scope = enclosing_scope()
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
        coro = self._call(scope, args, kwargs)
        future: asyncio.Future[T] | concurrent.futures.Future[T]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a sync entrypoint, on its own thread: run it on the loop
            if entry is None:
                coro.close()
                raise GraphError(
                    f"task {self.name!r} was called on a thread without an event loop"
                ) from None
            future = asyncio.run_coroutine_threadsafe(coro, entry.loop)
        else:
            # created now, so calls start (and number their namespaces) in call order
            future = loop.create_task(coro, name=f"task {self.name}")
        made = TaskFuture(future, self.name)
        if entry is not None:
            entry.futures.append(made)
        return made

    async def _call(self, scope: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        _ARGS.set((args, kwargs))  # this asyncio task's own context
        result = await calls.run(self.graph, scope, {}, None)
        out: T = result.state["output"]
        return out

    def __repr__(self) -> str:
        return f"<Task {self.name!r}>"


def task(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
) -> Any:
    """Make ``func`` (sync or async) a task (LangGraph's ``@task``): ``@task`` or
    ``@task(name=..., retry_policy=RetryPolicy(...))``. See ``Task``."""
    if func is None:
        return lambda f: Task(f, name=name, retry=retry_policy)
    return Task(func, name=name, retry=retry_policy)


class Entrypoint(CompiledGraph):
    """What ``@entrypoint`` makes: a ``CompiledGraph`` of one node that runs the function.
    ``run(input, thread_id=...)`` passes ``input`` (any value) as the function's first
    argument; ``result.state["output"]`` is what it returned (``ainvoke``/``invoke`` return
    it alone, as LangGraph's). ``None`` continues the thread, and a ``Command`` resumes it,
    as for any graph."""

    async def start_input(
        self, head: Any, data: Any, cp: Checkpointer | None, recursion_limit: int
    ) -> frozenset[str]:
        return await super().start_input(head, {"input": data}, cp, recursion_limit)

    async def check_input(self, head: Any, data: Any, recursion_limit: int) -> None:
        await super().check_input(head, {"input": data}, recursion_limit)

    async def ainvoke(
        self, input: Any, config: dict[str, Any] | None = None, *, thread_id: str | None = None
    ) -> Any:
        """LangGraph's ``ainvoke``: the function's return value; ``{"__interrupt__": [...]}``
        when the run paused; the error of a failed run is raised. The thread is
        ``thread_id``, or ``config["configurable"]["thread_id"]``."""
        if thread_id is None and config is not None:
            thread_id = (config.get("configurable") or {}).get("thread_id")
        result = (await self.run(input, thread_id=thread_id)).raise_for_status()
        if result.status == "interrupted":
            return {"__interrupt__": list(result.interrupts)}
        return result.state.get("output")

    def invoke(
        self, input: Any, config: dict[str, Any] | None = None, *, thread_id: str | None = None
    ) -> Any:
        """``ainvoke`` for code without an event loop (as ``run_sync`` is ``run``'s)."""
        SyncInAsyncError.refuse_inside_a_loop(f"entrypoint {self.name!r}", "await .ainvoke()")
        return asyncio.run(self.ainvoke(input, config, thread_id=thread_id))

    async def get_state(
        self, thread_id: str, checkpoint_id: str | None = None, *, subgraphs: bool = False
    ) -> StateSnapshot:
        """As ``CompiledGraph.get_state``, its ``values`` LangGraph's: what the function last
        returned (``final.value``), None before it first returned."""
        snap = await super().get_state(thread_id, checkpoint_id, subgraphs=subgraphs)
        returned: Any = snap.values.get("output")  # any value, where a graph's is a dict
        return replace(snap, values=returned)

    def stream(
        self,
        input: Any = None,
        *,
        mode: str | Iterable[str] = "values",
        subgraphs: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """As ``CompiledGraph.stream``, its ``values`` and ``updates`` items LangGraph's: a
        ``values`` item is the return value (the state before the first step only when the
        run resumes or continues: ``Command``, None), an ``updates`` item ``{name: return
        value}``, and each task call's ``{task: result}`` (at the top, ``()`` with
        ``subgraphs=True``); ``{"__interrupt__": (...)}`` when it pauses, in both."""
        modes, single = parse_modes(mode)
        if "values" not in modes and "updates" not in modes:
            return super().stream(input, mode=mode, subgraphs=subgraphs, **kwargs)
        # every item with its mode and namespace: a task call's update is a sub-graph's
        items = super().stream(input, mode=modes, subgraphs=True, **kwargs)
        began = input is None or isinstance(input, Command)
        if isinstance(items, Reader):  # translated inside it: a reader dropped after a
            # ``break`` still tells the checkpointer that it lets go of the thread
            items.items = self._translated(items.items, single, subgraphs, began)
            return items
        return self._translated(items, single, subgraphs, began)

    async def _translated(
        self, items: AsyncIterator[Any], single: bool, subgraphs: bool, began: bool
    ) -> AsyncGenerator[Any, None]:
        try:
            async for ns, mode, payload in items:
                if ns:
                    task_update = _task_update(payload) if mode == "updates" else None
                    if task_update is not None:
                        ns, payload = (), task_update
                    elif not subgraphs:
                        continue
                elif mode == "values":
                    if not began:  # the state before the first step: LangGraph shows none
                        began = True
                        continue
                    if "__interrupt__" in payload:
                        payload = {"__interrupt__": payload["__interrupt__"]}
                    else:
                        payload = payload.get("output")
                elif mode == "updates":
                    payload = {
                        k: v["output"] if isinstance(v, dict) and "output" in v else v
                        for k, v in payload.items()
                    }
                if subgraphs:
                    yield (ns, payload) if single else (ns, mode, payload)
                else:
                    yield payload if single else (mode, payload)
        finally:
            close = getattr(items, "aclose", None)
            if close is not None:
                await close()

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


class _EntryBuilder(StateGraph):
    _compiled_class = Entrypoint


class entrypoint:
    """Make a function an entrypoint (LangGraph's ``@entrypoint``):
    ``@entrypoint(checkpointer=MemoryCheckpointer())`` over ``def wf(input, previous=None)``
    (sync or async) gives an ``Entrypoint``, a ``CompiledGraph`` of one node.

    ``previous`` (a parameter of that name) is what the thread's last run saved: its return
    value, or the ``save`` of an ``entrypoint.final(value=..., save=...)`` it returned. A sync
    function runs on a thread of its own, so its tasks' ``.result()`` can wait for them.
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
    ) -> None:
        self.checkpointer = checkpointer
        self.name = name
        self.retry_policy = retry_policy

    def __call__(self, func: Callable[..., Any]) -> Entrypoint:
        params = list(inspect.signature(func).parameters.values())
        if not params:
            raise ValueError("an entrypoint function must have at least one parameter")
        takes_previous = any(p.name == "previous" for p in params[1:])
        is_async = inspect.iscoroutinefunction(func)
        node_name = getattr(func, "__name__", type(func).__name__)
        final = entrypoint.final

        async def node(state: Any) -> dict[str, Any]:
            call = _EntryCall(asyncio.get_running_loop())
            token = _CALL.set(call)
            try:
                kwargs = {"previous": state.get("previous")} if takes_previous else {}
                try:
                    if is_async:
                        out = await func(state.get("input"), **kwargs)
                    else:
                        out = await in_own_thread(
                            functools.partial(func, state.get("input"), **kwargs),
                            name=f"entrypoint {node_name}",
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
            if isinstance(out, final):
                return {"output": out.value, "previous": out.save}
            return {"output": out, "previous": out}

        builder = _EntryBuilder(_EntryState).add_node(
            node_name, node, retry_policy=self.retry_policy
        )
        builder.add_edge(START, node_name).add_edge(node_name, END)
        made = builder.compile(checkpointer=self.checkpointer, name=self.name or node_name)
        assert isinstance(made, Entrypoint)
        return made


def _task_update(payload: Any) -> dict[str, Any] | None:
    """A task call's update (``{name: {"output": result}}``) as ``{name: result}``; None
    for any other."""
    if isinstance(payload, dict) and len(payload) == 1:
        ((name, writes),) = payload.items()
        if name in _TASK_NAMES and isinstance(writes, dict) and writes.keys() == {"output"}:
            return {name: writes["output"]}
    return None


def _merged(first: list[Interrupt], more: list[Interrupt]) -> NodeInterrupt:
    seen = {i.id for i in first}
    return NodeInterrupt([*first, *(i for i in more if i.id not in seen)])


__all__ = ["Entrypoint", "Task", "TaskFuture", "entrypoint", "task"]
