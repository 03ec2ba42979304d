//! Redis Cluster: the `redis+cluster://` URL, hash slots, and which pub/sub flavour to use.
//!
//! Commands and subscriptions go through redis-rs's cluster connection, which learns the slot
//! map from the seed nodes, sends each command to the master owning its first key, follows
//! `MOVED` and `ASK`, refreshes the map when a reply or a lost connection says it changed, and
//! subscribes again (on the node that now owns the channel's slot) after a node moved or came
//! back. What is ours: every script's keys must share one slot (checked before anything is
//! sent, with the name to blame), the waiters' channels use sharded pub/sub exactly when
//! Redisson does, and a caller on its own thread or event loop makes its round trip over a lane
//! to the master owning the slot ([`NodeLanes`]) rather than through the cluster connection's
//! tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use redis::{ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::error::{Error, Result};
pub(crate) mod links;
pub(crate) mod map;

use crate::transport::SlotRange;
use crate::transport::endpoint::{UrlForm, host_port, split_url};
use crate::transport::lane::LanePool;
use crate::util::lock;

/// The number of hash slots of a Redis Cluster.
const SLOTS: u16 = 16384;

/// The default port of a cluster node.
const DEFAULT_PORT: u16 = 6379;

/// The cluster URL form, `redis+cluster://` (or `rediss+cluster://`).
pub(crate) const URL: UrlForm = UrlForm {
    plain: "redis+cluster://",
    tls: "rediss+cluster://",
    kind: "cluster",
    written: "redis+cluster://[user:password@]host:port[,host:port…][?sharded_pubsub=auto|on|off] \
              (or rediss+cluster:// for TLS)",
};

/// Whether waiters use sharded pub/sub (`SSUBSCRIBE`, and `SPUBLISH` in scripts) or the plain
/// kind. Every client of a deployment must use the same: a sharded message never reaches a plain
/// subscriber, nor the reverse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sharding {
    /// Sharded when the cluster supports it (Redis 7 and later), as Redisson's default
    /// (`shardedSubscriptionMode = AUTO`) decides.
    Auto,
    /// Always sharded (Redisson's `ON`).
    On,
    /// Never sharded (Redisson's `OFF`).
    Off,
}

/// A `redis+cluster://` URL, parsed.
#[derive(Clone)]
pub(crate) struct ClusterSpec {
    /// The seed nodes, `host:port`: any reachable one tells the client the rest.
    pub(crate) seeds: Vec<(String, u16)>,
    /// TLS to every node (`rediss+cluster://`).
    pub(crate) tls: bool,
    /// User and password for every node (the URL's user info).
    pub(crate) node: RedisConnectionInfo,
    pub(crate) sharding: Sharding,
}

impl ClusterSpec {
    /// Parses `redis+cluster://…` or `rediss+cluster://…`; `shown` is the URL without its
    /// password, for messages.
    pub(crate) fn parse(url: &str, shown: &str) -> Result<Self> {
        let parts = split_url(url, shown, &URL)?;
        match parts.path.trim_matches('/') {
            "" | "0" => {}
            other => {
                return Err(parts.bad(format!(
                    "selects the database '{other}', but a Redis Cluster has only database 0"
                )));
            }
        }
        let seeds = parts.hosts(DEFAULT_PORT, "seed node")?;
        let node = parts.credentials()?;
        let mut sharding = Sharding::Auto;
        for pair in parts.pairs("sharded_pubsub=auto|on|off") {
            match pair? {
                ("sharded_pubsub", "auto") => sharding = Sharding::Auto,
                ("sharded_pubsub", "on") => sharding = Sharding::On,
                ("sharded_pubsub", "off") => sharding = Sharding::Off,
                ("sharded_pubsub", other) => {
                    return Err(parts.bad(format!(
                        "sets sharded_pubsub to '{other}' (auto, on or off are the choices)"
                    )));
                }
                (other, _) => {
                    return Err(parts.bad(format!(
                        "has the unknown parameter '{other}' (sharded_pubsub is the one there is)"
                    )));
                }
            }
        }
        Ok(ClusterSpec {
            seeds,
            tls: parts.tls,
            node,
            sharding,
        })
    }

    /// `cluster via host:port,…`, for messages.
    pub(crate) fn describe(&self) -> String {
        let seeds = self
            .seeds
            .iter()
            .map(|(h, p)| host_port(h, *p))
            .collect::<Vec<_>>()
            .join(",");
        format!("cluster via {seeds}")
    }

