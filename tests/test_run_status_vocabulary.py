"""The run statuses, and which of them are unfinished, are spelled once: in the protocol layer,
next to ``CommandState`` (DESIGN.md, "one of each"). The store, the runs layer, scale-out and
the product layer take the set from there; a copy spelled elsewhere would drift from it the
day a status is added (the store's copy and scale-out's copy once sat beside two derived ones).
"""

from __future__ import annotations

import ast

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


def test_no_module_but_the_protocol_spells_a_set_of_run_statuses() -> None:
    copies = []
    for module, path in source_files().items():
        if module == HOME or module.startswith("tinyagents.testkit"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _literal_sets(tree):
            words = _status_words(node)
            if len(words) >= 2:
                copies.append(f"{module}:{node.lineno}: {words}")  # type: ignore[attr-defined]
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
    state renamed there would silently match nothing."""
    copies = []
    for module, path in source_files().items():
        if module == HOME or module.startswith("tinyagents.testkit"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _literal_sets(tree):
            words = _command_state_words(node)
            if len(words) >= 2:
                copies.append(f"{module}:{node.lineno}: {words}")  # type: ignore[attr-defined]
            if (  # store.append_command(cmd, state="accepted")
                isinstance(node, ast.keyword)
                and node.arg == "state"
                and isinstance(node.value, ast.Constant)
                and node.value.value in COMMAND_STATES
            ):
                copies.append(f"{module}:{node.lineno}: state={node.value.value!r}")
    assert not copies, "use tinyagents.protocol's CommandState instead of:\n" + "\n".join(copies)
