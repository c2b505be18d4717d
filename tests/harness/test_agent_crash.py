"""Crash safety of the agent loop with a SQLite store: SIGKILL a steered agent run at chosen
and at random points, start it again under the same run id on the same store until it
completes, and check every command afterwards.

The worker (``agent_sigkill_worker.py``) runs a deterministic agent (``step`` eight times,
then an answer) and submits ``add_instruction`` (a unique text each) and ``constrain_tools``
(one ``x*`` tool less each) while it runs. The parent kills it:

- at a chosen point, where the worker stops its event loop and asks to be killed: right
  after a command is accepted (logged, not yet applied), right after one is applied (before
  the store writer's 50 ms flush), and right after the writer stored a batch of events but
  before it stored the command states they imply;
- after a random delay (anywhere: opening the store, restoring, inside a flush).

Afterwards, each run id runs once more without steering or kills, and then: no command is
open in the steering log, every command the worker saw accepted is ``applied`` or
``failed``, and the last model request of that final run carries each applied instruction
exactly once (and no other), and offers exactly the tools the applied ``constrain_tools``
left.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agent_sigkill_worker import EXTRA_TOOLS, note

from tinyagents.events import SteeringEvent
from tinyagents.protocol import SteeringActor as Actor
from tinyagents.protocol import SteeringKind
from tinyagents.protocol.commands import dedupe_scope
from tinyagents.store import SqliteStore

WORKER = Path(__file__).with_name("agent_sigkill_worker.py")
SCOPE = dedupe_scope(Actor.test())  # "": the worker's test actor
TERMINAL = {"applied", "failed", "rejected", "superseded"}
KILLS = 12


@dataclass
class Outcome:
    killed: bool
    lines: list[str]
    summary: dict[str, Any] | None = None
    accepted: list[str] = field(default_factory=list)
    #: The command whose event the worker stopped at (``accepted``/``applied`` modes).
    stopped_at: str | None = None


async def run_worker(
    db: Path,
    run_id: str,
    incarnation: int,
    seed: int,
    mode: str,
    nth: int = 0,
    kill_after: float | None = None,
) -> Outcome:
    """Run one incarnation; SIGKILL it when it says ``stop`` or ``kill_after`` s after
    ``ready``. Returns what it reported."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        str(db),
        run_id,
        str(incarnation),
        str(seed),
        mode,
        str(nth),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(WORKER.parent)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    killed = False

    async def read() -> None:
        nonlocal killed
        assert proc.stdout is not None
        async for raw in proc.stdout:
            if not raw.endswith(b"\n"):  # cut short by the kill: reports nothing
                continue
            line = raw.decode()[:-1]
            lines.append(line)
            if line == "stop" and not killed:
                proc.kill()  # SIGKILL: the worker's event loop is blocked right now
                killed = True

    assert await proc.stdout.readline() == b"ready\n"  # imports done: the clock starts
    try:
        async with asyncio.timeout(kill_after):
            await asyncio.wait_for(read(), 60)
    except TimeoutError:
        if kill_after is None:
            proc.kill()
            raise
        proc.kill()
        killed = True
        await read()  # what it printed before it died
    errors = (await proc.stderr.read()).decode()
    code = await proc.wait()
    assert killed or code == 0, f"worker {run_id}/{incarnation} exited {code}:\n{errors}"
    done = [line for line in lines if line.startswith("done ")]
    # Killed after its last line (while the interpreter exits): it finished.
    outcome = Outcome(killed and not done, lines)
    outcome.accepted = [line.split()[1] for line in lines if line.startswith("accepted ")]
    if "stop" in lines and mode in ("accepted", "applied"):
        state, outcome.stopped_at = lines[lines.index("stop") - 1].split()
        assert state == mode
    if done:
        outcome.summary = json.loads(done[-1].removeprefix("done "))
    return outcome


