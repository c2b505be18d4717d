"""``SupervisorSpec``: what a supervisor watches, the rules it checks and how it acts.

Built in Python or read from YAML with ``SupervisorSpec.from_yaml(path_or_text)``::

    rules:
      - when: tool_repeated      # the same tool called `count` times
        tool: search
        count: 3
      - when: budget_fraction    # tokens used / token budget above `gt`
        gt: 0.8
        then: abort
    on_violation: pause          # pause | steer | abort
    model: openai/gpt-4o-mini    # the judge (optional)
    criteria: Stay on the billing question.
    every_n_iterations: 2
    on_judge_error: ignore       # ignore (fail-open) | pause | abort (fail-closed)

Every problem in a YAML spec is a ``SupervisorSpecError`` naming the line: an unknown key, a
value of the wrong type, malformed YAML, a ``criteria_file`` outside its steering directory.
A spec built in Python raises it too (pydantic's ``ValidationError`` is its ``__cause__``), and
so does a rule or a ``ModelEntry`` built on its own.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tinyagents.errors import ConfigurationError
from tinyagents.harness.litellm_model import api_base_problem, env_name_problem
from tinyagents.harness.model import Model
from tinyagents.harness.tools import is_tool_name
from tinyagents.protocol.ids import shown_id, shown_name
from tinyagents.protocol.text import encodes_as_utf8, not_blank, shows_nothing
from tinyagents.supervisor.findings import Finding
from tinyagents.supervisor.graphs import graph_findings, tool_findings, tools_missing
from tinyagents.supervisor.settings import (
    MAX_JUDGE_TIMEOUT_S,
    MAX_PAUSE_MAX_S,
    MIN_SECONDS,
    env_judge_timeout_s,
    env_pause_max_s,
)

if TYPE_CHECKING:
    import yaml

    from tinyagents.graph.core import GraphCore

log = logging.getLogger("tinyagents.supervisor")

Action = Literal["pause", "steer", "abort"]
JudgeErrorAction = Literal["ignore", "pause", "abort"]

#: The default text of a ``steer`` action from a rule (a judge's reason replaces it).
DEFAULT_STEER_MESSAGE = (
    "You appear to be drifting from the task. Stop repeating what has not worked, "
    "re-read the task and take the most direct next step towards it."
)
#: The longest text the supervisor puts in a command: a reason (a judge's is cut to it) or a
#: ``steer_message`` (refused above it): well inside a command's payload limit (16 KiB).
MAX_MESSAGE = 2_000
#: The largest count a rule or ``every_n_iterations`` may name (a million): beyond it a rule
#: never fires, a typo said nowhere. The limits of seconds are in ``settings``.
MAX_COUNT = 1_000_000


class SupervisorSpecError(ConfigurationError):
    """A supervisor spec that cannot be used; ``line`` is the YAML line (1-based) when known.

    Raised by every way of building a spec, ``from_yaml`` as ``SupervisorSpec(...)`` and
    ``model_validate*``; for values pydantic refused, its ``ValidationError`` is the
    ``__cause__`` (``refused`` returns it)."""

    def __init__(self, message: str, *, line: int | None = None, source: str | None = None) -> None:
        where = " of ".join(
            w for w in (f"line {line}" if line is not None else None, source) if w is not None
        )
        super().__init__(f"{where}: {message}" if where else message)
        self.line = line
        self.source = source
        self.problem = message

    @property
    def refused(self) -> ValidationError | None:
        """Pydantic's error for the values that were refused, if that was the problem."""
        return self.__cause__ if isinstance(self.__cause__, ValidationError) else None


#: Set while a spec model is validated: a model validated inside it (a rule, a ``models``
#: entry) leaves its errors to the outermost, which names them all, each by where it is.
_INSIDE_A_SPEC: ContextVar[bool] = ContextVar("tinyagents_inside_a_spec", default=False)


@contextmanager
def _inside_a_spec() -> Iterator[None]:
    token = _INSIDE_A_SPEC.set(True)
    try:
        yield
    finally:
        _INSIDE_A_SPEC.reset(token)


