"""``Control``: the operator facade over an in-process runtime and over a store that another
runtime serves (the HTTP API and the ``runs`` CLI stand on it)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.slow_agent import slow_agent
from tinyagents import (
    Agent,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
    SubAgent,
    SubAgentTool,
)
from tinyagents.errors import ConfigurationError, ReceiptTimeout, StoreError
from tinyagents.server import Control
from tinyagents.server.demo import refund_graph
from tinyagents.store import SqliteStore
from tinyagents.testkit import ScriptedModel, reply, tool_call

OPS = SteeringActor.human("alice", tenant_id="acme", scopes=["agent:control"])
FOREIGN = SteeringActor.human("mallory", tenant_id="globex", scopes=["agent:control"])
READER = SteeringActor.human("bob", tenant_id="acme", scopes=["agent:observe"])


def steer(run_id: str, text: str, *, actor: Any = OPS, cid: str | None = None) -> SteeringCommand:
    extra = {"correlation_id": cid} if cid else {}
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=actor,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": text},
        **extra,
    )


async def until(check: Callable[[], Any], *, timeout_s: float = 60.0) -> Any:
    """Wait until ``check()`` (sync or async) returns something truthy, and return it."""
    async with asyncio.timeout(timeout_s):
        while True:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            await asyncio.sleep(0.01)


def test_control_needs_a_runtime_or_a_store() -> None:
    with pytest.raises(ConfigurationError):
        Control()


async def test_in_process_runs_are_listed_live_and_isolated_by_tenant() -> None:
    async with Runtime() as rt:
        control = Control(rt)
        handle = await rt.start(slow_agent(), "work", tenant_id="acme")
        await until(lambda: handle.info.usage.model_calls >= 2)
        runs = await control.list_runs(tenant_id="acme")
        assert [r["run_id"] for r in runs] == [handle.run_id]
        snap = runs[0]
        assert snap["status"] == "running" and snap["owner"] == rt.runtime_id
        assert snap["usage"]["model_calls"] >= 2 and snap["updated_at"]
        assert await control.list_runs(tenant_id="globex") == []
        assert await control.get_run(handle.run_id, tenant_id="globex") is None
        assert await control.get_run("nope", tenant_id=None) is None
        assert (await control.get_run(handle.run_id, tenant_id=None))["tenant_id"] == "acme"
        assert await control.list_runs(tenant_id=None, status="completed") == []
        await handle.cancel()
        await handle.result()
        control.close()


async def test_submit_in_process_is_the_runtimes_own_pipeline() -> None:
    async with Runtime() as rt:
        control = Control(rt)
        handle = await rt.start(slow_agent(), "work", tenant_id="acme")
        assert (await control.submit(steer(handle.run_id, "x", actor=FOREIGN))).reason == (
            f"not found: run {handle.run_id}"
        )
        refused = await control.submit(steer(handle.run_id, "x", actor=READER))
        assert refused.status == "rejected" and "agent:control" in (refused.reason or "")
        receipt = await control.submit(steer(handle.run_id, "please finish", cid="c-1"))
        assert receipt.status == "accepted"
        assert (await control.submit(steer(handle.run_id, "again", cid="c-1"))).status == (
            "duplicate"
        )
        result = await handle.result()
        assert "please finish" in result.output
        page = await control.steering(handle.run_id, tenant_id="acme")
        assert page is not None
        history = page.commands
        states = {h["correlation_id"]: h["state"] for h in history}
        assert states["c-1"] == "applied"
        assert next(h for h in history if h["correlation_id"] == "c-1")["terminal"] is True
        assert await control.steering(handle.run_id, tenant_id="globex") is None
        trace = await control.trace(handle.run_id, tenant_id="acme", limit=5)
        assert trace is not None and len(trace) == 5
        assert [f["id"] for f in trace] == sorted(f["id"] for f in trace)
        assert trace[-1]["type"].startswith("run.")
        events = await control.read_events(tenant_id="acme", after_id=trace[0]["id"])
        assert events[0][0] == trace[1]["id"]
        # globex sees its own rejected attempt only, never a trace of acme's run
        foreign_events = await control.read_events(tenant_id="globex")
        assert [e["type"] for _, e in foreign_events] == ["steering.requested", "steering.rejected"]
        assert all(e["run_id"] is None for _, e in foreign_events)
        assert await control.trace(handle.run_id, tenant_id="globex") is None


async def test_pending_commands_and_interrupts_are_in_the_snapshot() -> None:
    async with Runtime() as rt:
        control = Control(rt)
        handle = await rt.start_graph(
            refund_graph(),
            {"invoice": "#1", "amount": "3 EUR"},
            thread_id="t-1",
            tenant_id="acme",
        )
        snap = await until(
            lambda: [s for s in rt.live_snapshots([handle.run_id]) if s["interrupts"]]
        )
        (pending,) = snap[0]["interrupts"]
        assert pending["node"] == "approve_refund" and "Refund" in json.dumps(pending["value"])
        approve = SteeringCommand(
            target=SteeringTarget.graph_task(handle.run_id, pending["task_id"]),
            actor=OPS,
            kind=SteeringKind.APPROVE,
            payload={"interrupt_id": pending["id"], "value": {"approved": True}},
        )
        assert (await control.submit(approve)).status == "accepted"
        result = await handle.result()
        assert result.output["decision"] == "refunded"
        assert (await control.get_run(handle.run_id, tenant_id="acme"))["interrupts"] == []

        agent = await rt.start(slow_agent(), "work", tenant_id="acme")
        await agent.pause()
        await until(lambda: agent.info.status == "paused")
        await control.submit(steer(agent.run_id, "later", cid="c-queued"))
        snap = await control.get_run(agent.run_id, tenant_id="acme")
        assert [p["correlation_id"] for p in snap["pending_commands"]] == ["c-queued"]
        assert snap["pending_commands"][0]["state"] == "accepted"
        await agent.cancel()
        await agent.result()


async def test_tree_nests_children() -> None:
    leaf = Agent("leaf", ScriptedModel([reply("leaf done")]))
    mid = Agent(
        "mid",
        ScriptedModel([tool_call("leaf", input="dig"), reply("mid done")]),
        tools=[SubAgentTool(SubAgent(leaf))],
    )
    top = Agent(
        "top",
        ScriptedModel([tool_call("mid", input="look"), reply("top done")]),
        tools=[SubAgentTool(SubAgent(mid))],
    )
    async with Runtime() as rt:
        control = Control(rt)
        handle = await rt.start(top, "task", tenant_id="acme")
        await handle.result()
        tree = await control.tree(handle.run_id, tenant_id="acme")
        assert tree is not None and tree["agent_id"] == "top"
        (child,) = tree["children"]
        assert child["agent_id"] == "mid" and child["parent_run_id"] == handle.run_id
        assert [c["agent_id"] for c in child["children"]] == ["leaf"]
        subtree = await control.tree(child["run_id"], tenant_id="acme")
        assert subtree is not None and [c["agent_id"] for c in subtree["children"]] == ["leaf"]
        assert await control.tree(handle.run_id, tenant_id="globex") is None


async def test_through_the_store_the_owner_answers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Runtime(store=url) as rt:
        handle = await rt.start(slow_agent(), "work", tenant_id="acme")
        other = SqliteStore(tmp_path / "runs.db")
        await other.open()
        try:
            control = Control(store=other, receipt_timeout_s=60)
            snap = await until(lambda: control.get_run(handle.run_id, tenant_id="acme"))
            assert snap["owner"] == rt.runtime_id and snap["status"] == "running"
            assert await control.get_run(handle.run_id, tenant_id="globex") is None
            foreign = await control.submit(steer(handle.run_id, "x", actor=FOREIGN))
            assert foreign.status == "rejected" and foreign.reason == (
                f"not found: run {handle.run_id}"
            )
            unknown = await control.submit(steer("r-nope", "x"))
            assert unknown.reason == "not found: run r-nope"
            observe_only = await control.submit(steer(handle.run_id, "x", actor=READER))
            assert observe_only.status == "rejected" and observe_only.policy_id == "authority"
            receipt = await control.submit(steer(handle.run_id, "please finish", cid="c-9"))
            assert receipt.status == "accepted" and receipt.run_id == handle.run_id
            assert (await control.submit(steer(handle.run_id, "x", cid="c-9"))).status == (
                "duplicate"
            )
            await handle.result()
            done = await until(lambda: _status_is(control, handle.run_id, "completed"))
            assert done["pending_commands"] == []
            late = await control.submit(steer(handle.run_id, "too late"))
            assert late.status == "rejected" and "target finished" in (late.reason or "")
            # a retry of what the owner took is a duplicate, even once the run has finished
            retried = await control.submit(steer(handle.run_id, "please finish", cid="c-9"))
            assert retried.status == "duplicate"

            async def listed() -> bool:
                page = await control.steering(handle.run_id, tenant_id="acme")
                return page is not None and any(h["correlation_id"] == "c-9" for h in page.commands)

            assert await until(listed)
        finally:
            await other.close()


async def _status_is(control: Control, run_id: str, status: str) -> dict[str, Any] | None:
    snap = await control.get_run(run_id, tenant_id=None)
    return snap if snap is not None and snap["status"] == status else None


async def test_no_answer_from_the_owner_is_a_receipt_timeout(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    try:
        await store.save_runs(
            [
                {
                    "run_id": "r-1",
                    "root_run_id": "r-1",
                    "tenant_id": "acme",
                    "status": "running",
                    "owner": "rt-gone",
                }
            ]
        )
        control = Control(store=store, receipt_timeout_s=0.1)
        with pytest.raises(ReceiptTimeout, match="may still be applied"):
            await control.submit(steer("r-1", "anyone there?"))
        assert len(await store.inbox_take("rt-gone")) == 1  # it waits for its owner
        # an owner silent for long (no heartbeat) is taken for gone: nothing is sent
        old = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
        snap = {**(await store.load_run("r-1") or {}), "updated_at": old}
        await store.save_runs([snap])
        receipt = await control.submit(steer("r-1", "anyone?"))
        assert receipt.status == "rejected" and "no heartbeat since" in (receipt.reason or "")
        assert await store.inbox_take("rt-gone") == []
    finally:
        await store.close()


async def test_a_thread_command_skips_a_dead_workers_run_for_a_live_one(tmp_path: Path) -> None:
    """A worker died with a run on the thread, newer than a live run of another worker: a
    thread command through the store went to the dead one (a receipt timeout, then "owner
    silent" refusals), never to the live run."""
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    try:
        now = datetime.now(UTC)

        def run(run_id: str, owner: str, created: int, updated: datetime) -> dict[str, Any]:
            return {
                "run_id": run_id,
                "root_run_id": run_id,
                "tenant_id": "acme",
                "thread_id": "t-1",
                "status": "running",
                "owner": owner,
                "created_at": (now - timedelta(minutes=created)).isoformat(),
                "updated_at": updated.isoformat(),
            }

        await store.save_runs(
            [
                run("r-live", "rt-live", 10, now),
                run("r-dead", "rt-dead", 5, now - timedelta(minutes=4)),
            ]
        )
        control = Control(store=store, receipt_timeout_s=0.1)
        command = SteeringCommand(
            target=SteeringTarget.thread("t-1"),
            actor=OPS,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "to whoever runs the thread"},
        )
        with pytest.raises(ReceiptTimeout, match="rt-live"):
            await control.submit(command)
        assert len(await store.inbox_take("rt-live")) == 1
        assert await store.inbox_take("rt-dead") == []
        # with only the dead worker's run on the thread, the refusal says why
        await store.save_runs([{**run("r-live", "rt-live", 10, now), "status": "completed"}])
        refused = await control.submit(command.model_copy(update={"correlation_id": "c-2"}))
        assert refused.status == "rejected" and "no heartbeat since" in (refused.reason or "")
    finally:
        await store.close()


