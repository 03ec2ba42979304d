//! A disposable redis-server: the server and redis-cli binaries the fixtures run, a free loopback
//! port, a server started on creation and killed on drop (or at the test process's end), its
//! `INFO`, `CLIENT LIST` and replication as the tests read them.

// Test helpers fail loudly: an unwrap here is a failed test, not a library panic.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `redis-server` the fixtures start (servers and sentinels): `$CROSSLOCK_REDIS_BIN/redis-server`
/// when that names a directory of a server build (to run a test against another version, as
/// `./dev matrix` does), else the one on `PATH`.
pub fn redis_server_bin() -> std::path::PathBuf {
    server_tool("redis-server")
}

/// The `redis-cli` the fixtures run (`--cluster create`): from the same directory as
/// [`redis_server_bin`].
pub fn redis_cli_bin() -> std::path::PathBuf {
    server_tool("redis-cli")
}

/// Whether [`redis_server_bin`] knows the config `option` (`enable-debug-command` is Redis 7's;
/// 6.2 refuses it and runs DEBUG without it). Asked of the binary, not by its version: it is given
/// the option, then a made-up one, and says which line of its configuration it refused first (it
/// exits at once, whichever it is).
pub fn server_takes(option: &str, value: &str) -> bool {
    let out = Command::new(redis_server_bin())
        .args([
            &format!("--{option}"),
            value,
            "--crosslock-probe-end",
            "yes",
        ])
        .output()
        .expect("redis-server must be installed (the test command installs it)");
    String::from_utf8_lossy(&out.stdout).contains("crosslock-probe-end")
        || String::from_utf8_lossy(&out.stderr).contains("crosslock-probe-end")
}

/// The arguments that let a test send DEBUG to the server (none where DEBUG needs none).
pub fn debug_command_args() -> &'static [&'static str] {
    static TAKES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    match *TAKES.get_or_init(|| server_takes("enable-debug-command", "yes")) {
        true => &["--enable-debug-command", "yes"],
        false => &[],
    }
}

fn server_tool(name: &str) -> std::path::PathBuf {
    match std::env::var_os("CROSSLOCK_REDIS_BIN") {
        Some(dir) if !dir.is_empty() => std::path::Path::new(&dir).join(name),
        _ => name.into(),
    }
}

/// The `(major, minor)` of `redis_version` in `INFO server` of the server (or sentinel) at `port`
/// (Valkey says the Redis version it is compatible with).
pub fn server_version(port: u16) -> (u32, u32) {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let info: String = redis::cmd("INFO").arg("server").query(&mut conn).unwrap();
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .expect("INFO server says redis_version")
        .trim()
        .to_owned();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// The lines of `CLIENT LIST` on the server (or sentinel) at `port`.
pub fn client_list(port: u16) -> Vec<String> {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn).unwrap();
    list.lines().map(str::to_owned).collect()
}

/// The value of `field` (`name`, `lib-name`, …) in a `CLIENT LIST` line ("" when it is empty,
/// `None` when the server shows no such field).
pub fn client_field<'a>(line: &'a str, field: &str) -> Option<&'a str> {
    let prefix = format!("{field}=");
    line.split(' ')
        .find_map(|f| f.strip_prefix(prefix.as_str()))
}

/// Whether a master's `INFO replication` lists `count` replicas online that have acknowledged
/// an offset: after a full sync, a master sends a replica nothing (nor counts it in `WAIT`) until
/// the replica's first acknowledgement, which comes within a second.
pub fn replicas_acknowledged(info: &str, count: usize) -> bool {
    info.lines()
        .filter(|line| line.starts_with("slave") && line.contains("state=online"))
        .filter(|line| {
            line.split(',')
                .find_map(|field| field.strip_prefix("offset="))
                .and_then(|offset| offset.parse::<u64>().ok())
                .is_some_and(|offset| offset > 0)
        })
        .count()
        >= count
}

