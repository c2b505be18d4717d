"""The command line explains itself: ``--version``, a demo on any model server that keeps its
whole story on a terminal and says why a run failed, and an ``inspect`` that reads at 80
columns, prints JSON for scripts, shows one run's subtree and graph tasks by node."""

from __future__ import annotations

import asyncio
import io
import json
import operator
import os
import re
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from rich.console import Console

from tinyagents import LiteLLMModel, Runtime, SteeringActor, SteeringCommand, SteeringKind
from tinyagents.cli import demo_model, inspect_store, main, read_store
from tinyagents.console import RunRow, audit_table, run_tree, settle_graph_tasks
from tinyagents.demo import run_demo
from tinyagents.errors import ConfigurationError
from tinyagents.events import GraphEvent, SteeringEvent
from tinyagents.graph import END, START, Send, StateGraph, interrupt
from tinyagents.protocol import SteeringTarget
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import ErrorReply, Gate, OpenAICompatServer

TINYAGENTS = str(Path(sys.executable).parent / "tinyagents")


class Screen:
    """What a terminal shows after ``text``: the few controls rich's ``Live`` writes (carriage
    return, cursor up, erase line, cursor show/hide); any other escape fails the test."""

    def __init__(self, text: str) -> None:
        self.lines: list[str] = [""]
        row = col = 0
        for token in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\n|[^\x1b\r\n]+", text):
            if token == "\n":
                row, col = row + 1, 0
                if row == len(self.lines):
                    self.lines.append("")
            elif token == "\r":
                col = 0
            elif token in ("\x1b[?25l", "\x1b[?25h"):
                pass
            elif token == "\x1b[2K":
                self.lines[row] = ""
            elif m := re.fullmatch(r"\x1b\[(\d*)A", token):
                row = max(0, row - int(m.group(1) or 1))
            elif token.startswith("\x1b"):
                raise AssertionError(f"unexpected terminal control {token!r}")
            else:
                line = self.lines[row].ljust(col)
                self.lines[row] = line[:col] + token + line[col + len(token) :]
                col += len(token)

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.lines)


def in_order(text: str, *parts: str) -> None:
    at = 0
    for part in parts:
        found = text.find(part, at)
        assert found >= 0, f"{part!r} not found after position {at} in:\n{text}"
        at = found + len(part)


# ---------------------------------------------------------------- --version and options


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from tinyagents import __version__

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"tinyagents {__version__}"


def test_python_dash_m_tinyagents_is_the_command() -> None:
    # "No module named tinyagents.__main__": the command only as the installed script
    import subprocess

    from tinyagents import __version__

    done = subprocess.run(
        [sys.executable, "-m", "tinyagents", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"tinyagents {__version__}"
    bad = subprocess.run([sys.executable, "-m", "tinyagents", "nope"], capture_output=True)
    assert bad.returncode == 2  # argparse's usage error, as the script gives


def test_demo_model_reads_the_key_from_the_named_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEMO_TEST_KEY", "sk-local")
    model = demo_model("openai/smollm2", "http://127.0.0.1:8080/v1", "DEMO_TEST_KEY")
    assert isinstance(model, LiteLLMModel)
    assert (model.name, model.api_base, model.api_key) == (
        "openai/smollm2",
        "http://127.0.0.1:8080/v1",
        "sk-local",
    )
    assert demo_model(None, None, None) is None  # the scripted models


def test_demo_with_an_unset_key_variable_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DEMO_TEST_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    argv = ["demo", "--model", "openai/x", "--api-key-env", "DEMO_TEST_KEY"]
    assert main(argv) == 2
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1
    assert "DEMO_TEST_KEY" in out and "not set" in out
    assert list(tmp_path.iterdir()) == []  # no store file was created


def test_demo_with_an_api_base_that_is_no_url_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # it ran the demo, and its run failed as the server's "HTTP 500", with no server anywhere
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--model", "openai/x", "--api-base", "127.0.0.1:8080/v1"]) == 2
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and "api_base must be an http" in out
    assert list(tmp_path.iterdir()) == []


def test_api_base_without_a_model_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="--model"):
        demo_model(None, "http://127.0.0.1:8080/v1", None)


# ---------------------------------------------------------------- the story on a terminal


async def test_the_story_stays_on_the_terminal_and_no_stale_tree_is_left(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)
    summary = await run_demo(db=tmp_path / "demo.db", console=console)
    assert summary["status"] == "completed"
    screen = Screen(out.getvalue()).text
    # The whole story is on the screen (the scrollback), in order, headline included.
    in_order(
        screen,
        "subagent.started     critic",
        "human alice steers child",
        "human alice tries to widen the child's tools",
        "steering.rejected",
        "the critic (a sibling) tries to steer research",
        "steering.rejected",
        "run.limit_exceeded",
        "orchestrator: completed",
        "Audit: every steering command",
    )
    # The live tree was erased when the run ended: the tree is drawn once, in its final
    # state, and no spinner of a finished model request is left behind.
    assert screen.count(f"orchestrator · {summary['root_run_id']}") == 1
    assert "running" not in screen.split("orchestrator: completed")[0].split("critic · ")[-1]
    assert "waiting for its model" not in screen
    assert f"orchestrator · {summary['root_run_id']} · completed" in screen


async def test_a_spinner_shows_while_a_model_thinks_and_is_gone_after(tmp_path: Path) -> None:
    gate = Gate("slow-model")  # a model that thinks until the test opens the gate
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)
    demo = asyncio.create_task(
        run_demo(db=tmp_path / "demo.db", model=gate.model("an answer"), console=console)
    )
    await gate.entered.wait()
    assert "orchestrator is waiting for its model (request m-" in Screen(out.getvalue()).text
    gate.open()
    summary = await demo
    assert summary["status"] == "completed"
    assert "waiting for its model" not in Screen(out.getvalue()).text


