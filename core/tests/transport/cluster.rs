//! On a Redis Cluster: a `redis+cluster://` client sends every object's scripts to the master
//! owning its slot, waiters use sharded pub/sub (Redis 7) on the node owning the channel, the
//! watchdog renews locks spread over every slot, names that would split an object's keys over
//! two slots are refused, and a failover (`CLUSTER FAILOVER`, kill -9 of a master) is followed:
//! waiters keep waiting and acquire on the new master, a holder whose lock reached the replica
//! keeps it, a holder whose lock did not is told it is lost, and no call hangs.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind};
use redis::Commands;
use support::Cluster;

async fn client_at(url: &str, watchdog: Duration) -> Client {
    let options = ClientOptions::new()
        .watchdog_timeout(watchdog)
        .connect_timeout(Duration::from_secs(8));
    Client::connect_with(url, options).await.unwrap()
}

async fn client(cluster: &Cluster, watchdog: Duration) -> Client {
    client_at(&cluster.url(), watchdog).await
}

/// Everything that does not fail over shares one cluster.
fn shared() -> &'static Cluster {
    static CLUSTER: std::sync::OnceLock<Cluster> = std::sync::OnceLock::new();
    CLUSTER.get_or_init(Cluster::start)
}

fn hash_on_its_master(cluster: &Cluster, key: &str) -> HashMap<String, i64> {
    cluster
        .node(cluster.master_of(key))
        .raw()
        .hgetall(key)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_locks_land_on_the_masters_owning_their_slots() {
    let cluster = shared();
    let client = client(cluster, Duration::from_secs(30)).await;
    assert!(
        client.address().contains("cluster via"),
        "{}",
        client.address()
    );
    let names: Vec<String> = (0..50).map(|i| format!("cluster:spread:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name).unwrap().acquire().await.unwrap());
    }
    let mut masters = HashSet::new();
    let mut slots = HashSet::new();
    for name in &names {
        assert_eq!(hash_on_its_master(cluster, name).len(), 1, "{name}");
        masters.insert(cluster.master_of(name));
        slots.insert(cluster.key_slot(name));
    }
    assert_eq!(masters.len(), 3, "the names cover every master");
    assert_eq!(slots.len(), 50, "fifty different slots");
    for guard in guards {
        guard.release().await.unwrap();
    }
    for name in &names {
        assert!(hash_on_its_master(cluster, name).is_empty(), "{name}");
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_exclude_each_other_exactly() {
    let cluster = shared();
    let clients = [
        client(cluster, Duration::from_secs(30)).await,
        client(cluster, Duration::from_secs(30)).await,
    ];
    support::eight_workers_exclude_each_other(&clients, "cluster:counter").await;
    for c in clients {
        c.close().await;
    }
}

/// How many sharded (`SSUBSCRIBE`) and plain subscribers `channel` has on the master owning it.
fn subscribers(cluster: &Cluster, channel: &str) -> (i64, i64) {
    let mut conn = cluster.node(cluster.master_of(channel)).raw();
    // No sharded subscriber where there is no sharded pub/sub (Redis 6.2).
    let sharded: (String, i64) = match cluster.takes_sharded_pubsub() {
        true => redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(channel)
            .query(&mut conn)
            .unwrap(),
        false => (channel.to_owned(), 0),
    };
    // Plain subscriptions may sit on any node (a PUBLISH reaches every node).
    let plain: i64 = cluster
        .slots()
        .iter()
        .map(|(_, _, master, _)| {
            let (_, n): (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(channel)
                .query(&mut cluster.node(*master).raw())
                .unwrap();
            n
        })
        .sum();
    (sharded.1, plain)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_of_every_kind_through_sharded_pubsub_where_there_is_one() {
    let cluster = shared();
    let a = client(cluster, Duration::from_secs(30)).await;
    let b = client(cluster, Duration::from_secs(30)).await;
    // Found at connect (the default sharded_pubsub=auto), as Redisson's default (AUTO) does.
    let sharded = cluster.takes_sharded_pubsub();
    support::wake::release_wakes_every_kind(&a, &b, "cluster:wake", |channel| {
        match sharded {
            // Redis 7 and later on every node: the waiter subscribed with SSUBSCRIBE on the
            // node owning the channel's slot.
            true => assert_eq!(subscribers(cluster, channel), (1, 0)),
            // Redis 6.2 (no SSUBSCRIBE; `./dev matrix` runs this there): plain SUBSCRIBE.
            false => assert_eq!(subscribers(cluster, channel), (0, 1)),
        }
    })
    .await;
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_pubsub_when_asked_wakes_waiters_too() {
    let cluster = shared();
    let url = format!("{}?sharded_pubsub=off", cluster.url());
    let a = client_at(&url, Duration::from_secs(30)).await;
    let b = client_at(&url, Duration::from_secs(30)).await;
    let held = a
        .lock("cluster:plain")
        .unwrap()
        .acquire_with(AcquireOptions::new().lease(Duration::from_secs(120)))
        .await
        .unwrap();
    let waiter = {
        let lock = b.lock("cluster:plain").unwrap();
        tokio::spawn(async move {
            lock.acquire_with(AcquireOptions::new().wait(Duration::from_secs(20)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        subscribers(cluster, "redisson_lock__channel:{cluster:plain}"),
        (0, 1)
    );
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_locks_in_every_slot_and_reports_a_deleted_one_lost() {
    let cluster = shared();
    let client = client(cluster, Duration::from_millis(900)).await;
    let names: Vec<String> = (0..50).map(|i| format!("cluster:watchdog:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name).unwrap().acquire().await.unwrap());
    }
    let rw = client.read_write_lock("cluster:watchdog:rw").unwrap();
    let read = rw.read().acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for (name, guard) in names.iter().zip(&guards) {
        assert!(!guard.is_lost(), "{name}");
        let pttl: i64 = cluster
            .node(cluster.master_of(name))
            .raw()
            .pttl(name)
            .unwrap();
        assert!(pttl > 0, "{name} renewed past its first lease: pttl {pttl}");
    }
    assert!(!read.is_lost());

    let victim = &names[17];
    let _: () = cluster
        .node(cluster.master_of(victim))
        .raw()
        .del(victim)
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), guards[17].lost().cancelled())
        .await
        .expect("the renewal reports the lock lost");
    assert!(guards.iter().filter(|g| g.is_lost()).count() == 1);
    read.release().await.unwrap();
    client.close().await;
}

/// The `EVAL` and `EVALSHA` calls each master has served since its counters were reset.
fn script_calls(cluster: &Cluster, master: u16) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut cluster.node(master).raw())
        .unwrap();
    support::scripts_in_commandstats(&stats)
}

/// Where the nodes run a script with the cross-slot flag (Redis 7 and later) the watchdog sends
/// one script per master, kind and period; where they cannot (Redis 6.2, found when the client
/// connects; `./dev matrix` runs this there), one per slot, and every hold is renewed all the
/// same. Either way a hold whose slot moves is renewed on its new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_sends_one_script_per_master_or_per_slot_per_period_and_follows_a_moved_slot()
{
    // Its own cluster: the test counts every script the masters run, and moves a slot.
    let cluster = Cluster::start();
    let per_master = cluster.takes_cross_slot_scripts();
    let watchdog = Duration::from_millis(900);
    let period = watchdog / 3;
    let reset_stats = || {
        for m in cluster.masters() {
            let _: () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query(&mut cluster.node(m).raw())
                .unwrap();
        }
    };
    let client = client(&cluster, watchdog).await;
    // 150 locks, 6 read holds and 6 permits: about 54 holds per master, in many slots each.
    let mut guards = Vec::new();
    let mut renewed_keys = Vec::new();
    for i in 0..150 {
        let name = format!("pernode:{i}");
        guards.push(client.lock(&name).unwrap().acquire().await.unwrap());
        renewed_keys.push(name);
    }
    let mut reads = Vec::new();
    let mut permits = Vec::new();
    for i in 0..6 {
        let rw = client.read_write_lock(&format!("pernode:rw:{i}")).unwrap();
        reads.push(rw.read().acquire().await.unwrap());
        renewed_keys.push(format!("pernode:rw:{i}"));
        let semaphore = client
            .permit_expirable_semaphore(&format!("pernode:pes:{i}"))
            .unwrap();
        assert!(semaphore.try_set_permits(1).await.unwrap());
        permits.push(semaphore.acquire().await.unwrap());
        renewed_keys.push(format!("{{pernode:pes:{i}}}:timeout"));
    }
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    reset_stats();
    let started = Instant::now();
    tokio::time::sleep(period * 5).await;
    let counts: Vec<u64> = masters.iter().map(|m| script_calls(&cluster, *m)).collect();
    // Every renewal round that can have started while counting, three kinds of hold per master.
    let rounds = (started.elapsed().as_millis() / period.as_millis()) as u64 + 2;
    for (m, calls) in masters.iter().zip(&counts) {
        if per_master {
            assert!(
                *calls >= 3,
                "master {m} ran {calls} renewal script(s): no renewal round"
            );
            assert!(
                *calls <= 3 * rounds,
                "master {m} ran {calls} scripts in {rounds} renewal rounds: not one per kind per \
                 master per round (one per slot would be about 50 per round)"
            );
        } else {
            // One round at least, a script per slot of the master's holds (more than one per
            // kind per round could add up to in all the rounds counted).
            let slots: HashSet<u16> = renewed_keys
                .iter()
                .filter(|key| cluster.master_of(key) == *m)
                .map(|key| cluster.key_slot(key))
                .collect();
            let slots = slots.len() as u64;
            assert!(
                *calls >= slots && slots > 3 * rounds,
                "master {m} ran {calls} scripts for holds in {slots} slots: not one per slot"
            );
            // And no more than a script per slot and kind in each round counted: a renewal that
            // sends its scripts again within a round shows here.
            assert!(
                *calls <= 3 * slots * rounds,
                "master {m} ran {calls} scripts in {rounds} rounds for holds in {slots} slots: \
                 more than one per slot and kind per round"
            );
        }
    }
    assert!(guards.iter().all(|g| !g.is_lost()));

    // A slot moves under a held lock, a held read lock and a held permit: each is still
    // renewed (on the master that has it now) and none is reported lost.
    let moved = ["pernode:7", "pernode:rw:2", "{pernode:pes:3}:timeout"];
    for key in moved {
        let from = cluster.master_of(key);
        let to = *masters.iter().find(|m| **m != from).unwrap();
        cluster.move_slot(cluster.key_slot(key), to);
        assert_eq!(cluster.master_of(key), to);
    }
    tokio::time::sleep(watchdog * 2).await;
    for key in ["pernode:7", "pernode:rw:2"] {
        let pttl: i64 = cluster
            .node(cluster.master_of(key))
            .raw()
            .pttl(key)
            .unwrap();
        assert!(pttl > 0, "{key} renewed on its new master: pttl {pttl}");
    }
    assert!(guards.iter().all(|g| !g.is_lost()), "no lock reported lost");
    assert!(
        reads.iter().all(|g| !g.is_lost()),
        "no read hold reported lost"
    );
    assert!(
        permits.iter().all(|p| !p.lost().is_cancelled()),
        "no permit reported lost"
    );

    // A read hold and a permit whose keys are deleted are reported lost by the per-node
    // renewal, like a lock.
    for key in ["pernode:rw:4", "{pernode:pes:5}:timeout"] {
        let _: () = cluster.node(cluster.master_of(key)).raw().del(key).unwrap();
    }
    tokio::time::timeout(watchdog * 3, reads[4].lost().cancelled())
        .await
        .expect("the deleted read hold is reported lost");
    tokio::time::timeout(watchdog * 3, permits[5].lost().cancelled())
        .await
        .expect("the deleted permit is reported lost");
    assert_eq!(reads.iter().filter(|g| g.is_lost()).count(), 1);
    assert_eq!(
        permits.iter().filter(|p| p.lost().is_cancelled()).count(),
        1
    );
    let reads: Vec<_> = reads
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 4)
        .map(|(_, r)| r)
        .collect();
    let permits: Vec<_> = permits
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 5)
        .map(|(_, p)| p)
        .collect();
    for guard in guards {
        guard.release().await.unwrap();
    }
    for read in reads {
        read.release().await.unwrap();
    }
    for permit in permits {
        permit.release().await.unwrap();
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_replicas_waits_on_the_master_of_each_slot() {
    let cluster = shared();
    let options = ClientOptions::new()
        .wait_for_replicas(1, Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(8));
    let client = Client::connect_with(&cluster.url(), options).await.unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("cluster:synced:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name).unwrap().acquire().await.unwrap());
        // Already on the replica of the master that serves the name's slot.
        let mut replica = cluster.node(cluster.replica_of(name)).raw();
        let _: () = redis::cmd("READONLY").query(&mut replica).unwrap();
        let on_replica: HashMap<String, i64> = replica.hgetall(name).unwrap();
        assert_eq!(
            on_replica.len(),
            1,
            "{name} is on its replica when acquire returns"
        );
    }
    let masters: HashSet<u16> = names.iter().map(|n| cluster.master_of(n)).collect();
    assert_eq!(masters.len(), 3, "the names are spread over every master");
    for guard in guards {
        guard.release().await.unwrap();
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_would_split_an_object_over_two_slots_are_refused() {
    let cluster = shared();
    let client = client(cluster, Duration::from_secs(30)).await;
    for name in ["a{b", "a{}b", "a}b"] {
        let err = client.lock(name).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("hash slots"), "{err}");
        assert!(err.to_string().contains(name), "{err}");
        assert!(client.semaphore(name).is_err());
    }
    // Redisson's latch channel always adds braces: a name with its own tag splits there.
    assert!(client.count_down_latch("{orders}:7").is_err());
    // A complete hash tag keeps every sibling with the name.
    let guard = client
        .fair_lock("{orders}:42")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    guard.release().await.unwrap();
    // The same names are fine on a single server.
    let single = support::RedisServer::start();
    let plain = Client::connect(&single.url()).await.unwrap();
    plain.lock("a{b").unwrap();
    plain.close().await;

    let err = Client::connect("redis+cluster://127.0.0.1:1/2")
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let options = ClientOptions::new().connect_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err = Client::connect_with("redis+cluster://127.0.0.1:1", options)
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    client.close().await;
}

/// `CLUSTER FAILOVER` while locks are held and a waiter waits (support's shared case), then a
/// failback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_failover_keeps_replicated_holds_and_reports_the_others_lost() {
    let cluster = Cluster::start();
    let support::FailedOver {
        holder,
        other,
        before,
    } = support::a_failover_keeps_replicated_holds_and_reports_the_others_lost(&cluster).await;

    // A waiter that started waiting before the failover is woken by a release after it: its
    // subscription followed the slot to the new master (a 60 s lease outlasts the wait, so
    // nothing but the message lets it in).
    let held = holder
        .lock("{failover}:wake")
        .unwrap()
        .acquire_with(AcquireOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap();
    let waiter = {
        let lock = other.lock("{failover}:wake").unwrap();
        tokio::spawn(async move {
            lock.acquire_with(AcquireOptions::new().wait(Duration::from_secs(30)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_, back) = cluster.failover("{failover}:wake");
    assert_eq!(back, before, "failed back to the first master");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!waiter.is_finished());
    held.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the release's message reaches the waiter")
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();
    holder.close().await;
    other.close().await;
}

/// kill -9 of a master (support's shared case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_master_is_survived_by_waiters() {
    support::killing_the_master_is_survived_by_waiters(&mut Cluster::start()).await;
}
