"""``GraphSession``: one writer's hold on a thread.

It takes the thread's lease (``ThreadBusy`` if someone else writes it), turns the caller's
input into the head a run starts from — new input, ``None`` to continue, a ``Command`` to
resume / update / goto, or a rewind to an older checkpoint — and gives the lease back.
Everything that validates input happens before anything is saved, so bad input changes
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, cast

from tinyagents import _clock
from tinyagents.errors import (
    GraphError,
    GraphValidationError,
    InterruptError,
    InvalidUpdateError,
    StoreError,
    ThreadBusy,
    TinyAgentsError,
    UnknownTargetError,
)
from tinyagents.graph.checkpointing import (
    REPLAYED,
    Head,
    Planned,
    TaskRecords,
    check_values,
    cleared_result_write,
    interrupt_write,
    joined,
    load_head,
    new_frontier_id,
    pending_input,
    result_write,
    save,
    withdrawal_write,
)
from tinyagents.graph.core import router_context
from tinyagents.graph.executor import GraphRun, Replay
from tinyagents.graph.graph_runtime import check_durability, coerce_context, starting_context
from tinyagents.graph.reducers import Replaced
from tinyagents.graph.tasks import Task, plan_tasks
from tinyagents.graph.types import END, START, UNSET, Command, Send, StateUpdate
from tinyagents.protocol.ids import shown_repr
from tinyagents.runs.info import check_id
from tinyagents.store import checkpoint as checkpoints
from tinyagents.store.checkpoint._lease import new_owner
from tinyagents.store.checkpoint.base import WriteRecord

if TYPE_CHECKING:
    from tinyagents.graph.core import GraphCore
    from tinyagents.store.checkpoint.base import Checkpointer, CheckpointRecord
    from tinyagents.store.checkpoint.exit_buffer import ExitBuffer


def check_root(graph: GraphCore) -> None:
    """A ``compile(checkpointer=True)`` graph keeps its state in its parent's thread, so it
    has none of its own to run at the top (LangGraph's ``RuntimeError``, "checkpointer=True
    cannot be used for root graphs")."""
    if graph.sub_checkpointer is True:
        raise GraphError(
            f"graph {graph.name!r} is compiled with checkpointer=True, which keeps a "
            "sub-graph's state in its parent's thread: it runs only as a sub-graph (a node of "
            "a graph, or called from a node); to run it on its own, compile it with a "
            "Checkpointer"
        )


class GraphSession:
    """``async with GraphSession(graph, thread_id) as s: run = await s.prepare(input)``."""

    __slots__ = ("cp", "graph", "named", "owner", "run_id", "thread_id")

    def __init__(self, graph: GraphCore, thread_id: str | None) -> None:
        self.graph = graph
        check_root(graph)
        self.cp = graph.checkpointer
        #: whether the caller named the thread (else it is a new one, made up here)
        self.named = thread_id is not None
        if thread_id is None:  # a new thread (a run that saves nothing has none)
            thread_id = _clock.new_id("th") if self.cp is not None else ""
        else:
            check_id(thread_id, "thread_id", " (leave it out to start a new thread)")
        self.thread_id = thread_id
        self.owner: str | None = None
        #: a runtime run writing this thread: recorded in every checkpoint it saves
        self.run_id: str | None = None

    async def __aenter__(self) -> GraphSession:
        if self.cp is not None:
            owner = new_owner()
            await self.cp.acquire(self.thread_id, owner)
            self.owner = owner
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.owner is None:  # a lease is taken with a checkpointer only
            return
        assert self.cp is not None
        try:
            cp = self.cp
            if cp is not self.graph.checkpointer:  # durability="exit": the ``ExitBuffer``
                await cast("ExitBuffer", cp).flush()  # the run's saves, held until now
        finally:
            await self.cp.release(self.thread_id, self.owner)

    def fresh(self) -> Head:
        head = Head.fresh(self.graph, self.thread_id, "", None, saved=self.cp is not None)
        head.run_id = self.run_id
        return head

    async def load(self) -> Head | None:
        if self.cp is None:
            return None
        head = await load_head(self.graph, self.cp, self.thread_id)
        if head is not None and self.run_id is not None:
            head.run_id = self.run_id
        return head

    async def prepare(
        self,
        input: Any,
        checkpoint_id: str | None = None,
        recursion_limit: int | None = None,
        *,
        failure: StoreError | None = None,
        context: Any = None,
        durability: str | None = None,
        **run_kwargs: Any,
    ) -> GraphRun:
        """The run that continues this thread after applying ``input``: the one entry of
        every run (``run``, ``stream``, ``iter``, and a runtime's ``start_graph``). Bad input
        raises; a store that fails to read or write the thread gives a run that fails at
        once (``GraphRun.failure``), as a step whose checkpoint could not be saved does;
        ``failure``: such a failure the caller met reading the thread first (nothing else
        is read or saved then). ``context`` / ``durability``: ``CompiledGraph.run``'s."""
        if context is not None or durability is not None:
            return await self._prepare_with(
                context, durability, input, checkpoint_id, recursion_limit, failure, run_kwargs
            )
        graph = self.graph
        if checkpoint_id is not None and not self.named:  # not "thread 'th-3f2a..." (made up)
            raise UnknownTargetError(
                f"checkpoint {checkpoint_id!r}: no thread_id was given, so the run would begin a "
                "new thread, which has no checkpoints; give the thread_id of the thread the "
                "checkpoint is of"
            )
        limit = graph.limit(recursion_limit)  # before anything is saved
        self.run_id = run_kwargs.get("run_id")
        head: Head | None = None
        written: frozenset[str] | None = None  # the keys an input wrote
        continues = False
        try:
            if failure is None:
                head = await self.load() if self.cp is not None else None
                if head is not None:  # before any node reads a value its state refuses
                    check_values(graph, head)
                head, written, continues = await self._apply(head, input, checkpoint_id, limit)
        except ThreadBusy:
            raise  # another writer: no run begins
        except StoreError as exc:
            failure = exc  # what was saved stays: run(None) goes on from it
        run = GraphRun(
            graph,
            head or self.fresh(),
            checkpointer=self.cp,
            recursion_limit=limit,
            owner=self.owner,
            **run_kwargs,
        )
        run.input_written = written
        run.continues = continues
        run.failure = failure
        if head is not None and head.source in ("rewind", "update"):
            # the thread's past, just rewound to or forked (its checkpoint only: a step
            # after it keeps no "rewound_to"): persistent sub-graphs go back there too
            bound = head.metadata.get("rewound_to")
            if isinstance(bound, str):
                run.replay = Replay(bound=bound)
        return run

    async def _prepare_with(
        self,
        context: Any,
        durability: str | None,
        input: Any,
        checkpoint_id: str | None,
        recursion_limit: int | None,
        failure: StoreError | None,
        run_kwargs: dict[str, Any],
    ) -> GraphRun:
        """``prepare`` of a run given a ``context`` or a ``durability`` (checked first; a
        plain run does not come here, so it pays nothing for them)."""
        self.graph.limit(recursion_limit)  # a bad limit is named first, as in a plain run
        if durability is not None:
            check_durability(durability)
            if durability == "exit" and self.cp is not None:
                # the run's saves are held until it ends (``__aexit__`` flushes them); the
                # module loads with the first such run, as the checkpointers load (``_lazy``)
                self.cp = checkpoints.ExitBuffer(self.cp)
        if context is None:
            return await self.prepare(
                input, checkpoint_id, recursion_limit, failure=failure, **run_kwargs
            )
        context = coerce_context(self.graph.context_schema, context)
        # a router on START runs as the input is applied, before the run is made
        token = starting_context.set(context)
        try:
            run = await self.prepare(
                input, checkpoint_id, recursion_limit, failure=failure, **run_kwargs
            )
        finally:
            starting_context.reset(token)
        run.context = context
        return run

    async def _apply(
        self, head: Head | None, input: Any, checkpoint_id: str | None, limit: int
    ) -> tuple[Head, frozenset[str] | None, bool]:
        """``input`` applied to the thread's ``head`` (rewound to ``checkpoint_id`` first):
        (the head the run starts from, the keys an input wrote, whether the run continues
        the thread: ``GraphRun.continues``)."""
        graph = self.graph
        if checkpoint_id is not None:
            # run(None, checkpoint_id=<the head>) on a step part-way through replays it, as
            # LangGraph's; a Command there (a client that names the head it resumes) resumes
            head = await self._rewind(
                head,
                checkpoint_id,
                replay_head=input is None,
                replays=input is None or (isinstance(input, Command) and input.resume is UNSET),
                input=input,
                limit=limit,
            )
        if head is None and empty_command(input):
            # nothing to write, answer or go to, and no checkpoint to go on from: the same
            # GraphError as None (LangGraph's "Received empty Command input")
            input = None
        written: frozenset[str] | None = None
        continues = head is not None and (input is None or isinstance(input, Command))
        if head is None and starts_thread(input):
            # a new thread's first Command(update=..., goto=...) is its input, as LangGraph's:
            # the update is written, then the graph runs from START, the goto joining the
            # first step
            update = graph.schema.command_writes(input.update, "Command.update")
            goto = input.goto_list()
            graph.check_goto(goto, "Command.goto")
            head = self.fresh()
            written = await graph.start_writes(head, dict(update), self.cp, limit, goto)
        elif isinstance(input, Command):
            head = await self._command(head, input)
            # an input's checkpoint continued: its input first
            written = await graph.take_pending_input(head, self.cp, limit)
        elif input is None:
            if self.cp is None:
                raise GraphError("a graph without checkpointer needs an input for every run")
            if head is None or await self._blank(head):
                raise GraphError(
                    f"thread {self.thread_id!r} has no checkpoint to continue from; "
                    "pass an input to start it"
                )
            written = await graph.take_pending_input(head, self.cp, limit)
        else:
            head = head or self.fresh()
            written = await graph.start_input(head, input, self.cp, limit)
        # not a thread's pending input, applied just now: its first step is a fresh one
        return head, written, continues and written is None

    async def _step_after(self, checkpoint_id: str) -> CheckpointRecord | None:
        """The checkpoint the step run from ``checkpoint_id`` saved (its ``loop`` child), if
        one was saved."""
        assert self.cp is not None
        records = await self.cp.list(self.thread_id)
        return next(
            (r for r in records if r.parent_id == checkpoint_id and r.source == "loop"), None
        )

    async def _blank(self, head: Head) -> bool:
        """Whether the thread's checkpoints are updates that wrote nothing and made nothing
        next (``update_state(None, as_node=END)`` on a new thread): it has no input to go on
        from, as LangGraph's raises ``EmptyInputError`` for a thread with no channel written.
        Read only for ``run(None)`` on such a head, which is no run's step."""
        if head.source != "update" or head.frontier or head.records or head.metadata.get("keys"):
            return False
        assert self.cp is not None
        records = await self.cp.list(self.thread_id)
        return all(
            r.source == "update" and not r.metadata.get("keys") and not r.frontier for r in records
        )

    async def _rewind(
        self,
        head: Head | None,
        checkpoint_id: str,
        *,
        replay_head: bool,
        replays: bool,
        input: Any,
        limit: int,
    ) -> Head:
        """Make the thread as it was at ``checkpoint_id`` its head, saved as a ``rewind``.
        ``replays`` (time travel: no answer to give there) numbers the rewind one step past
        that checkpoint, as LangGraph numbers the ``fork`` checkpoint its replay saves, so
        the steps that run again are numbered as LangGraph's are. ``input`` (the run's) is
        read against that state first: input that would be refused there saves nothing.

        A replay of the head itself, an ``update`` or ``rewind`` part-way through its step,
        goes on from it and saves nothing, as LangGraph's replay of its ``update`` and
        ``fork`` checkpoints: its answers are dropped and its finished tasks run again
        (``_replay_in_place``)."""
        if replay_head and head is not None and head.checkpoint_id == checkpoint_id:
            if head.records and _replays_in_place(head):
                await self._replay_in_place(head)
                return head
        target = await self._rewound(head, checkpoint_id, replay_head=replay_head)
        if target is head:
            return target
        assert self.cp is not None  # _rewound refuses a graph without one
        await self._check_input(target, input, limit, checkpoint_id)
        if replays:
            target.step += 1
        await save(
            self.cp, target, delta=None, source="rewind", metadata={"rewound_to": checkpoint_id}
        )
        return target

    async def _replay_in_place(self, head: Head) -> None:
        """Replay ``head``'s step under its task ids, as LangGraph replays an ``update`` or
        ``fork`` checkpoint: a finished task runs again (LangGraph reapplies no finished
        write when it replays), and a task that was answered asks its questions again from
        its first (the answers are dropped, as LangGraph drops its ``RESUME`` writes there),
        under the same interrupt ids; a task paused on a question with no answer still asks
        it. Saved as pending writes of the step, which replace the ones they drop."""
        assert self.cp is not None
        writes: list[WriteRecord] = []
        for tid, rec in head.records.items():
            if rec.writes is not None:
                writes.append(cleared_result_write(tid))
                rec.writes, rec.goto = None, []
            answered = [iid for iid in rec.resume if iid not in rec.dropped]
            if answered:
                writes.append(interrupt_write(tid, []))
                writes += [withdrawal_write(tid, iid, REPLAYED) for iid in answered]
                rec.interrupts, rec.resume = [], {}
                rec.dropped.update(answered)
        if writes:
            await self.cp.put_writes(head.thread_id, head.ns, head.frontier_id, writes)

    async def _rewound(
        self,
        head: Head | None,
        checkpoint_id: str,
        *,
        replay_head: bool = False,
        copy: bool = False,
    ) -> Head:
        """The thread as it was at ``checkpoint_id``, as the next head (not saved yet); the
        head itself when it is that checkpoint, unless ``replay_head`` and a step is part-way
        through there (then it is replayed like any past checkpoint) or ``copy``."""
        if self.cp is None:
            raise GraphValidationError(
                "checkpoint_id needs a checkpointer: compile(checkpointer=...)"
            )
        if head is not None and head.checkpoint_id == checkpoint_id and not copy:
            if not (replay_head and head.records) or _asks_afresh(head):
                return head
        target = await load_head(self.graph, self.cp, self.thread_id, "", checkpoint_id)
        if target is None or head is None:
            raise UnknownTargetError(
                f"thread {self.thread_id!r} has no checkpoint {checkpoint_id!r}"
            )
        if self.run_id is not None:
            target.run_id = self.run_id
        # A replay runs the step again, as LangGraph's does: a node that asked questions
        # there asks them again from its first, and no answer or write of then is reused.
        # A new lineage gives its tasks new ids, so sub-graphs start in fresh namespaces.
        target.records = {}
        target.lineage = _clock.new_id("ln")
        target.seq, target.checkpoint_id = head.seq, head.checkpoint_id
        target.frontier_id = new_frontier_id()
        return target

    async def _check_input(self, head: Head, input: Any, limit: int, checkpoint_id: str) -> None:
        """Raise what applying ``input`` to ``head`` (the thread's past at ``checkpoint_id``)
        would raise, on copies: nothing changes and nothing is saved."""
        graph = self.graph
        if isinstance(input, Command):
            if input.resume is not UNSET:
                raise InterruptError(
                    f"Command(resume=...): no pending interrupt to answer at checkpoint "
                    f"{checkpoint_id!r}: a replay runs its step again, which asks its questions "
                    "again; rewind without resume, then answer them"
                )
            update = graph.schema.command_writes(input.update, "Command.update")
            graph.check_goto(input.goto_list(), "Command.goto")
            graph.apply_writes(head.staged([k for k, _ in update]).values, update)
        elif input is not None:
            await graph.check_input(head, input, limit)

    async def _command(self, head: Head | None, cmd: Command[Any]) -> Head:
        graph = self.graph
        if cmd.graph is not None:
            raise GraphError("Command(graph=...) can only be returned by a node of a sub-graph")
        goto = cmd.goto_list()
        has_resume = cmd.resume is not UNSET
        if has_resume and head is None:
            raise InterruptError(
                f"Command(resume=...): thread {self.thread_id!r} has no checkpoint, so no "
                "pending interrupt to answer; start it with an input"
            )
        resume = graph.map_resume(head, cmd.resume) if head is not None and has_resume else []
        update = graph.schema.command_writes(cmd.update, "Command.update")
        graph.check_goto(goto, "Command.goto")
        head = head or self.fresh()
        if update or goto:
            delta = graph.apply_writes(head.values, update)
            if goto:
                delta.update(add_goto(graph, head, goto))
            if self.cp is not None:
                meta: dict[str, Any] = {"goto": [g if isinstance(g, str) else g.node for g in goto]}
                await save(
                    self.cp,
                    head,
                    delta=delta if head.seq >= 0 else None,
                    source="input",
                    metadata=meta,
                )
        if resume:
            await record_resume(self.cp, head, resume)
        return head

    async def update_state(
        self, update: dict[str, Any], as_node: str | None, checkpoint_id: str | None = None
    ) -> str:
        graph = self.graph
        if self.cp is None:
            raise GraphValidationError(
                "update_state needs a checkpointer: compile(checkpointer=...)"
            )
        if as_node == COPY:
            return await self._copy(update, checkpoint_id)
        if as_node == INPUT:
            return await self._as_input(update, checkpoint_id)
        check_as_node(graph, as_node)  # before anything is read
        head = await self.load() or self.fresh()
        rewound_to = None
        infer = as_node is None
        if checkpoint_id is not None and checkpoint_id != head.checkpoint_id:
            # a fork of the thread's past, as LangGraph's update_state at an older checkpoint:
            # the update applies to the state there, and what follows runs again from it
            after = await self._step_after(checkpoint_id) if as_node == END else None
            if after is None:
                head = await self._rewound(head if head.seq >= 0 else None, checkpoint_id)
            else:
                # END there: that step's tasks ran since, so they are done, as LangGraph's
                # applies their recorded writes and follows their edges; the checkpoint their
                # step saved holds just that. The update is numbered as one at checkpoint_id
                # (one past it: an update with tasks pending keeps its head's step)
                head = await self._rewound(head, after.checkpoint_id, replay_head=True)
                head.step = after.step - (0 if head.frontier else 1)
                as_node = None  # routes nothing more: what that step made next stays next
            rewound_to = checkpoint_id
        if infer:
            as_node = inferred_as_node(head)
        staged = await update_state(self.cp, graph, head, update, as_node, rewound_to=rewound_to)
        assert staged.checkpoint_id is not None
        return staged.checkpoint_id

    async def bulk_update(self, supersteps: Sequence[Sequence[StateUpdate]]) -> str:
        """``bulk_update_state``: each superstep of updates saved as one checkpoint, in order,
        under this session's lease; the last one's id. A superstep of one update is an
        ``update_state``; one of several is the writes of nodes that ran together (each
        ``as_node`` a node of the graph). Every superstep is checked before any is saved."""
        graph = self.graph
        if self.cp is None:
            raise GraphValidationError(
                "bulk_update_state needs a checkpointer: compile(checkpointer=...)"
            )
        steps = check_supersteps(graph, supersteps)
        checkpoint_id = ""
        for step in steps:
            first, *rest = step
            if not rest:
                checkpoint_id = await self.update_state(first.values, first.as_node)
                continue
            assert first.as_node is not None
            head = await self.load() or self.fresh()
            staged = await update_state(
                self.cp,
                graph,
                head,
                first.values,
                first.as_node,
                alongside=[(u.values, u.as_node) for u in rest if u.as_node is not None],
            )
            assert staged.checkpoint_id is not None
            checkpoint_id = staged.checkpoint_id
        return checkpoint_id

    async def _as_input(self, update: Any, checkpoint_id: str | None) -> str:
        """``update_state(values, as_node="__input__")``, as LangGraph's: ``values`` saved as
        a run's input is at the head, not applied (``next`` is ``START``); an update as
        ``START``, or ``run(None)``, applies it. Not at an older checkpoint (LangGraph's
        would fork there)."""
        head = await self.load() or self.fresh()
        if checkpoint_id is not None and checkpoint_id != head.checkpoint_id:
            raise InvalidUpdateError(
                'update_state(as_node="__input__") saves an input at the head of the thread, '
                f"not at checkpoint {checkpoint_id!r}: fork there first"
            )
        assert self.cp is not None
        await self.graph.save_input(head, update, self.cp)
        assert head.checkpoint_id is not None
        return head.checkpoint_id

    async def _copy(self, update: dict[str, Any], checkpoint_id: str | None) -> str:
        """``update_state(None, as_node="__copy__")``, as LangGraph's: the thread as it was at
        ``checkpoint_id`` (the head by default) saved again, unchanged, as a ``rewind`` (its
        ``fork``) numbered one step past it; the step that was pending there runs again from
        it, all its tasks, their questions asking again."""
        if update:
            raise InvalidUpdateError(
                'update_state(as_node="__copy__") copies a checkpoint as it is: pass None '
                "as the update (update the copy with a second update_state)"
            )
        head = await self.load()
        if head is None:
            raise InvalidUpdateError(
                f"Cannot copy a non-existent checkpoint: thread {self.thread_id!r} has none"
            )
        checkpoint_id = checkpoint_id or head.checkpoint_id
        assert self.cp is not None and checkpoint_id is not None
        target = await self._rewound(head, checkpoint_id, copy=True)
        target.step += 1
        await save(
            self.cp, target, delta=None, source="rewind", metadata={"rewound_to": checkpoint_id}
        )
        assert target.checkpoint_id is not None
        return target.checkpoint_id


#: ``update_state``'s ``as_node`` that copies a checkpoint (LangGraph's name)
COPY: Final = "__copy__"
#: ``update_state``'s ``as_node`` that saves the update as a run's input (LangGraph's name)
INPUT: Final = "__input__"


def starts_thread(input: Any) -> bool:
    """Whether ``input`` is a ``Command`` that updates or goes somewhere: on a thread with no
    checkpoint it is the thread's input (with a ``resume`` or for a parent it is not)."""
    return (
        isinstance(input, Command)
        and (input.update is not None or bool(input.goto_list()))
        and input.resume is UNSET
        and input.graph is None
    )


def empty_command(input: Any) -> bool:
    """Whether ``input`` is a ``Command`` that carries nothing: no update, resume, goto or
    target graph (``Command()``)."""
    return (
        isinstance(input, Command)
        and input.update is None
        and input.resume is UNSET
        and input.graph is None
        and not input.goto_list()
    )


def inferred_as_node(head: Head) -> str | None:
    """The node an ``update_state`` without ``as_node`` counts as, as LangGraph infers it:
    the one node that ran last (``START`` on a thread with no checkpoint, or at an input's
    checkpoint, whose input the update replaces), so its edges decide again what is next;
    None while a step is part-way through (its tasks stay) or after a step of several."""
    if head.records:
        return None
    if head.seq < 0 or pending_input(head) is not None:
        return START
    ran: list[str] = head.metadata.get("ran") or []
    return ran[0] if len(ran) == 1 else None


async def update_state(
    cp: Checkpointer | None,
    graph: GraphCore,
    head: Head,
    update: dict[str, Any],
    as_node: str | None,
    *,
    rewound_to: str | None = None,
    steered_by: dict[str, str] | None = None,
    alongside: Sequence[tuple[dict[str, Any], str]] = (),
) -> Head:
    """The one ``update_state``, for the API (``GraphSession.update_state``) and for steering
    (``lowering``): ``update`` through the reducers, routed as ``as_node``'s output when
    given (``START``: from the start; ``END``: the thread's last word), saved as its own
    checkpoint (with a checkpointer). Returns the changed copy of ``head``, which the caller
    adopts; bad input raises and changes nothing. ``rewound_to``: ``head`` is the thread's
    past at that checkpoint (saved whole, as a fork); ``steered_by``: the metadata that
    names the steering command that made it (its correlation id and sender scope). The run
    that continues from the update passes the breakpoint of its first step (an edit at a
    stop, LangGraph's human-in-the-loop pattern), as any run that continues a thread does.
    ``alongside``: more ``(update, as_node)`` pairs in the same step, as the writes of nodes
    that ran together (a superstep of ``bulk_update_state``; ``as_node`` a node of the graph,
    as is ``as_node`` then): reduced together, routed from every one of them."""
    updates = [(update, as_node), *alongside]
    for _, node in updates:
        check_as_node(graph, node)
    updates = [(graph.schema.update_of(values), node) for values, node in updates]
    staged, delta = await stage_update(graph, head, updates)
    keys = sorted({key for values, _ in updates for key in values})
    meta: dict[str, Any] = {"as_node": as_node, "keys": keys}
    if alongside:
        meta["as_nodes"] = [node for _, node in updates]
    if rewound_to is not None:
        meta["rewound_to"] = rewound_to
    if steered_by is not None:
        meta.update(steered_by)
    if cp is not None:
        whole = staged.seq < 0 or rewound_to is not None
        ran = None if as_node is None else [] if as_node == END else [n for _, n in updates if n]
        await save(
            cp, staged, delta=None if whole else delta, source="update", metadata=meta, ran=ran
        )
    return staged


#: ``remaining_steps`` as a router of ``update_state(as_node=...)`` sees it (LangGraph's
#: value there, whatever the recursion limit)
UPDATE_REMAINING_STEPS = 2


def check_supersteps(
    graph: GraphCore, supersteps: Sequence[Sequence[StateUpdate]]
) -> list[list[StateUpdate]]:
    """``bulk_update_state``'s supersteps as lists, each update checked as far as it can be
    without the state (its ``as_node``, its keys and values): bad input saves nothing.
    LangGraph's ValueError for no supersteps or an empty one is an ``InvalidUpdateError``."""
    if isinstance(supersteps, (str, bytes, dict)) or not isinstance(supersteps, Sequence):
        raise InvalidUpdateError(
            "bulk_update_state takes a list of supersteps, each a list of StateUpdate, got "
            f"{type(supersteps).__name__}"
        )
    if not supersteps:
        raise InvalidUpdateError("bulk_update_state: no supersteps provided")
    steps: list[list[StateUpdate]] = []
    for index, step in enumerate(supersteps):
        if not isinstance(step, (list, tuple)) or not all(isinstance(u, StateUpdate) for u in step):
            raise InvalidUpdateError(
                f"bulk_update_state: superstep {index} is not a list of StateUpdate: "
                f"{shown_repr(step)}"
            )
        if not step:
            raise InvalidUpdateError(f"bulk_update_state: no updates provided in superstep {index}")
        for update in step:
            if len(step) > 1 and (update.as_node is None or update.as_node not in graph.nodes):
                raise InvalidUpdateError(
                    f"bulk_update_state: superstep {index} has {len(step)} updates, so each "
                    "names the node whose output it is (as_node, a node of the graph, not "
                    f"START, END, '__copy__' or '__input__'), got as_node={update.as_node!r}"
                )
            if update.as_node == INPUT:
                graph.schema.coerce_input(update.values)  # the input schema's keys
            elif update.as_node != COPY:
                check_as_node(graph, update.as_node)
                if update.values is not None:
                    graph.schema.check_update(
                        graph.schema.update_of(update.values), "update_state", "update_state value"
                    )
        steps.append(list(step))
    return steps


def check_as_node(graph: GraphCore, as_node: str | None) -> None:
    if as_node is not None and as_node not in (START, END) and as_node not in graph.nodes:
        raise InvalidUpdateError(  # LangGraph's error there
            f"update_state(as_node={as_node!r}): no such node (nodes: {', '.join(graph.nodes)}; "
            "START to route the update from the start, END to finish the thread)"
        )


async def stage_update(
    graph: GraphCore, head: Head, updates: Sequence[tuple[dict[str, Any], str | None]]
) -> tuple[Head, dict[str, Any]]:
    """``update`` applied through the reducers (and, with ``as_node``, routed as that node's
    output) to a copy of ``head``: (the changed copy, its deltas). One ``update_state`` for the
    API and for steering. ``head`` is never touched, so an update that the state schema, a
    reducer or a router refuses raises and changes nothing; a caller adopts the copy once it
    is saved. A reducer's or router's own error comes back as ``InvalidUpdateError`` naming it.
    """
    # (several updates are those of nodes that ran together, never END's or None's)
    as_node = updates[0][1]
    writes: dict[str, list[Any]] = {}
    for update, _ in updates:
        checked = graph.schema.check_update(update, "update_state", "update_state value")
        for key, value in checked.items():
            writes.setdefault(key, []).append(value)
    # END ends the step: what its finished tasks wrote stays (the values get_state showed),
    # as LangGraph's update_state(None, as_node=END) keeps it
    done = finished_tasks(graph, head) if as_node == END else []
    finished = [w for t in done for w in t.writes or ()]
    staged = head.staged([*writes, *(key for key, _ in finished)])
    delta: dict[str, Any] = graph.apply_writes(staged.values, finished) if finished else {}
    for key, values in writes.items():
        try:
            # two plain values of one key conflict, as two nodes' writes in one step
            written = graph.apply_writes(staged.values, [(key, value) for value in values])
            if key in delta:  # two deltas of one channel: save its whole value
                written[key] = Replaced(staged.values[key])
            delta.update(written)
        except InvalidUpdateError:
            raise
        except Exception as exc:
            raise graph.refused(key, "update", exc) from exc
    if as_node is not None:
        if as_node == END:
            # the step's unfinished tasks (and their questions) are dropped; the finished
            # ones are done, so their edges lead on, as LangGraph's (with none, the thread
            # has finished)
            ran: list[tuple[str, list[str | Send]]] = [(t.node, t.goto) for t in done]
            held: list[str] = []
        else:
            ran = [(node, []) for _, node in updates if node is not None]
            # what a spent join or deferral pulled waits still: no edge of as_node takes it
            held = [p.node for p in staged.frontier if p.held]
        # an update is no step of a run: its router sees what LangGraph's sees then
        view = graph.router_view(staged.values, UPDATE_REMAINING_STEPS)
        try:
            config = lambda i: router_context(staged, ran[i][0])  # noqa: E731
            staged.frontier = (
                await graph.route(ran, staged.barriers, view, held, config=config) if ran else []
            )
        except TinyAgentsError:
            raise
        except Exception as exc:
            nodes = " and ".join(repr(node) for _, node in updates)
            routed = (
                "the finished tasks' edges"
                if as_node == END
                else f"the update as node {nodes}'s output"
            )
            raise InvalidUpdateError(
                f"routing {routed} failed: {type(exc).__name__}: {exc}"
            ) from exc
        staged.step += 1
        staged.frontier_id = new_frontier_id()
        staged.records = {}
    elif not staged.frontier and not staged.records:
        # nothing pending: the update is a step of its own, as LangGraph numbers it (while
        # tasks are pending, their ids and what they saved hang on the step: it stays)
        staged.step += 1
    return staged, delta


def goto_problem(graph: GraphCore, goto: Any) -> str | None:
    """Why a steering redirect's ``goto`` cannot steer ``graph``, or None. ``END`` is allowed
    (the run finishes); an empty list is not: it would end the run without saying so."""
    if goto is None:
        return "a graph redirect needs 'goto' (node names, or END to finish the run)"
    targets = [goto] if isinstance(goto, str) else list(goto)
    if not targets:
        return "a graph redirect needs at least one node in 'goto' (or END to finish the run)"
    unknown = [t for t in targets if t != END and t not in graph.nodes]
    if unknown:
        return (
            f"redirect to unknown node(s) {unknown}: graph {graph.name!r} has "
            f"{', '.join(graph.nodes)} (and END)"
        )
    return None


def update_problem(graph: GraphCore, update: Any, as_node: Any) -> str | None:
    """Why a steering ``update_state`` can never be applied to ``graph``, whatever its state,
    or None: an ``as_node`` the graph does not have, a key its state does not have, a value
    its schema refuses. (A reducer or a router that refuses it depends on the state: that is
    found when it is applied.)"""
    try:
        check_as_node(graph, as_node)
        graph.schema.check_update(update, "update_state", "update_state value")
    except InvalidUpdateError as exc:
        return str(exc)
    return None


def finished_tasks(graph: GraphCore, head: Head) -> list[Task]:
    """The tasks of an unfinished step that already finished, in task order."""
    if not head.records:
        return []
    return [t for t in plan_tasks(graph, head) if t.writes is not None and not t.skipped]


def finished_writes(graph: GraphCore, head: Head) -> list[tuple[str, Any]]:
    """What the tasks of an unfinished step that already finished wrote, in task order."""
    return [w for t in finished_tasks(graph, head) for w in t.writes or ()]


def add_goto(graph: GraphCore, head: Head, goto: list[str | Send]) -> dict[str, Any]:
    """A run input's ``goto``, as LangGraph's: its targets join the pending tasks, in the
    same step (a finished one keeps its writes, a paused one waits for its answer); with
    nothing pending they are the next step. Appended, so the pending tasks keep their ids, and with
    them their writes, questions and answers. (A steering redirect replaces them: ``jump``.)
    Returns the deltas of the writes it applied."""
    if pending_input(head) is not None:
        # an input's checkpoint not applied yet (a replay of it): the goto replaces the input
        return jump(graph, head, goto)
    head.frontier = joined(head.frontier, goto)
    return {}


def jump(graph: GraphCore, head: Head, goto: list[str | Send]) -> dict[str, Any]:
    """Make ``goto`` the next superstep. Tasks of an unfinished step that already finished
    keep their writes (applied now, in task order); paused or unstarted ones are dropped.
    Returns the deltas of those writes."""
    writes = finished_writes(graph, head)
    delta = graph.apply_writes(head.values, writes) if writes else {}
    # a node named twice runs once; every Send is a task of its own (and unhashable)
    named = dict.fromkeys(g for g in goto if not isinstance(g, Send) and g != END)
    head.frontier = [Planned(node=g) for g in named] + [
        Planned.of(g) for g in goto if isinstance(g, Send)
    ]
    head.step += 1
    head.frontier_id = new_frontier_id()
    head.records = {}
    return delta


async def record_resume(
    cp: Checkpointer | None,
    head: Head,
    resume: list[WriteRecord],
    *,
    steered_by: str | None = None,
) -> None:
    """Persist answers (from ``map_resume``) before the tasks that get them run again.

    With ``steered_by`` (the ``steering_ref`` of the steering command that answers) the same
    writes record which command gave it, so a command handed over again after a crash is
    known as applied.
    """
    assert cp is not None  # interrupts exist only with a checkpointer
    writes = list(resume)
    if steered_by is not None:
        writes += [
            WriteRecord(task_id=w.task_id, kind="steered", key=steered_by, value=w.key)
            for w in resume
        ]
    # a question whose earlier answer was withdrawn (its schema refused it): this one stands
    writes += [
        withdrawal_write(w.task_id, w.key, withdrawn=False)
        for w in resume
        if w.task_id in head.records
        and w.key in head.records[w.task_id].withdrawn | head.records[w.task_id].dropped
    ]
    await cp.put_writes(head.thread_id, head.ns, head.frontier_id, writes)
    for w in writes:
        records = head.records.setdefault(w.task_id, TaskRecords())
        if w.kind == "steered":
            records.steered[w.key] = w.value
        elif w.kind == "withdrawn":
            records.withdrawn.discard(w.key)
            records.dropped.discard(w.key)
        else:
            records.resume[w.key] = w.value


def carry_records(graph: GraphCore, head: Head, *, past: bool = False) -> list[Any]:
    """The pending writes to copy when ``head`` moves to a new frontier id (a fork): what
    the step's finished tasks wrote (they do not run again on the copy) and the questions
    its paused tasks ask, with the answers to the questions each asked before them (a task
    paused on its second question is copied waiting on it). Answers given to the questions
    they ask are not copied: on the fork they ask again (as a fork of the past replays the
    steps after it). ``past``: the thread has gone on from ``head``, so a task that paused
    there and finished once answered finished on the other branch: the fork asks it again;
    so does a task that failed there and finished when run again. A step of the past that
    neither paused nor failed there ran through after it: none of its tasks had finished at
    that checkpoint, and the fork runs them all (as it runs a step of one task, whose
    result is no pending write).
    """
    writes: list[Any] = []
    kept: dict[str, TaskRecords] = {}
    if past and not any(rec.interrupts or rec.error is not None for rec in head.records.values()):
        head.records = kept
        return writes
    for tid, rec in head.records.items():
        carried = TaskRecords(interrupts=list(rec.interrupts))
        later = past and (rec.interrupts or rec.error is not None) and not rec.skipped
        if rec.writes is not None and not later:
            carried.writes, carried.goto, carried.skipped = rec.writes, rec.goto, rec.skipped
            carried.handled = rec.handled
            writes.append(
                result_write(
                    graph, tid, rec.writes, rec.goto, skipped=rec.skipped, handled=rec.handled
                )
            )
        elif rec.interrupts:
            writes.append(interrupt_write(tid, rec.interrupts))
            asking = {i.id for i in rec.interrupts}
            for iid, value in rec.resume.items():
                if iid not in asking:
                    carried.resume[iid] = value
                    writes.append(WriteRecord(task_id=tid, kind="resume", key=iid, value=value))
        else:
            continue
        kept[tid] = carried
    head.records = kept
    return writes


def _replays_in_place(head: Head) -> bool:
    """Whether a replay of ``head`` (the thread's head, a step part-way through) goes on from
    it, saving nothing (``GraphSession._replay_in_place``): an ``update`` or ``rewind``
    (LangGraph's ``fork``), for which LangGraph saves no ``fork``, whose tasks finished,
    paused on questions of their own (answered or not) or have not run. A step holding a
    sub-graph's question is replayed on a ``rewind`` checkpoint instead, which runs all its
    tasks again under new ids: its sub-graphs start afresh in new namespaces, asking from
    their first questions, as LangGraph's do there (its update gave the tasks new ids). So
    is a step holding a failed task or steering's marks (an answer steering gave, a
    cancelled task, an answer refused by its schema)."""
    if head.source not in ("update", "rewind"):
        return False
    return all(
        not r.steered
        and not r.skipped
        and r.error is None
        and not r.withdrawn
        and all(not i.ns for i in r.interrupts)
        for r in head.records.values()
    )


def _asks_afresh(head: Head) -> bool:
    """Whether replaying ``head`` (the thread's head, a step part-way through) is going on
    from it: an ``update`` or ``rewind`` (LangGraph's ``fork``) whose tasks only paused on
    questions of their own, none answered, nothing written. LangGraph saves no ``fork`` for
    a replay of its ``update`` or ``fork`` checkpoints, and runs their tasks again under the
    same ids: so does going on from the head, the paused tasks asking again (the same ids).
    Anything else the step holds (a write, an answer, a sub-graph's question) is dropped by
    a ``rewind`` checkpoint instead."""
    if head.source not in ("update", "rewind"):
        return False
    return all(
        r.writes is None
        and not r.goto
        and not r.resume
        and not r.steered
        and not r.skipped
        and r.error is None
        and not r.withdrawn
        and all(not i.ns for i in r.interrupts)
        for r in head.records.values()
    )
