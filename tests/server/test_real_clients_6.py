"""Real clients, round six: an event stream's client across the workers of one PostgreSQL
store (test_real_clients to _5 have curl, the HTTP libraries, the browser, the CLI and the
clients made from the OpenAPI document)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
from operator_server import BASE, IDLE_S, Served, eventually
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Agent, Runtime
from tinyagents.server import Auth, Control, bind, create_app, serving
from tinyagents.testkit import FunctionModel, reply


@asynccontextmanager
async def _worker(store: str, auth: Auth) -> AsyncIterator[tuple[Runtime, str]]:
    """A runtime on ``store`` served over real HTTP (a worker): it and its URL."""
    async with Runtime(store=store) as runtime:
        control = Control(runtime)
        sock = bind("127.0.0.1", 0)
        async with serving(create_app(control, auth=auth), sock):
            host, port = sock.getsockname()[:2]
            try:
                yield runtime, f"http://{host}:{port}"
            finally:
                control.close()


async def _stream(url: str, token: str, *, last_event_id: int | None = None) -> list[Any]:
    """The messages of ``GET /events?follow=false`` (an ``EventSource``'s reconnect sends
    ``Last-Event-ID``): each as (event, id or None, data)."""
    headers = {"Authorization": f"Bearer {token}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        r = await client.get(f"{BASE}/events", params={"follow": "false"}, headers=headers)
    assert r.status_code == 200, r.text
    messages = []
    for block in r.text.split("\n\n"):
        fields = {
            name: value.removeprefix(" ")
            for name, _, value in (line.partition(":") for line in block.splitlines())
            if name  # a comment (``: keep-alive``) has none
        }
        if "data" in fields:
            data = json.loads(fields["data"])
            event_id = int(fields["id"]) if "id" in fields else None
            messages.append((fields.get("event"), event_id, data))
    return messages


async def test_workers_reaching_one_postgresql_by_two_spellings_name_one_log() -> None:
    """A stream names the log its ids count in (the ``stream`` message's ``log``), from a hash
    of the store's URL text: two workers of one PostgreSQL store whose URLs are spelled
    apart (``postgresql://127.0.0.1:5432/test`` and ``postgres://localhost/test?...``, as
    two hosts' settings may) named two logs, so a client whose reconnect landed on the other
    worker was told its ids were of another log: it dropped every event it held and read the
    whole log again (the console does). One store's log has one name, however its URL is
    written; another schema of the database is another store, and another log."""
    dsn = postgres_dsn()
    assert dsn.startswith("postgresql://") and "127.0.0.1" in dsn, dsn
    schema, other = pg_schema(), pg_schema()
    spelled = f"{dsn}?schema={schema}"
    respelled = (
        f"{dsn.replace('postgresql://', 'postgres://', 1).replace('127.0.0.1', 'localhost')}"
        f"?sslmode=disable&application_name=worker-2&schema={schema}"
    ).replace(":5432/", "/")
    assert respelled != spelled
    auth = Auth(Auth.generate_key())
    token = auth.mint(user="alice", tenant="acme", rights=["agent:observe", "agent:control"])
    try:
        async with AsyncExitStack() as stack:
            (runtime, first), (_, second), (_, elsewhere) = [
                await stack.enter_async_context(_worker(store, auth))
                for store in (spelled, respelled, f"{dsn}?schema={other}")
            ]
            agent = Agent("quick", FunctionModel(lambda request: reply("done"), name="quick-m"))
            await (await runtime.start(agent, "work", tenant_id="acme")).result()

            async def logged() -> list[Any]:  # the run's events, flushed to the store's log
                seen = await _stream(first, token)
                return seen if any(kind == "run.completed" for kind, _, _ in seen) else []

            seen = await eventually(logged)
            ((kind, _, opening), *events) = seen
            assert kind == "stream" and opening["after"] == 0, seen
            assert events and all(event_id is not None for _, event_id, _ in events), seen
            last = max(event_id for _, event_id, _ in events)

            # the client's reconnect lands on the other worker
            ((kind, _, resumed), *more) = await _stream(second, token, last_event_id=last)
            assert kind == "stream"
            assert resumed == {"type": "stream", "log": opening["log"], "after": last}
            assert more == [], more

            ((kind, _, apart), *_rest) = await _stream(elsewhere, token)
            assert kind == "stream" and apart["log"] != opening["log"], (apart, opening)
    finally:
        await drop_pg_schemas()


async def test_a_postgresql_stores_log_keeps_its_name_until_the_store_is_made_anew() -> None:
    """The log's name stays while the store does (a worker reopening it resumes its clients'
    ids) and changes with a store made anew in the same schema, whose ids count from 1 again:
    a client's ids of the old log are none of the new one's."""
    import asyncpg

    from tinyagents.store import PostgresStore

    dsn, schema = postgres_dsn(), pg_schema()

    async def named() -> str:
        store = PostgresStore(f"{dsn}?schema={schema}")
        await store.open()
        try:
            return store.log_name
        finally:
            await store.close()

    try:
        first = await named()
        assert first and await named() == first
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        finally:
            await conn.close()
        assert await named() not in ("", first)
    finally:
        await drop_pg_schemas()


async def _runs_cli(url: str, token: str, *argv: str) -> tuple[int, str, str]:
    """``tinyagents runs ARGV --url URL`` in a subprocess (the server answers in the test's
    loop), the token in ``$TINYAGENTS_TOKEN``: its exit code, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tinyagents", "runs", *argv, "--url", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TINYAGENTS_TOKEN": token},
    )  # fmt: skip
    try:
        async with asyncio.timeout(120):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:  # cancelled (a wait that gave up): not left running
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_run_id_of_dots_is_a_run_the_cli_does_not_find(served: Served) -> None:
    """The CLI sends a run id as one path segment (``A/../B`` names no run rather than B's
    endpoints), but an id that is a whole dot segment, ``.`` or ``..`` (a typo, a shell's
    ``$DIR``), went as itself, which HTTP clients resolve away: ``runs show .`` read the run
    list (``GET /runs``) and said the server answered without the API's JSON, ``runs pause ..``
    posted to ``/api/agents/pause``; each blamed ``--url`` (exit 2). They are runs not found
    (exit 1), as the API says of ``/runs/%2E``, and a command sends nothing to another run."""
    await served.start_run("acme", think_s=IDLE_S)
    token = served.tokens["alice"]
    for run_id in (".", ".."):
        for argv in (("show", run_id), ("tree", run_id), ("pause", run_id)):
            code, out, err = await _runs_cli(served.url, token, *argv, "--json")
            assert code == 1, (argv, code, out, err)
            said = json.loads(out)
            assert said.get("run_id") == run_id or f"run {run_id}" in said.get("reason", ""), said
        code, out, err = await _runs_cli(served.url, token, "show", run_id)
        assert (code, out.strip()) == (1, f"not found: run {run_id}"), (code, out, err)
    r = await served.client.get(f"{BASE}/runs", headers=served.as_("alice"))
    assert all(run["status"] == "running" for run in r.json()), r.json()
