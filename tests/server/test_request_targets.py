"""A request target in absolute form (``GET http://host:port/api/agents/runs HTTP/1.1``):
RFC 9112 section 3.2.2 has a server accept it (a client speaking to a proxy sends it, and some
clients send it to a server directly). uvicorn's h11 protocol, which ``serving`` chooses, put
the whole URL in the path, so every such request was a 404. The path is now the URL's, and
its host stands for the ``Host`` header (as the RFC says: a server run with no tokens still
answers only a target naming this machine)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from operator_server import BASE, Served, _serve

from tinyagents import Runtime
from tinyagents.server import Control, bind, create_app, serving
from tinyagents.server.serve import url_of


async def send(
    url: str, target: str, headers: dict[str, str], method: str = "GET"
) -> tuple[int, Any]:
    """One request with ``target`` as its request target, sent as written."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
    writer.write(("\r\n".join([*lines, "Connection: close", "", ""])).encode())
    await writer.drain()
    try:
        answer = await reader.read()
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if b"application/json" in head.lower() else body


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async for s in _serve(tmp_path, store=None):
        yield s


async def test_an_absolute_form_target_reaches_its_path(served: Served) -> None:
    s = served
    run = await s.start_run("acme")
    hostport = s.url.removeprefix("http://")
    auth = {"Host": hostport, **s.as_("alice")}
    for target in (
        f"http://{hostport}{BASE}/runs",
        f"HTTP://{hostport}{BASE}/runs",
        f"http://{hostport}{BASE}/runs?limit=1",
        f"https://{hostport}{BASE}/runs",
    ):
        status, body = await send(s.url, target, auth)
        assert status == 200, (target, body)
        assert [r["run_id"] for r in body] == [run.run_id], target
    status, body = await send(s.url, f"http://{hostport}{BASE}/runs/{run.run_id}", auth)
    assert status == 200 and body["run_id"] == run.run_id
    # the same answers as the origin form: another tenant's run, an id holding %2F
    for path in (f"{BASE}/runs/{run.run_id}", f"{BASE}/runs/a%2Fb"):
        origin = await send(s.url, path, {"Host": hostport, **s.as_("bob")})
        absolute = await send(s.url, f"http://{hostport}{path}", {"Host": hostport, **s.as_("bob")})
        assert origin == absolute and origin[0] == 404, (path, origin, absolute)
    # no path after the host: the root, as a browser reads http://host
    root = await send(s.url, "/", auth)
    assert await send(s.url, f"http://{hostport}", auth) == root
    assert root[0] in (200, 307, 404), root


@pytest.fixture
async def insecure_url() -> AsyncIterator[str]:
    async with Runtime() as runtime:
        control = Control(runtime)
        sock = bind("127.0.0.1", 0)
        try:
            async with serving(create_app(control, auth=None), sock):
                yield url_of(sock)
        finally:
            control.close()


async def test_the_host_of_an_absolute_target_is_the_one_a_tokenless_server_checks(
    insecure_url: str,
) -> None:
    hostport = insecure_url.removeprefix("http://")
    status, body = await send(insecure_url, f"http://{hostport}{BASE}/runs", {"Host": hostport})
    assert status == 200 and body == []
    # the target names another machine: refused, whatever the Host header says
    status, body = await send(insecure_url, f"http://evil.example{BASE}/runs", {"Host": hostport})
    assert status == 403 and "evil.example" in body["message"], body


async def test_options_asterisk_is_answered_for_the_whole_server(
    served: Served, insecure_url: str
) -> None:
    # ``OPTIONS * HTTP/1.1`` asks about the server, not a resource (RFC 9110 section 9.3.7; a
    # proxy or a load balancer pings with it): it was a 404, as if ``*`` were a missing path.
    # It needs no token (it says nothing of any run); another method with ``*`` is a 400
    # (RFC 9112 section 3.2.4: the asterisk form is OPTIONS' only).
    hostport = served.url.removeprefix("http://")
    assert await send(served.url, "*", {"Host": hostport}, "OPTIONS") == (200, b"")
    status, body = await send(served.url, "*", {"Host": hostport}, "GET")
    assert status == 400 and "OPTIONS" in body["message"], body
    assert body["type"] == "malformed_request", body  # as every error body of the API
    # a tokenless server still answers this machine only
    insecure = insecure_url.removeprefix("http://")
    assert await send(insecure_url, "*", {"Host": insecure}, "OPTIONS") == (200, b"")
    status, _ = await send(insecure_url, "*", {"Host": "attacker.example"}, "OPTIONS")
    assert status == 403


async def raw(url: str, head: list[str]) -> tuple[int, bytes]:
    """One request of ``head``'s lines, no body sent: the status and the body's bytes."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write("\r\n".join([*head, "Connection: close", "", ""]).encode())
    await writer.drain()
    try:
        answer = await reader.read()
    finally:
        writer.close()
    top, _, body = answer.partition(b"\r\n\r\n")
    return int(top.split(b" ", 2)[1]), body


def compact(body: bytes) -> bytes:
    return json.dumps(json.loads(body), ensure_ascii=False, separators=(",", ":")).encode()


async def test_the_errors_answered_before_the_app_are_the_apis_compact_json(
    served: Served, insecure_url: str
) -> None:
    # The 413 of a body past the limit, the 400 of ``GET *`` and the 403 of a page of another
    # origin are answered by middleware before the app: they wrote their JSON with spaces
    # after each separator, where every other answer of the API is compact. A client comparing
    # answers (or a cache keyed on bytes) saw two encodings of one error shape.
    hostport = served.url.removeprefix("http://")
    auth = [f"{k}: {v}" for k, v in served.as_("alice").items()]
    answers = [
        await raw(served.url, [f"GET {BASE}/runs/nope HTTP/1.1", f"Host: {hostport}", *auth]),
        await raw(
            served.url,
            [
                f"POST {BASE}/runs/nope/commands HTTP/1.1",
                f"Host: {hostport}",
                *auth,
                "Content-Type: application/json",
                f"Content-Length: {10**12}",
            ],
        ),
        await raw(served.url, ["GET * HTTP/1.1", f"Host: {hostport}"]),
    ]
    insecure = insecure_url.removeprefix("http://")
    answers.append(
        await raw(
            insecure_url,
            [
                f"POST {BASE}/runs/nope/commands HTTP/1.1",
                f"Host: {insecure}",
                "Origin: http://evil.example",
                "Content-Length: 0",
            ],
        )
    )
    assert [status for status, _ in answers] == [404, 413, 400, 403], answers
    for status, body in answers:
        assert body == compact(body), (status, body)
