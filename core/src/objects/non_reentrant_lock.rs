//! [`NonReentrantLock`]: Redisson's non-reentrant lock.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::engine::family::{Family, Info, LockCore};
use crate::engine::holds::{HoldKey, Suffix};
use crate::engine::{Attempt, Protocol, Request, Waiting, WakePolicy};
use crate::error::{Error, ErrorKind, Result};
use crate::kinds::LockKind;
use crate::owner::Owner;
use crate::scripts;
use crate::session::Ctx;

use super::{Hash, check_name, lock_type, ms};

/// The non-reentrant protocol: the RLock's hash and channel; a second acquire by the holder is
/// refused.
#[derive(Debug)]
pub(crate) struct NonReentrant {
    hash: Hash,
}

impl Protocol for NonReentrant {
    type Won = ();

    fn name(&self) -> &Arc<str> {
        &self.hash.name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        Waiting::PubSub {
            channel: self.hash.channel().to_owned(),
            wake: WakePolicy::Lock,
            linger: None,
        }
    }

    async fn attempt(self: Arc<Self>, cx: Arc<Ctx>, request: Request) -> Result<Attempt<()>> {
        self.hash
            .attempt(
                &cx,
                &scripts::NON_REENTRANT_ACQUIRE,
                &[&ms(request.lease), &&*request.holder],
            )
            .await
    }

    async fn settle(&self, cx: &Ctx, holder: &str, recorded: usize) -> Result<Option<()>> {
        self.hash.settle(cx, holder, recorded).await
    }

    async fn give_back(
        self: Arc<Self>,
        cx: Arc<Ctx>,
        holder: Arc<str>,
        lease_after: Duration,
    ) -> Result<()> {
        self.hash
            .unlock(&cx, &holder, lease_after, None, false, false)
            .await
            .map(|_| ())
    }
}

impl Family for NonReentrant {
    const KIND: LockKind = LockKind::NonReentrantLock;

    fn for_name(name: Arc<str>) -> Self {
        NonReentrant {
            hash: Hash::new(name),
        }
    }

    fn precheck(&self, cx: &Ctx, owner: Owner) -> Result<()> {
        refuse_reentry(cx, &self.hash.name, owner, "non-reentrant lock")
    }

    async fn unlock(
        &self,
        cx: &Ctx,
        holder: &str,
        lease_after: Duration,
        retry_of: Option<usize>,
    ) -> Result<Option<bool>> {
        self.hash
            .unlock(cx, holder, lease_after, retry_of, false, false)
            .await
    }

    async fn release_all(self: Arc<Self>, cx: Arc<Ctx>, holder: Arc<str>) -> Result<()> {
        self.hash
            .unlock(&cx, &holder, Duration::ZERO, None, true, false)
            .await
            .map(|_| ())
    }

    async fn force_unlock(&self, cx: &Ctx) -> Result<bool> {
        self.hash.force_unlock(cx, false).await
    }

    async fn info(&self, cx: &Ctx, holder: &str) -> Result<Info> {
        self.hash.info(cx, holder).await
    }

    fn token(_won: &()) -> Option<u64> {
        None
    }
}

/// The refusal of a non-reentrant lock's second acquire by its holder (a [`NonReentrantLock`] or
/// a [`NonReentrantFairLock`](crate::NonReentrantFairLock)), made from what this process records
/// before anything is sent; `what` is the kind in the message.
pub(crate) fn refuse_reentry(cx: &Ctx, name: &Arc<str>, owner: Owner, what: &str) -> Result<()> {
    let key = HoldKey {
        name: name.clone(),
        owner,
        suffix: Suffix::None,
    };
    if cx.holds.count(&key) > 0 && !cx.holds.is_lost(&key) {
        return Err(Error::new(
            ErrorKind::NonReentrant,
            format!(
                "{what} '{name}' is already held by {}: acquiring it again would wait for itself \
                 forever; release it first (Redis is unchanged)",
                cx.holder(owner, Suffix::None)
            ),
        ));
    }
    Ok(())
}

lock_type! {
    /// A lock its holder cannot re-enter: a second acquire by the same owner fails at once with
    /// [`ErrorKind::NonReentrant`], naming the lock, instead of
    /// waiting for itself forever. Stored exactly as Redisson's non-reentrant lock (the `RLock`
    /// hash and channel; Redisson's script answers `NON_REENTRANT_REACQUIRE`), so it excludes
    /// `Lock` holders of the same name.
    ///
    /// Pick it when re-entering would be a bug: the error finds the bug, a reentrant lock would
    /// hide it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.non_reentrant_lock("payments:7")?;
    /// let guard = lock.acquire().await?;
    /// let again = lock.acquire().await.unwrap_err();
    /// assert_eq!(again.kind(), crosslock::ErrorKind::NonReentrant);
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct NonReentrantLock(NonReentrant) -> ();
    what = "non-reentrant lock";
}

impl Client {
    /// A [`NonReentrantLock`] named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.non_reentrant_lock("orders:42")?;
    /// let guard = lock.acquire().await?;
    /// assert!(lock.try_acquire().await.is_err()); // a second acquire by its holder is refused
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn non_reentrant_lock(&self, name: &str) -> Result<NonReentrantLock> {
        let name = check_name(self, name, "lock")?;
        Ok(NonReentrantLock {
            core: LockCore::new(self.clone(), NonReentrant::for_name(name)),
        })
    }
}
