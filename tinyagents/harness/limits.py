"""Enforcing ``RunLimits``: checks before model and tool calls, usage roll-up to ancestors.

The limit and usage types live in ``tinyagents.runs.limits`` (the steering policies need them
too); this module is where a running agent loop spends against them.
"""

from __future__ import annotations

from tinyagents import _clock
from tinyagents.errors import RunLimitExceeded
from tinyagents.harness.model import Usage
from tinyagents.runs.info import RunInfo
from tinyagents.runs.limits import RunLimits, RunUsage
from tinyagents.runs.tree import RunTree

__all__ = [
    "RunLimits",
    "RunUsage",
    "check_before_model_call",
    "check_before_tool_call",
    "record_model_usage",
]


def check_deadline(info: RunInfo) -> None:
    limits, usage = info.limits, info.usage
    if limits.deadline_s is None or usage.started_at is None:
        return
    elapsed = _clock.monotonic() - usage.started_at
    if elapsed >= limits.deadline_s:
        raise RunLimitExceeded(
            "deadline_s", round(elapsed, 3), limits.deadline_s, run_id=info.run_id
        )


def check_before_model_call(info: RunInfo) -> None:
    limits, usage = info.limits, info.usage
    if limits.max_model_calls is not None and usage.model_calls >= limits.max_model_calls:
        raise RunLimitExceeded(
            "max_model_calls", usage.model_calls, limits.max_model_calls, run_id=info.run_id
        )
    if limits.max_tokens is not None and usage.total_tokens >= limits.max_tokens:
        raise RunLimitExceeded(
            "max_tokens", usage.total_tokens, limits.max_tokens, run_id=info.run_id
        )
    check_deadline(info)


def check_before_tool_call(info: RunInfo) -> None:
    limits, usage = info.limits, info.usage
    if limits.max_tool_calls is not None and usage.tool_calls >= limits.max_tool_calls:
        raise RunLimitExceeded(
            "max_tool_calls", usage.tool_calls, limits.max_tool_calls, run_id=info.run_id
        )
    check_deadline(info)


def record_model_usage(info: RunInfo, tree: RunTree, usage: Usage) -> None:
    """Count one model call on the run and every ancestor (usage rolls up)."""
    for target in (info, *tree.ancestors(info.run_id)):
        u = target.usage
        u.model_calls += 1
        u.input_tokens += usage.input_tokens
        u.output_tokens += usage.output_tokens
        u.cost += usage.cost or 0.0


def record_tool_call(info: RunInfo, tree: RunTree) -> None:
    for target in (info, *tree.ancestors(info.run_id)):
        target.usage.tool_calls += 1


def child_limits(requested: RunLimits, parent: RunInfo) -> RunLimits:
    """The limits a child of ``parent`` really gets: never above the parent's remaining."""
    if parent.depth + 1 > parent.limits.max_depth:
        raise RunLimitExceeded(
            "max_depth", parent.depth + 1, parent.limits.max_depth, run_id=parent.run_id
        )
    bounded = requested.bounded_by(parent.remaining())
    return bounded.replace(max_depth=min(bounded.max_depth, parent.limits.max_depth))
