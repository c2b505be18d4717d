"""Streaming a graph run: what ``graph.stream(...)`` and ``handle.stream(...)`` yield.

A ``GraphStream`` is the run's ``StreamSink``: it turns the steps of ``GraphRun.advance()``
(``values``, ``updates``), the task hooks (``tasks``), the values nodes emit (``custom``) and
the runtime's events (``steering``, ``messages``) into stream items, LangGraph's shapes:
one mode gives payloads, several give ``(mode, payload)``, ``subgraphs=True`` puts the
namespace first (``(ns, payload)`` or ``(ns, mode, payload)``, ``ns`` a tuple of
``"node:task_id"`` segments, ``()`` for the top-level graph).

Two ways to read it. With only ``values``/``updates`` the caller's own task steps the run
(``GraphRun.next``) and yields between steps (``read``): no queue, no second task. Any
live mode (tasks, custom, messages, steering) needs items while a node still runs, so the
run goes into its own task and the reader waits on a queue (``live``).
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, aclosing, nullcontext
from types import AsyncGeneratorType
from typing import TYPE_CHECKING, Any, Literal

from tinyagents.errors import ConfigurationError
from tinyagents.graph._context import reset_scope, set_scope
from tinyagents.graph.debug import checkpoint_payload, input_checkpoint, triggers, wrapped
from tinyagents.graph.executor import GraphRun, Step, StreamSink
from tinyagents.graph.tasks import collected, shown_writes
from tinyagents.graph.types import UNSET
from tinyagents.protocol.ids import shown_repr

if TYPE_CHECKING:
    from tinyagents.events.models import Event
    from tinyagents.graph.checkpointing import Head
    from tinyagents.graph.tasks import Task
    from tinyagents.runs.handle import RunHandle
    from tinyagents.runs.host import RunHost

StreamMode = Literal[
    "values", "updates", "tasks", "messages", "custom", "steering", "checkpoints", "debug"
]
MODES: tuple[str, ...] = (
    "values",
    "updates",
    "tasks",
    "messages",
    "custom",
    "steering",
    "checkpoints",
    "debug",
)
#: modes that have items while a node runs: the run needs its own task
LIVE_MODES = frozenset({"tasks", "messages", "custom", "steering", "debug"})
#: The modes made of the runtime's events: a stream without a runtime refuses them.
RUNTIME_MODES = ("steering", "messages")
INTERRUPT_KEY = "__interrupt__"
#: the key of an ``updates`` item that shows a result again (LangGraph's ``__metadata__``)
CACHED_KEY = "__metadata__"


def parse_modes(mode: str | Iterable[str]) -> tuple[list[str], bool]:
    """``mode`` as a list of modes, and whether it was one mode (payloads, not tuples)."""
    modes: list[Any]
    try:
        modes = [mode] if isinstance(mode, str) else list(mode)
    except TypeError:  # no name nor an iterable of them (5, None): a bare TypeError was raised
        modes = [mode]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        shown = ", ".join(shown_repr(m) for m in unknown) if unknown else shown_repr(mode)
        raise ConfigurationError(
            f"stream mode {shown} is not one of {', '.join(MODES)} "
            "(pass one of them, or a list of several)"
        )
    return list(dict.fromkeys(modes)), isinstance(mode, str)


def _asks(
    modes: frozenset[str],
) -> tuple[frozenset[str], bool, bool, bool, bool, bool, bool]:
    """(modes, live, values, updates, tasks, checkpoints, debug): what a stream of ``modes``
    asks for (``debug`` shows the checkpoints too)."""
    live = bool(modes & LIVE_MODES)
    debug = "debug" in modes
    checkpoints = debug or "checkpoints" in modes
    return modes, live, "values" in modes, "updates" in modes, "tasks" in modes, checkpoints, debug


#: the common case, one mode named by its text: read once
_ONE = {m: _asks(frozenset({m})) for m in MODES}


class _GraphsMode:
    """The type of ``GRAPHS_MODE``: a default no caller can pass by mistake (``None`` is a
    bad mode, refused as any other)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<the graph's stream_mode>"


