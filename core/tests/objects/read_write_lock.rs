//! ReadWriteLock: readers share, a writer excludes, downgrade, upgrade refused, and the raw layout
//! with each reader's timeout keys.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, Owner};
use support::{RedisServer, until};

fn hgetall(server: &RedisServer, key: &str) -> HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg(key)
        .query(&mut server.raw())
        .unwrap()
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.raw())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_write_redissons_layout_with_a_timeout_key_per_hold() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let rw = client.read_write_lock("doc").unwrap();
    let (a, b) = (Owner::new(1), Owner::new(2));
    assert!(
        rw.read()
            .acquire_as(a, &AcquireOptions::new())
            .await
            .unwrap()
    );
    assert!(
        rw.read()
            .acquire_as(a, &AcquireOptions::new())
            .await
            .unwrap()
    );
    assert!(
        rw.read()
            .acquire_as(b, &AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap(),
        "readers share"
    );
    let id = client.id();
    let hash = hgetall(&server, "doc");
    assert_eq!(hash.get("mode").map(String::as_str), Some("read"));
    assert_eq!(hash.get(&format!("{id}:1")).map(String::as_str), Some("2"));
    assert_eq!(hash.get(&format!("{id}:2")).map(String::as_str), Some("1"));
    for k in 1..=2 {
        assert!(
            pttl(&server, &format!("{{doc}}:{id}:1:rwlock_timeout:{k}")) > 0,
            "timeout key {k} of reader 1"
        );
    }
    assert!(pttl(&server, &format!("{{doc}}:{id}:2:rwlock_timeout:1")) > 0);
    // No writer while anyone reads.
    assert!(
        !rw.write()
            .acquire_as(Owner::new(3), &AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap()
    );
    rw.read().release_as(a).await.unwrap();
    assert!(
        pttl(&server, &format!("{{doc}}:{id}:1:rwlock_timeout:2")) == -2,
        "the newest hold's key goes first"
    );
    rw.read().release_as(a).await.unwrap();
    rw.read().release_as(b).await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.raw())
        .unwrap();
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_excludes_readers_may_downgrade_and_an_upgrade_is_refused_at_once() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let rw = client.read_write_lock("w").unwrap();
    let (w, r) = (Owner::new(1), Owner::new(2));
    assert!(
        rw.write()
            .acquire_as(w, &AcquireOptions::new())
            .await
            .unwrap()
    );
    let id = client.id();
    assert_eq!(
        hgetall(&server, "w")
            .get(&format!("{id}:1:write"))
            .map(String::as_str),
        Some("1")
    );
    assert!(
        !rw.read()
            .acquire_as(r, &AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap(),
        "a reader got in"
    );
    // Downgrade: the writer also reads, then lets the write lock go and keeps reading.
    assert!(
        rw.read()
            .acquire_as(w, &AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap()
    );
    assert!(rw.write().release_as(w).await.unwrap());
    assert_eq!(
        hgetall(&server, "w").get("mode").map(String::as_str),
        Some("read")
    );
    assert!(
        rw.read()
            .acquire_as(r, &AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap(),
        "readers share after the downgrade"
    );
    // Upgrade: a reader asking for the write lock is refused at once, not left waiting.
    let started = std::time::Instant::now();
    let err = rw
        .write()
        .acquire_as(r, &AcquireOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UpgradeRefused, "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(err.to_string().contains("'w'"), "{err}");
    rw.read().release_as(w).await.unwrap();
    rw.read().release_as(r).await.unwrap();
    assert!(!rw.read().is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_each_readers_timeout_keys() {
    let server = RedisServer::start();
    let client = Client::connect_with(
        &server.url(),
        ClientOptions::new().watchdog_timeout(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    let rw = client.read_write_lock("renewed").unwrap();
    let a = Owner::new(1);
    assert!(
        rw.read()
            .acquire_as(a, &AcquireOptions::new())
            .await
            .unwrap()
    );
    assert!(
        rw.read()
            .acquire_as(a, &AcquireOptions::new())
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let id = client.id();
    for k in 1..=2 {
        assert!(
            pttl(&server, &format!("{{renewed}}:{id}:1:rwlock_timeout:{k}")) > 0,
            "timeout key {k} expired"
        );
    }
    // Another reader's release recomputes the hash's TTL from the live timeout keys: ours keep it.
    let other = Client::connect(&server.url()).await.unwrap();
    let theirs = other.read_write_lock("renewed").unwrap();
    assert!(
        theirs
            .read()
            .acquire_as(
                Owner::new(9),
                &AcquireOptions::new().lease(Duration::from_millis(50))
            )
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = theirs.read().release_as(Owner::new(9)).await;
    assert!(
        rw.read().is_held_by(a).await.unwrap(),
        "a live reader was treated as dead"
    );
    rw.read().release_as(a).await.unwrap();
    rw.read().release_as(a).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_release_wakes_every_waiting_reader() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let rw = client.read_write_lock("fanout").unwrap();
    assert!(
        rw.write()
            .acquire_as(
                Owner::new(1),
                &AcquireOptions::new().lease(Duration::from_secs(60))
            )
            .await
            .unwrap()
    );
    let readers: Vec<_> = (10..14)
        .map(|n| {
            let rw = rw.clone();
            tokio::spawn(async move {
                assert!(
                    rw.read()
                        .acquire_as(
                            Owner::new(n),
                            &AcquireOptions::new().wait(Duration::from_secs(20))
                        )
                        .await
                        .unwrap()
                );
                n
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = std::time::Instant::now();
    rw.write().release_as(Owner::new(1)).await.unwrap();
    for r in readers {
        r.await.unwrap();
    }
    assert!(
        released.elapsed() < Duration::from_secs(10),
        "readers waited for the lease, not the release"
    );
    let hash = hgetall(&server, "fanout");
    assert_eq!(hash.len(), 5, "mode + 4 readers at once: {hash:?}");
}

/// The messages published on `channel` until `quiet` passes without one.
fn drain(pubsub: &mut redis::PubSub<'_>, quiet: Duration) -> Vec<String> {
    pubsub.set_read_timeout(Some(quiet)).unwrap();
    let mut got = Vec::new();
    while let Ok(msg) = pubsub.get_message() {
        got.push(msg.get_payload::<String>().unwrap());
    }
    got
}

/// Redisson wakes on a `1` only the Java threads already blocked, so a write release follows it
/// with a `0` (a permit a Java thread about to block still finds): whether the hash goes or stays
/// in read mode (a downgrade), and on a force unlock. A read release publishes Redisson's `0`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_release_publishes_one_then_zero_so_no_java_waiter_misses_it() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let mut sub = server.raw();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("redisson_rwlock:{msgs}").unwrap();
    let quiet = Duration::from_millis(300);
    let rw = client.read_write_lock("msgs").unwrap();
    let (w, r) = (Owner::new(1), Owner::new(2));
    let now = AcquireOptions::new().wait(Duration::ZERO);

    assert!(rw.write().acquire_as(w, &now).await.unwrap());
    assert!(rw.write().acquire_as(w, &now).await.unwrap());
    assert!(!rw.write().release_as(w).await.unwrap(), "held twice");
    assert_eq!(
        drain(&mut pubsub, quiet),
        Vec::<String>::new(),
        "still held once"
    );
    assert!(rw.write().release_as(w).await.unwrap());
    assert_eq!(drain(&mut pubsub, quiet), ["1", "0"], "full release");

    assert!(rw.write().acquire_as(w, &now).await.unwrap());
    assert!(rw.read().acquire_as(w, &now).await.unwrap());
    assert!(rw.write().release_as(w).await.unwrap());
    assert_eq!(drain(&mut pubsub, quiet), ["1", "0"], "downgrade");
    assert!(rw.read().release_as(w).await.unwrap());
    assert_eq!(drain(&mut pubsub, quiet), ["0"], "read release");

    assert!(rw.write().acquire_as(r, &now).await.unwrap());
    assert!(rw.write().force_unlock().await.unwrap());
    assert_eq!(drain(&mut pubsub, quiet), ["1", "0"], "force unlock");
    assert!(rw.read().acquire_as(r, &now).await.unwrap());
    assert!(rw.read().force_unlock().await.unwrap());
    assert_eq!(drain(&mut pubsub, quiet), ["0"], "read force unlock");
}

/// A writer that downgrades (takes the read lock, then lets the write lock go) lets waiting
/// readers in at once: they are woken, rather than left to sleep for the hash's PTTL (the 30 s
/// watchdog lease) until the writer stops reading too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgrade_wakes_waiting_readers_at_once() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let rw = client.read_write_lock("down").unwrap();
    let w = Owner::new(1);
    let now = AcquireOptions::new().wait(Duration::ZERO);
    assert!(rw.write().acquire_as(w, &now).await.unwrap());
    let pttl_before = pttl(&server, "down");
    assert!(pttl_before > 20_000, "the watchdog lease: {pttl_before} ms");

    let theirs = other.read_write_lock("down").unwrap();
    let reader = tokio::spawn(async move {
        let got = theirs
            .read()
            .acquire_as(
                Owner::new(9),
                &AcquireOptions::new().wait(Duration::from_secs(20)),
            )
            .await
            .unwrap();
        (got, theirs)
    });
    // The reader is waiting: subscribed, and still without the lock.
    until("the reader to subscribe", async || {
        server.subscribers("redisson_rwlock:{down}") > 0
    })
    .await;
    // Past its attempt after subscribing: now it waits for a message or the hash's PTTL.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!reader.is_finished(), "the reader got in past the writer");

    assert!(rw.read().acquire_as(w, &now).await.unwrap());
    let downgraded = std::time::Instant::now();
    assert!(rw.write().release_as(w).await.unwrap());
    let (got, theirs) = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("the waiting reader was not woken by the downgrade")
        .unwrap();
    assert!(got);
    // Woken by the release's message, not by its own retry after the hash's PTTL (30 s).
    assert!(downgraded.elapsed() < Duration::from_secs(10));
    assert_eq!(
        hgetall(&server, "down").get("mode").map(String::as_str),
        Some("read")
    );
    theirs.read().release_as(Owner::new(9)).await.unwrap();
    rw.read().release_as(w).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_write_acquire_after_its_dropped_read_acquire_waits_for_the_give_back() {
    // A read acquire dropped with its script held up in Redis wins once Redis runs it, and that
    // hold is given back in the background. The same owner's write acquire, sent right after the
    // drop, reaches Redis behind it: it must wait for the give-back, not see the read hold it
    // never got and be refused as an upgrade.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let owner = Owner::new(7);
    server.command(&["CLIENT", "PAUSE", "10000", "WRITE"]);
    let read = tokio::spawn({
        let client = client.clone();
        async move {
            let rw = client.read_write_lock("dropped").unwrap();
            rw.read().acquire_as(owner, &AcquireOptions::new()).await
        }
    });
    until("the read acquire to wait in Redis", async || {
        server.blocked_clients() > 0
    })
    .await;
    read.abort();
    assert!(read.await.unwrap_err().is_cancelled());
    let write = tokio::spawn({
        let client = client.clone();
        async move {
            let rw = client.read_write_lock("dropped").unwrap();
            rw.write()
                .acquire_as(owner, &AcquireOptions::new().wait(Duration::from_secs(10)))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.command(&["CLIENT", "UNPAUSE"]);
    assert!(
        write.await.unwrap().unwrap(),
        "the write lock, once the read hold was given back"
    );
    let hash = hgetall(&server, "dropped");
    assert_eq!(hash.get("mode").map(String::as_str), Some("write"));
    assert_eq!(
        hash.get(&format!("{}:7:write", client.id()))
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(hash.len(), 2, "no read hold left: {hash:?}");
    let rw = client.read_write_lock("dropped").unwrap();
    assert!(rw.write().release_as(owner).await.unwrap());
    assert!(hgetall(&server, "dropped").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_read_guard_is_released_before_the_same_owners_write_acquire() {
    // Dropping a guard releases in the background; the owner's write acquire right after must
    // not reach Redis first and be refused as an upgrade of the read hold being released.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let rw = client.read_write_lock("scoped").unwrap();
    let owner = Owner::new(5);
    let as_owner = || AcquireOptions::new().owner(owner);
    for round in 0..50 {
        let read = rw.read().acquire_with(as_owner()).await.unwrap();
        drop(read);
        let write = rw
            .write()
            .acquire_with(as_owner().wait(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        write.release().await.unwrap();
    }
    assert!(hgetall(&server, "scoped").is_empty());
}
