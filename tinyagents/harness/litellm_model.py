"""``LiteLLMModel``: any provider litellm speaks, behind the ``Model`` interface.

litellm takes seconds to import, so it is imported inside the first call (in a worker
thread, with the modules litellm's own first call would import: the event loop goes on
meanwhile), never by ``import tinyagents``. Its cost map is read from the installed package
(``LITELLM_LOCAL_MODEL_COST_MAP``) instead of being fetched over the network at import.

Retries are ours, not the OpenAI SDK's (whose own retries are switched off with
``max_retries=0``): one place decides what is transient, how long to back off, and when to
give up. Every failure becomes a typed ``ModelError`` naming the model and ``api_base``
(``litellm_errors`` says which are retried and why).

Messages are sent in the shape the strictest common OpenAI-compatible servers accept (the
testkit's ``OpenAICompatServer`` checks it in its ``llama.cpp`` and ``vllm`` modes): every
message has a string ``content`` (llama.cpp's chat templates concatenate it: a missing or
null content is a 500 there), and consecutive user messages (a task followed by steering)
are joined into one, as templates that require user/assistant alternation demand.

It streams by default (``stream=True``): the agent loop then publishes each piece of text and
of a tool call's arguments as a ``model.delta`` event while the provider generates it, and
``litellm.stream_chunk_builder`` assembles the chunks into the same ``ModelResponse`` (tool
calls, usage, cost) that ``request`` returns, once ``litellm_stream.ToolCallFragments`` has
told the tool calls apart (the builder joins fragments by index alone, and some servers send
every call at index 0). ``stream=False`` asks for whole responses.

A reasoning model's thinking is kept apart from its answer (``ModelResponse.thinking``,
``StreamChunk.thinking_delta``): the provider's ``reasoning_content`` (or ``thinking_blocks``),
and a ``<think>`` block the content starts with (``tinyagents.harness.thinking``). It stays in
the transcript (``Message.thinking``) and is not sent back: pydantic-ai's OpenAI model sends
it back (in the field it came in, or in tags in the content), but DeepSeek's API refuses a
``reasoning_content`` in the messages it is sent, the Qwen3 and DeepSeek-R1 chat templates drop
an earlier turn's thinking themselves, and sent back it is paid for again as prompt tokens.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib
import inspect
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from tinyagents._record import Record
from tinyagents.errors import (
    ConfigurationError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
)
from tinyagents.harness.litellm_errors import (
    UNFINISHED_MARKER,
    ErrorBody,
    broke_off,
    classify,
    cut_off,
    empty_response,
    not_a_stream,
    refused,
    unpacking_failed,
    where,
)
from tinyagents.harness.litellm_stream import (
    NAMELESS,
    RefusalWatch,
    ToolCallFragments,
    held_back,
    pieces,
    reasoning_of,
)
from tinyagents.harness.model import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    ToolCall,
    ToolSpec,
    Usage,
    known_cost,
    parse_arguments,
)
from tinyagents.harness.output import without_property_titles
from tinyagents.harness.thinking import ThinkTagSplitter, joined, split_thinking
from tinyagents.harness.tools import PARALLEL_PSEUDO_TOOL, is_tool_name
from tinyagents.protocol.ids import SPOOFING, shown_id, shown_repr

T = TypeVar("T")

#: How long a cancel may be held while litellm prepares a request in its worker thread.
_HOLD_CANCEL_S = 5.0
#: How many runs a ``LiteLLMModel`` remembers having warned about a dropped ``tool_choice``
#: (once per run; a model may serve any number of runs).
_WARNED_RUNS = 1024
_log = logging.getLogger("tinyagents.harness")
_HOLD_POLL_S = 0.005


class LiteLLMModel(Model):
    """A model reached through ``litellm.acompletion``.

    ``model`` is litellm's ``"provider/name"`` (e.g. ``"openai/gpt-4o-mini"``). ``api_base``
    points it at any OpenAI-compatible server (``"http://127.0.0.1:8000/v1"``; such a server
    still needs some ``api_key``, e.g. ``"sk-local"``). Transient failures (timeout,
    connection, 429, 5xx) are retried ``max_retries`` times with exponential backoff starting
    at ``retry_backoff_s``; everything else fails at once. Failures raise a ``ModelError``
    subclass (``ModelConnectionError``, ``ModelNotFoundError``, ...). Other keyword arguments
    are passed to every litellm call, but ``tool_choice`` and ``parallel_tool_calls`` only to
    one that offers tools (OpenAI refuses them without), and a ``tool_choice`` naming a tool
    only to one that offers that tool (an ``Agent`` with tools but not that one is refused when
    it is made; a run granted a subset without it, or steered away from it, lets the model
    choose).

    ``stream`` (default True): the agent loop asks ``stream()``, so ``Agent.run_stream`` and
    ``handle.stream()`` show the tokens as they arrive; pass ``stream=False`` for a server
    that cannot stream. ``timeout_s`` bounds a whole request (each attempt, all of it: not only
    each read), or, when streaming, the wait for the response to start and for each chunk
    after it.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        max_retries: int = 2,
        retry_backoff_s: float = 0.5,
        timeout_s: float | None = None,
        stream: bool = True,
        **litellm_kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(
                f"LiteLLMModel needs a model name such as 'openai/gpt-4o-mini', got {shown_repr(model)}"
            )
        _check_settings(max_retries, retry_backoff_s, timeout_s)
        _check_api_base(api_base)
        self.name = model
        self.api_base = api_base
        self.api_key = api_key
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self.timeout_s = timeout_s
        self.streams = stream
        self.litellm_kwargs = litellm_kwargs
        #: The runs warned about a dropped ``tool_choice`` (``_warn_dropped``), oldest first.
        self._warned_runs: dict[str, None] = {}

    def __repr__(self) -> str:
        return f"LiteLLMModel({self.name!r})"

    async def request(self, request: ModelRequest) -> ModelResponse:
        await import_litellm()  # seconds the first time: not on the event loop's thread
        litellm = _litellm()
        kwargs = self._completion_kwargs(request)
        try:
            raw = await self._with_retries(
                kwargs["model"], lambda: litellm.acompletion(**kwargs), request, whole=True
            )
        except ModelResponseError as exc:
            if not unpacking_failed(exc):
                raise
            # the model's mistake, not the server's: told to the model, as a stream's is
            # (its call's result says what to do instead), not a run failed on "JSON that is
            # not a chat completion"
            return ModelResponse(
                tool_calls=[ToolCall(id="", name=PARALLEL_PSEUDO_TOOL)],
                usage=_prompt_counted(litellm, kwargs),
                model=kwargs["model"],
                finish_reason="tool_calls",
            )
        if not getattr(raw, "choices", None):
            raise empty_response(kwargs["model"], self.api_base)
        response = _parse_response(raw, litellm, kwargs)
        return _answered(response, kwargs["model"], self.api_base)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Yield each piece of text and of tool-call arguments as the provider sends it; the
        last chunk carries the complete response (assembled by ``stream_chunk_builder``)."""
        await import_litellm()
        litellm = _litellm()
        kwargs = self._completion_kwargs(request)
        kwargs["stream"] = True
        kwargs.setdefault("stream_options", {"include_usage": True})
        model = kwargs["model"]
        # Opening the stream, up to its first piece, is retried like a request; after that a
        # retry would show the caller the same text twice.
        timeout_s = self.timeout_s
        opened: _Opened = await self._with_retries(
            model,
            lambda: _open_stream(litellm, kwargs, model, self.api_base, timeout_s),
            request,
        )
        chunks, received = opened.chunks, opened.received
        calls = ToolCallFragments()
        broke_off_whole = False
        tags = ThinkTagSplitter()
        try:
            for chunk in received:
                calls.see(chunk)
                for piece in pieces(chunk, tags):
                    yield piece
            while not opened.ended:
                try:
                    chunk = await _next_chunk(chunks, timeout_s)
                except StopAsyncIteration:
                    break
                received.append(chunk)
                calls.see(chunk)
                for piece in pieces(chunk, tags):
                    yield piece
        except Exception as exc:
            error = broke_off(
                exc,
                model=model,
                api_base=self.api_base,
                timeout_s=self.timeout_s,
                chunks=len(received),
            )
            # A connection closed (or silent past timeout_s) after the finish_reason, before
            # [DONE] or the usage chunk (a proxy that drops it after the last event) lost no
            # part of the answer; usage it did not send is counted as a server's that sends
            # none.
            kept = (ModelConnectionError, ModelTimeoutError)
            if not (isinstance(error, kept) and _finished(received)):
                raise error from exc
            _log.warning("model %s: %s; the answer was whole and is kept", model, error)
            broke_off_whole = True
        finally:
            # A consumer that stops early (or is cancelled) must still release the connection.
            await chunks.aclose()
        for piece in held_back(tags):  # text a tag split held back, of a whole answer too
            yield piece
        try:
            calls.name_calls()
            raw = litellm.stream_chunk_builder(received, messages=kwargs["messages"])
            response = _parse_response(raw, litellm, kwargs)
        except Exception as exc:
            raise ModelResponseError(
                f"model {model!r} at {where(self.api_base, model)} streamed chunks litellm "
                f"could not assemble ({type(exc).__name__}: {exc}); not retried: pass "
                "stream=False to ask this server for whole responses",
                model=model,
                api_base=self.api_base,
            ) from exc
        if broke_off_whole and opened.watch is not None and opened.watch.usage is not None:
            said = _usage(opened.watch.usage)  # the usage chunk came: litellm held it back
            if said.total_tokens:
                response.usage = Usage(
                    input_tokens=said.input_tokens,
                    output_tokens=said.output_tokens,
                    cost=response.usage.cost,
                )
        refusal = opened.watch.refusal if opened.watch is not None else None
        yield StreamChunk(response=_answered(response, model, self.api_base, refusal))

    def _completion_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            **self.litellm_kwargs,
            **request.settings,
            "model": request.model or self.name,
            "messages": _messages_to_openai(request.messages),
            "max_retries": 0,
        }
        budget = request.settings.get("max_tokens")
        if budget is not None:
            # The loop sends the run's remaining token budget: a cap, never a raise, and no
            # more than the model can write (OpenAI refuses every request with a max_tokens
            # above that: a run-wide budget of a million tokens failed the run at once).
            caps = (
                budget,
                self.litellm_kwargs.get("max_tokens"),
                _max_output_tokens(kwargs["model"]),
            )
            kwargs["max_tokens"] = min(cap for cap in caps if cap is not None)
        if request.tools:
            kwargs["tools"] = [_tool_to_openai(spec) for spec in request.tools]
            forced = forced_tool(kwargs.get("tool_choice"))
            if forced is not None and all(spec.name != forced for spec in request.tools):
                # a tool steering took away (or the run was not granted) cannot be forced:
                # OpenAI refuses a tool_choice naming no offered tool, so the model chooses
                del kwargs["tool_choice"]
                self._warn_dropped(request, forced)
        else:
            # OpenAI refuses both without tools ("'parallel_tool_calls' is only allowed when
            # 'tools' are specified"), as pydantic-ai leaves them out: a model made with them
            # serves agents without tools, and runs granted (or steered down to) none
            forced = forced_tool(kwargs.get("tool_choice"))
            if forced is not None:
                self._warn_dropped(request, forced)
            for name in _TOOL_ONLY_SETTINGS:
                kwargs.pop(name, None)
        if request.response_format is not None:
            kwargs["response_format"] = _response_format(request.response_format)
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        if self.timeout_s is not None:
            kwargs["timeout"] = self.timeout_s
        return kwargs

    def forced_tool(self) -> str | None:
        return forced_tool(self.litellm_kwargs.get("tool_choice"))

    def _warn_dropped(self, request: ModelRequest, forced: str) -> None:
        """Warn, once per run (the latest ``_WARNED_RUNS`` runs are remembered), that a
        request went out without the ``tool_choice`` forcing ``forced``: its tool is not
        offered (steering took it away, the run was not granted it, or a middleware forced a
        tool the request lacks)."""
        key = request.run_id
        warned = self._warned_runs
        if key is not None:
            if key in warned:
                return
            warned[key] = None
            if len(warned) > _WARNED_RUNS:
                del warned[next(iter(warned))]
        _log.warning(
            "run %s: model %s: tool_choice forcing tool %r left out of the request, which does "
            "not offer that tool (steering took it away, or the run was not granted it): the "
            "model chooses",
            key or "(none)",
            request.model or self.name,
            forced,
        )

    async def _with_retries(
        self,
        model: str,
        call: Callable[[], Awaitable[Any]],
        request: ModelRequest,
        *,
        whole: bool = False,
    ) -> Any:
        """``call`` with retries; ``whole``: each attempt bounded by ``timeout_s`` in all
        (httpx's timeout bounds each read: a server that sends a byte now and then never ran
        it out)."""
        attempts = self.max_retries + 1
        stop = request.stop_retrying
        bound = self.timeout_s if whole else None
        for attempt in range(1, attempts + 1):
            wait = self.retry_backoff_s * 2 ** (attempt - 1)
            try:
                async with asyncio.timeout(bound):
                    return await _hold_cancel_while_preparing(call())
            except ModelError as exc:  # already typed (a stream that is not one)
                if not exc.retryable or attempt == attempts:
                    raise
                error = exc
                cause: Exception = exc
            except Exception as exc:
                wait = retry_delay(exc, wait)
                error = classify(
                    exc,
                    model=model,
                    api_base=self.api_base,
                    attempts=attempt,
                    timeout_s=self.timeout_s,
                )
                error.retry_after_s = _retry_after(exc)
                if not error.retryable or attempt == attempts:
                    raise error from exc
                cause = exc
            late = _past(request.deadline, wait, error)
            if late is not None:
                raise late from cause
            if stop is None:
                await asyncio.sleep(wait)
            elif stop.is_set() or await _stopped_within(stop, wait):
                raise _not_retried(error, "the caller asked for no more attempts") from cause
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


async def _stopped_within(stop: asyncio.Event, wait: float) -> bool:
    """Wait ``wait`` s for the next attempt, or less if ``stop`` is set meanwhile: whether
    it was (no task made, no polling)."""
    try:
        async with asyncio.timeout(wait):
            await stop.wait()
    except TimeoutError:
        return False
    return True


def _past(deadline: float | None, wait: float, error: ModelError) -> ModelError | None:
    """``error``, saying why it is not retried, when waiting ``wait`` s for the next attempt
    would pass the caller's ``deadline`` (``ModelRequest.deadline``); else None."""
    if deadline is None:
        return None
    left = deadline - asyncio.get_running_loop().time()
    if wait < left:
        return None
    asked = error.retry_after_s
    why = (
        f"the server asked to wait {asked:g} s before another attempt"
        if asked is not None
        else f"the next attempt would wait {wait:g} s"
    )
    return _not_retried(error, f"{why}, and the caller stops waiting in {max(left, 0):.3g} s")


