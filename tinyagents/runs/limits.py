"""Run limits and usage: the numbers that budgets are made of.

``RunLimits`` are what a run may use; ``RunUsage`` is what it has used so far. A child's
effective limits are never above its parent's remaining budget (``bounded_by``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tinyagents._record import Record, record
from tinyagents.errors import ArgumentError, kind_of
from tinyagents.protocol.commands import INT_BOUND, MAX_INT_DIGITS

#: The limit fields that budgets (``update_budget``) may change.
BUDGET_FIELDS = (
    "max_model_calls",
    "max_tool_calls",
    "max_tokens",
    "max_input_tokens",
    "max_output_tokens",
    "max_input_tokens_per_request",
    "max_cost",
    "deadline_s",
)


class RunLimits(BaseModel):
    """Bounds on one run. ``None`` means unbounded.

    ``behavior`` says what a caller gets when a limit is hit: ``"error"`` (the default) makes
    ``SubAgent.invoke`` raise ``RunLimitExceeded`` and ``SubAgentTool`` return an error result;
    ``"stop_with_partial"`` returns the partial output instead (a ``SubAgentTool`` result is
    prefixed with a ``[partial: …]`` line; with ``Agent(output_type=...)`` it is the typed
    output the run's text holds, and text holding none raises ``RunLimitExceeded``). The run's
    status is ``limit_exceeded`` either way.

    A value it does not take (``RunLimits(max_model_calls="3")``, ``max_turns=5``, a NaN
    deadline) raises ``ArgumentError`` naming the field, from the constructor,
    ``model_validate``, ``model_validate_json`` and ``replace`` alike: a ``ConfigurationError``
    as every wrong configuration is, and a ``ValueError`` as pydantic's ``ValidationError``
    was.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    if not TYPE_CHECKING:  # type checkers keep the __init__ pydantic declares, field by field

        def __init__(self, /, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise _refused(exc) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _refused(exc) from None

    @classmethod
    def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            raise _refused(exc) from None

    # strict: a boolean is no count (True was a limit of one); finite: a snapshot is JSON
    max_model_calls: int | None = Field(default=None, gt=0, strict=True)
    # 0: the run may call no tool (its first call ends it limit_exceeded), as pydantic-ai allows
    max_tool_calls: int | None = Field(default=None, ge=0, strict=True)
    max_tokens: int | None = Field(default=None, gt=0, strict=True)
    # input (prompt) and output tokens on their own, as pydantic-ai's input_tokens_limit and
    # output_tokens_limit; max_tokens bounds their sum
    max_input_tokens: int | None = Field(default=None, gt=0, strict=True)
    max_output_tokens: int | None = Field(default=None, gt=0, strict=True)
    # pydantic-ai's per_request_input_tokens_limit: one request's input (its context), not
    # the run's; checked against what the provider reported for it, as pydantic-ai's is
    max_input_tokens_per_request: int | None = Field(default=None, gt=0, strict=True)
    # pydantic-ai's cost_limit: USD, as the models' usage prices it (a response of unknown
    # price counts 0)
    max_cost: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False)
    deadline_s: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False)
    max_depth: int = Field(default=8, ge=0, strict=True)
    tool_timeout_s: float | None = Field(default=300, gt=0, strict=True, allow_inf_nan=False)
    behavior: Literal["error", "stop_with_partial"] = "error"

    @field_validator(
        "max_model_calls",
        "max_tool_calls",
        "max_tokens",
        "max_input_tokens",
        "max_output_tokens",
        "max_input_tokens_per_request",
        "max_depth",
    )
    @classmethod
    def _writable(cls, value: int | None) -> int | None:
        # a run's snapshot is JSON, and Python writes no integer past 4300 digits: a durable
        # runtime could not save the run (as a command's integers, at most MAX_INT_DIGITS)
        if value is not None and value >= INT_BOUND:
            raise ValueError(
                f"more than {MAX_INT_DIGITS} digits: a run's snapshot could not be written as "
                "JSON; give a smaller number"
            )
        return value

    def replace(self, **changes: Any) -> RunLimits:
        """These limits with ``changes``, checked as the constructor checks them (an unknown
        name or a value it refuses is an ``ArgumentError``)."""
        checked = RunLimits.model_validate(changes)  # the changes alone: a limit bounded_by
        # lowered to 0 stays as it is
        return self.model_copy(update={name: getattr(checked, name) for name in changes})

    def bounded_by(self, remaining: dict[str, float | int | None]) -> RunLimits:
        """These limits, lowered where the parent's remaining budget is smaller."""
        changes: dict[str, Any] = {}
        for name, left in remaining.items():
            if left is None:
                continue
            mine = getattr(self, name)
            if mine is None or mine > left:
                changes[name] = left
        # model_copy, not replace: a parent with nothing left lowers a limit to 0, which the
        # constructor refuses for some (the child's first call then ends it limit_exceeded)
        return self.model_copy(update=changes) if changes else self


