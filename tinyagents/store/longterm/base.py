"""``GraphStore``: LangGraph's long-term memory store (``langgraph.store.base.BaseStore``).

A graph's nodes keep what should outlive one thread here: JSON documents (``dict`` values)
under a key in a namespace, a tuple of text labels such as ``("users", "u-1", "memories")``.
Every backend implements one method, ``abatch(ops)``, over four operations (``GetOp``,
``PutOp``, ``SearchOp``, ``ListNamespacesOp``) and passes
``tests/graph/test_langgraph_ports_store.py``; the methods nodes call (``aget``, ``aput``,
``adelete``, ``asearch``, ``alist_namespaces``) check their arguments here and make the ops.

The API is async only (a backend may be a file or a database). LangGraph's synchronous
``get``/``put``/... exist to say so: they raise ``ArgumentError`` naming the ``a`` method.
Semantic search (LangGraph's ``index=`` and ``query=``) is not offered: a store given an
``index`` or a search given a ``query`` raises ``SemanticSearchUnsupported``.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple, NoReturn, TypedDict

from tinyagents import _clock
from tinyagents.errors import ArgumentError, InvalidNamespaceError, SemanticSearchUnsupported
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.text import storable

#: LangGraph's sentinel for "use the store's default TTL"
NOT_PROVIDED: Any = type("NotProvided", (), {"__repr__": lambda self: "NOT_PROVIDED"})()

#: the comparison operators a search filter takes (LangGraph's)
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


class Item:
    """A stored document: its ``value`` and where it is, with when it was written
    (LangGraph's ``Item``, a plain class as there: ``dataclasses`` would cost every
    ``import tinyagents`` the code it generates)."""

    __slots__ = ("created_at", "key", "namespace", "updated_at", "value")

    def __init__(
        self,
        *,
        value: dict[str, Any],
        key: str,
        namespace: tuple[str, ...],
        created_at: datetime,
        updated_at: datetime,
    ) -> None:
        self.value = value
        self.key = key
        self.namespace = tuple(namespace)
        self.created_at = created_at
        self.updated_at = updated_at

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Item):
            return NotImplemented
        return self.dict() == other.dict()

    def __hash__(self) -> int:
        return hash((self.namespace, self.key))

    def dict(self) -> dict[str, Any]:
        """LangGraph's ``Item.dict()``: JSON-ready, timestamps in ISO 8601."""
        return {
            "namespace": list(self.namespace),
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.dict().items())
        return f"{type(self).__name__}({fields})"


class SearchItem(Item):
    """An item a search found; ``score`` is always None here (no semantic search)."""

    __slots__ = ("score",)

    def __init__(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        created_at: datetime,
        updated_at: datetime,
        score: float | None = None,
    ) -> None:
        super().__init__(
            value=value, key=key, namespace=namespace, created_at=created_at, updated_at=updated_at
        )
        self.score = score

    def dict(self) -> dict[str, Any]:
        return {**super().dict(), "score": self.score}


class GetOp(NamedTuple):
    """Read the item at ``namespace`` / ``key`` (None when there is none)."""

    namespace: tuple[str, ...]
    key: str
    refresh_ttl: bool = True


class PutOp(NamedTuple):
    """Write ``value`` at ``namespace`` / ``key``; a ``value`` of None deletes it.
    ``ttl``: minutes until it expires (None: never)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    #: LangGraph's name for it, which hides ``tuple.index``
    index: Literal[False] | list[str] | None = None  # type: ignore[assignment]
    ttl: float | None = None


class SearchOp(NamedTuple):
    """The items in namespaces starting with ``namespace_prefix`` whose values match
    ``filter``, newest write first, ``offset`` / ``limit`` of them."""

    namespace_prefix: tuple[str, ...]
    filter: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    query: str | None = None
    refresh_ttl: bool = True


class MatchCondition(NamedTuple):
    """A namespace that starts (``prefix``) or ends (``suffix``) with ``path``; a ``"*"``
    label there matches any label."""

    match_type: Literal["prefix", "suffix"]
    path: tuple[str, ...]


class ListNamespacesOp(NamedTuple):
    """The namespaces holding items, sorted, cut to ``max_depth`` labels (and then
    deduplicated), ``offset`` / ``limit`` of them."""

    match_conditions: tuple[MatchCondition, ...] | None = None
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0


Op = GetOp | PutOp | SearchOp | ListNamespacesOp
Result = Item | list[SearchItem] | list[tuple[str, ...]] | None


class TTLConfig(TypedDict, total=False):
    """A store's TTL defaults (LangGraph's): ``default_ttl`` minutes for a put that names
    none, and whether reads push an item's expiry back (``refresh_on_read``, default True)."""

    default_ttl: float | None
    refresh_on_read: bool
    sweep_interval_minutes: int | None


