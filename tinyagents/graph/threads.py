"""A thread between runs: read its state and history, update it, fork it.

The ``CompiledGraph`` methods of the same names call these; graph steering uses them too,
to apply a command made against an older checkpoint on a fork of the thread.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents.errors import (
    ArgumentError,
    GraphError,
    GraphValidationError,
    InvalidIdError,
    UnknownTargetError,
)
from tinyagents.graph.checkpointing import (
    Head,
    interrupt_write,
    load_head,
    new_frontier_id,
    pending_input,
    save,
    with_parents,
)
from tinyagents.graph.core import GraphCore
from tinyagents.graph.executor import GraphRun, persistent_ns, unanswered
from tinyagents.graph.reducers import MISSING
from tinyagents.graph.session import (
    GraphSession,
    carry_records,
    check_as_node,
    check_root,
    inferred_as_node,
)
from tinyagents.graph.session import update_state as save_update
from tinyagents.graph.tasks import Task, collected, shown, task_id
from tinyagents.graph.types import (
    START,
    CheckpointInfo,
    StateSnapshot,
    StateUpdate,
    TaskState,
    check_subgraphs,
)
from tinyagents.protocol.ids import MAX_ID_LENGTH, shown_repr
from tinyagents.runs.info import check_id
from tinyagents.store.checkpoint.base import check_limit

if TYPE_CHECKING:
    from tinyagents.store.checkpoint.base import Checkpointer, CheckpointRecord


def require_checkpointer(graph: GraphCore, what: str) -> Checkpointer:
    check_root(graph)
    if graph.checkpointer is None:  # a ValueError, as LangGraph's "No checkpointer set"
        raise GraphValidationError(f"{what} needs a checkpointer: compile(checkpointer=...)")
    return graph.checkpointer


async def get_state(
    graph: GraphCore,
    thread_id: str,
    checkpoint_id: str | None = None,
    *,
    subgraphs: bool = False,
) -> StateSnapshot:
    """The thread's values, next nodes, tasks and pending interrupts (at the head by
    default); with ``subgraphs`` each task carries the states of the sub-graphs it ran."""
    cp = require_checkpointer(graph, "get_state")
    check_id(thread_id, "thread_id")
    snap = await _snapshot(graph, cp, thread_id, "", checkpoint_id, check_subgraphs(subgraphs))
    if snap is None:
        if checkpoint_id is not None:
            raise UnknownTargetError(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}")
        return StateSnapshot(
            values={}, next=(), checkpoint_id=None, parent_id=None, step=-1, source="none"
        )
    return snap


async def _step_after(graph: GraphCore, cp: Checkpointer, head: Head) -> dict[str, Any] | None:
    """The writes of the step that followed ``head`` (a past checkpoint), read off the
    checkpoint that step saved: each written channel's change (its reducer's ``diff``); None
    when no step followed (a head, or a checkpoint an update or a fork followed)."""
    records = await cp.list(head.thread_id, head.ns)
    child = next(
        (r for r in records if r.parent_id == head.checkpoint_id and r.source == "loop"), None
    )
    if child is None:
        return None
    later = await load_head(graph, cp, head.thread_id, head.ns, child.checkpoint_id)
    if later is None:
        return None
    writes: dict[str, Any] = {}
    for key in child.written:
        channel = graph.schema.channels.get(key)
        if channel is None:
            continue
        before, now = head.values.get(key, MISSING), later.values.get(key, MISSING)
        change = channel.reducer.diff(before, now)
        if change:
            writes[key] = change[0]
    return writes


def _next_saved(graph: GraphCore, frontier: list[dict[str, Any]]) -> tuple[str, ...]:
    """A saved frontier's nodes in LangGraph's order (``shown``)."""
    order = {node: i for i, node in enumerate(graph.nodes)}
    ordered = sorted(frontier, key=lambda p: -1 if "arg" in p else order.get(p["node"], 0))
    return tuple(p["node"] for p in ordered)


async def _snapshot(
    graph: GraphCore,
    cp: Checkpointer,
    thread_id: str,
    ns: str,
    checkpoint_id: str | None,
    subgraphs: bool,
) -> StateSnapshot | None:
    head = await load_head(graph, cp, thread_id, ns, checkpoint_id)
    if head is None:
        return None
    errors = {task_id: rec.error for task_id, rec in head.records.items() if rec.error}
    # a task asking again because its answer was refused shows why, beside its question
    refused = {task_id for task_id, rec in head.records.items() if rec.withdrawn}
    run = GraphRun(graph, head, checkpointer=cp, recursion_limit=0)
    tasks = run.plan()
    values = run.state_of(tasks) if checkpoint_id is None else head.values
    # shown in LangGraph's order; the writes above applied in the step's (task) order
    tasks = shown(graph, tasks)
    if checkpoint_id is None:
        # as LangGraph shows a thread's head: a paused or failed step's finished tasks have
        # written, and only the unfinished ones are next
        next_nodes = tuple(t.node for t in tasks if t.writes is None)
    else:
        next_nodes = tuple(p.node for p in shown(graph, head.frontier))
    states = []
    # a past checkpoint: what its step did, as LangGraph shows it (the step's one task's
    # writes are in the checkpoint after it, not in pending writes; every question it asked,
    # answered since or not)
    past = checkpoint_id is not None
    after = await _step_after(graph, cp, head) if past else None
    waiting = pending_input(head)
    if waiting is not None:  # an input's checkpoint: the input is the task to run
        next_nodes = (START,)
        start = task_id((head.lineage, ns, head.step + 1), START, 0)
        applied = dict(waiting) if after is not None else None
        states.append(TaskState(id=start, name=START, result=applied))
    for t in tasks:
        subs = await _sub_states(run, cp, t) if subgraphs else ()
        result = collected(t.writes) if t.writes is not None else None
        if result is None and after is not None and len(tasks) == 1 and not t.interrupts:
            result = after
        states.append(
            TaskState(
                id=t.id,
                name=t.node,
                interrupts=tuple(i for i in t.interrupts if past or i.id not in t.resume),
                result=result,
                states=subs,
                error=errors.get(t.id)
                if t.writes is None and (not t.interrupts or t.id in refused)
                else None,
            )
        )
    return StateSnapshot(
        values=values,
        next=next_nodes,
        checkpoint_id=head.checkpoint_id,
        parent_id=head.parent_id,
        step=head.step,
        source=head.source,
        interrupts=tuple(i for t in tasks for i in t.interrupts)
        if past
        else tuple(unanswered(tasks)),
        completed_tasks=tuple(t.id for t in tasks if t.writes is not None),
        created_at=head.created_at,
        metadata={**with_parents(head.metadata), "source": head.source, "step": head.step},
        tasks=tuple(states),
        ns=ns,
    )


async def _sub_states(run: GraphRun, cp: Checkpointer, task: Task) -> tuple[StateSnapshot, ...]:
    """The states of the sub-graphs ``task`` ran, each from its own namespace (a ``@task``
    call is none)."""
    graph, spec = run.graph, task.spec
    found = []
    for index in itertools.count():
        sub = _sub_graph(graph, task.node, index)
        if sub is None:
            break
        if sub.task_call:  # a @task's call: no sub-graph, as LangGraph's (a task of its own)
            continue
        call = run.child_ns(task, index)
        if sub.sub_checkpointer is False:  # never checkpointed: no state to show
            snap = None
        elif sub.sub_checkpointer is True:
            # its state, if the last call there was this task's (not an earlier task's)
            snap = await _snapshot(sub, cp, run.head.thread_id, persistent_ns(call), None, True)
            if snap is not None and snap.metadata.get("call") != call:
                snap = None
        else:
            snap = await _snapshot(sub, cp, run.head.thread_id, call, None, True)
        if snap is None:
            if sub.sub_checkpointer is not None and spec.subgraph is None:
                continue  # a call with no state of its own here: the next call may have
            break
        found.append(snap)
        if spec.subgraph is not None:
            break
    return tuple(found)


def _sub_graph(graph: GraphCore, node: str, index: int) -> GraphCore | None:
    """The sub-graph ``node`` of ``graph`` runs: the graph it is (``index`` 0), or the
    ``index``-th one its function calls (known once called, or from what the function refers
    to, for a process that has not run the call yet); None if there is none."""
    spec = graph.nodes.get(node)
    if spec is None:
        return None
    sub = spec.subgraph if index == 0 else None
    if sub is None:
        sub = graph.called.get((node, index))
    if sub is None and index == 0 and spec.fn is not None:
        sub = referenced_graph(spec.fn)
    return sub


def referenced_graph(fn: Callable[..., Any]) -> GraphCore | None:
    """The one compiled graph a node function refers to (through its closure or the globals
    it names), if exactly one: the graph it calls."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    cells = [c.cell_contents for c in getattr(fn, "__closure__", None) or () if _filled(c)]
    scope = getattr(fn, "__globals__", {})
    names = [scope[n] for n in code.co_names if n in scope]
    graphs = {id(v): v for v in (*cells, *names) if isinstance(v, GraphCore)}
    return next(iter(graphs.values())) if len(graphs) == 1 else None


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True


