"""The persistence contract for steering logs, events and run snapshots.

``Store`` is the extension point (an ABC): ``MemoryStore`` and ``SqliteStore`` implement it
here, and every backend must pass ``tests/store/test_store_conformance.py``. Checkpoints of
graph threads have their own contract in ``tinyagents.store.checkpoint``.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from tinyagents.errors import ConfigurationError
from tinyagents.events.models import TERMINAL_STEERING_EVENTS, Event, SteeringEvent
from tinyagents.steering.commands import SteeringCommand

#: Command states in the steering log. ``accepted`` and ``deferred`` are open; the rest terminal.
OPEN_STATES = ("accepted", "deferred")


@dataclass(slots=True, kw_only=True)
class StoredCommand:
    command: SteeringCommand
    state: str
    run_id: str | None
    reason: str | None = None


class Store(ABC):
    """Durable steering log, event log and run snapshots."""

    url: str = ""

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and create the schema (idempotent)."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Flush and disconnect."""

    @abstractmethod
    async def append_command(self, cmd: SteeringCommand, *, state: str, run_id: str | None) -> None:
        """Write (or overwrite) one command; durable when this returns."""

    @abstractmethod
    async def set_command_states(self, updates: list[tuple[str, str, str | None]]) -> None:
        """Set (correlation_id, state, reason) for commands already in the log."""

    @abstractmethod
    async def get_command(self, correlation_id: str) -> StoredCommand | None: ...

    @abstractmethod
    async def open_commands(self) -> list[StoredCommand]:
        """Commands that never reached a terminal state (accepted or deferred), oldest first."""

    @abstractmethod
    async def command_ids(self) -> set[str]: ...

    @abstractmethod
    async def append_events(self, events: list[Event]) -> None: ...

    @abstractmethod
    async def load_events(
        self,
        *,
        run_id: str | None = None,
        root_run_id: str | None = None,
        type_prefix: str | None = None,
    ) -> list[Event]:
        """Events in the order they were written, filtered by run, tree or type prefix."""

    @abstractmethod
    async def save_runs(self, snapshots: list[dict[str, Any]]) -> None:
        """Upsert run snapshots (``RunInfo.snapshot()``)."""

    @abstractmethod
    async def load_runs(self, *, tenant_id: str | None = None) -> list[dict[str, Any]]: ...


def terminal_updates(events: list[Event]) -> list[tuple[str, str, str | None]]:
    """The steering-log state changes a batch of events implies."""
    return [
        (e.correlation_id, e.type.removeprefix("steering."), e.reason)
        for e in events
        if isinstance(e, SteeringEvent) and e.type in TERMINAL_STEERING_EVENTS
    ]


class StoreWriter:
    """A bus sink that batches events into the store (events may be batched; accepted commands
    are written by the router before their receipt, not here)."""

    def __init__(self, store: Store, *, flush_every_s: float = 0.05, max_batch: int = 1000) -> None:
        self.store = store
        self.flush_every_s = flush_every_s
        self.max_batch = max_batch
        self._buffer: list[Event] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def __call__(self, event: Event) -> None:
        self._buffer.append(event)
        if len(self._buffer) >= self.max_batch:
            self._wakeup.set()

    def start(self) -> None:
        self._closing = False
        self._task = asyncio.create_task(self._run(), name="tinyagents-store-writer")

    async def _run(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.flush_every_s):
                    await self._wakeup.wait()
            self._wakeup.clear()
            await self.flush()

    async def flush(self) -> None:
        if not self._buffer:
            return
        batch, self._buffer = self._buffer, []
        await self.store.append_events(batch)
        updates = terminal_updates(batch)
        if updates:
            await self.store.set_command_states(updates)

    async def aclose(self) -> None:
        """Write what is buffered, then stop. The loop is asked to stop, never cancelled: a
        flush cancelled between the event log and the state update would lose the batch it
        took from the buffer (its commands would stay open in the store for good)."""
        if self._task is not None:
            self._closing = True
            self._wakeup.set()
            await self._task
            self._task = None
        await self.flush()


def open_store(spec: str | Store | None) -> Store:
    """``None``/``"memory://"`` → MemoryStore; ``"sqlite:///path.db"`` → SqliteStore."""
    if isinstance(spec, Store):
        return spec
    if spec is None or spec in ("memory", "memory://"):
        from tinyagents.store.memory import MemoryStore

        return MemoryStore()
    if spec.startswith("sqlite://"):
        from tinyagents.store.sqlite import SqliteStore

        path = spec.removeprefix("sqlite://")
        path = (
            path[1:] if path.startswith("/") else path
        )  # sqlite:///rel.db → rel.db; sqlite:////abs
        return SqliteStore(path)
    raise ConfigurationError(
        f"unknown store {spec!r}: use None (in memory), 'sqlite:///path.db' or a Store instance"
    )
