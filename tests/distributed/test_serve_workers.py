"""``tinyagents serve --workers 2 --redis URL --store ...``: two worker processes on one port,
each its own runtime and seat on Redis, on a shared SQLite file or PostgreSQL; whichever worker
answers, every run is listed and controllable (issue 14 item 3)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn
from test_redis_control import eventually

from tinyagents.server.workers import STARTUP_S

BASE = "/api/agents"


def worker_pids(parent: int) -> list[int]:
    """The worker processes ``serve`` spawned (not multiprocessing's resource tracker)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    pids = []
    for pid in map(int, children):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            pids.append(pid)
    return sorted(pids)


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The store the workers share: a SQLite file, or a PostgreSQL schema of the test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    dsn = postgres_dsn()
    sep = "&" if "?" in dsn else "?"
    yield f"{dsn}{sep}schema={pg_schema()}"
    await drop_pg_schemas()


async def test_two_workers_list_and_steer_every_run_whichever_answers(
    redis_url: str, prefix: str, store_url: str
) -> None:
    import redis.asyncio as aioredis

    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from tinyagents.cli import main; main()",
        "serve", "--workers", "2", "--redis", redis_url, "--redis-prefix", prefix,
        "--store", store_url, "--insecure-dev", "--port", "0", "--demo",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    client = aioredis.from_url(redis_url)
    try:
        assert server.stdout is not None
        first = (await asyncio.wait_for(server.stdout.readline(), 60)).decode()
        found = re.search(r"http://[\d.]+:\d+", first)
        assert found, first
        url = found.group(0)
        workers = await eventually(
            lambda: client.zrange(f"{prefix}:workers", 0, -1), lambda w: len(w) == 2, within=60
        )
        seated = time.monotonic()  # both workers were started (born) before this
        # a fresh connection per request: the kernel hands them to either worker
        fresh = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=url, limits=fresh, timeout=60) as http:

            async def running() -> list[dict[str, Any]]:
                r = await http.get(f"{BASE}/runs", params={"status": "running"})
                assert r.status_code == 200, r.text
                return list(r.json())

            runs = await eventually(running, lambda runs: len(runs) > 0, within=60)
            run_id, owner = runs[0]["run_id"], runs[0]["owner"]

            async def holders() -> list[bytes]:
                return [
                    w
                    for w in workers
                    if await client.hexists(f"{prefix}:runs:{w.decode()}", run_id)
                ]

            # the run is in the mirror of one of the two workers (the store may list it first)
            held = await eventually(holders, lambda held: len(held) == 1)
            for _ in range(6):  # whichever worker serves it, the run reads the same
                snap = await http.get(f"{BASE}/runs/{run_id}")
                assert snap.status_code == 200 and snap.json()["owner"] == owner
                listed = await http.get(f"{BASE}/runs")
                assert run_id in {r["run_id"] for r in listed.json()}
            (other,) = [w.decode() for w in workers if w not in held]

            async def pause_and_resume() -> int:
                """Pause and resume the run through whichever workers answer; how many receipts
                the owner sent back over Redis to the other worker so far."""
                for kind in ("pause", "resume"):
                    r = await http.post(f"{BASE}/runs/{run_id}/{kind}", json={})
                    assert r.status_code == 200, r.text
                    assert r.json()["status"] == "accepted", r.json()
                return int(await client.xlen(f"{prefix}:reply:{other}"))

            # Until a command went through the other worker (via Redis). No fixed number of
            # tries: a worker takes its seat on Redis before it serves HTTP, so on a loaded
            # machine the owner alone may answer for a while (the kernel hands every
            # connection to the workers accepting).
            await eventually(pause_and_resume, lambda replies: replies > 0, within=60)

            async def history() -> Any:  # another worker reads it from the store's event log
                return (await http.get(f"{BASE}/runs/{run_id}/steering")).json()

            await eventually(history, lambda h: len(h) >= 2)

            # a worker that dies is started again, under the same name on Redis
            before = worker_pids(server.pid)
            assert len(before) == 2
            # past the start-up window (a worker dying inside it stops serve: a crash loop),
            # counted from when the workers sat on Redis, after serve started them (counted
            # from the test's start, a slow interpreter start-up ate into it and serve stopped)
            await asyncio.sleep(max(0.0, STARTUP_S + 0.5 - (time.monotonic() - seated)))
            os.kill(before[0], signal.SIGKILL)
            after = await eventually(
                lambda: asyncio.sleep(0, worker_pids(server.pid)),
                lambda pids: len(pids) == 2 and before[0] not in pids,
                within=60,
            )
            assert before[1] in after
            await eventually(
                lambda: client.zrange(f"{prefix}:workers", 0, -1), lambda w: set(w) == set(workers)
            )
            for _ in range(6):
                assert (await http.get(f"{BASE}/runs/{run_id}")).status_code == 200
    finally:
        await client.aclose()
        if server.returncode is None:
            server.terminate()
            await asyncio.wait_for(server.wait(), 60)
    assert server.returncode == 0
