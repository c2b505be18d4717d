"""Ports of LangGraph's ``UntrackedValue`` channel (``langgraph.channels.UntrackedValue``,
``test_channels.py::test_untracked_value`` and the untracked cases of ``test_pregel.py``):
a state field the run keeps while it runs and no checkpoint keeps. The same program on
LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``; ours on
every checkpointer backend. The values written to it here are no JSON (a ``Conn``): a
checkpoint that tried to hold one would fail the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_errors, pair, values
from pydantic import BaseModel

from tinyagents import RunStatus, Runtime
from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import Command, StateGraph, UntrackedValue
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer
from tinyagents.testkit import EventWaiter

lg_channels = pytest.importorskip("langgraph.channels")


class Conn:
    """A value no checkpoint can hold (not JSON-able), as a connection or a client is."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Conn({self.name!r})"


def untracked(g: Any, **kw: Any) -> Any:
    """The library's ``UntrackedValue`` class (no arguments), else an instance."""
    cls = UntrackedValue if g is OURS else lg_channels.UntrackedValue
    return cls(object, **kw) if kw else cls


def state_of(g: Any, **kw: Any) -> Any:
    return TypedDict(  # type: ignore[operator]
        "State",
        {
            "log": Annotated[list[str], operator.add],
            "conn": NotRequired[Annotated[Any, untracked(g, **kw)]],
        },
        total=False,
    )


def name_of(conn: Any) -> str:
    return conn.name if isinstance(conn, Conn) else str(conn)


def paused(g: Any) -> Any:
    """START → a → b → END: a writes ``conn``; b reads it, then asks (``interrupt``) and
    notes what it saw before and after the answer."""

    def a(state: Any) -> dict[str, Any]:
        return {"log": ["a"], "conn": Conn("c1")}

    def b(state: Any) -> dict[str, Any]:
        before = name_of(state.get("conn"))
        answer = g.interrupt("go?")
        return {"log": [f"b:{before}:{answer}"]}

    graph = g.StateGraph(state_of(g)).add_node("a", a).add_node("b", b)
    return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", g.END)


