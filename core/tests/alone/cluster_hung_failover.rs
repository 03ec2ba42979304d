//! On a Redis Cluster, a master that stops answering and is failed over (a hung process, a host
//! cut off without a reset) holds back nothing once its replica has taken over: calls for its
//! slots reach the replica, the routed way too, and a request of it left unanswered on a lane
//! no longer makes every command wait, and fail, until the lane is given up a minute later.
//!
//! Its own cluster, in a process of its own (`alone!`): it stops a master, and it counts the
//! context switches of crosslock's runtime threads to see calls go over a lane
//! (`support::until_on_a_lane`), which the clients of any other test would add to.

use crate::support;

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
    alone!();
    let cluster = Cluster::start();
    let response_timeout = Duration::from_secs(2);
    let options = ClientOptions::new().response_timeout(response_timeout);
    let client = Client::connect_with(&cluster.url(), options).await.unwrap();
    let masters = cluster.masters();
    let (hung, other) = (masters[0], masters[1]);
    let hung_name = support::names_on(&cluster, "hung", hung, false, 1).remove(0);
    let hung_lock = client.lock(&hung_name).unwrap();
    let free = support::names_on(&cluster, "free", hung, true, 4);
    let moved = support::names_on(&cluster, "moved", hung, false, 1).remove(0);
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

    // The routed way (redis-rs's cluster connection) reads the cluster's map again only on a
    // redirect or a broken connection, neither of which a stopped master gives: it kept sending
    // the stopped master's slots there, each command failing after the response timeout, for as
    // long as the master stayed stopped. Now a command that gets no answer makes the client
    // check the map. Calls for those slots may still fail until then (and the re-read may make
    // routed calls wait once, up to the response timeout, on the stopped master); within a few
    // they reach the replica that took over.
    let mut recovered = false;
    let mut failures = Vec::new();
    for _ in 0..6 {
        if !failed_over {
            break;
        }
        let (routed, took) = support::routed_pair(&client, &moved).await;
        if routed.is_ok() && took < response_timeout / 2 {
            recovered = true;
            break;
        }
        failures.push(format!("routed pair on '{moved}': {routed:?} in {took:?}"));
    }

    // From then on, calls go on as before on every master, both ways, the stopped master's
    // slots included, while its lane request stays unanswered. (Once the client's slot map
    // showed the failover, each call waited the response timeout for that answer, and failed,
    // until the lane was given up a minute after the stop.)
    let mut slow = Vec::new();
    if recovered {
        let measured = Instant::now();
        let names: Vec<&String> = free.iter().chain([&moved]).collect();
        let mut round = 0;
        while measured.elapsed() < Duration::from_secs(12) || round < names.len() {
            let name = names[round % names.len()];
            slow.extend(support::slow_pairs(&client, name, response_timeout / 2).await);
            round += 1;
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    }
    cluster.node(hung).signal(libc::SIGCONT);
    assert!(
        failed_over,
        "the stopped master's replica did not take over within 30 s"
    );
    assert!(
        recovered,
        "calls for a stopped master's slots still went to it after its replica took over: \
         {failures:#?}"
    );
    assert!(
        slow.is_empty(),
        "calls failed or waited after a stopped master was failed over: {slow:#?}"
    );
    client.close().await;
}
