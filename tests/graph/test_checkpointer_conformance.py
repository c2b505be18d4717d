"""What every ``Checkpointer`` backend must do. Runs once per backend in ``conftest.BACKENDS``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tinyagents.errors import CheckpointerClosed, StaleCheckpointError, ThreadBusy
from tinyagents.store.checkpoint import (
    Checkpointer,
    CheckpointRecord,
    ExitBuffer,
    MemoryCheckpointer,
    SqliteCheckpointer,
    WriteRecord,
)


@pytest.fixture(params=["", "exit-buffer"])
def buffered(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
async def make_checkpointer(make_checkpointer: Any, buffered: bool) -> AsyncIterator[Any]:
    """Every backend (``conftest.make_checkpointer``), and an ``ExitBuffer`` on each (what a
    ``durability="exit"`` run saves through), flushed to it after the test: each buffer
    must answer as a backend does; what it held then lands in its backend."""
    if not buffered:
        yield make_checkpointer
        return
    buffers: list[ExitBuffer] = []

    async def make(**kw: Any) -> Checkpointer:
        buffers.append(ExitBuffer(await make_checkpointer(**kw)))
        return buffers[-1]

    yield make
    for buffer in buffers:
        if not buffer.base._closed:
            shown = {key: await buffer.list(*key) for key in buffer._chains}
            await buffer.flush()
            assert not buffer.held
            for key, records in shown.items():
                assert await buffer.base.list(*key) == records


def record(
    seq: int,
    *,
    parent: str | None = "auto",
    snapshot: bool | None = None,
    thread: str = "t",
    ns: str = "",
    values: dict[str, Any] | None = None,
) -> CheckpointRecord:
    return CheckpointRecord(
        thread_id=thread,
        ns=ns,
        checkpoint_id=f"{thread}/{ns}/{seq}",
        parent_id=(f"{thread}/{ns}/{seq - 1}" if seq else None) if parent == "auto" else parent,
        seq=seq,
        step=seq,
        snapshot=seq == 0 if snapshot is None else snapshot,
        values=values if values is not None else {"n": seq},
        frontier=[{"node": "a"}, {"node": "b", "arg": {"i": seq}}],
        frontier_id=f"f{seq}",
        lineage="L",
        source="loop",
        barriers={"0": ["a"]},
        tasks=[f"task{seq}"],
        written=["n"],
        metadata={"seq": seq},
        created_at=1000.0 + seq,
    )


async def test_put_then_read_back_every_field(checkpointer: Checkpointer) -> None:
    values = {"nested": {"list": [1, 2.5, "x", None, True], "empty": {}}, "unicode": "é✓"}
    await checkpointer.put(record(0, values=values))
    head = await checkpointer.latest("t")
    assert head == record(0, values=values)
    assert await checkpointer.get("t", "t//0") == head
    assert await checkpointer.get("t", "missing") is None
    assert await checkpointer.latest("other") is None


async def test_loaded_values_are_copies(checkpointer: Checkpointer) -> None:
    await checkpointer.put(record(0, values={"items": [1, 2]}))
    first = await checkpointer.latest("t")
    assert first is not None
    first.values["items"].append(3)
    again = await checkpointer.latest("t")
    assert again is not None and again.values == {"items": [1, 2]}


async def test_put_is_compare_and_set_on_the_parent(checkpointer: Checkpointer) -> None:
    await checkpointer.put(record(0))
    await checkpointer.put(record(1))
    with pytest.raises(StaleCheckpointError):
        await checkpointer.put(record(1))  # same parent again: would fork history
    with pytest.raises(StaleCheckpointError):
        await checkpointer.put(record(2, parent="t//0"))  # parent is not the head
    with pytest.raises(StaleCheckpointError):
        await checkpointer.put(record(0, thread="t"))  # a thread starts only once
    with pytest.raises(StaleCheckpointError):
        await checkpointer.put(record(1, thread="fresh"))  # a parent that does not exist
    assert [r.seq for r in await checkpointer.list("t")] == [1, 0]


async def test_saves_made_together_land_together(checkpointer: Checkpointer) -> None:
    # a durability="exit" run's flush: one transaction where the backend has them (the
    # memory checkpointer, and so the buffer, saves each as it is made)
    one_by_one = isinstance(checkpointer, MemoryCheckpointer)
    write = [WriteRecord(task_id="a", kind="result", value={"writes": [["x", 1]]})]
    await checkpointer.put(record(0))
    with pytest.raises(RuntimeError, match="stopped"):
        async with checkpointer.saving_together():
            await checkpointer.put(record(1))
            await checkpointer.put_writes("t", "", "f1", write)
            head = await checkpointer.latest("t")  # the block reads what it saved
            assert head is not None and head.seq == 1
            raise RuntimeError("stopped")
    assert [r.seq for r in await checkpointer.list("t")] == ([1, 0] if one_by_one else [0])
    assert await checkpointer.get_writes("t", "", "f1") == (write if one_by_one else [])
    if one_by_one:
        return
    async with checkpointer.saving_together():
        await checkpointer.put(record(1))
        await checkpointer.put_writes("t", "", "f1", write)
        async with checkpointer.saving_together():  # within one: the same transaction
            await checkpointer.put(record(2))
    assert [r.seq for r in await checkpointer.list("t")] == [2, 1, 0]
    assert await checkpointer.get_writes("t", "", "f1") == write


async def test_delete_thread_in_a_saving_together_block_is_one_of_its_statements(
    checkpointer: Checkpointer,
) -> None:
    # SQLite's delete_thread took a connection of its own, which waited for the block's own
    # write lock (the 10 s busy timeout) and failed: now it runs in the block's transaction,
    # undone with the block's saves when the block raises (PostgreSQL's too)
    one_by_one = isinstance(checkpointer, MemoryCheckpointer)
    await checkpointer.put(record(0, thread="u"))
    await checkpointer.put(record(0))
    with pytest.raises(RuntimeError, match="stopped"):
        async with checkpointer.saving_together():
            await checkpointer.put(record(1))
            await checkpointer.delete_thread("u")
            assert await checkpointer.latest("u") is None  # the block reads what it did
            raise RuntimeError("stopped")
    assert (await checkpointer.latest("u") is None) is one_by_one
    assert [r.seq for r in await checkpointer.list("t")] == ([1, 0] if one_by_one else [0])
    async with checkpointer.saving_together():
        if not one_by_one:
            await checkpointer.put(record(1))
        await checkpointer.delete_thread("u")
        await checkpointer.delete_thread("t")
    assert await checkpointer.latest("u") is None and await checkpointer.list("t") == []


async def test_concurrent_writers_on_one_parent_exactly_one_wins(
    checkpointer: Checkpointer,
) -> None:
    await checkpointer.put(record(0))
    attempts = []
    for writer in range(5):
        r = record(1)
        r.checkpoint_id = f"writer-{writer}"
        attempts.append(checkpointer.put(r))
    results = await asyncio.gather(*attempts, return_exceptions=True)
    assert sum(r is None for r in results) == 1
    assert all(isinstance(r, StaleCheckpointError) for r in results if r is not None)


async def test_chain_starts_at_the_last_snapshot(checkpointer: Checkpointer) -> None:
    for seq in range(6):
        await checkpointer.put(record(seq, snapshot=seq in (0, 3)))
    assert [r.seq for r in await checkpointer.chain("t")] == [3, 4, 5]
    assert [r.seq for r in await checkpointer.chain("t", checkpoint_id="t//2")] == [0, 1, 2]
    assert [r.seq for r in await checkpointer.chain("t", checkpoint_id="t//3")] == [3]
    assert await checkpointer.chain("t", checkpoint_id="nope") == []
    assert await checkpointer.chain("nobody") == []


async def test_list_is_newest_first_and_limited(checkpointer: Checkpointer) -> None:
    for seq in range(4):
        await checkpointer.put(record(seq))
    listed = await checkpointer.list("t")
    assert [r.seq for r in listed] == [3, 2, 1, 0]
    assert listed[0].frontier == record(3).frontier and listed[0].tasks == ["task3"]
    assert listed[0].written == ["n"] and listed[0].metadata == {"seq": 3}
    assert [r.seq for r in await checkpointer.list("t", limit=2)] == [3, 2]
    assert await checkpointer.list("nobody") == []


async def test_a_limit_past_64_bits_lists_everything(checkpointer: Checkpointer) -> None:
    """A limit past what a database integer holds lists everything, as the memory
    checkpointer does; SQLite raised Python's OverflowError, not even a StoreError."""
    for seq in range(3):
        await checkpointer.put(record(seq))
    assert [r.seq for r in await checkpointer.list("t", limit=2**64)] == [2, 1, 0]
    older = await checkpointer.list_before("t", "", "t//2", limit=2**64)
    assert older is not None and [r.seq for r in older] == [1, 0]


