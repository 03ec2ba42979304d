//! `host::begin_here`: a blocking caller (the sync Python methods) makes an uncontended call's
//! round trip on its own thread, over a lane, and gets exactly the results, errors and clean-up of
//! the usual path: after the server killed connections, after an idle timeout, with the lock
//! busy, and when the reply is lost.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::future::Future;
use std::time::Duration;

use crosslock::host::{Waited, begin_here};
use crosslock::runtime::block_on;
use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, Lock, MultiLock, Owner};
use redis::Commands;
use support::RedisServer;

/// Runs `future` as a sync binding does: begun here, waited for on this thread if it had to wait.
/// Says whether it finished in its first poll.
fn run<T: Send + 'static>(future: impl Future<Output = T> + Send + 'static) -> (bool, T) {
    match begin_here(future) {
        Ok(value) => (true, value),
        Err(mut call) => match call.wait(Duration::from_secs(30)) {
            Waited::Done(value) => (false, value),
            _ => panic!("the call did not finish within 30 s"),
        },
    }
}

fn connect(server: &RedisServer, options: ClientOptions) -> Client {
    block_on(Client::connect_with(&server.url(), options)).unwrap()
}

/// One acquire + release pair through `begin_here`; says whether both finished on this thread.
fn pair(lock: &Lock) -> bool {
    let l = lock.clone();
    let (acquired_here, guard) = run(async move { l.acquire().await });
    let guard = guard.unwrap();
    let (released_here, released) = run(async move { guard.release().await });
    released.unwrap();
    acquired_here && released_here
}

/// Pairs until one finishes on the calling thread (a lane opened in the background for calls in
/// quick succession); fails if none ever does.
fn until_inline(lock: &Lock) {
    for _ in 0..1_000 {
        if pair(lock) {
            return;
        }
    }
    panic!("calls in quick succession never got a lane");
}

#[test]
fn uncontended_calls_in_quick_succession_finish_on_the_calling_thread() {
    let server = RedisServer::start();
    let client = connect(&server, ClientOptions::new());
    let lock = client.lock("here:a").unwrap();
    let mut raw = server.raw();

    // The first calls take the usual path while a lane opens in the background; the ones after
    // that do not.
    until_inline(&lock);
    for _ in 0..20 {
        let l = lock.clone();
        let (here, guard) = run(async move { l.acquire().await });
        assert!(here, "an uncontended acquire went through the runtime");
        let guard = guard.unwrap();
        let field = guard.owner().holder(&client.id());
        assert_eq!(raw.hget::<_, _, i64>("here:a", &field).unwrap(), 1);
        let (here, released) = run(async move { guard.release().await });
        assert!(here, "an uncontended release went through the runtime");
        released.unwrap();
        assert!(!raw.exists::<_, bool>("here:a").unwrap());
    }
    block_on(client.close());
}

#[test]
fn a_blocking_callers_multi_lock_takes_and_releases_its_parts_all_at_once() {
    // A multi-lock of many parts tries them all at once, and its release awaits its parts'
    // releases together. Begun here, they went over this
    // thread's lane one blocking round trip after another, all inside the first poll (a sync
    // Python release of 16,000 parts took ~10× as long as pipelined, and of 50,000 parts failed
    // with parts' response timeouts passing while the poll went on). They go out together on the
    // multiplexed connection, so the call cannot finish inside its first poll.
    let server = RedisServer::start();
    let client = connect(&server, ClientOptions::new());
    let lock = client.lock("here:parts:warm").unwrap();
    until_inline(&lock);
    let parts = 2_000;
    let multi = MultiLock::new(
        (0..parts)
            .map(|i| client.lock(&format!("here:parts:{i}")).unwrap().erased())
            .collect(),
    )
    .unwrap();
    let count = |raw: &mut redis::Connection| -> usize {
        redis::cmd("EVAL")
            .arg("return #redis.call('keys', 'here:parts:[0-9]*')")
            .arg(0)
            .query(raw)
            .unwrap()
    };
    let mut raw = server.raw();
    // Redis holds back every script for a while, so no reply can come back during the first
    // poll: on a busy machine a first poll slower than the runtime thread otherwise saw its
    // parts' replies arrive and finished there, all parts pipelined. Taken one blocking round
    // trip after another, the parts still finish inside it (after the pause).
    server.command(&["CLIENT", "PAUSE", "500", "WRITE"]);
    let m = multi.clone();
    let (here, guard) = run(async move { m.acquire().await });
    let guard = guard.unwrap();
    assert!(
        !here,
        "the parts were tried one blocking round trip after another"
    );
    assert_eq!(count(&mut raw), parts);
    server.command(&["CLIENT", "PAUSE", "500", "WRITE"]);
    let (here, released) = run(async move { guard.release().await });
    released.unwrap();
    assert!(
        !here,
        "the parts were released one blocking round trip after another"
    );
    assert_eq!(count(&mut raw), 0, "parts left held after the release");
    block_on(client.close());
}

#[test]
fn connections_killed_by_the_server_between_calls_cost_no_error() {
    let server = RedisServer::start();
    let client = connect(&server, ClientOptions::new());
    let lock = client.lock("here:killed").unwrap();
    for _ in 0..5 {
        // A lane surely exists, just used (and so reusable): the kill must not cost an error.
        until_inline(&lock);
        // Every connection but the killer's: the lanes and the multiplexed connection alike.
        server.command(&["CLIENT", "KILL", "TYPE", "normal"]);
        pair(&lock);
    }
    assert!(!server.raw().exists::<_, bool>("here:killed").unwrap());
    block_on(client.close());
}

