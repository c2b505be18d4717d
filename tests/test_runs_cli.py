"""``tinyagents runs ...`` (issue 13 item 6) against a store file another process's runtime
writes, and against a real server over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.services import drop_pg_schemas, pg_schema, postgres_dsn
from tests.slow_agent import slow_agent
from tinyagents import Runtime
from tinyagents.cli import main
from tinyagents.server import Auth, Control, bind, create_app, serving
from tinyagents.server.demo import refund_graph

HELPER = Path(__file__).parent / "slow_agent.py"
CLI = str(Path(sys.executable).parent / "tinyagents")


class Owner:
    """Another process: a runtime on ``url`` running a slow agent (or a refund graph)."""

    def __init__(self, tmp_path: Path, mode: str = "own") -> None:
        self.db = tmp_path / "runs.db"
        self.url = f"sqlite:///{self.db}"
        ids = tmp_path / "run.json"
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.proc = subprocess.Popen(
            [sys.executable, str(HELPER), mode, self.url, str(ids)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        deadline = time.monotonic() + 60  # a hang guard
        while not ids.exists():
            assert self.proc.poll() is None, self.proc.stderr.read()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the owner process did not start"
            time.sleep(0.02)
        self.run_id = json.loads(ids.read_text())["run_id"]

    def result(self) -> dict[str, Any]:
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err.decode()
        return json.loads(out.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[Owner]:
    started = Owner(tmp_path)
    yield started
    started.stop()


def runs(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["runs", *argv])
    return code, capsys.readouterr().out


def runs_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out = runs(capsys, *argv, "--json")
    return code, json.loads(out)


def until_status(
    capsys: pytest.CaptureFixture[str], where: list[str], run_id: str, status: str
) -> dict[str, Any]:
    deadline = time.monotonic() + 60  # a hang guard
    while True:
        _, snap = runs_json(capsys, "show", run_id, *where)
        if snap.get("status") == status or time.monotonic() > deadline:
            assert snap.get("status") == status, snap
            return snap  # type: ignore[no-any-return]
        time.sleep(0.05)


def test_list_show_tree_and_steer_through_a_store(
    owner: Owner, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--store", owner.url]
    code, listed = runs_json(capsys, "list", *where)
    assert code == 0 and [r["run_id"] for r in listed] == [owner.run_id]
    assert listed[0]["status"] == "running" and listed[0]["tenant_id"] == "acme"
    code, table = runs(capsys, "list", *where)
    assert code == 0 and owner.run_id in table and "running" in table and "slow" in table
    assert runs_json(capsys, "list", *where, "--status", "completed") == (0, [])
    code, snap = runs_json(capsys, "show", owner.run_id, *where)
    assert code == 0 and snap["owner"] and snap["usage"]["model_calls"] >= 0
    code, shown = runs(capsys, "show", owner.run_id, *where)
    assert code == 0 and "owner" in shown and "running" in shown
    code, tree = runs(capsys, "tree", owner.run_id, *where)
    assert code == 0 and owner.run_id in tree and "slow" in tree
    # an agent run never asks: naming an interrupt cannot help, so the error does not say to
    assert main(["runs", "approve", owner.run_id, *where]) == 2
    err = capsys.readouterr().err
    assert f"run {owner.run_id} is an agent run" in err and "only graph runs" in err
    assert "--interrupt" not in err

    code, receipt = runs_json(
        capsys, "steer", owner.run_id, "note billing", *where, "--correlation-id", "c-cli"
    )
    assert code == 0 and receipt["status"] == "accepted" and receipt["run_id"] == owner.run_id
    code, again = runs_json(
        capsys, "steer", owner.run_id, "note billing", *where, "--correlation-id", "c-cli"
    )
    assert code == 0 and again["status"] == "duplicate"

    assert runs_json(capsys, "pause", owner.run_id, *where)[1]["status"] == "accepted"
    until_status(capsys, where, owner.run_id, "paused")
    code, line = runs(capsys, "resume", owner.run_id, *where)
    assert code == 0 and "accepted" in line
    until_status(capsys, where, owner.run_id, "running")
    code, receipt = runs_json(capsys, "steer", owner.run_id, "please finish", *where)
    assert code == 0 and receipt["status"] == "accepted"
    steered = json.loads(owner.result()["output"])["steered"]
    assert sum("note billing" in t for t in steered) == 1

    code, late = runs_json(capsys, "cancel", owner.run_id, *where)
    assert code == 1 and late["status"] == "rejected" and "target finished" in late["reason"]


def test_a_run_whose_owner_died_is_listed_as_owner_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 'running' run whose process was killed minutes ago (no heartbeat since): the table
    and the panel say "(owner silent)", the JSON has owner_silent."""
    from tinyagents.store import SqliteStore

    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def save() -> None:
        store = SqliteStore(tmp_path / "runs.db")
        await store.open()
        snap = {"run_id": "r-1", "root_run_id": "r-1", "tenant_id": "acme"}
        await store.save_runs(
            [
                {
                    **snap,
                    "status": "running",
                    "owner": "rt-x",
                    "updated_at": "2026-01-01T00:00:00+00:00",
                }
            ]
        )
        await store.close()

    asyncio.run(save())
    code, table = runs(capsys, "list", "--store", url)
    assert code == 0 and "(owner silent)" in table
    code, panel = runs(capsys, "show", "r-1", "--store", url)
    assert code == 0 and "(owner silent)" in panel
    code, snap = runs_json(capsys, "show", "r-1", "--store", url)
    assert code == 0 and snap["owner_silent"] is True and snap["status"] == "running"


