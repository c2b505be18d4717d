"""What an agent loop says to a model and what it hears back.

Plain slotted dataclasses, no pydantic: these are built and read on every model call, and a
loop of a thousand turns should not pay for validation it does not need. ``Model`` is the
extension point (an ABC): implement ``request`` and, if the provider streams, ``stream``.
"""

from __future__ import annotations

import asyncio
import json
import math
import reprlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import field
from typing import Any, Literal

from tinyagents._clock import new_id
from tinyagents._record import Record, record

Role = Literal["system", "user", "assistant", "tool"]


@record(slots=True, kw_only=True, eq=False, repr=False)
class ToolCall(Record):
    """One call of a tool requested by the model.

    ``parse_error`` is set (and ``args`` is empty) when the provider sent arguments that are
    not a JSON object; executing the call then reports that error back to the model. A
    custom model may hand over ``args`` as the provider's JSON text, or ``None`` for none (as
    pydantic-ai's ``ToolCallPart`` takes them): the agent loop reads it with ``parse_arguments``. ``id``
    pairs the call with its result: the agent loop gives a call with an empty id, or one an
    earlier call of the conversation has, a new one.
    """

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    parse_error: str | None = None


def parse_arguments(call_id: str, name: str, arguments: str | None) -> ToolCall:
    """The call whose arguments a provider sent as ``arguments``, JSON text: ``args`` is the
    object it holds (``{}`` for none), or ``parse_error`` says why it holds none."""
    text = (arguments or "").strip()
    if not text:  # some providers send "" for a call without arguments
        return ToolCall(id=call_id, name=name, args={})
    try:
        args = json.loads(text, parse_constant=_no_constant)
    except _NotJSON as exc:
        # Python's reader takes them, JSON has none: the tool ran with nan, and the call went
        # back to the provider as "NaN", which strict servers refuse
        return ToolCall(
            id=call_id,
            name=name,
            parse_error=f"arguments are not valid JSON ({exc} is not JSON: give a number or "
            f"null): {_quoted(text)}",
        )
    except json.JSONDecodeError as exc:
        # the text is quoted in the error: the conversation carries the call with {} (strict
        # servers refuse arguments that are not JSON), so the model sees what it sent here
        return ToolCall(
            id=call_id,
            name=name,
            parse_error=f"arguments are not valid JSON ({exc}): {_quoted(text)}",
        )
    except ValueError:
        # no JSONDecodeError: a number of more digits than Python reads (4,300), which failed
        # the run; the model wrote it, so it is the model's to correct
        return ToolCall(
            id=call_id,
            name=name,
            parse_error="arguments hold a number of more digits than JSON readers take "
            f"(give it as text): {_quoted(text)}",
        )
    except RecursionError:
        # no JSONDecodeError: nested deeper than the reader goes (a model looping on "["),
        # which failed the run; it is the model's to correct, like any unreadable arguments
        return ToolCall(
            id=call_id,
            name=name,
            parse_error=f"arguments are nested too deep to read: {_quoted(text)}",
        )
    if not isinstance(args, dict):
        return ToolCall(
            id=call_id,
            name=name,
            parse_error=f"arguments must be a JSON object, got {type(args).__name__}",
        )
    return ToolCall(id=call_id, name=name, args=args)


class _NotJSON(ValueError):
    """A constant (``NaN``, ``Infinity``, ``-Infinity``) in arguments read as JSON."""


def _no_constant(constant: str) -> Any:
    raise _NotJSON(constant)


#: How much of a tool call's unreadable arguments its error result quotes.
_QUOTED_ARGUMENTS = 500


def _quoted(text: str) -> str:
    if len(text) > _QUOTED_ARGUMENTS:
        return (
            repr(text[:_QUOTED_ARGUMENTS])
            + f" (and {len(text) - _QUOTED_ARGUMENTS} more characters)"
        )
    return repr(text)


