//! A Redis Cluster on loopback ports (three masters, a replica each), its slot map, and the
//! names and leases of locks on its masters.

// Test helpers fail loudly: an unwrap here is a failed test, not a library panic.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use super::server::{RedisServer, redis_cli_bin, replica_caught_up, replicas_acknowledged};

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

    /// kill -9 of the node at `port`.
    pub fn kill_node(&mut self, port: u16) {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .unwrap()
            .kill();
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

    /// Waits until every live node says `port` serves `key` as its master.
    pub fn wait_for_master(&self, key: &str, port: u16) {
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
