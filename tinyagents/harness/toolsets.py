"""Toolsets: groups of tools an agent (or one run of it) is given together, as pydantic-ai's.

    calendar = FunctionToolset(max_retries=2)

    @calendar.tool
    def today() -> str:
        return "2026-12-07"

    agent = Agent("planner", model, toolsets=[calendar.prefixed("cal")])  # offers cal_today

A toolset is read when an agent is made (``Agent(toolsets=...)``) or a run starts
(``agent.run(..., toolsets=...)``, ``agent.override(toolsets=...)``): what it holds then is
what the agent or the run has. pydantic-ai asks its toolsets again at each step, with the
run's context (``get_tools(ctx)``). Here that is the work of ``prepared(fn)`` and a filter of
two parameters (``filtered(lambda ctx, tool: ...)``): before each model request they are given
the toolset's tools the run still has (steering's ``constrain_tools`` narrows first) and
hide or reword some of them, never adding one. A filter of the tool alone
(``filtered(lambda tool: ...)``) is applied once, when the toolset is read.
"""

from __future__ import annotations

import copy
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, overload

from tinyagents.errors import ConfigurationError, kind_of
from tinyagents.harness.context import RunContext, RunFunction
from tinyagents.harness.model import ToolSpec
from tinyagents.harness.tools import (
    FunctionTool,
    Tool,
    check_prepare,
    check_prepared_tools,
    check_retries,
    is_tool_name,
)
from tinyagents.protocol.ids import shown_repr


