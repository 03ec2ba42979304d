"""Test helpers: a throwaway redis-server, a tiny raw RESP client, and bounded polling.

No Redis client library is needed: :class:`Raw` speaks RESP2 over a socket, which is all the tests
need to look at the raw layout (HGETALL, PTTL, PUBSUB NUMSUB) and to subscribe like a plain client.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Optional, Protocol


def _server_tool(name: str) -> str:
    """``$CROSSLOCK_REDIS_BIN/<name>`` when that names a directory of a server build (to run the
    suites against another Redis or Valkey, as ``./dev matrix`` does), else the one on ``PATH``."""
    directory = os.environ.get("CROSSLOCK_REDIS_BIN")
    if directory:
        return os.path.join(directory, name)
    return shutil.which(name) or f"/usr/bin/{name}"


#: The ``redis-server`` every fixture starts (servers, and sentinels with ``--sentinel``).
REDIS_SERVER = _server_tool("redis-server")
#: The ``redis-cli`` the fixtures run (``--cluster create``, TLS pings): beside ``REDIS_SERVER``.
REDIS_CLI = _server_tool("redis-cli")


def server_takes(option: str, value: str) -> bool:
    """Whether :data:`REDIS_SERVER` knows the config ``option`` (``enable-debug-command`` is Redis
    7's; 6.2 refuses it and runs DEBUG without it). Asked of the binary, not by its version: it is
    given the option, then a made-up one, and says which line of its configuration it refused
    first (it exits at once, whichever it is)."""
    if option not in _takes:
        said = subprocess.run([REDIS_SERVER, f"--{option}", value, "--crosslock-probe-end", "yes"],
                              capture_output=True, text=True, timeout=30)
        _takes[option] = "crosslock-probe-end" in said.stdout + said.stderr
    return _takes[option]


_takes: dict[str, bool] = {}


def debug_command_args() -> list[str]:
    """The arguments that let a test send DEBUG to the server (none where DEBUG needs none)."""
    return ["--enable-debug-command", "yes"] if server_takes("enable-debug-command", "yes") else []


_reap_lock = threading.Lock()
_reap_list: Optional[str] = None
_reap_owner = 0


def reap_at_exit(pid: int, directory: str) -> None:
    """Has the redis-server ``pid`` killed and ``directory`` removed once this process is gone,
    however it ends. A test's finalizer stops its server, but pytest stopped by SIGTERM or SIGKILL
    (a CI runner's timeout, ``kill``) runs none, and every server it started would live on. One
    watcher process per test process, in a session of its own (a signal to the test's process
    group does not reach it), waits for the test process to end, then kills every server it was
    told about that is still a redis-server (a pid since reused is left alone) and removes its
    directory."""
    global _reap_list, _reap_owner
    with _reap_lock:
        if _reap_list is None or _reap_owner != os.getpid():
            me = os.getpid()
            fd, _reap_list = tempfile.mkstemp(prefix=f"crosslock-test-servers-{me}-")
            os.close(fd)
            _reap_owner = me
            script = (
                f"while kill -0 {me} 2>/dev/null; do sleep 0.5; done; "
                "while read -r p d; do "
                "grep -q redis /proc/$p/cmdline 2>/dev/null && kill -9 $p; "
                'case "$d" in */crosslock-*) rm -rf "$d";; esac; '
                f"done < '{_reap_list}'; rm -f '{_reap_list}'"
            )
            subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        # One write per line, appended whole: servers started at once never share a line.
        fd = os.open(_reap_list, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, f"{pid} {directory}\n".encode())
        finally:
            os.close(fd)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_cluster_port() -> int:
    """A free port whose cluster bus port, the port + 10000, is free too: that default is the only
    bus port Redis 6.2 has (no ``cluster-port`` option), so one cluster fixture runs on every
    server."""
    while True:
        port = free_port()
        if port > 55535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01, what: str = "") -> Any:
    """Polls ``predicate`` until it returns something truthy (returned), or fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def replica_caught_up(master: int, replica: int, timeout: float = 5.0) -> None:
    """Waits until the replica at port ``replica`` has applied the replication stream of the
    master at ``master`` up to the master's offset now: every write it made, whoever made it.

    Not ``WAIT 1`` from a fresh connection: WAIT counts the replicas that acknowledged the writes
    of its own connection, so on one that wrote nothing it answers 1 at once, however far behind
    the replica is."""

    def offset(port: int, field: str) -> Optional[int]:
        with Raw(port) as r:
            info = r.command("INFO", "replication")
        for line in info.splitlines():
            name, _, value = line.partition(":")
            if name == field:
                return int(value)
        return None

    target = offset(master, "master_repl_offset")
    assert target is not None, f"no replication offset on the master at {master}"

    def caught_up() -> bool:
        applied = offset(replica, "slave_repl_offset")
        return applied is not None and applied >= target

    wait_until(
        caught_up,
        timeout=timeout,
        what=f"the replica at {replica} to apply the master's {target} bytes",
    )


# A replica's full sync starts at once, and a master pings its replicas every second (Redis waits
# 5 s before a diskless sync and pings every 10 s; CLUSTER SLOTS lists a replica only once a ping
# has given it an offset): a cluster or a Sentinel group is ready in ~2 s instead of ~10.
FAST_REPLICATION = ("--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1")


def replicas_acknowledged(info: str, count: int) -> bool:
    """Whether a master's ``INFO replication`` lists ``count`` replicas online that acknowledged an
    offset: after a full sync a master sends a replica nothing (nor counts it in ``WAIT``) until
    the replica's first acknowledgement, which comes within a second."""
    acknowledged = 0
    for line in info.splitlines():
        if line.startswith("slave") and "state=online" in line:
            fields = dict(f.split("=", 1) for f in line.split(":", 1)[1].split(",") if "=" in f)
            acknowledged += int(fields.get("offset", "0")) > 0
    return acknowledged >= count


class RedisServer:
    """A redis-server on a free 127.0.0.1 port, without persistence, stopped by :meth:`stop`."""

    def __init__(self, *extra: str, cluster_node: bool = False) -> None:
        """``cluster_node``: ``--cluster-enabled yes`` on a port whose cluster bus port (+ 10000) is
        free too (see :func:`free_cluster_port`)."""
        self.dir = tempfile.mkdtemp(prefix="crosslock-redis-")
        if cluster_node:
            extra = ("--cluster-enabled", "yes", *extra)
        last_error = ""
        for _ in range(5):  # a free port can be taken between the probe and the bind: retry
            self.port = free_cluster_port() if cluster_node else free_port()
            self.process = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--daemonize", "no", "--loglevel", "warning",
                 *FAST_REPLICATION, *extra],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    with Raw(self.port, timeout=0.5) as r:
                        if r.command("PING") == "PONG":
                            reap_at_exit(self.process.pid, self.dir)
                            return
                except OSError:
                    time.sleep(0.02)
            last_error = self.process.stdout.read().decode(errors="replace") if self.process.poll() is not None else "no PONG"
            self.process.kill()
            self.process.wait()
        raise RuntimeError(f"redis-server did not start: {last_error}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def raw(self) -> Raw:
        return Raw(self.port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        if self.process.stdout:
            self.process.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class RespError(Exception):
    pass


class Raw:
    """A plain RESP2 connection: ``command("HGETALL", key)`` returns str / int / list / None."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def send(self, *args: Any) -> None:
        parts = [f"*{len(args)}\r\n".encode()]
        for arg in args:
            data = arg if isinstance(arg, bytes) else str(arg).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self.sock.sendall(b"".join(parts))

    def read(self) -> Any:
        line = self.file.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode(errors="surrogateescape")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RespError(f"unexpected reply {line!r}")

    def command(self, *args: Any) -> Any:
        self.send(*args)
        return self.read()

    # -- conveniences ------------------------------------------------------------------------

    def hgetall(self, key: str) -> dict[str, str]:
        flat = self.command("HGETALL", key)
        return dict(zip(flat[::2], flat[1::2]))

    def clients(self) -> dict[str, str]:
        """The server's normal (not pub/sub) connections but this one: id → last command."""
        own = str(self.command("CLIENT", "ID"))
        listed = (dict(f.split("=", 1) for f in line.split() if "=" in f)
                  for line in self.command("CLIENT", "LIST", "TYPE", "normal").splitlines())
        return {c["id"]: c["cmd"] for c in listed if c["id"] != own}

    def numsub(self, channel: str) -> int:
        return int(self.command("PUBSUB", "NUMSUB", channel)[1])

    def subscribe(self, channel: str) -> None:
        reply = self.command("SUBSCRIBE", channel)
        assert reply[0] == "subscribe", reply

    def next_message(self, timeout: float = 5.0) -> Optional[list[Any]]:
        """The next pub/sub push (``["message", channel, payload]``), or ``None`` on timeout."""
        self.sock.settimeout(timeout)
        try:
            return self.read()
        except (socket.timeout, TimeoutError):
            return None


def hold_in_thread(lock: Any, **acquire: Any) -> tuple[threading.Event, threading.Event, threading.Thread]:
    """Acquires ``lock`` in another thread (another holder); set ``release`` to let it go."""
    held, release = threading.Event(), threading.Event()

    def run():
        assert lock.acquire(**acquire)
        held.set()
        release.wait(30)
        lock.release()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert held.wait(10)
    return held, release, t


def channel(name: str) -> str:
    """Redisson's release channel of lock ``name``."""
    return f"redisson_lock__channel:{{{name}}}" if "{" not in name else f"redisson_lock__channel:{name}"


def python_env() -> dict[str, str]:
    """The environment for a child Python process that imports crosslock as the tests do."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


async def poll(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """:func:`wait_until` for asyncio tests: polls ``predicate`` without blocking the event loop
    until it returns something truthy (returned), or fails after ``timeout``."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.005)


class SentinelGroup:
    """A Sentinel deployment on loopback ports: a master, one replica and three sentinels (quorum 2,
    a master is down after 1 s of silence). :meth:`stop` kills them all."""

    name = "crosslock"

    def __init__(self) -> None:
        master = RedisServer()
        self.nodes = [master, RedisServer("--replicaof", "127.0.0.1", str(master.port))]
        self.dir = tempfile.mkdtemp(prefix="crosslock-sentinel-")
        self.sentinels: list[tuple[int, subprocess.Popen[bytes]]] = []
        try:
            for _ in range(3):
                self.sentinels.append(self._start_sentinel(master.port))
            try:
                wait_until(self._ready, timeout=30, interval=0.1, what="the sentinel group to come up")
            except AssertionError as e:
                raise AssertionError(f"{e}: {self._state()}") from None
        except BaseException:
            self.stop()
            raise

    def _start_sentinel(self, master_port: int) -> tuple[int, subprocess.Popen[bytes]]:
        """A sentinel of the group on a free port, answering for the group (retried on another port
        when the probed one was taken before the sentinel could bind it, as :class:`RedisServer`
        does)."""
        last_error = ""
        for _ in range(5):
            port = free_port()
            conf = os.path.join(self.dir, f"sentinel-{port}.conf")
            with open(conf, "w") as f:
                f.write(
                    f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {self.dir}\n"
                    f"logfile {self._log(port)}\n"
                    f"sentinel monitor {self.name} 127.0.0.1 {master_port} 2\n"
                    f"sentinel down-after-milliseconds {self.name} 1000\n"
                    f"sentinel failover-timeout {self.name} 4000\n"
                )
            process = subprocess.Popen([REDIS_SERVER, conf, "--sentinel", "--loglevel", "warning"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    with Raw(port, timeout=0.5) as r:
                        r.command("SENTINEL", "MASTER", self.name)  # a sentinel of ours, no stranger
                        reap_at_exit(process.pid, self.dir)
                        return port, process
                except (OSError, RespError):
                    time.sleep(0.02)
            last_error = self._log_tail(port) if process.poll() is not None else "no answer"
            process.kill()
            process.wait()
        raise RuntimeError(f"a sentinel did not start: {last_error}")

    def _log(self, port: int) -> str:
        return os.path.join(self.dir, f"sentinel-{port}.log")

    def _log_tail(self, port: int) -> str:
        try:
            with open(self._log(port), errors="replace") as f:
                return "".join(f.readlines()[-5:]).strip()
        except OSError:
            return "(no log)"

    def _state(self) -> str:
        """What each sentinel sees (for a group that did not come up)."""
        seen = []
        for port, process in self.sentinels:
            fields = self.sentinel_master(port)
            seen.append(f"sentinel {port} ({'running' if process.poll() is None else 'exited'}): "
                        f"flags={fields.get('flags')} replicas={fields.get('num-slaves')} "
                        f"other sentinels={fields.get('num-other-sentinels')}; log: {self._log_tail(port)!r}")
        return "; ".join(seen)

    def _ready(self) -> bool:
        for port, _ in self.sentinels:
            fields = self.sentinel_master(port)
            if not fields or fields.get("num-slaves") != "1" or fields.get("num-other-sentinels") != "2" \
                    or fields.get("flags") != "master":
                return False
        with self.nodes[1].raw() as r:
            if "master_link_status:up" not in r.command("INFO", "replication"):
                return False
        with self.nodes[0].raw() as r:
            return replicas_acknowledged(r.command("INFO", "replication"), 1)

    def sentinel_master(self, port: int) -> dict[str, str]:
        try:
            with Raw(port, timeout=1) as r:
                reply = r.command("SENTINEL", "MASTER", self.name)
        except (OSError, RespError):
            return {}
        return dict(zip(reply[::2], reply[1::2]))

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port, _ in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.name}/0"

    @property
    def sentinel_ports(self) -> list[int]:
        return [port for port, _ in self.sentinels]

    def master_port(self) -> int:
        return int(self.sentinel_master(self.sentinels[0][0])["port"])

    def node(self, port: int) -> RedisServer:
        return next(n for n in self.nodes if n.port == port)

    def master(self) -> RedisServer:
        return self.node(self.master_port())

    def replica(self) -> RedisServer:
        port = self.master_port()
        return next(n for n in self.nodes if n.port != port)

    def sync(self, _key: str = "") -> None:
        """Waits until the replica has applied every write the master made so far."""
        replica_caught_up(self.master().port, self.replica().port)

    def writable_successor(self, _key: str = "") -> Raw:
        """A connection to the replica (the next master), made writable."""
        r = Raw(self.replica().port)
        r.command("CONFIG", "SET", "replica-read-only", "no")
        return r

    def failover(self, _key: str = "") -> tuple[int, int]:
        """``SENTINEL FAILOVER``; returns (old, new) master ports once every sentinel names the new
        one and it takes writes."""
        before = self.master_port()
        with Raw(self.sentinels[0][0]) as r:
            r.command("SENTINEL", "FAILOVER", self.name)
        return before, self.wait_for_new_master(before)

    def wait_for_new_master(self, before: int) -> int:
        return self._wait_for(lambda port: port != before)

    def wait_for_master(self, _key: str, port: int) -> None:
        """Waits until every sentinel names the node at ``port`` the master and it takes writes."""
        self._wait_for(lambda now: now == port)

    def _wait_for(self, wanted: Callable[[int], bool]) -> int:
        def moved() -> Optional[int]:
            ports = {self.sentinel_master(p).get("port") for p, _ in self.sentinels}
            if len(ports) != 1 or None in ports or not wanted(int(next(iter(ports)))):
                return None
            port = int(ports.pop())
            try:
                with Raw(port, timeout=1) as r:
                    return port if r.command("ROLE")[0] == "master" else None
            except (OSError, RespError):
                return None

        return wait_until(moved, timeout=30, interval=0.05, what="the failover")

    def wait_for_demotion(self, port: int) -> None:
        """Waits until the node at ``port`` (a former master) serves as a replica: from then on no
        client can write to it."""

        def demoted() -> bool:
            try:
                with Raw(port, timeout=1) as r:
                    return r.command("ROLE")[0] == "slave"
            except (OSError, RespError):
                return False

        wait_until(demoted, timeout=30, interval=0.05, what=f"the old master {port} to become a replica")

    def kill_master(self) -> int:
        """kill -9 of the master; returns its port."""
        port = self.master_port()
        node = self.node(port)
        node.process.kill()
        node.process.wait()
        return port

    def kill_master_of(self, _key: str = "") -> tuple[int, int]:
        """kill -9 of the master, returning at once: (its port, the replica's)."""
        successor = self.replica().port
        return self.kill_master(), successor

    def stop(self) -> None:
        for _, process in self.sentinels:
            process.kill()
            process.wait()
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    """A Redis Cluster on loopback ports: three masters with a replica each (``redis-cli --cluster
    create``; a node is failed after 1 s of silence). :meth:`stop` kills them all."""

    def __init__(self) -> None:
        self.nodes: list[RedisServer] = []
        try:
            # ``redis-cli --cluster create`` is tried again with fresh nodes when it fails: what
            # fails it (a node slow to answer on a loaded machine) is not what the tests are about.
            failure = None
            for _ in range(3):
                failure = self._create()
                if failure is None:
                    break
                self.stop()
                self.nodes = []
                print(f"redis-cli --cluster create failed, trying with fresh nodes: {failure}", file=sys.stderr)
            else:
                raise AssertionError(f"redis-cli --cluster create failed three times; the last time: {failure}")
            wait_until(self._stable, timeout=30, interval=0.1, what="the cluster to settle")
        except BaseException:
            self.stop()
            raise

    def _create(self) -> str | None:
        """Six fresh nodes made a cluster; ``None``, or what ``redis-cli`` said when it failed."""
        for _ in range(6):
            self.nodes.append(RedisServer("--cluster-node-timeout", "1000", cluster_node=True))
        out = subprocess.run(
            [REDIS_CLI, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=60,
        )
        if out.returncode == 0:
            return None
        return f"exit status {out.returncode}; stdout: {out.stdout}; stderr: {out.stderr}"

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port},127.0.0.1:{self.nodes[1].port}"

    def _live(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.process.poll() is None]

    def _stable(self) -> bool:
        maps = []
        for n in self._live():
            try:
                with Raw(n.port, timeout=1) as r:
                    if "cluster_state:ok" not in r.command("CLUSTER", "INFO"):
                        return False
                    maps.append(self._slot_map(r))
                    replication = r.command("INFO", "replication")
                    if r.command("ROLE")[0] == "slave":
                        if "master_link_status:up" not in replication:
                            return False
                    elif not replicas_acknowledged(replication, 1):
                        return False
            except (OSError, RespError):
                return False
        if not maps or any(m != maps[0] for m in maps):
            return False
        return sum(hi - lo + 1 for lo, hi, _, _ in maps[0]) == 16384 and all(reps for *_, reps in maps[0])

    @staticmethod
    def _slot_map(r: Raw) -> list[tuple[int, int, int, list[int]]]:
        return sorted((lo, hi, master[1], [rep[1] for rep in reps])
                      for lo, hi, master, *reps in r.command("CLUSTER", "SLOTS"))

    def slots(self) -> list[tuple[int, int, int, list[int]]]:
        with Raw(self._live()[0].port) as r:
            return self._slot_map(r)

    def key_slot(self, key: str) -> int:
        with Raw(self._live()[0].port) as r:
            return r.command("CLUSTER", "KEYSLOT", key)

    def master_of(self, key: str) -> int:
        slot = self.key_slot(key)
        return next(m for lo, hi, m, _ in self.slots() if lo <= slot <= hi)

    def replica_of(self, key: str) -> int:
        slot = self.key_slot(key)
        return next(reps[0] for lo, hi, _, reps in self.slots() if lo <= slot <= hi)

    def masters(self) -> list[int]:
        return [m for _, _, m, _ in self.slots()]

    def node(self, port: int) -> RedisServer:
        return next(n for n in self.nodes if n.port == port)

    def raw_for(self, key: str) -> Raw:
        """A raw connection to the master serving ``key``."""
        return Raw(self.master_of(key))

    def sync(self, key: str) -> None:
        """Waits until the replica of ``key``'s master has applied every write it made so far."""
        replica_caught_up(self.master_of(key), self.replica_of(key))

    def writable_successor(self, key: str) -> Raw:
        """A connection to the replica of ``key``'s master, made writable (a cluster replica still
        redirects keyed writes: ``FLUSHALL`` names no key)."""
        r = Raw(self.replica_of(key))
        r.command("CONFIG", "SET", "replica-read-only", "no")
        return r

    def failover(self, key: str) -> tuple[int, int]:
        """``CLUSTER FAILOVER`` on the replica of ``key``'s master; returns (old, new) master ports
        once every node agrees."""
        old, new = self.master_of(key), self.replica_of(key)
        with Raw(new) as r:
            r.command("CLUSTER", "FAILOVER")
        self.wait_for_master(key, new)
        return old, new

    def kill_master_of(self, key: str) -> tuple[int, int]:
        """kill -9 of the master serving ``key``, returning at once: (its port, its replica's)."""
        old, new = self.master_of(key), self.replica_of(key)
        node = self.node(old)
        node.process.kill()
        node.process.wait()
        return old, new

    def move_slot(self, key: str, to: int) -> None:
        """Moves the slot of ``key``, with its keys, from its master to the master on port ``to``,
        as ``redis-cli --cluster reshard`` does (``IMPORTING`` and ``MIGRATING``, ``MIGRATE`` of
        each key, then ``CLUSTER SETSLOT … NODE`` on every master); returns once every node
        agrees."""
        slot = self.key_slot(key)
        source = self.master_of(key)
        assert to != source and to in self.masters(), f"127.0.0.1:{to} is not another master"
        with Raw(to) as target, Raw(source) as s:
            target_id, source_id = target.command("CLUSTER", "MYID"), s.command("CLUSTER", "MYID")
            target.command("CLUSTER", "SETSLOT", str(slot), "IMPORTING", source_id)
            s.command("CLUSTER", "SETSLOT", str(slot), "MIGRATING", target_id)
            while keys := s.command("CLUSTER", "GETKEYSINSLOT", str(slot), "100"):
                s.command("MIGRATE", "127.0.0.1", str(to), "", "0", "5000", "KEYS", *keys)
            target.command("CLUSTER", "SETSLOT", str(slot), "NODE", target_id)
            s.command("CLUSTER", "SETSLOT", str(slot), "NODE", target_id)
        for port in self.masters():
            if port not in (to, source):
                with Raw(port) as r:
                    r.command("CLUSTER", "SETSLOT", str(slot), "NODE", target_id)
        self.wait_for_master(key, to)

    def wait_for_master(self, key: str, port: int) -> None:
        """Waits until every live node says the node at ``port`` serves ``key`` as its master."""
        slot = self.key_slot(key)

        def agreed() -> bool:
            for n in self._live():
                try:
                    with Raw(n.port, timeout=1) as r:
                        if not any(lo <= slot <= hi and m == port for lo, hi, m, _ in self._slot_map(r)):
                            return False
                except (OSError, RespError):
                    return False
            return True

        wait_until(agreed, timeout=30, interval=0.05, what=f"127.0.0.1:{port} to serve '{key}'")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def eight_workers_exclude_each_other(clients: list[Any], name: str) -> None:
    """Eight threads, spread over ``clients``, each take lock ``name`` 25 times and bump a counter
    inside with a pause between read and write: asserts no two were ever inside at once and the
    counter is exactly 200."""
    counter = [0]
    inside = threading.Event()
    errors: list[str] = []

    def work(client: Any) -> None:
        lock = client.lock(name)
        for _ in range(25):
            with lock:
                if inside.is_set():
                    errors.append("two holders at once")
                inside.set()
                seen = counter[0]
                time.sleep(0.0005)
                counter[0] = seen + 1
                inside.clear()

    threads = [threading.Thread(target=work, args=(clients[i % len(clients)],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a worker hung"
    assert errors == []
    assert counter[0] == 200


def release_wakes_every_kind(a: Any, b: Any, prefix: str,
                             while_waiting: Callable[[Optional[str]], None] = lambda _channel: time.sleep(0.2)) -> None:
    """The wake-up check every topology runs: for a lock, a fair lock, a write lock, a semaphore and
    a count-down latch named ``<prefix>:<kind>``, ``a`` holds (a lock with a lease far longer than
    the test, so only a release's message lets the waiter in), ``b`` waits 20 s at most and must get
    in once ``a`` releases. ``while_waiting`` runs with ``b``'s lock waiter started, given the lock's
    shared channel (``None`` for the fair lock, whose waiters each have their own); by default it
    gives the waiter 0.2 s to subscribe."""
    for kind, make, channel in (
            ("lock", lambda c: c.lock(f"{prefix}:lock"), f"redisson_lock__channel:{{{prefix}:lock}}"),
            ("fair", lambda c: c.fair_lock(f"{prefix}:fair"), None),
            ("rw", lambda c: c.read_write_lock(f"{prefix}:rw").write_lock(), f"redisson_rwlock:{{{prefix}:rw}}")):
        held = make(a)
        assert held.acquire(lease=120)
        got: list[bool] = []
        waiter = threading.Thread(target=lambda: got.append(make(b).acquire(timeout=20) and (make(b).release() or True)))
        waiter.start()
        while_waiting(channel)
        held.release()
        waiter.join(25)
        assert got == [True], kind

    semaphore = a.semaphore(f"{prefix}:sem")
    semaphore.delete()
    assert semaphore.try_set_permits(0)
    took: list[bool] = []
    taker = threading.Thread(target=lambda: took.append(b.semaphore(f"{prefix}:sem").acquire(timeout=20)))
    taker.start()
    time.sleep(0.2)
    semaphore.release()
    taker.join(25)
    assert took == [True]

    latch = a.count_down_latch(f"{prefix}:latch")
    latch.delete()
    assert latch.try_set_count(1)
    opened: list[bool] = []
    watcher = threading.Thread(target=lambda: opened.append(b.count_down_latch(f"{prefix}:latch").wait(20)))
    watcher.start()
    time.sleep(0.2)
    latch.count_down()
    watcher.join(25)
    assert opened == [True]


class Topology(Protocol):
    """A deployment whose masters fail over, :class:`SentinelGroup` or :class:`Cluster` (a Sentinel
    group has one master for every key, and ignores the key)."""

    @property
    def url(self) -> str: ...
    def sync(self, key: str) -> None: ...
    def writable_successor(self, key: str) -> Raw: ...
    def failover(self, key: str) -> tuple[int, int]: ...
    def kill_master_of(self, key: str) -> tuple[int, int]: ...
    def wait_for_master(self, key: str, port: int) -> None: ...


def a_failover_keeps_replicated_holds_and_reports_the_others_lost(topology: Topology) -> None:
    """A graceful failover while locks are held and a waiter waits: the lock that reached the next
    master stays held (its holder renews it there, the waiter stays out), the lock that did not is
    reported lost, and the waiter acquires once the holder releases on the new master. The names
    share a hash tag, so that one failover moves both on a cluster."""
    import crosslock

    kept_name, dropped_name = "{py:failover}:kept", "{py:failover}:dropped"
    # A lease that outlasts the failover (renewed every 2 s): a hold is lost only because the new
    # master does not have it.
    holder, other = (crosslock.connect(topology.url, connect_timeout=8, watchdog_timeout=6) for _ in range(2))
    try:
        lost = threading.Event()
        kept = holder.lock(kept_name)
        dropped = holder.lock(dropped_name, on_lost=lambda _lock: lost.set())
        dropped.acquire()
        topology.sync(dropped_name)
        # The next master loses the first lock: as if the master failed before replicating it.
        with topology.writable_successor(kept_name) as r:
            r.command("FLUSHALL")
        kept.acquire()
        topology.sync(kept_name)
        got: list[bool] = []
        waiter = threading.Thread(target=lambda: got.append(other.lock(kept_name).acquire(timeout=30)))
        waiter.start()
        time.sleep(0.2)
        old, new = topology.failover(kept_name)
        assert old != new

        assert lost.wait(10), "the hold that never reached the new master is reported lost"
        time.sleep(5)  # renewals on the new master
        assert not kept.lost
        assert waiter.is_alive(), "the waiter got in while the lock was held"
        with Raw(new) as r:
            assert len(r.hgetall(kept_name)) == 1
        kept.release()
        waiter.join(10)
        assert got == [True], "the waiter acquires after the release on the new master"
    finally:
        holder.close()
        other.close()


def killing_the_master_is_survived_by_waiters(topology: Topology) -> None:
    """kill -9 of the master while a lock is held and a waiter waits: a call during the outage ends
    within its limits, the waiter keeps waiting through it, on a subscription that follows the lock
    to the new master (the 60 s lease outlasts its wait, so only the release's message lets it in),
    and acquires there once the lock is released."""
    import crosslock

    name = "py:kill:lock"
    holder, other = (crosslock.connect(topology.url, connect_timeout=20, response_timeout=1) for _ in range(2))
    try:
        lock = holder.lock(name)
        assert lock.acquire(lease=60)
        topology.sync(name)
        got: list[bool] = []
        waiter = threading.Thread(target=lambda: got.append(other.lock(name).acquire(timeout=40)))
        waiter.start()
        time.sleep(0.2)

        _, successor = topology.kill_master_of(name)
        started = time.monotonic()
        try:
            holder.lock("{py:kill:lock}:probe").acquire(blocking=False)  # on the same master
        except crosslock.RedisUnavailableError:
            pass
        assert time.monotonic() - started < 5, "a call during the outage ends within its limits"
        topology.wait_for_master(name, successor)
        time.sleep(3)  # long enough for the waiter to wait again, on the new master
        assert waiter.is_alive(), "the waiter got in while the lock was held"

        def released() -> bool:
            try:
                lock.release()
                return True
            except crosslock.RedisUnavailableError:
                return False

        wait_until(released, timeout=15, interval=0.2, what="the release to reach the new master")
        waiter.join(15)
        assert got == [True], "the waiter acquires on the new master"
    finally:
        holder.close()
        other.close()


def loop_factory_hook() -> bool:
    """Whether pytest-asyncio takes the loops from its ``pytest_asyncio_loop_factories`` hook and
    its marker's ``loop_factories``: 1.3 and later (1.2 is the newest that installs on CPython
    3.9); ``False`` without pytest-asyncio (the bench imports this module too)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major, minor = (int(part) for part in version("pytest-asyncio").split(".")[:2])
    except PackageNotFoundError:
        return False
    return (major, minor) >= (1, 3)


def loops_only(*names: str) -> Any:
    """Marks an ``async def`` test of a module with ``EVENT_LOOPS`` to run on these loops only (see
    conftest.py): pytest-asyncio's ``loop_factories`` where it has them (≥ 1.3), else the marker
    conftest.py's parametrization reads."""
    import pytest

    if loop_factory_hook():
        return pytest.mark.asyncio(loop_factories=list(names))
    return pytest.mark.crosslock_loops(*names)
