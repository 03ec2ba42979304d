//! The one error type of crosslock.

use std::fmt;
use std::time::Duration;

/// What went wrong, coarsely: the part of an [`Error`] a program branches on.
///
/// New kinds may be added, so match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A release (or a hold-count change) by someone who does not hold the lock. Redis is unchanged.
    NotHeld,
    /// The wait limit passed before the lock could be acquired.
    Timeout,
    /// The caller held the lock, but it is gone: it expired (for instance while Redis was out of
    /// reach) or someone force-unlocked it. Anything done since may have overlapped another holder.
    LockLost,
    /// Redis could not be reached, the connection dropped, or a reply did not come in time; also
    /// any use of a closed client.
    Unavailable,
    /// The lock's key holds a value of another type (a name collision). Nothing was modified.
    WrongType,
    /// An argument was out of range or malformed (an empty name, a negative duration, a bad URL).
    InvalidArgument,
    /// The wait was cancelled by the caller (an abort signal, Ctrl-C, a dropped future).
    Cancelled,
    /// Any other error reported by Redis; [`std::error::Error::source`] has the details.
    Redis,
}

impl ErrorKind {
    /// A stable upper-case code for this kind, the same string the Node binding exposes as
    /// `error.code` (`"NOT_HELD"`, `"TIMEOUT"`, …).
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::NotHeld => "NOT_HELD",
            ErrorKind::Timeout => "TIMEOUT",
            ErrorKind::LockLost => "LOCK_LOST",
            ErrorKind::Unavailable => "UNAVAILABLE",
            ErrorKind::WrongType => "WRONG_TYPE",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::Redis => "REDIS",
        }
    }
}

/// The error of every fallible crosslock operation.
///
/// Its [`kind`](Error::kind) says what happened; [`lock_name`](Error::lock_name) and
/// [`holder`](Error::holder) say which lock and which holder it concerns; the `Display` text says
/// all of that in a sentence, with what to do about it.
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
}

/// `Result<T, crosslock::Error>`.
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

    /// Classifies a Redis error met while working on `lock_name` (or on the connection, if `None`).
    pub(crate) fn from_redis(err: redis::RedisError, lock_name: Option<&str>) -> Self {
        let what = match lock_name {
            Some(name) => format!("lock '{name}'"),
            None => "the connection".to_owned(),
        };
        let this = if err.code() == Some("WRONGTYPE") {
            Error::new(
                ErrorKind::WrongType,
                format!(
                    "the key of {what} holds another type of value, not a lock hash; nothing was \
                     modified. Pick a lock name that no other data uses"
                ),
            )
        } else if matches!(
            err.code(),
            Some("LOADING" | "BUSY" | "READONLY" | "MASTERDOWN" | "TRYAGAIN" | "CLUSTERDOWN")
        ) {
            // The server is there but cannot serve writes right now (restarting, busy with a
            // script, failing over): a transient unavailability, not a refusal.
            Error::new(
                ErrorKind::Unavailable,
                format!(
                    "Redis cannot serve {what} right now ({err}); it is loading, busy or failing \
                     over: retry shortly"
                ),
            )
        } else if err.is_io_error()
            || err.is_timeout()
            || err.is_connection_refusal()
            || err.is_connection_dropped()
            || matches!(err.kind(), redis::ErrorKind::Io)
        {
            Error::new(
                ErrorKind::Unavailable,
                format!(
                    "Redis did not answer while working on {what} ({err}); check that the server \
                     is up and reachable, then retry"
                ),
            )
        } else {
            Error::new(ErrorKind::Redis, format!("Redis refused an operation on {what}: {err}"))
        };
        let this = this.with_source(err);
        match lock_name {
            Some(name) => this.with_lock(name),
            None => this,
        }
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.repr.kind
    }

    /// The lock this error concerns, when it concerns one.
    pub fn lock_name(&self) -> Option<&str> {
        self.repr.lock_name.as_deref()
    }

    /// The holder string (`<client-uuid>:<n>`) of the caller this error concerns, when known.
    pub fn holder(&self) -> Option<&str> {
        self.repr.holder.as_deref()
    }

    /// How long the caller waited before giving up ([`ErrorKind::Timeout`] and
    /// [`ErrorKind::Cancelled`]).
    pub fn waited(&self) -> Option<Duration> {
        self.repr.waited
    }

    /// The human-readable message without the kind prefix.
    pub fn message(&self) -> &str {
        &self.repr.message
    }

    /// `true` for [`ErrorKind::NotHeld`].
    pub fn is_not_held(&self) -> bool {
        self.kind() == ErrorKind::NotHeld
    }

    /// `true` for [`ErrorKind::Timeout`].
    pub fn is_timeout(&self) -> bool {
        self.kind() == ErrorKind::Timeout
    }

    /// `true` for [`ErrorKind::LockLost`].
    pub fn is_lock_lost(&self) -> bool {
        self.kind() == ErrorKind::LockLost
    }

    /// `true` for [`ErrorKind::Unavailable`].
    pub fn is_unavailable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }

    /// `true` for [`ErrorKind::Cancelled`].
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
        d.field("kind", &self.repr.kind).field("message", &self.repr.message);
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
        self.repr.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}
