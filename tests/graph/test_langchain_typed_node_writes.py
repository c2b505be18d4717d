"""A node's write to an ``add_messages`` field typed as LangChain messages
(``Annotated[list[AnyMessage], add_messages]``), as LangGraph stores it: its role dicts,
strings and ``(role, content)`` pairs are LangChain messages in the state, in a TypedDict
(LangGraph's ``MessagesState`` too), a dataclass and a pydantic state, whether the node
returns the write, returns it in a ``Command`` or runs from a ``Send``, and read back from a
checkpoint. A field whose type can hold a dict (``list``, ``list[dict]``, ``list[Any]``)
keeps dicts as written and never loads LangChain."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, cfg, lg_graph, lg_message, lg_types, pair
from pydantic import BaseModel, Field

from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import add_messages
from tinyagents.store.checkpoint import Checkpointer

messages = pytest.importorskip("langchain_core.messages")
AnyMessage = messages.AnyMessage
AIMessage = messages.AIMessage
HumanMessage = messages.HumanMessage


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class TheirChat(TypedDict):
    messages: Annotated[list[AnyMessage], lg_message.add_messages]


@dataclasses.dataclass
class DataChat:
    messages: Annotated[list[AnyMessage], add_messages] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class TheirDataChat:
    messages: Annotated[list[AnyMessage], lg_message.add_messages] = dataclasses.field(
        default_factory=list
    )


class PydanticChat(BaseModel):
    messages: Annotated[list[AnyMessage], add_messages] = Field(default_factory=list)


class TheirPydanticChat(BaseModel):
    messages: Annotated[list[AnyMessage], lg_message.add_messages] = Field(default_factory=list)


#: (ours, LangGraph's) state schema of each kind; LangGraph's MessagesState is both
STATES = {
    "typeddict": (Chat, TheirChat),
    "MessagesState": (lg_graph.MessagesState, lg_graph.MessagesState),
    "dataclass": (DataChat, TheirDataChat),
    "pydantic": (PydanticChat, TheirPydanticChat),
}

#: what the node writes to ``messages``
WRITES = {
    "role dicts": [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}],
    "one role dict": {"role": "assistant", "content": "x", "id": "a1"},
    "string": "hi",
    "pair": ("ai", "x"),
    "mixed": [
        {"role": "user", "content": "a", "id": "u1"},
        AIMessage("b", id="b1"),
        "c",
        ("system", "d"),
        {"type": "ai", "content": "e"},
    ],
}


def shown(got: list[Any]) -> list[tuple[str, Any, str]]:
    """Each message's class, content and id (``"uuid"`` for one the reducer made up); a
    dict or string as it is."""
    return [
        (type(m).__name__, m.content, "uuid" if _made_up(m.id) else m.id)
        if isinstance(m, messages.BaseMessage)
        else (type(m).__name__, m, None)
        for m in got
    ]


def _made_up(mid: Any) -> bool:
    try:
        return uuid.UUID(mid).version == 4
    except (TypeError, ValueError, AttributeError):
        return False


def writer(g: Any, state: type, write: Any, path: str) -> Any:
    """START → n → END, ``n`` writing ``write`` to ``messages`` as ``path`` says: returned,
    in a ``Command(update=...)``, or returned by a node a ``Send`` started."""

    def node(state: Any) -> Any:
        update = {"messages": copy.deepcopy(write)}
        return g.Command(update=update) if path == "command" else update

    graph = g.StateGraph(state).add_node("n", node)
    if path == "send":
        graph.add_conditional_edges(g.START, lambda state: [g.Send("n", {"messages": []})])
    else:
        graph.add_edge(g.START, "n")
    return graph.add_edge("n", g.END)


START_WITH = {"messages": [HumanMessage("start", id="s")]}


@pytest.mark.parametrize("path", ["return", "command", "send"])
@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("kind", sorted(STATES))
async def test_a_node_writes_langchain_messages_as_langgraph(
    kind: str, write: str, path: str
) -> None:
    ours_state, theirs_state = STATES[kind]

    def build(g: Any) -> Any:
        return writer(g, ours_state if g is OURS else theirs_state, WRITES[write], path)

    ours, theirs = pair(build, None)
    out = await theirs.ainvoke(copy.deepcopy(START_WITH))
    result = await ours.run(copy.deepcopy(START_WITH))
    assert result.status == "completed", result.error
    got = result.state["messages"]
    assert shown(got) == shown(out["messages"])
    assert all(isinstance(m, messages.BaseMessage) for m in got)


@pytest.mark.parametrize("kind", sorted(STATES))
async def test_langchain_messages_written_by_nodes_come_back_from_the_checkpoint(
    checkpointer: Checkpointer, kind: str
) -> None:
    # a node writes role dicts, the run pauses after it, and a graph compiled afresh on the
    # same checkpointer reads the thread back and goes on: messages all along, as LangGraph's
    ours_state, theirs_state = STATES[kind]

    def build(g: Any) -> Any:
        graph = g.StateGraph(ours_state if g is OURS else theirs_state)
        graph.add_node("a", lambda state: {"messages": [{"role": "assistant", "content": "x"}]})
        graph.add_node("b", lambda state: {"messages": "more"})
        graph.add_edge(g.START, "a").add_edge("a", "b")
        return graph.add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer, interrupt_after=["a"])
    await theirs.ainvoke(copy.deepcopy(START_WITH), cfg())
    paused = await ours.run(copy.deepcopy(START_WITH), thread_id="1")
    assert paused.status == "interrupted", paused.error
    their_paused = (await theirs.aget_state(cfg())).values["messages"]
    again = build(OURS).compile(checkpointer=checkpointer, interrupt_after=["a"])
    assert shown((await again.get_state("1")).values["messages"]) == shown(their_paused)

    out = await theirs.ainvoke(None, cfg())
    result = await again.run(None, thread_id="1")
    assert result.status == "completed", result.error
    assert shown(result.state["messages"]) == shown(out["messages"])
    read_back = build(OURS).compile(checkpointer=checkpointer)
    saved = (await read_back.get_state("1")).values["messages"]
    assert saved == result.state["messages"]
    assert all(isinstance(m, messages.BaseMessage) for m in saved)
    # every checkpoint of the thread holds messages, not dicts
    for info in await read_back.history("1"):
        past = await read_back.get_state("1", info.checkpoint_id)
        for m in past.values.get("messages", []):
            assert isinstance(m, messages.BaseMessage), (info.step, m)


async def test_parallel_writers_saved_before_their_step_ends(checkpointer: Checkpointer) -> None:
    # two nodes of one step: each result is saved as it finishes (a pending write) and the
    # step's state holds messages; a writer left waiting shows the saved result as messages
    def build(g: Any) -> Any:
        graph = g.StateGraph(Chat if g is OURS else TheirChat)
        graph.add_node("a", lambda state: {"messages": [{"role": "assistant", "content": "a"}]})
        graph.add_node("b", lambda state: {"messages": ("user", "b")})
        graph.add_edge(g.START, "a").add_edge(g.START, "b")
        return graph.add_edge("a", g.END).add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke(copy.deepcopy(START_WITH), cfg())
    result = await ours.run(copy.deepcopy(START_WITH), thread_id="1")
    assert result.status == "completed", result.error
    assert shown(result.state["messages"]) == shown(out["messages"])
    saved = (await build(OURS).compile(checkpointer=checkpointer).get_state("1")).values
    assert saved["messages"] == result.state["messages"]


async def test_update_state_and_input_of_a_typeddict_state_read_role_dicts(
    checkpointer: Checkpointer,
) -> None:
    # run input and update_state take the same shorthands into the same field
    def build(g: Any) -> Any:
        graph = g.StateGraph(Chat if g is OURS else TheirChat)
        graph.add_node("n", lambda state: {})
        return graph.add_edge(g.START, "n").add_edge("n", g.END)

    given = {"messages": [{"role": "user", "content": "hi", "id": "u"}, "there"]}
    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke(copy.deepcopy(given), cfg())
    result = await ours.run(copy.deepcopy(given), thread_id="1")
    assert result.status == "completed", result.error
    assert shown(result.state["messages"]) == shown(out["messages"])
    more = {"messages": {"role": "assistant", "content": "more"}}
    await theirs.aupdate_state(cfg(), copy.deepcopy(more))
    await ours.update_state("1", copy.deepcopy(more))
    their_values = (await theirs.aget_state(cfg())).values["messages"]
    assert shown((await ours.get_state("1")).values["messages"]) == shown(their_values)


@pytest.mark.parametrize("kind", ["typeddict", "dataclass", "pydantic"])
@pytest.mark.parametrize("bad", [[{"content": "no role"}], {"role": "weird", "content": "x"}, [42]])
async def test_a_node_writing_what_is_no_message_fails_naming_it(kind: str, bad: Any) -> None:
    # LangGraph raises LangChain's ValueError / NotImplementedError out of its reducer; ours
    # is an InvalidUpdateError naming the node and the key, as for run input
    def build(g: Any) -> Any:
        return writer(g, STATES[kind][0], bad, "return")

    result = await build(OURS).compile().run(copy.deepcopy(START_WITH))
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "node 'n'" in str(result.error)
    assert "'messages'" in str(result.error)


DICT_FIELDS = """
import asyncio, sys
from typing import Annotated, Any, TypedDict
from tinyagents.graph import END, START, StateGraph, add_messages