#: ``mode``'s default in ``graph.stream``: the graph's ``stream_mode`` (``"values"``; an
#: entrypoint's ``"updates"``, as LangGraph's).
GRAPHS_MODE: Any = _GraphsMode()


def namespace(ns: str) -> tuple[str, ...]:
    """A run's checkpoint namespace as LangGraph's tuple of ``"node:task_id"`` segments."""
    return tuple(ns.split("|")) if ns else ()


def snapshot(values: dict[str, Any]) -> dict[str, Any]:
    """The state as it is now. The reducers extend lists (and sets, dicts) in place, so a
    value item copies each container; what is inside stays shared."""
    out = values.copy()
    for key, value in out.items():
        kind = type(value)
        if kind in _ATOMIC:
            continue
        if kind in _PLAIN:
            out[key] = value.copy()
        elif isinstance(value, (list, dict, set)):
            out[key] = copy.copy(value)
    return out


_PLAIN = frozenset({list, dict, set})
#: values no reducer changes in place (the common case: skipped without an isinstance)
_ATOMIC = frozenset({int, float, str, bool, bytes, tuple, frozenset, type(None)})


def _only(values: dict[str, Any], keys: frozenset[str] | None) -> dict[str, Any]:
    return values if keys is None else {k: v for k, v in values.items() if k in keys}


def _asking(task: Task) -> tuple[Any, ...]:
    """The questions ``task`` still asks (a resumed task asks its answered ones no more)."""
    return tuple(i for i in task.interrupts if i.id not in task.resume)


