"""The operator HTTP API: ``create_app(control, auth=...)`` builds the FastAPI app.

Endpoints, under ``/api/agents`` (OpenAPI at ``/api/agents/openapi.json``, docs at
``/api/agents/docs``):

    GET  /runs                          this tenant's runs, newest first, a page at a time
                                        (?status=, ?root_run_id=, ?limit=, ?cursor=; the
                                        next page in a Link: <...>; rel="next" header)
    GET  /runs/{id}                     one snapshot, live counters, pending commands, interrupts
    GET  /runs/{id}/tree                the run and everything below it, nested (?limit=
                                        runs at most; "truncated" says when runs were left out)
    GET  /runs/{id}/trace               its latest progress frames, a page at a time (?limit=,
                                        ?before=; the older page in a Link: rel="next")
    GET  /runs/{id}/steering            its command history with terminal states, a page at
                                        a time (?limit=, ?before=; as /trace)
    POST /runs/{id}/pause|resume|abort  {"reason": ...} optional
    POST /runs/{id}/steer               {"message": "..."}
    POST /runs/{id}/commands            {"kind": ..., "payload": {...}, priority, delivery, ...}
    POST /runs/{id}/tasks/{task}/commands   the same, for one task of a graph run
    GET  /events                        Server-Sent Events (see ``tinyagents.server.sse``)

    POST /events/tickets                a ticket that opens one event stream, once, within 60 s

Every request carries a Biscuit token (``Authorization: Bearer <token>``). An
``EventSource`` cannot set a header, so the event stream takes ``?ticket=``: a short-lived,
single-use ticket for that stream, got with the token in the header (the token itself in
``?access_token=`` still works, deprecated: a URL ends up in access logs). A run the caller may
not see — another tenant's, one outside an attenuated token's scope, or no run at all — is 404
on every endpoint, the same answer with the same body. The target of a command comes from the
path and its actor from the token; a body naming either is refused (422).

FastAPI is imported inside ``create_app``: this module imports without the ``server`` extra.
"""

# No ``from __future__ import annotations``: FastAPI reads the endpoints' annotations at
# runtime, and the endpoints are defined inside ``create_app`` next to the FastAPI names.
import json
import logging
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin
from urllib.parse import quote, unquote

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StringConstraints,
    TypeAdapter,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from tinyagents import __version__
from tinyagents._bounds import whole_number
from tinyagents._record import Record
from tinyagents.errors import (
    AuthError,
    ControlPlaneUnavailable,
    DamagedData,
    InvalidCommandError,
    RuntimeClosed,
    StoreError,
)
from tinyagents.protocol.commands import (
    MAX_CORRELATION_ID,
    MAX_PROBLEMS,
    PRIORITY_NAMES,
    ReceiptStatus,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPriority,
    SteeringReceipt,
    correlation_id_problem,
    quoted_name,
    shows_nothing,
)
from tinyagents.protocol.ids import (
    ID_PATTERN,
    MAX_ID_LENGTH,
    STORED_ID_PATTERN,
    id_problem,
    shown_id,
    shown_name,
)
from tinyagents.protocol.state import RunStatus
from tinyagents.server.answers import (
    CommandHistoryEntry,
    Liveness,
    Readiness,
    RunSnapshot,
    RunTreeNode,
    TraceFrame,
)
from tinyagents.server.auth import (
    INSECURE_DEV,
    Auth,
    Operation,
    Principal,
    RunFacts,
    narrowed_to,
    stream_digest,
    ticket_claims,
)
from tinyagents.server.control import (
    MAX_CURSOR,
    EntryScope,
    command_target,
    decode_cursor,
    encode_cursor,
)
from tinyagents.server.loopback import LoopbackOnly
from tinyagents.server.problems import (
    CAUSE_TYPES,
    ERROR_TYPES,
    api_json,
    error_body,
    library_status,
    library_type,
    send_error,
)
from tinyagents.server.sse import event_stream
from tinyagents.store.base import run_key

if TYPE_CHECKING:
    from fastapi import APIRouter, FastAPI

    from tinyagents.server.control import Control

BASE = "/api/agents"
#: The 404 of a path no endpoint has.
NO_SUCH_PATH = (
    f"no such path: the endpoints are under {BASE}/, listed at {BASE}/docs ({BASE}/openapi.json)"
)
_log = logging.getLogger("tinyagents.server")
#: How far up a parent chain the server walks to tell an attenuated token a run's ancestors.
_MAX_LINEAGE = 256
#: How many runs named by a narrowed token's blocks are looked up to find the tree it sees.
_MAX_NARROWINGS = 8
#: A tenant no run has (a tenant id holding NUL is refused): a lookup for it finds nothing,
#: after every lookup an id that names no run takes.
_NO_TENANT = "\x00"
#: The largest event-log id a store can hold (a signed 64-bit integer in SQLite and
#: PostgreSQL); a larger one would make the store's driver raise mid-stream.
_MAX_EVENT_ID = 2**63 - 1
#: How often an open event stream asks again whether the caller's token still holds.
_RECHECK_S = 1.0
#: How long an event-stream ticket may open its stream (it is used once, at once, by the
#: page that asked for it: a ticket read from a log later opens nothing).
TICKET_TTL_S = 60
#: Runs on a page of ``GET /runs`` unless ``?limit=`` says otherwise, and the most it may ask.
RUNS_PAGE = 100
MAX_RUNS_PAGE = 1000
#: Frames on a page of ``GET /runs/{id}/trace`` unless ``?limit=`` says otherwise, and the most.
TRACE_PAGE = 500
MAX_TRACE_PAGE = 5000
#: Runs in an answer of ``/runs/{id}/tree``, by default and at most.
TREE_LIMIT = 1000
MAX_TREE_LIMIT = 10_000
#: Commands in a page of ``/runs/{id}/steering``, by default and at most.
STEERING_PAGE = 100
MAX_STEERING_PAGE = 1000


# --------------------------------------------------------------------------- bodies

_PRIORITY_NUMBERS = (0, 50, 100, 200)


def _a_priority(value: Any) -> int | str:
    """A priority as a JSON integer of the four or a name: not "100", 100.0 or true, which
    lax parsing took. One check with one message, where a union of the two would list each
    branch's failure under its internal name."""
    if isinstance(value, SteeringPriority):
        return int(value)
    if (type(value) is int and value in _PRIORITY_NUMBERS) or (
        type(value) is str and value in PRIORITY_NAMES
    ):
        return value
    try:
        got = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        got = repr(value)
    raise PydanticCustomError(
        "priority",
        "a JSON integer (0, 50, 100, 200) or a name (low, normal, high, critical); got {got}",
        {"got": got[:100]},
    )


#: A priority: the JSON number 0, 50, 100 or 200, or low, normal, high, critical.
Priority = Annotated[
    int | str,
    PlainValidator(_a_priority),
    WithJsonSchema(
        {
            "anyOf": [
                {"enum": list(_PRIORITY_NUMBERS), "type": "integer"},
                {"enum": ["low", "normal", "high", "critical"], "type": "string"},
            ]
        }
    ),
]


def _a_correlation_id(value: str) -> str:
    """``value`` if it keeps the id rule as a command's correlation id does
    (``correlation_id_problem``), else a 422 that says which part it breaks: the body's type
    refused only NUL, and its schema said nothing of the rest."""
    problem = correlation_id_problem(value)
    if problem is not None:
        raise PydanticCustomError("id_rule", "breaks the id rule: {problem}", {"problem": problem})
    return value


def _an_id(value: str) -> str:
    """``value`` if it keeps the id rule (``tinyagents.protocol.ids``) as a lookup of what is
    stored does (``id_problem(stored=True)``: an id saved before the rule refused bidi and
    zero-width characters still reads), else a 422 that says which part it breaks."""
    problem = id_problem(value, stored=True)
    if problem is not None:
        raise PydanticCustomError(
            "id_rule",
            "breaks the id rule: {problem}",
            {"problem": problem},
        )
    return value


#: An id in a query or a body: the id rule (``tinyagents.protocol.ids``), its breach a 422
#: saying what is wrong (pydantic's own would quote the pattern). In a path, an id that
#: breaks the rule names no run: 404 (``_plausible_id``).
ApiId = Annotated[
    str,
    StringConstraints(min_length=1),  # blank: a 422 too (it was looked up, a 404)
    AfterValidator(_an_id),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_ID_LENGTH,
            "pattern": STORED_ID_PATTERN,
        }
    ),
]


def _a_boolean(value: Any) -> bool:
    """A boolean in the query: ``true`` or ``false`` (in any letter case: Python's ``str``
    of one is ``True``). pydantic also took ``yes``, ``on``, ``1``, ``t`` and more, which a
    proxy, a log or another framework may read otherwise, or not at all."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise PydanticCustomError("boolean", "true or false; got {got}", {"got": repr(value)[:40]})


#: A boolean query parameter: ``true`` or ``false`` only (``_a_boolean``).
QueryBool = Annotated[bool, PlainValidator(_a_boolean), WithJsonSchema({"type": "boolean"})]


# The bounds inside the type, before the check: put on the ``... | None`` field they applied
# after it, and a blank id was "Value should have at least 1 item after validation, not 0".
CorrelationId = Annotated[
    str,
    StringConstraints(min_length=1),
    AfterValidator(_a_correlation_id),
    WithJsonSchema(
        {"type": "string", "minLength": 1, "maxLength": MAX_CORRELATION_ID, "pattern": ID_PATTERN}
    ),
]
CheckpointId = Annotated[
    str,
    StringConstraints(min_length=1),
    AfterValidator(_an_id),
    WithJsonSchema(
        {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH, "pattern": ID_PATTERN}
    ),
]


def _a_cursor(value: str) -> str:
    decode_cursor(value)  # ValueError: a 422 that says where cursors come from
    return value


Cursor = Annotated[str, AfterValidator(_a_cursor)]

#: A ``Last-Event-ID`` header as sent (read by ``events``: empty is no id, as the SSE spec
#: has it), documented as the event id it holds.
LastEventIdHeader = Annotated[
    str | None,
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": _MAX_EVENT_ID}),
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CommandOptions(_Body):
    """The optional fields of every command a body can send (never target or actor)."""

    # a number of the four (JSON 100) or a name: not "100", 100.0 or false, which lax
    # parsing took (a strict enum took no number at all: the body is validated as Python)
    priority: Priority = 50
    delivery: SteeringDelivery = SteeringDelivery.NEXT_BOUNDARY
    correlation_id: CorrelationId | None = Field(
        default=None,
        description="your id for the command: sending it again is answered 'duplicate'",
    )

    def command_fields(self) -> dict[str, Any]:
        priority = self.priority
        fields: dict[str, Any] = {
            "priority": PRIORITY_NAMES[priority]
            if isinstance(priority, str)
            else SteeringPriority(priority),
            "delivery": self.delivery,
        }
        if self.correlation_id is not None:
            fields["correlation_id"] = self.correlation_id
        return fields


class TicketBody(_Body):
    """The stream an event-stream ticket opens: ``/events``'s ``?run_id=`` and
    ``?root_run_id=`` (neither: every event the token may see)."""

    run_id: ApiId | None = None
    root_run_id: ApiId | None = None


class TicketAnswer(BaseModel):
    """An event-stream ticket: ``GET /events?ticket=...`` with the stream's parameters."""

    ticket: str = Field(description="for ?ticket=: opens the stream once")
    expires_in: int = Field(description="seconds it may open the stream in")
    stream: TicketBody = Field(description="the ?run_id= and ?root_run_id= it opens")


