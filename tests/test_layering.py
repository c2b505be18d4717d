"""Imports point down (DESIGN.md §1): read every module's imports and check the layers.

Every import counts: module level, under ``TYPE_CHECKING`` and inside functions. The test
fails on an import that points up a layer, on an import cycle between modules, and on an
import inside a function that is not one of the lazily loaded heavy dependencies. There is no
list of exceptions.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent

#: Layer of each module, by longest matching dotted prefix; higher may import lower.
#: ``_clock`` and ``errors`` sit at the bottom (they import nothing from tinyagents), so the
#: protocol layer can take ids and time and raise ``InvalidCommandError``.
LAYERS: dict[str, float] = {
    "tinyagents._clock": 0,
    "tinyagents.errors": 0,
    "tinyagents.protocol": 1,
    "tinyagents.events": 2,
    "tinyagents.store": 2,
    "tinyagents.steering": 3,
    "tinyagents.runs": 3,
    "tinyagents.harness": 4,
    "tinyagents.graph": 4,
    "tinyagents.supervisor": 5,
    # Scale-out is used by the composition layer only: above everything it may not serve.
    "tinyagents.distributed": 5.5,
    "tinyagents.runtime": 6,
    "tinyagents.cli": 7,
    "tinyagents.demo": 7,
    "tinyagents.server": 7,
    # The package itself re-exports the public names of every layer.
    "tinyagents": 7,
    "tinyagents.testkit": 8,
}

#: Third-party modules heavy enough to import inside the function that needs them, so that
#: ``import tinyagents`` stays fast (DESIGN.md §1 and STYLE.md, Async).
LAZY_ALLOWED = frozenset(
    {
        "litellm",  # ~2.4 s
        "fastapi",
        "uvicorn",
        "redis",
        "asyncpg",
        "opentelemetry",
        "networkx",  # ~0.2 s, only for graph validation at compile()
        "structlog",  # ~75 ms, only for the structlog sink
        "aiosqlite",  # a database driver, loaded on connect like asyncpg
    }
)


@dataclass(frozen=True, slots=True)
class Import:
    source: str
    target: str
    in_function: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "testkit":  # shipped as tinyagents.testkit
        parts = ["tinyagents", "testkit", *parts[1:]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> dict[str, Path]:
    paths = [*(ROOT / "tinyagents").rglob("*.py"), *(ROOT / "testkit").rglob("*.py")]
    return {module_name(p): p for p in sorted(paths)}


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str, path: Path, modules: set[str]) -> list[Import]:
    """Every import in ``path``; ``from pkg import sub`` names the submodule when it is one."""
    found: list[Import] = []
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(module, alias.name, in_function) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = resolve(module, is_package, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append(Import(module, sub if sub in modules else target, in_function))
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def layer_of(module: str) -> float | None:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        layer = LAYERS.get(".".join(parts[:end]))
        if layer is not None:
            return layer
    return None


def violations() -> set[str]:
    files = source_files()
    modules = set(files)
    found: set[str] = set()
    graph: nx.DiGraph[str] = nx.DiGraph()
    for module, path in files.items():
        for imp in imports_of(module, path, modules):
            ours = imp.target == "tinyagents" or imp.target.startswith("tinyagents.")
            if imp.in_function and imp.target.split(".")[0] not in LAZY_ALLOWED:
                found.add(f"lazy: {imp.source} -> {imp.target}")
            if not ours or imp.target == imp.source:
                continue
            graph.add_edge(imp.source, imp.target)
            source_layer, target_layer = layer_of(imp.source), layer_of(imp.target)
            assert source_layer is not None, f"{imp.source} has no layer: add it to LAYERS"
            assert target_layer is not None, f"{imp.target} has no layer: add it to LAYERS"
            if target_layer > source_layer:
                found.add(f"up: {imp.source} -> {imp.target}")
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            found.add("cycle: " + ", ".join(sorted(component)))
    return found


def test_every_layer_is_known() -> None:
    for module in source_files():
        assert layer_of(module) is not None, f"{module} has no layer: add it to LAYERS"


def test_imports_point_down_without_cycles_or_hidden_imports() -> None:
    found = sorted(violations())
    assert not found, "imports that break the layering (DESIGN.md §1):\n" + "\n".join(found)


def test_the_checker_sees_imports_in_functions_and_under_type_checking(tmp_path: Path) -> None:
    """The test above would pass vacuously if the reader missed imports: check it reads them."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from tinyagents.events import models\n"
        "if TYPE_CHECKING:\n"
        "    from tinyagents.runtime import Runtime\n"
        "def later():\n"
        "    import tinyagents.graph.core\n"
        "    from . import sibling\n",
        encoding="utf-8",
    )
    modules = {"tinyagents.events.models", "tinyagents.store.sibling"}
    found = imports_of("tinyagents.store.probe", source, modules)
    assert Import("tinyagents.store.probe", "tinyagents.events.models", False) in found
    assert Import("tinyagents.store.probe", "tinyagents.runtime", False) in found
    assert Import("tinyagents.store.probe", "tinyagents.graph.core", True) in found
    assert Import("tinyagents.store.probe", "tinyagents.store.sibling", True) in found
    assert layer_of("tinyagents.runtime") > layer_of("tinyagents.store.probe")  # type: ignore[operator]
