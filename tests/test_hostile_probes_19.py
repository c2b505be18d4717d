"""A hostile or careless user's nineteenth round: every steering kind's payload at its edges,
a redirect carrying a part its target cannot act on, a graph node target or a model name that
shows nothing, commands racing each other, two runtimes on one file, damaged SQLite files, a
command's output into a pipe closed early.

Each test is a probe that found something (named in its docstring) or holds a decision down.
Probed and held (no test added): ``tinyagents serve`` given ports of -1, 70000 or ``1e3``,
host 999.1.1.1 (one line, exit code 2); ``tinyagents inspect`` and ``runs list --store`` of a
store file cut in half, cut to its first 100 bytes, or a directory (one line each);
``forget`` of an unknown, blank or running id, twice, or of a parent whose child runs (no-op,
or a typed refusal); ``retain_finished=0`` and ``retain_finished_s=0``; supervisor YAML with a
NaN fraction, ``1e3`` or ``true`` counts, ``1e309`` timeouts, ``/etc/shadow``, ``/dev/zero``
(through a symlink too), a FIFO or a 30 MB criteria file (each a line-numbered error or
warning).
"""

from __future__ import annotations

import asyncio
import math
import operator
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from tinyagents import (
    Agent,
    RunLimits,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
    tool,
)
from tinyagents.cli import main as cli_main
from tinyagents.errors import InvalidCommandError, StoreError
from tinyagents.graph import END, START, StateGraph
from tinyagents.store.checkpoint import SqliteCheckpointer
from tinyagents.supervisor import ModelEntry, SupervisorSpec, SupervisorSpecError
from tinyagents.supervisor.validate import validate_file
from tinyagents.testkit import EventRecorder, FunctionModel, ScriptedModel, reply, tool_call

K = SteeringKind
TERMINAL = ("rejected", "applied", "superseded", "failed")


def _command(target: Any, kind: SteeringKind, payload: dict[str, Any], **kw: Any) -> Any:
    return SteeringCommand(
        target=target, actor=SteeringActor.test(), kind=kind, payload=payload, **kw
    )


def _one_terminal(recorder: EventRecorder, correlation_id: str) -> str:
    ends = [s for s in recorder.lifecycle(correlation_id) if s in TERMINAL]
    assert len(ends) == 1, recorder.lifecycle(correlation_id)
    return ends[0]


@tool
def search(q: str = "") -> str:
    """Search."""
    return "found"


async def _steered_agent(
    kind: SteeringKind, payload: dict[str, Any]
) -> tuple[Any, Any, EventRecorder, Any]:
    """``kind`` with ``payload`` sent to an agent run waiting on its first model call (which
    then calls ``search`` and finishes): the receipt, the result, the events, the command."""
    release = asyncio.Event()
    calls = 0

    async def think(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await release.wait()
            return tool_call("search")
        return reply("done")

    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder]) as rt:
        agent = Agent(
            "a", FunctionModel(think), tools=[search], limits=RunLimits(max_model_calls=5)
        )
        handle = await rt.start(agent, "go")
        cmd = _command(SteeringTarget.agent_run(handle.run_id), kind, payload)
        receipt = await rt.submit(cmd)
        release.set()
        result = await asyncio.wait_for(handle.result(), 10)
    return receipt, result, recorder, cmd


# -- a redirect carrying a part its target cannot act on ---------------------------------------


async def test_a_redirect_to_an_agent_run_carrying_a_goto_is_refused_not_half_applied() -> None:
    """Found: a redirect with both ``goto`` and ``instruction`` sent to an agent run was
    accepted and applied: the instruction became the run's new goal and the ``goto`` (graph
    nodes) was dropped without a word, though one with ``goto`` alone is refused at submit.
    Refused at submit, saying to send the instruction alone."""
    receipt, result, recorder, cmd = await _steered_agent(
        K.REDIRECT, {"goto": "review", "instruction": "audit refunds instead"}
    )
    assert receipt.status == "rejected"
    assert "'goto'" in (receipt.reason or "") and "send 'instruction' alone" in (
        receipt.reason or ""
    )
    assert result.status == "completed"
    assert _one_terminal(recorder, cmd.correlation_id) == "rejected"


