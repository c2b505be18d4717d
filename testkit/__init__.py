"""Fakes for testing agents and steering without a network, a real clock or random ids.

``import tinyagents`` never loads the testkit; importing it loads aiohttp (~0.1 s, installed
with litellm) for ``OpenAICompatServer``.
"""

from __future__ import annotations

from .clock import FakeClock, SequentialIds, use_clock, use_ids
from .fake_agent import BoundaryProbe, EventWaiter, Gate, fake_agent
from .models import (
    FunctionModel,
    ScriptedModel,
    ScriptExhaustedError,
    count_tokens,
    reply,
    tool_call,
    tool_calls,
)
from .openai_server import ErrorReply, Fault, OpenAICompatServer
from .recorder import EventRecorder

__all__ = [
    "BoundaryProbe",
    "ErrorReply",
    "EventRecorder",
    "EventWaiter",
    "FakeClock",
    "Fault",
    "FunctionModel",
    "Gate",
    "OpenAICompatServer",
    "ScriptExhaustedError",
    "ScriptedModel",
    "SequentialIds",
    "count_tokens",
    "fake_agent",
    "reply",
    "tool_call",
    "tool_calls",
    "use_clock",
    "use_ids",
]