class ReasonBody(CommandOptions):
    reason: str | None = Field(default=None, max_length=2000)


class SteerBody(CommandOptions):
    message: str = Field(
        min_length=1,
        description="the instruction the run's model sees at its next step (an "
        "add_instruction command); missing or empty is 422, whitespace only 400",
    )


class CommandBody(CommandOptions):
    kind: SteeringKind
    payload: dict[str, Any] = Field(default_factory=dict)
    # Bounded: a rejection quotes it back (in the receipt and the audit trail).
    checkpoint_id: CheckpointId | None = None
    fork: StrictBool = False  # true or false: not "true" or 1

    def command_fields(self) -> dict[str, Any]:
        fields = super().command_fields()
        if self.checkpoint_id is not None:
            fields["checkpoint_id"] = self.checkpoint_id
        if self.fork:
            fields["fork"] = True
        return fields


# --------------------------------------------------------------------------- problems


class ProblemItem(BaseModel):
    """One problem of a 422: where (``loc``), what (``msg``) and its kind (``type``)."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """The body of every error answer of the API."""

    type: str = Field(
        description="the kind of error, a stable code to branch on: the status's ("
        + ", ".join(f"{kind} {status}" for status, kind in ERROR_TYPES.items())
        + "), or a cause's own where the status alone would mislead ("
        + ", ".join(f"{kind} {status}" for kind, status in CAUSE_TYPES.items())
        + ")"
    )
    message: str = Field(description="the problem, in one line")
    detail: str | list[ProblemItem] = Field(
        description="the same line; for a 422, the list of problems"
    )
    receipt: SteeringReceipt | None = Field(
        default=None,
        description="a command's receipt, when it was refused because its target does not "
        "exist (a 404)",
    )
    correlation_id: str | None = Field(
        default=None,
        description="the command's id, when its owner did not answer in time (a 504): send "
        "it again with this id to learn its receipt",
    )


#: The longest message of an error answer (a message that quotes what it refuses is cut).
_MAX_PROBLEM = 2000


class Problem(Exception):
    """An answer other than 200, with its JSON body: ``message`` says it in one line, as
    every error body of the API does; ``detail`` is that line too, except for a 422, where
    it lists the problems as a request validation error does (``loc``, ``msg``, ``type``);
    ``type`` is ``kind``, a cause's own code (``problems.CAUSE_TYPES``), or else the
    status's (``problems.ERROR_TYPES``)."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        extra: dict[str, Any] | None = None,
        loc: tuple[str, ...] = ("body",),
        headers: dict[str, str] | None = None,
        kind: str | None = None,
    ) -> None:
        self.headers = headers
        if len(detail) > _MAX_PROBLEM:  # a last bound: a message quoting what it refuses
            detail = f"{detail[:_MAX_PROBLEM]}... ({len(detail):,} characters in all)"
        super().__init__(detail)
        self.status = status
        listed: Any = detail
        if status == 422:  # ``loc``: where the problem is, as a validation error says it
            listed = [{"loc": list(loc), "msg": detail, "type": "value_error"}]
        self.body: dict[str, Any] = {
            **error_body(status, detail, listed, kind=kind),
            **(extra or {}),
        }

    @classmethod
    def of(cls, exc: BaseException, detail: str | None = None, **kwargs: Any) -> "Problem":
        """The answer a library error causes: its status and type from
        ``problems.LIBRARY_ERRORS`` (one table, not each place that catches it); ``detail``,
        the error's text unless given. A damaged record's text is never sent: it may quote
        what the record holds, and the record may be another tenant's (it is read before its
        tenant is known); the answer names the record, and the log says what is wrong."""
        if isinstance(exc, DamagedData):
            _log.warning("damaged data in the store: %s", exc)
            detail = (
                f"the {exc.record} in the store is damaged and cannot be read (reading it "
                "again will not help: it needs repairing); the server's log says what is wrong"
            )
        return cls(
            library_status(exc),
            str(exc) if detail is None else detail,
            kind=library_type(exc),
            **kwargs,
        )


NOT_FOUND = "run not found"

#: How many event streams one user of a tenant may hold open at once (a console tab holds
#: one or two), and the server in all: each reads the store every 50 ms while it follows.
MAX_STREAMS_PER_USER = 32
MAX_STREAMS = 1000

#: The longest token read (64 KiB; a token is URL-safe base64, so characters are bytes): a
#: minted token is a few hundred bytes and each attenuation block adds about as much, so
#: only a token no server of ours signed gets near it. A longer one is refused before it is
#: parsed, with the 401 every other bad token gets, not 431: to a client it is a credential
#: the server will not take, and a 401 sends it down the one path it has for that (mint or
#: fetch another token). The transport admits a request head up to
#: ``serve.MAX_REQUEST_HEAD_BYTES`` (256 KiB), so a token just past this bound still
#: reaches the app and gets this JSON answer; only a head past that bound is refused by
#: uvicorn itself (a plain-text 400, or a reset connection).
MAX_TOKEN_BYTES = 64 * 1024


def not_found() -> Problem:
    """The one answer for a run the caller may not see: unknown, another tenant's, or
    outside the token's scope (never 403, which would confirm it exists)."""
    return Problem(404, NOT_FOUND)


# --------------------------------------------------------------------------- the API


