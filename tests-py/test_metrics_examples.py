"""The Prometheus examples (examples/prometheus_metrics.py and .mjs, examples/prometheus-rust) run as real
processes against a real server and are scraped over HTTP: the Prometheus names, types, units and
labels the OpenTelemetry Prometheus exporters give crosslock's instruments, and counts that match
the operations done. The Grafana dashboard (examples/grafana/crosslock.json) names only
instruments that exist, and every instrument has a panel."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DASHBOARD = EXAMPLES / "grafana" / "crosslock.json"


def instruments() -> Tuple[Tuple[str, str, str, str, Tuple[float, ...]], ...]:
    """Every instrument crosslock records: (name, kind, unit, description, bounds), from core's
    table as the native module has it (``_native.TELEMETRY_INSTRUMENTS``)."""
    from crosslock import _native

    return tuple(tuple(row[:5]) for row in _native.TELEMETRY_INSTRUMENTS)


def prometheus_names(name: str, kind: str, unit: str) -> Tuple[str, str, Tuple[str, ...]]:
    """An instrument's Prometheus family name, type and sample names, by the OpenTelemetry
    Prometheus exporter's rule: dots become underscores, the unit ``s`` adds ``_seconds``, a
    curly-brace unit (an annotation) adds nothing, a counter's name ends in ``_total`` (its
    ``# TYPE`` line says so too), a histogram's samples end in ``_bucket``, ``_sum`` and
    ``_count``; an up-down counter is a gauge."""
    base = name.replace(".", "_")
    if unit == "s":
        base += "_seconds"
    elif unit and not (unit.startswith("{") and unit.endswith("}")):
        raise AssertionError(f"{name}: no rule here for the unit {unit!r}")
    if kind == "histogram":
        return base, "histogram", (base + "_bucket", base + "_sum", base + "_count")
    if kind == "counter":
        return base + "_total", "counter", (base + "_total",)
    if kind == "up_down_counter":
        return base, "gauge", (base,)
    raise AssertionError(f"{name}: unknown kind {kind!r}")


class Sample(NamedTuple):
    name: str
    labels: Dict[str, str]
    value: float


class Scrape(NamedTuple):
    types: Dict[str, str]  # family name (as `# TYPE` says) -> type
    samples: List[Sample]

    def value(self, name: str, **labels: str) -> float:
        """The one sample named `name` whose labels include `labels`."""
        found = [s for s in self.samples if s.name == name and labels.items() <= s.labels.items()]
        assert len(found) == 1, (name, labels, found)
        return found[0].value

    def crosslock_families(self) -> Dict[str, str]:
        return {k: v for k, v in self.types.items() if k.startswith("crosslock_")}


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> Scrape:
    """The Prometheus text exposition format: `# TYPE` lines and samples."""
    types: Dict[str, str] = {}
    samples: List[Sample] = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line and not line.startswith("#"):
            m = LINE.match(line)
            assert m, line
            samples.append(Sample(m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return Scrape(types, samples)


class Example:
    """An example running as its own process; its stdout read line by line."""

    def __init__(self, argv: List[str]) -> None:
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        self.lines: List[str] = []

    def line(self, starting: str) -> str:
        """Reads stdout up to the line that starts with `starting` (the example prints as it goes)."""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if line.startswith(starting):
                return line.strip()
        self.process.wait(10)
        raise AssertionError(f"the example ended ({self.process.returncode}) before {starting!r}: "
                             f"{''.join(self.lines)}{self.process.stderr.read() if self.process.stderr else ''}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(10)


def run_and_scrape(argv: List[str]) -> Tuple[str, Scrape]:
    """Runs the example, waits for it to say its operations are done, and scrapes /metrics; then
    stops it (SIGTERM) and checks it stopped."""
    example = Example(argv)
    try:
        serving = example.line("serving metrics on ")
        address = serving.rsplit(" ", 1)[1]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", address), serving
        example.line("done")
        with urllib.request.urlopen(address, timeout=10) as reply:
            assert reply.status == 200
            assert reply.headers["Content-Type"].startswith("text/plain")
            return address, parse(reply.read().decode())
    finally:
        example.stop()


def check_operations(scrape: Scrape) -> None:
    """The example's operations, as counted: two acquires (one uncontended, one contended) and a
    wait that timed out, two holds released, nothing waiting or held at the end, no loss."""
    families = scrape.crosslock_families()
    wait, hold = "crosslock_lock_wait_duration_seconds", "crosslock_lock_hold_duration_seconds"
    assert families[wait] == "histogram"
    assert families[hold] == "histogram"
    assert families["crosslock_lock_waiters"] == "gauge"
    assert families["crosslock_lock_held"] == "gauge"
    lock = {"crosslock_object_type": "lock"}
    assert scrape.value(wait + "_count", **lock, crosslock_outcome="acquired") == 2
    assert scrape.value(wait + "_count", **lock, crosslock_outcome="timeout") == 1
    assert scrape.value(wait + "_bucket", **lock, crosslock_outcome="timeout", le="+Inf") == 1
    assert scrape.value(wait + "_sum", **lock, crosslock_outcome="timeout") > 0
    assert scrape.value(hold + "_count", **lock, crosslock_hold_end="released") == 2
    assert scrape.value("crosslock_lock_waiters", **lock) == 0
    assert scrape.value("crosslock_lock_held", **lock) == 0
    assert "crosslock_lock_lost_total" not in families
    # Wake-ups, if any woke the contended wait, are counted by cause.
    if "crosslock_wait_wakeups_total" in families:
        assert families["crosslock_wait_wakeups_total"] == "counter"
        causes = {s.labels["crosslock_wake_cause"] for s in scrape.samples if s.name == "crosslock_wait_wakeups_total"}
        assert causes and causes <= {"message", "timer", "backoff", "reconnect"}, causes
    # Its subscription (the contended wait's) was counted, and left again.
    assert scrape.value("crosslock_pubsub_subscriptions") == 0
    # Every sample of a lock-scoped instrument carries the object type.
    from crosslock import _native

    scoped = set()
    for name, kind, unit, _description, _bounds, keys in _native.TELEMETRY_INSTRUMENTS:
        if "crosslock.object.type" in keys:
            scoped.update(prometheus_names(name, kind, unit)[2])
    for s in scrape.samples:
        if s.name in scoped:
            assert s.labels.get("crosslock_object_type") == "lock", s


def check_naming_rule(scrape: Scrape) -> None:
    """The rule of :func:`prometheus_names` is what the exporter did, for every instrument the
    scrape shows; and the scrape shows nothing of crosslock's that is no instrument."""
    families = scrape.crosslock_families()
    known = {}
    for name, kind, unit, _description, _bounds in instruments():
        family, kind_seen, samples = prometheus_names(name, kind, unit)
        known[family] = (kind_seen, samples)
    assert set(families) <= set(known), set(families) - set(known)
    for family, kind in families.items():
        expected_kind, sample_names = known[family]
        assert kind == expected_kind, family
        seen = {s.name for s in scrape.samples if s.name == family or s.name.startswith(family + "_")}
        assert seen == set(sample_names), (family, seen)


