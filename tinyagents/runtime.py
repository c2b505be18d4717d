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

from tinyagents.errors import ConfigurationError, RuntimeClosed
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
        #: Set by ``close()``: from then on nothing new is taken (``RuntimeClosed``).
        self._closing = False
        self._closed: asyncio.Future[None] | None = None
        #: ``submit`` calls under way; close waits for them before closing the store.
        self._submitting = 0
        self._submits_done: asyncio.Event | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Runtime:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self._open:
            return
        if self._closing:
            raise RuntimeClosed("this runtime was closed; make a new Runtime to start again")
        await self.store.open()
        if self._durable:
            try:
                pending = await self.store.open_commands()
            except BaseException:
                await self.store.close()
                raise
            self._writer = StoreWriter(self.store)
            self.bus.add_sink(self._writer)
            self._writer.start()
            self.router.restore([(p.command, p.state, p.run_id) for p in pending])
        self._open = True

    async def close(self) -> None:
        """Stop taking work, settle every run and command, then flush and close the store.

        In this order: ``submit``/``start``/``register`` raise ``RuntimeClosed`` from the first
        line on; the submits under way finish; runs still going are cancelled (their children
        too) and awaited, each with its terminal event; the runtime's own tasks are awaited;
        then every command still open fails with ``runtime closed before delivery`` — unless
        the store is durable, where accepted and deferred commands stay open in the steering
        log for the next runtime on that store to hand over. Closing twice (or concurrently)
        waits for the first close.
        """
        if self._closed is not None:
            await asyncio.shield(self._closed)
            return
        if not self._open:
            return
        self._closing = True
        self._closed = asyncio.get_running_loop().create_future()
        try:
            await self._settle()
        finally:
            self._closed.set_result(None)

    async def _settle(self) -> None:
        if self._submitting:
            self._submits_done = asyncio.Event()
            await self._submits_done.wait()
        while True:  # a run may spawn a task while it is being cancelled: go until none is left
            tasks = [
                h.task for h in self.runs.handles() if h.task is not None and not h.task.done()
            ]
            pending: list[asyncio.Task[Any]] = [*tasks, *(t for t in self._tasks if not t.done())]
            if not pending:
                break
            for task in tasks:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if not self._durable:
            self.router.settle_all()
        # Every step is taken even when one fails (a dead store must not leave the bus or the
        # connection open); the first failure is raised once all of them have run.
        failures: list[BaseException] = []
        if self._writer is not None:
            for step in (self.save_runs, self._writer.aclose):
                try:
                    await step()
                except Exception as exc:
                    failures.append(exc)
            self.bus.remove_sink(self._writer)
            self._writer = None
        try:
            await self.store.close()
        except Exception as exc:
            failures.append(exc)
        self.bus.close()
        self._open = False
        if failures:
            raise failures[0]

    # ------------------------------------------------------------------ steering

    async def submit(self, cmd: SteeringCommand) -> SteeringReceipt:
        """Send a command through the policy pipeline to its target's queue.

        Raises ``StoreError`` when a durable store cannot log the command (then nothing was
        emitted or kept, and the same correlation id can be submitted again), and
        ``RuntimeClosed`` once ``close()`` has begun.
        """
        self._require_open()
        self._submitting += 1
        try:
            return await self.router.submit(cmd)
        finally:
            self._submitting -= 1
            if not self._submitting and self._submits_done is not None:
                self._submits_done.set()

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
        if self._closing:
            raise RuntimeClosed("the runtime is closing or closed: it takes no new work")
        if not self._open:
            raise ConfigurationError("the runtime is not open: use 'async with Runtime(...) as rt'")
