"""Real clients, round nine: two operators retrying one instruction with the CLI at the same
moment, the CLI's instruction at the payload bound in emoji, and an ``aiohttp`` stream
following one run through a burst of instructions from twenty clients (test_real_clients to
_8 have the routes, heads, caches, reconnects, races, pages and the CLI's help and tokens)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from operator_server import BASE, IDLE_S, Served

from tinyagents.steering.policies import DEFAULT_MAX_TEXT_BYTES

TINYAGENTS = Path(sys.executable).with_name("tinyagents")


async def _cli(served: Served, *args: str) -> tuple[int, str, str]:
    """``tinyagents runs ARGS --url`` as alice: exit code, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        str(TINYAGENTS), "runs", *args, "--url", served.url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TINYAGENTS_TOKEN": served.tokens["alice"], "COLUMNS": "200"},
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_two_operators_retrying_one_instruction_with_the_cli_at_once_send_it_once(
    served: Served,
) -> None:
    """Two ``tinyagents runs steer --correlation-id`` processes started together (two
    operators, or a script's retry racing its first try): both exit 0, one told
    ``accepted``, the other ``duplicate``; the run's history holds the instruction once."""
    run = await served.start_run("acme", think_s=IDLE_S)
    argv = ("steer", run.run_id, "look at billing first", "--correlation-id", "ops-7", "--json")
    answers = await asyncio.gather(_cli(served, *argv), _cli(served, *argv))
    assert [code for code, _, _ in answers] == [0, 0], answers
    statuses = sorted(json.loads(out)["status"] for _, out, _ in answers)
    assert statuses == ["accepted", "duplicate"], answers
    history = served.runtime.steering_history(run.run_id)
    assert [e.correlation_id for e in history if e.type == "steering.accepted"] == ["ops-7"]


async def test_the_clis_instruction_at_the_payload_bound_in_emoji_is_sent_one_more_refused(
    served: Served,
) -> None:
    """An instruction of emoji given on the command line (four UTF-8 bytes each), topped up
    with ASCII so its payload's JSON is exactly the payload bound, is sent (exit 0); one
    byte more is refused by the payload policy: exit 1 and one line saying the bound, not
    the text."""
    run = await served.start_run("acme", think_s=IDLE_S)
    empty = len(json.dumps({"text": ""}, separators=(",", ":")).encode())
    full = "\U0001f600" * ((DEFAULT_MAX_TEXT_BYTES - empty) // 4)
    full += "a" * ((DEFAULT_MAX_TEXT_BYTES - empty) % 4)
    payload = json.dumps({"text": full}, separators=(",", ":"), ensure_ascii=False)
    assert len(payload.encode()) == DEFAULT_MAX_TEXT_BYTES
    code, out, err = await _cli(served, "steer", run.run_id, full, "--json")
    assert code == 0 and json.loads(out)["status"] == "accepted", (code, out, err)
    code, out, err = await _cli(served, "steer", run.run_id, full + "a")
    assert code == 1, (code, out, err)
    said = (out + err).strip()
    assert "rejected" in said and str(DEFAULT_MAX_TEXT_BYTES) in said, said
    assert "\U0001f600" not in said and len(said.splitlines()) == 1, said


async def test_an_aiohttp_stream_follows_a_burst_of_twenty_clients_instructions_each_once(
    served: Served,
) -> None:
    """A following stream opened with a ticket (as a browser's would be) reads one run while
    twenty clients, each on its own connection, send it an instruction at once: the stream
    shows each one's ``steering.accepted`` once, with strictly rising ids."""
    run = await served.start_run("acme", think_s=IDLE_S)
    r = await served.client.post(
        f"{BASE}/events/tickets", json={"run_id": run.run_id}, headers=served.as_("alice")
    )
    ticket = r.json()["ticket"]

    async def steer(i: int) -> str:
        async with httpx.AsyncClient(base_url=served.url, timeout=60) as own:
            r = await own.post(
                f"{BASE}/runs/{run.run_id}/steer",
                json={"message": f"burst {i}", "correlation_id": f"b-{i}"},
                headers=served.as_("alice"),
            )
            assert r.json()["status"] == "accepted", r.text
            return str(r.json()["correlation_id"])

    async with aiohttp.ClientSession() as session:
        params = {"ticket": ticket, "run_id": run.run_id}
        async with session.get(f"{served.url}{BASE}/events", params=params) as stream:
            assert stream.status == 200, await stream.text()
            sent = set(await asyncio.gather(*(steer(i) for i in range(20))))
            seen: list[str] = []
            ids: list[int] = []
            message: dict[str, Any] = {}
            async with asyncio.timeout(60):  # a bound on a hang, not a timing
                while len(seen) < 20:
                    line = (await stream.content.readline()).decode()
                    assert line, "the stream ended"
                    field, _, value = line.rstrip("\n").partition(": ")
                    if field in ("id", "event", "data"):
                        message[field] = value
                    elif line == "\n":
                        if "id" in message:
                            ids.append(int(message["id"]))
                        if message.get("event") == "steering.accepted":
                            seen.append(json.loads(message["data"])["correlation_id"])
                        message = {}
    assert sorted(seen) == sorted(sent), seen
    assert ids == sorted(set(ids)), ids
