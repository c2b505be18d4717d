"""The small value types of the graph runtime: ``START``/``END``, ``Send``, ``Command``,
``interrupt()``, ``RetryPolicy`` and the results a run hands back (``Interrupt`` lives in
``graph/interrupts.py``, below the interrupt scope that makes one).

These are built on every node return, so they are slotted dataclasses, not pydantic models:
nothing here is validated per superstep.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar

from tinyagents._record import FrozenRecord, Record
from tinyagents.errors import ArgumentError, GraphValidationError, InvalidRouteError
from tinyagents.graph._context import current_scope
from tinyagents.graph.interrupts import Interrupt, read_response_schema
from tinyagents.graph.state import StateView
from tinyagents.protocol.ids import shown_repr

START: Final = "__start__"
END: Final = "__end__"


def node_name(name: str) -> str:
    """A node name as plain text: a member of a ``(str, Enum)`` (LangGraph's
    test_enum_node_names names nodes so) is its value, as a checkpoint gives it back."""
    return name if type(name) is str or not isinstance(name, str) else str.__str__(name)


def check_subgraphs(subgraphs: object) -> bool:
    """``subgraphs=`` of a stream or ``get_state``: ``True`` or ``False``. ``"no"`` (text) was
    read as true, and each item came as a ``(namespace, payload)`` pair."""
    if type(subgraphs) is not bool:
        raise ArgumentError(
            f"subgraphs= is True or False, got {type(subgraphs).__name__} {shown_repr(subgraphs)}"
        )
    return subgraphs


#: The statuses of ``GraphResult.status`` (a subset of ``RunStatus``).
GraphStatus = Literal["completed", "interrupted", "failed", "cancelled"]


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


#: "no value given" (``None`` is a valid resume value).
UNSET: Final = _Unset()


class WrongKindError(GraphValidationError, TypeError):
    """An argument of the wrong kind, to the builder or to ``Send``: a
    ``GraphValidationError``, as every refusal of the builder, and a ``TypeError``, as
    LangGraph's, so ported ``except TypeError`` code catches it too."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Send(FrozenRecord):
    """Run ``node`` once more in the next superstep with ``arg`` as its input (fan-out).
    A ``node`` that is not text is refused here (``WrongKindError``), not when routed.
    ``timeout`` (LangGraph 1.2's): that task's ``TimeoutPolicy``, in place of its node's;
    seconds or a ``timedelta`` are its ``run_timeout`` (``TimeoutPolicy.coerce``: anything
    else is an ``ArgumentError`` here). None: the node's."""

    node: str
    arg: Any
    timeout: TimeoutPolicy | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", TimeoutPolicy.coerce(self.timeout))
        node = self.node
        if not isinstance(node, str):  # LangGraph builds it, and fails when it is routed
            raise WrongKindError(
                f"Send() names a node by its name (text), got {type(node).__name__} "
                f"{shown_repr(node)}"
            )
        object.__setattr__(self, "node", node_name(node))
        if type(self.arg) is StateView:
            # a router's or node's view of a TypedDict state: send (and checkpoint) a copy
            object.__setattr__(self, "arg", dict(self.arg))

    def __repr__(self) -> str:
        # LangGraph's: the timeout only when there is one
        if self.timeout is None:
            return f"Send(node={self.node!r}, arg={self.arg!r})"
        return f"Send(node={self.node!r}, arg={self.arg!r}, timeout={self.timeout!r})"


#: The nodes a ``Command`` may go to, as a node function's return annotation names them.
N = TypeVar("N")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Command(FrozenRecord, Generic[N]):
    """What a node (or the caller) wants the graph to do next.

    - ``update``: channel writes, applied through the reducers;
    - ``goto``: node name(s) or ``Send``s for the next superstep (from a node: added to its
      edges; as run input: added to the pending tasks, in their step);
    - ``resume``: a value for the only pending interrupt, or ``{interrupt_id: value}``;
    - ``graph=Command.PARENT``: hand ``update``/``goto`` to the parent graph (from a sub-graph).

    A node function annotated ``-> Command[Literal["a", "b"]]`` declares that its gotos lead
    to ``a`` or ``b`` (as LangGraph reads it): ``add_node`` takes them as its
    ``destinations``.
    """

    PARENT: ClassVar[str] = "__parent__"

    #: a dict of state keys, ``(key, value)`` pairs, or an instance of the state class
    update: Any = None
    goto: str | Send | Sequence[str | Send] = ()
    resume: Any = UNSET
    graph: str | None = None

    def __repr__(self) -> str:
        # LangGraph's: the fields that are set, in its field order, so a printed stream item
        # or an error message reads the same
        fields = (
            ("graph", self.graph),
            ("update", self.update),
            ("resume", self.resume),
            ("goto", self.goto),
        )
        shown = (f"{k}={v!r}" for k, v in fields if v is not UNSET and v)
        return f"Command({', '.join(shown)})"

    def goto_list(self) -> list[str | Send]:
        goto = self.goto
        if isinstance(goto, str):
            return [node_name(goto)]
        if isinstance(goto, Send):
            return [goto]
        if not isinstance(goto, (list, tuple, set, frozenset)) or not all(
            isinstance(g, (str, Send)) for g in goto
        ):
            raise InvalidRouteError(
                f"Command.goto takes a node name, a Send or a list of them, got {shown_repr(goto)}"
            )
        return [node_name(g) if isinstance(g, str) else g for g in goto]


