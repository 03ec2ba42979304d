//! Waiting for what nobody holds: a semaphore's permits, a latch reaching zero.
//!
//! The acquire loop is the same as for locks ([`wait`]); what differs is that a win
//! is not a hold (nothing to renew, nobody to tell it is lost), and that waiters of one process
//! queue in a local FIFO gate ([`Gates`]): only the oldest local waiter of an object waits in Redis, the
//! others wait their turn behind it. So within a process a waiter for several permits is never
//! starved by later waiters taking single permits (Redisson's open #6664 / #6687), and a release
//! wakes one waiter per process, not all of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorKind, Result};
use crate::session::Ctx;
use crate::util::{lock, sleep_until};

use super::wait::{self, Keeper, Outcome};
use super::{Protocol, Request};

/// The wins of an owner-less acquire: not recorded; given back if the caller left.
struct Unrecorded<P: Protocol> {
    cx: Arc<Ctx>,
    proto: Arc<P>,
    holder: Arc<str>,
}

impl<P: Protocol> Keeper<P::Won> for Unrecorded<P> {
    fn keep(&self, _won: &P::Won, _sent: Instant) -> bool {
        true
    }

    fn recorded(&self) -> usize {
        0
    }

    fn lease_after(&self) -> Duration {
        Duration::ZERO
    }

    fn unkeep(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = self
                .proto
                .clone()
                .give_back(self.cx.clone(), self.holder.clone(), Duration::ZERO)
                .await;
        })
    }
}

/// The local FIFO queues of one client, one per object: `gate(key)` is shared by every waiter of
/// that object in this process while any of them lives.
#[derive(Default)]
pub(crate) struct Gates {
    map: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

impl Gates {
    fn gate(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = lock(&self.map);
        if let Some(gate) = map.get(key).and_then(Weak::upgrade) {
            return gate;
        }
        if map.len() >= 64 {
            map.retain(|_, g| g.strong_count() > 0);
        }
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        map.insert(key.to_owned(), Arc::downgrade(&gate));
        gate
    }
}

/// A waiter's turn at the head of its process's queue for one object (see the module docs).
pub(crate) type Turn = tokio::sync::OwnedMutexGuard<()>;

/// Takes this waiter's turn in the local FIFO gate `key`: at once for a single try (never
/// barging past a local waiter: `Ok(None)` if one is there), else within the wait limit counted
/// from `start` (`Ok(None)` when it passes), or until cancelled.
pub(crate) async fn turn(
    cx: &Ctx,
    key: &str,
    name: &str,
    wait: Option<Duration>,
    cancel: Option<&CancellationToken>,
    start: Instant,
) -> Result<Option<Turn>> {
    let gate = cx.gates.gate(key);
    if wait == Some(Duration::ZERO) {
        return Ok(gate.try_lock_owned().ok());
    }
    let deadline = wait.and_then(|w| start.checked_add(w));
    let cancelled = async {
        match cancel {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        turn = gate.lock_owned() => Ok(Some(turn)),
        _ = sleep_until(deadline) => Ok(None),
        _ = cancelled => Err(cancelled_error(name, start)),
        _ = cx.stop.cancelled() => Err(Error::closed().with_lock(name)),
    }
}

/// Waits for `proto` to win, behind the local FIFO gate `gate_key` if one is given; `Ok(None)`
/// when the wait limit passed. The wait limit counts from `start` and covers the time spent in
/// the gate. Wins are not recorded.
pub(crate) async fn acquire<P: Protocol>(
    cx: Arc<Ctx>,
    proto: Arc<P>,
    gate_key: Option<&str>,
    wait: Option<Duration>,
    cancel: Option<CancellationToken>,
    start: Instant,
) -> Result<Option<P::Won>> {
    let _turn = match gate_key {
        Some(key) => match turn(&cx, key, proto.name(), wait, cancel.as_ref(), start).await? {
            Some(turn) => Some(turn),
            None => return Ok(None),
        },
        None => None,
    };
    let holder: Arc<str> = Arc::from(cx.id.as_str());
    let keeper = Arc::new(Unrecorded {
        cx: cx.clone(),
        proto: proto.clone(),
        holder: holder.clone(),
    });
    let request = Request::new(holder, Duration::ZERO, wait);
    let outcome = wait::acquire(wait::Acquire {
        cx,
        proto,
        keeper,
        request,
        cancel,
        start,
    })
    .await?;
    Ok(match outcome {
        Outcome::Won(won) => Some(won),
        Outcome::TimedOut => None,
    })
}

fn cancelled_error(name: &str, start: Instant) -> Error {
    let waited = start.elapsed();
    Error::new(
        ErrorKind::Cancelled,
        format!(
            "the wait for '{name}' was cancelled after {:.3}s; nothing was taken",
            waited.as_secs_f64()
        ),
    )
    .with_lock(name)
    .with_waited(waited)
}