class GraphStore(ABC):
    """The long-term store a compiled graph hands its nodes (``compile(store=...)``)."""

    #: every backend here keeps expiry times (LangGraph's flag)
    supports_ttl: bool = True

    def __init__(self, *, index: Any = None, ttl: TTLConfig | None = None) -> None:
        if index is not None:
            raise SemanticSearchUnsupported(
                f"{type(self).__name__}(index=...): semantic search (embeddings) is not "
                "offered; search with filter= on the stored values instead"
            )
        self.ttl_config: TTLConfig | None = _checked_ttl_config(ttl)

    @abstractmethod
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (a put is seen by the ops after it) and return one result
        per op: an ``Item`` or None for a get, a list for a search or a listing, None for a
        put. Every op is checked before any runs: a bad one raises and changes nothing."""

    async def aget(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """The item at ``namespace`` / ``key``, or None."""
        op = GetOp(namespace, key, self._refresh(refresh_ttl))
        result = (await self.abatch([op]))[0]
        return result if isinstance(result, Item) else None

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """Items under ``namespace_prefix`` (``()``: all) whose values match ``filter``:
        ``{"field": value}`` for equality (a nested dict matches a nested part, a list the
        same list), or ``{"field": {"$gt": 3}}`` with ``$eq``, ``$ne``, ``$gt``, ``$gte``,
        ``$lt``, ``$lte``. Newest write first."""
        op = SearchOp(namespace_prefix, filter, limit, offset, query, self._refresh(refresh_ttl))
        found = (await self.abatch([op]))[0]
        assert isinstance(found, list)
        return found  # type: ignore[return-value]

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None = NOT_PROVIDED,
    ) -> None:
        """Write ``value`` (a JSON-ready dict) at ``namespace`` / ``key``, replacing what was
        there (its ``created_at`` is kept). ``ttl``: minutes until it expires (None: never;
        left out: the store's ``default_ttl``). The first label cannot be ``"langgraph"``
        (LangGraph reserves it)."""
        check_namespace(namespace, reserved=True)
        if value is None or not isinstance(value, dict):
            raise ArgumentError(
                f"a store's value is a dict, got {type(value).__name__}: to delete, "
                "call adelete(namespace, key)"
            )
        if ttl is NOT_PROVIDED:
            ttl = (self.ttl_config or {}).get("default_ttl")
        await self.abatch([PutOp(namespace, key, value, index, ttl)])

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """Delete the item at ``namespace`` / ``key`` (nothing there: nothing happens)."""
        await self.abatch([PutOp(namespace, key, None)])

    async def alist_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces that hold items, sorted: those starting with ``prefix`` and ending
        with ``suffix`` (``"*"`` matches any label), cut to ``max_depth`` labels."""
        conditions = tuple(
            MatchCondition(kind, tuple(path))  # type: ignore[arg-type]
            for kind, path in (("prefix", prefix), ("suffix", suffix))
            if path
        )
        found = (await self.abatch([ListNamespacesOp(conditions, max_depth, limit, offset)]))[0]
        assert isinstance(found, list)
        return found  # type: ignore[return-value]

    async def aclose(self) -> None:  # noqa: B027 (a store in memory has nothing to close)
        """Release the backend's connections (a store in memory has none)."""

    async def __aenter__(self) -> GraphStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # LangGraph's synchronous methods: a node here is given an async store.
    def get(self, *args: Any, **kwargs: Any) -> NoReturn:
        _sync("get")

    def put(self, *args: Any, **kwargs: Any) -> NoReturn:
        _sync("put")

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        _sync("delete")

    def search(self, *args: Any, **kwargs: Any) -> NoReturn:
        _sync("search")

    def list_namespaces(self, *args: Any, **kwargs: Any) -> NoReturn:
        _sync("list_namespaces")

    def batch(self, *args: Any, **kwargs: Any) -> NoReturn:
        _sync("batch")

    def _refresh(self, refresh_ttl: bool | None) -> bool:
        if refresh_ttl is not None:
            return refresh_ttl
        return (self.ttl_config or {}).get("refresh_on_read", True)


def _sync(name: str) -> NoReturn:
    raise ArgumentError(
        f"the graph store is async: use `await store.a{name}(...)` (LangGraph's async "
        f"name) instead of store.{name}(...)"
    )


def _checked_ttl_config(ttl: Any) -> TTLConfig | None:
    if ttl is None:
        return None
    if not isinstance(ttl, dict) or set(ttl) - set(TTLConfig.__annotations__):
        raise ArgumentError(
            f"ttl= takes a dict with {sorted(TTLConfig.__annotations__)}, got {shown_repr(ttl)}"
        )
    default = ttl.get("default_ttl")
    if default is not None:
        check_ttl(default)
    if not isinstance(ttl.get("refresh_on_read", True), bool):
        raise ArgumentError("ttl['refresh_on_read'] is True or False")
    return TTLConfig(**ttl)  # type: ignore[typeddict-item]


# -- checks every backend makes before it runs an op ----------------------------------------


def check_namespace(namespace: Any, *, reserved: bool = False, prefix: bool = False) -> None:
    """LangGraph's namespace rules: a non-empty tuple of non-empty text labels without a
    ``.``; ``reserved``: not starting with ``"langgraph"`` (``aput``'s rule); ``prefix``: the
    empty tuple is allowed (a search of everything)."""
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(
            f"a namespace is a tuple of text labels, got {type(namespace).__name__}"
        )
    if not namespace and not prefix:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    for label in namespace:
        if not isinstance(label, str):
            raise InvalidNamespaceError(
                f"Invalid namespace label {shown_repr(label)} found in {shown_repr(namespace)}. "
                f"Namespace labels must be strings, but got {type(label).__name__}."
            )
        if "." in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {shown_repr(namespace)}. Namespace "
                "labels cannot contain periods ('.')."
            )
        if not label:
            raise InvalidNamespaceError(
                f"Namespace labels cannot be empty strings. Got {label!r} in "
                f"{shown_repr(namespace)}"
            )
        if not storable(label):
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {namespace}: a NUL or a lone "
                "surrogate cannot be stored in every backend"
            )
    if reserved and namespace[0] == "langgraph":
        raise InvalidNamespaceError(
            f'Root label for namespace cannot be "langgraph". Got: {namespace}'
        )


