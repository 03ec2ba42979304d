//! The one error type of crosslock.

use std::fmt;
use std::time::Duration;

/// What went wrong, coarsely: the part of an [`Error`] a program branches on.
///
/// New kinds may be added, so match with a wildcard arm.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use crosslock::ErrorKind;
/// match client.lock("orders:42")?.try_acquire().await {
///     Ok(Some(guard)) => guard.release().await?,
///     Ok(None) => println!("busy"),
///     Err(e) if e.kind() == ErrorKind::WrongType => println!("not a lock: {e}"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A release (or a hold-count change) by someone who does not hold the lock. Redis is unchanged.
    NotHeld,
    /// The wait limit passed before the lock could be acquired, Redis answering that it was busy
    /// (a wait that ends with Redis out of reach is [`Unavailable`](Self::Unavailable)).
    Timeout,
    /// The caller held the lock, but it is gone: it expired (for instance while Redis was out of
    /// reach) or someone force-unlocked it. Anything done since may have overlapped another holder.
    LockLost,
    /// Redis could not be reached, the connection dropped, or a reply did not come in time; also
    /// a wait that reached its limit without Redis answering any attempt (or with Redis out of
    /// reach at the end), and any use of a closed client.
    Unavailable,
    /// The lock's key holds a value of another type (a name collision). Nothing was modified.
    WrongType,
    /// An argument was out of range or malformed (an empty name, a negative duration, a bad URL).
    InvalidArgument,
    /// The wait was cancelled by the caller (an abort signal, Ctrl-C, a dropped future).
    Cancelled,
    /// Redis refused the credentials (a wrong password or user, or none given where one is
    /// needed). Retrying does not help: fix the URL.
    Auth,
    /// The caller already holds a lock that does not re-enter ([`NonReentrantLock`](crate::NonReentrantLock)):
    /// acquiring it again would wait for itself forever. Redis is unchanged.
    NonReentrant,
    /// The caller holds the read lock of a [`ReadWriteLock`](crate::ReadWriteLock) and asked
    /// for its write lock: an upgrade would wait for itself forever (Redisson refuses it too).
    /// Release the read lock first. Redis is unchanged.
    UpgradeRefused,
    /// Any other error reported by Redis; [`std::error::Error::source`] has the details.
    Redis,
}

impl ErrorKind {
    /// A stable upper-case code for this kind, the same string the Node binding exposes as
    /// `error.code` (`"NOT_HELD"`, `"TIMEOUT"`, …).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::ErrorKind::Timeout.code(), "TIMEOUT");
    /// ```
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::NotHeld => "NOT_HELD",
            ErrorKind::Timeout => "TIMEOUT",
            ErrorKind::LockLost => "LOCK_LOST",
            ErrorKind::Unavailable => "UNAVAILABLE",
            ErrorKind::WrongType => "WRONG_TYPE",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::Auth => "AUTH",
            ErrorKind::NonReentrant => "NON_REENTRANT",
            ErrorKind::UpgradeRefused => "UPGRADE_REFUSED",
            ErrorKind::Redis => "REDIS",
        }
    }

    /// Every kind, in a stable order: the one table the bindings build their error maps from.
    ///
    /// # Examples
    ///
    /// ```
    /// let codes: Vec<_> = crosslock::ErrorKind::ALL.iter().map(|k| k.code()).collect();
    /// assert!(codes.contains(&"NOT_HELD"));
    /// ```
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::NotHeld,
        ErrorKind::Timeout,
        ErrorKind::LockLost,
        ErrorKind::Unavailable,
        ErrorKind::WrongType,
        ErrorKind::InvalidArgument,
        ErrorKind::Cancelled,
        ErrorKind::Auth,
        ErrorKind::NonReentrant,
        ErrorKind::UpgradeRefused,
        ErrorKind::Redis,
    ];
}

/// The error of every fallible crosslock operation.
///
/// Its [`kind`](Error::kind) says what happened; [`lock_name`](Error::lock_name) and
/// [`holder`](Error::holder) say which lock and which holder it concerns; the `Display` text says
/// all of that in a sentence, with what to do about it.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// if let Err(e) = client.lock("orders:42")?.release_as(crosslock::Owner::new(1)).await {
///     eprintln!("{e}"); // says what happened, which lock and what to do
///     assert_eq!(e.lock_name(), Some("orders:42"));
/// }
/// # Ok(()) }
/// ```
pub struct Error {
    repr: Box<Repr>,
}

