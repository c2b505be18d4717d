"""Sub-agents: an agent run as a child of another run, directly or as a tool.

Children are registered in the run tree, so anyone with authority can steer a child by its run
id without touching the parent; the parent hears about it through ``subagent.*`` events.

- ``SubAgent.invoke`` raises the child's classified error (``RunLimitExceeded``,
  ``RunCancelled`` (``RunAborted`` for an abort), ``RunFailed``).
- ``SubAgentTool`` turns those into an error tool result the parent model can read and act on
  (a limit stop says which limit and the numbers, and that the child did *not* complete).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import field
from typing import TYPE_CHECKING, Any

from tinyagents import _clock
from tinyagents._record import Record, record
from tinyagents.errors import (
    ConfigurationError,
    ModelsWithheld,
    RunAborted,
    RunCancelled,
    RunFailed,
    RunLimitExceeded,
    ToolError,
    limit_usage,
)
from tinyagents.events.models import Event
from tinyagents.harness._agent_args import check_agent_name
from tinyagents.harness.agent import Agent
from tinyagents.harness.context import RunContext
from tinyagents.harness.loop import AgentRun, abandon_child, limit_error, start_agent_run
from tinyagents.harness.model import Message
from tinyagents.harness.tools import (
    InvalidArguments,
    Tool,
    is_tool_name,
    refuse_unknown_arguments,
    to_text,
)
from tinyagents.protocol.state import RunStatus
from tinyagents.protocol.text import shows_nothing
from tinyagents.runs.handle import RunHandle, RunResult
from tinyagents.runs.host import private_host
from tinyagents.runs.info import check_id, event_error

if TYPE_CHECKING:
    from tinyagents.runs.host import RunHost


class SubAgent:
    """An ``Agent`` meant to run under a parent. ``description`` tells the parent model what it does."""

    def __init__(
        self, agent: Agent, *, description: str | None = None, name: str | None = None
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(
                f"SubAgent wraps an Agent, got {type(agent).__name__}: SubAgent(Agent(name, "
                "model, ...), description=...)"
            )
        if description is not None and not isinstance(description, str):
            raise ConfigurationError(
                f"SubAgent {agent.name!r}: description must be text (what it does, shown to "
                f"the parent model), got {type(description).__name__}"
            )
        if name is not None:  # an agent's name, as the tool's (and its errors') name
            check_agent_name(name, who=f"SubAgent {agent.name!r}: name: ")
        self.agent = agent
        self.name = name or agent.name
        self.description = (
            description or agent.description or f"Delegate a task to the {self.name} agent."
        )

    async def start(
        self,
        input: str | list[Message],
        *,
        runtime: RunHost,
        parent: RunHandle | str | None = None,
        **kw: Any,
    ) -> RunHandle:
        return await start_agent_run(runtime, self.agent, input, parent=parent, **kw)

    async def invoke(
        self,
        input: str,
        *,
        runtime: RunHost | None = None,
        parent: RunHandle | str | None = None,
        **kw: Any,
    ) -> Any:
        """Run the sub-agent to the end and return its output; raise if it did not complete."""
        if runtime is None:
            async with private_host() as host:
                return await self.invoke(input, runtime=host, parent=parent, **kw)
        handle = await self.start(input, runtime=runtime, parent=parent, **kw)
        return await output_or_raise(handle, await _wait(runtime, handle, "SubAgent.invoke"))

    async def invoke_with_events(
        self,
        input: str,
        *,
        runtime: RunHost | None = None,
        parent: RunHandle | str | None = None,
        **kw: Any,
    ) -> tuple[RunResult, list[Event]]:
        """Run to the end; return the result and every event of the child's subtree, in order."""
        if runtime is None:
            async with private_host() as host:
                return await self.invoke_with_events(input, runtime=host, parent=parent, **kw)
        events: list[Event] = []
        mine: set[str] = set()

        def collect(event: Event) -> None:
            if event.run_id in mine or (
                event.parent_run_id is not None and event.parent_run_id in mine
            ):
                if event.run_id is not None:
                    mine.add(event.run_id)
                events.append(event)

        # The sink is attached before the start so the child's first events are caught.
        runtime.bus.add_sink(collect)
        try:
            child_id = kw.pop("run_id", None)
            if child_id is None:  # "" is refused by start_agent_run, as ever, not replaced
                child_id = _new_run_id()
            mine.add(child_id)
            handle = await self.start(input, runtime=runtime, parent=parent, run_id=child_id, **kw)
            result = await _wait(runtime, handle, "SubAgent.invoke_with_events")
        finally:
            runtime.bus.remove_sink(collect)
        return result, events

    async def invoke_in_parent(self, input: str, ctx: RunContext, **kw: Any) -> Any:
        """Run as a child of the calling run (from a tool): shares its tree, cancellation and events."""
        return await self.invoke(input, runtime=ctx.runtime, parent=ctx.handle, **kw)

    def session(
        self,
        *,
        runtime: RunHost,
        parent: RunHandle | str | None = None,
        thread_id: str | None = None,
    ) -> SubAgentSession:
        """A multi-turn conversation with this sub-agent, its turns on ``thread_id`` (a new
        thread id if not given). A ``thread_id`` that breaks the id rule, a blank one among
        them, is an ``InvalidIdError`` now: ``""`` was read as none, and the session ran on a
        random thread that steering sent to the thread named never reached."""
        if thread_id is None:
            thread_id = _clock.new_id("th")
        return SubAgentSession(
            subagent=self,
            runtime=runtime,
            parent=parent,
            thread_id=check_id(thread_id, "thread_id"),
        )


