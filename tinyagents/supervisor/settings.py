"""What a runtime reads of supervision before it has a supervisor: its actor's name and the
environment's settings (``TINYAGENTS_PAUSE_MAX_S``, ``TINYAGENTS_JUDGE_TIMEOUT_S``,
``TINYAGENTS_MAX_CONCURRENT_JUDGES``).

A runtime loads the rest of ``tinyagents.supervisor`` (the spec's pydantic models, the rules,
the judge) with the first run it has to watch; it reads these at once, so a bad setting is
refused by ``Runtime(...)`` whether or not a run is ever supervised.
"""

from __future__ import annotations

import os

from tinyagents._bounds import whole_number
from tinyagents.errors import ConfigurationError

#: The name of the supervisor's actor: ``SteeringActor.middleware(SUPERVISOR)``.
SUPERVISOR = "supervisor"
#: How long a supervisor's pause may last before it becomes an abort (``TINYAGENTS_PAUSE_MAX_S``).
DEFAULT_PAUSE_MAX_S = 300.0
#: How long one judge call may take (``TINYAGENTS_JUDGE_TIMEOUT_S``).
DEFAULT_JUDGE_TIMEOUT_S = 30.0
#: The longest dwell cap (30 days) and judge timeout (an hour) a spec or the environment may
#: set: beyond them a pause never escalates, a judge never times out, a typo (an extra digit,
#: an exponent) said nowhere.
MAX_PAUSE_MAX_S = 30 * 24 * 3600.0
MAX_JUDGE_TIMEOUT_S = 3600.0
#: The shortest dwell cap and judge timeout (a millisecond, the event loop's timer
#: granularity): below it a pause is an abort at once and every judge call times out, a
#: typo (``1e-9`` for ``1e9``) said nowhere; ``0`` was refused already.
MIN_SECONDS = 0.001
#: How many judge calls a supervisor has under way at once, all runs together
#: (``Runtime(max_concurrent_judges=...)`` or ``TINYAGENTS_MAX_CONCURRENT_JUDGES``): a
#: supervisor watching 500 runs sent 500 calls at once to one provider.
DEFAULT_MAX_CONCURRENT_JUDGES = 8


def _env_float(name: str, default: float, most: float) -> float:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number of seconds") from None
    if not MIN_SECONDS <= value <= most:  # nan and inf too
        raise ConfigurationError(
            f"{name}={raw!r} must be a number of seconds from {MIN_SECONDS:g} to {most:,g}"
        )
    return value


def env_pause_max_s() -> float:
    """``TINYAGENTS_PAUSE_MAX_S`` (default 300 s); ``ConfigurationError`` if it is not a
    number of seconds from ``MIN_SECONDS`` (a millisecond) to ``MAX_PAUSE_MAX_S`` (30 days)."""
    return _env_float("TINYAGENTS_PAUSE_MAX_S", DEFAULT_PAUSE_MAX_S, MAX_PAUSE_MAX_S)


def env_judge_timeout_s() -> float:
    """``TINYAGENTS_JUDGE_TIMEOUT_S`` (default 30 s), checked as ``env_pause_max_s`` (at most
    ``MAX_JUDGE_TIMEOUT_S``, an hour)."""
    return _env_float("TINYAGENTS_JUDGE_TIMEOUT_S", DEFAULT_JUDGE_TIMEOUT_S, MAX_JUDGE_TIMEOUT_S)


def judge_concurrency(value: int | None = None) -> int:
    """``value``, else ``TINYAGENTS_MAX_CONCURRENT_JUDGES``, else 8; ``ConfigurationError`` if
    it is no whole number >= 1."""
    if value is not None:
        return whole_number("max_concurrent_judges", value)
    raw = os.environ.get("TINYAGENTS_MAX_CONCURRENT_JUDGES")
    if raw is None:
        return DEFAULT_MAX_CONCURRENT_JUDGES
    try:
        count = int(raw)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigurationError(
            f"TINYAGENTS_MAX_CONCURRENT_JUDGES={raw!r} must be a whole number >= 1"
        )
    return count
