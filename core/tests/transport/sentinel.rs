//! Behind Redis Sentinel: a `redis+sentinel://` client finds the master, every object works on
//! it, and a failover (`SENTINEL FAILOVER`, kill -9 of the master) is followed: waiters keep
//! waiting and acquire on the new master, a holder whose lock reached the replica keeps it, a
//! holder whose lock did not is told it is lost, and no call hangs.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use crosslock::{Client, ClientOptions, ErrorKind};
use redis::Commands;
use support::SentinelGroup;

async fn client(group: &SentinelGroup, watchdog: Duration) -> Client {
    let options = ClientOptions::new()
        .watchdog_timeout(watchdog)
        .connect_timeout(Duration::from_secs(8));
    Client::connect_with(&group.url(), options).await.unwrap()
}

/// Everything that does not fail over shares one group.
fn shared() -> &'static SentinelGroup {
    static GROUP: std::sync::OnceLock<SentinelGroup> = std::sync::OnceLock::new();
    GROUP.get_or_init(SentinelGroup::start)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finds_the_master_and_writes_there() {
    let group = shared();
    let client = client(group, Duration::from_secs(30)).await;
    assert!(
        client
            .address()
            .contains("master 'crosslock' via sentinels")
    );
    let guard = client
        .lock("sentinel:where")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let holder: std::collections::HashMap<String, i64> =
        group.master().raw().hgetall("sentinel:where").unwrap();
    assert_eq!(holder.len(), 1, "the lock is on the master: {holder:?}");
    guard.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_exclude_each_other_exactly() {
    let group = shared();
    let clients = [
        client(group, Duration::from_secs(30)).await,
        client(group, Duration::from_secs(30)).await,
    ];
    support::eight_workers_exclude_each_other(&clients, "sentinel:counter").await;
    for c in clients {
        c.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_of_every_kind() {
    let group = shared();
    let a = client(group, Duration::from_secs(30)).await;
    let b = client(group, Duration::from_secs(30)).await;
    support::wake::release_wakes_every_kind(&a, &b, "sentinel:wake", |_| {}).await;
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_and_a_deleted_lock_is_reported_lost() {
    let group = shared();
    let client = client(group, Duration::from_millis(600)).await;
    let guard = client
        .lock("sentinel:watchdog")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!guard.is_lost());
    let pttl: i64 = group.master().raw().pttl("sentinel:watchdog").unwrap();
    assert!(pttl > 0, "renewed past its first lease: pttl {pttl}");

    let _: () = group.master().raw().del("sentinel:watchdog").unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost().cancelled())
        .await
        .expect("the renewal reports the lock lost");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_master_name_or_no_sentinel_is_a_clear_error() {
    let group = shared();
    let ports = group.sentinel_ports();
    let url = format!("redis+sentinel://127.0.0.1:{}/no-such-master", ports[0]);
    let err = Client::connect(&url).await.err().unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("no-such-master"), "{err}");

    let dead = support::RedisServer::start();
    let port = dead.port;
    drop(dead);
    let options = ClientOptions::new().connect_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err = Client::connect_with(
        &format!("redis+sentinel://127.0.0.1:{port}/crosslock"),
        options,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    let err = Client::connect("redis+sentinel://127.0.0.1:1")
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("master"), "{err}");
}

/// `SENTINEL FAILOVER` while locks are held and a waiter waits (support's shared case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_keeps_replicated_holds_and_reports_the_others_lost() {
    let group = SentinelGroup::start();
    let failed =
        support::a_failover_keeps_replicated_holds_and_reports_the_others_lost(&group).await;
    failed.holder.close().await;
    failed.other.close().await;
}

/// kill -9 of the master (support's shared case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_master_is_survived_by_waiters() {
    support::killing_the_master_is_survived_by_waiters(&mut SentinelGroup::start()).await;
}

/// The client's connections to the sentinels are named as its connections to the data nodes
/// (`<client_name>-rs-<pid>-<id8>`): the query link on every sentinel, and the `+switch-master`
/// subscription on one. Where a sentinel takes `CLIENT SETINFO` (Redis ≥ 7.2) they also say
/// `lib-name=crosslock lib-ver=<version>`; an older sentinel refuses it and is used all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_to_the_sentinels_are_named() {
    let group = shared();
    let options = ClientOptions::new()
        .client_name("sentinel-app")
        .connect_timeout(Duration::from_secs(8));
    let client = Client::connect_with(&group.url(), options).await.unwrap();
    let id8: String = client.id().replace('-', "")[..8].to_owned();
    let mine = format!("sentinel-app-rs-{}-{id8}", std::process::id());
    let ports = group.sentinel_ports();
    let mine_on = |port: u16| -> Vec<String> {
        support::client_list(port)
            .into_iter()
            .filter(|l| support::client_field(l, "name") == Some(mine.as_str()))
            .collect()
    };
    support::until(
        "a named link on every sentinel and a named subscription",
        async || {
            ports.iter().all(|p| !mine_on(*p).is_empty())
                && ports.iter().any(|p| {
                    mine_on(*p)
                        .iter()
                        .any(|l| support::client_field(l, "sub") == Some("1"))
                })
        },
    )
    .await;
    for port in &ports {
        let has_setinfo = support::server_version(*port) >= (7, 2);
        for line in mine_on(*port) {
            let (lib, ver) = (
                support::client_field(&line, "lib-name"),
                support::client_field(&line, "lib-ver"),
            );
            if has_setinfo {
                assert_eq!(lib, Some("crosslock"), "{line}");
                assert_eq!(ver, Some(env!("CARGO_PKG_VERSION")), "{line}");
            } else {
                assert_eq!(
                    (lib, ver),
                    (None, None),
                    "no SETINFO before Redis 7.2: {line}"
                );
            }
        }
    }
    // Named connections are working ones: the master is found and written through them.
    let guard = client
        .lock("sentinel:named")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    guard.release().await.unwrap();
    client.close().await;
}
