"""A local OpenAI-compatible chat server, for testing ``LiteLLMModel`` over real HTTP.

    async with OpenAICompatServer([tool_call("add", a=1, b=2), reply("3")]) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        ...
        assert server.requests[1]["messages"][-1]["role"] == "tool"

Each ``POST /v1/chat/completions`` takes the next scripted reply: a string (the assistant's
text), a ``ModelResponse`` (text and tool calls, e.g. from ``reply``/``tool_call``; its
``thinking`` sent as ``reasoning_content``, streamed before the text, as DeepSeek sends it), an
``ErrorReply`` (an HTTP error), a ``dict`` (returned verbatim as the JSON body), a ``Fault``
(faulty mode: a delay, a body that is not JSON, an empty ``choices`` list, any status), or a
callable of the request body returning one of those (one that raises is answered with a 400
naming the error). ``stream: true`` is answered with server-sent events, tool-call arguments
split across deltas the way OpenAI sends them; a ``RawStream`` sends deltas exactly as given
instead (tool-call fragments the way a faulty server or proxy sends them).

``mode`` makes the server as strict as a real one: ``"llama.cpp"`` refuses what llama.cpp's
message parser and the Jinja chat templates of llama-cpp-python refuse (HTTP 500, as
llama-cpp-python answers a template error), ``"vllm"`` what vLLM's request validation refuses
(HTTP 400), ``"openai"`` what OpenAI's API refuses and the others let through (HTTP 400 in
OpenAI's error shape, ``param`` naming the field: ``tool_choice`` or ``parallel_tool_calls``
without tools, a named ``tool_choice`` that is not among ``tools``, a strict ``json_schema``
strict mode cannot hold); ``testkit/server_rules.py`` lists the rules and where they come from. A refused
request does not use up a scripted reply; neither does a body that is no JSON object with a
``messages`` list, which is a 400 in every mode. Built on ``aiohttp.web`` (a litellm dependency),
imported only when this module is.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from aiohttp import web

from tinyagents.errors import ArgumentError
from tinyagents.harness.model import ModelResponse, ToolCall, Usage

from .models import count_tokens
from .server_rules import llama_cpp_violation, openai_param, openai_violation, vllm_violation

#: The largest request body the server reads (aiohttp's default is 1 MiB).
_MAX_BODY_BYTES = 256 * 1024 * 1024

#: ``created`` of every completion: fixed so recorded responses are deterministic.
_CREATED = 1_700_000_000


@dataclass(slots=True, kw_only=True)
class ErrorReply:
    """Answer one request with an HTTP error in OpenAI's error format."""

    status: int = 500
    message: str = "scripted server error"
    type: str = "server_error"
    #: Response headers, e.g. ``{"Retry-After": "2"}`` on a 429.
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class Fault:
    """Answer one request badly (the server's faulty mode).

    ``delay_s`` waits before answering (a client timeout, or a request to cancel in flight;
    closing the server ends the wait). Then the server answers ``body`` as raw text with
    ``status`` (e.g. an HTML page: a 200 that is not JSON), or, with ``empty_choices``, a
    well-formed completion whose ``choices`` list is empty, or else ``then`` as usual.

        Fault(body="<html>Welcome</html>")           # 200, not JSON
        Fault(empty_choices=True)                    # 200, choices: []
        Fault(status=502, body="Bad Gateway")        # a proxy's error page
        Fault(delay_s=30, then="too late")           # slower than any test's timeout
        Fault(stall_after=2, delay_s=30, then="a b c")  # a stream that stops after "a b"
        Fault(cut_after=40, then="hello")            # 40 bytes of the completion, then a reset
        Fault(body=b'{"x": "\\xff"}', content_type="application/json")  # no UTF-8
        Fault(error_after=2, then="a b c")           # "a", then an error event mid-stream


    A streamed request (``stream: true``) is answered as a streaming server would: with
    ``empty_choices``, events whose chunks have no choices; with ``stall_after``, the first
    ``stall_after`` chunks of ``then`` (the role chunk counts, and so do the finish chunk
    and the usage chunk: a ``stall_after`` past them waits before ``[DONE]``), then the wait
    of ``delay_s`` (instead of before answering), then the rest. A client that goes away during a wait ends
    it and is noted in ``OpenAICompatServer.disconnected``.

    ``cut_after`` answers with the first ``cut_after`` bytes of its body (``body``, or the
    completion of ``then``: its server-sent events if streamed) under a ``Content-Length`` of
    all of it, then closes the connection: a server that dies mid-answer, or a proxy that
    drops it.
    ``body`` may be bytes, sent as they are (e.g. bytes that are no UTF-8). ``drip_s`` sends
    the answer's body (a streamed one too: its server-sent events) a byte at a time,
    ``drip_s`` apart (a server that never stops answering: each read gets a byte, the whole
    never arrives); closing the server ends it.

    ``error_after`` answers 200 and, streamed, the first ``error_after`` chunks of ``then``
    (the role chunk counts), then an error event ``data: {"error": {...}}`` and ``[DONE]``:
    how OpenAI, vLLM and OpenRouter report a failure in the middle of generating. Whole, it
    answers 200 with the body ``{"error": {...}}`` (a proxy that says so instead of a
    status). The error is ``error`` (its ``status`` is the event's ``code``).
    """

    delay_s: float = 0.0
    stall_after: int | None = None
    cut_after: int | None = None
    drip_s: float | None = None
    status: int = 200
    body: str | bytes | None = None
    content_type: str = "text/html"
    empty_choices: bool = False
    error_after: int | None = None
    error: ErrorReply = field(
        default_factory=lambda: ErrorReply(status=500, message="scripted error mid-stream")
    )
    then: str | ModelResponse | ErrorReply | dict[str, Any] = ""


