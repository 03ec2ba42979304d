//! The lost signal after a pause (issue 52, item 0): a holder whose process stood still past its
//! lease (a GC pause, a VM stall) must read `is_lost()` as true on its first look after it
//! resumes, before its renewal loop has had a chance to run, and its release must report the
//! loss. In-process, the pause is both threads of crosslock's runtime held still (where the
//! renewal loop and its timers run) while the test's thread waits past the lease and then reads.
//! (`tests-faults/test_lost_after_pause.py` and `tests-js/lost_after_pause.test.mjs` SIGSTOP whole
//! holder processes.)
//!
//! Each test runs in a process of its own (`alone!`): holding crosslock's runtime still would
//! stall any test running beside it.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::Duration;

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, Owner, RedLock};
use support::RedisServer;

/// Both threads of crosslock's runtime, held still until dropped: no renewal, no timer, no I/O
/// of its own runs meanwhile.
struct Frozen {
    thaw: Arc<(Mutex<bool>, Condvar)>,
}

/// How many threads crosslock's runtime has (`runtime.rs`).
const RUNTIME_THREADS: usize = 2;

fn freeze_crosslock() -> Frozen {
    let all_still = Arc::new(Barrier::new(RUNTIME_THREADS + 1));
    let thaw = Arc::new((Mutex::new(false), Condvar::new()));
    for _ in 0..RUNTIME_THREADS {
        let (all_still, thaw) = (all_still.clone(), thaw.clone());
        // Each task blocks its thread; the barrier is passed only once every thread holds one.
        drop(crosslock::runtime::spawn(async move {
            all_still.wait();
            let (thawed, wake) = &*thaw;
            let mut thawed = thawed.lock().unwrap();
            while !*thawed {
                thawed = wake.wait(thawed).unwrap();
            }
        }));
    }
    all_still.wait();
    Frozen { thaw }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let (thawed, wake) = &*self.thaw;
        *thawed.lock().unwrap() = true;
        wake.notify_all();
    }
}

/// A lease short enough to wait out, long enough that an acquire on a busy machine is confirmed
/// well within it.
const LEASE: Duration = Duration::from_millis(400);
/// How long the "pause" lasts: the lease and more.
const PAUSE: Duration = Duration::from_millis(900);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn client(server: &RedisServer, events: &Arc<AtomicUsize>) -> Client {
    let options = ClientOptions::new().watchdog_timeout(LEASE);
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let events = events.clone();
    client.on_lock_lost(move |_| {
        events.fetch_add(1, Ordering::SeqCst);
    });
    client
}

/// The listener was told exactly once: it comes (the renewal loop, running again, finds the hold
/// marked already and tells nothing more).
async fn told_once(events: &AtomicUsize, what: &str) {
    support::until(&format!("{what}: the listener told"), async || {
        events.load(Ordering::SeqCst) >= 1
    })
    .await;
    // A renewal period and more for a second, wrong, report to come.
    tokio::time::sleep(LEASE).await;
    assert_eq!(
        events.load(Ordering::SeqCst),
        1,
        "{what}: told more than once"
    );
}

#[test]
fn lost_is_true_on_the_first_read_after_a_pause_past_the_lease() {
    alone!();
    let server = RedisServer::start();
    let rt = runtime();
    for (kind, lease) in [
        ("lock", Some(LEASE)),
        ("lock", None),
        ("fenced_lock", Some(LEASE)),
        ("fenced_lock", None),
    ] {
        let what = format!(
            "{kind}, {}",
            if lease.is_some() { "lease" } else { "watchdog" }
        );
        let events = Arc::new(AtomicUsize::new(0));
        let name = format!("paused:{kind}:{}", lease.is_some());
        let (client, lock) = rt.block_on(async {
            let client = client(&server, &events).await;
            let lock = match kind {
                "lock" => client.lock(&name).unwrap().erased(),
                _ => client.fenced_lock(&name).unwrap().erased(),
            };
            (client, lock)
        });
        let owner = Owner::new(1);
        let options = match lease {
            Some(lease) => AcquireOptions::new().lease(lease),
            None => AcquireOptions::new(),
        };
        assert!(
            rt.block_on(lock.acquire_as(owner, &options))
                .unwrap()
                .is_some()
        );
        let token = lock.lost_token(owner).unwrap();
        assert!(!lock.is_lost(owner), "{what}: lost at once");
        {
            let _frozen = freeze_crosslock();
            std::thread::sleep(PAUSE);
            // The first read after the pause, with the renewal loop still held: from the clock.
            assert!(lock.is_lost(owner), "{what}: not lost on the first read");
            assert!(token.is_cancelled(), "{what}: the token was not cancelled");
        }
        rt.block_on(async {
            let err = lock.release_as(owner).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::LockLost, "{what}: {err}");
            told_once(&events, &what).await;
            client.close().await;
        });
    }
}

#[test]
fn a_guard_a_permit_and_a_red_lock_say_lost_on_the_first_read_after_a_pause() {
    alone!();
    let server = RedisServer::start();
    let rt = runtime();
    let events = Arc::new(AtomicUsize::new(0));
    let (client, guard, permit, red) = rt.block_on(async {
        let client = client(&server, &events).await;
        let guard = client
            .lock("paused:guard")
            .unwrap()
            .acquire()
            .await
            .unwrap();
        let slots = client.permit_expirable_semaphore("paused:slots").unwrap();
        slots.try_set_permits(1).await.unwrap();
        let permit = slots.acquire().await.unwrap();
        let parts = (0..3)
            .map(|i| Ok(client.lock(&format!("paused:red:{i}"))?.erased()))
            .collect::<crosslock::Result<Vec<_>>>()
            .unwrap();
        // Kept by the watchdog: with a lease, a red lock's parts are taken for longer than it.
        let red = RedLock::new(parts).unwrap().acquire().await.unwrap();
        (client, guard, permit, red)
    });
    assert!(!guard.is_lost() && !permit.lost().is_cancelled() && !red.lost().is_cancelled());
    {
        let _frozen = freeze_crosslock();
        std::thread::sleep(PAUSE);
        assert!(guard.is_lost(), "the guard: not lost on the first read");
        assert!(
            permit.lost().is_cancelled(),
            "the permit: not lost on the first read"
        );
        assert!(
            red.lost().is_cancelled(),
            "the red lock: not lost on the first read"
        );
    }
    rt.block_on(async {
        for (what, err) in [
            ("the guard", guard.release().await.unwrap_err()),
            ("the permit", permit.release().await.unwrap_err()),
            ("the red lock", red.release().await.unwrap_err()),
        ] {
            assert_eq!(err.kind(), ErrorKind::LockLost, "{what}: {err}");
        }
        // One event per hold: the guard's, the permit's and the red lock's three parts.
        support::until("five lost-lock events", async || {
            events.load(Ordering::SeqCst) >= 5
        })
        .await;
        tokio::time::sleep(LEASE).await;
        assert_eq!(
            events.load(Ordering::SeqCst),
            5,
            "a hold told more than once"
        );
        client.close().await;
    });
}
