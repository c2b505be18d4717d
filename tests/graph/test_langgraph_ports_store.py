"""LangGraph's long-term store (``langgraph.store``), ported: one conformance suite run
against every ``GraphStore`` backend (memory, a SQLite file, PostgreSQL; the last skips when
the server is unreachable, and fails then when CI=true), then the graph's use of it.

Ported from, test by test:

- libs/checkpoint/tests/test_store.py: ``test_list_namespaces_basic``,
  ``test_list_namespaces_with_wildcards``, ``test_list_namespaces_pagination``,
  ``test_list_namespaces_max_depth``, ``test_list_namespaces_no_conditions``,
  ``test_list_namespaces_empty_store``, ``test_cannot_put_empty_namespace`` (a search with
  ``query=`` is refused here: no semantic search).
- libs/checkpoint-sqlite/tests/test_store.py (and the same tests of checkpoint-postgres):
  ``test_batch_order``, ``test_batch_get_ops``, ``test_batch_put_ops``,
  ``test_batch_search_ops``, ``test_batch_list_namespaces_ops``,
  ``TestSqliteStore.test_basic_store_ops`` / ``test_list_namespaces`` / ``test_search``,
  ``test_sql_injection_vulnerability`` (a hostile filter key matches nothing here, where
  SQLite's raises: filters are read in Python, never put in SQL),
  ``test_sql_injection_filter_values``, ``test_numeric_filter_safety``,
  ``test_boolean_filter_safety``, ``test_filter_keys_with_hyphens_and_digits``,
  ``test_non_ascii`` (its key-value part), ``test_search_namespace_segment_boundary``,
  ``test_search_namespace_wildcard_chars_are_literal``,
  ``test_search_namespace_is_case_sensitive``, ``test_list_namespaces_segment_boundary``,
  ``test_search_empty_prefix_is_unconstrained``,
  ``test_namespace_labels_with_trailing_newline``,
  ``test_list_namespaces_metacharacter_labels``.
- libs/checkpoint-postgres/tests/test_store.py: ``test_store_ttl`` (on a ``FakeClock``
  instead of sleeping), ``test_omit_expired_search_pagination`` (expired items are never
  read, so a page is never short of live ones).
- libs/langgraph/tests/test_pregel_async.py: ``test_store_injected_async`` (a node's
  ``store`` parameter, across threads), ``test_overriding_injectable_args_with_async_task``;
  libs/langgraph/langgraph/config.py's ``get_store`` example.
"""

from __future__ import annotations

import asyncio
import operator
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import _clock
from tinyagents.errors import (
    ArgumentError,
    GraphError,
    GraphValidationError,
    InvalidNamespaceError,
    SemanticSearchUnsupported,
    StoreError,
)
from tinyagents.graph import END, START, StateGraph, entrypoint, get_store, task
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.store.longterm import (
    GetOp,
    GraphStore,
    Item,
    ListNamespacesOp,
    MatchCondition,
    MemoryGraphStore,
    PostgresGraphStore,
    PutOp,
    SearchOp,
    SqliteGraphStore,
)
from tinyagents.testkit import FakeClock


async def _memory(tmp_path: Path, **kw: Any) -> GraphStore:
    return MemoryGraphStore(**kw)


async def _sqlite(tmp_path: Path, **kw: Any) -> GraphStore:
    store = SqliteGraphStore(tmp_path / f"store-{uuid.uuid4().hex[:8]}.db", **kw)
    await store.setup()
    return store


async def _postgres(tmp_path: Path, **kw: Any) -> GraphStore:
    store = PostgresGraphStore(postgres_dsn(), schema=pg_schema(), **kw)
    await store.setup()
    return store


BACKENDS: dict[str, Callable[..., Awaitable[GraphStore]]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
}

Factory = Callable[..., Awaitable[GraphStore]]


@pytest.fixture(params=sorted(BACKENDS))
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    """``await make_store(ttl=...)``: a fresh store of the backend, closed afterwards."""
    made: list[GraphStore] = []

    async def make(**kw: Any) -> GraphStore:
        store = await BACKENDS[request.param](tmp_path, **kw)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.aclose()
    if request.param == "postgres":
        await drop_pg_schemas()


@pytest.fixture
async def store(make_store: Factory) -> GraphStore:
    return await make_store()


# -- the contract, on every backend ----------------------------------------------------------


async def test_basic_store_ops(store: GraphStore) -> None:
    namespace = ("test", "documents")
    value = {"title": "Test Document", "content": "Hello, World!"}
    await store.aput(namespace, "doc1", value)
    item = await store.aget(namespace, "doc1")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (namespace, "doc1", value)
    assert item.created_at == item.updated_at

    updated = {"title": "Updated Document", "content": "Hello, Updated!"}
    await store.aput(namespace, "doc1", updated)
    again = await store.aget(namespace, "doc1")
    assert again is not None and again.value == updated
    assert again.created_at == item.created_at  # a put replaces the value, keeps its birth
    assert again.updated_at >= item.updated_at

    assert await store.aget(("test", "other_documents"), "doc1") is None
    await store.adelete(namespace, "doc1")
    assert await store.aget(namespace, "doc1") is None
    await store.adelete(namespace, "doc1")  # deleting nothing is no error


