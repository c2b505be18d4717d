"""Every exception tinyagents raises on purpose.

    TinyAgentsError
    ├── ConfigurationError            a component was wired or configured wrongly
    │   ├── RuntimeClosed              the runtime is closing or closed: it takes no new work
    │   ├── ModelsWithheld             a child's every model was taken from a run above it by steering
    │   ├── ToolsWithheld              a child was started naming tools taken from a run above it by steering
    │   ├── SubscriptionInUse          a second task waited on one event subscription (also a RuntimeError)
    │   ├── ArgumentError              a call was given a value it does not take (also a ValueError)
    │   │   ├── KeywordArgumentError    ... a keyword it does not take (also a TypeError)
    │   │   └── InvalidNamespaceError   a graph store namespace is empty, or a label is empty, not text or holds a '.'
    │   ├── SemanticSearchUnsupported  a graph store was asked for semantic search (index=, query=)
    │   └── GraphValidationError       compile() found unknown / unreachable / dead-end nodes, or a
    │                                  thread API was called on a graph compiled without checkpointer
    ├── InvalidCommandError            a SteeringCommand is invalid (also a ValueError)
    ├── InvalidIdError                 a run, thread or tenant id no run can have (also a ValueError)
    ├── UnknownTargetError             the run, task, node or thread named by a command does not exist
    ├── SteeringRejected               a command was rejected by the policy pipeline (carries the receipt)
    ├── AuthError                      an operator API token is missing, unreadable or not signed by the server's key
    ├── ControlPlaneUnavailable        Redis cannot be reached to send a command to the worker that owns its run
    ├── StoreError                     a persistence backend failed or holds data it cannot read
    │   ├── StaleCheckpointError       a write was based on a checkpoint that is no longer the latest
    │   ├── ThreadBusy                 another run is already writing this thread
    │   ├── LeaseExpired               the store was out of reach past a thread's lease: the writer stopped
    │   ├── CheckpointerClosed         a checkpointer was used after aclose(), which is for good
    │   ├── DamagedData                a stored record no longer reads (also a ValueError): retrying cannot help
    │   └── ReceiptTimeout             a command put in the store's inbox got no receipt in time
    ├── RunError                       a run ended without a result
    │   ├── RunLimitExceeded           a RunLimits bound was hit (limit, used, allowed)
    │   ├── RunCancelled               the run was cancelled by a steering command
    │   │   └── RunAborted              ... with abort: true (a run stopped for breaking a policy)
    │   └── RunFailed                  the run raised; the original error is the __cause__
    ├── SyncInAsyncError               run_sync() was called inside a running event loop (also a RuntimeError)
    ├── ModelError                     a model provider call failed (after its retries, if retryable)
    │   ├── ModelConnectionError        nothing answered at api_base (refused, unreachable)   retried
    │   ├── ModelTimeoutError           no answer within the timeout                          retried
    │   ├── ModelRateLimitError         HTTP 429                                              retried
    │   ├── ModelServerError            HTTP 5xx                                              retried
    │   ├── ModelAuthenticationError    HTTP 401/403: the key was refused
    │   │   └── MissingAPIKeyError      no API key was configured; nothing was sent
    │   ├── ModelNotFoundError          HTTP 404: unknown model, or api_base has the wrong path
    │   ├── ModelRequestRejected        another 4xx: the server refused this request
    │   └── ModelResponseError          a 200 the client cannot use
    │       ├── ModelResponseNotJSON    the body is not JSON (often api_base is not the API root)
    │       └── ModelEmptyResponse      the completion has no choices
    ├── ToolError                      a tool could not be called (unknown name, bad arguments, timeout)
    │   └── ModelRetry                  a tool or output validator sends the model back with its message
    └── GraphError                     the graph runtime could not continue
        ├── GraphRecursionError        the step limit was reached (also a RecursionError)
        ├── StepTimeoutError           a superstep outlived the graph's step_timeout (also a TimeoutError)
        ├── NodeTimeoutError           a node's attempt outlived its timeout= (also a TimeoutError)   retried
        ├── NodeCancelledError         a node raised CancelledError though nothing cancelled it (also a RuntimeError)
        ├── InvalidRouteError          a route to no node or outside a path_map (a KeyError, a ValueError)
        ├── InvalidUpdateError         conflicting writes to an overwrite channel in one step, an unknown key, a value no checkpoint holds
        └── InterruptError             a resume did not match the pending interrupts (also a RuntimeError)

Errors say what was wrong and what to do about it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

# This module sits at the bottom of the layers, beside ``_clock``: it imports nothing from
# tinyagents, so the protocol layer can raise these errors. ``SteeringRejected`` describes the
# receipt it carries by its shape (``tinyagents.protocol.commands.SteeringReceipt`` has it).


class RejectedReceipt(Protocol):
    """What ``SteeringRejected`` carries: the fields of a ``SteeringReceipt``."""

    @property
    def status(self) -> str: ...
    @property
    def correlation_id(self) -> str: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def policy_id(self) -> str | None: ...


class TinyAgentsError(Exception):
    """Base class of every error raised by tinyagents.

    Every one survives ``pickle`` and ``copy`` whole (its message and attributes), also one
    whose constructor takes other arguments than its message (``RunLimitExceeded(limit, used,
    allowed)``): it is rebuilt from what it holds, not by calling that constructor again with
    its message, which failed or read the message as the first argument.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args), self.__dict__ or None)


