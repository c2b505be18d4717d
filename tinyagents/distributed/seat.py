"""``Seat``: one live process per worker id on a Redis control plane.

A worker id names a command stream (read in the consumer group as one consumer), a listing
hash and a reply stream. Two live processes under one id would read each other's commands
(and answer them "not found"), wipe each other's runs off the listing at every heartbeat and
delete each other's stream on leaving. So a worker holds its id: the key
``Keys.seat(worker)`` holds ``HOST:PID:NONCE`` of the process that has it, with an expiry of
``ttl_s`` renewed at every heartbeat (``renew_script``, in the mirror's pipeline).

``claim`` takes the seat when it is free, or when its holder is gone: on this host its pid
decides at once (a worker that ``serve`` restarts after a crash gets its name back without
waiting); a holder on another host is gone when its key expires, waited for up to
``ttl_s + heartbeat_s``. A holder still alive then is refused with ``ConfigurationError``.
A process that finds its seat taken at a heartbeat (it stalled past ``ttl_s`` and another
process took the id meanwhile) is ``lost``: it stops writing and reading under that id.
"""

from __future__ import annotations

import asyncio
import time

from tinyagents import _clock
from tinyagents.distributed._base import Redis, log
from tinyagents.errors import ConfigurationError
from tinyagents.store.checkpoint._lease import HOST, holder_gone, process_token, token_process

#: Renews the seat of ``ARGV[1]`` (or takes it, free): 1, or 0 when another process holds it.
RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
#: Takes the seat from the gone holder ``ARGV[2]`` (unless someone else took it meanwhile).
_TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  return 1
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
#: The seats the processes' own ``Seat``s hold: a holder with this process's pid that is not
#: among them was an earlier process's (a container restarted with the same pid).
_HELD: set[str] = set()


class Seat:
    def __init__(self, key: str, worker_id: str, *, ttl_s: float, heartbeat_s: float) -> None:
        self.key, self.worker_id = key, worker_id
        self.ttl_s, self.heartbeat_s = ttl_s, heartbeat_s
        self.token = process_token(_clock.new_id("seat"))
        #: Another live process holds the id now: this one must not write or read under it.
        self.lost = False
        #: When the seat was last found ours (``time.monotonic``).
        self.confirmed_at = 0.0

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl_s * 1000)

    async def claim(self, redis: Redis) -> None:
        """Take the seat; ``ConfigurationError`` when a live process holds it."""
        deadline = time.monotonic() + self.ttl_s + self.heartbeat_s
        while True:
            if await redis.set(self.key, self.token, nx=True, px=self.ttl_ms):
                break
            raw = await redis.get(self.key)
            if raw is None:
                continue  # expired in between
            # no UTF-8 text (a hand edit): no process's token, so none this host can tell gone;
            # waited for as another host's holder is, then refused naming what it holds
            holder = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
            if _gone(holder):
                if await redis.eval(_TAKE_OVER, 1, self.key, self.token, holder, self.ttl_ms):
                    break
                continue  # another process took it in between: look at it again
            if _here(holder) or time.monotonic() >= deadline:
                raise ConfigurationError(
                    f"worker id {self.worker_id!r} is in use on this Redis by a live process "
                    f"({holder}): give each worker a name of its own (serve names its workers "
                    "HOST-PORT-INDEX: give the machines distinct host names) or another "
                    "--redis-prefix"
                )
            await asyncio.sleep(self.heartbeat_s / 2)
        _HELD.add(self.token)
        self.confirmed_at = time.monotonic()

    async def check(self, redis: Redis) -> bool:
        """Whether the seat is still this process's: asked of Redis (and renewed) only when
        the last heartbeat's answer is older than ``ttl_s / 2``, as after a stall of the
        event loop, when another process may have taken the id meanwhile."""
        if not self.lost and time.monotonic() - self.confirmed_at > self.ttl_s / 2:
            self.renewed(await redis.eval(RENEW, 1, self.key, self.token, self.ttl_ms))
        return not self.lost

    def renewed(self, held: object) -> None:
        """The answer of ``RENEW`` at a heartbeat: 0 means another process holds the id."""
        if held and not self.lost:
            self.confirmed_at = time.monotonic()
        if held or self.lost:
            return
        self.lost = True
        log.error(
            "worker %s: another process took this worker id (this one stalled past its "
            "heartbeat TTL?): this worker stops serving commands from Redis",
            self.worker_id,
        )

    async def release(self, redis: Redis) -> None:
        _HELD.discard(self.token)
        await redis.eval(_RELEASE, 1, self.key, self.token)

    def forget(self) -> None:
        _HELD.discard(self.token)


def _gone(holder: str) -> bool:
    """Whether the holder is a process of this host that is no longer running."""
    return holder_gone(holder, _HELD)


def _here(holder: str) -> bool:
    parsed = token_process(holder)
    return parsed is not None and parsed[0] == HOST
