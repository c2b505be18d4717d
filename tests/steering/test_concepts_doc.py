"""``docs/concepts.md``: its example runs and prints what the page says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tinyagents.steering.commands import PAYLOAD_MODELS, SteeringKind
from tinyagents.steering.policies import default_pipeline
from tinyagents.steering.queue import Boundary

DOC = Path(__file__).parents[2] / "docs" / "concepts.md"


def test_the_example_runs(tmp_path: Path) -> None:
    (example,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    script = tmp_path / "concepts_example.py"
    script.write_text(example)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
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
