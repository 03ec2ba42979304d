//! `ClientOptions::lanes`: which callers get connections of their own (lanes). With
//! `Lanes::Off` a burst of uncontended calls opens no connection beyond the client's usual
//! ones, from a blocking caller or from an application's tokio runtime; `Lanes::SyncOnly` opens
//! the blocking caller's lanes and none on the application's runtime; the default opens both.
//! Counted with `CLIENT LIST` on the test's own server.
//!
//! Also here: what a runtime without an I/O driver prints when crosslock finds out it has no
//! reactor (tokio says so by panicking), seen on a child process's real stderr.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use crosslock::host::{Waited, begin_here};
use crosslock::runtime::block_on;
use crosslock::{Client, ClientOptions, Lanes, Lock};
use support::RedisServer;

/// Uncontended pairs in quick succession (enough for a lane to open in the background).
const BURST: usize = 200;

/// `BURST` acquire + release pairs of `lock`, each call begun here as a sync binding does.
fn blocking_burst(lock: &Lock) {
    for _ in 0..BURST {
        let l = lock.clone();
        let guard = match begin_here(async move { l.acquire().await }) {
            Ok(guard) => guard,
            Err(mut call) => match call.wait(Duration::from_secs(30)) {
                Waited::Done(guard) => guard,
                _ => panic!("an acquire did not finish within 30 s"),
            },
        };
        let guard = guard.unwrap();
        match begin_here(async move { guard.release().await }) {
            Ok(released) => released.unwrap(),
            Err(mut call) => match call.wait(Duration::from_secs(30)) {
                Waited::Done(released) => released.unwrap(),
                _ => panic!("a release did not finish within 30 s"),
            },
        }
    }
}