async def check_store(
    db: Path, seed: int, finals: dict[str, dict[str, Any]], accepted: set[str]
) -> dict[str, int]:
    """The checks after the last incarnation of every run id; returns the states counted."""
    where = f"seed={seed}"
    store = SqliteStore(db)
    await store.open()
    try:
        left_open = await store.open_commands()
        assert [c.command.correlation_id for c in left_open] == [], f"{where}: left open"
        states: dict[str, str] = {}
        kinds: dict[str, SteeringKind] = {}
        for cid in await store.command_ids():
            stored = await store.get_command(cid, scope=SCOPE)
            assert stored is not None, f"{where}: {cid} not in scope {SCOPE!r}"
            assert stored.state in TERMINAL, f"{where}: {cid} is {stored.state}"
            states[cid], kinds[cid] = stored.state, stored.command.kind
        for cid in accepted:
            assert cid in states, f"{where}: accepted {cid} is not in the steering log"
            assert states[cid] in ("applied", "failed"), f"{where}: {cid} is {states[cid]}"

        # The event log: a command's last terminal event is the state the steering log holds
        # (a rejection is logged before its event, so a kill can leave it without one).
        last: dict[str, str] = {}
        for e in await store.load_events(type_prefix="steering."):
            if isinstance(e, SteeringEvent) and e.type.removeprefix("steering.") in TERMINAL:
                last[e.correlation_id] = e.type.removeprefix("steering.")
        for cid, state in states.items():
            if state != "rejected" or cid in last:
                assert last.get(cid) == state, (
                    f"{where}: {cid} is {state}, last event {last.get(cid)}"
                )

        for run_id, summary in finals.items():
            applied = await store.run_commands(run_id)
            notes = [
                c.command.correlation_id
                for c in applied
                if c.command.kind is SteeringKind.ADD_INSTRUCTION
            ]
            assert Counter(summary["steering"]) == Counter(notes), (
                f"{where} {run_id}: steering messages {Counter(summary['steering'])} "
                f"!= applied instructions {notes}"
            )
            text = "\n".join(summary["contents"])
            for cid, state in states.items():
                expected = 1 if cid in notes else 0
                assert text.count(note(cid)) == expected, (
                    f"{where} {run_id}: {cid} ({state}) appears {text.count(note(cid))} times"
                )
            tools = {"step", *EXTRA_TOOLS}
            for c in applied:
                if c.command.kind is SteeringKind.CONSTRAIN_TOOLS:
                    tools &= set(c.command.payload["tools"])
            # The run ends allowing exactly what the applied narrowings leave; its last request
            # offered no fewer (a narrowing handed over from the log may land at the last
            # boundary, after that request).
            assert summary["allowed"] == sorted(tools), f"{where} {run_id}: tools"
            assert set(summary["tools"]) >= tools, f"{where} {run_id}: tools offered"
            assert summary["status"] == "completed", f"{where} {run_id}: {summary}"
        return dict(Counter(states.values()))
    finally:
        await store.close()


async def check_window(db: Path, seed: int, cid: str, mode: str) -> None:
    """Killed right after ``cid`` was accepted or applied: the log holds it, still open (the
    kill came before its apply, or before the store writer flushed its applied state)."""
    store = SqliteStore(db)
    await store.open()
    try:
        stored = await store.get_command(cid, scope=SCOPE)
        applied = [
            e
            for e in await store.load_events(type_prefix="steering.applied")
            if isinstance(e, SteeringEvent) and e.correlation_id == cid
        ]
    finally:
        await store.close()
    assert stored is not None and stored.state == "accepted", f"seed={seed} {cid}: {stored}"
    if mode == "accepted":
        assert applied == [], f"seed={seed} {cid}: applied before it was accepted"