async def test_a_redirect_to_an_agent_run_with_an_instruction_alone_is_still_applied() -> None:
    receipt, result, recorder, cmd = await _steered_agent(
        K.REDIRECT, {"instruction": "audit refunds instead"}
    )
    assert receipt.status == "accepted"
    assert result.status == "completed"
    assert _one_terminal(recorder, cmd.correlation_id) == "applied"


class Count(TypedDict, total=False):
    n: int


def _held_graph() -> tuple[Any, asyncio.Event]:
    """START → a (held until the event is set) → b → END; c only by a redirect."""
    gate = asyncio.Event()

    async def a(state: Count) -> Count:
        await gate.wait()
        return {"n": state.get("n", 0) + 1}

    graph = (
        StateGraph(Count)
        .add_node("a", a, destinations=["b", "c"])
        .add_node("b", lambda s: {"n": s["n"] + 10})
        .add_node("c", lambda s: {"n": s["n"] + 100})
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .add_edge("c", END)
        .compile()
    )
    return graph, gate


async def _steered_graph(
    target_of: Any, kind: SteeringKind, payload: dict[str, Any]
) -> tuple[Any, Any, EventRecorder, Any]:
    graph, gate = _held_graph()
    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder]) as rt:
        handle = await rt.start_graph(graph, {"n": 0}, thread_id="t1")
        await asyncio.sleep(0.02)
        cmd = _command(target_of(handle.run_id), kind, payload)
        receipt = await rt.submit(cmd)
        gate.set()
        result = await asyncio.wait_for(handle.result(), 10)
    return receipt, result, recorder, cmd


_GRAPH_TARGETS = {
    "run": SteeringTarget.agent_run,
    "node": lambda run_id: SteeringTarget.graph_node(run_id, "a"),
}


@pytest.mark.parametrize("where", sorted(_GRAPH_TARGETS))
async def test_a_graph_redirect_carrying_an_instruction_is_refused_not_half_applied(
    where: str,
) -> None:
    """Found: a redirect with both ``goto`` and ``instruction`` sent to a graph run (or one
    of its nodes) was accepted and applied: the run went to the ``goto`` nodes and the
    instruction reached no one, without a word, though one with ``instruction`` alone is
    refused at submit. Refused at submit, saying what to send instead."""
    receipt, result, recorder, cmd = await _steered_graph(
        _GRAPH_TARGETS[where], K.REDIRECT, {"goto": "c", "instruction": "do better"}
    )
    assert receipt.status == "rejected"
    assert "'instruction'" in (receipt.reason or "")
    assert "add_instruction" in (receipt.reason or "")
    assert result.status == "completed"
    assert _one_terminal(recorder, cmd.correlation_id) == "rejected"


async def test_a_deferred_thread_redirect_carrying_an_instruction_is_refused_when_taken() -> None:
    """The same for a thread's redirect deferred until a graph run takes the thread: it is
    rejected then (the run's policy judges it), and the run goes on as it would."""
    graph, gate = _held_graph()
    gate.set()
    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder]) as rt:
        cmd = _command(SteeringTarget.thread("t"), K.REDIRECT, {"goto": "c", "instruction": "x"})
        assert (await rt.submit(cmd)).status == "deferred"
        handle = await rt.start_graph(graph, {"n": 0}, thread_id="t")
        result = await asyncio.wait_for(handle.result(), 10)
    assert (result.status, result.output) == ("completed", {"n": 11})
    assert recorder.lifecycle(cmd.correlation_id) == ["requested", "deferred", "rejected"]


@pytest.mark.parametrize("where", sorted(_GRAPH_TARGETS))
async def test_a_graph_redirect_with_a_goto_alone_is_still_applied(where: str) -> None:
    receipt, result, recorder, cmd = await _steered_graph(
        _GRAPH_TARGETS[where], K.REDIRECT, {"goto": ["c", "c"]}
    )
    assert receipt.status == "accepted"
    assert result.status == "completed"
    assert _one_terminal(recorder, cmd.correlation_id) == "applied"


# -- a graph node target that shows nothing ----------------------------------------------------


