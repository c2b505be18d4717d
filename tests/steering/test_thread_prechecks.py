"""A command for a thread with no live run waits for one (it is deferred), but only a command
that could ever be accepted: what the policies can refuse without a run (the sender's
authority, the payload's size) is refused at once, not kept, and not handed to the thread's
next run. What needs a run to judge (tenant, tree, allowlists, budget) waits for one, and a
foreign tenant's thread looks exactly like a thread with no run."""

from __future__ import annotations

from typing import Any

import pytest
from steerkit import MakeRun, apply_ready, make_command, start_run

from tinyagents.protocol import ReceiptStatus, SteeringActor, SteeringCommand, SteeringTarget
from tinyagents.runtime import Runtime
from tinyagents.steering import CheckPolicy, PayloadPolicy, PolicyContext, SenderContext
from tinyagents.testkit import EventRecorder

THREAD = SteeringTarget.thread("t-1")


def _to_thread(**fields: Any) -> SteeringCommand:
    return make_command(target=THREAD, **fields)


async def _refused_at_once(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, cmd: SteeringCommand, policy: str
) -> str:
    """Submit ``cmd`` to a thread with no run: it is rejected by ``policy`` there and then,
    and the thread's next run never sees it. Its reason."""
    receipt = await rt.submit(cmd)
    assert receipt.status is ReceiptStatus.REJECTED, receipt
    assert receipt.policy_id == policy
    assert receipt.run_id is None
    assert recorder.lifecycle(cmd.correlation_id) == ["requested", "rejected"]
    handle = await make_run("r-1", thread_id="t-1")
    assert apply_ready(handle) == []
    assert rt.router.open_commands() == []
    recorder.assert_every_command_terminal()
    assert receipt.reason is not None
    return receipt.reason


