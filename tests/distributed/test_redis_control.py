"""The Redis control plane against a real Redis: two workers in separate processes, each a
Runtime on its own SQLite file with a RedisControl (tests/distributed/worker.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CuttingProxy, RedisServer, WorkerError, WorkerProcess, eventually
from worker import slow_agent

from tinyagents import Runtime, SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.distributed import RedisControl
from tinyagents.distributed.wire import Keys
from tinyagents.errors import ConfigurationError, ControlPlaneUnavailable, ReceiptTimeout

OPERATOR = SteeringActor.human("olga", tenant_id="acme", scopes=["agent:control"])
GLOBEX = SteeringActor.human("gus", tenant_id="globex", scopes=["agent:control"])


def command(
    run_id: str, kind: str, payload: dict[str, Any] | None = None, *, actor: Any = OPERATOR
) -> SteeringCommand:
    if payload is None:
        payload = {"text": "focus on billing"} if kind == "add_instruction" else {}
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=actor,
        kind=SteeringKind(kind),
        payload=payload,
    )


def as_json(cmd: SteeringCommand) -> dict[str, Any]:
    return dict(cmd.model_dump(mode="json"))


def slow_agent_for_listing() -> Any:
    """An agent that stays running (held in a tool) until its runtime closes."""
    from tinyagents import Agent
    from tinyagents.testkit import Gate

    gate = Gate("hold")
    return Agent("holder", gate.model(), tools=[gate.tool()])


def terminal_counts(history: list[dict[str, Any]], cid: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in history:
        if event["correlation_id"] == cid and event["type"] in (
            "steering.applied",
            "steering.failed",
            "steering.rejected",
            "steering.superseded",
        ):
            counts[event["type"]] = counts.get(event["type"], 0) + 1
    return counts


async def listed(worker: WorkerProcess, run_id: str, tenant: str = "acme") -> dict[str, Any]:
    runs = await eventually(
        lambda: worker.call("list", tenant=tenant),
        lambda runs: any(r["run_id"] == run_id for r in runs),
    )
    return next(r for r in runs if r["run_id"] == run_id)


async def test_a_run_on_worker_a_is_listed_paused_steered_and_resumed_through_worker_b(
    redis_url: str, prefix: str, workers: Any
) -> None:
    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    run_id = await a.call("start", run_id="run-1", tenant="acme", turns=400, tick_s=0.02)

    seen = await listed(b, run_id)
    assert seen["worker"] == "a" and seen["status"] == "running"
    assert seen["usage"]["model_calls"] >= 0 and "updated_at" in seen
    assert all(r["run_id"] != run_id for r in await b.call("list", tenant="globex"))

    pause = await b.call("submit", command=as_json(command(run_id, "pause")))
    assert pause["status"] == "accepted", pause
    await eventually(lambda: a.call("status", run_id=run_id), lambda s: s == "paused")
    await eventually(lambda: listed(b, run_id), lambda r: r["status"] == "paused")
    # live counters: the mirror shows what the run did before it paused
    assert (await listed(b, run_id))["usage"]["tool_calls"] >= 1

    steer = await b.call("submit", command=as_json(command(run_id, "add_instruction")))
    resume = await b.call("submit", command=as_json(command(run_id, "resume")))
    cancel = await b.call("submit", command=as_json(command(run_id, "cancel")))
    assert [steer["status"], resume["status"], cancel["status"]] == ["accepted"] * 3

    assert await a.call("wait", run_id=run_id) == "cancelled"
    history = await a.call("history", run_id=run_id)
    for receipt in (pause, steer, resume, cancel):
        assert terminal_counts(history, receipt["correlation_id"]) == {"steering.applied": 1}
    await eventually(lambda: listed(b, run_id), lambda r: r["status"] == "cancelled")
    counters = await a.call("counters")
    assert counters["answered"] == 4 and counters["foreign"] == counters["malformed"] == 0
    assert (await b.call("counters"))["sent"] == 4


async def test_a_command_for_an_unknown_or_foreign_run_is_rejected_as_not_found(
    redis_url: str, prefix: str, workers: Any
) -> None:
    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    run_id = await a.call("start", run_id="run-2", tenant="acme", turns=400, tick_s=0.02)
    await listed(b, run_id)
    outsider = SteeringActor.human("eve", tenant_id="globex", scopes=["agent:control"])

    foreign = await b.call("submit", command=as_json(command(run_id, "cancel", actor=outsider)))
    missing = await b.call("submit", command=as_json(command("ghost", "cancel")))
    assert foreign["status"] == missing["status"] == "rejected"
    assert (
        foreign["reason"] == "not found: run run-2" and missing["reason"] == "not found: run ghost"
    )
    assert await a.call("status", run_id=run_id) == "running"


async def test_a_thread_command_reaches_the_senders_tenants_run_on_that_thread(
    redis_url: str, prefix: str, workers: Any
) -> None:
    # two tenants each have a live run on thread "t"; the lookup matched the thread alone, so
    # acme's command went to globex's worker (rejected: not found) or stayed with the
    # sender's own globex run (deferred there), and never reached acme's run
    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    c = await workers("c", redis_url, prefix)
    ours = await a.call("start", run_id="acme-t", tenant="acme", turns=400, tick_s=0.02, thread="t")
    await b.call("start", run_id="globex-t", tenant="globex", turns=400, tick_s=0.02, thread="t")
    await listed(c, ours)
    await listed(c, "globex-t", tenant="globex")

    def on_thread(kind: str) -> dict[str, Any]:
        cmd = SteeringCommand(
            target=SteeringTarget.thread("t"), actor=OPERATOR, kind=SteeringKind(kind), payload={}
        )
        return as_json(cmd)

    from_c = await c.call("submit", command=on_thread("pause"))
    from_b = await b.call("submit", command=on_thread("resume"))  # b holds globex's run on "t"
    assert (from_c["status"], from_b["status"]) == ("accepted", "accepted"), (from_c, from_b)
    assert from_c["run_id"] == from_b["run_id"] == ours
    for receipt in (from_c, from_b):  # applied by acme's run, on worker a
        await eventually(
            lambda: a.call("history", run_id=ours),
            lambda h, r=receipt: terminal_counts(h, r["correlation_id"]) == {"steering.applied": 1},
        )
    assert await b.call("status", run_id="globex-t") == "running"
    await a.call("submit", command=as_json(command(ours, "cancel")))
    await b.call("submit", command=as_json(command("globex-t", "cancel", actor=GLOBEX)))


async def test_directives_written_straight_into_redis_are_checked_by_the_owner(
    redis_url: str, prefix: str, workers: Any
) -> None:
    import redis.asyncio as aioredis

    a = await workers("a", redis_url, prefix)
    run_id = await a.call("start", run_id="run-3", tenant="acme", turns=400, tick_s=0.02)
    keys = Keys(prefix)
    outsider = SteeringActor.human("eve", tenant_id="globex", scopes=["agent:control"])
    cancel_as_outsider = command(run_id, "cancel", actor=outsider)
    cancel_as_test = command(run_id, "cancel", actor=SteeringActor.test())
    steer = command(run_id, "add_instruction")

    def envelope(cmd: SteeringCommand, request_id: str, to: str = "a") -> dict[str, str]:
        return {
            "v": "1",
            "request_id": request_id,
            "reply_to": "tester",
            "to": to,
            "command": cmd.model_dump_json(),
        }

    client = aioredis.from_url(redis_url)
    try:
        stream = keys.commands("a")
        await client.xadd(stream, envelope(cancel_as_outsider, "r-foreign"))
        await client.xadd(stream, envelope(cancel_as_test, "r-not-human"))
        await client.xadd(stream, envelope(steer, "r-elsewhere", to="b"))
        await client.xadd(
            stream,
            {
                "v": "1",
                "request_id": "r-bad",
                "reply_to": "tester",
                "to": "a",
                "command": '{"kind": "explode"}',
            },
        )
        await client.xadd(stream, {"garbage": "\xff"})
        # the same directive twice (two entries, one correlation id) applies once
        await client.xadd(stream, envelope(steer, "r-steer-1"))
        await client.xadd(stream, envelope(steer, "r-steer-2"))

        async def replies() -> dict[str, dict[str, Any]]:
            entries = await client.xrange(keys.replies("tester"))
            return {f[b"request_id"].decode(): json.loads(f[b"receipt"]) for _, f in entries}

        answers = await eventually(replies, lambda r: len(r) == 6)
        assert answers["r-foreign"]["status"] == "rejected"
        assert answers["r-foreign"]["reason"] == "not found: run run-3"
        assert answers["r-foreign"]["policy_id"] == "router"  # as an unknown run's receipt
        assert answers["r-not-human"]["status"] == "rejected"
        assert "human" in answers["r-not-human"]["reason"]
        assert answers["r-elsewhere"]["status"] == "rejected"
        assert answers["r-bad"]["status"] == "rejected"
        assert answers["r-bad"]["reason"].startswith("malformed command")
        assert answers["r-steer-1"]["status"] == "accepted"
        assert answers["r-steer-2"]["status"] == "duplicate"
        # every entry was acknowledged: nothing stays pending in the group
        pending = await client.xpending(stream, "owners")
        assert pending["pending"] == 0
    finally:
        await client.aclose()

    counters = await a.call("counters")
    assert counters["foreign"] == 3 and counters["malformed"] == 2
    assert await a.call("status", run_id=run_id) == "running"
    history = await a.call("history", run_id=run_id)
    assert terminal_counts(history, cancel_as_outsider.correlation_id) == {}
    await eventually(
        lambda: a.call("history", run_id=run_id),
        lambda h: terminal_counts(h, steer.correlation_id) == {"steering.applied": 1},
    )


async def test_duplicate_directives_through_another_worker_apply_once(
    redis_url: str, prefix: str, workers: Any
) -> None:
    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    c = await workers("c", redis_url, prefix)
    run_id = await a.call("start", run_id="run-4", tenant="acme", turns=400, tick_s=0.02)
    await listed(b, run_id)
    await listed(c, run_id)
    steer = as_json(command(run_id, "add_instruction"))

    receipts = await asyncio.gather(
        b.call("submit", command=steer),
        c.call("submit", command=steer),
        b.call("submit", command=steer),
        a.call("submit", command=steer),
    )
    statuses = sorted(r["status"] for r in receipts)
    assert statuses == ["accepted", "duplicate", "duplicate", "duplicate"]
    await eventually(
        lambda: a.call("history", run_id=run_id),
        lambda h: terminal_counts(h, steer["correlation_id"]) == {"steering.applied": 1},
    )


async def test_redis_down_runs_continue_local_control_works_and_it_comes_back(
    private_redis: RedisServer, prefix: str, workers: Any
) -> None:
    a = await workers("a", private_redis.url, prefix)
    b = await workers("b", private_redis.url, prefix)
    run_id = await a.call("start", run_id="run-5", tenant="acme", turns=400, tick_s=0.02)
    await listed(b, run_id)

    await private_redis.stop()
    await eventually(lambda: a.call("connected"), lambda c: c is False)
    usage_before = (await a.call("list", tenant="acme"))[0]["usage"]["tool_calls"]
    with pytest.raises(WorkerError) as failed:
        await b.call("submit", command=as_json(command(run_id, "pause")))
    assert failed.value.type == "ControlPlaneUnavailable"
    # the run goes on, and the worker that owns it still controls it
    await eventually(
        lambda: a.call("list", tenant="acme"),
        lambda runs: runs[0]["usage"]["tool_calls"] > usage_before,
    )
    local = await a.call("submit", command=as_json(command(run_id, "pause")))
    assert local["status"] == "accepted"
    await eventually(lambda: a.call("status", run_id=run_id), lambda s: s == "paused")

    await private_redis.start()  # empty: no persistence
    await eventually(lambda: a.call("connected"), lambda c: c is True)
    await listed(b, run_id)  # the mirror is written again
    resume = await eventually(
        lambda: b.call_raw("submit", command=as_json(command(run_id, "resume"))),
        lambda answer: "ok" in answer,
    )
    assert resume["ok"]["status"] == "accepted"
    cancel = await b.call("submit", command=as_json(command(run_id, "cancel")))
    assert cancel["status"] == "accepted"
    assert await a.call("wait", run_id=run_id) == "cancelled"
    assert (await a.call("counters"))["redis_errors"] >= 1


@pytest.mark.slow
async def test_a_killed_owner_applies_every_accepted_command_once_after_its_restart(
    redis_url: str, prefix: str, workers: Any
) -> None:
    a = await workers("a", redis_url, prefix, ttl_s=3.0)  # its listing's expiry is waited for
    b = await workers("b", redis_url, prefix)
    run_id = await a.call("start", run_id="run-6", tenant="acme", turns=400, tick_s=0.02)
    await listed(b, run_id)
    await b.call("submit", command=as_json(command(run_id, "pause")))
    await eventually(lambda: a.call("status", run_id=run_id), lambda s: s == "paused")

    steers = [as_json(command(run_id, "add_instruction", {"text": f"s{i}"})) for i in range(30)]
    sent = [asyncio.create_task(b.call_raw("submit", command=s)) for s in steers]
    await eventually(lambda: asyncio.sleep(0, sum(t.done() for t in sent)), lambda n: n >= 3)
    await a.kill()
    answers = await asyncio.gather(*sent)
    accepted = [
        a_["ok"]["correlation_id"] for a_ in answers if a_.get("ok", {}).get("status") == "accepted"
    ]
    assert accepted, answers
    assert all("ok" in x or x["type"] == "ReceiptTimeout" for x in answers), answers

    # the dead worker's runs leave the listing once its heartbeat expires
    await eventually(
        lambda: b.call("list", tenant="acme"), lambda runs: all(r["run_id"] != run_id for r in runs)
    )

    restarted = await workers("a", redis_url, prefix)  # same worker id and SQLite file
    await restarted.call("start", run_id=run_id, tenant="acme", turns=5, tick_s=0.01)
    # the operator's pause held it when its process died: it comes back paused
    assert await restarted.call("status", run_id=run_id) == "paused"
    await restarted.call("submit", command=as_json(command(run_id, "resume")))
    assert await restarted.call("wait", run_id=run_id) == "completed"
    history = await restarted.call("history", run_id=run_id)
    for cid in accepted:
        counts = terminal_counts(history, cid)
        assert counts in ({"steering.applied": 1}, {"steering.failed": 1}), (cid, counts)
    for steer in steers:  # nothing applied twice, accepted or not
        assert terminal_counts(history, steer["correlation_id"]).get("steering.applied", 0) <= 1


def test_without_a_url_it_is_a_no_op_and_never_imports_redis() -> None:
    code = (
        "import asyncio, sys\n"
        "from tinyagents import Runtime\n"
        "from tinyagents.distributed import RedisControl\n"
        "async def main():\n"
        "    async with Runtime() as rt:\n"
        "        rc = RedisControl(rt, None, worker_id='solo')\n"
        "        await rc.start()\n"
        "        assert await rc.list_runs('acme') == []\n"
        "        assert rc.connected and not rc.enabled\n"
        "        await rc.aclose()\n"
        "asyncio.run(main())\n"
        "assert 'redis' not in sys.modules, 'redis was imported'\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ({"ttl_s": 0}, "ttl_s"),
        ({"ttl_s": -1.0}, "ttl_s"),
        ({"ttl_s": float("nan")}, "ttl_s"),
        ({"ttl_s": "10"}, "ttl_s"),
        ({"ttl_s": 1.0, "heartbeat_s": 2.0}, "ttl_s"),  # off the listing between two beats
        ({"heartbeat_s": 0}, "heartbeat_s"),
        ({"heartbeat_s": float("inf")}, "heartbeat_s"),
        ({"throttle_s": -0.1}, "throttle_s"),
        ({"block_s": 0}, "block_s"),  # BLOCK 0 waits for ever
        ({"receipt_timeout_s": 0}, "receipt_timeout_s"),
        ({"backoff_s": (0, 0)}, "backoff_s"),
        ({"backoff_s": (5.0, 1.0)}, "backoff_s"),
        ({"backoff_s": 1.0}, "backoff_s"),
        ({"max_connections": 0}, "max_connections"),
        ({"max_connections": True}, "max_connections"),
        ({"max_unanswered": 0}, "max_unanswered"),
        ({"max_unanswered": 10.5}, "max_unanswered"),
        ({"worker_id": ""}, "worker_id"),
        ({"worker_id": "  "}, "worker_id"),
        ({"worker_id": "w" * 257}, "worker_id"),  # its commands would break the id rule
        ({"worker_id": "a\nb"}, "worker_id"),
        ({"prefix": ""}, "prefix"),
        ({"prefix": 5}, "prefix"),
    ],
)
async def test_settings_that_cannot_work_are_refused_when_it_is_made(
    redis_url: str, setting: dict[str, Any], named: str
) -> None:
    """A TTL of 0 or NaN, a zero block or backoff, a blank worker id...: each used to start,
    then retry Redis for ever, flap off the listing, or take another name, without a word."""
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match=named):
            RedisControl(rt, redis_url, **setting)
        with pytest.raises(ConfigurationError, match=named):  # refused without Redis too
            RedisControl(rt, None, **setting)


async def test_no_connection_outlives_aclose_even_across_a_redis_restart(
    private_redis: RedisServer, prefix: str
) -> None:
    import redis.asyncio as aioredis

    async def ours() -> int:
        client = aioredis.from_url(private_redis.url)
        try:
            clients = await client.client_list()
        finally:
            await client.aclose()
        return sum(1 for c in clients if c["name"].startswith(f"tinyagents:{prefix}:"))

    async with Runtime() as rt:
        control = RedisControl(
            rt,
            private_redis.url,
            worker_id="w",
            prefix=prefix,
            backoff_s=(0.05, 0.2),
            block_s=0.2,
            heartbeat_s=0.1,
        )
        await control.start()
        await eventually(ours, lambda n: n >= 2)
        await private_redis.stop()
        await eventually(lambda: asyncio.sleep(0, control.connected), lambda c: c is False)
        await private_redis.start()
        await eventually(lambda: asyncio.sleep(0, control.connected), lambda c: c is True)
        assert await ours() <= control.max_connections
        await control.aclose()
        assert await eventually(ours, lambda n: n == 0) == 0


async def test_a_worker_restarted_under_its_id_lists_only_its_own_runs(
    redis_url: str, prefix: str
) -> None:
    # a killed worker's runs stayed in its hash (shown as running, forever) when the next
    # process under the same worker id came up before the hash expired: it only added its own
    import redis.asyncio as aioredis

    keys = Keys(prefix)
    client = aioredis.from_url(redis_url)
    ghost = {"run_id": "ghost", "status": "running", "tenant_id": "acme", "worker": "w"}
    try:
        await client.hset(keys.runs("w"), "ghost", json.dumps(ghost))  # the dead process's
        async with Runtime() as rt, Runtime() as other_rt:
            await rt.start(slow_agent_for_listing(), "work", tenant_id="acme", run_id="alive")
            mine = RedisControl(rt, redis_url, worker_id="w", prefix=prefix, heartbeat_s=0.1)
            other = RedisControl(other_rt, redis_url, worker_id="o", prefix=prefix)
            await mine.start()
            await other.start()
            try:
                runs = await eventually(
                    lambda: other.list_runs("acme"),
                    lambda rs: any(r["run_id"] == "alive" for r in rs),
                )
                assert [r["run_id"] for r in runs] == ["alive"]
                assert set(await client.hkeys(keys.runs("w"))) == {b"alive"}
            finally:
                await other.aclose()
                await mine.aclose()
    finally:
        await client.delete(keys.runs("w"))
        await client.aclose()


async def test_a_gone_workers_command_stream_expires_an_hour_after_its_last_heartbeat(
    redis_url: str, prefix: str
) -> None:
    # the stream (and its consumer group) of a worker name that never came back stayed in
    # Redis for ever, with whatever commands were left in it: one more key per worker name
    import redis.asyncio as aioredis

    stream = Keys(prefix).commands("w")
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime() as rt:
            control = RedisControl(rt, redis_url, worker_id="w", prefix=prefix, heartbeat_s=0.1)
            await control.start()
            try:
                ttl = await eventually(lambda: client.ttl(stream), lambda t: t > 0)
                assert 3500 < ttl <= 3600  # renewed at every heartbeat while the worker lives
            finally:
                await control.aclose()
        # a graceful close answered everything in it and deleted it (a crashed worker's
        # stream keeps the TTL above, for its next process)
        assert await client.ttl(stream) == -2
    finally:
        await client.delete(stream)
        await client.aclose()


async def test_heartbeats_are_scored_by_redis_clock_not_the_workers(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a worker whose clock ran 20 s ahead scored its heartbeat (and pruned the others') by
    # it: it never saw the other workers' runs, and took them off the worker set every second
    import redis.asyncio as aioredis

    client = aioredis.from_url(redis_url)
    ahead = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: ahead)
    try:
        async with Runtime() as rt:
            control = RedisControl(rt, redis_url, worker_id="w", prefix=prefix, heartbeat_s=0.1)
            await control.start()
            try:
                score = await eventually(
                    lambda: client.zscore(Keys(prefix).workers, "w"), lambda s: s is not None
                )
                seconds, _ = await client.time()
                assert abs(score - seconds) < 60  # Redis's clock, not the worker's (an hour on)
            finally:
                await control.aclose()
    finally:
        await client.aclose()


async def test_aclose_ends_even_when_a_job_swallows_its_cancel(redis_url: str, prefix: str) -> None:
    # redis-py 8.1 can swallow a cancel that lands as a blocking read starts, and the job
    # reads on: aclose waited for it forever (a worker stopped then was killed, unclosed)
    async with Runtime() as rt:
        control = RedisControl(rt, redis_url, worker_id="w", prefix=prefix, block_s=0.2)
        await control.start()
        stop = asyncio.Event()

        async def stubborn() -> None:
            while not stop.is_set():
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:  # as redis-py did: swallowed once
                    stop.set()
                    await asyncio.sleep(3600)

        job = asyncio.create_task(stubborn())
        control._tasks.append(job)
        await asyncio.wait_for(control.aclose(), timeout=60)
        assert job.done()


async def test_a_restarted_owner_answers_from_its_log_not_not_found(
    redis_url: str, prefix: str, tmp_path: Any
) -> None:
    # the owner's earlier process accepted a command (logged it) and died before it answered:
    # the entry waits in the group's backlog. Read again before the run is back, it was
    # answered "rejected: not found" though it was then applied when the run came back. And
    # the same command sent again was refused the same way, not answered duplicate.
    import redis.asyncio as aioredis

    from tinyagents.distributed.wire import GROUP, Envelope
    from tinyagents.store import SqliteStore

    db = tmp_path / "owner.db"
    cmd = command("run-back", "add_instruction")
    store = SqliteStore(db)
    await store.open()
    await store.append_command(cmd, state="accepted", run_id="run-back")  # the dead process's
    await store.close()
    keys = Keys(prefix)
    stream = keys.commands("a")
    client = aioredis.from_url(redis_url)
    try:
        await client.xgroup_create(stream, GROUP, id="0", mkstream=True)
        first = Envelope(request_id="req-1", reply_to="tester", to="a", command=cmd)
        await client.xadd(stream, first.fields())
        await client.xreadgroup(GROUP, "a", {stream: ">"}, count=10)  # read, never answered
        async with Runtime(store=f"sqlite:///{db}") as rt:
            control = RedisControl(rt, redis_url, worker_id="a", prefix=prefix)
            await control.start()
            try:
                again = Envelope(request_id="req-2", reply_to="tester", to="a", command=cmd)
                await client.xadd(stream, again.fields())

                async def replies() -> dict[str, dict[str, Any]]:
                    entries = await client.xrange(keys.replies("tester"))
                    return {
                        f[b"request_id"].decode(): json.loads(f[b"receipt"]) for _, f in entries
                    }

                answers = await eventually(replies, lambda r: len(r) == 2)
                assert answers["req-1"]["status"] == "accepted", answers  # as it was then
                assert answers["req-1"]["run_id"] == "run-back"
                assert answers["req-2"]["status"] == "duplicate", answers  # sent again
                # naming the run the first went to, as its receipt did (it named none)
                assert answers["req-2"]["run_id"] == "run-back", answers
            finally:
                await control.aclose()
    finally:
        await client.aclose()


async def test_an_entry_read_again_gets_its_first_receipt_when_the_run_is_back_too(
    redis_url: str, prefix: str, tmp_path: Any
) -> None:
    # as above, but the run is back (started again under its id) when the restarted owner
    # reads its backlog: the entry was submitted again and answered "duplicate", as if its
    # sender had sent it twice, instead of the "accepted" it got the first time
    import redis.asyncio as aioredis

    from tinyagents.distributed.wire import GROUP, Envelope
    from tinyagents.store import SqliteStore

    db = tmp_path / "owner.db"
    cmd = command("run-back", "add_instruction")
    store = SqliteStore(db)
    await store.open()
    await store.append_command(cmd, state="accepted", run_id="run-back")  # the dead process's
    await store.close()
    keys = Keys(prefix)
    stream = keys.commands("a")
    client = aioredis.from_url(redis_url)
    try:
        await client.xgroup_create(stream, GROUP, id="0", mkstream=True)
        first = Envelope(request_id="req-1", reply_to="tester", to="a", command=cmd)
        await client.xadd(stream, first.fields())
        await client.xreadgroup(GROUP, "a", {stream: ">"}, count=10)  # read, never answered
        async with Runtime(store=f"sqlite:///{db}") as rt:
            handle = await rt.start(
                slow_agent(400, 0.02), "again", tenant_id="acme", run_id="run-back"
            )
            control = RedisControl(rt, redis_url, worker_id="a", prefix=prefix)
            await control.start()
            try:

                async def replies() -> dict[str, dict[str, Any]]:
                    entries = await client.xrange(keys.replies("tester"))
                    return {
                        f[b"request_id"].decode(): json.loads(f[b"receipt"]) for _, f in entries
                    }

                answers = await eventually(replies, lambda r: len(r) == 1)
                assert answers["req-1"]["status"] == "accepted", answers  # as it was then
                assert answers["req-1"]["run_id"] == "run-back"
                await handle.cancel()
                await handle.result()
                history = await rt.load_steering_history("run-back")
                applied = [e for e in history if e.correlation_id == cmd.correlation_id]
                assert [e.type for e in applied].count("steering.applied") <= 1
            finally:
                await control.aclose()
    finally:
        await client.aclose()


@pytest.mark.slow
async def test_sigterm_during_a_burst_answers_every_command_and_leaves_none_behind(
    redis_url: str, prefix: str, workers: Any
) -> None:
    """A worker stopped gracefully drains its stream: a command that reached it after its
    last read is answered (or handed back at once), never left for its next process while
    the sender waits for a receipt that does not come."""
    import signal

    import redis.asyncio as aioredis

    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    run_id = await a.call("start", run_id="run-term", tenant="acme", turns=400, tick_s=0.02)
    await listed(b, run_id)
    await b.call("submit", command=as_json(command(run_id, "pause")))
    await eventually(lambda: a.call("status", run_id=run_id), lambda s: s == "paused")

    assert a.proc is not None
    owner = a.proc
    steers: list[dict[str, Any]] = []
    sent: list[asyncio.Task[dict[str, Any]]] = []
    while owner.returncode is None and len(steers) < 2000:
        steer = as_json(command(run_id, "add_instruction", {"text": f"s{len(steers)}"}))
        steers.append(steer)
        sent.append(asyncio.create_task(b.call_raw("submit", command=steer)))
        if len(steers) == 20:
            owner.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.005)
    assert await asyncio.wait_for(owner.wait(), 60) == 0
    answers = await asyncio.gather(*sent)
    assert all("ok" in x or x["type"] == "ControlPlaneUnavailable" for x in answers), [
        x for x in answers if "ok" not in x and x["type"] != "ControlPlaneUnavailable"
    ]
    client = aioredis.from_url(redis_url)
    try:  # nothing waits in the stopped worker's stream for its next process
        assert await client.xlen(Keys(prefix).commands("a")) == 0
    finally:
        await client.aclose()

    restarted = await workers("a", redis_url, prefix)  # same worker id and SQLite file
    history = await restarted.call("history", run_id=run_id)
    for answer in answers:
        if answer.get("ok", {}).get("status") == "accepted":
            counts = terminal_counts(history, answer["ok"]["correlation_id"])
            assert sum(counts.values()) == 1, (answer, counts)


async def test_a_worker_logs_one_line_when_it_loses_redis_and_one_when_it_is_back(
    private_redis: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/deploy.md: every worker "logs once when it loses Redis and once when it is back"
    (it logged once per job: three lines each way)."""
    await private_redis.stop()
    caplog.set_level("WARNING", logger="tinyagents.distributed")
    async with Runtime() as rt:
        kw: dict[str, Any] = {"prefix": prefix, "block_s": 0.1, "backoff_s": (0.05, 0.1)}
        async with RedisControl(rt, private_redis.url, worker_id="w", **kw) as control:
            await eventually(
                lambda: asyncio.sleep(0, control.counters.redis_errors), lambda n: n >= 6
            )
            lost = [r for r in caplog.records if "retrying with backoff" in r.getMessage()]
            assert len(lost) == 1, [r.getMessage() for r in lost]
            await private_redis.start()
            await eventually(lambda: asyncio.sleep(0, control.connected), bool)
            await asyncio.sleep(0.5)  # let every job make a few more calls
            back = [r for r in caplog.records if "reconnected" in r.getMessage()]
            assert len(back) == 1, [r.getMessage() for r in back]


