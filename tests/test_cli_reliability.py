"""``tinyagents demo`` and ``inspect`` never damage a file they were pointed at by mistake.

Each case runs the installed command in a fresh process, with a timeout as the hang guard, and
checks that the file's bytes and mtime are unchanged and that no side file (``-wal``,
``-shm``, a created database) appeared.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

TINYAGENTS = str(Path(sys.executable).parent / "tinyagents")
README = "# My project\n\nNotes that took a week to write.\n" * 20


def tinyagents(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TINYAGENTS, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,  # a hang fails the test instead of the whole run
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "200"},
    )


def fingerprint(directory: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every entry of ``directory``: bytes and mtime for files, None for directories."""
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else None
        for p in sorted(directory.iterdir())
    }


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode not in (0, None), proc
    output = (proc.stdout + proc.stderr).strip()
    assert len(output.splitlines()) == 1, output
    assert "Traceback" not in output
    return output


def root_runs(db: Path) -> list[str]:
    with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro&immutable=1", uri=True) as conn:
        rows = conn.execute(
            "SELECT run_id FROM runs WHERE json_extract(data, '$.parent_run_id') IS NULL"
        ).fetchall()
    conn.close()
    return [r[0] for r in rows]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store written by the demo (the process has exited: no -wal or -shm is left)."""
    directory = tmp_path_factory.mktemp("store")
    proc = tinyagents("demo", "--db", "demo.db", cwd=directory)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in directory.iterdir()) == ["demo.db"]
    return directory / "demo.db"


def other_apps_database(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('acme')")
    conn.close()


# ---------------------------------------------------------------- inspect


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("README.md", lambda p: p.write_text(README)),
        ("empty.db", lambda p: p.touch()),
        ("missing.db", lambda p: None),
        ("a-directory", lambda p: p.mkdir()),
        ("customers.db", other_apps_database),
    ],
)
def test_inspect_refuses_what_is_not_a_store_and_changes_nothing(
    tmp_path: Path, name: str, make: object
) -> None:
    make(tmp_path / name)  # type: ignore[operator]
    before = fingerprint(tmp_path)
    error = one_line_error(tinyagents("inspect", name, cwd=tmp_path))
    assert name in error
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize("command", ["inspect", "demo --db"])
@pytest.mark.parametrize("blank", ["", "sqlite:///", "sqlite://"])
def test_a_store_argument_that_names_no_file_says_so(
    tmp_path: Path, command: str, blank: str
) -> None:
    # it was read as the directory ".": ". is not a tinyagents store: it is not a file"
    error = one_line_error(tinyagents(*command.split(), blank, cwd=tmp_path))
    assert "names no file" in error and ". is not" not in error
    assert list(tmp_path.iterdir()) == []


def test_inspect_reads_a_store_without_writing_to_it(store: Path) -> None:
    before = fingerprint(store.parent)
    proc = tinyagents("inspect", store.name, cwd=store.parent)
    assert proc.returncode == 0, proc.stderr
    assert "orchestrator" in proc.stdout and "applied" in proc.stdout
    assert "research" in proc.stdout and "rejected" in proc.stdout
    assert fingerprint(store.parent) == before


def test_inspect_an_unknown_run_is_a_one_line_error(store: Path) -> None:
    before = fingerprint(store.parent)
    error = one_line_error(tinyagents("inspect", store.name, "r-nope", cwd=store.parent))
    assert "r-nope" in error
    assert fingerprint(store.parent) == before


# ---------------------------------------------------------------- demo


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("README.md", lambda p: p.write_text(README)),
        ("a-directory", lambda p: p.mkdir()),
        ("customers.db", other_apps_database),
    ],
)
def test_demo_refuses_a_file_that_is_not_a_store(tmp_path: Path, name: str, make: object) -> None:
    make(tmp_path / name)  # type: ignore[operator]
    before = fingerprint(tmp_path)
    for extra in ((), ("--fresh",)):
        error = one_line_error(tinyagents("demo", "--db", name, *extra, cwd=tmp_path))
        assert name in error and "not a tinyagents store" in error
        assert fingerprint(tmp_path) == before


def test_demo_keeps_earlier_runs_unless_fresh(tmp_path: Path) -> None:
    for _ in range(2):
        assert tinyagents("demo", "--db", "demo.db", cwd=tmp_path).returncode == 0
    assert len(root_runs(tmp_path / "demo.db")) == 2
    assert tinyagents("demo", "--db", "demo.db", "--fresh", cwd=tmp_path).returncode == 0
    assert len(root_runs(tmp_path / "demo.db")) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.db"]


def test_demo_takes_the_store_url_the_other_commands_take(tmp_path: Path) -> None:
    # 'sqlite:///demo.db' made a directory named 'sqlite:' and a store inside it, which
    # 'tinyagents runs --store sqlite:///demo.db' then did not find
    done = tinyagents("demo", "--db", "sqlite:///demo.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.db"]
    assert "tinyagents inspect demo.db" in done.stdout
    error = one_line_error(tinyagents("demo", "--db", "postgresql://x/y", cwd=tmp_path))
    assert "postgresql://x/y" in error and "SQLite" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.db"]


def test_demo_help_documents_fresh(tmp_path: Path) -> None:
    proc = tinyagents("demo", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert "--fresh" in proc.stdout


async def test_inspect_reads_a_store_another_connection_is_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tinyagents.cli import inspect_store
    from tinyagents.events import SteeringEvent
    from tinyagents.protocol import SteeringActor, SteeringKind, SteeringTarget
    from tinyagents.runs import RunInfo
    from tinyagents.store import SqliteStore

    db = tmp_path / "live.db"
    store = SqliteStore(str(db))
    await store.open()
    try:
        await store.save_runs(
            [RunInfo(run_id="r-1", root_run_id="r-1", agent_id="writer").snapshot()]
        )
        await store.append_events(
            [
                SteeringEvent(
                    type="steering.accepted",
                    run_id="r-1",
                    root_run_id="r-1",
                    target=SteeringTarget.agent_run("r-1"),
                    actor=SteeringActor.test(),
                    kind=SteeringKind.PAUSE,
                    correlation_id="c-live",
                )
            ]
        )
        assert Path(f"{db}-wal").exists()  # open and written: the rows sit in the WAL
        assert await inspect_store(str(db)) == 0
    finally:
        await store.close()
    printed = capsys.readouterr().out
    assert "writer · r-1" in printed and "c-live" in printed


def test_text_from_the_store_never_reaches_the_terminal_as_control_codes(tmp_path: Path) -> None:
    """A model server's error, an actor's or an agent's name are text from elsewhere: an
    escape sequence in them (a window title, a cleared screen, a fake prompt) was written to
    the operator's terminal as is by ``inspect`` and ``runs list/show/tree``."""
    import asyncio

    from tinyagents import Agent, Runtime, SteeringActor
    from tinyagents.testkit import FunctionModel, ScriptedModel

    evil = "\x1b]0;owned\x07\x1b[2J\x1b[31m\x9b1m"

    async def fails(request: object) -> str:
        raise RuntimeError(f"the server said {evil}")

    async def make() -> list[str]:
        async with Runtime(store=f"sqlite:///{tmp_path / 'runs.db'}") as rt:
            agent = Agent("agent", ScriptedModel(["ok"]))
            # ``Agent`` refuses such a name now; a store written before (or by another
            # writer) may still hold one, and no command prints it as it is (set past the
            # ``name`` setter, which checks it as ``Agent(name)`` does)
            agent._name = f"agent{evil}"
            named = await rt.start(agent, "x")
            await named.steer(
                "hi", actor=SteeringActor.human(f"ana{evil}", scopes=["agent:control"])
            )
            failing = await rt.start(Agent("b", FunctionModel(fails)), "x")
            for handle in (named, failing):
                await handle.result()
            return [named.run_id, failing.run_id]

    run_ids = asyncio.run(make())
    outputs = [tinyagents("inspect", "runs.db", cwd=tmp_path)]
    store = ["--store", "sqlite:///runs.db"]
    outputs.append(tinyagents("runs", "list", *store, cwd=tmp_path))
    for run_id in run_ids:
        outputs += [tinyagents("runs", a, run_id, *store, cwd=tmp_path) for a in ("show", "tree")]
    assert "agent" in outputs[0].stdout and "the server said" in outputs[0].stdout
    for done in outputs:
        assert done.returncode == 0, done.stderr
        assert not {"\x1b", "\x07", "\x9b"} & set(done.stdout + done.stderr), done.args
