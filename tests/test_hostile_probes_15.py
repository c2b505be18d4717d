"""A hostile or careless user's fifteenth round: whole numbers past what Python prints or
JSON readers take (an event summary's keys and values, ``mask``'s keys, a model's tool
arguments, an id), past 64 bits in an OpenTelemetry attribute, and a checkpoint id that is
no text.

Each test is a probe that found something (named in its docstring) or holds a decision down.
Probed and held (no test added): the graph thread API's other arguments (``history``'s
``limit``/``before``/``filter``/``ns``, ``fork``'s ``new_thread_id``, ``update_state`` and
``bulk_update_state`` given lists, strings, unknown nodes, huge integers), ``rt.forget`` of
released, unknown and unheld ids and the handle's calls after it, a SQLite store file
edited by hand (a parent cycle, a run its own parent, fields of the wrong types, an unknown
status, a bad ``created_at``, an orphan root, damaged ``steering_log`` rows) read by
``tinyagents inspect`` and ``runs list/show/tree/pause``, and the Redis control channel's
envelope and reply parsing given nesting, huge numbers and no commands.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TypedDict

import pytest

from tinyagents import Agent, Runtime, tool
from tinyagents.errors import ArgumentError, InvalidIdError
from tinyagents.events import MASK, mask, summarize
from tinyagents.graph import START, StateGraph
from tinyagents.harness import Model, ModelRequest, ModelResponse, ToolCall
from tinyagents.harness.model import parse_arguments
from tinyagents.runs.info import check_id
from tinyagents.store import SqliteStore
from tinyagents.store.checkpoint import SqliteCheckpointer

#: A whole number Python neither prints nor reads as JSON (past 4,300 digits).
HUGE = 10**5000


# -- whole numbers past what Python prints -----------------------------------------------------


def test_a_summary_whose_key_is_a_huge_integer_names_its_size() -> None:
    """Found: ``summarize({10**5000: 1})`` raised a bare ``ValueError`` (Python prints no
    integer past 4,300 digits, and a summary's keys are text): a tool call whose arguments
    held such a key failed its run on the ``tool.call`` event. The key is now named by its
    size, as a long text key is cut saying how long it was."""
    summary = summarize({HUGE: 1, -HUGE: 2, 7: "seven"})
    assert summary == {
        "an integer of about 5,000 digits": 1,
        "a negative integer of about 5,000 digits": 2,
        "7": "seven",
    }
    json.loads(json.dumps(summary))


def test_a_summary_of_a_huge_integer_value_is_text_a_reader_takes() -> None:
    """Found: ``summarize`` kept an integer of 5,000 digits as it was: the event holding it
    was written to the store's log (pydantic writes it) but no reader takes it back (Python's
    and pydantic's refuse past 4,300 digits), so the event was lost, left out of every
    read. A summary is JSON-safe: such an integer is named by its size."""
    summary = summarize({"n": HUGE, "m": [-HUGE], "k": 10**300})
    assert summary == {
        "n": "an integer of about 5,000 digits",
        "m": ["a negative integer of about 5,000 digits"],
        "k": 10**300,
    }
    assert json.loads(json.dumps(summary)) == summary
    frozen = summarize({"n": HUGE}, read_only=True)
    assert frozen == {"n": "an integer of about 5,000 digits"}


def test_mask_of_a_huge_integer_key_keeps_it_and_masks_secrets_beside_it() -> None:
    """Found: ``mask({10**5000: 1})`` raised a bare ``ValueError`` reading the key as text
    for a secret's name. An integer names no secret: the key is kept as it is (``mask``
    shortens nothing), secrets beside it are masked."""
    masked = mask({HUGE: 1, "api_key": "sk-1", "inner": {HUGE: {"password": "p"}}})
    assert masked == {HUGE: 1, "api_key": MASK, "inner": {HUGE: {"password": MASK}}}


# -- a model's tool arguments holding a huge integer ------------------------------------------


def test_tool_arguments_holding_a_huge_integer_are_a_parse_error_for_the_model() -> None:
    """Found: ``parse_arguments`` let a bare ``ValueError`` out of ``json.loads`` for a
    number of 5,000 digits (it is no ``JSONDecodeError``): a provider's tool call holding one
    failed the run. It is the model's to correct, as any arguments that do not read."""
    call = parse_arguments("c1", "measure", '{"n": ' + "1" * 5000 + "}")
    assert call.args == {}
    assert call.parse_error is not None
    assert "digits" in call.parse_error
    assert len(call.parse_error) < 1000


