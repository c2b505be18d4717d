"""What the server answers a request whose head (request line and headers) is huge: a token
past the largest one it reads is the JSON 401 every other bad token gets, whichever side of
the limit it falls on, and a long path, a long query or many headers get a JSON answer too;
only a head past the transport's bound (``MAX_REQUEST_HEAD_BYTES``) is refused by uvicorn
itself. Real HTTP against the real server (``served``), as a client would send it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from operator_server import BASE, Served
from test_api import unchanged
from test_hostile import problem

from tinyagents.server.app import MAX_TOKEN_BYTES
from tinyagents.server.serve import MAX_REQUEST_HEAD_BYTES


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "size",
    [
        MAX_TOKEN_BYTES - 1,
        MAX_TOKEN_BYTES,
        MAX_TOKEN_BYTES + 1,
        70_000,  # the size first reported: uvicorn's plain-text 400
        200_000,
        MAX_REQUEST_HEAD_BYTES - 1024,
    ],
)
async def test_a_huge_bearer_token_is_a_json_401_like_any_bad_token(
    served: Served, size: int
) -> None:
    run = await served.start_run("acme")
    for method, path in (
        ("GET", f"{BASE}/runs/{run.run_id}"),
        ("GET", f"{BASE}/runs"),
        ("POST", f"{BASE}/runs/{run.run_id}/pause"),
    ):
        r = await served.client.request(method, path, headers=bearer("A" * size))
        body = problem(r, 401)
        assert r.headers["www-authenticate"] == "Bearer"
        assert set(body) == {"type", "detail", "message"}, body
        assert body["type"] == "unauthorized", body
        if size > MAX_TOKEN_BYTES:
            assert str(MAX_TOKEN_BYTES) in body["detail"], body
    await unchanged(served, run)


Headers = list[tuple[str, str]]


async def raw_request(
    s: Served, headers: Headers | dict[str, str], path: str = f"{BASE}/runs"
) -> tuple[int, bytes, bytes] | None:
    """A GET written on a socket of its own in 8 KB pieces, the server (in this event loop)
    reading each before the next is sent, as a slow network delivers a head: its status,
    head and body, or None when the server refused it mid-way (the connection broken or
    reset). (httpx refuses to send a URL past 64 KiB, so long URLs go this way too.)"""
    items = headers.items() if isinstance(headers, dict) else headers
    host, port = s.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    data = (head + "".join(f"{k}: {v}\r\n" for k, v in items) + "\r\n").encode()
    try:
        for start in range(0, len(data), 8192):
            writer.write(data[start : start + 8192])
            await writer.drain()
            for _ in range(3):  # let the server's protocol take in this piece
                await asyncio.sleep(0)
        answer = await reader.read()
    except ConnectionError:
        return None
    finally:
        writer.close()
    head_bytes, _, body = answer.partition(b"\r\n\r\n")
    return int(answer.split(b" ", 2)[1]), head_bytes.lower(), body


async def json_answer(
    s: Served, path: str, headers: Headers | dict[str, str]
) -> tuple[int, dict[str, Any] | list[Any]]:
    """``raw_request``'s answer, which must be JSON: its status and body."""
    answer = await raw_request(s, headers, path)
    assert answer is not None, f"no answer to a {len(path)}-character path"
    status, head, body = answer
    assert b"content-type: application/json" in head, (status, head, body[:300])
    return status, json.loads(body)


@pytest.mark.parametrize("size", [MAX_TOKEN_BYTES + 1, 150_000])
async def test_a_huge_access_token_in_the_query_is_a_json_401(served: Served, size: int) -> None:
    status, body = await json_answer(served, f"{BASE}/events?access_token={'A' * size}", {})
    assert status == 401 and isinstance(body, dict), (status, body)
    assert str(MAX_TOKEN_BYTES) in body["detail"]


async def test_a_huge_non_bearer_authorization_header_is_a_json_401(served: Served) -> None:
    r = await served.client.get(f"{BASE}/runs", headers={"Authorization": "Basic " + "Q" * 100_000})
    problem(r, 401)


async def test_a_head_past_the_transport_bound_is_refused_and_the_server_goes_on(
    served: Served,
) -> None:
    """Past ``MAX_REQUEST_HEAD_BYTES`` uvicorn refuses the request before the app sees it (a
    400 in plain text, or a broken connection); the server keeps answering others."""
    answer = await raw_request(served, bearer("A" * (MAX_REQUEST_HEAD_BYTES + 100_000)))
    assert answer is None or answer[0] == 400, answer
    ok = await served.client.get(f"{BASE}/runs", headers=served.as_("alice"))
    assert ok.status_code == 200


@pytest.mark.parametrize("size", [30_000, 40_000, MAX_TOKEN_BYTES + 1, 200_000])
async def test_a_huge_token_in_small_pieces_is_still_a_json_401(served: Served, size: int) -> None:
    """Delivered in 8 KB pieces, the head is buffered incomplete for a while: the transport's
    bound (not the size of one read) decides, and it admits the token for the app to refuse.
    (With h11's default bound, 16 KiB, all four were a plain-text 400 or a broken pipe.)"""
    status, body = await json_answer(served, f"{BASE}/runs", bearer("A" * size))
    assert status == 401 and isinstance(body, dict), (status, body)
    expected = str(MAX_TOKEN_BYTES) if size > MAX_TOKEN_BYTES else "not a valid Biscuit"
    assert expected in body["detail"], body


