//! The wake-up check every topology runs: for each waiting object kind, a waiter on client `b`
//! is let in by a release on client `a`, never by a timeout.

use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client};

/// Waits until `b` subscribed to one more channel than `before` (its waiter is waiting on a
/// message now).
async fn subscribed(b: &Client, before: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.subscribed_channels() <= before {
        assert!(Instant::now() < deadline, "the waiter never subscribed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// For a lock, a fair lock, a read-write lock (two readers behind a writer), a semaphore, a
/// permit-expirable semaphore and a count-down latch named `<prefix>:<kind>`: `a` holds with a
/// lease far longer than the test, `b` waits (20 s at most) and must get in once `a` releases.
/// `while_waiting` runs with the lock's waiter subscribed, given the lock's channel.
pub async fn release_wakes_every_kind(
    a: &Client,
    b: &Client,
    prefix: &str,
    while_waiting: impl FnOnce(&str),
) {
    let long = AcquireOptions::new().lease(Duration::from_secs(120));
    let wait = AcquireOptions::new().wait(Duration::from_secs(20));

    let name = format!("{prefix}:lock");
    let held = a
        .lock(&name)
        .unwrap()
        .acquire_with(long.clone())
        .await
        .unwrap();
    let before = b.subscribed_channels();
    let waiter = {
        let lock = b.lock(&name).unwrap();
        let wait = wait.clone();
        tokio::spawn(async move { lock.acquire_with(wait).await })
    };
    subscribed(b, before).await;
    while_waiting(&format!("redisson_lock__channel:{{{name}}}"));
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();

    let name = format!("{prefix}:fair");
    let held = a
        .fair_lock(&name)
        .unwrap()
        .acquire_with(long.clone())
        .await
        .unwrap();
    let before = b.subscribed_channels();
    let waiter = {
        let lock = b.fair_lock(&name).unwrap();
        let wait = wait.clone();
        tokio::spawn(async move { lock.acquire_with(wait).await })
    };
    subscribed(b, before).await;
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();

    let name = format!("{prefix}:rw");
    let held = a
        .read_write_lock(&name)
        .unwrap()
        .write()
        .acquire_with(long.clone())
        .await
        .unwrap();
    let before = b.subscribed_channels();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let lock = b.read_write_lock(&name).unwrap();
            let wait = wait.clone();
            tokio::spawn(async move { lock.read().acquire_with(wait).await })
        })
        .collect();
    subscribed(b, before).await;
    held.release().await.unwrap();
    for r in readers {
        r.await.unwrap().unwrap().release().await.unwrap();
    }

    let name = format!("{prefix}:sem");
    let semaphore = a.semaphore(&name).unwrap();
    semaphore.delete().await.unwrap();
    assert!(semaphore.try_set_permits(0).await.unwrap());
    let before = b.subscribed_channels();
    let taker = {
        let semaphore = b.semaphore(&name).unwrap();
        tokio::spawn(async move { semaphore.try_acquire(1, Duration::from_secs(20)).await })
    };
    subscribed(b, before).await;
    semaphore.release(1).await.unwrap();
    assert!(taker.await.unwrap().unwrap());

    let name = format!("{prefix}:permits");
    let permits = a.permit_expirable_semaphore(&name).unwrap();
    assert!(permits.try_set_permits(1).await.unwrap());
    let permit = permits.acquire().await.unwrap();
    let before = b.subscribed_channels();
    let taker = {
        let permits = b.permit_expirable_semaphore(&name).unwrap();
        let wait = wait.clone();
        tokio::spawn(async move { permits.try_acquire(wait).await })
    };
    subscribed(b, before).await;
    permit.release().await.unwrap();
    taker
        .await
        .unwrap()
        .unwrap()
        .expect("the taker got the released permit")
        .release()
        .await
        .unwrap();

    let name = format!("{prefix}:latch");
    let latch = a.count_down_latch(&name).unwrap();
    latch.delete().await.unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let before = b.subscribed_channels();
    let waiter = {
        let latch = b.count_down_latch(&name).unwrap();
        tokio::spawn(async move { latch.open_within(wait).await })
    };
    subscribed(b, before).await;
    latch.count_down().await.unwrap();
    assert!(waiter.await.unwrap().unwrap());
}
