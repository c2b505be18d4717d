"""Starting a run id on a durable store claims it: of two runtimes on one store starting the
same run id at the same moment, one runs it and the other is refused. The check read the
run's stored snapshot, which names its owner only from the next live-snapshot tick on (0.1 s
after the start): two starts within that moment both found no owner, and the agent ran twice."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

import tinyagents.runtime as runtime_module
from tinyagents import Agent, RunStatus, Runtime
from tinyagents.errors import ConfigurationError, StoreError
from tinyagents.runs import RunHandle
from tinyagents.testkit import Gate, ScriptedModel, fake_agent, reply, tool_call


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    dsn = postgres_dsn()
    sep = "&" if "?" in dsn else "?"
    yield f"{dsn}{sep}schema={pg_schema()}"
    await drop_pg_schemas()


async def test_two_runtimes_starting_one_run_id_at_once_run_it_once(store_url: str) -> None:
    gate = Gate("hold")
    agent = fake_agent("clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("done")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        started = await asyncio.gather(
            first.start(agent, "work", run_id="job-1"),
            second.start(agent, "work", run_id="job-1"),
            return_exceptions=True,
        )
        handles = [s for s in started if isinstance(s, RunHandle)]
        refused = [s for s in started if isinstance(s, BaseException)]
        assert len(handles) == 1, started
        (error,) = refused
        assert isinstance(error, ConfigurationError)
        assert "'job-1' is running in another runtime on this store" in str(error)
        (handle,) = handles
        await gate.entered.wait()
        gate.open()
        assert (await handle.result()).status is RunStatus.COMPLETED
        assert [first.runs.get("job-1"), second.runs.get("job-1")].count(None) == 1


async def test_a_claimed_run_id_is_refused_before_its_first_snapshot(store_url: str) -> None:
    """The claim is the start's own write: a start of the id in another runtime right after
    it returned (no snapshot tick between) is refused; once it finished, the id starts again."""
    gate = Gate("hold")
    agent = fake_agent("clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("done")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        held = await first.start(agent, "work", run_id="job-2")
        again = ScriptedModel([reply("twice")])
        with pytest.raises(ConfigurationError, match=r"'job-2' is running in another runtime"):
            await second.start(Agent("clerk", again), "work", run_id="job-2")
        assert again.requests == []
        await gate.entered.wait()
        gate.open()
        assert (await held.result()).status is RunStatus.COMPLETED
        await first.flush()
        restarted = await second.start(Agent("clerk", again), "work", run_id="job-2")
        assert (await restarted.result()).status is RunStatus.COMPLETED
        assert len(again.requests) == 1


async def test_a_start_that_fails_after_its_claim_gives_the_run_id_back(store_url: str) -> None:
    """A start refused after it claimed its id (here: a child of a run of another tenant, which
    registering refuses) changed nothing in the store: the row it claimed is put back as it
    was (none: deleted), so another runtime starts the id at once instead of being refused
    until the failed start's claim went stale (30 s)."""
    gate = Gate("hold")
    parent_agent = fake_agent("boss", tools=[gate.tool()], script=[tool_call("hold"), reply("ok")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        parent = await first.start(parent_agent, "lead", tenant_id="acme")
        with pytest.raises(ConfigurationError, match="cannot be a child of run"):
            await first.start(
                fake_agent("clerk"), "work", run_id="job-3", parent=parent, tenant_id="globex"
            )
        assert await second.store.load_run("job-3") is None
        done = await second.start(fake_agent("clerk"), "work", run_id="job-3", tenant_id="globex")
        assert (await done.result()).status is RunStatus.COMPLETED
        await second.flush()
        kept = await second.store.load_run("job-3")
        assert kept is not None and kept["status"] == "completed"
        with pytest.raises(ConfigurationError, match="cannot be a child of run"):
            await first.start(
                fake_agent("clerk"), "work", run_id="job-3", parent=parent, tenant_id="globex"
            )
        again = await second.store.load_run("job-3")
        assert again is not None
        assert {k: v for k, v in again.items() if k != "silence_s"} == {
            k: v for k, v in kept.items() if k != "silence_s"
        }
        gate.open()
        await parent.result()


async def test_an_owner_whose_run_was_claimed_elsewhere_never_takes_it_back(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A runtime whose heartbeat went stale (its loop stalled, its store cut off) while its run
    was started again in another runtime: its next snapshot of the run took the row back (the
    new owner's commands then went to it, and a third runtime could claim the run again as the
    old owner's heartbeat aged). Its saves of a run it holds are conditional on the row still
    naming it: it logs that the run was taken over, once, and saves the run no more."""
    gate = Gate("hold")
    agent = fake_agent("clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("done")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        held = await first.start(agent, "work", run_id="job-4")
        await gate.entered.wait()
        taken = await take_over(first, second, fake_agent("clerk"), "job-4")
        with caplog.at_level(logging.WARNING, logger="tinyagents"):
            await first.write_live_snapshots(heartbeat=True)
            await first.write_live_snapshots(heartbeat=True)
        now = await second.store.load_run("job-4")
        assert now is not None and now["owner"] == second.runtime_id
        lost = [r for r in caplog.records if "job-4" in r.getMessage()]
        assert len(lost) == 1 and "taken over" in lost[0].getMessage()
        assert (await taken.result()).status is RunStatus.COMPLETED
        await second.flush()
        assert (await held.result()).status is RunStatus.CANCELLED  # stopped: see below
        await first.flush()
        final = await second.store.load_run("job-4")
        assert final is not None
        assert (final["owner"], final["status"]) == (second.runtime_id, "completed")


async def take_over(old: Runtime, new: Runtime, agent: Agent, run_id: str) -> RunHandle:
    """Start ``run_id``, running in ``old``, in ``new`` as if ``old``'s heartbeat had gone
    stale (its loop stalled, its store cut off): its row is written 45 s old, then claimed."""
    stale = datetime.now(UTC) - timedelta(seconds=45)
    for _ in range(100):  # old's own heartbeat may land between the two writes: again
        row = await new.store.load_run(run_id)
        assert row is not None and row["owner"] == old.runtime_id
        row = {k: v for k, v in row.items() if k != "silence_s"}
        await new.store.save_runs([{**row, "updated_at": stale.isoformat()}])
        try:
            # the run's own tenant: another tenant's start is refused (the id is taken)
            return await new.start(agent, "work", run_id=run_id, tenant_id=row["tenant_id"])
        except ConfigurationError:
            continue
    pytest.fail("the stale run was never claimed")


async def test_an_owner_whose_run_was_taken_over_stops_running_it(store_url: str) -> None:
    """Saving no more was all the old owner did: it ran the run on, its tools called, its
    steering applied, beside the new owner's incarnation of the same run. At its first
    refused save it stops the run: the run's task is cancelled (``cancelled``, the new owner
    named in its reason), the command queued for it fails, a command sent to it here is
    refused with the new owner named, and nothing of it is saved: the row stays the new
    owner's, through the old owner's close too."""
    old_gate, new_gate = Gate("hold"), Gate("hold")
    model = ScriptedModel([tool_call("hold"), reply("old done")])
    async with Runtime(store_url) as second:
        async with Runtime(store_url) as first:
            held = await first.start(
                Agent("clerk", model, tools=[old_gate.tool()]), "w", run_id="job-8"
            )
            await old_gate.entered.wait()
            queued = await held.steer("mind the cost")  # for the tool's result boundary
            again = fake_agent(
                "clerk", tools=[new_gate.tool()], script=[tool_call("hold"), reply("ok")]
            )
            taken = await take_over(first, second, again, "job-8")
            await first.write_live_snapshots(heartbeat=True)
            refused = await held.steer("and the time", check=False)
            assert refused.status == "rejected", refused
            assert f"taken over by runtime {second.runtime_id}" in (refused.reason or "")
            ended = await held.result()
            assert ended.status is RunStatus.CANCELLED
            assert f"taken over by runtime {second.runtime_id}" in (ended.error or "")
            assert old_gate.cancelled and len(model.requests) == 1
            outcome = [
                e.type
                for e in first.steering_history("job-8")
                if e.correlation_id == queued.correlation_id
            ]
            assert outcome[-1] == "steering.failed" and "steering.applied" not in outcome
            await first.flush()
            row = await second.store.load_run("job-8")
            assert row is not None
            assert (row["owner"], row["status"]) == (second.runtime_id, "running")
        row = await second.store.load_run("job-8")
        assert row is not None
        assert (row["owner"], row["status"]) == (second.runtime_id, "running")
        await new_gate.entered.wait()
        new_gate.open()
        assert (await taken.result()).status is RunStatus.COMPLETED


async def test_a_second_start_of_an_id_while_the_first_claims_it_leaves_the_claim_alone(
    store_url: str,
) -> None:
    """Two starts of one id in one runtime at once: both claims would pass (the same owner),
    and the one refused at registering would give back the claim the other runs under,
    leaving the run's row gone while it runs. The second start is refused at once instead."""
    gate = Gate("hold")
    agent = fake_agent("clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("done")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        started = await asyncio.gather(
            first.start(agent, "work", run_id="job-5"),
            first.start(fake_agent("clerk"), "work", run_id="job-5"),
            return_exceptions=True,
        )
        (handle,) = [s for s in started if isinstance(s, RunHandle)]
        (error,) = [s for s in started if isinstance(s, BaseException)]
        assert isinstance(error, ConfigurationError), error
        row = await second.store.load_run("job-5")
        assert row is not None and row["owner"] == first.runtime_id
        with pytest.raises(ConfigurationError, match=r"'job-5' is running in another runtime"):
            await second.start(fake_agent("clerk"), "work", run_id="job-5")
        await gate.entered.wait()
        gate.open()
        assert (await handle.result()).status is RunStatus.COMPLETED


async def test_a_forgotten_runs_final_snapshot_never_overwrites_its_id_started_again(
    store_url: str,
) -> None:
    """A run released (``forget``) keeps its final snapshot for the next save; started again
    under its id before that, its claim was overwritten by that snapshot (``completed``), and
    another runtime could start the id while it ran here. The claim replaces it instead."""
    gate = Gate("hold")
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        done = await first.start(fake_agent("clerk"), "work", run_id="job-6")
        assert (await done.result()).status is RunStatus.COMPLETED
        first.forget("job-6")
        again = fake_agent("clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("ok")])
        held = await first.start(again, "work", run_id="job-6")
        await first.flush()
        row = await second.store.load_run("job-6")
        assert row is not None and (row["owner"], row["status"]) == (first.runtime_id, "running")
        with pytest.raises(ConfigurationError, match=r"'job-6' is running in another runtime"):
            await second.start(fake_agent("clerk"), "work", run_id="job-6")
        await gate.entered.wait()
        gate.open()
        assert (await held.result()).status is RunStatus.COMPLETED


async def test_a_finished_runs_id_started_again_elsewhere_is_no_takeover(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A finished run's id may be started again in another runtime; the runtime it finished
    in saves its snapshots once more on close, which the new owner's row refuses: that is
    no run taken over (nothing is warned of), and the new owner's row stays."""
    async with Runtime(store_url) as second:
        async with Runtime(store_url) as first:
            done = await first.start(fake_agent("clerk"), "work", run_id="job-7")
            assert (await done.result()).status is RunStatus.COMPLETED
            await first.flush()
            again = await second.start(fake_agent("clerk"), "work", run_id="job-7")
            assert (await again.result()).status is RunStatus.COMPLETED
            await second.flush()
            caplog.set_level(logging.WARNING, logger="tinyagents")
        assert not [r for r in caplog.records if "job-7" in r.getMessage()]
        row = await second.store.load_run("job-7")
        assert row is not None and row["owner"] == second.runtime_id


async def test_a_start_cancelled_at_any_point_leaves_its_run_id_free(store_url: str) -> None:
    """A start cancelled (a caller's timeout, a client gone) at each of its first awaits in
    turn: once the cancel reached its caller, the id is free for another runtime. Cancelled
    while the store committed its claim, the start saw the claim fail and gave nothing back,
    and the id was refused elsewhere for 30 s."""
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        for point in range(80):
            run_id = f"job-c{point}"
            start = asyncio.ensure_future(first.start(fake_agent("clerk"), "w", run_id=run_id))
            for _ in range(point):
                await asyncio.sleep(0)
            start.cancel()
            try:
                started = await start
            except asyncio.CancelledError:
                pass
            else:  # it was done before the cancel: it ran here
                assert (await started.result()).status is RunStatus.COMPLETED
                await first.flush()
            again = await second.start(fake_agent("clerk"), "w", run_id=run_id)
            assert (await again.result()).status is RunStatus.COMPLETED, point


async def test_the_store_ends_with_a_runs_latest_snapshot(store_url: str) -> None:
    """A runtime's tick saving its runs' snapshots while a flush saves them too: on
    PostgreSQL each took a connection of its own, and the snapshot taken first could land
    last, so a run's row said ``running`` after it completed (no later change to save it
    again). Saves are taken and written one after another."""
    async with Runtime(store_url) as rt:
        for i in range(40):
            gate = Gate("hold")
            agent = fake_agent(
                "clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("ok")]
            )
            handle = await rt.start(agent, "work", run_id=f"job-l{i}")
            await gate.entered.wait()
            tick = asyncio.ensure_future(rt.write_live_snapshots(heartbeat=True))
            await asyncio.sleep(0)  # the tick has taken its snapshot: running
            gate.open()
            assert (await handle.result()).status is RunStatus.COMPLETED
            await rt.flush()
            await tick
            row = await rt.store.load_run(f"job-l{i}")
            assert row is not None and row["status"] == "completed", i


async def test_a_forgotten_runs_final_snapshot_being_saved_never_overwrites_its_id_started_again(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, with the final snapshot's save under way when the id starts again: the claim
    did not see the snapshot (taken out of the unsaved ones to be written), and the save,
    failing, put it back to be written after the claim (held: the row names this runtime),
    so the row said ``completed`` while the run ran here again, and another runtime could
    start the id. A claim waits for the saves under way."""
    # The save is the flush's: the runtime's own tick (every INBOX_POLL_S) saving the final
    # snapshot first, under load, took the failing save and swallowed its error.
    monkeypatch.setattr(runtime_module, "INBOX_POLL_S", 3600.0)  # no tick without a wake-up
    gate = Gate("hold")
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        done = await first.start(fake_agent("clerk"), "work", run_id="job-9")
        assert (await done.result()).status is RunStatus.COMPLETED
        first.forget("job-9")
        save_runs = first.store.save_runs
        under_way, fail = asyncio.Event(), asyncio.Event()

        async def failing_once(snapshots: list[dict[str, Any]], **kw: Any) -> list[str]:
            if not under_way.is_set() and any(s["run_id"] == "job-9" for s in snapshots):
                under_way.set()
                await fail.wait()
                raise StoreError("database is locked")
            return await save_runs(snapshots, **kw)

        monkeypatch.setattr(first.store, "save_runs", failing_once)
        saving = asyncio.ensure_future(first.flush())
        await under_way.wait()
        again = fake_agent("clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("ok")])
        starting = asyncio.ensure_future(first.start(again, "work", run_id="job-9"))
        # Time for a start that does not wait for the save to claim the id (not an assertion:
        # a start that waits is still waiting, and goes on below).
        await asyncio.wait([starting], timeout=1.0)
        fail.set()
        with pytest.raises(StoreError):
            await saving
        held = await starting
        await first.flush()
        row = await second.store.load_run("job-9")
        assert row is not None and (row["owner"], row["status"]) == (first.runtime_id, "running")
        with pytest.raises(ConfigurationError, match=r"'job-9' is running in another runtime"):
            await second.start(fake_agent("clerk"), "work", run_id="job-9")
        await gate.entered.wait()
        gate.open()
        assert (await held.result()).status is RunStatus.COMPLETED


async def test_a_start_whose_claim_committed_and_lost_its_reply_runs_once(
    store_url: str,
) -> None:
    """The connection drops after the claim's COMMIT went through (a failover, a restart,
    ``pg_terminate_backend`` between COMMIT and its reply). The start failed with the
    store's ``StoreError`` while the store held its claim, naming a runtime that ran nothing
    under the id: the id was refused to every runtime ("running in another runtime") until
    the claim went stale (30 s), and the store listed a run ``pending`` that never ran. A
    claim that failed in a way that may pass is tried again, and finds its own claim."""
    lost = [True]
    claims: list[tuple[bool, dict[str, Any] | None]] = []

    async def claim_then_lose(
        store: Any, snapshot: dict[str, Any], free: Any
    ) -> tuple[bool, dict[str, Any] | None]:
        claimed = await type(store).claim_run(store, snapshot, free)
        claims.append(claimed)
        if lost and lost.pop():
            raise StoreError("could not claim run: connection lost") from ConnectionResetError(
                "connection was closed in the middle of operation"
            )
        return claimed

    model = ScriptedModel([reply("done")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        first.store.claim_run = lambda snapshot, free: claim_then_lose(  # type: ignore[method-assign]
            first.store, snapshot, free
        )
        handle = await first.start(Agent("clerk", model), "work", run_id="job-l")
        assert (await handle.result()).status is RunStatus.COMPLETED
        assert [claimed for claimed, _ in claims] == [True, True]  # the second found its own
        assert len(model.requests) == 1
        await first.flush()
        kept = await second.store.load_run("job-l")
        assert kept is not None and kept["status"] == "completed"
        again = await second.start(fake_agent("clerk"), "work", run_id="job-l")
        assert (await again.result()).status is RunStatus.COMPLETED


async def test_a_start_that_fails_after_a_claim_that_lost_its_reply_gives_the_id_back(
    store_url: str,
) -> None:
    """The claim, made again after its reply was lost, finds its own: a start that then
    fails (here: a child of another tenant's run, which registering refuses) gives the id
    back free, not as the claim it found (a ``pending`` run of this runtime that never ran)."""
    lost = [True]

    async def claim_then_lose(
        store: Any, snapshot: dict[str, Any], free: Any
    ) -> tuple[bool, dict[str, Any] | None]:
        claimed = await type(store).claim_run(store, snapshot, free)
        if snapshot["run_id"] == "job-m" and lost and lost.pop():
            raise StoreError("could not claim run: connection lost") from ConnectionResetError(
                "connection was closed in the middle of operation"
            )
        return claimed

    gate = Gate("hold")
    parent_agent = fake_agent("boss", tools=[gate.tool()], script=[tool_call("hold"), reply("ok")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        parent = await first.start(parent_agent, "lead", tenant_id="acme")
        first.store.claim_run = lambda snapshot, free: claim_then_lose(  # type: ignore[method-assign]
            first.store, snapshot, free
        )
        with pytest.raises(ConfigurationError, match="cannot be a child of run"):
            await first.start(
                fake_agent("clerk"), "work", run_id="job-m", parent=parent, tenant_id="globex"
            )
        assert not lost  # the claim lost its reply, and was made again
        assert await second.store.load_run("job-m") is None
        done = await second.start(fake_agent("clerk"), "work", run_id="job-m")
        assert (await done.result()).status is RunStatus.COMPLETED
        gate.open()
        await parent.result()


async def test_a_give_back_whose_connection_dropped_is_made_again(store_url: str) -> None:
    """A start that fails after its claim gives the id back; a give-back that failed in a
    way that may pass (the connection dropped under it) was only logged, and the id was
    refused to every other runtime until the claim went stale (30 s). It is made again."""
    failed = [True]

    async def drop_once(store: Any, run_id: str, owner: str, previous: Any) -> bool:
        if failed and failed.pop():
            raise StoreError("could not give back run: connection lost") from ConnectionResetError(
                "connection was closed in the middle of operation"
            )
        return await type(store).release_run(store, run_id, owner, previous)

    gate = Gate("hold")
    parent_agent = fake_agent("boss", tools=[gate.tool()], script=[tool_call("hold"), reply("ok")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        parent = await first.start(parent_agent, "lead", tenant_id="acme")
        first.store.release_run = lambda run_id, owner, previous: drop_once(  # type: ignore[method-assign]
            first.store, run_id, owner, previous
        )
        with pytest.raises(ConfigurationError, match="cannot be a child of run"):
            await first.start(
                fake_agent("clerk"), "work", run_id="job-g", parent=parent, tenant_id="globex"
            )
        assert not failed  # the give-back failed once
        assert await second.store.load_run("job-g") is None
        done = await second.start(fake_agent("clerk"), "work", run_id="job-g")
        assert (await done.result()).status is RunStatus.COMPLETED
        gate.open()
        await parent.result()
