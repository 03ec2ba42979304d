"""A crosslock client's lock metrics served to Prometheus: ``connect(url, metrics=provider)`` with an
OpenTelemetry SDK MeterProvider whose reader is the OpenTelemetry Prometheus exporter
(``opentelemetry-exporter-prometheus``), served by ``prometheus_client`` on ``GET /metrics``.

Usage: ``python examples/prometheus_metrics.py [REDIS_URL] [PORT]`` (or the environment's
``REDIS_URL`` and ``METRICS_PORT``; defaults ``redis://127.0.0.1:6379/0`` and 9464, port 0 picks a
free one). It prints the address it serves on, does a few lock operations (an uncontended acquire
and release, a wait that times out, a contended acquire), prints ``done``, and serves until stopped
(Ctrl-C, SIGTERM)."""

import os
import signal
import sys
import threading
import time

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

import crosslock

url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
port = int(sys.argv[2] if len(sys.argv) > 2 else os.environ.get("METRICS_PORT", "9464"))

# The exporter registers with prometheus_client's default registry, which its server serves.
provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
server, _ = start_http_server(port, addr="127.0.0.1")
print(f"serving metrics on http://127.0.0.1:{server.server_port}/metrics", flush=True)

ours = crosslock.connect(url, metrics=provider)
theirs = crosslock.connect(url)
lock = ours.lock("example:orders")

# Uncontended: taken at once, given back.
assert lock.acquire()
lock.release()

# Another client holds it (on a thread of its own: a lock's holder is a thread, as in Redisson)
# and gives it back 300 ms after our wait of 100 ms timed out: that next wait is contended, woken
# by the release's message.
timed_out, taken = threading.Event(), threading.Event()


def holder() -> None:
    theirs_lock = theirs.lock("example:orders")
    assert theirs_lock.acquire()
    taken.set()
    timed_out.wait(10)
    time.sleep(0.3)
    theirs_lock.release()


releaser = threading.Thread(target=holder)
releaser.start()
taken.wait(10)
assert not lock.acquire(timeout=0.1)  # the wait that times out
timed_out.set()
assert lock.acquire(timeout=10)  # the contended acquire
releaser.join()
lock.release()

theirs.close()
ours.close()  # every event is told to the instruments before close returns
print("done: 1 uncontended acquire, 1 wait timed out, 1 contended acquire", flush=True)

# Serves until stopped.
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
try:
    while not stop.wait(3600):
        pass
except KeyboardInterrupt:
    pass
server.shutdown()
provider.shutdown()
