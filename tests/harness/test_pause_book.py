"""``Pauses``, the one book of whose pauses hold a run (agent and graph runs alike): a resume
ends only the pauses said before it, whoever sent them (the run's own operator, a run above)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tinyagents.harness.pausing import Pauses
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])


def _cmd(kind: SteeringKind, second: int) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run("r"),
        actor=OPERATOR,
        kind=kind,
        created_at=T0 + timedelta(seconds=second),
    )


def _from(book: Pauses, origin: str, kind: SteeringKind, second: int) -> SteeringCommand:
    cmd = _cmd(kind, second)
    book.adopt(cmd, origin)
    return cmd


def test_a_resume_passed_down_said_before_a_newer_hold_of_its_run_does_not_end_it() -> None:
    """Run ``p`` paused, resumed, paused again; its first resume lands after its second
    pause (a critical one, ordered first): the hold stays, the resume is superseded."""
    book = Pauses()
    assert book.pause(_from(book, "p", SteeringKind.PAUSE, 1)) == "p"
    late = _from(book, "p", SteeringKind.RESUME, 2)
    again = _from(book, "p", SteeringKind.PAUSE, 3)
    book.pause(again)
    resumed = book.resume(late)
    assert resumed.origin == "p" and resumed.superseded_by is again and not resumed.ended
    assert book.paused and book.by() == "above"
    assert book.resume(_from(book, "p", SteeringKind.RESUME, 4)).ended
    assert not book.paused


def test_a_resume_passed_down_ends_its_runs_hold_only() -> None:
    book = Pauses()
    book.pause(_from(book, "p", SteeringKind.PAUSE, 1))
    book.pause(_from(book, "q", SteeringKind.PAUSE, 2))
    own = _cmd(SteeringKind.PAUSE, 3)
    book.pause(own)
    resumed = book.resume(_from(book, "p", SteeringKind.RESUME, 4))
    assert resumed.superseded_by is None and not resumed.ended
    assert book.own is own and list(book.above) == ["q"]


def test_the_runs_own_resume_ends_what_was_said_before_it_and_keeps_what_came_after() -> None:
    book = Pauses()
    book.pause(_cmd(SteeringKind.PAUSE, 1))
    mine = _cmd(SteeringKind.RESUME, 2)
    hold = _from(book, "p", SteeringKind.PAUSE, 3)
    book.pause(hold)
    resumed = book.resume(mine)
    assert resumed.superseded_by is None and not resumed.ended  # applied: its pause ended
    assert book.own is None and book.above == {"p": hold}
    assert book.last is hold


def test_a_resume_said_before_every_pause_holding_the_run_is_superseded_by_the_newest() -> None:
    book = Pauses()
    early = _cmd(SteeringKind.RESUME, 1)
    book.pause(_from(book, "p", SteeringKind.PAUSE, 2))
    own = _cmd(SteeringKind.PAUSE, 3)
    book.pause(own)
    resumed = book.resume(early)
    assert resumed.superseded_by is own and book.paused


def test_a_pause_said_before_a_resume_still_pauses() -> None:
    """Failing safe: a pause delivered after a resume said after it still pauses the run."""
    book = Pauses()
    book.pause(_cmd(SteeringKind.PAUSE, 1))
    assert book.resume(_cmd(SteeringKind.RESUME, 3)).ended
    book.pause(_cmd(SteeringKind.PAUSE, 2))
    assert book.paused and book.by() == "own"


def test_a_resume_with_nothing_to_end_is_applied_unless_a_pause_came_after_it() -> None:
    book = Pauses()
    assert book.resume(_cmd(SteeringKind.RESUME, 1)).superseded_by is None
    pause = _cmd(SteeringKind.PAUSE, 3)
    book.pause(pause)
    book.resume(_cmd(SteeringKind.RESUME, 4))
    assert book.resume(_cmd(SteeringKind.RESUME, 2)).superseded_by is pause
