"""The checkpoint backends benchmark still measures what it says (no timing is asserted:
machines are noisy; ``make bench`` prints the figures)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from services import postgres_dsn

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import checkpoint_backends


def test_checkpoint_benchmark_measures_sqlite_and_postgres_and_leaves_no_schema() -> None:
    postgres_dsn()  # skips without PostgreSQL (fails when CI=true)
    results: dict[str, Any] = checkpoint_backends.run(puts=64, repeat=1)
    for backend in ("sqlite", "postgres", "postgres_async"):
        assert results[backend] is not None, results.get("postgres_error")
        assert all(results[backend][name] > 0 for name in ("chain", "threads", "graph"))
    report = checkpoint_backends.report(results)
    assert "PG/SQLite" in report and len(report.splitlines()) == 2 + 3
    assert "not measured" not in report


def test_the_report_says_when_postgres_was_not_measured() -> None:
    figures = {"chain": 1.0, "threads": 2.0, "graph": 3.0}
    results = {
        "puts": 1,
        "repeat": 1,
        "threads": 16,
        "sqlite": figures,
        "postgres": None,
        "postgres_async": None,
        "postgres_error": "OSError: refused",
    }
    report = checkpoint_backends.report(results)
    assert report.splitlines()[-1] == "PostgreSQL not measured: OSError: refused"
