"""Schemathesis against the published OpenAPI document: no input makes the server answer 5xx.

The server runs in a thread of its own (schemathesis calls it synchronously) on a free loopback
port, with live runs of the token's tenant; about half of the generated requests are pointed at
one of those runs (the rest at whatever run id schemathesis made up), so the command bodies reach
the real policy pipeline. The event stream is asked for its backlog only (``follow=false``):
followed, it would never end.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from operator_server import busy_agent
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from tinyagents import Runtime
from tinyagents.server import BASE, Auth, Control, bind, create_app, serving


@dataclass(slots=True)
class Background:
    url: str
    token: str
    run_ids: list[str]


@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Background]:
    store = f"sqlite:///{tmp_path_factory.mktemp('schemathesis') / 'runs.db'}"
    auth = Auth(Auth.generate_key())
    ready: dict[str, Any] = {}
    started, stop = threading.Event(), threading.Event()

    async def main() -> None:
        try:
            async with Runtime(store=store) as runtime:
                handles = [
                    await runtime.start(busy_agent(think_s=0.05), "work", tenant_id="acme")
                    for _ in range(3)
                ]
                control = Control(runtime, listing_wait_s=0.05)  # most runs it names: none
                sock = bind("127.0.0.1", 0)
                async with serving(create_app(control, auth=auth), sock):
                    host, port = sock.getsockname()[:2]
                    ready["value"] = Background(
                        url=f"http://{host}:{port}",
                        token=auth.mint(
                            user="fuzz", tenant="acme", rights=["agent:observe", "agent:control"]
                        ),
                        run_ids=[h.run_id for h in handles],
                    )
                    started.set()
                    await asyncio.to_thread(stop.wait)
                for h in handles:
                    if h.task is not None:
                        h.task.cancel()
                control.close()
        finally:
            started.set()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    started.wait(30)
    assert "value" in ready, "the background server did not start"
    yield ready["value"]
    stop.set()
    thread.join(60)


def operations(url: str) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{url}{BASE}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def fuzz(operation: Any, background: Background, headers: dict[str, str]) -> None:
    """Generated requests for one operation, valid and invalid ones; fails on the first 5xx
    (shrunk to a small one)."""

    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(case=cases, real=st.sampled_from([None, *background.run_ids]))
    def check(case: Any, real: str | None) -> None:
        if real is not None and "run_id" in (case.path_parameters or {}):
            case.path_parameters["run_id"] = real
        if operation.path.endswith("/events"):
            case.query = {**(case.query or {}), "follow": "false"}
        response = case.call(base_url=background.url, headers=headers, timeout=60)
        case.validate_response(response, checks=[not_a_server_error])

    check()


def test_no_generated_request_gets_a_5xx(background: Background) -> None:
    headers = {"Authorization": f"Bearer {background.token}"}
    ops = operations(background.url)
    assert len(ops) >= 12
    for operation in ops:
        fuzz(operation, background, headers)


def test_the_document_is_served_where_the_docs_say(background: Background) -> None:
    ops = operations(background.url)
    paths = {op.path for op in ops}
    assert f"{BASE}/runs/{{run_id}}/steer" in paths and f"{BASE}/events" in paths
