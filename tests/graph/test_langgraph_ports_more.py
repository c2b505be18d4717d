"""More ports of LangGraph's own tests (``libs/langgraph/tests/test_pregel_async.py``,
``test_state.py``, ``test_managed_values.py``, ``test_interruption.py``): the same program on
LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.

This file covers what that one does not: pydantic and dataclass state schemas, input/output
schemas, managed values, the builder shortcuts (``set_entry_point``, ``add_sequence``,
``defer``), nodes returning the wrong thing (or taking a config), several inputs on one
thread, a resume with nothing to resume, routers mixing node names, ``END`` and ``Send``s,
interrupts in nested sub-graphs and in graphs called from a node, the recursion limit,
``update_state(as_node=...)`` on a finished thread, checkpoint steps and sources, a failed
step in ``get_state``, and the values / updates streams at an interrupt.

Each program is written once, as a function of a namespace ``g`` holding either library's
``StateGraph``, ``START``, ``END``, ``Command``, ``Send`` and ``interrupt``. LangGraph runs on
its ``InMemorySaver``; ours on every checkpointer backend (the ``checkpointer`` fixture).
A difference that docs/graph.md documents is asserted as ours, with a comment naming the
section; one it does not is an ``xfail(strict=True)`` whose reason says what differs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
import uuid
from typing import Annotated, Any, Literal, TypedDict

import pytest
from graphkit import logger
from langgraph_kit import (
    OURS,
    THEIRS,
    Log,
    abc_graph,
    cfg,
    lg_errors,
    lg_graph,
    lg_managed,
    lg_memory,
    lg_message,
    lg_types,
    pair,
    shape,
    values,
)
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tinyagents.errors import (
    ConfigurationError,
    GraphRecursionError,
    InterruptError,
    InvalidRouteError,
    InvalidUpdateError,
)
from tinyagents.graph import (
    END,
    REMOVE_ALL_MESSAGES,
    START,
    Command,
    IsLastStep,
    NodeContext,
    RemainingSteps,
    RetryPolicy,
    Send,
    StateGraph,
    add_messages,
)
from tinyagents.harness import Message
from tinyagents.store.checkpoint import Checkpointer
from tinyagents.testkit import SequentialIds, use_ids

# -- state schemas: pydantic models and dataclasses -----------------------------------------


class Profile(BaseModel):
    city: str
    zip_code: int = 0


class PydState(BaseModel):
    name: str = "anon"
    n: int = 0
    log: Annotated[list[str], operator.add] = []
    profile: Profile | None = None


def pydantic_graph(g: Any, seen: list[Any]) -> Any:
    """LangGraph: test_pydantic_state / test_state_schema_default_values (a node receives an
    instance of the model, defaults filled in; a reducer from ``Annotated``)."""

    def first(state: PydState) -> dict[str, Any]:
        seen.append((type(state).__name__, state.name, state.n, list(state.log)))
        return {"n": state.n + 1, "log": ["first"], "profile": Profile(city="Oslo")}

    def second(state: PydState) -> dict[str, Any]:
        assert state.profile is not None
        seen.append((type(state).__name__, state.profile.city, state.n))
        return {"log": [f"second in {state.profile.city}"]}

    graph = g.StateGraph(PydState).add_node("first", first).add_node("second", second)
    return graph.add_edge(g.START, "first").add_edge("first", "second").add_edge("second", g.END)


class Checked(BaseModel):
    n: int = Field(default=0, ge=0)
    lo: int = 0
    hi: int = 10
    word: str = ""

    @field_validator("word")
    @classmethod
    def _no_spaces(cls, v: str) -> str:
        if " " in v:
            raise ValueError("one word")
        return v.upper()  # a transforming validator: LangGraph keeps the input as given

    @model_validator(mode="after")
    def _ordered(self) -> Checked:
        if self.lo > self.hi:
            raise ValueError("lo > hi")
        return self


@pytest.mark.parametrize(
    ("given", "refused"),
    [
        ({"n": -1}, "'n'"),  # a Field constraint
        ({"word": "two words"}, "one word"),  # a field validator
        ({"lo": 20}, "lo > hi"),  # a model validator
        ({"n": 3, "word": "abc"}, None),
    ],
)
async def test_pydantic_state_input_meets_the_models_validators(
    checkpointer: Checkpointer, given: dict[str, Any], refused: str | None
) -> None:
    # LangGraph validates run input against the state model; ours checked each field's bare
    # type only, so Field(ge=0), field and model validators let anything in
    def build(g: Any) -> Any:
        graph = g.StateGraph(Checked).add_node("a", lambda s: {"lo": s.lo})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    if refused is None:
        out = await theirs.ainvoke(given, cfg())
        result = await ours.run(given, thread_id="1")
        assert result.state == out == {**given, "lo": 0}  # kept as given, not upper-cased
        return
    with pytest.raises(ValidationError):
        await theirs.ainvoke(given, cfg())
    with pytest.raises(InvalidUpdateError, match=refused):
        await ours.run(given, thread_id="1")
    assert (await ours.get_state("1")).checkpoint_id is None  # nothing saved


@dataclasses.dataclass
class Job:
    n: int


class PJob(BaseModel):
    n: int


@pytest.mark.parametrize("kind", ["dataclass", "pydantic", "local"])
async def test_a_send_argument_keeps_its_class_across_a_resume(
    checkpointer: Checkpointer, kind: str
) -> None:
    # map-reduce with model arguments and a worker whose parameter has no annotation: after
    # an interrupt the resumed worker got a plain dict from the checkpoint (AttributeError
    # on a.n); LangGraph's serializer gives the object back, and so does ours now (a class
    # defined in a function too, while this process has it)
    @dataclasses.dataclass
    class LocalJob:
        n: int

    cls: Any = {"dataclass": Job, "pydantic": PJob, "local": LocalJob}[kind]

    def build(g: Any) -> Any:
        def w(a):  # type: ignore[no-untyped-def]  # no annotation: the point of the test
            ok = g.interrupt(f"approve {a.n}?")
            return {"log": [f"{type(a).__name__} {a.n} {ok}"]}

        graph = g.StateGraph(Log).add_node("w", w)
        return graph.add_conditional_edges(
            g.START, lambda s: [g.Send("w", cls(n=i)) for i in (0, 1)]
        )

    ours, theirs = pair(build, checkpointer)
    first = await ours.run({"log": []}, thread_id="1")
    assert [i.value for i in first.interrupts] == ["approve 0?", "approve 1?"]
    answers = {i.id: "yes" for i in first.interrupts}
    result = await ours.run(Command(resume=answers), thread_id="1")
    assert result.status == "completed", result.error
    name = cls.__name__
    assert result.state == {"log": [f"{name} 0 yes", f"{name} 1 yes"]}
    if kind != "local":  # LangGraph's serializer cannot bring a local class back (a dict)
        await theirs.ainvoke({"log": []}, cfg())
        pending = (await theirs.aget_state(cfg())).interrupts
        out = await theirs.ainvoke(THEIRS.Command(resume={i.id: "yes" for i in pending}), cfg())
        assert out == result.state


async def test_a_past_checkpoint_shows_what_its_step_did(checkpointer: Checkpointer) -> None:
    # LangGraph's history: each checkpoint's tasks with the writes they made and every
    # question they asked (answered since or not). Ours showed no result for a step of one
    # task (its writes are in the next checkpoint, not in pending writes) nor for the input,
    # and dropped an answered question
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a"))
        graph.add_node("b", lambda s: {"log": ["b:" + g.interrupt("q")]})
        graph.add_node("c", logger("c")).add_edge(g.START, "a").add_edge("a", "b").add_edge(
            "a", "c"
        )
        return graph.add_edge("b", g.END).add_edge("c", g.END)

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": ["in"]}, cfg())
    await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    await ours.run({"log": ["in"]}, thread_id="1")
    await ours.run(Command(resume="yes"), thread_id="1")

    def seen(snapshot: Any) -> Any:
        tasks = [(t.name, [i.value for i in t.interrupts], t.result) for t in snapshot.tasks]
        return (tuple(snapshot.next), tasks, [i.value for i in snapshot.interrupts])

    theirs_past = [seen(s) async for s in theirs.aget_state_history(cfg())]
    ours_past = [seen(await ours.get_state("1", h.checkpoint_id)) for h in await ours.history("1")]
    assert ours_past == theirs_past
    assert theirs_past[1:] == [
        (("b", "c"), [("b", ["q"], {"log": ["b:yes"]}), ("c", [], {"log": ["c"]})], ["q"]),
        (("a",), [("a", [], {"log": ["a"]})], []),
        (("__start__",), [("__start__", [], {"log": ["in"]})], []),
    ]


class WithDefaults(BaseModel):
    n: int = 0
    label: str = "x"
    note: str | None = None


async def test_a_pydantic_instance_as_input_writes_its_defaults_too(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph writes an instance's fields that were set and those whose default is not
    # None (as a node's returned instance is read); ours wrote the set fields only
    def build(g: Any) -> Any:
        graph = g.StateGraph(WithDefaults).add_node("a", lambda s: {"n": s.n + 1})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke(WithDefaults(n=3), cfg())
    result = await ours.run(WithDefaults(n=3), thread_id="1")
    assert result.state == out == {"n": 4, "label": "x"}


async def test_pydantic_state_nodes_see_instances_with_defaults(
    checkpointer: Checkpointer,
) -> None:
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = pydantic_graph(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = pydantic_graph(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"log": ["in"]}, cfg())
    result = await ours.run({"log": ["in"]}, thread_id="1")
    assert result.status == "completed", result.error
    assert (
        ours_seen
        == theirs_seen
        == [
            ("PydState", "anon", 0, ["in"]),
            ("PydState", "Oslo", 1),
        ]
    )
    # every written channel is equal, the nested model included (decoded back into Profile
    # from the checkpoint's JSON on our side)
    assert {k: result.state[k] for k in out} == out
    assert out == {
        "n": 1,
        "log": ["in", "first", "second in Oslo"],
        "profile": Profile(city="Oslo"),
    }
    ours_state = await ours.get_state("1")
    assert isinstance(ours_state.values["profile"], Profile)
    theirs_state = await theirs.aget_state(cfg())
    assert {k: ours_state.values[k] for k in theirs_state.values} == theirs_state.values


async def test_pydantic_state_output_is_exactly_langgraphs(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: pydantic_graph(g, []), checkpointer)
    out = await theirs.ainvoke({"log": ["in"]}, cfg())
    result = await ours.run({"log": ["in"]}, thread_id="1")
    assert "name" not in out
    assert result.state == out


async def test_pydantic_input_is_validated(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: pydantic_graph(g, []), checkpointer)
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        await theirs.ainvoke({"n": "not a number"}, cfg())
    # ours: an InvalidUpdateError naming the field, raised before anything runs or is saved
    # (docs/graph.md, "State": "validated at the boundary (InvalidUpdateError naming the
    # field on a bad value)"); it is not a pydantic ValidationError (nor a ValueError)
    with pytest.raises(InvalidUpdateError, match="'n'"):
        await ours.run({"n": "not a number"}, thread_id="1")
    assert (await ours.get_state("1")).checkpoint_id is None
    # a valid value is coerced on both ("3" -> 3)
    out = await theirs.ainvoke({"n": "3"}, cfg("2"))
    result = await ours.run({"n": "3"}, thread_id="2")
    assert out["n"] == result.state["n"] == 4


@dataclasses.dataclass
class DcState:
    topic: str = "none"
    log: Annotated[list[str], operator.add] = dataclasses.field(default_factory=list)
    count: Annotated[int, operator.add] = 0


def dataclass_graph(g: Any) -> Any:
    """LangGraph: test_dataclass_state (attribute access, default_factory, reducers)."""

    def a(state: DcState) -> dict[str, Any]:
        return {"log": [f"a on {state.topic}"], "count": 1}

    def b(state: DcState) -> dict[str, Any]:
        return {"log": [f"b after {len(state.log)}"], "count": 2}

    graph = g.StateGraph(DcState).add_node("a", a).add_node("b", b)
    return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", g.END)


async def test_dataclass_state_defaults_and_reducers(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(dataclass_graph, checkpointer)
    out = await theirs.ainvoke({"topic": "tides"}, cfg())
    result = await ours.run({"topic": "tides"}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out == {"topic": "tides", "log": ["a on tides", "b after 1"], "count": 3}
    # a second input on the thread: the counter reducer folds it in on both
    out = await theirs.ainvoke({"count": 10}, cfg())
    result = await ours.run({"count": 10}, thread_id="1")
    assert result.state == out
    assert out["count"] == 16


class Question(TypedDict):
    question: str


class Answer(TypedDict):
    answer: str


class QA(TypedDict, total=False):
    question: str
    answer: str
    scratch: str


async def test_input_and_output_schemas(checkpointer: Checkpointer) -> None:
    # LangGraph: test_input_output_schema / test_state_graph_w_config_inherited_state_keys
    def build(g: Any) -> Any:
        def think(state: Any) -> dict[str, Any]:
            return {"scratch": f"thinking about {state['question']}"}

        def answer(state: Any) -> dict[str, Any]:
            return {"answer": state["scratch"].upper()}

        graph = g.StateGraph(QA, input_schema=Question, output_schema=Answer)
        graph.add_node("think", think).add_node("answer", answer)
        return (
            graph.add_edge(g.START, "think").add_edge("think", "answer").add_edge("answer", g.END)
        )

    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"question": "tides"}, cfg())
    assert out == {"answer": "THINKING ABOUT TIDES"}
    ours = build(OURS).compile(checkpointer=checkpointer)
    assert (await ours.run({"question": "tides"}, thread_id="1")).state == out


# -- managed values ---------------------------------------------------------------------------


class Budget(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    remaining_steps: lg_managed.RemainingSteps
    is_last_step: lg_managed.IsLastStep


class OurBudget(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    remaining_steps: RemainingSteps
    is_last_step: IsLastStep


def budget_graph(g: Any, seen: list[tuple[str, int, bool]], stop_at: int) -> Any:
    schema = Budget if g is THEIRS else OurBudget

    def work(state: Any) -> dict[str, Any]:
        seen.append(("node", state["remaining_steps"], state["is_last_step"]))
        return {"log": ["work"]}

    def route(state: Any) -> str:
        seen.append(("router", state["remaining_steps"], state["is_last_step"]))
        return g.END if state["remaining_steps"] <= stop_at else "work"

    graph = g.StateGraph(schema).add_node("work", work).add_edge(g.START, "work")
    return graph.add_conditional_edges("work", route)


@pytest.mark.parametrize(("limit", "stop_at"), [(5, 2), (4, -1)])
async def test_remaining_steps_and_is_last_step(
    checkpointer: Checkpointer, limit: int, stop_at: int
) -> None:
    # LangGraph: test_managed_values / the create_react_agent guard "stop before the limit";
    # ours had no managed values (state["remaining_steps"] was a KeyError)
    ours_seen: list[tuple[str, int, bool]] = []
    theirs_seen: list[tuple[str, int, bool]] = []
    theirs = budget_graph(THEIRS, theirs_seen, stop_at).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    ours = budget_graph(OURS, ours_seen, stop_at).compile(checkpointer=checkpointer)
    try:
        out: Any = await theirs.ainvoke({"log": []}, {**cfg(), "recursion_limit": limit})
    except lg_errors.GraphRecursionError:
        out = None
    result = await ours.run({"log": []}, thread_id="1", recursion_limit=limit)
    assert ours_seen == theirs_seen
    if out is None:
        assert isinstance(result.error, GraphRecursionError)
    else:
        assert result.status == "completed", result.error
        assert result.state == out == {"log": ["work"] * 3}  # managed values are not output
    assert "remaining_steps" not in (await ours.get_state("1")).values


def start_routed(g: Any, seen: list[tuple[str, int, bool]], entry: str) -> Any:
    """START -(router)-> work → END, the router and the node noting the managed values."""
    schema = Budget if g is THEIRS else OurBudget

    def work(state: Any) -> dict[str, Any]:
        seen.append(("node", state["remaining_steps"], state["is_last_step"]))
        return {"log": ["work"]}

    def route(state: Any) -> str:
        seen.append(("start", state["remaining_steps"], state["is_last_step"]))
        return "work"

    graph = g.StateGraph(schema).add_node("work", work).add_edge("work", g.END)
    if entry == "set_conditional_entry_point":
        return graph.set_conditional_entry_point(route)
    return graph.add_conditional_edges(g.START, route)


@pytest.mark.parametrize("entry", ["add_conditional_edges", "set_conditional_entry_point"])
@pytest.mark.parametrize("limit", [1, 2, 25])
async def test_a_start_router_sees_the_managed_values(
    checkpointer: Checkpointer, entry: str, limit: int
) -> None:
    # LangGraph runs a START router before the first step, with the whole limit to go
    # (limit 1: remaining_steps 1, is_last_step True); ours gave it no managed values
    # (state["remaining_steps"] was a KeyError), as the second input on a thread
    ours_seen: list[tuple[str, int, bool]] = []
    theirs_seen: list[tuple[str, int, bool]] = []
    theirs = start_routed(THEIRS, theirs_seen, entry).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    ours = start_routed(OURS, ours_seen, entry).compile(checkpointer=checkpointer)
    for _ in range(2):  # a new input on the thread routes from START again
        try:
            await theirs.ainvoke({"log": []}, {**cfg(), "recursion_limit": limit})
        except lg_errors.GraphRecursionError:
            pass
        await ours.run({"log": []}, thread_id="1", recursion_limit=limit)
    assert ours_seen == theirs_seen
    assert ours_seen[0] == ("start", limit, limit == 1)


async def test_a_start_router_of_a_sub_graph_sees_the_managed_values(
    checkpointer: Checkpointer,
) -> None:
    # a sub-graph starts counting its own steps: its START router sees the whole limit
    ours_seen: list[tuple[str, int, bool]] = []
    theirs_seen: list[tuple[str, int, bool]] = []

    def build(g: Any, seen: list[tuple[str, int, bool]]) -> Any:
        schema = Budget if g is THEIRS else OurBudget
        inner = start_routed(g, seen, "add_conditional_edges").compile()
        graph = g.StateGraph(schema).add_node("pre", logger("pre")).add_node("sub", inner)
        return graph.add_edge(g.START, "pre").add_edge("pre", "sub").add_edge("sub", g.END)

    theirs = build(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    ours = build(OURS, ours_seen).compile(checkpointer=checkpointer)
    await theirs.ainvoke({"log": []}, {**cfg(), "recursion_limit": 10})
    result = await ours.run({"log": []}, thread_id="1", recursion_limit=10)
    assert result.status == "completed", result.error
    assert ours_seen == theirs_seen == [("start", 10, False), ("node", 9, False)]


# -- builder shortcuts ------------------------------------------------------------------------


async def test_set_entry_point_and_set_finish_point(checkpointer: Checkpointer) -> None:
    # LangGraph: test_state_graph_with_entry_point (the pre-START spelling of add_edge)
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a")).add_node("b", logger("b"))
        return graph.set_entry_point("a").add_edge("a", "b").set_finish_point("b")

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    assert (await ours.run({"log": []}, thread_id="1")).state == out == {"log": ["a", "b"]}


async def test_set_conditional_entry_point(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a")).add_node("b", logger("b"))
        graph.set_conditional_entry_point(lambda s: "b" if s["log"] else "a")
        return graph.add_edge("a", g.END).add_edge("b", g.END)

    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"log": ["x"]}, cfg())
    assert out == {"log": ["x", "b"]}
    ours = build(OURS).compile(checkpointer=checkpointer)
    assert (await ours.run({"log": ["x"]}, thread_id="1")).state == out


async def test_add_sequence(checkpointer: Checkpointer) -> None:
    # LangGraph: test_sequence (add_sequence of plain functions, names from __name__)
    def step_one(state: Any) -> dict[str, Any]:
        return {"log": ["one"]}

    def step_two(state: Any) -> dict[str, Any]:
        return {"log": ["two"]}

    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_sequence([step_one, step_two])
        return graph.add_edge(g.START, "step_one").add_edge("step_two", g.END)

    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"log": []}, cfg())
    assert out == {"log": ["one", "two"]}
    ours = build(OURS).compile(checkpointer=checkpointer)
    assert (await ours.run({"log": []}, thread_id="1")).state == out


async def test_deferred_node_waits_for_uneven_branches(checkpointer: Checkpointer) -> None:
    # LangGraph: test_defer_node (fan-out with branches of different lengths, one aggregate)
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log)
        graph.add_node("short", logger("short")).add_node("long1", logger("long1"))
        graph.add_node("long2", logger("long2"))
        graph.add_node("aggregate", lambda s: {"log": [f"aggregate {len(s['log'])}"]}, defer=True)
        graph.add_edge(g.START, "short").add_edge(g.START, "long1").add_edge("long1", "long2")
        graph.add_edge("short", "aggregate").add_edge("long2", "aggregate")
        return graph.add_edge("aggregate", g.END)

    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({"log": []}, cfg())
    assert out == {"log": ["long1", "short", "long2", "aggregate 3"]}
    ours = build(OURS).compile(checkpointer=checkpointer)
    assert (await ours.run({"log": []}, thread_id="1")).state == out


# -- what a node returns ----------------------------------------------------------------------


@pytest.mark.parametrize("returned", ["oops", ["log", "x"], 3])
async def test_a_node_returning_a_non_dict_is_an_invalid_update(
    checkpointer: Checkpointer, returned: Any
) -> None:
    # LangGraph: test_invalid_node_return ("Expected dict, got ...", INVALID_GRAPH_NODE_RETURN_VALUE)
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("odd", lambda s: returned)
        return graph.add_edge(g.START, "odd").add_edge("odd", g.END)

    ours, theirs = pair(build, checkpointer)
    with pytest.raises(lg_errors.InvalidUpdateError, match="Expected dict"):
        await theirs.ainvoke({"log": []}, cfg())
    # ours: the same error type, as status="failed" rather than raised (docs/graph.md,
    # "Running"); the message names the node and what to return ("Nodes")
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "node 'odd' returned a" in str(result.error)
    assert "return a dict of state updates" in str(result.error)
    with pytest.raises(InvalidUpdateError):
        result.raise_for_status()


async def test_a_node_with_a_second_parameter_gets_our_context_not_a_config(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph passes a node's second parameter (named config) its RunnableConfig; ours passes
    # a NodeContext (docs/graph.md, "Nodes": fn(state, ctx)), whose thread_id is the config's
    # configurable thread_id. Ported code reading config["configurable"] must change.
    from langchain_core.runnables import RunnableConfig

    seen: dict[str, Any] = {}

    def ours_node(state: Any, config: Any) -> dict[str, Any]:
        seen["ours"] = (type(config).__name__, config.thread_id, config.node)
        return {"log": ["n"]}

    def theirs_node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        seen["theirs"] = (type(config).__name__, config["configurable"]["thread_id"])
        return {"log": ["n"]}

    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("n", ours_node if g is OURS else theirs_node)
        return graph.add_edge(g.START, "n").add_edge("n", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg("t-9"))
    assert (await ours.run({"log": []}, thread_id="t-9")).state == out
    assert seen["theirs"] == ("dict", "t-9")
    assert seen["ours"] == (NodeContext.__name__, "t-9", "n")


# -- one thread, several runs -----------------------------------------------------------------


class ChatState(TypedDict, total=False):
    messages: Annotated[list[Any], lg_message.add_messages]
    turns: Annotated[int, operator.add]
    last: str


def chat_graph(g: Any) -> Any:
    """A chat thread (LangGraph: test_in_memory_checkpointer / the memory quickstart): each
    input adds a user message; the bot answers with how many messages it has seen."""

    def bot(state: Any) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [{"role": "assistant", "content": f"seen {n}", "id": f"a{n}"}],
            "turns": 1,
            "last": "bot",
        }

    graph = g.StateGraph(ChatState if g is THEIRS else OurChatState).add_node("bot", bot)
    return graph.add_edge(g.START, "bot").add_edge("bot", g.END)


class OurChatState(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    turns: Annotated[int, operator.add]
    last: str


async def test_several_inputs_on_one_thread_carry_the_state_on(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(chat_graph, checkpointer)
    for i in range(3):
        user = {"messages": [{"role": "user", "content": f"hi {i}", "id": f"u{i}"}], "last": "user"}
        out = await theirs.ainvoke(user, cfg())
        result = await ours.run(user, thread_id="1")
        assert result.status == "completed", result.error
        theirs_view = [(m.id, m.content) for m in out["messages"]]
        # ours keeps messages as given (LangGraph converts dicts to its message classes)
        assert [(m["id"], m["content"]) for m in result.state["messages"]] == theirs_view
        assert result.state["turns"] == out["turns"] == i + 1
        assert result.state["last"] == out["last"] == "bot"
    assert theirs_view[-2:] == [("u2", "hi 2"), ("a5", "seen 5")]
    # an input re-sending a known message id replaces it on both, through the reducer
    edit = {"messages": [{"role": "user", "content": "edited", "id": "u0"}]}
    out = await theirs.ainvoke(edit, cfg())
    result = await ours.run(edit, thread_id="1")
    theirs_view = [(m.id, m.content) for m in out["messages"]]
    assert [(m["id"], m["content"]) for m in result.state["messages"]] == theirs_view
    assert theirs_view[0] == ("u0", "edited") and theirs_view[-1] == ("a6", "seen 6")


async def test_remove_message_deletes_by_id(checkpointer: Checkpointer) -> None:
    # LangGraph: RemoveMessage(id=...) in an add_messages update deletes that message, and
    # RemoveMessage(id=REMOVE_ALL_MESSAGES) everything before it (the "delete messages"
    # how-to); ours reads any message whose type is "remove", LangChain's or a dict
    messages = pytest.importorskip("langchain_core.messages")
    remove_all = lg_message.REMOVE_ALL_MESSAGES
    assert remove_all == REMOVE_ALL_MESSAGES

    def build(g: Any) -> Any:
        def trim(state: Any) -> dict[str, Any]:
            ids = [m["id"] if isinstance(m, dict) else m.id for m in state["messages"]]
            return {"messages": [messages.RemoveMessage(id="u0")]} if "u0" in ids else {}

        graph = g.StateGraph(ChatState if g is THEIRS else OurChatState).add_node("trim", trim)
        return graph.add_edge(g.START, "trim").add_edge("trim", g.END)

    ours, theirs = pair(build, checkpointer)
    start = {
        "messages": [
            messages.HumanMessage("hi", id="u0"),
            messages.AIMessage("hello", id="a0"),
            messages.HumanMessage("bye", id="u1"),
        ]
    }
    out = await theirs.ainvoke(start, cfg())
    result = await ours.run(start, thread_id="1")
    assert [m.id for m in result.state["messages"]] == [m.id for m in out["messages"]]
    assert [m.id for m in out["messages"]] == ["a0", "u1"]
    again = {
        "messages": [messages.RemoveMessage(id=remove_all), messages.HumanMessage("new", id="u2")]
    }
    out = await theirs.ainvoke(again, cfg())
    result = await ours.run(again, thread_id="1")
    assert [m.id for m in result.state["messages"]] == [m.id for m in out["messages"]] == ["u2"]
    # read back from the checkpoint (deltas replayed) the same, LangChain's messages again
    saved = (await ours.get_state("1")).values["messages"]
    assert saved == [messages.HumanMessage("new", id="u2")]
    # a dict with type "remove" is the same marker; an id that is not there is an error
    assert add_messages([{"id": "x"}, {"id": "y"}], [{"type": "remove", "id": "x"}]) == [
        {"id": "y"}
    ]
    with pytest.raises(ValueError, match="a message with an ID that doesn't exist \\('nope'\\)"):
        add_messages([{"id": "x"}], [{"type": "remove", "id": "nope"}])


async def test_messages_without_ids_get_them_so_a_node_can_remove_them(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's "delete messages" how-to: the input's messages carry no ids, add_messages
    # gives each one, and a node removes all but the last two with RemoveMessage(id=m.id).
    # Ours kept them without ids: RemoveMessage(id=None) was an error
    messages = pytest.importorskip("langchain_core.messages")

    def build(g: Any) -> Any:
        def reply(state: Any) -> dict[str, Any]:
            return {"messages": [messages.AIMessage(f"seen {len(state['messages'])}")]}

        def trim(state: Any) -> dict[str, Any]:
            return {"messages": [messages.RemoveMessage(id=m.id) for m in state["messages"][:-2]]}

        graph = g.StateGraph(ChatState if g is THEIRS else OurChatState)
        graph.add_node("reply", reply).add_node("trim", trim)
        return graph.add_edge(g.START, "reply").add_edge("reply", "trim").add_edge("trim", g.END)

    ours, theirs = pair(build, checkpointer)
    for text in ("one", "two", "three"):
        out = await theirs.ainvoke({"messages": [messages.HumanMessage(text)]}, cfg())
        result = await ours.run({"messages": [messages.HumanMessage(text)]}, thread_id="1")
        assert result.status == "completed", result.error
        assert [m.content for m in result.state["messages"]] == [m.content for m in out["messages"]]
        assert all(isinstance(m.id, str) and uuid.UUID(m.id).version == 4 for m in out["messages"])
        assert all(uuid.UUID(m.id).version == 4 for m in result.state["messages"])
    assert [m.content for m in out["messages"]] == ["three", "seen 3"]
    # the ids are saved with the messages: the checkpoint reads back the same messages, as
    # LangChain's (the channel's type says only `list`), as LangGraph's serializer does
    saved = (await ours.get_state("1")).values["messages"]
    assert saved == result.state["messages"]
    assert [type(m) for m in saved] == [type(m) for m in out["messages"]]


def test_add_messages_gives_message_objects_ids_and_leaves_dicts_alone() -> None:
    messages = pytest.importorskip("langchain_core.messages")
    theirs = lg_message.add_messages([messages.HumanMessage("a")], [messages.AIMessage("b")])
    ours = add_messages([messages.HumanMessage("a")], [messages.AIMessage("b")])
    assert [type(m) for m in ours] == [type(m) for m in theirs]
    assert all(uuid.UUID(m.id).version == 4 for m in ours + theirs)
    assert len({m.id for m in ours}) == 2
    # a message that has an id keeps it
    assert add_messages([], [messages.HumanMessage("a", id="mine")])[0].id == "mine"
    # deterministic under use_ids(SequentialIds()), as every id of ours
    runs = []
    for _ in range(2):
        with use_ids(SequentialIds()):
            merged = add_messages([messages.HumanMessage("a")], [messages.AIMessage("b")])
            runs.append([m.id for m in merged])
    assert runs[0] == runs[1]
    # a frozen pydantic message is copied with its id
    frozen = FrozenMessage(content="x")
    (copied,) = add_messages([], [frozen])
    assert frozen.id is None and copied.id is not None and copied.content == "x"
    # dicts, strings and our harness's Message (no id field) go in as they are
    plain = [{"role": "user", "content": "hi"}, "text", Message(role="user", content="m")]
    assert add_messages([], plain) == plain


class FrozenMessage(BaseModel):
    model_config = ConfigDict(frozen=True)
    content: str
    id: str | None = None


async def test_resume_with_no_pending_interrupt(checkpointer: Checkpointer) -> None:
    # LangGraph: Command(resume=...) on a thread with nothing to resume returns the state
    # unchanged; on a thread with no checkpoint it runs the graph from START with no input.
    # Ours refuses both with InterruptError and changes nothing (docs/graph.md, "Running":
    # "a resume that matches no interrupt (InterruptError)").
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a"))
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    assert await theirs.ainvoke(THEIRS.Command(resume="x"), cfg()) == out == {"log": ["a"]}
    head = (await ours.get_state("1")).checkpoint_id
    with pytest.raises(InterruptError, match="no pending interrupt"):
        await ours.run(Command(resume="x"), thread_id="1")
    assert (await ours.get_state("1")).checkpoint_id == head
    assert await theirs.ainvoke(THEIRS.Command(resume="x"), cfg("fresh")) == {"log": ["a"]}
    with pytest.raises(InterruptError):
        await ours.run(Command(resume="x"), thread_id="fresh")
    assert (await ours.get_state("fresh")).checkpoint_id is None


# -- routers ------------------------------------------------------------------------------------


class Fan(TypedDict, total=False):
    items: list[str]
    log: Annotated[list[str], operator.add]


def mixed_router_graph(g: Any) -> Any:
    """LangGraph: test_send_react_interrupt_control / test_send_dedupe_on_resume (a router
    returning node names and Sends together)."""

    def route(state: Any) -> list[Any]:
        return ["audit", *[g.Send("work", {"item": i}) for i in state["items"]], "audit"]

    graph = g.StateGraph(Fan).add_node("plan", logger("plan"))
    graph.add_node("audit", logger("audit"))
    graph.add_node("work", lambda arg: {"log": [f"work {arg['item']}"]})
    graph.add_node("done", lambda s: {"log": [f"done after {len(s['log'])}"]})
    graph.add_edge(g.START, "plan").add_conditional_edges("plan", route)
    graph.add_edge("audit", "done").add_edge("work", "done")
    return graph.add_edge("done", g.END)


async def test_router_mixing_node_names_and_sends(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(mixed_router_graph, checkpointer)
    start = {"items": ["x", "y"], "log": []}
    out = await theirs.ainvoke(start, cfg())
    # a name returned twice is one task; each Send is its own; names run before Sends
    assert out["log"] == ["plan", "audit", "work x", "work y", "done after 4"]
    result = await ours.run(start, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out
    theirs_updates = [u async for u in theirs.astream(start, cfg("2"), stream_mode="updates")]
    ours_updates = [u async for u in ours.stream(start, thread_id="2", mode="updates")]
    # a step's updates come as its tasks finish, and both start the Sends first (then the
    # nodes by name), while the writes apply names first
    assert [next(iter(u)) for u in theirs_updates] == ["plan", "work", "work", "audit", "done"]
    assert ours_updates == theirs_updates


async def test_router_with_a_path_map_returning_a_list(checkpointer: Checkpointer) -> None:
    # LangGraph: test_conditional_edges_list_return (a list of keys through the path map)
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a"))
        graph.add_node("b", logger("b")).add_node("c", logger("c"))
        graph.add_edge(g.START, "a")
        graph.add_conditional_edges("a", lambda s: ["to_b", "to_c"], {"to_b": "b", "to_c": "c"})
        return graph.add_edge("b", g.END).add_edge("c", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    assert (await ours.run({"log": []}, thread_id="1")).state == out == {"log": ["a", "b", "c"]}


# -- interrupts in nested sub-graphs --------------------------------------------------------


def two_level_graph(g: Any) -> Any:
    """LangGraph: test_nested_graph_state / test_doubly_nested_graph_interrupts (parent →
    child → grandchild; the grandchild asks; resumed from the parent)."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [f"grandchild got {g.interrupt('deep?')}"]}

    grandchild = g.StateGraph(Log).add_node("ask", ask)
    grandchild = grandchild.add_edge(g.START, "ask").add_edge("ask", g.END).compile()
    child = g.StateGraph(Log).add_node("pre", logger("child pre"))
    child.add_node("grandchild", grandchild).add_node("post", logger("child post"))
    child.add_edge(g.START, "pre").add_edge("pre", "grandchild").add_edge("grandchild", "post")
    child = child.add_edge("post", g.END).compile()
    graph = g.StateGraph(Log).add_node("child", child)
    return graph.add_edge(g.START, "child").add_edge("child", g.END)


