"""The ``tinyagents`` command: ``demo`` and ``inspect``."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tinyagents", description="Steer agent runs while they run."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo", help="run the orchestrator demo (offline, scripted models, SQLite)"
    )
    demo.add_argument("--db", default="tinyagents-demo.db", help="SQLite file to store the runs in")
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
        from tinyagents.demo import run_demo

        summary = asyncio.run(run_demo(db=args.db, model=args.model))
        return 0 if summary["status"] == "completed" else 1
    return asyncio.run(inspect_store(args.file, args.run_id))


async def inspect_store(file: str, run_id: str | None = None) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.tree import Tree

    from tinyagents.events.models import SteeringEvent
    from tinyagents.store.sqlite import SqliteStore

    console = Console() if sys.stdout.isatty() else Console(width=160)
    if not await asyncio.to_thread(Path(file).is_file):
        console.print(f"[red]no such store file: {file}[/]")
        return 2
    store = SqliteStore(file)
    await store.open()
    try:
        runs = await store.load_runs()
        by_id = {r["run_id"]: r for r in runs}
        if run_id is not None and run_id not in by_id:
            console.print(
                f"[red]run {run_id} is not in {file}[/]; runs: {', '.join(by_id) or 'none'}"
            )
            return 2
        root = by_id[run_id]["root_run_id"] if run_id else None
        shown = [r for r in runs if root is None or r["root_run_id"] == root]
        children: dict[str | None, list[dict[str, Any]]] = {}
        for r in shown:
            children.setdefault(r["parent_run_id"], []).append(r)

        def label(r: dict[str, Any]) -> str:
            return f"{r['agent_id'] or r['kind']} {r['run_id']} · {r['status']} · {r['usage']['model_calls']} model calls"

        def add(tree: Tree, r: dict[str, Any]) -> None:
            for c in children.get(r["run_id"], []):
                add(tree.add(label(c)), c)

        for top in [
            r for r in shown if r["parent_run_id"] is None or r["parent_run_id"] not in by_id
        ]:
            tree = Tree(label(top))
            add(tree, top)
            console.print(tree)

        events = await store.load_events(type_prefix="steering.", root_run_id=root)
        table = Table(title=f"Steering history ({file})")
        for col in ("command", "kind", "actor", "target run", "lifecycle", "reason"):
            table.add_column(col)
        lifecycles: dict[str, list[SteeringEvent]] = {}
        for e in events:
            if isinstance(e, SteeringEvent):
                lifecycles.setdefault(e.correlation_id, []).append(e)
        for cid, evs in lifecycles.items():
            last = evs[-1]
            reasons = [e.reason for e in evs if e.reason]
            table.add_row(
                cid,
                last.kind.value,
                last.actor.describe(),
                last.run_id or "-",
                " → ".join(e.type.split(".")[1] for e in evs),
                reasons[-1] if reasons else "",
            )
        console.print(table)
    finally:
        await store.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
