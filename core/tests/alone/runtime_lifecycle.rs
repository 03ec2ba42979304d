//! The process runtime lives while a client does: after the last close its threads are joined,
//! and the next connect builds it again.
//!
//! In a process of its own (`alone!`): the test counts every thread of the process named after
//! crosslock, which the clients of other tests would add to.

use crate::support;

use std::time::{Duration, Instant};

use crosslock::{Client, ClientOptions};
use support::RedisServer;

/// The names of this process's threads that are crosslock's (`crosslock-rt`, `crosslock-stop`,
/// `crosslock-lane`, …).
fn crosslock_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .filter(|name| name.starts_with("crosslock"))
        .collect()
}

/// Waits (a watchdog of 10 s) until no crosslock thread is left; a thread joined may still be
/// listed for a moment while the kernel reaps it.
fn wait_for_no_crosslock_thread(after: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = crosslock_threads();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{after}: crosslock threads still running: {left:?}"
        );
        std::thread::yield_now();
    }
}

async fn connect(server: &RedisServer) -> Client {
    Client::connect_with(&server.url(), ClientOptions::new())
        .await
        .unwrap()
}

async fn use_a_lock(client: &Client, name: &str) {
    let lock = client.lock(name).unwrap();
    let guard = lock.acquire().await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    guard.release().await.unwrap();
}

#[test]
fn the_runtime_threads_end_after_the_last_close_and_come_back_on_the_next_connect() {
    alone!();
    let server = RedisServer::start();

    // Two clients: closing the first leaves the runtime to the second.
    let (first, second) = crosslock::runtime::block_on(async {
        let first = connect(&server).await;
        let second = connect(&server).await;
        use_a_lock(&first, "lifecycle:first").await;
        (first, second)
    });
    assert!(
        crosslock_threads()
            .iter()
            .any(|name| name == "crosslock-rt"),
        "a connected client runs on crosslock's runtime: {:?}",
        crosslock_threads()
    );
    crosslock::runtime::block_on(first.close());
    crosslock::runtime::settle();
    crosslock::runtime::block_on(use_a_lock(&second, "lifecycle:second"));

    // The last close, from a plain thread.
    crosslock::runtime::block_on(second.close());
    crosslock::runtime::settle();
    wait_for_no_crosslock_thread("after the last close from a plain thread");

    // A new connect works, with a runtime of its own; the last close from inside a runtime task
    // (which must not join its own threads) ends them all the same.
    let third = crosslock::runtime::block_on(async {
        let third = connect(&server).await;
        use_a_lock(&third, "lifecycle:third").await;
        third
    });
    let closing = third.clone();
    let closed = crosslock::runtime::spawn(async move { closing.close().await });
    // The task's end and the runtime's shutdown race: it may come back as cancelled.
    let _ = crosslock::runtime::block_on(closed);
    assert!(third.is_closed());
    drop(third);
    crosslock::runtime::settle();
    wait_for_no_crosslock_thread("after the last close from a runtime task");

    // A client on an application's own runtime: crosslock's runtime runs while it is open and
    // goes with its close, while the application's goes on.
    let app = support::app_runtime();
    app.block_on(async {
        let client = connect(&server).await;
        use_a_lock(&client, "lifecycle:app").await;
        client.close().await;
    });
    crosslock::runtime::settle();
    wait_for_no_crosslock_thread("after the last close on an application's runtime");
    app.block_on(async {
        let client = connect(&server).await;
        use_a_lock(&client, "lifecycle:app-again").await;
        // Dropped without a close: its state lets go of the runtime all the same.
    });
    crosslock::runtime::settle();
    wait_for_no_crosslock_thread("after the last client was dropped unclosed");

    // `block_on` keeps the runtime running to the end of its future, past a last close.
    let answer = crosslock::runtime::block_on(async {
        let client = connect(&server).await;
        client.close().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        42
    });
    assert_eq!(answer, 42);
    crosslock::runtime::settle();
    wait_for_no_crosslock_thread("after block_on returned");

    // A Rust program's own keep-alive keeps a handle usable with no client open.
    let keep = crosslock::runtime::KeepAlive::new();
    let handle = crosslock::runtime::handle();
    let client = crosslock::runtime::block_on(connect(&server));
    crosslock::runtime::block_on(client.close());
    crosslock::runtime::settle();
    let answer = handle.block_on(async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        42
    });
    assert_eq!(answer, 42);
    drop(keep);
    crosslock::runtime::settle();
    wait_for_no_crosslock_thread("after the keep-alive was dropped");
}
