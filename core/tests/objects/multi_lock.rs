//! MultiLock and RedLock over several independent servers.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use crosslock::{
    AcquireOptions, AnyLock, Client, ClientOptions, ErrorKind, MultiLock, Owner, RedLock,
};
use support::RedisServer;

async fn clients(servers: &[RedisServer]) -> Vec<Client> {
    let mut out = Vec::new();
    for s in servers {
        let options = ClientOptions::new()
            .connect_timeout(Duration::from_millis(500))
            .response_timeout(Duration::from_millis(500));
        out.push(Client::connect_with(&s.url(), options).await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_takes_all_or_none() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let cs = clients(&servers).await;
    let multi = MultiLock::new(cs.iter().map(|c| c.lock("m").unwrap().erased()).collect()).unwrap();
    let guard = multi.acquire().await.unwrap();
    for s in &servers {
        let n: i64 = redis::cmd("EXISTS").arg("m").query(&mut s.raw()).unwrap();
        assert_eq!(n, 1);
    }
    guard.release().await.unwrap();
    // One part held elsewhere: the multi-lock takes nothing and gives up.
    assert!(
        cs[1]
            .lock("m")
            .unwrap()
            .acquire_as(Owner::new(99), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let got = multi
        .try_acquire(AcquireOptions::new().wait(Duration::from_millis(300)))
        .await
        .unwrap();
    assert!(got.is_none());
    for (i, s) in servers.iter().enumerate() {
        let n: i64 = redis::cmd("EXISTS").arg("m").query(&mut s.raw()).unwrap();
        assert_eq!(n, i64::from(i == 1), "server {i}");
    }
    cs[1]
        .lock("m")
        .unwrap()
        .release_as(Owner::new(99))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_red_lock_needs_a_majority_and_reports_validity_while_a_multi_lock_names_the_dead_part() {
    let mut servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start()).collect();
    let cs = clients(&servers).await;
    servers[4].kill();
    let parts = || {
        cs.iter()
            .map(|c| c.lock("r").unwrap().erased())
            .collect::<Vec<_>>()
    };
    let red = RedLock::new(parts()).unwrap();
    let lease = Duration::from_secs(10);
    let guard = red
        .acquire_with(
            AcquireOptions::new()
                .wait(Duration::from_secs(5))
                .lease(lease),
        )
        .await
        .unwrap();
    assert_eq!(guard.parts().len(), 4);
    let validity = guard.validity().unwrap();
    assert!(
        validity < lease && validity > lease - Duration::from_secs(3),
        "{validity:?}"
    );
    guard.release().await.unwrap();
    let multi = MultiLock::new(parts()).unwrap();
    let err = multi
        .acquire_with(AcquireOptions::new().wait(Duration::from_secs(2)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("lock 'r'"), "{err}");
    for s in &servers[..4] {
        let n: i64 = redis::cmd("EXISTS").arg("r").query(&mut s.raw()).unwrap();
        assert_eq!(n, 0, "the failed multi-lock kept a part");
    }
    // Three of five down: no majority, nothing held on the two alive.
    servers[3].kill();
    servers[2].kill();
    match RedLock::new(parts())
        .unwrap()
        .try_acquire(AcquireOptions::new().wait(Duration::from_secs(2)))
        .await
    {
        Ok(None) => {}
        Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}"),
        Ok(Some(g)) => panic!("a red lock without a majority: {:?}", g.parts()),
    }
    for s in &servers[..2] {
        let n: i64 = redis::cmd("EXISTS").arg("r").query(&mut s.raw()).unwrap();
        assert_eq!(n, 0, "the failed red lock kept a part");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_a_part_fires_the_multi_lost_signal() {
    let servers: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
    let mut cs = Vec::new();
    for s in &servers {
        cs.push(
            Client::connect_with(
                &s.url(),
                ClientOptions::new().watchdog_timeout(Duration::from_millis(300)),
            )
            .await
            .unwrap(),
        );
    }
    let multi = MultiLock::new(
        cs.iter()
            .map(|c| c.fair_lock("l").unwrap().erased())
            .collect(),
    )
    .unwrap();
    let guard = multi.acquire().await.unwrap();
    cs[1].fair_lock("l").unwrap().force_unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost().cancelled())
        .await
        .expect("no lost signal");
    let _ = guard.release().await;
}

fn exists(server: &RedisServer, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query(&mut server.raw())
        .unwrap();
    n == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_red_lock_with_a_minority_down_is_released_without_asking_the_part_never_taken() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let cs = clients(&servers).await;
    servers[2].kill();
    let red = RedLock::new(cs.iter().map(|c| c.lock("rr").unwrap().erased()).collect()).unwrap();
    let owner = Owner::new(7);
    let options = AcquireOptions::new().wait(Duration::from_secs(5));
    let (_, parts) = red.acquire_as(owner, &options).await.unwrap().unwrap();
    assert_eq!(parts.len(), 2);
    // The guard-less release (the bindings') and the guard's both succeed.
    red.release_as(owner).await.unwrap();
    assert!(!exists(&servers[0], "rr") && !exists(&servers[1], "rr"));
    let guard = red.acquire_with(options).await.unwrap();
    guard.release().await.unwrap();
    assert!(!exists(&servers[0], "rr") && !exists(&servers[1], "rr"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_without_a_wait_limit_fails_naming_a_part_whose_server_is_down() {
    let mut servers: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
    let cs = clients(&servers).await;
    servers[1].kill();
    let multi = MultiLock::new(vec![
        cs[0].lock("first").unwrap().erased(),
        cs[1].lock("second").unwrap().erased(),
    ])
    .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(30), multi.acquire())
        .await
        .expect("the acquire never settled")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("lock 'second'"), "{err}");
    assert!(
        !exists(&servers[0], "first"),
        "the failed acquire kept a part"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_of_a_closed_client_fails_at_once() {
    let servers = [RedisServer::start()];
    let cs = clients(&servers).await;
    let multi = MultiLock::new(vec![cs[0].lock("closed").unwrap().erased()]).unwrap();
    cs[0].close().await;
    let err = tokio::time::timeout(Duration::from_secs(10), multi.acquire())
        .await
        .expect("the acquire never settled")
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
    assert!(err.to_string().contains("lock 'closed'"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_dropped_half_way_gives_back_the_parts_it_took() {
    let servers: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
    let cs = clients(&servers).await;
    let busy = cs[1].lock("b").unwrap();
    assert!(
        busy.acquire_as(Owner::new(99), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let multi = MultiLock::new(vec![
        cs[0].lock("a").unwrap().erased(),
        cs[1].lock("b").unwrap().erased(),
    ])
    .unwrap();
    let task = tokio::spawn(async move { multi.acquire().await.map(|g| g.parts()) });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !exists(&servers[0], "a") {
        assert!(
            std::time::Instant::now() < deadline,
            "the first part was never taken"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while exists(&servers[0], "a") {
        assert!(
            std::time::Instant::now() < deadline,
            "the part taken was kept after the acquire was dropped"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    busy.release_as(Owner::new(99)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_multi_guard_is_released_before_the_owners_next_acquire_of_a_part() {
    // Dropping the guard releases every part in the background; the owner's write acquire of a
    // part it held for reading must not reach Redis first and be refused as an upgrade.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let rw = client.read_write_lock("multi-rw").unwrap();
    let both = MultiLock::new(vec![
        rw.read().erased(),
        client.lock("multi-other").unwrap().erased(),
    ])
    .unwrap();
    let owner = Owner::new(4);
    for round in 0..50 {
        let guard = both
            .acquire_with(AcquireOptions::new().owner(owner))
            .await
            .unwrap();
        drop(guard);
        let write = rw
            .write()
            .acquire_as(owner, &AcquireOptions::new().wait(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(write);
        assert!(rw.write().release_as(owner).await.unwrap());
    }
    let mut raw = server.raw();
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut raw).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The keys `prefix:<i>` that exist, as their numbers.
fn held_parts(server: &RedisServer, prefix: &str) -> Vec<usize> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut server.raw())
        .unwrap();
    let mut parts: Vec<usize> = keys
        .iter()
        .filter_map(|k| k.rsplit(':').next()?.parse().ok())
        .collect();
    parts.sort_unstable();
    parts
}

/// Waits (at most 10 s) until no part `prefix:<i>` is held and `client` watches no lock.
async fn until_nothing_held(server: &RedisServer, client: &Client, prefix: &str, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !held_parts(server, prefix).is_empty() || client.watched_locks() != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {:?} still held, {} watched",
            held_parts(server, prefix),
            client.watched_locks()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn many(client: &Client, prefix: &str, n: usize) -> MultiLock {
    MultiLock::new(
        (0..n)
            .map(|i| client.lock(&format!("{prefix}:{i}")).unwrap().erased())
            .collect(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_of_many_parts_with_one_busy_holds_nothing_beyond_it_and_then_all() {
    // From 8 parts on, a round tries every part at once; with part 20 of 40 busy it keeps only
    // the parts before it while it waits, then takes the rest in order once it is free.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let other = Owner::new(99);
    let busy = client.lock("many:20").unwrap();
    assert!(
        busy.acquire_as(other, &AcquireOptions::new())
            .await
            .unwrap()
    );
    let multi = many(&client, "many", 40);
    let owner = Owner::new(1);

    // Busy for the whole wait: nothing of ours is left, the other holder's part is untouched.
    let options = AcquireOptions::new().wait(Duration::from_millis(300));
    assert!(multi.acquire_as(owner, &options).await.unwrap().is_none());
    assert_eq!(held_parts(&server, "many"), vec![20]);
    assert_eq!(busy.hold_count_of(other).await.unwrap(), 1);
    let channel = "redisson_lock__channel:{many:20}";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.subscribers(channel) != 0 {
        assert!(std::time::Instant::now() < deadline, "still subscribed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // While it waits for part 20, it holds exactly the parts before it.
    let waiting = {
        let multi = multi.clone();
        tokio::spawn(async move {
            let options = AcquireOptions::new().wait(Duration::from_secs(20));
            multi.acquire_as(owner, &options).await
        })
    };
    // It waits on part 20's channel once it has given back what it took beyond it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.subscribers(channel) != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "never waited for part 20"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        held_parts(&server, "many"),
        (0..=20).collect::<Vec<_>>(),
        "while waiting for part 20"
    );
    assert!(busy.release_as(other).await.unwrap());
    let (_, parts) = waiting.await.unwrap().unwrap().expect("acquired");
    assert_eq!(parts.len(), 40);
    assert_eq!(held_parts(&server, "many"), (0..40).collect::<Vec<_>>());
    for i in [0, 20, 39] {
        let part = client.lock(&format!("many:{i}")).unwrap();
        assert_eq!(part.hold_count_of(owner).await.unwrap(), 1, "part {i}");
    }
    multi.release_as(owner).await.unwrap();
    assert!(held_parts(&server, "many").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_of_many_parts_names_the_first_part_of_the_wrong_type_and_keeps_nothing() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let mut raw = server.raw();
    redis::cmd("SET")
        .arg("typed:30")
        .arg("a string")
        .query::<()>(&mut raw)
        .unwrap();
    redis::cmd("SET")
        .arg("typed:35")
        .arg("another")
        .query::<()>(&mut raw)
        .unwrap();
    let multi = many(&client, "typed", 40);
    let err = multi
        .try_acquire(AcquireOptions::new().wait(Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert!(err.to_string().contains("lock 'typed:30'"), "{err}");
    assert_eq!(held_parts(&server, "typed"), vec![30, 35]);
    let value: String = redis::cmd("GET").arg("typed:30").query(&mut raw).unwrap();
    assert_eq!(value, "a string");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_of_many_free_parts_is_reentrant_and_released_whole() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let multi = many(&client, "whole", 1_000);
    let owner = Owner::new(3);
    let options = AcquireOptions::new().wait(Duration::from_secs(10));
    for _ in 0..2 {
        assert!(multi.acquire_as(owner, &options).await.unwrap().is_some());
    }
    let part = client.lock("whole:999").unwrap();
    assert_eq!(part.hold_count_of(owner).await.unwrap(), 2);
    multi.release_as(owner).await.unwrap();
    assert_eq!(part.hold_count_of(owner).await.unwrap(), 1);
    assert_eq!(held_parts(&server, "whole").len(), 1_000);
    multi.release_as(owner).await.unwrap();
    assert!(held_parts(&server, "whole").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_of_many_parts_takes_the_halves_of_a_read_write_lock_in_the_order_given() {
    // Both halves of one read-write lock among many parts: the order they are listed in decides,
    // as when parts are taken one by one (Redisson's order): the write lock, then the read lock,
    // is a downgrade and is taken; the read lock, then the write lock, would be an upgrade and is
    // refused (at once: it would wait for itself), whatever order tries sent all at once would
    // reach Redis in.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let rw = client.read_write_lock("halves:rw").unwrap();
    let with_halves = |first: Arc<dyn AnyLock>, second: Arc<dyn AnyLock>| {
        let mut parts: Vec<_> = (0..20)
            .map(|i| client.lock(&format!("halves:{i}")).unwrap().erased())
            .collect();
        parts.insert(12, second);
        parts.insert(3, first);
        MultiLock::new(parts).unwrap()
    };
    let owner = Owner::new(5);
    let upgrade = with_halves(rw.read().erased(), rw.write().erased());
    let e = upgrade
        .acquire_as(owner, &AcquireOptions::new().wait(Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UpgradeRefused, "{e}");
    assert!(e.to_string().contains("nothing is held"), "{e}");
    until_nothing_held(&server, &client, "halves", "after the refused upgrade").await;
    assert!(!exists(&server, "halves:rw"));

    let downgrade = with_halves(rw.write().erased(), rw.read().erased());
    assert!(
        downgrade
            .acquire_as(owner, &AcquireOptions::new().wait(Duration::from_secs(5)))
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(held_parts(&server, "halves").len(), 20);
    assert_eq!(rw.write().hold_count_of(owner).await.unwrap(), 1);
    assert_eq!(rw.read().hold_count_of(owner).await.unwrap(), 1);
    downgrade.release_as(owner).await.unwrap();
    until_nothing_held(&server, &client, "halves", "after the release").await;
    assert!(!exists(&server, "halves:rw"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_of_many_parts_dropped_half_way_still_releases_every_part() {
    // Releases go out 256 at a time: dropped after its first poll, the parts whose release had
    // not begun are released in the background too, not left held and renewed.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let multi = many(&client, "dropped", 2_000);
    let owner = Owner::new(5);
    let options = AcquireOptions::new().wait(Duration::from_secs(10));
    assert!(multi.acquire_as(owner, &options).await.unwrap().is_some());
    assert_eq!(client.watched_locks(), 2_000);
    let mut release = Box::pin(multi.release_as(owner));
    let pending =
        std::future::poll_fn(|cx| std::task::Poll::Ready(release.as_mut().poll(cx).is_pending()))
            .await;
    assert!(pending, "2,000 releases finished in one poll");
    drop(release);
    until_nothing_held(&server, &client, "dropped", "after the dropped release").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_of_many_parts_aborted_at_any_moment_leaves_nothing_held() {
    // Aborted while trying all parts at once, while giving back the ones beyond a busy part, or
    // while waiting for it: every part it took is given back.
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let other = Owner::new(99);
    let busy = client.lock("aborted:150").unwrap();
    for round in 0..30u64 {
        let with_busy = round % 2 == 1;
        if with_busy {
            assert!(
                busy.acquire_as(other, &AcquireOptions::new())
                    .await
                    .unwrap()
            );
        }
        let multi = many(&client, "aborted", 200);
        let task = tokio::spawn(async move {
            let options = AcquireOptions::new().wait(Duration::from_secs(20));
            multi.acquire_as(Owner::new(1), &options).await
        });
        tokio::time::sleep(Duration::from_micros(700 * round)).await;
        task.abort();
        let finished = matches!(task.await, Ok(Ok(Some(_))));
        if with_busy {
            assert!(busy.release_as(other).await.unwrap());
        }
        if finished {
            // Acquired before the abort came: released as usual.
            many(&client, "aborted", 200)
                .release_as(Owner::new(1))
                .await
                .unwrap();
        }
        until_nothing_held(&server, &client, "aborted", &format!("round {round}")).await;
    }
}

/// A red lock stands while it holds a majority of its parts: a lost minority leaves `is_lost`,
/// the guard's signal and the release agreeing that it was held (the release succeeds, releasing
/// the rest); a loss that leaves less than a majority makes all three say lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_red_lock_with_a_lost_minority_is_not_lost_and_releases_what_remains() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut cs = Vec::new();
    for s in &servers {
        let options = ClientOptions::new().watchdog_timeout(Duration::from_millis(300));
        cs.push(Client::connect_with(&s.url(), options).await.unwrap());
    }
    let parts = |name: &str| -> Vec<Arc<dyn AnyLock>> {
        cs.iter().map(|c| c.lock(name).unwrap().erased()).collect()
    };
    let lose = async |i: usize, name: &str, owner: Owner| {
        let part = cs[i].lock(name).unwrap();
        part.force_unlock().await.unwrap();
        // The renewal finds it gone.
        support::until("the part found lost", async || part.is_lost(owner)).await;
    };
    // Three of three taken, one lost: still a majority.
    let owner = Owner::new(3);
    let red = RedLock::new(parts("minority")).unwrap();
    let options = AcquireOptions::new().owner(owner);
    red.acquire_as(owner, &options).await.unwrap().unwrap();
    lose(0, "minority", owner).await;
    assert!(
        !red.is_lost(owner),
        "a lost minority made the red lock lost"
    );
    red.release_as(owner).await.unwrap();
    assert!((0..3).all(|i| !exists(&servers[i], "minority")));
    // The guard: its signal and its release agree too.
    let guard = red.acquire_with(options.clone()).await.unwrap();
    lose(2, "minority", owner).await;
    assert!(
        !guard.lost().is_cancelled(),
        "the guard: a lost minority made it lost"
    );
    guard.release().await.unwrap();
    assert!((0..3).all(|i| !exists(&servers[i], "minority")));

    // Two of three taken (the third held elsewhere), one of them lost: no majority any more.
    let other = Client::connect(&servers[2].url()).await.unwrap();
    let elsewhere = other.lock("majority").unwrap().acquire().await.unwrap();
    let red = RedLock::new(parts("majority")).unwrap();
    let wait = options.wait(Duration::from_millis(600));
    let (_, taken) = red.acquire_as(owner, &wait).await.unwrap().unwrap();
    assert_eq!(taken.len(), 2);
    lose(0, "majority", owner).await;
    assert!(
        red.is_lost(owner),
        "one of two parts taken lost: not a majority, but not lost"
    );
    let err = red.release_as(owner).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert!(
        !exists(&servers[1], "majority"),
        "the part still held was not released"
    );
    let guard = red.acquire_with(wait).await.unwrap();
    lose(1, "majority", owner).await;
    assert!(
        guard.lost().is_cancelled(),
        "the guard: not lost without a majority"
    );
    let err = guard.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert!(!exists(&servers[0], "majority"));
    elsewhere.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_red_lock_kept_from_its_majority_by_busy_parts_times_out_though_a_minority_is_down() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let cs = clients(&servers).await;
    let others = clients(&servers[1..]).await;
    for c in &others {
        assert!(
            c.lock("busy-red")
                .unwrap()
                .acquire_as(Owner::new(1), &AcquireOptions::new())
                .await
                .unwrap()
        );
    }
    servers[2].kill();
    let red = RedLock::new(
        cs.iter()
            .map(|c| c.lock("busy-red").unwrap().erased())
            .collect(),
    )
    .unwrap();
    // Two of three parts answered "held": busy, whatever the third part's server does.
    for _ in 0..2 {
        let err = red
            .acquire_with(AcquireOptions::new().wait(Duration::from_millis(700)))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    }
}

fn pttl_of(server: &RedisServer, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.raw())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_sets_every_part_and_is_lost_when_a_part_is() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let cs = clients(&servers).await;
    let multi = MultiLock::new(cs.iter().map(|c| c.lock("x").unwrap().erased()).collect()).unwrap();
    let short = AcquireOptions::new().lease(Duration::from_millis(300));
    let mut guard = multi.acquire_with(short.clone()).await.unwrap();
    guard.extend(Duration::from_secs(5)).await.unwrap();
    assert!(guard.validity().unwrap() > Duration::from_secs(4));
    for s in &servers {
        assert!(pttl_of(s, "x") > 3000);
    }
    // A force-unlocked part: the multi-lock's extend is lost, naming it.
    assert!(cs[2].lock("x").unwrap().force_unlock().await.unwrap());
    let err = guard.extend(Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert_eq!(err.lock_name(), Some("x"));
    assert!(guard.lost().is_cancelled());
    assert_eq!(
        guard.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );

    // A red lock stands while a majority was extended; the type-level call acts for an owner.
    let red = RedLock::new(cs.iter().map(|c| c.lock("r").unwrap().erased()).collect()).unwrap();
    let me = Owner::new(5);
    let err = red.extend_as(me, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    assert!(red.acquire_as(me, &short).await.unwrap().is_some());
    assert!(cs[0].lock("r").unwrap().force_unlock().await.unwrap());
    let validity = red.extend_as(me, Duration::from_secs(5)).await.unwrap();
    assert!(validity > Duration::from_secs(4));
    assert!(pttl_of(&servers[1], "r") > 3000 && pttl_of(&servers[2], "r") > 3000);
    assert!(!red.is_lost(me));
    red.release_as(me).await.unwrap();
}