class _Strict(BaseModel):
    """A part of a spec (the spec, a rule, a model entry): every way of building one raises
    ``SupervisorSpecError``, as ``invalid <what>: <field>: <problem>; ...``."""

    # Built on first use: most programs that import tinyagents never make a spec.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
    _what: ClassVar[str] = "supervisor spec"

    def _check_whole(self, info: ValidationInfo) -> None:
        """What the whole model must hold beyond its fields (a ``ValueError`` if not)."""

    # Declared here, before the wrap below, so that a subclass's check is inside it: a
    # model validator a subclass declares is applied outside its base's.
    @model_validator(mode="after")
    def _whole(self, info: ValidationInfo) -> Self:
        self._check_whole(info)
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _typed_error(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        # Every way of building one (Model(...), model_validate*, from_yaml) raises
        # SupervisorSpecError, a ConfigurationError, naming each value refused, with
        # pydantic's ValidationError as its __cause__ (from_yaml reads it for the lines). Not
        # a ValueError: pydantic would wrap that in a ValidationError again. Nested in another
        # spec model, pydantic's error goes up as it is, for the outer one to place and name:
        # converted here it would escape at once, without its location or the other errors.
        if _INSIDE_A_SPEC.get():
            return handler(data)
        with _inside_a_spec():
            try:
                return handler(data)
            except ValidationError as exc:
                errors = meant_errors(exc.errors(), data if isinstance(data, dict) else {})
                problems = "; ".join(
                    # a check of the whole model is said as such: "spec: give 'criteria' or ..."
                    describe_error(err).removeprefix("spec: ")
                    for err in errors
                )
                raise SupervisorSpecError(f"invalid {cls._what}: {problems}") from exc


class ToolRepeated(_Strict):
    """The named tool (or any single tool) was called ``count`` times in the run."""

    _what: ClassVar[str] = "tool_repeated rule"
    when: Literal["tool_repeated"] = "tool_repeated"
    tool: Annotated[ShownText, AfterValidator(_a_tool_name)] | None = None
    count: int = Field(default=3, ge=1, le=MAX_COUNT)
    then: Action | None = None


class BudgetFraction(_Strict):
    """Tokens used / the run's token budget went above ``gt`` (never fires without a budget)."""

    _what: ClassVar[str] = "budget_fraction rule"
    when: Literal["budget_fraction"] = "budget_fraction"
    gt: float = Field(default=0.8, gt=0, le=1)
    then: Action | None = None


class IterationReached(_Strict):
    """The run's model call number ``gte`` answered."""

    _what: ClassVar[str] = "iteration_reached rule"
    when: Literal["iteration_reached"] = "iteration_reached"
    gte: int = Field(default=1, ge=1, le=MAX_COUNT)
    then: Action | None = None


Rule = Annotated[ToolRepeated | BudgetFraction | IterationReached, Field(discriminator="when")]
RULE_KINDS = ("tool_repeated", "budget_fraction", "iteration_reached")


_NOT_UTF8 = "text is not valid UTF-8 (it holds a lone surrogate such as '\\ud800')"


def _utf8(value: str) -> str:
    """Text that can be written as UTF-8: a lone surrogate (a YAML "\\ud800" escape) made
    every steer carrying it an ``InvalidCommandError`` at run time, logged and skipped."""
    if not encodes_as_utf8(value):
        raise ValueError(_NOT_UTF8)
    return value


def _shown(value: str) -> str:
    """Text that says something: not blank (a blank judge model name passed, and left a run
    registered that nothing drove), by the rule of every command text (``not_blank``): a
    ``str.strip`` kept a zero-width space or a control character alone, and a
    ``steer_message`` of one told the model nothing."""
    return not_blank(value)


def _fits_a_command(value: str) -> str:
    """Text the supervisor sends in a command: a longer one was refused when sent (payload
    too large), at run time, where no one reads why."""
    if len(value) > MAX_MESSAGE:
        raise ValueError(f"must be at most {MAX_MESSAGE:,} characters, a steer carries it")
    return value


def _a_tool_name(value: str) -> str:
    """A ``tool_repeated`` rule's tool: a name a tool can have. The supervisor counts only the
    tools a run was granted, each so named: a rule for ``web search`` never fired."""
    if not is_tool_name(value):
        raise ValueError(
            f"{shown_id(ascii(value))} is a name no tool can have (1-64 letters, digits, '_' or '-'), so the "
            "rule could never fire: name the tool as the agent's tools list it"
        )
    return value


def _a_path(value: str) -> str:
    """A path as text: no NUL character (the OS refuses it, as a bare ValueError), not blank
    (it named no file: read as the spec's own directory, at most a warning, and the judge
    failed when it started)."""
    if "\x00" in value:
        raise ValueError("a path holds no NUL character")
    if not value.strip():
        raise ValueError("must not be blank: name the path, or leave the key out")
    return value


def _fspath(value: Any) -> Any:
    """A path given as a ``Path`` (or any ``os.PathLike``) in Python, as its text: the spec is
    strict about types, but a path object is what a program holds for a path."""
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _a_url(value: str) -> str:
    """An ``api_base``: an http(s) URL with a host (and a port from 1 to 65535, if it names
    one), as ``LiteLLMModel`` takes."""
    problem = api_base_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _an_env_name(value: str) -> str:
    """An ``api_key_env``: the name of an environment variable (``env_name_problem``)."""
    problem = env_name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _no_nul(value: str) -> str:
    """Text a judge is sent: no NUL character, which no model reads as text (and which a
    text column of a store refuses)."""
    if "\x00" in value:
        raise ValueError("holds a NUL character ('\\x00'); remove it")
    return value


def _once_each(values: list[Any]) -> list[Any]:
    """A list of things watched, each given once: ``[agents, agents]`` said one thing twice
    (a copy-paste, or two specs merged)."""
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"gives {named(value)} twice: give each once")
        seen.add(value)
    return values


def _not_too_long(value: str) -> str:
    """Inline criteria no larger than a criteria file may be (``MAX_SPEC_BYTES``): the judge
    is sent them with every call."""
    size = len(value) if value.isascii() else len(value.encode())
    if size > MAX_SPEC_BYTES:
        raise ValueError(
            f"is {size:,} bytes, more than {MAX_SPEC_BYTES:,}: the judge is sent the criteria "
            "with every call; keep them short"
        )
    return value


#: Text that is UTF-8; that shows something; a file path the OS can take (a ``Path`` too, in
#: Python); an http(s) URL; an environment variable's name.
Text = Annotated[str, AfterValidator(_utf8)]
ShownText = Annotated[Text, AfterValidator(_shown)]
PathText = Annotated[Text, BeforeValidator(_fspath), AfterValidator(_a_path)]
UrlText = Annotated[ShownText, AfterValidator(_a_url)]
EnvName = Annotated[ShownText, AfterValidator(_an_env_name)]


