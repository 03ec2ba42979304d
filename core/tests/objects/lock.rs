// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, Owner};
use redis::Commands;
use support::RedisServer;

async fn client(server: &RedisServer) -> Client {
    Client::connect(&server.url()).await.unwrap()
}

/// A client whose watchdog lease is `watchdog` (renewed every third of it).
async fn client_with_watchdog(server: &RedisServer, watchdog: Duration) -> Client {
    let options = ClientOptions::new().watchdog_timeout(watchdog);
    Client::connect_with(&server.url(), options).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_writes_redisson_layout_and_release_publishes() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw();
    let mut sub = server.raw();
    let mut pubsub = sub.as_pubsub();
    pubsub
        .subscribe("redisson_lock__channel:{orders:42}")
        .unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();

    let lock = client.lock("orders:42").unwrap();
    let owner = Owner::new(7);
    assert!(
        lock.acquire_as(owner, &AcquireOptions::new())
            .await
            .unwrap()
    );
    let fields: std::collections::HashMap<String, String> = raw.hgetall("orders:42").unwrap();
    let expected_field = format!("{}:7", client.id());
    assert_eq!(
        fields.get(&expected_field).map(String::as_str),
        Some("1"),
        "{fields:?}"
    );
    assert_eq!(fields.len(), 1);
    let pttl: i64 = raw.pttl("orders:42").unwrap();
    assert!(pttl > 29_000 && pttl <= 30_000, "pttl {pttl}");
    uuid_v4(&client.id());

    assert!(lock.release_as(owner).await.unwrap());
    let exists: bool = raw.exists("orders:42").unwrap();
    assert!(!exists);
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "redisson_lock__channel:{orders:42}");
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
}