def _rebuild(cls: type[TinyAgentsError], args: tuple[Any, ...]) -> TinyAgentsError:
    """A ``cls`` holding ``args``, made without its ``__init__`` (``__reduce__``; pickle then
    sets its attributes). ``args`` are set again: ``OSError.__new__`` (``TimeoutError``'s, so
    ``NodeTimeoutError``'s) leaves them to an ``__init__`` a subclass defines."""
    error = cls.__new__(cls, *args)
    error.args = args
    return error


class ConfigurationError(TinyAgentsError):
    """A component was wired or configured wrongly."""


class UnsupportedOutputError(ConfigurationError):
    """An ``Agent(output_type=...)`` asks for a pydantic-ai output marker option that
    tinyagents does not carry out (``NativeOutput`` with a name, description, strict or
    template; ``NativeOutput`` or ``PromptedOutput`` of output functions or ``str``): refused
    when the agent is made, naming the marker, rather than run with the option dropped."""


class RuntimeClosed(ConfigurationError):
    """The runtime is closing or closed: it takes no new command, run or child run."""


class ModelsWithheld(ConfigurationError):
    """A child run cannot start: every model its agent names was taken away from a run above
    it by ``constrain_model`` (a child gets no more than its parent was left with)."""


class ToolsWithheld(ConfigurationError):
    """A child run was started naming tools (``rt.start(..., tools=[...])``) that were taken
    away from a run above it by ``constrain_tools``: a child gets no more than its parent was
    left with, and a caller asking for more is told so rather than given less in silence."""


class SubscriptionInUse(ConfigurationError, RuntimeError):
    """A second task waited for the next event of a subscription another task was waiting on:
    the two would split its events (each going to one of them). A subscription is one
    reader's queue: ``subscribe()`` once per reader, and each gets every event."""


class ArgumentError(ConfigurationError, ValueError):
    """A call was given a value it does not take: a step limit below 1 (``recursion_limit``),
    a count below 0 (``history(limit=)``), a subscription holding no event
    (``subscribe(maxsize=0)``), a clock moved by NaN seconds; the message says what it takes.
    Also a ``ValueError``, which these were before they had a type of their own (and which
    LangGraph raises for a bad ``recursion_limit``): ``except ValueError`` still catches them."""


class KeywordArgumentError(ArgumentError, TypeError):
    """A call given a keyword it does not take: a ``RunHandle`` control method given a part of
    the command it sets itself (``handle.steer("x", target=...)``). An ``ArgumentError``
    saying what to do instead, and still the ``TypeError`` such a call raised (which it was)."""


