"""What strict OpenAI-compatible servers refuse, for ``OpenAICompatServer(mode=...)``.

Each check takes a request body and returns ``None`` or the reason the server would refuse it.

``llama_cpp_violation`` follows llama.cpp's message parser (``common_chat_msgs_parse_oaicompat``:
a message needs a ``role`` and ``content`` or ``tool_calls``; a content is a string or text
parts; a tool call is ``{"type": "function", "function": {"name", "arguments"}}``; a tool needs
``description`` and ``parameters``) and the Jinja chat templates llama-cpp-python renders
(``'<|im_start|>' + message['content'] + ...``: a missing or null ``content`` fails, as does a
list of parts; Llama-2, Mistral and Gemma templates ``raise_exception`` unless roles alternate
user/assistant after at most one leading system message). Tool results must answer the tool
calls of the assistant message just before them, as OpenAI itself requires.

``vllm_violation`` follows vLLM's ``ChatCompletionRequest`` pydantic model and its validators
(``check_tool_usage``, ``validate_stream_options``, ``check_logprobs``). Unknown top-level
fields are refused, as vLLM did with ``extra="forbid"`` (newer versions log "fields were
present in the request but ignored" instead: a setting silently dropped is a bug either way).

``openai_violation`` follows what OpenAI's chat completions API refuses with an HTTP 400 that
the other modes let through: ``tools`` that is an empty list; ``tool_choice`` or
``parallel_tool_calls`` without ``tools`` ("'parallel_tool_calls' is only allowed when 'tools'
are specified"); a named ``tool_choice`` whose function is not among ``tools``; and a
``response_format`` json_schema with ``strict: true`` that strict mode cannot hold ("Invalid
schema for response_format ...": an object whose ``additionalProperties`` is not ``false``, or
whose ``required`` does not list every one of its ``properties``). ``openai_param`` names the
request field each refusal is about, as OpenAI's error body does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_ROLES = ("system", "user", "assistant", "tool")

#: Fields of vLLM's ChatCompletionRequest, with the JSON types each accepts.
_NUMBER = (int, float)
_VLLM_FIELDS: dict[str, tuple[type, ...]] = {
    "messages": (list,),
    "model": (str,),
    "frequency_penalty": _NUMBER,
    "logit_bias": (dict,),
    "logprobs": (bool,),
    "top_logprobs": (int,),
    "max_tokens": (int,),
    "max_completion_tokens": (int,),
    "n": (int,),
    "presence_penalty": _NUMBER,
    "response_format": (dict,),
    "seed": (int,),
    "stop": (str, list),
    "stream": (bool,),
    "stream_options": (dict,),
    "temperature": _NUMBER,
    "top_p": _NUMBER,
    "tools": (list,),
    "tool_choice": (str, dict),
    "reasoning_effort": (str,),
    "include_reasoning": (bool,),
    "parallel_tool_calls": (bool,),
    "user": (str,),
    "best_of": (int,),
    "use_beam_search": (bool,),
    "top_k": (int,),
    "min_p": _NUMBER,
    "repetition_penalty": _NUMBER,
    "length_penalty": _NUMBER,
    "stop_token_ids": (list,),
    "include_stop_str_in_output": (bool,),
    "ignore_eos": (bool,),
    "min_tokens": (int,),
    "skip_special_tokens": (bool,),
    "spaces_between_special_tokens": (bool,),
    "truncate_prompt_tokens": (int,),
    "prompt_logprobs": (int,),
    "allowed_token_ids": (list,),
    "bad_words": (list,),
    "echo": (bool,),
    "add_generation_prompt": (bool,),
    "continue_final_message": (bool,),
    "add_special_tokens": (bool,),
    "documents": (list,),
    "chat_template": (str,),
    "chat_template_kwargs": (dict,),
    "guided_json": (str, dict),
    "guided_regex": (str,),
    "guided_choice": (list,),
    "guided_grammar": (str,),
    "guided_decoding_backend": (str,),
    "guided_whitespace_pattern": (str,),
    "priority": (int,),
    "request_id": (str,),
}

_VLLM_MESSAGE_FIELDS = {
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "refusal",
    "reasoning_content",
}


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_type(value: Any, types: tuple[type, ...]) -> bool:
    # JSON true/false decode to bool, a subclass of int: neither is a number to pydantic's
    # strict-enough validation of these fields.
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def _text_parts(content: Any) -> bool:
    return isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        for part in content
    )


def _tool_call_problem(call: Any) -> str | None:
    if not isinstance(call, dict):
        return f"a tool call must be an object, got {_type_name(call)}"
    if call.get("type") != "function":
        return f"tool call {call.get('id')!r} needs type 'function'"
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return f"tool call {call.get('id')!r} needs function.name"
    if not isinstance(function.get("arguments"), str):
        return f"tool call {call.get('id')!r} needs function.arguments as a JSON string"
    if not isinstance(call.get("id"), str):
        return "a tool call needs a string id (tool results refer to it)"
    return None


def _tool_spec_problem(spec: Any, *, need_description: bool) -> str | None:
    if not isinstance(spec, dict) or spec.get("type") != "function":
        return f"a tool must be {{'type': 'function', ...}}, got {spec!r}"
    function = spec.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return "a tool needs function.name"
    if need_description:
        for key in ("description", "parameters"):
            if key not in function:
                return f"tool {function['name']!r} has no function.{key}"
    if "parameters" in function and not isinstance(function["parameters"], dict):
        return f"tool {function['name']!r}: parameters must be an object"
    return None


def _conversation_problem(messages: list[Any]) -> str | None:
    """Role order as alternating chat templates require, tool results as OpenAI requires."""
    previous: str | None = None
    open_calls: set[str] = set()  # ids of the last assistant message not yet answered
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "system" and index != 0:
            return f"message {index}: a system message is only allowed first"
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                return f"message {index}: a tool message needs a string tool_call_id"
            if call_id not in open_calls:
                return (
                    f"message {index}: tool_call_id {call_id!r} does not answer a tool call "
                    "of the assistant message before it"
                )
            open_calls.discard(call_id)
        else:
            if open_calls:
                return (
                    f"message {index}: tool calls {sorted(open_calls)} were not answered "
                    "before the next message"
                )
            if role == previous and role in ("user", "assistant"):
                return (
                    f"message {index}: Conversation roles must alternate "
                    "user/assistant/user/assistant/..."
                )
            if role == "assistant" and previous in (None, "system"):
                return f"message {index}: the conversation must start with a user message"
            if role == "assistant":
                open_calls = {call["id"] for call in message.get("tool_calls") or []}
        previous = role
    return None


def llama_cpp_violation(body: dict[str, Any]) -> str | None:
    """Why llama.cpp (or llama-cpp-python's Jinja templates) would refuse ``body``, or None."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return f"Expected 'messages' to be a non-empty array, got {_type_name(messages)}"
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"Expected 'message' to be an object, got {_type_name(message)}"
        if message.get("role") not in _ROLES:
            return f"message {index}: missing or unknown 'role' {message.get('role')!r}"
        if "content" not in message:
            return (
                f"message {index} ({message['role']}): 'content' is undefined; the chat "
                "template concatenates message['content'] as a string"
            )
        if not isinstance(message["content"], str):
            return (
                f"message {index} ({message['role']}): 'content' must be a string for the "
                f"chat template, got {_type_name(message['content'])}"
            )
        for call in message.get("tool_calls") or []:
            if problem := _tool_call_problem(call):
                return f"message {index}: {problem}"
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        return f"Failed to parse tools: expected an array, got {_type_name(tools)}"
    for spec in tools or []:
        if problem := _tool_spec_problem(spec, need_description=True):
            return f"Failed to parse tools: {problem}"
    choice = body.get("tool_choice")
    if choice is not None and choice not in ("auto", "none", "required"):
        if problem := _named_choice_problem(choice, body.get("tools")):
            return problem
    return _conversation_problem(messages)


def _named_choice_problem(choice: Any, tools: Any) -> str | None:
    if not isinstance(choice, dict):
        return f"Invalid tool_choice: {choice!r}"
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        return 'tool_choice must be {"type": "function", "function": {"name": "my_function"}}'
    if not any(_tool_name(spec) == name for spec in tools or []):
        return "The tool specified in `tool_choice` does not match any of the specified `tools`"
    return None


def vllm_violation(body: dict[str, Any]) -> str | None:
    """Why vLLM's request validation would answer ``body`` with a 400, or None."""
    for key, value in body.items():
        if key not in _VLLM_FIELDS:
            return f"{key}: Extra inputs are not permitted"
        if value is not None and not _is_type(value, _VLLM_FIELDS[key]):
            expected = " or ".join(t.__name__ for t in _VLLM_FIELDS[key])
            return f"{key}: Input should be a valid {expected}, got {_type_name(value)}"
    messages = body.get("messages")
    if not messages:
        return "messages: Field required"
    for index, message in enumerate(messages):
        if problem := _vllm_message_problem(message):
            return f"messages.{index}: {problem}"
    for spec in body.get("tools") or []:
        if problem := _tool_spec_problem(spec, need_description=False):
            return f"tools: {problem}"
    return _first_problem(
        body,
        [_vllm_stream_options, _vllm_logprobs, _vllm_tool_choice],
    )


def _vllm_message_problem(message: Any) -> str | None:
    if not isinstance(message, dict):
        return f"Input should be an object, got {_type_name(message)}"
    role = message.get("role")
    if role not in _ROLES:
        return f"role: Input should be one of {_ROLES}, got {role!r}"
    extra = set(message) - _VLLM_MESSAGE_FIELDS
    if extra:
        return f"{sorted(extra)[0]}: Extra inputs are not permitted"
    content = message.get("content")
    if role in ("system", "user", "tool") and "content" not in message:
        return "content: Field required"
    if content is not None and not isinstance(content, str) and not _text_parts(content):
        return f"content: Input should be a string or a list of parts, got {_type_name(content)}"
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return "tool_call_id: Field required"
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if role != "assistant" or not isinstance(tool_calls, list):
            return "tool_calls: only an assistant message has a list of tool calls"
        for call in tool_calls:
            if problem := _tool_call_problem(call):
                return f"tool_calls: {problem}"
    return None


def _vllm_stream_options(body: dict[str, Any]) -> str | None:
    if body.get("stream_options") and not body.get("stream"):
        return "Stream options can only be defined when `stream=True`."
    return None


def _vllm_logprobs(body: dict[str, Any]) -> str | None:
    top = body.get("top_logprobs")
    if top is not None and top > 0 and not body.get("logprobs"):
        return "when using `top_logprobs`, `logprobs` must be set to true."
    return None


def _tool_name(spec: Any) -> Any:
    """The ``function.name`` of a tool spec, or None (a spec, or its function, no object)."""
    function = spec.get("function") if isinstance(spec, dict) else None
    return function.get("name") if isinstance(function, dict) else None


def _vllm_tool_choice(body: dict[str, Any]) -> str | None:
    choice = body.get("tool_choice")
    if choice is None or choice == "none":
        return None
    if body.get("tools") is None:
        return "When using `tool_choice`, `tools` must be set."
    if choice in ("auto", "required"):
        return None
    return _named_choice_problem(choice, body["tools"])


def _first_problem(
    body: dict[str, Any], checks: list[Callable[[dict[str, Any]], str | None]]
) -> str | None:
    for check in checks:
        if problem := check(body):
            return problem
    return None


def openai_violation(body: dict[str, Any]) -> str | None:
    """Why OpenAI's chat completions API would answer ``body`` with a 400, or None (only the
    rules listed in this module's docstring: the other modes check messages)."""
    tools = body.get("tools")
    if tools is not None and (not isinstance(tools, list) or not tools):
        return "Invalid 'tools': empty array. Expected an array with minimum length 1."
    for key in ("tool_choice", "parallel_tool_calls"):
        if body.get(key) is not None and not tools:
            return f"Invalid value for '{key}': '{key}' is only allowed when 'tools' are specified."
    choice = body.get("tool_choice")
    if choice is not None and choice not in ("auto", "none", "required"):
        if _named_choice_problem(choice, tools) is not None:
            name = _tool_name(choice)
            return f"Invalid value for 'tool_choice': function {name!r} not found in 'tools'."
    return _openai_schema_problem(body.get("response_format"))


def openai_param(problem: str) -> str | None:
    """The request field an ``openai_violation`` is about (its error body's ``param``)."""
    if problem.startswith("Invalid schema for response_format"):
        return "response_format"
    named = re.match(r"Invalid (?:value for )?'(\w+)'", problem)
    return named.group(1) if named else None


def _openai_schema_problem(response_format: Any) -> str | None:
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or spec.get("strict") is not True:
        return None
    problem = _strict_problem(spec.get("schema"), ())
    if problem is None:
        return None
    return f"Invalid schema for response_format {spec.get('name')!r}: {problem}"


#: Keys whose value is a map of names to schemas, and keys whose value is a schema or a list.
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_NESTS = ("items", "anyOf", "allOf", "oneOf", "prefixItems", "not")


def _strict_problem(node: Any, context: tuple[str, ...]) -> str | None:
    """What in this JSON schema (node) OpenAI's strict mode cannot hold, or None."""
    if isinstance(node, list):
        for item in node:
            if problem := _strict_problem(item, context):
                return problem
        return None
    if not isinstance(node, dict):
        return None
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            return (
                f"In context={context}, 'additionalProperties' is required to be supplied "
                "and to be false."
            )
        required = node.get("required")
        listed = required if isinstance(required, list) else []
        missing = [key for key in node.get("properties") or {} if key not in listed]
        if missing:
            return (
                f"In context={context}, 'required' is required to be supplied and to be an "
                f"array including every key in properties. Missing {missing[0]!r}."
            )
    for key in _SCHEMA_MAPS:
        for name, sub in (node.get(key) or {}).items():
            if problem := _strict_problem(sub, (*context, key, name)):
                return problem
    for key in _SCHEMA_NESTS:
        if key in node and (problem := _strict_problem(node[key], (*context, key))):
            return problem
    return None
