"""Every built-in policy, through the router, plus custom, deferring and per-run policies."""

from __future__ import annotations

from typing import Any

import pytest
from steerkit import OPERATOR, MakeRun, apply_ready, finish_run, make_command, start_run

from tinyagents.errors import ConfigurationError
from tinyagents.events import MASK, SteeringEvent
from tinyagents.protocol import (
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunDriver, RunInfo, RunLimits, RunTree, RunUsage
from tinyagents.runtime import Runtime
from tinyagents.steering import (
    AllowlistPolicy,
    AuthorityPolicy,
    BudgetPolicy,
    CallNext,
    CheckPolicy,
    Decision,
    PayloadPolicy,
    PolicyContext,
    PolicyPipeline,
    SenderContext,
    StalenessPolicy,
    default_pipeline,
    default_policies,
)
from tinyagents.testkit import EventRecorder, FakeClock, use_clock

K = SteeringKind


def test_default_order() -> None:
    assert default_pipeline().ids == ["authority", "allowlist", "budget", "staleness", "payload"]


# --------------------------------------------------------------------------- authority


async def test_human_without_control_scope_is_rejected(rt: Runtime, make_run: MakeRun) -> None:
    await make_run("r-1")
    viewer = SteeringActor.human("vic", scopes=["agent:read"])
    receipt = await rt.submit(make_command("r-1", actor=viewer))
    assert receipt.status is ReceiptStatus.REJECTED
    assert receipt.policy_id == "authority"
    assert receipt.reason is not None and "agent:control" in receipt.reason
    assert len(rt.runs.get("r-1").inbox) == 0  # type: ignore[union-attr]


async def test_human_with_control_scope_of_the_same_tenant_is_accepted(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("r-1", tenant_id="acme")
    ops = SteeringActor.human("ana", tenant_id="acme", scopes=["agent:control"])
    assert (await rt.submit(make_command("r-1", actor=ops))).status is ReceiptStatus.ACCEPTED


@pytest.mark.parametrize(
    "target",
    [
        lambda run_id: SteeringTarget.agent_run(run_id),
        lambda run_id: SteeringTarget.subagent_run("r-parent", run_id),
    ],
    ids=["agent_run", "subagent_run"],
)
async def test_foreign_tenant_looks_exactly_like_a_missing_run(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, target: Any
) -> None:
    await make_run("r-parent", tenant_id="globex")
    await make_run("r-theirs", parent="r-parent", tenant_id="globex")
    intruder = SteeringActor.human("eve", tenant_id="acme", scopes=["agent:control"])

    foreign = await rt.submit(make_command(actor=intruder, target=target("r-theirs")))
    missing = await rt.submit(make_command(actor=intruder, target=target("r-nowhere")))

    assert foreign.status is missing.status is ReceiptStatus.REJECTED
    assert foreign.reason is not None and foreign.reason.startswith("not found:")
    assert foreign.reason.replace("r-theirs", "X") == missing.reason.replace("r-nowhere", "X")  # type: ignore[union-attr]
    assert (foreign.policy_id, foreign.run_id) == (missing.policy_id, missing.run_id)
    assert foreign.run_id is None
    assert recorder.lifecycle(foreign.correlation_id) == ["requested", "rejected"]
    assert recorder.lifecycle(missing.correlation_id) == ["requested", "rejected"]
    theirs, nowhere = (
        recorder.steering(foreign.correlation_id),
        recorder.steering(missing.correlation_id),
    )
    for a, b in zip(theirs, nowhere, strict=True):  # no tenant or tree data leaks into events
        assert (a.tenant_id, a.root_run_id, a.parent_run_id) == (b.tenant_id, b.root_run_id, None)


def test_authority_policy_itself_reports_a_foreign_tenant_as_not_found() -> None:
    # Defence in depth: a command re-evaluated outside the router's resolution step.
    info = RunInfo(run_id="r-theirs", tenant_id="globex")
    tree = RunTree()
    tree.add(info)
    intruder = SteeringActor.human("eve", tenant_id="acme", scopes=["agent:control"])
    cmd = make_command("r-theirs", actor=intruder)
    reason = AuthorityPolicy().check(cmd, PolicyContext(target=info, tree=tree))
    assert reason == "not found: run r-theirs"


async def test_foreign_human_thread_command_waits_like_an_unknown_thread(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("r-1", tenant_id="globex", thread_id="t-globex")
    intruder = SteeringActor.human("eve", tenant_id="acme", scopes=["agent:control"])
    foreign = await rt.submit(
        make_command(actor=intruder, target=SteeringTarget.thread("t-globex"))
    )
    unknown = await rt.submit(make_command(actor=intruder, target=SteeringTarget.thread("t-none")))
    assert foreign.status is unknown.status is ReceiptStatus.DEFERRED
    assert (foreign.run_id, foreign.policy_id) == (unknown.run_id, unknown.policy_id)


async def test_a_foreign_thread_command_never_reaches_the_runs_of_that_thread(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    # The runs of another tenant's thread come and go: the command still waits as on a
    # thread with no run, and none of its events lands in their histories (guarantees.md,
    # "Tenants": filed in the sender's audit trail only).
    first = await make_run("r-1", tenant_id="globex", thread_id="t-globex")
    intruder = SteeringActor.human("eve", tenant_id="acme", scopes=["agent:control"])
    foreign = await rt.submit(
        make_command(actor=intruder, target=SteeringTarget.thread("t-globex"))
    )
    await finish_run(rt, first)
    await make_run("r-2", tenant_id="globex", thread_id="t-globex")
    assert rt.steering_history("r-1") == rt.steering_history("r-2") == []
    assert recorder.lifecycle(foreign.correlation_id) == ["requested", "deferred"]
    events = recorder.steering(foreign.correlation_id)
    assert all(e.run_id is None and e.tenant_id == "acme" for e in events)


async def test_a_thread_command_from_a_run_means_its_own_tenants_thread(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    """Thread ids are each tenant's own. A parent agent (a run's middleware, a graph
    supervisor) sending to a thread means the thread of its own run's tenant: another
    tenant's newer run on a thread of that name took the command instead, which was refused
    as not a descendant (its own child on that thread was live), named that run in the
    receipt and was filed in that other tenant's history."""
    await make_run("pa", tenant_id="acme")
    await make_run("ca", parent="pa", tenant_id="acme", thread_id="t-1")
    await make_run("rb", tenant_id="globex", thread_id="t-1")
    for actor in (
        SteeringActor.parent_agent("pa", "orchestrator"),
        SteeringActor.middleware("guard", run_id="pa"),
    ):
        receipt = await rt.submit(make_command(actor=actor, target=SteeringTarget.thread("t-1")))
        assert (receipt.status, receipt.run_id) == (ReceiptStatus.ACCEPTED, "ca"), receipt
    assert rt.steering_history("rb") == []

    # with no run of its tenant on the thread, it waits for one, past the other tenant's
    await make_run("pb", tenant_id="acme")
    waiting = await rt.submit(
        make_command(
            actor=SteeringActor.parent_agent("pb", "orchestrator"),
            target=SteeringTarget.thread("t-2"),
        )
    )
    assert waiting.status is ReceiptStatus.DEFERRED
    await make_run("rb-2", tenant_id="globex", thread_id="t-2")
    assert rt.steering_history("rb-2") == []
    assert recorder.lifecycle(waiting.correlation_id) == ["requested", "deferred"]
    await make_run("cb", parent="pb", tenant_id="acme", thread_id="t-2")
    assert recorder.lifecycle(waiting.correlation_id) == ["requested", "deferred", "accepted"]
    assert recorder.steering(waiting.correlation_id)[-1].run_id == "cb"


async def test_a_waiting_thread_command_from_a_run_is_its_own_tenants(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    """A thread command from a parent agent (a run's middleware, a graph supervisor) that
    finds no run of its tenant on the thread waits for one among that tenant's runs, and its
    events belong to that tenant: they carried no tenant, so its operator (the API shows a
    tenant's events only) never saw them."""
    await make_run("pa", tenant_id="acme")
    await make_run("rb", tenant_id="globex", thread_id="t-1")
    for actor in (
        SteeringActor.parent_agent("pa", "orchestrator"),
        SteeringActor.middleware("guard", run_id="pa"),
        SteeringActor.graph_supervisor("pa", "plan"),
    ):
        receipt = await rt.submit(make_command(actor=actor, target=SteeringTarget.thread("t-1")))
        assert receipt.status is ReceiptStatus.DEFERRED, receipt
        events = recorder.steering(receipt.correlation_id)
        assert [e.type for e in events] == ["steering.requested", "steering.deferred"]
        assert all(e.run_id is None and e.tenant_id == "acme" for e in events), events
    assert rt.steering_history("rb") == []
    # so do those of its command refused with no run (here: one that names no run)
    missing = await rt.submit(
        make_command("r-nowhere", actor=SteeringActor.parent_agent("pa", "orchestrator"))
    )
    assert missing.status is ReceiptStatus.REJECTED, missing
    events = recorder.steering(missing.correlation_id)
    assert [e.tenant_id for e in events] == ["acme", "acme"], events


@pytest.fixture
async def family(make_run: MakeRun) -> None:
    """root ─┬─ c-1 ── g-1
    └─ c-2"""
    await make_run("root")
    await make_run("c-1", parent="root")
    await make_run("c-2", parent="root")
    await make_run("g-1", parent="c-1")


@pytest.mark.usefixtures("family")
async def test_parent_agent_may_steer_only_its_descendants(rt: Runtime) -> None:
    c1 = SteeringActor.parent_agent("c-1", "researcher")
    sibling = await rt.submit(make_command("c-2", actor=c1))
    assert sibling.status is ReceiptStatus.REJECTED
    assert sibling.policy_id == "authority"
    assert sibling.reason is not None and "sibling" in sibling.reason

    upwards = await rt.submit(make_command("root", actor=c1))
    assert upwards.status is ReceiptStatus.REJECTED
    assert upwards.reason is not None and "not its descendant" in upwards.reason

    itself = await rt.submit(make_command("c-1", actor=c1))
    assert itself.status is ReceiptStatus.REJECTED

    child = await rt.submit(make_command("g-1", actor=c1))
    assert child.status is ReceiptStatus.ACCEPTED
    root = SteeringActor.parent_agent("root", "orchestrator")
    grandchild = await rt.submit(make_command("g-1", actor=root))
    assert grandchild.status is ReceiptStatus.ACCEPTED


@pytest.mark.usefixtures("family")
async def test_a_grandchild_posing_as_a_parent_is_refused(rt: Runtime) -> None:
    """Authority follows the run tree, not the actor's claim: a grandchild steering as a
    parent agent reaches neither its own parent nor its parent's sibling, whatever agent
    name it gives; only runs below it."""
    for name in ("researcher", "orchestrator"):
        g1 = SteeringActor.parent_agent("g-1", name)
        for target, relation in (("c-1", "not its descendant"), ("c-2", "not its descendant")):
            receipt = await rt.submit(make_command(target, actor=g1))
            assert receipt.status is ReceiptStatus.REJECTED, (name, target)
            assert receipt.policy_id == "authority"
            assert receipt.reason is not None and relation in receipt.reason
            assert f"run {target}" in receipt.reason


@pytest.mark.usefixtures("family")
async def test_sibling_steering_needs_a_grant(rt: Runtime) -> None:
    c1 = SteeringActor.parent_agent("c-1", "researcher")
    rt.grant_sibling_steering("c-1", "c-2")
    assert (await rt.submit(make_command("c-2", actor=c1))).status is ReceiptStatus.ACCEPTED
    # A grant goes one way only.
    c2 = SteeringActor.parent_agent("c-2", "writer")
    assert (await rt.submit(make_command("c-1", actor=c2))).status is ReceiptStatus.REJECTED


@pytest.mark.usefixtures("family")
async def test_subagent_target_checks_the_parentage(rt: Runtime) -> None:
    c1 = SteeringActor.parent_agent("c-1", "researcher")
    ok = await rt.submit(make_command(actor=c1, target=SteeringTarget.subagent_run("c-1", "g-1")))
    assert ok.status is ReceiptStatus.ACCEPTED
    wrong = await rt.submit(
        make_command(actor=OPERATOR, target=SteeringTarget.subagent_run("c-2", "g-1"))
    )
    assert wrong.status is ReceiptStatus.REJECTED
    assert wrong.reason == "not found: run g-1 is not a child of c-2"


async def test_graph_supervisor_steers_its_graph_run_and_its_tasks(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("graph", kind="graph")
    await make_run("graph-task", parent="graph")
    await make_run("elsewhere")
    sup = SteeringActor.graph_supervisor("graph", "supervisor")
    assert (await rt.submit(make_command("graph", actor=sup))).accepted
    assert (await rt.submit(make_command("graph-task", actor=sup))).accepted
    other = await rt.submit(make_command("elsewhere", actor=sup))
    assert other.status is ReceiptStatus.REJECTED
    assert other.policy_id == "authority"


async def test_middleware_of_a_run_steers_that_run_and_its_descendants(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("r-1")
    await make_run("r-1-child", parent="r-1")
    await make_run("r-2")
    guard = SteeringActor.middleware("guard", run_id="r-1")
    assert (await rt.submit(make_command("r-1", actor=guard))).accepted
    assert (await rt.submit(make_command("r-1-child", actor=guard))).accepted
    other = await rt.submit(make_command("r-2", actor=guard))
    assert other.status is ReceiptStatus.REJECTED
    assert other.reason is not None and "its own run" in other.reason


async def test_runtime_level_middleware_needs_a_trusted_name(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("r-1")
    # Nothing is trusted by name by default; the runtime's own supervisor is trusted through
    # its capability, so the same actor typed by anyone else is refused (tests/supervisor).
    forged = await rt.submit(make_command("r-1", actor=SteeringActor.middleware("supervisor")))
    assert forged.status is ReceiptStatus.REJECTED
    stranger = await rt.submit(make_command("r-1", actor=SteeringActor.middleware("stranger")))
    assert stranger.status is ReceiptStatus.REJECTED
    assert stranger.reason is not None and "not registered as runtime middleware" in stranger.reason


async def test_trusted_middleware_names_are_configurable() -> None:
    async with Runtime(testing=True, trusted_middleware=["guard"]) as rt:
        await start_run(rt, "r-1")
        assert (
            await rt.submit(make_command("r-1", actor=SteeringActor.middleware("guard")))
        ).accepted
        default_name = await rt.submit(
            make_command("r-1", actor=SteeringActor.middleware("supervisor"))
        )
        assert default_name.status is ReceiptStatus.REJECTED


async def test_test_actor_is_allowed_only_in_a_testing_runtime(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("r-1")
    assert (await rt.submit(make_command("r-1", actor=SteeringActor.test()))).accepted
    async with Runtime() as production:
        await start_run(production, "r-1")
        receipt = await production.submit(make_command("r-1", actor=SteeringActor.test()))
    assert receipt.status is ReceiptStatus.REJECTED
    assert receipt.policy_id == "authority"
    assert receipt.reason is not None and "testing=True" in receipt.reason


# --------------------------------------------------------------------------- allowlist


async def test_tools_can_only_narrow(rt: Runtime, make_run: MakeRun) -> None:
    await make_run("r-1", tools=["search", "fetch"])
    narrower = await rt.submit(make_command("r-1", K.CONSTRAIN_TOOLS, {"tools": ["search"]}))
    assert narrower.accepted
    same = await rt.submit(make_command("r-1", K.CONSTRAIN_TOOLS, {"tools": ["fetch", "search"]}))
    assert same.accepted
    nothing = await rt.submit(make_command("r-1", K.CONSTRAIN_TOOLS, {"tools": []}))
    assert nothing.accepted
    wider = await rt.submit(make_command("r-1", K.CONSTRAIN_TOOLS, {"tools": ["search", "shell"]}))
    assert wider.status is ReceiptStatus.REJECTED
    assert wider.policy_id == "allowlist"
    assert wider.reason is not None and "'shell'" in wider.reason and "only narrow" in wider.reason


async def test_models_can_only_narrow(rt: Runtime, make_run: MakeRun) -> None:
    await make_run("r-1", models=["gpt-a", "gpt-b"])
    assert (await rt.submit(make_command("r-1", K.CONSTRAIN_MODEL, {"models": ["gpt-b"]}))).accepted
    wider = await rt.submit(make_command("r-1", K.CONSTRAIN_MODEL, {"models": ["gpt-b", "gpt-c"]}))
    assert wider.status is ReceiptStatus.REJECTED
    assert wider.policy_id == "allowlist"
    assert wider.reason is not None and "gpt-c" in wider.reason


async def test_a_run_without_an_allowlist_accepts_any_constraint(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("r-1")  # tools=None, models=None: nothing to widen
    assert (await rt.submit(make_command("r-1", K.CONSTRAIN_TOOLS, {"tools": ["x"]}))).accepted
    assert (await rt.submit(make_command("r-1", K.CONSTRAIN_MODEL, {"models": ["m"]}))).accepted


# --------------------------------------------------------------------------- budget


async def _parent_and_child(
    make_run: MakeRun, *, parent_limits: RunLimits, parent_used: int = 0, child_used: int = 0
) -> None:
    parent = await make_run("parent", limits=parent_limits)
    parent.info.usage = RunUsage(model_calls=parent_used)
    child = await make_run("child", parent="parent")
    child.info.usage = RunUsage(model_calls=child_used)


async def test_update_budget_above_the_parents_remaining_is_rejected(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    await _parent_and_child(make_run, parent_limits=RunLimits(max_model_calls=10), parent_used=4)
    too_much = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"max_model_calls": 7}))
    assert too_much.status is ReceiptStatus.REJECTED
    assert too_much.policy_id == "budget"
    assert too_much.reason is not None and "max_model_calls=7" in too_much.reason
    assert recorder.steering(too_much.correlation_id)[-1].payload_summary == {"max_model_calls": 7}
    assert (
        await rt.submit(make_command("child", K.UPDATE_BUDGET, {"max_model_calls": 6}))
    ).accepted


async def test_what_the_child_already_used_counts_towards_its_ceiling(
    rt: Runtime, make_run: MakeRun
) -> None:
    await _parent_and_child(
        make_run, parent_limits=RunLimits(max_model_calls=10), parent_used=4, child_used=2
    )
    assert (
        await rt.submit(make_command("child", K.UPDATE_BUDGET, {"max_model_calls": 8}))
    ).accepted
    over = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"max_model_calls": 9}))
    assert over.status is ReceiptStatus.REJECTED


async def test_every_ancestors_remaining_budget_bounds_a_grandchild(
    rt: Runtime, make_run: MakeRun
) -> None:
    """A model call of a grandchild counts against every ancestor: the tightest of them
    bounds what ``update_budget`` may give it, not only its parent (whose own limit, set
    when the root had more left, or absent, says nothing of what the root has now)."""
    root = await make_run("root", limits=RunLimits(max_model_calls=10))
    root.info.usage = RunUsage(model_calls=8)
    await make_run("parent", parent="root", limits=RunLimits(max_model_calls=10))
    child = await make_run("child", parent="parent")
    child.info.usage = RunUsage(model_calls=1)
    over = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"max_model_calls": 4}))
    assert over.status is ReceiptStatus.REJECTED and over.policy_id == "budget"
    assert over.reason == (
        "update_budget max_model_calls=4 exceeds what ancestor run root has left "
        "(2; the child already used 1)"
    )
    assert (
        await rt.submit(make_command("child", K.UPDATE_BUDGET, {"max_model_calls": 3}))
    ).accepted


async def test_an_unbounded_parent_does_not_lift_the_roots_bound(
    rt: Runtime, make_run: MakeRun
) -> None:
    root = await make_run("root", limits=RunLimits(max_tokens=1_000))
    root.info.usage = RunUsage(input_tokens=600, output_tokens=300)
    parent = await make_run("parent", parent="root")
    parent.info.limits = RunLimits()  # no token limit of its own
    await make_run("child", parent="parent")
    over = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"max_tokens": 500}))
    assert over.status is ReceiptStatus.REJECTED
    assert over.reason is not None and "ancestor run root has left (100" in over.reason


