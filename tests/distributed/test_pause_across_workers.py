"""A pause of a run passed down to the runs below it (docs/harness.md, *Pausing a subtree*),
sent from another worker over Redis, and across a restart of the worker that owns the tree:
two worker processes (tests/distributed/worker.py), each a Runtime on its own SQLite file."""

from __future__ import annotations

from typing import Any

from test_redis_control import as_json, command, eventually, listed, terminal_counts


async def _tree(worker: Any, *, turns: int) -> tuple[str, str]:
    parent = await worker.call("start", run_id="p-1", tenant="acme", turns=turns, tick_s=0.02)
    child = await worker.call(
        "start", run_id="c-1", tenant="acme", turns=turns, tick_s=0.02, parent=parent
    )
    return parent, child


def _status(worker: Any, run_id: str) -> Any:
    return lambda: worker.call("status", run_id=run_id)


async def test_a_pause_sent_through_another_worker_holds_the_subtree_and_its_resume_lets_go(
    redis_url: str, prefix: str, workers: Any
) -> None:
    """The owner applies a command from another worker through its own runtime, so the hold
    of the runs below is the same as in one process: the child is paused by the parent's
    hold and runs again at the parent's resume."""
    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    parent, child = await _tree(a, turns=400)
    await listed(b, parent)

    pause = await b.call("submit", command=as_json(command(parent, "pause")))
    assert pause["status"] == "accepted", pause
    await eventually(_status(a, parent), lambda s: s == "paused")
    await eventually(_status(a, child), lambda s: s == "paused")
    history = await a.call("history", run_id=child)
    held = [e for e in history if e["type"] == "steering.applied"]
    assert held, history  # the child's own pause, from the parent's hold

    resume = await b.call("submit", command=as_json(command(parent, "resume")))
    assert resume["status"] == "accepted", resume
    await eventually(_status(a, child), lambda s: s == "running")
    await eventually(_status(a, parent), lambda s: s == "running")
    for run_id in (parent, child):
        cancel = await b.call("submit", command=as_json(command(run_id, "cancel")))
        assert cancel["status"] == "accepted", cancel
        assert await a.call("wait", run_id=run_id) == "cancelled"
    parent_history = await a.call("history", run_id=parent)
    for receipt in (pause, resume):
        assert terminal_counts(parent_history, receipt["correlation_id"]) == {"steering.applied": 1}


async def test_a_tree_started_again_after_its_worker_died_paused_is_let_go_by_the_parents_resume(
    redis_url: str, prefix: str, workers: Any
) -> None:
    """Worker A dies (SIGKILL) while an operator's pause of the parent holds the child. Its
    next process starts both again under their ids: the parent comes back paused (the
    operator's pause is restored) and holds the child again. The child's own log has the
    pause the parent passed down to it: restored as a pause of the child's own, it outlived
    the hold of the process that sent it, and the child stayed paused after the operator
    resumed the parent (only a resume sent to the child itself let it go)."""
    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    parent, child = await _tree(a, turns=400)
    await listed(b, parent)
    pause = await b.call("submit", command=as_json(command(parent, "pause")))
    assert pause["status"] == "accepted", pause
    await eventually(_status(a, parent), lambda s: s == "paused")
    await eventually(_status(a, child), lambda s: s == "paused")
    await a.call("flush")  # the applied pauses are in the log: then the process dies
    await a.kill()

    restarted = await workers("a", redis_url, prefix)  # same worker id and SQLite file
    await _tree(restarted, turns=3)
    assert await restarted.call("status", run_id=parent) == "paused"  # restored
    await eventually(_status(restarted, child), lambda s: s == "paused")  # held again
    await listed(b, parent)
    resume = await b.call("submit", command=as_json(command(parent, "resume")))
    assert resume["status"] == "accepted", resume
    assert await restarted.call("wait", run_id=child, wait_s=60) == "completed"
    assert await restarted.call("wait", run_id=parent, wait_s=60) == "completed"


async def test_a_held_run_started_again_as_a_root_after_its_worker_died_comes_back_paused(
    redis_url: str, prefix: str, workers: Any
) -> None:
    """Worker A dies (SIGKILL) while an operator's pause of the parent, sent through worker
    B, holds the child. Its next process starts the child alone (as a root: the parent is
    not started again), so no run above holds it or will let go of it. It came back
    running, the paused work going on unattended; it comes back paused by the hold its log
    has, and a resume sent to it through B lets it go."""
    a = await workers("a", redis_url, prefix)
    b = await workers("b", redis_url, prefix)
    parent, child = await _tree(a, turns=400)
    await listed(b, parent)
    pause = await b.call("submit", command=as_json(command(parent, "pause")))
    assert pause["status"] == "accepted", pause
    await eventually(_status(a, child), lambda s: s == "paused")
    await a.call("flush")  # the applied pauses are in the log: then the process dies
    await a.kill()

    restarted = await workers("a", redis_url, prefix)  # same worker id and SQLite file
    await restarted.call("start", run_id=child, tenant="acme", turns=3, tick_s=0.02)
    assert await restarted.call("status", run_id=child) == "paused"
    await listed(b, child)
    resume = await b.call("submit", command=as_json(command(child, "resume")))
    assert resume["status"] == "accepted", resume
    assert await restarted.call("wait", run_id=child, wait_s=60) == "completed"
