//! [`MultiLock`] and [`RedLock`]: Redisson's `RMultiLock` and `RRedLock`, composites of other
//! locks (of any kind, from any clients, so from different Redis deployments) with no keys of
//! their own.
//!
//! This file holds [`MultiLock`]; how its parts are acquired, extended and released is in
//! `parts`, its guard [`MultiGuard`] in `guard`, and [`RedLock`] in `red_lock`.

mod guard;
mod parts;
mod red_lock;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::any_lock::AnyLock;
use crate::engine::clock_drift;
use crate::error::{Error, ErrorKind, Result};
use crate::options::AcquireOptions;
use crate::owner::Owner;

pub use guard::MultiGuard;
pub use red_lock::RedLock;

use parts::{Parts, extend, release, release_outcome, too_many_lost};

/// All of several locks, or none: Redisson's `RMultiLock` (`getMultiLock(RLock...)`).
///
/// The parts may be locks of any kind, from any clients, so from different Redis deployments
/// (a lock per shard, per tenant, per resource). It has no keys of its own: each part is
/// stored and interoperates as its own kind. It acquires the parts in the order given (use one
/// order everywhere to avoid deadlocks); when one cannot be had, it gives back what it took and
/// starts over while its wait limit allows (Redisson's algorithm); when one fails (a server
/// down), the error names it and nothing is held. Released, it releases every part. The guard's
/// lost signal fires if any part may be lost.
///
/// [`MultiLock::majority`] makes the same composite with a majority quorum: a [`RedLock`].
///
/// # Examples
///
/// ```no_run
/// # async fn example(a: &crosslock::Client, b: &crosslock::Client) -> crosslock::Result<()> {
/// use crosslock::MultiLock;
/// let both = MultiLock::new(vec![a.lock("account:1")?.erased(), b.lock("account:2")?.erased()])?;
/// let guard = both.acquire().await?;   // both, or neither
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiLock {
    parts: Parts,
}

