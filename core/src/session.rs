//! A client's session: the [`Client`] handle's shared state, the [`Generation`] of it that
//! belongs to this process (rebuilt after `fork()`), and [`Ctx`], everything one connected
//! generation owns, handed to every engine and object operation (Redisson's
//! `CommandAsyncExecutor` + `ServiceManager`, in one place).
//!
//! The public methods of [`Client`] are the facade in `client.rs`; this module owns its state
//! machine (connect on first use and after a fork, let go on close). The engine and the objects
//! reach the connected state through [`Client::state`] and [`Client::state_now`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio_util::sync::CancellationToken;

use crate::engine::holds::{Holds, Suffix};
use crate::engine::lost::LostListener;
use crate::engine::renewal;
use crate::engine::unowned::Gates;
use crate::error::{Error, Result};
use crate::options::ClientOptions;
use crate::transport::pubsub::PubSub;
use crate::transport::{Conn, Endpoint, Route, Timeouts};

/// How many of its holds on one server (one master of a cluster) a closing client releases at
/// once (see [`Client::close`]).
const CLOSE_RELEASES_IN_FLIGHT: usize = 256;

/// A connection to one Redis deployment, with its own client id.
///
/// Make one per process and share it (it is a cheap handle: clones share everything). It holds a
/// command connection and one subscription connection shared by every waiter, and runs the
/// watchdog that renews this client's locks. [`close`](Self::close) releases the locks it still
/// holds; dropping the last handle (and every lock and guard made from it) without closing
/// closes the connections and stops renewal, so those locks expire after their lease.
///
/// After `fork()` the child's first operation transparently builds a fresh client state (new
/// client id, new connections); the child never renews or releases the parent's locks.
///
/// # Examples
///
/// ```no_run
/// # async fn example() -> crosslock::Result<()> {
/// let client = crosslock::Client::connect("redis://127.0.0.1:6379/0").await?;
/// let guard = client.lock("orders:42")?.acquire().await?;
/// guard.release().await?;
/// client.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Session>,
}

/// What every handle of one [`Client`] shares: where it connects, its options, whether it was
/// closed, its lost-lock listener, and its [`Generation`].
pub(crate) struct Session {
    pub(crate) endpoint: Endpoint,
    pub(crate) options: ClientOptions,
    generation: ArcSwap<Generation>,
    pub(crate) closed: CancellationToken,
    pub(crate) listener: Arc<ArcSwapOption<LostListener>>,
}

impl Session {
    /// A session not yet connected: its first [`Client::state`] connects.
    pub(crate) fn new(endpoint: Endpoint, options: ClientOptions) -> Session {
        Session {
            endpoint,
            options,
            generation: ArcSwap::from_pointee(Generation::new()),
            closed: CancellationToken::new(),
            listener: Arc::new(ArcSwapOption::empty()),
        }
    }
}

/// The client's state in one process: rebuilt in a forked child.
pub(crate) struct Generation {
    pid: u32,
    pub(crate) id: String,
    state: tokio::sync::OnceCell<Arc<Ctx>>,
}

impl Generation {
    fn new() -> Self {
        Generation {
            pid: crate::runtime::pid(),
            id: uuid::Uuid::new_v4().to_string(),
            state: tokio::sync::OnceCell::new(),
        }
    }
}

/// The state half of [`Client`]: its connected state in this process, made on first use.
impl Client {
    /// How long a wait of this client rides out an outage (its connect timeout).
    pub(crate) fn outage_tolerance(&self) -> Duration {
        self.inner.options.connect_timeout
    }

    /// The work of [`close`](Self::close), once the client is marked closed.
    pub(crate) async fn release_and_disconnect(&self) {
        let generation = self.generation();
        let Some(cx) = generation.state.get().cloned() else {
            return;
        };
        // The releases of each master (on a cluster) on their own: a master that does not answer
        // keeps its releases waiting out the response timeout, and must not keep the others'
        // from being sent (their locks would stay until their leases ran out).
        let deadline = tokio::time::Instant::now() + self.inner.options.response_timeout;
        let holds = cx.holds.drain();
        let groups = cx.conn.by_master(holds, |hold| &hold.name, deadline).await;
        // A bounded number of releases in flight per master (the connection pipelines them):
        // all at once, 10,000 holds made 10,000 release futures, commands and replies alive
        // together (~30 MB).
        let groups = groups.into_iter().map(|releases| {
            let releases = releases.into_iter().map(|hold| {
                hold.releaser
                    .release_on_close(cx.clone(), hold.name, hold.holder)
            });
            (std::future::ready(true), releases)
        });
        let work = crate::transport::fanout::per_group(CLOSE_RELEASES_IN_FLIGHT, groups, drop);
        let _ = tokio::time::timeout_at(deadline, work).await;
        cx.stop.cancel();
        // Let go of the connected state, so that the connections close now rather than when the
        // last handle to this client is dropped (calls in flight keep it until they end).
        let closed = Arc::new(Generation {
            pid: generation.pid,
            id: generation.id.clone(),
            state: tokio::sync::OnceCell::new(),
        });
        self.inner.generation.compare_and_swap(&generation, closed);
        // No hold is left to be lost: let go of the listener (and whatever it keeps, such as a
        // binding's dispatcher thread).
        self.inner.listener.store(None);
    }

