"""Payload summaries for events: secrets masked, long text shortened.

A key is secret when it contains one of ``DEFAULT_SECRET_KEYS`` (camelCase, kebab-case, words
apart or run together and plurals included: ``accessTokens``, ``client_secret``,
``Set-Cookie``, ``api_keys``, ``api key``, ``api.key``, ``accesskey``), unless
the name runs on into a longer word (``tokenizer``, ``secretary``). One explicit exception:
a ``token``/``tokens`` key that also names a count (``max_tokens``, ``total_tokens``,
``tokens_used``, ``token_count``: see ``TOKEN_COUNTER_WORDS``) is a usage counter, not a
credential.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sized
from typing import Any

from tinyagents.protocol.commands import INT_BOUND, ReadOnlyDict, ReadOnlyList
from tinyagents.protocol.ids import int_named
from tinyagents.protocol.text import plain_text, text_len

DEFAULT_SECRET_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "access_key",
        "private_key",
        "privatekey",
        "password",
        "passwd",
        "passphrase",
        "token",
        "authorization",
        "secret",
        "cookie",
        "credential",
    }
)
#: Words that make a ``token``/``tokens`` key a usage counter or limit rather than a secret.
TOKEN_COUNTER_WORDS = frozenset(
    {
        "max",
        "min",
        "num",
        "n",
        "count",
        "total",
        "used",
        "usage",
        "limit",
        "budget",
        "remaining",
        "estimated",
        "per",
        "prompt",
        "completion",
        "input",
        "output",
        "cached",
        "cache",
        "reasoning",
        "audio",
        "text",
        "image",
        "context",
    }
)
MASK = "***"
#: How many levels of containers a summary keeps (the value summarised is the first): deeper
#: ones are shown as a marker. A command's payload is never that deep (``MAX_PAYLOAD_DEPTH``),
#: but a model's tool arguments or a tool's result may be, and a summary must not recurse
#: once per level (a run failed on ``RecursionError`` summarising them).
MAX_SUMMARY_DEPTH = 32
#: How many levels of containers ``mask`` keeps (the value masked is the first): deeper ones
#: are shown as a summary's marker. Twice a summary's: a dumped event holds its summaries a
#: few levels down, whole; a cyclic value (a dict holding itself) or one nested past Python's
#: recursion limit is cut there instead of failing on ``RecursionError``.
MAX_MASK_DEPTH = 2 * MAX_SUMMARY_DEPTH
#: How many items (list items and dict entries, at every level together) a summary keeps;
#: the rest of a container is shown as one marker saying how many it held. A summary goes into
#: events (in memory and in the store's event log): a payload or a tool result of a million
#: items must not be copied whole into each of them.
MAX_SUMMARY_ITEMS = 256
#: The key of the marker that stands for the entries a dict's summary leaves out.
MORE_KEY = "…"
#: How many characters of a text (or a key) a summary keeps by default.
_MAX_CHARS = 200


def summarize(
    value: Any,
    *,
    max_chars: int = _MAX_CHARS,
    secret_keys: frozenset[str] = DEFAULT_SECRET_KEYS,
    read_only: bool = False,
) -> Any:
    """A JSON-safe copy of ``value`` with secret-named keys masked, strings and keys cut to
    ``max_chars`` (the cut says how long the original was; a key is read whole for a
    secret's name first), containers nested deeper than ``MAX_SUMMARY_DEPTH`` levels shown
    as a marker (saying how many items it held), and at most ``MAX_SUMMARY_ITEMS`` items
    kept in all (a marker says how many a cut container held). An integer (or an integer
    key) past ``MAX_INT_DIGITS`` digits, which no JSON reader takes back, is named by its
    size. ``read_only``: its dicts and lists are ``ReadOnlyDict``/``ReadOnlyList``, for a
    summary that several events share; then a value that is read-only already (a command's
    payload) and that the summary would keep as it is (``_kept_whole``) is its own summary,
    not copied: it cannot change, and every steering command's events take one."""
    if (
        read_only
        and type(value) is ReadOnlyDict
        and value
        and _kept_whole(value, max_chars, secret_keys) is not None
    ):
        return value
    return _summary(value, max_chars, secret_keys, 1, [MAX_SUMMARY_ITEMS], read_only)


def payload_summary(payload: Any) -> tuple[Any, int | None]:
    """``summarize(payload, read_only=True)``, and where that is ``payload`` itself (a
    read-only payload kept whole) or the empty summary, at most how many UTF-8 bytes
    ``payload`` takes as compact JSON (counted as the payload policy counts it, a number by
    its ``repr``); else None. One walk answers both: every steering command's payload is
    summarised for its events and sized by the payload policy, and most are kept whole."""
    if type(payload) is ReadOnlyDict:
        if not payload:
            return _EMPTY, 2  # {}
        bound = _kept_whole(payload, _MAX_CHARS, DEFAULT_SECRET_KEYS)
        if bound is not None:
            return payload, bound
    return _summary(payload, _MAX_CHARS, DEFAULT_SECRET_KEYS, 1, [MAX_SUMMARY_ITEMS], True), None


def _kept_whole(value: ReadOnlyDict, max_chars: int, secret_keys: frozenset[str]) -> int | None:
    """Whether ``_summary(value, ..., frozen=True)`` would equal ``value``, type for type at
    every level: only read-only dicts (none empty: an empty one's summary is the shared
    ``_EMPTY``) and lists, text keys no longer than ``max_chars`` and none secret-named,
    text no longer than ``max_chars``, numbers, booleans and None, at most
    ``MAX_SUMMARY_ITEMS`` items in all, no container deeper than ``MAX_SUMMARY_DEPTH``.

    None if not; if so, at most how many UTF-8 bytes ``value`` takes as compact JSON (a
    number counted by its ``repr``): six per character (``\\u0000``, the longest escape)
    and eight per item and for the value itself (quotes, a colon or comma, brackets), a
    number (``_kept_item``) by its most characters."""
    left = MAX_SUMMARY_ITEMS
    chars = 0
    # (container, its level): a loop over a stack, not recursion (one payload per command)
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, level = stack.pop()
        left -= len(container)
        if left < 0 or level > MAX_SUMMARY_DEPTH:
            return None
        if type(container) is ReadOnlyDict:
            for key, item in container.items():
                if (
                    type(key) is not str
                    or len(key) > max_chars
                    or (
                        _DEFAULT_ANSWERS[key]
                        if secret_keys is DEFAULT_SECRET_KEYS
                        else _is_secret(key, secret_keys)
                    )
                ):
                    return None
                if type(item) is str:  # the usual value
                    if len(item) > max_chars:
                        return None
                    chars += len(key) + len(item)
                else:
                    more = _kept_item(item, level, stack, max_chars)
                    if more < 0:
                        return None
                    chars += len(key) + more
        else:
            for item in container:
                if type(item) is str:
                    if len(item) > max_chars:
                        return None
                    chars += len(item)
                else:
                    more = _kept_item(item, level, stack, max_chars)
                    if more < 0:
                        return None
                    chars += more
    return 6 * chars + 8 * (MAX_SUMMARY_ITEMS - left + 1)


def _kept_item(item: Any, level: int, stack: list[tuple[Any, int]], max_chars: int) -> int:
    """``_kept_whole`` for an item that is no ``str``: -1 if it is not kept, else the
    characters it adds to the count (a container goes on ``stack``, counted there)."""
    kind = type(item)
    if kind is ReadOnlyDict:
        if not item:
            return -1
        stack.append((item, level + 1))
        return 0
    if kind is ReadOnlyList:
        stack.append((item, level + 1))
        return 0
    if isinstance(item, str):  # a str subclass: kept as it is when short, as by ``_summary``
        # measured by what it holds (its own __len__ may say anything); not counted here,
        # so the payload policy counts its payload itself
        return _UNCOUNTED if text_len(item) <= max_chars else -1
    if item is None or item is True or item is False:
        return 5
    if kind is int:  # at most a digit per three bits, and a sign
        bits: int = item.bit_length()
        return bits // 3 + 2
    if kind is float:
        return 24  # the longest repr of a float: -2.2250738585072014e-308
    if isinstance(item, (int, float)):  # a subclass: its repr (what JSON is counted by) unread
        return _UNCOUNTED
    return -1


#: What ``_kept_item`` counts for a number or text whose size it does not read: more than
#: any payload may take, so that the payload policy counts that payload itself.
_UNCOUNTED = 1 << 40


def _summary(
    value: Any,
    max_chars: int,
    secret_keys: frozenset[str],
    level: int,
    left: list[int],
    frozen: bool,
) -> Any:
    # Positional recursion, at most MAX_SUMMARY_DEPTH deep: every steering command's payload
    # goes through here. ``left`` counts down the items still to keep, shared by all levels.
    # Tuples of types, not ``dict | list``: Python 3.11 builds such a union anew each time the
    # isinstance runs (0.8 µs for five types), and this runs for every value of every payload.
    if isinstance(value, str):
        if type(value) is not str:  # a subclass: measured by what it holds, not its __len__
            size = text_len(value)
            if size <= max_chars:
                return value
            value = plain_text(value)
        return value if len(value) <= max_chars else f"{value[:max_chars]}… ({len(value)} chars)"
    if level > MAX_SUMMARY_DEPTH and isinstance(value, (dict, list, tuple, set, frozenset)):
        return _too_deep(value, MAX_SUMMARY_DEPTH)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if left[0] <= 0:
                out[MORE_KEY] = _held(len(value), "entry", "entries")
                break
            left[0] -= 1
            # (a str subclass as the text it holds: its own __str__ or __len__ may say anything)
            key = k if type(k) is str else plain_text(k) if isinstance(k, str) else _key_text(k)
            if len(key) > max_chars:  # cut as a value is, its whole read for a secret's name
                secret = _secret_name(key, secret_keys)
                key = f"{key[:max_chars]}… ({len(key)} chars)"
            else:
                secret = _is_secret(key, secret_keys)
            if secret:
                out[key] = MASK
            elif type(v) is str and len(v) <= max_chars:  # the usual value: kept as it is
                out[key] = v
            else:
                out[key] = _summary(v, max_chars, secret_keys, level + 1, left, frozen)
        if frozen:
            return ReadOnlyDict(out) if out else _EMPTY
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        kept: list[Any] = []
        for v in value:
            if left[0] <= 0:
                kept.append(_held(len(value), "item", "items"))
                break
            left[0] -= 1
            kept.append(_summary(v, max_chars, secret_keys, level + 1, left, frozen))
        return ReadOnlyList(kept) if frozen else kept
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        # past MAX_INT_DIGITS no JSON reader takes it back: the event holding it was lost
        return value if -INT_BOUND < value < INT_BOUND else int_named(value)
    return _summary(_printed(repr, value), max_chars, secret_keys, level, left, frozen)


def _printed(show: Callable[[Any], str], value: Any) -> str:
    """``show(value)`` (its ``str`` or ``repr``), but a value whose text holds an integer
    Python will not print (past 4,300 digits: a tuple, a dataclass, a ``Fraction`` of one)
    named by its type: printing it raised a bare ``ValueError``. Another ``ValueError`` of
    a ``repr`` of its own is left as it was."""
    try:
        return show(value)
    except ValueError as exc:
        if "integer string conversion" not in str(exc):  # Python's words for that limit
            raise
        return f"a {type(value).__name__} too long to print"


def _key_text(key: Any) -> str:
    """A dict key that is no ``str`` as a summary shows it (and reads it for a secret's
    name): its ``str``, but an integer too long to print (or to read back as JSON) is named
    by its size (``str`` raised ``ValueError`` past 4,300 digits)."""
    if isinstance(key, int) and not -INT_BOUND < key < INT_BOUND:
        return int_named(key)
    return _printed(str, key)


#: The read-only summary of an empty payload, one for all.
_EMPTY = ReadOnlyDict()


def _held(count: int, one: str, many: str) -> str:
    return f"… ({count} {one if count == 1 else many} in all)"


def _too_deep(value: Sized, depth: int) -> str:
    """The marker that stands for a container nested deeper than ``depth`` levels."""
    items = f"{len(value)} {'item' if len(value) == 1 else 'items'}"
    return f"… ({items} nested deeper than {depth} levels)"


def mask(value: Any, *, secret_keys: frozenset[str] = DEFAULT_SECRET_KEYS) -> Any:
    """``value`` with secret-named keys masked at any depth and nothing shortened (for logs
    of data that is already JSON-safe, such as a dumped event), but for containers nested
    deeper than ``MAX_MASK_DEPTH`` levels (a cyclic value too), each shown as a summary's
    marker saying how many items it held."""
    return _masked(value, secret_keys, 1)


def _masked(value: Any, secret_keys: frozenset[str], level: int) -> Any:
    if not isinstance(value, (dict, list, tuple)):
        return value
    if level > MAX_MASK_DEPTH:
        return _too_deep(value, MAX_MASK_DEPTH)
    if isinstance(value, dict):
        return {
            k: MASK
            if _secret_name(k if type(k) is str else _key_text(k), secret_keys)
            else _masked(v, secret_keys, level + 1)
            for k, v in value.items()
        }
    return [_masked(v, secret_keys, level + 1) for v in value]


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")


_WORD = re.compile(r"[a-z0-9]+")


@functools.lru_cache(maxsize=16)
def _secret_pattern(secret_keys: frozenset[str]) -> re.Pattern[str]:
    # A secret name, or its plural, anywhere in the key ("userpassword", "github_token",
    # "api_keys"), but not running on into a longer word: "tokenizer" is not a secret. The
    # words of a name may also be run together: "access_key" finds "accesskey" too.
    names = "|".join(
        re.escape(s).replace("_", "_?") for s in sorted(secret_keys, key=len, reverse=True)
    )
    return re.compile(f"(?:{names})s?(?![a-z])")


#: The longest key whose answer ``_is_secret`` keeps: its cache holds 4,096 keys, and keys of
#: a megabyte (a model looping on one word) kept gigabytes for the life of the process.
_CACHED_KEY_CHARS = 256


def _secret_name(key: str, secret_keys: frozenset[str]) -> bool:
    """``_is_secret``, cached only for a key of at most ``_CACHED_KEY_CHARS``."""
    if len(key) <= _CACHED_KEY_CHARS:
        return _is_secret(key, secret_keys)
    return _is_secret.__wrapped__(key, secret_keys)


class _DefaultAnswers(dict[str, bool]):
    """``_is_secret(key, DEFAULT_SECRET_KEYS)`` by key: a plain dict read in front of its
    cache, for the keys of every steering command's payload (``lru_cache`` builds and hashes
    a tuple of its arguments and moves its entry on every hit). Bounded: it keeps the answers
    for the first ``_DEFAULT_ANSWERS_KEPT`` keys asked (of at most ``_CACHED_KEY_CHARS``
    characters) and never forgets one; later keys are answered by ``_is_secret``'s cache."""

    def __missing__(self, key: str) -> bool:
        answer = _secret_name(key, DEFAULT_SECRET_KEYS)
        if len(self) < _DEFAULT_ANSWERS_KEPT and len(key) <= _CACHED_KEY_CHARS:
            self[key] = answer
        return answer


_DEFAULT_ANSWERS_KEPT = 1024
_DEFAULT_ANSWERS = _DefaultAnswers()


@functools.lru_cache(maxsize=4096)
def _is_secret(key: str, secret_keys: frozenset[str]) -> bool:
    # Any run of separators is one "_": "api key", "api.key" and "api-key" are "api_key".
    normalised = _SEPARATORS.sub("_", _CAMEL_HUMP.sub("_", key).lower())
    hits = {m.group().removesuffix("s") for m in _secret_pattern(secret_keys).finditer(normalised)}
    if hits == {"token"} and not TOKEN_COUNTER_WORDS.isdisjoint(_WORD.findall(normalised)):
        return False  # "max_tokens", "tokens_used": a count of tokens, not a credential
    return bool(hits)