async def test_input_and_output_token_budgets_are_bounded_by_the_parents_too(
    rt: Runtime, make_run: MakeRun
) -> None:
    """``RunLimits(max_input_tokens=, max_output_tokens=)`` bound a run as ``max_tokens``
    does, so ``update_budget`` takes them too, held to what the parent has left."""
    parent = await make_run("parent", limits=RunLimits(max_output_tokens=100))
    parent.info.usage = RunUsage(output_tokens=60)
    child = await make_run("child", parent="parent")
    child.info.usage = RunUsage(output_tokens=10)
    over = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"max_output_tokens": 51}))
    assert over.status is ReceiptStatus.REJECTED and over.policy_id == "budget"
    assert over.reason is not None and "max_output_tokens=51" in over.reason
    fits = make_command("child", K.UPDATE_BUDGET, {"max_output_tokens": 50, "max_input_tokens": 7})
    assert (await rt.submit(fits)).accepted


async def test_budget_of_a_root_run_or_an_unbounded_field_is_not_capped(
    rt: Runtime, make_run: MakeRun
) -> None:
    await _parent_and_child(make_run, parent_limits=RunLimits(max_model_calls=1))
    assert (
        await rt.submit(make_command("parent", K.UPDATE_BUDGET, {"max_model_calls": 99}))
    ).accepted
    # The parent has no token limit, so the child may get any token budget.
    tokens = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"max_tokens": 10**6}))
    assert tokens.accepted
    # A token *budget* is not a secret token: the audit trail shows it.
    assert rt.steering_history("child")[-1].payload_summary == {"max_tokens": 10**6}