struct Repr {
    kind: ErrorKind,
    message: String,
    lock_name: Option<String>,
    holder: Option<String>,
    waited: Option<Duration>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
    /// An `Unavailable` error whose operation is known to have left nothing behind (a Redis
    /// that answered, but not well enough): the acquire loop does not ask Redis about it.
    settled: bool,
    /// An `Unavailable` error whose command never left this process (the connection was
    /// refused): nothing to ask Redis about, and safe to send again, whatever it does.
    unsent: bool,
    /// An `Unavailable` error of a wait that reached its limit with Redis out of reach: a
    /// composite waiting on it may try again within its own limit.
    at_deadline: bool,
}

/// What a Redis error concerns, for its message: the connection, a lock, or another object.
#[derive(Debug, Clone, Copy)]
pub(crate) enum What<'a> {
    Connection,
    Lock(&'a str),
    /// `(kind, name)`: `("semaphore", "jobs")`.
    Object(&'static str, &'a str),
}

impl<'a> From<Option<&'a str>> for What<'a> {
    fn from(name: Option<&'a str>) -> Self {
        name.map_or(What::Connection, What::Lock)
    }
}

impl<'a> From<Option<&'a std::sync::Arc<str>>> for What<'a> {
    fn from(name: Option<&'a std::sync::Arc<str>>) -> Self {
        name.map_or(What::Connection, |n| What::Lock(n))
    }
}

impl<'a> From<Option<&'a String>> for What<'a> {
    fn from(name: Option<&'a String>) -> Self {
        name.map_or(What::Connection, |n| What::Lock(n))
    }
}

impl<'a> From<(&'static str, &'a str)> for What<'a> {
    fn from((kind, name): (&'static str, &'a str)) -> Self {
        What::Object(kind, name)
    }
}

impl What<'_> {
    fn name(self) -> Option<String> {
        match self {
            What::Connection => None,
            What::Lock(n) | What::Object(_, n) => Some(n.to_owned()),
        }
    }

    fn phrase(self) -> String {
        match self {
            What::Connection => "the connection".to_owned(),
            What::Lock(n) => format!("lock '{n}'"),
            What::Object(kind, n) => format!("{kind} '{n}'"),
        }
    }

    fn kind(self) -> &'static str {
        match self {
            What::Object(kind, _) => kind,
            _ => "lock",
        }
    }
}

