"""A hostile user's eleventh round at the operator API, over real HTTP: a payload at its
bound in letters of two and four bytes, thirty clients steering one run at once, a pause and a
cancel from two operators at once and a command sent after the cancel settled the run, a
forgotten run's correlation ids, streams resumed from every id of a run's log at once, and a
ticket spent after its run ended."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from operator_server import BASE, IDLE_S, Served, eventually

from tinyagents.steering.policies import DEFAULT_MAX_TEXT_BYTES

#: the bytes of ``{"text":""}``, the payload ``/steer`` makes of a message (compact JSON)
EMPTY_TEXT = len(json.dumps({"text": ""}, separators=(",", ":")).encode())


async def _status(served: Served, run_id: str, who: str = "alice") -> str:
    r = await served.client.get(f"{BASE}/runs/{run_id}", headers=served.as_(who))
    assert r.status_code == 200, r.text[:300]
    return str(r.json()["status"])


async def _steering(served: Served, run_id: str) -> list[dict[str, Any]]:
    r = await served.client.get(
        f"{BASE}/runs/{run_id}/steering", params={"limit": 100}, headers=served.as_("alice")
    )
    assert r.status_code == 200, r.text[:300]
    return list(r.json())


def _ids(stream: str) -> list[int]:
    return [int(line[3:]) for line in stream.splitlines() if line.startswith("id:")]


@pytest.mark.parametrize("letter", ["\u00e9", "\U0001f600"])
async def test_a_message_at_the_payload_bound_in_multibyte_letters_is_taken_one_more_refused(
    served: Served, letter: str
) -> None:
    """Held: the bound is UTF-8 bytes of the payload's JSON, as the console counts them: a
    message of two-byte (``é``) or four-byte (an emoji) letters, topped up with ASCII so its
    payload's JSON is exactly the bound, is accepted; one byte more is a ``rejected`` receipt
    of the payload policy, and the run's history says so of each."""
    run = await served.start_run("acme", think_s=IDLE_S)
    size = len(letter.encode())
    fits = (DEFAULT_MAX_TEXT_BYTES - EMPTY_TEXT) // size
    full = letter * fits + "a" * ((DEFAULT_MAX_TEXT_BYTES - EMPTY_TEXT) % size)
    payload = json.dumps({"text": full}, separators=(",", ":"), ensure_ascii=False)
    assert len(payload.encode()) == DEFAULT_MAX_TEXT_BYTES
    answers = []
    for n, message in ((fits, full), (fits + 1, full + "a")):
        r = await served.client.post(
            f"{BASE}/runs/{run.run_id}/steer",
            json={"message": message, "correlation_id": f"m-{n}"},
            headers=served.as_("alice"),
        )
        assert r.status_code == 200, r.text[:300]
        answers.append(r.json())
    assert [a["status"] for a in answers] == ["accepted", "rejected"], answers
    assert answers[1]["policy_id"] == "payload", answers[1]
    assert str(DEFAULT_MAX_TEXT_BYTES) in answers[1]["reason"], answers[1]
    assert letter not in answers[1]["reason"]  # the refusal does not echo the text
    kept = {c["correlation_id"]: c["state"] for c in await _steering(served, run.run_id)}
    assert kept == {f"m-{fits}": "accepted", f"m-{fits + 1}": "rejected"}, kept


async def test_thirty_clients_steering_one_run_at_once_are_thirty_commands_kept_once(
    served: Served,
) -> None:
    """Held: thirty operators, each on a connection of its own, steer one run in the same
    moment: thirty ``accepted`` receipts, and the run's history holds each command once,
    under its own correlation id, with its own text."""
    run = await served.start_run("acme", think_s=IDLE_S)

    async def steer(i: int) -> httpx.Response:
        async with httpx.AsyncClient(base_url=served.url, timeout=60) as own:
            return await own.post(
                f"{BASE}/runs/{run.run_id}/steer",
                json={"message": f"note {i}", "correlation_id": f"op-{i}"},
                headers=served.as_("alice"),
            )

    answers = await asyncio.gather(*(steer(i) for i in range(30)))
    assert {(r.status_code, r.json()["status"]) for r in answers} == {(200, "accepted")}
    history = await _steering(served, run.run_id)
    ids = [c["correlation_id"] for c in history]
    assert sorted(ids) == sorted(f"op-{i}" for i in range(30)), ids
    for c in history:
        assert c["payload_summary"] == {"text": f"note {c['correlation_id'][3:]}"}, c


async def test_a_command_sent_after_another_operators_cancel_settled_the_run_fails_as_finished(
    served: Served,
) -> None:
    """Held: one operator pauses while another cancels, at once: both are answered, the run
    ends ``cancelled`` (not left paused). An instruction a third sends once it has ended is
    answered and then told it failed (``target finished before delivery``), never left open;
    sent again with its correlation id it is a ``duplicate``, not a second command."""
    run = await served.start_run("acme", think_s=IDLE_S)
    paused, cancelled = await asyncio.gather(
        served.client.post(f"{BASE}/runs/{run.run_id}/pause", headers=served.as_("alice")),
        served.client.post(
            f"{BASE}/runs/{run.run_id}/abort",
            json={"delivery": "immediate"},
            headers=served.as_("alice"),
        ),
    )
    assert paused.status_code == cancelled.status_code == 200, (paused.text, cancelled.text)
    assert cancelled.json()["status"] == "accepted", cancelled.text
    await eventually(lambda: _status_is(served, run.run_id, "cancelled"))

    late = {"message": "one more thing", "correlation_id": "late-1"}
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json=late, headers=served.as_("alice")
    )
    assert r.status_code == 200 and r.json()["status"] in ("accepted", "rejected"), r.text

    async def settled() -> dict[str, Any] | None:
        for c in await _steering(served, run.run_id):
            if c["correlation_id"] == "late-1" and c["state"] in ("failed", "rejected"):
                return c
        return None

    command = await eventually(settled)
    if command["state"] == "failed":
        assert "finished" in (command["events"][-1]["reason"] or ""), command
    again = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json=late, headers=served.as_("alice")
    )
    assert again.json()["status"] == "duplicate", again.text
    assert served.runtime.open_commands() == []
    assert await _status(served, run.run_id) == "cancelled"


