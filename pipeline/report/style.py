"""The report's look, shared by its figures and pages: colours, marker symbols and the formatting
of numbers, escaped text and JSON inside a page."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence

from pipeline.contract.inert import format_escaped
from pipeline.output import numbers

VERDICT_COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "INCONCLUSIVE": "#9a6700"}
EXPLANATION_COLOURS = {
    "explained": "#1a7f37",
    "contradicted": "#cf222e",
    "unsupported": "#bc4c00",
    "unverifiable": "#8250df",
    "not_declared": "#6e7781",
}
OUTCOME_COLOURS = {
    "confirmed": "#1a7f37",
    "consistent": "#0a7d6c",
    "contradicted": "#cf222e",
    "unsupported": "#bc4c00",
    "unverifiable": "#8250df",
    "assumed": "#57606a",
}
# Direction of a comparison: ratio > 1 (the candidate is smaller / better) or < 1.
DIRECTION_COLOURS = {
    "down": "#0969da",
    "up": "#bf3989",
    "none": "#6e7781",
    "unverifiable": "#8250df",
}
# A benchmark's verdict (contract §15): the regressions stand out, the undecided are hollow.
MEMBER_COLOURS = {
    "regressed": "#cf222e",
    "improved": "#1a7f37",
    "unchanged": "#0969da",
    "inconclusive": "#9a6700",
    "removed": "#82071e",
    "added": "#6e7781",
}
# Marker symbol of an attempt on the timeline, by its explanation.
EXPLANATION_SYMBOLS = {
    "explained": "circle",
    "unsupported": "triangle-down",
    "contradicted": "x",
    "unverifiable": "diamond",
    "not_declared": "square",
}


def esc(value: object) -> str:
    """Free text in the page: format characters escaped (pipeline.contract.inert), then HTML."""
    return html.escape(format_escaped("" if value is None else str(value)), quote=True)


def plot_esc(value: object) -> str:
    """Free text for a plotly label, hover or annotation: plotly draws its own small HTML and
    decodes only &amp; &lt; &gt; (a few other names) and numeric references, not &quot;, so a
    quote is left as it is (it showed as "&quot;"); the figure's JSON is made safe inside its
    <script> by script_json."""
    return html.escape(format_escaped("" if value is None else str(value)), quote=False)


def html_number(value: float | None, digits: int = 4) -> str:
    """numbers.fmt_number with the report's marks."""
    return numbers.fmt_number(value, f".{digits}f", numbers.HTML)


def fmt_pct(value: float | None) -> str:
    """A percentage; an infinite one (never from the rules) is shown as no value."""
    if value is None or not math.isfinite(value):
        return numbers.HTML.none
    return numbers.fmt_number(value, "+.2f") + "%"


def script_json(value: object) -> str:
    """JSON safe inside a <script> element: nothing in it can end the element or open a comment."""
    text = value if isinstance(value, str) else json.dumps(value, allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def clamp(value: float | None, top: float) -> float | None:
    """+inf (the candidate's quantity vanished) drawn at the top of the axis."""
    return None if value is None else min(value, top)


def log_range(values: Iterable[float | None], *, include: Sequence[float] = (1.0,)) -> list[float]:
    """A log10 axis range around every finite positive value, padded, never narrower than ±2%."""
    logs = [
        math.log10(v) for v in [*values, *include] if v is not None and math.isfinite(v) and v > 0
    ]
    lo, hi = min(logs), max(logs)
    lo, hi = min(lo, -0.0086), max(hi, 0.0086)  # log10(0.98), log10(1.02)
    pad = (hi - lo) * 0.08
    return [lo - pad, hi + pad]
