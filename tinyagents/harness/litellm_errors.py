"""What went wrong with a litellm call, as a typed ``ModelError`` that says what to do.

litellm labels several different failures "HTTP 500": nothing listening on ``api_base``
(``Connection error.``), no API key (the OpenAI SDK's ``Missing credentials``) and a 200 whose
body is not JSON (``Empty or invalid response from LLM endpoint``). The cause is in the
exception chain, so ``classify`` walks it before it looks at the status.

What is retried, and why:

- **retried**: timeouts, connection errors (also a connection that closed mid-answer), 429
  and 5xx (and 409). A server being restarted
  or still loading its model refuses connections for a moment; a busy one times out or
  answers 429/503. A few retries with backoff cost little and often succeed.
- **not retried**: a missing or refused key (401/403), an unknown model or wrong path (404),
  any other 4xx, a 200 that is not JSON (a web page; or JSON cut short, malformed or not
  UTF-8: litellm labels those HTTP 500 too), or JSON that is no completion (litellm's "Invalid
  response object", which it labels HTTP 500), a completion without choices, and anything
  litellm could not classify. The same request would fail the same way; retrying hides the mistake.
- **streams**: opening a stream, up to its first piece, is retried as above; a stream that
  breaks off after its first piece is typed the same way but not retried (``broke_off``):
  its pieces were already handed out. A body that is not server-sent events, or a stream
  without a single choice, is ``not_a_stream``. An error the server sent as an event of its
  stream (``data: {"error": {...}}`` after a 200: OpenAI, vLLM and OpenRouter report a failure
  while generating so), or in the body of a 200 (OpenRouter's ``{"error": {...}}``, also as
  the one JSON body answering a streamed request: ``ErrorBody``), is typed
  by the ``code`` it gives: a 4xx other than 429 is not retried; one without a code is a
  server failure, retried (litellm says 422 for a body's error without one: not the server's).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

from pydantic import ValidationError

from tinyagents.errors import (
    MissingAPIKeyError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelEmptyResponse,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelRequestRejected,
    ModelResponseError,
    ModelResponseNotJSON,
    ModelServerError,
    ModelTimeoutError,
)
from tinyagents.harness.model import CUT_OFF

#: litellm's message for a 200 whose body it could not parse as a completion.
_NOT_JSON_MARKER = "empty or invalid response from llm endpoint"
#: litellm's message for a 200 whose JSON is no completion (a choice without a message,
#: usage that is not numbers): it labels it HTTP 500, but the same request gets the same body.
_MALFORMED_MARKERS = ("invalid response object", "provider returned 'choices' that is not")
_MISSING_KEY_MARKERS = (
    "missing credentials",
    "api_key client option must be set",
    "missing api key",
)


#: litellm's words for a stream that ended before any chunk gave a ``finish_reason`` (it
#: labels it HTTP 500, ``MidStreamFallbackError``, though the server answered 200).
UNFINISHED_MARKER = "stream ended before a finish_reason"

#: litellm's words when a model name has no provider it can place (raised before any request).
_NO_PROVIDER_MARKER = "llm provider not provided"


def where(api_base: str | None, model: str) -> str:
    """``api_base 'http://...'``, or the provider's default endpoint when there is none."""
    if api_base:
        return f"api_base {api_base!r}"
    provider = model.split("/", 1)[0] if "/" in model else "its provider"
    return f"the default endpoint of {provider!r} (no api_base given)"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def unpacking_failed(exc: BaseException) -> bool:
    """Whether litellm could not read a whole response because it holds a call of OpenAI's
    ``multi_tool_use.parallel`` pseudo-tool it cannot unpack: litellm turns a well-formed
    one into the calls it wraps, and raises past its own handler on any other (its pydantic
    check of the call's arguments)."""
    return any(
        isinstance(link, ValidationError) and link.title == "_ParallelToolUseArgs"
        for link in _chain(exc)
    )


