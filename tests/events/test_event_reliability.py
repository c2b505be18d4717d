"""The bus isolates what it feeds (a raising sink or filter never reaches the publisher), and
redaction masks secret keys (plurals included) but not token counters, in events and logs."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any, TypedDict

import pytest

from tinyagents import (
    Agent,
    RunStatus,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
    SubAgent,
    SubAgentTool,
    tool,
)
from tinyagents.errors import ConfigurationError
from tinyagents.events import (
    MASK,
    Event,
    EventBus,
    MemorySink,
    RunEvent,
    StructlogSink,
    SubAgentEvent,
    summarize,
)
from tinyagents.events.redact import MAX_SUMMARY_DEPTH
from tinyagents.graph import START, StateGraph, interrupt
from tinyagents.protocol.commands import MAX_PAYLOAD_DEPTH
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import EventRecorder, FunctionModel, ScriptedModel, tool_call


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


class BrokenSink:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, event: Event) -> None:
        self.calls += 1
        raise RuntimeError("sink is down")


# ---------------------------------------------------------------- provenance


async def test_every_event_of_a_run_names_the_runs_parent_and_root() -> None:
    """The ``subagent.*`` events reported on a middle run of a tree (its child started,
    completed, was steered) named no ``parent_run_id``, unlike every other event of it."""
    recorder = EventRecorder()
    leaf = Agent("leaf", model=ScriptedModel(["done"]))
    mid = Agent(
        "mid",
        model=ScriptedModel([tool_call("leaf", {"input": "x"}), "ok"]),
        tools=[SubAgentTool(SubAgent(leaf))],
    )
    top = Agent(
        "top",
        model=ScriptedModel([tool_call("mid", {"input": "y"}), "fin"]),
        tools=[SubAgentTool(SubAgent(mid))],
    )
    async with Runtime(testing=True, sinks=[recorder]) as rt:
        handle = await rt.start(top, "go")
        assert (await handle.result()).status is RunStatus.COMPLETED
        tree = {
            e.run_id: (e.root_run_id, e.parent_run_id)
            for e in recorder.events
            if e.type == "run.started"
        }
        (mid_run,) = [r for r, (root, parent) in tree.items() if parent == handle.run_id]
        (leaf_run,) = [r for r, (_, parent) in tree.items() if parent == mid_run]
        await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(leaf_run),
                actor=SteeringActor.test(),
                kind=SteeringKind.PAUSE,
            )
        )
    on_mid = [e for e in recorder.events if isinstance(e, SubAgentEvent) and e.run_id == mid_run]
    assert {e.type for e in on_mid} == {
        "subagent.started",
        "subagent.completed",
        "subagent.steered",
    }
    wrong = [
        (e.type, e.run_id, e.root_run_id, e.parent_run_id)
        for e in recorder.events
        if e.run_id in tree and (e.root_run_id, e.parent_run_id) != tree[e.run_id]
    ]
    assert wrong == []


async def test_a_tool_call_with_deeply_nested_arguments_does_not_fail_the_run() -> None:
    """A model may send tool arguments nested hundreds of levels deep (valid JSON): their
    summary for the ``tool.call`` event recursed once per level, and the run failed with
    ``RecursionError``. A summary shows that deep data as a marker instead."""

    @tool
    async def store_it(x: object = None) -> str:
        return "stored"

    deep = json.loads("[" * 600 + "]" * 600)
    recorder = EventRecorder()
    agent = Agent(
        "a", model=ScriptedModel([tool_call("store_it", {"x": deep}), "done"]), tools=[store_it]
    )
    async with Runtime(sinks=[recorder]) as rt:
        result = await (await rt.start(agent, "go")).result()
    assert result.status is RunStatus.COMPLETED, result.error
    (call,) = recorder.of_type("tool.call")
    summary = call.to_dict(mode="json")["args_summary"]["x"]
    for _ in range(MAX_SUMMARY_DEPTH - 2):  # args (level 1) and x (2) to level 32
        (summary,) = summary
    assert summary == [f"… (1 item nested deeper than {MAX_SUMMARY_DEPTH} levels)"]


def test_a_summary_keeps_a_payload_nested_to_the_command_limit_whole() -> None:
    payload: dict[str, object] = {"v": 1}
    for _ in range(MAX_PAYLOAD_DEPTH - 1):
        payload = {"k": payload}
    assert summarize(payload) == payload


# ---------------------------------------------------------------- sinks and subscribers


async def test_a_raising_sink_breaks_neither_the_run_nor_the_terminal_invariant() -> None:
    gate = asyncio.Event()

    @tool
    async def wait() -> str:
        """Waits for the test."""
        await gate.wait()
        return "waited"

    broken, recorder = BrokenSink(), EventRecorder()
    agent = Agent("a", ScriptedModel([tool_call("wait"), "done"]), tools=[wait])
    async with Runtime(sinks=[broken, recorder]) as rt:
        handle = await rt.start(agent, "task")
        receipt = await handle.steer("also check the ledger")
        gate.set()
        result = await handle.result()
        errors = dict(rt.bus.sink_errors)
    assert result.status is RunStatus.COMPLETED
    assert result.output == "done"
    assert receipt.status == "accepted"
    recorder.assert_lifecycle(
        receipt.correlation_id, ["requested", "accepted", "delivered", "applied"]
    )
    recorder.assert_every_command_terminal()
    # The sink after the broken one still saw everything; every failure was counted.
    assert broken.calls == len(recorder.events) > 0
    assert errors == {"BrokenSink": broken.calls}


def test_a_sink_that_exits_is_a_sink_error_like_any_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # SystemExit is no Exception: a sink calling sys.exit (a CLI library's, a failed
    # config check) went through the bus into the publisher, a run or the steering router,
    # and from a run's task it ends the event loop under every run of the runtime.
    def exits(event: Event) -> None:
        sys.exit(3)

    def exiting_filter(event: Event) -> bool:
        sys.exit(4)

    bus = EventBus()
    after = MemorySink()
    bus.add_sink(exits)
    bus.add_sink(after)
    quitter = bus.subscribe(where=exiting_filter)
    with caplog.at_level(logging.ERROR, logger="tinyagents.events"):
        for _ in range(2):
            bus.publish(RunEvent(type="run.status"))
    assert len(after.events) == 2
    assert bus.sink_errors == {exits.__qualname__: 2} and quitter.errors == 2
    assert len(caplog.records) == 2 and "SystemExit" in caplog.records[0].getMessage()


def test_a_sink_raising_cancelled_error_is_a_sink_error() -> None:
    # A sink is called synchronously: no cancellation of the publisher's task can land
    # inside it, so a CancelledError from one is its own fault (it would fail the run).
    def cancels(event: Event) -> None:
        raise asyncio.CancelledError("a library cancelled its own work")

    bus = EventBus()
    bus.add_sink(cancels)
    bus.publish(RunEvent(type="run.status"))
    assert bus.sink_errors == {cancels.__qualname__: 1}


def test_a_sink_interrupted_by_the_user_still_stops_the_program() -> None:
    # KeyboardInterrupt (Ctrl-C) is the user stopping the program, not a faulty sink
    def interrupted(event: Event) -> None:
        raise KeyboardInterrupt

    bus = EventBus()
    bus.add_sink(interrupted)
    with pytest.raises(KeyboardInterrupt):
        bus.publish(RunEvent(type="run.status"))
    assert bus.sink_errors == {}


async def test_a_run_goes_on_past_a_sink_that_exits() -> None:
    exited: list[str] = []

    def exits(event: Event) -> None:
        exited.append(event.type)
        raise SystemExit("sink gave up")

    recorder = EventRecorder()
    agent = Agent("a", ScriptedModel([tool_call("noop"), "done"]), tools=[noop])
    async with Runtime(sinks=[exits, recorder]) as rt:
        result = await (await rt.start(agent, "task")).result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
    assert len(exited) == len(recorder.events) > 0


def test_sink_errors_are_logged_once_per_sink_and_error_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    after = MemorySink()
    bus.add_sink(BrokenSink())
    bus.add_sink(after)
    with caplog.at_level(logging.ERROR, logger="tinyagents.events"):
        for _ in range(5):
            bus.publish(RunEvent(type="run.status"))
    assert len(after.events) == 5
    assert bus.sink_errors == {"BrokenSink": 5}
    (record,) = caplog.records
    assert "BrokenSink" in record.getMessage() and "RuntimeError" in record.getMessage()


async def test_a_raising_subscription_filter_is_counted_and_skips_only_that_subscriber(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()

    def picky(event: Event) -> bool:
        raise KeyError("no such field")

    bad = bus.subscribe(where=picky)
    good = bus.subscribe()
    with caplog.at_level(logging.ERROR, logger="tinyagents.events"):
        for _ in range(3):
            bus.publish(RunEvent(type="run.status"))
    assert bad.errors == 3 and bad.get_nowait() is None
    assert [good.get_nowait() is not None for _ in range(3)] == [True] * 3
    assert len(caplog.records) == 1


@pytest.mark.parametrize("maxsize", [0, -1])
async def test_subscribe_refuses_a_maxsize_below_one(maxsize: int) -> None:
    bus = EventBus()
    with pytest.raises(ValueError, match="maxsize") as exc:
        bus.subscribe(maxsize=maxsize)
    assert isinstance(exc.value, ConfigurationError)  # and a ValueError, as it was
    assert not bus._subscribers
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match=r"subscribe\(maxsize=-?\d\): .* at least 1"):
            rt.subscribe(maxsize=maxsize)


# ---------------------------------------------------------------- redaction

SECRET_KEYS = [
    "password",
    "passwords",
    "db_passwords",
    "secret",
    "secrets",
    "client_secret",
    "clientSecrets",
    "api_key",
    "api_keys",
    "apiKeys",
    "token",
    "tokens",
    "access_token",
    "access_tokens",
    "refresh_token",
    "refreshTokens",
    "id_token",
    "cookie",
    "cookies",
    "Set-Cookie",
    "authorization",
    "private_key",
    "privateKey",
    "private_keys",
    "credential",
    "credentials",
    "aws_credentials",
    "passphrase",
    "access_key",
    # spaces, dots and no separator at all: as a config file or a header may spell them
    "api key",
    "API Key",
    "api.key",
    "api-key",
    "x-api-key",
    "Api.Keys",
    "accesskey",
    "access key",
    "access.key",
    "AccessKey",
    "accessKeys",
    "aws_access_key_id",
    "aws.secret access key",
    "private key",
    "private.key",
    "auth token",
    "auth.token",
]
COUNTER_KEYS = [
    "max_tokens",
    "maxTokens",
    "max_completion_tokens",
    "tokenizer",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "tokens_used",
    "token_count",
    "num_tokens",
    "totalTokenCount",
    "secretary",
    "passwordless",
    "keys",
    "max tokens",
    "total.tokens",
    "key.count",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_keys_are_masked(key: str) -> None:
    assert summarize({key: "s3cr3t"}) == {key: MASK}
    assert summarize({"nested": [{key: {"deep": 1}}]}) == {"nested": [{key: MASK}]}


@pytest.mark.parametrize("key", COUNTER_KEYS)
def test_counters_and_other_words_are_not_masked(key: str) -> None:
    assert summarize({key: 123}) == {key: 123}


def test_structlog_sink_masks_secrets_anywhere_in_the_event(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sink = StructlogSink(json=True)
    sink(
        SubAgentEvent(
            type="subagent.started",
            run_id="r-1",
            child_run_id="r-2",
            detail={"passwords": ["p"], "config": {"api_keys": "k"}, "max_tokens": 5},
        )
    )
    sink(RunEvent(type="run.completed", run_id="r-1", usage={"total_tokens": 7, "tokens": "t"}))
    started, completed = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert started["detail"] == {"passwords": MASK, "config": {"api_keys": MASK}, "max_tokens": 5}
    assert completed["usage"] == {"total_tokens": 7, "tokens": MASK}
    assert completed["run_id"] == "r-1"


def test_a_summary_of_a_huge_list_or_dict_is_bounded_and_says_how_many_it_held() -> None:
    """A summary cut strings but kept every item: a rejected ``approve`` whose value was a
    list of 900 000 numbers put the whole list in its ``steering.requested`` and
    ``steering.rejected`` events (1.8 MB each, in memory and in the store's event log)."""
    huge_list = summarize({"value": list(range(900_000))})
    assert len(json.dumps(huge_list)) < 20_000
    assert huge_list["value"][:3] == [0, 1, 2]
    assert "900000 items in all" in huge_list["value"][-1]
    huge_dict = summarize({"update": {f"k{i}": i for i in range(100_000)}})
    assert len(json.dumps(huge_dict)) < 20_000
    assert huge_dict["update"]["k0"] == 0
    assert any("100000" in str(v) for v in huge_dict["update"].values())
    # nested containers share one bound: a 300 x 300 grid is no 90 000 values either
    grid = summarize([[0] * 300 for _ in range(300)])
    assert len(json.dumps(grid)) < 20_000


async def test_a_rejected_command_with_a_huge_list_has_bounded_events() -> None:
    recorder = EventRecorder()
    agent = Agent("a", model=ScriptedModel(["done"]))
    async with Runtime(sinks=[recorder]) as rt:
        handle = await rt.start(agent, "go")
        receipt = await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=SteeringActor.human("ops", tenant_id="default", scopes=["agent:control"]),
                kind=SteeringKind.APPROVE,
                payload={"value": [0] * 900_000},
            )
        )
        await handle.result()
    assert receipt.status == "rejected" and "too large" in (receipt.reason or "")
    events = [e for e in recorder.events if e.type.startswith("steering.")]
    assert [e.type for e in events] == ["steering.requested", "steering.rejected"]
    for event in events:
        assert len(json.dumps(event.to_dict(mode="json"))) < 20_000


