//! [`AnyLock`]: any lock of the RLock family behind one object-safe trait (what the bindings and
//! composite locks hold), with [`Acquisition`], what its acquire returns.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::kinds::LockKind;
use crate::options::AcquireOptions;
use crate::owner::Owner;
use crate::session::Client;

use super::family::{Family, LockCore};

/// One successful type-erased acquire (see [`AnyLock::acquire_as`]).
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use crosslock::{AcquireOptions, Owner};
/// let lock = client.fenced_lock("ledger")?.erased();
/// if let Some(won) = lock.acquire_as(Owner::new(1), &AcquireOptions::new()).await? {
///     println!("token {:?}", won.token);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Acquisition {
    /// The fencing token, for a [`FencedLock`](crate::FencedLock); `None` for other kinds.
    pub token: Option<u64>,
}

mod sealed {
    pub trait Sealed {}
}

/// Any lock of the RLock family, type-erased: what the bindings and composite locks hold.
///
/// Every lock type converts into one (`Arc<dyn AnyLock>`, via `erased()`). The methods are those
/// of [`Lock`](crate::Lock) for an explicit owner; see there for errors and cancel safety.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use std::sync::Arc;
/// use crosslock::{AcquireOptions, AnyLock, Owner};
///
/// let locks: Vec<Arc<dyn AnyLock>> = vec![client.lock("a")?.erased(), client.fair_lock("b")?.erased()];
/// let owner = Owner::new(1);
/// for lock in &locks {
///     lock.acquire_as(owner, &AcquireOptions::new()).await?;
/// }
/// for lock in &locks {
///     lock.release_as(owner).await?;
/// }
/// # Ok(()) }
/// ```
pub trait AnyLock: Send + Sync + fmt::Debug + sealed::Sealed {
    /// The lock's name.
    fn name(&self) -> &str;
    /// Which kind of lock it is.
    fn kind(&self) -> LockKind;
    /// The client it belongs to.
    fn client(&self) -> &Client;
    /// Acquires for `owner`; `Ok(None)` when the wait limit passed.
    fn acquire_as<'a>(
        &'a self,
        owner: Owner,
        options: &'a AcquireOptions,
    ) -> BoxFuture<'a, Result<Option<Acquisition>>>;
    /// Releases one hold of `owner`; `Ok(true)` when that fully released the lock.
    fn release_as(&self, owner: Owner) -> BoxFuture<'_, Result<bool>>;
    /// Sets the lease of the hold of `owner` to `lease` from now (see
    /// [`Lock::extend_as`](crate::Lock::extend_as)).
    fn extend_as(&self, owner: Owner, lease: Duration) -> BoxFuture<'_, Result<()>>;
    /// Deletes the lock whoever holds it; `Ok(true)` if it was locked.
    fn force_unlock(&self) -> BoxFuture<'_, Result<bool>>;
    /// Whether anyone holds it.
    fn is_locked(&self) -> BoxFuture<'_, Result<bool>>;
    /// How many times `owner` of this client holds it.
    fn hold_count_of(&self, owner: Owner) -> BoxFuture<'_, Result<u32>>;
    /// The time before it expires (`None`: not locked; `Duration::MAX`: no expiry).
    fn remaining_lease(&self) -> BoxFuture<'_, Result<Option<Duration>>>;
    /// The current holder strings.
    fn holders_now(&self) -> BoxFuture<'_, Result<Vec<String>>>;
    /// The lost-lock token of the hold of `owner`, if this process records one.
    fn lost_token(&self, owner: Owner) -> Option<CancellationToken>;
    /// Whether the hold of `owner` may be lost and was not released since: found so, or its
    /// deadline passed (decided from the clock on the spot).
    fn is_lost(&self, owner: Owner) -> bool;
    /// The [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) error an acquire that waited
    /// `waited` reports.
    fn timeout_error(&self, owner: Owner, waited: Duration) -> BoxFuture<'_, Error>;
}

/// `Arc<LockCore<P>>` as the erased lock (its release needs the `Arc`).
pub(crate) struct Erased<P: Family>(pub(crate) Arc<LockCore<P>>);

impl<P: Family> sealed::Sealed for Erased<P> {}

impl<P: Family> fmt::Debug for Erased<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<P: Family> AnyLock for Erased<P> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn kind(&self) -> LockKind {
        P::KIND
    }

    fn client(&self) -> &Client {
        &self.0.client
    }

    fn acquire_as<'a>(
        &'a self,
        owner: Owner,
        options: &'a AcquireOptions,
    ) -> BoxFuture<'a, Result<Option<Acquisition>>> {
        Box::pin(async move {
            let won = self.0.acquire_as(owner, options).await?;
            Ok(won.map(|w| Acquisition {
                token: P::token(&w),
            }))
        })
    }

    fn release_as(&self, owner: Owner) -> BoxFuture<'_, Result<bool>> {
        Box::pin(LockCore::release_as(&self.0, owner))
    }

    fn extend_as(&self, owner: Owner, lease: Duration) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.0.extend_as(owner, lease))
    }

    fn force_unlock(&self) -> BoxFuture<'_, Result<bool>> {
        Box::pin(self.0.force_unlock())
    }

    fn is_locked(&self) -> BoxFuture<'_, Result<bool>> {
        Box::pin(self.0.is_locked())
    }

    fn hold_count_of(&self, owner: Owner) -> BoxFuture<'_, Result<u32>> {
        Box::pin(self.0.hold_count_of(owner))
    }

    fn remaining_lease(&self) -> BoxFuture<'_, Result<Option<Duration>>> {
        Box::pin(self.0.remaining_lease())
    }

    fn holders_now(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        Box::pin(self.0.holders_now())
    }

    fn lost_token(&self, owner: Owner) -> Option<CancellationToken> {
        self.0.lost_token(owner)
    }

    fn is_lost(&self, owner: Owner) -> bool {
        self.0.is_lost(owner)
    }

    fn timeout_error(&self, owner: Owner, waited: Duration) -> BoxFuture<'_, Error> {
        Box::pin(self.0.timeout_error(owner, waited))
    }
}
