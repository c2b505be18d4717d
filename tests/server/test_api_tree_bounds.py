"""``GET /runs/{id}/tree`` is bounded: at most ``?limit=`` runs of the tree are read (default
1000, at most 10,000), and the answer says ``truncated: true`` when the tree holds more (the
runs left out are listed by ``/runs?root_run_id=``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from operator_server import BASE, _serve
from test_api_run_pages import snap

from tinyagents.server import Control
from tinyagents.store import SqliteStore


class CountingStore(SqliteStore):
    """A SQLite store that counts the run rows its listings hand back."""

    rows_read = 0

    async def list_runs(self, **kw: Any) -> Any:
        rows = await super().list_runs(**kw)
        self.rows_read += len(rows)
        return rows


def family(n: int) -> list[dict[str, Any]]:
    """A root and ``n`` children of it, each child one second younger."""
    return [snap("r-root", 0), *(snap(f"r-{i:05d}", i + 1, root="r-root") for i in range(n))]


def count(node: dict[str, Any]) -> int:
    return 1 + sum(count(c) for c in node["children"])


async def test_a_tree_reads_at_most_its_limit_of_runs(tmp_path: Path) -> None:
    """The tree read every run of the root's tree, a thousand at a time, on each request: a
    run that fanned out to 100,000 sub-runs answered with all of them."""
    store = CountingStore(tmp_path / "runs.db")
    await store.open()
    try:
        await store.save_runs(family(2500))
        control = Control(store=store)
        store.rows_read = 0
        tree = await control.tree("r-root", tenant_id="acme", limit=100)
        assert tree is not None
        assert tree["truncated"] is True and count(tree) <= 100
        assert store.rows_read <= 110, store.rows_read
        whole = await control.tree("r-root", tenant_id="acme", limit=5000)
        assert whole is not None and whole["truncated"] is False and count(whole) == 2501
    finally:
        await store.close()


async def test_the_tree_endpoint_takes_a_limit_and_says_when_it_left_runs_out(
    tmp_path: Path,
) -> None:
    async for s in _serve(tmp_path, store=f"sqlite:///{tmp_path / 'runs.db'}"):
        await s.runtime.store.save_runs(family(30))
        path = f"{BASE}/runs/r-root/tree"
        r = await s.client.get(path, headers=s.as_("alice"))
        assert r.status_code == 200, r.text
        assert r.json()["truncated"] is False and count(r.json()) == 31
        r = await s.client.get(f"{path}?limit=10", headers=s.as_("alice"))
        assert r.status_code == 200, r.text
        tree = r.json()
        assert tree["run_id"] == "r-root" and tree["truncated"] is True
        assert 1 <= count(tree) <= 10
        assert all("truncated" not in c for c in tree["children"])
        for query in ("limit=0", "limit=10001", "limit=x", "limit=1&limit=2"):
            r = await s.client.get(f"{path}?{query}", headers=s.as_("alice"))
            assert r.status_code == 422, (query, r.text)
        r = await s.client.get(f"{path}?limit=10", headers=s.as_("bob"))
        assert r.status_code == 404
        doc = (await s.client.get(f"{BASE}/openapi.json")).json()
        params = {
            p["name"]: p for p in doc["paths"][f"{BASE}/runs/{{run_id}}/tree"]["get"]["parameters"]
        }
        assert params["limit"]["schema"]["default"] == 1000
        assert params["limit"]["schema"]["maximum"] == 10000