/// A replica's full sync starts at once, and a master pings its replicas every second (Redis
/// waits 5 s before a diskless sync and pings every 10 s; `CLUSTER SLOTS` lists a replica only
/// once a ping has given it an offset): a cluster or a Sentinel group is ready in ~2 s, not ~10.
const FAST_REPLICATION: [&str; 4] = [
    "--repl-diskless-sync-delay",
    "0",
    "--repl-ping-replica-period",
    "1",
];

pub struct RedisServer {
    pub port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

impl RedisServer {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `redis-server` arguments (`["--timeout", "1"]`, …).
    ///
    /// On a free port; tried again on other ports when the port was taken between picking and
    /// binding it, by a server of a test running alongside.
    pub fn start_with(args: &[&str]) -> Self {
        let mut last = String::new();
        for _ in 0..5 {
            match Self::try_start(free_port(), args) {
                Ok(server) => return server,
                Err(e) => last = e,
            }
        }
        panic!("redis-server did not start on five free ports: {last}")
    }

    /// A cluster node (`--cluster-enabled yes` and `args`) on a free port whose cluster bus port,
    /// the port + 10000, is free too: that default is the only bus port Redis 6.2 has (no
    /// `cluster-port` option), so the same fixture runs on every server.
    pub fn start_cluster_node(args: &[&str]) -> Self {
        let args: Vec<&str> = ["--cluster-enabled", "yes"]
            .iter()
            .chain(args)
            .copied()
            .collect();
        let mut last = String::new();
        for _ in 0..5 {
            match Self::try_start(free_cluster_port(), &args) {
                Ok(server) => return server,
                Err(e) => last = e,
            }
        }
        panic!("cluster node did not start on five free ports: {last}")
    }

