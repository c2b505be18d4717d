"""The guides' complete programs run as written: every ```python block right after a
``<!-- runnable: ... -->`` line in docs/*.md is run in a fresh interpreter."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

DOCS = Path(__file__).parent.parent / "docs"
MARKED = re.compile(r"<!-- runnable:[^>]*-->\n```python\n(.*?)```", re.S)

BLOCKS = [
    pytest.param(code, id=f"{doc.name}-{index}")
    for doc in sorted(DOCS.glob("*.md"))
    for index, code in enumerate(MARKED.findall(doc.read_text()))
]


def test_the_guides_have_runnable_blocks() -> None:
    names = {str(p.id).rsplit("-", 1)[0] for p in BLOCKS}
    assert {"harness.md", "testing.md"} <= names


@pytest.mark.parametrize("code", BLOCKS)
def test_a_runnable_block_runs(
    code: str, tmp_path: Path, run_script: Callable[..., CompletedProcess[str]]
) -> None:
    done = run_script(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "a guide's program shows what it did"


FRAGMENTS = [
    pytest.param(code, id=f"{doc.name}-{index}")
    for doc in [*sorted(DOCS.glob("*.md")), DOCS.parent / "README.md"]
    for index, code in enumerate(re.findall(r"```python\n(.*?)```", doc.read_text(), re.S))
]


@pytest.mark.parametrize("code", FRAGMENTS)
def test_every_python_block_parses_and_imports_names_that_exist(code: str) -> None:
    """The blocks that are fragments (an ``await`` at top level, names defined elsewhere)
    cannot run alone, but a renamed or unexported name they import still fails here."""
    import ast
    import importlib

    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT | ast.PyCF_ONLY_AST
    tree = compile(code, "<doc>", "exec", flags=flags)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tinyagents"):
            module = importlib.import_module(str(node.module))
            missing = [a.name for a in node.names if not hasattr(module, a.name)]
            assert not missing, f"{node.module} has no {missing}"


def test_the_supervisor_guides_spec_reference_validates(tmp_path: Path) -> None:
    """docs/supervisor.md's "The spec" block lists every key: copied into a file it must pass
    ``tinyagents validate`` (it gave both ``criteria`` and ``criteria_file``, an error)."""
    from tinyagents.supervisor.validate import validate_file

    text = (DOCS / "supervisor.md").read_text()
    reference = text.split("## The spec", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = tmp_path / "supervisor.yaml"
    spec.write_text(reference)
    errors = [f for f in validate_file(spec) if f.severity == "error"]
    assert errors == []


def test_the_testkit_tables_defaults_are_the_codes() -> None:
    """docs/testing.md's table shows calls such as ``fake_agent(name, *, turns=1, ...)``: each
    parameter it gives a default has that default in the code (it said ``turns=2``, 1 in code)."""
    import ast
    import inspect

    import tinyagents.testkit as testkit

    text = (DOCS / "testing.md").read_text()
    table = text.split("| name | what it is for |", 1)[1].split("\n\n", 1)[0]
    checked = 0
    for cell in re.findall(r"^\| (.*?) \|", table, re.M):
        for call in re.findall(r"`([A-Za-z_]+\([^`]*\))`", cell):
            name = call.split("(", 1)[0]
            func = getattr(testkit, name)
            params = inspect.signature(func).parameters
            args = ast.parse(call.replace("/, ", "").replace("*, ", ""), mode="eval").body
            assert isinstance(args, ast.Call)
            for kw in args.keywords:
                if kw.arg is None or ast.unparse(kw.value) == "...":
                    continue
                assert kw.arg in params, f"{name} has no parameter {kw.arg}"
                assert params[kw.arg].default == ast.literal_eval(kw.value), (
                    f"docs/testing.md shows {name}({kw.arg}={ast.unparse(kw.value)}), "
                    f"the code's default is {params[kw.arg].default!r}"
                )
                checked += 1
    assert checked >= 3


SHOWN = re.compile(
    r"<!-- runnable:[^>]*-->\n```python\n((?:(?!```).)*)```\n\n((?:[^\n`]+\n)*?[^\n`]*prints[^\n`]*(?:\n[^\n`]+)*)"
    r"\n\n```(?:text)?\n(.*?)```",
    re.S,
)
SHOWN_BLOCKS = [
    pytest.param(code, shown, id=f"{doc.name}-{index}")
    for doc in sorted(DOCS.glob("*.md"))
    for index, (code, _, shown) in enumerate(SHOWN.findall(doc.read_text()))
]


def _ids_masked(text: str) -> list[str]:
    """The lines, with generated ids (``r-5c0e4c205ac0``, ``m-b72458b9af29``) made alike."""
    return re.sub(r"\b([a-z]{1,2})-[0-9a-f]{12}\b", r"\1-…", text).strip().splitlines()


def test_the_guides_show_what_they_print() -> None:
    assert len(SHOWN_BLOCKS) >= 7


@pytest.mark.parametrize(("code", "shown"), SHOWN_BLOCKS)
def test_a_runnable_block_prints_what_its_guide_shows(
    code: str, shown: str, tmp_path: Path, run_script: Callable[..., CompletedProcess[str]]
) -> None:
    """A guide that says what its program prints is held to it (ids aside, which vary)."""
    done = run_script(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert _ids_masked(done.stdout) == _ids_masked(shown)
