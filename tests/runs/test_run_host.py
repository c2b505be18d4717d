"""The execution layer needs of a runtime only what ``RunHost`` lists: a host made of the
control layer's parts and nothing else runs an agent and steers it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from tinyagents.events import EventBus
from tinyagents.harness import Agent, SubAgent
from tinyagents.protocol import SteeringCommand, SteeringReceipt
from tinyagents.runs import RunHandle, RunHost, RunInfo, RunRegistry, RunResult, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.steering import RedirectConflict
from tinyagents.steering.router import SteeringRouter
from tinyagents.testkit import ScriptedModel, reply, tool_call


class FakeHost:
    """Only the ``RunHost`` members: a registry, a bus and a router, no ``Runtime``."""

    def __init__(self) -> None:
        self.runs = RunRegistry()
        self.bus = EventBus()
        self.router = SteeringRouter(registry=self.runs, bus=self.bus)
        self.tasks: list[asyncio.Task[Any]] = []

    def require_open(self) -> None:
        pass

    async def register(
        self,
        handle: RunHandle,
        *,
        redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED,
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

    async def resting_tasks(self, run_id: str, tenant_id: str) -> dict[str, tuple[str, str | None]]:
        return {}

    def grant_sibling_steering(self, from_run_id: str, to_run_id: str) -> None:
        self.router.grant(from_run_id, to_run_id)


def test_runtime_and_a_fake_host_are_run_hosts() -> None:
    assert isinstance(Runtime(), RunHost)
    assert isinstance(FakeHost(), RunHost)
    assert not isinstance(object(), RunHost)


async def test_a_host_with_only_the_protocol_runs_and_steers_an_agent() -> None:
    host = FakeHost()
    model = ScriptedModel([tool_call("lookup", q="billing"), reply("done")])

    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    agent = Agent("worker", model=model, tools=[lookup])
    handle = await SubAgent(agent, description="works").start("task", runtime=host)
    receipt = await handle.steer("focus on billing")
    result = await handle.result()
    assert receipt.accepted and result.status is RunStatus.COMPLETED
    assert result.output == "done"
    assert "focus on billing" in str(model.requests[0].messages)
    assert [e.type for e in host.router.history(handle.run_id)][-1] == "steering.applied"
    # Agent.run takes the host too.
    again = Agent("again", model=ScriptedModel([reply("ok")]))
    assert (await again.run("task", runtime=host)).output == "ok"


SNIPPET = """
from tinyagents.runs.host import RunHost
from tinyagents.runtime import Runtime

host: RunHost = Runtime()
not_a_host: RunHost = object()
"""


def test_runtime_satisfies_run_host_for_the_type_checker(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "snippet.py"
    source.write_text(SNIPPET)
    out, err, status = api.run([str(source), "--no-error-summary", "--follow-imports=silent"])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out + err
    assert len(errors) == 1 and "snippet.py:6:" in errors[0], out
