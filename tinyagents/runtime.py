"""``Runtime``: wires the run registry, the steering router, the event bus and the store.

    async with Runtime(store="sqlite:///runs.db") as rt:
        handle = await rt.start(agent, "task", tenant_id="acme")
        await rt.submit(cmd)

``Runtime()`` keeps everything in memory. With a store, accepted commands are written before
their receipt returns, events are written in batches, and on start the commands that were
accepted but never reached a terminal state are handed to their run when it comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tinyagents.errors import ConfigurationError
from tinyagents.events.bus import EventBus, EventFilter, Sink, Subscription
from tinyagents.events.models import SteeringEvent
from tinyagents.runs.handle import RunHandle, RunResult
from tinyagents.runs.registry import RunRegistry
from tinyagents.runs.tree import RunTreeNode
from tinyagents.steering.commands import SteeringCommand, SteeringReceipt
from tinyagents.steering.conflicts import RedirectConflict
from tinyagents.steering.policy import PolicyPipeline
from tinyagents.steering.router import SteeringRouter
from tinyagents.store.base import Store, StoreWriter, open_store

if TYPE_CHECKING:
    from tinyagents.harness.agent import Agent


class Runtime:
    def __init__(
        self,
        store: str | Store | None = None,
        *,
        testing: bool = False,
        policies: PolicyPipeline | None = None,
        sinks: Iterable[Sink] = (),
        trusted_middleware: Iterable[str] = ("supervisor",),
    ) -> None:
        self.store: Store = open_store(store)
        self._durable = store is not None
        self.testing = testing
        self.bus = EventBus()
        self.runs = RunRegistry()
        self.router = SteeringRouter(
            registry=self.runs,
            bus=self.bus,
            pipeline=policies,
            store=self.store if self._durable else None,
            testing=testing,
            trusted_middleware=frozenset(trusted_middleware),
        )
        for sink in sinks:
            self.bus.add_sink(sink)
        self._writer: StoreWriter | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._open = False

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Runtime:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self._open:
            return
        await self.store.open()
        if self._durable:
            self._writer = StoreWriter(self.store)
            self.bus.add_sink(self._writer)
            self._writer.start()
            pending = await self.store.open_commands()
            self.router.restore(
                [(p.command, p.state, p.run_id) for p in pending],
                known_ids=await self.store.command_ids(),
            )
        self._open = True

    async def close(self) -> None:
        """Cancel runs still going (their children too), then flush and close the store."""
        if not self._open:
            return
        tasks = [h.task for h in self.runs.handles() if h.task is not None]
        for task in tasks:
            task.cancel()  # a no-op for runs that already ended
        pending: list[asyncio.Task[Any] | asyncio.Future[Any]] = list(tasks)
        pending += list(self._tasks)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        if self._writer is not None:
            await self.save_runs()
            await self._writer.aclose()
            self.bus.remove_sink(self._writer)
            self._writer = None
        await self.store.close()
        self.bus.close()
        self._open = False

    # ------------------------------------------------------------------ steering

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt:
        """Send a command through the policy pipeline to its target's queue."""
        self._require_open()
        return await self.router.submit(cmd)

    def steering_history(self, run_id: str) -> list[SteeringEvent]:
        """That run's ``steering.*`` events, in order."""
        return self.router.history(run_id)

    def grant_sibling_steering(self, from_run_id: str, to_run_id: str) -> None:
        self.router.grant(from_run_id, to_run_id)

    # ------------------------------------------------------------------ runs

    def tree(self, root_run_id: str) -> RunTreeNode | None:
        return self.runs.tree.subtree(root_run_id)

    def subscribe(self, *, maxsize: int = 10_000, where: EventFilter | None = None) -> Subscription:
        return self.bus.subscribe(maxsize=maxsize, where=where)

    async def register(
        self,
        handle: RunHandle,
        *,
        redirect_conflict: RedirectConflict = RedirectConflict.FIRST_ACCEPTED,
    ) -> RunHandle:
        """Add a run to the tree and give it its steering inbox (execution layer)."""
        self._require_open()
        self.runs.register(handle)
        await self.router.attach(handle, redirect_conflict=redirect_conflict)
        return handle

    async def finish(self, handle: RunHandle, result: RunResult) -> None:
        """Record how a run ended and settle the commands still waiting for it (execution layer)."""
        handle.finish(result)
        await self.router.target_finished(handle)

    async def save_runs(self) -> None:
        if self._durable:
            await self.store.save_runs(self.runs.snapshot())

    async def start(self, agent: Agent, input: Any, **kwargs: Any) -> RunHandle:
        """Start ``agent`` on ``input`` in the background; returns its handle at once."""
        self._require_open()
        from tinyagents.harness.loop import start_agent_run

        return await start_agent_run(self, agent, input, **kwargs)

    async def start_graph(self, graph: Any, input: Any, **kwargs: Any) -> RunHandle:
        """Start a compiled graph on ``input`` in the background; returns its handle at once.

        The run pauses on interrupts and continues when steering answers them.
        """
        self._require_open()
        from tinyagents.graph.driver import start_graph_run

        return await start_graph_run(self, graph, input, **kwargs)

    def spawn(self, coro: Any, *, name: str | None = None) -> asyncio.Task[Any]:
        """Run a coroutine owned by the runtime: awaited (or cancelled) on close."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _require_open(self) -> None:
        if not self._open:
            raise ConfigurationError("the runtime is not open: use 'async with Runtime(...) as rt'")