async def _status_is(served: Served, run_id: str, status: str) -> bool:
    return await _status(served, run_id) == status


async def test_a_forgotten_runs_correlation_ids_still_answer_duplicate(served: Served) -> None:
    """Held: once a cancelled run is released from memory (``Runtime.forget``) and read from
    the store, a retry of an instruction sent while it ran is a ``duplicate`` (the stored log
    knows its id), a new one is ``rejected`` saying the run finished, and another tenant's
    command to it is a 404, as to any run it may not see."""
    run = await served.start_run("acme", think_s=IDLE_S)
    sent = {"message": "before the end", "correlation_id": "kept-1"}
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json=sent, headers=served.as_("alice")
    )
    assert r.json()["status"] == "accepted", r.text
    await served.client.post(
        f"{BASE}/runs/{run.run_id}/abort",
        json={"delivery": "immediate"},
        headers=served.as_("alice"),
    )
    await eventually(lambda: _status_is(served, run.run_id, "cancelled"))
    await eventually(lambda: served.runtime.open_commands() == [])
    served.runtime.forget(run.run_id)

    retry = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json=sent, headers=served.as_("alice")
    )
    assert retry.json()["status"] == "duplicate", retry.text
    new = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json={"message": "after"}, headers=served.as_("alice")
    )
    assert new.json()["status"] == "rejected", new.text
    assert "finished" in new.json()["reason"], new.text
    foreign = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json={"message": "x"}, headers=served.as_("bob")
    )
    assert foreign.status_code == 404, foreign.text
    assert [c["correlation_id"] for c in await _steering(served, run.run_id)].count("kept-1") == 1


async def test_streams_resumed_from_every_id_of_a_runs_log_at_once_each_send_the_rest(
    served: Served,
) -> None:
    """Held: one connection per event of a run's log, all at once, each resuming after that
    event (``Last-Event-ID``, as a reconnecting ``EventSource`` sends it): each sends exactly
    the run's events after it, in order, none twice; after the last one, none."""
    run = await served.start_run("acme", think_s=IDLE_S)
    for i in range(4):
        await served.client.post(
            f"{BASE}/runs/{run.run_id}/steer",
            json={"message": f"n{i}"},
            headers=served.as_("alice"),
        )
    params = {"run_id": run.run_id, "follow": "false"}

    async def logged() -> list[int]:
        r = await served.client.get(f"{BASE}/events", params=params, headers=served.as_("alice"))
        steered = r.text.count("event: steering.accepted")
        return _ids(r.text) if steered == 4 else []

    ids = await eventually(logged)  # (the log is written after the receipts are sent)
    assert ids == sorted(set(ids)), ids

    async def resumed(after: int) -> list[int]:
        async with httpx.AsyncClient(base_url=served.url, timeout=60) as own:
            r = await own.get(
                f"{BASE}/events",
                params=params,
                headers={**served.as_("alice"), "Last-Event-ID": str(after)},
            )
            assert r.status_code == 200, r.text[:300]
            return _ids(r.text)

    answers = await asyncio.gather(*(resumed(after) for after in ids))
    for after, got in zip(ids, answers, strict=True):
        assert got == [i for i in ids if i > after], (after, got)


async def test_a_ticket_spent_after_its_run_ended_sends_the_run_to_its_end(
    served: Served,
) -> None:
    """Held: a ticket asked for while the run ran and spent once it was cancelled opens the
    stream; its backlog ends with the run's end, and the ticket is then used up."""
    run = await served.start_run("acme", think_s=IDLE_S)
    r = await served.client.post(
        f"{BASE}/events/tickets", json={"run_id": run.run_id}, headers=served.as_("alice")
    )
    assert r.status_code == 201, r.text
    ticket = r.json()["ticket"]
    await served.client.post(
        f"{BASE}/runs/{run.run_id}/abort",
        json={"delivery": "immediate"},
        headers=served.as_("alice"),
    )
    await eventually(lambda: _status_is(served, run.run_id, "cancelled"))

    async def logged() -> bool:  # (the log is written after the snapshot says cancelled)
        r = await served.client.get(
            f"{BASE}/events",
            params={"run_id": run.run_id, "follow": "false"},
            headers=served.as_("alice"),
        )
        return "event: run.cancelled" in r.text

    await eventually(logged)
    query = {"ticket": ticket, "run_id": run.run_id, "follow": "false"}
    stream = await served.client.get(f"{BASE}/events", params=query)
    assert stream.status_code == 200, stream.text[:300]
    types = [line[6:].strip() for line in stream.text.splitlines() if line.startswith("event:")]
    assert "run.started" in types and "run.cancelled" in types, types
    again = await served.client.get(f"{BASE}/events", params=query)
    assert again.status_code == 401 and "already used" in again.json()["message"], again.text
