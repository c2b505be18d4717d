"""How many event streams one user may hold open, and the server in all: each follows the log,
reading the store every 50 ms, so streams without a bound were a way to load the server (and
its store) without end. Real HTTP, a real SQLite store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tinyagents.errors import ConfigurationError
from tinyagents.server import Auth, Control, bind, create_app, serving
from tinyagents.store import MemoryStore, SqliteStore

EVENTS = "/api/agents/events"


@contextlib.asynccontextmanager
async def server(
    tmp_path: Path, *, controls: list[Control] | None = None, **limits: int
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, dict[str, str]]]]:
    """A server on a SQLite store; its ``Control`` is appended to ``controls`` if given."""
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    auth = Auth(Auth.generate_key())
    sock = bind("127.0.0.1", 0)
    try:
        control = Control(store=store)
        if controls is not None:
            controls.append(control)
        app = create_app(control, auth=auth, console=False, **limits)
        async with serving(app, sock):
            host, port = sock.getsockname()[:2]
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=60) as client:
                tokens = {
                    user: {
                        "Authorization": "Bearer "
                        + auth.mint(user=user, tenant="acme", rights=["agent:observe"])
                    }
                    for user in ("alice", "bob", "carol")
                }
                yield client, tokens
    finally:
        await store.close()


async def open_stream(
    client: httpx.AsyncClient, stack: contextlib.AsyncExitStack, headers: dict[str, str]
) -> httpx.Response:
    """A following stream, open until ``stack`` closes (its first message read: it is served)."""
    response = await stack.enter_async_context(client.stream("GET", EVENTS, headers=headers))
    if response.status_code == 200:
        lines = response.aiter_lines()
        assert (await anext(lines)).startswith("retry:")
        # held until the stack closes: a line iterator collected closes its stream
        stack.push_async_callback(lines.aclose)
    return response


async def once_freed(
    open_one: Callable[[], Awaitable[httpx.Response]], *, within_s: float = 10.0
) -> httpx.Response:
    """The first answer of ``open_one`` that is no 429, asked again while the server has not
    yet seen the streams its client closed (it learns of a closed connection a moment after
    the client closes it, more so on a busy machine); the last answer after ``within_s``."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        response = await open_one()
        if response.status_code != 429 or asyncio.get_running_loop().time() > deadline:
            return response
        await asyncio.sleep(0.05)


async def test_a_user_holds_at_most_max_streams_per_user_open(tmp_path: Path) -> None:
    async with server(tmp_path, max_streams_per_user=2, max_streams=10) as (client, tokens):
        async with contextlib.AsyncExitStack() as first:
            async with contextlib.AsyncExitStack() as second:
                assert (await open_stream(client, first, tokens["alice"])).status_code == 200
                assert (await open_stream(client, second, tokens["alice"])).status_code == 200
                third = await client.get(EVENTS, headers=tokens["alice"])
                assert third.status_code == 429
                body = third.json()
                assert (
                    "2 event streams" in body["message"]
                    and "max_streams_per_user" in (body["message"])
                )
                assert third.headers["Retry-After"]
                assert body["type"] == "rate_limited", body  # the kind, for a client to branch on
                # another user of the tenant is not held back by alice's
                with_bob = contextlib.AsyncExitStack()
                async with with_bob:
                    assert (await open_stream(client, with_bob, tokens["bob"])).status_code == 200
            # alice closed one: she may open another
            async with contextlib.AsyncExitStack() as again:
                reopened = await once_freed(lambda: open_stream(client, again, tokens["alice"]))
                assert reopened.status_code == 200


async def test_streams_opened_at_once_are_held_to_the_bounds_too(tmp_path: Path) -> None:
    """The count of a user's streams went up only once a stream sent its first message, so
    streams asked for at once were all let through (eight of them past a bound of two): the
    bound was one a client opening them together never met."""
    async with server(tmp_path, max_streams_per_user=2, max_streams=3) as (client, tokens):
        async with contextlib.AsyncExitStack() as stack:
            opened = await asyncio.gather(
                *(open_stream(client, stack, tokens["alice"]) for _ in range(8))
            )
            assert sorted(r.status_code for r in opened) == [200] * 2 + [429] * 6
            others = await asyncio.gather(
                *(open_stream(client, stack, tokens[user]) for user in ("bob", "carol") * 2)
            )
            assert sorted(r.status_code for r in others) == [200] + [429] * 3
        # every place is given back: refused, ended or closed by its client
        async with contextlib.AsyncExitStack() as again:
            for user in ("alice", "alice", "bob"):
                reopened = await once_freed(lambda u=user: open_stream(client, again, tokens[u]))
                assert reopened.status_code == 200


