"""Between a graph run and a ``Checkpointer``: the head of a thread, encoded and decoded.

A ``Head`` is everything a run needs to continue a thread namespace: channel values, the
planned tasks of the next superstep (the *frontier*), join barriers and the ids that keep
task ids stable. ``load_head`` rebuilds it from the last snapshot plus the deltas after it;
``save`` appends one checkpoint holding only what the superstep wrote.
"""

from __future__ import annotations

import dataclasses
import sys
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from tinyagents import _clock
from tinyagents._record import Record
from tinyagents.errors import ArgumentError, GraphError, InvalidUpdateError, StoreError
from tinyagents.events.models import jsonable_keys_kept
from tinyagents.graph.interrupts import Interrupt
from tinyagents.graph.reducers import (
    MISSING,
    OVERWRITE,
    Overwrite,
    Replaced,
    detach,
    normalize_write,
)
from tinyagents.graph.types import END, START, UNSET, Command, Send, TimeoutPolicy
from tinyagents.store.checkpoint.base import CheckpointRecord, WriteRecord

if TYPE_CHECKING:
    from tinyagents.graph.state import Channel, StateSchema
    from tinyagents.store.checkpoint.base import Checkpointer


class GraphCodec(Protocol):
    """What encoding a head needs of its graph (a ``GraphCore``): the state channels, and the
    type a ``Send`` argument comes back as."""

    @property
    def schema(self) -> StateSchema: ...

    @property
    def name(self) -> str: ...

    @property
    def nodes(self) -> Mapping[str, Any]: ...

    def decode_arg(self, node: str, value: Any, arg_type: str | None = None) -> Any: ...


def new_frontier_id() -> str:
    """Names one planned superstep: its pending writes are kept under this id."""
    return _clock.new_id("fr")


def encode(value: Any, what: str = "a value") -> Any:
    """Python → JSON-able, for checkpoints (pydantic models, dataclasses, sets, ...). A value
    no checkpoint can hold is an ``InvalidUpdateError`` naming ``what`` it is (a key). A lone
    surrogate (half a UTF-16 pair, from a model's or a tool's text) is kept, in a dict's key
    as in a value: the checkpoint's JSON writes it as its ``\\ud800`` escape."""
    if type(value) not in _LEAVES:
        _one_shot_in(value, what)
    try:
        try:
            return to_jsonable_python(value, fallback=_unencodable)
        except UnicodeEncodeError:  # pydantic's, for a key holding a lone surrogate: only then
            return jsonable_keys_kept(value, _unencodable)
    except (TypeError, ValueError) as exc:
        why = "bytes that are not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc
        raise InvalidUpdateError(
            f"cannot checkpoint {what}: {why}; state values must be JSON-able, pydantic "
            "models or dataclasses"
        ) from exc


#: The types most values are, which are no iterators: ``encode`` asks no more of them (a
#: failed attribute look-up, ``hasattr``, costs about as much as encoding a small dict).
_PLAIN: Final = frozenset({str, int, float, bool, type(None), dict, list, tuple})


#: The types with nothing inside: a long list of only these is passed over at C speed.
_LEAVES: Final = frozenset({str, int, float, bool, type(None)})


def _one_shot_in(value: Any, what: str, seen: set[int] | None = None) -> None:
    """Refuse a one-shot iterator at any depth of dicts, lists, tuples, sets, dataclasses and
    pydantic models (what pydantic writes item by item, using an iterator up, as it does one
    at the top; a dict's values: its keys are text). One loop over the items, nothing
    copied: an item of a ``_LEAVES`` type costs a set look-up, and a list or tuple of more
    than 16 items that holds only ``_LEAVES`` (numbers, text) is not walked at all. A value
    that holds itself would keep the walk going round for good: past ``_WALKED_AT_MOST``
    containers it starts again, this time passing over any container it has ``seen``
    (pydantic then refuses the cycle, "Circular reference detected")."""
    stack = [value]
    pop, push = stack.pop, stack.extend
    leaves_only = _LEAVES.issuperset
    walked = 0  # containers opened: past _WALKED_AT_MOST, the walk starts again minding cycles
    while stack:
        item = pop()
        kind = type(item)
        if kind in _LEAVES:
            continue
        if seen is not None:
            if id(item) in seen:
                continue  # looked into already: a cycle (pydantic refuses it) or a shared value
            seen.add(id(item))
        else:
            walked += 1
            if walked > _WALKED_AT_MOST:
                return _one_shot_in(value, what, set())
        if kind is dict:
            push(item.values())
        elif kind is list or kind is tuple:
            if len(item) <= 16 or not leaves_only(map(type, item)):
                push(item)
        else:
            how = _INSIDE.get(kind, _UNSEEN)
            if how is _UNSEEN:
                how = _inside(kind)
            if how is None:
                continue
            if how is _ONE_SHOT:
                _refuse_one_shot(item, what)
            elif how is _ITEMS:
                push(item)
            elif how is _VALUES:
                push(item.values())
            elif how is _MODEL:
                push(item.__dict__.values())
                if item.__pydantic_extra__:
                    push(item.__pydantic_extra__.values())
            else:  # a dataclass's field names
                push(getattr(item, name) for name in how)


