"""The operator CLI as a client of a real server, given what an operator may paste by
mistake: a token or a ``--url`` that httpx or the socket cannot take must be one line and
exit 2 (they were tracebacks), naming what to fix and never echoing a secret."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from operator_server import Served


def runs(*args: str, token: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "80"}
    env["TINYAGENTS_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "tinyagents.cli", "runs", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line_refusal(done: subprocess.CompletedProcess[str], *said: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""
    for words in said:
        assert words in done.stderr, done.stderr
    return done.stderr


@pytest.mark.parametrize(
    "token",
    [
        "tok\u00e9n",  # a non-ASCII letter: httpx raised UnicodeEncodeError on the header
        "tok\u2013en",  # a dash a word processor made of '-'
        "EsMB tok",  # two words: the header would carry the second as junk
        "tok\x7fen",
    ],
)
def test_cli_a_token_no_server_could_read_is_refused_before_any_request(
    tmp_path: Path, token: str
) -> None:
    # port 1: nothing listens; were the token sent, the answer would be "cannot reach"
    done = runs("list", "--url", "http://127.0.0.1:1", token=token, cwd=tmp_path)
    said = one_line_refusal(done, "TINYAGENTS_TOKEN")
    assert "cannot reach" not in said and token not in said, said


def test_cli_a_token_pasted_with_its_bearer_scheme_is_told_to_drop_it(tmp_path: Path) -> None:
    done = runs("list", "--url", "http://127.0.0.1:1", token="Bearer abc", cwd=tmp_path)
    one_line_refusal(done, "TINYAGENTS_TOKEN", "Bearer")


@pytest.mark.parametrize("port", ["99999", "65536", "-1", "x"])
def test_cli_a_url_whose_port_is_no_port_is_refused(tmp_path: Path, port: str) -> None:
    # 127.0.0.1 resolves, so the port reached connect(): an OverflowError traceback
    done = runs("show", "r-1", "--url", f"http://127.0.0.1:{port}", token="abc", cwd=tmp_path)
    one_line_refusal(done, "--url", "port")


async def test_cli_a_url_with_a_user_and_password_is_refused_not_sent_as_basic_auth(
    served: Served, tmp_path: Path
) -> None:
    """httpx sends ``http://user:pw@host``'s user and password as ``Authorization: Basic``
    in place of the token: the server answered "not a Bearer token" and the password went
    over the wire. The CLI refuses it without echoing the password."""
    run = await served.start_run("acme")
    url = served.url.replace("http://", "http://ops:s3cret-pw@")
    done = await asyncio.to_thread(
        runs, "pause", run.run_id, "--url", url, token=served.tokens["alice"], cwd=tmp_path
    )
    said = one_line_refusal(done, "--url")
    assert "s3cret-pw" not in said, said
    assert served.runtime.steering_history(run.run_id) == []
