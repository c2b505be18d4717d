"""Steering a run another process owns, through a PostgreSQL store: real processes, the
inbox, deduplication across submitters, and LISTEN/NOTIFY waking the owning runtime."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from services import pg_schema, postgres_dsn

from tests.slow_agent import slow_agent
from tinyagents import Runtime, SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.protocol import ReceiptStatus, SteeringReceipt
from tinyagents.server import Control
from tinyagents.steering.remote import submit_through_store
from tinyagents.store import PostgresStore

ROOT = Path(__file__).resolve().parents[2]
SLOW_AGENT = ROOT / "tests" / "slow_agent.py"
OPS = SteeringActor.human("alice", tenant_id="acme", scopes=["agent:control"])


def finish(run_id: str, cid: str | None = None) -> SteeringCommand:
    extra = {"correlation_id": cid} if cid else {}
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "please finish"},
        **extra,
    )


async def python(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(SLOW_AGENT),
        *args,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)},
    )


async def test_two_processes_submitting_one_command_to_a_third_apply_it_once(
    tmp_path: Path,
) -> None:
    url = f"{postgres_dsn()}?schema={pg_schema()}"
    run_file, go = tmp_path / "run.json", tmp_path / "go"
    owner = await python("own", url, str(run_file))
    submitters: list[asyncio.subprocess.Process] = []
    try:
        async with asyncio.timeout(60):  # bounds the test; no timing is asserted
            while not run_file.exists():  # noqa: ASYNC110 - the owner process writes it
                await asyncio.sleep(0.02)
        started = json.loads(run_file.read_text())
        for _ in range(2):
            submitters.append(
                await python("submit", url, started["run_id"], "c-1", "please finish", str(go))
            )
        for proc in submitters:
            assert proc.stdout is not None
            assert await proc.stdout.readline() == b"ready\n"
        go.touch()  # both submit at once
        receipts = []
        for proc in submitters:
            assert proc.stdout is not None
            receipts.append(json.loads(await proc.stdout.readline()))
        assert sorted(r["status"] for r in receipts) == ["accepted", "duplicate"]
        assert owner.stdout is not None
        result = json.loads(await owner.stdout.readline())
        assert result["status"] == "completed"
        steered = json.loads(result["output"])["steered"]
        assert len(steered) == 1 and "please finish" in steered[0]  # applied once
        assert await owner.wait() == 0
    finally:
        for proc in [owner, *submitters]:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


async def test_notify_wakes_the_owning_runtime_without_waiting_for_its_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tinyagents.runtime as runtime_module

    monkeypatch.setattr(runtime_module, "INBOX_POLL_S", 3600.0)  # only a wake-up answers
    schema = pg_schema()
    url = f"{postgres_dsn()}?schema={schema}"
    elsewhere = PostgresStore(postgres_dsn(), schema=schema)  # the submitting process
    async with Runtime(store=url) as rt:
        assert isinstance(rt.store, PostgresStore)  # the runtime listens on its own
        await elsewhere.open()
        try:
            handle = await rt.start(slow_agent(), "work", tenant_id="acme")
            await rt.write_live_snapshots(heartbeat=True)
            control = Control(store=elsewhere, receipt_timeout_s=60)
            receipt = await control.submit(finish(handle.run_id))
            assert receipt.status == "accepted" and receipt.run_id == handle.run_id
            result = await handle.result()
            assert "please finish" in json.loads(str(result.output))["steered"][0]
        finally:
            await elsewhere.close()


async def test_a_connection_lost_while_waiting_for_the_receipt_still_gets_the_receipt() -> None:
    """The sender's connection is terminated while it polls for the receipt of a command
    already in the inbox. That failure passes (the pool opens another connection), but it
    ended ``submit_through_store`` with a ``StoreError``: the operator was told the command
    failed although its owner took it a moment later (and a retry came back ``duplicate``)."""
    schema = pg_schema()
    name = f"ta-{schema}"  # the sender's connections, and no other test's
    sender = PostgresStore(f"{postgres_dsn()}?application_name={name}", schema=schema, max_size=1)
    owner = PostgresStore(postgres_dsn(), schema=schema)  # the owning process, played here
    await sender.open()
    await owner.open()
    admin = await asyncpg.connect(postgres_dsn())
    locker = await asyncpg.connect(postgres_dsn())
    try:
        async with Runtime() as rt:  # a real run's snapshot, listed as the far owner's
            handle = await rt.start(slow_agent(), "work", tenant_id="acme")
            snapshot = {**rt.live_snapshots([handle.run_id])[0], "owner": "rt-far"}
            await handle.cancel()
        await owner.save_runs([snapshot])
        cmd = finish(handle.run_id)
        sending = asyncio.ensure_future(submit_through_store(sender, cmd, timeout_s=60))
        async with asyncio.timeout(60):  # bounds the test; no timing is asserted
            while not await admin.fetch(f'SELECT 1 FROM "{schema}".inbox'):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            # the next poll waits on a lock: terminate its connection in the middle of it
            tx = locker.transaction()
            await tx.start()
            await locker.execute(f'LOCK TABLE "{schema}".inbox IN ACCESS EXCLUSIVE MODE')
            while not (pids := await admin.fetch(_WAITING_ON_A_LOCK, name)):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            await admin.execute("SELECT pg_terminate_backend($1, 10000)", pids[0][0])
            await tx.rollback()
            (item,) = await owner.inbox_take("rt-far")
            assert item.command.correlation_id == cmd.correlation_id
            await owner.inbox_answer(
                item.request_id,
                SteeringReceipt.issue(
                    ReceiptStatus.ACCEPTED, cmd.correlation_id, handle.run_id, None, None
                ),
            )
            receipt = await sending
        assert receipt.status == "accepted" and receipt.correlation_id == cmd.correlation_id
    finally:
        if not sending.done():
            sending.cancel()
        await locker.close()
        await admin.close()
        await owner.close()
        await sender.close()


#: The backends of the connections named ``$1`` that wait on a lock.
_WAITING_ON_A_LOCK = (
    "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'"
)


class _LosingPool:
    """A real pool whose next statement holding ``marker`` commits, and then fails as a
    connection dropped before its reply arrived does."""

    def __init__(self, pool: Any, marker: str = "INSERT INTO inbox") -> None:
        self.pool, self.marker, self.lose_next = pool, marker, True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)

    async def acquire(self, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - asyncpg's
        return _Statements(self, await self.pool.acquire(timeout=timeout))

    async def release(self, conn: Any) -> None:
        await self.pool.release(conn.conn)

    async def fetch(self, sql: str, *args: Any) -> Any:
        async with self.pool.acquire() as conn:
            return await self.fetch_on(conn, sql, *args)

    async def fetch_on(self, conn: Any, sql: str, *args: Any) -> Any:
        rows = await conn.fetch(sql, *args)
        if self.lose_next and self.marker in sql:
            self.lose_next = False
            raise ConnectionResetError("connection was closed in the middle of operation")
        return rows


class _Statements:
    """A connection of a test double's pool: its statements outside a transaction go
    through the double (``fetch_on``)."""

    def __init__(self, pool: Any, conn: Any) -> None:
        self.pool, self.conn = pool, conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    async def fetch(self, sql: str, *args: Any) -> Any:
        if self.conn.is_in_transaction():
            return await self.conn.fetch(sql, *args)
        return await self.pool.fetch_on(self.conn, sql, *args)


async def _answer_as_the_far_owner(owner: PostgresStore, cmd: SteeringCommand) -> None:
    """Take ``cmd`` from the inbox of ``rt-far`` (the owner this module's runs are listed
    with) and answer it ``accepted``, once its sender has put it there."""
    async with asyncio.timeout(60):  # bounds the test; no timing is asserted
        while not (items := await owner.inbox_take("rt-far")):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    (item,) = items
    assert item.command.correlation_id == cmd.correlation_id
    await owner.inbox_answer(
        item.request_id,
        SteeringReceipt.issue(
            ReceiptStatus.ACCEPTED, cmd.correlation_id, item.command.target.run_id, None, None
        ),
    )


async def _far_run(owner: PostgresStore) -> str:
    """A real run's snapshot, saved as the far owner ``rt-far``'s: its run id."""
    async with Runtime() as rt:
        handle = await rt.start(slow_agent(), "work", tenant_id="acme")
        snapshot = {**rt.live_snapshots([handle.run_id])[0], "owner": "rt-far"}
        await handle.cancel()
    await owner.save_runs([snapshot])
    return handle.run_id


async def test_a_command_put_in_the_inbox_whose_reply_was_lost_gets_its_receipt() -> None:
    """The statement putting the command in the inbox committed and its reply was lost with
    its connection: ``submit_through_store`` raised ``StoreError`` (the operator was told it
    failed) while the owner took the command and applied it. The put is tried again (the
    request id makes it a no-op), and the sender waits for the owner's receipt."""
    schema = pg_schema()
    sender = PostgresStore(postgres_dsn(), schema=schema)
    owner = PostgresStore(postgres_dsn(), schema=schema)
    await sender.open()
    await owner.open()
    try:
        cmd = finish(await _far_run(owner))
        sender._pool = _LosingPool(sender._pool)
        sending = asyncio.ensure_future(submit_through_store(sender, cmd, timeout_s=60))
        await _answer_as_the_far_owner(owner, cmd)
        receipt = await sending
        assert receipt.status == "accepted" and receipt.correlation_id == cmd.correlation_id
        assert await owner.inbox_take("rt-far") == []  # put once
    finally:
        await owner.close()
        await sender.close()


