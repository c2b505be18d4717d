"""What the runtime knows about one run: identity, place in the tree, grants, limits, status."""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import field
from datetime import datetime
from functools import cache
from typing import Any, Literal, TypedDict

from tinyagents import _clock
from tinyagents._record import Record, record
from tinyagents.errors import ArgumentError, InvalidIdError
from tinyagents.events.models import E, SubAgentEvent
from tinyagents.protocol.ids import MAX_ID_LENGTH, id_problem, shown_repr
from tinyagents.protocol.state import RunStatus
from tinyagents.runs.limits import RunLimits, RunUsage


@cache
def _no_limits() -> RunLimits:
    """The default limits, shared by every run given none (``RunLimits`` is frozen). Made on
    first use: importing the package builds no pydantic model (the first build costs as
    much as a fifth of ``import tinyagents``)."""
    return RunLimits()


def check_id(value: object, name: str, hint: str = "") -> str:
    """``value``, an id the caller gave, if it keeps the id rule (``tinyagents.protocol.ids``:
    at most ``MAX_ID_LENGTH`` characters, no control character); a blank or non-string one is
    refused (``InvalidIdError``), never read as "no id" (a blank ``thread_id`` used to start a
    fresh thread under a random id)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidIdError(
            f"{name} must be a non-blank string, got {shown_repr(value)}{hint}", field=name
        )
    problem = id_problem(value)
    if problem is not None:
        # stored as a key by every backend: SQLite took a NUL, PostgreSQL refused it (and an
        # id past its index's row limit)
        raise InvalidIdError(
            f"{name} must be text without NUL or other control characters, of at most "
            f"{MAX_ID_LENGTH} characters; got {shown_repr(value)}: {problem}",
            field=name,
        )
    if not value.isascii() and not _encodable(value):
        # a lone surrogate was a UnicodeEncodeError from one backend, a StoreError from another
        raise InvalidIdError(
            f"{name} must be text without NUL characters or lone surrogates, "
            f"got {shown_repr(value)}",
            field=name,
        )
    return value


def lookup_id(value: object, name: str = "run_id", what: str = "a run id") -> str | None:
    """``value``, an id to look up what is stored under it: text, else ``ArgumentError`` (a
    5 found nothing, as if no run had that id); ``None`` when no run can have it (a control
    character, a lone surrogate, past the length bound), so that every store answers "none"
    alike: PostgreSQL refused a NUL, and SQLite a surrogate, as ``StoreError``s, which read as
    a store out of reach. A ``SPOOFING`` character or text not in NFC is looked up: runs were
    stored with them (``id_problem(stored=True)``)."""
    if not isinstance(value, str):
        raise ArgumentError(
            f"{name} is {what} (text), got {type(value).__name__} {shown_repr(value)}"
        )
    if id_problem(value, stored=True) is not None or not (value.isascii() or _encodable(value)):
        return None
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


@record(slots=True, kw_only=True, eq=False, repr=False)
class RunInfo(Record):
    """Identity and live state of one run (agent loop or graph run).

    ``tools``/``models`` are the run's allowlists: the names it may use. ``None`` means the run
    has no allowlist of that sort (a graph run, say); a steering command can only narrow them.
    ``withheld_tools``/``withheld_models`` are the tools and models steering took away from
    this run or one above it (``constrain_tools``, ``constrain_model``): a child started below
    it may not use them, whatever its agent names (it gets no more than its parent was left
    with). A run inherits them at its start (``withheld_below``).
    ``accepts`` names the steering kinds a command to this run can ever be applied with; None
    (the rule) when its kind of run takes every kind. A graph task's entry of a function or
    sub-graph node has it (``tinyagents.graph.lowering.node_steering``): its graph run refuses
    the rest for that task, so an operator's client offers only these; so has a graph run
    itself (``lowering.run_steering``: what it refuses for itself is left out).
    """

    run_id: str
    root_run_id: str = ""
    parent_run_id: str | None = None
    thread_id: str | None = None
    agent_id: str | None = None
    task_id: str | None = None
    node_id: str | None = None
    tenant_id: str = "default"
    depth: int = 0
    kind: Literal["agent", "graph"] = "agent"
    tools: frozenset[str] | None = None
    models: tuple[str, ...] | None = None
    withheld_tools: frozenset[str] = frozenset()
    withheld_models: frozenset[str] = frozenset()
    limits: RunLimits = field(default_factory=_no_limits)
    usage: RunUsage = field(default_factory=RunUsage)
    status: RunStatus = RunStatus.RUNNING
    created_at: datetime = field(default_factory=_clock.now)
    accepts: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        check_id(self.run_id, "run_id")
        if "/" in self.run_id or self.run_id in (".", ".."):
            # the operator API and the console name a run by its id in the path
            raise InvalidIdError(
                f"run_id must fit in a URL path segment (no '/', not '.' or '..'), "
                f"got {self.run_id!r}",
                field="run_id",
            )
        check_id(self.tenant_id, "tenant_id")  # a blank one names nobody (no token has one)
        if not self.root_run_id:
            self.root_run_id = self.run_id

    def remaining(self) -> dict[str, float | int | None]:
        return self.usage.remaining(self.limits, _clock.monotonic())

    def snapshot(self) -> dict[str, Any]:
        """A JSON-safe dict (for the store, the HTTP API and Redis mirrors); ``accepts`` only
        when the run has it."""
        snap = {
            "run_id": self.run_id,
            "root_run_id": self.root_run_id,
            "parent_run_id": self.parent_run_id,
            "thread_id": self.thread_id,
            "agent_id": self.agent_id,
            "task_id": self.task_id,
            "node_id": self.node_id,
            "tenant_id": self.tenant_id,
            "depth": self.depth,
            "kind": self.kind,
            "tools": sorted(self.tools) if self.tools is not None else None,
            "models": list(self.models) if self.models is not None else None,
            "limits": self.limits.model_dump(mode="json"),
            "usage": self.usage.snapshot(),
            "status": self.status.value,
            "created_at": self.created_at.isoformat(),
        }
        if self.accepts is not None:
            snap["accepts"] = list(self.accepts)
        return snap


class Withheld(TypedDict):
    """What steering took away from a run and the runs above it, which a run started below
    it inherits: ``RunInfo(..., **withheld_below(parent))``."""

    withheld_tools: frozenset[str]
    withheld_models: frozenset[str]


def withheld_below(parent: RunInfo | None) -> Withheld:
    """The tools and models withheld from a run started under ``parent`` (none at the top)."""
    if parent is None:
        return {"withheld_tools": frozenset(), "withheld_models": frozenset()}
    return {"withheld_tools": parent.withheld_tools, "withheld_models": parent.withheld_models}


def narrow_run(
    info: RunInfo, *, tools: frozenset[str] | None = None, models: tuple[str, ...] | None = None
) -> None:
    """Narrow the run's tools and/or models to those given; the ones taken away are withheld
    from every child it starts from now on (and theirs), whatever the child's agent names."""
    if tools is not None:
        info.withheld_tools = _withhold(info.withheld_tools, info.tools, tools)
        info.tools = tools
    if models is not None:
        info.withheld_models = _withhold(info.withheld_models, info.models, models)
        info.models = models