async def test_a_huge_error_message_is_cut_in_the_events_of_a_failed_run() -> None:
    """A model or tool error's message (a provider's error body may echo the whole request)
    went whole into ``run.failed`` and ``subagent.*`` events: 5 MB in memory, in every
    subscriber's queue and in the store's event log. Events keep its head and its length;
    ``RunResult.error`` keeps it all."""

    async def broken(request: Any) -> Any:
        raise RuntimeError("M" * 5_000_000)

    child = SubAgent(Agent("child", model=FunctionModel(broken)), description="fails")
    parent = Agent(
        "parent",
        model=ScriptedModel([tool_call("child", {"input": "x"}), "done"]),
        tools=[SubAgentTool(child)],
    )
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        alone = await (await rt.start(Agent("alone", model=FunctionModel(broken)), "go")).result()
        await (await rt.start(parent, "go")).result()
    assert alone.status is RunStatus.FAILED and len(alone.error or "") > 5_000_000
    failed = [e for e in recorder.events if e.type == "run.failed"]
    assert len(failed) == 2  # the lone run and the child
    for event in recorder.events:
        assert len(json.dumps(event.to_dict(mode="json"))) < 20_000, event.type
    error = failed[0].to_dict(mode="json")["error"]
    assert error.startswith("RuntimeError: MMM") and error.endswith("(5000014 chars)")


