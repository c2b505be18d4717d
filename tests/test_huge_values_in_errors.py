"""An integer past 4,300 digits where a setting or a command's field goes is refused with the
typed error that field's check raises, naming the integer by its size: quoting it with
``repr`` (which Python refuses for such an integer) raised a bare ``ValueError`` instead.
One case per check that quoted it so (ids and payload values were already named by size)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypedDict

import pytest

from tinyagents import (
    Agent,
    LiteLLMModel,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents._bounds import seconds, whole_number
from tinyagents.errors import (
    ArgumentError,
    ConfigurationError,
    GraphValidationError,
    InvalidCommandError,
    InvalidRouteError,
    InvalidUpdateError,
)
from tinyagents.events import EventBus, StructlogSink
from tinyagents.graph import (
    START,
    AgentNode,
    CachePolicy,
    Command,
    RetryPolicy,
    Send,
    StateGraph,
    TimeoutPolicy,
    interrupt,
)
from tinyagents.harness import (
    FunctionToolset,
    PrefixedToolset,
    SteeringRenderer,
    Tool,
    ToolOutput,
    tool,
)
from tinyagents.server import OBSERVE_RIGHT, Auth
from tinyagents.steering import BudgetPolicy
from tinyagents.store.cache import InMemoryCache
from tinyagents.store.checkpoint import MemoryCheckpointer, SqliteCheckpointer
from tinyagents.store.longterm import MemoryGraphStore
from tinyagents.testkit import ScriptedModel

HUGE = 10**5000
SIZE = "of about 5,000 digits"


class State(TypedDict):
    x: int


def _graph() -> StateGraph[Any]:
    return StateGraph(State).add_node("a", lambda s: {}).add_edge(START, "a")


def _command(**fields: Any) -> SteeringCommand:
    fields.setdefault("kind", SteeringKind.CANCEL)
    return SteeringCommand(
        target=SteeringTarget.agent_run("r-1"), actor=SteeringActor.test(), payload={}, **fields
    )


def _run(**config: Any) -> None:
    asyncio.run(_graph().compile().run({"x": 1}, **config))


async def _start_graph(**options: Any) -> None:
    async with Runtime() as rt:
        await rt.start_graph(_graph().compile(), {"x": 1}, **options)


def _history(**options: Any) -> None:
    graph = _graph().compile(checkpointer=MemoryCheckpointer())
    asyncio.run(graph.history("t-1", **options))


CASES: dict[str, tuple[Callable[[], object], type[Exception]]] = {
    # tinyagents._bounds, the check many settings use
    "a count below its least": (lambda: whole_number("ring_size", -HUGE), ConfigurationError),
    "seconds past any float": (lambda: seconds("timeout", HUGE), ConfigurationError),
    "a command's kind": (lambda: _command(kind=HUGE), InvalidCommandError),
    "a command's delivery": (lambda: _command(delivery=HUGE), InvalidCommandError),
    "a model name": (lambda: LiteLLMModel(HUGE), ConfigurationError),  # type: ignore[arg-type]
    "a model's retries": (
        lambda: LiteLLMModel("openai/x", max_retries=-HUGE),
        ConfigurationError,
    ),
    "a model's timeout past any float": (
        lambda: LiteLLMModel("openai/x", timeout_s=HUGE),
        ConfigurationError,
    ),
    # ArgumentError: a ConfigurationError, as PostgreSQL's synchronous_commit, and a ValueError
    "a checkpointer's lease_ttl": (
        lambda: SqliteCheckpointer(":memory:", lease_ttl=-HUGE),
        ArgumentError,
    ),
    "a checkpointer's lease_ttl past any float": (
        lambda: SqliteCheckpointer(":memory:", lease_ttl=HUGE),
        ArgumentError,
    ),
    "a checkpointer's synchronous": (
        lambda: SqliteCheckpointer(":memory:", synchronous=HUGE),  # type: ignore[arg-type]
        ArgumentError,
    ),
    "a checkpointer's snapshot_every": (
        lambda: MemoryCheckpointer(snapshot_every=-HUGE),
        ArgumentError,
    ),
    "a retry policy's attempts": (lambda: RetryPolicy(max_attempts=-HUGE), ArgumentError),
    "a retry policy's wait past any float": (
        lambda: RetryPolicy(initial_interval=HUGE),
        ArgumentError,
    ),
    "an agent's unknown_tools": (
        lambda: Agent("a", ScriptedModel([]), unknown_tools=HUGE),  # type: ignore[arg-type]
        ConfigurationError,
    ),
    "a graph's interrupt_before": (
        lambda: _graph().compile(interrupt_before=HUGE),  # type: ignore[arg-type]
        GraphValidationError,
    ),
    "a graph's step_timeout": (
        lambda: _graph().compile(step_timeout=HUGE),
        GraphValidationError,
    ),
    "a run's recursion_limit": (lambda: _run(recursion_limit=-HUGE), ArgumentError),
    "a run's max_concurrency": (lambda: _run(max_concurrency=-HUGE), ConfigurationError),
    "a run's durability": (lambda: _run(durability=HUGE), ArgumentError),
    "a run's checkpoint_during": (lambda: _run(checkpoint_during=HUGE), ArgumentError),
    "a batch's concurrency": (
        lambda: asyncio.run(_graph().compile().abatch([{"x": 1}], concurrency=-HUGE)),
        ArgumentError,
    ),
    "a graph run's wait_on_interrupt": (
        lambda: asyncio.run(_start_graph(wait_on_interrupt=HUGE)),
        ConfigurationError,
    ),
    "a token's lifetime": (
        lambda: Auth(Auth.generate_key()).mint(
            user="u", tenant="t", rights=[OBSERVE_RIGHT], ttl_s=-HUGE
        ),
        ConfigurationError,
    ),
    "a graph's state class": (lambda: StateGraph(HUGE), ConfigurationError),  # type: ignore[arg-type]
    "a graph's context_schema": (
        lambda: StateGraph(State, context_schema=HUGE),
        ArgumentError,
    ),
    "a history's ns": (lambda: _history(ns=HUGE), ArgumentError),
    "a history's before": (lambda: _history(before=HUGE), ArgumentError),
    "a history's filter": (lambda: _history(filter=HUGE), ArgumentError),
    "a node's timeout": (
        lambda: StateGraph(State).add_node("a", lambda s: {}, timeout=HUGE),
        GraphValidationError,
    ),
    "a runtime's retain_finished": (lambda: Runtime(retain_finished=-HUGE), ConfigurationError),
    # found at the second review
    "a retry policy's retry_on": (lambda: RetryPolicy(retry_on=HUGE), ArgumentError),  # type: ignore[arg-type]
    "a node's retry": (
        lambda: StateGraph(State).add_node("a", lambda s: {}, retry=HUGE),  # type: ignore[arg-type]
        GraphValidationError,
    ),
    "a node's cache_policy": (
        lambda: StateGraph(State).add_node("a", lambda s: {}, cache_policy=HUGE),  # type: ignore[arg-type]
        GraphValidationError,
    ),
    "a node's name": (
        lambda: StateGraph(State).add_node(HUGE, lambda s: {}),  # type: ignore[call-overload]
        GraphValidationError,
    ),
    # found after the second review (the sweep missed them)
    "clear_cache's nodes": (lambda: _cached().clear_cache(nodes=[HUGE]), GraphValidationError),
    "stream modes given as a list": (
        lambda: _graph().compile().stream({"x": 1}, mode=["values", HUGE]),
        ConfigurationError,
    ),
    "an agent node's input": (lambda: _agent_node(input=HUGE), ConfigurationError),
    "an agent node's output": (lambda: _agent_node(output=HUGE), ConfigurationError),
    "an interrupt's response_schema": (lambda: _interrupt_with(HUGE), TypeError),
    "a cache policy's ttl past any float": (lambda: CachePolicy(ttl=HUGE), ArgumentError),
    "a stored item's ttl": (lambda: _store_put(ttl=HUGE), ArgumentError),
    "a store's default_ttl": (
        lambda: MemoryGraphStore(ttl={"default_ttl": HUGE}),
        ArgumentError,
    ),
    "a store namespace's label": (lambda: _store_put(namespace=("a", HUGE)), ArgumentError),
    "a store search's filter field": (
        lambda: _store_search(filter={HUGE: 1}),
        ArgumentError,
    ),
    "a store search's limit": (lambda: _store_search(limit=-HUGE), ArgumentError),
    "a tool's sequential": (lambda: tool(sequential=HUGE)(_noop), ConfigurationError),  # type: ignore[call-overload]
    "a tool's parameters type": (
        lambda: _Named(name="t", parameters={"type": HUGE}),
        ConfigurationError,
    ),
    "a ToolOutput's strict": (lambda: ToolOutput(State, strict=HUGE), ConfigurationError),  # type: ignore[arg-type]
    "a ToolOutput's sequential": (
        lambda: ToolOutput(State, sequential=HUGE),
        ConfigurationError,
    ),
    "a subscription's maxsize": (lambda: EventBus().subscribe(maxsize=-HUGE), ArgumentError),
    "a subscription's where": (
        lambda: EventBus().subscribe(where=HUGE),  # type: ignore[arg-type]
        ConfigurationError,
    ),
    "a Send's node": (lambda: Send(HUGE, {}), GraphValidationError),  # type: ignore[arg-type]
    "a handle's flag": (lambda: asyncio.run(_cancel(immediate=HUGE)), ArgumentError),
    "a structlog sink's level": (lambda: StructlogSink(level=HUGE), ConfigurationError),  # type: ignore[arg-type]
    "a cache policy's key_func": (lambda: CachePolicy(key_func=HUGE), ArgumentError),  # type: ignore[arg-type]
    "a stream's subgraphs": (
        lambda: _graph().compile().stream({"x": 1}, subgraphs=HUGE),  # type: ignore[arg-type]
        ArgumentError,
    ),
    "a Command's goto": (lambda: Command(goto=HUGE).goto_list(), InvalidRouteError),  # type: ignore[arg-type]
    "a timeout policy's refresh_on": (
        lambda: TimeoutPolicy(run_timeout=1.0, refresh_on=HUGE),  # type: ignore[arg-type]
        ArgumentError,
    ),
    "an agent run's stream mode": (lambda: asyncio.run(_agent_stream([HUGE])), ConfigurationError),
    "a ToolOutput's max_retries": (
        lambda: ToolOutput(State, max_retries=-HUGE),
        ConfigurationError,
    ),
    "a tool's retries": (lambda: tool(retries=-HUGE)(_noop), ConfigurationError),
    "a toolset's renamed": (
        lambda: FunctionToolset([_noop]).renamed({HUGE: "_noop"}),  # type: ignore[dict-item]
        ConfigurationError,
    ),
    "a runtime's testing": (lambda: Runtime(testing=HUGE), ConfigurationError),  # type: ignore[arg-type]
    "a runtime's trusted_middleware": (
        lambda: Runtime(trusted_middleware=HUGE),  # type: ignore[arg-type]
        ConfigurationError,
    ),
    "a budget policy's clamp": (lambda: BudgetPolicy(clamp=HUGE), ConfigurationError),  # type: ignore[arg-type]
    "a store search's refresh_ttl": (lambda: _store_search(refresh_ttl=HUGE), ArgumentError),
    "a store listing's max_depth": (
        lambda: asyncio.run(MemoryGraphStore().alist_namespaces(max_depth=-HUGE)),
        ArgumentError,
    ),
    "a history's limit": (lambda: _history(limit=-HUGE), ArgumentError),
    "a control plane's backoff_s": (
        lambda: asyncio.run(_redis_control(backoff_s=HUGE)),
        ConfigurationError,
    ),
    "a token's rights": (
        lambda: Auth(Auth.generate_key()).mint(user="u", tenant="t", rights=[HUGE]),  # type: ignore[list-item]
        ConfigurationError,
    ),
    "update_state's ns": (
        lambda: asyncio.run(
            _graph().compile(checkpointer=MemoryCheckpointer()).update_state("t-1", {}, ns=HUGE)  # type: ignore[arg-type]
        ),
        ArgumentError,
    ),
    "a steering renderer's role": (
        lambda: SteeringRenderer(role=HUGE),  # type: ignore[arg-type]
        ConfigurationError,
    ),
    "an agent's models": (
        lambda: Agent("a", ScriptedModel(["x"]), models=[HUGE]),  # type: ignore[list-item]
        ConfigurationError,
    ),
    "a toolset's prefix": (
        lambda: PrefixedToolset(FunctionToolset([]), HUGE),  # type: ignore[arg-type]
        ConfigurationError,
    ),
    "a cache key": (
        lambda: asyncio.run(InMemoryCache().get([HUGE])),  # type: ignore[list-item]
        ArgumentError,
    ),
    "a cache namespace": (
        lambda: asyncio.run(InMemoryCache().clear([HUGE])),  # type: ignore[list-item]
        ArgumentError,
    ),
    "a control plane's worker_id": (
        lambda: asyncio.run(_redis_control(worker_id=HUGE)),
        ConfigurationError,
    ),
    "a bulk update's superstep": (
        lambda: asyncio.run(
            _graph().compile(checkpointer=MemoryCheckpointer()).bulk_update_state("t-1", [HUGE])  # type: ignore[list-item]
        ),
        InvalidUpdateError,
    ),
}


async def _redis_control(**settings: Any) -> None:
    from tinyagents.distributed import RedisControl

    async with Runtime() as rt:
        RedisControl(rt, None, **settings)


async def _agent_stream(mode: object) -> None:
    async with Runtime() as rt:
        handle = await rt.start(Agent("a", ScriptedModel(["done"])), "hi")
        try:
            handle.stream(mode)  # type: ignore[arg-type]
        finally:
            await handle.result()


def _noop() -> None:
    """Does nothing."""


class _Named(Tool):
    async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
        return None


def _cached() -> Any:
    return _graph().compile(cache=InMemoryCache())


def _agent_node(**fields: Any) -> AgentNode:
    return AgentNode(Agent("a", ScriptedModel([])), **fields)


def _interrupt_with(schema: object) -> None:
    """A node that asks with ``schema``: the run fails with the read's error, raised here."""

    def ask(state: State) -> dict[str, Any]:
        interrupt("?", response_schema=schema)
        return {}

    graph = StateGraph(State).add_node("a", ask).add_edge(START, "a").compile()
    failed = asyncio.run(graph.run({"x": 1}))
    assert failed.status == "failed"
    raise failed.error  # type: ignore[misc]


