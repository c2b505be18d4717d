"""Fake models for deterministic tests: a script of responses, or a function.

    model = ScriptedModel([tool_call("search", query="billing"), reply("found it")])
    ...
    assert model.requests[1].messages[-1].role == "tool"

Responses without usage get a deterministic count, one token per whitespace-separated word
(``count_tokens``), so token limits can be tested without a tokenizer.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import re
import reprlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, overload

from tinyagents._clock import new_id
from tinyagents.errors import ConfigurationError, ModelError
from tinyagents.harness.model import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    ToolCall,
    Usage,
    answer_problem,
)

ScriptedResponse = ModelResponse | str | Callable[[ModelRequest], ModelResponse | str]
ModelFunction = Callable[[ModelRequest], Awaitable[ModelResponse | str] | ModelResponse | str]


class ScriptExhaustedError(ModelError):
    """A ``ScriptedModel`` was called more often than it has responses."""


class ModelFunctionError(ConfigurationError, TypeError):
    """A ``FunctionModel``'s function (or a ``ScriptedModel``'s callable response) returned
    something that is no response: the message names the function, the request, what it
    returned and what it should. A ``TypeError`` too, as it was."""


def reply(text: str, *, usage: Usage | None = None) -> ModelResponse:
    """A final answer: text and no tool calls."""
    if not isinstance(text, str):  # it failed the run it was scripted into, far from here
        raise ConfigurationError(
            f"reply() takes the answer's text, a str; got {_shown(text)} (a tool call is "
            "tool_call(...), an answer without text reply(''))"
        )
    return ModelResponse(text=text, usage=usage or Usage(), finish_reason="stop")


def tool_call(
    name: str, args: dict[str, Any] | None = None, /, *, id: str | None = None, **kw: Any
) -> ModelResponse:
    """A response calling one tool; keyword arguments are merged into ``args``.

    ``name`` and ``args`` are positional-only, so a tool argument may be called ``name``:
    ``tool_call("spawn_subagent", name="critic", input="...")``. ``id`` is the call's id
    (default: a new ``call`` id, deterministic under ``use_ids(SequentialIds())``); a tool
    argument called ``id`` goes in ``args``: ``tool_call("lookup", {"id": "42"})``.
    """
    if not isinstance(name, str):
        raise ConfigurationError(
            f"tool_call's name is the tool's name, a str; got {_shown(name)} (a call with "
            "another name, to test how a run refuses it, is a ToolCall you build yourself)"
        )
    if args is not None and not isinstance(args, Mapping):
        raise ConfigurationError(
            f"tool_call({name!r}, ...): args is a dict of the tool's arguments, got "
            f"{type(args).__name__} {args!r}; for a call whose arguments are no object (to test "
            "how a run refuses one) build ToolCall(id=..., name=..., args=...) yourself"
        )
    twice = sorted(set(args or ()) & set(kw))
    if twice:  # the keyword one won, and the dict's value was dropped without a word
        raise ConfigurationError(
            f"tool_call({name!r}, ...): argument {twice[0]!r} is given twice, in args and as "
            "a keyword: give it once"
        )
    call = ToolCall(id=id or new_id("call"), name=name, args={**(args or {}), **kw})
    return ModelResponse(tool_calls=[call], finish_reason="tool_calls")


def tool_calls(*calls: ModelResponse | ToolCall) -> ModelResponse:
    """A response calling several tools at once: ``tool_calls(tool_call("a"), tool_call("b"))``."""
    merged: list[ToolCall] = []
    for call in calls:
        merged.extend(call.tool_calls if isinstance(call, ModelResponse) else [call])
    return ModelResponse(tool_calls=merged, finish_reason="tool_calls")


def count_tokens(text: str) -> int:
    """The testkit's stand-in for a tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def default_usage(request: ModelRequest, response: ModelResponse) -> Usage:
    """Input: the words of every message; output: the words of the text and tool calls."""
    input_tokens = sum(_message_tokens(message) for message in request.messages)
    output_tokens = count_tokens(response.text) + sum(
        _call_tokens(call) for call in response.tool_calls
    )
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens)