def _is_timeout(link: BaseException) -> bool:
    name = type(link).__name__
    return isinstance(link, TimeoutError) or name in ("Timeout", "APITimeoutError")


def _is_http_status(link: BaseException) -> bool:
    """An HTTP error the server answered with (the OpenAI SDK's, or httpx's under it)."""
    return type(link).__name__ in ("APIStatusError", "HTTPStatusError")


def _is_connection(link: BaseException) -> bool:
    if isinstance(link, (ConnectionError, socket.gaierror)):
        return True
    return type(link).__name__ == "APIConnectionError" and type(link).__module__.startswith(
        "openai"
    )


#: What the HTTP clients under litellm raise for a connection that closed while the answer
#: was read (aiohttp's, and httpx's own transport's).
_MID_ANSWER = frozenset(
    {
        "ClientPayloadError",
        "ContentLengthError",
        "TransferEncodingError",
        "RemoteProtocolError",
        "ReadError",
    }
)


def _dropped(chain: list[BaseException]) -> str | None:
    """What the HTTP client said of a connection that closed mid-answer (the server had
    answered: "nothing answered ... is the server running?" is wrong), or None."""
    for link in chain:
        if type(link).__name__ in _MID_ANSWER:
            return " ".join(str(link).split()) or type(link).__name__
    return None


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _detail(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _unreadable_body(chain: list[BaseException]) -> bool:
    """Whether the server answered with a success whose body could not be read as JSON text
    (cut short, malformed, not UTF-8): litellm labels it HTTP 500, though none was answered.
    An HTTP error whose body is no JSON (a proxy's 502 page) is the error it is."""
    return not any(_is_http_status(link) for link in chain) and any(
        isinstance(link, (json.JSONDecodeError, UnicodeDecodeError)) for link in chain
    )


def _stream_error(chain: list[BaseException]) -> dict[str, object] | None:
    """The error event a server sent in its stream (the OpenAI SDK raises its ``APIError``
    with the event's ``error`` as ``body``; litellm wraps it as HTTP 500), or None."""
    for link in chain:
        if type(link).__name__ == "APIError" and type(link).__module__.startswith("openai"):
            body = getattr(link, "body", None)
            if isinstance(body, dict):
                return body
    return None


class ErrorBody(Exception):
    """A streamed request answered with a 200 whose one JSON body is ``{"error": ...}``, not
    server-sent events: raised as the stream opens (``error`` is the body's error, with its
    ``message`` and ``code``), typed by ``classify`` as the same body answering a whole
    request is."""

    def __init__(self, error: dict[str, object]) -> None:
        super().__init__(error)
        self.error = error

    @classmethod
    def of(cls, body: object) -> ErrorBody | None:
        """The error of a JSON ``body`` that is ``{"error": ...}`` (an object with a
        ``message`` and maybe a ``code``, or a text: its message), or None."""
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, str) and error.strip():
            return cls({"message": error, "code": None})
        if isinstance(error, dict) and error:
            return cls({"message": error.get("message"), "code": error.get("code")})
        return None


def _body_error(chain: list[BaseException]) -> dict[str, object] | None:
    """The ``{"error": ...}`` a server answered with a 200 (OpenRouter does), or None.

    litellm raises it as a bare ``Exception`` whose ``status_code`` is the error's ``code``
    and whose ``message`` is its message; it is then labelled with that status as if the
    server had answered it. An error without a ``code`` gets litellm's own 422, which is no
    word of the server's: it is taken as no code (a server failure, retried, as an error
    event without a code is), so a provider's own ``"code": 422`` is read the same way (the
    two cannot be told apart)."""
    if any(_is_http_status(link) for link in chain):
        return None
    for link in chain:
        if isinstance(link, ErrorBody):
            return link.error
        if type(link) is Exception and hasattr(link, "status_code") and hasattr(link, "message"):
            code = None if link.status_code == _LITELLM_NO_CODE else link.status_code
            return {"message": link.message, "code": code}
    return None


