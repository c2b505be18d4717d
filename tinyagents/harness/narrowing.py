"""A narrowing of an agent run (``constrain_tools``, ``constrain_model``) passed down to the
runs already running below it: a child gets no more than its parent was left with, whether
it started before the narrowing or after.

A run started after its parent applied a narrowing inherits what was taken away
(``withheld_below``). One already running is sent a narrowing of its own, from the actor
``parent_agent(<narrowed run>, <its agent>)``, which lands at its own next safe boundary as
any command to it would, with a ``reason`` naming the narrowed run, the sender and the
command. It is sent twice over, as a cancel is passed down: when the narrowing is queued for
the run (a parent waiting inside a ``SubAgentTool`` call reaches its next boundary only when
its child has done all its work) and when the run applies it (for a child started in between);
a run is sent one per narrowing, by the run narrowed: a run below it does not pass on what it
was sent (``AgentRun.pass_narrowing_down``), since every live run below was sent its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from tinyagents.errors import RuntimeClosed
from tinyagents.protocol.commands import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs.host import RunHost
from tinyagents.runs.info import RunInfo


def taken_by(cmd: SteeringCommand, info: RunInfo) -> frozenset[str]:
    """The tools (or models) ``cmd`` takes away from run ``info`` as it stands now."""
    tools = cmd.kind is SteeringKind.CONSTRAIN_TOOLS
    current: Iterable[str] = (info.tools if tools else info.models) or ()
    keep = set(cmd.payload["tools" if tools else "models"])
    return frozenset(name for name in current if name not in keep)


def narrowings_below(
    runtime: RunHost,
    info: RunInfo,
    agent_name: str,
    cmd: SteeringCommand,
    *,
    sent: set[str],
    landed: bool,
) -> list[tuple[str, SteeringCommand]]:
    """The narrowings to send the live agent runs below ``info`` for ``cmd`` (queued for it,
    or, ``landed``, being applied to it now: what it takes away is then withheld from every
    live run below, for the children they start from now on). A run named in ``sent`` is
    skipped, and those sent to are added. A run with none of the names taken gets nothing,
    nor does one whose every model is taken (a command naming no model would leave its
    requests to its model's default; it keeps its model: steer or cancel it by its id)."""
    taken = taken_by(cmd, info)
    if not taken:
        return []
    tools = cmd.kind is SteeringKind.CONSTRAIN_TOOLS
    me = info.run_id
    actor = SteeringActor.parent_agent(me, agent_name)
    out: list[tuple[str, SteeringCommand]] = []
    for below in runtime.runs.tree.descendants(me):
        if below.status.finished:
            continue
        if landed:
            if tools:
                below.withheld_tools = below.withheld_tools | taken
            else:
                below.withheld_models = below.withheld_models | taken
        if below.kind != "agent" or below.run_id in sent:
            continue
        current = below.tools if tools else below.models
        lost = sorted(name for name in current or () if name in taken)
        if not lost:
            continue
        left = [name for name in current or () if name not in taken]
        if not tools and not left:
            continue
        sent.add(below.run_id)
        relation = "parent" if below.parent_run_id == me else "ancestor"
        reason = (
            f"{relation} run {me} was narrowed by {cmd.actor.describe()} (command "
            f"{cmd.correlation_id}): {lost} taken away"
        )
        narrowing = SteeringCommand(
            target=SteeringTarget.agent_run(below.run_id),
            actor=actor,
            kind=cmd.kind,
            payload={"tools" if tools else "models": left, "reason": reason},
            priority=cmd.priority,
        )
        out.append((below.run_id, narrowing))
    return out


async def send_narrowings(
    runtime: RunHost,
    cmds: list[tuple[str, SteeringCommand]],
    withdrawn: dict[str, str] | None = None,
) -> None:
    """Submit each narrowing; one refused (by the run's own policy, say) is in that run's
    steering history as rejected, and the rest are still sent. One in ``withdrawn``
    (correlation id → reason: the command it was passed down for ended without being
    applied) is not sent, or, withdrawn while it was being submitted, is taken back from its
    run's queue at once (``withdraw_narrowings``)."""
    for run_id, cmd in cmds:
        if withdrawn is not None and cmd.correlation_id in withdrawn:
            continue
        try:
            await runtime.submit(cmd)
        except RuntimeClosed:
            return  # its close ends every run still going, these included
        if withdrawn is not None and cmd.correlation_id in withdrawn:
            _take_back(runtime, run_id, cmd, withdrawn[cmd.correlation_id])


def withdraw_narrowings(
    runtime: RunHost,
    cmds: list[tuple[str, SteeringCommand]],
    reason: str,
    withdrawn: dict[str, str],
) -> None:
    """The command ``cmds`` were passed down for ended without being applied (it failed, or
    its run ended first): each one its run has not taken yet is withdrawn — not sent if it
    was not yet, else superseded in its run's queue with ``reason``. One a run took already
    (delivered, applied) is kept: steering only narrows, and the narrower list it left is
    still within what the run above has."""
    for run_id, cmd in cmds:
        withdrawn[cmd.correlation_id] = reason
        _take_back(runtime, run_id, cmd, reason)


def _take_back(runtime: RunHost, run_id: str, cmd: SteeringCommand, reason: str) -> None:
    handle = runtime.runs.get(run_id)
    if handle is not None and not handle.status.finished:
        handle.inbox.withdraw(cmd, reason)
