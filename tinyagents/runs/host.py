"""``RunHost``: what the execution layer (agent loop, graph runtime) uses of the runtime.

The agent loop and the graph driver are typed against this protocol, never against
``Runtime``: they register their runs, report how they end, send commands, own background
tasks and publish events through it, and nothing else. ``Runtime`` implements it; a test can
host runs with anything that does.

A call made without a host (``Agent.run(...)``, ``SubAgent.invoke(...)``) runs in a private
one from ``private_host()``: the composition layer says how to make it
(``provide_private_host``), so the execution layer never imports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from tinyagents.errors import ConfigurationError
from tinyagents.events.bus import EventBus
from tinyagents.protocol.commands import SteeringCommand, SteeringReceipt
from tinyagents.runs.handle import RunHandle, RunResult
from tinyagents.runs.info import RunInfo
from tinyagents.runs.registry import RunRegistry
from tinyagents.steering.conflicts import RedirectConflict


@runtime_checkable
class RunHost(Protocol):
    """The runtime as the execution layer sees it."""

    @property
    def runs(self) -> RunRegistry:
        """The run tree and handles of every run hosted here."""

    @property
    def bus(self) -> EventBus:
        """Where runs publish their events."""

    @property
    def durable(self) -> bool:
        """Whether the host writes to a durable store: then every agent run it starts claims
        its row there first (``applied_commands``), with a fresh id too."""

    def require_open(self) -> None:
        """Raise (``RuntimeClosed``/``ConfigurationError``) unless the host takes new runs."""

    async def register(
        self,
        handle: RunHandle,
        *,
        redirect_conflict: RedirectConflict = ...,
        continued: bool = False,
    ) -> RunHandle:
        """Add a run to the tree and give it its steering inbox. ``continued``: the run goes
        on from an earlier process (a graph run whose id came from its thread's checkpoints):
        a host with a durable store gives it, too, the commands the store has open for it
        that it has not seen (accepted by another host on the store, that died), and its
        driver what the earlier process applied (``RunDriver.restore``)."""

    async def finish(self, handle: RunHandle, result: RunResult) -> None:
        """Record how a run ended and settle the commands still waiting for it."""

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt:
        """Send a command through the policy pipeline to its target's queue."""

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        """Run a coroutine owned by the host: awaited (or cancelled) when it closes."""

    async def target_changed(self, handle: RunHandle) -> None:
        """The run's state changed (paused, resumed): re-evaluate commands waiting for it."""

    def open_commands(self) -> list[SteeringCommand]:
        """Every command that has not reached a terminal state yet."""

    async def applied_commands(self, info: RunInfo) -> list[SteeringCommand]:
        """The commands run ``info`` applied, as logged (a run started again under its id
        after a crash gets them back); empty without a durable store, and when the id was
        another tenant's run. A host with a durable store claims the run there first, and
        refuses it (``ConfigurationError``) while it runs in another host on that store; the
        agent loop calls it for every run on such a host (a fresh id too), so a run killed
        before its first snapshot is in the store, and can be started again under its id."""

    async def unclaim(self, run_id: str) -> None:
        """Give back the claim ``applied_commands`` made of ``run_id`` for a start that then
        failed before its run was registered: other hosts on the store may start it at once.
        A no-op when the host holds no claim of it under way."""

    async def take_thread(self, info: RunInfo, *, hold: bool, started: bool = False) -> None:
        """Run ``info`` takes its thread: the registry's half (``RunRegistry.take_thread``,
        ``hold`` and ``started`` as there), then the store's (``hold_thread``), as one step: a
        second half that refuses (``ThreadBusy``) or fails lets go of the first."""

    async def hold_thread(self, info: RunInfo, *, hold: bool) -> None:
        """The durable half of ``take_thread`` alone, for a start that claims the run's id
        between the two (the agent start): with a durable store a thread's writer (a
        session's turn, ``hold``, or a graph run) holds the thread there too, and a run is
        ``ThreadBusy`` while a live run of another host on the store holds it. Nothing
        without one."""

    async def let_go_of_thread(self, info: RunInfo) -> None:
        """Let go of both halves of what ``take_thread`` took for ``info`` (a start that
        failed; the host lets go of the store's itself when the run finishes). A no-op for
        what it did not take."""

    async def resting_tasks(self, run_id: str, tenant_id: str) -> dict[str, tuple[str, str | None]]:
        """Task id -> (run id, node) of the task entries graph run ``run_id`` (of ``tenant_id``) had
        when an earlier runtime left it resting on interrupts, as the durable store holds
        them (a task resumed here takes its entry back); empty without a durable store."""

    def grant_sibling_steering(self, from_run_id: str, to_run_id: str) -> None:
        """Allow one run's agent to steer another it has no authority over (a sibling)."""


#: Makes the host of a call made without one: an async context manager, open inside it.
HostFactory = Callable[[], AbstractAsyncContextManager[RunHost]]
_host_factory: HostFactory | None = None


def check_runtime(runtime: object) -> None:
    """Refuse a ``runtime=`` that is no ``RunHost``: an AttributeError from deep inside."""
    if not isinstance(runtime, RunHost):
        raise ConfigurationError(
            f"runtime= takes a Runtime (or None for a private in-memory one), got "
            f"{type(runtime).__name__}; a store URL goes to Runtime(store=...)"
        )


def require_open(runtime: RunHost) -> None:
    """``runtime.require_open()``, and ``check_runtime``'s error for a ``runtime=`` that is no
    runtime (checked only then: an isinstance of the protocol costs ~15 us a run start)."""
    try:
        check = runtime.require_open
    except AttributeError:
        check_runtime(runtime)
        raise
    check()


def provide_private_host(factory: HostFactory) -> None:
    """Say how ``private_host()`` makes a host (``tinyagents.runtime`` does, at import)."""
    global _host_factory
    _host_factory = factory


def private_host() -> AbstractAsyncContextManager[RunHost]:
    """A new private host for one call made without one (an in-memory ``Runtime``), closed
    when the ``async with`` block ends."""
    if _host_factory is None:
        raise ConfigurationError("no runtime to host the run: pass runtime=")
    return _host_factory()
