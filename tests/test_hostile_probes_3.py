"""A hostile user's third round: the graph builder and runtime, event sinks, the runtime's
steering and the agent's tools, given what a careless or malicious caller gives.

Each test is a probe that found something (named in its comment). What was probed and held
(no test added here, the behaviour is pinned elsewhere or is as documented):

- graph builder: a TypedDict with no keys (runs; a write to it is an ``InvalidUpdateError``),
  ``Annotated`` metadata that is no callable (ignored, as LangGraph's), edges and conditional
  path maps to unknown nodes (``GraphValidationError`` at compile);
- routing: a router returning an unknown name, ``None``, ``START``, a number, an object,
  ``[None]``, a ``Send`` to an unknown node (``InvalidRouteError``, run ``failed``), ``[]``
  (ends) or a name twice (runs once); ``Command(goto=...)`` of a number, ``[None]``, an
  unknown node, ``START``; ``Command(resume=...)``/``Command(graph=...)`` from a node;
  a node returning a number, text, a list or unknown keys (``InvalidUpdateError``);
- ``recursion_limit`` 0, -1, ``True``, 1.5, ``"3"``, ``inf`` (``ArgumentError``), 10**18 (runs);
- thread ids empty, blank, 10,000 characters, a number, bytes, a tuple, NUL, a lone
  surrogate (``InvalidIdError`` from ``run`` and ``get_state``); ``get_state``/``history`` of
  an unknown thread (empty); ``update_state`` with an unknown or non-text ``as_node`` or key
  (``InvalidUpdateError``);
- ``interrupt()`` and state values no checkpoint holds (a lock, a function, an object,
  bytes that are not UTF-8) on memory, SQLite and PostgreSQL: the node fails, the run ends
  ``failed`` with its events; NaN, infinities, 2**64, 10**400, NUL and lone surrogates in
  text and keys round-trip on all three;
- a node raising ``SystemExit``, ``CancelledError`` (not cancelled), ``GeneratorExit``,
  ``StopIteration``, ``StopAsyncIteration``, ``RecursionError``, sync or async, alone or
  beside another task: ``failed``, one ``graph.completed``, the thread's lease given back;
- steering: a command to a finished run (accepted, then settled), to a forgotten one
  (rejected, not found); ``forget`` of a running run (``ConfigurationError``); 20 MB of text
  (rejected by the payload policy); a payload nested 5,000 deep (``InvalidCommandError``);
  correlation ids blank, NUL, 100,000 characters, a number, ``None``, a lone surrogate
  (``InvalidCommandError``); a second command reusing a correlation id with other contents
  (``duplicate``, the first's outcome stands); a runtime closed with 22 commands waiting at a
  running run's boundaries, or at a paused run's: each ends ``steering.failed``;
- tools: results no JSON holds (a lock, an object, one whose ``str`` raises, bytes, NaN,
  a generator, 10**5000), tools raising ``SystemExit``, ``GeneratorExit``,
  ``CancelledError``, ``StopIteration``, ``StopAsyncIteration``, ``RecursionError``,
  ``MemoryError``: an error result, the run goes on; calls to unknown tools named ``""``,
  NUL or 100,000 characters, arguments that are no JSON object, NaN, a key twice, two calls
  sharing an id: an error result naming the problem, the run goes on;
- agent callbacks: a system prompt function, an output validator or a model raising a
  library's own ``BaseException``, ``SystemExit``, ``GeneratorExit`` or a stray
  ``CancelledError``: the run ends ``failed`` saying so; ``Agent``/``rt.start`` given odd
  tools, models, instructions, limits, inputs, tenant ids, thread ids or parents: typed
  refusals (``ConfigurationError``, ``InvalidIdError``, ``UnknownTargetError``);
  ``RunLimits`` edge values (1e-300 s deadlines and tool timeouts, 10**100 calls,
  ``max_tool_calls=0``, ``max_tokens=1``) end as their limits say (a ``RunLimits`` value
  of the wrong kind is an ``ArgumentError``, a ``ConfigurationError`` and ``ValueError``, as
  ``tests/runs/test_run_limits.py`` pins);
- graph steering of a running and of an interrupted run: updates with unknown keys,
  redirects to unknown nodes or ``START`` (rejected at submit), approvals of unknown nodes
  or tasks (rejected, not found), agent-only kinds (rejected); the runtime closed with the
  accepted ones waiting: each ends in one terminal ``steering.*`` event;
- ``Send`` arguments and ``Command(resume=...)`` values no checkpoint holds (an object, a
  generator, bytes that are not UTF-8): the node fails, or ``run`` raises
  ``InvalidUpdateError`` and the question stays pending; ``update_state`` through a reducer
  raising a library's own ``BaseException``: ``InvalidUpdateError`` naming the channel; a
  sub-graph's node or a streamed node raising one: the run fails, the stream raises it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from typing import Annotated, Any, TypedDict

import pytest
from pydantic import BaseModel

from tinyagents import Agent, RunStatus, Runtime
from tinyagents.errors import GraphValidationError, InvalidUpdateError
from tinyagents.events import Event, EventBus, RunEvent
from tinyagents.graph import END, START, Send, StateGraph
from tinyagents.protocol import SteeringCommand
from tinyagents.steering import CheckPolicy, PolicyContext
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import EventRecorder, Gate, ScriptedModel


class _Foreign(BaseException):
    """A library's own ``BaseException`` that is no ``Exception`` (as gevent's
    ``GreenletExit``)."""


class _State(TypedDict):
    x: Any


def _graph_ends(recorder: EventRecorder, run_id: str) -> list[str]:
    return [e.type for e in recorder.events if e.run_id == run_id and e.type == "graph.completed"]


async def _ends_failed(graph: Any, recorder: EventRecorder, checkpointer: Any) -> str:
    """Run ``graph`` on a runtime; it must end failed with one terminal event, its thread
    given back; returns the run's error."""
    async with Runtime(sinks=[recorder]) as rt:
        handle = await rt.start_graph(graph, {"x": 0}, thread_id="t-1")
        result = await asyncio.wait_for(handle.result(), 10)
        assert result.status is RunStatus.FAILED
        assert handle.info.status is RunStatus.FAILED
        assert _graph_ends(recorder, handle.run_id) == ["graph.completed"]
    await checkpointer.acquire("t-1", "the next writer")  # the lease was given back
    await checkpointer.release("t-1", "the next writer")
    assert result.error is not None
    return result.error


