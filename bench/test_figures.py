"""report.py's figures from a synthetic raw JSON: well-formed SVG, deterministic, linked from the
Markdown, and never written over bench/figures by a report that is not RESULTS.md.

    .venv/bin/python -m pytest bench/test_figures.py     (./dev test runs it beside the bench smoke run)
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import figures  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"


def synthetic():
    rnd = random.Random(7)

    def runs(key, base, n=3):
        return [{key: base * (1 + 0.01 * i), "p50_us": 100.0, "p99_us": 300.0} for i in range(n)]

    unc = [{"lang": lang, "lib": lib, "runs": runs("pairs_per_s", rate),
            "warmup": {"rates": [rate, rate], "batch": 200}}
           for lang, lib, rate in [("rust", "crosslock", 9000.0), ("python", "crosslock", 7000.0), ("python", "crosslock+metrics", 6500.0),
                                   ("python", "redis-py", 6000.0), ("node", "crosslock", 7500.0),
                                   ("floor", "redis-benchmark", 10000.0)]]
    hand = [{"lang": lang, "lib": lib, "span_ms": 3,
             "latencies_us": [[rnd.lognormvariate(mu, 0.4) for _ in range(60)] for _ in range(3)]}
            for lang, lib, mu in [("python", "crosslock", 5.3), ("python", "crosslock+metrics", 5.4), ("python", "redis-py", 8.5), ("node", "crosslock", 5.5)]]
    con = [{"lang": "python", "mode": "processes", "lib": lib, "workers": 8, "iters": 100,
            "runs": [{"ops_per_s": ops, "max_wait_ms": wait, "exact": True}] * 2}
           for lib, ops, wait in [("crosslock", 3000.0, 40.0), ("crosslock-fair", 1500.0, 12.0), ("redis-py", 900.0, 800.0)]]
    return {
        "meta": {"date": "2026-12-03", "nproc": 2, "cpu": "test", "ram_gib": 4, "os": "test", "kernel": "6",
                 "crosslock_commit": "0000000", "versions": {"redis-server": "7"}, "loadavg_start": [0.1, 0.1, 0.1],
                 "loadavg_end": [0.1, 0.1, 0.1]},
        "seconds": 60, "smoke": True,
        "floor": [{"test": "EVALSHA HSET+PEXPIRE", "clients": 1, "runs": [{"rps": 20000.0, "p50_latency_ms": 0.05}]}],
        "uncontended": unc, "handoff": hand, "contended": con,
    }


def check_svg(text):
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    assert root.get("viewBox") and root.get("width") and root.get("height")
    texts = [t.text for t in root.iter(SVG + "text")]
    assert texts, "labels"
    return root, texts


def test_every_figure_is_well_formed_and_deterministic():
    R = synthetic()
    for name, fn in figures.FIGURES.items():
        text = fn(R)
        assert fn(json.loads(json.dumps(R))) == text, f"{name}: the same input gives the same bytes"
        check_svg(text)


def test_the_figures_show_every_library_and_the_floor():
    R = synthetic()
    root, texts = check_svg(figures.handoff_cdf(R))
    assert len(list(root.iter(SVG + "path"))) == 4  # one CDF line per library
    assert any(t.startswith("Python redis-py: p50") for t in texts)
    _, texts = check_svg(figures.uncontended(R))
    assert "Node crosslock" in texts and not any(t.endswith("redis-benchmark") for t in texts)
    assert any(t.startswith("Redis floor (in the rounds): 10,100") for t in texts)
    _, texts = check_svg(figures.contended(R))
    assert "Python processes: crosslock-fair" in texts


def test_empty_run_still_gives_svg():
    for fn in figures.FIGURES.values():
        check_svg(fn({"meta": {}}))


def test_report_writes_figures_beside_a_partial_report(tmp_path):
    raw = tmp_path / "run.json"
    raw.write_text(json.dumps(synthetic()))
    out = tmp_path / "RESULTS-smoke.md"
    subprocess.run([sys.executable, str(BENCH / "report.py"), str(raw), str(out)], check=True)
    md = out.read_text()
    assert "### The cost of metrics" in md and "| Python | 7,070 | 6,565 | 0.93× (0.93–0.93) |" in md
    for name in figures.FIGURES:
        assert f"](RESULTS-smoke-figures/{name})" in md
        check_svg((tmp_path / "RESULTS-smoke-figures" / name).read_text())

    only = tmp_path / "only"
    subprocess.run([sys.executable, str(BENCH / "report.py"), "--figures-only", str(raw), str(only)], check=True)
    for name in figures.FIGURES:
        assert (only / name).read_text() == (tmp_path / "RESULTS-smoke-figures" / name).read_text()


def test_only_results_md_writes_into_bench_figures():
    import report

    assert report.figures_dir(BENCH / "RESULTS.md") == BENCH / "figures"
    for other in (BENCH / "results-raw" / "RESULTS-smoke.md", BENCH / "results-raw" / "RESULTS-partial.md"):
        assert report.figures_dir(other) == other.parent / f"{other.stem}-figures"
