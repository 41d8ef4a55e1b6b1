"""The bottom layer every other package speaks and shares: the wire formats (``models.openai``,
``models.ollama``, ``models.llamacpp``), the Engine and Writer protocols (``models.generation``),
the root error, keys as digests and the guard against guessing them, data files only the operator
may read, and the bundled model registry (locate, verify, prepare, the embedder's ONNX export).
"""

from .errors import (
    ChecksumMismatchError,
    EdgerouteError,
    EngineError,
    EngineUnavailableError,
    ModelError,
    StreamBrokenError,
    UnknownModelError,
)
from .generation import (
    Chunk,
    Completion,
    Engine,
    EngineLoad,
    JSON_OBJECT,
    REPEAT_WINDOW,
    GenerationRequest,
    SamplingParams,
    TokenLogprob,
    Usage,
    Writer,
    collect,
)
from .onnx_export import export_embedder, onnx_model_path
from .prepare import prepare, register_step
from .registry import (
    EDGE_DEFAULT,
    EMBEDDING_DEFAULT,
    ModelSpec,
    default_data_dir,
    default_models_dir,
    registry,
    resolve,
    verify,
)

__all__ = [
    "EDGE_DEFAULT",
    "EMBEDDING_DEFAULT",
    "JSON_OBJECT",
    "REPEAT_WINDOW",
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
    "SamplingParams",
    "StreamBrokenError",
    "TokenLogprob",
    "UnknownModelError",
    "Usage",
    "Writer",
    "collect",
    "default_data_dir",
    "default_models_dir",
    "export_embedder",
    "onnx_model_path",
    "prepare",
    "register_step",
    "registry",
    "resolve",
    "verify",
]
