"""Payload summaries for events: secrets masked, long text shortened."""

from __future__ import annotations

import functools
import re
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
    return _summary(value, max_chars, secret_keys)


def _summary(value: Any, max_chars: int, secret_keys: frozenset[str]) -> Any:
    # Positional recursion: every steering command's payload goes through here.
    if isinstance(value, str):
        return value if len(value) <= max_chars else f"{value[:max_chars]}… ({len(value)} chars)"
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = k if type(k) is str else str(k)
            if _is_secret(key, secret_keys):
                out[key] = MASK
            elif type(v) is str and len(v) <= max_chars:  # the usual value: kept as it is
                out[key] = v
            else:
                out[key] = _summary(v, max_chars, secret_keys)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [_summary(v, max_chars, secret_keys) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _summary(repr(value), max_chars, secret_keys)


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@functools.lru_cache(maxsize=16)
def _secret_pattern(secret_keys: frozenset[str]) -> re.Pattern[str]:
    # A secret name anywhere in the key ("userpassword", "github_token"), but not running on
    # into a longer word: "max_tokens" and "tokenizer" are not secrets.
    names = "|".join(re.escape(s) for s in sorted(secret_keys, key=len, reverse=True))
    return re.compile(f"(?:{names})(?![a-z])")


@functools.lru_cache(maxsize=4096)
def _is_secret(key: str, secret_keys: frozenset[str]) -> bool:
    normalised = _CAMEL_HUMP.sub("_", key).lower().replace("-", "_")
    return _secret_pattern(secret_keys).search(normalised) is not None