@pytest.mark.parametrize("node", [" ", "\u3000", "\u200b", "\t\n"])
def test_a_graph_node_target_that_shows_nothing_is_refused_when_made(node: str) -> None:
    """Found (known since round 18, left then): ``SteeringTarget.graph_node(run, " ")`` was
    taken, though no graph can have a node that shows nothing (``add_node`` refuses one): a
    command to it could only be rejected as not found, after its ``steering.requested``.
    Refused when the target is made, as a blank actor name is."""
    with pytest.raises(InvalidCommandError, match=r"node.*shows no visible character"):
        SteeringTarget.graph_node("g-1", node)
    with pytest.raises(InvalidCommandError, match="shows no visible character"):
        SteeringCommand.model_validate(
            {
                "target": {"type": "graph_node", "run_id": "g-1", "node": node},
                "actor": {"type": "test"},
                "kind": "cancel",
            }
        )


def test_a_graph_node_target_with_spaces_around_what_it_shows_is_still_taken() -> None:
    assert SteeringTarget.graph_node("g-1", " a ").node == " a "


# -- every kind's payload at its edges (held) --------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "payload", "says"),
    [
        (K.CONSTRAIN_TOOLS, {"tools": ["a\ud800"]}, "not valid UTF-8"),
        (K.CONSTRAIN_TOOLS, {"tools": [1]}, "valid string"),
        (K.CONSTRAIN_TOOLS, {"tools": "abc"}, "valid list"),
        (K.CONSTRAIN_TOOLS, {"tools": {"a", "b"}}, "a set is not JSON"),
        (K.CONSTRAIN_TOOLS, {"tools": ["a"], "reason": "\udcff"}, "not valid UTF-8"),
        (K.CONSTRAIN_MODEL, {"models": ["a"], "reason": "\ud800"}, "not valid UTF-8"),
        (K.PROVIDE_CONTEXT, {"value": math.nan}, "not a finite number"),
        (K.PROVIDE_CONTEXT, {"value": -math.inf}, "not a finite number"),
        (K.PROVIDE_CONTEXT, {"value": 10**5000}, "longer than 4000 digits"),
        (K.PROVIDE_CONTEXT, {"value": {1: 2}}, "key 1 is not a string"),
        (K.PROVIDE_CONTEXT, {"value": b"\xff"}, "a bytes is not JSON"),
        (K.PROVIDE_CONTEXT, {"text": "x", "source": "\ud800"}, "not valid UTF-8"),
        (K.APPROVE, {"interrupt_id": "\ud800"}, "not valid UTF-8"),
        (K.APPROVE, {"value": math.nan}, "not a finite number"),
        (K.PAUSE, {"reason": 5}, "valid string"),
        (K.CANCEL, {"abort": 1}, "valid boolean"),
        (K.REDIRECT, {"goto": "a\ud800"}, "not valid UTF-8"),
        (K.REDIRECT, {"instruction": "\u200b"}, "must not be blank"),
        (K.REQUEST_STATUS, {"x": 1}, "Extra inputs"),
        (K.UPDATE_BUDGET, {"max_cost": math.nan}, "not a finite number"),
        (K.UPDATE_BUDGET, {"deadline_s": math.inf}, "not a finite number"),
        (K.UPDATE_BUDGET, {"max_cost": 10**400}, "valid number"),
        (K.UPDATE_STATE, {"update": {"\ud800": 1}}, "not valid UTF-8"),
        (K.UPDATE_STATE, {"update": {1: 1}}, "key 1 is not a string"),
        (K.UPDATE_STATE, {"update": {"a": math.nan}}, "not a finite number"),
        (K.ASK_CLARIFYING_QUESTION, {"question": "\ud800?"}, "not valid UTF-8"),
    ],
)
def test_a_payload_past_its_kinds_edge_is_an_invalid_command_naming_the_field(
    kind: SteeringKind, payload: dict[str, Any], says: str
) -> None:
    with pytest.raises(InvalidCommandError, match=f"invalid payload for {kind.value}") as caught:
        _command(SteeringTarget.agent_run("r-1"), kind, payload)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"deadline_s": 1e308}, "completed"),
        ({"max_model_calls": 10**100}, "completed"),
        ({"max_tokens": 2**64}, "completed"),
        ({"max_cost": 1e308}, "completed"),
        ({"deadline_s": 5e-324}, "limit_exceeded"),
        ({"max_tool_calls": 0}, "limit_exceeded"),
    ],
)
async def test_a_budget_at_the_edge_of_what_a_number_holds_is_applied(
    payload: dict[str, Any], status: str
) -> None:
    """Held: budgets past any run's need (1e308 seconds, 10**100 calls) are applied and the
    run finishes; the least float of a deadline or no tool call left ends it on its limit."""
    receipt, result, recorder, cmd = await _steered_agent(K.UPDATE_BUDGET, payload)
    assert receipt.status == "accepted"
    assert result.status == status
    assert _one_terminal(recorder, cmd.correlation_id) == "applied"