async def test_a_human_without_the_control_scope_is_refused_before_any_run(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    viewer = SteeringActor.human("vic", scopes=["agent:read"])
    reason = await _refused_at_once(rt, make_run, recorder, _to_thread(actor=viewer), "authority")
    assert "agent:control" in reason


async def test_an_oversized_payload_is_refused_before_any_run(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    cmd = _to_thread(payload={"text": "x" * 100_000})
    reason = await _refused_at_once(rt, make_run, recorder, cmd, "payload")
    assert reason.startswith("payload too large")
    # the steering history keeps no 100 kB copy of it: its events carry a summary
    assert all(len(str(e.payload_summary)) < 1_000 for e in recorder.steering(cmd.correlation_id))


async def test_the_pipelines_own_payload_bound_is_the_one_applied(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    rt.router.pipeline.remove("payload").insert(PayloadPolicy(max_text_bytes=64))
    cmd = _to_thread(payload={"text": "y" * 100})
    assert "> 64 bytes" in await _refused_at_once(rt, make_run, recorder, cmd, "payload")


async def test_an_untrusted_runtime_middleware_is_refused_before_any_run(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    cmd = _to_thread(actor=SteeringActor.middleware("rogue"))
    reason = await _refused_at_once(rt, make_run, recorder, cmd, "authority")
    assert "not registered as runtime middleware" in reason


async def test_the_test_actor_outside_a_testing_runtime_is_refused_before_any_run(
    recorder: EventRecorder,
) -> None:
    async with Runtime(sinks=[recorder]) as rt:
        cmd = _to_thread(actor=SteeringActor.test())
        receipt = await rt.submit(cmd)
        assert receipt.status is ReceiptStatus.REJECTED
        assert receipt.policy_id == "authority"
        assert recorder.lifecycle(cmd.correlation_id) == ["requested", "rejected"]


async def test_a_trusted_middleware_and_a_scoped_human_still_wait_for_the_run(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    capability = rt.router.issue_capability("guard")
    by_middleware = _to_thread(actor=SteeringActor.middleware("guard"))
    by_human = _to_thread()
    deferred = await rt.router.submit(by_middleware, capability=capability)
    assert deferred.status is ReceiptStatus.DEFERRED
    assert (await rt.submit(by_human)).status is ReceiptStatus.DEFERRED
    handle = await make_run("r-1", thread_id="t-1")
    applied = {c.correlation_id for c in apply_ready(handle)}
    assert applied == {by_middleware.correlation_id, by_human.correlation_id}


async def test_another_tenants_thread_still_looks_like_one_with_no_run(
    rt: Runtime, make_run: MakeRun
) -> None:
    """Nothing about the thread is judged before a run of it is known: a scoped human of
    another tenant is deferred exactly as for a thread nobody has (and rejected only by the
    run, as not found), so the receipt tells nothing about the other tenant."""
    await make_run("r-other", thread_id="t-1", tenant_id="other")
    stranger = SteeringActor.human("sam", tenant_id="acme", scopes=["agent:control"])
    to_theirs = _to_thread(actor=stranger)
    to_nobodys = make_command(target=SteeringTarget.thread("t-none"), actor=stranger)
    theirs, nobodys = await rt.submit(to_theirs), await rt.submit(to_nobodys)
    assert (theirs.status, theirs.reason, theirs.policy_id, theirs.run_id) == (
        nobodys.status,
        nobodys.reason.replace("t-none", "t-1") if nobodys.reason else None,
        nobodys.policy_id,
        nobodys.run_id,
    )
    assert theirs.status is ReceiptStatus.DEFERRED


class NoFridays(CheckPolicy):
    """A custom policy that can judge a command by its sender alone."""

    policy_id = "no-fridays"

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        return _friday(cmd)

    def check_sender(self, cmd: SteeringCommand, ctx: SenderContext) -> str | None:
        return _friday(cmd)


def _friday(cmd: SteeringCommand) -> str | None:
    return "closed on fridays" if "friday" in (cmd.text or "") else None


class Broken(CheckPolicy):
    policy_id = "broken"

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        return None

    def check_sender(self, cmd: SteeringCommand, ctx: SenderContext) -> str | None:
        raise RuntimeError("bug")


async def test_a_custom_policy_can_refuse_by_the_sender_alone(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    rt.router.pipeline.insert(NoFridays())
    cmd = _to_thread(payload={"text": "work on friday"})
    assert await _refused_at_once(rt, make_run, recorder, cmd, "no-fridays") == "closed on fridays"


async def test_a_policy_whose_sender_check_raises_refuses_the_command(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, caplog: pytest.LogCaptureFixture
) -> None:
    """Fail closed, as a ``check`` that raises does."""
    rt.router.pipeline.insert(Broken())
    reason = await _refused_at_once(rt, make_run, recorder, _to_thread(), "broken")
    assert "RuntimeError" in reason
    assert any(r.exc_info and "bug" in str(r.exc_info[1]) for r in caplog.records)


async def test_the_sender_check_is_asked_only_while_no_run_is_known(
    rt: Runtime, make_run: MakeRun
) -> None:
    seen: list[Any] = []

    class Spy(CheckPolicy):
        policy_id = "spy"

        def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
            return None

        def check_sender(self, cmd: SteeringCommand, ctx: SenderContext) -> str | None:
            seen.append(ctx)
            return None

    rt.router.pipeline.insert(Spy())
    assert (await rt.submit(_to_thread())).status is ReceiptStatus.DEFERRED
    assert [(type(c), c.testing) for c in seen] == [(SenderContext, True)]
    await make_run("r-1", thread_id="t-1")  # the run's own evaluation calls check, not this
    assert len(seen) == 1


async def test_a_thread_with_no_run_holds_at_most_max_queued_commands_per_sender_scope() -> None:
    """What waits for a thread's next run is bounded as a run's queue is: every command past
    ``max_queued`` was told ``deferred`` and kept, only to be rejected ("the run's queue is
    full") the moment a run of the thread registered. It is refused at once instead, under
    the queue's policy id; a cancel is taken up to twice the bound, as a run's queue takes it;
    and one tenant's waiting commands take no room from another's (thread ids are each
    tenant's own)."""
    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder], max_queued=3) as rt:
        receipts = [(await rt.submit(_to_thread())) for _ in range(4)]
        assert [r.status for r in receipts[:3]] == [ReceiptStatus.DEFERRED] * 3
        refused = receipts[3]
        assert (refused.status, refused.policy_id, refused.run_id) == (
            ReceiptStatus.REJECTED,
            "queue",
            None,
        )
        assert "max_queued=3" in (refused.reason or "") and "3 commands" in (refused.reason or "")
        # another tenant's commands for its own thread of that name still wait
        acme = SteeringActor.human("sam", tenant_id="acme", scopes=["agent:control"])
        assert (await rt.submit(_to_thread(actor=acme))).status is ReceiptStatus.DEFERRED
        # a cancel is taken, up to twice the bound
        cancels = [_to_thread(kind="cancel", payload={"reason": f"{i}"}) for i in range(4)]
        statuses = [(await rt.submit(cmd)).status for cmd in cancels]
        assert statuses == [ReceiptStatus.DEFERRED] * 3 + [ReceiptStatus.REJECTED]
        handle = await start_run(rt, "r-1", thread_id="t-1")
        # what waited was handed over whole: nothing more was rejected for want of room
        rejected = {e.correlation_id for e in recorder.of_type("steering.rejected")}
        assert rejected == {refused.correlation_id, cancels[3].correlation_id}
        assert len(handle.inbox) == 3  # the three cancels (they superseded the steers)


async def test_a_thread_command_handed_off_leaves_the_books_and_one_not_sent_waits_on(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    """``hand_off``: a command waiting for its thread's next run given to another runtime (the
    Redis control plane hands it to the worker where a run of the thread is). Sent: it leaves
    this router's books with no event, its id still taken. Not sent: it waits on; and a run of
    its thread that registered here while it was being sent takes it."""
    gone, kept, raced = (_to_thread() for _ in range(3))
    for cmd in (gone, kept, raced):
        assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
    waiting = rt.router.waiting_for_threads()
    assert [c.correlation_id for c, _ in waiting] == [c.correlation_id for c in (gone, kept, raced)]
    assert {tenant for _, tenant in waiting} == {"default"}
    sent: list[str] = []

    async def send(cmd: SteeringCommand) -> bool:
        sent.append(cmd.correlation_id)
        assert rt.router.waiting_for_threads() == [(c, "default") for c in (kept, raced)]
        return True

    assert await rt.router.hand_off(gone, send) is True and sent == [gone.correlation_id]
    assert await rt.router.hand_off(gone, send) is False  # not waiting any more
    assert recorder.lifecycle(gone.correlation_id) == ["requested", "deferred"]
    assert (await rt.submit(gone)).status is ReceiptStatus.DUPLICATE

    async def refuse(cmd: SteeringCommand) -> bool:
        return False

    assert await rt.router.hand_off(kept, refuse) is False
    assert [c for c, _ in rt.router.waiting_for_threads()] == [raced, kept]

    async def lost_to_a_run_here(cmd: SteeringCommand) -> bool:
        await make_run("r-1", thread_id="t-1")  # registers meanwhile: takes ``kept`` at once
        raise ConnectionError("Redis went away")

    with pytest.raises(ConnectionError):
        await rt.router.hand_off(raced, lost_to_a_run_here)
    assert rt.router.waiting_for_threads() == []
    assert recorder.lifecycle(raced.correlation_id)[-1] == "accepted"
    assert recorder.lifecycle(kept.correlation_id)[-1] == "accepted"
    assert [c.correlation_id for c in rt.router.open_commands()] == [
        kept.correlation_id,
        raced.correlation_id,
    ]
