//! The failover cases Sentinel and Cluster share, run over a [`Topology`]: what either deployment
//! offers such a case (the node that takes over from a key's master, a graceful failover, a
//! kill -9 of the master).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ClientOptions};
use redis::Commands;

use super::{Cluster, SentinelGroup};

/// A deployment whose masters fail over: a [`SentinelGroup`] or a [`Cluster`].
pub trait Topology {
    /// What a client connects to.
    fn url(&self) -> String;
    /// Waits until the node that would take over from `key`'s master has every write so far.
    fn sync(&self, key: &str);
    /// A connection to the node that would take over from `key`'s master, on which `FLUSHALL`
    /// runs (a replica made writable) and `key` can be read.
    fn writable_successor(&self, key: &str) -> redis::Connection;
    /// Fails `key`'s master over gracefully; (old master, new master) once the new one serves.
    fn failover(&self, key: &str) -> (u16, u16);
    /// kill -9 of `key`'s master, returning at once: (its port, its successor's).
    fn kill_master(&mut self, key: &str) -> (u16, u16);
    /// Waits until `port` serves `key` as its master.
    fn wait_for_master(&self, key: &str, port: u16);
    /// The hash at `key` on its master now.
    fn hash_on_master(&self, key: &str) -> HashMap<String, i64>;
}

impl Topology for SentinelGroup {
    fn url(&self) -> String {
        SentinelGroup::url(self)
    }
    fn sync(&self, _: &str) {
        SentinelGroup::sync(self)
    }
    fn writable_successor(&self, _: &str) -> redis::Connection {
        let mut raw = self.replica().raw();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("replica-read-only")
            .arg("no")
            .query(&mut raw)
            .unwrap();
        raw
    }
    fn failover(&self, _: &str) -> (u16, u16) {
        let before = self.master_port();
        (before, SentinelGroup::failover(self))
    }
    fn kill_master(&mut self, _: &str) -> (u16, u16) {
        let (before, successor) = (self.master_port(), self.replica().port);
        let index = self.nodes.iter().position(|n| n.port == before).unwrap();
        self.nodes[index].kill();
        (before, successor)
    }
    fn wait_for_master(&self, _: &str, port: u16) {
        self.wait_until_master(port);
    }
    fn hash_on_master(&self, key: &str) -> HashMap<String, i64> {
        self.master().raw().hgetall(key).unwrap()
    }
}

impl Topology for Cluster {
    fn url(&self) -> String {
        Cluster::url(self)
    }
    fn sync(&self, key: &str) {
        Cluster::sync(self, key)
    }
    fn writable_successor(&self, key: &str) -> redis::Connection {
        // A cluster replica redirects keyed writes (FLUSHALL names no key) and, until READONLY,
        // keyed reads.
        let mut raw = self.node(self.replica_of(key)).raw();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("replica-read-only")
            .arg("no")
            .query(&mut raw)
            .unwrap();
        let _: () = redis::cmd("READONLY").query(&mut raw).unwrap();
        raw
    }
    fn failover(&self, key: &str) -> (u16, u16) {
        Cluster::failover(self, key)
    }
    fn kill_master(&mut self, key: &str) -> (u16, u16) {
        let (before, successor) = (self.master_of(key), self.replica_of(key));
        self.kill_node(before);
        (before, successor)
    }
    fn wait_for_master(&self, key: &str, port: u16) {
        Cluster::wait_for_master(self, key, port)
    }
    fn hash_on_master(&self, key: &str) -> HashMap<String, i64> {
        self.node(self.master_of(key)).raw().hgetall(key).unwrap()
    }
}

/// A holder's client and a waiter's, both with `options`.
async fn two_clients(topology: &impl Topology, options: ClientOptions) -> [Client; 2] {
    let url = topology.url();
    let holder = Client::connect_with(&url, options.clone()).await.unwrap();
    [holder, Client::connect_with(&url, options).await.unwrap()]
}

/// The two clients of [`a_failover_keeps_replicated_holds_and_reports_the_others_lost`], with
/// the master it failed over from, for what a topology checks after it.
pub struct FailedOver {
    pub holder: Client,
    pub other: Client,
    pub before: u16,
}