# ---------------------------------------------------------------------- graph: BaseException


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("beside", [False, True])
async def test_a_node_raising_a_foreign_base_exception_fails_its_run(
    is_async: bool, beside: bool
) -> None:
    # it went past every handler: the run's task ended with it ("Task exception was never
    # retrieved"), the run stayed 'running' (also after the runtime closed), result() hung
    # and no graph.completed came; graph.run() let it out
    if is_async:

        async def node(state: _State) -> dict[str, Any]:
            raise _Foreign("a library stopping")
    else:

        def node(state: _State) -> dict[str, Any]:
            raise _Foreign("a library stopping")

    builder = StateGraph(_State).add_node("a", node).add_edge(START, "a").add_edge("a", END)
    if beside:
        builder.add_node("b", lambda s: {}).add_edge(START, "b").add_edge("b", END)
    checkpointer = MemoryCheckpointer()
    graph = builder.compile(checkpointer=checkpointer)
    error = await _ends_failed(graph, EventRecorder(), checkpointer)
    assert "node 'a' raised _Foreign" in error and "a library stopping" in error
    result = await graph.run({"x": 0}, thread_id="t-2")
    assert result.status == "failed" and isinstance(result.error, RuntimeError)
    assert isinstance(result.error.__cause__, _Foreign)
    snapshot = await graph.get_state("t-2")
    assert [t.name for t in snapshot.tasks] == (["a", "b"] if beside else ["a"])
    failed = next(t for t in snapshot.tasks if t.name == "a")
    assert failed.error is not None  # its failure is kept, as any node's


