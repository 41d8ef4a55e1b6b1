"""Model artifacts: locate the bundled GGUF and embedding models, verify and prepare them."""

from .errors import (
    AuthenticationError,
    ChecksumMismatchError,
    EdgerouteError,
    EngineError,
    EngineUnavailableError,
    ModelError,
    RequestRejectedError,
    StreamBrokenError,
    UnknownModelError,
)
from .generation import (
    Chunk,
    Completion,
    Engine,
    EngineLoad,
    JSON_OBJECT,
    GenerationRequest,
    SamplingParams,
    TokenLogprob,
    Usage,
    collect,
)
from .onnx_export import export_embedder, onnx_model_path
from .prepare import prepare, register_step
from .registry import (
    EDGE_DEFAULT,
    EMBEDDING_DEFAULT,
    ModelSpec,
    default_models_dir,
    registry,
    resolve,
    verify,
)

__all__ = [
    "EDGE_DEFAULT",
    "EMBEDDING_DEFAULT",
    "JSON_OBJECT",
    "AuthenticationError",
    "ChecksumMismatchError",
    "Chunk",
    "Completion",
    "EdgerouteError",
    "Engine",
    "EngineError",
    "EngineUnavailableError",
    "EngineLoad",
    "GenerationRequest",
    "ModelError",
    "ModelSpec",
    "RequestRejectedError",
    "SamplingParams",
    "StreamBrokenError",
    "TokenLogprob",
    "UnknownModelError",
    "Usage",
    "collect",
    "default_models_dir",
    "export_embedder",
    "onnx_model_path",
    "prepare",
    "register_step",
    "registry",
    "resolve",
    "verify",
]
