"""``Control``: what operators see and do, over an in-process ``Runtime`` and/or a ``Store``.

The HTTP API and the ``tinyagents runs`` CLI both stand on it (no web framework here):

    control = Control(runtime)                     # runs of this process (and its store)
    control = Control(store=open_store(url))       # runs of other processes sharing a store
    control = Control(runtime, redis=RedisControl(runtime, url))  # and of every worker on Redis
    runs = await control.list_runs(tenant_id="acme")       # every run, newest first
    page = await control.page_runs(tenant_id="acme", limit=50)  # one page, and its next_cursor
    receipt = await control.submit(cmd)            # in-process, or through the store's inbox

``tenant_id=None`` means an administrator (every tenant). A run that is unknown and a run of
another tenant read the same: ``None``, which callers answer as 404.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import itertools
import json
import logging
import secrets
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tinyagents._bounds import seconds, whole_number
from tinyagents._record import FrozenRecord
from tinyagents.distributed import RedisControl
from tinyagents.errors import (
    ConfigurationError,
    ControlPlaneUnavailable,
    DamagedData,
    RuntimeClosed,
)
from tinyagents.events.models import Event, SteeringEvent, json_safe
from tinyagents.protocol.commands import (
    AnyTarget,
    SteeringCommand,
    SteeringReceipt,
    SteeringTarget,
    ThreadTarget,
    dedupe_scope,
    sender_tenant,
)
from tinyagents.protocol.state import CommandState
from tinyagents.protocol.text import storable
from tinyagents.runtime import Runtime
from tinyagents.steering.remote import (
    LISTING_POLL_S,
    LISTING_WAIT_S,
    owner_silent,
    submit_through_store,
)
from tinyagents.store.base import (
    MAX_WARNED_ROWS,
    SILENCE_S,
    RunKey,
    Store,
    WarnedRows,
    run_key,
    runs_match,
)
from tinyagents.store.memory import UsedNonces

_log = logging.getLogger("tinyagents.server")
#: How long a readiness probe waits for the store to answer a lookup.
READY_TIMEOUT_S = 2.0

#: Events a store-less runtime's ``Control`` keeps for ``trace`` and ``read_events``.
RING_SIZE = 10_000
#: The longest cursor read: two bounded texts, base64 encoded.
MAX_CURSOR = 2048
#: The most used nonces a ``Control`` without a store keeps (each until it expires, and
#: ``NONCE_MARGIN_S`` after): past it, a claim is a ``StoreError``.
MAX_USED_NONCES = 100_000


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class SteeringPage(FrozenRecord):
    """One page of a run's command history (``Control.steering``); ``before`` is the next
    (older) page's cursor, None on the last."""

    commands: list[dict[str, Any]]
    before: int | None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RunPage(FrozenRecord):
    """One page of a run listing; ``next_cursor`` None on the last."""

    runs: list[dict[str, Any]]
    next_cursor: str | None


def encode_cursor(key: RunKey) -> str:
    """An opaque cursor for the runs after ``key`` (URL-safe base64 of a JSON pair)."""
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str) -> RunKey:
    """The key a cursor of ``encode_cursor`` holds; ``ValueError`` for any other text. A
    cursor is only a place in an order: it names no tenant, and whoever sends it is shown
    their own runs after that place."""
    if not cursor or len(cursor) > MAX_CURSOR:
        raise ValueError(f"a cursor is 1 to {MAX_CURSOR} characters, from a next link")
    try:
        text = cursor.encode("ascii")
        raw = base64.urlsafe_b64decode(text + b"=" * (-len(text) % 4))
        if base64.urlsafe_b64encode(raw).rstrip(b"=") != text:
            raise ValueError("not canonical")
        key = json.loads(raw.decode())
    except (ValueError, UnicodeError, binascii.Error, RecursionError):
        key = None
    if (
        not isinstance(key, list)
        or len(key) != 2
        or not all(isinstance(part, str) and storable(part) for part in key)
        or not _a_time(key[0])
    ):
        raise ValueError("not a cursor this server handed out: use the one from a next link")
    return (key[0], key[1])


