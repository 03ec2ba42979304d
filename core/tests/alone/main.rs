//! One test binary for the tests that need a process to themselves: they count the context
//! switches or the threads of crosslock's runtime, hold that runtime still, stop a master, or
//! install the process's one `tracing` subscriber or panic hook, so any test running beside them
//! would change what they see. Each such test opens with `alone!()`. Run by cargo's harness, the
//! test starts this binary again for itself alone (`--exact <its name>`, with
//! `CROSSLOCK_TEST_ALONE` set), waits for it, prints its output and passes or fails with it; in
//! that child `alone!()` does nothing and the test runs. The children run one at a time, as the
//! separate test binaries these files once were did. One binary links once: cargo links each file
//! of `tests/` as a binary of its own.
//!
//! Run one file's tests with `cargo test -p crosslock --test alone app_runtime::`.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::sync::{Mutex, PoisonError};

#[path = "../support/mod.rs"]
mod support;

/// The first line of every test here: in cargo's harness, runs the test in a child process of
/// its own and returns with the child's verdict; in that child, lets the test go on.
macro_rules! alone {
    () => {
        if crate::ran_in_a_child() {
            return;
        }
    };
}

mod app_runtime;
mod app_runtime_close;
mod cluster_hung_failover;
mod cluster_lanes;
mod cluster_stuck_master;
mod input;
mod logging;
mod lost_after_pause;
mod no_io_runtime;
mod runtime_lifecycle;
mod sentinel_hung_failover;

/// Set in a child to the name of the one test it runs.
const CHILD: &str = "CROSSLOCK_TEST_ALONE";

/// One child at a time: the machine's cores are the one thing the children still share, and the
/// failover tests time their servers.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// False in a child (the test runs); true once the child this call started for the calling test
/// has passed (a failed child fails the test here, with the child's output).
fn ran_in_a_child() -> bool {
    if std::env::var_os(CHILD).is_some() {
        return false;
    }
    // libtest runs each test on a thread named after the test's path (`app_runtime::…`).
    let thread = std::thread::current();
    let name = thread
        .name()
        .filter(|name| name.contains("::"))
        .expect(
            "alone!() finds its test by the thread's name, which libtest sets to the test's path",
        )
        .to_owned();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env(CHILD, &name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&child.stderr));
    assert!(
        child.status.success(),
        "{name} failed in its own process ({})",
        child.status
    );
    // A name the child's harness did not match would pass with nothing run.
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{name}: the child process ran no test of that name"
    );
    true
}