@dataclass(slots=True, eq=False, repr=False)
class OperatorApi(Record):
    """What the endpoints do, apart from HTTP: who may see which run, and the commands."""

    control: "Control"
    auth: Auth | None

    def principal(self, token: str | None, authorization: str | None = None) -> Principal:
        """Who sends ``token``; ``authorization``, the request's header of that name when
        it held no Bearer token (said in the 401)."""
        if self.auth is None:
            return INSECURE_DEV
        if not token and authorization:
            raise Problem(401, _not_bearer(authorization))
        if not token:
            raise Problem(
                401,
                "no token: send 'Authorization: Bearer <token>' (tinyagents token mint)",
            )
        if len(token) > MAX_TOKEN_BYTES:
            raise Problem(
                401,
                f"the token is longer than the {MAX_TOKEN_BYTES} bytes this server reads, so "
                "it is none of this server's tokens (mint one with `tinyagents token mint`)",
            )
        try:
            p = self.auth.authenticate(token)
        except AuthError as exc:
            raise Problem.of(exc) from None
        if ticket_claims(p.token):
            raise Problem(
                401,
                "this is an event-stream ticket, no token: it opens GET /events?ticket= once; "
                "send 'Authorization: Bearer <token>'",
            )
        return p

    def ticket(self, p: Principal, run_id: str | None, root_run_id: str | None) -> str:
        """A ticket (``Auth.sse_ticket``) for ``p``'s event stream of ``run_id`` and
        ``root_run_id``, good for ``TICKET_TTL_S``."""
        if self.auth is None or p.token is None:
            raise Problem(
                400,
                "this server takes no tokens (serve --insecure-dev): open /events without a ticket",
            )
        expires_at = datetime.now(UTC) + timedelta(seconds=TICKET_TTL_S)
        return self.auth.sse_ticket(
            p.token.to_base64(), stream=(run_id, root_run_id), expires_at=expires_at
        )

    def ticket_principal(
        self, ticket: str, run_id: str | None, root_run_id: str | None
    ) -> Principal:
        """Who opens the stream of ``run_id`` and ``root_run_id`` with ``ticket``; a 401
        unless it is a ticket for that stream and still open. Whether it was used before is
        asked last (``use_ticket``), once the rest of the request is found good: a request
        refused for anything else leaves it unused. The stream then lasts as long as the
        ticket's token would."""
        if self.auth is None:
            return INSECURE_DEV
        if len(ticket) > MAX_TOKEN_BYTES:
            raise Problem(401, "the ticket is longer than any this server gives")
        try:
            p = self.auth.authenticate(ticket)
        except AuthError as exc:
            # (what it says of its token: a ticket is one, with a block; get another)
            raise Problem.of(
                exc, f"?ticket=: {exc}; or get a ticket from POST /events/tickets"
            ) from None
        claims = ticket_claims(p.token)
        if len(claims) != 1:
            raise Problem(
                401,
                "?ticket= is not an event-stream ticket: get one from POST /events/tickets "
                "(with 'Authorization: Bearer <token>')",
            )
        claim = claims[0]
        if claim.stream != stream_digest(run_id, root_run_id):
            raise Problem(
                401,
                "the ticket is for another stream (its ?run_id= and ?root_run_id= as asked "
                "for at POST /events/tickets): get one for this stream",
            )
        now = datetime.now(UTC)
        if claim.expires_at <= now:
            raise Problem(401, f"the ticket expired at {claim.expires_at.isoformat()}; get another")
        if claim.expires_at > now + timedelta(seconds=TICKET_TTL_S + 1):
            raise Problem(401, f"the ticket's lifetime is longer than {TICKET_TTL_S} s")
        return replace(p, ticket=claim)

    async def use_ticket(self, p: Principal) -> None:
        """Use up the ticket that opens ``p``'s stream, if one does: a 401 when it was used
        before, by this process or by any other sharing the store (``Control.claim_nonce``);
        a 503 when that cannot be recorded now."""
        if p.ticket is None:
            return
        try:
            first = await self.control.claim_nonce(p.ticket.nonce, expires_at=p.ticket.expires_at)
        except StoreError as exc:
            raise Problem.of(
                exc,
                f"the ticket's use cannot be recorded now ({exc}): retry",
                headers={"Retry-After": "5"},
            ) from None
        if not first:
            raise Problem(401, "the ticket is already used (each opens one stream): get another")

    # ------------------------------------------------------------------ visibility

    def _allows(
        self,
        p: Principal,
        op: Operation,
        run: RunFacts | None = None,
        command: str | None = None,
    ) -> bool:
        return self.auth is None or self.auth.allows(p, op, run, command=command)

    @staticmethod
    def _attenuated(p: Principal) -> bool:
        """Whether the token has blocks besides the one the server signed (their checks may
        depend on which run is asked about), and the ticket's (``Auth.sse_ticket``: it names
        no run, and the authorizer is told the fact it checks)."""
        if p.token is None:
            return False
        blocks: int = p.token.block_count()
        return blocks > (2 if p.ticket is not None else 1)

    async def _lineage(self, p: Principal, snap: dict[str, Any]) -> tuple[str, ...]:
        lineage = [snap["run_id"]]
        parent = snap.get("parent_run_id")
        while parent and len(lineage) < _MAX_LINEAGE:
            lineage.append(parent)
            up = await self.control.get_run(parent, tenant_id=p.tenant_scope)
            parent = up.get("parent_run_id") if up else None
        return tuple(lineage)

    async def run_facts(self, p: Principal, snap: dict[str, Any]) -> RunFacts:
        lineage = await self._lineage(p, snap) if self._attenuated(p) else (snap["run_id"],)
        return RunFacts(
            run_id=snap["run_id"], tenant_id=snap.get("tenant_id") or "", lineage=lineage
        )

    async def visible_run(
        self,
        p: Principal,
        run_id: str,
        op: Operation = "observe",
        command: str | None = None,
        *,
        wait: bool = False,
    ) -> dict[str, Any]:
        """The run's snapshot if the caller may do ``op`` on it; 404 when it may not see it,
        403 when it may see it but not control it, and when the token may observe no run at
        all (as the listing answers it: whether the run exists is not its to learn). For
        ``"control"`` (or with ``wait``) a run not listed yet is waited for
        (``Control.listed_run``)."""
        if (
            op == "observe"
            and self.auth is not None
            and not self._attenuated(p)
            and not self._allows(p, "observe")
        ):
            raise Problem(403, "this token does not grant agent:observe")
        if not _plausible_id(run_id):
            raise not_found()
        # a command may be for a run another process started a moment ago: it is looked for
        # again until it is listed (``Control.listed_run``); a read answers what is there
        lookup = self.control.listed_run if op == "control" or wait else self.control.get_run
        snap = await lookup(run_id, tenant_id=p.tenant_scope)
        if snap is None:
            raise not_found()
        if self.auth is None:
            return snap
        facts = await self.run_facts(p, snap)
        if self._allows(p, op, facts, command):
            return snap
        if op == "control" and self._allows(p, "observe", facts):
            raise Problem(
                403,
                f"this token does not allow {command or 'commands'} on run {run_id} "
                "(it needs agent:control, and no attenuation that forbids it)",
            )
        # Found (in this process's memory, at once) but not the token's to see: answered
        # after the lookups, and for a command the listing wait, that an unknown id takes,
        # or the time would tell a narrowed token which runs of its tenant exist.
        await lookup(run_id, tenant_id=_NO_TENANT)
        raise not_found()

    async def visible_root(self, p: Principal, run_id: str, where: str = "query") -> dict[str, Any]:
        """The snapshot of a ``?root_run_id=`` filter's run, as ``visible_run``; a run that is
        not the root of its tree is a 422 naming its root (the filter would keep nothing:
        runs and events are filed under their root). ``where``: the filter's place, for
        the 422's ``loc`` (``"body"``: a ticket's)."""
        snap = await self.visible_run(p, run_id)
        root = snap.get("root_run_id") or run_id
        if root != run_id:
            raise Problem(
                422,
                f"run {run_id} is not the root of its tree (its root is {root}): "
                f"?root_run_id= takes a root; /runs/{run_id}/tree lists the run and its subtree",
                loc=(where, "root_run_id"),
            )
        return snap

    async def stream_scope(
        self, p: Principal, run_id: str | None, root_run_id: str | None, where: str = "query"
    ) -> dict[str, Any] | None:
        """What an event stream's ``run_id`` and ``root_run_id`` filters name, checked as the
        stream and its ticket both take them: each a run the caller may see (404), the root a
        root (422), and the run in the root's tree (422: both filters together keep nothing,
        a stream silent for good). The run's snapshot, or None without ``run_id``."""
        snap = None
        if run_id is not None:
            snap = await self.visible_run(p, run_id)
        if root_run_id is not None:
            await self.visible_root(p, root_run_id, where)
            if snap is not None and (snap.get("root_run_id") or run_id) != root_run_id:
                raise Problem(
                    422,
                    f"run {run_id} is not in the tree of {root_run_id} (its root is "
                    f"{snap.get('root_run_id') or run_id}): pass ?run_id= or ?root_run_id=",
                    loc=(where, "root_run_id"),
                )
        return snap

    async def visible_runs(self, p: Principal, snaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The snapshots (of the caller's tenant already) the token lets it observe. A parent
        that is not among ``snaps`` (on another page) is looked up, once per call."""
        if self.auth is None:
            return snaps
        if not self._attenuated(p):
            if not self._allows(p, "observe"):
                raise Problem(403, "this token does not grant agent:observe")
            return snaps
        parents: dict[str, str | None] = {s["run_id"]: s.get("parent_run_id") for s in snaps}

        async def parent_of(run_id: str) -> str | None:
            if run_id not in parents:
                up = await self.control.get_run(run_id, tenant_id=p.tenant_scope)
                parents[run_id] = up.get("parent_run_id") if up else None
            return parents[run_id]

        kept = []
        for snap in snaps:
            lineage = [snap["run_id"]]
            parent = snap.get("parent_run_id")
            while parent and len(lineage) < _MAX_LINEAGE:
                lineage.append(parent)
                parent = await parent_of(parent)
            facts = RunFacts(
                run_id=snap["run_id"],
                tenant_id=snap.get("tenant_id") or "",
                lineage=tuple(lineage),
            )
            if self._allows(p, "observe", facts):
                kept.append(snap)
        return kept

    async def visible_page(
        self,
        p: Principal,
        *,
        statuses: tuple[str, ...],
        root_run_id: str | None,
        cursor: str | None,
        limit: int,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the runs ``p`` may observe and the cursor of the next (None: no more of
        them). For a narrowed token the store's pages are read on until ``limit`` + 1 such
        runs (or the end), and the cursor is the last one shown: a store page's own cursor
        names its last row, which may be a run the token may not see (its id and start time,
        where ``/runs/{id}`` answers 404), and pages of such runs were empty pages."""
        if self.auth is None or not self._attenuated(p):
            page = await self.control.page_runs(
                tenant_id=p.tenant_scope,
                statuses=statuses,
                root_run_id=root_run_id,
                cursor=cursor,
                limit=limit,
            )
            return await self.visible_runs(p, page.runs), page.next_cursor
        # every run a token narrowed to a run may see is in that run's tree: read that tree,
        # not the tenant's every run (the token still decides each run read)
        root_run_id = root_run_id or await self.narrowed_root(p)
        kept: list[dict[str, Any]] = []
        while len(kept) <= limit:
            page = await self.control.page_runs(
                tenant_id=p.tenant_scope,
                statuses=statuses,
                root_run_id=root_run_id,
                cursor=cursor,
                limit=max(limit + 1, RUNS_PAGE),
            )
            kept += await self.visible_runs(p, page.runs)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        if len(kept) <= limit:
            return kept, None
        return kept[:limit], encode_cursor(run_key(kept[limit - 1]))

    async def narrowed_root(self, p: Principal) -> str | None:
        """The root of the one tree every run ``p`` may observe is in, when its token is
        narrowed to a run (``attenuate(run_id=...)``) it may observe; else None (not known).
        A run a block names is trusted only once the token may see it: a block's source is
        read as printed, where an odd run id reads as two (``auth.narrowed_to``)."""
        for run_id in narrowed_to(p.token)[:_MAX_NARROWINGS]:
            try:
                snap = await self.visible_run(p, run_id)
            except Problem:
                continue
            return str(snap.get("root_run_id") or run_id)
        return None

    async def visible_tree(self, p: Principal, tree: dict[str, Any]) -> dict[str, Any]:
        """``tree`` (a run the caller may see, nested ``children``) without the runs below
        it that ``p`` may not observe, each with its subtree: a hand-written attenuation may
        admit a run and not those below it (``/runs/{id}`` of which is a 404)."""
        if self.auth is None or not self._attenuated(p):
            return tree
        nodes: list[dict[str, Any]] = []
        below = [tree]
        while below:
            node = below.pop()
            nodes.append(node)
            below.extend(node.get("children", ()))
        seen = {snap["run_id"] for snap in await self.visible_runs(p, nodes)}

        def pruned(node: dict[str, Any]) -> dict[str, Any]:
            kids = [pruned(c) for c in node.get("children", ()) if c["run_id"] in seen]
            return {**node, "children": kids}

        return pruned(tree)

    def still_observes(self, p: Principal) -> bool:
        """Whether ``p``'s token still lets it observe its tenant (not expired)."""
        return self._allows(p, "observe")

    async def observe_filter(self, p: Principal) -> Any:
        """For the event stream: None when every event of the tenant may be shown, else an
        async predicate on a run id (cached per run)."""
        if self.auth is None or not self._attenuated(p):
            if self.auth is not None and not self._allows(p, "observe"):
                raise Problem(403, "this token does not grant agent:observe")
            return None
        seen: dict[str, bool] = {}
        #: runs waited for in vain (their process died before listing them): not again
        unlisted: set[str] = set()
        fresh_until = time.monotonic() + _RECHECK_S

        async def visible(run_id: str | None) -> bool:
            nonlocal fresh_until
            if time.monotonic() > fresh_until:  # asked again: a token's lifetime may end
                seen.clear()
                fresh_until = time.monotonic() + _RECHECK_S
            if not run_id:
                return self._allows(p, "observe")
            if run_id not in seen:
                if len(seen) > 10_000:
                    seen.clear()
                if len(unlisted) > 10_000:
                    unlisted.clear()
                wait = run_id not in unlisted
                # the event log names runs of this tenant only, but another process logs a
                # new run's events (every 50 ms) before its snapshot (every 100 ms): one not
                # listed yet is waited for, not left out of the stream for good. One found
                # is answered at once (not after the wait ``visible_run`` gives a hidden run,
                # for a client that names it: this one came from the log), else each run
                # outside the token's subtree held the stream for the listing wait.
                lookup = self.control.listed_run if wait else self.control.get_run
                snap = await lookup(run_id, tenant_id=p.tenant_scope)
                if snap is None and wait:
                    unlisted.add(run_id)
                seen[run_id] = snap is not None and self._allows(
                    p, "observe", await self.run_facts(p, snap)
                )
            return seen[run_id]

        return visible

    # ------------------------------------------------------------------ commands

    async def command(
        self,
        p: Principal,
        run_id: str,
        kind: SteeringKind,
        payload: dict[str, Any],
        fields: dict[str, Any],
        *,
        task_id: str | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Submit ``kind`` to the run (or one of its tasks) as the caller; the HTTP status
        and the receipt."""
        snap = await self.visible_run(p, run_id, "control", kind.value)
        if task_id is not None and not _plausible_id(task_id):
            raise Problem(404, f"task not found: {shown_id(repr(task_id))}")
        if task_id is not None and snap.get("kind") == "agent":
            raise Problem(  # accepted, it could only fail later: nothing there to act on
                404,
                f"task not found: run {run_id} is an agent run, which has no graph tasks "
                f"(send the command to /runs/{run_id}/commands)",
            )
        try:
            # a run stored before the id rule refused its id (a bidi or zero-width character)
            # reads, but takes no command: its target is refused, a 422 saying why (was a 500)
            target = command_target(snap, task_id)
        except InvalidCommandError as exc:
            raise Problem.of(exc) from None
        if target is None:
            raise Problem(
                404,
                f"task not found: run {run_id} is the entry of task {snap['task_id']} of graph "
                f"run {snap['parent_run_id']} (send its commands to /runs/{run_id}/commands)",
            )
        try:
            cmd = SteeringCommand(
                target=target,
                actor=p.actor(snap.get("tenant_id") or "default"),
                kind=kind,
                payload=payload,
                **fields,
            )
        except InvalidCommandError as exc:
            raise Problem.of(exc) from None
        try:
            receipt = await self.control.submit(cmd)
        except (StoreError, RuntimeClosed, ControlPlaneUnavailable, InvalidCommandError) as exc:
            # a 504 (the error says it may still be applied, and how to learn its outcome), a
            # 503 (not taken), a 422 (too large to send to the worker that owns the run)
            status = library_status(exc)
            raise Problem.of(
                exc,
                f"the runtime cannot take commands now: {exc}" if status == 503 else None,
                extra={"correlation_id": cmd.correlation_id} if status == 504 else None,
            ) from None
        body = receipt.model_dump(mode="json")
        status = _receipt_status(receipt)
        if status == 404:
            raise Problem(404, receipt.reason or NOT_FOUND, extra={"receipt": body})
        return status, body


def _receipt_status(receipt: SteeringReceipt) -> int:
    """200 for every receipt (its ``status`` says accepted, rejected, deferred or duplicate),
    but 404 when it was rejected because the target does not exist."""
    if receipt.status is ReceiptStatus.REJECTED and (receipt.reason or "").startswith("not found"):
        return 404
    return 200


def _plausible_id(value: str) -> bool:
    """Whether ``value`` could be an id at all: it keeps the id rule
    (``tinyagents.protocol.ids``: bounded, no control character) and is encodable (a lone
    surrogate from a percent-decoded path, or a NUL, would make the store's driver raise)."""
    if not value or id_problem(value, stored=True) is not None:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _validation_message(errors: Iterable[dict[str, Any]], content_type: str | None) -> str:
    errors = list(errors)
    if not _is_json_type(content_type) and any(e.get("loc") == ["body"] for e in errors):
        # The body was not read as JSON at all: say which header to send (``curl -d`` sends
        # a form type), not only that the body is not an object.
        sent = f"this request's is {content_type!r}" if content_type else "this request has none"
        return f"body: send it as JSON, with Content-Type: application/json ({sent})"
    return "; ".join(
        f"{'.'.join(str(x) for x in err.get('loc', ())) or 'request'}: {err.get('msg')}"
        for err in errors
    )


def _not_json(content_type: str | None) -> Problem:
    """The 415 of a body whose ``Content-Type`` names no JSON type (or that has none: a body
    is not guessed at), with ``Accept`` naming the type taken (RFC 9110, 15.5.16)."""
    sent = f"this request's is {content_type[:80]!r}" if content_type else "this request has none"
    return Problem(
        415,
        f"body: send it as JSON, with Content-Type: application/json ({sent})",
        headers={"Accept": "application/json"},
    )


def _is_json_type(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of this Content-Type as JSON (application/json or
    application/...+json, whatever its parameters)."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


#: FastAPI's answer when reading the JSON of a body raised something other than a syntax
#: error (a 400 with its position): the cause is looked up to say what it was.
_UNREADABLE_BODY = "There was an error parsing the body"


class _KeyGivenTwice(ValueError):
    """A JSON object of a body names one key twice."""


class _OtherCharset(ValueError):
    """A body that is not UTF-8, sent with a Content-Type that declares another charset."""

    def __init__(self, charset: str) -> None:
        super().__init__(
            f"it is not UTF-8 text, and its Content-Type declares charset="
            f"{shown_name(charset[:40])}: this server reads JSON bodies as UTF-8 only "
            "(RFC 8259 has JSON exchanged as UTF-8 and defines no charset for it): send the "
            "body as UTF-8"
        )


class _EncodedBody(ValueError):
    """A body sent with a ``Content-Encoding`` (gzip...): the server reads bodies as sent."""

    def __init__(self, coding: str) -> None:
        super().__init__(coding)
        self.problem = Problem(
            415,
            f"the body is sent with Content-Encoding {coding[:80]!r}: this server reads "
            "bodies as sent; send it uncompressed (no Content-Encoding)",
            headers={"Accept-Encoding": "identity"},
        )


#: The key of a request's scope holding its caller's ``Principal``, once the token was read.
_PRINCIPAL = "tinyagents.principal"

#: The API's query parameters of one value: each given twice is a 422 (``status``, a list,
#: may repeat). Web frameworks, proxies and logs differ on which of two values they read.
_ONE_VALUE = frozenset(
    {
        "limit",
        "cursor",
        "before",
        "root_run_id",
        "run_id",
        "last_event_id",
        "follow",
        "access_token",
        "ticket",
    }
)


def _given_once_header(request: Any, name: str) -> None:
    """A 422 for the header ``name`` given more than once: it was read as the first, where a
    proxy or a log may read the other (``Last-Event-ID``, ``Content-Type``: JSON then text was
    taken as JSON, text then JSON refused)."""
    if (count := len(request.headers.getlist(name))) > 1:
        raise Problem(
            422, f"header {name} is given {count} times: give it once", loc=("header", name.lower())
        )


def _given_once(query: Any) -> None:
    """A 422 for a parameter of ``_ONE_VALUE`` given more than once in ``query`` (the
    request's ``QueryParams``): ``?limit=1&limit=1000`` was read as 1000 here, and may be
    read as 1 by whatever checked or logged the request on its way."""
    names = [name for name, _ in query.multi_items() if name in _ONE_VALUE]
    for name in dict.fromkeys(names):
        if (count := names.count(name)) > 1:
            raise Problem(
                422,
                f"query ?{name}= is given {count} times: give it once",
                loc=("query", name),
            )


def _check_whole_number(query: Any, name: str) -> None:
    """A 422 for ``?name=`` in ``query`` (the request's ``QueryParams``) that is not ASCII
    digits: lax integer parsing read ``?limit=5_0`` as 50 and ``+5``, `` 5`` or ``5.0`` as 5,
    where a proxy or a log in front may read another number, or none (as for event ids)."""
    text = query.get(name)
    if text is not None and not (text.isascii() and text.isdigit()):
        raise Problem(
            422,
            f"query ?{name}=: {text[:40]!r} is no whole number (digits only)",
            loc=("query", name),
        )


def _check_event_id(where: str, name: str, text: str | None, what: str) -> None:
    """A 422 for ``text`` (a parameter's value as sent) that is not an event-log id: as
    ``int()`` or a lax integer field reads it, "3_0" was 30 and "+3", " 3" or "3.0" was 3,
    where an id is digits only; ``what``: where the client got its ids from."""
    if text is not None and not (
        text.isascii()
        and text.isdigit()
        and len(text) <= len(str(_MAX_EVENT_ID))  # (int() refuses 4,300 digits)
        and int(text) <= _MAX_EVENT_ID
    ):
        raise Problem(
            422,
            f"{where} {name}: {text[:40]!r} is no event id ({what}: digits only, at most "
            f"{_MAX_EVENT_ID})",
            loc=(where, name),
        )


def _check_coding(coding: str | None) -> None:
    """``_EncodedBody`` unless ``coding`` (a Content-Encoding header) leaves a body as is."""
    if coding is not None and any(
        part.strip().lower() not in ("", "identity") for part in coding.split(",")
    ):
        raise _EncodedBody(coding)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of a body as a dict, refusing a key given twice: JSON readers differ on
    which value they keep (``json`` the last), so ``{"kind": "pause", "kind": "cancel"}``
    would be a cancel here and a pause to a proxy or a log that keeps the first."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyGivenTwice(f"the key {key!r} is given twice in one object; give it once")
            seen.add(key)
    return obj


def _unreadable_body(cause: BaseException | None) -> str:
    """Why the JSON reader gave up on a body, for its 400."""
    if isinstance(cause, (_KeyGivenTwice, _OtherCharset)):
        why = str(cause)
    elif isinstance(cause, RecursionError):
        why = "it is nested too deep for the JSON reader"
    elif isinstance(cause, UnicodeDecodeError):
        why = "it is not UTF-8 text"
    elif isinstance(cause, ValueError) and "digits" in str(cause):
        why = "an integer in it has more digits than the JSON reader takes"
    else:
        why = f"the JSON reader raised {type(cause).__name__}"
    return f"the body could not be read as JSON: {why}"


# --------------------------------------------------------------------------- the app


#: The largest request body read (4 MiB): far above any command (the payload policy refuses
#: more than 16 KB of JSON, with a receipt that the audit trail keeps), far below what could
#: hurt the server. A larger body is a 413 before it is read whole.
MAX_BODY_BYTES = 4 * 2**20


class BodyTooLarge(ValueError):
    """A request body read past ``BodyLimit``'s limit (its endpoint answers 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body too large: the limit is {limit} bytes")


class BodyLimit:
    """ASGI middleware: a request body past ``limit`` bytes is answered 413 (JSON) without
    being read whole — at once when its ``Content-Length`` says so (a client that sent
    ``Expect: 100-continue`` gets the 413 instead of the go-ahead), else (a chunked body) as
    soon as the bytes the app reads pass the limit; a body within it is handed on unchanged.

    A chunked body is counted as the app reads it, not read ahead: the server sends
    ``100 Continue`` at the app's first read, and an endpoint reads its body only once the
    token passed (``_utf8_json_route``), so a chunked body of a caller without one is
    answered 401 before it is asked for."""

    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers", ())).get(b"content-length")
        if length is not None:
            if length.isdigit() and int(length) > self.limit:
                await self._refuse(send)
                return
            await self.app(scope, receive, send)  # the server holds the body to its length
            return
        # No length given (chunked): counted as it is read; past the limit, no more is read.
        size = 0
        started = False

        async def counted() -> Any:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > self.limit:
                    raise BodyTooLarge(self.limit)  # (FastAPI: the 400 ``_http`` makes a 413)
            return message

        async def sending(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        await send_error(send, 413, f"request body too large: the limit is {self.limit} bytes")


class EncodedSlash:
    """ASGI middleware: a ``%2F`` in a segment of an API path stays in that segment.

    The server hands the router the path percent-decoded, so ``/runs/a%2Fb`` was
    ``/runs/a/b``, a path of no route, and its answer FastAPI's bare 404 rather than the one
    every other id that names no run gets (the token asked first, then the API's not-found
    body). Here the segment is the id as sent (``a%2Fb``, no run's id: ids hold no ``/``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and b"%2f" in raw.lower() and scope["path"].startswith(f"{BASE}/"):
            kept = re.sub(rb"%2[fF]", b"%252F", raw).decode("latin-1")
            scope = {**scope, "path": unquote(kept)}
        await self.app(scope, receive, send)


#: A request target in absolute form: its scheme and authority, then the path.
_ABSOLUTE_FORM = re.compile(rb"(?i)https?://([^/?#]*)(.*)", re.DOTALL)


class AbsoluteForm:
    """ASGI middleware: a request target in absolute form (``GET http://host/runs HTTP/1.1``,
    which RFC 9112 section 3.2.2 has a server accept) is routed by its path.

    uvicorn's h11 protocol (``serve.uvicorn_config`` chooses it) hands the app the whole URL
    as the path, so every such request was a 404. The target's host stands for the ``Host``
    header, as the RFC says (``LoopbackOnly`` judges that one)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = scope.get("raw_path") if scope["type"] in ("http", "websocket") else None
        found = _ABSOLUTE_FORM.fullmatch(raw) if raw else None
        if found is not None:
            authority, raw_path = found.group(1), found.group(2) or b"/"
            headers = [(k, v) for k, v in scope.get("headers", ()) if k != b"host"]
            host = authority.rpartition(b"@")[2]  # (no userinfo in an http URI: RFC 9110)
            scope = {
                **scope,
                "path": unquote(raw_path.decode("latin-1")),
                "raw_path": raw_path,
                "headers": [(b"host", host), *headers] if host else scope.get("headers", []),
            }
        await self.app(scope, receive, send)


class Asterisk:
    """ASGI middleware: ``OPTIONS * HTTP/1.1`` asks about the server as a whole (RFC 9110
    section 9.3.7: a proxy or a load balancer pings with it), and is answered 200 with no
    body; another method with the ``*`` target is a 400, as RFC 9112 section 3.2.4 allows
    the asterisk form to OPTIONS only. Both were a 404, as if ``*`` were a missing path."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") != "*":
            await self.app(scope, receive, send)
            return
        if scope["method"] != "OPTIONS":
            detail = "the target '*' is for OPTIONS only (RFC 9112 section 3.2.4)"
            await send_error(send, 400, detail)
            return
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]}
        )
        await send({"type": "http.response.body", "body": b""})


def create_app(
    control: "Control",
    *,
    auth: Auth | None,
    console: bool = True,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_streams_per_user: int = MAX_STREAMS_PER_USER,
    max_streams: int = MAX_STREAMS,
) -> "FastAPI":
    """The operator API (and, with ``console``, the web console at ``/``) over ``control``.

    ``auth=None`` serves everyone as an admin of every tenant: for ``serve --insecure-dev``
    on a loopback address only, and then a request whose ``Host`` or ``Origin`` is not a
    loopback address is a 403 (``LoopbackOnly``: DNS rebinding, cross-site forms). A request
    body past ``max_body_bytes`` is a 413. An event stream past ``max_streams_per_user`` open
    for one user of a tenant, or ``max_streams`` for the server, is a 429 (each reads the
    store every 50 ms while it follows the log).
    """
    whole_number("max_streams_per_user", max_streams_per_user)
    whole_number("max_streams", max_streams)
    from fastapi import APIRouter, Body, Depends, FastAPI, Header, Query, Request, Response
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, StreamingResponse
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.routing import Match, Mount, Route

    class Json(JSONResponse):
        """The API's JSON (``api_json``): starlette's, but a lone surrogate (an event's text
        from a model or a tool, in a trace or a command's history) is JSON's escape, as in
        ``Event.to_json``: UTF-8 had no bytes for it, and the answer was a 500."""

        def render(self, content: Any) -> bytes:
            return api_json(content)

    api = OperatorApi(control, auth)
    #: the event streams open now, by (tenant, user)
    streams: dict[tuple[str, str], int] = {}
    app = FastAPI(
        title="tinyagents operator API",
        version=__version__,
        description="Watch and steer agent runs while they run. Authenticate with a "
        "Biscuit token: `Authorization: Bearer <token>` (tinyagents token mint).",
        openapi_url=f"{BASE}/openapi.json",
        docs_url=None,  # FastAPI's page loads Swagger UI from a CDN: ours is self-contained
        redoc_url=None,
        # no 307 to an absolute http:// URL (wrong behind a TLS proxy): a 404 naming the path
        redirect_slashes=False,
        default_response_class=Json,
    )
    app.state.operator = api
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(EncodedSlash)
    app.add_middleware(Asterisk)
    if auth is None:  # no tokens: this machine's own clients only, not a page of another site
        app.add_middleware(LoopbackOnly)
    # every answer (the API's JSON and event stream, its errors, the 413 and 403 above) is
    # read by a browser only as the type it says: none is sniffed as HTML or script
    app.add_middleware(_WithHeaders, headers=_EVERY_ANSWER)
    app.add_middleware(AbsoluteForm)  # the first: the others see the target's path and host
    bearer = HTTPBearer(auto_error=False, description="a token from `tinyagents token mint`")

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else exc.headers
        return JSONResponse(exc.body, status_code=exc.status, headers=headers)

    @app.exception_handler(Exception)
    async def _crashed(request: Request, exc: Exception) -> JSONResponse:
        # A bug: Starlette's ServerErrorMiddleware, outside every middleware added here, calls
        # this, sends its answer, then raises ``exc`` again for the server to log with its
        # traceback. Its plain-text 500 had none of ``_EVERY_ANSWER``; the error itself is not
        # told to the client (it may quote a secret or a path).
        detail = "internal server error: the server's log says what failed"
        return JSONResponse(error_body(500, detail), status_code=500, headers=_EVERY_ANSWER)

    @app.exception_handler(StoreError)
    async def _store_failed(request: Request, exc: StoreError) -> JSONResponse:
        # a read the store could not answer (a command's failure is answered by ``command``,
        # which says it was not taken): a 503 to retry, as the docs promise, not a 500; a
        # record it holds damaged is a 500 ``damaged_data`` (``Problem.of`` logs it), as a
        # retry reads the same bytes
        if not isinstance(exc, DamagedData):
            _log.warning("the store failed %s %s: %s", request.method, request.url.path, exc)
        problem = Problem.of(exc, f"the store cannot be read now: {exc}")
        return await _problem(request, problem)

    async def unauthenticated(request: Request) -> JSONResponse | None:
        """The 401 of a request without a valid token, or None. A body is read (as JSON)
        before the endpoint's dependencies run, so a body the reader refuses is answered
        here only after the token was checked: a caller without one learns nothing else."""
        credentials = await bearer(request)
        try:
            await caller(request, credentials)
        except Problem as exc:
            return await _problem(request, exc)
        return None

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        syntax = next((e for e in exc.errors() if e.get("type") == "json_invalid"), None)
        if syntax is not None:
            refused = await unauthenticated(request)
            if refused is not None:
                return refused
            where = syntax.get("loc", ("body", "?"))[-1]
            why = (syntax.get("ctx") or {}).get("error", "")
            message = f"the body is not valid JSON (at character {where}): {why}"
            return JSONResponse(error_body(400, message), status_code=400)
        if isinstance(exc.body, bytes) and exc.body:
            # a body FastAPI did not read as JSON: its Content-Type names no JSON (or it has
            # none), so it is the body's media type that is refused, not what it says
            return await _problem(request, _not_json(request.headers.get("content-type")))
        found = exc.errors()
        errors = [  # at most MAX_PROBLEMS, each name cut short: never the request echoed back
            {
                "loc": [quoted_name(part) for part in e.get("loc", ())],
                "msg": str(e.get("msg")),
                "type": e.get("type"),
            }
            for e in found[:MAX_PROBLEMS]
        ]
        message = _validation_message(errors, request.headers.get("content-type"))
        if len(found) > MAX_PROBLEMS:
            message += f"; and {len(found) - MAX_PROBLEMS:,} more"
        return JSONResponse(error_body(422, message, errors), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400 and exc.detail == _UNREADABLE_BODY:
            refused = await unauthenticated(request)
            if refused is not None:
                return refused
            if isinstance(exc.__cause__, _EncodedBody):
                return await _problem(request, exc.__cause__.problem)
            if isinstance(exc.__cause__, BodyTooLarge):
                return await _problem(request, Problem(413, str(exc.__cause__)))
            detail = _unreadable_body(exc.__cause__)
            return JSONResponse(error_body(400, detail), status_code=400)
        response = await http_exception_handler(request, exc)  # 404, 405: FastAPI's own
        if isinstance(exc.detail, str) and isinstance(response, JSONResponse):
            # with the one-line message every error body of the API has
            detail = exc.detail
            right = _without_slash(request) if exc.status_code == 404 else None
            if right is not None:
                detail = f"no such path: {request.url.path}; use {right} (no trailing slash)"
            elif exc.status_code == 404 and detail == "Not Found":
                # a path no route has (the API's own address, /api/agents, that serve prints,
                # among them): where the endpoints are, not a bare "Not Found" (the path sent
                # is not echoed back)
                detail = NO_SUCH_PATH
            headers = dict(exc.headers or {})
            if exc.status_code == 405:
                # what to send instead, as the Allow header says it (the path not echoed back)
                allowed = ", ".join(_allowed(request))
                headers["Allow"] = allowed
                if detail == "Method Not Allowed":  # a made-up method cut as an id is
                    method = shown_id(request.method)
                    detail = f"{method} is not allowed here: this path takes {allowed}"
            body = error_body(exc.status_code, detail)
            return JSONResponse(body, status_code=exc.status_code, headers=headers)
        return response

    def _allowed(request: Request) -> list[str]:
        """Every method a route of the request's path takes: a GET's HEAD is a route of its
        own (``_answer_head``), and Starlette's ``Allow`` names the first route's alone."""
        methods: set[str] = set()
        for route in (*router.routes, *app.router.routes):  # the API's, the probes', docs
            if isinstance(route, Route) and route.matches(request.scope)[0] is not Match.NONE:
                methods |= route.methods or set()
            elif isinstance(route, Mount) and route.matches(request.scope)[0] is Match.FULL:
                methods |= {"GET", "HEAD"}  # the console's files (StaticFiles takes these)
        return sorted(methods)

    def _without_slash(request: Request) -> str | None:
        """The path a request with a trailing slash meant, when that path is a route."""
        sent = request.url.path
        if sent == "/" or not sent.endswith("/"):
            return None
        scope = {**request.scope, "path": request.scope["path"].rstrip("/")}
        for route in (*router.routes, *app.router.routes):  # the API's, the probes', docs
            if isinstance(route, Route) and route.matches(scope)[0] is not Match.NONE:
                return sent.rstrip("/")
        return None

    #: the query parameters each route takes, by route (as many as there are routes)
    route_queries: dict[int, tuple[str, ...]] = {}

    def known_query(request: Request) -> None:
        """A 422 for a query parameter the route does not take: ``?limt=5`` was ignored, so
        the answer was the default page, and a typo'd filter (``?stauts=running``) answered
        every run, which a script then acted on. Asked after the token (a caller without one
        learns nothing of the route's parameters)."""
        route = request.scope.get("route")
        if route is None or not hasattr(route, "dependant"):
            return
        takes = route_queries.get(id(route))
        if takes is None:  # the route's and its dependencies' (the token's ``ticket``...)
            names: dict[str, None] = {}
            dependants = [route.dependant]
            while dependants:
                dependant = dependants.pop()
                names.update(dict.fromkeys(q.alias for q in dependant.query_params))
                dependants.extend(dependant.dependencies)
            takes = route_queries[id(route)] = tuple(names)
        for name in request.query_params:
            if name not in takes:
                shown = quoted_name(name)
                raise Problem(
                    422,
                    f"query ?{shown}= is unknown here ({shown!r} is no parameter of this "
                    "endpoint): " + (f"it takes {', '.join(takes)}" if takes else "it takes none"),
                    loc=("query", str(shown)),
                )

    def one_authorization(request: Request) -> None:
        """A 401 for a request with two Authorization headers: the first was read, silently,
        while a proxy or a log in front may have judged the request by the other token."""
        count = len(request.headers.getlist("authorization"))
        if count > 1 and api.auth is not None:
            raise Problem(
                401,
                f"the Authorization header is given {count} times: send one "
                "('Authorization: Bearer <token>')",
            )

    async def caller(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
    ) -> Principal:
        known = request.scope.get(_PRINCIPAL)
        if known is not None:  # asked before the body was read (``token_first``)
            return known  # type: ignore[no-any-return]
        one_authorization(request)
        if credentials is None and "access_token" in request.query_params:
            raise Problem(
                401,
                "a token in the query (?access_token=) is taken by /events only, where an "
                "EventSource cannot send headers (a URL ends up in logs): send "
                "'Authorization: Bearer <token>'",
            )
        if credentials is None:
            p = api.principal(None, request.headers.get("authorization"))
        else:
            p = api.principal(credentials.credentials)
        _given_once(request.query_params)  # after the token: a caller without one learns less
        known_query(request)
        _given_once_header(request, "Content-Type")
        request.scope[_PRINCIPAL] = p
        return p

    async def token_first(request: Request) -> None:
        """The caller's checks (a 401 first), before a body is read (``_utf8_json_route``)."""
        await caller(request, await bearer(request))

    async def stream_caller(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
        access_token: str | None = Query(
            default=None,
            description="deprecated: the token itself, which lands in access logs; use ?ticket=",
        ),
        ticket: str | None = Query(
            default=None,
            description="a ticket from POST /events/tickets for this stream (an EventSource "
            "cannot send an Authorization header): opens it once, within 60 s",
        ),
    ) -> Principal:
        one_authorization(request)
        if ticket is not None:
            _given_once(request.query_params)
            if credentials is not None or access_token is not None:
                raise Problem(
                    401,
                    "a ticket and a token: ?ticket= stands for the token; send one of them",
                )
            query = request.query_params
            p = api.ticket_principal(ticket, query.get("run_id"), query.get("root_run_id"))
            known_query(request)
            _given_once_header(request, "Last-Event-ID")
            return p
        if credentials is not None and access_token and access_token != credentials.credentials:
            if api.auth is not None:  # which one a proxy or a log judged it by is not known
                raise Problem(
                    401,
                    "two tokens: the Authorization header and ?access_token= name different "
                    "tokens; send one of them",
                )
        token = credentials.credentials if credentials is not None else access_token
        p = api.principal(token, request.headers.get("authorization"))
        _given_once(request.query_params)
        known_query(request)
        _given_once_header(request, "Last-Event-ID")
        return p

    Caller = Depends(caller)
    router = APIRouter(prefix=BASE, route_class=_utf8_json_route(token_first))

    def error(description: str) -> dict[str, Any]:
        return {"description": description, "model": ErrorBody}

    run_responses: dict[int | str, dict[str, Any]] = {
        401: error("no token, or not one of this server's"),
        403: error("the token may not observe runs (no agent:observe right)"),
        404: error("no such run, or not one this token may see"),
        422: error("a parameter is invalid"),
        500: error(
            "damaged_data: the run's record in the store is damaged (it needs repairing; a "
            "retry will not help), or internal_error: a bug"
        ),
        503: error("the store cannot be read now"),
    }
    unreadable = "the body is not UTF-8 JSON"
    command_responses: dict[int | str, dict[str, Any]] = {
        **run_responses,
        400: error(unreadable),
        403: error("the token may see the run but not send it this command"),
        413: error("the body is larger than the server takes"),
        415: error(
            "unsupported_media_type: the body is compressed (Content-Encoding), or its "
            "Content-Type names no JSON (or it has none): send it as application/json"
        ),
        422: error("the body is invalid"),
        503: error("the runtime or its store cannot take commands now"),
        504: error("the run's owner did not answer in time (may still apply it)"),
    }

    def paged(
        page: str,
        link: str,
        invalid: str,
        model: object,
        headers: dict[str, dict[str, Any]] | None = None,
    ) -> dict[int | str, dict[str, Any]]:
        """The responses of a read answered a page at a time (``model``, a list), the next
        page's URL in a ``Link: <...>; rel="next"`` header (``link_next``); ``headers``, the
        other headers its answer may have."""
        return {
            **run_responses,
            200: {
                "description": page,
                "model": model,
                "headers": {
                    "Link": {
                        "description": f'{link}: <URL>; rel="next"',
                        "schema": {"type": "string"},
                    },
                    **(headers or {}),
                },
            },
            422: error(invalid),
        }

    def link_next(request: Request, response: Response, **query: Any) -> None:
        """Point ``Link: <...>; rel="next"`` at this URL with ``query`` (never a token: a
        link is logged and passed around). The path is percent-encoded, as the query is: a
        run id is any printable text, and a header is ASCII (an emoji in the decoded path was
        a 500; a space or a Latin-1 letter, a link no client could follow). It is encoded
        from the decoded path as routed: ``request.url.path`` holds some characters (``?``,
        ``#``) encoded and others not."""
        url = request.url.remove_query_params("access_token").include_query_params(**query)
        path = quote(request.scope["path"], safe="/")
        response.headers["Link"] = f'<{path}?{url.query}>; rel="next"'

    @router.get(
        "/runs",
        responses=paged(
            "a page of runs, newest first; the next page's URL is in the "
            '`Link: <...>; rel="next"` header (none on the last page). A run whose stored '
            "snapshot cannot be read is listed with its row's ids, status and creation time "
            'and an `error` ({"type": "damaged_snapshot", "message": ...}); the '
            "`X-Damaged-Runs` header counts them",
            "the next page",
            "a limit out of range, or a cursor this server never gave",
            list[RunSnapshot],
            {
                "X-Damaged-Runs": {
                    "description": "how many runs of the page are listed from a damaged row "
                    "(with their `error`); absent when none is",
                    "schema": {"type": "integer", "minimum": 1},
                }
            },
        ),
        summary="List runs, a page at a time",
    )
    async def list_runs(
        request: Request,
        response: Response,
        status: list[RunStatus] | None = Query(
            default=None, description="only runs in this status (repeat: in any of them)"
        ),
        root_run_id: ApiId | None = Query(default=None),
        limit: int = Query(default=RUNS_PAGE, ge=1, le=MAX_RUNS_PAGE),
        cursor: Cursor | None = Query(
            default=None,
            max_length=MAX_CURSOR,
            description='where the page starts: from the previous page\'s rel="next" link',
        ),
        p: Principal = Caller,
    ) -> list[dict[str, Any]]:
        _check_whole_number(request.query_params, "limit")
        if root_run_id is not None:
            await api.visible_root(p, root_run_id)
        runs, next_cursor = await api.visible_page(
            p,
            statuses=tuple(dict.fromkeys(s.value for s in status or ())),
            root_run_id=root_run_id,
            cursor=cursor,
            limit=limit,
        )
        if next_cursor is not None:
            link_next(request, response, limit=limit, cursor=next_cursor)
        damaged = sum(1 for run in runs if isinstance(run.get("error"), dict))
        if damaged:  # listed with their ``error`` (the store's log names each row to repair)
            response.headers["X-Damaged-Runs"] = str(damaged)
        return runs

    @router.get(
        "/runs/{run_id}",
        responses={**run_responses, 200: {"description": "the run", "model": RunSnapshot}},
        summary="One run's snapshot",
    )
    async def get_run(run_id: str, p: Principal = Caller) -> dict[str, Any]:
        return await api.visible_run(p, run_id)

    @router.get(
        "/runs/{run_id}/tree",
        responses={
            **run_responses,
            200: {
                "description": "the run, its subtree nested under `children`; `truncated` "
                "(on the run asked for) is true when the tree holds more than ?limit= runs "
                "and some were left out (the oldest: `/runs?root_run_id=` lists them all)",
                "model": RunTreeNode,
            },
        },
        summary="A run and its subtree",
    )
    async def get_tree(
        request: Request,
        run_id: str,
        limit: int = Query(
            default=TREE_LIMIT,
            ge=1,
            le=MAX_TREE_LIMIT,
            description="the most runs the answer holds, the one asked for included",
        ),
        p: Principal = Caller,
    ) -> dict[str, Any]:
        _check_whole_number(request.query_params, "limit")
        await api.visible_run(p, run_id)
        tree = await control.tree(run_id, tenant_id=p.tenant_scope, limit=limit)
        if tree is None:
            raise not_found()
        return await api.visible_tree(p, tree)

    @router.get(
        "/runs/{run_id}/trace",
        responses=paged(
            "the run's latest frames (before ?before=), oldest first; the page of older ones "
            'is in the `Link: <...>; rel="next"` header (none when there are no older frames)',
            "the older page",
            "a limit out of range, or a before that is no event id",
            list[TraceFrame],
        ),
        summary="Progress frames, the latest first page",
    )
    async def get_trace(
        request: Request,
        response: Response,
        run_id: str,
        limit: int = Query(default=TRACE_PAGE, ge=1, le=MAX_TRACE_PAGE),
        before: int | None = Query(
            default=None,
            ge=1,
            le=_MAX_EVENT_ID,
            description="only frames with an event-log id below this one: the first frame's "
            'id of the page after, as the rel="next" link gives it',
        ),
        p: Principal = Caller,
    ) -> list[dict[str, Any]]:
        _check_whole_number(request.query_params, "limit")
        _check_event_id("query", "before", request.query_params.get("before"), "a frame's id")
        await api.visible_run(p, run_id)
        # one more than asked for: whether an older page follows
        frames = await control.trace(
            run_id, tenant_id=p.tenant_scope, limit=limit + 1, before=before
        )
        if frames is None:
            raise not_found()
        if len(frames) > limit:
            frames = frames[1:]
            link_next(request, response, limit=limit, before=frames[0]["id"])
        return frames

    @router.get(
        "/runs/{run_id}/steering",
        responses=paged(
            "the run's latest commands (whose steps are before ?before=), in the order first "
            'seen; the page of older ones is in the `Link: <...>; rel="next"` header (none '
            "when there are no older commands)",
            "the older page",
            "a limit out of range, or a before that is no event id",
            list[CommandHistoryEntry],
        ),
        summary="Command history, the latest first page",
    )
    async def get_steering(
        request: Request,
        response: Response,
        run_id: str,
        limit: int = Query(default=STEERING_PAGE, ge=1, le=MAX_STEERING_PAGE),
        before: int | None = Query(
            default=None,
            ge=1,
            le=_MAX_EVENT_ID,
            description="only the steps with an event-log id below this one: the first "
            'step\'s id of the page after, as the rel="next" link gives it',
        ),
        p: Principal = Caller,
    ) -> list[dict[str, Any]]:
        _check_whole_number(request.query_params, "limit")
        _check_event_id("query", "before", request.query_params.get("before"), "a step's id")
        await api.visible_run(p, run_id)
        page = await control.steering(run_id, tenant_id=p.tenant_scope, limit=limit, before=before)
        if page is None:
            raise not_found()
        if page.before is not None:
            link_next(request, response, limit=limit, before=page.before)
        return page.commands

    def answer(result: tuple[int, dict[str, Any]]) -> JSONResponse:
        status, receipt = result
        return JSONResponse(receipt, status_code=status)

    def simple(kind: SteeringKind, summary: str, abort: bool = False) -> None:
        async def endpoint(
            run_id: str,
            body: ReasonBody | None = Body(default=None),
            p: Principal = Caller,
        ) -> JSONResponse:
            body = body or ReasonBody()
            payload: dict[str, Any] = {}
            if body.reason is not None:
                payload["reason"] = body.reason
            return answer(await api.command(p, run_id, kind, payload, body.command_fields()))

        router.add_api_route(
            f"/runs/{{run_id}}/{'abort' if abort else kind.value}",
            endpoint,
            methods=["POST"],
            summary=summary,
            responses=command_responses,
            response_model=SteeringReceipt,
            name=f"{'abort' if abort else kind.value}_run",
        )

    simple(SteeringKind.PAUSE, "Pause a run at its next safe boundary")
    simple(SteeringKind.RESUME, "Resume a paused run")
    simple(SteeringKind.CANCEL, "Stop a run for good (a cancel command)", abort=True)

    @router.post(
        "/runs/{run_id}/steer",
        responses={
            **command_responses,
            422: error("the body is invalid, or its message shows nothing (whitespace...)"),
        },
        response_model=SteeringReceipt,
        summary="Send the run's model an instruction",
    )
    async def steer(run_id: str, body: SteerBody, p: Principal = Caller) -> JSONResponse:
        if shows_nothing(body.message):  # (the command's own check would name its ``text``)
            raise Problem(  # well-formed JSON, an invalid request: a 422, as a missing message
                422,
                "message is blank (only whitespace, or characters that show nothing: "
                "zero-width, control): say what the run should do",
                loc=("body", "message"),
            )
        return answer(
            await api.command(
                p,
                run_id,
                SteeringKind.ADD_INSTRUCTION,
                {"text": body.message},
                body.command_fields(),
            )
        )

    @router.post(
        "/runs/{run_id}/commands",
        responses=command_responses,
        response_model=SteeringReceipt,
        summary="Send any steering command to a run",
    )
    async def command(run_id: str, body: CommandBody, p: Principal = Caller) -> JSONResponse:
        return answer(await api.command(p, run_id, body.kind, body.payload, body.command_fields()))

    @router.post(
        "/runs/{run_id}/tasks/{task_id}/commands",
        responses=command_responses,
        response_model=SteeringReceipt,
        summary="Send a steering command to one task of a graph run",
    )
    async def task_command(
        run_id: str, task_id: str, body: CommandBody, p: Principal = Caller
    ) -> JSONResponse:
        return answer(
            await api.command(
                p, run_id, body.kind, body.payload, body.command_fields(), task_id=task_id
            )
        )

    @router.get(
        "/events",
        responses={
            **run_responses,
            429: error("too many event streams open for this user, or for the server"),
            200: {
                "description": "Server-Sent Events: id = event-log id, event = type, "
                "data = the event as JSON; first, one `event: stream` message without an id, "
                'data = {"type": "stream", "log": the name of the log the ids count in, "after": the id the '
                "stream resumes after (0: from the beginning)}",
                "content": {"text/event-stream": {}},
            },
        },
        response_class=StreamingResponse,
        summary="Live events (Server-Sent Events), resumable with Last-Event-ID",
    )
    async def events(
        request: Request,
        run_id: ApiId | None = Query(default=None),
        root_run_id: ApiId | None = Query(default=None),
        last_event_id: int | None = Query(
            default=None,
            ge=0,
            le=_MAX_EVENT_ID,
            description="resume after this id (or send Last-Event-ID; both sent: the later one)",
        ),
        last_event_id_header: LastEventIdHeader = Header(
            default=None,
            alias="last-event-id",
            description="resume after this id, as a reconnecting EventSource sends it; empty "
            "is no id (from the start, as the SSE spec has it); one that is no event id is a "
            "422, as in the query (ignored, it replayed the log)",
        ),
        # (in ``Annotated``: as a default, ``Query`` hid the type's validator from FastAPI)
        follow: Annotated[
            QueryBool,
            Query(
                description="keep the stream open for new events (false: the backlog, then "
                "the stream ends); true or false only, in any letter case",
            ),
        ] = True,
        p: Principal = Depends(stream_caller),
    ) -> StreamingResponse:
        snap = await api.stream_scope(p, run_id, root_run_id)
        entry = None if snap is None else EntryScope.of(snap)
        for where, name, text in (
            ("query", "last_event_id", request.query_params.get("last_event_id")),
            # empty: no id, as the SSE spec has it (an ``id:`` field with no value resets a
            # client's last event id; the header was a 422, read as a number)
            ("header", "last-event-id", last_event_id_header or None),
        ):
            _check_event_id(where, name, text, "one of the ids the stream sent")
        # Both given: the later one. An EventSource opened with ?last_event_id=N reconnects
        # to the same URL sending the last id it saw since in the header: from N, each
        # reconnect replayed every event after N again.
        after = max(last_event_id or 0, int(last_event_id_header or 0))
        who = (p.tenant, p.user)
        held, total = streams.get(who, 0), sum(streams.values())
        if held >= max_streams_per_user or total >= max_streams:
            why = (
                f"{held} event streams of {p.user!r} are open (max_streams_per_user="
                f"{max_streams_per_user})"
                if held >= max_streams_per_user
                else f"{total} event streams are open on this server (max_streams={max_streams})"
            )
            raise Problem(
                429,
                f"{why}: close one (each follows the log until its client goes), then retry",
                headers={"Retry-After": "5"},
            )
        # its place is taken with no await after the count was read (it was taken when the
        # stream sent its first message, so streams asked for at once all passed the check)
        streams[who] = held + 1
        try:
            visible = await api.observe_filter(p)
            if visible is not None and run_id is None and root_run_id is None:
                # a token narrowed to a run sees that run's tree only: its events, not every
                # event of the tenant, are read (and each run in them asked about)
                root_run_id = await api.narrowed_root(p)
            # last: a request refused for anything else leaves its ticket unused
            await api.use_ticket(p)
        except BaseException:
            give_back(who)
            raise
        stream = event_stream(
            control,
            request,
            tenant_id=p.tenant_scope,
            after_id=after,
            run_id=run_id,
            root_run_id=root_run_id,
            entry=entry,
            visible=visible,
            follow=follow,
            # a token checked at connect only would be good for as long as the stream
            # lasts: its lifetime is asked again, attenuated and run-scoped ones' too
            valid=(lambda: not p.expired() and api.still_observes(p))
            if visible is None
            else (lambda: not p.expired()),
            recheck_s=_RECHECK_S,
        )
        return EventStream(
            stream,
            release=lambda: give_back(who),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    def give_back(who: tuple[str, str]) -> None:
        left = streams[who] - 1
        if left:
            streams[who] = left
        else:
            del streams[who]

    class EventStream(StreamingResponse):
        """An event stream that holds its place among the open streams until its answer is
        over: sent, or never begun (a generator that never started would run no ``finally``,
        and would never give its place back), or until its client is known gone: the
        ``http.disconnect`` message gives the place back as it is read, before the stream
        unwinds (a stream cut mid-backlog held it while its cancellation reached it)."""

        def __init__(
            self, stream: AsyncGenerator[str, None], *, release: Callable[[], None], **kw: Any
        ) -> None:
            super().__init__(stream, **kw)
            self.stream = stream
            self.release = release
            self.released = False

        def give_back(self) -> None:
            if not self.released:
                self.released = True
                self.release()

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            async def watched() -> Any:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.give_back()
                return message

            try:
                await super().__call__(scope, watched, send)
            finally:
                self.give_back()
                await self.stream.aclose()

    @router.post(
        "/events/tickets",
        status_code=201,
        response_model=TicketAnswer,
        responses={
            **run_responses,
            400: error(f"{unreadable}, or this server takes no tokens (--insecure-dev)"),
            403: error("the token may not observe runs (no agent:observe right)"),
            404: error("no such run, or not one this token may see"),
            413: error("the body is larger than the server takes"),
            415: error(
                "unsupported_media_type: the body is compressed (Content-Encoding), or its "
                "Content-Type names no JSON (or it has none): send it as application/json"
            ),
            422: error(
                "the body is invalid, root_run_id names no root, or run_id is a run outside "
                "root_run_id's tree (the stream would refuse them)"
            ),
        },
        summary="A ticket that opens one event stream, once",
    )
    async def events_ticket(
        body: TicketBody | None = Body(default=None), p: Principal = Caller
    ) -> dict[str, Any]:
        """The token stays in the header: the stream's URL holds the ticket, which opens the
        stream of ``run_id`` and ``root_run_id`` once, within ``expires_in`` seconds. The
        stream then lasts as long as the token would (it ends when the token expires)."""
        body = body or TicketBody()
        # what the stream would refuse is refused now (a client learns it before it opens)
        await api.stream_scope(p, body.run_id, body.root_run_id, "body")
        await api.observe_filter(p)  # (a 403 without agent:observe)
        return {
            "ticket": api.ticket(p, body.run_id, body.root_run_id),
            "expires_in": TICKET_TTL_S,
            "stream": body.model_dump(),
        }

    _answer_head(router, skip={f"{BASE}/events"})
    app.include_router(router)

    # Probes for a load balancer or an orchestrator: no token, nothing about runs or tenants.
    no_store = {"Cache-Control": "no-store"}

    @app.get(
        "/healthz",
        tags=["probes"],
        summary="Liveness",
        responses={200: {"description": "the process answers", "model": Liveness}},
    )
    async def healthz() -> JSONResponse:
        """200 while the process answers HTTP."""
        return JSONResponse({"status": "ok"}, headers=no_store)

    @app.get(
        "/readyz",
        tags=["probes"],
        summary="Readiness",
        responses={
            200: {"description": "each answers", "model": Readiness},
            503: {
                "description": "the runtime, the store or Redis does not answer",
                "model": Readiness,
            },
        },
    )
    async def readyz() -> JSONResponse:
        """200 when the runtime, the store and Redis (those this server uses) answer; else 503,
        naming which does not."""
        checks = await control.readiness()
        ready = all(state == "ok" for state in checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "unavailable", "checks": checks},
            status_code=200 if ready else 503,
            headers=no_store,
        )

    for path, probe in (("/healthz", healthz), ("/readyz", readyz)):  # HEAD too: some balancers
        app.add_api_route(path, probe, methods=["HEAD"], include_in_schema=False)

    _serve_api_docs(app)
    if console:
        _mount_console(app)
    return app


#: Headers of every answer of the app (``_WithHeaders``, and the 500 of a bug, sent outside
#: it): a browser reads each only as the type it says, none is sniffed as HTML or script.
_EVERY_ANSWER = {"X-Content-Type-Options": "nosniff"}
#: Headers of the console's files and the docs page: a browser shows them in no frame (a
#: page of another site could frame the console and have the operator click its buttons
#: under something else). (That it reads a file only as the type it is served as, every
#: answer of the app says: ``create_app``'s ``nosniff``.)
_PAGE_HEADERS = {"X-Frame-Options": "DENY"}
#: The console loads only this server's files and calls only its API.
_CONSOLE_POLICY = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


class _WithHeaders:
    """ASGI middleware: every HTTP answer of ``app`` carries ``headers`` too."""

    def __init__(self, app: Any, headers: dict[str, str]) -> None:
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *self.headers]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _serve_api_docs(app: "FastAPI") -> None:
    """``/api/agents/docs``: ``static/api-docs.html``, one page that lists the endpoints of
    ``openapi.json`` and loads nothing from anywhere else (it works offline)."""
    from fastapi.responses import HTMLResponse

    try:
        page = (files("tinyagents.server") / "static" / "api-docs.html").read_text("utf-8")
    except OSError as exc:
        _log.warning("the API docs page is missing (%s): serving none", exc)
        return

    async def api_docs() -> HTMLResponse:
        # (its script and style are inline: the policy only keeps it out of frames)
        return HTMLResponse(
            page, headers={**_PAGE_HEADERS, "Content-Security-Policy": "frame-ancestors 'none'"}
        )

    app.add_api_route(f"{BASE}/docs", api_docs, methods=["GET", "HEAD"], include_in_schema=False)


def _plain_json(annotation: Any) -> bool:
    """Whether a route's return ``annotation`` is made of JSON's containers of ``Any`` only:
    ``dict[str, Any]``, ``list[dict[str, Any]]`` ... (no model to check the answer against)."""
    if annotation is Any:
        return True
    args = get_args(annotation)
    if get_origin(annotation) is dict:
        return args[0] is str and _plain_json(args[1])
    return get_origin(annotation) is list and _plain_json(args[0])


def _utf8_json_route(token_first: Callable[[Any], Awaitable[None]]) -> Any:
    """An ``APIRoute`` whose JSON bodies are read as UTF-8 only (a byte-order mark allowed),
    as RFC 8259 has it and the docs say: ``json.loads`` of bytes also reads UTF-16 and UTF-32,
    which a 400 should have refused as the other encodings are. A key given twice in one
    object is a 400 too (``_unique_keys``).

    A route that takes a body awaits ``token_first(request)`` (it raises the 401) before the
    body is read: FastAPI reads it before the endpoint's dependencies run, so a client that
    sent ``Expect: 100-continue`` was told to go on (the server says so at the app's first
    read) and sent its whole body, up to ``MAX_BODY_BYTES``, only to be answered 401."""
    from fastapi import Request
    from fastapi.datastructures import DefaultPlaceholder
    from fastapi.dependencies.utils import get_typed_return_annotation
    from fastapi.routing import APIRoute

    class Utf8Request(Request):
        async def json(self) -> Any:
            if not hasattr(self, "_json"):
                _check_coding(self.headers.get("content-encoding"))  # a 415, not "not UTF-8"
                try:
                    text = (await self.body()).decode("utf-8-sig")
                except UnicodeDecodeError as exc:
                    # FastAPI's 400, which ``_unreadable_body`` explains
                    charset = _declared_charset(self.headers.get("content-type"))
                    raise (_OtherCharset(charset) if charset else exc) from None
                self._json = json.loads(text, object_pairs_hook=_unique_keys)
            return self._json

    class Utf8JsonRoute(APIRoute):
        def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
            # A route that answers plain JSON (dicts and lists of Any: an event's fields, a
            # run's) has no response model: pydantic's would only copy the answer, writing a
            # key's lone surrogate as U+FFFD or failing (a 500) at one in a list's dict; the
            # app's ``Json`` writes it as its escape. The schema stays in the OpenAPI document:
            # the 200's ``model`` (``answers``: what the dicts hold), else the annotation's.
            if isinstance(
                kwargs.get("response_model", DefaultPlaceholder(None)), DefaultPlaceholder
            ):
                returns = get_typed_return_annotation(endpoint)
                if _plain_json(returns):
                    kwargs["response_model"] = None
                    responses = dict(kwargs.get("responses") or {})
                    ok = dict(responses.get(200, {}))
                    if "model" not in ok:
                        schema = TypeAdapter(returns).json_schema()
                        ok.setdefault("content", {"application/json": {"schema": schema}})
                    kwargs["responses"] = {**responses, 200: ok}
            super().__init__(path, endpoint, **kwargs)

        def get_route_handler(self) -> Any:
            handler = super().get_route_handler()
            takes_body = self.body_field is not None

            async def route(request: Request) -> Any:
                if takes_body:
                    await token_first(request)
                return await handler(Utf8Request(request.scope, request.receive))

            return route

    return Utf8JsonRoute


def _declared_charset(content_type: str | None) -> str | None:
    """The ``charset`` a Content-Type declares when it is not UTF-8 (as sent, quotes
    removed), else None."""
    for part in (content_type or "").split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').strip()
            if charset.lower().replace("-", "").replace("_", "") not in ("utf8", ""):
                return charset
    return None


def _answer_head(router: "APIRouter", *, skip: set[str]) -> None:
    """Let every GET route of ``router`` answer HEAD too, as HTTP has it (headers, no body;
    FastAPI's GET routes do not): a route of its own per path, kept out of the OpenAPI
    document. ``skip``: streams, whose GET never ends."""
    from fastapi.routing import APIRoute

    for route in list(router.routes):
        if (
            isinstance(route, APIRoute)
            and "GET" in (route.methods or ())
            and route.path not in skip
        ):
            router.add_api_route(
                route.path.removeprefix(router.prefix),
                route.endpoint,
                methods=["HEAD"],
                include_in_schema=False,
            )


def _mount_console(app: "FastAPI") -> None:
    """Serve ``tinyagents/server/static/`` at ``/`` (index.html for ``/``), ``no-cache``:
    a browser revalidates each file at each load (``ETag``: a 304 when unchanged)."""
    from fastapi.responses import RedirectResponse
    from fastapi.staticfiles import StaticFiles
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.routing import Match, Mount

    class Console(Mount):
        """The console at ``/``, but never under the API: there an unknown path stays a
        JSON 404 and a wrong method a 405 (a mount at ``/`` would match them first)."""

        def matches(self, scope: Any) -> tuple[Match, Any]:
            path = scope.get("path", "")
            if path == BASE or path.startswith(f"{BASE}/"):
                return Match.NONE, {}
            return super().matches(scope)

    class ConsoleFiles(StaticFiles):
        """The console's files. A path with a dot segment (``/x/..``; browsers and httpx
        remove them, a raw client does not) is the JSON 404 it is under the API: one that
        named this folder was answered with StaticFiles' 307 to an absolute ``http://`` URL
        built from the request's ``Host`` (wrong behind a TLS proxy, a host the client chose).
        A file's path with a trailing slash (``/console.js/``) is a 404 too: StaticFiles
        normalised the slash away and served the file, as no static server does (a slash
        names a folder, and the page's relative links then pointed under the file). So is a
        path with an empty segment (``//console.js``, ``/%2Fconsole.js``, ``//``), as
        ``//api/agents/runs`` is: StaticFiles read the doubled slash away and served the file
        (``//api-docs.html`` the raw docs file that ``/api-docs.html`` redirects from)."""

        async def get_response(self, path: str, scope: Any) -> Any:
            sent = str(scope.get("path", ""))
            parts = sent.split("/")
            if any(part in (".", "..") for part in parts) or "" in parts[1:-1]:
                raise StarletteHTTPException(status_code=404)
            if sent.endswith("/") and path != "." and not (static / path).is_dir():
                raise StarletteHTTPException(status_code=404)
            return await super().get_response(path, scope)

    static = Path(str(files("tinyagents.server") / "static"))
    if not static.is_dir():
        _log.warning("the console's files are missing (%s): serving the API only", static)
        return

    async def api_docs_moved() -> RedirectResponse:
        # the docs page lives with the API: as a console file its inline script was blocked
        # by the console's policy, and its "openapi.json" named a path that is not there
        return RedirectResponse(f"{BASE.lstrip('/')}/docs", status_code=308)

    app.add_api_route(
        "/api-docs.html", api_docs_moved, methods=["GET", "HEAD"], include_in_schema=False
    )
    app.router.routes.append(
        Console(
            "/",
            app=_WithHeaders(
                ConsoleFiles(directory=static, html=True),
                # ``no-cache``: a browser asks again at each load (a 304 while the file is
                # the same). With only an ETag and a Last-Modified it kept the files fresh by
                # its own guess (a tenth of their age) and, after an upgrade, ran the old
                # console.js against the new API for days.
                {
                    **_PAGE_HEADERS,
                    "Content-Security-Policy": _CONSOLE_POLICY,
                    "Cache-Control": "no-cache",
                },
            ),
            name="console",
        )
    )


def _not_bearer(header: str) -> str:
    """The 401 of an ``Authorization`` header that holds no Bearer token (what was sent is
    not echoed beyond its scheme: it may be a password)."""
    scheme = header.split(maxsplit=1)[0][:32] if header.strip() else ""
    if scheme.lower() != "bearer":
        what = f"its scheme is {scheme!r}"
    elif header.strip() != scheme:  # a token after a tab (RFC 9110: a space, and only that)
        after = header.lstrip()[len(scheme)]
        sep = "a tab" if after == "\t" else f"{after!r}"
        what = f"{scheme!r} is followed by {sep}, not a space, before the token"
    else:
        what = f"{scheme!r} with no token after it"
    return (
        f"the Authorization header is not a Bearer token ({what}): send "
        "'Authorization: Bearer <token>' (tinyagents token mint)"
    )
