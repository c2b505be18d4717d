"""Ports of LangGraph's tests of a graph whose state is one value, of a node's ``@task``
calls in a run that saves nothing, and of a tuple saved in a checkpoint: the same program
on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.
Each test's comment names the LangGraph test it follows (``libs/langgraph/tests/``).

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture) where a test has one.
"""

from __future__ import annotations

import asyncio
import operator
from dataclasses import replace
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, X, cfg, func_of, lg_memory, shape

import tinyagents.graph as ours_graph
from tinyagents import Runtime
from tinyagents.errors import ConfigurationError
from tinyagents.store.checkpoint import Checkpointer


def both(build: Any, checkpointer: Checkpointer | None, *args: Any) -> tuple[Any, Any]:
    """``build(g, cp, *args)`` of each library: (ours, LangGraph's)."""
    theirs_cp = None if checkpointer is None else lg_memory.InMemorySaver()
    return build(OURS, checkpointer, *args), build(THEIRS, theirs_cp, *args)


# -- a node's @task calls in a run that saves nothing, streamed or not ----------------------


def a_task_left_unawaited(g: Any, cp: Any, ran: list[str]) -> Any:
    """Node ``n`` starts a task it never awaits; node ``after`` notes what had run by then."""
    func = func_of(g)

    @func.task
    async def note(v: int) -> int:
        for _ in range(20):
            await asyncio.sleep(0)
        ran.append(f"note {v}")
        return v

    async def node(state: Any) -> dict[str, Any]:
        note(state["x"])  # started, never awaited
        return {"x": state["x"] + 1}

    async def after(state: Any) -> dict[str, Any]:
        ran.append("after")
        return {"x": state["x"] + 1}

    return (
        g.StateGraph(X)
        .add_node("n", node)
        .add_node("after", after)
        .add_edge(g.START, "n")
        .add_edge("n", "after")
        .compile(checkpointer=cp)
    )


async def drive(graph: Any, how: str) -> Any:
    """Run ``graph`` on ``{"x": 1}`` as ``how`` says: a plain run, a stream of values, ours
    step by step (``iter``) or in a ``Runtime`` (``steered``)."""
    if hasattr(graph, "ainvoke"):
        if how == "values":
            return [v async for v in graph.astream({"x": 1}, stream_mode="values")][-1]
        return await graph.ainvoke({"x": 1})
    if how == "values":
        return [v async for v in graph.stream({"x": 1}, mode="values")][-1]
    if how == "iter":
        async with graph.iter({"x": 1}) as run:
            steps = [step async for step in run.supersteps()]
        return steps[-1].result.raise_for_status().state
    if how == "steered":
        async with Runtime(testing=True) as rt:
            handle = await rt.start_graph(graph, {"x": 1})
            result = await handle.result()
            if result.error is not None:
                raise ValueError(result.error)  # (a steered run reports its error as text)
            return result.output
    return (await graph.run({"x": 1})).raise_for_status().state


HOW = ["run", "values", "iter", "steered"]