class InvalidNamespaceError(ArgumentError):
    """A graph store (``tinyagents.store.longterm``) namespace LangGraph refuses: empty, a
    label that is empty, not text or holds a ``.``, or (for a put) the reserved first label
    ``"langgraph"``. A ``ValueError``, as LangGraph's ``InvalidNamespaceError``."""


class SemanticSearchUnsupported(ConfigurationError, NotImplementedError):
    """A graph store was given LangGraph's semantic-search options (``index=``, a search's
    ``query=``): this store has no embeddings; search with ``filter=`` on stored values."""


class BudgetArgumentError(KeywordArgumentError):
    """``RunHandle.update_budget`` given a keyword that is no limit it can change
    (``max_turns=5``, ``max_depth=3``): an ``ArgumentError`` naming the limits it can change,
    and still the ``TypeError`` a call with an unknown keyword raises (which it was)."""


class GraphValidationError(ConfigurationError, ValueError):
    """A graph that cannot be built or compiled (an unknown or duplicate node, a reserved
    name, an unreachable node, a bad compile option), or that was compiled without what a
    call needs (``get_state`` without a checkpointer); ``nodes`` names the offending nodes.
    Also a ``ValueError``, which LangGraph raises there: ported ``except ValueError`` and
    ``pytest.raises(ValueError)`` still catch it."""

    def __init__(self, message: str, *, nodes: list[str] | None = None) -> None:
        super().__init__(message)
        self.nodes = list(nodes or [])


class InvalidCommandError(TinyAgentsError, ValueError):
    """A steering command is malformed: the message names the kind and the field.

    Raised by every way of building a command (keywords, ``model_validate``,
    ``model_validate_json``); a ``ValueError``, like the errors of other validating code.
    """


class InvalidIdError(TinyAgentsError, ValueError):
    """An id given for a run, thread or tenant that no run can have: blank, not a string,
    holding a NUL or a lone surrogate (or, for a run id, no URL path segment); ``field``
    names the argument. A ``ValueError``, as it was before it had a type of its own."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class UnknownTargetError(TinyAgentsError, LookupError):
    """The run, task, node or thread a command names does not exist (or is not visible)."""


class SteeringRejected(TinyAgentsError):
    """Raised by convenience helpers (``RunHandle.steer`` & co.) when a command is rejected."""

    def __init__(self, receipt: RejectedReceipt) -> None:
        super().__init__(f"steering command {receipt.correlation_id} rejected: {receipt.reason}")
        self.receipt = receipt


class AuthError(TinyAgentsError):
    """An operator API token is missing, unreadable, or not signed by this server's key."""


class ControlPlaneUnavailable(TinyAgentsError):
    """A command for a run another worker owns could not be sent: Redis cannot be reached.

    Nothing was sent. The worker keeps reconnecting; submit again later, or to the worker
    that owns the run (its own runs never need Redis).
    """


class StoreError(TinyAgentsError):
    """A persistence backend failed or holds data it cannot read."""


class StaleCheckpointError(StoreError):
    """A write or command referred to a checkpoint that is no longer the thread's latest."""


class ReceiptTimeout(StoreError):
    """A command submitted through the store got no receipt from the run's owner in time.

    The command stays in the owner's inbox: it may still be applied later. Submit it again
    with the same correlation id to learn its outcome (a duplicate is answered ``duplicate``).
    """

    def __init__(self, correlation_id: str, owner: str, timeout_s: float) -> None:
        super().__init__(
            f"no receipt for command {correlation_id} from runtime {owner} within "
            f"{timeout_s:g}s: it may still be applied; submit it again with the same "
            "correlation id to learn its outcome, or check that the run's process is alive"
        )
        self.correlation_id = correlation_id
        self.owner = owner
        self.timeout_s = timeout_s


class ThreadBusy(StoreError):
    """Another run is already writing this thread; wait for it or fork the thread.
    ``held_by``: that run's id, when it is known (a runtime's own runs of an agent thread)."""

    def __init__(self, thread_id: str, *, held_by: str | None = None) -> None:
        writer = f" (run {held_by})" if held_by is not None else ""
        super().__init__(
            f"thread {thread_id!r} already has a running writer{writer}; wait for it to "
            "finish or fork the thread"
        )
        self.thread_id = thread_id
        self.held_by = held_by