async def test_a_connection_ended_while_putting_a_command_in_the_inbox_does_not_fail_it() -> None:
    """The server ended the sender's connection while its put waited on a lock (before it
    committed): a failure that passes, the pool opens another connection, but the sender
    was told ``StoreError``. The put is tried again on another connection."""
    schema = pg_schema()
    name = f"ta-{schema}"  # the sender's connections, and no other test's
    sender = PostgresStore(f"{postgres_dsn()}?application_name={name}", schema=schema, max_size=1)
    owner = PostgresStore(postgres_dsn(), schema=schema)
    await sender.open()
    await owner.open()
    admin = await asyncpg.connect(postgres_dsn())
    locker = await asyncpg.connect(postgres_dsn())
    sending: asyncio.Future[SteeringReceipt] | None = None
    try:
        cmd = finish(await _far_run(owner))
        tx = locker.transaction()
        await tx.start()
        await locker.execute(f'LOCK TABLE "{schema}".inbox IN ACCESS EXCLUSIVE MODE')
        sending = asyncio.ensure_future(submit_through_store(sender, cmd, timeout_s=60))
        async with asyncio.timeout(60):  # bounds the test; no timing is asserted
            while not (pids := await admin.fetch(_WAITING_ON_A_LOCK, name)):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        await admin.execute("SELECT pg_terminate_backend($1, 10000)", pids[0][0])
        await tx.rollback()
        await _answer_as_the_far_owner(owner, cmd)
        receipt = await sending
        assert receipt.status == "accepted" and receipt.correlation_id == cmd.correlation_id
    finally:
        if sending is not None and not sending.done():
            sending.cancel()
        await locker.close()
        await admin.close()
        await owner.close()
        await sender.close()


