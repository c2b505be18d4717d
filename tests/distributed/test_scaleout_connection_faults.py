"""Fault probes of the scale-out path with real worker processes (tests/distributed/worker.py):
a steering command submitted on one worker for a run another owns reaches exactly one terminal
state, is never applied twice, and its sender is told the truth, while the connections under
it are cut. Redis connections are ended by ``CLIENT KILL`` (Redis itself stays up, its streams
and consumer groups kept); PostgreSQL ones by ``pg_terminate_backend``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import CuttingProxy, WorkerProcess, eventually
from worker import slow_agent

from tinyagents import Runtime, SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.distributed import RedisControl

OPERATOR = SteeringActor.human("olga", tenant_id="acme", scopes=["agent:control"])
TERMINAL = ("steering.applied", "steering.failed", "steering.rejected", "steering.superseded")


def command(run_id: str, kind: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    return dict(
        SteeringCommand(
            target=SteeringTarget.agent_run(run_id),
            actor=OPERATOR,
            kind=SteeringKind(kind),
            payload=payload or {},
        ).model_dump(mode="json")
    )


def terminal_counts(history: list[dict[str, Any]], cid: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in history:
        if event["correlation_id"] == cid and event["type"] in TERMINAL:
            counts[event["type"]] = counts.get(event["type"], 0) + 1
    return counts


async def listed(worker: WorkerProcess, run_id: str) -> None:
    await eventually(
        lambda: worker.call("list", tenant="acme"),
        lambda runs: any(r["run_id"] == run_id for r in runs),
    )


async def kill_redis_clients(redis_url: str, names: set[str]) -> int:
    """``CLIENT KILL`` every connection of the shared Redis named one of ``names`` (a
    ``RedisControl`` names its connections ``tinyagents:<prefix>:<worker id>``)."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(redis_url)
    killed = 0
    try:
        for entry in await client.client_list():
            if entry.get("name") in names:
                with contextlib.suppress(Exception):  # gone meanwhile
                    killed += int(await client.client_kill_filter(_id=entry["id"]))
    finally:
        await client.aclose()
    return killed


@contextlib.asynccontextmanager
async def cutting(cut: Callable[[], Awaitable[int]]) -> AsyncIterator[list[int]]:
    """Call ``cut`` over and over (a short pause between) until the block ends; yields the
    running count of connections ended."""
    total = [0]
    stop = asyncio.Event()

    async def loop() -> None:
        while not stop.is_set():
            total[0] += await cut()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.15)

    task = asyncio.create_task(loop())
    try:
        yield total
    finally:
        stop.set()
        await task


async def burst_and_check(
    owner: WorkerProcess,
    sender: WorkerProcess,
    run_id: str,
    cut: Callable[[], Awaitable[int]],
    *,
    n: int = 30,
) -> None:
    """Pause ``run_id`` (owned by ``owner``) from ``sender``, send ``n`` instructions from
    ``sender`` while ``cut`` ends connections, then resume it and let it finish: every command
    the sender was told ``accepted`` is applied once, none is applied twice, and none told
    anything else is applied."""
    pause = await sender.call("submit", command=command(run_id, "pause"))
    assert pause["status"] == "accepted", pause
    await eventually(lambda: owner.call("status", run_id=run_id), lambda s: s == "paused")

    steers = [command(run_id, "add_instruction", {"text": f"s{i}"}) for i in range(n)]
    async with cutting(cut) as cuts:
        answers = []
        for steer in steers:  # one after the other: each send meets the cuts at another point
            answers.append(await sender.call_raw("submit", command=steer, wait_s=120))
        assert cuts[0] >= 1  # the probe did end connections while commands were in flight
    # the operator is told the truth: with Redis up, every send gets its receipt in the end
    wrong = [a for a in answers if a.get("ok", {}).get("status") != "accepted"]
    assert not wrong, wrong

    resume = await eventually(
        lambda: sender.call_raw("submit", command=command(run_id, "resume")),
        lambda answer: "ok" in answer,
    )
    assert resume["ok"]["status"] == "accepted", resume
    assert await owner.call("wait", run_id=run_id, wait_s=120) == "completed"
    history = await owner.call("history", run_id=run_id)
    for steer in steers:
        counts = terminal_counts(history, steer["correlation_id"])
        assert counts == {"steering.applied": 1}, (steer["payload"], counts)


