"""The decision record: one per request, the shape of a row of the ``decisions`` table."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Final

from .errors import InvalidEventError

ROUTES: Final = ("cache-exact", "cache-semantic", "edge", "cloud", "error")
STATUSES: Final = ("ok", "error")
CACHE_OUTCOMES: Final = ("hit", "miss")
PREVIEW_CHARS: Final = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionEvent:
    """What happened to one request: where it ran, why, how long it took, what it cost.

    Field names are the columns of the ``decisions`` table (the migrations in ``store.py``). Two
    optional fields extend the contract: ``cache`` ("hit", "miss", or None when the cache was
    not consulted) and ``cache_refusal`` (the guard that refused a near-duplicate).
    """

    ts: float
    request_id: str
    tenant: str
    model: str
    route: str
    reason: str
    fallback: str | None = None
    degraded: str | None = None
    status: str = "ok"
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    similarity: float | None = None
    complexity: float | None = None
    member: str | None = None
    stream: bool = False
    private: bool = False
    prompt_preview: str = ""
    features: dict[str, Any] = field(default_factory=dict)
    cache: str | None = None
    cache_refusal: str | None = None

    def __post_init__(self) -> None:
        if self.route not in ROUTES:
            raise InvalidEventError(f"unknown route {self.route!r}; expected one of {', '.join(ROUTES)}")
        if self.status not in STATUSES:
            raise InvalidEventError(f"unknown status {self.status!r}; expected ok or error")
        if self.cache is not None and self.cache not in CACHE_OUTCOMES:
            raise InvalidEventError(f"unknown cache outcome {self.cache!r}; expected hit, miss or None")
        # The event is frozen so subscribers can share it; normalise through object.__setattr__.
        feats = self.features
        if dataclasses.is_dataclass(feats) and not isinstance(feats, type):
            object.__setattr__(self, "features", _as_dict(feats))
        elif not isinstance(feats, dict):
            raise InvalidEventError(f"features must be a dict or a dataclass, not {type(feats).__name__}")
        # A private prompt's text never reaches the log, the feed or the metrics.
        preview = "" if self.private else self.prompt_preview[:PREVIEW_CHARS]
        object.__setattr__(self, "prompt_preview", preview)
        if self.route.startswith("cache-") and self.cache is None:
            object.__setattr__(self, "cache", "hit")

    @property
    def is_cache_hit(self) -> bool:
        return self.route.startswith("cache-")

    def to_row(self) -> dict[str, Any]:
        """The row as stored: booleans as 0/1, features as JSON."""
        row = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        row["stream"] = int(self.stream)
        row["private"] = int(self.private)
        row["features"] = json.dumps(self.features, separators=(",", ":"), default=_json_default)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> DecisionEvent:
        """Rebuild an event from a stored row (columns a newer schema added may be missing)."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in row.items() if k in names}
        values["stream"] = bool(values.get("stream") or 0)
        values["private"] = bool(values.get("private") or 0)
        raw = values.get("features")
        values["features"] = json.loads(raw) if raw else {}
        values["prompt_preview"] = values.get("prompt_preview") or ""
        return cls(**values)


def _as_dict(obj: Any) -> dict[str, Any]:
    """``dataclasses.asdict``, without its deep copy when every field is a plain value (the
    router's features are: this runs once per request)."""
    out = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if all(isinstance(v, str | int | float | bool | None) for v in out.values()):
        return out
    return dataclasses.asdict(obj)


def _json_default(value: Any) -> Any:
    # numpy scalars and the like: anything with item() is a number in disguise.
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    return str(value)
