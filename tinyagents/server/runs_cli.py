"""``tinyagents runs list|show|tree|steer|pause|resume|cancel|approve``: the operator's CLI.

It talks either to a server (``--url http://127.0.0.1:8000``, with the token in
``TINYAGENTS_TOKEN``) or straight to a store file that a running script's runtime writes
(``--store sqlite:///runs.db``): commands then go through the store's inbox to the runtime
that owns the run, which answers with its receipt. Tables for people, ``--json`` for scripts.

Exit codes: 0 done (a receipt ``accepted``/``duplicate``/``deferred``), 1 refused (a receipt
``rejected``, an unknown run), 2 could not ask (bad arguments, no server, no store file,
no answer in time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, quote, urlsplit

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from tinyagents.console import TerminalConsole
from tinyagents.errors import DamagedData, ReceiptTimeout, TinyAgentsError
from tinyagents.protocol.commands import (
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.protocol.ids import id_problem, shown_id, shown_name
from tinyagents.protocol.state import RunStatus
from tinyagents.server.control import Control, command_target, decode_cursor, task_entry
from tinyagents.store.open import open_store
from tinyagents.store.sqlite import SqliteStore
from tinyagents.store.urls import is_sqlite_url, redacted, sqlite_path

#: Where the operator API lives under a server's URL (as ``tinyagents.server.app.BASE``).
API_BASE = "/api/agents"
TOKEN_ENV = "TINYAGENTS_TOKEN"
ACTIONS = ("list", "show", "tree", "steer", "pause", "resume", "cancel", "approve")
#: Runs ``runs list`` shows unless ``--limit`` or ``--all`` says otherwise.
LIST_LIMIT = 100
#: The most runs one request asks for (the server's largest page).
PAGE = 1000
_DONE = {ReceiptStatus.ACCEPTED.value, ReceiptStatus.DUPLICATE.value, ReceiptStatus.DEFERRED.value}


class CliError(Exception):
    """What to tell the operator (one line) when the CLI could not ask."""


class RootNotFound(Exception):
    """``list --root`` names a run the caller cannot see: "not found", as ``show`` says."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


def _seconds(text: str) -> float:
    """A ``--timeout``: positive and finite (NaN made the HTTP client raise, a negative one
    failed every request at once with an empty message)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _correlation_id(text: str) -> str:
    """A ``--correlation-id``: not blank (an empty one was dropped for a generated id, so a
    retry under the same unset variable was a new command, applied again)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "must not be blank: give the id to retry under, or leave it out for a new one"
        )
    return text


def _name(text: str) -> str:
    """A ``--tenant``, ``--user`` or ``--interrupt``: not blank (an unset variable gave "", a
    tenant that owns nothing: every run was "not found", as if the store were empty; an
    interrupt no run has, reported beside the one question there was); each is an id, so
    one with a control character is refused too."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be blank: name one, or leave the option out")
    problem = id_problem(text)  # each is an id (of a tenant, an actor, an interrupt)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{shown_id(repr(text))}: {problem}")
    return text


def run_id_arg(text: str) -> str:
    """A ``RUN_ID`` or ``--root``: not blank (an unset variable gave "", which over --url
    was blamed on the URL, the path ``/runs//pause`` being no endpoint)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "must not be blank: give a run id (tinyagents runs list shows them)"
        )
    return text


