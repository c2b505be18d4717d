"""LangGraph's ``Overwrite``: a write that bypasses a reducer (``langgraph.types.Overwrite``,
ported from its docstring's example and ``test_channels``' ``BinaryOperatorAggregate`` cases).
Each program runs on both libraries (``langgraph_kit``); ours on every checkpointer backend."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, cfg, lg_errors, lg_types, pair
from pydantic import BaseModel

from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import Command, Overwrite, add_messages
from tinyagents.store.checkpoint import Checkpointer


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    total: Annotated[int, operator.add]


class Chat(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]


def overwrite_of(g: Any) -> Any:
    return Overwrite if g is OURS else lg_types.Overwrite


def docstring_graph(g: Any) -> Any:
    """LangGraph's own example: node_b's Overwrite replaces what operator.add built."""
    wrap = overwrite_of(g)
    graph = g.StateGraph(State)
    graph.add_node("node_a", lambda s: {"items": ["a"], "total": 1})
    graph.add_node("node_b", lambda s: {"items": wrap(["b"]), "total": wrap(10)})
    graph.add_edge(g.START, "node_a").add_edge("node_a", "node_b")
    return graph.add_edge("node_b", g.END)


async def test_overwrite_replaces_a_reducer_channels_value(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(docstring_graph, checkpointer)
    expected = await theirs.ainvoke({"items": ["START"], "total": 5}, cfg())
    assert expected == {"items": ["b"], "total": 10}  # not ["START", "a", "b"], 6
    result = await ours.run({"items": ["START"], "total": 5}, thread_id="1")
    assert result.state == expected
    # the checkpoint holds the replaced value: a reload, the history and later steps agree
    assert (await ours.get_state("1")).values == expected
    past = [
        (await ours.get_state("1", checkpoint_id=c.checkpoint_id)).values
        for c in await ours.history("1")
    ]
    assert past == [s.values async for s in theirs.aget_state_history(cfg())]
    assert [state["items"] for state in past] == [["b"], ["START", "a"], ["START"], []]
    again = await ours.run({"items": ["more"]}, thread_id="1")
    assert again.state["items"] == (await theirs.ainvoke({"items": ["more"]}, cfg()))["items"]


def parallel_graph(g: Any, *, twice: bool = False) -> Any:
    """Three writers in one step: an append before the Overwrite (in task order), the
    Overwrite, an append after it; with ``twice`` the last one overwrites too."""
    wrap = overwrite_of(g)
    graph = g.StateGraph(State)
    graph.add_node("a_before", lambda s: {"items": ["before"]})
    graph.add_node("b_over", lambda s: {"items": wrap(["over"])})
    graph.add_node("c_after", lambda s: {"items": wrap(["again"]) if twice else ["after"]})
    for name in ("a_before", "b_over", "c_after"):
        graph.add_edge(g.START, name).add_edge(name, g.END)
    return graph


async def test_the_writes_after_an_overwrite_in_its_step_are_dropped(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(parallel_graph, checkpointer)
    expected = await theirs.ainvoke({"items": ["x"]}, cfg())
    assert expected == {"items": ["over"], "total": 0}
    assert (await ours.run({"items": ["x"]}, thread_id="1")).state == expected
    assert (await ours.get_state("1")).values == expected


async def test_two_overwrites_of_a_channel_in_one_step_fail_it() -> None:
    ours, theirs = pair(lambda g: parallel_graph(g, twice=True), None)
    with pytest.raises(lg_errors.InvalidUpdateError, match="only one Overwrite"):
        await theirs.ainvoke({"items": []})
    result = await ours.run({"items": []})
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "only one Overwrite value per super-step" in str(result.error)
    assert "'items'" in str(result.error)


@pytest.mark.parametrize(
    "form",
    [{"__overwrite__": ["json"]}, {"type": "__overwrite__", "value": ["json"]}],
    ids=["sentinel-key", "serialized-dataclass"],
)
async def test_the_dict_forms_of_an_overwrite_work_as_plain_json(
    form: dict[str, Any], checkpointer: Checkpointer
) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(State).add_node("n", lambda s: {"items": dict(form)})
        return graph.add_edge(g.START, "n").add_edge("n", g.END)

    ours, theirs = pair(build, checkpointer)
    expected = await theirs.ainvoke({"items": ["x"]}, cfg())
    assert expected == {"items": ["json"], "total": 0}
    assert (await ours.run({"items": ["x"]}, thread_id="1")).state == expected


async def test_an_overwrite_of_messages_gives_them_ids_a_later_removal_can_use(
    checkpointer: Checkpointer,
) -> None:
    from langchain_core.messages import HumanMessage, RemoveMessage

    def build(g: Any) -> Any:
        wrap = overwrite_of(g)
        graph = g.StateGraph(Chat)
        graph.add_node("reset", lambda s: {"messages": wrap([HumanMessage("only this")])})
        graph.add_edge(g.START, "reset").add_edge("reset", g.END)
        return graph

    ours = build(OURS).compile(checkpointer=checkpointer)
    result = await ours.run({"messages": [HumanMessage("old")]}, thread_id="1")
    [message] = result.state["messages"]
    assert message.content == "only this" and message.id
    await ours.update_state("1", {"messages": [RemoveMessage(id=message.id)]}, as_node="reset")
    assert (await ours.get_state("1")).values["messages"] == []


async def test_an_overwrite_in_a_paused_steps_saved_writes_survives_the_resume(
    checkpointer: Checkpointer,
) -> None:
    # the step's other task pauses: the Overwrite is saved as a pending write (plain JSON),
    # read back on resume and applied as an Overwrite, not appended as a dict
    def build(g: Any) -> Any:
        wrap = overwrite_of(g)

        def ask(state: Any) -> dict[str, Any]:
            return {"items": [g.interrupt("more?")]}

        graph = g.StateGraph(State)
        graph.add_node("over", lambda s: {"items": wrap(["over"])})
        graph.add_node("ask", ask)
        for name in ("over", "ask"):
            graph.add_edge(g.START, name).add_edge(name, g.END)
        return graph

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"items": ["x"]}, cfg())
    expected = await theirs.ainvoke(lg_types.Command(resume="yes"), cfg())
    assert expected == {"items": ["over"], "total": 0}  # "over" drops the answer written after it
    paused = await ours.run({"items": ["x"]}, thread_id="1")
    assert paused.status == "interrupted"
    result = await ours.run(Command(resume="yes"), thread_id="1")
    assert result.state == expected


async def test_update_state_with_an_overwrite_replaces_the_value(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(docstring_graph, checkpointer)
    await theirs.ainvoke({"items": ["x"]}, cfg())
    await theirs.aupdate_state(cfg(), {"items": lg_types.Overwrite(["edited"])}, as_node="node_b")
    await ours.run({"items": ["x"]}, thread_id="1")
    await ours.update_state("1", {"items": Overwrite(["edited"])}, as_node="node_b")
    expected = (await theirs.aget_state(cfg())).values
    assert expected["items"] == ["edited"]
    assert (await ours.get_state("1")).values == expected


class PydanticItems(BaseModel):
    items: Annotated[list[str], operator.add] = []


async def test_an_overwrite_in_a_pydantic_states_input_and_update_state(
    checkpointer: Checkpointer,
) -> None:
    # each value was validated as the field's type: Overwrite([...]) was "not a valid list"
    def build(g: Any) -> Any:
        graph = g.StateGraph(PydanticItems).add_node("a", lambda s: {"items": ["a"]})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    expected = await theirs.ainvoke({"items": lg_types.Overwrite(["in"])}, cfg())
    assert expected == {"items": ["in", "a"]}
    assert (await ours.run({"items": Overwrite(["in"])}, thread_id="1")).state == expected
    await ours.update_state("1", {"items": {"__overwrite__": ["reset"]}}, as_node="a")
    assert (await ours.get_state("1")).values == {"items": ["reset"]}
    with pytest.raises(InvalidUpdateError, match="items"):
        await ours.update_state("1", {"items": Overwrite([1])}, as_node="a")  # still checked


@pytest.mark.parametrize("value", [None, "text", 5], ids=["none", "str", "int"])
async def test_an_overwrite_that_is_no_list_is_stored_as_it_is(
    value: Any, checkpointer: Checkpointer
) -> None:
    # was wrapped as one item ([None]): LangGraph's Overwrite bypasses the reducer whole. The
    # step's other task pauses, so the Overwrite goes through the saved pending writes too
    def build(g: Any) -> Any:
        wrap = overwrite_of(g)
        graph = g.StateGraph(State).add_node("start", lambda s: {"items": ["a"]})
        graph.add_node("over", lambda s: {"items": wrap(value)})
        graph.add_node("ask", lambda s: {"total": len(g.interrupt("more?"))})
        graph.add_edge(g.START, "start")
        for name in ("over", "ask"):
            graph.add_edge("start", name).add_edge(name, g.END)
        return graph

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"items": ["x"]}, cfg())
    expected = await theirs.ainvoke(lg_types.Command(resume="yes"), cfg())
    assert expected == {"items": value, "total": 3}
    assert (await ours.run({"items": ["x"]}, thread_id="1")).status == "interrupted"
    assert (await ours.run(Command(resume="yes"), thread_id="1")).state == expected
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


async def test_an_overwrite_with_a_tuple_keeps_it_a_tuple_until_saved(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's Overwrite bypasses the reducer whole: the channel holds the tuple (the
    # run's output and its values stream show it), and its checkpoint, read back, a list.
    # Ours made it the list at once
    def build(g: Any) -> Any:
        wrap = overwrite_of(g)
        graph = g.StateGraph(State).add_node("over", lambda s: {"items": wrap(("a", "b"))})
        return graph.add_edge(g.START, "over").add_edge("over", g.END)

    ours, theirs = pair(build, checkpointer)
    expected = await theirs.ainvoke({"items": ["x"]}, cfg())
    assert expected == {"items": ("a", "b"), "total": 0}
    assert type(expected["items"]) is tuple
    result = await ours.run({"items": ["x"]}, thread_id="1")
    assert result.state == expected and type(result.state["items"]) is tuple
    streamed = [i async for i in ours.stream({"items": ["x"]}, thread_id="2", mode="values")]
    theirs_streamed = [
        i async for i in theirs.astream({"items": ["x"]}, cfg("2"), stream_mode="values")
    ]
    assert streamed == theirs_streamed and type(streamed[-1]["items"]) is tuple
    saved = (await theirs.aget_state(cfg())).values
    assert saved == {"items": ["a", "b"], "total": 0}
    assert (await ours.get_state("1")).values == saved


def tuple_then_add_graph(g: Any, later: Any) -> Any:
    """``over`` writes ``Overwrite(("a", "b"))``, then ``add`` writes ``later`` with the
    channel's ``operator.add``."""
    wrap = overwrite_of(g)
    graph = g.StateGraph(State)
    graph.add_node("over", lambda s: {"items": wrap(("a", "b"))})
    graph.add_node("add", lambda s: {"items": later})
    graph.add_edge(g.START, "over").add_edge("over", "add")
    return graph.add_edge("add", g.END)


