"""Payload summaries for events: secrets masked, long text shortened."""

from __future__ import annotations

from typing import Any

DEFAULT_SECRET_KEYS = frozenset(
    {"api_key", "apikey", "password", "passwd", "token", "authorization", "secret", "cookie"}
)
MASK = "***"


def summarize(
    value: Any,
    *,
    max_chars: int = 200,
    secret_keys: frozenset[str] = DEFAULT_SECRET_KEYS,
) -> Any:
    """A JSON-safe copy of ``value`` with secret-named keys masked and strings cut to
    ``max_chars`` (the cut says how long the original was)."""
    if isinstance(value, dict):
        return {
            str(k): MASK if _is_secret(str(k), secret_keys) else summarize(v, max_chars=max_chars, secret_keys=secret_keys)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [summarize(v, max_chars=max_chars, secret_keys=secret_keys) for v in value]
    if isinstance(value, str):
        return value if len(value) <= max_chars else f"{value[:max_chars]}… ({len(value)} chars)"
    if value is None or isinstance(value, bool | int | float):
        return value
    return summarize(repr(value), max_chars=max_chars, secret_keys=secret_keys)


def _is_secret(key: str, secret_keys: frozenset[str]) -> bool:
    lowered = key.lower().replace("-", "_")
    return any(s in lowered for s in secret_keys)
