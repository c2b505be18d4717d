"""An id a caller gives (a run's, a thread's, a tenant's) that no backend or URL can hold is
refused with ``InvalidIdError``: a ``TinyAgentsError`` that is still a ``ValueError``, naming
the argument, before anything runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypedDict

import pytest

from tinyagents import Agent, Runtime
from tinyagents.errors import InvalidIdError, TinyAgentsError
from tinyagents.graph import END, START, StateGraph
from tinyagents.runs import RunInfo
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import ScriptedModel


class State(TypedDict):
    x: int


def _graph() -> Any:
    return (
        StateGraph(State)
        .add_node("a", lambda state: {"x": state["x"] + 1})
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile(checkpointer=MemoryCheckpointer())
    )


def _agent() -> Agent:
    return Agent("a", ScriptedModel(["x"]))


#: Ids no run may have: blank, not text, holding a NUL or a lone surrogate.
BAD_IDS = ["", "   ", 5, "a\x00b", "a\ud800b"]

Entry = Callable[[Runtime, Any], Awaitable[Any]]


async def _run_info(rt: Runtime, field: str, value: Any) -> Any:
    return RunInfo(**{"run_id": "r-1", "tenant_id": "acme", field: value})


#: (the field the message names, how the id reaches tinyagents)
ENTRIES: list[tuple[str, Entry]] = [
    ("run_id", lambda rt, v: _run_info(rt, "run_id", v)),
    ("tenant_id", lambda rt, v: _run_info(rt, "tenant_id", v)),
    ("tenant_id", lambda rt, v: rt.start(_agent(), "go", tenant_id=v)),
    ("run_id", lambda rt, v: rt.start(_agent(), "go", run_id=v)),
    ("thread_id", lambda rt, v: rt.start(_agent(), "go", thread_id=v)),
    ("thread_id", lambda rt, v: rt.start_graph(_graph(), {"x": 1}, thread_id=v)),
    ("tenant_id", lambda rt, v: rt.start_graph(_graph(), {"x": 1}, tenant_id=v)),
    ("thread_id", lambda rt, v: _graph().run({"x": 1}, thread_id=v)),
    ("thread_id", lambda rt, v: _graph().get_state(v)),
    ("thread_id", lambda rt, v: _graph().update_state(v, {"x": 2})),
]


@pytest.mark.parametrize("value", BAD_IDS, ids=repr)
@pytest.mark.parametrize(
    ("field", "entry"), ENTRIES, ids=[f"{i}-{field}" for i, (field, _) in enumerate(ENTRIES)]
)
async def test_a_bad_id_is_a_typed_error_naming_its_field(
    field: str, entry: Entry, value: Any
) -> None:
    # it was a bare ValueError: a program catching TinyAgentsError for "tinyagents refused
    # my input" missed it, and told it apart from a ValueError of its own code only by text
    async with Runtime() as rt:
        with pytest.raises(InvalidIdError) as caught:
            await entry(rt, value)
        assert rt.runs.list() == []
    assert isinstance(caught.value, TinyAgentsError)
    assert isinstance(caught.value, ValueError)  # ``except ValueError`` still catches it
    assert str(caught.value).startswith(f"{field} must be ")
    assert caught.value.field == field


@pytest.mark.parametrize("run_id", ["job/42", ".", ".."])
async def test_a_run_id_no_url_can_name_is_a_typed_error(run_id: str) -> None:
    async with Runtime() as rt:
        with pytest.raises(InvalidIdError, match=r"run_id must fit in a URL path segment"):
            await rt.start(_agent(), "go", run_id=run_id)


async def test_a_fork_names_the_new_thread_id_it_refuses() -> None:
    graph = _graph()
    async with Runtime() as rt:
        await graph.run({"x": 1}, thread_id="t-1", runtime=rt)
    head = (await graph.get_state("t-1")).checkpoint_id
    with pytest.raises(InvalidIdError, match=r"^new_thread_id must be a non-blank string"):
        await graph.fork("t-1", head, new_thread_id=" ")
