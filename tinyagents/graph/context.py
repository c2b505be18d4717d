"""``NodeContext``: the optional second argument of a node function.

Besides where the task runs, it gives a *supervisor* node (``add_node(...,
supervises=[...])``) its steering powers: commands from the ``graph_supervisor`` actor to the
tasks of the nodes it supervises, and sibling-steering grants between their agent runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import Future as ConcurrentFuture
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tinyagents._record import Record
from tinyagents.errors import GraphError
from tinyagents.graph._context import (
    ThreadAttempt,
    emit_unless_ended,
    progress_here,
    thread_attempt,
)
from tinyagents.protocol.commands import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    SteeringTarget,
)

if TYPE_CHECKING:
    from tinyagents.runs.host import RunHost

T = TypeVar("T")


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class NodeContext(Record):
    """Where and what a node is running as; ``run_id``/``runtime`` only in a runtime."""

    task_id: str
    node: str
    step: int
    thread_id: str
    ns: str
    attempt: int
    run_id: str | None = None
    runtime: RunHost | None = None
    _run: Any = field(default=None, repr=False)
    #: the event loop of the run, when the node runs in a worker thread (a sync node with a
    #: ``timeout``): what it emits is handed to the loop's thread
    _loop: Any = field(default=None, repr=False)
    #: that worker thread's attempt: once it ``ended`` (the timeout fired) the thread runs on,
    #: and what it asks of the runtime through this context (``steer``, ``grant``) is refused
    _attempt: ThreadAttempt | None = field(default=None, repr=False)

    # LangGraph's ``RunnableConfig``, read only: a node ported with ``config: RunnableConfig``
    # as its second parameter gets this context there, and reads its thread, node and step
    # as it did (``config["configurable"]["thread_id"]``, ``config["metadata"]
    # ["langgraph_node"]``); built when read, so a node that does not pays nothing

    def __getitem__(self, key: str) -> dict[str, Any]:
        ns = f"{self.node}:{self.task_id}"
        ns = f"{self.ns}|{ns}" if self.ns else ns
        if key == "configurable":
            return {"thread_id": self.thread_id, "checkpoint_ns": ns}
        if key == "metadata":
            return {
                "thread_id": self.thread_id,
                "langgraph_step": self.step,
                "langgraph_node": self.node,
                "langgraph_checkpoint_ns": ns,
            }
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        """``config.get(key)`` of LangGraph's ``RunnableConfig`` (``configurable``,
        ``metadata``), ``default`` for any other key."""
        try:
            return self[key]
        except KeyError:
            return default

    def tasks_of(self, node: str) -> list[str]:
        """Task ids of ``node`` in the current superstep."""
        return [t.id for t in self._run.plan() if t.node == node] if self._run else []

    def emit(self, value: Any) -> None:
        """Send ``value`` to the run's stream (``graph.stream(..., mode="custom")``): progress,
        partial results. Nothing happens when the run is not streamed."""
        if self._run is None:
            return
        clock = progress_here()
        if clock is not None:  # a node attempt with an idle timeout: this is progress
            clock.moved()
        if self._loop is not None:  # from a worker thread: the stream is the loop's
            # (dropped there if the node's attempt timed out meanwhile)
            attempt = thread_attempt.get()
            self._loop.call_soon_threadsafe(
                emit_unless_ended, self._run.emit, attempt, self.task_id, value
            )
        else:
            self._run.emit(self.task_id, value)

    def __call__(self, value: Any) -> None:
        """``emit(value)``: a node ported with LangGraph's ``writer: StreamWriter`` as its
        second parameter gets this context there, and its ``writer(value)`` streams as it
        did."""
        self.emit(value)

    def agent_run_id(self, node: str) -> str | None:
        """The running child agent run of agent node ``node`` in this superstep, if any."""
        entries = self._run.task_hooks if self._run else None  # graph/task_entries.py
        for handle in getattr(entries, "agent_runs", {}).values():
            if handle.info.node_id == node and not handle.done:
                return str(handle.run_id)
        return None

    def _supervisor(self) -> tuple[RunHost, str]:
        attempt = self._attempt if self._attempt is not None else thread_attempt.get()
        if attempt is not None and attempt.ended:
            raise GraphError(
                f"node {self.node!r} cannot steer: its attempt {self.attempt} timed out (a sync "
                "node's thread goes on after its timeout=), so it no longer acts on the run"
            )
        if self.runtime is None or self.run_id is None or self._run is None or self.ns:
            raise GraphError(
                f"node {self.node!r} can steer only in a top-level graph run started with a "
                "runtime (rt.start_graph or graph.run(..., runtime=rt))"
            )
        return self.runtime, self.run_id

    async def steer(
        self,
        kind: SteeringKind | str,
        payload: dict[str, Any] | None = None,
        *,
        node: str | None = None,
        task_id: str | None = None,
        **fields: Any,
    ) -> SteeringReceipt:
        """Send a command, as this node's ``graph_supervisor`` actor, to one task or node of
        this graph run (which must be among the nodes this node supervises)."""
        runtime, run_id = self._supervisor()
        if (node is None) == (task_id is None):
            raise GraphError("steer() needs exactly one of node= or task_id=")
        target = (
            SteeringTarget.graph_task(run_id, task_id)
            if task_id is not None
            else SteeringTarget.graph_node(run_id, node or "")
        )
        cmd = SteeringCommand(
            target=target,
            actor=SteeringActor.graph_supervisor(run_id, self.node),
            kind=kind,
            payload=payload or {},
            **fields,
        )
        if self._off_loop():
            return await asyncio.wrap_future(self._on_loop(self._submit_on_loop(cmd)))
        return await runtime.submit(cmd)

    async def _submit_on_loop(self, cmd: SteeringCommand) -> SteeringReceipt:
        runtime, _ = self._supervisor()  # again: the attempt may have ended meanwhile
        return await runtime.submit(cmd)

    def grant(self, from_run_id: str, to_run_id: str) -> None:
        """Let one supervised agent run steer a sibling (both children of this graph run).

        From a sync node's worker thread (``timeout=``) the grant is done on the run's loop,
        which owns the run tree and the router: the thread waits for it, and gets its error."""
        self._supervisor()  # a timed-out attempt's thread is refused here, in the thread
        if self._off_loop():
            self._on_loop(self._grant_on_loop(from_run_id, to_run_id)).result()
            return
        self._grant(from_run_id, to_run_id)

    async def _grant_on_loop(self, from_run_id: str, to_run_id: str) -> None:
        self._grant(from_run_id, to_run_id)

    def _off_loop(self) -> bool:
        """Whether this is a sync node's worker thread (or a loop of its own there), whose
        ``steer`` and ``grant`` are handed to the run's loop: the run tree, the router and
        the bus are that loop's, and not thread-safe."""
        return self._loop is not None and not _running(self._loop)

    def _on_loop(self, call: Coroutine[Any, Any, T]) -> ConcurrentFuture[T]:
        """Schedule ``call`` on the run's loop; a ``GraphError`` if that loop no longer runs
        (the run is over, and this thread ran on past it): the call would wait for ever."""
        loop = self._loop
        try:
            if loop.is_running():
                return asyncio.run_coroutine_threadsafe(call, loop)
        except RuntimeError:  # closed between the check and the call
            pass
        call.close()
        raise GraphError(
            f"node {self.node!r} cannot steer: the event loop of its run no longer runs (the "
            "run ended while the node's thread ran on)"
        )

    def _grant(self, from_run_id: str, to_run_id: str) -> None:
        runtime, run_id = self._supervisor()  # again: the attempt may have ended meanwhile
        supervised = self._run.graph.nodes[self.node].supervises
        tree = runtime.runs.tree
        for rid in (from_run_id, to_run_id):
            info = tree.get(rid)
            if info is None or not tree.is_descendant(rid, of=run_id):
                raise GraphError(f"run {rid} is not part of graph run {run_id}")
            if info.node_id not in supervised:
                raise GraphError(
                    f"node {self.node!r} does not supervise {info.node_id!r} (run {rid})"
                )
        runtime.grant_sibling_steering(from_run_id, to_run_id)


def _running(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is the event loop running in this thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
