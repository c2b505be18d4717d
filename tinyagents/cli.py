"""The ``tinyagents`` command: ``demo`` and ``inspect``."""

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
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from tinyagents.demo import open_store_file, run_demo
from tinyagents.errors import StoreError
from tinyagents.events.models import EVENT_ADAPTER, SteeringEvent

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tinyagents", description="Steer agent runs while they run."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo", help="run the orchestrator demo (offline, scripted models, SQLite)"
    )
    demo.add_argument(
        "--db",
        default="tinyagents-demo.db",
        help="SQLite store file for the runs; kept across demos, and a file that is not a "
        "tinyagents store is refused, never overwritten",
    )
    demo.add_argument(
        "--fresh",
        action="store_true",
        help="start the store file empty (drops the runs of earlier demos)",
    )
    demo.add_argument(
        "--model", default=None, help="run the same script on a real model, e.g. openai/gpt-4o-mini"
    )

    inspect = sub.add_parser(
        "inspect", help="print the run tree and steering history from a store file"
    )
    inspect.add_argument(
        "file", help="a SQLite store file written by a Runtime(store='sqlite:///...')"
    )
    inspect.add_argument("run_id", nargs="?", default=None, help="show only this run's tree")

    args = parser.parse_args(argv)
    if args.command == "demo":
        try:
            summary = asyncio.run(run_demo(db=args.db, model=args.model, fresh=args.fresh))
        except StoreError as exc:
            print(f"tinyagents demo: {exc}")
            return 2
        return 0 if summary["status"] == "completed" else 1
    return asyncio.run(inspect_store(args.file, args.run_id))


async def inspect_store(file: str, run_id: str | None = None) -> int:
    """Print the run tree and steering history of a store file; never writes to it."""
    console = Console() if sys.stdout.isatty() else Console(width=160)
    try:
        runs, events, unreadable = await asyncio.to_thread(read_store, Path(file), run_id)
    except StoreError as exc:
        console.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        return 2
    by_id = {r["run_id"]: r for r in runs}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for r in runs:
        children.setdefault(r.get("parent_run_id"), []).append(r)

    def label(r: dict[str, Any]) -> str:
        calls = (r.get("usage") or {}).get("model_calls", "?")
        text = f"{r.get('agent_id') or r.get('kind')} {r['run_id']} · {r.get('status')} · {calls} model calls"
        return escape(text)

    for top in [r for r in runs if r.get("parent_run_id") not in by_id]:
        tree = Tree(label(top))
        stack, seen = [(tree, top)], {top["run_id"]}  # a loop: a tree can be thousands deep
        while stack:
            branch, r = stack.pop()
            for c in children.get(r["run_id"], []):
                if c["run_id"] not in seen:
                    seen.add(c["run_id"])
                    stack.append((branch.add(label(c)), c))
        console.print(tree)

    table = Table(title=escape(f"Steering history ({file})"))
    for col in ("command", "kind", "actor", "target run", "lifecycle", "reason"):
        table.add_column(col)
    lifecycles: dict[str, list[SteeringEvent]] = {}
    for e in events:
        lifecycles.setdefault(e.correlation_id, []).append(e)
    for cid, evs in lifecycles.items():
        last = evs[-1]
        reasons = [e.reason for e in evs if e.reason]
        table.add_row(
            escape(cid),
            last.kind.value,
            escape(last.actor.describe()),
            escape(last.run_id or "-"),
            " → ".join(e.type.split(".")[1] for e in evs),
            escape(reasons[-1]) if reasons else "",
        )
    console.print(table)
    if unreadable:
        console.print(f"({unreadable} stored records could not be read and are not shown)")
    return 0


def read_store(
    path: Path, run_id: str | None = None
) -> tuple[list[dict[str, Any]], list[SteeringEvent], int]:
    """The runs (of ``run_id``'s tree, or all) and their steering events, read from the store
    at ``path`` through a read-only connection, plus how many records could not be read.

    Never migrates or writes, unlike ``SqliteStore.open()``; ``StoreError`` (one line) when
    the file is not a store or ``run_id`` is not in it."""
    conn = open_store_file(path)
    unreadable = 0
    try:
        runs: list[dict[str, Any]] = []
        for (data,) in conn.execute("SELECT data FROM runs ORDER BY rowid"):
            try:
                runs.append(dict(json.loads(data)))
            except (ValueError, TypeError):
                unreadable += 1
        root: str | None = None
        if run_id is not None:
            found = [r for r in runs if r.get("run_id") == run_id]
            if not found:
                known = ", ".join(str(r.get("run_id")) for r in runs[:10]) or "none"
                raise StoreError(f"run {run_id} is not in {path}; runs: {known}")
            root = found[0].get("root_run_id") or run_id
            runs = [r for r in runs if r.get("root_run_id") == root]
        runs = [r for r in runs if isinstance(r.get("run_id"), str)]
        sql = "SELECT data FROM events WHERE substr(type, 1, 9) = 'steering.'"
        rows = conn.execute(
            sql + (" AND root_run_id = ?" if root else "") + " ORDER BY id", (root,) if root else ()
        )
        events: list[SteeringEvent] = []
        for (data,) in rows:
            try:
                event = EVENT_ADAPTER.validate_json(data)
            except ValidationError:
                unreadable += 1
                continue
            if isinstance(event, SteeringEvent):
                events.append(event)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    finally:
        conn.close()
    return runs, events, unreadable


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