@pytest.mark.parametrize("raised", [_Foreign("a library stopping"), SystemExit(4)])
async def test_a_router_raising_no_exception_fails_its_run_keeping_the_nodes_writes(
    raised: BaseException,
) -> None:
    # _Foreign: the run stayed 'running' for ever, as a node's; SystemExit went out of the
    # run's task and stopped the event loop under every run of the runtime
    def router(state: _State) -> str:
        raise raised

    builder = StateGraph(_State).add_node("a", lambda s: {"x": 1}).add_edge(START, "a")
    builder.add_conditional_edges("a", router, [END])
    checkpointer = MemoryCheckpointer()
    graph = builder.compile(checkpointer=checkpointer)
    error = await _ends_failed(graph, EventRecorder(), checkpointer)
    assert "router" in error and type(raised).__name__ in error
    result = await graph.run({"x": 0}, thread_id="t-2")
    assert result.status == "failed" and isinstance(result.error, RuntimeError)
    assert result.error.__cause__ is raised
    assert (await graph.get_state("t-2")).values == {"x": 1}  # the node's writes are kept


_RAISED: list[BaseException] = []


def _raising_reducer(current: Any, update: Any) -> Any:
    if update == 99:
        raise _RAISED[0]
    return update


class _Reduced(TypedDict):
    x: Annotated[Any, _raising_reducer]


@pytest.mark.parametrize("raised", [_Foreign("a library stopping"), SystemExit(4)])
async def test_a_reducer_raising_no_exception_fails_its_run(raised: BaseException) -> None:
    # as a router's: the run stayed 'running' (_Foreign), or the event loop stopped (SystemExit)
    _RAISED[:] = [raised]
    builder = StateGraph(_Reduced).add_node("a", lambda s: {"x": 99})
    builder.add_edge(START, "a").add_edge("a", END)
    checkpointer = MemoryCheckpointer()
    graph = builder.compile(checkpointer=checkpointer)
    error = await _ends_failed(graph, EventRecorder(), checkpointer)
    assert "reducer '_raising_reducer' of 'x'" in error and type(raised).__name__ in error
    result = await graph.run({"x": 0}, thread_id="t-2")
    assert result.status == "failed" and isinstance(result.error, RuntimeError)
    assert result.error.__cause__ is raised
    assert result.state == {"x": 0}


# ---------------------------------------------------------------------- graph: one-shot values


class _Two(TypedDict):
    x: Any
    y: Any


def _one_shots() -> list[Any]:
    return [(i for i in range(3)), iter([0, 1, 2]), map(int, "012"), reversed([2, 1, 0])]


@pytest.mark.parametrize("index", range(4), ids=["generator", "list_iterator", "map", "reversed"])
async def test_a_one_shot_iterator_written_to_a_saved_state_fails_the_node_not_the_next_one(
    index: int,
) -> None:
    # saving the step's checkpoint used the iterator up (pydantic writes its items as a
    # list): the next node read it empty ('y' == []) while the checkpoint held the items; a
    # run without checkpointer reads [0, 1, 2]
    builder = StateGraph(_Two).add_node("a", lambda s: {"x": _one_shots()[index]})
    builder.add_node("b", lambda s: {"y": list(s["x"])})
    builder.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    assert (await builder.compile().run({"x": None})).state["y"] == [0, 1, 2]
    graph = builder.compile(checkpointer=MemoryCheckpointer())
    result = await graph.run({"x": None}, thread_id="t-1")
    assert result.status == "failed"
    assert "cannot checkpoint 'x'" in str(result.error) and "one-shot iterator" in str(result.error)
    snapshot = await graph.get_state("t-1")
    assert snapshot.next == ("a",) and snapshot.values == {"x": None}  # nothing of it saved


_NESTINGS = {
    "list": lambda it: [1, it],
    "dict": lambda it: {"k": it},
    "tuple": lambda it: (it,),
    "deep": lambda it: {"k": [{"j": (0, it)}]},
    "long": lambda it: [*range(20), it],
}


