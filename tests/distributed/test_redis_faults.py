"""A bug in a worker's Redis jobs is told from a Redis outage, against a real Redis: a bug is
logged with its traceback and handled as a crashed job (``supervise``), an outage is retried
in place and logged once each way."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest
from conftest import RedisServer, eventually

from tinyagents import Runtime, SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.distributed import RedisControl
from tinyagents.distributed.owner import _ATTEMPTS, CommandReader
from tinyagents.distributed.wire import Envelope, Keys

T = TypeVar("T")
OPERATOR = SteeringActor.human("olga", tenant_id="acme", scopes=["agent:control"])
LOGGER = "tinyagents.distributed"


def now(value: T) -> Callable[[], Awaitable[T]]:
    async def probe() -> T:
        return value

    return probe


def holder() -> Any:
    """An agent that stays running (held in a tool) until its runtime closes."""
    from tinyagents import Agent
    from tinyagents.testkit import Gate

    gate = Gate("hold")
    return Agent("holder", gate.model(), tools=[gate.tool()])


class Crashes(logging.Handler):
    """The crashes ``supervise`` logs (ERROR, with a traceback), and whether the control was
    ``connected`` as each was logged."""

    def __init__(self) -> None:
        super().__init__()
        self.control: RedisControl | None = None
        self.seen: list[tuple[logging.LogRecord, bool]] = []
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "died of" in record.getMessage():
            connected = self.control.connected if self.control is not None else True
            self.seen.append((record, connected))
            self.event.set()


@pytest.fixture
def crashes() -> Any:
    handler = Crashes()
    logging.getLogger(LOGGER).addHandler(handler)
    try:
        yield handler
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)


@asynccontextmanager
async def pair(url: str, prefix: str) -> AsyncIterator[tuple[RedisControl, RedisControl, str]]:
    """An owner worker running a run, and a sender worker that lists it."""
    kw: dict[str, Any] = {"prefix": prefix, "backoff_s": (0.1, 0.5), "block_s": 0.2}
    async with Runtime() as sender_rt, Runtime() as owner_rt:
        async with (
            RedisControl(owner_rt, url, worker_id="owner", **kw) as owner,
            RedisControl(sender_rt, url, worker_id="sender", receipt_timeout_s=60.0, **kw) as s,
        ):
            handle = await owner_rt.start(holder(), "work", tenant_id="acme")
            await eventually(lambda: s.get_run(handle.run_id), bool)
            yield owner, s, handle.run_id


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "retrying with backoff" in r.getMessage()]


def steer(run_id: str, text: str = "focus on billing") -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPERATOR,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": text},
    )


def inject(monkeypatch: pytest.MonkeyPatch, where: str, text: str, times: int) -> None:
    """Make ``CommandReader.<where>`` raise a ``TypeError`` for the envelopes whose command's
    text is ``text``, ``times`` times at most."""
    original = getattr(CommandReader, where)
    left = [times]

    def buggy(self: CommandReader, envelope: Any, *args: Any) -> Any:
        if isinstance(envelope, Envelope) and envelope.command.payload.get("text") == text:
            if left[0] > 0:
                left[0] -= 1
                raise TypeError("injected bug")
        return original(self, envelope, *args)

    monkeypatch.setattr(CommandReader, where, buggy)


@pytest.mark.parametrize("where", ["_lane", "_refusal"])
async def test_a_bug_handling_a_command_entry_is_a_crash_not_a_redis_outage(
    redis_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    crashes: Crashes,
    where: str,
) -> None:
    """A bug while the owner handled an entry (``_lane``: as it was read; ``_refusal``: as it
    was answered) was taken for a Redis outage and retried for ever, logged without its
    traceback (``_lane``), or left the entry unanswered with the job "connected" until the
    next reconnect (``_refusal``: the sender waited out its timeout). It is logged with its
    traceback as the ``commands`` job's crash (not ``connected`` until the job runs again),
    and the entry is read again after the job's restart."""
    caplog.set_level("WARNING", logger=LOGGER)
    inject(monkeypatch, where, "flaky", times=1)
    async with pair(redis_url, prefix) as (owner, sender, run_id):
        crashes.control = owner
        receipt = await asyncio.wait_for(sender.submit(steer(run_id, "flaky")), 60)
        assert receipt.status == "accepted"  # read again after the restart
        assert len(crashes.seen) == 1
        record, connected = crashes.seen[0]
        assert "commands job died of TypeError" in record.getMessage()
        assert record.exc_info is not None and isinstance(record.exc_info[1], TypeError)
        assert connected is False
        assert owner.counters.crashes == 1
        assert owner.counters.redis_errors == 0
        assert outage_lines(caplog) == []
        await eventually(now(owner), lambda o: o.connected)


