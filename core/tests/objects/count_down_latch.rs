//! CountDownLatch: waiters are released by the count-down to zero, from any client.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ErrorKind};
use support::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiter_opens_when_the_count_reaches_zero() {
    let server = RedisServer::start();
    let a = Client::connect(&server.url()).await.unwrap();
    let b = Client::connect(&server.url()).await.unwrap();
    let latch = a.count_down_latch("ready").unwrap();
    assert!(latch.try_set_count(2).await.unwrap());
    assert!(!latch.try_set_count(5).await.unwrap());
    let count: String = redis::cmd("GET")
        .arg("ready")
        .query(&mut server.raw())
        .unwrap();
    assert_eq!(count, "2");
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let latch = latch.clone();
            tokio::spawn(async move {
                latch
                    .open_within(AcquireOptions::new().wait(Duration::from_secs(20)))
                    .await
                    .unwrap()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let theirs = b.count_down_latch("ready").unwrap();
    assert_eq!(theirs.count_down().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(waiters.iter().all(|w| !w.is_finished()), "opened at 1");
    let opened = Instant::now();
    assert_eq!(theirs.count_down().await.unwrap(), 0);
    for w in waiters {
        assert!(w.await.unwrap());
    }
    assert!(opened.elapsed() < Duration::from_secs(5));
    assert_eq!(latch.count().await.unwrap(), 0);
    assert_eq!(a.subscribed_channels(), 0);
    latch.wait().await.unwrap(); // an open latch returns at once
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_limit_passes_on_a_closed_latch() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let latch = client.count_down_latch("closed").unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let err = latch
        .wait_with(AcquireOptions::new().wait(Duration::from_millis(200)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(
        err.to_string().contains("latch 'closed'") && err.to_string().contains("count 1"),
        "{err}"
    );
    assert!(latch.delete().await.unwrap());
    latch.wait().await.unwrap();
}
