//! [`Ctx`]: everything one connected client generation owns, handed to every engine and object
//! operation (Redisson's `CommandAsyncExecutor` + `ServiceManager`, in one place).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::connection::{Conn, Route};
use crate::engine::holds::Holds;
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
}

impl Ctx {
    /// The holder string of `owner` with `suffix`: `<client-uuid>:<n><suffix>`.
    pub(crate) fn holder(&self, owner: crate::Owner, suffix: &str) -> Arc<str> {
        Arc::from(format!("{}:{}{suffix}", self.id, owner.get()))
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