@pytest.mark.parametrize("how", HOW)
async def test_a_task_left_unawaited_ends_in_its_node_s_step_without_checkpointer(
    how: str,
) -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api (a task the
    # node never awaited runs to its end within the node's step), in a plain ainvoke and a
    # values stream without checkpointer: the next node runs after it, as with one
    mine: list[str] = []
    theirs_ran: list[str] = []
    ours, _ = both(a_task_left_unawaited, None, mine)
    _, theirs = both(a_task_left_unawaited, None, theirs_ran)
    assert await drive(theirs, how) == {"x": 3}
    assert theirs_ran == ["note 1", "after"]
    assert await drive(ours, how) == {"x": 3}
    assert mine == theirs_ran


def a_failing_node_with_a_task(g: Any, cp: Any, ran: list[int]) -> Any:
    func = func_of(g)

    @func.task
    async def note(v: int) -> int:
        for _ in range(20):
            await asyncio.sleep(0)
        ran.append(v)
        return v

    async def node(state: Any) -> dict[str, Any]:
        note(state["x"])
        raise ValueError("node failed")

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


@pytest.mark.parametrize("how", HOW)
async def test_a_failing_node_s_task_ends_before_a_run_without_checkpointer_fails(
    how: str,
) -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, the node
    # failing after starting a task, in a plain ainvoke and a values stream without
    # checkpointer: the run fails with the node's error once the task has ended
    mine: list[int] = []
    ours = a_failing_node_with_a_task(OURS, None, mine)
    with pytest.raises(ValueError, match="node failed"):
        await drive(ours, how)
    assert mine == [1]


# -- a state that is one value: StateGraph(int), StateGraph(Annotated[list, operator.add]) --


class Named:
    """A node named ``name`` that writes ``[name]``, or ``["name|arg"]`` for a ``Send``'s
    argument (LangGraph's tests' ``Node``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = name

    async def __call__(self, state: Any) -> Any:
        return [self.name] if isinstance(state, list) else ["|".join((self.name, str(state)))]


def concurrent_sends(g: Any, cp: Any) -> Any:
    async def send_for_fun(state: Any) -> Any:
        return [g.Send("2", 1), g.Send("2", 2), "3.1"]

    async def send_for_profit(state: Any) -> Any:
        return [g.Send("2", 3), g.Send("2", 4)]

    async def route_to_three(state: Any) -> Literal["3"]:
        return "3"

    builder = g.StateGraph(Annotated[list, operator.add])
    for name in ("1", "1.1", "2", "3", "3.1"):
        builder.add_node(name, Named(name))
    builder.add_edge(g.START, "1").add_edge(g.START, "1.1")
    builder.add_conditional_edges("1", send_for_fun)
    builder.add_conditional_edges("1.1", send_for_profit)
    builder.add_conditional_edges("2", route_to_three)
    return builder.compile(checkpointer=cp)


async def result_of(graph: Any, value: Any, thread: str | None = None) -> Any:
    """What either library's run of ``value`` returns (on ``thread``, if given)."""
    if hasattr(graph, "ainvoke"):
        return await graph.ainvoke(value, cfg(thread) if thread else None)
    return (await graph.run(value, thread_id=thread)).raise_for_status().state


async def test_concurrent_emit_sends() -> None:
    # LangGraph: test_pregel_async.py::test_concurrent_emit_sends (a list state, Sends of
    # values that are no state)
    ours, theirs = both(concurrent_sends, None)
    expected = ["0", "1", "1.1", "3.1", "2|1", "2|2", "2|3", "2|4", "3"]
    assert await result_of(theirs, ["0"]) == expected
    assert await result_of(ours, ["0"]) == expected
    lg_values = [i async for i in theirs.astream(["0"], stream_mode="values")]
    assert [i async for i in ours.stream(["0"], mode="values")] == lg_values
    assert lg_values[0] == ["0"]
    # each node's update the value it wrote (the tasks of a step in the order they ended)
    lg_updates = [i async for i in theirs.astream(["0"], stream_mode="updates")]
    our_updates = [i async for i in ours.stream(["0"], mode="updates")]
    assert sorted(map(str, our_updates)) == sorted(map(str, lg_updates))
    assert {"2": ["2|1"]} in our_updates


def send_sequences(g: Any, cp: Any, **compile_kw: Any) -> Any:
    class Node(Named):
        async def __call__(self, state: Any) -> Any:
            update = await super().__call__(state)
            return replace(state, update=update) if isinstance(state, g.Command) else update

    async def send_for_fun(state: Any) -> Any:
        return [
            g.Send("2", g.Command(goto=g.Send("2", 3))),
            g.Send("2", g.Command(goto=g.Send("2", 4))),
            "3.1",
        ]

    async def route_to_three(state: Any) -> Literal["3"]:
        return "3"

    builder = g.StateGraph(Annotated[list, operator.add])
    for name in ("1", "2", "3", "3.1"):
        builder.add_node(name, Node(name))
    builder.add_edge(g.START, "1")
    builder.add_conditional_edges("1", send_for_fun)
    builder.add_conditional_edges("2", route_to_three)
    return builder.compile(checkpointer=cp, **compile_kw)


async def test_send_sequences() -> None:
    # LangGraph: test_pregel_async.py::test_send_sequences, without checkpointer: a Send of
    # a Command, which the node returns with its update, its goto a Send again (its
    # checkpointed half: test_send_sequences_checkpointed)
    ours, theirs = both(send_sequences, None)
    expected = await result_of(theirs, ["0"])
    assert expected == [
        "0",
        "1",
        "3.1",
        "2|Command(goto=Send(node='2', arg=3))",
        "2|Command(goto=Send(node='2', arg=4))",
        "3",
        "2|3",
        "2|4",
        "3",
    ]
    assert await result_of(ours, ["0"]) == expected


async def test_send_sequences_checkpointed(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py::test_send_sequences, its checkpointed half: stopped
    # before "3.1", the step's Sends of a Command wait in the checkpoint (every backend) and
    # run on from it; ours could not save a Command ("a _Unset is not JSON-able")
    ours = send_sequences(OURS, checkpointer, interrupt_before=["3.1"])
    theirs = send_sequences(THEIRS, lg_memory.InMemorySaver(), interrupt_before=["3.1"])
    first = await result_of(theirs, ["0"], "1")
    assert first == ["0", "1"]
    assert await result_of(ours, ["0"], "1") == first
    expected = await result_of(theirs, None, "1")
    assert expected == [
        "0",
        "1",
        "3.1",
        "2|Command(goto=Send(node='2', arg=3))",
        "2|Command(goto=Send(node='2', arg=4))",
        "3",
        "2|3",
        "2|4",
        "3",
    ]
    assert await result_of(ours, None, "1") == expected


def fork_re_runs(g: Any, cp: Any, calls: list[int]) -> Any:
    def add_one(state: Any) -> int:
        calls.append(state)
        return 1

    builder = g.StateGraph(Annotated[int, operator.add])
    builder.add_node("add_one", add_one)
    builder.add_edge(g.START, "add_one")
    builder.add_conditional_edges("add_one", lambda cnt: "add_one" if cnt < 6 else g.END)
    return builder.compile(checkpointer=cp)


async def test_fork_always_re_runs_nodes(checkpointer: Checkpointer) -> None:
    # LangGraph: test_large_cases_async.py::test_fork_always_re_runs_nodes: an int state
    # with operator.add, streamed in values and updates, its history, and a replay from a
    # checkpoint of its past; the thread read back from every backend
    mine: list[int] = []
    theirs_calls: list[int] = []
    ours = fork_re_runs(OURS, checkpointer, mine)
    theirs = fork_re_runs(THEIRS, lg_memory.InMemorySaver(), theirs_calls)
    lg_items = [i async for i in theirs.astream(1, cfg(), stream_mode=["values", "updates"])]
    assert lg_items[:3] == [("values", 1), ("updates", {"add_one": 1}), ("values", 2)]
    our_items = [i async for i in ours.stream(1, thread_id="1", mode=["values", "updates"])]
    assert our_items == lg_items
    assert mine == theirs_calls == [1, 2, 3, 4, 5]
    lg_history = [s async for s in theirs.aget_state_history(cfg())]
    snap = await ours.get_state("1")
    assert snap.values == (await theirs.aget_state(cfg())).values == 6
    assert snap.next == ()
    values, results = [], []
    for info in await ours.history("1"):
        past_snap = await ours.get_state("1", info.checkpoint_id)
        values.append(past_snap.values)
        results.append([t.result for t in past_snap.tasks])
    assert values == [s.values for s in lg_history]
    assert results == [[t.result for t in s.tasks] for s in lg_history]
    assert results[1] == [1]  # a task's result the value it wrote
    # replay from the checkpoint of value 5: the node runs again
    past = next(h for h in await ours.history("1") if h.next == ("add_one",))
    again = await ours.run(None, thread_id="1", checkpoint_id=past.checkpoint_id)
    assert again.state == 6
    assert mine[-1] == 5


def plain_int(g: Any, cp: Any) -> Any:
    def double(state: int) -> int:
        return state * 2

    def ask(state: int) -> Any:
        answer = g.interrupt(f"add to {state}?")
        return state + answer

    builder = g.StateGraph(int).add_node("double", double).add_node("ask", ask)
    builder.add_edge(g.START, "double").add_edge("double", "ask")
    return builder.compile(checkpointer=cp)


async def test_an_int_state_pauses_resumes_and_is_updated(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py's one-value states (StateGraph(int), no reducer: each
    # write replaces it), with an interrupt resumed by Command(resume=...), update_state
    # and get_state, on every backend
    ours = plain_int(OURS, checkpointer)
    theirs = plain_int(THEIRS, lg_memory.InMemorySaver())
    lg_paused = await theirs.ainvoke(3, cfg())
    paused = await ours.run(3, thread_id="1")
    assert paused.status == "interrupted"
    assert list(lg_paused) == ["__interrupt__"]  # LangGraph's ainvoke shows the pause alone
    assert paused.state == 6
    assert [i.value for i in paused.interrupts] == ["add to 6?"]
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values == 6
    assert await result_of(ours, OURS.Command(resume=4), "1") == 10
    assert await theirs.ainvoke(THEIRS.Command(resume=4), cfg()) == 10
    await ours.update_state("1", 42)
    await theirs.aupdate_state(cfg(), 42)
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values == 42
    fresh = plain_int(OURS, checkpointer)  # the thread read back from the store
    assert (await fresh.get_state("1")).values == 42


def mixed_return(g: Any, cp: Any) -> Any:
    def my_node(state: list[str]) -> Any:
        return [g.Command(update=["a"]), ["b"]]

    builder = g.StateGraph(Annotated[list[str], operator.add])
    builder.add_node("my_node", my_node).add_edge(g.START, "my_node")
    return builder.compile(checkpointer=cp)


async def test_root_mixed_return() -> None:
    # LangGraph: test_pregel.py::test_root_mixed_return: a Command's update and a value, in
    # one list a node returned
    ours, theirs = both(mixed_return, None)
    assert await result_of(theirs, []) == ["a", "b"]
    assert await result_of(ours, []) == ["a", "b"]


def root_sub_graph(g: Any, cp: Any) -> Any:
    child = g.StateGraph(list).add_node("child_node", lambda x: [*x, "child"])
    child = child.add_edge(g.START, "child_node").compile()
    parent = g.StateGraph(list).add_node("child", child).add_edge(g.START, "child")
    return parent.compile(checkpointer=cp)


async def test_get_graph_root_channel(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_get_graph_root_channel's graph, run: a list state's
    # sub-graph of a list state, its output the parent's value
    ours = root_sub_graph(OURS, checkpointer)
    theirs = root_sub_graph(THEIRS, lg_memory.InMemorySaver())
    expected = await result_of(theirs, ["p"], "1")
    assert expected == ["p", "child"]
    assert await result_of(ours, ["p"], "1") == expected
    assert (await ours.get_state("1")).values == expected


@pytest.mark.parametrize("mode", ["values", "updates"])
async def test_a_one_value_sub_graph_streams_its_value(mode: str) -> None:
    # LangGraph: test_pregel.py::test_get_graph_root_channel's graph, streamed with
    # subgraphs=True: the sub-graph's items show its value too
    ours, theirs = both(root_sub_graph, None)
    lg_items = [
        (shape(ns), item)
        async for ns, item in theirs.astream(["p"], stream_mode=mode, subgraphs=True)
    ]
    our_items = [
        (shape(ns), item) async for ns, item in ours.stream(["p"], mode=mode, subgraphs=True)
    ]
    assert our_items == lg_items
    assert ((), ["p", "child"] if mode == "values" else {"child": ["p", "child"]}) in lg_items


def nested_in_entrypoint(g: Any, cp: Any) -> Any:
    func = func_of(g)

    def mynode(input: list[str]) -> list[str]:
        return [it + "a" for it in input]

    add_a = g.StateGraph(list[str]).add_node("mynode", mynode).add_edge(g.START, "mynode")
    add_a = add_a.compile()

    @func.task
    async def mapper(input: int) -> str:
        return str(input) * 2

    @func.entrypoint(checkpointer=cp)
    async def graph(input: list[int]) -> list[str]:
        mapped = [await mapper(i) for i in input]
        answer = g.interrupt("question")
        final = [m + answer for m in mapped]
        if hasattr(add_a, "ainvoke"):
            return await add_a.ainvoke(final)
        return (await add_a.run(final)).state

    return graph


async def test_imp_nested(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py::test_imp_nested: a list[str] state's graph called
    # inside an entrypoint after its interrupt was answered
    ours = nested_in_entrypoint(OURS, checkpointer)
    theirs = nested_in_entrypoint(THEIRS, lg_memory.InMemorySaver())
    await theirs.ainvoke([0, 1], cfg())
    await ours.run([0, 1], thread_id="1")
    expected = await theirs.ainvoke(THEIRS.Command(resume="answer"), cfg())
    assert expected == ["00answera", "11answera"]
    assert await result_of(ours, OURS.Command(resume="answer"), "1") == expected


def messages_graph(g: Any, cp: Any, add_messages: Any) -> Any:
    def agent(messages: list[Any]) -> Any:
        return [("ai", f"{len(messages)} seen")]

    def route(messages: list[Any]) -> Any:
        return g.END if len(messages) > 3 else "agent"

    builder = g.StateGraph(Annotated[list, add_messages]).add_node("agent", agent)
    builder.add_edge(g.START, "agent").add_conditional_edges("agent", route)
    return builder.compile(checkpointer=cp)


async def test_a_message_list_state_round_trips_through_the_checkpointer(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_large_cases.py::test_message_graph (a MessageGraph: one add_messages
    # list as the whole state), checkpointed: the thread read back on every backend holds
    # LangChain messages, and takes the next input through the reducer
    from langgraph.graph.message import add_messages as lg_add

    from tinyagents.graph import add_messages

    ours = messages_graph(OURS, checkpointer, add_messages)
    theirs = messages_graph(THEIRS, lg_memory.InMemorySaver(), lg_add)
    lg_out = await theirs.ainvoke([("user", "hi")], cfg())
    out = await result_of(ours, [("user", "hi")], "1")
    assert [(type(m), m.content) for m in out] == [(type(m), m.content) for m in lg_out]
    fresh = messages_graph(OURS, checkpointer, add_messages)  # read back from the store
    snap = await fresh.get_state("1")
    assert [(type(m), m.content) for m in snap.values] == [(type(m), m.content) for m in lg_out]
    more = await result_of(fresh, [("user", "again")], "1")
    lg_more = await theirs.ainvoke([("user", "again")], cfg())
    assert [m.content for m in more] == [m.content for m in lg_more]


def command_router(g: Any, cp: Any) -> Any:
    def first(state: int) -> Any:
        return g.Command(update=state + 1, goto="second")

    def second(state: int) -> int:
        return state * 10

    builder = g.StateGraph(int).add_node("first", first, destinations=("second",))
    builder.add_node("second", second).add_edge(g.START, "first")
    return builder.compile(checkpointer=cp, interrupt_before=["second"])


async def test_a_command_and_a_breakpoint_in_an_int_state(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py's Command tests, with a one-value state: a node's
    # Command(update=value, goto=...) and a breakpoint before its target, continued
    ours = command_router(OURS, checkpointer)
    theirs = command_router(THEIRS, lg_memory.InMemorySaver())
    await theirs.ainvoke(1, cfg())
    paused = await ours.run(1, thread_id="1")
    lg_snap = await theirs.aget_state(cfg())
    snap = await ours.get_state("1")
    assert (paused.state, snap.values, snap.next) == (2, lg_snap.values, lg_snap.next)
    assert await result_of(ours, None, "1") == await theirs.ainvoke(None, cfg()) == 20


def test_a_one_value_state_takes_no_input_or_output_schema() -> None:
    # ours: its input and output are the value (LangGraph's would read the other schema's
    # keys as channels beside __root__)
    class In(TypedDict):
        x: int

    with pytest.raises(ConfigurationError, match="one-value state"):
        OURS.StateGraph(int, input_schema=In)


def two_letters(g: Any, cp: Any) -> Any:
    builder = g.StateGraph(Annotated[list, operator.add])
    builder.add_node("a", lambda v: ["a"]).add_node("b", lambda v: ["b"])
    return builder.add_edge(g.START, "a").add_edge("a", "b").compile(checkpointer=cp)


async def test_a_one_value_state_through_every_driver_and_stream_mode(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel_async.py's list states streamed (values, updates, tasks), and
    # ours driven step by step, in a Runtime and by bulk_update_state: the value throughout
    ours = two_letters(OURS, checkpointer)
    theirs = two_letters(THEIRS, lg_memory.InMemorySaver())
    modes = ["values", "updates"]
    lg_items = [i async for i in theirs.astream(["0"], cfg(), stream_mode=modes)]
    assert [i async for i in ours.stream(["0"], thread_id="1", mode=modes)] == lg_items
    assert lg_items[-1] == ("values", ["0", "a", "b"])
    tasks = [p async for p in ours.stream(["1"], thread_id="2", mode="tasks")]
    assert [(p["name"], p.get("input"), p.get("result")) for p in tasks][:2] == [
        ("a", ["1"], None),
        ("a", None, ["a"]),
    ]
    async with ours.iter(["2"], thread_id="3") as run:
        steps = [step async for step in run.supersteps()]
    assert steps[-1].result.state == ["2", "a", "b"]
    async with Runtime(testing=True) as rt:
        handle = await rt.start_graph(ours, ["3"], thread_id="4")
        assert (await handle.result()).output == ["3", "a", "b"]
    await ours.bulk_update_state("4", [[ours_graph.StateUpdate(values=["z"], as_node="a")]])
    assert (await ours.get_state("4")).values == ["3", "a", "b", "z"]


# -- a tuple in a checkpoint ------------------------------------------------------------------


class Tuples(TypedDict, total=False):
    untyped: Any
    nested: list
    mapping: dict
    typed: tuple[int, ...]
    seen: Any


def tuples_graph(g: Any, cp: Any) -> Any:
    def write(state: Any) -> dict[str, Any]:
        return {
            "untyped": (1, 2),
            "nested": [(3, 4)],
            "mapping": {"k": (5,)},
            "typed": (6, 7),
        }

    def fan(state: Any) -> Any:
        return [g.Send("read", (8, 9))]

    def read(arg: Any) -> dict[str, Any]:
        return {"seen": [type(arg).__name__, g.interrupt((10, 11))]}

    builder = g.StateGraph(Tuples).add_node("write", write).add_node("read", read)
    builder.add_edge(g.START, "write").add_conditional_edges("write", fan, ["read"])
    return builder.compile(checkpointer=cp, interrupt_before=["read"])


async def test_a_tuple_comes_back_from_every_checkpointer_as_langgraph_s_saver_gives_it(
    make_checkpointer: Any,
) -> None:
    # LangGraph: libs/checkpoint/tests/test_jsonplus.py::test_serde_jsonplus's round trip
    # (ormsgpack writes a tuple as an array: read back a list), through a graph on its
    # InMemorySaver: a tuple in
    # an untyped, list or dict field, a Send's argument and an interrupt's value saved at a
    # pause come back lists, from our every backend alike (a run's own steps keep the
    # tuple, as LangGraph's channels do). A field typed as a tuple comes back a tuple here,
    # on purpose (docs/graph.md, "Reducers": operator.add on a tuple field goes on after a
    # checkpoint), where LangGraph's is a list.
    cp = await make_checkpointer()
    ours = tuples_graph(OURS, cp)
    theirs = tuples_graph(THEIRS, lg_memory.InMemorySaver())
    lg_first = await theirs.ainvoke({}, cfg())
    first = (await ours.run({}, thread_id="1")).state
    assert first["untyped"] == lg_first["untyped"] == (1, 2)  # the run's own: a tuple
    assert type(first["untyped"]) is type(lg_first["untyped"]) is tuple
    await theirs.ainvoke(None, cfg())
    await ours.run(None, thread_id="1")  # the Send read back from the checkpoint
    lg_snap = await theirs.aget_state(cfg())
    fresh = tuples_graph(OURS, cp)  # the thread read back (a graph that never ran it)
    snap = await fresh.get_state("1")
    assert [i.value for i in snap.interrupts] == [i.value for i in lg_snap.interrupts]
    assert [i.value for i in snap.interrupts] == [[10, 11]]
    lg_values = dict(lg_snap.values)
    assert lg_values.pop("typed") == [6, 7]
    assert snap.values == {**lg_values, "typed": (6, 7)}
    assert snap.values["untyped"] == [1, 2] and snap.values["nested"] == [[3, 4]]
    await theirs.ainvoke(THEIRS.Command(resume=(12,)), cfg())
    await fresh.run(OURS.Command(resume=(12,)), thread_id="1")
    lg_seen = (await theirs.aget_state(cfg())).values["seen"]
    assert (await fresh.get_state("1")).values["seen"] == lg_seen == ["list", [12]]