class ModelEntry(_Strict):
    """A named model of a models registry: a litellm model string and where it is served."""

    _what: ClassVar[str] = "model entry"
    model: ShownText
    api_base: UrlText | None = None
    api_key_env: EnvName | None = None


def _agents() -> list[Literal["agents"]]:
    return ["agents"]


class SupervisorSpec(_Strict):
    """A declarative supervisor (see the module docstring and docs/supervisor.md)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    watches: Annotated[list[Literal["agents"]], AfterValidator(_once_each)] = Field(
        default_factory=_agents
    )
    rules: list[Rule] = Field(default_factory=list)
    on_violation: Action = "pause"
    #: The judge: a litellm model string (``"openai/gpt-4o-mini"``) or, in Python, a
    #: ``Model`` (a test's ``ScriptedModel``); no model, no judge.
    model: str | Model | None = None
    #: Where the judge's model is served, and the environment variable holding its key.
    api_base: UrlText | None = None
    #: A blank one would be no variable at all: litellm's own (``OPENAI_API_KEY``) sent to
    #: ``api_base``.
    api_key_env: EnvName | None = None
    criteria: Annotated[Text, AfterValidator(_no_nul), AfterValidator(_not_too_long)] | None = None
    criteria_file: PathText | None = None
    #: The directory ``criteria_file`` must stay inside; default: the YAML file's directory
    #: (or the working directory for a spec built in Python or from text).
    steering_dir: PathText | None = None
    every_n_iterations: int = Field(default=1, ge=1, le=MAX_COUNT)
    on_judge_error: JudgeErrorAction = "ignore"
    steer_message: Annotated[
        ShownText, AfterValidator(_no_nul), AfterValidator(_fits_a_command)
    ] = DEFAULT_STEER_MESSAGE
    pause_max_s: float | None = Field(
        default=None, ge=MIN_SECONDS, le=MAX_PAUSE_MAX_S, allow_inf_nan=False
    )
    judge_timeout_s: float | None = Field(
        default=None, ge=MIN_SECONDS, le=MAX_JUDGE_TIMEOUT_S, allow_inf_nan=False
    )
    #: Named models: ``name: provider/model`` or ``name: {model, api_base, api_key_env}``. A
    #: bare judge ``model`` (no ``/``) is looked up here, then in ``models_file``.
    models: dict[ShownText, str | ModelEntry] = Field(default_factory=dict)
    #: A YAML file of named models (the same mapping, optionally under a ``models:`` key),
    #: relative to the spec's YAML file (or the working directory).
    models_file: PathText | None = None
    #: The YAML file's directory (relative ``steering_dir`` is resolved against it).
    _base_dir: Path | None = PrivateAttr(default=None)

    @field_validator("model", mode="before")
    @classmethod
    def _a_model_name(cls, value: Any) -> Any:
        if isinstance(value, str) and shows_nothing(value):
            raise ValueError(
                "must not be blank: name a litellm model (e.g. 'openai/gpt-4o-mini') or leave "
                "'model' out for no judge"
            )
        return _utf8(value) if isinstance(value, str) else value

    @field_validator("models", mode="before")
    @classmethod
    def _named_models(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for name, entry in value.items():
                for text in (name, entry):  # (first: a lone surrogate shows nothing too)
                    if isinstance(text, str) and not encodes_as_utf8(text):
                        raise ValueError(f"model {named(name)}: {_NOT_UTF8}")
                if isinstance(entry, str) and shows_nothing(entry):
                    raise ValueError(f"model {named(name)} must not be blank: name a litellm model")
        return value

    def _check_whole(self, info: ValidationInfo) -> None:
        if self.criteria is not None and self.criteria_file is not None:
            raise ValueError("give 'criteria' or 'criteria_file', not both")
        self._base_dir = (info.context or {}).get("base_dir")
        self.criteria_path()  # a criteria_file escaping its directory is refused now

    # ------------------------------------------------------------------ derived values

    def steering_root(self, base_dir: str | Path | None = None) -> Path:
        """The directory ``criteria_file`` is confined to, resolved."""
        base_dir = base_dir if base_dir is not None else self._base_dir
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        root = Path(self.steering_dir) if self.steering_dir is not None else Path()
        return resolved(base / root, "steering_dir")

    def criteria_path(self, base_dir: str | Path | None = None) -> Path | None:
        """The resolved ``criteria_file``; ``SupervisorSpecError`` if it resolves outside the
        steering directory (``..``, an absolute path, a symlink pointing out)."""
        if self.criteria_file is None:
            return None
        root = self.steering_root(base_dir)
        path = resolved(root / self.criteria_file, "criteria_file")
        if not path.is_relative_to(root):
            raise SupervisorSpecError(
                f"criteria_file {named(self.criteria_file)} resolves to {shown_path(path)}, "
                f"outside the steering directory {shown_path(root)}; keep criteria files inside it (or set steering_dir)"
            )
        return path

    def criteria_text(self, base_dir: str | Path | None = None) -> str:
        """The judge's criteria: ``criteria``, or the text of ``criteria_file``."""
        path = self.criteria_path(base_dir)
        if path is None:
            return self.criteria or ""
        return read_text(path, f"criteria_file {named(self.criteria_file)} ({shown_path(path)})")

    def effective_pause_max_s(self, default: float | None = None) -> float:
        """``pause_max_s``, else ``default``, else ``TINYAGENTS_PAUSE_MAX_S`` or 300 s."""
        if self.pause_max_s is not None:
            return self.pause_max_s
        return default if default is not None else env_pause_max_s()

    def effective_judge_timeout_s(self, default: float | None = None) -> float:
        """``judge_timeout_s``, else ``default``, else ``TINYAGENTS_JUDGE_TIMEOUT_S`` or 30 s."""
        if self.judge_timeout_s is not None:
            return self.judge_timeout_s
        return default if default is not None else env_judge_timeout_s()

    def models_path(self) -> Path | None:
        """The resolved ``models_file``."""
        if self.models_file is None:
            return None
        base = self._base_dir if self._base_dir is not None else Path.cwd()
        return resolved(base / self.models_file, "models_file")

    def registry(self) -> dict[str, ModelEntry]:
        """The named models: ``models_file``'s, then the inline ``models`` (which win)."""
        named: dict[str, str | ModelEntry] = {}
        path = self.models_path()
        if path is not None:
            named.update(_read_models_file(path, self.models_file or ""))
        named.update(self.models)
        return {
            name: ModelEntry(model=entry) if isinstance(entry, str) else entry
            for name, entry in named.items()
        }

    def judge_target(self) -> ModelEntry | Model | None:
        """The judge's model: a ``Model`` as given, or the litellm model and endpoint the
        ``model`` string names (a bare name resolved through ``registry``; the spec's own
        ``api_base``/``api_key_env`` win over the registry's). None: no judge."""
        if self.model is None or isinstance(self.model, Model):
            return self.model
        entry = self.registry().get(self.model) if "/" not in self.model else None
        if entry is None:
            return ModelEntry(
                model=self.model, api_base=self.api_base, api_key_env=self.api_key_env
            )
        return ModelEntry(
            model=entry.model,
            api_base=self.api_base or entry.api_base,
            api_key_env=self.api_key_env or entry.api_key_env,
        )

    def can_abort(self) -> bool:
        """Whether this spec may end a run ``aborted``: an ``abort`` action, or a ``pause``
        (which becomes an abort after its dwell cap). ``on_violation`` counts only when
        something uses it: a rule without its own ``then``, or the judge."""
        actions: set[str] = {rule.then for rule in self.rules if rule.then}
        if self.model is not None or any(rule.then is None for rule in self.rules):
            actions.add(self.on_violation)
        if self.model is not None:
            actions.add(self.on_judge_error)
        return bool(actions & {"abort", "pause"})

    def check_agent(self, name: str, tools: Collection[str]) -> None:
        """What ``Agent(name, tools=..., supervisor=self)`` calls: a ``tool_repeated`` rule
        counting a tool the agent does not have is a ``SupervisorSpecError`` (the agent's
        runs only ever narrow its tools, so the rule could never fire)."""
        for index, tool in tools_missing(self.rules, tools):
            has = ", ".join(sorted(tools)) or "no tools"
            raise SupervisorSpecError(
                f"agent {name!r}: rules.{index} (tool_repeated) counts tool {tool!r}, "
                f"which the agent does not have ({has}), so it could never fire; name one "
                "of its tools, or leave 'tool' out to count each of them"
            )

    def check_graph(self, graph: GraphCore) -> list[Finding]:
        """What ``compile(supervisor=self)`` calls: each ``tool_repeated`` rule counting a
        tool no agent the spec watches in the graph has, and each agent node whose
        ``aborted`` outcome the graph does not route, logged as warnings and returned."""
        findings = [
            *tool_findings(graph, self.rules),
            *graph_findings(graph, can_abort=self.can_abort()),
        ]
        for finding in findings:
            log.warning("compile(supervisor=...): %s", finding.message)
        return findings

    # ------------------------------------------------------------------ YAML

    @classmethod
    def from_yaml(cls, source: str | Path) -> SupervisorSpec:
        """Read a spec from a YAML file (a ``Path``, or a string of one line ending in
        ``.yaml``/``.yml``) or from YAML text. A ``supervisor:`` top-level key may wrap it."""
        text, base_dir, name = read_source(source)
        data, lines = parse_yaml(text, name)
        return cls.from_data(data, lines=lines, base_dir=base_dir, name=name)

    @classmethod
    def from_data(
        cls,
        data: Any,
        *,
        lines: dict[tuple[str | int, ...], int] | None = None,
        base_dir: Path | None = None,
        name: str = "<spec>",
    ) -> SupervisorSpec:
        """Validate already-parsed data; ``lines`` maps key paths to YAML lines."""
        lines = lines or {}
        source = None if name == "<yaml>" else name
        data, prefix = spec_mapping(data, lines, source)
        try:
            return cls.model_validate(data, context={"base_dir": base_dir})
        except SupervisorSpecError as exc:
            refused = exc.refused
            if refused is None:  # a check of the spec: a criteria_file outside its directory
                raise SupervisorSpecError(
                    exc.problem, line=lines.get((*prefix, "criteria_file")), source=source
                ) from None
            err = meant_errors(refused.errors(), data)[0]
            line = line_of((*prefix, *yaml_loc(err["loc"])), lines)
            raise SupervisorSpecError(describe_error(err), line=line, source=source) from refused


