"""A pause of a run passed down to the runs running below it, and let go of by its resume:
an operator who pauses a parent gets the subtree paused, not a parent parked at a boundary it
reaches only once its children have done all their work.

Agent runs and graph runs alike: a run paused by a pause of its own (not one passed down to
it) *holds* every live agent or graph run below it — the agent runs of a graph's agent nodes,
a graph run started under an agent run — each is sent a pause of its own, from the actor
``parent_agent(<paused run>, <its agent or graph>)`` under the policy ``pause_subtree``
(``policy_ref``: what marks it as passed down, ``passed_down_by``), with a ``reason`` naming
the paused run, the sender and the command (for people: it marks nothing), which lands at that run's own next safe boundary (a graph run's:
between supersteps). It is sent when the pause is queued (if its boundary is sure to come: a
``next_boundary`` pause) and when it is applied, and to a run started below while the hold
lasts (``join_holds_above``). A run below does not pass on what it was sent: every live run
below was sent its own, by the run paused. Each run's driver marks what it is sent as a hold
(``RunDriver.adopt_pause``) and applies it (``harness/apply.py``, ``graph/lowering.py``).

The run's resume (or its end) lets go of the runs it holds, and only of its own hold: a pause
not sent yet is not sent, one still queued is withdrawn (``steering.superseded`` with a
reason, ``superseded_by`` the resume), and one delivered is followed by a resume from the same
actor. A run below resumes when nothing holds it any more: a pause of its own operator still
holds it, as does another run above it that is paused. A resume sent to the run itself lets
go of every hold said before it: a resume never ends a pause said after it (by
``created_at``), whoever sent either (``Pauses``, the one book of agent and graph runs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from datetime import timedelta
from typing import Any

from tinyagents import _clock
from tinyagents._record import Record, record
from tinyagents.errors import RuntimeClosed
from tinyagents.protocol.commands import (
    ParentAgentActor,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringPolicyRef,
    SteeringTarget,
)
from tinyagents.runs.handle import RunHandle
from tinyagents.runs.host import RunHost
from tinyagents.runs.info import RunInfo

_log = logging.getLogger(__name__)

#: The ``policy_ref.policy_id`` of every pause and resume a run passes down to the runs below
#: it (``HoldBelow``), and of nothing else: what a restarted run reads in its steering log to
#: tell a hold from above from a pause of its own (``passed_down_by``). A parent agent's own
#: pause of its child (``steer_subagent``), from the same ``parent_agent`` actor, names no
#: policy; its reason, written by a model, may say anything.
PAUSE_SUBTREE = "pause_subtree"


@record(slots=True, eq=False, repr=False)
class Derived(Record):
    """One pause (or resume) passed down to run ``run_id``."""

    run_id: str
    cmd: SteeringCommand
    sent: bool = False
    withdrawn: bool = False


def adopted(
    above: dict[str, str] | None, cmd: SteeringCommand, origin: str | None
) -> dict[str, str]:
    """A run's ``from_above`` (the pauses and resumes runs above passed down to it and it has
    not applied: correlation id → the run above) with ``cmd`` marked as ``origin``'s, or
    forgotten (``origin`` None: withdrawn). The one ``RunDriver.adopt_pause`` of agent and
    graph runs."""
    if above is None:
        above = {}
    if origin is None:
        above.pop(cmd.correlation_id, None)
    else:
        above[cmd.correlation_id] = origin
    return above


def passed_down_by(cmd: SteeringCommand) -> str | None:
    """The run above that passed pause (or resume) ``cmd`` down to its run (``HoldBelow``:
    from ``parent_agent(<that run>, ...)`` under the policy ``PAUSE_SUBTREE``), or None: a
    command of the run's own. Told by the actor and ``policy_ref`` alone, never by the reason
    (a parent agent's model writes the reasons of its own pauses). Read from the steering log
    when a run is started again: a hold lasts no longer than the process of the run above
    that held it (``holding_pause``)."""
    actor, ref = cmd.actor, cmd.policy_ref
    if isinstance(actor, ParentAgentActor) and ref is not None and ref.policy_id == PAUSE_SUBTREE:
        return actor.run_id
    return None


def runs_above(runtime: RunHost, parent_run_id: str | None) -> set[str]:
    """The runs above a run started (again) below ``parent_run_id``: that run and the runs
    above it in ``runtime``'s tree (none for a root). Their holds come back with them, so
    ``holding_pause`` leaves them out of what brings a restarted run back paused."""
    if parent_run_id is None:
        return set()
    above = {a.run_id for a in runtime.runs.tree.ancestors(parent_run_id)}
    above.add(parent_run_id)
    return above


def holding_pause(
    cmds: list[SteeringCommand], above: Collection[str] = ()
) -> SteeringCommand | None:
    """The pause that held a run when its earlier incarnation stopped, or None: a run
    started again after a crash comes back paused rather than going on with work an
    operator had stopped. ``cmds``: what its log applied, in order; ``above``: the runs above
    it now (its parent and theirs, as it is started again).

    A pause of its own holds it until a ``resume`` of its own applied after it. A pause or
    resume a run above passed down (``passed_down_by``) is the hold of that run, which lasts
    no longer than the process that held it: when that run is above it again, it is no part
    of what brings the run back paused (that run, back paused, holds it again as it is
    started below it, ``join_holds_above``, and lets go of it at its resume; restored as the
    run's own, the pause outlived that hold and the run stayed paused after the run above
    was resumed). When it is not (the run is started again as a root, or below another
    run), nothing would hold it nor let go of it, and its operator's pause would be lost: a
    hold its log still has (no resume passed down by that run, nor one of its own, applied
    after it) brings it back paused, as a pause of its own (the newest such pause, when a
    pause of its own does not hold it)."""
    own: SteeringCommand | None = None
    held: dict[str, SteeringCommand] = {}
    for cmd in cmds:
        origin = passed_down_by(cmd)
        if origin is not None:
            if origin in above:
                continue
            if cmd.kind is SteeringKind.PAUSE:
                held[origin] = cmd
            elif cmd.kind is SteeringKind.RESUME:
                held.pop(origin, None)
        elif cmd.kind is SteeringKind.PAUSE:
            own = cmd
        elif cmd.kind is SteeringKind.RESUME:
            own = None
            # it lets go of every hold said before it (``Pauses.resume``)
            held = {o: p for o, p in held.items() if newer_pause(p, cmd) is not None}
    if own is not None or not held:
        return own
    return max(held.values(), key=_said)


def restored_pause_detail(pause: SteeringCommand) -> dict[str, Any]:
    """The ``run.paused`` detail of a run started again (or, a graph run, continued) paused
    by ``pause``: with ``from_above``, the run whose hold it was (that run is not above it
    now)."""
    detail: dict[str, Any] = {"restored": True, "correlation_id": pause.correlation_id}
    origin = passed_down_by(pause)
    if origin is not None:
        detail["from_above"] = origin
    return detail


def newer_pause(last: SteeringCommand | None, cmd: SteeringCommand) -> SteeringCommand | None:
    """``last`` (a pause applied to a run) if ``cmd`` was said before it (by ``created_at``,
    then correlation id): a resume ordered after a critical pause at one boundary would undo
    a pause it never saw. Not the other way round: a pause said before a resume still pauses
    (failing safe). The one rule of agent and graph runs (``Pauses``)."""
    if last is None or (cmd.created_at, cmd.correlation_id) >= (
        last.created_at,
        last.correlation_id,
    ):
        return None
    return last


@record(slots=True, eq=False, repr=False)
class Resumed(Record):
    """What a resume applied to a run did (``Pauses.resume``): ``origin``, the run above
    that passed it down (None: the run's own); ``superseded_by``, the pause said after it
    that it ended nothing for (it is reported superseded, not applied); ``ended``, whether
    it ended the run's pause."""

    origin: str | None
    superseded_by: SteeringCommand | None
    ended: bool


class Pauses:
    """Whose pauses hold one run, an agent run or a graph run alike: the one book of both
    (``harness/apply.py``, ``graph/lowering.py``).

    A run is paused while a pause of its own (its operator's, a supervisor's) or the hold of
    a run above (a pause passed down to it, see the module) is on it. Each is kept with the
    newest pause that made it, so that one rule holds whoever sent what: **a resume said
    before a pause never ends that pause** (it never saw it; ``newer_pause``). A resume
    passed down ends its run's hold only; the run's own resume ends its own pause and every
    hold — each that was said before it. A resume that ends nothing because every pause it
    would end was said after it is superseded by the newest of them.
    """

    __slots__ = ("above", "from_above", "last", "own")

    def __init__(self) -> None:
        #: The newest pause of the run's own that holds it; None: none does.
        self.own: SteeringCommand | None = None
        #: The runs above whose hold pauses the run → the newest pause each passed down.
        self.above: dict[str, SteeringCommand] = {}
        #: The pauses and resumes runs above passed down, until the run applies them
        #: (correlation id → the run above): ``adopted``.
        self.from_above: dict[str, str] | None = None
        #: The newest pause applied to the run, whoever's (a supervisor reads it).
        self.last: SteeringCommand | None = None

    @property
    def paused(self) -> bool:
        """Whether a pause holds the run."""
        return self.own is not None or bool(self.above)

    def by(self) -> str:
        """What holds the run (said on a pause or resume landing on it paused): ``own``, a
        pause of its own (with holds from above or not), or ``above``, holds only."""
        return "own" if self.own is not None else "above"

    def adopt(self, cmd: SteeringCommand, origin: str | None) -> None:
        """``RunDriver.adopt_pause``: ``cmd`` is ``origin``'s hold (None: forget it)."""
        self.from_above = adopted(self.from_above, cmd, origin)

    def passed_down(self, cmd: SteeringCommand) -> bool:
        """Whether ``cmd`` (queued, not applied yet) was passed down by a run above."""
        above = self.from_above
        return above is not None and cmd.correlation_id in above

    def restored(self, pause: SteeringCommand, *, holding: bool) -> None:
        """An earlier incarnation of the run applied ``pause`` (of its own, or the hold of a
        run that is not above it now, which comes back as its own: ``holding_pause``);
        ``holding``: it still held the run when that incarnation stopped."""
        if newer_pause(self.last, pause) is None:
            self.last = pause
        if holding:
            self.own = pause

    def pause(self, cmd: SteeringCommand) -> str | None:
        """Pause ``cmd`` is applied: it holds the run, as a pause of its own or as the hold
        of the run above that passed it down (returned; None for its own)."""
        above = self.from_above
        origin = above.pop(cmd.correlation_id, None) if above else None
        if newer_pause(self.last, cmd) is None:
            self.last = cmd
        if origin is None:
            self.own = _newer(self.own, cmd)
        else:
            self.above[origin] = _newer(self.above.get(origin), cmd)
        return origin

    def resume(self, cmd: SteeringCommand) -> Resumed:
        """Resume ``cmd`` is applied: it ends the pauses it lets go of that were said before
        it (one passed down: its run's hold; the run's own: its own pause and every hold)."""
        above = self.from_above
        origin = above.pop(cmd.correlation_id, None) if above else None
        was_paused = self.paused
        kept: list[SteeringCommand] = []
        ended = False
        holders = list(self.above) if origin is None else [origin]
        for holder in holders:
            pause = self.above.get(holder)
            if pause is None:
                continue
            if newer_pause(pause, cmd) is None:
                del self.above[holder]
                ended = True
            else:
                kept.append(pause)
        if origin is None and self.own is not None:
            if newer_pause(self.own, cmd) is None:
                self.own, ended = None, True
            else:
                kept.append(self.own)
        newer = None
        if not ended:
            newer = max(kept, key=_said) if kept else None
            if newer is None and origin is None:
                newer = newer_pause(self.last, cmd)  # (one said after it and resumed since)
        return Resumed(origin, newer, was_paused and not self.paused)


def _said(cmd: SteeringCommand) -> tuple[object, str]:
    return (cmd.created_at, cmd.correlation_id)


def _newer(held: SteeringCommand | None, cmd: SteeringCommand) -> SteeringCommand:
    """The pause a hold is kept with: the newer of ``held`` and ``cmd``."""
    return cmd if held is None or newer_pause(held, cmd) is None else held


def reconcile_below(
    pauses: Pauses,
    below: HoldBelow | None,
    holding_below: Callable[[], HoldBelow],
    cause: SteeringCommand,
) -> None:
    """After a pause or resume (``cause``) applied to a run, agent or graph run alike: the
    runs below are held (``holding_below()``, made on first use) while a pause of the run's
    own holds it, and let go of otherwise."""
    holding = below is not None and below.cause is not None
    own = pauses.own is not None
    if own and not holding:
        holding_below().hold(cause)
    elif not own and holding:
        assert below is not None
        below.resumed_by(cause)


class HoldBelow:
    """The hold one run (an agent or graph run, named ``name``) has on the runs below it
    (see the module)."""

    def __init__(self, runtime: RunHost, info: RunInfo, name: str) -> None:
        self.runtime = runtime
        self.info = info
        self.actor = SteeringActor.parent_agent(info.run_id, name)
        #: Marks every pause and resume passed down (``passed_down_by``).
        self.policy = SteeringPolicyRef(policy_id=PAUSE_SUBTREE)
        #: The pause holding the runs below; None while there is no hold.
        self.cause: SteeringCommand | None = None
        #: The pauses sent to the runs held, by run id.
        self.held: dict[str, Derived] = {}
        self._sending: asyncio.Task[None] | None = None

    def _relation(self, run: RunInfo | RunHandle) -> str:
        parent = run.info.parent_run_id if isinstance(run, RunHandle) else run.parent_run_id
        return "parent" if parent == self.info.run_id else "ancestor"

    def hold(self, cause: SteeringCommand, *, send: bool = True) -> list[Derived]:
        """Pause every live run below that is not held yet (by this run), for
        ``cause``. Returns the pauses made; sent in order by a task of the runtime's unless
        ``send`` is False (the caller submits them)."""
        self.cause = cause
        me = self.info.run_id
        said = cause.payload.get("reason")
        made: list[Derived] = []
        runs = self.runtime.runs
        for below in runs.tree.descendants(me):
            if below.status.finished or below.run_id in self.held:
                continue
            handle = runs.get(below.run_id)
            if handle is None or handle.cancelling:
                continue
            reason = (
                f"{self._relation(below)} run {me} was paused by {cause.actor.describe()} "
                f"(command {cause.correlation_id})" + (f": {said}" if said else "")
            )
            cmd = SteeringCommand(
                target=SteeringTarget.agent_run(below.run_id),
                actor=self.actor,
                kind=SteeringKind.PAUSE,
                policy_ref=self.policy,
                payload={"reason": reason},
                priority=cause.priority,
            )
            if not handle.driver.adopt_pause(cmd, me):  # a graph task's entry
                continue
            derived = self.held[below.run_id] = Derived(below.run_id, cmd)
            made.append(derived)
        if made and send:
            self._send(made)
        return made

    def release(self, why: str, *, by: str | None = None) -> None:
        """Let go of every run held: ``why`` completes "<relation> run <id> …" (``by``: the
        command that ended the hold, a resume). A pause not sent yet is not sent, one still
        queued is withdrawn, one delivered (or applied) is followed by a resume."""
        self.cause = None
        held, self.held = self.held, {}
        me = self.info.run_id
        runs = self.runtime.runs
        resumes: list[Derived] = []
        for derived in held.values():
            handle = runs.get(derived.run_id)
            if not derived.sent:
                derived.withdrawn = True
                if handle is not None:
                    handle.driver.adopt_pause(derived.cmd, None)
                continue
            if handle is None or handle.status.finished or handle.cancelling:
                continue
            relation = self._relation(handle)
            if handle.inbox.withdraw(
                derived.cmd,
                f"withdrawn: {relation} run {me} {why} before this pause reached the run",
                by=by,
            ):
                handle.driver.adopt_pause(derived.cmd, None)
                continue
            pause = derived.cmd
            cmd = SteeringCommand(
                target=SteeringTarget.agent_run(derived.run_id),
                actor=self.actor,
                kind=SteeringKind.RESUME,
                policy_ref=self.policy,
                payload={"reason": f"{relation} run {me} {why}"},
                # ordered after its pause at any one boundary: same priority, made later
                priority=pause.priority,
                created_at=max(_clock.now(), pause.created_at + timedelta(microseconds=1)),
            )
            if handle.driver.adopt_pause(cmd, me):
                resumes.append(Derived(derived.run_id, cmd))
        if resumes:
            self._send(resumes)

    def resumed_by(self, cmd: SteeringCommand) -> None:
        """Let go of every run held, for ``cmd`` (the resume that ended the hold)."""
        self.release(
            f"was resumed by {cmd.actor.describe()} (command {cmd.correlation_id})",
            by=cmd.correlation_id,
        )

    def _send(self, batch: list[Derived]) -> None:
        """Submit ``batch`` after every batch sent before it (a resume never overtakes the
        pause it follows)."""
        self._sending = self.runtime.spawn(
            self.submit(batch, after=self._sending), name=f"pause-subtree-{self.info.run_id}"
        )

    async def take_in(self) -> None:
        """A run was registered below (not started yet): while the hold lasts, send it its
        pause now, before its first boundary."""
        if self.cause is not None:
            await self.submit(self.hold(self.cause, send=False))

    async def submit(
        self, batch: list[Derived], *, after: asyncio.Task[None] | None = None
    ) -> None:
        """Submit each command of ``batch`` not withdrawn meanwhile; one refused (by the
        run's own policy, say) holds nothing. The runtime closing ends every run anyway."""
        if after is not None and not after.done():
            await asyncio.wait((after,))  # its outcome is its own; a cancel of this still ends this
        for derived in batch:
            if derived.withdrawn:
                continue
            derived.sent = True
            try:
                receipt = await self.runtime.submit(derived.cmd)
            except RuntimeClosed:
                return
            if not receipt.accepted:
                if self.held.get(derived.run_id) is derived:
                    del self.held[derived.run_id]
                handle = self.runtime.runs.get(derived.run_id)
                if handle is not None:
                    handle.driver.adopt_pause(derived.cmd, None)


async def join_holds_above(runtime: RunHost, handle: RunHandle) -> None:
    """Run ``handle`` was registered and has not started: every run above it that holds its
    subtree paused sends it its pause before its first boundary (it does no work until the
    hold ends). A failed send is logged: the run is registered, and starts all the same."""
    runs = runtime.runs
    for above in runs.tree.ancestors(handle.run_id):
        holder = runs.get(above.run_id)
        if holder is None:
            continue
        try:
            await holder.driver.hold_new_run(handle)
        except Exception as exc:
            _log.error(
                "run %s: sending it the pause of run %s failed",
                handle.run_id,
                above.run_id,
                exc_info=exc,
            )
