"""Memory: a runtime that has finished many steered runs holds as much as one that finished few.

Runs are registered, steered with ``--commands`` instructions each (constructed, submitted
through the policies, delivered at a boundary and applied, four events each), and finished,
in ``--waves`` waves. After each wave (every run of it finished, ``gc.collect()`` first) the
resident set size is read from ``/proc/self/statm`` (after ``malloc_trim``, so that it
shows what is live, not the allocator's high-water mark), with the number of blocks Python
has allocated. Finished runs leave memory once they
leave the retention window (``Runtime(retain_finished=1000)``) and command ids once they leave
the dedupe horizon (100,000), so from the second wave on the RSS should stay flat: the growth
from wave 2 to the last wave is checked against 5 %. "per run kept" divides the RSS over the
first reading by the runs still in memory (the retention window; the dedupe horizon is part
of the cost it shows).

    .venv/bin/python benchmarks/memory.py [--runs 100000] [--waves 10] [--commands 10]
                                          [--retain 1000] [--store PATH.db]

Before bounded retention every finished run kept ~9 KB (its handle, tree node, steering
history and command ids) for the life of the runtime.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import gc
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from tinyagents.protocol import (
    Boundary,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunHandle, RunInfo, RunResult, RunStatus
from tinyagents.runtime import Runtime

MAX_GROWTH = 0.05
TOOLS = frozenset({"search", "fetch"})
OPERATOR = SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"])
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _malloc_trim() -> None:
    """Hand the C allocator's free pages back to the OS (glibc only), so that the RSS shows
    what is live rather than where the allocator's high-water mark happens to be."""
    name = ctypes.util.find_library("c")
    if name is None or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def rss_bytes() -> int:
    """The resident set size now, after a full collection and a malloc_trim (the peak where
    /proc is missing)."""
    gc.collect()
    _malloc_trim()
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def _one_run(rt: Runtime, run_id: str, commands: int) -> None:
    handle = await rt.register(
        RunHandle(RunInfo(run_id=run_id, tenant_id="acme", tools=TOOLS), submitter=rt)
    )
    target = SteeringTarget.agent_run(run_id)
    for i in range(commands):
        cmd = SteeringCommand(
            target=target,
            actor=OPERATOR,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": f"focus on item {i}"},
        )
        await rt.submit(cmd)
    inbox = handle.inbox
    for cmd in inbox.take(Boundary.BEFORE_MODEL_CALL):
        inbox.applied(cmd)
    await rt.finish(handle, RunResult(run_id=run_id, status=RunStatus.COMPLETED))


async def _scenario(
    runs: int, waves: int, commands: int, retain: int, store: str | None
) -> dict[str, Any]:
    per_wave = max(1, runs // waves)
    async with Runtime(store, retain_finished=retain) as rt:
        await _one_run(rt, "warm-up", commands)
        base = rss_bytes()
        rows: list[dict[str, Any]] = []
        started = time.perf_counter()
        for wave in range(waves):
            t0 = time.perf_counter()
            for n in range(per_wave):
                await _one_run(rt, f"r-{wave}-{n}", commands)
            seconds = time.perf_counter() - t0
            rss = rss_bytes()
            kept = len(rt.runs)
            rows.append(
                {
                    "wave": wave + 1,
                    "finished": (wave + 1) * per_wave,
                    "rss": rss,
                    "blocks": sys.getallocatedblocks(),
                    "kept": kept,
                    "per_run_kept": (rss - base) / kept if kept else 0.0,
                    "runs_per_s": per_wave / seconds,
                }
            )
        assert not rt.router.open_commands()
        total = time.perf_counter() - started
    second, last = rows[min(1, len(rows) - 1)]["rss"], rows[-1]["rss"]
    return {
        "runs": per_wave * waves,
        "commands": commands,
        "retain": retain,
        "store": store,
        "base_rss": base,
        "waves": rows,
        "growth": (last - second) / second,
        "seconds": total,
    }


def run(
    *,
    runs: int = 100_000,
    waves: int = 10,
    commands: int = 10,
    retain: int = 1000,
    store: str | None = None,
) -> dict[str, Any]:
    """Run the waves; returns the figures (what ``main`` prints)."""
    return asyncio.run(_scenario(runs, waves, commands, retain, store))


def report(r: dict[str, Any]) -> str:
    mb = 1 / 2**20
    lines = [
        f"memory: {r['runs']:,} runs x {r['commands']} commands in {len(r['waves'])} waves, "
        f"retain_finished={r['retain']:,}, store={r['store'] or 'memory'} "
        f"(RSS before the first wave {r['base_rss'] * mb:.1f} MB)",
        f"  {'wave':>4} {'finished':>9} {'RSS MB':>8} {'in memory':>9} "
        f"{'bytes/run kept':>14} {'Python blocks':>13} {'runs/s':>8}",
    ]
    for w in r["waves"]:
        lines.append(
            f"  {w['wave']:>4} {w['finished']:>9,} {w['rss'] * mb:>8.1f} {w['kept']:>9,} "
            f"{w['per_run_kept']:>14,.0f} {w['blocks']:>13,} {w['runs_per_s']:>8,.0f}"
        )
    verdict = "ok" if r["growth"] <= MAX_GROWTH else f"above {MAX_GROWTH:.0%}"
    lines.append(
        f"  RSS growth from wave 2 to wave {len(r['waves'])}: {r['growth']:+.2%} ({verdict}); "
        f"{r['seconds']:.0f} s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--waves", type=int, default=10)
    parser.add_argument("--commands", type=int, default=10, help="commands per run")
    parser.add_argument("--retain", type=int, default=1000, help="retain_finished")
    parser.add_argument("--store", type=Path, default=None, help="a SQLite file to use")
    args = parser.parse_args(argv)
    store = f"sqlite:///{args.store}" if args.store is not None else None
    print(
        report(
            run(
                runs=args.runs,
                waves=args.waves,
                commands=args.commands,
                retain=args.retain,
                store=store,
            )
        )
    )


if __name__ == "__main__":
    main()
