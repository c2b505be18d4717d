"""The agent loop: model → tools → model …, taking steering only at safe boundaries.

    before_model_call → [model] → after_model_response
        → for each tool call: before_tool_dispatch → [tool] → after_tool_result
        → before_loop_continuation (final=True when the model gave its answer)

At each boundary the run asks its inbox for what is deliverable there and applies it
(``harness.apply``). Nothing is ever applied inside a provider call or a running tool; only an
IMMEDIATE cancel interrupts, and only an in-flight model request.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import logging
import re
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Container,
    Iterable,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, get_args

from pydantic import BaseModel, ValidationError

from tinyagents import _clock
from tinyagents._threads import settle
from tinyagents.errors import (
    ConfigurationError,
    ModelError,
    ModelResponseError,
    ModelRetry,
    ModelsWithheld,
    RunFailed,
    RunLimitExceeded,
    RuntimeClosed,
    StoreError,
    ThreadBusy,
    ToolError,
    ToolFailed,
    ToolsWithheld,
    UnknownTargetError,
    kind_of,
    message_of,
)
from tinyagents.events.models import (
    Event,
    LimitEvent,
    ModelDeltaEvent,
    ModelEvent,
    RunEvent,
    ToolEvent,
)
from tinyagents.events.redact import summarize
from tinyagents.harness import apply
from tinyagents.harness.capture import captured
from tinyagents.harness.context import AgentView, RunContext, RunFunction
from tinyagents.harness.limits import (
    check_limits,
    check_token_budget,
    child_limits,
    deadline_left,
    model_call_left,
    record_model_usage,
    release_tool_call,
    reserve_model_call,
    reserve_tool_call,
)
from tinyagents.harness.middleware import Middleware, SteeringHook, fold, overrides
from tinyagents.harness.model import (
    CUT_OFF,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    Role,
    StreamChunk,
    ToolCall,
    ToolSpec,
    Usage,
    answer_problem,
    parse_arguments,
)
from tinyagents.harness.narrowing import narrowings_below, send_narrowings, withdraw_narrowings
from tinyagents.harness.output import OutputTool, unwrapped
from tinyagents.harness.pausing import (
    HoldBelow,
    Pauses,
    holding_pause,
    join_holds_above,
    reconcile_below,
    restored_pause_detail,
    runs_above,
)
from tinyagents.harness.tools import (
    FunctionTool,
    InvalidArguments,
    Tool,
    ToolResult,
    check_prepared,
    check_prepared_tools,
    execute_tool_call,
    retry_errors,
    validation_problems,
)
from tinyagents.harness.toolsets import Toolset, specs_of_toolsets
from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import (
    MESSAGE_KINDS,
    GraphNodeTarget,
    GraphTaskTarget,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.state import RunStatus
from tinyagents.runs.handle import RunDriver, RunHandle, RunResult
from tinyagents.runs.host import RunHost, require_open
from tinyagents.runs.info import RunInfo, check_id, run_event, subagent_event, withheld_below
from tinyagents.runs.limits import RunLimits
from tinyagents.runs.registry import check_parent_open, parent_run_id
from tinyagents.steering.inbox import LATE

if TYPE_CHECKING:
    from tinyagents.events.bus import Subscription

_log = logging.getLogger(__name__)


#: ``metadata["retry"]`` of the message that asks a model which answered nothing for an answer.
EMPTY_ANSWER = "empty_answer"
#: What it is asked, in pydantic-ai's words: "Please " and the ways it may answer joined by
#: " or " ("return text", then "include your response in a tool call" where there are output
#: tools, else "call a tool" where the run has a tool it may call), as a retry prompt of no
#: tool call (``VALIDATION_FEEDBACK`` ... "Fix the errors and try again.").
PLEASE = "Please {}."
#: ``metadata["retry"]`` of the message that tells the model its answer is not valid output.
INVALID_OUTPUT = "invalid_output"
#: The asks that spend ``Agent.output_retries``, counted together as pydantic-ai counts its
#: ``output_retries_used``.
OUTPUT_ASKS = frozenset({EMPTY_ANSWER, INVALID_OUTPUT})
#: What ``_output_of`` returns for a final answer it sent back to the model (None may be an
#: output validator's output).
ASKED: Any = object()
#: What a text answer to an agent whose output is given through its output tools alone
#: (``output_type=fn``, ``ToolOutput(...)``) is answered, in pydantic-ai's words.
TEXT_NOT_OUTPUT = "Please include your response in a tool call."
#: What a retry prompt of no tool call starts with, when it is a message (a validator's
#: ``ModelRetry``, ``TEXT_NOT_OUTPUT``), as pydantic-ai's ``RetryPromptPart.model_response()``
#: writes one without a ``tool_name``; it ends "Fix the errors and try again.".
VALIDATION_FEEDBACK = "Validation feedback:\n"
#: The names of pydantic-ai's output tools (``final_result``, ``final_result_<Name>``).
_FINAL_RESULT = re.compile(r"final_result(_\w+)?\Z")
#: What ``_run_calls`` returns for a batch of tool calls that gave no output (no call of an
#: output tool, ``Agent(output_type=A | str)``, validated).
NOT_FINAL: Any = object()
#: The results of output tool calls, in pydantic-ai's words (its ``_tool_status``).
FINAL_RESULT_PROCESSED = "Final result processed."
OUTPUT_NOT_USED = "Output tool not used - a final result was already processed."
OUTPUT_NOT_FINAL_RESULT = (
    "Output tool processed, but its value will not be the final result of the agent run."
)
OUTPUT_EXECUTION_FAILED = "Output tool not used - output function execution failed."
OUTPUT_VALIDATION_FAILED = "Output tool not used - output failed validation."
TOOL_NOT_EXECUTED = "Tool not executed - a final result was already processed."
RETRY_WINS = "Output not used as the final result - addressing tool retries from this round first."
#: Why a message that reached a final answer fails when the budget has no turn left for it: a
#: turn its budget refuses before any request turned the answer into ``limit_exceeded``.
NO_TURN_LEFT = (
    "the run completed with its answer: no model call left in its budget (or an ancestor's) "
    "to send the message"
)


class AgentRecipe(AgentView, Protocol):
    """What the loop reads of the agent it runs: its view plus its middleware. ``Agent`` is
    one; the loop is typed against this so that ``Agent`` (which starts loops) can sit above it."""

    @property
    def middleware(self) -> Sequence[Middleware]: ...
    @property
    def output_retries(self) -> int: ...
    @property
    def retries(self) -> int | None: ...
    @property
    def output_validators(self) -> Sequence[RunFunction]: ...
    @property
    def system_prompts(self) -> Sequence[tuple[RunFunction, str | None]]: ...
    @property
    def instruction_text(self) -> str: ...
    @property
    def instruction_functions(self) -> Sequence[RunFunction]: ...
    @property
    def prepare_tools(self) -> Callable[..., Any] | None: ...
    @property
    def history_processors(self) -> Sequence[RunFunction]: ...
    @property
    def toolsets(self) -> Sequence[Toolset]: ...
    @property
    def output_native(self) -> bool: ...
    @property
    def output_prompt(self) -> str | None: ...
    @property
    def model_settings(self) -> Mapping[str, Any]: ...
    @property
    def end_strategy(self) -> Literal["early", "graceful", "exhaustive"]: ...
    @property
    def run_metadata(self) -> tuple[Any, ...]: ...
    def for_run(
        self,
        *,
        output_type: Any = None,
        model: Model | str | None = None,
        instructions: Any = None,
        toolsets: Sequence[Any] | None = None,
        model_settings: Mapping[str, Any] | None = None,
        retries: int | Mapping[str, int] | None = None,
        metadata: Any = None,
    ) -> AgentRecipe: ...
    def deps_for_run(self, deps: Any) -> Any: ...


class AgentRun(RunDriver):
    """One run of an ``Agent``: its conversation, its boundaries and its steering."""

    def __init__(
        self,
        runtime: RunHost,
        agent: AgentRecipe,
        handle: RunHandle,
        messages: list[Message],
        deps: Any = None,
    ) -> None:
        self.runtime = runtime
        self.agent = agent
        #: What the run's tools, prompts and validators reach as ``ctx.deps`` (``deps=``).
        self.deps = deps
        #: pydantic-ai's run metadata (``Agent(metadata=...)``): resolved as the run starts
        #: and again when it completes; ``ctx.metadata``, ``RunResult.metadata``.
        self.metadata: dict[str, Any] | None = None
        self.handle = handle
        self.info = handle.info
        self.messages = messages
        self.ctx = RunContext(runtime=runtime, handle=handle, agent=agent, run=self)
        #: How many calls of each of the agent's tools failed in a row (``RunContext.retry``);
        #: a tool's count goes when a response's calls of it succeeded, none failing (as
        #: pydantic-ai's: a failure beside a success wins). At most one per tool of the agent.
        self._failed_in_a_row: dict[str, int] = {}
        #: The tools of the agent's whose calls in the response being run succeeded, and
        #: those whose calls failed: a count goes after the response, for the first only.
        self._succeeded_in_batch: set[str] = set()
        self._failed_in_batch: set[str] = set()
        self.paused = False
        #: Whose pauses hold the run: a pause of its own (not one a run above passed down:
        #: it then holds the agent runs below it, ``_below``), the runs above whose hold
        #: pauses it, and the pauses and resumes passed down not applied yet (``Pauses``).
        self.pauses = Pauses()
        #: This run's hold on the runs below it, made by its first own pause.
        self._below: HoldBelow | None = None
        #: The commands an earlier incarnation of this run applied, as the steering log gave
        #: them back (a run started again under its id after a crash); empty for a new run.
        self.earlier: list[SteeringCommand] = []
        self.last_text = ""
        self.limit_error: RunLimitExceeded | None = None
        self.failure: BaseException | None = None
        #: Who sent the cancel (or abort) that ended the run, when one did.
        self.stopped_by: SteeringActor | None = None
        #: Message commands delivered but not yet sent to the model: (command, message).
        self.staged: list[tuple[SteeringCommand, Message]] = []
        #: An ancestor is cancelling this run: it does no more work, and waits at its next
        #: boundary for the cancel command on its way (cleared if that command is refused).
        self.frozen = False
        #: ``main`` has begun: a task cancelled before its first step runs none of it
        #: (``launch``).
        self._began = False
        #: This run's cancel has been passed down to its subtree (its reason, and whether it
        #: was IMMEDIATE): a child it starts from now on is cancelled the same way at once.
        self.passed_down: tuple[str | None, bool] | None = None
        #: The narrowings queued for this run (correlation id) and the runs below it they were
        #: passed down to; one goes when the run applies it, the rest with the run.
        self._narrowing: dict[str, set[str]] | None = None
        #: The narrowings passed down for a narrowing queued for this run and not applied
        #: yet (its correlation id → (run below, command)): withdrawn if it never is
        #: (``withdraw_narrowings``). ``_withdrawn``: those withdrawn (id → reason).
        self._passed: dict[str, list[tuple[str, SteeringCommand]]] | None = None
        self._withdrawn: dict[str, str] | None = None
        #: Narrowings an ancestor passed down to this run and every live run below it: this
        #: run does not pass them on (each goes when the run applies it).
        self._covered: set[str] | None = None
        #: An IMMEDIATE cancel was sent to this run (by an ancestor) or reached it: a later
        #: one from above is not sent again (``_freeze_subtree(interrupt=True)``).
        self.interrupted = False
        self._poke: asyncio.Event | None = None  # set when a command is queued (``wake``)
        self._model_task: asyncio.Task[None] | None = None
        self._interrupted: asyncio.Task[None] | None = None  # cancelled by us
        self._model_answer: asyncio.Future[ModelResponse] | None = None  # what the run awaits
        #: Set while a model call is under way when a cancel for its next boundary is queued:
        #: the call makes no further attempt (``ModelRequest.stop_retrying``). One per run.
        self._stop_retrying: asyncio.Event | None = None
        #: The tool call under way (its result boundary will come), or None.
        self._in_tool: ToolCall | None = None
        #: Checks, while a cancel waits for the tool call under way (or the call timed out),
        #: that its cancellation ends (``_watch_tool``), and the call it watches; None while
        #: nothing is watched.
        self._tool_watch: asyncio.TimerHandle | None = None
        self._watched: ToolCall | None = None
        #: The last tool call that ran out of its time (``tool_timeout_s``), and that time.
        self._timed_out: tuple[ToolCall, float] | None = None
        #: How the run ended when it was ended without its task (``end_without_task``): its
        #: task, if it ever ends, changes nothing then.
        self._given_up: RunResult | None = None
        #: The tool call whose frames a thrown GeneratorExit closed (``main`` answers it).
        self._closed_call: ToolCall | None = None
        #: How many messages the run was given (history and input): an ask of ours among
        #: them was another run's, and does not count against this run's asks.
        self._given = len(messages)
        #: Where this run's own messages start in ``messages`` (``RunResult.new_from``): after
        #: the history it was given (0 with none: its system prompt is its own too).
        self.new_from = 0
        #: The conversation brought no system prompt of its own: ``messages[0]`` is the run's
        #: (the agent's instructions), written with its system prompt functions as it starts.
        self.own_prompt = False
        #: a session's turn: it holds its thread (``RunRegistry.take_thread``), again when
        #: an END_OF_TURN message reopens it
        self.holds_thread = False
        #: The agent's instruction functions as the run started (one the agent is given
        #: later is for its later runs), called before each model request.
        self._instruction_fns = tuple(agent.instruction_functions)
        #: The agent's history processors as the run started, called before each request.
        self._processors = tuple(agent.history_processors)
        #: The ``prepare`` functions of the agent's tools, by tool name (pydantic-ai's),
        #: called before each model request offering their tool.
        self._prepares = {
            n: RunFunction(p, values=1, what=f"tool {n!r} prepare", agent=agent.name)
            for n, t in agent.tools.items()
            if (p := getattr(t, "prepare", None)) is not None
        }
        #: The agent's ``prepare_tools``, called before each model request with what it
        #: would offer; and whether a request may offer less than the run's tools.
        self._prepare_all = (
            None
            if agent.prepare_tools is None
            else RunFunction(agent.prepare_tools, values=1, what="prepare_tools", agent=agent.name)
        )
        #: The agent's toolsets that decide per request what they offer (``prepared``, a
        #: filter of ``(ctx, spec)``), and the names of their tools.
        self._set_hooks = [ts for ts in agent.toolsets if ts.per_request]
        self._set_names = frozenset(n for ts in self._set_hooks for n in ts.get_tools())
        self._prepared = (
            bool(self._prepares) or self._prepare_all is not None or bool(self._set_hooks)
        )
        #: The ids of the tool calls in the conversation (as long-lived as ``messages``).
        self._call_ids = {c.id for m in messages for c in m.tool_calls}
        #: The ids the tool calls of the response being streamed were published with, by index.
        self._streamed_ids: dict[int, str] = {}
        #: The tools offered in the last model request (its calls were made from these).
        self._offered: Sequence[ToolSpec] = ()
        #: The agent's output tools (``A | str``, output functions, ``ToolOutput``), offered on
        #: each request after its tools; and what the batch's first valid call of one gave.
        self._output_specs = [output.spec() for output in agent.output_tools.values()]
        self._final: Any = NOT_FINAL
        #: Under ``end_strategy="exhaustive"``: the answers of the batch's output calls, read
        #: before its tool calls run, by call id; each taken when its turn comes.
        self._read_outputs: dict[str, tuple[ToolResult, str | None]] = {}
        #: ... and the first of them past its retries, when none was valid: it ends the run.
        self._outputs_failed: ModelResponseError | None = None
        #: The batch's winning output call's id, and whether a tool call of the batch was
        #: sent back (it holds the output back: ``_hold_output_back``).
        self._winner: str | None = None
        self._tool_sent_back = False
        self._model_hooks = [m.model for m in agent.middleware if overrides(m, "model")]
        self._tool_hooks = [m.tool for m in agent.middleware if overrides(m, "tool")]

    # ------------------------------------------------------------------ the loop

    def launch(self, *, another_turn: bool = False) -> None:
        """Start the run's task (``main``). A task cancelled before its first step runs none
        of ``main``: asyncio throws the cancel in before its first line, past the handler
        that ends the run. A runtime closed right after a start (no await between), or a
        starter cancelling the task at once, left the run 'running' with no terminal event,
        and its ``result()`` awaited for ever: ``_unstarted`` ends it then."""
        self._began = False
        task = self.handle.task = asyncio.ensure_future(self.main(another_turn=another_turn))
        task.add_done_callback(self._unstarted)

    def _unstarted(self, task: asyncio.Future[RunResult]) -> None:
        """The run's task ended without running ``main``: end the run ``cancelled``, saying
        why as ``main`` would have (the cancel's message, else the runtime closed)."""
        if self._began or not task.cancelled() or self.handle.done:
            return
        why = None
        try:
            task.result()
        except asyncio.CancelledError as exc:
            why = exc.args[0] if exc.args and isinstance(exc.args[0], str) else None
        result = self._result(RunStatus.CANCELLED, self.last_text, why or "runtime closed")
        self.runtime.spawn(self._end(result), name=f"end-unstarted-{self.info.run_id}")

    async def main(self, *, another_turn: bool = False) -> RunResult:
        self._began = True
        after: tuple[Sequence[ToolCall], int] | None = None
        try:
            if not another_turn:
                self.metadata = await self._resolve_metadata()
            if not another_turn and (self.agent.system_prompts or self._instruction_fns):
                await self._write_system_prompt()
            while True:
                try:
                    output = await self._loop(another_turn=another_turn, after=after)
                    break
                except GeneratorExit as exc:
                    # Thrown into this task by a future a tool awaited (a thread's, through
                    # run_in_executor): asyncio closed every frame below this one at once,
                    # past the handler that makes a tool's error its result. Told to the
                    # model here, and the loop goes on after that call.
                    after, another_turn = self._answer_closed_call(exc), False
            self.metadata = await self._resolve_metadata()  # as the run completes
            result = self._result(RunStatus.COMPLETED, output)
        except apply.Stop as stop:
            reason, self.stopped_by = stop.reason, stop.by
            try:
                await self._cancel_children(stop.reason, immediate=stop.immediate)
            except asyncio.CancelledError:
                # The runtime closes while the run waits for its children to end (one still
                # finishing a tool call): it ends as it was told to all the same, with its
                # terminal event, rather than left 'running' with nobody's result to await.
                await self._end(self._result(stop.status, self.last_text, reason))
                raise
            except Exception as exc:  # the run still ends as it was told to, and says so
                _log.error("run %s: cancelling its sub-runs failed", self.info.run_id, exc_info=exc)
                reason = f"{reason or stop.status.value} (cancelling its sub-runs failed: {message_of(exc)})"
            result = self._result(stop.status, self.last_text, reason)
        except RunLimitExceeded as exc:
            self._exceeded(exc)
            result = self._result(RunStatus.LIMIT_EXCEEDED, self.last_text, str(exc))
            self.limit_error = exc
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                # Whoever cancelled the task may say why (task.cancel(msg)); else the runtime
                # is closing.
                why = exc.args[0] if exc.args and isinstance(exc.args[0], str) else None
                reason = why or "runtime closed"
                await self._end(self._result(RunStatus.CANCELLED, self.last_text, reason))
                raise
            # Raised by code the run called (a model, a middleware), not a cancellation of it.
            self.failure = exc
            result = self._result(
                RunStatus.FAILED,
                self.last_text,
                f"CancelledError raised inside the run (it was not cancelled): {message_of(exc)}",
            )
        except KeyboardInterrupt:
            raise  # the process is being interrupted: not this run's to answer
        except BaseException as exc:
            # SystemExit too (a model or middleware calling sys.exit): let out of the run's
            # task, it would end the event loop under every run of the runtime; and
            # GeneratorExit, or a BaseException of a library's own (gevent's GreenletExit),
            # which ended the task alone, the run left 'running' for ever
            self.failure = exc
            result = self._result(
                RunStatus.FAILED, self.last_text, f"{type(exc).__name__}: {message_of(exc)}"
            )
        if result.status in (RunStatus.LIMIT_EXCEEDED, RunStatus.FAILED):
            # nobody will wait for what it started: its sub-runs must not work on for nothing
            # (marked as an IMMEDIATE cancel marks them: a child one of them starts before
            # its own cancel reaches it is sent the same immediate cancel)
            self.abandon(self._freeze_subtree(interrupt=True), f"ended {result.status.value}")
        return await self._end(result)

    async def _resolve_metadata(self) -> dict[str, Any] | None:
        """The run's metadata (pydantic-ai's): its sources (``run_metadata``) resolved, a
        function called with the run's context, and merged in order, a later one's keys
        winning; None when none gives any."""
        merged: dict[str, Any] | None = None
        for source in self.agent.run_metadata:
            value = await source(self.ctx) if isinstance(source, RunFunction) else source
            if value is not None and not (
                isinstance(value, dict) and all(isinstance(k, str) for k in value)
            ):
                raise ConfigurationError(
                    f"agent {self.agent.name!r}: metadata function {source.name!r} must "
                    f"return a dict of text keys (or None), got {type(value).__name__}"
                )
            merged = {**merged, **value} if merged and value else (value or merged)
        return merged

    async def _loop(
        self, *, another_turn: bool = False, after: tuple[Sequence[ToolCall], int] | None = None
    ) -> Any:
        # Reopened by END_OF_TURN steering: take it where the run finished, before any call.
        if another_turn and not await self.at(Boundary.BEFORE_LOOP_CONTINUATION, final=True):
            # Nothing for the model came of it: the run ends on its last answer again, which
            # is its output as any final answer's is (typed and validated; a validator that
            # refuses it now sends it back, and this turn has a model call left for that).
            output = await self._output_of(ModelResponse(text=self.last_text))
            if output is ASKED:
                await self.at(Boundary.BEFORE_LOOP_CONTINUATION)
            elif await self._ends_on_validated(output):
                return output
        if after is not None:  # the rest of a batch whose call ``index`` main answered
            calls, index = after
            await self.at(Boundary.AFTER_TOOL_RESULT, tool_call_id=calls[index].id)
            output = await self._run_calls(calls, index + 1)
            if output is not NOT_FINAL and await self._ends_on(output):
                return output
        while True:
            await self.at(Boundary.BEFORE_MODEL_CALL)
            response, request_id = await self._call_model()
            await self.at(Boundary.AFTER_MODEL_RESPONSE, model_request_id=request_id)
            if not response.tool_calls and not response.text and not self._none_answer(response):
                self._ask_for_an_answer(response)  # not an answer: ask once more for one
                await self.at(Boundary.BEFORE_LOOP_CONTINUATION)
                continue
            if not response.tool_calls:
                # Steering delivered after the answer (here or just after the response) has
                # not reached the model yet: the agent gets another turn for it, if its
                # budget has a model call left for one.
                more = await self.at(Boundary.BEFORE_LOOP_CONTINUATION, final=True)
                if (more or self.staged) and model_call_left(self.info, self.runtime.runs.tree):
                    continue
                output = await self._output_of(response)
                if output is ASKED:  # not valid output: asked once more for it
                    await self.at(Boundary.BEFORE_LOOP_CONTINUATION)
                    continue
                if await self._ends_on_validated(output):
                    return output
                continue
            output = await self._early_text(response)
            if output is NOT_FINAL:
                output = await self._run_calls(response.tool_calls)
            if output is not NOT_FINAL and await self._ends_on(output):
                return output

    async def _ends_on_validated(self, output: Any) -> bool:
        """Whether the run ends on ``output``, a final text answer validated after its final
        boundary: steering sent while it was validated (an output validator or function is
        the run's own code, and may take its time) is delivered at the answer too, at that
        boundary taken again, as on an output tool's answer (validated before its final
        boundary): the run was still going when it came. Nothing sent meanwhile: no second
        visit of the boundary."""
        if self.handle.inbox.has_ready(Boundary.BEFORE_LOOP_CONTINUATION, final=True):
            return await self._ends_on(output)
        self._fail_staged(NO_TURN_LEFT)
        return True

    async def _ends_on(self, output: Any) -> bool:
        """Whether the run ends on ``output``, an output tool call's (``A | str``): as on a
        final text answer, not while steering delivered after it has not reached the model
        and its budget has a model call left for another turn."""
        more = await self.at(Boundary.BEFORE_LOOP_CONTINUATION, final=True)
        if (more or self.staged) and model_call_left(self.info, self.runtime.runs.tree):
            self._final = NOT_FINAL  # the model answers the steering first
            return False
        self._fail_staged(NO_TURN_LEFT)
        return True

    async def _run_calls(self, calls: Sequence[ToolCall], start: int = 0) -> Any:
        """Run the tool calls of a response, from ``calls[start]``, each between its
        boundaries, in order. The calls of output tools (``Agent(output_type=A | str)``,
        ``ToolOutput``...) are read as the agent's ``end_strategy`` reads them (pydantic-ai's):
        ``"graceful"`` reads each in its turn, the first valid one winning, and the tool
        calls around it still run; ``"early"`` reads them all first and, once one is valid,
        answers the tool calls "Tool not executed" without running them; ``"exhaustive"``
        reads them all first (a later valid one is answered "processed, but ... not the final
        result") and runs every tool call. The batch's output is returned (else
        ``NOT_FINAL``)."""
        outputs = self.agent.output_tools
        strategy = self.agent.end_strategy if outputs else "graceful"
        if start == 0:
            self._final = NOT_FINAL
            self._tool_sent_back = False
            self._succeeded_in_batch.clear()
            self._failed_in_batch.clear()
            if strategy == "early" and await self._early_outputs(calls, outputs):
                return self._final
            if strategy == "exhaustive":
                self._read_outputs = await self._exhaustive_outputs(calls, outputs)
        for index in range(start, len(calls)):
            call = calls[index]
            if call.name in outputs:
                if strategy == "graceful":
                    self._emit_call(call)
                    self._record_result(call, *await self._output_result(call, outputs[call.name]))
                elif strategy == "exhaustive":  # read already: answered in its turn
                    self._emit_call(call)
                    self._record_result(call, *self._read_outputs.pop(call.id))
                continue  # "early": answered before the tool calls ran
            # the tool budget holds the tool calls, not the output tools' (counted only when
            # the agent has output tools: most batches are tool calls alone)
            left = len(calls) - index
            if outputs:
                left = sum(1 for c in calls[index:] if c.name not in outputs)
            await self.at(Boundary.BEFORE_TOOL_DISPATCH, tool_call_id=call.id)
            result = await self._run_tool(call, calls_left=left)
            # sent back: a tool of the run's that failed (not one it never had, nor one
            # steering took away after the model called it: the model did nothing wrong)
            if result.error and call.name in self.allowed_tools():
                self._tool_sent_back = True
            await self.at(Boundary.AFTER_TOOL_RESULT, tool_call_id=call.id)
        for name in self._succeeded_in_batch - self._failed_in_batch:
            self._failed_in_a_row.pop(name, None)
        if self._outputs_failed is not None:  # "exhaustive": no output call was valid
            failed, self._outputs_failed = self._outputs_failed, None
            raise failed
        if self._tool_sent_back and self._final is not NOT_FINAL:
            self._hold_output_back()
        if self._final is not NOT_FINAL:
            return self._final  # the run's end (_ends_on) is the boundary after the batch
        await self.at(Boundary.BEFORE_LOOP_CONTINUATION)
        return NOT_FINAL

    def _hold_output_back(self) -> None:
        """pydantic-ai's "retry wins" (``"graceful"``, ``"exhaustive"``): a tool call of the
        batch was sent back, so its output is not the run's: the winning output call's
        answer says so, and the model answers the failed calls first."""
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if message.role == "tool" and message.tool_call_id == self._winner:
                self.messages[index] = dataclasses.replace(message, content=RETRY_WINS)
                break
        self._final = NOT_FINAL

    async def _early_text(self, response: ModelResponse) -> Any:
        """Under ``end_strategy="early"``: the text beside the response's tool calls, when it
        is valid structured output (``NativeOutput``, ``PromptedOutput``, a model
        ``output_type``) and no call is of an output tool, is the output, as pydantic-ai
        reads it: the tool calls are answered "Tool not executed" and never run. Text that
        does not validate, or that a validator sends back, is not sent back (the tool calls
        run, no output retry spent); plain text is a preamble, never the output. Else
        ``NOT_FINAL``."""
        agent = self.agent
        output_type = agent.output_type
        if (
            agent.end_strategy != "early"
            or output_type is None
            or not response.text
            or any(call.name in agent.output_tools for call in response.tool_calls)
        ):
            return NOT_FINAL
        sent_back = _asks_since_the_prompt(self.messages, since=self._given)
        try:
            output = await self._validated(read_output(output_type, response.text), sent_back)
        except (ValidationError, ModelRetry):
            return NOT_FINAL
        self._skip_tool_calls(response.tool_calls, agent.output_tools)
        return output

    def _skip_tool_calls(
        self, calls: Sequence[ToolCall], outputs: Mapping[str, OutputTool]
    ) -> None:
        """Answer each tool call of ``calls`` (not an output tool's) "Tool not executed",
        without running it: the response already gave the run's output."""
        for call in calls:
            if call.name not in outputs:
                self._emit_call(call)
                skipped = ToolResult(call_id=call.id, name=call.name, content=TOOL_NOT_EXECUTED)
                self._record_result(call, skipped)

    async def _early_outputs(
        self, calls: Sequence[ToolCall], outputs: Mapping[str, OutputTool]
    ) -> bool:
        """Read and answer the output calls of ``calls`` first (``end_strategy="early"``);
        once one is valid, answer each tool call "Tool not executed" (it never runs, nor
        reaches a boundary) and say so: the batch's output is ``self._final``."""
        for call in calls:
            if call.name in outputs:
                self._emit_call(call)
                self._record_result(call, *await self._output_result(call, outputs[call.name]))
        if self._final is NOT_FINAL:
            return False  # every output call failed: the tool calls run
        self._skip_tool_calls(calls, outputs)
        return True

    async def _exhaustive_outputs(
        self, calls: Sequence[ToolCall], outputs: Mapping[str, OutputTool]
    ) -> dict[str, tuple[ToolResult, str | None]]:
        """Read every output call of ``calls`` (``end_strategy="exhaustive"``), in order: the
        first valid one is the batch's output. A call past its retries does not fail the run
        when another one is valid, before or after it (answered unused, in pydantic-ai's
        words); when none is, the first such failure ends the run once the batch's tool
        calls ran (``_outputs_failed``), as pydantic-ai's ran beside it. Each call's answer,
        by id, for ``_run_calls`` to send in the call's turn."""
        read: dict[str, tuple[ToolResult, str | None]] = {}
        failed: list[ModelResponseError] = []
        for call in calls:
            if call.name not in outputs:
                continue
            read[call.id] = await self._output_result(call, outputs[call.name], failed=failed)
        if failed and self._final is NOT_FINAL:  # raised once the tool calls ran
            self._outputs_failed = failed[0]
        return read

    def _emit_call(self, call: ToolCall) -> None:
        self.emit(
            ToolEvent,
            type="tool.call",
            tool_call_id=call.id,
            name=call.name,
            args_summary=summarize(call.args),
        )

    async def _output_result(
        self, call: ToolCall, output: OutputTool, failed: list[ModelResponseError] | None = None
    ) -> tuple[ToolResult, str | None]:
        """Read a call of the output tool ``output``: its arguments, validated (and passed to
        its output function, whose return it is) and passed through the output validators,
        are the batch's output (``self._final``); once the batch has one, a further call is
        answered unused, as pydantic-ai answers it (``end_strategy="exhaustive"``: read all
        the same, and answered "processed" when valid). Arguments that do not validate, or
        that the function or a validator sends back (``ModelRetry``), are answered with what
        is wrong, and count against the tool's cap (``ToolOutput(max_retries=...)``, else
        ``Agent.output_retries``), counting its own calls sent back, as pydantic-ai counts per
        tool: past it, ``ModelResponseError`` (given ``failed``, it is added there and the
        call answered unused, in pydantic-ai's words). Its output function's context has that count
        and cap; the output validators', as on a text answer, the run's answers sent back
        (every output tool's and text's) and ``output_retries``, as pydantic-ai's. The call's
        answer and its ``metadata["retry"]``."""
        extra = self._final is not NOT_FINAL
        if extra and self.agent.end_strategy != "exhaustive":
            return ToolResult(call_id=call.id, name=call.name, content=OUTPUT_NOT_USED), None
        agent = self.agent
        own = output.max_retries is not None
        limit = output.max_retries if output.max_retries is not None else agent.output_retries
        # its own calls sent back (pydantic-ai's ``retries[name]``), against its own cap
        sent_back = _asks_since_the_prompt(self.messages, since=self._given, tool=call.name)
        refused: str | None = None  # the function's or a validator's message
        errors: str | None = None  # the arguments' validation errors, in pydantic-ai's words
        args_valid = False
        if call.parse_error is not None:
            problems = call.parse_error
        else:
            try:
                if output.function is not None:
                    ctx = self._output_context(sent_back, limit, call=call)
                    value = await output.function.call(call.args, ctx=ctx)
                else:
                    assert output.model is not None
                    # ToolOutput(int): its response; a dataclass's value
                    value = unwrapped(output.model.model_validate(call.args))
            except ValidationError as exc:
                problems = validation_problems(exc)
                errors = retry_errors(exc, tool=True)
            except InvalidArguments as exc:
                problems = _argument_problems(exc)
                if isinstance(exc.__cause__, ValidationError):
                    errors = retry_errors(exc.__cause__, tool=True)
            except ModelRetry as exc:
                args_valid = True
                refused = problems = message_of(exc)
            else:
                args_valid = True
                try:  # the validators see the run's count and cap, as on a text answer
                    value = await self._validated(value, None, call=call)
                except ModelRetry as exc:
                    refused = problems = message_of(exc)
                else:
                    if extra:  # "exhaustive": valid, after the winner
                        content = OUTPUT_NOT_FINAL_RESULT
                    else:
                        self._final, self._winner = value, call.id
                        # the run's text, as a structured answer's is the JSON it was read from
                        self.last_text = json.dumps(call.args, default=str)
                        content = FINAL_RESULT_PROCESSED
                    return ToolResult(call_id=call.id, name=call.name, content=content), None
        if sent_back >= limit:
            name = agent.model.name
            cap = f"max_retries={limit}" if own else f"output_retries={limit}"
            who = "an output validator"
            if output.function is not None:
                who = "its output function or an output validator"
            what = (
                f"was sent back by {who}, {sent_back} time(s) before ({cap}): {refused}"
                if refused is not None
                else f"is not valid {output.what} output, again after it was told what was "
                f"wrong: {problems}"
            )
            past = ModelResponseError(f"model {name!r}: its {call.name} call {what}")
            if failed is None:
                raise past
            failed.append(past)
            unused = OUTPUT_EXECUTION_FAILED if args_valid else OUTPUT_VALIDATION_FAILED
            return ToolResult(call_id=call.id, name=call.name, content=unused), None
        # as pydantic-ai's RetryPromptPart with a tool name reaches the model: its message, or
        # its validation errors (each input kept), then "Fix the errors and try again."
        ask = f"{refused or errors or problems}\n\nFix the errors and try again."
        result = ToolResult(call_id=call.id, name=call.name, content=ask, error=True)
        return result, INVALID_OUTPUT

    def _answer_closed_call(self, exc: GeneratorExit) -> tuple[Sequence[ToolCall], int]:
        """Answer the tool call whose frames a thrown ``GeneratorExit`` closed with the error
        result the tool's own would have been; its batch and index, to go on after it.
        Raises ``exc`` when no tool call was closed (a model's or middleware's: the run
        fails)."""
        call, self._closed_call = self._closed_call, None
        if call is None:
            raise exc
        detail = f": {text}" if (text := message_of(exc)) else ""
        result = ToolResult(
            call_id=call.id,
            name=call.name,
            content=f"tool {call.name!r} raised GeneratorExit{detail}",
            error=True,
        )
        self._record_result(call, result)
        self._count_failure(call.name, True)
        last = next(m for m in reversed(self.messages) if m.role == "assistant")
        calls = last.tool_calls
        return calls, next(i for i, c in enumerate(calls) if c.id == call.id)

    async def _write_system_prompt(self) -> None:
        """Call the agent's system prompt functions, as the run starts. The run's own
        system prompt (``own_prompt``: its conversation brought none) is the instructions
        and each function's text, joined, with each part in ``metadata["system_prompt_parts"]``
        (``[ref, text]``, ref the function's ``__qualname__`` if it is dynamic, else None). A
        conversation that brought its own has it kept, as pydantic-ai keeps a history's;
        only a dynamic function's part in it (a transcript of this agent's) is written
        again."""
        messages = self.messages
        prompts = self.agent.system_prompts
        if self.own_prompt:
            instructions = messages[0].content
            parts: list[list[str | None]] = [[None, instructions]] if instructions else []
            if self._instruction_fns:  # its place, written before each request
                parts = [[INSTRUCTIONS, instructions]]
            for hook, ref in prompts:
                text = await self._prompt_text(hook)
                if text or ref is not None:  # a dynamic one keeps its place, to be rewritten
                    parts.append([ref, text])
            content = _joined(parts)
            if content or self._instruction_fns:
                messages[0] = Message(
                    role="system", content=content, metadata={"system_prompt_parts": parts}
                )
                return
            messages.pop(0)  # every function gave nothing: no empty system message
            self._given -= 1
            self.new_from = max(0, self.new_from - 1)
            if not messages:
                raise ConfigurationError(
                    f"agent {self.agent.name!r} has nothing to send: its system prompt "
                    "functions gave no text, and it has no instructions, history or input"
                )
            return
        first = messages[0] if messages else None
        written = first.metadata.get("system_prompt_parts") if first is not None else None
        dynamic = {ref: hook for hook, ref in prompts if ref is not None}
        if first is None or first.role != "system" or not isinstance(written, list):
            return
        parts = [list(part) for part in written if isinstance(part, list) and len(part) == 2]
        if not any(ref in dynamic for ref, _ in parts):
            return
        for part in parts:
            again = dynamic.get(part[0]) if isinstance(part[0], str) else None
            if again is not None:
                part[1] = await self._prompt_text(again)
        metadata = {**first.metadata, "system_prompt_parts": parts}
        messages[0] = dataclasses.replace(first, content=_joined(parts), metadata=metadata)

    async def _prompt_text(self, hook: RunFunction, what: str = "system_prompt") -> str:
        text = await hook(self.ctx)
        if text is None:
            return ""
        if not isinstance(text, str):
            raise ConfigurationError(
                f"agent {self.agent.name!r}: {what} {hook.name!r} must return text (or "
                f"None), got {type(text).__name__}"
            )
        return text

    async def _write_instructions(self) -> bool:
        """Write the instructions again for the next request (the
        agent's text and its instruction functions' texts, each called now, as pydantic-ai
        calls them before each request) into their part of the leading system message: the
        run's own, or a history's with such a part (a transcript of a run with instruction
        functions). The transcript keeps what the last request was sent; a system message
        left with no text is not sent (True: leave it out). Steering messages are later
        messages: untouched."""
        messages = self.messages
        first = messages[0] if messages else None
        parts = first.metadata.get("system_prompt_parts") if first is not None else None
        if (
            first is None
            or first.role != "system"
            or not isinstance(parts, list)
            or not any(isinstance(p, list) and p[:1] == [INSTRUCTIONS] for p in parts)
        ):
            return False
        texts = [self.agent.instruction_text]
        for hook in self._instruction_fns:
            texts.append(await self._prompt_text(hook, "instructions"))
        text = "\n\n".join(filter(None, texts))
        written = [
            [ref, text if ref == INSTRUCTIONS else t]
            for ref, t in (p for p in parts if isinstance(p, list) and len(p) == 2)
        ]
        content = _joined(written)
        metadata = {**first.metadata, "system_prompt_parts": written}
        messages[0] = dataclasses.replace(first, content=content, metadata=metadata)
        if not content and len(messages) == 1 and not self.staged:
            raise ConfigurationError(
                f"agent {self.agent.name!r} has nothing to send: its instructions gave no "
                "text, and it has no system prompt, history or input"
            )
        return not content

    def _fail_staged(self, reason: str) -> None:
        """Fail the messages staged for a model request that will not be made."""
        for cmd, _ in self.staged:
            self.handle.inbox.failed(cmd, reason)
        self.staged.clear()

    def _none_answer(self, response: ModelResponse) -> bool:
        """Whether ``response``, of no text and no tool call, is the output ``None``: the
        output type allows it (``str | None``), and the model was not stopped (by its token
        limit or a content filter), as pydantic-ai reads it."""
        return self.agent.allows_none and (response.finish_reason or "") not in CUT_OFF

    def _ask_for_an_answer(self, response: ModelResponse) -> None:
        """The model gave no text and no tool call: the run cannot end on that (it ended
        ``completed`` with output ''), so the model is asked for an answer, as pydantic-ai
        asks. The ask spends the output retries with the answers sent back since the prompt
        (pydantic-ai's ``consume_output_retry``): past ``Agent.output_retries``, or on an
        empty answer it stopped on for a reason asking again would meet again (``CUT_OFF``),
        raises ``ModelResponseError`` (the run ends ``failed``). The empty response stays in
        the conversation, as pydantic-ai's ``ModelResponse(parts=[])`` stays (``LiteLLMModel``
        sends no such message)."""
        messages = self.messages
        model = response.model or self.agent.model.name
        why = CUT_OFF.get(response.finish_reason or "")
        retries = self.agent.output_retries
        sent_back = _asks_since_the_prompt(messages, since=self._given)
        if why is not None or sent_back >= retries:
            self._drop_asks_answered_with_nothing()
        if why is not None:
            raise ModelResponseError(
                f"model {model!r} stopped before it answered anything: {why}; not asked again",
                model=response.model,
            )
        if sent_back >= retries:
            raise ModelResponseError(
                f"model {model!r} gave no text and no tool call, with its output retries "
                f"spent (asked again {sent_back} time(s), output_retries={retries}); an agent "
                "run ends on text",
                model=response.model,
            )
        # pydantic-ai's alternatives: output tools stand for every tool (its ``elif``)
        ways = []
        if self._output_specs:
            ways.append("include your response in a tool call")
        elif self.allowed_tools():
            ways.append("call a tool")
        if self.agent.allows_text:
            ways.insert(0, "return text")
        please = PLEASE.format(" or ".join(ways))
        ask = f"{VALIDATION_FEEDBACK}{please}\n\nFix the errors and try again."
        messages.append(Message(role="user", content=ask, metadata={"retry": EMPTY_ANSWER}))

    def _drop_asks_answered_with_nothing(self) -> None:
        """Before a run fails on an empty answer: each ask of ours at the end of its
        transcript leaves with the empty answer it got, so that a session's next turn sends
        no question that was never answered (``LiteLLMModel`` sends no empty answer, and
        would send the ask with the next prompt). The first empty answer stays."""
        messages = self.messages
        while (
            len(messages) - 2 >= self._given
            and _answered_nothing(messages[-1])
            and messages[-2].role == "user"
            and messages[-2].metadata.get("retry") in OUTPUT_ASKS
        ):
            del messages[-2:]

    async def _output_of(self, response: ModelResponse) -> Any:
        """The run's output from its final answer: the text, or with
        ``Agent(output_type=...)`` the object its JSON validates to, as each output validator
        in turn returns it. An answer that does not validate, or that a validator sends back
        (``ModelRetry``), is answered with what is wrong and ``ASKED`` is returned (the model
        is asked again, as pydantic-ai asks); past ``Agent.output_retries`` such answers to the
        same prompt, raises ``ModelResponseError``."""
        agent = self.agent
        output_type = agent.output_type
        text_function = agent.text_function
        nothing = agent.allows_none and not response.text and not response.tool_calls
        if nothing and not agent.output_validators:
            return None  # ``str | None``: an answer of nothing is None (pydantic-ai's)
        if (
            not nothing
            and output_type is None
            and not agent.output_validators
            and text_function is None
            and agent.allows_text
        ):
            return response.text  # the common case: nothing to count or call
        messages = self.messages
        sent_back = _asks_since_the_prompt(messages, since=self._given)
        refused: str | None = None  # a validator's (or the TextOutput function's) message
        errors: str | None = None  # a PromptedOutput answer's, as pydantic-ai words them
        not_output = output_type is None and not agent.allows_text  # text is not the output
        try:
            if nothing:
                output = None
            elif output_type is not None:
                output = read_output(output_type, response.text)
            elif not_output:  # output tools alone: pydantic-ai's words
                raise ModelRetry(TEXT_NOT_OUTPUT)
            elif text_function is not None:
                ctx = self._output_context(sent_back, agent.output_retries)
                output = await text_function.call(
                    {_text_arg(text_function): response.text}, ctx=ctx
                )
            else:
                output = response.text
        except ValidationError as exc:
            problems = validation_problems(exc, whole="answer")
            if output_type is not None:  # native or prompted: pydantic-ai sends its errors
                errors = retry_errors(exc, tool=False)
        except InvalidArguments as exc:  # text a TextOutput's constrained str refuses
            problems = _argument_problems(exc, whole="answer")
        except ModelRetry as exc:
            refused = problems = message_of(exc)
        else:
            try:
                return await self._validated(output, sent_back)
            except ModelRetry as exc:
                refused = problems = message_of(exc)
        # cut off by the output token limit: said, or the problem reads as bad JSON alone
        cut = response.finish_reason == "length" and refused is None
        model = response.model or agent.model.name
        if sent_back >= agent.output_retries:
            if not_output:
                raise ModelResponseError(
                    f"model {model!r} answered in text again after it was asked to include "
                    f"its answer in a call of an output tool ({', '.join(agent.output_tools)}): "
                    "this agent's output is given only through its output tools",
                    model=response.model,
                )
            if refused is not None:
                who = "an output validator"
                if text_function is not None and output_type is None:
                    who = "its TextOutput function or an output validator"
                raise ModelResponseError(
                    f"model {model!r}: its answer was sent back by {who}, "
                    f"{sent_back} time(s) before (output_retries={agent.output_retries}): "
                    f"{refused}",
                    model=response.model,
                )
            why = (
                "; it ran out of output tokens (finish_reason 'length'): raise the model's "
                "max_tokens (or the run's RunLimits.max_tokens budget)"
                if cut
                else ""
            )
            name = output_type.__name__ if output_type is not None else "text"
            raise ModelResponseError(
                f"model {model!r}: its answer is not valid {name} output, again after it was "
                f"told what was wrong: {problems}{why}",
                model=response.model,
            )
        if refused is not None:  # as pydantic-ai words a retry prompt of no tool call
            ask = f"{VALIDATION_FEEDBACK}{refused}\n\nFix the errors and try again."
        elif errors is not None:  # pydantic-ai's words, for native and prompted output alike
            ask = (
                f"{errors}\n\n"
                + ("It was cut off at the output token limit: answer shorter. " if cut else "")
                + "Fix the errors and try again."
            )
        else:  # text a TextOutput function's constrained argument refuses
            ask = (
                f"Your answer is not valid text output: {problems}. "
                + ("It was cut off at the output token limit: answer shorter. " if cut else "")
                + "Fix the errors and try again."
            )
        messages.append(Message(role="user", content=ask, metadata={"retry": INVALID_OUTPUT}))
        return ASKED

    async def _validated(
        self,
        output: Any,
        sent_back: int | None,
        *,
        partial: bool = False,
        call: ToolCall | None = None,
    ) -> Any:
        """``output`` as the agent's output validators return it (``ModelRetry`` passes).
        ``sent_back``: the run's answers sent back so far (None: counted here, when there is
        a validator to tell); ``partial``: it is a ``stop_with_partial`` run's partial output;
        ``call``: the output tool call it was read from (the context's ``tool_name``, as
        pydantic-ai's). Their cap is the agent's ``output_retries``."""
        validators = self.agent.output_validators
        if not validators:
            return output
        if sent_back is None:
            sent_back = _asks_since_the_prompt(self.messages, since=self._given)
        ctx = self._output_context(sent_back, self.agent.output_retries, partial=partial, call=call)
        for validator in validators:
            output = await validator(ctx, output)
        return output

    def _output_context(
        self, sent_back: int, limit: int, *, partial: bool = False, call: ToolCall | None = None
    ) -> RunContext:
        """The context of an output validator or output function: ``retry`` the answers sent
        back so far, ``max_retries`` their cap, as pydantic-ai's."""
        return RunContext(
            runtime=self.runtime,
            handle=self.handle,
            agent=self.agent,
            run=self,
            retry=sent_back,
            max_retries=limit,
            partial_output=partial,
            tool_call_id=None if call is None else call.id,
            tool_name=None if call is None else call.name,
        )

    async def partial_output(self, text: Any, limit: RunLimitExceeded) -> Any:
        """What ``stop_with_partial`` hands back of this run, which ``limit`` stopped with
        ``text``: the text, or with ``Agent(output_type=...)`` the object it holds (read as a
        completed answer is), as the output validators return it, their context's
        ``partial_output`` True: it is the run's final output. There is none when the text
        holds no such object or a validator refuses it (``ModelRetry``: no turn is left to
        ask the model for another): ``limit`` is raised then, saying so. Any other exception
        a validator raises is a ``RunFailed``, as it fails a completed answer's run."""
        agent = self.agent
        output_type = agent.output_type
        output = text
        if output_type is not None and not isinstance(text, output_type):
            try:
                output = read_output(output_type, text or "")
            except ValidationError as exc:
                problems = validation_problems(exc, whole="answer")
                why = f"its partial output is no valid {output_type.__name__} ({problems})"
                raise _no_partial_output(limit, why) from limit
        if output_type is None and not agent.allows_text and isinstance(text, str):
            why = (
                "its output is given only through its output tools (output functions, "
                "ToolOutput), and it stopped before a call of one gave it"
            )
            raise _no_partial_output(limit, why) from limit
        function = agent.text_function
        if not agent.output_validators and function is None:
            return output
        sent_back = _asks_since_the_prompt(self.messages, since=self._given)
        if function is not None and isinstance(output, str):  # TextOutput's, as an answer's
            ctx = self._output_context(sent_back, agent.output_retries, partial=True)
            try:
                output = await function.call({_text_arg(function): output}, ctx=ctx)
            except ModelRetry as exc:
                why = (
                    f"its TextOutput function refused its partial output: {message_of(exc)} "
                    "(no turn was left to ask the model for another)"
                )
                raise _no_partial_output(limit, why) from limit
            except Exception as exc:
                raise RunFailed(
                    f"run {self.info.run_id} stopped at its limit, and its TextOutput function "
                    f"raised on its partial output: {type(exc).__name__}: {message_of(exc)}"
                ) from exc
        try:
            return await self._validated(output, sent_back, partial=True)
        except ModelRetry as exc:
            why = (
                f"an output validator refused its partial output: {message_of(exc)} (no "
                "turn was left to ask the model for another)"
            )
            raise _no_partial_output(limit, why) from limit
        except Exception as exc:
            raise RunFailed(
                f"run {self.info.run_id} stopped at its limit, and an output validator raised "
                f"on its partial output: {type(exc).__name__}: {message_of(exc)}"
            ) from exc

    async def at(self, boundary: Boundary, *, final: bool = False, **where: Any) -> bool:
        """Apply what is deliverable at ``boundary``; park here while paused (or frozen).
        Returns True if a message for the model was staged."""
        inbox = self.handle.inbox
        staged = await self._apply_all(inbox.take(boundary, final=final, **where), boundary, where)
        while self.paused or self.frozen:
            if not self.paused:
                staged = await self._wait_for_cancel(boundary, final, where) or staged
                continue
            inbox.clear_signal()
            cmds = inbox.take(Boundary.WHILE_PAUSED, **where)
            if not cmds:
                await inbox.wait()
                continue
            await self._apply_all(cmds, Boundary.WHILE_PAUSED, where)
            if not self.paused:
                more = inbox.take(boundary, final=final, **where)
                staged = await self._apply_all(more, boundary, where) or staged
        return staged

    async def _wait_for_cancel(
        self, boundary: Boundary, final: bool, where: dict[str, Any]
    ) -> bool:
        """Frozen by an ancestor's cancel: apply what arrives here until the cancel (which
        raises ``Stop``) lands, or the run is unfrozen because the cancel was refused."""
        if self._given_up is not None:  # the run ended without this task, which came back
            raise asyncio.CancelledError
        poke = self._poke = self._poke or asyncio.Event()
        poke.clear()
        cmds = self.handle.inbox.take(boundary, final=final, **where)
        if cmds:
            return await self._apply_all(cmds, boundary, where)
        await poke.wait()
        return False

    async def _apply_all(
        self, cmds: list[SteeringCommand], boundary: Boundary, where: dict[str, Any]
    ) -> bool:
        staged = False
        i = 0
        try:
            for i, cmd in enumerate(cmds):  # noqa: B007 - i is read by the except below
                staged = await apply.apply(self, cmd, boundary, where) or staged
        except apply.Stop:
            # a cancel ended the run: the commands delivered with it (another cancel, a
            # human's beside the supervisor's abort) are superseded by it, not failed "target
            # finished before delivery" after they were delivered
            for later in cmds[i + 1 :]:
                self.handle.inbox.superseded(later, cmds[i].correlation_id)
            raise
        return staged

    # ------------------------------------------------------------------ model and tools

    async def _call_model(self) -> tuple[ModelResponse, str]:
        tree = self.runtime.runs.tree
        # before the call is counted: a function that fails ends the run with no call made
        unsent = self._instruction_fns and await self._write_instructions()
        if self._processors:
            unsent = await self._process_history(bool(unsent))
        tokens_left = reserve_model_call(self.info, tree)
        if self.staged:
            self.messages.extend(msg for _, msg in self.staged)
        stop = self._stop_retrying = self._stop_retrying or asyncio.Event()
        stop.clear()
        agent = self.agent
        sent = self.messages[1:] if unsent else self.messages
        request = ModelRequest(
            messages=_with_output_prompt(sent, agent.output_prompt),
            tools=[
                *(await self._tool_specs() if self._prepared else self._specs()),
                *self._output_specs,
            ],
            model=self.model_name(),
            run_id=self.info.run_id,
            settings=_settings(agent.model_settings, tokens_left),
            response_format=agent.output_type if agent.output_native else None,
            stop_retrying=stop,
        )
        rid = request.request_id
        self._offered = request.tools
        for cmd, _ in self.staged:
            self.handle.inbox.applied(cmd, model_request_id=rid)
        self.staged.clear()
        model = self.agent.model
        tool_names = [t.name for t in request.tools]
        # the model's forced tool, if the request does not offer it: it goes out unforced
        forced = model.forced_tool()
        self.emit(
            ModelEvent,
            type="model.request",
            request_id=rid,
            model=request.model,
            message_count=len(request.messages),
            tool_names=tool_names,
            tool_choice_dropped=None if forced is None or forced in tool_names else forced,
        )
        left = deadline_left(self.info)
        if left is not None:  # no retry the run cannot wait for (``LiteLLMModel``)
            request.deadline = asyncio.get_running_loop().time() + left
        call = self._streamed if model.streams else model.request
        handler = fold(self._model_hooks, self.ctx, call) if self._model_hooks else call
        # The run waits for ``answer``, which the call's task settles, not for the task: a
        # call cancelled (by the deadline, an IMMEDIATE cancel, the runtime closing) is not
        # waited for, so a cleanup of its that does not finish cannot hold the run.
        answer: asyncio.Future[ModelResponse] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(_no_exit(handler, request, answer))
        self._model_task, self._model_answer = task, answer
        # the deadline bounds the call in flight too (a model that never answers would hold
        # the run past it); its end is a limit, not the model's own timeout
        deadline = asyncio.timeout(left)
        try:
            async with deadline:
                response = await answer
        except TimeoutError as exc:
            if not deadline.expired():
                self._model_failed(rid, request, exc)
                raise  # the model's own
            limit = self.info.limits.deadline_s
            exceeded = RunLimitExceeded("deadline_s", limit, limit, run_id=self.info.run_id)
            self._model_failed(rid, request, exceeded)
            raise exceeded from None
        except (Exception, GeneratorExit) as exc:
            if isinstance(exc, ModelError) and isinstance(exc.usage, Usage):
                # what the failed call cost, as the provider said (a blocked answer's prompt)
                record_model_usage(self.info, tree, exc.usage)
            self._model_failed(rid, request, exc)
            if stop.is_set() and isinstance(exc, Exception):
                # A cancel is on its way, and the call stopped retrying for it: it lands at
                # the boundary after the call, as it would after an answer (Stop), not after
                # one more attempt, nor as a late command once the run failed.
                await self.at(Boundary.AFTER_MODEL_RESPONSE, model_request_id=rid)
            raise
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task is self._interrupted and current is not None and not current.cancelling():
                # Our own IMMEDIATE cancel: apply it now, at the boundary after the request.
                await self.at(Boundary.AFTER_MODEL_RESPONSE, model_request_id=rid)
                raise apply.Stop(
                    RunStatus.CANCELLED, "cancelled during a model request", immediate=True
                ) from None
            raise
        finally:
            self._model_task = self._interrupted = self._model_answer = None
            if not task.done():  # the run stopped waiting for it: it ends alone
                let_go(task)
        if not isinstance(response, ModelResponse):
            wrong = _returned(self.agent.name, "model", response, ModelResponse)
            self._model_failed(rid, request, wrong)
            raise wrong
        problem = answer_problem(response)
        if problem is not None:  # refused before the loop reads (or counts) any of it
            wrong = ModelResponseError(
                f"model {self.agent.model.name!r} of agent {self.agent.name!r} (or a "
                f"middleware around it) answered a ModelResponse the run cannot use: {problem}",
                model=request.model,
            )
            self._model_failed(rid, request, wrong)
            raise wrong
        if response.text is None:  # no text (a provider's ``content: null``): as the type says
            response = dataclasses.replace(response, text="")
        response = self._own_call_ids(response)
        record_model_usage(self.info, tree, response.usage)
        self.messages.append(response.to_message())
        if response.text:
            self.last_text = response.text
        self.emit(
            ModelEvent,
            type="model.response",
            request_id=rid,
            model=response.model,
            tool_calls=[c.name for c in response.tool_calls],
            usage={
                "input_tokens": response.usage.input_tokens,
                "output_tokens": response.usage.output_tokens,
            },
            text_summary=summarize(response.text) if response.text else None,
            finish_reason=response.finish_reason,
        )
        # Past the budget anyway (the prompt counts too): the answer is kept as the run's
        # output, but the run ends limit_exceeded, not completed, and runs none of its tools.
        check_token_budget(self.info, tree, response=response.usage)
        _refuse_cut_off_calls(response, request)
        return response, rid

    async def _process_history(self, unsent: bool) -> bool:
        """Pass the run's messages through the agent's history processors, in order (each
        given a copy of the list the one before returned), as pydantic-ai does before each
        model request: what the last returns is what is sent, and the run's transcript from
        then on (``RunResult.messages``). Steering messages staged for this request are not
        given to them: they are added after, as pydantic-ai's instructions are, so what a
        command delivers reaches the model it was sent for. The run's own messages (its new
        ones) start at the first message it had made that is still there (else at the last,
        the one sent, as pydantic-ai stamps it). True: the leading system message is one
        with no text, not sent."""
        before = self.messages
        first = before[0] if before else None
        messages: object = list(before)
        for hook in self._processors:
            messages = await hook(self.ctx, list(cast("list[Message]", messages)))
            who = f"agent {self.agent.name!r}: history processor {hook.name!r}"
            if not isinstance(messages, list):
                raise ConfigurationError(
                    f"{who} must return a list of Messages, got {kind_of(messages)}"
                )
            _check_messages(messages, f"{who} returned messages", "a list of Messages")
        kept = cast("list[Message]", messages)
        who = f"agent {self.agent.name!r}: its history processors"
        if not kept:
            raise ConfigurationError(
                f"{who} left no message to send (processed history cannot be empty)"
            )
        if kept[-1].role == "assistant":
            raise ConfigurationError(
                f"{who} returned messages ending with an assistant message; what is sent "
                "must end with a user, tool or system message (pydantic-ai's ModelRequest)"
            )
        self.new_from = _first_kept(before, kept, self.new_from, len(kept) - 1)
        self._given = _first_kept(before, kept, self._given, len(kept))
        self.messages[:] = kept
        return unsent and kept[0] is first

    def _model_failed(self, rid: str, request: ModelRequest, exc: BaseException) -> None:
        # The call's own end: without it a trace holds a model call that never answered and a
        # log no line saying which call failed (the run's end event comes later, if at all).
        self.emit(
            ModelEvent,
            type="model.error",
            request_id=rid,
            model=request.model,
            error=f"{type(exc).__name__}: {message_of(exc)}",
        )

    def _own_call_ids(self, response: ModelResponse) -> ModelResponse:
        """``response`` with a new id for each tool call that has none, or one an earlier call
        of the conversation (or of this response) already has, and arguments given as JSON
        text read into the object they hold. Results are matched to calls by
        id: providers refuse a call without one, cannot pair results to calls that share one,
        and the loop's boundaries and stand-in results go by them. A model's own ids are kept
        (the first call with an id keeps it); its response object is not changed. A streamed
        call keeps the id its pieces were published with (``_streamed``)."""
        seen = self._call_ids
        streamed, self._streamed_ids = self._streamed_ids, {}
        calls: list[ToolCall] = []
        for index, call in enumerate(response.tool_calls):
            if (call.args is None or isinstance(call.args, str)) and call.parse_error is None:
                # the provider's JSON text (or None for no arguments, pydantic-ai's default),
                # as a custom model may hand it over: refused as "not an object", the model
                # was asked again for what it had sent
                call = parse_arguments(call.id, call.name, call.args)
            own = _fresh_call_id(streamed.get(index, call.id), seen)
            if own != call.id:
                call = dataclasses.replace(call, id=own)
            seen.add(own)
            calls.append(call)
        if all(a is b for a, b in zip(calls, response.tool_calls, strict=True)):
            return response
        return dataclasses.replace(response, tool_calls=calls)

    async def _streamed(self, request: ModelRequest) -> ModelResponse:
        """The innermost model call of a model that streams: each piece becomes a
        ``model.delta`` event; the last chunk's complete response is the answer. A call's
        first piece is published with the id the call will have in the conversation
        (``_own_call_ids`` gives the same one), so a UI pairs the pieces with its events."""
        response: ModelResponse | None = None
        self._streamed_ids = {}
        for_this: set[str] = set()
        stream = self.agent.model.stream(request)
        try:
            async for chunk in stream:
                if chunk.usage is not None and chunk.response is None:
                    # past a token budget mid-stream: stop it here, nothing more is published
                    check_token_budget(self.info, self.runtime.runs.tree, streaming=chunk.usage)
                response = self._streamed_chunk(request.request_id, chunk, for_this) or response
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:  # a stream stopped early lets go of its connection now
                await close()
        if response is None:
            raise ModelResponseError(
                f"model {self.agent.model.name!r} ended its stream without a complete response "
                "(the last chunk of Model.stream must carry it)",
                model=request.model,
            )
        return response

    def _streamed_chunk(
        self, request_id: str, chunk: StreamChunk, for_this: set[str]
    ) -> ModelResponse | None:
        """Publish one piece of a stream (a call's first piece with the id it will have);
        returns the complete response the last chunk carries."""
        named = self._streamed_ids
        index = chunk.tool_call_index
        if index is not None and index not in named and (chunk.tool_call_id or chunk.tool_name):
            call_id = _fresh_call_id(chunk.tool_call_id, self._call_ids, for_this)
            if call_id != chunk.tool_call_id:
                chunk = dataclasses.replace(chunk, tool_call_id=call_id)
            named[index] = call_id
            for_this.add(call_id)
        if chunk.text_delta or chunk.thinking_delta or chunk.args_delta or chunk.tool_name:
            self._emit_delta(request_id, chunk)
        return chunk.response

    def _emit_delta(self, request_id: str, chunk: StreamChunk) -> None:
        self.emit(
            ModelDeltaEvent,
            type="model.delta",
            request_id=request_id,
            agent_id=self.info.agent_id,
            text=chunk.text_delta,
            thinking=chunk.thinking_delta,
            tool_call_index=chunk.tool_call_index,
            tool_call_id=chunk.tool_call_id,
            tool_name=chunk.tool_name,
            args_delta=chunk.args_delta,
        )

    async def _run_tool(self, call: ToolCall, *, calls_left: int = 1) -> ToolResult:
        """Run ``call``, the first of the ``calls_left`` calls of the response still to run
        (they must all fit the tool budget, or none of them runs)."""
        reserve_tool_call(self.info, self.runtime.runs.tree, calls_left=calls_left)
        allowed = self.allowed_tools()
        tool = allowed.get(call.name)
        available = sorted(allowed)
        if self._prepared:  # a tool a prepare hid from the request was not offered
            shown = {t.name for t in self._offered}
            available = [
                n
                for n in available
                if n in shown
                or (
                    n not in self._prepares
                    and n not in self._set_names
                    and self._prepare_all is None
                )
            ]
            if call.name not in available:
                tool = None
        # offered to the model, then taken away by steering before the call ran: the model
        # did nothing wrong, and is told what happened (never a failed run)
        withdrawn = tool is None and any(t.name == call.name for t in self._offered)
        if tool is None and not withdrawn and self.agent.unknown_tools == "fail":
            # refused before it ran, as the error result is: no call spent, here or above
            release_tool_call(self.info, self.runtime.runs.tree)
            raise ToolError(
                f"the model called {call.name!r}, which run {self.info.run_id} does not have "
                f"(available: {available}); Agent(unknown_tools='fail') ends the run"
            )
        self.emit(
            ToolEvent,
            type="tool.call",
            tool_call_id=call.id,
            name=call.name,
            args_summary=summarize(call.args),
        )

        ctx = RunContext(
            runtime=self.runtime,
            handle=self.handle,
            agent=self.agent,
            run=self,
            tool_call_id=call.id,
            tool_name=call.name,
            retry=self._failed_in_a_row.get(call.name, 0),
            max_retries=self._retries(tool),
        )
        left = deadline_left(self.info)
        limit = self.info.limits.tool_timeout_s
        if left is not None:  # a tool may take no longer than the run has left
            limit = left if limit is None else min(limit, left)

        async def dispatch(c: ToolCall) -> ToolResult:
            if withdrawn and c.name == call.name:
                return ToolResult(
                    call_id=c.id,
                    name=c.name,
                    content=f"tool {c.name!r} was withdrawn from this run (its tools were "
                    f"narrowed) after you called it; available: {', '.join(available) or 'none'}. "
                    "Call one of those.",
                    error=True,
                    refused=True,
                )
            if tool is None and _FINAL_RESULT.match(c.name) and c.name not in allowed:
                return ToolResult(
                    call_id=c.id,
                    name=c.name,
                    content=self._no_output_tool(c.name, available),
                    error=True,
                    refused=True,
                )
            # the call as the middleware passed it on: a renamed call runs the tool it names,
            # if this request offered it (a prepare's hiding narrows, as steering's does)
            try:
                return await execute_tool_call(
                    tool if c.name == call.name else _offered_tool(allowed, available, c.name),
                    c,
                    timeout_s=limit,
                    available=available,
                    ctx=ctx,
                    on_timeout=self._tool_timed_out,
                )
            except GeneratorExit:
                # execute_tool_call answers a tool's own: this one was thrown into the
                # run's task, closing its frames (main answers the call)
                self._closed_call = call
                raise

        handler = fold(self._tool_hooks, ctx, dispatch) if self._tool_hooks else dispatch
        self._in_tool = call
        try:
            result = await handler(call)
        except ToolError as exc:
            # a middleware's (the tool's own is its result already): told to the model, as
            # a tool's is, so a permission check around a tool need not end the run
            result = ToolResult(
                call_id=call.id,
                name=call.name,
                content=message_of(exc),
                error=True,
                failed=isinstance(exc, ToolFailed),
            )
        finally:
            self._in_tool = None
        if not isinstance(result, ToolResult):
            raise _returned(self.agent.name, "tool", result, ToolResult)
        if result.call_id != call.id or result.name != call.name:
            # It answers this call, whatever call a middleware took it from (a cache): a
            # result under another id leaves this call unanswered, which providers refuse.
            result = dataclasses.replace(result, call_id=call.id, name=call.name)
        if result.refused:  # the tool never ran: the call does not spend the tool budget
            release_tool_call(self.info, self.runtime.runs.tree)
        self._record_result(call, result)
        if not result.failed:  # a ToolFailed is not counted against the tool's retries
            self._count_failure(call.name, result.error)
        if result.error and ctx.max_retries is not None and tool is not None:
            failed = self._failed_in_a_row.get(call.name, 0)
            if failed > ctx.max_retries:  # pydantic-ai's UnexpectedModelBehavior
                raise ToolError(
                    f"tool {call.name!r} exceeded max retries count of {ctx.max_retries}: "
                    f"{failed} calls of it in a row failed (the last: {result.content}); "
                    "Tool(retries=...) or Agent(retries=...) sets the cap"
                )
        return result

    def _no_output_tool(self, name: str, available: list[str]) -> str:
        """What a call of pydantic-ai's output tool ``name`` (``final_result``...) that this
        run does not offer is answered: how this agent's output is given instead. Its model
        may be used to pydantic-ai's ``ToolOutput``, or continue a transcript of one."""
        agent = self.agent
        tools = f"; its tools: {', '.join(available)}" if available else ""
        if agent.output_tools:
            how = (
                f"its output tools are {', '.join(agent.output_tools)}: call "
                f"{' or '.join(agent.output_tools)} with it"
                + (", or answer with text" if agent.allows_text else "")
            )
        elif agent.output_type is not None:
            how = (
                "its output is your answer's own JSON, not a tool call: answer with only the "
                f"JSON of the response format ({agent.output_type.__name__})"
            )
        else:
            how = "its output is your answer's text: answer with text"
        return f"{name!r} is no tool of this run; {how}{tools}."

    def _retries(self, tool: Tool | None) -> int | None:
        """The cap on failed calls in a row of ``tool`` (its own, else the agent's)."""
        if tool is None:
            return None
        own = tool.retries
        return self.agent.retries if own is None else own

    def _count_failure(self, name: str, failed: bool) -> None:
        """Keep ``RunContext.retry``'s count for the agent's tool ``name`` (a name the model
        made up is not counted: the map stays as small as the agent's tools). A success
        resets the count once the response's calls have run, and only if no call of the
        tool in it failed (pydantic-ai's "failure wins": a model pairing a failing and a
        succeeding call of a tool in each response would otherwise never reach its cap)."""
        if name not in self.agent.tools:
            return
        if not failed:
            self._succeeded_in_batch.add(name)
        else:
            self._failed_in_batch.add(name)
            self._failed_in_a_row[name] = self._failed_in_a_row.get(name, 0) + 1

    def _record_result(self, call: ToolCall, result: ToolResult, retry: str | None = None) -> None:
        """Answer ``call`` with ``result`` (``retry``: it asks for output again, its
        ``metadata["retry"]``, counted against the agent's ``output_retries``)."""
        message = result.to_message()
        if retry is not None:
            message.metadata["retry"] = retry
        self.messages.append(message)
        self.emit(
            ToolEvent,
            type="tool.result",
            tool_call_id=call.id,
            name=call.name,
            content_summary=summarize(result.content),
            error=result.error,
        )

    def _specs(self) -> list[ToolSpec]:
        return [t.spec() for t in self.allowed_tools().values()]

    async def _tool_specs(self) -> list[ToolSpec]:
        """The tools the next request offers: those the run may call (steering's narrowing
        first), each through its ``prepare`` if it has one (pydantic-ai's): it is given a
        copy of the tool's spec and the run's context for that tool, and may hide the tool
        from this request (None) or offer it described otherwise, under its own name; then
        each toolset that decides per request (``prepared``, a filter of ``(ctx, spec)``)
        is given its tools that are left, and the agent's ``prepare_tools`` what is left
        after them, each returning what to offer of what it was given. So a prepare only
        ever narrows or rewords what steering left; it never adds a tool."""
        specs: list[ToolSpec] = []
        for name, tool in self.allowed_tools().items():
            spec = tool.spec()
            hook = self._prepares.get(name)
            if hook is None:
                specs.append(spec)
                continue
            given = ToolSpec(
                name=spec.name,
                description=spec.description,
                parameters=copy.deepcopy(spec.parameters),
                strict=spec.strict,
            )
            ctx = RunContext(
                runtime=self.runtime,
                handle=self.handle,
                agent=self.agent,
                run=self,
                tool_name=name,
                retry=self._failed_in_a_row.get(name, 0),
                max_retries=self._retries(tool),
            )
            prepared = check_prepared(name, await hook(ctx, given))
            if prepared is not None:
                specs.append(prepared)
        if self._set_hooks:
            specs = await specs_of_toolsets(self.ctx, self._set_hooks, specs)
        if self._prepare_all is not None:
            given_all = [
                ToolSpec(
                    name=s.name,
                    description=s.description,
                    parameters=copy.deepcopy(s.parameters),
                    strict=s.strict,
                )
                for s in specs
            ]
            returned = await self._prepare_all(self.ctx, given_all)
            specs = check_prepared_tools(self.agent.name, specs, returned)
        return specs

    def allowed_tools(self) -> Mapping[str, Tool]:
        grant = self.info.tools
        tools = self.agent.tools
        return tools if grant is None else {n: t for n, t in tools.items() if n in grant}

    def may_call_tools(self) -> bool:
        # the last request's tools: a call of one withdrawn since still has its result
        # boundary (answered "withdrawn"), and so does one under way
        return bool(self.allowed_tools()) or bool(self._offered) or self._in_tool is not None

    def model_name(self) -> str | None:
        models = self.info.models
        return models[0] if models else None

    # ------------------------------------------------------------------ RunDriver hooks

    def watched_by(self) -> tuple[bool, Any]:
        return True, getattr(self.agent, "supervisor", None)

    def wake(self) -> None:
        if self._poke is not None:
            self._poke.set()
        self._pass_cancel_down()

    def _pass_cancel_down(self) -> None:
        """A cancel was just queued for this run: send it on to every live descendant now, to
        land at each one's own next safe boundary, rather than when this run reaches its next
        boundary (which, for a run waiting inside a tool on a child, is after that child has
        done all its work). The descendants are frozen in this same call, so none does more
        work while the cancels are on their way.

        A cancel supersedes every other queued command, so only a queued cancel can wake
        this with a cancel queued: every other command costs a look at the queue's index of
        cancels (an empty one, mostly). An IMMEDIATE cancel is left to ``interrupt_now``. One
        for a later boundary is passed down only when that boundary is sure to come (after
        the result of the tool under way): the run may end before a model call or the end of
        a turn, and then its cancel fails and must have changed nothing (its subtree is
        cancelled when the run applies it). Such a cancel queued first does not keep a plain
        one queued after it from being passed down.

        A model call under way is told to stop retrying (``ModelRequest.stop_retrying``) by
        the same cancel: its boundary comes right after the call, and a retry, after waiting
        out a rate limit's ``Retry-After``, would be one more paid request for nothing.
        """
        stop = self._stop_retrying if self._model_answer is not None else None
        if stop is not None and stop.is_set():
            stop = None
        if self.passed_down is not None and stop is None:  # passed down already
            return
        cmd = next(filter(self._passes_down, self.handle.inbox.queue.cancels()), None)
        if cmd is None:
            return
        self._watch_tool(None)
        if stop is not None:
            stop.set()
        if self.passed_down is not None:
            return
        self.passed_down = (cmd.payload.get("reason"), False)
        marked = self._freeze_subtree()
        if marked:
            self.runtime.spawn(
                self._send_cancels(marked, cmd.payload.get("reason"), immediate=False),
                name=f"cancel-subtree-{self.info.run_id}",
            )

    def narrowing_queued(self, cmd: SteeringCommand) -> None:
        self.pass_narrowing_down(cmd, landed=False)

    def pass_narrowing_down(self, cmd: SteeringCommand, *, landed: bool) -> None:
        """Send every live agent run below this one a narrowing of its own for ``cmd``
        (``tinyagents.harness.narrowing``): when ``cmd`` is queued for this run, and again
        when it is applied (``landed``), for a run started in between."""
        cid = cmd.correlation_id
        covered = self._covered
        if covered is not None and cid in covered:
            if landed:
                covered.discard(cid)
            return
        books = self._narrowing
        if books is None:
            books = self._narrowing = {}
        sent = books.pop(cid, set()) if landed else books.setdefault(cid, set())
        passed = self._passed
        if landed and passed is not None:
            passed.pop(cid, None)  # applied: what was passed down for it stays
        cmds = narrowings_below(
            self.runtime, self.info, self.agent.name, cmd, sent=sent, landed=landed
        )
        if not cmds:
            return
        if not landed:
            if passed is None:
                passed = self._passed = {}
            passed.setdefault(cid, []).extend(cmds)
        if self._withdrawn is None:
            self._withdrawn = {}
        runs = self.runtime.runs
        for run_id, derived in cmds:
            below = runs.get(run_id)
            run = below.driver if below is not None else None
            if isinstance(run, AgentRun):
                if run._covered is None:
                    run._covered = set()
                run._covered.add(derived.correlation_id)
        self.runtime.spawn(
            send_narrowings(self.runtime, cmds, self._withdrawn),
            name=f"narrow-subtree-{self.info.run_id}",
        )

    def withdraw_narrowing(self, correlation_id: str, why: str) -> None:
        """Narrowing ``correlation_id`` of this run ended without being applied (``why``):
        what was passed down for it and not taken yet by the runs below is withdrawn."""
        passed = self._passed
        cmds = passed.pop(correlation_id, None) if passed is not None else None
        if not cmds:
            return
        if self._withdrawn is None:
            self._withdrawn = {}
        books = self._narrowing
        if books is not None:
            books.pop(correlation_id, None)
        reason = (
            f"withdrawn: the narrowing of run {self.info.run_id} it was passed down for "
            f"(command {correlation_id}) was not applied: {why}"
        )
        withdraw_narrowings(self.runtime, cmds, reason, self._withdrawn)

    def pause_queued(self, cmd: SteeringCommand) -> None:
        """A pause or resume of this run's own was queued: a pause whose boundary is sure to
        come holds the runs below at once, and a resume lets go of them at once (a run
        waiting inside a tool on a child reaches its boundary only when the child is done);
        what was passed down to this run is not passed on (``tinyagents.harness.pausing``).
        Applying either sets the hold right again (``reconcile_pause``)."""
        if self.pauses.passed_down(cmd):
            return
        if cmd.kind is SteeringKind.PAUSE:
            if self._passes_down(cmd):
                self.holding_below().hold(cmd)
        elif self._below is not None and self._below.cause is not None:
            self._below.resumed_by(cmd)

    def holding_below(self) -> HoldBelow:
        below = self._below
        if below is None:
            below = self._below = HoldBelow(self.runtime, self.info, self.agent.name)
        return below

    def adopt_pause(self, cmd: SteeringCommand, origin: str | None) -> bool:
        """Mark ``cmd`` (a pause or resume run ``origin`` passes down) as ``origin``'s: the
        run applies it as that run's hold, not as its own operator's (``origin`` None:
        forget it, it was withdrawn)."""
        self.pauses.adopt(cmd, origin)
        return True

    async def hold_new_run(self, handle: RunHandle) -> None:
        if self._below is not None:
            await self._below.take_in()

    def reconcile_pause(self, cause: SteeringCommand) -> None:
        """After a pause or resume applied: the runs below are held while this run is paused
        by a pause of its own, and let go of otherwise."""
        reconcile_below(self.pauses, self._below, self.holding_below, cause)

    def _passes_down(self, cmd: SteeringCommand) -> bool:
        """Whether queued cancel ``cmd`` is passed down when it is queued: its boundary is
        sure to come."""
        delivery = cmd.delivery
        return delivery is SteeringDelivery.NEXT_BOUNDARY or (
            delivery is SteeringDelivery.AFTER_TOOL_RESULT and self._in_tool is not None
        )

    def check_target(self, cmd: SteeringCommand) -> str | None:
        """A graph task or node of an agent run does not exist (it was accepted, and applied
        to the agent run as if it were aimed at it)."""
        target = cmd.target
        if isinstance(target, GraphTaskTarget):
            return f"not found: run {self.info.run_id} is an agent run, with no graph task {target.task_id!r}"
        if isinstance(target, GraphNodeTarget):
            return f"not found: run {self.info.run_id} is an agent run, with no graph node {target.node!r}"
        return None

    def interrupt_now(self, cmd: SteeringCommand) -> None:
        """Cancel the in-flight model request, and freeze the whole subtree in this same call:
        no descendant does more work while the cancels are sent to them, one by one."""
        if self._model_task is not None and not self._model_task.done():
            assert self._model_answer is not None
            self._model_answer.cancel()  # the run goes on at once, not after the call's cleanup
            self._model_task.cancel()
            self._interrupted = self._model_task
        self._watch_tool(None)
        reason = cmd.payload.get("reason")
        self.passed_down = (reason, True)
        self.interrupted = True
        marked = self._freeze_subtree(interrupt=True)
        if marked:
            self.runtime.spawn(
                self._send_cancels(marked, reason, immediate=True),
                name=f"cancel-subtree-{self.info.run_id}",
            )

    def _watch_tool(self, why: str | None) -> None:
        """A cancel is queued while a tool call is under way: it lands after the call. A
        call whose cancellation never finishes (its tool timed out, and its cleanup swallows
        every cancel or awaits for ever) would hold the cancel, and the run, for ever; so
        while the cancel waits, the call is looked at every ``CANCEL_GRACE_S``, and found
        still being cancelled twice in a row, the run ends without it (``end_without_task``).
        Nothing is armed for a run's ordinary tool calls: only a cancel waiting arms it (or
        the run's task cancelled by whoever started it: ``cancel_run_task``, ``why``), or the
        call's own timeout running out (``_tool_timed_out``)."""
        call = self._in_tool
        if call is None or self._given_up is not None:
            return
        if self._tool_watch is not None:
            if self._watched is call:
                return
            self._tool_watch.cancel()  # armed for an earlier call, whose cancellation ended
        loop = asyncio.get_running_loop()
        self._watched = call
        self._tool_watch = loop.call_later(CANCEL_GRACE_S, self._check_tool, call, False, why)

    def _tool_timed_out(self, limit: float) -> None:
        """The tool call under way ran out of its time and is being cancelled: watched as a
        cancel waiting for it is (``_watch_tool``), if its cancellation has not ended (a
        cleanup that swallows every cancel, or awaits for ever), the run ends ``failed``
        without it: nothing else would ever end it."""
        call = self._in_tool
        if call is not None:
            self._timed_out = (call, limit)
            self._watch_tool(None)

    def _check_tool(self, call: ToolCall, was_cancelling: bool, why: str | None) -> None:
        self._tool_watch = self._watched = None
        task = self.handle.task
        if self._in_tool is not call or task is None or task.done() or self.handle.done:
            return
        cancelling = task.cancelling() > 0
        if was_cancelling and cancelling:
            cancel = next(iter(self.handle.inbox.queue.cancels()), None)
            timed_out = self._timed_out
            if cancel is None and why is None and timed_out is not None and timed_out[0] is call:
                self.runtime.spawn(
                    self.end_without_task(self._stuck_timeout(call), timed_out=timed_out[1]),
                    name=f"give-up-{self.info.run_id}",
                )
                return
            said = cancel.payload.get("reason") if cancel is not None else why
            reason = (
                f"{said or 'cancelled'}; tool {call.name!r} (call {call.id}) was being "
                f"cancelled and did not finish within {CANCEL_GRACE_S:g} s: the run ended "
                "without it, its task abandoned"
            )
            self.runtime.spawn(self.end_without_task(reason), name=f"give-up-{self.info.run_id}")
            return
        loop = asyncio.get_running_loop()
        self._watched = call
        self._tool_watch = loop.call_later(CANCEL_GRACE_S, self._check_tool, call, cancelling, why)

    def _stuck_timeout(self, call: ToolCall) -> str:
        """Why a run whose timed-out tool call never finished its cancellation ends: the
        tool's timeout, or, when the run's deadline cut the call short, that limit
        (``self.limit_error``; the run ends ``limit_exceeded``, as it would have at its next
        boundary)."""
        assert self._timed_out is not None
        stuck = (
            f"its cancellation did not finish within {CANCEL_GRACE_S:g} s: the run ended "
            "without it, its task abandoned"
        )
        left = deadline_left(self.info)
        if left is not None and left <= 0:
            deadline = self.info.limits.deadline_s
            self.limit_error = RunLimitExceeded(
                "deadline_s",
                deadline,
                deadline,
                run_id=self.info.run_id,
                detail=f"tool {call.name!r} (call {call.id}) was cut short by it, and {stuck}",
            )
            return str(self.limit_error)
        return (
            f"tool {call.name!r} (call {call.id}) timed out after {self._timed_out[1]:g} s "
            f"and {stuck}"
        )

    def _exceeded(self, exc: RunLimitExceeded) -> None:
        """Publish ``limit.exceeded`` for the limit that ends the run."""
        self.emit(
            LimitEvent, type="limit.exceeded", limit=exc.limit, used=exc.used, allowed=exc.allowed
        )

    async def end_without_task(self, why: str, *, timed_out: float | None = None) -> bool:
        """The run's task did not end within a grace after it was cancelled (a tool whose
        cancellation never finishes): end the run now with ``why``, ``cancelled``, as its
        cancel would have ended it, and leave the task behind (logged; it is cancelled once
        more, and whatever it does if it ever ends changes nothing). The cancel waiting for
        the tool's result is applied there, as if the result had come.

        ``timed_out``: nobody cancelled the run, the tool call under way ran out of that
        much time (``_tool_timed_out``): the run ends ``failed`` (``limit_exceeded`` when the
        run's deadline cut it short: ``_stuck_timeout``), the call answered as timed out."""
        task = self.handle.task
        if self._given_up is not None or self.handle.done:
            return True
        self.frozen = True  # a task that comes back goes no further than its next boundary
        exceeded = self.limit_error if timed_out is not None else None
        if exceeded is not None:
            status = RunStatus.LIMIT_EXCEEDED
            self._exceeded(exceeded)
        else:
            status = RunStatus.CANCELLED if timed_out is None else RunStatus.FAILED
        result = self._given_up = self._result(status, self.last_text, why)
        _log.error("run %s: %s (task %r)", self.info.run_id, why, task)
        if self._tool_watch is not None:
            self._tool_watch.cancel()
            self._tool_watch = self._watched = None
        call = self._in_tool
        if call is not None and timed_out is not None:
            if exceeded is None:
                self.failure = ToolError(why)
            self._record_result(
                call,
                ToolResult(
                    call_id=call.id,
                    name=call.name,
                    content=f"tool {call.name!r} timed out after {timed_out:g} s and was "
                    "abandoned (its cancellation did not finish)",
                    error=True,
                ),
            )
        if call is not None:
            where: dict[str, Any] = {"tool_call_id": call.id}
            cmds = self.handle.inbox.take(Boundary.AFTER_TOOL_RESULT, **where)
            cancel = next((c for c in cmds if c.kind is SteeringKind.CANCEL), None)
            for cmd in cmds:
                if cancel is None:
                    self.handle.inbox.failed(cmd, "the run ended before it was applied")
                elif cmd is cancel:
                    self.handle.inbox.applied(
                        cmd, boundary=Boundary.AFTER_TOOL_RESULT.value, **where
                    )
                else:
                    self.handle.inbox.superseded(cmd, cancel.correlation_id)
            if cancel is not None:
                self.stopped_by = cancel.actor
        self.abandon(self._freeze_subtree(interrupt=True), "its parent ended without its task")
        if task is not None and not task.done():
            let_go(task)
        await self._finish_run(result)
        return True

    async def _thread_busy(self) -> str | None:
        """Why the run, reopened for another turn, cannot be a writer of its thread again
        (None: it can, and has taken it): a session's turn holds it (or, for a turn that
        held it, another run of the thread runs), in this runtime or, on a durable store, in
        another. The message then fails as a late one saying so, rather than two writers."""
        if self.info.thread_id is None:
            return None
        try:
            await self.runtime.take_thread(self.info, hold=self.holds_thread, started=True)
        except ThreadBusy as busy:
            writer = f"run {busy.held_by} is writing it" if busy.held_by else "another run"
            return (
                f"{LATE} (not reopened: thread {busy.thread_id!r} is busy, {writer}; send it "
                "again once that run has ended)"
            )
        except StoreError as exc:  # the store's hold could be neither read nor taken
            return (
                f"{LATE} (not reopened: thread {self.info.thread_id!r} could not be held in "
                f"the store: {exc})"
            )
        return None

    async def on_late_command(self, cmd: SteeringCommand) -> bool | str:
        """An END_OF_TURN message after the run completed gives the agent another turn, if
        its budget has a model call left for it: a turn its budget would refuse before any
        request turned the completed answer into ``limit_exceeded`` for a message the model
        never saw; the message fails like any late command instead. So it does below a run
        being cancelled, or that ended cancelled (``_cancelled_above``): that cancel passed
        over the run, completed then, and the turn was work below it that nobody stopped.
        Below a run its operator paused, the turn is held by that pause
        (``join_holds_above``) before it starts. A run whose thread another writer holds
        is not reopened: the message fails saying so (``_thread_busy``)."""
        if (
            cmd.delivery is SteeringDelivery.END_OF_TURN
            and cmd.kind in MESSAGE_KINDS
            and self.handle.status is RunStatus.COMPLETED
            and model_call_left(self.info, self.runtime.runs.tree)
            and not _cancelled_above(self.runtime, self.info)
        ):
            busy = await self._thread_busy()
            if busy is not None:
                return busy
            if not self.handle.status.finished:  # reopened by another message meanwhile
                return True  # (the store was asked): this one queues for that turn
            self.runtime.runs.reopen(self.handle)
            # Its run.started said whose run this is; a trace or a log that closed the run at
            # its end starts the turn from this event alone, so it says it again.
            self.emit(
                RunEvent,
                type="run.resumed",
                status="running",
                agent_id=self.agent.name,
                thread_id=self.info.thread_id,
                kind="agent",
                detail={"another_turn": cmd.correlation_id},
            )
            if self.info.parent_run_id is not None:
                # below a run its operator paused: held before the turn's first boundary, as
                # a run started (or started again under its id) below it is
                await join_holds_above(self.runtime, self.handle)
            self.launch(another_turn=True)
            return True
        return False

    # ------------------------------------------------------------------ endings

    async def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self.handle.inbox.paused = paused
        self.info.status = RunStatus.PAUSED if paused else RunStatus.RUNNING
        self.emit(
            RunEvent, type="run.paused" if paused else "run.resumed", status=self.info.status.value
        )
        await self.runtime.target_changed(self.handle)

    async def _cancel_children(self, reason: str | None, *, immediate: bool) -> None:
        """Cancel every live descendant (the way this run was cancelled) and wait for the
        children that took their cancel to end. A child whose cancel was refused is let go
        (``_send_cancels`` unmarked it): waiting for it held this run, cancelled, until the
        child ended of itself, for ever for one a human's pause holds."""
        await self._send_cancels(self._freeze_subtree(), reason, immediate=immediate)
        runs = self.runtime.runs
        for info in runs.tree.children(self.info.run_id):
            child = runs.get(info.run_id)
            if child is not None:
                await self._wait_unless_let_go(child)

    async def _wait_unless_let_go(self, child: RunHandle) -> None:
        """Wait for ``child`` to end, unless its cancel is refused, also one an ancestor's
        cancel is still on its way with (``_unfreeze`` pokes this run when it lets go)."""
        poke = self._poke = self._poke or asyncio.Event()
        while child.cancelling and not child.status.finished:
            poke.clear()
            ended = asyncio.ensure_future(child.result())
            let_go = asyncio.ensure_future(poke.wait())
            try:
                await asyncio.wait((ended, let_go), return_when=asyncio.FIRST_COMPLETED)
            finally:
                ended.cancel()
                let_go.cancel()

    def _freeze_subtree(self, *, interrupt: bool = False) -> list[RunHandle]:
        """Mark every live descendant not yet being cancelled, parents first, and freeze the
        agent runs among them. Synchronous, so the whole subtree stops at once: cancelling
        one level per scheduled task let the deepest runs work on (and complete).

        A run already marked was walked by whoever marked it, and any child it starts later is
        cancelled when it ends, so its subtree is not walked again. A graph run is sent its
        cancel but not walked into: its driver cancels its own tasks.

        ``interrupt`` (an IMMEDIATE cancel) also marks the agent runs a cancel for their next
        boundary marked before, and walks below them, unless an IMMEDIATE cancel was sent to
        them already: their in-flight model requests are to be cancelled too, and were not,
        waiting for an answer nobody wanted any more.
        """
        runs = self.runtime.runs
        marked: list[RunHandle] = []
        frontier = [self.info.run_id]
        while frontier:
            below: list[str] = []
            for run_id in frontier:
                for info in runs.tree.children(run_id):
                    handle = runs.get(info.run_id)
                    if handle is None:
                        continue
                    run = handle.driver if isinstance(handle.driver, AgentRun) else None
                    if handle.cancelling and not (
                        interrupt and run is not None and not run.interrupted
                    ):
                        continue
                    if not handle.status.finished:
                        handle.cancelling = True
                        marked.append(handle)
                    if run is not None:
                        run.frozen = not handle.status.finished
                        run.interrupted = interrupt or run.interrupted
                        below.append(info.run_id)
            frontier = below
        return marked

    def abandon(self, handles: list[RunHandle], why: str) -> None:
        """Cancel runs below this one (marked, as ``_freeze_subtree`` marks them) that nobody
        will wait for any more — this run ended on a limit or a failure, or the tool call that
        started a child timed out — at once, in-flight model requests too, without waiting
        for them to end."""
        if handles:
            self.runtime.spawn(
                self._send_cancels(handles, None, immediate=True, why=why),
                name=f"abandon-{self.info.run_id}",
            )

    async def _send_cancels(
        self,
        handles: list[RunHandle],
        reason: str | None,
        *,
        immediate: bool,
        why: str = "was cancelled",
    ) -> None:
        """Send each marked run a cancel from this run's agent (an ancestor of each of them):
        IMMEDIATE if this run's was, else one for its next boundary. A run whose cancel is
        refused (by a policy, say) is unfrozen and carries on."""
        delivery = SteeringDelivery.IMMEDIATE if immediate else SteeringDelivery.NEXT_BOUNDARY
        me = self.info.run_id
        actor = SteeringActor.parent_agent(me, self.agent.name)
        for index, handle in enumerate(handles):
            relation = "parent" if handle.info.parent_run_id == me else "ancestor"
            cmd = SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=actor,
                kind=SteeringKind.CANCEL,
                payload={
                    "reason": f"{relation} run {me} {why}" + (f": {reason}" if reason else "")
                },
                delivery=delivery,
            )
            try:
                receipt = await self.runtime.submit(cmd)
            except BaseException as exc:
                for unsent in handles[index:]:
                    _unfreeze(unsent, self.runtime)
                if isinstance(exc, RuntimeClosed):
                    # The runtime began to close after the cancel was queued: its close
                    # cancels every run still going, these included. Nothing is left to send,
                    # nor an error for anyone to read (this is a task of the runtime's).
                    return
                raise
            if not receipt.accepted:
                _unfreeze(handle, self.runtime)

    def _result(self, status: RunStatus, output: Any, error: str | None = None) -> RunResult:
        return RunResult(
            run_id=self.info.run_id,
            status=status,
            output=output,
            error=error,
            usage=self.info.usage.snapshot(),
        )

    async def _end(self, result: RunResult) -> RunResult:
        if self._given_up is not None:  # ended already, without this task
            return self._given_up
        if self._tool_watch is not None:
            self._tool_watch.cancel()
            self._tool_watch = self._watched = None
        return await self._finish_run(result)

    async def _finish_run(self, result: RunResult) -> RunResult:
        self._fail_staged("the run ended before the message reached the model")
        below = self._below
        if below is not None and below.cause is not None:
            # its pause held the runs below it (a detached child outlives it): let go
            below.release(f"ended {result.status.value}")
        # What is still queued fails now, before the run's end event: a reader that stops at
        # that event (a stream, a waiter, a log) must have seen every command of the run end.
        self.handle.inbox.close()
        if self._passed:  # narrowings queued and never applied: take back what they passed down
            for cid in list(self._passed):
                self.withdraw_narrowing(cid, f"run {self.info.run_id} ended first")
        self._answer_open_calls(result)
        # structured output (Agent(output_type=...)) is shown as the text it was read from
        text = result.output if isinstance(result.output, str) else self.last_text
        # the transcript as it ends, every call answered: a conversation to continue
        result = result.model_copy(
            update={
                "messages": list(self.messages),
                "new_from": self.new_from,
                "metadata": self.metadata,
            }
        )
        self.emit(
            RunEvent,
            type=f"run.{result.status.value}",
            status=result.status.value,
            output_summary=summarize(text),
            error=result.error,
            usage=result.usage,
            # who ended it, when a cancel did: a reason says why, not whose it was
            detail={} if self.stopped_by is None else {"by": self.stopped_by.describe()},
        )
        info = self.info
        if info.parent_run_id is not None:
            self.runtime.bus.publish(
                subagent_event(
                    info,
                    self.runtime.runs.tree.get(info.parent_run_id),
                    "subagent.completed",
                    status=result.status.value,
                )
            )
        await self.runtime.finish(self.handle, result)
        return result

    def _answer_open_calls(self, result: RunResult) -> None:
        """Give each tool call of the last model response that got no result (the run ended
        part-way through the batch: a limit, a cancel, a failure, or a response past the token
        budget whose tools never ran) an error result that says so. A transcript with an
        unanswered call is one providers refuse, and a session sends it on its next turn."""
        messages = self.messages
        at = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), -1
        )
        if at < 0 or not messages[at].tool_calls:
            return
        last = messages[at]
        end = start = at + 1  # the results follow the response
        while end < len(messages) and messages[end].role == "tool":
            end += 1
        answered = {m.tool_call_id for m in messages[start:end]}
        why = f"the run ended ({result.status.value}"
        why += f": {result.error})" if result.error else ")"
        stand_ins = [
            ToolResult(call_id=c.id, name=c.name, content=f"not run: {why}", error=True)
            for c in last.tool_calls
            if c.id not in answered
        ]
        messages[end:end] = [r.to_message() for r in stand_ins]

    def emit(self, cls: type[Event], **fields: Any) -> None:
        self.runtime.bus.publish(run_event(self.info, cls, **fields))

    def stream(
        self, mode: str | Iterable[str] = "events", *, subgraphs: bool = False
    ) -> AsyncIterator[Any]:
        """``handle.stream()`` of an agent run: every event of the run and of the runs below it
        from now until the run ends (``mode="messages"``: only the ``model.delta`` pieces)."""
        try:
            modes = {mode} if isinstance(mode, str) else set(mode)
        except TypeError:  # no name nor an iterable of them (5, None): a bare TypeError
            modes = {mode}  # type: ignore[arg-type]
        unknown = modes - {"events", "values", "messages"}
        if unknown or not modes:
            raise ConfigurationError(
                "an agent run streams 'events' (all) or 'messages' (model.delta), not "
                f"{', '.join(shown_repr(m) for m in unknown) if unknown else shown_repr(mode)}"
            )
        return self._events(only_deltas=modes == {"messages"})

    async def _events(self, *, only_deltas: bool) -> AsyncIterator[Event]:
        async with subscribe_run(self.runtime, self.info.run_id) as events:
            async for event in run_events(events, self.handle, only_deltas=only_deltas):
                yield event