@record(slots=True, kw_only=True, eq=False, repr=False)
class SubAgentSession(Record):
    """A multi-turn conversation with one sub-agent: each ``send`` is a run that continues the
    transcript of the previous ones.

    Turns are taken one at a time: a ``send`` made while another is under way (or while the
    last turn's run, reopened by END_OF_TURN steering, takes another exchange) waits for it
    and continues its transcript (two turns started from one transcript would fork it, and
    the one that ended last would drop the other's exchange). Each turn runs on the
    session's ``thread_id``, so steering addressed to that thread
    (``SteeringTarget.thread``) reaches the turn under way, or waits for the next one."""

    subagent: SubAgent
    runtime: RunHost
    parent: RunHandle | str | None = None
    thread_id: str | None = None
    messages: list[Message] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    _turn: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)
    #: The last turn's run and how much of its transcript ``messages`` has taken: an
    #: END_OF_TURN instruction can reopen that run for another exchange after ``send`` returned.
    _last: RunHandle | None = field(default=None, init=False, repr=False)
    _taken: int = field(default=0, init=False, repr=False)

    async def send(self, text: str, **kw: Any) -> Any:
        """Run one turn: ``text`` after the transcript so far; returns the run's output (or
        raises its error, as ``SubAgent.invoke`` does). The transcript keeps the turn either
        way, unless the caller stops waiting: the turn's run is then cancelled, and left out."""
        for own in ("history", "parent"):
            if own in kw:  # a TypeError ("got multiple values") from inside, otherwise
                raise ConfigurationError(
                    f"SubAgentSession.send takes no {own}=: the session's transcript is the "
                    "history of each turn, and its parent is given to SubAgent.session(...)"
                )
        if "hold_thread" in kw:  # every turn holds the session's thread
            raise ConfigurationError(
                "SubAgentSession.send takes no hold_thread=: every turn holds the session's "
                "thread while it runs"
            )
        async with self._turn:
            return await self._send(text, **kw)

    async def _send(self, text: str, **kw: Any) -> Any:
        await self._catch_up()
        # The first turn starts as a plain run of the agent does (an empty history: the run
        # writes its system prompt, with its system prompt and instruction functions); later
        # turns continue its transcript, that one system message leading.
        kw.setdefault("thread_id", self.thread_id)
        handle = await start_agent_run(
            self.runtime,
            self.subagent.agent,
            text,
            parent=self.parent,
            history=list(self.messages),
            hold_thread=True,
            **kw,
        )
        self.runs.append(handle.run_id)
        result = await _wait(self.runtime, handle, "SubAgentSession.send")
        self.messages = list(result.messages)
        self._last, self._taken = handle, len(result.messages)
        return await output_or_raise(handle, result)

    async def _catch_up(self) -> None:
        """The last turn's run, reopened by END_OF_TURN steering after its ``send`` returned,
        is part of the conversation: wait for it to end, and take the exchange it added (the
        next turn started beside it, from a transcript without it: a forked history)."""
        last = self._last
        if last is None:
            return
        transcript = (await last.result()).messages
        self.messages.extend(transcript[self._taken :])
        self._taken = len(transcript)