class LeaseExpired(StoreError):
    """A thread's writer could not reach the store for as long as its lease lasts
    (``lease_ttl`` after it was last confirmed): another writer may hold the thread by now, so
    it wrote nothing more. What it saved before stays; once the store answers again, continue
    the thread (``run(None, thread_id=...)``), or raise ``lease_ttl`` to ride out longer
    outages."""


class CheckpointerClosed(StoreError):
    """A checkpointer was used after its ``aclose()``, which is for good on every backend:
    nothing opens it again, and a save under way when it closed stops with this error (one
    that does not pass: trying again cannot help). Open a new checkpointer."""


class DamagedData(StoreError, ValueError):
    """The store holds a record it cannot read: a run snapshot that is not JSON, or JSON of
    another shape (written by hand, a disk fault). Unlike another ``StoreError`` this one
    does not pass: reading it again reads the same bytes; the record needs repairing.

    ``record`` names it (``run snapshot of 'r-1'``) without quoting what it holds, for a
    caller that may not see its content (the operator API, answering before it knows whose
    the record is); the message says what is wrong too, for the log.

    ``tenant_id`` is whose the record is, where that still reads (a column next to the
    snapshot, or the snapshot's own ``tenant_id``), else None: the operator API tells the
    damage to that tenant alone, and to any other answers as for a run that does not exist."""

    def __init__(self, message: str, *, record: str, tenant_id: str | None = None) -> None:
        super().__init__(message)
        self.record = record
        self.tenant_id = tenant_id


class RunError(TinyAgentsError):
    """A run ended without a result."""