#[test]
fn an_idle_timeout_between_calls_costs_no_error() {
    let server = RedisServer::start_with(&["--timeout", "1"]);
    let client = connect(&server, ClientOptions::new());
    let lock = client.lock("here:idle").unwrap();
    for _ in 0..2 {
        until_inline(&lock); // a lane exists, for the server to close while idle
        std::thread::sleep(Duration::from_millis(1_300));
        pair(&lock);
    }
    until_inline(&lock);
    block_on(client.close());
}

#[test]
fn a_busy_lock_begun_here_is_waited_for_on_the_calling_thread() {
    let server = RedisServer::start();
    let client = connect(&server, ClientOptions::new());
    let lock = client.lock("here:begun").unwrap();
    let holder = block_on(lock.acquire_with(AcquireOptions::new().owner(Owner::new(1)))).unwrap();

    let l = lock.clone();
    let options = AcquireOptions::new()
        .owner(Owner::new(2))
        .wait(Duration::from_secs(10));
    let Err(mut waiter) = begin_here(async move { l.acquire_with(options).await }) else {
        panic!("an acquire of a busy lock finished without waiting");
    };
    // Still busy: the wait on this thread times out and the call goes on.
    assert!(matches!(
        waiter.wait(Duration::from_millis(100)),
        Waited::Pending
    ));
    block_on(holder.release()).unwrap();
    let guard = match waiter.wait(Duration::from_secs(10)) {
        Waited::Done(guard) => guard.unwrap(),
        other => panic!("the release did not wake the waiter within 10 s: {other:?}"),
    };
    assert_eq!(block_on(lock.hold_count_of(guard.owner())).unwrap(), 1);

    // Begun from inside the runtime (no thread there may block on a future), the call runs as
    // a runtime task, and waiting for it from another thread still works.
    let l = lock.clone();
    let mut inside = block_on(async move {
        begin_here(async move {
            l.acquire_with(
                AcquireOptions::new()
                    .owner(Owner::new(3))
                    .wait(Duration::from_secs(10)),
            )
            .await
        })
    })
    .expect_err("a call begun inside the runtime finished at once");
    block_on(guard.release()).unwrap();
    let third = match inside.wait(Duration::from_secs(10)) {
        Waited::Done(guard) => guard.unwrap(),
        other => panic!("the third acquire did not finish: {other:?}"),
    };
    block_on(third.release()).unwrap();
    assert!(!server.raw().exists::<_, bool>("here:begun").unwrap());
    block_on(client.close());
}

#[test]
fn an_acquire_whose_reply_is_lost_holds_the_lock_once_or_not_at_all() {
    let server = RedisServer::start();
    let options = ClientOptions::new().response_timeout(Duration::from_millis(300));
    let client = connect(&server, options);
    let lock = client.lock("here:lost").unwrap();

    // The server stops answering with the acquire on its way: the lane gives up on the reply
    // after the response timeout, and the acquire goes on in the background, settling what the
    // lost request did once the server answers again. When it resumes, the late request and the
    // settle are on different connections: the settle must still run after it.
    for _ in 0..3 {
        lost_acquire(&server, &lock);
    }
    until_inline(&lock);
    block_on(client.close());
}

fn lost_acquire(server: &RedisServer, lock: &Lock) {
    pair(lock);
    server.signal(libc::SIGSTOP);
    let l = lock.clone();
    let options = AcquireOptions::new().wait(Duration::from_secs(10));
    let begun = begin_here(async move { l.acquire_with(options).await });
    server.signal(libc::SIGCONT);
    let result = match begun {
        Ok(result) => result,
        Err(mut call) => match call.wait(Duration::from_secs(30)) {
            Waited::Done(result) => result,
            _ => panic!("the acquire did not settle within 30 s of the server resuming"),
        },
    };
    match result {
        Ok(guard) => {
            assert_eq!(block_on(lock.hold_count_of(guard.owner())).unwrap(), 1);
            block_on(guard.release()).unwrap();
        }
        Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}"),
    }
    // Nothing left behind either way: no second hold from the lost request.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.raw().exists::<_, bool>("here:lost").unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "the lost acquire left the lock held"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The public lock futures stay small: their state (~0.9 KB for an acquire) is awaited boxed. A
/// caller's task around an inline acquire was over 1 KB, past the sizes glibc's per-thread cache
/// recycles, and such tasks, freed among the small allocations the holds keep, left about a
/// kilobyte of unusable holes per lock held (10,000 locks acquired from spawned tasks: RSS +1.8 KB
/// per lock, boxed +0.8 KB). Rare paths (the first call's connect, giving a win back, retrying a
/// lost release) are boxed where they happen, inside that state.
#[test]
fn call_futures_stay_small() {
    let server = RedisServer::start();
    let client = connect(&server, ClientOptions::new());
    let lock = client.lock("here:size").unwrap();
    let owner = Owner::new(1);
    let options = AcquireOptions::new();
    let sizes = [
        (
            "acquire_as",
            std::mem::size_of_val(&lock.acquire_as(owner, &options)),
        ),
        ("release_as", std::mem::size_of_val(&lock.release_as(owner))),
        ("acquire", std::mem::size_of_val(&lock.acquire())),
        (
            "acquire_with",
            std::mem::size_of_val(&lock.acquire_with(AcquireOptions::new())),
        ),
        ("try_acquire", std::mem::size_of_val(&lock.try_acquire())),
    ];
    for (call, size) in sizes {
        assert!(size <= 256, "{call}'s future takes {size} bytes");
    }
}