async def test_deadline_budget_uses_the_parents_remaining_time(
    rt: Runtime, make_run: MakeRun
) -> None:
    clock = FakeClock()
    with use_clock(clock):
        parent = await make_run("parent", limits=RunLimits(deadline_s=60))
        parent.info.usage = RunUsage(started_at=clock.monotonic())
        await make_run("child", parent="parent")
        clock.advance(20)
        late = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"deadline_s": 41}))
        ok = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"deadline_s": 40}))
    assert late.status is ReceiptStatus.REJECTED
    assert late.policy_id == "budget"
    assert ok.accepted


async def test_a_deadline_counts_the_time_the_child_ran_without_one(
    rt: Runtime, make_run: MakeRun
) -> None:
    """A child's ``deadline_s`` runs from its start. One that had no deadline was taken to
    have used no time: after 20 s of a parent's 60, a deadline of 60 (the parent's end) was
    refused, and a clamp cut it to 40, ending the child 20 s before its parent had to."""
    clock = FakeClock()
    with use_clock(clock):
        parent = await make_run("parent", limits=RunLimits(deadline_s=60))
        parent.info.usage = RunUsage(started_at=clock.monotonic())
        child = await make_run("child", parent="parent")
        child.info.usage = RunUsage(started_at=clock.monotonic())
        clock.advance(20)
        fits = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"deadline_s": 60}))
        late = await rt.submit(make_command("child", K.UPDATE_BUDGET, {"deadline_s": 61}))
    assert fits.accepted, fits.reason
    assert late.status is ReceiptStatus.REJECTED and late.policy_id == "budget"