    /// Whether this client talks to a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.inner.endpoint.is_cluster()
    }

    pub(crate) fn generation(&self) -> Arc<Generation> {
        let current = self.inner.generation.load_full();
        if current.pid == crate::runtime::pid() {
            return current;
        }
        // A forked child: the parent's generation (its connections, tasks and id) must never be
        // used nor dropped here. Leak it and start over.
        let fresh = Arc::new(Generation::new());
        let previous = self
            .inner
            .generation
            .compare_and_swap(&current, fresh.clone());
        if Arc::ptr_eq(&previous, &current) {
            std::mem::forget(current);
            fresh
        } else {
            self.inner.generation.load_full()
        }
    }

    pub(crate) fn state_now(&self) -> Option<Arc<Ctx>> {
        self.generation().state.get().cloned()
    }

    /// The connected state of this process, connecting on first use (and after a fork).
    pub(crate) async fn state(&self) -> Result<Arc<Ctx>> {
        if self.inner.closed.is_cancelled() {
            return Err(Error::closed());
        }
        let generation = self.generation();
        if let Some(state) = generation.state.get() {
            return Ok(state.clone());
        }
        // Only the first call connects. Boxed, so that the future of every call (an acquire's,
        // a release's) does not carry the connect's state inline: 5 KB more per call, allocated
        // and moved each time, and per spawned task.
        Box::pin(async {
            // In crosslock's runtime, whoever calls (a connect after a fork is made by the first
            // call): the connections' driver tasks live there (see `runtime::in_context`).
            let state = generation
                .state
                .get_or_try_init(|| {
                    crate::runtime::in_context(Box::pin(self.connect_state(&generation)))
                })
                .await?;
            Ok(state.clone())
        })
        .await
    }

    async fn connect_state(&self, generation: &Generation) -> Result<Arc<Ctx>> {
        let keep = crate::runtime::KeepAlive::new();
        let options = &self.inner.options;
        let timeouts = Timeouts {
            connect: options.connect_timeout,
            response: options.response_timeout,
        };
        let stop = self.inner.closed.child_token();
        // A connect that fails part-way (the pub/sub connection refused by a full server after
        // the command connection got in, the replicas' connection refused after both) must leave
        // nothing open: what opened so far is kept alive by its tasks (the keepalive, the
        // Sentinel followers) until `stop`, so an error (or a dropped future) cancels it.
        let undo = stop.clone().drop_guard();
        let name = crate::naming::connection_name(
            options.client_name.as_deref(),
            generation.pid,
            &generation.id,
        );
        let route = Route::open(
            &self.inner.endpoint,
            timeouts,
            stop.clone(),
            name,
            options.lanes,
            options.telemetry.clone(),
        )
        .await?;
        let (conn, pubsub) = tokio::try_join!(
            Conn::connect(&route, timeouts, stop.clone()),
            PubSub::connect(&route, timeouts, stop.clone()),
        )?;
        if let Some(sync) = options.replica_sync {
            // Acquisitions and their WAIT get a connection of their own: WAIT blocks the
            // connection it is sent on until the replicas answer.
            let acquisitions = Conn::connect(&route, timeouts, stop.clone()).await?;
            conn.wait_for_replicas(acquisitions, sync);
        }
        let stop = undo.disarm();
        let holds = Holds::new(
            &generation.id,
            options.watchdog_timeout,
            options.watchdog_batch_size,
            self.inner.listener.clone(),
            options.telemetry.clone(),
        );
        crate::runtime::spawn(renewal::run(
            Arc::downgrade(&holds),
            conn.clone(),
            stop.clone(),
            self.inner.listener.clone(),
        ));
        Ok(Arc::new(Ctx {
            id: generation.id.clone(),
            route,
            conn,
            pubsub,
            holds,
            gates: Default::default(),
            watchdog_timeout: options.watchdog_timeout,
            fair_lock_wait_timeout: options.fair_lock_wait_timeout,
            outage_tolerance: options.connect_timeout,
            replica_sync: options.replica_sync,
            telemetry: options.telemetry.clone(),
            stop,
            holders: Default::default(),
            settling: Default::default(),
            _runtime: keep,
        }))
    }
}

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
    pub(crate) replica_sync: Option<crate::options::ReplicaSync>,
    /// Told what the client measures ([`ClientOptions::telemetry`](crate::ClientOptions::telemetry)).
    pub(crate) telemetry: Option<crate::telemetry::Telemetry>,
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
