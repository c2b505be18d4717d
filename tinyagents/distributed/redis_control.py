"""``RedisControl``: one worker's seat on the Redis control plane shared by several workers.

    async with Runtime(store="sqlite:///a.db") as rt, RedisControl(rt, url, worker_id="a") as rc:
        await rc.list_runs("acme")   # every live worker's runs, with their live counters
        await rc.submit(cmd)         # in-process for this worker's runs, else to their owner

Three jobs (the key names and entry fields are in ``tinyagents.distributed.wire``):

* **Mirror.** The worker's runs are written to a hash of its own as snapshots (``worker``,
  ``updated_at``, live counters), rewritten when an event says a run moved (at most every
  ``throttle_s``). Every ``heartbeat_s`` the worker renews its entry in the worker set and its
  hash's expiry (and rewrites the hash if Redis lost it); the hash expires ``ttl_s`` after the
  last heartbeat, so a dead worker's runs leave the listing by themselves.
* **Commands.** A command for a run another worker owns is appended to that worker's stream.
  The owner reads its stream in a consumer group, re-checks the actor's tenant against its local
  run, submits the command to its own runtime (its own policy pipeline and deduplication),
  sends the receipt to the sender's reply stream and only then acknowledges the entry: an entry
  read but not acknowledged when the worker died is read again after its restart (under the
  same ``worker_id``), where a durable store answers a command it already logged ``duplicate``.
  Only operators' commands (``SteeringActor.human``) travel between workers; malformed entries,
  entries addressed to another worker and other tenants' commands are refused and counted.
* **Outages.** Every Redis call that fails is logged (once per outage) and retried after a
  backoff that doubles from ``backoff_s[0]`` to ``backoff_s[1]``; runs never wait for Redis,
  and commands for this worker's own runs never touch it. Meanwhile ``submit`` to another
  worker's run raises ``ControlPlaneUnavailable``.

``url=None`` makes every job a no-op: ``submit`` and ``list_runs`` serve the local runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from tinyagents import _clock
from tinyagents.distributed.wire import (
    GROUP,
    Envelope,
    Keys,
    MalformedEnvelope,
    parse_reply,
    reply_fields,
)
from tinyagents.errors import ControlPlaneUnavailable, ReceiptTimeout, RuntimeClosed
from tinyagents.events.bus import Subscription
from tinyagents.protocol.commands import (
    HumanActor,
    ReceiptStatus,
    SteeringCommand,
    SteeringReceipt,
)
from tinyagents.runs.registry import RunRegistry
from tinyagents.steering.policies import not_found

#: ``redis.asyncio.Redis``: its stubs type every reply as a union of the sync and async
#: clients' answers, so the client is handled untyped here (the replies are checked instead).
Redis = Any

_log = logging.getLogger("tinyagents.distributed")

#: How many entries of a command stream (and of a reply stream) Redis keeps at most.
_STREAM_MAXLEN = 100_000
_REPLY_MAXLEN = 10_000
#: A reply stream nobody reads any more (its worker is gone) disappears after this long.
_REPLY_TTL_S = 300
_POLICY = "redis"
_REMEMBER_ANSWERS = 10_000


class _Later:
    """An entry to leave unacknowledged: the worker's next process answers it."""


_LATER = _Later()
_Answer = tuple[str, str, SteeringReceipt] | _Later | None


class ControlledRuntime(Protocol):
    """What ``RedisControl`` uses of a ``Runtime``."""

    runs: RunRegistry

    def subscribe(self, *, maxsize: int = ..., where: Any = ...) -> Subscription: ...

    def live_snapshots(self, run_ids: Iterable[str] | None = None) -> list[dict[str, Any]]: ...

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt: ...


@dataclass(slots=True)
class RedisCounters:
    """What went through this worker's seat (for tests, logs and metrics)."""

    sent: int = 0  # commands sent to another worker
    received: int = 0  # command entries read from this worker's stream
    answered: int = 0  # of them, answered with the runtime's receipt
    malformed: int = 0  # entries that did not read as a command envelope
    foreign: int = 0  # addressed to another worker, not an operator's, or another tenant's run
    mirror_writes: int = 0
    mirror_errors: int = 0
    redis_errors: int = 0  # failed Redis calls of every kind (each is retried after a backoff)