class GraphStream:
    """The ``StreamSink`` of one streamed run (and of its sub-graph runs)."""

    __slots__ = (
        "asked",
        "checkpoints",
        "debug",
        "items",
        "live",
        "modes",
        "ready",
        "root",
        "run",
        "single",
        "subgraphs",
        "tasks",
        "updates",
        "values",
    )

    def __init__(self, mode: str | Iterable[str], *, subgraphs: bool = False) -> None:
        one = _ONE.get(mode) if type(mode) is str else None
        if one is None:
            modes, self.single = parse_modes(mode)
            one = _asks(frozenset(modes))
        else:
            self.single = True
        (
            self.modes,
            self.live,
            self.values,
            self.updates,
            self.tasks,
            self.checkpoints,
            self.debug,
        ) = one
        # a sub-graph's items come while its parent's step still runs: the run needs a task
        # of its own, as for the live modes
        self.live = self.live or subgraphs
        self.subgraphs = subgraphs
        #: the ids of the interrupts shown as their tasks paused, until their step ends, by
        #: run (namespace): a sub-graph's step ends inside its parent's
        self.asked: dict[str, set[str]] = {}
        self.items: deque[Any] = deque()
        #: the namespace of the run the stream follows (a sub-graph streamed in a node)
        self.root = ""
        #: set when an item arrives, for a reader that waits on the run's task (``live``)
        self.ready: asyncio.Event | None = None
        #: the run the stream follows, once it has begun
        self.run: GraphRun | None = None

    # -- items -----------------------------------------------------------------------------

    def put(self, ns: str, mode: str, payload: Any) -> None:
        if ns:  # a sub-graph's item, or the top of a stream that follows a sub-graph call
            root = self.root
            if ns == root:
                ns = ""
            elif not self.subgraphs:
                return
            elif root:
                ns = ns[len(root) + 1 :]
        if self.subgraphs:
            item: Any = (namespace(ns), payload) if self.single else (namespace(ns), mode, payload)
        else:
            item = payload if self.single else (mode, payload)
        self.items.append(item)
        if self.ready is not None:
            self.ready.set()

    def begin(self, run: GraphRun, opened: Head | None = None) -> None:
        """The state the run starts from (``values``), before its first step; with
        ``checkpoints``, the checkpoint of the input it took (``opened``, read by
        ``input_checkpoint``) and the one it starts from."""
        self.root = run.head.ns
        self.run = run
        if opened is not None:
            self.opened(run, opened)
        self.subgraph_started(run)

    def opened(self, run: GraphRun, head: Head) -> None:
        if self.checkpoints:
            self._checkpoint(run, head)

    def _checkpoint(self, run: GraphRun, head: Head) -> None:
        """``head``'s ``checkpoints`` item (and ``debug``'s), once it is saved. A task call
        (``@task``) saves no checkpoint of its own in LangGraph: it shows none."""
        if head.checkpoint_id is None or run.graph.task_call:
            return
        values = run.graph.shown_state(snapshot(_only(head.values, self._keys(run))))
        payload = checkpoint_payload(run.graph, head, values)
        if "checkpoints" in self.modes:
            self.put(head.ns, "checkpoints", payload)
        if self.debug:
            self.put(head.ns, "debug", wrapped("checkpoint", head.step, payload, head.created_at))

    # -- StreamSink ------------------------------------------------------------------------

    def step(self, run: GraphRun, step: Step) -> None:
        # a task's update went out as its node returned (``wrote``), as LangGraph's: what is
        # left for the step's end is the state (values) and, at a pause, the questions of
        # the tasks that did not run again
        kind = step.kind
        if kind == "applied":
            if self.checkpoints and run.checkpointer is not None:
                self._checkpoint(run, run.head)
            if self.values:
                # as LangGraph: a step whose tasks wrote nothing (nodes returning None, a
                # goto alone) changed no value, so it has no values item
                keys = self._keys(run)
                for task in step.tasks:
                    if task.writes and (keys is None or any(k in keys for k, _ in task.writes)):
                        self.put(run.head.ns, "values", snapshot(_only(run.head.values, keys)))
                        break
        elif kind == "interrupted" and (self.updates or self.values):
            ns = run.head.ns
            result = step.result
            assert result is not None
            asked = self.asked.pop(ns, set())
            interrupts = tuple(result.interrupts)
            waiting = tuple(i for i in interrupts if i.id not in asked)
            keys = self._keys(run)
            if self.updates and waiting:
                self.put(ns, "updates", {INTERRUPT_KEY: waiting})
            if self.values:
                # as LangGraph: the state before the step with each question (as its task
                # paused), then (when the step's finished tasks wrote, in this call or an
                # earlier one) the state with their writes, as result.state; a breakpoint
                # asks no question. A sub-graph hands its pause to its parent without that
                # last item (LangGraph's nested loop does not stop there: it re-raises)
                if waiting:
                    before = snapshot(_only(run.head.values, keys))
                    self.put(ns, "values", {**before, INTERRUPT_KEY: waiting})
                wrote = not run.nested and (
                    any(t.writes and not t.skipped for t in step.tasks)
                    or any(r.writes and not r.skipped for r in (run.head.records or {}).values())
                )
                if wrote:
                    state = result.state  # the output schema's keys: the whole state needed
                    if run.graph.schema.output_keys is not None:
                        state = run.state_of(run.plan())
                    self.put(ns, "values", snapshot(_only(state, keys)))
            if self.updates and not interrupts and ns == self.root:
                # a breakpoint: (), after the state, from the graph streamed only (as
                # LangGraph's: a sub-graph's stop shows as its parent's)
                self.put(ns, "updates", {INTERRUPT_KEY: ()})
        elif self.asked:
            self.asked.pop(run.head.ns, None)

    def _keys(self, run: GraphRun) -> frozenset[str] | None:
        """The keys of ``run``'s values and updates items: all, but a sub-graph's stream shows
        its output schema's keys (as LangGraph's, whose parent invokes it for its output)."""
        if run.parent is None or run.head.ns == self.root:
            return None
        return run.graph.schema.output_keys

    def task_started(self, run: GraphRun, task: Task) -> None:
        if self.tasks or self.debug:
            arg = snapshot(run.head.values) if task.arg is UNSET else task.arg
            payload = {"id": task.id, "name": task.node, "input": arg}
            if task.spec.metadata:  # add_node(metadata=...), as LangGraph's start has it
                payload["metadata"] = dict(task.spec.metadata)
            if self.tasks:
                self.put(run.head.ns, "tasks", payload)
            if self.debug:  # LangGraph's debug task: the start, and what triggered it
                shown = {"id": task.id, "name": task.node, "input": arg, "triggers": triggers(task)}
                if "metadata" in payload:
                    shown["metadata"] = payload["metadata"]
                self.put(run.head.ns, "debug", wrapped("task", run.head.step + 1, shown))

    def task_finished(self, run: GraphRun, task: Task, error: BaseException | None) -> None:
        if self.tasks or self.debug:
            asking = _asking(task)
            if task.writes is None and error is None and not asking:
                # paused without a question (a sub-graph stopped at its breakpoint): as
                # LangGraph's, such a task has no end
                return
            # as LangGraph's: the writes ({} for none: a failed or paused task), and each
            # interrupt as a dict of its value and id
            payload = {
                "id": task.id,
                "name": task.node,
                "result": collected(shown_writes(task) or ()),
                "error": error,
                "interrupts": [{"value": i.value, "id": i.id} for i in asking],
            }
            if self.tasks:
                self.put(run.head.ns, "tasks", payload)
            if self.debug:
                self.put(run.head.ns, "debug", wrapped("task_result", run.head.step + 1, payload))

    def _ask(self, run: GraphRun, task: Task) -> None:
        """A paused task's questions, one item for the task, as LangGraph's: in ``updates``
        alone, in ``values`` with the state before the step."""
        asking = _asking(task)
        if not asking:
            return
        ns = run.head.ns
        self.asked.setdefault(ns, set()).update(i.id for i in asking)
        if self.updates:
            self.put(ns, "updates", {INTERRUPT_KEY: asking})
        if self.values:
            before = snapshot(_only(run.head.values, self._keys(run)))
            self.put(ns, "values", {**before, INTERRUPT_KEY: asking})

    def wrote(self, run: GraphRun, task: Task) -> None:
        # as the node returns or pauses, as LangGraph's: not once its result is saved
        if task.writes is not None:
            if self.updates:
                self.put(run.head.ns, "updates", self._task_update(run, task))
        elif task.interrupts and (self.updates or self.values):
            self._ask(run, task)

    def cached(self, run: GraphRun, task: Task) -> None:
        if self.updates:
            update = self._task_update(run, task)
            update[CACHED_KEY] = {"cached": True}
            self.put(run.head.ns, "updates", update)

    def _task_update(self, run: GraphRun, task: Task) -> dict[str, Any]:
        """A finished task's ``updates`` item: ``{node: its writes}``, or, when it wrote a key
        more than once (a list of Commands, a ``Command`` update of pairs), one dict per
        write, as LangGraph's (``map_output_updates``)."""
        writes = shown_writes(task)
        assert writes is not None
        keys = self._keys(run)
        if keys is not None:
            writes = [(k, v) for k, v in writes if k in keys]
        if len(writes) > 1 and len({k for k, _ in writes}) < len(writes):
            return {task.node: [{k: v} for k, v in writes]}
        return {task.node: dict(writes) if writes else None}

    def custom(self, run: GraphRun, task_id: str, value: Any) -> None:
        if "custom" in self.modes:
            self.put(run.head.ns, "custom", value)

    def subgraph_started(self, run: GraphRun) -> None:
        """A sub-graph run's state before its first step (``values``), as LangGraph's
        ``subgraphs=True`` stream shows it; the top-level run's comes from ``begin``. With
        ``checkpoints``, the checkpoint the run starts from."""
        if self.checkpoints and run.checkpointer is not None:
            self._checkpoint(run, run.head)
        if self.values:
            # as LangGraph: an input that wrote nothing (of the keys shown) has no item
            keys, written = self._keys(run), run.input_written
            if written is None or (bool(written) if keys is None else not keys.isdisjoint(written)):
                self.put(run.head.ns, "values", snapshot(_only(run.head.values, keys)))

    # -- runtime events --------------------------------------------------------------------

    def wants(self, event: Event) -> str | None:
        """The mode a runtime event goes to, if this stream takes it."""
        kind = event.type
        if kind.startswith("steering.") and "steering" in self.modes:
            return "steering"
        if kind == "model.delta" and "messages" in self.modes:
            return "messages"
        return None


