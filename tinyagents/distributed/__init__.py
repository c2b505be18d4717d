"""Scale-out: the Redis control plane shared by several workers (redis-py, imported lazily).

A complete no-op without a Redis URL: one machine needs nothing but SQLite. See
docs/deploy.md for how workers are run and what each service stores.
"""

from tinyagents.distributed._base import ControlledRuntime, RedisCounters
from tinyagents.distributed.redis_control import RedisControl

__all__ = ["ControlledRuntime", "RedisControl", "RedisCounters"]