def resolved(path: Path, what: str) -> Path:
    """``path.resolve()``; one that cannot be resolved is a ``SupervisorSpecError`` (a
    symlink loop raised pathlib's RuntimeError out of ``from_yaml`` and ``validate``)."""
    try:
        return path.resolve()
    except RuntimeError:
        raise SupervisorSpecError(f"cannot resolve {what} {str(path)!r}: a symlink loop") from None
    except OSError as exc:
        raise SupervisorSpecError(f"cannot resolve {what} {str(path)!r}: {exc.strerror}") from None


def spec_mapping(
    data: Any, lines: dict[tuple[str | int, ...], int], source: str | None
) -> tuple[dict[Any, Any], tuple[str | int, ...]]:
    """The mapping of a spec's keys in parsed YAML ``data``, unwrapped from a ``supervisor:``
    key, and the key path it is under; a ``SupervisorSpecError`` if it is none. An empty
    document (no text, only comments, ``null``, ``---``, an empty ``supervisor:``) is one:
    it loaded as a spec of defaults, so a file truncated by a failed copy supervised nothing
    and said nothing. ``{}`` asks for the defaults in so many words."""
    beside = wrapper_problem(data)
    if beside is not None:
        raise SupervisorSpecError(beside, line=lines.get(("supervisor",)), source=source)
    prefix: tuple[str | int, ...] = ()
    if isinstance(data, dict) and set(data) == {"supervisor"}:
        data, prefix = data["supervisor"], ("supervisor",)
    if data is None:
        raise SupervisorSpecError(
            "the spec is empty (no keys, or null"
            + (" under 'supervisor'" if prefix else "")
            + "): write its keys (rules, on_violation, ...), or {} for the defaults",
            line=lines.get(prefix),
            source=source,
        )
    if not isinstance(data, dict):
        raise SupervisorSpecError(
            "a supervisor spec is a mapping of keys (rules, on_violation, ...), "
            f"got {type(data).__name__}",
            line=lines.get(prefix),
            source=source,
        )
    return data, prefix