class Tee:
    """Two sinks as one: a sub-graph a node streams reports to the node's stream and to the
    stream of the run that called it (where ``subgraphs=True`` shows it)."""

    __slots__ = ("checkpoints", "first", "live", "second")

    def __init__(self, first: StreamSink, second: StreamSink) -> None:
        self.first, self.second = first, second
        self.live = first.live or second.live
        self.checkpoints = first.checkpoints or second.checkpoints

    def step(self, run: GraphRun, step: Step) -> None:
        self.first.step(run, step)
        self.second.step(run, step)

    def task_started(self, run: GraphRun, task: Task) -> None:
        self.first.task_started(run, task)
        self.second.task_started(run, task)

    def task_finished(self, run: GraphRun, task: Task, error: BaseException | None) -> None:
        self.first.task_finished(run, task, error)
        self.second.task_finished(run, task, error)

    def wrote(self, run: GraphRun, task: Task) -> None:
        self.first.wrote(run, task)
        self.second.wrote(run, task)

    def cached(self, run: GraphRun, task: Task) -> None:
        self.first.cached(run, task)
        self.second.cached(run, task)

    def custom(self, run: GraphRun, task_id: str, value: Any) -> None:
        self.first.custom(run, task_id, value)
        self.second.custom(run, task_id, value)

    def subgraph_started(self, run: GraphRun) -> None:
        self.first.subgraph_started(run)
        self.second.subgraph_started(run)

    def opened(self, run: GraphRun, head: Head) -> None:
        self.first.opened(run, head)
        self.second.opened(run, head)


