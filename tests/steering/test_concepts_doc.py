"""``docs/concepts.md``: its example runs and prints what the page says it prints."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from tinyagents.protocol import PAYLOAD_MODELS, Boundary, SteeringKind
from tinyagents.steering import default_pipeline

DOC = Path(__file__).parents[2] / "docs" / "concepts.md"


RunScript = Callable[..., CompletedProcess[str]]  # the run_script fixture (tests/conftest.py)


def test_the_example_runs(tmp_path: Path, run_script: RunScript) -> None:
    (example,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    done = run_script(example, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "accepted"
    assert lines[1].endswith("steering can only narrow")
    assert [line.split()[0] for line in lines[2:]] == [
        "steering.requested",
        "steering.accepted",
        "steering.requested",
        "steering.rejected",
        "steering.delivered",
        "steering.applied",
    ]


def test_the_page_names_every_kind_boundary_and_built_in_policy() -> None:
    text = DOC.read_text()
    for kind in SteeringKind:
        assert f"| `{kind.value}` |" in text, kind
    for boundary in Boundary:
        assert f"`{boundary.value}`" in text, boundary
    for policy_id in default_pipeline().ids:
        assert f"| `{policy_id}` |" in text, policy_id
    for kind, model in PAYLOAD_MODELS.items():
        for field in model.model_fields:
            assert f"`{field}`" in text, (kind, field)