def wrapper_problem(data: Any) -> str | None:
    """Why a ``supervisor:`` key beside other top-level keys is refused, or None: it wraps the
    whole spec (pydantic called it the unknown key, the one key that was right)."""
    if not isinstance(data, dict) or "supervisor" not in data or len(data) == 1:
        return None
    others = ", ".join(repr(str(key)) for key in data if key != "supervisor")
    return (
        "'supervisor' wraps the whole spec, so it is the only top-level key: move "
        f"{others} under it (or drop the wrapper)"
    )


def _read_models_file(path: Path, name: str) -> dict[str, str | ModelEntry]:
    text = read_text(path, f"models_file {named(name)} ({shown_path(path)})")
    data, lines = parse_yaml(text, str(path))
    prefix: tuple[str, ...] = ()
    if isinstance(data, dict) and set(data) == {"models"}:
        data, prefix = data["models"], ("models",)
    if not isinstance(data, dict):
        raise SupervisorSpecError(
            "a models file maps names to 'provider/model' strings or {model, api_base, "
            f"api_key_env}}, got {type(data).__name__}",
            source=str(path),
        )
    try:
        with _inside_a_spec():  # each entry's error is placed here, by its name and line
            models = _MODELS.validate_python(data)
    except ValidationError as exc:
        err = _entry_error(exc.errors(), data)
        line = line_of((*prefix, *err["loc"]), lines)
        raise SupervisorSpecError(describe_error(err), line=line, source=str(path)) from None
    for entry_name, entry in models.items():
        if isinstance(entry, str) and shows_nothing(entry):
            raise SupervisorSpecError(
                f"model {named(entry_name)} must not be blank: name a litellm model "
                f"(got {quoted(entry)})",
                line=line_of((*prefix, entry_name), lines),
                source=str(path),
            )
    return models


def _entry_error(errors: list[Any], data: dict[str, Any]) -> Any:
    """The error of the branch an entry was meant as (a mapping: ``ModelEntry``; else the
    string), its location without pydantic's branch tag (the string's is ``str``; the
    model's names its wrap validator, ``function-wrap[_typed_error()]``)."""
    for err in errors:
        name, branch = err["loc"][0], err["loc"][1] if len(err["loc"]) > 1 else None
        as_text = not isinstance(data.get(name), dict)
        if branch is not None and (branch == "str") == as_text:
            return {**err, "loc": (name, *err["loc"][2:])}
    return errors[0]


def meant_errors(errors: list[Any], data: dict[str, Any]) -> list[Any]:
    """A spec's ``errors``, each inline ``models`` entry's narrowed to the one error of the
    branch it was meant as (``_entry_error``, as for a models file): pydantic lists the
    string branch's first, "should be a valid string", for an entry written as a mapping.
    The judge ``model`` of a wrong type is one error at ``model``: pydantic gave one per
    branch, at ``model.str`` and ``model.is-instance[Model]`` (no key of the YAML)."""
    errors = _one_model_error(errors)
    models = data.get("models")
    if not isinstance(models, dict):
        return errors
    out: list[Any] = []
    seen: set[Any] = set()
    for err in errors:
        loc = err["loc"]
        if loc[:1] != ("models",) or len(loc) < 3:
            out.append(err)
        elif loc[1] not in seen:
            seen.add(loc[1])
            entry = [{**e, "loc": e["loc"][1:]} for e in errors if e["loc"][:2] == loc[:2]]
            meant = _entry_error(entry, models)
            out.append({**meant, "loc": ("models", *meant["loc"])})
    return out


def _one_model_error(errors: list[Any]) -> list[Any]:
    """``errors`` with those of the judge ``model``'s union branches made one, at ``model``
    (the blank or non-UTF-8 name refused before the branches is kept as it is)."""
    out: list[Any] = []
    said = False
    for err in errors:
        if err["loc"][:1] != ("model",) or len(err["loc"]) < 2:
            out.append(err)
        elif not said:
            said = True
            out.append(
                {
                    **err,
                    "type": "value_error",
                    "loc": ("model",),
                    "msg": "must be a litellm model string such as 'openai/gpt-4o-mini' (or, "
                    "in Python, a Model)",
                }
            )
    return out