@pytest.mark.slow
@pytest.mark.parametrize("whose", ["owner", "sender", "both"])
async def test_redis_connections_killed_mid_burst_lose_and_double_no_command(
    redis_url: str, prefix: str, workers: Any, whose: str
) -> None:
    """``CLIENT KILL`` of the owner's connections (its blocking stream read, its receipts),
    the sender's (its appends, its reply read) or both, again and again while the sender
    sends a burst of commands for the owner's run: each connection is made again, and every
    command gets one receipt and is applied once."""
    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    run_id = await a.call("start", run_id="run-ck", tenant="acme", turns=40, tick_s=0.02)
    await listed(b, run_id)
    names = {
        "owner": {f"tinyagents:{prefix}:a"},
        "sender": {f"tinyagents:{prefix}:b"},
        "both": {f"tinyagents:{prefix}:a", f"tinyagents:{prefix}:b"},
    }[whose]
    await burst_and_check(a, b, run_id, lambda: kill_redis_clients(redis_url, names))
    for worker in (a, b):
        await eventually(lambda w=worker: w.call("connected"), lambda c: c is True)


def held_agent() -> Any:
    """An agent that stays running (held in a tool) until its runtime closes."""
    from tinyagents import Agent
    from tinyagents.testkit import Gate

    gate = Gate("hold")
    return Agent("holder", gate.model(), tools=[gate.tool()])


async def test_a_connection_dropped_as_the_sender_looks_the_run_up_does_not_fail_the_command(
    redis_url: str, prefix: str, cutting_proxy: CuttingProxy
) -> None:
    """The sender's connection is dropped once Redis has run its lookup of the run's owner
    (Redis itself up): ``submit`` raised ``ControlPlaneUnavailable`` ("could not read the run
    listing"), so one dropped connection failed the operator's command. The read is made
    again on a new connection; the command is sent, accepted and applied once."""
    async with Runtime() as sender_rt, Runtime() as owner_rt:
        async with (
            RedisControl(owner_rt, redis_url, worker_id="owner", prefix=prefix),
            RedisControl(sender_rt, cutting_proxy.url, worker_id="sender", prefix=prefix) as sender,
        ):
            handle = await owner_rt.start(held_agent(), "work", tenant_id="acme")
            await eventually(lambda: sender.get_run(handle.run_id), bool)
            steer = SteeringCommand.model_validate(
                command(handle.run_id, "add_instruction", {"text": "x"})
            )
            cutting_proxy.lose_reply_to(b"HGET")  # the lookup of the run in the listing
            receipt = await sender.submit(steer)
            assert cutting_proxy.cut == 1
            assert receipt.status == "accepted", receipt
            history = await owner_rt.load_steering_history(handle.run_id)
            mine = [e.type for e in history if e.correlation_id == steer.correlation_id]
            assert mine == ["steering.requested", "steering.accepted"]


async def test_a_connection_dropped_as_a_worker_lists_the_runs_leaves_no_run_out(
    redis_url: str, prefix: str, cutting_proxy: CuttingProxy
) -> None:
    """The lister's connection is dropped once Redis has run its read of the other workers'
    runs: the listing showed this worker's runs only, the other worker's live run missing
    from the operator's view as if it did not exist. It is read again on a new connection."""
    async with Runtime() as lister_rt, Runtime() as owner_rt:
        async with (
            RedisControl(owner_rt, redis_url, worker_id="owner", prefix=prefix),
            RedisControl(lister_rt, cutting_proxy.url, worker_id="lister", prefix=prefix) as lister,
        ):
            handle = await owner_rt.start(held_agent(), "work", tenant_id="acme")
            await eventually(lambda: lister.get_run(handle.run_id), bool)
            cutting_proxy.lose_reply_to(b"HVALS")
            runs = await lister.list_runs("acme")
            assert cutting_proxy.cut == 1
            assert [r["run_id"] for r in runs] == [handle.run_id]


@pytest.fixture
async def pg_store() -> AsyncIterator[tuple[str, str]]:
    """A PostgreSQL store URL of the test's own schema whose connections carry an
    ``application_name`` of their own (what ``pg_terminate_backend`` picks them by), and that
    name."""
    import uuid

    from services import drop_pg_schemas, pg_schema, postgres_dsn

    dsn = postgres_dsn()
    app = f"ta-fault-{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in dsn else "?"
    yield f"{dsn}{sep}schema={pg_schema()}&application_name={app}", app
    await drop_pg_schemas()