@pytest.fixture(scope="module")
def python_scrape() -> Iterator[Scrape]:
    from support import RedisServer

    server = RedisServer()
    try:
        _, scrape = run_and_scrape([sys.executable, str(EXAMPLES / "prometheus_metrics.py"),
                                    f"redis://127.0.0.1:{server.port}/0", "0"])
        yield scrape
    finally:
        server.stop()


def test_python_example_serves_the_operations_it_did(python_scrape):
    check_operations(python_scrape)


def test_python_exporter_names_instruments_by_the_rule(python_scrape):
    check_naming_rule(python_scrape)


@pytest.fixture(scope="module")
def node_scrape() -> Iterator[Scrape]:
    from support import RedisServer

    node = shutil.which("node")
    assert node is not None, "node is not on PATH: ./dev test installs it with the npm dependencies"
    server = RedisServer()
    try:
        _, scrape = run_and_scrape([node, str(EXAMPLES / "prometheus_metrics.mjs"),
                                    f"redis://127.0.0.1:{server.port}/0", "0"])
        yield scrape
    finally:
        server.stop()


def test_node_example_serves_the_operations_it_did(node_scrape):
    check_operations(node_scrape)


def test_node_exporter_names_instruments_by_the_rule(node_scrape):
    # The JavaScript exporter adds no unit to names: the example's views add `seconds`, so that
    # its names are the other two's (and the dashboard's).
    check_naming_rule(node_scrape)


def rust_example() -> str:
    """The Rust example's executable, built by cargo (in a moment when `./dev test` built it)."""
    cargo = shutil.which("cargo")
    assert cargo is not None, (
        "cargo is not on PATH: the Rust example is built with it (./dev test installs the toolchain)"
    )
    out = subprocess.run(
        [cargo, "build", "--quiet", "-p", "crosslock-example-prometheus", "--message-format=json"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert out.returncode == 0, out.stderr
    for line in out.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("executable") \
                and message["target"]["name"] == "crosslock-example-prometheus":
            return message["executable"]
    raise AssertionError(f"cargo named no executable: {out.stdout[-2000:]}")


@pytest.fixture(scope="module")
def rust_scrape() -> Iterator[Scrape]:
    from support import RedisServer

    executable = rust_example()
    server = RedisServer()
    try:
        _, scrape = run_and_scrape([executable, f"redis://127.0.0.1:{server.port}/0", "0"])
        yield scrape
    finally:
        server.stop()


@pytest.mark.timeout(600)
def test_rust_example_serves_the_operations_it_did(rust_scrape):
    check_operations(rust_scrape)


def test_rust_exporter_names_instruments_by_the_rule(rust_scrape):
    check_naming_rule(rust_scrape)


def dashboard_queries() -> List[Tuple[str, str]]:
    """Every panel's (title, query)."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels for t in p["targets"]]


def metric_names(query: str) -> set:
    """The crosslock metric names a PromQL query reads: its `crosslock_` identifiers once label
    matchers (`{...}`) and grouping clauses (`by (...)`, `without (...)`, ...) are taken out."""
    query = re.sub(r"\{[^}]*\}", "", query)
    query = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", query)
    return set(re.findall(r"\bcrosslock_[a-z0-9_]+\b", query))


def test_every_dashboard_query_names_an_instrument_and_every_instrument_has_a_panel():
    by_sample: Dict[str, str] = {}
    for name, kind, unit, _description, _bounds in instruments():
        _family, _kind, samples = prometheus_names(name, kind, unit)
        for sample in samples:
            by_sample[sample] = name
    shown = set()
    for title, query in dashboard_queries():
        names = metric_names(query)
        assert names, (title, query)
        unknown = names - set(by_sample)
        assert not unknown, f"{title!r} reads {sorted(unknown)}, which no instrument exports"
        shown |= {by_sample[n] for n in names}
    assert shown == {i[0] for i in instruments()}, {i[0] for i in instruments()} - shown


def test_dashboard_histogram_quantiles_read_buckets_and_group_by_le():
    for title, query in dashboard_queries():
        if "histogram_quantile" in query:
            assert re.search(r"sum by \(le\b[^)]*\) \(rate\(crosslock_\w+_seconds_bucket\[", query), (title, query)
