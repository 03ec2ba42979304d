//! On a Redis Cluster, a watchdog renewal round that fails on one master (down, or not answering)
//! is retried for what that master did not renew: the masters that answered are renewed once a
//! period as usual, not again at every retry (a master down for minutes used to cost the others
//! a renewal per retry, several times their usual rate). And the down master's renewals go
//! nowhere else: the cluster connection sent them to another node of its shard or any node (its
//! own could not be reached), where they found nothing, and were sent again by slot.
//!
//! Its own cluster: it kills a master, and counts the renewals the other masters see (only this
//! test's client renews there, so the tests running beside it in this binary do not add to them).

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use crosslock::{Client, ClientOptions};
use support::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_renews_only_the_locks_of_the_master_that_failed() {
    let mut cluster = Cluster::start();
    let watchdog = Duration::from_secs(6);
    let period = watchdog / 3;
    let options = ClientOptions::new()
        .connect_timeout(Duration::from_secs(8))
        .watchdog_timeout(watchdog);
    let client = Client::connect_with(&cluster.url(), options).await.unwrap();
    // Not a seed of the client's URL: the slot map is read from a seed that answers.
    let seeds = [cluster.nodes[0].port, cluster.nodes[1].port];
    let mut masters = cluster.masters();
    masters.sort_by_key(|port| seeds.contains(port));
    let down_master = masters[0];
    assert!(!seeds.contains(&down_master), "every master is a seed");
    // The killed master stays the master of its slots (its replica does not take over), and the
    // other masters go on serving theirs meanwhile.
    let replica = cluster
        .slots()
        .into_iter()
        .find(|range| range.2 == down_master)
        .unwrap()
        .3[0];
    cluster
        .node(replica)
        .command(&["CONFIG", "SET", "cluster-replica-no-failover", "yes"]);
    for node in &cluster.nodes {
        node.command(&["CONFIG", "SET", "cluster-require-full-coverage", "no"]);
    }

    // Two batches' worth of locks on the master that goes down.
    let mut down = Vec::new();
    for name in support::names_on(&cluster, "down", down_master, false, 200) {
        down.push(client.lock(&name).unwrap().acquire().await.unwrap());
    }
    let mut kept = Vec::new();
    for &master in &masters[1..] {
        let name = support::names_on(&cluster, "kept", master, false, 1).remove(0);
        let guard = client.lock(&name).unwrap().acquire().await.unwrap();
        kept.push((master, name, guard));
    }
    // A first round renews everything (and loads the renewal script on every master); from
    // then on, count the other nodes' renewals and scripts.
    tokio::time::sleep(period + period / 4).await;
    for &node in masters[1..].iter().chain([&replica]) {
        cluster.node(node).command(&["CONFIG", "RESETSTAT"]);
    }

    cluster
        .nodes
        .iter_mut()
        .find(|node| node.port == down_master)
        .unwrap()
        .kill();
    let window = Duration::from_secs(10);
    tokio::time::sleep(window).await;
    // The renewals of the lock a master holds: its `PEXPIRE`s (run by the renewal script when
    // the lock is there). Scripts do not tell: the killed master's renewals, which the cluster
    // connection sends to another node when it cannot reach the slot's own, run there too (and
    // find nothing to renew).
    let renewals: Vec<(u16, u64, u64)> = masters[1..]
        .iter()
        .map(|&master| {
            let node = cluster.node(master);
            (
                master,
                node.calls("pexpire"),
                node.calls("eval") + node.calls("evalsha"),
            )
        })
        .collect();
    let replica_scripts = {
        let node = cluster.node(replica);
        node.calls("eval") + node.calls("evalsha")
    };
    let renewed = support::leases_on_masters(&cluster, &kept);
    client.close().await;

    support::assert_renewed(renewed);
    // One renewal a period, as without a fault: 5 in the window (and one more if a round falls
    // on each end of it). A renewal at every retry (the killed master's renewals fail at once
    // and are retried at once, then backing off up to a quarter period) made 14.
    let per_period = (window.as_millis() / period.as_millis()) as u64;
    let expected = per_period - 2..=per_period + 1;
    for (master, count, scripts) in renewals {
        assert!(
            expected.contains(&count),
            "the lock on master {master} was renewed {count} times in {window:?} while another \
             master did not answer (renewal period {period:?}): expected {expected:?}"
        );
        // One script a round, its own. The killed master's renewals, sent there by the cluster
        // connection at every retry, made 14 (7 with one lock there).
        assert!(
            expected.contains(&scripts),
            "master {master} ran {scripts} scripts in {window:?} (renewal period {period:?}): \
             expected its own renewals only, {expected:?}"
        );
    }
    assert_eq!(
        replica_scripts, 0,
        "the replica of the killed master ran scripts: its renewals were sent there"
    );
}
