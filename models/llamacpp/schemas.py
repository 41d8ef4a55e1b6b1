"""llama.cpp's server's own completion body (``POST /completion``) and the OpenAI text
completion it asks for: the prompt as it is, llama.cpp's defaults where a field is left out."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..openai.schemas import native_sampling, refused, with_defaults

# llama.cpp's server's defaults (its /props), so a client that sends only a prompt gets its sampler.
DEFAULTS: dict[str, float] = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0}
_UNSUPPORTED = {
    "grammar": "GBNF grammars are not supported: send a json_schema",
    "return_tokens": "generated token ids are not returned by this node (POST /tokenize gives a text's)",
}
# llama.cpp's "no seed given" (LLAMA_DEFAULT_SEED), as it reports it in generation_settings.
RANDOM_SEED = 0xFFFFFFFF


class LlamaCompletionBody(BaseModel):
    """``POST /completion``. Fields for samplers the engines do not have (``mirostat``, ``dry_*``,
    ``xtc_*``, ``typical_p``) and for llama.cpp's slots and cache (``cache_prompt``, ``id_slot``,
    ``n_keep``, ``samplers``) are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    prompt: str | Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]  # text, or the model's token ids
    model: str = Field("auto", min_length=1, max_length=256)
    n_predict: int = -1
    stream: bool = False
    stop: list[str] = Field(default_factory=list)
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int = -1
    json_schema: dict[str, Any] | None = None
    grammar: str = ""
    n_probs: Annotated[int, Field(ge=0)] = 0
    logit_bias: list[tuple[int, float | bool]] | dict[str, float | bool] | None = None
    return_tokens: bool = False

    @field_validator("prompt", mode="before")
    @classmethod
    def _text_prompt(cls, value: Any) -> Any:
        if isinstance(value, str) or (isinstance(value, list) and all(type(t) is int for t in value)):
            return value
        raise ValueError(
            "send the prompt as one string or one list of token ids (mixed, several and multimodal prompts are not supported)"
        )

    @field_validator("n_predict")
    @classmethod
    def _generates(cls, value: int) -> int:
        if value == 0:
            raise ValueError("n_predict 0 (evaluate the prompt only) is not supported; -1 or a positive number")
        return value

    _unsupported = refused(_UNSUPPORTED)

    def bias(self) -> dict[str, float] | None:
        """``logit_bias`` in OpenAI's shape; a bias of ``false`` bans the token, as llama.cpp's does."""
        if self.logit_bias is None:
            return None
        pairs = self.logit_bias.items() if isinstance(self.logit_bias, dict) else self.logit_bias
        return {str(token): -100.0 if bias is False else float(bias) for token, bias in pairs}

    def openai_fields(self) -> dict[str, Any]:
        """The OpenAI text completion it asks for (fields it does not know pass on)."""
        seed = None if self.seed == RANDOM_SEED else self.seed
        fields = {
            **(self.model_extra or {}),
            **native_sampling(self, DEFAULTS, max_tokens=self.n_predict, seed=seed, stop=self.stop),
        }
        fields.update(model=self.model, prompt=self.prompt, stream=self.stream, n=1)
        if self.json_schema is not None:
            fields["response_format"] = {"type": "json_schema", "json_schema": {"name": "json_schema", "schema": self.json_schema}}
        if self.n_probs:
            fields["logprobs"] = self.n_probs
        bias = self.bias()
        if bias:
            fields["logit_bias"] = bias
        return fields

    def generation_settings(self, n_ctx: int) -> dict[str, Any]:
        """``generation_settings`` of its answer, as llama.cpp reports the request's."""
        return {
            "n_ctx": n_ctx, "n_predict": self.n_predict, "seed": self.seed if self.seed >= 0 else RANDOM_SEED,
            **with_defaults(self, DEFAULTS), "repeat_last_n": 64,
            "presence_penalty": self.presence_penalty or 0.0, "frequency_penalty": self.frequency_penalty or 0.0,
            "stop": self.stop, "stream": self.stream, "n_probs": self.n_probs,
        }
