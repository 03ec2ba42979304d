//! [`Client`]: one per process and deployment; it owns the connections, the client id and the
//! watchdog, and hands out the named objects.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio_util::sync::CancellationToken;

use crate::connection::{Conn, Endpoint, Route, Timeouts};
use crate::context::Ctx;
use crate::engine::holds::{Holds, LostListener, LostLock};
use crate::engine::renewal;
use crate::error::{Error, Result};
use crate::owner::Owner;
use crate::pubsub::PubSub;

/// How many of its holds on one server (one master of a cluster) a closing client releases at
/// once (see [`Client::close`]).
const CLOSE_RELEASES_IN_FLIGHT: usize = 256;

/// Settings of a [`Client`].
///
/// # Examples
///
/// ```no_run
/// # async fn example() -> crosslock::Result<()> {
/// use std::time::Duration;
/// use crosslock::{Client, ClientOptions};
/// let options = ClientOptions::new()
///     .connect_timeout(Duration::from_secs(2))
///     .watchdog_timeout(Duration::from_secs(30));
/// let client = Client::connect_with("redis://127.0.0.1:6379/0", options).await?;
/// # client.close().await; Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientOptions {
    /// How long connecting may take before failing with
    /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable), and how long a waiting acquire
    /// waits out a Redis outage before failing the same way. Default 5 s.
    pub connect_timeout: Duration,
    /// How long one command may take before failing. Default 3 s (Redisson's `timeout`). A
    /// watchdog renewal waits a renewal period at most, if that is shorter.
    pub response_timeout: Duration,
    /// The lease of a lock acquired without one, renewed every third of it. Default 30 s
    /// (Redisson's `lockWatchdogTimeout`); keep it equal across all clients of a lock.
    pub watchdog_timeout: Duration,
    /// How many locks one renewal script renews. Default 100.
    pub watchdog_batch_size: usize,
    /// How long a [`FairLock`](crate::FairLock) waiter that gave no wait limit may take to come
    /// back before the others consider it dead and skip it. Default 300 s (Redisson's
    /// `fairLockWaitTimeout`); live crosslock waiters refresh their place, so this only bounds
    /// how long a crashed waiter holds up the line. Keep it equal across all clients of a lock.
    pub fair_lock_wait_timeout: Duration,
    /// PEM-encoded root certificate(s) to trust for a `rediss://` server, instead of the built-in
    /// web roots: for a server whose certificate comes from a private CA. Default `None`.
    pub tls_ca_cert: Option<Vec<u8>>,
    /// Wait for replicas after each acquisition (Redis `WAIT`); off by default. See
    /// [`wait_for_replicas`](Self::wait_for_replicas).
    pub replica_sync: Option<ReplicaSync>,
    /// What this process is called in `CLIENT LIST`: every connection of the client is named
    /// `<client_name>-<language>-<pid>-<id8>` (`CLIENT SETNAME`; `id8` is the start of
    /// [`Client::id`]), so the inspector can name the process behind a holder. Default `None`:
    /// `crosslock`. 1 to 64 printable ASCII characters, no spaces. See [`crate::naming`].
    pub client_name: Option<String>,
}

/// How many replicas must have an acquisition, and how long to wait for them: see
/// [`ClientOptions::wait_for_replicas`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let options = crosslock::ClientOptions::new().wait_for_replicas(2, Duration::from_millis(500));
/// let sync: crosslock::ReplicaSync = options.replica_sync.unwrap();
/// assert_eq!((sync.replicas, sync.timeout), (2, Duration::from_millis(500)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaSync {
    /// How many replicas of the master must acknowledge (at least 1).
    pub replicas: u32,
    /// How long to wait for them (Redis `WAIT`'s timeout).
    pub timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(3),
            watchdog_timeout: Duration::from_secs(30),
            watchdog_batch_size: 100,
            fair_lock_wait_timeout: Duration::from_secs(300),
            tls_ca_cert: None,
            replica_sync: None,
            client_name: None,
        }
    }
}

