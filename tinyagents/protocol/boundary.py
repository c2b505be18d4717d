"""The safe points at which a run takes steering."""

from __future__ import annotations

from enum import StrEnum


class Boundary(StrEnum):
    """Safe points at which a run takes steering (harness loop, then graph supersteps)."""

    BEFORE_MODEL_CALL = "before_model_call"
    AFTER_MODEL_RESPONSE = "after_model_response"
    BEFORE_TOOL_DISPATCH = "before_tool_dispatch"
    AFTER_TOOL_RESULT = "after_tool_result"
    BEFORE_LOOP_CONTINUATION = "before_loop_continuation"
    WHILE_PAUSED = "while_paused"
    BETWEEN_SUPERSTEPS = "between_supersteps"
