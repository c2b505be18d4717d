"""A command put in a closing runtime's store inbox after its last regular pass (while it
waits for its runs to stop) still gets an answer, not a ``ReceiptTimeout`` from an inbox
nobody reads any more (real SQLite file, a second connection as the sending process)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tinyagents import (
    Agent,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
    tool,
)
from tinyagents.store import open_store
from tinyagents.testkit import EventWaiter, ScriptedModel, reply, tool_call

OPS = SteeringActor.human("ops", tenant_id="default", scopes=["agent:control"])


async def test_a_command_put_in_the_inbox_while_the_runtime_closes_is_answered(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    stopping, go_on = asyncio.Event(), asyncio.Event()

    @tool
    async def work() -> str:
        """Work for ever; on cancel, hold the close in its wait for the runs."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopping.set()
            await go_on.wait()
            raise
        return "never"  # pragma: no cover

    waiter = EventWaiter()
    rt = Runtime(store=url, sinks=[waiter])
    await rt.open()
    agent = Agent("a", ScriptedModel([tool_call("work"), reply("done")]), tools=[work])
    handle = await rt.start(agent, "go")
    await waiter.event("tool.call", handle.run_id)
    closing = asyncio.create_task(rt.close())
    await stopping.wait()  # the inbox had its last regular pass; the runs are being stopped

    sender = open_store(url)
    await sender.open()
    try:
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=OPS,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "late"},
        )
        await sender.inbox_put(owner=rt.runtime_id, request_id="req-late", command=cmd)
        go_on.set()
        await closing
        receipt = await sender.inbox_receipt("req-late")
    finally:
        await sender.close()
    assert receipt is not None, "the closing runtime never answered the command"
    assert receipt.status == "rejected"
    assert "runtime closed" in (receipt.reason or "")


async def test_a_retry_of_an_applied_command_put_in_the_inbox_while_closing_is_a_duplicate(
    tmp_path: Path,
) -> None:
    """A retry (same correlation id, same sender) of a command the run took, arriving as its
    runtime closes, is answered ``duplicate``: ``rejected`` told the sender that nothing was
    applied, though the first attempt was (two racing submitters saw ``accepted`` and
    ``rejected`` for one command)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    stopping, go_on = asyncio.Event(), asyncio.Event()

    @tool
    async def work() -> str:
        """Work for ever; on cancel, hold the close in its wait for the runs."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopping.set()
            await go_on.wait()
            raise
        return "never"  # pragma: no cover

    waiter = EventWaiter()
    rt = Runtime(store=url, sinks=[waiter])
    await rt.open()
    agent = Agent("a", ScriptedModel([tool_call("work"), reply("done")]), tools=[work])
    handle = await rt.start(agent, "go")
    await waiter.event("tool.call", handle.run_id)
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(handle.run_id),
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "focus"},
        correlation_id="c-once",
    )
    assert (await rt.submit(cmd)).status == "accepted"
    closing = asyncio.create_task(rt.close())
    await stopping.wait()  # the inbox had its last regular pass; the runs are being stopped

    sender = open_store(url)
    await sender.open()
    try:
        await sender.inbox_put(owner=rt.runtime_id, request_id="req-retry", command=cmd)
        other = cmd.model_copy(update={"correlation_id": "c-new"})
        await sender.inbox_put(owner=rt.runtime_id, request_id="req-new", command=other)
        go_on.set()
        await closing
        retry = await sender.inbox_receipt("req-retry")
        new = await sender.inbox_receipt("req-new")
    finally:
        await sender.close()
    assert retry is not None and new is not None
    assert retry.status == "duplicate", retry
    assert retry.run_id == handle.run_id
    assert new.status == "rejected" and "runtime closed" in (new.reason or "")
