"""The overview's charts as inline SVG, drawn on the server (no script, no build step):
runs finished per minute (succeeded and failed, stacked) and lateness per minute (p50
and p95, due time to start) over the last hour, from ``app.queues.activity``."""

from __future__ import annotations

from markupsafe import Markup, escape

from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.views.activity import Minute

WIDTH, HEIGHT, LEFT, BOTTOM = 720, 150, 48, 18
PLOT_W, PLOT_H = WIDTH - LEFT - 8, HEIGHT - BOTTOM - 8


def _frame(chart_id: str, title: str, top_label: str, minutes: list[Minute], body: str) -> Markup:
    first = to_datetime(minutes[0].start_ms).strftime("%H:%M")
    last = to_datetime(minutes[-1].start_ms).strftime("%H:%M")
    return Markup(
        f'<svg id="{chart_id}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
        f'<line x1="{LEFT}" y1="8" x2="{LEFT}" y2="{8 + PLOT_H}" stroke="#9aa5b4"/>'
        f'<line x1="{LEFT}" y1="{8 + PLOT_H}" x2="{LEFT + PLOT_W}" y2="{8 + PLOT_H}" '
        'stroke="#9aa5b4"/>'
        f'<text x="{LEFT - 4}" y="16" text-anchor="end" font-size="11">{escape(top_label)}</text>'
        f'<text x="{LEFT - 4}" y="{8 + PLOT_H}" text-anchor="end" font-size="11">0</text>'
        f'<text x="{LEFT}" y="{HEIGHT - 4}" font-size="11">{first} UTC</text>'
        f'<text x="{LEFT + PLOT_W}" y="{HEIGHT - 4}" text-anchor="end" font-size="11">'
        f"{last}</text>{body}</svg>"
    )


def throughput_chart(minutes: list[Minute]) -> Markup:
    """Bars of runs finished per minute: succeeded (green) under failed (red)."""
    peak = max((m.finished for m in minutes), default=0) or 1
    step = PLOT_W / len(minutes)
    bars = []
    for index, minute in enumerate(minutes):
        x = LEFT + index * step + 1
        ok, bad = minute.counts["succeeded"], minute.failed
        ok_h, bad_h = PLOT_H * ok / peak, PLOT_H * bad / peak
        base = 8 + PLOT_H
        stamp = to_datetime(minute.start_ms).strftime("%H:%M")
        bars.append(
            f'<g class="minute" data-minute="{stamp}" data-succeeded="{ok}" data-failed="{bad}">'
            f"<title>{stamp}: {ok} succeeded, {bad} failed</title>"
            f'<rect x="{x:.1f}" y="{base - ok_h:.1f}" width="{step - 2:.1f}" '
            f'height="{ok_h:.1f}" fill="#2e9d5b"/>'
            f'<rect x="{x:.1f}" y="{base - ok_h - bad_h:.1f}" width="{step - 2:.1f}" '
            f'height="{bad_h:.1f}" fill="#c8324a"/></g>'
        )
    return _frame(
        "throughput-chart", "runs finished per minute", f"{peak}/min", minutes, "".join(bars)
    )


def _readable(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def lateness_chart(minutes: list[Minute]) -> Markup:
    """Lines of the lateness p50 (blue) and p95 (orange) per minute; minutes without a
    start are gaps."""
    p50 = [m.lateness_quantile(0.5) for m in minutes]
    p95 = [m.lateness_quantile(0.95) for m in minutes]
    peak = max((v for v in p95 if v is not None), default=0.0) or 0.001
    step = PLOT_W / len(minutes)

    def line(values: list[float | None], colour: str, name: str) -> str:
        dots: list[str] = []
        runs: list[list[str]] = []
        run: list[str] = []
        for index, value in enumerate(values):
            if value is None:
                if run:
                    runs.append(run)
                run = []
                continue
            x, y = LEFT + (index + 0.5) * step, 8 + PLOT_H - PLOT_H * value / peak
            run.append(f"{x:.1f},{y:.1f}")
            dots.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{colour}">'
                f"<title>{name} {_readable(value)}</title></circle>"
            )
        if run:
            runs.append(run)
        lines = "".join(
            f'<polyline points="{" ".join(r)}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
            for r in runs
        )
        return f'<g class="{name}">{lines}{"".join(dots)}</g>'

    body = line(p50, "#2f6fd6", "p50") + line(p95, "#e08a1e", "p95")
    return _frame(
        "lateness-chart", "lateness per minute (p50, p95)", _readable(peak), minutes, body
    )