async def test_the_server_holds_at_most_max_streams_open(tmp_path: Path) -> None:
    async with server(tmp_path, max_streams_per_user=5, max_streams=2) as (client, tokens):
        async with contextlib.AsyncExitStack() as stack:
            assert (await open_stream(client, stack, tokens["alice"])).status_code == 200
            assert (await open_stream(client, stack, tokens["bob"])).status_code == 200
            refused = await client.get(EVENTS, headers=tokens["carol"])
            assert refused.status_code == 429 and "max_streams" in refused.json()["message"]
        # all closed: a stream that ends (follow=false) frees its place too
        for _ in range(3):
            done = await once_freed(
                lambda: client.get(EVENTS + "?follow=false", headers=tokens["carol"])
            )
            assert done.status_code == 200


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_the_bounds_are_whole_numbers_of_at_least_one(bad: object) -> None:
    control = Control(store=MemoryStore())
    with pytest.raises(ConfigurationError, match="max_streams must"):
        create_app(control, auth=None, max_streams=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_streams_per_user must"):
        create_app(control, auth=None, max_streams_per_user=bad)  # type: ignore[arg-type]


async def test_a_stream_gives_its_place_back_as_its_client_is_known_gone(tmp_path: Path) -> None:
    """A client that closed its stream and at once opened another was sometimes answered 429:
    the closed stream's place came back only once the stream had unwound (its cancellation
    reaching it inside a store read, and out again), some turns of the loop after the server
    read the close. The place is given back as the disconnect is read. Here the stream's read
    of the log, once cancelled, waits (shielded) to be let go: the new stream is let through
    meanwhile."""
    entered, cancelled, let_go = asyncio.Event(), asyncio.Event(), asyncio.Event()
    controls: list[Control] = []
    async with server(tmp_path, controls=controls, max_streams_per_user=1) as (client, tokens):
        [app_control] = controls
        read_events = app_control.read_events
        hold = False

        async def held(**kw: Any) -> Any:
            if not hold:
                return await read_events(**kw)
            entered.set()
            try:
                await asyncio.Event().wait()  # until the stream is cancelled
            except asyncio.CancelledError:
                cancelled.set()
                # starlette cancels through an anyio scope, which cancels again at every
                # await: only a shielded wait holds the unwinding off
                with anyio.CancelScope(shield=True):
                    await let_go.wait()
                raise
            raise AssertionError("unreachable")

        app_control.read_events = held  # type: ignore[method-assign]
        try:
            async with asyncio.timeout(30):  # a bound on the waits, not a timing
                hold = True
                async with contextlib.AsyncExitStack() as first:
                    assert (await open_stream(client, first, tokens["alice"])).status_code == 200
                    await entered.wait()  # the stream is inside its read of the log
                hold = False
                await cancelled.wait()  # the server read the close: it cancelled the stream
                async with contextlib.AsyncExitStack() as second:
                    again = await open_stream(client, second, tokens["alice"])
                    assert again.status_code == 200, again.headers
        finally:
            let_go.set()


class _Connection:
    """One event-stream request driven straight through the ASGI app (no socket): the test
    says when its client goes away, and learns when the server has read that it went."""

    def __init__(self, app: Any, headers: dict[str, str]) -> None:
        self.app, self.headers = app, headers
        self.status: int | None = None
        self.started, self.first_body = asyncio.Event(), asyncio.Event()
        self.hung_up, self.close_read = asyncio.Event(), asyncio.Event()
        self.asked = False

    async def receive(self) -> dict[str, Any]:
        if not self.asked:
            self.asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.hung_up.wait()
        self.close_read.set()  # as uvicorn does: every read after the close says so
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.started.set()
        elif message["type"] == "http.response.body" and message.get("body"):
            self.first_body.set()
        if not message.get("more_body", False) and message["type"] == "http.response.body":
            self.first_body.set()

    async def serve(self) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": EVENTS,
            "raw_path": EVENTS.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1")]
            + [(k.lower().encode(), v.encode()) for k, v in self.headers.items()],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        await self.app(scope, self.receive, self.send)


@pytest.mark.parametrize("at_once", [False, True], ids=["after-first-message", "at-once"])
async def test_open_close_open_cycles_never_count_a_stream_the_server_saw_close(
    at_once: bool,
) -> None:
    """A user allowed one stream opens it, closes it (after its first message, or as soon as
    it asked) and opens another, many times over, each time once the server has read the
    close (no sleep, no retry): none is a 429. The moment before the server reads a close it
    cannot know of, and a 429 then is what the docs say to retry; a close it has read is
    never counted."""
    auth = Auth(Auth.generate_key())
    token = auth.mint(user="alice", tenant="acme", rights=["agent:observe"])
    headers = {"Authorization": f"Bearer {token}"}
    control = Control(store=MemoryStore())
    app = create_app(control, auth=auth, console=False, max_streams_per_user=1)
    statuses: list[int | None] = []
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:  # a hang guard
        for _ in range(30):
            conn = _Connection(app, headers)
            if at_once:
                conn.hung_up.set()
            served = group.create_task(conn.serve())
            await conn.first_body.wait()
            statuses.append(conn.status)
            if conn.status != 200:
                await served
                break
            conn.hung_up.set()
            await conn.close_read.wait()  # the server read the close: the next one opens
    assert statuses == [200] * 30, statuses
    control.close()