#: A models file's names and entries: each shows something (a blank entry was refused only
#: when the judge's model was asked for, naming neither the file nor the entry; a blank name
#: no judge ``model`` can name was kept without a word).
_MODELS: TypeAdapter[dict[str, str | ModelEntry]] = TypeAdapter(
    dict[ShownText, str | ModelEntry], config=ConfigDict(defer_build=True)
)


def describe_error(err: Any) -> str:
    """One pydantic error, in words a newcomer can act on."""
    path = ".".join(str(p) for p in yaml_loc(err["loc"])) or "spec"
    where = shown_id(shown_name(path))  # a key of 2,000 characters was echoed whole
    if err["type"] == "extra_forbidden":
        return f"unknown key {named(path)}; check its spelling against docs/supervisor.md"
    if err["type"] == "union_tag_invalid":
        tag = (err.get("ctx") or {}).get("tag")
        return f"{where}: unknown rule kind {named(tag)}; use one of {', '.join(RULE_KINDS)}"
    if err["type"] == "union_tag_not_found":
        return f"{where}: a rule needs 'when' (one of {', '.join(RULE_KINDS)})"
    loc = yaml_loc(err["loc"])
    if err["type"] == "invalid_key" or loc[-1:] == ("[key]",):
        # a key YAML read as a number, a boolean or null ("2024:", "true:", "~:"); pydantic
        # names it by its own spelling ("1" for true), so the message names where it is
        parent = loc[:-1] if err["type"] == "invalid_key" else loc[:-2]
        key = err.get("input")
        if isinstance(key, str):  # text a key's own check refused (a blank model name)
            msg = str(err["msg"]).removeprefix("Value error, ")
            said = f"the key {quoted(key)}: {msg}"
        else:
            said = f"the key {quoted(key)} is no text; quote it in the YAML"
        parent_path = shown_id(shown_name(".".join(str(p) for p in parent)))
        return f"{parent_path}: {said}" if parent else said
    msg = str(err["msg"])
    if err["type"].startswith("value_error"):
        msg = msg.removeprefix("Value error, ")
    if not err["loc"]:  # a check of the whole spec: its input is the spec, not one value
        return f"{where}: {msg}"
    return f"{where}: {msg} (got {quoted(err.get('input'))})"


def named(value: object) -> str:
    """A name the spec gave (a key, a file, a model), as a message quotes it: its ``repr``,
    cut to ``MAX_QUOTED_ID`` characters (saying how long it was)."""
    return shown_id(repr(value))


def shown_path(path: Path) -> str:
    """A resolved path as a message shows it: escaped when not printable, and cut."""
    return shown_id(shown_name(str(path)))


#: How much of a wrong value an error message quotes.
_QUOTED = 120


def quoted(value: Any) -> str:
    """``value`` as a spec error quotes it: its ``repr``, cut to ``_QUOTED`` characters
    (saying how long it was). An integer Python will not print (past 4,300 digits: in a spec
    from Python, or one YAML wrote in hex or octal) is named by its size: printing it raised
    out of pydantic's validation, as its raw ``ValidationError``."""
    try:
        got = repr(value)
    except ValueError:
        if not isinstance(value, int):
            raise
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    if len(got) > _QUOTED:
        got = f"{got[:_QUOTED]}… ({len(got):,} characters)"
    return got


def read_source(source: str | Path) -> tuple[str, Path | None, str]:
    """(text, directory of the file or None, a name for messages). A ``Path``, or a string of
    one line ending in ``.yaml``/``.yml``, names a file, which must be there (a mistyped
    name was read as YAML text: "a spec is a mapping, got str")."""
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and source.endswith((".yaml", ".yml"))
    ):
        path = Path(source)
        if not is_file(path):
            raise SupervisorSpecError(not_a_file(path), source=str(path))
        return read_text(path, str(path), spec=True), path.resolve().parent, str(path)
    if not isinstance(source, str):
        raise SupervisorSpecError(
            f"a spec is read from YAML text (a str) or from a file (a Path), got "
            f"{type(source).__name__}"
            + ("; decode it first: source.decode('utf-8')" if isinstance(source, bytes) else "")
        )
    return source, None, "<yaml>"


def is_file(path: Path) -> bool:
    """``path.is_file()``, False where it raises: it says False for a missing file but raises
    for a name the OS refuses (``File name too long``)."""
    try:
        return path.is_file()
    except OSError:
        return False


def not_a_file(path: Path) -> str:
    """Why ``path`` (not a regular file) cannot be read as a spec."""
    try:
        if path.is_dir():
            return "a directory, not a file"
        if path.exists():
            return "not a regular file"
        if path.is_symlink():  # it is there (ls lists it): "no such file" sent users to a typo
            return f"a symlink to {os.readlink(path)!r}, which leads nowhere (gone, or a loop)"
        return "no such file"
    except OSError as exc:  # a name the OS refuses
        return exc.strerror or type(exc).__name__


#: The largest spec, models or criteria file (or spec text) read: a spec is small, and a
#: file this big is a wrong path (a log, a data file), not one to parse.
MAX_SPEC_BYTES = 1_000_000


def _too_long(size: int, what: str, unit: str = "bytes") -> SupervisorSpecError | None:
    if size <= MAX_SPEC_BYTES:
        return None
    return SupervisorSpecError(
        f"{what} is {size:,} {unit}, more than {MAX_SPEC_BYTES:,}: a spec is small; check "
        "that this is what you meant to read"
    )


