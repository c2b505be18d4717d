"""The LLM judge: a structured verdict ``{passed, reason}`` on a run's metadata.

The judge sees metadata only (``JudgeInput``): the iteration, tokens used, the token budget,
call counts of the tools the run was granted, and how many calls named any other tool. Nothing
a model wrote (text, tool arguments, invented tool names) can reach its prompt.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tinyagents._record import FrozenRecord
from tinyagents.errors import MissingAPIKeyError, ModelResponseError, TinyAgentsError
from tinyagents.harness.litellm_model import LiteLLMModel, import_litellm
from tinyagents.harness.model import Message, Model, ModelRequest, ModelResponse, Usage
from tinyagents.supervisor.spec import SupervisorSpec

SYSTEM_PROMPT = (
    "You are a conservative supervisor of an autonomous agent run. You see only metadata "
    "about the run: never its messages. Judge the metadata against the policy below. Answer "
    "passed=false ONLY when the run is violating the policy now, not when it merely could; "
    "when in doubt, answer passed=true. Give a one-sentence reason the agent can act on.\n"
    'Answer with only this JSON object: {{"passed": true or false, "reason": "..."}}\n\n'
    "Policy:\n{criteria}"
)

VERDICT_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"passed": {"type": "boolean"}, "reason": {"type": "string"}},
            "required": ["passed", "reason"],
            "additionalProperties": False,
        },
    },
}


class JudgeError(TinyAgentsError):
    """The judge answered something that is not a verdict (``usage``: what that answer cost)."""

    def __init__(self, message: str, *, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    #: A JSON boolean: ``"false"``, ``"no"``, ``0`` or ``1.0`` is no verdict (pydantic's lax
    #: mode read each as one, and a failure aborts or pauses a run).
    passed: bool = Field(strict=True)
    reason: str = ""

    @field_validator("reason", mode="before")
    @classmethod
    def _no_reason(cls, value: Any) -> Any:
        if value is None:  # ``"reason": null`` is a verdict without one
            return ""
        if isinstance(value, str):
            return value
        # a number, a boolean, a list or an object: the verdict stands, with its reason as
        # text (refused, a failed verdict was a judge error, which the default ignores)
        if isinstance(value, (dict, list)):
            return json.dumps(value, ensure_ascii=False, default=str)
        return str(value)


#: (Text, compiled with its first use by ``re``'s cache, not by ``import tinyagents``.)
#: A markdown code fence around the verdict (```json ... ```), as models that ignore
#: ``response_format`` write it.
_FENCE = r"(?s)```[\w-]*[ \t]*\r?\n(.*?)```"
#: How much of an answer that is no verdict its ``JudgeError`` quotes.
_QUOTED = 200
#: How many "{" of an answer (the last ones) are tried as the start of the verdict's JSON
#: object, and how many of its fenced blocks (the last ones) are read.
_OBJECTS_TRIED = 20
_FENCES_TRIED = 5
#: A verdict's keys.
_FIELDS = frozenset({"passed", "reason"})


class _Object(dict[str, Any]):
    """A JSON object as the answer wrote it: ``twice``, the keys it gave more than once (JSON
    keeps the last value, so ``{"passed": false, "passed": true}`` said both)."""

    twice: frozenset[str] = frozenset()


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    found = _Object(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        twice: set[str] = set()
        for key, _ in pairs:
            (twice if key in seen else seen).add(key)
        found.twice = frozenset(twice)
    return found


_DECODER = json.JSONDecoder(object_pairs_hook=_object)


def parse_verdict(response: ModelResponse) -> Verdict | None:
    """The verdict in ``response``, or None.

    Servers that ignore ``response_format`` (Ollama, LM Studio, llama.cpp without a grammar)
    wrap the JSON in a markdown fence or a sentence, and some answer it as the arguments of a
    tool call (a sentence before it, or none): each is read as the verdict it holds. Which one, when the text holds several
    objects: the whole text if it is one; else a fenced block (pydantic-ai's and LangChain's
    JSON parsers read a fence as the answer), else an object in the prose (never one inside
    another object); of those, the last that is a verdict. A judge states the format or gives
    an example before it answers, so the first object was often the example (a pass) and not
    the verdict.

    The first object found so that has a ``passed`` key (in any case) decides: if it is no
    verdict (``passed`` not a JSON boolean, ``passed`` or ``reason`` given twice or in another
    case), the answer is none, and no object before it is read instead. Other keys are
    ignored."""
    for candidate in _candidates(response):
        if isinstance(candidate, str):
            try:
                candidate = _DECODER.decode(candidate)
            except (ValueError, RecursionError):
                continue
        if not isinstance(candidate, dict):
            continue
        keys = {key.casefold() for key in candidate if isinstance(key, str)}
        if "passed" not in keys:
            continue  # no verdict, nor meant as one (an object inside the prose)
        return _verdict(candidate)
    return None


def _verdict(found: dict[str, Any]) -> Verdict | None:
    """``found`` as a verdict, or None when it says one two ways or not as one."""
    if any(isinstance(k, str) and k not in _FIELDS and k.casefold() in _FIELDS for k in found):
        return None  # "Passed" or "REASON": beside "passed", which says the verdict?
    if isinstance(found, _Object) and found.twice & _FIELDS:
        return None
    try:
        return Verdict.model_validate(found)
    except (ValidationError, RecursionError):  # (a reason nested past what JSON writes)
        return None


def _candidates(response: ModelResponse) -> Iterator[str | dict[str, Any]]:
    """What may be the verdict, in the order it is looked for (see ``parse_verdict``)."""
    text = response.text.strip()
    if text:
        yield text
        fences = [m.group(1).strip() for m in re.compile(_FENCE).finditer(text)]
        yield from reversed(fences[-_FENCES_TRIED:])
        yield from _objects_from_the_end(text)
    # last: a model that answers in a tool call often says a sentence before it
    if len(response.tool_calls) == 1 and response.tool_calls[0].parse_error is None:
        yield response.tool_calls[0].args


def _objects_from_the_end(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects in ``text`` that are inside no other, the last first: one read from
    each "{", from the last "{" back. An object inside another (a verdict's details, or a
    verdict wrapped in ``{"verdict": ...}``) is no verdict of its own: read first, a failing
    detail of a passing verdict aborted the run. A brace in the sentence around the verdict
    (``for run {id}: {...}``) is no JSON and is passed."""
    found: list[tuple[int, int, dict[str, Any]]] = []
    start = len(text)
    for _ in range(_OBJECTS_TRIED):
        start = text.rfind("{", 0, start)
        if start < 0:
            break
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            found.append((start, end, value))
    for start, end, value in found:
        if not any(s < start and end <= e for s, e, _ in found):
            yield value


