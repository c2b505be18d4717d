"""Parent/child structure of runs: ancestors, descendants, depth, siblings."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tinyagents.runs.info import RunInfo


@dataclass(slots=True, kw_only=True)
class RunTreeNode:
    """One run and its children, as returned by ``Runtime.tree(root_run_id)``."""

    info: RunInfo
    children: list[RunTreeNode] = field(default_factory=list)

    def walk(self) -> Iterator[RunTreeNode]:
        yield self
        for child in self.children:
            yield from child.walk()

    def snapshot(self) -> dict[str, Any]:
        return {**self.info.snapshot(), "children": [c.snapshot() for c in self.children]}


class RunTree:
    """Index of run infos by id plus a child list per run."""

    def __init__(self) -> None:
        self._infos: dict[str, RunInfo] = {}
        self._children: dict[str, list[str]] = {}  # only runs that have children

    def add(self, info: RunInfo) -> None:
        self._infos[info.run_id] = info
        if info.parent_run_id is not None:
            self._children.setdefault(info.parent_run_id, []).append(info.run_id)

    def get(self, run_id: str) -> RunInfo | None:
        return self._infos.get(run_id)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._infos

    def children(self, run_id: str) -> list[RunInfo]:
        return [self._infos[c] for c in self._children.get(run_id, ())]

    def ancestors(self, run_id: str) -> list[RunInfo]:
        """Parent first, root last."""
        out: list[RunInfo] = []
        info = self._infos.get(run_id)
        while info is not None and info.parent_run_id is not None:
            info = self._infos.get(info.parent_run_id)
            if info is not None:
                out.append(info)
        return out

    def descendants(self, run_id: str) -> list[RunInfo]:
        """Breadth first, not including ``run_id`` itself."""
        out: list[RunInfo] = []
        frontier = list(self._children.get(run_id, ()))
        while frontier:
            nxt: list[str] = []
            for child_id in frontier:
                out.append(self._infos[child_id])
                nxt.extend(self._children.get(child_id, ()))
            frontier = nxt
        return out

    def is_descendant(self, run_id: str, of: str) -> bool:
        return any(a.run_id == of for a in self.ancestors(run_id))

    def depth(self, run_id: str) -> int:
        return len(self.ancestors(run_id))

    def siblings(self, run_id: str) -> list[RunInfo]:
        info = self._infos.get(run_id)
        if info is None or info.parent_run_id is None:
            return []
        return [c for c in self.children(info.parent_run_id) if c.run_id != run_id]

    def subtree(self, run_id: str) -> RunTreeNode | None:
        info = self._infos.get(run_id)
        if info is None:
            return None
        node = RunTreeNode(info=info)
        for child_id in self._children.get(run_id, ()):
            child = self.subtree(child_id)
            if child is not None:
                node.children.append(child)
        return node
