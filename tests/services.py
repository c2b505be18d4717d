"""The real services some tests need (PostgreSQL, Redis), and what a test does without them.

    from tests.services import postgres_dsn, redis_url

    dsn = postgres_dsn()   # skips the test when PostgreSQL is unreachable; fails when CI=true

``TINYAGENTS_POSTGRES_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``) and
``TINYAGENTS_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``) say where they are. Several
people run tests on the same services at once: PostgreSQL tests work in a schema of their own
(``pg_schema``, dropped by ``drop_pg_schemas``), Redis tests under a key prefix of their own.
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from functools import cache
from urllib.parse import urlsplit

import pytest

DEFAULT_POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@cache
def _unreachable(url: str, default_port: int) -> str | None:
    """Why nothing listens at the host and port of ``url``, or None when something does."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or default_port
    try:
        with socket.create_connection((host, port), timeout=2.0):
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
