"""A full disk, for real: a child process writes its SQLite store under ``RLIMIT_FSIZE`` (with
``SIGXFSZ`` ignored, so a write past the limit fails with ``EFBIG`` and SQLite reports a disk
I/O error), and the parent, without a limit, opens the same store afterwards.

- Commands fill the disk: the submit that cannot be logged raises ``StoreError`` (typed, not
  ``sqlite3`` or ``OSError``), the command is not tracked and its id stays free, the process
  neither hangs nor crashes, ``close()`` returns (or raises ``StoreError``) in bounded time;
  the parent then restores every command the child had accepted and takes the failed id.
- Events fill the disk while the store writer flushes them: the run completes all the same,
  and once the limit is lifted the store opens again (and, lifted in the same process, the
  writer catches up without losing an event).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tinyagents.protocol import (
    Boundary,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunHandle, RunInfo, RunResult, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.store import SqliteStore

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE / SIGXFSZ as on Linux"
)

TESTER = SteeringActor.test()
STEERING_TESTS = Path(__file__).parents[1] / "steering"  # steerkit, for the child
#: A child that does not finish in this time hangs (it needs about a second).
CHILD_TIMEOUT_S = 60

#: The child's preamble: a file size limit that makes writes fail instead of killing it.
PREAMBLE = """
import asyncio, json, os, resource, signal, sys, time
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from tinyagents.errors import StoreError, TinyAgentsError

def report(**kw):
    print(json.dumps(kw), flush=True)

def limit_files(db, headroom):
    '''From now on no file may grow past the largest of the store's files + ``headroom``.'''
    sizes = [os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p)]
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max(sizes) + headroom, hard))

def lift_limit():
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))

def type_name(exc):
    return type(exc).__module__ + "." + type(exc).__qualname__

async def close(rt):
    '''Close; a StoreError is allowed (the disk is full), anything else is not, a hang (60 s:
    TimeoutError) included.'''
    try:
        await asyncio.wait_for(rt.close(), 60)
        error = None
    except StoreError as exc:
        error = type_name(exc)
    return {"close_error": error}
"""

#: Submits 8 KB instructions to a hand-driven run until the store cannot log one.
COMMANDS_CHILD = (
    PREAMBLE
    + """
from steerkit import start_run
from tinyagents.runtime import Runtime
from tinyagents.protocol.commands import SteeringActor, SteeringCommand, SteeringTarget

def command(cid):
    return SteeringCommand(
        target=SteeringTarget.agent_run("r-1"),
        actor=SteeringActor.test(),
        kind="add_instruction",
        payload={"text": cid + " " + "x" * 8000},
        correlation_id=cid,
    )

async def main(db, headroom, lift):
    rt = Runtime(store="sqlite:///" + db, testing=True)
    await rt.open()
    await start_run(rt, "r-1")
    limit_files(db, headroom)
    failed = error = None
    for i in range(2000):
        cid = "c-%d" % i
        try:
            receipt = await rt.submit(command(cid))
        except Exception as exc:
            failed, error = cid, {"type": type_name(exc), "message": str(exc)}
            break
        assert receipt.status == "accepted", receipt
        report(accepted=cid)
    out = {"failed": failed, "error": error}
    out["open"] = {c.correlation_id: rt.router.state(c.correlation_id, scope="")
                   for c in rt.router.open_commands()}
    out["failed_state"] = rt.router.state(failed, scope="") if failed else None
    out["failed_events"] = [e.type for e in rt.steering_history("r-1")
                            if e.correlation_id == failed]
    try:  # the disk is still full: the same, typed, and still nothing kept
        await rt.submit(command(failed))
        out["retry_full"] = "accepted"
    except Exception as exc:
        out["retry_full"] = type_name(exc)
    if lift:  # the disk has room again: the same id is taken now, in the same process
        lift_limit()
        out["retry_lifted"] = (await rt.submit(command(failed))).status.value
    out.update(await close(rt))
    report(result=out)

asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "lift"))
"""
)

#: An agent run whose events fill the disk while the store writer flushes them. Half-way, a
#: tool waits until a flush has failed, so the second half of the run works on a full disk.
#: (Events carry summaries of tool results, so it is the number of events that fills it.)
EVENTS_CHILD = (
    PREAMBLE
    + """
from tinyagents import Agent, tool
from tinyagents.runtime import Runtime
from tinyagents.testkit import EventRecorder, FunctionModel, reply, tool_call

CALLS = 40
rt = None

@tool
async def fetch(n: int) -> str:
    '''Fetch a page.'''
    if n == CALLS // 2:
        started = time.monotonic()
        while rt._writer.errors == 0 and time.monotonic() - started < 60:
            await asyncio.sleep(0.01)
    return ("page %d " % n) + "y" * 5_000

def decide(request):
    done = sum(1 for m in request.messages if m.role == "tool")
    return tool_call("fetch", n=done) if done < CALLS else reply("all fetched")

async def main(db, headroom, lift):
    global rt
    recorder = EventRecorder()
    rt = Runtime(store="sqlite:///" + db, testing=True, sinks=[recorder])
    await rt.open()
    limit_files(db, headroom)
    agent = Agent("reader", FunctionModel(decide), tools=[fetch])
    handle = await rt.start(agent, "read everything", run_id="r-big")
    receipt = await handle.steer("only the first pages matter")  # logged before the limit bites
    result = await asyncio.wait_for(handle.result(), 60)
    out = {"status": result.status.value, "error": result.error,
           "steer": receipt.status.value, "writer_errors": rt._writer.errors,
           "events": len([e for e in recorder.events if e.run_id == "r-big"])}
    if lift:
        lift_limit()
    out.update(await close(rt))
    report(result=out)

asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "lift"))
"""
)


async def run_child(script: str, *args: str) -> tuple[list[str], dict[str, Any]]:
    """Run a child to its end (it must end by itself); its accepted ids and its result."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(STEERING_TESTS)},
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CHILD_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"the child hung for {CHILD_TIMEOUT_S} s") from None
    assert proc.returncode == 0, err.decode()
    reports = [json.loads(line) for line in out.decode().splitlines()]
    accepted = [r["accepted"] for r in reports if "accepted" in r]
    (result,) = [r["result"] for r in reports if "result" in r]
    return accepted, result


def command(cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run("r-1"),
        actor=TESTER,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": f"{cid} again"},
        correlation_id=cid,
    )


def check_child_failure(accepted: list[str], result: dict[str, Any]) -> str:
    """The child's view of the failed submit; returns the failed correlation id."""
    failed = result["failed"]
    assert failed is not None, "the disk never filled"
    assert accepted, "the disk filled before the first command"
    assert result["error"]["type"] == "tinyagents.errors.StoreError", result["error"]
    assert "disk" in result["error"]["message"], result["error"]  # I/O error or full
    # Only accepted commands are tracked, and the failed one is not among them, nor was
    # anything emitted for it.
    assert result["open"] == dict.fromkeys(accepted, "accepted")
    assert result["failed_state"] is None
    assert result["failed_events"] == []
    assert result["retry_full"] == "tinyagents.errors.StoreError"
    assert result["close_error"] in (None, "tinyagents.errors.StoreError")
    return str(failed)


async def test_a_full_disk_refuses_the_command_typed_and_loses_no_accepted_one(
    tmp_path: Path,
) -> None:
    db = tmp_path / "full.db"
    accepted, result = await run_child(COMMANDS_CHILD, str(db), str(200_000), "keep")
    failed = check_child_failure(accepted, result)

    # No limit now: the store opens, every accepted command is there and restored, and the
    # failed id is free.
    async with Runtime(store=f"sqlite:///{db}", testing=True) as rt:
        restored = {c.correlation_id for c in rt.router.open_commands()}
        assert restored == set(accepted)
        for cid in accepted:
            stored = await rt.store.get_command(cid, scope="")
            assert stored is not None and (stored.state, stored.run_id) == ("accepted", "r-1")
        assert await rt.store.get_command(failed, scope="") is None
        handle = await rt.register(RunHandle(RunInfo(run_id="r-1"), submitter=rt))
        assert {c.correlation_id for c in handle.inbox.queue.pending()} == set(accepted)
        retry = await rt.submit(command(failed))
        assert retry.status is ReceiptStatus.ACCEPTED
        taken = handle.inbox.take(Boundary.BEFORE_MODEL_CALL)
        for cmd in taken:
            handle.inbox.applied(cmd)
        assert {c.correlation_id for c in taken} == {*accepted, failed}
        await rt.finish(handle, RunResult(run_id="r-1", status=RunStatus.COMPLETED))
    reader = SqliteStore(db)
    await reader.open()
    try:
        assert await reader.open_commands() == []
        for cid in [*accepted, failed]:
            stored = await reader.get_command(cid, scope="")
            assert stored is not None and stored.state == "applied", cid
    finally:
        await reader.close()


async def test_a_disk_that_has_room_again_takes_the_failed_id_in_the_same_process(
    tmp_path: Path,
) -> None:
    db = tmp_path / "full.db"
    accepted, result = await run_child(COMMANDS_CHILD, str(db), str(200_000), "lift")
    failed = check_child_failure(accepted, result)
    assert result["retry_lifted"] == "accepted"
    assert result["close_error"] is None  # the writer caught up: nothing left failing

    async with Runtime(store=f"sqlite:///{db}", testing=True) as rt:
        assert {c.correlation_id for c in rt.router.open_commands()} == {*accepted, failed}
        events = await rt.store.load_events(type_prefix="steering.accepted")
        assert [e.correlation_id for e in events] == [*accepted, failed]  # type: ignore[attr-defined]


@pytest.mark.parametrize("lift", ["keep", "lift"])
async def test_events_filling_the_disk_never_fail_the_run(tmp_path: Path, lift: str) -> None:
    db = tmp_path / "events.db"
    # room for the run's claim (its snapshot, saved as it starts) and the steer, not for
    # the events
    _, result = await run_child(EVENTS_CHILD, str(db), str(64_000), lift)
    assert result["status"] == "completed", result
    assert result["steer"] == "accepted"
    assert result["writer_errors"] > 0, "the disk never filled"
    if lift == "lift":
        assert result["close_error"] is None
    else:
        assert result["close_error"] in (None, "tinyagents.errors.StoreError")

    async with Runtime(store=f"sqlite:///{db}", testing=True) as rt:  # it opens again
        await rt.store.open_commands()
        events = await rt.store.load_events(run_id="r-big")
        if lift == "lift":  # the writer kept them and wrote them once there was room
            assert len(events) == result["events"]
            assert events[-1].type == "run.completed"
        stored = await rt.store.load_runs()
        assert isinstance(stored, list)