async def test_values_round_trip_as_json_and_stay_apart_from_the_caller(
    store: GraphStore,
) -> None:
    value = {"n": 1, "f": 1.5, "s": "x", "b": True, "none": None, "list": [1, {"a": []}]}
    await store.aput(("v",), "k", value)
    value["n"] = 2  # the caller's dict changes; the stored item does not
    item = await store.aget(("v",), "k")
    assert item is not None
    assert item.value == {**value, "n": 1}
    item.value["s"] = "changed"
    again = await store.aget(("v",), "k")
    assert again is not None and again.value["s"] == "x"
    assert item.dict()["namespace"] == ["v"]


async def test_batch_order(store: GraphStore) -> None:
    await store.aput(("test", "foo"), "key1", {"data": "value1"})
    await store.aput(("test", "bar"), "key2", {"data": "value2"})
    results = await store.abatch(
        [
            GetOp(namespace=("test", "foo"), key="key1"),
            PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
            SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert len(results) == 5
    first = results[0]
    assert isinstance(first, Item)
    assert (first.value, first.key, first.namespace) == (
        {"data": "value1"},
        "key1",
        ("test", "foo"),
    )
    assert results[1] is None
    found = results[2]
    assert isinstance(found, list) and [i.key for i in found] == ["key1"]  # type: ignore[union-attr]
    assert isinstance(results[3], list)
    assert ("test", "foo") in results[3] and ("test", "bar") in results[3]
    assert results[4] is None

    reordered = await store.abatch(
        [
            SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
            GetOp(namespace=("test", "bar"), key="key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
            GetOp(namespace=("test", "foo"), key="key1"),
            GetOp(namespace=("test",), key="key3"),  # ours: a put is seen by the ops after it
        ]
    )
    assert len(reordered[0]) >= 2  # type: ignore[arg-type]
    assert isinstance(reordered[1], Item) and reordered[1].value == {"data": "value2"}
    assert reordered[3] is None
    assert isinstance(reordered[4], Item) and reordered[4].key == "key1"
    assert isinstance(reordered[5], Item) and reordered[5].value == {"data": "value3"}
    item3 = await store.aget(("test",), "key3")
    assert item3 is not None and item3.value == {"data": "value3"}


async def test_batch_get_ops(store: GraphStore) -> None:
    await store.aput(("test",), "key1", {"data": "value1"})
    await store.aput(("test",), "key2", {"data": "value2"})
    results = await store.abatch(
        [GetOp(("test",), "key1"), GetOp(("test",), "key2"), GetOp(("test",), "key3")]
    )
    assert [r.key if isinstance(r, Item) else r for r in results] == ["key1", "key2", None]


async def test_batch_put_ops(store: GraphStore) -> None:
    results = await store.abatch(
        [
            PutOp(("test",), "key1", {"data": "value1"}),
            PutOp(("test",), "key2", {"data": "value2"}),
            PutOp(("test",), "key3", None),  # a delete
        ]
    )
    assert results == [None, None, None]
    one, two = await store.aget(("test",), "key1"), await store.aget(("test",), "key2")
    assert one is not None and one.value == {"data": "value1"}
    assert two is not None and two.value == {"data": "value2"}
    assert await store.aget(("test",), "key3") is None


async def test_batch_search_ops(store: GraphStore) -> None:
    for namespace, key, value in [
        (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        await store.aput(namespace, key, value)
    tagged, two, foo = await store.abatch(
        [
            SearchOp(("test",), filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(("test",), filter=None, limit=2, offset=0),
            SearchOp(("test", "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert isinstance(tagged, list) and len(tagged) == 2
    assert all(item.value["tag"] == "a" for item in tagged)  # type: ignore[union-attr]
    assert isinstance(two, list) and len(two) == 2
    assert isinstance(foo, list) and [i.namespace for i in foo] == [("test", "foo")]  # type: ignore[union-attr]


async def test_batch_list_namespaces_ops(store: GraphStore) -> None:
    data = [
        (("test", "documents", "public"), "doc1", {"content": "public doc"}),
        (("test", "documents", "private"), "doc2", {"content": "private doc"}),
        (("test", "images", "public"), "img1", {"content": "public image"}),
        (("prod", "documents", "public"), "doc3", {"content": "prod doc"}),
    ]
    for namespace, key, value in data:
        await store.aput(namespace, key, value)
    every, shallow, public = await store.abatch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=2, limit=10, offset=0),
            ListNamespacesOp(
                match_conditions=(MatchCondition("suffix", ("public",)),), limit=10, offset=0
            ),
        ]
    )
    assert isinstance(every, list) and len(every) == len(data)
    assert isinstance(shallow, list) and all(len(ns) <= 2 for ns in shallow)  # type: ignore[arg-type]
    assert shallow == [("prod", "documents"), ("test", "documents"), ("test", "images")]
    assert isinstance(public, list) and all(ns[-1] == "public" for ns in public)  # type: ignore[index]


async def test_list_namespaces(store: GraphStore) -> None:
    namespaces = [
        ("test", "documents", "public"),
        ("test", "documents", "private"),
        ("test", "images", "public"),
        ("test", "images", "private"),
        ("prod", "documents", "public"),
        ("prod", "documents", "private"),
    ]
    for namespace in namespaces:
        await store.aput(namespace, "dummy", {"content": "dummy"})
    assert len(await store.alist_namespaces()) == len(namespaces)
    under_test = await store.alist_namespaces(prefix=["test"])
    assert len(under_test) == 4 and all(ns[0] == "test" for ns in under_test)
    public = await store.alist_namespaces(suffix=["public"])
    assert len(public) == 3 and all(ns[-1] == "public" for ns in public)
    assert all(len(ns) <= 2 for ns in await store.alist_namespaces(max_depth=2))
    assert len(await store.alist_namespaces(limit=3)) == 3
    for namespace in namespaces:
        await store.adelete(namespace, "dummy")
    assert await store.alist_namespaces() == []  # a namespace lives while it holds an item


async def test_list_namespaces_basic(store: GraphStore) -> None:
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    for i, ns in enumerate(namespaces):
        await store.aput(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    lister = store.alist_namespaces
    assert sorted(await lister(prefix=("a", "b"))) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert sorted(await lister(suffix=("f",))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert sorted(await lister(prefix=("a",), suffix=("f",))) == [("a", "b", "f"), ("a", "c", "f")]
    assert sorted(await lister(prefix=("a", "b"), max_depth=3)) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert await lister(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert await lister(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(await lister(prefix=("a", "*", "f"))) == [("a", "b", "f"), ("a", "c", "f")]
    assert sorted(await lister(suffix=("*", "f"))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert await lister(prefix=("nonexistent",)) == []
    assert await lister(prefix=("users", "123")) == [("users", "123")]


async def test_list_namespaces_with_wildcards(store: GraphStore) -> None:
    namespaces = [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
        ("admin", "users", "789"),
        ("guests", "123"),
        ("guests", "456", "preferences"),
    ]
    for i, ns in enumerate(namespaces):
        await store.aput(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    assert sorted(await store.alist_namespaces(prefix=("users", "*"))) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert await store.alist_namespaces(suffix=("*", "preferences")) == [
        ("guests", "456", "preferences")
    ]
    assert await store.alist_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    await store.aput(("admin", "users", "settings", "789"), "foo", {"data": "some_val"})
    assert await store.alist_namespaces(prefix=("*", "users"), suffix=("settings", "*")) == [
        ("admin", "users", "settings", "789")
    ]


async def test_list_namespaces_pagination(store: GraphStore) -> None:
    for i in range(20):
        await store.aput(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": f"v{i}"})
    for offset in (0, 5, 15):
        page = await store.alist_namespaces(prefix=("namespace",), limit=5, offset=offset)
        assert page == [("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]


async def test_list_namespaces_max_depth(store: GraphStore) -> None:
    for i, ns in enumerate(
        [
            ("a", "b", "c", "d"),
            ("a", "b", "c", "e"),
            ("a", "b", "f"),
            ("a", "g"),
            ("h", "i", "j", "k"),
        ]
    ):
        await store.aput(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    assert await store.alist_namespaces(max_depth=2) == [("a", "b"), ("a", "g"), ("h", "i")]


async def test_list_namespaces_no_conditions_and_empty_store(store: GraphStore) -> None:
    assert await store.alist_namespaces() == []
    namespaces = [("a", "b"), ("c", "d"), ("e", "f", "g")]
    for i, ns in enumerate(namespaces):
        await store.aput(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    assert await store.alist_namespaces() == namespaces


async def test_search(store: GraphStore) -> None:
    data = [
        (
            ("test", "docs"),
            "doc1",
            {"title": "First Doc", "author": "Alice", "tags": ["important"]},
        ),
        (("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"]}),
        (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]}),
    ]
    for namespace, key, value in data:
        await store.aput(namespace, key, value)
    assert len(await store.asearch(("test",))) == 3
    docs = await store.asearch(("test", "docs"))
    assert len(docs) == 2 and all(item.namespace == ("test", "docs") for item in docs)
    alice = await store.asearch(("test",), filter={"author": "Alice"})
    assert len(alice) == 2 and all(item.value["author"] == "Alice" for item in alice)
    assert [i.key for i in await store.asearch(("test",), filter={"tags": ["draft"]})] == ["doc2"]
    assert len(await store.asearch(("test",), limit=2)) == 2
    assert len(await store.asearch(("test",), offset=2)) == 1
    assert all(item.score is None for item in await store.asearch(("test",)))


async def test_search_filter_operators(store: GraphStore) -> None:
    for key, value in [
        ("a", {"score": 1, "color": "red", "meta": {"level": 2}}),
        ("b", {"score": 3.5, "color": "blue", "meta": {"level": 5}}),
        ("c", {"score": 5, "color": "red"}),
        ("d", {"color": "green"}),
    ]:
        await store.aput(("items",), key, value)

    async def keys(filter: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in await store.asearch(("items",), filter=filter))

    assert await keys({"score": {"$gt": 1}}) == ["b", "c"]
    assert await keys({"score": {"$gte": 1}}) == ["a", "b", "c"]
    assert await keys({"score": {"$lt": 5}}) == ["a", "b"]
    assert await keys({"score": {"$lte": 3.5}}) == ["a", "b"]
    assert await keys({"score": {"$gte": 1, "$lt": 5}}) == ["a", "b"]
    assert await keys({"color": {"$eq": "red"}}) == ["a", "c"]
    assert await keys({"color": {"$ne": "red"}}) == ["b", "d"]
    assert await keys({"score": {"$gte": 3.0}, "color": "red"}) == ["c"]
    assert await keys({"meta": {"level": 2}}) == ["a"]  # a nested part
    assert await keys({"meta.level": {"$gt": 2}}) == ["b"]  # a dotted path
    assert await keys({"color": {"$gt": "green"}}) == ["a", "c"]  # texts compare as texts
    assert await keys({"missing": None}) == ["a", "b", "c", "d"]  # absent reads as null


async def test_search_orders_newest_write_first(store: GraphStore) -> None:
    clock = FakeClock()
    with _clock.use_clock(clock):
        for key in ("a", "b", "c"):
            await store.aput(("o",), key, {"k": key})
            clock.advance(1)
        await store.aput(("o",), "a", {"k": "a2"})
        assert [i.key for i in await store.asearch(("o",))] == ["a", "c", "b"]
        assert [i.key for i in await store.asearch(("o",), limit=2, offset=1)] == ["c", "b"]


async def test_sql_injection_vulnerability(store: GraphStore) -> None:
    await store.aput(("docs",), "public", {"access": "public", "data": "public info"})
    await store.aput(
        ("docs",), "private", {"access": "private", "data": "secret", "password": "123"}
    )
    normal = await store.asearch(("docs",), filter={"access": "public"})
    assert [i.value["access"] for i in normal] == ["public"]
    malicious = "access') = 'public' OR '1'='1' OR json_extract(value, '$."
    assert await store.asearch(("docs",), filter={malicious: "dummy"}) == []


async def test_sql_injection_filter_values(store: GraphStore) -> None:
    await store.aput(("docs",), "doc1", {"access": "public", "title": "Public Document"})
    await store.aput(("docs",), "doc2", {"access": "private", "title": "Private Document"})
    await store.aput(("docs",), "doc3", {"access": "secret", "title": "Secret Document"})
    for hostile in (
        "public' OR '1'='1",
        "public'; --",
        "public' UNION SELECT * FROM store --",
        "public\x00' OR '1'='1",
        "''''",
        "public' OR 'א'='א",
    ):
        assert await store.asearch(("docs",), filter={"access": hostile}) == []
    await store.aput(("docs",), "doc4", {"title": "O'Brien's Document", "access": "public"})
    found = await store.asearch(("docs",), filter={"title": "O'Brien's Document"})
    assert [i.value["title"] for i in found] == ["O'Brien's Document"]


async def test_numeric_filter_safety(store: GraphStore) -> None:
    await store.aput(("items",), "item1", {"price": 10, "quantity": 5})
    await store.aput(("items",), "item2", {"price": 20, "quantity": 3})
    await store.aput(("items",), "item3", {"price": 30, "quantity": 1})
    over = await store.asearch(("items",), filter={"price": {"$gt": 15}})
    assert len(over) == 2 and all(r.value["price"] > 15 for r in over)
    assert len(await store.asearch(("items",), filter={"price": {"$lt": float("inf")}})) == 3
    assert len(await store.asearch(("items",), filter={"price": {"$gt": float("-inf")}})) == 3
    assert await store.asearch(("items",), filter={"price": {"$eq": float("nan")}}) == []
    assert len(await store.asearch(("items",), filter={"price": {"$lt": 10**100}})) == 3
    await store.aput(("items",), "item4", {"price": -10, "quantity": 0})
    below = await store.asearch(("items",), filter={"price": {"$lt": 0}})
    assert [r.key for r in below] == ["item4"]


async def test_boolean_filter_safety(store: GraphStore) -> None:
    await store.aput(("flags",), "flag1", {"active": True, "name": "Feature A", "n": 1})
    await store.aput(("flags",), "flag2", {"active": False, "name": "Feature B", "n": 0})
    await store.aput(("flags",), "flag3", {"active": True, "name": "Feature C"})
    on = await store.asearch(("flags",), filter={"active": True})
    assert len(on) == 2 and all(r.value["active"] is True for r in on)
    off = await store.asearch(("flags",), filter={"active": False})
    assert [r.value["active"] for r in off] == [False]
    # JSON's true is not 1 (Python's True == 1 would say it is)
    assert [r.key for r in await store.asearch(("flags",), filter={"n": True})] == []
    assert [r.key for r in await store.asearch(("flags",), filter={"active": 1})] == []


async def test_filter_keys_with_hyphens_and_digits(store: GraphStore) -> None:
    await store.aput(
        ("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "nested"}}
    )
    await store.aput(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})

    async def keys(filter: dict[str, Any]) -> list[str]:
        return [r.key for r in await store.asearch(("docs",), filter=filter)]

    assert await keys({"access-level": "public"}) == ["hyphen"]
    assert await keys({"user.access-level": "nested"}) == ["hyphen"]
    assert await keys({"123abc": "ok"}) == ["digit"]
    assert await keys({"user.123abc": "ok2"}) == ["digit"]


async def test_non_ascii(store: GraphStore) -> None:
    texts = {"1": "这是中文", "2": "これは日本語です", "3": "이건 한국어야", "4": "Это русский"}
    for key, text in texts.items():
        await store.aput(("user_123", "memories", "ünï"), key, {"text": text})
    for key, text in texts.items():
        found = await store.asearch(("user_123",), filter={"text": text})
        assert [(i.key, i.value["text"], i.namespace[-1]) for i in found] == [(key, text, "ünï")]


async def test_search_namespace_segment_boundary(store: GraphStore) -> None:
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
        ("foobar",),
        ("foobar", "baz"),
        ("foo2",),
    ]:
        await store.aput(namespace, "k", {"v": 1})

    async def found(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {item.namespace for item in await store.asearch(prefix, limit=100)}

    assert await found(("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert await found(("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert await found(("foo2",)) == {("foo2",)}
    assert await found(("fo",)) == set()


async def test_search_namespace_wildcard_chars_are_literal(store: GraphStore) -> None:
    for namespace in [
        ("user_1",),
        ("user_1", "child"),
        ("userX1",),
        ("a%b",),
        ("axxb",),
        ("star*",),
        ("starX",),
    ]:
        await store.aput(namespace, "k", {"v": 1})

    async def found(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {item.namespace for item in await store.asearch(prefix, limit=100)}

    assert await found(("user_1",)) == {("user_1",), ("user_1", "child")}
    assert await found(("a%b",)) == {("a%b",)}
    assert await found(("star*",)) == {("star*",)}


async def test_search_namespace_is_case_sensitive(store: GraphStore) -> None:
    await store.aput(("Foo",), "k", {"v": "upper"})
    await store.aput(("foo",), "k", {"v": "lower"})
    assert {i.namespace for i in await store.asearch(("foo",), limit=100)} == {("foo",)}
    assert {i.namespace for i in await store.asearch(("Foo",), limit=100)} == {("Foo",)}


async def test_list_namespaces_segment_boundary(store: GraphStore) -> None:
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
    ]:
        await store.aput(namespace, "k", {"v": 1})
    lister = store.alist_namespaces
    assert set(await lister(prefix=["foo"], limit=100)) == {("foo",), ("foo", "child")}
    assert set(await lister(suffix=["alice"], limit=100)) == {
        ("uid", "users", "alice"),
        ("uid", "a", "b", "alice"),
    }
    assert set(await lister(prefix=["uid", "*", "alice"], limit=100)) == {("uid", "users", "alice")}
    assert set(await lister(prefix=["uid"], limit=100)) == {
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
    }


async def test_search_empty_prefix_is_unconstrained(store: GraphStore) -> None:
    for namespace in [("a",), ("b", "c"), ("d", "e", "f")]:
        await store.aput(namespace, "k", {"v": 1})
    assert {i.namespace for i in await store.asearch((), limit=100)} == {
        ("a",),
        ("b", "c"),
        ("d", "e", "f"),
    }


async def test_namespace_labels_with_trailing_newline(store: GraphStore) -> None:
    await store.aput(("users", "alice"), "k", {"v": 1})
    await store.aput(("users", "alice\n"), "k", {"v": 2})
    assert set(await store.alist_namespaces(suffix=["alice"], limit=100)) == {("users", "alice")}
    assert set(await store.alist_namespaces(prefix=["users", "alice"], limit=100)) == {
        ("users", "alice")
    }
    item = await store.aget(("users", "alice\n"), "k")
    assert item is not None and item.value == {"v": 2}


async def test_list_namespaces_metacharacter_labels(store: GraphStore) -> None:
    pairs = [
        ("star*", "starX"),
        ("q?m", "qXm"),
        ("br[ack]et", "brXacXket"),
        ("user_1", "userX1"),
        ("a%b", "axxb"),
        ("plus+", "plusX"),
    ]
    for label, decoy in pairs:
        await store.aput((label,), "k", {"v": 1})
        await store.aput((decoy,), "k", {"v": 1})
        await store.aput((label, "child"), "k", {"v": 1})
    for label, decoy in pairs:
        found = set(await store.alist_namespaces(prefix=[label], limit=100))
        assert found == {(label,), (label, "child")}
        assert (decoy,) not in found
        assert set(await store.alist_namespaces(prefix=[label, "child"], limit=100)) == {
            (label, "child")
        }


async def test_cannot_put_empty_namespace(store: GraphStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            await store.aput(bad, "foo", doc)
    with pytest.raises(ValueError):  # LangGraph's InvalidNamespaceError is a ValueError
        await store.aput((), "foo", doc)

    await store.aput(("foo", "langgraph", "foo"), "bar", doc)
    got = await store.aget(("foo", "langgraph", "foo"), "bar")
    assert got is not None and got.value == doc
    assert (await store.asearch(("foo", "langgraph", "foo")))[0].value == doc
    with pytest.raises(SemanticSearchUnsupported):
        await store.asearch(("foo", "langgraph", "foo"), query="bar")
    await store.adelete(("foo", "langgraph", "foo"), "bar")
    assert await store.aget(("foo", "langgraph", "foo"), "bar") is None

    # past the public put: the reserved root label is taken (LangGraph's own writes)
    await store.abatch([PutOp(("langgraph", "foo"), "bar", doc)])
    got = await store.aget(("langgraph", "foo"), "bar")
    assert got is not None and got.value == doc
    await store.adelete(("langgraph", "foo"), "bar")
    assert await store.aget(("langgraph", "foo"), "bar") is None


async def test_bad_input_is_a_typed_error_and_changes_nothing(store: GraphStore) -> None:
    await store.aput(("ok",), "k", {"v": 1})
    bad_calls: list[tuple[type[Exception], Callable[[], Awaitable[Any]]]] = [
        (InvalidNamespaceError, lambda: store.aput(["list", "ns"], "k", {"v": 2})),  # type: ignore[arg-type]
        (InvalidNamespaceError, lambda: store.aput(("a", 1), "k", {"v": 2})),  # type: ignore[arg-type]
        (InvalidNamespaceError, lambda: store.aget(("a.b",), "k")),
        (InvalidNamespaceError, lambda: store.asearch(("a", ""))),
        (InvalidNamespaceError, lambda: store.aput(("nul\x00",), "k", {"v": 2})),
        (ArgumentError, lambda: store.aput(("ok",), 3, {"v": 2})),  # type: ignore[arg-type]
        (ArgumentError, lambda: store.aput(("ok",), "k", "text")),  # type: ignore[arg-type]
        (ArgumentError, lambda: store.aput(("ok",), "k", None)),  # type: ignore[arg-type]
        (ArgumentError, lambda: store.aput(("ok",), "k", {"v": object()})),
        (ArgumentError, lambda: store.aput(("ok",), "k", {"v": float("nan")})),
        (ArgumentError, lambda: store.aput(("ok",), "k", {1: "int key"})),  # type: ignore[dict-item]
        (ArgumentError, lambda: store.aput(("ok",), "k", {"v": 2}, ttl=-1)),
        (ArgumentError, lambda: store.asearch(("ok",), filter={"v": {"$regex": "x"}})),
        (ArgumentError, lambda: store.asearch(("ok",), filter={"v": {"$gt": 1, "plain": 2}})),
        (ArgumentError, lambda: store.asearch(("ok",), filter=["v"])),  # type: ignore[arg-type]
        (ArgumentError, lambda: store.asearch(("ok",), limit=-1)),
        (ArgumentError, lambda: store.alist_namespaces(max_depth=0)),
        (ArgumentError, lambda: store.abatch(["not an op"])),  # type: ignore[list-item]
        (SemanticSearchUnsupported, lambda: store.aput(("ok",), "k", {"v": 2}, index=["v"])),
        (SemanticSearchUnsupported, lambda: store.asearch(("ok",), query="v")),
    ]
    for i, (error, call) in enumerate(bad_calls):
        with pytest.raises(error):
            await call()
            pytest.fail(f"bad call #{i} raised nothing")
    # a batch with one bad op runs none of them
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([PutOp(("ok",), "k", {"v": 3}), PutOp((), "k", {"v": 3})])
    item = await store.aget(("ok",), "k")
    assert item is not None and item.value == {"v": 1}
    assert await store.alist_namespaces() == [("ok",)]
    # LangGraph's synchronous names say what to call instead
    with pytest.raises(ArgumentError, match=r"await store\.aget"):
        store.get(("ok",), "k")


async def test_store_ttl(make_store: Factory) -> None:
    """LangGraph's ``test_store_ttl``, on a FakeClock: a read with ``refresh_ttl`` pushes
    the expiry back by the item's TTL; one without leaves it; an expired item is gone."""
    clock = FakeClock()
    with _clock.use_clock(clock):
        store = await make_store()
        ns = ("foo",)
        await store.aput(ns, "item1", {"foo": "bar"}, ttl=1)  # a minute
        clock.advance(58)
        assert await store.aget(ns, "item1", refresh_ttl=True) is not None
        clock.advance(58)
        assert len(await store.asearch(ns, refresh_ttl=True)) == 1
        clock.advance(58)
        assert await store.aget(ns, "item1", refresh_ttl=False) is not None
        clock.advance(3)  # 61 s after the last refresh
        assert await store.asearch(ns, refresh_ttl=False) == []
        assert await store.aget(ns, "item1") is None
        assert await store.alist_namespaces() == []
        # a put without ttl= never expires; one put again with ttl=None stops expiring
        await store.aput(ns, "forever", {"v": 1})
        await store.aput(ns, "reprieved", {"v": 1}, ttl=1)
        await store.aput(ns, "reprieved", {"v": 2}, ttl=None)
        clock.advance(timedelta(days=400).total_seconds())
        assert sorted(i.key for i in await store.asearch(ns)) == ["forever", "reprieved"]


async def test_store_default_ttl_and_no_refresh_on_read(make_store: Factory) -> None:
    clock = FakeClock()
    with _clock.use_clock(clock):
        store = await make_store(ttl={"default_ttl": 2, "refresh_on_read": False})
        await store.aput(("t",), "k", {"v": 1})  # the store's default: 2 minutes
        clock.advance(90)
        assert await store.aget(("t",), "k") is not None  # not refreshed by default
        clock.advance(31)
        assert await store.aget(("t",), "k") is None
    with pytest.raises(ArgumentError):
        MemoryGraphStore(ttl={"default_ttl": 0})
    with pytest.raises(ArgumentError):
        MemoryGraphStore(ttl={"unknown": 1})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(SemanticSearchUnsupported):
        MemoryGraphStore(index={"dims": 3, "embed": None})


async def test_omit_expired_search_pagination(make_store: Factory) -> None:
    clock = FakeClock()
    with _clock.use_clock(clock):
        store = await make_store()
        ns = ("page",)
        await store.aput(ns, "expired", {"k": "x"}, ttl=1)
        for key in ("c", "b", "a"):
            clock.advance(1)
            await store.aput(ns, key, {"k": key}, ttl=10)
        clock.advance(60)  # "expired" is past its minute, between the others by age
        assert [i.key for i in await store.asearch(ns, limit=2, offset=0)] == ["a", "b"]
        assert [i.key for i in await store.asearch(ns, limit=2, offset=2)] == ["c"]


async def test_concurrent_batches_lose_no_write(store: GraphStore) -> None:
    async def writer(n: int) -> None:
        for i in range(5):
            await store.aput(("w", str(n)), str(i), {"n": n, "i": i})

    await asyncio.gather(*(writer(n) for n in range(8)))
    assert len(await store.asearch(("w",), limit=100)) == 40
    assert len(await store.alist_namespaces(prefix=("w",))) == 8


# -- a hypothesis property: the store is a dict ----------------------------------------------

_labels = st.sampled_from(["a", "b", "a_b", "ünï", "x y"])
_namespaces = st.lists(_labels, min_size=1, max_size=3).map(tuple)
_values = st.dictionaries(
    st.sampled_from(["n", "s", "l"]),
    st.one_of(st.integers(-5, 5), st.text(max_size=3), st.lists(st.booleans(), max_size=2)),
    max_size=3,
)
_actions = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "get"]),
        _namespaces,
        st.sampled_from(["k", "K", "k.2"]),
        _values,
    ),
    max_size=25,
)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(actions=_actions)
def test_put_get_delete_matches_a_dict(backend: str, tmp_path: Path, actions: list[Any]) -> None:
    """Any sequence of puts, deletes and gets leaves the store holding what a dict keyed by
    (namespace, key) holds: each get, every search of the whole store and every listing
    agree with the model."""

    async def check() -> None:
        store = await BACKENDS[backend](tmp_path)
        model: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}
        try:
            for action, namespace, key, value in actions:
                if action == "put":
                    await store.aput(namespace, key, value)
                    model[namespace, key] = value
                elif action == "delete":
                    await store.adelete(namespace, key)
                    model.pop((namespace, key), None)
                else:
                    item = await store.aget(namespace, key)
                    assert (item.value if item else None) == model.get((namespace, key))
            found = await store.asearch((), limit=1000)
            assert {(i.namespace, i.key): i.value for i in found} == model
            assert await store.alist_namespaces(limit=1000) == sorted({ns for ns, _ in model})
        finally:
            await store.aclose()

    asyncio.run(check())


# -- backend specifics ------------------------------------------------------------------------


async def test_sqlite_store_keeps_items_across_reopening(tmp_path: Path) -> None:
    path = tmp_path / "memories.db"
    async with SqliteGraphStore(f"sqlite:///{path}") as store:
        await store.aput(("users", "u1"), "prefs", {"theme": "dark"})
    async with SqliteGraphStore(path) as store:
        item = await store.aget(("users", "u1"), "prefs")
        assert item is not None and item.value == {"theme": "dark"}
    with pytest.raises(StoreError, match="closed"):
        await store.aget(("users", "u1"), "prefs")


async def test_sqlite_store_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database" * 100)
    with pytest.raises(StoreError, match="cannot open graph store"):
        await SqliteGraphStore(path).aget(("a",), "k")
    assert path.read_text() == "not a database" * 100


async def test_sqlite_store_refuses_another_programs_table(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE graph_store_items (x INTEGER)")
    with pytest.raises(StoreError, match="another program"):
        await SqliteGraphStore(path).setup()


def test_sqlite_store_path_must_name_a_file() -> None:
    from tinyagents.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        SqliteGraphStore("")


# -- the store in a graph ---------------------------------------------------------------------


class Count(TypedDict):
    count: Annotated[int, operator.add]


async def test_store_injected_async(make_store: Factory) -> None:
    """LangGraph's ``test_store_injected_async``: 51 nodes of one step write through their
    ``store`` parameter (a callable object's too, beside ``config``), on several threads;
    what one thread wrote, the next turn and another thread see."""
    store = await make_store()
    doc_id, doc = str(uuid.uuid4()), {"some-key": "this-is-a-val"}
    namespace = (f"foo-{uuid.uuid4().hex}", "bar")
    thread_1, thread_2 = "thread-1", "thread-2"

    class Node:
        def __init__(self, i: int | None = None) -> None:
            self.i = i

        async def __call__(self, inputs: Count, config: Any, store: GraphStore) -> dict[str, int]:
            assert isinstance(store, GraphStore)
            thread = config["configurable"]["thread_id"]
            where = namespace if self.i is not None else (f"foo_{self.i}", "bar")
            await store.aput(
                where, doc_id, {**doc, "from_thread": thread, "some_val": inputs["count"]}
            )
            return {"count": 1}

    async def other_node(inputs: Count, config: Any, store: GraphStore) -> dict[str, int]:
        await store.aput(("not", "interesting"), "key", {"val": "val"})
        item = await store.aget(("not", "interesting"), "key")
        assert item is not None and item.value == {"val": "val"}
        return {"count": 0}

    builder = StateGraph(Count).add_node("node", Node()).add_node("other_node", other_node)
    builder.add_edge(START, "node").add_edge("node", "other_node")
    n = 50
    for i in range(n):
        builder.add_node(f"node_{i}", Node(i)).add_edge(START, f"node_{i}")
    graph = builder.compile(store=store, checkpointer=MemoryCheckpointer())
    assert graph.store is store

    result = await graph.run({"count": 0}, thread_id=thread_1)
    assert result.state == {"count": n + 1}
    item = await store.aget(namespace, doc_id)
    assert item is not None and item.value == {**doc, "from_thread": thread_1, "some_val": 0}
    assert len(await store.asearch(namespace)) == 1

    result = await graph.run({"count": 0}, thread_id=thread_1)
    assert result.state == {"count": (n + 1) * 2}
    item = await store.aget(namespace, doc_id)
    assert item is not None and item.value["some_val"] == n + 1
    result = await graph.run({"count": 0}, thread_id=thread_2)
    assert result.state == {"count": n + 1}
    item = await store.aget(namespace, doc_id)
    assert item is not None and item.value["from_thread"] == thread_2


async def test_get_store_in_nodes_routers_tasks_and_subgraphs() -> None:
    """``get_store()`` (LangGraph's ``langgraph.config.get_store``) in an async node, a sync
    node, a ``Send`` task and a sub-graph's node; a router's ``store`` parameter; a sub-graph
    compiled with a store of its own writes to its parent's."""
    store, own = MemoryGraphStore(), MemoryGraphStore()
    await store.aput(("values",), "foo", {"bar": 2})

    class S(TypedDict, total=False):
        foo: int
        seen: Annotated[list[Any], operator.add]

    used: list[Any] = []

    async def sub_node(state: S) -> S:
        found = get_store()
        assert found is not None
        used.append(found)
        await found.aput(("sub",), "k", {"v": 1})
        return {"seen": ["sub"]}

    sub = StateGraph(S).add_node("inner", sub_node).add_edge(START, "inner").compile(store=own)

    async def reader(state: S) -> S:
        item = await get_store().aget(("values",), "foo")  # type: ignore[union-attr]
        assert item is not None
        return {"foo": item.value["bar"]}

    def sync_node(state: S, store: GraphStore) -> S:
        used.append(store)
        assert get_store() is store
        return {"seen": ["sync"]}

    def route(state: S, store: GraphStore | None = None) -> str:
        used.append(store)
        return "sync_node"

    graph = (
        StateGraph(S)
        .add_node("reader", reader)
        .add_node("sync_node", sync_node)
        .add_node("sub", sub)
        .add_edge(START, "reader")
        .add_conditional_edges("reader", route, ["sync_node"])
        .add_edge("sync_node", "sub")
        .add_edge("sub", END)
        .compile(store=store)
    )
    result = await graph.run({"seen": []}, thread_id="t")
    assert result.status == "completed", result.error
    assert result.state == {"foo": 2, "seen": ["sync", "sub"]}
    assert used == [store, store, store]  # the router's, the sync node's, the sub-graph's
    assert await store.aget(("sub",), "k") is not None
    assert await own.aget(("sub",), "k") is None

    # a sub-graph with a store under a parent without one uses its own
    used.clear()
    parent = StateGraph(S).add_node("sub", sub).add_edge(START, "sub").compile()
    result = await parent.run({"seen": []})
    assert result.status == "completed", result.error
    assert used == [own]
    assert await own.aget(("sub",), "k") is not None


async def test_graph_without_a_store_gives_none_and_get_store_outside_a_node_raises() -> None:
    seen: list[Any] = []

    async def node(state: Count, store: GraphStore | None = None) -> Count:
        seen.extend([store, get_store()])
        return {"count": 1}

    graph = StateGraph(Count).add_node("n", node).add_edge(START, "n").compile()
    await graph.run({"count": 0})
    assert seen == [None, None]
    with pytest.raises(GraphError, match="inside a running graph node"):
        get_store()


def test_compile_refuses_what_is_not_a_graph_store() -> None:
    builder = StateGraph(Count).add_node("n", lambda s: {"count": 1}).add_edge(START, "n")
    with pytest.raises(GraphValidationError, match="GraphStore"):
        builder.compile(store={})  # type: ignore[arg-type]
    with pytest.raises(GraphValidationError, match="GraphStore"):
        entrypoint(store="sqlite:///x.db")  # type: ignore[arg-type]
    langgraph_memory = pytest.importorskip("langgraph.store.memory")
    with pytest.raises(GraphValidationError, match="LangGraph's stores are not taken"):
        builder.compile(store=langgraph_memory.InMemoryStore())


async def test_overriding_injectable_args_with_async_task(make_store: Factory) -> None:
    """LangGraph's test: an ``@entrypoint(store=...)`` function and its ``@task`` get the
    store by their ``store`` parameter; a task called with ``store=`` given keeps it."""
    store = await make_store()

    @task
    async def foo(store: Any, writer: Any, value: Any) -> None:
        assert store is value
        assert writer is value

    @task
    async def remember(n: int, store: GraphStore) -> int:
        await store.aput(("tasks",), str(n), {"n": n})
        return n

    @entrypoint(store=store)
    async def main(inputs: Any, store: GraphStore) -> str:
        assert store is not None
        await foo(store=None, writer=None, value=None)
        await foo(store="hello", writer="hello", value="hello")
        await remember(7)
        return "OK"

    result = await main.run({})
    assert result.state == "OK"
    item = await store.aget(("tasks",), "7")
    assert item is not None and item.value == {"n": 7}


def test_the_docs_example_runs(tmp_path: Path, run_script: Any) -> None:
    """docs/graph.md's "Long-term store" example runs and prints what it says."""
    text = (Path(__file__).parents[2] / "docs" / "graph.md").read_text()
    section = text[text.index("## Long-term store") :]
    block = section[section.index("```python\n") + 10 : section.index("```\n", 20)]
    done = run_script(block, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['billing', 'refunds']"]


async def test_the_store_reaches_every_way_a_graph_runs(tmp_path: Path) -> None:
    """Streamed, in a runtime, a sync node on a worker thread (``timeout=``), a sync
    ``@task`` and a sync ``@entrypoint``: each gets the graph's store."""
    from tinyagents import Runtime

    store = MemoryGraphStore()
    seen: list[Any] = []

    def threaded(state: Count, store: GraphStore) -> Count:
        seen.append((store, get_store()))
        return {"count": 1}

    graph = (
        StateGraph(Count)
        .add_node("n", threaded, timeout=30)
        .add_edge(START, "n")
        .compile(store=store, checkpointer=MemoryCheckpointer())
    )
    items = [item async for item in graph.stream({"count": 0}, thread_id="s", mode="updates")]
    assert items and seen == [(store, store)]
    async with Runtime() as rt:
        handle = await rt.start_graph(graph, {"count": 0}, thread_id="r")
        assert (await handle.result()).status.value == "completed"
    assert seen == [(store, store)] * 2

    @task
    def sync_task(n: int, store: GraphStore) -> int:
        seen.append((store, get_store()))
        return n

    @entrypoint(store=store, checkpointer=MemoryCheckpointer())
    def sync_entry(n: int, store: GraphStore) -> int:
        seen.append((store, get_store()))
        return sync_task(n).result()

    result = await sync_entry.run(5, thread_id="e")
    assert result.state == 5
    assert seen == [(store, store)] * 4