def _settings(given: Mapping[str, Any], tokens_left: int | None) -> dict[str, Any]:
    """A request's settings: the agent's (and the run's) ``model_settings``, and the run's
    token budget as ``max_tokens`` (on the last call too: the provider is told what is left),
    or a smaller ``max_tokens`` of theirs."""
    settings = dict(given)
    if tokens_left is not None:
        mine = settings.get("max_tokens")
        small = isinstance(mine, int) and not isinstance(mine, bool) and mine < tokens_left
        settings["max_tokens"] = mine if small else tokens_left
    return settings


def _returned(agent: str, hook: str, value: object, expected: type) -> TypeError:
    """The error for a model call or tool call that came back as something else than its
    result (a middleware that forgot to return ``call_next``'s, a model returning text)."""
    return TypeError(
        f"a {hook} call of agent {agent!r} returned {type(value).__name__}, not a "
        f"{expected.__name__} (its {hook}, or a middleware around it: did a hook forget to "
        "return call_next's result?)"
    )


def _fresh_call_id(call_id: str | None, *taken: Container[str]) -> str:
    """``call_id``, or a new one where it is empty or one of ``taken`` holds it already."""
    if not call_id or any(call_id in ids for ids in taken):
        return _clock.new_id("call")
    return call_id


#: (These two are text, compiled with their first use by ``re``'s cache, not by ``import
#: tinyagents``: most answers have no fence.)
#: A JSON object in a markdown code fence (```json ... ```), the closing fence optional.
_FENCED_JSON = r"(?s)```(?:\w+)?\r?\n(\{.*?\})\s*(?:\r?\n?```|\Z)"
#: Where such a fence can open: ``_FENCED_JSON`` is tried there only.
_FENCE_OPENING = r"```(?:\w+)?\r?\n\{"


