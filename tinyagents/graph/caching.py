"""Node caching (LangGraph's ``CachePolicy`` and ``compile(cache=...)``).

A node added with ``cache_policy=CachePolicy(...)`` in a graph compiled with
``cache=InMemoryCache()`` (or ``SqliteCache(path)``, ``tinyagents.store.cache``) keeps its
writes in the cache under a key made of its input (``key_func``, by default a digest of the
pickled input). A later task of that node whose input makes the same key does not run: its
cached writes (and gotos) are its result, saved and applied as if it had returned them, and
an ``updates`` stream shows them marked ``{"__metadata__": {"cached": True}}``, as
LangGraph's. Only a node that returned is cached: one that failed or paused on
``interrupt()`` is not. Each node's entries are in a namespace of its own
(``("writes", <function>, <node>)``), which ``clear_cache`` drops.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tinyagents._record import FrozenRecord
from tinyagents.errors import ArgumentError, GraphValidationError, InvalidUpdateError, StoreError
from tinyagents.graph.checkpointing import decode_result, result_write
from tinyagents.graph.types import UNSET
from tinyagents.protocol.ids import shown_repr
from tinyagents.store.cache.base import BaseCache, Namespace, check_ttl

if TYPE_CHECKING:
    from tinyagents.graph.checkpointing import GraphCodec


class CachedSpec(Protocol):
    """What the cache reads of a node (a ``NodeSpec``: ``graph/core.py`` imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def fn(self) -> Callable[..., Any] | None: ...

    @property
    def cache_policy(self) -> CachePolicy | None: ...


class CachedGraph(Protocol):
    """What binding and clearing a cache read of a graph (a ``GraphCore``)."""

    name: str
    nodes: dict[str, Any]
    cache: BaseCache | None


#: the first part of a node's cache namespace (LangGraph's ``CACHE_NS_WRITES``)
WRITES_NS = "writes"


def _freeze(obj: Any, depth: int = 10) -> Any:
    """``obj`` made comparable for pickling as LangGraph's ``_freeze``: a mapping as its
    sorted items (``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` give one key), a list as a
    tuple, a set as its sorted items (LangGraph's pickles it as it is: its order, and so the
    key, changes with the process's hash seed)."""
    if depth <= 0 or isinstance(obj, (str, bytes)):
        return obj
    if isinstance(obj, Mapping):
        items = ((k, _freeze(v, depth - 1)) for k, v in obj.items())
        return tuple(sorted(items, key=lambda item: repr(item[0])))
    if isinstance(obj, (list, tuple)):
        return tuple(_freeze(x, depth - 1) for x in obj)
    if isinstance(obj, (set, frozenset)):
        # sorted: a set's order follows the process's hash seed, and a key read back from a
        # file in another process must be the same
        return ("set", tuple(sorted((_freeze(x, depth - 1) for x in obj), key=repr)))
    if isinstance(obj, Hashable):
        return obj
    if hasattr(obj, "tobytes"):  # numpy and the like
        return (type(obj).__name__, obj.tobytes(), getattr(obj, "shape", None))
    return obj


def default_cache_key(*args: Any, **kwargs: Any) -> bytes:
    """The default ``key_func``: the pickled arguments (a node's input; a task's arguments),
    mappings by their sorted items, as LangGraph's ``default_cache_key``."""
    return pickle.dumps((_freeze(args), _freeze(kwargs)), protocol=5, fix_imports=False)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CachePolicy(FrozenRecord):
    """How a node's writes are cached (``add_node(..., cache_policy=CachePolicy())``).

    ``key_func``: the node's input (a ``@task``'s arguments) -> ``str`` or ``bytes``; equal
    keys reuse one result. ``ttl``: seconds an entry lives (``None``: until cleared)."""

    key_func: Callable[..., str | bytes] = default_cache_key
    ttl: float | None = None

    def __post_init__(self) -> None:
        if not callable(self.key_func):
            raise ArgumentError(
                "CachePolicy(key_func=...) takes a function of the node's input returning "
                f"str or bytes, got {type(self.key_func).__name__} {shown_repr(self.key_func)}"
            )
        object.__setattr__(self, "ttl", check_ttl(self.ttl, "CachePolicy(ttl=...)"))


def check_policy(policy: Any, who: str) -> CachePolicy | None:
    """``cache_policy=``: a ``CachePolicy`` or None."""
    if policy is None or isinstance(policy, CachePolicy):
        return policy
    raise GraphValidationError(
        f"{who}: cache_policy takes a CachePolicy, got {type(policy).__name__} {shown_repr(policy)}"
    )


def check_cache(cache: Any, who: str) -> BaseCache | None:
    """``compile(cache=)``: a ``BaseCache`` (``InMemoryCache``, ``SqliteCache``) or None."""
    if cache is None or isinstance(cache, BaseCache):
        return cache
    raise GraphValidationError(
        f"{who}(cache=...) takes a BaseCache (tinyagents.store.cache: InMemoryCache, "
        f"SqliteCache), got {type(cache).__name__}"
    )


def _identifier(fn: Callable[..., Any] | None) -> str:
    """What the node runs, as LangGraph names it in the namespace: its function's module
    and qualified name (``"__dynamic__"`` for a sub-graph or an agent)."""
    if fn is None:
        return "__dynamic__"
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", None)
    return f"{module}.{name}" if module and name else "__dynamic__"


def namespace(spec: CachedSpec) -> Namespace:
    return (WRITES_NS, _identifier(spec.fn), spec.name)


def task_namespace(func: Callable[..., Any]) -> Namespace:
    """A ``@task``'s namespace, as LangGraph's: its function's, whatever calls it."""
    return (WRITES_NS, _identifier(func))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CachedNode(FrozenRecord):
    """A node's cache as its compiled graph binds it (``NodeSpec.cache``)."""

    cache: BaseCache
    policy: CachePolicy
    ns: Namespace
    #: a ``@task``'s: the arguments of the running call, its key's input (``bind_task``)
    call_args: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]] | None = None

    def key(self, *args: Any, **kwargs: Any) -> str:
        """The digest of ``key_func``'s key for this input."""
        if self.policy.key_func is default_cache_key:
            try:
                made: str | bytes = default_cache_key(*args, **kwargs)
            except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
                # (pickle says what it could not take, never which node or what to do)
                raise ArgumentError(
                    f"node {self.ns[-1]!r}: its CachePolicy's default key pickles the node's "
                    f"input, which holds what pickle cannot take ({type(exc).__name__}: "
                    f"{str(exc)[:200]}); give the CachePolicy a key_func of the input that "
                    "returns str or bytes"
                ) from exc
        else:
            made = self.policy.key_func(*args, **kwargs)
        if isinstance(made, str):
            made = made.encode("utf-8", "surrogatepass")
        if not isinstance(made, bytes):
            raise ArgumentError(
                f"node {self.ns[-1]!r}: CachePolicy's key_func returned "
                f"{type(made).__name__}; it returns str or bytes"
            )
        return hashlib.blake2b(made, digest_size=16).hexdigest()

    def key_of(self, run: Any, task: Any) -> str:
        """The key of ``task``'s input: its ``Send`` argument, or the state as it sees it (a
        ``@task``'s: the call's arguments)."""
        if self.call_args is not None:
            args, kwargs = self.call_args()
            return self.key(*args, **kwargs)
        return self.key(run.view_for(task.spec) if task.arg is UNSET else task.arg)

    async def reuse(self, graph: GraphCodec, task: Any, key: str) -> bool:
        """Give ``task`` the writes and gotos its node left under ``key``, if any are there
        (an entry whose keys the state no longer has, or that no longer reads, is none)."""
        found = await self.cache.get([(self.ns, key)])
        value = found.get((self.ns, key))
        if not isinstance(value, dict) or "writes" not in value:
            return False
        channels = graph.schema.channels
        if any(k not in channels for k, _ in value["writes"]):
            return False
        try:
            task.writes, task.goto = decode_result(graph, value, f"cached entry {key!r}")
        except StoreError:  # a damaged entry (a Send that no longer reads) is none either
            return False
        task.returned = None
        return True

    async def keep(self, graph: GraphCodec, task: Any, key: str) -> None:
        """Store what ``task``'s node returned under ``key``."""
        assert task.writes is not None
        try:
            record = result_write(graph, task.id, task.writes, task.goto)
        except InvalidUpdateError as exc:
            raise InvalidUpdateError(
                f"node {task.node!r} has a cache_policy, and its result cannot be cached: {exc}"
            ) from exc
        await self.cache.set({(self.ns, key): (record.value, self.policy.ttl)})


