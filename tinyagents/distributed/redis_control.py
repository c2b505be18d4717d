"""``RedisControl``: one worker's seat on the Redis control plane shared by several workers.

    async with Runtime(store="sqlite:///a.db") as rt, RedisControl(rt, url, worker_id="a") as rc:
        await rc.list_runs("acme")   # every live worker's runs, with their live counters
        await rc.submit(cmd)         # in-process for this worker's runs, else to their owner

Four jobs run while it is started (the key names and entry fields are in
``tinyagents.distributed.wire``; docs/deploy.md tells the whole story):

* the **mirror** (``RunMirror``) writes this worker's runs to Redis for every worker to list;
* the **command reader** (``CommandReader``) answers the commands other workers send for
  this worker's runs, through this worker's own runtime;
* the **reply reader** (here) hands the receipts of the commands this worker sent to the
  ``submit`` calls waiting for them;
* the **thread job** (here) hands an operator's command deferred here for a thread's next run
  to the worker where a run of that thread is listed.

A command for a run another worker owns is appended to that worker's stream; the owner
answers it with its runtime's receipt. Only operators' commands (``SteeringActor.human``)
travel between workers.

**Outages.** Every Redis call that fails in an outage (``outage``: a lost connection, a
timeout...) is logged (once per outage) and retried after a backoff that doubles from
``backoff_s[0]`` to ``backoff_s[1]``; runs never wait for Redis, and commands for this
worker's own runs never touch it. Meanwhile ``submit`` to another worker's run raises
``ControlPlaneUnavailable``.

**Crashes.** A job that dies of any other error (a bug) is logged with its traceback and
started again after the same backoff (``supervise``); until it gets through a
round, ``connected`` is false (``/readyz``: Redis unavailable). The reply job goes on from
the last reply it read: a ``submit`` whose receipt came meanwhile gets it, one whose receipt
it died on gets ``ReceiptTimeout``.

``url=None`` makes every job a no-op: ``submit`` and ``list_runs`` serve the local runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

from tinyagents import _bounds, _clock
from tinyagents.distributed._base import (
    POLICY,
    Backoff,
    ControlledRuntime,
    Outages,
    Redis,
    RedisCounters,
    hidden,
    log,
    outage,
    redis_answered,
    supervise,
    target_run,
)
from tinyagents.distributed.mirror import RunMirror, epoch_seconds, redis_now
from tinyagents.distributed.owner import CommandReader
from tinyagents.distributed.seat import Seat
from tinyagents.distributed.wire import (
    CLAIM,
    CLAIM_TTL_S,
    SENT_TTL_S,
    SERVER_MARK,
    STARTED,
    WITHDRAWN,
    Envelope,
    HandedBack,
    Keys,
    entry_position,
    parse_reply,
)
from tinyagents.errors import (
    ConfigurationError,
    ControlPlaneUnavailable,
    DamagedData,
    InvalidCommandError,
    ReceiptTimeout,
    StoreError,
)
from tinyagents.protocol.commands import (
    HumanActor,
    SteeringCommand,
    SteeringReceipt,
    dedupe_scope,
)
from tinyagents.protocol.ids import id_problem, shown_id, shown_repr
from tinyagents.protocol.state import UNFINISHED_RUN_STATUSES, RunStatus
from tinyagents.store.base import read_snapshot, snapshot_time
from tinyagents.store.urls import redacted

_T = TypeVar("_T")

#: Appends a command to a worker's stream unless the stream is gone (the worker stopped:
#: nil) or holds ``ARGV[1]`` entries already (-1), and marks its request sent (``KEYS[2]``):
#: an append tried again because its reply was lost finds the mark and appends nothing (0).
#: Answered entries are deleted, so what a stream holds is what its worker has not answered;
#: trimming it (``MAXLEN``) would drop the oldest of those without a word to their senders.
_BOUNDED_XADD = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return -1 end
redis.call('SET', KEYS[2], '1', 'EX', ARGV[2])
return redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
"""
_JOBS = ("mirror", "commands", "replies")
#: Why an operator's thread command a durable steering log holds here is rejected once its
#: thread's run is listed on another worker (``_refuse_logged``): the log's row cannot be
#: handed there, and the run there would never see it.
ELSEWHERE = (
    "the thread's run is on worker {owner!r}, and a command deferred in this worker's "
    "durable steering log is not handed to another worker: send it again (a new "
    "correlation id) to reach that run"
)
#: The reason a thread command deferred in a steering log this worker shares with the worker
#: of the thread's live run is ended ``rejected``: that run registered before the command was
#: logged, so it never reads it (a run registering later takes it from the log), and it waited
#: ``receipt_timeout_s`` untaken.
PASSED_OVER = (
    "the thread's run on worker {owner!r} started before this command was logged in the "
    "steering log the workers share, so it does not take it: send it again (a new "
    "correlation id) to reach that run"
)
#: How many runtimes known to share this worker's steering log ``RedisControl`` remembers.
_SHARING_KEPT = 1024