class Toolset(ABC):
    """Tools offered together (pydantic-ai's ``AbstractToolset``). Subclass and override
    ``get_tools``, or use ``FunctionToolset``; ``prefixed``, ``filtered`` and ``renamed``
    wrap one."""

    @abstractmethod
    def get_tools(self) -> dict[str, Tool]:
        """The toolset's tools, by the name each is offered under."""

    @property
    def label(self) -> str:
        """How an error names the toolset (pydantic-ai's ``label``)."""
        return type(self).__name__

    @property
    def tool_name_conflict_hint(self) -> str:
        """What an error about a tool name taken twice suggests."""
        return "Rename the tool or wrap the toolset in a `PrefixedToolset` to avoid name conflicts."

    def prefixed(self, prefix: str) -> PrefixedToolset:
        """This toolset with each tool offered as ``<prefix>_<name>``."""
        return PrefixedToolset(self, prefix)

    def filtered(self, filter_func: Callable[[ToolSpec], bool]) -> FilteredToolset:
        """This toolset with only the tools ``filter_func(tool_spec)`` keeps."""
        return FilteredToolset(self, filter_func)

    def renamed(self, name_map: Mapping[str, str]) -> RenamedToolset:
        """This toolset with tools renamed: ``name_map`` maps each new name to the old one."""
        return RenamedToolset(self, name_map)

    def prepared(self, prepare_func: Callable[..., Any]) -> PreparedToolset:
        """This toolset with ``prepare_func(ctx, specs)`` deciding, before each model request,
        which of its tools the request offers and how they are described."""
        return PreparedToolset(self, prepare_func)

    @property
    def per_request(self) -> bool:
        """Whether something in this toolset (``prepared``, a filter of ``(ctx, spec)``)
        decides per model request what it offers: a run then asks ``request_specs``."""
        return False

    async def request_specs(self, ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        """What a model request offers of ``specs``: this toolset's tools (under its names)
        the run still has, described as the run's tools describe them. A subset, each spec
        possibly reworded; never a tool it was not given."""
        return specs


class FunctionToolset(Toolset):
    """Tools made from functions (pydantic-ai's ``FunctionToolset``): given as a list, added
    with ``@toolset.tool`` (a function taking the run's context) or ``@toolset.tool_plain``
    (one that does not; each refuses the other kind, as pydantic-ai's do) or
    ``add_function``/``add_tool``. ``max_retries`` caps each tool of the set that has no cap of
    its own (``@tool(retries=...)``); a tool with neither takes the agent's ``retries``."""

    def __init__(
        self,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        *,
        max_retries: int | None = None,
        id: str | None = None,
    ) -> None:
        check_retries("FunctionToolset", max_retries)
        if id is not None and not isinstance(id, str):
            raise ConfigurationError(f"FunctionToolset(id=...) is text, got {kind_of(id)}")
        #: pydantic-ai's toolset ``id``: here only a name errors give the toolset.
        self.id = id
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
            raise ConfigurationError(
                f"FunctionToolset(tools=...) takes a list of tools, got {kind_of(tools)}"
            )
        self.max_retries = max_retries
        #: The tools added, by name (pydantic-ai's ``FunctionToolset.tools``).
        self.tools: dict[str, Tool] = {}
        for item in tools:
            self.add_tool(item if isinstance(item, Tool) else _function_tool(item))

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
        prepare: Callable[..., Any] | None = None,
        args_validator: Callable[..., Any] | None = None,
    ) -> Callable[[Callable[..., Any]], FunctionTool]: ...
    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        prepare: Callable[..., Any] | None = None,
        args_validator: Callable[..., Any] | None = None,
    ) -> Any:
        """Add a function taking the run's context as a tool, as pydantic-ai's
        ``@toolset.tool``: ``@toolset.tool`` or ``@toolset.tool(name=..., ...)`` (``@tool``'s
        arguments). Returns the ``FunctionTool``; a function without a ``RunContext``
        parameter is refused: add it with ``tool_plain``."""
        kw = {
            "name": name,
            "description": description,
            "timeout_s": timeout_s,
            "retries": retries,
            "prepare": prepare,
            "args_validator": args_validator,
        }
        return tool_decorator(fn, self.add_tool, takes_ctx=True, **kw)

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
        prepare: Callable[..., Any] | None = None,
        args_validator: Callable[..., Any] | None = None,
    ) -> Callable[[Callable[..., Any]], FunctionTool]: ...
    def tool_plain(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        prepare: Callable[..., Any] | None = None,
        args_validator: Callable[..., Any] | None = None,
    ) -> Any:
        """``tool`` for a function that does not take the run's context (pydantic-ai's
        ``@toolset.tool_plain``); one that does is refused."""
        kw = {
            "name": name,
            "description": description,
            "timeout_s": timeout_s,
            "retries": retries,
            "prepare": prepare,
            "args_validator": args_validator,
        }
        return tool_decorator(fn, self.add_tool, takes_ctx=False, **kw)

    def add_function(self, fn: Callable[..., Any], **kwargs: Any) -> FunctionTool:
        """Add ``fn`` as a tool (``FunctionTool(fn, **kwargs)``)."""
        made = FunctionTool(fn, **kwargs)
        self.add_tool(made)
        return made

    def add_tool(self, tool: Tool) -> None:
        """Add ``tool``; a second tool of its name is a ``ConfigurationError``."""
        if not isinstance(tool, Tool):
            raise ConfigurationError(f"add_tool takes a Tool, got {kind_of(tool)}")
        if tool.name in self.tools:
            raise ConfigurationError(f"Tool name conflicts with existing tool: {tool.name!r}")
        self.tools[tool.name] = tool

    @property
    def label(self) -> str:
        return "FunctionToolset" if self.id is None else f"FunctionToolset {self.id!r}"

    def get_tools(self) -> dict[str, Tool]:
        if self.max_retries is None:
            return dict(self.tools)
        return {
            name: t if t.retries is not None else _copy(t, retries=self.max_retries)
            for name, t in self.tools.items()
        }


