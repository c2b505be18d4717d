"""``GraphCore``: what every part of a run needs of a compiled graph.

The nodes, edges, reducers and compile options of a graph, and the plain steps on them:
apply writes through the reducers, route finished nodes to the next frontier, check a goto,
decode a ``Send`` argument. ``CompiledGraph`` adds the public run and thread API on top; the
modules that run a graph (executor, session, steering, driver) are typed against this class,
so none of them imports the module that imports them.
"""

from __future__ import annotations

import dataclasses
import re
import typing
import weakref
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import TypeAdapter, ValidationError

from tinyagents._record import Record
from tinyagents.errors import (
    ArgumentError,
    ConfigurationError,
    GraphValidationError,
    InterruptError,
    InvalidRouteError,
    InvalidUpdateError,
)
from tinyagents.graph._context import enclosing_scope, routing, stable_id, user_failure
from tinyagents.graph.checkpointing import (
    Head,
    Planned,
    arg_class,
    encode,
    joined,
    new_frontier_id,
    pending_input,
    save,
)
from tinyagents.graph.context import NodeContext
from tinyagents.graph.graph_runtime import context_kwargs
from tinyagents.graph.reducers import MISSING, Append, LastValue, Overwrite, detach, reduce
from tinyagents.graph.state import ROOT, StateSchema, managed_values
from tinyagents.graph.types import (
    END,
    START,
    RetryPolicy,
    Send,
    TimeoutPolicy,
    finite_seconds,
    node_name,
)
from tinyagents.protocol.ids import shown_repr
from tinyagents.store.checkpoint.base import WriteRecord

if TYPE_CHECKING:
    from tinyagents.graph.caching import CachedNode, CachePolicy
    from tinyagents.store.cache.base import BaseCache
    from tinyagents.store.checkpoint.base import Checkpointer
    from tinyagents.store.longterm.base import GraphStore

_INTERRUPT_ID = re.compile(r"i-[0-9a-f]{16}")
#: the ``Head.barriers`` entry of the deferred nodes waiting to run (joins use their index)
DEFERRED = "deferred"

#: ``view(i, schema)``: the state the routers of the ``i``-th finished task see, as
#: ``schema`` hands it (a router's own input schema, or None for the state's)
RouterView = Callable[[int, StateSchema | None], Any]
#: ``config(i)``: the context the routers of ``route``'s ``finished[i]`` are given, when they
#: take a second argument (``Branch.takes_config``)
RouterConfig = Callable[[int], NodeContext]


def router_context(head: Head, node: str, task_id: str = "", **run: Any) -> NodeContext:
    """The context a router of ``node`` is given, at the step ``head`` goes on to: its node
    task's (``task_id``; ``run``: the run's ``run_id``, ``runtime`` and ``_run``), or, for
    a router outside a step's tasks (on ``START``, for an ``update_state``), the node's."""
    return NodeContext(
        task_id=task_id,
        node=node,
        step=head.step + 1,
        thread_id=head.thread_id,
        ns=head.ns,
        attempt=1,
        **run,
    )


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class NodeSpec(Record):
    """A node: a function ``(state[, ctx]) -> dict | Command | None``, a sub-graph or an agent."""

    name: str
    fn: Callable[..., Any] | None = None
    subgraph: GraphCore | None = None
    agent: Any = None  # an ``AgentNode``
    #: for each error the first policy whose ``retry_on`` takes it decides (LangGraph's list)
    retry: tuple[RetryPolicy, ...] = ()
    timeout: TimeoutPolicy | None = None
    destinations: tuple[str, ...] = ()
    supervises: tuple[str, ...] = ()
    is_async: bool = False
    takes_ctx: bool = False
    #: the parameters it takes the context by, by name (``config``, ``writer``), as
    #: LangGraph fills them in; () for the second positional one (``builder.context_params``)
    ctx_names: tuple[str, ...] = ()
    #: a bare function: no retry, timeout or context (eligible for the loop's fast path)
    plain: bool = False
    #: ``add_node(..., defer=True)``: once triggered, it waits until nothing else would run
    defer: bool = False
    #: ``add_node(..., input_schema=...)``: the node sees these keys only
    input: StateSchema | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: ``add_node(..., cache_policy=...)``; ``cache``: bound to the graph's cache at
    #: ``compile(cache=...)`` (``graph/caching.py``), None without one
    cache_policy: CachePolicy | None = None
    cache: CachedNode | None = None
    #: ``add_node(..., error_handler=...)``: the function run in the failed task's place
    #: once the node's last attempt failed (a spec of its own: its retry and timeout are
    #: its own, its ``fn`` is given the failure by ``error_param``); None: the run fails
    error_handler: NodeSpec | None = None
    #: of a handler: the parameter its ``NodeError`` goes to (None: it takes none)
    error_param: str | None = None


