"""The stream sinks of graph runs (``sink_for``), and ``EntryStream``, which shows an
entrypoint's runs and task calls as LangGraph's functional API streams them
(``graph/func.py``): an entrypoint's state is its function's return value, and a task call
(of an entrypoint or of any graph's node) is a task of the calling graph, no sub-graph. A
graph's ``SubgraphsStream`` becomes an ``EntryStream`` when an entrypoint (a node, a call
from a node) or a task call starts inside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

from tinyagents.graph.debug import PUSH_TRIGGER, wrapped
from tinyagents.graph.executor import GraphRun
from tinyagents.graph.state import ROOT, root_value
from tinyagents.graph.stream import CACHED_KEY, GRAPHS_MODE, INTERRUPT_KEY, GraphStream
from tinyagents.graph.tasks import Task as GraphTask
from tinyagents.graph.tasks import shown_writes, task_id
from tinyagents.graph.types import START, check_subgraphs

#: The arguments of the task call running in this context: read by the node of the task's
#: sub-graph, never saved (a resumed call gets them again from the entrypoint's new run).
TASK_ARGS: ContextVar[tuple[tuple[Any, ...], dict[str, Any]]] = ContextVar("tinyagents_task_args")


class SubgraphsStream(GraphStream):
    """The stream of a graph that is no entrypoint: a ``GraphStream`` until an entrypoint or
    a task call runs inside it (a node, a call from a node), then an ``EntryStream`` (its
    class changed in place, the slots are the same), which shows that entrypoint's items as
    its own stream would and a task call's as LangGraph's. Until then no hook of it costs
    more than a ``GraphStream``'s."""

    #: ``entries``: the namespaces of the entrypoint runs streamed (the top's, and those
    #: called inside), set once it is an ``EntryStream``
    __slots__ = ("entries",)
    entries: set[str]

    def subgraph_started(self, run: GraphRun) -> None:
        if run.graph.stream_class is EntryStream or run.graph.task_call:
            self.entries = set()
            self.__class__ = RootEntryStream if isinstance(self, RootStream) else EntryStream
            self.subgraph_started(run)
            return
        if run.graph.schema.root and self.__class__ is SubgraphsStream:
            self.__class__ = RootStream  # a one-value sub-graph's items: its view too
        super().subgraph_started(run)


def root_view(mode: str, payload: Any, *, own: bool = True) -> Any:
    """A one-value state's stream item, LangGraph's view: ``values`` the value (a pause's
    item ``{"__interrupt__": ...}`` alone), ``updates`` ``{node: value}``, a ``tasks``
    item's ``input`` and ``result`` the value. ``own``: an item of the graph streamed; else
    of a sub-graph, which may have a state class: only what holds ``ROOT`` alone is read."""
    if type(payload) is not dict:
        return payload
    if mode == "values":
        if INTERRUPT_KEY in payload:
            return {INTERRUPT_KEY: payload[INTERRUPT_KEY]} if own or ROOT in payload else payload
        return payload.get(ROOT) if own or ROOT in payload else payload
    if mode == "updates":
        return {
            k: v if k in (INTERRUPT_KEY, CACHED_KEY) else root_value(v) for k, v in payload.items()
        }
    if mode == "tasks":
        if "input" in payload:
            return {**payload, "input": root_value(payload["input"])}
        if "result" in payload:
            return {**payload, "result": root_value(payload["result"])}
    return payload


class RootStream(SubgraphsStream):
    """The stream of a graph of a one-value state (``StateGraph(int)``), or of one that
    runs such a sub-graph (``subgraphs=True``): the items as ``root_view`` shows them."""

    __slots__ = ()

    def put(self, ns: str, mode: str, payload: Any) -> None:
        own = ns == self.root
        if own and not self.run_is_root():
            own = False
        super().put(ns, mode, root_view(mode, payload, own=own))

    def run_is_root(self) -> bool:
        """Whether the graph streamed (not only a sub-graph of it) has a one-value state."""
        run = self.run
        return run is not None and run.graph.schema.root


