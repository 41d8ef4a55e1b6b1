"""``POST /v1/embeddings`` in OpenAI's wire format: the request body and the answer."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_INPUTS = 2048  # OpenAI's cap on the inputs of one request


class EmbeddingsBody(BaseModel):
    """``POST /v1/embeddings``; unknown OpenAI fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    input: str | Annotated[list[str], Field(min_length=1, max_length=MAX_INPUTS)]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int, Field(ge=1)] | None = None
    user: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _text_not_token_ids(cls, value: Any) -> Any:
        # OpenAI also takes token ids of its own tokenizer; they mean nothing to another model.
        if isinstance(value, list) and value and all(isinstance(v, int | list) for v in value):
            raise ValueError("token ids are not accepted here: send the text (a string or a list of strings)")
        return value

    @field_validator("input")
    @classmethod
    def _no_empty_text(cls, value: str | list[str]) -> str | list[str]:
        if any(not text for text in ([value] if isinstance(value, str) else value)):
            raise ValueError("input must not be or contain an empty string")
        return value

    def texts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)


def embedding_list(
    vectors: Sequence[np.ndarray], model: str, prompt_tokens: int, encoding_format: str = "float"
) -> dict[str, Any]:
    """The answer: one entry per input, in order; ``base64`` is the float32 bytes, little-endian."""
    data = [
        {"object": "embedding", "index": i, "embedding": _encode(vec, encoding_format)}
        for i, vec in enumerate(vectors)
    ]
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def _encode(vec: np.ndarray, encoding_format: str) -> list[float] | str:
    little = np.asarray(vec, dtype="<f4")
    if encoding_format == "base64":
        return base64.b64encode(little.tobytes()).decode("ascii")
    return little.tolist()  # Python floats, each the float32 value exactly
