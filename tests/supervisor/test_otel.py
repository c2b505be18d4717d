"""OpenTelemetry: the bus's events as counters and spans (SDK in-memory exporter and reader)."""

from __future__ import annotations

import os
from typing import Any

import pytest

if os.environ.get("CI") != "true":  # in CI the SDK (dev extra) must be there: never skipped
    pytest.importorskip("opentelemetry.sdk", reason="the OTel SDK comes with `make install`")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tinyagents import Agent, RunStatus, Runtime, SubAgent, SubAgentTool, SupervisorSpec, tool
from tinyagents.events import RunEvent
from tinyagents.events.otel import OTelSink
from tinyagents.testkit import ScriptedModel, reply, tool_call


@tool
def search() -> str:
    """Search."""
    return "nothing"


def counters(reader: InMemoryMetricReader) -> dict[tuple[str, tuple[Any, ...]], int]:
    out: dict[tuple[str, tuple[Any, ...]], int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, tuple(sorted(point.attributes.items())))
                    out[key] = int(point.value)
    return out


async def test_counters_and_spans_of_a_supervised_run() -> None:
    reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OTelSink(
        meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=tracer_provider
    )
    spec = SupervisorSpec(rules=[{"when": "tool_repeated", "count": 2}], on_violation="abort")
    child = Agent("child", ScriptedModel([tool_call("search")] * 3), tools=[search])
    parent = Agent(
        "parent",
        ScriptedModel([tool_call("child", input="look"), reply("done")]),
        tools=[SubAgentTool(SubAgent(child, description="looks"))],
    )
    async with Runtime(supervisor=spec, sinks=[sink]) as rt:
        result = await (await rt.start(parent, "go")).result()
    assert result.status is RunStatus.COMPLETED  # the child was aborted, the parent went on

    got = counters(reader)
    assert got[("tinyagents.agent.iterations", ())] == 4  # child 2, parent 2
    assert got[("tinyagents.agent.tool_calls", ())] == 3  # parent 1, child 2
    assert got[("tinyagents.agent.aborts", ())] == 1
    assert (
        got[
            (
                "tinyagents.agent.supervisor_actions",
                (("action", "abort"), ("source", "tool_repeated")),
            )
        ]
        == 1
    )
    steering = {k[1]: v for k, v in got.items() if k[0] == "tinyagents.steering.commands"}
    assert steering[(("actor", "middleware"), ("kind", "cancel"), ("status", "applied"))] == 1

    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"run parent", "run child", "model call", "tool search", "tool child"} <= set(spans)
    run_child, run_parent = spans["run child"], spans["run parent"]
    assert run_child.parent is not None
    assert run_child.parent.span_id == run_parent.context.span_id
    assert run_child.attributes["tinyagents.status"] == "aborted"
    assert (
        run_child.attributes["tinyagents.root_run_id"] == run_parent.attributes["tinyagents.run_id"]
    )
    assert sink._runs == {} and sink._calls == {}  # nothing left open


def test_without_a_provider_the_sink_is_a_no_op() -> None:
    OTelSink()(RunEvent(type="run.started", run_id="r-1", root_run_id="r-1"))


def _strings(value: Any) -> list[str]:
    """Every string in ``value`` (an attribute mapping, a sequence, a string)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) or hasattr(value, "items"):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings(item)]
    return []


def test_lone_surrogates_are_escaped_in_spans_span_events_and_metrics() -> None:
    """Text from a model or a tool may hold half a UTF-16 pair: it reached span names,
    attributes (keys too), span events, statuses and counter attributes as it was, and an OTLP
    exporter (protobuf, UTF-8) refuses to encode it, dropping the whole batch. Each is its
    ``\\uXXXX`` escape, as in ``Event.to_json``: readable, and nothing lost."""
    from tinyagents.events import ModelEvent, SupervisorEvent, ToolEvent

    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    sink = OTelSink(tracer_provider=tracer, meter_provider=MeterProvider([reader]))
    tree = {"run_id": "r-1", "root_run_id": "r-1"}
    half = "\ud800"
    for event in [
        RunEvent(type="run.started", agent_id=f"agent{half}", kind=f"agent{half}", **tree),
        RunEvent(type="run.status", status=f"s{half}", detail={f"k{half}": [f"v{half}"]}, **tree),
        ModelEvent(type="model.request", request_id="m-1", model=f"m{half}", **tree),
        ModelEvent(
            type="model.error", request_id="m-1", error=f"e{half}", usage={f"u{half}": 1}, **tree
        ),
        ToolEvent(type="tool.call", tool_call_id="t-1", name=f"search{half}", **tree),
        ToolEvent(type="tool.result", tool_call_id="t-1", name=f"search{half}", **tree),
        SupervisorEvent(
            type="supervisor.action", action=f"a{half}", data={"source": f"x{half}"}, **tree
        ),
        RunEvent(type="run.failed", status=f"failed{half}", error=f"boom{half}", **tree),
    ]:
        sink(event)
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "model call",
        "run agent\\ud800",
        "tool search\\ud800",
    ]
    texts: list[str] = []
    for span in spans:
        texts += [span.name, *_strings(span.attributes), span.status.description or ""]
        for event in span.events:
            texts += [event.name, *_strings(event.attributes)]
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    texts += _strings(point.attributes)
    for text in texts:
        text.encode("utf-8")  # as an OTLP exporter's protobuf encodes it
    run = next(s for s in spans if s.name.startswith("run "))
    assert run.attributes is not None and run.attributes["tinyagents.error"] == "boom\\ud800"
    assert run.status.description == "boom\\ud800"
    [status] = [e for e in run.events if e.name == "run.status"]
    assert status.attributes is not None
    assert status.attributes["status"] == "s\\ud800"
    assert status.attributes["detail.k\\ud800"] == ("v\\ud800",)
    model = next(s for s in spans if s.name == "model call")
    assert model.attributes is not None
    assert model.attributes["gen_ai.request.model"] == "m\\ud800"
    assert model.attributes["tinyagents.usage.u\\ud800"] == 1
    assert ("a\\ud800", "x\\ud800") in {
        (p["action"], p["source"]) for p in [dict(k[1]) for k in counters(reader)] if "action" in p
    }
