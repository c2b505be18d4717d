"""What a worker's Redis jobs share: the runtime they serve, their counters, their backoff,
the outage log (each job logs once when it loses Redis and once when it is back), what counts
as an outage (``outage``: anything else a job meets is a bug) and the supervisor that restarts
a job that died of a bug (``supervise``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from tinyagents._record import Record
from tinyagents.events.bus import Subscription
from tinyagents.protocol.commands import ReceiptStatus, SteeringCommand, SteeringReceipt
from tinyagents.runs.live import LiveRuns
from tinyagents.runs.registry import RunRegistry
from tinyagents.steering.policies import not_found
from tinyagents.steering.router import SteeringRouter
from tinyagents.store.base import Store

#: ``redis.asyncio.Redis``: its stubs type every reply as a union of the sync and async
#: clients' answers, so the client is handled untyped here (the replies are checked instead).
Redis = Any

log = logging.getLogger("tinyagents.distributed")

#: The ``policy_id`` of the receipts the control plane itself issues.
POLICY = "redis"
#: The callers that use Redis only now and then (an operator's listing; the thread job, only
#: while thread commands wait): Redis answering any job is back for them too. Held "without
#: Redis" until their own next call, they kept the worker's "reconnected" line from being
#: logged, and every later outage's line with it.
OCCASIONAL = frozenset({"list", "threads"})


def outage(exc: BaseException) -> bool:
    """Whether ``exc`` is Redis out of reach or not serving for now (a lost or refused
    connection, a timeout, a reply cut short, a replica promoted, a Redis out of memory or
    loading its data), which a job retries in place after a backoff; anything else a job meets
    is a bug (ours, or a key of another shape under the prefix), which ``supervise`` logs with
    its traceback and handles as a crash. Every error used to be taken for an outage: a bug
    was retried for ever, logged without its traceback."""
    from redis.exceptions import (
        ClusterDownError,
        InvalidResponse,
        OutOfMemoryError,
        ReadOnlyError,
        ResponseError,
        TryAgainError,
    )
    from redis.exceptions import ConnectionError as Lost
    from redis.exceptions import TimeoutError as Late

    # redis-py raises its ConnectionError (BusyLoadingError, MaxConnectionsError and the
    # refused credentials among them) or TimeoutError for a lost connection, and lets some
    # socket errors through as they are (OSError, the builtin TimeoutError included)
    if isinstance(
        exc,
        Lost
        | Late
        | OSError
        | InvalidResponse
        | ReadOnlyError
        | OutOfMemoryError
        | TryAgainError
        | ClusterDownError,
    ):
        return True
    # the states redis-py has no class for: a script running long, a failed snapshot that
    # stops writes, too few replicas
    return isinstance(exc, ResponseError) and str(exc).startswith(_PASSING)


#: The error answers of a Redis that does not serve for now, by their first word.
_PASSING = ("BUSY ", "MISCONF ", "NOREPLICAS ")


def redis_answered(exc: BaseException) -> bool:
    """Whether ``exc`` is an error answer of Redis (``WRONGTYPE``: a key of another type
    under the prefix): no bug of the caller's, nor an outage."""
    from redis.exceptions import ResponseError

    return isinstance(exc, ResponseError)


class ControlledRuntime(Protocol):
    """What ``RedisControl`` uses of a ``Runtime``."""

    runs: RunRegistry
    store: Store
    router: SteeringRouter

    @property
    def durable(self) -> bool: ...

    def subscribe(self, *, maxsize: int = ..., where: Any = ...) -> Subscription: ...

    def live_runs(self) -> LiveRuns: ...

    def fenced(self, run_id: str) -> bool: ...

    def live_snapshots(self, run_ids: Iterable[str] | None = None) -> list[dict[str, Any]]: ...

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt: ...


@dataclass(slots=True, eq=False, repr=False)
class RedisCounters(Record):
    """What went through this worker's seat (for tests, logs and metrics)."""

    sent: int = 0  # commands sent to another worker
    refused_full: int = 0  # not sent: the owner's stream held ``max_unanswered`` commands
    received: int = 0  # command entries read from this worker's stream
    answered: int = 0  # of them, answered with the runtime's receipt
    malformed: int = 0  # entries that read as no command envelope, reply or run snapshot
    foreign: int = 0  # addressed to another worker, not an operator's, or another tenant's run
    bad_reply_to: int = 0  # answered, the receipt not sent: its reply target is no stream
    mirror_writes: int = 0
    mirror_errors: int = 0
    unencodable: int = 0  # runs left off the listing: their snapshot is no JSON (logged once)
    redis_errors: int = 0  # failed Redis calls of every kind (each is retried after a backoff)
    crashes: int = 0  # jobs that died of an error they do not retry (each restarted: supervise)