@pytest.mark.parametrize("later", [["c"], "c"], ids=["list", "one-item"])
async def test_adding_to_an_overwritten_tuple_fails_the_step_as_langgraphs(
    later: Any, checkpointer: Checkpointer
) -> None:
    # LangGraph's operator.add on the tuple an Overwrite left is tuple + list: a TypeError
    # that fails the step. Ours made the tuple a list and extended it: ("a", "b", "c")
    ours, theirs = pair(lambda g: tuple_then_add_graph(g, later), checkpointer)
    with pytest.raises(TypeError, match="can only concatenate tuple"):
        await theirs.ainvoke({"items": ["x"]}, cfg())
    result = await ours.run({"items": ["x"]}, thread_id="1")
    assert result.status == "failed"
    assert isinstance(result.error, TypeError)
    assert "can only concatenate tuple" in str(result.error)
    # the failed step changed nothing: the thread holds the Overwrite's value, read back a
    # list, and the failed node's saved write, which get_state and a run that goes on apply
    # to it (without running the node again), as LangGraph's
    if isinstance(later, list):
        theirs_state = await theirs.aget_state(cfg())
        assert theirs_state.values == {"items": ["a", "b", "c"], "total": 0}
        assert (await ours.get_state("1")).values == theirs_state.values
        expected = await theirs.ainvoke(None, cfg())
        assert expected == {"items": ["a", "b", "c"], "total": 0}
        assert (await ours.run(None, thread_id="1")).state == expected