#: How many containers ``_one_shot_in`` opens before it minds cycles (a value holding itself).
_WALKED_AT_MOST: Final = 10_000


#: What ``_one_shot_in`` looks into, per type not ``_PLAIN``: read once per type (``_inside``).
_INSIDE: dict[type, Any] = {}
_UNSEEN, _ONE_SHOT, _ITEMS, _VALUES, _MODEL = (object() for _ in range(5))


def _inside(kind: type) -> Any:
    """How ``_one_shot_in`` looks into a ``kind`` (a one-shot iterator is refused; None: it
    holds nothing pydantic writes item by item), kept in ``_INSIDE`` (emptied past 1,024
    types: classes made on the fly come and go)."""
    how: Any = None
    if hasattr(kind, "__next__"):
        how = _ONE_SHOT
    elif issubclass(kind, (set, frozenset, list, tuple)):
        how = _ITEMS
    elif issubclass(kind, dict):
        how = _VALUES
    elif issubclass(kind, BaseModel):
        how = _MODEL
    elif dataclasses.is_dataclass(kind):
        how = tuple(f.name for f in dataclasses.fields(kind))
    if len(_INSIDE) >= 1024:
        _INSIDE.clear()
    _INSIDE[kind] = how
    return how


def _refuse_one_shot(value: Any, what: str) -> None:
    """A one-shot iterator (a generator, ``map``, ``zip``, ``iter(...)``, an open file): saving
    it would use it up (pydantic writes its items as a list), so the run went on with it
    empty (the next node read nothing) while the checkpoint held the items."""
    raise InvalidUpdateError(
        f"cannot checkpoint {what}: a {type(value).__name__} is a one-shot iterator, which "
        "saving it would use up (the state would keep it empty); write a list of its items "
        "instead (list(...))"
    )


def _unencodable(value: Any) -> Any:
    raise TypeError(f"a {type(value).__name__} is not JSON-able")


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class Planned(Record):
    """One entry of the frontier: a node to run, with a ``Send`` argument or the state.
    ``held``: a join or a deferral pulled it, whose barrier is spent; it waits until it runs,
    whatever routes meanwhile (an ``update_state`` as another node keeps it, as LangGraph's
    barrier channels keep their node triggered). ``timeout``: a ``Send``'s own, in place of
    its node's."""

    node: str
    arg: Any = UNSET
    held: bool = False
    timeout: TimeoutPolicy | None = None

    @classmethod
    def of(cls, send: Send) -> Planned:
        """The task a ``Send`` pushes."""
        return cls(node=send.node, arg=send.arg, timeout=send.timeout)

    def to_json(self, untracked: frozenset[str] = frozenset()) -> dict[str, Any]:
        if self.arg is UNSET:
            return {"node": self.node, "held": True} if self.held else {"node": self.node}
        return _encode_send(self.node, self.arg, untracked, self.timeout)

    @classmethod
    def from_json(
        cls, data: dict[str, Any], graph: GraphCodec, where: str = "a saved checkpoint"
    ) -> Planned:
        """The entry ``to_json`` saved; ``where`` names the checkpoint it is read from, for
        a ``StoreError`` when it no longer reads (``_timeout``)."""
        if "arg" not in data:
            return cls(node=data["node"], held=data.get("held", False))
        arg = _decode_send(data, graph, where)
        return cls(node=data["node"], arg=arg, timeout=_timeout(data, where))


def joined(frontier: list[Planned], goto: list[str | Send]) -> list[Planned]:
    """``frontier`` with a ``goto``'s targets joining it, as LangGraph's: a node already in
    it (or named twice) runs once, ``END`` adds nothing, and every ``Send`` is a task of its
    own; appended, so the pending tasks keep their ids."""
    pending = {p.node for p in frontier if p.arg is UNSET}
    named = dict.fromkeys(
        g for g in goto if not isinstance(g, Send) and g not in pending and g != END
    )
    return [
        *frontier,
        *(Planned(node=g) for g in named),
        *(Planned.of(g) for g in goto if isinstance(g, Send)),
    ]


