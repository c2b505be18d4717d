"""Crash safety: SIGKILL a graph process at random points, run the thread again, and check
that no write was lost and no task ran again after its writes were saved."""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from graph_crash_worker import ROUNDS, build, expected_log

from tinyagents.store.checkpoint import SqliteCheckpointer

WORKER = Path(__file__).with_name("graph_crash_worker.py")
KILLS = 24


async def saved_tasks(db: Path, thread: str) -> set[str]:
    """Task ids whose writes are durable: in a checkpoint, or pending writes of the head."""
    async with SqliteCheckpointer(db) as cp:
        done = {task for record in await cp.list(thread) for task in record.tasks}
        head = await cp.latest(thread)
        if head is not None:
            writes = await cp.get_writes(thread, "", head.frontier_id)
            done |= {w.task_id for w in writes if w.kind == "result"}
        return done


async def run_worker(
    db: Path, thread: str, side_log: Path, run_no: int, kill_after: float | None
) -> bool:
    """Run the worker; SIGKILL it ``kill_after`` s after it is ready. True if it finished."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        str(db),
        thread,
        str(side_log),
        str(run_no),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(WORKER.parent)},
    )
    assert proc.stdout is not None
    assert await proc.stdout.readline() == b"ready\n"
    if kill_after is None:
        out = await proc.stdout.read()
        assert await proc.wait() == 0
        return out.strip() == b"completed"
    try:
        async with asyncio.timeout(kill_after):
            out = await proc.stdout.read()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return False
    await proc.wait()
    return out.strip() == b"completed"


@pytest.mark.slow
async def test_sigkill_at_random_points_loses_nothing_and_reruns_nothing(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    db, side_log = tmp_path / "crash.db", tmp_path / "side.log"
    saved_before: dict[int, set[str]] = {}
    run_thread: dict[int, str] = {}
    threads = ["t0"]
    kills = 0
    run_no = 0
    while kills < KILLS:
        thread = threads[-1]
        saved_before[run_no] = await saved_tasks(db, thread)
        run_thread[run_no] = thread
        finished = await run_worker(db, thread, side_log, run_no, rng.uniform(0.0, 0.06))
        if finished:
            threads.append(f"t{len(threads)}")
        else:
            kills += 1
        run_no += 1
    for thread in threads:  # finish every thread without interference
        saved_before[run_no] = await saved_tasks(db, thread)
        run_thread[run_no] = thread
        assert await run_worker(db, thread, side_log, run_no, None), f"seed={seed}"
        run_no += 1

    async with SqliteCheckpointer(db) as cp:
        graph = build(cp)
        for thread in threads:
            state = (await graph.get_state(thread)).values
            assert state["log"] == expected_log(), f"seed={seed} thread={thread}"
            assert state["round"] == ROUNDS

    runs_of_task: dict[str, list[int]] = defaultdict(list)
    for line in side_log.read_text().splitlines():
        run, task, _node = line.split()
        runs_of_task[task].append(int(run))
    for task, runs in runs_of_task.items():
        for run in runs:
            assert task not in saved_before[run], (
                f"seed={seed}: task {task} ran in run {run} after its writes were saved"
            )
    assert kills >= 20


STEER_WORKER = Path(__file__).with_name("graph_steer_worker.py")


@pytest.mark.slow
async def test_accepted_steering_survives_a_sigkill_and_is_applied_after_restart(
    tmp_path: Path,
) -> None:
    store, checkpoints = tmp_path / "store.db", tmp_path / "checkpoints.db"
    env = {**os.environ, "PYTHONPATH": str(WORKER.parent)}

    async def start(mode: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            str(STEER_WORKER),
            str(store),
            str(checkpoints),
            mode,
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )

    first = await start("first")
    assert first.stdout is not None
    status, correlation_id, run_id = (await first.stdout.readline()).decode().split()
    assert status == "accepted"
    first.kill()  # accepted and durable, never delivered: the run was inside a node
    await first.wait()

    second = await start("restart")
    out, _ = await second.communicate()
    assert second.returncode == 0
    outcome = json.loads(out.decode().strip().splitlines()[-1])
    assert outcome["run_id"] == run_id  # the thread's run continues under its id
    assert outcome["status"] == "completed"
    # applied at the first boundary after the restart, through the append reducer
    assert outcome["log"] == ["start", "steered", "slow", "done"]
    assert outcome["steering"][correlation_id] == "steering.applied"


STEER_CRASH_WORKER = Path(__file__).with_name("graph_steer_crash_worker.py")


async def run_steered_worker(
    store: Path,
    db: Path,
    thread: str,
    run_no: int,
    kill_after: float | None,
    *,
    after_receipt: bool = False,
) -> tuple[bool, list[str]]:
    """Run the steered worker (quiet when not killed); (finished, correlation ids accepted).
    SIGKILL it ``kill_after`` s after it is ready, or (``after_receipt``) after it printed
    its first ``accepted`` receipt: a kill point a loaded machine cannot push past the run's
    steering, as a timer from ``ready`` can (the run finishes or is killed before any receipt
    is back, and the kill tests no accepted command)."""
    quiet = [] if kill_after is not None else ["quiet"]
    args = [str(store), str(db), thread, str(run_no), *quiet]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(STEER_CRASH_WORKER),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(WORKER.parent)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert await proc.stdout.readline() == b"ready\n"
    lines: list[str] = []
    receipt = asyncio.Event()

    async def read_lines() -> None:  # to the end of its output, whether it was killed or not
        assert proc.stdout is not None
        async for line in proc.stdout:
            if line.endswith(b"\n"):  # a line cut short by the kill reports nothing
                lines.append(line.decode()[:-1])
                if lines[-1].startswith("accepted "):
                    receipt.set()

    async def kill_point() -> None:
        if after_receipt:
            await receipt.wait()
        await asyncio.sleep(kill_after or 0.0)

    reader = asyncio.create_task(read_lines())
    killed = False
    if kill_after is not None:
        timer = asyncio.create_task(kill_point())
        await asyncio.wait({reader, timer}, return_when=asyncio.FIRST_COMPLETED)
        timer.cancel()
        if not reader.done():
            proc.kill()
            killed = True
    await reader  # what it printed before it ended or died
    errors = await proc.stderr.read()
    assert await proc.wait() == 0 or killed, errors.decode()
    accepted = [line.split()[1] for line in lines if line.startswith("accepted ")]
    return lines[-1:] == ["completed"], accepted


@pytest.mark.slow
# an interpreter per run (24 killed, those that finished, one more per thread): 80 to 90 s
# at load 7 on 2 cores, past the default 120 s under heavier load
@pytest.mark.timeout(300)
async def test_sigkill_while_steering_loses_no_command_and_applies_none_twice(
    tmp_path: Path,
) -> None:
    """Every other run is killed at a random time after it is ready (anywhere: before the
    steering began too), the others at a random time after their first accepted receipt:
    each of those kills lands with accepted commands, however loaded the machine (a timer
    from ``ready`` alone left some loaded runs with none). Crash-looping goes on until
    ``KILLS`` kills, ``KILLS // 4`` of them after a receipt (at most ``8 * KILLS`` runs).
    Nothing is timed: the delays only pick the kill points."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    store, db = tmp_path / "store.db", tmp_path / "checkpoints.db"
    threads, accepted = ["t0"], []
    kills = run_no = after_receipt = 0
    while kills < KILLS or (after_receipt < KILLS // 4 and run_no < 8 * KILLS):
        by_receipt = run_no % 2 == 1
        finished, got = await run_steered_worker(
            store,
            db,
            threads[-1],
            run_no,
            rng.uniform(0.0, 0.02 if by_receipt else 0.08),
            after_receipt=by_receipt,
        )
        accepted += got
        if finished:
            threads.append(f"t{len(threads)}")
        else:
            kills += 1
            after_receipt += by_receipt
        run_no += 1
    for thread in threads:  # every thread once more, without steering or kills
        finished, _ = await run_steered_worker(store, db, thread, run_no, None)
        assert finished, f"seed={seed} thread={thread}"
        run_no += 1

    applied_in_log: list[str] = []
    async with SqliteCheckpointer(db) as cp:
        graph = build(cp)
        for thread in threads:
            log = (await graph.get_state(thread)).values["log"]
            assert [e for e in log if not e.startswith("steer:")] == expected_log(), (
                f"seed={seed} thread={thread}"
            )
            applied_in_log += [e.removeprefix("steer:") for e in log if e.startswith("steer:")]
    assert len(applied_in_log) == len(set(applied_in_log)), f"seed={seed}: applied twice"

    from tinyagents.store import open_store

    log_store = open_store(f"sqlite:///{store}")
    await log_store.open()
    try:
        assert await log_store.open_commands() == [], f"seed={seed}: commands left open"
        for cid in applied_in_log:  # in the state: the steering log says applied
            stored = await log_store.get_command(cid)
            assert stored is not None and stored.state == "applied", f"seed={seed} {cid}"
        for cid in accepted:  # accepted: applied (and in the state) or failed (and not)
            stored = await log_store.get_command(cid)
            assert stored is not None, f"seed={seed} {cid}"
            assert stored.state in ("applied", "failed"), f"seed={seed} {cid} {stored.state}"
            assert (stored.state == "applied") == (cid in applied_in_log), f"seed={seed} {cid}"
    finally:
        await log_store.close()
    assert kills >= 20 and after_receipt >= KILLS // 4, f"seed={seed}"
    assert len(accepted) >= after_receipt, f"seed={seed}"


CANCEL_CRASH_WORKER = Path(__file__).with_name("graph_cancel_crash_worker.py")


@pytest.mark.parametrize("by", ["task", "node"])
async def test_a_task_cancel_saved_just_before_a_sigkill_is_reported_applied(
    tmp_path: Path, by: str
) -> None:
    """The cancel skipped ``right`` (saved), then the process died before the store heard:
    after the restart ``right`` stays skipped, but the command was reported failed ("already
    finished; nothing to cancel") though it had done just what it asked."""
    store, db = tmp_path / "store.db", tmp_path / "checkpoints.db"
    first = await asyncio.create_subprocess_exec(
        sys.executable, str(CANCEL_CRASH_WORKER), str(store), str(db), "first", by,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, errors = await asyncio.wait_for(first.communicate(), 60)
    assert first.returncode == -9, errors.decode()  # SIGKILL, by its own hand
    second = await asyncio.create_subprocess_exec(
        sys.executable, str(CANCEL_CRASH_WORKER), str(store), str(db), "restart", by,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, errors = await asyncio.wait_for(second.communicate(), 60)
    assert second.returncode == 0, errors.decode()
    outcome = json.loads(out.decode().strip().splitlines()[-1])
    assert outcome["pending"] == ["left"] and outcome["log"] == ["left:True"]
    assert outcome["victim"] == ["applied", None]
    # another cancel of the skipped task after the restart is reported as one before it is
    # (test_graph_steering.py::test_a_second_cancel_of_a_skipped_task_fails): it was
    # reported applied, as if it had been the cancel that skipped it
    assert outcome["again"] == [
        "failed",
        f"{outcome['target']} already finished; nothing to cancel",
    ]


SCOPE_CRASH_WORKER = Path(__file__).with_name("graph_scope_crash_worker.py")


async def test_a_command_applied_before_a_sigkill_is_not_another_senders_under_its_id(
    tmp_path: Path,
) -> None:
    """A human's update and the test actor's, both ``c-same``: the human's was saved, then the
    process died. After the restart the recovery matched checkpoints by correlation id only,
    so the test actor's (never lowered) was reported applied before the restart and its
    update was lost."""
    store, db = tmp_path / "store.db", tmp_path / "checkpoints.db"
    first = await asyncio.create_subprocess_exec(
        sys.executable, str(SCOPE_CRASH_WORKER), str(store), str(db), "first",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, errors = await asyncio.wait_for(first.communicate(), 60)
    assert first.returncode == -9, errors.decode()  # SIGKILL, by its own hand
    second = await asyncio.create_subprocess_exec(
        sys.executable, str(SCOPE_CRASH_WORKER), str(store), str(db), "restart",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, errors = await asyncio.wait_for(second.communicate(), 60)
    assert second.returncode == 0, errors.decode()
    outcome = json.loads(out.decode().strip().splitlines()[-1])
    assert outcome["log"] == ["slow", "human", "test", "done"]
    assert outcome["human"] == ["applied", [True]]  # its saved checkpoint, reported once
    assert outcome["test"] == ["applied", [False]]  # applied now, for the first time


ANSWER_CRASH_WORKER = Path(__file__).with_name("graph_answer_crash_worker.py")


async def test_approvals_a_step_took_before_a_sigkill_are_reported_applied(
    tmp_path: Path,
) -> None:
    """LEFT was approved and ran, then RIGHT was approved, the step that took both answers
    was saved, and the process died before the store heard of either approval. The step's
    checkpoint named RIGHT's approval only (the records of the unfinished step had been
    rebuilt without who answered LEFT), so after the restart LEFT's approval was handed over
    again and failed: nothing to approve."""
    store, db = tmp_path / "store.db", tmp_path / "checkpoints.db"
    first = await asyncio.create_subprocess_exec(
        sys.executable, str(ANSWER_CRASH_WORKER), str(store), str(db), "first",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, errors = await asyncio.wait_for(first.communicate(), 60)
    assert first.returncode == -9, errors.decode()  # SIGKILL, by its own hand
    second = await asyncio.create_subprocess_exec(
        sys.executable, str(ANSWER_CRASH_WORKER), str(store), str(db), "restart",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, errors = await asyncio.wait_for(second.communicate(), 60)
    assert second.returncode == 0, errors.decode()
    outcome = json.loads(out.decode().strip().splitlines()[-1])
    assert outcome["log"] == ["left:True", "right:True", "after_left"]
    # each applied once, before the restart, and reported so once
    assert outcome["c-left"] == ["applied", None, [True]]
    assert outcome["c-right"] == ["applied", None, [True]]


RERUN_CRASH_WORKER = Path(__file__).with_name("graph_rerun_crash_worker.py")


async def rerun_crash(tmp_path: Path, target: str) -> dict[str, Any]:
    """``graph_rerun_crash_worker.py``'s three processes (``first``, ``again`` killed at the
    command's ``steering.accepted``, ``restart``) with ``target``; the outcome it prints."""
    store, db = tmp_path / "store.db", tmp_path / "checkpoints.db"
    for mode, code in (("first", 0), ("again", -9), ("restart", 0)):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(RERUN_CRASH_WORKER), str(store), str(db), mode, target,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, errors = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == code, errors.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_a_thread_command_a_rerun_of_a_finished_thread_accepted_is_settled_after_a_sigkill(
    tmp_path: Path,
) -> None:
    """A finished thread started again gets a new run, which saves no checkpoint; a thread
    command it accepted was logged under that run's id, and the process died. The next start
    of the thread continues the run its last checkpoint names (the first one), and the
    restored command waited for the other id, which never comes back: it was left
    ``accepted`` in the steering log for good (seen as "commands left open" by
    ``test_sigkill_while_steering_loses_no_command_and_applies_none_twice`` when a kill landed
    just after a thread finished)."""
    outcome = await rerun_crash(tmp_path, "thread")
    assert outcome["open"] == []
    assert outcome["state"] == "applied"
    assert outcome["log"] == ["work", "done", "steered"]  # applied once, by the thread's run
    assert outcome["events"][-2:] == ["steering.delivered", "steering.applied"]


PAUSE_CRASH_WORKER = Path(__file__).with_name("graph_pause_crash_worker.py")


@pytest.mark.parametrize("then", ["second", "cancel"])
async def test_a_graph_run_paused_before_its_process_died_comes_back_paused(
    tmp_path: Path, then: str
) -> None:
    """A graph run its operator paused comes back paused when its thread is continued after
    its process died, as an agent run started again under its id does (docs/harness.md):
    the pause its log applied holds it again, said by a ``run.paused`` with
    ``restored=True``, before any step; a resume lets go of it, a cancel ends it
    ``cancelled``."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{WORKER.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    statuses: list[list[str]] = []
    for mode in ("first", then):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(PAUSE_CRASH_WORKER),
            str(tmp_path),
            mode,
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        out, _ = await proc.communicate()
        assert proc.returncode == 0
        statuses.append(out.decode().strip().splitlines())
    assert statuses[0][-1] == "paused"
    assert statuses[1] == ["paused", "running" if then == "second" else "cancelled"]


async def test_a_thread_command_of_a_rerun_waits_for_its_thread_when_another_thread_ends_first(
    tmp_path: Path,
) -> None:
    """As ``test_a_thread_command_a_rerun_of_a_finished_thread_accepted_is_settled_after_a_sigkill``,
    but a run of another thread ends before the thread is started again. A run that ends is
    when the commands restored for a run the store has no row of are failed; the thread
    command the rerun had accepted was failed with them ("it never comes back under its
    id"), though it is the thread's: the crash loop saw it applied in the thread's state and
    failed in the steering log. It waits for the thread's next run, which applies it once."""
    outcome = await rerun_crash(tmp_path, "other")
    assert outcome["open"] == []
    assert outcome["state"] == "applied", outcome["reason"]
    assert outcome["log"] == ["work", "done", "steered"]  # applied once, by the thread's run
    assert outcome["events"][-2:] == ["steering.delivered", "steering.applied"]


async def test_a_command_for_a_rerun_of_a_finished_thread_is_settled_after_a_sigkill(
    tmp_path: Path,
) -> None:
    """As ``test_a_thread_command_a_rerun_of_a_finished_thread_accepted_is_settled_after_a_sigkill``,
    but the command names the run started again on the finished thread by its id
    (``SteeringTarget.agent_run``), not its thread. Killed before it saved anything, that run
    is not in the store, and the next start of the thread continues the run the checkpoint
    names: nothing ever comes back under the command's run id, so it was left ``accepted`` in
    the steering log for good. Now it fails once a run of the restarted runtime ends (here
    the thread's, continued), with its reason and a ``steering.failed`` event."""
    outcome = await rerun_crash(tmp_path, "run")
    assert outcome["open"] == []
    assert outcome["state"] == "failed"
    assert "never comes back" in outcome["reason"]
    assert outcome["log"] == ["work", "done"]  # not applied
    assert outcome["events"] == ["steering.failed"]
