"""Every script in examples/ runs to completion (examples are documentation that must not rot)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


RunScript = Callable[..., CompletedProcess[str]]  # the run_script fixture (tests/conftest.py)


def test_there_are_examples() -> None:
    assert EXAMPLES, "examples/ should hold runnable scripts"


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script: Path, tmp_path: Path, run_script: RunScript) -> None:
    done = run_script(script, tmp_path, timeout=120)
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.strip(), f"{script.name} printed nothing"
