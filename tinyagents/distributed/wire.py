"""What workers write to Redis: key names, the command envelope and the receipt reply.

Keys (``prefix`` defaults to ``tinyagents``; one prefix per deployment):

    {prefix}:workers               sorted set: worker id -> time of its last heartbeat
    {prefix}:runs:{worker}         hash: run id -> JSON snapshot (owner, updated_at, counters,
                                   ``STARTED``: when it started by Redis's clock);
                                   expires ``ttl_s`` after the worker's last heartbeat
    {prefix}:cmd:{worker}          stream of commands for the runs that worker owns
                                   (consumer group ``owners``, one consumer: the worker);
                                   expires ``COMMANDS_TTL_S`` after its last heartbeat
    {prefix}:reply:{worker}        stream of receipts for the commands that worker sent
    {prefix}:seat:{worker}         HOST:PID:NONCE of the one live process under that worker
                                   id (``tinyagents.distributed.seat``); expires ``ttl_s``
                                   after its last heartbeat
    {prefix}:sent:{request_id}     set when a command is appended to its owner's stream: a
                                   send tried again (its reply was lost) finds it sent;
                                   expires after ``SENT_TTL_S``
    {prefix}:claim:{request_id}    of a ``withdrawable`` request: ``taken`` once its owner
                                   submits it, or ``withdrawn`` once its sender takes it
                                   back, whichever comes first (``CLAIM``); expires
                                   ``CLAIM_TTL_S`` after it was set or its sender last
                                   asked for its answer
    {prefix}:server                a fresh id set once by the first worker that asks, with
                                   no expiry (``SERVER_MARK``): it lives as long as the
                                   server's data, and a restart that lost the data shows as
                                   another one; read where the user's ACL denies ``INFO``,
                                   whose ``run_id`` tells a restart otherwise

A command entry holds the fields of ``Envelope``; a reply entry holds ``request_id`` and
``receipt`` (``SteeringReceipt`` as JSON), or ``request_id`` and ``handed_back`` (why the
owner, stopping, could not take it: the sender raises ``ControlPlaneUnavailable``).

A worker that stops gracefully answers what is left in its stream and then deletes the
stream; senders append with ``NOMKSTREAM``, so a command sent after that finds no stream and
fails at once instead of waiting for a receipt nobody will write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyagents._record import FrozenRecord
from tinyagents.errors import InvalidCommandError
from tinyagents.protocol.commands import SteeringCommand, SteeringReceipt
from tinyagents.protocol.ids import id_problem
from tinyagents.store.base import MAX_COMMAND_BYTES, sendable

#: The field of a mirrored run snapshot that says when the run started by Redis's clock
#: (seconds; its ``created_at`` by its worker's clock, plus that clock's difference from
#: Redis's measured at a heartbeat): what workers order runs by, whatever their clocks.
STARTED = "redis_created_at"
#: The consumer group of every command stream: the owning worker reads as its one consumer.
GROUP = "owners"
#: The envelope version this code writes and reads.
VERSION = "1"
#: How long a worker's command stream outlives its last heartbeat: what was left in it waits
#: that long for the worker's next process (the store's inbox keeps an unanswered command an
#: hour too), and the stream of a worker name that never comes back does not stay for ever.
COMMANDS_TTL_S = 3600
#: How long a request's claim (``Keys.claim``) outlasts its setting, and each ask of its
#: sender waiting for the answer (which renews it). ``taken`` must hold while its sender may
#: withdraw the request, that is while it waits (an answer late for ever: its owner died after
#: taking it, and its stream, living an hour past the owner's last heartbeat, outlived a
#: claim set once); the renewals see to that. ``withdrawn`` must hold while an owner may still
#: come to a copy of the entry it read before its stream went: a reader stalled at least
#: since then, which is as long as an unanswered entry waits for its worker's next process
#: (``COMMANDS_TTL_S``), so it is given that long again. Each claim is a few bytes, one per
#: thread command handed off.
CLAIM_TTL_S = COMMANDS_TTL_S
#: How long the mark of a command sent stays: its sender tries a send again at once.
SENT_TTL_S = 300
#: Sets a request's claim (``KEYS[1]``) to ``ARGV[1]`` (``taken`` or ``withdrawn``) for
#: ``ARGV[2]`` seconds unless the other is set already: 1 if it holds ``ARGV[1]`` now, 0 if
#: the other. Its owner takes a withdrawable request only as ``taken``, its sender takes it
#: back only as ``withdrawn``: never both.
CLAIM = """
local held = redis.call('GET', KEYS[1])
if not held then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  return 1
end
if held == ARGV[1] then return 1 end
return 0
"""
TAKEN, WITHDRAWN = "taken", "withdrawn"
#: Sets the server marker (``KEYS[1]``) to ``ARGV[1]`` unless it is set, and returns it.
SERVER_MARK = """
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
"""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Keys(FrozenRecord):
    """The Redis key names of one deployment, all under its ``prefix``."""

    prefix: str

    @property
    def workers(self) -> str:
        return f"{self.prefix}:workers"

    def runs(self, worker: str) -> str:
        return f"{self.prefix}:runs:{worker}"

    def commands(self, worker: str) -> str:
        return f"{self.prefix}:cmd:{worker}"

    def replies(self, worker: str) -> str:
        return f"{self.prefix}:reply:{worker}"

    def seat(self, worker: str) -> str:
        return f"{self.prefix}:seat:{worker}"

    def sent(self, request_id: str) -> str:
        return f"{self.prefix}:sent:{request_id}"

    def claim(self, request_id: str) -> str:
        return f"{self.prefix}:claim:{request_id}"

    @property
    def server(self) -> str:
        return f"{self.prefix}:server"


class MalformedEnvelope(ValueError):
    """A stream entry that does not read as a command envelope (it is dropped and counted)."""

    def __init__(self, reason: str, *, request_id: str | None, reply_to: str | None) -> None:
        super().__init__(reason)
        #: Where the refusal can still be answered, when the entry said so.
        self.request_id = request_id
        self.reply_to = reply_to


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Envelope(FrozenRecord):
    """One command on its way to the worker that owns its run."""

    request_id: str
    reply_to: str  # the sending worker: its reply stream gets the receipt
    to: str  # the owning worker the sender addressed
    command: SteeringCommand
    #: Its sender may take it back (a thread command handed off, whose answer is late): the
    #: owner submits it only once it has claimed it ``taken`` (``CLAIM``).
    withdrawable: bool = False

    def fields(self) -> dict[str, str]:
        """The entry's fields; ``InvalidCommandError`` for a command over ``MAX_COMMAND_BYTES``
        (``tinyagents.store.base``: an entry holding one is answered ``rejected`` unparsed)."""
        command = sendable(self.command)
        fields = {
            "v": VERSION,
            "request_id": self.request_id,
            "reply_to": self.reply_to,
            "to": self.to,
            "command": command,
        }
        if self.withdrawable:
            fields["withdrawable"] = "1"
        return fields

    @classmethod
    def parse(cls, raw: dict[bytes, bytes] | None) -> Envelope:
        """Read a stream entry; ``MalformedEnvelope`` for anything else. Its ``request_id``,
        ``reply_to`` and ``to`` obey the id rule (``tinyagents.protocol.ids``); one that
        breaks it is no place to answer: a ``reply_to`` named the key the receipt went to,
        and a megabyte-long ``request_id`` came back in it."""
        if not raw:
            raise MalformedEnvelope("empty entry", request_id=None, reply_to=None)
        size = len(raw.get(b"command") or b"")
        if size > MAX_COMMAND_BYTES:  # not decoded nor parsed: answered, with what it says
            raise MalformedEnvelope(
                f"command too large: {size} bytes, the limit is {MAX_COMMAND_BYTES}",
                request_id=_usable(_text(raw.get(b"request_id"))),
                reply_to=_usable(_text(raw.get(b"reply_to"))),
            )
        try:
            fields = {k.decode(): v.decode() for k, v in raw.items()}
        except (UnicodeDecodeError, AttributeError):
            raise MalformedEnvelope("not UTF-8 text", request_id=None, reply_to=None) from None
        request_id, reply_to = _usable(fields.get("request_id")), _usable(fields.get("reply_to"))
        if fields.get("v") != VERSION:
            raise MalformedEnvelope(
                f"envelope version {fields.get('v')!r}, expected {VERSION!r}",
                request_id=request_id,
                reply_to=reply_to,
            )
        missing = [k for k in ("request_id", "reply_to", "to", "command") if not fields.get(k)]
        if missing:
            raise MalformedEnvelope(
                f"missing {', '.join(missing)}", request_id=request_id, reply_to=reply_to
            )
        for name in ("request_id", "reply_to", "to"):
            problem = id_problem(fields[name])
            if problem is not None:
                raise MalformedEnvelope(
                    f"{name} breaks the id rule: {problem}",
                    request_id=request_id,
                    reply_to=reply_to,
                )
        try:
            command = SteeringCommand.model_validate_json(fields["command"])
        except InvalidCommandError as exc:
            raise MalformedEnvelope(
                f"not a command: {exc}", request_id=request_id, reply_to=reply_to
            ) from None
        return cls(
            request_id=fields["request_id"],
            reply_to=fields["reply_to"],
            to=fields["to"],
            command=command,
            withdrawable=fields.get("withdrawable") == "1",
        )


def entry_position(entry_id: Any) -> tuple[int, int]:
    """A stream entry id (``b"1700000000000-0"``) as a pair that sorts as Redis orders them."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def text_field(raw: dict[Any, Any], name: bytes) -> str | None:
    """The text of an entry's id field ``name``, or ``None`` (missing, empty, not UTF-8, or
    breaking the id rule)."""
    value = raw.get(name)
    return _usable(_text(value)) if isinstance(value, bytes) else None


def _usable(value: str | None) -> str | None:
    """``value`` when it is an id by the id rule, else ``None``."""
    return value if value and id_problem(value) is None else None


def _text(value: bytes | None) -> str | None:
    try:
        return value.decode() or None if value is not None else None
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class HandedBack(FrozenRecord):
    """The owner's answer to a command it did not take because it was stopping."""

    reason: str


def reply_fields(request_id: str, receipt: SteeringReceipt | HandedBack) -> dict[str, str]:
    if isinstance(receipt, HandedBack):
        return {"request_id": request_id, "handed_back": receipt.reason}
    return {"request_id": request_id, "receipt": receipt.model_dump_json()}


def parse_reply(raw: dict[bytes, bytes]) -> tuple[str, SteeringReceipt | HandedBack] | None:
    """(request id, receipt or hand-back) of a reply entry, or ``None`` for anything else."""
    try:
        request_id = raw[b"request_id"].decode()
        if b"handed_back" in raw:
            return request_id, HandedBack(raw[b"handed_back"].decode())
        receipt = SteeringReceipt.model_validate_json(raw[b"receipt"])
    except (KeyError, UnicodeDecodeError, ValueError):
        return None
    return request_id, receipt
