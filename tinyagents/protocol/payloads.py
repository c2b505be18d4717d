"""The payload of each ``SteeringKind``: a pydantic model per kind (``PAYLOAD_MODELS``) that
``validate_payload`` (``tinyagents.protocol.commands``) checks a command's payload against.

Loaded with the first payload validated (``tinyagents.protocol._payload_models``): defining
these fourteen models was a twelfth of ``import tinyagents``'s own time, and a program that
sends no command (or a process that only reads a store) never uses them. Each is built on
first use too (``defer_build``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from tinyagents.protocol.kinds import SteeringKind
from tinyagents.protocol.text import not_blank

#: A payload's text: it must show something (``not_blank``), checked by a function the core
#: calls itself (a ``field_validator`` classmethod put one more call in front of it).
_Text = Annotated[str, AfterValidator(not_blank)]


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)


class TextPayload(_Payload):
    text: _Text


class QuestionPayload(_Payload):
    question: _Text


class ContextPayload(_Payload):
    """Text for an agent, or a ``value`` that resumes a graph task's interrupt."""

    text: _Text | None = None
    value: Any = None
    source: str | None = None
    interrupt_id: str | None = None

    @model_validator(mode="after")
    def _needs_content(self) -> ContextPayload:
        if self.text is None and self.value is None:
            raise ValueError("needs 'text' or 'value'")
        return self


class ToolsPayload(_Payload):
    tools: list[str]
    #: Why (a narrowing passed down from a run above says which, by whom, and what it took).
    reason: str | None = None

    @field_validator("tools")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:  # a loop, not any(): no generator to make for every command
            if not name.strip():
                raise ValueError("tool names must not be blank")
        return sorted(set(v))


class ModelsPayload(_Payload):
    models: list[str] = Field(min_length=1)
    reason: str | None = None

    @field_validator("models")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        if any(not name.strip() for name in v):
            raise ValueError("model names must not be blank")
        return list(dict.fromkeys(v))  # keep the caller's preference order


class ReasonPayload(_Payload):
    reason: str | None = None


class CancelPayload(ReasonPayload):
    #: End the run ``aborted`` (a supervisor stopping a run that broke its policy) rather
    #: than ``cancelled``.
    abort: StrictBool | None = None  # true or false: not "yes", 1 or "true"


class DecisionPayload(_Payload):
    """Approve / reject: optionally for one interrupt, with a value handed to the task."""

    interrupt_id: str | None = None
    value: Any = None
    reason: str | None = None


class RedirectPayload(_Payload):
    goto: str | list[str] | None = None
    instruction: _Text | None = None

    @field_validator("goto")
    @classmethod
    def _check_goto(cls, v: str | list[str] | None) -> str | list[str] | None:
        # An empty list named no node: a graph given it would have nowhere to go.
        if isinstance(v, list) and not v:
            raise ValueError("names no node; give at least one")
        if v is not None and any(not name.strip() for name in ([v] if isinstance(v, str) else v)):
            raise ValueError("node names must not be blank")
        return v

    @model_validator(mode="after")
    def _needs_target(self) -> RedirectPayload:
        if self.goto is None and self.instruction is None:
            raise ValueError("needs 'goto' (graph nodes) or 'instruction' (a new goal)")
        return self


class StatusPayload(_Payload):
    pass


class BudgetPayload(_Payload):
    # strict: a boolean is no count (True was a budget of one call), nor is text or 2.0
    max_model_calls: int | None = Field(default=None, gt=0, strict=True)
    # 0: no further tool call, as RunLimits(max_tool_calls=0) allows at the start
    max_tool_calls: int | None = Field(default=None, ge=0, strict=True)
    max_tokens: int | None = Field(default=None, gt=0, strict=True)
    max_input_tokens: int | None = Field(default=None, gt=0, strict=True)
    max_output_tokens: int | None = Field(default=None, gt=0, strict=True)
    max_input_tokens_per_request: int | None = Field(default=None, gt=0, strict=True)
    max_cost: float | None = Field(default=None, gt=0, strict=True)
    deadline_s: float | None = Field(default=None, gt=0, strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_removal(cls, v: Any) -> Any:
        # None is "no limit" in RunLimits; here it was dropped without a word (beside another
        # limit the command was accepted, the limit kept), or refused as naming no limit
        if v is None:
            raise ValueError(
                "cannot remove a limit: update_budget replaces limits with new values and "
                "never lifts one (None is not a value here); to give the run more, set a "
                "larger value (a child's stays within what its ancestors have left)"
            )
        return v

    @model_validator(mode="after")
    def _needs_one(self) -> BudgetPayload:
        if not self.model_dump(exclude_none=True):
            raise ValueError("needs at least one of " + ", ".join(type(self).model_fields))
        return self


class StatePayload(_Payload):
    update: dict[str, Any] = Field(min_length=1)
    as_node: str | None = None


PAYLOAD_MODELS: dict[SteeringKind, type[_Payload]] = {
    SteeringKind.ADD_INSTRUCTION: TextPayload,
    SteeringKind.REPLACE_INSTRUCTION: TextPayload,
    SteeringKind.ASK_CLARIFYING_QUESTION: QuestionPayload,
    SteeringKind.PROVIDE_CONTEXT: ContextPayload,
    SteeringKind.CONSTRAIN_TOOLS: ToolsPayload,
    SteeringKind.CONSTRAIN_MODEL: ModelsPayload,
    SteeringKind.PAUSE: ReasonPayload,
    SteeringKind.RESUME: ReasonPayload,
    SteeringKind.CANCEL: CancelPayload,
    SteeringKind.APPROVE: DecisionPayload,
    SteeringKind.REJECT: DecisionPayload,
    SteeringKind.REDIRECT: RedirectPayload,
    SteeringKind.REQUEST_STATUS: StatusPayload,
    SteeringKind.UPDATE_BUDGET: BudgetPayload,
    SteeringKind.UPDATE_STATE: StatePayload,
}
