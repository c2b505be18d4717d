"""A thread has one writer at a time: a ``SubAgentSession`` turn against another run of its
thread.

Two sessions on one thread id (or a session and a plain ``rt.start`` / ``agent.run`` with that
``thread_id``) ran side by side: each continued a transcript of its own, so the conversation
forked, and a command sent to ``SteeringTarget.thread(...)`` reached only the newer run: the
other turn never saw it. The thread is now held for a session's turn: a second writer on a
busy thread is ``ThreadBusy`` at once, before anything starts (as a graph thread's second
writer is); a session's own sends still take turns. Runs are held at gates, never by sleeps.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tinyagents import Agent, SubAgent
from tinyagents.errors import ConfigurationError, RunFailed, ThreadBusy, UnknownTargetError
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunStatus
from tinyagents.runtime import Runtime
from tinyagents.steering.inbox import LATE
from tinyagents.testkit import EventRecorder, FunctionModel, Gate, ScriptedModel, reply

WORKER = Path(__file__).with_name("session_thread_crash_worker.py")


@pytest.fixture(params=["memory", "sqlite"])
async def rt(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    """The in-memory default and a runtime on a real SQLite file."""
    if request.param == "memory":
        runtime = Runtime(testing=True)
    else:
        runtime = Runtime(f"sqlite:///{tmp_path / 'runs.db'}", testing=True)
    async with runtime:
        yield runtime


def held(gate: Gate, answer: str = "done") -> FunctionModel:
    """A model whose first call waits at ``gate``; every call answers ``answer``."""

    async def model(_: Any) -> str:
        if gate.calls == 0:
            await gate.wait()
        return answer

    return FunctionModel(model)


def chat(model: Any, name: str = "chat") -> SubAgent:
    return SubAgent(Agent(name, model))


def runs_on(rt: Runtime, thread_id: str) -> list[str]:
    return [h.run_id for h in rt.runs.handles() if h.info.thread_id == thread_id]


async def test_a_second_session_on_a_busy_thread_is_thread_busy(rt: Runtime) -> None:
    gate = Gate("first")
    first = chat(held(gate, "first answer")).session(runtime=rt, thread_id="t-1")
    calls: list[object] = []
    second = chat(FunctionModel(lambda r: calls.append(r) or "second answer")).session(
        runtime=rt, thread_id="t-1"
    )
    turn = asyncio.ensure_future(first.send("one"))
    await gate.entered.wait()
    with pytest.raises(ThreadBusy) as busy:
        await second.send("two")
    assert busy.value.thread_id == "t-1"
    # nothing of the refused turn started: no run, no model call, no transcript
    assert calls == [] and second.runs == [] and second.messages == []
    assert runs_on(rt, "t-1") == first.runs
    gate.open()
    assert await turn == "first answer"
    # the thread is free once the turn ended: the second session's turn runs now
    assert await second.send("two") == "second answer"
    assert [m.content for m in first.messages] == ["one", "first answer"]


async def test_a_sessions_own_sends_still_take_turns(rt: Runtime) -> None:
    gate = Gate("first")
    session = chat(held(gate, "answer")).session(runtime=rt, thread_id="t-own")
    one = asyncio.ensure_future(session.send("one"))
    await gate.entered.wait()
    two = asyncio.ensure_future(session.send("two"))
    gate.open()
    assert (await one, await two) == ("answer", "answer")
    assert [m.content for m in session.messages] == ["one", "answer", "two", "answer"]


async def test_a_session_turn_while_a_plain_run_of_the_thread_runs_is_thread_busy(
    rt: Runtime,
) -> None:
    gate = Gate("plain")
    plain = await rt.start(Agent("plain", held(gate)), "work", thread_id="t-2")
    await gate.entered.wait()
    session = chat(ScriptedModel([reply("turn")])).session(runtime=rt, thread_id="t-2")
    with pytest.raises(ThreadBusy):
        await session.send("hello")
    assert session.runs == []
    gate.open()
    await plain.result()
    assert await session.send("hello") == "turn"


async def test_agent_run_on_a_thread_a_session_turn_holds_is_thread_busy(rt: Runtime) -> None:
    gate = Gate("turn")
    session = chat(held(gate, "turn")).session(runtime=rt, thread_id="t-3")
    turn = asyncio.ensure_future(session.send("hello"))
    await gate.entered.wait()
    other = Agent("other", ScriptedModel([reply("other"), reply("other again")]))
    with pytest.raises(ThreadBusy):
        await other.run("work", runtime=rt, thread_id="t-3")
    with pytest.raises(ThreadBusy):
        await rt.start(other, "work", thread_id="t-3")
    assert runs_on(rt, "t-3") == session.runs
    gate.open()
    assert await turn == "turn"
    assert (await other.run("work", runtime=rt, thread_id="t-3")).output == "other"


async def test_plain_runs_of_one_thread_still_run_side_by_side(rt: Runtime) -> None:
    """Only a session's turn holds its thread: plain runs on one thread id keep running
    together, as before (a thread command goes to the newest of them)."""
    gate = Gate("plain")
    first = await rt.start(Agent("a", held(gate)), "work", thread_id="t-4")
    await gate.entered.wait()
    second = await rt.start(Agent("b", ScriptedModel([reply("b")])), "work", thread_id="t-4")
    assert (await second.result()).output == "b"
    gate.open()
    assert (await first.result()).output == "done"


async def test_another_tenants_thread_of_the_same_id_is_not_busy(rt: Runtime) -> None:
    gate = Gate("turn")
    session = chat(held(gate, "mine")).session(runtime=rt, thread_id="t-5")
    turn = asyncio.ensure_future(session.send("hello", tenant_id="acme"))
    await gate.entered.wait()
    theirs = chat(ScriptedModel([reply("theirs")])).session(runtime=rt, thread_id="t-5")
    assert await theirs.send("hello", tenant_id="globex") == "theirs"
    gate.open()
    assert await turn == "mine"


@pytest.mark.parametrize("how", ["cancelled", "timed out"])
async def test_a_turn_whose_caller_stops_waiting_releases_the_thread(rt: Runtime, how: str) -> None:
    gate = Gate("turn")
    first = chat(held(gate)).session(runtime=rt, thread_id="t-6")
    scopes: list[asyncio.Timeout] = []

    async def caller() -> Any:
        async with asyncio.timeout(None) as scope:
            scopes.append(scope)
            return await first.send("one")

    turn = asyncio.ensure_future(caller())
    await gate.entered.wait()
    if how == "cancelled":
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
    else:  # the caller's deadline passes while the turn is in its model call
        scopes[0].reschedule(asyncio.get_running_loop().time())
        with pytest.raises(TimeoutError):
            await turn
    (run_id,) = first.runs
    handle = rt.runs.get(run_id)
    assert handle is not None
    await handle.result()  # the turn's run ended, cancelled
    second = chat(ScriptedModel([reply("after")])).session(runtime=rt, thread_id="t-6")
    assert await second.send("two") == "after"


async def test_a_failing_turn_releases_the_thread(rt: Runtime) -> None:
    def broken(_: Any) -> str:
        raise RuntimeError("the model broke")

    first = chat(FunctionModel(broken)).session(runtime=rt, thread_id="t-7")
    with pytest.raises(RunFailed):
        await first.send("one")
    second = chat(ScriptedModel([reply("after")])).session(runtime=rt, thread_id="t-7")
    assert await second.send("two") == "after"
    # and the failed session's next turn runs too (its thread is free)
    first.subagent.agent.model = ScriptedModel([reply("again")])
    assert await first.send("three") == "again"


async def test_a_turn_refused_at_start_releases_the_thread(rt: Runtime) -> None:
    """A turn whose start is refused after the thread was taken (bad arguments) holds
    nothing: the next turn on the thread runs."""
    session = chat(ScriptedModel([reply("ok")])).session(runtime=rt, thread_id="t-8")
    with pytest.raises(UnknownTargetError):
        await session.send("one", tools=["no-such-tool"])
    assert session.runs == []
    assert await session.send("one") == "ok"


async def test_the_hold_goes_with_a_killed_process(tmp_path: Path) -> None:
    """The hold is the runtime's own, in its process: a process killed during a turn leaves
    no hold in the shared SQLite store, so the thread's next turn, in another process, runs
    (it is not stuck for ever)."""
    db = tmp_path / "runs.db"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        str(db),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    if not line.startswith(b"ready"):
        proc.kill()
        pytest.fail(f"worker: {line!r} {(await proc.stderr.read()).decode()}")
    proc.kill()
    await proc.wait()
    async with Runtime(f"sqlite:///{db}", testing=True) as rt:
        session = chat(ScriptedModel([reply("after the crash")])).session(
            runtime=rt, thread_id="t-crash"
        )
        assert await session.send("hello") == "after the crash"


async def test_a_plain_run_can_hold_its_thread_as_a_turn_does(rt: Runtime) -> None:
    gate = Gate("plain")
    holder = await rt.start(Agent("plain", held(gate)), "work", thread_id="t-9", hold_thread=True)
    await gate.entered.wait()
    with pytest.raises(ThreadBusy):
        await rt.start(Agent("other", ScriptedModel([reply("x")])), "work", thread_id="t-9")
    gate.open()
    await holder.result()
    other = await rt.start(Agent("other", ScriptedModel([reply("x")])), "work", thread_id="t-9")
    assert (await other.result()).output == "x"


async def test_a_send_cannot_let_go_of_the_hold(rt: Runtime) -> None:
    session = chat(ScriptedModel([reply("x")])).session(runtime=rt, thread_id="t-10")
    with pytest.raises(ConfigurationError, match="hold_thread"):
        await session.send("one", hold_thread=False)
    assert session.runs == []


async def test_of_two_turns_started_at_once_exactly_one_gets_the_thread(rt: Runtime) -> None:
    """Both starts run to their first await together (on a SQLite file, registering reads
    the store first): the hold is taken before that, so one gets the thread and the other is
    ``ThreadBusy``, never both running."""
    sessions = [
        chat(ScriptedModel([reply(f"answer {i}")])).session(runtime=rt, thread_id="t-11")
        for i in range(2)
    ]
    outcomes = await asyncio.gather(*(s.send("hi") for s in sessions), return_exceptions=True)
    assert sorted(type(o).__name__ for o in outcomes) == ["ThreadBusy", "str"]
    assert sum(len(s.runs) for s in sessions) == 1


async def test_a_turn_started_with_a_plain_run_of_the_thread_at_once_is_thread_busy(
    rt: Runtime,
) -> None:
    """A plain run of the thread that has not registered yet (its start is awaiting) is
    seen by a turn starting beside it: the turn is ``ThreadBusy``."""
    plain = Agent("plain", ScriptedModel([reply("plain")]))
    session = chat(ScriptedModel([reply("turn")])).session(runtime=rt, thread_id="t-12")
    started, turn = await asyncio.gather(
        rt.start(plain, "work", thread_id="t-12"), session.send("hi"), return_exceptions=True
    )
    assert isinstance(turn, ThreadBusy)
    assert not isinstance(started, BaseException)
    assert (await started.result()).output == "plain"
    assert await session.send("hi") == "turn"


OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])


def end_of_turn_instruction(run_id: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPERATOR,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "add the source"},
        delivery=SteeringDelivery.END_OF_TURN,
    )


async def test_a_finished_turn_is_not_reopened_beside_another_sessions_turn(
    rt: Runtime,
) -> None:
    """An END_OF_TURN instruction to a session's finished turn reopens its run for another
    exchange: a writer of the thread again. While another session's turn holds the thread,
    it reopened beside it (two writers); the instruction now fails as a late command does,
    with a failed receipt, and the run stays completed."""
    recorder = EventRecorder()
    rt.bus.add_sink(recorder)
    again = Gate("reopened")
    calls = 0

    async def model(_: Any) -> str:
        nonlocal calls
        calls += 1
        if calls > 1:  # the reopened turn's call waits at ``again``
            await again.wait()
            return "reopened"
        return "one"

    first = chat(FunctionModel(model)).session(runtime=rt, thread_id="t-13")
    assert await first.send("hi") == "one"
    gate = Gate("second")
    second = chat(held(gate, "two")).session(runtime=rt, thread_id="t-13")
    turn = asyncio.ensure_future(second.send("hi"))
    await gate.entered.wait()
    (run_id,) = first.runs
    receipt = await rt.submit(end_of_turn_instruction(run_id))
    handle = rt.runs.get(run_id)
    assert handle is not None
    assert handle.status is RunStatus.COMPLETED
    failed = [
        e
        for e in recorder.events
        if e.type == "steering.failed" and e.correlation_id == receipt.correlation_id
    ]
    assert receipt.status.value == "failed" or failed, receipt
    gate.open()
    assert await turn == "two"
    # the thread free again, the next instruction reopens the turn, which holds its thread
    assert (await rt.submit(end_of_turn_instruction(run_id))).status.value == "accepted"
    await again.entered.wait()
    third = chat(ScriptedModel([reply("three")])).session(runtime=rt, thread_id="t-13")
    with pytest.raises(ThreadBusy):
        await third.send("hi")
    again.open()
    assert (await handle.result()).output == "reopened"
    assert await third.send("hi") == "three"


async def test_a_thread_instruction_reaches_the_turn_that_holds_the_thread(rt: Runtime) -> None:
    """The loss the hold prevents: with a second session's turn running beside the first, a
    command for the thread went to the newer run only, and the first turn (whose transcript
    is the conversation the sender meant) never got it. Refused, the second turn starts
    nothing, so the thread's one run gets the instruction and answers with it."""
    gate = Gate("first")
    seen: list[str] = []

    async def model(request: Any) -> str:
        seen.append(" | ".join(str(m.content) for m in request.messages))
        if gate.calls == 0:
            await gate.wait()
        return f"answer {len(seen)}"

    first = chat(FunctionModel(model)).session(runtime=rt, thread_id="t-14")
    turn = asyncio.ensure_future(first.send("one"))
    await gate.entered.wait()
    second = chat(ScriptedModel([reply("two")])).session(runtime=rt, thread_id="t-14")
    with pytest.raises(ThreadBusy):
        await second.send("two")
    receipt = await rt.submit(
        SteeringCommand(
            target=SteeringTarget.thread("t-14"),
            actor=OPERATOR,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "cite the source"},
            delivery=SteeringDelivery.END_OF_TURN,
        )
    )
    assert receipt.status.value == "accepted" and receipt.run_id == first.runs[0]
    gate.open()
    await turn
    await first.send("three")  # waits for the turn the instruction reopened, if it did
    assert any("cite the source" in text for text in seen)
    assert any("cite the source" in str(m.content) for m in first.messages)


