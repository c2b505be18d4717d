"""``interrupt_before`` and a run that continues a thread: the same program on LangGraph and on
``tinyagents.graph``, compared (as in ``test_langgraph_ports.py``).

LangGraph stops before a node only when a channel changed since the thread was last
continued: a run given ``None`` or a ``Command`` marks every channel version as seen
(``versions_seen[INTERRUPT]``, in ``PregelLoop._first``), so ``should_interrupt`` passes the
first step it plans, wherever the thread stopped (after an ``interrupt_after``, at a node a
``goto`` or an ``update_state`` made next, at a checkpoint it replays or forked from); the
steps after that one stop as usual. New input changes channels, so a run given some stops
before its first node (``test_new_input_on_a_thread_with_a_checkpoint_stops_before_its_first_
node`` guards that). Ours passed only a stop it had marked itself (a breakpoint's checkpoint)
and stopped again everywhere else.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_kit import OURS, THEIRS, Log, abc_graph, cfg, pair, values

from tinyagents import Runtime
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.runs import RunStatus
from tinyagents.store.checkpoint import Checkpointer
from tinyagents.testkit import EventWaiter

Outcome = tuple[dict[str, Any], tuple[str, ...]]


async def both(ours: Any, theirs: Any, given: Any) -> tuple[Outcome, Outcome]:
    """Run ``given(g)`` (an input of either library) on thread "1" of both graphs:
    ((state, next) of LangGraph's, of ours)."""
    expected = values(await theirs.ainvoke(given(THEIRS), cfg()))
    theirs_next = (await theirs.aget_state(cfg())).next
    result = await ours.run(given(OURS), thread_id="1")
    assert result.error is None, result.error
    return (expected, theirs_next), (result.state, (await ours.get_state("1")).next)


def start(g: Any) -> Any:
    return {"log": []}


def none(g: Any) -> Any:
    return None


@pytest.mark.parametrize(
    ("given", "log"),
    [(none, ["a", "b", "c"]), (lambda g: g.Command(update={"log": ["u"]}), ["a", "u", "b", "c"])],
    ids=["none", "command-update"],
)
async def test_a_run_continued_after_interrupt_after_passes_the_next_nodes_interrupt_before(
    checkpointer: Checkpointer, given: Any, log: list[str]
) -> None:
    ours, theirs = pair(abc_graph, checkpointer, interrupt_after=["a"], interrupt_before=["b"])
    expected, got = await both(ours, theirs, start)
    assert got == expected == ({"log": ["a"]}, ("b",))
    expected, got = await both(ours, theirs, given)
    assert got == expected == ({"log": log}, ())


async def test_a_goto_passes_its_targets_interrupt_before(checkpointer: Checkpointer) -> None:
    # a finished thread sent back to b: LangGraph runs b and c (the thread's next steps are
    # the goto's, nothing else pending there, so both libraries run the same tasks)
    ours, theirs = pair(abc_graph, checkpointer, interrupt_before=["b"])
    await both(ours, theirs, start)
    expected, got = await both(ours, theirs, none)
    assert got == expected == ({"log": ["a", "b", "c"]}, ())
    expected, got = await both(ours, theirs, lambda g: g.Command(goto="b"))
    assert got == expected == ({"log": ["a", "b", "c", "b", "c"]}, ())


async def test_a_replay_passes_the_interrupt_before_of_the_step_it_replays(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's test_checkpoint_recovery-style time travel, with breakpoints: the replay of
    # the step that runs a passes a's breakpoint, and stops before b as the first run did
    ours, theirs = pair(abc_graph, checkpointer, interrupt_before=["a", "b"])
    for given in (start, none, none):
        expected, got = await both(ours, theirs, given)
    assert got == expected == ({"log": ["a", "b", "c"]}, ())
    theirs_at_a = [s async for s in theirs.aget_state_history(cfg()) if s.next == ("a",)][-1]
    ours_at_a = [h for h in await ours.history("1") if h.next == ("a",)][-1]
    expected = values(await theirs.ainvoke(None, theirs_at_a.config))
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_at_a.checkpoint_id)
    assert result.status == "interrupted", result.error
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next == ("b",)
    assert result.state == expected == {"log": ["a"]}


async def test_a_past_changed_by_update_state_runs_on_past_the_breakpoint_there(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(abc_graph, checkpointer, interrupt_before=["b"])
    for given in (start, none):
        await both(ours, theirs, given)
    theirs_at_b = [s async for s in theirs.aget_state_history(cfg()) if s.next == ("b",)][-1]
    ours_at_b = [h for h in await ours.history("1") if h.next == ("b",)][-1]
    await theirs.aupdate_state(theirs_at_b.config, {"log": ["f"]})
    await ours.update_state("1", {"log": ["f"]}, checkpoint_id=ours_at_b.checkpoint_id)
    expected, got = await both(ours, theirs, none)
    assert got == expected == ({"log": ["a", "f", "b", "c"]}, ())


async def test_update_state_as_node_on_a_finished_thread_runs_on_past_the_breakpoint(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(abc_graph, checkpointer, interrupt_before=["b"])
    for given in (start, none):
        await both(ours, theirs, given)
    await theirs.aupdate_state(cfg(), {"log": ["u"]}, as_node="a")
    await ours.update_state("1", {"log": ["u"]}, as_node="a")
    expected, got = await both(ours, theirs, none)
    assert got == expected == ({"log": ["a", "b", "c", "u", "b", "c"]}, ())


async def test_a_fork_of_a_breakpoint_runs_on_past_it(checkpointer: Checkpointer) -> None:
    # LangGraph has no fork(); a thread copied at a checkpoint and continued with None is a
    # resuming run there, as the replay above: it passes the first step's breakpoint
    ours = abc_graph(OURS).compile(checkpointer=checkpointer, interrupt_before=["b"])
    assert (await ours.run({"log": []}, thread_id="1")).status == "interrupted"
    assert (await ours.run(None, thread_id="1")).status == "completed"
    at_b = [h for h in await ours.history("1") if h.next == ("b",)][-1]
    fork = await ours.fork("1", at_b.checkpoint_id)
    result = await ours.run(None, thread_id=fork)
    assert result.status == "completed", result.error
    assert result.state == {"log": ["a", "b", "c"]}


def sub_then_z(g: Any) -> Any:
    """START → sub (s1 → s2, stopping after s1 and before s2) → z."""
    sub = g.StateGraph(Log).add_node("s1", lambda s: {"log": ["s1"]})
    sub.add_node("s2", lambda s: {"log": ["s2"]}).add_edge(g.START, "s1").add_edge("s1", "s2")
    graph = g.StateGraph(Log).add_node(
        "sub", sub.compile(interrupt_after=["s1"], interrupt_before=["s2"])
    )
    graph.add_node("z", lambda s: {"log": ["z"]})
    return graph.add_edge(g.START, "sub").add_edge("sub", "z")


async def test_a_subgraph_continued_after_interrupt_after_passes_its_next_interrupt_before(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph hands a resuming run's sub-graphs CONFIG_KEY_RESUMING: a sub-graph that goes
    # on from its own checkpoint is continued too
    ours, theirs = pair(sub_then_z, checkpointer)
    expected, got = await both(ours, theirs, start)
    assert got == expected == ({"log": []}, ("sub",))
    expected, got = await both(ours, theirs, none)
    assert got == expected == ({"log": ["s1", "s2", "z"]}, ())


async def test_a_run_redirected_at_a_breakpoint_passes_its_targets_interrupt_before(
    checkpointer: Checkpointer,
) -> None:
    """A runtime run stopped before b, redirected to c by steering (which has its own
    breakpoint) and continued: the redirect lands before the continued run's first step,
    which passes c's breakpoint as a ``Command(goto="c")`` does in LangGraph."""
    ours = abc_graph(OURS).compile(checkpointer=checkpointer, interrupt_before=["b", "c"])
    async with Runtime(testing=True) as rt:
        first = await ours.run({"log": []}, thread_id="1", runtime=rt)
        assert first.status == "interrupted"
        assert (await ours.get_state("1")).next == ("b",)
        run_id = (await ours.get_state("1")).metadata["run_id"]
        redirect = SteeringCommand(
            target=SteeringTarget.agent_run(run_id),
            actor=SteeringActor.test(),
            kind=SteeringKind.REDIRECT,
            payload={"goto": "c"},
        )
        assert (await rt.submit(redirect)).status == "accepted"
        result = await ours.run(None, thread_id="1", runtime=rt)
        assert result.status == "completed", result.error
        assert result.state == {"log": ["a", "c"]}


async def test_a_run_waiting_on_an_interrupt_redirected_passes_its_targets_interrupt_before(
    checkpointer: Checkpointer, rt: Runtime, waiter: EventWaiter
) -> None:
    """A runtime run that waits on ``interrupt()`` (``wait_on_interrupt``) and is woken by a
    redirect goes on as the thread continued with ``Command(goto=...)`` would (and as the
    test above, where the run had ended): it passes the goto target's breakpoint."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [OURS.interrupt("ok?")]}

    graph = abc_graph(OURS).add_node("ask", ask).add_edge(OURS.START, "ask").add_edge("ask", "b")
    ours = graph.compile(checkpointer=checkpointer, interrupt_before=["b", "c"])
    handle = await rt.start_graph(ours, {"log": []}, thread_id="1")
    await waiter.event("graph.interrupt", handle.run_id)
    redirect = SteeringCommand(
        target=SteeringTarget.agent_run(handle.run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.REDIRECT,
        payload={"goto": "c"},
    )
    assert (await rt.submit(redirect)).status == "accepted"
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == {"log": ["a", "c"]}
