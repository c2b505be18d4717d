"""The operator facade over Redis: ``Control(runtime, redis=...)`` lists every worker's runs and
sends commands for another worker's runs there (two runtimes in this process, one Redis)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict

import pytest
from conftest import RedisServer
from test_redis_control import OPERATOR, command, eventually, slow_agent_for_listing
from worker import slow_agent

from tinyagents import (
    RunStatus,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.distributed import RedisControl
from tinyagents.distributed.mirror import redis_now
from tinyagents.distributed.wire import COMMANDS_TTL_S, STARTED, Keys
from tinyagents.errors import InvalidCommandError, ReceiptTimeout
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.server import Control
from tinyagents.store import MemoryStore
from tinyagents.store.base import MAX_COMMAND_BYTES
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import FakeClock, use_clock


@pytest.fixture
async def pair(redis_url: str, prefix: str) -> AsyncIterator[tuple[Runtime, Control, RedisControl]]:
    """Worker a's runtime, and worker b's Control (with its RedisControl)."""
    async with Runtime() as rt_a, Runtime() as rt_b:
        kw = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2, "backoff_s": (0.05, 0.2)}
        async with RedisControl(rt_a, redis_url, worker_id="a", **kw):  # type: ignore[arg-type]
            async with RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b:  # type: ignore[arg-type]
                control = Control(rt_b, redis=rc_b)
                try:
                    yield rt_a, control, rc_b
                finally:
                    control.close()


async def test_control_lists_and_steers_another_workers_run_through_redis(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    rt_a, control, rc_b = pair
    handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")

    runs = await eventually(
        lambda: control.list_runs(tenant_id="acme"),
        lambda runs: any(r["run_id"] == handle.run_id for r in runs),
    )
    assert next(r for r in runs if r["run_id"] == handle.run_id)["worker"] == "a"
    assert await control.list_runs(tenant_id="globex") == []
    snap = await control.get_run(handle.run_id, tenant_id="acme")
    assert snap is not None and snap["worker"] == "a"
    assert await control.get_run(handle.run_id, tenant_id="globex") is None

    receipt = await control.submit(command(handle.run_id, "pause"))
    assert receipt.status == "accepted" and rc_b.counters.sent == 1
    await eventually(lambda: asyncio.sleep(0, handle.status), lambda s: s is RunStatus.PAUSED)
    outsider = SteeringActor.human("eve", tenant_id="globex", scopes=["agent:control"])
    refused = await control.submit(command(handle.run_id, "cancel", actor=outsider))
    assert refused.status == "rejected" and refused.reason == f"not found: run {handle.run_id}"
    cancel = await control.submit(command(handle.run_id, "cancel", actor=OPERATOR))
    assert cancel.status == "accepted"
    assert (await handle.result()).status is RunStatus.CANCELLED


async def test_a_command_sent_as_soon_as_another_worker_starts_the_run_reaches_it(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run is registered on worker a (its start answered) but not listed yet (a's mirror
    writes it within ``throttle_s``): a command for it sent on worker b at once was answered
    ``rejected`` "not found", as for a run that does not exist; it now waits for the listing
    that long. A run that is nowhere is still not found, as is another tenant's."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", backoff_s=(0.05, 0.2), **kw) as rc_a,
            RedisControl(rt_b, redis_url, worker_id="b", backoff_s=(0.05, 0.2), **kw) as rc_b,
        ):
            control = Control(rt_b, redis=rc_b)
            # a's run is listed when the test says so (a's mirror writing it within its
            # throttle_s, 0.1 s, under load listed it before the 'not listed yet' check)
            listed, parked = asyncio.Event(), asyncio.Event()
            write = rc_a.mirror._write

            async def held_write(redis: Any, *, beat: bool) -> None:
                parked.set()
                await listed.wait()
                await write(redis, beat=beat)

            monkeypatch.setattr(rc_a.mirror, "_write", held_write)
            await parked.wait()  # no write of a's under way: none lists the run started next
            handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")
            assert await rc_b.get_run(handle.run_id) is None  # not listed yet
            # the listing appears once b's submit has looked for it once and found none
            looks: list[dict[str, Any] | None] = []
            looked = asyncio.Event()
            find = rc_b._find

            async def noted_find(run_id: str) -> dict[str, Any] | None:
                found = await find(run_id)
                looks.append(found)
                looked.set()
                return found

            monkeypatch.setattr(rc_b, "_find", noted_find)
            # b's wait (throttle_s + heartbeat_s, 0.3 s) outlasts a loaded machine's delays:
            # the test, not the clock, says when a lists the run
            monkeypatch.setattr(rc_b, "heartbeat_s", 60.0)
            sent = asyncio.create_task(control.submit(command(handle.run_id, "pause")))
            await looked.wait()
            assert all(found is None for found in looks)  # b looked: not listed yet
            listed.set()
            receipt = await sent
            assert receipt.status == "accepted", receipt
            assert looks[0] is None and looks[-1] is not None, looks
            await eventually(
                lambda: asyncio.sleep(0, handle.status), lambda s: s is RunStatus.PAUSED
            )

            monkeypatch.setattr(rc_b, "heartbeat_s", 0.2)
            missing = await control.submit(command("r-nowhere", "pause"))
            assert missing.status == "rejected" and missing.reason == "not found: run r-nowhere"
            outsider = SteeringActor.human("eve", tenant_id="globex", scopes=["agent:control"])
            foreign = await rc_b.submit(command(handle.run_id, "cancel", actor=outsider))
            assert foreign.status == "rejected"
            assert foreign.reason == f"not found: run {handle.run_id}"
            await handle.cancel()
            await handle.result()
            control.close()


async def test_another_workers_live_run_joins_the_page_it_sorts_into(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    """Worker b lists a shared store holding 30 older runs and a stale copy of worker a's live
    run: the live run heads the first page with a's fresh snapshot, filtered by its fresh
    status, and a walk of the pages sees every run once."""
    rt_a, control_b, rc_b = pair
    store = MemoryStore()
    control = Control(control_b.runtime, store=store, redis=rc_b)
    await store.save_runs(
        [
            {
                "run_id": f"old-{i:02d}",
                "root_run_id": f"old-{i:02d}",
                "parent_run_id": None,
                "tenant_id": "acme",
                "status": "completed",
                "created_at": f"2000-01-01T00:00:{i:02d}+00:00",
            }
            for i in range(30)
        ]
    )
    handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")
    await store.save_runs([{**handle.info.snapshot(), "status": "completed"}])  # stale
    await eventually(
        lambda: rc_b.list_runs("acme"),
        lambda runs: any(r["run_id"] == handle.run_id for r in runs),
    )
    first = await control.page_runs(tenant_id="acme", limit=5)
    assert first.runs[0]["run_id"] == handle.run_id
    assert first.runs[0]["worker"] == "a" and first.runs[0]["status"] == "running"
    done = await control.page_runs(tenant_id="acme", statuses=("completed",), limit=100)
    assert handle.run_id not in {r["run_id"] for r in done.runs} and len(done.runs) == 30
    walked = [r["run_id"] for r in await control.list_runs(tenant_id="acme")]
    assert walked == [handle.run_id] + [f"old-{i:02d}" for i in reversed(range(30))]
    assert (await control.page_runs(tenant_id="globex", limit=5)).runs == []
    await handle.cancel()
    await handle.result()
    control.close()


async def test_a_command_for_a_thread_reaches_the_worker_running_it(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    rt_a, control, rc_b = pair
    handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-9")
    await eventually(
        lambda: control.get_run(handle.run_id, tenant_id="acme"), lambda s: s is not None
    )
    cancel = SteeringCommand(
        target=SteeringTarget.thread("t-9"), actor=OPERATOR, kind=SteeringKind.CANCEL, payload={}
    )
    receipt = await control.submit(cancel)
    assert receipt.status == "accepted" and rc_b.counters.sent == 1
    assert (await handle.result()).status is RunStatus.CANCELLED


def not_(value: Any) -> bool:
    return not value


def thread_cancel(thread_id: str, actor: Any = OPERATOR) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.thread(thread_id), actor=actor, kind=SteeringKind.CANCEL, payload={}
    )


async def test_a_thread_command_sent_before_the_other_workers_run_is_listed_reaches_it(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread's run is on worker a, started a moment ago and not listed yet: a command for
    the thread sent on worker b found no run anywhere, was deferred on b, and waited there for
    ever while a's run ran on. It now goes to a as soon as b sees a's run listed."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", backoff_s=(0.05, 0.2), **kw) as rc_a,
            RedisControl(rt_b, redis_url, worker_id="b", backoff_s=(0.05, 0.2), **kw) as rc_b,
        ):
            control = Control(rt_b, redis=rc_b)
            # a's run is listed when the test says so: a's mirror writing it within its
            # throttle_s (0.1 s), under load, listed it before the command was sent
            listed, parked = asyncio.Event(), asyncio.Event()
            write = rc_a.mirror._write

            async def held_write(redis: Any, *, beat: bool) -> None:
                parked.set()
                await listed.wait()
                await write(redis, beat=beat)

            monkeypatch.setattr(rc_a.mirror, "_write", held_write)
            await parked.wait()  # no write of a's under way: none lists the run started next
            handle = await rt_a.start(
                slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-1"
            )
            assert await rc_b.get_run(handle.run_id) is None  # not listed yet
            cancel = thread_cancel("t-1")
            receipt = await control.submit(cancel)
            assert receipt.status == "deferred" and receipt.run_id is None, receipt
            listed.set()
            async with asyncio.timeout(60):  # against a hang, not a timing assertion
                assert (await handle.result()).status is RunStatus.CANCELLED
            assert rt_a.router.state(cancel.correlation_id, scope="tenant:acme") == "applied"
            # b keeps nothing open for it, once a's receipt is in
            await eventually(lambda: asyncio.sleep(0, rt_b.router.open_commands()), ok=not_)
            control.close()


async def test_a_deferred_thread_command_is_delivered_when_another_worker_starts_the_thread(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    """No run on the thread anywhere: the command waits (deferred), as in one process. The
    thread's next run starting on worker a, not on b where the command waits, now takes it,
    and so would a run on b (in-process, as before); another tenant's run on the thread does
    not, nor does an agent's command travel (only operators' do)."""
    rt_a, control, rc_b = pair
    rt_b = control.runtime
    cancel = thread_cancel("t-2")
    receipt = await control.submit(cancel)
    assert receipt.status == "deferred" and receipt.run_id is None, receipt
    theirs = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="globex", thread_id="t-2")
    await eventually(lambda: rc_b.get_run(theirs.run_id), lambda s: s is not None)
    ours = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-2")
    async with asyncio.timeout(60):
        assert (await ours.result()).status is RunStatus.CANCELLED
    assert theirs.status is RunStatus.RUNNING
    await eventually(lambda: asyncio.sleep(0, rt_b.router.open_commands()), ok=not_)
    history = [e.type for e in rt_a.steering_history(ours.run_id)]
    assert history[0] == "steering.requested" and history[-1] == "steering.applied", history
    again = await control.submit(cancel)  # the same command sent again: taken once
    assert again.status == "duplicate", again

    local = thread_cancel("t-3")
    assert (await control.submit(local)).status == "deferred"
    mine = await rt_b.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-3")
    async with asyncio.timeout(60):
        assert (await mine.result()).status is RunStatus.CANCELLED
    await theirs.cancel()
    await theirs.result()


async def test_a_thread_command_sent_after_others_wait_for_the_thread_goes_after_them(
    redis_url: str, prefix: str
) -> None:
    """Commands deferred on b for a thread whose run then starts on a are handed over at b's
    next round (every ``heartbeat_s``); a command for the thread sent on b before that went
    straight to a's run and was applied before them, where in one process the thread's run
    takes the waiting ones first. b now hands them over first."""
    kw: dict[str, Any] = {"prefix": prefix, "block_s": 0.2, "backoff_s": (0.05, 0.2)}
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", heartbeat_s=0.2, **kw),
            RedisControl(
                rt_b, redis_url, worker_id="b", heartbeat_s=30.0, ttl_s=60.0, **kw
            ) as rc_b,
        ):
            first = SteeringCommand(
                target=SteeringTarget.thread("t-5"),
                actor=OPERATOR,
                kind=SteeringKind.ADD_INSTRUCTION,
                payload={"text": "first"},
            )
            assert (await rc_b.submit(first)).status == "deferred"
            handle = await rt_a.start(
                slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-5"
            )
            await eventually(lambda: rc_b.get_run(handle.run_id), lambda s: s is not None)
            second = first.model_copy(
                update={"correlation_id": "c-second", "payload": {"text": "second"}}
            )
            receipt = await rc_b.submit(second)
            assert receipt.status == "accepted" and receipt.run_id == handle.run_id, receipt
            accepted = [
                e.correlation_id
                for e in rt_a.steering_history(handle.run_id)
                if e.type == "steering.accepted"
            ]
            assert accepted == [first.correlation_id, second.correlation_id]
            assert rt_b.router.waiting_for_threads() == []
            await handle.cancel()
            await handle.result()


async def test_a_deferred_thread_command_too_large_for_redis_holds_no_other_back(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    """A thread command deferred on b that cannot travel (over the wire's
    ``MAX_COMMAND_BYTES``: b's policies let large payloads through) waits on b for a run
    there; the commands deferred after it are still handed to the thread's run on a. Its
    send raised out of the job that hands them over, which ended: no thread command left b
    again."""
    rt_a, control, _ = pair
    control.runtime.router.pipeline.remove("payload")
    big = SteeringCommand(
        target=SteeringTarget.thread("t-4"),
        actor=OPERATOR,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "x" * (MAX_COMMAND_BYTES + 1)},
    )
    assert (await control.submit(big)).status == "deferred"
    cancel = thread_cancel("t-4")
    assert (await control.submit(cancel)).status == "deferred"
    handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-4")
    async with asyncio.timeout(60):
        assert (await handle.result()).status is RunStatus.CANCELLED
    waiting = control.runtime.router.waiting_for_threads()
    assert [c.correlation_id for c, _ in waiting] == [big.correlation_id]


class Gate:
    """A run's policy that holds every command until ``open`` is set (a slow policy or store
    write, without timing), noting the order commands reach it."""

    policy_id = "gate"

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.seen: list[str] = []

    async def __call__(self, cmd: SteeringCommand, ctx: Any, call_next: Any) -> Any:
        self.seen.append(cmd.correlation_id)
        await self.open.wait()
        return await call_next(cmd)


async def test_a_slow_command_for_one_run_holds_no_other_runs_command(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    """Worker a's reader answered the entries of each read together: a command for run B sent
    while one for run A was held in a slow policy (or store write) waited for A's, in the same
    read or the next (the reader read on only once the whole read was answered), and timed out
    with it. Each run's commands now go on apart, in the order they came; a later command for
    A still waits for A's first (per-run order stays as sent)."""
    rt_a, control, rc_b = pair
    slow = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")
    other = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")
    gate = Gate()
    slow.policies.append(gate)
    for handle in (slow, other):
        await eventually(lambda h=handle: rc_b.get_run(h.run_id), lambda s: s is not None)
    first = command(slow.run_id, "add_instruction", {"text": "one"})
    second = command(slow.run_id, "add_instruction", {"text": "two"})
    held = asyncio.create_task(control.submit(first))
    try:
        await eventually(
            lambda: asyncio.sleep(0, gate.seen), lambda seen: seen == [first.correlation_id]
        )
        behind = asyncio.create_task(control.submit(second))
        receipt = await control.submit(command(other.run_id, "pause"))  # ReceiptTimeout if held
        assert receipt.status == "accepted", receipt
        assert not held.done() and not behind.done()
        assert gate.seen == [first.correlation_id]  # A's second waits for its first
    finally:
        gate.open.set()
    assert (await held).status == "accepted" and (await behind).status == "accepted"
    assert gate.seen == [first.correlation_id, second.correlation_id]
    for handle in (slow, other):
        await handle.cancel()
        await handle.result()