impl ClientOptions {
    /// The defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// let options = crosslock::ClientOptions::new();
    /// assert_eq!(options.watchdog_timeout, std::time::Duration::from_secs(30));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`client_name`](Self::client_name).
    ///
    /// # Examples
    ///
    /// ```
    /// let options = crosslock::ClientOptions::new().client_name("orders-api");
    /// assert_eq!(options.client_name.as_deref(), Some("orders-api"));
    /// ```
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }

    /// Sets [`connect_timeout`](Self::connect_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = crosslock::ClientOptions::new().connect_timeout(Duration::from_secs(2));
    /// assert_eq!(options.connect_timeout, Duration::from_secs(2));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`response_timeout`](Self::response_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = crosslock::ClientOptions::new().response_timeout(Duration::from_secs(1));
    /// assert_eq!(options.response_timeout, Duration::from_secs(1));
    /// ```
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Sets [`watchdog_timeout`](Self::watchdog_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// // Renewed every 5 s; keep it equal in every client (and Redisson's lockWatchdogTimeout).
    /// let options = crosslock::ClientOptions::new().watchdog_timeout(Duration::from_secs(15));
    /// assert_eq!(options.watchdog_timeout, Duration::from_secs(15));
    /// ```
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.watchdog_timeout = timeout;
        self
    }

    /// Sets [`watchdog_batch_size`](Self::watchdog_batch_size).
    ///
    /// # Examples
    ///
    /// ```
    /// let options = crosslock::ClientOptions::new().watchdog_batch_size(500);
    /// assert_eq!(options.watchdog_batch_size, 500);
    /// ```
    pub fn watchdog_batch_size(mut self, size: usize) -> Self {
        self.watchdog_batch_size = size;
        self
    }

    /// Sets [`fair_lock_wait_timeout`](Self::fair_lock_wait_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = crosslock::ClientOptions::new().fair_lock_wait_timeout(Duration::from_secs(60));
    /// assert_eq!(options.fair_lock_wait_timeout, Duration::from_secs(60));
    /// ```
    pub fn fair_lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.fair_lock_wait_timeout = timeout;
        self
    }

    /// Sets [`tls_ca_cert`](Self::tls_ca_cert) (PEM bytes).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example() -> crosslock::Result<()> {
    /// let pem = std::fs::read("ca.pem").expect("the CA certificate");
    /// let options = crosslock::ClientOptions::new().tls_ca_cert(pem);
    /// let client = crosslock::Client::connect_with("rediss://redis.internal:6380/0", options).await?;
    /// # client.close().await; Ok(()) }
    /// ```
    pub fn tls_ca_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_ca_cert = Some(pem.into());
        self
    }

    /// After every acquisition (a lock, a read or write hold, a permit; re-entries too), waits
    /// until `replicas` replicas of the master have it, at most `timeout` (Redis `WAIT`, as
    /// Redisson does after its lock scripts). Off by default.
    ///
    /// When fewer replicas acknowledge in time, the acquisition is given back at once and the
    /// acquire fails with [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable), saying how
    /// many replicas answered; nothing is left held (a waiting acquire does not keep trying: a
    /// replica that lags behind is an operator's matter).
    ///
    /// What it guarantees: a lock you were told you hold had reached `replicas` replicas, so a
    /// failover that promotes one of them keeps it (with `replicas` = all replicas, any failover
    /// does). What it does not: renewals and releases are not waited for (a release lost in a
    /// failover leaves the lock until its lease runs out; a renewal lost in one shortens the
    /// lease, and the holder is told if the lock is lost), and a replica that acknowledged may
    /// still lose the write if it crashes too. Acquisitions use a connection of their own, so a
    /// slow replica delays acquisitions, never renewals or releases. Each acquisition costs the
    /// time the replicas take to acknowledge (about one round trip from the master to them).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = crosslock::ClientOptions::new().wait_for_replicas(1, Duration::from_secs(1));
    /// assert_eq!(options.replica_sync.unwrap().replicas, 1);
    /// ```
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replica_sync = Some(ReplicaSync { replicas, timeout });
        self
    }

    fn validate(&self) -> Result<()> {
        let day = Duration::from_secs(86_400);
        for (what, value) in [
            ("connect_timeout", self.connect_timeout),
            ("response_timeout", self.response_timeout),
        ] {
            if value < Duration::from_millis(1) || value > day {
                return Err(Error::invalid(format!(
                    "{what} must be between 1 ms and 1 day, got {value:?}"
                )));
            }
        }
        if self.watchdog_timeout < Duration::from_millis(30)
            || self.watchdog_timeout > crate::MAX_DURATION
        {
            return Err(Error::invalid(format!(
                "watchdog_timeout must be at least 30 ms (it is renewed every third of it) and at most \
                 2^53-1 ms, got {:?}",
                self.watchdog_timeout
            )));
        }
        if self.fair_lock_wait_timeout < Duration::from_millis(1)
            || self.fair_lock_wait_timeout > crate::MAX_DURATION
        {
            return Err(Error::invalid(format!(
                "fair_lock_wait_timeout must be between 1 ms and 2^53-1 ms, got {:?}",
                self.fair_lock_wait_timeout
            )));
        }
        crate::limits::WATCHDOG_BATCH
            .check(self.watchdog_batch_size as u64, "watchdog_batch_size")?;
        if let Some(name) = &self.client_name {
            crate::naming::check_name(name)?;
        }
        if let Some(sync) = self.replica_sync {
            crate::limits::REPLICAS.check(
                sync.replicas,
                "wait_for_replicas (leave it unset not to wait)",
            )?;
            if sync.timeout < Duration::from_millis(1) || sync.timeout > day {
                return Err(Error::invalid(format!(
                    "the replica wait timeout must be between 1 ms and 1 day, got {:?}",
                    sync.timeout
                )));
            }
        }
        Ok(())
    }
}

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
    inner: Arc<Inner>,
}