#: The classes of ``Send`` arguments saved in this process, by ``module:qualname``: a class
#: defined in a function (``<locals>``) cannot be imported back, but a resume in the same
#: process finds it here. Weak: a class nothing else holds is not kept alive by a checkpoint.
_ARG_TYPES: weakref.WeakValueDictionary[str, type] = weakref.WeakValueDictionary()


def _encode_send(
    node: str,
    arg: Any,
    untracked: frozenset[str] = frozenset(),
    timeout: TimeoutPolicy | None = None,
) -> dict[str, Any]:
    """A ``Send``'s node and argument as JSON; an argument that is a pydantic model or a
    dataclass instance also names its class, so it comes back as one (not a dict) where the
    node's parameter has no annotation to say so. A dict argument is saved without its
    ``untracked`` keys (LangGraph's ``sanitize_untracked_values_in_send``: a ``Send`` of
    the state would save its ``UntrackedValue`` fields), as is an input's. A ``Send``'s own
    ``timeout`` is saved with it (``_timeout`` reads it back)."""
    if untracked and isinstance(arg, dict) and not untracked.isdisjoint(arg):
        arg = {k: v for k, v in arg.items() if k not in untracked}
    if node == START:  # an input's writes, waiting for its first step: name the key
        encoded = {k: encode(v, f"the input's {k!r}") for k, v in arg.items()}
        return {"node": node, "arg": encoded}
    cls = type(arg)
    if cls is Command:  # LangGraph's serializer keeps one: its fields, read back as one
        out = {"node": node, "arg": _encode_command(arg, untracked), "arg_type": _COMMAND}
    else:
        out = {"node": node, "arg": encode(arg, f"the argument of a Send to {node!r}")}
        if isinstance(arg, BaseModel) or (
            dataclasses.is_dataclass(arg) and not isinstance(arg, type)
        ):
            ref = f"{cls.__module__}:{cls.__qualname__}"
            _ARG_TYPES[ref] = cls
            out["arg_type"] = ref
    if timeout is not None:
        out["timeout"] = {
            "run_timeout": timeout.run_timeout,
            "idle_timeout": timeout.idle_timeout,
            "refresh_on": timeout.refresh_on,
        }
    return out


def _decode_send(data: dict[str, Any], graph: GraphCodec, where: str) -> Any:
    """A ``Send``'s argument as ``_encode_send`` saved it; ``where`` names what it is read
    from, for the ``StoreError`` of a damaged ``Send`` in a sent ``Command`` (``_timeout``)."""
    arg_type = data.get("arg_type")
    if arg_type == _COMMAND:
        try:
            return _decode_command(data["arg"], graph, where)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # damaged, by hand
            raise StoreError(
                f"{where} no longer reads: the Command sent to {data['node']!r} "
                f"({data['arg']!r:.80}) is no Command ({type(exc).__name__}: {exc})"
            ) from None
    return graph.decode_arg(data["node"], data["arg"], arg_type)


#: The ``arg_type`` of a ``Send`` whose argument is a ``Command`` (``_encode_command``).
_COMMAND: Final = "tinyagents.graph.types:Command"


def _encode_command(cmd: Command[Any], untracked: frozenset[str]) -> dict[str, Any]:
    """A ``Command`` sent as a ``Send``'s argument, as JSON: its fields as given (a goto
    of one name stays one name, its ``Send``s encoded as a ``Send``), ``resume`` only when
    it is set."""

    def goto_item(g: Any) -> Any:
        return g if isinstance(g, str) else _encode_send(g.node, g.arg, untracked, g.timeout)

    goto = cmd.goto
    out: dict[str, Any] = {
        "update": encode(cmd.update, "the update of a Command sent as a Send's argument"),
        "goto": goto_item(goto) if isinstance(goto, (str, Send)) else [goto_item(g) for g in goto],
        "graph": cmd.graph,
    }
    if cmd.resume is not UNSET:
        out["resume"] = encode(cmd.resume, "the resume of a Command sent as a Send's argument")
    update = cmd.update
    if isinstance(update, (list, tuple)) and update and all(type(w) is tuple for w in update):
        out["pairs"] = True  # ``(key, value)`` pairs: JSON has no tuples to say so
    return out


