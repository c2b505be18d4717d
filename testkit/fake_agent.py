"""A fake agent, a probe that reports which safe boundary each agent run is at, and the
small tools scenario tests use to hold runs at known points and wait for what they did.

    async with Runtime(testing=True) as rt:
        probe = BoundaryProbe(rt)                      # watches every agent run started later
        hold = probe.hold(Boundary.AFTER_TOOL_RESULT)  # park the first run that gets there
        handle = await rt.start(fake_agent("worker", turns=2), "go")
        await hold.reached.wait()                      # the run is at that boundary now
        await handle.steer("focus")                    # ... so this is delivered right here
        hold.release()
        await handle.result()
        assert probe.boundaries(handle.run_id) == react_boundaries(2)

The probe sees a boundary *before* the run takes its steering there, so a command submitted
while a run is held is delivered at that very boundary.

``Gate`` holds a run inside a tool or a model call until the test opens it; ``EventWaiter``
lets the test wait for an event instead of sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tinyagents.errors import ConfigurationError
from tinyagents.events.models import Event
from tinyagents.harness.agent import Agent
from tinyagents.harness.model import Message, ModelRequest
from tinyagents.harness.tools import FunctionTool, Tool, tool
from tinyagents.protocol.boundary import Boundary

from .models import (
    FunctionModel,
    ScriptedModel,
    ScriptedResponse,
    StepScript,
    reply,
    tool_call,
)

if TYPE_CHECKING:
    from tinyagents.runs.handle import RunHandle
    from tinyagents.runtime import Runtime

__all__ = [
    "BoundaryProbe",
    "BoundaryVisit",
    "EventWaiter",
    "Gate",
    "Hold",
    "fake_agent",
    "first_request_with",
    "react_boundaries",
    "steering_messages",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundaryVisit:
    """One run reaching one boundary: ``where`` names its model request or tool call."""

    run_id: str
    agent_id: str | None
    boundary: Boundary
    final: bool = False
    where: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class Hold:
    """Parks the ``nth`` matching arrival at a boundary until ``release()``."""

    boundary: Boundary
    run_id: str | None = None
    agent_id: str | None = None
    final: bool | None = None
    nth: int = 1
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    visit: BoundaryVisit | None = None
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    _seen: int = 0

    def release(self) -> None:
        self._released.set()

    def matches(self, visit: BoundaryVisit) -> bool:
        return (
            visit.boundary is self.boundary
            and self.run_id in (None, visit.run_id)
            and self.agent_id in (None, visit.agent_id)
            and self.final in (None, visit.final)
        )

    async def arrive(self, visit: BoundaryVisit) -> None:
        if self.visit is not None or not self.matches(visit):
            return
        self._seen += 1
        if self._seen < self.nth:
            return
        self.visit = visit
        self.reached.set()
        await self._released.wait()


class BoundaryProbe:
    """Records every safe boundary each agent run of ``runtime`` reaches, in order.

    Attach it before starting the runs to watch (children started later are watched too).
    """

    def __init__(self, runtime: Runtime) -> None:
        on_register = getattr(getattr(runtime, "runs", None), "on_register", None)
        if not callable(on_register):  # an AttributeError from deep inside, otherwise
            raise ConfigurationError(
                f"BoundaryProbe watches the runs of a Runtime: BoundaryProbe(rt), got "
                f"{type(runtime).__name__}"
            )
        self.runtime = runtime
        self.visits: list[BoundaryVisit] = []
        self._holds: list[Hold] = []
        on_register(self._watch)

    def boundaries(self, run_id: str) -> list[Boundary]:
        """The boundaries ``run_id`` reached, in order."""
        return [v.boundary for v in self.visits if v.run_id == run_id]

    def current(self, run_id: str) -> Boundary | None:
        """The boundary the run is at now (the last one it reached; it may be held there)."""
        for visit in reversed(self.visits):
            if visit.run_id == run_id:
                return visit.boundary
        return None

    def hold(
        self,
        boundary: Boundary,
        *,
        run_id: str | None = None,
        agent_id: str | None = None,
        final: bool | None = None,
        nth: int = 1,
    ) -> Hold:
        """Park the ``nth`` run arrival matching these filters until the hold is released.

        ``boundary`` is one an agent run's loop stops at (a ``Boundary`` or its name); any
        other (a typo, ``WHILE_PAUSED``, a graph's ``BETWEEN_SUPERSTEPS``) is a
        ``ConfigurationError``, as is an ``nth`` that is no whole number from 1: such a hold
        was never reached, and the test awaiting it hung."""
        if isinstance(nth, bool) or not isinstance(nth, int) or nth < 1:
            raise ConfigurationError(
                f"hold(nth=...) counts the matching arrivals from 1 (the first), got {nth!r}"
            )
        hold = Hold(
            boundary=_held_boundary(boundary),
            run_id=run_id,
            agent_id=agent_id,
            final=final,
            nth=nth,
        )
        self._holds.append(hold)
        return hold

    def _watch(self, handle: RunHandle) -> None:
        driver = handle.driver
        real_at = getattr(driver, "at", None)
        if real_at is None:  # not an agent run (a graph run, a hand-driven handle)
            return
        info = handle.info

        async def at(boundary: Boundary, *, final: bool = False, **where: Any) -> bool:
            visit = BoundaryVisit(
                run_id=info.run_id,
                agent_id=info.agent_id,
                boundary=boundary,
                final=final,
                where=dict(where),
            )
            self.visits.append(visit)
            for hold in list(self._holds):
                await hold.arrive(visit)
            return bool(await real_at(boundary, final=final, **where))

        # The loop calls ``self.at`` for every boundary; the run has not started yet.
        driver.at = at  # type: ignore[attr-defined]


#: The boundaries ``BoundaryProbe`` sees: those an agent run's loop calls ``at`` for.
_HOLDABLE = (
    Boundary.BEFORE_MODEL_CALL,
    Boundary.AFTER_MODEL_RESPONSE,
    Boundary.BEFORE_TOOL_DISPATCH,
    Boundary.AFTER_TOOL_RESULT,
    Boundary.BEFORE_LOOP_CONTINUATION,
)


def _held_boundary(boundary: object) -> Boundary:
    """``boundary`` as the ``Boundary`` a hold compares visits with (by identity): a name
    given for one ("before_model_call") matched no visit."""
    found = next((b for b in _HOLDABLE if boundary == b), None)
    if found is None:
        names = ", ".join(b.name for b in _HOLDABLE)
        raise ConfigurationError(
            f"hold({boundary!r}): an agent run's loop stops at no such boundary, so nothing "
            f"would ever be held there; hold one of Boundary.{{{names}}}"
        )
    return found


@tool
def step(n: int) -> str:
    """Do step ``n`` of the fake task."""
    return f"step {n} done"


#: Up to this many turns, ``fake_agent``'s script is made when the agent is (as it always
#: was); past it, as the run reads it, so ``turns=10**9`` does not build a billion responses.
_EAGER_TURNS = 10_000


def fake_agent(
    name: str,
    *,
    turns: int = 1,
    answer: str = "done",
    tools: Sequence[Tool | Any] = (),
    script: Sequence[ScriptedResponse] | None = None,
    **agent_kw: Any,
) -> Agent:
    """An ``Agent`` on a ``ScriptedModel`` that calls ``step`` ``turns`` times, then answers.

    ``script`` replaces that default script (it may call ``step`` and the extra ``tools``).
    ``agent.model.requests`` shows what the model saw. One agent is good for one run. Past
    10,000 turns the script is a ``StepScript``, each response made when the run first reads
    it (not a list of them all, made up front).
    """
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 0:
        raise ConfigurationError(
            f"fake_agent {name!r}: turns must be a whole number of at least 0 (how many times "
            f"the agent calls `step` before it answers), got {turns!r}"
        )
    if script is None and turns > _EAGER_TURNS:  # made as the run reads it (StepScript)
        script = StepScript(turns, answer)
    elif script is None:  # made now: its call ids come before any the run makes
        script = [tool_call("step", n=i) for i in range(1, turns + 1)] + [reply(answer)]
    return Agent(
        name, ScriptedModel(script, name=f"{name}-model"), tools=[step, *tools], **agent_kw
    )


def react_boundaries(turns: int) -> list[Boundary]:
    """The boundaries a run passes for ``turns`` one-call tool turns and a final answer."""
    turn = [
        Boundary.BEFORE_MODEL_CALL,
        Boundary.AFTER_MODEL_RESPONSE,
        Boundary.BEFORE_TOOL_DISPATCH,
        Boundary.AFTER_TOOL_RESULT,
        Boundary.BEFORE_LOOP_CONTINUATION,
    ]
    final = [
        Boundary.BEFORE_MODEL_CALL,
        Boundary.AFTER_MODEL_RESPONSE,
        Boundary.BEFORE_LOOP_CONTINUATION,
    ]
    return turn * turns + final


class Gate:
    """A point a run waits at until the test opens it: a tool (``tool()``), a model
    (``model()``) or any coroutine that awaits ``wait()``.

    ``entered`` is set when a run arrives; ``finished`` when the waiting code carried on after
    ``open()``; ``cancelled`` is True if the wait was cancelled instead.
    """

    def __init__(self, name: str = "hold") -> None:
        self.name = name
        self.entered = asyncio.Event()
        self.released = asyncio.Event()
        self.finished = asyncio.Event()
        self.cancelled = False
        self.calls = 0

    def open(self) -> None:
        self.released.set()

    async def wait(self) -> None:
        self.calls += 1
        self.entered.set()
        try:
            await self.released.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished.set()

    def tool(self, result: str = "held and released") -> FunctionTool:
        """A tool named after the gate that waits at it, then returns ``result``."""

        async def hold() -> str:
            await self.wait()
            return result

        return tool(name=self.name, description="Wait until the test lets go.")(hold)

    def model(self, answer: str = "done") -> FunctionModel:
        """A model whose every request waits at the gate, then answers ``answer``."""

        async def answer_after_gate(request: ModelRequest) -> str:
            await self.wait()
            return answer

        return FunctionModel(answer_after_gate, name=self.name)


class EventWaiter:
    """An event sink (``Runtime(sinks=[w])`` or ``rt.bus.add_sink(w)``) to wait on."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._waiting: list[tuple[Callable[[Event], bool], asyncio.Future[Event]]] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        for entry in list(self._waiting):
            pred, fut = entry
            if fut.done():
                continue
            try:
                matched = pred(event)
            except Exception as exc:
                # The wait fails with its predicate's error: raised here it would only reach
                # the bus (counted, the later waits skipped) and the test would hang.
                fut.set_exception(exc)
                self._waiting.remove(entry)
                continue
            if matched:
                fut.set_result(event)
                self._waiting.remove(entry)

    async def until(self, pred: Callable[[Event], bool]) -> Event:
        """The first event, already seen or still to come, for which ``pred`` holds; an error
        ``pred`` raises is raised here. A ``pred`` that is no callable is a
        ``ConfigurationError`` at once: kept, it failed only when an event came, and a test
        waiting with nothing more to come hung (``event(type_)`` waits for a type)."""
        if not callable(pred):
            raise ConfigurationError(
                f"EventWaiter.until takes a function (event) -> bool, got "
                f"{type(pred).__name__} {pred!r:.80}; for a type, await waiter.event(type_)"
            )
        for event in self.events:
            if pred(event):
                return event
        fut: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        entry = (pred, fut)
        self._waiting.append(entry)
        try:
            return await fut
        finally:  # answered, timed out or cancelled: a wait given up is not kept
            if entry in self._waiting:
                self._waiting.remove(entry)

    async def event(self, type_: str, run_id: str | None = None, **fields: Any) -> Event:
        """The first event of ``type_`` (on ``run_id``) whose attributes equal ``fields``."""

        def match(e: Event) -> bool:
            return (
                e.type == type_
                and run_id in (None, e.run_id)
                and all(getattr(e, k, None) == v for k, v in fields.items())
            )

        return await self.until(match)


def steering_messages(request: ModelRequest) -> list[Message]:
    """The rendered steering messages (with provenance) a model request carries."""
    return [m for m in request.messages if "steering" in m.metadata]


def first_request_with(requests: Sequence[ModelRequest], text: str) -> int | None:
    """Index of the first model request with a message containing ``text``, or None."""
    for index, request in enumerate(requests):
        if any(text in m.content for m in request.messages):
            return index
    return None
