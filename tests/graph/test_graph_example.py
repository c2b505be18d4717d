"""examples/graph_approval.py runs and shows what it says it shows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "graph_approval.py"


async def test_graph_approval_example(capsys: object) -> None:
    spec = importlib.util.spec_from_file_location("graph_approval_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its annotations are resolved through sys.modules
    spec.loader.exec_module(module)
    log = await module.main()
    # legal approved by steering, marketing skipped by the redirect, legal's result kept
    assert log == ["drafted", "legal approved: claims are fine", "published"]
