"""``make bench``: every benchmark, each side by side with its peer, printed as ratios.

    python benchmarks/run_all.py            # all of them
    python benchmarks/run_all.py graph      # only the named ones

Numbers on a shared machine are noisy: read the ratios (peer / tinyagents, measured in the
same process and run), not the absolute microseconds.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).parent))

import agent_loop
import checkpoint_backends
import cross_worker
import graph
import import_time
import memory
import steering_throughput


def _by_path(name: str, file: str) -> Any:
    """A benchmark whose file name is a standard module's too (``operator.py``): loaded from
    its file, since ``import operator`` finds the standard one."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


operator_bench = _by_path("operator_bench", "operator.py")

BENCHMARKS = {
    "steering_throughput": steering_throughput.main,
    "agent_loop": agent_loop.main,
    "graph": graph.main,
    "checkpoint_backends": checkpoint_backends.main,
    "memory": memory.main,
    "operator": operator_bench.main,
    "cross_worker": cross_worker.main,
    "import_time": import_time.main,
}


def main(argv: list[str]) -> int:
    wanted = argv or list(BENCHMARKS)
    unknown = [name for name in wanted if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; have {list(BENCHMARKS)}", file=sys.stderr)
        return 2
    status = 0
    for name in wanted:
        print(f"\n=== {name} " + "=" * (60 - len(name)))
        started = time.perf_counter()
        status = max(status, BENCHMARKS[name]([]) or 0)
        print(f"--- {name} took {time.perf_counter() - started:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
