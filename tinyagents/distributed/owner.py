"""``CommandReader``: the owning worker's side of a command sent over Redis.

The worker reads its stream (``Keys.commands(worker)``) in the consumer group ``owners`` as
its one consumer: first the entries a previous process read and never acknowledged (it died
before answering them), then new ones. Each entry is checked (an envelope addressed to this
worker, a human operator's command, the run here and of the operator's tenant), submitted to
the worker's own runtime (its policy pipeline, deduplication and steering log), and its
receipt is sent to the sender's reply stream; only then is the entry acknowledged and
deleted. Each run's entries are submitted one after another, in stream order; different
runs' side by side, while the job reads on (``_dispatch``): a slow policy or store write
holds up only its own run's later commands. Refused entries are counted (``malformed``, ``foreign``) and logged, and so is a
receipt not sent because the sender's reply key holds no stream (``bad_reply_to``).

A Redis outage (``outage``) is retried in place after a backoff. Any other error is a bug: it
ends the job, which ``supervise`` logs with its traceback and starts again. A bug met handling
one entry ends the job too, once the other entries read with it are under way; the entry is
left unacknowledged, read again after the restart (the bug may not come again), and answered
``rejected`` once it met a bug ``_ATTEMPTS`` times: left for ever, it would end the job at every
restart while the commands behind it waited. Meanwhile the later entries for its run are left unanswered
too and read again after it (``_holds``): submitted at once, they were applied before it.

When the worker stops gracefully, ``drain`` answers what is still in the stream (what arrived
after the job's last read included) and deletes the stream, so that a command sent after
that fails at once at its sender (who appends with ``NOMKSTREAM``) instead of waiting for a
receipt: every command gets an answer, none is left for the worker's next process.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from functools import partial
from itertools import chain
from typing import Any

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
    refuse,
    target_run,
)
from tinyagents.distributed.seat import Seat
from tinyagents.distributed.wire import (
    CLAIM,
    CLAIM_TTL_S,
    GROUP,
    TAKEN,
    Envelope,
    HandedBack,
    Keys,
    MalformedEnvelope,
    entry_position,
    reply_fields,
    text_field,
)
from tinyagents.errors import RuntimeClosed
from tinyagents.protocol.commands import (
    HumanActor,
    ReceiptStatus,
    SteeringCommand,
    SteeringReceipt,
    dedupe_scope,
)
from tinyagents.protocol.state import CommandState
from tinyagents.store.base import written_again

JOB = "commands"
#: How many entries of a reply stream Redis keeps at most.
_REPLY_MAXLEN = 10_000
#: A reply stream nobody reads any more (its worker is gone) disappears after this long.
_REPLY_TTL_S = 300
_REMEMBER_ANSWERS = 10_000
#: Deletes a command stream (``ARGV[1]``: the group) only when nothing is left in it that
#: needs an answer, atomically with respect to a sender's append: 1 or 0 once gone, -1 when
#: entries are left. Answered entries are deleted; one left though acknowledged (its
#: deletion was lost, or it was acknowledged by hand) is answered, or will never be: it
#: does not keep the stream. An entry pending (for any consumer) or past what the group
#: handed out (a sender appended) does.
_DELETE_IF_ANSWERED = """
if redis.call('XLEN', KEYS[1]) == 0 then return redis.call('DEL', KEYS[1]) end
if redis.call('XPENDING', KEYS[1], ARGV[1])[1] > 0 then return -1 end
local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local newest_ms, newest_seq = parts(redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1][1])
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local fields = {}
  for i = 1, #group, 2 do fields[group[i]] = group[i + 1] end
  if fields['name'] == ARGV[1] then
    local ms, seq = parts(fields['last-delivered-id'])
    if newest_ms > ms or (newest_ms == ms and newest_seq > seq) then return -1 end
    return redis.call('DEL', KEYS[1])
  end
