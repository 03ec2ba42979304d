//! `Client::watch`: a live view of one object, each change reported once with what caused it.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use crosslock::{AcquireOptions, Client, Owner, Watch, WatchEvent, WatchEventKind};
use support::RedisServer;

const INTERVAL: Duration = Duration::from_millis(50);

/// The next event, or a failure naming what was expected (never waits forever).
async fn next(watch: &mut Watch, expecting: &str) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .unwrap_or_else(|_| panic!("no event within 10 s; expected {expecting}"))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_acquire_reentry_release_force_unlock_and_expiry() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("orders:42").unwrap();
    let me = Owner::new(7);
    let holder = client.holder(me);

    let mut watch = client.watch("orders:42", INTERVAL).await.unwrap();
    assert!(watch.current().holders.is_empty());

    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    let e = next(&mut watch, "acquired").await;
    assert_eq!(e.kind, WatchEventKind::Acquired);
    assert_eq!(e.holder.as_deref(), Some(holder.as_str()));
    assert!(e.detail.starts_with("1 hold, lease"), "{}", e.detail);
    let line = e.to_string();
    assert!(
        line.contains("acquired") && line.contains("orders:42") && line.contains(&holder),
        "{line}"
    );

    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    let e = next(&mut watch, "reentered").await;
    assert_eq!(
        (e.kind, e.detail.as_str()),
        (WatchEventKind::Reentered, "2 holds now")
    );
    assert!(!lock.release_as(me).await.unwrap(), "still held once");
    let e = next(&mut watch, "exited").await;
    assert_eq!(
        (e.kind, e.detail.as_str()),
        (WatchEventKind::Exited, "1 hold left")
    );
    assert!(lock.release_as(me).await.unwrap());
    let e = next(&mut watch, "released").await;
    assert_eq!(e.kind, WatchEventKind::Released);
    assert_eq!(e.holder.as_deref(), Some(holder.as_str()));
    assert!(e.state.holders.is_empty());

    // Held twice by another client, then force-unlocked: two holds gone with one message.
    let theirs = other.lock("orders:42").unwrap();
    for _ in 0..2 {
        assert!(theirs.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    }
    assert_eq!(
        next(&mut watch, "acquired").await.kind,
        WatchEventKind::Acquired
    );
    // The re-entry may land in the same snapshot as the acquire; skip it if it did not.
    assert!(client.force_unlock_any("orders:42").await.unwrap());
    let mut e = next(&mut watch, "force-unlocked").await;
    if e.kind == WatchEventKind::Reentered {
        e = next(&mut watch, "force-unlocked").await;
    }
    assert_eq!(e.kind, WatchEventKind::ForceUnlocked, "{e}");
    assert_eq!(e.holder, Some(other.holder(me)));

    // An explicit short lease that runs out: expired, no message.
    // Long enough that a snapshot sees it held even on a loaded machine.
    let lease = AcquireOptions::new().lease(Duration::from_millis(1000));
    assert!(lock.acquire_as(me, &lease).await.unwrap());
    assert_eq!(
        next(&mut watch, "acquired").await.kind,
        WatchEventKind::Acquired
    );
    let e = next(&mut watch, "expired").await;
    assert_eq!(
        (e.kind, e.holder.as_deref()),
        (WatchEventKind::Expired, Some(holder.as_str()))
    );

    // A delete before the lease ran out: removed.
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    assert_eq!(
        next(&mut watch, "acquired").await.kind,
        WatchEventKind::Acquired
    );
    server.command(&["DEL", "orders:42"]);
    let e = next(&mut watch, "removed").await;
    assert_eq!(e.kind, WatchEventKind::Removed);
    client.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_fair_queue_read_write_modes_and_counters() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let waiter = Client::connect(&server.url()).await.unwrap();

    // A fair lock: a waiter queues, then takes the lock when it is released.
    let fair = client.fair_lock("jobs").unwrap();
    let mut watch = client.watch("jobs", INTERVAL).await.unwrap();
    let guard = fair.acquire().await.unwrap();
    assert_eq!(
        next(&mut watch, "acquired").await.kind,
        WatchEventKind::Acquired
    );
    let theirs = waiter.fair_lock("jobs").unwrap();
    let w = waiter.clone();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let pending = tokio::spawn(async move {
        let g = theirs.acquire().await.unwrap();
        let holder = w.holder(g.owner());
        let _ = done_rx.await;
        g.release().await.unwrap();
        holder
    });
    let e = next(&mut watch, "queued").await;
    assert_eq!(
        (e.kind, e.detail.as_str()),
        (WatchEventKind::Queued, "place 1 of 1")
    );
    let queued = e.holder.clone().unwrap();
    let mine = client.holder(guard.owner());
    guard.release().await.unwrap();
    // The release and the waiter's acquire may land in one snapshot or two.
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let e = next(&mut watch, "released, then acquired").await;
        seen.push((e.kind, e.holder.unwrap()));
    }
    assert!(seen.contains(&(WatchEventKind::Released, mine)), "{seen:?}");
    assert!(
        seen.contains(&(WatchEventKind::Acquired, queued.clone())),
        "{seen:?}"
    );
    done_tx.send(()).unwrap();
    assert_eq!(pending.await.unwrap(), queued);
    // Nobody waits, so this release publishes nothing: the watch still sees it as a release.
    let e = next(&mut watch, "released").await;
    assert_eq!((e.kind, e.holder), (WatchEventKind::Released, Some(queued)));
    drop(watch);

    // A semaphore: every change of the permits is a count event.
    let sem = client.semaphore("pool").unwrap();
    let mut watch = client.watch("pool", INTERVAL).await.unwrap();
    assert!(sem.try_set_permits(3).await.unwrap());
    let e = next(&mut watch, "count").await;
    assert_eq!(
        (e.kind, e.detail.as_str()),
        (WatchEventKind::Count, "none → 3")
    );
    sem.acquire(2).await.unwrap();
    assert_eq!(next(&mut watch, "count").await.detail, "3 → 1");
    sem.release(2).await.unwrap();
    assert_eq!(next(&mut watch, "count").await.detail, "1 → 3");

    assert!(
        client
            .watch("pool", Duration::from_millis(1))
            .await
            .is_err()
    );
    assert!(client.watch("", INTERVAL).await.is_err());
    client.close().await;
    waiter.close().await;
}