def _not_retried(error: ModelError, why: str) -> ModelError:
    """``error``, saying why it is not retried."""
    return type(error)(
        f"{error}; not retried: {why}",
        model=error.model,
        api_base=error.api_base,
        status=error.status,
        retry_after_s=error.retry_after_s,
    )


#: The longest wait between two attempts a server's ``Retry-After`` may ask for: a longer one
#: is cut to this (a rate limit of minutes is the caller's to plan around, not a run's to sit in).
MAX_RETRY_AFTER_S = 60.0


def retry_delay(exc: BaseException, backoff_s: float) -> float:
    """How long to wait before the next attempt after ``exc``: the backoff, or longer when
    the server said how long (``Retry-After`` on a 429 or 503, in seconds or as an HTTP
    date, or OpenAI's ``retry-after-ms``), up to ``MAX_RETRY_AFTER_S``."""
    asked = _retry_after(exc)
    return backoff_s if asked is None else max(backoff_s, min(asked, MAX_RETRY_AFTER_S))


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None) or getattr(
        getattr(exc, "response", None), "headers", None
    )
    if not headers or not hasattr(headers, "get"):
        return None
    # OpenAI says it in milliseconds too, and the OpenAI SDK reads that first
    millis = headers.get("retry-after-ms") or headers.get("Retry-After-Ms")
    if isinstance(millis, str):
        try:
            seconds = float(millis) / 1000
        except ValueError:
            pass
        else:
            if math.isfinite(seconds):
                return max(seconds, 0.0)
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        # email (with calendar and its charsets, ~3 ms) for this one date format: on use.
        import email.utils

        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(seconds, 0.0) if seconds == seconds and seconds != float("inf") else None


