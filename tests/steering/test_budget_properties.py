"""Property: ``update_budget`` on any run of a chain is accepted exactly when it stays within
what the child already used plus the least any ancestor has left (its calls count against
every ancestor), and a rejection names that ancestor."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.runs import RunInfo, RunLimits, RunTree, RunUsage
from tinyagents.steering import BudgetPolicy, PolicyContext

#: (limit or None, calls used) for each run from the root down; the last one is steered.
chains = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(1, 50)), st.integers(0, 60)),
    min_size=2,
    max_size=6,
)


@given(chain=chains, wanted=st.integers(1, 120))
def test_an_update_budget_is_held_to_the_tightest_ancestor(
    chain: list[tuple[int | None, int]], wanted: int
) -> None:
    tree = RunTree()
    infos = []
    for depth, (limit, used) in enumerate(chain):
        info = RunInfo(
            run_id=f"run-{depth}",
            parent_run_id=f"run-{depth - 1}" if depth else None,
            limits=RunLimits(max_model_calls=limit),
            usage=RunUsage(model_calls=used),
        )
        tree.add(info)
        infos.append(info)
    target = infos[-1]
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(target.run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.UPDATE_BUDGET,
        payload={"max_model_calls": wanted},
    )
    reason = BudgetPolicy().check(cmd, PolicyContext(target=target, tree=tree, testing=True))

    lefts = [
        (max(limit - used, 0), info.run_id)
        for (limit, used), info in zip(chain[:-1], infos[:-1], strict=True)
        if limit is not None
    ]
    if not lefts:
        assert reason is None
        return
    # the nearest of the ancestors with the least left is named
    least = min(left for left, _ in lefts)
    named = [run_id for left, run_id in lefts if left == least][-1]
    if wanted <= chain[-1][1] + least:
        assert reason is None
    else:
        assert reason is not None and f"run {named} has left ({least};" in reason