async def history(
    graph: GraphCore,
    thread_id: str,
    *,
    limit: int | None = None,
    ns: str = "",
    before: str | None = None,
    filter: Mapping[str, Any] | None = None,  # LangGraph's name for it
) -> list[CheckpointInfo]:
    """The thread's checkpoints, newest first (of a sub-graph's namespace with ``ns``): only
    those older than the checkpoint ``before`` and whose metadata holds every item of
    ``filter``, at most ``limit`` of them (counted after both). An argument of the wrong kind
    is an ``ArgumentError``, as a bad ``limit`` is."""
    cp = require_checkpointer(graph, "history")
    check_id(thread_id, "thread_id")
    check_limit(limit, "history")
    if filter is not None and not isinstance(filter, Mapping):
        raise ArgumentError(
            f"history(filter=...) takes a dict of metadata items, got {shown_repr(filter)}"
        )
    if not isinstance(ns, str):
        raise ArgumentError(
            f"history(ns=...) takes a namespace (text, '' for the root), got {shown_repr(ns)}"
        )
    if before is not None and not isinstance(before, str):
        raise ArgumentError(
            f"history(before=...) takes a checkpoint id (text), got {shown_repr(before)}"
        )
    page = None if filter else limit  # a filter counts its limit after reading
    if before is None:
        records = await cp.list(thread_id, ns, limit=page)
    else:
        older = await cp.list_before(thread_id, ns, before, limit=page)
        if older is None:
            raise UnknownTargetError(f"thread {thread_id!r} has no checkpoint {before!r}")
        records = older
    if not filter:
        return [_info(graph, r) for r in records]
    found: list[CheckpointInfo] = []
    for record in records:
        if limit is not None and len(found) >= limit:
            break
        info = _info(graph, record)
        if not filter or all(info.metadata.get(k) == v for k, v in filter.items()):
            found.append(info)
    return found


