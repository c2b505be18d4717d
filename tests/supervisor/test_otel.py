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