async def test_a_redis_that_refuses_the_urls_database_is_a_configuration_error(
    redis_url: str, prefix: str
) -> None:
    # a database number the server does not have (or credentials it refuses) never heals:
    # the worker served as if Redis were down, retrying for ever, and cross-worker control
    # never worked; it is now a ConfigurationError at start (serve: one line, exit code 2)
    from urllib.parse import urlsplit

    from tinyagents.errors import ConfigurationError

    parts = urlsplit(redis_url)
    url = parts._replace(path="/99999").geturl()
    async with Runtime() as rt:
        control = RedisControl(rt, url, worker_id="w", prefix=prefix)
        with pytest.raises(ConfigurationError, match="DB index is out of range"):
            await control.start()
        await control.aclose()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_with_a_database_redis_does_not_have_is_one_line(
    redis_url: str, prefix: str, tmp_path: Any, workers: str
) -> None:
    from urllib.parse import urlsplit

    url = urlsplit(redis_url)._replace(path="/99999").geturl()
    done = subprocess.run(
        [
            sys.executable, "-c", "import sys; from tinyagents.cli import main; sys.exit(main())",
            "serve", "--port", "0", "--workers", workers, "--insecure-dev",
            "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--redis", url,
            "--redis-prefix", prefix,
        ],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "DB index is out of range" in lines[0], done.stderr


@pytest.mark.slow
async def test_a_sender_started_while_redis_was_down_gets_the_receipts_of_its_first_commands(
    private_redis: RedisServer, prefix: str
) -> None:
    """A worker that started while Redis was down began to read its replies at Redis's clock
    once its reply job was back from its backoff: a command it sent meanwhile (Redis was
    back, the send worked) was answered before that instant, its receipt skipped, and the
    operator got ``ReceiptTimeout`` for a command its owner had accepted."""
    await private_redis.stop()
    async with Runtime() as sender_rt, Runtime() as owner_rt:
        sender = RedisControl(
            sender_rt,
            private_redis.url,
            worker_id="sender",
            prefix=prefix,
            backoff_s=(10.0, 10.0),  # the reply job waits this long between attempts
            receipt_timeout_s=60.0,
        )
        await sender.start()
        try:
            await eventually(
                lambda: asyncio.sleep(0, sender.counters.redis_errors), lambda n: n >= 1
            )
            await private_redis.start()
            async with RedisControl(owner_rt, private_redis.url, worker_id="owner", prefix=prefix):
                handle = await owner_rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
                # listed first: the sender looks for a run it does not list for 1.1 s only
                # (throttle_s + heartbeat_s), which the new owner's first mirror write missed
                # on a loaded machine ("not found", rejected)
                await eventually(lambda: sender.get_run(handle.run_id), bool)
                pause = command(handle.run_id, "pause")
                receipt = await sender.submit(pause)  # answered while the reply job waits
                assert receipt.status == "accepted", receipt
                assert receipt.correlation_id == pause.correlation_id
        finally:
            await sender.aclose()


async def test_a_command_sent_once_redis_is_back_gets_its_receipt_while_replies_back_off(
    private_redis: RedisServer, prefix: str
) -> None:
    """After an outage, a worker's reply job slept out its backoff (up to ``backoff_s[1]``,
    30 s by default) while its sends worked again: every command it sent meanwhile was
    answered by its owner, and the operator got ``ReceiptTimeout`` all the same. A command
    sent wakes the reply job."""
    async with Runtime() as sender_rt, Runtime() as owner_rt:
        fast: dict[str, Any] = {"prefix": prefix, "backoff_s": (0.05, 0.1), "block_s": 0.2}
        async with (
            RedisControl(owner_rt, private_redis.url, worker_id="owner", **fast) as owner,
            RedisControl(
                sender_rt,
                private_redis.url,
                worker_id="sender",
                prefix=prefix,
                backoff_s=(600.0, 600.0),  # out of its outage only when woken
                block_s=0.2,
                receipt_timeout_s=60.0,
            ) as sender,
        ):
            handle = await owner_rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
            await eventually(lambda: sender.get_run(handle.run_id), lambda s: s is not None)
            await private_redis.stop()
            await eventually(lambda: asyncio.sleep(0, sender.connected), lambda c: c is False)
            await private_redis.start()
            await eventually(lambda: asyncio.sleep(0, owner.connected), bool)
            await eventually(lambda: sender.get_run(handle.run_id), lambda s: s is not None)
            pause = command(handle.run_id, "pause")
            receipt = await sender.submit(pause)
            assert receipt.status == "accepted"
            assert receipt.correlation_id == pause.correlation_id


async def test_a_command_logged_as_the_worker_stops_is_taken_not_only_answered(
    redis_url: str, prefix: str, tmp_path: Any
) -> None:
    """A worker stopping while its reader was inside ``submit`` (the command logged, the reply
    of the write not back yet) cut that submit off: its drain read the entry again, found it
    ``accepted`` in the log and answered so, yet the runtime had never taken the command — no
    event, no delivery, no terminal state (the one-terminal-state rule broken, under load, by
    test_sigterm_during_a_burst_answers_every_command_and_leaves_none_behind)."""
    import redis.asyncio as aioredis

    from tinyagents.distributed.wire import Envelope
    from tinyagents.store import SqliteStore

    class SlowReply(SqliteStore):
        """The write commits, then its reply is slow in coming."""

        written = asyncio.Event()
        release = asyncio.Event()

        async def append_command(self, cmd: SteeringCommand, **kw: Any) -> bool:
            done = await super().append_command(cmd, **kw)
            if cmd.kind is SteeringKind.ADD_INSTRUCTION:
                self.written.set()
                await self.release.wait()
            return done

    store = SlowReply(tmp_path / "owner.db")
    keys = Keys(prefix)
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime(store=store) as rt:
            handle = await rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
            control = RedisControl(rt, redis_url, worker_id="a", prefix=prefix)
            await control.start()
            cmd = command(handle.run_id, "add_instruction")
            stream = keys.commands("a")
            await client.xadd(
                stream, Envelope(request_id="req-1", reply_to="t", to="a", command=cmd).fields()
            )
            await asyncio.wait_for(store.written.wait(), 60)  # logged; submit not returned
            closing = asyncio.create_task(control.aclose())
            # the reader's job stopped, the drain read the entry again and answered it
            replies = await eventually(lambda: client.xrange(keys.replies("t")), bool)
            assert [json.loads(f[b"receipt"])["status"] for _, f in replies] == ["accepted"]
            store.release.set()
            await closing

            async def taken() -> list[str]:
                history = await rt.load_steering_history(handle.run_id)
                return [e.type for e in history if e.correlation_id == cmd.correlation_id]

            mine = await eventually(taken, lambda types: len(types) >= 2)
            assert mine[:2] == ["steering.requested", "steering.accepted"], mine
            assert await client.xlen(stream) == 0  # answered and acknowledged
            assert cmd.correlation_id in {c.correlation_id for c in rt.open_commands()}
    finally:
        await client.aclose()


async def test_a_command_still_being_taken_as_the_worker_stops_is_answered_accepted(
    redis_url: str, prefix: str, tmp_path: Any
) -> None:
    """As above, but the worker stops before the command is logged (its submit is in the
    store's write): the drain read the entry again, found nothing in the log and submitted it
    again, and the runtime answered that second submit ``duplicate`` of the first, still under
    way. The sender, who sent the command once, was told ``duplicate``; the drain now waits
    for the submit under way and answers with its receipt."""
    import redis.asyncio as aioredis

    from tinyagents.distributed.wire import GROUP, Envelope
    from tinyagents.store import SqliteStore

    class SlowWrite(SqliteStore):
        """The command's write waits before it goes to the database."""

        entered = asyncio.Event()
        release = asyncio.Event()

        async def append_command(self, cmd: SteeringCommand, **kw: Any) -> bool:
            if cmd.kind is SteeringKind.ADD_INSTRUCTION:
                self.entered.set()
                await self.release.wait()
            return await super().append_command(cmd, **kw)

    store = SlowWrite(tmp_path / "owner.db")
    keys = Keys(prefix)
    stream = keys.commands("a")
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime(store=store) as rt:
            handle = await rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
            control = RedisControl(rt, redis_url, worker_id="a", prefix=prefix)
            await control.start()
            cmd = command(handle.run_id, "add_instruction")
            await client.xadd(
                stream, Envelope(request_id="req-1", reply_to="t", to="a", command=cmd).fields()
            )
            await asyncio.wait_for(store.entered.wait(), 60)  # being taken, not logged yet
            closing = asyncio.create_task(control.aclose())

            async def delivered() -> int:
                pending = await client.xpending_range(stream, GROUP, "-", "+", 10)
                return int(pending[0]["times_delivered"]) if pending else 0

            await eventually(delivered, lambda n: n >= 2)  # the drain has read it again
            store.release.set()
            await closing
            replies = await client.xrange(keys.replies("t"))
            receipts = [json.loads(f[b"receipt"]) for _, f in replies]
            assert [(r["status"], r["run_id"]) for r in receipts] == [
                ("accepted", handle.run_id)
            ], receipts
            assert cmd.correlation_id in {c.correlation_id for c in rt.open_commands()}
    finally:
        await client.aclose()


async def test_a_stuck_owners_oldest_commands_are_kept_and_a_sender_past_the_cap_is_told(
    redis_url: str, prefix: str, tmp_path: Any
) -> None:
    """Senders appended with ``MAXLEN``: past it Redis trimmed the oldest entries of a stuck
    (or stopped) owner's stream, commands its senders had sent, without a word to anyone;
    their owner never saw them. Now a full stream keeps what it holds and the new command is
    not sent (``ControlPlaneUnavailable``: the API hands it to the store, if there is one)."""
    import redis.asyncio as aioredis

    from tinyagents.store import SqliteStore

    class Stuck(SqliteStore):
        """The owner's steering log stops answering until released."""

        release = asyncio.Event()

        async def append_command(self, cmd: SteeringCommand, **kw: Any) -> bool:
            if cmd.kind is SteeringKind.ADD_INSTRUCTION:
                await self.release.wait()
            return await super().append_command(cmd, **kw)

    store = Stuck(tmp_path / "owner.db")
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime(store=store) as owner_rt, Runtime() as sender_rt:
            handle = await owner_rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
            async with (
                RedisControl(owner_rt, redis_url, worker_id="o", prefix=prefix),
                RedisControl(
                    sender_rt,
                    redis_url,
                    worker_id="s",
                    prefix=prefix,
                    receipt_timeout_s=0.3,
                    max_unanswered=2,
                ) as sender,
            ):
                await eventually(lambda: sender.get_run(handle.run_id), bool)
                sent = [
                    command(handle.run_id, "add_instruction", {"text": f"s{i}"}) for i in (1, 2)
                ]
                for cmd in sent:
                    with pytest.raises(ReceiptTimeout):  # the owner is stuck on its log
                        await sender.submit(cmd)
                late = command(handle.run_id, "add_instruction", {"text": "late"})
                with pytest.raises(ControlPlaneUnavailable, match="2 commands it has not answered"):
                    await sender.submit(late)
                assert sender.counters.refused_full == 1
                stream = Keys(prefix).commands("o")
                assert await client.xlen(stream) == 2  # nothing trimmed
                store.release.set()

                async def logged() -> set[str]:
                    history = await owner_rt.load_steering_history(handle.run_id)
                    return {e.correlation_id for e in history if e.type == "steering.accepted"}

                mine = {c.correlation_id for c in sent}
                assert await eventually(logged, lambda ids: mine <= ids) >= mine
                assert late.correlation_id not in await logged()
                await eventually(lambda: client.xlen(stream), lambda n: n == 0)
    finally:
        await client.aclose()


async def test_a_command_whose_send_lost_its_reply_gets_its_receipt_and_applies_once(
    redis_url: str, prefix: str, cutting_proxy: CuttingProxy
) -> None:
    """The append of a command to its owner's stream ran, and its reply was lost with the
    sender's connection: ``submit`` raised ``ControlPlaneUnavailable`` ("could not send"),
    while the owner took the command and applied it (the API then sent it again through the
    store, if it had one, and told the operator ``duplicate``). The send is tried again on
    another connection, finds its command sent already, and waits for the receipt."""
    async with Runtime() as sender_rt, Runtime() as owner_rt:
        async with (
            RedisControl(owner_rt, redis_url, worker_id="owner", prefix=prefix),
            RedisControl(sender_rt, cutting_proxy.url, worker_id="sender", prefix=prefix) as sender,
        ):
            handle = await owner_rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
            await eventually(lambda: sender.get_run(handle.run_id), bool)
            steer = command(handle.run_id, "add_instruction")
            cutting_proxy.lose_reply_to(b"'XADD'")  # the bounded append's script
            receipt = await sender.submit(steer)
            assert cutting_proxy.cut == 1
            assert receipt.status == "accepted"
            assert receipt.correlation_id == steer.correlation_id
            history = await owner_rt.load_steering_history(handle.run_id)
            mine = [e.type for e in history if e.correlation_id == steer.correlation_id]
            assert mine == ["steering.requested", "steering.accepted"]  # sent, taken, once


async def test_a_reply_target_that_is_no_stream_is_logged_as_such_not_as_an_outage(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry whose ``reply_to`` names a key that is not a stream (another deployment's key
    under the prefix, a hand edit) made the receipt's XADD fail with WRONGTYPE: the reader
    logged a Redis outage, counted a Redis error, took the worker off ``connected`` and slept
    its backoff before it read the next command; and its EXPIRE set a TTL on that key."""
    import redis.asyncio as aioredis

    from tinyagents.distributed.wire import Envelope

    caplog.set_level("WARNING", logger="tinyagents.distributed")
    keys = Keys(prefix)
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime() as rt:
            handle = await rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
            async with RedisControl(rt, redis_url, worker_id="a", prefix=prefix) as control:
                await client.set(keys.replies("odd"), "not a stream")
                stream = keys.commands("a")
                odd = command(handle.run_id, "add_instruction")
                await client.xadd(
                    stream,
                    Envelope(request_id="r-odd", reply_to="odd", to="a", command=odd).fields(),
                )
                await eventually(lambda: client.xlen(stream), lambda n: n == 0)
                fine = command(handle.run_id, "add_instruction", {"text": "and refunds"})
                await client.xadd(
                    stream,
                    Envelope(request_id="r-fine", reply_to="fine", to="a", command=fine).fields(),
                )
                replies = await eventually(lambda: client.xrange(keys.replies("fine")), bool)
                assert [json.loads(f[b"receipt"])["status"] for _, f in replies] == ["accepted"]
                assert control.counters.redis_errors == 0 and control.connected
                assert await client.get(keys.replies("odd")) == b"not a stream"
                assert await client.ttl(keys.replies("odd")) == -1  # no expiry set on it
                # the command itself was taken: the target is only where its receipt goes
                assert odd.correlation_id in {c.correlation_id for c in rt.open_commands()}
                # once more at the close: the drain answers it and still leaves cleanly
                await client.xadd(
                    stream,
                    Envelope(request_id="r-odd2", reply_to="odd", to="a", command=odd).fields(),
                )
            assert await client.exists(stream, keys.seat("a")) == 0
        messages = [r.getMessage() for r in caplog.records]
        assert not [m for m in messages if "retrying with backoff" in m], messages
        assert not [m for m in messages if "cleanly" in m], messages
        bad = [m for m in messages if "r-odd" in m and "not a stream" in m]
        assert bad and keys.replies("odd") in bad[0], messages
    finally:
        await client.delete(keys.replies("odd"), keys.replies("fine"))
        await client.aclose()


async def test_a_left_entry_in_the_backlog_is_read_once_per_reconnect_not_in_a_loop(
    redis_url: str, prefix: str
) -> None:
    """An entry the reader leaves for the worker's next process (its runtime closed first, so
    it took no command) stays pending. After a dropped connection the reader reads its
    backlog from the start again, and read that entry, left it, and read it again, round after
    round (thousands of reads a second against Redis), never reaching the new entries."""
    import redis.asyncio as aioredis

    from tinyagents.distributed.wire import Envelope

    keys = Keys(prefix)
    stream = keys.commands("a")
    client = aioredis.from_url(redis_url)
    try:
        rt = Runtime()
        async with rt:
            handle = await rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
        kw: dict[str, Any] = {"prefix": prefix, "block_s": 0.5, "backoff_s": (0.05, 0.1)}
        async with RedisControl(rt, redis_url, worker_id="a", **kw) as control:
            cmd = command(handle.run_id, "add_instruction")
            await client.xadd(
                stream, Envelope(request_id="r-1", reply_to="t", to="a", command=cmd).fields()
            )
            await eventually(lambda: asyncio.sleep(0, control.counters.received), lambda n: n == 1)
            assert (await client.xpending(stream, "owners"))["pending"] == 1  # left
            for client_info in await client.client_list():
                if client_info["name"] == f"tinyagents:{prefix}:a":
                    await client.client_kill_filter(_id=client_info["id"])
            # the reader comes back and reads its backlog: the left entry once more
            await eventually(lambda: asyncio.sleep(0, control.counters.received), lambda n: n >= 2)
            await client.xadd(stream, {"garbage": "x"})  # answered by being dropped
            await eventually(lambda: client.xlen(stream), lambda n: n == 1)
            assert control.counters.received == 3 and control.counters.malformed == 1
        replies = await client.xrange(keys.replies("t"))  # handed back at the close
        assert [f[b"handed_back"] for _, f in replies] == [b"the owning worker is stopping"]
    finally:
        await client.aclose()


async def test_a_stopping_worker_answers_entries_read_by_another_consumer_and_leaves(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The drain read the stream as its one consumer until the stream was empty. An entry
    that was read under another consumer name (someone looking with ``redis-cli``) or that
    was acknowledged but not deleted is neither in its backlog nor new: the drain read
    nothing, found the stream not empty, and read again, some 4,000 times a second, until its
    10 s ran out (and, when redis-py swallowed that cancel, for ever); that command was never
    answered, and the stream and the seat were left behind."""
    import redis.asyncio as aioredis

    from tinyagents.distributed.wire import Envelope

    caplog.set_level("INFO", logger="tinyagents.distributed")
    keys = Keys(prefix)
    stream = keys.commands("a")
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime() as rt:
            handle = await rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
            control = RedisControl(rt, redis_url, worker_id="a", prefix=prefix, block_s=0.2)
            await control.start()
            await eventually(lambda: client.exists(stream), lambda n: n == 1)
            await control._stop_jobs()  # no job reads the stream from now on: only the drain
            looked = command(handle.run_id, "add_instruction")
            answered = command(handle.run_id, "add_instruction", {"text": "and refunds"})
            for request_id, cmd in (("r-looked", looked), ("r-answered", answered)):
                await client.xadd(
                    stream,
                    Envelope(request_id=request_id, reply_to="t", to="a", command=cmd).fields(),
                )
            read = await client.xreadgroup("owners", "inspector", {stream: ">"}, count=1)
            assert [f[b"request_id"] for _, f in read[0][1]] == [b"r-looked"]
            read = await client.xreadgroup("owners", "a", {stream: ">"}, count=1)
            [(answered_id, _)] = read[0][1]
            await client.xack(stream, "owners", answered_id)  # its deletion lost
            await asyncio.wait_for(control.aclose(), 60)  # a guard against a hang only
            assert await client.exists(stream, keys.seat("a")) == 0
            replies = await client.xrange(keys.replies("t"))
            assert [
                (f[b"request_id"], json.loads(f[b"receipt"])["status"]) for _, f in replies
            ] == [(b"r-looked", "accepted")]
            assert looked.correlation_id in {c.correlation_id for c in rt.open_commands()}
        messages = [r.getMessage() for r in caplog.records]
        assert not [m for m in messages if "cleanly" in m], messages
    finally:
        await client.delete(keys.replies("t"))
        await client.aclose()


async def test_a_drain_that_runs_out_of_time_ends_though_redis_py_swallows_the_cancel(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drain still reading when its time ran out (senders kept appending) was cancelled;
    redis-py returns the answer of a call the cancel landed in now and then, and the drain
    then read on for as long as entries came: ``aclose`` (a SIGTERM's stop) never ended.
    Each round is a fresh worker; the cancel lands in a Redis call most of the time."""
    import redis.asyncio as aioredis

    from tinyagents.distributed import redis_control

    monkeypatch.setattr(redis_control, "_DRAIN_S", 0.3)
    keys = Keys(prefix)
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime() as rt:
            for round_ in range(6):
                worker = f"w{round_}"
                stream = keys.commands(worker)
                control = RedisControl(rt, redis_url, worker_id=worker, prefix=prefix)
                await control.start()
                await eventually(lambda s=stream: client.exists(s), lambda n: n == 1)
                await control._stop_jobs()
                stop = asyncio.Event()

                async def flood(stream: str = stream, stop: asyncio.Event = stop) -> None:
                    while not stop.is_set():  # entries dropped as malformed, at once
                        await client.xadd(stream, {"garbage": "x"})

                flooding = asyncio.create_task(flood())
                try:
                    await asyncio.wait_for(control.aclose(), 60)  # a guard against a hang
                finally:
                    stop.set()
                    await flooding
                await client.delete(stream)
    finally:
        await client.aclose()


async def test_a_command_stream_deleted_under_a_live_worker_is_made_again_not_an_outage(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``DEL {prefix}:cmd:a`` while worker a's reader waited on it: Redis ends that read
    with ``UNBLOCKED the stream key no longer exists``, which the reader logged as a Redis
    outage (``connected`` false, a Redis error counted) and slept its backoff on before it
    made the stream again; senders were meanwhile told the worker had stopped."""
    import redis.asyncio as aioredis

    from tinyagents.distributed.wire import Envelope

    caplog.set_level("WARNING", logger="tinyagents.distributed")
    keys = Keys(prefix)
    stream = keys.commands("a")
    client = aioredis.from_url(redis_url)

    async def reader_waiting() -> bool:
        return any(
            c["name"] == f"tinyagents:{prefix}:a" and c["cmd"] == "xreadgroup" and "b" in c["flags"]
            for c in await client.client_list()
        )

    try:
        async with Runtime() as rt:
            handle = await rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
            async with RedisControl(
                rt, redis_url, worker_id="a", prefix=prefix, block_s=30
            ) as control:
                await eventually(reader_waiting, bool)
                await client.delete(stream)
                await eventually(lambda: client.exists(stream), lambda n: n == 1)
                cmd = command(handle.run_id, "add_instruction")
                await client.xadd(
                    stream, Envelope(request_id="r-1", reply_to="t", to="a", command=cmd).fields()
                )
                replies = await eventually(lambda: client.xrange(keys.replies("t")), bool)
                assert [json.loads(f[b"receipt"])["status"] for _, f in replies] == ["accepted"]
                assert control.counters.redis_errors == 0 and control.connected
        messages = [r.getMessage() for r in caplog.records]
        assert not [m for m in messages if "retrying with backoff" in m], messages
        assert [m for m in messages if "no longer exists" in m and stream in m], messages
    finally:
        await client.delete(keys.replies("t"))
        await client.aclose()


async def test_a_worker_whose_run_was_taken_over_stops_listing_it(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    # the old owner (its heartbeat stale, the run started again on another worker sharing
    # the store) kept the run in its hash: a reader found two workers holding it, and the
    # one that beat last, maybe the old one, got its commands
    import redis.asyncio as aioredis
    from test_run_claims import take_over

    keys = Keys(prefix)
    client = aioredis.from_url(redis_url)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    try:
        async with Runtime(url) as old_rt, Runtime(url) as new_rt:
            await old_rt.start(slow_agent_for_listing(), "work", tenant_id="acme", run_id="job")
            old = RedisControl(old_rt, redis_url, worker_id="old", prefix=prefix, heartbeat_s=0.1)
            await old.start()
            try:
                await eventually(lambda: client.hkeys(keys.runs("old")), lambda ks: b"job" in ks)
                taken = await take_over(old_rt, new_rt, slow_agent_for_listing(), "job")
                await old_rt.write_live_snapshots(heartbeat=True)
                await eventually(lambda: client.hkeys(keys.runs("old")), lambda ks: ks == [])
                assert [r["run_id"] for r in await old.list_runs("acme")] == []
                assert not taken.done
            finally:
                await old.aclose()
    finally:
        await client.delete(keys.runs("old"))
        await client.aclose()


async def test_a_job_that_dies_of_a_bug_is_logged_unhealthy_and_restarted(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that died of an error it does not retry (a bug, not a Redis outage: here the
    sender's reply job, on a reply it could not read) ended its task silently: ``connected``
    stayed true, and every later command's receipt went unread (each ``submit`` timed out)
    until the worker was restarted. It is logged with its traceback, the control is not
    ``connected`` until the job is back, and the job is restarted after a backoff."""
    import logging

    from tinyagents.distributed import redis_control

    faults = [RuntimeError("injected fault")]

    def failing_once(raw: Any) -> Any:
        if faults:
            raise faults.pop()
        return parse_reply(raw)

    parse_reply = redis_control.parse_reply
    monkeypatch.setattr(redis_control, "parse_reply", failing_once)
    seen: list[tuple[str, bool]] = []  # (message, connected) as the crash is logged
    died = asyncio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR and record.exc_info:
                seen.append((record.getMessage(), sender.connected))
                died.set()

    watch = Watch()
    logging.getLogger("tinyagents.distributed").addHandler(watch)
    try:
        async with Runtime() as sender_rt, Runtime() as owner_rt:
            async with (
                RedisControl(owner_rt, redis_url, worker_id="owner", prefix=prefix),
                RedisControl(
                    sender_rt,
                    redis_url,
                    worker_id="sender",
                    prefix=prefix,
                    backoff_s=(0.1, 0.5),
                    receipt_timeout_s=2.0,
                ) as sender,
            ):
                handle = await owner_rt.start(slow_agent_for_listing(), "work", tenant_id="acme")
                await eventually(lambda: sender.get_run(handle.run_id), bool)
                with pytest.raises(ReceiptTimeout):  # its receipt was the one it died on
                    await sender.submit(command(handle.run_id, "add_instruction"))
                await asyncio.wait_for(died.wait(), 60)  # a deadline against a hang
                assert len(seen) == 1 and "replies" in seen[0][0], seen
                assert seen[0][1] is False  # not connected while the job is down
                assert sender.counters.crashes == 1
                # the restarted job's receipt: the 2 s the lost one was given to time out is
                # no bound on it (the owner's answer could take longer on a loaded machine)
                sender.receipt_timeout_s = 60
                receipt = await sender.submit(command(handle.run_id, "add_instruction"))
                assert receipt.status == "accepted"  # the job was restarted
                await eventually(lambda: asyncio.sleep(0, sender.connected), bool)
    finally:
        logging.getLogger("tinyagents.distributed").removeHandler(watch)


async def test_a_command_sent_on_the_worker_whose_run_was_taken_over_goes_to_the_new_owner(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    """The old owner (its heartbeat stale, the run started again on another worker sharing
    the store) still held the fenced run in memory, so a command sent through it was taken
    for a local one and refused ``taken-over``, though the run's new owner was listed on
    Redis: it now goes to the new owner, as a command sent through any other worker does."""
    from test_run_claims import take_over

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.1, "ttl_s": 5.0}
    async with Runtime(url) as old_rt, Runtime(url) as new_rt:
        await old_rt.start(slow_agent_for_listing(), "work", run_id="job")  # as take_over does
        async with (
            RedisControl(old_rt, redis_url, worker_id="old", **kw) as old,
            RedisControl(new_rt, redis_url, worker_id="new", **kw),
        ):
            await take_over(old_rt, new_rt, slow_agent_for_listing(), "job")
            await old_rt.write_live_snapshots(heartbeat=True)  # refused: fenced here
            assert "job" in old_rt.runs  # still in memory here (its task being stopped)
            await eventually(lambda: old.get_run("job"), lambda s: s and s["worker"] == "new")
            operator = SteeringActor.human("olga", tenant_id="default", scopes=["agent:control"])
            steer = command("job", "add_instruction", actor=operator)
            receipt = await old.submit(steer)
            assert receipt.status == "accepted", receipt
            history = await new_rt.load_steering_history("job")
            assert steer.correlation_id in {e.correlation_id for e in history}


async def test_a_taken_over_run_whose_new_owner_is_not_on_redis_is_refused_naming_it(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    """With no worker listing the run on Redis (its new owner is a runtime without a
    ``RedisControl``), a command sent on the old worker is refused ``taken-over`` there,
    naming the new owner, not answered as a run that does not exist."""
    from test_run_claims import take_over

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Runtime(url) as old_rt, Runtime(url) as new_rt:
        await old_rt.start(slow_agent_for_listing(), "work", run_id="job")
        async with RedisControl(old_rt, redis_url, worker_id="old", prefix=prefix) as old:
            await take_over(old_rt, new_rt, slow_agent_for_listing(), "job")
            await old_rt.write_live_snapshots(heartbeat=True)  # refused: fenced here
            operator = SteeringActor.human("olga", tenant_id="default", scopes=["agent:control"])
            receipt = await old.submit(command("job", "add_instruction", actor=operator))
            assert (receipt.status, receipt.policy_id) == ("rejected", "taken-over"), receipt
            assert new_rt.runtime_id in (receipt.reason or "")
