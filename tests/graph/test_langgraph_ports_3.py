"""Ports of LangGraph's tests, third round (``libs/langgraph/tests/test_pregel.py`` and
``test_pregel_async.py``, and the replay code of ``langgraph/pregel/_loop.py``): the same
program on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.
Each test's comment names the LangGraph test or code it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

from typing import Any

from langgraph_kit import OURS, THEIRS, Log, cfg, pair, values

from tinyagents.store.checkpoint import Checkpointer


def asks(g: Any) -> Any:
    """START → ask → END, ``ask`` logging the answer to its one question."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [g.interrupt("?")]}

    return g.StateGraph(Log).add_node("ask", ask).add_edge(g.START, "ask").add_edge("ask", g.END)


async def steps(ours: Any, theirs: Any) -> tuple[list[Any], list[Any]]:
    """Each library's history as (source, step, next), newest first (ours, LangGraph's);
    our ``rewind`` is LangGraph's ``fork``."""
    theirs_h = [
        (s.metadata["source"], s.metadata["step"], s.next)
        async for s in theirs.aget_state_history(cfg())
    ]
    ours_h = [
        ("fork" if h.source == "rewind" else h.source, h.step, h.next)
        for h in await ours.history("1")
    ]
    return ours_h, theirs_h


# -- replaying the head ----------------------------------------------------------------------


async def test_a_replay_of_a_paused_update_head_saves_no_checkpoint(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: PregelLoop._first saves a "fork" when it time-travels, "Skip for
    # update_state forks (source=update/fork) since they already have their own fork
    # checkpoint". Ours saved a "rewind" there when the update's step was paused on a
    # question, so the steps after it were numbered one higher than LangGraph's.
    ours, theirs = pair(asks, checkpointer)
    c = await theirs.aupdate_state(cfg(), {"log": ["u"]})
    await ours.update_state("1", {"log": ["u"]})
    head = (await ours.history("1"))[0].checkpoint_id
    for _ in range(2):  # the first replay pauses on the question; the second replays that
        out = await theirs.ainvoke(None, c)
        result = await ours.run(None, thread_id="1", checkpoint_id=head)
        assert result.status == "interrupted"
        assert result.state == values(out) == {"log": ["u"]}
        assert [i.id for i in result.interrupts] != []
        ours_h, theirs_h = await steps(ours, theirs)
        assert ours_h == theirs_h == [("update", 0, ("ask",))]
    out = await theirs.ainvoke(THEIRS.Command(resume="r"), cfg())
    result = await ours.run(OURS.Command(resume="r"), thread_id="1")
    assert result.state == out == {"log": ["u", "r"]}
    ours_h, theirs_h = await steps(ours, theirs)
    assert ours_h == theirs_h == [("loop", 1, ()), ("update", 0, ("ask",))]


async def test_a_replay_of_a_paused_replay_saves_no_second_checkpoint(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: PregelLoop._first (as above), for a head that is itself a replay's "fork"
    ours, theirs = pair(asks, checkpointer)
    await theirs.ainvoke({"log": ["in"]}, cfg())
    await ours.run({"log": ["in"]}, thread_id="1")
    # the head, paused in "ask": its replay saves a fork, then pauses in that step again
    before = await theirs.aget_state(cfg())
    ours_before = (await ours.history("1"))[0].checkpoint_id
    await theirs.ainvoke(None, before.config)
    await ours.run(None, thread_id="1", checkpoint_id=ours_before)
    fork = await theirs.aget_state(cfg())
    assert fork.metadata["source"] == "fork"
    head = (await ours.history("1"))[0]
    assert head.source == "rewind"
    head = head.checkpoint_id
    out = await theirs.ainvoke(None, fork.config)
    result = await ours.run(None, thread_id="1", checkpoint_id=head)
    assert result.state == values(out) == {"log": ["in"]}
    ours_h, theirs_h = await steps(ours, theirs)
    assert ours_h == theirs_h
    out = await theirs.ainvoke(THEIRS.Command(resume="r"), cfg())
    result = await ours.run(OURS.Command(resume="r"), thread_id="1")
    assert result.state == out == {"log": ["in", "r"]}
    ours_h, theirs_h = await steps(ours, theirs)
    assert ours_h == theirs_h
