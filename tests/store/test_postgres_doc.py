"""docs/postgres.md's example runs as written, against the test database, and prints what
the page says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from services import pg_schema, postgres_dsn

DOC = Path(__file__).parents[2] / "docs" / "postgres.md"


def test_the_example_pauses_on_one_machine_and_finishes_on_another(tmp_path: Path) -> None:
    text = DOC.read_text()
    example = re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]
    printed = re.search(r"prints\n\n```\n(.*?)```", text, flags=re.S)
    assert printed is not None
    script = tmp_path / "example.py"
    script.write_text(example)
    env = {
        **os.environ,
        "TINYAGENTS_POSTGRES_DSN": postgres_dsn(),
        "AGENTS_SCHEMA": pg_schema(),  # dropped by conftest's _drop_pg_schemas
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed.group(1)
