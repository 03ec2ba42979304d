//! Behind Redis Sentinel, a master that stops answering (a hung process, a host cut off without
//! a reset: its connections stay open) and is failed over: the client follows the sentinels to
//! the new master, calls made both ways (a caller's own lane, the multiplexed connection) go
//! there, even with a request left unanswered on the stopped master, and a waiter acquires
//! there once the stopped master's lock runs out.
//!
//! Its own group, in a process of its own (`alone!`): it stops a master, and it counts the context
//! switches of crosslock's runtime threads to see calls go over a lane
//! (`support::until_on_a_lane`), which the clients of any other test would add to.

use crate::support;

use std::time::Duration;

use crosslock::{AcquireOptions, Client, ClientOptions};
use support::SentinelGroup;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_master_once_failed_over_is_left_behind() {
    alone!();
    let group = SentinelGroup::start();
    let response_timeout = Duration::from_secs(2);
    let options = ClientOptions::new()
        .connect_timeout(Duration::from_secs(8))
        .response_timeout(response_timeout);
    let client = Client::connect_with(&group.url(), options).await.unwrap();
    let hung_lock = client.lock("hung").unwrap();
    support::until_on_a_lane(&hung_lock).await;
    support::routed_pair(&client, "free").await.0.unwrap();
    // A hold with a short lease, replicated: the new master has it, and it runs out there.
    let held = client
        .lock("held")
        .unwrap()
        .acquire_with(AcquireOptions::new().lease(Duration::from_secs(3)))
        .await
        .unwrap();
    group.sync();

    // The master stops with an acquire on its way over a lane, which its caller gives up.
    let before = group.master_port();
    let index = group.nodes.iter().position(|n| n.port == before).unwrap();
    group.nodes[index].signal(libc::SIGSTOP);
    let attempt = tokio::time::timeout(Duration::from_millis(300), hung_lock.acquire()).await;
    assert!(attempt.is_err(), "an acquire on a stopped master returned");
    let waiter = {
        let lock = client.lock("held").unwrap();
        tokio::spawn(async move {
            lock.acquire_with(AcquireOptions::new().wait(Duration::from_secs(40)))
                .await
        })
    };
    let after = group.wait_for_new_master(before);

    // Within a few calls the client is on the new master, both ways; from then on every call
    // there is prompt.
    let mut failures = Vec::new();
    let mut followed = false;
    for _ in 0..8 {
        let (routed, took) = support::routed_pair(&client, "free").await;
        if routed.is_ok() && took < response_timeout / 2 {
            followed = true;
            break;
        }
        failures.push(format!("routed pair: {routed:?} in {took:?}"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut slow = Vec::new();
    if followed {
        for round in 0..10 {
            let name = format!("after:{}", round % 3);
            slow.extend(support::slow_pairs(&client, &name, response_timeout / 2).await);
        }
    }
    // The waiter, which waited through the failover, acquires on the new master once the
    // replicated hold is released or its lease runs out there.
    drop(held);
    let waited = tokio::time::timeout(Duration::from_secs(45), waiter).await;
    group.nodes[index].signal(libc::SIGCONT);

    assert_ne!(before, after);
    assert!(
        followed,
        "calls still went to the stopped master after the sentinels moved to {after}: \
         {failures:#?}"
    );
    assert!(
        slow.is_empty(),
        "calls failed or waited on the new master: {slow:#?}"
    );
    let guard = waited
        .expect("the waiter neither acquired nor gave up")
        .unwrap()
        .expect("the waiter did not acquire on the new master");
    guard.release().await.unwrap();
    client.close().await;
}