def _refused(exc: ValidationError) -> ArgumentError:
    """The ``ArgumentError`` for limits pydantic refused: each field, what is wrong and the
    kind of value given (not the value: an integer past 4300 digits has no ``repr``)."""
    for err in exc.errors(include_url=False):
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, ArgumentError):  # the constructor's own, from model_validate
            return ArgumentError(str(cause))
    problems = "; ".join(
        f"{'.'.join(map(str, err['loc'])) or 'limits'}: {err['msg']} (got {kind_of(err['input'])})"
        for err in exc.errors(include_url=False)
    )
    return ArgumentError(f"RunLimits: {problems}")


@record(slots=True, kw_only=True, eq=False, repr=False)
class RunUsage(Record):
    """What a run has used. Children roll their usage up into their ancestors."""

    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    started_at: float | None = None  # monotonic seconds

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def remaining(
        self, limits: RunLimits, now: float | None = None
    ) -> dict[str, float | int | None]:
        """Remaining budget per ``BUDGET_FIELDS`` entry and token limit (``None`` =
        unbounded): what a child's limits are bounded by."""
        elapsed = (
            (now - self.started_at) if (now is not None and self.started_at is not None) else 0.0
        )
        return {
            "max_model_calls": _left(limits.max_model_calls, self.model_calls),
            "max_tool_calls": _left(limits.max_tool_calls, self.tool_calls),
            "max_tokens": _left(limits.max_tokens, self.total_tokens),
            "max_input_tokens": _left(limits.max_input_tokens, self.input_tokens),
            "max_output_tokens": _left(limits.max_output_tokens, self.output_tokens),
            # each request is bounded alone: what a child may send is the cap itself
            "max_input_tokens_per_request": limits.max_input_tokens_per_request,
            "max_cost": None if limits.max_cost is None else max(limits.max_cost - self.cost, 0.0),
            "deadline_s": None
            if limits.deadline_s is None
            else max(limits.deadline_s - elapsed, 0.0),
        }

    def snapshot(self) -> dict[str, Any]:
        return {
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost,
        }


def past(name: str, used: float, limit: float) -> bool:
    """Whether ``used`` passes the budget ``limit`` named ``name``. A cost within a rounding
    error of its budget has used it, not passed it: costs are binary floats, and 0.1 + 0.2
    is 0.30000000000000004, past a ``max_cost`` of 0.3 that may be used exactly."""
    if used <= limit:
        return False
    return name != "max_cost" or not math.isclose(used, limit, rel_tol=_COST_REL_TOL)


def reached(name: str, used: float, limit: float) -> bool:
    """Whether ``used`` has spent the budget ``limit`` named ``name`` (no further call):
    a cost a rounding error short of it has (see ``past``)."""
    return used >= limit or (
        name == "max_cost" and math.isclose(used, limit, rel_tol=_COST_REL_TOL)
    )


#: A cost this close to its budget, relatively, is taken as equal to it: far below any
#: price's own precision, far above the rounding of summing a run's responses' costs.
_COST_REL_TOL = 1e-9


def _left(limit: int | None, used: int) -> int | None:
    return None if limit is None else max(limit - used, 0)