@dataclass(slots=True, kw_only=True)
class RawStream:
    """Answer one streamed request with ``deltas`` exactly as given, one chunk each.

    They follow a ``{"role": "assistant"}`` chunk and are followed by an empty delta with
    ``finish_reason`` (and the usage chunk, if asked for), as OpenAI frames a stream; nothing
    in them is filled in, so a test can send tool-call fragments with a repeated ``index``, no
    ``index``, no ``id`` or no name. ``piece_bytes`` writes the body in pieces of that many
    bytes, a short pause apart (a proxy that flushes in the middle of a character). A request
    without ``stream: true`` is answered with an HTTP 400.

        RawStream(deltas=[{"tool_calls": [{"index": 0, "id": "call_1", "function": {...}}]}])
    """

    deltas: list[dict[str, Any]]
    finish_reason: str = "tool_calls"
    piece_bytes: int | None = None


ServerReply = str | ModelResponse | ErrorReply | Fault | RawStream | dict[str, Any]
ScriptedServerReply = ServerReply | Callable[[dict[str, Any]], ServerReply]
ServerMode = Literal["default", "llama.cpp", "vllm", "openai"]

_CHECKS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "llama.cpp": llama_cpp_violation,
    "vllm": vllm_violation,
    "openai": openai_violation,
}


#: What a scripted reply (or a callable's answer) may be.
_REPLY_TYPES = (str, ModelResponse, ErrorReply, Fault, RawStream, dict)
_REPLIES_ARE = "text, a ModelResponse, an ErrorReply, a Fault, a RawStream or a dict"


def _check_replies(replies: Iterable[Any], *, first: int) -> None:
    """Refuse, before any is queued, a reply of no reply type (numbered from ``first``)."""
    for number, reply in enumerate(replies, start=first):
        if not isinstance(reply, _REPLY_TYPES) and not callable(reply):
            raise ArgumentError(
                f"OpenAICompatServer: reply {number} is {type(reply).__name__}, no reply: "
                f"a reply is {_REPLIES_ARE}, or a callable of the request body returning one"
            )