async def test_the_story_in_a_recorded_console(tmp_path: Path) -> None:
    console = Console(record=True, width=80, file=io.StringIO())
    summary = await run_demo(db=tmp_path / "demo.db", console=console)
    text = console.export_text()
    in_order(
        text,
        "human alice steers child",
        "human alice tries to widen",
        "the critic (a sibling)",
        "orchestrator: completed",
    )
    assert text.count(f"orchestrator · {summary['root_run_id']}") == 1
    # delivered after one model request, applied in the next: said so, not "in" both
    assert re.search(r"at after_model_response, after model request m-", text)


# ---------------------------------------------------------------- a real model, a failed run


async def test_a_real_model_that_calls_no_tools_is_told_apart_from_the_story(
    tmp_path: Path,
) -> None:
    async with OpenAICompatServer(["The invoice looks double-charged."]) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        console = Console(record=True, width=80, file=io.StringIO())
        summary = await run_demo(db=tmp_path / "demo.db", model=model, console=console)
    text = console.export_text()
    assert summary["status"] == "completed"
    assert len(server.requests) == 1
    in_order(
        text,
        "model.request",
        "model.response",
        "answers 'The invoice looks double-charged.'",
        "orchestrator: completed — The invoice looks double-charged.",
        "The scripted story did not play",
        "called no tools",
        "No steering commands were sent",
    )
    assert "Audit:" not in text


async def test_a_failed_run_shows_its_error_in_the_demo_inspect_and_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reply = ErrorReply(status=404, message="model smollm2 not loaded", type="not_found_error")
    async with OpenAICompatServer([reply] * 5) as server:
        model = LiteLLMModel(
            "openai/smollm2", api_base=server.base_url, api_key="sk-test", max_retries=0
        )
        console = Console(record=True, width=80, file=io.StringIO())
        summary = await run_demo(db=tmp_path / "demo.db", model=model, console=console)
    assert summary["status"] == "failed"
    error = summary["error"]  # RunResult.error: the type and the message
    kind, _, message = error.partition(": ")
    assert re.fullmatch(r"Model\w*Error|Model\w+", kind), error
    assert "smollm2" in message
    text = console.export_text()
    assert f"orchestrator: failed — {kind}: " in text
    assert "run.failed" in text  # as it happened, too
    capsys.readouterr()
    assert await inspect_store(summary["db"], summary["root_run_id"]) == 0
    printed = capsys.readouterr().out
    assert "failed" in printed and kind in printed


# ---------------------------------------------------------------- inspect


@pytest.fixture
async def demo_db(tmp_path: Path) -> dict[str, Any]:
    return await run_demo(db=tmp_path / "demo.db", console=Console(file=io.StringIO()))


async def test_the_audit_table_fits_80_columns_without_cutting_ids(
    demo_db: dict[str, Any],
) -> None:
    _, stored, _ = read_store(Path(demo_db["db"]))
    events = [e for e in stored if isinstance(e, SteeringEvent)]
    ids: set[str] = set()
    for e in events:
        ids.update({e.correlation_id, e.run_id or ""})
        ids.update(re.findall(r"\b[rcm]-[0-9a-f]{12}\b", e.reason or ""))
    for lifecycle in (False, True):
        console = Console(record=True, width=80, file=io.StringIO())
        console.print(audit_table(events, title="audit", lifecycle=lifecycle))
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= 80
        assert "…" not in text
        for id_ in ids - {""}:
            assert id_ in text, f"{id_} is cut at 80 columns:\n{text}"


