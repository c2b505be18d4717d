"""A command sent through the store for a run another runtime has just started.

The owner's ``start_graph`` returns before the run's snapshot is in the store: its runtime
writes snapshots on its next tick (``SNAPSHOT_EVERY_S``), and a busy database delays that write
further (an agent run's start claims its row first: it is in the store by then). The tests hold the owner's snapshot writes with a real lock taken by another
connection (SQLite's write lock on the file; PostgreSQL's on the ``runs`` table), so the
window is as wide as the test needs, and send the command from a second runtime on the same
store in that window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from tests.holds import started_with_snapshot_writes_held
from tests.slow_agent import slow_agent
from tinyagents import (
    RunStatus,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.server import Control
from tinyagents.server.demo import refund_graph
from tinyagents.steering.remote import LISTING_WAIT_S
from tinyagents.store import SqliteStore

OPS = SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"])
OUTSIDER = SteeringActor.human("eve", tenant_id="globex", scopes=["agent:control"])


def pause(run_id: str, actor: Any = OPS, **fields: Any) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id), actor=actor, kind=SteeringKind.PAUSE, **fields
    )


async def until(check: Callable[[], Any], *, timeout_s: float = 60.0) -> Any:
    async with asyncio.timeout(timeout_s):
        while True:
            value = check()
            if value:
                return value
            await asyncio.sleep(0.01)


async def timed(control: Control, cmd: SteeringCommand) -> tuple[Any, float]:
    began = time.monotonic()
    receipt = await control.submit(cmd)
    return receipt, time.monotonic() - began


async def test_a_command_sent_as_soon_as_another_runtime_starts_the_run_reaches_it(
    durable_backend: Any, tmp_path: Path
) -> None:
    """The run's start is answered, its snapshot not written yet: the command was answered
    ``rejected`` "not found", as for a run that does not exist; the sender now looks again
    until the owner's snapshot write lands. An unknown run and another tenant's run are
    still "not found", both after the same wait (also when the outsider reuses a correlation
    id of its own, which the steering log holds: that once answered ``duplicate`` for another
    tenant's run only, telling it apart)."""
    owner = Runtime(store=durable_backend.make(tmp_path))
    sender = Runtime(store=durable_backend.make(tmp_path))
    async with owner, sender:
        # the held write has to land inside the listing wait once released: the default
        # (LISTING_WAIT_S, 1.1 s) was short on a loaded machine, and the wait ends as soon
        # as the run is listed; the runs never listed below wait the default out
        control = Control(sender, receipt_timeout_s=60, listing_wait_s=60)
        start = partial(
            owner.start_graph,
            refund_graph(),
            {"invoice": "#7", "amount": "5 EUR"},
            thread_id="t",
            tenant_id="acme",
        )
        async with started_with_snapshot_writes_held(owner.store, start) as handle:
            assert await sender.store.load_run(handle.run_id) is None  # not in the store yet
            sent = asyncio.create_task(control.submit(pause(handle.run_id)))
            done, _ = await asyncio.wait([sent], timeout=0.2)
            assert not done, sent.result()  # it has looked, found nothing, and waits
        receipt = await sent
        assert receipt.status == "accepted", receipt
        await until(lambda: handle.status is RunStatus.PAUSED)

        control.listing_wait_s = LISTING_WAIT_S
        missing, missing_s = await timed(control, pause("r-nowhere"))
        assert missing.status == "rejected" and missing.reason == "not found: run r-nowhere"
        theirs = await sender.start(slow_agent(), "theirs", tenant_id="globex")
        mine = await sender.submit(pause(theirs.run_id, OUTSIDER, correlation_id="c-eve"))
        assert mine.status == "accepted", mine
        spoof = pause(handle.run_id, OUTSIDER, correlation_id="c-eve")
        foreign, foreign_s = await timed(control, spoof)
        assert foreign.status == "rejected"
        assert foreign.reason == f"not found: run {handle.run_id}"
        # neither is answered before the wait is over: the time tells them apart by nothing
        assert missing_s >= LISTING_WAIT_S and foreign_s >= LISTING_WAIT_S

        for run in (handle, theirs):
            await run.cancel()
            await run.result()


async def test_another_tenants_run_held_here_waits_as_an_unknown_run_does(
    tmp_path: Path,
) -> None:
    """The sender's own runtime holds another tenant's run: the command went to that runtime,
    which answered "not found" at once, while an unknown run is answered after the listing
    wait; the time told the two apart. Both now go the same way."""
    async with Runtime(store=SqliteStore(tmp_path / "x.db")) as rt:
        control = Control(rt, receipt_timeout_s=60)
        handle = await rt.start(slow_agent(), "work", tenant_id="acme")
        await until(lambda: rt.runs.get(handle.run_id))
        foreign, foreign_s = await timed(control, pause(handle.run_id, OUTSIDER))
        missing, missing_s = await timed(control, pause("r-nowhere", OUTSIDER))
        assert foreign.status == missing.status == "rejected"
        assert foreign.reason == f"not found: run {handle.run_id}"
        assert foreign_s >= LISTING_WAIT_S and missing_s >= LISTING_WAIT_S
        assert (await control.submit(pause(handle.run_id))).status == "accepted"  # its own
        await handle.cancel()
        await handle.result()