def _decode_command(data: dict[str, Any], graph: GraphCodec, where: str) -> Command[Any]:
    def goto_item(g: Any) -> Any:
        return (
            g
            if isinstance(g, str)
            else Send(g["node"], _decode_send(g, graph, where), timeout=_timeout(g, where))
        )

    goto, update = data["goto"], data["update"]
    return Command(
        update=[tuple(w) for w in update] if data.get("pairs") else update,
        goto=[goto_item(g) for g in goto] if isinstance(goto, list) else goto_item(goto),
        resume=data.get("resume", UNSET),
        graph=data["graph"],
    )


def _timeout(data: dict[str, Any], where: str) -> TimeoutPolicy | None:
    """The ``timeout`` ``_encode_send`` saved with a ``Send``, or None. One that no longer
    makes a ``TimeoutPolicy`` (damaged, written by hand) is a ``StoreError`` naming
    ``where`` it is saved (a checkpoint, a pending write), as a damaged row is: a bare
    ``TypeError`` or ``ArgumentError`` came out of ``get_state`` and ``run``."""
    saved = data.get("timeout")
    if saved is None:
        return None
    try:
        if not isinstance(saved, dict):
            raise TypeError(f"a JSON {type(saved).__name__}, not an object")
        return TimeoutPolicy(**saved)
    except (TypeError, ValueError) as exc:  # ArgumentError is a ValueError
        raise StoreError(
            f"{where} no longer reads: the timeout of its Send to {data['node']!r} "
            f"({saved!r:.80}) is no TimeoutPolicy ({exc})"
        ) from None


def arg_class(ref: str) -> type | None:
    """The class ``_encode_send`` named ``ref``: saved in this process, or importable."""
    found = _ARG_TYPES.get(ref)
    if found is not None:
        return found
    module, _, qualname = ref.partition(":")
    if "<locals>" in qualname or module not in sys.modules:
        return None  # not importable (a local class), or code this process never loaded
    value: Any = sys.modules[module]
    for part in qualname.split("."):
        value = getattr(value, part, None)
    return value if isinstance(value, type) else None


def pending_input(head: Head) -> dict[str, Any] | None:
    """The input an input's checkpoint holds, not applied yet (its frontier is ``START``,
    with the input's writes as its argument); None for any other head."""
    frontier = head.frontier
    if len(frontier) == 1 and frontier[0].node == START:
        writes: dict[str, Any] = frontier[0].arg
        return writes
    return None


def encode_goto(goto: list[str | Send], untracked: frozenset[str] = frozenset()) -> list[Any]:
    return [
        g if isinstance(g, str) else _encode_send(g.node, g.arg, untracked, g.timeout) for g in goto
    ]


