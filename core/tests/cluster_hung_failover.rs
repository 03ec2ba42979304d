//! On a Redis Cluster, a master that stops answering and is failed over (a hung process, a host
//! cut off without a reset) holds back nothing once its replica has taken over: a request of
//! it left unanswered on a lane no longer makes every command wait, and fail, until the lane is
//! given up a minute later.
//!
//! Its own cluster, and the only test of its binary: it stops a master.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use crosslock::{Client, ClientOptions};
use support::Cluster;

/// The port of the master serving `name`'s slot, as the node at `via` sees it.
fn master_seen_by(cluster: &Cluster, via: u16, name: &str) -> u16 {
    let mut raw = cluster.node(via).raw();
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(name)
        .query(&mut raw)
        .unwrap();
    support::slot_map(&mut raw)
        .unwrap()
        .into_iter()
        .find(|(first, last, _, _)| (*first..=*last).contains(&slot))
        .map(|(_, _, master, _)| master)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_master_once_failed_over_holds_back_no_command() {
    let cluster = Cluster::start();
    let response_timeout = Duration::from_secs(2);
    let options = ClientOptions::new().response_timeout(response_timeout);
    let client = Client::connect_with(&cluster.url(), options).await.unwrap();
    let masters = cluster.masters();
    let (hung, other) = (masters[0], masters[1]);
    let hung_name = support::names_on(&cluster, "hung", hung, false, 1).remove(0);
    let hung_lock = client.lock(&hung_name).unwrap();
    let free = support::names_on(&cluster, "free", hung, true, 4);
    support::until_on_a_lane(&hung_lock).await;
    support::routed_pair(&client, &free[0]).await.0.unwrap();

    // The master stops with an acquire on its way over a lane, which its caller gives up: the
    // request stays in the master's socket with its answer owed.
    cluster.node(hung).signal(libc::SIGSTOP);
    let stopped = Instant::now();
    let attempt = tokio::time::timeout(Duration::from_millis(300), hung_lock.acquire()).await;
    assert!(attempt.is_err(), "an acquire on a stopped master returned");
    // Its replica takes over (the cluster fails a node after 1 s of silence).
    let mut failed_over = false;
    while stopped.elapsed() < Duration::from_secs(30) {
        if master_seen_by(&cluster, other, &hung_name) != hung {
            failed_over = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // From then on, calls on the other masters go on as before, both ways, while the stopped
    // master's lane request stays unanswered. (Once the client's slot map showed the failover,
    // each of them waited the response timeout for that answer, and failed, until the lane was
    // given up a minute after the stop.)
    let mut slow = Vec::new();
    if failed_over {
        let mut round = 0;
        while stopped.elapsed() < Duration::from_secs(15) || round < 4 {
            let name = &free[round % free.len()];
            let (routed, took) = support::routed_pair(&client, name).await;
            if routed.is_err() || took >= response_timeout / 2 {
                slow.push(format!("routed pair on '{name}': {routed:?} in {took:?}"));
            }
            let started = Instant::now();
            let on_lane = async { client.lock(name)?.acquire().await?.release().await };
            let on_lane = on_lane.await;
            let took = started.elapsed();
            if on_lane.is_err() || took >= response_timeout / 2 {
                slow.push(format!("pair on '{name}': {on_lane:?} in {took:?}"));
            }
            round += 1;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    cluster.node(hung).signal(libc::SIGCONT);
    assert!(
        failed_over,
        "the stopped master's replica did not take over within 30 s"
    );
    assert!(
        slow.is_empty(),
        "calls on masters that answer failed or waited after a stopped master was failed over: \
         {slow:#?}"
    );
    client.close().await;
}
