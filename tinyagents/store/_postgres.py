"""What the PostgreSQL store and checkpointer share: connecting (asyncpg, loaded lazily),
a schema of one's own, versioned migrations, advisory-lock keys and the error mapping."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from tinyagents._bounds import seconds, whole_number
from tinyagents.errors import ConfigurationError, StoreError
from tinyagents.protocol.text import encodes_as_utf8
from tinyagents.store.urls import redacted

#: SQLSTATE classes and codes a later attempt may not meet: a lost or refused connection
#: (08), insufficient resources such as a full disk (53), a server shutting down or starting
#: (57P0x), a serialization failure or deadlock (40001, 40P01), a lock not available (55P03),
#: a write on a server that takes none (25006: a standby a stale DNS name or a proxy still
#: points to after a failover; the pool's connections are replaced, ``replaced_if_read_only``).
_PASSING_CLASSES = ("08", "53", "57")
READ_ONLY = "25006"
_PASSING_CODES = frozenset({"40001", "40P01", "55P03", READ_ONLY})


def db_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a database call may raise that mean "this call failed"."""
    import asyncpg

    # ValueError: text asyncpg cannot encode (a lone surrogate); OSError: the socket;
    # OverflowError: the socket's word for a port past 65535 in the URL; InternalClientError:
    # asyncpg's own failures outside both trees (a protocol error, a server that is not the
    # kind ``target_session_attrs`` asks for).
    return (
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,
        OSError,
        OverflowError,
        ValueError,
    )


def may_pass(exc: BaseException) -> bool:
    """Whether ``exc`` may not happen again when the same call is tried later."""
    if isinstance(exc, OSError):  # refused, reset, timed out
        return True
    state = getattr(exc, "sqlstate", None)
    if isinstance(state, str):
        return state.startswith(_PASSING_CLASSES) or state in _PASSING_CODES
    import asyncpg

    # the pool or connection was closed under the call; no server of the kind asked for
    # (``target_session_attrs``) answers yet, as while a standby is promoted
    if isinstance(
        exc,
        asyncpg.exceptions.ConnectionDoesNotExistError
        | asyncpg.exceptions.TargetServerAttributeNotMatched,
    ):
        return True
    # A connection the server ended (pg_terminate_backend, a restart) while it sat idle in the
    # pool fails its next use with one of these, which carry no SQLSTATE nor a type of their
    # own; the pool replaces the connection, so the same call works again.
    return (
        isinstance(exc, (asyncpg.InterfaceError, asyncpg.InternalClientError))
        and _CLOSED_UNDER.search(str(exc)) is not None
    )


#: asyncpg's words for a connection closed under a call: "connection is closed", "the
#: underlying connection is closed", and its protocol still consuming the server's parting
#: error (state 2, ``PROTOCOL_ERROR_CONSUME``) when the next call begins.
_CLOSED_UNDER = re.compile(r"connection is closed|another operation \(2\) is in progress")


def cause(exc: BaseException) -> BaseException:
    """What a ``StoreError`` is raised from: ``exc``, seen through a ``ConnectionError`` when
    it may pass, so the store writer (which retries what an ``OSError`` caused) retries it
    instead of giving the events up."""
    if not may_pass(exc) or isinstance(exc, OSError):
        return exc
    passing = ConnectionError(first_line(exc))
    passing.__cause__ = exc
    return passing


def check_settings(
    *, min_size: object, max_size: object, command_timeout: object, lease_ttl: object = 0.0
) -> None:
    """``ConfigurationError`` for pool settings asyncpg refuses only when the pool opens (or
    takes, as a NaN ``command_timeout``), and for a ``lease_ttl`` that is not a finite number
    of seconds >= 0 (0: the lease is checked at every write)."""
    if whole_number("min_size", min_size, least=0) > whole_number("max_size", max_size):
        raise ConfigurationError(
            f"min_size ({min_size}) must not be greater than max_size ({max_size})"
        )
    if command_timeout is not None:
        seconds("command_timeout", command_timeout)  # asyncpg refuses 0
    seconds("lease_ttl", lease_ttl, zero=True)


#: How many times ``fetch_again`` tries a statement again, and its pause before the first
#: retry (doubled for each next one).
AGAIN = 2
AGAIN_AFTER_S = 0.05


class PoolExhausted(ConnectionError):
    """No connection of the pool came free within the acquire timeout (``command_timeout``):
    every one is in use (long transactions, or more concurrent calls than ``max_size``), or
    a new one could not be made in time. A ``ConnectionError``: it may pass."""


