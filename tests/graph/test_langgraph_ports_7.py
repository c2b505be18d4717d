"""Ports of LangGraph's tests, seventh round (``libs/langgraph/tests/test_time_travel.py``,
``test_pregel.py``, ``test_pregel_async.py`` and ``test_large_cases.py``): the same program
on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``. Each
test's comment names the LangGraph test it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

import asyncio
import operator
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import pytest
from langgraph_kit import (
    OURS,
    THEIRS,
    Results,
    Sightings,
    Value,
    cfg,
    lg_errors,
    lg_graph,
    lg_memory,
    lg_types,
    newest_with_next,
    pair,
    shape,
)
from pydantic import BaseModel, ConfigDict, Field

from tinyagents.errors import (
    GraphError,
    NodeCancelledError,
    NodeTimeoutError,
    UnknownTargetError,
)
from tinyagents.graph import RetryPolicy as OursRetryPolicy
from tinyagents.graph import add_messages as ours_add_messages
from tinyagents.graph import entrypoint
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer

lg_func = pytest.importorskip("langgraph.func")

if TYPE_CHECKING:  # the names LangGraph reads in the annotations (strings here)
    from langchain_core.runnables import RunnableConfig
    from langgraph.types import StreamWriter


async def run_both(ours: Any, theirs: Any, value: Any, thread: str = "1") -> Any:
    """``value`` (an input, None or a ``Command``) on both; LangGraph's output returned, ours
    checked equal to it (without LangGraph's ``__interrupt__``), and so are the questions
    asked."""
    theirs_value = THEIRS.Command(resume=value.resume) if isinstance(value, OURS.Command) else value
    out = await theirs.ainvoke(theirs_value, cfg(thread))
    result = await ours.run(value, thread_id=thread)
    assert result.state == {k: v for k, v in out.items() if not k.startswith("__")}
    assert [i.value for i in result.interrupts] == [i.value for i in out.get("__interrupt__", [])]
    return out


async def go_back(ours: Any, theirs: Any, how: str, ours_at: str, theirs_at: Any) -> Any:
    """A replay (``how == "replay"``) or a fork (an update at that checkpoint, then a run) of
    the checkpoint on both: LangGraph's output returned, ours checked equal to it."""
    if how == "fork":
        theirs_at = await theirs.aupdate_state(theirs_at, {"results": ["forked"]})
        ours_at = await ours.update_state("1", {"results": ["forked"]}, checkpoint_id=ours_at)
    out = await theirs.ainvoke(None, theirs_at)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_at)
    assert result.state == {k: v for k, v in out.items() if not k.startswith("__")}
    assert [i.value for i in result.interrupts] == [i.value for i in out.get("__interrupt__", [])]
    return out


# -- a persistent sub-graph that asks, taken back with its parent (test_time_travel.py) ----


def asking_sub_graph(g: Any, seen: Sightings) -> Any:
    """parent_node -> sub_node, a ``checkpointer=True`` sub-graph whose two steps each ask."""

    def ask(name: str) -> Any:
        def node(state: Any) -> dict[str, Any]:
            seen.of(g).append((name, dict(state)))
            answer = g.interrupt(f"question_{name}")
            return {"value": [f"{name}:{answer}"]}

        return node

    sub = (
        g.StateGraph(Value)
        .add_node("step_a", ask("a"))
        .add_node("step_b", ask("b"))
        .add_edge(g.START, "step_a")
        .add_edge("step_a", "step_b")
    )
    return (
        g.StateGraph(Results)
        .add_node("parent_node", lambda state: {"results": ["p"]})
        .add_node("sub_node", sub.compile(checkpointer=True))
        .add_edge(g.START, "parent_node")
        .add_edge("parent_node", "sub_node")
    )


@pytest.mark.parametrize("how", ["replay", "fork"])
async def test_a_persistent_sub_graph_that_asks_is_taken_back_to_its_state_before_the_call(
    checkpointer: Checkpointer, how: str
) -> None:
    # LangGraph: test_time_travel.py::test_stateful_subgraph_retains_state_on_parent_replay
    # and test_stateful_subgraph_retains_state_on_parent_fork
    seen = Sightings()
    ours, theirs = pair(lambda g: asking_sub_graph(g, seen), checkpointer)
    for n in ("1", "2"):
        await run_both(ours, theirs, {"results": []})
        await run_both(ours, theirs, OURS.Command(resume=f"a{n}"))
        out = await run_both(ours, theirs, OURS.Command(resume=f"b{n}"))
        assert "__interrupt__" not in out
    # each step asks twice (once to ask, once answered); the second call goes on from the
    # state the first left
    assert seen.ours == seen.theirs
    assert seen.ours[4:] == [
        ("a", {"value": ["a:a1", "b:b1"]}),
        ("a", {"value": ["a:a1", "b:b1"]}),
        ("b", {"value": ["a:a1", "b:b1", "a:a2"]}),
        ("b", {"value": ["a:a1", "b:b1", "a:a2"]}),
    ]
    ours_at, theirs_at = await newest_with_next(ours, theirs, ("sub_node",))
    seen.clear()
    out = await go_back(ours, theirs, how, ours_at, theirs_at)
    # the replay (or fork) of the second call sees what the first call left, not the second
    assert [i.value for i in out["__interrupt__"]] == ["question_a"]
    assert seen.ours == seen.theirs == [("a", {"value": ["a:a1", "b:b1"]})]
    # answered, it goes on from there, as in the first run
    seen.clear()
    await run_both(ours, theirs, OURS.Command(resume="a3"))
    out = await run_both(ours, theirs, OURS.Command(resume="b3"))
    forked = ["forked"] if how == "fork" else []
    assert out == {"results": ["p", "p", *forked]}
    assert seen.ours == seen.theirs
    assert seen.ours[-1] == ("b", {"value": ["a:a1", "b:b1", "a:a3"]})


