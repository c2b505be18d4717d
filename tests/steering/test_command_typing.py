"""Type checkers see SteeringCommand's fields as its constructor's keywords (the fast
constructor the runtime uses is hidden from them), so a misspelt field is caught statically."""

from __future__ import annotations

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

SNIPPET = """
from tinyagents.protocol.commands import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget

ok = SteeringCommand(target=SteeringTarget.agent_run("r"), actor=SteeringActor.test(), kind=SteeringKind.PAUSE)
typo = SteeringCommand(target=SteeringTarget.agent_run("r"), actor=SteeringActor.test(), kindd=SteeringKind.PAUSE)
"""


def test_a_misspelt_command_field_is_a_type_error(tmp_path: Path) -> None:
    source = tmp_path / "snippet.py"
    source.write_text(SNIPPET)
    out, err, status = api.run([str(source), "--no-error-summary", "--follow-imports=silent"])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out + err
    # one error, on the misspelt call: "kind" is missing (and "kindd" is no field)
    assert len(errors) == 1 and "snippet.py:5:" in errors[0], out
    assert '"kind"' in errors[0] and "SteeringCommand" in errors[0], out