def _info(graph: GraphCore, r: CheckpointRecord) -> CheckpointInfo:
    return CheckpointInfo(
        checkpoint_id=r.checkpoint_id,
        parent_id=r.parent_id,
        step=r.step,
        source=r.source,
        snapshot=r.snapshot,
        next=_next_saved(graph, r.frontier),
        written=tuple(r.written),
        tasks=tuple(r.tasks),
        created_at=r.created_at,
        metadata={**with_parents(r.metadata), "source": r.source, "step": r.step},
    )


async def update_state(
    graph: GraphCore,
    thread_id: str,
    update: dict[str, Any],
    *,
    as_node: str | None = None,
    checkpoint_id: str | None = None,
    ns: str = "",
) -> str:
    """Apply ``update`` through the reducers as its own checkpoint (holding the thread's
    lease), to the state at ``checkpoint_id`` when given; return its id. With ``ns`` (a
    sub-graph's ``StateSnapshot.ns``) the update applies to that sub-graph's state, at its
    head."""
    check_id(thread_id, "thread_id")  # a session without one would start a new thread
    if ns:
        return await _update_sub_graph(graph, thread_id, ns, update, as_node, checkpoint_id)
    async with GraphSession(graph, thread_id) as session:
        return await session.update_state(update, as_node, checkpoint_id)


