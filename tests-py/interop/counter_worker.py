"""One Python process of the mixed Java/Python/Node counter test.

    counter_worker.py URL LOCK KEY N [KIND [DATA_URL]]

Connects, prints ``READY``, waits for a line on stdin (the start signal), then N times: acquire the
lock, GET KEY, SET KEY value+1 (deliberately non-atomic), release. Prints ``DONE N``. KIND is the
kind of lock as ``tests-py/cross/py_worker.py`` names them (``lock`` when not given). DATA_URL
(default URL) is the ``redis://`` server KEY lives on, when URL is a sentinel URL. The environment's
``CROSSLOCK_WATCHDOG_MS``, when set, is the client's watchdog lease.
"""

import os
import sys
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cross"))

import crosslock  # noqa: E402
from py_worker import make  # noqa: E402
from support import Raw  # noqa: E402


def main() -> None:
    url, name, key, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    kind = sys.argv[5] if len(sys.argv) > 5 else "lock"
    data_url = sys.argv[6] if len(sys.argv) > 6 else url
    watchdog = os.environ.get("CROSSLOCK_WATCHDOG_MS")
    client = crosslock.connect(url, watchdog_timeout=int(watchdog) / 1000) if watchdog else crosslock.connect(url)
    raw = Raw(urlparse(data_url).port)
    lock = make(client, kind, name)
    print("READY", flush=True)
    if not sys.stdin.readline():
        sys.exit("no start signal")
    for _ in range(n):
        with lock:
            value = int(raw.command("GET", key) or 0)
            raw.command("SET", key, value + 1)
    raw.close()
    client.close()
    print(f"DONE {n}", flush=True)


if __name__ == "__main__":
    main()
