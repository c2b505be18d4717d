"""``StateGraph``: declare nodes and edges, then ``compile()`` into a runnable graph."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import typing_extensions
from pydantic import BaseModel

from tinyagents.errors import ArgumentError, GraphValidationError, kind_of
from tinyagents.graph import mermaid
from tinyagents.graph.agent_node import AgentNode
from tinyagents.graph.caching import CachePolicy, bind_cache, check_cache, check_policy
from tinyagents.graph.compiled import CompiledGraph
from tinyagents.graph.core import Branch, NodeSpec, breakpoint_nodes, recursion_limit_problem
from tinyagents.graph.graph_runtime import check_context_schema
from tinyagents.graph.longterm import check_store
from tinyagents.graph.state import StateSchema, read_schema
from tinyagents.graph.types import (
    END,
    START,
    Command,
    RetryPolicy,
    TimeoutPolicy,
    WrongKindError,
    finite_seconds,
    node_name,
)
from tinyagents.graph.validation import validate
from tinyagents.harness.agent import Agent
from tinyagents.protocol.ids import MAX_ID_LENGTH, id_problem, shown_id, shown_repr
from tinyagents.protocol.text import shows_nothing
from tinyagents.store.cache.base import BaseCache
from tinyagents.store.checkpoint.base import Checkpointer

if TYPE_CHECKING:
    from tinyagents.store.longterm.base import GraphStore

#: The characters a namespace is built with (``"node:task_id"`` segments, ``|``-joined): no
#: node name may hold one, as in LangGraph, or its sub-graph's namespace would not parse.
NS_SEPARATORS = ("|", ":")
#: The longest node name, in characters: the id rule's bound (``MAX_ID_LENGTH``). A sub-graph's
#: checkpoints are keyed by its namespace, which holds the name, and a longer one failed deep
#: inside PostgreSQL (its btree index rows hold about 2.7 KB) where the other checkpointers
#: took it; checked when the node is added, on every checkpointer alike.
MAX_NODE_NAME_LENGTH = MAX_ID_LENGTH


def _unprintable(name: str) -> str | None:
    """Why ``name`` cannot be a node name by the id rule's characters, or None: a control
    character (NUL among them) or a lone surrogate. A sub-graph's namespace holds its node's
    name: one with NUL ran on the memory and SQLite checkpointers and failed on PostgreSQL,
    and a lone surrogate failed every run (a task id is a hash of the name's UTF-8)."""
    problem = id_problem(name)  # the length is checked before, with its own message
    if problem is not None:
        return problem
    try:
        name.encode()
    except UnicodeEncodeError:
        return "holds a lone surrogate, which UTF-8 text cannot hold"
    return None


def is_async_callable(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def positional_arity(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` needs. A parameter with a default is the
    function's own (``lambda s, n=n: ...``, the loop-closure idiom, as in LangGraph), so it
    is not counted: such a node is called with the state alone."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return 2
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


#: the parameters LangGraph fills in by name, past a node's or router's first: its
#: ``RunnableConfig`` and its ``StreamWriter``, where ours gives the ``NodeContext``, which
#: reads as the one and is called as the other; its ``store``; and its ``Runtime``, where ours
#: gives a ``GraphRuntime`` (the one place that fills them in: ``graph_runtime.context_kwargs``)
CONTEXT_PARAMS = ("config", "writer", "store", "runtime")
#: of those, the ones taken by name only, never as the second positional parameter
BY_NAME_ONLY = ("store", "runtime")


def context_params(fn: Callable[..., Any]) -> tuple[bool, tuple[str, ...]]:
    """Whether ``fn`` takes the context, and the names it takes it by (() for by position).
    A second positional parameter without a default takes it by position (any name); so do
    parameters named ``config`` or ``writer``, by name, keyword-only or with a default too, as
    LangGraph fills them in; one named ``store`` takes the long-term store and one named
    ``runtime`` the ``GraphRuntime``, by name only."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False, ()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = tuple(p.name for p in params[1:] if p.name in CONTEXT_PARAMS and p.kind in kinds)
    # the context alone as the second parameter goes by position; the store and the
    # runtime only by name
    if named and not (
        named == (params[1].name,) and named[0] not in BY_NAME_ONLY and params[1].kind is kinds[0]
    ):
        return True, named
    return bool(named) or positional_arity(fn) >= 2, ()


def _hinted_destinations(fn: Any) -> tuple[str, ...]:
    """The nodes a node function's return annotation ``Command[Literal["a", "b"]]`` names
    (also as part of a union: ``Command[Literal["a"]] | None``), as LangGraph reads them; ()
    when it names none or cannot be read."""
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        fn = inspect.getattr_static(type(fn), "__call__", None)  # a callable object
        if not inspect.isfunction(fn):
            return ()
    try:
        returned = typing.get_type_hints(fn).get("return")
    except Exception:  # unresolvable annotations: as LangGraph, no inference
        return ()
    union = typing.get_origin(returned) in (typing.Union, types.UnionType)
    for hint in typing.get_args(returned) if union else (returned,):
        if typing.get_origin(hint) is not Command:
            continue
        args = typing.get_args(hint)
        if args and typing.get_origin(args[0]) is Literal:
            return tuple(v for v in typing.get_args(args[0]) if isinstance(v, str))
    return ()


class StateGraph:
    """A graph over a state schema; every builder method returns ``self`` for chaining.

    >>> graph = StateGraph(State).add_node("a", a).add_edge(START, "a").add_edge("a", END)
    """

    #: what ``compile()`` makes (``func.Entrypoint``'s builder makes one of its own)
    _compiled_class: type[CompiledGraph] = CompiledGraph

    def __init__(
        self,
        state_schema: Any,
        *,
        input_schema: Any = None,
        output_schema: Any = None,
        context_schema: Any = None,
    ) -> None:
        """``input_schema`` / ``output_schema`` (TypedDicts, dataclasses or pydantic models,
        as LangGraph's): run input is read through the first's keys, a run's result holds the
        second's; their fields join the state's channels, and nodes and routers without an
        input schema of their own see the state's keys. ``context_schema`` (a class: a
        dataclass, TypedDict or pydantic model) is what ``run(..., context=...)`` is checked
        against; nodes read it as ``runtime.context`` (``graph_runtime.GraphRuntime``)."""
        self.context_schema = check_context_schema(context_schema)
        schema = read_schema(state_schema)
        if input_schema is not None or output_schema is not None:
            schema = schema.with_io(input_schema, output_schema)
        self.schema: StateSchema = schema
        self.nodes: dict[str, NodeSpec] = {}
        self.edges: list[tuple[str, str]] = []
        self.joins: list[tuple[tuple[str, ...], str]] = []
        self.branches: list[Branch] = []
        #: ``set_node_defaults``: what ``compile()`` gives each node without its own
        self.node_defaults: dict[str, Any] = {}

    def set_node_defaults(
        self,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
        error_handler: Callable[..., Any] | None = None,
    ) -> StateGraph:
        """Policies for every node that has none of its own (LangGraph 1.2's): applied at
        ``compile()``, to the nodes added before or after this call; a node's own
        ``retry_policy`` / ``retry``, ``cache_policy``, ``timeout`` or ``error_handler``
        wins. Not inherited by a sub-graph (it has its own builder). ``timeout``: seconds
        (or a ``timedelta``) per attempt, or a ``TimeoutPolicy``, as ``add_node``'s. ``error_handler``: as
        ``add_node``'s, for every node without its own; the retry and timeout defaults apply
        to the handlers too, as LangGraph's. A value of the wrong kind is a
        ``GraphValidationError``."""
        defaults = self.node_defaults
        if error_handler is not None:
            defaults["error_handler"] = handler_spec("set_node_defaults", error_handler)
        if retry_policy is not None:
            defaults["retry"] = _policies("set_node_defaults", retry_policy, "retry_policy")
        if cache_policy is not None:
            defaults["cache_policy"] = check_policy(cache_policy, "set_node_defaults")
        policy = timeout_policy("set_node_defaults", timeout)
        if policy is not None:
            defaults["timeout"] = policy
        return self

    def add_node(
        self,
        name: str | Callable[..., Any],
        action: Any = None,
        *,
        retry: RetryPolicy | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
        destinations: Sequence[str] = (),
        supervises: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        defer: bool = False,
        input_schema: Any = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy | None = None,
        error_handler: Callable[..., Any] | None = None,
    ) -> StateGraph:
        """Add a node; ``action`` is a function, a compiled graph or an ``Agent``.

        ``destinations`` names the nodes a ``Command(goto=...)`` from this node may lead to
        (validation only). ``supervises`` lists the nodes whose tasks this node may steer
        through the ``graph_supervisor`` actor. ``defer=True``: once triggered, the node
        waits until a step triggers no other node, then runs once (LangGraph's ``defer``).
        ``input_schema`` (a TypedDict, dataclass or pydantic model): the node sees that
        schema's keys only (an instance of it for a dataclass or pydantic schema); its fields
        join the graph's channels, as LangGraph's ``add_node(..., input_schema=...)``.
        ``retry_policy`` is LangGraph's name for ``retry``: one policy, or a list of them, of
        which the first whose ``retry_on`` takes an error decides (attempts count across them).
        ``cache_policy``: a ``CachePolicy``; in a graph compiled with ``cache=...`` a task
        whose input makes a key the node's cache holds reuses those writes instead of running
        (see ``graph/caching.py``).
        ``timeout``: seconds (or a ``timedelta``) each attempt may take, or a
        ``TimeoutPolicy`` (a ``run_timeout`` and an ``idle_timeout`` that progress and
        ``get_runtime().heartbeat()`` hold off); an overrun is a ``NodeTimeoutError``.
        ``error_handler`` (LangGraph 1.2's): a function run in the node's place, in its task,
        once the node's last attempt failed with an ``Exception``. It gets the node's input
        and, in a parameter annotated ``NodeError``, which node failed and with what (plus
        ``config`` / ``runtime`` / ... as a node does); what it returns is the task's result,
        and the run goes where its ``Command(goto=...)`` says only: the node's own edges and
        routers do not run after a failure. A handler that raises fails the run.
        """
        if action is None:
            if not (callable(name) or isinstance(name, CompiledGraph)):
                if not isinstance(name, str):  # add_node(42): LangGraph's TypeError
                    _not_a_node(name, name)
                raise GraphValidationError(f"add_node({name!r}) needs a function or a graph")
            action, name = name, _action_name(name)
        name = _text_name(name)
        if name in (START, END):
            raise GraphValidationError(f"{name!r} is reserved and cannot be a node name")
        if not name:  # LangGraph's takes it; a steering command could not address the node
            raise GraphValidationError(
                "a node name cannot be empty: steering commands, events and the operator API "
                "name a node by it"
            )
        if len(name) > MAX_NODE_NAME_LENGTH:  # a sub-graph's namespace (a checkpoint key) holds it
            raise GraphValidationError(
                f"node name {shown_id(name)!r} is {len(name):,} characters; at most "
                f"{MAX_NODE_NAME_LENGTH} (a sub-graph's checkpoints are keyed by it)"
            )
        unprintable = _unprintable(name)
        if unprintable is not None:  # as a sub-graph's namespace, PostgreSQL refused a NUL
            raise GraphValidationError(
                f"node name {shown_id(ascii(name))} {unprintable} (a sub-graph's checkpoints "
                "are keyed by it)"
            )
        if shows_nothing(name):  # " ": a node no console, trace or event shows a name for
            raise GraphValidationError(
                f"node name {name!a} shows nothing (only spaces or invisible characters): "
                "steering commands, events and the operator API name a node by it"
            )
        for sep in NS_SEPARATORS:  # they split a namespace into its "node:task_id" segments
            if sep in name:
                raise GraphValidationError(
                    f"'{sep}' is a reserved character and is not allowed in the node names."
                )
        if name in self.nodes:
            raise GraphValidationError(f"node {name!r} is already defined")
        policy = timeout_policy(f"node {name!r}", timeout)
        if metadata is not None and not isinstance(metadata, dict):
            raise GraphValidationError(
                f"node {name!r}: metadata must be a dict, got {type(metadata).__name__}"
            )
        policies: tuple[RetryPolicy, ...] = ()
        if retry is not None:
            policies = _policies(f"node {name!r}", retry, "retry")
        if retry_policy is not None:
            if retry is not None:
                raise GraphValidationError(
                    f"node {name!r}: give retry= or retry_policy= (LangGraph's name), not both"
                )
            policies = _policies(f"node {name!r}", retry_policy, "retry_policy")
        spec = NodeSpec(
            name=name,
            retry=policies,
            timeout=policy,
            destinations=_names(destinations, f"node {name!r}: destinations"),
            supervises=_names(supervises, f"node {name!r}: supervises"),
            metadata=dict(metadata or {}),
            defer=defer,
            cache_policy=check_policy(cache_policy, f"node {name!r}"),
        )
        if error_handler is not None:
            spec.error_handler = handler_spec(f"node {name!r}", error_handler)
            if not destinations:
                spec.destinations = spec.error_handler.destinations
        if isinstance(action, CompiledGraph):
            action = action._as_node()  # an @entrypoint is called by a function node
        if input_schema is None and callable(action) and not isinstance(action, type):
            input_schema = self._hinted_input(action)
        if not destinations and callable(action) and not isinstance(action, type):
            spec.destinations = tuple(
                dict.fromkeys((*_hinted_destinations(action), *spec.destinations))
            )
        if input_schema is not None:
            spec.input = self._node_input(input_schema)
        if isinstance(action, CompiledGraph):
            spec.subgraph = action
            spec.is_async = True
        elif isinstance(action, (Agent, AgentNode)):
            spec.agent = action if isinstance(action, AgentNode) else AgentNode(action)
            spec.destinations = tuple(
                dict.fromkeys((*spec.destinations, *spec.agent.destinations()))
            )
            spec.is_async = True
        elif callable(action):
            spec.fn = action
            spec.is_async = is_async_callable(action)
            spec.takes_ctx, spec.ctx_names = context_params(action)
            spec.plain = (
                not policies
                and policy is None
                and not spec.takes_ctx
                and spec.input is None
                and spec.error_handler is None
            )
        else:
            _not_a_node(name, action)
        self.nodes[name] = spec
        return self

    def _hinted_input(self, fn: Any) -> Any:
        """The input schema LangGraph infers from a node function's first parameter: its
        type hint, when that is a TypedDict, dataclass or pydantic model other than the
        state's (of its ``__call__`` for a callable object, as LangGraph reads it)."""
        if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
            if not inspect.ismethod(getattr(fn, "__call__", None)):  # noqa: B004
                return None
            fn = fn.__call__
        try:
            hints = typing.get_type_hints(fn)
            first = next(iter(inspect.signature(fn).parameters), None)
        except Exception:  # unresolvable annotations: as LangGraph, no inference
            return None
        hint = hints.get(first) if first is not None else None
        if not isinstance(hint, type) or hint is self.schema.cls:
            return None
        if typing_extensions.is_typeddict(hint) or dataclasses.is_dataclass(hint):
            return hint
        if issubclass(hint, BaseModel):
            return hint
        return None

    def _node_input(self, cls: Any) -> StateSchema:
        """A node's input schema; its fields join the channels (the state's own channel wins
        for a shared name), and the graph's input and output stay the state's keys. Its
        managed values are filled in for that node alone."""
        node_input = read_schema(cls)
        schema = self.schema
        added = [name for name in node_input.channels if name not in schema.channels]
        if added:
            if schema.state is None:
                schema.state = schema.own_schema()
            state_keys = frozenset(schema.channels)
            if schema.input_keys is None:
                schema.input_keys = state_keys
            if schema.output_keys is None:
                schema.output_keys = state_keys
            for name in added:
                schema.channels[name] = node_input.channels[name]
            # its UntrackedValue fields are saved nowhere, and writes to its fields typed as
            # LangChain messages are made messages as a node returns, as the state's own are
            schema.untracked |= node_input.untracked.intersection(added)
            schema.langchain_keys |= node_input.langchain_keys.intersection(added)
        return node_input

    def add_edge(self, source: str | Sequence[str], target: str) -> StateGraph:
        """``source`` → ``target``; a list of sources waits for all of them (a join)."""
        if not isinstance(source, (str, Iterable)):
            source = _text_name(source)  # refused with its type, not "is not iterable"
        sources = tuple(map(_text_name, (source,) if isinstance(source, str) else source))
        target = _text_name(target)
        if not sources:
            raise GraphValidationError("add_edge needs at least one source")
        _check_ends(sources, [target])
        if len(sources) == 1:
            self.edges.append((sources[0], target))
        else:
            self.joins.append((sources, target))
        return self

    def add_conditional_edges(
        self,
        source: str,
        router: Callable[..., Any],
        mapping: dict[Hashable, str] | Sequence[str] | None = None,
        *,
        path_map: dict[Hashable, str] | Sequence[str] | None = None,
    ) -> StateGraph:
        """After ``source``, go where ``router(state)`` says (a key of ``mapping`` if given;
        ``path_map`` is LangGraph's name for it)."""
        if path_map is not None:
            if mapping is not None:
                raise GraphValidationError(
                    "give a conditional edge's mapping or path_map (LangGraph's name), not both"
                )
            mapping = path_map
        if mapping is not None and not isinstance(mapping, dict):
            mapping = {name: name for name in _names(mapping, "a conditional edge's path_map")}
        if mapping is not None:
            mapping = {key: _text_name(target) for key, target in mapping.items()}
        source = _text_name(source)
        if not callable(router):
            raise GraphValidationError(
                f"the router of {source!r} must be a function of the state, got "
                f"{type(router).__name__}",
                nodes=[source],
            )
        _check_ends([source], mapping.values() if mapping is not None else [])
        if any(b.source == source and b.router is router for b in self.branches):
            # each of its results would be routed twice (LangGraph refuses a second branch
            # of the same name on a node)
            name = getattr(router, "__name__", repr(router))
            raise GraphValidationError(
                f"router {name!r} is already a conditional edge of {source!r}; add it once",
                nodes=[source],
            )
        hinted = self._hinted_input(router)
        takes_config, config_names = context_params(router)
        self.branches.append(
            Branch(
                source=source,
                router=router,
                mapping=mapping,
                is_async=is_async_callable(router),
                input=self._node_input(hinted) if hinted is not None else None,
                takes_config=takes_config,
                config_names=config_names,
            )
        )
        return self

    def add_sequence(self, nodes: Sequence[Callable[..., Any] | tuple[str, Any]]) -> StateGraph:
        """Add ``nodes`` (functions, named by ``__name__``, or ``(name, action)`` pairs) and
        chain them with edges, in order; connect the first and last yourself."""
        if not nodes:
            raise GraphValidationError("add_sequence needs at least one node")
        previous: str | None = None
        for node in nodes:
            if isinstance(node, tuple):
                name, action = node
                self.add_node(name, action)
            else:
                name = _action_name(node)
                self.add_node(node)
            if previous is not None:
                self.add_edge(previous, name)
            previous = name
        return self

    def set_entry_point(self, node: str) -> StateGraph:
        return self.add_edge(START, node)

    def set_conditional_entry_point(
        self,
        router: Callable[..., Any],
        mapping: dict[Hashable, str] | Sequence[str] | None = None,
        *,
        path_map: dict[Hashable, str] | Sequence[str] | None = None,
    ) -> StateGraph:
        """Start where ``router(state)`` says: ``add_conditional_edges(START, ...)``."""
        return self.add_conditional_edges(START, router, mapping, path_map=path_map)

    def set_finish_point(self, node: str) -> StateGraph:
        return self.add_edge(node, END)

    def compile(
        self,
        checkpointer: Checkpointer | bool | None = None,
        *,
        name: str | None = "graph",
        recursion_limit: int = 25,
        task_cancel_policy: str = "skip",
        redirect_conflict: str = "first_accepted",
        interrupt_before: Sequence[str] | str | None = (),
        interrupt_after: Sequence[str] | str | None = (),
        supervisor: Any = None,
        step_timeout: float | None = None,
        cache: BaseCache | None = None,
        store: GraphStore | None = None,
    ) -> CompiledGraph:
        """Validate the graph (networkx) and return a runnable ``CompiledGraph``.

        ``checkpointer``: a ``Checkpointer``, or None (as a sub-graph: its parent's, in a
        namespace of each call). LangGraph's ``True`` makes a sub-graph that keeps its own
        state between calls, in one namespace of the thread per place it runs from (its
        node's name, no task id), so each call goes on from the state the last one left;
        ``False`` one that is never checkpointed, even under a checkpointed parent (an
        ``interrupt()`` in it is an error). Either is for sub-graphs: a graph compiled with
        ``True`` cannot run at the top.

        ``interrupt_before`` / ``interrupt_after``: static breakpoints (``"*"``: every node,
        as LangGraph spells it). A run stops (status ``interrupted``, no ``interrupts``)
        before a step that would run one of these nodes, or after a step that ran one;
        ``run(None, thread_id=...)`` continues. They need a checkpointer (the graph's, or its
        parent's for a sub-graph). ``name=None`` is the default name, ``"graph"``.

        ``step_timeout``: seconds each superstep may take, all its tasks together (LangGraph's
        ``step_timeout``; ``graph.step_timeout = ...`` sets it later). A step that outlives it
        has its unfinished tasks cancelled and fails the run with a ``TimeoutError``; what the
        finished tasks wrote is kept for ``run(None)``, as after a failing node.

        ``supervisor``: a ``SupervisorSpec`` watching every agent run inside this graph (its
        agent nodes, in sub-graphs too, and their sub-agents) when it runs in a ``Runtime``;
        an agent's own spec wins for its runs. Each agent node whose ``aborted`` outcome the
        graph does not route is logged as a warning (``validate_graph`` lists them); route it
        with ``AgentNode(..., on_aborted=...)``.

        ``cache``: a ``BaseCache`` (``tinyagents.store.cache``: ``InMemoryCache``,
        ``SqliteCache``) where the nodes added with a ``cache_policy`` keep their writes;
        ``clear_cache`` empties it.

        ``store``: a long-term store (``tinyagents.store.longterm.GraphStore``) the nodes
        share across threads: a node, router or ``@task`` with a parameter named ``store``
        gets it, and ``get_store()`` returns it (``graph.store``; see ``graph/longterm.py``)."""
        self._check_routing_agents()
        self._check_agent_keys()
        _check_checkpointer(checkpointer)
        check_cache(cache, "compile")
        store = check_store(store, "compile")
        if name is not None and not isinstance(name, str):
            raise GraphValidationError(f"compile(name=...) is text, got {type(name).__name__}")
        validate(self)
        before = breakpoint_nodes(interrupt_before, self.nodes)
        after = breakpoint_nodes(interrupt_after, self.nodes)
        problem = recursion_limit_problem(recursion_limit)
        if problem is not None:
            raise GraphValidationError(problem)
        if task_cancel_policy not in ("skip", "fail_run"):
            raise GraphValidationError("task_cancel_policy must be 'skip' or 'fail_run'")
        if redirect_conflict not in ("first_accepted", "highest_priority", "error"):
            raise GraphValidationError(
                "redirect_conflict must be 'first_accepted', 'highest_priority' or 'error'"
            )
        # Duck-typed: the supervision layer sits above the graph runtime.
        check_graph = getattr(supervisor, "check_graph", None)
        if supervisor is not None and (isinstance(supervisor, type) or check_graph is None):
            raise GraphValidationError(
                f"compile(supervisor=...) takes a SupervisorSpec, got {kind_of(supervisor)}"
            )
        graph = self._compiled_class(
            self,
            checkpointer=None if isinstance(checkpointer, bool) else checkpointer,
            sub_checkpointer=checkpointer if isinstance(checkpointer, bool) else None,
            name="graph" if name is None else name,
            recursion_limit=recursion_limit,
            task_cancel_policy=task_cancel_policy,
            redirect_conflict=redirect_conflict,
            interrupt_before=before,
            interrupt_after=after,
            step_timeout=step_timeout,
        )
        bind_cache(graph, cache)
        if store is not None:
            graph.store = store
        if check_graph is not None:
            graph.supervisor = supervisor
            check_graph(graph)
        return graph

    def _check_routing_agents(self) -> None:
        """An agent node that routes its outcomes (``on_aborted``) has no edges of its own:
        an edge would be followed after an abort as well."""
        routing = {
            n for n, spec in self.nodes.items() if spec.agent is not None and spec.agent.routes
        }
        if not routing:
            return
        sources = {s for s, _ in self.edges} | {b.source for b in self.branches}
        sources |= {s for joined, _ in self.joins for s in joined}
        clash = sorted(routing & sources)
        if clash:
            raise GraphValidationError(
                f"agent node(s) {clash} route their outcomes (AgentNode(on_aborted=...)) and "
                "also have edges, which would be followed after an abort too: name the next "
                "node of a completed run with AgentNode(then=...) instead of add_edge"
            )

    def _check_agent_keys(self) -> None:
        """An agent node's ``input``, ``output`` and ``aborted_key`` given as state keys
        name keys the state has: otherwise the agent would run, spend its model calls, and
        the run fail only when its prompt is read or its answer written."""
        channels = self.schema.channels
        for name, spec in self.nodes.items():
            node = spec.agent
            if node is None:
                continue
            for role, key in (
                ("reads its prompt from", node.input),
                ("writes its answer to", node.output),
                ("writes its abort reason to", node.aborted_key),
            ):
                if isinstance(key, str) and key not in channels:
                    raise GraphValidationError(
                        f"agent node {name!r} {role} state key {key!r}, which the state does "
                        f"not have (it has {sorted(channels)}); name one of them, or pass a "
                        "function",
                        nodes=[name],
                    )

    def to_mermaid(self) -> str:
        return mermaid.to_mermaid(self)


def _policies(
    who: str, policy: RetryPolicy | Sequence[RetryPolicy], arg: str
) -> tuple[RetryPolicy, ...]:
    """``retry=`` / ``retry_policy=``: a ``RetryPolicy``, or LangGraph's list of them (``who``:
    what the error names, ``node 'a'`` or ``set_node_defaults``)."""
    if isinstance(policy, RetryPolicy):
        return (policy,)
    policies = tuple(policy) if isinstance(policy, (list, tuple)) else ()
    if not policies or not all(isinstance(p, RetryPolicy) for p in policies):
        raise GraphValidationError(
            f"{who}: {arg} takes a RetryPolicy or a list of them, got {shown_repr(policy)}"
        )
    return policies


def handler_spec(who: str, fn: object) -> NodeSpec:
    """The spec of an ``error_handler=`` function: its parameter annotated ``NodeError``
    (ours or LangGraph's ``langgraph.errors.NodeError``) takes the failure by name; its other
    parameters are read as a node's (``context_params``), without that one."""
    if not callable(fn) or isinstance(fn, (type, CompiledGraph, Agent, AgentNode)):
        raise WrongKindError(f"{who}: error_handler must be a function, got {kind_of(fn)}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    param = None if signature is None else _error_param(fn, signature)
    called: Callable[..., Any] = fn
    if param is not None:
        assert signature is not None
        if signature.parameters[param].kind not in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            raise GraphValidationError(
                f"{who}: the error handler's NodeError parameter {param!r} must be one a "
                "keyword can give"
            )
        called = _without(fn, signature, param)
    takes_ctx, ctx_names = context_params(called)
    if param is not None and takes_ctx and not ctx_names:
        # the failure goes by name, so the context does too (``h(state, error, config)``
        # called as ``h(state, ctx, error=...)`` gave ``error`` twice)
        ctx_names = (list(inspect.signature(called).parameters)[1],)
    name = getattr(fn, "__name__", None)
    return NodeSpec(
        name=name if isinstance(name, str) and name else type(fn).__name__,
        fn=fn,
        is_async=is_async_callable(fn),
        takes_ctx=takes_ctx,
        ctx_names=ctx_names,
        error_param=param,
        destinations=_hinted_destinations(fn),
    )


def _error_param(fn: Any, signature: inspect.Signature) -> str | None:
    """The parameter of ``fn`` annotated ``NodeError`` (a class of that name: ours or
    LangGraph's; a string annotation naming it too), or None."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: read them as written
        hints = {}
    for p in signature.parameters.values():
        hint = hints.get(p.name, p.annotation)
        if isinstance(hint, str):
            if hint.rsplit(".", 1)[-1] == "NodeError":
                return p.name
        elif isinstance(hint, type) and hint.__name__ == "NodeError":
            return p.name
    return None


def _without(fn: Any, signature: inspect.Signature, param: str) -> Callable[..., Any]:
    """A stand-in of ``fn`` whose signature lacks ``param``: what ``context_params`` reads
    to see how the rest of its parameters are given (never called)."""

    def called(*args: Any, **kwargs: Any) -> Any:  # pragma: no cover - only inspected
        return fn(*args, **kwargs)

    called.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name != param]
    )
    return called


def _action_name(action: Any) -> str:
    """The name ``add_node(action)`` gives a node, as LangGraph's: a compiled graph's name, a
    function's ``__name__``, else the class of a callable object (``functools.partial``
    too)."""
    if isinstance(action, CompiledGraph):
        return action.name
    name = getattr(action, "__name__", None)
    return name if isinstance(name, str) and name else type(action).__name__


def _names(value: object, what: str) -> tuple[str, ...]:
    """A collection of node names (``destinations``, ``supervises``, a conditional edge's
    list): text alone was read letter by letter (``"ab"``: the nodes 'a' and 'b'), and
    anything else that is no collection a bare ``TypeError`` from inside the builder."""
    if isinstance(value, str):
        raise WrongKindError(
            f"{what} takes a collection of node names, got the text {value!r}; for one node "
            f"give [{value!r}]"
        )
    if not isinstance(value, Iterable):
        raise WrongKindError(
            f"{what} takes a collection of node names, got {type(value).__name__} {shown_repr(value)}"
        )
    return tuple(_text_name(name) for name in value)


def _not_a_node(name: Any, action: Any) -> NoReturn:
    """A node that is no function, graph or agent: a ``GraphValidationError`` that is also a
    ``TypeError``, as LangGraph's ("Expected a Runnable, callable or dict"), so ported
    ``except TypeError`` code catches it."""
    raise WrongKindError(
        f"node {name!r} must be a function, a compiled graph or an Agent, "
        f"got {type(action).__name__}"
    )


def timeout_policy(who: str, timeout: object) -> TimeoutPolicy | None:
    """A node's (a ``@task``'s, an ``@entrypoint``'s) ``timeout=`` as its ``TimeoutPolicy``:
    seconds (or a ``timedelta``) are its ``run_timeout``; a ``TimeoutPolicy``, ours or
    LangGraph's, is checked as such. ``who`` names it in the ``GraphValidationError``."""
    if timeout is None or (isinstance(timeout, (int, float)) and not isinstance(timeout, bool)):
        _check_timeout(who, timeout)
    try:
        return TimeoutPolicy.coerce(timeout)
    except ArgumentError as exc:
        if not isinstance(timeout, timedelta) and not hasattr(timeout, "idle_timeout"):
            _check_timeout(who, timeout)  # the scalar's own words
        raise GraphValidationError(f"{who}: timeout: {exc}") from None


def _check_timeout(who: str, timeout: object) -> None:
    """``timeout=`` is None or a finite number of seconds > 0 (NaN failed every attempt at
    once, infinity never timed out, ``True`` was one second)."""
    if timeout is None:
        return
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not finite_seconds(timeout)
    ):
        raise GraphValidationError(
            f"{who}: timeout must be a finite number of seconds > 0, got {shown_repr(timeout)}"
        )


def _check_checkpointer(checkpointer: object) -> None:
    """A checkpointer is a tinyagents ``Checkpointer``, None, or LangGraph's ``True`` /
    ``False`` for a sub-graph (``GraphCore.sub_checkpointer``: its own state kept between
    calls, or never checkpointed)."""
    if checkpointer is None or isinstance(checkpointer, (bool, Checkpointer)):
        return
    raise GraphValidationError(
        "compile(checkpointer=...) takes a tinyagents Checkpointer (MemoryCheckpointer, "
        "SqliteCheckpointer, PostgresCheckpointer), None, or True/False for a sub-graph, got "
        f"{type(checkpointer).__name__}"
    )


def _check_ends(sources: Collection[Hashable], targets: Collection[Hashable]) -> None:
    """An edge (a join's too) leaves END and leads to START nowhere, as LangGraph's; a
    router's mapping is its edges' targets."""
    if END in sources:
        raise GraphValidationError("END has no outgoing edges")
    if START in targets:
        raise GraphValidationError("START has no incoming edges")


def _text_name(name: object) -> str:
    """A node name as plain text (``node_name``); anything but text is refused by its type."""
    if not isinstance(name, str):
        raise GraphValidationError(
            f"a node name is text, got {type(name).__name__}: {shown_repr(name)}"
        )
    return node_name(name)
