"""``tinyagents serve`` and ``tinyagents token`` as a user runs them: real processes, real HTTP."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TINYAGENTS_DEMO_THINK_S": "0.2"}
ENV.pop("TINYAGENTS_SERVER_KEY", None)


def get(url: str, **kw: Any) -> httpx.Response:
    """``httpx.get`` with a 60 s guard against a hang, not httpx's 5 s: a fresh ``serve``
    process builds its OpenAPI document on the first request for it, which took 1.9 s at
    load average 8."""
    return httpx.get(url, timeout=60, **kw)


def tinyagents(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tinyagents.cli", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )


@contextmanager
def serve(*args: str, cwd: Path) -> Iterator[tuple[str, str | None, list[str]]]:
    """A ``tinyagents serve --port 0 ...`` process: (url, printed token, printed lines)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinyagents.cli", "serve", "--port", "0", *args],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"serve exited: {proc.wait()} {proc.stderr.read()}")  # type: ignore[union-attr]
            lines.append(line.rstrip("\n"))
            if "Ctrl+C" in line:
                break
        text = "\n".join(lines)
        url = re.search(r"at (http://(?:[\d.]+|\[[0-9a-f:]+\]):\d+)/", text)
        token = re.search(r"Authorization: Bearer (\S+)", text)
        assert url, text
        yield url.group(1), token.group(1) if token else None, lines
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, proc.stderr.read() if proc.stderr else code


