//! `ClientOptions::wait_for_replicas`: an acquisition returns only once the replicas asked for
//! have it (Redis `WAIT`), and one that too few replicas acknowledged is given back and fails
//! with `Unavailable`, leaving nothing held.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, Owner};
use redis::Commands;
use support::RedisServer;

/// A master and one replica in sync with it: the replica's link is up, and the master has an
/// acknowledged offset from it (until its first acknowledgement after the sync, the master sends
/// it nothing, and `WAIT` cannot count it).
fn replicated() -> (RedisServer, RedisServer) {
    let master = RedisServer::start();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let info = |server: &RedisServer| -> String {
        redis::cmd("INFO")
            .arg("replication")
            .query(&mut server.raw())
            .unwrap()
    };
    loop {
        if info(&replica).contains("master_link_status:up")
            && support::replicas_acknowledged(&info(&master), 1)
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the replica did not sync"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (master, replica)
}

async fn client(master: &RedisServer, replicas: u32) -> Client {
    let options = ClientOptions::new().wait_for_replicas(replicas, Duration::from_millis(300));
    Client::connect_with(&master.url(), options).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acquisition_is_on_the_replica_when_it_returns() {
    let (master, replica) = replicated();
    let client = client(&master, 1).await;
    let mut on_replica = replica.raw();

    let guard = client.lock("sync:lock").unwrap().acquire().await.unwrap();
    let held: std::collections::HashMap<String, i64> = on_replica.hgetall("sync:lock").unwrap();
    assert_eq!(held.values().copied().collect::<Vec<_>>(), vec![1]);
    // A re-entry is waited for too.
    let again = client.lock("sync:lock").unwrap().acquire().await.unwrap();
    let held: std::collections::HashMap<String, i64> = on_replica.hgetall("sync:lock").unwrap();
    assert_eq!(held.values().copied().collect::<Vec<_>>(), vec![2]);
    again.release().await.unwrap();

    let fair = client
        .fair_lock("sync:fair")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert!(on_replica.exists::<_, bool>("sync:fair").unwrap());

    let rw = client.read_write_lock("sync:rw").unwrap();
    let read = rw.read().acquire().await.unwrap();
    let mode: Option<String> = on_replica.hget("sync:rw", "mode").unwrap();
    assert_eq!(mode.as_deref(), Some("read"));

    let semaphore = client.semaphore("sync:sem").unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    semaphore.acquire(2).await.unwrap();
    let left: String = on_replica.get("sync:sem").unwrap();
    assert_eq!(left, "1");

    let pes = client.permit_expirable_semaphore("sync:pes").unwrap();
    assert!(pes.try_set_permits(1).await.unwrap());
    let permit = pes.acquire().await.unwrap();
    let on_lease: i64 = on_replica.zcard("{sync:pes}:timeout").unwrap();
    assert_eq!(on_lease, 1, "the permit is on the replica");

    // Each of the six acquisitions was followed by a WAIT on the master.
    let waits = master.calls("wait");
    assert!(waits >= 6, "{waits} WAIT(s) for six acquisitions");

    permit.release().await.unwrap();
    semaphore.release(2).await.unwrap();
    read.release().await.unwrap();
    fair.release().await.unwrap();
    guard.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_give_the_acquisition_back_and_fail_clearly() {
    let (master, replica) = replicated();
    // Two replicas asked for, one there: no acquisition can be confirmed.
    let client = client(&master, 2).await;
    let lock = client.lock("sync:short").unwrap();
    for wait in [None, Some(Duration::ZERO), Some(Duration::from_secs(5))] {
        let options = match wait {
            None => AcquireOptions::new(),
            Some(w) => AcquireOptions::new().wait(w),
        };
        let err = lock.acquire_as(Owner::new(1), &options).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        let message = err.to_string();
        assert!(
            message.contains("1 of the 2 replica(s)") && message.contains("given back"),
            "{message}"
        );
        assert_eq!(err.lock_name(), Some("sync:short"));
        assert_eq!(err.holder(), Some(client.holder(Owner::new(1)).as_str()));
        // Given back on the master, so on the replica too, and not recorded as held.
        assert!(!master.raw().exists::<_, bool>("sync:short").unwrap());
        assert_eq!(client.watched_locks(), 0);
    }
    // A hold another client took stays untouched by the failed attempts.
    let plain = Client::connect(&master.url()).await.unwrap();
    let held = plain.lock("sync:short").unwrap().acquire().await.unwrap();
    assert!(
        !lock
            .acquire_as(Owner::new(1), &AcquireOptions::new().wait(Duration::ZERO))
            .await
            .unwrap(),
        "busy is busy, not an error"
    );
    held.release().await.unwrap();
    plain.close().await;

    // A stopped replica acknowledges nothing: the same, for one replica asked for.
    let one = client_with_one(&master).await;
    replica.signal(libc::SIGSTOP);
    let err = one
        .lock("sync:stopped")
        .unwrap()
        .acquire()
        .await
        .unwrap_err();
    replica.signal(libc::SIGCONT);
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("0 of the 1 replica(s)"), "{err}");
    assert!(!master.raw().exists::<_, bool>("sync:stopped").unwrap());
    // Back in sync, acquisitions are confirmed again.
    let guard = one.lock("sync:stopped").unwrap().acquire().await.unwrap();
    guard.release().await.unwrap();
    one.close().await;
    client.close().await;
}

/// Every kind's acquisition counts its replicas: each one's win, too few acknowledged, is given
/// back, and its acquire fails the same way as the lock's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_acquisition_too_few_replicas_acknowledged_is_given_back() {
    let (master, _replica) = replicated();
    let client = client(&master, 2).await;
    let mut raw = master.raw();
    let refused = |result: crosslock::Result<()>, name: &str| {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{name}: {err}");
        let message = err.to_string();
        assert!(
            message.contains("1 of the 2 replica(s)") && message.contains("given back"),
            "{name}: {message}"
        );
        // A group lock's error names the group and its values.
        let named = err.lock_name().unwrap_or_default();
        assert!(
            named == name || named.starts_with(&format!("{name}#")),
            "{name}: {named}"
        );
    };

    refused(
        unit(client.fenced_lock("sync:fenced").unwrap().acquire().await),
        "sync:fenced",
    );
    refused(
        unit(client.spin_lock("sync:spin").unwrap().acquire().await),
        "sync:spin",
    );
    refused(
        unit(
            client
                .non_reentrant_lock("sync:nr")
                .unwrap()
                .acquire()
                .await,
        ),
        "sync:nr",
    );
    refused(
        unit(client.fair_lock("sync:fair").unwrap().acquire().await),
        "sync:fair",
    );
    let rw = client.read_write_lock("sync:rw").unwrap();
    refused(unit(rw.read().acquire().await), "sync:rw");
    refused(unit(rw.write().acquire().await), "sync:rw");
    refused(
        unit(
            client
                .group_lock("sync:group", ["a", "b"])
                .unwrap()
                .acquire()
                .await,
        ),
        "sync:group",
    );
    for name in [
        "sync:fenced",
        "sync:spin",
        "sync:nr",
        "sync:fair",
        "sync:rw",
        "sync:group",
    ] {
        assert!(
            !raw.exists::<_, bool>(name).unwrap(),
            "{name} was given back"
        );
    }

    let semaphore = client.semaphore("sync:sem").unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    refused(semaphore.acquire(2).await, "sync:sem");
    let left: String = raw.get("sync:sem").unwrap();
    assert_eq!(left, "3", "the permits were given back");

    let pes = client.permit_expirable_semaphore("sync:pes").unwrap();
    assert!(pes.try_set_permits(1).await.unwrap());
    refused(unit(pes.acquire().await), "sync:pes");
    let on_lease: i64 = raw.zcard("{sync:pes}:timeout").unwrap();
    assert_eq!(on_lease, 0, "the permit was given back");
    assert_eq!(client.watched_locks(), 0);
    client.close().await;
}

/// An acquire's outcome, what it held left out.
fn unit<T>(result: crosslock::Result<T>) -> crosslock::Result<()> {
    result.map(drop)
}

async fn client_with_one(master: &RedisServer) -> Client {
    client(master, 1).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_replicas_is_refused() {
    let options = ClientOptions::new().wait_for_replicas(0, Duration::from_secs(1));
    let err = Client::connect_with("redis://127.0.0.1:1/0", options)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("wait_for_replicas"), "{err}");
}
