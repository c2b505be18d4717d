"""Cross-worker steering latency: a steer sent on worker B until ``steering.applied`` on the run
worker A owns, beside the same steer sent on worker A itself.

Two workers, each a ``Runtime`` with its own ``RedisControl`` (its own Redis connections) on
one Redis (``TINYAGENTS_REDIS_URL``, default ``redis://127.0.0.1:6379/0``); worker A runs on a
SQLite store as ``tinyagents serve`` does, and holds N live runs (100 and 1,000). Two ways to
send the same ``add_instruction`` from a human with ``agent:control``:

- **same worker**: ``control_a.submit(cmd)``, the run is A's own (no Redis on the path);
- **cross worker**: ``control_b.submit(cmd)``: B finds the run's worker in the Redis mirror,
  appends the command to A's stream, A reads it, checks the tenant, submits it to its runtime
  (policies, the store write) and sends the receipt back on B's reply stream.

Latency is measured from just before the send to the moment ``steering.applied`` is published
on A's bus. The runs idle inside a model call that returns as soon as a command is accepted for
them, so the figure is the framework's path, not a model's thinking time (the "boundary wait"
is ~0). Commands go one at a time, the ways interleaved. Both workers share this process's event
loop (their Redis traffic is real loopback TCP): each one's CPU time is part of the other's
figure, as on a busy machine.

    .venv/bin/python benchmarks/cross_worker.py [--runs 100 1000] [--commands 200]

Goal (issue 14): cross-worker p99 <= 10 ms on loopback beyond the run's boundary wait.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tinyagents import Runtime
from tinyagents.distributed import RedisControl
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)

RUN_COUNTS = (100, 1_000)
COMMANDS = 200
TENANT = "acme"
OPERATOR = SteeringActor.human("ops", tenant_id=TENANT, scopes=["agent:control"])
WAYS = ("same worker", "cross worker")
REDIS_URL = os.environ.get("TINYAGENTS_REDIS_URL", "redis://127.0.0.1:6379/0")
GOAL_P99_MS = 10.0


def _waker() -> Any:
    """operator.py's Waker (runs idle in a model call until a command is accepted for them)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "operator_bench", Path(__file__).parent / "operator.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Waker()


async def _until(check: Any, every_s: float = 0.02, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the workers did not get ready")
        await asyncio.sleep(every_s)


async def _scenario(url: str, runs: int, commands: int, store_path: Path) -> dict[str, Any]:
    waker = _waker()
    rng = random.Random(7)
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    latencies: dict[str, list[float]] = {way: [] for way in WAYS}
    async with (
        Runtime(store=f"sqlite:///{store_path}") as rt_a,
        Runtime() as rt_b,
        RedisControl(rt_a, url, worker_id="a", prefix=prefix, receipt_timeout_s=30) as control_a,
        RedisControl(rt_b, url, worker_id="b", prefix=prefix, receipt_timeout_s=30) as control_b,
    ):
        rt_a.bus.add_sink(waker)
        handles = [await rt_a.start(waker.agent(), "idle", tenant_id=TENANT) for _ in range(runs)]
        run_ids = [h.run_id for h in handles]
        try:

            async def idle() -> bool:
                return all(r in waker.wake for r in run_ids)

            async def mirrored() -> bool:
                seen = {s["run_id"] for s in await control_b.list_runs(TENANT)}
                return seen.issuperset(run_ids)

            await _until(idle)
            await _until(mirrored)
            for i in range(commands * len(WAYS)):
                way = WAYS[i % len(WAYS)]
                control = control_a if way == "same worker" else control_b
                latencies[way].append(await _one(i, rng.choice(run_ids), control, waker))
        finally:
            for h in handles:
                if h.task is not None:
                    h.task.cancel()
            await asyncio.gather(*(h.task for h in handles if h.task), return_exceptions=True)
        sent = control_b.counters.sent
    return {
        "runs": runs,
        "commands": commands,
        "sent_through_redis": sent,
        "ways": {w: _summary(v) for w, v in latencies.items()},
    }


async def _one(i: int, run_id: str, control: RedisControl, waker: Any) -> float:
    cid = f"bench-{i}"
    applied: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    waker.applied[cid] = applied
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPERATOR,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": f"focus on item {i}"},
        correlation_id=cid,
    )
    started = time.perf_counter()
    receipt = await control.submit(cmd)
    if not receipt.accepted:
        raise RuntimeError(f"command {cid} was {receipt.status}: {receipt.reason}")
    async with asyncio.timeout(30):
        done = await applied
    return (done - started) * 1000


def _summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "max_ms": ordered[-1],
    }


async def _reachable(url: str) -> str | None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url, socket_connect_timeout=1.0)
    try:
        await client.ping()
    except Exception as exc:
        return str(exc)
    finally:
        await client.aclose()
    return None


def run(
    *, run_counts: tuple[int, ...] = RUN_COUNTS, commands: int = COMMANDS, url: str = REDIS_URL
) -> dict[str, Any]:
    """The figures, or ``{"skipped": why}`` when Redis is unreachable."""

    async def main() -> dict[str, Any]:
        why = await _reachable(url)
        if why is not None:
            return {"skipped": f"Redis at {url} is unreachable: {why}"}
        scenarios = []
        for runs in run_counts:
            with tempfile.TemporaryDirectory() as tmp:
                scenarios.append(await _scenario(url, runs, commands, Path(tmp) / "a.db"))
        return {"scenarios": scenarios}

    return asyncio.run(main())


def report(results: dict[str, Any]) -> str:
    if "skipped" in results:
        return f"cross_worker skipped: {results['skipped']}"
    lines = [
        "steer -> steering.applied latency (ms) on worker A's run, runs idle in a model call",
        f"{'live runs':>10}  {'way':<14} {'p50':>8} {'p99':>8} {'max':>8}  vs same-worker p50",
    ]
    for s in sorted(results["scenarios"], key=lambda s: int(s["runs"])):
        base = s["ways"]["same worker"]["p50_ms"]
        for way in WAYS:
            w = s["ways"][way]
            ratio = w["p50_ms"] / base if base else float("nan")
            lines.append(
                f"{s['runs']:>10}  {way:<14} {w['p50_ms']:>8.2f} {w['p99_ms']:>8.2f} "
                f"{w['max_ms']:>8.2f}  x{ratio:.1f}"
            )
    lines.append(
        f"({results['scenarios'][0]['commands']} commands per way and scenario, one at a time; "
        f"goal: cross-worker p99 <= {GOAL_P99_MS:g} ms)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=list(RUN_COUNTS))
    parser.add_argument("--commands", type=int, default=COMMANDS)
    args = parser.parse_args(argv)
    print(report(run(run_counts=tuple(args.runs), commands=args.commands)))


if __name__ == "__main__":
    main()
