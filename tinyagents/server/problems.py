"""The machine-readable kind of every error answer of the operator API.

Each error body is ``{"type": ..., "message": ..., "detail": ...}``: ``message`` and
``detail`` are for people and may be reworded; ``type`` is a short snake_case code a client
branches on instead of parsing the text. It says the cause: by default the status's code
(``ERROR_TYPES``), so every path that answers an error (``Problem``, the exception handlers,
the middleware that answers before the app) says the same code for the same status; where
the status alone would mislead, a cause of its own (``CAUSE_TYPES``: a damaged stored record
is a 500, but no bug, and unlike a 503 no retry helps). A body that is no JSON is a 400
``malformed_request``; JSON that is no valid request (a field missing, a blank message) a
422 ``invalid_request``. A library error (``tinyagents.errors``) is given its status and
type in one table (``LIBRARY_ERRORS``), not at each place that catches it.
"""

from __future__ import annotations

import json
from typing import Any

from tinyagents.errors import (
    AuthError,
    ControlPlaneUnavailable,
    DamagedData,
    InvalidCommandError,
    ReceiptTimeout,
    RuntimeClosed,
    StoreError,
)
from tinyagents.events.models import surrogates_escaped

#: The ``type`` of an error answer, by its status. A new status the API answers needs a
#: code here (tests/server/test_error_types.py walks the routes' documented statuses).
ERROR_TYPES: dict[int, str] = {
    400: "malformed_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
    504: "timeout",
}

#: The codes a cause gives where its status's would mislead, each with the one status it is
#: answered with (a code never changes its meaning, nor its status).
CAUSE_TYPES: dict[str, int] = {
    # a stored record no longer reads (written by hand, a disk fault): a 500, as the server
    # cannot answer, but no bug ("internal_error") and no outage ("unavailable", a 503 to
    # retry): reading it again reads the same bytes; the record needs repairing
    "damaged_data": 500,
}

#: The status and type (None: the status's) of the answer a library error causes, the first
#: class that matches (a subclass before its base: ``ReceiptTimeout`` and ``DamagedData``
#: are ``StoreError``s).
LIBRARY_ERRORS: tuple[tuple[type[Exception], int, str | None], ...] = (
    (ReceiptTimeout, 504, None),  # the owner did not answer in time: it may still be applied
    (DamagedData, 500, "damaged_data"),
    (AuthError, 401, None),
    (InvalidCommandError, 422, None),
    (StoreError, 503, None),
    (RuntimeClosed, 503, None),
    (ControlPlaneUnavailable, 503, None),
)


def error_type(status: int) -> str:
    """The ``type`` of an error answer of ``status`` (``"error"`` for one not in the table,
    which the tests keep from happening)."""
    return ERROR_TYPES.get(status, "error")


def library_status(exc: BaseException) -> int:
    """The status of the answer ``exc`` (a library error) causes; 500 for one not listed."""
    return _library(exc)[0]


def library_type(exc: BaseException) -> str:
    """The ``type`` of the answer ``exc`` (a library error) causes."""
    status, kind = _library(exc)
    return kind or error_type(status)


def _library(exc: BaseException) -> tuple[int, str | None]:
    for cls, status, kind in LIBRARY_ERRORS:
        if isinstance(exc, cls):
            return status, kind
    return 500, None


def error_body(
    status: int, message: str, detail: Any = None, *, kind: str | None = None
) -> dict[str, Any]:
    """The body of an error answer: ``detail`` is ``message`` unless given (a 422's list);
    ``kind``, its ``type`` when the cause has one of its own (``CAUSE_TYPES``), else the
    status's."""
    return {
        "type": kind or error_type(status),
        "detail": message if detail is None else detail,
        "message": message,
    }


def api_json(content: Any) -> bytes:
    """``content`` as the API writes JSON: compact, UTF-8, a lone surrogate (an event's text
    from a model or a tool) as JSON's escape (``surrogates_escaped``), for UTF-8 has no bytes
    for it. Only a text that fails to encode is written again."""
    text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return surrogates_escaped(text).encode("utf-8")


async def send_error(send: Any, status: int, message: str) -> None:
    """Answer an error from ASGI middleware, before the app (a body past the limit, a bad
    request target, a page of another origin): the API's error body in its JSON."""
    body = api_json(error_body(status, message))
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
