"""One ``__eq__``, ``__repr__`` and ``__hash__`` for the package's dataclasses.

On CPython 3.11 ``@dataclass`` compiles each method it generates from source, one ``exec`` per
method per class (about 70 µs each): with sixty-odd dataclasses, generating the same equality and
repr for every class was a sixth of ``import tinyagents`` (``benchmarks/import_time.py``). A
record class is declared with ``eq=False, repr=False`` and takes them from ``Record`` (or
``FrozenRecord`` for a frozen one), in the dataclass's shape: equal when of the same class with
equal compared fields in order, the repr lists the ``repr=True`` fields, a mutable record is
unhashable and a frozen one hashes its compared fields::

    @dataclass(slots=True, kw_only=True, eq=False, repr=False)
    class Usage(Record):
        input_tokens: int = 0

``tests/test_import_cost.py`` checks every dataclass of the package is declared this way (or
compares by identity on purpose) and that the two agree with what ``@dataclass`` generates.
"""

from __future__ import annotations

import reprlib
from dataclasses import fields
from typing import Any


class Record:
    """Equality and repr of a mutable dataclass declared with ``eq=False, repr=False``."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _compared(self) == _compared(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)  # type: ignore[arg-type]
        return f"{type(self).__qualname__}({shown})"


class FrozenRecord(Record):
    """``Record`` for a ``frozen=True`` dataclass: hashable by its compared fields."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]  # a mutable record has none
        return hash(_compared(self))


def _compared(record: Record) -> tuple[Any, ...]:
    return tuple(getattr(record, f.name) for f in fields(record) if f.compare)  # type: ignore[arg-type]
