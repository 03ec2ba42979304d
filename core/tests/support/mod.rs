//! A disposable redis-server for tests: a free loopback port, started on creation, killed on drop.

#![allow(dead_code)]
// Test helpers fail loudly: an unwrap here is a failed test, not a library panic.
#![allow(clippy::unwrap_used)]

pub mod wake;

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

/// An acquire + release of lock `name` that goes the routed way (polled by a runtime without
/// an I/O driver: no lane), and how long it took.
pub async fn routed_pair(
    client: &crosslock::Client,
    name: &str,
) -> (crosslock::Result<()>, Duration) {
    let client = client.clone();
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let lock = client.lock(&name).unwrap();
        let started = Instant::now();
        let pair = runtime.block_on(async { lock.acquire().await?.release().await.map(|_| ()) });
        (pair, started.elapsed())
    })
    .await
    .unwrap()
}

/// An acquire + release of lock `name` both ways (the routed way, then the caller's lane): a
/// line for each that failed or took `limit` or longer; empty when both were prompt.
pub async fn slow_pairs(client: &crosslock::Client, name: &str, limit: Duration) -> Vec<String> {
    let mut slow = Vec::new();
    let (routed, took) = routed_pair(client, name).await;
    if routed.is_err() || took >= limit {
        slow.push(format!("routed pair on '{name}': {routed:?} in {took:?}"));
    }
    let started = Instant::now();
    let on_lane = async { client.lock(name)?.acquire().await?.release().await };
    let on_lane = on_lane.await;
    let took = started.elapsed();
    if on_lane.is_err() || took >= limit {
        slow.push(format!("pair on '{name}': {on_lane:?} in {took:?}"));
    }
    slow
}

/// For each lock held on a master (its port, name and guard): its name, its `PTTL` on that
/// master and whether its holder was told it is lost.
pub fn leases_on_masters(
    cluster: &Cluster,
    held: &[(u16, String, crosslock::LockGuard)],
) -> Vec<(String, i64, bool)> {
    held.iter()
        .map(|(master, name, guard)| {
            let pttl: i64 = redis::cmd("PTTL")
                .arg(name)
                .query(&mut cluster.node(*master).raw())
                .unwrap();
            (name.clone(), pttl, guard.is_lost())
        })
        .collect()
}

/// Fails unless every lock of [`leases_on_masters`] is still there (a positive `PTTL`: renewed)
/// and its holder was not told it is lost.
pub fn assert_renewed(leases: Vec<(String, i64, bool)>) {
    for (name, pttl, lost) in leases {
        assert!(
            pttl > 0 && !lost,
            "lock '{name}', on a master that answers, was not renewed while another master did \
             not answer: PTTL {pttl}, reported lost: {lost}"
        );
    }
}

/// `count` names (`prefix:0`, `prefix:1`, …) whose slots `master` serves, or (`elsewhere`) some
/// other master does.
pub fn names_on(
    cluster: &Cluster,
    prefix: &str,
    master: u16,
    elsewhere: bool,
    count: usize,
) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}:{i}"))
        .filter(|name| (cluster.master_of(name) == master) != elsewhere)
        .take(count)
        .collect()
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

/// Polls `condition` every 5 ms until it holds; fails the test, naming `what`, after 10 s.
pub async fn until(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Pairs of `lock` in quick succession until they make their round trips without crosslock's
/// own threads (a pair the routed way wakes them at least twice): the first calls of a client on
/// a cluster go the routed way while the slot map is read and the lane opens. Fails the test
/// after 15 s.
pub async fn until_on_a_lane(lock: &crosslock::Lock) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let switches = crosslock_thread_switches();
        for _ in 0..20 {
            lock.acquire().await.unwrap().release().await.unwrap();
        }
        if crosslock_thread_switches() - switches < 20 {
            return;
        }
        assert!(Instant::now() < deadline, "no lane in 15 s");
    }
}

