"""Biscuit tokens for the operator API: who is calling, for which tenant, with which rights.

A token's authority block holds ``user("alice")``, ``tenant("acme")`` and one ``right(...)``
fact per right: ``agent:observe`` (read runs, traces, events), ``agent:control`` (send
commands), ``iam:admin`` (both, for every tenant). Anyone holding a token can *attenuate* it
(append a block of checks) without the server's key; the server honours those checks on every
request. For each request the authorizer knows:

- ``operation("observe")`` or ``operation("control")``;
- for a request about one run: ``run("r-1")``, ``tenant_of_run("acme")`` and ``within(id)``
  for the run itself and each of its ancestors (so ``check if within("r-1")`` admits ``r-1``
  and every run below it);
- for a command: ``command("pause")`` (its kind);
- ``time(...)`` (so ``check if time($t), $t < 2027-01-01T00:00:00Z`` expires a token);
- for an event stream opened with a ticket: ``sse_ticket(nonce, stream, expiry)``.

An event-stream *ticket* (``Auth.sse_ticket``) is the caller's token with one more block,
``check if sse_ticket(nonce, stream, expiry)``: only ``GET /events?ticket=`` tells the
authorizer that fact (for the stream the ticket names), so a ticket is good for nothing else.
The server reads its expiry at open only: the stream then lasts as long as the token would.

``Auth.attenuate`` writes the usual narrowings. The signing key is an Ed25519 private key in
hex: ``TINYAGENTS_SERVER_KEY``, or a key file (created on first use, mode 0600; by default
next to the SQLite store: ``runs.db`` → ``runs.db.server-key``).

``biscuit_auth`` is imported inside the functions that need it (the ``server`` extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from tinyagents._record import FrozenRecord
from tinyagents.errors import AuthError, ConfigurationError, InvalidIdError
from tinyagents.protocol.commands import HumanActor, SteeringActor
from tinyagents.protocol.ids import shown_name, shown_repr
from tinyagents.runs.info import check_id
from tinyagents.store.urls import is_sqlite_url

OBSERVE_RIGHT = "agent:observe"
CONTROL_RIGHT = "agent:control"
ADMIN_RIGHT = "iam:admin"
RIGHTS = (OBSERVE_RIGHT, CONTROL_RIGHT, ADMIN_RIGHT)
KEY_ENV = "TINYAGENTS_SERVER_KEY"
KEY_FILE_SUFFIX = ".server-key"

Operation = Literal["observe", "control"]
#: How long evaluating one token may take; a token's own rules past it are refused.
_MAX_EVALUATION = timedelta(milliseconds=100)
#: The most a holder's attenuation may add: blocks, and per block its source's length and
#: statements (facts, rules, checks). The library's time limit is checked between rounds of
#: its evaluation, not inside one, so one check joining a few hundred facts held the event
#: loop for seconds; a dozen statements cannot (and a block may hold no rule, which derives
#: facts round after round). ``attenuate`` writes at most 3 checks per block.
_MAX_BLOCKS = 8
_MAX_BLOCK_SOURCE = 1024
_MAX_BLOCK_STATEMENTS = 12

#: The server's policies: a right grants its operation, ``iam:admin`` every operation. The
#: checks of attenuation blocks apply on top (every check must pass, whatever policy matched).
_POLICIES = """
allow if right("iam:admin");
allow if operation("observe"), right("agent:observe");
allow if operation("control"), right("agent:control");
"""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RunFacts(FrozenRecord):
    """What the authorizer is told about the run a request is about."""

    run_id: str
    tenant_id: str
    #: The run itself and its ancestors, nearest first.
    lineage: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class TicketClaim(FrozenRecord):
    """What an event-stream ticket's block says: its nonce (it is used once), the stream it
    opens (``stream_digest``) and when it may no longer open it."""

    nonce: str
    stream: str
    expires_at: datetime


def stream_digest(run_id: str | None, root_run_id: str | None) -> str:
    """The stream a ticket opens (``/events``'s ``?run_id=`` and ``?root_run_id=``), as hex:
    a ticket's block holds it where a printed id could hold a quote."""
    return hashlib.sha256(json.dumps([run_id, root_run_id]).encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Principal(FrozenRecord):
    """The caller a verified token names (its authority block)."""

    user: str
    tenant: str
    rights: frozenset[str]
    #: The verified ``biscuit_auth.Biscuit`` (None for the insecure dev principal).
    token: Any = field(default=None, repr=False, compare=False)
    #: When the token's shortest lifetime (minted or added by attenuation) ends; None: never.
    expires_at: datetime | None = None
    #: The ticket that opened this caller's event stream (``Auth.sse_ticket``), if one did:
    #: its fact is told to the authorizer, whose check it passes.
    ticket: TicketClaim | None = None

    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= datetime.now(UTC)

    @property
    def admin(self) -> bool:
        return ADMIN_RIGHT in self.rights

    @property
    def tenant_scope(self) -> str | None:
        """The tenant whose runs this caller may see; None (every tenant) for ``iam:admin``."""
        return None if self.admin else self.tenant

    def actor(self, run_tenant: str) -> HumanActor:
        """The actor of a command this caller sends to a run of ``run_tenant``.

        An admin acts in the run's tenant with ``agent:control`` (the policy pipeline's
        authority check asks for both); the audit trail still shows ``iam:admin``.
        """
        scopes = set(self.rights)
        if self.admin:
            scopes.add(CONTROL_RIGHT)
        tenant = run_tenant if self.admin else self.tenant
        return SteeringActor.human(self.user, tenant_id=tenant, scopes=scopes)


#: Who calls an app built without auth (``serve --insecure-dev``): an admin of every tenant.
INSECURE_DEV = Principal(user="insecure-dev", tenant="default", rights=frozenset({ADMIN_RIGHT}))


class Auth:
    """Mints and verifies the operator API's Biscuit tokens with one Ed25519 key."""

    def __init__(self, private_key_hex: str) -> None:
        from biscuit_auth import Algorithm, KeyPair, PrivateKey

        try:
            raw = bytes.fromhex(private_key_hex.strip())
            # The stubs shipped with biscuit-python 0.4 lag its API (the algorithm argument).
            private = PrivateKey.from_bytes(raw, Algorithm.Ed25519)  # type: ignore[call-arg,attr-defined]
        except Exception as exc:
            raise ConfigurationError(
                "the server key is not an Ed25519 private key in hex (64 hex digits); "
                f"make one with Auth.generate_key() ({exc})"
            ) from None
        self._keypair = KeyPair.from_private_key(private)

    @staticmethod
    def generate_key() -> str:
        """A new private key, in hex."""
        from biscuit_auth import KeyPair

        return bytes(KeyPair().private_key.to_bytes()).hex()

    @classmethod
    def from_key_file(cls, path: str | Path) -> Auth:
        """The key in ``path``, written there (mode 0600) when the file does not exist or is
        empty. Something there that is not a regular file (``/dev/null``, a pipe, a directory)
        is a ``ConfigurationError`` and is left as it is: a device has size 0, and was taken
        for an empty key file, unlinked and replaced (run as root, ``/dev/null`` was)."""
        path = Path(path)
        _regular_or_absent(path)
        if _empty(path):
            # An older version could leave an empty file (it created the file, then failed to
            # make the key): it holds no key, so it is not there.
            path.unlink(missing_ok=True)
        if not path.exists():
            _create_key_file(path, cls.generate_key())
        try:
            text = path.read_text(encoding="ascii")
        except OSError as exc:
            raise ConfigurationError(f"cannot read the server key file {path}: {exc}") from None
        except UnicodeDecodeError as exc:  # binary: no hex key ("'ascii' codec can't decode")
            raise ConfigurationError(
                f"the server key file {path} is not an Ed25519 private key in hex (64 hex "
                f"digits): it holds byte {exc.object[exc.start]:#04x}, no text; give the key "
                "file 'tinyagents serve' made, or the path of one to create"
            ) from None
        try:
            return cls(text)
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"{exc}; or delete the key file {shown_name(str(path))} (a new key is made "
                "there, and every token it signed is refused)"
            ) from None

    @classmethod
    def resolve(cls, *, store: str | None, key_file: str | Path | None = None) -> Auth | None:
        """The key ``serve`` and ``token mint`` share: ``key_file`` if given, else
        ``TINYAGENTS_SERVER_KEY``, else the key file next to a SQLite store; None when there
        is none of these (a store in memory or elsewhere without a configured key)."""
        if key_file is not None:
            return cls.from_key_file(key_file)
        env = os.environ.get(KEY_ENV)
        if env:
            try:
                return cls(env)
            except ConfigurationError as exc:  # "delete the key file": there is none
                raise ConfigurationError(
                    f"${KEY_ENV}: {exc}; set it to the key every server and 'token' "
                    f"command shares, or unset it to use --key-file or the file beside the "
                    "SQLite store"
                ) from None
        path = default_key_file(store)
        return None if path is None else cls.from_key_file(path)

    @property
    def public_key_hex(self) -> str:
        return bytes(self._keypair.public_key.to_bytes()).hex()

    # ------------------------------------------------------------------ minting

    def mint(
        self,
        *,
        user: str,
        tenant: str,
        rights: Iterable[str],
        ttl_s: float | None = None,
    ) -> str:
        """A token (URL-safe base64) for ``user`` of ``tenant`` holding ``rights``."""
        from biscuit_auth import BiscuitBuilder, Fact

        rights = check_claims(user=user, tenant=tenant, rights=rights, ttl_s=ttl_s)
        builder = BiscuitBuilder(
            "user({user}); tenant({tenant});", {"user": user, "tenant": tenant}
        )
        for right in rights:
            builder.add_fact(Fact("right({right})", {"right": right}))
        if ttl_s is not None:
            # The check enforces the lifetime; the fact lets the server say "expired" (401).
            builder.add_code(
                "expires({exp}); check if time($t), $t < {exp};", {"exp": _expiry(ttl_s)}
            )
        return str(builder.build(self._keypair.private_key).to_base64())

    def attenuate(
        self,
        token: str,
        *,
        observe_only: bool = False,
        run_id: str | None = None,
        ttl_s: float | None = None,
    ) -> str:
        """``token`` narrowed: to reading only, to ``run_id`` and the runs below it, to a
        lifetime. Biscuit lets any holder append such a block; this checks the token against
        the server's key first (biscuit-python reads a token only with the key's public half,
        so the command needs the server's key at hand: its store, key file or environment)."""
        return _narrowed(self._parse(token), observe_only, run_id, ttl_s)

    def sse_ticket(
        self,
        token: str,
        *,
        stream: tuple[str | None, str | None],
        expires_at: datetime,
    ) -> str:
        """An event-stream ticket: ``token`` with a block only ``GET /events?ticket=`` of
        ``stream`` (its ``run_id``, ``root_run_id``) passes, opening it until ``expires_at``."""
        from biscuit_auth import BlockBuilder

        block = BlockBuilder("")
        block.add_code(
            "check if sse_ticket({nonce}, {stream}, {exp});",
            {"nonce": secrets.token_hex(16), "stream": stream_digest(*stream), "exp": expires_at},
        )
        return str(self._parse(token).append(block).to_base64())

    # ------------------------------------------------------------------ verifying

    def authenticate(self, token: str) -> Principal:
        """The principal of a token signed with this key; ``AuthError`` otherwise."""
        from biscuit_auth import AuthorizationError, Rule

        parsed = self._parse(token)
        _check_attenuation_size(parsed)
        try:
            authorizer = self._authorizer(parsed, None, None, None)
            users = [f.terms[0] for f in authorizer.query(Rule("u($u) <- user($u)"))]
            tenants = [f.terms[0] for f in authorizer.query(Rule("t($t) <- tenant($t)"))]
            rights = frozenset(f.terms[0] for f in authorizer.query(Rule("r($r) <- right($r)")))
        except AuthorizationError as exc:  # its blocks' rules ran past the limits
            raise AuthError(f"the token could not be evaluated: {exc}") from None
        if len(users) != 1 or len(tenants) != 1:
            raise AuthError("the token must name exactly one user and one tenant")
        problem = _user_problem(str(users[0])) or _tenant_problem(str(tenants[0]))
        if problem is not None:  # minted before ``mint`` refused it
            raise AuthError(f"{problem}; mint another token")
        minted = [f.terms[0] for f in authorizer.query(Rule("e($e) <- expires($e)"))]
        now = datetime.now(UTC)
        ends = [e for e in [*minted, *_attenuated_expiries(parsed)] if isinstance(e, datetime)]
        for expiry in ends:
            if expiry <= now:
                raise AuthError(f"the token expired at {expiry.isoformat()}; mint a new one")
        return Principal(
            user=str(users[0]),
            tenant=str(tenants[0]),
            rights=rights,
            token=parsed,
            expires_at=min(ends, default=None),
        )

    def allows(
        self,
        principal: Principal,
        operation: Operation,
        run: RunFacts | None = None,
        *,
        command: str | None = None,
    ) -> bool:
        """Whether the principal's token (all its blocks' checks and a policy) allows
        ``operation`` on ``run`` (None: on the tenant as a whole)."""
        from biscuit_auth import AuthorizationError

        if principal.token is None:  # the insecure dev principal
            return True
        try:
            authorizer = self._authorizer(
                principal.token, operation, run, command, principal.ticket
            )
            authorizer.authorize()
        except AuthorizationError:
            return False
        return True

    def _parse(self, token: str) -> Any:
        from biscuit_auth import Biscuit

        try:
            return Biscuit.from_base64(token.strip(), self._keypair.public_key)
        except Exception:
            # The library's messages say little more; never echo the token itself.
            raise AuthError(
                "the token is not a valid Biscuit signed by this server's key "
                "(mint one with `tinyagents token mint`)"
            ) from None

    def _authorizer(
        self,
        token: Any,
        operation: Operation | None,
        run: RunFacts | None,
        command: str | None,
        ticket: TicketClaim | None = None,
    ) -> Any:
        from biscuit_auth import AuthorizerBuilder, Fact

        builder = AuthorizerBuilder(_POLICIES)
        # limits/set_limits/set_time exist in biscuit-python 0.4; its stubs lag behind.
        limits = builder.limits()  # type: ignore[attr-defined]
        # The library's default (1 ms) is exceeded by a busy machine, not by a token.
        limits.max_time = _MAX_EVALUATION
        builder.set_limits(limits)  # type: ignore[attr-defined]
        builder.set_time()  # type: ignore[attr-defined]
        if operation is not None:
            builder.add_fact(Fact("operation({op})", {"op": operation}))
        if run is not None:
            builder.add_fact(Fact("run({id})", {"id": run.run_id}))
            builder.add_fact(Fact("tenant_of_run({t})", {"t": run.tenant_id}))
            for run_id in run.lineage:
                builder.add_fact(Fact("within({id})", {"id": run_id}))
        if command is not None:
            builder.add_fact(Fact("command({kind})", {"kind": command}))
        if ticket is not None:
            builder.add_fact(
                Fact(
                    "sse_ticket({nonce}, {stream}, {exp})",
                    {"nonce": ticket.nonce, "stream": ticket.stream, "exp": ticket.expires_at},
                )
            )
        return builder.build(token)


def _regular_or_absent(path: Path) -> None:
    """Refuse a key file path that names something other than a regular file (a symlink is
    followed; one that leads nowhere counts as absent)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigurationError(f"cannot read the server key file {path}: {exc}") from None
    if not stat.S_ISREG(mode):
        what = "a directory" if stat.S_ISDIR(mode) else "a device, pipe or socket"
        raise ConfigurationError(
            f"the server key file {path} is not a regular file ({what}): give the path of "
            "the file holding the key, or of one to create"
        )


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def _create_key_file(path: Path, key: str) -> None:
    """Write ``key`` to ``path`` whole or not at all: a temporary file beside it, linked into
    place. The link fails when the file exists, so two processes starting at once agree on
    one key (the second reads the first's)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    except FileNotFoundError:
        # (the error named the temporary file beside it, which the user never asked for)
        raise ConfigurationError(
            f"cannot create the server key file {path}: its folder {path.parent} does not "
            "exist; create it, or name a key file in a folder that does (nothing was written)"
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"cannot create the server key file {path}: {exc}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _narrowed(parsed: Any, observe_only: bool, run_id: str | None, ttl_s: float | None) -> str:
    """A parsed token (verified or not) with one more block of checks."""
    from biscuit_auth import BlockBuilder

    if not isinstance(observe_only, bool):  # "no" narrowed the token, 0 left it as it was
        raise ConfigurationError(
            f"observe_only is True or False, got {type(observe_only).__name__} {observe_only!r}"
        )
    block = BlockBuilder("")
    if observe_only:
        block.add_code('check if operation("observe");')
    if run_id is not None:
        if not isinstance(run_id, str):
            raise ConfigurationError(
                "a token narrowed to a run names its run id, a string; got "
                f"{type(run_id).__name__} {run_id!r}"
            )
        if not run_id.strip():  # a check no run passes
            raise ConfigurationError(
                "a blank run id (--run): give the run the token is for, or leave it out"
            )
        # Not the id rule: a run an older version saved under an id the rule now refuses
        # (a line break, say) is still read, and a token may be narrowed to it.
        _check_text(run_id, "run id")
        block.add_code("check if within({run});", {"run": run_id})
    if ttl_s is not None:
        block.add_code("check if time($t), $t < {exp};", {"exp": _expiry(ttl_s)})
    return str(parsed.append(block).to_base64())


def default_key_file(store: str | None) -> Path | None:
    """The key file beside a SQLite store (``sqlite:///runs.db`` → ``runs.db.server-key``)."""
    if store is None or not is_sqlite_url(store):
        return None
    path = store.partition("://")[2]
    path = path[1:] if path.startswith("/") else path
    if not path or path == ":memory:":
        return None
    return Path(path + KEY_FILE_SUFFIX)


def _check_text(value: str, name: str) -> None:
    """A token holds UTF-8 text: a string with a lone surrogate (a non-UTF-8 command-line
    argument, say) is a ``ConfigurationError``, not the library's ``TypeError``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(f"the {name} {value!r} is not UTF-8 text") from None


def _check_attenuation_size(token: Any) -> None:
    """Refuse a token whose attenuation is larger than the server evaluates (``AuthError``),
    before any of it runs: evaluating is CPU time in the server's event loop, every tenant's."""
    blocks = token.block_count() - 1
    if blocks > _MAX_BLOCKS:
        raise AuthError(
            f"the token has {blocks} attenuation blocks; this server evaluates at most "
            f"{_MAX_BLOCKS}"
        )
    for index in range(1, blocks + 1):
        source = token.block_source(index)
        if "<-" in source:  # a rule derives facts: rounds of evaluation, each unbounded
            raise AuthError(
                f"the token's attenuation block {index} has a rule; this server evaluates "
                "attenuation made of facts and checks only"
            )
        if len(source) > _MAX_BLOCK_SOURCE or source.count(";") > _MAX_BLOCK_STATEMENTS:
            raise AuthError(
                f"the token's attenuation block {index} is larger than this server evaluates "
                f"(at most {_MAX_BLOCK_STATEMENTS} statements, {_MAX_BLOCK_SOURCE} characters)"
            )


#: The lifetime check ``attenuate(ttl_s=...)`` adds, as the library prints a block's source.
_TIME_CHECK = re.compile(r"check if time\(\$t\), \$t < (\S+);")


def _attenuated_expiries(token: Any) -> list[datetime]:
    """The ends of the lifetimes attenuation blocks gave ``token``. Their facts are not the
    authorizer's to read (only the authority block's are), so they are read from the blocks'
    source: an expired one is a 401 naming the expiry, as a minted lifetime is, instead of a
    tenant that looks empty. The blocks' checks still decide every request."""
    expiries = []
    for index in range(1, token.block_count()):
        for found in _TIME_CHECK.finditer(token.block_source(index)):
            try:
                expiries.append(datetime.fromisoformat(found.group(1)))
            except ValueError:
                continue  # a check written by another tool: the authorizer still applies it
    return expiries


#: The check ``sse_ticket`` adds, as the library prints a block's source.
_TICKET_CHECK = re.compile(r'check if sse_ticket\("([0-9a-f]+)", "([0-9a-f]+)", (\S+)\);')


def ticket_claims(token: Any) -> list[TicketClaim]:
    """The ticket checks (``Auth.sse_ticket``) of ``token``'s attenuation blocks: none for a
    token, one for a ticket."""
    claims = []
    for index in range(1, token.block_count()):
        for found in _TICKET_CHECK.finditer(token.block_source(index)):
            try:
                expiry = datetime.fromisoformat(found.group(3))
            except ValueError:
                continue  # not ours: its check still applies, and passes nowhere
            claims.append(
                TicketClaim(nonce=found.group(1), stream=found.group(2), expires_at=expiry)
            )
    return claims


#: The lines of a block ``attenuate`` writes, as the library prints a block's source.
_NARROWING_LINE = re.compile(
    r'check if within\("([^"\n]*)"\);'
    r'|check if operation\("(?:observe|control)"\);'
    r"|check if time\(\$t\), \$t < [0-9T:.Z+-]+;"
)


def narrowed_to(token: Any) -> list[str]:
    """The runs the ``check if within(...)`` of ``token``'s attenuation blocks name (every run
    it may see is one of them or below it), from the blocks made only of checks ``attenuate``
    writes. A hint, to find the tree a narrowed token sees without reading every run of its
    tenant: a block's source prints a string as it is, so an id holding ``");`` and a newline
    reads as two runs. A run named here is only to be trusted once the token may see it (the
    run it truly names is then one of its ancestors, in the same tree)."""
    runs: list[str] = []
    for index in range(1, token.block_count()):
        found = [_NARROWING_LINE.fullmatch(line) for line in token.block_source(index).split("\n")]
        if all(found[:-1]) and not found[-1]:  # (the source ends with a newline)
            runs += [m.group(1) for m in found[:-1] if m is not None and m.group(1)]
    return runs


def check_claims(
    *, user: str, tenant: str, rights: Iterable[str], ttl_s: float | None = None
) -> list[str]:
    """The rights of a token for ``user`` of ``tenant``, sorted, once every claim is one a
    token may hold; ``ConfigurationError`` otherwise (``token mint`` asks before it reads or
    makes a key, so bad input changes nothing)."""
    if isinstance(rights, str):  # read letter by letter, it was refused as [':', 'a', ...]
        raise ConfigurationError(
            f"rights are a list of rights, e.g. [{rights!r}]; got the text {rights!r}"
        )
    rights = sorted(set(rights))
    unknown = [r for r in rights if r not in RIGHTS]
    if unknown:
        shown = ", ".join(shown_repr(r) for r in unknown)
        raise ConfigurationError(f"unknown right(s) {shown}; rights are {list(RIGHTS)}")
    if not rights:
        raise ConfigurationError(f"a token needs at least one right of {list(RIGHTS)}")
    for name, value in (("user", user), ("tenant", tenant)):
        if not value or not value.strip():
            raise ConfigurationError(f"a token needs a non-blank {name}")
        _check_text(value, name)
    problem = _user_problem(user) or _tenant_problem(tenant)
    if problem is not None:
        raise ConfigurationError(problem)
    if ttl_s is not None:
        _expiry(ttl_s)
    return rights


def _user_problem(user: str) -> str | None:
    """Why ``user`` cannot be a token's user, or None: it is the id of its commands' actor,
    and a control character in it reached terminals and logs."""
    try:
        check_id(user, "user")
    except InvalidIdError as exc:
        return f"a token's user is its commands' actor id: {exc}"
    return None


def _tenant_problem(tenant: str) -> str | None:
    """Why no run can be of ``tenant`` (``rt.start`` refuses it as a tenant id), or None: a
    token for it could see nothing, and PostgreSQL refuses its NUL in every lookup."""
    try:
        check_id(tenant, "tenant")
    except InvalidIdError as exc:
        return f"a token's tenant is a run's tenant id: {exc}"
    return None


def _expiry(ttl_s: float) -> datetime:
    """The end of a lifetime of ``ttl_s`` seconds from now, rounded up to the whole second a
    Biscuit date holds, so no token ends before its lifetime has passed (rounded down, a
    0.5 s token was often expired when minted)."""
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)):  # True lived 1 s
        raise ConfigurationError(
            f"a token's lifetime is a number of seconds, got {type(ttl_s).__name__} {shown_repr(ttl_s)}"
        )
    # "not >": NaN compares false both ways; inf and 1e300 overflow the datetime.
    if not ttl_s > 0:
        raise ConfigurationError(f"a token's lifetime must be positive, got {shown_repr(ttl_s)} s")
    try:
        end = datetime.now(UTC) + timedelta(seconds=ttl_s)
        return end.replace(microsecond=0) + timedelta(seconds=1 if end.microsecond else 0)
    except OverflowError:
        raise ConfigurationError(
            f"a token's lifetime of {shown_repr(ttl_s)} s ends past the year 9999: give fewer seconds"
        ) from None
