"""Errors say what happened: each failure of a real HTTP call through litellm (the testkit
server's faulty mode) is its own ``ModelError`` subclass that names the model and the
``api_base``, gives the advice that fits, and is retried only if retrying can help.

Before, a refused connection, a missing key and a 200 that is not JSON were all "HTTP 500 ...
the provider may be down or rate-limiting", and an empty ``choices`` list was an IndexError.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import asyncio
import gc
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest

import tinyagents
from tinyagents import Agent, LiteLLMModel, RunLimits, RunStatus, Runtime
from tinyagents.errors import (
    MissingAPIKeyError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelEmptyResponse,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelRequestRejected,
    ModelResponseNotJSON,
    ModelServerError,
    ModelTimeoutError,
)
from tinyagents.harness import Message, ModelRequest
from tinyagents.testkit import ErrorReply, Fault, OpenAICompatServer

MODEL = "openai/test-model"


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text)])


def slow_or_next(body: dict[str, Any]) -> Fault | str:
    if body["messages"][-1]["content"] == "slow":
        return Fault(delay_s=60, then="late")
    return "next"


@dataclass
class Case:
    reply: Any
    error: type[ModelError]
    advice: str
    retried: bool
    settings: dict[str, Any] = field(default_factory=dict)


CASES = {
    "a 200 that is not JSON": Case(
        Fault(body="<html><body>Welcome to nginx!</body></html>"),
        ModelResponseNotJSON,
        "usually ends in /v1",
        retried=False,
    ),
    # JSON cut short (a server or proxy bug: the body ended where its length said) was
    # "failed with HTTP 500 ... the server's log says why" and retried: no 500 was answered,
    # and the same request gets the same body.
    "a 200 with JSON cut short": Case(
        Fault(body='{"id": "chatcmpl-1", "choices": [', content_type="application/json"),
        ModelResponseNotJSON,
        "a body that is not whole JSON",
        retried=False,
    ),
    "a 200 whose body is no UTF-8": Case(
        Fault(body=b'{"id": "\xff\xfe", "choices": [', content_type="application/json"),
        ModelResponseNotJSON,
        "not retried",
        retried=False,
    ),
    # the connection closed before the body's Content-Length was sent: a server that died
    # mid-answer (or was restarted), which another attempt may well find back up. It was
    # "nothing answered at ...: is the server running and listening at that address?"
    "a connection reset mid-body": Case(
        Fault(cut_after=40, then="a complete answer"),
        ModelConnectionError,
        "the connection closed mid-answer",
        retried=True,
    ),
    "an empty choices list": Case(
        Fault(empty_choices=True), ModelEmptyResponse, "no choices", retried=False
    ),
    "a timeout": Case(
        Fault(delay_s=60, then="too late"),
        ModelTimeoutError,
        "raise timeout_s",
        retried=True,
        settings={"timeout_s": 1},
    ),
    # A server that answers a byte at a time: httpx's timeout bounds each read, so timeout_s
    # never ran out and the request took as long as the server pleased (an answer that never
    # ends never failed), though timeout_s bounds a whole request.
    "an answer that never ends": Case(
        Fault(drip_s=0.05, then="a long answer " * 20),
        ModelTimeoutError,
        "raise timeout_s",
        retried=True,
        settings={"timeout_s": 1},
    ),
    # The server (or a proxy in front of it) answered 408 at once: it was told "did not answer
    # within litellm's default timeout: raise timeout_s", which no timeout_s would change.
    "HTTP 408 from the server": Case(
        ErrorReply(status=408, message="upstream gave up", type="timeout"),
        ModelTimeoutError,
        "answered HTTP 408 (litellm.Timeout: Timeout Error: OpenAIException - upstream gave up)",
        retried=True,
    ),
    "HTTP 401": Case(
        ErrorReply(status=401, message="invalid key", type="authentication_error"),
        ModelAuthenticationError,
        "check api_key",
        retried=False,
    ),
    "HTTP 403": Case(ErrorReply(status=403), ModelAuthenticationError, "key", retried=False),
    "HTTP 404 (unknown model)": Case(
        ErrorReply(status=404, message="model 'test-model' not found", type="not_found_error"),
        ModelNotFoundError,
        "does not serve a model by that name",
        retried=False,
    ),
    "HTTP 422": Case(ErrorReply(status=422), ModelRequestRejected, "not retried", retried=False),
    "HTTP 429": Case(
        ErrorReply(status=429, type="rate_limit_error"),
        ModelRateLimitError,
        "raise max_retries",
        retried=True,
    ),
    "HTTP 500": Case(ErrorReply(status=500), ModelServerError, "server's log", retried=True),
    "a proxy's 502 page": Case(
        Fault(status=502, body="<h1>502 Bad Gateway</h1>"),
        ModelServerError,
        "server's log",
        retried=True,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_each_failure_is_typed_named_advised_and_retried_only_if_it_helps(name: str) -> None:
    case = CASES[name]
    async with OpenAICompatServer([case.reply, case.reply]) as server:
        base_url = server.base_url
        model = LiteLLMModel(
            MODEL,
            api_base=base_url,
            api_key="sk-test",
            max_retries=1,
            retry_backoff_s=0,
            **case.settings,
        )
        with pytest.raises(ModelError) as caught:
            await model.request(ask())

    error = caught.value
    assert type(error) is case.error, f"{type(error).__name__}: {error}"
    message = str(error)
    assert MODEL in message and base_url in message
    assert case.advice in message
    assert "rate-limiting" not in message or case.error is ModelRateLimitError
    assert (error.model, error.api_base) == (MODEL, base_url)
    assert error.retryable is case.retried
    assert len(server.requests) == (2 if case.retried else 1)
    assert error.__cause__ is not None or case.error is ModelEmptyResponse


async def test_nothing_listening_is_a_connection_error_and_is_retried() -> None:
    async with OpenAICompatServer() as server:
        base_url = server.base_url
    # the server has stopped: the port refuses connections

    model = LiteLLMModel(MODEL, api_base=base_url, api_key="sk-test", max_retries=1)
    with pytest.raises(ModelConnectionError) as caught:
        await model.request(ask())

    message = str(caught.value)
    assert f"nothing answered at api_base {base_url!r} for model {MODEL!r}" in message
    assert "2 attempt(s)" in message and "is the server running" in message
    assert "HTTP 500" not in message


async def test_a_missing_api_key_is_named_and_nothing_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with OpenAICompatServer(["never"]) as server:
        model = LiteLLMModel(MODEL, api_base=server.base_url, max_retries=3)
        with pytest.raises(MissingAPIKeyError) as caught:
            await model.request(ask())

    assert server.requests == []
    message = str(caught.value)
    assert "needs an API key and none was given" in message
    assert "api_key='sk-local'" in message and "HTTP 500" not in message
    assert isinstance(caught.value, ModelAuthenticationError)


async def test_a_run_that_fails_on_the_model_reports_the_typed_error() -> None:
    async with (
        OpenAICompatServer([Fault(empty_choices=True)]) as server,
        Runtime(testing=True) as rt,
    ):
        model = LiteLLMModel(MODEL, api_base=server.base_url, api_key="sk-test")
        handle = await rt.start(Agent("a", model), "hi")
        result = await handle.result()

    assert result.status is RunStatus.FAILED
    assert "ModelEmptyResponse" in str(result.error) or "no choices" in str(result.error)


def test_the_error_classes_are_exported_and_form_a_tree() -> None:
    for cls in (
        ModelConnectionError,
        ModelTimeoutError,
        ModelRateLimitError,
        ModelServerError,
        ModelAuthenticationError,
        MissingAPIKeyError,
        ModelNotFoundError,
        ModelRequestRejected,
        ModelResponseNotJSON,
        ModelEmptyResponse,
    ):
        assert getattr(tinyagents, cls.__name__) is cls
        assert issubclass(cls, ModelError)
    retried = {c.__name__ for c in ModelError.__subclasses__() if c.retryable}
    assert retried == {
        "ModelConnectionError",
        "ModelTimeoutError",
        "ModelRateLimitError",
        "ModelServerError",
    }
    assert ModelError("plain").retryable is False  # the old one-argument form still works


# -- cancelling a request in flight (item 7) --------------------------------------------------


def unawaited(caught: list[warnings.WarningMessage]) -> list[str]:
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, RuntimeWarning) and "never awaited" in str(w.message)
    ]


@pytest.mark.parametrize("when", ["while litellm prepares it", "while awaiting the response"])
async def test_cancelling_a_request_in_flight_leaves_no_unawaited_coroutine(when: str) -> None:
    loop = asyncio.get_running_loop()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Whichever request reaches the server first, only the one asking "slow" is delayed.
        replies = [slow_or_next] * 2
        async with OpenAICompatServer(replies) as server:
            model = LiteLLMModel(MODEL, api_base=server.base_url, api_key="sk-test")
            task = asyncio.ensure_future(model.request(ask("slow")))
            if when == "while awaiting the response":
                await server.wait_for_requests(1)
            else:
                await asyncio.sleep(0)  # the task has started: litellm's worker thread runs
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            after = await model.request(ask())
        # litellm's worker thread may outlive the cancel: let it finish, then collect.
        await loop.shutdown_default_executor()
        gc.collect()

    assert unawaited(caught) == []
    assert after.text == "next"


async def test_an_immediate_cancel_of_a_run_waiting_on_a_real_model_is_clean() -> None:
    loop = asyncio.get_running_loop()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with (
            OpenAICompatServer([Fault(delay_s=60, then="late")]) as server,
            Runtime(testing=True) as rt,
        ):
            model = LiteLLMModel(MODEL, api_base=server.base_url, api_key="sk-test")
            handle = await rt.start(Agent("a", model), "hi")
            await server.wait_for_requests(1)
            await handle.cancel(immediate=True)
            result = await handle.result()
        await loop.shutdown_default_executor()
        gc.collect()

    assert result.status is RunStatus.CANCELLED
    assert unawaited(caught) == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_immediate_cancel_while_an_answer_arrives_closes_its_connection(
    stream: bool,
) -> None:
    # an answer that never ends (a byte at a time): the cancel ends the run and the client
    # goes away, leaving no connection open for the server to go on answering
    async with (
        OpenAICompatServer([Fault(drip_s=0.05, then="an answer that never ends")]) as server,
        Runtime(testing=True) as rt,
    ):
        model = LiteLLMModel(MODEL, api_base=server.base_url, api_key="sk-test", stream=stream)
        handle = await rt.start(Agent("a", model), "hi")
        await server.wait_for_requests(1)
        await handle.cancel(immediate=True)
        result = await handle.result()
        await server.wait_for_disconnects(1)

    assert result.status is RunStatus.CANCELLED
    assert server.disconnected == [1]


async def _rate_limited(headers: dict[str, str]) -> BaseException:
    """The exception litellm raises for a real 429 with ``headers``."""
    import litellm

    async with OpenAICompatServer([ErrorReply(status=429, headers=headers)]) as server:
        try:
            await litellm.acompletion(
                model="openai/m",
                api_base=server.base_url,
                api_key="sk-test",
                messages=[{"role": "user", "content": "hi"}],
                max_retries=0,
            )
        except Exception as exc:
            return exc
    raise AssertionError("the 429 was not raised")


async def test_a_429_retry_after_is_waited_for_up_to_a_cap() -> None:
    """A rate limit's ``Retry-After`` was ignored (0.5 s, then 1 s, whatever the server
    asked): the next attempt waits what it asks, in seconds or as an HTTP date, up to
    ``MAX_RETRY_AFTER_S``; without one (or with garbage, or a past date) the backoff."""
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    from tinyagents.harness.litellm_model import MAX_RETRY_AFTER_S, retry_delay

    assert retry_delay(await _rate_limited({"Retry-After": "7"}), 0.5) == 7.0
    assert retry_delay(await _rate_limited({"Retry-After": "0"}), 0.5) == 0.5
    assert retry_delay(await _rate_limited({"Retry-After": "3600"}), 0.5) == MAX_RETRY_AFTER_S
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 20 < retry_delay(await _rate_limited({"Retry-After": soon}), 0.5) <= 30
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert retry_delay(await _rate_limited({"Retry-After": past}), 0.5) == 0.5
    assert retry_delay(await _rate_limited({"Retry-After": "soon"}), 0.5) == 0.5
    assert retry_delay(await _rate_limited({}), 0.5) == 0.5


async def test_a_429_retry_after_ms_is_waited_for_as_openai_sends_it() -> None:
    """OpenAI (and the OpenAI SDK, which honours it first) says how long to wait in
    milliseconds, ``retry-after-ms``: it was ignored, and the retry came after the backoff
    (0.5 s, 1 s, ...) however long the server asked, to be refused again."""
    from tinyagents.harness.litellm_model import MAX_RETRY_AFTER_S, retry_delay

    assert retry_delay(await _rate_limited({"retry-after-ms": "7000"}), 0.5) == 7.0
    assert retry_delay(await _rate_limited({"retry-after-ms": "250"}), 0.5) == 0.5
    both = {"retry-after-ms": "2500", "Retry-After": "3"}  # the finer one, as the SDK reads it
    assert retry_delay(await _rate_limited(both), 0.5) == 2.5
    assert retry_delay(await _rate_limited({"retry-after-ms": "9e9"}), 0.5) == MAX_RETRY_AFTER_S
    assert retry_delay(await _rate_limited({"retry-after-ms": "soon"}), 0.5) == 0.5
    assert retry_delay(await _rate_limited({"retry-after-ms": "-5"}), 0.5) == 0.5


async def test_a_429_with_retry_after_is_retried_and_then_answered() -> None:
    script = [ErrorReply(status=429, headers={"Retry-After": "0.05"}), "fine"]
    async with OpenAICompatServer(script) as server:
        model = LiteLLMModel(
            "openai/m",
            api_base=server.base_url,
            api_key="sk-test",
            max_retries=1,
            retry_backoff_s=0,
        )
        result = await Agent("a", model).run("hi")
    assert result.status is RunStatus.COMPLETED and result.output == "fine"
    assert len(server.requests) == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_a_retry_past_the_requests_deadline_is_not_waited_for(stream: bool) -> None:
    """A 429 asking for 120 s was slept out (cut to 60 s) even when the caller would stop
    waiting long before: its timeout then hid the rate limit. With ``deadline``, the rate
    limit is raised at once, with how long the server asked to wait."""
    limited = ErrorReply(status=429, headers={"Retry-After": "120"})
    async with OpenAICompatServer([limited, "never asked"]) as server:
        model = LiteLLMModel("openai/m", api_base=server.base_url, api_key="sk-test", stream=stream)
        request = ask()
        request.deadline = asyncio.get_running_loop().time() + 30
        with pytest.raises(ModelRateLimitError, match="asked to wait 120 s") as caught:
            if stream:
                [_ async for _ in model.stream(request)]
            else:
                await model.request(request)
    assert caught.value.retry_after_s == 120.0
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_run_deadline_shorter_than_a_retry_after_reports_the_rate_limit(
    stream: bool,
) -> None:
    """The agent loop did not tell the model its run's deadline: a 429 asking for 120 s was
    slept out until ``deadline_s`` ended the run as ``limit_exceeded``, hiding that the
    provider was rate-limiting it. The model call now carries the run's deadline, and the run
    fails at once with the rate limit and how long the server asked to wait."""
    limited = ErrorReply(status=429, headers={"Retry-After": "120"})
    async with OpenAICompatServer([limited, "never asked"]) as server:
        model = LiteLLMModel("openai/m", api_base=server.base_url, api_key="sk-test", stream=stream)
        result = await Agent("a", model, limits=RunLimits(deadline_s=3)).run("hi")
    assert result.status is RunStatus.FAILED
    assert "asked to wait 120 s" in (result.error or "")
    assert len(server.requests) == 1


async def test_a_model_name_litellm_cannot_place_says_so_and_that_nothing_was_sent() -> None:
    """``tinyagents demo --model gpt-nonexistent`` was told that "the default endpoint of
    'its provider'" refused the request with an HTTP 400, when litellm sent nothing: it did
    not know which provider serves that name."""
    model = LiteLLMModel("gpt-nonexistent-xyz", max_retries=0, api_key="sk-test")
    with pytest.raises(ModelNotFoundError) as caught:
        await model.request(ask())
    message = str(caught.value)
    assert "nothing was sent" in message and "'openai/gpt-nonexistent-xyz'" in message
    assert "HTTP" not in message and "its provider" not in message


@pytest.mark.parametrize("stream", [False, True])
async def test_a_cancel_during_a_retry_after_wait_stops_the_retries(stream: bool) -> None:
    """A plain cancel sent while the model call waited out a 429's ``Retry-After`` waited the
    whole 30 s, then sent one more (paid) request, and only then landed at the next boundary.
    The cancel now stops the retrying: no further request is sent, and the cancel lands at the
    boundary after the model call (applied, the run ``cancelled``)."""
    from tinyagents.testkit import EventRecorder

    recorder = EventRecorder()
    limited = ErrorReply(status=429, headers={"Retry-After": "30"})
    async with (
        OpenAICompatServer([limited, "ok"]) as server,
        Runtime(testing=True, sinks=[recorder]) as rt,
    ):
        model = LiteLLMModel(
            MODEL, api_base=server.base_url, api_key="sk-test", max_retries=2, stream=stream
        )
        handle = await rt.start(Agent("a", model), "hi")
        await server.wait_for_requests(1)
        receipt = await handle.cancel("stop")
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.CANCELLED
    assert len(server.requests) == 1
    assert recorder.terminal_state(receipt.correlation_id) == "applied"
    recorder.assert_every_command_terminal()
    ends = [
        e.type for e in recorder.events if e.type.startswith("run.") and e.type != "run.started"
    ]
    assert ends == ["run.cancelled"]


async def test_a_pause_during_a_retry_after_wait_does_not_stop_the_retries() -> None:
    """Only a cancel stops the retrying: a paused run's model call still makes its next
    attempt, and its answer is kept for when the run is resumed."""
    limited = ErrorReply(status=429, headers={"Retry-After": "0.2"})
    async with (
        OpenAICompatServer([limited, "ok"]) as server,
        Runtime(testing=True) as rt,
    ):
        model = LiteLLMModel(MODEL, api_base=server.base_url, api_key="sk-test", max_retries=2)
        handle = await rt.start(Agent("a", model), "hi")
        await server.wait_for_requests(1)
        await handle.pause()
        await asyncio.wait_for(server.wait_for_requests(2), 60)
        await handle.resume()
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output == "ok"
    assert len(server.requests) == 2
