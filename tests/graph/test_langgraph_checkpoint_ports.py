"""LangGraph's checkpointer tests, ported onto tinyagents' ``Checkpointer`` API.

Each test names the LangGraph test it comes from (``libs/checkpoint-conformance/.../spec``,
``libs/checkpoint/tests/test_memory.py``, ``libs/checkpoint-sqlite/tests/test_sqlite.py`` and
``test_aiosqlite.py``, ``libs/checkpoint-postgres/tests/test_async.py``). They run once per
backend (memory, SQLite, PostgreSQL; the ``checkpointer`` fixture of ``conftest.py``, which
gives PostgreSQL a schema of its own and skips it when it is unreachable, failing under
``CI=true``); the property at the end compares the three backends with each other.

What ``test_checkpointer_conformance.py`` already checks (compare-and-set, chain, list limits,
``list_before``, pending-write order, delete, single writer) is not repeated here.

Where LangGraph's API has no counterpart here (``put`` returning a config, channel versions,
``versions_seen``, a ``list`` across threads, ``copy_thread``, ``prune``, ``delete_for_runs``,
msgpack allow-lists, the encrypted serializer, delta channels) nothing is ported. Deliberate
differences are said at the test that shows them.
"""

from __future__ import annotations

import asyncio
import enum
import math
import operator
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents.errors import (
    GraphValidationError,
    InvalidIdError,
    InvalidUpdateError,
    ThreadBusy,
    UnknownTargetError,
)
from tinyagents.graph import END, START, StateGraph
from tinyagents.store.checkpoint import (
    Checkpointer,
    CheckpointRecord,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SqliteCheckpointer,
    WriteRecord,
)


