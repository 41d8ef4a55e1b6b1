"""Errors of the edge: the llama.cpp engine, the embedder and the cache (categories: :mod:`models.errors`)."""

from __future__ import annotations

from models.errors import EdgerouteError, EngineError, EngineUnavailableError, RequestRejectedError


class EdgeError(EdgerouteError):
    """Base of the edge's errors."""


class EngineLoadError(EdgeError):
    """The GGUF model could not be loaded by llama.cpp."""


class PromptTooLongError(EdgeError, RequestRejectedError):
    """The prompt plus the requested tokens do not fit the model's context window."""


class ResponseFormatError(EdgeError, RequestRejectedError):
    """``response_format`` asks for a structure the engine cannot enforce (or a continuation breaks it)."""


class LogitBiasError(EdgeError, RequestRejectedError):
    """``logit_bias`` names a token id the model's vocabulary does not have."""


class EdgeSaturatedError(EdgeError, EngineUnavailableError):
    """The edge queue is beyond its bound; the request was not admitted."""


class GenerationError(EdgeError, EngineError):
    """llama.cpp failed while generating."""


class EngineClosedError(EdgeError, EngineUnavailableError):
    """The engine was closed; no request is admitted any more."""

    error_type = "server_error"


class EmbedderError(EdgeError):
    """The embedding model could not be loaded or failed to run."""


class CacheError(EdgeError):
    """The cache's SQLite file could not be opened, read or written."""


class VerifierError(EdgeError):
    """The duplicate verifier's weights are missing or malformed."""