def interrupt(value: Any = None, *, response_schema: Any = None) -> Any:
    """Pause the running node and surface ``value`` to the caller.

    On resume the node runs again from the top and the n-th ``interrupt()`` call returns the
    n-th answer; an unanswered call pauses the task again. Needs a checkpointer.

    ``response_schema`` (LangGraph's): the answer the node expects. A JSON Schema ``dict``
    goes out with the question as given (``Interrupt.response_schema``) and answers are not
    checked; a pydantic model, ``TypedDict``, dataclass or other type pydantic validates goes
    out as its JSON Schema, and the answer is validated: this call returns the validated value
    (a model instance, say). An answer that does not match raises pydantic's
    ``ValidationError`` in the node (``is_invalid_resume`` tells it apart); left uncaught it
    fails the node, the answer is not kept, and the question waits for another
    ``Command(resume=...)``. A schema pydantic cannot read is a ``TypeError``.
    """
    scope = current_scope()
    return scope.interrupt(value, read_response_schema(response_schema))


#: Errors that say the node is wrong, not that the world was: another attempt would fail the
#: same way (LangGraph's list; ``ConnectionError`` and ``TimeoutError``, both ``OSError``s,
#: are checked first and retried).
_NOT_TRANSIENT: Final = (
    ValueError,
    TypeError,
    ArithmeticError,
    ImportError,
    LookupError,
    NameError,
    SyntaxError,
    RuntimeError,
    ReferenceError,
    StopIteration,
    StopAsyncIteration,
    OSError,
)


