"""Conflict rules that are not about ordering: narrowing allowlists and redirect conflicts."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class RedirectConflict(StrEnum):
    """What to do when a REDIRECT arrives while another is still pending for the same target."""

    FIRST_ACCEPTED = "first_accepted"  # the pending one wins; the newcomer is superseded
    HIGHEST_PRIORITY = "highest_priority"  # higher priority wins (then older, then correlation id)
    ERROR = "error"  # the newcomer is rejected


def narrow_tools(current: frozenset[str] | None, requested: Iterable[str]) -> frozenset[str]:
    """The tool allowlist after a constrain_tools: the intersection, never a superset of ``current``."""
    wanted = frozenset(requested)
    return wanted if current is None else current & wanted


def narrow_models(current: tuple[str, ...] | None, requested: Iterable[str]) -> tuple[str, ...]:
    """The model allowlist after a constrain_model, in the current preference order."""
    wanted = list(dict.fromkeys(requested))
    if current is None:
        return tuple(wanted)
    keep = set(wanted)
    return tuple(m for m in current if m in keep)
