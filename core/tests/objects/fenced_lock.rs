//! FencedLock: every acquisition (re-entries included) takes the next token.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use crosslock::{AcquireOptions, Client, Owner};
use support::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_across_clients_and_re_entries() {
    let server = RedisServer::start();
    let a = Client::connect(&server.url()).await.unwrap();
    let b = Client::connect(&server.url()).await.unwrap();
    let (la, lb) = (
        a.fenced_lock("ledger").unwrap(),
        b.fenced_lock("ledger").unwrap(),
    );
    let mut last = 0;
    for round in 0..5 {
        let lock = if round % 2 == 0 { &la } else { &lb };
        let guard = lock.acquire().await.unwrap();
        assert!(guard.token() > last, "token {} after {last}", guard.token());
        last = guard.token();
        let inner = lock
            .acquire_token_as(guard.owner(), &AcquireOptions::new())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(inner, last + 1, "a re-entry takes the next token too");
        last = inner;
        lock.release_as(guard.owner()).await.unwrap();
        guard.release().await.unwrap();
    }
    assert_eq!(la.token().await.unwrap(), last);
    let raw: u64 = redis::cmd("GET")
        .arg("redisson_lock_token:{ledger}")
        .query(&mut server.raw())
        .unwrap();
    assert_eq!(raw, last, "Redisson's token key");
    assert!(
        lb.acquire_token_as(Owner::new(5), &AcquireOptions::new())
            .await
            .unwrap()
            .unwrap()
            > last
    );
}
