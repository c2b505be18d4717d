"""One live process per worker id on a Redis control plane (``{prefix}:seat:{worker}``).

Two processes under one worker id shared one command stream (each read the other's commands
and answered them "not found"), one listing hash (each wiped the other's runs at every
heartbeat) and one reply stream; the second one now refuses to start."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import free_port
from test_redis_control import as_json, command, eventually, listed, slow_agent_for_listing

from tinyagents import Runtime
from tinyagents.distributed import RedisControl
from tinyagents.distributed.wire import Keys
from tinyagents.errors import ConfigurationError


async def test_a_second_live_process_under_a_worker_id_is_refused_and_the_first_keeps_it(
    redis_url: str, prefix: str
) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(redis_url)
    try:
        async with Runtime() as rt, Runtime() as other_rt:
            await rt.start(slow_agent_for_listing(), "work", tenant_id="acme", run_id="alive")
            first = RedisControl(rt, redis_url, worker_id="w", prefix=prefix, heartbeat_s=0.1)
            await first.start()
            try:
                second = RedisControl(other_rt, redis_url, worker_id="w", prefix=prefix)
                with pytest.raises(ConfigurationError, match="worker id 'w' is in use"):
                    await second.start()
                await second.aclose()  # a refused seat leaves nothing of the first's behind
                keys = Keys(prefix)
                hashed = await eventually(
                    lambda: client.hkeys(keys.runs("w")), lambda names: names == [b"alive"]
                )
                assert hashed == [b"alive"]
                assert await client.zscore(keys.workers, "w") is not None
                assert await client.exists(keys.commands("w")) == 1
            finally:
                await first.aclose()
            # once the first has left, the name is free at once
            again = RedisControl(other_rt, redis_url, worker_id="w", prefix=prefix)
            await again.start()
            await again.aclose()
    finally:
        await client.aclose()


async def test_a_killed_process_seat_is_taken_at_once_by_its_next_process(
    redis_url: str, prefix: str, workers: Any
) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(redis_url)
    try:
        seat = Keys(prefix).seat("a")
        a = await workers("a", redis_url, prefix)
        async with Runtime() as rt:
            live = RedisControl(rt, redis_url, worker_id="a", prefix=prefix)
            with pytest.raises(ConfigurationError, match="in use"):  # a live process on this host
                await live.start()
            await live.aclose()
            holder = await client.get(seat)
            assert holder is not None
            await a.kill()
            # the dead holder's seat without a TTL (as if it had just renewed it, for ever): only
            # taking it over from the gone pid frees it, not its TTL running out
            await client.set(seat, holder)
            restarted = RedisControl(rt, redis_url, worker_id="a", prefix=prefix)
            async with asyncio.timeout(60):  # against a hang, not a timing assertion
                await restarted.start()
            assert await client.get(seat) != holder  # taken over
            await restarted.aclose()
    finally:
        await client.aclose()


async def test_serve_refuses_a_worker_id_a_live_process_holds_with_exit_2(
    redis_url: str, prefix: str, workers: Any, tmp_path: Path
) -> None:
    port = free_port()
    await workers(f"{socket.gethostname()}-{port}-0", redis_url, prefix)
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; from tinyagents.cli import main; sys.exit(main())",
        "serve", "--port", str(port), "--redis", redis_url, "--redis-prefix", prefix,
        "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--insecure-dev",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(server.communicate(), 60)
    assert server.returncode == 2, (out, err)
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert f"worker id '{socket.gethostname()}-{port}-0' is in use" in lines[0]


async def test_a_worker_whose_id_was_taken_while_it_stalled_leaves_the_new_holders_keys_alone(
    redis_url: str, prefix: str
) -> None:
    # as after a stall of its event loop past the TTL, during which a process on another
    # host took the worker id: the stalled one must neither wipe the new holder's listing nor
    # read (or, leaving, delete) its command stream
    import redis.asyncio as aioredis

    keys = Keys(prefix)
    client = aioredis.from_url(redis_url)
    theirs = json.dumps({"run_id": "theirs", "status": "running", "tenant_id": "acme"})
    try:
        async with Runtime() as rt:
            await rt.start(slow_agent_for_listing(), "work", tenant_id="acme", run_id="mine")
            control = RedisControl(rt, redis_url, worker_id="w", prefix=prefix, heartbeat_s=0.1)
            await control.start()
            await eventually(lambda: client.hkeys(keys.runs("w")), lambda n: n == [b"mine"])
            await client.set(keys.seat("w"), "elsewhere:1:seat-x", px=60_000)
            await client.delete(keys.runs("w"))
            await client.hset(keys.runs("w"), "theirs", theirs)
            assert control.connected
            await eventually(lambda: asyncio.sleep(0, control.seat.lost), lambda lost: lost)
            # it serves no cross-worker control any more: /readyz must not say it is ready
            assert not control.connected
            await asyncio.sleep(0.5)  # five heartbeats of the stalled one
            assert await client.hkeys(keys.runs("w")) == [b"theirs"]
            await control.aclose()
            assert await client.hkeys(keys.runs("w")) == [b"theirs"]
            assert await client.exists(keys.commands("w")) == 1
            assert await client.get(keys.seat("w")) == b"elsewhere:1:seat-x"
    finally:
        await client.delete(keys.runs("w"), keys.commands("w"), keys.seat("w"))
        await client.aclose()


async def test_a_worker_stalled_past_its_ttl_is_taken_over_by_nobody_and_comes_back(
    redis_url: str, prefix: str, workers: Any
) -> None:
    # SIGSTOP: the worker's event loop stalls for longer than its TTL (3 s, given here);
    # its seat and listing expire, but nothing takes its runs or its name, and once it
    # runs again it holds its name, lists its runs and answers commands as before
    import redis.asyncio as aioredis

    keys = Keys(prefix)
    client = aioredis.from_url(redis_url)
    try:
        a = await workers("a", redis_url, prefix, ttl_s=3.0)
        b = await workers("b", redis_url, prefix)
        run_id = await a.call("start", run_id="run-s", tenant="acme", turns=400, tick_s=0.02)
        await listed(b, run_id)
        seat = await client.get(keys.seat("a"))
        assert a.proc is not None
        a.proc.send_signal(signal.SIGSTOP)
        try:
            await eventually(lambda: client.exists(keys.seat("a")), lambda n: n == 0)
            # its listing expires after its seat (each write of a changed run renews it): until
            # then a command is sent to it, and, unanswered, is a ReceiptTimeout (it may still be
            # applied once the worker runs again), as it should be
            await eventually(
                lambda: b.call("list", tenant="acme"),
                lambda runs: all(r["run_id"] != run_id for r in runs),
            )
            refused = await b.call("submit", command=as_json(command(run_id, "pause")))
            assert refused["status"] == "rejected" and "not found" in refused["reason"]
        finally:
            a.proc.send_signal(signal.SIGCONT)
        await eventually(lambda: client.get(keys.seat("a")), lambda held: held == seat)
        await listed(b, run_id)
        pause = await b.call("submit", command=as_json(command(run_id, "pause")))
        assert pause["status"] == "accepted", pause
        await eventually(lambda: a.call("status", run_id=run_id), lambda s: s == "paused")
    finally:
        await client.aclose()


async def test_entries_read_as_the_worker_stalled_past_its_ttl_are_left_to_the_new_holder(
    redis_url: str, prefix: str
) -> None:
    """The worker's event loop stalled (SIGSTOP, a long GC) past its seat's TTL, inside a
    blocking read of its command stream that had been handed an entry, and a process on
    another host took the worker id meanwhile (the same consumer name: it reads that entry
    from its backlog too). Resumed, the stalled worker answered the entry before it asked
    whether its seat was still its own: two processes answered one entry (for a thread
    target, each with a run of its own on the thread). It now asks first, finds the seat
    taken, and leaves the entry to the new holder."""
    import time

    import redis.asyncio as aioredis

    keys = Keys(prefix)
    client = aioredis.from_url(redis_url)
    try:
        async with Runtime() as rt:
            await rt.start(slow_agent_for_listing(), "work", tenant_id="acme", run_id="mine")
            control = RedisControl(
                rt, redis_url, worker_id="w", prefix=prefix, heartbeat_s=5, ttl_s=60, block_s=30
            )
            await control.start()

            async def reading() -> bool:
                clients = await client.client_list()
                return any(
                    c.get("name", "").endswith(":w") and c.get("cmd") == "xreadgroup"
                    for c in clients
                )

            await eventually(reading, bool)  # blocked in its read, for up to 30 s
            # the stall: its last word from Redis is an hour old, and its id is another's
            control.seat.confirmed_at = time.monotonic() - 3600
            await client.set(keys.seat("w"), "elsewhere:1:seat-x", px=60_000)
            envelope = {
                "v": "1",
                "request_id": "r-stalled",
                "reply_to": "tester",
                "to": "w",
                "command": command("mine", "pause").model_dump_json(),
            }
            await client.xadd(keys.commands("w"), envelope)
            await eventually(lambda: asyncio.sleep(0, control.seat.lost), lambda lost: lost)
            await control.reader._settle()
            assert control.counters.answered == 0
            assert await client.exists(keys.replies("tester")) == 0
            pending = await client.xpending(keys.commands("w"), "owners")
            assert pending["pending"] == 1  # the new holder reads it from its backlog
            await control.aclose()
    finally:
        await client.delete(keys.runs("w"), keys.commands("w"), keys.seat("w"))
        await client.delete(keys.replies("tester"))
        await client.aclose()
