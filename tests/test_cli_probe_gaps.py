"""Gaps a probe of the ``tinyagents`` command found: control characters echoed or taken, an
environment variable name that is none, a locked store that outlived ``--timeout``, the
server key's error naming a file when the key came from the environment."""

from __future__ import annotations

import asyncio
import io
import sqlite3
from pathlib import Path

import pytest

from tinyagents.cli import main
from tinyagents.errors import ConfigurationError
from tinyagents.server import Auth
from tinyagents.server.auth import KEY_ENV
from tinyagents.store import SqliteStore
from tinyagents.supervisor.validate import validate_command, validate_file


def test_validate_prints_a_file_name_with_a_control_character_escaped(tmp_path: Path) -> None:
    # a terminal escape in the file's name reached the terminal as it was
    spec = tmp_path / "evil\x1b]0;pwned\x07.yaml"
    spec.write_text("on_violation: nope\n")
    out = io.StringIO()
    assert validate_command(str(spec), out) == 1
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07.yaml" in text
    out = io.StringIO()
    assert validate_command(str(tmp_path / "gone\x1b[2J.yaml"), out) == 1
    assert "\x1b" not in out.getvalue() and "no such file" in out.getvalue()


def test_validate_prints_a_plain_file_name_as_it_is(tmp_path: Path) -> None:
    spec = tmp_path / "plain spec.yaml"
    spec.write_text("on_violation: pause\n")
    out = io.StringIO()
    assert validate_command(str(spec), out) == 0
    assert out.getvalue().splitlines()[-1].startswith(f"{spec}: ok")


@pytest.mark.parametrize("command", ["mint", "serve"])
def test_a_user_with_a_control_character_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    user = "alice\x1b[2J"
    if command == "mint":
        argv = ["token", "mint", "--tenant", "acme", "--user", user, "--store", store]
    else:
        argv = ["serve", "--port", "0", "--store", store, "--user", user]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "user" in err and "control character" in err
    assert "\x1b" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs.db.server-key").exists()  # refused before anything is made


def test_a_runs_user_with_a_control_character_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["runs", "list", "--store", f"sqlite:///{tmp_path / 'r.db'}", "--user", "a\x07"])
    assert exited.value.code == 2
    assert "control character" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["A=B", "1KEY", "MY KEY", "KEY\x00"])
def test_an_api_key_env_that_is_no_variable_name_is_an_error_on_its_line(
    tmp_path: Path, name: str
) -> None:
    spec = tmp_path / "spec.yaml"
    quoted = name.replace("\x00", "\\0")
    spec.write_text(f'model: openai/gpt-4o-mini\napi_key_env: "{quoted}"\n')
    findings = validate_file(spec)
    assert [(f.severity, f.line) for f in findings] == [("error", 2)]
    assert "environment variable name" in findings[0].message


def test_an_api_key_env_of_a_named_model_is_checked_too(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: judge\nmodels:\n  judge:\n    model: openai/x\n    api_key_env: A=B\n")
    findings = validate_file(spec)
    assert [(f.severity, f.line) for f in findings] == [("error", 5)]


def test_a_valid_api_key_env_is_taken(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: openai/gpt-4o-mini\napi_key_env: _JUDGE_KEY_2\n")
    assert validate_file(spec) == []


def test_runs_steer_on_a_locked_store_stops_at_its_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # another process holding an exclusive lock kept the command for ~36 s at --timeout 2:
    # each wait of opening (the journal mode, every migration's retry) took the full 5 s
    path = tmp_path / "runs.db"

    async def make() -> None:
        store = SqliteStore(path)
        await store.open()
        await store.close()

    asyncio.run(make())
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        code = main(
            ["runs", "steer", "r-1", "hi", "--store", f"sqlite:///{path}", "--timeout", "0.3"]
        )
    finally:
        holder.close()
    err = capsys.readouterr().err
    assert code == 2
    assert "--timeout 0.3" in err and "locked" in err
    assert len(err.strip().splitlines()) == 1


def test_a_bad_key_in_the_environment_says_to_fix_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(KEY_ENV, "not-hex")
    with pytest.raises(ConfigurationError) as refused:
        Auth.resolve(store=f"sqlite:///{tmp_path / 'runs.db'}")
    message = str(refused.value)
    assert KEY_ENV in message and "key file" not in message


def test_a_bad_key_file_still_says_to_delete_it(tmp_path: Path) -> None:
    key = tmp_path / "k"
    key.write_text("not-hex")
    with pytest.raises(ConfigurationError, match="delete the key file"):
        Auth.from_key_file(key)


def test_demo_api_key_env_that_is_no_variable_name_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["demo", "--model", "openai/x", "--api-key-env", "A=B"]
    assert main(argv) == 2
    assert "not an environment variable name" in capsys.readouterr().out
