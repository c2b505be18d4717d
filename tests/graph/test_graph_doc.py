"""``docs/graph.md``: its example runs and prints what the page says it prints."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

DOC = Path(__file__).parents[2] / "docs" / "graph.md"


RunScript = Callable[..., CompletedProcess[str]]  # the run_script fixture (tests/conftest.py)


def test_the_example_runs_and_prints_what_the_page_shows(
    tmp_path: Path, run_script: RunScript
) -> None:
    text = DOC.read_text()
    example = re.search(r"```python\n(.*?)```", text, flags=re.S)
    assert example is not None, "docs/graph.md should open with a python example"
    shown = re.search(r"```\n(.*?)```", text[example.end() :], flags=re.S)
    assert shown is not None, "the example should be followed by the output it prints"
    done = run_script(example.group(1), tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == shown.group(1).splitlines()
    # what the page claims, independently of how the block above is worded
    assert lines[0] == "interrupted ['brand', 'legal']"  # two parallel tasks, two interrupts
    assert lines[1] == "interrupted ['brand']"  # answering one leaves the other pending
    assert lines[2] == "completed ['drafted', 'legal approved', 'brand rejected', 'published']"
    assert lines[4] == "['published', 'archived']"  # update_state appended through the reducer
    assert lines[8] == "completed ['drafted', 'legal approved', 'published']"  # redirected
    applied = [line.split()[1] for line in lines if line.startswith("steering.applied")]
    assert applied == ["approve", "redirect"]
