"""A command for a thread, sent through the store, finds the thread's newest unfinished run
without reading every run of the tenant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.runs import RunInfo, RunStatus
from tinyagents.steering.remote import target_snapshot
from tinyagents.store import Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _snapshot(
    n: int, *, thread: str | None, status: RunStatus, tenant: str = "acme"
) -> dict[str, Any]:
    info = RunInfo(run_id=f"r-{n:05d}", thread_id=thread, tenant_id=tenant, status=status)
    snap = info.snapshot()
    snap["created_at"] = (T0 + timedelta(seconds=n)).isoformat()
    snap["owner"] = "rt-1"
    return snap


def _for_thread(thread: str, tenant: str = "acme") -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.thread(thread),
        actor=SteeringActor.human("ops", tenant_id=tenant, scopes=["agent:control"]),
        kind=SteeringKind.PAUSE,
    )


async def test_the_newest_unfinished_run_of_the_thread_is_found(store: Store) -> None:
    snaps = [_snapshot(n, thread=f"t-{n % 7}", status=RunStatus.COMPLETED) for n in range(300)]
    snaps.append(_snapshot(300, thread="t-x", status=RunStatus.RUNNING))  # the one
    snaps.append(_snapshot(301, thread="t-x", status=RunStatus.COMPLETED))  # newer, finished
    snaps.append(_snapshot(302, thread="t-x", status=RunStatus.RUNNING, tenant="other"))
    snaps += [_snapshot(n, thread=f"t-{n}", status=RunStatus.RUNNING) for n in range(400, 700)]
    await store.save_runs(snaps)

    found = await target_snapshot(store, _for_thread("t-x"))
    assert found is not None and found["run_id"] == "r-00300"
    assert await target_snapshot(store, _for_thread("t-3")) is None  # every run of it finished
    assert await target_snapshot(store, _for_thread("t-nobody")) is None
    other = await target_snapshot(store, _for_thread("t-x", tenant="other"))
    assert other is not None and other["run_id"] == "r-00302"


async def test_the_lookup_reads_pages_of_live_runs_not_every_run(store: Store) -> None:
    await store.save_runs(
        [_snapshot(n, thread="t-old", status=RunStatus.COMPLETED) for n in range(500)]
        + [_snapshot(500, thread="t-x", status=RunStatus.PAUSED)]
    )
    asked: list[dict[str, Any]] = []
    list_runs = store.list_runs

    async def everything(**kwargs: Any) -> list[dict[str, Any]]:
        raise AssertionError("load_runs read every run of the tenant")

    async def one_page(**kwargs: Any) -> list[dict[str, Any]]:
        asked.append(kwargs)
        return await list_runs(**kwargs)

    store.load_runs = everything  # type: ignore[method-assign]
    store.list_runs = one_page  # type: ignore[method-assign]
    found = await target_snapshot(store, _for_thread("t-x"))
    assert found is not None and found["run_id"] == "r-00500"
    # one page of the tenant's unfinished runs answered it
    assert len(asked) == 1 and "completed" not in asked[0]["statuses"]
