"""A hostile user's twelfth round at the operator API, over real HTTP: a listing's cursor
that decodes to JSON nested past the parser. (The library's probes of this round are in
``tests/test_hostile_probes_12.py``.)"""

from __future__ import annotations

import base64

import pytest
from operator_server import BASE, Served

pytestmark = pytest.mark.usefixtures("default_recursion_limit")


@pytest.mark.parametrize("depth", [1_200, 1_500])
async def test_a_cursor_nested_past_the_json_parser_is_a_422_not_a_500(
    served: Served, depth: int
) -> None:
    """Found: ``GET /runs?cursor=`` of base64 for ``[`` 1,200 times (1,600 characters, under
    the cursor's bound) was a 500: the cursor's JSON raised ``RecursionError``, which is no
    ``ValueError``. It is a cursor this server never handed out, a 422 as any other."""
    cursor = base64.urlsafe_b64encode(b"[" * depth).rstrip(b"=").decode()
    r = await served.client.get(f"{BASE}/runs?cursor={cursor}", headers=served.as_("alice"))
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert "cursor" in r.json()["message"], r.text[:300]