class OpenAICompatServer:
    """Serve scripted chat completions on ``127.0.0.1`` at a free port (an async context manager).

    ``requests`` holds every received request body, in order; ``base_url`` is the value for
    ``api_base``. More replies can be queued at any time with ``add``. Responses name the
    requested model (``model`` when the request names none), as OpenAI does.
    """

    def __init__(
        self,
        replies: Iterable[ScriptedServerReply] = (),
        *,
        model: str = "test-model",
        mode: ServerMode = "default",
    ):
        if mode not in ("default", *_CHECKS):
            raise ArgumentError(
                f"mode must be 'default', 'llama.cpp', 'vllm' or 'openai', got {mode!r}"
            )
        if isinstance(replies, (str, bytes)) or not isinstance(replies, Iterable):
            # (a string was scripted letter by letter, one reply each)
            raise ArgumentError(
                "OpenAICompatServer takes a list of replies (text, a ModelResponse, an "
                f"ErrorReply, a Fault, a RawStream, a dict or a callable), got "
                f"{type(replies).__name__}; one reply is OpenAICompatServer([reply])"
            )
        replies = list(replies)
        _check_replies(replies, first=1)
        self.model = model
        self.mode = mode
        self.requests: list[dict[str, Any]] = []
        #: Why each refused request was refused, in order: a body that is no JSON object
        #: with ``messages`` (HTTP 400, in every mode), or what a strict ``mode`` refuses.
        self.refusals: list[str] = []
        #: The numbers (1-based) of the requests whose client went away while the server
        #: waited before answering, in the middle of a stream or of a ``Fault(drip_s=)``.
        self.disconnected: list[int] = []
        self._replies: deque[ScriptedServerReply] = deque(replies)
        self._scripted = len(self._replies)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._closing = asyncio.Event()
        self._received = asyncio.Condition()

    def add(self, *replies: ScriptedServerReply) -> None:
        """Queue more replies after those already scripted."""
        _check_replies(replies, first=self._scripted + 1)
        self._replies.extend(replies)
        self._scripted += len(replies)

    async def wait_for_requests(self, count: int) -> None:
        """Return once ``count`` requests have arrived (e.g. one a test will cancel in flight)."""
        async with self._received:
            await self._received.wait_for(lambda: len(self.requests) >= count)

    async def wait_for_disconnects(self, count: int) -> None:
        """Return once ``count`` clients have gone away mid-answer (see ``disconnected``)."""
        async with self._received:
            await self._received.wait_for(lambda: len(self.disconnected) >= count)

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("OpenAICompatServer is not running; use it as `async with`")
        return f"http://127.0.0.1:{self._port}/v1"

    async def __aenter__(self) -> OpenAICompatServer:
        # aiohttp refuses a body over 1 MiB (HTTP 413) by default; OpenAI-compatible servers
        # take long conversations, so this one does too.
        # New for each run: the last one's are set (closing) and bound to its event loop.
        self._closing = asyncio.Event()
        self._received = asyncio.Condition()
        app = web.Application(client_max_size=_MAX_BODY_BYTES)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_route("*", "/{path:.*}", _not_found)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        # Binding the socket ourselves gives a free port without racing another process for it.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()  # ends every delayed answer, so cleanup does not wait for them
        if self._runner is not None:
            await self._runner.cleanup()
        self._runner = None
        self._port = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body: Any = await request.json()
        except (ValueError, RecursionError):  # (nested deeper than the parser reads)
            problem = "the request body is not JSON"
            self.refusals.append(problem)
            return _bad_request(problem)
        if not isinstance(body, dict):
            problem = f"the request body must be a JSON object, got {type(body).__name__}"
            self.refusals.append(problem)
            return _bad_request(problem)
        async with self._received:
            self.requests.append(body)
            self._received.notify_all()
        if not isinstance(body.get("messages"), list):
            problem = "the request body needs 'messages', a list of messages"
            self.refusals.append(problem)
            return _bad_request(problem)
        if self.mode != "default" and (violation := _CHECKS[self.mode](body)):
            self.refusals.append(violation)
            return self._refuse(violation)
        if shape := _shape_problem(body):  # what every mode refuses, the strict ones their way
            self.refusals.append(shape)
            return _bad_request(shape)
        number = len(self.requests)
        reply = self._next_reply(body)
        stall: tuple[int, float] | None = None
        if isinstance(reply, Fault):
            if reply.stall_after is not None and body.get("stream"):
                stall = (reply.stall_after, reply.delay_s)
            elif reply.delay_s and not await self._wait(request, number, reply.delay_s):
                return web.Response(status=499, text="client closed the request")
            if reply.empty_choices and body.get("stream"):
                return await self._stream_empty(request, body, number)
            if reply.error_after is not None:
                return await self._error_event(request, body, number, reply)
            if reply.drip_s or reply.cut_after is not None:
                return await self._cut(request, body, number, reply)
            if isinstance(reply.body, bytes):
                return web.Response(
                    body=reply.body, status=reply.status, content_type=reply.content_type
                )
            if reply.body is not None:
                return web.Response(
                    text=reply.body, status=reply.status, content_type=reply.content_type
                )
            if reply.empty_choices:
                return web.json_response(
                    {**self._completion(body, "chatcmpl-empty", ModelResponse(), {}), "choices": []}
                )
            reply = reply.then
        if isinstance(reply, ErrorReply):
            error = {"error": {"message": reply.message, "type": reply.type, "code": None}}
            return web.json_response(error, status=reply.status, headers=reply.headers)
        if isinstance(reply, dict):
            return web.json_response(reply)
        if isinstance(reply, RawStream):
            return await self._stream_raw(request, body, number, reply)
        response = ModelResponse(text=reply) if isinstance(reply, str) else reply
        completion_id = f"chatcmpl-{number:04d}"
        usage = _usage(body, response)
        if body.get("stream"):
            return await self._stream(request, body, completion_id, response, usage, stall, number)
        return web.json_response(self._completion(body, completion_id, response, usage))

    async def _wait(self, request: web.Request, number: int, delay_s: float) -> bool:
        """Wait ``delay_s`` (less if the server closes); False if the client went away."""
        deadline = asyncio.get_running_loop().time() + delay_s
        # Polled: aiohttp does not cancel a handler whose client disconnects.
        while not self._closing.is_set():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return True
            transport = request.transport
            if transport is None or transport.is_closing():
                async with self._received:
                    self.disconnected.append(number)
                    self._received.notify_all()
                return False
            try:
                await asyncio.wait_for(self._closing.wait(), min(left, 0.02))
            except TimeoutError:
                pass
        return True

    async def _cut(
        self, request: web.Request, body: dict[str, Any], number: int, fault: Fault
    ) -> web.StreamResponse:
        """The first ``fault.cut_after`` bytes of the answer, then the connection closed;
        or, with ``fault.drip_s``, the answer a byte at a time."""
        status, content_type = fault.status, fault.content_type
        if isinstance(fault.body, bytes):
            data = fault.body
        elif fault.body is not None:
            data = fault.body.encode()
        else:
            then = fault.then
            if not isinstance(then, (str, ModelResponse)):
                raise TypeError("Fault(cut_after=, drip_s=) send a body, or a completion (then=)")
            response = ModelResponse(text=then) if isinstance(then, str) else then
            completion_id, usage = f"chatcmpl-{number:04d}", _usage(body, response)
            if body.get("stream"):
                data = self._events(body, completion_id, response, usage)
                content_type = "text/event-stream"
            else:
                data = json.dumps(self._completion(body, completion_id, response, usage)).encode()
                content_type = "application/json"
        stream = web.StreamResponse(status=status, headers={"Content-Type": content_type})
        stream.content_length = len(data)
        try:
            await stream.prepare(request)
            if fault.drip_s:
                for at in range(len(data[: fault.cut_after])):
                    await stream.write(data[at : at + 1])
                    if not await self._wait(request, number, fault.drip_s):
                        return stream
                    if self._closing.is_set():
                        break
            else:
                await stream.write(data[: fault.cut_after])
        except ConnectionResetError:  # the client went away mid-answer
            async with self._received:
                self.disconnected.append(number)
                self._received.notify_all()
            return stream
        if fault.cut_after is None:
            await stream.write_eof()
        elif request.transport is not None:
            request.transport.close()
        return stream

    def _events(
        self, body: dict[str, Any], completion_id: str, response: ModelResponse, usage: Any
    ) -> bytes:
        """The server-sent events ``_stream`` sends for ``response``, as one body."""
        base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": body.get("model") or self.model,
        }
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}
            for delta, reason in _deltas(response)
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": usage})
        text = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
        return (text + "data: [DONE]\n\n").encode()

    async def _error_event(
        self, request: web.Request, body: dict[str, Any], number: int, fault: Fault
    ) -> web.StreamResponse:
        """A 200 that reports an error in its body: streamed, after ``fault.error_after``
        chunks of ``fault.then``, as an event of its own (what OpenAI's SDK reads as one)."""
        error = {
            "message": fault.error.message,
            "type": fault.error.type,
            "code": fault.error.status,
        }
        if not body.get("stream"):
            return web.json_response({"error": error})
        then = fault.then
        if not isinstance(then, (str, ModelResponse)):
            raise TypeError("Fault(error_after=) streams a completion (then=) before its error")
        response = ModelResponse(text=then) if isinstance(then, str) else then
        base = {
            "id": f"chatcmpl-{number:04d}",
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": body.get("model") or self.model,
        }
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        try:
            await stream.prepare(request)
            for sent, (delta, finish_reason) in enumerate(_deltas(response)):
                if sent == fault.error_after:
                    break
                choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
                await _send(stream, {**base, "choices": [choice]})
            await _send(stream, {"error": error})
            await stream.write(b"data: [DONE]\n\n")
            await stream.write_eof()
        except ConnectionResetError:
            pass  # the client went away: nothing to send it
        return stream

    async def _stream_empty(
        self, request: web.Request, body: dict[str, Any], number: int
    ) -> web.StreamResponse:
        """A stream with no choices: only the usage chunk (what a content filter leaves)."""
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        chunk: dict[str, Any] = {
            "id": f"chatcmpl-{number:04d}",
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": body.get("model") or self.model,
            "choices": [],
            "usage": _usage(body, ModelResponse()),
        }
        await _send(stream, chunk)
        await stream.write(b"data: [DONE]\n\n")
        await stream.write_eof()
        return stream

    async def _stream_raw(
        self, request: web.Request, body: dict[str, Any], number: int, raw: RawStream
    ) -> web.StreamResponse:
        if not body.get("stream"):
            error = {"error": {"message": "a RawStream answers only streamed requests"}}
            return web.json_response(error, status=400)
        base = {
            "id": f"chatcmpl-{number:04d}",
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": body.get("model") or self.model,
        }
        deltas = [({"role": "assistant"}, None), *((d, None) for d in raw.deltas)]
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}
            for delta, reason in [*deltas, ({}, raw.finish_reason)]
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": _usage(body, ModelResponse())})
        text = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        data = text.encode()
        size = raw.piece_bytes or len(data)
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        try:
            await stream.prepare(request)
            for start in range(0, len(data), size):
                await stream.write(data[start : start + size])
                if raw.piece_bytes:
                    await asyncio.sleep(0.001)  # so the client reads each piece on its own
            await stream.write_eof()
        except ConnectionResetError:
            pass
        return stream

    def _refuse(self, problem: str) -> web.Response:
        if self.mode == "openai":  # OpenAI's 400, naming the field at fault
            refusal = {
                "message": problem,
                "type": "invalid_request_error",
                "param": openai_param(problem),
                "code": None,
            }
            return web.json_response({"error": refusal}, status=400)
        if self.mode == "vllm":  # vLLM: a pydantic ValidationError becomes a 400
            error: dict[str, Any] = {
                "object": "error",
                "message": f"[vllm-strict] {problem}",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
            return web.json_response(error, status=400)
        # llama-cpp-python: an exception while rendering the chat template is a 500
        error = {
            "error": {
                "code": 500,
                "message": f"[llama.cpp-strict] {problem}",
                "type": "server_error",
            }
        }
        return web.json_response(error, status=500)

    def _next_reply(self, body: dict[str, Any]) -> ServerReply:
        if not self._replies:
            # 400, not 500: a client must not retry a test that ran out of script.
            return ErrorReply(
                status=400,
                type="invalid_request_error",
                message=f"OpenAICompatServer got request {len(self.requests)} but only "
                f"{self._scripted} replies were scripted; add more replies",
            )
        reply = self._replies.popleft()
        if not callable(reply):
            return reply
        number = self._scripted - len(self._replies)
        try:
            answer = reply(body)
        except Exception as error:
            # 400, not 500: a retry would be answered by the next reply as if all went well.
            return ErrorReply(
                status=400,
                type="invalid_request_error",
                message=f"OpenAICompatServer: the callable scripted as reply "
                f"{number} raised {type(error).__name__}: {error}",
            )
        if not isinstance(answer, _REPLY_TYPES):  # (a 500 from building a completion of it)
            return ErrorReply(
                status=400,
                type="invalid_request_error",
                message=f"OpenAICompatServer: the callable scripted as reply {number} "
                f"returned {type(answer).__name__}, no reply: {_REPLIES_ARE}",
            )
        return answer

    def _completion(
        self,
        body: dict[str, Any],
        completion_id: str,
        response: ModelResponse,
        usage: dict[str, int],
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": response.text or None}
        if response.thinking:
            message["reasoning_content"] = response.thinking
        if response.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments(call)},
                }
                for call in response.tool_calls
            ]
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": _CREATED,
            "model": body.get("model") or self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": _finish_reason(response)}
            ],
            "usage": usage,
        }

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        completion_id: str,
        response: ModelResponse,
        usage: dict[str, int],
        stall: tuple[int, float] | None,
        number: int,
    ) -> web.StreamResponse:
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        try:
            await stream.prepare(request)
            base = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": _CREATED,
                "model": body.get("model") or self.model,
            }
            chunks = [
                {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}
                for delta, reason in _deltas(response)
            ]
            if (body.get("stream_options") or {}).get("include_usage"):
                chunks.append({**base, "choices": [], "usage": usage})
            for sent, chunk in enumerate([*chunks, None]):
                if stall is not None and sent == stall[0]:
                    if not await self._wait(request, number, stall[1]):
                        return stream
                if chunk is not None:
                    await _send(stream, chunk)
            await stream.write(b"data: [DONE]\n\n")
            await stream.write_eof()
        except ConnectionResetError:
            pass  # the client went away (cancelled or timed out): nothing to send it
        return stream


