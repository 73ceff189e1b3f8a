"""SVG pieces for the HTML report (html.py): escaping, the fills, a time scale, marks with titles.

Everything is drawn here, in Python: the page needs no script. The fills differ in lightness and
in pattern, not only in hue, so a greyscale print (or a reader who cannot tell the hues apart)
still tells busy from idle from shutting down from left behind.
"""

from __future__ import annotations

import html
from typing import Any

from ...common.vocab import COMPILE_SIDECAR, COMPILE_WORKER, MAIN
from ..words.fmt import escape

# Fills: (id, what it means, the pattern's SVG). Lightness steps apart: busy darkest, idle lightest.
FILLS = (
    ("busy", "pool busy (made, starting, serving jobs)",
     '<pattern id="busy" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" '
     'fill="#1d3f6e"/></pattern>'),
    ("idle", "pool idle, between its uses or after its last job (holding memory)",
     '<pattern id="idle" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
     '<rect width="6" height="6" fill="#fbe3b4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#8a5a00" '
     'stroke-width="1.5"/></pattern>'),
    ("unserved", "pool never served (its sidecar never reached its serving loop; jobs sent to it waited)",
     '<pattern id="unserved" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" '
     'fill="#b8b8b8"/><circle cx="3" cy="3" r="1" fill="#333"/></pattern>'),
    ("orphaned", "pool outliving the process that made it (nobody can use or stop it)",
     '<pattern id="orphaned" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" '
     'fill="#5e4b7a"/><line x1="0" y1="3" x2="6" y2="3" stroke="#fff" stroke-width="1"/></pattern>'),
    ("stopping", "pool shutting down (asked to stop, sidecar not yet gone)",
     '<pattern id="stopping" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" '
     'fill="#c9706a"/><path d="M0 0L6 6M6 0L0 6" stroke="#4a1410" stroke-width="1"/></pattern>'),
    ("left", "left running after the main process ended",
     '<pattern id="left" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)">'
     '<rect width="8" height="8" fill="#000"/><rect width="3" height="8" fill="#fff"/></pattern>'),
)
# Process bars by role: greys of distinct lightness (the role is also written beside each lane).
ROLE_FILL = {MAIN: "#222", COMPILE_SIDECAR: "#2f6f4f", COMPILE_WORKER: "#8fbf9f"}
OTHER_FILL = "#d9d9d9"
# Memory lines: a dash pattern and a grey per pool, cycled.
DASHES = ("", "7 3", "2 2", "10 3 2 3", "4 4")
LINE_GREYS = ("#111", "#444", "#777", "#222", "#555")


def esc(text: Any) -> str:
    """A logged string for the page: control and invisible characters as the text report writes them
    (fmt.escape), then HTML-escaped. A lone surrogate (a non-UTF-8 argv byte, as the log keeps it) is
    written \\udcNN, as the text report's stdout shows it: UTF-8 cannot hold it, and the page's write
    would fail."""
    clean = escape(str(text)).encode("utf-8", "backslashreplace").decode("utf-8")
    return html.escape(clean, quote=True)


def num(x: float) -> str:
    """A coordinate: one decimal, no trailing zeros (the page's size grows with every digit)."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def defs() -> str:
    """The patterns every chart refers to, once per page (ids are the page's: every inline svg of it
    finds them). Inline svg needs no namespace URL: the page names none."""
    return ('<svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs>'
            + "".join(f for _, _, f in FILLS) + "</defs></svg>")


def title(lines: list[str]) -> str:
    """A <title> (the browser's tooltip) of escaped lines."""
    return "<title>" + "&#10;".join(esc(x) for x in lines if x) + "</title>"


def rect(x: float, y: float, w: float, h: float, fill: str, tip: str = "", cls: str = "", extra: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    body = f'<rect x="{num(x)}" y="{num(y)}" width="{num(max(w, 0.8))}" height="{num(h)}" fill="{fill}"{c}{extra}'
    return body + (f">{tip}</rect>" if tip else "/>")


def text(x: float, y: float, words: str, cls: str = "", anchor: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    a = f' text-anchor="{anchor}"' if anchor else ""
    return f'<text x="{num(x)}" y="{num(y)}"{c}{a}>{esc(words)}</text>'


class Scale:
    """Seconds (from the report's first record) to x pixels, and the axis ticks."""

    def __init__(self, lo: float, hi: float, x0: float, x1: float) -> None:
        self.lo, self.hi = lo, hi if hi > lo else lo + 1.0
        self.x0, self.x1 = x0, x1

    def x(self, t: float) -> float:
        t = min(max(t, self.lo), self.hi)
        return self.x0 + (t - self.lo) / (self.hi - self.lo) * (self.x1 - self.x0)

    def ticks(self) -> list[float]:
        span = self.hi - self.lo
        step = next((s for s in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)
                     if span / s <= 10), span / 10)
        first = -(-self.lo // step) * step
        return [first + i * step for i in range(int((self.hi - first) / step) + 1)]

    def axis(self, y: float, height: float) -> str:
        """Tick lines down the chart and their labels (seconds) under it."""
        out = []
        for t in self.ticks():
            x = num(self.x(t))
            out.append(f'<line x1="{x}" y1="0" x2="{x}" y2="{num(height)}" class="grid"/>')
            out.append(text(self.x(t), y, f"{t:g} s", "tick", "middle"))
        return "".join(out)


def legend() -> str:
    """The fills and process colours, named: one small svg."""
    items = [(f"url(#{fid})", words) for fid, words, _ in FILLS]
    items += [(fill, f"{role} process") for role, fill in ROLE_FILL.items()] + [(OTHER_FILL, "other process")]
    per_row, w = 3, 330
    rows = -(-len(items) // per_row)
    out = [f'<svg class="legend" viewBox="0 0 {per_row * w} {rows * 20}" width="{per_row * w}" '
           f'height="{rows * 20}" role="img" aria-label="legend">']
    for i, (fill, words) in enumerate(items):
        x, y = (i % per_row) * w, (i // per_row) * 20
        out.append(rect(x + 2, y + 3, 26, 13, fill, extra=' stroke="#000" stroke-width="0.5"'))
        out.append(text(x + 34, y + 14, words))
    out.append("</svg>")
    return "".join(out)