@pytest.mark.parametrize("nest", sorted(_NESTINGS))
@pytest.mark.parametrize("index", range(4), ids=["generator", "list_iterator", "map", "reversed"])
async def test_a_one_shot_iterator_in_a_list_or_dict_fails_the_node_too(
    index: int, nest: str
) -> None:
    # one level down the save used it up just the same: the next node read it empty
    def read(s: Any) -> dict[str, Any]:
        found: list[Any] = []

        def walk(v: Any) -> None:
            if isinstance(v, dict):
                for item in v.values():
                    walk(item)
            elif isinstance(v, list | tuple):
                for item in v:
                    walk(item)
            elif not isinstance(v, int):
                found.extend(v)

        walk(s["x"])
        return {"y": found}

    builder = StateGraph(_Two).add_node("a", lambda s: {"x": _NESTINGS[nest](_one_shots()[index])})
    builder.add_node("b", read)
    builder.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    assert (await builder.compile().run({"x": None})).state["y"] == [0, 1, 2]
    graph = builder.compile(checkpointer=MemoryCheckpointer())
    result = await graph.run({"x": None}, thread_id="t-1")
    assert result.status == "failed"
    assert "cannot checkpoint 'x'" in str(result.error) and "one-shot iterator" in str(result.error)
    snapshot = await graph.get_state("t-1")
    assert snapshot.next == ("a",) and snapshot.values == {"x": None}  # nothing of it saved


@dataclasses.dataclass
class _Box:
    item: Any


class _Model(BaseModel):
    item: Any


class _Open(BaseModel, extra="allow"):
    pass


_HOLDERS = {
    "set": lambda it: {1, it},
    "frozenset": lambda it: frozenset([it]),
    "dataclass": _Box,
    "pydantic": lambda it: _Model(item=it),
    "pydantic_extra": lambda it: _Open(item=it),
    "deep": lambda it: {"k": [_Box(item=(0, _Model(item={it})))]},
}


