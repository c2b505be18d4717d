"""``serve --insecure-dev``: a server without tokens answers this machine's own clients only.

Binding a loopback address keeps other machines out, but not a web page another site serves
to the developer's browser: through DNS rebinding (a name of the attacker's that resolves to
127.0.0.1) its scripts reach the server with their own ``Host``, and a "simple" cross-site
POST (``text/plain``, no preflight) reaches it from any page. ``LoopbackOnly`` refuses both:
the ``Host`` must name a loopback address (``localhost``, ``127.0.0.0/8``, ``::1``), and an
``Origin``, when the browser sends one, must be such an address too (``null``, which a
sandboxed frame sends, is refused). Clients that send no ``Origin`` (curl, the CLI, the
console's own same-origin reads) are unaffected.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from tinyagents.server.problems import send_error


def is_loopback(hostname: str | None) -> bool:
    """Whether ``hostname`` (no port, IPv6 without brackets) names this machine."""
    if not hostname:
        return False
    if hostname.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str | None:
    """The name in a ``Host`` header (``127.0.0.1:8000``, ``[::1]:8000``, ``localhost``)."""
    try:
        return urlsplit(f"//{host}").hostname
    except ValueError:  # a malformed port or bracket
        return None


class LoopbackOnly:
    """ASGI middleware: a request whose ``Host`` or ``Origin`` is not a loopback address is
    answered 403 (JSON) before the app sees it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin")
        problem = None
        if not is_loopback(_host_name(host)):
            problem = (
                f"Host {host!r} is not this machine: a server run with --insecure-dev answers "
                "requests to a loopback address only (http://127.0.0.1:PORT)"
            )
        elif origin is not None and not is_loopback(_origin_name(origin)):
            problem = (
                f"a request from {origin.decode('latin-1')!r}: a server run with --insecure-dev "
                "answers pages of this machine only"
            )
        if problem is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send_error(send, 403, problem)


def _origin_name(origin: bytes) -> str | None:
    try:
        return urlsplit(origin.decode("latin-1")).hostname
    except ValueError:
        return None