#: the longest TTL in minutes (about 1900 years): past it no backend can write the expiry
#: date (``datetime`` ends in the year 9999; SQL backends keep microseconds in 64 bits)
MAX_TTL_MINUTES = 10**9


def check_ttl(ttl: Any) -> None:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not (0 < ttl < math.inf):
        raise ArgumentError(f"ttl is a positive number of minutes or None, got {shown_repr(ttl)}")
    if ttl > MAX_TTL_MINUTES:
        raise ArgumentError(
            f"ttl is at most {MAX_TTL_MINUTES} minutes (about 1900 years), got {shown_repr(ttl)}; "
            "for an item that never expires, give ttl=None"
        )


def _check_flag(refresh_ttl: Any) -> None:
    if not isinstance(refresh_ttl, bool):
        raise ArgumentError(f"refresh_ttl is True or False, got {shown_repr(refresh_ttl)}")


def check_ops(ops: Iterable[Any]) -> list[Op]:
    """``ops`` as a list, each checked; the first bad one raises (before any runs)."""
    checked = list(ops)
    for op in checked:
        if isinstance(op, GetOp):
            check_namespace(op.namespace)
            _check_key(op.key)
            _check_flag(op.refresh_ttl)
        elif isinstance(op, PutOp):
            check_namespace(op.namespace)
            _check_key(op.key)
            if op.value is not None:
                encode_value(op.value)
            if op.index not in (None, False):
                raise SemanticSearchUnsupported(
                    "put(index=...): semantic search is not offered; leave index out"
                )
            if op.ttl is not None:
                check_ttl(op.ttl)
        elif isinstance(op, SearchOp):
            check_namespace(op.namespace_prefix, prefix=True)
            if op.query is not None:
                raise SemanticSearchUnsupported(
                    "search(query=...): semantic search is not offered; search with filter="
                )
            try:
                _check_filter(op.filter)
            except RecursionError:
                raise ArgumentError(
                    "a search's filter is nested too deep to follow; filter on fewer levels"
                ) from None
            _check_page(op.limit, op.offset)
            _check_flag(op.refresh_ttl)
        elif isinstance(op, ListNamespacesOp):
            for condition in op.match_conditions or ():
                if not isinstance(condition, MatchCondition) or condition.match_type not in (
                    "prefix",
                    "suffix",
                ):
                    raise ArgumentError(
                        f"a match condition is MatchCondition('prefix'|'suffix', path), "
                        f"got {shown_repr(condition)}"
                    )
                check_namespace(tuple(condition.path), prefix=True)
            depth = op.max_depth
            if depth is not None and (
                isinstance(depth, bool) or not isinstance(depth, int) or depth < 1
            ):
                raise ArgumentError(f"max_depth is a positive int or None, got {shown_repr(depth)}")
            _check_page(op.limit, op.offset)
        else:
            raise ArgumentError(
                f"a store op is a GetOp, PutOp, SearchOp or ListNamespacesOp, got "
                f"{type(op).__name__}"
            )
    return checked


