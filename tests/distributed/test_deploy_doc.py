"""docs/deploy.md's compose file is valid YAML with the two services the workers need, and
its tables name the Redis keys RedisControl writes."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tinyagents.distributed.wire import GROUP, Keys

DOC = Path(__file__).parents[2] / "docs" / "deploy.md"


def test_the_compose_file_runs_redis_without_persistence_and_postgres_with_a_volume() -> None:
    (block,) = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    compose = yaml.safe_load(block)
    redis, postgres = compose["services"]["redis"], compose["services"]["postgres"]
    assert redis["image"].startswith("redis:") and "6379:6379" in redis["ports"]
    assert "--save" in redis["command"] and "healthcheck" in redis
    assert postgres["image"].startswith("postgres:") and "5432:5432" in postgres["ports"]
    assert postgres["volumes"] == ["pgdata:/var/lib/postgresql/data"]
    assert "pgdata" in compose["volumes"]


def test_the_documented_keys_are_the_ones_written() -> None:
    text = DOC.read_text()
    keys = Keys("{prefix}")
    for key in (
        keys.workers,
        keys.runs("{worker}"),
        keys.commands("{worker}"),
        keys.replies("{worker}"),
        keys.seat("{worker}"),
    ):
        assert f"`{key}`" in text
    assert f"consumer group `{GROUP}`" in text