async def test_a_thread_command_no_process_runs_is_deferred_for_the_threads_next_run(
    tmp_path: Path,
) -> None:
    """``Control`` over a runtime with a durable store (``tinyagents serve --store``): a
    command for a thread no process runs a run of was looked for in the store for the
    listing wait and answered ``rejected`` "not found", where the runtime (one process)
    defers it for the thread's next run. It is deferred in the runtime now, and that run
    takes it. With no runtime of its own (``runs --store``) and no process on the store,
    nothing could hold it: still "not found". (While the runtime is open, its store row of
    the run it finished may still say running until its next snapshot tick: a command sent
    through the store then goes to it, which defers it.)"""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Runtime(store=url) as rt:
        control = Control(rt)
        cancel = SteeringCommand(
            target=SteeringTarget.thread("t-next"), actor=OPS, kind=SteeringKind.CANCEL, payload={}
        )
        receipt = await control.submit(cancel)
        assert receipt.status == "deferred" and receipt.run_id is None, receipt
        handle = await rt.start(slow_agent(), "work", tenant_id="acme", thread_id="t-next")
        async with asyncio.timeout(60):  # against a hang, not a timing assertion
            assert (await handle.result()).status.value == "cancelled"
        assert rt.router.state(cancel.correlation_id, scope="tenant:acme") == "applied"
        control.close()
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    try:
        alone = Control(store=store, listing_wait_s=0.0)
        other = cancel.model_copy(update={"correlation_id": "c-alone"})
        refused = await alone.submit(other)
        assert refused.status == "rejected" and refused.reason == "not found: thread t-next"
        alone.close()
    finally:
        await store.close()


