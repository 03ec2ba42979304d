"""One Python process holding locks for the cross-language tests, driven line by line on stdin.

    hold_worker.py URL [FAIR_WAIT_MS]

Prints ``READY`` once connected; then, one reply line per command:

- ``acquire KIND NAME``: waits for that lock (no wait limit), then ``ACQUIRED TOKEN`` (the fencing
  token for a fenced lock, ``-`` otherwise). KIND is one of lock, fair, spin, fenced, nonReentrant,
  read, write.
- ``release``: releases the last lock acquired, then ``RELEASED``.
- ``quit``: exits.
"""

import sys

import crosslock


def make(client: crosslock.Client, kind: str, name: str):
    return {
        "lock": client.lock,
        "fair": client.fair_lock,
        "spin": client.spin_lock,
        "fenced": client.fenced_lock,
        "nonReentrant": client.non_reentrant_lock,
        "read": lambda n: client.read_write_lock(n).read_lock(),
        "write": lambda n: client.read_write_lock(n).write_lock(),
    }[kind](name)


def main() -> None:
    url = sys.argv[1]
    options = {"fair_lock_wait_timeout": int(sys.argv[2]) / 1000} if len(sys.argv) > 2 else {}
    client = crosslock.connect(url, **options)
    held = []
    print("READY", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "acquire":
            lock = make(client, words[1], words[2])
            if words[1] == "fenced":
                token = lock.acquire_token()
            else:
                assert lock.acquire()
                token = "-"
            held.append(lock)
            print(f"ACQUIRED {token}", flush=True)
        elif words[0] == "release":
            held.pop().release()
            print("RELEASED", flush=True)
        elif words[0] == "quit":
            break
        else:
            sys.exit(f"unknown command {line!r}")
    client.close()


if __name__ == "__main__":
    main()