class EntryStream(SubgraphsStream):
    """An entrypoint's stream, LangGraph's views (its state is its function's return value;
    its task calls are tasks of its own Pregel there, no sub-graphs):

    - ``values``: the return value (none before the first step unless the run continues:
      ``None``, ``Command``), ``{"__interrupt__": (...)}`` when it pauses;
    - ``updates``: ``{name: return value}``, and each task call's ``{task: result}``;
    - ``tasks``: the node's input is the run's input, its result ``{"__end__": value}``; a
      task call's input ``(args, kwargs)``, its result ``{"__return__": result}`` (none for a
      call that paused: the entrypoint's end asks its question; a call that had finished
      shows its start again on resume, alone);
    - a task call's items are its entrypoint's (``()`` with ``subgraphs=True``; its
      ``custom`` items in the calling task's namespace there, ``("entry:task_id",)``, a
      task's call of a task ``("entry:task_id", "t:task_id")``, as LangGraph's): it has no
      state of its own, and its question is asked once, by the entrypoint.

    An entrypoint called inside (``other.ainvoke(...)``) shows the same way in its namespace,
    and so does a task call of any graph's node, in that graph's (``tasks`` and ``updates``
    items as above, no ``values``)."""

    __slots__ = ()

    def __init__(self, mode: str | Iterable[str], *, subgraphs: bool = False) -> None:
        super().__init__(mode, subgraphs=subgraphs)
        self.entries = set()
        self.live = True  # a task call's items come while the entrypoint's node still runs

    def _caller(self, run: GraphRun) -> str | None:
        """The namespace of the run (an entrypoint's, or any graph's) whose node called
        ``run``, a task call (directly, or through tasks calling tasks): its items are that
        run's. None for any other run."""
        if not run.graph.task_call:
            return None
        parent = run.parent
        while parent is not None and parent.graph.task_call:
            parent = parent.parent
        return None if parent is None else parent.head.ns

    def put(self, ns: str, mode: str, payload: Any) -> None:
        if ns in self.entries:  # an entrypoint's own item: its function's view
            payload = entry_view(mode, payload)
        super().put(ns, mode, payload)

    def step(self, run: GraphRun, step: Any) -> None:
        if self._caller(run) is None:
            super().step(run, step)

    def subgraph_started(self, run: GraphRun) -> None:
        if run.graph.stream_class is EntryStream:  # an entrypoint's run
            self.entries.add(run.head.ns)
            if run.input_written is not None:
                return  # the state before the first step of a new input: LangGraph shows none
        caller = self._caller(run)
        if caller is None:
            GraphStream.subgraph_started(self, run)  # (not the change to this class)
        elif self.tasks and not run.head.frontier and run.input_written is None:
            # a call that had finished, its saved result returned: LangGraph shows its start
            # again (its task is scheduled, its write found), with no end
            node = next(iter(run.graph.nodes))
            head = run.head
            payload = {
                "id": task_id((head.lineage, head.ns, head.step), node, 0),
                "name": node,
                "input": TASK_ARGS.get(((), {})),
            }
            GraphStream.put(self, caller, "tasks", payload)

    def task_started(self, run: GraphRun, task: GraphTask) -> None:
        caller = self._caller(run)
        if caller is None:
            super().task_started(run, task)
        elif self.tasks or self.debug:
            args, kwargs = TASK_ARGS.get(((), {}))
            payload = {"id": task.id, "name": task.node, "input": (args, kwargs)}
            if self.tasks:
                GraphStream.put(self, caller, "tasks", payload)
            if self.debug:
                shown = {**payload, "triggers": (PUSH_TRIGGER,)}
                GraphStream.put(self, caller, "debug", wrapped("task", _step(run), shown))

    def task_finished(self, run: GraphRun, task: GraphTask, error: BaseException | None) -> None:
        caller = self._caller(run)
        if caller is None:
            super().task_finished(run, task, error)
        elif (self.tasks or self.debug) and (task.writes is not None or error is not None):
            writes = dict(shown_writes(task) or ())
            payload: dict[str, Any] = {
                "id": task.id,
                "name": task.node,
                "result": {"__return__": writes["output"]} if "output" in writes else {},
                "error": error,
                "interrupts": [],
            }
            if self.tasks:
                GraphStream.put(self, caller, "tasks", payload)
            if self.debug:
                GraphStream.put(self, caller, "debug", wrapped("task_result", _step(run), payload))

    def wrote(self, run: GraphRun, task: GraphTask) -> None:
        caller = self._caller(run)
        if caller is None:
            super().wrote(run, task)
        elif self.updates and task.writes is not None:
            output = dict(shown_writes(task) or ()).get("output")
            GraphStream.put(self, caller, "updates", {task.node: output})

    def cached(self, run: GraphRun, task: GraphTask) -> None:
        caller = self._caller(run)
        if caller is None:
            super().cached(run, task)
        elif self.updates:
            output = dict(shown_writes(task) or ()).get("output")
            update = {task.node: output, CACHED_KEY: {"cached": True}}
            GraphStream.put(self, caller, "updates", update)

    def custom(self, run: GraphRun, task_id: str, value: Any) -> None:
        caller = self._caller(run)
        if caller is None:
            super().custom(run, task_id, value)
        elif "custom" in self.modes:
            if self.subgraphs:  # LangGraph's: shown with the caller's items, in its task's ns
                caller = calling_task_ns(run)
            GraphStream.put(self, caller, "custom", value)