def _what(response: ModelResponse) -> str:
    """What the judge answered, as its error quotes it."""
    text = response.text
    if not text.strip() and response.tool_calls:
        return f"a call of tool {response.tool_calls[0].name[:_QUOTED]!r}"
    refusal = _refusal(response)
    if not text.strip() and refusal is not None:
        return f"a refusal: {json.dumps(refusal[:_QUOTED], ensure_ascii=False)}"
    if len(text) > _QUOTED:
        return f"{text[:_QUOTED]!r} (and {len(text) - _QUOTED} more characters)"
    return repr(text)


def _refusal(response: ModelResponse) -> str | None:
    """The refusal an OpenAI-style answer gave instead of content (``message.refusal``)."""
    try:
        refusal = response.raw.choices[0].message.refusal
    except (AttributeError, IndexError, TypeError, KeyError):
        return None
    return refusal if isinstance(refusal, str) and refusal.strip() else None


@dataclass(slots=True, kw_only=True, frozen=True, eq=False, repr=False)
class JudgeInput(FrozenRecord):
    """Everything the judge is told about a run."""

    iteration: int
    tokens_used: int
    token_budget: int | None
    tool_calls: dict[str, int]  # declared tools only, every one listed (0 if not called)
    undeclared_tool_calls: int

    def to_prompt(self) -> str:
        return json.dumps(
            {
                "iteration": self.iteration,
                "tokens_used": self.tokens_used,
                "token_budget": self.token_budget,
                "tool_calls": self.tool_calls,
                "calls_to_undeclared_tools": self.undeclared_tool_calls,
            },
            sort_keys=True,
        )


def judge_model(spec: SupervisorSpec) -> Model | None:
    """The model the spec names (a bare name through its models registry), with its
    ``api_base`` and key (None: no judge)."""
    target = spec.judge_target()
    if target is None or isinstance(target, Model):
        return target
    api_key = os.environ.get(target.api_key_env) if target.api_key_env else None
    if target.api_key_env and not api_key:
        # litellm would fall back to the provider's variable (OPENAI_API_KEY) and send that
        # key to this judge's api_base: the spec named the key to use, and it is not there
        raise MissingAPIKeyError(
            f"the judge {target.model!r} takes its key from ${target.api_key_env}, which is "
            "not set (or empty); nothing was sent, and no other key is used instead",
            model=target.model,
            api_base=target.api_base,
        )
    # drop_params: litellm refuses response_format for some providers (sagemaker, replicate,
    # cohere_chat) before sending anything; the prompt asks for the JSON there.
    return LiteLLMModel(target.model, api_base=target.api_base, api_key=api_key, drop_params=True)


