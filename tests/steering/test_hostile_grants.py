"""``rt.grant_sibling_steering`` names two runs of the runtime: a run id it does not know is an
``UnknownTargetError`` and grants nothing. It was taken: a typo'd id gave a grant that did
nothing and said nothing, and a grant to an id no run had yet was kept for ever (only released
runs drop theirs) and given to whichever run was later started under that id."""

from __future__ import annotations

import pytest
from steerkit import MakeRun, make_command

from tinyagents.errors import UnknownTargetError
from tinyagents.protocol import ReceiptStatus, SteeringActor
from tinyagents.runtime import Runtime


@pytest.mark.parametrize(("from_run", "to_run"), [("c-1", "c-9"), ("c-9", "c-1"), ("x", "y")])
async def test_a_grant_naming_a_run_the_runtime_does_not_know_is_refused(
    rt: Runtime, make_run: MakeRun, from_run: str, to_run: str
) -> None:
    await make_run("root")
    await make_run("c-1", parent="root")
    with pytest.raises(UnknownTargetError, match=r"grant_sibling_steering.*no run"):
        rt.grant_sibling_steering(from_run, to_run)
    assert not rt.router.grants


async def test_a_grant_made_before_a_run_exists_does_not_reach_it(
    rt: Runtime, make_run: MakeRun
) -> None:
    await make_run("root")
    await make_run("c-1", parent="root")
    with pytest.raises(UnknownTargetError):
        rt.grant_sibling_steering("c-1", "c-2")
    await make_run("c-2", parent="root")
    c1 = SteeringActor.parent_agent("c-1", "researcher")
    receipt = await rt.submit(make_command("c-2", actor=c1))
    assert receipt.status is ReceiptStatus.REJECTED
    assert receipt.policy_id == "authority"
    rt.grant_sibling_steering("c-1", "c-2")  # both known now: granted
    retry = make_command("c-2", actor=c1, correlation_id="c-again")
    assert (await rt.submit(retry)).status is ReceiptStatus.ACCEPTED
