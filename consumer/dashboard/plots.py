"""Stacked bar charts drawn server-side as inline SVG: no script, no build step, nothing the
page's Content-Security-Policy must allow (colours come from the stylesheet's ``s-STATUS``
classes, not inline styles). The drawing is pure (counts in, markup out); ``overview_plots``
reads the counts (``consumer.dashboard.activity``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from markupsafe import Markup
from sqlalchemy import Engine

from consumer.dashboard import activity
from consumer.dashboard.activity import Series

WIDTH, HEIGHT = 640, 160
LEFT, BOTTOM, TOP = 36, 18, 6
"""Room for the y-axis labels, the x-axis labels and the top tick."""


def stacked_bars(series: Series, title: str) -> Markup:
    """One bar per bucket, its statuses stacked in name order; a ``<title>`` per segment says
    the count (the browser's tooltip), and the axis names the scale and the window's ends."""
    peak = max(_columns(series), default=0) or 1
    plot_w, plot_h = WIDTH - LEFT, HEIGHT - BOTTOM - TOP
    bar_w = plot_w / max(len(series.starts), 1)
    parts = [
        f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}"'
        f' role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        _axes(series, peak, plot_h),
    ]
    for n, start in enumerate(series.starts):
        y: float = TOP + plot_h
        for status, values in series.counts.items():
            if not values[n]:
                continue
            height = values[n] / peak * plot_h
            y -= height
            label = f"{start:%H:%M} {status}: {values[n]}"
            parts.append(
                f'<rect class="s-{escape(status)}" x="{LEFT + n * bar_w + 0.5:.1f}" y="{y:.1f}"'
                f' width="{max(bar_w - 1, 0.5):.1f}" height="{height:.1f}">'
                f"<title>{escape(label)}</title></rect>"
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def _columns(series: Series) -> list[int]:
    """The total of each bucket."""
    return [sum(values[n] for values in series.counts.values()) for n in range(len(series.starts))]


def _axes(series: Series, peak: int, plot_h: float) -> str:
    base = TOP + plot_h
    first = f"{series.starts[0]:%H:%M}" if series.starts else ""
    last = f"{series.starts[-1]:%H:%M}" if series.starts else ""
    return "".join(
        [
            f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{WIDTH}" y2="{base}"/>',
            f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}"/>',
            f'<text class="tick" x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{peak}</text>',
            f'<text class="tick" x="{LEFT - 4}" y="{base}" text-anchor="end">0</text>',
            f'<text class="tick" x="{LEFT}" y="{HEIGHT - 4}">{first}</text>',
            f'<text class="tick" x="{WIDTH}" y="{HEIGHT - 4}" text-anchor="end">{last}</text>',
        ]
    )


def legend(statuses: Sequence[str]) -> Markup:
    """The statuses a plot stacks, each with its colour."""
    items = "".join(
        f'<span class="key"><i class="swatch s-{escape(s)}"></i>{escape(s)}</span>'
        for s in statuses
    )
    return Markup(f'<div class="legend">{items}</div>')


@dataclass(frozen=True)
class Plot:
    name: str
    title: str
    total: int
    svg: Markup
    legend: Markup


def overview_plots(engine: Engine, now: datetime) -> list[Plot]:
    """Deliveries by outcome and jobs finished or dead, over the last hour and the last day."""
    plots = []
    for name, what, read in (
        ("deliveries", "Deliveries by outcome", activity.deliveries),
        ("jobs", "Jobs finished (done / dead)", activity.job_results),
    ):
        for window in (activity.HOUR, activity.DAY):
            series = read(engine, now, window)
            title = f"{what}, {window.name}"
            plot_name = f"{name}-{window.buckets}"
            svg = stacked_bars(series, title)
            plots.append(Plot(plot_name, title, series.total, svg, legend(list(series.counts))))
    return plots