# -- a replay through a per-call sub-graph branches the history (test_time_travel.py) ------


class Parent(TypedDict):
    value: Annotated[list[str], operator.add]
    sub_value: Annotated[list[str], operator.add]


class Sub(TypedDict):
    sub_value: Annotated[list[str], operator.add]


def through_sub_graph(g: Any, calls: list[int]) -> Any:
    def sub_step(state: Any) -> dict[str, Any]:
        calls.append(1)
        return {"sub_value": [f"sub{len(calls)}"]}

    sub = g.StateGraph(Sub).add_node("sub_step", sub_step).add_edge(g.START, "sub_step")
    return (
        g.StateGraph(Parent)
        .add_node("parent_start", lambda state: {"value": ["p_start"]})
        .add_node("sub_graph", sub.compile())
        .add_node("parent_end", lambda state: {"value": ["p_end"]})
        .add_edge(g.START, "parent_start")
        .add_edge("parent_start", "sub_graph")
        .add_edge("sub_graph", "parent_end")
    )


@pytest.mark.parametrize("how", ["replay", "fork"])
async def test_a_replay_through_a_sub_graph_runs_it_again_and_keeps_the_old_checkpoints(
    checkpointer: Checkpointer, how: str
) -> None:
    # LangGraph: test_time_travel.py::test_replay_creates_branch_in_subgraph and
    # test_fork_creates_branch_in_subgraph
    ours_calls: list[int] = []
    theirs_calls: list[int] = []
    ours = through_sub_graph(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = through_sub_graph(THEIRS, theirs_calls).compile(checkpointer=lg_memory.InMemorySaver())
    out = await run_both(ours, theirs, {"value": [], "sub_value": []})
    assert out == {"value": ["p_start", "p_end"], "sub_value": ["sub1"]}
    ours_old = [h.checkpoint_id for h in await ours.history("1")]
    theirs_old = {
        s.config["configurable"]["checkpoint_id"] async for s in theirs.aget_state_history(cfg())
    }
    ours_at, theirs_at = await newest_with_next(ours, theirs, ("sub_graph",))
    if how == "fork":
        theirs_at = await theirs.aupdate_state(theirs_at, {"value": ["forked"]})
        ours_at = await ours.update_state("1", {"value": ["forked"]}, checkpoint_id=ours_at)
    out = await theirs.ainvoke(None, theirs_at)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_at)
    assert result.raise_for_status().state == out
    forked = ["forked"] if how == "fork" else []
    assert out == {"value": ["p_start", *forked, "p_end"], "sub_value": ["sub2"]}
    assert len(ours_calls) == len(theirs_calls) == 2
    # the old checkpoints are all still there, the new ones on top; the head is the new tip
    theirs_new = {
        s.config["configurable"]["checkpoint_id"] async for s in theirs.aget_state_history(cfg())
    }
    assert theirs_old < theirs_new
    ours_new = [h.checkpoint_id for h in await ours.history("1")]
    assert ours_new[-len(ours_old) :] == ours_old
    assert len(ours_new) - len(ours_old) == len(theirs_new) - len(theirs_old)
    head = await ours.get_state("1")
    assert head.checkpoint_id == ours_new[0]
    assert head.values == (await theirs.aget_state(cfg())).values == out


# -- time travel to a sub-graph's own checkpoint (test_time_travel.py) ---------------------


def executor_graph(g: Any, called: list[str]) -> Any:
    """START -> executor, a ``checkpointer=True`` sub-graph: step_a -> ask_1 -> ask_2."""

    def step_a(state: Any) -> dict[str, Any]:
        called.append("step_a")
        return {"value": ["step_a_done"]}

    def ask(name: str) -> Any:
        def node(state: Any) -> dict[str, Any]:
            called.append(name)
            answer = g.interrupt(f"{name}?")
            return {"value": [f"{name}:{answer}"]}

        return node

    executor = (
        g.StateGraph(Value)
        .add_node("step_a", step_a)
        .add_node("ask_1", ask("ask_1"))
        .add_node("ask_2", ask("ask_2"))
        .add_edge(g.START, "step_a")
        .add_edge("step_a", "ask_1")
        .add_edge("ask_1", "ask_2")
    )
    return (
        g.StateGraph(Value)
        .add_node("executor", executor.compile(checkpointer=True))
        .add_edge(g.START, "executor")
    )


