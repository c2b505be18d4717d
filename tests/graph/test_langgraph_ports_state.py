"""Ports of LangGraph's dataclass and pydantic state details (``test_pregel_async.py``:
test_pydantic_state, test_dataclass_state, test_state_schema_default_values): the same
program on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.

A field without a reducer has no value until something writes it: outputs, ``get_state``
and the ``values`` stream hold the written fields only, while nodes and routers get an
instance with the defaults filled in. A state instance a node returns is read as LangGraph
reads it. LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend.
"""

from __future__ import annotations

import dataclasses
import datetime
import operator
from typing import Annotated, Any, NotRequired, Required, TypedDict

import pytest
from graphkit import logger
from langgraph_kit import OURS, THEIRS, Log, cfg, lg_memory, pair, shape, values
from pydantic import BaseModel, PrivateAttr, ValidationError, field_validator

from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import StateGraph
from tinyagents.store.checkpoint import Checkpointer


class Place(BaseModel):
    city: str = "nowhere"


class PState(BaseModel):
    name: str = "anon"
    n: int = 0
    note: str | None = None
    log: Annotated[list[str], operator.add] = []
    place: Place = Place()


@dataclasses.dataclass
class DState:
    name: str = "anon"
    n: int = 0
    note: str | None = None
    log: Annotated[list[str], operator.add] = dataclasses.field(default_factory=list)
    place: Place = dataclasses.field(default_factory=Place)


STATES = [PState, DState]


def counting(g: Any, state_cls: Any, seen: list[Any]) -> Any:
    """START → bump → check → END; the nodes note what they see (defaults filled in)."""

    def bump(state: Any) -> dict[str, Any]:
        seen.append((state.name, state.n, state.note, state.place.city))
        return {"n": state.n + 1, "log": ["bump"]}

    def check(state: Any) -> dict[str, Any]:
        seen.append((state.name, state.n, list(state.log)))
        return {"log": [f"n={state.n}"]}

    graph = g.StateGraph(state_cls).add_node("bump", bump).add_node("check", check)
    graph.add_edge(g.START, "bump").add_edge("bump", "check")
    return graph.add_edge("check", g.END)


@pytest.mark.parametrize("state_cls", STATES, ids=lambda c: c.__name__)
async def test_outputs_hold_written_fields_and_nodes_see_defaults(
    checkpointer: Checkpointer, state_cls: Any
) -> None:
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = counting(OURS, state_cls, ours_seen).compile(checkpointer=checkpointer)
    theirs = counting(THEIRS, state_cls, theirs_seen).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    out = await theirs.ainvoke({"log": ["in"]}, cfg())
    result = await ours.run({"log": ["in"]}, thread_id="1")
    assert result.status == "completed", result.error
    assert ours_seen == theirs_seen == [("anon", 0, None, "nowhere"), ("anon", 1, ["in", "bump"])]
    assert result.state == out == {"n": 1, "log": ["in", "bump", "n=1"]}
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values == out
    # a second input writes name: from then on it is a written channel on both
    out = await theirs.ainvoke({"name": "ada"}, cfg())
    result = await ours.run({"name": "ada"}, thread_id="1")
    assert result.state == out
    assert out["name"] == "ada" and out["n"] == 2


@pytest.mark.parametrize("state_cls", STATES, ids=lambda c: c.__name__)
async def test_values_and_updates_streams_hold_written_fields(
    checkpointer: Checkpointer, state_cls: Any
) -> None:
    ours, theirs = pair(lambda g: counting(g, state_cls, []), checkpointer)
    for mode in ("values", "updates"):
        theirs_items = [
            i async for i in theirs.astream({"log": ["in"]}, cfg(mode), stream_mode=mode)
        ]
        ours_items = [i async for i in ours.stream({"log": ["in"]}, thread_id=mode, mode=mode)]
        assert ours_items == theirs_items, mode


