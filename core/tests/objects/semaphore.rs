//! Semaphore: permits never over-granted, releases wake waiters, wait limits, cancellation, a
//! multi-permit waiter not starved by single-permit takers, Redisson's layout.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ErrorKind};
use support::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_never_over_granted_and_the_layout_is_redissons() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let sem = client.semaphore("slots").unwrap();
    assert!(sem.try_set_permits(3).await.unwrap());
    assert!(
        !sem.try_set_permits(5).await.unwrap(),
        "try_set_permits must not overwrite"
    );
    let raw: String = redis::cmd("GET")
        .arg("slots")
        .query(&mut server.raw())
        .unwrap();
    assert_eq!(raw, "3");
    let inside = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (sem, inside, most) = (sem.clone(), inside.clone(), most.clone());
            tokio::spawn(async move {
                for _ in 0..10 {
                    sem.acquire(1).await.unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    sem.release(1).await.unwrap();
                }
            })
        })
        .collect();
    // All at once, so that a task's panic fails the test at once: awaited in turn, a panic while
    // holding (its hold renewed by the watchdog) would leave the tasks before it waiting for ever.
    futures_util::future::try_join_all(tasks).await.unwrap();
    assert!(
        most.load(Ordering::SeqCst) <= 3,
        "{} holders at once with 3 permits",
        most.load(Ordering::SeqCst)
    );
    assert_eq!(sem.available_permits().await.unwrap(), 3);
    assert_eq!(client.subscribed_channels(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_a_release_from_another_client() {
    let server = RedisServer::start();
    let a = Client::connect(&server.url()).await.unwrap();
    let b = Client::connect(&server.url()).await.unwrap();
    let sem = a.semaphore("wake").unwrap();
    assert!(sem.try_set_permits(0).await.unwrap());
    let waiter =
        tokio::spawn(async move { sem.try_acquire(2, Duration::from_secs(20)).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = Instant::now();
    b.semaphore("wake").unwrap().release(2).await.unwrap();
    assert!(waiter.await.unwrap());
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "not woken by the release"
    );
    let published: i64 = b
        .semaphore("wake")
        .unwrap()
        .available_permits()
        .await
        .unwrap();
    assert_eq!(published, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_limits_and_cancellation_take_nothing_and_leave_no_subscription() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let sem = client.semaphore("none").unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    let started = Instant::now();
    assert!(
        !sem.try_acquire(2, Duration::from_millis(300))
            .await
            .unwrap()
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    let err = sem
        .acquire_with(2, AcquireOptions::new().wait(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(
        err.to_string().contains("semaphore 'none'") && err.to_string().contains("1 available"),
        "{err}"
    );
    let token = crosslock::CancellationToken::new();
    let waiter = {
        let (sem, token) = (sem.clone(), token.clone());
        tokio::spawn(async move {
            sem.acquire_with(2, AcquireOptions::new().cancel(token))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel();
    assert_eq!(
        waiter.await.unwrap().unwrap_err().kind(),
        ErrorKind::Cancelled
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(client.subscribed_channels(), 0);
    assert_eq!(
        sem.available_permits().await.unwrap(),
        1,
        "a permit went missing"
    );
    let err = sem
        .acquire_with(1, AcquireOptions::new().lease(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_for_several_permits_is_not_starved_by_single_permit_takers() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let sem = client.semaphore("starve").unwrap();
    assert!(sem.try_set_permits(3).await.unwrap());
    // Four takers cycle single permits (one of them always waiting for one): all three
    // are never free at once unless the takers queue behind the waiter that needs them all.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let takers: Vec<_> = (0..4u64)
        .map(|i| {
            let (sem, stop) = (sem.clone(), stop.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(7 * i)).await; // out of step
                while !stop.load(Ordering::SeqCst) {
                    sem.acquire(1).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(17 + 6 * i)).await;
                    sem.release(1).await.unwrap();
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let got = sem.try_acquire(3, Duration::from_secs(5)).await.unwrap();
    assert!(
        got,
        "the 3-permit waiter was starved by single-permit takers"
    );
    sem.release(3).await.unwrap();
    stop.store(true, Ordering::SeqCst);
    for t in takers {
        t.await.unwrap();
    }
    assert_eq!(sem.available_permits().await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_type_under_the_name_is_a_wrong_type() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("a")
        .arg("b")
        .query(&mut server.raw())
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("s")
        .arg("not a number")
        .query(&mut server.raw())
        .unwrap();
    for name in ["h", "s"] {
        let sem = client.semaphore(name).unwrap();
        let err = sem
            .try_acquire(1, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        assert!(
            err.to_string().contains(&format!("semaphore '{name}'")),
            "{err}"
        );
        assert_eq!(
            sem.release(1).await.unwrap_err().kind(),
            ErrorKind::WrongType
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_if_exists_releases_only_into_an_existing_semaphore() {
    let server = RedisServer::start();
    let a = Client::connect(&server.url()).await.unwrap();
    let b = Client::connect(&server.url()).await.unwrap();
    let sem = a.semaphore("maybe").unwrap();
    assert!(!sem.release_if_exists(2).await.unwrap());
    let exists: i64 = redis::cmd("EXISTS")
        .arg("maybe")
        .query(&mut server.raw())
        .unwrap();
    assert_eq!(exists, 0, "release_if_exists created the counter");
    assert_eq!(
        sem.release_if_exists(0).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    // Present: released, and a waiter in another client is woken by it.
    assert!(sem.try_set_permits(0).await.unwrap());
    let waiter = {
        let sem = b.semaphore("maybe").unwrap();
        tokio::spawn(async move { sem.try_acquire(2, Duration::from_secs(20)).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(sem.release_if_exists(3).await.unwrap());
    assert!(waiter.await.unwrap(), "not woken by release_if_exists");
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    // A name holding another type is a wrong type, and is left as it is.
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("not a number")
        .query(&mut server.raw())
        .unwrap();
    let err = a
        .semaphore("text")
        .unwrap()
        .release_if_exists(1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
}
