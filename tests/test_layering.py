"""Imports point down (DESIGN.md §1): read every module's imports and check the layers.

Every import counts: module level, under ``TYPE_CHECKING`` and inside functions. The test
fails on an import that points up a layer, on an import cycle between modules, and on an
import inside a function that is not one of the lazily loaded heavy dependencies. There is no
list of exceptions. The layers and the reader live in ``tests/imports_graph.py``, which also
draws the diagram in docs/architecture.md; the last test here keeps that diagram current.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
from imports_graph import (
    BEGIN,
    DOC,
    END,
    LAZY_ALLOWED,
    Import,
    diagram,
    diagram_in_doc,
    imports_of,
    is_ours,
    layer_of,
    source_files,
)


def violations() -> set[str]:
    files = source_files()
    modules = set(files)
    found: set[str] = set()
    graph: nx.DiGraph[str] = nx.DiGraph()
    for module, path in files.items():
        for imp in imports_of(module, path, modules):
            ours = is_ours(imp.target)
            if imp.in_function and imp.target.split(".")[0] not in LAZY_ALLOWED:
                found.add(f"lazy: {imp.source} -> {imp.target}")
            if not ours or imp.target == imp.source:
                continue
            graph.add_edge(imp.source, imp.target)
            source_layer, target_layer = layer_of(imp.source), layer_of(imp.target)
            assert source_layer is not None, (
                f"{imp.source} has no layer: add it to LAYERS in tests/imports_graph.py"
            )
            assert target_layer is not None, (
                f"{imp.target} has no layer: add it to LAYERS in tests/imports_graph.py"
            )
            if target_layer > source_layer:
                found.add(f"up: {imp.source} -> {imp.target}")
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            found.add("cycle: " + ", ".join(sorted(component)))
    return found


def test_every_layer_is_known() -> None:
    for module in source_files():
        assert layer_of(module) is not None, (
            f"{module} has no layer: add it to LAYERS in tests/imports_graph.py"
        )


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


def test_architecture_diagram_matches_the_code() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"{DOC} lost its diagram markers {BEGIN!r} … {END!r}"
    assert diagram_in_doc(text) == diagram(), (
        "docs/architecture.md draws an import graph the code no longer has: "
        "regenerate it with `python tests/imports_graph.py --write`"
    )