def _check_key(key: Any) -> None:
    if not isinstance(key, str):
        raise ArgumentError(f"a store key is text, got {type(key).__name__}")
    if not storable(key):
        raise ArgumentError(
            f"store key {key!r} holds a NUL or a lone surrogate, which not every backend can store"
        )


def _check_page(limit: Any, offset: Any) -> None:
    for name, n in (("limit", limit), ("offset", offset)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ArgumentError(f"{name} is an int of 0 or more, got {shown_repr(n)}")


def _check_filter(filter: Any) -> None:
    if filter is None:
        return
    if not isinstance(filter, dict):
        raise ArgumentError(f"filter is a dict of field: value, got {type(filter).__name__}")
    for field, wanted in filter.items():
        if not isinstance(field, str):
            raise ArgumentError(f"a filter's field is text, got {shown_repr(field)}")
        if isinstance(wanted, dict):
            ops = [k for k in wanted if isinstance(k, str) and k.startswith("$")]
            unknown = sorted(set(ops) - OPERATORS)
            if unknown:
                raise ArgumentError(
                    f"filter {field!r}: unsupported operator(s) {unknown}; use one of "
                    f"{sorted(OPERATORS)}"
                )
            if ops and len(ops) != len(wanted):
                raise ArgumentError(
                    f"filter {field!r} mixes operators and fields: {shown_repr(wanted)}"
                )
            if not ops:
                _check_filter(wanted)


def encode_value(value: Any) -> str:
    """``value`` as the JSON text every backend keeps; ``ArgumentError`` for a value that
    is not a dict of text keys to JSON (NaN and infinities included)."""
    if not isinstance(value, dict):
        raise ArgumentError(f"a store's value is a dict, got {type(value).__name__}")
    try:
        _check_keys(value)
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"a store's value must be JSON (a dict of text keys): {exc}") from exc
    except RecursionError:
        raise ArgumentError(
            "a store's value must be JSON (a dict of text keys): it is nested too deep to "
            "encode; flatten it"
        ) from None


