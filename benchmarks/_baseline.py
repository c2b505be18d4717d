"""The code before Foundation v2, measured in the same run as ours.

A "previous" figure recorded on another day is only worth its ratio on the machine that
recorded it: the figures of 2026-11-30 came from a machine three times slower than the one of
2026-12-01, and one of 2026-12-01 on a slower machine again made the new code look slower than
the old. So the benchmarks that compare with the previous code run that code beside ours, in
the same run: ``tree`` writes the tree of ``BASELINE`` (a commit of this repository) into a
temporary directory with ``git archive``, and ``call`` runs a function of that tree's
benchmarks in a fresh interpreter whose ``tinyagents`` is that tree's.

Where the commit cannot be read (no git, a shallow clone, a source archive), ``tree`` yields
the reason instead and the benchmarks print the figures recorded in their ``PREVIOUS``,
labelled as recorded.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The last commit before Foundation v2 (issue 9) began, with Reliability done: the "previous"
#: code of its benchmarks.
BASELINE = "2f4c2a6"


@contextmanager
def tree(commit: str | None = None) -> Iterator[Path | str]:
    """The package and benchmarks of ``commit`` (by default ``BASELINE``) in a temporary
    directory (removed after), or the reason they cannot be had, as a string."""
    commit = commit or BASELINE
    git = shutil.which("git")
    if git is None:
        yield "git is not installed"
        return
    archive = subprocess.run(
        [git, "archive", "--format=tar", commit, "tinyagents", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
    )
    if archive.returncode != 0:
        problem = archive.stderr.decode(errors="replace").strip().splitlines()
        yield f"git archive {commit}: {problem[-1] if problem else 'failed'}"
        return
    with tempfile.TemporaryDirectory(prefix=f"tinyagents-{commit}-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            # our own history, but the safe filter where this Python has it (3.11.4+)
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(tmp, **safe)
        yield Path(tmp)


def environment() -> dict[str, str]:
    """The environment of a benchmark's interpreter: bytecode cached as an installed package
    has it (without it, every fresh interpreter compiles the package again)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPATH", None)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


_CALL = """
import json, sys
sys.path[:0] = [{root!r}, {benchmarks!r}]
import tinyagents
assert tinyagents.__file__.startswith({root!r}), tinyagents.__file__
import {module}
print(json.dumps({expression}))
"""


def call(root: Path, module: str, expression: str) -> Any:
    """Evaluate ``expression`` (JSON-able) after ``import {module}`` from ``root/benchmarks``,
    in a fresh interpreter that imports ``tinyagents`` from ``root``."""
    code = _CALL.format(
        root=str(root), benchmarks=str(root / "benchmarks"), module=module, expression=expression
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=environment(), capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"the baseline's {module} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])
