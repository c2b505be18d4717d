"""The main job (`make demo`) runs offline and tells the story the README promises."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from tinyagents.cli import inspect_store, main
from tinyagents.demo import run_demo


async def test_demo_runs_offline_and_accounts_for_every_command(tmp_path: Path) -> None:
    out = io.StringIO()
    summary = await run_demo(db=tmp_path / "demo.db", console=Console(file=out, width=200))
    assert summary["status"] == "completed"
    assert "#1042" in summary["output"]
    assert summary["children"] == [
        ("critic", "completed"),
        ("research", "limit_exceeded"),
        ("research", "completed"),
    ]
    # Every requested command reached exactly one terminal state.
    assert sorted(summary["terminal"]) == summary["requested"]
    states = sorted(summary["terminal"].values())
    assert states == ["applied", "applied", "rejected", "rejected"]
    text = out.getvalue()
    assert "would widen the tools" in text
    assert "is its sibling" in text
    assert 'human "alice"' in text
    assert Path(summary["db"]).is_file()


async def test_inspect_prints_tree_and_history(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    summary = await run_demo(db=tmp_path / "demo.db", console=Console(file=io.StringIO()))
    assert await inspect_store(summary["db"], summary["root_run_id"]) == 0
    printed = capsys.readouterr().out
    assert "orchestrator" in printed and "research" in printed
    assert "rejected" in printed and "applied" in printed


def test_inspect_missing_file_is_a_clear_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["inspect", str(tmp_path / "nope.db")]) == 2
    assert "no such store file" in capsys.readouterr().out


def test_inspect_of_a_symlink_that_leads_nowhere_says_so(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Found: a store path that is a symlink loop (or points at a missing file) was "no such
    store file", which sent users looking for a file that is there: the symlink."""
    loop, back, dangling = tmp_path / "loop.db", tmp_path / "back.db", tmp_path / "gone.db"
    loop.symlink_to(back)
    back.symlink_to(loop)
    dangling.symlink_to(tmp_path / "moved.db")
    assert main(["inspect", str(loop)]) == 2
    out = capsys.readouterr().out
    assert "is a symlink" in out and "back.db" in out and "a loop" in out, out
    assert main(["inspect", str(dangling)]) == 2
    out = capsys.readouterr().out
    assert "is a symlink" in out and "moved.db" in out and "does not exist" in out, out
    assert loop.is_symlink() and back.is_symlink() and dangling.is_symlink()  # left as they were
