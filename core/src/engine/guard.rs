//! [`LockGuard`]: the proof that an owner holds a lock, which releases it when dropped, and what
//! it needs of its lock ([`GuardLock`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::owner::Owner;
use crate::runtime;

use super::family::{Family, LockCore};

/// Proof that an owner holds a lock; releases it when dropped.
///
/// `W` is what the acquire won: nothing for most locks, the fencing token (`u64`) for a
/// [`FencedLock`](crate::FencedLock) ([`token`](LockGuard::token)).
///
/// Prefer [`release`](Self::release), which reports errors; a dropped guard releases in the
/// background and can only log nothing. This client's next acquire of the lock waits for that
/// background release, so the same owner never finds its old hold still there.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// let guard = client.lock("orders:42")?.acquire().await?;
/// // ... the protected work ...
/// guard.release().await?; // or drop it: released in the background
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard<W = ()> {
    lock: Option<Arc<dyn GuardLock>>,
    owner: Owner,
    lost: CancellationToken,
    won: W,
}

/// What a guard needs of its lock (kept apart from [`AnyLock`](super::any_lock::AnyLock) to release
/// through the `Arc`).
trait GuardLock: Send + Sync {
    fn name(&self) -> &str;
    /// Decides from the clock whether the hold of `owner` is lost ([`Holds::is_lost`](
    /// super::holds::Holds::is_lost)), cancelling its token if it is.
    fn check_lost(&self, owner: Owner);
    fn release_as(self: Arc<Self>, owner: Owner) -> BoxFuture<'static, Result<bool>>;
    fn extend_as(&self, owner: Owner, lease: Duration) -> BoxFuture<'_, Result<()>>;
    /// Counts a release left to the background (see [`Settling`](super::settling::Settling)).
    fn settling(&self) -> Option<super::settling::Running>;
}

impl<P: Family> GuardLock for LockCore<P> {
    fn name(&self) -> &str {
        LockCore::name(self)
    }

    fn check_lost(&self, owner: Owner) {
        let _ = self.is_lost(owner);
    }

    fn release_as(self: Arc<Self>, owner: Owner) -> BoxFuture<'static, Result<bool>> {
        Box::pin(async move { LockCore::release_as(&self, owner).await })
    }

    fn extend_as(&self, owner: Owner, lease: Duration) -> BoxFuture<'_, Result<()>> {
        Box::pin(LockCore::extend_as(self, owner, lease))
    }

    fn settling(&self) -> Option<super::settling::Running> {
        let cx = self.client.state_now()?;
        Some(cx.settling.begin(self.name()))
    }
}

impl<P: Family> LockCore<P> {
    /// The guard of a hold of `owner` just won.
    pub(crate) fn guard<W>(self: &Arc<Self>, owner: Owner, won: W) -> LockGuard<W> {
        let lost = self.lost_token(owner).unwrap_or_default();
        LockGuard {
            lock: Some(self.clone()),
            owner,
            lost,
            won,
        }
    }
}

impl<W> LockGuard<W> {
    /// The owner holding the lock.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.lock("orders:42")?.acquire().await?;
    /// println!("held as {}", client.holder(guard.owner()));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// Cancelled as soon as the lock may be lost: a renewal found it gone (expired or
    /// force-unlocked), or no renewal was confirmed before its last confirmed lease ran out.
    /// Watch it next to the protected work and stop when it fires. Reading it checks the hold's
    /// deadline against the clock first (no round trip): once that deadline has passed the token
    /// returned is cancelled, even right after the process resumes from a pause, before the
    /// renewal loop has had a chance to run.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.lock("orders:42")?.acquire().await?;
    /// tokio::select! {
    ///     _ = guard.lost().cancelled() => println!("lost the lock: stop writing"),
    ///     _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
    /// }
    /// guard.release().await.ok();
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> &CancellationToken {
        if !self.lost.is_cancelled()
            && let Some(lock) = &self.lock
        {
            lock.check_lost(self.owner);
        }
        &self.lost
    }

    /// Whether the lock may be lost (as [`lost`](Self::lost) tells): decided on the spot from
    /// the clock, so it is true from the moment the last confirmed lease's deadline has passed,
    /// even if the renewal loop has not run since (a process paused past it).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.lock("orders:42")?.acquire().await?;
    /// if !guard.is_lost() {
    ///     // still ours
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.lost().is_cancelled()
    }

    /// Sets the lease of this hold to `lease` from now, as
    /// [`Lock::extend_as`](crate::Lock::extend_as) does for the guard's owner: a watchdog hold
    /// becomes a hold with that lease.
    ///
    /// # Errors
    ///
    /// As [`Lock::extend_as`](crate::Lock::extend_as):
    /// [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) when the hold is lost,
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) after a
    /// [`release_as`](crate::Lock::release_as) of its owner.
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::extend_as`](crate::Lock::extend_as): the hold counts as ending no later than
    /// the new lease until an answer says otherwise.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let options = crosslock::AcquireOptions::new().lease(Duration::from_secs(5));
    /// let guard = client.lock("orders:42")?.acquire_with(options).await?;
    /// // ... the work takes longer than planned ...
    /// guard.extend(Duration::from_secs(30)).await?; // now expires 30 s from here
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let lock = self
            .lock
            .as_ref()
            .expect("a guard holds its lock until released");
        lock.extend_as(self.owner, lease).await
    }

    /// Releases this hold.
    ///
    /// # Errors
    ///
    /// As [`Lock::release_as`](crate::Lock::release_as);
    /// [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) tells that exclusion was broken.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future does not stop the release: it completes in the background.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.lock("orders:42")?.acquire().await?;
    /// if let Err(e) = guard.release().await {
    ///     eprintln!("release failed: {e}"); // e.g. the lock was lost meanwhile
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<()> {
        let lock = self.lock.take().expect("released once");
        Box::pin(lock.release_as(self.owner)).await.map(|_| ())
    }
}

impl LockGuard<u64> {
    /// The fencing token this acquire got: strictly greater than every token handed out before
    /// on this lock, by any client in any language. Pass it to the resource the lock protects so
    /// it can refuse writes carrying an older token.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.fenced_lock("ledger")?.acquire().await?;
    /// println!("write with fencing token {}", guard.token());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn token(&self) -> u64 {
        self.won
    }
}

impl<W> Drop for LockGuard<W> {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            let owner = self.owner;
            // The owner's next acquire of this lock waits for this release.
            let running = lock.settling();
            runtime::spawn(async move {
                let _running = running;
                let _ = Box::pin(lock.release_as(owner)).await;
            });
        }
    }
}

impl<W: fmt::Debug> fmt::Debug for LockGuard<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock.as_ref().map(|l| l.name().to_owned()))
            .field("owner", &self.owner)
            .field("lost", &self.is_lost())
            .field("won", &self.won)
            .finish()
    }
}
