"""Shared test set-up: offline litellm, deterministic hypothesis profile, service URLs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Before anything can import litellm: never fetch the model cost map from the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    deadline=None,  # shared CI machines are noisy: no per-example timing
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("default")

REDIS_URL = os.environ.get("TINYAGENTS_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "TINYAGENTS_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)


def run_python(
    script: Path | str, cwd: Path, *, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run a script (a path, or source text written to ``cwd``) the way a reader would:
    a fresh interpreter, offline litellm, output captured."""
    if isinstance(script, str):
        path = cwd / "example.py"
        path.write_text(script)
        script = path
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def run_script() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_script(path_or_source, cwd, timeout=60)``: see ``run_python``."""
    return run_python


@pytest.fixture
def default_recursion_limit() -> Iterator[None]:
    """Python's default recursion limit (1000) for the test. The nesting probes are past it,
    and a whole run may have raised it (a library, an earlier test: pytest-randomly orders
    them anew each run), under which a value nested thousands deep reads, encodes or parses,
    so there is nothing to refuse, or it is refused for something else (a 422 for its field,
    not the 400 for its nesting: seen in CI)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
