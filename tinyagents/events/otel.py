"""``OTelSink``: the bus's events as OpenTelemetry metrics and spans.

    from tinyagents.events.otel import OTelSink
    async with Runtime(sinks=[OTelSink()]) as rt: ...

Counters: ``tinyagents.agent.iterations``, ``.tool_calls``, ``.aborts``, ``.budget_exceeded``,
``.supervisor_actions{action,source}``, ``.judge_failures``, and
``tinyagents.steering.commands{kind,status,actor}`` (one per lifecycle step). Spans: one per
run (a child run's span is a child of its parent run's, or of its root run's when the
parent has none, as a graph task's entry; a graph run's goes from its
``graph.started`` to its ``graph.completed``), per model call and per tool call,
with the run tree (``run_id``, ``root_run_id``, ``parent_run_id``) as attributes; a model call
that raised (``model.error``) and a failed run end with an error status. Every other
event of a run (``steering.*``, ``supervisor.*``, ``limit.*``, ``subagent.*``, ...) is a span
event on the run's span, its attributes the fields the structlog sink logs for it (masked the
same way, nested keys dotted, ``offset`` included): two views of one record. ``model.delta``
pieces are left out of the trace. A lone surrogate (half a UTF-16 pair, from a model's or a
tool's text) in a span's name, an attribute's key or value, a status or a counter's attribute
is its ``\\uXXXX`` escape, as in ``Event.to_json``: an OTLP exporter (protobuf, UTF-8) refused
the whole batch holding one.

``default_sink()`` is the sink a runtime adds by itself: one when the program has set an
OpenTelemetry SDK provider (and so imported ``opentelemetry``), else None.

Only ``opentelemetry-api`` is needed (loaded when a sink is made, never by
``import tinyagents``); without an SDK provider every instrument is a no-op. Install the SDK
with the ``otel`` extra to export.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tinyagents.events.models import (
    Event,
    GraphEvent,
    LimitEvent,
    ModelDeltaEvent,
    ModelEvent,
    RunEvent,
    SteeringEvent,
    SupervisorEvent,
    ToolEvent,
    surrogates_escaped,
)
from tinyagents.events.redact import mask
from tinyagents.protocol.state import RunStatus

#: The events that end a run's invocation: it finished, or it stopped on an interrupt.
_RUN_END = frozenset(
    f"run.{status.value}"
    for status in RunStatus
    if status.finished or status is RunStatus.INTERRUPTED
)


def _ns(event: Event) -> int:
    return int(event.at.timestamp() * 1_000_000_000)


def _text(value: str) -> str:
    """``value`` as OTLP (protobuf: UTF-8) can carry it: a lone surrogate (half a UTF-16 pair,
    from a model's or a tool's text) is its ``\\uXXXX`` escape, as in ``Event.to_json``
    (``surrogates_escaped``); an exporter refused the batch holding it."""
    return value if value.isascii() else surrogates_escaped(value)


#: The range of an OTel attribute's integer (signed 64-bit, as OTLP's ``int_value``).
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _past_int64(values: list[Any]) -> bool:
    """Whether a list of one scalar type holds an integer outside 64 bits."""
    return type(values[0]) is int and not all(_INT64_MIN <= v <= _INT64_MAX for v in values)


def _attributes(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """An event's dumped fields as OpenTelemetry attributes: scalars as they are, nested
    mappings with dotted keys, lists of scalars as sequences, anything else as JSON text
    (a lone surrogate in a key or a string: its escape, ``_text``). An integer outside 64
    bits is its decimal text: an OTel attribute's integer is 64-bit, and the OTLP exporter
    dropped a larger one (logging that it could not encode it)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{_text(str(key))}"
        if isinstance(value, dict):
            out.update(_attributes(value, f"{name}."))
        elif isinstance(value, str):
            out[name] = _text(value)
        elif isinstance(value, (bool, float)):
            out[name] = value
        elif isinstance(value, int):
            out[name] = value if _INT64_MIN <= value <= _INT64_MAX else str(value)
        elif isinstance(value, list) and all(isinstance(v, (str, bool, int, float)) for v in value):
            if value and len({type(v) for v in value}) == 1 and not _past_int64(value):
                out[name] = [_text(v) for v in value] if type(value[0]) is str else value
            elif value:
                out[name] = [_text(str(v)) for v in value]
        elif value is not None:
            out[name] = json.dumps(value, default=str)
    return out


