"""``python -m crosslock`` (also the ``crosslock`` command): look at locks and synchronizers in a
Redis server, whoever took them — Python, Node, Rust or Java's Redisson.

    crosslock inspect NAME [--url URL] [--json]       who holds NAME (and which process), for how
                                                      long, who waits
    crosslock list [PATTERN] [--url URL] [--json]     the crosslock/Redisson objects whose names match
                  [--all]                             (SCAN, never KEYS); --all: every key
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

from . import _native, connect
from .client import Client
from .client import _check_name
from .inspect import Inspection
from .errors import CrosslockError

DESCRIPTION = """Look at locks and synchronizers in a Redis server, whoever took them: Python,
Node, Rust or Java's Redisson. Options go before or after the command and its NAME."""
EPILOG = """examples:
  crosslock inspect orders:42 --url redis://127.0.0.1:6379/0
  crosslock list 'orders:*' --json
  crosslock watch orders:42
  crosslock force-unlock orders:42 --yes

The server is --url, else $CROSSLOCK_URL, else redis://127.0.0.1:6379/0.
Exit status: 0 done, 1 nothing there / refused, 2 bad usage or the server unreachable."""
DEFAULT_URL = "redis://127.0.0.1:6379/0"
# Whether a watchdog holder looks alive is judged against this (core's default, and Redisson's).
WATCHDOG_S = _native.CONNECT_DEFAULTS["watchdog_timeout"]


def main(argv: Optional[Sequence[str]] = None, out: Optional[TextIO] = None, ask: Callable[[str], str] = input) -> int:
    """Runs the command line ``argv`` (default ``sys.argv[1:]``), printing to ``out`` (default
    stdout); returns the exit status."""
    out = out if out is not None else sys.stdout
    # One grammar with the Node CLI: the common options go before or after the command and its
    # positionals (a subcommand's copy is SUPPRESSed, so it only counts when given there).
    def common(p: argparse.ArgumentParser, top: bool) -> None:
        dflt = (lambda v: v) if top else (lambda v: argparse.SUPPRESS)
        p.add_argument("--url", default=dflt(os.environ.get("CROSSLOCK_URL", DEFAULT_URL)),
                       help="the Redis server (default: $CROSSLOCK_URL or redis://127.0.0.1:6379/0)")
        p.add_argument("--watchdog-timeout", type=float, default=dflt(WATCHDOG_S), metavar="SECONDS",
                       help=f"the holders' watchdog timeout, to tell whether one looks alive (default {WATCHDOG_S:g})")
        p.add_argument("--json", action="store_true", default=dflt(False), help="print JSON")

    parser = argparse.ArgumentParser(prog="crosslock", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common(parser, True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("inspect", help="who holds NAME (and which process), for how long, who waits")
    p.add_argument("name")
    common(p, False)
    p = sub.add_parser("list", help="the crosslock/Redisson objects whose names match PATTERN (SCAN, never KEYS)")
    p.add_argument("pattern", nargs="?", default="*")
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--all", action="store_true",
                   help="also list keys that are not recognisably crosslock's or Redisson's (any string or other value)")
    common(p, False)
    p = sub.add_parser("watch", help="follow NAME live until Ctrl-C")
    p.add_argument("name")
    p.add_argument("--interval", type=float, default=0.1, metavar="SECONDS",
                   help="longest time between two snapshots (default %(default)s; releases are seen at once)")
    common(p, False)
    p = sub.add_parser("force-unlock", help="delete a lock whoever holds it")
    p.add_argument("name")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    common(p, False)
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
                if args.all or _recognised(seen):
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


# What a list shows by default: what only crosslock or Redisson leave (a counter is any string
# holding a number: an idle semaphore or latch cannot be told from an application's key).
_OURS = {"lock", "fenced_lock", "fair_lock", "read_write_lock", "permit_expirable_semaphore", "semaphore", "count_down_latch"}


def _recognised(seen: Inspection) -> bool:
    return seen["kind"] in _OURS


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
