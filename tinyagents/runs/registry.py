"""``RunRegistry``: every run of one runtime, by id, by thread and by tenant."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from tinyagents.errors import ConfigurationError
from tinyagents.runs.handle import RunHandle
from tinyagents.runs.info import RunInfo
from tinyagents.runs.tree import RunTree


class RunRegistry:
    def __init__(self) -> None:
        self.tree = RunTree()
        self._handles: dict[str, RunHandle] = {}
        self._threads: dict[str, list[str]] = {}
        self._listeners: list[Callable[[RunHandle], None]] = []

    def register(self, handle: RunHandle) -> None:
        info = handle.info
        if info.run_id in self._handles:
            raise ConfigurationError(
                f"run {info.run_id!r} is already registered in this runtime; "
                "give each run its own run_id (or leave it unset for a fresh one)"
            )
        if info.parent_run_id is not None:
            parent = self.tree.get(info.parent_run_id)
            if parent is not None:
                info.root_run_id = parent.root_run_id
                info.depth = parent.depth + 1
        self.tree.add(info)
        self._handles[info.run_id] = handle
        if info.thread_id is not None:
            self._threads.setdefault(info.thread_id, []).append(info.run_id)
        for listener in self._listeners:
            listener(handle)

    def on_register(self, listener: Callable[[RunHandle], None]) -> None:
        self._listeners.append(listener)

    def handles(self) -> builtins.list[RunHandle]:
        return builtins.list(self._handles.values())

    def get(self, run_id: str) -> RunHandle | None:
        return self._handles.get(run_id)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._handles

    def __len__(self) -> int:
        return len(self._handles)

    def for_thread(self, thread_id: str) -> RunHandle | None:
        """The newest run on the thread that has not finished, if any."""
        for run_id in reversed(self._threads.get(thread_id, ())):
            handle = self._handles[run_id]
            if not handle.status.finished:
                return handle
        return None

    def list(self, tenant_id: str | None = None) -> list[RunInfo]:
        infos = [h.info for h in self._handles.values()]
        return infos if tenant_id is None else [i for i in infos if i.tenant_id == tenant_id]

    def snapshot(self, tenant_id: str | None = None) -> builtins.list[dict[str, Any]]:
        return [info.snapshot() for info in self.list(tenant_id)]
