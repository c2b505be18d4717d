"""``RunContext``: what tools and middleware of a run can reach (a tool receives it as ``ctx``).

The context names the agent and the run through two small protocols, ``AgentView`` and
``ActiveRun``, rather than through ``Agent`` and ``AgentRun``: those live above this module
(the loop hands every run a context, and ``Agent`` starts loops), so typing against them here
would close an import cycle. ``Agent`` is an ``AgentView``; ``AgentRun`` is an ``ActiveRun``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from tinyagents._record import Record
from tinyagents.harness.model import Message, Model
from tinyagents.harness.render import SteeringRenderer
from tinyagents.harness.tools import Tool
from tinyagents.runs.info import RunInfo
from tinyagents.runs.limits import RunLimits

if TYPE_CHECKING:
    from tinyagents.events.models import Event
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

    #: The newest pause applied: a resume sent before it and delivered after is superseded.
    last_pause: SteeringCommand | None

    async def set_paused(self, paused: bool) -> None: ...
    def allowed_tools(self) -> Mapping[str, Tool]: ...
    def may_call_tools(self) -> bool:
        """Whether a tool call may still come: the run has tools, or one offered to the model
        in its last request (since withdrawn) may still be called or under way."""

    def emit(self, cls: type[Event], **fields: Any) -> None: ...
    def pass_narrowing_down(self, cmd: SteeringCommand, *, landed: bool) -> None:
        """Narrow the live runs below this one by ``cmd`` too, each at its next boundary
        (``landed``: ``cmd`` is being applied to this run now)."""


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class RunContext(Record):
    """What a tool (as ``ctx``) and middleware reach of the run they serve.

    A tool, and the ``tool`` hooks of middleware around it, get a context for their call:
    ``tool_call_id`` and ``tool_name`` name the call (the id its result answers), and
    ``retry`` counts the calls of that tool just before it, in this run, that failed (an
    error result: bad arguments, a ``ToolError``, an exception, a timeout), as pydantic-ai's
    ``RunContext.retry`` does; it is 0 after a call that succeeded. Elsewhere (``model``
    hooks) the three are ``None``, ``None`` and 0.
    """

    runtime: RunHost
    handle: RunHandle
    agent: AgentView
    run: ActiveRun
    tool_call_id: str | None = None
    tool_name: str | None = None
    retry: int = 0

    @property
    def info(self) -> RunInfo:
        return self.handle.info

    @property
    def run_id(self) -> str:
        return self.handle.run_id