@pytest.mark.parametrize("state_cls", STATES, ids=lambda c: c.__name__)
async def test_state_instances_returned_are_read_as_langgraph_reads_them(
    checkpointer: Checkpointer, state_cls: Any
) -> None:
    # LangGraph's get_update_as_tuples: every field of a dataclass; every field of a pydantic
    # model but those that are None, default to None and were not set
    def build(g: Any) -> Any:
        def named(state: Any) -> Any:
            return state_cls(name="ada")

        def commanded(state: Any) -> Any:
            return g.Command(update=state_cls(log=["hi"], note=None), goto="last")

        graph = g.StateGraph(state_cls).add_node("named", named)
        graph.add_node("commanded", commanded, destinations=("last",))
        graph.add_node("last", lambda s: {"log": [f"last {s.name!r} {s.note}"]})
        graph.add_edge(g.START, "named").add_edge("named", "commanded")
        return graph.add_edge("last", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({}, cfg())
    result = await ours.run({}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out
    assert out["name"] == "anon"  # commanded's instance wrote its default over "ada"
    assert out["log"] == ["hi", "last 'anon' None"]
    # note=None was set explicitly: written on both (a dataclass writes every field)
    assert "note" in out
    out = await theirs.ainvoke(THEIRS.Command(update=state_cls(name="bob")), cfg())
    result = await ours.run(OURS.Command(update=state_cls(name="bob")), thread_id="1")
    assert result.state == out
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


async def test_an_unset_none_field_of_a_pydantic_instance_is_not_written(
    checkpointer: Checkpointer,
) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(PState).add_node("set", lambda s: {"note": "kept"})
        graph.add_node("back", lambda s: PState(n=5))  # note: None, its default, not set
        graph.add_edge(g.START, "set").add_edge("set", "back")
        return graph.add_edge("back", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({}, cfg())
    result = await ours.run({}, thread_id="1")
    assert result.state == out
    assert out["note"] == "kept" and out["n"] == 5


async def test_update_state_on_a_pydantic_thread(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: counting(g, PState, []), checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    await theirs.aupdate_state(cfg(), {"note": "hand-written"})
    await ours.update_state("1", {"note": "hand-written"})
    theirs_values = (await theirs.aget_state(cfg())).values
    assert (await ours.get_state("1")).values == theirs_values
    assert "name" not in theirs_values and theirs_values["note"] == "hand-written"


async def test_a_pydantic_subgraph_gives_back_written_fields_only(
    checkpointer: Checkpointer,
) -> None:
    def build(g: Any) -> Any:
        sub = counting(g, PState, []).compile()
        graph = g.StateGraph(PState).add_node("first", lambda s: {"name": "outer"})
        graph.add_node("sub", sub).add_edge(g.START, "first").add_edge("first", "sub")
        return graph.add_edge("sub", g.END)

    ours, theirs = pair(build, checkpointer)
    theirs_items = [
        (shape(ns), item)
        async for ns, item in theirs.astream({}, cfg(), stream_mode="updates", subgraphs=True)
    ]
    ours_items = [
        (shape(ns), item)
        async for ns, item in ours.stream({}, thread_id="1", mode="updates", subgraphs=True)
    ]
    # LangGraph reads the sub-graph node's output as a PState instance, so the defaults that
    # are not None (place) are written into the parent, though nothing wrote them
    assert theirs_items[-1] == (
        (),
        {"sub": {"name": "outer", "n": 1, "log": ["bump", "n=1"], "place": Place()}},
    )
    # ours gives back what the sub-graph changed (docs/graph.md, "Sub-graphs"): neither the
    # name it started from nor a default
    assert ours_items[-1] == ((), {"sub": {"n": 1, "log": ["bump", "n=1"]}})
    assert ours_items[:-1] == theirs_items[:-1]
    state = (await ours.get_state("1")).values
    assert state == {"name": "outer", "n": 1, "log": ["bump", "n=1"]}
    assert (await theirs.aget_state(cfg())).values == {**state, "place": Place()}


async def test_a_reducer_field_starts_from_its_default(checkpointer: Checkpointer) -> None:
    @dataclasses.dataclass
    class Counted:
        count: Annotated[int, operator.add] = 5

    def build(g: Any) -> Any:
        graph = g.StateGraph(Counted).add_node("add", lambda s: {"count": 1})
        return graph.add_edge(g.START, "add").add_edge("add", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({}, cfg())
    result = await ours.run({}, thread_id="1")
    # LangGraph's reducer channel starts from int() and never sees the field's default;
    # ours folds the first writes into the default (docs/graph.md, "State")
    assert out == {"count": 1}
    assert result.state == {"count": 6}


# -- the order a snapshot lists its tasks ------------------------------------------------------


def fan_out(g: Any, *, ask: bool = False) -> Any:
    """START routes to zed, a Send to mid, a Send to amy, amy and mid (added zed, amy, mid);
    with ``ask`` each node asks its name first."""

    def node(name: str) -> Any:
        def run(state: Any) -> dict[str, Any]:
            return {"log": [g.interrupt(name) if ask else name]}

        return run

    graph = g.StateGraph(Logged)
    for name in ("zed", "amy", "mid"):
        graph.add_node(name, node(name)).add_edge(name, g.END)
    return graph.add_conditional_edges(
        g.START, lambda s: ["zed", g.Send("mid", {}), g.Send("amy", {}), "amy", "mid"]
    )


class Logged(BaseModel):
    log: Annotated[list[str], operator.add] = []


async def test_snapshot_next_and_history_list_sends_first_then_add_node_order(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(fan_out, checkpointer, interrupt_before=["zed", "amy", "mid"])
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    theirs_state, ours_state = await theirs.aget_state(cfg()), await ours.get_state("1")
    assert theirs_state.next == ("mid", "amy", "zed", "amy", "mid")
    assert ours_state.next == theirs_state.next
    assert [t.name for t in ours_state.tasks] == [t.name for t in theirs_state.tasks]
    # a checkpoint read by id, and the history, list them the same way
    by_id = await ours.get_state("1", checkpoint_id=ours_state.checkpoint_id)
    assert by_id.next == theirs_state.next
    assert (await ours.history("1"))[0].next == theirs_state.next
    # the writes still apply in the step's task order, the same on both
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": ["amy", "mid", "zed", "mid", "amy"]}


async def test_snapshot_interrupts_follow_the_task_order(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: fan_out(g, ask=True), checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    theirs_state, ours_state = await theirs.aget_state(cfg()), await ours.get_state("1")
    assert ours_state.next == theirs_state.next == ("mid", "amy", "zed", "amy", "mid")
    assert [i.value for i in ours_state.interrupts] == [i.value for i in theirs_state.interrupts]
    assert [[i.value for i in t.interrupts] for t in ours_state.tasks] == [
        [i.value for i in t.interrupts] for t in theirs_state.tasks
    ]


@pytest.mark.parametrize("state_cls", STATES, ids=lambda c: c.__name__)
async def test_an_input_that_writes_nothing_has_no_values_item(
    checkpointer: Checkpointer, state_cls: Any
) -> None:
    ours, theirs = pair(lambda g: counting(g, state_cls, []), checkpointer)
    theirs_items = [i async for i in theirs.astream({}, cfg(), stream_mode="values")]
    ours_items = [i async for i in ours.stream({}, thread_id="1", mode="values")]
    # the first item is the state after bump: the input ({}) wrote nothing
    assert ours_items == theirs_items
    assert theirs_items[0] == {"n": 1, "log": ["bump"]}


# -- reducer channels: where they start, however they are annotated -----------------------------


class Tally(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    n: Annotated[int, operator.add]
    text: Annotated[str, operator.add]
    tags: Annotated[set[str], operator.or_]
    maybe: Annotated[list[str] | None, lambda a, b: (a or []) + (b or [])]
    q: str


def tally(g: Any, seen: list[Any]) -> Any:
    def first(state: Any) -> dict[str, Any]:
        seen.append(dict(state))
        return {"n": 2}

    graph = g.StateGraph(Tally).add_node("first", first)
    return graph.add_edge(g.START, "first").add_edge("first", g.END)


async def test_an_unwritten_reducer_channel_starts_at_its_types_empty_value(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's BinaryOperatorAggregate starts at its type called with no arguments ([] for a
    # list, 0 for an int, "" for a str, set() for a set); a type that cannot be called so (a
    # union) has no value until written.
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = tally(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = tally(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"q": "hi"}, cfg())
    result = await ours.run({"q": "hi"}, thread_id="1")
    assert theirs_seen == [{"log": [], "n": 0, "text": "", "tags": set(), "q": "hi"}]
    assert ours_seen == theirs_seen
    assert result.state == out == {"log": [], "n": 2, "text": "", "tags": set(), "q": "hi"}
    # and so it is checkpointed: a later process reads it back (set included)
    ours_values = (await ours.get_state("1")).values
    theirs_values = (await theirs.aget_state(cfg())).values
    assert ours_values == theirs_values
    theirs_items = [i async for i in theirs.astream({"q": "again"}, cfg(), stream_mode="values")]
    ours_items = [i async for i in ours.stream({"q": "again"}, thread_id="1", mode="values")]
    assert ours_items == theirs_items
    # listed in the state's field order, as LangGraph's (q, written first, last)
    assert list(result.state) == list(out) == ["log", "n", "text", "tags", "q"]
    assert list(ours_values) == list(theirs_values)
    assert [list(i) for i in ours_items] == [list(i) for i in theirs_items]


async def test_an_update_state_on_a_new_thread_folds_into_the_empty_value(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: tally(g, []), checkpointer)
    await theirs.aupdate_state(cfg(), {"log": ["first"], "n": 1})
    await ours.update_state("1", {"log": ["first"], "n": 1})
    theirs_values = (await theirs.aget_state(cfg())).values
    assert theirs_values == {"log": ["first"], "n": 1, "text": "", "tags": set()}
    assert (await ours.get_state("1")).values == theirs_values


class Wrapped(TypedDict, total=False):
    outer: NotRequired[Annotated[list[str], operator.add]]
    inner: Annotated[NotRequired[list[str]], operator.add]
    required: Required[Annotated[list[str], operator.add]]


def wrapped(g: Any) -> Any:
    def add(state: Any) -> dict[str, Any]:
        return {"outer": ["x"], "inner": ["y"], "required": ["z"]}

    graph = g.StateGraph(Wrapped).add_node("one", add).add_node("two", add)
    return graph.add_edge(g.START, "one").add_edge("one", "two").add_edge("two", g.END)


async def test_required_and_not_required_keep_the_reducer_they_wrap(
    checkpointer: Checkpointer,
) -> None:
    # NotRequired[Annotated[list, add]] lost its reducer: each write replaced the list
    ours, theirs = pair(wrapped, checkpointer)
    given = {"outer": ["in"], "required": ["in"]}
    out = await theirs.ainvoke(given, cfg())
    result = await ours.run(given, thread_id="1")
    assert out == {"outer": ["in", "x", "x"], "inner": ["y", "y"], "required": ["in", "z", "z"]}
    assert result.state == out
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


async def test_values_keep_the_field_order_across_checkpoint_deltas(
    checkpointer: Checkpointer,
) -> None:
    # q is written by the input, x (declared before it) only by the second step: a checkpoint
    # read back from a snapshot and its deltas lists them as the live run does
    class Late(TypedDict, total=False):
        x: int
        q: str

    def build(g: Any) -> Any:
        graph = g.StateGraph(Late).add_node("one", lambda s: None)
        graph.add_node("two", lambda s: {"x": 1})
        return graph.add_edge(g.START, "one").add_edge("one", "two").add_edge("two", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"q": "hi"}, cfg())
    result = await ours.run({"q": "hi"}, thread_id="1")
    assert list(result.state) == list(out) == ["x", "q"]
    assert list((await ours.get_state("1")).values) == ["x", "q"]
    assert list((await theirs.aget_state(cfg())).values) == ["x", "q"]


@pytest.mark.parametrize("channel", ["EphemeralValue", "Topic"])
def test_a_langgraph_channel_in_a_state_annotation_is_refused_by_name(channel: str) -> None:
    # LangGraph's channels were skipped as "not a reducer": the field silently kept the last
    # value (a Topic(accumulate=True) gave 'b' where LangGraph gives ['in', 'a', 'b'])
    import langgraph.channels as lg_channels

    from tinyagents.errors import GraphValidationError

    made = getattr(lg_channels, channel)(str)
    state = TypedDict("State", {"x": Annotated[str, made]})  # type: ignore[operator]  # noqa: UP013
    with pytest.raises(GraphValidationError, match=f"State.x: LangGraph's channel {channel}"):
        StateGraph(state)


@pytest.mark.parametrize("as_node", ["a", "b", "c"])
async def test_update_state_as_a_node_keeps_the_node_a_join_pulled(
    checkpointer: Checkpointer, as_node: str
) -> None:
    """START → a, START → b, [a, b] → c, stopped before c. The join's barrier is spent and c
    waits: an update as any node (one of the join's, or c itself) leaves c next, as
    LangGraph's barrier channel keeps c triggered until c runs."""

    def build(g: Any) -> Any:
        graph = g.StateGraph(Log)
        for name in ("a", "b", "c"):
            graph.add_node(name, logger(name))
        graph.add_edge(g.START, "a").add_edge(g.START, "b").add_edge(["a", "b"], "c")
        return graph.add_edge("c", g.END)

    ours, theirs = pair(build, checkpointer, interrupt_before=["c"])
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    await theirs.aupdate_state(cfg(), {"log": ["edit"]}, as_node=as_node)
    await ours.update_state("1", {"log": ["edit"]}, as_node=as_node)
    theirs_state, ours_state = await theirs.aget_state(cfg()), await ours.get_state("1")
    assert ours_state.next == theirs_state.next == ("c",)
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == values(out) == {"log": ["a", "b", "edit", "c"]}
    # c ran once: the update as a or b did not start the join over
    assert (await ours.get_state("1")).next == ()


class Documented(TypedDict, total=False):
    # LangGraph reads the reducer from the last metadata item only (``_is_field_binop``:
    # ``meta[-1]``): a note after the reducer leaves the field an overwrite one
    noted: Annotated[list[str], operator.add, "a note after the reducer"]
    first: Annotated[list[str], "a note before the reducer", operator.add]


async def test_only_the_last_annotated_item_is_the_reducer(checkpointer: Checkpointer) -> None:
    # ours took the last callable anywhere in Annotated[...]: 'noted' accumulated
    # ['in', 'a', 'b'] where LangGraph's keeps the last write, ['b']
    def build(g: Any) -> Any:
        graph = g.StateGraph(Documented)
        graph.add_node("a", lambda s: {"noted": ["a"], "first": ["a"]})
        graph.add_node("b", lambda s: {"noted": ["b"], "first": ["b"]})
        return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    given = {"noted": ["in"], "first": ["in"]}
    out = await theirs.ainvoke(given, cfg())
    result = await ours.run(given, thread_id="1")
    assert out == {"noted": ["b"], "first": ["in", "a", "b"]}
    assert result.state == out
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


class Checked(BaseModel):
    n: int = 0
    tag: str = ""

    @field_validator("tag")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


def writes_then_reads(g: Any, bad: Any, seen: list[Any]) -> Any:
    """START → write (n = ``bad``, tag = "x") → read → END; read notes what it sees."""

    def read(state: Checked) -> dict[str, Any]:
        seen.append((state.n, state.tag))
        return {}

    graph = g.StateGraph(Checked).add_node("write", lambda s: {"n": bad, "tag": "x"})
    graph.add_node("read", read).add_edge(g.START, "write").add_edge("write", "read")
    return graph.add_edge("read", g.END)


@pytest.mark.parametrize("bad", ["5", 5.0])
async def test_a_node_sees_its_pydantic_state_validated(
    checkpointer: Checkpointer, bad: Any
) -> None:
    # LangGraph builds each node's pydantic input with the model (``schema(**values)``): a
    # value another node wrote is coerced ("5" -> 5) and the field validators run, while
    # the state keeps what was written. Ours built it with model_construct: read saw "5"
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = writes_then_reads(OURS, bad, ours_seen).compile(checkpointer=checkpointer)
    theirs = writes_then_reads(THEIRS, bad, theirs_seen).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    out = await theirs.ainvoke({}, cfg())
    result = await ours.run({}, thread_id="1")
    assert ours_seen == theirs_seen == [(5, "X")]
    assert result.state == out == {"n": bad, "tag": "x"}


@pytest.mark.parametrize("bad", ["five", 5.5, None, [1]])
async def test_a_value_the_pydantic_state_refuses_fails_the_node_that_reads_it(
    checkpointer: Checkpointer, bad: Any
) -> None:
    # LangGraph raises pydantic's ValidationError when it builds the next node's input (the
    # writer's step is saved, with the value); ours handed the reader the value unchecked
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = writes_then_reads(OURS, bad, ours_seen).compile(checkpointer=checkpointer)
    theirs = writes_then_reads(THEIRS, bad, theirs_seen).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    with pytest.raises(ValidationError) as theirs_error:
        await theirs.ainvoke({}, cfg())
    result = await ours.run({}, thread_id="1")
    assert ours_seen == theirs_seen == []
    assert result.status == "failed"
    assert isinstance(result.error, ValidationError)
    assert result.error.errors() == theirs_error.value.errors()
    saved = await ours.get_state("1")
    assert saved.values == {"n": bad, "tag": "x"} and saved.next == ("read",)


async def test_a_required_pydantic_field_no_one_wrote_fails_the_first_node(
    checkpointer: Checkpointer,
) -> None:
    class Needs(BaseModel):
        n: int
        tag: str = ""

    def build(g: Any) -> Any:
        graph = g.StateGraph(Needs).add_node("a", lambda s: {"tag": "a"})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    with pytest.raises(ValidationError, match="Field required"):
        await theirs.ainvoke({"tag": "x"}, cfg())
    result = await ours.run({"tag": "x"}, thread_id="1")
    assert isinstance(result.error, ValidationError)
    assert "Field required" in str(result.error)


@dataclasses.dataclass
class Tagged:
    n: int = 0
    tag: str = ""

    def __post_init__(self) -> None:
        self.tag = self.tag.upper()


async def test_a_node_gets_its_dataclass_state_from_the_constructor(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph builds a dataclass node input with the class (``schema(**values)``), so its
    # __post_init__ runs (no types are checked); ours set the fields past __init__: read saw
    # "x" where LangGraph's sees "X". The state keeps what was written
    seen: dict[str, list[Any]] = {"ours": [], "theirs": []}

    def build(g: Any) -> Any:
        def read(state: Tagged) -> dict[str, Any]:
            seen["ours" if g is OURS else "theirs"].append((state.n, state.tag))
            return {}

        graph = g.StateGraph(Tagged).add_node("write", lambda s: {"n": "5", "tag": "x"})
        graph.add_node("read", read).add_edge(g.START, "write").add_edge("write", "read")
        return graph.add_edge("read", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"tag": "in"}, cfg())
    result = await ours.run({"tag": "in"}, thread_id="1")
    assert seen["ours"] == seen["theirs"] == [("5", "X")]
    assert result.state == out == {"n": "5", "tag": "x"}


async def test_a_required_dataclass_field_no_one_wrote_fails_the_first_node(
    checkpointer: Checkpointer,
) -> None:
    @dataclasses.dataclass
    class Needs:
        n: int
        tag: str = ""

    def build(g: Any) -> Any:
        graph = g.StateGraph(Needs).add_node("a", lambda s: {"tag": "a"})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'n'"):
        await theirs.ainvoke({"tag": "x"}, cfg())
    result = await ours.run({"tag": "x"}, thread_id="1")
    assert isinstance(result.error, TypeError)
    assert "missing 1 required positional argument: 'n'" in str(result.error)


class TypedKept(TypedDict, total=False):
    n: int
    ns: Annotated[list[int], operator.add]
    when: datetime.datetime
    place: Place


class PydanticKept(BaseModel):
    n: int = 0
    ns: Annotated[list[int], operator.add] = []
    when: datetime.datetime | None = None
    place: Place = Place()


@dataclasses.dataclass
class DataclassKept:
    n: int = 0
    ns: Annotated[list[int], operator.add] = dataclasses.field(default_factory=list)
    when: datetime.datetime | None = None
    place: Place = dataclasses.field(default_factory=Place)


WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5)


@pytest.mark.parametrize("schema", [TypedKept, PydanticKept, DataclassKept])
async def test_a_wrong_typed_write_is_read_back_as_written(
    checkpointer: Checkpointer, schema: Any
) -> None:
    # LangGraph's channels keep what a node wrote, checkpoint or not: "7" for an int is "7"
    # in get_state and the next run's output. Ours read the checkpoint back through the
    # field's type, leniently, and gave 7. Values whose JSON is their type's (a datetime, a
    # model) still come back as that type
    def build(g: Any) -> Any:
        graph = g.StateGraph(schema)
        graph.add_node(
            "a", lambda s: {"n": "7", "ns": ["8"], "when": WHEN, "place": Place(city="x")}
        )
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({}, cfg())
    expected = {"n": "7", "ns": ["8"], "when": WHEN, "place": Place(city="x")}
    assert out == expected
    assert (await ours.run({}, thread_id="1")).state == out
    saved = (await theirs.aget_state(cfg())).values
    assert saved == expected
    assert (await ours.get_state("1")).values == saved
    again = await theirs.ainvoke(None, cfg())
    assert (await ours.run(None, thread_id="1")).state == again == expected


class TypedFloats(TypedDict, total=False):
    f: float
    fs: Annotated[list[float], operator.add]
    of: float | None
    by_name: dict[str, float]


class PydanticFloats(BaseModel):
    f: float = 0.0
    fs: Annotated[list[float], operator.add] = []
    of: float | None = None
    by_name: dict[str, float] = {}


@pytest.mark.parametrize("schema", [TypedFloats, PydanticFloats])
async def test_an_int_written_to_a_float_field_is_read_back_an_int(
    checkpointer: Checkpointer, schema: Any
) -> None:
    # LangGraph's channels keep the 7 a node wrote to a float field, checkpoint or not; ours
    # read the checkpoint back through the field's type, strictly, which still makes an int a
    # float: 7.0 in get_state and the next run's output, where the run that wrote it had 7
    def build(g: Any) -> Any:
        graph = g.StateGraph(schema)
        graph.add_node("a", lambda s: {"f": 7, "fs": [1, 2.5], "of": 3, "by_name": {"x": 4}})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({}, cfg())
    expected = {"f": 7, "fs": [1, 2.5], "of": 3, "by_name": {"x": 4}}
    assert out == expected
    assert (await ours.run({}, thread_id="1")).state == out
    saved = (await theirs.aget_state(cfg())).values
    mine = (await ours.get_state("1")).values
    assert mine == saved == expected
    assert repr(mine) == repr(saved)  # 7, not 7.0: equal either way
    again = await theirs.ainvoke(None, cfg())
    assert repr((await ours.run(None, thread_id="1")).state) == repr(again)


# -- keys starting with "_" -------------------------------------------------------------------


class Underscored(TypedDict):
    a: int
    _p: int


@dataclasses.dataclass
class UnderscoredDc:
    a: int = 0
    _p: int = 0


def _underscored(state: Any) -> dict[str, Any]:
    p = state["_p"] if isinstance(state, dict) else state._p
    return {"a": p + 1, "_p": 5}


@pytest.mark.parametrize("schema", [Underscored, UnderscoredDc])
async def test_a_declared_key_starting_with_an_underscore_is_a_channel_as_langgraphs(
    schema: Any, checkpointer: Checkpointer
) -> None:
    # LangGraph makes every annotation of the schema a channel (but ``__slots__``); ours
    # skipped those starting with "_", so writing one failed as an unknown key, which it
    # did not say why (the schema declares it)
    def build(g: Any) -> Any:
        graph = g.StateGraph(schema).add_node("n", _underscored)
        return graph.add_edge(g.START, "n").add_edge("n", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"a": 0, "_p": 1}, cfg())
    result = await ours.run({"a": 0, "_p": 1}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out == {"a": 2, "_p": 5}
    theirs_values = (await theirs.aget_state(cfg())).values
    assert (await ours.get_state("1")).values == theirs_values


class WithPrivate(BaseModel):
    a: int = 0
    _p: int = PrivateAttr(default=0)


async def test_a_pydantic_private_attribute_written_is_refused_saying_why() -> None:
    # a PrivateAttr is no field: no channel of ours (LangGraph makes one, which its nodes'
    # model never holds); the unknown-key error says so, not only that the key is unknown
    graph = StateGraph(WithPrivate).add_node("n", lambda s: {"a": 1, "_p": 5})
    result = await graph.add_edge("__start__", "n").add_edge("n", "__end__").compile().run({})
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "['_p']" in str(result.error)
    assert "PrivateAttr" in str(result.error)
