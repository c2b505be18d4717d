"""A run snapshot holding a NaN or an infinity (an old run whose cost a provider answered
NaN, saved before such a cost was taken as unknown: SQLite keeps it as a bare ``NaN``) reads
as events do: the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, on every read of the
API (it was ``null`` in ``/runs``, ``/runs/{id}`` and ``/tree``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from operator_server import BASE, _serve
from test_api_run_pages import snap


@pytest.mark.parametrize("store", ["memory://", "sqlite"])
async def test_a_nan_cost_in_a_stored_snapshot_reads_as_the_events_nan(
    tmp_path: Path, store: str
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}" if store == "sqlite" else store
    async for s in _serve(tmp_path, store=url):
        old = snap("r-old", 0)
        old["usage"] = {"cost": math.nan, "tokens": math.inf, "budget": [-math.inf, 1.5]}
        await s.runtime.store.save_runs([old])
        for path in (f"{BASE}/runs", f"{BASE}/runs/r-old", f"{BASE}/runs/r-old/tree"):
            r = await s.client.get(path, headers=s.as_("alice"))
            assert r.status_code == 200, (path, r.text)
            body = r.json()
            run = body[0] if isinstance(body, list) else body
            assert run["run_id"] == "r-old"
            assert run["usage"] == {
                "cost": "NaN",
                "tokens": "Infinity",
                "budget": ["-Infinity", 1.5],
            }, (path, run["usage"])
