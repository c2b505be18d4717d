"""The ``tinyagents`` command: ``--version``, ``demo``, ``inspect``, ``validate``, ``serve`` and
``token``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.markup import escape

from tinyagents import __version__
from tinyagents.console import (
    ENDED_UNCOMPLETED,
    TerminalConsole,
    audit_table,
    lifecycles,
    run_rows_from_records,
    run_tree,
    settle_graph_tasks,
)
from tinyagents.demo import open_store_file, run_demo
from tinyagents.errors import ConfigurationError, StoreError
from tinyagents.events.models import Event, RunEvent, SteeringEvent, parse_event
from tinyagents.harness.litellm_model import LiteLLMModel, env_name_problem
from tinyagents.protocol.ids import shown_id, shown_name
from tinyagents.server.commands import add_commands as add_server_commands
from tinyagents.server.commands import missing_extra
from tinyagents.server.commands import run_command as run_server_command
from tinyagents.server.runs_cli import add_runs_command, run_id_arg, run_runs_command
from tinyagents.store.base import read_snapshot
from tinyagents.store.urls import is_sqlite_url
from tinyagents.supervisor.validate import validate_command

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tinyagents", description="Steer agent runs while they run."
    )
    parser.add_argument("--version", action="version", version=f"tinyagents {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="run the orchestrator demo (offline scripted models by default, SQLite)",
        description="Run an orchestrator with two sub-agents and steer them while they run. "
        "Offline scripted models by default; --model runs it on a real model through litellm, "
        "e.g. a local OpenAI-compatible server: --model openai/NAME --api-base "
        "http://127.0.0.1:8080/v1 --api-key-env LOCAL_KEY",
    )
    demo.add_argument(
        "--db",
        default="tinyagents-demo.db",
        help="SQLite store file for the runs (a path, or sqlite:///PATH as --store takes it); "
        "kept across demos, and a file that is not a tinyagents store is refused, never "
        "overwritten",
    )
    demo.add_argument(
        "--fresh",
        action="store_true",
        help="start the store file empty (drops the runs of earlier demos)",
    )
    demo.add_argument(
        "--model",
        default=None,
        help="a litellm model name (e.g. openai/gpt-4o-mini) to use instead of the scripted "
        "models; a real model plays its own story, not the script",
    )
    demo.add_argument(
        "--api-base",
        default=None,
        help="the model server's base URL, e.g. http://127.0.0.1:8080/v1 for a local "
        "OpenAI-compatible server (needs --model)",
    )
    demo.add_argument(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help="the environment variable that holds the API key (needs --model; without it "
        "litellm reads the provider's usual variable, e.g. OPENAI_API_KEY)",
    )

    inspect = sub.add_parser(
        "inspect", help="print the run tree and steering history from a store file"
    )
    inspect.add_argument(
        "file", help="a SQLite store file written by a Runtime(store='sqlite:///...')"
    )
    inspect.add_argument(
        "run_id",
        nargs="?",
        default=None,
        type=run_id_arg,
        help="show only this run, its descendants and the commands sent to them",
    )
    inspect.add_argument(
        "--json",
        action="store_true",
        help="print the whole record as one JSON document (runs with their errors, every "
        "event, every command's lifecycle) for scripts",
    )

    validate = sub.add_parser(
        "validate",
        help="check a supervisor spec (YAML) before anything runs",
        description="Check a supervisor spec: unknown keys, actions and rule kinds, "
        "every_n_iterations, criteria_file inside its directory (errors, with the YAML line); "
        "a missing criteria_file or an unresolvable judge model (warnings). Exit code 1 on "
        "errors.",
    )
    validate.add_argument("file", help="a YAML file holding a supervisor spec")
    add_server_commands(sub)
    add_runs_command(sub)

    for arg in sys.argv[1:] if argv is None else argv:
        # an argument that is not UTF-8 (a Latin-1 name) reaches Python as lone surrogates,
        # which no token, id or HTTP request can carry: one line and exit 2, not a traceback
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            print(f"tinyagents: error: argument {arg!r} is not UTF-8 text", file=sys.stderr)
            return 2
    args = parser.parse_args(argv)
    try:
        code = dispatch(args)
        sys.stdout.flush()  # here, where a reader that left is caught (not at exit)
        return code
    except BrokenPipeError:
        # the reader closed the pipe (``tinyagents validate f.yaml | head -1``): end with 1,
        # as the commands printing through rich do, and write nothing more into it at exit
        # (Python's documented way: a second flush at exit would raise again). A broken
        # pipe of another kind (a socket's) reaches here only unwrapped, which no client
        # the commands use lets through.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1
    except ImportError as exc:  # an optional library (fastapi, biscuit_auth, redis...) is not here
        line = missing_extra(exc)
        if line is None:
            raise
        print(f"tinyagents {args.command}: {line}", file=sys.stderr)
        return 2


def dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command."""
    served = run_server_command(args)
    if served is not None:
        return served
    steered = run_runs_command(args)
    if steered is not None:
        return steered
    if args.command == "demo":
        return demo_command(args)
    if args.command == "validate":
        return validate_command(args.file, sys.stdout)
    return asyncio.run(inspect_store(args.file, args.run_id, as_json=args.json))