async def opening(run: GraphRun) -> Head | None:
    """The checkpoint of the input ``run`` took, for a stream of checkpoints to show first."""
    took = run.input_written is not None
    return await input_checkpoint(run.graph, run.checkpointer, run.head, took)


#: ``read``'s hold when there is none (a run without checkpointer takes no lease): one shared
#: ``nullcontext``, which keeps nothing between uses
_NO_HOLD: AbstractAsyncContextManager[None] = nullcontext()


async def read(
    prepare: Callable[[], Awaitable[GraphRun]],
    sink: GraphStream,
    *,
    hold: AbstractAsyncContextManager[Any] | None = None,
    also: StreamSink | None = None,
) -> AsyncGenerator[Any, None]:
    """The stream of the run ``prepare`` makes (inside ``hold``: a thread's lease).

    Without a live mode the reader's own task steps the run (``run.advance()``) and yields each
    step's items; a failed node's error is raised after the items that came before it.
    With one, the run goes into its own task (``live``). ``also`` gets the run's steps too
    (the stream of the run that called this one as a sub-graph)."""
    async with hold if hold is not None else _NO_HOLD:
        run = await prepare()
        opened = await opening(run) if sink.checkpoints else None
        if also is not None:
            run.stream = Tee(sink, also)
        if sink.live:
            if also is None:
                run.stream = sink
            sink.begin(run, opened)
            async with aclosing(live(asyncio.create_task(run.outcome()), sink)) as running:
                async for item in running:
                    yield item
            return
        if also is None and (sink.updates or run.checkpointer is not None):
            # for its tasks' updates and questions as they come; the steps are read here
            run.stream = sink
        sink.begin(run, opened)
        items = sink.items
        # a run that saves nothing: one scope for its steps, knowing the run, so a @task its
        # fast path's node calls is the run's
        scope = run.unsaved_scope() if run.checkpointer is None else None
        while True:
            while items:  # the input's state comes before the first step runs
                yield items.popleft()
            # the scope is set around the step only: a reader that stops early closes this
            # generator in another context, where a token from this one cannot be reset
            token = set_scope(scope) if scope is not None else None
            try:
                step = await run.advance()
            finally:
                if token is not None:
                    reset_scope(token)
            sink.step(run, step)
            if also is not None:
                also.step(run, step)
            while items:
                yield items.popleft()
            if step.result is not None:
                if step.error is not None:
                    raise step.error
                return


