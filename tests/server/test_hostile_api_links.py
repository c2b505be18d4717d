"""The ``Link: <...>; rel="next"`` of a page of a run whose id is not plain ASCII (the id rule
takes any printable text): the run's id is percent-encoded in the link, so the header is ASCII
and following it gives the next page. It was the decoded path: a character past Latin-1 (an
emoji, a CJK letter) made every paged read of the run a 500, and a space or a Latin-1 letter made a
link no client could follow."""

from __future__ import annotations

import pytest
from operator_server import BASE, Served, busy_agent, eventually

ODD_IDS = ["r-\u00e9\U0001f600", "r-\u4e2dx", "r-a b", "r-\u00ff", "r-%41", "r-a?b#c"]


def encoded(run_id: str) -> str:
    """``run_id`` as one URL path segment (what a client sends)."""
    from urllib.parse import quote

    return quote(run_id, safe="")


@pytest.mark.parametrize("run_id", ODD_IDS)
async def test_a_trace_page_of_an_odd_run_id_links_to_its_next_page(
    served: Served, run_id: str
) -> None:
    await served.runtime.start(busy_agent(), "work", tenant_id="acme", run_id=run_id)
    path = f"{BASE}/runs/{encoded(run_id)}/trace"

    async def paged() -> str | None:
        r = await served.client.get(path, params={"limit": 1}, headers=served.as_("alice"))
        assert r.status_code == 200, r.text
        return r.headers.get("link")

    link = await eventually(paged)  # once the run has logged two frames
    link.encode("ascii")  # a header value a client reads as it was sent
    first = (await served.client.get(path, params={"limit": 1}, headers=served.as_("alice"))).json()
    following = await served.client.get(link[1 : link.index(">")], headers=served.as_("alice"))
    assert following.status_code == 200, following.text
    [older] = following.json()
    assert older["run_id"] == run_id and older["id"] < first[0]["id"]


@pytest.mark.parametrize("run_id", ODD_IDS[:3])
async def test_a_steering_page_of_an_odd_run_id_links_to_its_next_page(
    served: Served, run_id: str
) -> None:
    await served.runtime.start(busy_agent(), "work", tenant_id="acme", run_id=run_id)
    path = f"{BASE}/runs/{encoded(run_id)}"
    for message in ("one", "two"):
        r = await served.client.post(
            f"{path}/steer", json={"message": message}, headers=served.as_("alice")
        )
        assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    r = await served.client.get(
        f"{path}/steering", params={"limit": 1}, headers=served.as_("alice")
    )
    assert r.status_code == 200, r.text
    link = r.headers["link"]
    link.encode("ascii")
    following = await served.client.get(link[1 : link.index(">")], headers=served.as_("alice"))
    assert following.status_code == 200, following.text
    [older] = following.json()
    assert older["payload_summary"] == {"text": "one"}, older
