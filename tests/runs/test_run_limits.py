"""``RunLimits`` refuse what would break a run's snapshot or mean something else than it says."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tinyagents import RunLimits
from tinyagents.errors import ArgumentError, ConfigurationError
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
        {"max_turns": "x"},  # no such limit
        {"behavior": "stop"},
    ],
)
def test_limits_that_are_no_numbers_or_not_finite_are_refused(limits: dict[str, Any]) -> None:
    # a typed refusal, as every configuration error is (ArgumentError: a ConfigurationError
    # and, as pydantic's ValidationError was, a ValueError), naming RunLimits and the field
    with pytest.raises(ArgumentError, match=rf"RunLimits.*{next(iter(limits))}") as raised:
        RunLimits(**limits)
    assert isinstance(raised.value, ConfigurationError) and isinstance(raised.value, ValueError)
    with pytest.raises(ArgumentError, match=next(iter(limits))):
        RunLimits.model_validate(limits)
    with pytest.raises(ArgumentError, match=next(iter(limits))):
        RunLimits.model_validate_json(json.dumps(limits, allow_nan=True))


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


@pytest.mark.parametrize(
    "changes",
    [
        {"max_model_calls": -1},  # was taken: a limit no call could meet
        {"deadline_s": math.nan},  # switched the deadline off
        {"max_tokens": "100"},
        {"max_model_call": 3},  # a misspelt name was dropped without a word
    ],
)
def test_replace_checks_the_changes_as_the_constructor_does(changes: dict[str, Any]) -> None:
    limits = RunLimits(max_model_calls=3)
    with pytest.raises(ArgumentError, match=next(iter(changes))):
        limits.replace(**changes)
    assert limits.replace(max_model_calls=5, deadline_s=2) == RunLimits(
        max_model_calls=5, deadline_s=2.0
    )


def test_a_child_bounded_by_a_spent_parent_gets_a_budget_of_nothing() -> None:
    # bounded_by may lower a limit to 0 (the parent has nothing left), which the constructor
    # refuses for max_model_calls: the child's first call then ends it limit_exceeded
    bounded = RunLimits(max_model_calls=5).bounded_by({"max_model_calls": 0})
    assert bounded.max_model_calls == 0


def test_replace_on_limits_bounded_to_nothing_keeps_them() -> None:
    bounded = RunLimits(max_model_calls=5).bounded_by({"max_model_calls": 0})
    changed = bounded.replace(max_tool_calls=2)
    assert (changed.max_model_calls, changed.max_tool_calls) == (0, 2)


@pytest.mark.parametrize(
    "field", ["max_model_calls", "max_tool_calls", "max_tokens", "max_output_tokens", "max_depth"]
)
def test_a_limit_too_long_to_write_as_json_is_refused(field: str) -> None:
    """``RunLimits(max_model_calls=10**5000)`` was taken: the run's snapshot could then not be
    written as JSON (Python writes no integer past 4300 digits), so a durable runtime never
    saved the run and its close raised a bare ValueError."""
    with pytest.raises(ArgumentError, match=f"(?s){field}.*more than 4000 digits"):
        RunLimits(**{field: 10**5000})
    with pytest.raises(ArgumentError, match="more than 4000 digits"):
        RunLimits().replace(**{field: 10**4000})
    huge = RunLimits(**{field: 10**3999})  # as large as a command's integers may be
    assert RunLimits.model_validate_json(huge.model_dump_json()) == huge
