"""``python -m crosslock`` (also the ``crosslock`` command): look at locks and synchronizers in a
Redis server, whoever took them — Python, Node, Rust or Java's Redisson.

    crosslock inspect NAME [--url URL] [--json]       who holds NAME, for how long, who waits
    crosslock list [PATTERN] [--url URL] [--json]     the objects whose names match (SCAN, never KEYS)
    crosslock watch NAME [--url URL] [--json]         follow NAME live until Ctrl-C: acquire, release,
                                                      expiry, force-unlock, queue and count changes
    crosslock force-unlock NAME [--url URL] [--yes]   delete a lock whoever holds it (asks first)

The server is ``--url``, else ``$CROSSLOCK_URL``, else ``redis://127.0.0.1:6379/0``. Exit status:
0 done, 1 nothing there / refused, 2 bad usage or the server unreachable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Optional, Sequence, TextIO

from . import connect
from .client import Client
from .client import _check_name
from .errors import CrosslockError

DEFAULT_URL = "redis://127.0.0.1:6379/0"
# Whether a watchdog holder looks alive is judged against this (Redisson's and our default).
WATCHDOG_S = 30.0


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
    p = sub.add_parser("watch", help="follow NAME live until Ctrl-C")
    p.add_argument("name")
    p.add_argument("--interval", type=float, default=0.1, metavar="SECONDS",
                   help="longest time between two snapshots (default %(default)s; releases are seen at once)")
    p.add_argument("--json", action="store_true", help="one JSON event per line")
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
    native = client._native
    try:
        if args.command == "inspect":
            seen, text, _ = native.describe(_check_name(args.name, "object"), args.watchdog_timeout)
            print(json.dumps(seen) if args.json else text, file=out)
            return 0 if seen["kind"] != "absent" else 1
        if args.command == "list":
            for name in client.scan(args.pattern, args.limit):
                seen, _, line = native.describe(name, args.watchdog_timeout)
                print(json.dumps(seen) if args.json else line, file=out)
            return 0
        if args.command == "watch":
            return _watch(client, args, out)
        seen, text, _ = native.describe(_check_name(args.name, "object"), args.watchdog_timeout)
        if not seen["holders"]:
            print(f"{args.name}: nothing to unlock ({seen['kind']})", file=out)
            return 1
        if not args.yes:
            print(text, file=out)
            if ask(f"Delete '{args.name}', held by {len(seen['holders'])} holder(s)? [y/N] ").strip().lower() not in ("y", "yes"):
                print("left as it was", file=out)
                return 1
        removed = native.force_unlock_any(args.name)
        if args.json:
            print(json.dumps({"removed": removed, "was": seen}), file=out)
        else:
            held_by = ", ".join(h["holder"] for h in seen["holders"])
            print(f"{args.name}: {'unlocked; it held ' + held_by if removed else 'already free'}", file=out)
        return 0 if removed else 1
    except CrosslockError as e:
        print(f"crosslock: {e}", file=sys.stderr)
        return 1 if e.code not in ("UNAVAILABLE", "AUTH") else 2
    finally:
        client.close()


def _watch(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    """Prints the object's state, then one line (or JSON object) per change, until Ctrl-C."""
    try:
        with client.watch(args.name, args.interval) as watch:
            _, text, _ = client._native.describe(args.name, args.watchdog_timeout)
            if args.json:
                print(json.dumps({"event": "start", "name": args.name, "state": watch.initial}), file=out, flush=True)
            else:
                print(text, file=out)
                print("watching (Ctrl-C to stop)", file=out, flush=True)
            for event in watch:
                print(json.dumps(event) if args.json else event["text"], file=out, flush=True)
    except KeyboardInterrupt:
        return 0
    return 0  # pragma: no cover - the iteration never ends by itself


if __name__ == "__main__":
    sys.exit(main())
