"""Fixtures for the Redis control tests: the shared Redis (``services.redis_url``: skipped when
unreachable, a failure under CI=true), a private ``redis-server`` the test may stop and restart,
and worker processes driven over JSON lines (tests/distributed/worker.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from services import redis_url as shared_redis_url

WORKER = Path(__file__).with_name("worker.py")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI=true: Redis must be running)")
    pytest.skip(reason)


@pytest.fixture
def redis_url() -> str:
    """The shared Redis (``TINYAGENTS_REDIS_URL``)."""
    return shared_redis_url()


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix of this test's own (parallel tests share the Redis)."""
    yield f"ta-test-{uuid.uuid4().hex[:12]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_LOWEST_PORT = 20000
#: a bound on a hang (redis-server neither serving nor gone), not a timing assertion
_START_GUARD_S = 60.0
#: first starts on a port another process took meanwhile (each moves to a new port)
_START_ATTEMPTS = 20


def _ephemeral_floor() -> int:
    """The first port the kernel hands out to outgoing connections (32768 when unknown)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def unclaimed_port() -> int:
    """A port nothing listens on now, below the ephemeral range where the kernel can: no
    outgoing connection (of this test or any other process) is given it while a server of the
    test's own is stopped, nor connects to itself on it. Outside Linux's usual range, any free
    port. Another process may still bind it before the server does: ``RedisServer.start``
    then moves to another."""
    floor = _ephemeral_floor()
    if floor > _LOWEST_PORT + 1000:
        for _ in range(50):
            port = random.randrange(_LOWEST_PORT, floor)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    return free_port()


async def _serves(url: str, pid: int) -> bool:
    """Whether the ``redis-server`` of ``pid`` answers at ``url`` (not another one that took
    the port)."""
    import redis.asyncio as aioredis

    # a listener that is not a redis-server may never answer: each ask is bounded
    client = aioredis.from_url(url, socket_connect_timeout=1.0, socket_timeout=1.0)
    try:
        info = await client.info("server")
    except Exception:
        return False
    finally:
        await client.aclose()
    return bool(info.get("process_id") == pid)


class RedisServer:
    """A ``redis-server`` of the test's own, without persistence, that it may stop and start.

    Its port is picked free, then released for redis-server to bind, so another process may
    take it in between: a first start that cannot bind (redis-server exits) starts again on
    a new port, up to ``_START_ATTEMPTS`` times. A restart keeps the port (the clients hold
    the URL) and tries it again until ``_START_GUARD_S``."""

    def __init__(self, workdir: Path) -> None:
        self.port = unclaimed_port()
        self.workdir = workdir
        self.proc: asyncio.subprocess.Process | None = None
        self.launches = 0  # redis-server processes started (a failed bind is one too)
        self._served = False  # the clients hold ``url`` from now on: the port stays

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            _unavailable("redis-server is not installed")
        assert exe is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _START_GUARD_S
        for _ in range(_START_ATTEMPTS if not self._served else 1_000_000):
            if await self._launch(exe, deadline):
                self._served = True
                return
            if loop.time() > deadline:
                break
            if self._served:
                await asyncio.sleep(0.05)  # its port, taken for now: try it again
            else:
                self.port = unclaimed_port()
        log = self.workdir / "redis.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"redis-server did not start (last port {self.port}):\n{tail}")

    async def _launch(self, exe: str, deadline: float) -> bool:
        """Start redis-server on ``self.port``: True once it serves there, False if it ended
        (the port was taken)."""
        args = ["--port", str(self.port), "--save", "", "--appendonly", "no"]
        args += ["--bind", "127.0.0.1", "--dir", str(self.workdir), "--logfile", "redis.log"]
        proc = await asyncio.create_subprocess_exec(
            exe,
            *args,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        self.launches += 1
        loop = asyncio.get_running_loop()
        ended = asyncio.ensure_future(proc.wait())
        try:
            while not ended.done() and loop.time() <= deadline:
                # the ask races redis-server's end: what took the port may never answer
                ask = asyncio.ensure_future(_serves(self.url, proc.pid))
                await asyncio.wait({ask, ended}, return_when=asyncio.FIRST_COMPLETED)
                if not ask.done():
                    ask.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await ask
                elif ask.result():
                    self.proc = proc
                    return True
                else:
                    await asyncio.wait({ended}, timeout=0.05)  # a poll interval, or its end
        finally:
            if not ended.done():
                ended.cancel()
        if proc.returncode is None:  # neither serving nor gone by the deadline
            proc.kill()
            await proc.wait()
            raise RuntimeError(f"redis-server on port {self.port} did not start")
        return False

    async def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 60)  # a hang guard
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
            self.proc = None


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[RedisServer]:
    server = RedisServer(tmp_path)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class CuttingProxy:
    """A TCP proxy of the test's own in front of the shared Redis, that can lose one reply:
    ``lose_reply_to(marker)`` lets the next request holding ``marker`` through, waits for
    Redis's reply (so Redis has run it) and then closes that client connection instead of
    passing the reply on, as a connection dropped at that moment does."""

    def __init__(self, upstream: str) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 6379
        self.db = parts.path or "/0"
        self.marker: bytes | None = None
        self.cut = 0
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}{self.db}"

    def lose_reply_to(self, marker: bytes) -> None:
        self.marker = marker

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for pump in list(self._pumps):
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        lost = asyncio.Event()  # the reply to the marked request is due: drop it
        to_redis = asyncio.create_task(self._pump(reader, up_writer, lost, marked=True))
        to_client = asyncio.create_task(self._pump(up_reader, writer, lost, marked=False))
        self._pumps |= {to_redis, to_client}
        try:
            await asyncio.wait({to_redis, to_client}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (to_redis, to_client):
                task.cancel()
            await asyncio.gather(to_redis, to_client, return_exceptions=True)
            self._pumps -= {to_redis, to_client}
            for w in (writer, up_writer):
                w.close()
                with contextlib.suppress(Exception):
                    await w.wait_closed()

    async def _pump(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        lost: asyncio.Event,
        *,
        marked: bool,
    ) -> None:
        while data := await src.read(65536):
            if not marked and lost.is_set():
                self.cut += 1
                return  # Redis has answered the marked request: its reply goes nowhere
            if marked and self.marker is not None and self.marker in data:
                self.marker = None
                lost.set()
            dst.write(data)
            await dst.drain()


@pytest.fixture
async def cutting_proxy(redis_url: str) -> AsyncIterator[CuttingProxy]:
    proxy = CuttingProxy(redis_url)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.aclose()


class WorkerProcess:
    """One worker (a separate Python process), called with ``await w.call(op, **args)``."""

    def __init__(
        self,
        name: str,
        url: str,
        prefix: str,
        db: Path,
        *,
        ttl_s: float | None = None,
        extra: list[str] | None = None,
    ) -> None:
        self.name, self.url, self.prefix, self.db = name, url, prefix, db
        #: more worker.py arguments (``--store``, ``--checkpoints``)
        self.extra = extra or []
        #: the seat's and listing's TTL (None: worker.py's ``TTL_S``)
        self.ttl_s = ttl_s
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ids = 0

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            "--url",
            self.url,
            "--prefix",
            self.prefix,
            "--worker-id",
            self.name,
            "--db",
            str(self.db),
            *([] if self.ttl_s is None else ["--ttl", str(self.ttl_s)]),
            *self.extra,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        assert json.loads(line) == {"ready": self.name}, line
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            answer = json.loads(line)
            future = self._waiting.pop(answer["id"], None)
            if future is not None and not future.done():
                future.set_result(answer)
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(RuntimeError(f"worker {self.name} exited"))

    async def call(self, op: str, *, wait_s: float = 60, **args: Any) -> Any:
        """The op's result; an error in the worker is raised here as ``WorkerError``."""
        answer = await self.call_raw(op, wait_s=wait_s, **args)
        if "error" in answer:
            raise WorkerError(answer["type"], answer["error"])
        return answer["ok"]

    async def call_raw(self, op: str, *, wait_s: float = 60, **args: Any) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self._ids += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[self._ids] = future
        self.proc.stdin.write((json.dumps({"id": self._ids, "op": op, **args}) + "\n").encode())
        await self.proc.stdin.drain()
        return dict(await asyncio.wait_for(future, wait_s))

    async def kill(self) -> None:
        """SIGKILL: nothing is flushed, closed or acknowledged."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        await self._stopped()

    async def quit(self) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(ConnectionError):
                self.proc.stdin.write(b'{"op": "quit"}\n')
                await self.proc.stdin.drain()
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        await self._stopped()

    async def _stopped(self) -> None:
        if self._reader is not None:
            await self._reader
            self._reader = None
        self.proc = None


class WorkerError(Exception):
    def __init__(self, type_: str, message: str) -> None:
        super().__init__(f"{type_}: {message}")
        self.type = type_


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[Any]:
    """``spawn(name, url, prefix)`` starts a worker process on its own SQLite file (``ttl_s``:
    its seat's and listing's TTL, for a test of their expiry; ``extra``: more worker.py
    arguments, such as a shared ``--store`` and ``--checkpoints``); every worker still running
    is stopped at the end."""
    started: list[WorkerProcess] = []

    async def spawn(
        name: str,
        url: str,
        prefix: str,
        *,
        ttl_s: float | None = None,
        extra: list[str] | None = None,
    ) -> WorkerProcess:
        worker = WorkerProcess(name, url, prefix, tmp_path / f"{name}.db", ttl_s=ttl_s, extra=extra)
        await worker.start()
        started.append(worker)
        return worker

    try:
        yield spawn
    finally:
        for worker in started:
            await worker.quit()


T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], *, within: float = 90
) -> T:
    """Poll ``probe`` until ``ok`` holds (a deadline against hangs, not a timing assertion)."""
    deadline = time.monotonic() + within
    while True:
        value = await probe()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened; last value: {value!r}")
        await asyncio.sleep(0.05)
