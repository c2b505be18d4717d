"""Reducers: how the writes of one superstep combine into a channel's value.

Declare one per state field with ``Annotated[T, reducer]``. Built-ins: overwrite (the
default; two writes in one step are an error), ``append`` / ``operator.add`` on lists,
``add_messages`` (by ``id``), ``union`` (sets), ``min`` and ``max``. Any other binary
function ``(current, update) -> new`` works too.

Each built-in also knows its *delta*: what to store in a checkpoint so that replaying the
deltas rebuilds the value (the appended items for ``append``, not the whole list). That is
what keeps checkpoint storage proportional to what was written.

Writes are applied in place where that is safe (lists and sets the channel owns), so a step
costs O(its writes), not O(state size).

``Overwrite(value)`` (LangGraph's) is a write that bypasses the reducer: the channel takes
``value`` as it is (``reduce`` applies it; its delta is ``Replaced``, which the checkpoint
stores as a snapshot).
"""

from __future__ import annotations

import builtins
import collections.abc
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, get_origin

from tinyagents import _clock
from tinyagents._record import Record
from tinyagents.errors import InvalidUpdateError
from tinyagents.graph._context import user_failure
from tinyagents.graph.langchain import (
    NOT_A_MESSAGE,
    TAKES,
    check_message_format,
    langchain_messages,
    langchain_typed,
    message_items,
    openai_formatted,
)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: A channel that has never been written.
MISSING: Final = _Missing()


#: The key of an ``Overwrite``'s dict forms (LangGraph's ``{"__overwrite__": value}`` and
#: ``{"type": "__overwrite__", "value": value}``, an ``Overwrite`` that went through JSON).
OVERWRITE: Final = "__overwrite__"


@dataclass(slots=True, eq=False, repr=False)
class Overwrite(Record):
    """A write that bypasses the channel's reducer: the channel's value becomes ``value``
    (LangGraph's ``Overwrite``)::

        def reset(state):
            return {"log": Overwrite(["started over"])}  # not appended: replaces the list

    One per channel per step (two are an ``InvalidUpdateError``); writes of the same step
    after it, in task order, are dropped, as LangGraph's. ``{"__overwrite__": value}`` does
    the same where a value must be plain JSON (a ``Command`` sent over HTTP)."""

    value: Any
    type: Literal["__overwrite__"] = OVERWRITE


def overwritten(write: Any) -> tuple[bool, Any]:
    """``(True, value)`` for an ``Overwrite`` or one of its dict forms, else ``(False, None)``."""
    if type(write) is Overwrite:
        return True, write.value
    if isinstance(write, dict):
        if len(write) == 1 and OVERWRITE in write:
            return True, write[OVERWRITE]
        if write.get("type") == OVERWRITE and "value" in write:
            return True, write["value"]
    return False, None


class Replaced:
    """The delta of a step that overwrote a channel: its whole new value (a checkpoint with
    one is saved as a snapshot, which a reducer's delta cannot express)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Reducer(ABC):
    """Base class: ``apply`` combines a step's writes, ``replay`` re-applies a stored delta."""

    name = "reducer"
    #: True if the stored delta is the whole new value (replay = overwrite).
    delta_is_value = True
    #: False if ``diff`` cannot give back the writes (a fold's new value is not its write).
    diff_gives_writes = True
    #: True if ``apply`` changes the current value in place in a way that putting the old
    #: value back cannot undo (a set's or message list's merge): a step of several channels
    #: applies such a channel last, on a copy unless it is the last (``GraphCore.apply_writes``)
    merges_in_place = False

    @abstractmethod
    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        """Return ``(new_value, delta)`` for the writes of one step, in task order."""

    def replay(self, current: Any, delta: Any) -> Any:
        return delta

    def diff(self, before: Any, after: Any) -> list[Any]:
        """The writes that turn ``before`` into ``after`` (for a sub-graph's output)."""
        if after is MISSING or (before is not MISSING and _same(before, after)):
            return []
        return [after]

    def normalize(self, write: Any) -> Any:
        """The form a write is persisted in (pending writes of an unfinished step)."""
        return write

    def replace(self, value: Any) -> Any:
        """The channel's value once an ``Overwrite(value)`` bypassed this reducer."""
        return value


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # objects whose __eq__ is not a plain bool (arrays)
        return a is b