def _sdk_provider(provider: Any) -> bool:
    return type(provider).__name__ not in {
        "ProxyTracerProvider",
        "NoOpTracerProvider",
        "_ProxyMeterProvider",
        "NoOpMeterProvider",
    }


def default_sink() -> OTelSink | None:
    """An ``OTelSink`` on the global providers if the program set an SDK tracer or meter
    provider, else None. Never imports ``opentelemetry`` itself: a program that has not
    imported it has set no provider."""
    if "opentelemetry" not in sys.modules:
        return None
    from opentelemetry import metrics, trace

    if _sdk_provider(trace.get_tracer_provider()) or _sdk_provider(metrics.get_meter_provider()):
        return OTelSink()
    return None


class OTelSink:
    """An event sink feeding OpenTelemetry (global providers unless given)."""

    def __init__(self, *, meter_provider: Any = None, tracer_provider: Any = None) -> None:
        from opentelemetry import metrics, trace

        self._trace = trace
        meter = metrics.get_meter("tinyagents", meter_provider=meter_provider)
        self._tracer = trace.get_tracer("tinyagents", tracer_provider=tracer_provider)
        self.iterations = meter.create_counter("tinyagents.agent.iterations")
        self.tool_calls = meter.create_counter("tinyagents.agent.tool_calls")
        self.aborts = meter.create_counter("tinyagents.agent.aborts")
        self.budget_exceeded = meter.create_counter("tinyagents.agent.budget_exceeded")
        self.supervisor_actions = meter.create_counter("tinyagents.agent.supervisor_actions")
        self.judge_failures = meter.create_counter("tinyagents.agent.judge_failures")
        self.steering_commands = meter.create_counter("tinyagents.steering.commands")
        #: Open spans: runs by run id, model and tool calls by (run id, call id). Each is
        #: removed when it ends, and a run's open calls when the run ends.
        self._runs: dict[str, Any] = {}
        self._calls: dict[tuple[str, str], Any] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, SteeringEvent):
            self.steering_commands.add(
                1,
                {
                    "kind": event.kind.value,
                    "status": event.type.removeprefix("steering."),
                    "actor": event.actor.type,
                },
            )
            self._span_event(event)
        elif isinstance(event, RunEvent):
            self._run(event)
        elif isinstance(event, ModelEvent):
            self._model(event)
        elif isinstance(event, ToolEvent):
            self._tool(event)
        elif isinstance(event, LimitEvent):
            if event.type == "limit.exceeded" and event.limit == "max_tokens":
                self.budget_exceeded.add(1, {"limit": event.limit})
            self._span_event(event)
        elif isinstance(event, GraphEvent):
            self._graph(event)
        elif isinstance(event, SupervisorEvent):
            if event.type == "supervisor.action":
                source = _text(str(event.data.get("source", "")))
                action = _text(event.action or "")
                self.supervisor_actions.add(1, {"action": action, "source": source})
            elif event.type == "supervisor.judge_error":
                self.judge_failures.add(1)
            self._span_event(event)
        elif not isinstance(event, ModelDeltaEvent):
            self._span_event(event)

    def _span_event(self, event: Event) -> None:
        """``event`` in its run's trace: an event on the run's span (if it is recording)."""
        span = self._runs.get(event.run_id) if event.run_id is not None else None
        if span is None or not span.is_recording():
            return
        data = mask(event.to_dict(mode="json", exclude_none=True))
        data.pop("type", None)
        span.add_event(event.type, attributes=_attributes(data), timestamp=_ns(event))

    def _tree(self, event: Event) -> dict[str, str]:
        return {
            key: _text(value)
            for key, value in (
                ("tinyagents.run_id", event.run_id),
                ("tinyagents.root_run_id", event.root_run_id),
                ("tinyagents.parent_run_id", event.parent_run_id),
            )
            if value is not None
        }

    def _start(self, name: str, event: Event, parent: Any, **attributes: Any) -> Any:
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        return self._tracer.start_span(
            _text(name),
            context=context,
            start_time=_ns(event),
            attributes={**self._tree(event), **attributes},
        )

    def _run(self, event: RunEvent) -> None:
        run_id = event.run_id
        if run_id is None:
            return
        if event.type == "run.started" or (
            event.type == "run.resumed" and "another_turn" in event.detail
        ):
            # Another turn of a completed run: its span ended with the first turn, so the turn
            # is a new span of the same agent and run.
            self._open_run(run_id, event, event.agent_id or run_id, event.kind or "agent")
            if event.type == "run.resumed":
                self._span_event(event)
        elif event.type in _RUN_END:
            if event.type == "run.aborted":
                self.aborts.add(1)
            self._close_run(run_id, event, event.status, event.error, event.type == "run.failed")
        else:  # paused, resumed, a status change: moments in the run's span
            self._span_event(event)

    def _graph(self, event: GraphEvent) -> None:
        # A graph run has no run.* events: its graph.started and graph.completed are its span.
        run_id = event.run_id
        if run_id is None:
            return
        if event.type == "graph.started":
            self._open_run(run_id, event, run_id, "graph")
        elif event.type == "graph.completed":
            status = event.data.get("status")
            error = event.data.get("error")
            self._close_run(run_id, event, status, error, status == "failed")
        else:
            self._span_event(event)

    def _open_run(self, run_id: str, event: Event, name: str, kind: str) -> None:
        if run_id in self._runs:
            return  # one span per run, however often its start is reported
        runs = self._runs
        parent = runs.get(event.parent_run_id) if event.parent_run_id else None
        if parent is None and event.parent_run_id and event.root_run_id != run_id:
            # The parent has no span (an agent node's parent is its graph task's entry, which
            # reports no start of its own): the run goes under its root's span, in its trace.
            parent = runs.get(event.root_run_id) if event.root_run_id else None
        self._runs[run_id] = self._start(
            f"run {name}", event, parent, **{"tinyagents.kind": _text(kind)}
        )

    def _close_run(self, run_id: str, event: Event, status: Any, error: Any, failed: bool) -> None:
        for key in [k for k in self._calls if k[0] == run_id]:
            self._calls.pop(key).end(end_time=_ns(event))
        span = self._runs.pop(run_id, None)
        if span is not None:
            span.set_attribute("tinyagents.status", _text(str(status or "")))
            if error:
                span.set_attribute("tinyagents.error", _text(str(error)))
            if failed:
                description = None if error is None else _text(str(error))
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))
            span.end(end_time=_ns(event))

    def _model(self, event: ModelEvent) -> None:
        if event.run_id is None:
            return
        key = (event.run_id, event.request_id)
        if event.type == "model.request":
            self._calls[key] = self._start(
                "model call",
                event,
                self._runs.get(event.run_id),
                **{"gen_ai.request.model": _text(event.model or "")},
            )
            return
        if event.type == "model.response":
            self.iterations.add(1)
        span = self._calls.pop(key, None)
        if span is not None:
            for name, value in event.usage.items():
                usage = _text(value) if isinstance(value, str) else value
                span.set_attribute(f"tinyagents.usage.{_text(str(name))}", usage)
            if event.type == "model.error":
                error = _text(event.error or "")
                span.set_attribute("tinyagents.error", error)
                span.set_status(
                    self._trace.Status(
                        self._trace.StatusCode.ERROR, None if event.error is None else error
                    )
                )
            span.end(end_time=_ns(event))

    def _tool(self, event: ToolEvent) -> None:
        if event.run_id is None:
            return
        key = (event.run_id, event.tool_call_id)
        if event.type == "tool.call":
            self.tool_calls.add(1)
            self._calls[key] = self._start(
                f"tool {event.name}", event, self._runs.get(event.run_id)
            )
            return
        span = self._calls.pop(key, None)
        if span is not None:
            span.set_attribute("tinyagents.tool.error", event.error)
            span.end(end_time=_ns(event))