async def _hold_cancel_while_preparing(call: Awaitable[T]) -> T:
    """Await a litellm call; a cancel that arrives while litellm prepares it is held back.

    ``litellm.acompletion`` prepares the request in a worker thread (``run_in_executor``; on a
    first call this takes a noticeable fraction of a second), and the thread returns the
    coroutine that sends it. A cancel landing during that step drops the coroutine unawaited:
    ``RuntimeWarning: coroutine 'OpenAIChatCompletion.acompletion' was never awaited``. So the
    call runs as its own task, and a cancel is passed on once litellm has left that step (at
    most ``_HOLD_CANCEL_S``), which cancels the HTTP request as soon as it has started.
    """
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        deadline = time.monotonic() + _HOLD_CANCEL_S
        try:
            # Polled: nothing reports the end of that step. Returns early if the call ends.
            while _preparing(task) and time.monotonic() < deadline:
                await asyncio.wait([task], timeout=_HOLD_POLL_S)
        finally:  # also when cancelled again while holding: never leave the call running
            task.cancel()
            await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # retrieved: a late failure of a cancelled call is moot
        raise


def _preparing(task: asyncio.Future[Any]) -> bool:
    """Whether litellm's own code is waiting on a bare future (its worker thread)."""
    if task.done() or not isinstance(task, asyncio.Task):
        return False
    awaited: Any = task.get_coro()
    innermost = None
    while inspect.iscoroutine(awaited):
        innermost = awaited
        awaited = awaited.cr_await
    # Awaiting a future (``await fut`` leaves its iterator in ``cr_await``), not the next item
    # of an async generator (a stream's next chunk), which is cancelled at once.
    if innermost is None or not _future_iterator(awaited):
        return False
    return f"{os.sep}litellm{os.sep}" in innermost.cr_code.co_filename


