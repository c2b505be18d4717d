"""A run whose process was killed (SIGKILL) and is never started again: the commands it had
accepted stayed ``accepted`` in the steering log for ever (every runtime opened on the store
restored them and waited for the run), and an operator could do nothing about it — a cancel
was refused because the owner is silent. Cancelling such a run now declares it dead: its
open commands fail, the run is ``cancelled`` in the store, and every command has one
terminal state."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn
from slow_agent import slow_agent
from test_cross_process import OPS, Owner, instruction
from test_run_claims import take_over

from tinyagents import Agent, Runtime, SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.errors import StoreError
from tinyagents.protocol.commands import dedupe_scope
from tinyagents.steering import dead, remote
from tinyagents.steering.remote import owner_silent, submit_through_store
from tinyagents.store import open_store
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


def cancel(run_id: str, cid: str, actor: SteeringActor = OPS) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=actor,
        kind=SteeringKind.CANCEL,
        payload={},
        correlation_id=cid,
    )


async def test_cancelling_a_killed_owners_run_fails_its_accepted_commands(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = Owner(tmp_path)
    owner.url = store_url
    store = open_store(store_url)
    async with owner:
        await store.open()
        run_id = owner.run_id
        pause = SteeringCommand(
            target=SteeringTarget.agent_run(run_id), actor=OPS, kind=SteeringKind.PAUSE
        )
        assert (await submit_through_store(store, pause)).status == "accepted"
        async with asyncio.timeout(60):
            while (await store.load_run(run_id) or {}).get("status") != "paused":  # noqa: ASYNC110 - another process writes it
                await asyncio.sleep(0.05)
        cids = [f"ghost-{i}" for i in range(3)]
        for cid in cids:  # queued on the paused run
            receipt = await submit_through_store(store, instruction(run_id, cid, cid))
            assert receipt.status == "accepted"
        assert owner.proc is not None
        owner.proc.kill()
        await owner.proc.wait()
    silent_soon(monkeypatch)
    try:
        async with asyncio.timeout(60):
            while not owner_silent(await store.load_run(run_id) or {}):  # noqa: ASYNC110 - time passes
                await asyncio.sleep(0.1)
        steer = await submit_through_store(store, instruction(run_id, "late", "late-1"))
        assert steer.status == "rejected" and "no heartbeat since" in (steer.reason or "")
        assert {c.command.correlation_id for c in await store.open_commands()} == set(cids)

        receipt = await submit_through_store(store, cancel(run_id, "declare-dead"))
        assert receipt.status == "accepted" and receipt.run_id == run_id

        assert await store.open_commands() == []
        for cid in cids:
            stored = await store.get_command(cid, scope="tenant:acme")
            assert stored is not None and stored.state == "failed", stored
            assert "target finished before delivery" in (stored.reason or "")
            assert "no heartbeat since" in (stored.reason or "")
        logged = await store.get_command("declare-dead", scope="tenant:acme")
        assert logged is not None and logged.state == "applied"
        snapshot = await store.load_run(run_id)
        assert snapshot is not None and snapshot["status"] == "cancelled"
        assert not snapshot.get("owner") and not owner_silent(snapshot)
        events = await store.load_events(type_prefix="steering.")
        for cid in [*cids, "declare-dead"]:
            terminal = [
                e.type
                for e in events
                if getattr(e, "correlation_id", None) == cid
                and e.type in ("steering.applied", "steering.failed", "steering.rejected")
            ]
            assert terminal == (
                ["steering.applied"] if cid == "declare-dead" else ["steering.failed"]
            )

        # the next runtime on the store waits for none of them; the run takes nothing more
        async with Runtime(store=store_url) as rt:
            assert rt.open_commands() == []
        again = await submit_through_store(store, instruction(run_id, "after", "after-1"))
        assert again.status == "rejected" and "target finished" in (again.reason or "")
        retried = await submit_through_store(store, cancel(run_id, "declare-dead"))
        assert retried.status == "duplicate"
        assert retried.run_id == run_id  # as the first's receipt named it
    finally:
        await store.close()


def silent_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    """An owner is taken for gone after 0.5 s without a heartbeat, not 30 s: only once the
    test's owner process is killed. A live owner beats every ``HEARTBEAT_S`` (1 s), so its
    paused run's snapshot is up to 1 s old: a command sent to it then waited the listing wait
    (1.1 s) for the next beat, and an owner that beat 0.6 s late on a loaded machine was
    refused "no heartbeat since" though it was alive."""
    monkeypatch.setattr(remote, "OWNER_SILENT_S", 0.5)


async def killed_with_open_commands(
    owner: Owner, store: Any, cids: list[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    """The run of ``owner`` paused, ``cids`` queued on it, its process killed and silent."""
    async with owner:
        await store.open()
        run_id = owner.run_id
        pause = SteeringCommand(
            target=SteeringTarget.agent_run(run_id), actor=OPS, kind=SteeringKind.PAUSE
        )
        assert (await submit_through_store(store, pause)).status == "accepted"
        async with asyncio.timeout(60):
            while (await store.load_run(run_id) or {}).get("status") != "paused":  # noqa: ASYNC110 - another process writes it
                await asyncio.sleep(0.05)
        for cid in cids:
            receipt = await submit_through_store(store, instruction(run_id, cid, cid))
            assert receipt.status == "accepted"
        assert owner.proc is not None
        owner.proc.kill()
        await owner.proc.wait()
    silent_soon(monkeypatch)
    async with asyncio.timeout(60):
        while not owner_silent(await store.load_run(run_id) or {}):  # noqa: ASYNC110 - time passes
            await asyncio.sleep(0.1)
    return run_id


async def terminal_events(store: Any, cids: list[str]) -> dict[str, list[str]]:
    events = await store.load_events(type_prefix="steering.")
    ends = ("steering.applied", "steering.failed", "steering.rejected", "steering.superseded")
    return {
        cid: [
            e.type for e in events if getattr(e, "correlation_id", None) == cid and e.type in ends
        ]
        for cid in cids
    }


async def test_two_operators_cancelling_a_dead_run_at_once_settle_it_once(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two API workers that take a cancel of the same dead run at the same moment: one
    declares it dead, the other is refused; every command keeps one terminal state."""
    owner = Owner(tmp_path)
    owner.url = store_url
    store, other = open_store(store_url), open_store(store_url)
    await other.open()
    cids = [f"ghost-{i}" for i in range(3)]
    try:
        run_id = await killed_with_open_commands(owner, store, cids, monkeypatch)
        first, second = await asyncio.gather(
            submit_through_store(store, cancel(run_id, "dead-1")),
            submit_through_store(other, cancel(run_id, "dead-2")),
        )
        assert sorted([first.status, second.status]) == ["accepted", "rejected"], (first, second)
        winner, loser = ("dead-1", second) if first.status == "accepted" else ("dead-2", first)
        assert "cancelled" in (loser.reason or ""), loser

        ends = await terminal_events(store, [*cids, "dead-1", "dead-2"])
        assert ends == {
            **{cid: ["steering.failed"] for cid in cids},
            winner: ["steering.applied"],
            loser.correlation_id: [],
        }
        snapshot = await store.load_run(run_id)
        assert snapshot is not None and snapshot["status"] == "cancelled"
        assert await store.open_commands() == []
        # the one refused is not in the log: sent again, it is answered as the run is now
        again = await submit_through_store(other, cancel(run_id, loser.correlation_id))
        assert again.status == "rejected" and "target finished" in (again.reason or "")
    finally:
        await store.close()
        await other.close()