def add_runs_command(sub: Any) -> None:
    """Add ``runs`` and its actions to the ``tinyagents`` argument parser."""
    where = argparse.ArgumentParser(add_help=False)
    target = where.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--store",
        metavar="URL",
        help="a store a running runtime writes, e.g. sqlite:///runs.db (commands reach the "
        "run's owner through it)",
    )
    target.add_argument(
        "--url",
        help=f"a tinyagents server, e.g. http://127.0.0.1:8000 (token from ${TOKEN_ENV})",
    )
    where.add_argument("--json", action="store_true", help="print JSON instead of tables")
    where.add_argument(
        "--tenant",
        type=_name,
        default=None,
        help="with --store: see and act as this tenant only (default: every tenant, "
        "acting in the run's own tenant; whoever can write the store file is its admin)",
    )
    where.add_argument(
        "--user",
        type=_name,
        default=None,
        help="with --store: the user named in the commands' audit trail (default: $USER)",
    )
    where.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        help="seconds to wait for the run's owner to answer a command (default 10; with "
        "--url, for the server's answer: the server waits for the owner itself)",
    )
    runs = sub.add_parser(
        "runs",
        help="list, inspect and steer live runs (of a server, or of a store file)",
        description="See and steer live runs from outside their process: through a server "
        f"(--url, token in ${TOKEN_ENV}) or a store file a runtime writes (--store).",
    )
    actions = runs.add_subparsers(dest="runs_action", required=True)
    listing = actions.add_parser("list", parents=[where], help="the runs, newest first")
    listing.add_argument(
        "--status",
        action="append",  # repeated: any of them, as the API's ?status= (not the last alone)
        default=None,
        choices=[status.value for status in RunStatus],
        help="only runs in this status (repeat: in any of them)",
    )
    listing.add_argument(
        "--root", type=run_id_arg, default=None, help="only the runs of this tree (a root id)"
    )
    pages = listing.add_mutually_exclusive_group()
    pages.add_argument(
        "--limit",
        type=_count,
        default=LIST_LIMIT,
        help=f"at most this many runs, the newest (default {LIST_LIMIT}); when there are "
        "more, stderr says how to list the next ones",
    )
    pages.add_argument("--all", action="store_true", help="every run, page after page")
    listing.add_argument(
        "--cursor",
        default=None,
        help="start after the runs listed before (the cursor a previous list printed)",
    )
    for name, text in (("show", "one run's snapshot"), ("tree", "a run and its descendants")):
        actions.add_parser(name, parents=[where], help=text).add_argument("run_id", type=run_id_arg)
    steer = actions.add_parser("steer", parents=[where], help="send the run an instruction")
    steer.add_argument("run_id", type=run_id_arg)
    steer.add_argument("message", help="the instruction, e.g. 'focus on billing'")
    for name, text in (
        ("pause", "pause the run at its next safe boundary"),
        ("resume", "resume a paused run"),
        ("cancel", "stop the run for good"),
    ):
        act = actions.add_parser(name, parents=[where], help=text)
        act.add_argument("run_id", type=run_id_arg)
        act.add_argument("--reason", default=None, help="why (kept in the audit trail)")
    approve = actions.add_parser(
        "approve", parents=[where], help="answer a graph run's pending interrupt"
    )
    approve.add_argument("run_id", type=run_id_arg)
    approve.add_argument(
        "--interrupt",
        type=_name,
        default=None,
        help="the interrupt id (needed when several are pending)",
    )
    approve.add_argument(
        "--value", default=None, help="a JSON value handed to the task with the answer"
    )
    approve.add_argument("--reason", default=None, help="why (handed to the task too)")
    approve.add_argument("--reject", action="store_true", help="reject instead of approve")
    for act in (steer, approve, *(actions.choices[n] for n in ("pause", "resume", "cancel"))):
        act.add_argument(
            "--correlation-id",
            type=_correlation_id,
            default=None,
            help="the command's id: send the same id again to retry safely (applied once)",
        )


def run_runs_command(args: argparse.Namespace) -> int | None:
    """Run ``tinyagents runs ...``; None when ``args`` is another command."""
    if args.command != "runs":
        return None
    console = TerminalConsole(soft_wrap=True)
    try:
        if getattr(args, "value", None) is not None:
            _json_value(args.value)  # a bad --value is told before any store or server is asked
        return asyncio.run(_run(args, console))
    except (CliError, TinyAgentsError) as exc:  # a command the store's side refused, too
        # soft_wrap: one line whatever the terminal's width (scripts grep it).
        TerminalConsole(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(exc))}")
        return 2