async def crash_and_check(tmp_path: Path, seed: int, plan: Any) -> tuple[int, dict[str, int]]:
    """Kill incarnations as ``plan(rng)`` says (``(mode, nth, kill_after)``) until ``KILLS``
    kills, a new run id whenever one completes; then finish every run id quietly and check."""
    rng = random.Random(seed)
    db = tmp_path / "runs.db"
    run_ids, accepted = ["r-0"], set()
    kills = incarnation = 0
    while kills < KILLS:
        assert incarnation < 4 * KILLS, f"seed={seed}: the kills never land"
        mode, nth, kill_after = plan(rng)
        got = await run_worker(
            db, run_ids[-1], incarnation, rng.randrange(1 << 30), mode, nth, kill_after
        )
        accepted.update(got.accepted)
        if got.stopped_at is not None:
            await check_window(db, seed, got.stopped_at, mode)
        if got.killed:
            kills += 1
        else:
            assert got.summary is not None, f"seed={seed}: {got.lines[-3:]}"
            run_ids.append(f"r-{len(run_ids)}")
        incarnation += 1
    if not accepted:
        # A loaded machine can be slow enough for every random kill to land before the
        # worker's first command (seen once in CI): one incarnation left to finish makes sure
        # the checks below have commands to check, killed runs before it included.
        got = await run_worker(db, run_ids[-1], incarnation, rng.randrange(1 << 30), "random")
        assert got.summary is not None, f"seed={seed}: {got.lines[-3:]}"
        accepted.update(got.accepted)
        run_ids.append(f"r-{len(run_ids)}")
        incarnation += 1
    finals: dict[str, dict[str, Any]] = {}
    for run_id in run_ids:  # each run id once more, quietly, to completion
        got = await run_worker(db, run_id, incarnation, 0, "quiet")
        incarnation += 1
        assert got.summary is not None and not got.accepted, f"seed={seed}"
        finals[run_id] = got.summary
    assert accepted, f"seed={seed}: no command was accepted"
    return kills, await check_store(db, seed, finals, accepted)


async def test_sigkill_between_accept_apply_and_flush_loses_no_command(tmp_path: Path) -> None:
    """Killed at exact points: each command is still applied once, or failed, never lost."""
    seed = int(os.environ.get("AGENT_CRASH_SEED", random.randrange(1 << 30)))
    modes = ["accepted", "applied", "settle"]
    turn = iter(range(1 << 30))

    def plan(rng: random.Random) -> tuple[str, int, None]:
        # every mode in turn, so each window gets KILLS / 3 kills
        mode = modes[next(turn) % len(modes)]
        # the writer settles every 50 ms: two or three times in a run
        return mode, rng.randint(1, 2 if mode == "settle" else 10), None

    kills, states = await crash_and_check(tmp_path, seed, plan)
    assert kills >= KILLS and states.get("applied", 0) > 0, f"seed={seed}: {states}"


async def test_sigkill_at_random_points_loses_no_command(tmp_path: Path) -> None:
    """Killed after a random delay: wherever it lands, the same guarantees hold."""
    seed = int(os.environ.get("AGENT_CRASH_SEED", random.randrange(1 << 30)))

    def plan(rng: random.Random) -> tuple[str, int, float]:
        return "random", 0, rng.uniform(0.0, 0.09)

    kills, states = await crash_and_check(tmp_path, seed, plan)
    assert kills >= KILLS and states.get("applied", 0) > 0, f"seed={seed}: {states}"