#: The reference of the instructions' part in a system message's
#: ``metadata["system_prompt_parts"]`` when the agent has instruction functions (written
#: again before each request); no function's ``__qualname__`` can be it.
INSTRUCTIONS = "<instructions>"


def _joined(parts: Sequence[Sequence[str | None]]) -> str:
    """A system prompt's text from its parts (an empty one adds nothing)."""
    return "\n\n".join(text for _, text in parts if text)


def _no_partial_output(limit: RunLimitExceeded, why: str) -> RunLimitExceeded:
    """``limit``, saying ``why`` a ``stop_with_partial`` run has no partial output."""
    why = f"stop_with_partial: {why}, so there is none to hand back"
    return RunLimitExceeded(
        limit.limit,
        limit.used,
        limit.allowed,
        run_id=limit.run_id,
        detail=f"{limit.detail}; {why}" if limit.detail else why,
    )


def read_output(output_type: type[BaseModel], text: str) -> Any:
    """The ``output_type`` object ``text`` holds, as a run reads its answer (its JSON, in a
    markdown fence or not); raises ``ValidationError`` for text that holds none."""
    output = output_type.model_validate_json(_unfenced(text))
    return unwrapped(output)


def _unfenced(text: str) -> str:
    """The JSON object of a structured answer the model wrapped in a markdown fence (many
    do, asked for JSON), as pydantic-ai reads its native and prompted output; other text as
    it is. An answer that starts with ``{`` is JSON already, whatever fences its strings hold."""
    if text.startswith("{"):
        return text
    # Tried at the first opening only, as pydantic-ai does: a search tried every opening, and
    # each one without a closing scanned to the end of the text (quadratic: a 1 MB answer of
    # unclosed blocks held the event loop for minutes). It finds the same: a ``}`` and fence
    # that close a later opening's JSON close the first one's too.
    opening = re.compile(_FENCE_OPENING).search(text)
    match = re.compile(_FENCED_JSON).match(text, opening.start()) if opening else None
    return match.group(1) if match else text


