"""The machine-readable kind of every error answer of the operator API.

Each error body is ``{"type": ..., "message": ..., "detail": ...}``: ``message`` and
``detail`` are for people and may be reworded; ``type`` is a short snake_case code a client
branches on instead of parsing the text. It follows from the status alone (``ERROR_TYPES``),
so every path that answers an error (``Problem``, the exception handlers, the middleware
that answers before the app) says the same code for the same status. A library error
(``tinyagents.errors``) is given its status in one table (``LIBRARY_ERRORS``), not at each
place that catches it.
"""

from __future__ import annotations

from typing import Any

from tinyagents.errors import (
    AuthError,
    ControlPlaneUnavailable,
    InvalidCommandError,
    ReceiptTimeout,
    RuntimeClosed,
    StoreError,
)

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

#: The status of the answer a library error causes, the first class that matches (a
#: subclass before its base: ``ReceiptTimeout`` is a ``StoreError``).
LIBRARY_ERRORS: tuple[tuple[type[Exception], int], ...] = (
    (ReceiptTimeout, 504),  # the owner did not answer in time: it may still be applied
    (AuthError, 401),
    (InvalidCommandError, 422),
    (StoreError, 503),
    (RuntimeClosed, 503),
    (ControlPlaneUnavailable, 503),
)


def error_type(status: int) -> str:
    """The ``type`` of an error answer of ``status`` (``"error"`` for one not in the table,
    which the tests keep from happening)."""
    return ERROR_TYPES.get(status, "error")


def library_status(exc: BaseException) -> int:
    """The status of the answer ``exc`` (a library error) causes; 500 for one not listed."""
    for cls, status in LIBRARY_ERRORS:
        if isinstance(exc, cls):
            return status
    return 500


def error_body(status: int, message: str, detail: Any = None) -> dict[str, Any]:
    """The body of an error answer: ``detail`` is ``message`` unless given (a 422's list)."""
    return {
        "type": error_type(status),
        "detail": message if detail is None else detail,
        "message": message,
    }
