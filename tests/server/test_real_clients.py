"""The operator API driven by the clients operators use, over real HTTP: ``curl`` (HTTP/1.0,
``Expect: 100-continue``, a chunked body, ``--compressed``, ``-I``, ``-N`` on the event
stream), Python's ``urllib.request`` (a connection per request) and ``httpx`` keeping one
connection alive across the end of an event stream. Malformed requests are test_hostile's."""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.error
import urllib.request

import pytest
from operator_server import BASE, Served
from test_api import unchanged

needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


async def curl(*args: str, stdin: bytes | None = None) -> tuple[str, bytes]:
    """``curl -s -i ARGS``: the final head (status line and headers, as text) and the body."""
    proc = await asyncio.create_subprocess_exec(
        "curl", "-s", "-i", "--max-time", "30", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode == 0, (proc.returncode, out[:300])
    while out.startswith(b"HTTP/1.1 100"):  # the interim answer to Expect: 100-continue
        out = out.split(b"\r\n\r\n", 1)[1]
    head, _, body = out.partition(b"\r\n\r\n")
    return head.decode(), body


def auth(s: Served, who: str = "alice") -> list[str]:
    return ["-H", f"Authorization: Bearer {s.tokens[who]}"]


def status(head: str) -> int:
    return int(head.split(" ", 2)[1])


def header(head: str, name: str) -> str | None:
    for line in head.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.lower() == name:
            return value.strip()
    return None


@needs_curl
@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["-0"],  # HTTP/1.0
        ["-H", "Expect: 100-continue"],
        ["-H", "Transfer-Encoding: chunked"],
        ["-0", "-H", "Transfer-Encoding: chunked"],
    ],
    ids=["1.1", "1.0", "expect-100", "chunked", "1.0-chunked"],
)
async def test_curl_sends_a_command_however_it_frames_the_body(
    served: Served, extra: list[str]
) -> None:
    run = await served.start_run("acme")
    url = f"{served.url}{BASE}/runs/{run.run_id}/steer"
    body = b'{"message": "hello", "correlation_id": "c-1"}'
    ctype = ["-H", "Content-Type: application/json"]
    head, got = await curl(*auth(served), *ctype, *extra, "--data-binary", "@-", url, stdin=body)
    assert status(head) == 200, (head, got)
    assert json.loads(got)["status"] == "accepted" and json.loads(got)["correlation_id"] == "c-1"


@needs_curl
@pytest.mark.parametrize(
    ("ctype", "content"),
    [
        ("application/json; charset=utf-8", '{"message": "héllo"}'.encode()),
        ("application/json;charset=UTF-8", b'{"message": "hello"}'),
        ("Application/JSON", b'{"message": "hello"}'),
        ("application/json", b'\xef\xbb\xbf{"message": "hello"}'),  # a UTF-8 byte-order mark
    ],
)
async def test_a_json_body_with_a_charset_or_a_byte_order_mark_is_taken(
    served: Served, ctype: str, content: bytes
) -> None:
    run = await served.start_run("acme")
    url = f"{served.url}{BASE}/runs/{run.run_id}/steer"
    args = ["-H", f"Content-Type: {ctype}", "--data-binary", "@-", url]
    head, got = await curl(*auth(served), *args, stdin=content)
    assert status(head) == 200 and json.loads(got)["status"] == "accepted", (head, got)


@needs_curl
@pytest.mark.parametrize("extra", [[], ["-0"], ["--compressed"], ["-H", "Accept: text/html"]])
async def test_curl_reads_json_and_its_head_whatever_it_asks(
    served: Served, extra: list[str]
) -> None:
    """HTTP/1.0 gets the whole body and a closed connection; ``--compressed`` an identity
    body (the server does not compress); an ``Accept`` the API has no answer for still the
    JSON (not a 406); ``-I`` (HEAD) the same head without a body."""
    run = await served.start_run("acme")
    url = f"{served.url}{BASE}/runs/{run.run_id}"
    head, got = await curl(*auth(served), *extra, url)
    assert status(head) == 200 and json.loads(got)["run_id"] == run.run_id, head
    assert header(head, "content-type") == "application/json"
    assert header(head, "content-encoding") is None
    if "-0" in extra:
        assert header(head, "connection") == "close"
    head, got = await curl(*auth(served), *extra, "-I", url)
    assert status(head) == 200 and got == b"", (head, got)
    assert header(head, "content-type") == "application/json"
    await unchanged(served, run)