def _future_iterator(awaited: Any) -> bool:
    if type(awaited).__name__ == "FutureIter":  # the C implementation's
        return True
    return inspect.isgenerator(awaited) and awaited.gi_code.co_name == "__await__"


async def import_litellm() -> None:
    """Import litellm, and the modules its first call would import, in a worker thread,
    once: it takes seconds, which a caller that times its call (the supervisor's judge) must
    not spend inside its timeout, nor block the event loop with. Callers arriving meanwhile
    (on this loop or another) wait for the same load."""
    if not _imported:
        await asyncio.to_thread(_load_litellm)


# litellm's first acompletion imports these (its proxy types, logging callbacks, provider
# configs; for a stream anyio's backend and tiktoken's encoding, read from disk): 44 modules,
# 1-2 s on a loaded machine, on the event loop's thread. Imported with litellm instead.
# Measured with litellm 1.110 (a first call's ``sys.modules`` before and after); a name
# another version lacks is skipped, and its first call imports what it needs itself.
_FIRST_CALL_MODULES = (
    "litellm.proxy._types",
    "litellm.proxy.openai_files_endpoints.common_utils",
    "litellm.proxy.spend_tracking.savings",
    "litellm.litellm_core_utils.logging_callback_manager",
    "litellm.litellm_core_utils.default_encoding",
    "litellm._service_logger",
    "litellm.integrations.prometheus_services",
    "litellm.integrations.generic_api.generic_api_callback",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.llms.github_copilot.authenticator",
    "litellm.llms.github_copilot.github_host",
    "litellm.llms.github_copilot.per_user_auth",
    "litellm.llms.openai.chat.gpt_audio_transformation",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.llms.bedrock.chat.invoke_transformations.amazon_ai21_transformation",
    "litellm.types.litellm_core_utils.streaming_chunk_builder_utils",
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "anyio.streams.tls",
)

_imported = False
_import_lock = threading.Lock()


def _load_litellm() -> None:
    global _imported
    with _import_lock:  # a second caller's thread waits here for the first one's load
        if _imported:
            return
        _litellm()
        for name in _FIRST_CALL_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:
                continue  # not in this litellm version
        # set by the thread, not the awaiting caller: a caller cancelled meanwhile does not
        # leave it unset for the next one to load again
        _imported = True


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    # litellm prints provider lists and "Give Feedback" banners to stdout on errors; our
    # ModelError already carries the message.
    litellm.suppress_debug_info = True
    return litellm


