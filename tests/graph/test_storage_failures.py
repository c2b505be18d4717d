"""A checkpointer that fails during a run: reported the same way wherever it fails.

A store that failed at a step's checkpoint ended the run ``failed`` (``result.error`` the
``StoreError``, what was saved kept, ``run(None)`` going on from it), but one that failed
before the first step ran — reading the thread, saving the input, applying it as step 0,
saving a ``Command`` — raised out of ``run`` and ``rt.start_graph`` instead, even where the
input was saved already (and, for a new thread, without its generated id). Each is now a
``failed`` run; only taking the thread (``ThreadBusy``) raises, since no run began.
(LangGraph raises a checkpointer's error wherever it comes; its runs have no ``failed``
status to report it with.)
"""

from __future__ import annotations

from typing import Any

import pytest
from graphkit import chain

from tinyagents import Runtime
from tinyagents.errors import StoreError, ThreadBusy
from tinyagents.graph import Command, interrupt
from tinyagents.runs import RunStatus
from tinyagents.store.checkpoint import CheckpointRecord, MemoryCheckpointer, WriteRecord


class FailsOnce(MemoryCheckpointer):
    """Fails the ``nth`` call of ``method`` (``put``, ``chain``, ``put_writes``), once."""

    def __init__(self, method: str = "", nth: int = 1) -> None:
        super().__init__()
        self.method, self.left = method, nth

    def _maybe_fail(self, method: str) -> None:
        if method == self.method:
            self.left -= 1
            if self.left == 0:
                raise StoreError(f"the store went away ({method})")

    async def put(self, record: CheckpointRecord) -> None:
        self._maybe_fail("put")
        await super().put(record)

    async def chain(self, thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> Any:
        self._maybe_fail("chain")
        return await super().chain(thread_id, ns, checkpoint_id)

    async def put_writes(
        self, thread_id: str, ns: str, frontier_id: str, writes: list[WriteRecord]
    ) -> None:
        self._maybe_fail("put_writes")
        await super().put_writes(thread_id, ns, frontier_id, writes)


#: which put fails, and what the thread holds afterwards: the input's own checkpoint (nothing
#: saved), the input applied as step 0 (the input saved), the step that ran a (after it)
PUTS = {"input": 1, "first step": 2, "later step": 3}


async def run(graph: Any, given: Any, managed: bool, **kw: Any) -> Any:
    if not managed:
        return await graph.run(given, **kw)
    async with Runtime(testing=True) as rt:
        return await graph.run(given, runtime=rt, **kw)


@pytest.mark.parametrize("managed", [False, True], ids=["plain", "runtime"])
@pytest.mark.parametrize("where", list(PUTS))
async def test_a_failed_save_ends_the_run_failed_wherever_it_comes(
    where: str, managed: bool
) -> None:
    cp = FailsOnce("put", PUTS[where])
    graph = chain("a", "b").compile(checkpointer=cp)
    result = await run(graph, {"x": 1}, managed)
    assert result.status == "failed"
    assert isinstance(result.error, StoreError), result.error
    assert "the store went away" in str(result.error)
    with pytest.raises(StoreError):
        result.raise_for_status()
    thread = result.thread_id  # a new thread: its generated id, to go on with
    assert thread is not None
    if where == "input":
        assert await graph.history(thread) == []  # nothing saved: send the input again
        result = await run(graph, {"x": 1}, managed, thread_id=thread)
    else:
        result = await run(graph, None, managed, thread_id=thread)  # what was saved goes on
    assert result.status == "completed", result.error
    assert result.state == {"x": 1, "log": ["a", "b"]}


@pytest.mark.parametrize("where", list(PUTS))
async def test_a_started_run_reports_a_failed_save_in_its_result(where: str) -> None:
    # rt.start_graph raised for the first two and gave a handle for the third
    graph = chain("a", "b").compile(checkpointer=FailsOnce("put", PUTS[where]))
    async with Runtime(testing=True) as rt:
        handle = await rt.start_graph(graph, {"x": 1}, thread_id="t")
        result = await handle.result()
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.startswith("StoreError: the store went away")


async def test_a_thread_that_cannot_be_read_fails_the_run() -> None:
    cp = FailsOnce()
    graph = chain("a", "b").compile(checkpointer=cp)
    assert (await graph.run({"x": 1}, thread_id="t")).status == "completed"
    cp.method, cp.left = "chain", 1
    result = await graph.run(None, thread_id="t")
    assert result.status == "failed" and isinstance(result.error, StoreError)
    assert (await graph.run(None, thread_id="t")).status == "completed"


async def test_an_answer_that_cannot_be_saved_fails_the_run() -> None:
    def ask(state: Any) -> dict[str, Any]:
        return {"log": [interrupt("ok?")]}

    cp = FailsOnce()
    graph = chain("a").add_node("ask", ask).add_edge("a", "ask").compile(checkpointer=cp)
    asked = await graph.run({"x": 1}, thread_id="t")
    assert asked.status == "interrupted"
    cp.method, cp.left = "put_writes", 1
    result = await graph.run(Command(resume="yes"), thread_id="t")
    assert result.status == "failed" and isinstance(result.error, StoreError)
    assert (await graph.get_state("t")).interrupts  # the question is still asked
    result = await graph.run(Command(resume="yes"), thread_id="t")
    assert result.status == "completed" and result.state["log"] == ["a", "yes"]


@pytest.mark.parametrize("where", ["first step", "later step"])
async def test_a_stream_raises_a_failed_save_wherever_it_comes(where: str) -> None:
    # (already so) a stream raises its run's error after the items before it, as LangGraph's
    graph = chain("a", "b").compile(checkpointer=FailsOnce("put", PUTS[where]))
    with pytest.raises(StoreError, match="the store went away"):
        async for _ in graph.stream({"x": 1}, thread_id="t"):
            pass


async def test_a_thread_another_run_holds_still_raises() -> None:
    # taking the thread is not part of a run: a second writer is refused, nothing begins
    cp = MemoryCheckpointer()
    compiled = chain("a").compile(checkpointer=cp)
    await cp.acquire("t", "someone else")
    with pytest.raises(ThreadBusy):
        await compiled.run({"x": 1}, thread_id="t")