class Judge:
    """Asks ``model`` for a verdict, bounded by ``timeout_s``."""

    def __init__(self, model: Model, *, criteria: str, timeout_s: float) -> None:
        self.model = model
        self.system = SYSTEM_PROMPT.format(criteria=criteria or "(no policy given: pass)")
        self.timeout_s = timeout_s
        #: What shares the provider's limits with this judge: the judges of every run of a
        #: spec, and of other specs that call the same model at the same endpoint with the
        #: same key (a ``Model`` object given as the judge: that object).
        self.key: Hashable = (
            (model.name, model.api_base, model.api_key)
            if isinstance(model, LiteLLMModel)
            else ("model", id(model))
        )

    def request(self, data: JudgeInput, *, deadline: float | None = None) -> ModelRequest:
        return ModelRequest(
            messages=[
                Message(role="system", content=self.system),
                Message(role="user", content="Run metadata (JSON):\n" + data.to_prompt()),
            ],
            response_format=VERDICT_FORMAT,
            deadline=deadline,
        )

    async def verdict(self, data: JudgeInput) -> Verdict:
        """The verdict; raises ``TimeoutError``, a ``ModelError`` (a ``ModelRateLimitError``
        with its ``retry_after_s`` when the provider asks to wait past the timeout) or
        ``JudgeError`` (no verdict, or a judge that called ``sys.exit`` or raised a
        ``CancelledError``, ``GeneratorExit`` or other ``BaseException`` of its own)."""
        verdict, _ = await self.ask(data)
        return verdict

    async def ready(self) -> None:
        """Import litellm for a litellm judge (seconds the first time, in a worker thread):
        not the judge's time to spend, so done before its timeout starts."""
        if isinstance(self.model, LiteLLMModel):
            await import_litellm()

    async def ask(self, data: JudgeInput) -> tuple[Verdict, Usage]:
        """The verdict and what the call cost (tokens, and USD when litellm knows the
        price); raises like ``verdict`` (a ``JudgeError`` carries the cost too)."""
        await self.ready()
        # The deadline goes with the request: a retry the timeout cannot wait for (a rate
        # limit's Retry-After past it) is not slept into a TimeoutError that hides it.
        async with asyncio.timeout(self.timeout_s) as scope:
            try:
                response = await self.model.request(self.request(data, deadline=scope.when()))
            except ModelResponseError as exc:
                if exc.refusal is None:
                    raise
                # a LiteLLMModel raises for a refusal; for a judge it is an answer that is
                # no verdict, quoted as any other
                refusal = json.dumps(exc.refusal[:_QUOTED], ensure_ascii=False)
                raise JudgeError(
                    f"the judge {self.model.name!r} did not answer a verdict "
                    f'{{"passed": bool, "reason": str}}: it answered a refusal: {refusal}',
                    usage=exc.usage,
                ) from exc
            except SystemExit as exc:
                # no Exception: out of the judge's task it would end the event loop under
                # the supervisor and every run; it is a judge that did not answer
                raise JudgeError(
                    f"the judge {self.model.name!r} tried to exit the process (SystemExit: "
                    f"{exc}); it gave no verdict"
                ) from exc
            except GeneratorExit as exc:
                # no Exception either (a generator closed under the judge's code): it ended
                # the judge's task without a judge error, so nothing was said and
                # on_judge_error never acted
                raise JudgeError(
                    f"the judge {self.model.name!r} raised GeneratorExit; it gave no verdict"
                ) from exc
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise  # the timeout's, or the run ended: a cancellation of the judge
                # raised by the judge's own code (a library cancelling its own work): no
                # Exception, it ended the judge's task without a judge error, so nothing was
                # said and on_judge_error never acted
                detail = f": {exc}" if str(exc) else ""
                raise JudgeError(
                    f"the judge {self.model.name!r} raised CancelledError{detail} (it was not "
                    "cancelled); it gave no verdict"
                ) from exc
            except (Exception, KeyboardInterrupt):
                raise  # a model's error is the caller's; the user stopping the program goes on
            except BaseException as exc:
                # a library's own BaseException (gevent's GreenletExit): it ended the
                # judge's task as GeneratorExit did, no judge error said or acted on
                detail = f": {exc}" if str(exc) else ""
                raise JudgeError(
                    f"the judge {self.model.name!r} raised {type(exc).__name__}{detail}; it "
                    "gave no verdict"
                ) from exc
        verdict = parse_verdict(response)
        if verdict is None:
            raise JudgeError(
                f"the judge {self.model.name!r} did not answer a verdict "
                f'{{"passed": bool, "reason": str}}: it answered {_what(response)}',
                usage=response.usage,
            )
        return verdict, response.usage


def usage_data(usage: Usage) -> dict[str, Any]:
    """``usage`` as the judge's events carry it."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost": usage.cost,
    }
