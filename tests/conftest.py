"""Shared test set-up: offline litellm, deterministic hypothesis profile, service URLs."""

from __future__ import annotations

import os

# Before anything can import litellm: never fetch the model cost map from the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    deadline=None,  # shared CI machines are noisy: no per-example timing
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("default")

REDIS_URL = os.environ.get("TINYAGENTS_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "TINYAGENTS_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
