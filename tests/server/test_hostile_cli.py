"""The operator CLI given bad arguments: one line on stderr, exit code 2, never a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from operator_server import Served, busy_agent
from services import skip_unless_ci

from tinyagents.store import SqliteStore


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
        # JSON a run cannot carry: told before the store is asked (they were tracebacks)
        ("runs", "approve", "r-1", "--value", "NaN", "--store", "sqlite:///missing.db"),
        ("runs", "approve", "r-1", "--value", "1e400", "--url", "http://127.0.0.1:1"),
        ("runs", "approve", "r-1", "--value", '"\\ud800"', "--url", "http://127.0.0.1:1"),
        ("runs", "approve", "r-1", "--value", "[" * 5000 + "]" * 5000, "--url", "http://x:1"),
        # arguments that are not UTF-8 (a Latin-1 byte reaches Python as a lone surrogate)
        ("runs", "show", "r-\udcff", "--url", "http://127.0.0.1:1"),
        ("runs", "steer", "r-1", "hi \udce9", "--store", "sqlite:///missing.db"),
        ("token", "mint", "--tenant", "\udce9", "--user", "u", "--key-file", "k"),
        ("serve", "--port", "0", "--user", "\udcff", "--insecure-dev"),
        ("runs", "list", "--url", "http://127.0.0.1:1"),
        ("runs", "list", "--url", "notaurl"),
        ("runs", "list", "--url", "http://[::1"),
        ("runs", "show", "r-1", "--url", "http://a:99999"),
        ("serve", "--port", "99999", "--insecure-dev"),
        ("serve", "--port", "-5", "--insecure-dev"),
        ("serve", "--store", "bogus://x", "--port", "0"),
        ("serve", "--insecure-dev", "--port", "0", "--redis", "bogus://x"),
        ("serve", "--insecure-dev", "--port", "0", "--store", "sqlite:////dev/null/x.db"),
        ("serve", "--port", "0", "--store", "postgresql://nobody@127.0.0.1:1/x", "--key-file", "k"),
        ("token", "mint", "--tenant", "a", "--user", "u", "--ttl", "nan", "--key-file", "k"),
        ("token", "mint", "--tenant", "a", "--user", "u", "--ttl", "inf", "--key-file", "k"),
        ("token", "mint", "--tenant", "a", "--user", "u", "--ttl", "1e300", "--key-file", "k"),
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


def test_cli_a_value_giving_a_key_twice_is_refused_before_anything_is_asked(
    tmp_path: Path,
) -> None:
    # the last one won, where the API refuses such a body with a 400: an approval read
    # {"ok": true, "ok": false} as {"ok": false} without a word
    value = '{"answer": {"ok": true, "ok": false}}'
    done = tinyagents(
        "runs", "approve", "r-1", "--value", value, "--store", "sqlite:///x.db", cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "error: --value gives the key 'ok' twice in one object"
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("blank", ["", "  "])
def test_cli_a_blank_correlation_id_is_refused_not_replaced(tmp_path: Path, blank: str) -> None:
    # it was dropped for a generated id: a retry with the same (unset) id was a new command,
    # applied again, where --correlation-id promises it is applied once
    async def make_store() -> None:
        store = SqliteStore(tmp_path / "runs.db")
        await store.open()
        await store.close()

    asyncio.run(make_store())
    for action in (("pause", "r-1"), ("steer", "r-1", "hi"), ("approve", "r-1")):
        done = tinyagents(
            "runs", *action, "--correlation-id", blank, "--store", "sqlite:///runs.db",
            cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
        assert "--correlation-id" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("blank", ["", "  "])
def test_cli_a_blank_run_in_attenuate_is_refused(tmp_path: Path, blank: str) -> None:
    # it made a token limited to a run named "" (a check no run passes), handed over as if
    # it were narrowed to the run the operator meant: an unset variable, as for the id above
    minted = tinyagents(
        "token", "mint", "--tenant", "a", "--user", "u", "--key-file", "k", cwd=tmp_path
    )  # fmt: skip
    assert minted.returncode == 0, minted.stderr
    done = tinyagents(
        "token", "attenuate", minted.stdout.strip(), "--run", blank, "--key-file", "k",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "--run" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("blank", ["", "  "])
def test_cli_a_blank_run_id_is_a_usage_error_not_a_wrong_url(tmp_path: Path, blank: str) -> None:
    # an unset variable ("$RUN") over --url was told "--url has no such endpoint: is --url the
    # address serve printed?" (the path /runs//pause), and over --store "not found: run " or
    # "invalid target": each way a different wrong story for one mistake
    actions = [
        ("show", blank), ("tree", blank), ("pause", blank), ("resume", blank),
        ("cancel", blank), ("steer", blank, "hi"), ("approve", blank), ("list", "--root", blank),
    ]  # fmt: skip
    for action in actions:
        for where in (("--url", "http://127.0.0.1:1"), ("--store", "sqlite:///missing.db")):
            done = tinyagents("runs", *action, *where, cwd=tmp_path)
            assert done.returncode == 2, (action, where, done.stdout, done.stderr)
            assert "must not be blank" in done.stderr, (action, where, done.stderr)
            assert "is --url" not in done.stderr, done.stderr
            assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("blank", ["", "  "])
def test_cli_a_blank_interrupt_is_refused_not_looked_for(tmp_path: Path, blank: str) -> None:
    # --interrupt "" was looked for among the run's questions and reported as "no one
    # pending interrupt to answer (pending: i-...)", naming the one question it could answer
    done = tinyagents(
        "runs", "approve", "g-1", "--interrupt", blank, "--store", "sqlite:///missing.db",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "--interrupt" in done.stderr and "must not be blank" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_cli_an_unknown_status_is_refused_by_the_parser(tmp_path: Path) -> None:
    (tmp_path / "runs.db").touch()
    done = tinyagents(
        "runs", "list", "--store", "sqlite:///runs.db", "--status", "runing", cwd=tmp_path
    )
    assert done.returncode == 2 and "invalid choice: 'runing'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


async def test_cli_a_run_id_is_one_path_segment_over_http(served: Served) -> None:
    """An id holding ``/``, ``..`` or ``?`` names no run: it must not reach another run's
    endpoint (``A/../B`` pausing B)."""
    a = await served.start_run("acme")
    b = await served.start_run("acme")
    env = {**os.environ, "TINYAGENTS_TOKEN": served.tokens["alice"], "COLUMNS": "200"}
    for argv in (
        ("pause", f"{a.run_id}/../{b.run_id}"),
        ("steer", f"../runs/{b.run_id}", "finish"),
        ("show", f"{b.run_id}?x=1"),
        ("tree", f"{b.run_id}/tree#"),
    ):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tinyagents.cli", "runs", *argv, "--url", served.url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
        assert proc.returncode == 1 and b"not found" in out, (argv, out, err)
    assert served.runtime.steering_history(b.run_id) == []


async def test_cli_takes_the_api_url_serve_prints_and_never_calls_a_wrong_url_not_found(
    served: Served,
) -> None:
    """``serve`` prints ``API: http://HOST:PORT/api/agents``: given as ``--url`` it found no
    run at all ("not found: run r-...", exit 1, and a command "rejected") for runs that
    exist, as did any --url whose path is not the server's root."""
    run = await served.start_run("acme")
    env = {**os.environ, "TINYAGENTS_TOKEN": served.tokens["alice"], "COLUMNS": "200"}

    async def cli(*argv: str) -> tuple[int | None, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tinyagents.cli", "runs", *argv,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
        return proc.returncode, out.decode(), err.decode()

    for url in (f"{served.url}/api/agents", f"{served.url}/api/agents/"):
        code, out, err = await cli("show", run.run_id, "--url", url, "--json")
        assert code == 0 and run.run_id in out, (url, out, err)
        code, out, err = await cli("pause", run.run_id, "--url", url)
        assert code == 0 and "accepted" in out, (url, out, err)
    for url in (f"{served.url}/console", f"{served.url}/api"):
        for argv in (("show", run.run_id), ("steer", run.run_id, "hi"), ("list",)):
            code, out, err = await cli(*argv, "--url", url)
            assert code == 2 and "not found" not in out, (url, argv, out, err)
            assert "--url" in err, (url, argv, err)
    paused = [e.type for e in served.runtime.steering_history(run.run_id)]
    assert paused.count("steering.accepted") == 2, paused


async def test_cli_a_url_with_a_query_or_the_console_link_is_refused_not_a_traceback(
    served: Served,
) -> None:
    """``--url`` given the console link serve prints (``http://HOST:PORT/#token=...``) or any
    URL with a query reached the console's page (the fragment and query swallowed the API's
    path): ``runs list`` / ``show`` crashed with an AttributeError on its HTML, and ``pause``
    blamed the URL with a 405. Each is one line, exit 2, naming what to give, never echoing
    the token."""
    run = await served.start_run("acme")
    env = {**os.environ, "TINYAGENTS_TOKEN": served.tokens["alice"], "COLUMNS": "200"}
    secret = served.tokens["alice"][:40]
    for url in (f"{served.url}/#token={served.tokens['alice']}", f"{served.url}/?x=1"):
        for argv in (("list",), ("show", run.run_id), ("pause", run.run_id)):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tinyagents.cli", "runs", *argv, "--url", url,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
            )  # fmt: skip
            async with asyncio.timeout(60):
                out, err = await proc.communicate()
            text = err.decode()
            assert proc.returncode == 2 and out == b"", (url, argv, out, text)
            assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text
            assert "--url" in text and secret not in text, text
    assert served.runtime.steering_history(run.run_id) == []


