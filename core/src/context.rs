//! [`Ctx`]: everything one connected client generation owns, handed to every engine and object
//! operation (Redisson's `CommandAsyncExecutor` + `ServiceManager`, in one place).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::connection::{Conn, Route};
use crate::engine::holds::{Holds, Suffix};
use crate::engine::unowned::Gates;
use crate::pubsub::PubSub;

/// The connected state of a client in one process (rebuilt after `fork()`).
pub(crate) struct Ctx {
    /// The client id: the `<client-uuid>` of every holder string.
    pub(crate) id: String,
    /// The node the connections talk to (followed through failovers behind Sentinel).
    pub(crate) route: Arc<Route>,
    pub(crate) conn: Conn,
    pub(crate) pubsub: PubSub,
    pub(crate) holds: Arc<Holds>,
    /// The local FIFO queues of owner-less waiters (semaphores, latches).
    pub(crate) gates: Gates,
    pub(crate) watchdog_timeout: Duration,
    /// The fair lock's per-waiter wait when the caller gives no wait limit (Redisson's
    /// `fairLockWaitTimeout`).
    pub(crate) fair_lock_wait_timeout: Duration,
    /// How long a waiter keeps waiting through a Redis outage (the connect timeout).
    pub(crate) outage_tolerance: Duration,
    /// Replicas every acquisition must reach (`ClientOptions::wait_for_replicas`).
    pub(crate) replica_sync: Option<crate::ReplicaSync>,
    /// Cancelled when the client closes (or this state is dropped): stops every task.
    pub(crate) stop: CancellationToken,
    /// The holder strings made last (see [`Ctx::holder`]).
    pub(crate) holders: HolderCache,
    /// Clean-ups of acquires and releases whose callers left, still running (see
    /// [`Settling`](crate::engine::settling::Settling)).
    pub(crate) settling: Arc<crate::engine::settling::Settling>,
    /// Keeps the process runtime running while this state (and so any call in flight) lives.
    /// Last, so that it goes after everything else.
    pub(crate) _runtime: crate::runtime::KeepAlive,
}

/// How many owners' holder strings are remembered.
const HOLDER_SLOTS: usize = 16;

/// The holder strings of the owners seen last, one slot per owner number modulo
/// [`HOLDER_SLOTS`]: the calls of one owner (an acquire and its release, a thread's many
/// acquires) share one string rather than each formatting and allocating its own. Holds keep none
/// (see `Hold::holder`).
#[derive(Default)]
pub(crate) struct HolderCache {
    slots: Mutex<[Option<Holder>; HOLDER_SLOTS]>,
}

/// A remembered holder string: owner number, suffix, the string.
type Holder = (u64, Suffix, Arc<str>);

impl Ctx {
    /// The holder string of `owner` with `suffix`: `<client-uuid>:<n><suffix>`.
    pub(crate) fn holder(&self, owner: crate::Owner, suffix: Suffix) -> Arc<str> {
        let n = owner.get();
        let slot = (n % HOLDER_SLOTS as u64) as usize;
        let mut slots = self
            .holders
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((seen, seen_suffix, holder)) = &slots[slot]
            && *seen == n
            && *seen_suffix == suffix
        {
            return holder.clone();
        }
        // Written into a string of the right size (`format!` grew its string twice), then
        // copied once into the `Arc`.
        let mut text = String::with_capacity(self.id.len() + 1 + 20 + suffix.as_str().len());
        {
            use std::fmt::Write as _;
            let _ = write!(text, "{}:{n}{suffix}", self.id);
        }
        let holder: Arc<str> = Arc::from(text);
        slots[slot] = Some((n, suffix, holder.clone()));
        holder
    }

    /// The response timeout every single command is bounded by.
    pub(crate) fn response_timeout(&self) -> Duration {
        self.conn.response_timeout()
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