async def test_a_reopen_refused_for_a_busy_thread_says_which_run_holds_it(rt: Runtime) -> None:
    """The END_OF_TURN message that cannot reopen a finished turn (another session's turn
    holds the thread) failed with the generic late reason, as if the run were simply over:
    the reason now says the thread is busy and which run holds it."""
    recorder = EventRecorder()
    rt.bus.add_sink(recorder)
    first = chat(ScriptedModel([reply("one")])).session(runtime=rt, thread_id="t-15")
    assert await first.send("hi") == "one"
    gate = Gate("second")
    second = chat(held(gate, "two")).session(runtime=rt, thread_id="t-15")
    turn = asyncio.ensure_future(second.send("hi"))
    await gate.entered.wait()
    receipt = await rt.submit(end_of_turn_instruction(first.runs[0]))
    (holder,) = second.runs
    (failed,) = [
        e
        for e in recorder.events
        if e.type == "steering.failed" and e.correlation_id == receipt.correlation_id
    ]
    assert failed.reason is not None
    assert "thread 't-15' is busy" in failed.reason
    assert f"run {holder}" in failed.reason
    assert failed.reason.startswith(LATE)  # still a late command: it was not delivered
    gate.open()
    assert await turn == "two"


async def test_thread_busy_names_the_run_that_holds_the_thread(rt: Runtime) -> None:
    gate = Gate("first")
    first = chat(held(gate)).session(runtime=rt, thread_id="t-16")
    turn = asyncio.ensure_future(first.send("one"))
    await gate.entered.wait()
    (holder,) = first.runs
    for start in (
        lambda: chat(ScriptedModel([reply("x")])).session(runtime=rt, thread_id="t-16").send("x"),
        lambda: rt.start(Agent("plain", ScriptedModel([reply("x")])), "x", thread_id="t-16"),
    ):
        with pytest.raises(ThreadBusy) as busy:
            await start()
        assert busy.value.held_by == holder
        assert holder in str(busy.value)
    gate.open()
    await turn