async def test_an_untracked_value_is_seen_in_its_run_and_never_checkpointed(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(paused, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    # the result holds it (b saw it, then paused); the checkpoint does not
    assert name_of(out["conn"]) == name_of(result.state["conn"]) == "c1"
    assert list(result.state) == list(values(out)) == ["log", "conn"]
    ours_state, theirs_state = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert ours_state.values == theirs_state.values == {"log": ["a"]}
    assert ours_state.next == theirs_state.next == ("b",)
    # the resumed run reads the thread back: b runs again without it
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(Command(resume="yes"), thread_id="1")
    assert result.state == values(out) == {"log": ["a", "b:None:yes"]}
    # no checkpoint of the thread ever held it
    for info in await ours.history("1"):
        assert "conn" not in (await ours.get_state("1", info.checkpoint_id)).values
    async for snapshot in theirs.aget_state_history(cfg()):
        assert "conn" not in snapshot.values


async def test_an_untracked_value_without_a_checkpointer_is_the_runs() -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(state_of(g)).add_node("a", lambda s: {"conn": Conn("c")})
        graph.add_node("b", lambda s: {"log": [name_of(s["conn"])]})
        return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", g.END)

    ours, theirs = pair(build, None)
    out = await theirs.ainvoke({"log": []})
    result = await ours.run({"log": []})
    assert result.state["log"] == out["log"] == ["c"]
    assert name_of(result.state["conn"]) == name_of(out["conn"]) == "c"


async def test_an_untracked_input_reaches_the_first_step_and_is_not_saved(
    checkpointer: Checkpointer,
) -> None:
    # the input is saved as a checkpoint of its own (its writes pending): without its
    # untracked keys, so a Conn in the input does not fail the save. (LangGraph's saves the
    # whole input there, its __start__ channel: its InMemorySaver refuses a Conn, so it is
    # given a string)
    def build(g: Any) -> Any:
        graph = g.StateGraph(state_of(g))
        graph.add_node("a", lambda s: {"log": [name_of(s.get("conn"))]})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": [], "conn": "in"}, cfg())
    result = await ours.run({"log": [], "conn": Conn("in")}, thread_id="1")
    assert result.state["log"] == out["log"] == ["in"]
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values
    assert (await ours.get_state("1")).values == {"log": ["in"]}


def two_writers(g: Any, **kw: Any) -> Any:
    """START → x, START → y (one superstep), both writing ``conn``."""
    graph = g.StateGraph(state_of(g, **kw))
    graph.add_node("x", lambda s: {"conn": "from x"})
    graph.add_node("y", lambda s: {"conn": "from y"})
    return graph.add_edge(g.START, "x").add_edge(g.START, "y")


async def test_a_guarded_untracked_value_refuses_two_writes_in_one_step(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(two_writers, checkpointer)
    with pytest.raises(lg_errors.InvalidUpdateError, match="UntrackedValue\\(guard=True\\)"):
        await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "At key 'conn': UntrackedValue(guard=True) can receive only one value" in str(
        result.error
    )


async def test_an_unguarded_untracked_value_keeps_the_last_write(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: two_writers(g, guard=False), checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == values(out) == {"log": [], "conn": "from y"}
    assert (await ours.get_state("1")).values == {"log": []}


async def test_update_state_of_an_untracked_field_saves_nothing_of_it(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(paused, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    await theirs.aupdate_state(cfg(), {"conn": "edited", "log": ["u"]})
    await ours.update_state("1", {"conn": "edited", "log": ["u"]})
    ours_state, theirs_state = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert ours_state.values == theirs_state.values == {"log": ["a", "u"]}
    out = await theirs.ainvoke(THEIRS.Command(resume="ok"), cfg())
    result = await ours.run(Command(resume="ok"), thread_id="1")
    assert result.state == values(out) == {"log": ["a", "u", "b:None:ok"]}


def fan_out(g: Any) -> Any:
    """START → a, which writes ``conn`` and sends the whole state to b; b notes what its
    argument holds."""

    def a(state: Any) -> Any:
        return {"log": ["a"], "conn": Conn("c1")}

    def route(state: Any) -> list[Any]:
        return [g.Send("b", dict(state))]

    def b(arg: Any) -> dict[str, Any]:
        return {"log": [f"b:{name_of(arg.get('conn'))}"]}

    graph = g.StateGraph(state_of(g)).add_node("a", a).add_node("b", b)
    graph.add_conditional_edges("a", route, ["b"])
    return graph.add_edge(g.START, "a").add_edge("b", g.END)


async def test_a_send_of_the_state_keeps_its_untracked_keys_in_the_run_only(
    checkpointer: Checkpointer,
) -> None:
    # in one run b gets the Conn; stopped before b, the saved Send's argument has no "conn"
    # (LangGraph's sanitize_untracked_values_in_send), and b, run from the checkpoint,
    # gets none
    ours, theirs = pair(fan_out, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state["log"] == out["log"] == ["a", "b:c1"]

    ours, theirs = pair(fan_out, checkpointer, interrupt_before=["b"])
    await theirs.ainvoke({"log": []}, cfg("2"))
    stopped = await ours.run({"log": []}, thread_id="2")
    assert stopped.status == "interrupted"
    out = await theirs.ainvoke(None, cfg("2"))
    result = await ours.run(None, thread_id="2")
    assert result.state == values(out) == {"log": ["a", "b:None"]}


async def test_a_fork_of_a_thread_has_no_untracked_value(checkpointer: Checkpointer) -> None:
    ours, _ = pair(paused, checkpointer)
    await ours.run({"log": []}, thread_id="1")
    head = await ours.get_state("1")
    assert head.checkpoint_id is not None
    forked = await ours.fork("1", head.checkpoint_id)
    assert (await ours.get_state(forked)).values == {"log": ["a"]}
    result = await ours.run(Command(resume="yes"), thread_id=forked)
    assert result.state == {"log": ["a", "b:None:yes"]}


@dataclasses.dataclass
class DState:
    log: Annotated[list[str], operator.add] = dataclasses.field(default_factory=list)
    conn: Annotated[Any, UntrackedValue] = "default"


async def test_a_dataclass_node_sees_the_default_of_an_untracked_field_after_a_resume(
    checkpointer: Checkpointer,
) -> None:
    def a(state: DState) -> dict[str, Any]:
        return {"log": ["a"], "conn": Conn("c1")}

    def b(state: DState) -> dict[str, Any]:
        from tinyagents.graph import interrupt

        before = name_of(state.conn)
        return {"log": [f"b:{before}:{interrupt('go?')}"]}

    graph = StateGraph(DState).add_node("a", a).add_node("b", b)
    ours = graph.add_edge("__start__", "a").add_edge("a", "b").compile(checkpointer=checkpointer)
    first = await ours.run({"log": []}, thread_id="1")
    assert first.status == "interrupted"
    assert name_of(first.state["conn"]) == "c1"
    result = await ours.run(Command(resume="yes"), thread_id="1")
    assert result.state == {"log": ["a", "b:default:yes"]}


@pytest.mark.parametrize(
    "marker",
    [
        UntrackedValue,
        UntrackedValue(str),
        UntrackedValue(str, guard=False),
        lg_channels.UntrackedValue,
        lg_channels.UntrackedValue(str),
        lg_channels.UntrackedValue(str, guard=False),
    ],
    ids=["ours", "ours()", "ours(guard=False)", "theirs", "theirs()", "theirs(guard=False)"],
)
def test_an_untracked_value_is_declared_as_langgraph_declares_it(marker: Any) -> None:
    # LangGraph finds a channel anywhere in the metadata (a note after it is no reducer)
    state = TypedDict("State", {"x": Annotated[str, marker, "a note"]})  # type: ignore[operator]  # noqa: UP013
    channel = StateGraph(state).schema.channels["x"]
    assert isinstance(channel.reducer, UntrackedValue)
    assert channel.annotation is str
    assert channel.reducer.guard is (getattr(marker, "guard", True) is not False)


async def test_a_paused_steps_saved_writes_have_no_untracked_value(
    checkpointer: Checkpointer,
) -> None:
    # x and y run in one step; y pauses, so x's writes are saved as the step's pending
    # writes, which keep x's log and drop its Conn: z, after the resume, sees no "conn"
    def build(g: Any) -> Any:
        graph = g.StateGraph(state_of(g))
        graph.add_node("x", lambda s: {"log": ["x"], "conn": Conn("x")})
        graph.add_node("y", lambda s: {"log": [f"y:{g.interrupt('go?')}"]})
        graph.add_node("z", lambda s: {"log": [f"z:{name_of(s.get('conn'))}"]})
        graph.add_edge(g.START, "x").add_edge(g.START, "y").add_edge(["x", "y"], "z")
        return graph.add_edge("z", g.END)

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    first = await ours.run({"log": []}, thread_id="1")
    assert first.status == "interrupted"
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(Command(resume="yes"), thread_id="1")
    assert result.state == values(out) == {"log": ["x", "y:yes", "z:None"]}


async def test_a_managed_run_woken_by_an_answer_goes_on_without_its_untracked_value(
    rt: Runtime, waiter: EventWaiter
) -> None:
    # a run that rests at its interrupt and is woken in place by the answer goes on as the
    # thread resumed with that answer would (``paused``, resumed above): b runs again and
    # sees no "conn", as after run(Command(resume=...))
    handle = await rt.start_graph(paused(OURS).compile(checkpointer=MemoryCheckpointer()), {})
    event = await waiter.event("graph.interrupt", handle.run_id)
    target = SteeringTarget.graph_task(handle.run_id, event.task_id)
    await rt.submit(
        SteeringCommand(
            target=target,
            actor=SteeringActor.test(),
            kind=SteeringKind.PROVIDE_CONTEXT,
            payload={"value": "yes"},
        )
    )
    result = await handle.result()
    assert result.output == {"log": ["a", "b:None:yes"]}


def _cmd(run_id: str, kind: SteeringKind, payload: dict[str, Any] | None = None) -> Any:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=SteeringActor.test(),
        kind=kind,
        payload=payload or {},
    )


async def _applied(rt: Runtime, waiter: EventWaiter, cmd: SteeringCommand) -> str:
    """Submit ``cmd`` and wait for its end (applied or failed); its type."""
    assert (await rt.submit(cmd)).status == "accepted"
    ended = await waiter.until(
        lambda e: (
            e.type in ("steering.applied", "steering.failed")
            and getattr(e, "correlation_id", None) == cmd.correlation_id
        )
    )
    return str(ended.type)


async def _rests(handle: Any) -> None:
    while handle.status is not RunStatus.INTERRUPTED:  # noqa: ASYNC110 (a status, no event)
        await asyncio.sleep(0.01)


async def _wake_without_moving_on(rt: Runtime, waiter: EventWaiter, handle: Any, wake: str) -> None:
    """Wake the resting run with commands that do not move it on from its interrupt."""
    run_id = handle.run_id
    if wake == "pause":
        assert await _applied(rt, waiter, _cmd(run_id, SteeringKind.PAUSE)) == "steering.applied"
        assert await _applied(rt, waiter, _cmd(run_id, SteeringKind.RESUME)) == "steering.applied"
    elif wake == "status":
        status = _cmd(run_id, SteeringKind.REQUEST_STATUS)
        assert await _applied(rt, waiter, status) == "steering.applied"
    elif wake == "failed":
        handle.policies = []  # as if accepted before the graph's policy refused it at submit
        wrong = _cmd(run_id, SteeringKind.APPROVE, {"interrupt_id": "i-no-such-question"})
        assert await _applied(rt, waiter, wrong) == "steering.failed"
    await asyncio.wait_for(_rests(handle), 60)


@pytest.mark.parametrize("wake", ["none", "pause", "status", "failed"])
async def test_a_managed_run_woken_at_rest_without_going_on_keeps_its_untracked_value(
    rt: Runtime, waiter: EventWaiter, wake: str
) -> None:
    # LangGraph has no such wake (its run ends at an interrupt; only a new invoke, which
    # reads the thread back, goes on): a run paused and let go of, asked its status, sent a
    # command that failed, or cancelled where it rests read nothing back, and keeps the
    # value (it was dropped at every wake): the cancelled run's result holds it
    handle = await rt.start_graph(paused(OURS).compile(checkpointer=MemoryCheckpointer()), {})
    await waiter.event("graph.interrupt", handle.run_id)
    await asyncio.wait_for(_rests(handle), 60)
    await _wake_without_moving_on(rt, waiter, handle, wake)
    await handle.cancel()
    result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    assert name_of(result.output.get("conn")) == "c1"
    assert result.output["log"] == ["a"]


@pytest.mark.parametrize("wake", ["pause", "status", "failed"])
async def test_a_managed_run_woken_at_rest_then_answered_goes_on_as_langgraphs_resume(
    rt: Runtime, waiter: EventWaiter, wake: str
) -> None:
    # the answer moves it on as LangGraph's Command(resume=...) would, whatever woke it
    # before: b runs again and sees no "conn" (LangGraph reads the thread back)
    ours, theirs = pair(paused, MemoryCheckpointer())
    await theirs.ainvoke({"log": []}, cfg())
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    handle = await rt.start_graph(ours, {})
    event = await waiter.event("graph.interrupt", handle.run_id)
    await asyncio.wait_for(_rests(handle), 60)
    await _wake_without_moving_on(rt, waiter, handle, wake)
    answer = SteeringCommand(
        target=SteeringTarget.graph_task(handle.run_id, event.task_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.PROVIDE_CONTEXT,
        payload={"value": "yes"},
    )
    assert await _applied(rt, waiter, answer) == "steering.applied"
    result = await handle.result()
    assert result.output == values(out) == {"log": ["a", "b:None:yes"]}


class POurs(BaseModel):
    model_config = {"arbitrary_types_allowed": True}
    log: Annotated[list[str], operator.add] = []
    conn: Annotated[Any, UntrackedValue] = None
    n: Annotated[int, UntrackedValue(int)] = 0


class PTheirs(BaseModel):
    model_config = {"arbitrary_types_allowed": True}
    log: Annotated[list[str], operator.add] = []
    conn: Annotated[Any, lg_channels.UntrackedValue] = None
    n: Annotated[int, lg_channels.UntrackedValue(int)] = 0


def pydantic_state(g: Any) -> Any:
    def b(state: Any) -> dict[str, Any]:
        return {"log": [f"b:{name_of(state.conn)}:{state.n}"]}

    graph = g.StateGraph(POurs if g is OURS else PTheirs)
    graph.add_node("a", lambda s: {"conn": Conn("c"), "n": 5, "log": ["a"]}).add_node("b", b)
    return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", g.END)


async def test_a_pydantic_state_with_untracked_fields(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(pydantic_state, checkpointer)
    for given in ({"log": []}, {"log": [], "n": 3}):  # the second run: n is written anew
        out = await theirs.ainvoke(given, cfg())
        result = await ours.run(given, thread_id="1")
        assert {**result.state, "conn": None} == {**out, "conn": None}
        assert name_of(result.state["conn"]) == name_of(out["conn"]) == "c"
        ours_values = (await ours.get_state("1")).values
        assert ours_values == (await theirs.aget_state(cfg())).values
    assert ours_values == {"log": ["a", "b:c:5", "a", "b:c:5"]}


async def test_a_sub_graph_gets_and_hands_back_an_untracked_value(
    checkpointer: Checkpointer,
) -> None:
    # the parent's Conn reaches the sub-graph as input (its own untracked field: saved
    # nowhere in its namespace either), and the one the sub-graph writes reaches the
    # parent's next node; after a resume inside the sub-graph, neither is there
    def build(g: Any) -> Any:
        def inner(state: Any) -> dict[str, Any]:
            seen = name_of(state.get("conn"))
            return {"log": [f"inner:{seen}:{g.interrupt('go?')}"], "conn": Conn("sub")}

        sub = g.StateGraph(state_of(g)).add_node("inner", inner).add_edge(g.START, "inner")
        graph = g.StateGraph(state_of(g))
        graph.add_node("a", lambda s: {"conn": Conn("a")}).add_node("sub", sub.compile())
        graph.add_node("c", lambda s: {"log": [f"c:{name_of(s.get('conn'))}"]})
        graph.add_edge(g.START, "a").add_edge("a", "sub").add_edge("sub", "c")
        return graph.add_edge("c", g.END)

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    first = await ours.run({"log": []}, thread_id="1")
    assert first.status == "interrupted"
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(Command(resume="yes"), thread_id="1")
    assert {**result.state, "conn": None} == {**out, "conn": None}
    assert result.state["log"] == ["inner:None:yes", "c:sub"]
    assert name_of(result.state["conn"]) == name_of(out["conn"]) == "sub"


class Private(TypedDict, total=False):
    secret: Annotated[Any, UntrackedValue]


class PrivateTheirs(TypedDict, total=False):
    secret: Annotated[Any, lg_channels.UntrackedValue]


async def test_an_untracked_field_of_a_nodes_input_schema_is_saved_nowhere(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's private state: the field is a channel of the graph through b's input
    # schema alone; a writes it, b reads it, then asks, and after the resume b sees none
    def build(g: Any) -> Any:
        def b(state: Any) -> dict[str, Any]:
            seen = name_of(state.get("secret"))
            return {"log": [f"b:{seen}:{g.interrupt('go?')}"]}

        graph = g.StateGraph(state_of(g)).add_node("a", lambda s: {"secret": Conn("p")})
        graph.add_node("b", b, input_schema=Private if g is OURS else PrivateTheirs)
        return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    first = await ours.run({"log": []}, thread_id="1")
    assert first.status == "interrupted"
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(Command(resume="yes"), thread_id="1")
    assert result.state == values(out) == {"log": ["b:None:yes"]}