    /// The connection info of every seed node.
    pub(crate) fn seed_infos(&self) -> Result<Vec<ConnectionInfo>> {
        self.seeds
            .iter()
            .map(|(host, port)| {
                self.node_info(host, *port).map_err(|e| {
                    Error::invalid(format!("bad seed node address '{host}:{port}': {e}"))
                })
            })
            .collect()
    }

    /// The connection info of the node at `host`:`port` (over TLS for `rediss+cluster://`,
    /// with the URL's user and password).
    pub(crate) fn node_info(&self, host: &str, port: u16) -> redis::RedisResult<ConnectionInfo> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let info = format!("{scheme}://{}/", host_port(host, port)).into_connection_info()?;
        Ok(info.set_redis_settings(self.node.clone()))
    }
}

/// How long a slot map is used before it is read again (in the background, while calls go on
/// with the one at hand). A map gone stale without a redirect (a master that died: its lanes
/// fail to connect, and the calls take the routed way) is thus replaced soon.
const MAP_MAX_AGE: Duration = Duration::from_secs(5);

/// A cluster's slot ranges as `CLUSTER SLOTS` read them, sorted, each with its master's lane
/// pool, and when they were read.
struct SlotMap {
    ranges: Vec<(u16, u16, Option<Arc<LanePool>>)>,
    read: Instant,
}

/// The lanes of a cluster's command connection: one pool ([`LanePool`]) per master, found by the
/// slot a script's keys hash to.
///
/// The routed way (redis-rs's cluster connection) hands each command to a routing task and then
/// to the node connection's driver, on core's runtime, and the reply back the same way: ten or
/// more context switches per acquire + release pair. A lane is the caller's own round trip, as
/// on one server. Which master serves a slot comes from `CLUSTER SLOTS`, read in the background
/// (the first calls, and those made while it is read, take the routed way). A lane's reply that
/// says the script did not run there ([`is_redirect`]: `MOVED`, `ASK`, a replica's `READONLY`,
/// …) drops the map, and the call is sent the routed way, which follows the redirect. Everything
/// sent the routed way first waits for an overdue lane reply of the master it may go to, as on
/// one server ([`super::lane`]); not for those of the other masters, so that one master that
/// stopped answering holds back no command for the others.
pub(crate) struct NodeLanes {
    /// User and password for every node.
    node: RedisConnectionInfo,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// The slot map at hand; `None` until read, and after a redirect.
    map: ArcSwapOption<SlotMap>,
    /// Whether a read of the map is under way (one at a time).
    reading: AtomicBool,
    /// The pools of the masters in the map at hand, by address.
    pools: Mutex<HashMap<(String, u16), Arc<LanePool>>>,
    /// The connections' name (see [`crate::naming`]).
    name: Arc<str>,
}

impl NodeLanes {
    /// The lanes of a cluster reached as `spec` says; `None` over TLS (lanes are plain sockets).
    pub(crate) fn new(
        spec: &ClusterSpec,
        connect_timeout: Duration,
        response_timeout: Duration,
        name: Arc<str>,
    ) -> Option<Self> {
        (!spec.tls).then(|| NodeLanes {
            node: spec.node.clone(),
            name,
            connect_timeout,
            response_timeout,
            map: ArcSwapOption::empty(),
            reading: AtomicBool::new(false),
            pools: Mutex::new(HashMap::new()),
        })
    }

    /// The pool of the master serving `slot`, as the map at hand says; `None` without a map or
    /// a master for the slot. Also tells whether the map is to be read (missing or old). Called
    /// on every lane call on a cluster: it takes no lock and allocates nothing.
    pub(crate) fn for_slot(&self, slot: u16) -> (Option<Arc<LanePool>>, bool) {
        let map = self.map.load();
        let Some(map) = map.as_deref() else {
            return (None, true);
        };
        let stale = map.read.elapsed() >= MAP_MAX_AGE;
        // Sorted, without overlaps: the first range not ending before `slot`.
        let at = map.ranges.partition_point(|(_, last, _)| *last < slot);
        match map.ranges.get(at) {
            Some((first, _, pool)) if *first <= slot => (pool.clone(), stale),
            // No master serves the slot in this map: read it again.
            _ => (None, true),
        }
    }

    /// Which master serves `slot` in the map at hand, as the id of its pool (to tell the
    /// masters apart); `None` without a map or a master for the slot.
    pub(crate) fn master_id(&self, slot: u16) -> Option<u64> {
        self.for_slot(slot).0.map(|pool| pool.id())
    }