async def test_a_long_thread_still_refuses_and_permits_its_writers() -> None:
    """300 finished turns kept on a thread (the registry keeps up to 1,000 finished runs):
    each start found the thread's writer by walking every run kept on it; it now looks at
    the thread's unfinished runs only. What it decides is the same: the turn under way is
    the writer (of a session, a plain run, a thread command), a finished turn reopened by
    END_OF_TURN is one again, and the newest of plain runs side by side is the one found."""
    gate = Gate("turn 301")
    turns = 0

    async def model(_: Any) -> str:
        nonlocal turns
        turns += 1
        if turns == 301:
            await gate.wait()
        return f"answer {turns}"

    async with Runtime(testing=True) as rt:
        session = chat(FunctionModel(model)).session(runtime=rt, thread_id="t-long")
        for _ in range(300):
            await session.send("hi")
        assert rt.runs.for_thread("t-long") is None
        turn = asyncio.ensure_future(session.send("hi"))
        await gate.entered.wait()
        writer = session.runs[-1]
        handle = rt.runs.for_thread("t-long")
        assert handle is not None and handle.run_id == writer
        with pytest.raises(ThreadBusy) as busy:
            await (
                chat(ScriptedModel([reply("x")])).session(runtime=rt, thread_id="t-long").send("x")
            )
        assert busy.value.held_by == writer
        with pytest.raises(ThreadBusy):
            await rt.start(Agent("plain", ScriptedModel([reply("x")])), "x", thread_id="t-long")
        command = SteeringCommand(
            target=SteeringTarget.thread("t-long"),
            actor=OPERATOR,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "be brief"},
        )
        assert (await rt.submit(command)).run_id == writer
        gate.open()
        assert await turn == "answer 302"  # the instruction took one more request
        assert rt.runs.for_thread("t-long") is None
        # plain runs share the thread: the newest unfinished one is its writer
        gates = [Gate("older"), Gate("newer")]
        older, newer = [
            await rt.start(Agent("plain", held(g)), "x", thread_id="t-long") for g in gates
        ]
        await gates[0].entered.wait()
        await gates[1].entered.wait()
        assert rt.runs.for_thread("t-long") is newer
        with pytest.raises(ThreadBusy) as busy:
            await session.send("hi")
        assert busy.value.held_by == newer.run_id
        gates[1].open()
        await newer.result()
        assert rt.runs.for_thread("t-long") is older
        gates[0].open()
        await older.result()
        # a finished turn that END_OF_TURN steering reopens is the thread's writer again
        again = Gate("reopened")
        first = chat(held(again, "reopened")).session(runtime=rt, thread_id="t-other")
        turn = asyncio.ensure_future(first.send("hi"))
        await again.entered.wait()
        again.open()
        await turn
        again = Gate("reopened again")
        first.subagent.agent.model = held(again, "reopened")
        (run_id,) = first.runs
        assert (await rt.submit(end_of_turn_instruction(run_id))).status.value == "accepted"
        await again.entered.wait()
        reopened = rt.runs.for_thread("t-other")
        assert reopened is not None and reopened.run_id == run_id
        with pytest.raises(ThreadBusy) as busy:
            await (
                chat(ScriptedModel([reply("x")])).session(runtime=rt, thread_id="t-other").send("x")
            )
        assert busy.value.held_by == run_id
        again.open()
        await reopened.result()
        assert rt.runs.for_thread("t-other") is None