@functools.lru_cache(maxsize=128)
def _max_output_tokens(model: str) -> int | None:
    """How many tokens ``model`` can write in one response, by litellm's model map (read
    from the installed package); None for a model it does not know (a local one)."""
    try:
        value = _litellm().get_model_info(model).get("max_output_tokens")
    except Exception:
        return None  # not in the map
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _messages_to_openai(messages: list[Message]) -> list[dict[str, Any]]:
    """The conversation in OpenAI's format; consecutive plain user messages joined into one.
    A model's empty answer (no text, no tool call: kept in the transcript, as pydantic-ai
    keeps its ``ModelResponse(parts=[])``) is not sent, as pydantic-ai's OpenAI model does
    not send it."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant" and not message.content and not message.tool_calls:
            continue
        converted = _message_to_openai(message)
        previous = out[-1] if out else None
        if previous is not None and _plain_user(previous) and _plain_user(converted):
            previous["content"] = f"{previous['content']}\n\n{converted['content']}"
        else:
            out.append(converted)
    return out


def _plain_user(message: dict[str, Any]) -> bool:
    return message["role"] == "user" and message.keys() == {"role", "content"}


def _message_to_openai(message: Message) -> dict[str, Any]:
    # Always a string, "" next to tool calls: litellm drops a None content, and llama.cpp's
    # templates fail on a missing one; OpenAI, vLLM and litellm's converters accept "".
    out: dict[str, Any] = {"role": message.role, "content": _sendable(message.content or "")}
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    elif message.name is not None:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": _sendable_name(call.name),
                    "arguments": _arguments_json(call.args),
                },
            }
            for call in message.tool_calls
        ]
    return out


def _response_format(response_format: object) -> object:
    """What a request sends as its ``response_format``: a pydantic class as a ``json_schema``
    built as litellm builds it (strict), written as pydantic-ai's OpenAI model sends its
    native output: no ``title`` on a property, the class's docstring as the
    ``json_schema``'s ``description`` rather than the schema's. Unless OpenAI would refuse
    that: a class name that is no function name (a generic model's ``Page[Item]``) is sent
    with each other character as ``_``, and a schema strict mode cannot hold as it is (an
    object whose ``additionalProperties`` is not false: a dict field, a model taking extra
    fields; or one with a property it does not require: a field with a default) is sent
    ``strict: false`` as it is (each object that says nothing of them closed to additional
    properties), as pydantic-ai sends it. The answer is validated as the class either way."""
    if not (isinstance(response_format, type) and issubclass(response_format, BaseModel)):
        return response_format
    return copy.deepcopy(_json_schema_format(response_format))  # litellm may rewrite it


@functools.lru_cache(maxsize=256)
def _json_schema_format(model: type[BaseModel]) -> dict[str, Any]:
    """``_response_format`` of a class: asked of every request of a structured run, so
    worked out once per class."""
    base_utils = _litellm().llms.base_llm.base_utils  # litellm's own conversion, as it sends it
    converted: dict[str, Any] = base_utils.type_to_response_format_param(model)
    json_schema = converted["json_schema"]
    json_schema["schema"] = schema = without_property_titles(json_schema["schema"])
    json_schema["name"] = _sendable_name(model.__name__)
    description = schema.pop("description", None)
    if description:
        json_schema["description"] = description
    json_schema["strict"] = strict = _strict_schema(model.model_json_schema())
    if not strict:  # sent as it is: litellm's conversion made every property required
        original = without_property_titles(model.model_json_schema())
        original.pop("description", None)
        json_schema["schema"] = _closed(original)
    return converted


def _closed(node: Any) -> Any:
    """``node`` with ``additionalProperties: false`` and ``properties: {}`` on each object
    that says nothing of them, as pydantic-ai's ``OpenAIJsonSchemaTransformer`` writes them
    (in place)."""
    if isinstance(node, list):
        for item in node:
            _closed(item)
    elif isinstance(node, dict):
        if node.get("type") == "object":
            node.setdefault("additionalProperties", False)
            node.setdefault("properties", {})  # OpenAI drops an object without it
        for key, value in node.items():
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                for item in value.values():
                    _closed(item)
            elif key not in _SCHEMA_DATA_KEYS:
                _closed(value)
    return node


#: Keys of a JSON schema whose values are data, not schemas.
_SCHEMA_DATA_KEYS = frozenset({"default", "examples", "const", "enum", "title", "description"})


def _strict_schema(node: object) -> bool:
    """Whether OpenAI's strict mode can hold this JSON schema (node) as it is: every object in
    it must take no additional properties (litellm adds ``false`` where the schema says
    nothing), say its properties and require each of them (pydantic-ai's
    ``is_strict_compatible``: strict mode would make the model write the optional ones, and
    hold it to ``{}`` for a free-form object)."""
    if isinstance(node, list):
        return all(_strict_schema(item) for item in node)
    if not isinstance(node, dict):
        return True
    if node.get("additionalProperties", False) is not False:
        return False
    properties = node.get("properties")
    if node.get("type") == "object" and (properties is None or "required" not in node):
        return False  # a free-form object: strict mode would hold the model to {}
    if isinstance(properties, dict) and not set(properties) <= set(node.get("required", ())):
        return False
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions"):  # names to schemas
            if isinstance(value, dict) and not all(_strict_schema(v) for v in value.values()):
                return False
        elif key not in _SCHEMA_DATA_KEYS and not _strict_schema(value):
            return False
    return True


def _sendable_name(name: str) -> str:
    """A tool call's name as providers take it back in the conversation: a name a model made
    up that is no function name (``functions.add``, ``multi_tool_use.parallel``, 80
    characters) has each other character as ``_``, cut to 64. OpenAI refuses the request
    otherwise (a 400 for every later request of the run); the call's result, an unknown
    tool's, still quotes the name the model gave."""
    if is_tool_name(name):
        return name
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or NAMELESS


def _arguments_json(args: object) -> str:
    """A call's arguments as the JSON object text providers take: Python values a custom
    model, a middleware or a history gave them (a date, a tuple) as JSON (json.dumps raised
    a TypeError before anything was sent), and arguments that are no object as ``{}``."""
    if not isinstance(args, dict):
        return "{}"
    return json.dumps(to_jsonable_python(args, fallback=str))


def _sendable(text: str) -> str:
    """``text`` as UTF-8 can carry it: a lone surrogate (``'\\ud800'``, from a model's or a
    tool's output) becomes U+FFFD. Left in, it failed every later request of the run, or of
    its session, before anything was sent (reported as the server's HTTP 500, and retried)."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _tool_to_openai(spec: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
    }
    if spec.strict is not None:
        function["strict"] = spec.strict
    return {"type": "function", "function": function}


def _usage(raw_usage: Any) -> Usage:
    if raw_usage is None:
        return Usage()
    return Usage(
        input_tokens=_token_count(getattr(raw_usage, "prompt_tokens", 0)),
        output_tokens=_token_count(getattr(raw_usage, "completion_tokens", 0)),
    )


def _counted(raw: Any, litellm: Any, kwargs: dict[str, Any], message: Any) -> Usage:
    """The tokens of a response whose server reported none (no ``usage``, or 0 and 0: no
    request is free), counted by litellm's tokenizer as ``stream_chunk_builder`` counts a
    stream sent without usage. Taken at its word, the run's token budget never ran down."""
    model = kwargs["model"]
    written = reasoning_of(message) + (message.content or "")
    for call in message.tool_calls or []:
        function = getattr(call, "function", None)
        if function is not None:
            written += f"{function.name or ''}{function.arguments or ''}"
    try:
        prompt = litellm.token_counter(model=model, messages=kwargs["messages"])
        completion = litellm.token_counter(model=model, text=written) if written else 0
    except Exception:
        return Usage()  # a tokenizer that fails: nothing better to say than the server did
    usage = Usage(input_tokens=_token_count(prompt), output_tokens=_token_count(completion))
    # the cost is read from the raw response's usage: counted, it is priced too
    raw.usage = litellm.Usage(
        prompt_tokens=usage.input_tokens,
        completion_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
    )
    return usage


def _prompt_counted(litellm: Any, kwargs: dict[str, Any]) -> Usage:
    """The prompt's tokens by litellm's tokenizer, for an answer litellm could not read (its
    usage with it): no request is free, and taken as 0 the run's token budget never ran down."""
    try:
        prompt = litellm.token_counter(model=kwargs["model"], messages=kwargs["messages"])
    except Exception:
        return Usage()
    return Usage(input_tokens=_token_count(prompt))


def _token_count(value: Any) -> int:
    """A provider's token count as a count: a negative, non-numeric or non-finite one is 0
    (a server reporting -6000 tokens would otherwise refill the run's token budget)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if value != value or value in (float("inf"), float("-inf")):
        return 0
    return max(0, int(value))


def _cost(raw: Any, litellm: Any) -> float | None:
    try:
        return known_cost(float(litellm.completion_cost(completion_response=raw)))
    except Exception:
        return None  # a model missing from litellm's price map (local or private models)


def _parse_response(raw: Any, litellm: Any, kwargs: dict[str, Any]) -> ModelResponse:
    choice = raw.choices[0]
    message = choice.message
    tool_calls = []
    for index, call in enumerate(message.tool_calls or []):
        # a call that names no tool is answered "unknown tool" (the model can correct itself);
        # so is one that is no function call (a "custom" tool call has no function), as in
        # a stream
        function = getattr(call, "function", None)
        name = (function.name if function is not None else None) or NAMELESS
        arguments = function.arguments if function is not None else None
        tool_calls.append(parse_arguments(call.id or f"call_{index}", name, arguments))
    legacy = getattr(message, "function_call", None)  # OpenAI's older function calling
    if legacy is not None and not tool_calls:
        # a server that answers in that form (one call, no id) had its call dropped: the
        # run ended with an empty answer
        name = getattr(legacy, "name", None) or NAMELESS
        tool_calls.append(parse_arguments("call_0", name, getattr(legacy, "arguments", None)))
    usage = _usage(getattr(raw, "usage", None))
    if usage.input_tokens == 0 and usage.output_tokens == 0:
        usage = _counted(raw, litellm, kwargs, message)
    usage.cost = _cost(raw, litellm)
    tagged, text = split_thinking(message.content or "")
    thinking = joined(reasoning_of(message).strip(), tagged)
    if thinking:
        # litellm takes a leading <think> block out of a whole answer itself, into
        # reasoning_content, and leaves the blank line that followed it
        text = text.lstrip()
    return ModelResponse(
        text=text,
        thinking=thinking,
        tool_calls=tool_calls,
        usage=usage,
        model=getattr(raw, "model", None),
        finish_reason=choice.finish_reason,
        raw=raw,
    )


def _answered(
    response: ModelResponse, model: str, api_base: str | None, streamed_refusal: str | None = None
) -> ModelResponse:
    """``response``, unless it stopped before it held anything (no text, no tool call) for a
    reason other than having answered: then a ``ModelResponseError`` says why (it ended the
    run ``completed`` with an empty answer). A refusal is such a reason: taken for an empty
    answer, it was asked for again and refused again, and the run's error never said so.
    ``streamed_refusal``: the refusal a stream sent (litellm drops its deltas, so the
    assembled response has none; ``RefusalWatch`` reads them)."""
    if response.text or response.tool_calls:
        return response
    refusal = _refusal(response.raw) or streamed_refusal
    if refusal is not None:
        error = refused(model, api_base, refusal)
    elif response.finish_reason in ("content_filter", "length"):
        error = cut_off(model, api_base, response.finish_reason)
    else:
        return response
    error.usage = response.usage  # the prompt was paid for all the same
    raise error


def _refusal(raw: Any) -> str | None:
    """The refusal a whole answer gave instead of content (``message.refusal``)."""
    try:
        refusal = raw.choices[0].message.refusal
    except (AttributeError, IndexError, TypeError, KeyError):
        return None
    return refusal if isinstance(refusal, str) and refusal.strip() else None


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class _Opened(Record):
    """A stream up to its first piece: the chunks received so far, and whether it ended."""

    chunks: Any
    received: list[Any]
    ended: bool = False
    #: the refusal the stream sends, as it is read (None: a stream there is no watching)
    watch: RefusalWatch | None = None


def _finished(received: list[Any]) -> bool:
    """Whether a chunk of the stream gave a ``finish_reason`` (all of the answer came)."""
    return any(chunk.choices and chunk.choices[0].finish_reason for chunk in received)


async def _next_chunk(chunks: Any, timeout_s: float | None) -> Any:
    """The stream's next chunk, waited for ``timeout_s`` at most (httpx's timeout bounds each
    read: a server sending its events a byte at a time never ran it out)."""
    if timeout_s is None:
        return await anext(chunks)
    async with asyncio.timeout(timeout_s):
        return await anext(chunks)


async def _open_stream(
    litellm: Any,
    kwargs: dict[str, Any],
    model: str,
    api_base: str | None,
    timeout_s: float | None = None,
) -> _Opened:
    """Start a stream and read it up to the first chunk with a piece (or its end): failing
    before that is failing to open, which is retried; a body that is not a stream of a
    completion is ``not_a_stream``."""
    chunks = await litellm.acompletion(**kwargs)
    try:  # before the watch, which takes the stream's place (and its response) in ``chunks``
        error = await _error_body(chunks, timeout_s)
    except BaseException:  # a read that timed out, broke or was cancelled: closed all the same
        await chunks.aclose()
        raise
    if error is not None:
        await chunks.aclose()
        raise error
    opened = _Opened(chunks=chunks, received=[], watch=RefusalWatch.watch(chunks))
    try:
        while True:
            try:
                chunk = await _next_chunk(chunks, timeout_s)
            except StopAsyncIteration:
                opened.ended = True
                break
            opened.received.append(chunk)
            if any(True for _ in pieces(chunk)):  # no splitter: pieces are read again
                break
    except BaseException as exc:
        await chunks.aclose()
        if UNFINISHED_MARKER in str(exc).lower() and not any(
            map(_carries_content, opened.received)
        ):
            # litellm's word for a stream that ended before any choice was streamed
            raise not_a_stream(_content_type(chunks), model, api_base) from exc
        raise
    if opened.ended and not any(map(_carries_content, opened.received)):
        await chunks.aclose()
        raise not_a_stream(_content_type(chunks), model, api_base)
    return opened


async def _error_body(chunks: Any, timeout_s: float | None) -> ErrorBody | None:
    """The error of a stream whose body is one JSON ``{"error": ...}`` (a 200 that says so,
    as OpenRouter does), read before the stream is: its server-sent events reader skips a
    line that is no event, and the provider's message with it. Read from the OpenAI SDK's
    stream (``completion_stream.response``, the ``httpx`` response, not read yet); a body of
    another kind, or a stream of another shape, is left to the stream's reading."""
    if _content_type(chunks).split(";", 1)[0].strip() != "application/json":
        return None
    read = getattr(
        getattr(getattr(chunks, "completion_stream", None), "response", None), "aread", None
    )
    if read is None:
        return None
    try:
        async with asyncio.timeout(timeout_s):
            body = json.loads(await read())
    except (ValueError, RecursionError):  # no JSON: the stream's reading says what it is
        return None
    return ErrorBody.of(body)