class ScriptedModel(Model):
    """Answers each request with the next scripted response, and records the requests.

    A response is a ``ModelResponse`` (see ``reply``, ``tool_call``, ``tool_calls``), a plain
    string (a final reply) or a callable ``(ModelRequest) -> ModelResponse | str``. A
    response whose usage is all zero gets ``default_usage``. ``requests`` holds a snapshot of
    every request, taken when it arrived.

    With ``stream=True``, ``stream()`` hands the scripted response out in pieces, as a
    provider streams: its text word by word (``stream_text``), then each tool call (its id and
    name first, then its JSON arguments ``args_piece`` characters at a time), then the whole
    response. Without it, ``stream()`` yields the whole response as one chunk.
    """

    def __init__(
        self,
        responses: Iterable[ScriptedResponse],
        *,
        name: str = "scripted",
        stream: bool = False,
        args_piece: int = 8,
    ) -> None:
        _check_args_piece(args_piece)
        if isinstance(responses, (str, bytes)) or not isinstance(responses, Iterable):
            raise ConfigurationError(
                f"ScriptedModel takes a list of responses (ModelResponse, text or a callable), "
                f"got {type(responses).__name__}; one reply is ScriptedModel([reply(...)])"
            )
        self.name = name
        if isinstance(responses, StepScript):  # made as read: its responses are ours, valid
            self.responses: Sequence[ScriptedResponse] = responses
            self.requests: list[ModelRequest] = []
            self.streams = stream
            self.args_piece = args_piece
            return
        self.responses = list(responses)
        for index, scripted in enumerate(self.responses, start=1):
            if isinstance(scripted, ModelResponse):
                problem = answer_problem(scripted)
                if problem is not None:  # it failed its run when it came up, as an AttributeError
                    raise ConfigurationError(
                        f"ScriptedModel {name!r}: response {index} is a ModelResponse no model "
                        f"can answer: {problem}"
                    )
                _check_args_json(scripted, f"ScriptedModel {name!r}: response {index}")
            elif not isinstance(scripted, str) and not callable(scripted):
                raise ConfigurationError(
                    f"ScriptedModel {name!r}: response {index} is a {type(scripted).__name__}; "
                    "each must be a ModelResponse, a string or a callable "
                    "(ModelRequest) -> ModelResponse | str"
                )
        self.requests = []
        self.streams = stream
        self.args_piece = args_piece

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been used yet."""
        return max(0, len(self.responses) - len(self.requests))

    async def request(self, request: ModelRequest) -> ModelResponse:
        index = len(self.requests)
        self.requests.append(snapshot(request))
        if index >= len(self.responses):
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} got model request {index + 1} but only "
                f"{len(self.responses)} response(s) were scripted; add responses, or check "
                f"why the agent called the model again (last message: "
                f"{_last_message(request)})"
            )
        scripted = self.responses[index]
        if not callable(scripted):  # its arguments were checked when it was given
            return _finish(request, scripted, self.name)
        produced = await _resolve(scripted(request))
        return _finish(request, produced, self.name, index + 1, fn=scripted)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        response = await self.request(request)
        for chunk in _chunks(response, self.streams, self.args_piece):
            yield chunk


class StepScript(Sequence[ScriptedResponse]):
    """``fake_agent``'s script of many turns: a call of ``step`` (``n`` = 1 .. ``turns``) per
    turn, then ``answer``, each response made when it is first read and kept (so it keeps
    its call id), not all of them up front: ``turns=10**9`` is a billion responses no run
    reads. A ``ScriptedModel`` given one reads it as it is (it does not copy it to a list)."""

    def __init__(self, turns: int, answer: str) -> None:
        self.turns = turns
        self.answer = answer
        self._made: dict[int, ModelResponse] = {}

    def __len__(self) -> int:
        return self.turns + 1

    @overload
    def __getitem__(self, index: int) -> ModelResponse: ...
    @overload
    def __getitem__(self, index: slice) -> list[ModelResponse]: ...
    def __getitem__(self, index: int | slice) -> ModelResponse | list[ModelResponse]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        at = range(len(self))[index]  # an IndexError past either end, as a list's
        made = self._made.get(at)
        if made is None:
            made = tool_call("step", n=at + 1) if at < self.turns else reply(self.answer)
            self._made[at] = made
        return made


class FunctionModel(Model):
    """Answers each request by calling ``fn(request)`` (sync or async); records the requests.

    With ``stream=True`` it streams each answer in pieces, as ``ScriptedModel(stream=True)``
    does (pydantic-ai's ``FunctionModel(stream_function=...)`` covers the same need).
    """

    def __init__(
        self,
        fn: ModelFunction,
        *,
        name: str = "function",
        stream: bool = False,
        args_piece: int = 8,
    ) -> None:
        if not callable(fn):
            raise ConfigurationError(
                f"FunctionModel needs a callable (ModelRequest) -> ModelResponse | str, "
                f"sync or async; got a {type(fn).__name__}"
            )
        _check_args_piece(args_piece)
        self.name = name
        self.fn = fn
        self.requests: list[ModelRequest] = []
        self.streams = stream
        self.args_piece = args_piece

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(snapshot(request))
        produced = await _resolve(self.fn(request))
        return _finish(request, produced, self.name, len(self.requests), fn=self.fn)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        response = await self.request(request)
        for chunk in _chunks(response, self.streams, self.args_piece):
            yield chunk


def _chunks(response: ModelResponse, streams: bool, args_piece: int) -> list[StreamChunk]:
    """What a fake model's ``stream()`` yields: the pieces when it streams, then the whole
    response (which alone carries the text when it does not)."""
    pieces = stream_chunks(response, args_piece=args_piece) if streams else []
    return [*pieces, StreamChunk(text_delta="" if streams else response.text, response=response)]


def _check_args_piece(args_piece: int) -> None:
    whole = isinstance(args_piece, int) and not isinstance(args_piece, bool)
    if not whole or args_piece < 1:
        raise ConfigurationError(
            f"args_piece must be a whole number of at least 1 (characters of a tool call's "
            f"arguments per piece), got {args_piece!r}"
        )


def stream_text(text: str) -> list[str]:
    """``text`` in the pieces a streaming ``ScriptedModel`` sends: each word with the
    whitespace after it (leading whitespace is a piece of its own); joined, they are ``text``."""
    return _PIECES.findall(text)


_PIECES = re.compile(r"^\s+|\S+\s*")


def stream_chunks(response: ModelResponse, *, args_piece: int = 8) -> list[StreamChunk]:
    """The delta chunks of a streamed ``response`` (without the last chunk, which carries the
    response itself): its thinking and then its text word by word, then each tool call, id
    and name first."""
    chunks = [StreamChunk(thinking_delta=piece) for piece in stream_text(response.thinking)]
    chunks += [StreamChunk(text_delta=piece) for piece in stream_text(response.text)]
    for index, call in enumerate(response.tool_calls):
        chunks.append(StreamChunk(tool_call_index=index, tool_call_id=call.id, tool_name=call.name))
        # a call may carry its arguments as JSON text already, as a provider sends them
        arguments = call.args if isinstance(call.args, str) else json.dumps(call.args)
        chunks.extend(
            StreamChunk(tool_call_index=index, args_delta=arguments[start : start + args_piece])
            for start in range(0, len(arguments), args_piece)
        )
    return chunks


def snapshot(request: ModelRequest) -> ModelRequest:
    """A copy of ``request`` that later changes to the loop's message list cannot alter
    (every field kept: one left out, ``deadline``, read None in ``requests``)."""
    return dataclasses.replace(
        request,
        messages=[copy.copy(message) for message in request.messages],
        tools=list(request.tools),
        settings=dict(request.settings),
    )


async def _resolve(
    produced: Awaitable[ModelResponse | str] | ModelResponse | str,
) -> ModelResponse | str:
    return await produced if inspect.isawaitable(produced) else produced


def _finish(
    request: ModelRequest,
    produced: object,
    name: str,
    number: int | None = None,
    *,
    fn: object = None,
) -> ModelResponse:
    """The response to hand out; ``number``: which request a function (``fn``) made it for
    (its tool calls' arguments are checked then; a scripted one's were when it was given).
    Anything else it returned is a ``ModelFunctionError`` saying what, and what it should."""
    if isinstance(produced, str):
        response = reply(produced)
    elif isinstance(produced, ModelResponse):
        if number is not None:
            problem = answer_problem(produced)
            if problem is not None:  # the token count below failed on it (AttributeError)
                raise ModelFunctionError(
                    f"model {name!r} produced a ModelResponse{_by(fn, number)} no model can "
                    f"answer: {problem}"
                )
            _check_args_json(produced, f"model {name!r}: request {number}")
        # A copy: the same scripted object may be returned twice (e.g. by a callable).
        response = copy.copy(produced)
        if response.text is None:  # no text (a provider's ``content: null``), as the loop reads it
            response.text = ""
    else:
        raise ModelFunctionError(_not_a_response(produced, name, number, fn))
    if response.usage == Usage():
        response.usage = default_usage(request, response)
    if response.model is None:
        response.model = request.model or name
    return response


def _shown(value: object) -> str:
    return "None" if value is None else f"{type(value).__name__} {reprlib.repr(value)}"


def _by(fn: object, number: int | None) -> str:
    """Which function made a response, for which request (nothing for a scripted one)."""
    who = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f" (its function {who!r}, request {number})" if number is not None else ""


def _not_a_response(produced: object, name: str, number: int | None, fn: object) -> str:
    shown = _shown(produced)
    where = _by(fn, number)
    hint = "; did the function forget to return?" if produced is None else ""
    return (
        f"model {name!r} produced {shown}{where}: return a ModelResponse or a string "
        f"(reply(...), tool_call(...) or tool_calls(...) make one){hint}"
    )


def _check_args_json(response: ModelResponse, where: str) -> None:
    """Refuse tool-call arguments JSON cannot write, naming ``where`` and the tool: a model
    sends a tool JSON, and such a call failed the run at the token count ("Object of type
    object is not JSON serializable"), saying neither which response nor which tool."""
    for call in response.tool_calls:
        try:
            json.dumps(call.args)
        except (TypeError, ValueError, RecursionError) as exc:  # circular: ValueError
            raise ConfigurationError(
                f"{where} calls tool {call.name!r} with arguments JSON cannot write ({exc}); a "
                "model sends a tool JSON: give text, numbers, booleans, None, and lists and "
                "dicts of them"
            ) from None


def _message_tokens(message: Message) -> int:
    return count_tokens(message.content) + sum(_call_tokens(c) for c in message.tool_calls)


def _call_tokens(call: ToolCall) -> int:
    return 1 + count_tokens(json.dumps(call.args))


def _last_message(request: ModelRequest) -> str:
    if not request.messages:
        return "none"
    last = request.messages[-1]
    content = last.content if len(last.content) <= 80 else last.content[:77] + "..."
    return f"{last.role} {content!r}"
