//! [`RedLock`]: Redisson's `RRedLock`, a [`MultiLock`] with a majority quorum.

use std::fmt;
use std::sync::Arc;

use crate::engine::any_lock::AnyLock;
use crate::error::Result;

use super::MultiLock;

/// A majority of locks on independent Redis masters: Redisson's `RRedLock`
/// (`getRedLock(RLock...)`), the Redlock algorithm.
///
/// As [`MultiLock`], but it is acquired once `n/2 + 1` of the `n` parts are held (each part
/// waits at most its share of what is left of the wait limit), and with a lease the guard
/// reports the validity time `lease − time to acquire − clock drift`
/// ([`MultiGuard::validity`](super::MultiGuard::validity)).
///
/// **A lost minority.** A red lock stands while it still holds a majority of its parts:
/// its lost signal (and `is_lost`) turns true once fewer than `n/2 + 1` of its parts are
/// still held (one lost part of three when only two were taken; two of three taken). With
/// a lost minority it is not lost, and its release succeeds: it releases the parts that
/// remain and logs the lost one (a warning), since exclusion held all along (the same rule
/// that decided it was acquired). `lost`, the signal and `release` always agree.
///
/// Redisson deprecates `RRedLock` ("use RLock or RFencedLock instead"), because a majority of
/// expiring locks does not make a pause-proof lock (a holder paused past its validity cannot
/// tell). crosslock keeps it for compatibility; for correctness under pauses prefer a
/// [`FencedLock`](crate::FencedLock): its tokens let the protected resource refuse a stale
/// holder's writes, which no lock alone can do.
///
/// # Examples
///
/// ```no_run
/// # async fn example(clients: &[crosslock::Client]) -> crosslock::Result<()> {
/// use std::time::Duration;
/// use crosslock::{AcquireOptions, RedLock};
/// let parts = clients.iter().map(|c| Ok(c.lock("job:7")?.erased())).collect::<crosslock::Result<Vec<_>>>()?;
/// let red = RedLock::new(parts)?;
/// let guard = red.acquire_with(AcquireOptions::new().lease(Duration::from_secs(10))).await?;
/// println!("valid for {:?}", guard.validity());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedLock(MultiLock);

impl RedLock {
    /// A red lock over `locks` (at least one), acquired in the order given: a
    /// [`MultiLock::majority`]. Every method is the [`MultiLock`]'s (through `Deref`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty list.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let red = crosslock::RedLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased(), client.lock("c")?.erased()])?;
    /// assert_eq!(red.names(), ["a", "b", "c"]);
    /// # Ok(()) }
    /// ```
    pub fn new(locks: Vec<Arc<dyn AnyLock>>) -> Result<Self> {
        MultiLock::majority(locks).map(RedLock)
    }
}

impl std::ops::Deref for RedLock {
    type Target = MultiLock;

    fn deref(&self) -> &MultiLock {
        &self.0
    }
}

impl From<RedLock> for MultiLock {
    fn from(red: RedLock) -> MultiLock {
        red.0
    }
}

impl fmt::Debug for RedLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