async def test_a_run_whose_owner_went_silent_is_marked_so(tmp_path: Path) -> None:
    """A run of a process that died stays 'running' in the store for ever: its snapshots say
    ``owner_silent`` once no heartbeat came for OWNER_SILENT_S, in the listing, the run and
    its tree, so an operator can tell it from a live one."""
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    try:
        now = datetime.now(UTC)
        old = (now - timedelta(minutes=5)).isoformat()

        def run(run_id: str, status: str, updated_at: str, parent: str | None = None) -> dict:
            return {
                "run_id": run_id,
                "root_run_id": "r-gone",
                "parent_run_id": parent,
                "tenant_id": "acme",
                "status": status,
                "owner": "rt-1",
                "updated_at": updated_at,
            }

        await store.save_runs(
            [
                run("r-gone", "running", old),
                run("r-done", "completed", old, parent="r-gone"),
                run("r-live", "running", now.isoformat(), parent="r-gone"),
            ]
        )
        control = Control(store=store)
        page = await control.page_runs(tenant_id="acme")
        assert {s["run_id"]: s["owner_silent"] for s in page.runs} == {
            "r-gone": True,
            "r-done": False,
            "r-live": False,
        }
        gone = await control.get_run("r-gone", tenant_id="acme")
        assert gone is not None and gone["owner_silent"] and gone["status"] == "running"
        tree = await control.tree("r-gone", tenant_id="acme")
        assert tree is not None and tree["owner_silent"]
        assert [c["owner_silent"] for c in tree["children"]] == [False, False]
    finally:
        await store.close()


