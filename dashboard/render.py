"""The dashboard's Jinja environment (autoescaped, strict) and its formatting filters."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 10_000:
        return f"{value / 1000:.1f} s"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    if value >= 100:
        return f"{value:.0f} ms"
    return f"{value:.1f} ms"


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value * 100:.{digits}f}%"


def fmt_num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def fmt_money(value: float, currency: str = "USD") -> str:
    if abs(value) >= 100:
        return f"{value:,.2f} {currency}"
    if abs(value) >= 0.01 or value == 0:
        return f"{value:.4f} {currency}"
    return f"{value:.6f} {currency}"


def fmt_clock(ts: float | None) -> str:
    return "–" if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def fmt_datetime(ts: float | None) -> str:
    return "–" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def fmt_bytes(value: float | None) -> str:
    if value is None:
        return "–"
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def fmt_duration(seconds: int) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds >= 60:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    return f"{seconds}s"


def truncate(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


@functools.cache
def environment() -> Environment:
    """One environment per process; autoescape on for every template, whatever its name."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        ms=fmt_ms,
        pct=fmt_pct,
        num=fmt_num,
        money=fmt_money,
        clock=fmt_clock,
        datetime=fmt_datetime,
        bytes=fmt_bytes,
        duration=fmt_duration,
        truncate_text=truncate,
    )
    return env


def render(template: str, **context: Any) -> Markup:
    """Render a template; the result is escaped HTML, safe to embed in another template."""
    return Markup(environment().get_template(template).render(**context))
