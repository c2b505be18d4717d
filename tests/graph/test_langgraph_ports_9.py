"""Ports of LangGraph's tests, ninth round (``libs/langgraph/tests/test_pregel_async.py``,
``test_pregel.py``, ``test_interruption.py``, ``test_subgraph_persistence_async.py``): the
same program on LangGraph and on ``tinyagents.graph``, compared, as in
``test_langgraph_ports.py``. Each test's comment names the LangGraph test it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture) where a test has one. A difference docs/graph.md documents is
asserted as ours, with a comment naming the section.
"""

from __future__ import annotations

import asyncio
import operator
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import pytest
from langchain_core.agents import AgentAction, AgentFinish
from langgraph_kit import OURS, THEIRS, X, cfg, func_of, lg_memory, pair, two_tasks_in_a_node
from pydantic import BaseModel

import tinyagents.graph as ours_graph
from tinyagents.errors import ConfigurationError, InvalidUpdateError
from tinyagents.store.checkpoint import Checkpointer

lg_func = pytest.importorskip("langgraph.func")
lg_types = pytest.importorskip("langgraph.types")
lg_channels = pytest.importorskip("langgraph.channels")

if TYPE_CHECKING:  # the name LangGraph reads in the annotation (a string here)
    from langchain_core.runnables import RunnableConfig


async def streamed(graph: Any, value: Any, mode: Any, thread: str | None = None) -> list[Any]:
    """``graph``'s stream of ``value`` in ``mode`` (on ``thread``, if given)."""
    if hasattr(graph, "astream"):
        config = cfg(thread) if thread is not None else None
        return [i async for i in graph.astream(value, config, stream_mode=mode)]
    return [i async for i in graph.stream(value, thread_id=thread, mode=mode)]


def both(build: Any, checkpointer: Checkpointer | None) -> tuple[Any, Any]:
    """``build(g, cp)`` of each library: (ours, LangGraph's)."""
    theirs_cp = None if checkpointer is None else lg_memory.InMemorySaver()
    return build(OURS, checkpointer), build(THEIRS, theirs_cp)


# -- a run that saves nothing streams its nodes' task calls (round 8's documented gap) -----


@pytest.mark.parametrize("mode", ["updates", "values", ["updates", "values"]])
async def test_a_stream_of_a_run_that_saves_nothing_shows_its_nodes_task_calls(mode: Any) -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, with the
    # tasks called by a StateGraph's node, in a run without checkpointer: its updates stream
    # shows each task's update (its values stream, the graph's values only), as with one
    ours, theirs = both(two_tasks_in_a_node, None)
    expected = await streamed(theirs, {"x": 1}, mode)
    assert await streamed(ours, {"x": 1}, mode) == expected
    if mode == "updates":
        assert expected == [{"slow": 2}, {"slow": 3}, {"n": {"x": 3}}]


def sync_node_with_a_task(g: Any, cp: Any) -> Any:
    func = func_of(g)

    @func.task
    async def double(v: int) -> int:
        return v * 2

    async def first(state: Any) -> dict[str, Any]:
        return {"x": state["x"] + 1}

    async def second(state: Any) -> dict[str, Any]:
        return {"x": await double(state["x"])}

    return (
        g.StateGraph(X)
        .add_node("first", first)
        .add_node("second", second)
        .add_edge(g.START, "first")
        .add_edge("first", "second")
        .compile(checkpointer=cp)
    )