class _Backoff:
    """Exponential backoff between ``low`` and ``high`` seconds, reset by a success."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high
        self.delay = low

    def reset(self) -> None:
        self.delay = self.low

    async def wait(self) -> None:
        delay, self.delay = self.delay, min(self.delay * 2, self.high)
        await asyncio.sleep(delay)


class RedisControl:
    def __init__(
        self,
        runtime: ControlledRuntime,
        url: str | None,
        *,
        worker_id: str | None = None,
        prefix: str = "tinyagents",
        throttle_s: float = 0.1,
        heartbeat_s: float = 1.0,
        ttl_s: float = 10.0,
        backoff_s: tuple[float, float] = (1.0, 30.0),
        receipt_timeout_s: float = 5.0,
        block_s: float = 1.0,
        max_connections: int = 32,
    ) -> None:
        """``worker_id``: this worker's name on the control plane (default: the runtime's
        ``runtime_id``); give a restarted worker the same one so that it reads the commands
        its previous process left unacknowledged."""
        self.runtime = runtime
        self.url = url
        own = worker_id or getattr(runtime, "runtime_id", None) or _clock.new_id("worker")
        self.worker_id: str = own
        self.keys = Keys(prefix)
        self.throttle_s, self.heartbeat_s, self.ttl_s = throttle_s, heartbeat_s, ttl_s
        self.backoff_s = backoff_s
        self.receipt_timeout_s = receipt_timeout_s
        self.block_s = block_s
        self.max_connections = max_connections
        self.counters = RedisCounters()
        self._redis: Redis | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._sub: Subscription | None = None
        #: Sent commands waiting for their receipt, by request id (removed when answered or
        #: when the sender stops waiting).
        self._waiting: dict[str, asyncio.Future[SteeringReceipt]] = {}
        self._dirty: set[str] = set()
        self._mirrored: set[str] = set()
        self._outage: dict[str, bool] = {}  # per job: in an outage (log once)
        #: Receipts of the latest entries answered, by request id: an entry read again
        #: because its acknowledgement was lost gets the same receipt (oldest dropped first).
        self._answered: OrderedDict[str, SteeringReceipt] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.url is not None

    @property
    def connected(self) -> bool:
        """None of the three jobs is in an outage (true before ``start`` and without Redis)."""
        return not any(self._outage.get(job) for job in _JOBS)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> RedisControl:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect and start the three jobs. Redis being down is not an error here: the jobs
        keep retrying with backoff."""
        if self.url is None or self._tasks:
            return
        from redis.asyncio import BlockingConnectionPool
        from redis.asyncio import Redis as RedisClient
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        pool = BlockingConnectionPool.from_url(
            self.url,
            max_connections=self.max_connections,
            timeout=self.receipt_timeout_s,
            socket_connect_timeout=2.0,
            socket_timeout=self.block_s + 5.0,
            client_name=f"tinyagents:{self.keys.prefix}:{self.worker_id}",
            retry=Retry(NoBackoff(), 0),  # our jobs back off themselves
        )
        self._redis = RedisClient(connection_pool=pool)
        self._sub = self.runtime.subscribe(maxsize=10_000, where=_has_run)
        self._dirty.update(i.run_id for i in self.runtime.runs.list())
        reply_after = await self._first_reply_id()
        for job, name in (
            (self._mirror_job(), "mirror"),
            (self._command_job(), "commands"),
            (self._reply_job(reply_after), "replies"),
        ):
            self._tasks.append(asyncio.create_task(job, name=f"redis-{name}-{self.worker_id}"))

    async def aclose(self) -> None:
        """Stop the jobs, take this worker's runs off the listing and close every connection."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._sub is not None:
            self._sub.close()
            self._sub = None
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ControlPlaneUnavailable("the Redis control was closed"))
        self._waiting.clear()
        if self._redis is None:
            return
        redis, self._redis = self._redis, None
        try:
            async with asyncio.timeout(2.0):
                pipe = redis.pipeline(transaction=False)
                pipe.delete(self.keys.runs(self.worker_id))
                pipe.zrem(self.keys.workers, self.worker_id)
                await pipe.execute()
        except Exception as exc:  # the TTL takes them off instead
            _log.info("could not remove worker %s from the listing: %s", self.worker_id, exc)
        finally:
            await redis.aclose()
            await redis.connection_pool.disconnect()

    # ------------------------------------------------------------------ operator calls

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt:
        """Submit ``cmd`` where its run lives: to this worker's runtime, or to the owning
        worker through Redis, returning that worker's receipt.

        Raises ``ReceiptTimeout`` when the owner did not answer within ``receipt_timeout_s``
        (the command may still be applied later: its stream entry stays until answered) and
        ``ControlPlaneUnavailable`` when Redis cannot be reached."""
        run_id = await self._local_or_remote_run(cmd)
        if run_id is None or self._redis is None:
            return await self.runtime.submit(cmd)
        snapshot = await self._find(run_id)
        if snapshot is None or not _visible(cmd, snapshot):
            return _refuse(cmd, not_found(cmd), run_id=None)
        owner = str(snapshot["worker"])
        request_id = _clock.new_id("req")
        envelope = Envelope(request_id=request_id, reply_to=self.worker_id, to=owner, command=cmd)
        future: asyncio.Future[SteeringReceipt] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            try:
                await self._redis.xadd(
                    self.keys.commands(owner), envelope.fields(), maxlen=_STREAM_MAXLEN
                )
            except Exception as exc:
                raise ControlPlaneUnavailable(
                    f"could not send the command to worker {owner!r}: {exc}"
                ) from exc
            self.counters.sent += 1
            try:
                async with asyncio.timeout(self.receipt_timeout_s):
                    return await future
            except TimeoutError:
                # The entry stays in the owner's stream until answered: it may still apply.
                raise ReceiptTimeout(cmd.correlation_id, owner, self.receipt_timeout_s) from None
        finally:
            self._waiting.pop(request_id, None)

    async def list_runs(
        self, tenant_id: str | None, *, status: str | None = None
    ) -> list[dict[str, Any]]:
        """Snapshots of every live worker's runs (``tenant_id=None``: every tenant's), each with
        its ``worker``; this worker's own runs are read locally, so they show during an outage."""
        runs = {s["run_id"]: s for s in self._local_snapshots(tenant_id)}
        if self._redis is not None:
            try:
                for snapshot in await self._remote_snapshots():
                    if tenant_id is None or snapshot.get("tenant_id") == tenant_id:
                        runs.setdefault(snapshot["run_id"], snapshot)
            except Exception as exc:  # this worker's runs are still listed
                self._failed("list", exc)
            else:
                self._recovered("list")
        found = list(runs.values())
        if status is not None:
            found = [s for s in found if s.get("status") == status]
        return sorted(found, key=lambda s: str(s.get("created_at", "")))

    async def holds_elsewhere(self, cmd: SteeringCommand) -> bool:
        """Whether another live worker holds ``cmd``'s run (by the mirror); raises
        ``ControlPlaneUnavailable`` when Redis cannot be reached."""
        run_id = await self._local_or_remote_run(cmd)
        return run_id is not None and await self._find(run_id) is not None

    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        """One run's snapshot from the mirror (``None`` if no live worker has it); raises
        ``ControlPlaneUnavailable`` when Redis cannot be reached."""
        return await self._find(run_id)

    # ------------------------------------------------------------------ mirror job

    async def _mirror_job(self) -> None:
        assert self._sub is not None
        backoff = _Backoff(*self.backoff_s)
        next_beat = 0.0
        while True:
            wait = max(0.0, next_beat - time.monotonic())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait if not self._dirty else 0):
                    event = await self._sub.get()
                    if event is None:  # the runtime closed its bus
                        return
                    self._dirty.add(event.run_id or "")
            await asyncio.sleep(self.throttle_s)  # gather what else moves meanwhile
            self._drain()
            beat = time.monotonic() >= next_beat
            try:
                await self._write_mirror(beat=beat)
            except Exception as exc:
                self.counters.mirror_errors += 1
                self._failed("mirror", exc)
                self._dirty.update(self._mirrored)  # rewrite everything once back
                self._dirty.update(i.run_id for i in self.runtime.runs.list())
                await backoff.wait()
                next_beat = 0.0
                continue
            self._recovered("mirror")
            backoff.reset()
            if beat:
                next_beat = time.monotonic() + self.heartbeat_s

    def _drain(self) -> None:
        assert self._sub is not None
        while (event := self._sub.get_nowait()) is not None:
            self._dirty.add(event.run_id or "")
        if self._sub.dropped:  # some moves were not seen: rewrite every run
            self._sub.dropped = 0
            self._dirty.update(i.run_id for i in self.runtime.runs.list())

    async def _write_mirror(self, *, beat: bool) -> None:
        assert self._redis is not None
        key = self.keys.runs(self.worker_id)
        dirty, self._dirty = self._dirty, set()
        if beat:  # and the released runs still listed, to take them off
            dirty |= {r for r in self._mirrored if r not in self.runtime.runs}
        try:
            snapshots = {
                s["run_id"]: json.dumps(self._stamp(s)) for s in self.runtime.live_snapshots(dirty)
            }
            gone = [r for r in dirty if r not in snapshots and r in self._mirrored]
            pipe = self._redis.pipeline(transaction=False)
            if snapshots:
                pipe.hset(key, mapping=snapshots)
            if gone:
                pipe.hdel(key, *gone)
            if beat:
                pipe.zadd(self.keys.workers, {self.worker_id: time.time()})
                pipe.zremrangebyscore(self.keys.workers, 0, time.time() - self.ttl_s)
            if snapshots or beat:
                pipe.pexpire(key, int(self.ttl_s * 1000))
            if beat:
                pipe.hlen(key)
            replies = await pipe.execute() if len(pipe) else []
        except BaseException:
            self._dirty |= dirty
            raise
        self._mirrored.update(snapshots)
        self._mirrored.difference_update(gone)
        self.counters.mirror_writes += 1
        if beat and replies[-1] != len(self._mirrored):  # Redis lost the hash (restarted empty)
            self._dirty.update(i.run_id for i in self.runtime.runs.list())

    # ------------------------------------------------------------------ command job

    async def _command_job(self) -> None:
        assert self._redis is not None
        redis, stream = self._redis, self.keys.commands(self.worker_id)
        backoff = _Backoff(*self.backoff_s)
        backlog = True  # first the entries read before a crash and never acknowledged
        while True:
            try:
                if backlog:
                    await _ensure_group(redis, stream)
                read = await redis.xreadgroup(
                    GROUP,
                    self.worker_id,
                    {stream: "0" if backlog else ">"},
                    count=100,
                    block=None if backlog else int(self.block_s * 1000),
                )
                entries = read[0][1] if read else []
                if backlog and not entries:
                    backlog = False
                    continue
                await self._answer_all(redis, stream, entries)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if _no_group(exc):  # Redis came back empty: make the group again
                    backlog = True
                    continue
                self._failed("commands", exc)
                backlog = True
                await backoff.wait()
                continue
            self._recovered("commands")
            backoff.reset()

    async def _answer_all(self, redis: Redis, stream: str, entries: list[Any]) -> None:
        self.counters.received += len(entries)
        answers = await asyncio.gather(*(self._answer(fields) for _, fields in entries))
        pipe = redis.pipeline(transaction=False)
        done: list[Any] = []
        for (entry_id, _), answer in zip(entries, answers, strict=True):
            if isinstance(answer, _Later):
                continue  # this worker is closing: its next process answers it
            done.append(entry_id)
            if answer is not None:
                reply_to, request_id, receipt = answer
                reply_key = self.keys.replies(reply_to)
                pipe.xadd(reply_key, reply_fields(request_id, receipt), maxlen=_REPLY_MAXLEN)
                pipe.expire(reply_key, _REPLY_TTL_S)
        if done:  # acknowledged only with (after) the receipts
            pipe.xack(stream, GROUP, *done)
            pipe.xdel(stream, *done)
        if len(pipe):
            await pipe.execute()

    async def _answer(self, raw: dict[bytes, bytes] | None) -> _Answer:
        """(reply_to, request_id, receipt) for one entry; ``None``: drop it unanswered;
        ``_LATER``: leave it unacknowledged."""
        try:
            envelope = Envelope.parse(raw)
        except MalformedEnvelope as exc:
            self.counters.malformed += 1
            _log.warning("dropped a malformed command entry: %s", exc)
            if exc.request_id and exc.reply_to:
                receipt = SteeringReceipt.issue(
                    ReceiptStatus.REJECTED, "", None, f"malformed command: {exc}", _POLICY
                )
                return exc.reply_to, exc.request_id, receipt
            return None
        cmd = envelope.command
        earlier = self._answered.get(envelope.request_id)
        if earlier is not None:  # read again (its acknowledgement was lost): same answer
            return envelope.reply_to, envelope.request_id, earlier
        refusal = self._foreign(envelope)
        if refusal is not None:
            self.counters.foreign += 1
            _log.warning("refused command %s from Redis: %s", cmd.correlation_id, refusal)
            receipt = _refuse(cmd, refusal, run_id=None)
        else:
            try:
                receipt = await self.runtime.submit(cmd)
            except RuntimeClosed:
                return _LATER
            except Exception as exc:  # a store that cannot log it: the sender learns why
                receipt = _refuse(cmd, f"the owner could not take it: {exc}", run_id=None)
        self.counters.answered += 1
        self._answered[envelope.request_id] = receipt
        if len(self._answered) > _REMEMBER_ANSWERS:
            self._answered.popitem(last=False)
        return envelope.reply_to, envelope.request_id, receipt

    def _foreign(self, envelope: Envelope) -> str | None:
        """Why the owner refuses this command outright, or ``None`` to submit it."""
        cmd = envelope.command
        if envelope.to != self.worker_id:
            return f"addressed to worker {envelope.to!r}, not {self.worker_id!r}"
        if not isinstance(cmd.actor, HumanActor):
            return "only operators' commands (human actors) travel between workers"
        run_id = _target_run(cmd)
        thread_id = getattr(cmd.target, "thread_id", None)
        if run_id is not None:
            handle = self.runtime.runs.get(run_id)
        else:
            handle = self.runtime.runs.for_thread(thread_id) if thread_id else None
        if handle is None or handle.info.tenant_id != cmd.actor.tenant_id:
            return not_found(cmd)  # never confirm that another tenant's run exists
        return None

    # ------------------------------------------------------------------ reply job

    async def _first_reply_id(self) -> str:
        """Read replies from now on (Redis's clock: the ids are its own)."""
        assert self._redis is not None
        try:
            seconds, micros = await self._redis.time()
        except Exception as exc:
            self._failed("replies", exc)
            return "$"
        return f"{seconds * 1000 + micros // 1000}-0"

    async def _reply_job(self, after: str) -> None:
        assert self._redis is not None
        redis, stream = self._redis, self.keys.replies(self.worker_id)
        backoff = _Backoff(*self.backoff_s)
        while True:
            if after == "$":  # Redis was down at start: read from its clock's now, once back
                after = await self._first_reply_id()
            try:
                read = await redis.xread({stream: after}, count=500, block=int(self.block_s * 1000))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed("replies", exc)
                await backoff.wait()
                continue
            self._recovered("replies")
            backoff.reset()
            for entry_id, fields in read[0][1] if read else []:
                after = entry_id
                reply = parse_reply(fields)
                if reply is None:
                    self.counters.malformed += 1
                    continue
                future = self._waiting.get(reply[0])
                if future is not None and not future.done():
                    future.set_result(reply[1])

    # ------------------------------------------------------------------ lookups

    async def _local_or_remote_run(self, cmd: SteeringCommand) -> str | None:
        """The run id to send ``cmd`` to through Redis, or ``None`` to submit it here (its run
        is here, or no other worker has it)."""
        if self._redis is None:
            return None
        run_id = _target_run(cmd)
        if run_id is not None:
            return None if run_id in self.runtime.runs else run_id
        thread_id = getattr(cmd.target, "thread_id", None)
        if thread_id is None or self.runtime.runs.for_thread(thread_id) is not None:
            return None
        try:
            snapshots = await self._remote_snapshots()
        except Exception as exc:
            raise ControlPlaneUnavailable(f"could not read the run listing: {exc}") from exc
        for snapshot in snapshots:
            if snapshot.get("thread_id") == thread_id and snapshot.get("status") in _LIVE:
                return str(snapshot["run_id"])
        return None

    async def _find(self, run_id: str) -> dict[str, Any] | None:
        assert self._redis is not None
        try:
            workers = await self._live_workers()
            pipe = self._redis.pipeline(transaction=False)
            for worker in workers:
                pipe.hget(self.keys.runs(worker), run_id)
            found = await pipe.execute()
        except Exception as exc:
            raise ControlPlaneUnavailable(f"could not read the run listing: {exc}") from exc
        for raw in found:
            if raw is not None:
                snapshot = _load(raw)
                if snapshot is not None:
                    return snapshot
        return None

    async def _live_workers(self) -> list[str]:
        assert self._redis is not None
        raw = await self._redis.zrangebyscore(self.keys.workers, time.time() - self.ttl_s, "+inf")
        return [w.decode() for w in raw]

    async def _remote_snapshots(self) -> Iterable[dict[str, Any]]:
        assert self._redis is not None
        workers = [w for w in await self._live_workers() if w != self.worker_id]
        pipe = self._redis.pipeline(transaction=False)
        for worker in workers:
            pipe.hvals(self.keys.runs(worker))
        found: list[dict[str, Any]] = []
        for values in await pipe.execute():
            found.extend(s for s in map(_load, values) if s is not None)
        return found

    def _local_snapshots(self, tenant_id: str | None) -> list[dict[str, Any]]:
        return [
            self._stamp(s)
            for s in self.runtime.live_snapshots()
            if tenant_id is None or s["tenant_id"] == tenant_id
        ]

    def _stamp(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        """The runtime's live snapshot (``owner``: the runtime's id) with ``worker``: the
        worker whose stream takes the run's commands."""
        snapshot["worker"] = self.worker_id
        return snapshot

    # ------------------------------------------------------------------ outages

    def _failed(self, job: str, exc: Exception) -> None:
        self.counters.redis_errors += 1
        if not self._outage.get(job):
            self._outage[job] = True
            _log.warning(
                "Redis control (%s, worker %s): %s: %s; retrying with backoff",
                job,
                self.worker_id,
                type(exc).__name__,
                exc,
            )

    def _recovered(self, job: str) -> None:
        if self._outage.get(job):
            self._outage[job] = False
            _log.warning("Redis control (%s, worker %s): reconnected", job, self.worker_id)


_JOBS = ("mirror", "commands", "replies")
_LIVE = frozenset({"running", "paused", "interrupted"})


def _has_run(event: Any) -> bool:
    return event.run_id is not None


def _target_run(cmd: SteeringCommand) -> str | None:
    run_id = getattr(cmd.target, "run_id", None)
    return run_id if isinstance(run_id, str) else None


def _visible(cmd: SteeringCommand, snapshot: dict[str, Any]) -> bool:
    """An operator sees only their tenant's runs (the owner checks again)."""
    actor = cmd.actor
    return not isinstance(actor, HumanActor) or snapshot.get("tenant_id") == actor.tenant_id


def _refuse(cmd: SteeringCommand, reason: str, *, run_id: str | None) -> SteeringReceipt:
    return SteeringReceipt.issue(
        ReceiptStatus.REJECTED, cmd.correlation_id, run_id, reason, _POLICY
    )


def _load(raw: bytes | str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "run_id" in value else None


async def _ensure_group(redis: Redis, stream: str) -> None:
    from redis.exceptions import ResponseError

    try:
        await redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def _no_group(exc: Exception) -> bool:
    return "NOGROUP" in str(exc)


__all__ = ["ControlledRuntime", "RedisControl", "RedisCounters"]