async def test_a_threads_index_is_released_with_its_runs() -> None:
    """What the registry keeps per thread shrinks as its runs are released."""
    async with Runtime(retain_finished=5) as rt:
        session = chat(FunctionModel(lambda _: "ok")).session(runtime=rt, thread_id="t-kept")
        for _ in range(40):
            await session.send("hi")
        assert len(rt.runs) == 5
        assert len(rt.runs._threads["t-kept"]) == 5
        assert "t-kept" not in rt.runs._open
    async with Runtime(retain_finished=0) as rt:
        session = chat(FunctionModel(lambda _: "ok")).session(runtime=rt, thread_id="t-gone")
        for _ in range(10):
            await session.send("hi")
        assert len(rt.runs) == 0 and not rt.runs._threads and not rt.runs._open


async def test_a_reopened_older_run_does_not_pass_a_newer_one_of_its_thread(rt: Runtime) -> None:
    """Plain runs share a thread: an older one reopened by END_OF_TURN steering while a newer
    one runs is unfinished again, but the newer one stays the thread's newest run, as the
    walk over every run kept on the thread, in the order they were registered, found it."""
    calls = 0
    again = Gate("older again")

    async def older_model(_: Any) -> str:
        nonlocal calls
        calls += 1
        if calls > 1:
            await again.wait()
        return "older"

    older = await rt.start(Agent("older", FunctionModel(older_model)), "x", thread_id="t-17")
    await older.result()
    gate = Gate("newer")
    newer = await rt.start(Agent("newer", held(gate)), "x", thread_id="t-17")
    await gate.entered.wait()
    assert (await rt.submit(end_of_turn_instruction(older.run_id))).status.value == "accepted"
    await again.entered.wait()
    assert older.status is RunStatus.RUNNING
    assert rt.runs.for_thread("t-17") is newer
    gate.open()
    await newer.result()
    assert rt.runs.for_thread("t-17") is older
    again.open()
    await older.result()
    assert rt.runs.for_thread("t-17") is None
