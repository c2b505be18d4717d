"""LangChain messages in ``add_messages`` channels: what LangGraph's reducer makes of its
shorthands (``("user", "hi")``, role dicts, chunks) and how saved LangChain messages come back
from a checkpoint, and which state fields hold LangChain messages only. ``langchain_core`` is
imported only when such a message is there, so dict messages never load it.
"""

from __future__ import annotations

import collections.abc
import sys
import types
import typing
from typing import Annotated, Any, get_args, get_origin

from pydantic import TypeAdapter


def message_items(write: Any) -> list[Any]:
    """The messages of an ``add_messages`` write: a list's items, or the write as one
    message. A ``(role, content)`` tuple is one message (LangGraph's shorthand, e.g.
    ``("user", "hi")``), made a LangChain message as LangGraph makes it when
    ``langchain_core`` is installed, else kept as written; another tuple (of messages) is
    several. A LangChain message chunk (``AIMessageChunk``) is made the message it adds up to,
    as LangGraph stores it. Strings and dicts are left as written: a dict's keys go to a
    provider's API."""
    if isinstance(write, list) or (isinstance(write, tuple) and not _role_pair(write)):
        items = list(write)
    else:
        items = [write]
    if not any(_role_pair(m) or _is_chunk(m) for m in items):
        return items
    try:
        from langchain_core.messages import convert_to_messages, message_chunk_to_message
    except ImportError:
        return items
    return [
        convert_to_messages([m])[0]
        if _role_pair(m)
        else message_chunk_to_message(m)
        if _is_chunk(m)
        else m
        for m in items
    ]


def langchain_messages(items: list[Any]) -> list[Any]:
    """``items`` for a field typed as LangChain messages: each role dict (``{"role": "user",
    "content": "hi"}``), string and LangChain constructor envelope made the LangChain message
    LangGraph's ``add_messages`` makes of it (``convert_to_messages``); other items as they
    are (a dict with a ``type`` is read by the field's type, as a checkpoint's messages are).
    LangChain's ``ValueError`` or ``NotImplementedError`` for what is no message."""
    if not any(_message_like(m) for m in items):
        return items
    from langchain_core.messages import convert_to_messages

    return [convert_to_messages([m])[0] if _message_like(m) else m for m in items]


def _message_like(item: Any) -> bool:
    return isinstance(item, str) or (type(item) is dict and ("role" in item or item.get("lc") == 1))


def _role_pair(item: Any) -> bool:
    return type(item) is tuple and len(item) == 2 and isinstance(item[0], str)


def _is_chunk(item: Any) -> bool:
    # no chunk exists unless langchain_core's messages are imported: nothing to import here
    lc_messages = sys.modules.get("langchain_core.messages")
    return lc_messages is not None and isinstance(item, lc_messages.BaseMessageChunk)


#: The keys every LangChain message has when pydantic dumps it (``to_jsonable_python``), and
#: the types of its ``AnyMessage`` union: a dict with all of them is a saved LangChain message
#: (a saved ``RemoveMessage`` stays a dict, which ``MessageList.merge`` reads as a removal).
_LANGCHAIN_KEYS = frozenset({"content", "type", "additional_kwargs", "response_metadata"})
_LANGCHAIN_TYPES = frozenset(
    {"human", "ai", "system", "tool", "function", "chat"}
    | {f"{kind}MessageChunk" for kind in ("AI", "Human", "Chat", "System", "Function", "Tool")}
)
_langchain_adapter: Any = None


def revive_messages(messages: list[Any]) -> list[Any]:
    """``messages`` read back from a checkpoint, each saved LangChain message (a dict with the
    keys of its dump) a LangChain message again, as LangGraph's serializer gives them back,
    also in an untyped channel (``Annotated[list, add_messages]``), whose other items stay
    plain JSON. LangChain is imported only when such a message is there, and a checkpoint read
    where it is not installed keeps the dicts."""
    global _langchain_adapter
    if not any(_is_langchain_dump(m) for m in messages):
        return messages
    if _langchain_adapter is None:
        try:
            from langchain_core.messages import AnyMessage
        except ImportError:
            return messages
        _langchain_adapter = TypeAdapter(AnyMessage)
    return [_langchain_adapter.validate_python(m) if _is_langchain_dump(m) else m for m in messages]


def _is_langchain_dump(message: Any) -> bool:
    return (
        type(message) is dict
        and message.keys() >= _LANGCHAIN_KEYS
        and message["type"] in _LANGCHAIN_TYPES
    )


def langchain_typed(annotation: Any) -> bool:
    """Whether every item ``annotation`` allows is a LangChain message (``list[AnyMessage]``,
    ``Sequence[HumanMessage | AIMessage] | None``): such a field takes no dict."""
    lc_messages = sys.modules.get("langchain_core.messages")  # no LangChain type without it
    if lc_messages is None:
        return False
    items = _item_types(annotation)
    return bool(items) and all(
        isinstance(t, type) and issubclass(t, lc_messages.BaseMessage) for t in items
    )


def _item_types(annotation: Any) -> list[Any]:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _item_types(get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for a in get_args(annotation) if a is not type(None) for t in _item_types(a)]
    if origin in (list, tuple, collections.abc.Sequence):
        return [t for a in get_args(annotation) if a is not Ellipsis for t in _item_types(a)]
    return [annotation]