async def test_a_thread_command_from_a_run_looks_among_its_own_tenants_runs(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    """Thread ids are each tenant's own. A parent agent's command for a thread, submitted
    through worker b's seat, was sent to the newest run on a thread of that name of any
    tenant: another tenant's run on worker a took it away from b, whose owner refused it
    ("only operators' commands travel between workers"), while in one process it waits for
    a run of its own tenant on the thread. It now looks among the runs of its run's tenant
    (none on the thread yet: it waits on b, and b's child on the thread takes it)."""
    rt_a, control, rc_b = pair
    rt_b = control.runtime
    theirs = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="globex", thread_id="t")
    await eventually(lambda: rc_b.get_run(theirs.run_id), lambda s: s is not None)
    parent = await rt_b.start(slow_agent(400, 0.02), "work", tenant_id="acme")
    steer = SteeringCommand(
        target=SteeringTarget.thread("t"),
        actor=SteeringActor.parent_agent(parent.run_id, "orchestrator"),
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "focus on billing"},
    )
    receipt = await rc_b.submit(steer)
    assert receipt.status == "deferred" and receipt.run_id is None, receipt
    assert rc_b.counters.sent == 0
    child = await rt_b.start(
        slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t", parent=parent
    )
    assert rt_b.router.state(steer.correlation_id, scope="") in {"accepted", "delivered", "applied"}
    assert [e.run_id for e in rt_b.steering_history(child.run_id)][-1] == child.run_id
    assert rt_a.steering_history(theirs.run_id) == []
    for handle in (theirs, child, parent):
        await handle.cancel()
        await handle.result()


class Refund(TypedDict, total=False):
    amount: str
    answer: Any


def ask(state: Refund) -> Refund:
    return {"answer": interrupt(f"refund {state['amount']}?")}


def refund_graph() -> Any:
    graph = StateGraph(Refund)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask").add_edge("ask", END)
    return graph.compile(checkpointer=MemoryCheckpointer())


async def test_an_interrupted_graph_on_one_worker_is_resumed_there_from_another(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    """The interrupt shows in the mirror; the answer sent on worker b resumes the graph on
    worker a, which alone holds it (worker b's runtime never gets a run)."""
    rt_a, control, rc_b = pair
    run = await rt_a.start_graph(
        refund_graph(),
        {"amount": "12 EUR"},
        thread_id="refund-1",
        tenant_id="acme",
    )

    async def asked() -> Any:
        snap = await control.get_run(run.run_id, tenant_id="acme")
        return snap and snap.get("interrupts")

    (pending,) = await eventually(asked, bool)
    assert pending["value"] == "refund 12 EUR?"
    answer = SteeringCommand(
        target=SteeringTarget.graph_task(run.run_id, pending["task_id"]),
        actor=OPERATOR,
        kind=SteeringKind.APPROVE,
        payload={"interrupt_id": pending["id"], "value": "yes"},
    )
    receipt = await control.submit(answer)
    assert receipt.status == "accepted" and rc_b.counters.sent == 1
    result = await run.result()
    assert result.status.value == "completed"
    assert result.output["answer"] == {"approved": True, "value": "yes"}
    assert len(control.runtime.runs) == 0  # type: ignore[union-attr]


async def test_an_interrupt_reported_before_the_mirror_first_writes_is_listed(
    redis_url: str, prefix: str
) -> None:
    """A runtime watched by nothing but its seat on Redis (no ``Control`` of its own): its
    live books are kept from the seat's start, so an interrupt reported before the mirror's
    first write (held back here by a long throttle) is listed all the same."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", throttle_s=1.0, **kw),
            RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b,
        ):
            run = await rt_a.start_graph(
                refund_graph(), {"amount": "3 EUR"}, thread_id="refund-2", tenant_id="acme"
            )
            await eventually(
                lambda: asyncio.sleep(0, run.status), lambda s: s is RunStatus.INTERRUPTED
            )
            snap = await eventually(
                lambda: rc_b.get_run(run.run_id),
                lambda s: s is not None and s["status"] == "interrupted",
            )
            assert [i["value"] for i in snap["interrupts"]] == ["refund 3 EUR?"]


async def test_while_redis_is_down_control_sends_through_the_shared_store(
    private_redis: RedisServer, prefix: str, tmp_path: Path
) -> None:
    """Two workers on one SQLite file: with Redis gone, a command for the other worker's run
    goes through the store's inbox instead, and is still applied."""
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    kw["backoff_s"] = (0.05, 0.2)
    async with Runtime(store=store) as rt_a, Runtime(store=store) as rt_b:
        async with (
            RedisControl(rt_a, private_redis.url, worker_id="a", **kw),
            RedisControl(rt_b, private_redis.url, worker_id="b", **kw) as rc_b,
        ):
            control = Control(rt_b, redis=rc_b)
            handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")
            await eventually(
                lambda: control.get_run(handle.run_id, tenant_id="acme"), lambda s: s is not None
            )
            await private_redis.stop()
            receipt = await control.submit(command(handle.run_id, "cancel"))
            assert receipt.status == "accepted" and rc_b.counters.sent == 0
            assert (await handle.result()).status is RunStatus.CANCELLED
            control.close()


async def test_a_thread_command_reaches_the_threads_newest_run_not_an_older_one(
    redis_url: str, prefix: str
) -> None:
    """Thread "t" has an older unfinished run on worker a and a newer one on worker c (two
    turns of a conversation; or a's run is the ghost of a worker that just died, listed for
    ``ttl_s`` more). A command for the thread sent on worker b goes to the newest run, as in
    one process (``RunRegistry.for_thread``) and through the store: the lookup took the
    first snapshot that matched, and a's heartbeat (held back here) lists a first."""
    kw: dict[str, Any] = {"prefix": prefix, "block_s": 0.2, "backoff_s": (0.05, 0.2)}
    async with Runtime() as rt_a, Runtime() as rt_b, Runtime() as rt_c:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", heartbeat_s=5.0, **kw),  # type: ignore[arg-type]
            RedisControl(rt_c, redis_url, worker_id="c", heartbeat_s=0.2, **kw),  # type: ignore[arg-type]
            RedisControl(rt_b, redis_url, worker_id="b", heartbeat_s=0.2, **kw) as rc_b,  # type: ignore[arg-type]
        ):
            agent = slow_agent(400, 0.02)
            old = await rt_a.start(agent, "turn 1", tenant_id="acme", thread_id="t")
            await eventually(lambda: rc_b.get_run(old.run_id), lambda s: s is not None)
            new = await rt_c.start(agent, "turn 2", tenant_id="acme", thread_id="t")
            await eventually(lambda: rc_b.get_run(new.run_id), lambda s: s is not None)

            cancel = SteeringCommand(
                target=SteeringTarget.thread("t"), actor=OPERATOR, kind=SteeringKind.CANCEL
            )
            receipt = await rc_b.submit(cancel)
            assert receipt.status == "accepted" and receipt.run_id == new.run_id, receipt
            assert (await new.result()).status is RunStatus.CANCELLED
            assert old.status is RunStatus.RUNNING
            await old.cancel()
            await old.result()