    pub fn start_on(port: u16) -> Self {
        Self::try_start(port, &[]).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts redis-server on `port` and waits until it listens there; an error if it exited (the
    /// port was taken) or did not listen in time (see [`await_listening`]).
    fn try_start(port: u16, extra: &[&str]) -> Result<Self, String> {
        // A directory of its own per try: a failed try removes it, while the server of another
        // test of this process may be running on the same port.
        static TRIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = TRIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("crosslock-test-{}-{port}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(redis_server_bin())
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(FAST_REPLICATION)
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (the test command installs it)");
        reap_at_exit(child.id(), &dir);
        // Dropped on an error: kills the child (if still running), removes its dir.
        let mut server = RedisServer { port, child, dir };
        await_listening(&mut server.child, port, "redis-server")?;
        Ok(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// A plain redis-rs connection, to look at what the locks left in Redis.
    pub fn raw(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Sends `signal` (`libc::SIGSTOP`, `libc::SIGCONT`) to the server process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signal) }, 0);
    }

    /// How many connections are subscribed to `channel` (`PUBSUB NUMSUB`).
    pub fn subscribers(&self, channel: &str) -> i64 {
        let reply: (String, i64) =
            redis::from_redis_value(self.command(&["PUBSUB", "NUMSUB", channel])).unwrap();
        reply.1
    }

    /// How many clients wait in Redis for their command to run (held up by `CLIENT PAUSE`, or
    /// blocked in a blocking command).
    pub fn blocked_clients(&self) -> u64 {
        let info: String = redis::from_redis_value(self.command(&["INFO", "clients"])).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("INFO clients has blocked_clients")
    }

    /// Runs one command on a fresh plain connection.
    pub fn command(&self, args: &[&str]) -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        cmd.arg(&args[1..]);
        cmd.query(&mut self.raw()).unwrap()
    }

    /// Every connection the server has, of any type, this query's own included.
    pub fn connections(&self) -> usize {
        let list: String = redis::from_redis_value(self.command(&["CLIENT", "LIST"])).unwrap();
        list.lines().filter(|line| !line.is_empty()).count()
    }

    /// The connections of type `normal` (not pub/sub) the server has, this query's own included.
    pub fn normal_connections(&self) -> usize {
        let list: String =
            redis::from_redis_value(self.command(&["CLIENT", "LIST", "TYPE", "normal"])).unwrap();
        list.lines().filter(|line| !line.is_empty()).count()
    }

    /// The calls of `command` this server has served (`INFO commandstats`).
    pub fn calls(&self, command: &str) -> u64 {
        let stats: String =
            redis::from_redis_value(self.command(&["INFO", "commandstats"])).unwrap();
        calls_in_commandstats(&stats, command)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kills `pid` and removes `dir` (its working directory) when this test process ends. A fixture
/// shared through a `static` (one cluster or sentinel group per test binary) is never dropped, so
/// its servers would outlive the tests and their directories would pile up in the temporary
/// directory: one watcher process per test binary kills every server it was told about once the
/// test process is gone (a server that already stopped is skipped) and removes their directories.
pub fn reap_at_exit(pid: u32, dir: &std::path::Path) {
    use std::io::Write;
    static LIST: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let list = LIST.get_or_init(|| {
        let me = std::process::id();
        let list = std::env::temp_dir().join(format!("crosslock-test-servers-{me}"));
        std::fs::write(&list, "").unwrap();
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; \
             while read -r p d; do \
               grep -q redis /proc/$p/cmdline 2>/dev/null && kill -9 $p; \
               case \"$d\" in */crosslock-*) rm -rf \"$d\";; esac; \
             done < '{l}'; \
             rm -f '{l}'",
            l = list.display()
        );
        // Never waited for: it outlives this process on purpose (init reaps it).
        let watcher = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh");
        std::mem::forget(watcher);
        list
    });
    // One write per line: `writeln!` on a `File` writes the number and the newline in separate
    // calls, and two tests starting servers at once interleaved them into one unreadable line
    // (`<pid1><pid2>\n\n`), so neither server was reaped: the shared cluster's first node
    // outlived the test process.
    let mut file = std::fs::OpenOptions::new().append(true).open(list).unwrap();
    file.write_all(format!("{pid} {}\n", dir.display()).as_bytes())
        .unwrap();
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits (at most 5 s) until `replica` has applied the replication stream of `master` up to
/// the master's offset now: every write the master made, whichever connection made it.
///
/// Not `WAIT 1` from a fresh connection: WAIT counts the replicas that acknowledged the writes
/// of *its own* connection, so on one that wrote nothing it returns 1 at once, however far
/// behind the replica is.
pub fn replica_caught_up(master: &RedisServer, replica: &RedisServer) {
    let offset = |node: &RedisServer, field: &str| -> Option<i64> {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut node.raw())
            .ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
    };
    let target = offset(master, "master_repl_offset").expect("the master's replication offset");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let applied = offset(replica, "slave_repl_offset");
        if applied.is_some_and(|applied| applied >= target) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replica at {} applied {applied:?} of the master's {target} bytes within 5 s",
            replica.port
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `child` is the process listening on 127.0.0.1:`port`. A port picked free may be
/// taken by a server of a test running alongside before `child` binds it: then `child` exits, and
/// a mere connect would reach the stranger. An error if `child` exited, or did not listen within
/// 10 s (then it is killed); the caller tries another port.
pub fn await_listening(child: &mut Child, port: u16, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "{what} on port {port} exited ({status}): the port was taken"
            ));
        }
        if listens(child.id(), port) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what} did not listen on port {port} within 10 s"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` is the one listening on loopback TCP `port` (from `/proc`: one of its
/// sockets is the listening socket bound to 127.0.0.1:`port`).
fn listens(pid: u32, port: u16) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let inodes: Vec<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .any(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
            f.len() > 9 && f[1] == local && f[3] == "0A" && inodes.iter().any(|i| i == f[9])
        })
}

/// The calls of `command` (lower case, as `INFO` names it: `evalsha`, `subscribe`) counted in the
/// text of `INFO commandstats`; 0 if it was never called.
pub fn calls_in_commandstats(stats: &str, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// The `EVAL` and `EVALSHA` calls counted in the text of `INFO commandstats`.
pub fn scripts_in_commandstats(stats: &str) -> u64 {
    calls_in_commandstats(stats, "eval") + calls_in_commandstats(stats, "evalsha")
}

/// A port nobody listens on now, on loopback.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A free loopback port whose cluster bus port (the port + 10000, below 65536) is free too.
pub fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= 55535 && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
}