#: The status litellm gives the error of a 200's body that has no ``code``.
_LITELLM_NO_CODE = 422


def _event_code(event: dict[str, object]) -> int | None:
    """The HTTP-like status an error event's ``code`` gives (OpenRouter sends a word there)."""
    code = event.get("code")
    if isinstance(code, str) and code.isdigit():
        return int(code)
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _streamed_error(
    event: dict[str, object],
    *,
    model: str,
    api_base: str | None,
    at: str,
    tries: str,
    said_in: str = "its stream",
) -> ModelError:
    """The error for an error event in a stream (or an error a 200 answered ``said_in`` its
    body), typed by its code; its ``status`` is None (the server answered 200)."""
    message = event.get("message")
    said = json.dumps(message if isinstance(message, str) else event, ensure_ascii=False)
    about = ", ".join(
        part
        for part in (
            f"code {event['code']}" if event.get("code") is not None else "",
            str(event["type"]) if isinstance(event.get("type"), str) else "",
        )
        if part
    )
    text = (
        f"{at} sent an error in {said_in} for model {model!r} ({tries}): "
        f"{said[:300]}{f' ({about})' if about else ''}"
    )
    code = _event_code(event)
    if code == 429:
        return ModelRateLimitError(
            f"{text}: retry later, send fewer requests at once, or raise max_retries",
            model=model,
            api_base=api_base,
        )
    if code is not None and 400 <= code < 500:
        return ModelRequestRejected(
            f"{text}; not retried: the server cannot serve this request (the same request "
            "fails the same way)",
            model=model,
            api_base=api_base,
        )
    return ModelServerError(
        f"{text}: the server failed while it generated the answer; its log says why",
        model=model,
        api_base=api_base,
    )


