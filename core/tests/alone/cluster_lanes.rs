//! Lanes on a Redis Cluster: calls from an application's runtime make their round trips over a
//! lane of that runtime to the master serving their slot, and follow the slot when it moves.
//!
//! The test counts the context switches of crosslock's own threads, which every other test of a
//! process would add to: it runs in a process of its own (`alone!`).

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use crosslock::{Client, ClientOptions, Lock};
use redis::Commands;
use support::Cluster;

/// 200 pairs of `lock`, each checked on `port`; crosslock's own threads sit them out.
async fn pairs_on_a_lane(cluster: &Cluster, port: u16, client: &Client, lock: &Lock) {
    let mut raw = cluster.node(port).raw();
    let switches = support::crosslock_thread_switches();
    for _ in 0..200 {
        let guard = lock.acquire().await.unwrap();
        let field = guard.owner().holder(&client.id());
        assert_eq!(raw.hget::<_, _, i64>(lock.name(), &field).unwrap(), 1);
        guard.release().await.unwrap();
    }
    let woken = support::crosslock_thread_switches() - switches;
    assert!(
        woken < 200,
        "crosslock's threads switched {woken} times for 200 pairs (at least 400 without a lane)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_over_a_lane_to_the_master_of_their_slot_and_follow_the_slot_when_it_moves() {
    alone!();
    // Its own cluster: a slot moves. Calls from an application's runtime make their round trips
    // over a lane of that runtime to the master serving the slot; when the slot moves, the lane's
    // reply is a redirect, the call goes the routed way (no error, the hold intact), and the next
    // calls get a lane to the new master.
    let cluster = Cluster::start();
    let options = ClientOptions::new().connect_timeout(Duration::from_secs(8));
    let client = Client::connect_with(&cluster.url(), options).await.unwrap();
    let name = "lanes:moved";
    let lock = client.lock(name).unwrap();
    let first = cluster.master_of(name);
    let second = cluster.masters().into_iter().find(|p| *p != first).unwrap();
    support::until_on_a_lane(&lock).await;
    pairs_on_a_lane(&cluster, first, &client, &lock).await;

    let guard = lock.acquire().await.unwrap();
    tokio::task::block_in_place(|| cluster.move_slot(cluster.key_slot(name), second));
    let moved: HashMap<String, i64> = cluster.node(second).raw().hgetall(name).unwrap();
    assert_eq!(moved.len(), 1, "the hold moved with its slot");
    // Over the old master's lane: redirected, and sent the routed way.
    assert_eq!(lock.hold_count_of(guard.owner()).await.unwrap(), 1);
    guard.release().await.unwrap();
    support::until_on_a_lane(&lock).await;
    pairs_on_a_lane(&cluster, second, &client, &lock).await;
    assert!(!cluster.node(second).raw().exists::<_, bool>(name).unwrap());
    client.close().await;
}