@pytest.mark.parametrize("where", ["_lane", "_refusal"])
async def test_an_entry_that_always_meets_a_bug_is_answered_rejected_not_read_for_ever(
    redis_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    crashes: Crashes,
    where: str,
) -> None:
    """An entry on which the owner's code always fails ends the job at every restart: after
    ``_ATTEMPTS`` it is answered ``rejected`` (naming the error) and acknowledged, and the
    commands sent after it are taken."""
    inject(monkeypatch, where, "poison", times=1_000)
    async with pair(redis_url, prefix) as (owner, sender, run_id):
        crashes.control = owner
        poisoned = await asyncio.wait_for(sender.submit(steer(run_id, "poison")), 60)
        assert poisoned.status == "rejected"
        assert "TypeError: injected bug" in (poisoned.reason or "")
        await eventually(now(owner), lambda o: o.counters.crashes == _ATTEMPTS)
        good = await asyncio.wait_for(sender.submit(steer(run_id)), 60)
        assert good.status == "accepted"
        client = owner._redis
        assert client is not None
        pending = await client.xpending(owner.keys.commands("owner"), "owners")
        assert pending["pending"] == 0
        assert await client.xlen(owner.keys.commands("owner")) == 0
        await eventually(now(owner), lambda o: o.connected)


async def test_a_bug_in_the_mirror_is_a_crash_not_a_redis_outage(
    redis_url: str,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
    crashes: Crashes,
) -> None:
    """A bug while the mirror wrote (here: stamping a snapshot) was counted as a failed Redis
    write and retried for ever, logged as an outage without its traceback. It is the
    ``mirror`` job's crash, and the run is listed once the job runs again."""
    caplog.set_level("WARNING", logger=LOGGER)
    async with Runtime() as rt:
        kw: dict[str, Any] = {"prefix": prefix, "backoff_s": (0.1, 0.5), "block_s": 0.2}
        async with RedisControl(rt, redis_url, worker_id="w", **kw) as control:
            crashes.control = control
            stamp = control.mirror.stamp
            faults = [TypeError("injected bug")]

            def buggy(snapshot: dict[str, Any]) -> dict[str, Any]:
                if faults:
                    raise faults.pop()
                return stamp(snapshot)

            control.mirror.stamp = buggy  # type: ignore[method-assign]
            handle = await rt.start(holder(), "work", tenant_id="acme")
            await asyncio.wait_for(crashes.event.wait(), 60)
            record, connected = crashes.seen[0]
            assert "mirror" in record.getMessage()
            assert record.exc_info is not None and isinstance(record.exc_info[1], TypeError)
            assert connected is False
            assert control.counters.mirror_errors == 0
            assert control.counters.redis_errors == 0
            assert outage_lines(caplog) == []
            assert await eventually(lambda: control.get_run(handle.run_id), bool)
            await eventually(now(control), lambda c: c.connected)


async def test_a_bug_in_the_thread_job_is_a_crash_not_a_redis_outage(
    redis_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    crashes: Crashes,
) -> None:
    """A bug while the thread job read the listing was logged as a Redis outage of the job."""
    caplog.set_level("WARNING", logger=LOGGER)
    async with Runtime() as rt:
        kw: dict[str, Any] = {"prefix": prefix, "backoff_s": (0.1, 0.5), "heartbeat_s": 0.2}
        async with RedisControl(rt, redis_url, worker_id="w", ttl_s=5.0, **kw) as control:
            crashes.control = control
            waiting = SteeringCommand(
                target=SteeringTarget.thread("t-1"),
                actor=OPERATOR,
                kind=SteeringKind.ADD_INSTRUCTION,
                payload={"text": "hi"},
            )
            monkeypatch.setattr(rt.router, "waiting_for_threads", lambda: [(waiting, "acme")])

            async def buggy() -> Any:
                raise TypeError("injected bug")

            monkeypatch.setattr(control, "_remote_snapshots", buggy)
            await asyncio.wait_for(crashes.event.wait(), 60)
            record, _ = crashes.seen[0]
            assert "threads" in record.getMessage()
            assert record.exc_info is not None and isinstance(record.exc_info[1], TypeError)
            assert control.counters.redis_errors == 0
            assert outage_lines(caplog) == []


