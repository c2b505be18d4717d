"""What each steering kind does to an agent run when it is delivered at a boundary."""

from __future__ import annotations

from typing import Any

from tinyagents.events.models import RunEvent
from tinyagents.harness.context import ActiveRun
from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import (
    MESSAGE_KINDS,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
)
from tinyagents.protocol.state import RunStatus
from tinyagents.runs.info import narrow_run
from tinyagents.steering.conflicts import narrow_models, narrow_tools
from tinyagents.steering.policy import CheckPolicy, PolicyContext


class Stop(Exception):
    """Ends the loop early with a status (a cancel applied at a boundary). ``immediate`` says
    the cancel was an IMMEDIATE one: the run's descendants are then cancelled the same way;
    ``by`` is who sent the cancel, when it is known."""

    def __init__(
        self,
        status: RunStatus,
        reason: str | None = None,
        *,
        immediate: bool = False,
        by: SteeringActor | None = None,
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.immediate = immediate
        self.by = by


async def apply(
    run: ActiveRun, cmd: SteeringCommand, boundary: Boundary, where: dict[str, Any]
) -> bool:
    """Apply one delivered command. Returns True when it staged a message for the model
    (it is then marked applied when the next model request carries it)."""
    kind, payload, inbox, info = cmd.kind, cmd.payload, run.handle.inbox, run.info
    if kind in MESSAGE_KINDS or (kind is SteeringKind.REDIRECT and "instruction" in payload):
        if (
            kind is SteeringKind.PROVIDE_CONTEXT
            and payload.get("text") is None
            and "value" not in payload
        ):
            inbox.failed(cmd, "provide_context for an agent run needs 'text'")
            return False
        run.staged.append((cmd, run.agent.renderer.render(cmd)))
        return True
    if kind is SteeringKind.CONSTRAIN_TOOLS:
        # what it takes away is withheld from the children the run starts from now on, and
        # taken from those running below it, at their own next boundaries
        run.pass_narrowing_down(cmd, landed=True)
        narrow_run(info, tools=narrow_tools(info.tools, payload["tools"]))
        inbox.applied(cmd, tools=sorted(info.tools or ()), **where)
    elif kind is SteeringKind.CONSTRAIN_MODEL:
        # The allowlist policy judged it against the models allowed at submit: a narrowing
        # queued before it and applied first may leave it none. It then fails and changes
        # nothing (an empty list would send requests naming no model: the model's default).
        models = narrow_models(info.models, payload["models"])
        if not models:
            why = (
                f"constrain_model left no model allowed: {list(payload['models'])} shares "
                f"none with the models allowed now {list(info.models or ())}"
            )
            inbox.failed(cmd, why)
            # what it passed down when it was queued and the runs below have not taken yet
            # goes with it (what they took stays: steering only narrows)
            run.withdraw_narrowing(cmd.correlation_id, why)
        else:
            run.pass_narrowing_down(cmd, landed=True)
            narrow_run(info, models=models)
            inbox.applied(cmd, models=list(models), **where)
    elif kind is SteeringKind.UPDATE_BUDGET:
        info.limits = info.limits.replace(**payload)
        inbox.applied(cmd, limits=payload, **where)
    elif kind is SteeringKind.PAUSE or kind is SteeringKind.RESUME:
        await _pause_or_resume(run, cmd, boundary, where)
    elif kind is SteeringKind.CANCEL:
        inbox.applied(cmd, boundary=boundary.value, **where)
        ended = RunStatus.ABORTED if payload.get("abort") else RunStatus.CANCELLED
        raise Stop(
            ended,
            payload.get("reason") or f"{ended.value} by {cmd.actor.describe()}",
            immediate=cmd.delivery is SteeringDelivery.IMMEDIATE,
            by=cmd.actor,
        )
    elif kind is SteeringKind.REQUEST_STATUS:
        status = {
            "status": info.status.value,
            "boundary": boundary.value,
            "usage": info.usage.snapshot(),
            "limits": info.limits.model_dump(mode="json"),
            "tools": sorted(run.allowed_tools()),
            "pending_steering": len(inbox),
        }
        run.emit(
            RunEvent,
            type="run.status",
            status=info.status.value,
            detail={"correlation_id": cmd.correlation_id, **status},
        )
        inbox.applied(cmd, **where)
    else:
        inbox.failed(cmd, _not_for_agents(cmd))
    return False


async def _pause_or_resume(
    run: ActiveRun, cmd: SteeringCommand, boundary: Boundary, where: dict[str, Any]
) -> None:
    """A pause is the run's own (its operator's) or a hold of a run above it, passed down;
    the run is paused while anything holds it, and a resume ends only what was said before
    it (``run.pauses``, ``tinyagents.harness.pausing.Pauses``, as a graph run's). Either way
    the run then holds, or lets go of, the runs below it."""
    inbox, pauses = run.handle.inbox, run.pauses
    # Its event says whose pause it is (a watcher such as the supervisor tells a hold passed
    # down from a pause on the run itself): ``from_above`` names the run above whose hold it
    # is, and a pause landing on a run paused already, or a resume leaving it paused, says
    # what holds it (``paused_by``: a pause of its own, or only holds from above).
    said: dict[str, Any] = {}
    if cmd.kind is SteeringKind.PAUSE:
        was_paused = run.paused
        if was_paused:
            said["paused_by"] = pauses.by()
        origin = pauses.pause(cmd)
        if origin is not None:
            said["from_above"] = origin
        if not was_paused:
            await run.set_paused(True)
        inbox.applied(cmd, boundary=boundary.value, paused=not was_paused, **said, **where)
        run.reconcile_pause(cmd)
        return
    resumed = pauses.resume(cmd)
    if resumed.origin is not None:
        said["from_above"] = resumed.origin
    if resumed.superseded_by is not None:
        # said before every pause it would end (a human's resume ordered after a
        # supervisor's critical pause at one boundary) it would undo a pause it never saw.
        # Not the other way round: a pause said before a resume still pauses (failing safe)
        inbox.superseded(cmd, resumed.superseded_by.correlation_id)
    else:
        if resumed.ended:
            await run.set_paused(False)
        elif pauses.paused:
            said["paused_by"] = pauses.by()
        inbox.applied(cmd, resumed=resumed.ended, **said, **where)
    run.reconcile_pause(cmd)


def restore(run: ActiveRun, cmds: list[SteeringCommand]) -> list[SteeringCommand]:
    """Re-apply, before the first boundary, the state changes of commands an earlier
    incarnation of this run applied (a restart after a crash): narrowed tools and models,
    budgets, and the steering messages the model had seen. No steering events: each command
    already reached its terminal state. Returns the commands restored, in order."""
    info, restored = run.info, []
    seen = {m.metadata.get("steering") for m in run.messages}
    for cmd in cmds:
        kind, payload = cmd.kind, cmd.payload
        if kind is SteeringKind.CONSTRAIN_TOOLS:
            narrow_run(info, tools=narrow_tools(info.tools, payload["tools"]))
        elif kind is SteeringKind.CONSTRAIN_MODEL:
            models = narrow_models(info.models, payload["models"])
            if not models:
                continue  # it could not have been applied like this; keep what the run has
            narrow_run(info, models=models)
        elif kind is SteeringKind.UPDATE_BUDGET:
            info.limits = info.limits.replace(**payload)
        elif kind in MESSAGE_KINDS or (kind is SteeringKind.REDIRECT and "instruction" in payload):
            if cmd.correlation_id not in seen:  # a history passed in may carry it already
                run.messages.append(run.agent.renderer.render(cmd))
        elif kind is SteeringKind.PAUSE:
            run.pauses.restored(cmd, holding=False)  # an older resume is still overtaken
            continue  # whether the run is paused is ``holding_pause``'s to say
        else:
            continue  # resume, cancel, status …: events of that incarnation, not run state
        restored.append(cmd)
    return restored


#: Kinds an agent run has nothing to act on: no interrupt to answer, no graph state.
_GRAPH_ONLY = frozenset({SteeringKind.APPROVE, SteeringKind.REJECT, SteeringKind.UPDATE_STATE})


class AgentCommandCheck(CheckPolicy):
    """An agent run's own policy (after its middleware's): refuses at submit a command the
    run could only accept and fail at its next boundary — ``approve``, ``reject`` and
    ``update_state`` (an agent run has no interrupt and no graph state), a ``redirect``
    without an ``instruction`` or with a ``goto`` (a ``goto`` needs a graph), and one for
    ``after_tool_result`` when the run has no tools (it would fail only when the run ended)."""

    policy_id = "agent"

    def __init__(self, run: ActiveRun) -> None:
        self.run = run

    def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
        if cmd.kind in _GRAPH_ONLY or (
            cmd.kind is SteeringKind.REDIRECT
            and ("instruction" not in cmd.payload or "goto" in cmd.payload)
        ):
            return _not_for_agents(cmd)
        if cmd.delivery is SteeringDelivery.AFTER_TOOL_RESULT and not self.run.may_call_tools():
            return (
                f"run {ctx.target.run_id} has no tools, so it never reaches after_tool_result; "
                "send it for next_boundary, before_model_call or end_of_turn"
            )
        return None


def _not_for_agents(cmd: SteeringCommand) -> str:
    if cmd.kind is SteeringKind.REDIRECT and "instruction" in cmd.payload:
        # applied, its instruction would be the new goal and its goto dropped unseen
        return (
            "redirect to an agent run acts on its 'instruction' only; its 'goto' names "
            "graph nodes, which an agent run has none of: send 'instruction' alone"
        )
    if cmd.kind is SteeringKind.REDIRECT:
        return "redirect with 'goto' needs a graph target; for an agent run send 'instruction'"
    if cmd.kind is SteeringKind.UPDATE_STATE:
        return "update_state needs a graph target (graph_task, graph_node or a graph thread)"
    return f"{cmd.kind.value} has nothing to act on: the agent run has no pending approval"
