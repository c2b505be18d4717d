"""LangChain messages in ``add_messages`` channels: what LangGraph's reducer makes of its
shorthands (``("user", "hi")``, role dicts, strings, chunks) and how saved LangChain messages
come back from a checkpoint, and which state fields hold LangChain messages only: there every
write's role dicts and strings are made LangChain messages (``langchain_messages``, applied by
``reducers.Messages``), as LangGraph stores them. ``langchain_core`` is imported only when such
a message or field is there, so dict messages never load it.
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
    """``items`` for a field typed as LangChain messages, which cannot hold a dict or a
    string: each role dict (``{"role": "user", "content": "hi"}``), ``type`` dict, string and
    LangChain constructor envelope made the LangChain message LangGraph's ``add_messages``
    makes of it (``convert_to_messages``), a saved message's dump read back whole
    (``revive_messages``); LangChain messages and removals (``{"type": "remove", "id": ...}``,
    which the merge reads) as they are. LangChain's ``ValueError`` or
    ``NotImplementedError`` (``NOT_A_MESSAGE``) for what is no message."""
    lc_messages = sys.modules.get("langchain_core.messages")  # a LangChain-typed field: loaded
    if lc_messages is None or all(_kept(m, lc_messages.BaseMessage) for m in items):
        return items
    from langchain_core.messages import convert_to_messages

    base = lc_messages.BaseMessage
    return [
        m
        if _kept(m, base)
        else revive_messages([m])[0]
        if _is_langchain_dump(m)
        else convert_to_messages([m])[0]
        for m in items
    ]


#: The message formats ``add_messages(format=...)`` takes, as LangGraph's.
MESSAGE_FORMATS = (None, "langchain-openai")


def check_message_format(format: str | None) -> None:
    if format not in MESSAGE_FORMATS:
        raise ValueError(f"Unrecognized {format=}. Expected one of 'langchain-openai', None.")


def openai_formatted(messages: list[Any]) -> list[Any]:
    """``messages`` with their contents in OpenAI's format (text, ``image_url`` blocks), made
    LangChain messages again, as LangGraph's ``add_messages(format="langchain-openai")``
    stores them (LangChain's conversion leaves them without ids)."""
    from langchain_core.messages import convert_to_messages, convert_to_openai_messages

    return convert_to_messages(convert_to_openai_messages(messages))


#: What LangChain raises for an item it cannot make a message of: ``convert_to_messages``'s
#: ``ValueError`` and ``NotImplementedError``, and the ``TypeError`` of its ``AnyMessage``'s
#: discriminator validating a dict with no ``type`` (pydantic's ``ValidationError`` is a
#: ``ValueError``).
NOT_A_MESSAGE = (ValueError, TypeError, NotImplementedError)

#: What a field typed as LangChain messages takes, for the errors that refuse a write.
TAKES = (
    "a field typed as LangChain messages takes LangChain messages, role dicts "
    "({'role': 'user', 'content': ...}), strings and (role, content) pairs"
)


def _kept(item: Any, base: type) -> bool:
    return isinstance(item, base) or (type(item) is dict and item.get("type") == "remove")


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
    ``Sequence[HumanMessage | AIMessage] | None``): such a field takes no dict, and its
    ``add_messages`` reducer makes LangChain messages of what is written to it (read once,
    with the state schema: ``reducers.resolve``)."""
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