async def test_a_tuple_added_to_an_overwritten_tuple_is_a_tuple_as_langgraphs(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: tuple_then_add_graph(g, ("c",)), checkpointer)
    expected = await theirs.ainvoke({"items": ["x"]}, cfg())
    assert expected == {"items": ("a", "b", "c"), "total": 0}
    result = await ours.run({"items": ["x"]}, thread_id="1")
    assert result.state == expected and type(result.state["items"]) is tuple
    saved = (await theirs.aget_state(cfg())).values
    assert saved == {"items": ["a", "b", "c"], "total": 0}
    assert (await ours.get_state("1")).values == saved
    # read back a list, the channel is extended again, as LangGraph's
    again = await theirs.ainvoke({"items": ["d"]}, cfg())
    assert (await ours.run({"items": ["d"]}, thread_id="1")).state == again


class Defaulted(BaseModel):
    items: Annotated[list[str], operator.add] = ()  # type: ignore[assignment]


async def test_a_list_channels_tuple_default_is_still_extended() -> None:
    # LangGraph's channel starts from list(), whatever the default; ours from the default,
    # made a list so that operator.add extends it rather than failing as a tuple would
    def build(g: Any) -> Any:
        graph = g.StateGraph(Defaulted).add_node("a", lambda s: {"items": ["a"]})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, None)
    expected = await theirs.ainvoke({})
    assert expected == {"items": ["a"]}
    assert (await ours.run({})).state == expected