async def test_time_travel_to_a_sub_graph_checkpoint_is_not_offered(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_subgraph_time_travel_to_first_interrupt (and
    # test_subgraph_time_travel_to_second_interrupt, _resume_from_first_interrupt,
    # _resume_from_second_interrupt, _checkpoint_pattern, test_subgraph_replay_from_subgraph_
    # checkpoint, the test_3_levels_deep_* cases): LangGraph's invoke(None, sub_config), with
    # a config get_state(subgraphs=True) gives for a sub-graph, replays the parent from the
    # sub-graph there (step_a does not run again, ask_1 asks again), and update_state of it
    # forks there. Ours takes a root checkpoint only (docs/graph.md, "What it does not do":
    # time travel to a sub-graph's checkpoint): the same point is the parent's checkpoint
    # the sub-graph ran from, which runs the sub-graph's call again from its start.
    ours_called: list[str] = []
    theirs_called: list[str] = []
    ours = executor_graph(OURS, ours_called).compile(checkpointer=checkpointer)
    theirs = executor_graph(THEIRS, theirs_called).compile(checkpointer=lg_memory.InMemorySaver())
    await run_both(ours, theirs, {"value": []})
    ours_sub = (await ours.get_state("1", subgraphs=True)).tasks[0].state
    theirs_sub = (await theirs.aget_state(cfg(), subgraphs=True)).tasks[0].state
    assert ours_sub.ns == theirs_sub.config["configurable"]["checkpoint_ns"] == "executor"
    assert ours_sub.values == theirs_sub.values == {"value": ["step_a_done"]}
    await run_both(ours, theirs, OURS.Command(resume="answer_1"))
    await run_both(ours, theirs, OURS.Command(resume="answer_2"))
    theirs_called.clear()
    out = await theirs.ainvoke(None, theirs_sub.config)
    assert [i.value for i in out["__interrupt__"]] == ["ask_1?"]
    assert theirs_called == ["ask_1"]
    fork = await theirs.aupdate_state(theirs_sub.config, {"value": ["forked"]})
    theirs_called.clear()
    out = await theirs.ainvoke(None, fork)
    assert [i.value for i in out["__interrupt__"]] == ["ask_1?"]
    assert theirs_called == ["ask_1"]
    # ours: a sub-graph's checkpoint id is none of the thread's (root) checkpoints
    head = (await ours.get_state("1")).checkpoint_id
    with pytest.raises(UnknownTargetError):
        await ours.run(None, thread_id="1", checkpoint_id=ours_sub.checkpoint_id)
    with pytest.raises(GraphError):
        await ours.update_state(
            "1", {"value": ["forked"]}, ns=ours_sub.ns, checkpoint_id=ours_sub.checkpoint_id
        )
    assert (await ours.get_state("1")).checkpoint_id == head
    # the parent's checkpoint it ran from is the point to go back to: its call runs again
    # from the state the sub-graph had before it (none), so step_a runs again
    root = ours_sub.metadata["parents"][""]
    ours_called.clear()
    result = await ours.run(None, thread_id="1", checkpoint_id=root)
    assert [i.value for i in result.interrupts] == ["ask_1?"]
    assert ours_called == ["step_a", "ask_1"]


# -- the functional API (test_pregel.py, test_pregel_async.py) ------------------------------


def a_generator(inputs: Any, previous: Any = None) -> Any:
    yield "a"
    yield "b"


async def an_async_generator(inputs: Any) -> Any:
    yield "a"
    yield "b"


@pytest.mark.parametrize("func", [a_generator, an_async_generator])
def test_an_entrypoint_over_a_generator_function_is_refused(func: Any) -> None:
    # LangGraph: test_pregel.py::test_entrypoint_from_sync_generator and
    # test_pregel_async.py::test_entrypoint_from_async_generator. Ours took it, and its run
    # returned the generator object unrun (and failed to checkpoint it with a checkpointer).
    with pytest.raises(NotImplementedError, match="Generators are not supported"):
        lg_func.entrypoint()(func)
    with pytest.raises(NotImplementedError, match="Generators are not supported"):
        entrypoint()(func)
    with pytest.raises(NotImplementedError, match="Generators are not supported"):
        entrypoint(checkpointer=MemoryCheckpointer())(func)


def writing_entrypoint(mod: Any, is_async: bool) -> Any:
    """An entrypoint and a task that take LangGraph's ``writer`` and ``config`` by name."""
    if is_async:

        @mod.task
        async def note(value: Any, writer: StreamWriter, config: RunnableConfig) -> Any:
            writer({"task": value, "thread": config["configurable"]["thread_id"]})
            return value

        @mod.entrypoint(checkpointer=lg_memory.InMemorySaver() if mod is lg_func else None)
        async def flow(inputs: Any, writer: StreamWriter, *, config: RunnableConfig) -> Any:
            writer({"entry": inputs, "thread": config["configurable"]["thread_id"]})
            return [await note(1), await note(2)]

        return flow

    @mod.task
    def sync_note(value: Any, writer: StreamWriter, config: RunnableConfig) -> Any:
        writer({"task": value, "thread": config["configurable"]["thread_id"]})
        return value

    @mod.entrypoint(checkpointer=lg_memory.InMemorySaver() if mod is lg_func else None)
    def sync_flow(inputs: Any, writer: StreamWriter, *, config: RunnableConfig) -> Any:
        writer({"entry": inputs, "thread": config["configurable"]["thread_id"]})
        return [sync_note(1).result(), sync_note(2).result()]

    return sync_flow


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
async def test_an_entrypoint_and_its_tasks_get_the_writer_and_the_config_by_name(
    checkpointer: Checkpointer, is_async: bool
) -> None:
    # LangGraph: test_pregel_async.py::test_overriding_injectable_args_with_async_task (and
    # test_pregel.py::test_overriding_injectable_args_with_tasks), without the store (not
    # offered): LangGraph fills in an entrypoint's and a task's parameters named ``writer``
    # and ``config`` (its StreamWriter and RunnableConfig), as it does a node's. Ours called
    # them without those arguments (a TypeError).
    theirs = writing_entrypoint(lg_func, is_async)
    ours = writing_entrypoint(__import__("tinyagents.graph", fromlist=["task"]), is_async)
    ours.checkpointer = checkpointer
    modes = ["custom", "updates"]
    expected = [
        ("custom", {"entry": "in", "thread": "1"}),
        ("custom", {"task": 1, "thread": "1"}),
        ("updates", {"note" if is_async else "sync_note": 1}),
        ("custom", {"task": 2, "thread": "1"}),
        ("updates", {"note" if is_async else "sync_note": 2}),
        ("updates", {"flow" if is_async else "sync_flow": [1, 2]}),
    ]
    assert [c async for c in theirs.astream("in", cfg(), stream_mode=modes)] == expected
    assert [c async for c in ours.stream("in", thread_id="1", mode=modes)] == expected


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
async def test_a_writer_or_config_given_to_a_task_is_passed_as_given(is_async: bool) -> None:
    # LangGraph: test_pregel_async.py::test_overriding_injectable_args_with_async_task
    # (without the store): an argument given for an injected parameter wins
    seen: list[Any] = []
    for mod in (lg_func, __import__("tinyagents.graph", fromlist=["task"])):
        if is_async:

            @mod.task
            async def foo(writer: StreamWriter, value: Any, config: RunnableConfig) -> None:
                seen.append((writer, value, config))

            @mod.entrypoint()
            async def main(inputs: Any) -> str:
                await foo(writer=None, value=None, config=None)
                await foo(writer="hello", value="hello", config="hello")
                return "OK"

        else:

            @mod.task
            def foo(writer: StreamWriter, value: Any, config: RunnableConfig) -> None:
                seen.append((writer, value, config))

            @mod.entrypoint()
            def main(inputs: Any) -> str:
                foo(writer=None, value=None, config=None).result()
                foo(writer="hello", value="hello", config="hello").result()
                return "OK"

        assert await main.ainvoke({}) == "OK"
    assert seen == [(None, None, None), ("hello", "hello", "hello")] * 2


# -- a breakpoint, then a new input (test_large_cases.py) ----------------------------------


class InOut(TypedDict, total=False):
    input: int
    inbox: int
    output: int


def two_processes(g: Any) -> Any:
    return (
        g.StateGraph(InOut)
        .add_node("one", lambda state: {"inbox": state["input"] + 1})
        .add_node("two", lambda state: {"output": state["inbox"] + 1})
        .add_edge(g.START, "one")
        .add_edge("one", "two")
    )


async def test_a_new_input_at_a_breakpoint_drops_the_step_that_waited(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_large_cases.py::test_invoke_two_processes_in_out_interrupt, its Pregel
    # graph written as a StateGraph (one channel per key): a run stops after "one"; None
    # goes on; a new input while "two" waits starts from START again, "two" not run for the
    # input before
    ours = two_processes(OURS).compile(checkpointer=checkpointer, interrupt_after=["one"])
    theirs = two_processes(THEIRS).compile(
        checkpointer=lg_memory.InMemorySaver(), interrupt_after=["one"]
    )
    assert await run_both(ours, theirs, {"input": 2}) == {"input": 2, "inbox": 3}
    assert await run_both(ours, theirs, None) == {"input": 2, "inbox": 3, "output": 4}
    assert await run_both(ours, theirs, {"input": 20}) == {"input": 20, "inbox": 21, "output": 4}
    assert await run_both(ours, theirs, {"input": 3}) == {"input": 3, "inbox": 4, "output": 4}
    assert await run_both(ours, theirs, None) == {"input": 3, "inbox": 4, "output": 5}
    # another thread: stopped after "one", its state updated as "one", then run on
    await run_both(ours, theirs, {"input": 20}, thread="2")
    ours_state = await ours.get_state("2")
    theirs_state = await theirs.aget_state(cfg("2"))
    assert ours_state.values == theirs_state.values == {"input": 20, "inbox": 21}
    assert ours_state.next == theirs_state.next == ("two",)
    await theirs.aupdate_state(cfg("2"), {"inbox": 25}, as_node="one")
    await ours.update_state("2", {"inbox": 25}, as_node="one")
    out = await run_both(ours, theirs, None, thread="2")
    assert out == {"input": 20, "inbox": 25, "output": 26}
    assert (await ours.get_state("2")).next == (await theirs.aget_state(cfg("2"))).next == ()
    # the first thread's history, checkpoint by checkpoint
    theirs_h = [
        (s.next, s.values, s.metadata["source"], s.metadata["step"])
        async for s in theirs.aget_state_history(cfg())
    ]
    ours_h = [
        (h.next, (await ours.get_state("1", h.checkpoint_id)).values, h.source, h.step)
        for h in await ours.history("1")
    ]
    assert ours_h == theirs_h


# -- a failed run leaves the last checkpoint (test_pregel.py) ------------------------------


class Total(TypedDict, total=False):
    input: int
    output: int
    total: Annotated[int, operator.add]


def retried_adder(g: Any, retry: Any) -> Any:
    errored_once: list[bool] = []

    def one(state: Any) -> dict[str, Any]:
        out = state["total"] + state["input"]
        if out > 4 and not errored_once:
            errored_once.append(True)
            raise ConnectionError("I will be retried")
        if out > 10:
            raise ValueError("Input is too large")
        return {"output": out, "total": out}

    return (
        g.StateGraph(Total, output_schema=Total)
        .add_node("one", one, retry_policy=retry(initial_interval=0, jitter=False))
        .add_edge(g.START, "one")
    )


async def test_a_retried_node_that_fails_at_last_leaves_the_thread_where_it_was(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_invoke_checkpoint_two (and _three), its Pregel graph written as a
    # StateGraph: a ConnectionError is retried (the default retry_on), a ValueError fails
    # the run, the thread's values stay those of its last checkpoint, the error is kept with
    # the failed task (LangGraph's pending ERROR write), and another thread starts afresh
    ours = retried_adder(OURS, OursRetryPolicy).compile(checkpointer=checkpointer)
    theirs = retried_adder(THEIRS, lg_types.RetryPolicy).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    assert (await run_both(ours, theirs, {"input": 2}))["output"] == 2
    out = await run_both(ours, theirs, {"input": 3})
    assert out == {"input": 3, "output": 5, "total": 7}
    with pytest.raises(ValueError, match="Input is too large"):
        await theirs.ainvoke({"input": 4}, cfg())
    result = await ours.run({"input": 4}, thread_id="1")
    assert result.status == "failed"
    assert isinstance(result.error, ValueError)
    ours_state = await ours.get_state("1")
    theirs_state = await theirs.aget_state(cfg())
    assert ours_state.values == theirs_state.values == {"input": 4, "output": 5, "total": 7}
    assert ours_state.next == theirs_state.next == ("one",)
    assert [t.error for t in ours_state.tasks] == [t.error for t in theirs_state.tasks]
    assert [t.error for t in ours_state.tasks] == ["ValueError('Input is too large')"]
    assert (await run_both(ours, theirs, {"input": 5}, thread="2"))["total"] == 5
    assert (await ours.get_state("1")).values["total"] == 7
    # LangGraph: test_pregel.py::test_invoke_checkpoint_three: a new input goes on from the
    # failed step's thread (the failed task dropped)
    out = await run_both(ours, theirs, {"input": 2})
    assert out == {"input": 2, "output": 9, "total": 16}
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next == ()


# -- a pydantic state with a reducer on a model and updates of other models (test_pregel.py) -


def sorted_add(x: list[str], y: list[str]) -> list[str]:
    return sorted(operator.add(x, y))


class InnerObject(BaseModel):
    yo: int


class DocsState(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    query: str
    inner: Annotated[InnerObject, lambda x, y: y]
    answer: str | None = None
    docs: Annotated[list[str], sorted_add]


class StateUpdate(BaseModel):
    query: str | None = None
    answer: str | None = None
    docs: list[str] | None = None


class UpdateDocs34(BaseModel):
    docs: list[str] = Field(default_factory=lambda: ["doc3", "doc4"])


class DocsInput(BaseModel):
    query: str
    inner: InnerObject


class DocsOutput(BaseModel):
    answer: str
    docs: list[str]


def pydantic_fan_out(g: Any) -> Any:
    def rewrite_query(data: DocsState) -> Any:
        assert isinstance(data.inner, InnerObject)
        return {"query": f"query: {data.query}"}

    def analyzer_one(data: DocsState) -> Any:
        assert isinstance(data.inner, InnerObject)
        return StateUpdate(query=f"analyzed: {data.query}")

    def decider(data: DocsState) -> str:
        assert isinstance(data, DocsState)
        return "retriever_two"

    workflow = g.StateGraph(DocsState, input_schema=DocsInput, output_schema=DocsOutput)
    workflow.add_node("rewrite_query", rewrite_query)
    workflow.add_node("analyzer_one", analyzer_one)
    workflow.add_node("retriever_one", lambda data: {"docs": ["doc1", "doc2"]})
    workflow.add_node("retriever_two", lambda data: UpdateDocs34())
    workflow.add_node("qa", lambda data: {"answer": ",".join(data.docs)})
    workflow.add_edge(g.START, "rewrite_query")
    workflow.add_edge("rewrite_query", "analyzer_one")
    workflow.add_edge("analyzer_one", "retriever_one")
    workflow.add_conditional_edges("rewrite_query", decider, {"retriever_two": "retriever_two"})
    workflow.add_edge(["retriever_one", "retriever_two"], "qa")
    return workflow.add_edge("qa", g.END)


async def test_a_pydantic_state_takes_updates_of_other_models_and_a_reducer_on_a_model(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_in_one_fan_out_state_graph_waiting_edge_custom_state_
    # class_pydantic2 (the async twin of the class without ``inner`` too): a field of a
    # model type with a reducer, a node returning another model (its unset None fields left
    # out, a default_factory's value kept), a join, an interrupt_after, then update_state
    ours = pydantic_fan_out(OURS).compile(checkpointer=checkpointer)
    theirs = pydantic_fan_out(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    given = {"query": "what is weather in sf", "inner": {"yo": 1}}
    out = await run_both(ours, theirs, given)
    assert out == {"answer": "doc1,doc2,doc3,doc4", "docs": ["doc1", "doc2", "doc3", "doc4"]}
    ours_updates = [c async for c in ours.stream(given, thread_id="2", mode="updates")]
    theirs_updates = [c async for c in theirs.astream(given, cfg("2"), stream_mode="updates")]
    # the tasks of a step are streamed as they finish: sorted within the step
    assert ours_updates[:1] == theirs_updates[:1]
    assert sorted(map(str, ours_updates[1:3])) == sorted(map(str, theirs_updates[1:3]))
    assert ours_updates[3:] == theirs_updates[3:]
    assert theirs_updates == [
        {"rewrite_query": {"query": "query: what is weather in sf"}},
        {"analyzer_one": {"query": "analyzed: query: what is weather in sf"}},
        {"retriever_two": {"docs": ["doc3", "doc4"]}},
        {"retriever_one": {"docs": ["doc1", "doc2"]}},
        {"qa": {"answer": "doc1,doc2,doc3,doc4"}},
    ]
    ours_paused = pydantic_fan_out(OURS).compile(
        checkpointer=checkpointer, interrupt_after=["retriever_one"]
    )
    theirs_paused = pydantic_fan_out(THEIRS).compile(
        checkpointer=lg_memory.InMemorySaver(), interrupt_after=["retriever_one"]
    )
    await run_both(ours_paused, theirs_paused, given, thread="3")
    out = await run_both(ours_paused, theirs_paused, None, thread="3")
    assert out == {"answer": "doc1,doc2,doc3,doc4", "docs": ["doc1", "doc2", "doc3", "doc4"]}
    await theirs_paused.aupdate_state(cfg("3"), {"docs": ["doc5"]}, as_node="rewrite_query")
    await ours_paused.update_state("3", {"docs": ["doc5"]}, as_node="rewrite_query")
    ours_state = await ours_paused.get_state("3")
    theirs_state = await theirs_paused.aget_state(cfg("3"))
    # the input's ``inner`` is saved as its field's type reads it, where LangGraph saves
    # the dict given (docs/graph.md, "State": "Input and update_state save the value as its
    # field's type reads it")
    assert ours_state.values == {**theirs_state.values, "inner": InnerObject(yo=1)}
    assert theirs_state.values["inner"] == {"yo": 1}
    assert ours_state.values["docs"] == ["doc1", "doc2", "doc3", "doc4", "doc5"]
    assert ours_state.next == theirs_state.next


class X(TypedDict, total=False):
    x: int


def node_calling_a_task(g: Any, mod: Any) -> Any:
    @mod.task
    async def t(v: int, writer: StreamWriter) -> int:
        writer({"t": v})
        return v + 1

    async def node(state: Any, writer: StreamWriter) -> dict[str, Any]:
        writer({"n": 1})
        return {"x": await t(state["x"])}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile()


async def test_a_task_a_graph_node_calls_streams_in_the_graph_s_own_stream() -> None:
    # found porting test_pregel_async.py::test_overriding_injectable_args_with_async_task: a
    # task called by a StateGraph's node streams its custom items and its update in the
    # graph's own stream, as LangGraph's (the update in the graph's namespace, the custom
    # items in the calling node's, with subgraphs=True); it streamed as the node's sub-graph
    import tinyagents.graph as ours_graph

    ours = node_calling_a_task(OURS, ours_graph)
    theirs = node_calling_a_task(THEIRS, lg_func)
    modes = ["custom", "updates"]
    theirs_items = [i async for i in theirs.astream({"x": 1}, stream_mode=modes)]
    assert theirs_items == [
        ("custom", {"n": 1}),
        ("custom", {"t": 1}),
        ("updates", {"t": 2}),
        ("updates", {"n": {"x": 2}}),
    ]
    ours_items = [i async for i in ours.stream({"x": 1}, mode=modes)]
    assert ours_items == theirs_items
    theirs_items = [i async for i in theirs.astream({"x": 1}, stream_mode=modes, subgraphs=True)]
    assert [(shape(ns), mode, item) for ns, mode, item in theirs_items] == [
        ((), "custom", {"n": 1}),
        (("n",), "custom", {"t": 1}),
        ((), "updates", {"t": 2}),
        ((), "updates", {"n": {"x": 2}}),
    ]
    ours_items = [i async for i in ours.stream({"x": 1}, mode=modes, subgraphs=True)]
    assert [(shape(ns), mode, item) for ns, mode, item in ours_items] == [
        (shape(ns), mode, item) for ns, mode, item in theirs_items
    ]


# -- a node's timeout (test_retry.py) -------------------------------------------------------


class Counter(TypedDict):
    x: int


def timed(g: Any, attempts: list[int], *, retried: bool) -> Any:
    async def flaky(state: Any) -> dict[str, Any]:
        attempts.append(len(attempts))
        if len(attempts) < 2:
            await asyncio.Event().wait()  # never set: the attempt times out
        return {"x": state["x"] + 1}

    policy = (lg_types.RetryPolicy if g is THEIRS else OursRetryPolicy)(
        max_attempts=3 if retried else 1, initial_interval=0.0, jitter=False
    )
    return (
        g.StateGraph(Counter)
        .add_node("flaky", flaky, timeout=0.05, retry_policy=policy)
        .add_edge(g.START, "flaky")
        .add_edge("flaky", g.END)
        .compile()
    )


async def test_a_timed_out_attempt_is_retried_by_default() -> None:
    # LangGraph: test_retry.py::test_state_graph_add_node_timeout_composes_with_retry, with
    # the default retry_on (both retry their NodeTimeoutError; ours is a TimeoutError too)
    ours_attempts: list[int] = []
    theirs_attempts: list[int] = []
    ours = timed(OURS, ours_attempts, retried=True)
    theirs = timed(THEIRS, theirs_attempts, retried=True)
    assert await theirs.ainvoke({"x": 0}) == {"x": 1}
    assert (await ours.run({"x": 0})).raise_for_status().state == {"x": 1}
    assert ours_attempts == theirs_attempts == [0, 1]


async def test_a_node_that_times_out_fails_its_run() -> None:
    # LangGraph: test_retry.py::test_state_graph_add_node_timeout_e2e: both fail the run with
    # a NodeTimeoutError naming the node and its timeout; ours is also a TimeoutError, so
    # code that caught the TimeoutError it raised before still catches it
    ours = timed(OURS, [], retried=False)
    theirs = timed(THEIRS, [], retried=False)
    with pytest.raises(lg_errors.NodeTimeoutError) as raised:
        await theirs.ainvoke({"x": 0})
    result = await ours.run({"x": 0})
    assert result.status == "failed"
    assert isinstance(result.error, NodeTimeoutError)
    assert isinstance(result.error, TimeoutError) and isinstance(result.error, GraphError)
    assert (result.error.node, result.error.timeout) == (raised.value.node, raised.value.timeout)
    assert (result.error.kind, result.error.run_timeout) == ("run", 0.05)
    assert result.error.idle_timeout is None and result.error.elapsed > 0
    assert str(result.error).startswith("Node 'flaky' exceeded its run timeout of 0.050s")
    assert str(raised.value).startswith("Node 'flaky' exceeded its run timeout of 0.050s")
    assert isinstance(result.error.__cause__, TimeoutError)


async def test_a_timeout_error_a_node_raises_itself_is_its_own() -> None:
    # a TimeoutError the node raised (a call of its own that timed out) before its timeout=
    # is not the node's timeout: it fails the run as raised, as LangGraph's does
    async def node(state: Any) -> dict[str, Any]:
        raise TimeoutError("the service did not answer")

    graph = (
        OURS.StateGraph(Counter).add_node("n", node, timeout=30).add_edge(OURS.START, "n").compile()
    )
    result = await graph.run({"x": 0})
    assert type(result.error) is TimeoutError
    assert str(result.error) == "the service did not answer"


def test_a_sync_node_may_have_a_timeout() -> None:
    # LangGraph: test_retry.py::test_state_graph_compile_rejects_sync_node_timeout: LangGraph
    # 1.2 refuses it at compile; ours runs the node on a thread of its own (docs/graph.md,
    # "Nodes", and "What it does not do": timeouts)
    def build(g: Any) -> Any:
        return (
            g.StateGraph(Counter)
            .add_node("slow", lambda state: {"x": state["x"] + 1}, timeout=0.05)
            .add_edge(g.START, "slow")
        )

    with pytest.raises(ValueError, match="only supported for async nodes"):
        build(THEIRS).compile()
    assert build(OURS).compile().run_sync({"x": 1}).state == {"x": 2}


class Vals(TypedDict, total=False):
    vals: Annotated[list[str], operator.add]


def cancel_raising(g: Any) -> Any:
    async def ok(state: Any) -> dict[str, Any]:
        return {"vals": ["ok"]}

    async def boom(state: Any) -> dict[str, Any]:
        raise asyncio.CancelledError("user-raised in node body")

    return (
        g.StateGraph(Vals)
        .add_node("ok", ok)
        .add_node("boom", boom)
        .add_edge(g.START, "ok")
        .add_edge(g.START, "boom")
    )


async def test_a_node_raising_cancelled_error_itself_fails_the_run(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_retry.py::test_pregel_user_raised_cancellederror_fails_run: one branch
    # of a step raises CancelledError though nothing cancelled it; the run fails (not a
    # partial success), with a NodeCancelledError naming the node, the CancelledError its
    # cause; ours is also a RuntimeError, what it raised before (docs/graph.md, "Running": "A
    # node that raises CancelledError though nothing cancelled its task")
    with pytest.raises(lg_errors.NodeCancelledError) as raised:
        await cancel_raising(THEIRS).compile().ainvoke({"vals": []})
    assert raised.value.node == "boom"
    assert isinstance(raised.value.__cause__, asyncio.CancelledError)
    ours = cancel_raising(OURS).compile(checkpointer=checkpointer)
    result = await ours.run({"vals": []}, thread_id="1")
    assert result.status == "failed"
    assert isinstance(result.error, NodeCancelledError)
    assert isinstance(result.error, RuntimeError) and isinstance(result.error, GraphError)
    assert result.error.node == raised.value.node == "boom"
    assert "node 'boom' raised CancelledError" in str(result.error)
    assert isinstance(result.error.__cause__, asyncio.CancelledError)
    # the branch that finished is kept; only the one that failed runs again
    state = await ours.get_state("1")
    assert state.next == ("boom",)


def http_errors() -> list[Exception]:
    """httpx's and requests' HTTP errors, 5xx and 4xx (and requests' without a response)."""
    httpx = pytest.importorskip("httpx")
    requests = pytest.importorskip("requests")
    request = httpx.Request("GET", "http://127.0.0.1/")
    made: list[Exception] = []
    for code in (503, 404):
        response = httpx.Response(code, request=request)
        made.append(httpx.HTTPStatusError("status", request=request, response=response))
    for code in (502, 400, None):
        error = requests.HTTPError("status")
        if code is not None:
            error.response = requests.Response()
            error.response.status_code = code
        made.append(error)
    return made


def test_the_default_retry_on_takes_what_langgraph_s_takes() -> None:
    # LangGraph: test_retry.py::test_should_retry_default_retry_on: connection errors, 5xx
    # HTTP errors and errors of one's own are retried; programming errors, OSError and 4xx
    # are not
    from langgraph._internal._retry import default_retry_on as theirs

    from tinyagents.graph import default_retry_on as ours

    class CustomError(Exception):
        pass

    errors = [
        ConnectionError("connection refused"),
        ConnectionResetError(),
        ValueError("invalid value"),
        TypeError("invalid type"),
        ArithmeticError("division by zero"),
        ImportError("module not found"),
        LookupError("key not found"),
        NameError("name not defined"),
        SyntaxError("invalid syntax"),
        RuntimeError("runtime error"),
        ReferenceError("weak reference"),
        StopIteration(),
        StopAsyncIteration(),
        OSError("file not found"),
        CustomError("custom error"),
        *http_errors(),
    ]
    requests_4xx = errors[-2]
    assert [ours(e) for e in errors if e is not requests_4xx] == [
        theirs(e) for e in errors if e is not requests_4xx
    ]
    assert [ours(e) for e in errors[-5:]] == [True, False, True, False, True]
    # a requests HTTPError of a real 4xx response: LangGraph's retries it (it reads the
    # response, falsy when not ok, as none; its own test uses a Mock, always truthy), ours
    # does not, as for httpx's (docs/graph.md, "Nodes")
    assert theirs(requests_4xx) and not ours(requests_4xx)
    # a TimeoutError (what a node's timeout= raises here) is retried, an OSError LangGraph's
    # is not (docs/graph.md, "Nodes": the default retry_on "also retries a TimeoutError")
    assert ours(TimeoutError()) and not theirs(TimeoutError())


async def test_a_whole_state_message_graph_is_a_state_graph_of_its_list() -> None:
    # LangGraph: test_large_cases.py::test_message_graph (and test_root_graph): LangGraph's
    # MessageGraph is a graph whose whole state is one add_messages list; ours is not
    # offered, and StateGraph(Annotated[list, add_messages]) is that graph (a one-value
    # state: docs/graph.md, "State")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MessageGraph is deprecated
        theirs = (
            lg_graph.MessageGraph()
            .add_node("agent", lambda messages: [("ai", f"{len(messages)} seen")])
            .add_edge(THEIRS.START, "agent")
            .compile()
        )
    out = theirs.invoke([("user", "hi")])
    assert [m.content for m in out] == ["hi", "1 seen"]
    ours = (
        OURS.StateGraph(Annotated[list, ours_add_messages])
        .add_node("agent", lambda messages: [("ai", f"{len(messages)} seen")])
        .add_edge(OURS.START, "agent")
        .compile()
    )
    mine = (await ours.run([("user", "hi")])).raise_for_status().state
    assert [m.content for m in mine] == ["hi", "1 seen"]
    assert [type(m) for m in mine] == [type(m) for m in out]
