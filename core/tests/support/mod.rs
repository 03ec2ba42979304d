//! The fixtures of core's integration tests, shared by every test binary (each includes this
//! module): servers, a proxy, Sentinel groups, clusters, lane probes, and the wake-up,
//! exclusion and failover checks of every topology. Everything is re-exported here, so a test names `support::RedisServer`.

#![allow(dead_code)]
// Test helpers fail loudly: an unwrap here is a failed test, not a library panic.
#![allow(clippy::unwrap_used)]

pub mod cluster;
pub mod exclusion;
pub mod failover;
pub mod lanes;
pub mod proxy;
pub mod sentinel;
pub mod server;
pub mod wake;

// Every binary uses some of these, none all of them.
#[allow(unused_imports)]
pub use {cluster::*, exclusion::*, failover::*, lanes::*, proxy::*, sentinel::*, server::*};

use std::time::{Duration, Instant};

/// Polls `condition` every 5 ms until it holds; fails the test, naming `what`, after 10 s.
pub async fn until(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