async def test_a_bug_listing_the_runs_is_raised_not_logged_as_an_outage(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    async with Runtime() as rt, RedisControl(rt, redis_url, worker_id="w", prefix=prefix) as c:

        async def buggy() -> Any:
            raise TypeError("injected bug")

        monkeypatch.setattr(c, "_remote_snapshots", buggy)
        with pytest.raises(TypeError):
            await c.list_runs("acme")
        assert c.counters.redis_errors == 0
        assert outage_lines(caplog) == []


async def test_after_a_listing_failed_in_an_outage_the_worker_logs_reconnected(
    private_redis: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A listing that failed in an outage marked the "list" call without Redis until the next
    listing worked: with none called after the outage, the worker never logged "reconnected"
    and, still "down", logged no later outage either."""
    caplog.set_level("WARNING", logger=LOGGER)

    def lines(text: str) -> Callable[[], Awaitable[int]]:
        async def count() -> int:
            return sum(text in r.getMessage() for r in caplog.records)

        return count

    async with Runtime() as rt:
        kw: dict[str, Any] = {"prefix": prefix, "block_s": 0.1, "backoff_s": (0.05, 0.1)}
        async with RedisControl(rt, private_redis.url, worker_id="w", **kw) as control:
            await private_redis.stop()
            assert await control.list_runs("acme") == []  # its own runs: none
            await eventually(lines("retrying with backoff"), lambda n: n == 1)
            await private_redis.start()
            await eventually(lines("reconnected"), lambda n: n == 1)
            await private_redis.stop()
            await eventually(lines("retrying with backoff"), lambda n: n == 2)


async def test_hostile_entries_in_the_streams_are_skipped_and_the_good_ones_around_them_taken(
    redis_url: str, prefix: str, crashes: Crashes
) -> None:
    """Entries written straight into a worker's command stream and reply stream, between good
    ones: not JSON, JSON nested past the parser's limit, ids that break the id rule (too long,
    a control character), a command over the size limit, bytes that are no text. Each is
    counted ``malformed``, answered ``rejected`` where it names a usable reply target (an id
    that breaks the id rule is none: its receipt went to a key named by it, a 300-character
    ``request_id`` came back in the receipt and its command was taken), and acknowledged; no
    job dies or reports an outage, and the good commands around them are taken."""
    from tinyagents.store.base import MAX_COMMAND_BYTES

    async with pair(redis_url, prefix) as (owner, sender, run_id):
        client = owner._redis
        assert client is not None
        keys = owner.keys

        def entry(request_id: str, text: str = "x", **over: Any) -> dict[str, Any]:
            fields: dict[str, Any] = {
                "v": "1",
                "request_id": request_id,
                "reply_to": "tester",
                "to": "owner",
                "command": steer(run_id, text).model_dump_json(),
            }
            fields.update(over)
            return fields

        long_id = "x" * 300
        stream = keys.commands("owner")
        for fields in (
            entry("r-good-1", "one"),
            entry(long_id),  # no usable request id: not answered
            entry("r-ctrl", reply_to="test\ner"),  # no usable reply target: not answered
            entry("r-to", to="o" * 300),
            entry("r-deep", command="[" * 100_000),
            entry("r-not-json", command="{"),
            entry(long_id, command="y" * (MAX_COMMAND_BYTES + 1)),
            {"v": b"\xff", "junk": b"\xfe"},
            entry("r-good-2", "two"),
        ):
            await client.xadd(stream, fields)

        async def replies() -> dict[str, dict[str, Any]]:
            found = await client.xrange(keys.replies("tester"))
            return {f[b"request_id"].decode(): json.loads(f[b"receipt"]) for _, f in found}

        answers = await eventually(replies, lambda r: "r-good-2" in r)
        assert set(answers) == {"r-good-1", "r-to", "r-deep", "r-not-json", "r-good-2"}
        assert answers["r-good-1"]["status"] == "accepted"
        assert answers["r-good-2"]["status"] == "accepted"
        for rid in ("r-to", "r-deep", "r-not-json"):
            assert answers[rid]["status"] == "rejected", rid
            assert answers[rid]["reason"].startswith("malformed command"), answers[rid]
        assert "300 characters" in answers["r-to"]["reason"]
        await eventually(lambda: client.xpending(stream, "owners"), lambda p: p["pending"] == 0)
        assert await client.exists(keys.replies("test\ner")) == 0
        assert owner.counters.malformed == 7

        # the sender's reply stream: foreign entries before a real receipt
        for fields in (
            {"request_id": "r", "receipt": "[" * 100_000},
            {"request_id": b"\xff", "receipt": "{}"},
            {"request_id": long_id * 100, "receipt": "{"},
            {"request_id": "r", "handed_back": b"\xff"},
            {"nothing": "here"},
        ):
            await client.xadd(keys.replies("sender"), fields)
        receipt = await asyncio.wait_for(sender.submit(steer(run_id, "three")), 60)
        assert receipt.status == "accepted"
        assert sender.counters.malformed == 5
        assert crashes.seen == []
        assert owner.counters.redis_errors == sender.counters.redis_errors == 0


def test_what_counts_as_a_redis_outage() -> None:
    """Retried in place: Redis out of reach or not serving for now. A bug: anything else."""
    from redis import exceptions as rx

    from tinyagents.distributed._base import outage

    passing = [
        rx.ConnectionError("Connection closed by server."),
        rx.TimeoutError("Timeout reading from socket"),
        rx.BusyLoadingError("Redis is loading the dataset in memory"),
        rx.MaxConnectionsError("Too many connections"),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError(),
        OSError(113, "No route to host"),
        rx.InvalidResponse("Protocol Error: b'x'"),
        rx.ReadOnlyError("You can't write against a read only replica."),
        rx.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        rx.TryAgainError("Multiple keys request during rehashing of slot"),
        rx.ResponseError("BUSY Redis is busy running a script."),
        rx.ResponseError("MISCONF Redis is configured to save RDB snapshots, but ..."),
    ]
    bugs = [
        TypeError("unhashable type: 'dict'"),
        KeyError("worker"),
        AttributeError("'NoneType' object has no attribute 'decode'"),
        ValueError("invalid literal"),
        rx.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        rx.ResponseError("ERR wrong number of arguments for 'xadd' command"),
        rx.DataError("Invalid input of type: 'dict'."),
    ]
    assert [e for e in passing if not outage(e)] == []
    assert [e for e in bugs if outage(e)] == []


async def test_a_worker_stopping_with_an_entry_it_always_fails_on_answers_it_and_leaves(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain of a stopping worker read an entry its code failed on again and again until
    its 10 s ran out, and left it and the stream behind. It answers it ``rejected`` at its
    third bug, as the running job does, and deletes the stream."""
    import redis.asyncio as aioredis

    inject(monkeypatch, "_refusal", "poison", times=10**9)
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime() as rt:
            control = RedisControl(rt, redis_url, worker_id="owner", prefix=prefix)
            await control.start()
            handle = await rt.start(holder(), "work", tenant_id="acme")
            await client.xadd(
                control.keys.commands("owner"),
                {
                    "v": "1",
                    "request_id": "r-poison",
                    "reply_to": "tester",
                    "to": "owner",
                    "command": steer(handle.run_id, "poison").model_dump_json(),
                },
            )
            await asyncio.wait_for(control.aclose(), 60)
        assert await client.exists(control.keys.commands("owner")) == 0
        found = await client.xrange(control.keys.replies("tester"))
        answers = {f[b"request_id"]: json.loads(f[b"receipt"]) for _, f in found}
        assert answers[b"r-poison"]["status"] == "rejected"
        assert "TypeError: injected bug" in answers[b"r-poison"]["reason"]
    finally:
        await client.delete(Keys(prefix).replies("tester"))
        await client.aclose()


async def test_a_foreign_key_where_the_worker_set_is_lists_this_workers_runs_not_a_500(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A key of another type where the worker set belongs (another deployment's key under the
    prefix, a hand edit) made Redis answer ``WRONGTYPE``: taken for a bug, the listing raised
    (HTTP 500 on every listing). This worker's runs are listed, and the answer is logged
    naming it; it is no outage either."""
    import redis.asyncio as aioredis

    caplog.set_level("WARNING", logger=LOGGER)
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime() as rt, RedisControl(rt, redis_url, worker_id="w", prefix=prefix) as c:
            handle = await rt.start(holder(), "work", tenant_id="acme")
            await client.delete(c.keys.workers)
            await client.set(c.keys.workers, "not a sorted set")
            runs = await c.list_runs("acme")
            assert [r["run_id"] for r in runs] == [handle.run_id]
            assert any("WRONGTYPE" in r.getMessage() for r in caplog.records)
            assert outage_lines(caplog) == []
            await client.delete(c.keys.workers)
    finally:
        await client.aclose()


async def test_listing_entries_whose_ids_break_the_id_rule_are_skipped(
    redis_url: str, prefix: str
) -> None:
    """A live worker's hash holding snapshots whose ids break the id rule (written straight
    into Redis): they were listed as runs, a 300-character run id and a worker name with a
    newline (the key its commands would be appended to) among them. They are skipped and
    counted ``malformed``; the good entry next to them is listed."""
    import redis.asyncio as aioredis

    def snapshot(run_id: str, worker: str = "ghost", tenant: str = "acme") -> str:
        return json.dumps(
            {
                "run_id": run_id,
                "root_run_id": run_id,
                "tenant_id": tenant,
                "status": "running",
                "worker": worker,
            }
        )

    client = aioredis.from_url(redis_url)
    try:
        async with Runtime() as rt, RedisControl(rt, redis_url, worker_id="w", prefix=prefix) as c:
            seconds, micros = await client.time()
            await client.zadd(c.keys.workers, {"ghost": seconds + micros / 1_000_000})
            await client.hset(
                c.keys.runs("ghost"),
                mapping={
                    "long": snapshot("r" * 300),
                    "newline": snapshot("run-nl", worker="gh\nost"),
                    "tenant": snapshot("run-t", tenant="ac\x00me"),
                    "good": snapshot("run-good"),
                },
            )
            runs = await c.list_runs(None)
            assert [r["run_id"] for r in runs] == ["run-good"]
            assert c.counters.malformed == 3
    finally:
        await client.aclose()


async def test_a_snapshot_that_is_no_json_is_skipped_and_the_others_are_listed(
    redis_url: str,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
    crashes: Crashes,
) -> None:
    """The mirror encoded all of a worker's runs in one go: one snapshot that JSON cannot
    encode (here: a value stamped into it that is no JSON) ended the mirror at every restart,
    and none of the worker's runs was listed. That run is skipped (logged once, counted in
    ``unencodable``); the others are listed, and the mirror runs on."""
    caplog.set_level("WARNING", logger=LOGGER)
    kw: dict[str, Any] = {"prefix": prefix, "backoff_s": (0.1, 0.5), "block_s": 0.2}
    async with Runtime() as rt, Runtime() as other_rt:
        async with (
            RedisControl(rt, redis_url, worker_id="w", heartbeat_s=0.2, **kw) as control,
            RedisControl(other_rt, redis_url, worker_id="r", **kw) as reader,
        ):
            crashes.control = control
            stamp = control.mirror.stamp
            bad = await rt.start(holder(), "work", tenant_id="acme")

            def unencodable(snapshot: dict[str, Any]) -> dict[str, Any]:
                stamped = stamp(snapshot)
                if stamped["run_id"] == bad.run_id:
                    stamped["extra"] = object()
                return stamped

            control.mirror.stamp = unencodable  # type: ignore[method-assign]
            control.mirror._stale = True  # written afresh: the bad run among the others
            good = await rt.start(holder(), "work", tenant_id="acme")
            assert await eventually(lambda: reader.get_run(good.run_id), bool)
            writes = control.counters.mirror_writes
            await eventually(now(control), lambda c: c.counters.mirror_writes >= writes + 3)
            assert await reader.get_run(bad.run_id) is None
            assert control.counters.unencodable == 1
            assert crashes.seen == []
            lines = [r for r in caplog.records if bad.run_id in r.getMessage()]
            assert len(lines) == 1 and "not listed" in lines[0].getMessage(), lines
            assert control.connected


@pytest.mark.parametrize(("where", "times"), [("_lane", 1), ("_refusal", 1), ("_refusal", 10**9)])
async def test_a_command_after_one_the_owner_failed_on_waits_for_it(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch, where: str, times: int
) -> None:
    """Two commands for one run, one after the other in the owner's stream: the owner met a bug
    on the first (as it read it, ``_lane``, or as it answered it, ``_refusal``), left it to be
    read again after its job's restart, and submitted the second meanwhile: the run took them
    in the wrong order. The second now waits until the first is settled: taken at a later
    attempt, or answered ``rejected`` after ``_ATTEMPTS`` bugs."""
    inject(monkeypatch, where, "first", times=times)
    async with pair(redis_url, prefix) as (owner, _sender, run_id):
        first, second = steer(run_id, "first"), steer(run_id, "second")
        client = owner._redis
        assert client is not None
        pipe = client.pipeline(transaction=True)  # both in the stream at once: one read
        for n, cmd in enumerate((first, second)):
            envelope = Envelope(request_id=f"r-{n}", reply_to="sender", to="owner", command=cmd)
            pipe.xadd(owner.keys.commands("owner"), envelope.fields())
        await pipe.execute()
        ids = {first.correlation_id: "first", second.correlation_id: "second"}

        async def taken() -> list[str]:
            events = owner.runtime.steering_history(run_id)
            return [
                ids[e.correlation_id]
                for e in events
                if e.type == "steering.accepted" and e.correlation_id in ids
            ]

        expected = ["first", "second"] if times == 1 else ["second"]
        await eventually(taken, lambda got: len(got) == len(expected))
        await eventually(
            lambda: client.xlen(owner.keys.commands("owner")), lambda n: n == 0
        )  # both answered
        assert await taken() == expected


async def test_a_claim_lost_to_an_outage_is_made_again_and_its_run_waits_for_it(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner's claim of a withdrawable request (a handed-off thread command) fails in a
    Redis outage: the entry is read again once Redis answers (it is no bug: nothing counts
    towards its rejection), and the next command for its run waits for it."""
    from redis.exceptions import ConnectionError as Lost

    claimed = CommandReader._claimed
    failures = [1]

    async def flaky(self: CommandReader, envelope: Envelope) -> bool:
        if failures[0]:
            failures[0] -= 1
            raise Lost("Connection reset by peer")
        return await claimed(self, envelope)

    monkeypatch.setattr(CommandReader, "_claimed", flaky)
    async with pair(redis_url, prefix) as (owner, _sender, run_id):
        first, second = steer(run_id, "first"), steer(run_id, "second")
        client = owner._redis
        assert client is not None
        pipe = client.pipeline(transaction=True)
        for n, cmd in enumerate((first, second)):
            envelope = Envelope(
                request_id=f"r-{n}", reply_to="sender", to="owner", command=cmd, withdrawable=n == 0
            )
            pipe.xadd(owner.keys.commands("owner"), envelope.fields())
        await pipe.execute()
        ids = {first.correlation_id: "first", second.correlation_id: "second"}

        async def taken() -> list[str]:
            return [
                ids[e.correlation_id]
                for e in owner.runtime.steering_history(run_id)
                if e.type == "steering.accepted" and e.correlation_id in ids
            ]

        await eventually(taken, lambda got: len(got) == 2)
        await eventually(lambda: client.xlen(owner.keys.commands("owner")), lambda n: n == 0)
        assert await taken() == ["first", "second"]
        assert failures == [0] and owner.counters.crashes == 0
        assert await client.get(owner.keys.claim("r-0")) == b"taken"
        await client.delete(owner.keys.claim("r-0"))