async def test_a_declaration_that_failed_midway_is_taken_over_by_the_next_cancel(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store fails while a cancel settles a dead run (after it claimed the run): a cancel
    sent later, once the claim is stale, settles the run and the first cancel with it."""
    owner = Owner(tmp_path)
    owner.url = store_url
    store = open_store(store_url)
    cids = [f"ghost-{i}" for i in range(2)]
    try:
        run_id = await killed_with_open_commands(owner, store, cids, monkeypatch)
        append_events = store.append_events

        async def fails(events: Any) -> None:
            raise StoreError("PostgreSQL: could not append: connection lost")

        monkeypatch.setattr(store, "append_events", fails)
        with pytest.raises(StoreError):
            await submit_through_store(store, cancel(run_id, "dead-1"))
        monkeypatch.setattr(store, "append_events", append_events)
        busy = await submit_through_store(store, cancel(run_id, "dead-2"))
        assert busy.status == "rejected" and "being cancelled" in (busy.reason or ""), busy

        monkeypatch.setattr(dead, "CLAIM_STALE_S", 0.0)
        taken = await submit_through_store(store, cancel(run_id, "dead-3"))
        assert taken.status == "accepted", taken
        assert await terminal_events(store, [*cids, "dead-1", "dead-2", "dead-3"]) == {
            **{cid: ["steering.failed"] for cid in [*cids, "dead-1"]},
            "dead-2": [],
            "dead-3": ["steering.applied"],
        }
        snapshot = await store.load_run(run_id)
        assert snapshot is not None and snapshot["status"] == "cancelled"
        assert await store.open_commands() == []
    finally:
        await store.close()


async def test_a_cancel_sent_again_after_its_declaration_stopped_midway_settles_the_run(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel declaring a dead run was logged and then its reply lost (the store failed
    right after): sent again under its correlation id, as an operator or an HTTP client
    retrying does, it was answered ``duplicate`` for ever, while the run stayed unfinished
    and its commands open, the cancel's own among them. Once its claim is stale, the cancel
    sent again settles the run itself."""
    owner = Owner(tmp_path)
    owner.url = store_url
    store = open_store(store_url)
    cids = [f"ghost-{i}" for i in range(2)]
    try:
        run_id = await killed_with_open_commands(owner, store, cids, monkeypatch)
        append_command = store.append_command

        async def reply_lost(cmd: SteeringCommand, **kw: Any) -> bool:
            logged = await append_command(cmd, **kw)
            if cmd.correlation_id == "dead-1":
                raise StoreError("PostgreSQL: could not log command: connection lost")
            return bool(logged)

        monkeypatch.setattr(store, "append_command", reply_lost)
        with pytest.raises(StoreError):
            await submit_through_store(store, cancel(run_id, "dead-1"))
        monkeypatch.setattr(store, "append_command", append_command)
        # its claim is young: the first declaration may still be under way
        under_way = await submit_through_store(store, cancel(run_id, "dead-1"))
        assert under_way.status == "duplicate", under_way
        assert under_way.run_id == run_id

        monkeypatch.setattr(dead, "CLAIM_STALE_S", 0.0)
        again = await submit_through_store(store, cancel(run_id, "dead-1"))
        assert again.status == "accepted", again
        assert await terminal_events(store, [*cids, "dead-1"]) == {
            **{cid: ["steering.failed"] for cid in cids},
            "dead-1": ["steering.applied"],
        }
        story = await store.load_events(run_id=run_id, type_prefix="steering.")
        assert [e.type for e in story if getattr(e, "correlation_id", None) == "dead-1"] == [
            "steering.requested",
            "steering.accepted",
            "steering.applied",
        ]
        snapshot = await store.load_run(run_id)
        assert snapshot is not None and snapshot["status"] == "cancelled"
        assert await store.open_commands() == []
        done = await submit_through_store(store, cancel(run_id, "dead-1"))
        assert done.status == "duplicate", done
        assert done.run_id == run_id
    finally:
        await store.close()


async def test_a_killed_run_started_again_under_its_id_applies_each_accepted_command_once(
    store_url: str, tmp_path: Path
) -> None:
    owner = Owner(tmp_path)
    owner.url = store_url
    store = open_store(store_url)
    async with owner:
        await store.open()
        run_id = owner.run_id
        pause = SteeringCommand(
            target=SteeringTarget.agent_run(run_id), actor=OPS, kind=SteeringKind.PAUSE
        )
        assert (await submit_through_store(store, pause)).status == "accepted"
        async with asyncio.timeout(60):
            while (await store.load_run(run_id) or {}).get("status") != "paused":  # noqa: ASYNC110 - another process writes it
                await asyncio.sleep(0.05)
        texts = {"ghost-0": "note a", "ghost-1": "note b", "ghost-2": "finish"}
        for cid, text in texts.items():
            receipt = await submit_through_store(store, instruction(run_id, text, cid))
            assert receipt.status == "accepted"
        assert owner.proc is not None
        owner.proc.kill()
        await owner.proc.wait()
    try:
        async with Runtime(store=store_url) as rt:
            handle = await rt.start(slow_agent(), "again", tenant_id="acme", run_id=run_id)
            # the operator's pause held it when its process was killed: it comes back paused
            assert handle.status == "paused"
            await handle.resume(actor=OPS)
            result = await handle.result()
            assert result.status == "completed", result
        assert await store.open_commands() == []
        events = await store.load_events(type_prefix="steering.applied")
        applied = [getattr(e, "correlation_id", None) for e in events]
        assert sorted(c for c in applied if c in texts) == sorted(texts)
    finally:
        await store.close()


async def test_a_cancel_without_the_control_scope_declares_nothing(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = Owner(tmp_path)
    owner.url = store_url
    store = open_store(store_url)
    async with owner:
        await store.open()
        assert owner.proc is not None
        owner.proc.kill()
        await owner.proc.wait()
    silent_soon(monkeypatch)
    try:
        run_id = owner.run_id
        async with asyncio.timeout(60):
            while not owner_silent(await store.load_run(run_id) or {}):  # noqa: ASYNC110 - time passes
                await asyncio.sleep(0.1)
        observer = SteeringActor.human("obs", tenant_id="acme", scopes=["agent:observe"])
        refused = await submit_through_store(store, cancel(run_id, "c-obs", observer))
        assert refused.status == "rejected" and "agent:control" in (refused.reason or "")
        stranger = SteeringActor.human("gus", tenant_id="globex", scopes=["agent:control"])
        hidden = await submit_through_store(
            store, cancel(run_id, "c-globex", stranger), listing_wait_s=0
        )
        assert hidden.status == "rejected" and "not found" in (hidden.reason or "")
        snapshot = await store.load_run(run_id)
        assert snapshot is not None and snapshot["status"] == "running"
        assert await store.get_command("c-obs", scope="tenant:acme") is None
    finally:
        await store.close()


async def test_a_declared_dead_runs_steering_events_tell_each_commands_whole_story(
    tmp_path: Path,
) -> None:
    """The declaring cancel was logged ``accepted`` then ``applied`` with no ``requested``
    (every other command's history starts there), and none of the events written for the
    dead run carried its command's payload summary."""
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    await store.open()
    try:
        snapshot = {
            "run_id": "r-dead",
            "root_run_id": "r-dead",
            "parent_run_id": None,
            "tenant_id": "acme",
            "status": "running",
            "owner": "rt-gone",
            "updated_at": "2026-01-01T00:00:00+00:00",
            "created_at": "2026-01-01T00:00:00+00:00",
        }
        await store.save_runs([snapshot])
        ghost = instruction("r-dead", "note the api_key", "ghost")
        assert await store.append_command(ghost, state="accepted", run_id="r-dead")
        declare = cancel("r-dead", "declare-dead").model_copy(
            update={"payload": {"reason": "hung"}}
        )
        receipt = await dead.settle_dead_run(store, declare, snapshot)
        assert receipt.status == "accepted"
        events = [
            e for e in await store.load_events(type_prefix="steering.") if e.run_id == "r-dead"
        ]
        story = {
            cid: [(e.type, e.payload_summary) for e in events if e.correlation_id == cid]
            for cid in ("ghost", "declare-dead")
        }
        assert story == {
            "ghost": [("steering.failed", {"text": "note the api_key"})],
            "declare-dead": [
                ("steering.requested", {"reason": "hung"}),
                ("steering.accepted", {"reason": "hung"}),
                ("steering.applied", {"reason": "hung"}),
            ],
        }
    finally:
        await store.close()


async def test_a_declaration_never_overwrites_a_run_started_again_meanwhile(
    store_url: str,
) -> None:
    """A cancel reads the run's row (its owner silent), and before it settles the run another
    runtime starts the run again under its id: the declaration saved its ``cancelled``
    snapshots unconditionally, over the new owner's row (which its next save then refused:
    the live run was stopped, its row left cancelled). It settles only the incarnation it
    read: the run's row no longer names that owner, so the cancel is refused, naming the new
    owner, with nothing logged (sent again, it reaches the run there); the row stays."""
    gate, again = Gate("hold"), Gate("hold")
    agent = fake_agent("clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("done")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        await first.start(agent, "work", run_id="job-d", tenant_id="acme")
        await gate.entered.wait()
        row = await second.store.load_run("job-d")
        assert row is not None
        stale = datetime.now(UTC) - timedelta(seconds=45)
        read = {**row, "updated_at": stale.isoformat()}  # what the declarer read
        read.pop("silence_s", None)
        new = fake_agent("clerk", tools=[again.tool()], script=[tool_call("hold"), reply("ok")])
        taken = await take_over(first, second, new, "job-d")
        receipt = await dead.settle_dead_run(second.store, cancel("job-d", "c-late"), read)
        assert receipt.status == "rejected", receipt
        assert second.runtime_id in (receipt.reason or "")
        assert await second.store.get_command("c-late", scope=dedupe_scope(OPS)) is None
        now = await second.store.load_run("job-d")
        assert now is not None
        assert (now["owner"], now["status"]) == (second.runtime_id, "running")
        await again.entered.wait()
        again.open()
        assert (await taken.result()).status == "completed"


async def test_an_owner_that_comes_back_after_its_run_was_declared_dead_stops_it(
    store_url: str,
) -> None:
    """An owner cut off from the store long enough for an operator to declare its run dead,
    which then goes on: it ran the run on (tools, steering, a second terminal event for
    commands the declaration had failed). Its next save finds the row no longer its own and
    stops the run there; the row stays ``cancelled`` as the declaration left it."""
    gate = Gate("hold")
    model = ScriptedModel([tool_call("hold"), reply("done")])
    async with Runtime(store_url) as first:
        held = await first.start(
            Agent("clerk", model, tools=[gate.tool()]), "work", run_id="job-e", tenant_id="acme"
        )
        await gate.entered.wait()
        for _ in range(100):  # its own heartbeat may land between the write and the cancel
            row = await first.store.load_run("job-e")
            assert row is not None
            stale = datetime.now(UTC) - timedelta(seconds=45)
            read = {**row, "updated_at": stale.isoformat()}
            read.pop("silence_s", None)
            await first.store.save_runs([read])
            receipt = await dead.settle_dead_run(first.store, cancel("job-e", "c-dead"), read)
            if receipt.status == "accepted":
                break
        else:
            pytest.fail("the run was never declared dead")
        await first.write_live_snapshots(heartbeat=True)
        refused = await held.steer("go on", check=False)
        assert refused.status == "rejected" and "declared dead" in (refused.reason or "")
        ended = await held.result()
        assert ended.status == "cancelled"
        assert "declared dead" in (ended.error or "")
        assert gate.cancelled and len(model.requests) == 1
        await first.flush()
    store = open_store(store_url)
    await store.open()
    try:
        kept = await store.load_run("job-e")
        assert kept is not None and (kept["owner"], kept["status"]) == (None, "cancelled")
    finally:
        await store.close()


async def test_a_declaration_refuses_a_run_whose_owner_was_heard_from_since(
    store_url: str,
) -> None:
    """The owner read silent writes its heartbeat again before the cancel settles the run (its
    loop stalled, its store was cut off for a while): it is not gone, and the declaration
    cancelled its live run all the same. It is refused instead, and the run goes on."""
    gate = Gate("hold")
    agent = fake_agent("clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("done")])
    async with Runtime(store_url) as first:
        held = await first.start(agent, "work", run_id="job-f", tenant_id="acme")
        await gate.entered.wait()
        row = await first.store.load_run("job-f")
        assert row is not None
        stale = datetime.now(UTC) - timedelta(seconds=45)
        read = {**row, "updated_at": stale.isoformat()}  # read before its latest heartbeat
        read.pop("silence_s", None)
        receipt = await dead.settle_dead_run(first.store, cancel("job-f", "c-back"), read)
        assert receipt.status == "rejected", receipt
        assert "it is not gone" in (receipt.reason or "")
        now = await first.store.load_run("job-f")
        assert now is not None and (now["owner"], now["status"]) == (first.runtime_id, "running")
        gate.open()
        assert (await held.result()).status == "completed"


async def test_a_run_started_again_while_its_declaration_settles_keeps_its_new_row(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run is started again in another runtime after the declaration found it unchanged,
    while it settles the dead incarnation's commands: the ``cancelled`` snapshot is saved only
    where the row still names the dead owner, so the new owner's row stays; the cancel, applied
    to the dead incarnation, says the run goes on there."""
    gate, again = Gate("hold"), Gate("hold")
    agent = fake_agent("clerk", tools=[gate.tool()], script=[tool_call("hold"), reply("done")])
    async with Runtime(store_url) as first, Runtime(store_url) as second:
        await first.start(agent, "work", run_id="job-g", tenant_id="acme")
        await gate.entered.wait()
        append_events = second.store.append_events
        taken: list[Any] = []

        async def started_meanwhile(events: list[Any]) -> None:
            await append_events(events)
            if not taken:  # the declaration's one write of its events
                new = fake_agent(
                    "clerk", tools=[again.tool()], script=[tool_call("hold"), reply("ok")]
                )
                taken.append(await take_over(first, second, new, "job-g"))

        monkeypatch.setattr(second.store, "append_events", started_meanwhile)
        for _ in range(100):  # first's own heartbeat may land between the write and the cancel
            row = await second.store.load_run("job-g")
            assert row is not None
            stale = datetime.now(UTC) - timedelta(seconds=45)
            read = {**row, "updated_at": stale.isoformat()}
            read.pop("silence_s", None)
            await second.store.save_runs([read])
            receipt = await dead.settle_dead_run(second.store, cancel("job-g", "c-mid"), read)
            if receipt.status == "accepted":
                break
        else:
            pytest.fail("the run was never declared dead")
        assert "goes on there" in (receipt.reason or "")
        now = await second.store.load_run("job-g")
        assert now is not None
        assert (now["owner"], now["status"]) == (second.runtime_id, "running")
        await again.entered.wait()
        again.open()
        assert (await taken[0].result()).status == "completed"
