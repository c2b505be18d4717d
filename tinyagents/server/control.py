"""``Control``: what operators see and do, over an in-process ``Runtime`` and/or a ``Store``.

The HTTP API and the ``tinyagents runs`` CLI both stand on it (no web framework here):

    control = Control(runtime)                     # runs of this process (and its store)
    control = Control(store=open_store(url))       # runs of other processes sharing a store
    control = Control(runtime, redis=RedisControl(runtime, url))  # and of every worker on Redis
    runs = await control.list_runs(tenant_id="acme")
    receipt = await control.submit(cmd)            # in-process, or through the store's inbox

``tenant_id=None`` means an administrator (every tenant). A run that is unknown and a run of
another tenant read the same: ``None``, which callers answer as 404.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

from tinyagents.distributed import RedisControl
from tinyagents.errors import ConfigurationError, ControlPlaneUnavailable
from tinyagents.events.models import Event, SteeringEvent
from tinyagents.protocol.commands import SteeringCommand, SteeringReceipt, ThreadTarget
from tinyagents.protocol.state import CommandState
from tinyagents.runtime import Runtime
from tinyagents.steering.remote import submit_through_store
from tinyagents.store.base import Store

#: Events a store-less runtime's ``Control`` keeps for ``trace`` and ``read_events``.
RING_SIZE = 10_000


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
    ) -> None:
        """``redis``: this worker's seat on the Redis control plane (started and closed by
        its owner): runs of every live worker are listed, and their commands sent there."""
        if runtime is None and store is None:
            raise ConfigurationError("Control needs a runtime, a store, or both")
        self.runtime = runtime
        if store is None and runtime is not None and runtime.durable:
            store = runtime.store
        self.store = store
        self.receipt_timeout_s = receipt_timeout_s
        self.redis = redis if redis is not None and redis.enabled else None
        self._ring: deque[tuple[int, Event]] | None = None
        self._ids = itertools.count(1)
        if runtime is not None:
            runtime.live_runs()  # pending interrupts are known from their events on
            if store is None:
                self._ring = deque(maxlen=ring_size)
                runtime.bus.add_sink(self._keep)

    def _keep(self, event: Event) -> None:
        assert self._ring is not None
        self._ring.append((next(self._ids), event))

    def close(self) -> None:
        """Stop keeping the runtime's events (the runtime and store stay open)."""
        if self._ring is not None and self.runtime is not None:
            self.runtime.bus.remove_sink(self._keep)

    # ------------------------------------------------------------------ reading

    async def list_runs(
        self,
        *,
        tenant_id: str | None,
        status: str | None = None,
        root_run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Snapshots of the tenant's live and recent runs (live counters for the runs of this
        process), oldest first, filtered by status and tree."""
        snaps: dict[str, dict[str, Any]] = {}
        if self.store is not None:
            for snap in await self.store.load_runs(tenant_id=tenant_id):
                snaps[snap["run_id"]] = snap
        if self.redis is not None:  # other workers' live runs (their snapshots are fresher)
            for snap in await self.redis.list_runs(tenant_id):
                snaps[snap["run_id"]] = snap
        if self.runtime is not None:
            for snap in self.runtime.live_snapshots():
                if tenant_id is None or snap["tenant_id"] == tenant_id:
                    snaps[snap["run_id"]] = snap  # fresher than the store's
        runs = [
            s
            for s in snaps.values()
            if (status is None or s["status"] == status)
            and (root_run_id is None or s["root_run_id"] == root_run_id)
        ]
        runs.sort(key=lambda s: (s.get("created_at") or "", s["run_id"]))
        return runs

    async def get_run(self, run_id: str, *, tenant_id: str | None) -> dict[str, Any] | None:
        """The run's snapshot; None for an unknown run and for another tenant's."""
        snap: dict[str, Any] | None = None
        if self.runtime is not None and run_id in self.runtime.runs:
            snap = self.runtime.live_snapshots([run_id])[0]
        if snap is None and self.redis is not None:
            try:
                snap = await self.redis.get_run(run_id)
            except ControlPlaneUnavailable:
                snap = None
        if snap is None and self.store is not None:
            snap = await self.store.load_run(run_id)
        if snap is None or (tenant_id is not None and snap["tenant_id"] != tenant_id):
            return None
        return snap

    async def tree(self, run_id: str, *, tenant_id: str | None) -> dict[str, Any] | None:
        """The run with its descendants: its snapshot plus ``children``, nested."""
        snap = await self.get_run(run_id, tenant_id=tenant_id)
        if snap is None:
            return None
        family = await self.list_runs(tenant_id=tenant_id, root_run_id=snap["root_run_id"])
        children: dict[str | None, list[dict[str, Any]]] = {}
        for s in family:
            children.setdefault(s.get("parent_run_id"), []).append(s)

        def nest(node: dict[str, Any], depth: int) -> dict[str, Any]:
            below = children.get(node["run_id"], []) if depth < 64 else []
            return {**node, "children": [nest(c, depth + 1) for c in below]}

        return nest(snap, 0)

    async def trace(
        self, run_id: str, *, tenant_id: str | None, limit: int = 500
    ) -> list[dict[str, Any]] | None:
        """The run's last ``limit`` events (steering and supervisor ones included), oldest
        first, each with its event-log ``id``; None for an unknown or foreign run."""
        if await self.get_run(run_id, tenant_id=tenant_id) is None:
            return None
        last: deque[tuple[int, Event]] = deque(maxlen=max(limit, 0))
        after = 0
        while True:
            page = await self._events(after_id=after, run_id=run_id, limit=1000)
            last.extend(page)
            if len(page) < 1000:
                break
            after = page[-1][0]
        return [_frame(i, e) for i, e in last]

    async def steering(self, run_id: str, *, tenant_id: str | None) -> list[dict[str, Any]] | None:
        """The commands sent to the run, oldest first, each with its current state (terminal
        or not) and the steps it went through; None for an unknown or foreign run."""
        if await self.get_run(run_id, tenant_id=tenant_id) is None:
            return None
        events: list[SteeringEvent]
        if self.runtime is not None and (run_id in self.runtime.runs or self.store is None):
            events = await self.runtime.load_steering_history(run_id)
        else:
            assert self.store is not None
            logged = await self.store.load_events(run_id=run_id, type_prefix="steering.")
            events = [e for e in logged if isinstance(e, SteeringEvent)]
        return command_history(events)

    async def read_events(
        self,
        *,
        tenant_id: str | None,
        after_id: int = 0,
        run_id: str | None = None,
        root_run_id: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[int, dict[str, Any]]]:
        """Events with id > ``after_id``, in id order, as (id, event as JSON-safe dict)."""
        rows = await self._events(
            after_id=after_id,
            tenant_id=tenant_id,
            run_id=run_id,
            root_run_id=root_run_id,
            limit=limit,
        )
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

    # ------------------------------------------------------------------ acting

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt:
        """The command's receipt: from the runtime here when it holds the target, else from
        the owning runtime through the store's inbox (``ReceiptTimeout`` if it does not
        answer within ``receipt_timeout_s``), or from another worker through Redis when one
        holds it (through the store while Redis is unreachable, if there is one)."""
        runtime = self.runtime
        if runtime is not None and _holds(runtime, cmd):
            return await runtime.submit(cmd)
        if self.redis is not None:
            try:
                if await self.redis.holds_elsewhere(cmd):
                    return await self.redis.submit(cmd)
            except ControlPlaneUnavailable:
                if self.store is None:
                    raise
        if runtime is not None and self.store is None:
            return await runtime.submit(cmd)
        assert self.store is not None
        return await submit_through_store(self.store, cmd, timeout_s=self.receipt_timeout_s)


def _holds(runtime: Runtime, cmd: SteeringCommand) -> bool:
    target = cmd.target
    if isinstance(target, ThreadTarget):
        return runtime.runs.for_thread(target.thread_id) is not None
    return target.run_id in runtime.runs


def _frame(event_id: int, event: Event) -> dict[str, Any]:
    return {"id": event_id, **event.to_dict(mode="json")}


def command_history(events: list[SteeringEvent]) -> list[dict[str, Any]]:
    """Steering events grouped by command, in the order the commands were first seen: each
    with ``correlation_id``, ``kind``, ``actor``, ``state``, ``terminal``, ``reason``,
    ``policy_id`` and its ``events`` (type, at, reason)."""
    commands: dict[str, dict[str, Any]] = {}
    for e in events:
        entry = commands.get(e.correlation_id)
        if entry is None:
            entry = commands[e.correlation_id] = {
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
        entry["events"].append({"type": e.type, "at": e.at.isoformat(), "reason": e.reason})
    for entry in commands.values():
        entry.setdefault("reason", None)
        entry.setdefault("policy_id", None)
    return list(commands.values())