def test_tenants_unknown_runs_and_missing_stores(
    owner: Owner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--store", owner.url, "--tenant", "globex"]
    assert runs_json(capsys, "list", *where) == (0, [])
    code, out = runs_json(capsys, "show", owner.run_id, *where)
    assert code == 1 and out["error"] == "not found"
    code, receipt = runs_json(capsys, "steer", owner.run_id, "x", *where)
    assert code == 1 and receipt["reason"] == f"not found: run {owner.run_id}"
    code, out = runs(capsys, "show", "r-nope", "--store", owner.url)
    assert code == 1 and "not found" in out
    code = main(["runs", "list", "--store", f"sqlite:///{tmp_path / 'nothing.db'}"])
    assert code == 2 and not (tmp_path / "nothing.db").exists()
    assert "no store file" in capsys.readouterr().err
    assert main(["runs", "list", "--store", "memory://"]) == 2
    assert "own process" in capsys.readouterr().err
    code = main(["runs", "steer", owner.run_id, "  ", "--store", owner.url])
    assert code == 2 and "empty" in capsys.readouterr().err
    # the run was never touched: it still finishes on its own command only
    assert (
        runs_json(capsys, "cancel", owner.run_id, "--store", owner.url)[1]["status"] == "accepted"
    )
    assert owner.result()["status"] == "cancelled"


async def _schema_exists(name: str) -> bool:
    return bool(await _sql(f"SELECT 1 FROM pg_namespace WHERE nspname = '{name}'"))


async def _sql(query: str) -> Any:
    import asyncpg

    conn = await asyncpg.connect(postgres_dsn())
    try:
        return await conn.fetchval(query)
    finally:
        await conn.close()


def test_a_missing_postgres_schema_is_refused_never_created(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A typo in ``?schema=`` is an error, like a missing SQLite file: the read-only commands
    must not create the schema and its tables and then report an empty store."""
    typo, real = pg_schema(), pg_schema()
    try:
        where = ["--store", f"{postgres_dsn()}?schema={typo}"]
        for argv in (["list"], ["show", "r-1"], ["tree", "r-1"], ["steer", "r-1", "x"]):
            code = main(["runs", *argv, *where])
            err = capsys.readouterr().err
            assert code == 2, (argv, err)
            assert typo in err and "no schema" in err and len(err.strip().splitlines()) == 1
            assert not asyncio.run(_schema_exists(typo)), argv
        code = main(["inspect", f"{postgres_dsn()}?schema={typo}"])
        assert code == 2 and not asyncio.run(_schema_exists(typo))
        assert "tinyagents runs show RUN_ID --store" in capsys.readouterr().out
        # a schema that exists but holds no store: refused too, and left without tables
        asyncio.run(_sql(f'CREATE SCHEMA "{typo}"'))
        assert main(["runs", "list", *where]) == 2
        assert f"no tinyagents store in schema '{typo}'" in capsys.readouterr().err
        tables = f"SELECT count(*) FROM pg_tables WHERE schemaname = '{typo}'"
        assert asyncio.run(_sql(tables)) == 0
        # a schema a runtime made is read as before; a runtime still creates its schema
        url = f"{postgres_dsn()}?schema={real}"

        async def make() -> None:
            async with Runtime(store=url):
                pass

        asyncio.run(make())
        assert asyncio.run(_schema_exists(real))
        assert runs_json(capsys, "list", "--store", url) == (0, [])
    finally:
        asyncio.run(drop_pg_schemas())


def test_a_sqlite_file_that_is_no_store_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SQLite side of a missing schema: a file of another program (or an empty one, a
    typo'd path created by ``touch``) is refused, never turned into a store."""
    import sqlite3

    other, empty = tmp_path / "other.db", tmp_path / "empty.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    empty.touch()
    before = other.read_bytes()
    for db in (other, empty):
        for argv in (["list"], ["show", "r-1"], ["steer", "r-1", "x"]):
            code = main(["runs", *argv, "--store", f"sqlite:///{db}"])
            err = capsys.readouterr().err
            assert code == 2, (db, argv, err)
            assert "no tinyagents store" in err and len(err.strip().splitlines()) == 1
    assert other.read_bytes() == before and empty.stat().st_size == 0
    assert not (tmp_path / "other.db-wal").exists()
    with sqlite3.connect(other) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert tables == {"notes"}


def test_approve_a_pending_interrupt_through_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph_owner = Owner(tmp_path, mode="own-graph")
    try:
        where = ["--store", graph_owner.url]
        deadline = time.monotonic() + 60  # a hang guard
        while True:
            _, snap = runs_json(capsys, "show", graph_owner.run_id, *where)
            if snap["interrupts"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        (interrupt,) = snap["interrupts"]
        code, out = runs(capsys, "show", graph_owner.run_id, *where)
        assert "interrupt" in out and interrupt["id"] in out
        code = main(["runs", "approve", graph_owner.run_id, *where, "--interrupt", "i-nope"])
        assert code == 2 and interrupt["id"] in capsys.readouterr().err
        code, receipt = runs_json(capsys, "approve", graph_owner.run_id, *where, "--value", '"ok"')
        assert code == 0 and receipt["status"] == "accepted", receipt
        assert graph_owner.result()["output"]["decision"] == "refunded"
    finally:
        graph_owner.stop()


def test_approve_through_the_tasks_own_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `runs list` shows the waiting task's entry (gt-...) as `interrupted`: approving it said
    # it had no pending interrupt (the graph run holds them), and a command sent to it stayed
    # `accepted` on the entry, which has no loop, until the graph ended
    graph_owner = Owner(tmp_path, mode="own-graph")
    try:
        where = ["--store", graph_owner.url]
        deadline = time.monotonic() + 60  # a hang guard
        while True:
            _, listed = runs_json(capsys, "list", *where, "--root", graph_owner.run_id)
            entries = [r for r in listed if r["task_id"] and r["status"] == "interrupted"]
            if entries or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        (entry,) = entries
        code, receipt = runs_json(capsys, "approve", entry["run_id"], *where, "--value", '"ok"')
        assert code == 0 and receipt["status"] == "accepted", receipt
        assert receipt["run_id"] == graph_owner.run_id
        assert graph_owner.result()["output"]["decision"] == "refunded"
    finally:
        graph_owner.stop()


async def cli(*argv: str, token: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        CLI,
        "runs",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={
            **os.environ,
            "TINYAGENTS_TOKEN": token,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "COLUMNS": "200",
        },
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_same_actions_over_http() -> None:
    auth = Auth(Auth.generate_key())
    acme = auth.mint(user="alice", tenant="acme", rights=["agent:observe", "agent:control"])
    globex = auth.mint(user="mallory", tenant="globex", rights=["agent:observe", "agent:control"])
    reader = auth.mint(user="bob", tenant="acme", rights=["agent:observe"])
    async with Runtime() as rt:
        control = Control(rt)
        sock = bind("127.0.0.1", 0)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        async with serving(create_app(control, auth=auth, console=False), sock):
            agent = await rt.start(slow_agent(), "work", tenant_id="acme")
            graph = await rt.start_graph(
                refund_graph(),
                {"invoice": "#8", "amount": "1 EUR"},
                thread_id="t-8",
                tenant_id="acme",
            )
            code, out, err = await cli("list", "--url", url, "--json", token=acme)
            assert code == 0, err
            listed = {r["run_id"] for r in json.loads(out)}
            assert {agent.run_id, graph.run_id} <= listed  # with the graph's task runs
            code, out, _ = await cli("list", "--url", url, token=acme)
            assert code == 0 and agent.run_id in out and "running" in out
            code, out, _ = await cli("list", "--url", url, "--json", token=globex)
            assert code == 0 and json.loads(out) == []
            code, out, _ = await cli("show", agent.run_id, "--url", url, token=globex)
            assert code == 1 and "not found" in out
            code, out, _ = await cli("tree", agent.run_id, "--url", url, "--json", token=acme)
            assert code == 0 and json.loads(out)["run_id"] == agent.run_id

            code, out, _ = await cli(
                "steer", agent.run_id, "note http", "--url", url, "--json", token=reader
            )
            assert code == 1 and json.loads(out)["status"] == "rejected"
            # the receipt the CLI makes of a 403 has no id of the server's: "command None"
            code, out, _ = await cli("pause", agent.run_id, "--url", url, token=reader)
            assert code == 1 and "None" not in out and out.startswith("rejected command: forbidden")
            code, out, _ = await cli(
                "steer", agent.run_id, "x", "--url", url, "--json", token=globex
            )
            assert code == 1
            code, out, _ = await cli("pause", agent.run_id, "--url", url, "--json", token=acme)
            assert code == 0 and json.loads(out)["status"] == "accepted"
            code, out, _ = await cli("resume", agent.run_id, "--url", url, token=acme)
            assert code == 0 and "accepted" in out
            code, out, _ = await cli(
                "steer",
                agent.run_id,
                "please finish",
                "--url",
                url,
                "--json",
                "--correlation-id",
                "c-http",
                token=acme,
            )
            assert code == 0 and json.loads(out)["status"] == "accepted"
            result = await agent.result()
            assert "please finish" in result.output and "note http" not in result.output

            async with asyncio.timeout(60):
                while not rt.live_snapshots([graph.run_id])[0]["interrupts"]:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            code, out, err = await cli("approve", graph.run_id, "--url", url, "--json", token=acme)
            assert code == 0 and json.loads(out)["status"] == "accepted", err
            assert (await graph.result()).output["decision"] == "refunded"

            # in-process, a command for a finished run is accepted, then fails (DESIGN.md)
            code, out, _ = await cli(
                "cancel", agent.run_id, "--url", url, "--correlation-id", "c-late", token=acme
            )
            assert code == 0 and "accepted" in out
            late = [e for e in rt.steering_history(agent.run_id) if e.correlation_id == "c-late"]
            assert late[-1].type == "steering.failed"
            assert "target finished" in (late[-1].reason or "")
        code, _, err = await cli("list", "--url", url, token=acme)
        assert code == 2 and "cannot reach" in err

    # a server that is not a tinyagents one: its 404 is no "not found" (exit 1, refused) but
    # no answer (exit 2); an error body that is not JSON is quoted, not printed as None
    async def plain(scope: Any, receive: Any, send: Any) -> None:
        status = 404 if scope["path"].endswith("r-1") else 501
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"<h1>Nope</h1> plain text"})

    sock = bind("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with serving(plain, sock):
        code, _, err = await cli("show", "r-1", "--url", url, token=acme)
        assert code == 2 and "is --url a tinyagents server" in err, err
        code, _, err = await cli("steer", "r-2", "hi", "--url", url, token=acme)
        assert code == 2 and "501: <h1>Nope</h1> plain text" in err and "None" not in err
        code, _, err = await cli("list", "--url", url, token="")
        assert code == 2 and "TINYAGENTS_TOKEN" in err


async def test_a_server_answering_json_of_another_shape_is_no_traceback() -> None:
    """A server (or a proxy) that answers JSON, but not the API's: a list of runs that is an
    object, a run that is a list. ``runs list`` died in the table with an AttributeError."""
    bodies = {"/api/agents/runs": b'{"runs": []}', "/api/agents/runs/r-1": b"[1, 2]"}

    async def other(scope: Any, receive: Any, send: Any) -> None:
        body = bodies.get(scope["path"], b'["x"]')
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    sock = bind("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with serving(other, sock):
        for argv in (["list"], ["show", "r-1"], ["tree", "r-1"]):
            for shown in ([], ["--json"]):
                code, _, err = await cli(*argv, *shown, "--url", url, token="t")
                assert code == 2 and "Traceback" not in err, (argv, err)
                assert "is --url" in err and len(err.strip().splitlines()) == 1, err
        bodies["/api/agents/runs"] = b'[{"run_id": "r-1"}, "r-2"]'  # one row is no run
        code, _, err = await cli("list", "--url", url, token="t")
        assert code == 2 and "Traceback" not in err, err
        # a graph run whose interrupts are not the API's (approve read each one's "id")
        for interrupts in (b'["x"]', b'[{"task_id": "t-1"}]', b'"x"'):
            bodies["/api/agents/runs/r-2"] = b'{"run_id": "r-2", "kind": "graph", "interrupts": '
            bodies["/api/agents/runs/r-2"] += interrupts + b"}"
            code, _, err = await cli("approve", "r-2", "--url", url, token="t")
            assert code == 2 and "Traceback" not in err, (interrupts, err)
            assert "is --url" in err, err


def _saved_runs(tmp_path: Path, count: int) -> str:
    """A store file holding ``count`` finished runs of acme (and one of globex)."""
    from tinyagents.store import SqliteStore

    async def save() -> None:
        store = SqliteStore(tmp_path / "many.db")
        await store.open()
        snaps = [
            {
                "run_id": f"r-{i:03d}",
                "root_run_id": f"r-{i:03d}",
                "parent_run_id": None,
                "tenant_id": "globex" if i == 0 else "acme",
                "status": "completed",
                "kind": "agent",
                "created_at": f"2026-12-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
            }
            for i in range(count)
        ]
        await store.save_runs(snaps)
        await store.close()

    asyncio.run(save())
    return f"sqlite:///{tmp_path / 'many.db'}"


def test_list_shows_a_page_and_says_how_to_get_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--store", _saved_runs(tmp_path, 26), "--tenant", "acme"]
    code, listed = runs_json(capsys, "list", *where, "--limit", "10")
    assert code == 0
    assert [r["run_id"] for r in listed] == [f"r-{i:03d}" for i in range(25, 15, -1)]
    assert main(["runs", "list", *where, "--limit", "10", "--json"]) == 0
    out, err = capsys.readouterr()  # the list on stdout, how to get more on stderr
    assert len(json.loads(out)) == 10
    cursor = err.split("--cursor ")[1].split()[0]
    assert "--all" in err
    code, more = runs_json(capsys, "list", *where, "--limit", "10", "--cursor", cursor)
    assert [r["run_id"] for r in more] == [f"r-{i:03d}" for i in range(15, 5, -1)]
    code, everything = runs_json(capsys, "list", *where, "--all")
    assert [r["run_id"] for r in everything] == [f"r-{i:03d}" for i in range(25, 0, -1)]
    assert main(["runs", "list", *where, "--all"]) == 0
    out, err = capsys.readouterr()
    assert "25 run(s)" in out and err == ""
    assert main(["runs", "list", *where, "--cursor", "nonsense"]) == 2
    assert "--cursor" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse refuses it
        main(["runs", "list", *where, "--limit", "0"])
    assert "at least 1" in capsys.readouterr().err


async def test_list_follows_the_servers_pages() -> None:
    auth = Auth(Auth.generate_key())
    acme = auth.mint(user="alice", tenant="acme", rights=["agent:observe"])
    from tinyagents.store import SqliteStore

    with __import__("tempfile").TemporaryDirectory() as tmp:
        url_store = await asyncio.to_thread(_saved_runs, Path(tmp), 1300)
        store = SqliteStore(url_store.removeprefix("sqlite:///"))
        await store.open()
        try:
            control = Control(store=store)
            sock = bind("127.0.0.1", 0)
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            async with serving(create_app(control, auth=auth, console=False), sock):
                code, out, err = await cli(
                    "list", "--url", url, "--json", "--limit", "1200", token=acme
                )
                assert code == 0, err
                listed = [r["run_id"] for r in json.loads(out)]
                assert listed == [f"r-{i:03d}" for i in range(1299, 99, -1)]  # two requests
                assert "--cursor" in err
                cursor = err.split("--cursor ")[1].split()[0]
                code, out, err = await cli(
                    "list", "--url", url, "--json", "--all", "--cursor", cursor, token=acme
                )
                assert code == 0 and err == ""
                assert [r["run_id"] for r in json.loads(out)] == [
                    f"r-{i:03d}" for i in range(99, 0, -1)
                ]
                code, _, err = await cli("list", "--url", url, "--cursor", "nonsense", token=acme)
                assert code == 2 and "422" in err and "next link" in err
        finally:
            await store.close()


@pytest.mark.parametrize("option", ["--tenant", "--user"])
@pytest.mark.parametrize("value", ["", "  "])
def test_a_blank_tenant_or_user_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    # --tenant "" (an unset variable) listed nothing and answered every run "not found",
    # exit 0 or 1: as if the store were empty; --user "" named nobody in the audit trail
    where = ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    with pytest.raises(SystemExit) as exited:
        main(["runs", "list", *where, option, value])
    assert exited.value.code == 2
    assert f"argument {option}: must not be blank" in capsys.readouterr().err


def test_list_root_of_a_sub_run_says_its_root_over_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--root` of a sub-agent listed nothing over --store (runs are filed under their root),
    # where the server answers a 422 naming the root
    from tinyagents.store import SqliteStore

    async def save() -> None:
        store = SqliteStore(tmp_path / "tree.db")
        await store.open()
        base = {"tenant_id": "acme", "status": "completed", "kind": "agent"}
        await store.save_runs(
            [
                {**base, "run_id": "r-root", "root_run_id": "r-root", "parent_run_id": None,
                 "created_at": "2026-12-01T00:00:00+00:00"},
                {**base, "run_id": "r-kid", "root_run_id": "r-root", "parent_run_id": "r-root",
                 "created_at": "2026-12-01T00:00:01+00:00"},
            ]
        )  # fmt: skip
        await store.close()

    asyncio.run(save())
    where = ["--store", f"sqlite:///{tmp_path / 'tree.db'}"]
    code, listed = runs_json(capsys, "list", *where, "--root", "r-root")
    assert code == 0 and {r["run_id"] for r in listed} == {"r-root", "r-kid"}
    assert main(["runs", "list", *where, "--root", "r-kid"]) == 2
    err = capsys.readouterr().err
    assert "r-kid is not the root of its tree (its root is r-root)" in err, err
    assert "runs tree r-kid" in err, err


def test_runs_a_sqlite_store_url_with_a_query_is_refused_naming_it(tmp_path: Path) -> None:
    """``--store sqlite:///runs.db?mode=ro`` was looked up as a file named 'runs.db?mode=ro'
    ("no store file"), and a runtime given it made that file."""
    (tmp_path / "runs.db").touch()
    url = f"sqlite:///{tmp_path}/runs.db?mode=ro"
    proc = subprocess.run(
        [sys.executable, "-m", "tinyagents", "runs", "list", "--store", url],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc
    assert "takes no query ('?mode=ro')" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"]


def test_show_says_what_a_typed_question_expects_as_its_answer() -> None:
    """A question asked with ``response_schema`` shows that schema under it, so the operator
    knows which ``--value`` the run will take before sending one it refuses."""
    from rich.console import Console

    from tinyagents.server.runs_cli import run_panel

    schema = {"type": "object", "properties": {"approved": {"type": "boolean"}}}
    asks = [
        {"id": "i-1", "node": "approve", "task_id": "t-1", "value": "ok?"},
        {
            "id": "i-2",
            "node": "refund",
            "task_id": "t-2",
            "value": "ok?",
            "response_schema": schema,
        },
    ]
    console = Console(width=300, record=True)
    console.print(run_panel({"run_id": "g-1", "status": "interrupted", "interrupts": asks}))
    lines = console.export_text().splitlines()
    (answer,) = [line for line in lines if "answer" in line]
    assert json.dumps(schema) in answer and "--value" in answer
    assert [n for n, line in enumerate(lines) if "interrupt" in line and "i-2" in line] == [
        lines.index(answer) - 1
    ]


def test_tree_says_when_the_server_left_runs_out() -> None:
    """``GET /runs/{id}/tree`` shows at most ``?limit=`` runs and says ``truncated`` when it
    left some out: ``runs tree --url`` drew the runs it got as if they were all."""
    from rich.console import Console

    from tinyagents.server.runs_cli import run_tree

    child = {"run_id": "r-2", "status": "completed", "children": []}
    for truncated in (True, False):
        node = {"run_id": "r-1", "root_run_id": "r-0", "status": "running", "children": [child]}
        console = Console(width=300, record=True)
        console.print(run_tree({**node, "truncated": truncated}))
        text = console.export_text()
        assert "r-2" in text
        assert ("not shown" in text) is truncated, text
        if truncated:
            assert "runs list --root r-0" in text, text


_IDS = '"run_id": "r-1", "root_run_id": "r-1", "tenant_id": "acme", "status": "completed"'


@pytest.mark.parametrize(
    "damaged",
    [
        "[1, 2]",
        '"text"',
        "{}",
        '{"run_id": 7, "root_run_id": "r-1", "status": "completed"}',
        # its ids right, another field of the wrong type
        "{" + _IDS + ', "usage": "x"}',
        "{" + _IDS + ', "tools": 7}',
        "{" + _IDS + ', "tools": [1]}',
        "{" + _IDS + ', "parent_run_id": ["x"]}',
        "{" + _IDS + ', "interrupts": "x"}',
        "{" + _IDS + ', "pending_commands": [1]}',
    ],
)
def test_a_snapshot_that_is_json_but_no_snapshot_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damaged: str
) -> None:
    """A runs row whose snapshot is not JSON was a one-line 'could not read' (exit 2), but one
    that is JSON of another shape (a list, an object without the run's ids, a field of the
    wrong type) reached the CLI and failed in it with a traceback (``KeyError: 'run_id'``,
    ``TypeError``, ``AttributeError``)."""
    import sqlite3

    from tinyagents.store import SqliteStore

    db = tmp_path / "runs.db"

    async def save() -> None:
        store = SqliteStore(db)
        await store.open()
        await store.save_runs(
            [
                {"run_id": "r-1", "root_run_id": "r-1", "parent_run_id": None,
                 "tenant_id": "acme", "status": "completed", "kind": "agent",
                 "created_at": "2026-12-01T00:00:00+00:00"},
            ]
        )  # fmt: skip
        await store.close()

    asyncio.run(save())
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET data = ?", (damaged,))
    conn.close()
    where = ["--store", f"sqlite:///{db}"]
    for argv in (["list"], ["show", "r-1"], ["tree", "r-1"], ["steer", "r-1", "x"]):
        capsys.readouterr()
        code = main(
            ["runs", *argv, *where, "--timeout", "1"]
            if argv[0] == "steer"
            else ["runs", *argv, *where]
        )
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert "could not read" in err and "runs.db" in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, (argv, err)
    # ``inspect`` reads the file itself: it leaves such a record out and says so
    capsys.readouterr()
    assert main(["inspect", str(db)]) == 0
    assert "1 stored records could not be read" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("json_set(data, '$.status', 'zombie')", "status"),
        ("json_set(data, '$.owner', 7)", "owner"),
        ("json_set(data, '$.owner', json('{}'))", "owner"),
        ("'{not json'", "not JSON"),
    ],
)
@pytest.mark.parametrize("action", [["pause"], ["resume"], ["cancel"], ["steer", "x"]])
def test_a_command_for_a_damaged_stored_run_fails_at_once_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, why: str, action: list[str]
) -> None:
    """A run whose stored snapshot reads as JSON but with a status no run has, or an owner
    that is no runtime id, was taken for a live run: the command went into the inbox of no
    runtime, and the CLI said after its whole --timeout that no receipt came. It says at
    once, in one line, that the run's stored record is damaged, and sends nothing."""
    import sqlite3

    from tinyagents.store import SqliteStore

    db = tmp_path / "runs.db"

    async def save() -> None:
        store = SqliteStore(db)
        await store.open()
        await store.save_runs(
            [
                {"run_id": "r-1", "root_run_id": "r-1", "parent_run_id": None,
                 "tenant_id": "acme", "status": "running", "kind": "agent", "owner": "rt-1",
                 "created_at": "2026-12-01T00:00:00+00:00"},
            ]
        )  # fmt: skip
        await store.close()

    asyncio.run(save())
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE runs SET data = {damage}")
    conn.close()
    capsys.readouterr()
    code = main(["runs", *action[:1], "r-1", *action[1:], "--store", f"sqlite:///{db}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "stored record of run r-1 is damaged" in err and why in err, err
    assert "no receipt" not in err, err
    with sqlite3.connect(db) as conn:  # nothing was sent
        assert conn.execute("SELECT COUNT(*) FROM inbox").fetchone() == (0,)
    conn.close()


@pytest.mark.parametrize("damage", ["'{not json'", "json_set(data, '$.status', 'zombie')"])
def test_another_tenants_damaged_stored_run_is_not_found_as_an_unknown_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """``--tenant`` narrows the CLI to one tenant: another tenant's damaged run is what an
    unknown run is to it (the error would tell it the run exists), for a read and a command."""
    import sqlite3

    from tinyagents.store import SqliteStore

    db = tmp_path / "runs.db"

    async def save() -> None:
        store = SqliteStore(db)
        await store.open()
        await store.save_runs(
            [
                {"run_id": "r-1", "root_run_id": "r-1", "parent_run_id": None,
                 "tenant_id": "acme", "status": "running", "kind": "agent", "owner": "rt-1",
                 "created_at": "2026-12-01T00:00:00+00:00"},
            ]
        )  # fmt: skip
        await store.close()

    asyncio.run(save())
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE runs SET data = {damage}")
    conn.close()
    where = ["--store", f"sqlite:///{db}", "--tenant", "globex"]
    for action in (["show"], ["pause"], ["steer"]):
        answers = []
        for run_id in ("r-1", "r-none"):
            capsys.readouterr()
            extra = ["look again"] if action == ["steer"] else []
            extra += [] if action == ["show"] else ["--correlation-id", "c-1"]
            code = main(["runs", *action, run_id, *extra, *where, "--json"])
            out = capsys.readouterr()
            answers.append((code, out.out.replace(run_id, "ID"), out.err))
        assert answers[0] == answers[1], answers
        assert answers[0][0] == 1, answers


def test_tables_show_control_characters_escaped() -> None:
    """What a server sends (its run ids, agents, statuses, reasons, a store's rows) reached
    the terminal as it was: markup was escaped, but a terminal escape (``ESC[31m``, a
    right-to-left override) was drawn. A value with a character that is not printable is
    shown as its ``repr``, as the rest of the command shows names (``shown_name``)."""
    import io

    from rich.console import Console

    from tinyagents.server.runs_cli import receipt_line, run_panel, run_tree, runs_table

    bad = "ev\x1b[31mil\u202e"
    snap = {
        "run_id": bad,
        "root_run_id": bad,
        "agent_id": bad,
        "status": bad,
        "tenant_id": bad,
        "updated_at": bad,
        "usage": {bad: bad},
        "tools": [bad],
        "models": [bad],
        "pending_commands": [{"correlation_id": bad, "kind": bad, "state": bad, "actor": bad}],
        "interrupts": [{"id": bad, "node": bad, "task_id": bad, "value": bad}],
        "truncated": True,
        "children": [{"run_id": bad, "status": bad, "kind": bad}],
    }
    out = io.StringIO()
    console = Console(file=out, width=400)
    console.print(runs_table([snap]))
    console.print(run_panel(snap))
    console.print(run_tree(snap))
    console.print(
        receipt_line({"status": bad, "reason": bad, "run_id": bad, "correlation_id": bad})
    )
    text = out.getvalue()
    assert "\x1b" not in text and "\u202e" not in text, text
    assert repr(bad) in text, text


def test_json_output_of_a_run_holding_a_lone_surrogate_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run's text may hold half a UTF-16 pair (a model's or a tool's output, in its error):
    ``--json`` wrote it as it was, and writing it to the UTF-8 stream raised (a traceback). It
    is JSON's ``\\ud800`` escape, which reads back as the character."""
    from tinyagents.store import SqliteStore

    db = tmp_path / "runs.db"

    async def save() -> None:
        store = SqliteStore(db)
        await store.open()
        await store.save_runs(
            [
                {"run_id": "r-1", "root_run_id": "r-1", "parent_run_id": None,
                 "tenant_id": "acme", "status": "failed", "kind": "agent",
                 "created_at": "2026-12-01T00:00:00+00:00", "error": "half \ud800 é"},
            ]
        )  # fmt: skip
        await store.close()

    asyncio.run(save())
    where = ["--store", f"sqlite:///{db}"]
    for argv in (["list"], ["show", "r-1"], ["tree", "r-1"]):
        code, out = runs(capsys, *argv, *where, "--json")
        assert code == 0, argv
        assert "\\ud800" in out
        shown = json.loads(out)
        run = shown[0] if argv[0] == "list" else shown
        assert run["error"] == "half \ud800 é", argv
    code, table = runs(capsys, "show", "r-1", *where)  # the tables show it escaped already
    assert code == 0 and "failed" in table
