"""The testkit ships inside the package: a built wheel holds every package, and imports."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from services import skip_unless_ci

ROOT = Path(__file__).parent.parent


def _packages_in_tree() -> set[str]:
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "tinyagents").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    return found | {"tinyagents.testkit"}


def test_wheel_contains_every_package_and_imports_testkit(tmp_path: Path) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    # setuptools' "Package would be ignored" banner: a folder below tinyagents/ that is
    # not listed (the console's static/ was, printed on every install)
    assert "would be ignored" not in built.stdout + built.stderr
    (wheel,) = tmp_path.glob("tinyagents-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {"/".join(n.split("/")[:-1]).replace("/", ".") for n in names if n.endswith(".py")}
    missing = _packages_in_tree() - shipped
    assert not missing, f"packages missing from the wheel (add them to pyproject.toml): {missing}"
    assert "tinyagents/testkit/models.py" in names
    assert "tinyagents/py.typed" in names
    for page in ("index.html", "console.js", "console.css", "api-docs.html"):  # console, API docs
        assert f"tinyagents/server/static/{page}" in names
    # Import from the wheel itself, ahead of the editable install.
    code = (
        f"import sys; sys.path.insert(0, {str(wheel)!r}); "
        "import tinyagents.testkit as t; print(t.__file__); t.ScriptedModel([])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert str(wheel) in out.stdout


def test_editable_install_imports_testkit() -> None:
    import tinyagents.testkit as t

    assert Path(t.__file__).parent == ROOT / "testkit"


def test_files_the_cli_writes_in_a_checkout_are_ignored_by_git() -> None:
    """``make demo``, ``tinyagents serve`` and the docs' scripts run from the repo root write
    a store, its WAL side files and the server's signing key there: the key is a secret
    (whoever holds it mints tokens), and ``git add -A`` took it."""
    if not (ROOT / ".git").exists():  # an unpacked sdist: there is no .gitignore to check
        skip_unless_ci("not a git checkout: .gitignore cannot be checked")
    written = [
        "tinyagents-demo.db",
        "tinyagents.db",
        "tinyagents.db-wal",
        "tinyagents.db-shm",
        "tinyagents.db.server-key",
        "runs.db.server-key",
    ]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *written],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert sorted(done.stdout.split()) == sorted(written)