class _HugeArgs(Model):
    """Calls ``measure`` once with ``args`` (a dict or a provider's JSON text), then answers."""

    def __init__(self, args: Any) -> None:
        self.args = args
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if len(self.requests) == 1:
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="measure", args=self.args)])
        return ModelResponse(text="done")


@tool(name="measure")
def measure(n: Any = None) -> str:
    """Measure."""
    return "measured"


@pytest.mark.parametrize(
    "args",
    ['{"n": ' + "1" * 5000 + "}", {"n": {HUGE: 1}}, {"n": 1, HUGE: 2}],
    ids=["text", "nested-key", "key"],
)
async def test_a_tool_call_holding_a_huge_integer_does_not_fail_the_run(
    tmp_path: Path, args: Any
) -> None:
    """Found: a tool call whose arguments held an integer of 5,000 digits (as the provider's
    JSON text, or as a key of the dict a custom model gives) failed its run with a bare
    ``ValueError``, from reading the text or from the ``tool.call`` event's summary. Now the
    run goes on: text that does not read goes back to the model as a parse error, and the
    event names the key by its size; every event reads back from the store."""
    store = SqliteStore(tmp_path / "s.db")
    model = _HugeArgs(args)
    async with Runtime(store=store) as rt:
        handle = await rt.start(Agent("a", model, tools=[measure]), "go")
        result = await handle.result()
        assert result.status == "completed", result.error
        assert result.output == "done"
    store = SqliteStore(tmp_path / "s.db")
    await store.open()
    try:
        rows = await store.read_events(run_id=handle.run_id)
        assert [event.type for _, event in rows].count("tool.call") == 1
        assert [id for id, _ in rows] == list(range(rows[0][0], rows[0][0] + len(rows)))
    finally:
        await store.close()


async def test_a_tool_call_whose_argument_is_a_huge_integer_keeps_its_event(
    tmp_path: Path,
) -> None:
    """Found: a custom model's tool call whose argument was an integer of 5,000 digits ran,
    but its ``tool.call`` event was written to the store's log as JSON no reader takes back
    and was left out of every read ("does not read as an event"). The summary now names the
    integer by its size, and the event reads back."""
    store = SqliteStore(tmp_path / "s.db")
    async with Runtime(store=store) as rt:
        handle = await rt.start(Agent("a", _HugeArgs({"n": HUGE}), tools=[measure]), "go")
        assert (await handle.result()).status == "completed"
    store = SqliteStore(tmp_path / "s.db")
    await store.open()
    try:
        rows = await store.read_events(run_id=handle.run_id)
        calls = [event for _, event in rows if event.type == "tool.call"]
        assert len(calls) == 1
        assert calls[0].args_summary == {"n": "an integer of about 5,000 digits"}
    finally:
        await store.close()


# -- a checkpoint id that is no text ----------------------------------------------------------


class _Count(TypedDict):
    n: int


def _bump(state: _Count) -> dict[str, int]:
    return {"n": state["n"] + 1}