    /// Whether the caller is to read the map now (no other read is under way); it then calls
    /// [`NodeLanes::set_map`] with what it read.
    pub(crate) fn begin_read(&self) -> bool {
        !self.reading.swap(true, Ordering::AcqRel)
    }

    /// The map read (`None`: the read failed, the next call asks again). Each master gets its
    /// pool (the one it had, or a new one, which opens lanes when first used); pools of nodes
    /// that serve no slot any more are dropped (closing their idle lanes; a lane whose reply is
    /// overdue is watched to its end on its own).
    pub(crate) fn set_map(&self, ranges: Option<Vec<SlotRange>>) {
        if let Some(ranges) = ranges.filter(|r| !r.is_empty()) {
            let mut pools = lock(&self.pools);
            pools.retain(|address, _| ranges.iter().any(|(_, _, master)| master == address));
            let mut ranges: Vec<(u16, u16, Option<Arc<LanePool>>)> = ranges
                .into_iter()
                .map(|(first, last, master)| {
                    let pool = match pools.get(&master) {
                        Some(pool) => Some(pool.clone()),
                        None => self.pool_for(&master).inspect(|pool| {
                            pools.insert(master, pool.clone());
                        }),
                    };
                    (first, last, pool)
                })
                .collect();
            drop(pools);
            ranges.sort_unstable_by_key(|(first, _, _)| *first);
            self.map.store(Some(Arc::new(SlotMap {
                ranges,
                read: Instant::now(),
            })));
        }
        self.reading.store(false, Ordering::Release);
    }

    /// A new pool for the master at `(host, port)`.
    fn pool_for(&self, (host, port): &(String, u16)) -> Option<Arc<LanePool>> {
        let info = format!("redis://{}/", host_port(host, *port))
            .into_connection_info()
            .ok()?
            .set_redis_settings(self.node.clone());
        LanePool::new(
            &info,
            self.connect_timeout,
            self.response_timeout,
            self.name.clone(),
        )
        .map(Arc::new)
    }

    /// Forgets the map: a lane's reply said a slot is served elsewhere.
    pub(crate) fn forget_map(&self) {
        self.map.store(None);
    }

    /// Every pool.
    pub(crate) fn pools(&self) -> Vec<Arc<LanePool>> {
        let pools = lock(&self.pools);
        pools.values().cloned().collect()
    }

    /// Waits (at most `limit`) until no lane that a command for `slot` could be queued behind
    /// has a reply overdue, as every command sent the routed way does first. `None`: a command
    /// that may go to any master (or whose slot is not known), which waits for them all.
    pub(crate) async fn settled(&self, slot: Option<u16>, limit: Duration) {
        let overdue = self.overdue_for(slot);
        if overdue.is_empty() {
            return;
        }
        let deadline = Instant::now() + limit;
        for pool in overdue {
            let left = deadline.saturating_duration_since(Instant::now());
            pool.settled(left).await;
        }
    }

    /// The pools with a reply overdue that a command for `slot` waits for: the one of the
    /// master serving the slot in the map at hand. A master serving other slots cannot run a
    /// script for this one (it answers `MOVED`), and cannot give the slot away while it does not
    /// answer (moving a slot takes its `MIGRATE`). Nor is a former master waited for (a master
    /// failed over, whose request may still be in its socket): whatever it runs when it answers
    /// again is undone when it rejoins as a replica of the new master, and, if it never answers
    /// again, waiting for it held every command for the response timeout until its lane was
    /// given up ([`super::lane::ORPHAN_LIMIT`]), so that each of them failed. Without a map, or
    /// without a slot: all of them. Allocates nothing when no reply is overdue, the usual case.
    fn overdue_for(&self, slot: Option<u16>) -> Vec<Arc<LanePool>> {
        if let Some(slot) = slot
            && self.map.load().is_some()
        {
            return match self.for_slot(slot).0 {
                Some(pool) if pool.has_overdue() => vec![pool],
                _ => Vec::new(),
            };
        }
        let pools = lock(&self.pools);
        pools
            .values()
            .filter(|p| p.has_overdue())
            .cloned()
            .collect()
    }
}

/// Whether a lane's error reply means the script did not run on that node because another one
/// serves the slot, or the node cannot serve it now (the cluster is down, the node is a replica,
/// loading its data or cut off from its master): the routed way then takes the call, and
/// follows the redirect or retries as it would have.
pub(crate) fn is_redirect(e: &redis::RedisError) -> bool {
    use redis::ServerErrorKind as K;
    matches!(
        e.kind(),
        redis::ErrorKind::Server(
            K::Moved
                | K::Ask
                | K::TryAgain
                | K::ClusterDown
                | K::ReadOnly
                | K::BusyLoading
                | K::MasterDown
        )
    )
}

