"""Fakes for testing agents and steering without a network, a real clock or random ids.

``OpenAICompatServer`` is imported on first use, so importing the testkit does not load
aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from .recorder import EventRecorder

if TYPE_CHECKING:
    from .openai_server import ErrorReply, Fault, OpenAICompatServer

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

_LAZY = {"OpenAICompatServer", "ErrorReply", "Fault"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import openai_server

        return getattr(openai_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
