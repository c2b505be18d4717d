"""``RunContext``: what tools and middleware of a run can reach (a tool receives it as ``ctx``).

The context names the agent and the run through two small protocols, ``AgentView`` and
``ActiveRun``, rather than through ``Agent`` and ``AgentRun``: those live above this module
(the loop hands every run a context, and ``Agent`` starts loops), so typing against them here
would close an import cycle. ``Agent`` is an ``AgentView``; ``AgentRun`` is an ``ActiveRun``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from tinyagents._record import Record, record
from tinyagents._threads import in_own_thread
from tinyagents.errors import ConfigurationError
from tinyagents.harness.model import Message, Model
from tinyagents.harness.render import SteeringRenderer
from tinyagents.harness.tools import FunctionTool, Tool
from tinyagents.runs.info import RunInfo
from tinyagents.runs.limits import RunLimits

if TYPE_CHECKING:
    from tinyagents.events.models import Event
    from tinyagents.harness.output import OutputTool
    from tinyagents.harness.pausing import Pauses
    from tinyagents.protocol.commands import SteeringCommand
    from tinyagents.runs.handle import RunHandle
    from tinyagents.runs.host import RunHost


class AgentView(Protocol):
    """The agent a run is made from, as its tools, middleware and steering read it."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def instructions(self) -> str: ...
    @property
    def model(self) -> Model: ...
    @property
    def tools(self) -> Mapping[str, Tool]: ...
    @property
    def limits(self) -> RunLimits: ...
    @property
    def models(self) -> tuple[str, ...] | None: ...
    @property
    def renderer(self) -> SteeringRenderer: ...
    @property
    def unknown_tools(self) -> Literal["error_result", "fail"]: ...
    @property
    def output_type(self) -> type[BaseModel] | None: ...
    @property
    def output_tools(self) -> Mapping[str, OutputTool]: ...
    @property
    def allows_text(self) -> bool: ...
    @property
    def allows_none(self) -> bool: ...
    @property
    def text_function(self) -> FunctionTool | None: ...


class ActiveRun(Protocol):
    """A running agent loop, as steering applied at its boundaries acts on it."""

    @property
    def agent(self) -> AgentView: ...
    @property
    def handle(self) -> RunHandle: ...
    @property
    def info(self) -> RunInfo: ...
    @property
    def messages(self) -> list[Message]:
        """The conversation so far."""

    @property
    def staged(self) -> list[tuple[SteeringCommand, Message]]:
        """Steering messages delivered but not yet sent to the model."""

    @property
    def paused(self) -> bool: ...
    @property
    def deps(self) -> Any:
        """What the run was given as ``deps=`` (None when nothing was)."""

    @property
    def metadata(self) -> dict[str, Any] | None:
        """The run's metadata (``Agent(metadata=...)``), as resolved when it started."""

    #: Whose pauses hold the run (its own, runs above it), and the pauses and resumes passed
    #: down to it not applied yet: ``tinyagents.harness.pausing.Pauses``.
    pauses: Pauses

    async def set_paused(self, paused: bool) -> None: ...
    def allowed_tools(self) -> Mapping[str, Tool]: ...
    def may_call_tools(self) -> bool:
        """Whether a tool call may still come: the run has tools, or one offered to the model
        in its last request (since withdrawn) may still be called or under way."""

    def emit(self, cls: type[Event], **fields: Any) -> None: ...
    def reconcile_pause(self, cause: SteeringCommand) -> None:
        """Hold the runs below paused while this run is paused by its own pause, else let
        go of them (``cause``: the pause or resume just applied)."""

    def withdraw_narrowing(self, correlation_id: str, why: str) -> None:
        """This run's narrowing ``correlation_id`` ended without being applied: withdraw what
        was passed down for it and not taken yet."""

    def pass_narrowing_down(self, cmd: SteeringCommand, *, landed: bool) -> None:
        """Narrow the live runs below this one by ``cmd`` too, each at its next boundary
        (``landed``: ``cmd`` is being applied to this run now)."""


