"""A thread whose checkpoints an older state schema wrote (a field removed, renamed or typed
differently), read back by a graph whose schema changed: a ``StoreError`` that names the
thread, the checkpoint and the field, not a ``KeyError``, a ``TypeError`` or pydantic's
``ValidationError`` from deep inside a step."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from pydantic import BaseModel

from tinyagents.errors import StoreError
from tinyagents.graph import END, START, Command, StateGraph, interrupt
from tinyagents.store.checkpoint import MemoryCheckpointer


def ask(state: Any) -> dict[str, Any]:
    return {"a": interrupt("go on?")}


class Old(TypedDict, total=False):
    a: str
    b: int
    n: int


class Removed(TypedDict, total=False):  # b is gone
    a: str
    n: int


class Retyped(TypedDict, total=False):  # n was an int, now a list that adds up
    a: str
    b: int
    n: Annotated[list[int], operator.add]


def parallel(schema: Any, cp: MemoryCheckpointer) -> Any:
    """``ask`` waits on an interrupt while ``write`` has written ``b``: a pending write."""
    graph = StateGraph(schema).add_node("ask", ask).add_node("write", lambda s: {"b": 5})
    graph.add_edge(START, "ask").add_edge(START, "write").add_edge(["ask", "write"], END)
    return graph.compile(checkpointer=cp)


def chain(schema: Any, cp: MemoryCheckpointer) -> Any:
    """``x`` and ``y`` write ``n`` in two steps (a delta after the input's snapshot)."""
    graph = StateGraph(schema).add_node("x", lambda s: {"n": 1}).add_node("y", lambda s: {"n": 2})
    graph.add_node("ask", ask)
    graph.add_edge(START, "x").add_edge("x", "y").add_edge("y", "ask").add_edge("ask", END)
    return graph.compile(checkpointer=cp)


async def test_a_pending_write_to_a_removed_field_is_a_store_error_naming_it() -> None:
    cp = MemoryCheckpointer()
    first = await parallel(Old, cp).run({"a": "in"}, thread_id="t")
    assert first.status == "interrupted"
    new = parallel(Removed, cp)
    with pytest.raises(StoreError) as caught:
        await new.get_state("t")
    message = str(caught.value)
    assert "'t'" in message and first.checkpoint_id in message and "'b'" in message
    result = await new.run(Command(resume="yes"), thread_id="t")
    assert result.status == "failed" and isinstance(result.error, StoreError)
    assert "'b'" in str(result.error)


async def test_a_saved_value_the_new_reducer_cannot_replay_is_a_store_error_naming_it() -> None:
    cp = MemoryCheckpointer()
    first = await chain(Old, cp).run({"a": "in", "n": 0}, thread_id="t")
    assert first.status == "interrupted"
    new = chain(Retyped, cp)
    with pytest.raises(StoreError) as caught:
        await new.get_state("t")
    message = str(caught.value)
    assert "'t'" in message and "'n'" in message
    history = await chain(Old, cp).history("t")
    assert any(h.checkpoint_id in message for h in history)


class Model(BaseModel):
    a: str = ""
    b: int = 0


class Changed(BaseModel):  # b was an int
    a: str = ""
    b: list[int] = []


async def test_a_saved_value_a_pydantic_state_now_refuses_is_a_store_error_naming_it() -> None:
    def write(state: Any) -> dict[str, Any]:
        return {"b": 3}

    def build(schema: Any, cp: MemoryCheckpointer) -> Any:
        graph = StateGraph(schema).add_node("write", write).add_node("ask", ask)
        graph.add_edge(START, "write").add_edge("write", "ask").add_edge("ask", END)
        return graph.compile(checkpointer=cp)

    cp = MemoryCheckpointer()
    first = await build(Model, cp).run({"a": "in"}, thread_id="t")
    assert first.status == "interrupted"
    new = build(Changed, cp)
    result = await new.run(Command(resume="yes"), thread_id="t")
    assert result.status == "failed" and isinstance(result.error, StoreError)
    message = str(result.error)
    assert "'t'" in message and first.checkpoint_id in message and "'b'" in message
    assert (await new.get_state("t")).checkpoint_id == first.checkpoint_id  # nothing saved
    await new.update_state("t", {"b": [3]})  # the field written anew: the thread goes on
    again = await new.run(Command(resume="yes"), thread_id="t")
    assert again.status == "completed" and again.state == {"a": "yes", "b": [3]}