async def test_list_before_reads_the_older_checkpoints_only(checkpointer: Checkpointer) -> None:
    """``history(before=...)`` reads a page of older checkpoints: it used to list the whole
    thread (every body) for each page, so paging a long thread cost its length each time."""
    for seq in range(6):
        await checkpointer.put(record(seq))
    await checkpointer.put(record(0, ns="sub"))
    older = await checkpointer.list_before("t", "", "t//4")
    assert older is not None and [r.seq for r in older] == [3, 2, 1, 0]
    assert older[0].frontier == record(3).frontier and older[0].metadata == {"seq": 3}
    page = await checkpointer.list_before("t", "", "t//4", limit=2)
    assert page is not None and [r.seq for r in page] == [3, 2]
    assert await checkpointer.list_before("t", "", "t//0") == []
    assert await checkpointer.list_before("t", "", "t//4", limit=0) == []
    # not a checkpoint of that chain: None, whoever else has it
    assert await checkpointer.list_before("t", "", "missing") is None
    assert await checkpointer.list_before("t", "", "t/sub/0") is None
    assert await checkpointer.list_before("t", "sub", "t//4") is None
    assert await checkpointer.list_before("other", "", "t//4") is None


async def test_namespaces_are_separate_chains(checkpointer: Checkpointer) -> None:
    await checkpointer.put(record(0))
    await checkpointer.put(record(0, ns="sub:t-1"))
    await checkpointer.put(record(1, ns="sub:t-1"))
    assert [r.seq for r in await checkpointer.list("t")] == [0]
    assert [r.seq for r in await checkpointer.list("t", "sub:t-1")] == [1, 0]
    head = await checkpointer.latest("t", "sub:t-1")
    assert head is not None and head.ns == "sub:t-1"


