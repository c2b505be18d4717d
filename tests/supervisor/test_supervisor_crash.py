"""The supervisor's pause survives a real crash: a worker process (``supervisor_crash_worker.py``)
is SIGKILLed on a SQLite store right after its supervisor's pause was logged (or applied),
and the run, started again under its id, is still timed out by the dwell cap, and the rule
that paused it does not act on it again."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tinyagents import Agent, RunStatus, Runtime, SupervisorSpec, tool
from tinyagents.testkit import EventRecorder, EventWaiter, ScriptedModel, reply, tool_call

WORKER = Path(__file__).with_name("supervisor_crash_worker.py")


@tool
def search(query: str = "") -> str:
    """Search for something."""
    return "nothing found"


async def crash_worker(db: Path, run_id: str, mode: str) -> None:
    """Run the worker until it says ``stop``, then SIGKILL it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        str(db),
        run_id,
        mode,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(WORKER.parent)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        lines = []
        async with asyncio.timeout(60):  # a failsafe only
            async for raw in proc.stdout:
                lines.append(raw.decode().rstrip("\n"))
                if lines[-1] == "stop":
                    break
    finally:
        proc.kill()  # SIGKILL: its event loop is blocked at the chosen point
        errors = (await proc.stderr.read()).decode()
        await proc.wait()
    assert lines == ["ready", "stop"], errors


@pytest.mark.parametrize("mode", ["accepted", "applied"])
async def test_a_pause_logged_before_a_crash_is_still_timed_out_after_the_restart(
    tmp_path: Path, mode: str
) -> None:
    # the supervisor logged its pause and the process was killed before the pause's dwell
    # cap (before its "applied" reached the log): started again, the run took the pause from
    # the log as someone else's, and it held the run for good, never timed out
    db = tmp_path / "runs.db"
    await crash_worker(db, "r-crash", mode)

    # a rule that never fires here: only the pause from before the crash can be timed out
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 5}], pause_max_s=0.05)
    recorder = EventRecorder()
    model = ScriptedModel([reply("never")])
    async with Runtime(f"sqlite:///{db}", supervisor=spec, sinks=[recorder]) as rt:
        handle = await rt.start(Agent("a", model), "go", run_id="r-crash")
        result = await asyncio.wait_for(handle.result(), 60)  # a failsafe only
    assert result.status is RunStatus.ABORTED
    assert result.error == "paused longer than the supervisor's dwell cap of 0.05 s"
    assert model.requests == []
    assert len(recorder.of_type("supervisor.escalated")) == 1


@pytest.mark.parametrize("mode", ["accepted", "applied"])
async def test_a_rule_whose_pause_was_logged_before_a_crash_does_not_fire_again(
    tmp_path: Path, mode: str
) -> None:
    # the worker's rule paused the run on its first response; started again, the run got
    # the pause back from the log, and the same rule, counting from zero, acted a second
    # time on the restarted run's first response
    db = tmp_path / "runs.db"
    await crash_worker(db, "r-crash", mode)

    # the worker's rule, acting by a steer: a second action would show without a resume
    spec = SupervisorSpec(
        rules=[{"when": "iteration_reached", "gte": 1}], on_violation="steer", pause_max_s=3600
    )
    recorder, waiter = EventRecorder(), EventWaiter()
    model = ScriptedModel([tool_call("search"), reply("done")])
    async with Runtime(f"sqlite:///{db}", supervisor=spec, sinks=[recorder, waiter]) as rt:
        handle = await rt.start(Agent("a", model, tools=[search]), "go", run_id="r-crash")
        await waiter.event("run.paused", "r-crash")  # the logged pause, applied now
        await handle.resume()
        result = await asyncio.wait_for(handle.result(), 60)  # a failsafe only
    assert result.status is RunStatus.COMPLETED
    assert not recorder.of_type("supervisor.action")