#: How ``aclose`` waits for a job to stop: attempts, and seconds each.
_STOP_ATTEMPTS = 5
_STOP_WAIT_S = 1.0
#: How long ``aclose`` answers the commands left in this worker's stream, at most.
_DRAIN_S = 10.0


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
        max_unanswered: int = 100_000,
    ) -> None:
        """``worker_id``: this worker's name on the control plane (default: the runtime's
        ``runtime_id``); give a restarted worker the same one so that it reads the commands
        its previous process left unacknowledged. ``max_unanswered``: a command for a worker
        whose stream holds that many commands it has not answered (it is stuck, or stopped
        with them left) is not sent: ``submit`` raises ``ControlPlaneUnavailable``. Settings that cannot work (a TTL not
        longer than a heartbeat, a zero ``block_s``, which Redis reads as "wait for ever", a
        blank name, a ``worker_id`` that breaks the id rule...) are a ``ConfigurationError``
        naming the argument."""
        _check_settings(
            worker_id=worker_id,
            prefix=prefix,
            throttle_s=throttle_s,
            heartbeat_s=heartbeat_s,
            ttl_s=ttl_s,
            backoff_s=backoff_s,
            receipt_timeout_s=receipt_timeout_s,
            block_s=block_s,
            max_connections=max_connections,
            max_unanswered=max_unanswered,
        )
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
        self.max_unanswered = max_unanswered
        self.counters = RedisCounters()
        self.outages = Outages(own, self.counters)
        self.seat = Seat(self.keys.seat(own), own, ttl_s=ttl_s, heartbeat_s=heartbeat_s)
        self.mirror = RunMirror(
            runtime,
            self.keys,
            own,
            throttle_s=throttle_s,
            heartbeat_s=heartbeat_s,
            ttl_s=ttl_s,
            backoff_s=backoff_s,
            counters=self.counters,
            outages=self.outages,
            seat=self.seat,
        )
        self.reader = CommandReader(
            runtime,
            self.keys,
            own,
            block_s=block_s,
            backoff_s=backoff_s,
            counters=self.counters,
            outages=self.outages,
            seat=self.seat,
        )
        self._redis: Redis | None = None
        self._tasks: list[asyncio.Task[None]] = []
        #: The id of the last entry the reply job read from this worker's reply stream.
        self._reply_after = "0-0"
        #: Sent commands waiting for their receipt, by request id (removed when answered or
        #: when the sender stops waiting).
        self._waiting: dict[str, asyncio.Future[SteeringReceipt]] = {}
        #: Set by a command sent: Redis is back, the reply job stops its backoff to read the
        #: receipt (it would sleep out up to ``backoff_s[1]``, past ``receipt_timeout_s``).
        self._sent = asyncio.Event()
        #: The thread commands waiting here that cannot be sent (too large for the wire), by
        #: ``_key``: the thread job tries them no more.
        self._unsendable: set[tuple[str, str]] = set()
        #: Whether each runtime (by ``runtime_id``) shares this worker's durable steering log
        #: (``_shares_log``), at most ``_SHARING_KEPT``, oldest dropped first.
        self._sharing: dict[str, bool] = {}
        #: When each thread command deferred in the shared log was first seen here untaken
        #: while its thread's live run is on a worker sharing the log (``monotonic``), by
        #: ``_key``: once ``receipt_timeout_s`` passed, that run passed it over.
        self._passed_over: dict[tuple[str, str], float] = {}
        #: Held while thread commands are handed to another worker, and by a thread command
        #: sent while some wait here: the thread's commands reach its run in the order sent.
        self._handing = asyncio.Lock()
        #: The thread commands handed to another worker whose receipt is late, each waiting
        #: for it (``_handed``), taken by no run here meanwhile.
        self._in_doubt: set[asyncio.Task[None]] = set()
        #: The threads whose command is being handed to another worker (``_hand_off``), by
        #: how many: off this router's books meanwhile, yet a command sent for the thread
        #: waits for it (``_waits_here``), lest it reach the thread's run first.
        self._handing_threads: dict[str, int] = {}
        #: This worker's Redis user may not run ``INFO`` (``_server_id``; logged once).
        self._info_denied = False

    @property
    def enabled(self) -> bool:
        return self.url is not None

    @property
    def connected(self) -> bool:
        """None of the three jobs is in an outage (true before ``start`` and without Redis),
        no job died and is still to get through a round since its restart (``supervise``),
        and this process still holds its worker id (one that lost it to another process
        serves no cross-worker control: ``/readyz`` says Redis is unavailable)."""
        return not self.seat.lost and not self.outages.down(_JOBS)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> RedisControl:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect, take this worker id's seat and start the three jobs. Redis being down is
        not an error here: the jobs keep retrying with backoff (and the mirror takes the seat
        once it is back). A URL the Redis client cannot read, or a worker id a live process
        holds (``tinyagents.distributed.seat``), or one Redis answers refusing (a database
        number it does not have, credentials it does not take), is a
        ``ConfigurationError``."""
        if self.url is None or self._tasks:
            return
        from redis.asyncio import BlockingConnectionPool
        from redis.asyncio import Redis as RedisClient
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        try:
            _check_database(self.url)
            pool = BlockingConnectionPool.from_url(
                self.url,
                max_connections=self.max_connections,
                timeout=self.receipt_timeout_s,
                socket_connect_timeout=2.0,
                socket_timeout=self.block_s + 5.0,
                client_name=f"tinyagents:{self.keys.prefix}:{self.worker_id}",
                retry=Retry(NoBackoff(), 0),  # our jobs back off themselves
            )
        except (ValueError, TypeError) as exc:  # the client cannot read the URL at all
            raise ConfigurationError(
                f"not a usable Redis URL {redacted(self.url)!r}: {exc}; use "
                "redis://[:PASSWORD@]HOST:PORT/DB (or rediss://, unix://PATH)"
            ) from None
        redis = RedisClient(connection_pool=pool)
        try:
            await self.seat.claim(redis)
        except Exception as exc:
            if outage(exc) and not _refused(exc):
                # Redis down: the jobs retry, and the mirror's first heartbeat takes the seat
                self.outages.failed("mirror", exc)
            else:
                await redis.aclose()
                await pool.disconnect()
                if not _refused(exc) and redis_answered(exc):  # WRONGTYPE: not a seat's key
                    raise ConfigurationError(
                        f"Redis at {redacted(self.url)!r} holds another kind of key at this "
                        f"worker's seat {self.seat.key!r} ({exc}): another program keeps its "
                        "keys under this prefix; give this deployment another prefix (serve's --redis-prefix)"
                    ) from None
                if not _refused(exc):
                    raise  # a ConfigurationError, or a bug
                raise ConfigurationError(
                    f"Redis at {redacted(self.url)!r} refuses this worker: {exc}; check the "
                    "URL's database number, user and password"
                ) from None
        self._redis = redis
        self.mirror.open()
        self._reply_after = await self._first_reply_id()
        jobs: dict[str, Callable[[], Awaitable[None]]] = {
            "mirror": functools.partial(self.mirror.run, redis),
            "commands": functools.partial(self.reader.run, redis),
            "replies": self._reply_job,
            "threads": self._thread_job,
        }
        for name, job in jobs.items():
            self._tasks.append(
                asyncio.create_task(
                    supervise(name, job, self.outages, self.backoff_s),
                    name=f"redis-{name}-{self.worker_id}",
                )
            )

    async def aclose(self) -> None:
        """Stop the jobs, take this worker's runs off the listing, answer the commands left in
        its stream (``CommandReader.drain``: a command that arrived after the last read gets
        its receipt too, and one sent later fails at once with ``ControlPlaneUnavailable``)
        and close every connection. Close it before its runtime: the runtime answers them.
        First, the thread commands handed to another worker whose answer is still to come
        (``_in_doubt``) get ``receipt_timeout_s`` more to have it (``_settle_in_doubt``)."""
        await self._settle_in_doubt()
        await self._stop_jobs()
        self.mirror.close()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ControlPlaneUnavailable("the Redis control was closed"))
        self._waiting.clear()
        if self._redis is None:
            return
        redis, self._redis = self._redis, None
        if self.seat.lost:  # the keys under this worker id are another process's now
            self.reader.abandon()
            self.seat.forget()
            await redis.aclose()
            await redis.connection_pool.disconnect()
            return
        try:
            async with asyncio.timeout(2.0):  # first: no sender picks this worker any more
                pipe = redis.pipeline(transaction=False)
                pipe.delete(self.keys.runs(self.worker_id))
                pipe.zrem(self.keys.workers, self.worker_id)
                await pipe.execute()
            async with asyncio.timeout(_DRAIN_S):
                await self.reader.drain(redis)
            await self.seat.release(redis)
        except Exception as exc:  # the TTL takes them off; the next process answers the rest
            log.info(
                "worker %s: could not leave the control plane cleanly: %s", self.worker_id, exc
            )
        finally:
            self.reader.abandon()  # the drain ran out of time: the next process answers
            self.seat.forget()
            await redis.aclose()
            await redis.connection_pool.disconnect()

    async def _settle_in_doubt(self) -> None:
        """Wait, ``receipt_timeout_s`` at most, for the answers to the thread commands handed
        to another worker and still in doubt, the jobs still running (the reply job reads
        them), after stopping the thread job (no new hand-off begins). Stopped at once, each
        went back to this worker's router while its owner might still take it: applied
        there, and failed here by the runtime's close (or kept by a durable log for this
        worker's next runtime, which applied it again). One with no answer by then still
        goes back: its owner stopped answering (a crash, a stall)."""
        threads = [t for t in self._tasks if t.get_name().startswith("redis-threads-")]
        for task in threads:
            task.cancel()
        if threads:
            await asyncio.wait(threads, timeout=_STOP_WAIT_S)
        if not self._in_doubt or self._redis is None or self.seat.lost:
            return
        deadline = time.monotonic() + self.receipt_timeout_s
        while self._in_doubt and (left := deadline - time.monotonic()) > 0:
            await asyncio.wait(set(self._in_doubt), timeout=left)
        if self._in_doubt:
            log.warning(
                "worker %s: closing with %d thread command(s) handed to another worker and "
                "still unanswered after %.1f s; they wait on here",
                self.worker_id,
                len(self._in_doubt),
                self.receipt_timeout_s,
            )

    async def _stop_jobs(self) -> None:
        """Cancel the jobs and wait for them, boundedly. redis-py (8.1) can swallow a cancel
        that lands while a blocking read starts, and the job reads on: such a job is cancelled
        again, and its connections are dropped under it (the read fails, the cancel lands)."""
        tasks, self._tasks = [*self._tasks, *self._in_doubt], []
        for task in tasks:
            task.cancel()
        pending = {t for t in tasks if not t.done()}
        for _ in range(_STOP_ATTEMPTS):
            if not pending:
                return
            _, pending = await asyncio.wait(pending, timeout=_STOP_WAIT_S)
            if pending and self._redis is not None:
                with contextlib.suppress(Exception):
                    await self._redis.connection_pool.disconnect()
            for task in pending:
                task.cancel()
        if pending:
            log.warning(
                "worker %s: %d Redis job(s) did not stop: %s",
                self.worker_id,
                len(pending),
                ", ".join(t.get_name() for t in pending),
            )

    # ------------------------------------------------------------------ operator calls

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt:
        """Submit ``cmd`` where its run lives: to this worker's runtime, or to the owning
        worker through Redis, returning that worker's receipt.

        Raises ``ReceiptTimeout`` when the owner did not answer within ``receipt_timeout_s``
        (the command may still be applied later: its stream entry stays until answered) and
        ``ControlPlaneUnavailable`` when Redis cannot be reached, or when the owner stopped
        before it took the command (its stream is gone, or it handed the command back: then
        the command was not applied, and the caller may send it elsewhere, e.g. the store)."""
        run_id = await self._local_or_remote_run(cmd)
        if run_id is None or self._redis is None:
            return await self.runtime.submit(cmd)
        # a run taken over from this worker: its new owner's (this worker's entry is stale)
        fenced = self.runtime.fenced(run_id)
        snapshot = await self._listed(
            run_id, lambda s: _visible(cmd, s) and not (fenced and s["worker"] == self.worker_id)
        )
        if snapshot is None:  # a fenced run's refusal here names its new owner
            return await self.runtime.submit(cmd) if fenced else hidden(cmd)
        owner = str(snapshot["worker"])
        thread_id = getattr(cmd.target, "thread_id", None)
        if thread_id is None or not self._waits_here(thread_id):
            return await self._send(cmd, owner)
        # Commands deferred here for the thread go first, as its run takes them first in one
        # process (the thread job would hand them over only at its next round).
        async with self._handing:
            await self._hand_over_thread(
                thread_id, self.runtime.runs.thread_tenant(cmd.actor), owner
            )
            return await self._send(cmd, owner)

    async def _send(
        self,
        cmd: SteeringCommand,
        owner: str,
        *,
        request_id: str | None = None,
        withdrawable: bool = False,
    ) -> SteeringReceipt:
        """Append ``cmd`` to ``owner``'s stream and wait for its receipt (see ``submit``).
        ``withdrawable``: this worker may take it back (``_withdraw``)."""
        request_id = request_id or _clock.new_id("req")
        # a command too large for the wire: InvalidCommandError
        fields = self._envelope(cmd, owner, request_id, withdrawable).fields()
        future: asyncio.Future[SteeringReceipt] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            try:
                added = await self._append(owner, request_id, fields)
            except Exception as exc:
                raise ControlPlaneUnavailable(
                    f"could not send the command to worker {owner!r}: {exc}"
                ) from exc
            if added is None:
                raise ControlPlaneUnavailable(
                    f"worker {owner!r} has stopped (its command stream is gone); the command "
                    "was not sent"
                )
            if added == -1:
                self.counters.refused_full += 1
                raise ControlPlaneUnavailable(
                    f"worker {owner!r} has {self.max_unanswered} commands it has not answered "
                    "yet (it is stuck or stopped); the command was not sent"
                )
            self.counters.sent += 1
            self._sent.set()
            try:
                async with asyncio.timeout(self.receipt_timeout_s):
                    return await future
            except TimeoutError:
                # The entry stays in the owner's stream until answered: it may still apply.
                raise ReceiptTimeout(cmd.correlation_id, owner, self.receipt_timeout_s) from None
        finally:
            self._waiting.pop(request_id, None)

    async def _append(self, owner: str, request_id: str, envelope: dict[str, str]) -> Any:
        """``_BOUNDED_XADD`` of ``envelope`` (an ``Envelope``'s fields) to ``owner``'s stream. No stream: a worker that
        stopped gracefully deleted it once it had answered all of it, and nobody would read an
        entry appended now. An attempt whose connection was lost may have appended (Redis ran
        it, its reply was lost): it is tried again once, on another connection, and the mark
        of the request tells that it was sent, lest the sender be told it was not while its
        owner applies it (and the API send it again through the store)."""
        from redis.exceptions import ConnectionError as Lost
        from redis.exceptions import TimeoutError as Late

        assert self._redis is not None
        keys = (self.keys.commands(owner), self.keys.sent(request_id))
        fields = [x for pair in envelope.items() for x in pair]
        for attempt in range(2):
            try:
                return await self._redis.eval(
                    _BOUNDED_XADD, 2, *keys, self.max_unanswered, SENT_TTL_S, *fields
                )
            except (Lost, Late):
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def list_runs(
        self, tenant_id: str | None, *, status: str | None = None
    ) -> list[dict[str, Any]]:
        """Snapshots of every live worker's runs (``tenant_id=None``: every tenant's), each with
        its ``worker``; this worker's own runs are read locally, so they show during an outage,
        and when Redis refuses the listing (a key of another type under the prefix: logged)."""
        runs = {s["run_id"]: s for s in self._local_snapshots(tenant_id)}
        if self._redis is not None:
            try:
                for snapshot in await self._remote_snapshots():
                    if tenant_id is None or snapshot.get("tenant_id") == tenant_id:
                        runs.setdefault(snapshot["run_id"], snapshot)
            except Exception as exc:  # this worker's runs are still listed
                if outage(exc):
                    self.outages.failed("list", exc)
                elif redis_answered(exc):
                    log.error(
                        "worker %s: Redis refused to list the other workers' runs: %s",
                        self.worker_id,
                        exc,
                    )
                else:
                    raise  # a bug
            else:
                self.outages.recovered("list")
        found = list(runs.values())
        if status is not None:
            found = [s for s in found if s.get("status") == status]
        return sorted(found, key=lambda s: str(s.get("created_at", "")))

    async def holds_elsewhere(self, cmd: SteeringCommand) -> bool:
        """Whether another live worker holds ``cmd``'s run (by the mirror); raises
        ``ControlPlaneUnavailable`` when Redis cannot be reached."""
        run_id = await self._local_or_remote_run(cmd)
        if run_id is None:
            return False
        return await self._listed(run_id, lambda s: s["worker"] != self.worker_id) is not None

    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        """One run's snapshot from the mirror (``None`` if no live worker has it; of two
        workers listing it, the one where it is live); raises ``ControlPlaneUnavailable``
        when Redis cannot be reached."""
        return await self._find(run_id)

    # ------------------------------------------------------------------ reply job

    async def _first_reply_id(self) -> str:
        """Read replies from now on (Redis's clock: the ids are its own). With Redis down,
        from the stream's start: a command sent once Redis is back, before the reply job's
        first read, is answered before any "now" that job could take then (older replies,
        a previous process's, match no waiting request and are skipped)."""
        assert self._redis is not None
        try:
            seconds, micros = await self._redis.time()
        except Exception as exc:
            if not outage(exc):
                raise
            self.outages.failed("replies", exc)
            return "0-0"
        return f"{seconds * 1000 + micros // 1000}-0"

    async def _reply_job(self) -> None:
        """Hand each receipt read from this worker's reply stream to the ``submit`` waiting
        for it. Where it has read to is kept (``_reply_after``) across a restart after a
        crash (``supervise``): the receipts that came meanwhile are read then, and the entry
        it died on (read first, then handled) is not read again."""
        assert self._redis is not None
        redis, stream = self._redis, self.keys.replies(self.worker_id)
        backoff = Backoff(*self.backoff_s)
        lost = False  # Redis was out: it may have come back empty, on another clock
        while True:
            self._sent.clear()  # a command sent from now on shows that Redis is back
            try:
                if lost:
                    await self._reply_stream_again(redis, stream)
                    lost = False
                after = self._reply_after
                read = await redis.xread({stream: after}, count=500, block=int(self.block_s * 1000))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not outage(exc):
                    raise  # a bug: supervise logs it and restarts the job
                self.outages.failed("replies", exc)
                lost = True
                await backoff.wait(self._sent)
                continue
            self.outages.recovered("replies")
            backoff.reset()
            for entry_id, fields in read[0][1] if read else []:
                self._reply_after = entry_id
                reply = parse_reply(fields)
                if reply is None:
                    self.counters.malformed += 1
                    continue
                future = self._waiting.get(reply[0])
                if future is None or future.done():
                    continue
                answer = reply[1]
                if isinstance(answer, HandedBack):
                    future.set_exception(
                        ControlPlaneUnavailable(f"the command was not taken: {answer.reason}")
                    )
                else:
                    future.set_result(answer)

    async def _reply_stream_again(self, redis: Redis, stream: str) -> None:
        """After an outage: read the reply stream from its start when it holds nothing past
        the last receipt read (``_reply_after``). Redis came back empty, and the stream made
        again took ids from its clock: one behind the old server's (a failover to a machine
        whose clock is behind, a clock set back) gave ids below ``_reply_after``, and no
        receipt was read until that clock caught up. The receipts read again match no
        waiting ``submit`` and are skipped."""
        newest = await redis.xrevrange(stream, count=1)
        if not newest or entry_position(newest[0][0]) < entry_position(self._reply_after):
            self._reply_after = "0-0"

    # ------------------------------------------------------------------ thread job

    async def _thread_job(self) -> None:
        """Hand the operators' commands deferred here for a thread's next run to the worker
        where a run of that thread is listed (it started there, not here): every
        ``heartbeat_s``, and only while such commands wait (then the listing is read once per
        round). In one process the thread's next run takes them; a worker's run takes them
        on any worker. A command whose owner does not take it (Redis down, the owner
        stopping, its run ended meanwhile) waits here again for the next round. One a
        durable steering log holds is not handed over: it is ended ``rejected`` once its
        thread's run is listed on a worker that does not share the log (``_refuse_logged``);
        a worker that shares it takes it from the log when a run of the thread registers
        there, and one whose live run has not taken it within ``receipt_timeout_s`` (that
        run registered before it was logged) gets it ``rejected`` too (``PASSED_OVER``)."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            waiting = [
                (cmd, tenant)
                for cmd, tenant in self.runtime.router.waiting_for_threads()
                if isinstance(cmd.actor, HumanActor)
            ]
            # a command that cannot travel (too large for the wire) waits for a run here
            self._unsendable &= {_key(cmd) for cmd, _ in waiting}
            waiting = [(c, t) for c, t in waiting if _key(c) not in self._unsendable]
            logged = [
                (cmd, tenant)
                for cmd, tenant in self.runtime.router.logged_for_threads()
                if isinstance(cmd.actor, HumanActor)
            ]
            if not (waiting or logged) or self._redis is None:
                self.outages.ran("threads")  # a round through: a restart after a crash works
                continue
            try:
                snapshots = list(await self._remote_snapshots())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not outage(exc):
                    raise  # a bug: supervise logs it and restarts the job
                self.outages.failed("threads", exc)
                continue
            self.outages.recovered("threads")
            for cmd, tenant in waiting:  # in the order they came: one at a time
                thread_id = getattr(cmd.target, "thread_id", "")
                newest = _newest_on_thread(snapshots, thread_id, tenant)
                if newest is not None:
                    async with self._handing:
                        await self._hand_off(cmd, str(newest["worker"]))
            still_logged = {_key(cmd) for cmd, _ in logged}
            self._passed_over = {
                key: since for key, since in self._passed_over.items() if key in still_logged
            }
            for cmd, tenant in logged:
                thread_id = getattr(cmd.target, "thread_id", "")
                newest = _newest_on_thread(snapshots, thread_id, tenant)
                if newest is not None and not await self._shares_log(newest):
                    await self._refuse_logged(cmd, str(newest["worker"]))
                elif await self._run_on_shared_log(snapshots, thread_id, tenant):
                    if await self._forget_taken(cmd) or newest is None:
                        self._passed_over.pop(_key(cmd), None)
                        continue
                    # the thread's live run, on a worker sharing the log, has not taken it:
                    # it is taking it now, or registered before it was logged and never will
                    since = self._passed_over.setdefault(_key(cmd), time.monotonic())
                    if time.monotonic() - since >= self.receipt_timeout_s:
                        self._passed_over.pop(_key(cmd), None)
                        await self._refuse_logged(cmd, str(newest["worker"]), PASSED_OVER)

    async def _run_on_shared_log(
        self, snapshots: list[dict[str, Any]], thread_id: str, tenant: str | None
    ) -> bool:
        """Whether a run of ``thread_id`` (of ``tenant``'s), live or ended, is listed on
        another worker that shares this worker's steering log (``_shares_log``): it may have
        taken this log's deferred commands of the thread."""
        for snapshot in snapshots:
            if (
                snapshot.get("thread_id") == thread_id
                and (tenant is None or snapshot.get("tenant_id") == tenant)
                and await self._shares_log(snapshot)
            ):
                return True
        return False

    async def _forget_taken(self, cmd: SteeringCommand) -> bool:
        """Drop ``cmd``, deferred here in the shared durable log, if a runtime sharing it
        took it (``SteeringRouter.forget_taken``): True once dropped; a store that fails
        leaves it waiting (False)."""
        try:
            return await self.runtime.router.forget_taken(cmd)
        except StoreError as exc:
            log.warning("thread command %s waits on here: %s", cmd.correlation_id, exc)
            return False

    async def _shares_log(self, snapshot: dict[str, Any]) -> bool:
        """Whether the runtime that runs ``snapshot``'s run (another worker's, as listed)
        shares this worker's durable steering log: this log holds the run's row, saved by that
        runtime (the row's ``owner`` is the listed ``owner``; an agent run claims its row
        when it starts). Then a command the log holds ``deferred`` for the run's thread is
        that runtime's to take, by a compare-and-set on its row, when a run of the thread
        registers there (``Runtime.register``): it is left waiting, not rejected. Read from
        this log, never taken from the listing's word: a worker of its own log (whose runs
        this log has no row of) would never take it. A graph run saved no row before its
        first snapshot tick: until then it reads as not sharing (rejected, as before). Each
        runtime found sharing is remembered, and one found not sharing by a finished agent
        run of its (which claimed its row when it started); a store that fails reads as not
        sharing. A wrong "not sharing" is safe: the command is rejected as before."""
        owner = snapshot.get("owner")
        run_id = snapshot.get("run_id")
        if not isinstance(owner, str) or not isinstance(run_id, str) or not owner:
            return False
        if owner == self.runtime.router.owner:
            return False  # this worker's own run would have taken it
        known = self._sharing.get(owner)
        if known is not None:
            return known
        try:
            row = await self.runtime.store.load_run(run_id)
        except StoreError as exc:
            log.warning("could not read run %s from the steering log's store: %s", run_id, exc)
            return False
        shared = row is not None and row.get("owner") == owner
        if shared or (
            snapshot.get("kind") == "agent"
            and snapshot.get("status") not in UNFINISHED_RUN_STATUSES
        ):
            self._sharing[owner] = shared
            if len(self._sharing) > _SHARING_KEPT:
                self._sharing.pop(next(iter(self._sharing)))
        return shared

    async def _refuse_logged(
        self, cmd: SteeringCommand, owner: str, reason: str = ELSEWHERE
    ) -> None:
        """End ``cmd``, deferred here in a durable steering log, ``rejected`` (``reason``,
        ``ELSEWHERE`` by default; ``PASSED_OVER`` where ``owner`` shares the log but its run
        registered before the command was logged): its thread's run is on ``owner``, and
        the log's row cannot be handed there. Handing
        it over would need that row settled here in the same step as ``owner`` takes it;
        without that, this log's next runtime applies it again (each worker's own store),
        or ``owner``'s router finds its id logged and answers ``duplicate`` without running
        it (one shared log). Left waiting, its receipt stayed ``deferred`` while the run
        went on without it. A store that fails leaves it waiting for the next round."""
        try:
            await self.runtime.router.refuse_logged(cmd, reason.format(owner=owner), POLICY)
        except StoreError as exc:
            log.warning("thread command %s waits on here: %s", cmd.correlation_id, exc)

    def _waits_here(self, thread_id: str) -> bool:
        """Whether commands wait here for ``thread_id``'s next run, or one is being handed
        over (``_handing_threads``)."""
        if thread_id in self._handing_threads:
            return True
        return any(
            getattr(cmd.target, "thread_id", None) == thread_id
            for cmd, _ in self.runtime.router.waiting_for_threads()
        )

    async def _hand_over_thread(self, thread_id: str, tenant: str | None, owner: str) -> None:
        """Hand ``owner`` the operators' commands of ``tenant`` waiting here for ``thread_id``,
        in the order they came (under ``_handing``)."""
        for cmd, of in self.runtime.router.waiting_for_threads():
            if (
                of == tenant
                and isinstance(cmd.actor, HumanActor)
                and getattr(cmd.target, "thread_id", None) == thread_id
                and _key(cmd) not in self._unsendable
            ):
                await self._hand_off(cmd, owner)

    async def _hand_off(self, cmd: SteeringCommand, owner: str) -> None:
        """Hand ``cmd`` to ``owner`` (``router.hand_off``), returning once ``owner`` answered,
        or once its receipt is late: then the hand-off goes on in the background
        (``_in_doubt``), the command off this router's runs, until a definite answer comes
        (``_handed``), and the thread's other commands are not held up meanwhile."""
        late = asyncio.Event()
        task = asyncio.create_task(
            self._hand_off_now(cmd, owner, late), name=f"redis-hand-off-{cmd.correlation_id}"
        )
        self._in_doubt.add(task)
        task.add_done_callback(self._in_doubt.discard)
        waiter = asyncio.ensure_future(late.wait())
        thread_id = getattr(cmd.target, "thread_id", "")
        self._handing_threads[thread_id] = self._handing_threads.get(thread_id, 0) + 1
        try:
            await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if not late.is_set():
                task.cancel()
            raise
        finally:
            waiter.cancel()
            left = self._handing_threads.pop(thread_id) - 1
            if left:
                self._handing_threads[thread_id] = left

    async def _hand_off_now(self, cmd: SteeringCommand, owner: str, late: asyncio.Event) -> None:
        try:
            await self.runtime.router.hand_off(
                cmd, functools.partial(self._handed, owner=owner, late=late)
            )
        except asyncio.CancelledError:
            raise
        except Exception:  # it waits on here; the others are handed over all the same
            log.exception("worker %s: thread command %s", self.worker_id, cmd.correlation_id)

    async def _handed(self, cmd: SteeringCommand, owner: str, late: asyncio.Event) -> bool:
        """Whether ``owner`` took ``cmd`` (a thread's deferred command handed off): any
        receipt but "not found" (its run there ended meanwhile). With no receipt in time the
        answer is still to come (the entry stays in ``owner``'s stream: it may apply there
        yet, or be answered "not found"): the command stays off this router's runs, ``late``
        is set, and the same request is asked again (``_answer_of``) until ``owner``
        answers. A missing receipt used to count as "taken": the command was dropped here,
        and when ``owner`` did not take it, it was neither applied nor waiting, and ended
        with no terminal event."""
        request_id = _clock.new_id("req")
        try:
            server = await self._server_id()  # the Redis it is sent to (``_answer_of``)
        except Exception as exc:
            if not outage(exc) and not redis_answered(exc):
                raise
            server = None
        try:
            receipt = await self._send(cmd, owner, request_id=request_id, withdrawable=True)
        except InvalidCommandError as exc:
            log.warning("thread command %s waits here: %s", cmd.correlation_id, exc)
            self._unsendable.add(_key(cmd))
            return False
        except ReceiptTimeout:
            log.warning(
                "worker %s: thread command %s handed to worker %s, no receipt yet: it waits "
                "for one, taken by no run here meanwhile",
                self.worker_id,
                cmd.correlation_id,
                owner,
            )
            late.set()
            answer = await self._answer_of(cmd, owner, request_id, server)
            if answer is None:
                return False
            receipt = answer
        except ControlPlaneUnavailable as exc:
            log.info("thread command %s waits on here: %s", cmd.correlation_id, exc)
            return False
        return receipt != hidden(cmd)

    async def _answer_of(
        self, cmd: SteeringCommand, owner: str, request_id: str, server: str | None = None
    ) -> SteeringReceipt | None:
        """``owner``'s receipt for the request ``request_id`` (``cmd``, sent already and not
        answered in time), or ``None`` if it handed the command back (it was stopping).
        Asked again every ``receipt_timeout_s``: the same request appended again is one
        entry (its ``sent`` mark), and once that mark expired, ``owner`` answers it from
        what it answered the request before, or its router's deduplication (``duplicate``
        for a command it took): the command is never applied twice. ``None`` too when
        ``owner``'s stream is gone at two asks in a row with no answer, and this worker
        withdrew the request before ``owner`` took it (``_withdraw``): ``owner`` may still
        have read the entry before (its stream was deleted under it, or it stalled), and
        refuses it then. Once ``owner`` took it, its answer is waited for. When the Redis
        answering is not ``server``, the one the request was sent to (a restart: without
        persistence, the claim and the stream were lost with the entry, while ``owner`` may
        have taken it), it is taken back only once ``owner``'s stream stayed gone for
        ``backoff_s[1] + ttl_s`` since: a live ``owner`` makes it again within its backoff,
        the next ask reaches it, and it answers what it answered (its memory of the request,
        or its deduplication)."""
        fields = self._envelope(cmd, owner, request_id, withdrawable=True).fields()
        future: asyncio.Future[SteeringReceipt] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        gone = False
        lost_at: float | None = None  # when this worker saw that Redis had restarted
        try:
            while True:
                await asyncio.wait([future], timeout=self.receipt_timeout_s)
                if future.done():
                    try:
                        return future.result()
                    except ControlPlaneUnavailable as exc:  # handed back: not taken
                        log.info("thread command %s waits on here: %s", cmd.correlation_id, exc)
                        return None
                try:
                    # asked again (appended once its mark expired), if ``owner`` is there
                    added = await self._append(owner, request_id, fields)
                    self._sent.set()
                    # the claim (``owner``'s ``taken``) lasts while this worker may withdraw
                    pipe = self._redis.pipeline(transaction=False)  # type: ignore[union-attr]
                    pipe.exists(self.keys.commands(owner))
                    pipe.expire(self.keys.claim(request_id), CLAIM_TTL_S)
                    stream, _ = await pipe.execute()
                    there = added is not None and bool(stream)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # Redis down: asked again at the next round
                    if not outage(exc) and not redis_answered(exc):
                        raise
                    continue
                if not there and gone:
                    # ``owner``'s stream is gone, and was a round ago: it stopped and answered
                    # all it held, or it died and its stream expired (``COMMANDS_TTL_S``)
                    # with the entry, or the stream was deleted under it. Taken back only if
                    # ``owner`` did not take it: its answer may be late (this worker's reply
                    # job behind; ``owner`` still at it), and it is then applied there.
                    try:
                        if lost_at is None and (
                            server is None or await self._server_id() != server
                        ):
                            lost_at = time.monotonic()
                            log.warning(
                                "thread command %s: Redis restarted since it was sent to "
                                "worker %s, which may have taken it; it is taken back if that "
                                "worker's stream is not made again within %.1f s",
                                cmd.correlation_id,
                                owner,
                                self.backoff_s[1] + self.ttl_s,
                            )
                        if (
                            lost_at is not None
                            and time.monotonic() - lost_at < self.backoff_s[1] + self.ttl_s
                        ):
                            continue
                        withdrawn = await self._withdraw(owner, request_id)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        if not outage(exc) and not redis_answered(exc):
                            raise
                        continue
                    if not withdrawn:
                        log.warning(
                            "thread command %s: worker %s took it and its stream is gone; its "
                            "answer is waited for",
                            cmd.correlation_id,
                            owner,
                        )
                        gone = False
                        continue
                    log.warning(
                        "thread command %s: worker %s is gone without answering it; it waits "
                        "here again",
                        cmd.correlation_id,
                        owner,
                    )
                    return None
                gone = not there
        finally:
            self._waiting.pop(request_id, None)

    def _envelope(
        self, cmd: SteeringCommand, owner: str, request_id: str, withdrawable: bool
    ) -> Envelope:
        """The entry sending ``cmd`` to ``owner`` as request ``request_id`` (the same entry
        when a late request is asked again: ``_answer_of``)."""
        return Envelope(
            request_id=request_id,
            reply_to=self.worker_id,
            to=owner,
            command=cmd,
            withdrawable=withdrawable,
        )

    async def _server_id(self) -> str:
        """The ``run_id`` of the Redis server answering: another one after a restart. Where
        this worker's Redis user may not run ``INFO`` (an ACL, as managed services set), the
        server's marker key instead (``Keys.server``), and that is logged once: the id was
        missing, every ask was taken for one after a restart, and a command whose owner was
        gone came back only after ``backoff_s[1] + ttl_s`` (40 s by default). The marker
        tells a restart that lost the data (what ``_answer_of`` guards against); one that
        kept it, or a failover to a replica that had the marker, goes unseen."""
        from redis.exceptions import NoPermissionError

        assert self._redis is not None
        if not self._info_denied:
            try:
                info = await self._redis.info("server")
            except NoPermissionError as exc:
                self._info_denied = True
                log.warning(
                    "worker %s: Redis denies INFO to this user (%s); a restart of Redis is "
                    "told by the key %s instead (grant +info to see restarts that kept the "
                    "data, and failovers, too)",
                    self.worker_id,
                    exc,
                    self.keys.server,
                )
            else:
                return str(info.get("run_id"))
        # random whatever the id source: a test's sequential ids repeat across processes
        fresh = uuid.uuid4().hex
        mark = await self._redis.eval(SERVER_MARK, 1, self.keys.server, fresh)
        return "marker:" + (mark.decode() if isinstance(mark, bytes) else str(mark))

    async def _withdraw(self, owner: str, request_id: str) -> bool:
        """Take back the request ``request_id`` sent to ``owner``: True unless ``owner`` took
        it first (``CLAIM``: each claims it once, and the first holds)."""
        assert self._redis is not None
        key = self.keys.claim(request_id)
        return bool(await self._redis.eval(CLAIM, 1, key, WITHDRAWN, CLAIM_TTL_S))

    # ------------------------------------------------------------------ lookups

    async def _local_or_remote_run(self, cmd: SteeringCommand) -> str | None:
        """The run id to send ``cmd`` to through Redis, or ``None`` to submit it here (its run
        is here, or no other worker has it). A run here that another runtime took over
        (``Runtime.fenced``) is not: its commands go to the new owner (they were refused
        ``taken-over`` here, though the new owner was listed)."""
        if self._redis is None:
            return None
        runs = self.runtime.runs
        run_id = target_run(cmd)
        if run_id is not None:
            return None if run_id in runs and not self.runtime.fenced(run_id) else run_id
        thread_id = getattr(cmd.target, "thread_id", None)
        if thread_id is None:
            return None
        # thread ids are the tenants' own: a human's, or that of the run its sender acts from
        tenant = runs.thread_tenant(cmd.actor)
        here = runs.for_thread(thread_id, tenant)
        if here is not None and not self.runtime.fenced(here.run_id):
            return None
        try:
            snapshots = await self._remote_snapshots()
        except Exception as exc:
            raise ControlPlaneUnavailable(f"could not read the run listing: {exc}") from exc
        newest = _newest_on_thread(snapshots, thread_id, tenant)
        return None if newest is None else str(newest["run_id"])

    async def _find(self, run_id: str) -> dict[str, Any] | None:
        assert self._redis is not None

        async def read() -> tuple[dict[str, float], list[Any]]:
            assert self._redis is not None
            workers = await self._live_workers()
            pipe = self._redis.pipeline(transaction=False)
            for worker in workers:
                pipe.hget(self.keys.runs(worker), run_id)
            return workers, await pipe.execute()

        try:
            workers, found = await _read_again_if_dropped(read)
        except Exception as exc:
            raise ControlPlaneUnavailable(f"could not read the run listing: {exc}") from exc
        # Listed by two workers, the one where it is live: a run resumed under its id on
        # another worker is still listed, finished, by its first worker while that one keeps
        # it (``retain_finished_s``), and may beat last; its commands are the new run's.
        ended: dict[str, Any] | None = None
        for beat, raw in zip(workers.values(), found, strict=True):
            if raw is not None:
                snapshot = self._loaded(raw)
                if snapshot is not None and snapshot["run_id"] == run_id:
                    if snapshot.get("status") in UNFINISHED_RUN_STATUSES:
                        return _beaten(snapshot, beat)
                    if ended is None:
                        ended = _beaten(snapshot, beat)
        return ended

    async def _listed(
        self, run_id: str, wanted: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any] | None:
        """``run_id``'s ``wanted`` snapshot, looked for again until ``throttle_s +
        heartbeat_s`` have passed: a run another worker started a moment ago (its start
        already answered) is listed at that worker's next mirror write, within its
        ``throttle_s``; until then it would be taken for a run that does not exist. (A run
        that is not ``wanted``, another tenant's, waits as long: no answer tells it apart.)"""
        deadline = time.monotonic() + self.throttle_s + self.heartbeat_s
        while True:
            snapshot = await self._find(run_id)
            if snapshot is not None and wanted(snapshot):
                return snapshot
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(self.throttle_s / 2)

    async def _live_workers(self) -> dict[str, float]:
        """The live workers and the time of each one's last heartbeat (Redis's clock), the
        latest first: a run listed by two of them (started again under its id on another
        worker just after its first worker died) is the one of the worker that beat last,
        not the dead one's, still listed until its ``ttl_s`` runs out."""
        assert self._redis is not None
        now = await redis_now(self._redis)  # the heartbeats are scored by Redis's clock
        raw = await self._redis.zrevrangebyscore(
            self.keys.workers, "+inf", now - self.ttl_s, withscores=True
        )
        workers: dict[str, float] = {}
        for member, beat in raw:
            try:
                name = member.decode()
            except UnicodeDecodeError:  # no worker's name: skipped, not a failed read
                self.counters.malformed += 1
                continue
            if _no_time(beat):  # no heartbeat (a hand edit): its runs' times could not be told
                self.counters.malformed += 1
                continue
            workers[name] = float(beat)
        return workers

    async def _remote_snapshots(self) -> Iterable[dict[str, Any]]:
        return await _read_again_if_dropped(self._remote_snapshots_once)

    async def _remote_snapshots_once(self) -> Iterable[dict[str, Any]]:
        assert self._redis is not None
        workers = {w: b for w, b in (await self._live_workers()).items() if w != self.worker_id}
        pipe = self._redis.pipeline(transaction=False)
        for worker in workers:
            pipe.hvals(self.keys.runs(worker))
        found: list[dict[str, Any]] = []
        for beat, values in zip(workers.values(), await pipe.execute(), strict=True):
            found.extend(_beaten(s, beat) for s in map(self._loaded, values) if s is not None)
        return found

    def _loaded(self, raw: bytes | str) -> dict[str, Any] | None:
        """``_load``, counting an entry of another shape as ``malformed``."""
        snapshot = _load(raw)
        if snapshot is None:
            self.counters.malformed += 1
        return snapshot

    def _local_snapshots(self, tenant_id: str | None) -> list[dict[str, Any]]:
        return [
            self.mirror.stamp(s)
            for s in self.runtime.live_snapshots()
            if tenant_id is None or s["tenant_id"] == tenant_id
        ]


async def _read_again_if_dropped(read: Callable[[], Awaitable[_T]]) -> _T:
    """``read()`` (reads only: safe to run twice), run once more if the connection it ran on
    was dropped under it (closed by the server or a proxy, ``CLIENT KILL``, a network blip;
    a refused connection, Redis down, is tried once more too and fails again). The pool's retries are off (the jobs back off themselves), so
    one connection dropped mid-read failed an operator's command ``ControlPlaneUnavailable``
    ("could not read the run listing") and left the other workers' runs out of a listing,
    though the send after it is already tried again on another connection (``_append``). A
    second failure is an outage; a refusal (credentials, a full pool) is not tried again."""
    from redis.exceptions import ConnectionError as Lost

    try:
        return await read()
    except (Lost, ConnectionResetError, BrokenPipeError) as exc:
        if isinstance(exc, Lost) and type(exc) is not Lost:  # a refusal, not a drop
            raise
    return await read()


def _key(cmd: SteeringCommand) -> tuple[str, str]:
    """A command's id where it is unique: in its sender's scope."""
    return dedupe_scope(cmd.actor), cmd.correlation_id


def _newest_on_thread(
    snapshots: Iterable[dict[str, Any]], thread_id: str, tenant: str | None
) -> dict[str, Any] | None:
    """The newest live run listed on ``thread_id`` (of ``tenant``'s runs, when given), as in
    one process (``RunRegistry.for_thread``) and through the store: an older one may be an
    earlier turn, or a dead worker's ghost still listed. Newest by when each started by
    Redis's clock (``STARTED``), the one clock the workers share: by their own, a worker whose
    clock ran ahead had its older runs taken for the newest. A snapshot without it (a worker
    of an earlier version, or not through its first heartbeat) is placed by its
    ``created_at``."""
    on_thread = [
        s
        for s in snapshots
        if s.get("thread_id") == thread_id
        and s.get("status") in UNFINISHED_RUN_STATUSES
        and (tenant is None or s.get("tenant_id") == tenant)
    ]
    return max(on_thread, key=_started_key, default=None)


def _started_key(snapshot: dict[str, Any]) -> tuple[float, str]:
    """When ``snapshot``'s run started, by Redis's clock where its worker said, then its id."""
    started = snapshot.get(STARTED)
    if not isinstance(started, (int, float)) or isinstance(started, bool):
        started = epoch_seconds(snapshot.get("created_at"))
    if started is None or not math.isfinite(started):
        started = -math.inf  # no time it can be placed by: the oldest
    return float(started), str(snapshot["run_id"])


def _visible(cmd: SteeringCommand, snapshot: dict[str, Any]) -> bool:
    """An operator sees only their tenant's runs (the owner checks again)."""
    actor = cmd.actor
    return not isinstance(actor, HumanActor) or snapshot.get("tenant_id") == actor.tenant_id


def _check_settings(
    *,
    worker_id: object,
    prefix: object,
    throttle_s: object,
    heartbeat_s: object,
    ttl_s: object,
    backoff_s: object,
    receipt_timeout_s: object,
    block_s: object,
    max_connections: object,
    max_unanswered: object,
) -> None:
    """``ConfigurationError`` for a setting the jobs cannot work with. Each used to be taken:
    a TTL of 0 or NaN retried Redis for ever, one shorter than a heartbeat dropped the
    worker's runs off the listing between two beats, a zero ``block_s`` blocked the readers
    for ever (Redis's ``BLOCK 0``), a zero backoff hammered a Redis that was down, and a blank
    worker id was replaced by the runtime's."""
    for name, text in (("worker_id", worker_id), ("prefix", prefix)):
        if (text is not None or name == "prefix") and (
            not isinstance(text, str) or not text.strip()
        ):
            raise ConfigurationError(f"{name} must be a non-blank string, got {shown_repr(text)}")
    problem = id_problem(worker_id) if isinstance(worker_id, str) else None
    if problem is not None:  # it travels in every envelope, whose ids obey the id rule
        raise ConfigurationError(f"worker_id {shown_id(worker_id)!r} breaks the id rule: {problem}")
    _bounds.seconds("throttle_s", throttle_s, zero=True)
    beat = _bounds.seconds("heartbeat_s", heartbeat_s)
    if _bounds.seconds("ttl_s", ttl_s) <= beat:
        raise ConfigurationError(
            f"ttl_s ({ttl_s!r}) must be longer than heartbeat_s ({heartbeat_s!r}): the "
            "worker's runs would leave the listing between two heartbeats"
        )
    _bounds.seconds("receipt_timeout_s", receipt_timeout_s)
    _bounds.seconds("block_s", block_s)
    if not isinstance(backoff_s, (tuple, list)) or len(backoff_s) != 2:
        raise ConfigurationError(
            f"backoff_s must be a pair (low, high) of seconds, got {shown_repr(backoff_s)}"
        )
    low, high = (_bounds.seconds("backoff_s", b) for b in backoff_s)
    if low > high:
        raise ConfigurationError(
            f"backoff_s must be (low, high) with low <= high, got {shown_repr(backoff_s)}"
        )
    _bounds.whole_number(
        "max_connections",
        max_connections,
        least=3,
        why="two jobs each hold a connection while they wait for entries",
    )
    _bounds.whole_number("max_unanswered", max_unanswered)


def _check_database(url: str) -> None:
    """``ValueError`` for a ``redis://`` URL whose path is no database number: the client
    takes database 0 for it (``/l`` for ``/1``), so two deployments meant apart would meet."""
    if not url.startswith(("redis://", "rediss://")):
        return
    path = urlsplit(url).path.strip("/")
    if path and not path.isdigit():
        raise ValueError(f"the database {path!r} is not a number")


def _refused(exc: Exception) -> bool:
    """Whether Redis answered, refusing what the URL asks for (a database it does not have,
    credentials or ACL rights it does not grant): no retry heals that, unlike an outage."""
    from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

    if isinstance(exc, (AuthenticationError, NoPermissionError)):
        return True
    return isinstance(exc, ResponseError) and "DB index is out of range" in str(exc)


def _no_time(beat: float) -> bool:
    """Whether a worker set's score is no time a heartbeat gives: not finite, or past what a
    ``datetime`` holds (``+inf`` or 1e300, written straight into Redis, was an
    ``OverflowError`` out of every listing: ``_beaten`` makes the beat a time)."""
    try:
        datetime.fromtimestamp(beat, UTC)
    except (OverflowError, ValueError, OSError):
        return True
    return False


def _beaten(snapshot: dict[str, Any], beat: float) -> dict[str, Any]:
    """A mirrored snapshot whose ``updated_at`` is its worker's last heartbeat when that is
    later: the mirror rewrites a run only when it moves, and an idle run of a live worker is
    as fresh as its worker's beat (the store's copy is rewritten at every heartbeat too)."""
    try:
        if RunStatus(str(snapshot.get("status"))).finished:
            return snapshot
    except ValueError:
        return snapshot
    beaten = datetime.fromtimestamp(beat, UTC)
    updated = snapshot_time(snapshot.get("updated_at"))
    if updated is None or beaten > updated:
        snapshot["updated_at"] = beaten.isoformat()
    return snapshot


#: The fields of a mirrored snapshot that its readers index, each a string by the id rule
#: (``worker`` names the stream its run's commands are appended to).
_IDENTITY = ("run_id", "root_run_id", "tenant_id", "status", "worker")


def _load(raw: bytes | str) -> dict[str, Any] | None:
    """A mirrored snapshot, or ``None`` for an entry of another shape (another version's
    worker, a hand edit, ids that break the id rule, a field a store would call damaged,
    ``read_snapshot``'s: ``accepts: 5`` was served as it was, against the API's document):
    the listing, lookups and sends skip it rather than fail on it."""
    try:
        value = read_snapshot(raw)
    except DamagedData:  # not JSON (or nested past the parser), or a field of no known type
        return None
    for key in _IDENTITY:
        field = value.get(key)
        if not isinstance(field, str) or id_problem(field) is not None:
            return None
    return value


__all__ = ["RedisControl"]