@contextlib.asynccontextmanager
async def connection(pool: Any, wait_s: float | None) -> AsyncIterator[Any]:
    """A connection of ``pool``, waited for ``wait_s`` seconds at most (None: as long as it
    takes), given back when the block ends; running out is ``PoolExhausted``. ``pool.fetch``
    and the like wait for one with no limit."""
    try:
        conn = await pool.acquire(timeout=wait_s)
    except TimeoutError as exc:
        raise PoolExhausted(
            f"the connection pool is exhausted: no connection came free within "
            f"command_timeout ({wait_s:g} s); all {pool.get_max_size()} (max_size) are in use "
            "(long transactions, or more calls at once than max_size), or a new one could "
            "not be made in time"
        ) from exc
    try:
        yield conn
    finally:
        # The pool gives ``wait_s`` to the release too (waiting out a cancelled statement,
        # closing a connection ``expire_connections`` marked); one that fails or runs out
        # terminates the connection, and must not turn what the block did into a failure.
        with contextlib.suppress(*db_errors()):
            await pool.release(conn)


async def fetch_again(
    pool: Any, sql: str, *args: Any, wait_s: float | None = None
) -> tuple[list[Any], bool]:
    """A statement's rows, and whether it was tried again: an attempt that failed in a way
    that may pass (the server ended the connection under it, and perhaps the pool's other
    connections with it) is tried again on another connection, ``AGAIN`` times at most. For
    reads and idempotent writes only: an attempt whose reply was lost may have committed.
    ``wait_s``: how long to wait for a free connection (``connection``); an exhausted pool
    is not waited for again."""
    for attempt in range(AGAIN):
        try:
            async with replaced_if_read_only(pool), connection(pool, wait_s) as conn:
                return list(await conn.fetch(sql, *args)), attempt > 0
        except db_errors() as exc:
            if not may_pass(exc) or isinstance(exc, PoolExhausted):
                raise
        # the pool learns of its other ended connections meanwhile
        await asyncio.sleep(AGAIN_AFTER_S * 2**attempt)
    async with replaced_if_read_only(pool), connection(pool, wait_s) as conn:
        return list(await conn.fetch(sql, *args)), True


async def fetch_unsent_again(pool: Any, sql: str, *args: Any, wait_s: float | None) -> list[Any]:
    """A statement's rows, sent once more on another connection when the first one turned
    out to have been ended by the server before the statement was sent (``not_sent``): safe
    for any write, since the server never saw the first try."""
    for attempt in range(2):
        try:
            async with replaced_if_read_only(pool), connection(pool, wait_s) as conn:
                return list(await conn.fetch(sql, *args))
        except db_errors() as exc:
            if attempt or not not_sent(exc):
                raise
    raise AssertionError("unreachable")


@contextlib.asynccontextmanager
async def transaction(pool: Any, wait_s: float | None) -> AsyncIterator[Any]:
    """A connection of ``pool`` inside a transaction, committed when the block ends and
    rolled back when it raises. A ``BEGIN`` that met a connection the server had ended
    (``not_sent``: nothing was sent) is begun once more on another connection."""
    for attempt in range(2):
        async with replaced_if_read_only(pool), connection(pool, wait_s) as conn:
            tx = conn.transaction()
            try:
                await tx.start()
            except db_errors() as exc:
                if attempt or not not_sent(exc):
                    raise
                continue
            try:
                yield conn
            except BaseException as exc:
                await tx.__aexit__(type(exc), exc, exc.__traceback__)
                raise
            await tx.__aexit__(None, None, None)
            return


def not_sent(exc: BaseException) -> bool:
    """Whether ``exc`` says the statement was never sent: asyncpg refused to begin it on a
    connection whose protocol was still consuming the server's parting error (the server
    ended the connection: a restart, ``pg_terminate_backend``)."""
    import asyncpg

    return (
        isinstance(exc, (asyncpg.InterfaceError, asyncpg.InternalClientError))
        and _ENDED.search(str(exc)) is not None
    )


