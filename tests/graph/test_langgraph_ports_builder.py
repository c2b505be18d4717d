"""Ports of LangGraph's builder surface (``libs/langgraph/tests/test_pregel.py``,
``test_pregel_async.py``): nodes named by what they are (a callable object, a compiled graph),
routers without a path map or with a ``Literal`` annotation, a join into ``END``, a
conditional entry point of ``Send``s, several finish points, node input schemas beside an
output schema, pydantic states writing ``None`` or given only defaults, and retry policies'
``retry_on`` as a tuple or a predicate. The same program on LangGraph and on
``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.
"""

from __future__ import annotations

import asyncio
import functools
import operator
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph_kit import OURS, THEIRS, Log, cfg, lg_errors, lg_memory, lg_types, pair, values
from pydantic import BaseModel

from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import Overwrite, RetryPolicy
from tinyagents.store.checkpoint import Checkpointer

StreamWriter = lg_types.StreamWriter

# -- a node named by what it is ---------------------------------------------------------------


class Shout:
    """A callable object: no ``__name__``, so LangGraph names its node by its class."""

    def __call__(self, state: Any) -> dict[str, Any]:
        return {"log": ["shout"]}


def _tagged(state: Any, tag: str) -> dict[str, Any]:
    return {"log": [tag]}


def named_by_action(g: Any, action: Any, name: str) -> Any:
    graph = g.StateGraph(Log).add_node(action)
    return graph.add_edge(g.START, name)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (Shout, "Shout"),
        (lambda: functools.partial(_tagged, tag="p"), "partial"),
        (lambda: lambda s: {"log": ["lambda"]}, "<lambda>"),
        (lambda: Shout().__call__, "__call__"),
    ],
    ids=["callable-object", "partial", "lambda", "bound-method"],
)
async def test_add_node_names_a_callable_object_by_its_class(
    checkpointer: Checkpointer, make: Any, name: str
) -> None:
    theirs = named_by_action(THEIRS, make(), name).compile(checkpointer=lg_memory.InMemorySaver())
    ours = named_by_action(OURS, make(), name).compile(checkpointer=checkpointer)
    expected = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected
    assert name in ours.nodes


def subgraph_by_its_name(g: Any) -> Any:
    sub = g.StateGraph(Log).add_node("s", lambda s: {"log": ["s"]})
    sub = sub.add_edge(g.START, "s").compile(name="sub")
    graph = g.StateGraph(Log).add_node(sub).add_node("after", lambda s: {"log": ["after"]})
    return graph.add_edge(g.START, "sub").add_edge("sub", "after")