class Client(Protocol):
    async def list_runs(
        self, statuses: list[str], root: str | None, *, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of runs, newest first, and the cursor of the next (None: the last);
        ``RootNotFound`` when there is no ``root`` run the caller may see."""
        ...

    async def get_run(self, run_id: str) -> dict[str, Any] | None: ...
    async def listed_run(self, run_id: str) -> dict[str, Any] | None:
        """``get_run`` for a run about to be sent a command: one another process has just
        started is waited for (as the command itself is) before it is "not found"."""
        ...

    async def tree(self, run_id: str) -> dict[str, Any] | None: ...
    async def command(
        self,
        run_id: str,
        kind: SteeringKind,
        payload: dict[str, Any],
        *,
        task_id: str | None = None,
        correlation_id: str | None = None,
    ) -> dict[str, Any]: ...


async def _run(args: argparse.Namespace, console: Console) -> int:
    if args.url is not None:
        return await _act(HttpClient(args.url, _token(), timeout_s=args.timeout), args, console)
    try:
        # create=False: a typo (a file, a PostgreSQL ?schema=) must not make an empty store
        store = open_store(_existing_store(args.store), create=False)
        if isinstance(store, SqliteStore):  # each wait for another process's lock
            store.busy_timeout_s = min(store.busy_timeout_s, args.timeout)
        # opening waits out a lock once per step (journal mode, each migration's retry): at
        # --timeout 2, a lock another process held kept the command for ~36 s
        async with asyncio.timeout(args.timeout):
            await store.open()
    except TimeoutError:
        raise CliError(
            f"the store {shown_name(redacted(args.store))} could not be opened within "
            f"--timeout {args.timeout:g} s: it is locked (another process holds it, e.g. in a "
            "long transaction); nothing was sent"
        ) from None
    except TinyAgentsError as exc:
        raise CliError(str(exc)) from exc
    try:
        control = Control(store=store, receipt_timeout_s=args.timeout)
        user = args.user or os.environ.get("USER") or "cli"
        return await _act(StoreClient(control, tenant_id=args.tenant, user=user), args, console)
    finally:
        await store.close()


async def _act(client: Client, args: argparse.Namespace, console: Console) -> int:
    action = args.runs_action
    if action == "list":
        try:
            runs, cursor = await _list(client, args)
        except RootNotFound as exc:
            return _not_found(console, args, exc.run_id)
        _print_json(console, runs) if args.json else console.print(runs_table(runs))
        if cursor is not None:
            TerminalConsole(stderr=True, soft_wrap=True).print(
                f"more runs: list the next ones with --cursor {cursor} (or every one with --all)",
                highlight=False,
            )
        return _damaged(runs, args)
    if action in ("show", "tree"):
        found = await (client.get_run if action == "show" else client.tree)(args.run_id)
        if found is None:
            return _not_found(console, args, args.run_id)
        if args.json:
            _print_json(console, found)
        else:
            console.print(run_panel(found) if action == "show" else run_tree(found))
        return 0
    try:
        kind, payload, task_id = await _command_of(client, args)
        if kind is None:
            return _not_found(console, args, args.run_id)
        receipt = await client.command(
            args.run_id, kind, payload, task_id=task_id, correlation_id=args.correlation_id
        )
    except ReceiptTimeout as exc:
        raise CliError(str(exc)) from exc
    except DamagedData as exc:  # (reading it again reads the same bytes: no wait helps)
        raise CliError(
            f"the stored record of run {args.run_id} is damaged and needs repairing; nothing "
            f"was sent: {exc}"
        ) from exc
    if args.json:
        _print_json(console, receipt)
    else:
        console.print(receipt_line(receipt))
    return 0 if receipt.get("status") in _DONE else 1


def _damaged(runs: list[dict[str, Any]], args: argparse.Namespace) -> int:
    """2, saying so in one line, when ``runs`` holds runs whose stored snapshot could not be
    read (listed with their ``error``, the others as ever); else 0."""
    errors = [r["error"] for r in runs if isinstance(r.get("error"), dict)]
    if not errors:
        return 0
    where = shown_name(redacted(args.store)) if args.store else shown_name(str(args.url))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    TerminalConsole(stderr=True, soft_wrap=True).print(
        f"{where}: could not read {len(errors)} stored run snapshot(s), listed with their "
        f"status alone: {errors[0].get('message')}{more}",
        highlight=False,
        markup=False,
    )
    return 2


async def _list(
    client: Client, args: argparse.Namespace
) -> tuple[list[dict[str, Any]], str | None]:
    """The runs ``list`` shows, page after page up to ``--limit`` (or all), and the cursor
    of the runs after them (None: there are none)."""
    runs: list[dict[str, Any]] = []
    cursor = args.cursor
    while True:
        want = PAGE if args.all else min(PAGE, args.limit - len(runs))
        page, cursor = await client.list_runs(
            args.status or [], args.root, limit=want, cursor=cursor
        )
        runs += page
        if cursor is None or (not args.all and len(runs) >= args.limit):
            return runs, cursor


async def _command_of(
    client: Client, args: argparse.Namespace
) -> tuple[SteeringKind | None, dict[str, Any], str | None]:
    """(kind, payload, graph task id) of the action; kind None for an unknown run."""
    action = args.runs_action
    if action == "steer":
        if not args.message.strip():
            raise CliError("the message is empty: say what the run should do")
        return SteeringKind.ADD_INSTRUCTION, {"text": args.message}, None
    payload: dict[str, Any] = {} if args.reason is None else {"reason": args.reason}
    if action != "approve":
        kinds = {"pause": SteeringKind.PAUSE, "resume": SteeringKind.RESUME}
        return kinds.get(action, SteeringKind.CANCEL), payload, None
    snap = await client.listed_run(args.run_id)
    if snap is None:
        return None, {}, None
    pending = _interrupts(snap)
    if task_entry(snap) and not pending:
        # a graph task's entry (listed `interrupted`): its graph run holds its questions
        graph = await client.listed_run(snap["parent_run_id"])
        asks = _interrupts(graph or {})
        pending = [i for i in asks if i.get("task_id") == snap["task_id"]]
        snap = {**snap, "interrupts": pending}
    if snap.get("kind", "agent") != "graph" and not pending:
        raise CliError(
            f"run {args.run_id} is an agent run: it has no interrupts to answer (only graph "
            "runs ask; steer, pause, resume or cancel it instead)"
        )
    if args.interrupt is not None:
        pending = [i for i in pending if i.get("id") == args.interrupt]
    if len(pending) != 1:
        ids = ", ".join(str(i.get("id")) for i in snap.get("interrupts") or []) or "none"
        wanted = f"interrupt {args.interrupt!r}" if args.interrupt else "one pending interrupt"
        raise CliError(
            f"run {args.run_id} has no {wanted} to answer (pending: {ids}); "
            "name one with --interrupt ID"
        )
    interrupt = pending[0]
    payload["interrupt_id"] = interrupt["id"]
    if args.value is not None:
        payload["value"] = _json_value(args.value)  # checked before anything was read
    kind = SteeringKind.REJECT if args.reject else SteeringKind.APPROVE
    return kind, payload, interrupt.get("task_id")


def _interrupts(snap: dict[str, Any]) -> list[dict[str, Any]]:
    """A run's pending interrupts, once they are the API's (each a mapping with an ``id``)."""
    pending = snap.get("interrupts") or []
    if not isinstance(pending, list) or not all(
        isinstance(i, dict) and isinstance(i.get("id"), str) for i in pending
    ):  # only a server that is not a tinyagents one lists interrupts of another shape
        raise CliError(
            f"run {snap.get('run_id')}'s interrupts are not the API's ({str(pending)[:80]}): "
            "is --url the address serve printed (http://HOST:PORT)?"
        )
    return pending


def _json_value(text: str) -> Any:
    """``--value`` as strict JSON: no ``NaN``/``Infinity``, no number past a float's range,
    no lone surrogate in a string (none of which survives the trip to a run), no key given
    twice in one object."""

    def constant(name: str) -> Any:
        raise CliError(f"--value is not JSON: {name} is not a JSON number")

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, item in pairs:
            if key in found:  # the API refuses such a body (400); here the last one won
                raise CliError(f"--value gives the key {key!r} twice in one object")
            found[key] = item
        return found

    try:
        value = json.loads(text, parse_constant=constant, object_pairs_hook=once)
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except json.JSONDecodeError as exc:
        raise CliError(f"--value is not JSON: {exc}") from exc
    except ValueError as exc:  # a number too large for a float (1e400 reads as inf)
        raise CliError(f"--value holds a number JSON cannot carry: {exc}") from exc
    except UnicodeEncodeError:
        raise CliError("--value holds a string that is not UTF-8 (a lone surrogate)") from None
    except RecursionError:
        raise CliError("--value is nested too deeply") from None
    return value


def _not_found(console: Console, args: argparse.Namespace, run_id: str) -> int:
    if args.json:
        _print_json(console, {"error": "not found", "run_id": run_id})
    else:
        console.print(f"[red]not found:[/red] run {escape(run_id)}")
    return 1


def _print_json(console: Console, value: Any) -> None:
    # On an ASCII stream, \u escapes keep the values (the console would show them as ``?``);
    # so they do for a lone surrogate (a model's or a tool's half UTF-16 pair), which no
    # UTF-8 stream can take: writing it raised.
    text = json.dumps(value, default=str)
    ascii_only = not console.encoding.startswith("utf")
    if not ascii_only:
        try:
            json.dumps(value, default=str, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            ascii_only = True
    console.print_json(text, ensure_ascii=ascii_only)


def _token() -> str:
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise CliError(
            f"set {TOKEN_ENV} to an operator token (the one 'tinyagents serve' prints, or "
            "'tinyagents token mint --tenant T --user U --rights agent:observe,agent:control')"
        )
    scheme, _, rest = token.partition(" ")
    if rest and scheme.lower() == "bearer":
        raise CliError(f"{TOKEN_ENV} starts with '{scheme} ': set it to the token alone")
    if not all("!" <= c <= "~" for c in token):
        # a token is URL-safe base64: a space, a control character or a letter outside ASCII
        # (a dash a word processor made) is a paste gone wrong, and httpx raised a
        # UnicodeEncodeError on the header (the token itself is not shown: it is a secret)
        raise CliError(
            f"{TOKEN_ENV} holds a space, a control character or a character outside ASCII, "
            "which no token has: set it to the token as minted"
        )
    return token


def _existing_store(url: str) -> str:
    """``url``, once it names a store that exists (a typo must not make an empty store)."""
    if is_sqlite_url(url):
        path = sqlite_path(url)
        if not Path(path).is_file():
            raise CliError(f"no store file at {path!r} (is the runtime's --store the same?)")
        return url
    if "://" not in url and Path(url).is_file():  # a plain path to a SQLite file
        return f"sqlite:///{url}"
    if "://" not in url:
        raise CliError(f"no store file at {url!r}; pass --store sqlite:///FILE")
    if url.startswith("memory"):
        raise CliError("a memory store lives in its own process only: pass --store sqlite:///FILE")
    return url


# ---------------------------------------------------------------------- clients


class StoreClient:
    """Reads a store; sends commands through its inbox to each run's owning runtime."""

    def __init__(self, control: Control, *, tenant_id: str | None, user: str) -> None:
        self.control = control
        self.tenant_id = tenant_id
        self.user = user

    async def list_runs(
        self, statuses: list[str], root: str | None, *, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        if cursor is not None:
            try:
                decode_cursor(cursor)
            except ValueError as exc:
                raise CliError(f"--cursor: {exc}") from exc
        if root is not None:  # runs are filed under their root: a sub-run's id keeps none
            snap = await self.control.get_run(root, tenant_id=self.tenant_id)
            if snap is None:  # no tree to list: not an empty one
                raise RootNotFound(root)
            if (snap.get("root_run_id") or root) != root:
                raise CliError(
                    f"run {root} is not the root of its tree (its root is "
                    f"{snap['root_run_id']}): --root takes a root; `tinyagents runs tree "
                    f"{root}` shows the run and its subtree"
                )
        try:
            page = await self.control.page_runs(
                tenant_id=self.tenant_id,
                statuses=tuple(dict.fromkeys(statuses)),
                root_run_id=root,
                cursor=cursor,
                limit=limit,
            )
        except ValueError as exc:  # an odd --root or --tenant: it names what is wrong
            raise CliError(str(exc)) from exc
        return page.runs, page.next_cursor

    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        return await self.control.get_run(run_id, tenant_id=self.tenant_id)

    async def listed_run(self, run_id: str) -> dict[str, Any] | None:
        return await self.control.listed_run(run_id, tenant_id=self.tenant_id)

    async def tree(self, run_id: str) -> dict[str, Any] | None:
        return await self.control.tree(run_id, tenant_id=self.tenant_id)

    async def command(
        self,
        run_id: str,
        kind: SteeringKind,
        payload: dict[str, Any],
        *,
        task_id: str | None = None,
        correlation_id: str | None = None,
    ) -> dict[str, Any]:
        # (a run another process started a moment ago is waited for, as it is below)
        snap = await self.control.listed_run(run_id, tenant_id=self.tenant_id)
        # the store's admin acts in the run's own tenant
        tenant = self.tenant_id or (snap["tenant_id"] if snap is not None else "default")
        # a graph task's entry takes its commands as that task of its graph run
        target = command_target(snap, task_id) if snap is not None else None
        if target is None and task_id is not None:
            target = SteeringTarget.graph_task(run_id, task_id)
        cmd = SteeringCommand(
            target=target or SteeringTarget.agent_run(run_id),
            actor=SteeringActor.human(self.user, tenant_id=tenant, scopes=["agent:control"]),
            kind=kind,
            payload=payload,
            **({"correlation_id": correlation_id} if correlation_id else {}),
        )
        receipt = await self.control.submit(cmd)
        return receipt.model_dump(mode="json")


class HttpClient:
    """Talks to a tinyagents server's operator API with a bearer token."""

    def __init__(self, url: str, token: str, *, timeout_s: float) -> None:
        try:
            parts = urlsplit(url)
        except ValueError as exc:  # an unclosed IPv6 bracket
            raise CliError(f"--url {url!r} is not a URL: {exc}") from None
        if parts.query or parts.fragment:
            # the console link (http://HOST:PORT/#token=...) or a page's URL: the API's path
            # would follow its ``?``/``#`` and every request would reach the console's page
            bare = parts._replace(query="", fragment="").geturl()
            raise CliError(
                f"--url {bare!r} is given with a ?query or #fragment: give the server's "
                f"address alone (http://HOST:PORT); a console link's #token=... is a token: "
                f"set it in ${TOKEN_ENV}"
            )
        if parts.username is not None or parts.password is not None:
            # httpx sends them as ``Authorization: Basic`` in place of the token (the
            # password in the clear, and the server refuses it): the URL is not shown
            raise CliError(
                "--url holds a user (and password) before its host: give the server's address "
                f"alone (http://HOST:PORT); the token goes in ${TOKEN_ENV}"
            )
        try:
            parts.port  # noqa: B018 (it raises for a port outside 0..65535 or not a number)
        except ValueError as exc:  # were it sent, connect() raised an OverflowError
            raise CliError(f"--url {url!r}: its port is no port: {exc}") from None
        root = url.rstrip("/")
        # the API's own address (serve prints it as "API: http://HOST:PORT/api/agents")
        self.base = root if root.endswith(API_BASE) else root + API_BASE
        self.headers = {"Authorization": f"Bearer {token}"}
        self.timeout_s = timeout_s

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str | list[str]] | None = None,
        body: Any = None,
    ) -> tuple[int, Any]:
        code, data, _ = await self._request_links(method, path, params=params, body=body)
        return code, data

    async def _request_links(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str | list[str]] | None = None,
        body: Any = None,
    ) -> tuple[int, Any, dict[Any, dict[str, str]]]:
        """The status, the JSON body and the ``Link`` header's links (by rel)."""
        import httpx  # lazy: only the --url client needs it

        try:
            async with httpx.AsyncClient(timeout=self.timeout_s + 5) as http:
                response = await http.request(
                    method, self.base + path, params=params, json=body, headers=self.headers
                )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL is no HTTPError
            raise CliError(f"cannot reach {self.base}: {exc}") from exc
        try:
            data = response.json()
        except ValueError:  # not JSON (a proxy's page, not a tinyagents server): say what came
            data = " ".join(response.text.split())[:200] or response.reason_phrase or None
        if response.status_code == 401:
            raise CliError(f"the server refused the token: {_detail(data)}")
        return response.status_code, data, response.links

    async def list_runs(
        self, statuses: list[str], root: str | None, *, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        params = {
            k: v
            for k, v in (
                ("status", list(dict.fromkeys(statuses)) or None),
                ("root_run_id", root),
                ("limit", str(limit)),
                ("cursor", cursor),
            )
            if v is not None
        }
        code, data, links = await self._request_links("GET", "/runs", params=params)
        if code == 404 and isinstance(data, dict) and _no_such_path(data):
            raise self._wrong_url(code, data)
        if root is not None and self._run_not_found(code, data, root):
            raise RootNotFound(root)
        runs = _ok(code, data, list)
        following = parse_qs(urlsplit(links.get("next", {}).get("url", "")).query)
        cursors = following.get("cursor") or []
        return runs, cursors[0] if cursors else None

    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        code, data = await self._request("GET", f"/runs/{_segment(run_id)}")
        return None if self._run_not_found(code, data, run_id) else _ok(code, data, dict)

    async def listed_run(self, run_id: str) -> dict[str, Any] | None:
        return await self.get_run(run_id)  # the server's reads answer what is there, at once

    async def tree(self, run_id: str) -> dict[str, Any] | None:
        code, data = await self._request("GET", f"/runs/{_segment(run_id)}/tree")
        return None if self._run_not_found(code, data, run_id) else _ok(code, data, dict)

    def _run_not_found(self, code: int, data: Any, run_id: str) -> bool:
        """A 404 of this API about the run: it is not there. A 404 for the path itself (no
        such endpoint: --url is not the server's root) or without the API's body (a server
        that is not a tinyagents one) is no answer at all: "not found" would say the run does
        not exist. (An id holding ``/`` reaches no endpoint: that run is not found.)"""
        if code != 404:
            return False
        if isinstance(data, dict) and "detail" in data:
            if "/" in run_id or not _no_such_path(data):
                return True
            raise self._wrong_url(code, data)
        raise CliError(
            f"{self.base} answered 404 without the API's error body ({_detail(data)}): is "
            "--url a tinyagents server (the address serve printed)?"
        )

    def _wrong_url(self, code: int, data: Any) -> CliError:
        return CliError(
            f"{self.base} has no such endpoint (HTTP {code}: {_detail(data)}): is --url the "
            "address serve printed (http://HOST:PORT)?"
        )

    async def command(
        self,
        run_id: str,
        kind: SteeringKind,
        payload: dict[str, Any],
        *,
        task_id: str | None = None,
        correlation_id: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if correlation_id:
            body["correlation_id"] = correlation_id
        run = f"/runs/{_segment(run_id)}"
        if task_id is not None:
            path = f"{run}/tasks/{_segment(task_id)}/commands"
            body.update(kind=kind.value, payload=payload)
        elif kind is SteeringKind.ADD_INSTRUCTION:
            path = f"{run}/steer"
            body["message"] = payload["text"]
        else:
            path = f"{run}/" + ("abort" if kind is SteeringKind.CANCEL else kind.value)
            body.update(payload)
        code, data = await self._request("POST", path, body=body)
        if isinstance(data, dict) and "status" in data and "correlation_id" in data:
            return data  # a receipt, whatever the HTTP status
        held = data.get("receipt") if isinstance(data, dict) else None
        if code == 404 and isinstance(held, dict) and "status" in held and "correlation_id" in held:
            # a target not there (a task no longer pending) is a 404 holding the receipt the
            # server recorded: its reason and command id, not "not found: run" of a run that is
            return held
        if code == 405:  # the path is no command endpoint: --url is not the server's root
            raise self._wrong_url(code, data)
        if code == 403 or (code == 404 and self._run_not_found(code, data, run_id)):
            # not allowed to control; not found (or another tenant's): no receipt was made
            reason = f"not found: run {run_id}" if code == 404 else f"forbidden: {_detail(data)}"
            return {
                "status": "rejected",
                "reason": reason,
                "run_id": None,
                "correlation_id": correlation_id,
            }
        if code == 504:
            raise CliError(f"the run's owner did not answer in time: {_detail(data)}")
        raise CliError(f"the server answered {code}: {_detail(data)}")


def _segment(value: str) -> str:
    """``value`` as one path segment: an id holding ``/``, ``..``, ``?`` or ``#`` must name no
    run rather than another run's endpoint (``A/../B`` would reach B); and an id that is a
    whole dot segment (``.``, ``..``), which HTTP clients resolve away (``/runs/./pause`` is
    ``/runs/pause``), has its dots escaped (``%2E``, which they keep)."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _no_such_path(data: dict[str, Any]) -> bool:
    """Whether a 404 body of the API says the path names no endpoint (not "run not found")."""
    detail = str(data.get("detail"))
    return detail == "Not Found" or detail.startswith("no such path")


def _ok(code: int, data: Any, shape: type[dict[str, Any]] | type[list[Any]]) -> Any:
    """``data`` once it is the API's answer: a run (``dict``) or a list of runs (``list``)."""
    if code >= 400:
        raise CliError(f"the server answered {code}: {_detail(data)}")
    rows = data if isinstance(data, list) else [data]
    if not isinstance(data, shape) or not all(isinstance(row, dict) for row in rows):
        # a page, or JSON of another shape: not the API's answer, another server
        raise CliError(
            f"the server answered {code} without the API's JSON ({_detail(data)[:80]}): is "
            "--url the address serve printed (http://HOST:PORT)?"
        )
    return data


def _detail(data: Any) -> str:
    if isinstance(data, dict):  # a 422's one-line "message" says what its "detail" lists
        return str(data.get("message") or data.get("detail") or data.get("title") or data)
    return str(data)


# ---------------------------------------------------------------------- rendering


def runs_table(runs: Sequence[dict[str, Any]]) -> Table:
    """The runs as a table that fits 80 columns: id, agent, status, tenant, model and tool
    calls, what waits for the run (commands, interrupts), last update (``show`` and ``tree``
    tell the rest)."""
    table = Table(title=f"{len(runs)} run(s)", title_justify="left")
    table.add_column("run", no_wrap=True)
    table.add_column("agent")
    table.add_column("status", no_wrap=True)
    table.add_column("tenant")
    table.add_column("model/tools", justify="right", no_wrap=True)
    table.add_column("waiting")
    table.add_column("updated", no_wrap=True)
    for r in runs:
        usage = r.get("usage") or {}
        waiting = [
            f"{n} {what}"
            for n, what in (
                (len(r.get("pending_commands") or []), "cmd"),
                (len(r.get("interrupts") or []), "interrupt"),
            )
            if n
        ]
        table.add_row(
            _cell(r.get("run_id")),
            _cell(r.get("agent_id") or r.get("node_id") or r.get("kind") or "-"),
            _status(str(r.get("status", "")), silent=r.get("owner_silent") is True),
            _cell(r.get("tenant_id", "")),
            f"{usage.get('model_calls', 0)}/{usage.get('tool_calls', 0)}",
            ", ".join(waiting) or "-",
            _clock_time(r.get("updated_at")),
        )
    return table


#: What ``runs approve`` hands a question as its answer (``lowering.resume_value``), the
#: value a question's ``response_schema`` checks: ``--value`` is its ``value``, not all of it.
APPROVE_ANSWER = (
    '{"approved": true (false with --reject), "value": --value, "reason": --reason}'
    " (each of value and reason only when given)"
)


def run_panel(snap: dict[str, Any]) -> Table:
    """One run's snapshot as a two-column table, with what waits for it."""
    table = Table(show_header=False, title=f"run {_cell(snap.get('run_id'))}", title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    for key in (
        "status",
        "agent_id",
        "kind",
        "tenant_id",
        "root_run_id",
        "parent_run_id",
        "thread_id",
        "task_id",
        "node_id",
        "depth",
        "owner",
        "created_at",
        "updated_at",
    ):
        value = snap.get(key)
        if value is not None:
            if key == "status":
                text = _status(str(value), silent=snap.get("owner_silent") is True)
            else:
                text = _cell(value)
            table.add_row(key, text)
    usage = snap.get("usage") or {}
    if usage:
        table.add_row("usage", ", ".join(f"{_cell(k)}={_cell(v)}" for k, v in usage.items()))
    for key in ("tools", "models"):
        if snap.get(key) is not None:
            table.add_row(key, ", ".join(_cell(name) for name in snap[key]) or "(none)")
    for p in snap.get("pending_commands") or []:
        table.add_row(
            "pending command",
            f"{_cell(p.get('correlation_id'))} {_cell(p.get('kind'))} ({_cell(p.get('state'))}) "
            f"from {_cell(p.get('actor'))}",
        )
    for i in snap.get("interrupts") or []:
        table.add_row(
            "interrupt",
            f"{_cell(i.get('id'))} at {_cell(i.get('node'))} (task {_cell(i.get('task_id'))}): "
            f"{_cell(json.dumps(i.get('value'), default=str))}",
        )
        schema = i.get("response_schema")
        if schema is not None:  # a typed question: the JSON Schema its answer meets
            # the schema is the whole answer's, and an approve's answer wraps --value (it
            # said "--value meeting" it: a --value of the schema's shape was refused)
            table.add_row(
                "  answer",
                _cell(f"{APPROVE_ANSWER} must meet {json.dumps(schema, default=str)}"),
            )
    return table


def run_tree(node: dict[str, Any]) -> Tree:
    """A run and its children (``Control.tree``'s nesting) as a tree; a last line says so
    when the server left runs of the tree out (``truncated``: it shows ``?limit=`` runs)."""
    tree = Tree(_tree_label(node))
    _grow(tree, node.get("children") or [])
    if node.get("truncated") is True:
        root = _cell(node.get("root_run_id") or node.get("run_id"))
        tree.add(
            f"[yellow]… more runs of this tree not shown[/yellow]: `tinyagents runs list "
            f"--root {root}` lists them all"
        )
    return tree


def _grow(branch: Tree, children: list[dict[str, Any]]) -> None:
    for child in children:
        _grow(branch.add(_tree_label(child)), child.get("children") or [])


def _tree_label(node: dict[str, Any]) -> str:
    usage = node.get("usage") or {}
    waits = len(node.get("pending_commands") or []) + len(node.get("interrupts") or [])
    return (
        f"[bold]{_cell(node.get('agent_id') or node.get('node_id') or node.get('kind'))}"
        f"[/bold] {_cell(node.get('run_id'))} {_status(str(node.get('status')))}"
        f" · model {usage.get('model_calls', 0)} · tools {usage.get('tool_calls', 0)}"
        + (f" · [yellow]{waits} waiting[/yellow]" if waits else "")
    )


def receipt_line(receipt: dict[str, Any]) -> str:
    """A receipt in one line: status, command id, run and (when refused) why."""
    status = str(receipt.get("status"))
    color = "green" if status in _DONE else "red"
    cid = receipt.get("correlation_id")
    line = f"[{color}]{_cell(status)}[/{color}] command" + (f" {_cell(cid)}" if cid else "")
    if receipt.get("run_id"):
        line += f" for run {_cell(receipt['run_id'])}"
    if receipt.get("reason"):
        line += f": {_cell(receipt['reason'])}"
    return line


_STATUS_COLORS = {
    "running": "green",
    "paused": "yellow",
    "interrupted": "yellow",
    "completed": "blue",
    "cancelled": "magenta",
    "aborted": "magenta",
    "failed": "red",
    "limit_exceeded": "red",
}


def _status(status: str, *, silent: bool = False) -> str:
    """The status, coloured; "(owner silent)" after it for a run whose process is likely gone
    (the API's ``owner_silent``: no heartbeat for 30 s)."""
    color = _STATUS_COLORS.get(status)
    text = f"[{color}]{_cell(status)}[/{color}]" if color else _cell(status)
    return f"{text} [red](owner silent)[/red]" if silent else text


def _clock_time(at: Any) -> str:
    text = str(at or "")
    return _cell(text[11:19] if len(text) >= 19 else text or "-")


def _cell(value: Any) -> str:
    """``value`` as a table shows it: markup escaped, and as its ``repr`` when it holds a
    character that is not printable (``shown_name``: a server's or a store's text reached the
    terminal with its escapes; rich drops a few control characters, not ``ESC``)."""
    return escape(shown_name(str(value)))
