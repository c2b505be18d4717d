"""A thread command deferred by one runtime (no run of its thread anywhere), logged
``deferred`` in a durable steering log another runtime shares (a SQLite file, a PostgreSQL
database), is taken by the run of that thread the other runtime starts: that runtime reads
the log's open commands of the thread when the run registers (``Store.open_commands
(thread_id=...)``) and takes the ones it has not seen by the compare-and-set ``deferred`` ->
``accepted``. It was left to the first runtime, whose thread's next run alone took it: the
run on the other runtime went on without it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Runtime
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.runs import RunStatus
from tinyagents.testkit import fake_agent

OPERATOR = SteeringActor.human("olga", tenant_id="acme", scopes=["agent:control"])
SCOPE = "tenant:acme"


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """One steering log the two runtimes share: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
        return
    dsn = postgres_dsn()
    yield f"{dsn}{'&' if '?' in dsn else '?'}schema={pg_schema()}"
    await drop_pg_schemas()


def thread_cancel(thread_id: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.thread(thread_id),
        actor=OPERATOR,
        kind=SteeringKind.CANCEL,
        payload={},
    )


async def test_a_thread_command_deferred_by_another_runtime_on_the_log_is_taken_by_a_run_here(
    store_url: str,
) -> None:
    """x defers a cancel for thread t (no run of t anywhere); y, on the same log, starts a run
    of t: the run takes the cancel from the log and ends ``cancelled``, the log says
    ``applied`` with y as its owner. x's copy is dropped with no event when x's next run of t
    registers (the log says another runtime settled it), and that run is not cancelled."""
    cancel = thread_cancel("t")
    async with Runtime(store_url) as x, Runtime(store_url) as y:
        receipt = await x.submit(cancel)
        assert receipt.status == "deferred", receipt
        run = await y.start(fake_agent("clerk", turns=3), "work", tenant_id="acme", thread_id="t")
        assert (await run.result()).status is RunStatus.CANCELLED
        assert y.router.state(cancel.correlation_id, scope=SCOPE) == "applied"
        await y.flush()
        stored = await y.store.get_command(cancel.correlation_id, scope=SCOPE)
        assert stored is not None
        assert (stored.state, stored.run_id, stored.owner) == ("applied", run.run_id, y.runtime_id)
        # x's next run of t: the log says y settled it, so x drops its copy with no event
        mine = await x.start(fake_agent("clerk", turns=1), "work", tenant_id="acme", thread_id="t")
        assert (await mine.result()).status is RunStatus.COMPLETED
        assert x.router.open_commands() == []
        assert x.steering_history(mine.run_id) == []
        again = await y.store.get_command(cancel.correlation_id, scope=SCOPE)
        assert again is not None and (again.state, again.run_id) == ("applied", run.run_id)


async def test_a_run_of_another_tenant_does_not_take_the_logged_thread_command(
    store_url: str,
) -> None:
    """Thread ids are each tenant's own: a run of globex on thread t, started on y, leaves
    acme's deferred command in the log (``deferred``), and acme's next run of t, on y, takes
    it."""
    cancel = thread_cancel("t")
    async with Runtime(store_url) as x, Runtime(store_url) as y:
        assert (await x.submit(cancel)).status == "deferred"
        other = await y.start(
            fake_agent("clerk", turns=1), "work", tenant_id="globex", thread_id="t"
        )
        assert (await other.result()).status is RunStatus.COMPLETED
        stored = await y.store.get_command(cancel.correlation_id, scope=SCOPE)
        assert stored is not None and stored.state == "deferred"
        run = await y.start(fake_agent("clerk", turns=3), "work", tenant_id="acme", thread_id="t")
        assert (await run.result()).status is RunStatus.CANCELLED


async def test_a_thread_command_another_runtime_took_first_is_not_applied_again(
    store_url: str,
) -> None:
    """Three runtimes open on the log; x defers the command; z starts a run of t and takes it
    from the log; y's run of t, started after, does not find it open any more and runs
    without it: applied once, by z's run."""
    cancel = thread_cancel("t")
    async with Runtime(store_url) as x, Runtime(store_url) as y, Runtime(store_url) as z:
        assert (await x.submit(cancel)).status == "deferred"
        first = await z.start(fake_agent("clerk", turns=3), "work", tenant_id="acme", thread_id="t")
        assert (await first.result()).status is RunStatus.CANCELLED
        second = await y.start(
            fake_agent("clerk", turns=1), "work", tenant_id="acme", thread_id="t"
        )
        assert (await second.result()).status is RunStatus.COMPLETED
        assert y.steering_history(second.run_id) == []
        await z.flush()
        stored = await z.store.get_command(cancel.correlation_id, scope=SCOPE)
        assert stored is not None
        assert (stored.state, stored.run_id) == ("applied", first.run_id)
