"""``docs/graph.md``, "Streaming" and "Step by step": each complete example runs and prints
what the page says it prints."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

DOC = Path(__file__).parents[2] / "docs" / "graph.md"
RunScript = Callable[..., CompletedProcess[str]]  # the run_script fixture (tests/conftest.py)


def examples(section: str) -> list[tuple[str, str]]:
    """(program, printed output) of each complete example of ``section``: a python block
    followed by "prints" and the output block."""
    text = DOC.read_text()
    start = text.index(section)
    end = text.index("\n## ", start + len(section))
    body = text[start:end]
    pattern = r"```python\n((?:(?!```).)*)```\n\nprints\n\n```\n(.*?)```"
    return [(m.group(1), m.group(2)) for m in re.finditer(pattern, body, flags=re.S)]


@pytest.mark.parametrize("index", [0, 1])
def test_the_streaming_examples_print_what_the_page_shows(
    tmp_path: Path, run_script: RunScript, index: int
) -> None:
    found = examples("## Streaming\n")
    assert len(found) == 2, "Streaming and Step by step each have one complete example"
    program, shown = found[index]
    done = run_script(program, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == shown.splitlines()
