"""``Store.hold_thread``: the run that holds each thread, for every backend.

A hold is taken as one step (of two takers at once, on two connections of one SQLite file or
one PostgreSQL database, exactly one gets it), names its run and that run's snapshot (which
the runtime judges, as it judges a claimed run), is let go of only by its own run, and is each
tenant's own. The memory store keeps its holds in its process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyagents._clock import now
from tinyagents.errors import ArgumentError
from tinyagents.runs import RunInfo
from tinyagents.store import MemoryStore, Store
from tinyagents.store.base import SILENCE_S


def snapshot(run_id: str, *, owner: str) -> dict[str, Any]:
    return {**RunInfo(run_id=run_id, tenant_id="acme", thread_id="t-1").snapshot(), "owner": owner}


def never(held: dict[str, Any] | None) -> bool:
    return False


async def test_a_thread_no_run_holds_is_taken_without_asking(store: Store) -> None:
    asked: list[object] = []
    assert await store.hold_thread("acme", "t-1", "r-1", lambda h: bool(asked.append(h))) == (
        True,
        None,
    )
    assert asked == []
    assert await store.thread_holder("acme", "t-1") == {"run_id": "r-1"}  # no run row


async def test_a_held_thread_is_taken_only_when_free_says_so(store: Store) -> None:
    await store.save_runs([snapshot("r-1", owner="rt-1")])
    assert await store.hold_thread("acme", "t-1", "r-1", never) == (True, None)
    seen: list[Any] = []

    def free(held: dict[str, Any] | None) -> bool:
        seen.append(held)
        return False

    taken, held = await store.hold_thread("acme", "t-1", "r-2", free)
    assert not taken
    assert held is not None and held["run_id"] == "r-1" and held["owner"] == "rt-1"
    assert seen == [held]
    holder = await store.thread_holder("acme", "t-1")
    assert holder is not None and holder["run_id"] == "r-1"
    # its own run takes it again without asking
    assert await store.hold_thread("acme", "t-1", "r-1", never) == (True, None)
    # a dead holder (free says yes) is taken over, and keeps nothing of it
    taken, held = await store.hold_thread("acme", "t-1", "r-2", lambda h: True)
    assert taken and held is not None and held["run_id"] == "r-1"
    assert not await store.let_go_of_thread("acme", "t-1", "r-1")
    assert await store.thread_holder("acme", "t-1") == {"run_id": "r-2"}


async def test_a_hold_whose_run_has_no_row_yet_is_described_by_its_owner(store: Store) -> None:
    """A hold taken with its owner (a graph run, before its first snapshot is saved) is read
    as an unfinished run of that owner, heard when the hold was taken, so the runtime judges
    it live while its owner is; once the run has a row, the row is what is read."""
    assert await store.hold_thread("acme", "t-1", "r-1", never, owner="rt-1") == (True, None)
    holder = await store.thread_holder("acme", "t-1")
    assert holder is not None
    assert (holder["run_id"], holder["status"], holder["owner"]) == ("r-1", "running", "rt-1")
    assert holder["updated_at"] is not None
    taken, held = await store.hold_thread("acme", "t-1", "r-2", never, owner="rt-2")
    assert not taken and held == holder | {k: held[k] for k in held if k == SILENCE_S}
    await store.save_runs([snapshot("r-1", owner="rt-1") | {"status": "completed"}])
    holder = await store.thread_holder("acme", "t-1")
    assert holder is not None and holder["status"] == "completed"
    # taken over: the new hold names its own owner
    assert (await store.hold_thread("acme", "t-1", "r-2", lambda h: True, owner="rt-2"))[0]
    holder = await store.thread_holder("acme", "t-1")
    assert holder is not None and (holder["run_id"], holder["owner"]) == ("r-2", "rt-2")


async def test_letting_go_frees_the_thread(store: Store) -> None:
    assert (await store.hold_thread("acme", "t-1", "r-1", never))[0]
    assert not await store.let_go_of_thread("acme", "t-1", "r-2")
    assert await store.let_go_of_thread("acme", "t-1", "r-1")
    assert await store.thread_holder("acme", "t-1") is None
    assert not await store.let_go_of_thread("acme", "t-1", "r-1")
    assert await store.hold_thread("acme", "t-1", "r-2", never) == (True, None)


async def test_holds_are_each_tenants_own(store: Store) -> None:
    assert (await store.hold_thread("acme", "t-1", "r-1", never))[0]
    assert (await store.hold_thread("globex", "t-1", "r-2", never))[0]
    assert await store.thread_holder("acme", "t-1") == {"run_id": "r-1"}
    assert await store.thread_holder("globex", "t-1") == {"run_id": "r-2"}


async def test_a_holder_lookup_refuses_what_is_no_text(store: Store) -> None:
    with pytest.raises(ArgumentError, match="thread_id is text"):
        await store.thread_holder("acme", 5)  # type: ignore[arg-type]
    assert await store.thread_holder("acme", "t\x00") is None
    assert not await store.let_go_of_thread("acme", "t\x00", "r-1")


async def test_of_two_takers_of_one_thread_at_once_exactly_one_gets_it(
    durable_backend: Any, tmp_path: Path
) -> None:
    """Two connections (two processes) take a thread nobody holds at the same moment, and
    again once it is held by a run free says is alive: each time one gets it."""
    stores = [durable_backend.make(tmp_path) for _ in range(4)]
    for opened in stores:
        await opened.open()
    try:
        for round_, thread in enumerate(("t-new", "t-new")):
            takes = await asyncio.gather(
                *(
                    s.hold_thread("acme", thread, f"r-{round_}-{i}", never)
                    for i, s in enumerate(stores)
                )
            )
            winners = [i for i, (taken, _) in enumerate(takes) if taken]
            if round_ == 0:
                assert len(winners) == 1, takes
                held_by = f"r-0-{winners[0]}"
            else:
                assert winners == [], takes  # alive: none takes it over
            assert all(held["run_id"] == held_by for taken, held in takes if not taken)
            holder = await stores[0].thread_holder("acme", thread)
            assert holder == {"run_id": held_by}
    finally:
        for opened in stores:
            await opened.close()


async def test_the_memory_store_keeps_its_holds_to_itself() -> None:
    first, second = MemoryStore(), MemoryStore()
    assert (await first.hold_thread("acme", "t-1", "r-1", never))[0]
    assert (await second.hold_thread("acme", "t-1", "r-2", never))[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["take", "take-over", "let-go"]), st.integers(0, 3)),
        max_size=20,
    )
)
async def test_a_hold_has_at_most_one_run_whatever_the_order(ops: list[tuple[str, int]]) -> None:
    """Against a model (the memory store): the holder is the last run that took the thread
    while it was free or took it over, until that run lets go."""
    store = MemoryStore()
    holder: str | None = None
    for op, n in ops:
        run = f"r-{n}"
        if op == "let-go":
            assert await store.let_go_of_thread("acme", "t", run) == (holder == run)
            holder = None if holder == run else holder
            continue
        taken, _ = await store.hold_thread("acme", "t", run, lambda h, op=op: op == "take-over")
        expect = holder in (None, run) or op == "take-over"
        assert taken == expect
        if taken:
            holder = run
        held = await store.thread_holder("acme", "t")
        assert (held or {}).get("run_id") == holder


def saved(run_id: str, owner: str, status: str) -> dict[str, Any]:
    """A snapshot as a runtime saves it: stamped now (``updated_at``)."""
    return snapshot(run_id, owner=owner) | {"status": status, "updated_at": now().isoformat()}


async def test_a_hold_taken_again_by_a_finished_run_is_described_by_its_owner(
    store: Store,
) -> None:
    """A run whose row says it finished, continued under its id (a graph run resumed): its
    new hold is read as the hold describes it (unfinished, of its owner) until the run's row
    is saved again; it held nothing, its row's ``completed`` read, until its first snapshot.
    A hold taken before the row said finished (a run whose let-go failed) is still read by
    the row: it holds nothing."""
    await store.save_runs([saved("r-1", "rt-1", "completed")])
    assert await store.hold_thread("acme", "t-1", "r-1", never, owner="rt-2") == (True, None)
    holder = await store.thread_holder("acme", "t-1")
    assert holder is not None
    assert (holder["run_id"], holder["status"], holder["owner"]) == ("r-1", "running", "rt-2")
    taken, held = await store.hold_thread("acme", "t-1", "r-2", never, owner="rt-3")
    assert not taken and held is not None and held["status"] == "running"
    running = saved("r-1", "rt-2", "running")
    await store.save_runs([running])
    holder = await store.thread_holder("acme", "t-1")
    assert holder is not None and (holder["status"], holder["owner"]) == ("running", "rt-2")
    ended = saved("r-1", "rt-2", "completed")
    await store.save_runs([ended])  # its let-go failed: the row, saved after the hold, says
    holder = await store.thread_holder("acme", "t-1")
    assert holder is not None and holder["status"] == "completed"
