"""Scale-out: the Redis control plane shared by several workers (redis-py, imported lazily).

A complete no-op without a Redis URL: one machine needs nothing but SQLite.
"""