@needs_curl
@pytest.mark.parametrize("extra", [[], ["-0"]])
async def test_curl_n_reads_the_stream_in_sse_framing(served: Served, extra: list[str]) -> None:
    """``curl -N``: ``retry:`` first, every message ends in a blank line, and a resume with
    ``Last-Event-ID`` goes on after it (HTTP/1.0: unchunked, ended by the close)."""
    run = await served.start_run("acme")
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json={"message": "x"}, headers=served.as_("alice")
    )
    assert r.status_code == 200
    # the store writer writes events every 50 ms: on a loaded machine curl came first and
    # read an empty log (``follow=false`` reads what the store holds, then ends)
    await served.runtime.flush_events()
    url = f"{served.url}{BASE}/events?follow=false"
    head, got = await curl(*auth(served), "-N", *extra, url)
    assert status(head) == 200, head
    assert str(header(head, "content-type")).startswith("text/event-stream"), head
    text = got.decode()
    assert text.startswith("retry: 1000\n\n") and text.endswith("\n\n") and "\r" not in text
    blocks = text.removesuffix("\n\n").split("\n\n")
    ids = [int(b.split("\n")[0][4:]) for b in blocks if b.startswith("id: ")]
    assert len(ids) >= 2 and ids == sorted(ids)
    for block in blocks[2:]:
        assert block.split("\n")[1].startswith("event: ") and block.split("\n")[2].startswith(
            "data: {"
        ), block
        # named after the event's type: an EventSource's addEventListener("steering.applied")
        named = block.split("\n")[1].removeprefix("event: ")
        assert named == json.loads(block.split("\n")[2].removeprefix("data: "))["type"], block
    head, got = await curl(*auth(served), "-N", *extra, "-H", f"Last-Event-ID: {ids[0]}", url)
    resumed = [int(b.split("\n")[0][4:]) for b in got.decode().split("\n\n") if b.startswith("id")]
    assert resumed[: len(ids) - 1] == ids[1:]


def _urllib(request: urllib.request.Request) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


async def test_urllib_reads_heads_steers_and_is_told_the_allowed_methods(served: Served) -> None:
    run = await served.start_run("acme")
    base, token = f"{served.url}{BASE}", served.as_("alice")

    def ask(path: str, method: str = "GET", body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
        headers = {**token, "Content-Type": "application/json"} if body else token
        return _urllib(urllib.request.Request(base + path, body, headers, method=method))

    code, headers, body = await asyncio.to_thread(ask, f"/runs/{run.run_id}")
    assert code == 200 and json.loads(body)["run_id"] == run.run_id
    code, headers, body = await asyncio.to_thread(ask, "/runs", "HEAD")
    assert (code, body) == (200, b"") and headers["content-type"] == "application/json"
    code, headers, body = await asyncio.to_thread(ask, "/events?follow=false")
    assert code == 200 and body.startswith(b"retry:") and body.endswith(b"\n\n")
    code, headers, body = await asyncio.to_thread(ask, f"/runs/{run.run_id}", "DELETE")
    assert code == 405 and headers["allow"] == "GET, HEAD" and json.loads(body)["detail"]
    code, headers, body = await asyncio.to_thread(ask, f"/runs/{run.run_id}", "OPTIONS")
    assert code == 405 and headers["allow"] == "GET, HEAD"
    steer = json.dumps({"message": "hi"}).encode()
    code, headers, body = await asyncio.to_thread(ask, f"/runs/{run.run_id}/steer", "POST", steer)
    assert code == 200 and json.loads(body)["status"] == "accepted"


async def test_httpx_keeps_one_connection_across_the_end_of_streams(served: Served) -> None:
    """A finished ``?follow=false`` stream, a HEAD and a POST leave the keep-alive connection
    usable: every request rides the one connection."""
    run = await served.start_run("acme")
    peers = set()
    for i in range(3):
        async with served.client.stream(
            "GET", f"{BASE}/events", params={"follow": "false"}, headers=served.as_("alice")
        ) as r:
            assert r.status_code == 200
            text = "".join([chunk async for chunk in r.aiter_text()])
            peers.add(r.extensions["network_stream"].get_extra_info("client_addr"))
        assert text.endswith("\n\n")
        head = await served.client.head(f"{BASE}/runs", headers=served.as_("alice"))
        post = await served.client.post(
            f"{BASE}/runs/{run.run_id}/steer",
            json={"message": f"m{i}"},
            headers=served.as_("alice"),
        )
        assert (head.status_code, post.status_code) == (200, 200)
        for answer in (head, post):
            peers.add(answer.extensions["network_stream"].get_extra_info("client_addr"))
    assert len(peers) == 1, peers
