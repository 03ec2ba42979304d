//! Regressions for failures found in review: cancellation of re-entrant and already-won
//! acquires, renewal racing re-acquisition, and lost replies.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, Owner};
use redis::Commands;
use support::{Proxy, RedisServer, until};

/// Holds back every other client's commands for `ms` (CLIENT PAUSE), so a command sent
/// meanwhile is answered only afterwards.
fn stall(server: &RedisServer, ms: u64) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("ALL")
        .query(&mut server.raw())
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_reentrant_acquire_keeps_the_outer_hold() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("nested").unwrap();
    let me = Owner::new(1);
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());

    stall(&server, 500);
    let token = crosslock::CancellationToken::new();
    let nested = {
        let lock = lock.clone();
        let options = AcquireOptions::new().cancel(token.clone());
        tokio::spawn(async move { lock.acquire_as(me, &options).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel(); // while the re-entrant attempt is stuck in the stalled server
    let err = nested.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);

    // Only the nested hold was given back.
    assert_eq!(lock.hold_count_of(me).await.unwrap(), 1);
    let other = lock
        .acquire_as(Owner::new(2), &AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap();
    assert!(
        !other,
        "another owner got the lock while the outer hold was still in force"
    );
    assert!(
        lock.release_as(me).await.unwrap(),
        "the outer release must succeed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_an_acquire_whose_first_attempt_is_in_flight_gives_the_lock_back() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    // Load the scripts first, so the one poll below sends an EVALSHA that runs as it is.
    let warm = client.lock("warm-up").unwrap();
    assert!(
        warm.acquire_as(Owner::new(9), &AcquireOptions::new())
            .await
            .unwrap()
    );
    warm.release_as(Owner::new(9)).await.unwrap();
    let lock = client.lock("won-then-dropped").unwrap();
    let me = Owner::new(1);
    let options = AcquireOptions::new();
    let mut acquiring = Box::pin(lock.acquire_as(me, &options));
    // Poll once so the attempt is sent, then let it win without ever claiming the result. The
    // server is paused meanwhile, so the attempt is surely still in flight after that poll (on a
    // busy machine, an unpaused server could answer before the poll returns).
    stall(&server, 300);
    let first =
        std::future::poll_fn(|cx| std::task::Poll::Ready(acquiring.as_mut().poll(cx))).await;
    assert!(first.is_pending(), "one poll only starts the acquire task");
    let mut raw = server.raw();
    let field = client.holder(me);
    until("the acquire to win", async || {
        raw.hexists::<_, _, bool>("won-then-dropped", &field)
            .unwrap()
    })
    .await;
    drop(acquiring);
    until("the won lock to be given back", async || {
        !raw.exists::<_, bool>("won-then-dropped").unwrap()
    })
    .await;
    until("the hold to leave the watchdog", async || {
        client.watched_locks() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retaking_a_lock_in_a_loop_is_never_reported_lost() {
    let server = RedisServer::start();
    let options = ClientOptions::new()
        .watchdog_timeout(Duration::from_millis(300))
        .watchdog_batch_size(1);
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let lost = Arc::new(AtomicUsize::new(0));
    let seen = lost.clone();
    client.on_lock_lost(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    let lock = client.lock("loop").unwrap();
    let me = Owner::new(1);
    let until = Instant::now() + Duration::from_secs(2);
    let mut rounds = 0;
    while Instant::now() < until {
        assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
        assert!(
            lock.release_as(me).await.unwrap(),
            "round {rounds}: the hold was lost"
        );
        rounds += 1;
    }
    assert!(rounds > 10);
    assert_eq!(
        lost.load(Ordering::SeqCst),
        0,
        "a renewal racing a re-acquire was taken for a loss"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_connection_does_not_fail_the_next_acquire_or_release() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("killed").unwrap();
    let me = Owner::new(1);
    let mut raw = server.raw();
    // The server drops our idle command connection behind our back.
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut raw)
        .unwrap();
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut raw)
        .unwrap();
    assert!(lock.release_as(me).await.unwrap());
    let exists: bool = raw.exists("killed").unwrap();
    assert!(!exists);
    assert_eq!(client.watched_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_fails_stops_the_renewal() {
    let mut server = RedisServer::start();
    let options = ClientOptions::new()
        .connect_timeout(Duration::from_millis(300))
        .watchdog_timeout(Duration::from_millis(600));
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let lock = client.lock("unreleasable").unwrap();
    let me = Owner::new(1);
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    assert_eq!(client.watched_locks(), 1);
    server.kill();
    let err = lock.release_as(me).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(
        client.watched_locks(),
        0,
        "a hold whose release failed must not be renewed forever"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_waiting_acquire_after_its_loop_won_gives_the_lock_back() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("waited-won-dropped").unwrap();
    let (holder, waiter) = (Owner::new(1), Owner::new(2));
    assert!(
        lock.acquire_as(
            holder,
            &AcquireOptions::new().lease(Duration::from_secs(60))
        )
        .await
        .unwrap()
    );
    let options = AcquireOptions::new();
    let mut acquiring = Box::pin(lock.acquire_as(waiter, &options));
    // Poll until the waiter is parked in its background loop (subscribed), never claiming.
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.subscribed_channels() == 0 {
        assert!(Instant::now() < deadline, "the waiter never subscribed");
        let polled =
            std::future::poll_fn(|cx| std::task::Poll::Ready(acquiring.as_mut().poll(cx))).await;
        assert!(polled.is_pending());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    lock.release_as(holder).await.unwrap();
    let mut raw = server.raw();
    let field = client.holder(waiter);
    until("the waiter's loop to win", async || {
        raw.hexists::<_, _, bool>("waited-won-dropped", &field)
            .unwrap()
    })
    .await;
    drop(acquiring);
    until("the won lock to be given back", async || {
        !raw.exists::<_, bool>("waited-won-dropped").unwrap()
    })
    .await;
    until("the hold to leave the watchdog", async || {
        client.watched_locks() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_goes_on_when_its_subscribe_gets_no_answer() {
    // The connection a waiter subscribes on is dropped as it sends SUBSCRIBE, twice (the server
    // killed it just then; then the new one too). The wait must subscribe again over the next
    // connection and win once the lock is released; not fail while its wait limit and the
    // outage allow.
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port).await;
    let client = Client::connect(&proxy.url()).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let held = other.lock("cut-sub").unwrap().acquire().await.unwrap();
    proxy.cut_on(b"SUBSCRIBE", 2);
    let lock = client.lock("cut-sub").unwrap();
    let waiter = tokio::spawn(async move {
        let options = AcquireOptions::new().wait(Duration::from_secs(10));
        lock.acquire_as(Owner::new(1), &options).await
    });
    until(
        "both SUBSCRIBEs to be cut, or the wait to end",
        async || proxy.cuts_left() == 0 || waiter.is_finished(),
    )
    .await;
    until("the waiter to subscribe, or the wait to end", async || {
        server.subscribers("redisson_lock__channel:{cut-sub}") == 1 || waiter.is_finished()
    })
    .await;
    held.release().await.unwrap();
    let won = waiter.await.unwrap();
    assert!(
        matches!(won, Ok(true)),
        "the wait failed instead of going on: {won:?}"
    );
    // And the failed SUBSCRIBEs left no subscription behind.
    until("the channel to be left", async || {
        server.subscribers("redisson_lock__channel:{cut-sub}") == 0
    })
    .await;
    assert_eq!(client.subscribed_channels(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_left_as_its_connection_drops_is_not_subscribed_again() {
    // The last waiter of a channel leaves (it won the lock at a release) just as the
    // subscription connection drops: the UNSUBSCRIBE never reaches the server, or the server
    // runs it and its answer is lost (a `CLIENT KILL TYPE pubsub` at that moment). The
    // connection comes back subscribed to what the server had confirmed on it; the channel
    // nobody waits on must not stay subscribed there.
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port).await;
    let client = Client::connect(&proxy.url()).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let channel = |name: &str| format!("redisson_lock__channel:{{{name}}}");
    let wait_for = |name: &str| {
        let lock = client.lock(name).unwrap();
        tokio::spawn(async move {
            let options = AcquireOptions::new().wait(Duration::from_secs(10));
            lock.acquire_as(Owner::new(1), &options).await
        })
    };
    for (round, after_sending) in [false, true, false, true].into_iter().enumerate() {
        let name = format!("left-{round}");
        let probe = format!("probe-{round}");
        let held = other.lock(&name).unwrap().acquire().await.unwrap();
        let probe_held = other.lock(&probe).unwrap().acquire().await.unwrap();
        let waiter = wait_for(&name);
        until("the waiter to subscribe", async || {
            server.subscribers(&channel(&name)) == 1
        })
        .await;
        if after_sending {
            proxy.cut_after(b"UNSUBSCRIBE", 1);
        } else {
            proxy.cut_on(b"UNSUBSCRIBE", 1);
        }
        held.release().await.unwrap();
        let won = waiter.await.unwrap();
        assert!(matches!(won, Ok(true)), "round {round}: {won:?}");
        until("the UNSUBSCRIBE to be cut", async || proxy.cuts_left() == 0).await;
        // Another waiter subscribes over the connection that came back: by then that connection
        // has made its own subscriptions again.
        let probing = wait_for(&probe);
        until(
            "the probe to subscribe over the new connection",
            async || server.subscribers(&channel(&probe)) == 1,
        )
        .await;
        until("the left channel to be unsubscribed on it", async || {
            server.subscribers(&channel(&name)) == 0
        })
        .await;
        probe_held.release().await.unwrap();
        assert!(matches!(probing.await.unwrap(), Ok(true)));
        until("every channel to be left", async || {
            server.subscribers(&channel(&probe)) == 0
        })
        .await;
        let release = client.lock(&name).unwrap().release_as(Owner::new(1)).await;
        assert!(matches!(release, Ok(true)), "{release:?}");
        let release = client.lock(&probe).unwrap().release_as(Owner::new(1)).await;
        assert!(matches!(release, Ok(true)), "{release:?}");
    }
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .query(&mut server.raw())
        .unwrap();
    assert!(channels.is_empty(), "left subscribed: {channels:?}");
    assert_eq!(client.subscribed_channels(), 0);
}
