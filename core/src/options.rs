//! [`ClientOptions`], [`ReplicaSync`] and [`Lanes`]: a client's settings, checked before anything
//! connects; [`AcquireOptions`]: one acquire's, checked before anything is sent.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::owner::Owner;

/// The longest lease or wait accepted ([`MAX_DURATION`](crate::MAX_DURATION), restated from the
/// limits table so that this leaf module imports nothing above it).
const LONGEST: Duration = Duration::from_millis(crate::limits::DURATION_MS.max as u64);

/// Settings of a [`Client`](crate::Client).
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
    /// [`Client::id`](crate::Client::id)), so the inspector can name the process behind a
    /// holder. Default `None`: `crosslock`. 1 to 64 printable ASCII characters, no spaces. See
    /// [`crate::naming`].
    pub client_name: Option<String>,
    /// Which callers may make their round trips on connections of their own (*lanes*) rather
    /// than through crosslock's runtime. Default [`Lanes::All`]. See [`Lanes`].
    pub lanes: Lanes,
    /// Where the client tells what it measures of its waits and holds. Default `None`: nothing
    /// is measured. See [`crate::telemetry`].
    pub telemetry: Option<crate::telemetry::Telemetry>,
}

/// Which callers get *lanes*: connections of their own to the node, on which an uncontended call
/// makes its round trip where it was made (on the calling thread, or on its event loop) instead
/// of handing it to crosslock's runtime and back. Lanes open only while calls come in quick
/// succession, at most 16 per client and node, and never over TLS or across `fork()`; a call
/// that has to wait (a busy lock) takes the usual way whatever this says. See
/// [`ClientOptions::lanes`](ClientOptions::lanes()).
///
/// # Examples
///
/// ```
/// use crosslock::{ClientOptions, Lanes};
/// let options = ClientOptions::new().lanes(Lanes::SyncOnly);
/// assert_eq!(options.lanes, Lanes::SyncOnly);
/// assert_eq!(Lanes::from_name("none").unwrap(), Lanes::Off);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lanes {
    /// Every caller that can use one: a blocking caller's own thread (sync Python), a binding's
    /// event loop (asyncio, Node.js), and each thread of an application's own tokio runtime
    /// (`#[tokio::main]`), whose lanes that runtime's reactor watches. The default.
    #[default]
    All,
    /// Blocking callers' lanes only (a sync Python method's thread): no event loop's lanes and
    /// none on an application's tokio runtime, whose calls all go through crosslock's runtime
    /// (so no socket is ever registered with your reactor).
    SyncOnly,
    /// No lanes: every call goes through crosslock's runtime on the client's usual connections,
    /// and no connection is opened beyond them (`"none"` in the bindings).
    Off,
}

impl Lanes {
    /// The name the bindings spell this with: `"all"`, `"sync"` or `"none"`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::Lanes::SyncOnly.name(), "sync");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Lanes::All => "all",
            Lanes::SyncOnly => "sync",
            Lanes::Off => "none",
        }
    }

    /// The setting a binding names `name` ([`Lanes::name`]): `"all"`, `"sync"` or `"none"`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for any other name,
    /// naming the three.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::Lanes;
    /// assert_eq!(Lanes::from_name("none").unwrap(), Lanes::Off);
    /// assert!(Lanes::from_name("off").is_err());
    /// ```
    pub fn from_name(name: &str) -> Result<Lanes> {
        [Lanes::All, Lanes::SyncOnly, Lanes::Off]
            .into_iter()
            .find(|lanes| lanes.name() == name)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "lanes must be 'all', 'sync' or 'none', got {name:?}"
                ))
            })
    }

    /// Whether any caller may take a lane (everything but [`Lanes::Off`]).
    pub(crate) fn any(self) -> bool {
        self != Lanes::Off
    }

    /// Whether event loops (a binding's, or an application's tokio runtime) may take a lane.
    pub(crate) fn event_loops(self) -> bool {
        self == Lanes::All
    }
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

impl ReplicaSync {
    /// How long the bindings wait for the replicas when `connect` is given only their number
    /// (Python's `replica_wait_timeout`, Node's `replicaWaitTimeout`): 1 s. In Rust
    /// [`ClientOptions::wait_for_replicas`] takes it explicitly.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::{ClientOptions, ReplicaSync};
    /// let options = ClientOptions::new().wait_for_replicas(1, ReplicaSync::DEFAULT_TIMEOUT);
    /// assert_eq!(options.replica_sync.unwrap().timeout, std::time::Duration::from_secs(1));
    /// ```
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
}

