//! The conformance suite of the RLock family: every behaviour a lock type shares, run for every
//! type. A new type is added to `KINDS`, not re-tested by copy (type-specific behaviour lives in
//! `objects/<stem>.rs`).
//!
//! A binary of its own, not a module of `objects`: its watchdog cases renew every 100 ms, the
//! suite most sensitive to anything else holding crosslock's runtime threads. Run beside the
//! object suites they once saw the renewal loop held up past a lease (about 1 run in 15), traced
//! to redis-rs reconnects begun on test runtimes that then ended (fixed: `runtime::in_context`;
//! `transport/client.rs` has the case).

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, AnyLock, Client, ClientOptions, ErrorKind, Owner};
use support::{RedisServer, until};

type Factory = fn(&Client, &str) -> Arc<dyn AnyLock>;

/// Every exclusive lock type of the family (the read lock is shared by design: see below).
const KINDS: &[(&str, Factory)] = &[
    ("lock", |c, n| c.lock(n).unwrap().erased()),
    ("fair_lock", |c, n| c.fair_lock(n).unwrap().erased()),
    ("spin_lock", |c, n| c.spin_lock(n).unwrap().erased()),
    ("fenced_lock", |c, n| c.fenced_lock(n).unwrap().erased()),
    ("non_reentrant_lock", |c, n| {
        c.non_reentrant_lock(n).unwrap().erased()
    }),
    ("non_reentrant_fair_lock", |c, n| {
        c.non_reentrant_fair_lock(n).unwrap().erased()
    }),
    ("write_lock", |c, n| {
        c.read_write_lock(n).unwrap().write().erased()
    }),
];

/// The read lock too, for what does not need exclusion.
const ALL_KINDS: &[(&str, Factory)] = &[
    ("lock", |c, n| c.lock(n).unwrap().erased()),
    ("fair_lock", |c, n| c.fair_lock(n).unwrap().erased()),
    ("spin_lock", |c, n| c.spin_lock(n).unwrap().erased()),
    ("fenced_lock", |c, n| c.fenced_lock(n).unwrap().erased()),
    ("non_reentrant_lock", |c, n| {
        c.non_reentrant_lock(n).unwrap().erased()
    }),
    ("non_reentrant_fair_lock", |c, n| {
        c.non_reentrant_fair_lock(n).unwrap().erased()
    }),
    ("write_lock", |c, n| {
        c.read_write_lock(n).unwrap().write().erased()
    }),
    ("read_lock", |c, n| {
        c.read_write_lock(n).unwrap().read().erased()
    }),
];

async fn client(server: &RedisServer, options: ClientOptions) -> Client {
    Client::connect_with(&server.url(), options).await.unwrap()
}