async def test_a_command_applied_just_before_a_crash_has_one_terminal_event(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    # Killed right after the store writer's first write of a terminal event: the events and
    # the command states they imply were one transaction (they were two, and a crash between
    # them left 'applied' in the event log and 'accepted' in the steering log).
    first = await run_worker(db, "r-0", 0, 1, "settle", 1)
    assert first.killed
    store = SqliteStore(db)
    await store.open()
    try:
        written = {
            e.correlation_id
            for e in await store.load_events(type_prefix="steering.applied")
            if isinstance(e, SteeringEvent)
        }
        states = {cid: await store.get_command(cid, scope=SCOPE) for cid in written}
    finally:
        await store.close()
    assert written, "the first settle had applied commands"
    # No window: what the event log says applied, the steering log says applied too.
    assert {cid: s.state for cid, s in states.items() if s is not None} == dict.fromkeys(
        written, "applied"
    )

    final = await run_worker(db, "r-0", 1, 0, "quiet")
    assert final.summary is not None
    # Effects hold once in the run that completed, and the audit trail has one terminal
    # event per command.
    assert Counter(final.summary["steering"]).most_common(1)[0][1] == 1
    assert await check_store(db, 0, {"r-0": final.summary}, set(first.accepted))
    store = SqliteStore(db)
    await store.open()
    try:
        terminal = Counter(
            e.correlation_id
            for e in await store.load_events(type_prefix="steering.")
            if isinstance(e, SteeringEvent) and e.type.removeprefix("steering.") in TERMINAL
        )
    finally:
        await store.close()
    assert {cid: n for cid, n in terminal.items() if n > 1} == {}


async def test_a_command_for_a_child_of_a_killed_run_fails_when_the_run_restarts(
    tmp_path: Path,
) -> None:
    """SIGKILL while a ``SubAgentTool`` child holds an accepted command; the parent restarts
    under its run id (its new child gets a new id). The old child never comes back: its
    command stayed open in the log for ever. It fails, and the parent's own is applied."""
    from tinyagents import Agent, Runtime, SubAgent, SubAgentTool
    from tinyagents.testkit import ScriptedModel, reply, tool_call

    db = tmp_path / "runs.db"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER.with_name("subagent_crash_worker.py")),
        str(db),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    if not line.startswith(b"ready "):
        proc.kill()
        pytest.fail(f"worker: {line!r} {(await proc.stderr.read()).decode()}")
    _, old_child, for_child, for_parent = line.decode().split()
    proc.kill()
    await proc.wait()

    child = SubAgent(Agent("child", ScriptedModel([reply("child done")])), description="works")
    parent = Agent(
        "parent",
        ScriptedModel([tool_call("child", input="go"), reply("parent done")]),
        tools=[SubAgentTool(child)],
    )
    async with Runtime(f"sqlite:///{db}") as rt:
        assert {c.correlation_id for c in rt.open_commands()} == {for_child, for_parent}
        handle = await rt.start(parent, "task", run_id="root-1")
        assert (await handle.result()).status.value == "completed"
        assert rt.open_commands() == []
        (new_child,) = rt.runs.tree.children("root-1")
        assert new_child.run_id != old_child
    store = SqliteStore(db)
    await store.open()
    try:
        assert await store.open_commands() == []
        (failed,) = await store.run_commands(old_child, states=("failed",))
        applied = await store.run_commands("root-1", states=("applied",))
    finally:
        await store.close()
    assert failed.command.correlation_id == for_child
    assert "earlier incarnation of run root-1" in (failed.reason or "")
    assert [c.command.correlation_id for c in applied] == [for_parent]


async def test_a_run_started_without_an_id_and_killed_at_once_gets_its_command_when_started_again(
    tmp_path: Path,
) -> None:
    """A run started without a run id (a fresh one) is killed right after it accepted a
    command, before the store's first snapshot tick. It claimed no row, so the restarted
    runtime failed the command once any run of it ended ("… it never comes back under its
    id"), though the run comes back under that id (``rt.start(..., run_id=)``, as any killed
    run is started again), and nothing could declare it dead. Every agent run now claims its
    row before it takes a command: the killed run is in the store, its command waits for it
    past another run's end, and the run started again under its id applies it."""
    from tinyagents import Agent, Runtime
    from tinyagents.testkit import ScriptedModel, reply

    db = tmp_path / "runs.db"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER.with_name("fresh_run_crash_worker.py")),
        str(db),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == -9, err.decode()  # killed itself at the accept
    _, run_id = out.decode().split()

    async with Runtime(f"sqlite:///{db}") as rt:
        stored = await rt.store.load_run(run_id)
        assert stored is not None and stored["status"] == "running"  # its claim
        other = await rt.start(Agent("other", ScriptedModel([reply("done")])), "x")
        assert (await other.result()).status.value == "completed"  # a run ended first
        assert [c.correlation_id for c in rt.open_commands()] == ["c-fresh"]
        model = ScriptedModel([reply("done")])
        again = await rt.start(Agent("clerk", model), "work", run_id=run_id)
        assert (await again.result()).status.value == "completed"
        assert "cite the contract" in str(model.requests[0].messages)
        await rt.flush()
        logged = await rt.store.run_commands(run_id, states=("applied", "failed"))
        assert [(c.command.correlation_id, c.state) for c in logged] == [("c-fresh", "applied")]
