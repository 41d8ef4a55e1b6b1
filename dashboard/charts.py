"""Geometry of the server-rendered SVG charts; the templates only draw what is computed here."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from router.telemetry import ROUTES, Snapshot
from router.telemetry.aggregate import LATENCY_EDGES_MS

from .render import fmt_duration

WIDTH = 1000
HEIGHT = 200
PAD_LEFT = 44
PAD_BOTTOM = 22
PAD_TOP = 8


@dataclass(frozen=True, slots=True)
class Segment:
    route: str
    y: float
    height: float
    count: int


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    width: float
    total: int
    title: str
    segments: tuple[Segment, ...]


@dataclass(frozen=True, slots=True)
class Tick:
    pos: float
    label: str


@dataclass(frozen=True, slots=True)
class StackedChart:
    """Stacked bars by route, with ticks; coordinates in the SVG's own units."""

    width: ClassVar[int] = WIDTH
    height: ClassVar[int] = HEIGHT
    plot_left: ClassVar[int] = PAD_LEFT
    plot_bottom: ClassVar[int] = HEIGHT - PAD_BOTTOM
    title: str
    bars: tuple[Bar, ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    routes: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return all(b.total == 0 for b in self.bars)


def nice_max(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value`` (at least 1)."""
    if value <= 1:
        return 1
    exp = 10 ** math.floor(math.log10(value))
    for m in (1, 2, 5):
        if m * exp >= value:
            return m * exp
    return 10 * exp


def _stacked(
    title: str, columns: Sequence[tuple[str, Mapping[str, int]]], x_ticks: Sequence[tuple[int, str]]
) -> StackedChart:
    plot_w = WIDTH - PAD_LEFT - 4
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    bottom = HEIGHT - PAD_BOTTOM
    top = nice_max(max((sum(c.values()) for _, c in columns), default=0))
    n = max(1, len(columns))
    step = plot_w / n
    gap = min(2.0, step * 0.2)
    bars = []
    present: set[str] = set()
    for i, (label, counts) in enumerate(columns):
        y = float(bottom)
        segs = []
        for route in ROUTES:
            count = counts.get(route, 0)
            if not count:
                continue
            present.add(route)
            h = count / top * plot_h
            y -= h
            segs.append(Segment(route, round(y, 2), round(h, 2), count))
        total = sum(counts.values())
        bars.append(
            Bar(round(PAD_LEFT + i * step + gap / 2, 2), round(step - gap, 2), total, label, tuple(segs))
        )
    y_ticks = tuple(Tick(round(bottom - f * plot_h, 2), _count_label(top * f)) for f in (0.0, 0.5, 1.0))
    xt = tuple(Tick(round(PAD_LEFT + (i + 0.5) * step, 2), text) for i, text in x_ticks)
    return StackedChart(title, tuple(bars), y_ticks, xt, tuple(r for r in ROUTES if r in present))


def _count_label(value: float) -> str:
    return f"{value:g}" if value < 10_000 else f"{value / 1000:g}k"


def split_chart(snap: Snapshot) -> StackedChart:
    """Requests per route over the window, one bar per ``series_step_s`` seconds."""
    columns = []
    n = len(snap.series)
    for point in snap.series:
        ago = int(snap.ts - point.start)
        parts = ", ".join(f"{r} {c}" for r, c in point.counts.items()) or "no requests"
        columns.append((f"{ago}s ago: {parts}", point.counts))
    ticks = []
    if n:
        for i in (0, n // 2, n - 1):
            ago = (n - i) * snap.series_step_s  # where the bar starts
            ticks.append((i, "now" if i == n - 1 else f"-{fmt_duration(ago)}"))
    title = f"Requests per {snap.series_step_s} s by route, last {fmt_duration(snap.window_s)}"
    return _stacked(title, columns, ticks)


def latency_chart(snap: Snapshot) -> StackedChart:
    """How many requests of each route fell in each latency bucket over the window."""
    labels = [f"≤{_ms(e)}" for e in LATENCY_EDGES_MS] + [f">{_ms(LATENCY_EDGES_MS[-1])}"]
    columns = [{s.route: s.histogram[i] for s in snap.routes if s.histogram[i]} for i in range(len(labels))]
    titled = [
        (f"{label}: " + (", ".join(f"{r} {c}" for r, c in counts.items()) or "none"), counts)
        for label, counts in zip(labels, columns, strict=True)
    ]
    title = f"Latency distribution by route, last {fmt_duration(snap.window_s)}"
    return _stacked(title, titled, list(enumerate(labels)))


@dataclass(frozen=True, slots=True)
class ShareSegment:
    route: str
    x: float
    width: float
    count: int
    pct: float


def share_bar(split: Mapping[str, int], width: int = WIDTH) -> tuple[ShareSegment, ...]:
    """One horizontal bar split by route share."""
    total = sum(split.values())
    if not total:
        return ()
    x = 0.0
    out = []
    for route in ROUTES:
        count = split.get(route, 0)
        if count:
            w = count / total * width
            out.append(ShareSegment(route, round(x, 2), round(w, 2), count, 100.0 * count / total))
            x += w
    return tuple(out)


def _ms(value: float) -> str:
    return f"{value / 1000:g}s" if value >= 1000 else f"{value:g}ms"
