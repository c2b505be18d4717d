"""Steering a run from another thread: a web handler, a GUI callback or a worker thread of the
program, with the runtime's event loop in its own thread.

``await rt.submit(cmd)`` from another event loop (``asyncio.run`` in another thread) is handed
to the runtime's loop, so the run wakes as for a command from its own loop; a resume sent so to
a paused run was accepted and then never woke it (the loop sat in ``select`` with the wake-up
scheduled from the wrong thread). ``rt.submit_threadsafe(cmd)`` does the same from a thread with
no event loop. What cannot be handed over (starting a run, whose handle lives on the runtime's
loop) is refused with a ``ConfigurationError`` that says what to do instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tinyagents.errors import ConfigurationError, RuntimeClosed, SyncInAsyncError
from tinyagents.harness import Agent, tool
from tinyagents.protocol import (
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.runs import RunHandle, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.testkit import EventWaiter, ScriptedModel, reply, tool_call

OPERATOR = SteeringActor.human("ops", scopes=["agent:control"])
#: A failsafe, not a timing: each wait here ends at once when the behaviour holds.
FAILSAFE_S = 10


def command(
    run_id: str, kind: SteeringKind, payload: dict[str, Any] | None = None
) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id), actor=OPERATOR, kind=kind, payload=payload or {}
    )


@tool
async def step() -> str:
    """One step of work."""
    return "ok"


async def paused_run(rt: Runtime) -> RunHandle:
    """A run paused at its first boundary, the loop idle under it."""
    waiter = EventWaiter()
    rt.bus.add_sink(waiter)
    agent = Agent(
        "worker",
        model=ScriptedModel([tool_call("step", {}), reply("done")]),
        tools=[step],
        instructions="work",
    )
    handle = await rt.start(agent, "go")
    await rt.submit(command(handle.run_id, SteeringKind.PAUSE))
    await asyncio.wait_for(waiter.event("run.paused", handle.run_id), FAILSAFE_S)
    rt.bus.remove_sink(waiter)
    assert handle.status is RunStatus.PAUSED
    return handle


def in_thread(fn: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


async def test_a_resume_awaited_on_another_threads_loop_wakes_the_paused_run() -> None:
    async with Runtime() as rt:
        handle = await paused_run(rt)
        receipts: list[SteeringReceipt] = []
        thread = in_thread(
            lambda: receipts.append(
                asyncio.run(rt.submit(command(handle.run_id, SteeringKind.RESUME)))
            )
        )
        result = await asyncio.wait_for(handle.result(), FAILSAFE_S)
        await asyncio.to_thread(thread.join)
    assert [r.status for r in receipts] == [ReceiptStatus.ACCEPTED]
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")


async def test_submit_threadsafe_from_a_plain_thread_returns_the_receipt_and_wakes_the_run() -> (
    None
):
    async with Runtime() as rt:
        handle = await paused_run(rt)
        receipts: list[SteeringReceipt] = []
        thread = in_thread(
            lambda: receipts.append(
                rt.submit_threadsafe(command(handle.run_id, SteeringKind.RESUME))
            )
        )
        result = await asyncio.wait_for(handle.result(), FAILSAFE_S)
        await asyncio.to_thread(thread.join)
        history = [e.type for e in rt.steering_history(handle.run_id)]
    assert [r.status for r in receipts] == [ReceiptStatus.ACCEPTED]
    assert result.status is RunStatus.COMPLETED
    assert history.count("steering.applied") == 2  # the pause and the resume


async def test_commands_from_many_threads_are_each_applied_once() -> None:
    async with Runtime() as rt:
        handle = await paused_run(rt)
        sent = [
            command(handle.run_id, SteeringKind.ADD_INSTRUCTION, {"text": f"note {i}"})
            for i in range(40)
        ]
        receipts: list[SteeringReceipt] = []
        lock = threading.Lock()

        def send(cmds: list[SteeringCommand]) -> None:
            for cmd in cmds:
                receipt = rt.submit_threadsafe(cmd)
                with lock:
                    receipts.append(receipt)

        threads = [in_thread(lambda part=sent[i::4]: send(part)) for i in range(4)]  # type: ignore[misc]
        for thread in threads:
            await asyncio.to_thread(thread.join)
        # ... and the same ids again: each a duplicate, nothing applied twice
        again = [await asyncio.to_thread(rt.submit_threadsafe, cmd) for cmd in sent[:5]]
        await rt.submit(command(handle.run_id, SteeringKind.RESUME))
        await asyncio.wait_for(handle.result(), FAILSAFE_S)
        applied = [
            e.correlation_id
            for e in rt.steering_history(handle.run_id)
            if e.type == "steering.applied"
        ]
    assert sorted(r.status for r in receipts) == [ReceiptStatus.ACCEPTED] * 40
    assert {r.status for r in again} == {ReceiptStatus.DUPLICATE}
    assert sorted(set(applied) & {c.correlation_id for c in sent}) == sorted(
        c.correlation_id for c in sent
    )
    assert len(applied) == len(set(applied))


async def test_submit_threadsafe_on_the_runtimes_own_loop_is_refused() -> None:
    async with Runtime() as rt:
        with pytest.raises(SyncInAsyncError, match=r"await rt\.submit"):
            rt.submit_threadsafe(command("r-1", SteeringKind.REQUEST_STATUS))


async def test_submit_threadsafe_to_a_closed_runtime_raises_runtime_closed() -> None:
    async with Runtime() as rt:
        pass
    errors: list[BaseException] = []

    def send() -> None:
        try:
            rt.submit_threadsafe(command("r-1", SteeringKind.REQUEST_STATUS))
        except BaseException as exc:
            errors.append(exc)

    await asyncio.to_thread(send)
    assert [type(e) for e in errors] == [RuntimeClosed]


def test_submit_threadsafe_before_open_says_so() -> None:
    with pytest.raises(ConfigurationError, match="not open"):
        Runtime().submit_threadsafe(command("r-1", SteeringKind.REQUEST_STATUS))


async def test_an_error_of_the_submit_reaches_the_other_thread_as_itself() -> None:
    async with Runtime() as rt:
        errors: list[BaseException] = []

        def send() -> None:
            try:
                asyncio.run(rt.submit({"kind": "pause"}))  # type: ignore[arg-type]
            except BaseException as exc:
                errors.append(exc)

        await asyncio.to_thread(send)
    assert len(errors) == 1 and "submit takes a SteeringCommand" in str(errors[0])


async def test_starting_a_run_from_another_threads_loop_is_refused_clearly() -> None:
    async with Runtime() as rt:
        agent = Agent("a", model=ScriptedModel([reply("hi")]), instructions="x")
        errors: list[BaseException] = []

        def start() -> None:
            try:
                asyncio.run(rt.start(agent, "go"))
            except BaseException as exc:
                errors.append(exc)

        await asyncio.to_thread(start)
    assert [type(e) for e in errors] == [ConfigurationError]
    assert "event loop" in str(errors[0]) and "run_coroutine_threadsafe" in str(errors[0])


async def test_the_handles_helpers_work_from_another_threads_loop() -> None:
    async with Runtime() as rt:
        handle = await paused_run(rt)
        receipts: list[SteeringReceipt] = []
        thread = in_thread(lambda: receipts.append(asyncio.run(handle.resume(actor=OPERATOR))))
        result = await asyncio.wait_for(handle.result(), FAILSAFE_S)
        await asyncio.to_thread(thread.join)
    assert [r.status for r in receipts] == [ReceiptStatus.ACCEPTED]
    assert result.status is RunStatus.COMPLETED


class HoldingPolicy:
    """A policy that holds every command until ``gate`` opens."""

    policy_id = "hold"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    async def __call__(self, cmd: SteeringCommand, ctx: Any, call_next: Any) -> Any:
        self.entered.set()
        await self.gate.wait()
        return await call_next(cmd)


async def test_a_submit_threadsafe_that_times_out_is_cancelled_and_can_be_sent_again() -> None:
    """No receipt in time: ``TimeoutError``, and the submit is cancelled on the runtime's loop
    (it took nothing, so its correlation id is free); the same command sent again is then
    accepted, once."""
    async with Runtime() as rt:
        handle = await paused_run(rt)
        hold = HoldingPolicy()
        rt.router.pipeline.insert(hold)  # type: ignore[arg-type]
        cmd = command(handle.run_id, SteeringKind.ADD_INSTRUCTION, {"text": "later"})
        errors: list[BaseException] = []

        def send() -> None:
            try:
                rt.submit_threadsafe(cmd, timeout=0.2)
            except BaseException as exc:
                errors.append(exc)

        await asyncio.to_thread(send)
        assert [type(e) for e in errors] == [TimeoutError]
        assert rt.router.state(cmd.correlation_id) is None  # never taken
        hold.gate.set()
        again = await asyncio.to_thread(rt.submit_threadsafe, cmd)
        assert again.status is ReceiptStatus.ACCEPTED
        await rt.submit(command(handle.run_id, SteeringKind.RESUME))
        await asyncio.wait_for(handle.result(), FAILSAFE_S)
        applied = [
            e
            for e in rt.steering_history(handle.run_id)
            if e.type == "steering.applied" and e.correlation_id == cmd.correlation_id
        ]
    assert len(applied) == 1


def _left_open_on_an_ended_loop() -> Runtime:
    """A runtime opened on a loop that ended without closing it (``asyncio.run`` returned)."""

    async def open_and_leave() -> Runtime:
        rt = Runtime()
        await rt.open()
        return rt

    return asyncio.run(open_and_leave())


def test_submit_threadsafe_to_a_runtime_whose_loop_ended_raises_runtime_closed() -> None:
    rt = _left_open_on_an_ended_loop()
    with pytest.raises(RuntimeClosed, match="event loop"):
        rt.submit_threadsafe(command("r-1", SteeringKind.REQUEST_STATUS))


def test_submit_from_another_loop_to_a_runtime_whose_loop_ended_raises_runtime_closed() -> None:
    rt = _left_open_on_an_ended_loop()
    with pytest.raises(RuntimeClosed, match="event loop"):
        asyncio.run(rt.submit(command("r-1", SteeringKind.REQUEST_STATUS)))


def test_submit_threadsafe_to_a_runtime_whose_loop_stopped_raises_runtime_closed() -> None:
    """A loop stopped but not closed takes the submit's callback and never runs it: the
    sender is told, not left waiting for ever."""
    loop = asyncio.new_event_loop()
    try:
        rt = Runtime()
        loop.run_until_complete(rt.open())  # the loop runs no more after this
        with pytest.raises(RuntimeClosed, match="event loop"):
            rt.submit_threadsafe(command("r-1", SteeringKind.REQUEST_STATUS))
    finally:
        loop.close()


async def test_a_result_awaited_on_another_threads_loop_wakes_when_the_run_ends() -> None:
    """The run ends on the runtime's loop; a waiter on another thread's loop is woken there
    (it was woken from the wrong thread, and its idle loop slept on)."""
    async with Runtime() as rt:
        gate = asyncio.Event()

        @tool
        async def wait_for_gate() -> str:
            """Wait until the test opens the gate."""
            await gate.wait()
            return "ok"

        agent = Agent(
            "worker",
            model=ScriptedModel([tool_call("wait_for_gate"), reply("done")]),
            tools=[wait_for_gate],
            instructions="work",
        )
        handle = await rt.start(agent, "go")
        waiting = threading.Event()
        results: list[Any] = []

        async def wait_there() -> Any:
            pending = asyncio.ensure_future(handle.result())
            await asyncio.sleep(0)  # the waiter is registered before the run can end
            waiting.set()
            return await pending

        thread = in_thread(lambda: results.append(asyncio.run(wait_there())))
        await asyncio.to_thread(waiting.wait, FAILSAFE_S)
        gate.set()
        await asyncio.to_thread(thread.join, FAILSAFE_S)
        assert not thread.is_alive(), "the other thread's waiter was never woken"
        # the runtime's own loop may wait on the same handle too
        assert (await handle.result()).status is RunStatus.COMPLETED
    assert [r.status for r in results] == [RunStatus.COMPLETED]
