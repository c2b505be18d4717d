"""LangGraph's ``add_messages`` tests (``libs/langgraph/tests/test_messages_state.py``),
ported: each test names the one it follows and checks ours against LangGraph's own reducer
on the same input. Ours takes LangChain messages and plain dicts (a dict whose ``type`` is
``"remove"`` is a removal). Not ported: ``add_messages(format=...)``, ``mode="append_only"``
and ``push_message``, which ours does not have."""

from __future__ import annotations

import copy
import operator
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, cfg, lg_message, pair
from pydantic import BaseModel

from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import REMOVE_ALL_MESSAGES, add_messages
from tinyagents.store.checkpoint import Checkpointer

messages = pytest.importorskip("langchain_core.messages")
AIMessage = messages.AIMessage
HumanMessage = messages.HumanMessage
RemoveMessage = messages.RemoveMessage
SystemMessage = messages.SystemMessage


def both(left: Any, right: Any) -> tuple[list[Any], list[Any]]:
    """``(ours, theirs)``: each reducer on its own copy of the input (both set ids in place)."""
    ours = add_messages(copy.deepcopy(left), copy.deepcopy(right))
    theirs = lg_message.add_messages(copy.deepcopy(left), copy.deepcopy(right))
    return list(ours), list(theirs)


def contents(merged: list[Any]) -> list[tuple[str, Any]]:
    return [(type(m).__name__, m.content) for m in merged]


def test_add_single_message() -> None:
    # LangGraph: test_add_single_message
    ours, theirs = both([HumanMessage("Hello", id="1")], AIMessage("Hi there!", id="2"))
    assert ours == theirs == [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]


def test_add_multiple_messages() -> None:
    # LangGraph: test_add_multiple_messages
    right = [AIMessage("Hi there!", id="2"), SystemMessage("System message", id="3")]
    ours, theirs = both([HumanMessage("Hello", id="1")], right)
    assert ours == theirs == [HumanMessage("Hello", id="1"), *right]


def test_update_existing_message() -> None:
    # LangGraph: test_update_existing_message
    ours, theirs = both([HumanMessage("Hello", id="1")], HumanMessage("Hello again", id="1"))
    assert ours == theirs == [HumanMessage("Hello again", id="1")]
    # the same with dicts: the one with the id is replaced where it stands
    assert add_messages(
        [{"id": "1", "content": "a"}, {"id": "2"}], {"id": "1", "content": "b"}
    ) == [
        {"id": "1", "content": "b"},
        {"id": "2"},
    ]


def test_missing_ids() -> None:
    # LangGraph: test_missing_ids
    ours, theirs = both([HumanMessage("Hello")], [AIMessage("Hi there!")])
    assert len(ours) == len(theirs) == 2
    for merged in (ours, theirs):
        assert all(isinstance(m.id, str) and uuid.UUID(m.id).version == 4 for m in merged)
        assert len({m.id for m in merged}) == 2


def test_duplicates_in_input() -> None:
    # LangGraph: test_duplicates_in_input
    right = [AIMessage("Hi there!", id="1"), AIMessage("Hi there again!", id="1")]
    ours, theirs = both([], right)
    assert ours == theirs == [AIMessage("Hi there again!", id="1")]


def test_remove_message() -> None:
    # LangGraph: test_remove_message
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]
    ours, theirs = both(left, RemoveMessage(id="2"))
    assert ours == theirs == [HumanMessage("Hello", id="1")]
    assert add_messages([{"id": "1"}, {"id": "2"}], {"type": "remove", "id": "2"}) == [{"id": "1"}]


def test_duplicate_remove_message() -> None:
    # LangGraph: test_duplicate_remove_message
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]
    ours, theirs = both(left, [RemoveMessage(id="2"), RemoveMessage(id="2")])
    assert ours == theirs == [HumanMessage("Hello", id="1")]


