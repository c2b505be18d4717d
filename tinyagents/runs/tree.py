"""Parent/child structure of runs: ancestors, descendants, depth, siblings.

Every walk is a loop over an explicit stack or frontier, never recursion: a tree is as deep as
its runs make it (a chain of 5,000 sub-agents included), and Python's recursion limit is ~1,000.
Every walk also visits a run at most once, so a parent cycle (two runs registered before their
parents, each naming the other) cannot make it loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import field
from typing import Any

from tinyagents._record import Record, record
from tinyagents.runs.info import RunInfo


@record(slots=True, kw_only=True, eq=False, repr=False)
class RunTreeNode(Record):
    """One run and its children, as returned by ``Runtime.tree(root_run_id)``."""

    info: RunInfo
    children: list[RunTreeNode] = field(default_factory=list)

    def walk(self) -> Iterator[RunTreeNode]:
        """This node and every node under it, depth first, children in order."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def snapshot(self) -> dict[str, Any]:
        """The subtree as nested dicts: each run's snapshot plus its ``children``."""
        root: dict[str, Any] = {**self.info.snapshot(), "children": []}
        stack: list[tuple[RunTreeNode, dict[str, Any]]] = [(self, root)]
        while stack:
            node, out = stack.pop()
            for child in node.children:
                child_out = {**child.info.snapshot(), "children": []}
                out["children"].append(child_out)
                stack.append((child, child_out))
        return root


class RunTree:
    """Index of run infos by id plus a child list per run."""

    def __init__(self) -> None:
        self._infos: dict[str, RunInfo] = {}
        self._children: dict[str, list[str]] = {}  # only runs that have children

    def add(self, info: RunInfo) -> None:
        self._infos[info.run_id] = info
        if info.parent_run_id is not None:
            self._children.setdefault(info.parent_run_id, []).append(info.run_id)

    def remove(self, run_ids: Iterable[str]) -> None:
        """Forget these runs (a released subtree): their infos, their child lists, and their
        entries in the child lists of parents that stay."""
        gone = set(run_ids)
        for run_id in gone:
            info = self._infos.pop(run_id, None)
            self._children.pop(run_id, None)
            parent = info.parent_run_id if info is not None else None
            if parent is not None and parent not in gone:
                siblings = self._children.get(parent)
                if siblings is not None and run_id in siblings:
                    siblings.remove(run_id)
                    if not siblings:
                        del self._children[parent]

    def __len__(self) -> int:
        return len(self._infos)

    def get(self, run_id: str) -> RunInfo | None:
        return self._infos.get(run_id)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._infos

    def children(self, run_id: str) -> list[RunInfo]:
        return [self._infos[c] for c in self._children.get(run_id, ())]

    def ancestors(self, run_id: str) -> list[RunInfo]:
        """Parent first, root last."""
        out: list[RunInfo] = []
        seen = {run_id}
        info = self._infos.get(run_id)
        while info is not None and info.parent_run_id is not None:
            if info.parent_run_id in seen:
                break
            seen.add(info.parent_run_id)
            info = self._infos.get(info.parent_run_id)
            if info is not None:
                out.append(info)
        return out

    def descendants(self, run_id: str) -> list[RunInfo]:
        """Breadth first, not including ``run_id`` itself."""
        out: list[RunInfo] = []
        seen = {run_id}
        frontier = list(self._children.get(run_id, ()))
        while frontier:
            nxt: list[str] = []
            for child_id in frontier:
                if child_id in seen:
                    continue
                seen.add(child_id)
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
        root = RunTreeNode(info=info)
        seen = {run_id}
        stack = [root]
        while stack:
            node = stack.pop()
            for child_id in self._children.get(node.info.run_id, ()):
                if child_id in seen:
                    continue
                seen.add(child_id)
                child = RunTreeNode(info=self._infos[child_id])
                node.children.append(child)
                stack.append(child)
        return root
