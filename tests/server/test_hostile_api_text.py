"""Command text that shows nothing, sent over real HTTP: an instruction made only of
control characters (NUL, BEL, ESC...) is refused as blank, as one made only of whitespace or
zero-width spaces is, and leaves no trace; text with a visible character among them is kept."""

from __future__ import annotations

import pytest
from operator_server import BASE, Served, eventually
from test_api import unchanged

JSON = {"content-type": "application/json"}

# JSON escapes: what a client sends for text it took from a terminal or a binary file
SHOWS_NOTHING = ["\\u0000", "\\u0000\\u0000", "\\u0007\\u001b", "\\u0000 \\n\\t", "\\u007f"]


@pytest.mark.parametrize("text", SHOWS_NOTHING)
async def test_an_instruction_of_control_characters_only_is_refused_and_leaves_no_trace(
    served: Served, text: str
) -> None:
    run = await served.start_run("acme")
    for path, body in (
        ("steer", f'{{"message": "{text}"}}'),
        ("commands", f'{{"kind": "add_instruction", "payload": {{"text": "{text}"}}}}'),
        ("commands", f'{{"kind": "ask_clarifying_question", "payload": {{"question": "{text}"}}}}'),
        ("commands", f'{{"kind": "provide_context", "payload": {{"text": "{text}"}}}}'),
    ):
        r = await served.client.post(
            f"{BASE}/runs/{run.run_id}/{path}",
            content=body.encode(),
            headers={**served.as_("alice"), **JSON},
        )
        assert r.status_code in (400, 422), (path, body, r.status_code, r.text)
        said = r.json()["message"]
        assert "blank" in said or "whitespace" in said, said
    await unchanged(served, run)


async def test_an_instruction_with_a_visible_character_among_control_ones_is_kept(
    served: Served,
) -> None:
    run = await served.start_run("acme")
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer",
        content=b'{"message": "\\u0000a\\u0007"}',
        headers={**served.as_("alice"), **JSON},
    )
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text

    async def steered() -> list[dict[str, object]]:
        r = await served.client.get(
            f"{BASE}/runs/{run.run_id}/steering", headers=served.as_("alice")
        )
        return [c for c in r.json() if c["state"] == "applied"]

    [command] = await eventually(steered)
    assert command["payload_summary"] == {"text": "\x00a\x07"}, command


@pytest.mark.parametrize(
    "message", ["   ", "\\u200b", "\\u202e\\u200d", "\\u0000", "\\u00a0\\u3000"]
)
async def test_steer_with_a_message_that_shows_nothing_is_one_422_naming_the_message(
    served: Served, message: str
) -> None:
    """Whitespace was a 400 naming ``message``; zero-width or control characters a 422 naming
    ``text``, a field of the command the client never sent: one rule, one answer. A 422
    ``invalid_request``, as a missing message is: the body is well-formed JSON (a 400
    ``malformed_request`` is a body that is none)."""
    run = await served.start_run("acme")
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer",
        content=f'{{"message": "{message}"}}'.encode(),
        headers={**served.as_("alice"), **JSON},
    )
    assert r.status_code == 422 and r.json()["type"] == "invalid_request", r.text
    said = r.json()["message"]
    assert said.startswith("message ") and "text" not in said, said
    assert r.json()["detail"][0]["loc"] == ["body", "message"], r.text
    await unchanged(served, run)
