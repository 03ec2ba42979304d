//! A Sentinel group on loopback ports: a master, a replica and three sentinels.

// Test helpers fail loudly: an unwrap here is a failed test, not a library panic.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::server::{
    RedisServer, await_listening, free_port, reap_at_exit, redis_server_bin, replica_caught_up,
    replicas_acknowledged,
};

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
        self.wait_for(|now| now != before)
    }

    /// Waits until every sentinel names the node at `port` the master and it serves writes.
    pub fn wait_until_master(&self, port: u16) {
        self.wait_for(|now| now == port);
    }

    /// Waits until every sentinel names the same master, one that `wanted` accepts, and it
    /// serves writes; its port.
    fn wait_for(&self, wanted: impl Fn(u16) -> bool) -> u16 {
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
                && wanted(*now)
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