@pytest.mark.parametrize(
    ("kind", "payload", "status"),
    [
        (K.CONSTRAIN_TOOLS, {"tools": ["a\x00b"]}, "rejected"),  # would widen: refused
        (K.CONSTRAIN_MODEL, {"models": ["\u200b"]}, "rejected"),
        (K.CONSTRAIN_TOOLS, {"tools": ["search"] * 3}, "accepted"),
        (K.PROVIDE_CONTEXT, {"value": 10**3000}, "accepted"),
        (K.PROVIDE_CONTEXT, {"text": "x", "interrupt_id": ""}, "accepted"),
        (K.CANCEL, {"reason": "x" * 20_000}, "rejected"),  # payload too large
        (K.ADD_INSTRUCTION, {"text": "a\x00b"}, "accepted"),
        (K.REPLACE_INSTRUCTION, {"text": "\u202eevil"}, "accepted"),
    ],
)
async def test_odd_but_valid_payloads_to_a_live_agent_run_settle_once(
    kind: SteeringKind, payload: dict[str, Any], status: str
) -> None:
    receipt, result, recorder, cmd = await _steered_agent(kind, payload)
    assert receipt.status == status
    assert result.status == "completed"
    assert _one_terminal(recorder, cmd.correlation_id) == (
        "rejected" if status == "rejected" else "applied"
    )


@pytest.mark.parametrize(
    ("kind", "payload", "settles"),
    [
        (K.APPROVE, {"interrupt_id": " "}, "failed"),  # no pending interrupt when it lands
        (K.PROVIDE_CONTEXT, {"value": 1, "interrupt_id": ""}, "failed"),
        (K.UPDATE_STATE, {"update": {"": 1}}, "rejected"),  # no such state key
        (K.UPDATE_STATE, {"update": {"n": 5}, "as_node": ""}, "rejected"),
        (K.REDIRECT, {"goto": "__start__"}, "rejected"),
        (K.REDIRECT, {"goto": "__end__"}, "applied"),
    ],
)
async def test_odd_payloads_to_a_live_graph_run_settle_once(
    kind: SteeringKind, payload: dict[str, Any], settles: str
) -> None:
    _, result, recorder, cmd = await _steered_graph(SteeringTarget.agent_run, kind, payload)
    assert result.status == "completed"
    assert _one_terminal(recorder, cmd.correlation_id) == settles


# -- commands racing each other (held) ---------------------------------------------------------


async def test_one_correlation_id_submitted_six_times_at_once_is_accepted_once() -> None:
    """Held: five copies and a cancel reusing the id, all in one gather: one accepted, five
    ``duplicate``; the run is not cancelled, and the command settles once."""
    release = asyncio.Event()

    async def think(request: Any) -> Any:
        await release.wait()
        return reply("done")

    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder]) as rt:
        handle = await rt.start(Agent("a", FunctionModel(think)), "go")
        target = SteeringTarget.agent_run(handle.run_id)
        same = _command(target, K.ADD_INSTRUCTION, {"text": "x"}, correlation_id="c-dup")
        cancel = _command(target, K.CANCEL, {}, correlation_id="c-dup")
        receipts = await asyncio.gather(*[rt.submit(same) for _ in range(5)], rt.submit(cancel))
        release.set()
        result = await handle.result()
    assert [r.status for r in receipts] == ["accepted"] + ["duplicate"] * 5
    assert result.status == "completed"
    assert recorder.lifecycle("c-dup") == ["requested", "accepted", "delivered", "applied"]