@contextlib.asynccontextmanager
async def replaced_if_read_only(pool: Any) -> AsyncIterator[None]:
    """A write inside that a server taking no writes refused (a standby: after a failover,
    a stale DNS name or a proxy may still point to it) makes the pool replace its
    connections, each as it is next released, so the next try connects where the DSN
    points now; the pool kept them, and every write on them went on failing."""
    try:
        yield
    except db_errors() as exc:
        if getattr(exc, "sqlstate", None) == READ_ONLY:
            await pool.expire_connections()
        raise


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def lock_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for ``parts`` (the schema first, so two schemas in
    one database never share a lock)."""
    digest = hashlib.sha1("\0".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def split_schema(dsn: str, schema: str | None) -> tuple[str, str | None]:
    """``dsn`` without its ``schema`` query parameter (ours, not asyncpg's: the server would
    refuse it as a setting), and the schema to use: ``schema``, else the URL's. A URL and a
    ``schema`` that name two schemas is a ``ConfigurationError``."""
    try:
        parts = urlsplit(dsn)
    except ValueError:
        return dsn, schema  # asyncpg says what is wrong with it when it connects
    query = parse_qsl(parts.query, keep_blank_values=True)
    _refuse_unsendable(dsn, parts, query, schema)
    named = [value for key, value in query if key == "schema"]
    if not named:
        return dsn, schema
    in_url = named[-1] or None
    if schema is not None and in_url is not None and schema != in_url:
        raise ConfigurationError(
            f"two schemas for one PostgreSQL backend: schema={schema!r}, and ?schema="
            f"{in_url!r} in {redacted(dsn)}; give one"
        )
    rest = urlencode([(key, value) for key, value in query if key != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema if schema is not None else in_url


def _refuse_unsendable(
    dsn: str, parts: SplitResult, query: list[tuple[str, str]], schema: str | None
) -> None:
    """A ``ConfigurationError`` naming the part of a PostgreSQL URL (or the ``schema``) that
    cannot be sent: a NUL (``%00``), which PostgreSQL names hold none of (the server answered
    with "invalid startup packet layout", read as a store that "could not open"), or a lone
    surrogate, which no encoder takes (asyncpg failed with a bare ``AttributeError``)."""
    named = [
        ("user", unquote(parts.username or "")),
        ("password", unquote(parts.password or "")),
        ("host", unquote(parts.hostname or "")),
        ("database", unquote(parts.path)),
        *((key if key == "schema" else f"option {key!r}", value) for key, value in query),
        ("schema", schema or ""),
    ]
    for part, value in named:
        if "\x00" in value:
            raise ConfigurationError(
                f"PostgreSQL URL {redacted(dsn)}: its {part} holds a NUL (%00), which no "
                "PostgreSQL name or setting can hold"
            )
        if not encodes_as_utf8(value):  # asyncpg's connect failed on it with a bare error
            shown = redacted(dsn).encode("utf-8", "backslashreplace").decode()  # printable
            raise ConfigurationError(
                f"PostgreSQL URL {shown}: its {part} holds a lone surrogate (bytes "
                "that were no UTF-8, as an environment variable of Latin-1 bytes reads), "
                "which no connection can send; give it as UTF-8 text"
            )


async def open_pool(
    dsn: str,
    *,
    schema: str | None,
    min_size: int,
    max_size: int,
    command_timeout: float | None,
    settings: dict[str, str] | None = None,
    create_schema: bool = True,
) -> tuple[Any, str]:
    """A connection pool whose connections use ``schema`` (created if missing, unless
    ``create_schema`` is false: then a missing one is a ``StoreError``; None: the DSN's own
    search path) and the server ``settings`` given, and the name of the schema they write
    to."""
    import asyncpg

    settings = dict(settings or {})
    if schema:
        settings["search_path"] = quote_ident(schema)
    if schema:
        conn = await asyncpg.connect(dsn)
        try:
            # Looked up first: CREATE needs a privilege a user of an existing schema may lack.
            # Two processes creating it at once: one of them meets a unique violation.
            if not await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema):
                if not create_schema:
                    raise StoreError(
                        f"no schema {schema!r} in the database at {redacted(dsn)} (nothing "
                        "was created; is the runtime's store URL the same?)"
                    )
                with contextlib.suppress(asyncpg.UniqueViolationError):
                    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        finally:
            await conn.close()
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        command_timeout=command_timeout,
        server_settings=settings or None,
        reset=_keep,
    )
    try:
        current = await pool.fetchval("SELECT current_schema()")
        if current is None:
            raise StoreError(
                "the connection has no schema to write to: its search_path names none that "
                "exists; pass schema=... or fix the DSN"
            )
    except BaseException:
        await pool.close()
        raise
    return pool, str(current)


async def close_pool(pool: Any, wait_s: float | None) -> None:
    """Close ``pool`` gracefully, ``wait_s`` seconds at most (None: as long as it takes),
    then terminate what is left: asyncpg's ``close`` waits for every connection to be given
    back and for the server to see each one's end, with no limit of its own, so closing on a
    stalled server hung. Whatever was committed stays; a call still under way past the wait
    fails as on a dropped connection."""
    try:
        await asyncio.wait_for(pool.close(), wait_s)
    except TimeoutError:
        pool.terminate()


async def _keep(conn: Any) -> None:
    """The pool's reset between two uses of a connection: nothing. asyncpg's default costs a
    round trip per use (UNLISTEN, RESET ALL, unlock all advisory locks...), and pooled
    connections here never LISTEN, change settings or hold a session lock (the LISTEN and
    lease connections are separate, unpooled)."""


async def migrate(
    conn: Any,
    schema: str,
    component: str,
    migrations: list[tuple[int, str]],
    *,
    url: str = "",
) -> None:
    """Apply the migrations of ``component`` not yet recorded in ``tinyagents_migrations``,
    in one transaction; processes racing on it wait for each other (an advisory lock). A
    table of one of its names that another program made is a ``StoreError`` saying so, and
    so is a version recorded past the last of ``migrations`` (a newer tinyagents made the
    tables: this code would misread them); ``url`` (redacted) names the database in it."""
    import asyncpg

    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_key(schema, "migrations"))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS tinyagents_migrations ("
            " component TEXT NOT NULL, version INTEGER NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
            " PRIMARY KEY (component, version))"
        )
        rows = await conn.fetch(
            "SELECT version FROM tinyagents_migrations WHERE component = $1", component
        )
        done = {r[0] for r in rows}
        known = max(version for version, _ in migrations)
        if done and max(done) > known:  # raised inside the transaction: nothing is kept
            raise StoreError(
                f"PostgreSQL: the {component} tables in schema {schema!r}"
                f"{f' of the database at {url}' if url else ''} were made by a newer version"
                f" of tinyagents ({component} schema version {max(done)}; this version knows"
                f" up to {known}): use that version or a later one (nothing was changed)"
            )
        for version, script in migrations:
            if version in done:
                continue
            try:
                await conn.execute(script)
            except asyncpg.DuplicateTableError as exc:  # rolled back, with the migration
                raise StoreError(
                    f"PostgreSQL: cannot make the {component} tables in schema {schema!r}:"
                    f" {first_line(exc)}, a table not made by tinyagents (another program's?);"
                    f" nothing was changed: keep the {component} in a schema of its own"
                    " (?schema=name)"
                ) from exc
            await conn.execute(
                "INSERT INTO tinyagents_migrations (component, version) VALUES ($1, $2)",
                component,
                version,
            )


@contextlib.asynccontextmanager
async def mapped_errors(what: str, *, command_timeout: float | None = None) -> AsyncIterator[None]:
    """Raise a database failure inside as ``StoreError`` ("PostgreSQL: could not <what>");
    ``command_timeout``: that of the calls inside, named when one runs out."""
    try:
        yield
    except StoreError:
        raise
    except db_errors() as exc:
        raise StoreError(f"PostgreSQL: could not {what}: {said(exc, command_timeout)}") from cause(
            exc
        )


def said(exc: BaseException, timeout: float | None = None) -> str:
    """What ``exc`` says, in a ``StoreError``: its first line; asyncpg's bare
    ``TimeoutError`` (a statement past ``command_timeout``, or a connection not made in
    time) says what ran out."""
    if isinstance(exc, TimeoutError) and not str(exc).strip():
        within = f"within command_timeout ({timeout:g} s)" if timeout is not None else "in time"
        return (
            f"TimeoutError: no answer from the server {within}, or in connecting to it (a "
            "stalled or unreachable server, or a lock another connection holds)"
        )
    if _ENDED.search(str(exc)):
        return (
            f"{type(exc).__name__}: the server ended the connection (a restart, a failover, "
            "pg_terminate_backend); the statement was not sent"
        )
    return first_line(exc)


#: asyncpg's words for a statement begun on a connection whose protocol is consuming the
#: server's parting error (state 2): it ended the connection, and the statement was not sent.
_ENDED = re.compile(r"cannot switch to state \d+; another operation \(2\) is in progress")
