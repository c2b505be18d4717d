"""The supervisor's command when the store cannot log it for a while: it is sent again until
it is logged (or its run ends), never lost with the run left unsupervised."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

from tinyagents import Agent, RunStatus, Runtime, SupervisorSpec, tool
from tinyagents.store import SqliteStore
from tinyagents.testkit import EventWaiter, ScriptedModel, reply, tool_call


class _Seen(logging.Handler):
    """Set once a log record says ``text`` (the supervisor logs on the event loop)."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text = text
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()

    async def wait(self) -> None:
        await self.event.wait()


async def test_an_abort_the_store_could_not_log_at_first_still_lands(tmp_path: Path) -> None:
    # another process held the database locked past the busy timeout when the rule fired:
    # submit raised StoreError inside the supervisor's task ("Task exception was never
    # retrieved"), the supervisor believed its abort was on its way, and the run completed
    path = tmp_path / "runs.db"
    spec = SupervisorSpec(
        rules=[{"when": "tool_repeated", "tool": "search", "count": 1}], on_violation="abort"
    )
    waiter = EventWaiter()
    lock: list[sqlite3.Connection] = []

    @tool
    def hold_lock() -> str:
        """Lock the database, as another process would."""
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN EXCLUSIVE")
        lock.append(other)
        return "locked"

    @tool
    def search() -> str:
        """Search."""
        return "nothing"

    @tool
    async def release_lock() -> str:
        """Release the lock once the supervisor failed to log its abort."""

        try:
            await asyncio.wait_for(failed.wait(), 60)  # a failsafe only
        finally:
            lock[0].execute("ROLLBACK")
            lock[0].close()
        await asyncio.wait_for(waiter.event("steering.accepted"), 60)  # a failsafe only
        return "released"

    failed = _Seen("could not be logged")
    logging.getLogger("tinyagents.supervisor").addHandler(failed)
    model = ScriptedModel(
        [tool_call("hold_lock"), tool_call("search"), tool_call("release_lock"), reply("done")]
    )
    agent = Agent("a", model, tools=[hold_lock, search, release_lock])
    async with Runtime(
        SqliteStore(path, busy_timeout_s=0.05), supervisor=spec, sinks=[waiter]
    ) as rt:
        handle = await rt.start(agent, "go")
        result = await handle.result()
        history = await rt.load_steering_history(handle.run_id)
    assert result.status is RunStatus.ABORTED
    assert result.error == "tool 'search' called 1 times (limit 1)"
    assert [e.type for e in history] == [
        "steering.requested",
        "steering.accepted",
        "steering.delivered",
        "steering.applied",
    ]