def _withhold(
    withheld: frozenset[str], current: Iterable[str] | None, left: Container[str]
) -> frozenset[str]:
    taken = [name for name in current or () if name not in left]
    return withheld.union(taken) if taken else withheld


#: How much of an error message a run's events keep (a provider's error may echo the whole
#: request): its head, and how long it was. ``RunResult.error`` keeps it all.
MAX_EVENT_ERROR_CHARS = 4000


def event_error(error: str) -> str:
    """``error`` as a run's events keep it: at most ``MAX_EVENT_ERROR_CHARS``, then its
    length."""
    if len(error) <= MAX_EVENT_ERROR_CHARS:
        return error
    return f"{error[:MAX_EVENT_ERROR_CHARS]}… ({len(error)} chars)"


def _cut_error(fields: dict[str, Any]) -> dict[str, Any]:
    error = fields.get("error")
    if type(error) is str:
        fields["error"] = event_error(error)
    return fields


def run_event(info: RunInfo, cls: type[E], **fields: Any) -> E:
    """An event of ``cls`` that happened on run ``info``, with its place in the run tree (an
    ``error`` longer than ``MAX_EVENT_ERROR_CHARS`` cut to its head)."""
    return cls(
        run_id=info.run_id,
        root_run_id=info.root_run_id,
        parent_run_id=info.parent_run_id,
        tenant_id=info.tenant_id,
        **_cut_error(fields),
    )


def subagent_event(
    child: RunInfo, parent: RunInfo | None, type_: str, **fields: Any
) -> SubAgentEvent:
    """A ``subagent.*`` event about ``child``, reported on its parent's run (``parent``, the
    parent's info: the event names the parent's own parent, as every event of that run does;
    None when the parent is not in this runtime's tree)."""
    return SubAgentEvent(
        type=type_,  # type: ignore[arg-type]  # one of SubAgentEvent's types, by the caller
        run_id=child.parent_run_id,
        root_run_id=child.root_run_id,
        parent_run_id=parent.parent_run_id if parent is not None else None,
        tenant_id=child.tenant_id,
        child_run_id=child.run_id,
        agent_id=child.agent_id,
        **_cut_error(fields),
    )
