"""A pause of an agent run passed down to the agent runs running below it, and let go of by
its resume: an operator who pauses a parent gets the subtree paused, not a parent parked at a
boundary it reaches only once its children have done all their work.

A run paused by a pause of its own (not one passed down to it) *holds* every live agent run
below it: each is sent a pause of its own, from the actor ``parent_agent(<paused run>, <its
agent>)``, with a ``reason`` naming the paused run, the sender and the command, which lands at
that run's own next safe boundary. It is sent when the pause is queued (if its boundary is
sure to come: a ``next_boundary`` pause) and when it is applied, and to a run started below
while the hold lasts. A run below does not pass on what it was sent: every live run below was
sent its own, by the run paused.

The run's resume (or its end) lets go of the runs it holds, and only of its own hold: a pause
not sent yet is not sent, one still queued is withdrawn (``steering.superseded`` with a
reason, ``superseded_by`` the resume), and one delivered is followed by a resume from the same
actor. A run below resumes when nothing holds it any more: a pause of its own operator still
holds it, as does another run above it that is paused. A resume sent to the run itself lets
go of every hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from tinyagents import _clock
from tinyagents._record import Record
from tinyagents.errors import RuntimeClosed
from tinyagents.protocol.commands import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs.handle import RunHandle
from tinyagents.runs.host import RunHost
from tinyagents.runs.info import RunInfo

#: Tell the run ``handle`` drives that ``cmd`` (a pause or resume) comes from ``origin``'s
#: hold, not from its own operator; False when it cannot take one (not an agent run).
#: ``origin`` None: forget ``cmd`` (withdrawn, never to be applied).
Adopt = Callable[[RunHandle, SteeringCommand, str | None], bool]


@dataclass(slots=True, eq=False, repr=False)
class Derived(Record):
    """One pause (or resume) passed down to run ``run_id``."""

    run_id: str
    cmd: SteeringCommand
    sent: bool = False
    withdrawn: bool = False


class HoldBelow:
    """The hold one agent run has on the agent runs below it (see the module)."""

    def __init__(self, runtime: RunHost, info: RunInfo, agent_name: str, adopt: Adopt) -> None:
        self.runtime = runtime
        self.info = info
        self.actor = SteeringActor.parent_agent(info.run_id, agent_name)
        self.adopt = adopt
        #: The pause holding the runs below; None while there is no hold.
        self.cause: SteeringCommand | None = None
        #: The pauses sent to the runs held, by run id.
        self.held: dict[str, Derived] = {}
        self._sending: asyncio.Task[None] | None = None

    def _relation(self, run: RunInfo | RunHandle) -> str:
        parent = run.info.parent_run_id if isinstance(run, RunHandle) else run.parent_run_id
        return "parent" if parent == self.info.run_id else "ancestor"

    def hold(self, cause: SteeringCommand, *, send: bool = True) -> list[Derived]:
        """Pause every live agent run below that is not held yet (by this run), for
        ``cause``. Returns the pauses made; sent in order by a task of the runtime's unless
        ``send`` is False (the caller submits them)."""
        self.cause = cause
        me = self.info.run_id
        said = cause.payload.get("reason")
        made: list[Derived] = []
        runs = self.runtime.runs
        for below in runs.tree.descendants(me):
            if below.status.finished or below.kind != "agent" or below.run_id in self.held:
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
                payload={"reason": reason},
                priority=cause.priority,
            )
            if not self.adopt(handle, cmd, me):
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
                    self.adopt(handle, derived.cmd, None)
                continue
            if handle is None or handle.status.finished or handle.cancelling:
                continue
            relation = self._relation(handle)
            if handle.inbox.withdraw(
                derived.cmd,
                f"withdrawn: {relation} run {me} {why} before this pause reached the run",
                by=by,
            ):
                self.adopt(handle, derived.cmd, None)
                continue
            pause = derived.cmd
            cmd = SteeringCommand(
                target=SteeringTarget.agent_run(derived.run_id),
                actor=self.actor,
                kind=SteeringKind.RESUME,
                payload={"reason": f"{relation} run {me} {why}"},
                # ordered after its pause at any one boundary: same priority, made later
                priority=pause.priority,
                created_at=max(_clock.now(), pause.created_at + timedelta(microseconds=1)),
            )
            if self.adopt(handle, cmd, me):
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
                    self.adopt(handle, derived.cmd, None)