def nested_view(snapshot: Any) -> list[Any]:
    """(depth, task name, values, next) down the first task of each level."""
    view = []
    depth = 0
    while snapshot is not None:
        view.append((depth, snapshot.values, snapshot.next))
        tasks = [t for t in snapshot.tasks if t.state is not None]
        snapshot = tasks[0].state if tasks else None
        depth += 1
    return view


async def test_doubly_nested_interrupt_resumed_from_the_parent(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(two_level_graph, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "interrupted"
    [theirs_q] = out["__interrupt__"]
    [ours_q] = result.interrupts
    assert ours_q.value == theirs_q.value == "deep?"
    assert shape(ours_q.ns) == ("child", "grandchild")
    assert result.state == values(out) == {"log": []}

    theirs_state = await theirs.aget_state(cfg(), subgraphs=True)
    ours_state = await ours.get_state("1", subgraphs=True)
    assert nested_view(ours_state) == nested_view(theirs_state)
    assert nested_view(ours_state) == [
        (0, {"log": []}, ("child",)),
        (1, {"log": ["child pre"]}, ("grandchild",)),
        (2, {"log": ["child pre"]}, ("ask",)),
    ]
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(Command(resume="yes"), thread_id="1")
    assert result.status == "completed", result.error
    # LangGraph's sub-graph output is its whole state, appended again by each parent's
    # operator.add; ours is what the sub-graph changed (docs/graph.md, "Sub-graphs")
    assert out == {
        "log": ["child pre", "child pre", "grandchild got yes", "child post"],
    }
    assert result.state == {"log": ["child pre", "grandchild got yes", "child post"]}


def calling_node_graph(g: Any, calls: list[str]) -> Any:
    """LangGraph: test_subgraph_checkpoint_true_interrupt / a node function that invokes a
    compiled graph (``await sub.ainvoke(...)`` there, ``await sub.run(...)`` here) and asks
    inside it; resumed from the parent."""

    def check(state: Any) -> dict[str, Any]:
        calls.append("check")
        return {"log": ["checked"]}

    def sign(state: Any) -> dict[str, Any]:
        return {"log": [f"signed by {g.interrupt('who signs?')}"]}

    sub = g.StateGraph(Log).add_node("check", check).add_node("sign", sign)
    sub = sub.add_edge(g.START, "check").add_edge("check", "sign").add_edge("sign", g.END)
    sub = sub.compile()

    async def publish(state: Any) -> dict[str, Any]:
        calls.append("publish")
        if g is OURS:
            done = (await sub.run({"log": []})).state
        else:
            done = await sub.ainvoke({"log": []})
        return {"log": [*done["log"], "published"]}

    graph = g.StateGraph(Log).add_node("publish", publish)
    return graph.add_edge(g.START, "publish").add_edge("publish", g.END)


async def test_subgraph_called_from_a_node_interrupts_and_resumes(
    checkpointer: Checkpointer,
) -> None:
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = calling_node_graph(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = calling_node_graph(THEIRS, theirs_calls).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    theirs_state = await theirs.aget_state(cfg(), subgraphs=True)
    ours_state = await ours.get_state("1", subgraphs=True)
    assert nested_view(ours_state) == nested_view(theirs_state)
    assert nested_view(ours_state)[1] == (1, {"log": ["checked"]}, ("sign",))
    out = await theirs.ainvoke(THEIRS.Command(resume="ana"), cfg())
    result = await ours.run(Command(resume="ana"), thread_id="1")
    assert result.state == out == {"log": ["checked", "signed by ana", "published"]}
    # the calling node ran again from its top; the sub-graph's finished "check" did not
    assert ours_calls == theirs_calls == ["publish", "check", "publish"]


# -- recursion limit ----------------------------------------------------------------------


def loop_graph(g: Any) -> Any:
    graph = g.StateGraph(Log).add_node("spin", logger("spin")).add_edge(g.START, "spin")
    return graph.add_conditional_edges("spin", lambda s: "spin")


async def test_recursion_limit_error_type_and_message() -> None:
    ours, theirs = pair(loop_graph, None)
    with pytest.raises(lg_errors.GraphRecursionError, match="Recursion limit of 4 reached"):
        await theirs.ainvoke({"log": []}, {"recursion_limit": 4})
    # ours: status="failed" with the error (docs/graph.md, "Running"); raise_for_status()
    # raises it. The message starts as LangGraph's does (ported `match=`es keep working).
    result = await ours.run({"log": []}, recursion_limit=4)
    assert result.status == "failed"
    assert isinstance(result.error, GraphRecursionError)
    assert str(result.error).startswith("Recursion limit of 4 reached")
    assert result.state == {"log": ["spin"] * 4}
    with pytest.raises(GraphRecursionError):
        result.raise_for_status()


def counted_chain(g: Any, n: int) -> Any:
    """START → n0 → … → n{n-1} → END, each node logging its name and the steps it has left."""
    schema = Budget if g is THEIRS else OurBudget
    graph = g.StateGraph(schema)
    for i in range(n):

        def node(state: Any, i: int = i) -> dict[str, Any]:
            return {"log": [f"n{i}:{state['remaining_steps']}"]}

        graph.add_node(f"n{i}", node)
    graph.add_edge(g.START, "n0")
    for i in range(n - 1):
        graph.add_edge(f"n{i}", f"n{i + 1}")
    return graph.add_edge(f"n{n - 1}", g.END)


async def outcome(theirs: Any, ours: Any, input: Any, limit: int) -> tuple[Any, Any]:
    """(LangGraph's output or "recursion", ours the same way) for one call on thread 1."""
    try:
        out: Any = values(await theirs.ainvoke(input, {**cfg(), "recursion_limit": limit}))
    except lg_errors.GraphRecursionError:
        out = "recursion"
    result = await ours.run(input, thread_id="1", recursion_limit=limit)
    if isinstance(result.error, GraphRecursionError):
        return out, "recursion"
    assert result.error is None, result.error
    return out, result.state


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("delta", [-1, 0, 1])
async def test_a_graph_that_finishes_on_its_last_allowed_step_fails_as_langgraph(
    checkpointer: Checkpointer, n: int, delta: int
) -> None:
    # LangGraph checks the limit before planning the next step: a chain of n nodes needs
    # recursion_limit > n after an input (its first node sees remaining_steps == limit - 1);
    # ours completed a chain of n nodes under recursion_limit=n
    limit = n + delta
    if limit < 1:
        return
    ours, theirs = pair(lambda g: counted_chain(g, n), checkpointer)
    out, mine = await outcome(theirs, ours, {"log": []}, limit)
    assert mine == out
    assert (out == "recursion") == (limit <= n)
    snapshot = await ours.get_state("1")
    theirs_snapshot = await theirs.aget_state(cfg())
    assert snapshot.values == values(theirs_snapshot.values)  # what ran is kept
    assert snapshot.next == theirs_snapshot.next


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("how", ["none", "resume"])
async def test_a_continued_thread_counts_its_steps_as_langgraph(
    checkpointer: Checkpointer, limit: int, how: str
) -> None:
    # a run that continues a thread (run(None) after a breakpoint, or Command(resume=...))
    # has no input step: LangGraph's first node then sees remaining_steps == limit + 1, and
    # the run may take limit + 2 steps
    def build(g: Any) -> Any:
        graph = counted_chain(g, 6)
        if how == "resume":
            graph.add_node("ask", lambda s: {"log": [f"ask:{g.interrupt('go?')}"]})
            graph.add_edge("n0", "ask").add_edge("ask", "n1")
        return graph

    compile_kw = {"interrupt_before": ["n1"]} if how == "none" else {}
    ours, theirs = pair(build, checkpointer, **compile_kw)
    first = await outcome(theirs, ours, {"log": []}, 25)
    assert first[0] == first[1]
    resume = None if how == "none" else OURS.Command(resume="yes")
    theirs_resume = None if how == "none" else THEIRS.Command(resume="yes")
    try:
        out: Any = values(await theirs.ainvoke(theirs_resume, {**cfg(), "recursion_limit": limit}))
    except lg_errors.GraphRecursionError:
        out = "recursion"
    result = await ours.run(resume, thread_id="1", recursion_limit=limit)
    mine = "recursion" if isinstance(result.error, GraphRecursionError) else result.state
    assert mine == out
    theirs_snapshot = await theirs.aget_state(cfg())
    assert (await ours.get_state("1")).values == values(theirs_snapshot.values)


async def test_a_router_outside_its_path_map_is_a_key_error() -> None:
    # LangGraph raises KeyError for a router result its path_map does not name; ours is an
    # InvalidRouteError (a GraphError) that is also a KeyError, with a readable message
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a")).add_node("b", logger("b"))
        graph.add_edge(g.START, "a").add_edge("b", g.END)
        return graph.add_conditional_edges("a", lambda s: "zzz", {"x": "b"})

    ours, theirs = pair(build, None)
    with pytest.raises(KeyError):
        await theirs.ainvoke({"log": []})
    result = await ours.run({"log": []})
    assert isinstance(result.error, InvalidRouteError) and isinstance(result.error, KeyError)
    assert str(result.error).startswith("router '<lambda>' after 'a' returned 'zzz'")
    with pytest.raises(KeyError):
        result.raise_for_status()


@pytest.mark.parametrize("mistake", ["unknown_edge_node", "duplicate_node", "breakpoint"])
def test_a_graph_that_does_not_compile_is_a_value_error(mistake: str) -> None:
    # LangGraph raises ValueError for these; ours raises GraphValidationError (a
    # ConfigurationError), which is now a ValueError too
    def attempt(g: Any) -> None:
        graph = g.StateGraph(Log).add_node("a", logger("a")).add_edge(g.START, "a")
        if mistake == "unknown_edge_node":
            graph.add_edge("a", "nowhere").compile()
        elif mistake == "duplicate_node":
            graph.add_node("a", logger("a"))
        else:
            graph.add_edge("a", g.END).compile(interrupt_before=["nowhere"])

    for g in (THEIRS, OURS):
        with pytest.raises(ValueError):
            attempt(g)
    with pytest.raises(ConfigurationError):
        attempt(OURS)


async def test_recursion_error_is_a_recursion_error() -> None:
    ours, theirs = pair(loop_graph, None)
    with pytest.raises(RecursionError):
        await theirs.ainvoke({"log": []}, {"recursion_limit": 4})
    result = await ours.run({"log": []}, recursion_limit=4)
    with pytest.raises(RecursionError):
        result.raise_for_status()


# -- update_state(as_node=...) and checkpoint metadata ---------------------------------------


async def test_update_state_as_node_on_a_finished_thread_then_continue(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_state_graph_update_state_as_node / "edit as a node, then invoke(None)":
    # the update counts as that node's output and the run follows its edges
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = abc_graph(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = abc_graph(THEIRS, theirs_calls).compile(checkpointer=lg_memory.InMemorySaver())
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    ours_calls.clear()
    theirs_calls.clear()
    await theirs.aupdate_state(cfg(), {"log": ["as a"]}, as_node="a")
    await ours.update_state("1", {"log": ["as a"]}, as_node="a")
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.values == theirs_state.values == {"log": ["a", "b", "c", "as a"]}
    assert ours_state.next == theirs_state.next == ("b",)
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": ["a", "b", "c", "as a", "b", "c"]}
    assert ours_calls == theirs_calls == ["b", "c"]
    # as the last node: nothing is next, and run(None) runs nothing
    await theirs.aupdate_state(cfg(), {"log": ["as c"]}, as_node="c")
    await ours.update_state("1", {"log": ["as c"]}, as_node="c")
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next == ()
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out
    assert ours_calls == theirs_calls == ["b", "c"]


async def test_update_state_as_node_routes_through_its_router(checkpointer: Checkpointer) -> None:
    # LangGraph: test_update_state_as_node_with_conditional_edges (the router of as_node runs
    # on the updated state and decides what is next)
    def build(g: Any) -> Any:
        graph = g.StateGraph(Fan).add_node("plan", logger("plan"))
        graph.add_node("work", lambda arg: {"log": [f"work {arg['item']}"]})
        graph.add_edge(g.START, "plan")
        graph.add_conditional_edges(
            "plan", lambda s: [g.Send("work", {"item": i}) for i in s.get("items", [])] or g.END
        )
        return graph.add_edge("work", g.END)

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    await theirs.aupdate_state(cfg(), {"items": ["p", "q"]}, as_node="plan")
    await ours.update_state("1", {"items": ["p", "q"]}, as_node="plan")
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.next == theirs_state.next == ("work", "work")
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"items": ["p", "q"], "log": ["plan", "work p", "work q"]}


@pytest.mark.parametrize("as_node", ["START", "last"])
async def test_update_state_as_node_gives_its_router_the_managed_values(
    checkpointer: Checkpointer, as_node: str
) -> None:
    # an update is no step of a run: LangGraph's routers see remaining_steps 2 and
    # is_last_step False for it, whatever the limit; ours gave them no managed values (the
    # update was refused with the router's KeyError)
    ours_seen: list[tuple[str, int, bool]] = []
    theirs_seen: list[tuple[str, int, bool]] = []

    def build(g: Any, seen: list[tuple[str, int, bool]]) -> Any:
        graph = start_routed(g, seen, "add_conditional_edges")

        def done(state: Any) -> str:
            seen.append(("done", state["remaining_steps"], state["is_last_step"]))
            return g.END

        return graph.add_node("last", logger("last")).add_conditional_edges("last", done)

    theirs = build(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    ours = build(OURS, ours_seen).compile(checkpointer=checkpointer)
    node = (OURS.START, THEIRS.START) if as_node == "START" else (as_node, as_node)
    await theirs.ainvoke({"log": []}, {**cfg(), "recursion_limit": 5})
    await ours.run({"log": []}, thread_id="1", recursion_limit=5)
    await theirs.aupdate_state(cfg(), {"log": ["u"]}, as_node=node[1])
    await ours.update_state("1", {"log": ["u"]}, as_node=node[0])
    assert ours_seen == theirs_seen
    assert ours_seen[-1][1:] == (2, False)
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next


async def test_checkpoint_step_and_source(checkpointer: Checkpointer) -> None:
    # LangGraph keeps source and step in StateSnapshot.metadata; ours has them as attributes
    # of the snapshot and of each history entry (docs/graph.md, "Reading and changing a
    # thread"), plus `written`, the channels each checkpoint wrote (LangGraph 1.x keeps no
    # "writes" in its metadata).
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert (
        (ours_state.source, ours_state.step)
        == (
            theirs_state.metadata["source"],
            theirs_state.metadata["step"],
        )
        == ("loop", 3)
    )
    assert "writes" not in theirs_state.metadata
    history = await ours.history("1")
    assert [(h.source, h.step, h.written) for h in history] == [
        ("loop", 3, ("log",)),
        ("loop", 2, ("log",)),
        ("loop", 1, ("log",)),
        ("loop", 0, ("log",)),
        ("input", -1, ("log",)),  # the state before the input: a new thread's, whole
    ]
    assert [
        (s.metadata["source"], s.metadata["step"]) async for s in theirs.aget_state_history(cfg())
    ] == [(h.source, h.step) for h in history]
    await theirs.aupdate_state(cfg(), {"log": ["edit"]})
    await ours.update_state("1", {"log": ["edit"]})
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.source == theirs_state.metadata["source"] == "update"
    assert ours_state.values == theirs_state.values


async def test_update_state_checkpoint_is_the_next_step(checkpointer: Checkpointer) -> None:
    # (it kept the head's step: 3 after a 3-node run; ours still does while tasks are pending,
    # whose ids hang on the step)
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    await theirs.aupdate_state(cfg(), {"log": ["edit"]})
    await ours.update_state("1", {"log": ["edit"]})
    theirs_state = await theirs.aget_state(cfg())
    assert theirs_state.metadata["step"] == 4
    assert (await ours.get_state("1")).step == theirs_state.metadata["step"]


async def test_checkpoint_steps_across_two_inputs(checkpointer: Checkpointer) -> None:
    # LangGraph's steps go on from the last, +1 for its input checkpoint: the head is step 8
    # after two 3-node runs (ours was 7: its input checkpoint is the first step's, and the
    # input's own step was not counted)
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    for _ in range(2):
        await theirs.ainvoke({"log": []}, cfg())
        await ours.run({"log": []}, thread_id="1")
    theirs_state = await theirs.aget_state(cfg())
    assert theirs_state.metadata["step"] == 8
    assert (await ours.get_state("1")).step == theirs_state.metadata["step"]


async def test_steps_of_an_update_on_a_new_thread_then_an_input(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    await theirs.aupdate_state(cfg(), {"log": ["u"]})
    await ours.update_state("1", {"log": ["u"]})
    assert (await ours.get_state("1")).step == (await theirs.aget_state(cfg())).metadata["step"]
    await theirs.ainvoke({"log": ["in"]}, cfg())
    await ours.run({"log": ["in"]}, thread_id="1")
    theirs_steps = [
        (s.metadata["source"], s.metadata["step"]) async for s in theirs.aget_state_history(cfg())
    ]
    loops = [("loop", 5), ("loop", 4), ("loop", 3)]
    assert theirs_steps == [*loops, ("loop", 2), ("input", 1), ("update", 0)]
    ours_steps = [(h.source, h.step) for h in await ours.history("1")]
    assert ours_steps == theirs_steps


async def test_stream_modes_checkpoints_and_debug(checkpointer: Checkpointer) -> None:
    # LangGraph streams "checkpoints" and "debug", and so does ours (the payloads are compared
    # in test_langgraph_ports_11.py); a mode neither has is refused before anything runs
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    items = [i async for i in theirs.astream({"log": []}, cfg(), stream_mode="checkpoints")]
    mine = [i async for i in ours.stream({"log": []}, thread_id="1", mode="checkpoints")]
    assert len(items) == len(mine) == 5
    assert [i["next"] for i in mine] == [i["next"] for i in items]
    with pytest.raises(ConfigurationError):
        async for _ in ours.stream({"log": []}, thread_id="2", mode="checkpoint"):
            pass
    assert (await ours.get_state("2")).checkpoint_id is None


# -- failures, missing inputs and checkpointers ---------------------------------------------


def failing_branch_graph(g: Any, calls: list[str]) -> Any:
    """LangGraph: test_pending_writes_resume / test_node_error_state (one of two parallel
    nodes raises after the other returned; the other's write is kept, only the failed one
    runs again)."""
    returned = asyncio.Event()

    async def ok(state: Any) -> dict[str, Any]:
        calls.append("ok")
        returned.set()
        return {"log": ["ok"]}

    async def boom(state: Any) -> dict[str, Any]:
        await returned.wait()  # "ok" has returned its write when this one raises
        calls.append("boom")
        if "fixed" not in calls:
            raise ValueError("boom")
        return {"log": ["boom"]}

    graph = g.StateGraph(Log).add_node("ok", ok).add_node("boom", boom)
    graph.add_edge(g.START, "ok").add_edge(g.START, "boom")
    return graph.add_edge("ok", g.END).add_edge("boom", g.END)


async def test_a_failed_step_keeps_what_finished(checkpointer: Checkpointer) -> None:
    # With SQLite and PostgreSQL, a node that returned while its save was in flight when its
    # sibling failed lost its write: result.state lacked it (SQLite: get_state showed it;
    # PostgreSQL: it was still next and ran again on run(None)).
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = failing_branch_graph(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = failing_branch_graph(THEIRS, theirs_calls).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    with pytest.raises(ValueError, match="boom"):
        await theirs.ainvoke({"log": []}, cfg())
    # ours: status="failed" with the node's own exception (docs/graph.md, "Running")
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "failed"
    assert isinstance(result.error, ValueError) and str(result.error) == "boom"
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    # "what those finished tasks wrote shows in result.state and get_state().values"
    assert result.state == ours_state.values == theirs_state.values == {"log": ["ok"]}
    assert ours_state.next == theirs_state.next == ("boom",)
    # the same tasks; their order is not (see test_snapshot_tasks_are_in_langgraphs_order)
    assert {t.name: t.result for t in ours_state.tasks} == {
        t.name: t.result for t in theirs_state.tasks
    }
    assert {t.name: t.result for t in ours_state.tasks} == {"ok": {"log": ["ok"]}, "boom": None}
    # fixed and retried: only the failed node runs again
    ours_calls.append("fixed")
    theirs_calls.append("fixed")
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": ["boom", "ok"]}
    assert ours_calls == theirs_calls == ["ok", "boom", "fixed", "boom"]


async def test_a_failed_task_shows_its_error_in_get_state(checkpointer: Checkpointer) -> None:
    ours_calls: list[str] = []
    ours = failing_branch_graph(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = failing_branch_graph(THEIRS, []).compile(checkpointer=lg_memory.InMemorySaver())
    with pytest.raises(ValueError):
        await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    theirs_errors = {t.name: t.error for t in (await theirs.aget_state(cfg())).tasks}
    assert theirs_errors == {"ok": None, "boom": "ValueError('boom')"}
    assert {t.name: t.error for t in (await ours.get_state("1")).tasks} == theirs_errors
    # TaskState had no error; once the node runs clean, the error is gone
    ours_calls.append("fixed")
    assert (await ours.run(None, thread_id="1")).status == "completed"
    assert all(t.error is None for t in (await ours.get_state("1")).tasks)


async def test_a_lone_failed_task_shows_its_error_in_get_state(checkpointer: Checkpointer) -> None:
    # the step of one task (which runs on a shorter path than a parallel one), and a sub-graph
    # node failing inside
    def build(g: Any) -> Any:
        class Boom(Exception):
            pass

        def fail(state: Any) -> Any:
            raise Boom("inner")

        sub = g.StateGraph(Log).add_node("fail", fail).add_edge(g.START, "fail")
        sub = sub.add_edge("fail", g.END).compile()
        graph = g.StateGraph(Log).add_node("boom", lambda s: {"log": [s["log"][5]]})
        graph.add_node("sub", sub).add_edge(g.START, "boom").add_edge("boom", "sub")
        return graph.add_edge("sub", g.END)

    ours, theirs = pair(build, checkpointer)
    with pytest.raises(IndexError):
        await theirs.ainvoke({"log": []}, cfg())
    assert (await ours.run({"log": []}, thread_id="1")).status == "failed"
    theirs_errors = [(t.name, t.error) for t in (await theirs.aget_state(cfg())).tasks]
    assert theirs_errors == [("boom", "IndexError('list index out of range')")]
    assert [(t.name, t.error) for t in (await ours.get_state("1")).tasks] == theirs_errors

    with pytest.raises(Exception, match="inner"):
        await theirs.ainvoke({"log": ["0", "1", "2", "3", "4", "5"]}, cfg("2"))
    result = await ours.run({"log": ["0", "1", "2", "3", "4", "5"]}, thread_id="2")
    assert result.status == "failed"
    theirs_errors = [(t.name, t.error) for t in (await theirs.aget_state(cfg("2"))).tasks]
    assert theirs_errors == [("sub", "Boom('inner')")]
    assert [(t.name, t.error) for t in (await ours.get_state("2")).tasks] == theirs_errors


async def test_snapshot_tasks_are_in_langgraphs_order(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("amy", logger("amy")).add_node("zed", logger("zed"))
        graph.add_conditional_edges(g.START, lambda s: ["zed", g.Send("amy", {}), "amy"])
        return graph.add_edge("zed", g.END).add_edge("amy", g.END)

    ours, theirs = pair(build, checkpointer, interrupt_before=["amy", "zed"])
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    theirs_tasks = (await theirs.aget_state(cfg())).tasks
    ours_tasks = (await ours.get_state("1")).tasks
    # the writes apply in the same order on both
    out = await theirs.ainvoke(None, cfg())
    assert (await ours.run(None, thread_id="1")).state == out == {"log": ["amy", "zed", "amy"]}
    # the Send's amy, then amy and zed as added
    assert [t.name for t in theirs_tasks] == ["amy", "amy", "zed"]
    assert [t.name for t in ours_tasks] == [t.name for t in theirs_tasks]


async def test_continuing_a_thread_that_does_not_exist(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    with pytest.raises(lg_errors.EmptyInputError):
        await theirs.ainvoke(None, cfg("nope"))
    # ours: a GraphError that says so, nothing saved (docs/graph.md, "Running": "None for a
    # thread that does not exist (GraphError)")
    from tinyagents.errors import GraphError

    with pytest.raises(GraphError, match="no checkpoint to continue from"):
        await ours.run(None, thread_id="nope")
    assert (await ours.get_state("nope")).checkpoint_id is None


async def test_interrupt_without_a_checkpointer() -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("ask", lambda s: {"log": [g.interrupt("q?")]})
        return graph.add_edge(g.START, "ask").add_edge("ask", g.END)

    ours, theirs = pair(build, None)
    # LangGraph returns the interrupt (it cannot be resumed); ours fails the run with a
    # GraphError naming the fix (docs/graph.md, "Running": "Without a checkpointer ...
    # interrupt() is an error"; "Interrupts": "It needs a checkpointer")
    out = await theirs.ainvoke({"log": []})
    assert [i.value for i in out["__interrupt__"]] == ["q?"]
    from tinyagents.errors import GraphError

    result = await ours.run({"log": []})
    assert result.status == "failed"
    assert isinstance(result.error, GraphError)
    assert "needs a checkpointer" in str(result.error)


async def test_send_to_a_node_that_does_not_exist(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a"))
        graph.add_conditional_edges(g.START, lambda s: [g.Send("nope", {})])
        return graph.add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    # LangGraph drops the Send (logging "Ignoring unknown node name nope in pending sends")
    # and finishes; ours refuses the run and saves nothing (not even the input's checkpoint:
    # the first step is made before it is saved). Not a documented difference, but a
    # stricter one: no ported program relies on a Send being dropped.
    assert await theirs.ainvoke({"log": []}, cfg()) == {"log": []}
    from tinyagents.errors import GraphError

    with pytest.raises(GraphError, match="unknown node 'nope'"):
        await ours.run({"log": []}, thread_id="1")
    assert (await ours.get_state("1")).checkpoint_id is None


# -- where a node's Command(goto=END) and a router's END lead -------------------------------


async def test_goto_end_from_a_node_keeps_its_static_edges(checkpointer: Checkpointer) -> None:
    # LangGraph: test_command_goto_end (a goto adds to the node's edges; END adds nothing)
    def build(g: Any) -> Any:
        def a(state: Any) -> Any:
            return g.Command(goto=g.END, update={"log": ["a"]})

        graph = g.StateGraph(Log).add_node("a", a, destinations=("b",))
        graph.add_node("b", logger("b")).add_edge(g.START, "a").add_edge("a", "b")
        return graph.add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    assert (await ours.run({"log": []}, thread_id="1")).state == out == {"log": ["a", "b"]}


async def test_router_returning_a_node_and_end(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a")).add_node("b", logger("b"))
        graph.add_edge(g.START, "a").add_conditional_edges("a", lambda s: ["b", g.END])
        return graph.add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    assert (await ours.run({"log": []}, thread_id="1")).state == out == {"log": ["a", "b"]}


# -- the values stream at an interrupt --------------------------------------------------------


def asks_after_a_graph(g: Any) -> Any:
    graph = g.StateGraph(Log).add_node("a", logger("a"))
    graph.add_node("ask", lambda s: {"log": [g.interrupt("q?")]})
    return graph.add_edge(g.START, "a").add_edge("a", "ask").add_edge("ask", g.END)


async def test_values_stream_up_to_an_interrupt_and_after(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(asks_after_a_graph, checkpointer)
    theirs_items = [v async for v in theirs.astream({"log": []}, cfg(), stream_mode="values")]
    ours_items = [v async for v in ours.stream({"log": []}, thread_id="1", mode="values")]
    # the same states, the last with the questions ("__interrupt__", see below)
    assert [values(v) for v in ours_items] == [values(v) for v in theirs_items]
    assert [values(v) for v in ours_items] == [{"log": []}, {"log": ["a"]}, {"log": ["a"]}]
    resume_theirs = THEIRS.Command(resume="x")
    theirs_items = [v async for v in theirs.astream(resume_theirs, cfg(), stream_mode="values")]
    ours_items = [v async for v in ours.stream(Command(resume="x"), thread_id="1", mode="values")]
    assert ours_items == theirs_items == [{"log": ["a"]}, {"log": ["a", "x"]}]


async def test_values_stream_shows_the_interrupt(checkpointer: Checkpointer) -> None:
    # ours ended at the last state, without the questions (updates mode showed them)
    ours, theirs = pair(asks_after_a_graph, checkpointer)
    theirs_items = [v async for v in theirs.astream({"log": []}, cfg(), stream_mode="values")]
    assert [i.value for i in theirs_items[-1]["__interrupt__"]] == ["q?"]
    ours_items = [v async for v in ours.stream({"log": []}, thread_id="1", mode="values")]
    assert [i.value for i in ours_items[-1]["__interrupt__"]] == ["q?"]
    assert [{k: v for k, v in i.items() if k != "__interrupt__"} for i in ours_items] == [
        {k: v for k, v in i.items() if k != "__interrupt__"} for i in theirs_items
    ]


async def test_values_stream_at_an_interrupt_beside_a_finished_node(
    checkpointer: Checkpointer,
) -> None:
    def build(g: Any) -> Any:
        def ask(state: Any) -> dict[str, Any]:
            return {"log": [g.interrupt("q?")]}

        graph = g.StateGraph(Log).add_node("a", logger("a")).add_node("b", logger("b"))
        graph.add_node("ask", ask).add_edge(g.START, "a").add_edge("a", "ask")
        return graph.add_edge("a", "b").add_edge("ask", g.END).add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    theirs_items = [v async for v in theirs.astream({"log": []}, cfg(), stream_mode="values")]
    ours_items = [v async for v in ours.stream({"log": []}, thread_id="1", mode="values")]
    # the questions with the state before the step, then the finished node's write
    assert [sorted(i) for i in ours_items] == [sorted(i) for i in theirs_items]
    assert [i["log"] for i in ours_items] == [i["log"] for i in theirs_items]
    assert ours_items[-1] == (await ours.get_state("1")).values == {"log": ["a", "b"]}


# -- more state-schema and resume details ---------------------------------------------------


async def test_send_to_a_node_of_a_pydantic_state_gets_the_argument_as_is(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_send_pydantic_state (a Send's argument is not coerced into the state
    # model: the node receives the dict that was sent, unvalidated)
    def build(g: Any, seen: list[Any]) -> Any:
        def work(arg: Any) -> dict[str, Any]:
            seen.append((type(arg).__name__, arg))
            return {"log": [f"work {arg['name']}"]}

        graph = g.StateGraph(PydState).add_node("work", work)
        graph.add_conditional_edges(g.START, lambda s: [g.Send("work", {"name": "x", "n": "5"})])
        return graph.add_edge("work", g.END)

    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = build(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = build(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    out = await theirs.ainvoke({}, cfg())
    result = await ours.run({}, thread_id="1")
    assert ours_seen == theirs_seen == [("dict", {"name": "x", "n": "5"})]
    assert result.state["log"] == out["log"] == ["work x"]


async def test_a_node_returning_its_own_mutated_state(checkpointer: Checkpointer) -> None:
    # LangGraph: returning the (changed) state instance writes the fields that were set or
    # differ from their defaults; a reducer field is written in full, so an operator.add list
    # doubles on each such return, on both
    def build(g: Any) -> Any:
        def inc(state: PydState) -> PydState:
            state.n += 1
            return state

        graph = g.StateGraph(PydState).add_node("inc", inc).add_node("inc2", inc)
        graph.add_edge(g.START, "inc").add_edge("inc", "inc2")
        return graph.add_edge("inc2", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": ["a"]}, cfg())
    result = await ours.run({"log": ["a"]}, thread_id="1")
    assert result.status == "completed", result.error
    # name is written (not None), profile is not (None, its default, and never set)
    assert result.state == out == {"name": "anon", "n": 2, "log": ["a", "a", "a", "a"]}
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


async def test_resume_and_update_together(checkpointer: Checkpointer) -> None:
    # LangGraph: Command(resume=..., update=...) as input applies the update, then resumes
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("ask", lambda s: {"log": [g.interrupt("q?")]})
        return graph.add_edge(g.START, "ask").add_edge("ask", g.END)

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    out = await theirs.ainvoke(THEIRS.Command(resume="r", update={"log": ["u"]}), cfg())
    result = await ours.run(Command(resume="r", update={"log": ["u"]}), thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out == {"log": ["u", "r"]}


async def test_updates_stream_with_subgraphs_at_a_nested_interrupt(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_doubly_nested_graph_interrupts with astream(subgraphs=True): the
    # interrupt item is repeated at every level, innermost first
    ours, theirs = pair(two_level_graph, checkpointer)

    def view(items: list[Any]) -> list[Any]:
        out = []
        for ns, payload in items:
            if "__interrupt__" in payload:
                payload = {"__interrupt__": [i.value for i in payload["__interrupt__"]]}
            out.append((shape(ns), payload))
        return out

    theirs_items = [
        i async for i in theirs.astream({"log": []}, cfg(), stream_mode="updates", subgraphs=True)
    ]
    ours_items = [
        i async for i in ours.stream({"log": []}, thread_id="1", mode="updates", subgraphs=True)
    ]
    assert view(ours_items) == view(theirs_items)
    assert view(ours_items) == [
        (("child",), {"pre": {"log": ["child pre"]}}),
        (("child", "grandchild"), {"__interrupt__": ["deep?"]}),
        (("child",), {"__interrupt__": ["deep?"]}),
        ((), {"__interrupt__": ["deep?"]}),
    ]
    # one interrupt, the same at every level
    assert (
        len({i.id for _, p in ours_items if "__interrupt__" in p for i in p["__interrupt__"]}) == 1
    )


class Private(TypedDict):
    secret: str


async def test_private_channels_from_a_nodes_annotations(checkpointer: Checkpointer) -> None:
    # LangGraph: the "pass private state between nodes" how-to: a node whose first parameter
    # is annotated with another TypedDict takes it as its input schema (add_node's
    # input_schema, inferred), so its keys become channels of the graph, which the node
    # alone reads; the graph's output stays the state's keys
    def build(g: Any) -> Any:
        def one(state: Log) -> Private:
            return {"secret": "s3"}

        def two(state: Private) -> Log:
            return {"log": [f"got {state['secret']}"]}

        graph = g.StateGraph(Log).add_node("one", one).add_node("two", two)
        return graph.add_edge(g.START, "one").add_edge("one", "two").add_edge("two", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out == {"log": ["got s3"]}
    theirs_values = (await theirs.aget_state(cfg())).values
    assert (
        (await ours.get_state("1")).values == theirs_values == {"log": ["got s3"], "secret": "s3"}
    )


# -- Command routing with no edges (LangGraph's "Command" how-to) -------------------------------


def command_routed(g: Any) -> Any:
    """LangGraph's how-to: node_a returns ``Command(goto=...)`` to node_b or node_c, declared
    by its return annotation; there are no edges between the three nor from them to END."""

    def node_a(state: Any) -> Any:
        value = "b" if len(state["log"]) < 2 else "c"
        return g.Command(update={"log": [f"a->{value}"]}, goto=f"node_{value}")

    # set outright: a string annotation could not name the namespace g
    node_a.__annotations__["return"] = g.Command[Literal["node_b", "node_c"]]

    def node_b(state: Any) -> dict[str, Any]:
        return {"log": ["b"]}

    def node_c(state: Any) -> dict[str, Any]:
        return {"log": ["c"]}

    graph = g.StateGraph(Log)
    graph.add_edge(g.START, "node_a")
    graph.add_node(node_a)
    graph.add_node(node_b)
    graph.add_node(node_c)
    return graph


@pytest.mark.parametrize("start", [[], ["x", "y"]])
async def test_command_routing_with_no_edges(checkpointer: Checkpointer, start: list[str]) -> None:
    ours, theirs = pair(command_routed, checkpointer)
    out = await theirs.ainvoke({"log": start}, cfg())
    result = await ours.run({"log": start}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out
    assert out["log"][-1] == ("b" if not start else "c")
    theirs_history = [s.next async for s in theirs.aget_state_history(cfg())]
    assert [h.next for h in await ours.history("1")] == theirs_history


# -- LangGraph's spellings of the builder's options ------------------------------------------


class Kv(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    x: str


def spelled_like_langgraph(g: Any, attempts: list[int]) -> Any:
    """LangGraph 1.x names: ``add_node(..., retry_policy=)``, a ``RetryPolicy`` with
    ``jitter`` and a list for ``retry_on``, ``add_conditional_edges(..., path_map=)``."""
    policy_type = lg_types.RetryPolicy if g is THEIRS else RetryPolicy

    def flaky(state: Any) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) < 2:
            raise ValueError("once")
        return {"log": ["flaky"]}

    policy = policy_type(max_attempts=3, initial_interval=0.0, jitter=False, retry_on=[ValueError])
    graph = g.StateGraph(Kv).add_node("flaky", flaky, retry_policy=policy)
    graph.add_node("left", logger("left")).add_node("right", logger("right"))
    graph.add_edge(g.START, "flaky")
    graph.add_conditional_edges("flaky", lambda s: "l", path_map={"l": "left", "r": "right"})
    return graph.add_edge("left", g.END).add_edge("right", g.END)


async def test_langgraphs_keyword_names_build_the_same_graph(checkpointer: Checkpointer) -> None:
    ours_attempts: list[int] = []
    theirs_attempts: list[int] = []
    ours = spelled_like_langgraph(OURS, ours_attempts).compile(checkpointer=checkpointer, name=None)
    theirs = spelled_like_langgraph(THEIRS, theirs_attempts).compile(
        checkpointer=lg_memory.InMemorySaver(), name=None
    )
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == out == {"log": ["flaky", "left"]}
    assert len(ours_attempts) == len(theirs_attempts) == 2
    with pytest.raises(ConfigurationError, match="retry"):
        OURS.StateGraph(Kv).add_node(
            "n", logger("n"), retry=RetryPolicy(), retry_policy=RetryPolicy()
        )
    with pytest.raises(ConfigurationError, match="mapping"):
        OURS.StateGraph(Kv).add_conditional_edges("n", lambda s: "n", ["n"], path_map=["n"])


async def test_interrupt_before_every_node(checkpointer: Checkpointer) -> None:
    # LangGraph: compile(interrupt_before="*") stops before each step
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer, interrupt_before="*")
    theirs_stops = []
    out = await theirs.ainvoke({"log": []}, cfg())
    while (state := await theirs.aget_state(cfg())).next:
        theirs_stops.append(state.next)
        out = await theirs.ainvoke(None, cfg())
    ours_stops = []
    result = await ours.run({"log": []}, thread_id="1")
    while result.status == "interrupted":
        ours_stops.append((await ours.get_state("1")).next)
        result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": ["a", "b", "c"]}
    assert ours_stops == theirs_stops == [("a",), ("b",), ("c",)]


async def test_a_command_update_given_as_pairs(checkpointer: Checkpointer) -> None:
    # LangGraph: Command(update=[(key, value), ...]), as a node's output
    def build(g: Any) -> Any:
        def a(state: Any) -> Any:
            return g.Command(update=[("log", ["t1"]), ("x", "v")], goto="b")

        graph = g.StateGraph(Kv).add_node("a", a, destinations=("b",))
        graph.add_node("b", logger("b")).add_edge(g.START, "a")
        return graph.add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == out == {"log": ["t1", "b"], "x": "v"}


@pytest.mark.parametrize(
    ("pairs", "outcome"),
    [
        # a reducer channel takes a key given twice, once per pair, as LangGraph's
        ([("log", ["t1"]), ("log", ["t2"])], {"log": ["t1", "t2", "b"]}),
        # an overwrite channel refuses two writes in one step, as anywhere
        ([("x", "v1"), ("x", "v2")], InvalidUpdateError),
    ],
)
async def test_a_command_update_given_as_pairs_may_name_a_key_twice(
    checkpointer: Checkpointer, pairs: list[tuple[str, Any]], outcome: Any
) -> None:
    # ours refused a key named twice even on a reducer channel
    def build(g: Any) -> Any:
        def a(state: Any) -> Any:
            return g.Command(update=pairs, goto="b")

        graph = g.StateGraph(Kv).add_node("a", a, destinations=("b",))
        graph.add_node("b", logger("b")).add_edge(g.START, "a")
        return graph.add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    result = await ours.run({"log": []}, thread_id="1")
    if isinstance(outcome, dict):
        assert result.state == await theirs.ainvoke({"log": []}, cfg()) == outcome
    else:
        with pytest.raises(lg_errors.InvalidUpdateError):
            await theirs.ainvoke({"log": []}, cfg())
        assert isinstance(result.error, outcome)


@pytest.mark.parametrize("returned", ["pairs", "send"])
async def test_a_node_returning_pairs_or_a_send_fails(
    checkpointer: Checkpointer, returned: str
) -> None:
    # LangGraph takes (key, value) pairs in Command.update only: a node returning them fails
    # with InvalidUpdateError ("Expected dict"); ours applied them. A node returning a Send
    # (instead of routing with one) wrote nothing and ended the run silently in ours; it is
    # an InvalidUpdateError that says how to route
    def a(state: Any) -> Any:
        return [("log", ["a"])] if returned == "pairs" else Send("b", {})

    graph = StateGraph(Kv).add_node("a", a).add_node("b", logger("b"))
    ours = graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    result = await ours.compile(checkpointer=checkpointer).run({"log": []}, thread_id="1")
    assert isinstance(result.error, InvalidUpdateError)
    assert result.state == {"log": []}
    if returned == "pairs":
        theirs = lg_graph.StateGraph(Kv).add_node("a", a).add_node("b", logger("b"))
        theirs = theirs.add_edge(lg_graph.START, "a").add_edge("a", "b").compile()
        with pytest.raises(lg_errors.InvalidUpdateError):
            await theirs.ainvoke({"log": []})
    else:
        assert "Command(goto=Send(...))" in str(result.error)


async def test_a_node_may_return_a_list_of_commands(checkpointer: Checkpointer) -> None:
    # LangGraph: a node returns several Commands; their updates apply in order and all their
    # gotos run next. Ours refused the list
    def build(g: Any) -> Any:
        def a(state: Any) -> Any:
            return [
                g.Command(update={"log": ["a1"]}, goto="b"),
                g.Command(update={"log": ["a2"], "x": "v"}, goto=[g.Send("c", {"n": 1})]),
            ]

        graph = g.StateGraph(Kv).add_node("a", a, destinations=("b", "c"))
        graph.add_node("b", logger("b")).add_node("c", lambda arg: {"log": [f"c{arg['n']}"]})
        return graph.add_edge(g.START, "a").add_edge("b", g.END).add_edge("c", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out == {"log": ["a1", "a2", "b", "c1"], "x": "v"}


async def test_run_none_at_the_head_checkpoint_replays_a_paused_step(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: invoke(None, <the head's config>) on a step part-way through replays it (a
    # fork checkpoint; every task runs again and asks again); ours did nothing and returned
    # the old question. A Command there (a client naming the head it resumes) resumes
    calls: dict[str, list[str]] = {"ours": [], "theirs": []}

    def build(g: Any) -> Any:
        seen = calls["ours" if g is OURS else "theirs"]

        def work(arg: int) -> dict[str, Any]:
            seen.append(f"w{arg}")
            if arg == 1:
                return {"log": [f"w1:{g.interrupt('ok?')}"]}
            return {"log": [f"w{arg}"]}

        graph = g.StateGraph(Log).add_node("w", work)
        return graph.add_conditional_edges(g.START, lambda s: [g.Send("w", i) for i in (0, 1, 2)])

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    calls["ours"].clear(), calls["theirs"].clear()
    head = (await ours.get_state("1")).checkpoint_id
    out = await theirs.ainvoke(None, (await theirs.aget_state(cfg())).config)
    result = await ours.run(None, thread_id="1", checkpoint_id=head)
    assert sorted(calls["ours"]) == sorted(calls["theirs"]) == ["w0", "w1", "w2"]
    assert result.status == "interrupted" and result.state == values(out)
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    # a Command naming the head resumes it (nothing runs again but the paused task)
    calls["ours"].clear()
    head = (await ours.get_state("1")).checkpoint_id
    done = await ours.run(Command(resume="yes"), thread_id="1", checkpoint_id=head)
    assert calls["ours"] == ["w1"] and done.state["log"] == ["w0", "w1:yes", "w2"]


async def test_an_update_at_the_inputs_checkpoint_takes_the_inputs_place(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: update_state at the first input's checkpoint (step -1) counts as START's
    # output, so the graph's first nodes are next and the old input is not applied again;
    # ours kept the input pending (next ('__start__',)) and ran it after the update
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    await theirs.ainvoke({"log": ["in"]}, cfg())
    await ours.run({"log": ["in"]}, thread_id="1")
    theirs_first = [s async for s in theirs.aget_state_history(cfg())][-1]
    ours_first = (await ours.history("1"))[-1]
    forked = await theirs.aupdate_state(theirs_first.config, {"log": ["U"]})
    await ours.update_state("1", {"log": ["U"]}, checkpoint_id=ours_first.checkpoint_id)
    assert (await ours.get_state("1")).next == (await theirs.aget_state(forked)).next == ("a",)
    out = await theirs.ainvoke(None, forked)
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": ["U", "a", "b", "c"]}


async def test_an_update_on_a_new_thread_is_its_input(checkpointer: Checkpointer) -> None:
    # LangGraph: update_state on a thread with no checkpoint, no as_node: taken as START's
    # output, so the graph's first nodes are next and run(None) runs them
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    await theirs.aupdate_state(cfg(), {"log": ["seed"]})
    await ours.update_state("1", {"log": ["seed"]})
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.next == theirs_state.next == ("a",)
    assert ours_state.values == theirs_state.values == {"log": ["seed"]}
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": ["seed", "a", "b", "c"]}


# -- update_state without as_node: as the node that ran last ---------------------------------


class Hitl(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    tool_call: str
    done: bool


def tool_graph(g: Any) -> Any:
    """An agent that asks for a tool, a breakpoint before the tool (LangGraph's edit-state
    pattern): the router after ``agent`` reads ``tool_call``."""
    graph = g.StateGraph(Hitl).add_node("agent", lambda s: {"log": ["agent"], "tool_call": "x"})
    graph.add_node("tools", lambda s: {"log": [f"ran {s['tool_call']}"]})
    graph.add_edge(g.START, "agent").add_edge("tools", g.END)
    return graph.add_conditional_edges(
        "agent", lambda s: "tools" if s.get("tool_call") else g.END, ["tools", g.END]
    )


@pytest.mark.parametrize(("edit", "log"), [("", ["agent"]), ("fetch", ["agent", "ran fetch"])])
async def test_an_edit_at_a_breakpoint_routes_again_from_the_node_before_it(
    checkpointer: Checkpointer, edit: str, log: list[str]
) -> None:
    # LangGraph: update_state with no as_node counts as the last node's output, so its router
    # decides again: an edit that drops the tool call ends the run there
    ours, theirs = pair(tool_graph, checkpointer, interrupt_before=["tools"])
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next == ("tools",)
    await theirs.aupdate_state(cfg(), {"tool_call": edit})
    await ours.update_state("1", {"tool_call": edit})
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.next == theirs_state.next
    assert ours_state.step == theirs_state.metadata["step"]
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": log, "tool_call": edit}


def looping_graph(g: Any) -> Any:
    graph = g.StateGraph(Hitl).add_node("agent", lambda s: {"log": ["agent"]})
    graph.add_node("tools", lambda s: {"log": ["tools"], "done": True})
    graph.add_edge(g.START, "agent").add_edge("tools", "agent")
    return graph.add_conditional_edges(
        "agent", lambda s: g.END if s.get("done") else "tools", ["tools", g.END]
    )


async def test_an_update_on_a_finished_thread_can_start_it_again(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(looping_graph, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    await theirs.aupdate_state(cfg(), {"done": False})
    await ours.update_state("1", {"done": False})
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.next == theirs_state.next == ("tools",)
    assert ours_state.step == theirs_state.metadata["step"]
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out
    assert out["log"] == ["agent", "tools", "agent", "tools", "agent"]


async def test_an_update_after_a_parallel_step_needs_no_as_node(checkpointer: Checkpointer) -> None:
    # LangGraph cannot tell which of two nodes of the last step the update is from and raises
    # "Ambiguous update, specify as_node"; ours applies it and routes from no node (nothing
    # pending stays nothing pending; pass as_node to route from one)
    def build(g: Any) -> Any:
        graph = g.StateGraph(Hitl).add_node("x", logger("x")).add_node("y", logger("y"))
        return graph.add_edge(g.START, "x").add_edge(g.START, "y")

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    with pytest.raises(lg_errors.InvalidUpdateError, match="Ambiguous update"):
        await theirs.aupdate_state(cfg(), {"done": True})
    await ours.update_state("1", {"done": True})
    state = await ours.get_state("1")
    assert state.next == () and state.values == {"log": ["x", "y"], "done": True}


async def test_a_router_that_fails_after_its_node_keeps_the_nodes_write(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph saves the node's write before its router fails: get_state shows it with
    # nothing next. Ours too, and run(None) routes again without running the node again
    # (LangGraph's never reaches "b" there: its router's write was lost).
    calls: dict[str, list[str]] = {"ours": [], "theirs": []}

    def build(g: Any) -> Any:
        who = "theirs" if g is THEIRS else "ours"

        def a(state: Any) -> dict[str, Any]:
            calls[who].append("a")
            return {"log": ["a"]}

        def route(state: Any) -> str:
            calls[who].append("route")
            if calls[who].count("route") == 1:
                raise ValueError("router")
            return "b"

        graph = g.StateGraph(Log).add_node("a", a).add_node("b", logger("b"))
        return graph.add_edge(g.START, "a").add_conditional_edges("a", route, ["b", g.END])

    ours, theirs = pair(build, checkpointer)
    with pytest.raises(ValueError, match="router"):
        await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "failed" and str(result.error) == "router"
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert result.state == ours_state.values == theirs_state.values == {"log": ["a"]}
    assert ours_state.next == theirs_state.next == ()
    done = await ours.run(None, thread_id="1")
    assert done.status == "completed" and done.state == {"log": ["a", "b"]}
    assert calls["ours"] == ["a", "route", "route"]  # the node ran once


#: the calls of ``picky`` (a reducer must be a module's name for the state's annotations)
_picky_calls: list[str] = []


def picky(current: list[str], update: list[str]) -> list[str]:
    """A reducer that raises the first time it is called after ``_picky_calls`` is cleared."""
    _picky_calls.append("reduce")
    if _picky_calls.count("reduce") == 1:
        raise ValueError("reducer")
    return current + update


class Picky(TypedDict, total=False):
    log: Annotated[list[str], picky]


async def test_a_reducer_that_fails_on_a_lone_nodes_write_keeps_the_write(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph saves each task's write as it finishes, so a reducer that raises on it at the
    # end of the step fails the run with the write kept: run(None) applies it again without
    # running the node again. Ours did so for a step of several tasks only; a step of one
    # ran the node again.
    def build(g: Any) -> Any:
        def a(state: Any) -> dict[str, Any]:
            _picky_calls.append("a")
            return {"log": ["a"]}

        graph = g.StateGraph(Picky).add_node("a", a)
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    _picky_calls.clear()
    with pytest.raises(ValueError, match="reducer"):
        await theirs.ainvoke({}, cfg())
    out = await theirs.ainvoke(None, cfg())
    assert out == {"log": ["a"]} and _picky_calls == ["a", "reduce", "reduce"]
    _picky_calls.clear()
    result = await ours.run({}, thread_id="1")
    assert result.status == "failed" and str(result.error) == "reducer"
    done = await ours.run(None, thread_id="1")
    assert done.status == "completed" and done.state == out
    assert _picky_calls == ["a", "reduce", "reduce"]  # the node ran once


def refuse_boom(current: list[str], update: list[str]) -> list[str]:
    if "boom" in update:
        raise ValueError("no boom")
    return current + update


class Refusing(TypedDict, total=False):
    log: Annotated[list[str], refuse_boom]


@pytest.mark.parametrize("parallel", [False, True], ids=["one-task", "two-tasks"])
async def test_get_state_after_a_reducer_refused_a_steps_writes(
    parallel: bool, checkpointer: Checkpointer
) -> None:
    # LangGraph's aget_state applies the saved writes and raises the reducer's error again,
    # and a run that goes on fails again without running the node; ours too, whether the
    # step had one task or two (with one, get_state showed the state before the step, and
    # the node ran again)
    calls: list[str] = []

    def build(g: Any) -> Any:
        def a(state: Any) -> dict[str, Any]:
            calls.append("a")
            return {"log": ["boom"]}

        graph = g.StateGraph(Refusing).add_node("a", a)
        graph.add_edge(g.START, "a").add_edge("a", g.END)
        if parallel:
            graph.add_node("b", logger("b")).add_edge(g.START, "b")
        return graph

    ours, theirs = pair(build, checkpointer)
    with pytest.raises(ValueError, match="no boom"):
        await theirs.ainvoke({"log": ["x"]}, cfg())
    with pytest.raises(ValueError, match="no boom"):
        await theirs.aget_state(cfg())
    calls.clear()
    result = await ours.run({"log": ["x"]}, thread_id="1")
    assert result.status == "failed" and str(result.error) == "no boom"
    with pytest.raises(ValueError, match="no boom"):
        await ours.get_state("1")
    again = await ours.run(None, thread_id="1")
    assert again.status == "failed" and str(again.error) == "no boom"
    assert calls == ["a"]


def keep_last(current: int, update: int) -> int:
    return update


class Atomic(TypedDict, total=False):
    seen: Annotated[list[str], operator.add]
    tags: Annotated[set[str], operator.or_]
    chat: Annotated[list[Any], lg_message.add_messages]
    last: Annotated[int, keep_last]
    log: Annotated[list[str], refuse_boom]


@pytest.mark.parametrize("refused", ["log", "chat"])
@pytest.mark.parametrize("saved", [True, False], ids=["checkpointer", "no-checkpointer"])
async def test_a_reducer_that_refuses_a_steps_writes_applies_none_of_them(
    saved: bool, refused: str, checkpointer: Checkpointer
) -> None:
    # LangGraph applies a step's writes all or nothing: when a reducer raises, the state stays
    # as the step found it (its checkpoint). Ours applied the channels grouped before the
    # refused one (in place: lists extended, sets and message lists merged), so result.state
    # showed half of the step. Refused: a function reducer's write, or a removal of a message
    # the list does not have (add_messages, merged after the set)
    messages = pytest.importorskip("langchain_core.messages")

    def build(g: Any) -> Any:
        def a(state: Any) -> dict[str, Any]:
            chat = [{"role": "user", "content": "a", "id": "m2"}]
            if refused == "chat":
                chat.append(messages.RemoveMessage(id="nowhere"))
            return {"seen": ["a"], "tags": {"a"}, "chat": chat, "last": 2}

        def b(state: Any) -> dict[str, Any]:
            return {"seen": ["b"], "log": ["boom" if refused == "log" else "fine"]}

        graph = g.StateGraph(Atomic).add_node("a", a).add_node("b", b)
        graph.add_edge(g.START, "a").add_edge(g.START, "b")
        return graph.add_edge("a", g.END).add_edge("b", g.END)

    first = {
        "seen": ["in"],
        "tags": {"in"},
        "chat": [{"role": "user", "content": "in", "id": "m1"}],
        "last": 1,
        "log": ["x"],
    }
    says = "no boom" if refused == "log" else "delete a message"
    ours, theirs = pair(build, checkpointer if saved else None)
    with pytest.raises(ValueError, match=says):
        await theirs.ainvoke(first, cfg() if saved else None)
    result = await ours.run(first, thread_id="1")
    assert result.status == "failed" and says in str(result.error)
    state = dict(result.state)
    assert [m.content for m in state.pop("chat")] == ["in"]
    assert state == {"seen": ["in"], "tags": {"in"}, "last": 1, "log": ["x"]}
    if saved:
        [step, _] = [s async for s in theirs.aget_state_history(cfg())]
        assert result.state == step.values


async def test_a_failing_node_is_the_error_while_a_reducer_refuses_a_siblings_write(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph raises the node's error (the step's writes are not applied); ours reported
    # the reducer's error instead, raised while showing what the finished sibling wrote
    def build(g: Any) -> Any:
        def fails(state: Any) -> dict[str, Any]:
            raise KeyError("node fails")

        graph = g.StateGraph(Atomic).add_node("a", lambda s: {"seen": ["a"], "log": ["boom"]})
        graph.add_node("b", fails).add_edge(g.START, "a").add_edge(g.START, "b")
        return graph.add_edge("a", g.END).add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    with pytest.raises(KeyError, match="node fails"):
        await theirs.ainvoke({"seen": ["in"]}, cfg())
    result = await ours.run({"seen": ["in"]}, thread_id="1")
    assert result.status == "failed" and isinstance(result.error, KeyError)
    assert result.state == {"seen": ["in"], "tags": set(), "chat": [], "last": 0, "log": []}
    with pytest.raises(ValueError, match="no boom"):  # as LangGraph's aget_state
        await ours.get_state("1")
