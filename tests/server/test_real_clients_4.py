"""Real clients, round four: ``tinyagents serve`` processes taken at their word by the tools an
operator has at hand (curl, the ``tinyagents`` CLI), on the SQLite default and on PostgreSQL
with Redis and two workers (test_real_clients, _2 and _3 have the HTTP clients themselves)."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from serve_process import free_port, serving
from services import drop_pg_schemas, pg_schema, postgres_dsn, redis_url
from test_console_browser import TINYAGENTS, serve_demo
from test_real_clients import needs_curl
from test_real_clients_3 import _until, curl_json
from test_serve import ENV

from tinyagents.server import Auth

pytestmark = pytest.mark.timeout(300)


async def drop_own(prefix: str) -> None:
    """The schemas ``pg_schema`` handed out, and the Redis keys under ``prefix``, gone (the
    services are shared)."""
    import redis.asyncio as redis

    await drop_pg_schemas()
    client = redis.Redis.from_url(redis_url())
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@contextmanager
def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``tinyagents serve ARGS`` on a free port: what it printed once it listens."""
    port = free_port()
    argv = [str(TINYAGENTS), "serve", "--port", str(port), *args]
    with serving(argv, port, env=env or ENV, cwd=tmp_path, ready=_says_ctrl_c) as printed:
        yield printed()


def _says_ctrl_c(printed: str) -> bool:
    """The banner is whole: its last line says how to stop the server."""
    return "Ctrl+C" in printed


def _mint_as_printed(printed: str, tmp_path: Path, env: dict[str, str]) -> str:
    """The ``tinyagents token mint ...`` the banner's ``key:`` line says makes more tokens, run
    as it is written (its ``...`` the claims): the token it printed."""
    (line,) = [line for line in printed.splitlines() if line.strip().startswith("key:")]
    said = line.split("(", 1)[1].rsplit(" makes more", 1)[0]
    argv = shlex.split(said)
    assert argv[:3] == ["tinyagents", "token", "mint"], line
    where = argv.index("...")
    argv[where : where + 1] = ["--tenant", "default", "--user", "bob", "--rights", "agent:observe"]
    done = subprocess.run(
        [sys.executable, "-m", "tinyagents", *argv[1:]],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, (line, done.stderr)
    return done.stdout.strip()


def _curl_status(url: str, token: str) -> int:
    done = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "30",
         "-H", f"Authorization: Bearer {token}", url],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return int(done.stdout)


@needs_curl
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_the_token_mint_serve_prints_makes_tokens_it_takes(store: str, tmp_path: Path) -> None:
    """``serve --key-file FILE`` printed ``key: FILE (tinyagents token mint --store STORE ...
    makes more)``: on PostgreSQL that command finds no key (exit 2), and on SQLite it made a
    new key beside the store and a token signed with it, which the server refused (401). The
    line names the key file the server uses; the command, run as printed, makes a token
    that curl is answered 200 with."""
    key = tmp_path / "operator.key"
    Auth.from_key_file(str(key))  # an operator's key, kept apart from the store
    if store == "sqlite":
        url = f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        url = f"{postgres_dsn()}?schema={pg_schema()}"  # a schema of its own
    try:
        with serve(tmp_path, "--store", url, "--key-file", str(key)) as printed:
            api = printed.split("API:", 1)[1].split()[0]
            token = _mint_as_printed(printed, tmp_path, ENV)
            assert _curl_status(f"{api}/runs?limit=1", token) == 200
    finally:
        asyncio.run(drop_pg_schemas())
    assert not (tmp_path / "runs.db.server-key").exists()  # no second key was made


def _runs_cli(url: str, token: str, *argv: str) -> tuple[int, str, str]:
    """``tinyagents runs ARGV --url URL`` with the token in ``$TINYAGENTS_TOKEN``."""
    done = subprocess.run(
        [sys.executable, "-m", "tinyagents", "runs", *argv, "--url", url],
        capture_output=True, text=True, timeout=120,
        env={**ENV, "TINYAGENTS_TOKEN": token, "COLUMNS": "400"},
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


@needs_curl
def test_the_runs_cli_shows_the_receipt_a_404_carries(tmp_path: Path) -> None:
    """A command to a graph task that is no longer pending (its question answered, here with
    curl) is a 404 whose body holds the command's receipt (``receipt``: rejected, its
    correlation id, why). The ``runs`` CLI threw it away and said ``not found: run gt-...``
    with no command id, of a run ``runs tree`` shows; it prints the server's receipt."""
    with serve_demo(tmp_path) as (console, _printed):
        token = console.split("#token=")[1]
        url = console.split("/#")[0]
        bearer = ["-H", f"Authorization: Bearer {token}"]
        api = f"{url}/api/agents"

        def asked() -> Any:
            runs = curl_json(*bearer, f"{api}/runs?status=interrupted&limit=20")
            return next((r for r in runs if r["kind"] == "graph" and r["depth"] == 1), None)

        entry = _until(asked)
        (question,) = entry["interrupts"]
        body = {"kind": "approve", "payload": {"interrupt_id": question["id"]}}
        receipt = curl_json(
            *bearer, "-H", "Content-Type: application/json", "-d", json.dumps(body),
            f"{api}/runs/{entry['run_id']}/tasks/{question['task_id']}/commands",
        )  # fmt: skip
        assert receipt["status"] == "accepted", receipt
        _until(
            lambda: (
                curl_json(*bearer, f"{api}/runs/{entry['root_run_id']}")["status"] == "completed"
            )
        )

        code, out, err = _runs_cli(url, token, "steer", entry["run_id"], "too late", "--json")
        assert code == 1, (out, err)
        sent = json.loads(out)
        assert sent["status"] == "rejected" and sent["correlation_id"], sent
        assert (
            sent["reason"]
            == f"not found: task {question['task_id']} is not pending in graph run {entry['root_run_id']}"
        ), sent
        history = curl_json(*bearer, f"{api}/runs/{entry['run_id']}/steering")
        assert sent["correlation_id"] in [c["correlation_id"] for c in history]
