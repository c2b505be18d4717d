"""A thread between runs: read its state and history, update it, fork it.

The ``CompiledGraph`` methods of the same names call these; graph steering uses them too,
to apply a command made against an older checkpoint on a fork of the thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents.errors import GraphError, UnknownTargetError
from tinyagents.graph.checkpointing import load_head, new_frontier_id, save
from tinyagents.graph.executor import GraphRun
from tinyagents.graph.session import GraphSession, carry_interrupts
from tinyagents.graph.types import CheckpointInfo, StateSnapshot

if TYPE_CHECKING:
    from tinyagents.graph.core import GraphCore
    from tinyagents.store.checkpoint.base import Checkpointer


def require_checkpointer(graph: GraphCore, what: str) -> Checkpointer:
    if graph.checkpointer is None:
        raise GraphError(f"{what} needs a checkpointer: compile(checkpointer=...)")
    return graph.checkpointer


async def get_state(
    graph: GraphCore, thread_id: str, checkpoint_id: str | None = None
) -> StateSnapshot:
    """The thread's values, next nodes and pending interrupts (at the head by default)."""
    cp = require_checkpointer(graph, "get_state")
    head = await load_head(graph, cp, thread_id, "", checkpoint_id)
    if head is None:
        if checkpoint_id is not None:
            raise UnknownTargetError(f"thread {thread_id!r} has no checkpoint {checkpoint_id}")
        return StateSnapshot(
            values={}, next=(), checkpoint_id=None, parent_id=None, step=-1, source="none"
        )
    run = GraphRun(graph, head, checkpointer=cp, recursion_limit=0)
    tasks = run.plan()
    if checkpoint_id is None:
        # as LangGraph shows a thread's head: a paused or failed step's finished tasks have
        # written, and only the unfinished ones are next
        values = run.result("interrupted", tasks).state
        next_nodes = tuple(t.node for t in tasks if t.writes is None)
    else:
        values, next_nodes = head.values, tuple(p.node for p in head.frontier)
    return StateSnapshot(
        values=values,
        next=next_nodes,
        checkpoint_id=head.checkpoint_id,
        parent_id=head.parent_id,
        step=head.step,
        source=head.source,
        interrupts=run.result("interrupted", tasks).interrupts,
        completed_tasks=tuple(t.id for t in tasks if t.writes is not None),
        created_at=head.created_at,
        metadata=head.metadata,
    )


async def history(
    graph: GraphCore, thread_id: str, *, limit: int | None = None
) -> list[CheckpointInfo]:
    """The thread's checkpoints, newest first."""
    cp = require_checkpointer(graph, "history")
    return [
        CheckpointInfo(
            checkpoint_id=r.checkpoint_id,
            parent_id=r.parent_id,
            step=r.step,
            source=r.source,
            snapshot=r.snapshot,
            next=tuple(p["node"] for p in r.frontier),
            written=tuple(r.written),
            tasks=tuple(r.tasks),
            created_at=r.created_at,
            metadata=r.metadata,
        )
        for r in await cp.list(thread_id, limit=limit)
    ]


async def update_state(
    graph: GraphCore, thread_id: str, update: dict[str, Any], *, as_node: str | None = None
) -> str:
    """Apply ``update`` through the reducers as its own checkpoint (holding the thread's
    lease); return its id."""
    async with GraphSession(graph, thread_id) as session:
        return await session.update_state(update, as_node)


async def fork(
    graph: GraphCore, thread_id: str, checkpoint_id: str, *, new_thread_id: str | None = None
) -> str:
    """Copy the thread as it was at ``checkpoint_id`` into a new thread; return its id."""
    cp = require_checkpointer(graph, "fork")
    head = await load_head(graph, cp, thread_id, "", checkpoint_id)
    if head is None:
        raise UnknownTargetError(f"thread {thread_id!r} has no checkpoint {checkpoint_id}")
    if new_thread_id is not None and await cp.latest(new_thread_id) is not None:
        raise GraphError(f"cannot fork into thread {new_thread_id!r}: it exists already")
    paused = carry_interrupts(head)
    new_thread = new_thread_id or f"{thread_id}~{_clock.new_id('fork')}"
    head.thread_id = new_thread
    head.run_id = None  # the fork is a new execution: its first run gets a new run id
    head.seq, head.checkpoint_id = -1, None
    head.frontier_id = new_frontier_id()
    meta = {"forked_from": {"thread_id": thread_id, "checkpoint_id": checkpoint_id}}
    # The interrupts first: the fork exists once its checkpoint does, and then with them
    # (a crash in between leaves writes no checkpoint refers to, which nothing reads).
    await cp.put_writes(new_thread, "", head.frontier_id, paused)
    await save(cp, head, delta=None, source="fork", metadata=meta)
    return new_thread
