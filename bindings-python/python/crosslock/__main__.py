"""``python -m crosslock`` (also the ``crosslock`` command): look at locks and synchronizers in a
Redis server, whoever took them — Python, Node, Rust or Java's Redisson.

    crosslock inspect NAME [--url URL] [--json]       who holds NAME, for how long, who waits
    crosslock list [PATTERN] [--url URL] [--json]     the objects whose names match (SCAN, never KEYS)
    crosslock force-unlock NAME [--url URL] [--yes]   delete a lock whoever holds it (asks first)

The server is ``--url``, else ``$CROSSLOCK_URL``, else ``redis://127.0.0.1:6379/0``. Exit status:
0 done, 1 nothing there / refused, 2 bad usage or the server unreachable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable, Optional, Sequence, TextIO

from . import connect
from .client import Client
from .errors import CrosslockError, WrongTypeError
from .inspect import Inspection

DEFAULT_URL = "redis://127.0.0.1:6379/0"
# Whether a watchdog holder looks alive is judged against this (Redisson's and our default).
WATCHDOG_S = 30.0


def _secs(s: Optional[float]) -> str:
    if s is None:
        return "no expiry"
    return f"{s:.3f} s" if s < 10 else f"{s:.1f} s"


def _in(epoch: Optional[float]) -> str:
    return "no deadline" if epoch is None else f"in {epoch - time.time():.1f} s"


def describe(seen: Inspection, watchdog: float = WATCHDOG_S) -> str:
    """A few lines a person can read at 3 a.m."""
    name, kind = seen["name"], seen["kind"]
    if kind == "absent":
        return f"{name}: nothing there (free)"
    lines = [f"{name}: {kind.replace('_', ' ')}" + (f", {seen['mode']} mode" if seen["mode"] else "")]
    if seen["holders"]:
        ttl = seen["ttl"]
        alive = ttl is None or ttl >= watchdog * 2 / 3 - 1
        lines.append(
            f"  lease left: {_secs(ttl)}"
            + ("" if alive else f"  (not renewed within the last {watchdog / 3:.0f} s: holder dead, paused,"
               " cut off, or holding with a short lease)")
        )
        for h in seen["holders"]:
            what = "writer" if h["write"] else ("reader" if seen["mode"] else "holder")
            extra = ""
            if h["read_leases"]:
                extra = "; read holds expire in " + ", ".join(_secs(x) for x in h["read_leases"])
            lines.append(f"  {what} {h['holder']} × {h['holds']}{extra}")
    elif kind in ("lock", "fenced_lock", "fair_lock", "read_write_lock"):
        lines.append("  free")
    for i, w in enumerate(seen["queue"]):
        lines.append(f"  waiting #{i + 1}: {w['holder']} (skipped as dead {_in(w['deadline'])} unless it tries again)")
    if seen["token"] is not None:
        lines.append(f"  last fencing token: {seen['token']}")
    if seen["count"] is not None:
        label = "permits available" if kind == "permit_expirable_semaphore" else "count (semaphore permits or latch count)"
        lines.append(f"  {label}: {seen['count']}")
    for p in seen["permits"]:
        lines.append(f"  permit {p['id']} expires {_in(p['expires'])}")
    return "\n".join(lines)


def _one_line(seen: Inspection) -> str:
    kind = seen["kind"]
    if seen["holders"]:
        who = ", ".join(f"{h['holder']}×{h['holds']}" for h in seen["holders"])
        state = f"held by {who}, {_secs(seen['ttl'])} left"
    elif seen["count"] is not None:
        state = f"count {seen['count']}"
    else:
        state = "free"
    if seen["queue"]:
        state += f", {len(seen['queue'])} waiting"
    return f"{seen['name']}\t{kind}\t{state}"


def _force_unlock(client: Client, seen: Inspection) -> bool:
    name, kind = seen["name"], seen["kind"]
    if kind in ("lock", "fenced_lock"):
        return client.lock(name).force_unlock()
    if kind == "fair_lock":
        return client.fair_lock(name).force_unlock()
    if kind == "read_write_lock":
        rw = client.read_write_lock(name)
        return (rw.write_lock() if seen["mode"] == "write" else rw.read_lock()).force_unlock()
    raise WrongTypeError(f"'{name}' is a {kind}, not a lock: force-unlock only deletes locks", lock_name=name)


def main(argv: Optional[Sequence[str]] = None, out: Optional[TextIO] = None, ask: Callable[[str], str] = input) -> int:
    """Runs the command line ``argv`` (default ``sys.argv[1:]``), printing to ``out`` (default
    stdout); returns the exit status."""
    out = out if out is not None else sys.stdout
    parser = argparse.ArgumentParser(prog="crosslock", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CROSSLOCK_URL", DEFAULT_URL),
                        help="the Redis server (default: $CROSSLOCK_URL or %(default)s)")
    parser.add_argument("--watchdog-timeout", type=float, default=WATCHDOG_S, metavar="SECONDS",
                        help="the holders' watchdog timeout, to tell whether one looks alive (default %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="who holds NAME, for how long, who waits")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="print the inspection as JSON")
    p = sub.add_parser("list", help="the objects whose names match PATTERN (SCAN, never KEYS)")
    p.add_argument("pattern", nargs="?", default="*")
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--json", action="store_true", help="one JSON inspection per line")
    p = sub.add_parser("force-unlock", help="delete a lock whoever holds it")
    p.add_argument("name")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="print what was removed as JSON")
    args = parser.parse_args(argv)

    try:
        client = connect(args.url, connect_timeout=3.0)
    except CrosslockError as e:
        print(f"crosslock: {e}", file=sys.stderr)
        return 2
    try:
        if args.command == "inspect":
            seen = client.inspect(args.name)
            print(json.dumps(seen) if args.json else describe(seen, args.watchdog_timeout), file=out)
            return 0 if seen["kind"] != "absent" else 1
        if args.command == "list":
            for name in client.scan(args.pattern, args.limit):
                seen = client.inspect(name)
                print(json.dumps(seen) if args.json else _one_line(seen), file=out)
            return 0
        seen = client.inspect(args.name)
        if not seen["holders"]:
            print(f"{args.name}: nothing to unlock ({seen['kind']})", file=out)
            return 1
        if not args.yes:
            print(describe(seen, args.watchdog_timeout), file=out)
            if ask(f"Delete '{args.name}', held by {len(seen['holders'])} holder(s)? [y/N] ").strip().lower() not in ("y", "yes"):
                print("left as it was", file=out)
                return 1
        removed = _force_unlock(client, seen)
        if args.json:
            print(json.dumps({"removed": removed, "was": seen}), file=out)
        else:
            print(f"{args.name}: {'unlocked; it held ' + ', '.join(h['holder'] for h in seen['holders']) if removed else 'already free'}", file=out)
        return 0 if removed else 1
    except CrosslockError as e:
        print(f"crosslock: {e}", file=sys.stderr)
        return 1 if e.code not in ("UNAVAILABLE", "AUTH") else 2
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