def test_remove_nonexistent_message() -> None:
    # LangGraph: test_remove_nonexistent_message
    match = "Attempting to delete a message with an ID that doesn't exist"
    for reducer in (add_messages, lg_message.add_messages):
        with pytest.raises(ValueError, match=match):
            reducer([HumanMessage("Hello", id="1")], RemoveMessage(id="2"))
    with pytest.raises(ValueError, match=match):
        add_messages([{"id": "1"}], [{"type": "remove", "id": "2"}])


def test_mixed_operations() -> None:
    # LangGraph: test_mixed_operations
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]
    right = [
        HumanMessage("Updated hello", id="1"),
        RemoveMessage(id="2"),
        SystemMessage("New message", id="3"),
    ]
    ours, theirs = both(left, right)
    assert (
        ours
        == theirs
        == [HumanMessage("Updated hello", id="1"), SystemMessage("New message", id="3")]
    )


def test_empty_inputs() -> None:
    # LangGraph: test_empty_inputs
    hello = HumanMessage("Hello", id="1")
    assert both([], []) == ([], [])
    assert both([], [hello]) == ([hello], [hello])
    assert both([hello], []) == ([hello], [hello])


def test_non_list_inputs() -> None:
    # LangGraph: test_non_list_inputs
    ours, theirs = both(HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2"))
    assert ours == theirs == [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]


def test_delete_all() -> None:
    # LangGraph: test_delete_all
    left = [HumanMessage("Hello", id="1"), AIMessage("Hi there!", id="2")]
    ours, theirs = both(left, [RemoveMessage(id="1"), RemoveMessage(id="2")])
    assert ours == theirs == []


def test_remove_all_messages() -> None:
    # LangGraph: test_remove_all_messages (its three cases, messages without ids)
    left = [HumanMessage("Hello"), AIMessage("Hi there!")]
    remove_all = RemoveMessage(id=REMOVE_ALL_MESSAGES)
    assert both(left, [remove_all]) == ([], [])
    ours, theirs = both(left, [remove_all, HumanMessage("Updated hello")])
    assert contents(ours) == contents(theirs) == [("HumanMessage", "Updated hello")]
    # removing the messages before it in the same write
    right = [HumanMessage("Updated hello"), remove_all, HumanMessage("Updated hi there")]
    ours, theirs = both(left, right)
    assert contents(ours) == contents(theirs) == [("HumanMessage", "Updated hi there")]
    assert all(uuid.UUID(m.id).version == 4 for m in ours)


def test_remove_all_in_the_middle_keeps_what_follows_the_last_one() -> None:
    # LangGraph: test_remove_all_messages, a write with remove-alls in the middle: the result
    # is exactly the messages after the last one, whatever came before it in the write
    left = [HumanMessage("a", id="1"), AIMessage("b", id="2")]
    remove_all = RemoveMessage(id=REMOVE_ALL_MESSAGES)
    writes = [
        [HumanMessage("x", id="1"), remove_all, HumanMessage("c", id="3")],
        [remove_all, HumanMessage("c", id="3"), remove_all, AIMessage("d", id="4")],
        [HumanMessage("c", id="3"), RemoveMessage(id="3"), remove_all, AIMessage("d", id="4")],
        [RemoveMessage(id="1"), remove_all, HumanMessage("a", id="1")],
        [AIMessage("d", id="4"), remove_all],
    ]
    for right in writes:
        ours, theirs = both(left, right)
        assert ours == theirs, right
    # a dict removal ({"type": "remove"}) with the remove-all id does the same
    dicts = [{"id": "x"}, {"type": "remove", "id": REMOVE_ALL_MESSAGES}, {"id": "y"}]
    assert add_messages([{"id": "w"}], dicts) == [{"id": "y"}]


def test_a_removal_before_a_remove_all_is_dropped_with_the_rest() -> None:
    # LangGraph: test_remove_all_messages / test_remove_nonexistent_message together. A
    # removal of an id that is not there is an error, but one written before a remove-all
    # goes with everything else before it: LangGraph keeps only what follows the last one.
    # Ours raised "Attempting to delete a message with an ID that doesn't exist"
    left = [HumanMessage("a", id="1")]
    right = [
        RemoveMessage(id="nope"),
        RemoveMessage(id=REMOVE_ALL_MESSAGES),
        HumanMessage("c", id="3"),
    ]
    ours, theirs = both(left, right)
    assert ours == theirs == [HumanMessage("c", id="3")]
    dicts = [{"type": "remove", "id": "nope"}, {"type": "remove", "id": REMOVE_ALL_MESSAGES}]
    assert add_messages([{"id": "1"}], [*dicts, {"id": "3"}]) == [{"id": "3"}]
    # after the last remove-all a removal of a missing id is still an error (below)
    with pytest.raises(ValueError, match="doesn't exist \\('nope'\\)"):
        add_messages(left, [RemoveMessage(id=REMOVE_ALL_MESSAGES), RemoveMessage(id="nope")])


def test_what_follows_a_remove_all_is_merged_as_any_write() -> None:
    # LangGraph: test_remove_all_messages. A deliberate difference (docs/graph.md, "Reducers"):
    # LangGraph returns the messages after the last remove-all as written, without merging
    # them, so two of one id both stay and a RemoveMessage after it stays in the state (it
    # would go to the model). Ours merges them as any other write: one message per id, and a
    # removal deletes (or, of an id not there, raises) — the checkpoint replays a step's
    # writes through the same merge, so the state must be what that merge gives.
    remove_all = RemoveMessage(id=REMOVE_ALL_MESSAGES)
    left = [HumanMessage("a", id="1")]
    right = [remove_all, HumanMessage("c", id="3"), HumanMessage("d", id="3")]
    ours, theirs = both(left, right)
    assert theirs == [HumanMessage("c", id="3"), HumanMessage("d", id="3")]
    assert ours == [HumanMessage("d", id="3")]
    ours, theirs = both(left, [remove_all, HumanMessage("c", id="3"), RemoveMessage(id="3")])
    assert theirs == [HumanMessage("c", id="3"), RemoveMessage(id="3")]
    assert ours == []
    with pytest.raises(ValueError, match="doesn't exist \\('1'\\)"):
        add_messages(left, [remove_all, RemoveMessage(id="1")])  # LangGraph keeps the removal


class Chat(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    turns: Annotated[int, operator.add]


class TheirChat(TypedDict, total=False):
    messages: Annotated[list[Any], lg_message.add_messages]
    turns: Annotated[int, operator.add]


class PydanticChat(BaseModel):
    messages: Annotated[list[messages.AnyMessage], add_messages]


class TheirPydanticChat(BaseModel):
    messages: Annotated[list[messages.AnyMessage], lg_message.add_messages]


@pytest.mark.parametrize("schemas", [(Chat, TheirChat), (PydanticChat, TheirPydanticChat)])
async def test_messages_state(checkpointer: Checkpointer, schemas: tuple[type, type]) -> None:
    # LangGraph: test_messages_state (MessagesState and its pydantic form): a ("user", ...)
    # input is a HumanMessage and every message gets an id
    def build(g: Any) -> Any:
        graph = g.StateGraph(schemas[0] if g is OURS else schemas[1])
        graph.add_node("foo", lambda state: {"messages": [HumanMessage("foo")]})
        return graph.add_edge(g.START, "foo").add_edge("foo", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"messages": [("user", "meow")]}, cfg())
    result = await ours.run({"messages": [("user", "meow")]}, thread_id="1")
    assert result.status == "completed", result.error
    expected = [("HumanMessage", "meow"), ("HumanMessage", "foo")]
    assert contents(result.state["messages"]) == contents(out["messages"]) == expected
    assert all(uuid.UUID(m.id).version == 4 for m in result.state["messages"])
    saved = (await ours.get_state("1")).values["messages"]
    assert saved == result.state["messages"]


async def test_a_node_resetting_the_history_mid_write(checkpointer: Checkpointer) -> None:
    # LangGraph: test_remove_all_messages, in a graph: a node's write that removes a message
    # that is not there and then everything, and two parallel writers of one step (LangGraph
    # folds their writes one by one). The state, and the checkpoint read back, agree.
    def build(g: Any) -> Any:
        remove_all = RemoveMessage(id=lg_message.REMOVE_ALL_MESSAGES)

        def reset(state: Any) -> dict[str, Any]:
            return {
                "messages": [RemoveMessage(id="gone"), remove_all, AIMessage("summary", id="s")],
                "turns": 1,
            }

        def note(state: Any) -> dict[str, Any]:
            return {"messages": [AIMessage("note", id="n")], "turns": 1}

        graph = g.StateGraph(Chat if g is OURS else TheirChat)
        graph.add_node("reset", reset).add_node("note", note)
        graph.add_edge(g.START, "reset").add_edge(g.START, "note")
        return graph.add_edge("reset", g.END).add_edge("note", g.END)

    ours, theirs = pair(build, checkpointer)
    start = {"messages": [HumanMessage("hi", id="u0"), AIMessage("hello", id="a0")]}
    out = await theirs.ainvoke(start, cfg())
    result = await ours.run(start, thread_id="1")
    assert result.status == "completed", result.error
    assert [m.id for m in result.state["messages"]] == [m.id for m in out["messages"]]
    # a step's writes apply in task order ("note" before "reset"): the reset drops the note
    assert [m.id for m in out["messages"]] == ["s"]
    assert (await ours.get_state("1")).values["messages"] == result.state["messages"]


async def test_a_pydantic_messages_field_refuses_what_is_no_message() -> None:
    # LangGraph: test_messages_state (pydantic form), with input that is no message: LangGraph
    # raises from its coercion (NotImplementedError, "Unsupported message type"). Ours raised
    # LangChain's bare TypeError out of run(); it is an InvalidUpdateError naming the field.
    # So is a dict LangChain cannot read as a message (no role, an unknown role), where
    # LangGraph raises LangChain's ValueError.
    def build(g: Any) -> Any:
        graph = g.StateGraph(PydanticChat).add_node("n", lambda state: {})
        return graph.add_edge(g.START, "n").add_edge("n", g.END)

    graph = build(OURS).compile()
    no_role, odd_role = {"content": "hi"}, {"role": "weird", "content": "hi"}
    for bad in ([42], [("user", "hi", "x")], [no_role], [odd_role]):
        with pytest.raises(InvalidUpdateError, match="invalid graph input for 'messages'"):
            await graph.run({"messages": bad})


@pytest.mark.parametrize(
    "given",
    [
        [{"role": "user", "content": "hi"}],
        {"role": "user", "content": "hi"},
        [{"role": "assistant", "content": "hi", "id": "a1"}, {"role": "system", "content": "s"}],
        ["hi"],
        "hi",
        [{"type": "human", "content": "hi"}],
    ],
)
async def test_a_pydantic_messages_field_reads_role_dicts_as_langgraph(
    checkpointer: Checkpointer, given: Any
) -> None:
    # LangGraph: test_messages_state (pydantic form) with the other message-like input its
    # add_messages takes (convert_to_messages): a role dict, a string. A field typed as
    # LangChain messages cannot hold a dict, so ours makes the LangChain message of it, as
    # LangGraph does (a TypedDict or dataclass state's too, and a node's writes:
    # test_langchain_typed_node_writes.py).
    def build(g: Any) -> Any:
        graph = g.StateGraph(PydanticChat if g is OURS else TheirPydanticChat)
        graph.add_node("n", lambda state: {"messages": [AIMessage("yo", id="y")]})
        return graph.add_edge(g.START, "n").add_edge("n", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"messages": copy.deepcopy(given)}, cfg())
    result = await ours.run({"messages": copy.deepcopy(given)}, thread_id="1")
    assert result.status == "completed", result.error
    got = result.state["messages"]
    assert contents(got) == contents(out["messages"])
    assert [m.id for m in got if m.id in ("a1", "y")] == [
        m.id for m in out["messages"] if m.id in ("a1", "y")
    ]
    assert (await ours.get_state("1")).values["messages"] == got
    # update_state reads it so too
    await ours.update_state("1", {"messages": [{"role": "user", "content": "more"}]})
    assert contents((await ours.get_state("1")).values["messages"])[-1] == (
        "HumanMessage",
        "more",
    )
