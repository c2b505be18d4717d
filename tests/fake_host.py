"""``FakeHost``: a ``RunHost`` made of the control layer's parts only (a registry, a bus and a
router), no ``Runtime``: for tests of what the execution layer and the supervisor need of a
host (a ``Runtime`` refuses use from a second event loop; a host like this does not)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from tinyagents.events import EventBus
from tinyagents.protocol import SteeringCommand, SteeringReceipt
from tinyagents.runs import RunHandle, RunInfo, RunRegistry, RunResult
from tinyagents.steering import RedirectConflict
from tinyagents.steering.router import SteeringRouter


class FakeHost:
    """Only the ``RunHost`` members: a registry, a bus and a router, no ``Runtime``."""

    def __init__(self) -> None:
        self.runs = RunRegistry()
        self.bus = EventBus()
        self.router = SteeringRouter(registry=self.runs, bus=self.bus)
        self.tasks: list[asyncio.Task[Any]] = []

    durable = False

    def require_open(self) -> None:
        pass

    async def register(
        self,
        handle: RunHandle,
        *,
        redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED,
        continued: bool = False,
    ) -> RunHandle:
        self.runs.register(handle)
        await self.router.attach(handle, redirect_conflict=redirect_conflict)
        return handle

    async def finish(self, handle: RunHandle, result: RunResult) -> None:
        handle.finish(result)
        await self.router.target_finished(handle)

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt:
        return await self.router.submit(cmd)

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self.tasks.append(task)
        return task

    async def target_changed(self, handle: RunHandle) -> None:
        await self.router.target_changed(handle)

    def open_commands(self) -> list[SteeringCommand]:
        return self.router.open_commands()

    async def applied_commands(self, info: RunInfo) -> list[SteeringCommand]:
        return []

    async def unclaim(self, run_id: str) -> None:
        pass

    async def take_thread(self, info: RunInfo, *, hold: bool, started: bool = False) -> None:
        self.runs.take_thread(info, hold=hold, started=started)

    async def hold_thread(self, info: RunInfo, *, hold: bool) -> None:
        pass

    async def let_go_of_thread(self, info: RunInfo) -> None:
        self.runs.let_go_of_thread(info)

    async def resting_tasks(self, run_id: str, tenant_id: str) -> dict[str, tuple[str, str | None]]:
        return {}

    def grant_sibling_steering(self, from_run_id: str, to_run_id: str) -> None:
        self.router.grant(from_run_id, to_run_id)