async def test_clamping_budget_policy_transforms_and_records_the_original(
    recorder: EventRecorder,
) -> None:
    policies = [
        BudgetPolicy(clamp=True) if p.policy_id == "budget" else p for p in default_policies()
    ]
    async with Runtime(testing=True, sinks=[recorder], policies=PolicyPipeline(policies)) as rt:
        parent = await start_run(rt, "parent", limits=RunLimits(max_model_calls=10, max_tokens=500))
        parent.info.usage = RunUsage(model_calls=4)
        child = await start_run(rt, "child", parent="parent")
        cmd = make_command("child", K.UPDATE_BUDGET, {"max_model_calls": 50, "max_tool_calls": 3})
        receipt = await rt.submit(cmd)
        (queued,) = apply_ready(child)

    assert receipt.accepted
    assert queued.correlation_id == cmd.correlation_id
    assert queued.payload == {"max_model_calls": 6, "max_tool_calls": 3}
    requested, accepted = recorder.steering(cmd.correlation_id)[:2]
    assert requested.payload_summary == {"max_model_calls": 50, "max_tool_calls": 3}
    assert accepted.type == "steering.accepted"
    assert accepted.transformed_by == "budget"
    assert accepted.original_payload_summary == {"max_model_calls": 50, "max_tool_calls": 3}
    assert accepted.payload_summary == {"max_model_calls": 6, "max_tool_calls": 3}


# --------------------------------------------------------------------------- staleness


class CheckpointedDriver(RunDriver):
    def __init__(self, latest: str | None) -> None:
        self.latest = latest
        self.lookups = 0

    async def latest_checkpoint_id(self) -> str | None:
        self.lookups += 1
        return self.latest


def _state_update(run_id: str, **fields: Any) -> SteeringCommand:
    return make_command(run_id, K.UPDATE_STATE, {"update": {"x": 1}}, **fields)


async def test_stale_checkpoint_is_rejected_and_the_latest_accepted(
    rt: Runtime, make_run: MakeRun
) -> None:
    driver = CheckpointedDriver("ck-2")
    await make_run("g-1", kind="graph", driver=driver)
    stale = await rt.submit(_state_update("g-1", checkpoint_id="ck-1"))
    assert stale.status is ReceiptStatus.REJECTED
    assert stale.policy_id == "staleness"
    assert stale.reason is not None and "ck-2" in stale.reason and "fork" in stale.reason
    assert (await rt.submit(_state_update("g-1", checkpoint_id="ck-2"))).accepted
    assert (await rt.submit(_state_update("g-1", checkpoint_id="ck-1", fork=True))).accepted


