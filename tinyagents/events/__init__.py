"""Events: what happened in a run, as typed records, fanned out by a bus to sinks and readers.

    from tinyagents.events import EventBus, MemorySink, SteeringEvent

    bus, sink = EventBus(), MemorySink()
    bus.add_sink(sink)                        # sinks are plain callables: (event) -> None
    subscription = bus.subscribe(maxsize=1_000)  # a bounded queue per reader
    steering = [e for e in sink.events if isinstance(e, SteeringEvent)]

Records are discriminated by ``type`` (``run.*``, ``model.*``, ``tool.*``, ``subagent.*``,
``steering.*``, ``graph.*``, ``limit.*``, ``supervisor.*``); ``EVENT_ADAPTER`` /
``parse_event`` read them back from JSON. ``summarize`` and ``mask`` are the redaction that
``payload_summary`` fields go through.
"""

from tinyagents.events.bus import EventBus, EventFilter, Sink, Subscription
from tinyagents.events.models import (
    EVENT_ADAPTER,
    EVENT_CLASSES,
    STEERING_EVENT_TYPES,
    AnyEvent,
    Event,
    GraphEvent,
    LimitEvent,
    ModelDeltaEvent,
    ModelEvent,
    RunEvent,
    SteeringEvent,
    SteeringEventType,
    SubAgentEvent,
    SupervisorEvent,
    ToolEvent,
    parse_event,
)
from tinyagents.events.redact import MASK, mask, summarize
from tinyagents.events.sinks import MemorySink, StructlogSink

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_CLASSES",
    "MASK",
    "STEERING_EVENT_TYPES",
    "AnyEvent",
    "Event",
    "EventBus",
    "EventFilter",
    "GraphEvent",
    "LimitEvent",
    "MemorySink",
    "ModelDeltaEvent",
    "ModelEvent",
    "RunEvent",
    "Sink",
    "SteeringEvent",
    "SteeringEventType",
    "StructlogSink",
    "SubAgentEvent",
    "Subscription",
    "SupervisorEvent",
    "ToolEvent",
    "mask",
    "parse_event",
    "summarize",
]