def read_text(path: Path, what: str, *, spec: bool = False) -> str:
    """The text of a spec, models or criteria file; what cannot be read is a
    ``SupervisorSpecError``, and so is what is not a regular file: a named pipe or a device
    has no size to check, and reading one (a pipe no one writes, ``/dev/zero``) never ends.
    ``spec``: the file is the spec itself, so the line of a byte that is not UTF-8 is the
    error's ``line`` (another file's is said in the message)."""
    try:
        if not path.is_file():
            raise SupervisorSpecError(f"cannot read {what}: {not_a_file(path)}")
        too_long = _too_long(path.stat().st_size, what)
        if too_long is not None:
            raise too_long
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SupervisorSpecError(f"cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        raise SupervisorSpecError(
            f"cannot read {what}: it is not UTF-8 text (byte {exc.object[exc.start]:#04x} on "
            f"line {line}{'' if spec else ' of it'}, at offset {exc.start}); save it as UTF-8",
            line=line if spec else None,
        ) from None


def parse_yaml(text: str, name: str) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    """The data of a YAML document and the line of every key and list item in it."""
    import yaml  # ~35 ms: loaded by the first spec read from YAML, not by import tinyagents

    too_long = _too_long(len(text), "the YAML text", "characters")
    if too_long is not None:
        raise too_long
    loader = _loader()
    try:
        node = yaml.compose(text, Loader=loader)
        # measured before it is built: an alias bomb or a self-reference is never constructed
        problem = None if node is None else _too_big(node)
        if problem is not None:
            raise SupervisorSpecError(problem, source=None if name == "<yaml>" else name)
        data = yaml.load(text, Loader=loader)  # a SafeLoader: see _loader
    except _TooMany as exc:
        raise SupervisorSpecError(
            f"the YAML holds more than {MAX_YAML_VALUES:,} values; a spec is small: check that "
            "this is what you meant to read",
            line=exc.mark.line + 1,
            source=None if name == "<yaml>" else name,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        source = None if name == "<yaml>" else name
        raise SupervisorSpecError(
            f"malformed YAML: {exc.problem or exc.context}", line=line, source=source
        ) from None
    except yaml.reader.ReaderError as exc:  # not a MarkedYAMLError: its line is counted here
        raise SupervisorSpecError(
            f"malformed YAML: unacceptable character {_char(exc.character)} ({exc.reason}); "
            'remove it, or write it escaped in a double-quoted string ("\\x01")',
            line=text.count("\n", 0, exc.position) + 1,
            source=None if name == "<yaml>" else name,
        ) from None
    except yaml.YAMLError as exc:
        raise SupervisorSpecError(f"malformed YAML: {exc}", source=name) from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise SupervisorSpecError(
            "malformed YAML: nested too deep for a spec", source=None if name == "<yaml>" else name
        ) from None
    lines: dict[tuple[str | int, ...], int] = {}
    if node is not None:
        _collect_lines(node, (), lines, set())
    return data, lines


def _char(character: Any) -> str:
    """A character PyYAML's reader refused, as it names one (a code point for text)."""
    return f"#x{character:04x}" if isinstance(character, int) else repr(character)


@functools.cache
def _loader() -> Any:
    """PyYAML's safe loader, reading plain scalars as YAML 1.2's core schema does: numbers
    are decimal (``010`` is 10), ``0o17``/``0x1f`` or floats (``1e3`` too); only
    ``true``/``false`` are booleans; everything else is text. YAML 1.1, PyYAML's default,
    read ``010`` as 8, ``1:30`` as 90, ``1_000`` as 1000, ``yes``/``no``/``on``/``off`` as
    booleans (a tool named ``no`` became ``False``), a date as a date, and ``1e3`` as text."""
    import yaml

    class Loader(yaml.SafeLoader):
        composed = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            # counted as they are composed: a huge spec (a 1 MB flow list) is refused at its
            # 100,001st value, on its line, not after seconds of building every node
            self.composed += 1
            if self.composed > MAX_YAML_VALUES:
                raise _TooMany(self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            # a key given twice is an error naming both lines: PyYAML keeps the last one,
            # so "on_violation: abort" followed by "on_violation: pause" quietly paused
            # (by key, not by line: "{a: 1, a: 2}" gives both on one line)
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # "<<": a merge's keys may be overridden, as YAML means it
                key = self.construct_object(key_node, deep=deep)
                try:
                    line = first.get(key)
                    first.setdefault(key, key_node.start_mark.line)
                except TypeError:
                    continue  # an unhashable key: PyYAML's own error says so
                if line is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {named(key)} (first on line {line + 1}): give it once",
                        key_node.start_mark,
                    )
            return super().construct_mapping(node, deep)

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            # deep: a collection is filled here, not later, so what its tag cannot read is
            # raised while its node is known. PyYAML's constructors raise ValueError,
            # KeyError, TypeError... for a tag its value does not fit ("!!float abc",
            # "!!bool maybe", "!!set [a]"): a YAML error on the value's line instead
            try:
                return super().construct_object(node, deep=True)
            except yaml.YAMLError:
                raise
            except (ValueError, TypeError, KeyError, AttributeError, IndexError):
                what = quoted(node.value) if isinstance(node, yaml.ScalarNode) else f"a {node.id}"
                tag = node.tag.replace("tag:yaml.org,2002:", "!!")
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"{tag} cannot read {what}; drop the tag or give it a value it reads",
                    node.start_mark,
                ) from None

    Loader.yaml_implicit_resolvers = {  # PyYAML's, but its 1.1 numbers, booleans, dates
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML_11_TAGS]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    for tag, pattern, first in _YAML_12_SCALARS:  # in this order: "10" is an int
        Loader.add_implicit_resolver(tag, re.compile(pattern), list(first))
    Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    return Loader