fn uuid_v4(id: &str) {
    let parsed = uuid::Uuid::parse_str(id).unwrap();
    assert_eq!(parsed.get_version_num(), 4);
    assert_eq!(id, id.to_lowercase());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_counts_holds_and_other_owners_wait() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("re").unwrap();
    let (a, b) = (Owner::new(1), Owner::new(2));
    let once = AcquireOptions::new().wait(Duration::ZERO);
    assert!(lock.acquire_as(a, &once).await.unwrap());
    assert!(lock.acquire_as(a, &once).await.unwrap());
    assert_eq!(lock.hold_count_of(a).await.unwrap(), 2);
    assert!(!lock.acquire_as(b, &once).await.unwrap());
    assert!(!lock.release_as(a).await.unwrap(), "one hold remains");
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.is_held_by(a).await.unwrap());
    assert!(!lock.is_held_by(b).await.unwrap());
    assert!(lock.release_as(a).await.unwrap());
    assert!(!lock.is_locked().await.unwrap());
    assert!(lock.acquire_as(b, &once).await.unwrap());
    lock.release_as(b).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_is_woken_by_release_not_by_expiry() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("handoff").unwrap();
    let holder = Owner::new(1);
    // Held with a 60 s lease: only a release message can wake the waiter in time.
    assert!(
        lock.acquire_as(
            holder,
            &AcquireOptions::new().lease(Duration::from_secs(60))
        )
        .await
        .unwrap()
    );
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let got = lock
                .acquire_as(
                    Owner::new(2),
                    &AcquireOptions::new().wait(Duration::from_secs(30)),
                )
                .await
                .unwrap();
            (got, Instant::now())
        })
    };
    while client.subscribed_channels() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let released_at = Instant::now();
    lock.release_as(holder).await.unwrap();
    let (got, acquired_at) = waiter.await.unwrap();
    assert!(got);
    // Woken by the message: far sooner than the 60 s lease (and the 30 s wait limit).
    assert!(acquired_at.duration_since(released_at) < Duration::from_secs(10));
    assert!(lock.is_held_by(Owner::new(2)).await.unwrap());
    lock.release_as(Owner::new(2)).await.unwrap();
    // The last waiter left: no subscription remains.
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.subscribed_channels() != 0 {
        assert!(Instant::now() < deadline, "subscription left behind");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Scripts the server has run (`EVALSHA` and `EVAL`), from `INFO commandstats`.
fn scripts_run(server: &RedisServer) -> u64 {
    let text: String = redis::from_redis_value(server.command(&["INFO", "commandstats"]))
        .expect("INFO commandstats is text");
    support::scripts_in_commandstats(&text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_waiter_that_keeps_losing_the_race_backs_off_and_still_gets_the_lock() {
    // Every release publishes to every waiting process, and each sends an attempt; with the lock
    // taken again at once, all but one lose. Here the unlock messages come in a flood while the
    // lock stays taken: a young wait answers them paced by its pauses, not one attempt each; a
    // wait past 200 ms answers them all again (its pauses would be what keeps it waiting).
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiting = client(&server).await;
    let name = "herd:flood";
    let held = holder.lock(name).unwrap();
    let first = Owner::new(1);
    assert!(
        held.acquire_as(first, &AcquireOptions::new().lease(Duration::from_secs(60)))
            .await
            .unwrap()
    );
    let lock = waiting.lock(name).unwrap();
    let began = Instant::now();
    let waiter = tokio::spawn(async move {
        let got = lock
            .acquire_as(
                Owner::new(7),
                &AcquireOptions::new().wait(Duration::from_secs(30)),
            )
            .await
            .unwrap();
        (got, lock)
    });
    while waiting.subscribed_channels() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Its attempt after subscribing, too: three scripts so far (the holder's acquire, the
    // waiter's first attempt and that one).
    let deadline = Instant::now() + Duration::from_secs(10);
    while scripts_run(&server) < 3 {
        assert!(
            Instant::now() < deadline,
            "the waiter did not try again after subscribing"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let before = scripts_run(&server);
    let url = server.url();
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let published = Arc::new(AtomicUsize::new(0));
    // A flood: a message every 200 µs or so for 450 ms, and at least 450 of them (a busy machine
    // sends them more slowly, and then the flood lasts longer).
    let flood = {
        let published = published.clone();
        tokio::task::spawn_blocking(move || {
            let mut raw = redis::Client::open(url).unwrap().get_connection().unwrap();
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(450)
                || published.load(Ordering::SeqCst) < 450
            {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "only {published:?} messages went out in 10 s"
                );
                let _: i64 = raw.publish(&channel, "0").unwrap();
                published.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    // While the wait is young (under 200 ms; it began after `began`, so 150 ms after that, which
    // leaves a slow machine most of 150 ms of flood even if its set-up took a while).
    let flood_began = Instant::now();
    tokio::time::sleep_until((began + Duration::from_millis(150)).into()).await;
    let young_took = flood_began.elapsed();
    let young_published = published.load(Ordering::SeqCst) as u64;
    let young = scripts_run(&server) - before;
    // Pauses of 0.5 ms doubling to 8 ms (with jitter): paced by the pauses, not by the messages;
    // one per message would be several times as many.
    let most = u64::try_from(young_took.as_millis()).unwrap() / 3 + 10;
    assert!(
        young_published >= 20,
        "the test could not flood the young wait: {young_published} messages in {young_took:?} \
         (the set-up took {:?})",
        flood_began - began
    );
    assert!(
        young <= most && young * 2 <= young_published,
        "the young waiter made {young} attempts for {young_published} unlock messages in {young_took:?}"
    );
    flood.await.unwrap();
    let aged_published = published.load(Ordering::SeqCst) as u64 - young_published;
    let aged = scripts_run(&server) - before - young;
    // Past 200 ms it answers the messages (those that come while an attempt is out count as one):
    // paced by 8 ms pauses it would answer one in twenty or more.
    assert!(
        aged * 8 >= aged_published,
        "the aged waiter made {aged} attempts for {aged_published} unlock messages"
    );
    // A real release still hands the lock over.
    held.release_as(first).await.unwrap();
    let (got, lock) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter did not get the lock after the release")
        .unwrap();
    assert!(got);
    lock.release_as(Owner::new(7)).await.unwrap();
    holder.close().await;
    waiting.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_with_a_non_atomic_counter() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = client.clone();
        let url = server.url();
        tasks.push(tokio::spawn(async move {
            let lock = client.lock("counter-lock").unwrap();
            let mut raw = redis::Client::open(url)
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            for _ in 0..50 {
                let guard = lock.acquire().await.unwrap();
                let v: Option<i64> = redis::AsyncCommands::get(&mut raw, "counter")
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
                let _: () = redis::AsyncCommands::set(&mut raw, "counter", v.unwrap_or(0) + 1)
                    .await
                    .unwrap();
                guard.release().await.unwrap();
            }
        }));
    }
    // All at once, so that a task's panic fails the test at once: awaited in turn, a panic while
    // holding (its hold renewed by the watchdog) would leave the tasks before it waiting for ever.
    futures_util::future::try_join_all(tasks).await.unwrap();
    let v: i64 = server.raw().get("counter").unwrap();
    assert_eq!(v, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_limit_gives_up_with_timeout_error_naming_holder() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("busy").unwrap();
    let _held = lock
        .acquire_with(AcquireOptions::new().owner(Owner::new(1)))
        .await
        .unwrap();
    let err = lock
        .acquire_with(
            AcquireOptions::new()
                .owner(Owner::new(2))
                .wait(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.lock_name(), Some("busy"));
    assert!(
        err.to_string().contains(&format!("{}:1", client.id())),
        "{err}"
    );
    assert!(err.waited().unwrap() >= Duration::from_millis(200));
    // The timed-out wait left no subscription behind.
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.subscribed_channels() != 0 {
        assert!(
            Instant::now() < deadline,
            "a timed-out wait left its subscription behind"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_lock_past_its_lease_and_reports_loss() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(600)).await;
    let lost = Arc::new(AtomicUsize::new(0));
    let seen = lost.clone();
    client.on_lock_lost(move |l| {
        assert_eq!(l.name, "wd");
        seen.fetch_add(1, Ordering::SeqCst);
    });
    let lock = client.lock("wd").unwrap();
    let guard = lock
        .acquire_with(AcquireOptions::new().owner(Owner::new(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await; // 2.5 leases
    assert!(lock.is_locked().await.unwrap(), "the watchdog renewed it");
    let pttl: i64 = server.raw().pttl("wd").unwrap();
    assert!(pttl > 0 && pttl <= 600);

    let _: () = server.raw().del("wd").unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost().cancelled())
        .await
        .expect("loss reported");
    // The listener runs right after the token is cancelled, on the watchdog's task.
    let deadline = Instant::now() + Duration::from_secs(5);
    while lost.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the lost-lock listener was not called"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(lost.load(Ordering::SeqCst), 1);
    let err = guard.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost);
    // The watchdog was renewing it: a longer lease is no advice here.
    assert!(!err.to_string().contains("longer lease"), "{err}");
    assert!(err.to_string().contains("force-unlocks it"), "{err}");
}

/// The renewal loop is woken only by a hold that needs it earlier than it planned to wake: a
/// lease hold taken while it sleeps out a long watchdog period still hears its loss on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_taken_while_the_watchdog_sleeps_is_still_reported_lost_on_time() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_secs(60)).await;
    let owner = AcquireOptions::new().owner(Owner::new(1));
    // A watchdog hold: the loop now sleeps until its first round, 20 s away.
    let _watched = client
        .lock("sleeping")
        .unwrap()
        .acquire_with(owner.clone())
        .await
        .unwrap();
    let leased = client
        .lock("leased")
        .unwrap()
        .acquire_with(owner.clone().lease(Duration::from_millis(300)))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), leased.lost().cancelled())
        .await
        .expect("the lease's end reported long before the watchdog's next round");
}

/// Whether any hold is watched can change between the loop's look and its sleep: a watchdog hold
/// released and another taken at once must still be renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchdog_hold_taken_right_after_the_last_one_left_is_renewed() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(600)).await;
    let owner = AcquireOptions::new().owner(Owner::new(1));
    for round in 0..20 {
        let first = client.lock(&format!("first:{round}")).unwrap();
        first
            .acquire_with(owner.clone())
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        let name = format!("second:{round}");
        let second = client.lock(&name).unwrap();
        let guard = second.acquire_with(owner.clone()).await.unwrap();
        if round % 5 == 4 {
            tokio::time::sleep(Duration::from_millis(1500)).await; // 2.5 leases
            let pttl: i64 = server.raw().pttl(&name).unwrap();
            assert!(pttl > 0, "round {round}: the watchdog renewed {name}");
            assert!(!guard.lost().is_cancelled());
        }
        guard.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_by_non_holder_changes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("mine").unwrap();
    lock.acquire_as(Owner::new(1), &AcquireOptions::new())
        .await
        .unwrap();
    let before: Vec<(String, String)> = server.raw().hgetall("mine").unwrap();
    let err = lock.release_as(Owner::new(2)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert_eq!(err.holder(), Some(format!("{}:2", client.id()).as_str()));
    assert!(err.to_string().contains("mine"));
    let after: Vec<(String, String)> = server.raw().hgetall("mine").unwrap();
    assert_eq!(before, after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_below_one_millisecond_is_refused_before_touching_redis() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("tiny-lease").unwrap();
    for lease in [Duration::ZERO, Duration::from_micros(999)] {
        let err = lock
            .acquire_with(AcquireOptions::new().lease(lease))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("tiny-lease"), "{err}");
    }
    assert!(!lock.is_locked().await.unwrap());
}