async def bulk_update_state(
    graph: GraphCore, thread_id: str, supersteps: Sequence[Sequence[StateUpdate]]
) -> str:
    """``bulk_update_state``: the supersteps of updates, each its own checkpoint, under the
    thread's lease; the last one's id."""
    check_id(thread_id, "thread_id")
    async with GraphSession(graph, thread_id) as session:
        return await session.bulk_update(supersteps)


async def _update_sub_graph(
    graph: GraphCore,
    thread_id: str,
    ns: str,
    update: dict[str, Any],
    as_node: str | None,
    checkpoint_id: str | None,
) -> str:
    """``update_state`` in the namespace ``ns`` of the thread, as LangGraph's with a
    sub-graph's config: the sub-graph's reducers, nodes and routing; the task that runs it
    continues from there when the thread goes on (its pending interrupts still ask)."""
    cp = require_checkpointer(graph, "update_state")
    if not isinstance(ns, str):
        raise ArgumentError(
            "update_state(ns=...) takes a namespace (a sub-graph's StateSnapshot.ns, text), "
            f"got {shown_repr(ns)}"
        )
    sub = sub_graph_at(graph, ns)
    check_as_node(sub, as_node)  # before anything is read
    async with GraphSession(graph, thread_id):  # the thread's lease: no run moves meanwhile
        head = await load_head(sub, cp, thread_id, ns)
        if head is None:
            raise UnknownTargetError(
                f"thread {thread_id!r} has no state of a sub-graph at {ns!r}: "
                "read the namespaces from get_state(thread_id, subgraphs=True)"
            )
        if checkpoint_id is not None and checkpoint_id != head.checkpoint_id:
            raise GraphError(
                "update_state(ns=...) changes a sub-graph's state at its head: forking its "
                f"past ({checkpoint_id!r}) is not supported; fork the thread's instead"
            )
        if as_node is None:
            as_node = inferred_as_node(head)
        call = head.metadata.get("call", ns)  # a persistent sub-graph's: the call it runs for
        staged = await save_update(cp, sub, head, update, as_node)
        pending = {i.id for rec in staged.records.values() for i in rec.interrupts}
        await _drop_dropped_interrupts(graph, cp, thread_id, ns, call, pending)
    assert staged.checkpoint_id is not None
    return staged.checkpoint_id


async def _drop_dropped_interrupts(
    graph: GraphCore, cp: Checkpointer, thread_id: str, ns: str, call: str, pending: set[str]
) -> None:
    """After an update left the sub-graph at ``ns`` asking only ``pending`` (``as_node``
    drops its paused tasks), the tasks that run it, up to the top, stop waiting on the
    questions it no longer asks: ``run(None)`` runs them, and the sub-graph goes on from its
    changed state, as LangGraph's re-run task does. ``call`` is ``ns`` with the task ids
    in it (a persistent sub-graph's namespace has none: its checkpoints keep the call's)."""
    segments = call.split("|")
    while segments:
        if ":" not in segments[-1]:  # a call's number: the task is the segment before it
            segments.pop()
        task_id = segments.pop().partition(":")[2]
        parent_ns = "|".join(segments)
        parent = sub_graph_at(graph, parent_ns) if parent_ns else graph
        head = await load_head(parent, cp, thread_id, parent_ns)
        rec = head.records.get(task_id) if head is not None else None
        if head is None or rec is None:
            return
        kept = [i for i in rec.interrupts if i.id in pending or not _within(i.ns, ns)]
        if len(kept) == len(rec.interrupts):
            return
        write = interrupt_write(task_id, kept)
        await cp.put_writes(thread_id, parent_ns, head.frontier_id, [write])
        segments = head.metadata.get("call", parent_ns).split("|") if parent_ns else []


