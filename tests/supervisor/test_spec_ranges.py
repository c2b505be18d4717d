"""Numbers in a spec are in range: ``pause_max_s: 1e308`` was taken (a pause that never
escalates), as were a judge timeout of 10^308 s and a rule counting to 10^30 (a rule that
never fires, said nowhere). Each is refused naming its line, as ``.inf`` and ``-1`` are."""

from __future__ import annotations

import pytest

from tinyagents import Runtime
from tinyagents.errors import ConfigurationError
from tinyagents.supervisor import SupervisorSpec, SupervisorSpecError
from tinyagents.supervisor.spec import (
    BudgetFraction,
    IterationReached,
    ToolRepeated,
)

_HUGE = "100000000000000000000000000000"


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("on_violation: abort\npause_max_s: 1e308\n", 2, "pause_max_s"),
        ("pause_max_s: 2592001\n", 1, "pause_max_s"),
        ("model: openai/x\njudge_timeout_s: 1e308\n", 2, "judge_timeout_s"),
        ("model: openai/x\njudge_timeout_s: 3601\n", 2, "judge_timeout_s"),
        ("model: openai/x\nevery_n_iterations: " + _HUGE + "\n", 2, "every_n_iterations"),
        ("rules:\n  - when: tool_repeated\n    count: " + _HUGE + "\n", 3, "rules.0.count"),
        ("rules:\n  - when: iteration_reached\n    gte: 1000001\n", 3, "rules.0.gte"),
        # and what was refused already still is, on its line
        ("rules:\n  - when: budget_fraction\n    gt: .nan\n", 3, "rules.0.gt"),
        ("rules:\n  - when: budget_fraction\n    gt: -1\n", 3, "rules.0.gt"),
        ("pause_max_s: .nan\n", 1, "pause_max_s"),
        ("pause_max_s: -1\n", 1, "pause_max_s"),
        ("rules:\n  - when: tool_repeated\n    count: 1e308\n", 3, "rules.0.count"),
        # below a millisecond: no timer waits that little (a pause aborted at once, every
        # judge call timed out), a typo of the exponent's sign
        ("pause_max_s: 0\n", 1, "pause_max_s"),
        ("on_violation: abort\npause_max_s: 1e-9\n", 2, "pause_max_s"),
        ("pause_max_s: 5e-324\n", 1, "pause_max_s"),
        ("model: openai/x\njudge_timeout_s: 0.0\n", 2, "judge_timeout_s"),
        ("model: openai/x\njudge_timeout_s: 3e-4\n", 2, "judge_timeout_s"),
    ],
)
def test_a_number_out_of_range_is_refused_naming_its_line(text: str, line: int, field: str) -> None:
    with pytest.raises(SupervisorSpecError) as refused:
        SupervisorSpec.from_yaml(text)
    assert refused.value.line == line
    assert str(refused.value).startswith(f"line {line}: {field}: ")


def test_the_smallest_timeouts_in_range_are_taken() -> None:
    spec = SupervisorSpec.from_yaml("model: openai/x\npause_max_s: 0.001\njudge_timeout_s: 1e-3\n")
    assert (spec.pause_max_s, spec.judge_timeout_s) == (0.001, 0.001)
    for tiny in (1e-9, 5e-324):
        with pytest.raises(SupervisorSpecError, match="pause_max_s"):
            SupervisorSpec(pause_max_s=tiny)
        with pytest.raises(SupervisorSpecError, match="judge_timeout_s"):
            SupervisorSpec(judge_timeout_s=tiny)


def test_the_largest_numbers_in_range_are_taken() -> None:
    spec = SupervisorSpec.from_yaml(
        "model: openai/x\npause_max_s: 2592000\njudge_timeout_s: 3600\n"
        "every_n_iterations: 1000000\nrules:\n"
        "  - {when: tool_repeated, count: 1000000}\n"
        "  - {when: iteration_reached, gte: 1000000}\n"
        "  - {when: budget_fraction, gt: 1}\n"
    )
    assert (spec.pause_max_s, spec.judge_timeout_s, spec.every_n_iterations) == (
        2_592_000,
        3600,
        1_000_000,
    )


def test_rules_built_on_their_own_are_held_to_the_same_ranges() -> None:
    for build in (
        lambda: ToolRepeated(count=10**30),
        lambda: IterationReached(gte=10**30),
        lambda: BudgetFraction(gt=float("nan")),
    ):
        with pytest.raises(SupervisorSpecError):
            build()


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("TINYAGENTS_PAUSE_MAX_S", "1e308"),
        ("TINYAGENTS_JUDGE_TIMEOUT_S", "3601"),
        ("TINYAGENTS_PAUSE_MAX_S", "1e-9"),
        ("TINYAGENTS_JUDGE_TIMEOUT_S", "0.0001"),
    ],
)
def test_the_environments_timeouts_are_held_to_the_same_ranges(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    monkeypatch.setenv(name, raw)
    with pytest.raises(ConfigurationError, match=name):
        Runtime()