async def test_inspect_json_prints_the_whole_record(
    demo_db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert await inspect_store(demo_db["db"], as_json=True) == 0
    record = json.loads(capsys.readouterr().out)
    runs = {r["run_id"]: r for r in record["runs"]}
    assert demo_db["root_run_id"] in runs
    limited = [r for r in runs.values() if r["status"] == "limit_exceeded"]
    assert len(limited) == 1 and "max_model_calls" in limited[0]["error"]
    commands = {c["correlation_id"]: c for c in record["commands"]}
    assert sorted(commands) == demo_db["requested"]
    assert {c["states"][-1] for c in commands.values()} == {"applied", "rejected"}
    types = {e["type"] for e in record["events"]}
    assert {"model.request", "tool.call", "run.completed", "steering.applied"} <= types


async def test_inspect_a_run_shows_only_its_subtree_and_its_commands(
    demo_db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert await inspect_store(demo_db["db"], as_json=True) == 0
    record = json.loads(capsys.readouterr().out)
    research = next(r for r in record["runs"] if r["status"] == "limit_exceeded")["run_id"]
    aimed_at_research = {c["correlation_id"] for c in record["commands"] if c["run_id"] == research}
    others = {c["correlation_id"] for c in record["commands"]} - aimed_at_research
    assert len(aimed_at_research) == 3 and others

    assert await inspect_store(demo_db["db"], research) == 0
    printed = capsys.readouterr().out
    assert research in printed
    assert "orchestrator ·" not in printed and "critic ·" not in printed
    for cid in aimed_at_research:
        assert cid in printed
    for cid in others:
        assert cid not in printed


async def test_inspect_json_from_the_command_line(demo_db: dict[str, Any]) -> None:
    proc = await asyncio.create_subprocess_exec(
        TINYAGENTS,
        "inspect",
        "--json",
        demo_db["db"],
        demo_db["root_run_id"],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)  # a hang guard, not a timing
    assert proc.returncode == 0, err
    assert json.loads(out)["run_id"] == demo_db["root_run_id"]


# ---------------------------------------------------------------- inspect on a graph run


def _review_graph() -> Any:
    def write(state: dict[str, Any]) -> dict[str, Any]:
        return {"notes": ["drafted"]}

    def fan_out(state: dict[str, Any]) -> list[Send]:
        return [Send("review", {"team": team}) for team in ("legal", "brand")]

    def review(arg: dict[str, str]) -> dict[str, Any]:
        decision = interrupt({"team": arg["team"]})
        return {"notes": [f"{arg['team']} {decision['approved']}"]}

    def publish(state: dict[str, Any]) -> dict[str, Any]:
        return {"notes": ["published"]}

    class Doc(TypedDict, total=False):
        notes: Annotated[list[str], operator.add]

    graph = StateGraph(Doc)
    graph.add_node("write", write).add_node("review", review).add_node("publish", publish)
    graph.add_edge(START, "write").add_conditional_edges("write", fan_out)
    graph.add_edge("review", "publish").add_edge("publish", END)
    return graph.compile(checkpointer=MemoryCheckpointer())


async def test_inspect_labels_graph_tasks_by_node_with_their_final_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # one line per task
    db = tmp_path / "graph.db"
    dana = SteeringActor.human("dana", tenant_id="acme", scopes=["agent:control"])
    async with Runtime(store=f"sqlite:///{db}") as rt:
        paused = rt.subscribe(where=lambda e: e.type == "graph.interrupt")
        run = await rt.start_graph(_review_graph(), {}, thread_id="doc", tenant_id="acme")
        asked: dict[str, Any] = {}
        while len(asked) < 2:
            event = await paused.get()
            asked[event.data["value"]["team"]] = event
        approve = SteeringCommand(
            target=SteeringTarget.graph_task(run.run_id, asked["legal"].task_id),
            actor=dana,
            kind=SteeringKind.APPROVE,
        )
        assert (await rt.submit(approve)).status == "accepted"
        await paused.get()  # legal ran again; brand still waits
        redirect = SteeringCommand(
            target=SteeringTarget.graph_node(run.run_id, "review"),
            actor=dana,
            kind=SteeringKind.REDIRECT,
            payload={"goto": "publish"},
        )
        assert (await rt.submit(redirect)).status == "accepted"
        assert (await run.result()).status == "completed"
    capsys.readouterr()
    assert await inspect_store(str(db)) == 0
    printed = capsys.readouterr().out
    tree = printed.split("Steering history")[0]
    legal, brand = asked["legal"].task_id, asked["brand"].task_id
    lines = {line for line in tree.splitlines()}
    legal_line = next(line for line in lines if legal in line)
    brand_line = next(line for line in lines if brand in line)
    assert "node review" in legal_line and "completed" in legal_line
    # one entry per task: a paused task resumes under its own entry (older stores, and a
    # task resumed by another process, have several: inspect merges them, tested below)
    assert 'approved by human "dana"' in legal_line and "earlier entries" not in legal_line
    assert "node review" in brand_line and "redirected" in brand_line
    assert "goto ['publish']" in brand_line
    assert "interrupted" not in tree
    assert "node write" in tree and "node publish" in tree

    monkeypatch.setenv("COLUMNS", "80")  # graph ids are longer; none is cut at 80 columns
    assert await inspect_store(str(db)) == 0
    narrow = capsys.readouterr().out
    assert max(len(line) for line in narrow.splitlines()) <= 80
    interrupts = [e.data["interrupt_id"] for e in asked.values()]
    commands = [approve.correlation_id, redirect.correlation_id]
    for id_ in [legal, brand, run.run_id, *interrupts[:1], *commands]:
        assert id_ in narrow, f"{id_} is cut at 80 columns:\n{narrow}"


def test_a_missing_key_tells_the_demo_user_about_api_key_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("COLUMNS", "300")
    argv = ["demo", "--db", str(tmp_path / "demo.db"), "--model", "openai/smollm2"]
    # nothing listens there, and nothing is sent: the key is missing before any request
    assert main([*argv, "--api-base", "http://127.0.0.1:9/v1"]) == 1
    out = capsys.readouterr().out
    assert "orchestrator: failed — MissingAPIKeyError: " in out
    assert "The scripted story did not play" not in out  # it failed: the error says why
    assert out.rstrip().endswith("--api-key-env NAME")


def test_inspect_merges_the_entries_of_a_task_from_an_older_store() -> None:
    """Before a paused task resumed under its own entry, a store holds an ``interrupted``
    entry and a second one for the same task (so does a task resumed by another process):
    inspect shows the last, listing the earlier; a task left ``interrupted`` when its run
    completed was left waiting."""
    graph = RunRow(run_id="g", kind="graph", status="completed")

    def entry(run_id: str, task_id: str, status: str) -> RunRow:
        return RunRow(
            run_id=run_id,
            parent_run_id="g",
            kind="graph",
            status=status,
            node="review",
            task_id=task_id,
        )

    rows = [
        graph,
        entry("gt-1", "t-a", "interrupted"),
        entry("gt-2", "t-b", "interrupted"),
        entry("gt-3", "t-a", "completed"),
        RunRow(run_id="r-agent", parent_run_id="gt-1"),  # an agent node's run, first entry
    ]
    events = [
        GraphEvent(type="graph.interrupt", run_id="g", task_id=task, step=1)
        for task in ("t-a", "t-b")
    ]
    settled = {r.run_id: r for r in settle_graph_tasks(rows, events)}
    assert sorted(settled) == ["g", "gt-2", "gt-3", "r-agent"]
    assert settled["gt-3"].earlier == ["gt-1"] and settled["gt-3"].status == "completed"
    assert settled["r-agent"].parent_run_id == "gt-3"
    assert settled["gt-2"].status == "completed"
    assert settled["gt-2"].note == "left waiting when the graph run ended completed"


async def test_inspect_of_a_run_whose_snapshot_is_damaged_says_so(
    demo_db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # it said "run r-... is not in demo.db; runs: ..." of a run whose row is there, damaged
    runs, _, _ = read_store(Path(demo_db["db"]))
    research = next(r for r in runs if r["status"] == "limit_exceeded")["run_id"]
    with sqlite3.connect(demo_db["db"]) as db:
        db.execute("UPDATE runs SET data = '{broken' WHERE run_id = ?", (research,))
    db.close()
    capsys.readouterr()
    assert await inspect_store(demo_db["db"], research) == 2
    printed = capsys.readouterr().out
    assert "is not in" not in printed
    assert f"run snapshot of {research!r}: it is not JSON" in printed
    assert len(printed.strip().splitlines()) == 1


def test_runs_whose_parents_loop_are_drawn_not_left_out() -> None:
    # a damaged file whose runs name each other as parents (or a run its own parent) has no
    # top run among them: the tree drew only the others, and of such a run alone "(no runs)"
    rows = [
        RunRow(run_id="r-top", name="top"),
        RunRow(run_id="r-a", parent_run_id="r-b", name="a"),
        RunRow(run_id="r-b", parent_run_id="r-a", name="b"),
        RunRow(run_id="r-self", parent_run_id="r-self", name="self"),
        RunRow(run_id="r-child", parent_run_id="r-a", name="child"),
    ]
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(run_tree(rows))
    drawn = console.export_text()
    for row in rows:
        assert drawn.count(row.run_id) == 1, drawn
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(run_tree(rows[1:3]))
    drawn = console.export_text()
    assert "r-a" in drawn and "r-b" in drawn