def _step(run: GraphRun) -> int:
    """The step of the run whose node made the task call ``run`` (``debug`` items)."""
    parent = run.parent
    return run.head.step + 1 if parent is None else parent.head.step + 1


def calling_task_ns(run: GraphRun) -> str:
    """The namespace of the task whose call ``run`` is (``"node:task_id"`` under its run's,
    its ``|1``, ``|2`` of a later call dropped): where LangGraph's ``custom`` items of a task
    call are."""
    assert run.parent is not None
    above = run.parent.head.ns
    own = run.head.ns[len(above) + 1 :] if above else run.head.ns
    segment = own.split("|", 1)[0]
    return f"{above}|{segment}" if above else segment


def entry_view(mode: str, payload: Any) -> Any:
    """An item of the entrypoint's own run as LangGraph shows it (see ``_EntryStream``)."""
    if mode == "values":
        if INTERRUPT_KEY in payload:
            return {INTERRUPT_KEY: payload[INTERRUPT_KEY]}
        return payload.get("output")
    if mode == "updates":
        return {
            k: v.get("output") if k != INTERRUPT_KEY and isinstance(v, dict) else v
            for k, v in payload.items()
        }
    if mode == "tasks":
        if "result" not in payload:  # its start: the run's input
            return {**payload, "input": (payload.get("input") or {}).get("input")}
        result = payload["result"]
        return {**payload, "result": {"__end__": result["output"]} if "output" in result else {}}
    if mode == "debug" and payload["type"] != "checkpoint":
        # its node's start and end as the tasks mode's; triggered by the input, as LangGraph's
        shown = entry_view("tasks", payload["payload"])
        if "triggers" in shown:
            shown["triggers"] = (START,)
        return {**payload, "payload": shown}
    return payload


class RootEntryStream(EntryStream):
    """A ``RootStream`` once an entrypoint or a task call runs inside it (``EntryStream``)."""

    __slots__ = ()

    def put(self, ns: str, mode: str, payload: Any) -> None:
        own = ns == self.root and self.run is not None and self.run.graph.schema.root
        super().put(ns, mode, root_view(mode, payload, own=own))


def sink_for(graph: Any, mode: str | Iterable[str], subgraphs: bool) -> GraphStream:
    """The stream sink of a run of ``graph`` (its ``stream_class``, else a
    ``SubgraphsStream``, for the entrypoints and task calls that may run inside it), of
    ``mode`` (``GRAPHS_MODE``: the graph's ``stream_mode``)."""
    check_subgraphs(subgraphs)
    if mode is GRAPHS_MODE:
        mode = graph.stream_mode
    if graph.stream_class is not None:
        made: GraphStream = graph.stream_class(mode, subgraphs=subgraphs)
        return made
    if graph.schema.root:
        return RootStream(mode, subgraphs=subgraphs)
    return SubgraphsStream(mode, subgraphs=subgraphs)


__all__ = [
    "TASK_ARGS",
    "EntryStream",
    "SubgraphsStream",
    "calling_task_ns",
    "entry_view",
    "sink_for",
]
