//! The client's connections: the connect timeout, a waiter through a killed subscription
//! connection, a restart and an outage longer than the connect timeout, holder strings, and
//! scripts sent whole once (and again after a flush).

use crate::support;

use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, Owner};
use redis::Commands;
use support::RedisServer;

async fn client(server: &RedisServer) -> Client {
    Client::connect(&server.url()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_fails_within_connect_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let options = ClientOptions::new().connect_timeout(Duration::from_millis(500));
    let err = Client::connect_with(&format!("redis://127.0.0.1:{port}/0"), options)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Waits (bounded) until `client` has a subscription, i.e. a waiter is parked on a message.
async fn until_subscribed(client: &Client) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.subscribed_channels() == 0 {
        assert!(Instant::now() < deadline, "the waiter never subscribed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_survives_a_killed_subscription_connection() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let waiter_client = client(&server).await;
    let held = holder_client.lock("resub").unwrap();
    // A 60 s lease: the waiter can only get the lock in time if a release wakes it.
    held.acquire_as(
        Owner::new(1),
        &AcquireOptions::new().lease(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let waiter = {
        let lock = waiter_client.lock("resub").unwrap();
        tokio::spawn(async move {
            lock.acquire_as(
                Owner::new(2),
                &AcquireOptions::new().wait(Duration::from_secs(30)),
            )
            .await
        })
    };
    until_subscribed(&waiter_client).await;
    // Cut every subscriber connection, then release while the waiter may still be reconnecting:
    // the message can be lost, so the waiter must re-check by itself once it is back.
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut server.raw())
        .unwrap();
    assert!(killed >= 1);
    held.release_as(Owner::new(1)).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("waiter stuck")
        .unwrap()
        .unwrap();
    assert!(got, "the waiter gave up although the lock was released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_waits_out_a_redis_restart() {
    let mut server = RedisServer::start();
    let port = server.port;
    let holder_client = client(&server).await;
    let waiter_client = client(&server).await;
    let lock = holder_client.lock("restart").unwrap();
    lock.acquire_as(
        Owner::new(1),
        &AcquireOptions::new().lease(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let waiter = {
        let lock = waiter_client.lock("restart").unwrap();
        tokio::spawn(async move { lock.acquire_as(Owner::new(2), &AcquireOptions::new()).await })
    };
    until_subscribed(&waiter_client).await;
    // Redis goes away for a moment (losing everything: no persistence), then comes back empty.
    server.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _server = RedisServer::start_on(port);
    // The lock vanished with the restart (no persistence); the waiter, still within its outage
    // tolerance (the 5 s connect timeout), must notice without any release message.
    let got = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("waiter stuck")
        .unwrap();
    assert!(
        got.unwrap(),
        "the waiter gave up although the lock is free again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_reports_an_outage_longer_than_the_connect_timeout() {
    let mut server = RedisServer::start();
    let options = ClientOptions::new().connect_timeout(Duration::from_millis(400));
    let holder_client = client(&server).await;
    let waiter_client = Client::connect_with(&server.url(), options).await.unwrap();
    let lock = holder_client.lock("outage").unwrap();
    lock.acquire_as(
        Owner::new(1),
        &AcquireOptions::new().lease(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let waiter = {
        let lock = waiter_client.lock("outage").unwrap();
        tokio::spawn(async move { lock.acquire_as(Owner::new(2), &AcquireOptions::new()).await })
    };
    until_subscribed(&waiter_client).await;
    server.kill(); // and it stays down
    let err = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("waiter hung")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(err.lock_name(), Some("outage"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_that_share_a_remembered_holder_slot_keep_their_own_holder_strings() {
    // The client remembers holder strings per owner number modulo a small table: owners 3, 19,
    // 35 and 51 share a slot, and a read and a write hold of one owner differ by their suffix.
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw();
    for round in 0..2 {
        for n in [3_u64, 19, 35, 51] {
            let name = format!("slot:{n}:{round}");
            let lock = client.lock(&name).unwrap();
            assert!(
                lock.acquire_as(Owner::new(n), &AcquireOptions::new())
                    .await
                    .unwrap()
            );
            let fields: Vec<String> = raw.hkeys(&name).unwrap();
            assert_eq!(fields, vec![client.holder(Owner::new(n))], "{name}");
            assert!(lock.release_as(Owner::new(n)).await.unwrap(), "{name}");
        }
    }
    let rw = client.read_write_lock("slot:rw").unwrap();
    let me = Owner::new(3);
    assert!(
        rw.write()
            .acquire_as(me, &AcquireOptions::new())
            .await
            .unwrap()
    );
    assert!(
        rw.read()
            .acquire_as(me, &AcquireOptions::new())
            .await
            .unwrap()
    );
    let mut fields: Vec<String> = raw.hkeys("slot:rw").unwrap();
    fields.sort();
    let holder = client.holder(me);
    let mut expected = vec!["mode".to_owned(), holder.clone(), format!("{holder}:write")];
    expected.sort();
    assert_eq!(fields, expected);
    assert!(rw.read().release_as(me).await.unwrap());
    assert!(rw.write().release_as(me).await.unwrap());
    let exists: bool = raw.exists("slot:rw").unwrap();
    assert!(!exists);
}

/// On a fresh connection a burst of calls sends each script whole once, not once per call (each
/// whole script is ~8 KB on the wire and 16 KB of buffer while in flight): 300 acquires at once,
/// then a close that releases all 300 at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_a_fresh_connection_sends_each_script_whole_once() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let client = client(&server).await;
    let locks: Vec<_> = (0..300)
        .map(|i| client.lock(&format!("burst:{i}")).unwrap())
        .collect();
    let options = AcquireOptions::new();
    let acquired =
        futures_util::future::join_all(locks.iter().map(|l| l.acquire_as(Owner::new(1), &options)))
            .await;
    assert!(acquired.into_iter().all(|a| a.unwrap()));
    assert_eq!(server.calls("eval"), 1, "the acquire script, once");
    assert_eq!(client.watched_locks(), 300);
    client.close().await;
    let keys: Vec<String> = raw.keys("burst:*").unwrap();
    assert!(
        keys.is_empty(),
        "close released every lock: {} left",
        keys.len()
    );
    assert_eq!(server.calls("eval"), 2, "and the release script, once");
    assert_eq!(server.calls("evalsha"), 598);
}

/// `SCRIPT FLUSH` behind the client's back: the next call of each script gets `NOSCRIPT` for its
/// `EVALSHA` and sends the script whole, once, and succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_flushed_from_redis_is_sent_whole_again() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let client = client(&server).await;
    let lock = client.lock("flushed").unwrap();
    let me = Owner::new(1);
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    assert!(lock.release_as(me).await.unwrap());
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    let evals = server.calls("eval");
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    let fields: Vec<String> = raw.hkeys("flushed").unwrap();
    assert_eq!(fields, vec![client.holder(me)]);
    assert!(lock.release_as(me).await.unwrap());
    assert_eq!(
        server.calls("eval"),
        evals + 2,
        "each script sent whole once more"
    );
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    assert!(lock.release_as(me).await.unwrap());
    assert_eq!(
        server.calls("eval"),
        evals + 2,
        "and by its SHA1 after that"
    );
}

/// A reconnect a call begins is crosslock's own work, whichever runtime polls the call: the
/// application's runtime ending while the reconnect waits for the server (a test's runtime, a
/// short-lived one) must leave the client working for the calls after it, on any runtime, and
/// crosslock's own tasks unharmed. (redis-rs spawns a reconnect, and the new connection's
/// driver, on the runtime that polls the call that found the connection broken; a timer of a
/// runtime that has shut down panics when polled again, and the shared reconnect then fails
/// every later call with "inner future panicked".)
#[test]
fn a_reconnect_begun_on_a_runtime_that_then_ends_leaves_the_client_working() {
    let mut server = RedisServer::start();
    let port = server.port;
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    };
    let second = runtime();
    // Every call on the client's own connection (no lanes), where reconnects happen.
    let options = ClientOptions::new()
        .lanes(crosslock::Lanes::Off)
        .connect_timeout(Duration::from_secs(5));
    let client = second
        .block_on(Client::connect_with(&server.url(), options))
        .unwrap();
    let lock = client.lock("reconnect-runtime").unwrap();
    second.block_on(lock.is_locked()).unwrap();
    server.kill();
    // The reconnects the lost connection began by itself give up meanwhile (the server is down).
    std::thread::sleep(Duration::from_secs(1));
    let first = runtime();
    first.block_on(async {
        // Calls that find the connection broken and begin reconnects, which wait for the server.
        for _ in 0..40 {
            let _ = tokio::time::timeout(Duration::from_millis(10), lock.is_locked()).await;
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
    });
    drop(first);
    let _server = RedisServer::start_on(port);
    let answered = second.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match tokio::time::timeout(Duration::from_secs(2), lock.is_locked()).await {
                Ok(Ok(locked)) => return locked,
                _ if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                other => panic!("the client never answered again: {other:?}"),
            }
        }
    });
    assert!(!answered);
    // And a hold still renews: crosslock's own tasks were not left on the ended runtime either.
    let guard = second
        .block_on(lock.acquire_with(AcquireOptions::new().owner(Owner::new(1))))
        .unwrap();
    second.block_on(guard.release()).unwrap();
}
