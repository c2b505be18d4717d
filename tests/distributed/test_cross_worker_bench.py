"""benchmarks/cross_worker.py still measures what it says (no timing is asserted)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import cross_worker


def test_the_cross_worker_benchmark_applies_every_steer_sent_both_ways(redis_url: str) -> None:
    # _one raises unless each command is accepted and its steering.applied event is seen.
    results: dict[str, Any] = cross_worker.run(run_counts=(3,), commands=4, url=redis_url)
    (scenario,) = results["scenarios"]
    assert scenario["runs"] == 3 and scenario["commands"] == 4
    assert scenario["sent_through_redis"] == 4  # the cross-worker ones went over Redis
    assert set(scenario["ways"]) == {"same worker", "cross worker"}
    for way in scenario["ways"].values():
        assert 0 < way["p50_ms"] <= way["p99_ms"] <= way["max_ms"]
    assert "cross worker" in cross_worker.report(results)


def test_without_redis_the_benchmark_says_it_skipped() -> None:
    results = cross_worker.run(run_counts=(3,), commands=1, url="redis://127.0.0.1:1/0")
    assert "unreachable" in results["skipped"]
    assert cross_worker.report(results).startswith("cross_worker skipped")