async def test_closing_writes_final_snapshots_and_stops_the_poller(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    rt = Runtime(store=url)
    await rt.open()
    handle = await rt.start(slow_agent(), "work", tenant_id="acme")
    await until(lambda: handle.info.usage.model_calls >= 1)
    await rt.close()
    assert rt._serving is None
    store = SqliteStore(tmp_path / "runs.db")
    await store.open()
    try:
        snap = await store.load_run(handle.run_id)
        assert snap is not None and snap["status"] == "cancelled"
        assert snap["owner"] == rt.runtime_id
        # Nobody polls the inbox of a closed runtime: the submitter is told it finished.
        receipt = await Control(store=store).submit(steer(handle.run_id, "x"))
        assert receipt.status == "rejected" and "target finished" in (receipt.reason or "")
    finally:
        await store.close()


async def test_wake_inbox_answers_without_waiting_for_the_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tinyagents.runtime as runtime_module

    monkeypatch.setattr(runtime_module, "INBOX_POLL_S", 3600.0)  # only a wake-up answers
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Runtime(store=url) as rt:
        handle = await rt.start(slow_agent(), "work", tenant_id="acme")
        await rt.write_live_snapshots(heartbeat=True)
        control = Control(store=rt.store, receipt_timeout_s=60)
        submitted = asyncio.create_task(control.submit(steer(handle.run_id, "please finish")))
        await until(lambda: _has_pending(rt))
        assert not submitted.done()
        rt.wake_inbox()
        assert (await submitted).status == "accepted"
        await handle.result()


async def _has_pending(rt: Runtime) -> bool:
    async with rt.store.db.execute("SELECT count(*) FROM inbox WHERE state = 'pending'") as cur:  # type: ignore[attr-defined]
        row = await cur.fetchone()
    return bool(row and row[0])


async def test_a_paused_run_keeps_its_heartbeat(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Runtime(store=url) as rt:
        control = Control(store=rt.store)
        handle = await rt.start(slow_agent(), "work", tenant_id="acme")
        await handle.pause()
        paused = await until(lambda: _status_is(control, handle.run_id, "paused"))
        # no event happens while it is paused: only the heartbeat rewrites the snapshot
        later = await until(lambda: _updated_after(control, handle.run_id, paused["updated_at"]))
        assert later["status"] == "paused" and later["usage"] == paused["usage"]
        await handle.cancel()
        await handle.result()


async def _updated_after(control: Control, run_id: str, at: str) -> dict[str, Any] | None:
    snap = await control.get_run(run_id, tenant_id=None)
    return snap if snap is not None and snap["updated_at"] > at else None


async def test_a_log_that_cannot_be_read_is_no_duplicate_for_a_finished_run(
    tmp_path: Path,
) -> None:
    """A command for a finished run is refused by the sender's side, unless the steering log
    holds its id (a retry of what the owner took): then it is a duplicate. When that lookup
    failed (a locked database, a dropped connection), the command was answered ``duplicate``
    all the same, telling its sender that an earlier attempt was taken when none may have
    been. A failed lookup is a ``StoreError`` now (the sender tries again); a row that is there
    but no longer reads is still a duplicate."""

    class LogUnreadable(SqliteStore):
        locked = True

        async def get_command(self, correlation_id: str, *, scope: str = "") -> Any:
            if self.locked:
                raise StoreError(f"SQLite store {self.path!r}: database is locked")
            return await super().get_command(correlation_id, scope=scope)

    store = LogUnreadable(tmp_path / "runs.db")
    await store.open()
    try:
        await store.save_runs(
            [
                {
                    "run_id": "r-1",
                    "root_run_id": "r-1",
                    "tenant_id": "acme",
                    "status": "completed",
                    "owner": "rt-a",
                }
            ]
        )
        control = Control(store=store, receipt_timeout_s=0.1, listing_wait_s=0)
        with pytest.raises(StoreError, match="locked"):
            await control.submit(steer("r-1", "x", cid="c-never-sent"))

        store.locked = False
        taken = steer("r-1", "x", cid="c-taken")
        await store.append_command(taken, state="applied", run_id="r-1")
        with sqlite3.connect(tmp_path / "runs.db") as db:
            db.execute("UPDATE steering_log SET command = '{\"kind\": 1}'")
        assert (await control.submit(taken)).status == "duplicate"
    finally:
        await store.close()
