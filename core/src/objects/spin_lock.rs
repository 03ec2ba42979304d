//! [`SpinLock`]: Redisson's `RSpinLock`.

use std::sync::Arc;

use crate::client::Client;
use crate::engine::family::LockCore;
use crate::engine::{Backoff, Waiting};
use crate::error::Result;
use crate::kinds::LockKind;
use crate::scripts;

use super::hash::{Flavour, HashLock, LazySynced};
use super::{check_name, lock_type};

/// The spin lock: the RLock's hash, no channel, a back-off between attempts.
#[derive(Debug)]
pub(crate) struct Spin {
    backoff: Backoff,
}

impl Flavour for Spin {
    type Won = ();
    const KIND: LockKind = LockKind::SpinLock;
    const ACQUIRE: &'static LazySynced = &scripts::LOCK_ACQUIRE;
    const PUBLISHES: bool = false;

    /// With the default back-off (only waiting uses it).
    fn for_name(_name: &Arc<str>) -> Self {
        Spin {
            backoff: Backoff::default(),
        }
    }

    fn waiting(lock: &HashLock<Self>) -> Waiting {
        Waiting::Backoff(lock.flavour.backoff)
    }
}

lock_type! {
    /// A reentrant lock that never subscribes: waiters retry with a back-off instead. Stored
    /// exactly as Redisson's `RSpinLock` (the `RLock` hash; releases publish nothing).
    ///
    /// Use it where pub/sub is scarce or costly: many waiting processes (each subscription holds a
    /// slot on the server), a proxy or managed service without pub/sub, a big cluster where every
    /// publish is broadcast. The price is hand-off latency: a waiter notices a release at its next
    /// retry. The default back-off is Redisson's: 1 ms doubling (with jitter) up to 128 ms;
    /// [`Client::spin_lock_with`] takes another [`Backoff`].
    ///
    /// It excludes [`Lock`](crate::Lock) holders of the same name and the other way round, but its
    /// release wakes no `Lock` waiter (they retry when its lease would have run out).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.spin_lock("reports:nightly")?;
    /// let guard = lock.acquire().await?;   // retries 1 ms, 2 ms, 4 ms, … 128 ms apart
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct SpinLock(HashLock<Spin>) -> ();
    what = "spin lock";
}

impl Client {
    /// A [`SpinLock`] (Redisson `RSpinLock`) named `name`, with Redisson's default back-off.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.spin_lock("jobs")?.acquire().await?; // polls with back-off, no pub/sub
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn spin_lock(&self, name: &str) -> Result<SpinLock> {
        self.spin_lock_with(name, Backoff::default())
    }

    /// A [`SpinLock`] named `name` that pauses `backoff` between attempts.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name or a
    /// back-off outside 0 < initial ≤ max ≤ 1 h.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let lock = client.spin_lock_with("jobs", crosslock::Backoff::constant(Duration::from_millis(64)))?;
    /// assert_eq!(lock.name(), "jobs");
    /// # Ok(()) }
    /// ```
    pub fn spin_lock_with(&self, name: &str, backoff: Backoff) -> Result<SpinLock> {
        let name = check_name(self, name, "lock")?;
        backoff.validate(&name)?;
        Ok(SpinLock {
            core: LockCore::new(self.clone(), HashLock::with(name, Spin { backoff })),
        })
    }
}
