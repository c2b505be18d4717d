"""The real services some tests need (PostgreSQL, Redis), and what a test does without them.

    from tests.services import postgres_dsn, redis_url

    dsn = postgres_dsn()   # skips the test when PostgreSQL is unreachable; fails when CI=true

``TINYAGENTS_POSTGRES_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``) and
``TINYAGENTS_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``) say where they are. Several
people run tests on the same services at once: PostgreSQL tests work in a schema of their own
(``pg_schema``, dropped by ``drop_pg_schemas``), Redis tests under a key prefix of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import uuid
from functools import cache
from urllib.parse import urlsplit, urlunsplit

import pytest

DEFAULT_POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@cache
def _unreachable(url: str, default_port: int) -> str | None:
    """Why nothing listens at the host and port of ``url``, or None when something does.

    The answer is kept for the session, so a wrong "unreachable" fails every test of that
    service under ``CI=true``: the probe waits up to 60 s. A listening service answers at once
    and a closed port is refused at once; only a connect the loaded machine is slow to
    complete (a dropped SYN is resent after 1 s, then 3 s) waits, and 2 s was too short."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or default_port
    try:
        with socket.create_connection((host, port), timeout=60.0):
            return None
    except OSError as exc:
        return f"{host}:{port}: {exc}"


def skip_unless_ci(message: str) -> None:
    """Skip the test, saying why; under ``CI=true`` fail it instead (never a silent skip)."""
    if _in_ci():
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


def _require(name: str, env: str, url: str, default_port: int) -> str:
    why = _unreachable(url, default_port)
    if why is not None:
        skip_unless_ci(f"{name} is unreachable ({why}); set {env} or start it (make services)")
    return url


def postgres_dsn() -> str:
    """The test PostgreSQL's DSN; skips the calling test when it is unreachable (fails when
    ``CI=true``)."""
    dsn = os.environ.get("TINYAGENTS_POSTGRES_DSN", DEFAULT_POSTGRES_DSN)
    return _require("PostgreSQL", "TINYAGENTS_POSTGRES_DSN", dsn, 5432)


def redis_url() -> str:
    """The test Redis's URL; skips the calling test when it is unreachable (fails when
    ``CI=true``)."""
    url = os.environ.get("TINYAGENTS_REDIS_URL", DEFAULT_REDIS_URL)
    return _require("Redis", "TINYAGENTS_REDIS_URL", url, 6379)


def unique_prefix(tag: str = "t") -> str:
    """A Redis key prefix (or any name) no other test, here or in another process, uses."""
    return f"{tag}:{os.getpid()}:{uuid.uuid4().hex[:12]}:"


#: Schemas handed out by ``pg_schema`` and not dropped yet.
_SCHEMAS: set[str] = set()


def pg_schema(key: object | None = None) -> str:
    """A schema name for one test: the same for the same ``key`` (e.g. ``tmp_path``, so a
    store reopened on that key sees its data), never one another process uses. The backend
    creates it; ``drop_pg_schemas`` drops it."""
    seed = f"{os.getpid()}:{uuid.uuid4() if key is None else key}"
    name = "t_" + hashlib.sha1(seed.encode()).hexdigest()[:24]
    _SCHEMAS.add(name)
    return name


async def drop_pg_schemas() -> None:
    """Drop every schema ``pg_schema`` handed out (and whatever is in them)."""
    if not _SCHEMAS:
        return
    import asyncpg

    names = sorted(_SCHEMAS)
    _SCHEMAS.clear()
    conn = await asyncpg.connect(postgres_dsn())
    try:
        await conn.execute("SET lock_timeout = '10s'")
        for name in names:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        await conn.close()


class PgProxy:
    """A TCP proxy to the test PostgreSQL (``dsn``: the same URL, through the proxy) that
    fails as a server or a network does: ``stall()`` forwards nothing more either way and
    keeps every socket open (a server that stopped answering); ``down()`` cuts every
    connection and refuses new ones until ``up()`` (a server restarting: ``refused`` counts
    the connections refused, ``refusing(n)`` waits for the n-th). After ``hold_ends()`` a
    connection the server ends is never ended on the client's side: the client reads the
    server's parting error and nothing after it (``ended(n)`` waits for the n-th)."""

    def __init__(self, dsn: str) -> None:
        self._hold_ends = False
        self._ends = 0
        self._ended = asyncio.Condition()
        parts = urlsplit(dsn)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._dsn = parts
        self._stalled = asyncio.Event()
        self._down = False
        self.refused = 0
        self._refusals = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    @property
    def dsn(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        netloc = self._dsn.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{port}"
        return urlunsplit(
            self._dsn._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host)
        )

    def stall(self) -> None:
        self._stalled.set()

    def down(self) -> None:
        self._down = True
        for writer in list(self._writers):
            writer.transport.abort()

    def up(self) -> None:
        self._down = False

    async def refusing(self, count: int) -> None:
        """Wait until ``count`` connections in all were refused."""
        async with self._refusals:
            await self._refusals.wait_for(lambda: self.refused >= count)

    def hold_ends(self) -> None:
        self._hold_ends = True

    async def ended(self, count: int) -> None:
        """Wait until the server ended ``count`` connections in all (``hold_ends``)."""
        async with self._ended:
            await self._ended.wait_for(lambda: self._ends >= count)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def aclose(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._down:
            writer.transport.abort()
            async with self._refusals:
                self.refused += 1
                self._refusals.notify_all()
            return
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        self._writers.update((writer, up_writer))
        for src, dst, from_server in ((reader, up_writer, False), (up_reader, writer, True)):
            task = asyncio.ensure_future(self._pump(src, dst, from_server))
            self._tasks.add(task)

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, from_server: bool
    ) -> None:
        try:
            with contextlib.suppress(OSError):  # the server reset it, or cut (``down``)
                while data := await src.read(65536):
                    if self._stalled.is_set():
                        await asyncio.Event().wait()  # held for good: no answer, no end
                    dst.write(data)
                    await dst.drain()
            if from_server and self._hold_ends and not self._down:
                async with self._ended:
                    self._ends += 1
                    self._ended.notify_all()
                await asyncio.Event().wait()  # the client never sees the end
        finally:
            self._writers.discard(dst)
            dst.close()
