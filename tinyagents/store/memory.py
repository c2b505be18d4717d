"""``MemoryStore``: the in-process default (nothing survives the process)."""

from __future__ import annotations

from typing import Any

from tinyagents.events.models import Event
from tinyagents.protocol.commands import SteeringCommand, dedupe_scope
from tinyagents.protocol.state import CommandState
from tinyagents.store.base import Store, StoredCommand, terminal_updates


class MemoryStore(Store):
    url = "memory://"

    def __init__(self) -> None:
        self._commands: dict[tuple[str, str], StoredCommand] = {}  # by (scope, correlation id)
        self._events: list[Event] = []
        self._runs: dict[str, dict[str, Any]] = {}

    async def append_command(self, cmd: SteeringCommand, *, state: str, run_id: str | None) -> bool:
        key = (dedupe_scope(cmd.actor), cmd.correlation_id)
        if key in self._commands:
            return False
        self._commands[key] = StoredCommand(command=cmd, state=state, run_id=run_id)
        return True

    async def update_command(self, cmd: SteeringCommand, *, state: str, run_id: str | None) -> None:
        stored = self._commands.get((dedupe_scope(cmd.actor), cmd.correlation_id))
        if stored is not None:
            stored.command, stored.state, stored.run_id = cmd, state, run_id

    async def set_command_states(self, updates: list[tuple[str, str, str, str | None]]) -> None:
        for scope, cid, state, reason in updates:
            stored = self._commands.get((scope, cid))
            if stored is not None:
                stored.state = state
                stored.reason = reason

    async def get_command(self, correlation_id: str, *, scope: str = "") -> StoredCommand | None:
        return self._commands.get((scope, correlation_id))

    async def open_commands(self) -> list[StoredCommand]:
        return [c for c in self._commands.values() if not CommandState(c.state).terminal]

    async def command_ids(self) -> set[str]:
        return {cid for _, cid in self._commands}

    async def append_events(self, events: list[Event]) -> None:
        self._events.extend(events)
        await self.set_command_states(terminal_updates(events))

    async def load_events(
        self,
        *,
        run_id: str | None = None,
        root_run_id: str | None = None,
        type_prefix: str | None = None,
    ) -> list[Event]:
        return [
            e
            for e in self._events
            if (run_id is None or e.run_id == run_id)
            and (root_run_id is None or e.root_run_id == root_run_id)
            and (type_prefix is None or e.type.startswith(type_prefix))
        ]

    async def save_runs(self, snapshots: list[dict[str, Any]]) -> None:
        for snap in snapshots:
            self._runs[snap["run_id"]] = dict(snap)

    async def load_runs(self, *, tenant_id: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self._runs.values() if tenant_id is None or r["tenant_id"] == tenant_id]

    async def run_commands(
        self, run_id: str, *, states: tuple[str, ...] = ("applied",)
    ) -> list[StoredCommand]:
        return [c for c in self._commands.values() if c.run_id == run_id and c.state in states]