@pytest.mark.parametrize("timeout", ["nan", "-10", "0", "inf", "soon"])
def test_cli_a_timeout_that_is_no_positive_number_is_refused(tmp_path: Path, timeout: str) -> None:
    done = tinyagents(
        "runs", "list", "--url", "http://127.0.0.1:1", "--timeout", timeout, cwd=tmp_path
    )
    assert done.returncode == 2 and "--timeout" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def _not_a_file(tmp_path: Path, kind: str) -> Path:
    """A node at a key file's path that is not a regular file (size 0, as ``/dev/null``)."""
    path = tmp_path / f"key.{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    else:  # a null device of its own: the real /dev/null is never risked
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:  # a laptop without root; CI runs as root, and must run it
            skip_unless_ci("making a device node needs root")
    return path


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize("command", ["mint", "serve"])
def test_cli_a_key_file_that_is_no_regular_file_is_refused_and_left_in_place(
    tmp_path: Path, kind: str, command: str
) -> None:
    # a device or a pipe has size 0, so it was taken for an empty key file "written as if
    # it were missing": unlinked, and a new key linked in its place. Run as root,
    # `serve --key-file /dev/null` deleted /dev/null and left a regular file there
    node = _not_a_file(tmp_path, kind)
    if command == "mint":
        args: tuple[str, ...] = ("token", "mint", "--tenant", "a", "--user", "u")
    else:
        args = ("serve", "--port", "0", "--store", "sqlite:///runs.db")
    done = tinyagents(*args, "--key-file", node.name, cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    mode = node.lstat().st_mode
    assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode)
    assert not list(tmp_path.glob(".key.*.tmp"))


