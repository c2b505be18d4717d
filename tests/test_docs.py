"""The README's code runs as written (docs that do not run are worse than none)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

ROOT = Path(__file__).parent.parent


RunScript = Callable[..., CompletedProcess[str]]  # the run_script fixture (tests/conftest.py)


def test_readme_example_runs(tmp_path: Path, run_script: RunScript) -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README.md should show a python example"
    done = run_script(blocks[0], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "completed done" in done.stdout
    assert "steering.applied" in done.stdout
