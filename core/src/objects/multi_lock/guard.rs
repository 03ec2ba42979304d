//! [`MultiGuard`]: the guard of a [`MultiLock`](super::MultiLock) or
//! [`RedLock`](super::RedLock) acquisition.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::engine::any_lock::AnyLock;
use crate::engine::clock_drift;
use crate::error::Result;
use crate::owner::Owner;

use super::parts::{Held, extend, release, release_later, release_outcome, too_many_lost};

/// A guard of a [`MultiLock`](super::MultiLock) or [`RedLock`](super::RedLock) acquisition;
/// releases every part when dropped.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use crosslock::MultiLock;
/// let both = MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
/// let guard = both.acquire().await?; // every part held, or none
/// println!("holding {:?}", guard.parts());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the locks at once"]
pub struct MultiGuard {
    parts: Option<Vec<Arc<dyn AnyLock>>>,
    owner: Owner,
    lost: CancellationToken,
    watch: CancellationToken,
    validity: Option<Duration>,
    /// How many of the parts must still be held for the acquisition to stand.
    quorum: usize,
}

impl MultiGuard {
    pub(super) fn new(
        held: Held,
        owner: Owner,
        quorum: usize,
        acquired_in: Duration,
        lease: Option<Duration>,
    ) -> Self {
        let lost = CancellationToken::new();
        let watch = CancellationToken::new();
        let tokens: Vec<CancellationToken> = held
            .parts
            .iter()
            .filter_map(|l| l.lost_token(owner))
            .collect();
        let spare = held.parts.len().saturating_sub(quorum);
        {
            let (lost, watch) = (lost.clone(), watch.clone());
            crate::runtime::spawn(async move {
                // Lost once more parts are lost than the quorum can spare.
                let mut pending: Vec<_> = tokens
                    .into_iter()
                    .map(|t| Box::pin(t.cancelled_owned()))
                    .collect();
                let mut gone = 0;
                while !pending.is_empty() {
                    tokio::select! {
                        (_, i, rest) = futures_util::future::select_all(pending) => {
                            let _ = i;
                            pending = rest;
                            gone += 1;
                            if gone > spare {
                                lost.cancel();
                                return;
                            }
                        }
                        _ = watch.cancelled() => return,
                    }
                }
            });
        }
        let validity = lease.map(|l| l.saturating_sub(acquired_in).saturating_sub(clock_drift(l)));
        MultiGuard {
            parts: Some(held.parts),
            owner,
            lost,
            watch,
            validity,
            quorum,
        }
    }

    /// The owner holding the parts.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// let guard = both.acquire().await?;
    /// println!("held as {}", client.holder(guard.owner()));
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// Cancelled as soon as too many parts may be lost (any part for a
    /// [`MultiLock`](super::MultiLock); for a [`RedLock`](super::RedLock), once fewer than a
    /// majority of its parts are still held). Reading it checks each part's deadline against the
    /// clock first (no round trip), as [`LockGuard::lost`](crate::LockGuard::lost) does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// let guard = both.acquire().await?;
    /// assert!(!guard.lost().is_cancelled());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> &CancellationToken {
        if !self.lost.is_cancelled()
            && let Some(parts) = &self.parts
            && too_many_lost(parts, self.owner, self.quorum)
        {
            self.lost.cancel();
        }
        &self.lost
    }

    /// For an acquisition with a lease: how long the locks are still certainly held, measured
    /// when acquired: `lease − time to acquire − clock drift` (Redlock's validity time). `None`
    /// without a lease (the watchdog keeps the parts).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let red = crosslock::RedLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased(), client.lock("c")?.erased()])?;
    /// let guard = red.acquire_with(crosslock::AcquireOptions::new().lease(Duration::from_secs(10))).await?;
    /// println!("certainly held for {:?}", guard.validity());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn validity(&self) -> Option<Duration> {
        self.validity
    }

    /// The names of the parts held (for a [`RedLock`](super::RedLock), the majority that was
    /// reached).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let red = crosslock::RedLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased(), client.lock("c")?.erased()])?;
    /// let guard = red.acquire().await?;
    /// assert!(guard.parts().len() >= 2); // a majority
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn parts(&self) -> Vec<String> {
        self.parts
            .iter()
            .flatten()
            .map(|l| l.name().to_owned())
            .collect()
    }

    /// Sets the lease of every part held to `lease` from now (see
    /// [`Lock::extend_as`](crate::Lock::extend_as)): parts kept by the watchdog become parts with
    /// that lease. [`validity`](Self::validity) becomes `lease − time to extend − clock drift`.
    ///
    /// # Errors
    ///
    /// As a release: fine while the quorum of parts was extended (all for a
    /// [`MultiLock`](super::MultiLock), a majority for a [`RedLock`](super::RedLock), whose failed
    /// minority is logged); else [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) naming a lost
    /// part, or the first part's error.
    ///
    /// # Cancel safety
    ///
    /// As each part's extend: dropping the future may leave some parts extended in Redis and
    /// not others; each part counts as ending no later than the new lease until its answer is
    /// known.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// let mut guard = both.acquire_with(crosslock::AcquireOptions::new().lease(Duration::from_secs(5))).await?;
    /// guard.extend(Duration::from_secs(30)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&mut self, lease: Duration) -> Result<()> {
        let parts = self.parts.as_deref().unwrap_or_default();
        let validity = extend("multi-lock", parts, self.owner, lease, self.quorum).await?;
        self.validity = Some(validity);
        Ok(())
    }

    /// Releases every part held.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::LockLost`](crate::ErrorKind::LockLost), naming a lost part, when the
    /// acquisition was lost (as [`lost`](Self::lost) tells: any part of a
    /// [`MultiLock`](super::MultiLock), all but a minority of a [`RedLock`](super::RedLock)'s
    /// parts); a red lock's lost minority is logged, not raised (the red lock was held, and what
    /// remained is released). Else the first part's error, naming it, if some part could not be
    /// released (every part is tried; those failing expire after their lease).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some parts unreleased until their lease runs out.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// both.acquire().await?.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<()> {
        let parts = self.parts.take().expect("released once");
        self.watch.cancel();
        let failed = release(&parts, self.owner).await;
        release_outcome("multi-lock", parts.len(), self.quorum, failed, false)
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        self.watch.cancel();
        if let Some(parts) = self.parts.take() {
            release_later(parts, self.owner);
        }
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiGuard")
            .field("parts", &self.parts())
            .field("owner", &self.owner)
            .finish()
    }
}