async def test_a_chain_streamed_without_checkpointer_shows_the_task_between_its_nodes() -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api (a chain of
    # two nodes, the second calling a task): the task's update comes between the nodes'
    ours, theirs = both(sync_node_with_a_task, None)
    expected = await streamed(theirs, {"x": 1}, "updates")
    assert expected == [{"first": {"x": 2}}, {"double": 4}, {"second": {"x": 4}}]
    assert await streamed(ours, {"x": 1}, "updates") == expected
    assert (await ours.run({"x": 1})).state == {"x": 4}


def a_task_left_unawaited(g: Any, cp: Any, ran: list[int]) -> Any:
    func = func_of(g)

    @func.task
    async def note(v: int) -> int:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        ran.append(v)
        return v

    async def node(state: Any) -> dict[str, Any]:
        note(state["x"])  # started, never awaited
        return {"x": state["x"] + 1}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


async def test_a_task_left_unawaited_in_a_streamed_run_that_saves_nothing_ends_in_its_step() -> (
    None
):
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, a task the
    # node never awaited: it runs to its end within the node's step, its update in the
    # stream (ours before the node's: docs/graph.md, "The functional API")
    ran: list[int] = []
    ours = a_task_left_unawaited(OURS, None, ran)
    items = await streamed(ours, {"x": 1}, "updates")
    assert ran == [1]
    assert sorted(map(str, items)) == sorted(map(str, [{"note": 1}, {"n": {"x": 2}}]))


def a_sub_graph_s_node_with_tasks(g: Any, cp: Any) -> Any:
    inner = two_tasks_in_a_node(g, None)
    return g.StateGraph(X).add_node("sub", inner).add_edge(g.START, "sub").compile(checkpointer=cp)


@pytest.mark.parametrize("subgraphs", [False, True])
async def test_a_sub_graph_s_node_streams_its_task_calls_in_a_run_that_saves_nothing(
    subgraphs: bool,
) -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, the node
    # calling the tasks inside a sub-graph node, in a run without checkpointer: the task
    # calls stream in the sub-graph's stream (seen with subgraphs=True), as with one
    ours, theirs = both(a_sub_graph_s_node_with_tasks, None)
    lg_items = [
        i async for i in theirs.astream({"x": 1}, stream_mode="updates", subgraphs=subgraphs)
    ]
    our_items = [i async for i in ours.stream({"x": 1}, mode="updates", subgraphs=subgraphs)]

    def plain(item: Any) -> Any:
        return (len(item[0]), item[1]) if subgraphs else item

    assert [plain(i) for i in our_items] == [plain(i) for i in lg_items]
    if subgraphs:
        assert [plain(i) for i in our_items] == [
            (1, {"slow": 2}),
            (1, {"slow": 3}),
            (1, {"n": {"x": 3}}),
            (0, {"sub": {"x": 3}}),
        ]


def a_failing_node_with_a_task(g: Any, cp: Any, ran: list[int]) -> Any:
    func = func_of(g)

    @func.task
    async def note(v: int) -> int:
        await asyncio.sleep(0)
        ran.append(v)
        return v

    async def node(state: Any) -> dict[str, Any]:
        note(state["x"])
        raise ValueError("node failed")

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


async def test_a_failing_node_s_task_ends_before_a_streamed_run_that_saves_nothing_fails() -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, the node
    # failing after starting a task, in a run without checkpointer: the run fails with the
    # node's error once the task has ended (docs/graph.md, "The functional API")
    ran: list[int] = []
    ours = a_failing_node_with_a_task(OURS, None, ran)
    with pytest.raises(ValueError, match="node failed"):
        await streamed(ours, {"x": 1}, "updates")
    assert ran == [1]


# -- state schemas (test_type_checking.py) ------------------------------------------------


class InfoDict(TypedDict):
    info: Annotated[list[str], operator.add]


class InfoModel(BaseModel):
    info: Annotated[list[str], operator.add]


def info_graph(schema: Any) -> Any:
    """A node taking the state, then one taking it and its ``config``."""

    def build(g: Any) -> Any:
        def valid(state: Any) -> Any:
            return None

        def valid_with_config(state: Any, config: RunnableConfig) -> Any:
            return {"info": [config["metadata"]["langgraph_node"]]}

        graph = g.StateGraph(schema).add_node("valid", valid)
        graph = graph.add_node("with_config", valid_with_config)
        return graph.add_edge(g.START, "valid").add_edge("valid", "with_config")

    return build


async def run_both(ours: Any, theirs: Any, value: Any, thread: str) -> tuple[Any, Any]:
    """(ours, LangGraph's) final state of ``value`` on ``thread``."""
    mine = (await ours.run(value, thread_id=thread)).raise_for_status().state
    return mine, await theirs.ainvoke(value, cfg(thread))


@pytest.mark.parametrize("schema", [InfoDict, InfoModel])
async def test_a_typed_dict_or_model_state_runs_its_nodes_alike(
    checkpointer: Checkpointer, schema: Any
) -> None:
    # LangGraph: test_type_checking.py::test_typed_dict_state and ::test_base_model_state
    # (their node taking a config reached by an edge: ours refuses an unreachable node,
    # docs/graph.md, "What it does not do")
    ours, theirs = pair(info_graph(schema), checkpointer)
    mine, lg = await run_both(ours, theirs, {"info": ["hello", "world"]}, "1")
    assert mine == lg == {"info": ["hello", "world", "with_config"]}
    if schema is InfoModel:  # an instance as input
        mine, lg = await run_both(ours, theirs, InfoModel(info=["x"]), "2")
        assert mine == lg == {"info": ["x", "with_config"]}


@pytest.mark.parametrize("schema", [InfoDict, InfoModel])
async def test_input_of_a_key_the_state_has_not_is_refused(
    checkpointer: Checkpointer, schema: Any
) -> None:
    # LangGraph: test_type_checking.py::test_typed_dict_state (``invoke({"invalid":
    # "lalala"})``): LangGraph drops the key and runs the graph on an empty state; ours
    # refuses it, naming the key, and saves nothing (docs/graph.md, "Bad input raises and
    # changes nothing")
    ours, theirs = pair(info_graph(schema), checkpointer)
    assert await theirs.ainvoke({"invalid": "lalala"}, cfg("1")) == {"info": ["with_config"]}
    with pytest.raises(InvalidUpdateError, match="invalid"):
        await ours.run({"invalid": "lalala"}, thread_id="1")
    assert (await ours.get_state("1")).values == {}


def test_a_plain_annotated_class_is_no_state_schema() -> None:
    # LangGraph: test_type_checking.py::test_plain_class_not_allowed (a typing check only:
    # LangGraph's StateGraph takes the class, its annotations its channels); ours refuses
    # it (docs/graph.md, "What it does not do")
    class NotAllowed:
        info: Annotated[list[str], operator.add]

    THEIRS.StateGraph(NotAllowed)
    with pytest.raises(ConfigurationError, match="TypedDict, a dataclass or a pydantic"):
        OURS.StateGraph(NotAllowed)


class InputState(TypedDict):
    something: int


class WithInput(InputState):
    info: Annotated[list[str], operator.add]


async def test_an_input_schema_keeps_the_input_to_its_keys(checkpointer: Checkpointer) -> None:
    # LangGraph: test_type_checking.py::test_input_state_specified: a key of the state that
    # the input schema has not is dropped from the input
    def build(g: Any) -> Any:
        def valid(state: Any) -> Any:
            return None

        graph = g.StateGraph(WithInput, input_schema=InputState).add_node("valid", valid)
        return graph.add_edge(g.START, "valid")

    ours, theirs = pair(build, checkpointer)
    mine, lg = await run_both(ours, theirs, {"something": 1}, "1")
    assert mine == lg == {"something": 1, "info": []}
    mine, lg = await run_both(ours, theirs, {"something": 2, "info": ["hello", "world"]}, "2")
    assert mine == lg == {"something": 2, "info": []}


# -- retry_on (test_retry.py) -----------------------------------------------------------


def retry_policies(g: Any) -> list[Any]:
    """LangGraph's three ``retry_on`` forms, of ``g``'s library, each case with the errors
    it retries and those it does not."""
    policy = ours_graph.RetryPolicy if g is OURS else lg_types.RetryPolicy

    class CustomError(ValueError):
        pass

    def should_retry(exc: Exception) -> bool:
        return isinstance(exc, ValueError) and "retry" in str(exc)

    kw = {"initial_interval": 0.0, "max_attempts": 2}
    return [
        (
            policy(retry_on=(ValueError, KeyError), **kw),
            [ValueError("test error"), KeyError("test error")],
            [TypeError("test error"), Exception("test error")],
        ),
        (policy(retry_on=ValueError, **kw), [CustomError("test error")], []),
        (
            policy(retry_on=should_retry, **kw),
            [ValueError("please retry this")],
            [ValueError("other error"), TypeError("please retry this")],
        ),
    ]


def test_retry_on_takes_a_sequence_a_class_and_its_subclasses_or_a_predicate() -> None:
    # LangGraph: test_retry.py::test_should_retry_on_sequence_of_exceptions,
    # ::test_should_retry_on_subclass_of_exception, ::test_should_retry_on_callable
    # (LangGraph's ``_should_retry_on(policy, exc)`` is ours ``policy.should_retry(exc)``)
    from langgraph.pregel._retry import _should_retry_on

    for g in (OURS, THEIRS):
        for policy, retried, not_retried in retry_policies(g):
            for exc in retried:
                if g is OURS:
                    assert policy.should_retry(exc) is True
                else:
                    assert _should_retry_on(policy, exc) is True
            for exc in not_retried:
                if g is OURS:
                    assert policy.should_retry(exc) is False
                else:
                    assert _should_retry_on(policy, exc) is False


def failing_once(case: int, kind: int, i: int) -> Any:
    """A graph whose node fails once with error ``i`` of ``retry_policies``' case ``case``
    (``kind`` 1: one it retries, 2: one it does not), under that case's policy."""

    def build(g: Any) -> Any:
        policy, *errors = retry_policies(g)[case]
        error = errors[kind - 1][i]
        calls: list[int] = []

        def flaky(state: Any) -> dict[str, Any]:
            calls.append(1)
            if len(calls) == 1:
                raise error
            return {"x": len(calls)}

        return g.StateGraph(X).add_node("n", flaky, retry_policy=policy).add_edge(g.START, "n")

    return build


async def test_a_node_is_retried_as_its_retry_on_says(checkpointer: Checkpointer) -> None:
    # LangGraph: test_retry.py::test_should_retry_on_sequence_of_exceptions,
    # ::test_should_retry_on_subclass_of_exception, ::test_should_retry_on_callable, each
    # policy on a node that fails once with the error: retried, it succeeds on its second
    # attempt; not retried, the run fails with the error
    for case, (_, retried, not_retried) in enumerate(retry_policies(OURS)):
        for kind, errors in ((1, retried), (2, not_retried)):
            for i, error in enumerate(errors):
                ours, theirs = pair(failing_once(case, kind, i), checkpointer)
                thread = f"{case}-{kind}-{i}"
                if kind == 1:
                    mine, lg = await run_both(ours, theirs, {"x": 0}, thread)
                    assert mine == lg == {"x": 2}
                    continue
                with pytest.raises(type(error)):
                    await theirs.ainvoke({"x": 0}, cfg(thread))
                result = await ours.run({"x": 0}, thread_id=thread)
                assert result.status == "failed"
                assert type(result.error) is type(error)


# -- an agent loop over LangChain's AgentAction / AgentFinish (test_large_cases.py) -------


OurUntracked = ours_graph.UntrackedValue
TheirUntracked = lg_channels.UntrackedValue


class AgentState(TypedDict, total=False):
    input: Annotated[str, OurUntracked]
    agent_outcome: AgentAction | AgentFinish | None
    intermediate_steps: Annotated[list[tuple[AgentAction, str]], operator.add]


class TheirAgentState(TypedDict, total=False):
    input: Annotated[str, TheirUntracked]
    agent_outcome: AgentAction | AgentFinish | None
    intermediate_steps: Annotated[list[tuple[AgentAction, str]], operator.add]


class ToolState(TypedDict, total=False):
    agent_outcome: AgentAction | AgentFinish


def agent_loop(g: Any) -> Any:
    """``test_conditional_state_graph``'s graph, its agent (a prompt, a fake LLM and a
    parser) a function answering from the same list; its tool a plain function."""
    responses = ["tool:search_api:query", "tool:search_api:another", "finish:answer"]

    def agent(state: Any) -> dict[str, Any]:
        said = responses[len(state.get("intermediate_steps") or []) % len(responses)]
        if said.startswith("finish"):
            _, answer = said.split(":")
            return {"agent_outcome": AgentFinish(return_values={"answer": answer}, log=said)}
        _, tool_name, tool_input = said.split(":")
        return {"agent_outcome": AgentAction(tool=tool_name, tool_input=tool_input, log=said)}

    def execute_tools(data: Any) -> dict[str, Any]:
        assert "input" not in data
        assert "intermediate_steps" not in data
        # LangGraph's node gets a dict of its own, which it pops from; ours a read-only
        # view (docs/graph.md, "State"): dict(data) is the copy to change
        action = (dict(data) if g is OURS else data).pop("agent_outcome")
        assert isinstance(action, AgentAction)
        return {"intermediate_steps": [[action, f"result for {action.tool_input}"]]}

    def should_continue(data: Any) -> str:
        return "exit" if isinstance(data["agent_outcome"], AgentFinish) else "continue"

    workflow = g.StateGraph(AgentState if g is OURS else TheirAgentState)
    workflow.add_node("agent", agent)
    workflow.add_node("tools", execute_tools, input_schema=ToolState)
    workflow.set_entry_point("agent")
    workflow.add_conditional_edges("agent", should_continue, {"continue": "tools", "exit": g.END})
    return workflow.add_edge("tools", "agent")


async def test_an_agent_loop_over_langchain_agent_actions(checkpointer: Checkpointer) -> None:
    # LangGraph: test_large_cases.py::test_conditional_state_graph (without its schema and
    # drawing snapshots): run, streamed, and stopped after the agent, its outcome replaced
    # with update_state, on every checkpointer (LangChain's AgentAction / AgentFinish saved).
    # Its tool node pops from its input: ours is read-only (docs/graph.md, "State")
    ours, theirs = pair(agent_loop, None)
    value = {"input": "what is weather in sf"}
    mine = (await ours.run(value)).raise_for_status().state
    assert mine == await theirs.ainvoke(value)
    assert mine["agent_outcome"] == AgentFinish(
        return_values={"answer": "answer"}, log="finish:answer"
    )
    assert await streamed(ours, value, "updates") == await streamed(theirs, value, "updates")

    ours, theirs = pair(agent_loop, checkpointer, interrupt_after=["agent"])
    lg = await streamed(theirs, value, "updates", "1")
    assert await streamed(ours, value, "updates", "1") == lg
    for graph in (ours, theirs):
        state = await graph.aget_state(cfg("1")) if graph is theirs else await graph.get_state("1")
        assert state.values == {
            "agent_outcome": AgentAction(
                tool="search_api", tool_input="query", log="tool:search_api:query"
            ),
            "intermediate_steps": [],
        }
        assert state.next == ("tools",)
    different = AgentAction(
        tool="search_api", tool_input="query", log="tool:search_api:a different query"
    )
    await theirs.aupdate_state(cfg("1"), {"agent_outcome": different})
    await ours.update_state("1", {"agent_outcome": different})
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg("1"))).values
    lg = await streamed(theirs, None, "updates", "1")
    assert await streamed(ours, None, "updates", "1") == lg
    assert lg[0] == {"tools": {"intermediate_steps": [[different, "result for query"]]}}
    finish = AgentFinish(return_values={"answer": "a really nice answer"}, log="finish:nice")
    await theirs.aupdate_state(cfg("1"), {"agent_outcome": finish})
    await ours.update_state("1", {"agent_outcome": finish})
    for graph in (ours, theirs):
        state = await graph.aget_state(cfg("1")) if graph is theirs else await graph.get_state("1")
        assert state.values["agent_outcome"] == finish
        assert state.next == ()