def classify(
    exc: BaseException,
    *,
    model: str,
    api_base: str | None,
    attempts: int,
    timeout_s: float | None,
) -> ModelError:
    """The ``ModelError`` for ``exc`` raised by ``litellm.acompletion`` (after ``attempts`` tries)."""
    at = where(api_base, model)
    tries = f"{attempts} attempt(s)"
    chain = list(_chain(exc))
    text = " ".join(str(link).lower() for link in chain)
    status = _status(exc)
    if any(marker in text for marker in _MISSING_KEY_MARKERS):
        return MissingAPIKeyError(
            f"model {model!r} at {at} needs an API key and none was given; nothing was sent: "
            "pass LiteLLMModel(..., api_key=...) or set the provider's key variable (e.g. "
            "OPENAI_API_KEY); a local server that checks no key still needs a placeholder "
            "such as api_key='sk-local'",
            model=model,
            api_base=api_base,
        )
    if _NO_PROVIDER_MARKER in text:  # litellm's own refusal: it sent nothing (its "400")
        return ModelNotFoundError(
            f"litellm does not know which provider serves model {model!r}; nothing was sent: "
            f"give the name a provider prefix, e.g. 'openai/{model}' (and api_base for an "
            "OpenAI-compatible server of your own)",
            model=model,
            api_base=api_base,
        )
    if (event := _stream_error(chain)) is not None:
        return _streamed_error(event, model=model, api_base=api_base, at=at, tries=tries)
    if (event := _body_error(chain)) is not None:
        return _streamed_error(
            event,
            model=model,
            api_base=api_base,
            at=at,
            tries=tries,
            said_in="a 200 answer's body",
        )
    if status == 408 and any(_is_http_status(link) for link in chain):
        # the server (or a proxy in front of it) answered 408: no timeout of ours ran out
        return ModelTimeoutError(
            f"{at} answered HTTP 408 ({_detail(exc)}) for model {model!r} ({tries}): the "
            "server, or a proxy in front of it, gave up on the request; check that the server "
            "is not overloaded or stuck, and the proxy's own timeout",
            model=model,
            api_base=api_base,
            status=status,
        )
    if any(_is_timeout(link) for link in chain) or status == 408:
        limit = f"{timeout_s:g} s" if timeout_s is not None else "litellm's default timeout"
        return ModelTimeoutError(
            f"model {model!r} at {at} did not answer within {limit} ({tries}): raise "
            "timeout_s, or check that the server is not overloaded or stuck",
            model=model,
            api_base=api_base,
            status=status,
        )
    if dropped := _dropped(chain):
        return ModelConnectionError(
            f"the connection closed mid-answer ({dropped}) at {at} for model {model!r} "
            f"({tries}): the server stopped before its answer was complete (it crashed or "
            "was restarted) or a proxy in front of it cut the response; the server's log (or "
            "the proxy's) says why",
            model=model,
            api_base=api_base,
        )
    if any(_is_connection(link) for link in chain):
        return ModelConnectionError(
            f"nothing answered at {at} for model {model!r} ({tries}; {_detail(chain[-1])}): "
            "is the server running and listening at that address and port?",
            model=model,
            api_base=api_base,
        )
    if _NOT_JSON_MARKER in text:
        return ModelResponseNotJSON(
            f"{at} answered model {model!r} with a body that is not a JSON completion "
            f"({_detail(exc)}); not retried: api_base must be the root of an OpenAI-compatible "
            "API (it usually ends in /v1), not a web page or another service",
            model=model,
            api_base=api_base,
            status=status,
        )
    if _unreadable_body(chain):
        return ModelResponseNotJSON(
            f"{at} answered model {model!r} with a body that is not whole JSON "
            f"({_detail(exc)}); not retried: the same request gets the same body. The server "
            "(or a proxy in front of it) sent JSON cut short, malformed or not in UTF-8: its "
            "log says why",
            model=model,
            api_base=api_base,
        )
    if any(marker in text for marker in _MALFORMED_MARKERS):
        return ModelResponseError(
            f"{at} answered model {model!r} with JSON that is not a chat completion (litellm "
            "could not read it: a choice without a message, usage that is not numbers, "
            "choices that are not a list); not retried: the same request gets the same body, "
            "check that the server speaks the OpenAI chat completions format",
            model=model,
            api_base=api_base,
            status=status,
        )
    if UNFINISHED_MARKER in text:
        return ModelServerError(
            f"model {model!r} at {at} ended its stream before it said it was finished (no "
            f"finish_reason; {tries}): the server stopped mid-answer (it crashed or was "
            "restarted) or a proxy in front of it cut the response; the server's log (or the "
            "proxy's) says why",
            model=model,
            api_base=api_base,
        )
    return _by_status(exc, status, model=model, api_base=api_base, at=at, tries=tries)


def _by_status(
    exc: BaseException,
    status: int | None,
    *,
    model: str,
    api_base: str | None,
    at: str,
    tries: str,
) -> ModelError:
    detail = _detail(exc)
    if status in (401, 403):
        return ModelAuthenticationError(
            f"{at} refused the API key for model {model!r} (HTTP {status}: {detail}); not "
            "retried: check api_key (or the provider's key variable) and that the key may "
            "use this model",
            model=model,
            api_base=api_base,
            status=status,
        )
    if status == 404:
        return ModelNotFoundError(
            f"{at} answered HTTP 404 for model {model!r} ({detail}); not retried: the server "
            "does not serve a model by that name (a local server lists its names at "
            "GET <api_base>/models), or api_base has the wrong path (it usually ends in /v1)",
            model=model,
            api_base=api_base,
            status=status,
        )
    if status == 429:
        return ModelRateLimitError(
            f"model {model!r} at {at} is rate-limiting ({tries}; {detail}): retry later, "
            "send fewer requests at once, or raise max_retries",
            model=model,
            api_base=api_base,
            status=status,
        )
    if status is not None and (status >= 500 or status == 409):
        return ModelServerError(
            f"model {model!r} at {at} failed with HTTP {status} ({tries}; {detail}): the "
            "server's log says why; if it is overloaded retry later or raise max_retries",
            model=model,
            api_base=api_base,
            status=status,
        )
    if status is not None and 400 <= status < 500:
        return ModelRequestRejected(
            f"{at} refused the request to model {model!r} (HTTP {status}: {detail}); not "
            "retried: the request does not suit this server (a field it does not accept, a "
            "value out of range, a context too long)",
            model=model,
            api_base=api_base,
            status=status,
        )
    return ModelError(
        f"model {model!r} at {at} failed ({type(exc).__name__}: {detail}); not retried",
        model=model,
        api_base=api_base,
        status=status,
    )


