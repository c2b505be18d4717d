"""The tests' own ``redis-server`` (``RedisServer``) starts even when another process takes
its port between the pick and redis-server's bind."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import redis.asyncio as aioredis
from conftest import RedisServer


def occupy(port: int) -> socket.socket:
    """Listen on ``port`` as another process would (redis-server cannot bind it then)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


async def serving_pid(url: str) -> int:
    client = aioredis.from_url(url)
    try:
        return int((await client.info("server"))["process_id"])
    finally:
        await client.aclose()


async def test_a_first_start_whose_port_was_taken_starts_on_another(tmp_path: Path) -> None:
    """The port picked was taken before redis-server bound it: redis-server exits, and the
    start failed after waiting 10 s. It starts again on a new port."""
    server = RedisServer(tmp_path)
    taken = server.port
    with occupy(taken):
        await asyncio.wait_for(server.start(), 60)  # a hang guard
        try:
            assert server.port != taken and server.launches >= 2
            assert server.proc is not None
            assert await serving_pid(server.url) == server.proc.pid
        finally:
            await server.stop()


async def test_a_restart_whose_port_is_taken_for_a_while_waits_for_it(tmp_path: Path) -> None:
    """A restart keeps its port (the clients hold the URL): taken for a while, it is tried
    again until free."""
    server = RedisServer(tmp_path)
    await server.start()
    port = server.port
    await server.stop()
    sock = occupy(port)
    launches = server.launches
    restart = asyncio.ensure_future(server.start())
    try:
        async with asyncio.timeout(60):  # a hang guard, not a timing assertion
            while server.launches < launches + 2:  # noqa: ASYNC110 - redis-server runs apart
                await asyncio.sleep(0.01)
        assert not restart.done()
    finally:
        sock.close()
    try:
        await asyncio.wait_for(restart, 60)  # a hang guard
        assert server.port == port and server.proc is not None
        assert await serving_pid(server.url) == server.proc.pid
    finally:
        await server.stop()