class State(TypedDict, total=False):
    plain: Annotated[list, add_messages]
    dicts: Annotated[list[dict[str, Any]], add_messages]
    anything: Annotated[list[Any], add_messages]

ROLE = {"role": "assistant", "content": "x", "id": "a"}

def node(state):
    return {"plain": [dict(ROLE)], "dicts": dict(ROLE), "anything": [dict(ROLE)]}

graph = StateGraph(State).add_node("n", node).add_edge(START, "n").add_edge("n", END)
result = asyncio.run(graph.compile().run({"plain": [{"role": "user", "content": "hi"}]}))
assert result.status == "completed", result.error
assert result.state == {
    "plain": [{"role": "user", "content": "hi"}, ROLE], "dicts": [ROLE], "anything": [ROLE]
}, result.state
assert "langchain_core" not in sys.modules, "LangChain was imported"
print("ok")
"""


def test_fields_that_hold_dicts_keep_them_and_never_load_langchain() -> None:
    done = subprocess.run(
        [sys.executable, "-c", DICT_FIELDS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "ok", done.stderr


async def test_dict_fields_keep_dicts_beside_langchain() -> None:
    # LangChain loaded (this process): a field typed to hold dicts still keeps them
    class Mixed(TypedDict, total=False):
        plain: Annotated[list, add_messages]
        dicts: Annotated[list[dict[str, Any]], add_messages]
        anything: Annotated[list[Any], add_messages]
        typed: Annotated[list[AnyMessage], add_messages]

    role = {"role": "assistant", "content": "x", "id": "a"}

    def node(state: Any) -> dict[str, Any]:
        return {k: [dict(role)] for k in ("plain", "dicts", "anything", "typed")}

    graph = OURS.StateGraph(Mixed).add_node("n", node)
    graph.add_edge(OURS.START, "n").add_edge("n", OURS.END)
    result = await graph.compile().run({})
    assert result.status == "completed", result.error
    assert {k: result.state[k] for k in ("plain", "dicts", "anything")} == {
        "plain": [role],
        "dicts": [role],
        "anything": [role],
    }
    assert result.state["typed"] == [AIMessage("x", id="a")]


async def test_a_resume_command_update_reads_role_dicts(checkpointer: Checkpointer) -> None:
    # Command(resume=..., update=...) writes through no node: the reducer reads it so too
    def build(g: Any) -> Any:
        def ask(state: Any) -> dict[str, Any]:
            g.interrupt("anything to add?")
            return {}

        graph = g.StateGraph(Chat if g is OURS else TheirChat).add_node("ask", ask)
        return graph.add_edge(g.START, "ask").add_edge("ask", g.END)

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke(copy.deepcopy(START_WITH), cfg())
    paused = await ours.run(copy.deepcopy(START_WITH), thread_id="1")
    assert paused.status == "interrupted", paused.error
    update = {"messages": [{"role": "user", "content": "yes"}]}
    out = await theirs.ainvoke(lg_types.Command(resume="ok", update=update), cfg())
    result = await ours.run(OURS.Command(resume="ok", update=copy.deepcopy(update)), thread_id="1")
    assert result.status == "completed", result.error
    assert shown(result.state["messages"]) == shown(out["messages"])


def _items(items: list[Any]) -> list[Any]:
    """Stream items with each LangChain message as ``shown`` gives it (ids made up apart)."""
    out = []
    for mode, item in items:
        if mode == "tasks" and "result" in item:
            item = {"name": item["name"], "result": item["result"]}
        elif mode == "tasks":
            continue  # a task's start: its input holds the state's messages
        out.append((mode, _shown_in(item)))
    return out


def _shown_in(value: Any) -> Any:
    if isinstance(value, messages.BaseMessage):
        return shown([value])[0]
    if isinstance(value, dict):
        return {k: _shown_in(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_shown_in(v) for v in value)
    return value


@pytest.mark.parametrize("path", ["return", "command", "send"])
@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("kind", sorted(STATES))
async def test_updates_and_tasks_streams_show_the_write_as_the_node_returned_it(
    kind: str, write: str, path: str
) -> None:
    # LangGraph streams a node's return as it was (role dicts, strings, pairs); the state
    # holds the messages the reducer made of it
    ours_state, theirs_state = STATES[kind]

    def build(g: Any) -> Any:
        return writer(g, ours_state if g is OURS else theirs_state, WRITES[write], path)

    ours, theirs = pair(build, None)
    modes = ["updates", "tasks", "values"]
    their_items = [
        item async for item in theirs.astream(copy.deepcopy(START_WITH), stream_mode=modes)
    ]
    our_items = [item async for item in ours.stream(copy.deepcopy(START_WITH), mode=modes)]
    assert _items(our_items) == _items(their_items)
    updates = [item for mode, item in our_items if mode == "updates"]
    assert updates[-1]["n"] == {"messages": WRITES[write]}
    final = [item for mode, item in our_items if mode == "values"][-1]
    assert all(isinstance(m, messages.BaseMessage) for m in final["messages"])


# -- a private field, in a node's input schema only ---------------------------------------------


class Log(TypedDict):
    log: list[str]


class PrivateChat(TypedDict):
    chat: Annotated[list[AnyMessage], add_messages]


class TheirPrivateChat(TypedDict):
    chat: Annotated[list[AnyMessage], lg_message.add_messages]


def private_chat(g: Any, write: Any) -> Any:
    """START → a → b → END over a state with no messages: ``a`` writes ``write`` to ``chat``,
    a field of the input schema ``a`` and ``b`` share, and ``b`` logs what it reads there:
    each item's class, then all of them as ``shown``."""

    def a(state: Any) -> dict[str, Any]:
        return {"chat": copy.deepcopy(write)}

    def b(state: Any) -> dict[str, Any]:
        chat = state["chat"]
        return {"log": [*(type(m).__name__ for m in chat), repr(shown(chat))]}

    private = PrivateChat if g is OURS else TheirPrivateChat
    graph = g.StateGraph(Log)
    graph.add_node("a", a, input_schema=private).add_node("b", b, input_schema=private)
    return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", g.END)


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_private_field_of_a_node_input_schema_holds_langchain_messages(
    write: str,
) -> None:
    # the field joins the channels with the node's input schema: a write to it is read as
    # LangChain messages, as a field of the state's own is
    ours, theirs = pair(lambda g: private_chat(g, WRITES[write]), None)
    out = await theirs.ainvoke({"log": []})
    result = await ours.run({"log": []})
    assert result.status == "completed", result.error
    assert result.state["log"] == out["log"]
    *classes, _ = result.state["log"]
    assert classes and all(name.endswith("Message") for name in classes)


@pytest.mark.parametrize("bad", [[{"content": "no role"}], {"role": "weird", "content": "x"}, [42]])
async def test_a_node_writing_what_is_no_message_to_a_private_field_fails_naming_it(
    bad: Any,
) -> None:
    # read as the node returns, as for the state's own field: the error names the node
    result = await private_chat(OURS, bad).compile().run({"log": []})
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "node 'a'" in str(result.error)
    assert "'chat'" in str(result.error)