end
return -1
"""
#: Appends a receipt to a reply stream (``ARGV``: its ``MAXLEN``, its TTL, then the fields)
#: and renews the stream's expiry; a key that holds something else (another deployment's key
#: under the prefix, a hand edit) is left as it is, and its type returned: an ``XADD`` failed
#: there with ``WRONGTYPE``, read as a Redis outage, and the ``EXPIRE`` deleted it later.
_REPLY = """
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'stream' and kind ~= 'none' then return kind end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return false
"""
#: How many entries the reader answers at once at most (then it waits before reading more).
_MAX_INFLIGHT = 1_000
#: The lane of a thread's commands with no run here (``CommandReader._lane``): a NUL, which no
#: run id holds, keeps it apart from runs.
_THREAD_LANE = "\x00thread:"
#: The hold of an entry whose run is not known (a bug met working it out): every later entry
#: waits for it (``CommandReader._holds``).
_ANY_LANE = "\x00any"
#: Why a command the stopping worker's runtime no longer took is handed back.
STOPPING = "the owning worker is stopping"
#: How many times an entry may meet a bug of this code before it is answered ``rejected``.
_ATTEMPTS = 3


class _Later:
    """An entry to leave unacknowledged: the worker's next process answers it."""


class _Bug:
    """A bug met reading an entry (``_dispatch``), raised again in the entry's task."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


_LATER = _Later()
#: (reply_to, request_id, receipt), or ``None``: acknowledge without an answer.
_Answer = tuple[str, str, SteeringReceipt | HandedBack] | _Later | None


class CommandReader:
    def __init__(
        self,
        runtime: ControlledRuntime,
        keys: Keys,
        worker_id: str,
        *,
        block_s: float,
        backoff_s: tuple[float, float],
        counters: RedisCounters,
        outages: Outages,
        seat: Seat,
    ) -> None:
        self.runtime, self.keys, self.worker_id = runtime, keys, worker_id
        self.seat = seat
        self.block_s, self.backoff_s = block_s, backoff_s
        self.counters, self.outages = counters, outages
        #: Receipts of the latest entries answered, by request id: an entry read again
        #: because its acknowledgement was lost gets the same receipt (oldest dropped first).
        self._answered: OrderedDict[str, SteeringReceipt] = OrderedDict()
        #: The submits under way, by request id (each removed when it ends, its receipt kept
        #: in ``_answered``): an entry read again meanwhile waits for its submit's receipt.
        self._taking: dict[str, asyncio.Future[SteeringReceipt]] = {}
        #: Each run's latest entry being answered (``_lane``), by run: the run's next entry
        #: waits for it, so each run's commands are submitted in the order they came, and
        #: no run's wait for a slow policy or store write holds another's.
        self._lanes: dict[str, asyncio.Task[None]] = {}
        #: The entries being answered, by entry id (a backlog read skips them).
        self._inflight: dict[Any, asyncio.Task[None]] = {}
        #: Answers to send (entry id, answer, its fields), and the task that sends them, a
        #: pipeline at a time: the answers that came while one was sent go in the next.
        self._outbox: list[tuple[Any, _Answer, Any]] = []
        self._sender: asyncio.Task[None] | None = None
        #: A send of answers failed: their entries are read again from the backlog.
        self._unsent: Exception | None = None
        #: The first bug met handling an entry since the job last raised one (``_faulted``),
        #: and how many bugs each entry met (bounded: ``_REMEMBER_ANSWERS``).
        self._fault: Exception | None = None
        self._faults: OrderedDict[Any, int] = OrderedDict()
        #: The lanes held by an entry that met a bug and is to be read again: lane -> that
        #: entry's id (``_ANY_LANE``: its run is not known, every lane). A later entry of a
        #: held lane is left unanswered, to be read again after it from the backlog, so a
        #: run's commands are still submitted in stream order: submitted meanwhile, it was
        #: applied before the entry read again. Released once that entry is answered (taken
        #: at a later attempt, or ``rejected`` at its ``_ATTEMPTS``-th bug), or once a
        #: backlog read finds it no longer pending (gone: acknowledged by hand, deleted, a
        #: Redis that came back empty).
        self._holds: dict[str, tuple[int, int]] = {}
        #: The client of the job (or drain) reading the stream: a withdrawable request is
        #: claimed through it (``_claimed``).
        self._client: Redis | None = None
        #: The entries of the backlog read so far (``_forget_gone``).
        self._seen: set[tuple[int, int]] = set()

    async def run(self, redis: Redis) -> None:
        """The job, until cancelled."""
        stream = self.keys.commands(self.worker_id)
        self._client = redis
        backoff = Backoff(*self.backoff_s)
        # First the entries read before (by a process that crashed, or before a lost
        # connection) and never acknowledged, once each: from ``after``, the last one read.
        # An entry left unacknowledged (its runtime had closed) was read again from "0",
        # over and over, and the job never got past the backlog.
        backlog, after = True, "0"
        while True:
            try:
                if not await self.seat.check(redis):
                    return  # another process holds the worker id: the stream is its now
                if backlog:
                    await _ensure_group(redis, stream)
                    if after == "0":
                        self._seen.clear()
                read = await redis.xreadgroup(
                    GROUP,
                    self.worker_id,
                    {stream: after if backlog else ">"},
                    count=100,
                    block=None if backlog else int(self.block_s * 1000),
                )
                entries = read[0][1] if read else []
                if entries and not await self.seat.check(redis):
                    # the read outlasted a stall past the seat's TTL (SIGSTOP, a long GC)
                    # and another process took the worker id meanwhile: the entries are
                    # its own now (it reads them from its backlog, as the same consumer)
                    return
                if backlog and not entries:
                    backlog = False
                    self._forget_gone(None)  # the whole backlog was read
                    continue
                if backlog:
                    after = entries[-1][0]
                await self._dispatch(redis, stream, entries, again=backlog)
                if self._fault is not None:  # a bug, met handling an entry: the job's end
                    fault, self._fault = self._fault, None
                    raise fault
                if self._unsent is not None:
                    unsent, self._unsent = self._unsent, None
                    raise unsent
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                backlog, after = True, "0"
                if "NOGROUP" in str(exc):  # Redis came back empty: make the group again
                    continue
                if str(exc).startswith("UNBLOCKED"):
                    # Redis is up and ended the read: the stream (or its group) was deleted
                    # under it, made again here, or CLIENT UNBLOCK ... ERROR. No outage.
                    log.warning(
                        "worker %s: Redis ended its read of %s (%s); reading it again",
                        self.worker_id,
                        stream,
                        exc,
                    )
                    continue
                if not outage(exc):
                    raise  # a bug: supervise logs it with its traceback and restarts the job
                self.outages.failed(JOB, exc)
                await backoff.wait()
                continue
            self.outages.recovered(JOB)
            backoff.reset()

    async def drain(self, redis: Redis) -> None:
        """Answer every entry left in the stream (the job stopped), then delete the stream.
        Entries keep being read until nothing is left that needs an answer at the moment it
        is deleted; an entry the runtime no longer takes (it closed) is handed back to its
        sender. An entry read under another consumer name (someone looking with
        ``redis-cli``) is taken over and answered too: it is neither in this worker's backlog
        nor new, and the drain read nothing, round after round, until its time ran out."""
        stream = self.keys.commands(self.worker_id)
        self._client = redis
        # What the job was answering is read again here, from the backlog (a submit under
        # way runs on: its entry gets what the log says, or that submit's receipt).
        self.abandon()
        task = asyncio.current_task()
        cancels = task.cancelling() if task is not None else 0  # a close in a cancelled task
        while True:
            if task is not None and task.cancelling() > cancels:
                # redis-py can swallow a cancel that lands in a call (its answer returned):
                # the close's time is out, and this loop would go on for as long as it reads
                raise asyncio.CancelledError
            entries: list[Any] = []
            for after in ("0", ">"):  # read by the stopped job and unanswered, then new ones
                if after == "0":
                    self._seen.clear()
                read = await redis.xreadgroup(GROUP, self.worker_id, {stream: after}, count=100)
                entries = read[0][1] if read else []
                if entries:
                    await self._dispatch(redis, stream, entries, again=after == "0", closing=True)
                    await self._settle()
                    if self._fault is not None:  # no job to end: the entry is read again
                        fault, self._fault = self._fault, None
                        log.error(
                            "worker %s: a command entry met a bug: %s",
                            self.worker_id,
                            fault,
                            exc_info=fault,
                        )
                    if self._unsent is not None:
                        unsent, self._unsent = self._unsent, None
                        raise unsent
                    break
            if entries:
                continue
            if await redis.eval(_DELETE_IF_ANSWERED, 1, stream, GROUP) != -1:
                return
            # Left: entries another consumer read (taken over here, to be read as this
            # worker's backlog), or entries a sender appended meanwhile (read as new ones).
            await redis.xautoclaim(stream, GROUP, self.worker_id, min_idle_time=0, count=100)

    async def _dispatch(
        self,
        redis: Redis,
        stream: str,
        entries: list[Any],
        *,
        again: bool = False,
        closing: bool = False,
    ) -> None:
        """Start answering ``entries`` (those not being answered already), each after the
        entry before it for the same run (``_lane``): the entries of different runs are
        submitted side by side, and each receipt is sent as soon as it is there. They were
        answered a read at a time, all receipts sent together: one command held in a slow
        policy or store write held every other run's commands of its read, and the reader
        read nothing more until it was answered. ``again``: read from the backlog (read
        before, by this worker's earlier process perhaps, and never acknowledged);
        ``closing``: the worker is stopping, and an entry its runtime no longer takes is
        handed back rather than left. Waits only while ``_MAX_INFLIGHT`` entries are being
        answered."""
        self.counters.received += len(entries)
        lanes, inflight = self._lanes, self._inflight
        if again and entries:
            self._seen.update(entry_position(e) for e, _ in entries)
            self._forget_gone(entry_position(entries[-1][0]))
        for entry_id, fields in entries:
            if entry_id in inflight:  # read again from the backlog while being answered
                continue
            parsed: Envelope | MalformedEnvelope | _Bug
            try:
                try:
                    parsed = Envelope.parse(fields)
                except MalformedEnvelope as exc:
                    parsed = exc
                lane = self._lane(parsed)
            except Exception as exc:  # a bug: met again in the entry's own task (_answer_one)
                parsed, lane = _Bug(exc), None
                self._hold(_ANY_LANE, entry_id)  # its run is not known: every run waits
            before = lanes.get(lane) if lane is not None else None
            task = asyncio.create_task(
                self._answer_one(
                    redis, stream, entry_id, fields, parsed, again, closing, before, lane
                )
            )
            inflight[entry_id] = task
            task.add_done_callback(partial(_left, inflight, entry_id))
            if lane is not None:
                lanes[lane] = task
                task.add_done_callback(partial(_left, lanes, lane))
        while len(inflight) >= _MAX_INFLIGHT:
            await asyncio.wait(list(inflight.values()), return_when=asyncio.FIRST_COMPLETED)

    def _hold(self, lane: str, entry_id: Any) -> None:
        """Hold ``lane`` for ``entry_id`` (it met a bug, to be read again), unless an earlier
        entry holds it already."""
        position = entry_position(entry_id)
        if position < self._holds.get(lane, (2**64, 0)):
            self._holds[lane] = position

    def _held(self, lane: str | None, entry_id: Any) -> bool:
        """Whether ``entry_id`` comes after an entry that holds its lane (or every lane)."""
        if not self._holds:
            return False
        position = entry_position(entry_id)
        holds = (self._holds.get(_ANY_LANE), self._holds.get(lane) if lane is not None else None)
        return any(hold is not None and hold < position for hold in holds)

    def _release(self, entry_id: Any) -> None:
        """``entry_id`` is answered: the lane it held (if any) goes on."""
        if self._holds:
            position = entry_position(entry_id)
            for lane in [lane for lane, hold in self._holds.items() if hold == position]:
                del self._holds[lane]

    def _forget_gone(self, upto: tuple[int, int] | None) -> None:
        """Release the holds of entries no longer pending: a backlog read (in id order) got
        past them (up to ``upto``; ``None``: it read the whole backlog) without them."""
        for lane, hold in list(self._holds.items()):
            if hold not in self._seen and (upto is None or hold < upto):
                log.warning(
                    "worker %s: command entry %d-%d, to be read again, is gone; the commands "
                    "after it go on",
                    self.worker_id,
                    *hold,
                )
                del self._holds[lane]

    def _lane(self, parsed: Envelope | MalformedEnvelope) -> str | None:
        """The run whose entries are answered one after another, in the order they came: the
        target's run (a graph's task or node: the graph run), or a thread's run here (else
        the thread); ``None`` for a malformed entry."""
        if isinstance(parsed, MalformedEnvelope):
            return None
        cmd = parsed.command
        run_id = target_run(cmd)
        if run_id is not None:
            return run_id
        thread_id = getattr(cmd.target, "thread_id", "")
        tenant = cmd.actor.tenant_id if isinstance(cmd.actor, HumanActor) else None
        handle = self.runtime.runs.for_thread(thread_id, tenant)
        return handle.run_id if handle is not None else _THREAD_LANE + thread_id

    async def _answer_one(
        self,
        redis: Redis,
        stream: str,
        entry_id: Any,
        fields: Any,
        parsed: Envelope | MalformedEnvelope | _Bug,
        again: bool,
        closing: bool,
        before: asyncio.Task[None] | None,
        lane: str | None,
    ) -> None:
        if before is not None:
            await asyncio.wait([before])  # its outcome is its own: only its end counts here
        if self._held(lane, entry_id):
            return  # read again from the backlog, after the entry that holds its run
        try:
            if isinstance(parsed, _Bug):
                raise parsed.exc
            answer = await self._answer(parsed, again)
        except Exception as exc:
            if outage(exc):  # claiming it: read again once Redis answers, its run held
                self._hold(_ANY_LANE if lane is None else lane, entry_id)
                if self._unsent is None:
                    self._unsent = exc
                return
            answer = self._faulted(entry_id, fields, parsed, exc)
            if isinstance(answer, _Later):  # read again: its run's later entries wait for it
                self._hold(_ANY_LANE if lane is None else lane, entry_id)
                return
        else:
            if self._faults:
                self._faults.pop(entry_id, None)
        self._release(entry_id)
        if isinstance(answer, _Later):
            if not closing:
                return  # the runtime closed first: the worker's next process answers it
            answer = _handed_back(fields)
        self._outbox.append((entry_id, answer, stream))
        if self._sender is None or self._sender.done():
            # this task sends, and what comes meanwhile goes in its next pipeline: a task of
            # the sender's own cost every command one more turn of the loop (p50 +0.4 ms)
            self._sender = asyncio.current_task()
            await self._send_answers(redis)

    def _faulted(
        self,
        entry_id: Any,
        fields: Any,
        parsed: Envelope | MalformedEnvelope | _Bug,
        exc: Exception,
    ) -> _Answer:
        """An entry met a bug (``exc``): the job is to end (``_fault``; ``supervise`` logs it
        with its traceback and starts the job again) and the entry is left to be read again
        after the restart, unless this was its ``_ATTEMPTS``-th bug: then it is answered
        ``rejected`` (not taken: the bug came before the runtime's submit, which answers its
        own failures) and acknowledged."""
        if self._fault is None:
            self._fault = exc
        met = self._faults.pop(entry_id, 0) + 1
        if met < _ATTEMPTS:
            self._faults[entry_id] = met
            if len(self._faults) > _REMEMBER_ANSWERS:
                self._faults.popitem(last=False)
            return _LATER
        reason = f"the owner failed on it {met} times: {type(exc).__name__}: {exc}"
        log.warning(
            "worker %s: command entry %s answered rejected: %s", self.worker_id, entry_id, reason
        )
        if isinstance(parsed, Envelope):
            return parsed.reply_to, parsed.request_id, refuse(parsed.command, reason)
        raw = fields if isinstance(fields, dict) else {}
        request_id, reply_to = text_field(raw, b"request_id"), text_field(raw, b"reply_to")
        if request_id is None or reply_to is None:
            return None  # acknowledged: no one to answer
        receipt = SteeringReceipt.issue(ReceiptStatus.REJECTED, "", None, reason, POLICY)
        return reply_to, request_id, receipt

    async def _send_answers(self, redis: Redis) -> None:
        """Send the answers in ``_outbox``, a pipeline at a time, until none is left. The
        entries are acknowledged only with (after) their receipts; a pipeline that fails
        leaves them for the reader to read again from the backlog (``_unsent``)."""
        while self._outbox:
            batch, self._outbox = self._outbox, []
            try:
                await self._send(redis, batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._unsent = exc

    async def _send(self, redis: Redis, batch: list[tuple[Any, _Answer, Any]]) -> None:
        pipe = redis.pipeline(transaction=False)
        done: dict[str, list[Any]] = {}
        replies: list[tuple[str, str]] = []  # (reply key, request id), in the pipe's order
        for entry_id, answer, stream in batch:
            done.setdefault(stream, []).append(entry_id)
            if answer is not None and not isinstance(answer, _Later):
                reply_to, request_id, receipt = answer
                reply_key = self.keys.replies(reply_to)
                replies.append((reply_key, request_id))
                pairs = reply_fields(request_id, receipt).items()
                pipe.eval(_REPLY, 1, reply_key, _REPLY_MAXLEN, _REPLY_TTL_S, *chain(*pairs))
        for stream, ids in done.items():  # acknowledged only with (after) the receipts
            pipe.xack(stream, GROUP, *ids)
            pipe.xdel(stream, *ids)
        results = await pipe.execute()
        for (reply_key, request_id), kind in zip(replies, results, strict=False):
            if kind is not None:  # the entry's fault, not Redis's: no outage, no retry
                self.counters.bad_reply_to += 1
                log.warning(
                    "worker %s: the receipt of request %s was not sent: its reply target %s "
                    "holds a %s, not a stream",
                    self.worker_id,
                    request_id,
                    reply_key,
                    kind.decode(errors="replace") if isinstance(kind, bytes) else kind,
                )

    async def _settle(self) -> None:
        """Wait until every entry begun is answered and its answer sent (or failed)."""
        while self._inflight or (self._sender is not None and not self._sender.done()):
            waits: list[asyncio.Future[Any]] = list(self._inflight.values())
            if self._sender is not None and not self._sender.done():
                waits.append(self._sender)
            await asyncio.wait(waits)

    def abandon(self) -> None:
        """Stop answering the entries begun (the job stopped): what is left unanswered is read
        again, by the drain or the worker's next process. The submits under way run to their
        end regardless (``_submit``)."""
        for task in [*self._inflight.values(), *([self._sender] if self._sender else [])]:
            task.cancel()
        self._inflight.clear()
        self._lanes.clear()
        self._outbox.clear()

    async def _answer(self, parsed: Envelope | MalformedEnvelope, again: bool = False) -> _Answer:
        envelope = parsed
        if isinstance(envelope, MalformedEnvelope):
            exc = envelope
            self.counters.malformed += 1
            log.warning("dropped a malformed command entry: %s", exc)
            if exc.request_id and exc.reply_to:
                receipt = SteeringReceipt.issue(
                    ReceiptStatus.REJECTED, "", None, f"malformed command: {exc}", POLICY
                )
                return exc.reply_to, exc.request_id, receipt
            return None
        cmd = envelope.command
        earlier = self._answered.get(envelope.request_id)
        if earlier is not None:  # read again (its acknowledgement was lost): same answer
            return envelope.reply_to, envelope.request_id, earlier
        # an entry whose submit is still under way (the job was stopped in it, and the drain
        # reads the entry again) gets what the log says, or else that submit's receipt:
        # submitted again, it would be answered ``duplicate`` of itself
        taking = envelope.request_id in self._taking
        refusal = None if taking else self._refusal(envelope)
        # an entry read again (this worker's earlier process took it, and died before it
        # answered) gets from the log what it was answered then, whether its run is back or
        # not; a command sent again is a duplicate, though its run is not back (yet)
        ask_log = again or refusal is not None
        logged = await self._logged_receipt(cmd, again) if ask_log else None
        if logged is not None:
            receipt = logged
        elif refusal is not None and not self._taken_before(cmd, refusal):
            self.counters.foreign += 1
            log.warning("refused command %s from Redis: %s", cmd.correlation_id, refusal.reason)
            receipt = refusal
        elif envelope.withdrawable and not taking and not await self._claimed(envelope):
            log.warning(
                "command %s (request %s) was taken back by worker %s before it was taken here",
                cmd.correlation_id,
                envelope.request_id,
                envelope.reply_to,
            )
            receipt = refuse(cmd, f"withdrawn by worker {envelope.reply_to!r} before it was taken")
        else:
            try:
                receipt = await self._submit(envelope.request_id, cmd)
            except RuntimeClosed:
                return _LATER
            except Exception as exc:  # a store that cannot log it: the sender learns why
                receipt = refuse(cmd, f"the owner could not take it: {exc}")
        self.counters.answered += 1
        self._remember(envelope.request_id, receipt)
        return envelope.reply_to, envelope.request_id, receipt

    async def _claimed(self, envelope: Envelope) -> bool:
        """Claim a withdrawable request ``taken`` (``CLAIM``): False once its sender took it
        back (its thread command waits there again: submitted here too, it was applied on
        both workers). A Redis outage is raised: the entry is read again."""
        assert self._client is not None
        key = self.keys.claim(envelope.request_id)
        return bool(await self._client.eval(CLAIM, 1, key, TAKEN, CLAIM_TTL_S))

    def _remember(self, request_id: str, receipt: SteeringReceipt) -> None:
        self._answered[request_id] = receipt
        if len(self._answered) > _REMEMBER_ANSWERS:
            self._answered.popitem(last=False)

    async def _submit(self, request_id: str, cmd: SteeringCommand) -> SteeringReceipt:
        """The runtime's receipt for ``cmd``, submitted again when its log write failed in a
        way that may pass (the server ended the connection, perhaps after COMMIT: the router
        takes over the row its first write left: ``written_again``), rather than refused for
        good. When the job is stopped meanwhile (the worker is stopping), the submit still
        runs to its end: cut off after its command was logged, it left a command the runtime
        never took (no event, no delivery, no end) that the drain, reading the entry again,
        answered ``accepted`` from the log; run to its end, the command is the runtime's, the
        runtime's close waits for it, and the drain, reading the entry again, waits for its
        receipt."""
        task = self._taking.get(request_id)
        if task is None:
            task = asyncio.ensure_future(written_again(lambda: self.runtime.submit(cmd)))
            self._taking[request_id] = task
            task.add_done_callback(lambda done: self._took(request_id, done))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_retrieve)
            raise

    def _took(self, request_id: str, task: asyncio.Future[SteeringReceipt]) -> None:
        self._taking.pop(request_id, None)
        if not task.cancelled() and task.exception() is None:
            # kept now: the entry may be read again before the job that began the submit
            # (stopped meanwhile) could keep it
            self._remember(request_id, task.result())

    async def _logged_receipt(self, cmd: SteeringCommand, again: bool) -> SteeringReceipt | None:
        """For a command in this runtime's steering log (under its sender's scope): the
        receipt it got when it was taken, for an entry read ``again``; ``duplicate`` for one
        sent again (naming the run the first went to, as its receipt did). None: not logged,
        or no durable log."""
        if not self.runtime.durable or not isinstance(cmd.actor, HumanActor):
            return None
        try:
            stored = await self.runtime.store.get_command(
                cmd.correlation_id, scope=dedupe_scope(cmd.actor)
            )
        except Exception as exc:  # the log cannot say: refuse as before
            log.warning("could not read command %s from the log: %s", cmd.correlation_id, exc)
            return None
        if stored is None or stored.command.target != cmd.target:
            return None
        if not again:
            return SteeringReceipt.duplicate(cmd.correlation_id, stored.run_id)
        if stored.state == CommandState.DEFERRED:
            status = ReceiptStatus.DEFERRED
        elif stored.state == CommandState.REJECTED:
            status = ReceiptStatus.REJECTED
        else:  # accepted, and perhaps applied (or failed, superseded) since
            status = ReceiptStatus.ACCEPTED
        return SteeringReceipt.issue(
            status,
            cmd.correlation_id,
            stored.run_id,
            stored.reason if status is ReceiptStatus.REJECTED else None,
            None,
        )

    def _taken_before(self, cmd: SteeringCommand, refusal: SteeringReceipt) -> bool:
        """Whether ``cmd``, refused as "not found" (its run is not here, or no longer), is one
        this runtime's router took already (the sender's own scope: nothing of another
        tenant's): submitted, the router answers ``duplicate``, as in one process. Sent again
        just as its run ended here (the listing still showed the run), it was answered "not
        found" for a command that was applied. A durable log answers it first
        (``_logged_receipt``)."""
        return (
            isinstance(cmd.actor, HumanActor)
            and refusal == hidden(cmd)
            and self.runtime.router.state(cmd.correlation_id, scope=dedupe_scope(cmd.actor))
            is not None
        )

    def _refusal(self, envelope: Envelope) -> SteeringReceipt | None:
        """The receipt of a command the owner refuses outright, or ``None`` to submit it."""
        cmd = envelope.command
        if envelope.to != self.worker_id:
            return refuse(cmd, f"addressed to worker {envelope.to!r}, not {self.worker_id!r}")
        if not isinstance(cmd.actor, HumanActor):
            return refuse(cmd, "only operators' commands (human actors) travel between workers")
        run_id = target_run(cmd)
        thread_id = getattr(cmd.target, "thread_id", None)
        if run_id is not None:
            handle = self.runtime.runs.get(run_id)
        else:
            handle = (
                self.runtime.runs.for_thread(thread_id, cmd.actor.tenant_id) if thread_id else None
            )
        if handle is None or handle.info.tenant_id != cmd.actor.tenant_id:
            return hidden(cmd)  # never confirm that another tenant's run exists
        return None


def _left(tasks: dict[Any, asyncio.Task[None]], key: Any, task: asyncio.Future[None]) -> None:
    """Forget ``key``'s task once it is done, unless another took its place (a lane's next
    entry)."""
    if tasks.get(key) is task:
        del tasks[key]


def _retrieve(task: asyncio.Future[Any]) -> None:
    # the drain answers the entry (from the log, or with this very submit's outcome): what
    # this submit raised, if anything, is told there
    if not task.cancelled():
        task.exception()


def _handed_back(raw: dict[bytes, bytes] | None) -> tuple[str, str, HandedBack]:
    """The hand-back of an entry (it read as an envelope before: its runtime refused it)."""
    envelope = Envelope.parse(raw)
    return envelope.reply_to, envelope.request_id, HandedBack(STOPPING)


async def _ensure_group(redis: Redis, stream: str) -> None:
    from redis.exceptions import ResponseError

    try:
        await redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