async def test_a_pause_resume_storm_with_a_cancel_in_it_settles_every_command_once() -> None:
    release = asyncio.Event()

    async def think(request: Any) -> Any:
        await release.wait()
        return reply("done")

    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder]) as rt:
        handle = await rt.start(Agent("b", FunctionModel(think)), "go")
        sends = [handle.pause() if i % 2 == 0 else handle.resume() for i in range(50)]
        sends.append(handle.cancel())
        sends += [handle.steer(f"s{i}") for i in range(20)]
        receipts = await asyncio.gather(*sends)
        release.set()
        result = await asyncio.wait_for(handle.result(), 10)
    assert result.status == "cancelled"
    for receipt in receipts:
        _one_terminal(recorder, receipt.correlation_id)


class Summed(TypedDict, total=False):
    n: Annotated[int, operator.add]


async def test_two_runtimes_on_one_file_given_one_thread_command_apply_it_once(
    tmp_path: Path,
) -> None:
    """Held: the same deferred thread command submitted to two runtimes sharing a SQLite
    file at once: one defers it, the other answers ``duplicate``; the graph run that takes
    the thread applies it once."""
    db = tmp_path / "runs.db"
    recorder = EventRecorder()
    async with (
        Runtime(f"sqlite:///{db}", testing=True, sinks=[recorder]) as first,
        Runtime(f"sqlite:///{db}", testing=True) as second,
    ):
        cmd = _command(
            SteeringTarget.thread("t"), K.UPDATE_STATE, {"update": {"n": 1}}, correlation_id="c-2"
        )
        receipts = await asyncio.gather(first.submit(cmd), second.submit(cmd))
        assert sorted(r.status for r in receipts) == ["deferred", "duplicate"]
        cp = SqliteCheckpointer(str(tmp_path / "cp.db"))
        graph = (
            StateGraph(Summed)
            .add_node("x", lambda s: {"n": 100})
            .add_edge(START, "x")
            .add_edge("x", END)
            .compile(checkpointer=cp)
        )
        try:
            holder = first if receipts[0].status == "deferred" else second
            handle = await holder.start_graph(graph, {"n": 0}, thread_id="t")
            result = await asyncio.wait_for(handle.result(), 10)
        finally:
            await cp.aclose()
    assert (result.status, result.output) == ("completed", {"n": 101})


# -- damaged SQLite files (held) ---------------------------------------------------------------


async def _good_store(path: Path) -> str:
    async with Runtime(f"sqlite:///{path}") as rt:
        for _ in range(30):
            handle = await rt.start(Agent("a", ScriptedModel(["ok " * 200])), "go")
            await handle.result()
    return handle.run_id