def _deltas(response: ModelResponse) -> Iterator[tuple[dict[str, Any], str | None]]:
    """The stream of ``(delta, finish_reason)`` OpenAI would send for ``response``."""
    yield {"role": "assistant", "content": ""}, None
    thoughts = response.thinking.split(" ") if response.thinking else []
    for i, word in enumerate(thoughts):
        yield {"reasoning_content": word if i == 0 else " " + word}, None
    words = response.text.split(" ") if response.text else []
    for i, word in enumerate(words):
        yield {"content": word if i == 0 else " " + word}, None
    for index, call in enumerate(response.tool_calls):
        header = {"id": call.id, "type": "function", "function": {"name": call.name}}
        yield {"tool_calls": [{"index": index, **header}]}, None
        arguments = _arguments(call)
        middle = len(arguments) // 2
        # Two fragments per call, so a client has to concatenate them.
        for part in (arguments[:middle], arguments[middle:]):
            yield {"tool_calls": [{"index": index, "function": {"arguments": part}}]}, None
    yield {}, _finish_reason(response)


async def _not_found(request: web.Request) -> web.Response:
    """Any other URL: a 404 in OpenAI's error format, naming it (e.g. an api_base without /v1)."""
    message = f"Invalid URL ({request.method} {request.path})"
    error = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return web.json_response(error, status=404)