class Backoff:
    """Exponential backoff between ``low`` and ``high`` seconds, reset by a success."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high
        self.delay = low

    def reset(self) -> None:
        self.delay = self.low

    async def wait(self, wake: asyncio.Event | None = None) -> None:
        """Sleep out the next delay; ``wake``: or until it is set (a sign Redis is back; the
        caller clears it before the call that failed, so a sign given meanwhile counts)."""
        delay, self.delay = self.delay, min(self.delay * 2, self.high)
        if wake is None:
            await asyncio.sleep(delay)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await wake.wait()


class Outages:
    """Which jobs of one worker are without Redis, or died (``crashed``) and have not got
    through a round since their restart. The worker logs one line when its first job loses
    Redis and one when its last is back (not one per job: they lose it together); every
    crash is logged, with its traceback."""

    def __init__(self, worker_id: str, counters: RedisCounters) -> None:
        self.worker_id = worker_id
        self.counters = counters
        self._down: set[str] = set()
        self._crashed: set[str] = set()

    def failed(self, job: str, exc: Exception) -> None:
        """Count and log (once per outage) a failed Redis call of ``job`` (an ``outage``). Raises
        ``CancelledError`` instead when the calling task is being cancelled: redis-py turns a
        cancel that lands in a blocking read into a ``ConnectionError``, and a job being
        stopped would log an outage and sleep its backoff until cancelled again."""
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError from exc
        self.counters.redis_errors += 1
        if job in self._down:
            return
        if not self._down:
            log.warning(
                "Redis control (worker %s): %s: %s; retrying with backoff",
                self.worker_id,
                type(exc).__name__,
                exc,
            )
        self._down.add(job)

    def recovered(self, job: str) -> None:
        """``job`` made a Redis call that worked: it is neither without Redis nor crashed, and
        nor are the ``OCCASIONAL`` callers."""
        self.ran(job)
        if not self._down:
            return
        self._down.discard(job)
        self._down -= OCCASIONAL
        if not self._down:
            log.warning("Redis control (worker %s): reconnected", self.worker_id)

    def crashing(self, job: str) -> bool:
        """Whether ``job`` died and has not got through a round since."""
        return job in self._crashed

    def crashed(self, job: str, exc: Exception, restart_in: float) -> None:
        """Count and log ``job``'s death of ``exc`` (a restart follows in ``restart_in`` s)."""
        self.counters.crashes += 1
        self._crashed.add(job)
        log.error(
            "Redis control (worker %s): the %s job died of %s: %s; restarting it in %.1f s",
            self.worker_id,
            job,
            type(exc).__name__,
            exc,
            restart_in,
            exc_info=exc,
        )

    def ran(self, job: str) -> None:
        """``job`` got through a round (a restart after a crash works)."""
        if job in self._crashed:
            self._crashed.discard(job)
            log.warning("Redis control (worker %s): the %s job runs again", self.worker_id, job)

    def down(self, jobs: Iterable[str]) -> bool:
        """Whether one of ``jobs`` is without Redis, or any job crashed (and is not back)."""
        return bool(self._crashed) or any(job in self._down for job in jobs)


async def supervise(
    job: str,
    run: Callable[[], Awaitable[None]],
    outages: Outages,
    backoff_s: tuple[float, float],
) -> None:
    """Run the job ``run()`` until it ends or is cancelled, starting it again after a backoff
    each time it dies of an error. The jobs retry their Redis outages themselves (``outage``) and
    raise anything else: an error that ends one is a bug (or a runtime that fails under it), and the job used to end with it, in
    silence: ``connected`` stayed true while the job's work (the replies to this worker's
    commands, the commands for its runs, its listing) went undone. Now it is logged with its
    traceback, the control is not ``connected`` until the job gets through a round again
    (``Outages.ran``), and the restart's backoff doubles while the restarts die too."""
    backoff = Backoff(*backoff_s)
    while True:
        try:
            await run()
            return  # a job's own end: its runtime closed, or its worker id was lost
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from exc
            if not outages.crashing(job):  # it got through a round since it last died
                backoff.reset()
            outages.crashed(job, exc, backoff.delay)
        await backoff.wait()


def refuse(cmd: SteeringCommand, reason: str) -> SteeringReceipt:
    """The control plane's own ``rejected`` receipt for ``cmd``."""
    return SteeringReceipt.issue(ReceiptStatus.REJECTED, cmd.correlation_id, None, reason, POLICY)


def hidden(cmd: SteeringCommand) -> SteeringReceipt:
    """The receipt for a command whose target its sender may not see (another tenant's run)
    or that does not exist: the router's own, word for word (``not_found``, its policy id, no
    run), whichever worker answers, so that no receipt tells the one from the other."""
    return SteeringReceipt.issue(
        ReceiptStatus.REJECTED, cmd.correlation_id, None, not_found(cmd), "router"
    )


def target_run(cmd: SteeringCommand) -> str | None:
    """The run id ``cmd``'s target names (``None`` for a thread)."""
    run_id = getattr(cmd.target, "run_id", None)
    return run_id if isinstance(run_id, str) else None
