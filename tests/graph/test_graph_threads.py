"""Thread API of a compiled graph: state, history, update_state, fork, rewind, single writer."""

from __future__ import annotations

import asyncio
import operator
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

import pytest
from graphkit import LogState, chain, logger

from tinyagents.errors import (
    ArgumentError,
    ConfigurationError,
    GraphError,
    InterruptError,
    InvalidRouteError,
    InvalidUpdateError,
    StoreError,
    ThreadBusy,
    UnknownTargetError,
)
from tinyagents.graph import END, START, Command, Send, StateGraph, interrupt
from tinyagents.store.checkpoint import Checkpointer, CheckpointRecord, MemoryCheckpointer


async def test_get_state_and_history(checkpointer: Checkpointer) -> None:
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    empty = await graph.get_state("t")
    assert empty.checkpoint_id is None and empty.values == {}
    result = await graph.run({"x": 1}, thread_id="t")
    state = await graph.get_state("t")
    assert state.values == {"x": 1, "log": ["a", "b"]} and state.next == ()
    assert state.checkpoint_id == result.checkpoint_id
    history = await graph.history("t")
    assert [h.source for h in history] == ["loop", "loop", "loop", "input"]
    assert [h.next for h in history] == [(), ("b",), ("a",), ("__start__",)]
    assert [h.step for h in history] == [2, 1, 0, -1]
    assert history[0].written == ("log",) and len(history[0].tasks) == 1
    assert history[0].parent_id == history[1].checkpoint_id
    middle = await graph.get_state("t", history[1].checkpoint_id)
    assert middle.values == {"x": 1, "log": ["a"]} and middle.next == ("b",)
    with pytest.raises(UnknownTargetError):
        await graph.get_state("t", "no-such-checkpoint")


async def test_history_before_and_filter_as_langgraphs_get_state_history(
    checkpointer: Checkpointer,
) -> None:
    """LangGraph's ``get_state_history(config, before=, filter=, limit=)``: the checkpoints
    older than ``before``, those whose metadata holds every item of ``filter``, and ``limit``
    counted after both."""
    graph = chain("a", "b", "c").compile(checkpointer=checkpointer)
    await graph.run({"x": 1}, thread_id="t")
    everything = await graph.history("t")
    assert [h.step for h in everything] == [3, 2, 1, 0, -1]
    ids = [h.checkpoint_id for h in everything]

    older = await graph.history("t", before=ids[1])
    assert [h.checkpoint_id for h in older] == ids[2:]
    assert [h.step for h in await graph.history("t", before=ids[1], limit=2)] == [1, 0]
    assert await graph.history("t", before=ids[-1]) == []

    loops = await graph.history("t", filter={"source": "loop"})
    assert [h.step for h in loops] == [3, 2, 1, 0]
    assert [h.step for h in await graph.history("t", filter={"source": "loop", "step": 1})] == [1]
    assert await graph.history("t", filter={"source": "update"}) == []
    assert await graph.history("t", filter={"no_such_key": None}) == everything
    assert [h.step for h in await graph.history("t", filter={"source": "loop"}, limit=1)] == [3]
    assert [h.step for h in await graph.history("t", before=ids[0], filter={"step": 0})] == [0]

    with pytest.raises(UnknownTargetError, match="no checkpoint 'nope'"):
        await graph.history("t", before="nope")
    # typed, as history(limit=) is: an ArgumentError (a ConfigurationError and ValueError),
    # not the bare TypeError these were
    with pytest.raises(ArgumentError, match=r"history\(filter=\.\.\.\) takes a dict"):
        await graph.history("t", filter=[("source", "loop")])  # type: ignore[arg-type]
    # a namespace or a checkpoint id of another type listed nothing (or, for before=, said
    # the thread has no such checkpoint), as if the thread had no history there
    with pytest.raises(ArgumentError, match=r"history\(ns=\.\.\.\) takes a namespace"):
        await graph.history("t", ns=5)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match=r"history\(before=\.\.\.\) takes a checkpoint id"):
        await graph.history("t", before=3)  # type: ignore[arg-type]


class ListsCounted(MemoryCheckpointer):
    """Counts the records ``list`` reads for the thread API."""

    def __init__(self) -> None:
        super().__init__()
        self.listed = 0

    async def list(
        self, thread_id: str, ns: str = "", *, limit: int | None = None
    ) -> list[CheckpointRecord]:
        records = await super().list(thread_id, ns, limit=limit)
        self.listed += len(records)
        return records