def _carries_content(chunk: Any) -> bool:
    """Whether a chunk holds part of a choice: a role, text or a tool call. (litellm makes up
    a bare closing chunk for a body without a single server-sent event in it.)"""
    if not chunk.choices:
        return False
    delta = chunk.choices[0].delta
    return bool(
        delta.role or delta.content or getattr(delta, "tool_calls", None) or reasoning_of(delta)
    )


def _content_type(chunks: Any) -> str:
    headers = (getattr(chunks, "_hidden_params", None) or {}).get("additional_headers") or {}
    return str(headers.get("llm_provider-content-type") or "")


def as_model(model: Model | str) -> Model:
    """Accept a ``Model`` or a ``"provider/name"`` string (which means ``LiteLLMModel``)."""
    if isinstance(model, Model):
        return model
    if isinstance(model, str):
        return LiteLLMModel(model)
    raise ConfigurationError(
        f"expected a Model or a model name such as 'openai/gpt-4o-mini', got "
        f"{type(model).__name__}; pass a tinyagents Model instance or a litellm model string"
    )


def api_base_problem(value: str) -> str | None:
    """What is wrong with ``value`` as an ``api_base``, or None. It must be an http(s) URL
    with a host: anything else was posted to as a path ('/notaurl/chat/completions'), and
    litellm reported each call's failure as the server's "HTTP 500" when no server was ever
    asked. Its port, if it names one, is a number from 1 to 65535: another (``:99999``,
    ``:abc``) was taken, and every call failed only when made. It holds no control character,
    space or character that shows as nothing (a NUL, a line break, a bidi override): each was
    taken, and every call failed as the server's "HTTP 500" or at a host no resolver knows."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:  # "http://[::1": an unclosed IPv6 address
        return _NO_HTTP_URL
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return _NO_HTTP_URL
    if (found := re.compile(_NOT_IN_A_URL).search(value)) is not None:
        return (
            f"holds U+{ord(found.group()):04X} (a control character, a space, or a character "
            "that shows as nothing or reorders the text): no URL holds one; percent-encode it "
            "(a space is %20) or remove it"
        )
    host = parts.hostname
    if ":" not in host:  # a name or an IPv4 address (an IPv6 one is in brackets, with colons)
        longest = max(len(label) for label in host.rstrip(".").split("."))
        if len(host) > 253 or longest > 63:
            return (
                f"has a host name of {len(host):,} characters (its longest label {longest}): "
                "no resolver takes it; a DNS name is at most 253 characters, each part between "
                "dots at most 63"
            )
    try:
        port = parts.port
    except ValueError:  # "Port out of range 0-65535", "Port could not be cast to integer"
        port = 0
    if port == 0:
        given = parts.netloc.rpartition(":")[2]
        return (
            f"has port {given!r}: a port is a whole number from 1 to 65535, as in "
            "http://127.0.0.1:8080/v1"
        )
    return None


_NO_HTTP_URL = "must be an http(s) URL, such as http://127.0.0.1:8080/v1"
#: (Text, compiled with its first use by ``re``'s cache.) What no URL holds: a control
#: character, any white space, and the characters an id may not hold (``SPOOFING``).
_NOT_IN_A_URL = rf"[\x00-\x20\x7f-\x9f\s{SPOOFING}]"

#: (Text, compiled with its first use by ``re``'s cache, not by ``import tinyagents``.)
#: An environment variable's name as the shells and ``os.environ`` portably take it.
_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def env_name_problem(value: str) -> str | None:
    """What is wrong with ``value`` as an ``api_key_env`` (the name of the environment variable
    holding a key), or None: a letter or ``_``, then letters, digits and ``_``. Another
    (``A=B``, ``MY KEY``) names no variable anyone can set, so the key was "not set" only when
    the judge first called its model."""
    if re.compile(_ENV_NAME).fullmatch(value) is None:
        return (
            f"{value!r} is not an environment variable name: a letter or _, then letters, "
            "digits and _ (e.g. JUDGE_API_KEY)"
        )
    return None


def _check_api_base(api_base: object) -> None:
    if api_base is None or api_base == "":
        return
    problem = api_base_problem(api_base) if isinstance(api_base, str) else _NO_HTTP_URL
    if problem is None:
        return
    shown = repr(shown_id(api_base))
    if problem != _NO_HTTP_URL:
        raise ConfigurationError(f"api_base {shown} {problem}")
    raise ConfigurationError(
        "api_base must be an http:// or https:// URL such as 'http://127.0.0.1:8080/v1', "
        f"got {shown}"
    )


#: Settings a request may carry only beside ``tools``.
_TOOL_ONLY_SETTINGS = ("tool_choice", "parallel_tool_calls")


def forced_tool(tool_choice: object) -> str | None:
    """The tool a ``tool_choice`` forces (OpenAI's ``{"type": "function", "function":
    {"name": ...}}``), or None for ``"auto"``, ``"required"``, ``"none"`` or none."""
    if not isinstance(tool_choice, dict):
        return None
    function = tool_choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def _check_settings(max_retries: object, retry_backoff_s: object, timeout_s: object) -> None:
    """Refuse retry and timeout settings that are no number of the right kind: NaN or inf
    never timed out, 0 or a negative timeout timed every call out, 2.5 or True retried."""

    def seconds(value: object) -> bool:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        try:
            return math.isfinite(value)
        except OverflowError:  # a whole number past any float: no finite number of seconds
            return False

    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigurationError(
            f"max_retries must be a whole number, not negative, got {shown_repr(max_retries)}"
        )
    if not seconds(retry_backoff_s) or retry_backoff_s < 0:  # type: ignore[operator]
        raise ConfigurationError(
            f"retry_backoff_s must be a finite number of seconds, not negative, got {shown_repr(retry_backoff_s)}"
        )
    if timeout_s is not None and (not seconds(timeout_s) or timeout_s <= 0):  # type: ignore[operator]
        raise ConfigurationError(
            f"timeout_s must be None or a finite number of seconds > 0, got {shown_repr(timeout_s)}"
        )
