"""What ``Agent(...)``, ``agent.override(...)`` and a run's arguments are given, checked: each
value of the wrong kind is a ``ConfigurationError`` saying what to give instead."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from pydantic import BaseModel, PydanticUserError

from tinyagents._bounds import whole_number
from tinyagents.errors import ConfigurationError, InvalidCommandError, kind_of
from tinyagents.harness import _litellm
from tinyagents.harness.context import RunFunction
from tinyagents.harness.middleware import Middleware
from tinyagents.harness.model import Model
from tinyagents.harness.output import OutputSpec, output_spec_of
from tinyagents.harness.tools import FunctionTool, Tool, check_retries
from tinyagents.harness.toolsets import Toolset, combined_tools
from tinyagents.protocol import SteeringActor
from tinyagents.protocol.ids import name_problem, shown_repr
from tinyagents.protocol.text import shows_nothing


def checked_instructions(name: str, instructions: object) -> tuple[str, list[RunFunction]]:
    """``instructions`` as pydantic-ai reads them: text, a function ``()`` or ``(ctx)`` (sync
    or async) or a list of both, split into the text (its pieces joined by a line break, as
    pydantic-ai joins them) and the functions, called before each model request (None:
    none)."""
    if instructions is None:
        return "", []
    given = (
        [instructions]
        if isinstance(instructions, str) or callable(instructions)
        else instructions
        if isinstance(instructions, (list, tuple))
        else None
    )
    texts: list[str] = []
    functions: list[RunFunction] = []
    for piece in given if given is not None else [instructions]:
        if isinstance(piece, str):
            texts.append(piece)
        elif callable(piece) and not isinstance(piece, type):
            functions.append(RunFunction(piece, values=0, what="instructions", agent=name))
        else:
            raise ConfigurationError(
                f"agent {name!r}: instructions must be text, a function () or (ctx) returning "
                f"text, or a list of them, got {kind_of(piece)}; for instructions that change "
                "while a run runs, steer it (add_instruction)"
            )
    return "\n".join(filter(None, texts)), functions


#: Settings a model request carries in fields of its own (the conversation, the tools, the
#: model's name) or that the model decides (whether it streams): not provider settings.
_NOT_SETTINGS = ("messages", "model", "stream", "tools")


def history_processors_of(name: str, processors: object) -> tuple[RunFunction, ...]:
    """An agent's ``history_processors`` (pydantic-ai's): a list of functions ``(messages)``
    or ``(ctx, messages)``, each read as the run will call it (refused now if it is not)."""
    if isinstance(processors, (str, bytes, Mapping)) or not isinstance(processors, Iterable):
        raise ConfigurationError(
            f"agent {name!r}: history_processors must be a list of functions (messages) or "
            f"(ctx, messages), got {kind_of(processors)}"
        )
    return tuple(
        RunFunction(fn, values=1, what="history processor", agent=name) for fn in processors
    )


def checked_model_settings(name: str, settings: object) -> dict[str, Any]:
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


def with_toolsets(
    name: str, tools: Mapping[str, Tool], toolsets: Sequence[Toolset]
) -> dict[str, Tool]:
    """The agent's ``tools`` and its ``toolsets``' tools, by name; a name given twice is a
    ``ConfigurationError`` (pydantic-ai's ``UserError``)."""
    try:
        return combined_tools(toolsets, tools)
    except ConfigurationError as exc:
        raise ConfigurationError(f"agent {name!r}: {exc}") from None


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
    if shows_nothing(name):
        raise ConfigurationError(
            f"{who}an agent's name {name!a} shows no visible character: name it with text "
            "a listing or a log line shows"
        )
    check_actor_name(name)
    return name


def check_actor_name(name: str) -> None:
    """Refuse a name the actor of its runs' steering cannot carry: it was taken, and a pause or
    cancel passed down to the runs below failed there (``InvalidCommandError``), unheard."""
    try:
        SteeringActor.parent_agent("r-name-check", name)
    except InvalidCommandError as exc:
        raise ConfigurationError(
            f"agent name {name!a} cannot be the agent_id of the steering its runs send the "
            f"runs below them ({exc}); name it with UTF-8 text"
        ) from None


def output_spec(name: str, output_type: object) -> OutputSpec:
    """``output_type`` read (``output_spec_of``), each class it sends checked for a schema."""
    spec = output_spec_of(name, output_type)
    for member in (spec.output_type, *(t.model for t in spec.tools.values())):
        if member is not None:
            check_output_schema(name, member)
    return spec


def check_output_tool_names(
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


def check_output_schema(name: str, output_type: type[BaseModel]) -> None:
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


def budgets(agent: str, retries: object, output_retries: object) -> tuple[int | None, int]:
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


def run_budgets(agent: str, retries: object, *, where: str) -> dict[str, int]:
    """The budgets a run's (or an override's) ``retries=`` sets, as pydantic-ai's
    ``run(retries=...)`` reads them: an int is the tools' cap and the output budget, a dict
    the budgets it names (``{"tools": 3}`` leaves the output's as it was)."""
    if isinstance(retries, Mapping):
        unknown = sorted(str(key) for key in retries if key not in ("tools", "output"))
        if unknown:
            raise ConfigurationError(
                f"agent {agent!r}: {where}(retries=...) takes an int or a dict of 'tools' and "
                f"'output' budgets, got keys {unknown}"
            )
        for key, value in retries.items():
            _check_retries(agent, f"{where}(retries={{{key!r}: ...}})", value)
        return {str(key): cast("int", value) for key, value in retries.items()}
    _check_retries(agent, f"{where}(retries=...)", retries)
    return {"tools": cast("int", retries), "output": cast("int", retries)}


def _check_retries(agent: str, name: str, value: object) -> None:
    whole_number(f"agent {agent!r}: {name}", value, least=0)


def tool_dict(agent: str, tools: object) -> dict[str, Tool]:
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


def check_forced_tool(agent: str, model: Model, tools: Mapping[str, Tool]) -> None:
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


def check_tool_choice(
    agent: str,
    model: Model,
    settings: Mapping[str, Any],
    tools: Mapping[str, Tool],
    output_tools: Mapping[str, Any],
) -> None:
    """A ``tool_choice`` of ``"required"`` (the agent's or a run's ``model_settings``, or its
    model's own) makes every response call a tool: a run offering tools and no output tool
    could then never give its answer, and would ask again until a limit ended it. Refused,
    as pydantic-ai refuses it in an agent run; with an output tool the model can answer
    through it, and with no tools at all the setting is not sent. A middleware setting it on
    one request (``request.settings``) is trusted to know when to stop."""
    choice = settings.get("tool_choice")
    if choice is None and _litellm.is_litellm_model(model):
        choice = model.litellm_kwargs.get("tool_choice")  # type: ignore[attr-defined]
    if choice == "required" and tools and not output_tools:
        raise ConfigurationError(
            f"agent {agent!r}: tool_choice 'required' makes every response call a tool, and "
            "the agent has no output tool to answer through, so its runs could never end "
            "with an answer; give it an output tool (output_type=ToolOutput(...)), leave "
            "tool_choice 'auto', or force a tool on one request from a middleware "
            "(request.settings)"
        )


def middleware_list(middleware: object) -> list[Middleware]:
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


def model_names(models: object) -> tuple[str, ...]:
    """``models`` as a tuple of names: a string was read as its characters."""
    if isinstance(models, str) or not isinstance(models, (list, tuple)):
        raise ConfigurationError(
            f"models must be a list of model names, got {type(models).__name__}; e.g. "
            "models=['openai/gpt-4o-mini', 'openai/gpt-4o']"
        )
    for index, name in enumerate(models):
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(
                f"models[{index}] must be a non-blank model name, got {shown_repr(name)}"
            )
    return tuple(models)


def checked_metadata(name: str, metadata: object, *, where: str = "") -> Any:
    """pydantic-ai's ``metadata``: None, a dict of text keys (copied), or a function of the
    run's context returning one (a ``RunFunction``); else a ``ConfigurationError``."""
    if metadata is None:
        return None
    if isinstance(metadata, Mapping) and all(isinstance(key, str) for key in metadata):
        return dict(metadata)
    if callable(metadata) and not isinstance(metadata, type):
        return RunFunction(metadata, values=0, what="metadata", agent=name)
    raise ConfigurationError(
        f"agent {name!r}: metadata{where} is a dict of text keys, or a function of the run's "
        f"context returning one (pydantic-ai's), got {kind_of(metadata)}"
    )
