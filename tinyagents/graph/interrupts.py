"""``Interrupt``: a node's pending question, as the graph records and surfaces it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyagents._record import FrozenRecord


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Interrupt(FrozenRecord):
    """A pending question from a node: answer it with ``Command(resume={id: value})``.

    ``ns`` is empty for the graph's own nodes and ``"node:task_id"`` (``|``-joined when
    nested) for an interrupt raised inside a sub-graph.
    """

    id: str
    value: Any
    task_id: str
    node: str
    ns: str = ""
    index: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "value": self.value,
            "task_id": self.task_id,
            "node": self.node,
            "ns": self.ns,
            "index": self.index,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Interrupt:
        return cls(**data)
