"""The steering benchmark still measures what it says (no timing is asserted: machines are
noisy; ``make bench`` prints the figures)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

import _baseline
import steering_throughput

IN_GIT_CHECKOUT = (Path(__file__).parents[1] / ".git").exists()


def test_steering_throughput_applies_every_command_with_its_four_events() -> None:
    results: dict[str, Any] = steering_throughput.run(
        commands=600, run_counts=(1, 7, 600), previous=False
    )
    assert [s["runs"] for s in results["scenarios"]] == [1, 7, 600]
    for scenario in results["scenarios"]:
        # _scenario asserts that every command was applied and nothing is left open.
        assert scenario["commands"] == 600 and scenario["events"] == 4 * 600
        assert scenario["commands_per_s"] > 0 and scenario["us_per_command"] > 0
        # and the floor ran beside it: the same work with none of ours
        assert scenario["floor_per_s"] > 0
    report = steering_throughput.report(results)
    assert "commands/s" in report and len(report.splitlines()) == 2 + 3 + 1
    assert "now/floor" in report


@pytest.mark.skipif(
    not IN_GIT_CHECKOUT and os.environ.get("CI") != "true",
    reason="the previous code is read from this repository's git history",
)
def test_steering_throughput_runs_the_previous_code_beside_ours() -> None:
    results: dict[str, Any] = steering_throughput.run(commands=300, run_counts=(1, 30), rounds=1)
    previous = results["previous"]
    # The baseline commit ran the same scenarios in its own interpreter, in this run: not the
    # figures recorded on another machine.
    assert previous["source"].startswith(f"commit {_baseline.BASELINE}, measured in this run")
    assert set(previous["per_s"]) == {1, 30} and all(v > 0 for v in previous["per_s"].values())
    assert previous["per_s"] != steering_throughput.PREVIOUS
    report = steering_throughput.report(results)
    assert "measured in this run" in report and "now/previous" in report


def test_without_the_baseline_the_recorded_figures_are_printed_and_labelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_baseline, "BASELINE", "0" * 40)  # a commit this repository lacks
    results: dict[str, Any] = steering_throughput.run(commands=100, run_counts=(1,))
    assert results["previous"]["per_s"] == steering_throughput.PREVIOUS
    assert steering_throughput.PREVIOUS_RECORDED in results["previous"]["source"]
    assert "git archive" in results["previous"]["source"]  # and why


def test_the_floor_scenario_publishes_four_events_per_command() -> None:
    # _floor_scenario asserts the sink holds four events per command
    result = steering_throughput._floor_scenario(runs=3, commands=40, batch=7)
    assert result["runs"] == 3 and result["commands_per_s"] > 0


def test_memory_benchmark_releases_finished_runs_and_reports_every_wave() -> None:
    import memory

    results: dict[str, Any] = memory.run(runs=60, waves=3, commands=2, retain=5)
    assert [w["finished"] for w in results["waves"]] == [20, 40, 60]
    # Only the retention window stays in memory, whatever the number of finished runs.
    assert all(w["kept"] == 5 for w in results["waves"])
    assert all(w["rss"] > 0 for w in results["waves"])
    report = memory.report(results)
    assert "RSS growth from wave 2 to wave 3" in report and len(report.splitlines()) == 2 + 3 + 1


def test_the_import_benchmark_times_a_fresh_interpreter_and_sees_no_heavy_dependency() -> None:
    import import_time

    results: dict[str, Any] = import_time.run(runs=1)
    assert results["import_ms"] > 0 and results["floor_ms"] > 0 and results["previous_ms"] > 0
    if IN_GIT_CHECKOUT:  # timed beside ours, from the baseline commit's tree
        assert results["previous_source"] == f"commit {_baseline.BASELINE}, measured in this run"
    assert results["heavy_loaded"] == [], "import tinyagents loaded a lazy dependency"
    assert "tinyagents / floor" in import_time.report(results)
    assert "now / previous" in import_time.report(results)


def test_the_operator_benchmark_applies_each_command_sent_three_ways() -> None:
    import importlib.util

    path = Path(__file__).parents[1] / "benchmarks" / "operator.py"
    spec = importlib.util.spec_from_file_location("operator_bench", path)
    assert spec is not None and spec.loader is not None
    operator_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(operator_bench)

    # _one raises unless each command is accepted and its steering.applied event is seen.
    results: dict[str, Any] = operator_bench.run(run_counts=(3,), commands=4)
    (scenario,) = results["scenarios"]
    assert scenario["runs"] == 3 and scenario["commands"] == 4
    assert set(scenario["ways"]) == {"in-process", "HTTP", "another process"}
    for way in scenario["ways"].values():
        assert 0 < way["p50_ms"] <= way["p99_ms"] <= way["max_ms"]
    assert "another process" in operator_bench.report(results)