def with_defaults(spec: NodeSpec, defaults: dict[str, Any]) -> NodeSpec:
    """``spec`` with the ``StateGraph.set_node_defaults`` (``retry``, ``cache_policy``,
    ``timeout``, ``error_handler``) it has no value of its own for; the builder's spec is
    left as it was. The retry and timeout defaults apply to its error handler too, as
    LangGraph's do to its handler nodes."""
    changes = {key: value for key, value in defaults.items() if not getattr(spec, key)}
    handler = changes.get("error_handler", spec.error_handler)
    if handler is not None:
        handled = with_defaults(handler, {k: v for k, v in defaults.items() if k in _HANDLER})
        if handled is not spec.error_handler:
            changes["error_handler"] = handled
    if not changes:
        return spec
    changes["plain"] = spec.plain and not (changes.keys() & _NOT_PLAIN)
    return dataclasses.replace(spec, **changes)


#: the node defaults an error handler takes too (LangGraph's: not its cache or its handler)
_HANDLER = frozenset({"retry", "timeout"})
#: the node defaults that take a node off the loop's fast path (``NodeSpec.plain``)
_NOT_PLAIN = frozenset({"retry", "timeout", "error_handler"})


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class Branch(Record):
    """A conditional edge: ``router(state)`` names the next node(s) or returns ``Send``s."""

    source: str
    router: Callable[..., Any]
    mapping: dict[Hashable, str] | None
    is_async: bool
    #: the schema its first parameter is annotated with, when not the state's: the router
    #: sees that schema's keys only (LangGraph's inferred branch input schema)
    input: StateSchema | None = None
    #: it takes a second argument, as a LangGraph router takes ``config``: its node task's
    #: ``NodeContext``, which reads as LangGraph's ``RunnableConfig``
    takes_config: bool = False
    #: the parameters it takes that context by, by name, as a node's ``ctx_names``
    config_names: tuple[str, ...] = ()

    def targets(self, all_nodes: Sequence[str]) -> list[str]:
        """Where the router may lead, for validation (anywhere when there is no mapping)."""
        if self.mapping is not None:
            return list(dict.fromkeys(self.mapping.values()))
        return [*all_nodes, END]


class DeclaredGraph(Protocol):
    """A graph as declared (a ``StateGraph``): what compiling, validation and mermaid read."""

    @property
    def schema(self) -> StateSchema: ...

    @property
    def nodes(self) -> dict[str, NodeSpec]: ...

    @property
    def edges(self) -> list[tuple[str, str]]: ...

    @property
    def joins(self) -> list[tuple[tuple[str, ...], str]]: ...

    @property
    def branches(self) -> list[Branch]: ...

    @property
    def context_schema(self) -> Any: ...


def dead_ends(graph: DeclaredGraph) -> list[str]:
    """The nodes no edge, join, router or ``destinations`` leaves: the run ends after them
    (LangGraph's rule), as if each had an edge to ``END``."""
    leaving = {source for source, _ in graph.edges} | {b.source for b in graph.branches}
    leaving.update(source for sources, _ in graph.joins for source in sources)
    return [n for n, spec in graph.nodes.items() if n not in leaving and not spec.destinations]


def breakpoint_nodes(
    value: Collection[str] | str | None, nodes: Mapping[str, NodeSpec]
) -> frozenset[str]:
    """``interrupt_before`` / ``interrupt_after`` as node names: ``"*"`` is every node (as
    LangGraph spells it), another string one node's name, None none (LangGraph's default);
    a name the graph does not have is a ``GraphValidationError`` (at ``compile`` and per
    run alike). LangGraph's name of an error handler's node, ``__error_handler__<node>``
    of a node given one by ``add_node``, is taken and dropped: ours runs in the failed
    node's task, and LangGraph 1.2 does not stop there either (its
    ``__default_error_handler__`` it refuses, as ours)."""
    if value is None:
        return frozenset()
    if value == "*":
        return frozenset(nodes)
    if not isinstance(value, (str, Collection)):
        raise GraphValidationError(
            f"interrupt_before/interrupt_after take node names (a list, or '*'), got {shown_repr(value)}"
        )
    names = frozenset(map(node_name, [value] if isinstance(value, str) else value))
    if not names.issubset(nodes):
        handlers = {f"__error_handler__{n}" for n, spec in nodes.items() if spec.error_handler}
        names = names.difference(handlers.difference(nodes))
    unknown = sorted(names.difference(nodes))
    if unknown:
        raise GraphValidationError(
            f"interrupt_before/interrupt_after name unknown node(s) {unknown}; the graph "
            f"has {sorted(nodes)}"
        )
    return names