class RunLimitExceeded(RunError):
    """A run hit one of its ``RunLimits``."""

    def __init__(
        self,
        limit: str,
        used: Any,
        allowed: Any,
        *,
        run_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        where = f" in run {run_id}" if run_id else ""
        numbers = limit_usage(used, allowed)
        more = f" ({detail})" if detail else ""
        super().__init__(
            f"run limit {limit!r} exceeded{where}{': ' if numbers else ''}{numbers}{more}"
        )
        self.limit = limit
        self.used = used
        self.allowed = allowed
        self.run_id = run_id
        #: More on what was counted (e.g. the tool calls of a response checked together).
        self.detail = detail


def limit_usage(used: Any, allowed: Any) -> str:
    """What a run used of a limit, as its messages say it: ``used 3, allowed 3``. A limit of 0
    allows nothing (``max_tool_calls=0``, or a child's limit lowered to what its parent had
    left), where "used 0, allowed 0" told nobody what happened: ``none allowed, its limit is
    0``. Numbers nobody knows are left out ("" for both)."""
    if used is None and allowed is None:
        return ""
    if allowed == 0 and not isinstance(allowed, bool):
        nothing = "none allowed, its limit is 0"
        return f"used {used}; {nothing}" if used else nothing
    return f"used {used}, allowed {allowed}"


class RunCancelled(RunError):
    """The run was cancelled by a steering command (or its parent was); ``by`` names who
    sent that command (``human "alice"``, ``middleware "supervisor"``), when it is known."""

    _ended = "cancelled"

    def __init__(self, run_id: str, reason: str | None = None, *, by: str | None = None) -> None:
        who = f" by {by}" if by else ""
        super().__init__(f"run {run_id} was {self._ended}{who}" + (f": {reason}" if reason else ""))
        self.run_id = run_id
        self.reason = reason
        self.by = by


class RunAborted(RunCancelled):
    """The run was aborted: cancelled by a ``cancel`` command with ``abort: true`` (what a
    supervisor sends for a run breaking its policy; a human or a parent may send one too, and
    ``by`` says who did), so its work was stopped, not given up. A ``RunCancelled``, for
    callers that handle both alike."""

    _ended = "aborted"


class RunFailed(RunError):
    """The run raised; the original exception is chained as ``__cause__``."""


class SyncInAsyncError(TinyAgentsError, RuntimeError):
    """A ``run_sync`` helper was called while an event loop is running in this thread: it
    would block that loop. Use ``await ...run(...)`` there instead."""

    @classmethod
    def refuse_inside_a_loop(cls, what: str, instead: str) -> None:
        """Raise for ``what`` (e.g. ``graph 'g'``) when this thread runs an event loop,
        telling to use ``instead`` there; return when ``asyncio.run`` may start one."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop in this thread: the caller's to start
        raise cls(
            f"{what}: run_sync() was called inside a running event loop, which it would "
            f"block; use {instead!r} there"
        )


class ModelError(TinyAgentsError):
    """A model call failed (after its retries, when the failure is one worth retrying).

    ``model`` and ``api_base`` name what was called, ``status`` the HTTP status if there was
    one; ``retryable`` says whether ``LiteLLMModel`` retries this kind of failure;
    ``retry_after_s`` how long the server asked to wait before another attempt (the
    ``Retry-After`` of a 429 or a 503), when it said; ``usage`` what the failed call spent
    (a ``Usage``), when the provider said: an answer it blocked still cost the prompt's
    tokens, and the agent loop counts them on the run and its ancestors.
    """

    retryable: bool = False
    usage: Any = None

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        api_base: str | None = None,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.model = model
        self.api_base = api_base
        self.status = status
        self.retry_after_s = retry_after_s


class ModelConnectionError(ModelError):
    """Nothing answered at ``api_base``: connection refused, host unreachable, DNS failure."""

    retryable = True


class ModelTimeoutError(ModelError):
    """The provider did not answer within the timeout."""

    retryable = True


class ModelRateLimitError(ModelError):
    """HTTP 429: the provider is rate-limiting this key."""

    retryable = True


class ModelServerError(ModelError):
    """HTTP 5xx: the provider failed (or is overloaded)."""

    retryable = True


class ModelAuthenticationError(ModelError):
    """HTTP 401/403: the provider refused the API key."""


class MissingAPIKeyError(ModelAuthenticationError):
    """No API key was configured for a provider that needs one; no request was sent."""


class ModelNotFoundError(ModelError):
    """HTTP 404: the server does not know the model, or ``api_base`` has the wrong path."""


class ModelRequestRejected(ModelError):
    """Another 4xx: the server refused this request (bad field, context too long, ...)."""


class ModelResponseError(ModelError):
    """The provider answered 200 with a body the client cannot use. ``refusal``: what the
    model said instead of an answer when it refused (OpenAI's ``message.refusal``)."""

    refusal: str | None = None


class ModelResponseNotJSON(ModelResponseError):
    """The body of a 200 is not JSON: ``api_base`` is often not the API root (``.../v1``)."""


class ModelEmptyResponse(ModelResponseError):
    """The completion has an empty ``choices`` list."""


class ToolError(TinyAgentsError):
    """A tool could not be called: unknown name, invalid arguments or timeout."""


class ModelRetry(ToolError):
    """Raised by a tool or an output validator (``@agent.output_validator``) to send the
    model back with its message, as pydantic-ai's ``ModelRetry`` does: a tool's call is
    answered with the message as its error result; a refused final answer is answered with it
    and the model asked again, counted against ``Agent(output_retries=...)``."""


class ToolFailed(ToolError):
    """Raised by a tool to report its call done and failed (a missing resource, an
    unsupported operation), as pydantic-ai's ``ToolFailed``: the call is answered with the
    message as its error result, for the model to adapt to rather than call again the same
    way; unlike ``ModelRetry`` it is not counted against the tool's retries
    (``Tool(retries=...)``, ``RunContext.retry``). Bound repeated failures with
    ``RunLimits(max_tool_calls=...)``."""


class GraphError(TinyAgentsError):
    """The graph runtime could not continue."""


class GraphRecursionError(GraphError, RecursionError):
    """The graph reached its step limit without finishing (also a ``RecursionError``, as
    LangGraph's is, so ``except RecursionError`` in ported code still catches it)."""


class StepTimeoutError(GraphError, TimeoutError):
    """A superstep did not finish within its graph's ``step_timeout``: its unfinished tasks
    were cancelled (also a ``TimeoutError``, which is ``asyncio.TimeoutError``, as LangGraph
    raises, so ``except asyncio.TimeoutError`` in ported code still catches it)."""


class NodeTimeoutError(GraphError, TimeoutError):
    """A node's attempt outlived its ``add_node(..., timeout=)``: LangGraph 1.2's error, with
    its ``node``, ``timeout`` (the one that fired), ``elapsed``, ``kind`` (``"run"``: the
    attempt's ``run_timeout``; ``"idle"``: its ``idle_timeout`` without progress), and the
    policy's ``run_timeout`` and ``idle_timeout`` (None when not set). Also a
    ``TimeoutError``, so ``except TimeoutError`` still catches it. Unlike tinyagents' other
    errors, a node's ``RetryPolicy`` retries it (its default ``retry_on`` does, as
    LangGraph's retries its own): another attempt may finish in time. A ``TimeoutError``
    the node raised itself is not one: it fails the node as raised."""

    def __init__(
        self,
        node: str,
        timeout: float,
        elapsed: float,
        *,
        kind: str = "run",
        run_timeout: float | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        if kind == "idle":
            text = f"its idle timeout of {timeout:.3f}s without making progress"
        else:
            text = f"its run timeout of {timeout:.3f}s"
        super().__init__(
            f"Node {node!r} exceeded {text} (elapsed: {elapsed:.3f}s): give it a longer "
            "timeout= or a RetryPolicy, or make it faster"
        )
        self.node = node
        self.timeout = timeout
        self.run_timeout = timeout if kind == "run" and run_timeout is None else run_timeout
        self.idle_timeout = idle_timeout
        self.elapsed = elapsed
        self.kind = kind


class NodeCancelledError(GraphError, RuntimeError):
    """A node raised ``CancelledError`` though nothing cancelled its task (a cancel of
    something it awaited, let through): it fails the node, as LangGraph 1.2's error of this
    name does; ``node`` names it, the ``CancelledError`` is its ``__cause__``. Also a
    ``RuntimeError``, what such a node failed with before."""

    def __init__(self, node: str) -> None:
        super().__init__(
            f"node {node!r} raised CancelledError, but its task was not cancelled (a cancel "
            "of something it awaited, let through?): catch it in the node, or raise another "
            "error"
        )
        self.node = node


class InvalidRouteError(GraphError, KeyError, ValueError):
    """A router returned a name outside its ``path_map`` or no destination at all (``None``,
    ``START``), or a router or ``Command(goto=...)`` sent the graph to a node it does not
    have. Also a ``KeyError``, which LangGraph raises for a name outside the path map, and a
    ``ValueError``, which it raises for a router that returns no destination, so ported code's
    ``except KeyError`` / ``except ValueError`` still catch it."""

    def __str__(self) -> str:  # the message, not KeyError's repr of it
        return Exception.__str__(self)


class InvalidUpdateError(GraphError):
    """Conflicting writes to an overwrite channel in one superstep, an update to an unknown
    key, or a value a checkpoint cannot hold (not JSON-able)."""


class InterruptError(GraphError, RuntimeError):
    """A resume value did not match the pending interrupts. Also a ``RuntimeError``, which
    LangGraph raises for a resume that cannot choose among several interrupts."""


def kind_of(value: object) -> str:
    """What ``value`` is, for an error refusing it: its type's name, or ``the class X`` for a
    class given where an instance was meant (``supervisor=SupervisorSpec``, no call)."""
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return type(value).__name__


def message_of(exc: BaseException) -> str:
    """``str(exc)``, for an error someone else raised (a tool's, a model's): an exception
    whose ``__str__`` itself raises is named by its type instead, so reporting it cannot
    fail in turn (a run whose model raised one never ended)."""
    try:
        return str(exc)
    except Exception as broken:
        return f"<{type(exc).__name__}: its message cannot be read ({type(broken).__name__})>"