/// Only the detector's keys (and a fenced lock's token counter, which outlives the lock by
/// design) may remain.
/// How many lost-lock events `c` has told so far.
fn losses(c: &Client) -> Arc<AtomicUsize> {
    let lost = Arc::new(AtomicUsize::new(0));
    let seen = lost.clone();
    c.on_lock_lost(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    lost
}

fn leftover_keys(server: &RedisServer) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.raw())
        .unwrap();
    keys.retain(|k| !k.starts_with("counter:") && !k.starts_with("redisson_lock_token:"));
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_with_8_tasks_keeps_a_non_atomic_counter_exact() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    for (kind, make) in KINDS {
        let name = format!("excl:{kind}");
        let counter = format!("counter:{kind}");
        let lock = make(&c, &name);
        let tasks: Vec<_> = (0..8u64)
            .map(|i| {
                let lock = lock.clone();
                let url = server.url();
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut raw = redis::Client::open(url)
                        .unwrap()
                        .get_multiplexed_async_connection()
                        .await
                        .unwrap();
                    let owner = Owner::new(100 + i);
                    for _ in 0..15 {
                        assert!(
                            lock.acquire_as(owner, &AcquireOptions::new())
                                .await
                                .unwrap()
                                .is_some()
                        );
                        let n: Option<i64> = redis::cmd("GET")
                            .arg(&counter)
                            .query_async(&mut raw)
                            .await
                            .unwrap();
                        tokio::task::yield_now().await;
                        let _: () = redis::cmd("SET")
                            .arg(&counter)
                            .arg(n.unwrap_or(0) + 1)
                            .query_async(&mut raw)
                            .await
                            .unwrap();
                        assert!(lock.release_as(owner).await.unwrap());
                    }
                })
            })
            .collect();
        // All at once, so that a task's panic fails the test at once: awaited in turn, a panic while
        // holding (its hold renewed by the watchdog) would leave the tasks before it waiting for ever.
        futures_util::future::try_join_all(tasks).await.unwrap();
        let n: i64 = redis::cmd("GET")
            .arg(&counter)
            .query(&mut server.raw())
            .unwrap();
        assert_eq!(
            n,
            8 * 15,
            "{kind}: lost increments mean two holders overlapped"
        );
        assert_eq!(
            c.subscribed_channels(),
            0,
            "{kind}: subscriptions left behind"
        );
    }
    assert_eq!(leftover_keys(&server), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_or_its_refusal() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    for (kind, make) in ALL_KINDS {
        let lock = make(&c, &format!("reent:{kind}"));
        let me = Owner::new(1);
        assert!(
            lock.acquire_as(me, &AcquireOptions::new())
                .await
                .unwrap()
                .is_some()
        );
        let again = lock
            .acquire_as(me, &AcquireOptions::new().wait(Duration::ZERO))
            .await;
        if kind.starts_with("non_reentrant") {
            let err = again.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NonReentrant, "{kind}: {err}");
            assert!(err.to_string().contains(&format!("reent:{kind}'")), "{err}");
            assert_eq!(
                lock.hold_count_of(me).await.unwrap(),
                1,
                "{kind}: the refusal changed Redis"
            );
        } else {
            assert!(again.unwrap().is_some(), "{kind}: the holder must re-enter");
            assert_eq!(lock.hold_count_of(me).await.unwrap(), 2, "{kind}");
            assert!(
                !lock.release_as(me).await.unwrap(),
                "{kind}: one hold remains"
            );
            assert_eq!(lock.hold_count_of(me).await.unwrap(), 1, "{kind}");
        }
        assert!(lock.release_as(me).await.unwrap(), "{kind}");
        assert!(!lock.is_locked().await.unwrap(), "{kind}");
        let err = lock.release_as(me).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotHeld, "{kind}: {err}");
    }
    assert_eq!(leftover_keys(&server), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_limit_gives_up_and_leaves_nothing_behind() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    for (kind, make) in KINDS {
        let name = format!("limit:{kind}");
        let lock = make(&c, &name);
        assert!(
            lock.acquire_as(Owner::new(1), &AcquireOptions::new())
                .await
                .unwrap()
                .is_some()
        );
        let started = Instant::now();
        let got = lock
            .acquire_as(
                Owner::new(2),
                &AcquireOptions::new().wait(Duration::from_millis(300)),
            )
            .await
            .unwrap();
        assert!(got.is_none(), "{kind}: another owner got a held lock");
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "{kind}: gave up early"
        );
        let err = lock
            .timeout_error(Owner::new(2), Duration::from_millis(300))
            .await;
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert!(err.to_string().contains(&name), "{err}");
        until("the subscription to go", async || {
            c.subscribed_channels() == 0
        })
        .await;
        lock.release_as(Owner::new(1)).await.unwrap();
        // No queue entry, no deadline, no lock.
        assert_eq!(leftover_keys(&server), Vec::<String>::new(), "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_nothing_behind() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    for (kind, make) in KINDS {
        let lock = make(&c, &format!("cancel:{kind}"));
        assert!(
            lock.acquire_as(Owner::new(1), &AcquireOptions::new())
                .await
                .unwrap()
                .is_some()
        );
        let token = crosslock::CancellationToken::new();
        let waiter = {
            let lock = lock.clone();
            let options = AcquireOptions::new().cancel(token.clone());
            tokio::spawn(async move { lock.acquire_as(Owner::new(2), &options).await })
        };
        if *kind != "spin_lock" {
            until("the waiter to subscribe", async || {
                c.subscribed_channels() == 1
            })
            .await;
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        token.cancel();
        let err = waiter.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Cancelled, "{kind}: {err}");
        until("the subscription to go", async || {
            c.subscribed_channels() == 0
        })
        .await;
        lock.release_as(Owner::new(1)).await.unwrap();
        assert_eq!(leftover_keys(&server), Vec::<String>::new(), "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_the_release_not_by_the_lease() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    for (kind, make) in KINDS {
        let lock = make(&c, &format!("wake:{kind}"));
        let lease = Duration::from_secs(60);
        assert!(
            lock.acquire_as(Owner::new(1), &AcquireOptions::new().lease(lease))
                .await
                .unwrap()
                .is_some()
        );
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move {
                lock.acquire_as(
                    Owner::new(2),
                    &AcquireOptions::new().wait(Duration::from_secs(20)),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let released = Instant::now();
        lock.release_as(Owner::new(1)).await.unwrap();
        assert!(
            waiter.await.unwrap().unwrap().is_some(),
            "{kind}: the waiter gave up"
        );
        // Woken by the release: far sooner than the 60 s lease (or the 20 s wait) would allow.
        assert!(
            released.elapsed() < Duration::from_secs(10),
            "{kind}: woken by expiry, not by the release"
        );
        lock.release_as(Owner::new(2)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_hold_past_its_lease_and_a_force_unlock_is_reported_lost() {
    let server = RedisServer::start();
    let c = client(
        &server,
        ClientOptions::new().watchdog_timeout(Duration::from_millis(300)),
    )
    .await;
    let other = client(&server, ClientOptions::new()).await;
    for (kind, make) in ALL_KINDS {
        let name = format!("dog:{kind}");
        let lock = make(&c, &name);
        assert!(
            lock.acquire_as(Owner::new(1), &AcquireOptions::new())
                .await
                .unwrap()
                .is_some()
        );
        tokio::time::sleep(Duration::from_millis(900)).await; // three leases
        assert!(
            lock.is_locked().await.unwrap(),
            "{kind}: the watchdog did not keep it"
        );
        assert!(
            !lock.is_lost(Owner::new(1)),
            "{kind}: reported lost while renewed"
        );
        let token = lock.lost_token(Owner::new(1)).unwrap();
        // Someone force-unlocks it: the next renewal finds it gone and says so.
        assert!(make(&other, &name).force_unlock().await.unwrap(), "{kind}");
        if tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .is_err()
        {
            panic!(
                "{kind}: no lost signal 5 s after the force-unlock (in Redis: PTTL {}, the hash \
                 {:?}; the client watches {} locks, is_lost {})",
                pttl(&server, &name),
                redis::cmd("HGETALL")
                    .arg(&name)
                    .query::<Vec<String>>(&mut server.raw())
                    .unwrap(),
                c.watched_locks(),
                lock.is_lost(Owner::new(1)),
            );
        }
        let err = lock.release_as(Owner::new(1)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LockLost, "{kind}: {err}");
        assert_eq!(c.watched_locks(), 0, "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_of_every_renewal_kind_in_more_batches_than_go_at_once_are_all_kept() {
    // Batches of two: 24 locks of every kind and 3 permits make 15 renewal scripts per round,
    // more than are sent at once, and of three renewal kinds (hash, read lock, permit).
    let server = RedisServer::start();
    let c = client(
        &server,
        ClientOptions::new()
            .watchdog_timeout(Duration::from_millis(300))
            .watchdog_batch_size(2),
    )
    .await;
    let lost = losses(&c);
    let me = Owner::new(1);
    let mut locks = Vec::new();
    for (kind, make) in ALL_KINDS {
        for i in 0..3 {
            let lock = make(&c, &format!("many:{kind}:{i}"));
            let won = lock.acquire_as(me, &AcquireOptions::new()).await.unwrap();
            assert!(won.is_some(), "{kind} {i}");
            locks.push((*kind, lock));
        }
    }
    let slots = c.permit_expirable_semaphore("many:permits").unwrap();
    assert!(slots.try_set_permits(3).await.unwrap());
    let mut permits = Vec::new();
    for _ in 0..3 {
        permits.push(slots.acquire().await.unwrap());
    }
    assert_eq!(c.watched_locks(), 3 * ALL_KINDS.len() + 3);
    tokio::time::sleep(Duration::from_millis(1200)).await; // four leases
    for (kind, lock) in &locks {
        assert!(lock.is_locked().await.unwrap(), "{kind}: not kept");
        assert!(!lock.is_lost(me), "{kind}: reported lost");
    }
    assert_eq!(
        slots.available_permits().await.unwrap(),
        0,
        "a permit expired"
    );
    assert_eq!(lost.load(Ordering::SeqCst), 0);
    for (kind, lock) in &locks {
        lock.release_as(me)
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
    }
    for permit in permits {
        permit.release().await.unwrap();
    }
    assert_eq!(c.watched_locks(), 0);
    assert_eq!(slots.available_permits().await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_holds_than_a_renewal_window_takes_are_all_kept_while_some_come_and_go() {
    // A round renews at most ~1,100 holds per window (whole batches of 100): 2,500 holds make
    // three windows. Holds released and acquired again during the rounds must not disturb the
    // others, and every one must still be held after several leases.
    let server = RedisServer::start();
    let c = client(
        &server,
        ClientOptions::new().watchdog_timeout(Duration::from_millis(600)),
    )
    .await;
    let lost = losses(&c);
    let me = Owner::new(1);
    let locks: Vec<_> = (0..2500)
        .map(|i| c.lock(&format!("window:{i}")).unwrap())
        .collect();
    let options = AcquireOptions::new();
    for chunk in locks.chunks(250) {
        let won =
            futures_util::future::join_all(chunk.iter().map(|l| l.acquire_as(me, &options))).await;
        assert!(won.into_iter().all(|w| w.unwrap()));
    }
    assert_eq!(c.watched_locks(), 2500);
    // For four leases, every 50 ms: release one of the first 100 holds and take it again.
    let started = Instant::now();
    let mut i = 0;
    while started.elapsed() < Duration::from_millis(2400) {
        let lock = &locks[i % 100];
        assert!(lock.release_as(me).await.unwrap());
        assert!(lock.acquire_as(me, &options).await.unwrap());
        i += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let held = futures_util::future::join_all(locks.iter().map(|l| l.hold_count_of(me))).await;
    for (i, count) in held.into_iter().enumerate() {
        assert_eq!(count.unwrap(), 1, "window:{i} not kept");
    }
    assert_eq!(lost.load(Ordering::SeqCst), 0);
    assert_eq!(c.watched_locks(), 2500);
    for chunk in locks.chunks(250) {
        for r in futures_util::future::join_all(chunk.iter().map(|l| l.release_as(me))).await {
            assert!(r.unwrap());
        }
    }
    assert_eq!(c.watched_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_lease_that_runs_out_while_held_is_reported_lost() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    for (kind, make) in ALL_KINDS {
        let lock = make(&c, &format!("lease:{kind}"));
        let acquired = Instant::now();
        let lease = Duration::from_millis(300);
        assert!(
            lock.acquire_as(Owner::new(1), &AcquireOptions::new().lease(lease))
                .await
                .unwrap()
                .is_some()
        );
        let token = lock.lost_token(Owner::new(1)).unwrap();
        tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .unwrap_or_else(|_| panic!("{kind}: no lost signal"));
        // Told when the lease ran out (less the clock-drift margin), not later.
        let told = acquired.elapsed();
        assert!(
            told >= lease - Duration::from_millis(20),
            "{kind}: told too early ({told:?})"
        );
        let err = lock.release_as(Owner::new(1)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LockLost, "{kind}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_type_of_value_under_the_name_is_a_wrong_type_and_stays_untouched() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    let mut raw = server.raw();
    for (kind, make) in ALL_KINDS {
        for (what, setup) in [
            ("string", &["SET", "k", "v"][..]),
            ("plain hash", &["HSET", "k", "customer", "alice"][..]),
        ] {
            let name = format!("wt:{kind}:{what}");
            let mut cmd = redis::cmd(setup[0]);
            cmd.arg(&name).arg(&setup[2..]);
            let _: () = cmd.query(&mut raw).unwrap();
            let lock = make(&c, &name);
            let err = lock
                .acquire_as(
                    Owner::new(1),
                    &AcquireOptions::new().wait(Duration::from_secs(5)),
                )
                .await
                .unwrap_err();
            assert_eq!(
                err.kind(),
                ErrorKind::WrongType,
                "{kind} on a {what}: {err}"
            );
            for err in [
                lock.release_as(Owner::new(1)).await.unwrap_err(),
                lock.force_unlock().await.unwrap_err(),
                lock.is_locked().await.unwrap_err(),
            ] {
                assert_eq!(
                    err.kind(),
                    ErrorKind::WrongType,
                    "{kind} on a {what}: {err}"
                );
                assert!(err.to_string().contains(&name), "{err}");
            }
            let dumped: Vec<u8> = redis::cmd("DUMP").arg(&name).query(&mut raw).unwrap();
            assert!(!dumped.is_empty());
            let ttl: i64 = redis::cmd("PTTL").arg(&name).query(&mut raw).unwrap();
            assert_eq!(ttl, -1, "{kind} on a {what}: a TTL was set");
            if *what == *"plain hash" {
                let fields: Vec<String> = redis::cmd("HKEYS").arg(&name).query(&mut raw).unwrap();
                assert_eq!(
                    fields,
                    vec!["customer".to_owned()],
                    "{kind}: the hash changed"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_attempt_names_the_hash_it_found_and_leaves_it_as_it_was() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    let mut raw = server.raw();
    let shapes: &[(&str, &[&str], &str)] = &[
        ("two fields", &["a", "1", "b", "2"], "a hash with 2 fields"),
        (
            "a read-write lock",
            &["mode", "read", "other-client:7", "1"],
            "a read-write lock",
        ),
        ("only a mode", &["mode", "write"], "a read-write lock"),
        (
            "one odd field",
            &["customer", "alice"],
            "field \"customer\"",
        ),
        (
            "a holder without a count",
            &["other-client:7", "x"],
            "not a lock",
        ),
    ];
    // The exclusive kinds (a read-write lock's hash is the write lock's own).
    for (kind, make) in KINDS.iter().filter(|(kind, _)| *kind != "write_lock") {
        for (what, fields, said) in shapes {
            let name = format!("shape:{kind}:{what}");
            let _: () = redis::cmd("HSET")
                .arg(&name)
                .arg(*fields)
                .query(&mut raw)
                .unwrap();
            let _: () = redis::cmd("PEXPIRE")
                .arg(&name)
                .arg(600_000)
                .query(&mut raw)
                .unwrap();
            let before: Vec<u8> = redis::cmd("DUMP").arg(&name).query(&mut raw).unwrap();
            let lock = make(&c, &name);
            for wait in [Duration::ZERO, Duration::from_millis(200)] {
                let err = lock
                    .acquire_as(Owner::new(1), &AcquireOptions::new().wait(wait))
                    .await
                    .unwrap_err();
                assert_eq!(err.kind(), ErrorKind::WrongType, "{kind} on {what}: {err}");
                assert!(
                    err.to_string().contains(said),
                    "{kind} on {what}: {err} does not say {said}"
                );
            }
            let after: Vec<u8> = redis::cmd("DUMP").arg(&name).query(&mut raw).unwrap();
            assert_eq!(after, before, "{kind} on {what}: the hash changed");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_releases_every_hold_and_wakes_waiters() {
    let server = RedisServer::start();
    let other = client(&server, ClientOptions::new()).await;
    for (kind, make) in KINDS {
        let name = format!("close:{kind}");
        let c = client(&server, ClientOptions::new()).await;
        let lock = make(&c, &name);
        assert!(
            lock.acquire_as(Owner::new(1), &AcquireOptions::new())
                .await
                .unwrap()
                .is_some()
        );
        if !kind.starts_with("non_reentrant") {
            assert!(
                lock.acquire_as(Owner::new(1), &AcquireOptions::new())
                    .await
                    .unwrap()
                    .is_some()
            );
        }
        let waiter = {
            let lock = make(&other, &name);
            tokio::spawn(async move {
                lock.acquire_as(
                    Owner::new(2),
                    &AcquireOptions::new().wait(Duration::from_secs(20)),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The holds outlive the lock object that took them (as in Node, where each call makes
        // its own): close() releases them from what the holds keep.
        drop(lock);
        c.close().await;
        assert!(
            waiter.await.unwrap().unwrap().is_some(),
            "{kind}: close did not release"
        );
        make(&other, &name).release_as(Owner::new(2)).await.unwrap();
    }
    assert_eq!(leftover_keys(&server), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_releases_more_holds_than_it_sends_at_once() {
    // A closing client releases its holds a few hundred at a time: 1,500 holds of several owners
    // and kinds must all be gone from Redis when close() returns.
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    let options = AcquireOptions::new();
    let mut locks = Vec::new();
    for (kind, make) in KINDS {
        for i in 0..1500 / KINDS.len() {
            locks.push(make(&c, &format!("close-many:{kind}:{i}")));
        }
    }
    for (i, chunk) in locks.chunks(250).enumerate() {
        let owner = Owner::new(i as u64 + 1);
        for won in
            futures_util::future::join_all(chunk.iter().map(|l| l.acquire_as(owner, &options)))
                .await
        {
            assert!(won.unwrap().is_some());
        }
    }
    assert!(c.watched_locks() >= 1500 - KINDS.len());
    // Spawned, as an application's shutdown path may: close()'s future must be Send.
    let closing = c.clone();
    tokio::spawn(async move { closing.close().await })
        .await
        .unwrap();
    assert_eq!(leftover_keys(&server), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_whose_caller_stops_waiting_still_releases_everything() {
    // An application's shutdown that gives close() a moment and moves on (a timeout, a cancelled
    // task) must not leave the holds close() had not yet released to their leases (30 s here,
    // renewal having stopped): they are released, and the connections closed, all the same.
    let server = RedisServer::start();
    let connections = || server.connections();
    // A fresh server: once the start-up check's connection is gone, only the query's own.
    until("a fresh server with no other connection", async || {
        connections() == 1
    })
    .await;
    let c = client(&server, ClientOptions::new()).await;
    let owner = Owner::new(1);
    let locks: Vec<_> = (0..2000)
        .map(|i| c.lock(&format!("close-dropped:{i}")).unwrap())
        .collect();
    let options = AcquireOptions::new();
    for won in
        futures_util::future::join_all(locks.iter().map(|l| l.acquire_as(owner, &options))).await
    {
        assert!(won.unwrap());
    }
    assert_eq!(c.watched_locks(), 2000);
    assert!(
        connections() > 1,
        "the client holds connections before close()"
    );
    // Polled once (it begins), then dropped.
    assert!(
        tokio::time::timeout(Duration::ZERO, c.close())
            .await
            .is_err(),
        "close() ended within its first poll: the test needs it to be dropped half-way"
    );
    assert!(c.is_closed());
    until(
        "every hold released after close() was dropped",
        async || leftover_keys(&server).is_empty(),
    )
    .await;
    assert_eq!(c.watched_locks(), 0);
    until("every connection the client opened closed", async || {
        connections() == 1
    })
    .await;
    let e = locks[0].acquire().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
}

/// Who competes with a hold of `kind` on `name`: the same kind, but a writer for a read lock.
fn rival(kind: &str, c: &Client, name: &str) -> Arc<dyn AnyLock> {
    if kind == "read_lock" {
        return c.read_write_lock(name).unwrap().write().erased();
    }
    let (_, make) = ALL_KINDS.iter().find(|(k, _)| *k == kind).unwrap();
    make(c, name)
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.raw())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_keeps_a_hold_past_its_first_lease_in_redis_and_here() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    let other = client(&server, ClientOptions::new()).await;
    let lost = losses(&c);
    let me = Owner::new(1);
    for (kind, make) in ALL_KINDS {
        let name = format!("extend:{kind}");
        let lock = make(&c, &name);
        let short = AcquireOptions::new().lease(Duration::from_millis(300));
        assert!(lock.acquire_as(me, &short).await.unwrap().is_some());
        lock.extend_as(me, Duration::from_secs(5)).await.unwrap();
        assert!(
            pttl(&server, &name) > 3000,
            "{kind}: the hash kept its lease"
        );
        if *kind == "read_lock" {
            let timeout = format!("{{{name}}}:{}:rwlock_timeout:1", c.holder(me));
            assert!(
                pttl(&server, &timeout) > 3000,
                "{kind}: the reader's timeout key kept its lease"
            );
        }
        tokio::time::sleep(Duration::from_millis(450)).await; // past the first lease
        let rival = rival(kind, &other, &name);
        let once = AcquireOptions::new().wait(Duration::ZERO);
        assert!(
            rival
                .acquire_as(Owner::new(9), &once)
                .await
                .unwrap()
                .is_none(),
            "{kind}: another client took it after the first lease"
        );
        assert!(!lock.is_lost(me), "{kind}: told lost at the first lease");
        assert!(lock.release_as(me).await.unwrap(), "{kind}");
    }
    assert_eq!(lost.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_of_a_watchdog_hold_makes_it_a_lease_hold_that_runs_out() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    let me = Owner::new(1);
    for (kind, make) in ALL_KINDS {
        let name = format!("extend-dog:{kind}");
        let lock = make(&c, &name);
        assert!(
            lock.acquire_as(me, &AcquireOptions::new())
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(c.watched_locks(), 1, "{kind}");
        lock.extend_as(me, Duration::from_millis(400))
            .await
            .unwrap();
        assert_eq!(
            c.watched_locks(),
            0,
            "{kind}: still renewed by the watchdog"
        );
        let left = pttl(&server, &name);
        assert!((1..=400).contains(&left), "{kind}: PTTL {left}");
        // Held past the new lease: told lost, and the release says so.
        let token = lock.lost_token(me).unwrap();
        tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .unwrap_or_else(|_| panic!("{kind}: no lost signal"));
        let err = lock.release_as(me).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LockLost, "{kind}: {err}");
    }
}

/// An extend to a shorter lease whose answer never comes (the caller stopped waiting while Redis
/// held writes back, then ran it) must not leave the hold believed for its old, longer lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extend_given_up_on_counts_as_set_until_known() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    let me = Owner::new(1);
    let name = "extend-given-up";
    let lock = c.lock(name).unwrap();
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    server.command(&["CLIENT", "PAUSE", "300", "WRITE"]);
    let extend = lock.extend_as(me, Duration::from_millis(300));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), extend)
            .await
            .is_err(),
        "the extend was answered during the pause"
    );
    // The paused script runs when the pause ends, and the lock expires 300 ms later.
    support::until("the lock expired in Redis", async || {
        pttl(&server, name) == -2
    })
    .await;
    assert!(
        lock.is_lost(me),
        "Redis let the lock go, and this process still believes it holds it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_is_refused_when_not_held_and_lost_when_force_unlocked() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    let other = client(&server, ClientOptions::new()).await;
    let me = Owner::new(1);
    for (kind, make) in ALL_KINDS {
        let name = format!("extend-refused:{kind}");
        let lock = make(&c, &name);
        let err = lock
            .extend_as(me, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotHeld, "{kind}: {err}");
        // Held by another owner of the same client: still not this owner's to extend.
        assert!(
            lock.acquire_as(Owner::new(2), &AcquireOptions::new())
                .await
                .unwrap()
                .is_some()
        );
        let err = lock
            .extend_as(me, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotHeld, "{kind}: {err}");
        assert!(err.to_string().contains("cannot extend"), "{kind}: {err}");
        lock.release_as(Owner::new(2)).await.unwrap();

        assert!(
            lock.acquire_as(me, &AcquireOptions::new())
                .await
                .unwrap()
                .is_some()
        );
        let token = lock.lost_token(me).unwrap();
        assert!(make(&other, &name).force_unlock().await.unwrap(), "{kind}");
        let err = lock
            .extend_as(me, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LockLost, "{kind}: {err}");
        assert!(token.is_cancelled(), "{kind}: no lost signal");
        assert_eq!(pttl(&server, &name), -2, "{kind}: the extend wrote");
        let err = lock.release_as(me).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LockLost, "{kind}: {err}");
        let err = lock.extend_as(me, Duration::ZERO).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{kind}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_extends_and_try_acquire_with_is_none_when_busy_at_the_deadline() {
    let server = RedisServer::start();
    let c = client(&server, ClientOptions::new()).await;
    let other = client(&server, ClientOptions::new()).await;
    let lock = c.lock("guarded").unwrap();
    let options = AcquireOptions::new().lease(Duration::from_millis(300));
    let guard = lock.try_acquire_with(options).await.unwrap().unwrap();
    guard.extend(Duration::from_secs(5)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(450)).await;
    let busy = other
        .lock("guarded")
        .unwrap()
        .try_acquire_with(AcquireOptions::new().wait(Duration::from_millis(100)))
        .await
        .unwrap();
    assert!(busy.is_none(), "taken while held");
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
    let won = other
        .lock("guarded")
        .unwrap()
        .try_acquire_with(AcquireOptions::new().wait(Duration::from_secs(5)))
        .await
        .unwrap();
    won.unwrap().release().await.unwrap();
}