def _asks_since_the_prompt(
    messages: Sequence[Message], *, since: int, tool: str | None = None
) -> int:
    """How many times the model was asked again for an answer (``OUTPUT_ASKS``: one it sent
    back, or one for an empty answer) since the last prompt (a user message that is no ask
    of ours, or a steering message in whichever role it is rendered; an output tool's call
    sent back, a ``tool`` message, is one ask): per prompt, as pydantic-ai counts its
    retries over the run, so that answers in between (a tool call) do not reset it. Only
    ``messages[since:]`` are the run's own: an ask in the history it continues is another
    run's. ``tool``: only the calls of that output tool sent back count (a ``ToolOutput``
    with its own ``max_retries``, counted per tool as pydantic-ai counts it)."""
    asks = 0
    for index in range(len(messages) - 1, since - 1, -1):
        message = messages[index]
        if message.role == "tool":  # an output tool's call sent back (``A | str``) counts too
            if tool is None or message.name == tool:
                asks += message.metadata.get("retry") == INVALID_OUTPUT
            continue
        if message.role != "user" and "steering" not in message.metadata:
            continue
        asked = message.metadata.get("retry")
        if asked is None:
            break
        if asked in OUTPUT_ASKS and tool is None:
            asks += 1
    return asks


def _answered_nothing(message: Message) -> bool:
    """Whether ``message`` is a model's empty answer: no text and no tool call."""
    return message.role == "assistant" and not message.content and not message.tool_calls