def record(
    seq: int,
    *,
    thread: str = "t",
    ns: str = "",
    checkpoint_id: str | None = None,
    parent_id: str | None = "auto",
    snapshot: bool | None = None,
    values: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> CheckpointRecord:
    """The ``seq``-th checkpoint of a thread namespace; its parent is the ``seq - 1``-th of the
    same naming unless ``parent_id`` (``"auto"``) says otherwise."""
    return CheckpointRecord(
        thread_id=thread,
        ns=ns,
        checkpoint_id=checkpoint_id or f"{thread}/{ns}/{seq}",
        parent_id=(f"{thread}/{ns}/{seq - 1}" if seq else None)
        if parent_id == "auto"
        else parent_id,
        seq=seq,
        step=seq - 1,
        snapshot=seq == 0 if snapshot is None else snapshot,
        values=values if values is not None else {"n": seq},
        frontier=[{"node": "a"}],
        frontier_id=f"f{seq}",
        lineage="L",
        source="input" if seq == 0 else "loop",
        metadata=metadata if metadata is not None else {"step": seq - 1},
        created_at=1000.0 + seq,
    )


# -- put / get (spec/test_put.py, spec/test_get_tuple.py) -----------------------------------


async def test_threads_are_isolated(checkpointer: Checkpointer) -> None:
    """spec/test_put.py::test_put_multiple_threads_isolated and
    spec/test_list.py::test_list_by_thread: one thread's checkpoints are not another's."""
    for seq in range(3):
        await checkpointer.put(record(seq, thread="t1", values={"who": "t1", "n": seq}))
    await checkpointer.put(record(0, thread="t2", values={"who": "t2"}))
    assert [r.seq for r in await checkpointer.list("t1")] == [2, 1, 0]
    assert [r.checkpoint_id for r in await checkpointer.list("t2")] == ["t2//0"]
    head = await checkpointer.latest("t2")
    assert head is not None and head.values == {"who": "t2"}
    # a checkpoint id is looked up in its own thread only
    assert await checkpointer.get("t2", "t1//1") is None
    assert await checkpointer.chain("t2", checkpoint_id="t1//1") == []


async def test_get_respects_the_namespace(checkpointer: Checkpointer) -> None:
    """spec/test_get_tuple.py::test_get_tuple_respects_namespace and
    spec/test_put.py::test_put_child_namespace: a sub-graph's checkpoint (namespace
    ``"node:task"``) is read in that namespace only, and the root's in the root's."""
    await checkpointer.put(record(0, values={"root": True}))
    await checkpointer.put(record(0, ns="sub:task-1", values={"child": True}))
    child = await checkpointer.get("t", "t/sub:task-1/0", ns="sub:task-1")
    assert child is not None and child.ns == "sub:task-1" and child.values == {"child": True}
    assert await checkpointer.get("t", "t/sub:task-1/0") is None
    assert await checkpointer.get("t", "t//0", ns="sub:task-1") is None
    root = await checkpointer.latest("t")
    assert root is not None and root.ns == "" and root.values == {"root": True}


async def test_get_of_an_unknown_checkpoint_is_none(checkpointer: Checkpointer) -> None:
    """spec/test_get_tuple.py::test_get_tuple_nonexistent_returns_none and
    ::test_get_tuple_nonexistent_checkpoint_id."""
    assert await checkpointer.get("nobody", "x") is None
    assert await checkpointer.latest("nobody", "sub:1") is None
    await checkpointer.put(record(0))
    assert await checkpointer.get("t", "not-an-id") is None
    assert await checkpointer.list("t", "sub:1") == []


async def test_list_orders_by_insertion_not_by_checkpoint_id(checkpointer: Checkpointer) -> None:
    """spec/test_list.py::test_list_ordering (newest first). LangGraph orders by checkpoint
    id, which is a time-ordered uuid6; here the chain's order (``seq``) decides, whatever the
    ids look like: these sort the other way round."""
    ids = ["zz", "yy", "xx", "ww"]
    for seq, cid in enumerate(ids):
        parent = ids[seq - 1] if seq else None
        await checkpointer.put(record(seq, checkpoint_id=cid, parent_id=parent))
    assert [r.checkpoint_id for r in await checkpointer.list("t")] == ids[::-1]
    head = await checkpointer.latest("t")
    assert head is not None and head.checkpoint_id == "ww"
    older = await checkpointer.list_before("t", "", "xx")
    assert older is not None and [r.checkpoint_id for r in older] == ["yy", "zz"]
    page = await checkpointer.list_before("t", "", "ww", limit=1)
    assert page is not None and [r.checkpoint_id for r in page] == ["xx"]


async def test_a_channel_added_and_one_removed_between_snapshots(
    checkpointer: Checkpointer,
) -> None:
    """spec/test_put.py::test_put_new_channel_added, ::test_put_channel_removed and
    ::test_put_incremental_channel_update: each checkpoint keeps exactly the values it was
    given (a delta holds the channels its step wrote), so a chain read back is what was put."""
    snaps = [
        {"a": 1, "b": [1]},
        {"b": [2]},  # a delta: one channel
        {"c": {"new": True}},  # a channel first written here
        {"a": 2, "c": {"new": False}},  # a snapshot without "b"
    ]
    for seq, values in enumerate(snaps):
        await checkpointer.put(record(seq, values=values, snapshot=seq in (0, 3)))
    assert [r.values for r in await checkpointer.chain("t", checkpoint_id="t//2")] == snaps[:3]
    assert [r.values for r in await checkpointer.chain("t")] == [snaps[3]]


# -- metadata (spec/test_put.py::test_put_preserves_metadata, test_combined_metadata,
#    postgres test_async.py::test_null_chars) -----------------------------------------------

AWKWARD_METADATA: dict[str, Any] = {
    "source": "loop",
    "step": 7,
    "writes": {"foo": "bar", "nested": {"deep": [1, {"x": None}]}},
    "score": 1.5,
    "unicode": "héllo ✓ 日本語 🚀",
    "ключ ✓": "a key that is not ASCII",
    "my_key": "\x00abc",  # PostgreSQL's saver strips NUL from metadata; we keep it
    "nul\x00key": "a key with NUL",
    "lone": "\ud800",  # a lone surrogate, which UTF-8 cannot hold
    "big": 2**63 + 1,
    "negative": -(2**70),
    "empty": {},
    "list": [],
    "bool": False,
    "none": None,
}


async def test_metadata_round_trips_exactly(checkpointer: Checkpointer) -> None:
    """spec/test_put.py::test_put_preserves_metadata, spec/test_get_tuple.py::
    test_get_tuple_metadata, test_memory.py/test_sqlite.py/test_async.py::
    test_combined_metadata and postgres test_async.py::test_null_chars. Difference on purpose:
    LangGraph's PostgreSQL saver stores metadata as JSONB, which holds no NUL, and strips
    ``\\x00`` from it (``"\\x00abc"`` reads back ``"abc"``); our bodies are JSON text, so every
    backend gives back the very strings it was given, NUL and lone surrogates among them."""
    await checkpointer.put(record(0, metadata=AWKWARD_METADATA))
    head = await checkpointer.latest("t")
    assert head is not None and head.metadata == AWKWARD_METADATA
    listed = await checkpointer.list("t")
    assert listed[0].metadata == AWKWARD_METADATA
    got = await checkpointer.get("t", "t//0")
    assert got is not None and got.metadata["my_key"] == "\x00abc"


async def test_values_of_awkward_json_round_trip(checkpointer: Checkpointer) -> None:
    """test_jsonplus.py's round trips, at the level a backend sees: JSON-able values. NaN and
    the infinities (which Python's JSON writes and reads, and JSONB would refuse) come back as
    floats on every backend, as do NUL, lone surrogates and integers past 64 bits."""
    values = {
        "nan": math.nan,
        "inf": math.inf,
        "-inf": -math.inf,
        "-0": -0.0,
        "tiny": 5e-324,
        "huge_int": 10**100,
        "text": "a\x00b\ud800c\u2028d",
        "nested": [[[[[[[[[[{"deep": True}]]]]]]]]]],
    }
    await checkpointer.put(record(0, values=values))
    head = await checkpointer.latest("t")
    assert head is not None
    got = head.values
    assert math.isnan(got.pop("nan"))
    assert math.copysign(1.0, got["-0"]) == -1.0
    expected = {k: v for k, v in values.items() if k != "nan"}
    assert got == expected


async def test_a_checkpoint_no_json_holds_is_refused_before_its_parent_is_checked(
    checkpointer: Checkpointer,
) -> None:
    """spec/test_put.py::test_put_preserves_channel_values, the other way: what JSON cannot
    hold is refused as such (an integer of more digits than Python writes is an
    ``InvalidUpdateError``, a set a ``TypeError``: the graph encodes values first) and saves
    nothing, whether or not the parent is still the head. The memory checkpointer checked
    the parent first, so a stale record of such values was a ``StaleCheckpointError`` there
    and a ``TypeError`` on SQLite and PostgreSQL."""
    with pytest.raises(InvalidUpdateError, match="4300 digits"):
        await checkpointer.put(record(0, values={"n": 10**5000}))
    await checkpointer.put(record(0))
    with pytest.raises(TypeError, match="not JSON serializable"):
        await checkpointer.put(record(1, values={"s": {1}}))
    with pytest.raises(TypeError, match="not JSON serializable"):
        await checkpointer.put(record(0, values={"s": {1}}))  # stale too: parent not the head
    assert [r.seq for r in await checkpointer.list("t")] == [0]


async def test_a_very_large_checkpoint_and_write_round_trip(checkpointer: Checkpointer) -> None:
    """The large-state cases of LangGraph's savers (a checkpoint with a big channel blob):
    a 4 MB string and a 20,000-key channel in one checkpoint, and a 2 MB pending write."""
    big = uuid.uuid4().hex * (4 * 1024 * 1024 // 32)
    many = {f"k{i}": i for i in range(20_000)}
    await checkpointer.put(record(0, values={"big": big, "many": many}))
    await checkpointer.put(record(1, values={"small": 1}))
    chain = await checkpointer.chain("t")
    assert [len(r.values.get("big", "")) for r in chain] == [len(big), 0]
    assert chain[0].values == {"big": big, "many": many}
    blob = big[: 2 * 1024 * 1024]
    await checkpointer.put_writes(
        "t", "", "f1", [WriteRecord(task_id="a", kind="result", value=blob)]
    )
    [write] = await checkpointer.get_writes("t", "", "f1")
    assert write.value == blob


# -- pending writes (spec/test_put_writes.py, spec/test_get_tuple.py) ------------------------


async def test_writes_saved_twice_are_kept_once(checkpointer: Checkpointer) -> None:
    """spec/test_put_writes.py::test_put_writes_idempotent: a retry that saves the same
    writes again (a task's result, its interrupt) leaves one of each, where they were."""
    writes = [
        WriteRecord(task_id="a", kind="result", value={"writes": [["x", 1]]}),
        WriteRecord(task_id="b", kind="interrupt", value=[{"id": "i-1", "value": "?"}]),
    ]
    await checkpointer.put_writes("t", "", "f0", writes)
    await checkpointer.put_writes("t", "", "f0", writes)
    got = await checkpointer.get_writes("t", "", "f0")
    assert [(w.task_id, w.kind, w.key, w.value) for w in got] == [
        (w.task_id, w.kind, w.key, w.value) for w in writes
    ]


async def test_writes_of_many_tasks_and_kinds_round_trip(checkpointer: Checkpointer) -> None:
    """spec/test_put_writes.py::test_put_writes_multiple_tasks, ::test_put_writes_multiple_
    writes_same_task, ::test_put_writes_preserves_channel_and_value and ::test_put_writes_
    special_channels (LangGraph's ERROR, INTERRUPT, RESUME channels are our write kinds)."""
    writes = [
        WriteRecord(task_id="t1", kind="result", value={"writes": [["a", 1], ["b", [1, 2]]]}),
        WriteRecord(task_id="t1", kind="resume", key="i-1", value={"answer": "ok"}),
        WriteRecord(task_id="t1", kind="resume", key="i-2", value=None),
        WriteRecord(task_id="t2", kind="interrupt", value=[{"id": "i-3", "value": "é✓\x00"}]),
        WriteRecord(task_id="t3", kind="steered", key="corr-1", value="i-3"),
        WriteRecord(task_id="t4", kind="result", value={"error": "ValueError('boom')"}),
    ]
    await checkpointer.put_writes("t", "", "f0", writes)
    got = await checkpointer.get_writes("t", "", "f0")
    assert [(w.task_id, w.kind, w.key, w.value) for w in got] == [
        (w.task_id, w.kind, w.key, w.value) for w in writes
    ]


async def test_writes_belong_to_their_frontier(checkpointer: Checkpointer) -> None:
    """spec/test_put_writes.py::test_put_writes_cleared_on_next_checkpoint and spec/
    test_get_tuple.py::test_get_tuple_pending_writes: pending writes hang on the frontier
    (the step) they were saved for, so the next checkpoint's step starts with none."""
    await checkpointer.put(record(0))
    await checkpointer.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result")])
    await checkpointer.put(record(1))
    assert await checkpointer.get_writes("t", "", "f1") == []
    assert [w.task_id for w in await checkpointer.get_writes("t", "", "f0")] == ["a"]


async def test_concurrent_tasks_saving_writes_do_not_interfere(
    checkpointer: Checkpointer,
) -> None:
    """test_memory.py::test_async_fallback_concurrent_tasks_do_not_interfere: the tasks of a
    step save their writes at once; every one is kept, each whole."""
    n = 20

    async def task(i: int) -> None:
        await checkpointer.put_writes(
            "t",
            "",
            "f0",
            [
                WriteRecord(task_id=f"task-{i}", kind="result", value={"i": i}),
                WriteRecord(task_id=f"task-{i}", kind="resume", key="q", value=i),
            ],
        )

    await asyncio.wait_for(asyncio.gather(*(task(i) for i in range(n))), 60)
    got = await checkpointer.get_writes("t", "", "f0")
    assert len(got) == 2 * n
    by_task: dict[str, list[Any]] = {}
    for w in got:
        by_task.setdefault(w.task_id, []).append((w.kind, w.value))
    assert by_task == {f"task-{i}": [("result", {"i": i}), ("resume", i)] for i in range(n)}


async def test_concurrent_owners_of_one_thread_exactly_one_wins(
    checkpointer: Checkpointer,
) -> None:
    """The concurrent-writer cases of LangGraph's savers, with our single-writer rule: owners
    that ask for one thread at once get it once; the others get ``ThreadBusy``."""
    results = await asyncio.wait_for(
        asyncio.gather(
            *(checkpointer.acquire("t", f"owner-{i}") for i in range(8)), return_exceptions=True
        ),
        60,
    )
    assert sum(r is None for r in results) == 1
    assert all(isinstance(r, ThreadBusy) for r in results if r is not None)
    winner = f"owner-{results.index(None)}"
    await checkpointer.release("t", winner)
    await checkpointer.acquire("t", "owner-late")
    await checkpointer.release("t", "owner-late")


async def test_sub_graphs_of_one_thread_checkpoint_at_once(checkpointer: Checkpointer) -> None:
    """spec/test_put.py::test_put_multiple_checkpoints_same_thread with the namespaces of
    parallel sub-graph tasks (LangGraph's parallel sub-graphs checkpoint under one thread at
    once): chains of several namespaces written concurrently each stay whole and in order."""

    async def sub_graph(i: int) -> None:
        for seq in range(5):
            await checkpointer.put(record(seq, ns=f"sub:{i}", values={"i": i, "seq": seq}))
            await checkpointer.put_writes(
                "t", f"sub:{i}", f"f{seq}", [WriteRecord(task_id="c", kind="result", value=i)]
            )

    await asyncio.wait_for(asyncio.gather(*(sub_graph(i) for i in range(10))), 60)
    for i in range(10):
        listed = await checkpointer.list("t", f"sub:{i}")
        assert [r.seq for r in listed] == [4, 3, 2, 1, 0]
        assert [r.parent_id for r in listed] == [f"t/sub:{i}/{n}" for n in (3, 2, 1, 0)] + [None]
        head = await checkpointer.latest("t", f"sub:{i}")
        assert head is not None and head.values == {"i": i, "seq": 4}
        assert [w.value for w in await checkpointer.get_writes("t", f"sub:{i}", "f4")] == [i]


# -- delete_thread (spec/test_delete_thread.py) ----------------------------------------------


async def test_deleting_a_thread_never_seen_is_a_no_op(checkpointer: Checkpointer) -> None:
    """spec/test_delete_thread.py::test_delete_thread_nonexistent_noop."""
    await checkpointer.put(record(0, thread="keep"))
    await checkpointer.delete_thread("nobody")
    await checkpointer.delete_thread("nobody")
    assert await checkpointer.latest("keep") is not None


async def test_deleting_a_thread_removes_its_namespaces_writes(checkpointer: Checkpointer) -> None:
    """spec/test_delete_thread.py::test_delete_thread_removes_writes and ::test_delete_thread_
    removes_all_namespaces: a sub-graph's pending writes (a namespace with no checkpoint of its
    own yet) go too, and another thread's stay."""
    await checkpointer.put_writes("t", "sub:1", "f0", [WriteRecord(task_id="a", kind="result")])
    await checkpointer.put_writes("u", "sub:1", "f0", [WriteRecord(task_id="b", kind="result")])
    await checkpointer.put(record(0, ns="sub:1"))
    await checkpointer.put(record(1, ns="sub:1"))
    await checkpointer.delete_thread("t")
    assert await checkpointer.get_writes("t", "sub:1", "f0") == []
    assert await checkpointer.list("t", "sub:1") == []
    assert await checkpointer.chain("t", "sub:1") == []
    assert await checkpointer.get("t", "t/sub:1/1", ns="sub:1") is None
    assert [w.task_id for w in await checkpointer.get_writes("u", "sub:1", "f0")] == ["b"]


# -- through a graph: history filters, awkward state values ---------------------------------


class Counter(TypedDict, total=False):
    n: Annotated[int, lambda a, b: a + b]


def counting_graph(cp: Checkpointer) -> Any:
    graph = StateGraph(Counter)
    graph.add_node("inc", lambda s: {"n": 1}).add_node("inc2", lambda s: {"n": 1})
    graph.add_edge(START, "inc").add_edge("inc", "inc2").add_edge("inc2", END)
    return graph.compile(checkpointer=cp)


async def test_history_filters_by_metadata_before_and_limit(checkpointer: Checkpointer) -> None:
    """test_memory.py::test_asearch, test_sqlite.py::test_search, test_aiosqlite.py::
    test_asearch, postgres test_async.py::test_asearch and spec/test_list.py::
    test_list_metadata_filter_single_key / _step / _multiple_keys / _no_match /
    test_list_before / test_list_limit_plus_before / test_list_combined_thread_and_filter /
    test_list_by_namespace. Our checkpointers list one thread at a time; the filter is
    ``graph.history(filter=...)``, applied the same way whatever the backend."""
    graph = counting_graph(checkpointer)
    await graph.run({"n": 0}, thread_id="a")
    await graph.run({"n": 10}, thread_id="a")
    await graph.run({"n": 0}, thread_id="b")
    everything = await graph.history("a")
    assert [(h.source, h.step) for h in everything] == [
        ("loop", 6),
        ("loop", 5),
        ("loop", 4),
        ("input", 3),
        ("loop", 2),
        ("loop", 1),
        ("loop", 0),
        ("input", -1),
    ]
    inputs = await graph.history("a", filter={"source": "input"})
    assert [h.step for h in inputs] == [3, -1]
    assert [h.step for h in await graph.history("a", filter={"source": "loop", "step": 1})] == [1]
    assert await graph.history("a", filter={"source": "loop", "step": -1}) == []
    assert await graph.history("a", filter={"no such key": "x"}) == []
    # a None item matches a key the metadata does not have, as in LangGraph's InMemorySaver
    # (``metadata.get(key) == value``) and SqliteSaver (``json_extract(...) IS NULL``);
    # LangGraph's PostgresSaver (JSONB ``@>``) matches none. Ours agree on every backend.
    assert len(await graph.history("a", filter={"no such key": None})) == len(everything)
    # nested values are compared whole (LangGraph's {"writes": {"foo": "bar"}})
    assert len(await graph.history("a", filter={"parents": {}})) == len(everything)
    before = everything[2].checkpoint_id
    loops_before = await graph.history("a", before=before, filter={"source": "loop"}, limit=2)
    assert [h.step for h in loops_before] == [2, 1]
    assert [h.step for h in await graph.history("b", filter={"source": "input"})] == [-1]
    assert [h.step for h in await graph.history("a", limit=0, filter={"source": "loop"})] == []


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: float
    label: str
    at: datetime


class Awkward(TypedDict, total=False):
    when: datetime
    delta: timedelta
    raw: bytes
    tags: set[str]
    pair: tuple[int, str]
    ident: uuid.UUID
    colour: Colour
    point: Point
    ratio: float
    anything: Any


AWKWARD_STATE: dict[str, Any] = {
    "when": datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC),
    "delta": timedelta(days=1, microseconds=5),
    "raw": "héllo\x00".encode(),
    "tags": {"b", "a", "ünï"},
    "pair": (1, "one"),
    "ident": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "colour": Colour.BLUE,
    "point": Point(x=1.5, label="p✓", at=datetime(2020, 1, 1, tzinfo=UTC)),
    "ratio": 0.1,
    "anything": {"nested": [1, "two", None]},
}


def awkward_graph(cp: Checkpointer) -> Any:
    graph = StateGraph(Awkward).add_node("touch", lambda s: {"ratio": s["ratio"] * 3})
    graph.add_edge(START, "touch").add_edge("touch", END)
    return graph.compile(checkpointer=cp)


async def test_state_values_of_awkward_types_round_trip(checkpointer: Checkpointer) -> None:
    """test_jsonplus.py::test_serde_jsonplus (datetime, timedelta, bytes, set, tuple, UUID,
    enum, pydantic models), through a graph whose checkpoints are read back by a second
    compiled graph on the same checkpointer. What comes back follows docs/graph.md: each value
    decoded into its field's type (``Any`` as plain JSON)."""
    result = await awkward_graph(checkpointer).run(AWKWARD_STATE, thread_id="t")
    expected = {**AWKWARD_STATE, "ratio": 0.1 * 3}
    assert result.state == expected
    again = await awkward_graph(checkpointer).get_state("t")
    assert again.values == expected
    assert type(again.values["point"]) is Point and type(again.values["tags"]) is set
    assert type(again.values["pair"]) is tuple and again.values["colour"] is Colour.BLUE
    first = (await awkward_graph(checkpointer).history("t"))[-1]
    at_input = await awkward_graph(checkpointer).get_state("t", first.checkpoint_id)
    assert at_input.values == {}


async def test_nan_and_infinities_in_state_round_trip(checkpointer: Checkpointer) -> None:
    """test_jsonplus.py's float cases: NaN and the infinities survive a checkpoint (JSON text
    holds them on every backend)."""
    graph = StateGraph(Awkward).add_node("noop", lambda s: None)
    graph.add_edge(START, "noop").add_edge("noop", END)
    compiled = graph.compile(checkpointer=checkpointer)
    await compiled.run({"ratio": math.nan, "anything": [math.inf, -math.inf]}, thread_id="t")
    state = await compiled.get_state("t")
    assert math.isnan(state.values["ratio"])
    assert state.values["anything"] == [math.inf, -math.inf]


async def test_bytes_that_are_not_utf8_are_refused_and_nothing_is_saved(
    checkpointer: Checkpointer,
) -> None:
    """test_jsonplus.py's bytes round trip, where the rule differs on purpose (docs/graph.md):
    bytes must be UTF-8 text to be checkpointed; others are an ``InvalidUpdateError`` naming
    the key, and the run input is not saved."""
    with pytest.raises(InvalidUpdateError, match="raw"):
        await awkward_graph(checkpointer).run({"raw": b"\xff\xfe", "ratio": 1.0}, thread_id="t")
    assert await checkpointer.latest("t") is None


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def graph_with_a_sub_graph_node(name: str, cp: Checkpointer) -> Any:
    child = StateGraph(Log).add_node("c", lambda s: {"log": ["c"]})
    child.add_edge(START, "c").add_edge("c", END)
    graph = StateGraph(Log).add_node(name, child.compile())
    graph.add_edge(START, name).add_edge(name, END)
    return graph.compile(checkpointer=cp)


async def test_a_sub_graph_checkpoints_under_a_namespace_of_its_node(
    checkpointer: Checkpointer,
) -> None:
    """spec/test_put.py::test_put_child_namespace and spec/test_list.py::
    test_list_multiple_namespaces, through a graph: a sub-graph node (a name of any printable
    text) checkpoints in a namespace that starts with its name, listed apart from the root's,
    its ``metadata["parents"]`` naming the root checkpoint it ran from."""
    name = "süb ✓ 日本"
    graph = graph_with_a_sub_graph_node(name, checkpointer)
    assert (await graph.run({"log": []}, thread_id="t")).state == {"log": ["c"]}
    root = await graph.history("t")
    [task_id] = next(h for h in root if h.step == 1).tasks  # the task that ran at step 1
    subs = await graph.history("t", ns=f"{name}:{task_id}")
    assert [h.source for h in subs] == ["loop", "loop", "input"]
    assert {h.metadata["parents"][""] for h in subs} <= {h.checkpoint_id for h in root}
    assert await checkpointer.list("t", f"{name}:{task_id}") != []


@pytest.mark.parametrize(
    "name", ["s\x00b", "s\x1fb", "s\x7fb", "s\x85b", "s\u2028b", "s\u2029b", "s\ud800b"]
)
async def test_a_node_name_a_namespace_cannot_hold_is_refused_on_every_backend(
    checkpointer: Checkpointer, name: str
) -> None:
    """Found porting test_null_chars: a sub-graph's namespace (a checkpoint key) holds its
    node's name; a name with NUL ran on the memory and SQLite checkpointers and failed the run
    with a ``StoreError`` on PostgreSQL (its text holds no NUL), and one with a lone surrogate
    failed every run with a ``UnicodeEncodeError``. Such a name keeps the id rule's printable
    text out: ``add_node`` refuses it, whatever the checkpointer."""
    with pytest.raises(GraphValidationError, match=r"control character|separator|lone surrogate"):
        graph_with_a_sub_graph_node(name, checkpointer)
    assert await checkpointer.latest("t") is None


UNSTORABLE = ["x\x00y", "x\ud800y"]


@pytest.mark.parametrize("key", UNSTORABLE, ids=["nul", "lone-surrogate"])
async def test_reading_a_key_no_backend_can_hold_finds_nothing(
    checkpointer: Checkpointer, key: str
) -> None:
    """Found porting test_null_chars and spec/test_get_tuple.py::test_get_tuple_nonexistent_
    checkpoint_id: a checkpoint id, namespace or thread id holding NUL or a lone surrogate
    names no checkpoint (none can have been saved under it), so every backend finds nothing,
    as the memory one did; SQLite failed with a ``StoreError`` on a lone surrogate and
    PostgreSQL on both (its text holds neither)."""
    await checkpointer.put(record(0))
    assert await checkpointer.get("t", key) is None
    assert await checkpointer.get(key, "t//0") is None
    assert await checkpointer.get("t", "t//0", ns=key) is None
    assert await checkpointer.latest(key) is None
    assert await checkpointer.latest("t", key) is None
    assert await checkpointer.chain("t", checkpoint_id=key) == []
    assert await checkpointer.chain("t", key) == []
    assert await checkpointer.list(key) == []
    assert await checkpointer.list("t", key, limit=1) == []
    assert await checkpointer.list_before("t", "", key) is None
    assert await checkpointer.list_before("t", key, "t//0") is None
    assert await checkpointer.get_writes("t", "", key) == []
    assert await checkpointer.get_writes("t", key, "f0") == []
    assert await checkpointer.get_writes(key, "", "f0") == []
    await checkpointer.delete_thread(key)
    assert await checkpointer.latest("t") is not None


@pytest.mark.parametrize("key", UNSTORABLE, ids=["nul", "lone-surrogate"])
async def test_saving_under_a_key_no_backend_can_hold_is_refused_by_every_backend(
    checkpointer: Checkpointer, key: str
) -> None:
    """Found porting test_null_chars: a checkpoint or pending write keyed by text holding NUL
    or a lone surrogate was saved by the memory checkpointer (and with NUL by SQLite) and a
    ``StoreError`` on PostgreSQL. Every backend refuses it now with ``InvalidIdError``,
    naming the key, and saves nothing (the graph never makes such a key: thread ids keep the
    id rule, node names refuse such text)."""
    bad_records = [
        record(0, thread=key),
        record(0, ns=key),
        record(0, checkpoint_id=key),
    ]
    for bad in bad_records:
        with pytest.raises(InvalidIdError):
            await checkpointer.put(bad)
    await checkpointer.put(record(0))
    with pytest.raises(InvalidIdError, match="parent_id"):
        await checkpointer.put(record(1, parent_id=key))
    ok = WriteRecord(task_id="a", kind="result")
    for args in [(key, "", "f0", [ok]), ("t", key, "f0", [ok]), ("t", "", key, [ok])]:
        with pytest.raises(InvalidIdError):
            await checkpointer.put_writes(*args)
    for write in [
        WriteRecord(task_id=key, kind="result"),
        WriteRecord(task_id="a", kind=key),
        WriteRecord(task_id="a", kind="resume", key=key),
    ]:
        with pytest.raises(InvalidIdError):
            await checkpointer.put_writes("t", "", "f0", [ok, write])
    assert [r.seq for r in await checkpointer.list("t")] == [0]
    assert await checkpointer.get_writes("t", "", "f0") == []
    assert await checkpointer.list("t", "sub") == []


@pytest.mark.parametrize("key", UNSTORABLE, ids=["nul", "lone-surrogate"])
async def test_a_checkpoint_id_no_backend_can_hold_is_unknown_to_the_graph(
    checkpointer: Checkpointer, key: str
) -> None:
    """The same through the graph (spec/test_get_tuple.py::test_get_tuple_nonexistent_
    checkpoint_id, spec/test_list.py::test_list_before): ``get_state``, ``history(before=)``,
    ``fork`` and a replay of such a checkpoint id are an ``UnknownTargetError`` and
    ``history(ns=...)`` of such a namespace is empty, on every backend."""
    graph = counting_graph(checkpointer)
    await graph.run({"n": 0}, thread_id="t")
    with pytest.raises(UnknownTargetError):
        await graph.get_state("t", key)
    with pytest.raises(UnknownTargetError):
        await graph.history("t", before=key)
    with pytest.raises(UnknownTargetError):
        await graph.fork("t", key)
    with pytest.raises(UnknownTargetError):
        await graph.run(None, thread_id="t", checkpoint_id=key)
    assert await graph.history("t", ns=key) == []
    assert (await graph.get_state("t")).values == {"n": 2}


# -- property: every backend gives back what it was given, identically ----------------------


@pytest.fixture
async def three_backends(tmp_path: Path) -> AsyncIterator[list[Checkpointer]]:
    """A memory, a SQLite and a PostgreSQL checkpointer (its own schema), closed afterwards."""
    made: list[Checkpointer] = [MemoryCheckpointer(snapshot_every=3)]
    try:
        made.append(SqliteCheckpointer(tmp_path / "prop.db", snapshot_every=3))
        made.append(PostgresCheckpointer(postgres_dsn(), schema=pg_schema(), snapshot_every=3))
        for cp in made:
            await cp.setup()
        yield made
    finally:
        for cp in made:
            await cp.aclose()
        await drop_pg_schemas()


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
# ("put", ns, snapshot, values, metadata) or ("writes", ns, frontier, task, kind, key, value)
op = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(["", "sub:1"]),
        st.booleans(),
        st.dictionaries(st.text(max_size=5), json_value, max_size=3),
        st.dictionaries(st.text(max_size=5), json_value, max_size=3),
    ),
    st.tuples(
        st.just("writes"),
        st.sampled_from(["", "sub:1"]),
        st.sampled_from(["f0", "f1"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["result", "interrupt", "resume"]),
        st.sampled_from(["", "k"]),
        json_value,
    ),
)