/// `BURST` pairs of `lock` polled by an application's own tokio runtime, from tasks on its
/// workers.
fn app_runtime_burst(runtime: &tokio::runtime::Runtime, lock: &Lock) {
    runtime.block_on(async {
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let lock = lock.clone();
                tokio::spawn(async move {
                    for _ in 0..BURST {
                        lock.acquire().await.unwrap().release().await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// A connected client with `lanes`, and the server's normal connections once its usual ones
/// are open (after a first call).
fn client(server: &RedisServer, lanes: Lanes) -> (Client, usize) {
    let options = ClientOptions::new().lanes(lanes);
    let client = block_on(Client::connect_with(&server.url(), options)).unwrap();
    let lock = client.lock("lanes:first").unwrap();
    block_on(async { lock.acquire().await.unwrap().release().await.unwrap() });
    (client, server.normal_connections())
}

/// The server's normal connections after lanes opened in the background had time to.
fn after_a_while(server: &RedisServer) -> usize {
    std::thread::sleep(Duration::from_millis(300));
    server.normal_connections()
}

/// Waits until the server has more than `count` normal connections, running `burst` meanwhile;
/// fails after 10 s.
fn until_more_than(server: &RedisServer, count: usize, mut burst: impl FnMut()) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        burst();
        let now = server.normal_connections();
        if now > count {
            return now;
        }
        assert!(Instant::now() < deadline, "no lane opened in 10 s");
    }
}

#[test]
fn with_lanes_off_a_burst_of_calls_opens_no_connection_beyond_the_usual_ones() {
    let server = RedisServer::start();
    let (client, usual) = client(&server, Lanes::Off);
    let lock = client.lock("lanes:off").unwrap();
    blocking_burst(&lock);
    assert_eq!(
        after_a_while(&server),
        usual,
        "a blocking caller's burst opened a connection with lanes off"
    );
    let runtime = support::app_runtime();
    app_runtime_burst(&runtime, &lock);
    assert_eq!(
        after_a_while(&server),
        usual,
        "an application runtime's burst opened a connection with lanes off"
    );
    drop(runtime);
    block_on(client.close());
}

#[test]
fn sync_only_lanes_serve_blocking_callers_and_not_an_application_runtime() {
    let server = RedisServer::start();
    let (client, usual) = client(&server, Lanes::SyncOnly);
    let lock = client.lock("lanes:sync").unwrap();
    let runtime = support::app_runtime();
    app_runtime_burst(&runtime, &lock);
    assert_eq!(
        after_a_while(&server),
        usual,
        "an application runtime's burst opened a connection with sync-only lanes"
    );
    until_more_than(&server, usual, || blocking_burst(&lock));
    drop(runtime);
    block_on(client.close());
}

#[test]
fn by_default_both_blocking_callers_and_an_application_runtime_open_lanes() {
    let server = RedisServer::start();
    let (client, usual) = client(&server, Lanes::default());
    assert_eq!(client.options().lanes, Lanes::All);
    let lock = client.lock("lanes:all").unwrap();
    let runtime = support::app_runtime();
    let with_loop_lanes = until_more_than(&server, usual, || app_runtime_burst(&runtime, &lock));
    until_more_than(&server, with_loop_lanes, || blocking_burst(&lock));
    drop(runtime);
    block_on(client.close());
}

/// Set in the child process of
/// [`a_runtime_without_io_prints_no_panic_when_crosslock_probes_it`]: the server's URL, and the
/// lanes setting (`all` or `none`).
const CHILD_URL: &str = "CROSSLOCK_TEST_NO_IO_CHILD_URL";
const CHILD_LANES: &str = "CROSSLOCK_TEST_NO_IO_CHILD_LANES";
/// What the child prints on stdout once its calls succeeded.
const CHILD_DONE: &str = "no-io child: every call succeeded";

/// The child's half: on a runtime built without `enable_io`, calls in quick succession (so that
/// crosslock opens a lane for the runtime's loop and asks the runtime's reactor to watch it,
/// which panics inside tokio) all succeed. Does nothing unless run as that child.
#[test]
fn no_io_child() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let lanes = Lanes::from_name(&std::env::var(CHILD_LANES).unwrap()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = Client::connect_with(&url, ClientOptions::new().lanes(lanes))
            .await
            .unwrap();
        let lock = client.lock("lanes:no-io").unwrap();
        // Long enough for a lane to open in the background and be handed to the reactor.
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            lock.acquire().await.unwrap().release().await.unwrap();
        }
        client.close().await;
    });
    println!("{CHILD_DONE}");
}

/// Runs [`no_io_child`] in a child process with `lanes`: its stderr, and how many connections
/// the server received meanwhile.
fn no_io_child_run(server: &RedisServer, lanes: &str) -> (String, u64) {
    let received = || {
        let info: String = redis::from_redis_value(server.command(&["INFO", "stats"])).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let before = received();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lanes::no_io_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_URL, server.url())
        .env(CHILD_LANES, lanes)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success() && stdout.contains(CHILD_DONE),
        "the child's calls failed ({lanes}): {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    (stderr, received() - before)
}

/// crosslock learns that a runtime has no I/O driver from tokio's panic when it hands a lane's
/// socket to that runtime's reactor, and catches it: the panic's message does not reach the
/// process's stderr (the hook crosslock installs is silent for its own probe), and the calls
/// succeed over the multiplexed connection. Seen on a child process's real stderr, with no hook
/// of the test's; the child with lanes opens more connections than one without, so its reactor
/// was asked, but only a few more: once the runtime is known to have no reactor, no lane is
/// opened for it again (before, one was opened and dropped for every call, ~165 in 500 ms).
#[test]
fn a_runtime_without_io_prints_no_panic_when_crosslock_probes_it() {
    let server = RedisServer::start();
    let (_, usual) = no_io_child_run(&server, "none");
    let (stderr, with_lanes) = no_io_child_run(&server, "all");
    assert!(
        with_lanes > usual,
        "no lane was opened for the runtime's loop ({with_lanes} connections, {usual} without \
         lanes): the probe did not run"
    );
    assert!(
        with_lanes <= usual + 3,
        "lanes kept being opened for a runtime known to have no reactor ({with_lanes} \
         connections, {usual} without lanes)"
    );
    assert!(
        !stderr.contains("panicked"),
        "the probe's panic reached stderr:\n{stderr}"
    );
}