def empty_response(model: str, api_base: str | None) -> ModelEmptyResponse:
    """The error for a completion whose ``choices`` list is empty."""
    return ModelEmptyResponse(
        f"model {model!r} at {where(api_base, model)} returned a completion with no choices; "
        "not retried: the server generated nothing (its log says why; some providers drop "
        "a choice their content filter removed)",
        model=model,
        api_base=api_base,
    )


#: How much of a refusal its error quotes.
_REFUSAL_QUOTED = 500


def refused(model: str, api_base: str | None, refusal: str) -> ModelResponseError:
    """The error for an answer that is a refusal (OpenAI's ``message.refusal``, no content)."""
    said = refusal if len(refusal) <= _REFUSAL_QUOTED else refusal[:_REFUSAL_QUOTED] + "..."
    error = ModelResponseError(
        f"model {model!r} at {where(api_base, model)} refused to answer: "
        f"{json.dumps(said, ensure_ascii=False)}; not retried: the same request would be "
        "refused the same way (change the task, the instructions or the output type)",
        model=model,
        api_base=api_base,
    )
    error.refusal = refusal
    return error


def cut_off(model: str, api_base: str | None, finish_reason: str) -> ModelResponseError:
    """The error for a completion that stopped before it held anything (no text, no tool
    call): blocked by the provider's content filter, or out of output tokens at once."""
    why = CUT_OFF.get(finish_reason, f"finish_reason {finish_reason!r}")
    return ModelResponseError(
        f"model {model!r} at {where(api_base, model)} stopped before it answered anything: "
        f"{why}; not retried",
        model=model,
        api_base=api_base,
    )


def broke_off(
    exc: BaseException,
    *,
    model: str,
    api_base: str | None,
    timeout_s: float | None,
    chunks: int,
) -> ModelError:
    """The error for a stream that failed after it had started: typed as ``classify`` types
    it, never retried (its first pieces were already handed out)."""
    error = classify(exc, model=model, api_base=api_base, attempts=1, timeout_s=timeout_s)
    return type(error)(
        f"{error}; the stream broke off after {chunks} chunk(s) and was not retried (its "
        "first pieces were already published): the partial response was discarded",
        model=model,
        api_base=api_base,
        status=error.status,
    )


def not_a_stream(content_type: str, model: str, api_base: str | None) -> ModelResponseError:
    """The error for a stream that held no part of a completion: a body that is not
    server-sent events (a web page, a server that ignores ``stream``), or no choices."""
    at = where(api_base, model)
    kind = content_type.split(";", 1)[0].strip()
    if kind == "application/json":
        return ModelResponseError(
            f"{at} answered a streamed request to model {model!r} with one JSON body, not "
            "server-sent events; not retried: the server does not stream, pass "
            "LiteLLMModel(..., stream=False) to ask it for whole responses",
            model=model,
            api_base=api_base,
        )
    if kind and kind != "text/event-stream":
        return ModelResponseNotJSON(
            f"{at} answered a streamed request to model {model!r} with {kind!r}, not "
            "server-sent events; not retried: api_base must be the root of an "
            "OpenAI-compatible API (it usually ends in /v1), not a web page or another service",
            model=model,
            api_base=api_base,
        )
    return ModelEmptyResponse(
        f"model {model!r} at {at} streamed a completion with no choices; not retried: the "
        "server generated nothing (its log says why; some providers drop a choice their "
        "content filter removed)",
        model=model,
        api_base=api_base,
    )