struct Inner {
    endpoint: Endpoint,
    options: ClientOptions,
    generation: ArcSwap<Generation>,
    closed: CancellationToken,
    listener: Arc<ArcSwapOption<LostListener>>,
}

/// The client's state in one process: rebuilt in a forked child.
struct Generation {
    pid: u32,
    id: String,
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

impl Client {
    /// How long a wait of this client rides out an outage (its connect timeout).
    pub(crate) fn outage_tolerance(&self) -> Duration {
        self.inner.options.connect_timeout
    }

    /// Connects with default [`ClientOptions`].
    ///
    /// `url` is `redis://[user:password@]host:port/db`, or `rediss://…` for TLS. For Sentinel it
    /// is `redis+sentinel://[user:password@]host:port[,host:port…]/<master name>[/db]` (the hosts
    /// are the sentinels, port 26379 by default; the user info is the data nodes';
    /// `?sentinel_username=…&sentinel_password=…` are the sentinels' own), or
    /// `rediss+sentinel://…` for TLS: the client finds the master and follows it through
    /// failovers. For Cluster it is `redis+cluster://[user:password@]host:port[,host:port…]`
    /// (seed nodes; `?sharded_pubsub=auto|on|off` picks the pub/sub flavour, `auto` as
    /// Redisson's default), or `rediss+cluster://…` for TLS: each object goes to the master
    /// owning its slot.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a malformed URL or
    /// refused credentials; [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) when the
    /// server cannot be reached within the connect timeout (the message names the address). A
    /// connect that fails closes whatever connection it had opened (a server at `maxclients` may
    /// take the first and refuse the second).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future drops the connection being made; nothing is left in Redis.
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
    pub async fn connect(url: &str) -> Result<Client> {
        Self::connect_with(url, ClientOptions::default()).await
    }

    /// Connects with `options`.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect), and `InvalidArgument` for out-of-range options.
    ///
    /// # Cancel safety
    ///
    /// As [`connect`](Self::connect).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example() -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let options = crosslock::ClientOptions::new().response_timeout(Duration::from_secs(1));
    /// let client = crosslock::Client::connect_with("redis://127.0.0.1:6379/0", options).await?;
    /// # client.close().await; Ok(()) }
    /// ```
    pub async fn connect_with(url: &str, options: ClientOptions) -> Result<Client> {
        options.validate()?;
        let endpoint = Endpoint::parse(url, options.tls_ca_cert.clone())?;
        let client = Client {
            inner: Arc::new(Inner {
                endpoint,
                options,
                generation: ArcSwap::from_pointee(Generation::new()),
                closed: CancellationToken::new(),
                listener: Arc::new(ArcSwapOption::empty()),
            }),
        };
        let connecting = client.clone();
        // The runtime must not shut down (another process-wide last client closing) before the
        // connected state keeps it running.
        let _keep = crate::runtime::KeepAlive::new();
        // Connect on the runtime, so the connections' driver tasks live there whoever calls.
        crate::runtime::spawn(async move { connecting.state().await.map(|_| ()) })
            .await
            .map_err(|e| Error::new(crate::ErrorKind::Redis, format!("connect failed: {e}")))??;
        Ok(client)
    }

    /// This client's id in the current process: the `<client-uuid>` of its holder strings.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("this process is {}", client.id()); // the <client-uuid> of its holder strings
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> String {
        self.generation().id.clone()
    }

    /// The holder string of `owner`: `<client-uuid>:<n>`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let holder = client.holder(crosslock::Owner::new(7));
    /// assert_eq!(holder, format!("{}:7", client.id()));
    /// # Ok(()) }
    /// ```
    pub fn holder(&self, owner: Owner) -> String {
        owner.holder(&self.id())
    }

    /// The address this client connects to (`host:port`, `master '<name>' via sentinels
    /// <host:port,…>`, or `cluster via <host:port,…>`), for messages.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("connected to {}", client.address()); // host:port, never the password
    /// # Ok(()) }
    /// ```
    pub fn address(&self) -> &str {
        &self.inner.endpoint.address
    }

