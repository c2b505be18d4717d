"""Graph ids (threads, checkpoints, frontiers, lineages, forks, runs) come from ``_clock``:
deterministic under ``use_ids(SequentialIds())``, never repeated by a forked process, and
checkpoint ids sort in their thread's order."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from graphkit import LogState, chain

from tinyagents import Runtime
from tinyagents.graph import END, START, Command, StateGraph, interrupt
from tinyagents.store.checkpoint import CheckpointRecord, MemoryCheckpointer
from tinyagents.testkit import FakeClock, SequentialIds, use_clock, use_ids


def _ids(records: list[CheckpointRecord]) -> list[tuple[Any, ...]]:
    return [
        (r.thread_id, r.checkpoint_id, r.parent_id, r.frontier_id, r.lineage, r.metadata)
        for r in records
    ]


async def _scenario() -> list[Any]:
    """A runtime-driven graph with a checkpointer, an interrupt, a resume and a fork."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [f"{interrupt('go?')}"]}

    graph = StateGraph(LogState).add_node("ask", ask).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=MemoryCheckpointer())
    cp = compiled.checkpointer
    assert cp is not None
    async with Runtime() as rt:
        paused = await compiled.run({"x": 1}, runtime=rt)
        thread = paused.thread_id
        assert thread is not None
        (pending,) = paused.interrupts
        done = await compiled.run(Command(resume={pending.id: "yes"}), thread_id=thread, runtime=rt)
        first = (await cp.list(thread))[-1].checkpoint_id
        fork = await compiled.fork(thread, first)
        records = await cp.list(thread) + await cp.list(fork)
    run_id = records[0].metadata["run_id"]
    return [run_id, thread, pending.id, pending.task_id, done.checkpoint_id, fork, _ids(records)]


async def test_the_same_graph_run_twice_under_sequential_ids_makes_the_same_ids() -> None:
    runs = []
    for _ in range(2):
        with use_ids(SequentialIds()), use_clock(FakeClock()):
            runs.append(await _scenario())
    assert runs[0] == runs[1]
    run_id, thread, *_, fork, _records = runs[0]
    assert (run_id, thread, fork) == ("g-0001", "th-0001", "th-0001~fork-0001")
    assert {r[1] for r in runs[0][-1]} >= {"ck-0001", "ck-0002"}


def _child_ids() -> list[str]:
    """Ids one small graph run hands out (thread, frontiers, lineage, checkpoints)."""

    async def go() -> list[str]:
        graph = chain("a", "b").compile(checkpointer=MemoryCheckpointer())
        result = await graph.run({"x": 1})
        assert graph.checkpointer is not None and result.thread_id is not None
        records = await graph.checkpointer.list(result.thread_id)
        return [result.thread_id] + [
            i for r in records for i in (r.checkpoint_id, r.frontier_id, r.lineage)
        ]

    return asyncio.run(go())


def _random_part(id_: str) -> str:
    return id_.rsplit("-", 1)[1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_make_the_graph_ids_its_parent_will() -> None:
    _child_ids()  # the default source now holds the parent's next ids
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its ids and leave at once
        os.close(read)
        os.write(write, " ".join(_child_ids()).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    parent = _child_ids()
    assert len(child) == len(parent) > 4
    # the random parts: an ordered id's time part differs anyway
    assert not {_random_part(i) for i in child} & {_random_part(i) for i in parent}


async def test_checkpoint_ids_sort_in_their_threads_order() -> None:
    cp = MemoryCheckpointer()
    graph = chain("a", "b", "c").compile(checkpointer=cp)
    for x in range(100):  # 5 checkpoints a run: more than one batch of random bits
        await graph.run({"x": x}, thread_id="t")
    newest_first = [r.checkpoint_id for r in await cp.list("t")]
    assert len(newest_first) == 500
    assert newest_first == sorted(newest_first, reverse=True)
