"""Fakes for testing agents and steering without a network, a real clock or random ids.

    from tinyagents.testkit import FakeClock, ScriptedModel, SequentialIds, reply, tool_call
    from tinyagents.testkit import use_clock, use_ids

    model = ScriptedModel([tool_call("search", query="billing"), reply("found it")])
    with use_clock(FakeClock()), use_ids(SequentialIds()):
        ...                         # timestamps and ids are the same on every run

- models: ``ScriptedModel`` (a list of replies), ``FunctionModel`` (a function of the
  request), ``reply`` / ``tool_call`` / ``tool_calls`` to build responses;
- time and ids: ``FakeClock``, ``EPOCH``, ``SequentialIds``, ``use_clock``, ``use_ids``;
- runs: ``fake_agent``, ``BoundaryProbe`` (hold a run at a boundary), ``Gate``,
  ``EventWaiter``, ``EventRecorder``;
- ``OpenAICompatServer``: a local OpenAI-compatible HTTP server, for driving
  ``LiteLLMModel`` end to end (``ErrorReply``, ``Fault`` and ``RawStream`` script how it
  misbehaves).

``import tinyagents`` never loads the testkit; importing it loads aiohttp (~0.1 s, installed
with litellm) for ``OpenAICompatServer``.
"""

from __future__ import annotations

from tinyagents._clock import SequentialIds, use_clock, use_ids

from .clock import EPOCH, FakeClock
from .fake_agent import (
    BoundaryProbe,
    BoundaryVisit,
    EventWaiter,
    Gate,
    Hold,
    fake_agent,
    first_request_with,
    react_boundaries,
    steering_messages,
)
from .models import (
    FunctionModel,
    ModelFunctionError,
    ScriptedModel,
    ScriptExhaustedError,
    StepScript,
    count_tokens,
    reply,
    tool_call,
    tool_calls,
)
from .openai_server import ErrorReply, Fault, OpenAICompatServer, RawStream
from .recorder import EventRecorder

__all__ = [
    "EPOCH",
    "BoundaryProbe",
    "BoundaryVisit",
    "ErrorReply",
    "EventRecorder",
    "EventWaiter",
    "FakeClock",
    "Fault",
    "FunctionModel",
    "Gate",
    "Hold",
    "ModelFunctionError",
    "OpenAICompatServer",
    "RawStream",
    "ScriptExhaustedError",
    "ScriptedModel",
    "SequentialIds",
    "StepScript",
    "count_tokens",
    "fake_agent",
    "first_request_with",
    "react_boundaries",
    "reply",
    "steering_messages",
    "tool_call",
    "tool_calls",
    "use_clock",
    "use_ids",
]