def _damaged(good: Path, how: str) -> Path:
    data = good.read_bytes()
    bad = good.with_name(f"{how}.db")
    if how == "half":
        bad.write_bytes(data[: len(data) // 2])
    elif how == "header":
        bad.write_bytes(data[:100])
    elif how == "directory":
        bad.mkdir()
    else:  # every page but the first (the header and the schema) overwritten
        bad.write_bytes(data[:4096] + b"\xde\xad" * ((len(data) - 4096) // 2))
    return bad


@pytest.mark.parametrize("how", ["half", "header", "directory"])
async def test_a_damaged_store_file_is_a_store_error_when_a_runtime_opens_it(
    tmp_path: Path, how: str
) -> None:
    await _good_store(tmp_path / "good.db")
    bad = _damaged(tmp_path / "good.db", how)
    with pytest.raises(StoreError, match="cannot open SQLite store"):
        async with Runtime(f"sqlite:///{bad}"):
            pass


async def test_a_store_damaged_past_its_first_page_is_a_store_error_and_one_cli_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await _good_store(tmp_path / "good.db")
    bad = _damaged(tmp_path / "good.db", "middle")
    with pytest.raises(StoreError, match="malformed"):
        async with Runtime(f"sqlite:///{bad}") as rt:
            handle = await rt.start(Agent("a", ScriptedModel(["ok"])), "go")
            await handle.result()
    for args in (["inspect", str(bad)], ["runs", "list", "--store", str(bad)]):
        assert await asyncio.to_thread(cli_main, args) != 0
        err = capsys.readouterr()
        assert "malformed" in err.out + err.err
        assert "Traceback" not in err.out + err.err


# -- a models registry naming what no judge model can name -------------------------------------


@pytest.mark.parametrize("name", ["", " ", "\u200b"])
def test_an_inline_model_name_that_shows_nothing_is_refused(name: str) -> None:
    """Found: ``models: {"": openai/x}`` was taken (``validate`` said ok), though a judge
    ``model`` that shows nothing is refused: an entry no spec can name, kept without a
    word. Refused, as a blank model string is, by the key's own check (after review: first a
    check of the whole mapping, which said "'model' names it" and dumped the mapping, placed
    at the ``models:`` line rather than the key's)."""
    with pytest.raises(SupervisorSpecError, match=r"models: the key .*: must not be blank"):
        SupervisorSpec.model_validate({"model": "openai/x", "models": {name: "openai/y"}})


def test_an_inline_model_entry_holding_a_lone_surrogate_is_told_it_is_no_utf8() -> None:
    """Found by review: ``models: {judge: "\\ud800"}`` was told the entry "must not be blank"
    (a lone surrogate shows nothing either, and that check ran first), as an agent's name
    was before it: it is told the text is no UTF-8."""
    with pytest.raises(SupervisorSpecError, match=r"model 'judge': text is not valid UTF-8"):
        SupervisorSpec.model_validate({"model": "openai/x", "models": {"judge": "\ud800"}})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('"": openai/x\n', "must not be blank"),
        ('judge: ""\n', "must not be blank"),
        ("judge: ' '\n", "must not be blank"),
    ],
)
def test_a_models_file_entry_or_name_that_shows_nothing_is_an_error_naming_the_file(
    tmp_path: Path, text: str, says: str
) -> None:
    """Found: a models file's blank entry (``judge: ""``) was read, and refused only when
    the judge's model was asked for, as ``invalid model entry: model: must not be blank``,
    naming neither the file nor the entry; a blank name was taken (``validate`` said ok,
    warning only that the judge's name was not in the registry). Each is an error naming
    the file and its line, as an entry's unknown key is."""
    (tmp_path / "models.yaml").write_text(text)
    (tmp_path / "spec.yaml").write_text("model: judge\nmodels_file: models.yaml\n")
    [finding] = validate_file(tmp_path / "spec.yaml")
    assert finding.severity == "error"
    assert says in finding.message
    assert "models.yaml" in finding.message and "line 1" in finding.message
    with pytest.raises(SupervisorSpecError, match=r"models\.yaml"):
        SupervisorSpec.from_yaml(tmp_path / "spec.yaml").judge_target()


def test_a_models_file_of_plain_names_and_entries_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "models.yaml").write_text(
        "judge: openai/gpt-4o-mini\nsmall: {model: openai/small}\n"
    )
    (tmp_path / "spec.yaml").write_text("model: judge\nmodels_file: models.yaml\n")
    assert validate_file(tmp_path / "spec.yaml") == []
    spec = SupervisorSpec.from_yaml(tmp_path / "spec.yaml")
    assert spec.judge_target() == ModelEntry(model="openai/gpt-4o-mini")


# -- output into a pipe closed early -----------------------------------------------------------


@pytest.mark.parametrize("command", ["validate", "inspect", "runs list"])
def test_a_command_whose_reader_closed_its_pipe_ends_quietly(tmp_path: Path, command: str) -> None:
    """Found: ``tinyagents validate spec.yaml | head -1`` printed a ``BrokenPipeError``
    traceback (its second line went to a pipe ``head`` had closed); so did ``inspect`` or
    ``inspect --json`` with more output than the pipe holds (``runs list`` prints through
    rich, which ends quietly with 1). Each ends quietly, with 1."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("supervisor:\n  rules:\n" + "    - when: iteration_reached\n" * 1)
    db = tmp_path / "runs.db"
    if command != "validate":
        asyncio.run(_good_store(db))
    args = {
        "validate": ["validate", str(spec)],
        "inspect": ["inspect", str(db), "--json"],
        "runs list": ["runs", "list", "--store", str(db), "--json"],
    }[command]
    child = subprocess.Popen(
        [sys.executable, "-m", "tinyagents", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader is gone before a byte is written
    err = child.stderr.read()
    code = child.wait(60)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()
    assert code == 1