async def live(
    task: asyncio.Task[Any], sink: GraphStream, *, owned: bool = True
) -> AsyncGenerator[Any, None]:
    """Yield ``sink``'s items while ``task`` (the run) goes on, then the rest; then raise
    the run's error, if it failed. An ``owned`` run is cancelled if the reader stops early
    (a stream that started it); a run followed through its handle goes on."""
    sink.live = True
    ready = sink.ready = asyncio.Event()
    task.add_done_callback(lambda _: ready.set())
    items = sink.items
    try:
        while True:
            while items:
                yield items.popleft()
            if task.done():
                break
            ready.clear()
            if not items and not task.done():
                await ready.wait()
        failed = task.result()
        error = getattr(failed, "error", None)
        if error is not None:
            raise error
    finally:
        if owned and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def follow(
    runtime: RunHost, handle: RunHandle, sink: GraphStream, *, owned: bool
) -> AsyncGenerator[Any, None]:
    """The stream of a runtime-managed run: its own items, plus the runtime's events of it
    and of the runs below it (steering, model deltas) while ``live`` reads them."""
    task = handle.task
    if task is None:
        raise ConfigurationError(f"run {handle.run_id} is not running in this process")
    root, tree = handle.run_id, runtime.runs.tree

    def forward(event: Event) -> None:
        mode = sink.wants(event)
        if mode is None:
            return
        run_id = event.run_id
        if run_id == root or (run_id is not None and tree.is_descendant(run_id, of=root)):
            sink.put("", mode, event)

    bus = runtime.bus
    bus.add_sink(forward)
    try:
        async with aclosing(live(task, sink, owned=owned)) as running:
            async for item in running:
                yield item
    finally:
        bus.remove_sink(forward)


class Reader:
    """What ``graph.stream(...)`` returns for a graph with a checkpointer: the stream's items,
    read from ``items`` (without one no lease is held, and the stream is ``items`` itself).

    A reader that leaves the loop with ``break`` does not close the stream: Python closes
    the dropped generator later, from the event loop (the run stops, its thread's lease is
    released). Until then the thread is still held, so when the reader is dropped the
    checkpointer is told the holder is letting go, and a run of the thread that comes
    meanwhile waits for that release instead of getting ``ThreadBusy``."""

    __slots__ = ("items", "sink")

    def __init__(self, items: AsyncGenerator[Any, None], sink: GraphStream) -> None:
        self.items = items
        self.sink = sink

    def __aiter__(self) -> Reader:
        return self

    def __anext__(self) -> Awaitable[Any]:
        # the generator's own awaitable: a coroutine here would cost every item a frame
        return self.items.__anext__()

    async def aclose(self) -> None:
        await self.items.aclose()

    def __del__(self) -> None:
        run = self.sink.run
        if _finished(self.items) or run is None or run.owner is None or run.checkpointer is None:
            return
        run.checkpointer.letting_go(run.head.thread_id, run.owner)


def _finished(items: AsyncGenerator[Any, None]) -> bool:
    """Whether ``items`` has ended (returned, raised or been closed): then nothing is held."""
    return isinstance(items, AsyncGeneratorType) and items.ag_frame is None


__all__ = [
    "CACHED_KEY",
    "GRAPHS_MODE",
    "INTERRUPT_KEY",
    "LIVE_MODES",
    "MODES",
    "GraphStream",
    "Reader",
    "StreamMode",
    "Tee",
    "follow",
    "live",
    "namespace",
    "parse_modes",
    "read",
    "snapshot",
]