class LastValue(Reducer):
    name = "overwrite"

    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        if len(writes) != 1:
            raise InvalidUpdateError(
                f"channel {key!r} received {len(writes)} writes in one superstep but has no "
                "reducer; declare one, e.g. Annotated[list[str], operator.add], or write it "
                "from one node per step"
            )
        return writes[0], writes[0]


class UntrackedValue(LastValue):
    """A state field that is never checkpointed (LangGraph's ``UntrackedValue``)::

        class State(TypedDict):
            db: Annotated[Connection, UntrackedValue]  # or UntrackedValue(Connection)

    The nodes after a write see it for the rest of that run, and the run's result holds it,
    but no checkpoint, pending write or saved ``Send`` argument keeps it: ``get_state``, a
    resumed, continued or forked run, and ``update_state`` do not have it, so its value
    needs no JSON form (a connection, a client, a cache). ``guard`` (the default) allows one
    write per superstep (more are an ``InvalidUpdateError``, as for a field with no
    reducer); ``guard=False`` keeps the last of several, in task order. ``typ`` is
    LangGraph's argument, taken for its signature: the field's annotation is its type."""

    name = "untracked"

    def __init__(self, typ: Any = None, guard: bool = True) -> None:
        self.guard = guard

    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        if len(writes) != 1 and self.guard:
            raise InvalidUpdateError(
                f"At key {key!r}: UntrackedValue(guard=True) can receive only one value per "
                "step. Use guard=False if you want to store any one of multiple values."
            )
        return writes[-1], writes[-1]

    def __repr__(self) -> str:
        return f"UntrackedValue(guard={self.guard})"


def _items(write: Any) -> list[Any]:
    if isinstance(write, (list, tuple)):
        return list(write)
    return [write]


class Append(Reducer):
    """List concatenation; a non-list write appends one item. ``add``: the reducer is
    ``operator.add`` on a list, which adds as Python does, as LangGraph's: a write that is no
    list (a tuple, a string, one item) is a ``TypeError``, and so is a list or one item added
    to its tuple value (an ``Overwrite``'s), to which a tuple adds to make a tuple."""

    name = "append"
    delta_is_value = False
    #: ``operator.add`` (a subclass that sets no ``add`` appends)
    add = False

    def __init__(self, *, add: bool = False) -> None:
        self.add = add
        if add:
            self.name = "add"  # as errors name it: the field's reducer is operator.add

    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        add = self.add
        if add and type(current) is tuple:
            return _added(current, writes)
        new: list[Any] = []
        for write in writes:
            if add and not isinstance(write, list):
                raise _not_added(list, write)
            new.extend(_items(write))
        if current is MISSING or current is None:
            return new.copy(), new
        if type(current) is not list:
            current = list(current)  # a tuple default or a decoded sequence: own a list
        current.extend(new)
        return current, new

    def replay(self, current: Any, delta: Any) -> Any:
        if current is MISSING or current is None:
            return list(delta)
        if type(current) is not list:
            current = list(current)
        current.extend(delta)
        return current

    def diff(self, before: Any, after: Any) -> list[Any]:
        return _extension(before, after, list)

    def normalize(self, write: Any) -> Any:
        # operator.add's write is kept as it was, so a saved write it refused is refused again
        return write if self.add else _items(write)

    def replace(self, value: Any) -> Any:
        # a tuple is kept, as LangGraph's (its checkpoint reads back a list); a list is copied,
        # so the channel owns it (it is extended in place)
        return value if type(value) is tuple else _items(value)


def _extension(before: Any, after: Any, kind: type) -> list[Any]:
    """The write (of ``kind``, list or tuple) that makes ``after`` of ``before``: the items
    added, or an ``Overwrite`` of the whole value when ``after`` does not extend ``before``."""
    if after is MISSING or after is None:
        return []
    if before is MISSING or before is None:
        return [kind(after)]
    n = len(before)
    if len(after) >= n and all(a is b or a == b for a, b in zip(before, after, strict=False)):
        return [kind(after[n:])] if len(after) > n else []
    return [Overwrite(kind(after))]  # not an extension (an Overwrite wrote it)


def _not_added(to: type, write: Any) -> TypeError:
    """Python's error for ``to() + write``, in its words (LangGraph's channel raises it)."""
    return TypeError(
        f'can only concatenate {to.__name__} (not "{type(write).__name__}") to {to.__name__}'
    )