def _inside(value: Any) -> list[Any]:
    """The items of the one-shot iterator inside ``value`` (read, so used up)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _inside(v)]
    if isinstance(value, list | tuple | set | frozenset):
        return [x for v in value for x in _inside(v)]
    if isinstance(value, _Box):
        return _inside(value.item)
    if isinstance(value, BaseModel):
        return _inside(value.__dict__ | (value.__pydantic_extra__ or {}))
    return [] if isinstance(value, int) else list(value)


@pytest.mark.parametrize("holder", sorted(_HOLDERS))
@pytest.mark.parametrize("index", range(4), ids=["generator", "list_iterator", "map", "reversed"])
async def test_a_one_shot_iterator_in_a_set_dataclass_or_model_fails_the_node_too(
    index: int, holder: str
) -> None:
    # as in a dict, list or tuple: the save used it up (pydantic writes a set, a dataclass's
    # and a model's fields, item by item), and the next node read it empty
    builder = StateGraph(_Two).add_node("a", lambda s: {"x": _HOLDERS[holder](_one_shots()[index])})
    builder.add_node("b", lambda s: {"y": _inside(s["x"])})
    builder.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    assert (await builder.compile().run({"x": None})).state["y"] == [0, 1, 2]
    graph = builder.compile(checkpointer=MemoryCheckpointer())
    result = await graph.run({"x": None}, thread_id="t-1")
    assert result.status == "failed"
    assert "cannot checkpoint 'x'" in str(result.error) and "one-shot iterator" in str(result.error)
    snapshot = await graph.get_state("t-1")
    assert snapshot.next == ("a",) and snapshot.values == {"x": None}  # nothing of it saved


def _cycles() -> dict[str, Any]:
    looped: list[Any] = [1]
    looped.append(looped)
    mapping: dict[str, Any] = {"k": 1}
    mapping["self"] = [mapping]
    box = _Box(item=None)
    box.item = {"back": box}
    return {"list": looped, "dict": mapping, "dataclass": box}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shape", ["list", "dict", "dataclass"])
async def test_a_value_that_holds_itself_fails_the_node_and_does_not_hang(shape: str) -> None:
    # the search for one-shot iterators went round the cycle for good (the save never
    # reached pydantic, which says "Circular reference detected"): the run hung
    builder = StateGraph(_Two).add_node("a", lambda s: {"x": _cycles()[shape]})
    builder.add_edge(START, "a").add_edge("a", END)
    graph = builder.compile(checkpointer=MemoryCheckpointer())
    result = await graph.run({"x": None}, thread_id="t-1")
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "cannot checkpoint 'x'" in str(result.error) and "ircular" in str(result.error)
    snapshot = await graph.get_state("t-1")
    assert snapshot.next == ("a",) and snapshot.values == {"x": None}  # nothing of it saved


async def test_a_one_shot_interrupt_value_fails_the_node_that_asks() -> None:
    # the question was saved as the iterator's items, and the Interrupt the caller got held
    # the iterator used up: list(result.interrupts[0].value) == []
    from tinyagents.graph import interrupt

    def ask(state: _Two) -> dict[str, Any]:
        return {"y": interrupt(i for i in range(3))}

    builder = StateGraph(_Two).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    graph = builder.compile(checkpointer=MemoryCheckpointer())
    result = await graph.run({"x": 0}, thread_id="t-1")
    assert result.status == "failed" and result.interrupts == []
    assert "cannot checkpoint an interrupt() value: a generator is a one-shot" in str(result.error)


# ---------------------------------------------------------------------- graph builder: lists


def _builder() -> StateGraph:
    return StateGraph(_State).add_node("a", lambda s: {}).add_edge(START, "a")


@pytest.mark.parametrize("path_map", [5, None.__class__, object()])
def test_a_path_map_that_is_no_collection_is_a_graph_validation_error(path_map: Any) -> None:
    # a bare TypeError ("'int' object is not iterable") from inside the builder
    with pytest.raises(GraphValidationError, match="path_map") as raised:
        _builder().add_conditional_edges("a", lambda s: END, path_map)
    assert isinstance(raised.value, TypeError)  # as LangGraph's, for ported code


def test_a_path_map_of_text_is_refused_not_read_letter_by_letter() -> None:
    # "ab" was the mapping {"a": "a", "b": "b"}: a router returning "ab" failed at run time,
    # one returning "a" ran node 'a'
    with pytest.raises(GraphValidationError, match=r"path_map.*\['ab'\]"):
        _builder().add_node("ab", lambda s: {}).add_conditional_edges("a", lambda s: "ab", "ab")


@pytest.mark.parametrize("field", ["destinations", "supervises"])
@pytest.mark.parametrize("value", [5, "ab"])
def test_node_lists_that_are_no_lists_of_names_are_refused(field: str, value: Any) -> None:
    # 5: a bare TypeError; "ab": the nodes 'a' and 'b', letter by letter
    with pytest.raises(GraphValidationError, match=field):
        StateGraph(_State).add_node("n", lambda s: {}, **{field: value})


def test_a_node_that_is_no_function_is_a_graph_validation_error_and_a_type_error() -> None:
    # a bare TypeError (LangGraph's kind, kept for ported code), where every other refusal of
    # the builder is a GraphValidationError
    with pytest.raises(GraphValidationError, match="must be a function") as raised:
        StateGraph(_State).add_node("n", 5)
    assert isinstance(raised.value, TypeError)
    with pytest.raises(GraphValidationError, match="must be a function"):
        StateGraph(_State).add_sequence([5])  # type: ignore[list-item]


def test_node_lists_of_names_are_still_taken() -> None:
    builder = StateGraph(_State).add_node("a", lambda s: {}, destinations=("b",))
    builder.add_node("b", lambda s: {}, destinations={"a": "back"})  # LangGraph's labels
    builder.add_edge(START, "a").add_conditional_edges("a", lambda s: END, [END])
    builder.add_edge("b", END)
    assert builder.compile() is not None


# ---------------------------------------------------------------------- events: sinks


@pytest.mark.parametrize("raised", [_Foreign("a sink's library"), GeneratorExit()])
@pytest.mark.parametrize("on", ["run.completed", "graph.task_started", "graph.completed"])
async def test_a_sink_raising_no_exception_is_a_sink_error_and_the_run_ends(
    raised: BaseException, on: str
) -> None:
    # only Exception, SystemExit and CancelledError were a sink's failures: these went into
    # the publishing run, whose task ended with it, the run left 'running' for ever
    def sink(event: Event) -> None:
        if event.type == on:
            raise raised

    recorder = EventRecorder()
    async with Runtime(sinks=[sink, recorder]) as rt:
        if on.startswith("graph"):
            graph = StateGraph(_State).add_node("a", lambda s: {"x": 1})
            compiled = graph.add_edge(START, "a").add_edge("a", END).compile()
            handle = await rt.start_graph(compiled, {"x": 0})
        else:
            handle = await rt.start(Agent("a", ScriptedModel(["done"])), "go")
        result = await asyncio.wait_for(handle.result(), 10)
        assert result.status is RunStatus.COMPLETED
        assert rt.bus.sink_errors == {sink.__qualname__: 1}
    ends = {"run.completed", "graph.completed"}
    assert [e.type for e in recorder.events if e.run_id == handle.run_id and e.type in ends] == [
        "graph.completed" if on.startswith("graph") else "run.completed"
    ]


@pytest.mark.parametrize("raised", [_Foreign("a filter's library"), GeneratorExit()])
def test_a_subscription_filter_raising_no_exception_is_its_error(raised: BaseException) -> None:
    def where(event: Event) -> bool:
        raise raised

    bus = EventBus()
    subscription = bus.subscribe(where=where)
    bus.publish(RunEvent(type="run.status"))  # it raised out of publish
    assert subscription.errors == 1


# ---------------------------------------------------------------------- steering: policies


class _RaisingCheck(CheckPolicy):
    policy_id = "raising-check"

    def __init__(self, raised: BaseException) -> None:
        self.raised = raised

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        raise self.raised


class _RaisingPolicy:
    policy_id = "raising-policy"

    def __init__(self, raised: BaseException) -> None:
        self.raised = raised

    async def __call__(self, cmd: SteeringCommand, ctx: PolicyContext, call_next: Any) -> Any:
        raise self.raised


@pytest.mark.parametrize("kind", [_RaisingCheck, _RaisingPolicy])
@pytest.mark.parametrize(
    "raised",
    [SystemExit(2), _Foreign("a policy's library"), GeneratorExit(), asyncio.CancelledError()],
    ids=["SystemExit", "foreign", "GeneratorExit", "CancelledError"],
)
async def test_a_policy_raising_no_exception_refuses_the_command(
    kind: type, raised: BaseException
) -> None:
    # only an Exception was a policy's failure (the command refused, fail closed): these went
    # out of submit to the sender, the command with no event at all, and a policy's
    # SystemExit stopped the event loop under every run of the runtime
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        gate = Gate("lead")
        handle = await rt.start(Agent("a", gate.model("done")), "go")
        handle.policies.append(kind(raised))  # the run's own, after the runtime's
        receipt = await handle.steer("hi", check=False)
        assert receipt.status == "rejected" and receipt.policy_id == kind.policy_id
        assert receipt.reason is not None and type(raised).__name__ in receipt.reason
        gate.open()
        assert (await handle.result()).status is RunStatus.COMPLETED
    assert recorder.terminal_state(receipt.correlation_id) == "rejected"
    recorder.assert_every_command_terminal()


# ---------------------------------------------------------------------- graph: Send


@pytest.mark.parametrize("node", [5, None, b"a", ("a",)])
def test_a_send_to_no_node_name_is_refused_when_built(node: Any) -> None:
    # Send(5, ...) was built, and refused only when a router's or node's goto routed it
    with pytest.raises(GraphValidationError, match=r"Send\(\) names a node by its name") as raised:
        Send(node, {})
    assert isinstance(raised.value, TypeError)  # as the builder's other argument checks


def test_a_send_to_a_node_name_is_still_built() -> None:
    class Name(str, enum.Enum):  # noqa: UP042 (the shape LangGraph test_enum_node_names has)
        A = "a"

    assert Send("a", 1).node == "a"
    assert type(Send(Name.A, 1).node) is str  # a (str, Enum) member is its value, as before
