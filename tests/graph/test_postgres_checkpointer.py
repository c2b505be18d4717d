"""PostgreSQL specifics of the checkpointer: one writer per thread across real processes (an
advisory lock), fencing tokens, lease recovery, migrations. The shared contract is in
test_checkpointer_conformance.py, which runs on PostgreSQL through conftest.BACKENDS."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

import asyncpg
import pytest
from services import PgProxy, drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Runtime
from tinyagents.errors import (
    CheckpointerClosed,
    GraphValidationError,
    LeaseExpired,
    StoreError,
    ThreadBusy,
)
from tinyagents.graph import END, MAX_NODE_NAME_LENGTH, START, StateGraph, interrupt
from tinyagents.store.base import may_pass
from tinyagents.store.checkpoint import CheckpointRecord, PostgresCheckpointer, WriteRecord
from tinyagents.store.checkpoint.postgres import MIGRATIONS

ROOT = Path(__file__).resolve().parents[2]

# A process that runs a 3-step graph on thread "t": it says "ready", waits for "go", then
# either loses the race for the thread ("busy") or wins it ("won"), holds it inside the
# second node until told "finish", and ends with "done".
RACER = textwrap.dedent(
    """
    import asyncio, sys
    from typing import TypedDict
    from tinyagents.errors import ThreadBusy
    from tinyagents.graph import END, START, StateGraph
    from tinyagents.store.checkpoint import PostgresCheckpointer

    class S(TypedDict, total=False):
        steps: int
        by: str

    async def line() -> str:
        return (await asyncio.to_thread(sys.stdin.readline)).strip()

    async def main() -> None:
        me = sys.argv[3]

        async def first(state):
            return {"steps": 1, "by": me}

        async def second(state):
            print("won", flush=True)
            assert await line() == "finish"
            return {"steps": 2}

        async def third(state):
            return {"steps": 3}

        graph = (
            StateGraph(S).add_node("a", first).add_node("b", second).add_node("c", third)
            .add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
        )
        async with PostgresCheckpointer(sys.argv[1], schema=sys.argv[2]) as cp:
            compiled = graph.compile(checkpointer=cp)
            print("ready", flush=True)
            assert await line() == "go"
            try:
                result = await compiled.run({"steps": 0}, thread_id="t")
            except ThreadBusy:
                print("busy", flush=True)
                return
            print("done", result.status, result.state["by"], flush=True)

    asyncio.run(main())
    """
)

# A process that takes the lease of thread "t" and holds it until its stdin closes.
HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from tinyagents.store.checkpoint import PostgresCheckpointer

    async def main() -> None:
        async with PostgresCheckpointer(sys.argv[1], schema=sys.argv[2]) as cp:
            await cp.acquire("t", "other-process")
            print("held", flush=True)
            await asyncio.to_thread(sys.stdin.read)

    asyncio.run(main())
    """
)


class S(TypedDict, total=False):
    x: int


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    name = pg_schema()
    yield name
    await drop_pg_schemas()


@pytest.fixture
async def cp(schema: str) -> AsyncIterator[PostgresCheckpointer]:
    async with PostgresCheckpointer(postgres_dsn(), schema=schema) as opened:
        yield opened


async def spawn(script: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        postgres_dsn(),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )


