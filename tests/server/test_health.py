"""``/healthz`` and ``/readyz``: what a load balancer or an orchestrator asks a server, over real
HTTP and without a token. Liveness says the process answers; readiness says whether what it
needs (its runtime, its store, Redis) answers too, and is a 503 while one does not."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_server import Served, eventually

from tinyagents import Runtime
from tinyagents.distributed import RedisControl
from tinyagents.server import Auth, Control, bind, create_app, serving
from tinyagents.store import SqliteStore


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_probes_answer_without_a_token(served: Served, path: str) -> None:
    r = await served.client.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["status"] in ("ok", "ready")
    head = await served.client.head(path)
    assert head.status_code == 200 and head.content == b""


async def test_readiness_names_each_dependency_it_checked(served: Served) -> None:
    body = (await served.client.get("/readyz")).json()
    assert body == {"status": "ready", "checks": {"runtime": "ok", "store": "ok"}}


async def test_probes_are_not_the_console_and_take_no_body(served: Served) -> None:
    r = await served.client.post("/readyz", json={})
    assert r.status_code == 405
    assert (await served.client.get("/healthz/x")).status_code == 404


async def test_a_store_that_does_not_answer_makes_the_server_unready(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    app = create_app(Control(store=store), auth=Auth(Auth.generate_key()), console=False)
    sock = bind("127.0.0.1", 0)
    async with serving(app, sock):
        host, port = sock.getsockname()[:2]
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            assert (await client.get("/readyz")).json()["checks"] == {"store": "ok"}
            await store.close()  # the database is gone from under the server
            r = await client.get("/readyz")
            assert r.status_code == 503
            assert r.json() == {"status": "unavailable", "checks": {"store": "unavailable"}}
            assert "sqlite" not in r.text.lower()  # what failed is logged, not shown
            assert (await client.get("/healthz")).status_code == 200  # alive all the same


async def test_a_closed_runtime_makes_the_server_unready(tmp_path: Path) -> None:
    runtime = Runtime()
    await runtime.open()
    control = Control(runtime)
    app = create_app(control, auth=Auth(Auth.generate_key()), console=False)
    sock = bind("127.0.0.1", 0)
    async with serving(app, sock):
        host, port = sock.getsockname()[:2]
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            assert (await client.get("/readyz")).json()["checks"] == {"runtime": "ok"}
            await runtime.close()
            r = await client.get("/readyz")
            assert r.status_code == 503 and r.json()["checks"] == {"runtime": "unavailable"}
    control.close()


async def test_redis_down_makes_the_server_unready(tmp_path: Path) -> None:
    async with Runtime() as runtime:
        # nothing listens on port 1: the control plane's jobs fail and back off
        async with RedisControl(runtime, "redis://127.0.0.1:1/0", backoff_s=(0.05, 0.1)) as rc:
            control = Control(runtime, redis=rc)
            app = create_app(control, auth=Auth(Auth.generate_key()), console=False)
            sock = bind("127.0.0.1", 0)
            async with serving(app, sock):
                host, port = sock.getsockname()[:2]
                async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:

                    async def unready() -> bool:
                        r = await client.get("/readyz")
                        return r.status_code == 503 and r.json()["checks"]["redis"] == (
                            "unavailable"
                        )

                    await eventually(unready)
            control.close()


class _StuckStore(SqliteStore):
    """A real SQLite store whose lookups stop answering (a database that hangs)."""

    async def load_run(self, run_id: str) -> dict[str, Any] | None:
        await asyncio.Event().wait()
        return None


async def test_a_store_that_hangs_is_unready_within_the_probe_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tinyagents.server import control as control_module

    monkeypatch.setattr(control_module, "READY_TIMEOUT_S", 0.05)
    store = _StuckStore(tmp_path / "runs.db")
    await store.open()
    try:
        app = create_app(Control(store=store), auth=Auth(Auth.generate_key()), console=False)
        sock = bind("127.0.0.1", 0)
        async with serving(app, sock):
            host, port = sock.getsockname()[:2]
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=60) as client:
                r = await client.get("/readyz")
        assert r.status_code == 503 and r.json()["checks"] == {"store": "unavailable"}
    finally:
        await store.close()