/// A graceful failover while locks are held and a waiter waits: the lock that reached the
/// successor stays held (its holder renews it on the new master, the waiter stays out), the
/// lock that did not is reported lost, and the waiter acquires once the holder releases on the
/// new master. Both names share a hash tag, so one failover moves both on a cluster.
pub async fn a_failover_keeps_replicated_holds_and_reports_the_others_lost(
    topology: &impl Topology,
) -> FailedOver {
    let (kept_name, dropped_name) = ("{failover}:kept", "{failover}:dropped");
    // A lease that outlasts the failover (renewed every 2 s): a hold is lost only because the
    // new master does not have it.
    let [holder, other] = two_clients(
        topology,
        ClientOptions::new()
            .watchdog_timeout(Duration::from_secs(6))
            .connect_timeout(Duration::from_secs(8)),
    )
    .await;
    let reasons = Arc::new(Mutex::new(Vec::new()));
    let seen = reasons.clone();
    holder.on_lock_lost(move |lost| {
        seen.lock()
            .unwrap()
            .push(format!("{}: {}", lost.name, lost.reason))
    });

    // The successor loses the first lock: as if the master failed before replicating it.
    let dropped = holder.lock(dropped_name).unwrap().acquire().await.unwrap();
    topology.sync(dropped_name);
    let mut successor = topology.writable_successor(kept_name);
    let _: () = redis::cmd("FLUSHALL").query(&mut successor).unwrap();
    let kept = holder.lock(kept_name).unwrap().acquire().await.unwrap();
    topology.sync(kept_name);
    let on_successor: HashMap<String, i64> = successor.hgetall(kept_name).unwrap();
    assert_eq!(on_successor.len(), 1, "{on_successor:?}");
    let gone: i64 = successor.exists(dropped_name).unwrap();
    assert_eq!(gone, 0);

    let waiter = {
        let lock = other.lock(kept_name).unwrap();
        tokio::spawn(async move {
            lock.acquire_with(AcquireOptions::new().wait(Duration::from_secs(30)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (before, after) = topology.failover(kept_name);
    assert_ne!(before, after);

    tokio::time::timeout(Duration::from_secs(10), dropped.lost().cancelled())
        .await
        .expect("the hold that never reached the new master is reported lost");
    // Several renewal periods on the new master: the replicated hold is still ours, and the
    // waiter is still out.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!kept.is_lost(), "{:?}", reasons.lock().unwrap());
    assert!(
        !waiter.is_finished(),
        "the waiter got in while the lock was held"
    );
    let fields = topology.hash_on_master(kept_name);
    assert_eq!(fields.len(), 1, "{fields:?}");

    kept.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter acquires after the release on the new master")
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();
    FailedOver {
        holder,
        other,
        before,
    }
}

/// kill -9 of the master while a lock is held and a waiter waits: a call during the outage ends
/// within its limits (none hangs), the waiter keeps waiting through it, on a subscription that
/// follows the lock to the new master (a 60 s lease outlasts its wait, so only the release
/// message lets it in), and acquires there once the lock is released.
pub async fn killing_the_master_is_survived_by_waiters(topology: &mut impl Topology) {
    let name = "kill:lock";
    let [holder, other] = two_clients(
        topology,
        ClientOptions::new()
            .connect_timeout(Duration::from_secs(20))
            .response_timeout(Duration::from_secs(1)),
    )
    .await;
    let held = holder
        .lock(name)
        .unwrap()
        .acquire_with(AcquireOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap();
    topology.sync(name);
    let waiter = {
        let lock = other.lock(name).unwrap();
        tokio::spawn(async move {
            lock.acquire_with(AcquireOptions::new().wait(Duration::from_secs(40)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    let (_, successor) = topology.kill_master(name);
    // A call during the outage, to the same master (the hash tag is the lock's name).
    let probe = Instant::now();
    let _ = holder
        .lock("{kill:lock}:probe")
        .unwrap()
        .try_acquire()
        .await;
    assert!(
        probe.elapsed() < Duration::from_secs(5),
        "a call during the outage took {:?}",
        probe.elapsed()
    );
    topology.wait_for_master(name, successor);

    // Long enough for the waiter to be waiting again, on the new master.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter got in while the lock was held"
    );
    // The release reaches the new master (retrying until the client has followed it).
    let deadline = Instant::now() + Duration::from_secs(15);
    let lock = holder.lock(name).unwrap();
    while let Err(e) = lock.release_as(held.owner()).await {
        assert!(
            Instant::now() < deadline,
            "the release never reached the new master: {e}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let guard = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("the waiter acquires on the new master")
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(40));
    drop(held);
    holder.close().await;
    other.close().await;
}
