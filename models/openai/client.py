"""The client side of the OpenAI wire format (what the cloud pool sends and reads): request
bodies out, stream events and error bodies in."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ErrorEventError, MalformedEventError
from ..generation import JSON_OBJECT, Chunk, GenerationRequest, Usage
from .logprobs import read_block


def response_format(json_schema: str) -> dict[str, Any]:
    """``response_format`` for a schema as :class:`SamplingParams` carries it."""
    if json_schema == JSON_OBJECT:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "response", "schema": json.loads(json_schema)}}


def request_body(request: GenerationRequest, model: str, *, stream: bool = True) -> tuple[str, dict[str, Any]]:
    """The path (under ``/v1``) and the JSON body of a streaming request (``stream=False``: of a
    request for the whole answer in one body).

    A continuation (``assistant_prefix``) is a final assistant message with vLLM's
    ``continue_final_message: true, add_generation_prompt: false``; for a raw prompt it is appended.
    """
    params = request.params
    body: dict[str, Any] = {"model": model, "stream": stream, "temperature": params.temperature, "top_p": params.top_p}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if params.top_p == 0.0:
        # Only the most likely token: greedy, as llama.cpp (the edge) samples it; vLLM and the
        # member refuse top_p 0 itself.
        body["temperature"], body["top_p"] = 0.0, 1.0
    # Sent only when the request set them (top_k, min_p and the repeat penalty, under each of
    # its names, are extensions vLLM and llama.cpp's server read).
    optional = {
        "max_tokens": params.max_tokens,
        "stop": list(params.stop) or None,
        "seed": params.seed,
        "frequency_penalty": params.frequency_penalty or None,
        "presence_penalty": params.presence_penalty or None,
        "logit_bias": {str(token): bias for token, bias in params.logit_bias} or None,
        "top_k": params.top_k,
        "min_p": params.min_p,
    }
    body.update((name, value) for name, value in optional.items() if value is not None)
    if params.repeat_penalty != 1.0:
        body["repeat_penalty"] = body["repetition_penalty"] = params.repeat_penalty
    if params.logprobs is not None:
        if request.messages is None:
            body["logprobs"] = params.logprobs
        else:
            body["logprobs"], body["top_logprobs"] = True, params.logprobs
    if params.json_schema is not None:
        body["response_format"] = response_format(params.json_schema)
    if request.messages is None:
        body["prompt"] = (request.prompt or "") + request.assistant_prefix
        return "/completions", body
    messages = [dict(m) for m in request.messages]
    if request.assistant_prefix:
        messages.append({"role": "assistant", "content": request.assistant_prefix})
        body["continue_final_message"] = True
        body["add_generation_prompt"] = False
    body["messages"] = messages
    return "/chat/completions", body


def parse_event(data: str) -> Chunk:
    """One ``data:`` payload (not ``[DONE]``) of a chat or text completion stream."""
    return _read(data, "stream event", "delta")


def parse_whole(data: bytes) -> Chunk:
    """A whole (non-streamed) chat or text completion body: its text, ``finish_reason`` and usage."""
    return _read(data, "the answer", "message")


def _read(data: str | bytes, what: str, key: str) -> Chunk:
    """The first choice of a chunk (its text under ``key`` "delta") or of a whole answer
    ("message"), or of a text completion (``text``); a chunk may have none (the usage event).

    Raises :class:`MalformedEventError`, or :class:`ErrorEventError` for the member's own error;
    ``stop_word`` is vLLM's ``stop_reason`` when it is a stop sequence (not a token id)."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise MalformedEventError(f"invalid JSON in {what}: {data[:80]!r}") from exc
    if not isinstance(obj, dict):
        raise MalformedEventError(f"{what} is not an object: {data[:80]!r}")
    if "error" in obj:
        err = obj["error"]
        raise ErrorEventError(str(err.get("message") if isinstance(err, dict) else err))
    choices = obj.get("choices")
    usage = _usage(obj.get("usage"))
    if not isinstance(choices, list) or (not choices and key == "message"):
        raise MalformedEventError(f"no choice in {what}: {data[:80]!r}")
    if not choices:
        return Chunk("", None, usage)
    choice = choices[0]
    if not isinstance(choice, dict):
        raise MalformedEventError(f"a choice that is not an object in {what}: {data[:80]!r}")
    if key in choice:
        if not isinstance(choice[key], dict):
            raise MalformedEventError(f"a {key} that is not an object in {what}: {data[:80]!r}")
        text = choice[key].get("content")
    else:
        text = choice.get("text")
    if text is not None and not isinstance(text, str):
        raise MalformedEventError(f"text that is not a string in {what}: {data[:80]!r}")
    finish, stop = choice.get("finish_reason"), choice.get("stop_reason")
    return Chunk(
        text or "", finish if isinstance(finish, str) else None, usage, read_block(choice.get("logprobs")),
        stop if isinstance(stop, str) else None,
    )


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    try:
        return Usage(int(value.get("prompt_tokens") or 0), int(value.get("completion_tokens") or 0))
    except (TypeError, ValueError) as exc:
        raise MalformedEventError(f"invalid usage in stream event: {value!r}") from exc


def error_message(body: bytes) -> tuple[str, str | None, str | None]:
    """(message, param, code) from an error response body, OpenAI's or vLLM's shape."""
    try:
        obj = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace") or "(empty body)", None, None
    err = obj.get("error", obj) if isinstance(obj, dict) else obj
    if isinstance(err, dict):
        message = err.get("message") or err.get("detail") or json.dumps(err)[:200]
        code = err.get("code")
        return str(message), err.get("param"), code if isinstance(code, str) else None
    return str(err)[:200], None, None