async def terminate_pg_backends(app: str) -> int:
    """``pg_terminate_backend`` every connection whose ``application_name`` is ``app``."""
    import asyncpg
    from services import postgres_dsn

    conn = await asyncpg.connect(postgres_dsn())
    try:
        rows = await conn.fetch(
            "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity"
            " WHERE application_name = $1 AND pid <> pg_backend_pid()",
            app,
        )
    finally:
        await conn.close()
    return sum(1 for row in rows if row["ended"])


@pytest.mark.slow
async def test_postgres_connections_terminated_mid_burst_lose_and_double_no_command(
    redis_url: str, prefix: str, workers: Any, pg_store: tuple[str, str], tmp_path: Path
) -> None:
    """Two workers on one PostgreSQL store (``serve --store ... --redis``): the server ends
    every connection of theirs again and again while the owner saves its run's snapshots and
    logs the commands sent from the other worker. Every command is accepted and applied
    once, the run completes, and the store shows it completed."""
    url, app = pg_store
    a = await workers("a", redis_url, prefix, extra=["--store", url])
    b = await workers("b", redis_url, prefix, extra=["--store", url])
    run_id = await a.call("start", run_id="run-pg", tenant="acme", turns=40, tick_s=0.02)
    await listed(b, run_id)
    await burst_and_check(a, b, run_id, lambda: terminate_pg_backends(app))
    # the operator's view from the other worker, through the shared store, is the truth
    await b.call("flush")
    await a.call("flush")
    stored = await eventually(
        lambda: b.call("stored_status", run_id=run_id), lambda s: s == "completed"
    )
    assert stored == "completed"


async def test_an_envelope_delivered_twice_is_applied_once_and_its_sender_told_accepted(
    redis_url: str, prefix: str
) -> None:
    """One command's envelope is in its owner's stream twice (as a replayed or duplicated
    append would leave it, past the ``sent`` mark): the owner applies it once, and the
    sender's receipt is the first one, ``accepted``, not the ``duplicate`` of the copy."""
    import redis.asyncio as aioredis

    async with Runtime() as sender_rt, Runtime() as owner_rt:
        async with (
            RedisControl(owner_rt, redis_url, worker_id="owner", prefix=prefix),
            RedisControl(sender_rt, redis_url, worker_id="sender", prefix=prefix) as sender,
        ):
            handle = await owner_rt.start(slow_agent(200, 0.02), "work", tenant_id="acme")
            await eventually(lambda: sender.get_run(handle.run_id), bool)
            append = sender._append
            raw = aioredis.from_url(redis_url)

            async def twice(owner: str, request_id: str, envelope: dict[str, str]) -> Any:
                added = await append(owner, request_id, envelope)
                await raw.xadd(sender.keys.commands(owner), dict(envelope))  # type: ignore[arg-type]
                return added

            sender._append = twice  # type: ignore[method-assign]
            stream = sender.keys.commands("owner")
            try:
                steer = SteeringCommand.model_validate(
                    command(handle.run_id, "add_instruction", {"text": "x"})
                )
                receipt = await sender.submit(steer)
                assert receipt.status == "accepted", receipt
                # both copies answered: an answered entry leaves the stream
                await eventually(lambda: raw.xlen(stream), lambda n: n == 0)
            finally:
                await raw.aclose()
            assert (await handle.result()).status.value == "completed"
            history = await owner_rt.load_steering_history(handle.run_id)
            mine = [e.type for e in history if e.correlation_id == steer.correlation_id]
            assert [t for t in mine if t in TERMINAL] == ["steering.applied"], mine
            assert mine.count("steering.accepted") == 1, mine