async def test_a_huge_error_message_is_cut_in_the_events_of_a_failed_graph_run() -> None:
    class State(TypedDict):
        x: int

    def broken(state: State) -> dict[str, int]:
        raise RuntimeError("M" * 5_000_000)

    graph = StateGraph(State).add_node("a", broken).add_edge(START, "a").compile()
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await (await rt.start_graph(graph, {"x": 1})).result()
    assert result.status is RunStatus.FAILED
    assert "graph.completed" in {e.type for e in recorder.events}
    for event in recorder.events:
        assert len(json.dumps(event.to_dict(mode="json"))) < 20_000, event.type


async def test_an_interrupts_value_is_masked_in_its_event_as_other_payloads_are() -> None:
    # graph.interrupt carried the node's question as it was: a secret in it went to the
    # store's event log, every subscriber (the operator API's event stream) and the run
    # listing's pending interrupts, read from the event, in clear. The question itself is kept whole (a human must read all of it).
    question = "Connect to the ledger? " + "q" * 1000

    class State(TypedDict):
        x: int

    def ask(state: State) -> dict[str, int]:
        interrupt({"question": question, "api_key": "sk-1", "db": [{"password": "p"}]})
        return {}

    graph = StateGraph(State).add_node("ask", ask).add_edge(START, "ask")
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        compiled = graph.compile(checkpointer=MemoryCheckpointer())
        result = await compiled.run({"x": 1}, thread_id="t", runtime=rt)
    (event,) = recorder.of_type("graph.interrupt")
    masked = {"question": question, "api_key": MASK, "db": [{"password": MASK}]}
    assert event.data["value"] == masked  # type: ignore[attr-defined]
    assert result.interrupts[0].value["api_key"] == "sk-1"  # the graph's own stays as asked