def _a_time(text: str) -> bool:
    """Whether a cursor's first part is a run's ``created_at`` as written: an ISO time (or
    empty, for a run saved without one)."""
    if not text:
        return True
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


class Control:
    """What operators see and do, over an in-process Runtime and/or a Store (other processes).

    With a runtime whose store is durable, that store is read too (runs of other processes
    sharing it, the event log); without one, the last ``ring_size`` events of the runtime are
    kept here (from construction on) to serve ``trace`` and ``read_events``.
    """

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        store: Store | None = None,
        receipt_timeout_s: float = 5.0,
        ring_size: int = RING_SIZE,
        redis: RedisControl | None = None,
        listing_wait_s: float = LISTING_WAIT_S,
    ) -> None:
        """``redis``: this worker's seat on the Redis control plane (started and closed by
        its owner): runs of every live worker are listed, and their commands sent there.

        ``listing_wait_s``: how long a command for a run that is not listed (in the store, on
        Redis) looks for it again before it is answered "not found": another process's run
        is listed from its owner's next snapshot write, a moment after its ``start`` returned
        (``steering.remote.LISTING_WAIT_S``)."""
        if runtime is None and store is None:
            raise ConfigurationError("Control needs a runtime, a store, or both")
        _check_bounds(ring_size, receipt_timeout_s, listing_wait_s)
        self.runtime = runtime
        #: set by ``end_streams``: the event streams end
        self.streams_ended = False
        if store is None and runtime is not None and runtime.durable:
            store = runtime.store
        self.store = store
        self.receipt_timeout_s = receipt_timeout_s
        self.listing_wait_s = listing_wait_s
        self.redis = redis if redis is not None and redis.enabled else None
        self._ring: deque[tuple[int, Event]] | None = None
        #: The nonces used without a store to record them (``claim_nonce``).
        self._nonces = UsedNonces(limit=MAX_USED_NONCES)
        self._ids = itertools.count(1)
        #: The damaged rows whose tenant does not read already warned of (``_stored_run``).
        self._warned = WarnedRows(limit=MAX_WARNED_ROWS)
        if runtime is not None:
            runtime.live_runs()  # pending interrupts are known from their events on
            if store is None:
                self._ring = deque(maxlen=ring_size)
                runtime.bus.add_sink(self._keep)
        #: A log in memory counts from 1 again in each process: another name each time.
        self._fleeting_log = (
            secrets.token_hex(8)
            if store is None
            or not store.url
            or store.url.startswith("memory:")
            or store.url == "sqlite:///:memory:"
            else None
        )

    @property
    def log_id(self) -> str:
        """The name of the event log whose ids the event streams send: a log in memory counts
        from 1 again in each process, so it is another name each time; a store's log keeps
        its ids, and its name is the store's (``Store.log_name``: a PostgreSQL store's names
        its database, schema and tables, however its URL was written), or else its URL's
        (hashed: a path, a host are not the client's; a SQLite store's URL names its file
        resolved, however the path to it was written)."""
        if self._fleeting_log is not None:
            return self._fleeting_log
        assert self.store is not None
        return self.store.log_name or hashlib.sha256(self.store.url.encode()).hexdigest()[:16]

    def _keep(self, event: Event) -> None:
        assert self._ring is not None
        self._ring.append((next(self._ids), event))

    def end_streams(self) -> None:
        """End every event stream at its next poll (the server is stopping: a stream left
        open would be cancelled when the grace period runs out, logged as an error)."""
        self.streams_ended = True

    def close(self) -> None:
        """Stop keeping the runtime's events (the runtime and store stay open)."""
        if self._ring is not None and self.runtime is not None:
            self.runtime.bus.remove_sink(self._keep)

    async def readiness(self) -> dict[str, str]:
        """Each dependency this control needs, ``"ok"`` or ``"unavailable"``: its runtime (open),
        its store (answers a lookup within ``READY_TIMEOUT_S``) and Redis (no job of the
        control plane in an outage). Why one is unavailable is logged, not returned: a probe
        asks without a token."""
        checks: dict[str, str] = {}
        if self.runtime is not None:
            try:
                self.runtime.require_open()
                checks["runtime"] = "ok"
            except RuntimeClosed:
                checks["runtime"] = "unavailable"
        if self.store is not None:
            try:
                async with asyncio.timeout(READY_TIMEOUT_S):
                    await self.store.load_run("readyz")  # any lookup: the store answers
                checks["store"] = "ok"
            except Exception as exc:
                _log.warning("readiness: the store does not answer: %r", exc)
                checks["store"] = "unavailable"
        if self.redis is not None:
            checks["redis"] = "ok" if self.redis.connected else "unavailable"
        return checks

    # ------------------------------------------------------------------ reading

    async def page_runs(
        self,
        *,
        tenant_id: str | None,
        statuses: Sequence[str] = (),
        root_run_id: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> RunPage:
        """One page of the tenant's runs, newest first (by ``created_at``, then run id),
        filtered by status (any of ``statuses``) and tree, after ``cursor`` (a page's
        ``next_cursor``; ``ValueError`` for one that is none).

        The store is asked for one page (``limit`` + 1 rows, filtered and ordered by it); the
        live snapshots of this process and of the other workers on Redis (fresher than the
        store's copies, and bounded by the runs alive now) replace their stored copies and
        join the page they sort into. A page may hold fewer than ``limit`` runs (a stored
        row whose fresh copy no longer matches) and still have a ``next_cursor``: the walk
        ends when it is None."""
        before = decode_cursor(cursor) if cursor is not None else None
        stored: list[dict[str, Any]] = []
        if self.store is not None:
            stored = await self.store.list_runs(
                tenant_id=tenant_id,
                statuses=tuple(statuses),
                root_run_id=root_run_id,
                before=before,
                limit=limit + 1,
            )
        fresh = await self._fresh_snapshots(tenant_id)
        # Past the store's last row, rows the store did not return may sort: the page ends
        # there (that row included), and so does what fresh snapshots may add to it.
        horizon = run_key(stored[-1]) if len(stored) > limit else None
        merged = {s["run_id"]: fresh.get(s["run_id"], s) for s in stored}
        for run_id, snap in fresh.items():
            merged.setdefault(run_id, snap)
        kept = sorted(
            (
                s
                for s in merged.values()
                if runs_match(
                    s,
                    tenant_id=tenant_id,
                    statuses=statuses,
                    root_run_id=root_run_id,
                    before=before,
                )
                and (horizon is None or run_key(s) >= horizon)
            ),
            key=run_key,
            reverse=True,
        )
        page = [_with_liveness(s) for s in kept[:limit]]
        if len(kept) > limit:
            last: RunKey | None = run_key(page[-1])
        else:
            last = horizon
        return RunPage(runs=page, next_cursor=encode_cursor(last) if last is not None else None)

    async def list_runs(
        self,
        *,
        tenant_id: str | None,
        status: str | None = None,
        root_run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every run of the tenant (filtered by status and tree), newest first, read a page at
        a time (``page_runs``): for a tree or a script, not for a listing an operator pages."""
        runs: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await self.page_runs(
                tenant_id=tenant_id,
                statuses=(status,) if status is not None else (),
                root_run_id=root_run_id,
                cursor=cursor,
                limit=1000,
            )
            runs += page.runs
            if page.next_cursor is None:
                return runs
            cursor = page.next_cursor

    async def _fresh_snapshots(self, tenant_id: str | None) -> dict[str, dict[str, Any]]:
        """The live runs' snapshots, fresher than the store's: every worker's on Redis, then
        this process's own (with their live counters)."""
        fresh: dict[str, dict[str, Any]] = {}
        if self.redis is not None:
            for snap in await self.redis.list_runs(tenant_id):
                fresh[snap["run_id"]] = _heard_from(snap)
        if self.runtime is not None:
            for snap in self.runtime.live_snapshots():
                if tenant_id is None or snap["tenant_id"] == tenant_id:
                    fresh[snap["run_id"]] = snap
        return fresh

    async def get_run(self, run_id: str, *, tenant_id: str | None) -> dict[str, Any] | None:
        """The run's snapshot; None for an unknown run and for another tenant's. Another
        tenant's is looked for as far as an unknown one (Redis, then the store): found in
        this process's memory, its None came a store lookup sooner, and the time told the
        asker that the run exists."""
        snap: dict[str, Any] | None = None

        def seen() -> bool:  # found, and the asker's (else: looked for further)
            return snap is not None and (tenant_id is None or snap["tenant_id"] == tenant_id)

        if self.runtime is not None:
            if run_id in self.runtime.runs:
                snap = self.runtime.live_snapshots([run_id])[0]
            else:  # released here, its final snapshot not in the store yet: this is the run
                snap = self.runtime.released_snapshot(run_id)
        if not seen() and self.redis is not None:
            try:
                heard = await self.redis.get_run(run_id)
            except ControlPlaneUnavailable:
                heard = None
            if snap is None and heard is not None:
                snap = _heard_from(heard)
        if not seen() and self.store is not None:
            stored = await self._stored_run(run_id, tenant_id)
            snap = stored if snap is None else snap
        if not seen():
            return None
        assert snap is not None
        return _with_liveness(snap)

    async def _stored_run(self, run_id: str, tenant_id: str | None) -> dict[str, Any] | None:
        """The store's snapshot of the run. A damaged one (``DamagedData``) is raised to its
        own tenant (and an administrator) alone: to another tenant it is None, as a run of
        that tenant is, or the error would tell it the run exists. One whose tenant does not
        read either is None to everybody (whose it is is not known), with a warning naming
        the row to repair (once a row: ``WarnedRows``, not at every read of it)."""
        assert self.store is not None
        try:
            stored = await self.store.load_run(run_id)
        except DamagedData as exc:
            if exc.tenant_id is None:
                if self._warned.first(run_id):
                    _log.warning(
                        "damaged data in the store, answered as no run (its tenant does not "
                        "read either): %s",
                        exc,
                    )
                return None
            if tenant_id is not None and exc.tenant_id != tenant_id:
                return None
            raise
        if len(self._warned):  # (a run that reads: one warned of was repaired)
            self._warned.forget(run_id)
        return stored

    async def listed_run(self, run_id: str, *, tenant_id: str | None) -> dict[str, Any] | None:
        """``get_run`` for a run about to be sent a command: one that is not there is looked
        for again, every ``LISTING_POLL_S`` for ``listing_wait_s``, when another process could
        hold it (there is a store or Redis), since a run started a moment ago is listed only
        from its owner's next snapshot write. An unknown run and another tenant's wait alike,
        so the time tells them apart by nothing."""
        snap = await self.get_run(run_id, tenant_id=tenant_id)
        if snap is not None or (self.store is None and self.redis is None):
            return snap
        deadline = time.monotonic() + self.listing_wait_s
        while snap is None and time.monotonic() < deadline:
            await asyncio.sleep(LISTING_POLL_S)
            snap = await self.get_run(run_id, tenant_id=tenant_id)
        return snap

    async def tree(
        self, run_id: str, *, tenant_id: str | None, limit: int | None = None
    ) -> dict[str, Any] | None:
        """The run with its descendants: its snapshot plus ``children``, nested (64 levels at
        most). With ``limit``, at most that many runs in all, read from the newest of the
        tree (``page_runs``: never more than ``limit`` + 1 rows a page), and the top node
        says ``truncated`` (True when runs of the tree were left out: those older than the
        ones read, or deeper than 64 levels; a run whose parent was left out is left out
        too)."""
        snap = await self.get_run(run_id, tenant_id=tenant_id)
        if snap is None:
            return None
        family: list[dict[str, Any]] = []
        cursor: str | None = None
        truncated = False
        while True:
            want = 1000 if limit is None else min(limit - len(family), 1000)
            page = await self.page_runs(
                tenant_id=tenant_id, root_run_id=snap["root_run_id"], cursor=cursor, limit=want
            )
            family += page.runs
            if page.next_cursor is None:
                break
            if limit is not None and len(family) >= limit:
                truncated = True
                break
            cursor = page.next_cursor
        family = [s for s in family if s["run_id"] != run_id]
        if limit is not None and len(family) > limit - 1:  # the run itself is one of them
            family, truncated = family[: limit - 1], True
        children: dict[str | None, list[dict[str, Any]]] = {}
        for s in reversed(family):  # each run's children oldest first, in the order started
            children.setdefault(s.get("parent_run_id"), []).append(s)

        def nest(node: dict[str, Any], depth: int) -> dict[str, Any]:
            nonlocal truncated
            below = children.get(node["run_id"], [])
            if depth >= 64 and below:
                below, truncated = [], True
            return {**node, "children": [nest(c, depth + 1) for c in below]}

        tree = nest(snap, 0)
        if limit is not None:
            tree["truncated"] = truncated
        return tree

    async def trace(
        self,
        run_id: str,
        *,
        tenant_id: str | None,
        limit: int = 500,
        before: int | None = None,
    ) -> list[dict[str, Any]] | None:
        """The run's last ``limit`` events (steering and supervisor ones included) before the
        event-log id ``before`` (None: up to its newest), oldest first, each with its
        event-log ``id``; None for an unknown or foreign run. Only that page is read (the
        store's ``last_events``), however long the run's log is: the page before it is
        ``before=`` the first frame's id."""
        if await self.get_run(run_id, tenant_id=tenant_id) is None:
            return None
        if self.store is not None:
            rows = await self.store.last_events(before_id=before, run_id=run_id, limit=limit)
        else:
            rows = []
            for i, e in reversed(self._ring or ()):  # (no await: the ring stays as it is)
                if len(rows) >= limit:
                    break
                if e.run_id == run_id and (before is None or i < before):
                    rows.append((i, e))
            rows.reverse()
        return [_frame(i, e) for i, e in rows]

    async def steering(
        self,
        run_id: str,
        *,
        tenant_id: str | None,
        limit: int = 100,
        before: int | None = None,
    ) -> SteeringPage | None:
        """The last ``limit`` commands sent to the run whose steering events have event-log
        ids below ``before`` (None: up to the newest), in the order first seen, each with its
        state (that of its latest step on the page) and the steps it went through (each with
        its event-log ``id``); None for an unknown or foreign run. The run's steering events
        are read back from the newest (the store's ``last_events``), until the page has
        ``limit`` commands: never the run's whole log. A command whose steps span two pages
        is on both, with the steps each has. Without a store, the events this ``Control``
        keeps (``ring_size``), as for ``trace``.

        A graph task's entry (``gt-...``) has those sent to its task: its graph run takes
        them (see ``command_target``), and a token narrowed to the entry may not read the
        graph run."""
        snap = await self.get_run(run_id, tenant_id=tenant_id)
        if snap is None:
            return None
        task_id: str | None = None
        if task_entry(snap):
            task_id = snap["task_id"]
            run_id = snap["parent_run_id"]
        if self.runtime is not None and self.store is not None:
            await self.runtime.flush_events()  # a command just answered is on the page
        kept: list[tuple[int, SteeringEvent]] = []
        seen: set[tuple[str, str]] = set()
        cursor = before
        batch = min(limit * 4 + 1, 1000)
        more = False
        while not more:
            rows = await self._last_steering_events(run_id, before=cursor, limit=batch)
            for i, e in reversed(rows):
                if task_id is not None and getattr(e.target, "task_id", None) != task_id:
                    continue
                key = (dedupe_scope(e.actor), e.correlation_id)
                if key not in seen:
                    if len(seen) >= limit:
                        more = True
                        break
                    seen.add(key)
                kept.append((i, e))
            if len(rows) < batch:
                break
            cursor = rows[0][0]
        kept.reverse()
        return SteeringPage(
            commands=command_history(kept), before=kept[0][0] if more and kept else None
        )

    async def _last_steering_events(
        self, run_id: str, *, before: int | None, limit: int
    ) -> list[tuple[int, SteeringEvent]]:
        """The run's last ``limit`` steering events before event id ``before``, oldest first."""
        if self.store is not None:
            rows = await self.store.last_events(
                before_id=before, run_id=run_id, type_prefix="steering.", limit=limit
            )
        else:
            rows = []
            for i, e in reversed(self._ring or ()):  # (no await: the ring stays as it is)
                if len(rows) >= limit:
                    break
                if (
                    e.run_id == run_id
                    and isinstance(e, SteeringEvent)
                    and (before is None or i < before)
                ):
                    rows.append((i, e))
            rows.reverse()
        return [(i, e) for i, e in rows if isinstance(e, SteeringEvent)]

    async def read_events(
        self,
        *,
        tenant_id: str | None,
        after_id: int = 0,
        run_id: str | None = None,
        root_run_id: str | None = None,
        limit: int = 1000,
        entry: EntryScope | None = None,
    ) -> list[tuple[int, dict[str, Any]]]:
        """Events with id > ``after_id``, in id order, as (id, ``event.to_dict(mode="json")``:
        a float that is NaN or infinite is still a float, which ``sse.format_event`` writes
        as the store does, ``events.models.json_safe``). With
        ``entry`` (a graph task's entry), those of the entry and of its graph run: the caller
        keeps what ``entry.keeps``."""
        if entry is None:
            rows = await self._events(
                after_id=after_id,
                tenant_id=tenant_id,
                run_id=run_id,
                root_run_id=root_run_id,
                limit=limit,
            )
        else:
            rows = []
            for of in (entry.run_id, entry.graph_run_id):
                rows += await self._events(
                    after_id=after_id,
                    tenant_id=tenant_id,
                    run_id=of,
                    root_run_id=root_run_id,
                    limit=limit,
                )
            # Each read stops at ``limit``; the first ``limit`` of both together are all
            # there are up to the last of them (no row either read left out is older).
            rows = sorted(rows, key=lambda row: row[0])[:limit]
        return [(i, e.to_dict(mode="json")) for i, e in rows]

    async def _events(
        self,
        *,
        after_id: int,
        tenant_id: str | None = None,
        run_id: str | None = None,
        root_run_id: str | None = None,
        limit: int,
    ) -> list[tuple[int, Event]]:
        if self.store is not None:
            return await self.store.read_events(
                after_id=after_id,
                tenant_id=tenant_id,
                run_id=run_id,
                root_run_id=root_run_id,
                limit=limit,
            )
        rows: list[tuple[int, Event]] = []
        for i, e in list(self._ring or ()):
            if (
                i > after_id
                and (tenant_id is None or e.tenant_id == tenant_id)
                and (run_id is None or e.run_id == run_id)
                and (root_run_id is None or e.root_run_id == root_run_id)
            ):
                rows.append((i, e))
                if len(rows) >= limit:
                    break
        return rows

    # ------------------------------------------------------------------ single use

    async def claim_nonce(self, nonce: str, *, expires_at: datetime) -> bool:
        """Whether this is the first use of ``nonce`` (an event-stream ticket's): recorded in
        the store, where every process sharing it (``serve --workers N``) finds it, or, with
        no store, in this process only (``Store.claim_nonce``). ``StoreError`` when it cannot
        be recorded (then it is not used)."""
        if self.store is not None:
            return await self.store.claim_nonce(nonce, expires_at=expires_at)
        return self._nonces.claim(nonce, expires_at=expires_at)

    # ------------------------------------------------------------------ acting

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt:
        """The command's receipt: from the runtime here when it holds the target, else from
        the owning runtime through the store's inbox (``ReceiptTimeout`` if it does not
        answer within ``receipt_timeout_s``), or from another worker through Redis when one
        holds it (through the store while Redis is unreachable, if there is one). A thread
        command that finds no run of its thread anywhere is deferred in the runtime here (through
        the ``RedisControl`` when Redis is up), for the thread's next run, as in one process;
        without a runtime it is ``rejected`` "not found"."""
        runtime = self.runtime
        if runtime is not None and _holds(runtime, cmd):
            return await runtime.submit(cmd)
        listing_wait_s = self.listing_wait_s
        # A thread command no process runs a run of (none here, none listed on Redis or in
        # the store) is deferred here for the thread's next run, as in one process (with
        # Redis up, through it: the thread job hands it on, or refuses a logged one, once the
        # thread runs on another worker); it was answered "not found" after the listing wait.
        no_run = runtime.submit if runtime is not None else None
        if self.redis is not None:
            try:
                if await self.redis.holds_elsewhere(cmd):
                    return await self.redis.submit(cmd)
            except ControlPlaneUnavailable:
                if self.store is None:
                    raise
            else:
                if runtime is not None:
                    no_run = self.redis.submit  # a run listed on it meanwhile takes it
                # a run neither here nor listed on Redis was looked for there for its listing
                # wait: the store is read once, not waited on again (an unknown run would take
                # twice as long as another tenant's, which Redis answers after one wait)
                run_id = getattr(cmd.target, "run_id", None)
                if run_id is not None and (runtime is None or run_id not in runtime.runs):
                    listing_wait_s = 0.0
        if runtime is not None and self.store is None:
            return await runtime.submit(cmd)
        assert self.store is not None
        return await submit_through_store(
            self.store,
            cmd,
            timeout_s=self.receipt_timeout_s,
            listing_wait_s=listing_wait_s,
            no_run=no_run,
            released=runtime.released_snapshot if runtime is not None else None,
        )


def command_target(snap: dict[str, Any], task_id: str | None = None) -> AnyTarget | None:
    """The target of a command sent to the run of ``snap`` (to its task ``task_id`` if
    given); None when ``task_id`` is no task of that run.

    A graph task's own entry in the run tree (``gt-...``, the console's task row, listed
    ``interrupted`` while its question waits) has no loop to take a command: its graph runs
    it, so a command to the entry, or to the entry's task, goes to that task of its graph
    run. A command queued on the entry itself would stay ``accepted`` until the graph ended.
    """
    run_id = snap["run_id"]
    if task_entry(snap):
        if task_id is not None and task_id != snap["task_id"]:
            return None
        return SteeringTarget.graph_task(snap["parent_run_id"], snap["task_id"])
    if task_id is not None:
        return SteeringTarget.graph_task(run_id, task_id)
    return SteeringTarget.agent_run(run_id)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class EntryScope(FrozenRecord):
    """What the event stream of a graph task's entry (``gt-...``) shows: the entry's own
    events and the steering events of the commands sent to its task, which its graph run
    takes and files under its own id (see ``command_target``)."""

    run_id: str
    graph_run_id: str
    task_id: str

    @classmethod
    def of(cls, snap: dict[str, Any]) -> EntryScope | None:
        """The scope of ``snap``'s run when it is a task's entry, else None."""
        if not task_entry(snap):
            return None
        return cls(
            run_id=snap["run_id"], graph_run_id=snap["parent_run_id"], task_id=snap["task_id"]
        )

    def keeps(self, event: dict[str, Any]) -> bool:
        if event.get("run_id") == self.run_id:
            return True
        target = event.get("target")
        return (
            event.get("run_id") == self.graph_run_id
            and str(event.get("type", "")).startswith("steering.")
            and isinstance(target, dict)
            and target.get("type") == "graph_task"
            and target.get("task_id") == self.task_id
        )


def task_entry(snap: dict[str, Any]) -> bool:
    """Whether a run's snapshot is a graph task's entry in the tree (not a run of its own)."""
    return (
        snap.get("kind") == "graph"
        and bool(snap.get("task_id"))
        and bool(snap.get("parent_run_id"))
    )


def _holds(runtime: Runtime, cmd: SteeringCommand) -> bool:
    """Whether ``runtime`` holds a run ``cmd``'s sender may see: another tenant's run here is
    answered "not found" where an unknown one is, after the same listing wait."""
    target = cmd.target
    tenant = sender_tenant(cmd.actor)
    if isinstance(target, ThreadTarget):
        return runtime.runs.for_thread(target.thread_id, tenant) is not None
    handle = runtime.runs.get(target.run_id)
    return handle is not None and (tenant is None or handle.info.tenant_id == tenant)


def _frame(event_id: int, event: Event) -> dict[str, Any]:
    # a NaN or an infinity as the string the store writes ("NaN"), not the null FastAPI made
    return {"id": event_id, **json_safe(event.to_dict(mode="json"))}


def command_history(events: list[tuple[int, SteeringEvent]]) -> list[dict[str, Any]]:
    """Steering events (with their event-log ids) grouped by command, in the order the
    commands were first seen: each with ``correlation_id``, ``kind``, ``actor``, ``state``,
    ``terminal``, ``reason``, ``policy_id`` and its ``events`` (id, type, at, reason). A
    command is its correlation id in its sender's scope (``dedupe_scope``): two senders'
    commands under one id stay apart."""
    commands: dict[tuple[str, str], dict[str, Any]] = {}
    for event_id, e in events:
        key = (dedupe_scope(e.actor), e.correlation_id)
        entry = commands.get(key)
        if entry is None:
            entry = commands[key] = {
                "correlation_id": e.correlation_id,
                "kind": e.kind.value,
                "actor": e.actor.describe(),
                "target": e.target.describe(),
                "payload_summary": e.payload_summary,
                "events": [],
            }
        state = CommandState(e.type.removeprefix("steering."))
        entry["state"] = state.value
        entry["terminal"] = state.terminal
        if e.reason is not None:
            entry["reason"] = e.reason
        if e.policy_id is not None:
            entry["policy_id"] = e.policy_id
        entry["events"].append(
            {"id": event_id, "type": e.type, "at": e.at.isoformat(), "reason": e.reason}
        )
    for entry in commands.values():
        entry.setdefault("reason", None)
        entry.setdefault("policy_id", None)
    return list(commands.values())


def _with_liveness(snap: dict[str, Any]) -> dict[str, Any]:
    """The snapshot with ``owner_silent``: True for an unfinished run whose owner wrote no
    heartbeat for ``OWNER_SILENT_S`` (its process is likely gone: the run stays in its last
    status for ever, and commands to it are refused). A copy: live snapshots are shared. A
    snapshot ``_heard_from`` a live worker keeps its ``owner_silent`` (False). The store's
    ``SILENCE_S``, which it is judged by, is not shown: stale once read. A NaN or an
    infinity in it (an old run's NaN cost, which SQLite kept as a bare ``NaN``) is the
    string an event's is (``json_safe``: "NaN"), not the ``null`` FastAPI would make."""
    marked: dict[str, Any] = json_safe(snap)
    if "owner_silent" not in marked:
        marked["owner_silent"] = owner_silent(snap)
    marked.pop(SILENCE_S, None)
    return marked


def _heard_from(snap: dict[str, Any]) -> dict[str, Any]:
    """A snapshot read from the Redis mirror, marked ``owner_silent`` False: Redis lists only
    the runs of workers that beat within its ``ttl_s``, so its owner is alive. (Its
    ``updated_at`` is when the run last moved: the mirror rewrites an idle run only on its
    next change, so that time says nothing of its owner.)"""
    return {**snap, "owner_silent": False}


def _check_bounds(ring_size: object, receipt_timeout_s: object, listing_wait_s: object) -> None:
    """Refuse a ``Control`` bound that is no number of its kind (``ConfigurationError``, as
    ``create_app`` refuses its stream bounds): ``ring_size=True`` kept one event (``True ==
    1``), ``-1`` was deque's bare ``ValueError``; a ``receipt_timeout_s`` of 0, below 0 or
    NaN is no wait for another worker's receipt, and ``True`` a second's."""
    whole_number("ring_size", ring_size)
    seconds("receipt_timeout_s", receipt_timeout_s)
    seconds("listing_wait_s", listing_wait_s, zero=True)