async def test_a_page_of_history_before_a_checkpoint_reads_that_page_only() -> None:
    """``history(before=..., limit=...)`` listed every checkpoint of the thread (each one's
    body read) to find ``before`` and cut a page after it: paging back through a long
    thread cost its whole length per page. It reads the page alone now."""
    checkpointer = ListsCounted()
    graph = chain("a", "b", "c").compile(checkpointer=checkpointer)
    for n in range(10):
        await graph.run({"x": n}, thread_id="t")
    ids = [h.checkpoint_id for h in await graph.history("t")]
    assert len(ids) == 50
    checkpointer.listed = 0
    page = await graph.history("t", before=ids[10], limit=3)
    assert [h.checkpoint_id for h in page] == ids[11:14]
    assert checkpointer.listed == 0
    with pytest.raises(UnknownTargetError, match="no checkpoint 'nope'"):
        await graph.history("t", before="nope", limit=3)


async def test_a_checkpointer_without_its_own_list_before_pages_through_list() -> None:
    """``Checkpointer.list_before`` has a default, read off ``list``, for checkpointers of
    others written before it."""
    checkpointer = MemoryCheckpointer()
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    await graph.run({"x": 1}, thread_id="t")
    ids = [h.checkpoint_id for h in await graph.history("t")]
    older = await Checkpointer.list_before(checkpointer, "t", "", ids[0], limit=2)
    assert older is not None and [r.checkpoint_id for r in older] == ids[1:3]
    assert await Checkpointer.list_before(checkpointer, "t", "", ids[-1]) == []
    assert await Checkpointer.list_before(checkpointer, "t", "", "nope") is None