class OutcomeState(TypedDict, total=False):
    outcome: AgentAction | AgentFinish | None


def agent_outcome_graph(g: Any) -> Any:
    """A node writing LangChain's AgentAction, then one replacing it with an AgentFinish,
    into a field typed as their union, a step each."""

    def act(s: Any) -> dict[str, Any]:
        return {"outcome": AgentAction(tool="search", tool_input="q", log="act")}

    def finish(s: Any) -> dict[str, Any]:
        assert isinstance(s["outcome"], AgentAction), s["outcome"]
        return {"outcome": AgentFinish(return_values={"answer": s["outcome"].tool}, log="f")}

    graph = g.StateGraph(OutcomeState).add_node("act", act).add_node("finish", finish)
    return graph.add_edge(g.START, "act").add_edge("act", "finish")


async def test_a_union_of_langchain_agent_classes_is_read_back_as_each_class(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_large_cases.py::test_conditional_state_graph (``agent_outcome:
    # AgentAction | AgentFinish | None``): a saved value of a union whose class has an
    # __init__ of its own (AgentFinish's) came back a dict (the union's read raised
    # TypeError in AgentFinish.__init__), at a breakpoint and in get_state
    ours, theirs = pair(agent_outcome_graph, checkpointer, interrupt_after=["act"])
    await ours.run({}, thread_id="1")
    await theirs.ainvoke({}, cfg("1"))
    action = (await ours.get_state("1")).values["outcome"]
    assert action == (await theirs.aget_state(cfg("1"))).values["outcome"]
    assert isinstance(action, AgentAction)
    mine = (await ours.run(None, thread_id="1")).raise_for_status().state
    assert mine == await theirs.ainvoke(None, cfg("1"))
    assert isinstance((await ours.get_state("1")).values["outcome"], AgentFinish)


class NestedOutcomes(TypedDict, total=False):
    steps: list[AgentFinish | AgentAction]
    by_name: dict[str, AgentFinish | AgentAction]
    pair: tuple[AgentFinish | AgentAction, str]


async def test_unions_of_langchain_agent_classes_in_containers_are_read_back(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_large_cases.py::test_conditional_state_graph's union, inside a list,
    # a dict and a tuple, AgentFinish first (its __init__ raised on an AgentAction's dict):
    # each value comes back as its class from every checkpointer (they came back dicts)
    action = AgentAction(tool="search", tool_input="q", log="act")
    finish = AgentFinish(return_values={"answer": 1}, log="f")
    written = {
        "steps": [action, finish],
        "by_name": {"a": action, "f": finish},
        "pair": (action, "seen"),
    }

    def build(g: Any) -> Any:
        def write(state: Any) -> dict[str, Any]:
            return written

        return g.StateGraph(NestedOutcomes).add_node("w", write).add_edge(g.START, "w")

    ours, theirs = pair(build, checkpointer)
    await ours.run({}, thread_id="1")
    await theirs.ainvoke({}, cfg("1"))
    values = (await ours.get_state("1")).values
    assert values == written
    lg = (await theirs.aget_state(cfg("1"))).values
    # (LangGraph's saver gives the tuple back as a list; ours reads it as its type says)
    assert lg == {**written, "pair": [action, "seen"]}
    assert [type(v) for v in values["steps"]] == [AgentAction, AgentFinish]
