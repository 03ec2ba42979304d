//! # crosslock
//!
//! Distributed locks on a plain Redis server, stored exactly as Java's
//! [Redisson](https://redisson.org) stores them, so a Rust daemon, a Python worker, a Node server
//! and a Java service on Redisson can share the very same locks.
//!
//! This crate is the core that the Python and Node bindings wrap: everything that is the same in
//! every language (scripts, waiting, renewal, errors) lives here.
//!
//! ## A tour
//!
//! ```no_run
//! # async fn tour() -> crosslock::Result<()> {
//! use std::time::Duration;
//! use crosslock::{AcquireOptions, Client};
//!
//! let client = Client::connect("redis://127.0.0.1:6379/0").await?;
//! let lock = client.lock("orders:42")?;
//!
//! // Wait as long as it takes; the watchdog keeps the lock while we hold it.
//! let guard = lock.acquire().await?;
//! tokio::select! {
//!     _ = async { /* exclusive work */ } => {}
//!     _ = guard.lost().cancelled() => eprintln!("lock lost: stop, another holder may run"),
//! }
//! guard.release().await?;
//!
//! // Wait at most 500 ms; let the lock expire by itself after 10 s.
//! let options = AcquireOptions::new()
//!     .wait(Duration::from_millis(500))
//!     .lease(Duration::from_secs(10));
//! if let Ok(guard) = lock.acquire_with(options).await {
//!     guard.release().await?;
//! }
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! ## Who holds a lock
//!
//! A hold belongs to an [`Owner`] of a [`Client`]: Redis stores `<client-uuid>:<n>`, Redisson's
//! `<client-id>:<thread-id>`. The same owner may re-enter a lock it holds; any other owner waits.
//! By default the owner is the current tokio task (or thread); [`Owner::scope`] and
//! [`AcquireOptions::owner`] set it explicitly, for instance to release from another task.
//!
//! ## Waiting
//!
//! Waiters subscribe to the lock's channel (one subscription per channel per client, shared) and
//! retry when a release is published or the holder's lease runs out: there is no polling
//! interval, so a release hands the lock over in about two round trips.
//!
//! ## Errors
//!
//! Every operation returns [`Result`], whose [`Error`] has a [`kind`](Error::kind), the lock's
//! name and the holder concerned.
//!
//! ## Logging
//!
//! crosslock emits [`tracing`](https://docs.rs/tracing) events under the target `crosslock` and
//! is silent unless the application installs a subscriber: a connection lost (`WARN`, once per
//! loss, naming `host:port`, never a password) and back (`INFO`), a watchdog renewal that failed
//! and is retried (`WARN`), a lock found lost and why (`WARN`), channel subscriptions made and
//! left (`DEBUG`). For example, with `tracing-subscriber`:
//! `tracing_subscriber::fmt().with_env_filter("crosslock=info").init()`.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]
#![doc(test(attr(deny(warnings), allow(dead_code))))]

mod client;
mod engine;
mod error;
#[doc(hidden)]
pub mod ffi;
pub mod host;
mod inspect;
mod kinds;
mod layout;
pub mod limits;
pub mod naming;
mod objects;
mod options;
mod owner;
mod redact;
pub mod runtime;
mod scripts;
mod session;
pub mod telemetry;
mod transport;
mod util;
mod watch;

pub use engine::any_lock::{Acquisition, AnyLock};
pub use engine::guard::LockGuard;
pub use engine::lost::{LostListener, LostLock};
pub use engine::{Backoff, MAX_DURATION};
pub use error::{Error, ErrorKind, Result};
pub use inspect::{HolderInfo, Inspection, ObjectKind, PermitInfo, QueuedWaiter};
pub use kinds::LockKind;
pub use naming::ProcessInfo;
pub use objects::count_down_latch::CountDownLatch;
pub use objects::fair_lock::{FairLock, NonReentrantFairLock};
pub use objects::fenced_lock::FencedLock;
pub use objects::group_lock::{GroupCodec, GroupLock, group_field};
pub use objects::lock::Lock;
pub use objects::multi_lock::{MultiGuard, MultiLock, RedLock};
pub use objects::non_reentrant_lock::NonReentrantLock;
pub use objects::permit_expirable_semaphore::{Permit, PermitExpirableSemaphore};
pub use objects::read_write_lock::{ReadLock, ReadWriteLock, WriteLock};
pub use objects::semaphore::Semaphore;
pub use objects::spin_lock::SpinLock;
pub use options::{AcquireOptions, ClientOptions, Lanes, ReplicaSync};
pub use owner::Owner;
pub use redact::redact_url;
pub use session::Client;
pub use telemetry::LostReason;
pub use tokio_util::sync::CancellationToken;
pub use watch::{Watch, WatchEvent, WatchEventKind};

/// The README's Rust example, compiled as a doctest so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// docs/api.md's Rust blocks, compiled as doctests too (tests-py/test_readme.py checks that
/// every other block of both files is run by a test or says why not).
#[cfg(doctest)]
#[doc = include_str!("../../docs/api.md")]
struct ApiDoctests;
