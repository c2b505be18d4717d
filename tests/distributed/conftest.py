"""Fixtures for the Redis control tests: the shared Redis (``services.redis_url``: skipped when
unreachable, a failure under CI=true), a private ``redis-server`` the test may stop and restart,
and worker processes driven over JSON lines (tests/distributed/worker.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from services import redis_url as shared_redis_url

WORKER = Path(__file__).with_name("worker.py")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI=true: Redis must be running)")
    pytest.skip(reason)


async def _ping(url: str) -> str | None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url, socket_connect_timeout=1.0)
    try:
        await client.ping()
    except Exception as exc:
        return f"Redis at {url} is unreachable: {exc}"
    finally:
        await client.aclose()
    return None


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


class RedisServer:
    """A ``redis-server`` of the test's own, without persistence, that it may stop and start."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            _unavailable("redis-server is not installed")
        assert exe is not None
        args = ["--port", str(self.port), "--save", "", "--appendonly", "no"]
        args += ["--bind", "127.0.0.1", "--dir", str(self.workdir)]
        self.proc = await asyncio.create_subprocess_exec(
            exe,
            *args,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for _ in range(200):
            if await _ping(self.url) is None:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    async def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            await asyncio.wait_for(self.proc.wait(), 10)
            self.proc = None


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[RedisServer]:
    server = RedisServer(tmp_path)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class WorkerProcess:
    """One worker (a separate Python process), called with ``await w.call(op, **args)``."""

    def __init__(self, name: str, url: str, prefix: str, db: Path) -> None:
        self.name, self.url, self.prefix, self.db = name, url, prefix, db
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

    async def call(self, op: str, *, wait_s: float = 30, **args: Any) -> Any:
        """The op's result; an error in the worker is raised here as ``WorkerError``."""
        answer = await self.call_raw(op, wait_s=wait_s, **args)
        if "error" in answer:
            raise WorkerError(answer["type"], answer["error"])
        return answer["ok"]

    async def call_raw(self, op: str, *, wait_s: float = 30, **args: Any) -> dict[str, Any]:
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
    """``spawn(name, url, prefix)`` starts a worker process on its own SQLite file; every
    worker still running is stopped at the end."""
    started: list[WorkerProcess] = []

    async def spawn(name: str, url: str, prefix: str) -> WorkerProcess:
        worker = WorkerProcess(name, url, prefix, tmp_path / f"{name}.db")
        await worker.start()
        started.append(worker)
        return worker

    try:
        yield spawn
    finally:
        for worker in started:
            await worker.quit()