def _shape_problem(body: dict[str, Any]) -> str | None:
    """Why ``body`` is no request this server can answer (a message that is no object, a
    ``stream_options`` that is none), or None: refused before a reply is taken."""
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict):
            return f"message {index} must be a JSON object, got {type(message).__name__}"
    if body.get("stream_options") is not None and not isinstance(body["stream_options"], dict):
        return f"stream_options must be a JSON object, got {type(body['stream_options']).__name__}"
    return None


def _bad_request(problem: str) -> web.Response:
    """A 400 in OpenAI's error format: clients do not retry it, as they would a 500."""
    error = {"error": {"message": problem, "type": "invalid_request_error", "code": None}}
    return web.json_response(error, status=400)


async def _send(stream: web.StreamResponse, chunk: dict[str, Any]) -> None:
    await stream.write(f"data: {json.dumps(chunk)}\n\n".encode())


def _arguments(call: ToolCall) -> str:
    """A call's arguments as the JSON text a provider sends: ``args`` already JSON text
    (a custom model may hand them over so, see ``ToolCall``) as it is, none as ``{}``."""
    if isinstance(call.args, str):
        return call.args
    return json.dumps(call.args if call.args is not None else {})


def _finish_reason(response: ModelResponse) -> str:
    if response.finish_reason:
        return response.finish_reason
    return "tool_calls" if response.tool_calls else "stop"


def _usage(body: dict[str, Any], response: ModelResponse) -> dict[str, int]:
    """The scripted usage if it has any, else one token per word (as ``ScriptedModel`` counts)."""
    usage = response.usage
    if usage == Usage():
        prompt = sum(_words(message.get("content")) for message in body.get("messages", []))
        completion = count_tokens(response.thinking + " " + response.text) + sum(
            1 + count_tokens(_arguments(call)) for call in response.tool_calls
        )
        usage = Usage(input_tokens=prompt, output_tokens=completion)
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def _words(content: Any) -> int:
    if isinstance(content, str):
        return count_tokens(content)
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return sum(_words(part.get("text")) for part in content if isinstance(part, dict))
    return 0
