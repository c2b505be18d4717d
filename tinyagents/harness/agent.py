"""``Agent``: a model, instructions, tools and limits — the recipe of an agent run."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from tinyagents import _clock
from tinyagents.errors import (
    ArgumentError,
    ConfigurationError,
    SyncInAsyncError,
    kind_of,
)
from tinyagents.harness import _litellm
from tinyagents.harness._agent_args import (
    budgets,
    check_agent_name,
    check_forced_tool,
    check_output_tool_names,
    check_tool_choice,
    checked_instructions,
    checked_metadata,
    checked_model_settings,
    history_processors_of,
    middleware_list,
    model_names,
    output_spec,
    run_budgets,
    tool_dict,
    with_toolsets,
)
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
from tinyagents.harness.output import OutputSpec, output_json_schema
from tinyagents.harness.render import SteeringRenderer
from tinyagents.harness.tools import FunctionTool, Tool, check_prepare
from tinyagents.harness.toolsets import Toolset, tool_decorator, toolsets_of
from tinyagents.protocol.ids import shown_repr
from tinyagents.runs.host import RunHost, check_runtime, private_host
from tinyagents.runs.limits import RunLimits

if TYPE_CHECKING:
    from tinyagents.events.models import Event
    from tinyagents.runs.handle import RunResult

_F = TypeVar("_F", bound=Callable[..., Any])

#: pydantic-ai's ``EndStrategy``: ``Agent(end_strategy=...)``.
EndStrategy = Literal["early", "graceful", "exhaustive"]


class _Unset:
    """No value given (``None`` is one: ``override(instructions=None)``, ``deps=None``)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class Instructions(str):
    """``agent.instructions``: the agent's instructions text (a ``str``), and pydantic-ai's
    ``@agent.instructions`` decorator, which adds a function ``()`` or ``(ctx)``, sync or
    async, whose text joins the instructions before each model request of its runs."""

    _agent: Agent

    def __new__(cls, text: str, agent: Agent) -> Instructions:
        made = super().__new__(cls, text)
        made._agent = agent
        return made

    def __call__(self, fn: Callable[..., Any] | None = None, /) -> Any:
        def add(f: Callable[..., Any]) -> Callable[..., Any]:
            agent = self._agent
            agent.instruction_functions.append(
                RunFunction(f, values=0, what="instructions", agent=agent.name)
            )
            return f

        return add(fn) if fn is not None else add


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
    ``prepare_tools`` (pydantic-ai's ``PrepareTools``): ``(ctx, specs)`` returning the tool
    specs a model request offers, a subset of ``specs`` (each may be described otherwise).
    ``history_processors`` (pydantic-ai's): functions ``(messages)`` or ``(ctx, messages)``,
    sync or async, called in order before each model request with the run's messages; what
    the last returns is sent and kept as the run's transcript (docs/harness.md, "History
    processors").
    ``end_strategy`` (pydantic-ai's): what the other tool calls of a response holding an
    output tool call do: ``"graceful"`` (the default) runs the calls in order, the first
    valid output call winning; ``"early"`` reads the output calls first and, once one is
    valid, runs none of the tool calls; ``"exhaustive"`` runs every call, output calls
    after the winner too (docs/harness.md, "End strategies").
    """

    def __init__(
        self,
        name: str,
        model: Model | str,
        *,
        instructions: Any = "",
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
        prepare_tools: Callable[..., Any] | None = None,
        history_processors: Sequence[Callable[..., Any]] = (),
        end_strategy: EndStrategy = "graceful",
        metadata: Mapping[str, Any] | Callable[..., Any] | None = None,
    ) -> None:
        check_agent_name(name)
        if unknown_tools not in ("error_result", "fail"):
            raise ConfigurationError(
                f"unknown_tools must be 'error_result' or 'fail', got {shown_repr(unknown_tools)}"
            )
        if end_strategy not in ("early", "graceful", "exhaustive"):
            raise ConfigurationError(
                f"agent {name!r}: end_strategy must be 'early', 'graceful' or 'exhaustive' "
                f"(pydantic-ai's EndStrategy), got {shown_repr(end_strategy)}"
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
        text, functions = checked_instructions(name, instructions)
        check_limits(limits)
        # text for str (pydantic-ai's default), a model class, or a union's envelope class;
        # output tools (a union with str's models, output functions, ToolOutput markers)
        spec = output_spec(name, output_type)
        retries, output_retries = budgets(name, retries, output_retries)
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
        # the ``override`` blocks open in this context, outermost first (shared by this
        # agent's per-run copies)
        self._overrides: ContextVar[tuple[AgentOverride, ...]] = ContextVar(
            f"tinyagents.agent.{name}.override", default=()
        )
        self._name = name
        #: A run's copy (``for_run``) has its name fixed when the run starts: its
        #: ``agent_id``, whatever context reads it later.
        self._run_name: str | None = None
        # a model string (or no model) loads LiteLLMModel's module (tinyagents.harness._litellm)
        self.model = model if isinstance(model, Model) else _litellm.as_model(model)
        #: The instructions' text; ``agent.instructions`` reads it (and decorates).
        self.instruction_text = text
        #: The instruction functions (``instructions=``, ``@agent.instructions``), called
        #: before each model request of a run, their text after ``instruction_text``.
        self.instruction_functions = functions
        #: Provider settings each model request of its runs carries (``ModelRequest.settings``,
        #: pydantic-ai's ``model_settings``): a run's ``model_settings=`` are merged over them.
        self.model_settings = checked_model_settings(name, model_settings)
        check_prepare(f"agent {name!r}: prepare_tools", prepare_tools, "specs")
        #: pydantic-ai's ``prepare_tools``: ``(ctx, specs) -> specs``, called before each
        #: model request with the tools it would offer (after each tool's ``prepare``).
        self.prepare_tools = prepare_tools
        #: pydantic-ai's ``history_processors``: ``(messages)`` or ``(ctx, messages)``, sync
        #: or async, each returning the messages to send, called in order before each model
        #: request; what they return is the run's transcript from then on.
        self.history_processors = history_processors_of(name, history_processors)
        #: The tools given as ``tools=`` (``override(tools=...)`` replaces them for a run).
        self.function_tools = tool_dict(name, tools)
        #: The toolsets given as ``toolsets=`` (``override(toolsets=...)`` replaces them).
        self.toolsets = toolsets_of(f"agent {name!r}", toolsets)
        #: Every tool of the agent, by name: its own, then its toolsets'.
        self.tools = with_toolsets(name, self.function_tools, self.toolsets)
        check_output_tool_names(name, self.tools, spec.tools)
        check_forced_tool(name, self.model, self.tools)
        check_tool_choice(name, self.model, self.model_settings, self.tools, spec.tools)
        self.limits = limits or RunLimits()
        self.middleware = middleware_list(middleware)
        self.models = model_names(models) if models else None
        self.renderer = renderer or SteeringRenderer()
        self.description = description
        #: What a call to a tool the run does not have does: an error result the model can
        #: correct itself from (default), or ending the run ``failed`` with a ``ToolError``.
        self.unknown_tools = unknown_tools
        #: What the other calls of a response with an output tool call do (pydantic-ai's
        #: ``end_strategy``): ``"graceful"`` runs them in order, ``"early"`` skips the tool
        #: calls once an output call is valid, ``"exhaustive"`` runs every call.
        self.end_strategy: EndStrategy = end_strategy
        #: pydantic-ai's ``metadata``: a dict, or a function of the run's context returning
        #: one, resolved as each run starts and again when it completes (``ctx.metadata``,
        #: ``RunResult.metadata``).
        self.metadata = checked_metadata(name, metadata)
        #: What a run's metadata is made of, merged in order: the agent's (then a run's
        #: ``metadata=``), or an ``override(metadata=...)``'s alone.
        self.run_metadata: tuple[Any, ...] = (self.metadata,)
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

    @property
    def name(self) -> str:
        """The agent's name, its runs' ``agent_id``: an ``override(name=...)`` open here
        gives another, as pydantic-ai's does (a run keeps the one it started under)."""
        if self._run_name is not None:
            return self._run_name
        for block in reversed(self._overrides.get()):
            if "name" in block.given:
                return str(block.given["name"])
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = check_agent_name(value)

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
        prepare: Callable[..., Any] | None = None,
        args_validator: Callable[..., Any] | None = None,
    ) -> Callable[[Callable[..., Any]], FunctionTool]: ...
    def tool(self, fn: Callable[..., Any] | None = None, /, **kwargs: Any) -> Any:
        """Add a function taking the run's context (``ctx: RunContext``) as a tool of this
        agent, as pydantic-ai's ``@agent.tool``: ``@agent.tool`` or ``@agent.tool(name=...,
        description=..., timeout_s=..., retries=..., sequential=..., prepare=...,
        args_validator=...)`` (``@tool``'s arguments). Returns the ``FunctionTool``. A function without the context is refused
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
        prepare: Callable[..., Any] | None = None,
        args_validator: Callable[..., Any] | None = None,
    ) -> Callable[[Callable[..., Any]], FunctionTool]: ...
    def tool_plain(self, fn: Callable[..., Any] | None = None, /, **kwargs: Any) -> Any:
        """``tool`` for a function that does not take the run's context (pydantic-ai's
        ``@agent.tool_plain``); one that does is refused."""
        return self._decorate(fn, takes_ctx=False, **kwargs)

    def _decorate(self, fn: Callable[..., Any] | None, *, takes_ctx: bool, **kwargs: Any) -> Any:
        return tool_decorator(fn, self._add_tool, takes_ctx=takes_ctx, **kwargs)

    def _add_tool(self, made: Tool) -> None:
        if made.name in self.tools:  # pydantic-ai's words
            raise ConfigurationError(
                f"agent {self.name!r}: Tool name conflicts with existing tool: {made.name!r}"
            )
        check_output_tool_names(self.name, {made.name: made}, self.output_tools)
        tools = {**self.function_tools, made.name: made}
        # a new dict: a run already started keeps the tools it was granted
        every = with_toolsets(self.name, tools, self.toolsets)
        check_forced_tool(self.name, self.model, every)
        check_tool_choice(self.name, self.model, self.model_settings, every, self.output_tools)
        self.function_tools, self.tools = tools, every

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

    @property
    def instructions(self) -> Instructions:
        """The instructions' text, and the ``@agent.instructions`` decorator (pydantic-ai's):
        a function ``()`` or ``(ctx)``, sync or async, called before each model request of
        a run; its text (None or "": nothing) follows the text, each function's after a
        blank line (docs/harness.md, "Instruction functions")."""
        return Instructions(self.instruction_text, self)

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
            output_spec(self.name, output_type)
        return output_json_schema(output_type)

    def for_output_type(self, output_type: Any) -> Agent:
        """This agent as a run given ``output_type=`` runs it (``agent.run(...,
        output_type=...)``, ``rt.start(...)``, pydantic-ai's per-run output type): a copy
        whose output is ``output_type``, read as ``Agent(output_type=...)`` reads it; the
        rest (name, model, tools, limits, system prompts) is this agent's. Refused, as
        pydantic-ai refuses it, when the agent has output validators (they expect its own
        output type), for an output type the agent would refuse, and for one that leaves a
        ``tool_choice`` of ``"required"`` no output tool (``ConfigurationError``)."""
        run_agent = self._with_output(output_type)
        check_tool_choice(
            self.name, self.model, self.model_settings, self.tools, run_agent.output_tools
        )
        return run_agent

    def _with_output(self, output_type: Any) -> Agent:
        """``for_output_type`` less its ``tool_choice`` check, which a run makes once its own
        ``model_settings`` are merged (a run's ``"auto"`` may lift the agent's ``"required"``)."""
        if self.output_validators:
            raise ConfigurationError(
                f"agent {self.name!r}: cannot set a custom run output_type when the agent has "
                "output validators (they expect its own output type); make an Agent with "
                "that output_type and its validators"
            )
        spec = output_spec(self.name, output_type)
        check_output_tool_names(self.name, self.tools, spec.tools)
        run_agent = copy.copy(self)
        run_agent.output_validators = []  # one added to the agent later is for its type
        run_agent._take_output(spec, output_type)
        return run_agent

    def override(
        self,
        *,
        model: Model | str = UNSET,
        deps: Any = UNSET,
        instructions: Any = UNSET,
        tools: Sequence[Tool | Any] = UNSET,
        toolsets: Sequence[Toolset] = UNSET,
        model_settings: Mapping[str, Any] | None = UNSET,
        retries: int | Mapping[str, int] = UNSET,
        name: str = UNSET,
        metadata: Mapping[str, Any] | Callable[..., Any] | None = UNSET,
    ) -> AgentOverride:
        """Within the ``with`` block, runs of this agent started in this context (its tasks,
        the runs their tools start) use what is given here instead, as pydantic-ai's
        ``agent.override``: ``model``, ``deps`` (over a run's ``deps=``), ``instructions``
        (the agent's text and functions, and a run's ``instructions=``, replaced; None:
        none; its ``@agent.system_prompt`` functions stay), ``tools`` (its ``tools=``), ``toolsets``
        (its ``toolsets=`` and a run's), ``model_settings`` (its and a run's) and ``retries``
        (the budgets it names, over the agent's and a run's ``retries=``) and ``name``
        (``agent.name`` in the block, and the ``agent_id`` of the runs started there),
        ``metadata`` (in place of the agent's and a run's). An inner
        ``override`` wins for what it gives; what it does not give stays the outer one's.
        Each value is checked here, as ``Agent(...)`` checks it (``ConfigurationError``).
        Blocks left out of order each take out their own values only; one is left in the
        thread or task that entered it (``ArgumentError`` elsewhere)."""
        given: dict[str, Any] = {}
        if name is not UNSET:
            given["name"] = check_agent_name(name)
        if metadata is not UNSET:
            given["metadata"] = checked_metadata(self.name, metadata, where=" of an override")
        if model is not UNSET:
            given["model"] = model if isinstance(model, Model) else _litellm.as_model(model)
        if deps is not UNSET:
            given["deps"] = deps
        if instructions is not UNSET:
            given["instructions"] = checked_instructions(self.name, instructions)
        if tools is not UNSET:
            given["tools"] = tool_dict(self.name, tools)
        if toolsets is not UNSET:
            given["toolsets"] = toolsets_of(f"agent {self.name!r}", toolsets)
        if model_settings is not UNSET:
            # a tool_choice of "required" is judged at each run in the block, whose tools and
            # output (a run may give an output tool) are known only then
            given["model_settings"] = checked_model_settings(self.name, model_settings)
        if (
            retries is not UNSET
        ):  # each budget on its own: an inner block naming one keeps the other
            for budget, value in run_budgets(self.name, retries, where="override").items():
                given[f"retries.{budget}"] = value
        return AgentOverride(self._name, self._overrides, given)

    def _overridden(self) -> dict[str, Any]:
        """What the ``override`` blocks open here give, the innermost winning."""
        return {k: v for block in self._overrides.get() for k, v in block.given.items()}

    def for_run(
        self,
        *,
        output_type: Any = None,
        model: Model | str | None = None,
        instructions: Any = None,
        toolsets: Sequence[Toolset] | None = None,
        model_settings: Mapping[str, Any] | None = None,
        retries: int | Mapping[str, int] | None = None,
        metadata: Mapping[str, Any] | Callable[..., Any] | None = None,
    ) -> Agent:
        """This agent as one run of it runs it: its own ``output_type`` (``for_output_type``),
        ``model`` in place of the agent's, ``instructions`` after the agent's (on a line of
        their own, as pydantic-ai joins them), ``toolsets`` beside the agent's,
        ``model_settings`` merged over the agent's, ``retries`` the budgets it names (an int
        both), ``metadata`` merged over the agent's, and what an ``override`` around the start gives (which wins over them). The
        agent itself when there is nothing to change."""
        over = self._overridden()
        if (
            not over
            and model is None
            and instructions is None
            and toolsets is None
            and model_settings is None
            and retries is None
            and metadata is None
        ):
            self._check_rule_tools(self.tools)
            return self if output_type is None else self.for_output_type(output_type)
        run_agent = copy.copy(self) if output_type is None else self._with_output(output_type)
        run_agent._run_name = self.name  # the override's, if it gives one: the run's agent_id
        chosen = over.get("model", model)
        if chosen is not None:
            run_agent.model = chosen if isinstance(chosen, Model) else _litellm.as_model(chosen)
            if self.models is not None:  # the run's model first: the one it is sent
                name = run_agent.model.name
                run_agent.models = (name, *(m for m in self.models if m != name))
        if "instructions" in over:
            run_agent.instruction_text, run_agent.instruction_functions = over["instructions"]
        elif instructions is not None:
            extra, functions = checked_instructions(self.name, instructions)
            run_agent.instruction_text = "\n".join(filter(None, (self.instruction_text, extra)))
            run_agent.instruction_functions = [*self.instruction_functions, *functions]
        if "tools" in over or "toolsets" in over or toolsets is not None:
            run_agent.function_tools = over.get("tools", self.function_tools)
            run_agent.toolsets = over.get(
                "toolsets",
                [
                    *self.toolsets,
                    *toolsets_of(f"agent {self.name!r}", () if toolsets is None else toolsets),
                ],
            )
            run_agent.tools = with_toolsets(self.name, run_agent.function_tools, run_agent.toolsets)
            check_output_tool_names(self.name, run_agent.tools, run_agent.output_tools)
        if "model_settings" in over:
            run_agent.model_settings = over["model_settings"]
        elif model_settings is not None:
            run_agent.model_settings = {
                **self.model_settings,
                **checked_model_settings(self.name, model_settings),
            }
        budgets = {} if retries is None else run_budgets(self.name, retries, where="run")
        run_agent.retries = over.get("retries.tools", budgets.get("tools", self.retries))
        run_agent.output_retries = over.get(
            "retries.output", budgets.get("output", self.output_retries)
        )
        run_agent.run_metadata = (
            (over["metadata"],)
            if "metadata" in over
            else (self.metadata, checked_metadata(self.name, metadata, where=" of a run"))
        )
        check_forced_tool(self.name, run_agent.model, run_agent.tools)
        check_tool_choice(
            self.name,
            run_agent.model,
            run_agent.model_settings,
            run_agent.tools,
            run_agent.output_tools,
        )
        self._check_rule_tools(run_agent.tools)
        return run_agent

    def _check_rule_tools(self, run_tools: Mapping[str, Tool]) -> None:
        """A ``tool_repeated`` rule of the agent's own spec counting a tool neither the agent
        nor this run has could never fire (its runs only narrow their tools): a
        ``SupervisorSpecError`` before the run starts. Checked when a run starts, not when the
        agent is made: ``@agent.tool`` and a run's ``toolsets`` add tools after."""
        check_agent = getattr(self.supervisor, "check_agent", None)
        if check_agent is not None:
            check_agent(self.name, frozenset(self.tools.keys() | run_tools.keys()))

    def deps_for_run(self, deps: Any) -> Any:
        """The ``deps`` a run given ``deps`` has: an ``override(deps=...)`` around its start
        wins, as pydantic-ai's does."""
        return self._overridden().get("deps", deps)

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
        agent's, ``retries=`` its own retry budgets (``for_run``), ``deps=`` its ``ctx.deps``,
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


class AgentOverride:
    """One ``agent.override(...)`` block (a context manager, entered once). Leaving it takes
    out its own values only, so blocks left out of order leave nothing behind (restoring what
    was there when it began would bring back an outer block already left)."""

    __slots__ = ("_state", "_token", "_var", "agent", "given")

    def __init__(
        self, agent: str, var: ContextVar[tuple[AgentOverride, ...]], given: dict[str, Any]
    ) -> None:
        self.agent = agent
        self.given = given
        self._var = var
        self._state: Literal["new", "open", "left"] = "new"
        self._token: Token[tuple[AgentOverride, ...]] | None = None

    def __enter__(self) -> None:
        if self._state != "new":
            raise ArgumentError(
                f"agent {self.agent!r}: an override(...) is entered once; make another "
                "agent.override(...) for another block"
            )
        self._token = self._var.set((*self._var.get(), self))
        self._state = "open"

    def __exit__(self, *exc: object) -> None:
        if self._state != "open":
            raise ArgumentError(
                f"agent {self.agent!r}: this override(...) has "
                f"{'not been entered' if self._state == 'new' else 'already been left'}"
            )
        assert self._token is not None  # set when it was entered
        remaining = tuple(block for block in self._var.get() if block is not self)
        try:  # the token says whether this is the context it was entered in
            self._var.reset(self._token)
        except ValueError:
            raise ArgumentError(
                f"agent {self.agent!r}: this override(...) was entered in another thread or "
                "task, where it stays in effect: leave its block there"
            ) from None
        self._var.set(remaining)
        self._state = "left"