def bind_cache(graph: CachedGraph, cache: BaseCache | None) -> None:
    """Give each node of ``graph`` with a ``cache_policy`` its ``CachedNode`` (``compile``)."""
    if cache is None:
        return
    graph.cache = cache
    for name, spec in graph.nodes.items():
        if spec.cache_policy is not None:
            bound = CachedNode(cache=cache, policy=spec.cache_policy, ns=namespace(spec))
            # (not ``plain``: the loop's fast path calls a plain node's function directly)
            graph.nodes[name] = dataclasses.replace(spec, cache=bound, plain=False)


def bind_task(
    graph: CachedGraph,
    cache: BaseCache,
    func: Callable[..., Any],
    call_args: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]],
) -> None:
    """Bind the one node of a ``@task``'s graph (compiled with its ``cache_policy``) to the
    ``cache`` of the graph that calls it, keyed by each call's arguments."""
    graph.cache = cache
    for name, spec in graph.nodes.items():
        if spec.cache_policy is not None:
            bound = CachedNode(
                cache=cache, policy=spec.cache_policy, ns=task_namespace(func), call_args=call_args
            )
            graph.nodes[name] = dataclasses.replace(spec, cache=bound, plain=False)


def namespaces(graph: CachedGraph, nodes: Sequence[str] | None) -> list[Namespace]:
    """The cache namespaces of ``nodes`` (None: every node) of ``graph``, for ``clear_cache``;
    a name that is no node is a ``GraphValidationError``."""
    if graph.cache is None:
        raise GraphValidationError(
            f"graph {graph.name!r} has no cache to clear: compile(cache=InMemoryCache()) "
            "(tinyagents.store.cache) gives it one"
        )
    if nodes is None:
        nodes = list(graph.nodes)
    elif isinstance(nodes, str) or not isinstance(nodes, Iterable):  # (an int: a bare TypeError)
        raise GraphValidationError(
            f"clear_cache(nodes=...) takes a list of node names, got {shown_repr(nodes)}"
        )
    else:
        nodes = list(nodes)
        odd = [n for n in nodes if not isinstance(n, str)]
        if odd:
            raise GraphValidationError(
                "clear_cache(nodes=...) takes a list of node names, got "
                f"{type(odd[0]).__name__} {shown_repr(odd[0])} among them"
            )
    unknown = [n for n in nodes if n not in graph.nodes]
    if unknown:
        raise GraphValidationError(
            f"clear_cache: graph {graph.name!r} has no node(s) {unknown} "
            f"(it has {sorted(graph.nodes)})",
            nodes=unknown,
        )
    return [namespace(graph.nodes[n]) for n in nodes]


__all__ = [
    "CachePolicy",
    "CachedNode",
    "bind_cache",
    "bind_task",
    "check_cache",
    "check_policy",
    "default_cache_key",
    "namespaces",
    "task_namespace",
]
