"""``RunLimits`` refuse what would break a run's snapshot or mean something else than it says."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from pydantic import ValidationError

from tinyagents import RunLimits
from tinyagents.runs import RunInfo


@pytest.mark.parametrize(
    "limits",
    [
        {"max_model_calls": True},  # was a limit of one model call
        {"max_tool_calls": True},
        {"max_tokens": True},
        {"max_depth": False},  # was a depth of 0
        {"deadline_s": math.inf},  # the snapshot's JSON could not be written
        {"tool_timeout_s": math.inf},
        {"deadline_s": math.nan},
        {"max_tokens": "100"},
    ],
)
def test_limits_that_are_no_numbers_or_not_finite_are_refused(limits: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=next(iter(limits))):
        RunLimits(**limits)


def test_limits_read_back_from_their_json() -> None:
    limits = RunLimits(max_model_calls=3, max_tokens=1000, deadline_s=30, tool_timeout_s=2.5)
    assert RunLimits.model_validate_json(limits.model_dump_json()) == limits
    assert limits.deadline_s == 30.0


def test_a_run_snapshot_is_json_whatever_its_limits() -> None:
    info = RunInfo(run_id="r-1", limits=RunLimits(deadline_s=1e300, tool_timeout_s=None))
    snapshot = json.loads(json.dumps(info.snapshot(), allow_nan=False))
    assert snapshot["limits"]["deadline_s"] == 1e300


@pytest.mark.parametrize("field", ["run_id", "tenant_id"])
@pytest.mark.parametrize("value", ["", "  ", None])
def test_a_run_names_a_run_and_a_tenant(field: str, value: Any) -> None:
    """``rt.start(agent, task, tenant_id="")`` made a run no operator token could ever reach."""
    values = {"run_id": "r-1", "tenant_id": "acme", field: value}
    with pytest.raises(ValueError, match=f"{field} must be a non-blank string"):
        RunInfo(**values)


async def test_a_runtime_refuses_a_blank_tenant_before_anything_runs() -> None:
    from tinyagents import Agent, Runtime
    from tinyagents.testkit import ScriptedModel, reply

    model = ScriptedModel([reply("done")])
    async with Runtime() as rt:
        with pytest.raises(ValueError, match="tenant_id"):
            await rt.start(Agent("a", model), "go", tenant_id="")
        assert rt.runs.handles() == [] and model.requests == []