def _refuse_cut_off_calls(response: ModelResponse, request: ModelRequest) -> None:
    """Raise ``ModelResponseError`` for a response that ran out of output tokens
    (``finish_reason`` ``length``) while it wrote a tool call's arguments: they are cut off.
    Their error result had the model write the call again and run out again, without end
    (nothing caps a run's requests by default); pydantic-ai raises ``IncompleteToolCall``.
    Whole arguments are run, whatever the finish_reason."""
    if response.finish_reason != "length":
        return
    cut = [call.name for call in response.tool_calls if call.parse_error is not None]
    if cut:
        sent = request.settings.get("max_tokens", "the model's default")
        raise ModelResponseError(
            f"model {response.model or request.model!r} ran out of output tokens (max_tokens: "
            f"{sent}) while writing the arguments of tool call(s) {cut}, which are cut off; "
            "raise the model's max_tokens (or the run's RunLimits.max_tokens budget)",
            model=response.model,
        )


def subscribe_run(runtime: RunHost, root: str) -> Subscription:
    """A bus subscription to the events of run ``root`` and of the runs below it (open it
    before the run starts to have its ``run.started`` too)."""
    tree = runtime.runs.tree

    def ours(event: Event) -> bool:
        run_id = event.run_id
        return run_id == root or (run_id is not None and tree.is_descendant(run_id, of=root))

    return runtime.bus.subscribe(where=ours)