/// The defaults, spelled here only: the bindings take theirs from this (through their native
/// modules' tables, Python's `_native.CONNECT_DEFAULTS`, Node's `clientDefaults()`), and
/// `core/tests/house_rules.rs` ties every default written in the docs, stubs and doc comments to
/// these values.
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
            lanes: Lanes::default(),
            telemetry: None,
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

    /// Sets [`lanes`](Self::lanes): which callers may make their round trips on connections of
    /// their own. [`Lanes::SyncOnly`] keeps crosslock's sockets off your tokio runtime's reactor;
    /// [`Lanes::Off`] keeps the client to its usual connections (for a tight `maxclients`).
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::{ClientOptions, Lanes};
    /// let options = ClientOptions::new().lanes(Lanes::Off);
    /// assert_eq!(options.lanes, Lanes::Off);
    /// ```
    pub fn lanes(mut self, lanes: Lanes) -> Self {
        self.lanes = lanes;
        self
    }

    /// Sets [`telemetry`](Self::telemetry): the recorder told of every wait and hold (with the
    /// cargo feature `opentelemetry`, [`OpenTelemetry`](crate::telemetry) records them as
    /// OpenTelemetry metrics).
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::telemetry::{Event, Telemetry};
    /// let options = crosslock::ClientOptions::new()
    ///     .telemetry(Telemetry::from_fn(|event: &Event<'_>| eprintln!("{event:?}")));
    /// assert!(options.telemetry.is_some());
    /// ```
    pub fn telemetry(mut self, telemetry: crate::telemetry::Telemetry) -> Self {
        self.telemetry = Some(telemetry);
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

    pub(crate) fn validate(&self) -> Result<()> {
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
        if self.watchdog_timeout < Duration::from_millis(30) || self.watchdog_timeout > LONGEST {
            return Err(Error::invalid(format!(
                "watchdog_timeout must be at least 30 ms (it is renewed every third of it) and at most \
                 2^53-1 ms, got {:?}",
                self.watchdog_timeout
            )));
        }
        if self.fair_lock_wait_timeout < Duration::from_millis(1)
            || self.fair_lock_wait_timeout > LONGEST
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

/// How to acquire: wait limit, lease, owner, cancellation.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use crosslock::{AcquireOptions, Owner};
///
/// let options = AcquireOptions::new()
///     .wait(Duration::from_secs(2))        // give up after 2 s
///     .lease(Duration::from_secs(10))      // expire after 10 s, no renewal
///     .owner(Owner::new(7));               // acquire as owner 7
/// assert_eq!(options.wait, Some(Duration::from_secs(2)));
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct AcquireOptions {
    /// How long to wait: `None` waits until acquired, `Some(ZERO)` tries once. At most
    /// [`MAX_DURATION`](crate::MAX_DURATION).
    pub wait: Option<Duration>,
    /// How long the lock lives without renewal: `None` means watchdog renewal. At least 1 ms and
    /// at most [`MAX_DURATION`](crate::MAX_DURATION).
    pub lease: Option<Duration>,
    /// Who acquires: `None` means [`Owner::current`].
    pub owner: Option<Owner>,
    /// Cancels the wait when cancelled; the call then fails with
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled).
    pub cancel: Option<CancellationToken>,
}

impl AcquireOptions {
    /// Wait without limit, watchdog lease, current owner.
    ///
    /// # Examples
    ///
    /// ```
    /// let options = crosslock::AcquireOptions::new();
    /// assert!(options.wait.is_none() && options.lease.is_none() && options.owner.is_none());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives up after `wait` (zero: a single attempt).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let lock = client.lock("orders:42")?;
    /// let options = crosslock::AcquireOptions::new().wait(Duration::from_millis(500));
    /// match lock.acquire_with(options).await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(e) if e.is_timeout() => println!("busy: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Lets the lock expire `lease` after acquiring it, with no renewal. Must be at least 1 ms.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let options = crosslock::AcquireOptions::new().lease(Duration::from_secs(10));
    /// let _guard = client.lock("orders:42")?.acquire_with(options).await?; // expires after 10 s
    /// # Ok(()) }
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Acquires on behalf of `owner` instead of [`Owner::current`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use crosslock::{AcquireOptions, Owner};
    /// let lock = client.lock("orders:42")?;
    /// let _guard = lock.acquire_with(AcquireOptions::new().owner(Owner::new(7))).await?;
    /// assert!(lock.is_held_by(Owner::new(7)).await?);
    /// # Ok(()) }
    /// ```
    pub fn owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Stops waiting when `token` is cancelled.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use crosslock::{AcquireOptions, CancellationToken};
    /// let stop = CancellationToken::new();
    /// let options = AcquireOptions::new().cancel(stop.clone());
    /// let lock = client.lock("orders:42")?;
    /// let waiting = lock.acquire_with(options);
    /// stop.cancel(); // e.g. on shutdown: the wait ends with ErrorKind::Cancelled
    /// let _ = waiting.await;
    /// # Ok(()) }
    /// ```
    pub fn cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Checks the ranges, naming the lock in the message.
    pub(crate) fn validate(&self, name: &str) -> Result<()> {
        if let Some(lease) = self.lease {
            if lease < Duration::from_millis(1) {
                return Err(Error::invalid(format!(
                    "the lease of lock '{name}' must be at least 1 ms, got {lease:?}; leave it out for \
                     watchdog renewal"
                ))
                .with_lock(name));
            }
            if lease > LONGEST {
                return Err(Error::invalid(format!(
                    "the lease of lock '{name}' is too long: {:.3e} s, the longest is 2^53-1 ms \
                     (about 285,000 years); leave it out for watchdog renewal",
                    lease.as_secs_f64()
                ))
                .with_lock(name));
            }
        }
        if let Some(wait) = self.wait
            && wait > LONGEST
        {
            return Err(Error::invalid(format!(
                "the wait limit for lock '{name}' is too long: {:.3e} s, the longest is 2^53-1 ms \
                 (about 285,000 years); leave it out to wait as long as it takes",
                wait.as_secs_f64()
            ))
            .with_lock(name));
        }
        Ok(())
    }
}
