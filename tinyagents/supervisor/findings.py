"""``Finding``: one problem static validation found in a supervisor spec or where it is used."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tinyagents._record import FrozenRecord


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Finding(FrozenRecord):
    """An ``error`` (the spec cannot be used) or a ``warning`` (it loads, but probably not as
    meant), with the YAML line when there is one."""

    severity: Literal["error", "warning"]
    message: str
    line: int | None = None

    def render(self, source: str) -> str:
        where = f"{source}:{self.line}" if self.line is not None else source
        return f"{where}: {self.severity}: {self.message}"