class GraphCore:
    """A validated graph's structure and options; ``CompiledGraph`` is the runnable one."""

    #: The ``StreamSink`` class of its streams (``graph.stream``, ``handle.stream``): None for
    #: ``GraphStream`` (``SubgraphsStream`` with ``subgraphs=True``: ``graph/func_stream.py``); an
    #: ``Entrypoint``'s shows its function's values (``graph/func.py``).
    stream_class: Any = None
    #: The mode of its streams when ``mode=`` is not given (LangGraph's ``stream_mode``):
    #: ``"values"``; an ``Entrypoint``'s ``"updates"``.
    stream_mode: str = "values"
    #: Whether its runs are calls of an entrypoint's ``@task`` (``graph/func.py``): a stream
    #: shows them as tasks of the entrypoint, with no state of their own.
    task_call: bool = False
    #: ``compile(cache=...)``: where its nodes with a ``cache_policy`` keep their writes
    cache: BaseCache | None = None

    def start_name(self) -> str:
        """The name an input's checkpoint shows for the task that reads the input
        (``checkpoints`` stream items): START, an ``Entrypoint``'s its function's node."""
        return START

    def shown_state(self, values: dict[str, Any]) -> Any:
        """What a run's result (``GraphResult.state``, a started run's ``RunResult.output``)
        shows of the state: the state itself (a one-value state's value: ``StateGraph(int)``);
        an ``Entrypoint``'s, its function's return value."""
        return values.get(ROOT) if self.schema.root else values

    def __init__(
        self,
        builder: DeclaredGraph,
        *,
        checkpointer: Checkpointer | None,
        name: str,
        recursion_limit: int,
        task_cancel_policy: str,
        redirect_conflict: str,
        interrupt_before: Collection[str] = (),
        interrupt_after: Collection[str] = (),
        step_timeout: float | None = None,
        sub_checkpointer: bool | None = None,
    ) -> None:
        self.builder = builder
        #: LangGraph's ``compile(checkpointer=True/False)`` of a sub-graph: True keeps its
        #: state between calls (``persistent_ns``), False never checkpoints it; None (a
        #: ``Checkpointer`` or none given) checkpoints it with its parent's, per call
        self.sub_checkpointer = sub_checkpointer
        self._step_timeout = check_step_timeout(step_timeout)
        #: static breakpoints: stop before / after these nodes run (``run`` can add its own)
        self.interrupt_before = frozenset(interrupt_before)
        self.interrupt_after = frozenset(interrupt_after)
        self.schema = builder.schema
        #: ``StateGraph(context_schema=...)``: what a run's ``context=`` is checked against
        self.context_schema = builder.context_schema
        self.nodes: dict[str, NodeSpec] = dict(builder.nodes)
        defaults = getattr(builder, "node_defaults", None)  # ``StateGraph.set_node_defaults``
        if defaults:
            self.nodes = {name: with_defaults(s, defaults) for name, s in self.nodes.items()}
        own = self.schema.state
        if own is not None:
            # the channels hold more than the state's keys (input/output schemas, private
            # keys): a function node, a sub-graph node or a router without a schema of its
            # own reads the state's keys, as LangGraph's default input schema is the state
            # schema (an agent node reads the key it names)
            self.nodes = {
                name: dataclasses.replace(spec, input=own, plain=False)
                if spec.agent is None and spec.input is None
                else spec
                for name, spec in self.nodes.items()
            }
        self.checkpointer = checkpointer
        #: The long-term store of ``compile(store=...)`` (``graph/longterm.py``): its nodes'
        #: ``store`` parameter and ``get_store()``; None without one. (An instance attribute:
        #: each superstep reads it, and a class attribute read through an instance is slow.)
        self.store: GraphStore | None = None
        self.name = name
        self.recursion_limit = recursion_limit
        self.task_cancel_policy = task_cancel_policy
        self.redirect_conflict = redirect_conflict
        static: dict[str, list[str]] = {}
        for source, target in builder.edges:
            static.setdefault(source, [])
            if target not in static[source]:
                static[source].append(target)
        self.static: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in static.items()}
        branches: dict[str, list[Branch]] = {}
        for branch in builder.branches:
            if own is not None and branch.input is None:
                branch = dataclasses.replace(branch, input=own)
            branches.setdefault(branch.source, []).append(branch)
        self.branches: dict[str, tuple[Branch, ...]] = {k: tuple(v) for k, v in branches.items()}
        self.joins: list[tuple[frozenset[str], str]] = [
            (frozenset(sources), target) for sources, target in builder.joins
        ]
        self.joins_from: dict[str, list[int]] = {}
        for index, (sources, _) in enumerate(builder.joins):
            for source in sources:
                self.joins_from.setdefault(source, []).append(index)
        self._arg_adapters: dict[str, TypeAdapter[Any] | None] = {}
        #: (node, call index) -> the graph that node called from inside its function, so
        #: ``get_state(subgraphs=True)`` can read that sub-graph's namespace (one entry per
        #: call site: it does not grow with runs)
        self.called: dict[tuple[str, int], GraphCore] = {}
        #: deferred nodes (``add_node(..., defer=True)``), held by ``route`` until no other
        #: node would run
        self.deferred = frozenset(n for n, spec in self.nodes.items() if spec.defer)
        # nodes (and START) whose successors never depend on state: their next frontier is
        # a constant (shared, never mutated: a head's frontier is only ever replaced). With
        # deferred nodes every frontier goes through ``route``, which holds and releases them.
        self.simple_next: dict[str, list[Planned]] = {
            node: [Planned(node=t) for t in sorted(self.static.get(node, ())) if t != END]
            for node in (START, *self.nodes)
            if node not in self.branches
            and node not in self.joins_from
            and not self.deferred
            # a task its error handler finished goes where the handler's goto says only
            and (node == START or self.nodes[node].error_handler is None)
        }

    @property
    def step_timeout(self) -> float | None:
        """Seconds each superstep may take, all its tasks together (``None``: no bound), as
        LangGraph's ``step_timeout``; settable after ``compile``, as there."""
        return self._step_timeout

    @step_timeout.setter
    def step_timeout(self, value: float | None) -> None:
        self._step_timeout = check_step_timeout(value)

    def refused(self, key: str, what: str, exc: Exception) -> InvalidUpdateError:
        """The ``InvalidUpdateError`` of a ``what`` (the input, an update) whose value of
        ``key`` its reducer refused with ``exc``: named, where it was the reducer's bare
        error."""
        reducer = self.schema.channels[key].reducer.name
        return InvalidUpdateError(
            f"the reducer of {key!r} ({reducer}) refused the {what}: {type(exc).__name__}: {exc}"
        )

    def limit(self, recursion_limit: int | None) -> int:
        """A run's step limit: ``recursion_limit`` when given (at least 1), else the graph's."""
        if recursion_limit is None:
            return self.recursion_limit
        problem = recursion_limit_problem(recursion_limit)
        if problem is not None:  # a ValueError, as LangGraph's; 0 used to mean the default
            raise ArgumentError(problem)
        return recursion_limit

    async def start_input(
        self, head: Head, data: Any, cp: Checkpointer | None, recursion_limit: int
    ) -> frozenset[str]:
        """Apply run input to ``head``: writes through the reducers, frontier from START.
        Returns the keys the input wrote.

        With a checkpointer the input is saved first as a checkpoint of its own, as
        LangGraph's: the state before it, the input waiting (``next`` is ``START``) — step -1
        on a new thread, the head's step + 1 on a thread that has one. The first step's
        checkpoint (source ``"loop"``) follows; a run continued or replayed from the input's
        checkpoint applies the input then (``take_pending_input``)."""
        return await self.start_writes(head, self.schema.coerce_input(data), cp, recursion_limit)

    async def check_input(self, head: Head, data: Any, recursion_limit: int) -> None:
        """Raise what ``start_input`` would raise for ``data`` on ``head`` (the schema, a
        reducer, a router on START), on a copy: ``head`` is left as it was."""
        writes = self.schema.coerce_input(data)
        await self._first_step(head.staged(writes), writes, recursion_limit)

    async def start_writes(
        self,
        head: Head,
        writes: dict[str, Any],
        cp: Checkpointer | None,
        recursion_limit: int,
        goto: list[str | Send] | None = None,
    ) -> frozenset[str]:
        """``start_input`` of writes already read from the input (a new thread's
        ``Command(update=...)`` writes the state's keys, not the input schema's; its
        ``goto`` joins the first step)."""
        if cp is None:
            head.step += 1
            await self._first_step(head, writes, recursion_limit, goto)
            return frozenset(writes)
        # the first step on a copy first: an input a reducer or a router refuses saves nothing
        applied = head.staged(writes)
        delta = await self._first_step(applied, writes, recursion_limit, goto)
        await self._save_input(head, writes, cp)
        head.values, head.barriers, head.frontier = (
            applied.values,
            applied.barriers,
            applied.frontier,
        )
        head.step += 1
        await self._save_first_step(head, cp, delta)
        return frozenset(writes)

    async def save_input(self, head: Head, data: Any, cp: Checkpointer) -> None:
        """``update_state(data, as_node="__input__")``, as LangGraph's: ``data`` saved as a
        run's input is (``start_input``'s first checkpoint, source ``"input"``), not applied:
        the state is the head's, ``next`` is ``START``, and ``run(None)`` or an update as
        ``START`` goes on from it (``{}`` too, as a run's input of no key). An input that the
        schema, a reducer or a router on START refuses raises and saves nothing."""
        writes = self.schema.coerce_input(data)
        await self._first_step(head.staged(writes), writes, self.recursion_limit)
        await self._save_input(head, writes, cp)

    async def _save_input(self, head: Head, writes: dict[str, Any], cp: Checkpointer) -> None:
        """Save ``writes`` as an input's checkpoint: the state before it, the input waiting
        (``next`` is ``START``), step -1 on a new thread, the head's step + 1 on one that has
        a checkpoint."""
        head.step = head.step + 1 if head.checkpoint_id is not None else -1
        head.frontier = [Planned(node=START, arg=writes)]
        head.frontier_id = new_frontier_id()
        head.records = {}
        await save(cp, head, delta={} if head.seq >= 0 else None, source="input")

    async def take_pending_input(
        self, head: Head, cp: Checkpointer | None, recursion_limit: int
    ) -> frozenset[str] | None:
        """If ``head`` is an input's checkpoint (its input not applied yet: a run replayed
        from there, or stopped between the two saves of ``start_input``), apply the input as
        its first step; return the keys it wrote, or None when nothing was pending."""
        writes = pending_input(head)
        if writes is None:
            return None
        head.step += 1
        delta = await self._first_step(head, writes, recursion_limit)
        if cp is not None:
            await self._save_first_step(head, cp, delta)
        return frozenset(writes)

    async def _save_first_step(self, head: Head, cp: Checkpointer, delta: dict[str, Any]) -> None:
        """Save the step that applied an input (source ``"loop"``, START's output)."""
        head.frontier_id = new_frontier_id()
        await save(cp, head, delta=delta if head.seq >= 0 else None, source="loop", ran=[START])

    async def _first_step(
        self,
        head: Head,
        writes: dict[str, Any],
        recursion_limit: int,
        goto: list[str | Send] | None = None,
    ) -> dict[str, Any]:
        """The first step of a run from input, on ``head`` (not saved): ``writes`` through
        the reducers and the frontier from START (and ``goto``). Returns the deltas of the
        writes. A value a reducer refuses is an ``InvalidUpdateError`` naming its key, as
        ``update_state``'s (it was the reducer's bare error)."""
        delta: dict[str, Any] = {}
        for key, value in writes.items():  # one key at a time: the refused one is named
            try:
                delta.update(self.apply_writes(head.values, [(key, value)]))
            except InvalidUpdateError:
                raise
            except Exception as exc:
                raise self.refused(key, "input", exc) from exc
        frontier = self.simple_next.get(START)
        if frontier is None:
            # a router on START runs before the first step: as LangGraph's, it sees the
            # whole limit still to go
            view = self.router_view(head.values, recursion_limit)
            config = lambda i: router_context(head, START)  # noqa: E731
            frontier = await self.route([(START, [])], head.barriers, view, config=config)
        head.frontier = joined(frontier, goto) if goto else frontier
        head.records = {}
        return delta

    def router_view(self, values: dict[str, Any], remaining: int) -> RouterView:
        """The state a router outside a step sees (``route``'s ``view``), with ``remaining``
        steps to go for its managed values (``state.RemainingSteps``, ``IsLastStep``)."""

        def view(_: int, schema: StateSchema | None) -> Any:
            schema = schema or self.schema
            seen = values if schema is self.schema else schema.own(values)
            if schema.managed:
                seen = {**seen, **managed_values(schema.managed, remaining)}
            return schema.view(seen)

        return view

    def apply_writes(self, values: dict[str, Any], writes: list[tuple[str, Any]]) -> dict[str, Any]:
        """Apply writes (in order) through the reducers; return the per-channel deltas. The
        keys stay in the state's field order, as LangGraph lists them."""
        channels = self.schema.channels
        if len(writes) == 1:
            key, value = writes[0]
            current = values.get(key, MISSING)
            reducer = channels[key].reducer
            if type(value) is Overwrite or type(value) is dict:  # perhaps an Overwrite
                new, delta = reduce(reducer, key, current, [value])
            else:  # the hot path: one plain write, straight to the reducer
                new, delta = reducer.apply(key, current, [value])
            values[key] = new
            if current is MISSING:
                self.schema.in_field_order(values)
            return {key: delta}
        before = len(values)
        grouped: dict[str, list[Any]] = {}
        for key, value in writes:
            grouped.setdefault(key, []).append(value)
        for key, batch in grouped.items():
            if len(batch) > 1 and isinstance(channels[key].reducer, LastValue):
                channels[key].reducer.apply(key, MISSING, batch)  # raises InvalidUpdateError
        deltas = {}
        # all or nothing, as LangGraph's: a reducer that raises leaves every channel as the
        # step found it. Each reducer raises before it changes its channel; the new values
        # join ``values`` once all are made (a list an append extended in place is cut back
        # if one refuses), and the channels whose merge cannot be undone so (sets, message
        # lists) come last, on copies but for the very last (nothing after it can raise)
        made: dict[str, Any] = {}
        merged: list[str] | None = None
        try:
            for key, batch in grouped.items():
                reducer = channels[key].reducer
                if reducer.merges_in_place:
                    merged = [key] if merged is None else [*merged, key]
                    continue
                made[key], deltas[key] = reduce(reducer, key, values.get(key, MISSING), batch)
            if merged is not None:
                self._merge_last(values, merged, grouped, deltas)
        except Exception:
            self._cut_back(values, made, deltas)
            raise
        values.update(made)
        if len(values) != before:
            self.schema.in_field_order(values)
        return deltas

    def _merge_last(
        self,
        values: dict[str, Any],
        merged: list[str],
        grouped: dict[str, list[Any]],
        deltas: dict[str, Any],
    ) -> None:
        """Apply the channels that merge in place (``Reducer.merges_in_place``), each on a
        copy kept to put back should a later one raise, but the last."""
        channels = self.schema.channels
        kept: list[tuple[str, Any]] = []
        try:
            for key in merged:
                current = values.get(key, MISSING)
                if key != merged[-1]:
                    kept.append((key, detach(current)))
                values[key], deltas[key] = reduce(channels[key].reducer, key, current, grouped[key])
        except Exception:
            for key, before in kept:
                if before is MISSING:
                    values.pop(key, None)
                else:
                    values[key] = before
            raise

    def _cut_back(
        self, values: dict[str, Any], made: dict[str, Any], deltas: dict[str, Any]
    ) -> None:
        """Undo what making ``made`` changed in place: the items an append added to its list."""
        channels = self.schema.channels
        for key, value in made.items():
            if value is values.get(key, MISSING) and isinstance(channels[key].reducer, Append):
                del value[len(value) - len(deltas[key]) :]

    def preview(self, values: dict[str, Any], writes: list[tuple[str, Any]]) -> dict[str, Any]:
        """``values`` with ``writes`` applied on a copy: the state of an unfinished step, with
        what its finished tasks wrote (a paused or failed run, ``get_state``). The step itself
        applies them, in the same task order, once all of its tasks have finished."""
        if not writes:
            return values
        copy = dict(values)
        for key, _ in writes:
            if key in copy:
                copy[key] = detach(copy[key])
        self.apply_writes(copy, writes)
        return copy

    async def route(
        self,
        finished: list[tuple[str, list[str | Send]]],
        barriers: dict[str, set[str]],
        view: RouterView,
        held: Iterable[str] = (),
        *,
        config: RouterConfig | None = None,
    ) -> list[Planned]:
        """The next frontier after ``finished`` nodes (with their gotos) ran. ``view(i,
        schema)`` is the state the routers of ``finished[i]`` see, as ``schema`` (a router's
        own, or None: the state's) hands it. ``held``: nodes a spent join or deferral pulled
        that have not run yet (an ``update_state`` routes past them): they stay, and a join
        into one of them is not counted again (LangGraph's barrier absorbs it until its node
        runs)."""
        waiting = frozenset(held)
        #: node -> whether a join or a deferral pulled it (``Planned.held``)
        pulls: dict[str, bool] = dict.fromkeys(waiting, True)
        pushes: list[Planned] = []

        def add(target: str | Send) -> None:
            if isinstance(target, Send):
                pushes.append(Planned.of(target))
            else:
                pulls.setdefault(target, False)

        # what ``get_runtime()`` in a router reads (a list: one ``set`` per call, not per task)
        current = None if config is None else [enclosing_scope(), config, 0, self.store]
        token = None if current is None else routing.set(current)
        try:
            for i, (node, goto) in enumerate(finished):
                for target in self.static.get(node, ()):
                    pulls.setdefault(target, False)
                # the node's own gotos first: LangGraph's node writes its Command's before the
                # branches attached to it run, so its Sends come before its routers'
                for jumped in goto:
                    add(jumped)
                state: Any = None
                if current is not None:
                    current[2] = i
                for branch in self.branches.get(node, ()):
                    if branch.input is not None:
                        seen = view(i, branch.input)
                    else:
                        if state is None:
                            state = view(i, None)
                        seen = state
                    context = config(i) if branch.takes_config and config is not None else None
                    for routed in await self.evaluate(branch, seen, context):
                        add(routed)
                for join in self.joins_from.get(node, ()):
                    sources, joined = self.joins[join]
                    if joined in waiting:  # pulled already, not run yet: the join waits for it
                        continue
                    seen = barriers.setdefault(str(join), set())
                    seen.add(node)
                    if seen.issuperset(sources):
                        del barriers[str(join)]
                        pulls[joined] = True
        finally:
            if token is not None:
                routing.reset(token)
        pulls.pop(END, None)
        if self.deferred:
            self._defer(pulls, barriers, waiting)
        # LangGraph's task order: the nodes an edge triggered, by name, then the Sends in the
        # order they were made. A step's writes go through the reducers in this order.
        return [Planned(node=n, held=pulls[n]) for n in sorted(pulls)] + pushes

    def _defer(
        self, pulls: dict[str, bool], barriers: dict[str, set[str]], waiting: frozenset[str]
    ) -> None:
        """Hold the deferred nodes among ``pulls`` (in ``barriers``, so a checkpoint keeps
        them) until a step triggers no other node; then they all run, once each, as
        LangGraph's ``defer=True`` nodes do (its channels' ``finish()``). ``Send`` tasks do
        not hold them back; a deferred node released already (``waiting``) is not held again."""
        triggered = self.deferred.intersection(pulls).difference(waiting)
        if triggered:
            barriers.setdefault(DEFERRED, set()).update(triggered)
            for node in triggered:
                del pulls[node]
        if not pulls and DEFERRED in barriers:
            pulls.update(dict.fromkeys(barriers.pop(DEFERRED), True))

    async def evaluate(
        self, branch: Branch, state: Any, context: NodeContext | None = None
    ) -> list[str | Send]:
        try:
            if branch.config_names:
                kwargs = context_kwargs(branch.config_names, context, self.store)
                out = branch.router(state, **kwargs)
            elif branch.takes_config:
                out = branch.router(state, context)
            else:
                out = branch.router(state)
            if branch.is_async or hasattr(out, "__await__"):
                out = await out
        except BaseException as exc:  # sys.exit, a library's own BaseException: failures
            name = getattr(branch.router, "__name__", "router")
            failure = user_failure(f"router {name!r} after {branch.source!r}", exc)
            if failure is exc:
                raise
            raise failure from exc
        if isinstance(out, (set, frozenset)):  # node names, in a stable order
            out = sorted(out, key=str)
        results = out if isinstance(out, (list, tuple)) else [out]
        targets: list[str | Send] = []
        for result in results:
            if isinstance(result, Send):
                targets.append(result)
                continue
            if branch.mapping is not None:
                if not isinstance(result, Hashable) or result not in branch.mapping:
                    raise InvalidRouteError(
                        f"router {branch.router.__name__!r} after {branch.source!r} returned "
                        f"{result!r}, which is not in its mapping {sorted(map(str, branch.mapping))}"
                    )
                result = branch.mapping[result]
            targets.append(node_name(result) if isinstance(result, str) else result)
        name = getattr(branch.router, "__name__", "router")
        self.check_goto(targets, f"router {name!r} after {branch.source!r}")
        return targets

    def check_goto(self, targets: list[str | Send], who: str) -> None:
        for target in targets:
            node = target.node if isinstance(target, Send) else target
            if not isinstance(node, str) or node == START:
                # LangGraph's "did not return a valid destination" (None, a dict, ...)
                raise InvalidRouteError(
                    f"{who} returned {node!r}, which is not a valid destination: "
                    "return a node name, END, a Send or a list of them"
                )
            if node != END and node not in self.nodes:
                raise InvalidRouteError(f"{who} sent the graph to unknown node {node!r}")
            if isinstance(target, Send) and node == END:  # LangGraph's InvalidUpdateError
                raise InvalidUpdateError(
                    f"{who} sent a Send to END: a Send starts a node; return END itself to finish"
                )

    def decode_arg(self, node: str, value: Any, arg_type: str | None = None) -> Any:
        """A checkpointed ``Send`` argument → the type of the node's first parameter, or,
        where that has no annotation, the class it was saved as (``arg_type``: a pydantic
        model or dataclass, when this process can find it); for ``START``, an input's
        writes → their channels' types."""
        if node == START:
            channels = self.schema.channels
            return {k: channels[k].decode(v) for k, v in value.items() if k in channels}
        if node not in self._arg_adapters:
            self._arg_adapters[node] = _arg_adapter(self.nodes[node])
        adapter = self._arg_adapters[node]
        if adapter is None and arg_type is not None:
            adapter = _class_adapter(arg_type)
        if adapter is None:
            return value
        try:
            return adapter.validate_python(value)
        except ValidationError:
            return value

    def map_resume(self, head: Head, resume: Any) -> list[WriteRecord]:
        """``Command.resume`` → resume records for the tasks that own those interrupts. A
        single value with no interrupt pending, at a stop with steps to run (a breakpoint),
        answers nothing (no records): the run continues, as LangGraph's takes it there. So
        does ``{}``, a map naming no interrupt (never a value, as LangGraph reads it): the
        tasks that asked run again and ask again."""
        pending: dict[str, str] = {}
        #: a task's first interrupt id -> the later interrupt of that task now pending
        later: dict[str, str] = {}
        for task_id, rec in head.records.items():
            if rec.writes is None:
                for i in rec.interrupts:
                    if i.id not in rec.resume:
                        pending[i.id] = task_id
                        if i.index:
                            later[stable_id("i-", i.task_id, 0)] = i.id
        if isinstance(resume, dict) and all(
            isinstance(k, str) and _INTERRUPT_ID.fullmatch(k) for k in resume
        ):
            resume = _first_ids_answer_later(resume, later)
            unknown = sorted(set(resume) - set(pending))
            if unknown:
                raise InterruptError(
                    f"no pending interrupt with id {', '.join(unknown)}; pending: "
                    f"{', '.join(sorted(pending)) or 'none'}"
                )
            answers = dict(resume)
        elif len(pending) == 1:
            answers = {next(iter(pending)): resume}
        elif not pending:
            if head.frontier:
                return []
            raise InterruptError(
                f"Command(resume=...): thread {head.thread_id!r} has no pending interrupt to "
                "answer, and nothing to run: it has finished; give it new input to run it again"
            )
        else:
            raise InterruptError(
                f"{len(pending)} interrupts are pending ({', '.join(sorted(pending))}); "
                "resume them by id: Command(resume={interrupt_id: value, ...})"
            )
        # resume values go through JSON now, so a node sees the same value after a restart
        return [
            WriteRecord(
                task_id=pending[iid], kind="resume", key=iid, value=encode(value, "a resume value")
            )
            for iid, value in answers.items()
        ]