/// `Result<T, crosslock::Error>`.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// async fn take(client: &crosslock::Client) -> crosslock::Result<()> {
///     client.lock("orders:42")?.acquire().await?.release().await
/// }
/// take(client).await?;
/// # Ok(()) }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            repr: Box::new(Repr {
                kind,
                message: message.into(),
                lock_name: None,
                holder: None,
                waited: None,
                source: None,
                settled: false,
                unsent: false,
                at_deadline: false,
            }),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    pub(crate) fn closed() -> Self {
        Error::new(
            ErrorKind::Unavailable,
            "the crosslock client is closed; connect a new client to go on",
        )
    }

    pub(crate) fn with_lock(mut self, name: &str) -> Self {
        self.repr.lock_name = Some(name.to_owned());
        self
    }

    pub(crate) fn with_holder(mut self, holder: impl Into<String>) -> Self {
        self.repr.holder = Some(holder.into());
        self
    }

    pub(crate) fn with_waited(mut self, waited: Duration) -> Self {
        self.repr.waited = Some(waited);
        self
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.repr.source = Some(Box::new(source));
        self
    }

    /// Classifies a Redis error met while working on `subject` (a lock name, an object, or the
    /// connection when `None`).
    pub(crate) fn from_redis<'a>(err: redis::RedisError, subject: impl Into<What<'a>>) -> Self {
        let subject = subject.into();
        let what = subject.phrase();
        let kind = subject.kind();
        let detail = without_script_noise(err.detail().unwrap_or(""));
        let detail = if detail.starts_with("Operation against") {
            String::new()
        } else {
            detail
        };
        let this = match err.code() {
            Some("ERR_ARG") => Error::invalid(format!(
                "a script refused an argument for {what}: {detail}; this is a crosslock bug, please \
                 report it (nothing was changed)"
            )),
            Some("WRONGTYPE") => Error::new(
                ErrorKind::WrongType,
                format!(
                    "the key of {what} holds {}, not what a {kind} stores; nothing was modified. \
                     Pick a name that no other data (and no other kind of object) uses",
                    if detail.is_empty() {
                        "another type of value".to_owned()
                    } else {
                        detail
                    }
                ),
            ),
            Some("NON_REENTRANT_REACQUIRE") => Error::new(
                ErrorKind::NonReentrant,
                format!(
                    "{what} does not re-enter and this holder already holds it: acquiring it \
                     again would wait for itself forever; release it first (Redis is unchanged)"
                ),
            ),
            Some("UPGRADE_REFUSED") => Error::new(
                ErrorKind::UpgradeRefused,
                format!(
                    "the write lock of {what} was refused: this holder holds its read lock, and \
                     an upgrade would wait for itself forever; release the read lock first, then \
                     acquire the write lock (Redis is unchanged)"
                ),
            ),
            Some("WRONGPASS" | "NOAUTH" | "NOPERM") => Error::new(
                ErrorKind::Auth,
                format!(
                    "Redis refused the credentials working on {what}: {err}; fix the user and password in the URL"
                ),
            ),
            Some("OOM") => Error::new(
                ErrorKind::Redis,
                format!(
                    "Redis is out of memory and refused to write {what} (maxmemory reached with a \
                     noeviction policy); nothing was changed. Free memory or raise maxmemory"
                ),
            ),
            // The server is there but cannot serve writes right now (restarting, busy with a
            // script, failing over, a cluster slot moving and still redirected when the
            // client's retries ran out): a transient unavailability, not a refusal.
            Some(
                "LOADING" | "BUSY" | "READONLY" | "MASTERDOWN" | "TRYAGAIN" | "CLUSTERDOWN"
                | "MOVED" | "ASK",
            ) => Error::new(
                ErrorKind::Unavailable,
                format!(
                    "Redis cannot serve {what} right now ({err}); it is loading, busy or \
                         failing over: retry shortly"
                ),
            ),
            // Refused before anything was sent: a server that is down or restarting.
            _ if err.is_connection_refusal() => Error::new(
                ErrorKind::Unavailable,
                format!(
                    "Redis refused the connection while working on {what} ({err}), so nothing \
                     was sent; check that the server is up and reachable, then retry"
                ),
            )
            .unsent(),
            _ if err.is_io_error()
                || err.is_timeout()
                || err.is_connection_refusal()
                || err.is_connection_dropped()
                || matches!(
                    err.kind(),
                    redis::ErrorKind::Io | redis::ErrorKind::ClusterConnectionNotFound
                ) =>
            {
                Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "Redis did not answer while working on {what} ({err}); check that the \
                         server is up and reachable, then retry"
                    ),
                )
            }
            _ => Error::new(
                ErrorKind::Redis,
                format!("Redis refused an operation on {what}: {err}"),
            ),
        };
        let this = this.with_source(err);
        match subject.name() {
            Some(name) => this.with_lock(&name),
            None => this,
        }
    }

    /// The error of a command that got no answer within `timeout`.
    pub(crate) fn no_answer<'a>(subject: impl Into<What<'a>>, timeout: Duration) -> Self {
        let subject = subject.into();
        let what = subject.phrase();
        let lock_name = subject.name();
        let this = Error::new(
            ErrorKind::Unavailable,
            format!(
                "Redis did not answer within the response timeout ({:.3}s) while working on {what}; \
                 check that the server is up, reachable and not paused, then retry",
                timeout.as_secs_f64()
            ),
        );
        match lock_name {
            Some(name) => this.with_lock(&name),
            None => this,
        }
    }

    /// What kind of error this is.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let options = crosslock::AcquireOptions::new().wait(Duration::ZERO);
    /// if let Err(e) = client.lock("orders:42")?.acquire_with(options).await {
    ///     println!("{:?}: {}", e.kind(), e.kind().code()); // Timeout: TIMEOUT
    /// }
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.repr.kind
    }

    /// The lock this error concerns, when it concerns one.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// if let Err(e) = client.lock("orders:42")?.release_as(crosslock::Owner::new(1)).await {
    ///     println!("about {:?}", e.lock_name());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_name(&self) -> Option<&str> {
        self.repr.lock_name.as_deref()
    }

    /// The holder string (`<client-uuid>:<n>`) of the caller this error concerns, when known.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// if let Err(e) = client.lock("orders:42")?.release_as(crosslock::Owner::new(1)).await {
    ///     println!("caller {:?}", e.holder());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn holder(&self) -> Option<&str> {
        self.repr.holder.as_deref()
    }

    /// How long the caller waited before giving up ([`ErrorKind::Timeout`] and
    /// [`ErrorKind::Cancelled`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let options = crosslock::AcquireOptions::new().wait(Duration::from_millis(100));
    /// if let Err(e) = client.lock("orders:42")?.acquire_with(options).await {
    ///     println!("gave up after {:?}", e.waited());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn waited(&self) -> Option<Duration> {
        self.repr.waited
    }

    /// The human-readable message without the kind prefix.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// if let Err(e) = client.lock("orders:42")?.release_as(crosslock::Owner::new(1)).await {
    ///     println!("{}", e.message());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn message(&self) -> &str {
        &self.repr.message
    }

    /// `true` for [`ErrorKind::NotHeld`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let result = client.lock("orders:42")?.release_as(crosslock::Owner::new(1)).await;
    /// assert!(result.is_err_and(|e| e.is_not_held()));
    /// # Ok(()) }
    /// ```
    pub fn is_not_held(&self) -> bool {
        self.kind() == ErrorKind::NotHeld
    }

    /// `true` for [`ErrorKind::Timeout`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let options = crosslock::AcquireOptions::new().wait(Duration::from_millis(10));
    /// match client.lock("orders:42")?.acquire_with(options).await {
    ///     Err(e) if e.is_timeout() => println!("busy"),
    ///     other => other?.release().await?,
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_timeout(&self) -> bool {
        self.kind() == ErrorKind::Timeout
    }

    /// `true` for [`ErrorKind::LockLost`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.lock("orders:42")?.acquire().await?;
    /// if let Err(e) = guard.release().await {
    ///     if e.is_lock_lost() {
    ///         eprintln!("exclusion was broken meanwhile: {e}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lock_lost(&self) -> bool {
        self.kind() == ErrorKind::LockLost
    }

    /// `true` for [`ErrorKind::Unavailable`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example() {
    /// match crosslock::Client::connect("redis://127.0.0.1:1/0").await {
    ///     Err(e) if e.is_unavailable() => eprintln!("no Redis there: {e}"),
    ///     _ => {}
    /// }
    /// # }
    /// ```
    pub fn is_unavailable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }

    /// Marks an `Unavailable` error whose operation is known to have left nothing behind.
    pub(crate) fn settled(mut self) -> Self {
        self.repr.settled = true;
        self
    }

    /// An `Unavailable` error after which it is unknown what the operation did (no answer).
    pub(crate) fn is_unanswered(&self) -> bool {
        self.is_unavailable() && !self.repr.settled && !self.repr.unsent
    }

    /// Marks an `Unavailable` error whose command never left this process.
    /// Takes back [`Error::unsent`]: the command may have been sent after all (a cluster
    /// connection retries a request itself, so a refusal can follow a send).
    pub(crate) fn maybe_sent(mut self) -> Self {
        self.repr.unsent = false;
        self
    }

    pub(crate) fn unsent(mut self) -> Self {
        self.repr.unsent = true;
        self
    }

    /// Marks the `Unavailable` error of a wait that reached its limit with Redis out of reach.
    pub(crate) fn at_deadline(mut self) -> Self {
        self.repr.at_deadline = true;
        self
    }

    /// The `Unavailable` error of a wait that reached its limit with Redis out of reach.
    pub(crate) fn is_outage_at_deadline(&self) -> bool {
        self.is_unavailable() && self.repr.at_deadline
    }

    /// An `Unavailable` error whose command never left this process (the connection was
    /// refused): an outage to wait out and try again, with nothing to settle.
    pub(crate) fn is_unsent(&self) -> bool {
        self.is_unavailable() && self.repr.unsent
    }

    /// `true` for [`ErrorKind::Auth`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example() {
    /// if let Err(e) = crosslock::Client::connect("redis://:wrong@127.0.0.1:6379/0").await {
    ///     if e.is_auth() {
    ///         eprintln!("check the password: {e}");
    ///     }
    /// }
    /// # }
    /// ```
    pub fn is_auth(&self) -> bool {
        self.kind() == ErrorKind::Auth
    }

    /// `true` for [`ErrorKind::Cancelled`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use crosslock::{AcquireOptions, CancellationToken};
    /// let stop = CancellationToken::new();
    /// stop.cancel();
    /// let result = client.lock("orders:42")?.acquire_with(AcquireOptions::new().cancel(stop)).await;
    /// assert!(result.is_err_and(|e| e.is_cancelled()));
    /// # Ok(()) }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.kind() == ErrorKind::Cancelled
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.repr.kind)
            .field("message", &self.repr.message);
        if let Some(name) = &self.repr.lock_name {
            d.field("lock_name", name);
        }
        if let Some(holder) = &self.repr.holder {
            d.field("holder", holder);
        }
        if let Some(source) = &self.repr.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.repr
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// An error reply's detail without what Redis appends to an error raised in a script
/// (`script: <sha1>, on @user_script:15.`): that says where in crosslock's Lua, not what went
/// wrong.
fn without_script_noise(detail: &str) -> String {
    let detail = match detail.find("script: ") {
        Some(at) => &detail[..at],
        None => detail,
    };
    detail.trim().trim_end_matches([',', '.']).trim().to_owned()
}
