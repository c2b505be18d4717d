"""Names a module gives from other modules of the package, each imported on first use.

``import tinyagents`` loads every module the public names need; a backend that only some
programs use (a SQLite or PostgreSQL store, a checkpointer) is left out of it by its package
naming it here instead of importing it (PEP 562: a module's ``__getattr__`` is asked for a
name its globals lack, ``from package import Name`` included)::

    if TYPE_CHECKING:  # for type checkers, and tests/imports_graph.py's layering
        from tinyagents.store.sqlite import SqliteStore

    __getattr__, __dir__ = lazy_names(__name__, {"SqliteStore": "tinyagents.store.sqlite"})

The ``TYPE_CHECKING`` import says the same thing statically: mypy types the name from it and
the layering test counts it as an import, so a lazy name is held to the layers like any other.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_names(
    module: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``module``: each name of ``homes`` (name ->
    module defining it) is imported from its home when first asked for, then kept in
    ``module``'s globals, so later lookups do not come back here."""

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(importlib.import_module(module), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(importlib.import_module(module)), *homes})

    return __getattr__, __dir__
