"""The operator API driven by more real clients over real HTTP (test_real_clients has curl,
``urllib`` and httpx): ``requests`` (sync, one kept-alive connection, its default
``Accept-Encoding: gzip``, a generator body sent chunked), ``aiohttp`` (a live stream read
line by line while it steers, ``Expect: 100-continue``, a chunked body, a CORS preflight),
an SSE client that reconnects with ``Last-Event-ID`` across a restart of ``tinyagents
serve`` and must see every event once, a client that stops reading a stream and then
hangs up (its stream is given back), and headless Chromium: the console's ``EventSource``
across that restart, and its cache of the console's files."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import requests
import test_console_browser
from operator_server import BASE, Served, eventually
from serve_process import free_port
from test_console_browser import waiter
from test_serve import ENV
from test_sse import parse

from tinyagents import Runtime
from tinyagents.events import ModelEvent
from tinyagents.server import Auth, Control, bind, create_app, serving


async def test_requests_keeps_one_connection_for_json_heads_streams_and_chunked_bodies(
    served: Served,
) -> None:
    """A ``requests.Session``: its default ``Accept-Encoding: gzip, deflate`` gets identity
    JSON; a ``stream=True`` event stream read with ``iter_lines`` to its end, a HEAD, and a
    generator body (sent chunked) all ride the one kept-alive connection."""
    run = await served.start_run("acme")
    base = f"{served.url}{BASE}"

    def drive() -> list[Any]:
        out: list[Any] = []
        peers = set()

        def peer(r: Any, **_: Any) -> None:  # before its body is read: its connection in hand
            peers.add(r.raw.connection.sock.getsockname())

        with requests.Session() as session:
            session.headers.update(served.as_("alice"))
            session.hooks["response"].append(peer)
            for i in range(3):
                r = session.get(f"{base}/runs/{run.run_id}")
                assert r.request.headers["Accept-Encoding"].startswith("gzip")
                assert "content-encoding" not in r.headers
                out.append(r.json()["run_id"])
                with session.get(f"{base}/events", params={"follow": "false"}, stream=True) as s:
                    assert s.headers["content-type"].startswith("text/event-stream")
                    lines = list(s.iter_lines(decode_unicode=True))
                assert lines[0] == "retry: 1000" and lines[-1] == ""
                head = session.head(f"{base}/runs")
                assert (head.status_code, head.content) == (200, b"")

                def body(i: int = i) -> Iterator[bytes]:
                    yield b'{"message": '
                    yield json.dumps(f"chunk {i}").encode() + b"}"

                sent = session.post(
                    f"{base}/runs/{run.run_id}/steer",
                    data=body(),
                    headers={"Content-Type": "application/json"},
                )
                assert sent.request.headers["Transfer-Encoding"] == "chunked"
                out.append(sent.json()["status"])
        out.append(len(peers))
        return out

    out = await asyncio.to_thread(drive)
    assert out == [run.run_id, "accepted"] * 3 + [1]


async def test_aiohttp_reads_the_live_stream_while_it_steers_over_kept_alive_connections(
    served: Served,
) -> None:
    """``aiohttp``: a following stream read line by line shows the ``steering.applied`` of
    commands sent meanwhile from the same session (``Expect: 100-continue`` and a chunked
    async-generator body), which keeps its other connection alive for every command."""
    run = await served.start_run("acme")
    base = f"{served.url}{BASE}"
    headers = served.as_("alice")
    connections = [0]

    async def made(*_: Any) -> None:
        connections[0] += 1

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(made)
    async with aiohttp.ClientSession(headers=headers, trace_configs=[trace]) as session:
        async with session.get(f"{base}/events", params={"run_id": run.run_id}) as stream:
            assert stream.status == 200
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            assert (await stream.content.readline()) == b"retry: 1000\n"
            correlation_ids = []
            for i, how in enumerate(("expect-100", "chunked", "json")):
                kw: dict[str, Any] = {"json": {"message": f"m{i}"}}
                if how == "expect-100":
                    kw["expect100"] = True
                elif how == "chunked":

                    async def body(i: int = i) -> AsyncIterator[bytes]:
                        yield b'{"message": '
                        yield f'"m{i}"}}'.encode()

                    kw = {"data": body(), "headers": {"Content-Type": "application/json"}}
                async with session.post(f"{base}/runs/{run.run_id}/steer", **kw) as r:
                    assert r.status == 200, await r.text()
                    correlation_ids.append((await r.json())["correlation_id"])
            assert connections == [2]  # the stream's, and one for every command
            buffer, applied = "", []
            async with asyncio.timeout(60):  # a bound on a hang, not a timing
                while len(applied) < 3:
                    line = await stream.content.readline()
                    assert line, "the stream ended"
                    buffer += line.decode()
                    if buffer.endswith("\n\n"):
                        applied += [
                            m["data"]["correlation_id"]
                            for m in parse(buffer)
                            if m["event"] == "steering.applied"
                        ]
                        buffer = ""
            assert applied == correlation_ids


async def test_a_cross_origin_preflight_is_refused(served: Served) -> None:
    """The API offers no CORS (the console is served from its own origin): a browser's
    preflight from another site is a 405 naming the methods, with no
    ``Access-Control-Allow-*`` header, so the page's request is never sent."""
    async with aiohttp.ClientSession() as session:
        async with session.options(
            f"{served.url}{BASE}/runs",
            headers={
                "Origin": "https://elsewhere.example",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "authorization",
            },
        ) as r:
            assert r.status == 405 and r.headers["Allow"] == "GET, HEAD"
            assert not [h for h in r.headers if h.lower().startswith("access-control-")]