/// Context switches so far of crosslock's own runtime threads (named `crosslock-rt`).
pub fn crosslock_thread_switches() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if name.trim() != "crosslock-rt" {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// An application's own runtime as `#[tokio::main]` builds it on this machine: multi-thread, two
/// workers, I/O and timers.
pub fn app_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

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

/// A loopback TCP proxy in front of a server, which can hold every byte in both directions (a
/// partition: connections stay open, nothing gets through) and let them through again, and can
/// drop a connection as it sends a given command.
pub struct Proxy {
    pub port: u16,
    held: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    cuts: Cuts,
}

/// What to drop a connection on: bytes the client sends, how many more times, and whether the
/// server gets them first.
type Cuts = std::sync::Arc<std::sync::Mutex<Cut>>;

#[derive(Default)]
struct Cut {
    bytes: Vec<u8>,
    left: usize,
    after_sending: bool,
}

impl Proxy {
    pub async fn start(upstream: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = std::sync::Arc::new(tokio::sync::watch::channel(false).0);
        let cuts: Cuts = Default::default();
        let (h, c) = (held.clone(), cuts.clone());
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let Ok(up) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else {
                    continue;
                };
                let (dr, dw) = down.into_split();
                let (ur, uw) = up.into_split();
                let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                tokio::spawn(pump(dr, uw, h.subscribe(), c.clone(), cut.clone()));
                tokio::spawn(pump(ur, dw, h.subscribe(), Default::default(), cut));
            }
        });
        Proxy { port, held, cuts }
    }

    /// The next `times` connections that send `bytes` (say `b"SUBSCRIBE"`) are dropped instead
    /// of passing them on: the client's command gets no answer, as when the server closes the
    /// connection just then.
    pub fn cut_on(&self, bytes: &[u8], times: usize) {
        self.cut(bytes, times, false);
    }

    /// As [`cut_on`](Self::cut_on), but the server gets the command and runs it; its reply is
    /// what is lost.
    pub fn cut_after(&self, bytes: &[u8], times: usize) {
        self.cut(bytes, times, true);
    }

    fn cut(&self, bytes: &[u8], times: usize, after_sending: bool) {
        *self.cuts.lock().unwrap() = Cut {
            bytes: bytes.to_vec(),
            left: times,
            after_sending,
        };
    }

    /// How many of the cuts asked for are still to come.
    pub fn cuts_left(&self) -> usize {
        self.cuts.lock().unwrap().left
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Holds every byte from now on (a network partition).
    pub fn partition(&self) {
        self.held.send_replace(true);
    }

    /// Lets the held bytes and everything after through again.
    pub fn heal(&self) {
        self.held.send_replace(false);
    }
}

/// Copies `from` to `to`; returning drops both halves (the server then closes its side, and
/// the other direction's pump ends too, closing the client's). `cuts`: what to cut on (nothing
/// for the server's direction); `cut`: the connection's flag that it was cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut held: tokio::sync::watch::Receiver<bool>,
    cuts: Cuts,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if cut.load(Ordering::Acquire) {
            return;
        }
        let mut cut_after = false;
        {
            let mut c = cuts.lock().unwrap();
            if c.left > 0
                && !c.bytes.is_empty()
                && buf[..n]
                    .windows(c.bytes.len())
                    .any(|w| w == c.bytes.as_slice())
            {
                c.left -= 1;
                cut.store(true, Ordering::Release);
                if !c.after_sending {
                    return;
                }
                cut_after = true;
            }
        }
        while *held.borrow_and_update() {
            if held.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() || cut_after {
            return;
        }
    }
}

/// A Sentinel deployment on loopback ports: a master, one replica and three sentinels
/// (quorum 2, a master is down after 1 s of silence), all killed on drop.
pub struct SentinelGroup {
    pub name: String,
    /// The data nodes, the master first (as started: after a failover the roles are swapped).
    pub nodes: Vec<RedisServer>,
    sentinels: Vec<(u16, Child)>,
    dir: std::path::PathBuf,
}