@pytest.mark.parametrize("checkpoint_id", [5, b"ck", ["ck"]], ids=["int", "bytes", "list"])
async def test_a_checkpoint_id_that_is_no_text_is_an_argument_error(
    tmp_path: Path, checkpoint_id: Any
) -> None:
    """Found: ``get_state(thread_id, 5)``, ``run(None, thread_id=..., checkpoint_id=5)``,
    ``fork(thread_id, 5)`` and ``update_state(..., checkpoint_id=5)`` on a SQLite
    checkpointer raised a bare ``AttributeError`` (``'int' object has no attribute
    'isascii'``), as did the checkpointer's own reads given such a key. Now an
    ``ArgumentError`` saying a checkpoint id is text, and the thread is as it was."""
    cp = SqliteCheckpointer(tmp_path / "c.db")
    graph = (
        StateGraph(_Count).add_node("bump", _bump).add_edge(START, "bump").compile(checkpointer=cp)
    )
    await graph.run({"n": 1}, thread_id="t1")
    before = await graph.history("t1")
    calls = [
        lambda: graph.get_state("t1", checkpoint_id),
        lambda: graph.run(None, thread_id="t1", checkpoint_id=checkpoint_id),
        lambda: graph.fork("t1", checkpoint_id),
        lambda: graph.update_state("t1", {"n": 7}, checkpoint_id=checkpoint_id),
    ]
    for call in calls:
        with pytest.raises(ArgumentError, match="checkpoint id"):
            await call()
    for read in (
        lambda: cp.get("t1", checkpoint_id),
        lambda: cp.chain("t1", "", checkpoint_id),
        lambda: cp.latest(checkpoint_id),
    ):
        with pytest.raises(ArgumentError):
            await read()
    assert await graph.history("t1") == before
    assert (await graph.get_state("t1")).values == {"n": 2}
    await cp.aclose()


# -- an OpenTelemetry attribute past 64 bits --------------------------------------------------


async def test_an_integer_past_64_bits_is_a_trace_attribute_as_text() -> None:
    """Found: the OpenTelemetry sink put an event's integers on the span as they were, and an
    OTel attribute's integer is 64-bit (the OTLP exporter fails to encode a larger one, logs
    and drops the attribute): a budget of ``2**70`` tokens was lost from the trace of its
    ``steering.*`` events. An integer outside 64 bits is now its decimal text; one within
    them stays a number."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tinyagents.events.otel import OTelSink
    from tinyagents.testkit import FunctionModel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    asked, go_on = asyncio.Event(), asyncio.Event()

    async def answer(request: Any) -> str:
        asked.set()
        await go_on.wait()
        return "done"

    async with Runtime(sinks=[OTelSink(tracer_provider=provider)]) as rt:
        handle = await rt.start(Agent("a", FunctionModel(answer)), "go")
        await asked.wait()
        await handle.update_budget(max_tokens=2**70, max_model_calls=2**63 - 1)
        go_on.set()
        assert (await handle.result()).status == "completed"
    [span] = [s for s in exporter.get_finished_spans() if s.name == "run a"]
    [requested] = [e for e in span.events if e.name == "steering.requested"]
    attributes = dict(requested.attributes or {})
    assert attributes["payload_summary.max_tokens"] == str(2**70)
    assert attributes["payload_summary.max_model_calls"] == 2**63 - 1


# -- an id that is an integer Python does not print --------------------------------------------


async def test_an_id_that_is_a_huge_integer_is_an_argument_error_naming_its_size(
    tmp_path: Path,
) -> None:
    """Found: ``rt.forget(10**5000)``, ``graph.get_state(10**5000)`` and a store's lookups
    given such an id raised a bare ``ValueError`` while quoting it in their
    ``ArgumentError`` (``InvalidIdError`` for a thread id) (its ``repr`` raised past 4,300 digits). The error names its size."""
    cp = SqliteCheckpointer(tmp_path / "c.db")
    graph = (
        StateGraph(_Count).add_node("bump", _bump).add_edge(START, "bump").compile(checkpointer=cp)
    )
    store = SqliteStore(tmp_path / "s.db")
    async with Runtime(store=store) as rt:
        with pytest.raises(ArgumentError, match="an integer of about 5,000 digits"):
            rt.forget(HUGE)
        with pytest.raises(InvalidIdError, match="an integer of about 5,000 digits"):
            await graph.get_state(HUGE)
        with pytest.raises(ArgumentError, match="an integer of about 5,000 digits"):
            await store.load_run(HUGE)
    await cp.aclose()


def test_an_id_that_is_a_list_holding_a_huge_integer_is_an_invalid_id_naming_its_type() -> None:
    """Found at review: a value whose ``repr`` raises for another reason than being a huge
    integer itself (a list holding one) still raised a bare ``ValueError`` from the quote."""
    with pytest.raises(InvalidIdError, match="a list that cannot be printed"):
        check_id([HUGE], "run_id")
    with pytest.raises(InvalidIdError, match="a negative integer of about 5,000 digits"):
        check_id(-HUGE, "run_id")