def demo_command(args: argparse.Namespace) -> int:
    """``tinyagents demo``: 0 when the orchestrator completed, 1 when it did not, 2 for bad
    arguments or a file the demo may not write (one line, nothing touched)."""
    try:
        db = sqlite_file(args.db)
        if db is None:
            raise ConfigurationError(
                f"--db {shown_name(args.db)}: the demo writes a SQLite file; give its path (or sqlite:///PATH)"
            )
        model = demo_model(args.model, args.api_base, args.api_key_env)
        summary = asyncio.run(run_demo(db=db, model=model, fresh=args.fresh))
    except (StoreError, ConfigurationError) as exc:
        print(f"tinyagents demo: {exc}")
        return 2
    if "MissingAPIKeyError" in str(summary.get("error")):
        print("tinyagents demo: name the variable that holds the key with --api-key-env NAME")
    return 0 if summary["status"] == "completed" else 1


def sqlite_file(store: str) -> str | None:
    """The file a store argument names: a path, or a ``sqlite:///PATH`` (or
    ``sqlite+aiosqlite:///PATH``) URL as ``--store``
    takes it (``sqlite:////abs.db`` is absolute); None for any other URL (PostgreSQL).
    ``StoreError`` for one that names no file (it was read as the directory ".")."""
    if is_sqlite_url(store):
        path = store.partition("://")[2].removeprefix("/")  # sqlite:///rel.db → rel.db
    elif "://" in store:
        return None
    else:
        path = store
    if not path.strip():
        raise StoreError(f"{store!r} names no file: give the store's path, e.g. runs.db")
    return path


def demo_model(
    name: str | None, api_base: str | None, api_key_env: str | None
) -> LiteLLMModel | None:
    """The real model the demo runs on, or None for the scripted ones."""
    if name is None:
        if api_base is not None or api_key_env is not None:
            raise ConfigurationError(
                "--api-base and --api-key-env choose where a real model is; name it with --model"
            )
        return None
    api_key = None
    if api_key_env is not None:
        problem = env_name_problem(api_key_env)
        if problem is not None:
            raise ConfigurationError(f"--api-key-env: {problem}")
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise ConfigurationError(
                f"--api-key-env {api_key_env}: the environment variable {api_key_env} is not "
                f"set (or empty); export it, e.g. {api_key_env}=... tinyagents demo ..."
            )
    return LiteLLMModel(name, api_base=api_base, api_key=api_key)


