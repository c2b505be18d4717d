"""``import tinyagents``: how long it takes in a fresh interpreter, and what it loads.

Each figure is the best of ``--runs`` fresh interpreters (``-X importtime``, the cumulative time
of the ``tinyagents`` package), with bytecode cached as an installed package has it (a warm-up
run writes ``__pycache__`` even where ``PYTHONDONTWRITEBYTECODE`` is set: without it every run
recompiles the package, which doubles the time). Beside it, the floor every program using the
package pays anyway: ``import asyncio, pydantic`` in the same kind of interpreter. The ratio of
the two changes less from machine to machine than either time.

The import must not load litellm, a server or a database client: those are imported on first
use. The run fails (exit status 1) if one of them is loaded.

    .venv/bin/python benchmarks/import_time.py [--runs 15]

Target: ``import tinyagents`` ≤ 150 ms on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

TARGET_MS = 150
ROOT = Path(__file__).resolve().parent.parent
#: Loaded on first use only (DESIGN.md §1; ``tests/test_layering.py`` LAZY_ALLOWED).
MUST_NOT_LOAD = (
    "litellm",
    "fastapi",
    "starlette",
    "uvicorn",
    "redis",
    "asyncpg",
    "opentelemetry",
    "aiohttp",
)

_PROBE = """
import json, sys
import {modules}
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}})))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _cumulative_us(stderr: str, module: str) -> int:
    """The cumulative import time ``-X importtime`` reports for ``module``."""
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == module:
            return int(line.split("|")[1])
    raise RuntimeError(f"-X importtime did not report {module}")


def _best_ms(modules: str, runs: int) -> tuple[float, list[str]]:
    """The best total of the cumulative import times of ``modules`` (comma-separated)."""
    best, loaded = float("inf"), []
    code = _PROBE.format(modules=modules)
    names = [m.strip() for m in modules.split(",")]
    for _ in range(runs + 1):  # the first run writes the bytecode cache
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            capture_output=True,
            text=True,
            env=_env(),
            cwd=ROOT,
            check=True,
        )
        best = min(best, sum(_cumulative_us(done.stderr, m) for m in names) / 1000)
        loaded = json.loads(done.stdout)
    return best, loaded


def run(*, runs: int = 15) -> dict[str, Any]:
    floor_ms, _ = _best_ms("asyncio, pydantic", runs)
    ours_ms, loaded = _best_ms("tinyagents", runs)
    return {
        "target_ms": TARGET_MS,
        "import_ms": round(ours_ms, 1),
        "floor_ms": round(floor_ms, 1),
        "ratio_to_floor": round(ours_ms / floor_ms, 2),
        "heavy_loaded": [m for m in MUST_NOT_LOAD if m in loaded],
    }


def report(results: dict[str, Any]) -> str:
    verdict = "ok" if results["import_ms"] <= results["target_ms"] else "above target"
    heavy = ", ".join(results["heavy_loaded"]) or "none"
    return (
        f"import tinyagents: {results['import_ms']:.0f} ms (target ≤ {results['target_ms']} ms: "
        f"{verdict}); the floor `import asyncio, pydantic`: {results['floor_ms']:.0f} ms; "
        f"tinyagents / floor = {results['ratio_to_floor']:.2f}\n"
        f"  heavy dependencies loaded by the import: {heavy}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    results = run(runs=args.runs)
    print(report(results))
    return 1 if results["heavy_loaded"] else 0


if __name__ == "__main__":
    sys.exit(main())