def _check_keys(value: Any) -> None:
    """``TypeError`` for a dict key that is not text: JSON would make ``1`` into ``"1"``, and
    the value read back would not be the value put."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"key {key!r} is {type(key).__name__}, not text")
            _check_keys(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_keys(item)


# -- what every backend answers the same way ------------------------------------------------


def matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    """Whether a stored ``value`` matches a search ``filter`` (LangGraph's semantics)."""
    return not filter or all(_compare(_field(value, k), want) for k, want in filter.items())


def _field(value: dict[str, Any], name: str) -> Any:
    """The field a filter names: the key ``name``, else, for a dotted name the value has
    no key of, the nested path (``"user.level"``: ``value["user"]["level"]``), as LangGraph's
    SQL stores read it; None when there is none."""
    if name in value or "." not in name:
        return value.get(name)
    found: Any = value
    for part in name.split("."):
        if not isinstance(found, dict) or part not in found:
            return None
        found = found[part]
    return found


def _compare(have: Any, want: Any) -> bool:
    if isinstance(want, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in want):
            return all(_operator(have, op, arg) for op, arg in want.items())
        return isinstance(have, dict) and all(_compare(have.get(k), v) for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return (
            isinstance(have, list)
            and len(have) == len(want)
            and all(_compare(h, w) for h, w in zip(have, want, strict=True))
        )
    return _same(have, want)


def _same(have: Any, want: Any) -> bool:
    # JSON's true is not 1: a bool matches a bool only
    return isinstance(have, bool) == isinstance(want, bool) and have == want


def _operator(have: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return _compare(have, arg)
    if op == "$ne":
        return not _compare(have, arg)
    # an order comparison holds between two numbers or two texts; a missing field, or one of
    # another type, does not match (where LangGraph's in-memory store raises a TypeError)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (have, arg))
    if not numbers and not (isinstance(have, str) and isinstance(arg, str)):
        return False
    if op == "$gt":
        return bool(have > arg)
    if op == "$gte":
        return bool(have >= arg)
    if op == "$lt":
        return bool(have < arg)
    return bool(have <= arg)


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p in ("*", n) for n, p in zip(part, path, strict=True))


def listed(namespaces: Iterable[tuple[str, ...]], op: ListNamespacesOp) -> list[tuple[str, ...]]:
    """A ``ListNamespacesOp``'s answer from every namespace holding a live item."""
    found = {
        ns[: op.max_depth] if op.max_depth is not None else ns
        for ns in namespaces
        if all(namespace_matches(ns, c) for c in op.match_conditions or ())
    }
    return sorted(found)[op.offset : op.offset + op.limit]


def join(namespace: tuple[str, ...]) -> str:
    """A namespace as the text SQL backends keep (labels hold no ``.``)."""
    return ".".join(namespace)


def split(text: str) -> tuple[str, ...]:
    return tuple(text.split("."))


def searched(found: Iterable[SearchItem], op: SearchOp) -> list[SearchItem]:
    """A ``SearchOp``'s page of the items under its prefix: those matching its filter, the
    newest write first (then by namespace and key), ``offset`` / ``limit`` of them. Every
    backend pages here, so all order alike."""
    kept = [item for item in found if matches(item.value, op.filter)]
    kept.sort(key=lambda item: (item.namespace, item.key))
    kept.sort(key=lambda item: item.updated_at, reverse=True)
    return kept[op.offset : op.offset + op.limit]


def expiry(ttl: float | None, now: datetime) -> datetime | None:
    return None if ttl is None else now + timedelta(minutes=ttl)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(at: datetime) -> int:
    """``at`` as whole microseconds since 1970 (UTC): what SQL backends keep, exactly."""
    return (at - _EPOCH) // timedelta(microseconds=1)


def from_micros(n: int) -> datetime:
    return _EPOCH + timedelta(microseconds=n)


def now() -> datetime:
    """The store's clock (``tinyagents._clock``: a test's ``FakeClock`` moves it)."""
    return _clock.now()
