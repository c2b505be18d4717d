"""``tinyagents serve``: the operator API and console on uvicorn, over a runtime on a store.

    tinyagents serve                       # http://127.0.0.1:8000, store sqlite:///tinyagents.db
    tinyagents serve --demo                # with the demo's agents running, to click around
    tinyagents serve --insecure-dev        # no tokens at all: a loopback --host only
    tinyagents serve --workers 4 --redis redis://127.0.0.1:6379/0 --store postgresql://...
                                           # 4 processes on one port, each its own runtime,
                                           # sharing Redis for control (docs/deploy.md)

The server signs and checks tokens with the key ``Auth.resolve`` finds: ``--key-file``, else
``TINYAGENTS_SERVER_KEY``, else the file beside the SQLite store (created on first use, mode
0600), the same one ``tinyagents token mint --store ...`` uses. Without any key (a store that
is not a SQLite file) it refuses to start, unless ``--insecure-dev``.

uvicorn is imported inside the functions that need it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from tinyagents._record import Record
from tinyagents.distributed import RedisControl
from tinyagents.errors import AuthError, ConfigurationError, StoreError
from tinyagents.protocol.ids import shown_name
from tinyagents.runtime import Runtime
from tinyagents.server.app import BASE, create_app
from tinyagents.server.auth import (
    CONTROL_RIGHT,
    KEY_ENV,
    OBSERVE_RIGHT,
    Auth,
    check_claims,
    default_key_file,
)
from tinyagents.server.control import Control
from tinyagents.server.demo import env_think_s, start_demo
from tinyagents.server.loopback import is_loopback
from tinyagents.server.workers import Reports, run_workers
from tinyagents.store.memory import MemoryStore
from tinyagents.store.open import open_store
from tinyagents.store.urls import redacted

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

DEFAULT_STORE = "sqlite:///tinyagents.db"
#: Seconds uvicorn waits for open connections (event streams) when it stops.
GRACEFUL_S = 1.0
#: The largest request head (request line and headers) the transport reads before handing
#: the request to the app: 256 KiB, four times ``app.MAX_TOKEN_BYTES``, so a token or a path
#: past any the app takes still gets the app's JSON answer (401, 404, 422). A head past it
#: is refused by uvicorn itself, a plain-text 400, and a client still sending it may see the
#: connection reset instead. (h11 checks only a head still incomplete after a read, so one
#: delivered in a single read of up to 256 KiB more may pass; below the bound every head
#: does.) Without it h11's default, 16 KiB, applied: a 20 KB token arriving in pieces got
#: the 400 while the same token in one piece got the 401.
MAX_REQUEST_HEAD_BYTES = 256 * 1024


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class ServeOptions(Record):
    """What ``tinyagents serve`` was asked for: where to listen, the store, the keys, the
    workers."""

    host: str = "127.0.0.1"
    port: int = 8000
    store: str = DEFAULT_STORE
    key_file: str | None = None
    insecure_dev: bool = False
    demo: bool = False
    tenant: str = "default"
    user: str = "operator"
    #: Worker processes sharing the port. They find each other's runs in the store (its
    #: inbox carries commands, polled every ~50 ms) and, with ``redis``, over Redis.
    workers: int = 1
    redis: str | None = None
    redis_prefix: str = "tinyagents"


#: The URL schemes the Redis client takes (another one raises deep inside it).
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one); ``ConfigurationError`` when
    the address is taken or not this machine's, or blank (which a socket takes for every
    interface: an unset ``--host "$HOST"`` must not put the server on the network)."""
    if not host.strip():
        raise ConfigurationError(
            f"--host {host!r} is a blank host, which listens on every interface: name the "
            "address (127.0.0.1 for this machine only, 0.0.0.0 for every interface)"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # without it a kept-alive connection waits ~40 ms per response (Nagle and delayed ACKs).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except (OSError, OverflowError) as exc:  # OverflowError: a port outside 0-65535
        sock.close()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigurationError(
            f"cannot listen on {host}:{port} ({reason}); pick another --port "
            "(0 takes a free one) or --host"
        ) from None
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def serving(app: FastAPI, sock: socket.socket) -> AsyncIterator[Any]:
    """uvicorn serving ``app`` on ``sock`` in this event loop, as a task of its own; stopped
    (open connections given ``GRACEFUL_S``) when the block ends. Yields the ``uvicorn.Server``
    (its ``should_exit`` stops it, as Ctrl+C does)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # The caller decides what a signal does (``serve`` stops on Ctrl+C); uvicorn's
            # own handlers would raise the signal again once it stopped.
            yield

    server = Server(uvicorn_config(app))
    task = asyncio.create_task(server.serve(sockets=[sock]), name="tinyagents-uvicorn")
    try:
        while not server.started:
            if task.done():
                task.result()  # raises why it could not start
                raise ConfigurationError("the server stopped while starting")
            await asyncio.sleep(0.01)
        yield server
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task


def uvicorn_config(app: Any) -> uvicorn.Config:
    """How ``serving`` runs uvicorn: h11 chosen explicitly, with its head bound set to
    ``MAX_REQUEST_HEAD_BYTES``. uvicorn's "auto" picks httptools when it is installed, and
    uvicorn sets no bound on a head there: the same server would take heads of any size on
    one machine and refuse 16 KiB ones on another."""
    import uvicorn

    return uvicorn.Config(
        app,
        http="h11",
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=int(GRACEFUL_S) or 1,
    )


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):
        shown = "127.0.0.1"
    return f"http://{shown}:{port}"


#: The rights of the operator token ``serve`` prints.
_OPERATOR_RIGHTS = (OBSERVE_RIGHT, CONTROL_RIGHT)


def resolve_auth(options: ServeOptions) -> Auth | None:
    """The key the server signs with, or None for ``--insecure-dev``; refuses what would be
    an open server."""
    if options.insecure_dev:
        if not is_loopback(options.host):
            raise ConfigurationError(
                "--insecure-dev serves without tokens, so it binds a loopback address only "
                f"(127.0.0.1, ::1 or localhost); drop --host {options.host} (or drop "
                "--insecure-dev and use tokens)"
            )
        return None
    auth = Auth.resolve(store=options.store, key_file=options.key_file)
    if auth is None:
        raise ConfigurationError(
            f"no server key for the store {redacted(options.store)!r}: set TINYAGENTS_SERVER_KEY (an "
            "Ed25519 private key in hex) or --key-file FILE (created if missing); or, on "
            "your own machine only, --insecure-dev"
        )
    return auth


#: ``--workers`` takes at most this many per CPU (or ``_MIN_MAX_WORKERS``, if more): each is a
#: Python process of its own, started one after another, so a slip (``--workers 100000``)
#: started tens a second until the machine ran out of memory.
_WORKERS_PER_CPU = 8
_MIN_MAX_WORKERS = 64


def max_workers() -> int:
    """The most worker processes ``serve`` starts on this machine."""
    return max(_MIN_MAX_WORKERS, _WORKERS_PER_CPU * (os.cpu_count() or 1))


async def serve(options: ServeOptions, out: IO[str] = sys.stdout) -> int:
    """Run the server until Ctrl+C (or SIGTERM); 0 when it stopped cleanly."""
    if options.workers < 1:
        raise ConfigurationError(f"--workers must be 1 or more, got {options.workers}")
    if options.workers > max_workers():
        raise ConfigurationError(
            f"--workers {options.workers} is more than this machine runs (at most "
            f"{max_workers()}: {_WORKERS_PER_CPU} per CPU, or {_MIN_MAX_WORKERS}); each worker "
            "is a process with its own runtime, and one serves many runs at once"
        )
    if options.demo:
        env_think_s()  # refused before anything is made, as every setting is
    if not options.insecure_dev:  # the printed token's: refused before anything is made
        check_claims(user=options.user, tenant=options.tenant, rights=_OPERATOR_RIGHTS)
    if options.workers > 1 and isinstance(open_store(options.store), MemoryStore):
        raise ConfigurationError(
            f"--workers {options.workers} with a memory store: it lives in one process, so each "
            "worker would list and steer only its own runs; give them a shared store "
            "(--store sqlite:///FILE)"
        )
    if options.redis is not None and not options.redis.startswith(_REDIS_SCHEMES):
        raise ConfigurationError(
            f"--redis {redacted(options.redis)!r} is not a Redis URL: use redis://HOST:PORT/DB "
            "(or rediss://, unix://)"
        )
    if options.insecure_dev and options.host.strip():  # (a blank one: bind says why)
        resolve_auth(options)  # refuses a host that is not loopback before it is bound
    # Bound before the store is opened and the key resolved: a port it cannot take must not
    # leave a store or a key file created for a server that never ran.
    sock = bind(options.host, options.port)
    try:
        await _check_store(options.store)
        auth = resolve_auth(options)
    except BaseException:
        sock.close()
        raise
    if options.workers > 1:
        return await run_workers(
            _worker_main,
            [(options, sock, i) for i in range(options.workers)],
            started=lambda: _announce(options, auth, url_of(sock), out),
        )
    return await serve_worker(options, sock, 0, out)


async def _check_store(url: str) -> None:
    """Open the store once before a key is made for it: a URL that names no store was told it
    had "no server key", and a file that is no database got a key file beside it."""
    store = open_store(url)
    await store.open()
    await store.close()


def _worker_main(options: ServeOptions, sock: socket.socket, index: int, reports: Reports) -> int:
    """A worker process of ``serve --workers N``: it reports to the parent when it serves (the
    parent announces the server) or why it cannot (a bad store, ...: one line, exit code 2)."""
    try:
        return asyncio.run(
            serve_worker(options, sock, index, None, ready=reports.ready, parent=os.getppid())
        )
    except (ConfigurationError, AuthError, StoreError) as exc:
        reports.failed(str(exc))
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # Ctrl+C reaches the whole process group: the parent stops us
        return 0


async def serve_worker(
    options: ServeOptions,
    sock: socket.socket,
    index: int,
    out: IO[str] | None,
    *,
    ready: Callable[[], None] | None = None,
    parent: int | None = None,
) -> int:
    """One worker: a runtime (and its seat on Redis, with ``--redis``) serving on ``sock``;
    ``out``: where to announce the server (``None``: the parent process does); ``ready``:
    called once it serves; ``parent``: the pid of the ``serve`` that started it, which it
    outlives by a tick at most (killed outright, it can stop no worker)."""
    auth = resolve_auth(options)
    worker_id = f"{socket.gethostname()}-{sock.getsockname()[1]}-{index}"
    async with (
        Runtime(store=options.store) as runtime,
        RedisControl(
            runtime, options.redis, worker_id=worker_id, prefix=options.redis_prefix
        ) as redis,
    ):
        control = Control(runtime, redis=redis)
        app = create_app(control, auth=auth)
        demo = _start_demo(runtime, options.tenant) if options.demo and index == 0 else None
        try:
            async with serving(app, sock) as server:
                if out is not None:
                    _announce(options, auth, url_of(sock), out)
                if ready is not None:
                    ready()
                _stop_on_signals(server)
                while not server.should_exit:
                    if parent is not None and os.getppid() != parent:
                        server.should_exit = True  # its parent is gone: nobody runs it now
                    if demo is not None and demo.done():
                        demo.result()  # the demo failed: say why, and stop
                    await asyncio.sleep(0.2)
                control.end_streams()  # open consoles' streams close before the grace ends
        finally:
            if demo is not None:
                demo.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await demo
            control.close()
    return 0


def _start_demo(runtime: Runtime, tenant: str) -> asyncio.Task[None]:
    return start_demo(runtime, tenant_id=tenant)


def _stop_on_signals(server: Any) -> None:
    """Ctrl+C or SIGTERM stops the server (a second Ctrl+C drops open connections)."""
    loop = asyncio.get_running_loop()

    def stop() -> None:
        server.force_exit = server.should_exit
        server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop)


def _announce(options: ServeOptions, auth: Auth | None, url: str, out: IO[str]) -> None:
    shown_store = redacted(options.store)  # a terminal's scrollback is no place for a password
    lines = [f"tinyagents serve: the operator console and API at {url}/"]
    if auth is None:
        lines += [
            "  INSECURE DEV MODE: no token is asked; anyone on this machine can steer every run",
            f"  console:  {url}/",
        ]
    else:
        token = auth.mint(user=options.user, tenant=options.tenant, rights=_OPERATOR_RIGHTS)
        # how ``token mint`` finds this key: the file given, the environment's key, or the
        # store's (beside its SQLite file); ``--store`` alone found no key on another store,
        # and on SQLite made a new one beside it, whose tokens this server refuses
        if options.key_file:
            key = shown_name(options.key_file)
            mint = f"tinyagents token mint --key-file {shlex.quote(options.key_file)} ..."
        elif os.environ.get(KEY_ENV):
            key = f"${KEY_ENV}"
            mint = f"tinyagents token mint ..., with ${KEY_ENV} set,"
        else:
            key = shown_name(str(default_key_file(options.store)))
            mint = f"tinyagents token mint --store {shlex.quote(shown_store)} ..."
        lines += [
            f"  console (signs you in):  {url}/#token={token}",
            f"  operator token (user {options.user}, tenant {options.tenant}, "
            f"{OBSERVE_RIGHT} {CONTROL_RIGHT}); send it as",
            f"    Authorization: Bearer {token}",
            f"  key: {key} ({shown_name(mint)} makes more)",
        ]
    lines += [
        f"  API:      {url}{BASE}  (OpenAPI {url}{BASE}/openapi.json, docs {url}{BASE}/docs)",
        f"  store:    {shown_store}" + ("  (demo runs: on)" if options.demo else ""),
        "  Ctrl+C stops the server.",
    ]
    out.write("\n".join(lines) + "\n")
    out.flush()
