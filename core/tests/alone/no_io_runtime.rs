//! A runtime built without an I/O driver (`Builder::…().enable_time()`, no `enable_io`) gets its
//! calls done all the same, over the multiplexed connection, and crosslock's finding out that it
//! has no reactor prints nothing: tokio can only say so by panicking, and that panic is
//! crosslock's own question, caught, not the application's. A panic of the application's still
//! reaches the application's hook.
//!
//! In a process of its own (`alone!`): the test sets the process's panic hook first, before
//! crosslock's first call, as an application's `main` would.

use crate::support;

use std::sync::{Arc, Mutex, PoisonError};

use crosslock::{Client, ClientOptions};
use support::RedisServer;
use tokio::runtime::{Builder, Runtime};

async fn pairs(client: &Client, name: &str) {
    let lock = client.lock(name).unwrap();
    for _ in 0..200 {
        let guard = lock.acquire().await.unwrap();
        assert!(lock.is_locked().await.unwrap());
        guard.release().await.unwrap();
    }
    assert!(!lock.is_locked().await.unwrap());
}

fn run(runtime: &Runtime, server: &RedisServer, name: &str) {
    runtime.block_on(async {
        let client = Client::connect_with(&server.url(), ClientOptions::new())
            .await
            .unwrap();
        pairs(&client, name).await;
        // Tasks on every worker of a multi-thread runtime: each worker's loop asks once.
        let tasks: Vec<_> = (0..4)
            .map(|i| {
                let client = client.clone();
                let name = format!("{name}:{i}");
                tokio::spawn(async move { pairs(&client, &name).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        client.close().await;
    });
}

#[test]
fn a_runtime_without_io_gets_its_calls_done_and_nothing_printed() {
    alone!();
    // The application's hook, set before anything else: every panic it is handed, by message,
    // then reported as usual (so this test's own failures show).
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(message);
        report(info);
    }));
    let server = RedisServer::start();

    let current = Builder::new_current_thread().enable_time().build().unwrap();
    run(&current, &server, "no-io:current");
    let multi = Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    run(&multi, &server, "no-io:multi");
    drop((current, multi));

    let before = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert!(
        before.is_empty(),
        "the application's panic hook was handed crosslock's own, caught panics: {before:?}"
    );
    // The application's own panics still reach its hook.
    let caught = std::panic::catch_unwind(|| panic!("the application's own"));
    assert!(caught.is_err());
    let after = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(after, ["the application's own"]);
}
