//! On a Redis Cluster, one master that stops answering holds back only what concerns it: the
//! routed commands for its own slots wait for a lane request of it left without an answer (so
//! that nothing overtakes it), and the commands, watchdog renewals and releases on close for the
//! other masters' slots go on as before.
//!
//! Its own cluster, in a process of its own (`alone!`): it stops a master, and it counts the
//! context switches of crosslock's threads to see calls go over a lane.

use crate::support;

use std::time::{Duration, Instant};

use crosslock::{Client, ClientOptions};
use redis::Commands;
use support::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_stops_answering_holds_back_nothing_of_the_other_masters() {
    alone!();
    let cluster = Cluster::start();
    let response_timeout = Duration::from_secs(4);
    // Shorter than the response timeout: a round that waited out the stopped master's response
    // timeout would renew the other masters' holds after their leases ran out.
    let watchdog = Duration::from_secs(3);
    let options = ClientOptions::new()
        .connect_timeout(Duration::from_secs(8))
        .response_timeout(response_timeout)
        .watchdog_timeout(watchdog)
        .watchdog_batch_size(10);
    let client = Client::connect_with(&cluster.url(), options).await.unwrap();
    // The master with the lowest port: the renewals of its holds come first in a round.
    let stuck_master = cluster.masters()[0];
    let stuck = client
        .lock(&support::names_on(&cluster, "stuck", stuck_master, false, 1)[0])
        .unwrap();
    let free_name = support::names_on(&cluster, "free", stuck_master, true, 1).remove(0);
    // 1,000 holds renewed on the master that will stop (100 batches; more than a closing client
    // releases at once), and one on each other.
    let mut guards = Vec::new();
    for name in support::names_on(&cluster, "held", stuck_master, false, 1000) {
        guards.push(client.lock(&name).unwrap().acquire().await.unwrap());
    }
    let kept_since = Instant::now();
    let mut kept = Vec::new();
    for master in cluster.masters().into_iter().skip(1) {
        let name = support::names_on(&cluster, "kept", master, false, 1).remove(0);
        let guard = client.lock(&name).unwrap().acquire().await.unwrap();
        kept.push((master, name, guard));
    }
    // Both ways work while every master answers.
    support::until_on_a_lane(&stuck).await;
    support::routed_pair(&client, &free_name).await.0.unwrap();
    // The watchdog's first round (a third of the watchdog timeout after the first hold) has
    // renewed the holds on the other masters: their PTTL is back above what it would have
    // decayed to without it.
    support::until("a first renewal round", async || {
        let unrenewed = watchdog.saturating_sub(kept_since.elapsed()).as_millis() as i64;
        kept_since.elapsed() > watchdog / 3
            && kept.iter().all(|(master, name, _)| {
                let pttl: i64 = cluster.node(*master).raw().pttl(name).unwrap();
                pttl > unrenewed + 500
            })
    })
    .await;

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
    let (pair, took) = support::routed_pair(&client, &free_name).await;
    // The holds on the other masters are renewed all along. (Their renewals used to queue
    // behind the stopped master's batches, 8 at a time, each waiting out the response timeout:
    // their next renewal came after their lease had run out. Later each round waited, once, for
    // the stopped master's first batch until the response timeout, longer than these leases; a
    // renewal now waits a renewal period at most.)
    tokio::time::sleep_until((stopped + watchdog + Duration::from_secs(4)).into()).await;
    let renewed = support::leases_on_masters(&cluster, &kept);
    // Closing the client releases the locks on the other masters. (Their releases used to wait
    // for a place among the 256 sent at once, which the stopped master's took, each waiting out
    // the response timeout, close's limit: they were left to their leases.)
    client.close().await;
    let left: Vec<String> = kept
        .iter()
        .filter(|(master, name, _)| cluster.node(*master).raw().exists(name).unwrap())
        .map(|(_, name, _)| name.clone())
        .collect();
    cluster.node(stuck_master).signal(libc::SIGCONT);

    pair.unwrap();
    assert!(
        took < response_timeout / 2,
        "a pair on a master that answers took {took:?} while another master did not answer"
    );
    support::assert_renewed(renewed);
    assert!(
        left.is_empty(),
        "closing the client left {left:?}, on masters that answer, to their leases while \
         another master did not answer"
    );
    drop(guards);
}