def _first_ids_answer_later(resume: dict[str, Any], later: dict[str, str]) -> dict[str, Any]:
    """``resume`` with each task's first interrupt id read as the id of that task's interrupt
    now pending (``later``), as LangGraph reads a resume map (older LangGraph versions gave
    all of a task's interrupts the first one's id); the pending id itself wins."""
    if not later or not any(iid in later for iid in resume):
        return resume
    answers: dict[str, Any] = {}
    for iid, value in resume.items():
        target = later.get(iid, iid)
        if target == iid or target not in resume:
            answers[target] = value
    return answers


#: A ``TypeAdapter`` per class a ``Send`` argument was saved as (``_class_adapter``).
_CLASS_ADAPTERS: weakref.WeakKeyDictionary[type, TypeAdapter[Any]] = weakref.WeakKeyDictionary()


def _class_adapter(arg_type: str) -> TypeAdapter[Any] | None:
    cls = arg_class(arg_type)
    if cls is None:
        return None
    adapter = _CLASS_ADAPTERS.get(cls)
    if adapter is None:
        adapter = _CLASS_ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def _arg_adapter(spec: NodeSpec) -> TypeAdapter[Any] | None:
    if spec.fn is None:
        return None
    try:
        hints = typing.get_type_hints(spec.fn)
    except Exception:
        return None
    hints.pop("return", None)
    if not hints:
        return None
    annotation = next(iter(hints.values()))
    if annotation is Any or annotation is object:
        return None  # says nothing: the class the argument was saved as decides
    try:
        return TypeAdapter(annotation)
    except Exception:
        return None


