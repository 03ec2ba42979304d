//! Whether calls go over a lane: the context switches of crosslock's own threads, the routed way
//! (a runtime without an I/O driver), and an application's own runtime.

// Test helpers fail loudly: an unwrap here is a failed test, not a library panic.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

/// An acquire + release of lock `name` that goes the routed way (polled by a runtime without
/// an I/O driver: no lane), and how long it took.
pub async fn routed_pair(
    client: &crosslock::Client,
    name: &str,
) -> (crosslock::Result<()>, Duration) {
    let client = client.clone();
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let lock = client.lock(&name).unwrap();
        let started = Instant::now();
        let pair = runtime.block_on(async { lock.acquire().await?.release().await.map(|_| ()) });
        (pair, started.elapsed())
    })
    .await
    .unwrap()
}

/// An acquire + release of lock `name` both ways (the routed way, then the caller's lane): a
/// line for each that failed or took `limit` or longer; empty when both were prompt.
pub async fn slow_pairs(client: &crosslock::Client, name: &str, limit: Duration) -> Vec<String> {
    let mut slow = Vec::new();
    let (routed, took) = routed_pair(client, name).await;
    if routed.is_err() || took >= limit {
        slow.push(format!("routed pair on '{name}': {routed:?} in {took:?}"));
    }
    let started = Instant::now();
    let on_lane = async { client.lock(name)?.acquire().await?.release().await };
    let on_lane = on_lane.await;
    let took = started.elapsed();
    if on_lane.is_err() || took >= limit {
        slow.push(format!("pair on '{name}': {on_lane:?} in {took:?}"));
    }
    slow
}

/// Pairs of `lock` in quick succession until they make their round trips without crosslock's
/// own threads (a pair the routed way wakes them at least twice): the first calls of a client on
/// a cluster go the routed way while the slot map is read and the lane opens. Fails the test
/// after 15 s.
pub async fn until_on_a_lane(lock: &crosslock::Lock) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let switches = crosslock_thread_switches();
        for _ in 0..20 {
            lock.acquire().await.unwrap().release().await.unwrap();
        }
        if crosslock_thread_switches() - switches < 20 {
            return;
        }
        assert!(Instant::now() < deadline, "no lane in 15 s");
    }
}

/// Context switches so far of crosslock's own runtime threads (named `crosslock-rt`).
pub fn crosslock_thread_switches() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if name.trim() != "crosslock-rt" {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// An application's own runtime as `#[tokio::main]` builds it on this machine: multi-thread, two
/// workers, I/O and timers.
pub fn app_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