async def said(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    return (await proc.stdout.readline()).decode().strip()


def tell(proc: asyncio.subprocess.Process, text: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(text.encode() + b"\n")


def record(seq: int, *, checkpoint_id: str | None = None) -> CheckpointRecord:
    return CheckpointRecord(
        thread_id="t",
        checkpoint_id=checkpoint_id or f"c{seq}",
        parent_id=f"c{seq - 1}" if seq else None,
        seq=seq,
        step=seq,
        snapshot=seq == 0,
        values={"x": seq},
        frontier=[],
        frontier_id=f"f{seq}",
        lineage="L",
        source="loop",
    )


async def test_two_processes_racing_on_a_thread_one_wins_and_history_stays_linear(
    schema: str, cp: PostgresCheckpointer
) -> None:
    racers = [await spawn(RACER, schema, name) for name in ("p1", "p2")]
    try:
        assert [await said(p) for p in racers] == ["ready", "ready"]
        for p in racers:
            tell(p, "go")
        # Whatever the order, one of them reaches node b holding the thread, the other is
        # refused at once: read both first lines concurrently.
        first = await asyncio.gather(*(said(p) for p in racers))
        assert sorted(first) == ["busy", "won"]
        winner = racers[first.index("won")]
        tell(winner, "finish")
        done = (await said(winner)).split()
        assert done == ["done", "completed", ["p1", "p2"][first.index("won")]]
        assert [await p.wait() for p in racers] == [0, 0]
    finally:
        for p in racers:
            if p.returncode is None:
                p.kill()
                await p.wait()

    history = await cp.list("t")
    assert [r.seq for r in history] == list(range(len(history) - 1, -1, -1))
    for newer, older in itertools.pairwise(history):
        assert newer.parent_id == older.checkpoint_id  # one chain, no fork
    head = await cp.latest("t")
    assert head is not None and len(history) == 5  # input, its step, three nodes' steps: once


async def test_many_processes_acquiring_at_once_exactly_one_holds(schema: str) -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from tinyagents.errors import ThreadBusy
        from tinyagents.store.checkpoint import PostgresCheckpointer

        async def main() -> None:
            async with PostgresCheckpointer(sys.argv[1], schema=sys.argv[2]) as cp:
                print("ready", flush=True)
                await asyncio.to_thread(sys.stdin.readline)
                try:
                    await cp.acquire("t", sys.argv[3])
                except ThreadBusy:
                    print("busy", flush=True)
                    return
                print("held", flush=True)
                await asyncio.to_thread(sys.stdin.readline)

        asyncio.run(main())
        """
    )
    procs = [await spawn(script, schema, f"p{i}") for i in range(4)]
    try:
        assert [await said(p) for p in procs] == ["ready"] * 4
        for p in procs:
            tell(p, "go")
        answers = await asyncio.gather(*(said(p) for p in procs))
        assert sorted(answers) == ["busy", "busy", "busy", "held"]
        for p in procs:
            tell(p, "bye")
        assert [await p.wait() for p in procs] == [0] * 4
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()


async def test_a_killed_holder_frees_the_thread_at_once(
    schema: str, cp: PostgresCheckpointer
) -> None:
    holder = await spawn(HOLDER, schema)
    try:
        assert await said(holder) == "held"
        with pytest.raises(ThreadBusy):
            await cp.acquire("t", "me")
    finally:
        holder.kill()  # SIGKILL: its connection closes, and the lock with it
        await holder.wait()
    # The server notices the closed socket as soon as the kernel reports it; poll until it
    # has (no timing asserted: the test's timeout bounds it).
    while True:
        try:
            await cp.acquire("t", "me")
            break
        except ThreadBusy:
            await asyncio.sleep(0.05)
    await cp.put(record(0))  # the lease row is ours now: fenced puts go through
    await cp.release("t", "me")


async def test_two_instances_in_one_process_exclude_each_other(schema: str) -> None:
    dsn = postgres_dsn()
    async with (
        PostgresCheckpointer(dsn, schema=schema) as one,
        PostgresCheckpointer(dsn, schema=schema) as two,
    ):
        await one.acquire("t", "a")
        with pytest.raises(ThreadBusy):
            await two.acquire("t", "b")
        await one.release("t", "a")
        await two.acquire("t", "b")
        await two.put(record(0))


async def test_a_thread_taken_before_setup_is_busy_for_another_process(
    schema: str, cp: PostgresCheckpointer
) -> None:
    """A checkpointer whose first call is ``acquire`` (``compile(checkpointer=...)`` without
    ``async with``) took the thread's lock under a key made before it knew its schema, which
    no other checkpointer of that schema uses: a second writer took the same thread at once
    (and the first then failed mid-run with ``ThreadBusy``)."""
    fresh = PostgresCheckpointer(postgres_dsn(), schema=schema)
    try:
        await fresh.acquire("t", "first")
        with pytest.raises(ThreadBusy):
            await cp.acquire("t", "second")
        with pytest.raises(ThreadBusy):
            await cp.put(record(0))
        await fresh.put(record(0))
    finally:
        await fresh.aclose()


async def test_a_writer_that_lost_its_lock_can_no_longer_write(schema: str) -> None:
    """Fencing: the lease connection of the first writer drops, a second writer takes the
    thread (a new token); the first writer's next checkpoint is refused, even though it
    would be the next in the chain, and so is its renewal."""
    dsn = postgres_dsn()
    async with (
        PostgresCheckpointer(dsn, schema=schema, lease_ttl=0.0) as old,
        PostgresCheckpointer(dsn, schema=schema) as new,
    ):
        await old.acquire("t", "old")
        await old.put(record(0))
        await _terminate_lease_connections(schema)  # the lease connection goes away
        await new.acquire("t", "new")  # the lock is free: taken over
        with pytest.raises(ThreadBusy):
            await old.put(record(1))
        with pytest.raises(ThreadBusy):
            await old.renew("t", "old")
        await new.put(record(1, checkpoint_id="c1"))
        assert [r.checkpoint_id for r in await new.list("t")] == ["c1", "c0"]


async def test_a_writer_that_lost_its_lock_can_no_longer_write_pending_writes(
    schema: str,
) -> None:
    """Fencing covers pending writes as it covers checkpoints: the first writer, taken over,
    cannot replace the new holder's task results at the frontier both run from (they would
    be read back on a resume: two histories in one thread)."""
    dsn = postgres_dsn()
    async with (
        PostgresCheckpointer(dsn, schema=schema, lease_ttl=0.0) as old,
        PostgresCheckpointer(dsn, schema=schema) as new,
    ):
        await old.acquire("t", "old")
        await old.put(record(0))
        await _terminate_lease_connections(schema)
        await new.acquire("t", "new")
        await new.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result", value=1)])
        with pytest.raises(ThreadBusy):
            await old.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result", value=2)])
        with pytest.raises(ThreadBusy):
            await old.put_writes("t", "", "f0", [WriteRecord(task_id="b", kind="result")])
        assert [(w.task_id, w.value) for w in await new.get_writes("t", "", "f0")] == [("a", 1)]
        await new.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result", value=3)])
        assert [w.value for w in await new.get_writes("t", "", "f0")] == [3]


async def test_a_writer_told_thread_busy_can_write_nothing_of_the_thread(schema: str) -> None:
    """Once ``renew`` said ``ThreadBusy`` the checkpointer forgot its token, and its writes
    of the thread were no longer fenced at all: a direct ``put`` (or the pending writes a
    failing run keeps) landed in the history of the thread's new holder whenever it named
    the head as its parent. Every write of a thread checks the lease: one this checkpointer
    holds by its token, any other by nobody else holding it."""
    dsn = postgres_dsn()
    async with (
        PostgresCheckpointer(dsn, schema=schema, lease_ttl=0.0) as old,
        PostgresCheckpointer(dsn, schema=schema) as new,
    ):
        await old.acquire("t", "old")
        await old.put(record(0))
        await _terminate_lease_connections(schema)
        await new.acquire("t", "new")
        with pytest.raises(ThreadBusy):
            await old.renew("t", "old")  # the token is forgotten here
        with pytest.raises(ThreadBusy):
            await old.put(record(1))
        with pytest.raises(ThreadBusy):
            await old.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result")])
        assert [r.checkpoint_id for r in await new.list("t")] == ["c0"]
        assert await new.get_writes("t", "", "f0") == []
        await new.put(record(1, checkpoint_id="c1"))
        await new.release("t", "new")
        await old.put(record(2))  # nobody holds the thread now: a direct write lands
        assert [r.checkpoint_id for r in await new.list("t")] == ["c2", "c1", "c0"]


async def test_a_checkpointer_that_never_took_the_thread_cannot_write_it_while_held(
    schema: str, cp: PostgresCheckpointer
) -> None:
    """A direct ``put`` or ``put_writes`` of a checkpointer that never acquired the thread
    (or was refused it) while another process holds it: ``ThreadBusy``, nothing written."""
    holder = await spawn(HOLDER, schema)
    try:
        assert await said(holder) == "held"
        with pytest.raises(ThreadBusy):
            await cp.acquire("t", "me")
        with pytest.raises(ThreadBusy):
            await cp.put(record(0))
        with pytest.raises(ThreadBusy):
            await cp.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result")])
        assert await cp.list("t") == [] and await cp.get_writes("t", "", "f0") == []
    finally:
        holder.kill()
        await holder.wait()


async def test_a_thread_another_process_holds_is_not_deleted(
    schema: str, cp: PostgresCheckpointer
) -> None:
    """``delete_thread`` took no lock: it deleted the history of a thread a graph in another
    process was running, and its lease row with the fencing token, so the holder's next
    checkpoint failed as if taken over. It is ``ThreadBusy`` now, nothing deleted; once the
    holder is gone (its lock with its connection) the thread goes."""
    await cp.put(record(0))
    await cp.put_writes("t", "", "f0", [WriteRecord(task_id="a", kind="result")])
    holder = await spawn(HOLDER, schema)
    try:
        assert await said(holder) == "held"
        with pytest.raises(ThreadBusy):
            await cp.delete_thread("t")
        assert [r.checkpoint_id for r in await cp.list("t")] == ["c0"]
        assert await cp.get_writes("t", "", "f0") != []
    finally:
        holder.kill()
        await holder.wait()
    async with asyncio.timeout(60):  # the server notices the holder's connection closed
        while True:
            try:
                await cp.delete_thread("t")
                break
            except ThreadBusy:
                await asyncio.sleep(0.05)
    assert await cp.list("t") == [] and await cp.get_writes("t", "", "f0") == []


async def test_renew_takes_the_lock_again_when_nobody_took_the_thread(schema: str) -> None:
    dsn = postgres_dsn()
    async with (
        PostgresCheckpointer(dsn, schema=schema, lease_ttl=0.0) as cp,
        PostgresCheckpointer(dsn, schema=schema) as other,
    ):
        await cp.acquire("t", "me")
        await _terminate_lease_connections(schema)
        await cp.renew("t", "me")  # a new lease connection, the same token
        with pytest.raises(ThreadBusy):
            await other.acquire("t", "someone")
        await cp.put(record(0))


async def test_renew_takes_every_threads_lock_again_after_the_lease_connection_dropped(
    schema: str,
) -> None:
    """One lease connection holds the locks of every thread a checkpointer writes. When it
    drops, the first renewal opens a new one; the renewals of the other threads found it
    open and only read their lease rows, never taking their locks again: another process
    then took such a thread from its live holder, which failed with ``ThreadBusy`` mid-run."""
    dsn = postgres_dsn()
    async with (
        PostgresCheckpointer(dsn, schema=schema, lease_ttl=0.0) as cp,
        PostgresCheckpointer(dsn, schema=schema) as other,
    ):
        await cp.acquire("t", "me")
        await cp.acquire("u", "me")
        await _terminate_lease_connections(schema)
        await cp.renew("t", "me")  # a new lease connection
        await cp.renew("u", "me")
        for thread in ("t", "u"):
            with pytest.raises(ThreadBusy):
                await other.acquire(thread, "someone")
        await cp.put(record(0))


async def test_renew_notices_a_lease_row_taken_by_another_owner(
    schema: str, cp: PostgresCheckpointer
) -> None:
    fast = PostgresCheckpointer(postgres_dsn(), schema=schema, lease_ttl=0.0)
    async with fast:
        await fast.acquire("t", "me")
        conn = await asyncpg.connect(postgres_dsn())
        try:
            await conn.execute(f'UPDATE "{schema}".thread_leases SET owner = $1', "thief")
        finally:
            await conn.close()
        with pytest.raises(ThreadBusy):
            await fast.renew("t", "me")


async def _first_of(renewing: asyncio.Future[None], waited: Any) -> None:
    """Wait for ``waited``; a renewal (or a save) that ends first (it gave up) raises here."""
    other = asyncio.ensure_future(waited)
    async with asyncio.timeout(60):  # a hang guard: no timing is asserted
        await asyncio.wait([renewing, other], return_when=asyncio.FIRST_COMPLETED)
    if not other.done():
        other.cancel()
        await renewing  # raises what made it give up
        raise AssertionError("the renewal ended before the connections came back")


async def test_renew_rides_out_connection_loss_while_the_lease_may_still_be_ours(
    schema: str,
) -> None:
    """The server keeps ending the lease connection (constant kills, a restart): ``renew``
    gave up after two tries ("could not renew the lease"), failing the graph run though
    nobody else could have the thread. It tries again until the lease's own margin
    (``lease_ttl`` after it was last confirmed) runs out, and keeps the thread: the same
    fencing token, under the lock taken again."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    try:
        async with (
            PostgresCheckpointer(proxy.dsn, schema=schema, lease_ttl=60.0) as cp,
            PostgresCheckpointer(postgres_dsn(), schema=schema) as other,
        ):
            await cp.acquire("t", "me")
            cp._renew_after["t"] = 0.0  # due now, with all of the lease's margin left
            proxy.down()
            renewing = asyncio.ensure_future(cp.renew("t", "me"))
            await _first_of(renewing, proxy.refusing(4))
            proxy.up()
            async with asyncio.timeout(60):
                await renewing
            with pytest.raises(ThreadBusy):
                await other.acquire("t", "someone")
            await cp.put(record(0))
    finally:
        await proxy.aclose()


async def test_a_renewal_riding_out_connection_loss_notices_a_thread_taken_meanwhile(
    schema: str,
) -> None:
    """While ``renew`` waits for the server, the lock is free (it went with the connection)
    and another writer takes the thread: once the server answers again, the renewal says
    ``ThreadBusy`` and the old writer can write nothing more: it never keeps a thread
    another may hold."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    try:
        async with (
            PostgresCheckpointer(proxy.dsn, schema=schema, lease_ttl=60.0) as cp,
            PostgresCheckpointer(postgres_dsn(), schema=schema) as other,
        ):
            await cp.acquire("t", "me")
            cp._renew_after["t"] = 0.0
            proxy.down()
            renewing = asyncio.ensure_future(cp.renew("t", "me"))
            await _first_of(renewing, proxy.refusing(1))
            async with asyncio.timeout(60):  # until the server has seen the session end
                while True:
                    try:
                        await other.acquire("t", "thief")
                        break
                    except ThreadBusy:
                        await asyncio.sleep(0.01)
            proxy.up()
            with pytest.raises(ThreadBusy):
                async with asyncio.timeout(60):
                    await renewing
            with pytest.raises(ThreadBusy):
                await cp.renew("t", "me")
            await other.put(record(0))
            await other.renew("t", "thief")
    finally:
        await proxy.aclose()


async def test_a_renewal_gives_up_once_the_lease_may_have_been_lost(schema: str) -> None:
    """A server that stays away past the lease's margin: ``renew`` gives up with a
    ``StoreError`` that may pass (the graph run fails; its checkpoints stay), not waiting
    for good."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    try:
        async with PostgresCheckpointer(proxy.dsn, schema=schema, lease_ttl=0.5) as cp:
            await cp.acquire("t", "me")
            cp._renew_after["t"] = 0.0
            proxy.down()
            with pytest.raises(StoreError, match="could not renew the lease") as caught:
                async with asyncio.timeout(60):  # a hang guard: no timing is asserted
                    await cp.renew("t", "me")
            assert isinstance(caught.value, LeaseExpired) and may_pass(caught.value)
            assert "lease" in str(caught.value) and "margin" in str(caught.value)
            proxy.up()
    finally:
        await proxy.aclose()


def _save(cp: PostgresCheckpointer, write: str) -> asyncio.Future[None]:
    """Start a checkpoint (``put``) or a task's pending write (``put_writes``) of thread t."""
    if write == "put":
        return asyncio.ensure_future(cp.put(record(1)))
    result = WriteRecord(task_id="a", kind="result", value=1)
    return asyncio.ensure_future(cp.put_writes("t", "", "f0", [result]))


@pytest.mark.parametrize("write", ["put", "put_writes"])
async def test_a_save_rides_out_an_unreachable_server_while_the_lease_may_still_be_ours(
    schema: str, write: str
) -> None:
    """The server is out of reach (a restart, a network cut) for longer than a blip: a
    checkpoint or a pending write got two quick retries, then failed the graph run, though
    the lease was the writer's for a minute more. It is tried again, as ``renew`` is, until
    ``lease_ttl`` after the lease was last confirmed, and lands once the server is back."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    try:
        async with (
            PostgresCheckpointer(proxy.dsn, schema=schema, lease_ttl=60.0) as cp,
            PostgresCheckpointer(postgres_dsn(), schema=schema) as other,
        ):
            await cp.acquire("t", "me")
            await cp.put(record(0))
            proxy.down()
            saving = _save(cp, write)
            await _first_of(saving, proxy.refusing(8))  # well past the two quick retries
            proxy.up()
            async with asyncio.timeout(60):
                await saving
            if write == "put":
                assert [r.checkpoint_id for r in await other.list("t")] == ["c1", "c0"]
            else:
                assert [w.value for w in await other.get_writes("t", "", "f0")] == [1]
            await cp.renew("t", "me")
            await cp.put(record(2 if write == "put" else 1))  # the thread is still ours
    finally:
        await proxy.aclose()


@pytest.mark.parametrize("write", ["put", "put_writes"])
async def test_a_save_riding_out_an_unreachable_server_notices_a_thread_taken_meanwhile(
    schema: str, write: str
) -> None:
    """While the save waits for the server, the lease connection is gone and with it the
    lock: another writer takes the thread. Once the server answers, the save is
    ``ThreadBusy`` (its fencing token is no longer the lease row's), nothing written."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    try:
        async with (
            PostgresCheckpointer(proxy.dsn, schema=schema, lease_ttl=60.0) as cp,
            PostgresCheckpointer(postgres_dsn(), schema=schema) as other,
        ):
            await cp.acquire("t", "me")
            await cp.put(record(0))
            proxy.down()
            saving = _save(cp, write)
            await _first_of(saving, proxy.refusing(1))
            async with asyncio.timeout(60):  # until the server has seen the session end
                while True:
                    try:
                        await other.acquire("t", "thief")
                        break
                    except ThreadBusy:
                        await asyncio.sleep(0.01)
            await _first_of(saving, proxy.refusing(8))
            proxy.up()
            with pytest.raises(ThreadBusy):
                async with asyncio.timeout(60):
                    await saving
            assert [r.checkpoint_id for r in await other.list("t")] == ["c0"]
            assert await other.get_writes("t", "", "f0") == []
    finally:
        await proxy.aclose()


@pytest.mark.parametrize("write", ["put", "put_writes"])
async def test_a_save_gives_up_once_the_lease_may_have_passed_to_another_writer(
    schema: str, write: str
) -> None:
    """A server out of reach past the lease's margin: the save stops with ``LeaseExpired``
    (a ``StoreError`` that may pass, saying the margin ran out), not waiting for good, and
    writes nothing once the server is back."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    try:
        async with (
            PostgresCheckpointer(proxy.dsn, schema=schema, lease_ttl=0.5) as cp,
            PostgresCheckpointer(postgres_dsn(), schema=schema) as other,
        ):
            await cp.acquire("t", "me")
            await cp.put(record(0))
            proxy.down()
            with pytest.raises(LeaseExpired, match="could not save") as caught:
                async with asyncio.timeout(60):  # a hang guard: no timing is asserted
                    await _save(cp, write)
            assert may_pass(caught.value) and "margin" in str(caught.value)
            proxy.up()
            assert [r.checkpoint_id for r in await other.list("t")] == ["c0"]
            assert await other.get_writes("t", "", "f0") == []
    finally:
        await proxy.aclose()


@pytest.mark.parametrize("write", ["put", "put_writes"])
async def test_a_save_riding_out_an_outage_ends_when_the_checkpointer_is_closed(
    schema: str, write: str
) -> None:
    """``aclose`` while a save rides out an unreachable server: the save's next try opened
    the pool again (``_db`` called ``setup``), so a closed checkpointer went on holding
    connections and the save landed once the server was back. Closed is for good: the
    save ends with a ``StoreError`` saying so (not one that may pass), nothing written."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    try:
        async with PostgresCheckpointer(postgres_dsn(), schema=schema) as other:
            cp = PostgresCheckpointer(proxy.dsn, schema=schema, lease_ttl=60.0)
            await cp.acquire("t", "me")
            await cp.put(record(0))
            proxy.down()
            saving = _save(cp, write)
            await _first_of(saving, proxy.refusing(4))
            await cp.aclose()
            proxy.up()  # a try after the close would reach the server now
            with pytest.raises(StoreError, match=r"checkpointer .* is closed") as caught:
                async with asyncio.timeout(60):  # a hang guard: no timing is asserted
                    await saving
            assert not isinstance(caught.value, LeaseExpired) and not may_pass(caught.value)
            with pytest.raises(StoreError, match=r"checkpointer .* is closed"):
                await cp.latest("t")  # nor does anything later open it again
            assert cp._pool is None and cp._lease_conn is None
            assert [r.checkpoint_id for r in await other.list("t")] == ["c0"]
            assert await other.get_writes("t", "", "f0") == []
    finally:
        await proxy.aclose()


@pytest.mark.parametrize("write", ["put", "put_writes"])
async def test_a_save_of_a_thread_not_held_ends_when_the_checkpointer_is_closed(
    schema: str, write: str
) -> None:
    """A save of a thread this checkpointer does not hold, under way (its statement tried
    again on a dropped connection) when ``aclose`` closed the pool: its next try ended with
    asyncpg's "pool is closed" as the ``StoreError``. It is the ``CheckpointerClosed`` every
    other call after ``aclose`` is, which does not pass, and nothing is written."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    try:
        async with PostgresCheckpointer(postgres_dsn(), schema=schema) as other:
            cp = PostgresCheckpointer(proxy.dsn, schema=schema)
            await cp.put(record(0))
            proxy.down()
            saving = _save(cp, write)
            await _first_of(saving, proxy.refusing(1))
            await cp.aclose()
            proxy.up()  # a try after the close would reach the server now
            with pytest.raises(CheckpointerClosed, match=r"checkpointer .* is closed") as caught:
                async with asyncio.timeout(60):  # a hang guard: no timing is asserted
                    await saving
            assert "pool is closed" not in str(caught.value) and not may_pass(caught.value)
            assert cp._pool is None
            assert [r.checkpoint_id for r in await other.list("t")] == ["c0"]
            assert await other.get_writes("t", "", "f0") == []
    finally:
        await proxy.aclose()


class Steps(TypedDict):
    done: list[str]


async def test_a_graph_run_rides_out_an_unreachable_server(schema: str) -> None:
    """End to end: the server goes out of reach while a node runs and comes back only after
    many refused connections; the step's checkpoint waits for it and the run completes."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()
    backs: list[asyncio.Task[None]] = []

    async def back_later() -> None:
        await proxy.refusing(proxy.refused + 8)  # well past the two quick retries
        proxy.up()

    async def first(state: Steps) -> dict[str, Any]:
        proxy.down()
        backs.append(asyncio.create_task(back_later()))
        return {"done": [*state["done"], "a"]}

    async def second(state: Steps) -> dict[str, Any]:
        return {"done": [*state["done"], "b"]}

    builder = StateGraph(Steps).add_node("a", first).add_node("b", second)
    builder.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    try:
        async with PostgresCheckpointer(proxy.dsn, schema=schema, lease_ttl=60.0) as cp:
            graph = builder.compile(checkpointer=cp)
            async with asyncio.timeout(60):  # a hang guard: no timing is asserted
                result = await graph.run({"done": []}, thread_id="t")
            assert result.status == "completed" and result.state == {"done": ["a", "b"]}
            await asyncio.gather(*backs)
    finally:
        await proxy.aclose()


@pytest.mark.parametrize("where", ["node", "router"])
async def test_a_run_failing_while_the_server_is_out_of_reach_ends_with_its_own_error(
    schema: str, where: str
) -> None:
    """A node (or its router) fails while the server is out of reach: the record of the
    failure (``_save_error``: the task's error; ``_keep_results``: the node's result beside
    a router that failed) rode out the outage like a checkpoint, so the failing run waited up
    to ``lease_ttl`` (an hour here) before it said why it failed. Those writes are ones the
    run can do without: tried once (with a dropped connection's quick retries), logged if
    they fail, and the run ends with the node's own error. No timing is asserted: the
    connections refused are counted (a ride-out goes on trying for the hour)."""
    proxy = PgProxy(postgres_dsn())
    await proxy.start()

    def fail(state: Steps) -> Any:
        proxy.down()
        raise ValueError(f"the {where} broke")

    builder = StateGraph(Steps)
    if where == "node":
        builder.add_node("a", fail).add_edge("a", END)
    else:
        builder.add_node("a", lambda state: {"done": ["a"]})
        builder.add_conditional_edges("a", fail)
    builder.add_edge(START, "a")
    try:
        async with PostgresCheckpointer(proxy.dsn, schema=schema, lease_ttl=3600.0) as cp:
            graph = builder.compile(checkpointer=cp)
            async with asyncio.timeout(60):  # a hang guard: no timing is asserted
                result = await graph.run({"done": []}, thread_id="t")
            assert result.status == "failed"
            assert isinstance(result.error, ValueError)
            assert str(result.error) == f"the {where} broke"
            assert proxy.refused <= 4 * 3, proxy.refused  # a few tries, not an hour's
            proxy.up()
    finally:
        await proxy.aclose()


async def test_schema_is_versioned_and_setup_is_idempotent(schema: str) -> None:
    for _ in range(2):
        async with PostgresCheckpointer(postgres_dsn(), schema=schema) as cp:
            await cp.setup()
    conn = await asyncpg.connect(postgres_dsn())
    try:
        rows = await conn.fetch(
            f'SELECT version FROM "{schema}".tinyagents_migrations'
            " WHERE component = 'checkpoints' ORDER BY version"
        )
    finally:
        await conn.close()
    assert [r[0] for r in rows] == [v for v, _ in MIGRATIONS]


async def test_a_graph_paused_in_one_process_is_resumed_by_another_checkpointer(
    schema: str,
) -> None:
    from tinyagents.graph import Command, interrupt

    def ask(state: S) -> S:
        return {"x": interrupt("?")}

    def build(cp: PostgresCheckpointer) -> object:
        graph = StateGraph(S).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
        return graph.compile(checkpointer=cp)

    dsn = postgres_dsn()
    async with PostgresCheckpointer(dsn, schema=schema) as first:
        paused = await build(first).run({"x": 0}, thread_id="t")  # type: ignore[attr-defined]
        assert paused.status == "interrupted"
    async with PostgresCheckpointer(dsn, schema=schema) as second:
        done = await build(second).run(Command(resume=7), thread_id="t")  # type: ignore[attr-defined]
        assert done.state == {"x": 7}


async def test_an_unreachable_database_is_a_store_error() -> None:
    cp = PostgresCheckpointer("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(StoreError, match="could not open the checkpointer"):
        await cp.setup()
    await cp.aclose()


async def _terminate_lease_connections(schema: str) -> None:
    """End the sessions that hold the leases recorded in ``schema`` (and still hold an
    advisory lock): the lease connections of the checkpointers under test."""
    conn = await asyncpg.connect(postgres_dsn())
    try:
        pids = await conn.fetch(
            "SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND a.pid <> pg_backend_pid()"
            " AND a.datname = current_database()"
        )
        lease_pids = await conn.fetch(f'SELECT backend_pid FROM "{schema}".thread_leases')
        wanted = {r[0] for r in pids} & {r[0] for r in lease_pids}
        for pid in wanted:
            await conn.execute("SELECT pg_terminate_backend($1, 10000)", pid)  # and wait
    finally:
        await conn.close()


# A holder whose event loop stalls (a blocking call) for many times its lease_ttl: it says
# "held", blocks until its stdin says "wake" (time.sleep-like: nothing of the loop runs), then
# renews and puts the next checkpoint and says what happened.
STALLER = textwrap.dedent(
    """
    import asyncio, sys
    from tinyagents.errors import ThreadBusy
    from tinyagents.store.checkpoint import CheckpointRecord, PostgresCheckpointer

    def rec(seq):
        return CheckpointRecord(thread_id="t", checkpoint_id=f"c{seq}",
            parent_id=f"c{seq - 1}" if seq else None, seq=seq, step=seq, snapshot=seq == 0,
            values={"x": seq}, frontier=[], frontier_id=f"f{seq}", lineage="L", source="loop")

    async def main():
        async with PostgresCheckpointer(sys.argv[1], schema=sys.argv[2], lease_ttl=0.3) as cp:
            await cp.acquire("t", "stalled")
            await cp.put(rec(0))
            print("held", flush=True)
            sys.stdin.readline()  # the event loop stalls here
            try:
                await cp.renew("t", "stalled")
                await cp.put(rec(1))
                print("wrote", flush=True)
            except ThreadBusy:
                print("busy", flush=True)

    asyncio.run(main())
    """
)


async def test_a_holder_whose_event_loop_stalls_past_its_lease_ttl_keeps_the_thread(
    schema: str,
) -> None:
    """A stall of the holder's event loop (a blocking call) much longer than ``lease_ttl``
    does not let another writer take the thread: the advisory lock lives on the holder's
    lease connection, which its kernel keeps alive, so there are never two writers (the
    fencing token covers a connection that did drop: see the tests above)."""
    proc = await spawn(STALLER, schema)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert (await asyncio.wait_for(proc.stdout.readline(), 60)).strip() == b"held"
        async with PostgresCheckpointer(postgres_dsn(), schema=schema, lease_ttl=0.3) as other:
            for _ in range(5):  # the holder is stalled all along (it waits for our line)
                with pytest.raises(ThreadBusy):
                    await other.acquire("t", "thief")
                await asyncio.sleep(0.3)
            proc.stdin.write(b"wake\n")
            await proc.stdin.drain()
            assert (await asyncio.wait_for(proc.stdout.readline(), 60)).strip() == b"wrote"
            assert [r.checkpoint_id for r in await other.list("t")] == ["c1", "c0"]
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


@pytest.mark.parametrize("table", ["checkpoints", "checkpoint_writes"])
async def test_a_connection_ended_in_the_middle_of_a_write_does_not_fail_it(
    schema: str, table: str
) -> None:
    """The server ends the pooled connection while a checkpoint (or a task's pending
    writes) is being written: a failure the next connection does not meet, but it failed the
    graph run ("could not save pending writes of thread ...: cannot switch to state 12").
    The write is tried once more on another connection (both are idempotent)."""
    name = f"ta-{schema}"  # the checkpointer's connections, and no other test's
    dsn = postgres_dsn() + ("&" if "?" in postgres_dsn() else "?") + f"application_name={name}"
    admin = await asyncpg.connect(postgres_dsn())
    locker = await asyncpg.connect(postgres_dsn())
    try:
        async with PostgresCheckpointer(dsn, schema=schema, max_size=1) as cp:
            await cp.acquire("t", "me")
            await cp.put(record(0))
            tx = locker.transaction()
            await tx.start()
            await locker.execute(f'LOCK TABLE "{schema}".{table} IN ACCESS EXCLUSIVE MODE')
            if table == "checkpoints":
                writing = asyncio.ensure_future(cp.put(record(1)))
            else:
                write = WriteRecord(task_id="k", kind="result", key="x", value=1)
                writing = asyncio.ensure_future(cp.put_writes("t", "", "f0", [write]))
            async with asyncio.timeout(60):  # bounds the test; no timing is asserted
                while not (pids := await admin.fetch(_WAITING_ON_A_LOCK, name)):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            await admin.execute("SELECT pg_terminate_backend($1, 10000)", pids[0][0])
            await tx.rollback()
            await writing
            if table == "checkpoints":
                assert [r.checkpoint_id for r in await cp.list("t")] == ["c1", "c0"]
            else:
                assert [(w.key, w.value) for w in await cp.get_writes("t", "", "f0")] == [("x", 1)]
    finally:
        await locker.close()
        await admin.close()


#: The backends of the connections named ``$1`` that wait on a lock.
_WAITING_ON_A_LOCK = (
    "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'"
)


class Flaky(TypedDict):
    done: list[str]


async def test_a_graph_run_that_failed_is_taken_on_from_its_checkpoint_in_the_same_runtime(
    schema: str,
) -> None:
    """A node failed once (its own connection dropped); continuing the thread in the runtime
    that ran it raised ``ConfigurationError`` "run ... cannot be continued as a graph run"
    (a new process could, a restart of the worker was the only way). A new run takes the
    thread on from its last checkpoint, and the step that failed runs again."""
    calls: list[str] = []

    async def first(state: Flaky) -> dict[str, Any]:
        calls.append("a")
        return {"done": [*state["done"], "a"]}

    async def second(state: Flaky) -> dict[str, Any]:
        calls.append("b")
        if calls.count("b") == 1:
            raise ConnectionResetError("the node's own connection dropped")
        return {"done": [*state["done"], "b"]}

    builder = StateGraph(Flaky).add_node("a", first).add_node("b", second)
    builder.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    async with (
        PostgresCheckpointer(postgres_dsn(), schema=schema) as cp,
        Runtime() as rt,
    ):
        graph = builder.compile(checkpointer=cp)
        failed = await graph.run({"done": []}, thread_id="t", runtime=rt)
        assert failed.status == "failed"
        again = await graph.run(None, thread_id="t", runtime=rt)
        assert again.status == "completed" and again.state == {"done": ["a", "b"]}
        assert calls == ["a", "b", "b"]  # from the checkpoint: "a" did not run again


def _sub_graph_that_asks() -> Any:
    def inner(state: S) -> S:
        interrupt("ask")
        return {"x": 1}

    return StateGraph(S).add_node("inner", inner).add_edge(START, "inner").compile()


def _incompressible(length: int) -> str:
    # PostgreSQL compresses a long index value: a repeated character would fit
    return "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(length))[:length]


async def test_a_sub_graph_node_name_of_the_longest_length_fits_the_namespace_key(
    cp: PostgresCheckpointer,
) -> None:
    """A sub-graph's checkpoints are keyed by its namespace, which holds the node's name: a
    3,000-character name failed deep inside PostgreSQL ("index row size 3040 exceeds btree
    version 4 maximum 2704 for index checkpoints_pkey") where the other checkpointers took
    it. Node names are bounded when the graph is built, and the longest one fits."""
    name = _incompressible(MAX_NODE_NAME_LENGTH)
    graph = StateGraph(S).add_node(name, _sub_graph_that_asks())
    graph = graph.add_edge(START, name).add_edge(name, END).compile(checkpointer=cp)
    result = await graph.run({"x": 0}, thread_id="t" * 256)
    assert result.status == "interrupted" and result.interrupts[0].ns.startswith(name)
    with pytest.raises(GraphValidationError, match="at most 256"):
        StateGraph(S).add_node(_incompressible(3000), _sub_graph_that_asks())


async def test_a_damaged_checkpoint_is_a_store_error_naming_it(
    schema: str, cp: PostgresCheckpointer
) -> None:
    """As on SQLite (``test_checkpointer_reliability``): a body that is not what was written
    is a ``StoreError`` naming the checkpoint, not a ``KeyError`` out of every read."""
    for seq in (0, 1):
        await cp.put(
            CheckpointRecord(
                thread_id="t",
                checkpoint_id=f"c{seq}",
                parent_id=f"c{seq - 1}" if seq else None,
                seq=seq,
                step=seq,
                snapshot=seq == 0,
                values={"n": seq},
                frontier=[],
                frontier_id=f"f{seq}",
                lineage="L",
                source="loop",
            )
        )
    await cp.put_writes("t", "", "f1", [WriteRecord(task_id="k", kind="result", value=1)])
    conn = await asyncpg.connect(postgres_dsn())
    try:
        await conn.execute(
            f'UPDATE "{schema}".checkpoints SET body = \'{{"values": {{}}}}\' '
            "WHERE checkpoint_id = 'c1'"
        )
        await conn.execute(f"UPDATE \"{schema}\".checkpoint_writes SET value = '{{broken'")
    finally:
        await conn.close()
    for read in (lambda: cp.latest("t"), lambda: cp.get("t", "c1"), lambda: cp.list("t")):
        with pytest.raises(StoreError, match="checkpoint 'c1' of thread 't' no longer reads"):
            await read()
    with pytest.raises(StoreError, match="pending write of task 'k'"):
        await cp.get_writes("t", "", "f1")
    assert (await cp.get("t", "c0") or (await cp.list("t"))[0]).values == {"n": 0}


async def test_a_checkpoint_refused_by_a_read_only_connection_is_written_on_a_new_one(
    schema: str,
) -> None:
    """The pool's connection is on a server that takes no writes (a standby a stale DNS name
    still points to after a failover; here: its session made read-only): the checkpoint
    failed the graph run, and every later one on that connection too. The pool's connections
    are replaced and the write tried again on a new one."""
    async with PostgresCheckpointer(postgres_dsn(), schema=schema, min_size=1, max_size=1) as cp:
        await cp.put(record(0))
        pool = await cp._db()
        await pool.execute("SET default_transaction_read_only = on")
        await cp.put(record(1))
        assert [r.checkpoint_id for r in await cp.list("t")] == ["c1", "c0"]
        assert await pool.fetchval("SHOW default_transaction_read_only") == "off"


async def test_a_lease_refused_by_a_read_only_lease_connection_is_taken_on_a_new_one(
    schema: str,
) -> None:
    """The lease connection is on a server that takes no writes (a standby, after a
    failover; here: its session made read-only): taking a thread's lease failed, and went on
    failing on that connection for good. The failure may pass, and the next take opens a
    new lease connection."""
    async with PostgresCheckpointer(postgres_dsn(), schema=schema) as cp:
        await cp.acquire("t-1", "me")
        await cp.release("t-1", "me")
        await cp._lease_conn.execute("SET default_transaction_read_only = on")
        with pytest.raises(StoreError, match="read-only transaction") as caught:
            await cp.acquire("t-2", "me")
        assert may_pass(caught.value)
        await cp.acquire("t-2", "me")
        await cp.put(record(0))  # thread "t": fenced by nobody's lease
        await cp.release("t-2", "me")