def default_retry_on(exc: BaseException) -> bool:
    """``RetryPolicy``'s default ``retry_on``, LangGraph's ``default_retry_on``: retry a
    ``ConnectionError``, an HTTP error of httpx or requests with a 5xx status (or, from
    requests, none) and any exception that is not a programming error (``ValueError``,
    ``TypeError``, ``LookupError``, ``RuntimeError``, ``OSError``, ...). Ours also retries a
    ``TimeoutError`` (LangGraph's counts it with ``OSError``): a node's ``timeout=`` raises
    one, and a hung attempt is what another attempt is for."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    status = _http_status(exc)
    if status is not None:
        return status == "none" or 500 <= status < 600
    return not isinstance(exc, _NOT_TRANSIENT)


def _http_status(exc: BaseException) -> int | Literal["none"] | None:
    """The status of an httpx or requests HTTP error (``"none"`` for a requests error with no
    response), None for any other exception. Neither library is imported here: an error of one
    exists only once it is loaded."""
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(exc, httpx.HTTPStatusError):
        return int(exc.response.status_code)
    requests = sys.modules.get("requests")
    if requests is not None and isinstance(exc, requests.HTTPError):
        response = exc.response
        return "none" if response is None else int(response.status_code)
    return None


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class NodeError(FrozenRecord):
    """What a node's error handler is told of the failure it handles (LangGraph 1.2's
    ``langgraph.errors.NodeError``): given to the handler's parameter annotated
    ``NodeError`` (this one or LangGraph's), see ``StateGraph.add_node(..., error_handler=)``."""

    #: the name of the node whose last attempt failed
    node: str
    #: what it raised
    error: BaseException


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class RetryPolicy(FrozenRecord):
    """Retry a failing node: ``max_attempts`` in total, exponential backoff between them.

    LangGraph's fields and names: ``retry_on`` is an exception type, a tuple or list of
    them, or a predicate, by default ``default_retry_on`` (LangGraph's: transient errors,
    not programming errors such as ``ValueError``); ``jitter=True`` adds up to a second at
    random to each wait (off by default here: the waits start at 0 s). A field of the wrong
    kind is an ``ArgumentError`` (a ``ConfigurationError``, and a ``ValueError``) when the
    policy is made, not a node failing at its first error."""

    max_attempts: int = 3
    initial_interval: float = 0.0
    backoff_factor: float = 2.0
    max_interval: float = 30.0
    jitter: bool = False
    retry_on: (
        type[BaseException]
        | tuple[type[BaseException], ...]
        | list[type[BaseException]]
        | Callable[[BaseException], bool]
    ) = default_retry_on

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ArgumentError(
                f"RetryPolicy.max_attempts must be a whole number, at least 1, got {shown_repr(attempts)}"
            )
        for name in ("initial_interval", "backoff_factor", "max_interval"):
            value = getattr(self, name)
            # a NaN wait never ended; infinity and negatives are no wait anyone means
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ArgumentError(f"RetryPolicy.{name} must be a number, got {shown_repr(value)}")
            if not 0 <= value <= sys.float_info.max:  # an int past it: OverflowError later
                raise ArgumentError(
                    f"RetryPolicy.{name} must be finite and >= 0, got {shown_repr(value)}"
                )
        if isinstance(self.retry_on, list):  # LangGraph takes a sequence of types
            object.__setattr__(self, "retry_on", tuple(self.retry_on))
        check = self.retry_on
        kinds = check if isinstance(check, tuple) else (check,)
        takes = all(isinstance(k, type) and issubclass(k, BaseException) for k in kinds)
        if not takes and (isinstance(check, (tuple, type)) or not callable(check)):
            raise ArgumentError(
                "RetryPolicy.retry_on takes an exception type, a tuple or list of them, or a "
                f"function of the exception, got {shown_repr(check)}"
            )

    def should_retry(self, exc: BaseException) -> bool:
        check = self.retry_on
        if isinstance(check, (type, tuple)):
            return isinstance(exc, check)
        assert not isinstance(check, list)  # made a tuple in __post_init__
        return bool(check(exc))

    def interval(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based): grown past any
        float (many attempts, a large factor), it is ``max_interval``, as any wait past it."""
        try:
            grown = self.initial_interval * float(self.backoff_factor) ** (attempt - 1)
        except OverflowError:  # was a bare OverflowError out of the retry loop
            grown = 0.0 if self.initial_interval == 0 else math.inf
        wait = min(self.max_interval, grown)
        return wait + random.uniform(0, 1) if self.jitter else wait


def finite_seconds(value: int | float) -> bool:
    """Whether the number ``value`` is a finite number of seconds > 0 that a float holds: a
    whole number past any float passes ``0 < value < inf`` and then failed as a bare
    ``OverflowError`` where it became one."""
    try:
        return 0 < float(value) < math.inf
    except OverflowError:
        return False


def _seconds(value: object, field: str) -> float | None:
    """A ``TimeoutPolicy`` field: None, or a finite number of seconds > 0 (a ``timedelta``
    is its seconds). NaN timed out every attempt at once, infinity none, ``True`` was 1 s."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentError(
            f"TimeoutPolicy.{field} must be a number of seconds or a timedelta, got {shown_repr(value)}"
        )
    if not finite_seconds(value):
        raise ArgumentError(
            f"TimeoutPolicy.{field} must be finite and > 0, got {shown_repr(value)}"
        )
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class TimeoutPolicy(FrozenRecord):
    """How long one attempt of a node may take (LangGraph 1.2's, ``add_node(...,
    timeout=TimeoutPolicy(...))``): ``run_timeout``, seconds (or a ``timedelta``) in all,
    never extended; ``idle_timeout``, seconds without progress. ``refresh_on="auto"``: what
    the node streams (``ctx.emit``, the stream writer), a ``@task`` it calls and
    ``get_runtime().heartbeat()`` are progress; ``"heartbeat"``: only the heartbeat. An
    attempt that outlives either fails with ``NodeTimeoutError`` (its ``kind`` says which),
    which a ``RetryPolicy`` retries. A field of the wrong kind is an ``ArgumentError``
    when the policy is made; a policy with neither timeout sets none."""

    run_timeout: float | timedelta | None = None
    idle_timeout: float | timedelta | None = None
    refresh_on: Literal["auto", "heartbeat"] = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_timeout", _seconds(self.run_timeout, "run_timeout"))
        object.__setattr__(self, "idle_timeout", _seconds(self.idle_timeout, "idle_timeout"))
        if self.refresh_on not in ("auto", "heartbeat"):
            raise ArgumentError(
                "TimeoutPolicy.refresh_on must be 'auto' or 'heartbeat', got "
                f"{shown_repr(self.refresh_on)}"
            )

    def seconds(self) -> tuple[float | None, float | None]:
        """``(run_timeout, idle_timeout)`` in seconds (``__post_init__`` made them so)."""
        return self.run_timeout, self.idle_timeout  # type: ignore[return-value]

    @classmethod
    def coerce(cls, value: object) -> TimeoutPolicy | None:
        """A node's ``timeout=``: None; seconds or a ``timedelta`` (its ``run_timeout``); a
        ``TimeoutPolicy``, ours or LangGraph's (None when it sets neither timeout). Anything
        else is an ``ArgumentError``."""
        if value is None:
            return None
        if isinstance(value, cls):
            policy = value
        elif isinstance(value, (int, float, timedelta)):
            return cls(run_timeout=value)
        elif type(value).__name__ == "TimeoutPolicy" and hasattr(value, "idle_timeout"):
            policy = cls(
                run_timeout=getattr(value, "run_timeout", None),
                idle_timeout=value.idle_timeout,
                refresh_on=getattr(value, "refresh_on", "auto"),
            )
        else:
            raise ArgumentError(
                "timeout must be a number of seconds, a timedelta or a TimeoutPolicy, got "
                f"{type(value).__name__} {shown_repr(value)}"
            )
        if policy.run_timeout is None and policy.idle_timeout is None:
            return None
        return policy


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class GraphResult(Record):
    """What ``graph.run`` returns: the final (or paused) state and any pending interrupts.
    An ``Entrypoint``'s ``state`` is its function's return value, any value."""

    status: GraphStatus
    state: dict[str, Any]
    interrupts: list[Interrupt] = field(default_factory=list)
    thread_id: str | None = None
    checkpoint_id: str | None = None
    error: BaseException | None = None
    steps: int = 0

    def raise_for_status(self) -> GraphResult:
        """Re-raise the error of a failed run; return ``self`` otherwise."""
        if self.error is not None:
            raise self.error
        return self


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class TaskState(Record):
    """A task of a ``StateSnapshot``'s step (LangGraph's ``PregelTask``): finished (with its
    ``result``), paused on ``interrupts``, failed (``error``), or still to run. ``states`` are the states of the
    sub-graphs it ran (a sub-graph node, or the graphs its function called, in call order),
    read by ``get_state(subgraphs=True)``; ``state`` is the first of them."""

    id: str
    name: str
    interrupts: tuple[Interrupt, ...] = ()
    result: dict[str, Any] | None = None
    states: tuple[StateSnapshot, ...] = ()
    #: ``repr`` of the exception its last attempt failed with (None once it finished)
    error: str | None = None

    @property
    def state(self) -> StateSnapshot | None:
        return self.states[0] if self.states else None


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class StateSnapshot(Record):
    """A thread's state at one checkpoint, as ``graph.get_state`` returns it; ``ns`` is the
    namespace of a sub-graph's state (``""`` for the graph's own). An ``Entrypoint``'s
    ``values`` is its function's return value, any value (LangGraph's)."""

    values: dict[str, Any]
    next: tuple[str, ...]
    checkpoint_id: str | None
    parent_id: str | None
    step: int
    source: str
    #: A tuple, as LangGraph's (``snapshot.interrupts == ()`` on a thread that waits on none).
    interrupts: tuple[Interrupt, ...] = ()
    completed_tasks: tuple[str, ...] = ()
    created_at: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    tasks: tuple[TaskState, ...] = ()
    ns: str = ""


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class CheckpointInfo(Record):
    """One entry of ``graph.history``: which checkpoint, what wrote it, what runs next."""

    checkpoint_id: str
    parent_id: str | None
    step: int
    source: str
    snapshot: bool
    next: tuple[str, ...]
    written: tuple[str, ...]
    tasks: tuple[str, ...]
    created_at: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class StateUpdate(FrozenRecord):
    """One update of a superstep of ``bulk_update_state``, as LangGraph's ``StateUpdate``:
    ``values`` (as ``update_state``'s ``update``) counted as the output of ``as_node``."""

    values: Any
    as_node: str | None = None
