"""Every public name is exported from exactly one place (in the spirit of trio's test_exports).

A *place* is a subpackage of tinyagents (the testkit included) or one of the public top-level
modules (``errors``, ``runtime``). Each subpackage's ``__init__`` has a docstring and an
``__all__`` of names defined in its own modules; no name is exported by two places;
``tinyagents`` re-exports the very objects its places export; no other module's ``__all__``
re-exports another module's names; and code outside the package imports public names from
their place, not from the module that defines them.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from imports_graph import LAYERS, ROOT, is_ours, layer_of, source_files

import tinyagents

#: Top-level modules that are themselves where their names live.
MODULE_PLACES = ("tinyagents.errors", "tinyagents.runtime")


def subpackages() -> list[str]:
    return sorted(
        name
        for name, path in source_files().items()
        if path.name == "__init__.py" and name != "tinyagents"
    )


def exports(place: str) -> dict[str, object]:
    module = importlib.import_module(place)
    if place in MODULE_PLACES:
        return {
            name: value
            for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == place
        }
    return {name: getattr(module, name) for name in module.__all__}


def places() -> list[str]:
    return [*subpackages(), *MODULE_PLACES]


@functools.cache
def defined_names(path: Path) -> frozenset[str]:
    """Names a module defines at its top level (not the ones it imports)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def defining_modules(name: str) -> set[str]:
    return {module for module, path in source_files().items() if name in defined_names(path)}


def inside(module: str, place: str) -> bool:
    return module == place or module.startswith(place + ".")


def private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


@pytest.mark.parametrize("place", subpackages())
def test_subpackage_says_what_it_is_for_and_lists_its_public_names(place: str) -> None:
    module = importlib.import_module(place)
    assert (module.__doc__ or "").strip(), f"{place}/__init__.py needs a docstring"
    assert isinstance(getattr(module, "__all__", None), list), f"{place} needs an __all__"
    assert len(set(module.__all__)) == len(module.__all__), f"{place}.__all__ repeats a name"


@pytest.mark.parametrize("place", subpackages())
def test_exported_names_exist_and_are_defined_in_the_subpackage(place: str) -> None:
    module = importlib.import_module(place)
    for name in module.__all__:
        value = getattr(module, name)  # AttributeError names the missing export
        owners = {m for m in defining_modules(name) if inside(m, place) or private(m)}
        assert owners, f"{place} exports {name}, which none of its modules defines"
        if isinstance(value, type) or inspect.isfunction(value):
            assert value.__module__ in owners, f"{place}.{name} comes from {value.__module__}"


def test_no_name_is_exported_by_two_places() -> None:
    seen: dict[str, str] = {}
    twice = []
    for place in places():
        for name in exports(place):
            if name in seen:
                twice.append(f"{name}: {seen[name]} and {place}")
            seen[name] = place
    assert not twice, "exported from two places:\n" + "\n".join(twice)


def test_the_package_reexports_what_its_places_export() -> None:
    by_name: dict[str, tuple[str, object]] = {}
    for place in places():
        by_name.update({name: (place, value) for name, value in exports(place).items()})
    for name in tinyagents.__all__:
        if name == "__version__":
            continue
        assert name in by_name, f"tinyagents.{name} is exported by no subpackage"
        place, value = by_name[name]
        assert getattr(tinyagents, name) is value, f"tinyagents.{name} is not {place}.{name}"


def test_only_package_inits_reexport_names() -> None:
    """A module's ``__all__`` (if it has one) names only what the module itself defines."""
    wrong = []
    for module, path in source_files().items():
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        listed = [
            elt.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
            for elt in node.value.elts
            if isinstance(elt, ast.Constant)
        ]
        defined = defined_names(path)
        wrong.extend(f"{module}.__all__ re-exports {n}" for n in listed if n not in defined)
    assert not wrong, "\n".join(wrong)


def _outside_files() -> list[Path]:
    files = [
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "examples").rglob("*.py"),
        *(ROOT / "benchmarks").rglob("*.py"),
    ]
    return sorted(files)


def _deep_imports(text: str) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.extend((node.module, alias.name) for alias in node.names)
    return found


def _doc_imports(text: str) -> list[tuple[str, str]]:
    found = []
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        try:
            found.extend(_deep_imports(block))
        except SyntaxError:  # a fragment with "..." in it; its imports are checked by eye
            continue
    return found


def test_code_outside_the_package_imports_public_names_from_their_place() -> None:
    """Tests, examples, docs and benchmarks say ``from tinyagents.runs import RunHandle``,
    not ``from tinyagents.runs.handle import RunHandle``: the defining module may move."""
    place_of = {name: place for place in places() for name in exports(place)}
    deep = []
    sources = [(p, _deep_imports(p.read_text(encoding="utf-8"))) for p in _outside_files()]
    docs = [*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    sources += [(p, _doc_imports(p.read_text(encoding="utf-8"))) for p in docs]
    for path, imports in sources:
        for module, name in imports:
            place = place_of.get(name)
            if not is_ours(module) or place is None or module in (place, "tinyagents"):
                continue
            if inside(module, place):
                deep.append(f"{path.relative_to(ROOT)}: from {module} import {name} -> {place}")
    assert not deep, "import these from their package:\n" + "\n".join(sorted(deep))


def import_each(root: str, modules: list[str], *, bare: bool, path: Path | None = None) -> str:
    """Failures of importing each module first in a fresh interpreter (tests/import_each.py);
    ``path`` is where to find ``root`` when it is not installed."""
    env = {**os.environ, "PYTHONPATH": str(path)} if path else None
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "import_each.py"), root, *(["--bare"] * bare)],
        input="\n".join(modules),
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return done.stdout.strip()


def test_every_module_imports_on_its_own() -> None:
    """A package ``__init__`` runs before any of its modules: one that imports a module which
    (through others) comes back into the package while it is half-imported breaks imports
    that start there. Import every module first, in a fresh interpreter."""
    modules = sorted(source_files())
    assert import_each("tinyagents", modules, bare=False) == ""
    # Below the top layer nothing imports the package root: start without its __init__ too,
    # so a loop between package __init__s fails even while the root's import order hides it.
    top = LAYERS["tinyagents"]
    below = [m for m in modules if (layer_of(m) or top) < top]
    assert import_each("tinyagents", below, bare=True) == ""


def test_the_import_check_sees_a_package_init_that_loops(tmp_path: Path) -> None:
    """The check above would pass vacuously if it imported from a warm interpreter."""
    pkg = tmp_path / "loopy"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("from loopy.a.top import TOP\n")
    (pkg / "a" / "low.py").write_text("LOW = 1\n")
    (pkg / "a" / "top.py").write_text("from loopy.b.mid import MID\nTOP = MID\n")
    (pkg / "b" / "__init__.py").write_text("")
    (pkg / "b" / "mid.py").write_text("from loopy.a.low import LOW\nMID = LOW\n")
    assert "import loopy.b.mid first" in import_each(
        "loopy", ["loopy.b.mid"], bare=True, path=tmp_path
    )
    assert import_each("loopy", ["loopy.a.low"], bare=True, path=tmp_path) == ""
    assert "import loopy.b.mid first" in import_each(
        "loopy", ["loopy.a.low", "loopy.b", "loopy.b.mid"], bare=False, path=tmp_path
    )
