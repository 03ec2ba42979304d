//! The native half of the npm package `crosslock`: a thin napi-rs layer over the `crosslock` core.
//!
//! It only converts arguments, turns core errors into one encoded JavaScript error
//! ([`error`]), and returns promises settled from crosslock's own runtime ([`runtime`]). Identity
//! (which owner number a call acts for), `AbortSignal`, `Symbol.asyncDispose` and the error
//! classes live in the hand-written TypeScript wrapper in `bindings-node/lib/`; this module is
//! private to it (loaded through the generated `bindings-node/native.js`).
//!
//! No napi runtime is started (napi's `async` feature is off): see [`runtime`].

#![deny(clippy::all)]

mod client;
mod count_down_latch;
mod debug_log;
mod error;
mod inspect;
mod lock;
mod multi_lock;
mod permit_expirable_semaphore;
mod runtime;
mod semaphore;
mod telemetry;
mod unowned;
mod watch;

use napi_derive::napi;

/// A fresh owner number, distinct from every other one handed out in this process (by any
/// worker thread).
#[napi]
pub fn next_owner() -> f64 {
    crosslock::Owner::unique().get() as f64
}

/// The prefix of every encoded error message (see `error.rs`), for the TypeScript decoder.
#[napi]
pub const ERROR_PREFIX: &str = error::PREFIX;

/// One of core's argument limits (`crosslock::limits`), for the TypeScript checks.
#[napi(object)]
pub struct Limit {
    pub name: String,
    pub min: f64,
    pub max: f64,
    pub shown: String,
}

/// Core's table of argument limits, so the TypeScript checks spell no number of their own.
#[napi]
pub fn limits() -> Vec<Limit> {
    crosslock::limits::ALL
        .iter()
        .map(|l| Limit {
            name: l.name.to_owned(),
            // Every bound is within ±2^53, where a JavaScript number is exact.
            min: l.min as f64,
            max: l.max as f64,
            shown: l.shown.to_owned(),
        })
        .collect()
}

/// How this process watches its lanes' sockets: `"libuv"` (a `uv_poll` on each environment's
/// loop, where the runtime's libuv is real: Node) or `"thread"` (a thread of crosslock's runtime
/// that wakes JavaScript once per batch of replies: Bun, Deno). Decided once, the first time it
/// is needed.
#[napi]
pub fn lane_watcher() -> &'static str {
    runtime::uv::watcher().name()
}

/// Closes every client this thread connected and has not closed, waiting until each is closed
/// (its locks released, its waits cancelled; each close bounded by the client's response
/// timeout). The TypeScript layer calls it from the process's `'exit'` event: Deno ends a process
/// without running Node-API clean-up hooks, which do the same on Node and Bun.
#[napi]
pub fn close_at_exit(env: napi::Env) -> napi::Result<()> {
    runtime::close_env_clients(&env)
}