@pytest.mark.slow
async def test_commands_sent_while_the_owner_restarts_are_each_told_the_truth(
    redis_url: str, prefix: str, workers: Any
) -> None:
    """The owner is SIGKILLed with its run paused, and the sender sends a burst of commands
    for that run while the owner's process is down and as it comes back under its id (its
    listing still there: its heartbeat has not expired). Whatever each sender is told, it is
    true: ``accepted`` ones are applied once after the run is started again, ``rejected``
    ones never, one in doubt (``ReceiptTimeout``) at most once, and none twice."""
    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    run_id = await a.call("start", run_id="run-rs", tenant="acme", turns=40, tick_s=0.02)
    await listed(b, run_id)
    assert (await b.call("submit", command=command(run_id, "pause")))["status"] == "accepted"
    await eventually(lambda: a.call("status", run_id=run_id), lambda s: s == "paused")
    await a.kill()

    steers = [command(run_id, "add_instruction", {"text": f"r{i}"}) for i in range(12)]
    sent = []
    for steer in steers[:6]:  # the owner down
        sent.append(asyncio.create_task(b.call_raw("submit", command=steer, wait_s=120)))
    restarted = await workers("a", redis_url, prefix)  # same worker id and SQLite file
    for steer in steers[6:]:  # the owner back, its run not started again yet
        sent.append(asyncio.create_task(b.call_raw("submit", command=steer, wait_s=120)))
    await restarted.call("start", run_id=run_id, tenant="acme", turns=5, tick_s=0.01)
    answers = await asyncio.gather(*sent)
    assert await restarted.call("status", run_id=run_id) == "paused"
    resume = await eventually(
        lambda: b.call_raw("submit", command=command(run_id, "resume")),
        lambda answer: answer.get("ok", {}).get("status") == "accepted",
    )
    assert resume["ok"]["status"] == "accepted"
    assert await restarted.call("wait", run_id=run_id, wait_s=120) == "completed"
    history = await restarted.call("history", run_id=run_id)
    for steer, answer in zip(steers, answers, strict=True):
        counts = terminal_counts(history, steer["correlation_id"])
        told = answer["ok"]["status"] if "ok" in answer else answer["type"]
        if told == "accepted":
            assert counts == {"steering.applied": 1}, (steer["payload"], told, counts)
        elif told in ("rejected", "ControlPlaneUnavailable"):
            assert "steering.applied" not in counts, (steer["payload"], answer, counts)
        else:
            assert told == "ReceiptTimeout", answer
            assert counts.get("steering.applied", 0) <= 1, (steer["payload"], counts)


@pytest.mark.slow
async def test_two_workers_starting_a_killed_owners_run_at_once_run_it_once(
    redis_url: str, prefix: str, workers: Any, pg_store: tuple[str, str]
) -> None:
    """Three workers on one PostgreSQL store. The owner of a paused run is SIGKILLed; two
    others start the run again under its id at the same moment, round after round until one
    may: exactly one of each round's starts wins, and the loser's commands (sent over Redis)
    reach the winner, are applied once, and the run ends there."""
    url, _app = pg_store
    extra = ["--store", url]
    a = await workers("a", redis_url, prefix, ttl_s=3.0, extra=extra)
    b = await workers("b", redis_url, prefix, extra=extra)
    c = await workers("c", redis_url, prefix, extra=extra)
    run_id = await a.call("start", run_id="run-2w", tenant="acme", turns=400, tick_s=0.02)
    await listed(b, run_id)
    assert (await b.call("submit", command=command(run_id, "pause")))["status"] == "accepted"
    await eventually(lambda: a.call("status", run_id=run_id), lambda s: s == "paused")
    await a.call("flush")
    await a.kill()

    async def both_start() -> list[dict[str, Any]]:
        return list(
            await asyncio.gather(
                *(
                    w.call_raw("start", run_id=run_id, tenant="acme", turns=5, tick_s=0.01)
                    for w in (b, c)
                )
            )
        )

    rounds = await eventually(both_start, lambda r: any("ok" in x for x in r), within=180)
    assert [("ok" in x) for x in rounds].count(True) == 1, rounds
    winner, loser = (b, c) if "ok" in rounds[0] else (c, b)
    assert "another runtime" in next(x["error"] for x in rounds if "error" in x), rounds
    assert await loser.call("status", run_id=run_id) is None

    assert await winner.call("status", run_id=run_id) == "paused"
    steer = command(run_id, "add_instruction", {"text": "after the takeover"})
    told = await eventually(
        lambda: loser.call_raw("submit", command=steer),
        lambda answer: "ok" in answer,
    )
    assert told["ok"]["status"] == "accepted", told
    resume = await loser.call("submit", command=command(run_id, "resume"))
    assert resume["status"] == "accepted", resume
    assert await winner.call("wait", run_id=run_id, wait_s=120) == "completed"
    history = await winner.call("history", run_id=run_id)
    assert terminal_counts(history, steer["correlation_id"]) == {"steering.applied": 1}
