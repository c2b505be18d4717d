"""The operator CLI given bad arguments: one line on stderr, exit code 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def tinyagents(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "40"}
    env["TINYAGENTS_TOKEN"] = "garbage"
    return subprocess.run(
        [sys.executable, "-m", "tinyagents.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "steer", "r-1", "hi", "--store", "sqlite:///missing.db"),
        ("runs", "steer", "r-1", "hi", "--store", "bogus://x"),
        ("runs", "steer", "r-1", "hi", "--store", "memory://"),
        ("runs", "steer", "r-1", "hi", "--store", "missing.db"),
        ("runs", "approve", "r-1", "--value", "{bad", "--store", "sqlite:///missing.db"),
        ("runs", "list", "--url", "http://127.0.0.1:1"),
        ("runs", "list", "--url", "notaurl"),
        ("runs", "list", "--url", "http://[::1"),
        ("runs", "show", "r-1", "--url", "http://a:99999"),
        ("serve", "--port", "99999", "--insecure-dev"),
        ("serve", "--port", "-5", "--insecure-dev"),
        ("serve", "--store", "bogus://x", "--port", "0"),
    ],
)
def test_cli_bad_arguments_are_one_line_and_a_nonzero_exit(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    done = tinyagents(*args, cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""


def test_cli_an_unknown_status_is_refused_by_the_parser(tmp_path: Path) -> None:
    (tmp_path / "runs.db").touch()
    done = tinyagents(
        "runs", "list", "--store", "sqlite:///runs.db", "--status", "runing", cwd=tmp_path
    )
    assert done.returncode == 2 and "invalid choice: 'runing'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