@record(slots=True, kw_only=True, eq=False, repr=False)
class Message(Record):
    """One entry of a conversation, in the provider-neutral shape of the OpenAI chat format.

    ``thinking`` is what a reasoning model thought before this answer (an assistant
    message's, from its ``ModelResponse``): kept in the transcript for a reader, and not sent
    back to the model (``LiteLLMModel`` sends ``content`` and tool calls only).
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    thinking: str = ""


@record(slots=True, kw_only=True, eq=False, repr=False)
class Usage(Record):
    """Tokens (and, when the provider's price is known, cost in USD) spent by model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        # An unknown cost stays unknown only if every part is unknown: a partial sum is more
        # useful to a budget than None.
        if self.cost is None and other.cost is None:
            cost = None
        else:
            cost = (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost=cost,
        )


def known_cost(cost: object) -> float | None:
    """``cost`` as a price in USD, or ``None`` (unknown) when it is no finite number >= 0: a
    provider's NaN, infinity or negative cost, added up, made the run's cost NaN for good."""
    if isinstance(cost, bool) or not isinstance(cost, (int, float)):
        return None
    return float(cost) if math.isfinite(cost) and cost >= 0 else None


@record(slots=True, kw_only=True, eq=False, repr=False)
class ToolSpec(Record):
    """A tool as offered to the model: its name, description and JSON Schema of arguments;
    ``strict`` (OpenAI's flag, from ``ToolOutput(strict=...)``) is sent when it is not None."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool | None = None


@record(slots=True, kw_only=True, eq=False, repr=False)
class ModelRequest(Record):
    """One call to a model: the conversation so far and the tools offered on this call.

    ``model`` overrides the model's default name (``constrain_model`` steering sets it);
    ``settings`` are provider options such as ``temperature``; ``response_format`` is a JSON
    schema dict or a pydantic model class asking for structured output. ``deadline`` (event
    loop time, ``loop.time()``) is when the caller stops waiting: ``LiteLLMModel`` makes no
    retry whose wait would end past it, and raises the failure it would have retried instead
    (a caller's timeout would otherwise end the wait and hide what went wrong).
    ``stop_retrying`` is set by the caller when it no longer wants another attempt (the agent
    loop sets it when a cancel for the boundary after this call is queued): ``LiteLLMModel``
    then sends no further request, and raises the failure it would have retried, at once,
    even in the middle of a wait between attempts. A pause does not set it.
    """

    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    model: str | None = None
    request_id: str = field(default_factory=lambda: new_id("m"))
    run_id: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    response_format: dict[str, Any] | type | None = None
    deadline: float | None = None
    stop_retrying: asyncio.Event | None = field(default=None, compare=False, repr=False)


#: Why a model stopped before it answered anything (no text, no tool call), by
#: ``finish_reason``: reasons that asking it again would meet again.
CUT_OFF = {
    "content_filter": "the provider's content filter blocked the answer",
    "length": "the output token limit was reached before any output (raise max_tokens)",
}


@record(slots=True, kw_only=True, eq=False, repr=False)
class ModelResponse(Record):
    """What the model answered: text, tool calls, or both.

    ``thinking`` is a reasoning model's thinking, apart from ``text`` (which is the answer,
    and all that text or structured output is read from): a provider's ``reasoning_content``
    (or Anthropic's ``thinking_blocks``), and a ``<think>`` block the content started with
    (``tinyagents.harness.thinking``). Its tokens are in ``usage`` as the provider counted them.
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    finish_reason: str | None = None
    raw: Any = None
    thinking: str = ""

    def to_message(self) -> Message:
        """The assistant message to append to the conversation (its thinking with it)."""
        return Message(
            role="assistant",
            content=self.text,
            tool_calls=list(self.tool_calls),
            thinking=self.thinking or "",
        )


def answer_problem(response: ModelResponse) -> str | None:
    """What a field of ``response`` holds that no answer can (the field, the value, what it
    takes), or None. A ``ModelResponse`` is a plain dataclass (no validation on the hot
    path), and a custom model filling it from a provider's JSON passed on what the JSON held:
    ``text=3`` ended a run ``completed`` with the output ``3``, ``tool_calls=None`` or a
    call's ``name=None`` failed it with a ``TypeError`` that named neither the model nor the
    field, and ``output_tokens=True`` counted a token. ``text=None`` (a provider's
    ``content: null`` beside tool calls) is no text, and passes; so does a call's ``id`` of
    None (the loop gives it one)."""
    if response.text is not None and not isinstance(response.text, str):
        return _holds("text", response.text, "the answer's text ('' or None for none)")
    calls: object = response.tool_calls
    if not isinstance(calls, (list, tuple)):
        return _holds("tool_calls", calls, "a list of ToolCall ([] for none)")
    for index, call in enumerate(calls):
        where = f"tool_calls[{index}]"
        if not isinstance(call, ToolCall):
            return _holds(where, call, "a ToolCall")
        if not isinstance(call.name, str):
            return _holds(f"{where}.name", call.name, "the tool's name, text")
        if call.id is not None and not isinstance(call.id, str):
            return _holds(f"{where}.id", call.id, "text ('' or None: the loop gives it one)")
    usage: object = response.usage
    if not isinstance(usage, Usage):
        return _holds("usage", usage, "a Usage (Usage() when the provider said nothing)")
    for name in ("input_tokens", "output_tokens"):
        count = getattr(usage, name)
        if isinstance(count, bool) or not isinstance(count, int):
            return _holds(f"usage.{name}", count, "a whole number of tokens")
    if response.thinking is not None and not isinstance(response.thinking, str):
        return _holds("thinking", response.thinking, "the model's thinking ('' for none)")
    for name in ("model", "finish_reason"):
        value = getattr(response, name)
        if value is not None and not isinstance(value, str):
            return _holds(name, value, "text or None")
    return None


def _holds(field: str, value: object, takes: str) -> str:
    shown = "None" if value is None else f"{type(value).__name__} {reprlib.repr(value)}"
    return f"its {field} holds {shown}, and takes {takes}"


@record(slots=True, kw_only=True, eq=False, repr=False)
class StreamChunk(Record):
    """A piece of a streamed response; the last chunk carries the complete ``response``.

    A piece of a tool call names it by ``tool_call_index`` (its position in the response); the
    first piece of a call also carries its ``tool_call_id`` and ``tool_name``, and the
    ``args_delta``s of one call, joined, are its arguments as JSON text (the way OpenAI streams
    them).

    ``usage`` is what the response has used so far, for a provider that reports it while it
    streams (the prompt's tokens on the first chunk, say): the agent loop stops the stream on
    the chunk that takes the run past a token budget, before that chunk is published.

    ``thinking_delta`` is a piece of a reasoning model's thinking (never in ``text_delta``).
    """

    text_delta: str = ""
    thinking_delta: str = ""
    tool_call_index: int | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    args_delta: str = ""
    usage: Usage | None = None
    response: ModelResponse | None = None


class Model(ABC):
    """A chat model. Subclasses implement ``request``; ``stream`` is optional."""

    name: str = "model"
    #: The agent loop asks ``stream`` instead of ``request`` and publishes each piece as a
    #: ``model.delta`` event (a UI shows the tokens as they arrive); steering still lands at
    #: the same boundaries, the complete response is what the run goes on with.
    #: ``LiteLLMModel`` streams unless made with ``stream=False``.
    streams: bool = False

    def forced_tool(self) -> str | None:
        """The tool this model forces every request offering it to call (``LiteLLMModel``'s
        ``tool_choice``), or None. A request that does not offer it is sent without the
        forcing; the agent loop says so in its ``model.request`` event
        (``tool_choice_dropped``)."""
        return None

    @abstractmethod
    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request and return the complete response."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Yield text deltas as they arrive; the last chunk carries the full response.

        The default does not stream: it yields one chunk holding the whole response.
        """
        response = await self.request(request)
        yield StreamChunk(
            text_delta=response.text, thinking_delta=response.thinking or "", response=response
        )