def decode_goto(
    data: list[Any], graph: GraphCodec, where: str = "a saved result"
) -> list[str | Send]:
    """The ``goto`` ``encode_goto`` saved; ``where`` names what it is read from (``_timeout``)."""
    return [
        g
        if isinstance(g, str)
        else Send(g["node"], _decode_send(g, graph, where), timeout=_timeout(g, where))
        for g in data
    ]


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class TaskRecords(Record):
    """What the pending writes say about one task of an unfinished superstep."""

    writes: list[tuple[str, Any]] | None = None
    goto: list[str | Send] = field(default_factory=list)
    interrupts: list[Interrupt] = field(default_factory=list)
    resume: dict[str, Any] = field(default_factory=dict)
    #: ``steering_ref`` -> interrupt id: the steering commands whose answers ``resume`` holds
    steered: dict[str, str] = field(default_factory=dict)
    skipped: bool = False
    #: the ``steering_ref`` of the cancel that skipped the task (None: not saved with one)
    skipped_by: str | None = None
    #: its result is its node's error handler's (``Task.handled``)
    handled: bool = False
    #: ``repr`` of the error its node failed with, saved before its error handler ran
    #: (``handler_failure_write``): a run that goes on runs the handler, not the node again
    node_failed: str | None = None
    #: ``repr`` of the exception the task's last attempt failed with (LangGraph's task error)
    error: str | None = None
    #: interrupt ids whose answer was withdrawn (``interrupt()``'s schema refused it): a new
    #: answer to one of them clears its mark (``withdrawal_write``)
    withdrawn: set[str] = field(default_factory=set)
    #: interrupt ids whose answer a replay of the step dropped (it asks them again, as
    #: LangGraph's replay drops its ``RESUME`` writes): a new answer clears the mark, as a
    #: withdrawn one's does (``withdrawal_write(..., REPLAYED)``)
    dropped: set[str] = field(default_factory=set)


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class Head(Record):
    """The latest state of one thread namespace, as a run holds it in memory."""

    thread_id: str
    ns: str
    values: dict[str, Any]
    frontier: list[Planned]
    frontier_id: str
    lineage: str
    step: int = -1
    seq: int = -1
    checkpoint_id: str | None = None
    parent_id: str | None = None
    barriers: dict[str, set[str]] = field(default_factory=dict)
    records: dict[str, TaskRecords] = field(default_factory=dict)
    created_at: float = 0.0
    source: str = "input"
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the runtime run that writes this thread (kept in checkpoint metadata, so the same
    #: run id continues after a restart and its durable steering commands find it)
    run_id: str | None = None
    #: the graph's ``UntrackedValue`` channels: ``values`` holds them for the run, ``save``
    #: leaves them out
    untracked: frozenset[str] = frozenset()

    def staged(self, keys: Iterable[str]) -> Head:
        """A copy to change: the values of ``keys`` and the barriers are copied too, so a
        change that fails half-way (a reducer or a router raising) leaves this head as it
        was. ``adopt`` makes the change this head's once it is saved."""
        values = dict(self.values)
        for key in keys:
            if key in values:
                values[key] = detach(values[key])
        barriers = {k: set(v) for k, v in self.barriers.items()}
        return dataclasses.replace(self, values=values, barriers=barriers)

    def adopt(self, staged: Head) -> None:
        """Take over everything ``staged`` (from ``self.staged``) holds."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(staged, f.name))

    @classmethod
    def fresh(
        cls, graph: GraphCodec, thread_id: str, ns: str, lineage: str | None, *, saved: bool
    ) -> Head:
        """A namespace with no checkpoint yet. One that is never ``saved`` (no checkpointer)
        has no frontier id: no pending write of it is kept anywhere."""
        return cls(
            thread_id=thread_id,
            ns=ns,
            values=graph.schema.initial(),
            frontier=[],
            frontier_id=new_frontier_id() if saved else "",
            lineage=lineage or _clock.new_id("ln"),
            untracked=graph.schema.untracked,
        )


def _check_frontier(graph: GraphCodec, thread_id: str, frontier: list[dict[str, Any]]) -> None:
    """A pending task of a node the graph does not have (a thread another graph wrote, or
    one saved before a node was renamed) cannot be planned: say so, not ``KeyError``."""
    for planned in frontier:
        node = planned["node"]
        if node != START and node not in graph.nodes:
            raise GraphError(
                f"thread {thread_id!r} has a pending task of node {node!r}, which graph "
                f"{graph.name!r} does not have (nodes: {', '.join(graph.nodes)}): the thread "
                "was written by another graph, or before the node was renamed; continue it "
                "with the graph that wrote it"
            )


def with_parents(metadata: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's metadata as it is read, with LangGraph's ``parents`` (``{}`` for the
    root graph's checkpoints, which do not store it)."""
    return metadata if "parents" in metadata else {**metadata, "parents": {}}


async def load_head(
    graph: GraphCodec,
    checkpointer: Checkpointer,
    thread_id: str,
    ns: str = "",
    checkpoint_id: str | None = None,
) -> Head | None:
    """Rebuild a namespace's state at ``checkpoint_id`` (default: head); ``None`` if absent.
    A ``checkpoint_id`` that is no text is an ``ArgumentError`` (``get_state``, ``run``,
    ``fork`` and ``update_state`` are given it by their caller)."""
    if checkpoint_id is not None and not isinstance(checkpoint_id, str):
        raise ArgumentError(
            "a checkpoint id is text (a CheckpointInfo.checkpoint_id from history(), or a "
            f"StateSnapshot's), got {type(checkpoint_id).__name__}"
        )
    chain = await checkpointer.chain(thread_id, ns, checkpoint_id)
    if not chain:
        return None
    channels = graph.schema.channels
    untracked = graph.schema.untracked
    base, *deltas = chain
    # (an untracked field's value, saved before the field was made one, is not restored)
    values = {
        k: channels[k].decode(v)
        for k, v in base.values.items()
        if k in channels and k not in untracked
    }
    for record in deltas:
        for key, delta in record.values.items():
            channel = channels.get(key)
            if channel is None or key in untracked:
                continue
            decoded = channel.decode(delta)
            try:
                values[key] = channel.reducer.replay(values.get(key, MISSING), decoded)
            except Exception as exc:  # (a reducer raises anything on a value not its own)
                raise schema_changed(
                    thread_id,
                    record.checkpoint_id,
                    key,
                    f"its saved change ({delta!r:.80}) cannot be added to its value by the "
                    f"field's reducer {channel.reducer.name!r} ({type(exc).__name__}: {exc})",
                ) from exc
    if deltas:  # a key a delta added goes where its field is, as a live run keeps them
        graph.schema.in_field_order(values)
    last = chain[-1]
    _check_frontier(graph, thread_id, last.frontier)
    where = f"checkpoint {last.checkpoint_id!r} of {_thread(thread_id, ns)}"
    head = Head(
        thread_id=thread_id,
        ns=ns,
        values=values,
        frontier=[Planned.from_json(p, graph, where) for p in last.frontier],
        frontier_id=last.frontier_id,
        lineage=last.lineage,
        step=last.step,
        seq=last.seq,
        checkpoint_id=last.checkpoint_id,
        parent_id=last.parent_id,
        barriers={k: set(v) for k, v in last.barriers.items()},
        created_at=last.created_at,
        source=last.source,
        metadata=last.metadata,
        run_id=last.metadata.get("run_id"),
        untracked=untracked,
    )
    if head.frontier:
        head.records = await load_records(graph, checkpointer, head)
    return head


async def first_values(graph: GraphCodec, checkpointer: Checkpointer, head: Head) -> dict[str, Any]:
    """The values of ``head``'s namespace at the first step of the call ``head`` is of (the
    checkpoint after that call's input's own, which holds the state before the input): what
    a sub-graph run started from. A persistent sub-graph's namespace holds call after call,
    each from its own input: the checkpoints back from ``head`` to the nearest input are
    the call's (not the namespace's first, another call's)."""
    if head.seq <= 0:
        return head.values
    records = await checkpointer.list(head.thread_id, head.ns)
    by_id = {r.checkpoint_id: r for r in records}
    newest = records[0] if records else None
    head_id = head.checkpoint_id
    started, record = None, newest if head_id is None else by_id.get(head_id)
    while record is not None and record.source != "input":
        started = record
        record = by_id.get(record.parent_id) if record.parent_id is not None else None
    if started is None or started.checkpoint_id == head_id:
        return head.values
    first = await load_head(graph, checkpointer, head.thread_id, head.ns, started.checkpoint_id)
    assert first is not None
    return first.values


async def load_records(
    graph: GraphCodec, checkpointer: Checkpointer, head: Head
) -> dict[str, TaskRecords]:
    records: dict[str, TaskRecords] = {}
    channels = graph.schema.channels
    for w in await checkpointer.get_writes(head.thread_id, head.ns, head.frontier_id):
        rec = records.setdefault(w.task_id, TaskRecords())
        if w.kind == "result":
            if w.value.get("cleared"):  # a replay of the step runs the task again
                rec.writes, rec.goto, rec.skipped, rec.skipped_by = None, [], False, None
                rec.handled = False
                continue
            pairs = w.value["writes"]
            for key, _ in pairs:
                if key not in channels:
                    raise schema_changed(
                        head.thread_id,
                        head.checkpoint_id,
                        key,
                        f"task {w.task_id} of its pending step wrote it, and the state of "
                        f"graph {graph.name!r} has no such field ({', '.join(channels)})",
                    )
            rec.writes, rec.goto = decode_result(
                graph,
                w.value,
                f"pending write of task {w.task_id!r} of {_thread(head.thread_id, head.ns)}, "
                f"frontier {head.frontier_id!r},",
            )
            skipped = w.value.get("skipped")
            rec.skipped = bool(skipped)
            rec.skipped_by = skipped if isinstance(skipped, str) else None
            rec.handled = bool(w.value.get("handled"))
        elif w.kind == "interrupt":
            rec.interrupts = [Interrupt.from_json(i) for i in w.value]
        elif w.kind == "resume":
            rec.resume[w.key] = w.value
        elif w.kind == "steered":
            rec.steered[w.key] = w.value
        elif w.kind == "error":
            if w.key == HANDLER_KEY:
                rec.node_failed = w.value if isinstance(w.value, str) else repr(w.value)
            else:
                rec.error = w.value
        elif w.kind == "withdrawn" and w.value:
            (rec.dropped if w.value == REPLAYED else rec.withdrawn).add(w.key)
    for rec in records.values():
        for iid in rec.withdrawn | rec.dropped:  # (whichever of the two writes came first)
            rec.resume.pop(iid, None)
    return records


def decode_result(
    graph: GraphCodec, value: dict[str, Any], where: str = "a saved result"
) -> tuple[list[tuple[str, Any]], list[str | Send]]:
    """The writes and goto a ``result_write`` value holds (its keys are the graph's
    channels: the caller checks), back in Python (a pending write's, a cached node's);
    ``where`` names what it is read from (``_timeout``)."""
    channels = graph.schema.channels
    writes = [(k, _decode_write(channels[k], v)) for k, v in value["writes"]]
    return writes, decode_goto(value["goto"], graph, where)


def _thread(thread_id: str, ns: str) -> str:
    """A thread (and namespace) as the checkpointers' damaged-row errors name it."""
    return f"thread {thread_id!r}" + (f" (namespace {ns!r})" if ns else "")


def schema_changed(thread_id: str, checkpoint_id: str | None, key: str, what: str) -> StoreError:
    """The error of a checkpoint the graph's state schema cannot read back (an older schema
    wrote it: a field removed, renamed or typed differently since)."""
    return StoreError(
        f"thread {thread_id!r}, checkpoint {checkpoint_id}: state field {key!r}: {what}. The "
        "thread was written with another state schema (a field removed, renamed or typed "
        "differently since?): continue it with the graph whose schema wrote it, give the field "
        "back its old name and type, or write it anew (update_state)"
    )


def check_values(graph: GraphCodec, head: Head) -> None:
    """Raise ``schema_changed`` for a value of ``head`` that the graph's pydantic state
    refuses (every node's input would: pydantic's ``ValidationError`` deep in the step):
    a run checks the thread it continues once, before its first step. A field it misses
    is not the checkpoint's (a node may write it), nor is a refusal of the whole model."""
    schema, values = graph.schema, head.values
    if schema.kind != "pydantic" or not values:
        return
    try:
        schema.cls(**values)
    except ValidationError as exc:
        for error in exc.errors():
            loc = error.get("loc") or ()
            if loc and loc[0] in values and error.get("type") != "missing":
                key = str(loc[0])
                raise schema_changed(
                    head.thread_id,
                    head.checkpoint_id,
                    key,
                    f"its saved value {values[key]!r:.80} is refused by state "
                    f"{schema.cls.__name__} ({error.get('msg')})",
                ) from None


def _decode_write(channel: Channel, value: Any) -> Any:
    """A saved pending write back to Python; an ``Overwrite`` (saved in its dict form) comes
    back as one, its value decoded as the channel's."""
    if type(value) is dict and len(value) == 1 and OVERWRITE in value:
        return Overwrite(channel.decode(value[OVERWRITE]))
    return channel.decode(value)


def result_write(
    graph: GraphCodec,
    task_id: str,
    writes: list[tuple[str, Any]],
    goto: list[Any],
    *,
    skipped: bool = False,
    skipped_by: str | None = None,
    handled: bool = False,
) -> WriteRecord:
    channels = graph.schema.channels
    untracked = graph.schema.untracked
    payload: dict[str, Any] = {
        "writes": [
            [k, encode(normalize_write(channels[k].reducer, v), f"the write to {k!r}")]
            for k, v in writes
            if k not in untracked  # never saved: a resumed step goes on without it
        ],
        "goto": encode_goto(goto, untracked),
    }
    if skipped:
        # cancelled by steering (no successors either), named by the cancel when known: a
        # cancel handed over again after a crash knows its own skip from another's
        payload["skipped"] = skipped_by or True
    if handled:  # its node's error handler's result: it goes where its goto says only
        payload["handled"] = True
    return WriteRecord(task_id=task_id, kind="result", value=payload)


def steering_ref(correlation_id: str, scope: str = "") -> str:
    """How a thread's records name the steering command that made them: its correlation id,
    and its sender's scope (``dedupe_scope``) after a separator no id holds (ids are
    printable), for two senders' commands under one id are two commands; the id alone for
    the shared empty scope."""
    return f"{correlation_id}\x1f{scope}" if scope else correlation_id


#: the key of the ``error`` write that says a task's node failed and its error handler
#: takes over (``handler_failure_write``)
HANDLER_KEY = "error_handler"


def handler_failure_write(task_id: str, error: BaseException) -> WriteRecord:
    """That ``task_id``'s node failed with ``error`` and its error handler runs in its
    place: a run that goes on after the handler failed (or the process died) runs the
    handler again, not the node, as LangGraph's."""
    return WriteRecord(task_id=task_id, kind="error", key=HANDLER_KEY, value=repr(error)[:2000])


def error_write(task_id: str, error: BaseException) -> WriteRecord:
    """The failure of a task's attempt, shown as ``TaskState.error`` (its ``repr``)."""
    return WriteRecord(task_id=task_id, kind="error", value=repr(error)[:2000])


#: ``withdrawal_write``'s value for an answer a replay of its step dropped
REPLAYED: Final = "replayed"


def cleared_result_write(task_id: str) -> WriteRecord:
    """``task_id``'s result is dropped (a replay of its step runs it again): it replaces the
    task's result write in place, as the result of its next run replaces it."""
    return WriteRecord(
        task_id=task_id, kind="result", value={"writes": [], "goto": [], "cleared": True}
    )


def withdrawal_write(task_id: str, interrupt_id: str, withdrawn: bool | str = True) -> WriteRecord:
    """The answer to ``interrupt_id`` is withdrawn (the schema of the ``interrupt()`` it
    answered refused it: the question waits for another; ``REPLAYED``: a replay of the step
    dropped it), or, ``withdrawn=False``, a new answer to it stands. One write per
    interrupt, overwritten in place, so the order in which a backend lists writes does not
    matter."""
    return WriteRecord(task_id=task_id, kind="withdrawn", key=interrupt_id, value=withdrawn)


def interrupt_write(task_id: str, interrupts: list[Interrupt]) -> WriteRecord:
    return WriteRecord(
        task_id=task_id,
        kind="interrupt",
        value=[_encoded_interrupt(i) for i in interrupts],
    )


def _encoded_interrupt(question: Interrupt) -> Any:
    kind = type(question.value)
    if kind not in _PLAIN and hasattr(kind, "__next__"):
        _refuse_one_shot(question.value, "an interrupt() value")
    return encode(question.to_json(), "an interrupt() value")


async def save(
    checkpointer: Checkpointer,
    head: Head,
    *,
    delta: dict[str, Any] | None,
    source: str,
    tasks: list[str] = (),  # type: ignore[assignment]
    metadata: dict[str, Any] | None = None,
    ran: Iterable[str] | None = None,
) -> str:
    """Append a checkpoint for ``head`` (already advanced); ``delta=None`` forces a snapshot.

    ``ran``: the nodes whose output this checkpoint holds (a step's nodes, ``START`` for an
    input's first step, an update's ``as_node``), kept as ``metadata["ran"]``; a checkpoint
    that holds no node's output (an input's command, a rewind) keeps the head's. An
    ``update_state`` without ``as_node`` counts as the output of the one node there, as
    LangGraph's infers it.

    ``head.seq``/``checkpoint_id`` move only once the backend accepted the record, so a
    ``StaleCheckpointError`` leaves the head as it was.
    """
    seq = head.seq + 1
    untracked = head.untracked  # never saved (``UntrackedValue``)
    if untracked and delta and not untracked.isdisjoint(delta):
        delta = {k: v for k, v in delta.items() if k not in untracked}
    snapshot = (
        delta is None
        or seq % checkpointer.snapshot_every == 0
        or any(type(d) is Replaced for d in delta.values())  # an Overwrite: no delta says it
    )
    metadata = dict(metadata or {})
    if ran is not None:
        metadata["ran"] = list(dict.fromkeys(ran))
    elif "ran" in head.metadata:
        metadata.setdefault("ran", head.metadata["ran"])
    if "parents" in head.metadata:  # a sub-graph's (``with_parents``); a root's has none
        metadata.setdefault("parents", head.metadata["parents"])
    if "call" in head.metadata:  # a persistent sub-graph's (``executor.child_run``)
        metadata.setdefault("call", head.metadata["call"])
    values = head.values if snapshot else delta
    assert values is not None
    if untracked and snapshot and not untracked.isdisjoint(values):
        values = {k: v for k, v in values.items() if k not in untracked}
    record = CheckpointRecord(
        thread_id=head.thread_id,
        ns=head.ns,
        checkpoint_id=_clock.new_ordered_id("ck"),
        parent_id=head.checkpoint_id,
        seq=seq,
        step=head.step,
        snapshot=snapshot,
        values={k: encode(v, repr(k)) for k, v in values.items()},
        frontier=[p.to_json(untracked) for p in head.frontier],
        frontier_id=head.frontier_id,
        lineage=head.lineage,
        source=source,
        barriers={k: sorted(v) for k, v in head.barriers.items() if v},
        tasks=list(tasks),
        written=sorted(values) if delta is None else sorted(delta),
        metadata=metadata if head.run_id is None else {**metadata, "run_id": head.run_id},
        created_at=_clock.now().timestamp(),
    )
    await checkpointer.put(record)
    head.parent_id = head.checkpoint_id
    head.seq = seq
    head.checkpoint_id = record.checkpoint_id
    head.created_at = record.created_at
    head.source = source
    head.metadata = record.metadata
    return record.checkpoint_id
