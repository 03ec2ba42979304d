"""SVG figures from the raw JSON of one bench/harness.py run (report.py calls `write_figures`).

    python bench/figures.py results-raw/<run>.json OUT_DIR     (report.py --figures-only does the same)

Plain SVG written by hand (no plotting library): the same input gives the same bytes, and GitHub
renders the files as images. Three figures:

- `handoff-cdf.svg`: scenario 2, the CDF of every handoff latency of each library (all repeats
  pooled), on a log axis;
- `uncontended.svg`: scenario 1, each library's median pairs/s, with the Redis floor (EVALSHA,
  one client, ÷ 2) drawn as a line;
- `contended.svg`: scenario 3, each library's median ops/s beside its max wait.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from xml.sax.saxutils import escape

FLOOR = ("floor", "redis-benchmark")
LANG = {"rust": "Rust", "python": "Python", "node": "Node", "python->node": "Python → Node"}
# Colour-blind-safe palette (Okabe–Ito), then greys; crosslock's rows come first so they get the
# first colours.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
           "#666666", "#999999", "#333333", "#BBBBBB"]
FONT = 'font-family="Helvetica, Arial, sans-serif"'


def _med(xs):
    return statistics.median(xs) if xs else float("nan")


def _num(x):
    """A coordinate with fixed precision: deterministic and short."""
    return f"{x:.1f}"


def _fmt(v):
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


class Svg:
    def __init__(self, width, height, title):
        self.w, self.h = width, height
        self.parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                      f'viewBox="0 0 {width} {height}" {FONT} font-size="12">',
                      f"<title>{escape(title)}</title>",
                      f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']

    def text(self, x, y, s, anchor="start", size=None, weight=None, rotate=None, fill="#222222"):
        attrs = f'x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}" fill="{fill}"'
        if size:
            attrs += f' font-size="{size}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        if rotate is not None:
            attrs += f' transform="rotate({rotate} {_num(x)} {_num(y)})"'
        self.parts.append(f"<text {attrs}>{escape(s)}</text>")

    def line(self, x1, y1, x2, y2, stroke="#222222", width=1, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" '
                          f'stroke="{stroke}" stroke-width="{width}"{d}/>')

    def rect(self, x, y, w, h, fill):
        self.parts.append(f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(max(w, 0))}" height="{_num(h)}" fill="{fill}"/>')

    def path(self, points, stroke, width=2):
        d = " ".join(("M" if i == 0 else "L") + f"{_num(x)},{_num(y)}" for i, (x, y) in enumerate(points))
        self.parts.append(f'<path d="{d}" fill="none" stroke="{stroke}" stroke-width="{width}" '
                          f'stroke-linejoin="round"/>')

    def render(self):
        return "\n".join(self.parts + ["</svg>"]) + "\n"


def _nice_max(v):
    """The smallest of 1, 1.2, 1.6, 2, 2.4, 3.2, 4, 6, 8 × 10^k at or above v (each ÷ 4 is a round tick)."""
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.6, 2, 2.4, 3.2, 4, 6, 8, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def _label(lang, lib):
    return f"{LANG.get(lang, lang)} {lib}"


def _empty(svg, msg):
    svg.text(svg.w / 2, svg.h / 2, msg, anchor="middle")
    return svg.render()


def handoff_cdf(R) -> str:
    """Scenario 2: one CDF line per library, latency (ms) on a log axis."""
    series = []
    for h in R.get("handoff", []):
        lat = sorted(x for rep in h.get("latencies_us", []) or [] for x in rep)
        if lat:
            series.append((_label(h["lang"], h["lib"]), [x / 1000 for x in lat]))
    width, left, right, top = 760, 70, 20, 40
    legend_h = 18 * len(series)
    plot_h = 300
    height = top + plot_h + 50 + legend_h + 10
    svg = Svg(width, height, "Handoff latency CDF per library (scenario 2)")
    svg.text(width / 2, 22, "Handoff latency: CDF per library (scenario 2, all repeats pooled)",
             anchor="middle", size=14, weight="bold")
    if not series:
        return _empty(svg, "no handoff data in this run")
    lo = min(s[1][0] for s in series)
    hi = max(s[1][-1] for s in series)
    lo_e = math.floor(math.log10(max(lo, 1e-3)))
    hi_e = math.ceil(math.log10(max(hi, lo * 1.01, 1e-3)))
    if hi_e <= lo_e:
        hi_e = lo_e + 1
    x0, x1, y0, y1 = left, width - right, top + plot_h, top

    def X(ms):
        v = math.log10(max(ms, 10 ** lo_e))
        return x0 + (v - lo_e) / (hi_e - lo_e) * (x1 - x0)

    def Y(p):
        return y0 - p * (y0 - y1)

    for q in (0, 0.25, 0.5, 0.75, 0.9, 1):
        svg.line(x0, Y(q), x1, Y(q), stroke="#dddddd")
        svg.text(x0 - 6, Y(q) + 4, f"{q:g}", anchor="end")
    for e in range(lo_e, hi_e + 1):
        svg.line(X(10 ** e), y0, X(10 ** e), y1, stroke="#dddddd")
        svg.text(X(10 ** e), y0 + 16, f"{10 ** e:g}", anchor="middle")
    svg.line(x0, y0, x1, y0)
    svg.line(x0, y0, x0, y1)
    svg.text((x0 + x1) / 2, y0 + 34, "latency: release call → waiter's acquire returned (ms, log scale)", anchor="middle")
    svg.text(18, (y0 + y1) / 2, "fraction of handoffs ≤ x", anchor="middle", rotate=-90)
    for i, (name, lat) in enumerate(series):
        n = len(lat)
        # At most ~400 steps per line: every sample when few, else evenly spaced ranks (the
        # first and the last always in).
        idx = range(n) if n <= 400 else sorted({round(k * (n - 1) / 399) for k in range(400)})
        pts = []
        prev = 0.0
        for k in idx:
            pts.append((X(lat[k]), Y(prev)))
            prev = (k + 1) / n
            pts.append((X(lat[k]), Y(prev)))
        colour = PALETTE[i % len(PALETTE)]
        svg.path(pts, colour)
        ly = y0 + 50 + 18 * i
        svg.line(x0, ly - 4, x0 + 24, ly - 4, stroke=colour, width=3)
        p50 = lat[min(max(math.ceil(0.5 * n), 1), n) - 1]
        p99 = lat[min(max(math.ceil(0.99 * n), 1), n) - 1]
        svg.text(x0 + 30, ly, f"{name}: p50 {_fmt(p50)} ms, p99 {_fmt(p99)} ms, n = {n}")
    return svg.render()


def _hbars(svg, rows, x0, x1, top, bar_h, vmax, unit, colour_of):
    """Horizontal bars (label, value) from x0 to x1, one row every bar_h + 6 px from top."""
    def X(v):
        return x0 + v / vmax * (x1 - x0)
    n = len(rows)
    bottom = top + n * (bar_h + 6)
    for k in range(5):
        v = vmax * k / 4
        svg.line(X(v), top - 4, X(v), bottom, stroke="#dddddd")
        svg.text(X(v), bottom + 14, _fmt(v) if v else "0", anchor="middle")
    for i, (key, value) in enumerate(rows):
        y = top + i * (bar_h + 6)
        svg.rect(x0, y, X(value) - x0, bar_h, colour_of(key))
        svg.text(min(X(value), x1) + 4, y + bar_h - 4, _fmt(value), size=11)
    svg.line(x0, top - 4, x0, bottom)
    svg.text((x0 + x1) / 2, bottom + 30, unit, anchor="middle")
    return X, bottom


def _colour(lib):
    return "#0072B2" if lib.startswith("crosslock") else "#999999"


def uncontended(R) -> str:
    """Scenario 1: median pairs/s per library, the floor as a vertical line."""
    unc = {(u["lang"], u["lib"]): u for u in R.get("uncontended", [])}
    rows = [((lang, lib), _med([r["pairs_per_s"] for r in u["runs"]]))
            for (lang, lib), u in unc.items() if (lang, lib) != FLOOR and u.get("runs")]
    floor = None
    if FLOOR in unc and unc[FLOOR].get("runs"):
        floor, how = _med([r["pairs_per_s"] for r in unc[FLOOR]["runs"]]), "in the rounds"
    else:
        ev = [f for f in R.get("floor", []) if f["test"].startswith("EVALSHA") and f["clients"] == 1]
        if ev and ev[0].get("runs"):
            floor, how = _med([x["rps"] for x in ev[0]["runs"]]) / 2, "scenario 5"
    width, label_w, top, bar_h = 760, 230, 50, 18
    height = top + max(len(rows), 1) * (bar_h + 6) + 60
    svg = Svg(width, height, "Uncontended acquire + release pairs per second (scenario 1)")
    svg.text(width / 2, 22, "Uncontended: acquire + release pairs/s, median over rounds (scenario 1)",
             anchor="middle", size=14, weight="bold")
    if not rows:
        return _empty(svg, "no uncontended data in this run")
    vmax = _nice_max(max([v for _, v in rows] + ([floor] if floor else [])))
    for i, ((lang, lib), _) in enumerate(rows):
        svg.text(label_w - 8, top + i * (bar_h + 6) + bar_h - 4, _label(lang, lib), anchor="end")
    X, bottom = _hbars(svg, rows, label_w, width - 70, top, bar_h, vmax, "pairs per second",
                       lambda key: _colour(key[1]))
    if floor:
        svg.line(X(floor), top - 10, X(floor), bottom, stroke="#D55E00", width=2, dash="6,3")
        svg.text(X(floor), top - 14, f"Redis floor ({how}): {_fmt(floor)} pairs/s", anchor="middle",
                 fill="#D55E00", size=11)
    return svg.render()


def contended(R) -> str:
    """Scenario 3: median ops/s per library (left) beside the max wait (right)."""
    rows = []
    for c in R.get("contended", []):
        if not c.get("runs"):
            continue
        rows.append(((c["lang"], c["mode"], c["lib"]), _med([r["ops_per_s"] for r in c["runs"]]),
                     max(r["max_wait_ms"] for r in c["runs"])))
    width, label_w, top, bar_h, gap = 860, 250, 60, 18, 40
    height = top + max(len(rows), 1) * (bar_h + 6) + 60
    svg = Svg(width, height, "Contended: ops per second beside max wait (scenario 3)")
    svg.text(width / 2, 22, "Contended, 8 workers on one lock (scenario 3): throughput beside max wait",
             anchor="middle", size=14, weight="bold")
    if not rows:
        return _empty(svg, "no contended data in this run")
    mid = label_w + (width - label_w - gap) / 2
    for i, ((lang, mode, lib), _, _) in enumerate(rows):
        svg.text(label_w - 8, top + i * (bar_h + 6) + bar_h - 4, f"{LANG.get(lang, lang)} {mode}: {lib}", anchor="end")
    svg.text((label_w + mid - 40) / 2, top - 20, "ops/s, median over runs (more is better)", anchor="middle", weight="bold")
    _hbars(svg, [((k[2],), ops) for k, ops, _ in rows], label_w, mid - 40, top, bar_h,
           _nice_max(max(ops for _, ops, _ in rows)), "operations per second", lambda key: _colour(key[0]))
    svg.text((mid + gap + width - 40) / 2, top - 20, "max wait, ms (less is better)",
             anchor="middle", weight="bold")
    _hbars(svg, [((k[2],), w) for k, _, w in rows], mid + gap, width - 40, top, bar_h,
           _nice_max(max(w for _, _, w in rows)), "longest single acquire (ms)", lambda key: _colour(key[0]))
    return svg.render()


FIGURES = {"handoff-cdf.svg": handoff_cdf, "uncontended.svg": uncontended, "contended.svg": contended}


def write_figures(R, out_dir: Path) -> dict[str, Path]:
    """Writes every figure of this run into out_dir; returns {file name: path}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, fn in FIGURES.items():
        p = out_dir / name
        p.write_text(fn(R), encoding="utf-8")
        out[name] = p
    return out


if __name__ == "__main__":
    write_figures(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