async def test_a_take_of_the_inbox_whose_reply_was_lost_gets_what_it_took() -> None:
    """The owner's take committed (its items marked taken by it) and its reply was lost with
    its connection: the take raised ``StoreError`` and the items waited out their lease
    (``INBOX_LEASE_S``, 30 s) before anyone took them again, their senders long answered
    ``ReceiptTimeout``. The take is tried again and gets the items its first attempt took."""
    store = PostgresStore(postgres_dsn(), schema=pg_schema())
    await store.open()
    try:
        cmd = finish("r-1")
        await store.inbox_put(owner="rt-1", request_id="req-1", command=cmd)
        losing = store._pool = _LosingPool(store._pool, "SET state = 'taken'")
        (item,) = await store.inbox_take("rt-1")
        assert not losing.lose_next  # its first reply was lost
        assert item.request_id == "req-1" and item.command.correlation_id == cmd.correlation_id
        assert await store.inbox_take("rt-1") == []  # taken once
    finally:
        await store.close()


async def _steered_once(store: PostgresStore, run_id: str, cid: str) -> list[str]:
    """The terminal steering events of command ``cid`` on ``run_id``."""
    events = await store.load_events(run_id=run_id, type_prefix="steering.")
    return [
        e.type
        for e in events
        if getattr(e, "correlation_id", None) == cid
        and e.type in ("steering.applied", "steering.failed", "steering.rejected")
    ]


async def test_an_inbox_command_whose_log_write_lost_its_reply_is_accepted_and_applied() -> None:
    """The owner logged a command taken from its inbox (the INSERT committed) and the reply
    was lost with its connection: the command was answered ``rejected`` ("store error,
    nothing was applied") — a final answer for a failure that passes, the operator not told
    to send it again — while its row stayed ``accepted`` in the log, never delivered. The
    owner submits it again at once: the row is its own, the command is accepted and
    applied once."""
    schema = pg_schema()
    url = f"{postgres_dsn()}?schema={schema}"
    sender = PostgresStore(postgres_dsn(), schema=schema)
    async with Runtime(store=url) as rt:
        handle = await rt.start(slow_agent(), "work", tenant_id="acme")
        await sender.open()
        try:
            async with asyncio.timeout(60):  # bounds the test; no timing is asserted
                while await sender.load_run(handle.run_id) is None:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            owner_store: Any = rt.store
            losing = owner_store._pool = _LosingPool(owner_store._pool, "INSERT INTO steering_log")
            cmd = finish(handle.run_id, "c-lost-log")
            receipt = await submit_through_store(sender, cmd, timeout_s=60)
            assert not losing.lose_next  # the write's reply was lost
            assert receipt.status == "accepted", receipt.reason
            result = await handle.result()
            assert "please finish" in json.dumps(result.output)
        finally:
            await sender.close()
    store = PostgresStore(postgres_dsn(), schema=schema)
    await store.open()
    try:
        assert await _steered_once(store, handle.run_id, "c-lost-log") == ["steering.applied"]
        assert await store.open_commands() == []
    finally:
        await store.close()