def _store_put(namespace: tuple[Any, ...] = ("a",), **options: Any) -> None:
    asyncio.run(MemoryGraphStore().aput(namespace, "k", {"v": 1}, **options))


def _store_search(**options: Any) -> None:
    asyncio.run(MemoryGraphStore().asearch(("a",), **options))


async def _cancel(**options: Any) -> None:
    async with Runtime() as rt:
        handle = await rt.start(Agent("a", ScriptedModel(["done"])), "hi")
        try:
            await handle.cancel(**options)
        finally:
            await handle.result()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_huge_integer_is_refused_with_the_checks_own_error(case: str) -> None:
    make, error = CASES[case]
    with pytest.raises(error) as caught:
        make()
    assert SIZE in str(caught.value), caught.value
    assert "Exceeds the limit" not in str(caught.value)


@pytest.mark.parametrize(
    ("policy", "attempt"),
    [
        (RetryPolicy(max_attempts=2000, initial_interval=1.0, jitter=False), 1100),
        (RetryPolicy(backoff_factor=1e200, initial_interval=1.0, max_attempts=5, jitter=False), 3),
        (RetryPolicy(backoff_factor=10**300, initial_interval=1, max_attempts=5, jitter=False), 3),
    ],
    ids=["many-attempts", "big-float-factor", "big-int-factor"],
)
def test_a_retry_wait_that_grows_past_any_float_is_its_cap(
    policy: RetryPolicy, attempt: int
) -> None:
    """Found at the second review: a policy within its bounds grew its wait past any float
    by its attempts and raised a bare ``OverflowError`` out of the retry loop; it waits its
    ``max_interval``, as any wait grown past it does."""
    assert policy.interval(attempt) == policy.max_interval