# --------------------------------------------------------------------------- long heads


@pytest.mark.parametrize("size", [10_000, 100_000, 200_000])
async def test_a_very_long_path_is_a_json_404(served: Served, size: int) -> None:
    for path in (f"{BASE}/runs/{'r' * size}", f"{BASE}/{'x' * size}"):
        status, body = await json_answer(served, path, served.as_("alice"))
        assert status == 404 and isinstance(body, dict) and body["detail"], (status, body)


@pytest.mark.parametrize("size", [10_000, 100_000, 200_000])
async def test_a_very_long_query_is_a_json_answer(served: Served, size: int) -> None:
    run = await served.start_run("acme")
    cases: list[tuple[str, int]] = [
        (f"{BASE}/runs?root_run_id={'r' * size}", 422),
        (f"{BASE}/runs?status={'s' * size}", 422),
        (f"{BASE}/runs/{run.run_id}/trace?limit={'9' * size}", 422),
        (f"{BASE}/events?follow=false&run_id={'r' * size}", 422),
        # an unknown parameter is refused (it was ignored: a typo'd filter answered all)
        (f"{BASE}/runs?junk={'j' * size}", 422),
        (f"{BASE}/runs?" + "&".join(f"k{i}=v" for i in range(size // 8)), 422),
        (f"{BASE}/runs?{'k' * size}=v", 422),
    ]
    for path, expected in cases:
        status, body = await json_answer(served, path, served.as_("alice"))
        assert status == expected, (path[:80], status, str(body)[:300])
        assert isinstance(body, dict) and "query" in body["message"], body
        assert len(body["message"]) < 2_000, body["message"][:300]  # never the query back
    await unchanged(served, run)


@pytest.mark.parametrize("count", [100, 2000, 8000])
async def test_many_headers_are_answered(served: Served, count: int) -> None:
    alice = ("Authorization", f"Bearer {served.tokens['alice']}")
    headers: Headers = [(f"x-h{i}", "v") for i in range(count)] + [alice]
    status, body = await json_answer(served, f"{BASE}/runs", headers)
    assert status == 200, (status, body)
    # Many Authorization headers: none is read (a proxy in front may have read another),
    # whichever comes first.
    many = [alice] * (count // 20) + [("Authorization", "Bearer no")]
    bad_first = [("Authorization", "Bearer no"), *many]
    for given in (many, bad_first):
        status, body = await json_answer(served, f"{BASE}/runs", given)
        assert status == 401, (status, body)
        assert isinstance(body, dict) and f"given {len(given)} times" in body["message"], body


async def test_many_headers_with_a_bad_token_are_a_json_401(served: Served) -> None:
    headers = [(f"x-h{i}", "v" * 20) for i in range(4000)] + [("Authorization", "Bearer no")]
    problem(await served.client.get(f"{BASE}/runs", headers=headers), 401)


def test_the_transport_bound_is_set_on_the_served_config() -> None:
    """The bound is uvicorn's h11 ``max_incomplete_event_size``, on the h11 implementation
    chosen explicitly (httptools, picked by uvicorn's "auto" when installed, has none)."""
    import uvicorn

    from tinyagents.server.serve import uvicorn_config

    config = uvicorn_config(object())
    assert isinstance(config, uvicorn.Config)
    assert config.http == "h11"
    assert config.h11_max_incomplete_event_size == MAX_REQUEST_HEAD_BYTES


# --------------------------------------------------------------------------- uvicorn's own 400


@pytest.mark.parametrize(
    "head",
    [
        b"GET /<script>alert(1)</script> x HTTP/1.1\r\nHost: x\r\n\r\n",  # a space in the target
        b"GET / HTTP/1.1\r\nHost: x\r\nX-<b>: <script>\r\n\r\n",  # no header name
        b"<html><script>alert(1)</script>\r\n\r\n",  # no request line
    ],
)
async def test_uvicorns_400_to_a_request_it_cannot_parse_echoes_nothing(
    served: Served, head: bytes
) -> None:
    """A request uvicorn's h11 protocol cannot parse is refused before the app sees it, with
    a plain-text 400 whose headers are fixed in its code: not even the server's configured
    default headers are added, so it lacks the ``nosniff`` every answer of the app carries
    (docs/operator.md says so). Its body is a fixed sentence, never the request echoed, so
    there is nothing of the client's for a browser to sniff as HTML. Should this fail because
    uvicorn adds headers there, the docs' exception can go."""
    host, port = served.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 60)
    finally:
        writer.close()
    head_bytes, _, body = answer.partition(b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"content-type: text/plain" in head_bytes.lower(), head_bytes
    assert body == b"Invalid HTTP request received.", body
    assert b"x-content-type-options" not in head_bytes.lower(), head_bytes
    ok = await served.client.get(f"{BASE}/runs", headers=served.as_("alice"))
    assert ok.status_code == 200 and ok.headers["x-content-type-options"] == "nosniff"