async def test_an_inbox_command_whose_log_write_the_server_ended_is_accepted() -> None:
    """The server ended the owner's connection while it logged a command taken from its
    inbox (``pg_terminate_backend`` while the INSERT waited on a lock): the command was
    answered ``rejected`` ("store error, nothing was applied") though a write on the next
    connection would have taken it. It is submitted again, and accepted."""
    schema = pg_schema()
    name = f"ta-{schema}"  # the owner's connections, and no other test's
    url = f"{postgres_dsn()}?schema={schema}&application_name={name}"
    sender = PostgresStore(postgres_dsn(), schema=schema)
    admin = await asyncpg.connect(postgres_dsn())
    locker = await asyncpg.connect(postgres_dsn())
    sending: asyncio.Future[SteeringReceipt] | None = None
    try:
        async with Runtime(store=url) as rt:
            handle = await rt.start(slow_agent(), "work", tenant_id="acme")
            await sender.open()
            async with asyncio.timeout(60):  # bounds the test; no timing is asserted
                while await sender.load_run(handle.run_id) is None:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            tx = locker.transaction()
            await tx.start()
            # SHARE: reads of the log go on, its writes wait
            await locker.execute(f'LOCK TABLE "{schema}".steering_log IN SHARE MODE')
            cmd = finish(handle.run_id, "c-ended-log")
            sending = asyncio.ensure_future(submit_through_store(sender, cmd, timeout_s=60))
            async with asyncio.timeout(60):  # bounds the test; no timing is asserted
                while not (pids := await admin.fetch(_WAITING_ON_A_LOCK, name)):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            for (pid,) in pids:
                await admin.execute("SELECT pg_terminate_backend($1, 10000)", pid)
            await tx.rollback()
            receipt = await sending
            assert receipt.status == "accepted", receipt.reason
            result = await handle.result()
            assert "please finish" in json.dumps(result.output)
    finally:
        if sending is not None and not sending.done():
            sending.cancel()
        await locker.close()
        await admin.close()
        await sender.close()


class _DownPool(_LosingPool):
    """A real pool whose next ``times`` statements holding ``marker`` fail, unrun, as on a
    connection the server ended."""

    def __init__(self, pool: Any, marker: str, times: int) -> None:
        super().__init__(pool, marker)
        self.times = times

    async def fetch_on(self, conn: Any, sql: str, *args: Any) -> Any:
        if self.times and self.marker in sql:
            self.times -= 1
            raise ConnectionResetError("connection was closed in the middle of operation")
        return await conn.fetch(sql, *args)


async def test_an_inbox_command_the_owner_cannot_log_yet_is_taken_again_not_rejected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner's log stayed out of reach for every try (a failover): the command was
    answered ``rejected`` "nothing was applied", final to its sender. It is left in the
    inbox instead, taken again once its lease runs out, and accepted then."""
    from tinyagents.store import postgres

    monkeypatch.setattr(postgres, "INBOX_LEASE_S", 0.5)
    schema = pg_schema()
    url = f"{postgres_dsn()}?schema={schema}"
    sender = PostgresStore(postgres_dsn(), schema=schema)
    async with Runtime(store=url) as rt:
        handle = await rt.start(slow_agent(), "work", tenant_id="acme")
        await sender.open()
        try:
            async with asyncio.timeout(60):  # bounds the test; no timing is asserted
                while await sender.load_run(handle.run_id) is None:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            owner_store: Any = rt.store
            down = owner_store._pool = _DownPool(owner_store._pool, "INSERT INTO steering_log", 3)
            cmd = finish(handle.run_id, "c-down-log")
            receipt = await submit_through_store(sender, cmd, timeout_s=60)
            assert down.times == 0  # every try failed
            assert receipt.status == "accepted", receipt.reason
            result = await handle.result()
            assert "please finish" in json.dumps(result.output)
        finally:
            await sender.close()
