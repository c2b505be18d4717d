"""The testkit's ``OpenAICompatServer`` itself, spoken to over plain HTTP."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tinyagents.harness import ModelResponse, ToolCall
from tinyagents.testkit import Fault, OpenAICompatServer

HELLO = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def post(server: OpenAICompatServer, body: bytes | dict[str, object]) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        url = f"{server.base_url}/chat/completions"
        if isinstance(body, bytes):
            headers = {"Content-Type": "application/json"}
            return await client.post(url, content=body, headers=headers)
        return await client.post(url, json=body)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "a JSON object"),
        (b"{}", "messages"),
        (b'{"messages": "hi"}', "messages"),
    ],
)
async def test_a_bad_body_is_a_400_that_uses_up_no_reply(body: bytes, says: str) -> None:
    async with OpenAICompatServer(["the reply"]) as server:
        bad = await post(server, body)
        good = await post(server, HELLO)

    # a 500 would be retried by every client, each retry taking the next scripted reply
    assert bad.status_code == 400
    error = bad.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert says in error["message"]
    assert good.json()["choices"][0]["message"]["content"] == "the reply"
    assert server.refusals and says in server.refusals[0]


async def test_a_server_entered_again_still_waits_out_a_delay() -> None:
    server = OpenAICompatServer(["first"])
    async with server:
        await post(server, HELLO)
    server.add(Fault(delay_s=600, then="late"))
    async with server:
        waiting = asyncio.create_task(post(server, HELLO))
        await server.wait_for_requests(2)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert waiting.cancelled()  # still inside the delay: nothing was answered
        await server.wait_for_disconnects(1)
    assert server.disconnected == [2]


async def test_a_scripted_callable_that_raises_is_a_400_naming_the_error() -> None:
    def broken(body: dict[str, object]) -> str:
        raise KeyError("tools")

    async with OpenAICompatServer([broken, "the next reply"]) as server:
        failed = await post(server, HELLO)

    # a 500 would be retried, and the retry answered by the next reply as if all went well
    assert failed.status_code == 400
    message = failed.json()["error"]["message"]
    assert "reply 1" in message
    assert "KeyError: 'tools'" in message
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_call_arguments_given_as_json_text_are_sent_as_they_are(stream: bool) -> None:
    # a ToolCall may carry its arguments as the provider's JSON text (see ToolCall)
    call = ToolCall(id="call_1", name="add", args='{"a": 1, "b": 2}')  # type: ignore[arg-type]
    response = ModelResponse(tool_calls=[call], finish_reason="tool_calls")
    async with OpenAICompatServer([response]) as server:
        answer = await post(server, {**HELLO, "stream": stream})

    if stream:
        arguments = ""
        for line in answer.text.splitlines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    for fragment in choice["delta"].get("tool_calls", []):
                        arguments += fragment.get("function", {}).get("arguments", "")
    else:
        message = answer.json()["choices"][0]["message"]
        arguments = message["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"a": 1, "b": 2}


@pytest.mark.parametrize(("method", "path"), [("POST", "/chat/completion"), ("GET", "/models")])
async def test_an_unknown_path_is_a_404_in_openais_error_format(method: str, path: str) -> None:
    async with OpenAICompatServer(["the reply"]) as server:
        async with httpx.AsyncClient() as client:
            missing = await client.request(method, server.base_url + path, json=HELLO)
        good = await post(server, HELLO)

    # e.g. an api_base without /v1: the error says which URL was asked for
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error["message"] == f"Invalid URL ({method} /v1{path})"
    assert error["type"] == "invalid_request_error"
    assert good.json()["choices"][0]["message"]["content"] == "the reply"


def test_a_server_can_serve_again_on_another_event_loop() -> None:
    # e.g. a server made once for a module, entered by tests that each have their own loop
    server = OpenAICompatServer([Fault(delay_s=0.01, then="first"), "second"])

    async def serve_one() -> str:
        async with server:
            answering = asyncio.create_task(post(server, HELLO))
            await server.wait_for_requests(len(server.requests) + 1)
            answer = await answering
        return str(answer.json()["choices"][0]["message"]["content"])

    assert [asyncio.run(serve_one()), asyncio.run(serve_one())] == ["first", "second"]
