"""Fixtures of the operator server tests (the helpers live in ``operator_server``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from operator_server import Served, served_app


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """A runtime on a SQLite file, served over real HTTP with Biscuit auth; tokens ``alice``
    (acme, observe+control), ``olga`` (acme, observe), ``bob`` (globex, observe+control) and
    ``root`` (globex, iam:admin)."""
    async for s in served_app(tmp_path):
        yield s