async def test_pending_writes_keep_order_and_replace_by_key(checkpointer: Checkpointer) -> None:
    w = checkpointer.put_writes
    await w("t", "", "f1", [WriteRecord(task_id="a", kind="result", value={"writes": [["x", 1]]})])
    await w("t", "", "f1", [WriteRecord(task_id="b", kind="interrupt", value=[{"id": "i-1"}])])
    await w(
        "t",
        "",
        "f1",
        [
            WriteRecord(task_id="b", kind="resume", key="i-1", value="yes"),
            WriteRecord(task_id="b", kind="resume", key="i-2", value=None),
        ],
    )
    await w("t", "", "f1", [WriteRecord(task_id="b", kind="interrupt", value=[{"id": "i-2"}])])
    await w("t", "", "f2", [WriteRecord(task_id="z", kind="result", value={})])
    await w("t", "sub", "f1", [WriteRecord(task_id="y", kind="result", value={})])
    await w("t", "", "f1", [])
    got = await checkpointer.get_writes("t", "", "f1")
    assert [(x.task_id, x.kind, x.key, x.value) for x in got] == [
        ("a", "result", "", {"writes": [["x", 1]]}),
        ("b", "interrupt", "", [{"id": "i-2"}]),  # replaced in place
        ("b", "resume", "i-1", "yes"),
        ("b", "resume", "i-2", None),
    ]
    assert [x.task_id for x in await checkpointer.get_writes("t", "", "f2")] == ["z"]
    assert [x.task_id for x in await checkpointer.get_writes("t", "sub", "f1")] == ["y"]
    assert await checkpointer.get_writes("t", "", "nope") == []


