//! PermitExpirableSemaphore: permits with ids and leases; the watchdog keeps a live holder's
//! permit; expired permits come back; release by id from another client.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, LockKind, LostReason};
use support::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_have_ids_stored_as_raw_bytes_and_any_client_may_release_them() {
    let server = RedisServer::start();
    let a = Client::connect(&server.url()).await.unwrap();
    let b = Client::connect(&server.url()).await.unwrap();
    let sem = a.permit_expirable_semaphore("seats").unwrap();
    assert!(sem.try_set_permits(2).await.unwrap());
    let p1 = sem.acquire().await.unwrap();
    let p2 = sem
        .try_acquire(AcquireOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p1.id().len(), 32);
    assert!(
        sem.try_acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap()
            .is_none(),
        "a third permit"
    );
    let members: Vec<Vec<u8>> = redis::cmd("ZRANGE")
        .arg("{seats}:timeout")
        .arg(0)
        .arg(-1)
        .query(&mut server.raw())
        .unwrap();
    assert_eq!(members.len(), 2);
    assert!(
        members.iter().all(|m| m.len() == 16),
        "ids are stored as 16 raw bytes"
    );
    assert_eq!(sem.acquired_permits().await.unwrap(), 2);
    let left = sem.remaining_lease(p2.id()).await.unwrap().unwrap();
    assert!(
        left > Duration::from_secs(50) && left <= Duration::from_secs(60),
        "{left:?}"
    );
    // Another client releases the permit by its id; twice is refused.
    let id = p2.into_id();
    let theirs = b.permit_expirable_semaphore("seats").unwrap();
    theirs.release(&id).await.unwrap();
    assert_eq!(
        theirs.release(&id).await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    assert!(!theirs.try_release(&id).await.unwrap());
    assert_eq!(
        theirs.release("nothex").await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    p1.release().await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_live_holders_permit_and_an_expired_one_comes_back() {
    let server = RedisServer::start();
    let client = Client::connect_with(
        &server.url(),
        ClientOptions::new().watchdog_timeout(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let heard = events.clone();
    client.on_lock_lost(move |lost| heard.lock().unwrap().push(lost));
    let sem = client.permit_expirable_semaphore("kept").unwrap();
    assert!(sem.try_set_permits(2).await.unwrap());
    let kept = sem.acquire().await.unwrap();
    let leased = sem
        .try_acquire(AcquireOptions::new().lease(Duration::from_millis(200)))
        .await
        .unwrap()
        .unwrap();
    let leased_lost = leased.lost().clone();
    let leased_id = leased.id().to_owned();
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(
        !kept.lost().is_cancelled(),
        "a renewed permit was reported lost"
    );
    assert!(
        leased_lost.is_cancelled(),
        "an expired permit's holder was not told"
    );
    assert_eq!(
        sem.available_permits().await.unwrap(),
        1,
        "the expired permit did not come back"
    );
    assert_eq!(
        leased.release().await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    // Someone releases the kept permit behind our back: its holder is told at the next renewal.
    let lost = kept.lost().clone();
    let id = kept.into_id();
    let _ = id; // tracked no more; release it as a foreign client would
    let kept = sem.acquire().await.unwrap();
    Client::connect(&server.url())
        .await
        .unwrap()
        .permit_expirable_semaphore("kept")
        .unwrap()
        .release(kept.id())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), kept.lost().cancelled())
        .await
        .expect("no lost signal");
    assert!(!lost.is_cancelled());
    // The listener heard of both (it runs on a runtime thread, after the token): a permit has no
    // owner, and its holder is its id.
    support::until("the listener heard of both permits", async || {
        events.lock().unwrap().len() == 2
    })
    .await;
    let events = events.lock().unwrap();
    let by_holder = |id: &str| events.iter().find(|e| e.holder == id).cloned();
    for (id, reason) in [
        (&*leased_id, LostReason::Expired),
        (kept.id(), LostReason::Gone),
    ] {
        let event = by_holder(id).unwrap_or_else(|| panic!("no event for {id}: {events:?}"));
        assert_eq!(
            (event.name.as_str(), event.owner, event.kind, event.reason),
            ("kept", None, LockKind::Permit, reason),
            "{event:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_permit_is_back_before_the_clients_next_acquire() {
    // Dropping a `Permit` releases it in the background; the client's next acquire of the same
    // semaphore waits for that release instead of finding the permit still taken.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let sem = client.permit_expirable_semaphore("single").unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    for round in 0..50 {
        let permit = sem.acquire().await.unwrap();
        drop(permit);
        let again = sem
            .try_acquire(AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap();
        assert!(
            again.is_some(),
            "round {round}: the dropped permit was still taken"
        );
        again.unwrap().release().await.unwrap();
    }
    assert_eq!(sem.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_connection_drops_is_retried_and_counts_once() {
    // The connection is dropped as the release is sent, twice: the release is sent again over a
    // new one, and the permit comes back.
    let server = RedisServer::start();
    let proxy = support::Proxy::start(server.port).await;
    let client = Client::connect(&proxy.url()).await.unwrap();
    let sem = client
        .permit_expirable_semaphore("dropped-release")
        .unwrap();
    assert!(sem.try_set_permits(2).await.unwrap());
    let permit = sem.acquire().await.unwrap();
    proxy.cut_on(permit.id().as_bytes(), 2);
    permit.release().await.unwrap();
    assert_eq!(proxy.cuts_left(), 0, "both sends of the release were cut");
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    // This time the release runs, and its reply is lost: the retry finds the permit gone and
    // reports the release done, without counting it twice.
    let permit = sem.acquire().await.unwrap();
    proxy.cut_after(permit.id().as_bytes(), 1);
    permit.release().await.unwrap();
    assert_eq!(proxy.cuts_left(), 0, "the release's reply was cut");
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    assert_eq!(client.watched_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_gets_no_answer_stops_the_renewal() {
    let mut server = RedisServer::start();
    let options = ClientOptions::new()
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300));
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let sem = client.permit_expirable_semaphore("unreleasable").unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    let permit = sem.acquire().await.unwrap();
    assert_eq!(client.watched_locks(), 1);
    server.kill();
    let err = permit.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(
        client.watched_locks(),
        0,
        "a permit whose release failed must not be renewed forever"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_gives_back_every_permit_the_client_holds() {
    // close() releases the client's permits from what their holds keep (the semaphore's name),
    // with the semaphore object long gone: another client then finds every permit available.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let ids = {
        let sem = client.permit_expirable_semaphore("closing").unwrap();
        assert!(sem.try_set_permits(3).await.unwrap());
        let watched = sem.acquire().await.unwrap().detach();
        let leased = sem
            .acquire_with(AcquireOptions::new().lease(Duration::from_secs(60)))
            .await
            .unwrap()
            .detach();
        [watched, leased]
    };
    let seen = other.permit_expirable_semaphore("closing").unwrap();
    assert_eq!(seen.available_permits().await.unwrap(), 1);
    client.close().await;
    assert_eq!(seen.available_permits().await.unwrap(), 3);
    for id in &ids {
        assert!(!seen.try_release(id).await.unwrap(), "{id} was still taken");
    }
}
