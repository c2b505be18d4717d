"""The ``serve`` and ``token`` subcommands of the ``tinyagents`` command.

    tinyagents serve [--host 127.0.0.1] [--port 8000] [--store sqlite:///tinyagents.db] [--demo]
    tinyagents token mint --tenant acme --user alice --rights agent:observe,agent:control
    tinyagents token attenuate TOKEN [--observe-only] [--run RUN_ID] [--ttl SECONDS]

``token`` finds the key as ``serve`` does (``--key-file``, ``TINYAGENTS_SERVER_KEY``, the file
beside the ``--store`` SQLite file), so a token minted for a store is accepted by the server
serving it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sys
from pathlib import Path
from typing import IO, Any

from tinyagents.errors import AuthError, ConfigurationError, StoreError
from tinyagents.server.auth import KEY_ENV, RIGHTS, Auth, check_claims, default_key_file
from tinyagents.server.serve import DEFAULT_STORE, ServeOptions, serve
from tinyagents.store.urls import redacted

#: The optional libraries a command may need, and the extra that installs each.
EXTRAS = {
    "fastapi": "server",
    "starlette": "server",
    "uvicorn": "server",
    "biscuit_auth": "server",
    "httpx": "server",
    "redis": "redis",
    "asyncpg": "postgres",
}


def missing_extra(exc: ImportError) -> str | None:
    """One line naming the extra to install for ``exc`` (None: not an optional library)."""
    module = (exc.name or "").partition(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return None
    return f"{module} is not installed: install 'tinyagents[{extra}]'"


def _require(*modules: str) -> None:
    """Fail before anything is created (a store file, a key file) when a library is missing."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def add_commands(sub: Any) -> None:
    """Add ``serve`` and ``token`` to the ``tinyagents`` subparsers."""
    srv = sub.add_parser(
        "serve",
        help="serve the operator API and web console (uvicorn)",
        description="Serve the operator HTTP API (/api/agents) and the web console (/) over a "
        "runtime on --store. Prints the URL and an operator token.",
    )
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    srv.add_argument("--port", type=int, default=8000, help="port (8000; 0 takes a free one)")
    srv.add_argument("--store", default=DEFAULT_STORE, help=f"the runs' store ({DEFAULT_STORE})")
    srv.add_argument(
        "--key-file",
        default=None,
        help="the token signing key (hex; created mode 0600 if missing). Default: "
        "TINYAGENTS_SERVER_KEY, else the file beside the SQLite store (FILE.db.server-key)",
    )
    srv.add_argument(
        "--demo", action="store_true", help="keep the demo's agents running, slowly, to try it"
    )
    srv.add_argument(
        "--insecure-dev",
        action="store_true",
        help="no tokens (everyone is an admin): loopback --host only (127.0.0.1, ::1, localhost)",
    )
    srv.add_argument("--tenant", default="default", help="tenant of the printed token")
    srv.add_argument("--user", default="operator", help="user of the printed token")
    srv.add_argument("--workers", type=int, default=1, help="worker processes sharing the port (1)")
    srv.add_argument(
        "--redis", default=None, help="Redis URL the workers share for control (docs/deploy.md)"
    )
    srv.add_argument("--redis-prefix", default="tinyagents", help="key prefix in Redis")

    tok = sub.add_parser("token", help="mint or attenuate operator API tokens")
    tsub = tok.add_subparsers(dest="token_command", required=True)
    mint = tsub.add_parser(
        "mint",
        help="mint a token for a user of a tenant",
        description="Mint a Biscuit token for the operator API, signed with the server's key.",
    )
    mint.add_argument("--tenant", required=True)
    mint.add_argument("--user", required=True)
    mint.add_argument(
        "--rights",
        default="agent:observe",
        help=f"comma separated, of {', '.join(RIGHTS)} (default agent:observe)",
    )
    mint.add_argument("--ttl", type=float, default=None, help="lifetime in seconds")
    att = tsub.add_parser(
        "attenuate",
        help="narrow a token (reading only, one run and below, a lifetime)",
        description="Append a block of checks to a token: the result can do less, never more.",
    )
    att.add_argument("token")
    att.add_argument("--observe-only", action="store_true", help="it may only read")
    att.add_argument("--run", default=None, help="only this run and the runs below it")
    att.add_argument("--ttl", type=float, default=None, help="lifetime in seconds")
    for p in (mint, att):
        p.add_argument("--store", default=DEFAULT_STORE, help="the server's store (finds the key)")
        p.add_argument("--key-file", default=None, help="the server's key file")