async def run_events(
    events: Subscription, handle: RunHandle, *, only_deltas: bool = False
) -> AsyncIterator[Event]:
    """What ``events`` (``subscribe_run``) gets until ``handle``'s run ends (its own
    ``run.*`` end event is the last); ``only_deltas``: the ``model.delta`` pieces only."""
    root = handle.run_id

    def keep(event: Event) -> bool:
        return not only_deltas or event.type == "model.delta"

    while not handle.status.finished:
        event = await events.get()
        if event is None:
            return
        if keep(event):
            yield event
        if event.run_id == root and event.type in _RUN_ENDS:
            return
    # It ended before we looked: what it published since we subscribed is queued.
    while (event := events.get_nowait()) is not None:
        if keep(event):
            yield event
        if event.run_id == root and event.type in _RUN_ENDS:
            return


#: The events a run's end publishes (the stream of an agent run stops at its own).
_RUN_ENDS = frozenset(f"run.{status.value}" for status in RunStatus if status.finished)


def _unfreeze(handle: RunHandle, runtime: RunHost) -> None:
    """Let go of a run whose cancel was refused (or never sent): it carries on, and its
    parent, if it is waiting for it to end (``_wait_unless_let_go``), waits no more."""
    handle.cancelling = False
    driver = handle.driver
    if isinstance(driver, AgentRun):
        driver.interrupted = False
    if isinstance(driver, AgentRun) and driver.frozen:
        driver.frozen = False
        driver.wake()
    parent = runtime.runs.get(handle.info.parent_run_id or "")
    waiting = parent.driver if parent is not None else None
    if isinstance(waiting, AgentRun) and waiting._poke is not None:
        waiting._poke.set()