def recursion_limit_problem(limit: object) -> str | None:
    """What is wrong with a step limit, or None: a whole number >= 1. NaN compared false with
    every step count and so switched the limit off; 2.5 and True were taken as limits."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        return f"recursion_limit must be a whole number of steps (>= 1), got {shown_repr(limit)}"
    if limit < 1:
        return (
            f"recursion_limit must be at least 1 (a whole number of steps), got {shown_repr(limit)}"
        )
    return None


def check_max_concurrency(limit: object) -> int | None:
    """A run's ``max_concurrency``: ``None`` (every task of a step at once) or a whole number
    >= 1. LangGraph's ``Semaphore`` took 0 as "no limit" and a negative one failed the first
    step that ran tasks; here a bad value is refused before anything runs or is saved."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigurationError(
            "max_concurrency must be None (no limit) or a whole number of tasks >= 1, got "
            f"{shown_repr(limit)}"
        )
    return limit


def check_step_timeout(timeout: object) -> float | None:
    """A graph's ``step_timeout``: ``None`` or a finite number of seconds > 0 (NaN would
    time out no step, 0 every step, as a node's ``timeout=`` is checked)."""
    if timeout is None:
        return None
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not finite_seconds(timeout)
    ):
        raise GraphValidationError(
            f"step_timeout must be None or a finite number of seconds > 0, got {shown_repr(timeout)}"
        )
    return float(timeout)