async def test_over_redis_and_a_store_an_unknown_run_waits_once_as_another_tenants_does(
    redis_url: str, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With Redis and a shared store, a command for an unknown run waited for the Redis
    listing, then for the store's again: twice as long as for another tenant's run on
    another worker (answered after the Redis wait alone), which the time told apart. The
    store is now read once, with no wait of its own (the test checks the wait it is given,
    not the time taken: compared timings differed on a loaded machine by chance)."""
    from tinyagents.server import control as control_module

    store_waits: list[float] = []
    through_store = control_module.submit_through_store

    async def spied(store: Any, cmd: Any, **kw: Any) -> Any:
        store_waits.append(kw["listing_wait_s"])
        return await through_store(store, cmd, **kw)

    monkeypatch.setattr(control_module, "submit_through_store", spied)

    store = f"sqlite:///{tmp_path / 'shared.db'}"
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 1.0, "block_s": 0.2}
    async with Runtime(store=store) as rt_a, Runtime(store=store) as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", **kw),  # type: ignore[arg-type]
            RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b,  # type: ignore[arg-type]
        ):
            control = Control(rt_b, redis=rc_b)
            handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")
            await eventually(lambda: rc_b.get_run(handle.run_id), lambda s: s is not None)
            outsider = SteeringActor.human("eve", tenant_id="globex", scopes=["agent:control"])
            for run_id in (handle.run_id, "r-nowhere"):
                receipt = await control.submit(command(run_id, "pause", actor=outsider))
                assert receipt.status == "rejected" and receipt.reason == f"not found: run {run_id}"
            # the other tenant's run was answered over Redis; the unknown run, after Redis's
            # listing wait, by one read of the store
            assert store_waits == [0.0]
            await handle.cancel()
            await handle.result()
            control.close()


async def test_an_idle_run_of_a_live_worker_is_not_listed_as_owner_silent(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    """A run that does not move (waiting on an interrupt, paused, in a long tool call) is
    rewritten in its worker's mirror only when it changes, so its ``updated_at`` there grows
    old; the worker still beats. Seen through another worker it was marked ``owner_silent``
    (the console and ``tinyagents runs list`` said "(owner silent)") once that snapshot was
    OWNER_SILENT_S old, while its owner was alive and answered its commands. A run listed on
    Redis is a live worker's run: never silent."""
    rt_a, control, _ = pair
    handle = await rt_a.start(slow_agent_for_listing(), "hold", tenant_id="acme")
    await eventually(
        lambda: control.get_run(handle.run_id, tenant_id="acme"),
        lambda snap: snap is not None,
    )
    # the idle run's mirrored snapshot, read a minute later (the worker still beats)
    with use_clock(FakeClock(datetime.now(UTC) + timedelta(minutes=1))):
        runs = await control.list_runs(tenant_id="acme")
        snap = await control.get_run(handle.run_id, tenant_id="acme")
        tree = await control.tree(handle.run_id, tenant_id="acme")
    listed = next(r for r in runs if r["run_id"] == handle.run_id)
    assert listed["worker"] == "a" and listed["owner_silent"] is False
    assert snap is not None and snap["owner_silent"] is False
    assert tree is not None and tree["owner_silent"] is False
    await handle.cancel()


async def test_an_idle_run_listed_on_redis_shows_its_workers_last_heartbeat(
    pair: tuple[Runtime, Control, RedisControl], redis_url: str, prefix: str
) -> None:
    """docs/operator.md: a live run's ``updated_at`` "is never more than ~1 s old, so an
    older one means its process is gone". The mirror rewrites a run only when it moves, so
    through another worker an idle run kept the time of its last move (while its own worker
    and the store showed its heartbeat). It shows its worker's last heartbeat now."""
    import redis.asyncio as aioredis

    rt_a, control, _ = pair
    handle = await rt_a.start(slow_agent_for_listing(), "hold", tenant_id="acme")
    client = aioredis.Redis.from_url(redis_url)
    try:

        async def mirrored() -> Any:
            raw = await client.hget(f"{prefix}:runs:a", handle.run_id)
            return None if raw is None else json.loads(raw)["updated_at"]

        written = await eventually(mirrored, lambda at: at is not None)
        # the run is held in its tool: the mirror is not rewritten, the worker beats on
        snap = await eventually(
            lambda: control.get_run(handle.run_id, tenant_id="acme"),
            lambda s: s is not None and s["updated_at"] > written,
        )
        assert snap is not None and snap["worker"] == "a"
        assert await mirrored() == written
        runs = await eventually(
            lambda: control.list_runs(tenant_id="acme"),
            lambda runs: any(r["updated_at"] > written for r in runs),
        )
        assert [r["run_id"] for r in runs] == [handle.run_id]
    finally:
        await client.aclose()
        await handle.cancel()


async def test_a_run_started_again_on_another_worker_is_steered_there_not_at_its_ghost(
    redis_url: str, prefix: str
) -> None:
    """Worker "ghost" was killed with run r-1; r-1 was started again under its id on worker b
    at once. Until the ghost's listing expires (``ttl_s``) both list r-1: a command for it
    went to the worker whose heartbeat is oldest, the dead one (its stream is still there),
    and timed out, while b's live run took nothing; the listing showed the ghost's copy."""
    import redis.asyncio as aioredis

    from tinyagents.distributed.mirror import redis_now
    from tinyagents.distributed.wire import GROUP, Keys

    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    async with Runtime() as rt_b, Runtime() as rt_c:
        async with (
            RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b,
            # the receipt's wait is a guard against a hang (a command sent to the ghost is
            # never answered), not a timing: 2 s for the cancel's receipt could run out on a
            # loaded machine
            RedisControl(rt_c, redis_url, worker_id="c", receipt_timeout_s=60, **kw) as rc_c,
        ):
            handle = await rt_b.start(slow_agent(400, 0.02), "work", tenant_id="acme", run_id="r-1")
            live = await eventually(lambda: rc_c.get_run("r-1"), lambda s: s is not None)
            keys = Keys(prefix)
            client = aioredis.from_url(redis_url)
            try:  # the killed worker's leftovers: its listing, last beat, stream and group
                ghost = {**live, "worker": "ghost", "owner": "rt-ghost"}
                await client.hset(keys.runs("ghost"), "r-1", json.dumps(ghost))
                await client.zadd(keys.workers, {"ghost": await redis_now(client) - 2.0})
                await client.xgroup_create(keys.commands("ghost"), GROUP, id="0", mkstream=True)

                listed = [r for r in await rc_c.list_runs("acme") if r["run_id"] == "r-1"]
                assert [r["worker"] for r in listed] == ["b"], listed
                assert (await rc_c.get_run("r-1") or {}).get("worker") == "b"
                receipt = await rc_c.submit(command("r-1", "cancel"))
                assert receipt.status == "accepted", receipt
                assert (await handle.result()).status is RunStatus.CANCELLED
                assert await client.xlen(keys.commands("ghost")) == 0
            finally:
                await client.delete(keys.runs("ghost"), keys.commands("ghost"))
                await client.zrem(keys.workers, "ghost")
                await client.aclose()
            assert rc_b.counters.answered == 1


async def test_listing_entries_of_another_shape_are_skipped_not_a_500_or_an_empty_list(
    pair: tuple[Runtime, Control, RedisControl], redis_url: str, prefix: str
) -> None:
    """A live worker's hash holding entries of another shape (another version's worker, a
    hand edit) made ``get_run`` and ``submit`` raise ``KeyError`` (HTTP 500), and one entry
    whose ``run_id`` was no string made the listing drop every other worker's runs (logged
    as a Redis outage). Such entries are skipped."""
    import redis.asyncio as aioredis

    rt_a, control, rc_b = pair
    handle = await rt_a.start(slow_agent_for_listing(), "work", tenant_id="acme")
    await eventually(
        lambda: control.list_runs(tenant_id="acme"),
        lambda runs: [r["run_id"] for r in runs] == [handle.run_id],
    )
    keys = Keys(prefix)
    odd = {
        "g-list": {"run_id": ["g-list"], "tenant_id": "acme", "status": "running"},
        "g-tenantless": {"run_id": "g-tenantless", "status": "running", "worker": "odd"},
        "g-workerless": {"run_id": "g-workerless", "tenant_id": "acme", "status": "running"},
    }
    client = aioredis.from_url(redis_url)
    try:
        seconds, micros = await client.time()
        await client.zadd(keys.workers, {"odd": seconds + micros / 1_000_000})
        await client.hset(keys.runs("odd"), mapping={k: json.dumps(v) for k, v in odd.items()})
        runs = await control.list_runs(tenant_id="acme")
        assert [r["run_id"] for r in runs] == [handle.run_id]
        assert rc_b.connected
        for run_id in odd:
            assert await control.get_run(run_id, tenant_id="acme") is None
            receipt = await control.submit(command(run_id, "pause"))
            assert receipt.status == "rejected" and receipt.reason == f"not found: run {run_id}"
        assert rc_b.counters.malformed >= len(odd)
    finally:
        await client.aclose()


class Dated(TypedDict):
    due: str


async def ask_with_a_date(state: Dated) -> dict[str, Any]:
    when = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    return {"due": interrupt({"question": "pay on?", "when": when})}


async def test_an_interrupt_whose_value_holds_a_datetime_is_listed_on_redis_and_stored(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    """An interrupt value the checkpointer takes (a ``datetime`` in it) made every snapshot
    write of its runtime fail with "not JSON serializable": the mirror retried it for ever
    as a Redis outage (the worker's runs left the listing, ``/readyz`` said Redis was
    unavailable) and the store never got the runtime's changed runs."""
    graph = StateGraph(Dated).add_node("ask", ask_with_a_date)
    graph.add_edge(START, "ask").add_edge("ask", END)
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    store = f"sqlite:///{tmp_path / 'a.db'}"
    async with Runtime(store=store) as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", backoff_s=(0.05, 0.1), **kw) as rc_a,
            RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b,
        ):
            run = await rt_a.start_graph(
                graph.compile(checkpointer=MemoryCheckpointer()),
                {"due": ""},
                thread_id="pay-1",
                tenant_id="acme",
            )
            snap = await eventually(
                lambda: rc_b.get_run(run.run_id),
                lambda s: s is not None and s["status"] == "interrupted",
            )
            (pending,) = snap["interrupts"]
            assert pending["value"] == {"question": "pay on?", "when": "2030-01-02T03:04:05Z"}
            assert rc_a.connected and rc_a.counters.mirror_errors == 0
            await rt_a.write_live_snapshots(heartbeat=True)
            stored = await rt_a.store.load_run(run.run_id)
            assert stored is not None and stored["interrupts"] == snap["interrupts"]


async def test_a_worker_name_that_is_not_utf8_does_not_cut_every_worker_off(
    pair: tuple[Runtime, Control, RedisControl], redis_url: str, prefix: str
) -> None:
    """A member of the worker set that is no UTF-8 text (written by hand or by something
    else sharing the prefix) made every read of the set fail: no other worker's run was
    listed (a Redis outage was logged) and every cross-worker command failed with
    ``ControlPlaneUnavailable``. Such a member is skipped."""
    import redis.asyncio as aioredis

    rt_a, control, rc_b = pair
    handle = await rt_a.start(slow_agent_for_listing(), "work", tenant_id="acme")
    await eventually(
        lambda: control.list_runs(tenant_id="acme"),
        lambda runs: [r["run_id"] for r in runs] == [handle.run_id],
    )
    client = aioredis.from_url(redis_url)
    try:
        seconds, micros = await client.time()
        await client.zadd(Keys(prefix).workers, {b"\xff\xfe": seconds + micros / 1_000_000})
        runs = await control.list_runs(tenant_id="acme")
        assert [r["run_id"] for r in runs] == [handle.run_id]
        receipt = await control.submit(command(handle.run_id, "pause"))
        assert receipt.status == "accepted" and rc_b.counters.sent == 1
        assert rc_b.connected and rc_b.counters.malformed >= 1
    finally:
        await client.aclose()


async def test_a_command_too_large_for_the_wire_is_refused_before_it_is_sent(
    pair: tuple[Runtime, Control, RedisControl], redis_url: str, prefix: str
) -> None:
    """A command of many megabytes for another worker's run was appended to its stream
    whole (200 MB took the owner ~8 s to read, its other commands waiting behind it) only
    to be rejected there by its payload policy. The sender now refuses it with
    ``InvalidCommandError`` naming the limit, and sends nothing; an entry that large written
    by hand is answered ``rejected`` without being parsed, and the reader goes on."""
    import redis.asyncio as aioredis

    rt_a, control, rc_b = pair
    handle = await rt_a.start(slow_agent(4000, 0.02), "work", tenant_id="acme")
    await eventually(
        lambda: control.list_runs(tenant_id="acme"),
        lambda runs: any(r["run_id"] == handle.run_id for r in runs),
    )
    huge = command(handle.run_id, "add_instruction", {"text": "x" * (MAX_COMMAND_BYTES + 1)})
    with pytest.raises(InvalidCommandError, match=r"too large to send to another process"):
        await rc_b.submit(huge)
    assert rc_b.counters.sent == 0

    keys = Keys(prefix)
    client = aioredis.from_url(redis_url)
    try:
        assert await client.xlen(keys.commands("a")) == 0
        fields = {
            "v": "1",
            "request_id": "r-huge",
            "reply_to": "tester",
            "to": "a",
            "command": huge.model_dump_json(),
        }
        await client.xadd(keys.commands("a"), fields)  # type: ignore[arg-type]

        async def replies() -> dict[str, dict[str, Any]]:
            entries = await client.xrange(keys.replies("tester"))
            return {f[b"request_id"].decode(): json.loads(f[b"receipt"]) for _, f in entries}

        answers = await eventually(replies, lambda r: "r-huge" in r)
        assert answers["r-huge"]["status"] == "rejected"
        assert "too large" in answers["r-huge"]["reason"]
    finally:
        await client.aclose()
    pause = await control.submit(command(handle.run_id, "pause"))
    assert pause.status == "accepted"
    await handle.cancel()


async def test_the_api_answers_a_command_too_large_for_the_wire_422(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    """Through the operator API, that refusal is a 422 naming the limit, not a 500."""
    import httpx

    from tinyagents.server import BASE, create_app

    rt_a, control, _ = pair
    handle = await rt_a.start(slow_agent(4000, 0.02), "work", tenant_id="acme")
    await eventually(
        lambda: control.list_runs(tenant_id="acme"),
        lambda runs: any(r["run_id"] == handle.run_id for r in runs),
    )
    app = create_app(control, auth=None, console=False)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        body = {"kind": "add_instruction", "payload": {"text": "x" * (MAX_COMMAND_BYTES + 1)}}
        response = await http.post(f"{BASE}/runs/{handle.run_id}/commands", json=body)
    assert response.status_code == 422, response.text
    assert "too large to send to another process" in response.text
    await handle.cancel()


async def test_a_command_whose_owner_lost_its_log_connections_is_accepted_not_refused(
    redis_url: str, prefix: str
) -> None:
    """The owner's PostgreSQL connections were ended while it logged a command sent over
    Redis (a failover, ``pg_terminate_backend``): the sender was answered ``rejected`` "the
    owner could not take it", final, for a failure the next connection heals. The owner
    submits it again (twice at most, after a pause in which the pool learns of its other
    ended connections), and it is accepted and applied."""
    from services import drop_pg_schemas, pg_schema, postgres_dsn

    dsn = postgres_dsn()
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={pg_schema()}"
    kw: Any = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2, "backoff_s": (0.05, 0.2)}
    try:
        async with Runtime(store=url) as rt_a, Runtime() as rt_b:
            async with RedisControl(rt_a, redis_url, worker_id="a", **kw):
                async with RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b:
                    handle = await rt_a.start(slow_agent(4000, 0.02), "work", tenant_id="acme")
                    await eventually(
                        lambda: rc_b.list_runs("acme"),
                        lambda runs: any(r["run_id"] == handle.run_id for r in runs),
                    )
                    store: Any = rt_a.store
                    # a failover ends every pooled connection: the next statements on two
                    # of them fail before the pool has learnt of it
                    store._pool = _EndedOnce(store._pool, "INSERT INTO steering_log", 2)
                    receipt = await rc_b.submit(command(handle.run_id, "pause"))
                    assert store._pool.times == 0
                    assert receipt.status == "accepted", receipt.reason
                    await eventually(
                        lambda: asyncio.sleep(0, handle.status), lambda s: s is RunStatus.PAUSED
                    )
                    await handle.cancel()
    finally:
        await drop_pg_schemas()


class _EndedOnce:
    """A real asyncpg pool whose next ``times`` statements holding ``marker`` fail, unrun, as
    on connections the server ended."""

    def __init__(self, pool: Any, marker: str, times: int) -> None:
        self.pool, self.marker, self.times = pool, marker, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)

    async def acquire(self, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - asyncpg's
        return _EndedOnceConnection(self, await self.pool.acquire(timeout=timeout))

    async def release(self, conn: Any) -> None:
        await self.pool.release(conn.conn)


class _EndedOnceConnection:
    """A connection of ``_EndedOnce``: its statements outside a transaction may fail so."""

    def __init__(self, pool: _EndedOnce, conn: Any) -> None:
        self.pool, self.conn = pool, conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    async def fetch(self, sql: str, *args: Any) -> Any:
        pool = self.pool
        if pool.times and pool.marker in sql and not self.conn.is_in_transaction():
            pool.times -= 1
            raise ConnectionResetError("connection was closed in the middle of operation")
        return await self.conn.fetch(sql, *args)


async def test_a_worker_that_sent_commands_stops_without_reporting_a_redis_outage(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Stopping a worker whose reply reader was waiting on Redis logged "Redis control
    (worker b): ConnectionError: Connection closed by server.; retrying with backoff":
    redis-py turns a cancel that lands in a blocking read into a ``ConnectionError``, which
    the job took for an outage, and slept its backoff until it was cancelled again. A job
    being stopped stops."""
    caplog.set_level("WARNING", logger="tinyagents.distributed")
    kw: Any = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2, "backoff_s": (0.05, 0.2)}
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with RedisControl(rt_a, redis_url, worker_id="a", **kw):
            rc_b = RedisControl(rt_b, redis_url, worker_id="b", **kw)
            async with rc_b:
                handle = await rt_a.start(slow_agent(4000, 0.02), "work", tenant_id="acme")
                await eventually(
                    lambda: rc_b.list_runs("acme"),
                    lambda runs: any(r["run_id"] == handle.run_id for r in runs),
                )
                for _ in range(3):
                    receipt = await rc_b.submit(command(handle.run_id, "add_instruction"))
                    assert receipt.status == "accepted"
            await handle.cancel()
    assert rc_b.counters.redis_errors == 0
    outages = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert outages == []


async def test_another_tenants_run_on_any_worker_is_answered_as_an_unknown_run_is(
    pair: tuple[Runtime, Control, RedisControl],
) -> None:
    """An outsider's command for a run of another tenant got the receipt of an unknown run
    but for its ``policy_id``: ``redis`` when the run was on another worker (the sender's
    control plane refused it), ``router`` for an unknown run or one on the sender's worker
    (its runtime refused it), so the receipt told which run ids exist elsewhere. Every
    'not found' now reads alike, whichever side answers it."""
    rt_a, control, rc_b = pair
    there = await rt_a.start(slow_agent_for_listing(), "work", tenant_id="acme")
    here = await control.runtime.start(slow_agent_for_listing(), "work", tenant_id="acme")
    await eventually(lambda: rc_b.get_run(there.run_id), lambda s: s is not None)
    outsider = SteeringActor.human("eve", tenant_id="globex", scopes=["agent:control"])

    def seen(receipt: Any, run_id: str) -> dict[str, Any]:
        assert receipt.reason == f"not found: run {run_id}", receipt
        return dict(receipt.model_dump(exclude={"correlation_id", "reason"}))

    answers = []
    for run_id in (there.run_id, here.run_id, "r-nowhere"):
        for submit in (control.submit, rc_b.submit):
            answers.append(seen(await submit(command(run_id, "pause", actor=outsider)), run_id))
    assert all(a == answers[-1] for a in answers), answers


async def test_a_redis_emptied_mid_command_answers_every_sender(
    private_redis: RedisServer, prefix: str
) -> None:
    """Redis loses everything (FLUSHALL, a restart without persistence) while worker a holds a
    command from b in a slow policy: a's receipt still reaches b (its reply stream is made
    again), and the control plane works again (streams, groups, listing)."""
    import redis.asyncio as aioredis

    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    kw["backoff_s"] = (0.05, 0.2)
    client = aioredis.from_url(private_redis.url)
    try:
        async with Runtime() as rt_a, Runtime() as rt_b:
            async with (
                RedisControl(rt_a, private_redis.url, worker_id="a", **kw),
                # a receipt lost with Redis's data is never answered: 60 s is a guard against
                # that hang (2 s had to hold the held command's policy wait, FLUSHALL and the
                # reconnect's backoff too, which a loaded machine could run past)
                RedisControl(
                    rt_b, private_redis.url, worker_id="b", receipt_timeout_s=60, **kw
                ) as rc_b,
            ):
                handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")
                gate = Gate()
                handle.policies.append(gate)
                await eventually(lambda: rc_b.get_run(handle.run_id), lambda s: s is not None)
                held_cmd = command(handle.run_id, "add_instruction", {"text": "held"})
                held = asyncio.create_task(rc_b.submit(held_cmd))
                try:
                    await eventually(lambda: asyncio.sleep(0, gate.seen), bool)
                    await client.flushall()
                finally:
                    gate.open.set()
                assert (await held).status == "accepted"

                resumed = await eventually(
                    lambda: rc_b.submit(command(handle.run_id, "add_instruction")),
                    lambda r: r.status == "accepted",
                )
                assert resumed.run_id == handle.run_id
                await handle.cancel()
                await handle.result()
    finally:
        await client.aclose()


@pytest.fixture
async def slow_owner(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Runtime, RedisControl, Runtime, RedisControl, asyncio.Event]]:
    """Worker a, whose command reader holds every entry until the gate (last) is set, and
    worker b, whose receipt timeout is short (its thread command's hand-off to a runs out)."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    gate = asyncio.Event()
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", backoff_s=(0.05, 0.2), **kw) as rc_a,
            RedisControl(
                rt_b, redis_url, worker_id="b", backoff_s=(0.05, 0.2), receipt_timeout_s=0.3, **kw
            ) as rc_b,
        ):
            answer = rc_a.reader._answer

            async def held(parsed: Any, again: bool = False) -> Any:
                await gate.wait()
                return await answer(parsed, again)

            monkeypatch.setattr(rc_a.reader, "_answer", held)
            try:
                yield rt_a, rc_a, rt_b, rc_b, gate
            finally:
                gate.set()


def timed_out(rc: RedisControl, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set once a send of ``rc``'s runs out of time waiting for its receipt."""
    event = asyncio.Event()
    send = rc._send

    async def noted(*args: Any, **kwargs: Any) -> Any:
        try:
            return await send(*args, **kwargs)
        except ReceiptTimeout:
            event.set()
            raise

    monkeypatch.setattr(rc, "_send", noted)
    return event


async def test_a_handed_thread_command_its_owner_answers_not_found_late_waits_here_again(
    slow_owner: tuple[Runtime, RedisControl, Runtime, RedisControl, asyncio.Event],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """b hands its deferred thread command to the thread's run on a; a answers only after
    b's receipt timeout, and "not found" (the run ended meanwhile). b took the missing
    receipt for "taken" and dropped the command: neither applied nor waiting, and no
    terminal event anywhere. It now stays b's until a definite answer comes, then waits
    again, and the thread's next run takes it (one terminal event)."""
    rt_a, rc_a, rt_b, rc_b, gate = slow_owner
    late = timed_out(rc_b, monkeypatch)
    cancel = thread_cancel("t-lost")
    assert (await rc_b.submit(cancel)).status == "deferred"
    theirs = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-lost")
    async with asyncio.timeout(60):
        await late.wait()  # b handed it to a, and has no receipt yet
    await theirs.cancel()  # the run on a ends before a reads the command
    await theirs.result()
    gate.set()
    await eventually(lambda: asyncio.sleep(0, rc_a.counters.answered), lambda n: n >= 1)
    await eventually(
        lambda: asyncio.sleep(0, rt_b.router.waiting_for_threads()),
        lambda waiting: [c.correlation_id for c, _ in waiting] == [cancel.correlation_id],
    )
    mine = await rt_b.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-lost")
    async with asyncio.timeout(60):
        assert (await mine.result()).status is RunStatus.CANCELLED
    ends = [
        e.type
        for e in rt_b.steering_history(mine.run_id)
        if e.correlation_id == cancel.correlation_id and e.type != "steering.requested"
    ]
    assert ends[-1] == "steering.applied" and ends.count("steering.applied") == 1, ends
    history = rt_a.steering_history(theirs.run_id)
    assert not [e for e in history if e.correlation_id == cancel.correlation_id]


async def test_a_handed_thread_command_its_owner_takes_late_is_not_taken_here_meanwhile(
    slow_owner: tuple[Runtime, RedisControl, Runtime, RedisControl, asyncio.Event],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While b waits for a's late receipt, the command is neither dropped nor b's to give to a
    run of the thread starting on b: a takes it once its answer comes, and b's run never
    sees it (applied once, on a)."""
    rt_a, rc_a, rt_b, rc_b, gate = slow_owner
    late = timed_out(rc_b, monkeypatch)
    cancel = thread_cancel("t-late")
    assert (await rc_b.submit(cancel)).status == "deferred"
    theirs = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-late")
    async with asyncio.timeout(60):
        await late.wait()
    mine = await rt_b.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-late")
    assert rt_b.router.waiting_for_threads() == []
    gate.set()
    async with asyncio.timeout(60):
        assert (await theirs.result()).status is RunStatus.CANCELLED
    await eventually(lambda: asyncio.sleep(0, rt_b.router.open_commands()), ok=not_)
    assert mine.status is RunStatus.RUNNING
    history = rt_b.steering_history(mine.run_id)
    assert not [e for e in history if e.correlation_id == cancel.correlation_id]
    assert (await rc_b.submit(cancel)).status == "duplicate"
    assert rc_a.counters.received == 1  # asked again: the same request, one entry
    await mine.cancel()
    await mine.result()


async def test_a_handed_thread_command_whose_owner_is_gone_unanswered_waits_here_again(
    slow_owner: tuple[Runtime, RedisControl, Runtime, RedisControl, asyncio.Event],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """b waits for a's late receipt; a's command stream disappears with the entry unanswered
    (a died, and its stream expired): nobody will take the command, which waits on b again
    and goes to the thread's next run there."""
    _, rc_a, rt_b, rc_b, _ = slow_owner
    rt_a = rc_a.runtime
    late = timed_out(rc_b, monkeypatch)
    cancel = thread_cancel("t-gone")
    assert (await rc_b.submit(cancel)).status == "deferred"
    theirs = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-gone")
    async with asyncio.timeout(60):
        await late.wait()
    await rc_a._stop_jobs()  # a is gone: it reads and answers nothing more
    assert rc_b._redis is not None
    await rc_b._redis.delete(rc_b.keys.commands("a"))
    await eventually(
        lambda: asyncio.sleep(0, rt_b.router.waiting_for_threads()),
        lambda waiting: [c.correlation_id for c, _ in waiting] == [cancel.correlation_id],
    )
    await theirs.cancel()
    await theirs.result()
    mine = await rt_b.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-gone")
    async with asyncio.timeout(60):
        assert (await mine.result()).status is RunStatus.CANCELLED


async def test_closing_while_a_handed_thread_command_is_in_doubt_waits_for_its_answer(
    slow_owner: tuple[Runtime, RedisControl, Runtime, RedisControl, asyncio.Event],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """b closes its ``RedisControl`` while its thread command handed to a has no receipt yet:
    the close gave it back to b's router at once, where b's runtime then failed it ("runtime
    closed before delivery"; a durable log kept it for b's next runtime to apply), while a
    took it and applied it too. The close now waits (``receipt_timeout_s``) for the answer
    still to come: a takes it, and it leaves b's books."""
    rt_a, _, rt_b, rc_b, gate = slow_owner
    late = timed_out(rc_b, monkeypatch)
    cancel = thread_cancel("t-close")
    assert (await rc_b.submit(cancel)).status == "deferred"
    theirs = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-close")
    async with asyncio.timeout(60):
        await late.wait()  # b handed it to a, and has no receipt yet
    # the close's wait, not the machine's speed, decides (0.3 s in the fixture)
    monkeypatch.setattr(rc_b, "receipt_timeout_s", 60.0)
    closing = asyncio.create_task(rc_b.aclose())
    await asyncio.sleep(0)  # the close begins before a answers
    gate.set()
    async with asyncio.timeout(60):
        await closing
        assert (await theirs.result()).status is RunStatus.CANCELLED
    assert rt_b.router.waiting_for_threads() == []
    assert rt_b.router.open_commands() == []


async def test_a_handed_thread_command_taken_back_is_not_applied_by_its_slow_owner(
    slow_owner: tuple[Runtime, RedisControl, Runtime, RedisControl, asyncio.Event],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """b's hand-off of a thread command to a has no receipt, and a's command stream is found
    gone at two asks in a row: b takes the command back (it waits on b again). a had read
    the entry before and was still working on it (its reader stalled, the stream deleted
    under it): it then applied the command too, and so did b's next run on the thread. a
    now refuses a request its sender withdrew (the withdrawal and a's taking of it are one
    key set once), so the command is applied once, on b."""
    _, rc_a, rt_b, rc_b, gate = slow_owner
    rt_a = rc_a.runtime
    late = timed_out(rc_b, monkeypatch)
    cancel = thread_cancel("t-slow")
    assert (await rc_b.submit(cancel)).status == "deferred"
    theirs = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-slow")
    async with asyncio.timeout(60):
        await late.wait()
    await eventually(lambda: asyncio.sleep(0, rc_a.counters.received), lambda n: n == 1)
    await rc_a._stop_jobs()  # a's reader stalls; its answer to the entry read is under way
    assert rc_b._redis is not None
    await rc_b._redis.delete(rc_b.keys.commands("a"))
    await eventually(
        lambda: asyncio.sleep(0, rt_b.router.waiting_for_threads()),
        lambda waiting: [c.correlation_id for c, _ in waiting] == [cancel.correlation_id],
    )
    gate.set()  # a goes on with the entry it read
    await eventually(lambda: asyncio.sleep(0, rc_a.counters.answered), lambda n: n >= 1)
    assert theirs.status is RunStatus.RUNNING  # a did not apply it
    await theirs.cancel()
    await theirs.result()
    mine = await rt_b.start(slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-slow")
    async with asyncio.timeout(60):
        assert (await mine.result()).status is RunStatus.CANCELLED
    history = rt_a.steering_history(theirs.run_id)
    assert not [e for e in history if e.correlation_id == cancel.correlation_id]


async def test_a_handed_thread_command_its_owner_took_is_not_taken_back_when_its_stream_goes(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a took b's handed thread command (its submit under way) when its stream went (deleted
    under it): b finds the stream gone at two asks, but a's taking of the request is
    recorded, so b waits on for a's answer instead of taking it back, and a applies it
    once."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    gate, submitting, kept = asyncio.Event(), asyncio.Event(), asyncio.Event()
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", backoff_s=(0.05, 0.2), **kw) as rc_a,
            RedisControl(
                rt_b, redis_url, worker_id="b", backoff_s=(0.05, 0.2), receipt_timeout_s=0.3, **kw
            ) as rc_b,
        ):
            submit = rc_a.reader._submit

            async def held(request_id: str, cmd: SteeringCommand) -> Any:
                submitting.set()
                await gate.wait()
                return await submit(request_id, cmd)

            monkeypatch.setattr(rc_a.reader, "_submit", held)
            withdraw = rc_b._withdraw

            async def noted(owner: str, request_id: str) -> bool:
                withdrawn = await withdraw(owner, request_id)
                if not withdrawn:
                    kept.set()
                return withdrawn

            monkeypatch.setattr(rc_b, "_withdraw", noted)
            try:
                cancel = thread_cancel("t-taken")
                assert (await rc_b.submit(cancel)).status == "deferred"
                theirs = await rt_a.start(
                    slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-taken"
                )
                async with asyncio.timeout(60):
                    await submitting.wait()
                await rc_a._stop_jobs()
                assert rc_b._redis is not None
                await rc_b._redis.delete(rc_b.keys.commands("a"))
                async with asyncio.timeout(60):
                    await kept.wait()  # b found it gone twice, and a's taking of it
                assert rt_b.router.waiting_for_threads() == []
                gate.set()
                async with asyncio.timeout(60):
                    assert (await theirs.result()).status is RunStatus.CANCELLED
                await eventually(lambda: asyncio.sleep(0, rc_b._in_doubt), ok=not_)
                assert rt_b.router.waiting_for_threads() == []
                assert rt_b.router.open_commands() == []
            finally:
                gate.set()


async def test_a_handed_thread_command_is_not_taken_back_when_redis_lost_its_data(
    private_redis: RedisServer, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a took b's handed thread command (its submit under way) and Redis restarted empty
    (no persistence, as docs/deploy.md's compose file runs it): the request's claim went with
    it, and a's command stream stayed gone while a's reader was in its backoff. b found the
    stream gone at two asks, withdrew the request (nothing said a took it) and took it back,
    and a applied it too. b now sees that the Redis answering is not the one it sent the
    command to, and waits (``backoff_s[1] + ttl_s``) for a to come back before taking it
    back: a's stream is made again, b's next ask reaches a, and a's answer comes."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    gate, submitting = asyncio.Event(), asyncio.Event()
    url = private_redis.url
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, url, worker_id="a", backoff_s=(3.0, 3.0), **kw) as rc_a,
            RedisControl(
                rt_b, url, worker_id="b", backoff_s=(0.05, 0.2), receipt_timeout_s=0.3, **kw
            ) as rc_b,
        ):
            submit = rc_a.reader._submit

            async def held(request_id: str, cmd: SteeringCommand) -> Any:
                submitting.set()
                await gate.wait()
                return await submit(request_id, cmd)

            monkeypatch.setattr(rc_a.reader, "_submit", held)
            restarted, gone = False, [0]
            append = rc_b._append

            async def counted(*args: Any) -> Any:
                added = await append(*args)
                if restarted and added is None:
                    gone[0] += 1
                return added

            monkeypatch.setattr(rc_b, "_append", counted)
            try:
                cancel = thread_cancel("t-lost-data")
                assert (await rc_b.submit(cancel)).status == "deferred"
                theirs = await rt_a.start(
                    slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-lost-data"
                )
                async with asyncio.timeout(60):
                    await submitting.wait()  # a took it
                monkeypatch.setattr(rc_b, "ttl_s", 60.0)  # b's wait outlasts a's backoff
                await private_redis.stop()
                await private_redis.start()  # empty
                restarted = True
                # b asked three times with a's stream gone (a's reader is in its backoff)
                await eventually(lambda: asyncio.sleep(0, gone[0]), lambda n: n >= 3)
                assert rt_b.router.waiting_for_threads() == []
                gate.set()
                async with asyncio.timeout(60):
                    assert (await theirs.result()).status is RunStatus.CANCELLED
                await eventually(lambda: asyncio.sleep(0, rc_b._in_doubt), ok=not_)
                assert rt_b.router.waiting_for_threads() == []
                assert rt_b.router.open_commands() == []
            finally:
                gate.set()


async def test_receipts_reach_a_sender_after_redis_came_back_empty_with_its_clock_behind(
    private_redis: RedisServer, prefix: str
) -> None:
    """b read its reply stream from the id of the last receipt it read. Redis came back empty
    on a clock behind the old one (a failover to a machine whose clock is behind, a clock
    set back): the stream made again took ids below that one, and b read none of its
    receipts (every command it sent timed out) until the new clock caught up. After an
    outage b now reads the stream from its start when it holds nothing past that id."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    kw["backoff_s"] = (0.05, 0.2)

    async def listed_on(rc: RedisControl, run_id: str) -> Any:
        try:
            return await rc.get_run(run_id)
        except Exception:  # Redis is still coming back
            return None

    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, private_redis.url, worker_id="a", **kw),
            RedisControl(
                rt_b, private_redis.url, worker_id="b", receipt_timeout_s=60, **kw
            ) as rc_b,
        ):
            handle = await rt_a.start(slow_agent(400, 0.02), "work", tenant_id="acme")
            await eventually(lambda: listed_on(rc_b, handle.run_id), lambda s: s is not None)
            first = await rc_b.submit(command(handle.run_id, "add_instruction"))
            assert first.status == "accepted"
            # the receipts b read so far came from a server whose clock was an hour ahead
            after = rc_b._reply_after
            ms, _, _ = (after.decode() if isinstance(after, bytes) else after).partition("-")
            rc_b._reply_after = f"{int(ms) + 3_600_000}-0"
            await private_redis.stop()
            await private_redis.start()  # empty
            await eventually(lambda: listed_on(rc_b, handle.run_id), lambda s: s is not None)
            again = await rc_b.submit(command(handle.run_id, "add_instruction"))
            assert again.status == "accepted"
            await handle.cancel()
            await handle.result()


async def test_a_thread_command_sent_while_an_earlier_one_is_handed_over_comes_after_it(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """b's thread job is handing a's run the command deferred on b for the thread (its append
    under way) when the operator sends the thread another command on b: that one no longer
    waited on b (the first had left b's books as its hand-off began), so it was sent at once
    and could reach a's stream, and a's run, first. It now waits for the hand-off under way:
    a takes the thread's commands in the order they were sent."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", backoff_s=(0.05, 0.2), **kw),
            RedisControl(rt_b, redis_url, worker_id="b", backoff_s=(0.05, 0.2), **kw) as rc_b,
        ):
            gate, appending = asyncio.Event(), asyncio.Event()
            append = rc_b._append

            async def held(owner: str, request_id: str, fields: dict[str, str]) -> Any:
                if json.loads(fields["command"])["payload"].get("text") == "first":
                    appending.set()
                    await gate.wait()
                return await append(owner, request_id, fields)

            monkeypatch.setattr(rc_b, "_append", held)

            def instruction(text: str) -> SteeringCommand:
                return SteeringCommand(
                    target=SteeringTarget.thread("t-order"),
                    actor=OPERATOR,
                    kind=SteeringKind.ADD_INSTRUCTION,
                    payload={"text": text},
                )

            first, second = instruction("first"), instruction("second")
            try:
                assert (await rc_b.submit(first)).status == "deferred"
                theirs = await rt_a.start(
                    slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-order"
                )
                async with asyncio.timeout(60):
                    await appending.wait()  # b's thread job is handing the first one over
                sending = asyncio.create_task(rc_b.submit(second))
                await eventually(
                    lambda: asyncio.sleep(0, rt_b.router.waiting_for_threads()), ok=not_
                )
                await asyncio.sleep(0.2)  # the second, unheld, would be in a's stream by now
                gate.set()
                async with asyncio.timeout(60):
                    assert (await sending).status == "accepted"
            finally:
                gate.set()
            ids = {first.correlation_id: "first", second.correlation_id: "second"}
            taken = [
                ids[e.correlation_id]
                for e in rt_a.steering_history(theirs.run_id)
                if e.type == "steering.accepted" and e.correlation_id in ids
            ]
            assert taken == ["first", "second"]
            await theirs.cancel()
            await theirs.result()


@pytest.fixture
async def info_denied_url(redis_url: str, prefix: str) -> AsyncIterator[str]:
    """The URL of a Redis user of its own whose ACL denies ``INFO`` (as managed Redis services
    often do), deleted after the test."""
    from urllib.parse import urlsplit

    from redis.asyncio import Redis

    user, password = f"{prefix}-noinfo", "pw-" + prefix
    admin = Redis.from_url(redis_url)
    await admin.execute_command(
        "ACL", "SETUSER", user, "reset", "on", f">{password}", "~*", "&*", "+@all", "-info"
    )
    parts = urlsplit(redis_url)
    netloc = f"{user}:{password}@{parts.hostname}:{parts.port or 6379}"
    try:
        yield parts._replace(netloc=netloc).geturl()
    finally:
        await admin.execute_command("ACL", "DELUSER", user)
        await admin.aclose()


async def test_a_handed_thread_command_whose_owner_is_gone_comes_back_without_info(
    redis_url: str,
    info_denied_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """b's Redis user may not run ``INFO``, whose ``run_id`` told b whether the Redis it asks
    is the one it sent a handed thread command to: b took every ask for one after a restart,
    and waited ``backoff_s[1] + ttl_s`` (40 s by default) before taking back a command whose
    owner was gone unanswered. b now tells a restart by a marker key of the server's
    lifetime, logs once that ``INFO`` is denied, and takes the command back at once."""
    caplog.set_level("INFO", logger="tinyagents.distributed")
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    gate = asyncio.Event()
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", backoff_s=(0.05, 0.2), **kw) as rc_a,
            RedisControl(rt_b, info_denied_url, worker_id="b", backoff_s=(0.05, 0.2), **kw) as rc_b,
        ):
            answer = rc_a.reader._answer

            async def held(parsed: Any, again: bool = False) -> Any:
                await gate.wait()
                return await answer(parsed, again)

            monkeypatch.setattr(rc_a.reader, "_answer", held)
            monkeypatch.setattr(rc_b, "receipt_timeout_s", 0.3)
            late = timed_out(rc_b, monkeypatch)
            try:
                cancel = thread_cancel("t-noinfo")
                assert (await rc_b.submit(cancel)).status == "deferred"
                theirs = await rt_a.start(
                    slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-noinfo"
                )
                async with asyncio.timeout(60):
                    await late.wait()
                # the wait after a restart would outlast the test's deadline
                monkeypatch.setattr(rc_b, "ttl_s", 600.0)
                await rc_a._stop_jobs()  # a is gone: it reads and answers nothing more
                assert rc_b._redis is not None
                await rc_b._redis.delete(rc_b.keys.commands("a"))
                await eventually(
                    lambda: asyncio.sleep(0, rt_b.router.waiting_for_threads()),
                    lambda waiting: (
                        [c.correlation_id for c, _ in waiting] == [cancel.correlation_id]
                    ),
                )
            finally:
                gate.set()
            await theirs.cancel()
            await theirs.result()
    assert not [r for r in caplog.records if "Redis restarted" in r.getMessage()]
    denied = [r for r in caplog.records if "denies INFO" in r.getMessage()]
    assert len(denied) == 1, [r.getMessage() for r in denied]


async def test_without_info_a_redis_that_lost_its_data_answers_as_another_server(
    info_denied_url: str, prefix: str
) -> None:
    """Where ``INFO`` is denied, the server's marker key tells the Redis a handed command was
    sent to from one that came back empty (its data lost: here, the marker deleted): the
    same server answers the same id, the emptied one another."""
    async with Runtime() as rt, RedisControl(rt, info_denied_url, prefix=prefix) as rc:
        first = await rc._server_id()
        assert await rc._server_id() == first
        assert rc._redis is not None
        await rc._redis.delete(rc.keys.server)  # what a restart without persistence does
        assert await rc._server_id() != first


async def test_the_claim_of_a_handed_thread_command_lasts_while_its_sender_may_withdraw_it(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a took b's handed thread command (claimed ``taken``) and has not answered: the claim
    expired an hour after a set it, while b, still waiting, could withdraw the request once
    a's stream was gone (a died after taking it: its stream expires an hour after its last
    heartbeat, later than the claim), and the command was applied on both workers. b now
    renews the claim at every ask, so it lasts while b may withdraw; once answered, it
    expires (``COMMANDS_TTL_S`` after the last ask) and Redis keeps no claim for ever."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    gate, submitting = asyncio.Event(), asyncio.Event()
    async with Runtime() as rt_a, Runtime() as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", backoff_s=(0.05, 0.2), **kw) as rc_a,
            RedisControl(
                rt_b, redis_url, worker_id="b", backoff_s=(0.05, 0.2), receipt_timeout_s=0.3, **kw
            ) as rc_b,
        ):
            submit = rc_a.reader._submit

            async def held(request_id: str, cmd: SteeringCommand) -> Any:
                submitting.set()
                await gate.wait()
                return await submit(request_id, cmd)

            monkeypatch.setattr(rc_a.reader, "_submit", held)
            try:
                cancel = thread_cancel("t-claim")
                assert (await rc_b.submit(cancel)).status == "deferred"
                theirs = await rt_a.start(
                    slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-claim"
                )
                async with asyncio.timeout(60):
                    await submitting.wait()  # a claimed it, and holds it
                assert rc_b._redis is not None
                redis = rc_b._redis
                claims = await redis.keys(rc_b.keys.claim("*"))
                assert len(claims) == 1
                assert await redis.get(claims[0]) == b"taken"
                await redis.pexpire(claims[0], 2_000)  # as a's claim stands before it expires
                await eventually(lambda: redis.pttl(claims[0]), lambda ms: ms > 2_000)  # by b
                gate.set()
                async with asyncio.timeout(60):
                    assert (await theirs.result()).status is RunStatus.CANCELLED
                await eventually(lambda: asyncio.sleep(0, rc_b._in_doubt), ok=not_)
                assert 0 < await redis.ttl(claims[0]) <= COMMANDS_TTL_S  # it expires
            finally:
                gate.set()


class SkewedClock:
    """A worker's wall clock ``skew`` ahead of the others' (``_clock.Clock``)."""

    def __init__(self, skew: timedelta) -> None:
        self.skew = skew

    def now(self) -> datetime:
        return datetime.now(UTC) + self.skew

    def monotonic(self) -> float:
        return time.monotonic()


async def test_the_newest_run_of_a_thread_is_told_by_redis_clock_not_a_workers(
    redis_url: str, prefix: str
) -> None:
    """Worker a's clock is an hour ahead. Its run on the thread started first, b's a moment
    later: c took a's for the thread's newest (its ``created_at``, by a's clock, is an hour
    later) and sent the thread's command there. The workers now list when each run started by
    Redis's clock, and c sends it to b's run, the newest."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    kw["backoff_s"] = (0.05, 0.2)
    ahead = SkewedClock(timedelta(hours=1))
    async with Runtime() as rt_b, Runtime() as rt_c:
        with use_clock(ahead):
            rt_a = Runtime()
            await rt_a.__aenter__()
            rc_a = RedisControl(rt_a, redis_url, worker_id="a", **kw)
            await rc_a.start()
        try:
            async with (
                RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b,
                RedisControl(rt_c, redis_url, worker_id="c", **kw) as rc_c,
            ):
                with use_clock(ahead):
                    first = await rt_a.start(
                        slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-skew"
                    )
                listed = await eventually(
                    lambda: rc_c.get_run(first.run_id), lambda s: s is not None
                )
                # b's run starts clearly later by Redis's clock (a measures its clock's
                # difference to within half a round trip)
                assert rc_c._redis is not None
                later = listed[STARTED] + 0.5
                await eventually(lambda: redis_now(rc_c._redis), lambda now: now > later)
                second = await rt_b.start(
                    slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-skew"
                )
                await eventually(lambda: rc_c.get_run(second.run_id), lambda s: s is not None)
                steer = SteeringCommand(
                    target=SteeringTarget.thread("t-skew"),
                    actor=OPERATOR,
                    kind=SteeringKind.ADD_INSTRUCTION,
                    payload={"text": "focus"},
                )
                receipt = await rc_c.submit(steer)
                assert receipt.status == "accepted" and receipt.run_id == second.run_id, receipt
                for handle in (first, second):
                    await handle.cancel()
                    await handle.result()
                assert rc_b.counters.received == 1
        finally:
            await rc_a.aclose()
            await rt_a.__aexit__(None, None, None)


@pytest.fixture(params=["sqlite", "postgresql"])
async def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A durable steering log: a SQLite file, or a PostgreSQL schema of the test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'b.db'}"
        return
    from services import drop_pg_schemas, pg_schema, postgres_dsn

    dsn = postgres_dsn()
    yield f"{dsn}{'&' if '?' in dsn else '?'}schema={pg_schema()}"
    await drop_pg_schemas()


SCOPE = "tenant:acme"


def _durable_kw(prefix: str) -> dict[str, Any]:
    return {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2, "backoff_s": (0.05, 0.2)}


async def _logged_state(rt: Runtime, cmd: SteeringCommand) -> tuple[str, str | None] | None:
    stored = await rt.store.get_command(cmd.correlation_id, scope="tenant:acme")  # type: ignore[union-attr]
    return None if stored is None else (stored.state, stored.reason)


@pytest.mark.parametrize("restarted", [False, True], ids=["same-runtime", "after-restart"])
async def test_a_thread_command_a_durable_log_keeps_is_rejected_once_its_thread_runs_elsewhere(
    redis_url: str, prefix: str, log_url: str, restarted: bool
) -> None:
    """What docs/deploy.md says of a deferred thread command a durable steering log holds: it
    is not handed to another worker (its log's copy would be applied again by that log's
    next runtime), and it no longer waits there silently, its receipt ``deferred`` for ever,
    while the thread's run goes on on another worker: once b sees a run of the thread listed
    on worker a, b's log settles it ``rejected`` (a compare-and-set on its row), the reason
    naming a and saying to send it again. It is applied nowhere, the next runtime on b's log
    does not take it up, and the command sent again (a new id) reaches a's run. After a
    restart (the sender's runtime closed after logging it) the restored row goes the same
    way."""
    kw = _durable_kw(prefix)
    cancel = thread_cancel("t-logged")
    if restarted:
        async with Runtime(store=log_url) as first_b:
            assert (await first_b.submit(cancel)).status == "deferred"
    async with Runtime() as rt_a, Runtime(store=log_url) as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", **kw) as rc_a,
            RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b,
        ):
            if not restarted:
                assert (await rc_b.submit(cancel)).status == "deferred"
            theirs = await rt_a.start(
                slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-logged"
            )
            _, reason = await eventually(
                lambda: _logged_state(rt_b, cancel),
                lambda s: s is not None and s[0] == "rejected" and s[1] is not None,
            )  # type: ignore[misc]
            assert "worker 'a'" in reason and "send it again" in reason, reason  # type: ignore[operator]
            assert rt_b.router.state(cancel.correlation_id, scope="tenant:acme") == "rejected"
            assert rt_b.router.open_commands() == []
            assert rc_a.counters.received == 0
            assert theirs.status is RunStatus.RUNNING
            # sent again under a new id, it goes to the run where it is
            again = thread_cancel("t-logged")
            receipt = await rc_b.submit(again)
            assert receipt.status == "accepted" and receipt.run_id == theirs.run_id, receipt
            async with asyncio.timeout(60):
                assert (await theirs.result()).status is RunStatus.CANCELLED
    async with Runtime(store=log_url) as next_b:
        assert next_b.router.open_commands() == []
        assert await _logged_state(next_b, cancel) == ("rejected", reason)


async def test_control_with_a_store_defers_a_thread_command_no_worker_runs(
    redis_url: str, prefix: str, log_url: str
) -> None:
    """``Control`` over a worker's durable runtime and Redis (``tinyagents serve --redis
    --store``): a command for a thread with no run on any worker (nor in the store) was
    looked for in the store for the listing wait (1.1 s) and answered ``rejected`` "not
    found", where the same command sent through ``RedisControl.submit``, or in one process,
    is deferred for the thread's next run. It is now deferred here (logged ``deferred``):
    the thread's next run here takes it; and one on another worker makes the thread job
    refuse it (docs/deploy.md), as for a command sent through ``RedisControl``."""
    kw = _durable_kw(prefix)
    async with Runtime() as rt_a, Runtime(store=log_url) as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", **kw),
            RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b,
        ):
            control = Control(rt_b, redis=rc_b)
            assert control.store is rt_b.store
            here = thread_cancel("t-next-here")
            receipt = await control.submit(here)
            assert receipt.status == "deferred" and receipt.run_id is None, receipt
            assert await _logged_state(rt_b, here) == ("deferred", None)
            mine = await rt_b.start(
                slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-next-here"
            )
            async with asyncio.timeout(60):  # against a hang, not a timing assertion
                assert (await mine.result()).status is RunStatus.CANCELLED
            assert rt_b.router.state(here.correlation_id, scope="tenant:acme") == "applied"

            there = thread_cancel("t-next-there")
            assert (await control.submit(there)).status == "deferred"
            theirs = await rt_a.start(
                slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-next-there"
            )
            await eventually(
                lambda: _logged_state(rt_b, there),
                lambda s: s is not None and s[0] == "rejected",
            )
            again = thread_cancel("t-next-there")  # sent again, it reaches a's run
            receipt = await control.submit(again)
            assert receipt.status == "accepted" and receipt.run_id == theirs.run_id, receipt
            async with asyncio.timeout(60):
                assert (await theirs.result()).status is RunStatus.CANCELLED
            control.close()


async def test_a_logged_thread_command_another_runtime_took_from_the_log_is_not_rejected(
    redis_url: str, prefix: str, log_url: str
) -> None:
    """The rejection is a compare-and-set on the logged row, never a plain write: a runtime
    sharing b's log took the command (deferred -> accepted, for a run of its own) before
    b's thread job saw a's run listed. b drops its copy with no event, and the row stays
    as that runtime left it; a plain write would have ended it ``rejected`` under a run
    that holds it accepted."""
    kw = _durable_kw(prefix)
    cancel = thread_cancel("t-shared")
    async with Runtime() as rt_a, Runtime(store=log_url) as rt_b:
        async with (
            RedisControl(rt_a, redis_url, worker_id="a", **kw) as rc_a,
            RedisControl(rt_b, redis_url, worker_id="b", **kw),
        ):
            assert (await rt_b.submit(cancel)).status == "deferred"
            other: Any = rt_b.store
            # the other runtime's take, through the same log (its own connection)
            async with Runtime(store=log_url) as rt_c:
                assert await rt_c.store.update_command(  # type: ignore[union-attr]
                    cancel, state="accepted", run_id="run-elsewhere", from_state="deferred"
                )
            theirs = await rt_a.start(
                slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-shared"
            )
            await eventually(
                lambda: asyncio.sleep(0, rt_b.router.open_commands()), lambda c: c == []
            )
            stored = await other.get_command(cancel.correlation_id, scope="tenant:acme")
            assert (stored.state, stored.run_id) == ("accepted", "run-elsewhere")
            assert rt_b.router.state(cancel.correlation_id, scope="tenant:acme") is None
            assert rc_a.counters.received == 0
            await theirs.cancel()
            await theirs.result()


def _thread_instruction(thread_id: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.thread(thread_id),
        actor=OPERATOR,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "focus"},
    )


async def test_a_logged_thread_command_is_taken_by_a_run_of_its_thread_on_a_worker_sharing_the_log(
    redis_url: str, prefix: str, log_url: str
) -> None:
    """Workers b and c share one durable steering log (``serve --store ... --redis``). A
    thread command deferred on b (no run of its thread anywhere), logged ``deferred``, is
    taken by the run of its thread that starts on c: c reads the log's open commands of the
    thread when the run registers and takes it by the compare-and-set ``deferred`` ->
    ``accepted``, and the run applies it. b's thread job, seeing c's run listed, leaves it
    to c (b's log holds the run's row, saved by c: c shares it), finds it taken in the log
    and drops its copy with no event. It used to end ``rejected`` on b ("send it again")
    while c's run went on without it."""
    kw = _durable_kw(prefix)
    steer = _thread_instruction("t-handed")
    async with Runtime(store=log_url) as rt_b, Runtime(store=log_url) as rt_c:
        async with (
            RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b,
            RedisControl(rt_c, redis_url, worker_id="c", **kw) as rc_c,
        ):
            assert (await rc_b.submit(steer)).status == "deferred"
            theirs = await rt_c.start(
                slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-handed"
            )
            await eventually(
                lambda: asyncio.sleep(0, rt_c.router.state(steer.correlation_id, scope=SCOPE)),
                lambda s: s == "applied",
            )
            await eventually(lambda: rc_b.get_run(theirs.run_id), lambda s: s is not None)
            await rt_c.flush()
            stored = await rt_b.store.get_command(steer.correlation_id, scope=SCOPE)  # type: ignore[union-attr]
            assert stored is not None
            assert (stored.state, stored.run_id, stored.owner) == (
                "applied",
                theirs.run_id,
                rt_c.runtime_id,
            )
            assert rc_c.counters.received == 0  # through the log, not over Redis
            # b's thread job finds it taken in the log and drops its copy, with no event
            await eventually(
                lambda: asyncio.sleep(0, rt_b.router.open_commands()), lambda c: c == []
            )
            assert rt_b.router.state(steer.correlation_id, scope=SCOPE) in (None, "applied")
            await theirs.cancel()
            await theirs.result()


async def test_a_logged_thread_command_a_sharing_workers_live_run_passed_over_is_rejected_in_time(
    redis_url: str, prefix: str, log_url: str
) -> None:
    """b logs two thread commands ``deferred`` (sent to b's runtime itself, which lists no
    run) while each thread has a live run on another worker that registered before: t-same
    on c, which shares b's log, t-other on d, an in-memory runtime. b's thread job rejects
    t-other's at once, as before (d can never take a row of b's log). t-same's waits in the
    log for ``receipt_timeout_s`` (a run of its thread registering on c meanwhile would take
    it there), then, the live run having passed it over (it registered before the command
    was logged, so it never reads it), is rejected as t-other's: it used to wait on silently
    for the thread's next run while the live run went on without it."""
    kw = {**_durable_kw(prefix), "receipt_timeout_s": 1.0}
    same, other = _thread_instruction("t-same"), _thread_instruction("t-other")
    async with (
        Runtime(store=log_url) as rt_b,
        Runtime(store=log_url) as rt_c,
        Runtime() as rt_d,
    ):
        async with (
            RedisControl(rt_b, redis_url, worker_id="b", **kw) as rc_b,
            RedisControl(rt_c, redis_url, worker_id="c", **kw),
            RedisControl(rt_d, redis_url, worker_id="d", **kw),
        ):
            first = await rt_c.start(
                slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-same"
            )
            elsewhere = await rt_d.start(
                slow_agent(400, 0.02), "work", tenant_id="acme", thread_id="t-other"
            )
            for run in (first, elsewhere):
                await eventually(lambda r=run: rc_b.get_run(r.run_id), lambda s: s is not None)
            assert (await rt_b.submit(same)).status == "deferred"
            assert (await rt_b.submit(other)).status == "deferred"
            # the round of b's thread job that saw both runs listed rejects t-other's...
            await eventually(
                lambda: _logged_state(rt_b, other), lambda s: s is not None and s[0] == "rejected"
            )
            # ...and gives t-same's the time a run of its thread on c needs to take it
            assert await _logged_state(rt_b, same) == ("deferred", None)
            # c's live run passed it over: it is rejected in time, naming c, applied nowhere
            _, reason = await eventually(
                lambda: _logged_state(rt_b, same),
                lambda s: s is not None and s[0] == "rejected" and s[1] is not None,
            )
            assert "worker 'c' started before" in reason and "send it again" in reason, reason  # type: ignore[operator]
            assert rt_c.steering_history(first.run_id) == []
            assert rt_b.router.open_commands() == []
            for run in (first, elsewhere):
                await run.cancel()
                await run.result()


async def _listed_by(rc: RedisControl, run_id: str, worker: str) -> dict[str, Any] | None:
    """``run_id``'s entry in ``worker``'s run hash, as it lists it."""
    assert rc._redis is not None
    raw = await rc._redis.hget(rc.keys.runs(worker), run_id)
    return None if raw is None else json.loads(raw)  # type: ignore[no-any-return]


async def test_a_run_resumed_on_another_worker_is_placed_by_that_workers_clock(
    redis_url: str, prefix: str
) -> None:
    """Run r-1 of thread t-resume starts on worker a and stops there; another run of the
    thread starts on a; then r-1 is started again, under its id, on worker b, whose clock is
    an hour behind. b builds the run's ``created_at`` by its own clock and stamps it with its
    own difference from Redis's clock (nothing of a's first run travels): by Redis's clock
    r-1 is the thread's newest run, and c (no run of the thread) sends the thread's command
    to b. Had b kept a's stamp (an earlier start), or placed the run by its own clock, an
    hour behind, c would send it to a's other run. a still lists its first r-1, cancelled,
    and beats more often than b: the command for r-1 went to a (the worker that beat last),
    whose runtime gave it to its own run of the thread; it goes where r-1 is live."""
    kw: dict[str, Any] = {"prefix": prefix, "heartbeat_s": 0.2, "block_s": 0.2}
    kw["backoff_s"] = (0.05, 0.2)
    behind = SkewedClock(timedelta(hours=-1))
    slow = {**kw, "heartbeat_s": 30.0, "ttl_s": 60.0}  # b beats once, at its start: a beats last
    async with Runtime() as rt_a, Runtime() as rt_c:
        with use_clock(behind):
            rt_b = Runtime()
            await rt_b.__aenter__()
            rc_b = RedisControl(rt_b, redis_url, worker_id="b", **slow)
            await rc_b.start()
        try:
            async with (
                RedisControl(rt_a, redis_url, worker_id="a", **kw) as rc_a,
                RedisControl(rt_c, redis_url, worker_id="c", **kw) as rc_c,
            ):
                assert rc_c._redis is not None
                agent = slow_agent(400, 0.02)
                first = await rt_a.start(
                    agent, "work", tenant_id="acme", thread_id="t-resume", run_id="r-1"
                )
                listed = await eventually(lambda: rc_c.get_run("r-1"), lambda s: s is not None)
                await first.cancel()
                await first.result()
                await eventually(
                    lambda: rc_c.get_run("r-1"), lambda s: s is None or s["status"] == "cancelled"
                )
                later = listed[STARTED] + 0.5  # clearly later by Redis's clock
                await eventually(lambda: redis_now(rc_c._redis), lambda now: now > later)
                other = await rt_a.start(agent, "work", tenant_id="acme", thread_id="t-resume")
                mine = await eventually(
                    lambda: rc_c.get_run(other.run_id), lambda s: s is not None and STARTED in s
                )
                later = mine[STARTED] + 0.5
                await eventually(lambda: redis_now(rc_c._redis), lambda now: now > later)
                with use_clock(behind):
                    resumed = await rt_b.start(
                        agent, "work", tenant_id="acme", thread_id="t-resume", run_id="r-1"
                    )
                again = await eventually(
                    lambda: _listed_by(rc_c, "r-1", "b"), lambda s: s is not None and STARTED in s
                )
                assert again[STARTED] > later  # b's own start, by Redis's clock
                steer = SteeringCommand(
                    target=SteeringTarget.thread("t-resume"),
                    actor=OPERATOR,
                    kind=SteeringKind.ADD_INSTRUCTION,
                    payload={"text": "focus"},
                )
                receipt = await rc_c.submit(steer)
                assert receipt.status == "accepted" and receipt.run_id == "r-1", receipt
                assert rc_b.counters.received == 1
                assert rc_a.counters.received == 0
                for handle in (other, resumed):
                    await handle.cancel()
                    await handle.result()
        finally:
            await rc_b.aclose()
            await rt_b.__aexit__(None, None, None)


async def test_a_run_started_again_under_its_id_on_its_worker_is_stamped_afresh(
    redis_url: str, prefix: str
) -> None:
    """Run r-1 of thread t-again starts on worker a, ends and is released; a run of the
    thread starts on b; then r-1 is started again, under its id, on a, before a's next
    heartbeat. a kept each run's start by Redis's clock by run id until that heartbeat, so
    the new r-1 was listed with its first start, older than b's run, and c sent the thread's
    command to b. It is stamped with its own start (its ``created_at``): the thread's newest."""
    kw: dict[str, Any] = {"prefix": prefix, "block_s": 0.2, "backoff_s": (0.05, 0.2)}
    slow = {**kw, "heartbeat_s": 30.0, "ttl_s": 60.0}  # no heartbeat of a's during the test
    fast = {**kw, "heartbeat_s": 0.2}
    agent = slow_agent(400, 0.02)
    async with (
        Runtime() as rt_a,
        Runtime() as rt_b,
        Runtime() as rt_c,
        RedisControl(rt_a, redis_url, worker_id="a", **slow) as rc_a,
        RedisControl(rt_b, redis_url, worker_id="b", **fast) as rc_b,
        RedisControl(rt_c, redis_url, worker_id="c", **fast) as rc_c,
    ):
        assert rc_c._redis is not None

        async def listed(run_id: str, worker: str) -> dict[str, Any]:
            return await eventually(  # type: ignore[no-any-return]
                lambda: rc_c.get_run(run_id),
                lambda s: s is not None and s["worker"] == worker and STARTED in s,
            )

        async def past(snapshot: dict[str, Any]) -> None:
            later = snapshot[STARTED] + 0.5  # clearly later by Redis's clock
            await eventually(lambda: redis_now(rc_c._redis), lambda now: now > later)

        first = await rt_a.start(agent, "work", tenant_id="acme", thread_id="t-again", run_id="r-1")
        await past(await listed("r-1", "a"))
        await first.cancel()
        await first.result()
        rt_a.forget("r-1")
        other = await rt_b.start(agent, "work", tenant_id="acme", thread_id="t-again")
        theirs = await listed(other.run_id, "b")
        await past(theirs)
        again = await rt_a.start(agent, "work", tenant_id="acme", thread_id="t-again", run_id="r-1")
        mine = await eventually(
            lambda: rc_c.get_run("r-1"), lambda s: s is not None and s["status"] == "running"
        )
        assert mine[STARTED] > theirs[STARTED]
        steer = SteeringCommand(
            target=SteeringTarget.thread("t-again"),
            actor=OPERATOR,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "focus"},
        )
        receipt = await rc_c.submit(steer)
        assert receipt.status == "accepted" and receipt.run_id == "r-1", receipt
        assert (rc_a.counters.received, rc_b.counters.received) == (1, 0)
        for handle in (other, again):
            await handle.cancel()
            await handle.result()
