//! One test binary for how calls reach Redis and what the client sees of it, a module per
//! concern: the client's connections (`client`), a blocking caller's own lane (`begin_here`), which callers get lanes (`lanes`),
//! Sentinel and Cluster (failovers, renewal retries), TLS, replica acknowledgements, failures
//! found in review, the inspector and the watcher. One binary links once: cargo links each file
//! of `tests/` as a binary of its own. Run one module's tests with
//! `cargo test -p crosslock --test transport sentinel::`.
//!
//! Not here: the tests that need a process of their own (they count crosslock's thread switches
//! or threads, hold its runtime still, install a panic hook or a global logger); each says why
//! at its top.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod begin_here;
mod client;
mod cluster;
mod cluster_renewal_retries;
mod failure;
mod inspect;
mod lanes;
mod replica_sync;
mod sentinel;
mod tls;
mod watch;