@record(slots=True, kw_only=True, eq=False, repr=False)
class RunContext(Record):
    """What a tool (as ``ctx``) and middleware reach of the run they serve.

    A tool, and the ``tool`` hooks of middleware around it, get a context for their call:
    ``tool_call_id`` and ``tool_name`` name the call (the id its result answers), and
    ``retry`` counts the calls of that tool just before it, in this run, that failed (an
    error result: bad arguments, a ``ToolError``, an exception, a timeout), as pydantic-ai's
    ``RunContext.retry`` does; it is 0 after a response whose calls of the tool succeeded,
    none failing (a failure beside a success wins, as in pydantic-ai). Elsewhere (``model``
    hooks) the three are ``None``, ``None`` and 0.

    ``max_retries`` is how many failed calls in a row the tool may have before the run ends
    (``Tool(retries=...)``, else ``Agent(retries=...)``; None: no cap). An output validator's
    context has ``retry`` the times this prompt's final answer was sent back so far and
    ``max_retries`` the agent's ``output_retries``, as pydantic-ai's has; its
    ``partial_output`` is True when the output is a ``stop_with_partial`` run's partial
    output (the run stopped at a limit: a ``ModelRetry`` cannot ask its model again), as
    pydantic-ai's is for a partial output it validates.
    """

    runtime: RunHost
    handle: RunHandle
    agent: AgentView
    run: ActiveRun
    tool_call_id: str | None = None
    tool_name: str | None = None
    retry: int = 0
    max_retries: int | None = None
    partial_output: bool = False

    @property
    def info(self) -> RunInfo:
        return self.handle.info

    @property
    def run_id(self) -> str:
        return self.handle.run_id

    @property
    def deps(self) -> Any:
        """The run's dependencies, pydantic-ai's ``ctx.deps``: what the run was given as
        ``deps=`` (``agent.run(..., deps=...)``, ``rt.start``), or an ``agent.override(deps=
        ...)`` around its start; None when nothing was."""
        return self.run.deps

    @property
    def metadata(self) -> dict[str, Any] | None:
        """The run's metadata, pydantic-ai's ``ctx.metadata``: ``Agent(metadata=...)``, a
        run's ``metadata=`` merged over it (or an ``override(metadata=...)``'s), as resolved
        when the run started; None when none was given."""
        return self.run.metadata

    @property
    def last_attempt(self) -> bool:
        """Whether a ``ModelRetry`` now would end the run rather than ask again: ``retry``
        has reached ``max_retries`` (pydantic-ai's ``RunContext.last_attempt``)."""
        return self.retry == self.max_retries


class RunFunction:
    """A function of the user's that a run calls, with the run's context first if it takes
    it: an output validator, ``(output)`` or ``(ctx, output)``, or a system prompt function,
    ``()`` or ``(ctx)``. Sync or async: a sync one runs on a thread of its own (as a sync tool
    does: it must not block the event loop), and an awaitable it returns is awaited."""

    __slots__ = ("fn", "is_async", "name", "takes_ctx")

    def __init__(self, fn: Callable[..., Any], *, values: int, what: str, agent: str) -> None:
        name = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):  # no signature to read (a builtin): not guessed
            params = None
        positional = (
            None
            if params is None
            else [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        )
        if not callable(fn) or positional is None or len(positional) not in (values, values + 1):
            shape = "(output) or (ctx, output)" if values else "() or (ctx)"
            got = "" if positional is None else f", got {len(positional)} positional parameters"
            raise ConfigurationError(
                f"agent {agent!r}: {what} {name!r} must be a function {shape}{got}"
            )
        self.fn = fn
        self.name = name
        self.takes_ctx = len(positional) == values + 1
        # an object with an async __call__ run on a thread hands back its coroutine, awaited
        self.is_async = inspect.iscoroutinefunction(fn)

    async def __call__(self, ctx: RunContext, *values: Any) -> Any:
        args = (ctx, *values) if self.takes_ctx else values
        if self.is_async:
            value = await self.fn(*args)
        else:
            value = await in_own_thread(self.fn, *args, name=f"tinyagents {self.name}")
        if inspect.isawaitable(value):  # a plain def returning a coroutine
            value = await value
        return value