impl MultiLock {
    /// A multi-lock over `locks` (at least one), acquired in the order given, held once all of
    /// them are (Redisson's `getMultiLock(RLock...)`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for an empty list.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // shown with a MultiLock; a RedLock has the same method
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.fair_lock("b")?.erased()])?;
    /// assert_eq!(both.names(), ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn new(locks: Vec<Arc<dyn AnyLock>>) -> Result<Self> {
        Ok(MultiLock {
            parts: Parts::new(locks, false)?,
        })
    }

    /// A red lock over `locks` (at least one), acquired in the order given, held once a
    /// majority, `n/2 + 1` of the `n`, are: what [`RedLock::new`] makes, as a `MultiLock`
    /// (Redisson's `getRedLock(RLock...)`). Its messages call it a red lock.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for an empty list.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(clients: &[crosslock::Client]) -> crosslock::Result<()> {
    /// let parts = clients.iter().map(|c| Ok(c.lock("job:7")?.erased())).collect::<crosslock::Result<Vec<_>>>()?;
    /// let red = crosslock::MultiLock::majority(parts)?;
    /// red.acquire().await?.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn majority(locks: Vec<Arc<dyn AnyLock>>) -> Result<Self> {
        Ok(MultiLock {
            parts: Parts::new(locks, true)?,
        })
    }

    /// The names of its parts, in order.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // shown with a MultiLock; a RedLock has the same method
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// assert_eq!(both.names(), ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn names(&self) -> Vec<String> {
        self.parts
            .locks
            .iter()
            .map(|l| l.name().to_owned())
            .collect()
    }

    /// Waits until it is acquired by [`Owner::current`](crate::Owner::current), each part
    /// kept by its client's watchdog.
    ///
    /// # Errors
    ///
    /// A part's error that waiting cannot cure (a wrong type, a refused argument), naming the
    /// part; nothing is held then.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives back what was taken (each part's own cancel safety).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // shown with a MultiLock; a RedLock has the same method
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// let guard = both.acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<MultiGuard> {
        self.acquire_with(AcquireOptions::new()).await
    }

    /// Acquires with `options` (the wait limit covers the whole), failing with
    /// [`ErrorKind::Timeout`] when it passes, or with the error of the part that failed
    /// (a server down, say), naming it; nothing is held then.
    ///
    /// With a lease, each part is taken with `lease + wait` (so the first is still held
    /// when the last is taken) and expires between `lease` and `lease + wait` later.
    ///
    /// # Errors
    ///
    #[doc = concat!("As [`acquire`](", "MultiLock", "::acquire), and [`ErrorKind::Timeout`].")]
    ///
    /// # Cancel safety
    ///
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // shown with a MultiLock; a RedLock has the same method
    /// use std::time::Duration;
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// let guard = both.acquire_with(crosslock::AcquireOptions::new().wait(Duration::from_secs(2))).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    #[doc = concat!("As [`acquire`](", "MultiLock", "::acquire).")]
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<MultiGuard> {
        let owner = options.owner.unwrap_or_else(crate::Owner::current);
        let start = Instant::now();
        match self.parts.acquire_as(owner, &options).await? {
            Some(held) => Ok(MultiGuard::new(
                held,
                owner,
                self.parts.quorum,
                start.elapsed(),
                options.lease,
            )),
            None => Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "gave up waiting for the {} of {} after {:.3}s; nothing is held",
                    self.parts.what(),
                    self.parts.names(),
                    start.elapsed().as_secs_f64()
                ),
            )
            .with_waited(start.elapsed())),
        }
    }

    /// Acquires for an explicit `owner` without a guard (for the bindings and hand-offs):
    /// `Ok(None)` when the wait limit passed, else the validity (with a lease) and the
    /// parts held. Release with [`release_as`](Self::release_as).
    ///
    /// # Errors
    ///
    #[doc = concat!("As [`acquire`](", "MultiLock", "::acquire).")]
    ///
    /// # Cancel safety
    ///
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // shown with a MultiLock; a RedLock has the same method
    /// use crosslock::{AcquireOptions, Owner};
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// if both.acquire_as(Owner::new(9), &AcquireOptions::new()).await?.is_some() {
    ///     both.release_as(Owner::new(9)).await?;
    /// }
    /// # Ok(()) }
    /// ```
    #[doc = concat!("As [`acquire`](", "MultiLock", "::acquire).")]
    pub async fn acquire_as(
        &self,
        owner: Owner,
        options: &AcquireOptions,
    ) -> Result<Option<(Option<Duration>, Vec<String>)>> {
        let start = Instant::now();
        Ok(self.parts.acquire_as(owner, options).await?.map(|held| {
            let validity = options.lease.map(|l| {
                l.saturating_sub(start.elapsed())
                    .saturating_sub(clock_drift(l))
            });
            (
                validity,
                held.parts.iter().map(|l| l.name().to_owned()).collect(),
            )
        }))
    }

    /// Releases every part `owner` holds through this process: the parts its clients
    /// recorded as taken (for a [`RedLock`], the majority reached; a part never taken, on
    /// a server that is down, say, is not asked).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::LockLost`], naming a lost part, when the acquisition was lost (as
    /// [`is_lost`](Self::is_lost) tells); a red lock's lost minority is logged, not
    /// raised. Else the first part's error other than not-held, naming it (every part is
    /// tried).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some parts unreleased until their lease runs out.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // shown with a MultiLock; a RedLock has the same method
    /// use crosslock::{AcquireOptions, Owner};
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// both.acquire_as(Owner::new(9), &AcquireOptions::new()).await?;
    /// both.release_as(Owner::new(9)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_as(&self, owner: Owner) -> Result<()> {
        let taken = self.parts.taken_by(owner);
        let failed = release(&taken, owner).await;
        release_outcome(
            self.parts.what(),
            taken.len(),
            self.parts.quorum,
            failed,
            true,
        )
    }

    /// Sets the lease of every part `owner` holds to `lease` from now, as
    /// [`MultiGuard::extend`] does; answers the validity that leaves.
    ///
    /// # Errors
    ///
    /// As [`MultiGuard::extend`]; [`ErrorKind::NotHeld`] when `owner` holds none of the parts.
    ///
    /// # Cancel safety
    ///
    /// As [`MultiGuard::extend`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // shown with a MultiLock; a RedLock has the same method
    /// use std::time::Duration;
    /// use crosslock::{AcquireOptions, Owner};
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// both.acquire_as(Owner::new(9), &AcquireOptions::new()).await?;
    /// both.extend_as(Owner::new(9), Duration::from_secs(30)).await?;
    /// both.release_as(Owner::new(9)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend_as(&self, owner: Owner, lease: Duration) -> Result<Duration> {
        let taken = self.parts.taken_by(owner);
        extend(
            self.parts.what(),
            &taken,
            owner,
            lease,
            self.parts.quorum.min(taken.len().max(1)),
        )
        .await
    }

    /// Whether the acquisition of `owner` may be lost: fewer of the parts it took are still
    /// held than the quorum (any part lost, for a [`MultiLock`]; for a [`RedLock`], no
    /// longer a majority of all its parts). Each part decides from the clock on the spot
    /// (see [`Lock::is_lost`](crate::Lock::is_lost)); nothing is sent.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // shown with a MultiLock; a RedLock has the same method
    /// use crosslock::{AcquireOptions, Owner};
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// both.acquire_as(Owner::new(9), &AcquireOptions::new()).await?;
    /// assert!(!both.is_lost(Owner::new(9)));
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self, owner: Owner) -> bool {
        let taken = self.parts.taken_by(owner);
        too_many_lost(&taken, owner, self.parts.quorum)
    }

    /// As [`acquire_with`](Self::acquire_with), answering `Ok(None)` when the wait limit passed.
    ///
    /// # Errors
    ///
    #[doc = concat!("As [`acquire`](", "MultiLock", "::acquire).")]
    ///
    /// # Cancel safety
    ///
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // shown with a MultiLock; a RedLock has the same method
    /// let both = crosslock::MultiLock::new(vec![client.lock("a")?.erased(), client.lock("b")?.erased()])?;
    /// if let Some(guard) = both.try_acquire(crosslock::AcquireOptions::new()).await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    #[doc = concat!("As [`acquire`](", "MultiLock", "::acquire).")]
    pub async fn try_acquire(&self, options: AcquireOptions) -> Result<Option<MultiGuard>> {
        let owner = options.owner.unwrap_or_else(crate::Owner::current);
        let start = Instant::now();
        Ok(self.parts.acquire_as(owner, &options).await?.map(|held| {
            MultiGuard::new(
                held,
                owner,
                self.parts.quorum,
                start.elapsed(),
                options.lease,
            )
        }))
    }
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ty = if self.parts.red {
            "RedLock"
        } else {
            "MultiLock"
        };
        f.debug_struct(ty).field("parts", &self.names()).finish()
    }
}
