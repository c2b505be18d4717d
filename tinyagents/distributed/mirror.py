"""``RunMirror``: one worker's runs in Redis, so that every worker can list them.

The worker's runs are written to a hash of its own (``Keys.runs(worker)``) as the runtime's
live snapshots plus ``worker``, rewritten when an event says a run moved (at most every
``throttle_s``): every run the runtime holds, the finished runs of its retention window
(``retain_finished``) included, so the hash is bounded as the runtime's memory is. Every
``heartbeat_s`` the worker renews its entry in the worker set, the hash's expiry and its
command stream's (``COMMANDS_TTL_S``), and rewrites the hash if Redis lost it (a Redis
restarted empty); the hash expires ``ttl_s`` after the last heartbeat, so a dead worker's
runs leave the listing by themselves. A run the runtime releases (past its window, or
``forget``) is taken off at once (``LiveRuns.on_release``), and any still listed at a
heartbeat. A run whose snapshot JSON cannot encode is skipped
(logged once, counted: ``unencodable``); the others are listed. A write that fails in a Redis outage is logged and
retried after a backoff; it never touches a run. Any other error is a bug: it ends the job, and
``supervise`` logs it with its traceback and starts the job again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from tinyagents import _clock
from tinyagents.distributed._base import (
    Backoff,
    ControlledRuntime,
    Outages,
    Redis,
    RedisCounters,
    log,
    outage,
)
from tinyagents.distributed.seat import RENEW, Seat
from tinyagents.distributed.wire import COMMANDS_TTL_S, STARTED, Keys
from tinyagents.events.bus import Subscription
from tinyagents.events.models import Event
from tinyagents.store.base import snapshot_time

JOB = "mirror"


class RunMirror:
    def __init__(
        self,
        runtime: ControlledRuntime,
        keys: Keys,
        worker_id: str,
        *,
        throttle_s: float,
        heartbeat_s: float,
        ttl_s: float,
        backoff_s: tuple[float, float],
        counters: RedisCounters,
        outages: Outages,
        seat: Seat,
    ) -> None:
        self.runtime, self.keys, self.worker_id = runtime, keys, worker_id
        self.seat = seat
        self.throttle_s, self.heartbeat_s, self.ttl_s = throttle_s, heartbeat_s, ttl_s
        self.backoff_s = backoff_s
        self.counters, self.outages = counters, outages
        self._sub: Subscription | None = None
        #: Runs to write at the next tick; runs in the hash now (both bounded by the runs the
        #: runtime holds plus those released since the last heartbeat).
        self._dirty: set[str] = set()
        self._mirrored: set[str] = set()
        #: The hash may hold entries that are not this runtime's: those of a process that ran
        #: before under the same worker id (restarted faster than the hash expires) are
        #: dropped, and the hash is written afresh, at the next write.
        self._stale = True
        #: The runs whose snapshot JSON could not encode (``_encoded``): each logged once.
        self._unencodable: set[str] = set()
        #: Redis's clock minus this worker's (``_clock``), in seconds, as measured at the
        #: last heartbeat (``None`` before the first).
        self._offset: float | None = None
        #: When each run listed started by Redis's clock (``STARTED``), fixed at its first
        #: listing, with the ``created_at`` it was stamped for: a run started again under
        #: the same id (released, then started before the next heartbeat prunes this) is
        #: stamped afresh, not listed with its first start (bounded by the runs the runtime
        #: holds: pruned at every heartbeat).
        self._started: dict[str, tuple[object, float]] = {}
        #: The wait of the job for the next event, cut short by a release (``_released``).
        self._waiting: asyncio.Timeout | None = None

    def open(self) -> None:
        """Follow the runtime's events from now on; every run it holds is written first."""
        # The runtime keeps its live books (pending interrupts) only once asked; asked at the
        # first write instead, an interrupt reported before it would never be listed.
        self.runtime.live_runs().on_release = self._released
        self._sub = self.runtime.subscribe(maxsize=10_000, where=_has_run)
        self._stale = True
        self._dirty.update(i.run_id for i in self.runtime.runs.list())

    def close(self) -> None:
        live = self.runtime.live_runs()
        if live.on_release == self._released:
            live.on_release = None
        if self._sub is not None:
            self._sub.close()
            self._sub = None

    def _released(self, run_id: str) -> None:
        """A run the runtime released (``forget``, or past its retention window) is taken off
        the listing at the next write, due now: at the next heartbeat, other workers read it
        until then."""
        if run_id not in self._mirrored:
            return
        self._dirty.add(run_id)
        waiting = self._waiting
        if waiting is not None and not waiting.expired():
            waiting.reschedule(asyncio.get_running_loop().time())

    def stamp(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        """The runtime's live snapshot (``owner``: the runtime's id) with ``worker``: the
        worker whose stream takes the run's commands, and ``STARTED``: its ``created_at``
        by Redis's clock, once this worker measured the difference (its first heartbeat).
        Workers compare runs by it (the newest run of a thread): by their own clocks, one
        that ran ahead made its older runs the newest (``_newest_on_thread``). Always this
        worker's own stamp: a run resumed here from another worker has a ``created_at`` of
        this runtime's making, and one started again here under its id is stamped afresh
        (its ``created_at`` differs from the one stamped)."""
        snapshot["worker"] = self.worker_id
        run_id = snapshot["run_id"]
        created_at = snapshot.get("created_at")
        stamped = self._started.get(run_id)
        if stamped is None or stamped[0] != created_at:  # first listed, or started again
            created = epoch_seconds(created_at)
            if created is None or self._offset is None:
                return snapshot
            stamped = self._started[run_id] = (created_at, created + self._offset)
        snapshot[STARTED] = stamped[1]
        return snapshot

    async def run(self, redis: Redis) -> None:
        """The job: until the runtime closes its bus (or the task is cancelled)."""
        assert self._sub is not None
        backoff = Backoff(*self.backoff_s)
        next_beat = 0.0
        while not self.seat.lost:  # another process holds the worker id: its hash, not ours
            wait = max(0.0, next_beat - time.monotonic())
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait if not self._dirty else 0) as self._waiting:
                        event = await self._sub.get()
                        if event is None:  # the runtime closed its bus
                            return
                        self._note(event)
            finally:
                # however the wait ended (the bus closed, the job cancelled): a release told
                # of later (``_released``) must not reschedule it, a RuntimeError in rt.forget
                self._waiting = None
            await asyncio.sleep(self.throttle_s)  # gather what else moves meanwhile
            self._drain()
            beat = time.monotonic() >= next_beat
            try:
                await self._write(redis, beat=beat)
            except Exception as exc:
                if not outage(exc):
                    raise  # a bug (its runs stay dirty): supervise logs it and restarts
                self.counters.mirror_errors += 1
                self.outages.failed(JOB, exc)
                self._dirty.update(self._mirrored)  # rewrite everything once back
                self._dirty.update(i.run_id for i in self.runtime.runs.list())
                await backoff.wait()
                next_beat = 0.0
                continue
            self.outages.recovered(JOB)
            backoff.reset()
            if beat:
                next_beat = time.monotonic() + self.heartbeat_s

    def _encoded(self, run_ids: set[str]) -> dict[str, str]:
        """The JSON of ``run_ids``' live snapshots, by run id. A snapshot JSON cannot encode
        (a value of no JSON type in it) is skipped, and its run not listed (taken off if it
        was): logged once per run and counted (``unencodable``). It failed the whole write
        before: the mirror died at every restart, and none of the worker's runs was listed."""
        encoded: dict[str, str] = {}
        for snapshot in self.runtime.live_snapshots(run_ids):
            run_id, stamped = snapshot["run_id"], self.stamp(snapshot)
            try:
                encoded[run_id] = json.dumps(stamped)
            except (TypeError, ValueError, RecursionError) as exc:
                if run_id not in self._unencodable:
                    self._unencodable.add(run_id)
                    self.counters.unencodable += 1
                    log.error(
                        "worker %s: run %s is not listed: its snapshot is no JSON: %s: %s",
                        self.worker_id,
                        run_id,
                        type(exc).__name__,
                        exc,
                    )
                continue
            self._unencodable.discard(run_id)
        if self._unencodable:  # released runs: forgotten
            self._unencodable = {r for r in self._unencodable if r in self.runtime.runs}
        return encoded

    def _note(self, event: Event) -> None:
        if event.run_id is not None:
            self._dirty.add(event.run_id)

    def _drain(self) -> None:
        assert self._sub is not None
        while (event := self._sub.get_nowait()) is not None:
            self._note(event)
        if self._sub.dropped:  # some moves were not seen: rewrite every run
            self._sub.dropped = 0
            self._dirty.update(i.run_id for i in self.runtime.runs.list())

    async def _write(self, redis: Redis, *, beat: bool) -> None:
        key = self.keys.runs(self.worker_id)
        if beat:  # first: a process that lost its worker id writes nothing under it
            self.seat.renewed(
                await redis.eval(RENEW, 1, self.seat.key, self.seat.token, self.seat.ttl_ms)
            )
            if self.seat.lost:
                return
            # scored by Redis's clock, as the readers compare with it: workers whose clocks
            # differ still see each other; and the difference of this worker's, to stamp
            # its runs with their start by Redis's clock
            before = _clock.now().timestamp()
            now = await redis_now(redis)
            self._offset = now - (before + _clock.now().timestamp()) / 2
            self._started = {r: t for r, t in self._started.items() if r in self.runtime.runs}
        stale = self._stale
        if stale:  # the hash afresh: every run this runtime holds, nothing else
            self._dirty.update(i.run_id for i in self.runtime.runs.list())
        dirty, self._dirty = self._dirty, set()
        if beat:  # and the released runs still listed, to take them off
            dirty |= {r for r in self._mirrored if r not in self.runtime.runs}
        try:
            snapshots = self._encoded(dirty)
            gone = [r for r in dirty if r not in snapshots and r in self._mirrored]
            # one transaction when the hash is replaced: no reader sees it empty between
            pipe = redis.pipeline(transaction=stale)
            if stale:
                pipe.delete(key)
            if snapshots:
                pipe.hset(key, mapping=snapshots)
            if gone and not stale:
                pipe.hdel(key, *gone)
            if beat:
                pipe.zadd(self.keys.workers, {self.worker_id: now})
                pipe.zremrangebyscore(self.keys.workers, 0, now - self.ttl_s)
                pipe.expire(self.keys.commands(self.worker_id), COMMANDS_TTL_S)
            if snapshots or beat:
                pipe.pexpire(key, int(self.ttl_s * 1000))
            if beat:
                pipe.hlen(key)
            replies = await pipe.execute() if len(pipe) else []
        except BaseException:
            self._dirty |= dirty
            raise
        if stale:
            self._stale = False
            self._mirrored = set(snapshots)
        else:
            self._mirrored.update(snapshots)
            self._mirrored.difference_update(gone)
        self.counters.mirror_writes += 1
        if beat and replies[-1] != len(self._mirrored):
            # Redis lost the hash (restarted empty), or it holds entries not ours: write it
            # afresh at the next tick
            self._stale = True


async def redis_now(redis: Redis) -> float:
    """Redis's clock, in seconds: the one clock every worker shares."""
    seconds, micros = await redis.time()
    return float(seconds) + float(micros) / 1_000_000


def epoch_seconds(value: object) -> float | None:
    """An ISO time (a snapshot's ``created_at``) in seconds since the epoch, or ``None``."""
    at = snapshot_time(value)
    return None if at is None else at.timestamp()


def _has_run(event: Event) -> bool:
    return event.run_id is not None
