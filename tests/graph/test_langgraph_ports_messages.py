"""Ports of LangGraph's ``add_messages`` tests (libs/langgraph/tests/test_messages.py), run
against ``tinyagents.graph.add_messages`` and LangGraph's side by side.

LangGraph turns a ``(role, content)`` tuple into a LangChain message; so does ours when
``langchain_core`` is installed (an optional dependency: without it the tuple stays one
item). Strings and dicts are ours to leave as written (docs/graph.md, "Reducers").
"""

from __future__ import annotations

import sys
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import THEIRS, cfg, lg_message, pair

from tinyagents.graph import add_messages
from tinyagents.store.checkpoint import Checkpointer

messages = pytest.importorskip("langchain_core.messages")


def shape(merged: list[Any]) -> list[tuple[str, Any]]:
    return [(type(m).__name__, m.content) for m in merged]


def test_add_single_message() -> None:
    left = [messages.HumanMessage("Hello", id="1")]
    right = messages.AIMessage("Hi there!", id="2")
    assert add_messages(left, right) == lg_message.add_messages(left, right)


def test_add_multiple_messages() -> None:
    left = [messages.HumanMessage("Hello", id="1")]
    right = [messages.AIMessage("Hi there!", id="2"), messages.SystemMessage("Sys", id="3")]
    assert add_messages(left, right) == lg_message.add_messages(left, right)


def test_update_existing_message() -> None:
    left = [messages.HumanMessage("Hello", id="1")]
    right = messages.HumanMessage("Hello again", id="1")
    assert add_messages(left, right) == [messages.HumanMessage("Hello again", id="1")]
    assert add_messages(left, right) == lg_message.add_messages(left, right)


def test_missing_ids() -> None:
    left = [messages.HumanMessage("Hello")]
    right = [messages.AIMessage("Hi there!")]
    ours, theirs = add_messages(left, right), lg_message.add_messages(left, right)
    assert shape(ours) == shape(theirs)
    assert all(uuid.UUID(m.id).version == 4 for m in ours)


def test_remove_message() -> None:
    left = [messages.HumanMessage("Hello", id="1"), messages.AIMessage("Hi there!", id="2")]
    right = messages.RemoveMessage(id="2")
    assert add_messages(left, right) == lg_message.add_messages(left, right)


def test_a_role_content_tuple_is_one_message() -> None:
    """LangGraph's shorthand: ``("user", "hi")`` is a HumanMessage. Ours took the tuple for a
    sequence of two messages, ``"user"`` and ``"hi"``."""
    ours = add_messages([], ("user", "hi"))
    theirs = lg_message.add_messages([], ("user", "hi"))
    assert shape(ours) == shape(theirs) == [("HumanMessage", "hi")]
    assert uuid.UUID(ours[0].id).version == 4


def test_role_content_tuples_in_a_list() -> None:
    right = [("user", "hi"), ("assistant", "hello"), ("system", "be brief")]
    ours = add_messages([messages.HumanMessage("a", id="1")], right)
    theirs = lg_message.add_messages([messages.HumanMessage("a", id="1")], right)
    assert shape(ours) == shape(theirs)
    assert shape(ours)[1:] == [
        ("HumanMessage", "hi"),
        ("AIMessage", "hello"),
        ("SystemMessage", "be brief"),
    ]