#: PyYAML's YAML 1.1 resolvers a spec does without ("=" is the 1.1 "value" type).
_YAML_11_TAGS = frozenset(
    f"tag:yaml.org,2002:{kind}" for kind in ("bool", "int", "float", "timestamp", "value")
)
#: YAML 1.2's core schema: (tag, pattern, the characters a match may start with).
_YAML_12_SCALARS = (
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
)


def _construct_int(loader: Any, node: Any) -> int:
    """An int as YAML 1.2 reads it (PyYAML's reads a leading 0 as octal)."""
    text = loader.construct_scalar(node)
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text)


#: How many values a spec's YAML may hold once its aliases are expanded, and how deep it may
#: nest (a "billion laughs" of nested aliases, or a deep pile of lists, is refused before
#: anything walks it as expanded).
MAX_YAML_VALUES = 100_000
MAX_YAML_DEPTH = 64


def _too_big(node: yaml.Node) -> str | None:
    """Why the YAML under ``node`` is refused before it is read, or None."""
    measured: dict[int, tuple[int, int]] = {}
    try:
        size, depth = _measure(node, measured)
    except _Cycle:
        return "the YAML refers to itself (an alias inside its own anchor); write it out"
    if size > MAX_YAML_VALUES:
        return (
            f"the YAML expands to more than {MAX_YAML_VALUES:,} values (its aliases repeat "
            "what their anchors hold); a spec is small: write it out"
        )
    if depth > MAX_YAML_DEPTH:
        return f"malformed YAML: nested too deep for a spec (more than {MAX_YAML_DEPTH} levels)"
    return None


class _Cycle(Exception):
    pass


class _TooMany(Exception):
    """More than ``MAX_YAML_VALUES`` nodes composed; ``mark``: where the next one starts."""

    def __init__(self, mark: Any) -> None:
        super().__init__()
        self.mark = mark


_MEASURING = (-1, -1)


def _measure(node: yaml.Node, measured: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(values, levels) under ``node`` with every alias expanded, each node measured once.
    Recursion as deep as PyYAML's own composer went (it recurses more per level)."""
    known = measured.get(id(node))
    if known is not None:
        if known is _MEASURING:
            raise _Cycle
        return known
    measured[id(node)] = _MEASURING
    size, depth = 1, 0
    children = node.value  # a scalar's is its text; a mapping's (key, value) node pairs
    if isinstance(children, list):
        for child in children:
            for sub in child if isinstance(child, tuple) else (child,):
                sub_size, sub_depth = _measure(sub, measured)
                size, depth = size + sub_size, max(depth, sub_depth + 1)
            if size > MAX_YAML_VALUES or depth > MAX_YAML_DEPTH:
                break  # refused already: no need to measure the rest
    measured[id(node)] = (size, depth)
    return size, depth


def _collect_lines(
    node: yaml.Node,
    path: tuple[str | int, ...],
    lines: dict[tuple[str | int, ...], int],
    seen: set[int],
) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if id(node) in seen:  # an alias: its anchor's lines were collected under the anchor's path
        return
    seen.add(id(node))
    children = node.value
    if not isinstance(children, list):
        return
    for index, child in enumerate(children):
        if isinstance(child, tuple):
            key, value = child
            sub: tuple[str | int, ...] = (*path, str(key.value))
            lines[sub] = key.start_mark.line + 1
            for form in _key_forms(key)[1:]:  # a key YAML reads as a number, bool or null
                lines.setdefault((*path, form), key.start_mark.line + 1)
            _collect_lines(value, sub, lines, seen)
        else:
            _collect_lines(child, (*path, index), lines, seen)


def yaml_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A pydantic error location as a path in the YAML: pydantic adds the union tag (the
    rule kind) to the location of a rule's field, which the YAML does not have."""
    return tuple(p for p in loc if not (isinstance(p, str) and p in RULE_KINDS))


def line_of(path: tuple[Any, ...], lines: dict[tuple[str | int, ...], int]) -> int | None:
    """The YAML line of ``path`` (a pydantic location), or of the nearest part of it known.
    A mapping key YAML read as a number, a boolean or null is in pydantic's location as a
    number (``true`` as 1) or as text (``'None'``): ``_collect_lines`` keeps its line under
    that spelling too (``_key_forms``)."""
    while path:
        if path in lines:
            return lines[path]
        last = path[-1]  # a list index elsewhere in the path stays a number
        as_text = (*path[:-1], str(int(last))) if isinstance(last, int) else path
        if as_text in lines:
            return lines[as_text]
        path = path[:-1]
    return lines.get(())


def _key_forms(key: yaml.Node) -> tuple[str, ...]:
    """How pydantic's location spells a mapping key that YAML reads as no string (its text
    first: that is how the key's children are found)."""
    text = str(key.value)
    tag = str(getattr(key, "tag", ""))
    if tag.endswith(":int"):
        try:
            return (text, str(int(text, 0) if text.startswith(("0o", "0x")) else int(text)))
        except ValueError:
            return (text,)
    if tag.endswith(":bool"):
        return (text, "1" if text.lower() == "true" else "0")
    if tag.endswith(":null"):
        return (text, "None")
    return (text,)