    /// The options it was made with.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("watchdog lease {:?}", client.options().watchdog_timeout);
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// Calls `listener` (on a runtime thread) for every hold of this client found lost: a renewal
    /// found it gone, or its last confirmed lease ran out unrenewed. Replaces any previous
    /// listener. Per hold, [`LockGuard::lost`](crate::LockGuard::lost) is the simpler tool.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// client.on_lock_lost(|lost| {
    ///     eprintln!("lock {} lost by {}: {}", lost.name, lost.holder, lost.reason);
    /// });
    /// # Ok(()) }
    /// ```
    pub fn on_lock_lost(&self, listener: impl Fn(LostLock) + Send + Sync + 'static) {
        self.inner
            .listener
            .store(Some(Arc::new(Arc::new(listener))));
    }

    /// Whether [`close`](Self::close) was called.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// client.close().await;
    /// assert!(client.is_closed());
    /// # Ok(()) }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// Closes the client: pending acquires fail, held locks are released (best effort, within the
    /// response timeout; on a cluster each master's releases go out on their own, so a master
    /// that does not answer holds back none of the others'), renewal stops and the connections
    /// close. Idempotent.
    ///
    /// # Cancel safety
    ///
    /// Once called, the client is closed, and the releases, the end of renewal and the closing of
    /// the connections run to their end in the background: dropping the future only stops waiting
    /// for them.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let _guard = client.lock("orders:42")?.acquire().await?;
    /// client.close().await; // releases it, stops renewal, closes the connections
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) {
        if self.inner.closed.is_cancelled() {
            return;
        }
        self.inner.closed.cancel();
        // Running to its end even if this is the last client (its state lets go of the runtime
        // inside the task below).
        let _keep = crate::runtime::KeepAlive::new();
        // A task of its own, so that a caller who stops waiting (a dropped future, a cancelled
        // asyncio task) does not stop the releases half-way, leaving the holds not yet released
        // to their leases, with renewal stopped and the connections open.
        let closing = self.clone();
        let _ = crate::runtime::spawn(async move { closing.release_and_disconnect().await }).await;
    }

    /// The work of [`close`](Self::close), once the client is marked closed.
    async fn release_and_disconnect(&self) {
        let generation = self.generation();
        let Some(cx) = generation.state.get().cloned() else {
            return;
        };
        // The releases of each master (on a cluster) on their own: a master that does not answer
        // keeps its releases waiting out the response timeout, and must not keep the others'
        // from being sent (their locks would stay until their leases ran out).
        let deadline = tokio::time::Instant::now() + self.inner.options.response_timeout;
        let holds = cx.holds.drain();
        let names: Vec<&str> = holds.iter().map(|hold| &*hold.name).collect();
        let masters = tokio::time::timeout_at(deadline, cx.conn.masters_of(&names)).await;
        let masters = masters.unwrap_or_else(|_| vec![None; holds.len()]);
        let mut by_master = std::collections::BTreeMap::<Option<u64>, Vec<_>>::new();
        for (hold, master) in holds.into_iter().zip(masters) {
            by_master.entry(master).or_default().push(hold);
        }
        // A bounded number of releases in flight per master (the connection pipelines them):
        // all at once, 10,000 holds made 10,000 release futures, commands and replies alive
        // together (~30 MB).
        let work = futures_util::future::join_all(by_master.into_values().map(|releases| {
            crate::engine::at_most_in_flight(
                CLOSE_RELEASES_IN_FLIGHT,
                releases.into_iter().map(|hold| {
                    hold.releaser
                        .release_on_close(cx.clone(), hold.name, hold.holder)
                }),
                drop,
            )
        }));
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

    /// The number of locks the watchdog currently renews (for tests and diagnostics).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.lock("orders:42")?.acquire().await?;
    /// assert_eq!(client.watched_locks(), 1); // renewed by the watchdog
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn watched_locks(&self) -> usize {
        self.state_now().map_or(0, |s| s.holds.watched_count())
    }

    /// The number of channels the subscription connection is subscribed to right now.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("{} channels subscribed", client.subscribed_channels());
    /// # Ok(()) }
    /// ```
    pub fn subscribed_channels(&self) -> usize {
        self.state_now().map_or(0, |s| s.pubsub.channel_count())
    }

    /// Whether this client talks to a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.inner.endpoint.is_cluster()
    }

    fn generation(&self) -> Arc<Generation> {
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
            let state = generation
                .state
                .get_or_try_init(|| self.connect_state(&generation))
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
        let route = Route::open(&self.inner.endpoint, timeouts, stop.clone(), name).await?;
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
            stop,
            holders: Default::default(),
            settling: Default::default(),
            _runtime: keep,
        }))
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("address", &self.inner.endpoint.address)
            .field("id", &self.generation().id)
            .field("closed", &self.is_closed())
            .finish()
    }
}
