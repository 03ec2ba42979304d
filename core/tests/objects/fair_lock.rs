//! FairLock: first come, first served; give-ups leave the queue; dead waiters are skipped; live
//! waiters keep their place however long they wait.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ClientOptions, FairLock, Owner};
use support::{RedisServer, until};

/// Starts `owner` waiting on `lock` once the queue has `queued` entries, so waiters enter the queue
/// in a known order; returns the acquire order through `order`.
fn wait_in_line(
    lock: &FairLock,
    owner: u64,
    order: &std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
) -> tokio::task::JoinHandle<()> {
    let (lock, order) = (lock.clone(), order.clone());
    tokio::spawn(async move {
        let me = Owner::new(owner);
        assert!(
            lock.acquire_as(me, &AcquireOptions::new().wait(Duration::from_secs(30)))
                .await
                .unwrap()
        );
        order.lock().unwrap().push(owner);
        tokio::time::sleep(Duration::from_millis(20)).await;
        lock.release_as(me).await.unwrap();
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_acquire_in_the_order_they_queued_and_each_release_wakes_only_the_head() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.fair_lock("fifo").unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, owner) in [17u64, 3, 42, 8, 25].into_iter().enumerate() {
        tasks.push(wait_in_line(&lock, owner, &order));
        until("the waiter to queue", async || {
            lock.queue().await.unwrap().len() == i + 1
        })
        .await;
    }
    let queue = lock.queue().await.unwrap();
    let id = client.id();
    assert_eq!(queue, [17, 3, 42, 8, 25].map(|n| format!("{id}:{n}")));
    let mut raw = server.raw();
    let deadlines: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg("redisson_lock_timeout:{fifo}")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut raw)
        .unwrap();
    assert_eq!(deadlines.len(), 5, "one deadline per waiter");
    lock.release_as(Owner::new(1)).await.unwrap();
    // All at once, so that a task's panic fails the test at once: awaited in turn, a panic while
    // holding (its hold renewed by the watchdog) would leave the tasks before it waiting for ever.
    futures_util::future::try_join_all(tasks).await.unwrap();
    assert_eq!(*order.lock().unwrap(), vec![17, 3, 42, 8, 25]);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut raw).unwrap();
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_leaves_the_queue_and_the_next_moves_up() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.fair_lock("leave").unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let quitter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.acquire_as(
                Owner::new(2),
                &AcquireOptions::new().wait(Duration::from_millis(400)),
            )
            .await
        })
    };
    until("the quitter to queue", async || {
        lock.queue().await.unwrap().len() == 1
    })
    .await;
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let stayer = wait_in_line(&lock, 3, &order);
    until("the stayer to queue", async || {
        lock.queue().await.unwrap().len() == 2
    })
    .await;
    assert!(
        !quitter.await.unwrap().unwrap(),
        "the quitter should have timed out"
    );
    let queue = lock.queue().await.unwrap();
    assert_eq!(
        queue,
        vec![format!("{}:3", client.id())],
        "the quitter is still queued"
    );
    let mut raw = server.raw();
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg("redisson_lock_timeout:{leave}")
        .arg(0)
        .arg(-1)
        .query(&mut raw)
        .unwrap();
    assert_eq!(members, queue, "the quitter's deadline is still there");
    lock.release_as(Owner::new(1)).await.unwrap();
    stayer.await.unwrap();
    assert_eq!(*order.lock().unwrap(), vec![3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_at_the_head_is_skipped_after_its_deadline_without_spinning() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.fair_lock("dead").unwrap();
    // A waiter that died while queued, its deadline 600 ms away.
    let mut raw = server.raw();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let _: () = redis::cmd("RPUSH")
        .arg("redisson_lock_queue:{dead}")
        .arg("ghost:1")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("redisson_lock_timeout:{dead}")
        .arg(now_ms + 600)
        .arg("ghost:1")
        .query(&mut raw)
        .unwrap();
    let before = server.calls("evalsha");
    let started = Instant::now();
    assert!(
        lock.acquire_as(
            Owner::new(1),
            &AcquireOptions::new().wait(Duration::from_secs(10))
        )
        .await
        .unwrap()
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500),
        "the dead head was not respected ({waited:?})"
    );
    let scripts = server.calls("evalsha") - before;
    // Redisson's waiter retries at once in this state (a spin); ours sleeps until the deadline.
    assert!(scripts < 20, "the waiter spun: {scripts} scripts");
    lock.release_as(Owner::new(1)).await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut raw).unwrap();
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_waiter_keeps_its_place_longer_than_the_fair_wait() {
    let server = RedisServer::start();
    // A fair wait of 200 ms: Redisson's waiters would be purged and re-queued at the tail after it.
    let options = ClientOptions::new().fair_lock_wait_timeout(Duration::from_millis(200));
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let lock = client.fair_lock("patient").unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, owner) in [5u64, 6, 7].into_iter().enumerate() {
        let (mine, order) = (lock.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let me = Owner::new(owner);
            assert!(mine.acquire_as(me, &AcquireOptions::new()).await.unwrap());
            order.lock().unwrap().push(owner);
            mine.release_as(me).await.unwrap();
        }));
        until("the waiter to queue", async || {
            lock.queue().await.unwrap().len() == i + 1
        })
        .await;
    }
    tokio::time::sleep(Duration::from_millis(1200)).await; // six fair waits
    assert_eq!(
        lock.queue().await.unwrap().len(),
        3,
        "a live waiter was dropped from the line"
    );
    lock.release_as(Owner::new(1)).await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![5, 6, 7]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_with_a_short_wait_keeps_its_place_when_one_with_no_limit_takes_the_lock() {
    // Redisson moves every waiter's deadline a whole `wait` of the taker (here the default 5 min)
    // earlier, which puts a waiter with a 20 s wait limit past its deadline: it is dropped and
    // re-queued at the tail, behind a waiter that came after it.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.fair_lock("short-wait").unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    let limits = [None, Some(Duration::from_secs(20)), None];
    for (i, (owner, limit)) in [2u64, 3, 4].into_iter().zip(limits).enumerate() {
        let (mine, order) = (lock.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let me = Owner::new(owner);
            let mut options = AcquireOptions::new();
            if let Some(limit) = limit {
                options = options.wait(limit);
            }
            assert!(mine.acquire_as(me, &options).await.unwrap());
            order.lock().unwrap().push(owner);
            tokio::time::sleep(Duration::from_millis(20)).await;
            mine.release_as(me).await.unwrap();
        }));
        until("the waiter to queue", async || {
            lock.queue().await.unwrap().len() == i + 1
        })
        .await;
    }
    lock.release_as(Owner::new(1)).await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![2, 3, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_queues_again_right_after_a_won_wait_reuses_its_channel() {
    // Under contention an owner releases and queues again at once; its channel stays subscribed
    // a moment after a won wait, so the next wait costs no SUBSCRIBE (and no UNSUBSCRIBE before
    // it), and the channel is still left once nobody uses it.
    let server = RedisServer::start();
    let (other, client) = (
        Client::connect(&server.url()).await.unwrap(),
        Client::connect(&server.url()).await.unwrap(),
    );
    let (theirs, mine) = (
        other.fair_lock("again").unwrap(),
        client.fair_lock("again").unwrap(),
    );
    let (them, me) = (Owner::new(1), Owner::new(7));
    let channel = format!("redisson_lock__channel:{{again}}:{}:7", client.id());
    let lease = AcquireOptions::new().lease(Duration::from_secs(60));
    let wait = AcquireOptions::new().wait(Duration::from_secs(30));
    assert!(theirs.acquire_as(them, &lease).await.unwrap());

    let waiting = {
        let (mine, wait) = (mine.clone(), wait.clone());
        tokio::spawn(async move { mine.acquire_as(me, &wait).await.unwrap() })
    };
    until("the waiter to listen on its channel", async || {
        server.subscribers(&channel) == 1
    })
    .await;
    let (subscribes, unsubscribes) = (server.calls("subscribe"), server.calls("unsubscribe"));
    theirs.release_as(them).await.unwrap();
    assert!(waiting.await.unwrap());
    mine.release_as(me).await.unwrap();
    assert!(theirs.acquire_as(them, &lease).await.unwrap());

    // The same owner waits again at once: it joins the channel it kept.
    let waiting = {
        let (mine, wait) = (mine.clone(), wait.clone());
        tokio::spawn(async move { mine.acquire_as(me, &wait).await.unwrap() })
    };
    until("the waiter to queue again", async || {
        mine.queue().await.unwrap().len() == 1
    })
    .await;
    assert_eq!(server.subscribers(&channel), 1);
    assert_eq!(server.calls("subscribe"), subscribes, "subscribed again");
    assert_eq!(server.calls("unsubscribe"), unsubscribes, "left in between");
    theirs.release_as(them).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the second wait was not woken by the release")
            .unwrap()
    );
    mine.release_as(me).await.unwrap();

    // Nobody uses it any more: it is left after the grace.
    until("the channel to be left", async || {
        server.subscribers(&channel) == 0
    })
    .await;
    assert_eq!(server.calls("unsubscribe"), unsubscribes + 1);
    assert_eq!(client.subscribed_channels(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_reentrant_fair_lock_queues_with_fair_lock_waiters_and_refuses_its_holder() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let fair = client.fair_lock("nr-fifo").unwrap();
    let strict = client.non_reentrant_fair_lock("nr-fifo").unwrap();
    assert!(
        strict
            .acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let err = strict
        .acquire_as(Owner::new(1), &AcquireOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), crosslock::ErrorKind::NonReentrant, "{err}");
    assert!(
        err.to_string()
            .contains("non-reentrant fair lock 'nr-fifo'"),
        "{err}"
    );
    let count: String = redis::cmd("HGET")
        .arg("nr-fifo")
        .arg(format!("{}:1", client.id()))
        .query(&mut server.raw())
        .unwrap();
    assert_eq!(count, "1", "the refusal changed Redis");
    // Waiters of both kinds share one queue, served in order.
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, owner) in [5u64, 9, 2, 7].into_iter().enumerate() {
        let order = order.clone();
        let (fair, mine) = (fair.clone(), strict.clone());
        tasks.push(tokio::spawn(async move {
            let me = Owner::new(owner);
            let wait = AcquireOptions::new().wait(Duration::from_secs(30));
            if i % 2 == 0 {
                assert!(mine.acquire_as(me, &wait).await.unwrap());
            } else {
                assert!(fair.acquire_as(me, &wait).await.unwrap());
            }
            order.lock().unwrap().push(owner);
            tokio::time::sleep(Duration::from_millis(20)).await;
            if i % 2 == 0 {
                mine.release_as(me).await.unwrap();
            } else {
                fair.release_as(me).await.unwrap();
            }
        }));
        until("the waiter to queue", async || {
            strict.queue().await.unwrap().len() == i + 1
        })
        .await;
    }
    strict.release_as(Owner::new(1)).await.unwrap();
    // All at once, so that a task's panic fails the test at once: awaited in turn, a panic while
    // holding (its hold renewed by the watchdog) would leave the tasks before it waiting for ever.
    futures_util::future::try_join_all(tasks).await.unwrap();
    assert_eq!(*order.lock().unwrap(), vec![5, 9, 2, 7]);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.raw())
        .unwrap();
    assert!(keys.is_empty(), "left behind: {keys:?}");
}
