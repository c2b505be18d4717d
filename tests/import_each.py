"""Import each module named on stdin as the first import of a fresh interpreter; print failures.

    python tests/import_each.py ROOT_PACKAGE [--bare] < modules.txt

Between modules the root package and everything below it is forgotten (third-party modules
stay loaded, so this is cheap). With ``--bare`` the root package is an empty stand-in, so a
module's own imports, not the order of the root ``__init__.py``, decide which package
``__init__`` runs first.

Importing ``a.b.m`` first runs ``a.b``'s ``__init__`` and then ``m``; when that ``__init__``
already imported ``m``, starting at ``m`` is the same as starting at ``a.b`` and is skipped.
Used by tests/test_exports.py.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
import types


def fresh(root: str, bare: bool) -> None:
    for name in [m for m in sys.modules if m == root or m.startswith(root + ".")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    if bare:
        spec = importlib.util.find_spec(root)
        assert spec is not None and spec.submodule_search_locations is not None
        stand_in = types.ModuleType(root)
        stand_in.__path__ = list(spec.submodule_search_locations)
        stand_in.__spec__ = spec
        sys.modules[root] = stand_in


def loaded(root: str) -> frozenset[str]:
    return frozenset(m for m in sys.modules if m == root or m.startswith(root + "."))


def main(root: str, bare: bool, modules: list[str]) -> list[str]:
    failed: list[str] = []
    # What a fresh start at each module has loaded; the root's is what the root loads itself.
    after: dict[str, frozenset[str]] = {}
    for name in [root, *sorted(set(modules) - {root}, key=lambda m: (m.count("."), m))]:
        parent = name.rpartition(".")[0]
        if name == root and bare:
            after[name] = frozenset()
            continue
        if name in after.get(parent, frozenset()):
            after[name] = after[parent]  # the same start as the parent's
            continue
        fresh(root, bare)
        try:
            importlib.import_module(name)
        except Exception:
            failed.append(f"import {name} first ({'bare' if bare else 'full'} root):")
            failed.append(traceback.format_exc(limit=-4))
        after[name] = loaded(root)
    return failed


if __name__ == "__main__":
    args = sys.argv[1:]
    problems = main(args[0], "--bare" in args, sys.stdin.read().split())
    print("\n".join(problems))