async def test_add_node_names_a_compiled_graph_by_its_name(checkpointer: Checkpointer) -> None:
    theirs = subgraph_by_its_name(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    ours = subgraph_by_its_name(OURS).compile(checkpointer=checkpointer)
    expected = await theirs.ainvoke({"log": []}, cfg())
    assert expected == {"log": ["s", "after"]}
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected


def sequence_of_objects(g: Any) -> Any:
    return g.StateGraph(Log).add_sequence([Shout(), ("b", lambda s: {"log": ["b"]})])


async def test_add_sequence_names_a_callable_object_by_its_class(
    checkpointer: Checkpointer,
) -> None:
    theirs = sequence_of_objects(THEIRS).add_edge(THEIRS.START, "Shout")
    ours = sequence_of_objects(OURS).add_edge(OURS.START, "Shout")
    expected = await theirs.compile(checkpointer=lg_memory.InMemorySaver()).ainvoke(
        {"log": []}, cfg()
    )
    result = await ours.compile(checkpointer=checkpointer).run({"log": []}, thread_id="1")
    assert result.state == expected == {"log": ["shout", "b"]}


# -- routers: a join into END, a callable object, a conditional entry of Sends ---------------


class Foo(TypedDict):
    foo: Annotated[list[str], operator.add]


def join_into_end(g: Any) -> Any:
    """test_conditional_state_graph_with_list_edge_inputs: START → A, B; [A, B] → END."""
    graph = g.StateGraph(Foo)
    graph.add_node("A", lambda s: {"foo": ["A"]}).add_node("B", lambda s: {"foo": ["B"]})
    graph.add_edge(g.START, "A").add_edge(g.START, "B")
    return graph.add_edge(["A", "B"], g.END)


async def test_a_join_into_end(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(join_into_end, checkpointer)
    expected = await theirs.ainvoke({"foo": []}, cfg())
    assert expected == {"foo": ["A", "B"]}
    assert (await ours.run({"foo": []}, thread_id="1")).state == expected


class Query(TypedDict, total=False):
    query: str


class ChooseAnalyzer:
    def __call__(self, data: Query) -> str:
        return "analyzer"


def choose_analyzer(data: Query) -> str:
    return "analyzer"


def rewrite_then_analyze(g: Any, router: Any) -> Any:
    """test_callable_in_conditional_edges_with_no_path_map (and its function twin)."""
    graph = g.StateGraph(Query)
    graph.add_node("rewriter", lambda s: {"query": f"query: {s['query']}"})
    graph.add_node("analyzer", lambda s: {"query": f"analyzed: {s['query']}"})
    graph.add_conditional_edges("rewriter", router)
    return graph.set_entry_point("rewriter")


@pytest.mark.parametrize("make", [ChooseAnalyzer, lambda: choose_analyzer], ids=["object", "fn"])
async def test_a_router_without_a_path_map(checkpointer: Checkpointer, make: Any) -> None:
    ours, theirs = pair(lambda g: rewrite_then_analyze(g, make()), checkpointer)
    expected = await theirs.ainvoke({"query": "what is weather in sf"}, cfg())
    assert expected == {"query": "analyzed: query: what is weather in sf"}
    result = await ours.run({"query": "what is weather in sf"}, thread_id="1")
    assert result.state == expected


class Overall(TypedDict):
    locations: list[str]
    results: Annotated[list[str], operator.add]


def weather(g: Any) -> Any:
    """test_conditional_entrypoint_to_multiple_state_graph: the Send argument holds a key
    (``location``) the state does not have; the node reads it all the same."""

    def get_weather(state: Overall) -> dict[str, Any]:
        location = state["location"]  # type: ignore[typeddict-item]
        sky = "sunny" if len(location) > 2 else "cloudy"
        return {"results": [f"It's {sky} in {location}"]}

    def continue_to_weather(state: Overall) -> list[Any]:
        return [g.Send("get_weather", {"location": loc}) for loc in state["locations"]]

    graph = g.StateGraph(Overall).add_node("get_weather", get_weather)
    graph.add_edge("get_weather", g.END)
    return graph.set_conditional_entry_point(continue_to_weather, path_map=["get_weather"])


async def test_a_conditional_entry_point_of_sends(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(weather, checkpointer)
    expected = await theirs.ainvoke({"locations": ["sf", "nyc"]}, cfg())
    assert expected == {
        "locations": ["sf", "nyc"],
        "results": ["It's cloudy in sf", "It's sunny in nyc"],
    }
    assert (await ours.run({"locations": ["sf", "nyc"]}, thread_id="1")).state == expected
    theirs_values = [
        v async for v in theirs.astream({"locations": ["la"]}, cfg("2"), stream_mode="values")
    ]
    ours_values = [v async for v in ours.stream({"locations": ["la"]}, thread_id="2")]
    assert ours_values == theirs_values


# -- node schemas with an output schema ------------------------------------------------------


class Greeting(TypedDict):
    hello: str
    bye: str
    log: Annotated[list[str], operator.add]


class GreetingOut(TypedDict):
    log: list[str]


class ForA(TypedDict):
    hello: str
    log: Annotated[list[str], operator.add]


class ForB(TypedDict):
    bye: str
    now: int


class ForC(TypedDict):
    hello: str
    now: int


def custom_output(g: Any, seen: list[Any]) -> Any:
    """test_node_schemas_custom_output: each node sees its own schema's keys; ``now`` is a
    channel of b's and c's schemas only."""

    async def node_a(state: ForA) -> None:
        seen.append(dict(state))

    async def node_b(state: ForB) -> dict[str, Any]:
        seen.append(dict(state))
        return {"now": 123, "hello": "again"}

    async def node_c(state: ForC) -> None:
        seen.append(dict(state))

    graph = g.StateGraph(Greeting, output_schema=GreetingOut)
    graph.add_node("a", node_a).add_node("b", node_b).add_node("c", node_c)
    return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", "c")


async def test_node_schemas_with_a_custom_output(checkpointer: Checkpointer) -> None:
    theirs_seen: list[Any] = []
    ours_seen: list[Any] = []
    saver = lg_memory.InMemorySaver()
    theirs = custom_output(THEIRS, theirs_seen).compile(checkpointer=saver)
    ours = custom_output(OURS, ours_seen).compile(checkpointer=checkpointer)
    given = {"hello": "there", "bye": "world", "log": ["hi"]}
    expected = await theirs.ainvoke(given, cfg())
    assert expected == {"log": ["hi"]}
    assert (await ours.run(given, thread_id="1")).state == expected
    assert (
        ours_seen
        == theirs_seen
        == [
            {"hello": "there", "log": ["hi"]},
            {"bye": "world"},
            {"hello": "again", "now": 123},
        ]
    )
    theirs_items = [c async for c in theirs.astream(given, cfg("2"))]
    ours_items = [c async for c in ours.stream(given, thread_id="2", mode="updates")]
    assert (
        ours_items
        == theirs_items
        == [
            {"a": None},
            {"b": {"hello": "again", "now": 123}},
            {"c": None},
        ]
    )


# -- pydantic states: None written back, an instance as input ---------------------------------


class MaybeFoo(BaseModel):
    foo: str | None


def none_back(g: Any) -> Any:
    """test_pydantic_none_state_update: a node returns an instance whose field is None."""

    def node_a(state: MaybeFoo) -> MaybeFoo:
        return MaybeFoo(foo=None)

    return g.StateGraph(MaybeFoo).add_node(node_a).add_edge(g.START, "node_a")


async def test_a_pydantic_instance_writing_none(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(none_back, checkpointer)
    expected = await theirs.ainvoke({"foo": ""}, cfg())
    assert expected == {"foo": None}
    assert (await ours.run({"foo": ""}, thread_id="1")).state == expected


def _merge(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    return {**left, **right}


class Simple(BaseModel):
    x1: Annotated[list[str], operator.add] = []
    x2: Annotated[dict[str, Any], _merge] = {}


def empty_invoke(g: Any) -> Any:
    """test_empty_invoke: an instance with only defaults as input; a node appends to its
    state's list in place (which changes nothing) besides writing."""

    def update_x1_2(state: Simple) -> dict[str, Any]:
        state.x1.append("222")
        return {"x1": ["222"]}

    graph = g.StateGraph(Simple)
    graph.add_node("x1_1_node", lambda s: {"x1": ["111"]})
    graph.add_node("x1_2_node", update_x1_2)
    graph.add_node("x2_1_node", lambda s: {"x2": {"111": 111}})
    graph.add_node("x2_2_node", lambda s: {"x2": {"222": 222}})
    graph.add_edge(g.START, "x1_1_node").add_edge("x1_1_node", "x1_2_node")
    graph.add_edge("x1_2_node", "x2_1_node").add_edge("x2_1_node", "x2_2_node")
    return graph.add_edge("x2_2_node", g.END)


async def test_an_input_of_defaults_only(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(empty_invoke, checkpointer)
    expected = await theirs.ainvoke(Simple(), cfg())
    assert expected["x2"] == {"111": 111, "222": 222}
    assert (await ours.run(Simple(), thread_id="1")).state == expected


# -- routers by annotation, several finish points ----------------------------------------------


def literal_router(g: Any) -> Any:
    """A router with no path map whose ``Literal`` return annotation names where it leads."""
    graph = g.StateGraph(Log)
    for name in ("a", "b", "c"):
        graph.add_node(name, lambda s, name=name: {"log": [name]})

    def route(state: Any) -> Literal["b", "c"]:
        return "c"

    return graph.add_edge(g.START, "a").add_conditional_edges("a", route)


def two_finish_points(g: Any) -> Any:
    """One entry point, a router to two nodes, each a finish point."""
    graph = g.StateGraph(Log)
    for name in ("a", "b", "c"):
        graph.add_node(name, lambda s, name=name: {"log": [name]})
    graph.set_entry_point("a").add_conditional_edges("a", lambda s: ["b", "c"])
    return graph.set_finish_point("b").set_finish_point("c")


@pytest.mark.parametrize("build", [literal_router, two_finish_points])
async def test_routing_shapes(checkpointer: Checkpointer, build: Any) -> None:
    ours, theirs = pair(build, checkpointer)
    expected = await theirs.ainvoke({"log": []}, cfg())
    assert (await ours.run({"log": []}, thread_id="1")).state == expected


# -- retry_on as a tuple and as a predicate -----------------------------------------------------


def flaky(g: Any, retry_on: Any, calls: list[int]) -> Any:
    """A node failing with a KeyError, then a ValueError, then writing."""
    policy = lg_types.RetryPolicy if g is THEIRS else RetryPolicy

    def node(state: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("first")
        if len(calls) == 2:
            raise ValueError("second")
        return {"log": [f"after {len(calls)} calls"]}

    retry = policy(max_attempts=5, initial_interval=0.0, jitter=False, retry_on=retry_on)
    return g.StateGraph(Log).add_node("f", node, retry_policy=retry).add_edge(g.START, "f")


@pytest.mark.parametrize(
    "retry_on",
    [(KeyError, ValueError), lambda e: isinstance(e, KeyError), ConnectionError],
    ids=["tuple", "predicate", "other-type"],
)
async def test_retry_on_a_tuple_or_a_predicate(checkpointer: Checkpointer, retry_on: Any) -> None:
    theirs_calls: list[int] = []
    ours_calls: list[int] = []
    theirs = flaky(THEIRS, retry_on, theirs_calls).compile(checkpointer=lg_memory.InMemorySaver())
    ours = flaky(OURS, retry_on, ours_calls).compile(checkpointer=checkpointer)
    try:
        expected: Any = await theirs.ainvoke({"log": []}, cfg())
    except Exception as exc:
        expected = type(exc)
    result = await ours.run({"log": []}, thread_id="1")
    assert (result.state if result.error is None else type(result.error)) == expected
    assert len(ours_calls) == len(theirs_calls)


# -- a node's stream writer -----------------------------------------------------------------------


class Text(TypedDict):
    my_key: Annotated[str, operator.add]


def writing_node(g: Any) -> Any:
    """test_stream_buffering_single_node: a node takes LangGraph's ``writer: StreamWriter`` as
    its second parameter and calls it; here it is given the node's context, which is called
    the same way."""

    async def node(state: Text, writer: StreamWriter) -> dict[str, Any]:
        writer("Before sleep")
        await asyncio.sleep(0)
        writer("After sleep")
        return {"my_key": "got here"}

    graph = g.StateGraph(Text).add_node("node", node)
    return graph.add_edge(g.START, "node").add_edge("node", g.END)


async def test_a_node_calls_its_writer(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(writing_node, checkpointer)
    expected = [c async for c in theirs.astream({"my_key": ""}, cfg(), stream_mode="custom")]
    assert expected == ["Before sleep", "After sleep"]
    got = [c async for c in ours.stream({"my_key": ""}, thread_id="1", mode="custom")]
    assert got == expected
    both = [c async for c in ours.stream({"my_key": ""}, thread_id="2", mode=["custom", "updates"])]
    assert both == [
        ("custom", "Before sleep"),
        ("custom", "After sleep"),
        ("updates", {"node": {"my_key": "got here"}}),
    ]


# -- a Send to a sub-graph of another schema --------------------------------------------------------


class Job(TypedDict, total=False):
    item: str
    log: Annotated[list[str], operator.add]


def send_to_subgraph(g: Any, ask: bool) -> Any:
    """START sends one task per item to a sub-graph whose schema has ``item``, which the
    parent's has not; its ``log`` comes back to the parent's (and asks first, with ``ask``)."""

    def s(state: Job) -> dict[str, Any]:
        said = g.interrupt(state["item"]) if ask else "done"
        return {"log": [f"{said} {state['item']}"]}

    sub = g.StateGraph(Job).add_node("s", s).add_edge(g.START, "s").compile()
    graph = g.StateGraph(Log).add_node("sub", sub)
    return graph.add_conditional_edges(
        g.START, lambda st: [g.Send("sub", {"item": i}) for i in "xy"]
    )


@pytest.mark.parametrize("ask", [False, True], ids=["plain", "asking"])
async def test_a_send_to_a_subgraph_of_another_schema(
    checkpointer: Checkpointer, ask: bool
) -> None:
    ours, theirs = pair(lambda g: send_to_subgraph(g, ask), checkpointer)
    out = await theirs.ainvoke({"log": ["in"]}, cfg())
    result = await ours.run({"log": ["in"]}, thread_id="1")
    assert result.state == values(out)
    if not ask:
        assert out == {"log": ["in", "done x", "done y"]}
        return
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    theirs_answers = {i.id: f"yes-{i.value}" for i in out["__interrupt__"]}
    ours_answers = {i.id: f"yes-{i.value}" for i in result.interrupts}
    out = await theirs.ainvoke(THEIRS.Command(resume=theirs_answers), cfg())
    result = await ours.run(OURS.Command(resume=ours_answers), thread_id="1")
    assert out == {"log": ["in", "yes-x x", "yes-y y"]}
    assert result.state == out


# -- what LangGraph fills in by name: config and writer -------------------------------------------


def node_kw_config(state: Any, *, config: RunnableConfig) -> dict[str, Any]:
    return {"log": [f"node {config['metadata']['langgraph_node']}"]}


def node_config_default(state: Any, config=None) -> dict[str, Any]:
    return {"log": [f"node given config: {config is not None}"]}


def node_config_and_writer(
    state: Any, config: RunnableConfig, writer: StreamWriter
) -> dict[str, Any]:
    writer(f"from {config['metadata']['langgraph_node']}")
    return {"log": ["wrote"]}


def node_kw_writer(state: Any, *, writer: StreamWriter) -> dict[str, Any]:
    writer("kw")
    return {"log": ["kw writer"]}


def router_kw_config(state: Any, *, config: RunnableConfig) -> str:
    return "b" if config["metadata"]["langgraph_node"] == "n" else "c"


def router_config_default(state: Any, config=None) -> str:
    return "b" if config is not None else "c"


def by_name(g: Any, node: Any, router: Any) -> Any:
    graph = g.StateGraph(Log).add_node("n", node)
    graph.add_node("b", lambda s: {"log": ["b"]}).add_node("c", lambda s: {"log": ["c"]})
    return graph.add_edge(g.START, "n").add_conditional_edges("n", router, ["b", "c"])


@pytest.mark.parametrize(
    ("node", "router"),
    [
        (node_kw_config, router_kw_config),
        (node_config_default, router_config_default),
        (node_config_and_writer, router_kw_config),
        (node_kw_writer, router_config_default),
    ],
    ids=["kw-only-config", "config-with-default", "config-and-writer", "kw-only-writer"],
)
async def test_config_and_writer_are_given_by_name(
    checkpointer: Checkpointer, node: Any, router: Any
) -> None:
    """LangGraph gives a node (and a router) its ``config`` and ``writer`` by parameter
    name, keyword-only or with a default too; ours gives its context there, which reads as
    both."""
    ours, theirs = pair(lambda g: by_name(g, node, router), checkpointer)
    expected = [
        c async for c in theirs.astream({"log": []}, cfg(), stream_mode=["custom", "values"])
    ]
    got = [c async for c in ours.stream({"log": []}, thread_id="1", mode=["custom", "values"])]
    assert got == expected
    assert expected[-1][1]["log"][-1] == "b"


async def test_a_sync_node_with_a_timeout_gets_its_config_by_name(
    checkpointer: Checkpointer,
) -> None:
    """A sync node with ``timeout=`` runs on a thread of its own: it gets its context by
    name there too."""
    graph = OURS.StateGraph(Log).add_node("n", node_config_and_writer, timeout=60)
    compiled = graph.add_edge(OURS.START, "n").compile(checkpointer=checkpointer)
    got = [c async for c in compiled.stream({"log": []}, thread_id="1", mode=["custom", "updates"])]
    assert got == [("custom", "from n"), ("updates", {"n": {"log": ["wrote"]}})]


# -- test_in_one_fan_out_state_graph_defer_node ----------------------------------------------------


def _sorted_add(x: list[str], y: list[str]) -> list[str]:
    return sorted(operator.add(x, y))


class Rag(TypedDict, total=False):
    query: str
    answer: str
    docs: Annotated[list[str], _sorted_add]


def fan_out_defer(g: Any, waiting_edge: bool) -> Any:
    """rewrite_query → analyzer_one → retriever_one, rewrite_query → retriever_two, and qa
    (deferred) after both retrievers. retriever_two finishes after analyzer_one in their
    step (it waits for it, where LangGraph's test sleeps)."""
    analyzed = asyncio.Event()

    async def analyzer_one(data: Rag) -> dict[str, Any]:
        analyzed.set()
        return {"query": f"analyzed: {data['query']}"}

    async def retriever_two(data: Rag) -> dict[str, Any]:
        await analyzed.wait()
        analyzed.clear()  # the next run waits again
        return {"docs": ["doc3", "doc4"]}

    graph = g.StateGraph(Rag)
    graph.add_node("rewrite_query", lambda d: {"query": f"query: {d['query']}"})
    graph.add_node("analyzer_one", analyzer_one)
    graph.add_node("retriever_one", lambda d: {"docs": ["doc1", "doc2"]})
    graph.add_node("retriever_two", retriever_two)
    graph.add_node("qa", lambda d: {"answer": ",".join(d["docs"])}, defer=True)
    graph.set_entry_point("rewrite_query")
    graph.add_edge("rewrite_query", "analyzer_one").add_edge("analyzer_one", "retriever_one")
    graph.add_edge("rewrite_query", "retriever_two")
    if waiting_edge:
        graph.add_edge(["retriever_one", "retriever_two"], "qa")
    else:
        graph.add_edge("retriever_one", "qa").add_edge("retriever_two", "qa")
    return graph.set_finish_point("qa")


@pytest.mark.parametrize("waiting_edge", [False, True], ids=["edges", "join"])
async def test_in_one_fan_out_state_graph_defer_node(
    checkpointer: Checkpointer, waiting_edge: bool
) -> None:
    question = {"query": "what is weather in sf"}
    ours, theirs = pair(lambda g: fan_out_defer(g, waiting_edge), checkpointer)
    expected = await theirs.ainvoke(question, cfg())
    assert expected == {
        "query": "analyzed: query: what is weather in sf",
        "docs": ["doc1", "doc2", "doc3", "doc4"],
        "answer": "doc1,doc2,doc3,doc4",
    }
    assert (await ours.run(question, thread_id="1")).state == expected
    items = [c async for c in theirs.astream(question, cfg("2"))]
    assert [c async for c in ours.stream(question, thread_id="2", mode="updates")] == items
    assert [next(iter(c)) for c in items] == [
        "rewrite_query",
        "analyzer_one",
        "retriever_two",
        "retriever_one",
        "qa",
    ]

    ours, theirs = pair(
        lambda g: fan_out_defer(g, waiting_edge), checkpointer, interrupt_after=["retriever_one"]
    )
    theirs_items = [c async for c in theirs.astream(question, cfg("3"))]
    assert theirs_items[-1] == {"__interrupt__": ()}
    ours_items = [c async for c in ours.stream(question, thread_id="3", mode="updates")]
    assert ours_items == theirs_items
    theirs_items = [c async for c in theirs.astream(None, cfg("3"))]
    assert theirs_items == [{"qa": {"answer": "doc1,doc2,doc3,doc4"}}]
    assert [c async for c in ours.stream(None, thread_id="3", mode="updates")] == theirs_items


# -- test_overwrite_parallel / _sequential / _parallel_error ---------------------------------------


class Messages(TypedDict):
    messages: Annotated[list[str], operator.add]


def overwriting(g: Any, as_json: bool, overwriters: tuple[str, ...], sequential: bool) -> Any:
    """node_a, then node_b and node_c in one step (or node_b alone), then node_d; each of
    ``overwriters`` writes ``Overwrite([its letter])``, as the class or its JSON form."""
    cls = lg_types.Overwrite if g is THEIRS else Overwrite

    def write(name: str) -> Any:
        letter = name[-1]
        if name not in overwriters:
            return lambda s: {"messages": [letter]}
        value = {"__overwrite__": [letter]} if as_json else cls([letter])
        return lambda s: {"messages": value}

    graph = g.StateGraph(Messages)
    for name in ("node_a", "node_b") if sequential else ("node_a", "node_b", "node_c", "node_d"):
        graph.add_node(name, write(name))
    graph.add_edge(g.START, "node_a").add_edge("node_a", "node_b")
    if not sequential:
        graph.add_edge("node_a", "node_c").add_edge("node_b", "node_d").add_edge("node_c", "node_d")
    return graph


@pytest.mark.parametrize("as_json", [False, True], ids=["class", "json"])
@pytest.mark.parametrize(
    ("overwriters", "sequential", "expected"),
    [
        (("node_b",), False, {"messages": ["b", "d"]}),  # a and c overwritten, then d
        (("node_c",), False, {"messages": ["c", "d"]}),
        (("node_b",), True, {"messages": ["b"]}),
        (("node_b", "node_c"), False, InvalidUpdateError),
    ],
    ids=["parallel", "parallel-later-task", "sequential", "parallel-error"],
)
async def test_overwrite_in_parallel_and_in_sequence(
    checkpointer: Checkpointer,
    as_json: bool,
    overwriters: tuple[str, ...],
    sequential: bool,
    expected: Any,
) -> None:
    def build(g: Any) -> Any:
        return overwriting(g, as_json, overwriters, sequential)

    ours, theirs = pair(build, checkpointer)
    result = await ours.run({"messages": ["START"]}, thread_id="1")
    if expected is InvalidUpdateError:
        with pytest.raises(lg_errors.InvalidUpdateError, match="only one Overwrite"):
            await theirs.ainvoke({"messages": ["START"]}, cfg())
        assert isinstance(result.error, InvalidUpdateError)
        return
    assert await theirs.ainvoke({"messages": ["START"]}, cfg()) == expected
    assert result.state == expected
    assert (await ours.get_state("1")).values == expected


# -- how a Command prints ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda g: g.Command(goto="a", update={"x": 1}),
        lambda g: g.Command(resume="yes"),
        lambda g: g.Command(resume={"i-1": 1}, update=[("x", 2)]),
        lambda g: g.Command(graph=g.Command.PARENT, goto=["a", g.Send("b", {"n": 1})]),
        lambda g: g.Command(),
    ],
    ids=["goto-update", "resume", "resume-map-pairs", "parent-sends", "empty"],
)
def test_a_command_prints_as_langgraphs(make: Any) -> None:
    """LangGraph's ``repr`` of a ``Command`` names the fields that are set, in its field order
    (graph, update, resume, goto), as an error message or a printed stream item shows it."""
    assert repr(make(OURS)) == repr(make(THEIRS))


def router_writing(state: Any, writer: StreamWriter) -> str:
    writer("routing")
    return "b"


async def test_a_router_writes_after_its_nodes_update(checkpointer: Checkpointer) -> None:
    """docs/graph.md, "Edges": a router given its ``writer`` streams what it writes after
    its node's ``updates`` item; LangGraph's router runs inside the node's task, before it."""

    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", lambda s: {"log": ["a"]})
        graph.add_node("b", lambda s: {"log": ["b"]}).add_edge(g.START, "a")
        return graph.add_conditional_edges("a", router_writing, ["b"])

    ours, theirs = pair(build, checkpointer)
    a, routing, b = (
        ("updates", {"a": {"log": ["a"]}}),
        ("custom", "routing"),
        ("updates", {"b": {"log": ["b"]}}),
    )
    modes = ["custom", "updates"]
    assert [i async for i in theirs.astream({"log": []}, cfg(), stream_mode=modes)] == [
        routing,
        a,
        b,
    ]
    assert [i async for i in ours.stream({"log": []}, thread_id="1", mode=modes)] == [a, routing, b]
