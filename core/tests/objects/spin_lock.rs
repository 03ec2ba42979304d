//! SpinLock: waits without any subscription, with a back-off.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use crosslock::{AcquireOptions, Backoff, Client, Owner};
use support::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_never_subscribes_and_gets_the_lock_after_its_release() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client
        .spin_lock_with("spin", Backoff::constant(Duration::from_millis(20)))
        .unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.acquire_as(
                Owner::new(2),
                &AcquireOptions::new().wait(Duration::from_secs(10)),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(client.subscribed_channels(), 0);
    assert_eq!(server.subscribers("redisson_lock__channel:{spin}"), 0);
    assert!(lock.release_as(Owner::new(1)).await.unwrap());
    assert!(waiter.await.unwrap().unwrap());
    assert!(lock.release_as(Owner::new(2)).await.unwrap());
}

#[test]
fn a_back_off_outside_its_range_is_refused() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = RedisServer::start();
    rt.block_on(async {
        let client = Client::connect(&server.url()).await.unwrap();
        let err = client
            .spin_lock_with(
                "x",
                Backoff::exponential(Duration::ZERO, Duration::from_millis(5)),
            )
            .unwrap_err();
        assert_eq!(err.kind(), crosslock::ErrorKind::InvalidArgument);
        assert_eq!(err.lock_name(), Some("x"));
        assert_eq!(
            err.to_string(),
            "the back-off of spin lock 'x' is exponential from 0 ms to 5 ms: a pause must be \
             longer than zero (a back-off needs 0 < initial ≤ max ≤ 1 h)"
        );
        let err = client
            .spin_lock_with("y", Backoff::constant(Duration::from_secs(7200)))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("a constant 7200 s: a pause must be at most 1 h"),
            "{err}"
        );
    });
}