async def _read_everything(cp: Checkpointer, thread: str) -> list[Any]:
    """Every read a backend offers, of one thread, as plain data."""
    out: list[Any] = []
    for ns in ("", "sub:1"):
        listed = await cp.list(thread, ns)
        out.append([(r.checkpoint_id, r.seq, r.metadata, r.frontier) for r in listed])
        out.append([r.checkpoint_id for r in await cp.list(thread, ns, limit=2)])
        head = await cp.latest(thread, ns)
        out.append(None if head is None else head.values)
        for r in listed:
            got = await cp.get(thread, r.checkpoint_id, ns)
            assert got is not None
            out.append((got.values, got.metadata, got.parent_id, got.snapshot, got.created_at))
            out.append([c.values for c in await cp.chain(thread, ns, r.checkpoint_id)])
            older = await cp.list_before(thread, ns, r.checkpoint_id, limit=3)
            out.append(None if older is None else [c.checkpoint_id for c in older])
        for frontier in ("f0", "f1"):
            ws = await cp.get_writes(thread, ns, frontier)
            out.append([(w.task_id, w.kind, w.key, w.value) for w in ws])
    return out


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(op, min_size=1, max_size=10))
async def test_any_saves_read_back_identically_on_every_backend(
    three_backends: list[Checkpointer], ops: list[tuple[Any, ...]]
) -> None:
    """Property (no LangGraph counterpart): any sequence of checkpoints and pending writes,
    saved on the three backends, reads back the same from each, and what each gives back is
    what was saved."""
    thread = uuid.uuid4().hex  # the backends live across examples: a thread of its own
    seqs: dict[str, int] = {}
    expected: dict[str, list[dict[str, Any]]] = {}
    for item in ops:
        if item[0] == "put":
            _, ns, snapshot, values, metadata = item
            seq = seqs.get(ns, -1) + 1
            seqs[ns] = seq
            rec = record(
                seq,
                thread=thread,
                ns=ns,
                snapshot=snapshot or seq == 0,
                values=values,
                metadata=metadata,
            )
            expected.setdefault(ns, []).append(values)
            for cp in three_backends:
                await cp.put(rec)
        else:
            _, ns, frontier, task, kind, key, value = item
            for cp in three_backends:
                await cp.put_writes(
                    thread,
                    ns,
                    frontier,
                    [WriteRecord(task_id=task, kind=kind, key=key, value=value)],
                )
    reads = [await _read_everything(cp, thread) for cp in three_backends]
    assert reads[1] == reads[0]
    assert reads[2] == reads[0]
    for ns, values in expected.items():
        listed = await three_backends[0].list(thread, ns)
        got = [await three_backends[0].get(thread, r.checkpoint_id, ns) for r in listed[::-1]]
        assert [g.values for g in got if g is not None] == values