async def test_delete_thread_forgets_everything(checkpointer: Checkpointer) -> None:
    await checkpointer.put(record(0))
    await checkpointer.put(record(0, ns="sub"))
    await checkpointer.put(record(0, thread="keep"))
    await checkpointer.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result")])
    await checkpointer.delete_thread("t")
    assert await checkpointer.latest("t") is None
    assert await checkpointer.latest("t", "sub") is None
    assert await checkpointer.get_writes("t", "", "f0") == []
    assert await checkpointer.latest("keep") is not None
    await checkpointer.put(record(0))  # the thread can start again


async def test_delete_thread_refuses_a_thread_being_written(checkpointer: Checkpointer) -> None:
    """A thread a run holds is not deleted under it (its next checkpoint would start a new
    history with the old run's state, or fail as stale): ``ThreadBusy``, nothing deleted;
    once released it goes."""
    await checkpointer.put(record(0))
    await checkpointer.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result")])
    await checkpointer.acquire("t", "owner-1")
    with pytest.raises(ThreadBusy) as busy:
        await checkpointer.delete_thread("t")
    assert busy.value.thread_id == "t"
    assert await checkpointer.latest("t") == record(0)
    assert await checkpointer.get_writes("t", "", "f0") != []
    await checkpointer.release("t", "owner-1")
    await checkpointer.delete_thread("t")
    assert await checkpointer.latest("t") is None
    assert await checkpointer.get_writes("t", "", "f0") == []


async def test_single_writer_per_thread(checkpointer: Checkpointer) -> None:
    await checkpointer.acquire("t", "owner-1")
    await checkpointer.acquire("t", "owner-1")  # re-entrant for the same owner
    with pytest.raises(ThreadBusy) as busy:
        await checkpointer.acquire("t", "owner-2")
    assert busy.value.thread_id == "t"
    await checkpointer.acquire("u", "owner-2")  # other threads are free
    await checkpointer.release("t", "owner-2")  # not the holder: no effect
    with pytest.raises(ThreadBusy):
        await checkpointer.acquire("t", "owner-2")
    await checkpointer.release("t", "owner-1")
    await checkpointer.acquire("t", "owner-2")
    await checkpointer.renew("t", "owner-2")


async def test_setup_is_idempotent(make_checkpointer: Any) -> None:
    cp = await make_checkpointer()
    await cp.setup()
    await cp.setup()
    await cp.put(record(0))
    assert await cp.latest("t") is not None


@pytest.mark.parametrize("limit", [-1, -2, True, 1.5])
async def test_a_limit_that_is_no_count_is_a_value_error_on_every_backend(
    checkpointer: Checkpointer, limit: Any
) -> None:
    # -2 was "all but the last two" in memory, "no limit" in SQLite, a StoreError in PostgreSQL
    for n in range(3):
        await checkpointer.put(record(n))
    with pytest.raises(ValueError, match=r"limit=\.\.\.\) must be None or a whole number >= 0"):
        await checkpointer.list("t", limit=limit)
    with pytest.raises(ValueError, match=r"limit=\.\.\.\) must be None or a whole number >= 0"):
        await checkpointer.list_before("t", "", "t//2", limit=limit)
    assert [r.seq for r in await checkpointer.list("t", limit=0)] == []
    assert [r.seq for r in await checkpointer.list("t", limit=2)] == [2, 1]
    older = await checkpointer.list_before("t", "", "t//2", limit=1)
    assert older is not None and [r.seq for r in older] == [1]