def as_subagent(child: SubAgent | Agent, *, taker: str) -> SubAgent:
    """``child`` as a ``SubAgent``: an ``Agent`` is taken as ``SubAgent(agent)``."""
    if isinstance(child, SubAgent):
        return child
    if isinstance(child, Agent):
        return SubAgent(child)
    raise ConfigurationError(
        f"{taker} takes a SubAgent or an Agent, got {type(child).__name__}: "
        f"{taker}(SubAgent(agent, description=...))"
    )


class SubAgentTool(Tool):
    """Exposes a sub-agent to a parent model as a tool taking ``{"input": "..."}``. An
    ``Agent`` is taken as ``SubAgent(agent)``."""

    def __init__(
        self,
        subagent: SubAgent | Agent,
        *,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        subagent = as_subagent(subagent, taker="SubAgentTool")
        if name is None and not is_tool_name(subagent.name):
            fixed = re.sub(r"[^A-Za-z0-9_-]", "_", subagent.name)[:64]
            raise ConfigurationError(
                f"SubAgentTool: the sub-agent's name {subagent.name!r} is its tool's name, and "
                "model providers accept only 1-64 letters, digits, '_' or '-'; name the tool: "
                f"SubAgentTool(..., name={fixed!r})"
            )
        self.subagent = subagent
        super().__init__(
            # a blank name is the Tool's to refuse, not read as none (the sub-agent's)
            name=subagent.name if name is None else name,
            description=subagent.description,
            parameters={
                "type": "object",
                "properties": {
                    "input": {"type": "string", "description": "The task for the sub-agent."}
                },
                "required": ["input"],
                "additionalProperties": False,
            },
            timeout_s=timeout_s,
        )

    async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
        refuse_unknown_arguments(self, args)
        text = args.get("input")
        if not isinstance(text, str) or shows_nothing(text):  # (a NUL, "\u200b": no task)
            raise InvalidArguments(f"tool {self.name!r} needs a non-empty string 'input'")
        if not isinstance(ctx, RunContext):
            raise ToolError(f"tool {self.name!r} must be called from an agent run")
        handle = await start_child(self.subagent, text, ctx)
        # the call timed out (timeout_s) or was cancelled: nobody waits for the child
        result = await _wait(ctx.runtime, handle, f"tool {self.name!r}")
        partial = (
            result.status is RunStatus.LIMIT_EXCEEDED
            and handle.info.limits.behavior == "stop_with_partial"
        )
        try:
            if partial and not self.subagent.agent.output_validators:
                output = result.output or ""  # its text, typed output or not
            else:  # a partial output passes the child's validators as a final one does
                output = await output_or_raise(handle, result)
        except RunLimitExceeded as exc:
            # a partial output the child's validators refuse (or no valid typed one) is not
            # passed on: the error says why there is none
            told = (
                f" Its partial output: {result.output!r}." if result.output and not partial else ""
            )
            detail = f"; {exc.detail}" if exc.detail else ""
            numbers = f"{exc.limit} ({limit_usage(exc.used, exc.allowed)}{detail})"
            # the budget of a run above the child (whose calls the child spends) ran out: the
            # child had no limit of its own to raise, and retrying it spends the same budget
            why = (
                f"it hit its configured limit {numbers}"
                if exc.run_id in (None, handle.run_id)
                else f"run {exc.run_id} above it ran out of its budget: {numbers}"
            )
            raise ToolError(
                f"sub-agent {self.subagent.name!r} (run {handle.run_id}) stopped because {why}, "
                f"not because it completed.{told} Retry with a narrower task or a larger budget."
            ) from None
        except RunCancelled as exc:
            # an abort (a supervisor's for a broken policy, or a human's) is no cancellation:
            # the parent's model must not read it as work nobody needed any more; and it is
            # told who stopped the child, not left to guess
            who = f" by {exc.by}" if exc.by else ""
            ended = (
                f"was aborted{who} before it completed"
                if isinstance(exc, RunAborted)
                else f"was cancelled{who}"
            )
            raise ToolError(
                f"sub-agent {self.subagent.name!r} (run {handle.run_id}) {ended}: "
                f"{_told(exc.reason)}"
            ) from None
        except RunFailed as exc:
            # failed, or an output validator raised on its partial output
            error = result.error if result.status is RunStatus.FAILED else str(exc)
            raise ToolError(
                f"sub-agent {self.subagent.name!r} (run {handle.run_id}) failed: {_told(error)}"
            ) from None
        if not partial:
            return output
        # Not an error by the child's own configuration, but the parent must still know
        # that this is partial work, and whose budget stopped it.
        spent = limit_error(handle, result).run_id
        where = (
            "at its configured limit"
            if spent in (None, handle.run_id)
            else f"when run {spent} above it ran out of its budget"
        )
        return (
            f"[partial: sub-agent {self.subagent.name!r} (run {handle.run_id}) stopped "
            f"{where}: {_told(result.error)}]\n{to_text(output)}"
        )


def _told(error: str | None) -> str | None:
    """A child's error as its parent's model reads it: cut as the run's events cut it (a
    provider's error can echo a whole request; ``RunResult.error`` keeps it all)."""
    return error if error is None else event_error(error)


async def start_child(subagent: SubAgent, text: str, ctx: RunContext) -> RunHandle:
    """Start ``subagent`` on ``text`` as a child of the calling run, for a tool: a child that
    cannot start (past ``max_depth``, or no budget left) is a ``ToolError`` the parent model
    can act on."""
    try:
        return await subagent.start(text, runtime=ctx.runtime, parent=ctx.handle)
    except ModelsWithheld as exc:
        raise ToolError(
            f"sub-agent {subagent.name!r} could not start, so nothing ran: {exc}. Do the task "
            "here, or with a sub-agent on an allowed model."
        ) from None
    except RunLimitExceeded as exc:
        if exc.limit == "max_depth":
            # "would use 1, allowed 0" read as a count of something spent: say where the run
            # stands instead (the depth it is at, and the limit's value)
            info = ctx.handle.info
            raise ToolError(
                f"sub-agent {subagent.name!r} could not start: sub-agent depth limit reached: "
                f"this run is at depth {info.depth} and its max_depth is {exc.allowed}, so it "
                "cannot start a sub-agent; nothing ran. Do the task here, without a sub-agent."
            ) from None
        raise ToolError(
            f"sub-agent {subagent.name!r} could not start: it would exceed the configured "
            f"limit {exc.limit} (would use {exc.used}, allowed {exc.allowed}), so it did not "
            "run, let alone complete. Do the task here or split it differently."
        ) from None


async def output_or_raise(handle: RunHandle, result: RunResult) -> Any:
    """The run's output, or its classified error; a ``stop_with_partial`` run's partial
    output as its output validators pass it (``AgentRun.partial_output``)."""
    if result.status is RunStatus.COMPLETED:
        return result.output
    if result.status is RunStatus.LIMIT_EXCEEDED:
        original = limit_error(handle, result)
        if handle.info.limits.behavior == "stop_with_partial":
            # the caller asked for what there is rather than an error
            run = handle.driver
            if isinstance(run, AgentRun):
                return await run.partial_output(result.output, original)
            return result.output
        raise original
    if result.status in (RunStatus.ABORTED, RunStatus.CANCELLED):
        by = getattr(handle.driver, "stopped_by", None)
        ended = RunAborted if result.status is RunStatus.ABORTED else RunCancelled
        raise ended(handle.run_id, result.error, by=by.describe() if by is not None else None)
    cause = getattr(handle.driver, "failure", None)
    raise RunFailed(f"run {handle.run_id} failed: {result.error}") from cause


async def _wait(runtime: RunHost, handle: RunHandle, caller: str) -> RunResult:
    """The run's result; if the caller is cancelled meanwhile (a timeout around it), the run
    is cancelled too rather than left working, and spending, for nobody."""
    try:
        return await handle.result()
    except BaseException:
        abandon_child(runtime, handle, f"stopped waiting for it ({caller})")
        raise


def _new_run_id() -> str:
    return _clock.new_id("r")