def test_a_role_content_tuple_without_langchain_stays_one_item(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LangChain is optional: without it a tuple is one message, as written."""
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)  # import fails
    assert add_messages([], ("user", "hi")) == [("user", "hi")]
    assert add_messages([], [("user", "hi")]) == [("user", "hi")]


def test_a_tuple_of_messages_is_still_several_messages() -> None:
    pair_of = (messages.HumanMessage("a", id="1"), messages.AIMessage("b", id="2"))
    assert add_messages([], pair_of) == list(pair_of)


class Chat(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]


class LgChat(TypedDict, total=False):
    messages: Annotated[list[Any], lg_message.add_messages]


async def test_a_node_returning_role_content_tuples(checkpointer: Checkpointer) -> None:
    """LangGraph's own docstring example: ``lambda state: {"messages": [("assistant",
    "Hello")]}``. The channel holds LangChain messages, with ids, read back the same."""

    def build(g: Any) -> Any:
        graph = g.StateGraph(LgChat if g is THEIRS else Chat)
        graph.add_node("chatbot", lambda state: {"messages": [("assistant", "Hello")]})
        return graph.add_edge(g.START, "chatbot").add_edge("chatbot", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"messages": [("user", "hi")]}, cfg())
    result = await ours.run({"messages": [("user", "hi")]}, thread_id="1")
    assert result.status == "completed", result.error
    assert shape(result.state["messages"]) == shape(out["messages"])
    assert shape(out["messages"]) == [("HumanMessage", "hi"), ("AIMessage", "Hello")]
    assert all(uuid.UUID(m.id).version == 4 for m in result.state["messages"])
    saved = (await ours.get_state("1")).values["messages"]
    assert saved == result.state["messages"]


def test_a_none_to_merge_is_langgraphs_value_error() -> None:
    left = [messages.HumanMessage("Hello", id="1")]
    with pytest.raises(ValueError, match="non-null arguments") as theirs:
        lg_message.add_messages(left, None)
    with pytest.raises(ValueError, match="non-null arguments") as ours:
        add_messages(left, None)
    assert str(ours.value) == str(theirs.value)


async def test_a_node_that_writes_none_as_its_messages_fails(checkpointer: Checkpointer) -> None:
    # LangGraph's add_messages refuses a None write ("Must specify non-null arguments for
    # both 'left' and 'right'"), failing the step; ours appended None as a message
    def build(g: Any) -> Any:
        graph = g.StateGraph(LgChat if g is THEIRS else Chat)
        graph.add_node("chatbot", lambda state: {"messages": None})
        return graph.add_edge(g.START, "chatbot").add_edge("chatbot", g.END)

    ours, theirs = pair(build, checkpointer)
    hello = [messages.HumanMessage("hi", id="1")]
    with pytest.raises(ValueError, match="non-null arguments") as raised:
        await theirs.ainvoke({"messages": hello}, cfg())
    result = await ours.run({"messages": hello}, thread_id="1")
    assert result.status == "failed"
    assert isinstance(result.error, ValueError) and str(result.error) == str(raised.value)
    # the node's write is kept, as LangGraph's: reading the thread applies it (so it raises
    # the error again, as LangGraph's aget_state does), and so does a run that goes on, which
    # fails again without running the node again
    with pytest.raises(ValueError, match="non-null arguments"):
        await theirs.aget_state(cfg())
    with pytest.raises(ValueError, match="non-null arguments"):
        await ours.get_state("1")
    with pytest.raises(ValueError, match="non-null arguments"):
        await theirs.ainvoke(None, cfg())
    again = await ours.run(None, thread_id="1")
    assert again.status == "failed" and str(again.error) == str(raised.value)


class OpenAIChat(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages(format="langchain-openai")]


class LgOpenAIChat(TypedDict, total=False):
    messages: Annotated[list[Any], lg_message.add_messages(format="langchain-openai")]


async def test_add_messages_in_openai_format(checkpointer: Checkpointer) -> None:
    # LangGraph's docstring example: add_messages(format="langchain-openai") stores the
    # messages with their contents in OpenAI's format (an image block as "image_url"), made
    # LangChain messages again (without ids, as LangGraph's conversion leaves them); ours
    # refused the keyword (a TypeError when the state was read)
    image = {"type": "image", "source_type": "base64", "data": "1234", "mime_type": "image/jpeg"}

    def build(g: Any) -> Any:
        def chatbot(state: Any) -> dict[str, Any]:
            return {"messages": [messages.AIMessage("seen", id="2"), ("user", "and?")]}

        graph = g.StateGraph(LgOpenAIChat if g is THEIRS else OpenAIChat)
        graph.add_node("chatbot", chatbot)
        return graph.add_edge(g.START, "chatbot").add_edge("chatbot", g.END)

    def plain(merged: list[Any]) -> list[tuple[str, Any, Any]]:
        return [(type(m).__name__, m.content, m.id) for m in merged]

    ours, theirs = pair(build, checkpointer)
    question = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, image]}]}
    out = await theirs.ainvoke(question, cfg())
    result = await ours.run(question, thread_id="1")
    assert result.status == "completed", result.error
    assert plain(result.state["messages"]) == plain(out["messages"])
    assert out["messages"][0].content[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64,1234"},
    }
    saved = (await ours.get_state("1")).values["messages"]
    assert plain(saved) == plain((await theirs.aget_state(cfg())).values["messages"])
    # the thread goes on from its checkpoint: every merge formats the whole list again
    out = await theirs.ainvoke({"messages": [("user", "more")]}, cfg())
    result = await ours.run({"messages": [("user", "more")]}, thread_id="1")
    assert plain(result.state["messages"]) == plain(out["messages"])
    assert len(out["messages"]) == 6


def test_an_unknown_message_format_is_langgraphs_value_error() -> None:
    left, right = [messages.HumanMessage("hi", id="1")], [messages.AIMessage("yo", id="2")]
    with pytest.raises(ValueError, match="Unrecognized format='xml'") as theirs:
        lg_message.add_messages(format="xml")(left, right)
    with pytest.raises(ValueError, match="Unrecognized format='xml'") as ours:
        add_messages(left, right, format="xml")
    assert str(ours.value) == str(theirs.value)