def test_a_retry_wait_that_starts_at_zero_stays_zero_however_large_its_factor() -> None:
    policy = RetryPolicy(initial_interval=0.0, backoff_factor=1e200, max_attempts=5, jitter=False)
    assert policy.interval(3) == 0.0


def test_an_int_subclass_whose_repr_raises_is_named_by_its_type() -> None:
    from tinyagents.protocol.ids import shown_repr

    class Odd(int):
        def __repr__(self) -> str:
            raise RuntimeError("no text")

    assert shown_repr(Odd(5)) == "a Odd that cannot be printed"


class _Unprintable:
    """A value whose ``repr`` raises: quoting it raised that error in place of the refusal."""

    def __repr__(self) -> str:
        raise RuntimeError("no text")


UNPRINTABLE: dict[str, tuple[Callable[[object], object], type[Exception]]] = {
    "clear_cache's nodes": (lambda v: _cached().clear_cache(nodes=[v]), GraphValidationError),  # type: ignore[list-item]
    "stream modes given as a list": (
        lambda v: _graph().compile().stream({"x": 1}, mode=[v]),  # type: ignore[list-item]
        ConfigurationError,
    ),
    "an agent node's input": (lambda v: _agent_node(input=v), ConfigurationError),
    "an interrupt's response_schema": (_interrupt_with, TypeError),
    "a cache policy's ttl": (lambda v: CachePolicy(ttl=v), ArgumentError),  # type: ignore[arg-type]
    "a stored item's ttl": (lambda v: _store_put(ttl=v), ArgumentError),
    "a store namespace's label": (lambda v: _store_put(namespace=("a", v)), ArgumentError),
    "a store namespace beside a refused label": (
        lambda v: _store_put(namespace=("a.b", v)),
        ArgumentError,
    ),
    "a ToolOutput's strict": (lambda v: ToolOutput(State, strict=v), ConfigurationError),  # type: ignore[arg-type]
    "a subscription's where": (lambda v: EventBus().subscribe(where=v), ConfigurationError),  # type: ignore[arg-type]
    "a node's timeout": (
        lambda v: StateGraph(State).add_node("a", lambda s: {}, timeout=v),  # type: ignore[arg-type]
        GraphValidationError,
    ),
    "a Send's timeout": (lambda v: Send("a", {}, timeout=v), ArgumentError),  # type: ignore[arg-type]
    "a Send's node": (lambda v: Send(v, {}), GraphValidationError),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", sorted(UNPRINTABLE))
def test_a_value_whose_repr_raises_is_refused_with_the_checks_own_error(case: str) -> None:
    make, error = UNPRINTABLE[case]
    with pytest.raises(error) as caught:
        make(_Unprintable())
    assert "cannot be printed" in str(caught.value), caught.value