class TupleAdd(Reducer):
    """``operator.add`` on a tuple field: a tuple write makes a longer tuple, anything else is
    Python's ``TypeError``, as LangGraph's channel adds. The value stays a tuple when its
    checkpoint is read back (LangGraph's reads back a list, to which a tuple cannot add)."""

    name = "add"
    delta_is_value = False

    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        for write in writes:
            if not isinstance(write, tuple):
                raise _not_added(tuple, write)
        start = () if current is MISSING or current is None else tuple(current)
        return _added(start, writes)

    def replay(self, current: Any, delta: Any) -> Any:
        start = () if current is MISSING or current is None else tuple(current)
        return start + tuple(delta)

    def diff(self, before: Any, after: Any) -> list[Any]:
        return _extension(before, after, tuple)

    def replace(self, value: Any) -> Any:
        return value if type(value) is tuple else tuple(value)


def _added(value: tuple[Any, ...], writes: list[Any]) -> tuple[Any, Any]:
    """``value + write`` for each write, as LangGraph's ``operator.add`` folds them (raises
    ``TypeError`` for one that is no tuple); the delta is the items added."""
    for write in writes:
        value = value + write
    return value, [item for write in writes for item in write]


def message_id(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("id")
    return getattr(message, "id", None)


class MessageList(list[Any]):
    """The value of an ``add_messages`` channel: a list with an id → position index."""

    __slots__ = ("_index",)

    def __init__(self, items: Iterable[Any] = ()) -> None:
        super().__init__(items)
        self._index: dict[Any, int] = {}
        self._reindex()

    def _reindex(self) -> None:
        self._index = {}
        for pos, message in enumerate(self):
            mid = message_id(message)
            if mid is not None:
                self._index[mid] = pos

    def merge(self, messages: Iterable[Any]) -> None:
        """One ``add_messages`` write, as LangGraph merges it: a message whose id is present
        replaces it, others append; a removal (a message whose ``type`` is ``"remove"``, as
        LangChain's ``RemoveMessage``) deletes the message with its id once the write is
        merged (so the same removal twice is one, and a message removed and written again
        keeps its place), or with ``REMOVE_ALL_MESSAGES`` every message before it, in the
        list and in the write: what comes before the write's last remove-all is dropped
        unread, as LangGraph's. What follows it is merged as any write (one message per id,
        removals applied), where LangGraph keeps it as written. O(len(messages)), and
        O(len(self)) when the write removes something. A removal of an id that is not there
        raises before anything changes."""
        messages = list(messages)
        last_clear = _last_remove_all(messages)
        if last_clear is not None:
            messages = messages[last_clear + 1 :]
        self._check_removals(messages, cleared=last_clear is not None)
        if last_clear is not None:
            self.clear()
            self._index = {}
        doomed: set[Any] = set()
        for message in messages:
            mid = message_id(message)
            if _is_removal(message):
                doomed.add(mid)
                continue
            pos = self._position(mid) if mid is not None else None
            if pos is None:
                if mid is not None:
                    self._index[mid] = len(self)
                self.append(message)
            else:
                self[pos] = message
                doomed.discard(mid)
        if doomed:
            self[:] = [m for m in self if message_id(m) not in doomed]
            self._reindex()

    def _check_removals(self, messages: list[Any], *, cleared: bool) -> None:
        """Raise, as LangGraph's, for a removal of an id neither written before it nor here
        (``cleared``: the list is about to be emptied by a remove-all before ``messages``)."""
        written: set[Any] = set()
        for message in messages:
            mid = message_id(message)
            if not _is_removal(message):
                if mid is not None:
                    written.add(mid)
            elif mid not in written and (cleared or self._position(mid) is None):
                raise ValueError(  # LangGraph's words: ported matches hold
                    f"Attempting to delete a message with an ID that doesn't exist ({mid!r})"
                )

    def _position(self, mid: Any) -> int | None:
        pos = self._index.get(mid)
        if pos is not None and (pos >= len(self) or message_id(self[pos]) != mid):
            self._reindex()  # someone edited the list behind our back
            pos = self._index.get(mid)
        return pos


#: The id of a removal that deletes every message before it (LangGraph's name and value).
REMOVE_ALL_MESSAGES = "__remove_all__"


def _last_remove_all(messages: list[Any]) -> int | None:
    """The position of the last ``REMOVE_ALL_MESSAGES`` removal in ``messages``, if any."""
    for pos in range(len(messages) - 1, -1, -1):
        message = messages[pos]
        if _is_removal(message) and message_id(message) == REMOVE_ALL_MESSAGES:
            return pos
    return None


def _is_removal(message: Any) -> bool:
    kind = message.get("type") if isinstance(message, dict) else getattr(message, "type", None)
    return kind == "remove"


def detach(value: Any) -> Any:
    """A copy of a container a reducer changes in place (lists, sets, dicts, message lists),
    so that an update which fails half-way leaves the original as it was; other values as is."""
    if isinstance(value, MessageList):
        return MessageList(value)
    if type(value) in (list, set, dict):
        return type(value)(value)
    return value


def add_messages(left: Any = None, right: Any = None, *, format: str | None = None) -> Any:
    """Merge message lists by id: a message whose ``id`` exists replaces it, others append.
    A message object without an id gets one first (``with_message_ids``), as LangGraph's.
    A ``(role, content)`` tuple is one message, a LangChain one when ``langchain_core`` is
    installed (``message_items``). ``add_messages(format="langchain-openai")`` (no lists) is
    the reducer that stores LangChain messages with OpenAI-format contents, as LangGraph's:
    ``Annotated[list, add_messages(format="langchain-openai")]``."""
    check_message_format(format)
    if left is None and right is None:
        return Messages(langchain=True, format=format) if format else add_messages
    if right is None:
        raise _no_messages(left)
    merged = MessageList(with_message_ids(message_items(left or [])))
    merged.merge(with_message_ids(message_items(right)))
    return MessageList(openai_formatted(merged)) if format else merged


def _no_messages(left: Any) -> ValueError:
    """LangGraph's error for a ``None`` write to ``add_messages``, in its words (which name
    ``'right'`` as the one received when ``left`` is empty)."""
    return ValueError(
        "Must specify non-null arguments for both 'left' and 'right'. Only received: "
        f"'{'left' if left else 'right'}'."
    )


def with_message_ids(messages: list[Any]) -> list[Any]:
    """``messages``, each message object whose ``id`` is None given one (a UUID from
    ``_clock``, as LangGraph's ``add_messages`` gives LangChain messages), so that a later
    write can replace or remove it (``RemoveMessage(id=m.id)``). The object gets the id in
    place, as LangGraph does it; a frozen pydantic model is copied. Dicts are left as they are:
    their keys go to a provider's API as written (give one an ``"id"`` to address it)."""
    for pos, message in enumerate(messages):
        if isinstance(message, dict) or getattr(message, "id", False) is not None:
            continue
        new_id = _clock.new_uuid()
        try:
            message.id = new_id
        except (AttributeError, TypeError, ValueError):  # frozen: a copy with the id
            copy = getattr(message, "model_copy", None)
            if copy is not None:
                messages[pos] = copy(update={"id": new_id})
    return messages


class Messages(Reducer):
    """``add_messages``. Where the field is typed as LangChain messages (``langchain``), each
    write's role dicts, strings and pairs are made LangChain messages, as LangGraph's
    reducer makes them: every write to the channel passes here (a node's, a ``Command``'s,
    run input, ``update_state``); elsewhere dicts and strings are kept as written."""

    name = "add_messages"
    delta_is_value = False
    merges_in_place = True

    def __init__(self, *, langchain: bool = False, format: str | None = None) -> None:
        check_message_format(format)
        #: the field holds LangChain messages only (``langchain_typed``), decided once when
        #: the schema is read, so a write to another field pays nothing for it
        self.langchain = langchain or format is not None
        #: ``add_messages(format="langchain-openai")``: the list is stored in OpenAI's format
        self.format = format

    def items(self, write: Any) -> list[Any]:
        """The messages of one write, as the field holds them (LangChain's error,
        ``NOT_A_MESSAGE``, for what a LangChain-typed field cannot take)."""
        items = message_items(write)
        return langchain_messages(items) if self.langchain else items

    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        if any(write is None for write in writes):
            raise _no_messages(current if current is not MISSING else None)
        try:
            items = [with_message_ids(self.items(write)) for write in writes]
        except NOT_A_MESSAGE as exc:
            if not self.langchain:
                raise
            raise InvalidUpdateError(f"invalid message for {key!r}: {exc} ({TAKES})") from None
        new = [m for write in items for m in write]
        if len(items) == 1 or not any(_is_removal(m) for m in new):
            return self.replay(current, new), new
        # several writes that remove: each is merged on its own, as LangGraph folds them,
        # which one merge of them all (the delta's replay) may not give: saved whole
        value = self.replay(MISSING, [] if current is MISSING or current is None else current)
        for write in items:  # on a copy: a write that fails leaves the channel as it was
            value.merge(write)
        if self.format:
            value = MessageList(openai_formatted(value))
        return value, Replaced(value)

    def replay(self, current: Any, delta: Any) -> Any:
        if not isinstance(current, MessageList):
            current = MessageList(() if current is MISSING or current is None else current)
        current.merge(delta)
        if self.format:  # the whole list, as LangGraph formats it at every merge
            return MessageList(openai_formatted(current))
        return current

    def diff(self, before: Any, after: Any) -> list[Any]:
        if after is MISSING or after is None:
            return []
        old = {message_id(m): m for m in ([] if before is MISSING or before is None else before)}
        changed = [m for m in after if (mid := message_id(m)) is None or not _same(old.get(mid), m)]
        if before is not MISSING and before is not None:
            # messages without an id cannot be matched: count them as new only past the prefix
            anonymous_before = sum(1 for m in before if message_id(m) is None)
            skipped = 0
            kept = []
            for m in changed:
                if message_id(m) is None and skipped < anonymous_before:
                    skipped += 1
                    continue
                kept.append(m)
            changed = kept
        return [changed] if changed else []

    def normalize(self, write: Any) -> Any:
        if write is None:  # refused when applied: saved as it is, so it is refused again
            return None
        return with_message_ids(message_items(write))  # a task's saved result holds the ids

    def replace(self, value: Any) -> Any:
        return self.replay(MISSING, with_message_ids(message_items(value)))


def union(left: Any, right: Any) -> set[Any]:
    """Set union; a non-collection ``right`` adds one item."""
    result = set(left or ())
    result.update(_set_items(right))
    return result


def _set_items(write: Any) -> Iterable[Any]:
    if isinstance(write, (set, frozenset, list, tuple)):
        return write
    return (write,)


class Union(Reducer):
    name = "union"
    delta_is_value = False
    merges_in_place = True

    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        new: list[Any] = []
        for write in writes:
            new.extend(_set_items(write))
        # an unhashable item raises here, before the set changes
        return self.replay(current, set(new)), new

    def replay(self, current: Any, delta: Any) -> Any:
        if current is MISSING or current is None:
            return set(delta)
        current.update(delta)
        return current

    def diff(self, before: Any, after: Any) -> list[Any]:
        if after is MISSING or after is None:
            return []
        added = set(after) - set(() if before is MISSING or before is None else before)
        return [added] if added else []

    def normalize(self, write: Any) -> Any:
        return list(_set_items(write))

    def replace(self, value: Any) -> Any:
        return set(_set_items(value))


class Extreme(Reducer):
    """``min`` or ``max`` of the current value and every write."""

    diff_gives_writes = False

    def __init__(self, pick: Callable[..., Any]) -> None:
        self.pick = pick
        self.name = pick.__name__

    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        value = self.pick(writes) if current is MISSING else self.pick(current, *writes)
        return value, value


class Binary(Reducer):
    """Any ``(current, update) -> new`` function, folded over the step's writes in order.

    The function may change ``current`` in place (``a.extend(b); return a``), which putting
    the old value back cannot undo: the channel merges in place (a step of several channels
    applies it last, on a copy unless it is the last), and a fold of several writes works on
    a copy (``detach``), so a write it refuses midway leaves the value as the step found it.
    One write goes straight to the function: a function that raises after it changed the
    value in place leaves it changed (as would anything it changes below the top level)."""

    diff_gives_writes = False
    merges_in_place = True

    def __init__(self, fn: Callable[[Any, Any], Any], initial: Callable[[], Any] | None) -> None:
        self.fn = fn
        self.initial = initial
        self.name = getattr(fn, "__name__", repr(fn))

    def apply(self, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
        rest = writes
        if current is MISSING:
            if self.initial is not None:
                current = self.initial()
            else:
                # the first write starts the value: a copy when the fold goes on, so that
                # the node's own write (saved with its task) is not changed
                current, rest = writes[0], writes[1:]
                if rest:
                    current = detach(current)
        elif len(rest) > 1:
            current = detach(current)
        try:
            for write in rest:
                current = self.fn(current, write)
        except BaseException as exc:  # sys.exit, a library's own BaseException: failures
            failure = user_failure(f"the reducer {self.name!r} of {key!r}", exc)
            if failure is exc:
                raise
            raise failure from exc
        return current, current


def overwrite(left: Any, right: Any) -> Any:
    """The default reducer, spelled out: the new value replaces the old one."""
    return right


def append(left: Any, right: Any) -> list[Any]:
    """List concatenation (``operator.add`` on lists); a single item is appended."""
    return [*(left or ()), *_items(right)]


#: The concrete types LangGraph starts an abstract collection's reducer channel with.
_CONCRETE: dict[Any, type] = {
    collections.abc.Sequence: list,
    collections.abc.MutableSequence: list,
    collections.abc.Set: set,
    collections.abc.MutableSet: set,
    collections.abc.Mapping: dict,
    collections.abc.MutableMapping: dict,
}


def empty_value(annotation: Any) -> Callable[[], Any] | None:
    """Where a reducer channel with no field default starts, as LangGraph's
    ``BinaryOperatorAggregate``: its type called with no arguments (``[]`` for ``list[str]``,
    ``0`` for ``int``, ``""`` for ``str``); None (no value until written) for a type that
    cannot be called so, such as a union."""
    typ = annotation
    while hasattr(typ, "__origin__"):  # list[str] -> list, Annotated[T, ...] -> T
        typ = typ.__origin__
    typ = _CONCRETE.get(typ, typ)
    try:
        typ()
    except Exception:
        return None
    factory: Callable[[], Any] = typ
    return factory


def reduce(reducer: Reducer, key: str, current: Any, writes: list[Any]) -> tuple[Any, Any]:
    """``reducer.apply`` unless a write is an ``Overwrite``: then the channel takes its value
    (as LangGraph's: the writes after it in the step are dropped, a second one is an
    ``InvalidUpdateError``) and the delta is ``Replaced``."""
    for write in writes:
        if type(write) is Overwrite or (type(write) is dict and _maybe_overwrite(write)):
            break
    else:
        return reducer.apply(key, current, writes)
    if isinstance(reducer, LastValue) and len(writes) > 1:
        reducer.apply(key, current, writes)  # raises: two writes to a channel with no reducer
    found = [value for is_overwrite, value in map(overwritten, writes) if is_overwrite]
    if not found:  # a dict that only looked like one
        return reducer.apply(key, current, writes)
    if len(found) > 1:
        raise InvalidUpdateError(
            f"channel {key!r} received {len(found)} Overwrite values in one superstep; "
            "Can receive only one Overwrite value per super-step."
        )
    value = reducer.replace(found[0]) if _collection(found[0]) else found[0]
    return value, Replaced(value)


def _collection(value: Any) -> bool:
    """An ``Overwrite``'s value that its channel's reducer takes in (a list, tuple or set);
    any other value (None, a string, one message) is stored as is, as LangGraph's."""
    return isinstance(value, (list, tuple, set, frozenset))


def _maybe_overwrite(write: dict[Any, Any]) -> bool:
    return OVERWRITE in write or write.get("type") == OVERWRITE


def normalize_write(reducer: Reducer, write: Any) -> Any:
    """The form a write is persisted in: ``reducer.normalize``'s, an ``Overwrite`` as its
    dict form (plain JSON) around the normalized value."""
    is_overwrite, value = overwritten(write)
    if is_overwrite:
        return {OVERWRITE: reducer.normalize(value) if _collection(value) else value}
    return reducer.normalize(write)


def resolve(fn: Any, annotation: Any) -> Reducer:
    """The ``Reducer`` for the callable found in ``Annotated[annotation, fn]``."""
    if isinstance(fn, Reducer):
        return fn
    origin = get_origin(annotation) or annotation
    if fn is overwrite:
        return LastValue()
    if fn is append:
        return Append()
    if fn is operator.add and origin is tuple:
        return TupleAdd()
    if fn is operator.add and origin is list:
        return Append(add=True)
    if fn is add_messages:
        return Messages(langchain=langchain_typed(annotation))
    if fn is union or (fn in (operator.or_, set.union) and origin in (set, frozenset)):
        return Union()
    if fn is builtins.min or fn is builtins.max:
        return Extreme(fn)
    if callable(fn):
        return Binary(fn, empty_value(annotation))
    raise TypeError(f"{fn!r} is not a reducer: use a function (current, update) -> new")
