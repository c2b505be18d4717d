"""The run statuses, and which of them are unfinished, are spelled once: in the protocol layer,
next to ``CommandState`` (DESIGN.md, "one of each"). The store, the runs layer, scale-out and
the product layer take the set from there; a copy spelled elsewhere would drift from it the
day a status is added (the store's copy and scale-out's copy once sat beside two derived ones).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import pytest
from imports_graph import source_files

from tinyagents import CommandState, RunStatus
from tinyagents.console import describe
from tinyagents.events import RunEvent
from tinyagents.protocol import UNFINISHED_RUN_STATUSES
from tinyagents.store.base import judged_holder

HOME = "tinyagents.protocol.state"
NAMES = frozenset(s.value for s in RunStatus)


def _status_words(node: ast.AST) -> list[str]:
    """The run statuses a set, tuple or list literal spells (``"running"`` or ``"run.failed"``)."""
    if not isinstance(node, ast.Set | ast.Tuple | ast.List):
        return []
    words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return [w for w in words if w.removeprefix("run.") in NAMES]


def _literal_sets(tree: ast.AST) -> list[ast.AST]:
    """Set, tuple and list literals outside type annotations (``Literal[...]`` spells a type)."""
    inside_types = {
        id(n) for s in ast.walk(tree) if isinstance(s, ast.Subscript) for n in ast.walk(s.slice)
    }
    return [n for n in ast.walk(tree) if id(n) not in inside_types]


def _spelled_sets(words_of: Callable[[ast.AST], list[str]]) -> list[str]:
    """Where a module outside the protocol layer spells a set of two or more of the words
    ``words_of`` finds in a set, tuple or list literal: ``module:line: [words]``."""
    copies = []
    for module, path in source_files().items():
        if module == HOME or module.startswith("tinyagents.testkit"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _literal_sets(tree):
            words = words_of(node)
            if len(words) >= 2:
                copies.append(f"{module}:{node.lineno}: {words}")  # type: ignore[attr-defined]
    return copies


def test_no_module_but_the_protocol_spells_a_set_of_run_statuses() -> None:
    copies = _spelled_sets(_status_words)
    assert not copies, "use tinyagents.protocol's run statuses instead of:\n" + "\n".join(copies)


def test_the_unfinished_statuses_are_those_not_finished() -> None:
    assert {s for s in RunStatus if not s.finished} == UNFINISHED_RUN_STATUSES
    assert all(isinstance(s, RunStatus) for s in UNFINISHED_RUN_STATUSES)


@pytest.mark.parametrize("status", list(RunStatus))
def test_the_store_reads_a_holders_status_as_the_run_status_does(status: RunStatus) -> None:
    """A held thread's run snapshot that says unfinished is its holder whatever its times; a
    finished one taken again later is read as the new, unsaved holder."""
    snapshot = {
        "run_id": "r-1",
        "status": status.value,
        "updated_at": "2026-01-01T00:00:00+00:00",
    }
    held = judged_holder(snapshot, "r-1", "worker-1", "2026-01-02T00:00:00+00:00")
    assert (held is snapshot) == (not status.finished)


@pytest.mark.parametrize("status", [s for s in RunStatus if s.finished and s != "completed"])
def test_the_story_tells_every_run_that_ended_without_completing(status: RunStatus) -> None:
    """``run.aborted`` (a supervisor's abort) was left out of the story's copy of the set."""
    event = RunEvent(type=f"run.{status.value}", run_id="r-1", error="why it ended")  # type: ignore[arg-type]
    told = describe(event)
    assert told is not None and f"run.{status.value}" in told and "why it ended" in told


COMMAND_STATES = frozenset(s.value for s in CommandState)


def _command_state_words(node: ast.AST) -> list[str]:
    """The command states a set, tuple or list literal spells as bare text (``"accepted"``;
    an event type, ``"steering.accepted"``, names an event, not a state)."""
    if not isinstance(node, ast.Set | ast.Tuple | ast.List):
        return []
    words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return [w for w in words if w in COMMAND_STATES]


def test_no_module_but_the_protocol_spells_a_set_of_command_states() -> None:
    """Found spelled again: the dead-run sweep's open states were ``("accepted", "deferred")``
    as text, beside ``CommandState`` (and the CLI's receipts beside ``ReceiptStatus``); a
    state renamed there would silently match nothing. (A state passed as text, ``state=
    "accepted"``, is the next test's.)"""
    copies = _spelled_sets(_command_state_words)
    assert not copies, "use tinyagents.protocol's CommandState instead of:\n" + "\n".join(copies)


def _positional_names(tree: ast.AST) -> dict[str, list[list[str]]]:
    """Each function a module defines, by name: the names of its positional parameters (a
    method's ``self`` or ``cls`` left out, as a call through an attribute does not pass it)."""
    names: dict[str, list[list[str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            if params[:1] in (["self"], ["cls"]):
                params = params[1:]
            names.setdefault(node.name, []).append(params)
    return names


def _names_a_state(node: ast.AST) -> bool:
    """``state``, ``stored.state``, ``c.state``, ``from_state``: what holds a command state."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return "state" in name.lower()


def _state_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """Command states spelled as text where a state is compared or passed: ``x.state ==
    "applied"``, ``f(state="accepted")``, ``self._persist(tracked, "rejected")`` (a parameter of a
    function this module defines, named for a state). A graph step's ``kind="applied"`` or a
    run's ``status == "failed"`` is another vocabulary and is not counted."""
    found: list[tuple[int, str]] = []
    params = _positional_names(tree)

    def is_state(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in COMMAND_STATES

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(map(is_state, sides)) and any(map(_names_a_state, sides)):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            for keyword in node.keywords:
                if keyword.arg and "state" in keyword.arg and is_state(keyword.value):
                    found.append((node.lineno, ast.unparse(node)))
            for i, arg in enumerate(node.args):
                if is_state(arg) and any(
                    i < len(p) and "state" in p[i] for p in params.get(name, [])
                ):
                    found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_module_but_the_protocol_compares_or_passes_a_command_state_as_text() -> None:
    """The router spelled its states as text: ``self._persist(tracked, "rejected", ...)``,
    ``self._finish(tracked, "failed", ...)``, ``state == "accepted"`` — fifteen of them beside
    ``CommandState``, as did the runtime (``c.state == "applied"``) and scale-out
    (``stored.state == "deferred"``); a state renamed there would match nothing, silently."""
    copies = []
    for module, path in source_files().items():
        if module.startswith(("tinyagents.protocol", "tinyagents.testkit")):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        copies += [f"{module}:{line}: {text}" for line, text in _state_literals(tree)]
    assert not copies, "use tinyagents.protocol's CommandState instead of:\n" + "\n".join(copies)


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ('if stored.state == "deferred": pass', True),
        ('ok = "applied" != c.state', True),
        ('store.update_command(cmd, from_state="accepted")', True),
        ('def _persist(self, tracked, state): ...\nself._persist(t, "rejected")', True),
        ('def result(self, status): ...\nself.result("failed")', False),  # a graph's status
        ('Step(kind="applied")', False),  # a graph step's kind
        ('if status == "failed": pass', False),  # a run's status
        ('if kind == "applied": pass', False),
        ("if state is CommandState.ACCEPTED: pass", False),
    ],
)
def test_what_the_command_state_check_counts(source: str, caught: bool) -> None:
    assert bool(_state_literals(ast.parse(source))) is caught