def test_cli_more_workers_than_a_machine_runs_is_refused_before_any_starts(
    tmp_path: Path,
) -> None:
    # a slip of the keyboard (--workers 100000) started interpreters one after another, tens
    # a second with nothing printed, until the machine ran out of memory
    done = tinyagents(
        "serve", "--workers", "100000", "--port", "0", "--store", "sqlite:///runs.db",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "--workers" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert list(tmp_path.iterdir()) == []  # no store, no key file


async def test_cli_output_to_an_ascii_stream_is_shown_not_a_traceback(
    served: Served, tmp_path: Path
) -> None:
    """A terminal or pipe that takes only ASCII (``PYTHONIOENCODING=ascii``, ``LANG=C`` in
    some shells, an old Windows code page): ``runs list`` / ``show`` / ``tree`` and
    ``inspect`` died with a UnicodeEncodeError traceback on the first ``…`` or ``·`` they
    drew (exit 1, half a table). Text is shown with what the stream cannot carry replaced,
    and ``--json`` stays valid JSON, the same values (``\\u`` escapes)."""
    run = await served.runtime.start(busy_agent("café-bot"), "work", tenant_id="acme")
    env = {
        **os.environ,
        "TINYAGENTS_TOKEN": served.tokens["alice"],
        "COLUMNS": "60",
        "PYTHONIOENCODING": "ascii",
    }

    async def cli(*argv: str) -> tuple[int | None, bytes, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tinyagents.cli", *argv,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
        return proc.returncode, out, err.decode()

    url = ("--url", served.url)
    for argv in (
        ("runs", "list", *url),
        ("runs", "show", run.run_id, *url),
        ("runs", "tree", run.run_id, *url),
        ("inspect", str(tmp_path / "runs.db")),
    ):
        code, out, err = await cli(*argv)
        assert code == 0 and "Traceback" not in err, (argv, out, err)
        assert out.isascii() and run.run_id.encode() in out, (argv, out)
    for argv in (("runs", "list", "--json", *url), ("runs", "show", run.run_id, "--json", *url)):
        code, out, err = await cli(*argv)
        assert code == 0 and "Traceback" not in err, (argv, out, err)
        shown = json.loads(out)
        agents = [r["agent_id"] for r in shown] if isinstance(shown, list) else [shown["agent_id"]]
        assert agents == ["café-bot"], (argv, agents)


async def test_cli_list_of_a_root_it_cannot_find_is_not_found_either_way(
    served: Served, tmp_path: Path
) -> None:
    """``runs list --root R`` of a run that is not there (or another tenant's): through
    ``--url`` it was "error: the server answered 404: run not found", exit 2 (could not ask),
    and through ``--store`` an empty table, exit 0, as if the tree had no runs. Both now say
    what ``show`` says, ``not found: run R``, exit 1 (and ``--json`` the same object)."""
    run = await served.start_run("acme")
    store = ("--store", f"sqlite:///{tmp_path / 'runs.db'}")
    env = {**os.environ, "TINYAGENTS_TOKEN": served.tokens["bob"], "COLUMNS": "200"}

    async def cli(*argv: str) -> tuple[int | None, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tinyagents.cli", "runs", "list", *argv,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
        return proc.returncode, out.decode(), err.decode()

    for root, where in (
        ("r-nonexist", ("--url", served.url)),
        ("r-nonexist", store),
        (run.run_id, ("--url", served.url)),  # bob's token is globex's
        (run.run_id, (*store, "--tenant", "globex")),
    ):
        code, out, err = await cli("--root", root, *where)
        assert (code, out.strip(), err) == (1, f"not found: run {root}", ""), (root, where)
        code, out, err = await cli("--root", root, "--json", *where)
        assert code == 1 and json.loads(out) == {"error": "not found", "run_id": root}, out
    code, out, err = await cli("--root", run.run_id, "--json", *store)
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == [run.run_id], (out, err)


def test_cli_a_key_file_that_is_not_text_is_refused_in_words_and_kept(tmp_path: Path) -> None:
    # it said "'ascii' codec can't decode byte 0xca in position 0: ordinal not in range(128)"
    content = b"\xca\xfe" + b"\x00" * 62
    key = tmp_path / "k"
    key.write_bytes(content)
    done = tinyagents(
        "token", "mint", "--tenant", "a", "--user", "u", "--key-file", "k", cwd=tmp_path
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "is not an Ed25519 private key in hex" in done.stderr, done.stderr
    assert "codec" not in done.stderr and "Traceback" not in done.stderr
    assert "k" in done.stderr and len(done.stderr) < 400
    assert key.read_bytes() == content


@pytest.mark.parametrize("think", ["abc", "nan", "-1", "inf", "1e308"])
def test_serve_demo_with_a_think_time_that_is_no_duration_is_refused_before_anything_starts(
    tmp_path: Path, think: str
) -> None:
    # "abc" was a ValueError traceback once the server had started; "nan" made the demo's
    # task fail unseen (no runs), "inf" left its first answer thinking for ever, "-1" was 0
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TINYAGENTS_DEMO_THINK_S": think}
    done = subprocess.run(
        [sys.executable, "-m", "tinyagents.cli", "serve", "--demo", "--port", "0",
         "--store", "sqlite:///runs.db"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "TINYAGENTS_DEMO_THINK_S" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert list(tmp_path.iterdir()) == []  # no store, no key file