#: headless Chromium driven by Selenium, test_console_browser's ``browser`` fixture
chromium = test_console_browser.browser


def _serve_demo(
    port: int, store: str, cwd: Path, *, think_s: str = ENV["TINYAGENTS_DEMO_THINK_S"]
) -> tuple[subprocess.Popen[str], str]:
    """``tinyagents serve --demo`` on ``port`` (each demo model answer taking ``think_s``):
    the process and the token it printed."""
    args = ["serve", "--port", str(port), "--store", store, "--demo"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinyagents.cli", *args],
        cwd=cwd,
        env={**ENV, "TINYAGENTS_DEMO_THINK_S": think_s},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    printed = ""
    while "Ctrl+C" not in printed:
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "serve exited"
        printed += line
    token = printed.split("Authorization: Bearer ", 1)[1].split()[0]
    return proc, token


def assert_each_shown_once(shown: list[int], logged: str) -> None:
    """The event ids a client showed (``shown``) are each of the log's (``logged``, its SSE
    text) up to the last one shown, once."""
    assert len(shown) == len(set(shown)), "an event was shown twice"
    ids = [m["id"] for m in parse(logged)]
    assert sorted(shown) == [i for i in ids if i <= max(shown)], "an event was not shown"


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class Reconnecting:
    """An SSE client as ``EventSource`` behaves: it reads the stream, and whenever the stream
    ends or its connection fails, waits the ``retry`` the server set and opens it again with
    the last id it saw as ``Last-Event-ID``. ``ids`` is every id received, in order."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.ids: list[int] = []
        self.opened: list[dict[str, Any]] = []  # each stream's ``event: stream`` data
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        retry_s = 1.0
        with requests.Session() as session:
            while not self.stop.is_set():
                headers = {"Authorization": f"Bearer {self.token}"}
                if self.ids:
                    headers["Last-Event-ID"] = str(self.ids[-1])
                try:
                    with session.get(self.url, headers=headers, stream=True, timeout=(5, 60)) as r:
                        if r.status_code == 200:
                            retry_s = self._read(r) or retry_s
                except requests.RequestException:
                    pass  # the server is gone: try again after the delay, as a browser does
                self.stop.wait(retry_s)

    def _read(self, r: Any) -> float | None:
        fields: dict[str, str] = {}
        retry_s = None
        for line in r.iter_lines(decode_unicode=True):
            if self.stop.is_set():
                return retry_s
            if line == "":
                if "retry" in fields:
                    retry_s = int(fields["retry"]) / 1000
                if "id" in fields:
                    self.ids.append(int(fields["id"]))
                elif fields.get("event") == "stream":
                    self.opened.append(json.loads(fields["data"]))
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        return retry_s


def _logged_ids(url: str, token: str) -> list[int]:
    r = httpx.get(
        url, params={"follow": "false"}, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    assert r.status_code == 200
    return [m["id"] for m in parse(r.text)]


def _until(check: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s  # a bound on waiting, not a timed assertion
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_an_sse_client_reconnecting_across_a_serve_restart_sees_every_event_once(
    tmp_path: Path,
) -> None:
    """``tinyagents serve --demo`` over a SQLite store is stopped (Ctrl+C) while a client
    follows its event stream, and started again on the same port and store: the client,
    reconnecting with ``Last-Event-ID`` as ``EventSource`` does, is told it resumes in the
    same log after its last id, and has every event of the log, in order, each once."""
    port, store = free_port(), f"sqlite:///{tmp_path / 'runs.db'}"
    url = f"http://127.0.0.1:{port}{BASE}/events"
    proc, token = _serve_demo(port, store, tmp_path)
    client = Reconnecting(url, token)
    client.thread.start()
    try:
        _until(lambda: len(client.ids) >= 20, "the demo logged no events")
        _stop(proc)
        before = len(client.ids)
        # the key file beside the store is the same key: the client's token still holds
        proc, _ = _serve_demo(port, store, tmp_path)
        _until(lambda: len(client.opened) >= 2 and len(client.ids) >= before + 20, "no resume")
    finally:
        client.stop.set()
        client.thread.join(90)
        logged = _logged_ids(url, token) if proc.poll() is None else []
        _stop(proc)
    first, resumed = client.opened[0], client.opened[1]
    assert resumed["log"] == first["log"] and resumed["after"] == client.ids[before - 1]
    assert len(set(client.ids)) == len(client.ids), "an event was sent twice"
    assert client.ids == [i for i in logged if i <= client.ids[-1]], "an event was missed"


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "close"])
async def test_a_client_that_stops_reading_and_then_hangs_up_gives_its_stream_back(
    reset: bool,
) -> None:
    """A stream whose client stopped reading waits in its writes (flow control). The client
    then hangs up, with a reset (unread data in its buffer, ``SO_LINGER`` 0) or a plain close:
    the server ends that stream and gives its place back, so the user's one allowed stream
    opens again."""
    auth = Auth(Auth.generate_key())
    token = auth.mint(user="alice", tenant="acme", rights=["agent:observe"])
    headers = {"Authorization": f"Bearer {token}"}
    async with Runtime() as runtime:
        control = Control(runtime)
        app = create_app(control, auth=auth, console=False, max_streams_per_user=1)
        sock = bind("127.0.0.1", 0)
        async with serving(app, sock):
            host, port = sock.getsockname()[:2]
            tree = {"run_id": "r-big", "root_run_id": "r-big", "tenant_id": "acme"}
            for i in range(3000):  # 8 KB each: far past what a connection's buffers hold
                event = ModelEvent(
                    type="model.response", request_id=f"q{i}", text_summary="x" * 8000, **tree
                )
                runtime.bus.publish(event)
            reading, read = control.read_events, [0]

            async def counted(**kw: Any) -> Any:
                rows = await reading(**kw)
                read[0] += len(rows)
                return rows

            control.read_events = counted  # type: ignore[method-assign]
            loop = asyncio.get_running_loop()
            stalled = socket.socket()
            stalled.setblocking(False)
            await loop.sock_connect(stalled, (host, port))
            head = f"GET {BASE}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}"
            await loop.sock_sendall(stalled, f"{head}\r\n\r\n".encode())
            seen = [-1]

            async def settled() -> bool:  # the stream reads the log until its writes wait
                await asyncio.sleep(0.2)
                still, seen[0] = read[0] == seen[0] and read[0] > 0, read[0]
                return still

            await eventually(settled)
            assert read[0] < 3000
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=60) as client:
                held = await client.get(f"{BASE}/events", headers=headers)
                assert held.status_code == 429  # the stalled stream holds the one place
                if reset:
                    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                stalled.close()

                async def reopened() -> bool:
                    async with client.stream("GET", f"{BASE}/events", headers=headers) as r:
                        return r.status_code == 200  # (its backlog left unread)

                await eventually(reopened)
        control.close()


def test_the_consoles_timeline_goes_on_across_a_serve_restart_each_event_once(
    chromium: Any, tmp_path: Path
) -> None:
    """Chromium's ``EventSource`` on the console, following a live demo tree, while
    ``tinyagents serve`` is stopped (Ctrl+C: the tree is cancelled after the streams ended)
    and started again on the same port and store: the page goes live again, shows the tree's
    ``run.cancelled`` logged while no stream was open, and every event of the tree's log once.
    The reconnect sends the used ticket again (a 401): the page asks a new one and resumes
    after the last event it showed."""
    from selenium.webdriver.common.by import By

    port, store = free_port(), f"sqlite:///{tmp_path / 'runs.db'}"
    proc, token = _serve_demo(port, store, tmp_path, think_s="3")
    try:
        wait = waiter(chromium)
        chromium.get(f"http://127.0.0.1:{port}/#token={token}")
        row = wait.until(
            lambda d: d.find_element(
                By.CSS_SELECTOR,
                '[data-testid="run-row"][data-agent="orchestrator"][data-depth="0"]'
                '[data-status="running"]',
            )
        )
        root = row.get_attribute("data-run-id")
        row.click()
        connection = chromium.find_element(By.ID, "connection")
        wait.until(lambda d: connection.text == "live")
        timeline = (
            "return [...document.querySelectorAll('[data-testid=\"timeline-event\"]')]"
            ".map(e => [Number(e.dataset.eventId), e.dataset.type, e.dataset.runId])"
        )
        wait.until(lambda d: len(d.execute_script(timeline)) >= 3)
        _stop(proc)
        wait.until(lambda d: connection.text != "live")
        proc, _ = _serve_demo(port, store, tmp_path, think_s="3")
        wait.until(lambda d: connection.text == "live")
        wait.until(
            lambda d: [e for e in d.execute_script(timeline) if e[1:] == ["run.cancelled", root]]
        )
        shown = [i for i, _, _ in chromium.execute_script(timeline)]
        api = f"http://127.0.0.1:{port}{BASE}/events"
        logged = httpx.get(
            api,
            params={"root_run_id": root, "follow": "false"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert logged.status_code == 200
    finally:
        _stop(proc)
    assert_each_shown_once(shown, logged.text)


async def test_a_browser_asks_again_for_the_consoles_files_it_holds(
    chromium: Any, tmp_path: Path
) -> None:
    """The console's files had an ``ETag`` and a ``Last-Modified`` but no ``Cache-Control``:
    a browser then keeps them fresh by its own guess (a tenth of their age) and loads the
    page again from its cache without asking, so after an upgrade of tinyagents it ran the old
    ``console.js`` against the new API for days. They are ``no-cache`` now: each load asks
    again, with the ``ETag`` it holds, and an unchanged file is a body-less 304."""
    auth = Auth(Auth.generate_key())
    asked: list[tuple[str, dict[bytes, bytes]]] = []
    async with Runtime() as runtime:
        control = Control(runtime)
        app = create_app(control, auth=auth)

        async def counted(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                asked.append((scope["path"], dict(scope["headers"])))
            await app(scope, receive, send)

        sock = bind("127.0.0.1", 0)
        async with serving(counted, sock):  # type: ignore[arg-type]
            host, port = sock.getsockname()[:2]
            url = f"http://{host}:{port}/"
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                for path in ("/", "/console.js", "/console.css"):
                    r = await client.get(path)
                    assert r.status_code == 200 and r.headers["cache-control"] == "no-cache"
                    again = await client.get(path, headers={"If-None-Match": r.headers["etag"]})
                    assert (again.status_code, again.content) == (304, b""), path
            asked.clear()
            # two visits, as a user opens the console one day and again the next
            await asyncio.to_thread(chromium.get, url)
            await asyncio.to_thread(chromium.get, "about:blank")
            await asyncio.to_thread(chromium.get, url)
        control.close()
    scripts = [headers for path, headers in asked if path == "/console.js"]
    assert len(scripts) == 2, [path for path, _ in asked]
    assert b"if-none-match" in scripts[1]  # (answered 304: the same file, not sent again)


def test_seven_console_tabs_load_and_the_first_goes_on_where_it_left_off(
    chromium: Any, tmp_path: Path
) -> None:
    """A browser opens at most six HTTP/1.1 connections to one server, and each console tab
    following a run held one for its event stream: with six such tabs open, a seventh did
    not load at all. A tab in the background closes its stream now: seven tabs each follow a
    run, and back in front the first opens its stream again after the last event it showed,
    missing none and showing none twice."""
    from selenium.webdriver.common.by import By

    port, store = free_port(), f"sqlite:///{tmp_path / 'runs.db'}"
    proc, token = _serve_demo(port, store, tmp_path, think_s="3")
    url = f"http://127.0.0.1:{port}/#token={token}"
    timeline = (
        "return [...document.querySelectorAll('[data-testid=\"timeline-event\"]')]"
        ".map(e => Number(e.dataset.eventId))"
    )
    try:
        wait = waiter(chromium)
        chromium.set_page_load_timeout(60)  # (the seventh tab's load waited for ever)
        tabs, roots, before = [], [], 0
        for _ in range(7):
            if tabs:
                chromium.switch_to.new_window("tab")
            chromium.get(url)
            row = wait.until(
                lambda d: d.find_element(
                    By.CSS_SELECTOR,
                    '[data-testid="run-row"][data-agent="orchestrator"][data-depth="0"]'
                    '[data-status="running"]',
                )
            )
            roots.append(row.get_attribute("data-run-id"))
            row.click()
            wait.until(lambda d: d.find_element(By.ID, "connection").text == "live")
            if not tabs:  # the last event the first tab showed before it went to the background
                before = max(wait.until(lambda d: d.execute_script(timeline)))
            tabs.append(chromium.current_window_handle)
        chromium.switch_to.window(tabs[0])
        wait.until(lambda d: d.find_element(By.ID, "connection").text == "live")
        # the tree's events logged while it was in the background, and on (it ends, at least)
        shown = wait.until(
            lambda d: (ids := d.execute_script(timeline)) and max(ids) > before and ids
        )
        logged = httpx.get(
            f"http://127.0.0.1:{port}{BASE}/events",
            params={"root_run_id": roots[0], "follow": "false"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert logged.status_code == 200
    finally:
        _stop(proc)
    assert_each_shown_once(shown, logged.text)