impl SentinelGroup {
    pub fn start() -> Self {
        let master = RedisServer::start();
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
        let name = "crosslock".to_owned();
        let dir = std::env::temp_dir().join(format!(
            "crosslock-sentinel-{}-{}",
            std::process::id(),
            master.port
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let sentinels = (0..3)
            .map(|_| start_sentinel(&dir, &name, master.port))
            .collect();
        let group = SentinelGroup {
            name,
            nodes: vec![master, replica],
            sentinels,
            dir,
        };
        group.wait_until_ready();
        group
    }

    /// Waits until the replica is in sync and every sentinel knows the master, the replica and
    /// the two other sentinels (so that a failover can be agreed).
    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self.sentinels.iter().all(|(port, _)| {
                let Ok(fields) = sentinel_master(*port, &self.name) else {
                    return false;
                };
                fields.get("num-slaves").map(String::as_str) == Some("1")
                    && fields.get("num-other-sentinels").map(String::as_str) == Some("2")
                    && fields.get("flags").map(String::as_str) == Some("master")
            }) && self.in_sync();
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinel group did not come up"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn in_sync(&self) -> bool {
        let info = |node: &RedisServer| -> String {
            redis::cmd("INFO")
                .arg("replication")
                .query(&mut node.raw())
                .unwrap_or_default()
        };
        info(&self.nodes[1]).contains("master_link_status:up")
            && replicas_acknowledged(&info(&self.nodes[0]), 1)
    }

    /// `redis+sentinel://` URL naming the three sentinels.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+sentinel://{}/{}/0", hosts.join(","), self.name)
    }

    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|(port, _)| *port).collect()
    }

    /// The data node the first sentinel calls the master now.
    pub fn master(&self) -> &RedisServer {
        let port = self.master_port();
        self.nodes.iter().find(|n| n.port == port).unwrap()
    }

    pub fn replica(&self) -> &RedisServer {
        let port = self.master_port();
        self.nodes.iter().find(|n| n.port != port).unwrap()
    }

    pub fn master_port(&self) -> u16 {
        sentinel_master(self.sentinels[0].0, &self.name).unwrap()["port"]
            .parse()
            .unwrap()
    }

    /// `SENTINEL FAILOVER`, then waits until every sentinel names the new master and the new
    /// master serves writes. Returns the new master's port.
    pub fn failover(&self) -> u16 {
        let before = self.master_port();
        let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}/", self.sentinels[0].0))
            .unwrap()
            .get_connection()
            .unwrap();
        let _: () = redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(&self.name)
            .query(&mut conn)
            .unwrap();
        self.wait_for_new_master(before)
    }

    /// Waits until every sentinel names a master other than `before` and it serves writes.
    pub fn wait_for_new_master(&self, before: u16) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ports: Vec<Option<u16>> = self
                .sentinels
                .iter()
                .map(|(port, _)| {
                    sentinel_master(*port, &self.name)
                        .ok()
                        .and_then(|f| f.get("port")?.parse().ok())
                })
                .collect();
            if let Some(Some(now)) = ports.first()
                && *now != before
                && ports.iter().all(|p| *p == Some(*now))
            {
                let role: Vec<redis::Value> = redis::cmd("ROLE")
                    .query(
                        &mut redis::Client::open(format!("redis://127.0.0.1:{now}/"))
                            .unwrap()
                            .get_connection()
                            .unwrap(),
                    )
                    .unwrap_or_default();
                if matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master") {
                    return *now;
                }
            }
            assert!(Instant::now() < deadline, "the failover did not complete");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the replica has applied every write the master made so far.
    pub fn sync(&self) {
        replica_caught_up(self.master(), self.replica());
    }
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        for (_, child) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
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

