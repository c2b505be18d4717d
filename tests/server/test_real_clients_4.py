"""Real clients, round four: ``tinyagents serve`` processes taken at their word by the tools an
operator has at hand (curl, the ``tinyagents`` CLI), on the SQLite default and on PostgreSQL
with Redis and two workers (test_real_clients, _2 and _3 have the HTTP clients themselves)."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn, redis_url
from test_console_browser import TINYAGENTS, _listening, free_port
from test_real_clients import needs_curl
from test_serve import ENV

from tinyagents.server.auth import Auth

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
    proc = subprocess.Popen(
        [str(TINYAGENTS), "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env or ENV, cwd=tmp_path,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    reader.daemon = True
    reader.start()
    try:
        deadline = time.monotonic() + 60  # a bound on a hang, not a timing
        while "Ctrl+C" not in "".join(lines) or not _listening(port):
            assert proc.poll() is None, "serve exited:\n" + "".join(lines)
            assert time.monotonic() < deadline, "serve did not listen:\n" + "".join(lines)
            time.sleep(0.2)
        yield "".join(lines)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
