"""``Agent``: a model, instructions, tools and limits — the recipe of an agent run."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, overload

from pydantic import BaseModel, PydanticUserError

from tinyagents import _clock
from tinyagents._bounds import whole_number
from tinyagents.errors import (
    ConfigurationError,
    InvalidCommandError,
    SyncInAsyncError,
    kind_of,
)
from tinyagents.harness import _litellm
from tinyagents.harness.context import RunFunction
from tinyagents.harness.limits import check_limits
from tinyagents.harness.loop import (
    abandon_child,
    run_events,
    start_agent_run,
    subscribe_run,
)
from tinyagents.harness.middleware import Middleware
from tinyagents.harness.model import Model
from tinyagents.harness.output import OutputSpec, output_json_schema, output_spec_of
from tinyagents.harness.render import SteeringRenderer
from tinyagents.harness.tools import FunctionTool, Tool, check_retries
from tinyagents.harness.toolsets import Toolset, combined_tools, function_tool, toolsets_of
from tinyagents.protocol import SteeringActor
from tinyagents.protocol.ids import name_problem
from tinyagents.protocol.text import shows_nothing
from tinyagents.runs.host import RunHost, check_runtime, private_host
from tinyagents.runs.limits import RunLimits

if TYPE_CHECKING:
    from tinyagents.events.models import Event
    from tinyagents.runs.handle import RunResult

_F = TypeVar("_F", bound=Callable[..., Any])


class _Unset:
    """No value given (``None`` is one: ``override(instructions=None)``, ``deps=None``)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class Agent:
    """An agent definition. Runs are started with ``Runtime.start(agent, input)``.

    ``model`` is a ``Model`` or a litellm model string (``"openai/gpt-4o-mini"``); ``models``
    optionally lists the model names the run may be switched between (``constrain_model``
    narrows it; the first allowed one is used). Without it a run may use ``model``'s name
    only, so no steering command can switch it to another model. ``output_type`` (a pydantic
    model class, or a union of them: ``A | B``, ``[A, B]``) asks for structured output: the
    run's output is the validated object (of the member the answer names); another type
    (``int``, ``list[A]``) is the ``response`` of an object, as pydantic-ai wraps it. A union with
    ``str`` (``A | str``) lets the model answer in text too: its models are offered as
    output tools (pydantic-ai's ``final_result``), and no ``response_format`` is sent. An
    output function (``output_type=fn``), ``ToolOutput``, ``TextOutput``, ``NativeOutput`` and
    ``PromptedOutput`` are read as pydantic-ai reads them (docs/harness.md, "Output functions and markers").
    ``output_retries`` (default 1, as pydantic-ai's) is how many times a final answer may be
    sent back per prompt: output that does not validate, or an ``@agent.output_validator``
    raising ``ModelRetry``. ``@agent.system_prompt`` adds a system prompt function.
    ``retries`` is pydantic-ai's ``Agent(retries=...)``: an int caps the failed calls in a
    row of each tool without a cap of its own (``Tool(retries=...)``) and is the output budget
    too, unless ``output_retries`` is given; a dict ``{"tools": ..., "output": ...}`` (its
    ``AgentRetries``) sets the budgets it names. A tool's cap defaults to None: no cap.
    ``toolsets`` (pydantic-ai's: ``FunctionToolset`` and its ``prefixed``, ``filtered``,
    ``renamed`` wrappers) add their tools after ``tools``; a name given twice is refused.
    ``model_settings`` (pydantic-ai's) are provider settings each model request carries.
    ``agent.override(...)`` changes the runs started within a ``with`` block.
    """

    def __init__(
        self,
        name: str,
        model: Model | str,
        *,
        instructions: str | None = "",
        tools: Sequence[Tool | Any] = (),
        limits: RunLimits | None = None,
        middleware: Sequence[Middleware] = (),
        models: Sequence[str] | None = None,
        renderer: SteeringRenderer | None = None,
        description: str = "",
        unknown_tools: Literal["error_result", "fail"] = "error_result",
        supervisor: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
        retries: int | Mapping[str, int] | None = None,
        toolsets: Sequence[Toolset] = (),
        model_settings: Mapping[str, Any] | None = None,
    ) -> None:
        check_agent_name(name)
        if unknown_tools not in ("error_result", "fail"):
            raise ConfigurationError(
                f"unknown_tools must be 'error_result' or 'fail', got {unknown_tools!r}"
            )
        # Duck-typed, as compile(supervisor=...) does: the supervision layer sits above the
        # harness. A YAML path or a dict here left the agent unsupervised without a word.
        if supervisor is not None and (
            isinstance(supervisor, type) or getattr(supervisor, "check_graph", None) is None
        ):
            raise ConfigurationError(
                f"agent {name!r}: supervisor= takes a SupervisorSpec, got "
                f"{kind_of(supervisor)}; load one with SupervisorSpec.from_yaml(<file or "
                "YAML text>) or build one with SupervisorSpec(rules=[...], ...)"
            )
        instructions = _instructions(name, instructions)
        check_limits(limits)
        # text for str (pydantic-ai's default), a model class, or a union's envelope class;
        # output tools (a union with str's models, output functions, ToolOutput markers)
        spec = _output_spec(name, output_type)
        retries, output_retries = _budgets(name, retries, output_retries)
        if renderer is not None and not callable(getattr(renderer, "render", None)):
            raise ConfigurationError(
                f"agent {name!r}: renderer must be a SteeringRenderer, got "
                f"{type(renderer).__name__}; e.g. renderer=SteeringRenderer(role='system')"
            )
        if not isinstance(description, str):
            raise ConfigurationError(
                f"agent {name!r}: description must be text (what the agent does, shown to a "
                f"parent model), got {type(description).__name__}"
            )
        self.name = name
        # a model string (or no model) loads LiteLLMModel's module (tinyagents.harness._litellm)
        self.model = model if isinstance(model, Model) else _litellm.as_model(model)
        self.instructions = instructions
        #: Provider settings each model request of its runs carries (``ModelRequest.settings``,
        #: pydantic-ai's ``model_settings``): a run's ``model_settings=`` are merged over them.
        self.model_settings = _model_settings(name, model_settings)
        #: The tools given as ``tools=`` (``override(tools=...)`` replaces them for a run).
        self.function_tools = _tool_dict(name, tools)
        #: The toolsets given as ``toolsets=`` (``override(toolsets=...)`` replaces them).
        self.toolsets = toolsets_of(f"agent {name!r}", toolsets)
        #: Every tool of the agent, by name: its own, then its toolsets'.
        self.tools = _with_toolsets(name, self.function_tools, self.toolsets)
        _check_output_tool_names(name, self.tools, spec.tools)
        _check_forced_tool(name, self.model, self.tools)
        check_agent = getattr(supervisor, "check_agent", None)
        if check_agent is not None:  # a rule for a tool the agent lacks would never fire
            check_agent(name, frozenset(self.tools))
        self.limits = limits or RunLimits()
        self.middleware = _middleware_list(middleware)
        self.models = _model_names(models) if models else None
        self.renderer = renderer or SteeringRenderer()
        self.description = description
        #: What a call to a tool the run does not have does: an error result the model can
        #: correct itself from (default), or ending the run ``failed`` with a ``ToolError``.
        self.unknown_tools = unknown_tools
        #: A ``SupervisorSpec`` watching this agent's runs (hosted by a ``Runtime``); it
        #: replaces the runtime's spec for them.
        self.supervisor = supervisor
        self._take_output(spec, str if output_type is None else output_type)
        #: How many times a final answer may be sent back per prompt (invalid output, or an
        #: output validator's ``ModelRetry``) before the run ends ``failed``.
        self.output_retries = output_retries
        #: How many failed calls in a row each tool may have (a tool's own ``retries`` wins):
        #: one more ends the run ``failed``. None (the default): no cap.
        self.retries = retries
        #: ``@agent.output_validator`` functions, run in order on each final answer.
        self.output_validators: list[RunFunction] = []
        #: ``@agent.system_prompt`` functions and, for a ``dynamic=True`` one, its reference
        #: (its ``__qualname__``) in the system message's ``metadata["system_prompt_parts"]``.
        self.system_prompts: list[tuple[RunFunction, str | None]] = []
        # what ``override`` set in this context (shared by this agent's per-run copies)
        self._overrides: ContextVar[dict[str, Any] | None] = ContextVar(
            f"tinyagents.agent.{name}.override", default=None
        )

    @overload
    def tool(self, fn: Callable[..., Any], /) -> FunctionTool: ...
    @overload
    def tool(
        self,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        sequential: bool = False,
    ) -> Callable[[Callable[..., Any]], FunctionTool]: ...
    def tool(self, fn: Callable[..., Any] | None = None, /, **kwargs: Any) -> Any:
        """Add a function taking the run's context (``ctx: RunContext``) as a tool of this
        agent, as pydantic-ai's ``@agent.tool``: ``@agent.tool`` or ``@agent.tool(name=...,
        description=..., timeout_s=..., retries=..., sequential=...)`` (``@tool``'s
        arguments). Returns the ``FunctionTool``. A function without the context is refused
        (``tool_plain`` adds it), and so is a tool name the agent has."""
        return self._decorate(fn, takes_ctx=True, **kwargs)

    @overload
    def tool_plain(self, fn: Callable[..., Any], /) -> FunctionTool: ...
    @overload
    def tool_plain(
        self,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        sequential: bool = False,
    ) -> Callable[[Callable[..., Any]], FunctionTool]: ...
    def tool_plain(self, fn: Callable[..., Any] | None = None, /, **kwargs: Any) -> Any:
        """``tool`` for a function that does not take the run's context (pydantic-ai's
        ``@agent.tool_plain``); one that does is refused."""
        return self._decorate(fn, takes_ctx=False, **kwargs)

    def _decorate(self, fn: Callable[..., Any] | None, *, takes_ctx: bool, **kwargs: Any) -> Any:
        def add(f: Callable[..., Any]) -> FunctionTool:
            made = function_tool(f, takes_ctx=takes_ctx, **kwargs)
            if made.name in self.tools:  # pydantic-ai's words
                raise ConfigurationError(
                    f"agent {self.name!r}: Tool name conflicts with existing tool: {made.name!r}"
                )
            _check_output_tool_names(self.name, {made.name: made}, self.output_tools)
            tools = {**self.function_tools, made.name: made}
            # a new dict: a run already started keeps the tools it was granted
            every = _with_toolsets(self.name, tools, self.toolsets)
            _check_forced_tool(self.name, self.model, every)
            self.function_tools, self.tools = tools, every
            return made

        return add(fn) if fn is not None else add

    def output_validator(self, fn: _F, /) -> _F:
        """Decorate a function that checks (and may change) the run's output, as
        pydantic-ai's ``@agent.output_validator``: ``(output)`` or ``(ctx, output)``, sync or
        async. What it returns is the output; raising ``ModelRetry("why")`` sends the final
        answer back to the model with that message (counted against ``output_retries``, with
        output that does not validate). Validators run in the order they were added, each
        on what the one before returned; any other exception ends the run ``failed``."""
        self.output_validators.append(
            RunFunction(fn, values=1, what="output_validator", agent=self.name)
        )
        return fn

    @overload
    def system_prompt(self, fn: _F, /) -> _F: ...
    @overload
    def system_prompt(self, *, dynamic: bool = False) -> Callable[[_F], _F]: ...
    def system_prompt(self, fn: Callable[..., Any] | None = None, *, dynamic: bool = False) -> Any:
        """Decorate a function whose text joins the run's system prompt, as pydantic-ai's
        ``@agent.system_prompt``: ``()`` or ``(ctx)``, sync or async, called when each run
        starts; None (or "") adds nothing. A run whose conversation brings its own system
        prompt (a history) does not call it, unless it is ``dynamic=True``: then the part it
        wrote in that prompt, when the prompt has one (a transcript of this agent's runs), is
        written again (docs/harness.md, "System prompt functions")."""

        def add(f: Callable[..., Any]) -> Callable[..., Any]:
            hook = RunFunction(f, values=0, what="system_prompt", agent=self.name)
            self.system_prompts.append((hook, hook.name if dynamic else None))
            return f

        return add(fn) if fn is not None else add

    def output_json_schema(self, output_type: Any = None) -> dict[str, Any]:
        """The JSON schema of this agent's output (or of ``output_type``'s, as a run given
        it would have), as pydantic-ai's ``agent.output_json_schema()`` writes it: each type
        the output may be, in serialization mode (a function's return type, ``str`` for
        text), one schema or ``{"anyOf": [...]}`` of them with their ``$defs`` merged. An
        output type an agent would refuse is refused (``ConfigurationError``)."""
        if output_type is None:
            output_type = self.output_spec
        else:
            _output_spec(self.name, output_type)
        return output_json_schema(output_type)

    def for_output_type(self, output_type: Any) -> Agent:
        """This agent as a run given ``output_type=`` runs it (``agent.run(...,
        output_type=...)``, ``rt.start(...)``, pydantic-ai's per-run output type): a copy
        whose output is ``output_type``, read as ``Agent(output_type=...)`` reads it; the
        rest (name, model, tools, limits, system prompts) is this agent's. Refused, as
        pydantic-ai refuses it, when the agent has output validators (they expect its own
        output type), and for an output type the agent would refuse (``ConfigurationError``)."""
        if self.output_validators:
            raise ConfigurationError(
                f"agent {self.name!r}: cannot set a custom run output_type when the agent has "
                "output validators (they expect its own output type); make an Agent with "
                "that output_type and its validators"
            )
        spec = _output_spec(self.name, output_type)
        _check_output_tool_names(self.name, self.tools, spec.tools)
        run_agent = copy.copy(self)
        run_agent.output_validators = []  # one added to the agent later is for its type
        run_agent._take_output(spec, output_type)
        return run_agent

    @contextmanager
    def override(
        self,
        *,
        model: Model | str = UNSET,
        deps: Any = UNSET,
        instructions: str | None = UNSET,
        tools: Sequence[Tool | Any] = UNSET,
        toolsets: Sequence[Toolset] = UNSET,
        model_settings: Mapping[str, Any] | None = UNSET,
    ) -> Iterator[None]:
        """Within the ``with`` block, runs of this agent started in this context (its tasks,
        the runs their tools start) use what is given here instead, as pydantic-ai's
        ``agent.override``: ``model``, ``deps`` (over a run's ``deps=``), ``instructions``
        (the agent's, and a run's ``instructions=``, replaced; None: none; its
        ``@agent.system_prompt`` functions stay), ``tools`` (its ``tools=``) and ``toolsets``
        (its ``toolsets=`` and a run's), ``model_settings`` (its and a run's). An inner ``override`` wins for what it gives; what
        it does not give stays the outer one's. Each value is checked here, as ``Agent(...)``
        checks it (``ConfigurationError``)."""
        given: dict[str, Any] = {}
        if model is not UNSET:
            given["model"] = model if isinstance(model, Model) else _litellm.as_model(model)
        if deps is not UNSET:
            given["deps"] = deps
        if instructions is not UNSET:
            given["instructions"] = _instructions(self.name, instructions)
        if tools is not UNSET:
            given["tools"] = _tool_dict(self.name, tools)
        if toolsets is not UNSET:
            given["toolsets"] = toolsets_of(f"agent {self.name!r}", toolsets)
        if model_settings is not UNSET:
            given["model_settings"] = _model_settings(self.name, model_settings)
        token = self._overrides.set({**(self._overrides.get() or {}), **given})
        try:
            yield
        finally:
            self._overrides.reset(token)

    def for_run(
        self,
        *,
        output_type: Any = None,
        model: Model | str | None = None,
        instructions: str | None = None,
        toolsets: Sequence[Toolset] | None = None,
        model_settings: Mapping[str, Any] | None = None,
    ) -> Agent:
        """This agent as one run of it runs it: its own ``output_type`` (``for_output_type``),
        ``model`` in place of the agent's, ``instructions`` after the agent's (on a line of
        their own, as pydantic-ai joins them), ``toolsets`` beside the agent's, and what an
        ``override`` around the start gives (which wins over them), and ``model_settings``
        merged over the agent's. The agent itself when there is nothing to change."""
        over = self._overrides.get() or {}
        if (
            not over
            and model is None
            and instructions is None
            and toolsets is None
            and model_settings is None
        ):
            return self if output_type is None else self.for_output_type(output_type)
        run_agent = copy.copy(self) if output_type is None else self.for_output_type(output_type)
        chosen = over.get("model", model)
        if chosen is not None:
            run_agent.model = chosen if isinstance(chosen, Model) else _litellm.as_model(chosen)
            if self.models is not None:  # the run's model first: the one it is sent
                name = run_agent.model.name
                run_agent.models = (name, *(m for m in self.models if m != name))
        if "instructions" in over:
            run_agent.instructions = over["instructions"]
        elif instructions is not None:
            extra = _instructions(self.name, instructions)
            run_agent.instructions = "\n".join(filter(None, (self.instructions, extra)))
        if "tools" in over or "toolsets" in over or toolsets is not None:
            run_agent.function_tools = over.get("tools", self.function_tools)
            run_agent.toolsets = over.get(
                "toolsets",
                [
                    *self.toolsets,
                    *toolsets_of(f"agent {self.name!r}", () if toolsets is None else toolsets),
                ],
            )
            run_agent.tools = _with_toolsets(
                self.name, run_agent.function_tools, run_agent.toolsets
            )
            _check_output_tool_names(self.name, run_agent.tools, run_agent.output_tools)
        if "model_settings" in over:
            run_agent.model_settings = over["model_settings"]
        elif model_settings is not None:
            run_agent.model_settings = {
                **self.model_settings,
                **_model_settings(self.name, model_settings),
            }
        _check_forced_tool(self.name, run_agent.model, run_agent.tools)
        return run_agent

    def deps_for_run(self, deps: Any) -> Any:
        """The ``deps`` a run given ``deps`` has: an ``override(deps=...)`` around its start
        wins, as pydantic-ai's does."""
        over = self._overrides.get()
        return over["deps"] if over is not None and "deps" in over else deps

    def _take_output(self, spec: OutputSpec, given: Any) -> None:
        """Make ``spec`` (``output_spec_of`` of ``given``, the output type as given) this
        agent's output: set when it is made, and on a run's copy (``for_output_type``)."""
        #: A pydantic model the final answer must be the JSON of: each request asks for it
        #: (``response_format``) and the run's output is the validated object. For a union,
        #: a ``UnionOutput`` class (its envelope), whose answer's member is the output.
        self.output_type = spec.output_type
        #: The output type as given (``str`` when none was): ``output_json_schema`` reads it.
        self.output_spec: Any = given
        #: The output tools (``OutputTool``), by name: a union with text's models (``Apple |
        #: str``), output functions and ``ToolOutput`` markers, each offered as
        #: ``final_result`` (``final_result_<Name>`` among several) unless named: a call of
        #: one whose arguments validate (and whose function returns) is the run's output.
        self.output_tools = spec.tools
        #: Whether a text answer is output: not with output tools alone (``output_type=fn``,
        #: ``ToolOutput(...)``), where the model is asked to include its answer in a call.
        self.allows_text = spec.allows_text
        #: ``None`` is in the output type's union (``str | None``): an answer of no text and
        #: no tool call is the output ``None``, passed through the output validators.
        self.allows_none = spec.allows_none
        #: ``TextOutput(fn)``'s function (a ``FunctionTool`` of one text argument): a text
        #: answer is passed through it, and its return is the output.
        self.text_function = spec.text_function
        #: Whether ``output_type`` is sent as the ``response_format`` (not for
        #: ``PromptedOutput``), and the schema prompt each request's system prompt ends with.
        self.output_native = spec.native
        self.output_prompt = spec.prompt

    def __repr__(self) -> str:
        return f"<Agent {self.name!r} model={self.model.name!r} tools={list(self.tools)}>"

    async def run(self, input: str, *, runtime: RunHost | None = None, **kwargs: Any) -> RunResult:
        """Run to the end and return the result (a private in-memory runtime if none is given).
        A caller that stops waiting (a timeout around it, a cancel) cancels the run. The
        keyword arguments are ``Runtime.start``'s: ``output_type=`` gives this run its own
        output type (``for_output_type``), ``model=``, ``instructions=`` and ``toolsets=`` its
        own model, more instructions and more tools, ``model_settings=`` merged over the
        agent's (``for_run``), ``deps=`` its ``ctx.deps``,
        ``run_id=``, ``limits=``, ``history=``..."""
        if runtime is None:
            async with private_host() as host:
                return await self.run(input, runtime=host, **kwargs)
        check_runtime(runtime)
        handle = await start_agent_run(runtime, self, input, **kwargs)
        try:
            return await handle.result()
        except BaseException:  # the caller stopped waiting (a timeout around it, a cancel)
            abandon_child(runtime, handle, "its caller stopped waiting for it (Agent.run)")
            raise

    async def run_stream(
        self,
        input: str,
        *,
        runtime: RunHost | None = None,
        messages_only: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[Event]:
        """Run to the end, yielding the events of the run and its children as they happen:
        ``model.delta`` pieces while a streaming model answers (``messages_only=True``: only
        those), tool calls, steering, the run's end. ``RunResult`` is in the last ``run.*``
        event's fields; ``await agent.run(...)`` when only the result matters. Leaving the
        loop early (``break`` then ``aclose()``, or a cancel) cancels the run."""
        if runtime is None:
            async with private_host() as host:
                async for event in self.run_stream(
                    input, runtime=host, messages_only=messages_only, **kwargs
                ):
                    yield event
            return
        check_runtime(runtime)
        # subscribed before the run starts: its run.started is the stream's first event
        run_id = kwargs.pop("run_id", None)
        if run_id is None:  # "" is refused by start_agent_run, as ever, not replaced
            run_id = _clock.new_id("r")
        async with subscribe_run(runtime, run_id) as events:
            handle = await start_agent_run(runtime, self, input, run_id=run_id, **kwargs)
            try:
                async for event in run_events(events, handle, only_deltas=messages_only):
                    yield event
            except BaseException:  # the reader left early (``break``, ``aclose``, a cancel)
                abandon_child(runtime, handle, "its reader stopped (Agent.run_stream)")
                raise
        await handle.result()

    def run_sync(self, input: str, *, runtime: RunHost | None = None, **kwargs: Any) -> RunResult:
        """``run`` for code without an event loop (a script, a REPL): runs it to its end with
        ``asyncio.run`` and returns its ``RunResult``. Takes the same arguments as ``run``.

        Inside a running event loop (async code, a notebook cell) it raises
        ``SyncInAsyncError`` and runs nothing: ``await agent.run(...)`` there.
        """
        SyncInAsyncError.refuse_inside_a_loop(f"agent {self.name!r}", "await agent.run(...)")
        return asyncio.run(self.run(input, runtime=runtime, **kwargs))


def check_agent_name(name: object, *, who: str = "") -> str:
    """``name`` if an agent (or a sub-agent: ``who`` says whose) may have it, else a
    ``ConfigurationError``: text that shows something (a name of spaces or a zero-width space
    was listed, logged and steered as no name), printable (``name_problem``), and one the
    actor of its runs' steering can carry."""
    if not name:
        raise ConfigurationError(f"{who}an Agent needs a non-empty name")
    if not isinstance(name, str):
        raise ConfigurationError(f"{who}an Agent's name is text, got {type(name).__name__}")
    if (problem := name_problem(name)) is not None:
        raise ConfigurationError(
            f"{who}an agent's name is printable text: {name!a} is not ({problem})"
        )
    _check_actor_name(name)
    if shows_nothing(name):
        raise ConfigurationError(
            f"{who}an agent's name {name!a} shows no visible character: name it with text "
            "a listing or a log line shows"
        )
    return name


def _instructions(name: str, instructions: object) -> str:
    """``instructions`` as the system prompt's text (None: none, as "")."""
    if instructions is None:
        return ""
    if not isinstance(instructions, str):
        raise ConfigurationError(
            f"agent {name!r}: instructions must be text (the system prompt), got "
            f"{type(instructions).__name__}; for instructions that change per run, add a "
            "function with @agent.system_prompt, or steer the run (add_instruction)"
        )
    return instructions


#: Settings a model request carries in fields of its own (the conversation, the tools, the
#: model's name) or that the model decides (whether it streams): not provider settings.
_NOT_SETTINGS = ("messages", "model", "stream", "tools")


def _model_settings(name: str, settings: object) -> dict[str, Any]:
    """``settings`` as a dict of provider settings (None: none)."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping) or not all(isinstance(k, str) for k in settings):
        raise ConfigurationError(
            f"agent {name!r}: model_settings is a dict of provider settings, e.g. "
            f"{{'temperature': 0}}; got {kind_of(settings)}"
        )
    taken = sorted(set(settings) & set(_NOT_SETTINGS))
    if taken:
        raise ConfigurationError(
            f"agent {name!r}: model_settings cannot set {taken}: a request's messages and tools "
            "are the run's, its model is the agent's (model=), and a model streams when it was "
            "made to (LiteLLMModel(stream=True))"
        )
    return dict(settings)


def _with_toolsets(
    name: str, tools: Mapping[str, Tool], toolsets: Sequence[Toolset]
) -> dict[str, Tool]:
    """The agent's ``tools`` and its ``toolsets``' tools, by name; a name given twice is a
    ``ConfigurationError`` (pydantic-ai's ``UserError``)."""
    try:
        return combined_tools(toolsets, tools)
    except ConfigurationError as exc:
        raise ConfigurationError(f"agent {name!r}: {exc}") from None


def _check_actor_name(name: str) -> None:
    """Refuse a name the actor of its runs' steering cannot carry: it was taken, and a pause or
    cancel passed down to the runs below failed there (``InvalidCommandError``), unheard."""
    try:
        SteeringActor.parent_agent("r-name-check", name)
    except InvalidCommandError as exc:
        raise ConfigurationError(
            f"agent name {name!a} cannot be the agent_id of the steering its runs send the "
            f"runs below them ({exc}); name it with UTF-8 text"
        ) from None


def _output_spec(name: str, output_type: object) -> OutputSpec:
    """``output_type`` read (``output_spec_of``), each class it sends checked for a schema."""
    spec = output_spec_of(name, output_type)
    for member in (spec.output_type, *(t.model for t in spec.tools.values())):
        if member is not None:
            _check_output_schema(name, member)
    return spec


def _check_output_tool_names(
    name: str, tools: Mapping[str, Tool], output_tools: Mapping[str, Any]
) -> None:
    taken = sorted(set(tools) & set(output_tools))
    if taken:  # a call of it would be read as the run's output, never run
        raise ConfigurationError(
            f"agent {name!r}: tool name(s) {taken} are the output tools of its "
            "output_type (a union with str offers its models as final_result tools, "
            "output functions and ToolOutput markers are output tools too); rename the "
            "tool(s)"
        )


def _check_output_schema(name: str, output_type: type[BaseModel]) -> None:
    """Refuse an output type whose JSON schema cannot be sent as ``response_format``: it was
    taken, and every request of every run failed making it (or sent NaN, no JSON)."""
    try:
        json.dumps(output_type.model_json_schema(), allow_nan=False)
    # no schema for a field's type; a choice (Enum, Literal) or a default JSON cannot write
    except (PydanticUserError, ValueError, TypeError) as exc:
        raise ConfigurationError(
            f"agent {name!r}: output_type {output_type.__name__} has no JSON schema to send as "
            f"response_format ({str(exc).splitlines()[0]}); give its fields JSON types, and "
            "defaults and choices JSON can hold"
        ) from exc


def _budgets(agent: str, retries: object, output_retries: object) -> tuple[int | None, int]:
    """The tools' cap and the output budget of ``Agent(retries=..., output_retries=...)``, as
    pydantic-ai resolves its ``retries: int | AgentRetries``: an int is both (an explicit
    ``output_retries`` wins for the output), a dict each budget it names; the output budget
    defaults to 1, the tools' cap to None (no cap; pydantic-ai's is 1)."""
    if output_retries is not None:
        _check_retries(agent, "output_retries", output_retries)
    if not isinstance(retries, Mapping):
        check_retries(f"agent {agent!r}", retries)
        cap = cast("int | None", retries)
        given = cast("int | None", output_retries) if output_retries is not None else cap
        return cap, 1 if given is None else given
    unknown = sorted(str(key) for key in retries if key not in ("tools", "output"))
    if unknown:
        raise ConfigurationError(
            f"agent {agent!r}: retries takes an int or a dict of 'tools' and 'output' "
            f"budgets, got keys {unknown}"
        )
    tools, output = retries.get("tools"), retries.get("output")
    if tools is not None:
        _check_retries(agent, "retries['tools']", tools)
    if output is not None:
        _check_retries(agent, "retries['output']", output)
        if output_retries is not None:
            raise ConfigurationError(
                f"agent {agent!r}: give the output budget once, as output_retries= or as "
                f"retries={{'output': ...}}, got both ({output_retries} and {output})"
            )
    given = cast("int | None", output_retries if output is None else output)
    return cast("int | None", tools), 1 if given is None else given


def _check_retries(agent: str, name: str, value: object) -> None:
    whole_number(f"agent {agent!r}: {name}", value, least=0)


def _tool_dict(agent: str, tools: object) -> dict[str, Tool]:
    """``tools`` (any iterable of them) by name, each a ``Tool`` (a function is made one):
    a single tool raised a TypeError, and a string was read as one tool per character."""
    if tools is None:
        return {}
    single = isinstance(tools, Tool) or callable(tools)
    if single or isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        one = getattr(tools, "name", None) or getattr(tools, "__name__", None)
        hint = f"; tools=[{one}]" if isinstance(one, str) and single else ""
        raise ConfigurationError(
            f"agent {agent!r}: tools must be a list of tools, got {type(tools).__name__}{hint}"
        )
    by_name: dict[str, Tool] = {}
    for index, item in enumerate(tools):
        if not isinstance(item, Tool) and not callable(item):
            raise ConfigurationError(
                f"agent {agent!r}: tools[{index}] must be a Tool or a function, got "
                f"{type(item).__name__}"
            )
        t = item if isinstance(item, Tool) else FunctionTool(item)
        if t.name in by_name:
            raise ConfigurationError(f"agent {agent!r} has two tools named {t.name!r}")
        by_name[t.name] = t
    return by_name


def _check_forced_tool(agent: str, model: Model, tools: Mapping[str, Tool]) -> None:
    """A ``LiteLLMModel(tool_choice=...)`` naming a tool this agent does not have could never
    be sent (OpenAI refuses a tool_choice naming no offered tool): a mistake (a misspelt
    name), said now. An agent without tools may share the model: its requests carry none of
    the tool settings."""
    if not _litellm.is_litellm_model(model):
        return
    forced = _litellm.forced_tool(model.litellm_kwargs.get("tool_choice"))  # type: ignore[attr-defined]
    if forced is not None and tools and forced not in tools:
        raise ConfigurationError(
            f"agent {agent!r}: its model's tool_choice forces tool {forced!r}, which the agent "
            f"does not have (its tools: {sorted(tools)}); give the agent that tool, or force "
            "one it has"
        )


def _middleware_list(middleware: object) -> list[Middleware]:
    """``middleware`` as a list, each a ``Middleware``: anything else failed the agent's first
    run with an AttributeError (the loop reads each one's hooks from its class)."""
    if not isinstance(middleware, (list, tuple)):
        raise ConfigurationError(
            f"middleware must be a list of Middleware, got {type(middleware).__name__}"
        )
    for index, item in enumerate(middleware):
        if not isinstance(item, Middleware):
            raise ConfigurationError(
                f"middleware[{index}] must be a Middleware, got {type(item).__name__}; "
                "subclass tinyagents.Middleware and override the hooks you need"
            )
    return list(middleware)


def _model_names(models: object) -> tuple[str, ...]:
    """``models`` as a tuple of names: a string was read as its characters."""
    if isinstance(models, str) or not isinstance(models, (list, tuple)):
        raise ConfigurationError(
            f"models must be a list of model names, got {type(models).__name__}; e.g. "
            "models=['openai/gpt-4o-mini', 'openai/gpt-4o']"
        )
    for index, name in enumerate(models):
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(
                f"models[{index}] must be a non-blank model name, got {name!r}"
            )
    return tuple(models)
