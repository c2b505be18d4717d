"""The arguments of a ``Store``'s lookups, checked alike for every backend.

A lookup called directly (``store.load_run(...)``, ``store.load_events(type_prefix=...)``)
was answered by whatever each backend's driver made of what it was given: text holding a NUL
found nothing in memory and on SQLite and was a ``StoreError`` on PostgreSQL (its text holds
no NUL), a lone surrogate a ``StoreError`` on both durable stores, a 5 where text goes a bare
``TypeError`` on one backend and "nothing" on another. ``checked_lookups`` wraps each lookup a
``Store`` class defines (``Store.__init_subclass__``), so that every backend, ours or one
written elsewhere, answers the same:

- a value that is not of the argument's type is an ``ArgumentError`` naming the argument;
- text no row can hold (a NUL, a lone surrogate) finds nothing (``None``, ``[]``; a
  ``release_run`` releases nothing), the lookup unasked; a list of statuses or states finds
  what its other items find;
- ``claim_nonce``, which writes, refuses a nonce no row can hold, and an expiry that is no
  datetime (``ArgumentError``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from tinyagents.errors import ArgumentError
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.text import storable

#: The arguments each lookup takes as text (an id, a tenant, a prefix...).
_TEXT = {
    "get_command": ("correlation_id", "scope"),
    "open_commands": ("thread_id",),
    "load_events": ("run_id", "root_run_id", "type_prefix"),
    "load_runs": ("tenant_id",),
    "list_runs": ("tenant_id", "root_run_id"),
    "run_commands": ("run_id",),
    "load_run": ("run_id",),
    "read_events": ("tenant_id", "run_id", "root_run_id"),
    "last_events": ("tenant_id", "run_id", "root_run_id", "type_prefix"),
    "inbox_receipt": ("request_id",),
    "inbox_take": ("owner",),
    "release_run": ("run_id", "owner"),
    "thread_holder": ("tenant_id", "thread_id"),
    "let_go_of_thread": ("tenant_id", "thread_id", "run_id"),
}
#: The arguments each lookup takes as a whole number (None where its default is None).
_NUMBERS = {
    "list_runs": ("limit",),
    "read_events": ("after_id", "limit"),
    "last_events": ("before_id", "limit"),
    "inbox_take": ("limit",),
}
#: The arguments each lookup takes as a list of text, any of which a row may match.
_ANY_OF = {"list_runs": ("statuses",), "run_commands": ("states",)}
#: What a lookup that finds nothing answers.
_NOTHING: dict[str, Callable[[], Any]] = {
    name: list
    for name in _TEXT
    if name not in ("get_command", "load_run", "inbox_receipt", "thread_holder", "let_go_of_thread")
}
_NOTHING.update(
    get_command=lambda: None,
    load_run=lambda: None,
    inbox_receipt=lambda: None,
    release_run=lambda: False,  # no row holds the run (or names the owner): nothing released
    thread_holder=lambda: None,
    let_go_of_thread=lambda: False,
)
LOOKUPS = frozenset({*_TEXT, "claim_nonce"})


def checked_lookups(cls: type) -> None:
    """Wrap each lookup ``cls`` defines itself (see the module's docstring)."""
    for name in LOOKUPS & vars(cls).keys():
        method = vars(cls)[name]
        if not getattr(method, "__isabstractmethod__", False):
            setattr(cls, name, _checked(name, method))


def _checked(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    if name == "claim_nonce":
        return _checked_claim(method)
    signature = inspect.signature(method)
    params = signature.parameters

    @functools.wraps(method)
    async def lookup(self: Any, *args: Any, **kwargs: Any) -> Any:
        given = signature.bind(self, *args, **kwargs).arguments
        findable = True
        for arg in _TEXT[name]:
            if arg in given:
                findable &= _text(arg, given[arg], params[arg].default is None)
        for arg in _NUMBERS.get(name, ()):
            if arg in given:
                _number(arg, given[arg], params[arg].default is None)
        if name == "list_runs" and "before" in given:
            findable &= _run_key(given["before"])
        for arg in _ANY_OF.get(name, ()):
            if arg in given:
                kept = _any_of(arg, given[arg])
                if len(kept) < len(given[arg]):  # what no row holds matches no row
                    findable &= bool(kept)
                    kwargs[arg] = tuple(kept)
        if not findable:
            return _NOTHING[name]()
        return await method(self, *args, **kwargs)

    return lookup


def _checked_claim(method: Callable[..., Any]) -> Callable[..., Any]:
    """``claim_nonce``: a nonce is claimed, not looked up, so one no row can hold is refused
    (never "claimed"), and its expiry is a datetime."""

    @functools.wraps(method)
    async def claim_nonce(self: Any, nonce: object, *, expires_at: object) -> Any:
        if not isinstance(nonce, str) or not storable(nonce):
            raise ArgumentError(
                "nonce is text without NUL characters or lone surrogates, got "
                f"{type(nonce).__name__} {shown_repr(nonce)}"
            )
        if not isinstance(expires_at, datetime):
            raise ArgumentError(
                f"expires_at is a datetime, got {type(expires_at).__name__} "
                f"{shown_repr(expires_at)}"
            )
        return await method(self, nonce, expires_at=expires_at)

    return claim_nonce


def _text(arg: str, value: object, optional: bool) -> bool:
    if value is None and optional:
        return True
    if not isinstance(value, str):
        raise ArgumentError(
            f"{arg} is text{' or None' if optional else ''}, got {type(value).__name__} "
            f"{shown_repr(value)}"
        )
    return storable(value)


def _number(arg: str, value: object, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentError(
            f"{arg} is a whole number{' or None' if optional else ''}, got "
            f"{type(value).__name__} {shown_repr(value)}"
        )


def _run_key(value: object) -> bool:
    if value is None:
        return True
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not all(isinstance(part, str) for part in value)
    ):
        raise ArgumentError(
            "before is a run key (created_at as ISO text, run_id), as a listing's last run "
            f"gives it, or None; got {type(value).__name__} {shown_repr(value)}"
        )
    return all(storable(part) for part in value)


def _any_of(arg: str, value: object) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | set | frozenset):
        raise ArgumentError(
            f"{arg} is a list of text (any of which a row may have), got "
            f"{type(value).__name__} {shown_repr(value)}"
        )
    for item in value:
        if not isinstance(item, str):
            raise ArgumentError(
                f"{arg} is a list of text, holding {type(item).__name__} {shown_repr(item)}"
            )
    return [item for item in value if storable(item)]
