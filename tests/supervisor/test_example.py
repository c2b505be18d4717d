"""examples/supervised_triage runs offline and shows each supervisor action in its audit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from tinyagents.supervisor.validate import validate_file

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "supervised_triage"


def test_the_example_spec_validates() -> None:
    assert validate_file(EXAMPLE / "supervisor.yaml") == []


def test_the_supervised_triage_example_pauses_resumes_steers_and_audits(
    tmp_path: Path, run_script: Callable[..., CompletedProcess[str]]
) -> None:
    done = run_script(EXAMPLE / "main.py", tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "paused by the supervisor after 3 tool calls" in out
    assert "result: completed: Ticket triaged: billing." in out
    assert "action pause from tool_repeated" in out
    assert "action steer from llm" in out
    assert 'steering.applied   pause           by middleware "supervisor"' in out
    assert 'steering.applied   add_instruction by middleware "supervisor"' in out