async def test_a_closed_checkpointer_refuses_every_call(make_checkpointer: Any) -> None:
    """``aclose`` is for good on every backend, as PostgreSQL's is: SQLite opened its file
    again on the next call (``setup``), and memory went on as if never closed, so a save
    under way when its owner closed the checkpointer still landed. Every call is a
    ``CheckpointerClosed`` (a ``StoreError``) instead, ``async with`` too."""
    cp = await make_checkpointer()
    if isinstance(cp, ExitBuffer):  # drops what it holds; its base (the caller's) stays open
        await cp.put(record(0))
        assert cp.held
        await cp.aclose()
        assert not cp.held
        await cp.base.put(record(0))
        assert [r.seq for r in await cp.base.list("t")] == [0]
        return
    await cp.acquire("t", "run")  # a run holding its thread when its owner closes it
    await cp.put(record(0))
    await cp.aclose()
    await cp.aclose()  # twice: harmless
    write = WriteRecord(task_id="a", kind="result", key="", value=1)
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "setup": cp.setup,
        "latest": lambda: cp.latest("t"),
        "get": lambda: cp.get("t", "t//0"),
        "chain": lambda: cp.chain("t"),
        "list": lambda: cp.list("t"),
        "list_before": lambda: cp.list_before("t", "", "t//0"),
        "put": lambda: cp.put(record(1)),
        "put_writes": lambda: cp.put_writes("t", "", "f0", [write]),
        "put_writes_once": lambda: cp.put_writes_once("t", "", "f0", [write]),
        "get_writes": lambda: cp.get_writes("t", "", "f0"),
        "delete_thread": lambda: cp.delete_thread("t"),
        "acquire": lambda: cp.acquire("other", "me"),
    }
    for name, call in calls.items():
        try:
            await call()
        except CheckpointerClosed as exc:
            assert "is closed (aclose)" in str(exc), name
        else:
            raise AssertionError(f"{name} answered on a closed checkpointer")
    with pytest.raises(CheckpointerClosed):
        async with cp:
            raise AssertionError("a closed checkpointer was entered")
    await cp.release("t", "run")  # the run's cleanup after the close: quiet


async def test_an_in_memory_sqlite_checkpointers_saves_made_together_land_together() -> None:
    # ":memory:" saved a block's saves one by one (it has no second connection): now they are
    # one transaction on its one connection, and another task's statements wait for the
    # block's end, outside it (not undone with it)
    cp = SqliteCheckpointer(":memory:")
    try:
        write = [WriteRecord(task_id="a", kind="result", value={"writes": [["x", 1]]})]
        await cp.put(record(0))
        go = asyncio.Event()

        async def outside() -> None:
            await go.wait()
            await cp.put(record(0, thread="u"))

        task = asyncio.create_task(outside())
        with pytest.raises(RuntimeError, match="stopped"):
            async with cp.saving_together():
                await cp.put(record(1))
                await cp.put_writes("t", "", "f1", write)
                go.set()
                for _ in range(5):
                    await asyncio.sleep(0)
                head = await cp.latest("t")  # the block reads what it saved
                assert head is not None and head.seq == 1
                raise RuntimeError("stopped")
        await task
        assert [r.seq for r in await cp.list("t")] == [0]
        assert await cp.get_writes("t", "", "f1") == []
        assert [r.seq for r in await cp.list("u")] == [0]
        async with cp.saving_together():
            await cp.put(record(1))
            await cp.put_writes("t", "", "f1", write)
            async with cp.saving_together():  # within one: the same transaction
                await cp.put(record(2))
            await cp.delete_thread("u")
        assert [r.seq for r in await cp.list("t")] == [2, 1, 0]
        assert await cp.get_writes("t", "", "f1") == write and await cp.list("u") == []
    finally:
        await cp.aclose()
