"""How the chunks of a litellm stream become ``StreamChunk`` pieces and tool calls.

litellm's ``stream_chunk_builder`` joins tool-call fragments by their ``index`` alone and drops
a call that never got an id or a name; ``ToolCallFragments`` numbers the calls of a stream as
its chunks arrive (telling apart calls a server sent at one index) and names the nameless,
so the pieces handed out and the response assembled at the end hold the same calls.
``RefusalWatch`` reads the refusal a stream sends (OpenAI's ``delta.refusal``), which litellm
drops, and the usage chunk the provider sent (which litellm holds back until the stream
ends). Nothing here imports litellm: it reads the chunks litellm hands over (and, for the
refusal, the provider's chunks litellm reads).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tinyagents._record import Record
from tinyagents.harness.model import StreamChunk
from tinyagents.harness.thinking import ThinkTagSplitter

#: The name a tool call that came without one is given in the conversation (strict servers
#: refuse a null name); its result says it is an unknown tool, and which ones there are.
NAMELESS = "unnamed_tool"


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class _StreamedCall(Record):
    """What one streamed tool call has sent so far."""

    index: int
    first: Any  # its first fragment, which is given an id and a name if it never got them
    id: str = ""
    named: bool = False
    #: its arguments' fragments so far (joined only when they may be whole JSON: joined and
    #: parsed at every fragment, a long call in small pieces took quadratic time)
    parts: list[str] = field(default_factory=list)
    #: the last character of its arguments that is not white space ("" before any)
    last: str = ""


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class ToolCallFragments(Record):
    """Tells a stream's tool calls apart, chunk by chunk, and numbers them in order.

    A fragment belongs to the call at its ``index`` (litellm gives one without an index its
    position in the chunk, as its ``Delta`` does), unless it starts a new one there: it
    carries an id other than that call's (Ollama, and proxies translating the Responses API,
    send every parallel call at index 0), or, in a stream without ids, a name once that call
    has whole JSON arguments. Each fragment's ``index`` is rewritten to its call's number, so
    the ``model.delta`` pieces and ``stream_chunk_builder`` (which joins fragments by index
    alone) see the same calls.
    """

    calls: list[_StreamedCall] = field(default_factory=list)
    #: The call each index the server used belongs to now (one stream's worth: dropped with it).
    latest: dict[int, _StreamedCall] = field(default_factory=dict)

    def see(self, chunk: Any) -> None:
        """Number the tool-call fragments of ``chunk``, the next chunk of the stream."""
        if not chunk.choices:
            return
        for position, fragment in enumerate(
            getattr(chunk.choices[0].delta, "tool_calls", None) or []
        ):
            function = getattr(fragment, "function", None)  # a custom tool call has none
            name = (function.name if function is not None else None) or ""
            server_index = fragment.index if fragment.index is not None else position
            call = self.latest.get(server_index)
            if call is None or _starts_new_call(call, fragment.id or "", name):
                call = _StreamedCall(index=len(self.calls), first=fragment)
                self.calls.append(call)
                self.latest[server_index] = call
            fragment.index = call.index
            call.id = call.id or fragment.id or ""
            call.named = call.named or bool(name)
            arguments = (function.arguments if function is not None else None) or ""
            if arguments:
                call.parts.append(arguments)
                tail = arguments.rstrip()
                if tail:
                    call.last = tail[-1]

    def name_calls(self) -> None:
        """Give each call an id and a name before ``stream_chunk_builder`` puts them
        together: it drops a call whose fragments carry no id or no name (some servers send
        neither), which a whole response keeps (``call_<index>``; ``NAMELESS``)."""
        for call in self.calls:
            if not call.id:
                call.first.id = f"call_{call.index}"
            if not call.named and getattr(call.first, "function", None) is not None:
                call.first.function.name = NAMELESS


def _starts_new_call(call: _StreamedCall, fragment_id: str, name: str) -> bool:
    if fragment_id and call.id:
        return fragment_id != call.id
    if call.id:  # a fragment without an id goes on with the call that has one
        return False
    # Without ids, only a name can tell; one repeated while the arguments come is the same call.
    if not (name and call.named and call.last == "}"):  # no JSON object ends otherwise
        return False
    if len(call.parts) > 1:
        call.parts[:] = ["".join(call.parts)]
    return _whole_json(call.parts[0])


def _whole_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # nested too deep to read is not whole either
        return False
    return True


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class RefusalWatch(Record):
    """The provider's stream as litellm reads it, noting each piece of a refusal on the way.

    OpenAI streams a refusal as ``delta.refusal`` pieces with no content, and litellm's
    ``CustomStreamWrapper`` drops a chunk that holds nothing else: the assembled answer was
    empty, where the same refusal answered whole is ``message.refusal``. ``watch`` puts one
    in front of the wrapper's ``completion_stream`` (its constructor argument, which it only
    iterates and closes); ``refusal`` is what it said, once the stream is read. ``usage`` is
    the usage the provider sent (litellm holds it back until the stream ends, so a stream
    kept after it broke off past its ``finish_reason`` has it only here).
    """

    source: Any
    iterator: Any
    parts: list[str] = field(default_factory=list)
    usage: Any = None

    @classmethod
    def watch(cls, chunks: Any) -> RefusalWatch | None:
        """Watch the provider stream under litellm's ``chunks``; None when it has none yet
        (a provider litellm opens lazily) or it is no async iterable (nothing to watch)."""
        source = getattr(chunks, "completion_stream", None)
        if source is None or not hasattr(source, "__aiter__"):
            return None
        watch = cls(source=source, iterator=aiter(source))
        chunks.completion_stream = watch
        return watch

    def __aiter__(self) -> RefusalWatch:
        return self

    async def __anext__(self) -> Any:
        chunk = await anext(self.iterator)
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage
        choices = getattr(chunk, "choices", None)
        if choices:
            piece = getattr(getattr(choices[0], "delta", None), "refusal", None)
            if isinstance(piece, str) and piece:
                self.parts.append(piece)
        return chunk

    async def aclose(self) -> None:
        """Close what litellm would have closed: the provider's stream."""
        for closing in (self.iterator, self.source):
            close = getattr(closing, "aclose", None) or getattr(closing, "close", None)
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result

    @property
    def refusal(self) -> str | None:
        """The refusal streamed so far, or None (none, or only white space)."""
        said = "".join(self.parts)
        return said if said.strip() else None


