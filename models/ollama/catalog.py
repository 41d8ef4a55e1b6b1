"""Ollama's model listings: ``/api/tags`` (what may be asked for), ``/api/ps`` (what is loaded)
and ``/api/show`` (one model's details)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .schemas import tag_name

# Loaded for the node's lifetime: Ollama shows a model kept loaded forever (keep_alive -1) so.
_FOREVER = "2318-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One model id the node answers to, as Ollama describes a model."""

    model_id: str
    capabilities: tuple[str, ...]  # "completion", "embedding"
    family: str = ""  # the GGUF architecture; "" for a route or a cloud model
    format: str = ""  # "gguf" for a file on the box; "" where there is none
    size: int = 0
    modified_at: str = "1970-01-01T00:00:00Z"
    digest: str = ""
    quantization: str = ""
    context_length: int | None = None
    description: str = ""

    def details(self) -> dict[str, Any]:
        return {
            "parent_model": "",
            "format": self.format,
            "family": self.family,
            "families": [self.family] if self.family else None,
            "parameter_size": "",
            "quantization_level": self.quantization,
        }

    def listed(self) -> dict[str, Any]:
        name = tag_name(self.model_id)
        return {
            "name": name, "model": name, "modified_at": self.modified_at, "size": self.size,
            "digest": self.digest, "details": self.details(),
        }


def tags(entries: list[CatalogEntry]) -> dict[str, Any]:
    return {"models": [e.listed() for e in entries]}


def running(entries: list[CatalogEntry]) -> dict[str, Any]:
    """``/api/ps``: the models loaded on the box (they stay loaded while the node runs)."""
    return {
        "models": [
            {**e.listed(), "expires_at": _FOREVER, "size_vram": 0, "context_length": e.context_length}
            for e in entries
        ]
    }


def show(entry: CatalogEntry) -> dict[str, Any]:
    info: dict[str, Any] = {"general.basename": entry.model_id, "general.description": entry.description}
    if entry.family:
        info["general.architecture"] = entry.family
        if entry.context_length is not None:
            info[f"{entry.family}.context_length"] = entry.context_length
    return {
        "modelfile": f"# served by edgeroute\nFROM {entry.model_id}\n",
        "parameters": "",
        "template": "",
        "details": entry.details(),
        "model_info": info,
        "capabilities": list(entry.capabilities),
        "modified_at": entry.modified_at,
    }
