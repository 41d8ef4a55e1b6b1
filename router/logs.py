"""The node's logs: one INFO line per request, plain text or JSON, and no library chatter.

The request line is written where the decision is recorded (:mod:`router.pipeline`), with its
fields also attached as ``extra`` so the JSON format carries them as keys.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Literal

from .telemetry import DecisionEvent

LogFormat = Literal["text", "json"]

REQUESTS = logging.getLogger("edgeroute.requests")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# httpx logs every request it sends at INFO: one per member health poll (every 2 s) and per request.
_CHATTY = ("httpx", "httpcore")
_RECORD_ATTRS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# Characters that end a bare value in the text line. A value with one of them, or with a
# character that is not printable (a newline, U+2028), or none at all, is quoted and escaped:
# a client's header (the tenant) must not add fields or lines of its own.
_NOT_BARE = frozenset(' ="\\')
# The request line's fields, in order (then ``error``, when there is one).
_LINE_FIELDS = (
    "request_id", "tenant", "model", "route", "reason", "status", "latency_ms", "ttft_ms", "prompt_tokens",
    "completion_tokens", "fallback", "member",
)


def logfmt_value(value: object) -> str:
    """``value`` as logfmt writes it: bare when it can be, else in double quotes, escaped."""
    text = str(value)
    if text and all(c.isprintable() and c not in _NOT_BARE for c in text):
        return text
    quoted = json.dumps(text, ensure_ascii=False)
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in quoted)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, and every ``extra`` field."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in _RECORD_ATTRS})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: str = "info", fmt: LogFormat = "text") -> None:
    """Root logging for `edgeroute serve` (uvicorn's loggers included: they propagate to root)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))


def log_request(event: DecisionEvent) -> None:
    """The request's one INFO line."""
    if not REQUESTS.isEnabledFor(logging.INFO):
        return
    fields = {name: getattr(event, name) for name in _LINE_FIELDS}
    fields["latency_ms"] = round(event.latency_ms, 1)
    fields["ttft_ms"] = None if event.ttft_ms is None else round(event.ttft_ms, 1)
    if event.error:
        fields["error"] = event.error
    text = " ".join(
        f"{k}={logfmt_value(v)}" for k, v in fields.items() if v is not None and k != "request_id"
    )
    REQUESTS.info("%s %s", event.request_id, text, extra=fields)
