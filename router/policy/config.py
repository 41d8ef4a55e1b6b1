"""Typed settings of the routing policy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class PrivateRule(BaseModel):
    """A regex that marks a request private (it never leaves the box) when it matches the prompt."""

    name: str = Field(min_length=1)
    pattern: str
    luhn: bool = Field(False, description="only count digit runs that pass the Luhn check (card numbers)")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {value!r}: {exc}") from exc
        return value


# Separators inside numbers are single spaces, dots or dashes; lookarounds keep the rules from firing
# on parts of longer tokens (dates like 2024-01-15, decimals like 3.14, version strings, longer
# digit groups such as a card number that failed the Luhn check).
EMAIL = r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
CARD = r"(?<![\d+-])\d(?:[ -]?\d){12,18}(?![\d-])"
PHONE = (
    r"(?<![\w.+-])(?<!\d[ .-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?|\d{1,4}[ .-])"
    r"\d{3,4}[ .-]\d{3,4}(?![\w.-]|[ .-]\d)"
    r"|(?<![\w.+-])\+\d{8,15}(?!\w)"
)


def default_private_rules() -> list[PrivateRule]:
    return [
        PrivateRule(name="email", pattern=EMAIL),
        PrivateRule(name="card", pattern=CARD, luhn=True),
        PrivateRule(name="phone", pattern=PHONE),
    ]


class LengthOptions(BaseModel):
    """The ``length`` policy's knobs (the length rule is also the first rule of ``hybrid`` and the
    fallback of ``complexity`` when no embedding was computed)."""

    long_prompt_tokens: int = Field(512, ge=1, description="prompts longer than this go to the cloud")
    long_max_tokens: int = Field(512, ge=1, description="requests asking for more output tokens go to the cloud")


class ComplexityOptions(BaseModel):
    """The ``complexity`` policy's knobs (``hybrid`` starts from the same threshold)."""

    threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="complexity at or above which a prompt goes to the cloud"
    )
    classifier_path: Path | None = Field(
        None, description="complexity classifier weights (JSON); default: the ones shipped in the package"
    )


class HybridOptions(BaseModel):
    """The ``hybrid`` policy's own knobs: how the live load of both sides moves the threshold."""

    edge_queue_bound: int = Field(4, ge=1, description="edge requests waiting at which the edge counts as saturated")
    edge_wait_budget_ms: float = Field(
        2000.0, gt=0, description="a longer expected wait for an edge slot sends the request to the cloud"
    )
    edge_pressure: float = Field(0.15, ge=0.0, le=1.0, description="how far a busy edge lowers the threshold")
    cloud_pressure: float = Field(0.15, ge=0.0, le=1.0, description="how far a busy or slow cloud raises it")
    cloud_member_capacity: int = Field(
        8, ge=1, description="outstanding requests per healthy member at which the cloud counts as full"
    )
    cloud_ttft_budget_ms: float = Field(1500.0, gt=0, description="pool p50 TTFT beyond which the cloud counts as slow")


# The flat names of earlier versions ([routing] complexity_threshold = ..., EDGEROUTE_ROUTING__...),
# still accepted: each moves into its policy's section (an explicit nested value wins).
_FLAT: dict[str, tuple[str, str]] = {
    "long_prompt_tokens": ("length", "long_prompt_tokens"),
    "long_max_tokens": ("length", "long_max_tokens"),
    "complexity_threshold": ("complexity", "threshold"),
    "classifier_path": ("complexity", "classifier_path"),
    **{name: ("hybrid", name) for name in HybridOptions.model_fields},
}


class RoutingSettings(BaseModel):
    """Which policy decides edge or cloud, each policy's own options, and the privacy rules."""

    model_config = ConfigDict(extra="forbid")

    policy: str = Field("hybrid", description="length, complexity or hybrid")
    ttft_slo_s: float = Field(
        1.0, gt=0,
        description="the first-token objective: the hybrid policy sends a request to a side predicted to "
        "meet it, the complexity score choosing when both will, the sooner side when neither will",
    )
    length: LengthOptions = Field(default_factory=LengthOptions)
    complexity: ComplexityOptions = Field(default_factory=ComplexityOptions)
    hybrid: HybridOptions = Field(default_factory=HybridOptions)
    private_detection: bool = Field(True, description="mark requests private when a private rule matches")
    private_rules: list[PrivateRule] = Field(default_factory=default_private_rules)

    @model_validator(mode="before")
    @classmethod
    def _flat_names(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any(k in _FLAT for k in data):
            return data
        out = {k: v for k, v in data.items() if k not in _FLAT}
        for flat, (section, name) in _FLAT.items():
            if flat in data:
                nested = out.get(section)
                nested = dict(nested) if isinstance(nested, dict) else (nested.model_dump() if nested else {})
                nested.setdefault(name, data[flat])
                out[section] = nested
        return out