def limit_error(handle: RunHandle, result: RunResult) -> RunLimitExceeded:
    """The error of an agent run that ended ``limit_exceeded``: its own (which limit, used and
    allowed), or, where the run was not hosted here, one that says what its result does."""
    error = getattr(handle.driver, "limit_error", None)
    if isinstance(error, RunLimitExceeded):
        return error
    return RunLimitExceeded(
        "unknown", None, None, run_id=handle.run_id, detail=result.error or None
    )


async def start_agent_run(
    runtime: RunHost,
    agent: AgentRecipe,
    input: str | list[Message],
    *,
    parent: RunHandle | str | None = None,
    thread_id: str | None = None,
    tenant_id: str | None = None,
    run_id: str | None = None,
    limits: RunLimits | None = None,
    tools: list[str] | None = None,
    history: list[Message] | None = None,
    task_id: str | None = None,
    node_id: str | None = None,
    output_type: Any = None,
    model: Model | str | None = None,
    instructions: str | None = None,
    toolsets: Sequence[Any] | None = None,
    deps: Any = None,
    model_settings: Mapping[str, Any] | None = None,
    retries: int | Mapping[str, int] | None = None,
    metadata: Any = None,
    hold_thread: bool = False,
) -> RunHandle:
    """Register a run of ``agent`` (a child of ``parent`` if given) and start its loop.
    ``output_type``, ``model``, ``instructions``, ``toolsets``, ``model_settings``,
    ``retries`` and ``metadata`` are the run's own
    (``Agent.for_run``, with an ``Agent.override`` around the start); ``deps`` is its
    ``ctx.deps`` (unless an override gives them).

    ``history`` (and ``input``, when it is messages) is a conversation to continue; its tool
    calls and results must pair up, else ``ConfigurationError`` and nothing starts. Under a
    parent, ``tools`` naming one taken from a run above is ``ToolsWithheld``, and an agent
    whose every model was taken is ``ModelsWithheld`` (nothing starts either way).

    A run on a thread a session's turn holds is ``ThreadBusy`` (nothing starts);
    ``hold_thread`` (a session's turn) holds ``thread_id`` until the run ends, so it is
    ``ThreadBusy`` too while any other run of the thread has not finished."""
    require_open(runtime)
    _check_start(agent, input, limits, history, thread_id, tools)
    agent = agent.for_run(
        output_type=output_type,
        model=model,
        instructions=instructions,
        toolsets=toolsets,
        model_settings=model_settings,
        retries=retries,
        metadata=metadata,
    )
    parent_info = _parent_info(runtime, parent)
    granted = frozenset(agent.tools)
    if tools is not None:
        unknown = sorted(set(tools) - granted)
        if unknown:
            raise UnknownTargetError(
                f"agent {agent.name!r} has no tools {unknown}; it has {sorted(granted)}"
            )
        granted = frozenset(tools)
    withheld = withheld_below(parent_info)
    if withheld["withheld_tools"]:
        if tools is not None and parent_info is not None:
            _check_not_withheld(agent.name, tools, parent_info)
        # taken from a run above it by constrain_tools: it runs without them (with no tool
        # at all if that is all it had; tools are optional, unlike a model)
        granted = granted - withheld["withheld_tools"]
    run_limits = limits or agent.limits
    # without a list of its own the run may use its agent's model only: constrain_model
    # can only narrow, so it cannot switch the run to a model its agent never named
    models = agent.models if agent.models is not None else (agent.model.name,)
    if parent_info is not None and withheld["withheld_models"]:
        models = _unwithheld(agent.name, models, parent_info)
    if parent_info is not None:
        above = runtime.runs.tree.ancestors(parent_info.run_id)
        run_limits = child_limits(run_limits, parent_info, above)
    info = RunInfo(
        run_id=_clock.new_id("r") if run_id is None else run_id,  # "" is refused, not replaced
        parent_run_id=parent_info.run_id if parent_info else None,
        # its place in the tree, as registering sets it: the claim of its id saves it so
        root_run_id=parent_info.root_run_id if parent_info else "",
        depth=parent_info.depth + 1 if parent_info else 0,
        thread_id=thread_id,
        agent_id=agent.name,
        task_id=task_id,
        node_id=node_id,
        tenant_id=(
            tenant_id
            if tenant_id is not None
            else (parent_info.tenant_id if parent_info else "default")
        ),
        kind="agent",
        tools=granted,
        models=models,
        **withheld,
        limits=run_limits,
    )
    info.usage.started_at = _clock.monotonic()
    messages, own_prompt = _initial_messages(agent, input, history)
    handle = RunHandle(info, submitter=runtime)
    run = AgentRun(runtime, agent, handle, messages, agent.deps_for_run(deps))
    run.own_prompt = own_prompt
    if history:  # the messages after the history (and the run's own system prompt) are new
        run.new_from = own_prompt + len(history)
    run.holds_thread = hold_thread
    handle.driver = run
    handle.policies = [
        *(SteeringHook(m) for m in agent.middleware if overrides(m, "steering")),
        apply.AgentCommandCheck(run),
    ]
    # A run started under an id it had before (a restart after a crash) gets back the steering
    # its earlier incarnation applied; a new id has nothing in the log. (What waited for the
    # runs that incarnation started fails when this one ends: ``Runtime.finish``.) With a
    # durable store a fresh id is claimed too: killed before its first snapshot, the run is
    # in the store, so what it accepted waits for it to be started again under its id.
    # Its thread is taken in ``RunHost.take_thread``'s two halves, the claim between them:
    # this runtime's before anything awaits (of two starts at once, one gets it), the store's
    # once the run's id is claimed.
    if thread_id is not None:
        runtime.runs.take_thread(info, hold=hold_thread)
    try:
        applied = (
            await runtime.applied_commands(info) if run_id is not None or runtime.durable else []
        )
    except BaseException:
        if thread_id is not None:
            await runtime.let_go_of_thread(info)
        raise
    try:
        if thread_id is not None:  # with a durable store: in the store too, once claimed
            await runtime.hold_thread(info, hold=hold_thread)
        run.earlier = applied
        restored = apply.restore(run, applied)
        pause = holding_pause(applied, runs_above(runtime, info.parent_run_id)) if applied else None
        if pause is not None:  # an operator's pause held it: it comes back paused
            run.paused = True
            run.pauses.restored(pause, holding=True)
            info.status = RunStatus.PAUSED
            restored.append(pause)
        if parent_info is not None:  # it may have ended while the log was read
            check_parent_open(parent_info)
        await runtime.register(handle)
    except BaseException:
        # refused (a parent of another tenant or that has ended, the runtime closing) or
        # cancelled: the id's claim in the store, made by applied_commands, must not keep
        # other runtimes off it
        if thread_id is not None:
            await runtime.let_go_of_thread(info)
        await runtime.unclaim(info.run_id)
        raise
    if pause is not None:
        handle.inbox.paused = True
        run.holding_below().hold(pause)  # the children it starts while so held start paused
    run.emit(
        RunEvent,
        type="run.started",
        status="running",
        agent_id=agent.name,
        thread_id=thread_id,
        kind="agent",
        detail={
            "restored_steering": [
                {"correlation_id": c.correlation_id, "kind": c.kind.value} for c in restored
            ]
        }
        if restored
        else {},
    )
    if pause is not None:
        run.emit(
            RunEvent,
            type="run.paused",
            status="paused",
            detail=restored_pause_detail(pause),
        )
    if parent_info is not None:
        runtime.bus.publish(subagent_event(info, parent_info, "subagent.started", status="running"))
        _join_a_cancelled_parent(runtime, handle, run)
        if not handle.cancelling:
            await join_holds_above(runtime, handle)
    run.messages = captured(run.messages)  # capture_run_messages(): the block's list
    run.launch()
    return handle


