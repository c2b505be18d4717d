"""One check of a configured bound: a whole number, or a finite number of seconds.

Each component used to write these checks by hand, each a little differently. ``True`` is
refused although Python counts it as 1 (``ring_size=True`` kept one event), as is a
float where a count is meant, a NaN or infinite wait (one that never ends), and a whole
number of seconds too large for a float (``math.isfinite`` raised ``OverflowError``). A
refusal is a ``ConfigurationError`` that names the setting, what it takes and what it got.
"""

from __future__ import annotations

import math

from tinyagents.errors import ConfigurationError
from tinyagents.protocol.ids import shown_repr


def whole_number(name: str, value: object, *, least: int = 1, why: str = "") -> int:
    """``value``, a whole number >= ``least`` (not a bool); ``why``, if given, is said in
    brackets after the bound."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        reason = f" ({why})" if why else ""
        raise ConfigurationError(
            f"{name} must be a whole number >= {least}{reason}, got {shown_repr(value)}"
        )
    return value


def seconds(name: str, value: object, *, zero: bool = False) -> float:
    """``value`` as a float: a finite number of seconds > 0 (>= 0 with ``zero``), not a bool."""
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # a whole number past any float: no finite number of seconds
            number = None
    if number is None or not math.isfinite(number) or number < 0 or (number == 0 and not zero):
        least = ">= 0" if zero else "> 0"
        raise ConfigurationError(
            f"{name} must be a finite number of seconds {least}, got {shown_repr(value)}"
        )
    return number
