//! On a Redis Cluster, one master that stops answering holds back the commands for its own
//! slots only: a lane request of it left without an answer makes the routed commands for its
//! slots wait (so that nothing overtakes it), and the commands for the other masters' slots go
//! on at once.
//!
//! Its own cluster, and the only test of its binary: it stops a master.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use crosslock::{Client, ClientOptions, Lock};
use support::Cluster;

/// Pairs of `lock` in quick succession until they make their round trips without crosslock's
/// own threads (a pair the routed way wakes them at least twice): the first calls go the routed
/// way while the slot map is read and the lane opens.
async fn until_on_a_lane(lock: &Lock) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let switches = support::crosslock_thread_switches();
        for _ in 0..20 {
            lock.acquire().await.unwrap().release().await.unwrap();
        }
        if support::crosslock_thread_switches() - switches < 20 {
            return;
        }
        assert!(Instant::now() < deadline, "no lane in 15 s");
    }
}

/// An acquire + release of lock `name` that goes the routed way (polled by a runtime without
/// an I/O driver: no lane), and how long it took.
async fn routed_pair(client: &Client, name: &str) -> (crosslock::Result<()>, Duration) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_stops_answering_holds_back_no_command_for_the_other_masters() {
    let cluster = Cluster::start();
    let response_timeout = Duration::from_secs(4);
    let options = ClientOptions::new()
        .connect_timeout(Duration::from_secs(8))
        .response_timeout(response_timeout);
    let client = Client::connect_with(&cluster.url(), options).await.unwrap();
    let stuck_name = "stuck:a";
    let stuck_master = cluster.master_of(stuck_name);
    let free_name = (0..)
        .map(|i| format!("free:{i}"))
        .find(|name| cluster.master_of(name) != stuck_master)
        .unwrap();
    // Both ways work while every master answers.
    let stuck = client.lock(stuck_name).unwrap();
    until_on_a_lane(&stuck).await;
    routed_pair(&client, &free_name).await.0.unwrap();

    // The master stops (as a process that hangs, or a host cut off without a reset) with an
    // acquire on its way over a lane. Its caller gives up; the call's round trip waits out the
    // response timeout, and then the request stays in the master's socket with its answer
    // owed: the commands for that master's slots now wait for it (nothing may overtake it).
    cluster.node(stuck_master).signal(libc::SIGSTOP);
    let stopped = Instant::now();
    let attempt = tokio::time::timeout(Duration::from_millis(300), stuck.acquire()).await;
    assert!(attempt.is_err(), "an acquire on a stopped master returned");
    tokio::time::sleep_until((stopped + response_timeout + Duration::from_secs(1)).into()).await;

    // A routed command for another master's slot goes on at once. (It used to wait, up to the
    // response timeout, for the stopped master's overdue answer, and then fail as unanswered.)
    let (pair, took) = routed_pair(&client, &free_name).await;
    cluster.node(stuck_master).signal(libc::SIGCONT);
    pair.unwrap();
    assert!(
        took < response_timeout / 2,
        "a pair on a master that answers took {took:?} while another master did not answer"
    );
    client.close().await;
}