def test_serve_prints_a_url_and_a_token_the_api_accepts(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    with serve("--store", store, cwd=tmp_path) as (url, token, lines):
        assert token is not None
        assert any(f"{url}/#token={token}" in line for line in lines)
        api = f"{url}/api/agents"
        assert get(f"{api}/runs").status_code == 401
        r = get(f"{api}/runs", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json() == []
        assert get(f"{api}/openapi.json").json()["info"]["title"]
        assert "<html" in get(f"{url}/").text
        # token mint with the same store finds the same key (the file beside the store).
        minted = tinyagents(
            "token",
            "mint",
            "--tenant",
            "acme",
            "--user",
            "alice",
            "--rights",
            "agent:observe",
            "--store",
            store,
            cwd=tmp_path,
        )
        assert minted.returncode == 0, minted.stderr
        alice = minted.stdout.strip()
        r = get(f"{api}/runs", headers={"Authorization": f"Bearer {alice}"})
        assert r.status_code == 200
        narrowed = tinyagents(
            "token", "attenuate", alice, "--run", "r-1", "--store", store, cwd=tmp_path
        ).stdout.strip()
        r = get(f"{api}/runs/r-2", headers={"Authorization": f"Bearer {narrowed}"})
        assert r.status_code == 404
        # with no key at hand it says what to give, and makes no key file where it runs
        # (it made one, then refused the token as not signed by that new key)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        keyless = tinyagents("token", "attenuate", alice, "--run", "r-1", cwd=elsewhere)
        assert keyless.returncode == 2 and "no server key at hand" in keyless.stderr
        assert list(elsewhere.iterdir()) == []
    key = tmp_path / "runs.db.server-key"
    assert key.stat().st_mode & 0o777 == 0o600


def test_serve_demo_runs_agents_an_operator_can_see(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    with serve("--store", store, "--demo", cwd=tmp_path) as (url, token, _):
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + 60
        runs: list[dict[str, object]] = []
        while time.monotonic() < deadline and not runs:
            runs = get(f"{url}/api/agents/runs", headers=headers).json()
            time.sleep(0.2)
        assert runs and {r["tenant_id"] for r in runs} == {"default"}


def test_insecure_dev_needs_no_token_and_binds_loopback_only(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'dev.db'}"
    with serve("--store", store, "--insecure-dev", cwd=tmp_path) as (url, token, lines):
        assert token is None and url.startswith("http://127.0.0.1:")
        assert any("INSECURE" in line for line in lines)
        assert get(f"{url}/api/agents/runs").status_code == 200
    refused = tinyagents(
        "serve", "--insecure-dev", "--host", "0.0.0.0", "--store", store, cwd=tmp_path
    )
    assert refused.returncode == 2 and "loopback address only" in refused.stderr


def test_insecure_dev_binds_the_loopback_address_it_is_given(tmp_path: Path) -> None:
    # --host ::1 (IPv6 loopback) is allowed with --insecure-dev, and served there: it was
    # accepted and then bound to 127.0.0.1 instead.
    store = f"sqlite:///{tmp_path / 'dev.db'}"
    with serve("--store", store, "--insecure-dev", "--host", "::1", cwd=tmp_path) as (
        url,
        _,
        _,
    ):
        assert url.startswith("http://[::1]:")
        assert get(f"{url}/api/agents/runs").status_code == 200


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--store", "memory://"], "no server key"),
        (
            ["token", "mint", "--tenant", "a", "--user", "u", "--store", "memory://"],
            "no server key",
        ),
        (["token", "mint", "--tenant", "a", "--user", "u", "--rights", "root"], "unknown right"),
        (["token", "mint", "--tenant", " ", "--user", "u"], "non-blank tenant"),
        # a store that is no URL was told it had "no server key"
        (["serve", "--store", "runs.db"], "unknown store 'runs.db'"),
        # the printed token's claims were checked after the store and key were made
        (["serve", "--tenant", " "], "non-blank tenant"),
        # each worker had a memory of its own: a request saw only the runs of its worker
        (["serve", "--workers", "2", "--store", "memory://", "--insecure-dev"], "one process"),
        (["token", "attenuate", "not-a-token"], "no server key at hand"),
        (["token", "attenuate", "tok", "--key-file", "typo.key"], "no key file at 'typo.key'"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = tinyagents(*args, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # and it changes nothing: a refused mint made the store's key file, and attenuate a new
    # key in a mistyped --key-file (a key no token was ever signed with)
    assert list(tmp_path.iterdir()) == []


def test_serve_on_a_file_that_is_no_database_makes_no_key_for_it(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("a week of notes")
    done = tinyagents("serve", "--port", "0", "--store", "sqlite:///notes.txt", cwd=tmp_path)
    assert done.returncode == 2 and "file is not a database" in done.stderr, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]  # no notes.txt.server-key


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--store", "postgresql://olga:s3cret-pw@127.0.0.1:1/db"],
        ["serve", "--store", "postgresql+asyncpg://olga:s3cret-pw@127.0.0.1:1/db"],
        ["serve", "--store", "postgresql://olga@127.0.0.1:1/db?password=s3cret-pw"],
        ["token", "mint", "--tenant", "a", "--user", "u", "--store", "postgres://o:s3cret-pw@h/d"],
        ["token", "attenuate", "tok", "--store", "postgresql://o:s3cret-pw@h/d"],
        ["serve", "--insecure-dev", "--redis", "redis+tls://:s3cret-pw@127.0.0.1:1/0"],
    ],
)
def test_a_store_password_never_shows_in_an_error(tmp_path: Path, args: list[str]) -> None:
    """docs/postgres.md: "the password never shows in ``store.url`` or in errors". A server
    without a key for a PostgreSQL store, a store URL of no known scheme (SQLAlchemy's
    ``postgresql+asyncpg://``) and a ``--redis`` URL of no Redis scheme printed the URL as
    given, password and all, to a terminal or a deployment log."""
    done = tinyagents(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "s3cret" not in done.stderr + done.stdout, done.stderr
    assert "***" in done.stderr, done.stderr


@pytest.mark.parametrize(
    "store", ["postgresql://nobody@127.0.0.1:1/nothing", "sqlite:///a-file/runs.db"]
)
def test_workers_that_cannot_open_the_store_stop_serve_with_one_line(
    tmp_path: Path, store: str
) -> None:
    """Each worker opens the store itself, after ``serve`` has spawned it: a store no worker
    could open printed a traceback from every worker process (hundreds of lines), after the
    server had been announced with its URL and token as if it served; then ``serve`` started
    the workers again when their start-up outlasted ``STARTUP_S``. Now: the server is
    announced once every worker serves; a worker that fails before it does stops ``serve``
    with its one-line reason, exit code 2, as one process does."""
    (tmp_path / "a-file").write_text("not a directory")
    done = tinyagents(
        "serve", "--port", "0", "--workers", "2", "--insecure-dev", "--store", store, cwd=tmp_path
    )
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinyagents serve: "), done.stderr
    assert "operator console" not in done.stdout and "starting it again" not in done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:notaport/0",
        "redis://[::1",
        "redis://:s3cret-pw@127.0.0.1:6379/0?socket_timeout=soon",
        "redis://127.0.0.1:6379/l",  # the client took a database that is no number for 0
    ],
)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_redis_url_that_does_not_parse_is_one_line(
    tmp_path: Path, url: str, workers: str
) -> None:
    """A --redis URL the Redis client cannot read (a port that is no number, a broken IPv6
    host, a bad option) raised the client's ValueError as a traceback from serve, or from
    every worker; it is one line naming the URL (without its password), exit code 2."""
    done = tinyagents(
        "serve", "--port", "0", "--workers", workers, "--insecure-dev",
        "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--redis", url,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a usable Redis URL" in lines[0], done.stderr
    assert "s3cret" not in done.stderr


def test_the_listening_socket_says_it_is_tcp() -> None:
    """asyncio sets TCP_NODELAY on accepted sockets only when the listening socket's proto is
    IPPROTO_TCP; without it each response on a kept-alive connection waits for a delayed ACK."""
    import socket

    from tinyagents.errors import ConfigurationError
    from tinyagents.server import bind

    sock = bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        client = socket.create_connection(sock.getsockname()[:2])
        sock.setblocking(True)
        accepted, _ = sock.accept()
        with client, accepted:
            assert accepted.proto == socket.IPPROTO_TCP
    finally:
        sock.close()
    with pytest.raises(ConfigurationError, match="cannot listen"):
        taken = bind("127.0.0.1", 0)
        try:
            bind("127.0.0.1", taken.getsockname()[1])
        finally:
            taken.close()


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_host_is_refused_not_every_interface(tmp_path: Path, blank: str) -> None:
    """``--host ""`` (an unset variable) bound every interface (the socket's "" is
    INADDR_ANY) while serve printed ``http://127.0.0.1:PORT/``: a server the operator meant
    for this machine listened on the network. A blank host is refused, as ``bind`` refuses
    it, and nothing is created."""
    from tinyagents.errors import ConfigurationError
    from tinyagents.server import bind

    with pytest.raises(ConfigurationError, match="blank host"):
        bind(blank, 0).close()
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    for extra in ((), ("--insecure-dev",)):
        done = tinyagents(
            "serve", "--port", "0", "--host", blank, "--store", store, *extra, cwd=tmp_path
        )
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "--host" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stdout == ""
    assert not (tmp_path / "runs.db.server-key").exists()


def test_a_port_it_cannot_bind_leaves_no_key_file_behind(tmp_path: Path) -> None:
    """``serve`` on a taken port says so and exits 2: the key file beside the store is not
    created for a server that never ran (one that was there already stays)."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = str(taken.getsockname()[1])
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    key = tmp_path / "runs.db.server-key"
    with taken:
        done = tinyagents("serve", "--port", port, "--store", store, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "cannot listen" in done.stderr and "Traceback" not in done.stderr
        assert not key.exists()
        assert not (tmp_path / "runs.db").exists()  # nor the store it would have served
        minted = tinyagents(
            "token", "mint", "--tenant", "t", "--user", "u", "--store", store, cwd=tmp_path
        )
        assert minted.returncode == 0, minted.stderr
        before = key.read_text()
        done = tinyagents("serve", "--port", port, "--store", store, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert key.read_text() == before


def test_importing_the_cli_and_the_server_loads_no_web_or_token_library(tmp_path: Path) -> None:
    probe = (
        "import sys, tinyagents, tinyagents.cli, tinyagents.server\n"
        "lazy = ('fastapi', 'starlette', 'uvicorn', 'biscuit_auth', 'httpx')\n"
        "print(sorted(m for m in lazy if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=ENV, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_ctrl_c_with_event_streams_open_stops_cleanly(tmp_path: Path) -> None:
    # each open stream (a console tab) only checked for its client going away: Ctrl+C
    # waited out the grace period, then cancelled it, logging "Exception in ASGI application"
    # with a traceback per stream
    import socket

    store = f"sqlite:///{tmp_path / 'dev.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinyagents.cli", "serve", "--port", "0", "--store", store],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        printed = ""
        while "Ctrl+C" not in printed:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "serve exited"
            printed += line
        port = int(re.search(r"at http://127\.0\.0\.1:(\d+)/", printed).group(1))  # type: ignore[union-attr]
        token = re.search(r"Authorization: Bearer (\S+)", printed).group(1)  # type: ignore[union-attr]
        streams = []
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", port), timeout=60)
            sock.sendall(
                f"GET /api/agents/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}"
                "\r\n\r\n".encode()
            )
            assert b"200" in sock.recv(200)  # the stream is open
            streams.append(sock)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
        errors = proc.stderr.read() if proc.stderr else ""
        assert code == 0, errors
        assert "Exception in ASGI application" not in errors, errors
        assert "CancelledError" not in errors, errors
        for sock in streams:
            sock.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def without(*modules: str) -> list[str]:
    """A ``python -c`` prefix running the CLI as if ``modules`` were not installed."""
    block = "".join(f"sys.modules[{m!r}] = None; " for m in modules)
    return [
        sys.executable,
        "-c",
        f"import sys; {block}from tinyagents.cli import main; raise SystemExit(main())",
    ]


@pytest.mark.parametrize(
    ("missing", "args", "extra"),
    [
        ("biscuit_auth", ["serve", "--port", "0"], "server"),
        ("fastapi", ["serve", "--port", "0"], "server"),
        ("uvicorn", ["serve", "--port", "0"], "server"),
        ("biscuit_auth", ["token", "mint", "--tenant", "t", "--user", "u"], "server"),
        ("redis", ["serve", "--port", "0", "--redis", "redis://127.0.0.1:1/0"], "redis"),
    ],
)
def test_a_missing_extra_is_one_line_and_leaves_no_key_file(
    tmp_path: Path, missing: str, args: list[str], extra: str
) -> None:
    """Without the ``server`` (or ``redis``) extra the command says which extra to install,
    in one line, exit code 2: no traceback, and no empty key file that would make the next
    ``serve`` refuse "not an Ed25519 private key"."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    done = subprocess.run(
        [*without(missing), *args, "--store", store],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"install 'tinyagents[{extra}]'" in lines[0], done.stderr
    assert missing in lines[0]
    assert not (tmp_path / "runs.db.server-key").exists()
    assert not (tmp_path / "runs.db").exists()


def test_an_empty_key_file_is_treated_as_absent(tmp_path: Path) -> None:
    """An empty key file (left by an older version that failed between creating the file and
    writing the key) gets a key, rather than refusing every later start."""
    (tmp_path / "runs.db.server-key").write_bytes(b"")
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    minted = tinyagents(
        "token", "mint", "--tenant", "t", "--user", "u", "--store", store, cwd=tmp_path
    )
    assert minted.returncode == 0, minted.stderr
    key = (tmp_path / "runs.db.server-key").read_text()
    assert len(key.strip()) == 64
    with serve("--store", store, cwd=tmp_path) as (url, _token, _lines):
        r = get(
            f"{url}/api/agents/runs", headers={"Authorization": f"Bearer {minted.stdout.strip()}"}
        )
        assert r.status_code == 200


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_workers_stop_when_serve_is_killed(tmp_path: Path) -> None:
    """A ``serve`` killed outright (SIGKILL: an OOM kill, a test's timeout, ``kill -9``) left
    its workers serving on the port, answering with nobody to restart or stop them, and the
    next ``serve`` on that port failed with "Address already in use"."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinyagents.cli", "serve", "--port", "0", "--workers", "2",
         "--insecure-dev", "--store", f"sqlite:///{tmp_path / 'runs.db'}"],
        cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "Ctrl+C" in line:
                break
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        workers = [
            pid
            for pid in map(int, children)
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
            and b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(workers) == 2, children
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 60  # a hang guard, not a timing claim
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:  # never leave them behind, whatever the outcome
        os.kill(pid, signal.SIGKILL)
    assert left == []


@pytest.mark.parametrize("given", [True, False])
def test_attenuate_with_an_empty_key_file_makes_no_key(tmp_path: Path, given: bool) -> None:
    """An empty key file holds no key (docs/operator.md): attenuate took it for one at hand,
    wrote a new key into it, then refused the token as not signed by that new key."""
    key = tmp_path / ("given.key" if given else "runs.db.server-key")
    key.touch()
    where = ["--key-file", key.name] if given else ["--store", "sqlite:///runs.db"]
    done = tinyagents("token", "attenuate", "tok", "--observe-only", *where, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "no key file" in done.stderr or "no server key at hand" in done.stderr, done.stderr
    assert key.read_bytes() == b""