def pieces(chunk: Any, tags: ThinkTagSplitter | None = None) -> Iterator[StreamChunk]:
    """The ``StreamChunk``s of one litellm chunk: its thinking (``reasoning_content``), its
    text, then each tool-call fragment (or the piece of a legacy ``function_call``). ``tags``, the stream's splitter, takes a ``<think>``
    block at the start of the content apart from the text (``ThinkTagSplitter``)."""
    if not chunk.choices:
        return
    delta = chunk.choices[0].delta
    reasoning = reasoning_of(delta)
    if reasoning:
        yield StreamChunk(thinking_delta=reasoning)
    if delta.content:
        thinking, text = ("", delta.content) if tags is None else tags.feed(delta.content)
        if thinking or text:
            yield StreamChunk(thinking_delta=thinking, text_delta=text)
    fragments = getattr(delta, "tool_calls", None) or []
    legacy = getattr(delta, "function_call", None)  # OpenAI's older function calling
    if legacy is not None and not fragments:
        # one call, no id, its name on the first piece: a call at index 0, as litellm's
        # assembled answer holds it (``_parse_response``)
        if tags is not None:
            yield from held_back(tags)
        name, arguments = getattr(legacy, "name", None), getattr(legacy, "arguments", None)
        if name or arguments:
            yield StreamChunk(tool_call_index=0, tool_name=name or None, args_delta=arguments or "")
        return
    if fragments and tags is not None:
        yield from held_back(tags)  # text held back as a possible tag comes before the calls
    for position, fragment in enumerate(fragments):
        function = getattr(fragment, "function", None)  # a custom tool call has none
        yield StreamChunk(
            tool_call_index=fragment.index if fragment.index is not None else position,
            tool_call_id=fragment.id or None,
            tool_name=(function.name if function is not None else None) or None,
            args_delta=(function.arguments if function is not None else None) or "",
        )


def held_back(tags: ThinkTagSplitter) -> Iterator[StreamChunk]:
    """What ``tags`` held back as a possible tag, as a piece (none if it held nothing)."""
    thinking, text = tags.flush()
    if thinking or text:
        yield StreamChunk(thinking_delta=thinking, text_delta=text)


def reasoning_of(message: Any) -> str:
    """The thinking a provider sent beside the content of a message or a delta: litellm's
    ``reasoning_content`` (DeepSeek, vLLM's and Ollama's reasoning parsers, and what litellm
    maps other providers' to), else the text of Anthropic's ``thinking_blocks``, else the
    ``reasoning`` field some OpenAI-compatible servers use; ``""`` for none."""
    reasoning = getattr(message, "reasoning_content", None)
    if isinstance(reasoning, str) and reasoning:
        return reasoning
    blocks = getattr(message, "thinking_blocks", None)
    if isinstance(blocks, list):
        said = "".join(block.get("thinking") or "" for block in blocks if isinstance(block, dict))
        if said:
            return said
    reasoning = getattr(message, "reasoning", None)
    return reasoning if isinstance(reasoning, str) else ""