def one_write_graph(g: Any, schema: Any, write: dict[str, Any]) -> Any:
    graph = g.StateGraph(schema).add_node("a", lambda s: write)
    return graph.add_edge(g.START, "a").add_edge("a", g.END)


@pytest.mark.parametrize("write", [("x", "y"), "z", 5], ids=["tuple", "str", "int"])
async def test_operator_add_on_a_list_refuses_a_write_that_is_no_list(
    write: Any, checkpointer: Checkpointer
) -> None:
    # LangGraph's operator.add is list + write: a tuple, a string or one item is Python's
    # TypeError, which fails the step (and run input). Ours appended or extended with it.
    ours, theirs = pair(lambda g: one_write_graph(g, State, {"items": write}), checkpointer)
    with pytest.raises(TypeError, match="can only concatenate list") as theirs_error:
        await theirs.ainvoke({}, cfg())
    result = await ours.run({}, thread_id="1")
    assert result.status == "failed" and type(result.error) is TypeError
    assert str(result.error) == str(theirs_error.value)
    with pytest.raises(TypeError, match="can only concatenate list"):
        await theirs.ainvoke({"items": write}, cfg("2"))
    with pytest.raises((TypeError, InvalidUpdateError), match="can only concatenate list"):
        await ours.run({"items": write}, thread_id="2")
    # update_state names the reducer that refused, and changes nothing
    await ours.update_state("3", {"items": ["x"]})
    with pytest.raises(InvalidUpdateError, match=r"'items' \(add\) refused"):
        await ours.update_state("3", {"items": write})
    assert (await ours.get_state("3")).values == {"items": ["x"], "total": 0}


class Tupled(TypedDict, total=False):
    items: Annotated[tuple[str, ...], operator.add]


async def test_operator_add_on_a_tuple_field_holds_a_tuple(checkpointer: Checkpointer) -> None:
    # LangGraph's channel starts from tuple() and adds as Python does: a tuple write makes a
    # longer tuple, a list is a TypeError. Ours held a list and extended it with anything.
    ours, theirs = pair(lambda g: one_write_graph(g, Tupled, {"items": ("a",)}), checkpointer)
    expected = await theirs.ainvoke({"items": ("x",)}, cfg())
    assert expected == {"items": ("x", "a")}
    result = await ours.run({"items": ("x",)}, thread_id="1")
    assert result.state == expected and type(result.state["items"]) is tuple
    # read back from its checkpoint it is a tuple still, so the thread goes on (LangGraph's
    # reads back a list, to which its next tuple write fails to add: see docs/graph.md)
    saved = (await ours.get_state("1")).values["items"]
    assert saved == ("x", "a") and type(saved) is tuple
    again = await ours.run({"items": ("y",)}, thread_id="1")
    assert again.state == {"items": ("x", "a", "y", "a")}
    ours, theirs = pair(lambda g: one_write_graph(g, Tupled, {"items": ["a"]}), checkpointer)
    with pytest.raises(TypeError, match="can only concatenate tuple") as theirs_error:
        await theirs.ainvoke({}, cfg())
    failed = await ours.run({}, thread_id="2")
    assert failed.status == "failed" and str(failed.error) == str(theirs_error.value)


async def test_a_subgraph_hands_a_tuple_field_what_it_added(checkpointer: Checkpointer) -> None:
    # a sub-graph node gives back what it changed of a shared reducer channel (docs/graph.md,
    # "Sub-graphs"): for a tuple field, a tuple its parent's operator.add takes (a list would
    # be the TypeError); an Overwrite of a list there is held as a tuple, as the field says
    def build(g: Any, write: Any) -> Any:
        inner = one_write_graph(g, Tupled, {"items": write}).compile()
        graph = g.StateGraph(Tupled).add_node("a", lambda s: {"items": ("a",)})
        graph.add_node("sub", inner).add_edge(g.START, "a").add_edge("a", "sub")
        return graph.add_edge("sub", g.END)

    ours, _ = pair(lambda g: build(g, ("i",)), checkpointer)
    result = await ours.run({}, thread_id="1")
    assert result.state == {"items": ("a", "i")} and type(result.state["items"]) is tuple
    ours, _ = pair(lambda g: build(g, Overwrite(["o"])), checkpointer)
    result = await ours.run({}, thread_id="2")
    assert result.state == {"items": ("o",)}
    assert (await ours.get_state("2")).values == {"items": ("o",)}