async def _no_exit(
    call: Callable[[ModelRequest], Awaitable[ModelResponse]],
    request: ModelRequest,
    answer: asyncio.Future[ModelResponse],
) -> None:
    """The model call, in a task of its own, its outcome set on ``answer`` (unless the run
    stopped waiting for it): a ``SystemExit`` from it (a model or middleware calling
    ``sys.exit``) would end the event loop under every run of the runtime; it fails this run
    instead. (The call is made here: a task cancelled before it starts leaves no coroutine
    never awaited.)"""
    try:
        response = await call(request)
    except SystemExit as exc:
        error = RuntimeError(f"the model call tried to exit the process (SystemExit: {exc})")
        error.__cause__ = exc
        settle(answer, error=error)
    except asyncio.CancelledError as exc:
        if answer.done():  # cancelled because the run stopped waiting: nobody to tell
            raise
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            answer.cancel()  # cancelled from outside the run (a middleware's, a test's)
            raise
        settle(answer, error=exc)  # raised by the model of itself
    except BaseException as exc:  # GeneratorExit too: the run decides what it means
        settle(answer, error=exc)
        if isinstance(exc, KeyboardInterrupt):
            raise  # the user stopping the program goes on
        # any other (a library's own BaseException) is the run's to answer, as it does: raised
        # here too, it was also this task's exception, which nobody retrieves
    else:
        settle(answer, result=response)


#: How long a run's cancellation may take before the run ends without its task (a tool whose
#: cleanup never finishes): see ``AgentRun._watch_tool``; ``Runtime.close`` has its own.
CANCEL_GRACE_S = 1.0

#: Calls the run stopped waiting for (cancelled, ending alone): kept until they end, as asyncio
#: keeps only weak references to tasks.
_LET_GO: set[asyncio.Task[Any]] = set()


def let_go(task: asyncio.Task[Any]) -> None:
    """Stop waiting for ``task``: cancel it (once more) and keep it until it ends, whenever
    that is (a graph step's node task left behind too: ``graph/parallel.py``)."""
    task.cancel()
    _LET_GO.add(task)
    task.add_done_callback(_LET_GO.discard)


def _join_a_cancelled_parent(runtime: RunHost, handle: RunHandle, run: AgentRun) -> None:
    """A child started by a run whose cancel is on its way down the tree (a tool that starts
    one more child after it) is frozen from its start and sent its cancel like its elder
    siblings: it does no work at all."""
    parent = runtime.runs.get(handle.info.parent_run_id or "")
    parent_run = parent.driver if parent is not None else None
    if parent is None or not isinstance(parent_run, AgentRun):
        return
    if parent_run.passed_down is not None:
        reason, immediate = parent_run.passed_down
    elif parent.cancelling:
        # the parent's own ancestor is cancelling it, the way it marked it: an IMMEDIATE
        # cancel marks the parent interrupted, and its children were sent IMMEDIATE ones
        reason, immediate = None, parent_run.interrupted
    else:
        return
    handle.cancelling = run.frozen = True
    runtime.spawn(
        parent_run._send_cancels([handle], reason, immediate=immediate),
        name=f"cancel-late-child-{handle.run_id}",
    )


def _cancelled_above(runtime: RunHost, info: RunInfo) -> bool:
    """Whether a run above ``info``'s is being cancelled (its cancel passed down or applied,
    or itself marked by a cancel from further up) or ended ``cancelled``: a cancel reaches
    every run below it, so none of them is given another turn."""
    runs = runtime.runs
    above = info.parent_run_id
    while above is not None:
        handle = runs.get(above)
        if handle is None:  # forgotten: what it was is not known here any more
            return False
        run = handle.driver
        if (
            handle.cancelling
            or handle.status is RunStatus.CANCELLED
            or (
                isinstance(run, AgentRun)
                and (run.passed_down is not None or run.stopped_by is not None)
            )
        ):
            return True
        above = handle.info.parent_run_id
    return False


def cancel_run_task(handle: RunHandle, why: str) -> None:
    """Cancel a run's task (saying ``why``) from the code that started it (a graph's agent
    node cancelled with its graph): the run ends ``cancelled``, and if a tool's cleanup holds
    its task, without it after ``CANCEL_GRACE_S`` (``AgentRun._watch_tool``)."""
    task = handle.task
    if task is None or task.done():
        return
    task.cancel(why)
    if isinstance(handle.driver, AgentRun):
        handle.driver._watch_tool(why)


def abandon_child(runtime: RunHost, handle: RunHandle, why: str) -> None:
    """Cancel a run whose caller stopped waiting for it (the tool call that started it timed
    out or was cancelled, a ``SubAgent.invoke`` or session turn whose caller was cancelled),
    at once: it must not work on, and spend, for nobody. A child of an agent run is
    cancelled by that run's agent; any other run by its handle's own operator."""
    parent = runtime.runs.get(handle.info.parent_run_id or "")
    parent_run = parent.driver if parent is not None else None
    if handle.status.finished or handle.cancelling:
        return
    if not isinstance(parent_run, AgentRun):
        runtime.spawn(_cancel_abandoned(handle, why), name=f"abandon-{handle.run_id}")
        return
    handle.cancelling = True
    if isinstance(handle.driver, AgentRun):
        handle.driver.frozen = handle.driver.interrupted = True
    parent_run.abandon([handle], why)


async def _cancel_abandoned(handle: RunHandle, why: str) -> None:
    """Cancel a run nobody waits for, at once. A runtime that began to close meanwhile (the
    private one of ``Agent.run_stream`` a reader left early) cancels every run still going
    itself: its ``RuntimeClosed`` here is nothing to report, and, raised in this task nobody
    awaits, asyncio reported it as "Task exception was never retrieved"."""
    try:
        await handle.cancel(why, immediate=True, check=False)
    except RuntimeClosed:
        return


def _parent_info(runtime: RunHost, parent: RunHandle | str | None) -> RunInfo | None:
    run_id = parent_run_id(parent)
    if run_id is None:
        return None
    handle = runtime.runs.get(run_id)
    if handle is None:
        raise UnknownTargetError(f"parent run {run_id} is not registered in this runtime")
    check_parent_open(handle.info)
    return handle.info


def _unwithheld(name: str, models: tuple[str, ...], parent: RunInfo) -> tuple[str, ...]:
    """The models of a child's agent (under ``parent``) that no run above it was narrowed
    away from (by ``constrain_model``); raises ``ModelsWithheld`` when none is left."""
    left = tuple(m for m in models if m not in parent.withheld_models)
    if not left:
        allowed = f" (allowed there now: {list(parent.models)})" if parent.models else ""
        raise ModelsWithheld(
            f"agent {name!r} cannot run under run {parent.run_id}: its models {list(models)} "
            f"were all taken away from that run or one above it by constrain_model{allowed}; "
            "a child gets no more than its parent was left with"
        )
    return left


def _check_not_withheld(name: str, tools: list[str], parent: RunInfo) -> None:
    """Refuse (``ToolsWithheld``) a child of ``parent`` started naming tools a run above it
    was narrowed away from (by ``constrain_tools``): the caller asked for them by name."""
    taken = sorted(set(tools) & parent.withheld_tools)
    if taken:
        raise ToolsWithheld(
            f"agent {name!r} cannot be started under run {parent.run_id} with tools {taken}: "
            "they were taken away from that run or one above it by constrain_tools; a child "
            "gets no more than its parent was left with. Start it without them "
            f"(allowed there now: {sorted(parent.tools or ())})"
        )


def _check_start(
    agent: object,
    input: object,
    limits: object,
    history: object,
    thread_id: object,
    tools: object,
) -> None:
    """Refuse arguments of the wrong kind before a run is registered: each one started a run
    that failed at once with an AttributeError or TypeError from inside the loop."""
    if not isinstance(getattr(agent, "tools", None), Mapping):
        raise ConfigurationError(
            f"rt.start takes an Agent, got {type(agent).__name__}; start a compiled graph "
            "with rt.start_graph"
        )
    check_limits(limits)
    if not isinstance(input, str):
        _check_messages(input, "input", "text or a list of Messages")
    if history is not None:
        _check_messages(history, "history", "a list of Messages")
    if thread_id is not None:
        check_id(thread_id, "thread_id")
    if tools is not None:  # a grant of some of the agent's tools, by name
        if not isinstance(tools, (list, tuple, set, frozenset)):
            raise ConfigurationError(
                f"tools must be a list of tool names, got {type(tools).__name__}"
            )
        for index, name in enumerate(tools):
            if not isinstance(name, str):
                raise ConfigurationError(
                    f"tools[{index}] must be a tool name, got {type(name).__name__}"
                )


def _first_kept(before: Sequence[Message], after: Sequence[Message], since: int, none: int) -> int:
    """Where ``before[since:]`` starts in ``after``, a history processor's list: at the
    first of them it kept (the same object), else ``none``."""
    ours = {id(m) for m in before[since:]}
    return next((i for i, m in enumerate(after) if id(m) in ours), none)


def _check_messages(value: object, name: str, expected: str) -> None:
    if not isinstance(value, (list, tuple)):
        raise ConfigurationError(f"{name} must be {expected}, got {type(value).__name__}")
    for index, item in enumerate(value):
        if not isinstance(item, Message):
            raise ConfigurationError(
                f"{name}[{index}] must be a Message, got {type(item).__name__}; e.g. "
                'Message(role="user", content="...")'
            )
        if item.role not in _ROLES:
            raise ConfigurationError(
                f"{name}[{index}] has role {item.role!r}; a Message's role is one of "
                + ", ".join(map(repr, _ROLES))
            )
        if not isinstance(item.content, str):
            raise ConfigurationError(
                f"{name}[{index}] has content of type {type(item.content).__name__}; a "
                "Message's content is text ('' for none)"
            )
        if not isinstance(item.metadata, dict):  # read with .get as the run starts
            raise ConfigurationError(
                f"{name}[{index}] has metadata of type {type(item.metadata).__name__}; a "
                "Message's metadata is a dict ({} for none)"
            )
        if item.name is not None and not isinstance(item.name, str):  # sent to the provider
            raise ConfigurationError(
                f"{name}[{index}] has name of type {type(item.name).__name__}; a Message's "
                "name is text (or None)"
            )
        calls = item.tool_calls
        if isinstance(calls, (list, tuple)):
            wrong = [type(c).__name__ for c in calls if not isinstance(c, ToolCall)]
            kind = f"a list holding a {wrong[0]}" if wrong else None
        else:
            kind = type(calls).__name__
        if kind is not None:
            raise ConfigurationError(
                f"{name}[{index}] has tool_calls of {kind}; a Message's tool_calls are a list "
                "of ToolCall(id, name, args) ([] for none)"
            )


_ROLES: tuple[str, ...] = get_args(Role)


def _offered_tool(allowed: Mapping[str, Tool], available: list[str], name: str) -> Tool | None:
    """The tool a middleware's renamed call names, if the request offered it (``available``:
    what steering left and no ``prepare`` hid); None answers it as a call to a tool the run
    does not have."""
    return allowed.get(name) if name in available else None


def _initial_messages(
    agent: AgentRecipe, input: str | list[Message], history: list[Message] | None
) -> tuple[list[Message], bool]:
    """The run's first messages, and whether the first is its own system prompt (written
    with its system prompt functions as it starts: ``AgentRun.own_prompt``)."""
    messages: list[Message] = []
    # the agent's instructions lead, unless the conversation carries a system prompt of its
    # own (a session's history, from its first turn; an input given as messages): put before
    # it, two system messages were refused by templates that allow one leading (llama.cpp).
    # Its own prompt is a leading system message: one further in (a steering message
    # rendered as 'system') is no prompt, and the instructions were dropped for it.
    given = [*(history or ()), *(() if isinstance(input, str) else input)]
    own_prompt = _own_prompt(agent, given)
    if own_prompt:
        # with system prompt functions, even without instructions: the run writes them in
        messages.append(Message(role="system", content=agent.instruction_text))
    if history:
        messages.extend(map(_args_read, history))
    if isinstance(input, str):
        messages.append(Message(role="user", content=input))
    else:
        messages.extend(map(_args_read, input))
    if not messages:
        # providers refuse an empty conversation (OpenAI: messages must not be empty), and
        # only once the run had started; pydantic-ai refuses it before its first request
        raise ConfigurationError(
            f"agent {agent.name!r} has nothing to send: no instructions, no history and no "
            "input; give the run a prompt (text or a list of Messages)"
        )
    _check_tool_results(messages)
    return messages, own_prompt


def _own_prompt(agent: AgentRecipe, given: Sequence[Message]) -> bool:
    """Whether the run writes its system prompt: the conversation brings none of its own,
    and the agent has instructions or system prompt functions."""
    own = agent.instruction_text or agent.instruction_functions or agent.system_prompts
    return bool(own) and not (given and given[0].role == "system")


def _args_read(message: Message) -> Message:
    """``message`` with the arguments of each of its tool calls given as JSON text (or
    ``None`` for none, as pydantic-ai's ``ToolCallPart`` takes them) read into the object, as
    a response's are (``_own_call_ids``): a history's call sent on as text reached the
    provider with ``{}`` for its arguments. The caller's message is not changed."""
    calls = message.tool_calls
    if not any(c.args is None or isinstance(c.args, str) for c in calls):
        return message
    read = [
        parse_arguments(c.id, c.name, c.args)
        if (c.args is None or isinstance(c.args, str)) and c.parse_error is None
        else c
        for c in calls
    ]
    return dataclasses.replace(message, tool_calls=read)


def _check_tool_results(messages: Sequence[Message]) -> None:
    """Refuse a conversation (a run's history and input) whose tool calls and results do not
    pair up, before the run starts: each call of an assistant message is answered by a
    ``tool`` message with its id right after it, and a ``tool`` message answers such a call.
    Providers refuse anything else (OpenAI: tool calls must be followed by their results),
    and they did so only once the run had started; pydantic-ai refuses a new prompt after
    unprocessed tool calls the same way. A run's own transcript always pairs up."""
    pending: list[str] = []
    for index, message in enumerate(messages):
        if message.role == "tool":
            if message.tool_call_id not in pending:
                raise ConfigurationError(
                    f"message {index} is a tool result for call {message.tool_call_id!r}, which "
                    "is not a call of the assistant message before it (or was answered "
                    "already); a tool message must follow the call it answers"
                )
            pending.remove(message.tool_call_id)
            continue
        _refuse_unanswered(pending, index)
        pending = [c.id for c in message.tool_calls] if message.role == "assistant" else []
    _refuse_unanswered(pending, len(messages))


def _refuse_unanswered(pending: list[str], index: int) -> None:
    if pending:
        raise ConfigurationError(
            f"the conversation has tool calls without a result before message {index}: "
            f"{pending}; answer each with Message(role='tool', tool_call_id=<its id>, "
            "content=...) right after the assistant message, or leave that message out"
        )


def _text_arg(function: FunctionTool) -> str:
    """The name of a ``TextOutput`` function's one text argument (its schema's one property)."""
    return str(next(iter(function.parameters["properties"])))


def _with_output_prompt(messages: Sequence[Message], prompt: str | None) -> list[Message]:
    """The messages a request sends: the run's, with a ``PromptedOutput``'s schema prompt at
    the end of the system prompt (a system message of its own first, without one). Written
    into each request, as pydantic-ai writes its instructions, not into the transcript."""
    sent = list(messages)
    if prompt is None:
        return sent
    if sent and sent[0].role == "system":
        first = sent[0]
        content = f"{first.content}\n\n{prompt}" if first.content else prompt
        sent[0] = Message(role="system", content=content, metadata=dict(first.metadata))
    else:
        sent.insert(0, Message(role="system", content=prompt))
    return sent


def _argument_problems(exc: InvalidArguments, whole: str = "arguments") -> str:
    """What is wrong with an output function's arguments (or a ``TextOutput``'s text), said
    as a model output tool's problems are (not a tool call's "call it again" wording)."""
    cause = exc.__cause__
    if isinstance(cause, ValidationError):
        return validation_problems(cause, whole=whole)
    return message_of(exc)