def run_command(args: argparse.Namespace, out: IO[str] = sys.stdout) -> int | None:
    """Run ``serve`` or ``token`` (None for another command). Exit code 2 for bad input."""
    if args.command not in ("serve", "token"):
        return None
    try:
        if args.command == "serve":
            _require("fastapi", "uvicorn", *(() if args.insecure_dev else ("biscuit_auth",)))
            if args.redis is not None:
                _require("redis")
            options = ServeOptions(
                host=args.host,
                port=args.port,
                store=args.store,
                key_file=args.key_file,
                insecure_dev=args.insecure_dev,
                demo=args.demo,
                tenant=args.tenant,
                user=args.user,
                workers=args.workers,
                redis=args.redis,
                redis_prefix=args.redis_prefix,
            )
            try:
                return asyncio.run(serve(options, out))
            except KeyboardInterrupt:
                return 0
        _require("biscuit_auth")
        return token_command(args, out)
    except (ConfigurationError, AuthError, StoreError) as exc:  # StoreError: cannot open it
        print(f"tinyagents {args.command}: {exc}", file=sys.stderr)
        return 2


def token_command(args: argparse.Namespace, out: IO[str]) -> int:
    if args.token_command == "mint":  # before the key: a refused mint makes no key file
        rights = [r.strip() for r in args.rights.split(",") if r.strip()]
        check_claims(user=args.user, tenant=args.tenant, rights=rights, ttl_s=args.ttl)
    elif args.key_file is not None and not _holds_key(Path(args.key_file)):
        # a new key in a mistyped path could read no token: attenuate never makes one
        raise ConfigurationError(
            f"no key file at {args.key_file!r}: attenuate reads the token with the server's "
            "key; give the --key-file the server uses. Nothing was written"
        )
    elif not _key_at_hand(args):
        # looking the default store's key up would make a new key (and refuse the token)
        raise ConfigurationError(
            f"no server key at hand for {redacted(args.store)!r}: attenuate reads the token with the "
            "server's key; give the server's --store (its key sits beside it), --key-file "
            "FILE or TINYAGENTS_SERVER_KEY. Nothing was written"
        )
    auth = Auth.resolve(store=args.store, key_file=args.key_file)
    if auth is None:
        raise ConfigurationError(
            f"no server key for the store {redacted(args.store)!r}: give --key-file FILE, set "
            "TINYAGENTS_SERVER_KEY, or --store sqlite:///FILE.db (its key sits beside it)"
        )
    if args.token_command == "mint":
        token = auth.mint(user=args.user, tenant=args.tenant, rights=rights, ttl_s=args.ttl)
    else:
        token = auth.attenuate(
            args.token, observe_only=args.observe_only, run_id=args.run, ttl_s=args.ttl
        )
    out.write(token + "\n")
    return 0


def _key_at_hand(args: argparse.Namespace) -> bool:
    """Whether a server key is configured for ``token``: a key file given, the environment's
    key, or an existing key file beside the store (never created here)."""
    if args.key_file is not None or os.environ.get(KEY_ENV):
        return True
    path = default_key_file(args.store)
    return path is not None and _holds_key(path)


def _holds_key(path: Path) -> bool:
    """A key file there to read (an empty one holds no key: reading it would make one)."""
    return path.is_file() and path.stat().st_size > 0
