"""The OpenAI wire format, written once for every server and client here: request bodies, the
response and stream writer, error bodies and their HTTP mapping, the API-key guard.

Not imported by :mod:`models` itself: only the servers pay for Litestar and pydantic here.
"""

from .auth import API_KEYS, api_key_guard
from .errors import error_body, exception_handlers, http_status
from .schemas import MAX_TOKENS_LIMIT, ChatBody, CompletionBody, Message, SamplingBody, StreamOptions, TextPart
from .stream import DONE, ChunkWriter, Kind, new_id, sse, usage_dict

__all__ = [
    "API_KEYS",
    "DONE",
    "MAX_TOKENS_LIMIT",
    "ChatBody",
    "ChunkWriter",
    "CompletionBody",
    "Kind",
    "Message",
    "SamplingBody",
    "StreamOptions",
    "TextPart",
    "api_key_guard",
    "error_body",
    "exception_handlers",
    "http_status",
    "new_id",
    "sse",
    "usage_dict",
]
