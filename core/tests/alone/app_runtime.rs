//! A Rust program's own tokio runtime (`#[tokio::main]`, `#[tokio::test]`) makes its calls' round
//! trips itself, over lanes its reactor watches, and gets exactly the results, errors and
//! clean-up of the multiplexed connection: on both runtime flavours, with many tasks at once,
//! after the server killed connections or timed them out, when a reply is lost, and when the
//! runtime or the client goes away.
//!
//! Each test runs in a process of its own (`alone!`): two of them count the context switches of
//! crosslock's runtime threads, which the clients of any test beside them would add to.

use crate::support;

use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, Lock, Owner};
use redis::Commands;
use support::RedisServer;
use tokio::runtime::{Builder, Runtime};

fn current_thread() -> Runtime {
    Builder::new_current_thread().enable_all().build().unwrap()
}

async fn connect(server: &RedisServer, options: ClientOptions) -> Client {
    Client::connect_with(&server.url(), options).await.unwrap()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn pair(lock: &Lock) {
    let guard = lock.acquire().await.unwrap();
    guard.release().await.unwrap();
}

/// Pairs in quick succession until a lane of this runtime has opened (one more connection than
/// `before`), as the first calls take the multiplexed connection while it opens.
async fn until_a_lane(server: &RedisServer, lock: &Lock, before: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.normal_connections() <= before {
        assert!(Instant::now() < deadline, "no lane opened in 10 s");
        for _ in 0..20 {
            pair(lock).await;
        }
    }
    for _ in 0..20 {
        pair(lock).await;
    }
}

fn round_trips_stay_on(runtime: Runtime) {
    let server = RedisServer::start();
    runtime.block_on(async {
        let client = connect(&server, ClientOptions::new()).await;
        let lock = client.lock("app:here").unwrap();
        let mut raw = server.raw();
        let before = server.normal_connections();
        until_a_lane(&server, &lock, before).await;

        // Crosslock's own threads sit these calls out: without the lane every round trip wakes
        // one of them (the connection's driver writes the request and reads the reply there).
        let switches = support::crosslock_thread_switches();
        for _ in 0..200 {
            let guard = lock.acquire().await.unwrap();
            let field = guard.owner().holder(&client.id());
            assert_eq!(raw.hget::<_, _, i64>("app:here", &field).unwrap(), 1);
            guard.release().await.unwrap();
        }
        let woken = support::crosslock_thread_switches() - switches;
        assert!(
            woken < 200,
            "crosslock's threads switched {woken} times for 200 pairs (at least 400 without a lane)"
        );
        assert!(!raw.exists::<_, bool>("app:here").unwrap());
        client.close().await;
    });
}

#[test]
fn a_current_thread_runtime_makes_its_round_trips_itself() {
    alone!();
    round_trips_stay_on(current_thread());
}

#[test]
fn a_multi_thread_runtime_makes_its_round_trips_itself() {
    alone!();
    round_trips_stay_on(support::app_runtime());
}

#[test]
fn many_tasks_at_once_each_get_their_own_reply() {
    alone!();
    let server = RedisServer::start();
    let runtime = support::app_runtime();
    runtime.block_on(async {
        let client = connect(&server, ClientOptions::new()).await;
        let other = connect(&server, ClientOptions::new()).await;
        let before = server.normal_connections();
        until_a_lane(&server, &client.lock("app:warm").unwrap(), before).await;

        // Every other lock is held elsewhere: the replies interleave wins and refusals.
        let mut busy = Vec::new();
        for i in (0..40).step_by(2) {
            busy.push(
                other
                    .lock(&format!("app:c{i}"))
                    .unwrap()
                    .acquire()
                    .await
                    .unwrap(),
            );
        }
        for round in 0..5 {
            let tasks: Vec<_> = (0..40)
                .map(|i| {
                    let lock = client.lock(&format!("app:c{i}")).unwrap();
                    tokio::spawn(async move {
                        let owner = Owner::new(1000 + i);
                        let options = AcquireOptions::new().owner(owner).wait(Duration::ZERO);
                        let won = match lock.acquire_with(options).await {
                            Ok(guard) => {
                                assert_eq!(lock.hold_count_of(owner).await.unwrap(), 1);
                                guard.release().await.unwrap();
                                true
                            }
                            Err(e) => {
                                assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
                                false
                            }
                        };
                        (i, won)
                    })
                })
                .collect();
            for task in tasks {
                let (i, won) = task.await.unwrap();
                assert_eq!(won, i % 2 == 1, "lock {i} in round {round}");
            }
        }
        for guard in busy {
            guard.release().await.unwrap();
        }
        let mut raw = server.raw();
        for i in 0..40 {
            assert!(!raw.exists::<_, bool>(format!("app:c{i}")).unwrap());
        }
        client.close().await;
        other.close().await;
    });
}

#[test]
fn many_first_calls_of_a_script_at_once_all_succeed() {
    alone!();
    // A script's first calls go out as EVALSHA on a lane before its first, whole, run (sent on
    // another lane or connection) has reached the server: those answered NOSCRIPT are sent
    // whole. With more calls than their lane takes at once, or the lane gone, that resend goes
    // the usual way instead of failing with NOSCRIPT.
    let server = RedisServer::start();
    support::app_runtime().block_on(async {
        let client = connect(&server, ClientOptions::new()).await;
        let before = server.normal_connections();
        until_a_lane(&server, &client.lock("app:warm").unwrap(), before).await;
        for round in 0..20 {
            // A fresh server each round: every script is new to it again.
            server.command(&["SCRIPT", "FLUSH"]);
            let tasks: Vec<_> = (0..200)
                .map(|i| {
                    let lock = client.fenced_lock(&format!("app:first{i}")).unwrap();
                    tokio::spawn(async move {
                        let guard = lock.acquire().await?;
                        guard.release().await
                    })
                })
                .collect();
            for task in tasks {
                task.await
                    .unwrap()
                    .unwrap_or_else(|e| panic!("round {round}: a first call failed: {e}"));
            }
        }
        client.close().await;
    });
}

#[test]
fn connections_the_server_kills_or_times_out_cost_no_error() {
    alone!();
    let server = RedisServer::start_with(&["--timeout", "1"]);
    current_thread().block_on(async {
        let client = connect(&server, ClientOptions::new()).await;
        let lock = client.lock("app:killed").unwrap();
        let before = server.normal_connections();
        for _ in 0..3 {
            // A lane surely exists, just used: the kill must not cost an error.
            until_a_lane(&server, &lock, before).await;
            server.command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
            pair(&lock).await;
        }
        // Closed by the server while idle (`timeout 1`).
        until_a_lane(&server, &lock, before).await;
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        pair(&lock).await;
        assert!(!server.raw().exists::<_, bool>("app:killed").unwrap());
        client.close().await;
    });
}

#[test]
fn an_acquire_whose_reply_is_lost_holds_the_lock_once_or_not_at_all() {
    alone!();
    let server = RedisServer::start();
    current_thread().block_on(async {
        let options = ClientOptions::new().response_timeout(Duration::from_millis(300));
        let client = connect(&server, options).await;
        let lock = client.lock("app:lost").unwrap();
        let before = server.normal_connections();
        for _ in 0..3 {
            // The server stops with the acquire on its way over the lane: the call stops
            // waiting after the response timeout and settles what the lost request did once the
            // server answers again, behind that request (it is on another connection).
            until_a_lane(&server, &lock, before).await;
            server.signal(libc::SIGSTOP);
            let acquire = lock.acquire_with(AcquireOptions::new().wait(Duration::from_secs(10)));
            let resume = async {
                tokio::time::sleep(Duration::from_millis(600)).await;
                server.signal(libc::SIGCONT);
            };
            let (result, ()) = tokio::join!(acquire, resume);
            match result {
                Ok(guard) => {
                    assert_eq!(lock.hold_count_of(guard.owner()).await.unwrap(), 1);
                    guard.release().await.unwrap();
                }
                Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}"),
            }
            // Nothing left behind either way: no second hold from the lost request.
            let deadline = Instant::now() + Duration::from_secs(5);
            while server.raw().exists::<_, bool>("app:lost").unwrap() {
                assert!(
                    Instant::now() < deadline,
                    "the lost acquire left the lock held"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        pair(&lock).await;
        client.close().await;
    });
}

#[test]
fn lanes_close_with_their_runtime_and_connections_with_the_client() {
    alone!();
    let server = RedisServer::start();
    let client = crosslock::runtime::block_on(connect(&server, ClientOptions::new()));
    let lock = client.lock("app:closing").unwrap();
    let before = server.normal_connections();

    for runtime in [current_thread(), support::app_runtime()] {
        runtime.block_on(until_a_lane(&server, &lock, before));
        drop(runtime);
        wait_until("the runtime's lanes closed", || {
            server.normal_connections() == before
        });
    }

    let runtime = support::app_runtime();
    runtime.block_on(until_a_lane(&server, &lock, before));
    runtime.block_on(client.close());
    // Its own connections and its lanes, while the client and its lock objects live on: only
    // this test's connection is left.
    wait_until("the client's connections closed", || {
        server.normal_connections() == 1
    });
    assert!(client.is_closed());
    let e = runtime.block_on(lock.acquire()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(e.to_string().contains("closed"), "{e}");
    assert_eq!(server.normal_connections(), 1);
    drop(runtime);
}