async def test_checkpoint_of_a_target_without_checkpoints_is_rejected(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("g-1", kind="graph", driver=CheckpointedDriver(None))
    receipt = await rt.submit(_state_update("g-1", checkpoint_id="ck-1"))
    assert receipt.status is ReceiptStatus.REJECTED
    assert receipt.policy_id == "staleness"


async def test_a_fork_of_a_target_without_checkpoints_is_rejected(
    rt: Runtime, make_run: MakeRun
) -> None:
    """``fork=True`` asks for the command to be applied on a fork at its checkpoint: a target
    with no checkpoints (an agent run, a graph thread with none yet) has none to fork from, so
    the command is refused, not applied to the run itself as if it had named no checkpoint."""
    await make_run("r-1", driver=CheckpointedDriver(None))
    receipt = await rt.submit(
        make_command("r-1", K.ADD_INSTRUCTION, {"text": "x"}, checkpoint_id="ck-1", fork=True)
    )
    assert receipt.status is ReceiptStatus.REJECTED
    assert receipt.policy_id == "staleness"
    assert receipt.reason is not None and "no checkpoints" in receipt.reason
    assert "fork" in receipt.reason


async def test_latest_checkpoint_is_looked_up_only_for_commands_that_name_one(
    rt: Runtime, make_run: MakeRun
) -> None:
    driver = CheckpointedDriver("ck-1")
    await make_run("g-1", kind="graph", driver=driver)
    await rt.submit(_state_update("g-1"))
    assert driver.lookups == 0
    await rt.submit(_state_update("g-1", checkpoint_id="ck-1"))
    assert driver.lookups == 1


# --------------------------------------------------------------------------- payload


async def test_text_over_16_kib_is_rejected(rt: Runtime, make_run: MakeRun) -> None:
    await make_run("r-1")
    big = await rt.submit(make_command("r-1", payload={"text": "x" * 17_000}))
    assert big.status is ReceiptStatus.REJECTED
    assert big.policy_id == "payload"
    assert big.reason is not None and "payload too large" in big.reason
    assert (await rt.submit(make_command("r-1", payload={"text": "x" * 16_000}))).accepted


async def test_text_size_is_counted_in_utf8_bytes_including_nested_values(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("r-1")
    wide = await rt.submit(make_command("r-1", payload={"text": "é" * 9_000}))  # 18,000 bytes
    assert wide.status is ReceiptStatus.REJECTED
    nested = {"update": {"notes": ["y" * 9_000, "z" * 9_000]}}
    assert (await rt.submit(make_command("r-1", K.UPDATE_STATE, nested))).status == "rejected"


async def test_payload_limit_is_configurable() -> None:
    policies = [
        PayloadPolicy(max_text_bytes=64) if p.policy_id == "payload" else p
        for p in default_policies()
    ]
    async with Runtime(testing=True, policies=PolicyPipeline(policies)) as rt:
        await start_run(rt, "r-1")
        assert (await rt.submit(make_command("r-1", payload={"text": "x" * 40}))).accepted
        receipt = await rt.submit(make_command("r-1", payload={"text": "x" * 100}))
    assert receipt.status is ReceiptStatus.REJECTED
    assert receipt.reason is not None and "> 64" in receipt.reason


SECRETS = {
    "api_key": "sk-live-0001",
    "password": "hunter2-0002",
    "token": "tok-0003",
    "Authorization": "Bearer abc-0004",
}


@pytest.mark.parametrize("outcome", ["applied", "rejected"])
async def test_secrets_are_masked_in_every_event(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, outcome: str
) -> None:
    handle = await make_run("r-1")
    update = {"config": dict(SECRETS), "db": {"password": SECRETS["password"]}, "note": "keep"}
    if outcome == "rejected":
        update["padding"] = "p" * 20_000
    receipt = await rt.submit(make_command("r-1", K.UPDATE_STATE, {"update": update}))
    apply_ready(handle)

    events = recorder.steering(receipt.correlation_id)
    assert recorder.terminal_state(receipt.correlation_id) == outcome
    assert len(events) >= 2
    for event in events:
        summary = event.payload_summary["update"]
        assert summary["config"] == {key: MASK for key in SECRETS}
        assert summary["db"] == {"password": MASK}
        assert summary["note"] == "keep"
        raw = event.to_json()
        for secret in SECRETS.values():
            assert secret not in raw


# --------------------------------------------------------------------------- custom policies


class Spy:
    def __init__(self, policy_id: str = "spy") -> None:
        self.policy_id = policy_id
        self.seen: list[str] = []

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        self.seen.append(cmd.correlation_id)
        return await call_next(cmd)


@pytest.mark.parametrize(("where", "sees_rejected"), [("before", True), ("after", False)])
async def test_custom_policy_inserted_before_or_after_a_named_one(
    rt: Runtime, make_run: MakeRun, where: str, sees_rejected: bool
) -> None:
    spy = Spy()
    rt.router.pipeline.insert(spy, **{where: "authority"})
    expected = ["authority", "spy"] if where == "after" else ["spy", "authority"]
    assert rt.router.pipeline.ids[:2] == expected
    await make_run("r-1")
    viewer = SteeringActor.human("vic", scopes=[])
    rejected = await rt.submit(make_command("r-1", actor=viewer))
    accepted = await rt.submit(make_command("r-1"))
    assert rejected.status is ReceiptStatus.REJECTED
    assert accepted.accepted
    assert spy.seen == ([rejected.correlation_id] if sees_rejected else []) + [
        accepted.correlation_id
    ]


def test_insert_needs_a_known_anchor_and_only_one_of_before_after() -> None:
    pipeline = default_pipeline()
    with pytest.raises(ValueError, match="no policy 'nope'"):
        pipeline.insert(Spy(), before="nope")
    with pytest.raises(ValueError, match="not both"):
        pipeline.insert(Spy(), before="authority", after="payload")
    pipeline.insert(Spy("last"))
    pipeline.insert(Spy("after-payload"), after="payload")
    assert pipeline.ids[-3:] == ["payload", "after-payload", "last"]
    assert pipeline.remove("last").ids[-1] == "after-payload"


class Shout:
    """Transforms by building a brand-new command (with a fresh correlation id)."""

    policy_id = "shout"

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        if cmd.kind is not K.ADD_INSTRUCTION:
            return await call_next(cmd)
        louder = SteeringCommand(
            target=cmd.target,
            actor=cmd.actor,
            kind=cmd.kind,
            payload={"text": cmd.payload["text"].upper()},
        )
        return await call_next(louder)


async def test_a_transform_keeps_the_commands_identity(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    handle = await make_run("r-1")
    rt.router.pipeline.insert(Shout(), before="payload")
    cmd = make_command("r-1", payload={"text": "quiet please"})
    await rt.submit(cmd)
    (delivered,) = apply_ready(handle)
    assert delivered.correlation_id == cmd.correlation_id
    assert delivered.payload == {"text": "QUIET PLEASE"}
    accepted = recorder.steering(cmd.correlation_id)[1]
    assert accepted.transformed_by == "shout"
    assert accepted.original_payload_summary == {"text": "quiet please"}
    recorder.assert_lifecycle(cmd.correlation_id, ["requested", "accepted", "delivered", "applied"])


class Impersonate:
    """A transform that hands on the command as if someone else had sent it."""

    policy_id = "impersonate"

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        other = SteeringActor.human(
            "mallory", tenant_id=OPERATOR.tenant_id, scopes=["agent:control"]
        )
        return await call_next(cmd.model_copy(update={"actor": other}))


async def test_a_transform_that_changes_the_sender_is_refused(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    """A command is filed (and deduplicated) under its sender: a transform that changed the
    actor was accepted, then the run failed at delivery ("command ... is not open")."""
    handle = await make_run("r-1")
    rt.router.pipeline.insert(Impersonate(), before="payload")
    cmd = make_command("r-1")
    receipt = await rt.submit(cmd)
    assert (receipt.status, receipt.policy_id) == (ReceiptStatus.REJECTED, "impersonate")
    assert "a transform keeps the command's actor" in (receipt.reason or "")
    assert apply_ready(handle) == []
    recorder.assert_lifecycle(cmd.correlation_id, ["requested", "rejected"])


class AcceptAnother:
    """Accepts a command it built itself instead of handing one on through ``call_next``."""

    policy_id = "accept-another"

    def __init__(self, **changes: Any) -> None:
        self.changes = changes

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        return Decision.accept(cmd.model_copy(update=self.changes), self.policy_id)


async def test_a_policy_that_accepts_another_command_has_it_taken_as_a_transform(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    """A policy's ``Decision.accept`` of a command it built (a new correlation id) was queued
    as it was: the run failed at delivery ("command ... is not open") and the command sent
    stayed open. It is a transform: the command sent, in its new shape."""
    handle = await make_run("r-1")
    rt.router.pipeline.insert(
        AcceptAnother(correlation_id="other", payload={"text": "LOUD"}), before="payload"
    )
    cmd = make_command("r-1")
    assert (await rt.submit(cmd)).accepted
    (delivered,) = apply_ready(handle)
    assert (delivered.correlation_id, delivered.payload) == (cmd.correlation_id, {"text": "LOUD"})
    assert recorder.steering(cmd.correlation_id)[1].transformed_by == "accept-another"
    recorder.assert_lifecycle(cmd.correlation_id, ["requested", "accepted", "delivered", "applied"])


async def test_a_policy_that_accepts_an_invalid_command_has_it_refused(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    handle = await make_run("r-1")
    rt.router.pipeline.insert(AcceptAnother(payload={"text": ""}), before="payload")
    cmd = make_command("r-1")
    receipt = await rt.submit(cmd)
    assert (receipt.status, receipt.policy_id) == (ReceiptStatus.REJECTED, "accept-another")
    assert "invalid command" in (receipt.reason or "")
    assert apply_ready(handle) == []
    recorder.assert_lifecycle(cmd.correlation_id, ["requested", "rejected"])


class Broken:
    """A policy with a bug: it raises (or forgets to return the decision)."""

    def __init__(self, policy_id: str, *, returns_nothing: bool = False) -> None:
        self.policy_id = policy_id
        self.returns_nothing = returns_nothing

    async def __call__(self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext) -> Any:
        if self.returns_nothing:
            await call_next(cmd)
            return None
        raise RuntimeError("policy bug")


class BrokenCheck(CheckPolicy):
    policy_id = "broken-check"

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        raise KeyError("oops")


@pytest.mark.parametrize(
    ("policy", "reason"),
    [
        (Broken("raises"), "policy 'raises' failed (RuntimeError: policy bug)"),
        (Broken("forgets", returns_nothing=True), "policy 'forgets' returned NoneType"),
        (BrokenCheck(), "policy 'broken-check' failed (KeyError: 'oops')"),
    ],
    ids=["raises", "returns-nothing", "check-raises"],
)
@pytest.mark.parametrize("where", ["pipeline", "run"])
async def test_a_policy_that_raises_rejects_the_command(
    rt: Runtime,
    make_run: MakeRun,
    recorder: EventRecorder,
    policy: Any,
    reason: str,
    where: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fail closed, with a receipt: the error reached the sender (a parent cancelling its
    subtree stayed running for ever) and nothing said what became of the command."""
    handle = await make_run("r-1")
    if where == "pipeline":
        rt.router.pipeline.insert(policy, before="payload")
    else:
        handle.policies.append(policy)
    cmd = make_command("r-1")
    receipt = await rt.submit(cmd)
    assert (receipt.status, receipt.policy_id) == (ReceiptStatus.REJECTED, policy.policy_id)
    assert reason in (receipt.reason or "")
    assert apply_ready(handle) == []
    recorder.assert_lifecycle(cmd.correlation_id, ["requested", "rejected"])
    assert not rt.router.open_commands()
    if not isinstance(policy, Broken) or not policy.returns_nothing:
        assert "raised on command" in caplog.text  # with its traceback, for whoever debugs it


class NoShouting(CheckPolicy):
    """A check: rejects upper-case text; the pipeline runs it inline."""

    policy_id = "no-shouting"

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        text = cmd.text
        return "no shouting" if text is not None and text.isupper() else None


class Verdicts:
    """An ordinary policy that records the verdict of everything after it."""

    policy_id = "verdicts"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        decision = await call_next(cmd)
        self.seen.append((decision.status, decision.policy_id))
        return decision


async def test_check_policies_run_inline_and_decide_like_any_policy(
    rt: Runtime, make_run: MakeRun
) -> None:
    verdicts = Verdicts()
    rt.router.pipeline.insert(verdicts, after="authority").insert(NoShouting())
    await make_run("r-1")
    shouted = await rt.submit(make_command("r-1", payload={"text": "STOP"}))
    spoken = await rt.submit(make_command("r-1", payload={"text": "stop"}))
    assert (shouted.status, shouted.policy_id) == (ReceiptStatus.REJECTED, "no-shouting")
    assert spoken.accepted
    assert verdicts.seen == [("reject", "no-shouting"), ("accept", "default")]


async def test_a_check_policy_called_directly_checks_then_calls_next() -> None:
    tree = RunTree()
    info = RunInfo(run_id="r-1")
    tree.add(info)
    ctx = PolicyContext(target=info, tree=tree)
    passed: list[SteeringCommand] = []

    async def call_next(cmd: SteeringCommand) -> Decision:
        passed.append(cmd)
        return Decision.accept(cmd, "end")

    quiet = make_command("r-1", payload={"text": "stop"})
    assert (await NoShouting()(quiet, ctx, call_next)).status == "accept"
    loud = make_command("r-1", payload={"text": "STOP"})
    assert (await NoShouting()(loud, ctx, call_next)).reason == "no shouting"
    assert passed == [quiet]


def _policy_context() -> PolicyContext:
    tree = RunTree()
    info = RunInfo(run_id="r-1")
    tree.add(info)
    return PolicyContext(target=info, tree=tree)


async def test_a_pipeline_of_checks_is_folded_once_and_decides_like_any_policy() -> None:
    ctx = _policy_context()
    pipeline = PolicyPipeline([NoShouting()], pipeline_id="checks")
    chain = pipeline.chain()
    accepted = await pipeline.evaluate(make_command("r-1", payload={"text": "stop"}), ctx)
    rejected = await pipeline.evaluate(make_command("r-1", payload={"text": "STOP"}), ctx)
    assert (accepted.status, accepted.policy_id, accepted.transforms) == ("accept", "checks", [])
    assert (rejected.status, rejected.policy_id) == ("reject", "no-shouting")
    assert pipeline.chain() is chain  # reused for every command

    # An ordinary policy after the checks: a new chain, and a check that rejects first still
    # settles the command before the ordinary policy sees it.
    verdicts = Verdicts()
    pipeline.insert(verdicts)
    assert pipeline.chain() is not chain
    spoken = await pipeline.evaluate(make_command("r-1", payload={"text": "stop"}), ctx)
    shouted = await pipeline.evaluate(make_command("r-1", payload={"text": "NO"}), ctx)
    assert (spoken.status, shouted.status) == ("accept", "reject")
    assert verdicts.seen == [("accept", "checks")]


async def test_the_pipeline_sees_policies_added_or_removed_in_place() -> None:
    ctx = _policy_context()
    pipeline = PolicyPipeline([AuthorityPolicy()])
    loud = make_command("r-1", payload={"text": "STOP"})
    assert (await pipeline.evaluate(loud, ctx)).status == "accept"
    pipeline.policies.append(NoShouting())  # the list itself, not insert()
    assert (await pipeline.evaluate(loud, ctx)).status == "reject"
    pipeline.policies[-1] = ShoutingCheck()  # same length, another policy: not inline
    assert (await pipeline.evaluate(loud, ctx)).transforms[0][0] == "shouting-check"
    pipeline.remove("shouting-check")
    assert (await pipeline.evaluate(loud, ctx)).status == "accept"
    pipeline.policies = [NoShouting()]  # a new list
    assert (await pipeline.evaluate(loud, ctx)).status == "reject"


async def test_a_runs_chain_is_folded_once_and_reused_across_commands(
    rt: Runtime, make_run: MakeRun
) -> None:
    spy = Spy()
    handle = await make_run("r-1")
    handle.policies.append(spy)
    first = await rt.submit(make_command("r-1"))
    chain = handle.policy_chain
    assert chain is not None
    second = await rt.submit(make_command("r-1"))
    assert handle.policy_chain is chain  # not folded again for the second command
    assert spy.seen == [first.correlation_id, second.correlation_id]

    # A change to the runtime's pipeline after open takes effect for the next command.
    rt.router.pipeline.insert(NoShouting(), before="authority")
    shouted = await rt.submit(make_command("r-1", payload={"text": "STOP"}))
    assert (shouted.status, shouted.policy_id) == (ReceiptStatus.REJECTED, "no-shouting")
    assert handle.policy_chain is not chain
    # And so does a change to the run's own list.
    handle.policies.remove(spy)
    assert (await rt.submit(make_command("r-1"))).accepted
    assert len(spy.seen) == 2


async def test_the_runtimes_chain_is_folded_when_it_opens_and_reused(rt: Runtime) -> None:
    chain = rt.router.pipeline.chain()
    assert rt.router.pipeline.chain() is chain
    rt.router.pipeline.remove("payload")
    assert rt.router.pipeline.chain() is not chain


class ShoutingCheck(NoShouting):
    """Overrides ``__call__`` to transform: no longer run inline."""

    policy_id = "shouting-check"

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        return await call_next(cmd.model_copy(update={"payload": {"text": "HELLO"}}))


async def test_a_check_policy_that_overrides_call_is_called_like_any_policy(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    assert NoShouting.inline and not ShoutingCheck.inline
    assert BudgetPolicy().inline and not BudgetPolicy(clamp=True).inline
    handle = await make_run("r-1")
    rt.router.pipeline.insert(ShoutingCheck(), before="payload")
    cmd = make_command("r-1", payload={"text": "hello"})
    assert (await rt.submit(cmd)).accepted
    assert [c.payload for c in apply_ready(handle)] == [{"text": "HELLO"}]
    assert recorder.steering(cmd.correlation_id)[1].transformed_by == "shouting-check"


class Hold:
    """Defers every command while ``holding``."""

    policy_id = "hold"

    def __init__(self) -> None:
        self.holding = True

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        if self.holding:
            return Decision.defer(cmd, "on hold", self.policy_id)
        return await call_next(cmd)


async def test_deferred_command_is_re_evaluated_when_the_target_changes(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    hold = Hold()
    rt.router.pipeline.insert(hold, after="authority")
    handle = await make_run("r-1")
    receipt = await rt.submit(make_command("r-1"))
    assert receipt.status is ReceiptStatus.DEFERRED
    assert (receipt.policy_id, receipt.reason) == ("hold", "on hold")
    assert len(handle.inbox) == 0

    await rt.router.target_changed(handle)  # still on hold: no second "deferred" event
    assert recorder.lifecycle(receipt.correlation_id) == ["requested", "deferred"]

    hold.holding = False
    await rt.router.target_changed(handle)
    assert recorder.lifecycle(receipt.correlation_id) == ["requested", "deferred", "accepted"]
    assert [c.correlation_id for c in apply_ready(handle)] == [receipt.correlation_id]
    assert recorder.terminal_state(receipt.correlation_id) == "applied"
    assert rt.router.open_commands() == []


async def test_deferred_command_fails_when_the_target_finishes(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, finish: Any
) -> None:
    rt.router.pipeline.insert(Hold(), after="authority")
    handle = await make_run("r-1")
    receipt = await rt.submit(make_command("r-1"))
    await finish(handle)
    assert recorder.lifecycle(receipt.correlation_id) == ["requested", "deferred", "failed"]
    failed = recorder.steering(receipt.correlation_id)[-1]
    assert failed.reason is not None and failed.reason.startswith("target finished before delivery")
    assert rt.router.open_commands() == []
    recorder.assert_every_command_terminal()


async def test_a_thread_command_a_policy_deferred_waits_for_the_threads_next_run(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, finish: Any
) -> None:
    """A command for a thread is the thread's, not its current run's: deferred by a policy
    while one run of the thread ran, it failed ("target finished before delivery") when that
    run ended, where a thread command deferred for want of a run waits for the next one."""
    hold = Hold()
    rt.router.pipeline.insert(hold, after="authority")
    first = await make_run("r-first", thread_id="t-1")
    cmd = make_command(target=SteeringTarget.thread("t-1"))
    assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
    await finish(first)
    assert rt.router.state(cmd.correlation_id) == "deferred"
    hold.holding = False
    second = await make_run("r-second", thread_id="t-1")
    assert recorder.lifecycle(cmd.correlation_id) == ["requested", "deferred", "accepted"]
    assert [c.correlation_id for c in apply_ready(second)] == [cmd.correlation_id]
    recorder.assert_every_command_terminal()


async def test_thread_target_defers_until_a_run_on_that_thread_registers(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder, finish: Any
) -> None:
    old = await make_run("r-old", thread_id="t-1")
    await finish(old)  # a finished run no longer owns the thread
    cmd = make_command(target=SteeringTarget.thread("t-1"))
    receipt = await rt.submit(cmd)
    assert receipt.status is ReceiptStatus.DEFERRED
    assert receipt.policy_id == "router"

    await make_run("r-other", thread_id="t-2")
    assert rt.router.state(cmd.correlation_id) == "deferred"

    handle = await make_run("r-new", thread_id="t-1")
    assert recorder.lifecycle(cmd.correlation_id) == ["requested", "deferred", "accepted"]
    assert [c.correlation_id for c in apply_ready(handle)] == [cmd.correlation_id]
    assert [e.type for e in rt.steering_history("r-new")][-2:] == [
        "steering.delivered",
        "steering.applied",
    ]


async def test_thread_target_with_a_live_run_goes_straight_to_it(
    rt: Runtime, make_run: MakeRun
) -> None:
    handle = await make_run("r-1", thread_id="t-1")
    receipt = await rt.submit(make_command(target=SteeringTarget.thread("t-1")))
    assert receipt.accepted and receipt.run_id == "r-1"
    assert len(handle.inbox) == 1


async def test_a_thread_command_never_goes_to_a_run_whose_id_looks_like_its_thread_key(
    rt: Runtime, make_run: MakeRun
) -> None:
    # commands waiting for thread "x" were kept under the key "thread:x", which is also a
    # valid run id: a run started as "thread:x" (no thread at all) took them
    cmd = make_command(target=SteeringTarget.thread("x"))
    assert (await rt.submit(cmd)).status is ReceiptStatus.DEFERRED
    impostor = await make_run("thread:x")
    assert apply_ready(impostor) == []
    assert rt.router.state(cmd.correlation_id) == "deferred"
    owner = await make_run("r-1", thread_id="x")
    assert [c.correlation_id for c in apply_ready(owner)] == [cmd.correlation_id]


@pytest.mark.parametrize("policies", [default_policies(), "authority", 5])
def test_a_runtime_given_policies_that_are_no_pipeline_says_how_to_give_them(
    policies: object,
) -> None:
    # a plain list of policies failed with "AttributeError: 'list' object has no attribute
    # 'chain'" when the runtime was built
    with pytest.raises(ConfigurationError, match=r"PolicyPipeline\(\[\.\.\.\]\)"):
        Runtime(policies=policies)  # type: ignore[arg-type]


async def test_per_run_policies_apply_to_that_run_only(rt: Runtime, make_run: MakeRun) -> None:
    class NoPause:
        policy_id = "no-pause"

        async def __call__(
            self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
        ) -> Decision:
            if cmd.kind is K.PAUSE:
                return Decision.reject(cmd, "this run cannot pause", self.policy_id)
            return await call_next(cmd)

    strict = await make_run("strict")
    strict.policies.append(NoPause())
    await make_run("relaxed")
    refused = await rt.submit(make_command("strict", K.PAUSE))
    assert (refused.status, refused.policy_id) == (ReceiptStatus.REJECTED, "no-pause")
    assert (await rt.submit(make_command("relaxed", K.PAUSE))).accepted
    assert (await rt.submit(make_command("strict", K.RESUME))).accepted


def test_every_decision_of_a_built_in_names_its_policy() -> None:
    ids = {p.policy_id for p in default_policies()}
    assert ids == {
        AuthorityPolicy.policy_id,
        AllowlistPolicy.policy_id,
        BudgetPolicy.policy_id,
        StalenessPolicy.policy_id,
        PayloadPolicy.policy_id,
    }


async def test_accepted_receipt_and_event_name_the_pipeline(
    rt: Runtime, make_run: MakeRun, recorder: EventRecorder
) -> None:
    await make_run("r-1")
    receipt = await rt.submit(make_command("r-1"))
    accepted: SteeringEvent = recorder.steering(receipt.correlation_id)[1]
    assert receipt.policy_id == accepted.policy_id == rt.router.pipeline.pipeline_id


async def test_per_request_and_cost_budgets_are_bounded_by_the_parents_too(
    rt: Runtime, make_run: MakeRun
) -> None:
    """``RunLimits(max_input_tokens_per_request=, max_cost=)`` (pydantic-ai's
    ``per_request_input_tokens_limit`` and ``cost_limit``): ``update_budget`` takes them,
    held to the parent's: a request's input to the parent's own cap (what the child used
    does not count: each request is bounded alone), a cost to what the parent has left."""
    parent = await make_run(
        "parent", limits=RunLimits(max_input_tokens_per_request=100, max_cost=1.0)
    )
    parent.info.usage = RunUsage(input_tokens=5_000, cost=0.75)
    child = await make_run("child", parent="parent")
    child.info.usage = RunUsage(input_tokens=900, cost=0.05)
    for payload in ({"max_input_tokens_per_request": 101}, {"max_cost": 0.31}):
        over = await rt.submit(make_command("child", K.UPDATE_BUDGET, payload))
        assert over.status is ReceiptStatus.REJECTED and over.policy_id == "budget", payload
    fits = {"max_input_tokens_per_request": 100, "max_cost": 0.3}
    assert (await rt.submit(make_command("child", K.UPDATE_BUDGET, fits))).accepted


def test_the_payload_policys_check_takes_a_sender_context_as_it_did() -> None:
    """Found by review: once ``PolicyContext`` carried the router's payload bound, a
    ``PayloadPolicy().check`` given a ``SenderContext`` (a policy of one's own calling it
    before any run is known, as ``check_sender`` is) raised ``AttributeError``: a context
    without the bound is counted as before."""
    policy = PayloadPolicy(max_text_bytes=64)
    assert policy.check(make_command("r-1"), SenderContext()) is None
    big = make_command("r-1", payload={"text": "x" * 100})
    assert "payload too large" in (policy.check(big, SenderContext()) or "")
