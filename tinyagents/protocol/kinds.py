"""``SteeringKind``: what a command asks for (``tinyagents.protocol.commands`` gives it with the
rest of the vocabulary; the payload models, loaded on first use, key their schemas by it)."""

from __future__ import annotations

from enum import StrEnum


class SteeringKind(StrEnum):
    ADD_INSTRUCTION = "add_instruction"
    REPLACE_INSTRUCTION = "replace_instruction"
    ASK_CLARIFYING_QUESTION = "ask_clarifying_question"
    PROVIDE_CONTEXT = "provide_context"
    CONSTRAIN_TOOLS = "constrain_tools"
    CONSTRAIN_MODEL = "constrain_model"
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    APPROVE = "approve"
    REJECT = "reject"
    REDIRECT = "redirect"
    REQUEST_STATUS = "request_status"
    UPDATE_BUDGET = "update_budget"
    UPDATE_STATE = "update_state"
