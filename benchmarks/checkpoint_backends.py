"""Checkpoint write throughput: PostgreSQL beside SQLite (issue 14's benchmark).

Three scenarios on each backend, each with its default durability (SQLite: WAL with
``synchronous=NORMAL``; PostgreSQL: ``synchronous_commit=on``, so every checkpoint waits for
the server's WAL flush):

- **chain**: one thread, checkpoints put one after another (a delta of one small channel,
  a snapshot every 50): the latency of a single writer;
- **threads**: 16 threads written at once, each a chain: what the backend takes from many
  runs writing together (SQLite serialises them on its single connection; PostgreSQL
  spreads them over its pool);
- **graph**: a 100-step loop graph run end to end with the checkpointer (a checkpoint and
  the pending writes per step, the lease renewed as it goes).

PostgreSQL is measured twice: with its default, and with ``synchronous_commit=off``
(``PostgresCheckpointer(..., synchronous_commit="off")``: no wait for the WAL flush; a server
crash may lose the last checkpoints, never the order of a thread's history). Each figure is
the best of ``repeat`` rounds. PostgreSQL is the server at
``TINYAGENTS_POSTGRES_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``), in a
schema of its own dropped afterwards; without it only SQLite is measured.

    .venv/bin/python benchmarks/checkpoint_backends.py [--puts 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypedDict

from tinyagents.graph import END, START, StateGraph
from tinyagents.store.checkpoint import (
    Checkpointer,
    CheckpointRecord,
    PostgresCheckpointer,
    SqliteCheckpointer,
)

DSN = os.environ.get("TINYAGENTS_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
THREADS = 16
GRAPH_STEPS = 100


class LoopState(TypedDict, total=False):
    n: int


def record(thread: str, seq: int) -> CheckpointRecord:
    return CheckpointRecord(
        thread_id=thread,
        checkpoint_id=f"{thread}-{seq}",
        parent_id=f"{thread}-{seq - 1}" if seq else None,
        seq=seq,
        step=seq,
        snapshot=seq % 50 == 0,
        values={"n": seq, "note": "x" * 64} if seq % 50 == 0 else {"n": seq},
        frontier=[{"node": "step"}],
        frontier_id=f"f{seq}",
        lineage="L",
        source="loop",
        tasks=[f"task-{seq}"],
        written=["n"],
    )


async def chain(cp: Checkpointer, thread: str, puts: int) -> None:
    for seq in range(puts):
        await cp.put(record(thread, seq))


def loop_graph(cp: Checkpointer) -> Any:
    async def step(state: LoopState) -> LoopState:
        return {"n": state["n"] + 1}

    def again(state: LoopState) -> str:
        return "step" if state["n"] < GRAPH_STEPS else END

    graph = StateGraph(LoopState).add_node("step", step).add_edge(START, "step")
    graph.add_conditional_edges("step", again)
    return graph.compile(checkpointer=cp, recursion_limit=GRAPH_STEPS + 5)


async def timed(work: Awaitable[Any]) -> float:
    started = time.perf_counter()
    await work
    return time.perf_counter() - started


async def run_graph(graph: Any, thread: str) -> None:
    result = await graph.run({"n": 0}, thread_id=thread)
    assert result.status == "completed" and result.state["n"] == GRAPH_STEPS, result


async def scenarios(cp: Checkpointer, *, puts: int, repeat: int) -> dict[str, float]:
    """Checkpoints per second of each scenario (best of ``repeat``)."""
    best = {"chain": 0.0, "threads": 0.0, "graph": 0.0}
    per_thread = max(puts // THREADS, 1)
    graph = loop_graph(cp)
    for _ in range(repeat):
        tag = uuid.uuid4().hex[:8]
        took = await timed(chain(cp, f"chain-{tag}", puts))
        best["chain"] = max(best["chain"], puts / took)
        many = asyncio.gather(*(chain(cp, f"t{i}-{tag}", per_thread) for i in range(THREADS)))
        took = await timed(many)
        best["threads"] = max(best["threads"], per_thread * THREADS / took)
        took = await timed(run_graph(graph, f"g-{tag}"))
        saved = len(await cp.list(f"g-{tag}"))
        best["graph"] = max(best["graph"], saved / took)
    return best


async def measure(puts: int, repeat: int) -> dict[str, Any]:
    results: dict[str, Any] = {"puts": puts, "repeat": repeat, "threads": THREADS}
    with tempfile.TemporaryDirectory() as tmp:
        async with SqliteCheckpointer(Path(tmp) / "cp.db") as sqlite:
            results["sqlite"] = await scenarios(sqlite, puts=puts, repeat=repeat)
    for key, commit in (("postgres", "on"), ("postgres_async", "off")):
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        try:
            async with PostgresCheckpointer(
                DSN, schema=schema, max_size=THREADS, synchronous_commit=commit
            ) as pg:
                results[key] = await scenarios(pg, puts=puts, repeat=repeat)
        except Exception as exc:  # no server: measure what there is
            results[key] = None
            results["postgres_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            await _drop(schema)
    return results


async def _drop(schema: str) -> None:
    try:
        import asyncpg

        conn = await asyncpg.connect(DSN)
    except Exception:
        return
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def run(*, puts: int = 1000, repeat: int = 3) -> dict[str, Any]:
    return asyncio.run(measure(puts, repeat))


def report(results: dict[str, Any]) -> str:
    lines = [
        f"checkpoint writes/s, best of {results['repeat']} "
        f"({results['puts']} puts; {results['threads']} threads at once; "
        f"a {GRAPH_STEPS}-step graph); PG = synchronous_commit on, PG async = off",
        f"{'scenario':<10}{'SQLite':>10}{'PG':>10}{'PG/SQLite':>11}{'PG async':>10}"
        f"{'async/SQLite':>14}",
    ]
    pg, fast = results["postgres"], results["postgres_async"]
    for name in ("chain", "threads", "graph"):
        lite = results["sqlite"][name]
        line = f"{name:<10}{lite:>10,.0f}"
        for got, width in ((pg, 11), (fast, 14)):
            if got is None:
                line += f"{'-':>10}{'-':>{width}}"
            else:
                line += f"{got[name]:>10,.0f}{got[name] / lite:>{width}.2f}"
        lines.append(line)
    if pg is None or fast is None:
        lines.append(f"PostgreSQL not measured: {results['postgres_error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puts", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(report(run(puts=args.puts, repeat=args.repeat)))


if __name__ == "__main__":
    main()
