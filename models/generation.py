"""The one small async interface every engine implements (the edge's llama.cpp engine and
each cloud pool member look alike to the router)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


JSON_OBJECT = '{"type":"object"}'  # ``response_format: json_object`` as a schema: any JSON object


# Tokens the repeat penalty looks back over (llama.cpp's and Ollama's default repeat_last_n).
REPEAT_WINDOW = 64


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Generation parameters that change the answer."""

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    # OpenAI's penalties: a token's logit is lowered by frequency_penalty per time it was already
    # generated, and by presence_penalty once if it was at all.
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    # llama.cpp's and vLLM's sampler extensions: the ``top_k`` most likely tokens kept (0 or less:
    # all), and none below ``min_p`` times the best one's probability; None: the engine's default.
    top_k: int | None = None
    min_p: float | None = None
    # llama.cpp's repeat_penalty (vLLM's repetition_penalty): the logit of a token among the last
    # REPEAT_WINDOW of the prompt and answer is divided by it when positive, multiplied when
    # negative; 1.0: none.
    repeat_penalty: float = 1.0
    # OpenAI's logit_bias: (token id, bias added to its logit) pairs, by token id; the ids are
    # the engine's own tokenizer's.
    logit_bias: tuple[tuple[int, float], ...] = ()
    # Log probabilities of the generated tokens, with this many most likely alternatives each;
    # None: none wanted.
    logprobs: int | None = None
    # The JSON Schema the answer must match, as compact JSON text (``response_format``);
    # None: free text. Engines constrain decoding to it, so the answer parses.
    json_schema: str | None = None
    # The request field the schema came from, named in an error about it: ``response_format``,
    # or ``tools`` when the schema is the tools' calls.
    schema_field: str = "response_format"

    @property
    def penalized(self) -> bool:
        """OpenAI's penalties (over the whole answer) are set."""
        return self.frequency_penalty != 0.0 or self.presence_penalty != 0.0

    @property
    def deterministic(self) -> bool:
        return self.temperature == 0.0 or self.seed is not None


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One generation: either chat ``messages`` or a raw ``prompt``.

    ``assistant_prefix`` is text the answer must continue from (fallback after a broken stream).
    ``fair_key`` is opaque to the engines: requests with different keys share an engine's slots
    and queue fairly (the node sets it to the tenant).
    """

    params: SamplingParams
    messages: tuple[dict[str, str], ...] | None = None
    prompt: str | None = None
    assistant_prefix: str = ""
    model: str = ""
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    fair_key: str = ""

    @property
    def is_chat(self) -> bool:
        return self.messages is not None


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens read and generated, and the two shapes the APIs report them in."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def openai(self) -> dict[str, int]:
        """OpenAI's completions' ``usage`` (and Ollama's and llama.cpp's counts are these)."""
        return {**asdict(self), "total_tokens": self.total_tokens}

    def responses(self) -> dict[str, Any]:
        """The Responses API's ``usage``."""
        return {
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token: its text and bytes, its log probability under the model, and (for
    a generated token) the most likely tokens at its place, best first."""

    token: str
    logprob: float
    raw: bytes
    top: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of streamed text; the last chunk of a stream carries ``finish_reason`` and ``usage``.

    ``logprobs``: the tokens whose text this chunk releases, when the request asked for them.
    ``stop_word``: on the last chunk, the stop sequence that ended the answer (None for the
    end-of-sequence token, a length cut, or an engine that does not say).
    """

    text: str
    finish_reason: str | None = None
    usage: Usage | None = None
    logprobs: tuple[TokenLogprob, ...] = ()
    stop_word: str | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    finish_reason: str
    usage: Usage
    logprobs: tuple[TokenLogprob, ...] = ()
    stop_word: str | None = None


@dataclass(frozen=True, slots=True)
class EngineLoad:
    """What an engine reports of its own load: running and waiting requests, and its capacity."""

    running: int
    waiting: int
    capacity: int

    @property
    def depth(self) -> int:
        return self.running + self.waiting


@runtime_checkable
class Engine(Protocol):
    """Anything that generates text for the router."""

    name: str

    def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        """Yield chunks as tokens arrive; the last one has ``finish_reason`` and ``usage``."""
        ...

    async def aclose(self) -> None: ...


class Writer(Protocol):
    """One answer in an API's shape (OpenAI's chat or text completion, the Responses API's,
    Ollama's, llama.cpp's): the bytes of its stream, event by event, or its whole body."""

    media_type: str = "text/event-stream"  # server-sent events (Ollama's writer sends JSON lines)

    def opening(self, n: int = 1) -> bytes:
        """What a stream of ``n`` choices opens with, before any text."""
        return b""

    def text(self, text: str, logprobs: Sequence[TokenLogprob] = (), index: int = 0) -> bytes:
        """A piece of choice ``index``'s text (with its tokens' log probabilities)."""
        ...

    def finish(
        self, finish_reason: str, usage: Usage, index: int = 0, last: bool = True, stop_word: str | None = None
    ) -> bytes:
        """Choice ``index``'s end; the ``last`` to end closes the stream (``usage`` is of every choice).
        ``stop_word``: the stop sequence that ended it, if one did."""
        ...

    def error(self, message: str, err_type: str = "server_error", code: str | None = None) -> bytes:
        """End a stream whose headers are already sent."""
        ...

    def whole(
        self, text: str, finish_reason: str, usage: Usage, logprobs: Sequence[TokenLogprob] = (),
        stop_word: str | None = None,
    ) -> dict[str, Any]:
        """The body of an answer that is not streamed."""
        ...


async def collect(chunks: AsyncIterator[Chunk]) -> Completion:
    """Drain a stream into one completion."""
    parts: list[str] = []
    logprobs: list[TokenLogprob] = []
    finish_reason = "stop"
    usage = Usage(0, 0)
    stop_word: str | None = None
    async for chunk in chunks:
        parts.append(chunk.text)
        logprobs.extend(chunk.logprobs)
        if chunk.finish_reason is not None:
            finish_reason, stop_word = chunk.finish_reason, chunk.stop_word
        if chunk.usage is not None:
            usage = chunk.usage
    return Completion(
        text="".join(parts), finish_reason=finish_reason, usage=usage, logprobs=tuple(logprobs), stop_word=stop_word
    )