class FailsAfterInput(MemoryCheckpointer):
    """A store that fails once, on the write after an input's own checkpoint: a run stopped
    between saving its input and its first step."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = True

    async def put(self, record: CheckpointRecord) -> None:
        if self.armed and record.source == "loop":
            self.armed = False
            raise StoreError("the store went away")
        await super().put(record)


async def test_a_history_limit_is_a_whole_number_not_below_zero(
    checkpointer: Checkpointer,
) -> None:
    # limit=-1 was a slice: all checkpoints but the oldest in memory, every one in SQLite
    # (LIMIT -1); "2" and 1.5 were a TypeError from the slice
    graph = chain("a").compile(checkpointer=checkpointer)
    await graph.run({"x": 1}, thread_id="t")
    assert await graph.history("t", limit=0) == []
    assert len(await graph.history("t", limit=2)) == 2
    for bad in (-1, "2", 1.5, True):
        with pytest.raises(
            ValueError, match=r"history\(limit=\.\.\.\) must be None or a whole"
        ) as exc:
            await graph.history("t", limit=bad)  # type: ignore[arg-type]
        assert isinstance(exc.value, ConfigurationError)  # and a ValueError, as it was


async def test_an_input_saved_before_a_failure_is_applied_by_the_next_run() -> None:
    cp = FailsAfterInput()
    graph = chain("a", "b").compile(checkpointer=cp)
    failed = await graph.run({"x": 1}, thread_id="t")  # a failed run, as a later save's
    assert failed.status == "failed" and isinstance(failed.error, StoreError)
    waiting = await graph.get_state("t")
    assert waiting.next == ("__start__",) and waiting.values == {"log": []}
    assert [t.name for t in waiting.tasks] == ["__start__"]
    result = await graph.run(None, thread_id="t")  # the input is not lost: it runs now
    assert result.status == "completed"
    assert result.state == {"x": 1, "log": ["a", "b"]}
    assert [h.step for h in await graph.history("t")] == [2, 1, 0, -1]


async def test_a_refused_input_saves_nothing(checkpointer: Checkpointer) -> None:
    def route(state: Any) -> str:
        raise ValueError("no route")

    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge("a", END)
    compiled = graph.add_conditional_edges(START, route, ["a"]).compile(checkpointer=checkpointer)
    with pytest.raises(ValueError, match="no route"):
        await compiled.run({}, thread_id="t")
    assert await compiled.history("t") == []


async def test_update_state_goes_through_reducers_as_its_own_checkpoint(
    checkpointer: Checkpointer,
) -> None:
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    await graph.run({"x": 1}, thread_id="t")
    checkpoint_id = await graph.update_state("t", {"log": ["edited"], "x": 5})
    state = await graph.get_state("t")
    assert state.checkpoint_id == checkpoint_id and state.source == "update"
    assert state.values == {"x": 5, "log": ["a", "b", "edited"]}  # appended, not replaced
    with pytest.raises(InvalidUpdateError, match="unknown state key"):
        await graph.update_state("t", {"nope": 1})
    assert (await graph.get_state("t")).checkpoint_id == checkpoint_id


async def test_update_state_of_the_wrong_kind_is_an_invalid_update_error(
    checkpointer: Checkpointer,
) -> None:
    # update_state("t", 5) or a list of (key, value) pairs was an AttributeError ("'int'
    # object has no attribute 'keys'") from inside the schema; LangGraph's is an
    # InvalidUpdateError ("Expected dict, got 5")
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    result = await graph.run({"x": 1}, thread_id="t")
    for bad in (5, "x", [("x", 2)], ["log"]):
        with pytest.raises(InvalidUpdateError, match=r"update_state takes a dict of state"):
            await graph.update_state("t", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidUpdateError, match=r"got int"):
        await graph.update_state("new", 5)  # type: ignore[arg-type]
    assert (await graph.get_state("t")).checkpoint_id == result.checkpoint_id
    assert await graph.history("new") == []


@dataclass
class Counted:
    x: int = 0
    log: Annotated[list[str], operator.add] = field(default_factory=list)


async def test_update_state_takes_an_instance_of_the_state_class(
    checkpointer: Checkpointer,
) -> None:
    # as LangGraph's update_state reads one (and as run input and a node's return are read)
    graph = StateGraph(Counted).add_node("a", lambda s: {"log": ["a"]})
    compiled = graph.add_edge(START, "a").compile(checkpointer=checkpointer)
    await compiled.run({"x": 1}, thread_id="t")
    await compiled.update_state("t", Counted(x=7, log=["edited"]))  # type: ignore[arg-type]
    assert (await compiled.get_state("t")).values == {"x": 7, "log": ["a", "edited"]}


async def test_update_state_as_node_continues_from_that_node(checkpointer: Checkpointer) -> None:
    graph = chain("a", "b", "c").compile(checkpointer=checkpointer)
    await graph.update_state("t", {"log": ["typed-in"]}, as_node="a")
    assert (await graph.get_state("t")).next == ("b",)
    result = await graph.run(None, thread_id="t")
    assert result.state["log"] == ["typed-in", "b", "c"]
    with pytest.raises(GraphError, match="no such node"):
        await graph.update_state("t", {"x": 1}, as_node="ghost")


async def test_update_state_keeps_pending_interrupts(checkpointer: Checkpointer) -> None:
    def ask(state: Any) -> dict[str, Any]:
        return {"log": [f"{interrupt('go?')}@{state['x']}"]}

    graph = StateGraph(LogState).add_node("ask", ask).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=checkpointer)
    first = await compiled.run({"x": 1}, thread_id="t")
    await compiled.update_state("t", {"x": 2})
    state = await compiled.get_state("t")
    assert [i.id for i in state.interrupts] == [first.interrupts[0].id]
    result = await compiled.run(Command(resume={first.interrupts[0].id: "yes"}), thread_id="t")
    assert result.state["log"] == ["yes@2"]


async def test_fork_copies_the_thread_at_a_checkpoint(checkpointer: Checkpointer) -> None:
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    await graph.run({"x": 1}, thread_id="t")
    after_a = (await graph.history("t"))[1]
    fork = await graph.fork("t", after_a.checkpoint_id)
    assert fork != "t"
    state = await graph.get_state(fork)
    assert state.values == {"x": 1, "log": ["a"]} and state.next == ("b",)
    assert state.metadata["forked_from"] == {
        "thread_id": "t",
        "checkpoint_id": after_a.checkpoint_id,
    }
    await graph.update_state(fork, {"x": 99})
    result = await graph.run(None, thread_id=fork)
    assert result.state == {"x": 99, "log": ["a", "b"]}
    assert (await graph.get_state("t")).values == {"x": 1, "log": ["a", "b"]}  # untouched
    with pytest.raises(UnknownTargetError):
        await graph.fork("t", "missing")


async def test_a_fork_of_a_paused_step_keeps_what_its_finished_tasks_wrote(
    checkpointer: Checkpointer,
) -> None:
    # the fork copied the paused task's question but not its finished siblings' writes: on
    # the fork they ran again (their side effects twice), half a copy and half a replay
    calls: list[str] = []

    def work(arg: int) -> dict[str, Any]:
        calls.append(f"w{arg}")
        if arg == 1:
            return {"log": [f"w1:{interrupt('ok?')}"]}
        return {"log": [f"w{arg}"]}

    graph = StateGraph(LogState).add_node("w", work).add_node("fin", logger("fin"))
    graph.add_conditional_edges(START, lambda s: [Send("w", i) for i in range(3)])
    compiled = graph.add_edge("w", "fin").add_edge("fin", END).compile(checkpointer=checkpointer)
    await compiled.run({}, thread_id="t")
    paused = await compiled.get_state("t")
    fork = await compiled.fork("t", paused.checkpoint_id)
    copied = await compiled.get_state(fork)
    assert [(t.result, [i.value for i in t.interrupts]) for t in copied.tasks] == [
        (t.result, [i.value for i in t.interrupts]) for t in paused.tasks
    ]
    assert copied.values == paused.values and copied.next == ("w",)
    calls.clear()
    result = await compiled.run(Command(resume="yes"), thread_id=fork)
    assert calls == ["w1"]  # only the paused task runs again, as on the original thread
    assert result.state["log"] == ["w0", "w1:yes", "w2", "fin"]


async def test_forking_one_checkpoint_twice_makes_two_threads(checkpointer: Checkpointer) -> None:
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    await graph.run({"x": 1}, thread_id="t")
    after_a = (await graph.history("t"))[1].checkpoint_id
    first, second = await graph.fork("t", after_a), await graph.fork("t", after_a)
    assert len({"t", first, second}) == 3
    assert (await graph.run(None, thread_id=second)).state["log"] == ["a", "b"]


async def test_fork_into_a_named_thread_and_never_into_an_existing_one(
    checkpointer: Checkpointer,
) -> None:
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    await graph.run({"x": 1}, thread_id="t")
    after_a = (await graph.history("t"))[1].checkpoint_id
    assert await graph.fork("t", after_a, new_thread_id="t-retry") == "t-retry"
    assert (await graph.get_state("t-retry")).next == ("b",)
    with pytest.raises(GraphError, match="exists already"):
        await graph.fork("t", after_a, new_thread_id="t-retry")
    with pytest.raises(GraphError, match="exists already"):
        await graph.fork("t", after_a, new_thread_id="t")


async def test_fork_keeps_pending_interrupts(checkpointer: Checkpointer) -> None:
    def ask(state: Any) -> dict[str, Any]:
        return {"log": [interrupt("ok?")]}

    graph = StateGraph(LogState).add_node("ask", ask).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=checkpointer)
    paused = await compiled.run({}, thread_id="t")
    fork = await compiled.fork("t", paused.checkpoint_id or "")
    [pending] = (await compiled.get_state(fork)).interrupts
    assert pending.id == paused.interrupts[0].id  # ids are stable across the fork
    done = await compiled.run(Command(resume={pending.id: "fork"}), thread_id=fork)
    assert done.state["log"] == ["fork"]
    assert (await compiled.get_state("t")).interrupts == tuple(paused.interrupts)


async def test_fork_of_a_task_on_its_second_question_waits_on_that_question(
    checkpointer: Checkpointer,
) -> None:
    # the fork showed the second question pending but dropped the first one's answer, so
    # answering it ran the node into its first question again and the answer was lost
    def ask(state: Any) -> dict[str, Any]:
        return {"log": [f"{interrupt('first?')}+{interrupt('second?')}"]}

    graph = StateGraph(LogState).add_node("ask", ask).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=checkpointer)
    await compiled.run({}, thread_id="t")
    paused = await compiled.run(Command(resume="one"), thread_id="t")
    assert [i.value for i in paused.interrupts] == ["second?"]
    fork = await compiled.fork("t", paused.checkpoint_id or "")
    [pending] = (await compiled.get_state(fork)).interrupts
    assert (pending.id, pending.value) == (paused.interrupts[0].id, "second?")
    done = await compiled.run(Command(resume={pending.id: "two"}), thread_id=fork)
    assert done.status == "completed"
    assert done.state["log"] == ["one+two"]


async def test_a_fork_of_a_step_answered_since_asks_again(checkpointer: Checkpointer) -> None:
    # the step paused on ask beside a sibling that finished; ask was answered and the thread
    # went on. A fork of the paused step copied ask's result, made with the other branch's
    # answer: nothing was pending on the fork, and the answer was reused there
    calls: list[str] = []

    def ask(state: Any) -> dict[str, Any]:
        calls.append("ask")
        return {"log": [f"ask:{interrupt('ok?')}"]}

    def other(state: Any) -> dict[str, Any]:
        calls.append("other")
        return {"log": ["other"]}

    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("ask", ask)
    graph.add_node("other", other).add_edge(START, "a").add_edge("a", "ask")
    graph.add_edge("a", "other").add_edge("ask", END).add_edge("other", END)
    compiled = graph.compile(checkpointer=checkpointer)
    first = await compiled.run({}, thread_id="t")
    (question,) = first.interrupts
    answered = await compiled.run(Command(resume="yes"), thread_id="t")
    assert answered.state["log"] == ["a", "ask:yes", "other"]
    fork = await compiled.fork("t", first.checkpoint_id or "")
    copied = await compiled.get_state(fork)
    assert copied.next == ("ask",)  # other finished before the pause: kept, not run again
    assert [(i.id, i.value) for i in copied.interrupts] == [(question.id, "ok?")]
    calls.clear()
    done = await compiled.run(Command(resume="no"), thread_id=fork)
    assert done.state["log"] == ["a", "ask:no", "other"] and calls == ["ask"]
    # the original thread keeps its own answer
    assert (await compiled.get_state("t")).values["log"] == ["a", "ask:yes", "other"]


async def test_rewind_to_an_older_checkpoint_keeps_history_linear(
    checkpointer: Checkpointer,
) -> None:
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    await graph.run({"x": 1}, thread_id="t")
    start = (await graph.history("t"))[-1]
    result = await graph.run(None, thread_id="t", checkpoint_id=start.checkpoint_id)
    assert result.state["log"] == ["a", "b"]  # replayed from the input checkpoint
    history = await graph.history("t")
    # the rewind holds the input again (next: START), and its first step applies it
    assert [h.source for h in history][:4] == ["loop", "loop", "loop", "rewind"]
    assert history[3].next == ("__start__",)
    ids = [h.checkpoint_id for h in history]
    assert all(h.parent_id == ids[i + 1] for i, h in enumerate(history[:-1]))


async def test_bad_input_at_an_older_checkpoint_changes_nothing(
    checkpointer: Checkpointer,
) -> None:
    # run(bad, checkpoint_id=<older>) saved the rewind to that checkpoint, then raised: the
    # thread's head had moved back although the call was refused
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    done = await graph.run({"x": 1}, thread_id="t")
    older = (await graph.history("t"))[1].checkpoint_id
    refused: list[tuple[Any, type[Exception]]] = [
        ({"nope": 1}, InvalidUpdateError),
        (Command(goto="zz"), InvalidRouteError),
        (Command(update={"nope": 1}), InvalidUpdateError),
        (Command(resume="yes"), InterruptError),
    ]
    for bad, error in refused:
        with pytest.raises(error):
            await graph.run(bad, thread_id="t", checkpoint_id=older)
        assert (await graph.get_state("t")).checkpoint_id == done.checkpoint_id
    assert len(await graph.history("t")) == 4
    replayed = await graph.run(None, thread_id="t", checkpoint_id=older)  # still rewinds
    assert replayed.status == "completed" and (await graph.history("t"))[0].source == "loop"


async def test_second_concurrent_run_on_a_thread_is_thread_busy(checkpointer: Checkpointer) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(state: Any) -> dict[str, Any]:
        entered.set()
        await release.wait()
        return {"log": ["slow"]}

    graph = StateGraph(LogState).add_node("slow", slow).add_edge(START, "slow")
    compiled = graph.add_edge("slow", END).compile(checkpointer=checkpointer)
    async with asyncio.TaskGroup() as group:
        first = group.create_task(compiled.run({}, thread_id="t"))
        await entered.wait()
        with pytest.raises(ThreadBusy):
            await compiled.run({}, thread_id="t")
        with pytest.raises(ThreadBusy):
            await compiled.update_state("t", {"x": 1})
        other = await chain("a").compile(checkpointer=checkpointer).run({}, thread_id="other")
        assert other.status == "completed"  # other threads are not blocked
        release.set()
    assert first.result().state["log"] == ["slow"]
    assert len(await compiled.history("t")) == 3  # one run (input, 2 steps), no fork
    assert (await compiled.run(None, thread_id="t")).status == "completed"  # lease released


async def test_thread_lease_is_released_when_a_run_fails(checkpointer: Checkpointer) -> None:
    def boom(state: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    graph = StateGraph(LogState).add_node("boom", boom).add_edge(START, "boom")
    compiled = graph.add_edge("boom", END).compile(checkpointer=checkpointer)
    assert (await compiled.run({}, thread_id="t")).status == "failed"
    assert (await compiled.run({}, thread_id="t")).status == "failed"  # not ThreadBusy


class Chat(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], operator.add]


async def test_long_chat_thread_stores_deltas_not_copies(make_checkpointer: Any) -> None:
    cp = await make_checkpointer(snapshot_every=50)
    graph = StateGraph(Chat).add_node(
        "reply", lambda s: {"messages": [{"role": "ai", "text": "ok"}]}
    )
    compiled = graph.add_edge(START, "reply").add_edge("reply", END).compile(checkpointer=cp)
    for turn in range(200):
        await compiled.run({"messages": [{"role": "user", "text": f"m{turn}"}]}, thread_id="t")
    records = await cp.list("t")
    assert len(records) == 600  # a turn: its input's checkpoint, then two steps
    deltas = [r for r in records if not r.snapshot]
    full = await cp.chain("t")
    assert len(full) <= 50  # loading replays at most one snapshot interval
    # a delta holds only the message(s) that step appended
    for record in await cp.chain("t"):
        if not record.snapshot:  # (an input's own checkpoint writes nothing)
            assert len(record.values.get("messages", [])) == (record.source != "input")
    stored = sum(len(r.values.get("messages", [])) for r in await _all(cp, "t"))
    snapshots = len(records) - len(deltas)
    assert stored <= 400 + snapshots * 400  # deltas once + bounded snapshots
    assert stored < 400 * 400 / 10  # far from one copy of the list per checkpoint
    state = await compiled.get_state("t")
    assert len(state.values["messages"]) == 400


async def _all(cp: Checkpointer, thread_id: str) -> list[Any]:
    out = []
    for info in await cp.list(thread_id):
        record = await cp.get(thread_id, info.checkpoint_id)
        assert record is not None
        out.append(record)
    return out


async def test_unknown_node_in_history_and_mermaid_are_independent(
    checkpointer: Checkpointer,
) -> None:
    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a")
    compiled = graph.add_edge("a", END).compile(checkpointer=checkpointer)
    assert "n_a" in compiled.to_mermaid()
    assert await compiled.history("nothing") == []


class Other(TypedDict, total=False):
    y: str


async def test_a_thread_pending_on_a_node_the_graph_lacks_is_a_clear_graph_error(
    checkpointer: Checkpointer,
) -> None:
    # a thread written by another graph (or before a node was renamed) with a task of "q"
    # pending: get_state raised a bare KeyError('q'), run(None) failed with it
    def ask(state: Any) -> dict[str, Any]:
        return {"log": [interrupt("go?")]}

    first = StateGraph(LogState).add_node("a", logger("a")).add_node("q", ask)
    first_run = first.add_edge(START, "a").add_edge("a", "q").compile(checkpointer=checkpointer)
    paused = await first_run.run({"x": 1}, thread_id="t")
    other = StateGraph(Other).add_node("b", lambda s: {"y": "b"}).add_edge(START, "b")
    second = other.compile(checkpointer=checkpointer)
    message = r"thread 't' has a pending task of node 'q', which graph 'graph' does not have"
    with pytest.raises(GraphError, match=message):
        await second.get_state("t")
    with pytest.raises(GraphError, match=message):
        await second.run(None, thread_id="t")
    with pytest.raises(GraphError, match=message):
        await second.update_state("t", {"y": "u"})
    assert (await first_run.get_state("t")).checkpoint_id == paused.checkpoint_id
