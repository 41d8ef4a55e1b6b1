"""The bottom layer, what every other package speaks and shares:

- the wire formats: OpenAI's (``models.openai``: request bodies, the response and stream writer,
  error bodies, the bodies the cloud pool sends), Ollama's (``models.ollama``) and llama.cpp's
  server's (``models.llamacpp``);
- the Engine protocol every engine implements and the Writer protocol every API's answer writer
  implements (``models.generation``: requests, chunks, usage),
  with the stop matcher and log probabilities engines share;
- the root error and its categories (``models.errors``);
- keys held as digests and the guard against guessing them (``models.keys``, ``models.attempts``),
  and data files only the operator may read (``models.files``);
- the bundled model registry: locate the GGUF and embedding models, verify and prepare them
  (``models.registry``, ``models.prepare``, the embedder's ONNX export).
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
    "default_models_dir",
    "export_embedder",
    "onnx_model_path",
    "prepare",
    "register_step",
    "registry",
    "resolve",
    "verify",
]
