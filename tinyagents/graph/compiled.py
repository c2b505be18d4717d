"""``CompiledGraph``: run a validated graph, and read or change its threads."""

from __future__ import annotations

import re
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from tinyagents import _clock
from tinyagents.errors import GraphError, InterruptError, UnknownTargetError
from tinyagents.graph.builder import Branch, NodeSpec, StateGraph
from tinyagents.graph.checkpointing import (
    Head,
    Planned,
    encode,
    load_head,
    new_frontier_id,
    save,
)
from tinyagents.graph.executor import GraphRun
from tinyagents.graph.reducers import MISSING, Overwrite
from tinyagents.graph.types import (
    END,
    START,
    CheckpointInfo,
    Command,
    GraphResult,
    Send,
    StateSnapshot,
)
from tinyagents.store.checkpoint.base import WriteRecord

if TYPE_CHECKING:
    from tinyagents.runs.host import RunHost
    from tinyagents.store.checkpoint.base import Checkpointer

_INTERRUPT_ID = re.compile(r"^i-[0-9a-f]{16}$")


class CompiledGraph:
    """A runnable graph. ``await graph.run(input, thread_id=...)`` → ``GraphResult``."""

    def __init__(
        self,
        builder: StateGraph,
        *,
        checkpointer: Checkpointer | None,
        name: str,
        recursion_limit: int,
        task_cancel_policy: str,
        redirect_conflict: str,
    ) -> None:
        self.builder = builder
        self.schema = builder.schema
        self.nodes: dict[str, NodeSpec] = dict(builder.nodes)
        self.checkpointer = checkpointer
        self.name = name
        self.recursion_limit = recursion_limit
        self.task_cancel_policy = task_cancel_policy
        self.redirect_conflict = redirect_conflict
        static: dict[str, list[str]] = {}
        for source, target in builder.edges:
            static.setdefault(source, [])
            if target not in static[source]:
                static[source].append(target)
        self.static: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in static.items()}
        branches: dict[str, list[Branch]] = {}
        for branch in builder.branches:
            branches.setdefault(branch.source, []).append(branch)
        self.branches: dict[str, tuple[Branch, ...]] = {k: tuple(v) for k, v in branches.items()}
        self.joins: list[tuple[frozenset[str], str]] = [
            (frozenset(sources), target) for sources, target in builder.joins
        ]
        self.joins_from: dict[str, list[int]] = {}
        for index, (sources, _) in enumerate(builder.joins):
            for source in sources:
                self.joins_from.setdefault(source, []).append(index)
        self._arg_adapters: dict[str, TypeAdapter[Any] | None] = {}
        # nodes whose successors never depend on state: their next frontier is a constant
        # (shared, never mutated: a head's frontier is only ever replaced)
        self.simple_next: dict[str, list[Planned]] = {
            node: [Planned(node=t) for t in self.static.get(node, ()) if t != END]
            for node in self.nodes
            if node not in self.branches and node not in self.joins_from
        }

    # -- running ---------------------------------------------------------------------------

    async def run(
        self,
        input: Any = None,
        *,
        thread_id: str | None = None,
        runtime: RunHost | None = None,
        checkpoint_id: str | None = None,
        recursion_limit: int | None = None,
    ) -> GraphResult:
        """Run (or continue) a thread until it finishes, pauses on interrupts or fails.

        ``input`` is a state update (starts again from START), ``None`` (continue the
        thread) or a ``Command`` (resume interrupts, update, goto). ``checkpoint_id``
        rewinds the thread to that checkpoint first (as a new head; history stays linear).
        Bad input raises and changes nothing; a failing node gives ``status="failed"``.
        """
        if self.checkpointer is None and runtime is None and not isinstance(input, Command):
            return await self._run_unsaved(input, thread_id, recursion_limit)
        if runtime is not None:
            from tinyagents.graph.driver import run_with_runtime

            return await run_with_runtime(
                self,
                input,
                runtime=runtime,
                thread_id=thread_id,
                checkpoint_id=checkpoint_id,
                recursion_limit=recursion_limit,
            )
        from tinyagents.graph.session import GraphSession

        async with GraphSession(self, thread_id) as session:
            run = await session.prepare(input, checkpoint_id, recursion_limit)
            return await run.outcome()

    async def _run_unsaved(
        self, input: Any, thread_id: str | None, recursion_limit: int | None
    ) -> GraphResult:
        """The path without checkpointer: nothing to lease, load or save."""
        if input is None:
            raise GraphError("a graph without checkpointer needs an input for every run")
        head = Head.fresh(self, thread_id or "", "", None)
        await self.start_input(head, input, None)
        run = GraphRun(
            self, head, checkpointer=None, recursion_limit=recursion_limit or self.recursion_limit
        )
        return await run.outcome()

    async def start_input(self, head: Head, data: Any, cp: Checkpointer | None) -> None:
        """Apply run input to ``head``: writes through the reducers, frontier from START."""
        writes = self.schema.coerce_input(data)
        delta = self.apply_writes(head.values, list(writes.items()))
        head.frontier = await self.route([(START, [])], head.values, head.barriers)
        head.step += 1
        head.records = {}
        if cp is not None:
            head.frontier_id = new_frontier_id()
            await save(cp, head, delta=delta if head.seq >= 0 else None, source="input")

    # -- the pieces the executor and sessions share ------------------------------------------

    def apply_writes(self, values: dict[str, Any], writes: list[tuple[str, Any]]) -> dict[str, Any]:
        """Apply writes (in order) through the reducers; return the per-channel deltas."""
        channels = self.schema.channels
        if len(writes) == 1:
            key, value = writes[0]
            new, delta = channels[key].reducer.apply(key, values.get(key, MISSING), [value])
            values[key] = new
            return {key: delta}
        grouped: dict[str, list[Any]] = {}
        for key, value in writes:
            grouped.setdefault(key, []).append(value)
        for key, batch in grouped.items():
            if len(batch) > 1 and isinstance(channels[key].reducer, Overwrite):
                channels[key].reducer.apply(key, MISSING, batch)  # raises InvalidUpdateError
        deltas = {}
        for key, batch in grouped.items():
            values[key], deltas[key] = channels[key].reducer.apply(
                key, values.get(key, MISSING), batch
            )
        return deltas

    async def route(
        self,
        finished: list[tuple[str, list[str | Send]]],
        values: dict[str, Any],
        barriers: dict[str, set[str]],
        view: Callable[[], Any] | None = None,
    ) -> list[Planned]:
        """The next frontier after ``finished`` nodes (with their gotos) ran."""
        pulls: dict[str, None] = {}
        pushes: list[Planned] = []

        def add(target: str | Send) -> None:
            if isinstance(target, Send):
                pushes.append(Planned(node=target.node, arg=target.arg))
            else:
                pulls[target] = None

        state: Any = None
        for node, goto in finished:
            for target in self.static.get(node, ()):
                pulls[target] = None
            for branch in self.branches.get(node, ()):
                if state is None:
                    state = view() if view is not None else self.schema.view(values)
                for routed in await self.evaluate(branch, state):
                    add(routed)
            for jumped in goto:
                add(jumped)
            for join in self.joins_from.get(node, ()):
                sources, joined = self.joins[join]
                seen = barriers.setdefault(str(join), set())
                seen.add(node)
                if seen.issuperset(sources):
                    del barriers[str(join)]
                    pulls[joined] = None
        pulls.pop(END, None)
        return [Planned(node=n) for n in pulls] + pushes

    async def evaluate(self, branch: Branch, state: Any) -> list[str | Send]:
        out = branch.router(state)
        if branch.is_async or hasattr(out, "__await__"):
            out = await out
        results = out if isinstance(out, list | tuple) else [out]
        targets: list[str | Send] = []
        for result in results:
            if isinstance(result, Send):
                targets.append(result)
                continue
            if branch.mapping is not None:
                if result not in branch.mapping:
                    raise GraphError(
                        f"router {branch.router.__name__!r} after {branch.source!r} returned "
                        f"{result!r}, which is not in its mapping {sorted(map(str, branch.mapping))}"
                    )
                result = branch.mapping[result]
            targets.append(result)
        self.check_goto(targets, f"router {getattr(branch.router, '__name__', 'router')!r}")
        return targets

    def check_goto(self, targets: list[str | Send], who: str) -> None:
        for target in targets:
            node = target.node if isinstance(target, Send) else target
            if node != END and node not in self.nodes:
                raise GraphError(f"{who} sent the graph to unknown node {node!r}")
            if isinstance(target, Send) and node == END:
                raise GraphError(f"{who} sent a Send to END")

    def decode_arg(self, node: str, value: Any) -> Any:
        """A checkpointed ``Send`` argument → the type of the node's first parameter."""
        if node not in self._arg_adapters:
            self._arg_adapters[node] = _arg_adapter(self.nodes[node])
        adapter = self._arg_adapters[node]
        if adapter is None:
            return value
        try:
            return adapter.validate_python(value)
        except ValidationError:
            return value

    # -- threads ---------------------------------------------------------------------------

    def _require_checkpointer(self, what: str) -> Checkpointer:
        if self.checkpointer is None:
            raise GraphError(f"{what} needs a checkpointer: compile(checkpointer=...)")
        return self.checkpointer

    async def get_state(self, thread_id: str, checkpoint_id: str | None = None) -> StateSnapshot:
        """The thread's values, next nodes and pending interrupts (at the head by default)."""
        cp = self._require_checkpointer("get_state")
        head = await load_head(self, cp, thread_id, "", checkpoint_id)
        if head is None:
            if checkpoint_id is not None:
                raise UnknownTargetError(f"thread {thread_id!r} has no checkpoint {checkpoint_id}")
            return StateSnapshot(
                values={}, next=(), checkpoint_id=None, parent_id=None, step=-1, source="none"
            )
        run = GraphRun(self, head, checkpointer=cp, recursion_limit=0)
        tasks = run.plan()
        return StateSnapshot(
            values=head.values,
            next=tuple(p.node for p in head.frontier),
            checkpoint_id=head.checkpoint_id,
            parent_id=head.parent_id,
            step=head.step,
            source=head.source,
            interrupts=run.result("interrupted", tasks).interrupts,
            completed_tasks=tuple(t.id for t in tasks if t.writes is not None),
            created_at=head.created_at,
            metadata=head.metadata,
        )

    async def history(self, thread_id: str, *, limit: int | None = None) -> list[CheckpointInfo]:
        """The thread's checkpoints, newest first (values via ``get_state(checkpoint_id=)``)."""
        cp = self._require_checkpointer("history")
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
        self, thread_id: str, update: dict[str, Any], *, as_node: str | None = None
    ) -> str:
        """Apply ``update`` through the reducers as its own checkpoint; return its id.

        With ``as_node`` the update counts as that node's output and the next superstep
        follows that node's edges; without it the pending tasks stay as they are.
        """
        from tinyagents.graph.session import GraphSession

        async with GraphSession(self, thread_id) as session:
            return await session.update_state(update, as_node)

    async def fork(
        self, thread_id: str, checkpoint_id: str, *, new_thread_id: str | None = None
    ) -> str:
        """Copy the thread as it was at ``checkpoint_id`` into a new thread; return its id.

        The fork keeps the interrupts that were pending there; sub-graph namespaces are not
        copied (a sub-graph task on the fork runs again). Its id is ``new_thread_id`` when
        given (a thread that has no checkpoints yet, else ``GraphError``), else
        ``<thread_id>~fork-<12 random hex digits>``.
        """
        cp = self._require_checkpointer("fork")
        head = await load_head(self, cp, thread_id, "", checkpoint_id)
        if head is None:
            raise UnknownTargetError(f"thread {thread_id!r} has no checkpoint {checkpoint_id}")
        if new_thread_id is not None and await cp.latest(new_thread_id) is not None:
            raise GraphError(f"cannot fork into thread {new_thread_id!r}: it exists already")
        from tinyagents.graph.session import carry_interrupts

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

    # -- resume ----------------------------------------------------------------------------

    def map_resume(self, head: Head | None, resume: Any) -> list[WriteRecord]:
        """``Command.resume`` → resume records for the tasks that own those interrupts."""
        pending: dict[str, str] = {}
        if head is not None:
            for task_id, rec in head.records.items():
                if rec.writes is None:
                    pending.update(
                        {i.id: task_id for i in rec.interrupts if i.id not in rec.resume}
                    )
        if (
            isinstance(resume, dict)
            and resume
            and all(isinstance(k, str) and _INTERRUPT_ID.match(k) for k in resume)
        ):
            unknown = sorted(set(resume) - set(pending))
            if unknown:
                raise InterruptError(
                    f"no pending interrupt with id {', '.join(unknown)}; pending: "
                    f"{', '.join(sorted(pending)) or 'none'}"
                )
            answers = dict(resume)
        elif len(pending) == 1:
            answers = {next(iter(pending)): resume}
        elif not pending:
            raise InterruptError("the thread has no pending interrupt to resume")
        else:
            raise InterruptError(
                f"{len(pending)} interrupts are pending ({', '.join(sorted(pending))}); "
                "resume them by id: Command(resume={interrupt_id: value, ...})"
            )
        # resume values go through JSON now, so a node sees the same value after a restart
        return [
            WriteRecord(task_id=pending[iid], kind="resume", key=iid, value=encode(value))
            for iid, value in answers.items()
        ]

    def to_mermaid(self) -> str:
        return self.builder.to_mermaid()

    def __repr__(self) -> str:
        return f"<CompiledGraph {self.name!r} nodes={list(self.nodes)}>"


def _arg_adapter(spec: NodeSpec) -> TypeAdapter[Any] | None:
    if spec.fn is None:
        return None
    try:
        hints = typing.get_type_hints(spec.fn)
    except Exception:
        return None
    hints.pop("return", None)
    if not hints:
        return None
    annotation = next(iter(hints.values()))
    try:
        return TypeAdapter(annotation)
    except Exception:
        return None


__all__ = ["CompiledGraph"]