/// The hash slot of `key`: CRC16 (XMODEM) of its hash tag (the text between the first `{` and
/// the next `}`, when not empty) or of the whole key, modulo 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS
}

fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|b| *b == b'{')?;
    let close = key[open + 1..].iter().position(|b| *b == b'}')?;
    let tag = &key[open + 1..open + 1 + close];
    (!tag.is_empty()).then_some(tag)
}

/// CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes with.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for byte in data {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Checks that the keys and channels of object `name` (a `what`) all hash to one slot, so its
/// scripts can run on a cluster; `siblings` are its other keys and channels.
pub(crate) fn check_one_slot(name: &str, what: &str, siblings: &[String]) -> Result<()> {
    let home = slot(name.as_bytes());
    if let Some(other) = siblings.iter().find(|k| slot(k.as_bytes()) != home) {
        return Err(Error::invalid(format!(
            "the {what} name '{name}' cannot be used on a Redis Cluster: its keys would land in \
             different hash slots ('{name}' in slot {home}, '{other}' in slot {}), so no script \
             could touch them together. Use a name without braces, or one whose first '{{' opens \
             a non-empty hash tag closed by a '}}', such as '{{orders}}:42'",
            slot(other.as_bytes())
        )));
    }
    Ok(())
}

/// The slot every key of one script shares, or the error that names them.
pub(crate) fn script_slot(keys: &[&str]) -> Result<Option<u16>> {
    let Some(first) = keys.first() else {
        return Ok(None);
    };
    let home = slot(first.as_bytes());
    if let Some(other) = keys.iter().find(|k| slot(k.as_bytes()) != home) {
        return Err(Error::invalid(format!(
            "the keys '{first}' and '{other}' are in different Redis Cluster hash slots ({home} \
             and {}), so one script cannot use both; give the object a name with a hash tag",
            slot(other.as_bytes())
        )));
    }
    Ok(Some(home))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.0.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(slot(b"{}foo"), crc16(b"{}foo") % SLOTS);
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"123456789"), 0x31C3 % SLOTS);
    }

    #[test]
    fn a_slot_finds_the_pool_of_its_master_in_the_map() {
        let spec = ClusterSpec::parse("redis+cluster://127.0.0.1:7000", "s").unwrap();
        let second = Duration::from_secs(1);
        let nodes = NodeLanes::new(&spec, second, second, "t".into()).unwrap();
        assert!(matches!(nodes.for_slot(0), (None, true)), "no map yet");
        let a = ("127.0.0.1".to_owned(), 7000);
        let b = ("127.0.0.1".to_owned(), 7001);
        // As CLUSTER SLOTS may list them: in any order, with slots no master serves.
        nodes.set_map(Some(vec![
            (8192, 16383, b.clone()),
            (0, 99, a.clone()),
            (200, 8191, a.clone()),
        ]));
        let pool = |slot| nodes.for_slot(slot).0.map(|p| Arc::as_ptr(&p));
        assert!(pool(0).is_some());
        assert_eq!(pool(0), pool(99));
        assert_eq!(pool(0), pool(200));
        assert_eq!(pool(0), pool(8191));
        assert!(
            matches!(nodes.for_slot(100), (None, true)),
            "a slot no master serves"
        );
        assert!(matches!(nodes.for_slot(199), (None, true)));
        assert!(pool(8192).is_some());
        assert_ne!(pool(8192), pool(8191));
        assert_eq!(pool(8192), pool(16383));
        assert!(!nodes.for_slot(5).1, "a map just read is not stale");
        assert_eq!(nodes.pools().len(), 2);

        // A new map keeps the pool of a master still in it and drops the other one.
        let kept = pool(0);
        nodes.set_map(Some(vec![(0, 16383, a)]));
        assert_eq!(pool(16383), kept);
        assert_eq!(nodes.pools().len(), 1);
        nodes.forget_map();
        assert!(matches!(nodes.for_slot(0), (None, true)));
    }

    #[test]
    fn a_command_waits_for_the_overdue_replies_of_its_own_master_only() {
        let spec = ClusterSpec::parse("redis+cluster://127.0.0.1:7000", "s").unwrap();
        let second = Duration::from_secs(1);
        let nodes = NodeLanes::new(&spec, second, second, "t".into()).unwrap();
        let a = ("127.0.0.1".to_owned(), 7000);
        let b = ("127.0.0.1".to_owned(), 7001);
        let c = ("127.0.0.1".to_owned(), 7002);
        nodes.set_map(Some(vec![
            (0, 5460, a.clone()),
            (5461, 10922, b.clone()),
            (10923, 16383, c.clone()),
        ]));
        let pool_a = nodes.for_slot(0).0.unwrap();
        let waited = |slot: Option<u16>| -> Vec<*const LanePool> {
            let mut pools: Vec<_> = nodes.overdue_for(slot).iter().map(Arc::as_ptr).collect();
            pools.sort();
            pools
        };
        assert!(waited(None).is_empty(), "nothing overdue");

        // Master a stopped answering: commands for its slots wait for it, the others do not.
        pool_a.overdue().count.fetch_add(1, Ordering::AcqRel);
        assert_eq!(waited(Some(100)), vec![Arc::as_ptr(&pool_a)]);
        assert!(waited(Some(6000)).is_empty(), "b's slot: not behind a");
        assert!(waited(Some(16000)).is_empty(), "c's slot: not behind a");
        assert_eq!(waited(None), vec![Arc::as_ptr(&pool_a)], "slot unknown");
        nodes.forget_map();
        assert_eq!(waited(Some(6000)), vec![Arc::as_ptr(&pool_a)], "no map");

        // a failed over to d: what a may still run is undone when it rejoins as d's replica, so
        // no command waits for it any more, not even those for its former slots.
        let d = ("127.0.0.1".to_owned(), 7003);
        nodes.set_map(Some(vec![
            (0, 5460, d),
            (5461, 10922, b),
            (10923, 16383, c),
        ]));
        assert!(waited(Some(100)).is_empty(), "a's former slot, now d's");
        assert!(waited(Some(6000)).is_empty());
        assert!(waited(None).is_empty());
        assert!(nodes.pools().iter().all(|p| !Arc::ptr_eq(p, &pool_a)));
    }

    #[test]
    fn parses_cluster_urls() {
        let spec = ClusterSpec::parse(
            "redis+cluster://u:p@10.0.0.1:7000,10.0.0.2,[::1]:7002?sharded_pubsub=off",
            "shown",
        )
        .unwrap();
        assert_eq!(
            spec.seeds,
            vec![
                ("10.0.0.1".to_owned(), 7000),
                ("10.0.0.2".to_owned(), 6379),
                ("::1".to_owned(), 7002)
            ]
        );
        assert_eq!(spec.sharding, Sharding::Off);
        assert!(!spec.tls);
        assert_eq!(spec.node.password(), Some("p"));
        assert!(
            ClusterSpec::parse("rediss+cluster://h:1/0", "s")
                .unwrap()
                .tls
        );
        assert_eq!(
            spec.describe(),
            "cluster via 10.0.0.1:7000,10.0.0.2:6379,[::1]:7002"
        );
    }

    #[test]
    fn refuses_bad_cluster_urls() {
        for (url, says) in [
            ("redis+cluster://h:1/3", "only database 0"),
            (
                "redis+cluster://h:1?sharded_pubsub=maybe",
                "auto, on or off",
            ),
            ("redis+cluster://h:1?db=2", "unknown parameter 'db'"),
            ("redis+cluster://h:0", "bad port"),
            ("redis+cluster://h:1,,h:2", "empty seed node"),
        ] {
            let err = ClusterSpec::parse(url, url).err().unwrap();
            assert!(err.to_string().contains(says), "{url}: {err}");
            assert!(err.to_string().contains("redis+cluster://"), "{err}");
        }
    }

    #[test]
    fn names_that_split_their_keys_are_refused() {
        let siblings = |name: &str| {
            vec![
                crate::layout::lock_channel(name),
                crate::layout::suffix_name(name, "counter"),
            ]
        };
        for name in ["orders:42", "{orders}:42", "a{b}c{d}"] {
            check_one_slot(name, "lock", &siblings(name)).unwrap();
        }
        for name in ["a{b", "a{}b", "a}b"] {
            let err = check_one_slot(name, "lock", &siblings(name)).err().unwrap();
            assert!(err.to_string().contains("hash slots"), "{err}");
            assert!(err.to_string().contains(name), "{err}");
        }
        let err = script_slot(&["a", "b"]).err().unwrap();
        assert!(
            err.to_string()
                .contains("different Redis Cluster hash slots")
        );
        assert_eq!(script_slot(&["{a}x", "{a}y"]).unwrap(), Some(slot(b"a")));
    }
}
