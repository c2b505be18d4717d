"""``Command(resume=...)`` sent to a thread where no ``interrupt()`` waits for an answer,
compared with LangGraph where both take it.

LangGraph treats such a resume as a continuation: in its strict mode
(``CONFIG_KEY_STRICT_RESUME``, ``PregelLoop._first``) it refuses a resume *map* naming no
pending interrupt (``UnknownInterruptError``, reason ``not_pending``) but takes a single value
"because it resumes a graph paused at a static breakpoint" (``UnknownInterruptError``'s
docstring); outside strict mode it ignores what matches nothing. Ours takes a single value
at a stop with steps to run (a breakpoint, a failed step) and continues as ``run(None)``,
and refuses, with an ``InterruptError`` that says why and what to send instead, a resume
that could only be lost: one naming interrupts that are not pending, one on a thread that
has finished (LangGraph returns the state unchanged) and one on a thread with no checkpoint
(LangGraph runs the graph from START with no input);
``test_resume_with_no_pending_interrupt`` compares those two refusals with LangGraph.
"""

from __future__ import annotations

import pytest
from langgraph_kit import OURS, THEIRS, abc_graph, cfg, pair, values

from tinyagents import Runtime
from tinyagents.errors import InterruptError
from tinyagents.graph import Command
from tinyagents.store.checkpoint import Checkpointer


@pytest.mark.parametrize("stop", ["interrupt_before", "interrupt_after"])
@pytest.mark.parametrize("managed", [False, True], ids=["plain", "runtime"])
async def test_a_resume_value_at_a_breakpoint_continues_past_it(
    checkpointer: Checkpointer, stop: str, managed: bool
) -> None:
    ours, theirs = pair(abc_graph, checkpointer, **{stop: ["b"]})
    async with Runtime(testing=True) as rt:
        runtime = rt if managed else None
        expected = values(await theirs.ainvoke({"log": []}, cfg()))
        result = await ours.run({"log": []}, thread_id="1", runtime=runtime)
        assert result.status == "interrupted" and result.state == expected
        expected = values(await theirs.ainvoke(THEIRS.Command(resume="go on"), cfg()))
        assert (await theirs.aget_state(cfg())).next == ()
        result = await ours.run(OURS.Command(resume="go on"), thread_id="1", runtime=runtime)
        assert result.status == "completed", result.error
        assert result.state == expected == {"log": ["a", "b", "c"]}


async def test_a_resume_map_naming_no_pending_interrupt_is_refused_at_a_breakpoint(
    checkpointer: Checkpointer,
) -> None:
    # (already so) LangGraph's strict mode refuses it as "Unknown or already-consumed
    # interrupt"; an answer meant for a question nobody asks is not dropped in silence
    ours = abc_graph(OURS).compile(checkpointer=checkpointer, interrupt_before=["b"])
    await ours.run({"log": []}, thread_id="1")
    head = (await ours.get_state("1")).checkpoint_id
    with pytest.raises(
        InterruptError, match="no pending interrupt with id i-0000000000000000; pending: none"
    ):
        await ours.run(Command(resume={"i-0000000000000000": "x"}), thread_id="1")
    assert (await ours.get_state("1")).checkpoint_id == head


async def test_a_resume_on_a_finished_thread_says_it_has_finished(
    checkpointer: Checkpointer,
) -> None:
    ours = abc_graph(OURS).compile(checkpointer=checkpointer)
    await ours.run({"log": []}, thread_id="1")
    head = (await ours.get_state("1")).checkpoint_id
    with pytest.raises(InterruptError) as raised:
        await ours.run(Command(resume="x"), thread_id="1")
    assert str(raised.value) == (
        "Command(resume=...): thread '1' has no pending interrupt to answer, and nothing to "
        "run: it has finished; give it new input to run it again"
    )
    assert (await ours.get_state("1")).checkpoint_id == head


async def test_a_resume_on_a_thread_with_no_checkpoint_says_to_start_it(
    checkpointer: Checkpointer,
) -> None:
    ours = abc_graph(OURS).compile(checkpointer=checkpointer)
    with pytest.raises(InterruptError) as raised:
        await ours.run(Command(resume="x"), thread_id="new")
    assert str(raised.value) == (
        "Command(resume=...): thread 'new' has no checkpoint, so no pending interrupt to answer; "
        "start it with an input"
    )
    assert await ours.history("new") == []


async def test_a_resume_at_an_older_checkpoint_says_its_step_runs_again(
    checkpointer: Checkpointer,
) -> None:
    # a replay runs that step again and asks its questions again: an answer given with the
    # rewind could only be lost (docs/graph.md, "Running")
    ours = abc_graph(OURS).compile(checkpointer=checkpointer, interrupt_before=["b"])
    await ours.run({"log": []}, thread_id="1")
    await ours.run(None, thread_id="1")
    at_b = [h for h in await ours.history("1") if h.next == ("b",)][-1]
    head = (await ours.get_state("1")).checkpoint_id
    with pytest.raises(InterruptError, match="no pending interrupt to answer at checkpoint"):
        await ours.run(Command(resume="x"), thread_id="1", checkpoint_id=at_b.checkpoint_id)
    assert (await ours.get_state("1")).checkpoint_id == head