/// Starts a sentinel monitoring `name` at `master_port` on a free port and waits until it is the
/// one answering there (a server of a test running alongside may take the port between picking
/// and binding it: then the sentinel exits and it is tried on another port).
fn start_sentinel(dir: &std::path::Path, name: &str, master_port: u16) -> (u16, Child) {
    let mut last = String::new();
    for _ in 0..5 {
        let port = free_port();
        let conf = dir.join(format!("sentinel-{port}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {}\n\
                 sentinel monitor {name} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {name} 1000\n\
                 sentinel failover-timeout {name} 4000\n\
                 sentinel parallel-syncs {name} 1\n",
                dir.display(),
            ),
        )
        .unwrap();
        let mut child = Command::new(redis_server_bin())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (the test command installs it)");
        reap_at_exit(child.id(), dir);
        match await_listening(&mut child, port, "sentinel") {
            Ok(()) => return (port, child),
            Err(e) => last = e,
        }
    }
    panic!("a sentinel did not start on five free ports: {last}")
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

/// `SENTINEL MASTER <name>` of the sentinel at `port`, as field → value.
fn sentinel_master(
    port: u16,
    name: &str,
) -> redis::RedisResult<std::collections::HashMap<String, String>> {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?
        .get_connection_with_timeout(Duration::from_secs(1))?;
    redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(name)
        .query(&mut conn)
}

/// A Redis Cluster on loopback ports: three masters and a replica each (`redis-cli --cluster
/// create`, a node is failed after 1 s of silence), all killed on drop.
pub struct Cluster {
    /// The nodes as started (masters first; a failover swaps roles).
    pub nodes: Vec<RedisServer>,
}

impl Cluster {
    pub fn start() -> Self {
        // `redis-cli --cluster create` is tried again with fresh nodes when it fails: what fails
        // it (a node slow to answer on a loaded machine) is not what the tests are about.
        let mut last = String::new();
        let nodes = (0..3).find_map(|_| match Self::create() {
            Ok(nodes) => Some(nodes),
            Err(e) => {
                eprintln!("redis-cli --cluster create failed, trying with fresh nodes: {e}");
                last = e;
                None
            }
        });
        let Some(nodes) = nodes else {
            panic!("redis-cli --cluster create failed three times; the last time: {last}");
        };
        let cluster = Cluster { nodes };
        cluster.wait_until_stable();
        cluster
    }

    /// Six fresh nodes made a cluster, three masters with a replica each; on failure, what
    /// `redis-cli` said (the nodes are killed).
    fn create() -> Result<Vec<RedisServer>, String> {
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| RedisServer::start_cluster_node(&["--cluster-node-timeout", "1000"]))
            .collect();
        let mut create = Command::new(redis_cli_bin());
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.port));
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli must be installed (the test command installs it)");
        if out.status.success() {
            Ok(nodes)
        } else {
            Err(format!(
                "{}; stdout: {}; stderr: {}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Whether the nodes know sharded pub/sub (`PUBSUB SHARDNUMSUB`; Redis 7 and later), asked
    /// of a master: what a client with `sharded_pubsub=auto` should find at connect.
    pub fn takes_sharded_pubsub(&self) -> bool {
        let mut conn = self.node(self.masters()[0]).raw();
        redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .query::<redis::Value>(&mut conn)
            .is_ok()
    }

    /// Whether the nodes run a script marked `#!lua flags=allow-cross-slot-keys` (Redis 7 and
    /// later), asked of a master: where they do, the watchdog renews one script per master.
    pub fn takes_cross_slot_scripts(&self) -> bool {
        let mut conn = self.node(self.masters()[0]).raw();
        redis::cmd("EVAL")
            .arg("#!lua flags=allow-cross-slot-keys\nreturn 1")
            .arg(0)
            .query::<i64>(&mut conn)
            .is_ok()
    }

    /// `redis+cluster://` URL naming two seed nodes.
    pub fn url(&self) -> String {
        format!(
            "redis+cluster://127.0.0.1:{},127.0.0.1:{}",
            self.nodes[0].port, self.nodes[1].port
        )
    }

    fn live(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes
            .iter()
            .filter(|n| std::net::TcpStream::connect(("127.0.0.1", n.port)).is_ok())
    }

    /// Waits until every live node says the cluster is ok, they all agree on who serves which
    /// slot, every slot is served by a master with a replica, and every replica is in sync.
    pub fn wait_until_stable(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.stable() {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster did not settle");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn stable(&self) -> bool {
        let mut maps = Vec::new();
        for n in self.live() {
            let Ok(mut c) = redis::Client::open(n.url())
                .unwrap()
                .get_connection_with_timeout(Duration::from_secs(1))
            else {
                return false;
            };
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut c)
                .unwrap_or_default();
            if !info.contains("cluster_state:ok") {
                return false;
            }
            let Ok(map) = slot_map(&mut c) else {
                return false;
            };
            maps.push(map);
            let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut c).unwrap_or_default();
            let repl: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut c)
                .unwrap_or_default();
            let in_sync = if matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"slave")
            {
                repl.contains("master_link_status:up")
            } else {
                replicas_acknowledged(&repl, 1)
            };
            if !in_sync {
                return false;
            }
        }
        let covered: u32 = maps
            .first()
            .map(|m| m.iter().map(|(lo, hi, _, _)| u32::from(hi - lo) + 1).sum())
            .unwrap_or(0);
        let replicated = maps
            .first()
            .is_some_and(|m| m.iter().all(|(_, _, _, replicas)| !replicas.is_empty()));
        covered == 16384 && replicated && maps.windows(2).all(|w| w[0] == w[1])
    }

    /// The slot ranges as `(first, last, master port, replica ports)`, sorted.
    pub fn slots(&self) -> Vec<SlotRange> {
        let n = self.live().next().unwrap();
        slot_map(&mut n.raw()).unwrap()
    }

    /// The hash slot of `key`, as Redis computes it.
    pub fn key_slot(&self, key: &str) -> u16 {
        let n = self.live().next().unwrap();
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut n.raw())
            .unwrap()
    }

    /// The port of the master serving `key`.
    pub fn master_of(&self, key: &str) -> u16 {
        let slot = self.key_slot(key);
        self.slots()
            .into_iter()
            .find(|(lo, hi, _, _)| (*lo..=*hi).contains(&slot))
            .unwrap()
            .2
    }

    /// The port of a replica of the master serving `key`.
    pub fn replica_of(&self, key: &str) -> u16 {
        let slot = self.key_slot(key);
        self.slots()
            .into_iter()
            .find(|(lo, hi, _, _)| (*lo..=*hi).contains(&slot))
            .unwrap()
            .3[0]
    }

    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes.iter().find(|n| n.port == port).unwrap()
    }

    /// Waits until the replica of the master serving `key` has applied every write the master
    /// made so far.
    pub fn sync(&self, key: &str) {
        replica_caught_up(
            self.node(self.master_of(key)),
            self.node(self.replica_of(key)),
        );
    }

    /// `CLUSTER FAILOVER` on the replica of `key`'s master; waits until the cluster agrees it is
    /// the master. Returns (old master, new master).
    pub fn failover(&self, key: &str) -> (u16, u16) {
        let old = self.master_of(key);
        let new = self.replica_of(key);
        let _: () = redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query(&mut self.node(new).raw())
            .unwrap();
        self.wait_for_master(key, new);
        (old, new)
    }

    /// kill -9 of the master serving `key`; waits until its replica took over. Returns (old
    /// master, new master).
    pub fn kill_master_of(&mut self, key: &str) -> (u16, u16) {
        let old = self.master_of(key);
        let new = self.replica_of(key);
        self.nodes
            .iter_mut()
            .find(|n| n.port == old)
            .unwrap()
            .kill();
        self.wait_for_master(key, new);
        (old, new)
    }

    /// The ports of the masters, as the cluster says now.
    pub fn masters(&self) -> Vec<u16> {
        let mut masters: Vec<u16> = self.slots().iter().map(|r| r.2).collect();
        masters.sort();
        masters.dedup();
        masters
    }

    /// Moves `slot` with its keys to the master at `to` the way `redis-cli --cluster reshard`
    /// does (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE on every master) and waits until the
    /// cluster agrees.
    pub fn move_slot(&self, slot: u16, to: u16) {
        let from = self
            .slots()
            .into_iter()
            .find(|(lo, hi, _, _)| (*lo..=*hi).contains(&slot))
            .unwrap()
            .2;
        assert_ne!(from, to, "slot {slot} is already on 127.0.0.1:{to}");
        let id = |port: u16| -> String {
            redis::cmd("CLUSTER")
                .arg("MYID")
                .query(&mut self.node(port).raw())
                .unwrap()
        };
        let (from_id, to_id) = (id(from), id(to));
        let setslot = |port: u16, how: &str, node: &str| {
            let _: () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(how)
                .arg(node)
                .query(&mut self.node(port).raw())
                .unwrap();
        };
        setslot(to, "IMPORTING", &from_id);
        setslot(from, "MIGRATING", &to_id);
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut self.node(from).raw())
                .unwrap();
            if keys.is_empty() {
                break;
            }
            let _: () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut self.node(from).raw())
                .unwrap();
        }
        setslot(to, "NODE", &to_id);
        setslot(from, "NODE", &to_id);
        for other in self.masters() {
            if other != from && other != to {
                setslot(other, "NODE", &to_id);
            }
        }
        self.wait_until_stable();
    }

    fn wait_for_master(&self, key: &str, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let slot = self.key_slot(key);
            let agreed = self.live().all(|n| {
                let Ok(mut c) = redis::Client::open(n.url())
                    .unwrap()
                    .get_connection_with_timeout(Duration::from_secs(1))
                else {
                    return false;
                };
                slot_map(&mut c).is_ok_and(|m| {
                    m.iter()
                        .any(|(lo, hi, master, _)| (*lo..=*hi).contains(&slot) && *master == port)
                })
            });
            if agreed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "127.0.0.1:{port} did not become the master of '{key}'"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One slot range of `CLUSTER SLOTS`: first slot, last slot, master port, replica ports.
pub type SlotRange = (u16, u16, u16, Vec<u16>);

/// `CLUSTER SLOTS` of one node, sorted.
pub fn slot_map(conn: &mut redis::Connection) -> redis::RedisResult<Vec<SlotRange>> {
    let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER").arg("SLOTS").query(conn)?;
    let mut out = Vec::new();
    for r in ranges {
        let int = |v: &redis::Value| -> u16 {
            match v {
                redis::Value::Int(i) => *i as u16,
                _ => 0,
            }
        };
        let port = |v: &redis::Value| -> u16 {
            match v {
                redis::Value::Array(node) => int(&node[1]),
                _ => 0,
            }
        };
        out.push((
            int(&r[0]),
            int(&r[1]),
            port(&r[2]),
            r[3..].iter().map(port).collect(),
        ));
    }
    out.sort();
    Ok(out)
}