class WrapperToolset(Toolset):
    """A toolset that changes what another one (``wrapped``) offers; as it is, it offers what
    ``wrapped`` offers (pydantic-ai's ``WrapperToolset``, to subclass)."""

    def __init__(self, wrapped: Toolset) -> None:
        if not isinstance(wrapped, Toolset):
            raise ConfigurationError(f"a toolset wraps a Toolset, got {kind_of(wrapped)}")
        self.wrapped = wrapped

    @property
    def label(self) -> str:
        return f"{type(self).__name__}({self.wrapped.label})"

    @property
    def tool_name_conflict_hint(self) -> str:
        return self.wrapped.tool_name_conflict_hint

    def get_tools(self) -> dict[str, Tool]:
        return self.wrapped.get_tools()

    @property
    def per_request(self) -> bool:
        return self.wrapped.per_request

    async def request_specs(self, ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        if not self.wrapped.per_request:
            return specs
        new_of = self._names_above()
        if not new_of:  # the wrapped toolset's names are this one's
            return await self.wrapped.request_specs(ctx, specs)
        old_of = {new: old for old, new in new_of.items()}
        below = [_spec_named(s, old_of.get(s.name, s.name)) for s in specs]
        done = await self.wrapped.request_specs(ctx, below)
        return [_spec_named(s, new_of.get(s.name, s.name)) for s in done]

    def _names_above(self) -> dict[str, str]:
        """The wrapped toolset's tool names this one offers under other names (old: new)."""
        return {}


class PrefixedToolset(WrapperToolset):
    """``wrapped``'s tools, each offered as ``<prefix>_<name>``."""

    def __init__(self, wrapped: Toolset, prefix: str) -> None:
        super().__init__(wrapped)
        if not isinstance(prefix, str) or not prefix or not is_tool_name(f"{prefix}_x"):
            raise ConfigurationError(
                f"a toolset's prefix is letters, digits, '_' or '-', got {shown_repr(prefix)}"
            )
        self.prefix = prefix

    @property
    def tool_name_conflict_hint(self) -> str:
        return "Change the `prefix` attribute to avoid name conflicts."

    def get_tools(self) -> dict[str, Tool]:
        return {
            f"{self.prefix}_{name}": _copy(t, name=f"{self.prefix}_{name}")
            for name, t in self.wrapped.get_tools().items()
        }

    def _names_above(self) -> dict[str, str]:
        return {name: f"{self.prefix}_{name}" for name in self.wrapped.get_tools()}


class FilteredToolset(WrapperToolset):
    """``wrapped``'s tools that ``filter_func`` keeps. As pydantic-ai's, a filter of
    ``(ctx, tool_spec)`` (sync or async) is asked before each model request, with the run's
    context, about each of the toolset's tools the run still has; a filter of the tool alone,
    ``(tool_spec)``, once, when the toolset is read (when the agent is made or the run
    starts)."""

    def __init__(self, wrapped: Toolset, filter_func: Callable[..., Any]) -> None:
        super().__init__(wrapped)
        positional = _positional(filter_func) if callable(filter_func) else -1
        if positional not in (1, 2, None):
            raise ConfigurationError(
                "a toolset's filter is a function (ctx, tool_spec) -> bool, asked before each "
                "model request, or (tool_spec) -> bool, asked once; got "
                + (kind_of(filter_func) if positional == -1 else f"{positional} parameters")
            )
        self.filter_func = filter_func
        #: The filter of ``(ctx, tool_spec)``, asked per request (None: one of the tool alone).
        self._per_request = (
            RunFunction(filter_func, values=1, what="toolset filter", agent="")
            if positional == 2
            else None
        )

    def get_tools(self) -> dict[str, Tool]:
        tools = self.wrapped.get_tools()
        if self._per_request is not None:
            return tools
        return {name: t for name, t in tools.items() if self.filter_func(t.spec())}

    @property
    def per_request(self) -> bool:
        return self._per_request is not None or self.wrapped.per_request

    async def request_specs(self, ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        specs = await super().request_specs(ctx, specs)
        keep = self._per_request
        if keep is None:
            return specs
        return [s for s in specs if await keep(ctx, _spec_copy(s))]


class PreparedToolset(WrapperToolset):
    """``wrapped``'s tools as ``prepare_func(ctx, specs)`` offers them (pydantic-ai's
    ``PreparedToolset``): sync or async, called before each model request with copies of the
    toolset's tools the run still has (steering's ``constrain_tools`` narrows first), it
    returns those to offer, each possibly described otherwise. Adding a tool, renaming one,
    giving one twice or returning None (return ``[]`` to offer none) is refused, and the run
    ends ``failed`` before the request."""

    def __init__(self, wrapped: Toolset, prepare_func: Callable[..., Any]) -> None:
        super().__init__(wrapped)
        what = f"{self.label}: prepare"
        if prepare_func is None:  # (a tool's "no prepare"; a toolset made to prepare needs one)
            raise ConfigurationError(f"{what} must be a function (ctx, specs), got None")
        check_prepare(what, prepare_func, "specs")
        self.prepare_func = prepare_func
        self._prepare = RunFunction(prepare_func, values=1, what="toolset prepare", agent="")

    @property
    def per_request(self) -> bool:
        return True

    async def request_specs(self, ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        specs = await super().request_specs(ctx, specs)
        returned = await self._prepare(ctx, [_spec_copy(s) for s in specs])
        return check_prepared_tools("", specs, returned, what=f"{self.label}: prepare")


class RenamedToolset(WrapperToolset):
    """``wrapped``'s tools, those ``name_map`` names ({new name: old name}) renamed."""

    def __init__(self, wrapped: Toolset, name_map: Mapping[str, str]) -> None:
        super().__init__(wrapped)
        if not isinstance(name_map, Mapping):
            raise ConfigurationError(f"renamed() takes a dict, got {kind_of(name_map)}")
        self.name_map = dict(name_map)
        odd = [pair for pair in self.name_map.items() if not all(isinstance(n, str) for n in pair)]
        if odd:
            raise ConfigurationError(
                f"renamed() takes a dict of {{new name: old name}}, text each, got "
                f"{shown_repr(odd[0][0])}: {shown_repr(odd[0][1])}"
            )
        names_of: dict[str, list[str]] = {}
        for new, old in self.name_map.items():
            names_of.setdefault(old, []).append(new)
        twice = {old: news for old, news in names_of.items() if len(news) > 1}
        if twice:  # (pydantic-ai keeps the last name and drops the others without a word)
            old, news = next(iter(twice.items()))
            raise ConfigurationError(
                f"renamed() gives tool {old!r} two names, {news}: a tool has one name "
                "({new name: old name}); to offer it twice, add it to a second toolset"
            )

    def get_tools(self) -> dict[str, Tool]:
        tools = self.wrapped.get_tools()
        unknown = sorted(old for old in self.name_map.values() if old not in tools)
        if unknown:
            raise ConfigurationError(
                f"renamed() names tools the toolset does not have: {unknown}; it has "
                f"{sorted(tools)}"
            )
        new_of = {old: new for new, old in self.name_map.items()}
        renamed: dict[str, Tool] = {}
        for name, t in tools.items():
            new = new_of.get(name, name)
            if new in renamed:  # pydantic-ai's words
                raise ConfigurationError(
                    f"Renaming tool {name!r} to {new!r} conflicts with existing tool."
                    if new != name
                    else f"Tool name conflicts with previously renamed tool: {new!r}."
                )
            renamed[new] = t if new == name else _copy(t, name=new)
        return renamed

    def _names_above(self) -> dict[str, str]:
        return {old: new for new, old in self.name_map.items()}


class CombinedToolset(Toolset):
    """The tools of several toolsets; a name two of them offer is a ``ConfigurationError``
    (pydantic-ai's ``UserError``), naming both: rename one (``prefixed``, ``renamed``)."""

    def __init__(self, toolsets: Sequence[Toolset]) -> None:
        self.toolsets = toolsets_of("CombinedToolset", toolsets)

    def get_tools(self) -> dict[str, Tool]:
        return combined_tools(self.toolsets)

    @property
    def per_request(self) -> bool:
        return any(toolset.per_request for toolset in self.toolsets)

    async def request_specs(self, ctx: RunContext, specs: list[ToolSpec]) -> list[ToolSpec]:
        return await specs_of_toolsets(ctx, self.toolsets, specs)


async def specs_of_toolsets(
    ctx: RunContext, toolsets: Sequence[Toolset], specs: list[ToolSpec]
) -> list[ToolSpec]:
    """``specs`` (the tools a request would offer), those of each of ``toolsets`` that
    decides per request (``per_request``) as its ``request_specs`` offers them; the others
    as they are, in their order."""
    for toolset in toolsets:
        if not toolset.per_request:
            continue
        names = toolset.get_tools().keys()
        given = [s for s in specs if s.name in names]
        returned = await toolset.request_specs(ctx, given)
        checked = check_prepared_tools("", given, returned, what=toolset.label)
        offered = {s.name: s for s in checked}
        specs = [
            offered.get(s.name) or s for s in specs if s.name not in names or s.name in offered
        ]
    return specs


def toolsets_of(owner: str, toolsets: object) -> list[Toolset]:
    """``toolsets`` as a list, each a ``Toolset``."""
    if isinstance(toolsets, (str, bytes, Mapping, Toolset)) or not isinstance(toolsets, Iterable):
        raise ConfigurationError(
            f"{owner}: toolsets must be a list of toolsets, got {kind_of(toolsets)}"
        )
    listed = list(toolsets)
    for index, item in enumerate(listed):
        if not isinstance(item, Toolset):
            raise ConfigurationError(
                f"{owner}: toolsets[{index}] must be a Toolset (e.g. FunctionToolset([...])), "
                f"got {kind_of(item)}"
            )
    return listed


def combined_tools(
    toolsets: Sequence[Toolset], taken: Mapping[str, Tool] | None = None
) -> dict[str, Tool]:
    """The tools of ``toolsets`` by name, after ``taken`` (an agent's own): a name offered
    twice is a ``ConfigurationError``."""
    tools: dict[str, Tool] = dict(taken or {})
    owner: dict[str, str] = {name: "the agent" for name in tools}
    for toolset in toolsets:
        for name, t in toolset.get_tools().items():
            if name in tools:  # pydantic-ai's words
                raise ConfigurationError(
                    f"{toolset.label} defines a tool whose name conflicts with existing tool "
                    f"from {owner[name]}: {name!r}. {toolset.tool_name_conflict_hint}"
                )
            tools[name] = t
            owner[name] = toolset.label
    return tools


def tool_decorator(
    fn: Callable[..., Any] | None,
    add: Callable[[Tool], None],
    *,
    takes_ctx: bool,
    **kwargs: Any,
) -> Any:
    """``@x.tool``/``@x.tool_plain`` (``takes_ctx``), bare or with ``kwargs``: the function
    made a ``FunctionTool`` (``function_tool``) and given to ``add``."""

    def made(f: Callable[..., Any]) -> FunctionTool:
        t = function_tool(f, takes_ctx=takes_ctx, **kwargs)
        add(t)
        return t

    return made(fn) if fn is not None else made


def function_tool(fn: Callable[..., Any], *, takes_ctx: bool, **kwargs: Any) -> FunctionTool:
    """``fn`` as a ``FunctionTool`` for pydantic-ai's ``tool`` (``takes_ctx``: it must take
    the run's context) or ``tool_plain`` (it must not), refused in pydantic-ai's words."""
    made = FunctionTool(fn, **kwargs)
    if made.takes_ctx != takes_ctx:
        where = getattr(fn, "__qualname__", made.name)
        raise ConfigurationError(
            f"Error generating schema for {where}:\n  "
            + (
                "First parameter of tools that take context must be annotated with "
                "RunContext[...] (or add it with tool_plain)"
                if takes_ctx
                else "RunContext annotations can only be used with tools that take context "
                "(add it with tool)"
            )
        )
    return made


def _function_tool(item: object) -> FunctionTool:
    if not callable(item):
        raise ConfigurationError(f"a toolset's tools are Tools or functions, got {kind_of(item)}")
    return FunctionTool(item)


def _spec_copy(spec: ToolSpec) -> ToolSpec:
    """A copy of ``spec`` a user's function may change."""
    return _spec_named(spec, spec.name)


def _spec_named(spec: ToolSpec, name: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=spec.description,
        parameters=copy.deepcopy(spec.parameters),
        strict=spec.strict,
    )


def _copy(t: Tool, **changes: Any) -> Tool:
    """A copy of ``t`` with ``changes`` (a new name is checked as a tool's name is)."""
    if "name" in changes and not is_tool_name(changes["name"]):
        raise ConfigurationError(
            f"tool name {changes['name']!r} is not 1-64 letters, digits, '_' or '-'"
        )
    made = copy.copy(t)
    for key, value in changes.items():
        setattr(made, key, value)
    return made


def _positional(fn: Callable[..., Any]) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return len([p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
