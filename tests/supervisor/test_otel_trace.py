"""The structlog sink and OpenTelemetry are two views of the same events: every steering and
supervisor event of a run is an event on the run's span with the fields its log line has;
a failed run's span says why; a runtime can find the sink to add by itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, TypedDict

import pytest

if os.environ.get("CI") != "true":  # in CI the SDK (dev extra) must be there: never skipped
    pytest.importorskip("opentelemetry.sdk", reason="the OTel SDK comes with `make install`")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tinyagents import Agent, RunStatus, Runtime, SteeringDelivery, SupervisorSpec, tool
from tinyagents.events import ModelEvent, RunEvent, StructlogSink
from tinyagents.events.otel import OTelSink
from tinyagents.graph import END, START, AgentNode, StateGraph
from tinyagents.testkit import EventRecorder, FunctionModel, ScriptedModel, reply, tool_call


@tool
def search(query: str) -> str:
    """Search."""
    return "nothing"


def traced() -> tuple[OTelSink, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OTelSink(tracer_provider=provider), exporter


def run_span(exporter: InMemorySpanExporter, agent: str) -> ReadableSpan:
    [span] = [s for s in exporter.get_finished_spans() if s.name == f"run {agent}"]
    return span


async def test_supervisor_and_steering_events_are_in_the_runs_trace_as_they_are_logged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sink, exporter = traced()
    spec = SupervisorSpec(
        rules=[{"when": "tool_repeated", "tool": "search", "count": 2}], on_violation="abort"
    )
    model = ScriptedModel([tool_call("search", query="q")] * 4 + [reply("done")])
    async with Runtime(supervisor=spec, sinks=[sink, StructlogSink(json=True)]) as rt:
        handle = await rt.start(Agent("looper", model, tools=[search]), "go")
        result = await handle.result()
    assert result.status is RunStatus.ABORTED

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    logged = [
        line
        for line in lines
        if line.get("run_id") == handle.run_id
        and line["event"].startswith(("supervisor.", "steering."))
    ]
    span = run_span(exporter, "looper")
    in_trace = {e.attributes["offset"]: e for e in span.events if "offset" in e.attributes}
    # The same records: every logged line is an event of the span, same name, same fields.
    assert [line["event"] for line in logged][:3] == [
        "supervisor.rule_fired",
        "supervisor.action",
        "steering.requested",
    ]
    assert "steering.applied" in [line["event"] for line in logged]
    for line in logged:
        event = in_trace[line["offset"]]
        assert event.name == line["event"]
        assert event.attributes["at"] == line["at"]
        for key, value in line.get("data", {}).items():
            assert event.attributes[f"data.{key}"] == value
    action = next(e for e in span.events if e.name == "supervisor.action")
    assert action.attributes["data.source"] == "tool_repeated"
    assert action.attributes["data.reason"] == result.error
    applied = next(e for e in span.events if e.name == "steering.applied")
    assert applied.attributes["kind"] == "cancel"
    assert applied.attributes["actor.name"] == "supervisor"
    assert "model.delta" not in {e.name for e in span.events}


async def test_a_judge_that_cannot_start_is_in_the_runs_trace_after_its_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the judge is made when the run is registered, before its run.started: its
    # supervisor.judge_error and the abort it led to (supervisor.action, steering.requested,
    # steering.accepted) came before the run's start, so the run's span, opened by
    # run.started, never had them: the trace said the run was aborted, not why
    monkeypatch.delenv("NO_SUCH_JUDGE_KEY", raising=False)
    sink, exporter = traced()
    recorder = EventRecorder()
    spec = SupervisorSpec(
        model="openai/judge", api_key_env="NO_SUCH_JUDGE_KEY", on_judge_error="abort"
    )
    async with Runtime(supervisor=spec, sinks=[sink, recorder]) as rt:
        handle = await rt.start(Agent("unjudged", ScriptedModel([reply("done")])), "go")
        result = await handle.result()

    assert result.status is RunStatus.ABORTED
    assert result.error == "judge unavailable (MissingAPIKeyError)"
    types = [e.type for e in recorder.events if e.run_id == handle.run_id]
    assert types[0] == "run.started"
    assert types.index("supervisor.judge_error") < types.index("supervisor.action")
    names = [e.name for e in run_span(exporter, "unjudged").events]
    for name in ("supervisor.judge_error", "supervisor.action", "steering.accepted"):
        assert name in names


async def test_a_failed_runs_span_has_an_error_status_with_the_error() -> None:
    sink, exporter = traced()

    async def broken(request: Any) -> str:
        raise ValueError("the model is broken")

    async with Runtime(sinks=[sink]) as rt:
        result = await (await rt.start(Agent("fragile", FunctionModel(broken)), "go")).result()

    span = run_span(exporter, "fragile")
    assert result.status is RunStatus.FAILED
    assert span.status.status_code is StatusCode.ERROR
    assert "the model is broken" in (span.status.description or "")
    assert span.attributes["tinyagents.error"] == result.error


async def test_a_model_call_that_raises_is_a_model_error_event_and_an_error_span() -> None:
    sink, exporter = traced()
    recorder = EventRecorder()

    async def broken(request: Any) -> str:
        raise ValueError("the model is broken")

    async with Runtime(sinks=[sink, recorder]) as rt:
        handle = await rt.start(Agent("fragile", FunctionModel(broken)), "go")
        result = await handle.result()

    assert result.status is RunStatus.FAILED
    [request] = recorder.of_type("model.request")
    [error] = recorder.of_type("model.error")
    assert isinstance(error, ModelEvent) and isinstance(request, ModelEvent)
    assert error.request_id == request.request_id and error.run_id == handle.run_id
    assert "ValueError" in (error.error or "") and "the model is broken" in (error.error or "")
    types = recorder.types()
    assert types.index("model.error") < types.index("run.failed")
    [call] = [s for s in exporter.get_finished_spans() if s.name == "model call"]
    assert call.status.status_code is StatusCode.ERROR
    assert "the model is broken" in (call.status.description or "")
    assert (
        call.parent is not None
        and call.parent.span_id == run_span(exporter, "fragile").context.span_id
    )


class Count(TypedDict):
    x: int


def _step(state: Count) -> dict[str, int]:
    if state["x"] < 0:
        raise ValueError("no negative counts")
    return {"x": state["x"] + 1}


async def test_a_graph_run_is_one_run_span() -> None:
    sink, exporter = traced()
    recorder = EventRecorder()
    graph = StateGraph(Count).add_node("a", _step).add_edge(START, "a").add_edge("a", END)
    compiled = graph.compile()
    async with Runtime(sinks=[sink, recorder]) as rt:
        await compiled.run({"x": 1}, thread_id="t1", runtime=rt)
        handle = await rt.start_graph(compiled, {"x": 1}, thread_id="t2")
        await handle.result()
        failed = await compiled.run({"x": -1}, thread_id="t3", runtime=rt)

    assert failed.status == "failed"
    run_ids = list(dict.fromkeys(e.run_id for e in recorder.of_type("graph.started")))
    assert len(run_ids) == 3
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("run ")]
    assert sorted(s.attributes["tinyagents.run_id"] for s in spans) == sorted(run_ids)
    for span in spans:
        assert span.attributes["tinyagents.kind"] == "graph"
        assert span.parent is None
        assert "graph.task_started" in {e.name for e in span.events}
    [bad] = [s for s in spans if s.attributes["tinyagents.run_id"] == run_ids[2]]
    assert bad.status.status_code is StatusCode.ERROR
    assert "no negative counts" in (bad.status.description or "")
    assert [s.status.status_code for s in spans].count(StatusCode.ERROR) == 1


class Doc(TypedDict, total=False):
    topic: str
    draft: str


async def test_an_agent_nodes_run_span_is_a_child_of_its_graph_runs_span() -> None:
    # The agent's parent run is the graph task's entry, which has no span of its own.
    sink, exporter = traced()
    writer = AgentNode(Agent("writer", ScriptedModel(["a draft"])), input="topic", output="draft")
    graph = StateGraph(Doc).add_node("w", writer).add_edge(START, "w").add_edge("w", END)
    async with Runtime(sinks=[sink]) as rt:
        result = await graph.compile().run({"topic": "cats"}, thread_id="t1", runtime=rt)

    assert result.status == "completed"
    spans = exporter.get_finished_spans()
    [graph_span] = [s for s in spans if s.attributes.get("tinyagents.kind") == "graph"]
    agent_span = run_span(exporter, "writer")
    assert agent_span.parent is not None
    assert agent_span.parent.span_id == graph_span.context.span_id
    assert agent_span.context.trace_id == graph_span.context.trace_id


async def test_another_turn_of_a_completed_run_is_traced_as_the_same_agent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sink, exporter = traced()
    recorder = EventRecorder()
    model = ScriptedModel([reply("first answer"), reply("second answer")])
    async with Runtime(sinks=[sink, recorder, StructlogSink(json=True)]) as rt:
        handle = await rt.start(Agent("worker", model), "go")
        await handle.result()
        receipt = await handle.steer("and refunds", delivery=SteeringDelivery.END_OF_TURN)
        result = await handle.result()
    assert receipt.accepted and result.output == "second answer"

    [resumed] = recorder.of_type("run.resumed")
    assert isinstance(resumed, RunEvent)
    assert (resumed.agent_id, resumed.kind) == ("worker", "agent")
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    [logged] = [line for line in lines if line["event"] == "run.resumed"]
    assert logged["agent_id"] == "worker"
    # Each turn is a run span of the agent, and the second turn's model call is inside it.
    turns = [s for s in exporter.get_finished_spans() if s.name == "run worker"]
    assert [s.attributes["tinyagents.run_id"] for s in turns] == [handle.run_id] * 2
    calls = [s for s in exporter.get_finished_spans() if s.name == "model call"]
    assert [c.parent.span_id for c in calls if c.parent is not None] == [
        t.context.span_id for t in turns
    ]


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_default_sink_is_none_and_imports_nothing_without_a_provider() -> None:
    code = (
        "import sys\n"
        "from tinyagents.events.otel import default_sink\n"
        "print(default_sink(), 'opentelemetry' in sys.modules)\n"
    )
    assert _python(code) == "None False"
    code = (
        "import opentelemetry.trace\n"
        "from tinyagents.events.otel import default_sink\n"
        "print(default_sink())\n"
    )
    assert _python(code) == "None"  # imported, but no SDK provider set: nothing to feed


def test_default_sink_feeds_the_global_sdk_provider() -> None:
    code = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from tinyagents.events import RunEvent\n"
        "from tinyagents.events.otel import OTelSink, default_sink\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "sink = default_sink()\n"
        "assert isinstance(sink, OTelSink)\n"
        "sink(RunEvent(type='run.started', run_id='r-1', root_run_id='r-1', agent_id='a'))\n"
        "sink(RunEvent(type='run.completed', run_id='r-1', root_run_id='r-1', status='completed'))\n"
        "print([s.name for s in exporter.get_finished_spans()])\n"
    )
    assert _python(code) == "['run a']"


@pytest.mark.parametrize("deltas", [False, True])
async def test_the_log_leaves_out_token_deltas_as_the_trace_does(
    deltas: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    sink, exporter = traced()
    model = ScriptedModel([reply("one two three")], stream=True)
    async with Runtime(sinks=[sink, StructlogSink(json=True, deltas=deltas)]) as rt:
        await (await rt.start(Agent("talker", model), "go")).result()

    logged = [json.loads(line)["event"] for line in capsys.readouterr().out.splitlines()]
    assert "model.response" in logged
    assert logged.count("model.delta") == (3 if deltas else 0)
    span = run_span(exporter, "talker")
    assert "model.delta" not in {e.name for e in span.events}


def test_a_runtime_feeds_the_programs_sdk_provider_without_being_told() -> None:
    """A program that set an SDK tracer provider gets a span per run from every ``Runtime``
    (and from ``agent.run_sync``'s private one) without passing a sink; a sink it passes
    itself is not doubled."""
    code = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "import asyncio\n"
        "from tinyagents import Agent, Runtime\n"
        "from tinyagents.events.otel import OTelSink\n"
        "from tinyagents.testkit import ScriptedModel, reply\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "async def main():\n"
        "    async with Runtime() as rt:\n"
        "        await (await rt.start(Agent('auto', ScriptedModel(['ok'])), 'go')).result()\n"
        "    async with Runtime(sinks=[OTelSink()]) as rt:\n"
        "        await (await rt.start(Agent('given', ScriptedModel(['ok'])), 'go')).result()\n"
        "asyncio.run(main())\n"
        "Agent('private', ScriptedModel(['ok'])).run_sync('go')\n"
        "print(sorted(s.name for s in exporter.get_finished_spans() if s.name.startswith('run ')))\n"
    )
    assert _python(code) == "['run auto', 'run given', 'run private']"
