"""The PostgreSQL inbox's lease and pruning are judged by the database's clock, not by one
machine's clock against times another machine wrote.

``inbox_take`` compared ``submitted_at`` / ``taken_at``, stamped by the sender's and the
first taker's clocks, with "now - INBOX_LEASE_S" by the taker's; an answer pruned by "now -
INBOX_RETENTION_S" by the answerer's. With clocks an hour apart, an owner whose clock is
ahead deleted a command put a moment before (its sender timed out, the command was lost),
and a taker whose clock is ahead (or a first taker whose clock is behind) took an item
whose lease had not run out: one command handed out twice at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from services import pg_schema, postgres_dsn

from tinyagents._clock import use_clock
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.store import PostgresStore
from tinyagents.store.base import INBOX_RETENTION_S

OPS = SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"])
AN_HOUR = 3600.0


class SkewedClock:
    """The system clock ``offset_s`` off: another machine's clock."""

    def __init__(self, offset_s: float) -> None:
        self.offset = timedelta(seconds=offset_s)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def monotonic(self) -> float:
        return 0.0


def command(cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run("r-1"),
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": f"say {cid}"},
        correlation_id=cid,
    )


def accepted(cid: str) -> SteeringReceipt:
    return SteeringReceipt(status="accepted", correlation_id=cid, run_id="r-1", policy_id="p")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(postgres_dsn(), schema=pg_schema(tmp_path))
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def test_an_answerer_whose_clock_is_ahead_keeps_a_command_just_put(
    store: PostgresStore,
) -> None:
    await store.inbox_put(owner="rt-b", request_id="q-fresh", command=command("c-fresh"))
    await store.inbox_put(owner="rt-a", request_id="q-done", command=command("c-done"))
    with use_clock(SkewedClock(INBOX_RETENTION_S + 60)):  # rt-a's machine
        await store.inbox_take("rt-a")
        await store.inbox_answer("q-done", accepted("c-done"))  # prunes the inbox
    assert await store.inbox_receipt("q-done") == accepted("c-done")  # answered just now
    assert [i.request_id for i in await store.inbox_take("rt-b")] == ["q-fresh"]


async def test_a_taker_whose_clock_is_ahead_does_not_take_an_item_within_its_lease(
    store: PostgresStore,
) -> None:
    await store.inbox_put(owner="rt-a", request_id="q-1", command=command("c-1"))
    assert [i.request_id for i in await store.inbox_take("rt-a")] == ["q-1"]
    with use_clock(SkewedClock(AN_HOUR)):  # another process of rt-a's, or a second poller
        assert await store.inbox_take("rt-a") == []


async def test_an_item_a_taker_whose_clock_is_behind_took_is_not_taken_again_at_once(
    store: PostgresStore,
) -> None:
    with use_clock(SkewedClock(-AN_HOUR)):  # the sender's and the first taker's machine
        await store.inbox_put(owner="rt-a", request_id="q-1", command=command("c-1"))
        assert [i.request_id for i in await store.inbox_take("rt-a")] == ["q-1"]
    assert await store.inbox_take("rt-a") == []


async def test_a_command_put_by_a_sender_whose_clock_is_behind_is_not_pruned(
    store: PostgresStore,
) -> None:
    with use_clock(SkewedClock(-(INBOX_RETENTION_S + 60))):  # the sender's machine
        await store.inbox_put(owner="rt-b", request_id="q-fresh", command=command("c-fresh"))
    await store.inbox_put(owner="rt-a", request_id="q-done", command=command("c-done"))
    await store.inbox_take("rt-a")
    await store.inbox_answer("q-done", accepted("c-done"))
    assert [i.request_id for i in await store.inbox_take("rt-b")] == ["q-fresh"]