def _within(inner: str, ns: str) -> bool:
    """Whether namespace ``inner`` is ``ns`` or one under it: not another call of the same
    task (``ns|1``)."""
    rest = inner.removeprefix(ns + "|")
    return inner == ns or (rest != inner and ":" in rest.partition("|")[0])


def sub_graph_at(graph: GraphCore, ns: str) -> GraphCore:
    """The graph whose state namespace ``ns`` holds: each ``node:task_id`` segment is the
    sub-graph node ``node`` of the graph before it, or its function's call (its first; a
    segment ``n`` after it, its ``n``-th one more); segments ``node`` with no task id lead to
    a ``compile(checkpointer=True)`` sub-graph (``persistent_ns``); ``UnknownTargetError``
    for a namespace the graph cannot have."""
    current = graph
    segments = ns.split("|")
    for at, segment in enumerate(segments):
        node, colon, _ = segment.partition(":")
        call = segments[at + 1] if at + 1 < len(segments) else ""
        if not colon and at and segment.isdigit():
            continue  # the call number read with the segment before it
        index = int(call) if call.isdigit() else 0
        sub = _sub_graph(current, node, index) if node else None
        if sub is not None and colon and sub.sub_checkpointer is True:
            sub = None  # a persistent sub-graph's segment has no task id (nor the ones above)
        if sub is None:
            raise UnknownTargetError(
                f"graph {graph.name!r} has no sub-graph at {ns!r} (segment {segment!r}): "
                "read the namespaces from get_state(thread_id, subgraphs=True)"
            )
        current = sub
    return current


async def fork(
    graph: GraphCore, thread_id: str, checkpoint_id: str, *, new_thread_id: str | None = None
) -> str:
    """Copy the thread as it was at ``checkpoint_id`` into a new thread; return its id. A
    ``compile(checkpointer=True)`` sub-graph's state of then comes along when the new
    thread first calls it (``executor._forked``)."""
    cp = require_checkpointer(graph, "fork")
    check_id(thread_id, "thread_id")
    if new_thread_id is not None:
        check_id(new_thread_id, "new_thread_id", " (leave it out for a new id)")
    head = await load_head(graph, cp, thread_id, "", checkpoint_id)
    if head is None:
        raise UnknownTargetError(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}")
    if new_thread_id is not None and await cp.latest(new_thread_id) is not None:
        raise GraphError(f"cannot fork into thread {new_thread_id!r}: it exists already")
    latest = await cp.latest(thread_id)
    past = latest is not None and latest.checkpoint_id != head.checkpoint_id
    carried = carry_records(graph, head, past=past)
    new_thread = new_thread_id
    if new_thread is None:
        new_thread = f"{thread_id}~{_clock.new_id('fork')}"
        if len(new_thread) > MAX_ID_LENGTH:  # saved, it was a thread no call could name
            raise InvalidIdError(
                f"cannot fork thread {shown_repr(thread_id)} under its default name: "
                f"<thread_id>~fork-<12 hex digits> is {len(new_thread)} characters, and a "
                f"thread id is at most {MAX_ID_LENGTH}; name the fork with new_thread_id=...",
                field="new_thread_id",
            )
    head.thread_id = new_thread
    head.run_id = None  # the fork is a new execution: its first run gets a new run id
    head.seq, head.checkpoint_id = -1, None
    head.frontier_id = new_frontier_id()
    meta = {"forked_from": {"thread_id": thread_id, "checkpoint_id": checkpoint_id}}
    # The step's pending writes first: the fork exists once its checkpoint does, and then
    # with them (a crash in between leaves writes no checkpoint refers to, which nothing reads).
    await cp.put_writes(new_thread, "", head.frontier_id, carried)
    await save(cp, head, delta=None, source="fork", metadata=meta)
    return new_thread