async def inspect_store(file: str, run_id: str | None = None, *, as_json: bool = False) -> int:
    """Print the run tree (with why runs did not complete) and the steering history of a store
    file, or with ``as_json`` the whole record as JSON; never writes to the file."""
    console = (
        TerminalConsole()
        if sys.stdout.isatty() or "COLUMNS" in os.environ
        else TerminalConsole(width=100)
    )
    try:
        path = sqlite_file(file)
    except StoreError as exc:
        console.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        return 2
    if path is None:  # a PostgreSQL store: read (never created) by 'runs'
        console.print(
            f"{shown_name(file)} is not a store file: inspect reads SQLite files; for this store use "
            f"'tinyagents runs list --store URL' and 'tinyagents runs show RUN_ID --store URL'",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return 2
    file = path
    try:
        runs, events, unreadable = await asyncio.to_thread(
            read_store, Path(file), run_id, everything=as_json
        )
    except StoreError as exc:
        console.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        return 2
    errors = run_errors(events)
    steering = [e for e in events if isinstance(e, SteeringEvent)]
    if as_json:
        record = {
            "file": file,
            "run_id": run_id,
            "runs": [{**r, "error": errors.get(r["run_id"])} for r in runs],
            "commands": [
                {
                    "correlation_id": cid,
                    "kind": evs[-1].kind.value,
                    "actor": evs[-1].actor.describe(),
                    "target": evs[-1].target.model_dump(mode="json"),
                    "run_id": evs[-1].run_id,
                    "states": [e.type.split(".", 1)[1] for e in evs],
                    "reason": next((e.reason for e in reversed(evs) if e.reason), None),
                }
                for cid, evs in lifecycles(steering).items()
            ],
            "events": [e.to_dict(mode="json") for e in events],
            "unreadable": unreadable,
        }
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
        return 0
    rows = settle_graph_tasks(run_rows_from_records(runs, errors), events)
    console.print(run_tree(rows))
    shown = f"{shown_name(file)}{f', run {shown_name(run_id)} and below' if run_id else ''}"
    title = f"Steering history ({shown})"
    if steering:
        console.print(audit_table(steering, title=title, lifecycle=True))
    else:
        console.print(escape(f"{title}: no steering commands"))
    if unreadable:
        console.print(f"({unreadable} stored records could not be read and are not shown)")
    return 0


def run_errors(events: list[Event]) -> dict[str, str]:
    """Why each run that did not complete ended, from its ``run.*`` event in the log."""
    return {
        e.run_id: e.error
        for e in events
        if isinstance(e, RunEvent) and e.error and e.run_id and e.type in ENDED_UNCOMPLETED
    }


#: What ``inspect`` draws (``--json`` reads every event).
_DRAWN = (
    "substr(type, 1, 9) = 'steering.' OR substr(type, 1, 6) = 'graph.' OR type IN "
    f"({', '.join(repr(t) for t in sorted(ENDED_UNCOMPLETED))})"
)


def read_store(
    path: Path, run_id: str | None = None, *, everything: bool = False
) -> tuple[list[dict[str, Any]], list[Event], int]:
    """The runs (``run_id`` and its descendants, or all) and their events, read from the store
    at ``path`` through a read-only connection, plus how many records could not be read.

    Events are those ``inspect`` draws (steering, graph, how runs ended), or with
    ``everything`` all of them. Never migrates or writes, unlike ``SqliteStore.open()``;
    ``StoreError`` (one line) when the file is not a store or ``run_id`` is not in it."""
    conn = open_store_file(path)
    unreadable = 0
    try:
        runs: list[dict[str, Any]] = []
        damaged: dict[str, str] = {}  # why each run's snapshot no longer reads, by its key
        for data, key in conn.execute("SELECT data, run_id FROM runs ORDER BY rowid"):
            try:
                runs.append(read_snapshot(data, key))
            except (ValueError, TypeError) as exc:
                unreadable += 1
                damaged[str(key)] = str(exc)
        root: str | None = None
        if run_id is not None:
            found = [r for r in runs if r["run_id"] == run_id]
            if not found and run_id in damaged:  # it is there: "not in" sent users looking
                raise StoreError(f"cannot read {shown_name(str(path))}: {damaged[run_id]}")
            if not found:
                known = ", ".join(str(r["run_id"]) for r in runs[:10]) or "none"
                raise StoreError(
                    f"run {shown_name(shown_id(run_id))} is not in {shown_name(str(path))}; "
                    f"runs: {known}"
                )
            root = found[0].get("root_run_id") or run_id
            runs = subtree([r for r in runs if r.get("root_run_id") == root], run_id)
        sql = "SELECT data FROM events"
        clauses = [] if everything else [f"({_DRAWN})"]
        if root:
            clauses.append("root_run_id = ?")
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        rows = conn.execute(sql + " ORDER BY id", (root,) if root else ())
        selected = {r["run_id"] for r in runs}
        events: list[Event] = []
        for (data,) in rows:
            try:
                # as the store's readers: a lone surrogate's escape (a model's broken text)
                # reads back, where pydantic's JSON parser refused the whole event
                event = parse_event(data)
            except ValidationError:
                unreadable += 1
                continue
            if run_id is None or event.run_id in selected:
                events.append(event)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read {shown_name(str(path))}: {exc}") from exc
    finally:
        conn.close()
    return runs, events, unreadable


def subtree(runs: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """``run_id``'s record and its descendants' (in the order given)."""
    children: dict[str, list[str]] = {}
    for r in runs:
        parent = r.get("parent_run_id")
        if isinstance(parent, str):
            children.setdefault(parent, []).append(r["run_id"])
    keep, frontier = {run_id}, [run_id]
    while frontier:  # a loop: a tree can be thousands deep
        below = [c for p in frontier for c in children.get(p, []) if c not in keep]
        keep.update(below)
        frontier = below
    return [r for r in runs if r["run_id"] in keep]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
