//! The exclusion check every topology runs: eight tasks over two clients take turns on one lock,
//! and no two of them are ever inside at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crosslock::Client;

/// Eight tasks, four on each of `clients`, each acquire and release the lock named `name` 25
/// times, with a read-yield-write of a shared counter inside: the test fails on two holders at
/// once, on a lost increment, or on a task still going after 60 s.
pub async fn eight_workers_exclude_each_other(clients: &[Client; 2], name: &str) {
    let inside = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..8 {
        let lock = clients[w % 2].lock(name).unwrap();
        let inside = inside.clone();
        let counter = counter.clone();
        workers.push(tokio::spawn(async move {
            for _ in 0..25 {
                let guard = lock.acquire().await.unwrap();
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                let seen = counter.load(Ordering::SeqCst);
                tokio::task::yield_now().await;
                counter.store(seen + 1, Ordering::SeqCst);
                inside.store(false, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
        }));
    }
    for w in workers {
        tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), 200);
}
